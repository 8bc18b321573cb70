/* Dropout on the GPU with the counter-based RNG of kernels/math.h: element i's
 * mask is px_dropout_keep(seed, offset + i, p), bit for bit the CPU's mask. */
#ifndef PX_KERNELS_CUDA_DROPOUT_H
#define PX_KERNELS_CUDA_DROPOUT_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mask[i] = keep(seed, offset + i, p); out[i] = inp[i] * mask[i] / (1 - p);
 * p = 0 copies, p >= 1 drops everything. Writes out and mask; out may alias inp. */
px_status px_kc_dropout_fwd(float *out,       // (n)
                            uint8_t *mask,    // (n)
                            const float *inp, // (n)
                            int64_t n, float p, uint64_t seed, uint64_t offset, cudaStream_t stream);

/* dinp += dout * mask / (1 - p). ACCUMULATES; dinp must not alias dout. */
px_status px_kc_dropout_bwd(float *dinp,         // (n)
                            const float *dout,   // (n)
                            const uint8_t *mask, // (n)
                            int64_t n, float p, cudaStream_t stream);

/* bf16 storage; the same masks; inp * scale computed in fp32 and rounded once. */
px_status px_kc_dropout_fwd_bf16(px_bf16 *out,       // (n)
                                 uint8_t *mask,      // (n)
                                 const px_bf16 *inp, // (n)
                                 int64_t n, float p, uint64_t seed, uint64_t offset, cudaStream_t stream);
px_status px_kc_dropout_fwd_fp16(px_fp16 *out,       // (n)
                                 uint8_t *mask,      // (n)
                                 const px_fp16 *inp, // (n)
                                 int64_t n, float p, uint64_t seed, uint64_t offset, cudaStream_t stream);
px_status px_kc_dropout_bwd_bf16(px_bf16 *dinp,       // (n)
                                 const px_bf16 *dout, // (n)
                                 const uint8_t *mask, // (n)
                                 int64_t n, float p, cudaStream_t stream);
px_status px_kc_dropout_bwd_fp16(px_fp16 *dinp,       // (n)
                                 const px_fp16 *dout, // (n)
                                 const uint8_t *mask, // (n)
                                 int64_t n, float p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
