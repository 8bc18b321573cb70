/* Rotary position embedding (Hugging Face Llama "rotate_half" convention:
 * element i pairs with i + D/2) on (B, T, H, D), forward and backward. */
#ifndef PX_KERNELS_CPU_ROPE_H
#define PX_KERNELS_CPU_ROPE_H

#include <stdint.h>

/* Rotates each pair (x_i, x_{i+D/2}) of row (b, t, h) by angle
 * (pos0 + t) * theta^(-2i/D): out_i = x_i cos - x_{i+D/2} sin,
 * out_{i+D/2} = x_{i+D/2} cos + x_i sin. pos0 is the position of the first row
 * (a sequence shard starts mid-sequence). Writes out; out may alias inp
 * (in place). D must be even. */
void px_k_rope_fwd(float *out,       // (B, T, H, D)
                   const float *inp, // (B, T, H, D)
                   int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, float theta);

/* Backward: the inverse rotation of dout. ACCUMULATES into dinp (the caller
 * zeroes it); dinp must not alias dout. */
void px_k_rope_bwd(float *dinp,       // (B, T, H, D)
                   const float *dout, // (B, T, H, D)
                   int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, float theta);

#endif
