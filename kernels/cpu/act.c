/* GELU and SwiGLU activations over contiguous buffers, split over the
 * kernels' threads (kernels/cpu/par.h): each element on its own, so the
 * bits do not depend on the split. */
#include "kernels/cpu/act.h"

#include <stddef.h>

#include "kernels/cpu/par.h"
#include "kernels/math.h"

/* Elements per thread below which a kernel stays on one thread (a thread's start costs ~20 us). */
#define ACT_GRAIN 65536

typedef struct {
  float *out, *out2;
  const float *a, *b, *c;
} act_args;

static void gelu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t i = lo; i < hi; i++) x->out[i] = px_gelu(x->a[i]);
}

void px_k_gelu_fwd(float *out, const float *inp, int64_t n) {
  act_args x = {out, NULL, inp, NULL, NULL};
  px_k_parallel_for(n, ACT_GRAIN, gelu_fwd_range, &x);
}

static void gelu_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t i = lo; i < hi; i++) x->out[i] += x->a[i] * px_gelu_grad(x->b[i]);
}

void px_k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t n) {
  act_args x = {dinp, NULL, dout, inp, NULL};
  px_k_parallel_for(n, ACT_GRAIN, gelu_bwd_range, &x);
}

static void dgelu_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t i = lo; i < hi; i++) x->out[i] *= px_gelu_grad(x->a[i]);
}

void px_k_dgelu_inplace(float *d, const float *inp, int64_t n) {
  act_args x = {d, NULL, inp, NULL, NULL};
  px_k_parallel_for(n, ACT_GRAIN, dgelu_range, &x);
}

static void swiglu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t i = lo; i < hi; i++) x->out[i] = px_silu(x->a[i]) * x->b[i];
}

void px_k_swiglu_fwd(float *out, const float *gate, const float *up, int64_t n) {
  act_args x = {out, NULL, gate, up, NULL};
  px_k_parallel_for(n, ACT_GRAIN, swiglu_fwd_range, &x);
}

static void swiglu_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t i = lo; i < hi; i++) {
    float g = x->b[i];
    x->out[i] += x->a[i] * x->c[i] * px_silu_grad(g);
    x->out2[i] += x->a[i] * px_silu(g);
  }
}

void px_k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
  act_args x = {dgate, dup, dout, gate, up};
  px_k_parallel_for(n, ACT_GRAIN, swiglu_bwd_range, &x);
}
