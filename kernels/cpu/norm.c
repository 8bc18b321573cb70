/* LayerNorm and RMSNorm, forward and backward (llm.c's formulation). Rows
 * split over the kernels' threads (kernels/cpu/par.h), the row sums in
 * double over fixed lanes (PX_K_SIMD vectorises them); the backward's weight
 * and bias gradients, sums over rows, in a second pass split by columns,
 * rows in order. No result depends on the thread count. */
#include "kernels/cpu/norm.h"

#include <math.h>
#include <stddef.h>

#include "kernels/cpu/par.h"

/* Lanes of the row sums. */
#define NORM_LANES 8
/* Elements per thread below which a kernel stays on one thread. */
#define NORM_GRAIN 32768

static double lanes_sum(const double *acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum of x[j] (sq false) or x[j]^2 (sq true) in double, element j into lane j mod 8. */
PX_K_SIMD static double row_sum(const float *x, int64_t c, int sq) {
  double acc[NORM_LANES] = {0};
  int64_t j = 0;
  if (sq) {
    for (; j + NORM_LANES <= c; j += NORM_LANES)
      for (int k = 0; k < NORM_LANES; k++) acc[k] += (double)x[j + k] * x[j + k];
    for (int k = 0; j < c; j++, k++) acc[k] += (double)x[j] * x[j];
  } else {
    for (; j + NORM_LANES <= c; j += NORM_LANES)
      for (int k = 0; k < NORM_LANES; k++) acc[k] += x[j + k];
    for (int k = 0; j < c; j++, k++) acc[k] += x[j];
  }
  return lanes_sum(acc);
}

/* sum of (x[j] - m)^2 in double, lanes as row_sum. */
PX_K_SIMD static double row_var_sum(const float *x, double m, int64_t c) {
  double acc[NORM_LANES] = {0};
  int64_t j = 0;
  for (; j + NORM_LANES <= c; j += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) acc[k] += ((double)x[j + k] - m) * ((double)x[j + k] - m);
  for (int k = 0; j < c; j++, k++) acc[k] += ((double)x[j] - m) * ((double)x[j] - m);
  return lanes_sum(acc);
}

typedef struct {
  float *out, *dinp, *dweight, *dbias, *mean, *rstd;
  const float *inp, *dout, *weight, *bias, *smean, *srstd;
  int64_t n, c;
  float eps;
} norm_args;

PX_K_SIMD static void layernorm_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  norm_args *a = ctx;
  const int64_t c = a->c;
  const float *w = a->weight, *b = a->bias;
  for (int64_t i = lo; i < hi; i++) {
    const float *x = a->inp + i * c;
    float *o = a->out + i * c;
    double m = row_sum(x, c, 0) / (double)c;
    double v = row_var_sum(x, m, c) / (double)c;
    const float mf = (float)m, r = (float)(1.0 / sqrt(v + (double)a->eps));
    if (b)
      for (int64_t j = 0; j < c; j++) o[j] = (x[j] - mf) * r * w[j] + b[j];
    else
      for (int64_t j = 0; j < c; j++) o[j] = (x[j] - mf) * r * w[j];
    if (a->mean) a->mean[i] = mf;
    if (a->rstd) a->rstd[i] = r;
  }
}

void px_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                        const float *bias, int64_t n, int64_t c, float eps) {
  norm_args a = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .weight = weight, .bias = bias, .c = c, .eps = eps};
  px_k_parallel_for(n, c > 0 ? (NORM_GRAIN + c - 1) / c : 1, layernorm_fwd_range, &a);
}

/* A row's two backward means, mean(dnorm) and mean(dnorm * xhat) with
 * dnorm = w g and xhat = (x - m) r, summed in double over the lanes. */
PX_K_SIMD static void row_grad_means(const float *x, const float *g, const float *w, float m, float r, int64_t c,
                                     float *md, float *mdx) {
  double sd[NORM_LANES] = {0}, sdx[NORM_LANES] = {0};
  int64_t j = 0;
  for (; j + NORM_LANES <= c; j += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) {
      const float xhat = (x[j + k] - m) * r, dnorm = w[j + k] * g[j + k];
      sd[k] += dnorm;
      sdx[k] += (double)dnorm * xhat;
    }
  for (int k = 0; j < c; j++, k++) {
    const float xhat = (x[j] - m) * r, dnorm = w[j] * g[j];
    sd[k] += dnorm;
    sdx[k] += (double)dnorm * xhat;
  }
  *md = (float)(lanes_sum(sd) / (double)c);
  *mdx = (float)(lanes_sum(sdx) / (double)c);
}

