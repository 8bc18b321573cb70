/* Dropout with a counter-based RNG: whether element i is kept is a pure
 * function of (seed, offset + i), so it never depends on thread or rank layout. */
#ifndef PX_KERNELS_CPU_DROPOUT_H
#define PX_KERNELS_CPU_DROPOUT_H

#include <stdint.h>

/* mask[i] = px_dropout_keep(seed, offset + i, p) (1 kept, 0 dropped);
 * out[i] = inp[i] * mask[i] / (1 - p). p = 0 is an exact copy (all kept);
 * p >= 1 drops everything (out = 0). Writes out and mask; out may alias inp.
 * A tensor computed in pieces gets the same mask when each piece passes the
 * offset of its first element. */
void px_k_dropout_fwd(float *out,       // (n)
                      uint8_t *mask,    // (n)
                      const float *inp, // (n)
                      int64_t n, float p, uint64_t seed, uint64_t offset);

/* dinp += dout * mask / (1 - p). ACCUMULATES (the caller zeroes dinp); dinp
 * must not alias dout. */
void px_k_dropout_bwd(float *dinp,         // (n)
                      const float *dout,   // (n)
                      const uint8_t *mask, // (n)
                      int64_t n, float p);

#endif
