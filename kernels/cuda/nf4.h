/* NF4 on the GPU: a frozen weight stored as kernels/cpu/nf4.h's px_k_nf4_pack
 * writes it (bitsandbytes' 4-bit codes with double-quantised absmaxes) decoded
 * into fp32, bf16 or fp16: the twin of px_k_nf4_unpack, bit for bit (the same
 * fp32 operations in the same order, no fused multiply-add), then rounded to
 * nearest even for a 16-bit output. */
#ifndef PX_KERNELS_CUDA_NF4_H
#define PX_KERNELS_CUDA_NF4_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The decode's two tables, which the caller fills from kernels/cpu/nf4.h (kernels/cuda links nothing of
 * kernels/cpu): px_nf4_values and px_k_nf4_dynamic_map. */
typedef struct {
  float values[16]; /* each 4-bit code's value */
  float map[256];   /* each 8-bit absmax code's value */
} px_kc_nf4_tables;

/* out[i] = values[code i] x (map[absmax code of i's block] x its group's constant + offset), as px_k_nf4_unpack,
 * stored as dtype (FP32, BF16 or FP16). storage: px_k_nf4_storage_bytes(n) bytes, at any alignment. n <= 0 does
 * nothing. */
px_status px_kc_nf4_unpack(void *out,              // (n) dtype
                           const uint8_t *storage, // (px_k_nf4_storage_bytes(n))
                           px_dtype dtype, int64_t n, const px_kc_nf4_tables *tables, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