/* The rows' data gradients: LayerNorm's, or RMSNorm's without means (a->smean NULL: m = 0 and no
 * mean(dnorm) term; x - 0 and a - 0 are exact, so the same bits as its own formula). */
PX_K_SIMD static void norm_dx_range(void *ctx, int64_t lo, int64_t hi) {
  norm_args *a = ctx;
  const int64_t c = a->c;
  const float *w = a->weight;
  for (int64_t i = lo; i < hi; i++) {
    const float *x = a->inp + i * c, *g = a->dout + i * c;
    float *dx = a->dinp + i * c;
    const float m = a->smean ? a->smean[i] : 0.0f, r = a->srstd[i];
    float md, mdx;
    row_grad_means(x, g, w, m, r, c, &md, &mdx);
    if (!a->smean) md = 0.0f;
    for (int64_t j = 0; j < c; j++) {
      const float xhat = (x[j] - m) * r, dnorm = w[j] * g[j];
      dx[j] += r * (dnorm - md - xhat * mdx);
    }
  }
}

/* Columns [lo, hi) of the weight and bias gradients, rows in order. */
PX_K_SIMD static void layernorm_dw_range(void *ctx, int64_t lo, int64_t hi) {
  norm_args *a = ctx;
  const int64_t c = a->c;
  float *dw = a->dweight, *db = a->dbias;
  for (int64_t i = 0; i < a->n; i++) {
    const float *x = a->inp + i * c, *g = a->dout + i * c;
    const float m = a->smean[i], r = a->srstd[i];
    if (dw)
      for (int64_t j = lo; j < hi; j++) dw[j] += g[j] * ((x[j] - m) * r);
    if (db)
      for (int64_t j = lo; j < hi; j++) db[j] += g[j];
  }
}

void px_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int64_t n, int64_t c) {
  norm_args a = {.dinp = dinp, .dweight = dweight, .dbias = dbias, .dout = dout, .inp = inp, .weight = weight,
                 .smean = mean, .srstd = rstd, .n = n, .c = c};
  px_k_parallel_for(n, c > 0 ? (NORM_GRAIN + c - 1) / c : 1, norm_dx_range, &a);
  if (dweight || dbias) px_k_parallel_for(c, n > 0 ? (NORM_GRAIN + n - 1) / n : 1, layernorm_dw_range, &a);
}

PX_K_SIMD static void rmsnorm_fwd_range(void *ctx, int64_t lo, int64_t hi) {
  norm_args *a = ctx;
  const int64_t c = a->c;
  const float *w = a->weight;
  for (int64_t i = lo; i < hi; i++) {
    const float *x = a->inp + i * c;
    float *o = a->out + i * c;
    const float r = (float)(1.0 / sqrt(row_sum(x, c, 1) / (double)c + (double)a->eps));
    for (int64_t j = 0; j < c; j++) o[j] = x[j] * r * w[j];
    if (a->rstd) a->rstd[i] = r;
  }
}

void px_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int64_t n, int64_t c,
                      float eps) {
  norm_args a = {.out = out, .rstd = rstd, .inp = inp, .weight = weight, .c = c, .eps = eps};
  px_k_parallel_for(n, c > 0 ? (NORM_GRAIN + c - 1) / c : 1, rmsnorm_fwd_range, &a);
}

PX_K_SIMD static void rmsnorm_dw_range(void *ctx, int64_t lo, int64_t hi) {
  norm_args *a = ctx;
  const int64_t c = a->c;
  float *dw = a->dweight;
  for (int64_t i = 0; i < a->n; i++) {
    const float *x = a->inp + i * c, *g = a->dout + i * c;
    const float r = a->srstd[i];
    for (int64_t j = lo; j < hi; j++) dw[j] += g[j] * (x[j] * r);
  }
}

void px_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int64_t n, int64_t c) {
  norm_args a = {.dinp = dinp, .dweight = dweight, .dout = dout, .inp = inp, .weight = weight, .srstd = rstd,
                 .n = n, .c = c};
  px_k_parallel_for(n, c > 0 ? (NORM_GRAIN + c - 1) / c : 1, norm_dx_range, &a);
  if (dweight) px_k_parallel_for(c, n > 0 ? (NORM_GRAIN + n - 1) / n : 1, rmsnorm_dw_range, &a);
}
