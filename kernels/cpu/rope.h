/* Rotary position embedding (Hugging Face Llama "rotate_half" convention:
 * element i pairs with i + D/2) on (B, T, H, D), forward and backward. */
#ifndef PX_KERNELS_CPU_ROPE_H
#define PX_KERNELS_CPU_ROPE_H

#include <stdint.h>

#include "kernels/math.h"

/* Rotates each pair (x_i, x_{i+D/2}) of row (b, t, h) by angle
 * (pos0 + t) * f_i, f_i the pair's frequency (px_rope_inv_freq: theta^(-2i/D),
 * or YaRN's, or Llama 3.1's): out_i = c (x_i cos - x_{i+D/2} sin), out_{i+D/2} = c (x_{i+D/2}
 * cos + x_i sin), c the rope's concentration. pos0 is the position of the first
 * row (a sequence shard starts mid-sequence). A rope of fewer dims than D
 * (px_rope.dims: GPT-NeoX's partial rotary) rotates the leading ones, pairs
 * (x_i, x_{i+dims/2}) at its dims' frequencies, and passes the rest through.
 * Writes out; out may alias inp (in place). D must be even. */
void px_k_rope_fwd(float *out,       // (B, T, H, D)
                   const float *inp, // (B, T, H, D)
                   int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r);

/* Backward: the inverse rotation of dout. ACCUMULATES into dinp (the caller
 * zeroes it); dinp must not alias dout. */
void px_k_rope_bwd(float *dinp,       // (B, T, H, D)
                   const float *dout, // (B, T, H, D)
                   int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, const px_rope *r);

/* Multi-head latent attention's decoupled RoPE (DeepSeek-V2/V3), in place on
 * rows at positions pos0 .. pos0 + T - 1: each query head's last dr values
 * are rotated (its first dn are not), and k, which arrives as the latent's
 * up projection (B, T, Hkv * dn) of the heads' non-rotated parts, widens to
 * (B, T, Hkv, dn + dr), each head's last dr the one rotated RoPE key k_pe of
 * its row. The query heads, both parts, come out times q_scale: the softmax's
 * scale over 1 / sqrt(dn + dr) (DeepSeek's YaRN mscale squared), which scaling
 * q applies exactly. dr even. */
void px_k_mla_rope_fwd(float *q,          // (B, T, Hq, dn + dr)
                       float *k,          // (B, T, Hkv * dn) in, (B, T, Hkv, dn + dr) out
                       const float *k_pe, // (B, T, dr)
                       int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t dn, int64_t dr, int64_t pos0,
                       const px_rope *r, float q_scale);

/* Backward, in place: dq's rotated parts rotated back; dk narrows to its
 * heads' non-rotated parts (B, T, Hkv * dn), and dk_pe is written: the sum
 * over the heads of their rotated parts' inverse rotation; dq times q_scale. */
void px_k_mla_rope_bwd(float *dq,    // (B, T, Hq, dn + dr)
                       float *dk,    // (B, T, Hkv, dn + dr) in, (B, T, Hkv * dn) out
                       float *dk_pe, // (B, T, dr)
                       int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t dn, int64_t dr, int64_t pos0,
                       const px_rope *r, float q_scale);

#endif
