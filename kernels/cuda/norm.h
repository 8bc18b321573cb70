/* LayerNorm and RMSNorm over the last dimension C on the GPU, forward and
 * backward; the twins of kernels/cpu/norm.h. Row statistics in fp32 (the CPU
 * reduces in double); weight and bias gradients by deterministic column sums. */
#ifndef PX_KERNELS_CUDA_NORM_H
#define PX_KERNELS_CUDA_NORM_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out = (inp - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps),
 * biased variance. Writes out, mean and rstd (either may be NULL); bias may be NULL. */
px_status px_kc_layernorm_fwd(float *out,          // (N, C)
                              float *mean,         // (N) or NULL
                              float *rstd,         // (N) or NULL
                              const float *inp,    // (N, C)
                              const float *weight, // (C)
                              const float *bias,   // (C) or NULL
                              int64_t n, int64_t c, float eps, cudaStream_t stream);

/* Backward from the saved mean and rstd. ACCUMULATES into dinp, dweight and
 * dbias; dweight and dbias may be NULL to skip. */
px_status px_kc_layernorm_bwd(float *dinp,         // (N, C)
                              float *dweight,      // (C) or NULL
                              float *dbias,        // (C) or NULL
                              const float *dout,   // (N, C)
                              const float *inp,    // (N, C)
                              const float *weight, // (C)
                              const float *mean,   // (N)
                              const float *rstd,   // (N)
                              int64_t n, int64_t c, cudaStream_t stream);

/* out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps). Writes out
 * and rstd (rstd may be NULL). */
px_status px_kc_rmsnorm_fwd(float *out,          // (N, C)
                            float *rstd,         // (N) or NULL
                            const float *inp,    // (N, C)
                            const float *weight, // (C)
                            int64_t n, int64_t c, float eps, cudaStream_t stream);

/* Backward from the saved rstd. ACCUMULATES into dinp and dweight (dweight may be NULL). */
px_status px_kc_rmsnorm_bwd(float *dinp,         // (N, C)
                            float *dweight,      // (C) or NULL
                            const float *dout,   // (N, C)
                            const float *inp,    // (N, C)
                            const float *weight, // (C)
                            const float *rstd,   // (N)
                            int64_t n, int64_t c, cudaStream_t stream);

/* bf16 activations and weights; statistics (mean, rstd) stay fp32, and so do
 * the parameter gradients dweight and dbias (they accumulate over
 * micro-batches, which bf16 cannot do faithfully). dinp is bf16. */
px_status px_kc_layernorm_fwd_bf16(px_bf16 *out,          // (N, C)
                                   float *mean,           // (N) or NULL
                                   float *rstd,           // (N) or NULL
                                   const px_bf16 *inp,    // (N, C)
                                   const px_bf16 *weight, // (C)
                                   const px_bf16 *bias,   // (C) or NULL
                                   int64_t n, int64_t c, float eps, cudaStream_t stream);
px_status px_kc_layernorm_fwd_fp16(px_fp16 *out,          // (N, C)
                                   float *mean,           // (N) or NULL
                                   float *rstd,           // (N) or NULL
                                   const px_fp16 *inp,    // (N, C)
                                   const px_fp16 *weight, // (C)
                                   const px_fp16 *bias,   // (C) or NULL
                                   int64_t n, int64_t c, float eps, cudaStream_t stream);
px_status px_kc_layernorm_bwd_bf16(px_bf16 *dinp,         // (N, C)
                                   float *dweight,        // (C) or NULL
                                   float *dbias,          // (C) or NULL
                                   const px_bf16 *dout,   // (N, C)
                                   const px_bf16 *inp,    // (N, C)
                                   const px_bf16 *weight, // (C)
                                   const float *mean,     // (N)
                                   const float *rstd,     // (N)
                                   int64_t n, int64_t c, cudaStream_t stream);
px_status px_kc_layernorm_bwd_fp16(px_fp16 *dinp,         // (N, C)
                                   float *dweight,        // (C) or NULL
                                   float *dbias,          // (C) or NULL
                                   const px_fp16 *dout,   // (N, C)
                                   const px_fp16 *inp,    // (N, C)
                                   const px_fp16 *weight, // (C)
                                   const float *mean,     // (N)
                                   const float *rstd,     // (N)
                                   int64_t n, int64_t c, cudaStream_t stream);
px_status px_kc_rmsnorm_fwd_bf16(px_bf16 *out,          // (N, C)
                                 float *rstd,           // (N) or NULL
                                 const px_bf16 *inp,    // (N, C)
                                 const px_bf16 *weight, // (C)
                                 int64_t n, int64_t c, float eps, cudaStream_t stream);
px_status px_kc_rmsnorm_fwd_fp16(px_fp16 *out,          // (N, C)
                                 float *rstd,           // (N) or NULL
                                 const px_fp16 *inp,    // (N, C)
                                 const px_fp16 *weight, // (C)
                                 int64_t n, int64_t c, float eps, cudaStream_t stream);
px_status px_kc_rmsnorm_bwd_bf16(px_bf16 *dinp,         // (N, C)
                                 float *dweight,        // (C) or NULL
                                 const px_bf16 *dout,   // (N, C)
                                 const px_bf16 *inp,    // (N, C)
                                 const px_bf16 *weight, // (C)
                                 const float *rstd,     // (N)
                                 int64_t n, int64_t c, cudaStream_t stream);
px_status px_kc_rmsnorm_bwd_fp16(px_fp16 *dinp,         // (N, C)
                                 float *dweight,        // (C) or NULL
                                 const px_fp16 *dout,   // (N, C)
                                 const px_fp16 *inp,    // (N, C)
                                 const px_fp16 *weight, // (C)
                                 const float *rstd,     // (N)
                                 int64_t n, int64_t c, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
