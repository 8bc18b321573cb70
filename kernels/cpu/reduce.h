/* Whole-buffer helpers (split over the kernels' threads, kernels/cpu/par.h):
 * sum of squares (gradient-norm clipping), scaling,
 * elementwise add and the residual accumulate. */
#ifndef PX_KERNELS_CPU_REDUCE_H
#define PX_KERNELS_CPU_REDUCE_H

#include <stdint.h>

/* sum of x[i]^2 in double: fixed blocks (a function of n alone), each over
 * eight lanes, the blocks added in order; the same bits on any thread count. */
double px_k_sumsq(const float *x, // (n)
                  int64_t n);

/* x *= s, in place. */
void px_k_scale(float *x, // (n)
                int64_t n, float s);

/* out = a + b. Writes out; out may alias a or b. */
void px_k_add(float *out,     // (n)
              const float *a, // (n)
              const float *b, // (n)
              int64_t n);

/* out += inp: the residual connection, and the backward of a branch into the
 * residual stream. ACCUMULATES; out must not partially overlap inp. */
void px_k_acc(float *out,       // (n)
              const float *inp, // (n)
              int64_t n);

#endif
