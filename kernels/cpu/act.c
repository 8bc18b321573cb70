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
  float *out, *out2, *out3;
  const float *a, *b, *c, *w; /* w: (rows) weights of the row-weighted kernels */
  int64_t F;                  /* their row width */
} act_args;

PX_K_SIMD static void gelu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a; /* may alias out */
  for (int64_t i = lo; i < hi; i++) out[i] = px_gelu_fast(a[i]);
}

void px_k_gelu_fwd(float *out, const float *inp, int64_t n) {
  act_args x = {.out = out, .a = inp};
  px_k_parallel_for(n, ACT_GRAIN, gelu_fwd_range, &x);
}

PX_K_SIMD static void gelu_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a, *b = x->b;
  for (int64_t i = lo; i < hi; i++) out[i] += a[i] * px_gelu_grad_fast(b[i]);
}

void px_k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t n) {
  act_args x = {.out = dinp, .a = dout, .b = inp};
  px_k_parallel_for(n, ACT_GRAIN, gelu_bwd_range, &x);
}

PX_K_SIMD static void dgelu_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a;
  for (int64_t i = lo; i < hi; i++) out[i] *= px_gelu_grad_fast(a[i]);
}

void px_k_dgelu_inplace(float *d, const float *inp, int64_t n) {
  act_args x = {.out = d, .a = inp};
  px_k_parallel_for(n, ACT_GRAIN, dgelu_range, &x);
}

PX_K_SIMD static void swiglu_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  float *out = x->out;
  const float *a = x->a, *b = x->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] * px_sigmoid_fast(a[i]) * b[i];
}

void px_k_swiglu_fwd(float *out, const float *gate, const float *up, int64_t n) {
  act_args x = {.out = out, .a = gate, .b = up};
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
  act_args x = {.out = dgate, .out2 = dup, .a = dout, .b = gate, .c = up};
  px_k_parallel_for(n, ACT_GRAIN, swiglu_bwd_range, &x);
}

/* ---- row-weighted activations (a row at a time; its dot product in row order) ---- */

static void rows_scale_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t r = lo; r < hi; r++)
    for (int64_t c = 0; c < x->F; c++) x->out[r * x->F + c] *= x->w[r];
}

void px_k_rows_scale(float *x, const float *w, int64_t rows, int64_t F) {
  act_args a = {.out = x, .w = w, .F = F};
  px_k_parallel_for(rows, ACT_GRAIN / (F > 0 ? F : 1) + 1, rows_scale_range, &a);
}

static void swiglu_weighted_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t r = lo; r < hi; r++) {
    float dot = 0.0f;
    const float w = x->w[r];
    for (int64_t i = r * x->F; i < (r + 1) * x->F; i++) {
      const float dy = x->a[i], g = x->b[i], u = x->c[i], s = px_sigmoid_fast(g);
      dot += g * s * u * dy;
      x->out[i] += w * dy * u * (s * (1.0f + g * (1.0f - s)));
      x->out2[i] += w * dy * (g * s);
    }
    x->out3[r] += dot;
  }
}

void px_k_swiglu_weighted_bwd(float *dgate, float *dup, float *dw, const float *dout, const float *gate,
                              const float *up, const float *w, int64_t rows, int64_t F) {
  act_args x = {.out = dgate, .out2 = dup, .out3 = dw, .a = dout, .b = gate, .c = up, .w = w, .F = F};
  px_k_parallel_for(rows, ACT_GRAIN / (F > 0 ? F : 1) + 1, swiglu_weighted_bwd_range, &x);
}

static void gelu_weighted_bwd_range(void *ctx, int64_t lo, int64_t hi) {
  act_args *x = ctx;
  for (int64_t r = lo; r < hi; r++) {
    float dot = 0.0f;
    const float w = x->w[r];
    for (int64_t i = r * x->F; i < (r + 1) * x->F; i++) {
      dot += px_gelu_fast(x->b[i]) * x->a[i];
      x->out[i] += w * x->a[i] * px_gelu_grad_fast(x->b[i]);
    }
    x->out3[r] += dot;
  }
}

void px_k_gelu_weighted_bwd(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int64_t rows,
                            int64_t F) {
  act_args x = {.out = dinp, .out3 = dw, .a = dout, .b = inp, .w = w, .F = F};
  px_k_parallel_for(rows, ACT_GRAIN / (F > 0 ? F : 1) + 1, gelu_weighted_bwd_range, &x);
}
