/* fp8 on the GPU: the amax of a tensor, fp32 / bf16 -> E4M3 / E5M2 codes with
 * a scale (round to nearest even, saturating), codes -> values, and the
 * transpose of a code matrix (cuBLASLt's fp8 GEMMs take K-major operands
 * only). The twins of kernels/cpu/fp8.h, bit for bit: the encoder is integer
 * arithmetic on the float's bits (no __nv_fp8 intrinsics, which the
 * emulator does not have and whose rounding we would have to trust). */
#ifndef PX_KERNELS_CUDA_FP8_H
#define PX_KERNELS_CUDA_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *out = the largest |x[i]|, NaNs skipped (0 for none), as px_k_fp8_amax;
 * x of dtype FP32 or BF16. Stays on the device. Uses a stream-ordered
 * temporary (cudaMallocAsync) of at most 4 KiB. n <= 0 writes 0. */
px_status px_kc_fp8_amax(float *out,     // (1) device
                         const void *x,  // (n) dtype
                         px_dtype dtype, int64_t n, cudaStream_t stream);

/* q[i] = encode(x[i] scale) in E5M2 (e5m2) or E4M3, as px_k_fp8_quantize:
 * the product rounded to fp32 first, then to the nearest code (ties to
 * even), beyond the largest finite value (infinities too) the largest, NaN
 * the NaN code 0x7f. x of dtype FP32 or BF16. */
px_status px_kc_fp8_quantize(uint8_t *q,     // (n)
                             const void *x,  // (n) dtype
                             px_dtype dtype, int64_t n, float scale, bool e5m2, cudaStream_t stream);

/* y[i] = decode(q[i]) / scale (an fp32 division, as px_k_fp8_dequantize),
 * stored as dtype (FP32, or BF16 rounded to nearest even). */
px_status px_kc_fp8_dequantize(void *y,          // (n) dtype
                               const uint8_t *q, // (n)
                               px_dtype dtype, int64_t n, float scale, bool e5m2, cudaStream_t stream);

/* y[i] = decode(codes[i]) / scale in E4M3, as px_k_fp8_dequantize, from a frozen weight's fp8 storage (exec/params.h's
 * px_param_frozen_encode): n codes, then the fp32 scale (4 bytes, read on the device at any alignment). Stored as
 * dtype: FP32, BF16 or FP16 (rounded to nearest even). */
px_status px_kc_fp8_unpack(void *y,                // (n) dtype
                           const uint8_t *storage, // (n + 4)
                           px_dtype dtype, int64_t n, cudaStream_t stream);

/* out = in^T: a (rows, cols) row-major byte matrix into (cols, rows). */
px_status px_kc_fp8_transpose(uint8_t *out,      // (cols, rows)
                              const uint8_t *in, // (rows, cols)
                              int64_t rows, int64_t cols, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
