/* GELU and SwiGLU activations over contiguous buffers, split over the
 * kernels' threads (kernels/cpu/par.h): each element on its own, so the
 * bits do not depend on the split. The loops vectorise (PX_K_SIMD) on the
 * fast forms of kernels/math.h (px_gelu_fast: e^x, no tanhf). */
#include "kernels/cpu/act.h"

#include <stddef.h>

#include "kernels/cpu/par.h"
#include "kernels/math.h"

/* Elements per thread below which a kernel stays on one thread. */
#define ACT_GRAIN 32768

typedef struct {
  float *out, *out2;
  const float *a, *b, *c;
} act_args;

PX_K_SIMD static void gelu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a; /* may alias out */
  for (int64_t i = lo; i < hi; i++) out[i] = px_gelu_fast(a[i]);
}

void px_k_gelu_fwd(float *out, const float *inp, int64_t n) {
  act_args x = {out, NULL, inp, NULL, NULL};
  px_k_parallel_for(n, ACT_GRAIN, gelu_fwd_range, &x);
}

PX_K_SIMD static void gelu_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a, *b = x->b;
  for (int64_t i = lo; i < hi; i++) out[i] += a[i] * px_gelu_grad_fast(b[i]);
}

void px_k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t n) {
  act_args x = {dinp, NULL, dout, inp, NULL};
  px_k_parallel_for(n, ACT_GRAIN, gelu_bwd_range, &x);
}

PX_K_SIMD static void dgelu_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a;
  for (int64_t i = lo; i < hi; i++) out[i] *= px_gelu_grad_fast(a[i]);
}

void px_k_dgelu_inplace(float *d, const float *inp, int64_t n) {
  act_args x = {d, NULL, inp, NULL, NULL};
  px_k_parallel_for(n, ACT_GRAIN, dgelu_range, &x);
}

PX_K_SIMD static void swiglu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a, *b = x->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] * px_sigmoid_fast(a[i]) * b[i];
}

void px_k_swiglu_fwd(float *out, const float *gate, const float *up, int64_t n) {
  act_args x = {out, NULL, gate, up, NULL};
  px_k_parallel_for(n, ACT_GRAIN, swiglu_fwd_range, &x);
}

/* silu'(g) = s (1 + g (1 - s)), s = sigmoid(g), as px_silu_grad. */
PX_K_SIMD static void swiglu_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *dg = x->out, *du = x->out2;
  const float *a = x->a, *b = x->b, *c = x->c;
  for (int64_t i = lo; i < hi; i++) {
    const float g = b[i], s = px_sigmoid_fast(g);
    dg[i] += a[i] * c[i] * (s * (1.0f + g * (1.0f - s)));
    du[i] += a[i] * (g * s);
  }
}

void px_k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
  act_args x = {dgate, dup, dout, gate, up};
  px_k_parallel_for(n, ACT_GRAIN, swiglu_bwd_range, &x);
}
