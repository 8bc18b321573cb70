/* LayerNorm (weight, optional bias) and RMSNorm over the last dimension C,
 * forward and backward; row statistics are reduced in double (fixed lanes,
 * so the same bits on any thread count). */
#ifndef PX_KERNELS_CPU_NORM_H
#define PX_KERNELS_CPU_NORM_H

#include <stdint.h>

/* out = (inp - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps)
 * with the biased variance. Writes out, and mean and rstd (either may be NULL)
 * for the backward. bias may be NULL. */
void px_k_layernorm_fwd(float *out,          // (N, C)
                        float *mean,         // (N) or NULL
                        float *rstd,         // (N) or NULL
                        const float *inp,    // (N, C)
                        const float *weight, // (C)
                        const float *bias,   // (C) or NULL
                        int64_t n, int64_t c, float eps);

/* Backward from the saved mean and rstd. ACCUMULATES into dinp, dweight and
 * dbias (the caller zeroes them); dweight and dbias may be NULL to skip. */
void px_k_layernorm_bwd(float *dinp,         // (N, C)
                        float *dweight,      // (C) or NULL
                        float *dbias,        // (C) or NULL
                        const float *dout,   // (N, C)
                        const float *inp,    // (N, C)
                        const float *weight, // (C)
                        const float *mean,   // (N)
                        const float *rstd,   // (N)
                        int64_t n, int64_t c);

/* out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps) per row.
 * Writes out and rstd (rstd may be NULL). */
void px_k_rmsnorm_fwd(float *out,          // (N, C)
                      float *rstd,         // (N) or NULL
                      const float *inp,    // (N, C)
                      const float *weight, // (C)
                      int64_t n, int64_t c, float eps);

/* Backward from the saved rstd. ACCUMULATES into dinp and dweight (dweight may
 * be NULL); the caller zeroes them. */
void px_k_rmsnorm_bwd(float *dinp,         // (N, C)
                      float *dweight,      // (C) or NULL
                      const float *dout,   // (N, C)
                      const float *inp,    // (N, C)
                      const float *weight, // (C)
                      const float *rstd,   // (N)
                      int64_t n, int64_t c);

#endif
