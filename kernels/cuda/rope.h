/* Rotary position embedding on the GPU (Hugging Face "rotate_half": element i
 * pairs with i + D/2) on (B, T, H, D); the twin of kernels/cpu/rope.h. Angles
 * are computed in double (px_rope_angle), the rotation in float, as on the CPU. */
#ifndef PX_KERNELS_CUDA_ROPE_H
#define PX_KERNELS_CUDA_ROPE_H

#include <stdint.h>

#include "kernels/cuda/common.h"
#include "kernels/math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rotates each pair (x_i, x_{i+D/2}) of row (b, t, h) by (pos0 + t) times its frequency (px_rope_inv_freq),
 * cos and sin times the rope's concentration.
 * Writes out; out may alias inp. D must be even. */
px_status px_kc_rope_fwd(float *out,       // (B, T, H, D)
                         const float *inp, // (B, T, H, D)
                         int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                         cudaStream_t stream);

/* The inverse rotation of dout. ACCUMULATES into dinp; dinp must not alias dout. */
px_status px_kc_rope_bwd(float *dinp,       // (B, T, H, D)
                         const float *dout, // (B, T, H, D)
                         int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                         cudaStream_t stream);

/* bf16 storage, fp32 rotation, one rounding per result. */
px_status px_kc_rope_fwd_bf16(px_bf16 *out,       // (B, T, H, D)
                              const px_bf16 *inp, // (B, T, H, D)
                              int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                              cudaStream_t stream);
px_status px_kc_rope_fwd_fp16(px_fp16 *out,       // (B, T, H, D)
                              const px_fp16 *inp, // (B, T, H, D)
                              int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                              cudaStream_t stream);
px_status px_kc_rope_bwd_bf16(px_bf16 *dinp,       // (B, T, H, D)
                              const px_bf16 *dout, // (B, T, H, D)
                              int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                              cudaStream_t stream);
px_status px_kc_rope_bwd_fp16(px_fp16 *dinp,       // (B, T, H, D)
                              const px_fp16 *dout, // (B, T, H, D)
                              int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
