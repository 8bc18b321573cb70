/* MLP activations on the GPU: GELU (tanh) and SwiGLU, forward and backward,
 * fp32 and bf16 storage; the twins of kernels/cpu/act.h, with the same
 * per-element math (kernels/math.h) and the same write/accumulate contract. */
#ifndef PX_KERNELS_CUDA_ACT_H
#define PX_KERNELS_CUDA_ACT_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out = gelu(inp). Writes out; out may alias inp. */
px_status px_kc_gelu_fwd(float *out,       // (n)
                         const float *inp, // (n)
                         int64_t n, cudaStream_t stream);

/* dinp += dout * gelu'(inp). ACCUMULATES; dinp must not alias dout. */
px_status px_kc_gelu_bwd(float *dinp,       // (n)
                         const float *dout, // (n)
                         const float *inp,  // (n)
                         int64_t n, cudaStream_t stream);

/* out = silu(gate) * up. Writes out. */
px_status px_kc_swiglu_fwd(float *out,        // (N, F)
                           const float *gate, // (N, F)
                           const float *up,   // (N, F)
                           int64_t n, cudaStream_t stream); // N * F elements

/* dgate += dout * up * silu'(gate), dup += dout * silu(gate). ACCUMULATES. */
px_status px_kc_swiglu_bwd(float *dgate,      // (N, F)
                           float *dup,        // (N, F)
                           const float *dout, // (N, F)
                           const float *gate, // (N, F)
                           const float *up,   // (N, F)
                           int64_t n, cudaStream_t stream); // N * F elements

/* bf16 storage, fp32 math; each result rounded once to bf16 (the accumulating
 * backwards read the bf16 gradient, add in fp32 and round). */
px_status px_kc_gelu_fwd_bf16(px_bf16 *out,       // (n)
                              const px_bf16 *inp, // (n)
                              int64_t n, cudaStream_t stream);
px_status px_kc_gelu_fwd_fp16(px_fp16 *out,       // (n)
                              const px_fp16 *inp, // (n)
                              int64_t n, cudaStream_t stream);
px_status px_kc_gelu_bwd_bf16(px_bf16 *dinp,       // (n)
                              const px_bf16 *dout, // (n)
                              const px_bf16 *inp,  // (n)
                              int64_t n, cudaStream_t stream);
px_status px_kc_gelu_bwd_fp16(px_fp16 *dinp,       // (n)
                              const px_fp16 *dout, // (n)
                              const px_fp16 *inp,  // (n)
                              int64_t n, cudaStream_t stream);
px_status px_kc_swiglu_fwd_bf16(px_bf16 *out,        // (N, F)
                                const px_bf16 *gate, // (N, F)
                                const px_bf16 *up,   // (N, F)
                                int64_t n, cudaStream_t stream);
px_status px_kc_swiglu_fwd_fp16(px_fp16 *out,        // (N, F)
                                const px_fp16 *gate, // (N, F)
                                const px_fp16 *up,   // (N, F)
                                int64_t n, cudaStream_t stream);
px_status px_kc_swiglu_bwd_bf16(px_bf16 *dgate,      // (N, F)
                                px_bf16 *dup,        // (N, F)
                                const px_bf16 *dout, // (N, F)
                                const px_bf16 *gate, // (N, F)
                                const px_bf16 *up,   // (N, F)
                                int64_t n, cudaStream_t stream);
px_status px_kc_swiglu_bwd_fp16(px_fp16 *dgate,      // (N, F)
                                px_fp16 *dup,        // (N, F)
                                const px_fp16 *dout, // (N, F)
                                const px_fp16 *gate, // (N, F)
                                const px_fp16 *up,   // (N, F)
                                int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
