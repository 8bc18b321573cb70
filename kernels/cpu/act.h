/* MLP activations: GELU (tanh approximation, GPT-2) and SwiGLU (Llama), forward
 * and backward; the per-element math lives in kernels/math.h. */
#ifndef PX_KERNELS_CPU_ACT_H
#define PX_KERNELS_CPU_ACT_H

#include <stdint.h>

/* out = gelu(inp). Writes out; out may alias inp. */
void px_k_gelu_fwd(float *out,       // (n)
                   const float *inp, // (n)
                   int64_t n);

/* dinp += dout * gelu'(inp). ACCUMULATES (the caller zeroes dinp); dinp must
 * not alias dout. */
void px_k_gelu_bwd(float *dinp,       // (n)
                   const float *dout, // (n)
                   const float *inp,  // (n)
                   int64_t n);

/* d = d * gelu'(inp): a data gradient turned into the pre-activation's in
 * place (the GELU epilogue of the GEMM that made d). */
void px_k_dgelu_inplace(float *d,         // (n)
                        const float *inp, // (n)
                        int64_t n);

/* out = silu(gate) * up, elementwise. Writes out. */
void px_k_swiglu_fwd(float *out,        // (N, F)
                     const float *gate, // (N, F)
                     const float *up,   // (N, F)
                     int64_t n);        // N * F elements

/* dgate += dout * up * silu'(gate), dup += dout * silu(gate). ACCUMULATES (the
 * caller zeroes dgate and dup). */
void px_k_swiglu_bwd(float *dgate,      // (N, F)
                     float *dup,        // (N, F)
                     const float *dout, // (N, F)
                     const float *gate, // (N, F)
                     const float *up,   // (N, F)
                     int64_t n);        // N * F elements

/* x[r] *= w[r]: the rows of an activation's output times their weights (a MoE layer's experts: each routed row's
 * gate, as Megatron-Core's weighted_bias_swiglu_impl). Writes x in place. */
void px_k_rows_scale(float *x,       // (N, F)
                     const float *w, // (N)
                     int64_t rows, int64_t F);

/* The backward of y = swiglu(gate, up) w (a weight a row): dgate, dup += (as px_k_swiglu_bwd) from w dout;
 * dw[r] += swiglu(gate, up)[r] . dout[r]. ACCUMULATES. */
void px_k_swiglu_weighted_bwd(float *dgate,      // (N, F)
                              float *dup,        // (N, F)
                              float *dw,         // (N)
                              const float *dout, // (N, F)
                              const float *gate, // (N, F)
                              const float *up,   // (N, F)
                              const float *w,    // (N)
                              int64_t rows, int64_t F);

/* The backward of y = gelu(inp) w (a weight a row): dinp += w dout gelu'(inp); dw[r] += gelu(inp)[r] . dout[r].
 * ACCUMULATES. */
void px_k_gelu_weighted_bwd(float *dinp,       // (N, F)
                            float *dw,         // (N)
                            const float *dout, // (N, F)
                            const float *inp,  // (N, F)
                            const float *w,    // (N)
                            int64_t rows, int64_t F);

#endif
