/* CPU kernels (fp32) against tiny double-precision reference implementations:
 * forwards compared directly, backwards against central finite differences of
 * L = sum(out * R) taken on the double reference; plus the sharding identities. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/act.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/flash.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/par.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embed.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/rope.h"
#include "kernels/math.h"
#include "tests/testutil.h"

/* Tolerances, as |got - want| <= rtol |want| + atol with inputs of order 1:
 * - FWD: an fp32 kernel against the double reference. fp32 rounds at 2^-24 ~
 *   6e-8 per operation; the reductions here are at most ~40 terms (some of them
 *   done in double inside the kernels), so errors stay below ~1e-6 relative.
 * - BWD: an fp32 backward against finite differences of the double reference.
 *   The central difference with step 1e-5 has truncation error ~h^2 ~ 1e-10
 *   and cancellation error ~1e-16 / h ~ 1e-11, so the reference gradient is
 *   good to ~1e-9 and the bound is the fp32 rounding of the backward, same as
 *   FWD (LayerNorm's dnorm - mean - xhat * mean and softmax's dp - dot cancel,
 *   hence the absolute part). Observed worst cases are about a tenth of the
 *   bounds; a wrong term would be off by ~1e-1.
 * - SHARD: a sharded computation recombined by hand (as an all-reduce would)
 *   against the unsharded one: only the summation order differs. */
#define FWD_RTOL 1e-5
#define FWD_ATOL 1e-6
#define BWD_RTOL 1e-5
#define BWD_ATOL 1e-6
#define SHARD_RTOL 1e-6
#define SHARD_ATOL 1e-8
#define FD_STEP 1e-5
/* Gradient buffers start at this value, not 0, so every backward test also
 * checks that the kernel accumulates (+=) rather than writes. */
#define ACC0 0.25f

/* Everything a test allocates (tests/testutil.h) is freed by px_tfree(). */

static double *dalloc(int64_t n) { return px_talloc((size_t)n * sizeof(double)); }

/* ---- conversions and comparisons ---- */

static double *d_of(const float *x, int64_t n) {
  double *d = dalloc(n);
  for (int64_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}

/* Copies src into dst as double and returns the end, to pack several inputs. */
static double *pack(double *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = src[i];
  return dst + n;
}

/* True when |(got - sub) - want| <= rtol |want| + atol everywhere; prints the
 * first misses. sub = ACC0 for gradients that were accumulated onto ACC0. */
static bool close_to(const char *what, const float *got, const double *want, int64_t n, double rtol, double atol,
                     double sub) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = (double)got[i] - sub, err = fabs(g - want[i]);
    if (!(err <= rtol * fabs(want[i]) + atol)) {
      if (bad < 4) fprintf(stderr, "\n  %s[%lld] = %.9g, expected %.9g (err %.3g)", what, (long long)i, g, want[i], err);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "\n  %s: %lld of %lld elements out of tolerance\n", what, (long long)bad, (long long)n);
  return bad == 0;
}

static bool fwd_close(const char *what, const float *got, const double *want, int64_t n) {
  return close_to(what, got, want, n, FWD_RTOL, FWD_ATOL, 0.0);
}

/* An accumulated gradient (started at ACC0) against the finite differences. */
static bool grad_close(const char *what, const float *got, const double *want, int64_t n) {
  return close_to(what, got, want, n, BWD_RTOL, BWD_ATOL, ACC0);
}

static bool shard_close(const char *what, const float *got, const float *want, int64_t n) {
  return close_to(what, got, d_of(want, n), n, SHARD_RTOL, SHARD_ATOL, 0.0);
}

/* ---- finite differences on a double reference ---- */

typedef void (*ref_fn)(double *out, const double *in, const void *ctx);

/* grad[i] = dL/din[i], L = sum_j out[j] r[j], by central differences. */
static void fd_grad(double *grad, ref_fn f, const void *ctx, const double *in, int64_t nin, int64_t nout,
                    const double *r) {
  double *x = dalloc(nin), *out = dalloc(nout);
  memcpy(x, in, (size_t)nin * sizeof *x);
  for (int64_t i = 0; i < nin; i++) {
    double h = FD_STEP * (fabs(in[i]) > 1.0 ? fabs(in[i]) : 1.0), lp = 0.0, lm = 0.0;
    x[i] = in[i] + h;
    f(out, x, ctx);
    for (int64_t j = 0; j < nout; j++) lp += out[j] * r[j];
    x[i] = in[i] - h;
    f(out, x, ctx);
    for (int64_t j = 0; j < nout; j++) lm += out[j] * r[j];
    x[i] = in[i];
    grad[i] = (lp - lm) / (2.0 * h);
  }
}

/* ======================= GEMM and linear ======================= */

static void ref_gemm(double *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                     double alpha, double beta) {
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = 0.0;
      for (int64_t p = 0; p < k; p++) s += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * s + beta * c[i * n + j];
    }
  }
}

static void test_gemm(void) {
  px_tseed(1);
  const int64_t m = 7, n = 5, k = 6;
  for (int combo = 0; combo < 4; combo++) {
    bool ta = combo & 1, tb = combo & 2;
    float *a = px_trand(m * k, -1, 1), *b = px_trand(k * n, -1, 1), *c = px_trand(m * n, -1, 1);
    double *want = d_of(c, m * n);
    ref_gemm(want, a, b, m, n, k, ta, tb, 0.7, 0.3);
    px_k_gemm(c, a, b, m, n, k, ta, tb, 0.7f, 0.3f);
    char what[64];
    snprintf(what, sizeof what, "gemm trans_a=%d trans_b=%d", ta, tb);
    CU_ASSERT(fwd_close(what, c, want, m * n));
  }
  /* beta = 0 must not read C: NaNs in it are overwritten */
  float *a = px_trand(m * k, -1, 1), *b = px_trand(k * n, -1, 1), *c = px_tconst(m * n, NAN);
  double *want = dalloc(m * n);
  ref_gemm(want, a, b, m, n, k, false, false, 1.0, 0.0);
  px_k_gemm(c, a, b, m, n, k, false, false, 1.0f, 0.0f);
  CU_ASSERT(fwd_close("gemm beta=0 over NaN", c, want, m * n));
  /* k = 0: C = beta C */
  float *c0 = px_tconst(m * n, 2.0f);
  px_k_gemm(c0, a, b, m, n, 0, false, false, 1.0f, 0.5f);
  CU_ASSERT_EQUAL(c0[0], 1.0f);
  CU_ASSERT_EQUAL(c0[m * n - 1], 1.0f);
  px_tfree();
}

typedef struct {
  int64_t n, ic, oc;
} linear_ctx;

/* in = [inp (N, IC), weight (OC, IC), bias (OC)] */
static void ref_linear(double *out, const double *in, const void *vctx) {
  const linear_ctx *c = vctx;
  const double *x = in, *w = in + c->n * c->ic, *b = w + c->oc * c->ic;
  for (int64_t i = 0; i < c->n; i++)
    for (int64_t o = 0; o < c->oc; o++) {
      double s = b[o];
      for (int64_t j = 0; j < c->ic; j++) s += x[i * c->ic + j] * w[o * c->ic + j];
      out[i * c->oc + o] = s;
    }
}

static void test_linear(void) {
  px_tseed(2);
  linear_ctx c = {4, 5, 3};
  float *x = px_trand(c.n * c.ic, -1, 1), *w = px_trand(c.oc * c.ic, -1, 1), *b = px_trand(c.oc, -1, 1);
  int64_t nin = c.n * c.ic + c.oc * c.ic + c.oc, nout = c.n * c.oc;
  double *in = dalloc(nin);
  pack(pack(pack(in, x, c.n * c.ic), w, c.oc * c.ic), b, c.oc);
  double *want = dalloc(nout);
  ref_linear(want, in, &c);
  float *out = px_tconst(nout, NAN);
  px_k_linear_fwd(out, x, w, b, c.n, c.ic, c.oc);
  CU_ASSERT(fwd_close("linear out", out, want, nout));
  /* without bias: the reference with a zero bias */
  double *in0 = dalloc(nin), *want0 = dalloc(nout);
  memcpy(in0, in, (size_t)(nin - c.oc) * sizeof *in0);
  ref_linear(want0, in0, &c);
  px_k_linear_fwd(out, x, w, NULL, c.n, c.ic, c.oc);
  CU_ASSERT(fwd_close("linear out, no bias", out, want0, nout));

  float *r = px_trand(nout, -1, 1);
  float *dx = px_tconst(c.n * c.ic, ACC0), *dw = px_tconst(c.oc * c.ic, ACC0), *db = px_tconst(c.oc, ACC0);
  px_k_linear_bwd(dx, dw, db, r, x, w, c.n, c.ic, c.oc);
  double *g = dalloc(nin);
  fd_grad(g, ref_linear, &c, in, nin, nout, d_of(r, nout));
  CU_ASSERT(grad_close("linear dinp", dx, g, c.n * c.ic));
  CU_ASSERT(grad_close("linear dweight", dw, g + c.n * c.ic, c.oc * c.ic));
  CU_ASSERT(grad_close("linear dbias", db, g + c.n * c.ic + c.oc * c.ic, c.oc));
  /* NULL gradients are skipped */
  float *dx2 = px_tconst(c.n * c.ic, ACC0);
  px_k_linear_bwd(dx2, NULL, NULL, r, x, w, c.n, c.ic, c.oc);
  CU_ASSERT(memcmp(dx, dx2, (size_t)(c.n * c.ic) * sizeof *dx) == 0);
  px_tfree();
}

/* ======================= embeddings ======================= */

typedef struct {
  const int32_t *tokens;
  int64_t n, v, c;
} embed_ctx;

/* in = table (V, C), the whole vocabulary */
static void ref_embed(double *out, const double *in, const void *vctx) {
  const embed_ctx *e = vctx;
  for (int64_t i = 0; i < e->n; i++)
    for (int64_t j = 0; j < e->c; j++) out[i * e->c + j] = e->tokens[i] >= 0 ? in[e->tokens[i] * e->c + j] : 0.0;
}

static void test_embed_vocab_parallel(void) {
  px_tseed(3);
  enum { N = 10, V = 12, C = 3 };
  const int32_t tokens[N] = {0, 11, 5, 5, 3, 8, -1, 6, 2, 11};
  embed_ctx e = {tokens, N, V, C};
  float *table = px_trand(V * C, -1, 1), *out = px_tconst(N * C, NAN);
  px_k_embed_fwd(out, tokens, table, N, 0, V, C);
  double *want = dalloc(N * C);
  ref_embed(want, d_of(table, V * C), &e);
  CU_ASSERT(fwd_close("embed out", out, want, N * C));

  float *r = px_trand(N * C, -1, 1), *dtable = px_tconst(V * C, ACC0);
  px_k_embed_bwd(dtable, r, tokens, N, 0, V, C);
  double *g = dalloc(V * C);
  fd_grad(g, ref_embed, &e, d_of(table, V * C), V * C, N * C, d_of(r, N * C));
  CU_ASSERT(grad_close("embed dtable", dtable, g, V * C));

  /* 2 and 4 shards: the sum of the shards' outputs (the all-reduce) is the
   * unsharded output, and each shard's gradient is its slice of the table's. */
  for (int shards = 2; shards <= 4; shards += 2) {
    int64_t vl = V / shards;
    float *sum = px_tconst(N * C, 0.0f), *part = px_tfloats(N * C);
    for (int s = 0; s < shards; s++) {
      px_k_embed_fwd(part, tokens, table + s * vl * C, N, s * vl, vl, C);
      for (int64_t i = 0; i < N * C; i++) sum[i] += part[i];
      float *dpart = px_tconst(vl * C, ACC0);
      px_k_embed_bwd(dpart, r, tokens, N, s * vl, vl, C);
      CU_ASSERT(shard_close("embed dtable shard", dpart, dtable + s * vl * C, vl * C));
    }
    CU_ASSERT(shard_close("embed out, shards summed", sum, out, N * C));
  }
  px_tfree();
}

typedef struct {
  int64_t b, t, c, pos0;
} pos_ctx;

/* in = wpe (max_positions, C); out = a fixed base + wpe[pos0 + t] */
static void ref_pos(double *out, const double *in, const void *vctx) {
  const pos_ctx *p = vctx;
  for (int64_t b = 0; b < p->b; b++)
    for (int64_t t = 0; t < p->t; t++)
      for (int64_t j = 0; j < p->c; j++) out[(b * p->t + t) * p->c + j] = 0.5 + in[(p->pos0 + t) * p->c + j];
}

static void test_pos(void) {
  px_tseed(4);
  pos_ctx p = {2, 3, 4, 2};
  const int64_t maxpos = 6, nout = p.b * p.t * p.c;
  float *wpe = px_trand(maxpos * p.c, -1, 1), *out = px_tconst(nout, 0.5f);
  px_k_pos_fwd(out, wpe, p.b, p.t, p.c, p.pos0);
  double *want = dalloc(nout);
  ref_pos(want, d_of(wpe, maxpos * p.c), &p);
  CU_ASSERT(fwd_close("pos out", out, want, nout));
  float *r = px_trand(nout, -1, 1), *dwpe = px_tconst(maxpos * p.c, ACC0);
  px_k_pos_bwd(dwpe, r, p.b, p.t, p.c, p.pos0);
  double *g = dalloc(maxpos * p.c);
  fd_grad(g, ref_pos, &p, d_of(wpe, maxpos * p.c), maxpos * p.c, nout, d_of(r, nout));
  CU_ASSERT(grad_close("pos dwpe", dwpe, g, maxpos * p.c));
  px_tfree();
}

/* ======================= normalization ======================= */

typedef struct {
  int64_t n, c;
  double eps;
  bool rms;
} norm_ctx;

/* in = [inp (N, C), weight (C), bias (C)] (bias unused for RMSNorm) */
static void ref_norm(double *out, const double *in, const void *vctx) {
  const norm_ctx *k = vctx;
  const double *w = in + k->n * k->c, *b = w + k->c;
  for (int64_t i = 0; i < k->n; i++) {
    const double *x = in + i * k->c;
    double m = 0.0, v = 0.0;
    if (!k->rms) {
      for (int64_t j = 0; j < k->c; j++) m += x[j];
      m /= (double)k->c;
    }
    for (int64_t j = 0; j < k->c; j++) v += (x[j] - m) * (x[j] - m);
    double r = 1.0 / sqrt(v / (double)k->c + k->eps);
    for (int64_t j = 0; j < k->c; j++) out[i * k->c + j] = (x[j] - m) * r * w[j] + (k->rms ? 0.0 : b[j]);
  }
}

/* A norm of n rows of c (one weight for all): a layer's tokens of hidden, or the per-head q/k norms' (tokens x
 * heads) rows of head_dim, whose one weight takes every head's gradient. */
static void check_norm(bool rms, bool with_bias, int64_t n, int64_t c) {
  norm_ctx k = {n, c, (double)1e-5f, rms};
  const int64_t nx = k.n * k.c, nin = nx + 2 * k.c;
  float *x = px_trand(nx, -2, 2), *w = px_trand(k.c, 0.5, 1.5), *b = with_bias ? px_trand(k.c, -0.5, 0.5) : px_tconst(k.c, 0);
  double *in = dalloc(nin);
  pack(pack(pack(in, x, nx), w, k.c), b, k.c);
  float *out = px_tconst(nx, NAN), *mean = px_tconst(k.n, NAN), *rstd = px_tconst(k.n, NAN);
  if (rms) {
    px_k_rmsnorm_fwd(out, rstd, x, w, k.n, k.c, 1e-5f);
  } else {
    px_k_layernorm_fwd(out, mean, rstd, x, w, with_bias ? b : NULL, k.n, k.c, 1e-5f);
  }
  double *want = dalloc(nx);
  ref_norm(want, in, &k);
  CU_ASSERT(fwd_close(rms ? "rmsnorm out" : "layernorm out", out, want, nx));
  for (int64_t i = 0; i < k.n; i++) { /* the saved statistics */
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; j < k.c; j++) m += x[i * k.c + j];
    m = rms ? 0.0 : m / (double)k.c;
    for (int64_t j = 0; j < k.c; j++) v += (x[i * k.c + j] - m) * (x[i * k.c + j] - m);
    if (!rms) CU_ASSERT(fabs(mean[i] - m) <= FWD_ATOL); /* the mean is near 0: an absolute bound */
    PX_ASSERT_REL(rstd[i], 1.0 / sqrt(v / (double)k.c + k.eps), FWD_RTOL);
  }

  float *r = px_trand(nx, -1, 1);
  float *dx = px_tconst(nx, ACC0), *dw = px_tconst(k.c, ACC0), *db = px_tconst(k.c, ACC0);
  if (rms) {
    px_k_rmsnorm_bwd(dx, dw, r, x, w, rstd, k.n, k.c);
  } else {
    px_k_layernorm_bwd(dx, dw, with_bias ? db : NULL, r, x, w, mean, rstd, k.n, k.c);
  }
  double *g = dalloc(nin);
  fd_grad(g, ref_norm, &k, in, nin, nx, d_of(r, nx));
  CU_ASSERT(grad_close(rms ? "rmsnorm dinp" : "layernorm dinp", dx, g, nx));
  CU_ASSERT(grad_close(rms ? "rmsnorm dweight" : "layernorm dweight", dw, g + nx, k.c));
  if (!rms && with_bias) CU_ASSERT(grad_close("layernorm dbias", db, g + nx + k.c, k.c));
  if (!with_bias) CU_ASSERT(db[0] == ACC0 && db[k.c - 1] == ACC0); /* NULL dbias untouched */
}

static void test_layernorm(void) {
  px_tseed(5);
  check_norm(false, true, 3, 8);
  check_norm(false, false, 3, 8);
  px_tfree();
}

static void test_rmsnorm(void) {
  px_tseed(6);
  check_norm(true, false, 3, 8);
  check_norm(true, false, 3 * 4, 6); /* Qwen3's q/k norms: 3 tokens of 4 heads of head_dim 6 */
  px_tfree();
}

/* ======================= activations ======================= */

typedef struct {
  int64_t n;
  bool swiglu;
} act_ctx;

/* GELU: in = inp (n). SwiGLU: in = [gate (n), up (n)]. */
static void ref_act(double *out, const double *in, const void *vctx) {
  const act_ctx *a = vctx;
  for (int64_t i = 0; i < a->n; i++) {
    double x = in[i];
    if (a->swiglu) {
      out[i] = x / (1.0 + exp(-x)) * in[a->n + i];
    } else {
      out[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    }
  }
}

static void test_gelu(void) {
  px_tseed(7);
  act_ctx a = {32, false};
  float *x = px_trand(a.n, -5, 5), *out = px_tconst(a.n, NAN);
  x[0] = 0.0f;
  px_k_gelu_fwd(out, x, a.n);
  double *in = d_of(x, a.n), *want = dalloc(a.n);
  ref_act(want, in, &a);
  CU_ASSERT(fwd_close("gelu out", out, want, a.n));
  float *r = px_trand(a.n, -1, 1), *dx = px_tconst(a.n, ACC0);
  px_k_gelu_bwd(dx, r, x, a.n);
  double *g = dalloc(a.n);
  fd_grad(g, ref_act, &a, in, a.n, a.n, d_of(r, a.n));
  CU_ASSERT(grad_close("gelu dinp", dx, g, a.n));
  /* in place */
  float *y = px_tfloats(a.n);
  memcpy(y, x, (size_t)a.n * sizeof *y);
  px_k_gelu_fwd(y, y, a.n);
  CU_ASSERT(memcmp(y, out, (size_t)a.n * sizeof *y) == 0);
  px_tfree();
}

static void test_swiglu(void) {
  px_tseed(8);
  act_ctx a = {32, true};
  float *gate = px_trand(a.n, -6, 6), *up = px_trand(a.n, -2, 2), *out = px_tconst(a.n, NAN);
  px_k_swiglu_fwd(out, gate, up, a.n);
  double *in = dalloc(2 * a.n), *want = dalloc(a.n);
  pack(pack(in, gate, a.n), up, a.n);
  ref_act(want, in, &a);
  CU_ASSERT(fwd_close("swiglu out", out, want, a.n));
  float *r = px_trand(a.n, -1, 1), *dgate = px_tconst(a.n, ACC0), *dup = px_tconst(a.n, ACC0);
  px_k_swiglu_bwd(dgate, dup, r, gate, up, a.n);
  double *g = dalloc(2 * a.n);
  fd_grad(g, ref_act, &a, in, 2 * a.n, a.n, d_of(r, a.n));
  CU_ASSERT(grad_close("swiglu dgate", dgate, g, a.n));
  CU_ASSERT(grad_close("swiglu dup", dup, g + a.n, a.n));
  px_tfree();
}

/* ======================= RoPE ======================= */

typedef struct {
  int64_t b, t, h, d, pos0;
  double theta;
  const double *inv_freq; /* (D/2) the pairs' frequencies (YaRN's, from tests/data); NULL: theta^(-2i/D) */
  double scale;           /* out times this (the concentration); 0: 1 */
  int64_t rot;            /* the leading dims rotated, the rest passed through (partial rotary); 0: all */
} rope_ctx;

/* Hugging Face Llama: q * cos + rotate_half(q) * sin, rotate_half(x) = [-x2, x1]. */
static void ref_rope(double *out, const double *in, const void *vctx) {
  const rope_ctx *p = vctx;
  int64_t rot = p->rot ? p->rot : p->d, half = rot / 2;
  double c = p->scale ? p->scale : 1.0;
  for (int64_t b = 0; b < p->b; b++)
    for (int64_t t = 0; t < p->t; t++)
      for (int64_t h = 0; h < p->h; h++) {
        const double *x = in + ((b * p->t + t) * p->h + h) * p->d;
        double *y = out + ((b * p->t + t) * p->h + h) * p->d;
        for (int64_t i = rot; i < p->d; i++) y[i] = x[i]; /* GPT-NeoX's x_pass, concatenated back */
        for (int64_t i = 0; i < rot; i++) {
          double inv_freq =
              p->inv_freq ? p->inv_freq[i % half] : 1.0 / pow(p->theta, (double)(2 * (i % half)) / (double)rot);
          double ang = (double)(p->pos0 + t) * inv_freq;
          double other = i < half ? -x[i + half] : x[i - half]; /* rotate_half */
          y[i] = c * (x[i] * cos(ang) + other * sin(ang));
        }
      }
}

/* theta's frequencies, no concentration */
#define PLAIN_ROPE(base) (&(px_rope){.theta = (base), .concentration = 1.0})

static void test_rope(void) {
  px_tseed(9);
  rope_ctx p = {2, 8, 3, 6, 0, 10000.0, NULL, 0, 0};
  const int64_t n = p.b * p.t * p.h * p.d;
  float *x = px_trand(n, -1, 1), *out = px_tconst(n, NAN);
  px_k_rope_fwd(out, x, p.b, p.t, p.h, p.d, p.pos0, PLAIN_ROPE(p.theta));
  double *in = d_of(x, n), *want = dalloc(n);
  ref_rope(want, in, &p);
  CU_ASSERT(fwd_close("rope out", out, want, n));
  /* in place is the same */
  float *y = px_tfloats(n);
  memcpy(y, x, (size_t)n * sizeof *y);
  px_k_rope_fwd(y, y, p.b, p.t, p.h, p.d, p.pos0, PLAIN_ROPE(p.theta));
  CU_ASSERT(memcmp(y, out, (size_t)n * sizeof *y) == 0);

  /* backward at an offset, as a sequence shard has */
  p.pos0 = 5;
  float *r = px_trand(n, -1, 1), *dx = px_tconst(n, ACC0);
  px_k_rope_bwd(dx, r, p.b, p.t, p.h, p.d, p.pos0, PLAIN_ROPE(p.theta));
  double *g = dalloc(n);
  fd_grad(g, ref_rope, &p, in, n, n, d_of(r, n));
  CU_ASSERT(grad_close("rope dinp", dx, g, n));

  /* a shard holding positions 3..7 at pos0 = 3 equals rows 3.. of the full sequence */
  const int64_t t0 = 3, ts = p.t - t0, row = p.h * p.d;
  float *shard = px_tfloats(p.b * ts * row);
  for (int64_t b = 0; b < p.b; b++)
    memcpy(shard + b * ts * row, x + (b * p.t + t0) * row, (size_t)(ts * row) * sizeof *shard);
  px_k_rope_fwd(shard, shard, p.b, ts, p.h, p.d, t0, PLAIN_ROPE(p.theta));
  bool same = true;
  for (int64_t b = 0; b < p.b; b++)
    same = same && memcmp(shard + b * ts * row, out + (b * p.t + t0) * row, (size_t)(ts * row) * sizeof *shard) == 0;
  CU_ASSERT(same);

  /* a partial rotary (GPT-NeoX: rotary_pct 0.25 of a head of 16): the first 4 dims rotated at their own
   * frequencies (theta^(-2i/4)), the other 12 passed through, forward and backward */
  rope_ctx q = {2, 5, 3, 16, 2, 10000.0, NULL, 0, 4};
  const int64_t m = q.b * q.t * q.h * q.d;
  const px_rope *partial = &(px_rope){.theta = q.theta, .concentration = 1.0, .dims = 4};
  float *xp = px_trand(m, -1, 1), *op = px_tconst(m, NAN);
  px_k_rope_fwd(op, xp, q.b, q.t, q.h, q.d, q.pos0, partial);
  double *ip = d_of(xp, m), *wp = dalloc(m), *gp = dalloc(m);
  ref_rope(wp, ip, &q);
  CU_ASSERT(fwd_close("partial rope out", op, wp, m));
  float *rp = px_trand(m, -1, 1), *dp = px_tconst(m, ACC0);
  px_k_rope_bwd(dp, rp, q.b, q.t, q.h, q.d, q.pos0, partial);
  fd_grad(gp, ref_rope, &q, ip, m, m, d_of(rp, m));
  CU_ASSERT(grad_close("partial rope dinp", dp, gp, m));
  px_tfree();
}

typedef struct {
  int64_t b, t, hq, hkv, dn, dr, pos0;
  double theta;
  const double *inv_freq; /* as rope_ctx's */
  double q_scale;         /* q out times this (the softmax's scale factor); 0: 1 */
} mla_rope_ctx;

/* Latent attention's decoupled RoPE (DeepSeek-V2/V3): in = [q (B, T, Hq, dn + dr), k_nope (B, T, Hkv * dn), k_pe
 * (B, T, dr)]; out = [q with each head's last dr rotated, k (B, T, Hkv, dn + dr): each head's k_nope, then the
 * rotated k_pe]. */
static void ref_mla_rope(double *out, const double *in, const void *vctx) {
  const mla_rope_ctx *p = vctx;
  int64_t d = p->dn + p->dr, rows = p->b * p->t, nq = rows * p->hq * d;
  const double *q = in, *kn = q + nq, *pe = kn + rows * p->hkv * p->dn;
  double *qo = out, *ko = out + nq;
  double qs = p->q_scale ? p->q_scale : 1.0;
  for (int64_t r = 0; r < rows; r++) {
    rope_ctx one = {1, 1, 1, p->dr, p->pos0 + r % p->t, p->theta, p->inv_freq, 0, 0};
    for (int64_t h = 0; h < p->hq; h++) {
      const double *x = q + (r * p->hq + h) * d;
      double *y = qo + (r * p->hq + h) * d;
      ref_rope(y + p->dn, x + p->dn, &one);
      for (int64_t e = 0; e < d; e++) y[e] = (e < p->dn ? x[e] : y[e]) * qs;
    }
    for (int64_t h = 0; h < p->hkv; h++) {
      double *y = ko + (r * p->hkv + h) * d;
      memcpy(y, kn + (r * p->hkv + h) * p->dn, (size_t)p->dn * sizeof *y);
      ref_rope(y + p->dn, pe + r * p->dr, &one);
    }
  }
}

/* px_k_mla_rope_fwd in place against the reference (k widened from its heads' parts), and its backward (dk narrowed
 * back, dk_pe summed over the heads) against finite differences of q, k_nope and k_pe. */
static void mla_rope_case(const mla_rope_ctx *pp, const px_rope *rope) {
  const mla_rope_ctx p = *pp;
  float q_scale = p.q_scale ? (float)p.q_scale : 1.0f;
  const int64_t d = p.dn + p.dr, rows = p.b * p.t, nq = rows * p.hq * d, nk = rows * p.hkv * d;
  const int64_t nkn = rows * p.hkv * p.dn, npe = rows * p.dr, nin = nq + nkn + npe;
  float *q = px_trand(nq, -1, 1), *kn = px_trand(nkn, -1, 1), *pe = px_trand(npe, -1, 1);
  double *in = dalloc(nin), *want = dalloc(nq + nk);
  pack(pack(pack(in, q, nq), kn, nkn), pe, npe);
  ref_mla_rope(want, in, &p);
  float *qo = px_tfloats(nq), *ko = px_tconst(nk, NAN);
  memcpy(qo, q, (size_t)nq * sizeof *qo);
  memcpy(ko, kn, (size_t)nkn * sizeof *ko);
  px_k_mla_rope_fwd(qo, ko, pe, p.b, p.t, p.hq, p.hkv, p.dn, p.dr, p.pos0, rope, q_scale);
  CU_ASSERT(fwd_close("mla rope q", qo, want, nq));
  CU_ASSERT(fwd_close("mla rope k", ko, want + nq, nk));

  float *dq = px_trand(nq, -1, 1), *dk = px_trand(nk, -1, 1), *dpe = px_tconst(npe, NAN);
  double *r = dalloc(nq + nk), *g = dalloc(nin);
  pack(pack(r, dq, nq), dk, nk);
  fd_grad(g, ref_mla_rope, &p, in, nin, nq + nk, r);
  px_k_mla_rope_bwd(dq, dk, dpe, p.b, p.t, p.hq, p.hkv, p.dn, p.dr, p.pos0, rope, q_scale);
  CU_ASSERT(close_to("mla rope dq", dq, g, nq, BWD_RTOL, BWD_ATOL, 0.0));
  CU_ASSERT(close_to("mla rope dk_nope", dk, g + nq, nkn, BWD_RTOL, BWD_ATOL, 0.0));
  CU_ASSERT(close_to("mla rope dk_pe", dpe, g + nq + nkn, npe, BWD_RTOL, BWD_ATOL, 0.0));
}

static void test_mla_rope(void) {
  px_tseed(14);
  mla_rope_case(&(mla_rope_ctx){2, 5, 3, 3, 4, 6, 2, 10000.0, NULL, 0}, PLAIN_ROPE(10000.0));
  px_tfree();
}

/* ---- scaled RoPE: YaRN, Llama 3.1 ---- */

/* The n frequencies of `which` (gpt-oss, deepseek-v3, llama3.1-8b, llama3.2-1b) in
 * tests/data/rope_scaling_inv_freq.csv into f. */
static bool scaled_table(const char *which, double *f, int n) {
  FILE *fp = fopen(px_test_path("tests/data/rope_scaling_inv_freq.csv"), "r");
  if (!fp) return false;
  char line[256], name[32];
  int got = 0, i;
  double v;
  while (fgets(line, sizeof line, fp))
    if (line[0] != '#' && sscanf(line, "%31[^,],%d,%lf", name, &i, &v) == 3 && !strcmp(name, which) && i >= 0 &&
        i < n)
      f[i] = v, got++;
  fclose(fp);
  return got == n;
}

/* Pairs of a d-wide rotation whose px_rope_inv_freq is off want's by more than 1e-12 of it. */
static int freq_misses(const double *want, int64_t d, const px_rope *r) {
  int off = 0;
  for (int64_t i = 0; i < d / 2; i++) off += fabs(px_rope_inv_freq(i, d, r) - want[i]) > 1e-12 * want[i];
  return off;
}

/* gpt-oss's RoPE (openai/gpt-oss's config): YaRN factor 32 over 4,096 positions, ends not rounded, concentration
 * 0.1 ln 32 + 1 */
#define GPT_OSS_ROPE                                                                                                 \
  (&(px_rope){.theta = 150000.0, .concentration = 0.1 * log(32.0) + 1.0, .yarn_factor = 32.0,                        \
              .yarn_positions = 4096.0, .yarn_beta_fast = 32.0, .yarn_beta_slow = 1.0, .yarn_truncate = 0})
/* DeepSeek-V3's (its rope_scaling): factor 40 over 4,096, ends rounded, concentration 1 */
#define DEEPSEEK_V3_ROPE                                                                                             \
  (&(px_rope){.theta = 10000.0, .concentration = 1.0, .yarn_factor = 40.0, .yarn_positions = 4096.0,                 \
              .yarn_beta_fast = 32.0, .yarn_beta_slow = 1.0, .yarn_truncate = 1})

/* px_rope_inv_freq against two other projects' YaRN (openai/gpt-oss's for gpt-oss, transformers' for DeepSeek-V3,
 * transcribed in tests/data/rope_scaling_inv_freq.py), then the kernels with those frequencies and gpt-oss's
 * concentration against the reference and finite differences, far into the sequence where the slow pairs turn, and
 * latent attention's RoPE with DeepSeek-V3's and its softmax factor on q. */
static void test_rope_yarn(void) {
  px_tseed(21);
  double oss[32], ds[32];
  CU_ASSERT_FATAL(scaled_table("gpt-oss", oss, 32) && scaled_table("deepseek-v3", ds, 32));
  CU_ASSERT_EQUAL(freq_misses(oss, 64, GPT_OSS_ROPE), 0);
  CU_ASSERT_EQUAL(freq_misses(ds, 64, DEEPSEEK_V3_ROPE), 0);
  /* the ramp is real: fast pairs keep theta's frequency, slow ones are divided by the factor */
  CU_ASSERT(oss[0] == 1.0);
  PX_ASSERT_REL(oss[31] * 32.0, pow(150000.0, -62.0 / 64.0), 1e-12);

  rope_ctx p = {1, 4, 2, 64, 3000, 150000.0, oss, 0.1 * log(32.0) + 1.0, 0};
  const int64_t n = p.b * p.t * p.h * p.d;
  float *x = px_trand(n, -1, 1), *out = px_tconst(n, NAN);
  px_k_rope_fwd(out, x, p.b, p.t, p.h, p.d, p.pos0, GPT_OSS_ROPE);
  double *in = d_of(x, n), *want = dalloc(n);
  ref_rope(want, in, &p);
  CU_ASSERT(fwd_close("yarn rope out", out, want, n));
  float *r = px_trand(n, -1, 1), *dx = px_tconst(n, ACC0);
  px_k_rope_bwd(dx, r, p.b, p.t, p.h, p.d, p.pos0, GPT_OSS_ROPE);
  double *g = dalloc(n);
  fd_grad(g, ref_rope, &p, in, n, n, d_of(r, n));
  CU_ASSERT(grad_close("yarn rope dinp", dx, g, n));

  double mscale = 0.1 * log(40.0) + 1.0; /* DeepSeek-V3: mscale_all_dim 1 */
  mla_rope_case(&(mla_rope_ctx){1, 3, 2, 2, 4, 64, 2000, 10000.0, ds, mscale * mscale}, DEEPSEEK_V3_ROPE);
  px_tfree();
}

/* Llama 3.1's scaling (Llama 3.1 8B's and 3.2 1B's rope_scaling) against meta-llama/llama-models' apply_scaling,
 * transcribed in tests/data/rope_scaling_inv_freq.py: pairs 0-28 of the 8B kept, 35-63 slowed 8 times, 29-34
 * blended; and the rotation by them. */
static void test_rope_llama3(void) {
  px_tseed(22);
  double f8[64], f1[32];
  CU_ASSERT_FATAL(scaled_table("llama3.1-8b", f8, 64) && scaled_table("llama3.2-1b", f1, 32));
  px_rope r = {.theta = 500000.0, .concentration = 1.0, .llama3_factor = 8.0, .llama3_positions = 8192.0,
               .llama3_low = 1.0, .llama3_high = 4.0};
  CU_ASSERT_EQUAL(freq_misses(f8, 128, &r), 0);
  PX_ASSERT_REL(f8[28], pow(500000.0, -56.0 / 128.0), 1e-12);     /* kept */
  PX_ASSERT_REL(f8[35] * 8.0, pow(500000.0, -70.0 / 128.0), 1e-12); /* slowed by the factor */
  r.llama3_factor = 32.0;
  CU_ASSERT_EQUAL(freq_misses(f1, 64, &r), 0);
  /* linear interpolation: every frequency over the factor (transformers' _compute_linear_scaling_rope_parameters) */
  const px_rope *lin = &(px_rope){.theta = 10000.0, .concentration = 1.0, .linear_factor = 4.0};
  PX_ASSERT_REL(px_rope_inv_freq(0, 64, lin), 0.25, 1e-15);
  PX_ASSERT_REL(px_rope_inv_freq(20, 64, lin), 1.0 / (4.0 * pow(10000.0, 40.0 / 64.0)), 1e-14);
  rope_ctx p = {1, 3, 2, 64, 7000, 500000.0, f1, 0, 0};
  const int64_t n = p.b * p.t * p.h * p.d;
  float *x = px_trand(n, -1, 1), *out = px_tconst(n, NAN);
  px_k_rope_fwd(out, x, p.b, p.t, p.h, p.d, p.pos0, &r);
  double *want = dalloc(n);
  ref_rope(want, d_of(x, n), &p);
  CU_ASSERT(fwd_close("llama3 rope out", out, want, n));
  px_tfree();
}

/* ======================= attention ======================= */

typedef struct {
  int64_t b, t, hq, hkv, d;
  double scale;
  int64_t dv; /* the values' head dim (latent attention's v_head_dim); 0: d */
} attn_ctx;

/* Naive causal GQA attention, per (b, h): softmax(scale Q K^T, masked) V; T <= 128.
 * in = [q (B, T, Hq, D), k (B, T, Hkv, D), v (B, T, Hkv, Dv)]; out = ctx (B, T, Hq, Dv). */
static void ref_attention(double *out, const double *in, const void *vctx) {
  const attn_ctx *a = vctx;
  const int64_t dv = a->dv > 0 ? a->dv : a->d;
  const double *q = in, *k = q + a->b * a->t * a->hq * a->d, *v = k + a->b * a->t * a->hkv * a->d;
  double p[128];
  for (int64_t b = 0; b < a->b; b++)
    for (int64_t h = 0; h < a->hq; h++) {
      int64_t kh = h / (a->hq / a->hkv);
      for (int64_t i = 0; i < a->t; i++) {
        const double *qi = q + ((b * a->t + i) * a->hq + h) * a->d;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= i; j++) {
          const double *kj = k + ((b * a->t + j) * a->hkv + kh) * a->d;
          double s = 0.0;
          for (int64_t e = 0; e < a->d; e++) s += qi[e] * kj[e];
          p[j] = a->scale * s;
          mx = p[j] > mx ? p[j] : mx;
        }
        for (int64_t j = 0; j <= i; j++) sum += p[j] = exp(p[j] - mx);
        double *o = out + ((b * a->t + i) * a->hq + h) * dv;
        for (int64_t e = 0; e < dv; e++) {
          double s = 0.0;
          for (int64_t j = 0; j <= i; j++) s += p[j] / sum * v[((b * a->t + j) * a->hkv + kh) * dv + e];
          o[e] = s;
        }
      }
    }
}

static void check_attention(int64_t hkv) {
  attn_ctx a = {2, 6, 4, hkv, 3, 0.0, 0};
  a.scale = 1.0 / sqrt((double)a.d);
  const int64_t nq = a.b * a.t * a.hq * a.d, nkv = a.b * a.t * a.hkv * a.d, ns = a.b * a.hq * a.t * a.t;
  float *q = px_trand(nq, -1.5, 1.5), *k = px_trand(nkv, -1.5, 1.5), *v = px_trand(nkv, -1, 1);
  float *scores = px_tconst(ns, NAN), *probs = px_tconst(ns, NAN), *ctx = px_tconst(nq, NAN);
  px_k_attn_scores_fwd(scores, q, k, a.b, a.t, a.hq, a.hkv, a.d, (float)a.scale);
  px_k_attn_softmax_fwd(probs, scores, a.b * a.hq, a.t, 0);
  px_k_attn_context_fwd(ctx, probs, v, a.b, a.t, a.hq, a.hkv, a.d);
  double *in = dalloc(nq + 2 * nkv), *want = dalloc(nq);
  pack(pack(pack(in, q, nq), k, nkv), v, nkv);
  ref_attention(want, in, &a);
  char what[64];
  snprintf(what, sizeof what, "attention ctx, hkv=%lld", (long long)hkv);
  CU_ASSERT(fwd_close(what, ctx, want, nq));
  /* causal rows sum to 1, the upper triangle is exactly 0 */
  bool rows_ok = true, upper_zero = true;
  for (int64_t r = 0; r < a.b * a.hq * a.t; r++) {
    int64_t i = r % a.t;
    double s = 0.0;
    for (int64_t j = 0; j < a.t; j++) {
      s += probs[r * a.t + j];
      if (j > i) upper_zero = upper_zero && probs[r * a.t + j] == 0.0f && scores[r * a.t + j] == 0.0f;
    }
    rows_ok = rows_ok && fabs(s - 1.0) <= 1e-6;
  }
  CU_ASSERT(rows_ok);
  CU_ASSERT(upper_zero);
  /* softmax in place */
  float *sp = px_tfloats(ns);
  memcpy(sp, scores, (size_t)ns * sizeof *sp);
  px_k_attn_softmax_fwd(sp, sp, a.b * a.hq, a.t, 0);
  CU_ASSERT(memcmp(sp, probs, (size_t)ns * sizeof *sp) == 0);

  /* backward through the three ops, against the finite differences of the
   * whole reference attention; dq, dk, dv start at ACC0 (accumulate) but the
   * intermediate dprobs and dscores start at 0, as the caller zeroes them. */
  float *r = px_trand(nq, -1, 1);
  float *dprobs = px_tconst(ns, 0.0f), *dscores = px_tconst(ns, 0.0f);
  float *dq = px_tconst(nq, ACC0), *dk = px_tconst(nkv, ACC0), *dv = px_tconst(nkv, ACC0);
  px_k_attn_context_bwd(dprobs, dv, r, probs, v, a.b, a.t, a.hq, a.hkv, a.d);
  px_k_attn_softmax_bwd(dscores, dprobs, probs, a.b * a.hq, a.t, 0);
  px_k_attn_scores_bwd(dq, dk, dscores, q, k, a.b, a.t, a.hq, a.hkv, a.d, (float)a.scale);
  double *g = dalloc(nq + 2 * nkv);
  fd_grad(g, ref_attention, &a, in, nq + 2 * nkv, nq, d_of(r, nq));
  CU_ASSERT(grad_close("attention dq", dq, g, nq));
  CU_ASSERT(grad_close("attention dk", dk, g + nq, nkv));
  CU_ASSERT(grad_close("attention dv", dv, g + nq + nkv, nkv));
}

static void test_attention(void) {
  px_tseed(10);
  check_attention(2); /* GQA: 2 query heads per kv head */
  check_attention(1); /* multi-query */
  check_attention(4); /* multi-head */
  px_tfree();
}

/* The fused attention of one batch row against the three ops with the same
 * dropout masks, forward (ctx, lse) and backward (accumulated dq, dk, dv), on
 * one tile and on sequences that span several; with a sliding window w > 0
 * (each query sees the w keys up to its own), the softmax's rows are that
 * window exactly (zero elsewhere, summing to 1). */
static void check_flash(int64_t s, int64_t hq, int64_t hkv, int64_t d, float p, int64_t w, bool with_sinks) {
  const int64_t nq = s * hq * d, nkv = s * hkv * d, ns = hq * s * s;
  const float scale = 1.0f / sqrtf((float)d);
  const uint64_t seed = 77, off = 1000;
  float *q = px_trand(nq, -2, 2), *k = px_trand(nkv, -2, 2), *v = px_trand(nkv, -1, 1), *dctx = px_trand(nq, -1, 1);
  float *sinks = with_sinks ? px_trand(hq, -1, 2) : NULL; /* gpt-oss: a logit per head in each row's denominator */
  /* the reference: probabilities, dropped per head with the flash counters */
  float *probs = px_tfloats(ns), *drop = px_tfloats(ns), *want = px_tfloats(nq), *lse_want = px_tfloats(hq * s);
  uint8_t *mask = px_talloc((size_t)ns);
  px_k_attn_scores_fwd(probs, q, k, 1, s, hq, hkv, d, scale);
  for (int64_t r = 0; r < hq * s; r++) { /* lse of the masked scores */
    double mx = sinks ? sinks[r / s] : -INFINITY, sum = 0.0;
    int64_t j0 = w > 0 && r % s >= w ? r % s - w + 1 : 0;
    for (int64_t j = j0; j <= r % s; j++) mx = fmax(mx, probs[r * s + j]);
    for (int64_t j = j0; j <= r % s; j++) sum += exp(probs[r * s + j] - mx);
    if (sinks) sum += exp(sinks[r / s] - mx);
    lse_want[r] = (float)(mx + log(sum));
  }
  px_k_attn_softmax_sink_fwd(probs, probs, sinks, hq, hq, s, w);
  for (int64_t r = 0; r < hq * s; r++) { /* the row's window: its own key and the w - 1 before it */
    double sum = sinks ? exp(sinks[r / s] - lse_want[r]) : 0.0; /* and the sink's share */
    bool outside_zero = true;
    for (int64_t j = 0; j < s; j++) {
      bool seen = j <= r % s && (w <= 0 || j > r % s - w);
      sum += probs[r * s + j];
      outside_zero = outside_zero && (seen || probs[r * s + j] == 0.0f);
    }
    CU_ASSERT(outside_zero);
    CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-5);
  }
  px_k_dropout_fwd(drop, mask, probs, ns, p, seed, off);
  px_k_attn_context_fwd(want, drop, v, 1, s, hq, hkv, d);
  float *ctx = px_tconst(nq, NAN), *lse = px_tconst(hq * s, NAN);
  px_k_flash_fwd(ctx, lse, q, k, v, s, s, hq, hkv, d, NULL, NULL, w, s, p, seed, off);
  if (sinks) px_k_flash_sink_fold(ctx, lse, sinks, s, hq, d);
  CU_ASSERT(close_to("flash ctx", ctx, d_of(want, nq), nq, 1e-5, 1e-6, 0.0));
  CU_ASSERT(close_to("flash lse", lse, d_of(lse_want, hq * s), hq * s, 1e-6, 1e-6, 0.0));

  float *gp = px_tconst(ns, 0.0f), *gpd = px_tconst(ns, 0.0f), *gs = px_tconst(ns, 0.0f);
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nkv, ACC0), *gv = px_tconst(nkv, ACC0);
  px_k_attn_context_bwd(gpd, gv, dctx, drop, v, 1, s, hq, hkv, d);
  px_k_dropout_bwd(gp, gpd, mask, ns, p);
  float *gsink = with_sinks ? px_tconst(hq, 0.0f) : NULL, *fsink = with_sinks ? px_tconst(hq, 0.0f) : NULL;
  px_k_attn_softmax_sink_bwd(gs, gsink, gp, probs, hq, hq, s, w);
  px_k_attn_scores_bwd(gq, gk, gs, q, k, 1, s, hq, hkv, d, scale);
  float *fq = px_tconst(nq, ACC0), *fk = px_tconst(nkv, ACC0), *fv = px_tconst(nkv, ACC0);
  px_k_flash_bwd_dv(fq, fk, fv, fsink, dctx, q, k, v, ctx, lse, s, s, hq, hkv, d, d, NULL, NULL, w, s, p, seed, off);
  CU_ASSERT(close_to("flash dq", fq, d_of(gq, nq), nq, 1e-4, 1e-5, 0.0));
  CU_ASSERT(close_to("flash dk", fk, d_of(gk, nkv), nkv, 1e-4, 1e-5, 0.0));
  CU_ASSERT(close_to("flash dv", fv, d_of(gv, nkv), nkv, 1e-4, 1e-5, 0.0));
  if (sinks) CU_ASSERT(close_to("flash dsinks", fsink, d_of(gsink, hq), hq, 1e-4, 1e-5, 0.0));
}

/* The fused attention with values of another head dim than the queries' and keys' (latent attention: nope + rope
 * against v_head_dim) against the double reference: forward on one tile and on two, backward (dq, dk, dv
 * accumulated) against finite differences. */
static void check_flash_dv(int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t dv, bool grads) {
  attn_ctx a = {1, s, hq, hkv, d, 1.0 / sqrt((double)d), dv};
  const int64_t nq = s * hq * d, nk = s * hkv * d, nv = s * hkv * dv, no = s * hq * dv;
  float *q = px_trand(nq, -1.5, 1.5), *k = px_trand(nk, -1.5, 1.5), *v = px_trand(nv, -1, 1);
  float *ctx = px_tconst(no, NAN), *lse = px_tconst(hq * s, NAN);
  px_k_flash_fwd_dv(ctx, lse, q, k, v, s, s, hq, hkv, d, dv, NULL, NULL, 0, s, 0.0f, 0, 0);
  double *in = dalloc(nq + nk + nv), *want = dalloc(no);
  pack(pack(pack(in, q, nq), k, nk), v, nv);
  ref_attention(want, in, &a);
  CU_ASSERT(fwd_close("flash ctx, dv", ctx, want, no));
  if (!grads) return;
  float *r = px_trand(no, -1, 1);
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nk, ACC0), *gv = px_tconst(nv, ACC0);
  px_k_flash_bwd_dv(gq, gk, gv, NULL, r, q, k, v, ctx, lse, s, s, hq, hkv, d, dv, NULL, NULL, 0, s, 0.0f, 0, 0);
  double *g = dalloc(nq + nk + nv);
  fd_grad(g, ref_attention, &a, in, nq + nk + nv, no, d_of(r, no));
  CU_ASSERT(grad_close("flash dq, dv", gq, g, nq));
  CU_ASSERT(grad_close("flash dk, dv", gk, g + nq, nk));
  CU_ASSERT(grad_close("flash dv, dv", gv, g + nq + nk, nv));
}

static void test_flash_dv(void) {
  px_tseed(15);
  check_flash_dv(9, 4, 2, 6, 4, true);     /* values narrower (DeepSeek-V3: 192 against 128) */
  check_flash_dv(7, 2, 2, 4, 10, true);    /* and wider */
  check_flash_dv(100, 2, 1, 12, 8, false); /* two tiles: the online softmax rescales the narrower context */
  px_tfree();
}

static void test_flash(void) {
  px_tseed(12);
  check_flash(5, 4, 2, 3, 0.0f, 0, false);    /* one partial tile, GQA */
  check_flash(70, 2, 1, 8, 0.0f, 0, false);   /* two query and key tiles */
  check_flash(130, 4, 4, 16, 0.3f, 0, false); /* three tiles, dropout */
  check_flash(300, 2, 1, 8, 0.0f, 0, false);  /* five tiles: the online softmax's rescale, four times */
  /* sliding windows: within one tile, across tile edges (key tiles before a query tile's windows skipped), with
   * dropout, and one wider than the sequence (full attention) */
  check_flash(5, 4, 2, 3, 0.0f, 2, false);
  check_flash(70, 2, 1, 8, 0.0f, 9, false);
  check_flash(200, 4, 4, 16, 0.3f, 33, false);
  check_flash(300, 2, 1, 8, 0.0f, 64, false);
  check_flash(40, 2, 1, 8, 0.0f, 1000, false);
  /* attention sinks (gpt-oss; the unfused softmax's against finite differences in test_attention_softmax_sinks):
   * one tile, several with dropout, a window */
  check_flash(5, 4, 2, 3, 0.0f, 0, true);
  check_flash(130, 4, 4, 16, 0.3f, 0, true);
  check_flash(70, 2, 1, 8, 0.0f, 9, true);
  px_tfree();
}

/* The global positions of rank `rank`'s share of a sequence of s under
 * load-balanced context parallelism: 2 cp chunks of s / (2 cp), the rank
 * holding chunk rank, then chunk 2 cp - 1 - rank. */
static int32_t *cp_positions(int64_t s, int64_t cp, int64_t rank) {
  const int64_t c = s / (2 * cp);
  int32_t *pos = px_talloc((size_t)(2 * c) * sizeof *pos);
  for (int64_t i = 0; i < c; i++) pos[i] = (int32_t)(rank * c + i), pos[c + i] = (int32_t)((2 * cp - 1 - rank) * c + i);
  return pos;
}

/* dst (n, width) = rows pos[i] of src (., width). */
static float *gather_rows(const float *src, const int32_t *pos, int64_t n, int64_t width) {
  float *dst = px_tfloats(n * width);
  for (int64_t i = 0; i < n; i++) memcpy(dst + i * width, src + pos[i] * width, (size_t)width * sizeof *dst);
  return dst;
}

/* dst (hq, n) = columns pos[i] of the log-sum-exp src (hq, s). */
static float *gather_lse(const float *src, const int32_t *pos, int64_t n, int64_t hq, int64_t s) {
  float *dst = px_tfloats(hq * n);
  for (int64_t h = 0; h < hq; h++)
    for (int64_t i = 0; i < n; i++) dst[h * n + i] = src[h * s + pos[i]];
  return dst;
}

/* Context parallelism on the fused attention: each of cp ranks holds its
 * load-balanced share of q, k, v; its queries run against every rank's key
 * block (in ring order, own block first) and the partial results are merged,
 * then against all the keys gathered in one call. ctx and lse must be the
 * whole-sequence kernel's rows at those positions, and the backward summed
 * over key blocks (dq) and over query ranks (dk, dv) the whole-sequence
 * backward's rows. Only the summation order differs. With sinks, folded in
 * once every block is merged, their gradient is the whole one summed over
 * the ranks: over key blocks from each row's probability seen in every block
 * (px_k_flash_bwd_seen), or in one call over the gathered keys. cp <= 3,
 * s % (2 cp) == 0. */
static void check_flash_blocks(int64_t s, int64_t cp, int64_t hq, int64_t hkv, int64_t d, float p, bool with_sinks) {
  const int64_t nq = s * hq * d, nkv = s * hkv * d, n = s / cp, wq = hq * d, wkv = hkv * d;
  const uint64_t seed = 78, off = 5000;
  float *q = px_trand(nq, -2, 2), *k = px_trand(nkv, -2, 2), *v = px_trand(nkv, -1, 1), *dctx = px_trand(nq, -1, 1);
  float *ctx = px_tconst(nq, NAN), *lse = px_tconst(hq * s, NAN);
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nkv, ACC0), *gv = px_tconst(nkv, ACC0);
  float *sinks = with_sinks ? px_trand(hq, -1, 2) : NULL, *gsink = px_tconst(hq, 0.0f);
  float *rsink = px_tconst(hq, 0.0f), *asink = px_tconst(hq, 0.0f); /* the ring's and the gathered keys' */
  px_k_flash_fwd(ctx, lse, q, k, v, s, s, hq, hkv, d, NULL, NULL, 0, s, p, seed, off);
  if (sinks) px_k_flash_sink_fold(ctx, lse, sinks, s, hq, d);
  px_k_flash_bwd_dv(gq, gk, gv, sinks ? gsink : NULL, dctx, q, k, v, ctx, lse, s, s, hq, hkv, d, d, NULL, NULL, 0, s, p,
                    seed, off);
  int32_t *pos[3];
  float *qr[3], *kr[3], *vr[3], *dkr[3], *dvr[3];
  for (int64_t r = 0; r < cp; r++) {
    pos[r] = cp_positions(s, cp, r);
    qr[r] = gather_rows(q, pos[r], n, wq);
    kr[r] = gather_rows(k, pos[r], n, wkv), vr[r] = gather_rows(v, pos[r], n, wkv);
    dkr[r] = px_tconst(n * wkv, ACC0), dvr[r] = px_tconst(n * wkv, ACC0);
  }
  for (int64_t i = 0; i < cp; i++) {
    float *c = px_tconst(n * wq, NAN), *l = px_tconst(hq * n, NAN), *c2 = px_tfloats(n * wq), *l2 = px_tfloats(hq * n);
    for (int64_t step = 0; step < cp; step++) {
      const int64_t j = (i - step + cp) % cp;
      px_k_flash_fwd(step ? c2 : c, step ? l2 : l, qr[i], kr[j], vr[j], n, n, hq, hkv, d, pos[i], pos[j], 0, s, p, seed,
                     off);
      if (step) px_k_flash_merge(c, l, c2, l2, n, hq, d);
    }
    if (sinks) px_k_flash_sink_fold(c, l, sinks, n, hq, d);
    CU_ASSERT(close_to("cp flash ctx", c, d_of(gather_rows(ctx, pos[i], n, wq), n * wq), n * wq, 1e-5, 1e-6, 0.0));
    CU_ASSERT(close_to("cp flash lse", l, d_of(gather_lse(lse, pos[i], n, hq, s), hq * n), hq * n, 1e-6, 1e-6, 0.0));
    float *dqi = px_tconst(n * wq, ACC0), *doi = gather_rows(dctx, pos[i], n, wq), *seen = px_tconst(hq * n, 0.0f);
    for (int64_t j = 0; j < cp; j++)
      px_k_flash_bwd_seen(dqi, dkr[j], dvr[j], sinks ? seen : NULL, doi, qr[i], kr[j], vr[j], c, l, n, n, hq, hkv, d,
                          pos[i], pos[j], 0, s, p, seed, off);
    if (sinks) px_k_flash_sink_bwd(rsink, seen, doi, c, l, n, hq, d);
    CU_ASSERT(close_to("cp flash dq", dqi, d_of(gather_rows(gq, pos[i], n, wq), n * wq), n * wq, 1e-5, 1e-5, 0.0));
  }
  for (int64_t j = 0; j < cp; j++) {
    double *wk = d_of(gather_rows(gk, pos[j], n, wkv), n * wkv), *wv = d_of(gather_rows(gv, pos[j], n, wkv), n * wkv);
    CU_ASSERT(close_to("cp flash dk", dkr[j], wk, n * wkv, 1e-5, 1e-5, 0.0));
    CU_ASSERT(close_to("cp flash dv", dvr[j], wv, n * wkv, 1e-5, 1e-5, 0.0));
  }
  /* all-gathered K/V, rank-major: a key tile's positions can fall (rank 0's
   * last chunk, then rank 1's first), one call per query rank */
  int32_t *all = px_talloc((size_t)s * sizeof *all);
  for (int64_t r = 0; r < cp; r++) memcpy(all + r * n, pos[r], (size_t)n * sizeof *all);
  float *ka = gather_rows(k, all, s, wkv), *va = gather_rows(v, all, s, wkv);
  float *dka = px_tconst(s * wkv, ACC0), *dva = px_tconst(s * wkv, ACC0);
  for (int64_t i = 0; i < cp; i++) {
    float *c = px_tconst(n * wq, NAN), *l = px_tconst(hq * n, NAN), *dqi = px_tconst(n * wq, ACC0);
    px_k_flash_fwd(c, l, qr[i], ka, va, n, s, hq, hkv, d, pos[i], all, 0, s, p, seed, off);
    if (sinks) px_k_flash_sink_fold(c, l, sinks, n, hq, d);
    CU_ASSERT(close_to("ag flash ctx", c, d_of(gather_rows(ctx, pos[i], n, wq), n * wq), n * wq, 1e-5, 1e-6, 0.0));
    CU_ASSERT(close_to("ag flash lse", l, d_of(gather_lse(lse, pos[i], n, hq, s), hq * n), hq * n, 1e-6, 1e-6, 0.0));
    px_k_flash_bwd_dv(dqi, dka, dva, sinks ? asink : NULL, gather_rows(dctx, pos[i], n, wq), qr[i], ka, va, c, l, n, s,
                      hq, hkv, d, d, pos[i], all, 0, s, p, seed, off);
    CU_ASSERT(close_to("ag flash dq", dqi, d_of(gather_rows(gq, pos[i], n, wq), n * wq), n * wq, 1e-5, 1e-5, 0.0));
  }
  CU_ASSERT(close_to("ag flash dk", dka, d_of(gather_rows(gk, all, s, wkv), s * wkv), s * wkv, 1e-5, 1e-5, 0.0));
  CU_ASSERT(close_to("ag flash dv", dva, d_of(gather_rows(gv, all, s, wkv), s * wkv), s * wkv, 1e-5, 1e-5, 0.0));
  if (!sinks) return;
  CU_ASSERT(close_to("cp flash dsinks", rsink, d_of(gsink, hq), hq, 1e-5, 1e-5, 0.0));
  CU_ASSERT(close_to("ag flash dsinks", asink, d_of(gsink, hq), hq, 1e-5, 1e-5, 0.0));
}

static void test_flash_blocks(void) {
  px_tseed(13);
  check_flash_blocks(12, 3, 2, 1, 4, 0.0f, false);   /* one tile, chunks of 2 */
  check_flash_blocks(200, 2, 4, 2, 8, 0.0f, false);  /* GQA; chunks of 50: a tile spans both chunks of a rank */
  check_flash_blocks(200, 2, 2, 2, 16, 0.3f, false); /* dropout at global positions */
  check_flash_blocks(198, 3, 4, 2, 8, 0.3f, false);  /* three ranks, GQA and dropout */
  /* attention sinks (gpt-oss): folded after the merge, their gradient from every block's rows */
  check_flash_blocks(12, 3, 2, 1, 4, 0.0f, true);
  check_flash_blocks(200, 2, 4, 2, 8, 0.0f, true);
  check_flash_blocks(198, 3, 4, 2, 8, 0.3f, true);
  px_tfree();
}

/* Explicit positions 0..s-1 give the bits of NULL ones; rows that see no key
 * get ctx 0 and lse -INFINITY and add nothing in the backward; a merge with a
 * block that saw nothing leaves ctx and lse as they were, one onto a row that
 * saw nothing takes the other's, and two rows merge by hand. */
static void test_flash_merge(void) {
  px_tseed(14);
  const int64_t s = 70, hq = 2, hkv = 1, d = 4, nq = s * hq * d, nkv = s * hkv * d;
  float *q = px_trand(nq, -2, 2), *k = px_trand(nkv, -2, 2), *v = px_trand(nkv, -1, 1);
  int32_t *pos = px_talloc((size_t)s * sizeof *pos);
  for (int64_t i = 0; i < s; i++) pos[i] = (int32_t)i;
  float *c0 = px_tfloats(nq), *l0 = px_tfloats(hq * s), *c1 = px_tfloats(nq), *l1 = px_tfloats(hq * s);
  px_k_flash_fwd(c0, l0, q, k, v, s, s, hq, hkv, d, NULL, NULL, 0, s, 0.2f, 3, 9);
  px_k_flash_fwd(c1, l1, q, k, v, s, s, hq, hkv, d, pos, pos, 0, s, 0.2f, 3, 9);
  CU_ASSERT_EQUAL(memcmp(c0, c1, (size_t)nq * sizeof *c0), 0);
  CU_ASSERT_EQUAL(memcmp(l0, l1, (size_t)(hq * s) * sizeof *l0), 0);

  /* keys all after the queries: every row sees nothing */
  int32_t *late = px_talloc((size_t)s * sizeof *late);
  for (int64_t i = 0; i < s; i++) late[i] = (int32_t)(s + i);
  float *c2 = px_tconst(nq, NAN), *l2 = px_tconst(hq * s, NAN);
  px_k_flash_fwd(c2, l2, q, k, v, s, s, hq, hkv, d, NULL, late, 0, 2 * s, 0.2f, 3, 9);
  bool empty = true;
  for (int64_t i = 0; i < nq; i++) empty = empty && c2[i] == 0.0f;
  for (int64_t i = 0; i < hq * s; i++) empty = empty && l2[i] == -INFINITY;
  CU_ASSERT(empty);
  px_k_flash_merge(c1, l1, c2, l2, s, hq, d);
  px_k_flash_merge(c1, l1, px_tconst(nq, NAN), l2, s, hq, d); /* whatever the other ctx holds */
  CU_ASSERT_EQUAL(memcmp(c0, c1, (size_t)nq * sizeof *c0), 0);
  CU_ASSERT_EQUAL(memcmp(l0, l1, (size_t)(hq * s) * sizeof *l0), 0);
  /* the backward of rows that saw nothing adds nothing, even against keys they could see */
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nkv, ACC0), *gv = px_tconst(nkv, ACC0);
  px_k_flash_bwd(gq, gk, gv, px_trand(nq, -1, 1), q, k, v, c2, l2, s, s, hq, hkv, d, NULL, NULL, 0, s, 0.2f, 3, 9);
  bool still = true;
  for (int64_t i = 0; i < nq; i++) still = still && gq[i] == ACC0;
  for (int64_t i = 0; i < nkv; i++) still = still && gk[i] == ACC0 && gv[i] == ACC0;
  CU_ASSERT(still);
  px_k_flash_merge(c2, l2, c0, l0, s, hq, d); /* nothing, then the whole */
  CU_ASSERT_EQUAL(memcmp(c0, c2, (size_t)nq * sizeof *c0), 0);
  CU_ASSERT_EQUAL(memcmp(l0, l2, (size_t)(hq * s) * sizeof *l0), 0);

  /* one row, one head, D = 2: lse log(e^0 + e^log 3) = log 4, weights 1/4 and 3/4 */
  float c[2] = {1.0f, -2.0f}, l[1] = {0.0f}, cb[2] = {5.0f, 2.0f}, lb[1] = {logf(3.0f)};
  px_k_flash_merge(c, l, cb, lb, 1, 1, 2);
  PX_ASSERT_REL(l[0], log(4.0), 1e-6);
  PX_ASSERT_REL(c[0], 0.25 * 1 + 0.75 * 5, 1e-6);
  PX_ASSERT_REL(c[1], 0.25 * -2 + 0.75 * 2, 1e-6);
  px_tfree();
}

typedef struct {
  int64_t rows, t, hq; /* hq > 0: with sink logits, one per head of hq, after the scores in `in` */
} softmax_ctx;

/* Causal softmax alone: in = scores (rows, T), row r sees columns 0..r % T; with sinks (gpt-oss), in = [scores,
 * sinks (hq)], the sink of row r's head (r / T % hq) one more logit of the denominator. */
static void ref_softmax(double *out, const double *in, const void *vctx) {
  const softmax_ctx *s = vctx;
  for (int64_t r = 0; r < s->rows; r++) {
    int64_t i = r % s->t;
    const double *x = in + r * s->t, *sink = s->hq > 0 ? in + s->rows * s->t + r / s->t % s->hq : NULL;
    double mx = sink ? *sink : -INFINITY, sum = 0.0;
    for (int64_t j = 0; j <= i; j++) mx = x[j] > mx ? x[j] : mx;
    if (sink) sum = exp(*sink - mx);
    for (int64_t j = 0; j <= i; j++) sum += exp(x[j] - mx);
    for (int64_t j = 0; j < s->t; j++) out[r * s->t + j] = j <= i ? exp(x[j] - mx) / sum : 0.0;
  }
}

/* The softmax backward on its own: dscores in the upper triangle stays as it was. */
static void test_attention_softmax_bwd(void) {
  px_tseed(11);
  softmax_ctx s = {2 * 5, 5, 0};
  const int64_t n = s.rows * s.t;
  float *x = px_trand(n, -3, 3), *p = px_tfloats(n);
  px_k_attn_softmax_fwd(p, x, 2, s.t, 0);
  double *in = d_of(x, n), *want = dalloc(n);
  ref_softmax(want, in, &s);
  CU_ASSERT(fwd_close("causal softmax", p, want, n));
  float *r = px_trand(n, -1, 1), *dx = px_tconst(n, ACC0);
  px_k_attn_softmax_bwd(dx, r, p, 2, s.t, 0);
  double *g = dalloc(n);
  fd_grad(g, ref_softmax, &s, in, n, n, d_of(r, n));
  CU_ASSERT(grad_close("causal softmax dscores", dx, g, n));
  px_tfree();
}

/* gpt-oss's attention sinks in the unfused softmax: 2 batch rows of 3 heads, each head's sink logit in every
 * row's denominator (the first rows see one key, so the sink takes much of them), against finite differences of
 * the scores and the sinks (their gradient summed over the head's rows of both batch rows). */
static void test_attention_softmax_sinks(void) {
  px_tseed(13);
  softmax_ctx s = {2 * 3 * 5, 5, 3};
  const int64_t n = s.rows * s.t;
  float *x = px_trand(n, -3, 3), *sinks = px_trand(s.hq, -1, 2), *p = px_tfloats(n);
  px_k_attn_softmax_sink_fwd(p, x, sinks, s.rows / s.t, s.hq, s.t, 0);
  double *in = dalloc(n + s.hq), *want = dalloc(n);
  pack(pack(in, x, n), sinks, s.hq);
  ref_softmax(want, in, &s);
  CU_ASSERT(fwd_close("softmax with sinks", p, want, n));
  float *r = px_trand(n, -1, 1), *dx = px_tconst(n, ACC0), *ds = px_tconst(s.hq, ACC0);
  px_k_attn_softmax_sink_bwd(dx, ds, r, p, s.rows / s.t, s.hq, s.t, 0);
  double *g = dalloc(n + s.hq);
  fd_grad(g, ref_softmax, &s, in, n + s.hq, n, d_of(r, n));
  CU_ASSERT(grad_close("softmax with sinks dscores", dx, g, n));
  CU_ASSERT(grad_close("softmax with sinks dsinks", ds, g + n, s.hq));
  px_tfree();
}

/* ======================= dropout ======================= */

typedef struct {
  const uint8_t *mask;
  int64_t n;
  double scale;
} dropout_ctx;

static void ref_dropout(double *out, const double *in, const void *vctx) {
  const dropout_ctx *d = vctx;
  for (int64_t i = 0; i < d->n; i++) out[i] = d->mask[i] ? in[i] * d->scale : 0.0;
}

static void test_dropout(void) {
  px_tseed(12);
  const int64_t n = 20000;
  float *x = px_trand(n, -1, 1), *out = px_tfloats(n);
  uint8_t *mask = px_talloc((size_t)n);
  /* p = 0: an exact copy, all kept */
  px_k_dropout_fwd(out, mask, x, n, 0.0f, 42, 0);
  CU_ASSERT(memcmp(out, x, (size_t)n * sizeof *x) == 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) kept += mask[i];
  CU_ASSERT_EQUAL(kept, n);

  /* p = 0.3: kept fraction 0.7 within 0.02 (6 standard deviations at n = 20000),
   * kept values scaled by 1 / 0.7, dropped ones 0 */
  const float p = 0.3f;
  px_k_dropout_fwd(out, mask, x, n, p, 42, 1000);
  kept = 0;
  bool values_ok = true;
  for (int64_t i = 0; i < n; i++) {
    kept += mask[i];
    values_ok = values_ok && out[i] == (mask[i] ? x[i] * (1.0f / (1.0f - p)) : 0.0f);
  }
  CU_ASSERT(values_ok);
  CU_ASSERT(fabs((double)kept / (double)n - 0.7) < 0.02);
  /* computed in two pieces with offsets 1000 and 1000 + 7001: the same mask */
  uint8_t *mask2 = px_talloc((size_t)n);
  float *out2 = px_tfloats(n);
  px_k_dropout_fwd(out2, mask2, x, 7001, p, 42, 1000);
  px_k_dropout_fwd(out2 + 7001, mask2 + 7001, x + 7001, n - 7001, p, 42, 1000 + 7001);
  CU_ASSERT(memcmp(mask, mask2, (size_t)n) == 0);
  CU_ASSERT(memcmp(out, out2, (size_t)n * sizeof *out) == 0);
  /* another seed, another mask; in place gives the same values */
  px_k_dropout_fwd(out2, mask2, x, n, p, 43, 1000);
  CU_ASSERT(memcmp(mask, mask2, (size_t)n) != 0);
  memcpy(out2, x, (size_t)n * sizeof *x);
  px_k_dropout_fwd(out2, mask2, out2, n, p, 42, 1000);
  CU_ASSERT(memcmp(out, out2, (size_t)n * sizeof *out) == 0);
  /* p = 1 drops everything */
  px_k_dropout_fwd(out2, mask2, x, 100, 1.0f, 42, 0);
  CU_ASSERT(out2[0] == 0.0f && out2[99] == 0.0f && mask2[0] == 0 && mask2[99] == 0);

  /* backward on the first 64 elements against finite differences */
  const int64_t nb = 64;
  dropout_ctx d = {mask, nb, 1.0 / (1.0 - (double)p)};
  float *r = px_trand(nb, -1, 1), *dx = px_tconst(nb, ACC0);
  px_k_dropout_bwd(dx, r, mask, nb, p);
  double *g = dalloc(nb);
  fd_grad(g, ref_dropout, &d, d_of(x, nb), nb, nb, d_of(r, nb));
  CU_ASSERT(grad_close("dropout dinp", dx, g, nb));
  px_tfree();
}

/* ======================= cross-entropy ======================= */

typedef struct {
  const int32_t *targets;
  int64_t n, vpad, vreal;
} ce_ctx;

/* Per-row loss over the unsharded logits in = (N, Vpad), padding excluded. */
static void ref_ce(double *out, const double *in, const void *vctx) {
  const ce_ctx *c = vctx;
  for (int64_t i = 0; i < c->n; i++) {
    const double *l = in + i * c->vpad;
    if (c->targets[i] < 0) {
      out[i] = 0.0;
      continue;
    }
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < c->vreal; j++) mx = l[j] > mx ? l[j] : mx;
    for (int64_t j = 0; j < c->vreal; j++) s += exp(l[j] - mx);
    out[i] = log(s) + mx - l[c->targets[i]];
  }
}

/* The vocab-parallel loss over `shards` shards, all-reducing by hand. */
static void ce_sharded(float *losses, float *dlogits, const float *logits, const int32_t *targets, int64_t n,
                       int64_t vpad, int64_t vreal, int shards, float scale) {
  int64_t vl = vpad / shards;
  float *gmax = px_tconst(n, -INFINITY), *gsum = px_tconst(n, 0), *tl = px_tconst(n, 0), *part = px_tfloats(n);
  /* each shard's logits as a contiguous (N, Vl) block, as a rank holds them */
  float *local = px_tfloats(n * vl), *dlocal = px_tfloats(n * vl);
  for (int pass = 0; pass < 3; pass++) {
    for (int s = 0; s < shards; s++) {
      for (int64_t i = 0; i < n; i++) memcpy(local + i * vl, logits + i * vpad + s * vl, (size_t)vl * sizeof *local);
      if (pass == 0) {
        px_k_ce_max_local(part, local, n, s * vl, vl, vreal);
        for (int64_t i = 0; i < n; i++) gmax[i] = part[i] > gmax[i] ? part[i] : gmax[i];
        px_k_ce_target_local(part, local, targets, n, s * vl, vl);
        for (int64_t i = 0; i < n; i++) tl[i] += part[i];
      } else if (pass == 1) {
        px_k_ce_sumexp_local(part, local, gmax, n, s * vl, vl, vreal);
        for (int64_t i = 0; i < n; i++) gsum[i] += part[i];
      } else {
        px_k_ce_bwd(dlocal, local, gmax, gsum, targets, n, s * vl, vl, vreal, scale);
        for (int64_t i = 0; i < n; i++) memcpy(dlogits + i * vpad + s * vl, dlocal + i * vl, (size_t)vl * sizeof *local);
      }
    }
  }
  px_k_ce_loss(losses, gmax, gsum, tl, targets, n);
}

static void test_cross_entropy(void) {
  px_tseed(13);
  enum { N = 6, VPAD = 40, VREAL = 37 };
  const int32_t targets[N] = {0, 36, -1, 17, 9, 36};
  ce_ctx c = {targets, N, VPAD, VREAL};
  float *logits = px_trand(N * VPAD, -3, 3);
  for (int64_t i = 0; i < N; i++) /* padding that would dominate if it were counted */
    for (int64_t j = VREAL; j < VPAD; j++) logits[i * VPAD + j] = 50.0f;
  const float scale = 1.0f / 5.0f; /* mean over the 5 valid positions */

  float *loss1 = px_tfloats(N), *dl1 = px_tconst(N * VPAD, NAN);
  ce_sharded(loss1, dl1, logits, targets, N, VPAD, VREAL, 1, scale);
  double *in = d_of(logits, N * VPAD), *want = dalloc(N);
  ref_ce(want, in, &c);
  CU_ASSERT(fwd_close("cross-entropy loss", loss1, want, N));
  CU_ASSERT_EQUAL(loss1[2], 0.0f); /* ignored position */

  /* gradient (written, not accumulated) against finite differences of
   * L = scale * sum(loss) */
  double *r = dalloc(N), *g = dalloc(N * VPAD);
  for (int64_t i = 0; i < N; i++) r[i] = scale;
  fd_grad(g, ref_ce, &c, in, N * VPAD, N, r);
  CU_ASSERT(close_to("cross-entropy dlogits", dl1, g, N * VPAD, BWD_RTOL, BWD_ATOL, 0.0));
  bool pad_zero = true, ignored_zero = true;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = VREAL; j < VPAD; j++) pad_zero = pad_zero && dl1[i * VPAD + j] == 0.0f;
  for (int64_t j = 0; j < VPAD; j++) ignored_zero = ignored_zero && dl1[2 * VPAD + j] == 0.0f;
  CU_ASSERT(pad_zero);
  CU_ASSERT(ignored_zero);

  /* 2 and 4 shards (the last shard of 4 holds 7 real columns and the 3 pads) */
  for (int shards = 2; shards <= 4; shards += 2) {
    float *loss = px_tfloats(N), *dl = px_tconst(N * VPAD, NAN);
    ce_sharded(loss, dl, logits, targets, N, VPAD, VREAL, shards, scale);
    CU_ASSERT(shard_close("cross-entropy loss, sharded", loss, loss1, N));
    CU_ASSERT(shard_close("cross-entropy dlogits, sharded", dl, dl1, N * VPAD));
  }
  /* a shard holding only padding contributes -inf to the max and 0 to the sum */
  float mx, sm, gm = 1.0f;
  px_k_ce_max_local(&mx, logits + VREAL, 1, VREAL, VPAD - VREAL, VREAL);
  px_k_ce_sumexp_local(&sm, logits + VREAL, &gm, 1, VREAL, VPAD - VREAL, VREAL);
  CU_ASSERT(isinf(mx) && mx < 0);
  CU_ASSERT_EQUAL(sm, 0.0f);
  /* the gradient can overwrite the logits in place */
  float *inplace = px_tfloats(N * VPAD), *gmax = px_tfloats(N), *gsum = px_tfloats(N);
  memcpy(inplace, logits, (size_t)(N * VPAD) * sizeof *inplace);
  px_k_ce_max_local(gmax, inplace, N, 0, VPAD, VREAL);
  px_k_ce_sumexp_local(gsum, inplace, gmax, N, 0, VPAD, VREAL);
  px_k_ce_bwd(inplace, inplace, gmax, gsum, targets, N, 0, VPAD, VREAL, scale);
  CU_ASSERT(memcmp(inplace, dl1, (size_t)(N * VPAD) * sizeof *inplace) == 0);
  px_tfree();
}

/* ======================= mixture of experts ======================= */

enum { MOE_EMAX = 16 };

typedef struct {
  int64_t n, E, k;
  bool sigmoid, norm;
  double aux;
  const int32_t *idx; /* (n, k): the choice, held fixed (top-k is piecewise constant) */
  const double *w;    /* (n, k): the loss's weight of each gate */
  const int32_t *plain; /* (n, k): the load-balancing loss's choice (a plain top-k), or NULL: idx */
} route_ctx;

/* The router's probabilities of one token's logits: softmax, or each expert's sigmoid score. */
static void route_probs(double *p, const double *l, int64_t E, bool sigmoid) {
  double mx = l[0], sum = 0.0;
  for (int64_t e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
  for (int64_t e = 0; e < E; e++) sum += exp(l[e] - mx);
  for (int64_t e = 0; e < E; e++) p[e] = sigmoid ? 1.0 / (1.0 + exp(-l[e])) : exp(l[e] - mx) / sum;
}

/* L = sum_tj w_tj g_tj + aux E sum_e f_e mean_t p_te of the logits (n, E): g the chosen probabilities
 * (over their sum with the sigmoid router or norm), f_e the share of the n k choices that went to e. */
static void ref_route_loss(double *out, const double *in, const void *vctx) {
  const route_ctx *c = vctx;
  double p[MOE_EMAX], f[MOE_EMAX] = {0}, mean[MOE_EMAX] = {0}, L = 0.0;
  for (int64_t i = 0; i < c->n * c->k; i++) f[(c->plain ? c->plain : c->idx)[i]] += 1.0 / (double)(c->n * c->k);
  for (int64_t t = 0; t < c->n; t++) {
    route_probs(p, in + t * c->E, c->E, c->sigmoid);
    double s = 0.0;
    for (int64_t j = 0; j < c->k; j++) s += p[c->idx[t * c->k + j]];
    for (int64_t j = 0; j < c->k; j++) {
      double g = p[c->idx[t * c->k + j]];
      L += c->w[t * c->k + j] * (c->sigmoid || c->norm ? g / s : g);
    }
    for (int64_t e = 0; e < c->E; e++) mean[e] += p[e] / (double)c->n;
  }
  for (int64_t e = 0; e < c->E; e++) L += c->aux * (double)c->E * f[e] * mean[e];
  out[0] = L;
}

/* Router forward against the double reference (probabilities, top-k with ties to the lower expert,
 * gates), and its backward against finite differences of L = sum w g (+ the load-balancing term). */
static void test_moe_route(void) {
  struct {
    bool sigmoid, norm;
    double aux;
    int64_t k;
  } cases[] = {{false, false, 0.01, 2}, {false, true, 0.0, 2}, {false, true, 0.03, 3}, {false, false, 0.05, 1},
               {true, false, 0.02, 2},  {true, false, 0.0, 3},  {true, true, 0.0, 1}};
  enum { N = 6, E = 5 };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    px_tseed(40 + ci);
    int64_t k = cases[ci].k;
    float *logits = px_trand(N * E, -2, 2);
    /* a tie: token 1's two largest logits are equal (experts 1 and 3: 1 first) */
    logits[E + 1] = logits[E + 3] = 2.5f;
    float *probs = px_tcopy(logits, N * E), *gates = px_tconst(N * k, NAN);
    int32_t *idx = px_talloc((size_t)(N * k) * sizeof *idx);
    px_k_moe_route_fwd(probs, idx, gates, NULL, N, E, k, cases[ci].sigmoid, cases[ci].norm, 0, 0);
    double *in = d_of(logits, N * E), *pw = dalloc(N * E), *gw = dalloc(N * k);
    bool idx_ok = true;
    for (int64_t t = 0; t < N; t++) {
      route_probs(pw + t * E, in + t * E, E, cases[ci].sigmoid);
      double s = 0.0;
      for (int64_t j = 0; j < k; j++) { /* place j: the expert with j ahead of it (larger, or equal and lower) */
        int64_t want = -1;
        for (int64_t e = 0; e < E; e++) {
          int64_t ahead = 0;
          for (int64_t f = 0; f < E; f++) ahead += in[t * E + f] > in[t * E + e] || (in[t * E + f] == in[t * E + e] && f < e);
          if (ahead == j) want = e;
        }
        idx_ok = idx_ok && idx[t * k + j] == want;
        s += pw[t * E + want];
      }
      for (int64_t j = 0; j < k; j++) {
        double g = pw[t * E + idx[t * k + j]];
        gw[t * k + j] = cases[ci].sigmoid || cases[ci].norm ? g / s : g;
      }
    }
    if (!idx_ok) fprintf(stderr, "\n  moe route case %zu: top-k differs from the reference\n", ci);
    CU_ASSERT(idx_ok);
    CU_ASSERT(idx[k] == 1 && (k < 2 || idx[k + 1] == 3));
    CU_ASSERT(fwd_close("moe route probs", probs, pw, N * E));
    CU_ASSERT(fwd_close("moe route gates", gates, gw, N * k));
    /* backward: dL/dlogits, L = sum w g + aux term */
    float *w = px_trand(N * k, -1, 1), *dl = px_tconst(N * E, ACC0), *work = px_tfloats(2 * E);
    px_k_moe_route_bwd(dl, work, w, probs, idx, NULL, N, E, k, cases[ci].sigmoid, cases[ci].norm, (float)cases[ci].aux);
    route_ctx rc = {N, E, k, cases[ci].sigmoid, cases[ci].norm, cases[ci].aux, idx, d_of(w, N * k), NULL};
    double one = 1.0, *g = dalloc(N * E);
    fd_grad(g, ref_route_loss, &rc, in, N * E, 1, &one);
    char what[64];
    snprintf(what, sizeof what, "moe route dlogits (case %zu)", ci);
    CU_ASSERT(grad_close(what, dl, g, N * E));
    px_tfree();
  }
}

/* Expert-major positions; unpermute(permute(x)) with each token's gates summing to 1 is x; the
 * backwards are the adjoints of the forwards (<P x, s> = <x, P^T s>). */
static void test_moe_permute(void) {
  px_tseed(50);
  enum { N = 7, H = 5, E = 4, K = 2 };
  int32_t idx[N * K], counts[E];
  int64_t pos[N * K], work[E + 1];
  for (int64_t t = 0; t < N; t++) { /* two distinct experts of 0..2: expert 3 takes no row */
    idx[t * K] = (int32_t)(px_tunit() * 3);
    idx[t * K + 1] = (idx[t * K] + 1 + (int32_t)(px_tunit() * 2)) % 3;
  }
  px_k_moe_positions(pos, counts, work, idx, N, E, K);
  CU_ASSERT(counts[3] == 0 && counts[0] + counts[1] + counts[2] == N * K);
  bool perm = true, order = true;
  int64_t seen[N * K] = {0};
  for (int64_t i = 0; i < N * K; i++) {
    perm = perm && pos[i] >= 0 && pos[i] < N * K && !seen[pos[i]]++;
    /* expert-major, then token and choice order: pos is the rank of (expert, i) */
    int64_t r = 0;
    for (int64_t i2 = 0; i2 < N * K; i2++) r += idx[i2] < idx[i] || (idx[i2] == idx[i] && i2 < i);
    order = order && pos[i] == r;
  }
  CU_ASSERT(perm);
  CU_ASSERT(order);
  float *x = px_trand(N * H, -1, 1), *send = px_tconst(N * K * H, NAN), *gates = px_tfloats(N * K);
  for (int64_t t = 0; t < N; t++) {
    float a = 0.1f + 0.8f * (float)px_tunit();
    gates[t * K] = a, gates[t * K + 1] = 1.0f - a;
  }
  px_k_moe_permute_fwd(send, x, pos, N, H, K);
  float *y = px_tconst(N * H, 0.0f); /* it accumulates */
  px_k_moe_unpermute_fwd(y, send, gates, pos, N, H, K);
  CU_ASSERT(fwd_close("unpermute(permute(x))", y, d_of(x, N * H), N * H));
  /* adjoints: <permute(x), s> = <x, permute_bwd(s)>; <unpermute(r, g), dy> = <r, dret> = <g, dgates> */
  float *s = px_trand(N * K * H, -1, 1), *dx = px_tconst(N * H, ACC0), *dy = px_trand(N * H, -1, 1);
  float *dret = px_tconst(N * K * H, ACC0), *dg = px_tconst(N * K, ACC0);
  px_k_moe_permute_bwd(dx, s, pos, N, H, K);
  px_k_moe_unpermute_bwd(dret, dg, dy, s, gates, pos, N, H, K);
  memset(y, 0, (size_t)(N * H) * sizeof *y);
  px_k_moe_unpermute_fwd(y, s, gates, pos, N, H, K);
  double a = 0, b = 0, c = 0, d = 0, e = 0;
  for (int64_t i = 0; i < N * K * H; i++) a += (double)send[i] * s[i], d += ((double)dret[i] - ACC0) * s[i];
  for (int64_t i = 0; i < N * H; i++) b += (double)x[i] * ((double)dx[i] - ACC0), c += (double)y[i] * dy[i];
  for (int64_t i = 0; i < N * K; i++) e += (double)gates[i] * ((double)dg[i] - ACC0);
  PX_ASSERT_REL(b, a, 1e-5);
  /* <unpermute(s, g), dy> = sum_tj g_tj <s_pos(tj), dy_t> = <s, dret> = <g, dgates> */
  PX_ASSERT_REL(d, c, 1e-5);
  PX_ASSERT_REL(e, c, 1e-5);
  px_tfree();
}

/* Group-limited routing (Megatron-Core's group_limited_topk) against a reference by sorting: 8 experts in 4 groups,
 * top 4 from 2 groups, each group scored by its top 2 (of the logits with the softmax router's renormalised gates,
 * else of the probabilities or sigmoid scores); the gates as without groups over the chosen experts; some tokens'
 * plain top-4 leaves their groups; the backward against finite differences, the load-balancing shares those of the
 * plain top-k. */
static int by_value_desc(const void *a, const void *b) { /* (value, index) pairs: the value descending, then index */
  const double *x = a, *y = b;
  if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
  return (x[1] > y[1]) - (x[1] < y[1]);
}
static void test_moe_groups(void) {
  enum { N = 24, E = 8, K = 4, G = 4, GT = 2, GS = E / G };
  struct {
    bool sigmoid, norm;
  } cases[] = {{false, true}, {false, false}, {true, false}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    px_tseed(60 + ci);
    const bool sg = cases[ci].sigmoid, nm = cases[ci].norm;
    float *logits = px_trand(N * E, -2, 2), *probs = px_tcopy(logits, N * E), *gates = px_tconst(N * K, NAN);
    float *work = px_tfloats(3 * G + K);
    int32_t *idx = px_talloc((size_t)(N * K) * sizeof *idx), *plain = px_talloc((size_t)(N * K) * sizeof *plain);
    px_k_moe_route_fwd(probs, idx, gates, work, N, E, K, sg, nm, G, GT);
    bool same = true;
    int left = 0; /* tokens whose plain top-k leaves their groups */
    for (int64_t t = 0; t < N; t++) {
      double p[E], s[E], gsc[G][2], ex[E][2], sum = 0.0;
      route_probs(p, d_of(logits + t * E, E), E, sg);
      for (int64_t e = 0; e < E; e++) s[e] = !sg && nm ? (double)logits[t * E + e] : p[e];
      for (int64_t g = 0; g < G; g++) { /* its top K / GT = 2 */
        double a = fmax(s[g * GS], s[g * GS + 1]), b = fmin(s[g * GS], s[g * GS + 1]);
        gsc[g][0] = a + b, gsc[g][1] = (double)g; /* GS = 2: the group's both */
      }
      qsort(gsc, G, sizeof gsc[0], by_value_desc);
      bool chosen[G] = {false};
      for (int64_t j = 0; j < GT; j++) chosen[(int)gsc[j][1]] = true;
      int64_t m = 0;
      for (int64_t e = 0; e < E; e++)
        if (chosen[e / GS]) ex[m][0] = p[e], ex[m][1] = (double)e, m++;
      qsort(ex, (size_t)m, sizeof ex[0], by_value_desc);
      for (int64_t j = 0; j < K; j++) sum += ex[j][0];
      for (int64_t j = 0; j < K; j++) {
        same = same && idx[t * K + j] == (int32_t)ex[j][1];
        double want = sg || nm ? ex[j][0] / sum : ex[j][0];
        same = same && fabs(gates[t * K + j] - want) <= 1e-6;
      }
      for (int64_t e = 0; e < E; e++) ex[e][0] = p[e], ex[e][1] = (double)e;
      qsort(ex, E, sizeof ex[0], by_value_desc);
      bool out = false;
      for (int64_t j = 0; j < K; j++) {
        plain[t * K + j] = (int32_t)ex[j][1];
        out = out || !chosen[(int)ex[j][1] / GS];
      }
      left += out;
    }
    if (!same) fprintf(stderr, "\n  moe groups case %zu: the choice or gates differ from the reference\n", ci);
    CU_ASSERT(same);
    CU_ASSERT(left > 0);
    float *w = px_trand(N * K, -1, 1), *dl = px_tconst(N * E, ACC0), *rw = px_tfloats(2 * E);
    px_k_moe_route_bwd(dl, rw, w, probs, idx, NULL, N, E, K, sg, nm, 0.02f);
    route_ctx rc = {N, E, K, sg, nm, 0.02, idx, d_of(w, N * K), plain};
    double one = 1.0, *g = dalloc(N * E);
    fd_grad(g, ref_route_loss, &rc, d_of(logits, N * E), N * E, 1, &one);
    CU_ASSERT(grad_close("moe groups dlogits", dl, g, N * E));
    px_tfree();
  }
}

/* Token dropping's reference: expert e keeps the first `cap` of its choices sorted by (gate descending, token
 * ascending), or by token alone (position), by qsort; *kept (n, k) says which. */
static const float *drop_gates; /* qsort's context */
static int by_gate(const void *a, const void *b) {
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  if (drop_gates && drop_gates[i] != drop_gates[j]) return drop_gates[i] > drop_gates[j] ? -1 : 1;
  return (i > j) - (i < j);
}
static void ref_drop(bool *kept, const int32_t *idx, const float *gates, int64_t n, int64_t E, int64_t k, int64_t cap,
                     bool by_probs) {
  int64_t *list = px_talloc((size_t)(n * k) * sizeof *list);
  for (int64_t e = 0; e < E; e++) {
    int64_t m = 0;
    for (int64_t i = 0; i < n * k; i++)
      if (idx[i] == e) list[m++] = i;
    drop_gates = by_probs ? gates : NULL;
    qsort(list, (size_t)m, sizeof *list, by_gate);
    for (int64_t r = 0; r < m; r++) kept[list[r]] = r < cap || cap >= n;
  }
}

/* Token dropping (Megatron-Core's apply_router_token_dropping, without padding): a hand case of each policy, with a
 * tie at the capacity; random routings against the sorting reference; capacity >= n drops nothing; then the
 * dropped choices take no row (positions -1, counts of the kept), permute and unpermute pass them by, and the
 * router's backward with them marked is the one with the original choices and their gates' gradients 0. */
static void test_moe_drop(void) {
  enum { N = 5, E = 3, K = 2 };
  /* expert 0: tokens 0 (0.2), 1 (0.7), 2 (0.5), 3 (0.9); expert 1: tokens 0 (0.8), 2 (0.5), 4 (0.5); expert 2:
   * tokens 1 (0.3), 3 (0.1), 4 (0.5). Capacity 2: probs keeps 3 and 1 of expert 0, 0 and 2 of expert 1 (the tie at
   * 0.5 to the earlier token), all of expert 2's but token 3's; position keeps the first two tokens of each */
  const int32_t idx0[N * K] = {0, 1, 0, 2, 0, 1, 0, 2, 1, 2};
  const float g0[N * K] = {0.2f, 0.8f, 0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.5f, 0.5f};
  const bool want_probs[N * K] = {false, true, true, true, false, true, true, false, false, true};
  const bool want_pos[N * K] = {true, true, true, true, false, true, false, true, false, false};
  int64_t work[N];
  for (int policy = 0; policy < 2; policy++) {
    int32_t idx[N * K];
    float g[N * K];
    memcpy(idx, idx0, sizeof idx), memcpy(g, g0, sizeof g);
    int64_t dropped = px_k_moe_drop(idx, g, work, N, E, K, 2, policy == 0);
    const bool *want = policy == 0 ? want_probs : want_pos;
    int64_t want_dropped = 0;
    for (int64_t i = 0; i < N * K; i++) {
      want_dropped += !want[i];
      CU_ASSERT(idx[i] == (want[i] ? idx0[i] : ~idx0[i]) && px_k_moe_expert(idx[i]) == idx0[i]);
      CU_ASSERT(g[i] == (want[i] ? g0[i] : 0.0f));
    }
    CU_ASSERT(dropped == want_dropped);
  }
  /* random routings of 40 tokens, top 2 of 4, at capacities 1 to 41 (41: none dropped) */
  px_tseed(51);
  enum { RN = 40, RE = 4, RK = 2 };
  int64_t rwork[RN];
  for (int rep = 0; rep < 20; rep++) {
    int64_t cap = 1 + rep * 2;
    cap = rep == 19 ? RN + 1 : cap;
    float *logits = px_trand(RN * RE, -2, 2), *gates = px_tfloats(RN * RK);
    int32_t *idx = px_talloc((size_t)(RN * RK) * sizeof *idx), *orig = px_talloc((size_t)(RN * RK) * sizeof *orig);
    if (rep % 3 == 0) /* ties: gates of a few values */
      for (int64_t i = 0; i < RN * RE; i++) logits[i] = (float)(int)(logits[i] * 2.0f);
    px_k_moe_route_fwd(logits, idx, gates, NULL, RN, RE, RK, false, true, 0, 0);
    memcpy(orig, idx, (size_t)(RN * RK) * sizeof *idx);
    float *g = px_tcopy(gates, RN * RK);
    bool kept[RN * RK], by_probs = rep % 2 == 0;
    ref_drop(kept, orig, gates, RN, RE, RK, cap, by_probs);
    px_k_moe_drop(idx, g, rwork, RN, RE, RK, cap, by_probs);
    bool same = true;
    for (int64_t i = 0; i < RN * RK; i++)
      same = same && idx[i] == (kept[i] ? orig[i] : ~orig[i]) && g[i] == (kept[i] ? gates[i] : 0.0f);
    if (!same) fprintf(stderr, "\n  moe drop: capacity %lld (%s) differs from the reference\n", (long long)cap,
                       by_probs ? "probs" : "position");
    CU_ASSERT(same);
  }
  /* the hand case dropped by probs: no row for a dropped choice, the others expert-major in token order */
  int32_t idx[N * K], counts[E];
  int64_t pos[N * K], pwork[E + 1];
  float g[N * K];
  memcpy(idx, idx0, sizeof idx), memcpy(g, g0, sizeof g);
  px_k_moe_drop(idx, g, work, N, E, K, 2, true);
  px_k_moe_positions(pos, counts, pwork, idx, N, E, K);
  const int64_t want_rows[N * K] = {-1, 2, 0, 4, -1, 3, 1, -1, -1, 5};
  for (int64_t i = 0; i < N * K; i++) CU_ASSERT(pos[i] == want_rows[i]);
  CU_ASSERT(counts[0] == 2 && counts[1] == 2 && counts[2] == 2);
  enum { H = 3 };
  float *x = px_trand(N * H, -1, 1), *send = px_tconst(6 * H, NAN), *y = px_tconst(N * H, 0.0f);
  px_k_moe_permute_fwd(send, x, pos, N, H, K);
  px_k_moe_unpermute_fwd(y, send, g, pos, N, H, K);
  double *yw = dalloc(N * H); /* each token: its kept gates' sum times its row */
  for (int64_t t = 0; t < N; t++)
    for (int64_t c = 0; c < H; c++) yw[t * H + c] = ((double)g[t * K] + g[t * K + 1]) * x[t * H + c];
  CU_ASSERT(fwd_close("unpermute(permute(x)) with drops", y, yw, N * H));
  float *dx = px_tconst(N * H, 0.0f), *dret = px_tconst(6 * H, 0.0f), *dg = px_tconst(N * K, 0.0f);
  px_k_moe_permute_bwd(dx, send, pos, N, H, K);
  px_k_moe_unpermute_bwd(dret, dg, y, send, g, pos, N, H, K);
  for (int64_t i = 0; i < N * K; i++) CU_ASSERT(want_rows[i] >= 0 || dg[i] == 0.0f);
  /* router backward: the dropped choices' experts still count in the renormalisation and the shares */
  float *logits = px_trand(N * E, -2, 2), *probs = px_tcopy(logits, N * E), *dl = px_tconst(N * E, 0.0f);
  float *dl0 = px_tconst(N * E, 0.0f), *rw = px_tfloats(2 * E);
  px_k_moe_route_fwd(probs, (int32_t[N * K]){0}, px_tfloats(N * K), NULL, N, E, K, false, true, 0, 0);
  px_k_moe_route_bwd(dl, rw, dg, probs, idx, NULL, N, E, K, false, true, 0.01f);
  px_k_moe_route_bwd(dl0, rw, dg, probs, idx0, NULL, N, E, K, false, true, 0.01f);
  CU_ASSERT(fwd_close("route backward with dropped choices", dl, d_of(dl0, N * E), N * E));
  px_tfree();
}

/* ======================= optimizer and reductions ======================= */

static void test_adamw(void) {
  /* one step by hand, t = 1, lr 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.01:
   * p = 1, g = 0.5:  m = 0.05, v = 0.00025, m^ = 0.5, v^ = 0.25,
   *   p = 1 - 0.1 (0.5 / (0.5 + 1e-8) + 0.01 * 1) = 0.899000002
   * p = -2, g = -1:  m = -0.1, v = 0.001, m^ = -1, v^ = 1,
   *   p = -2 - 0.1 (-1 / (1 + 1e-8) + 0.01 * -2) = -1.898000001 */
  float p[2] = {1.0f, -2.0f}, m[2] = {0}, v[2] = {0};
  const float g[2] = {0.5f, -1.0f};
  px_k_adamw(p, m, v, g, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
  PX_ASSERT_REL(p[0], 0.899000002, 1e-6);
  PX_ASSERT_REL(p[1], -1.898000001, 1e-6);
  PX_ASSERT_REL(m[0], 0.05, 1e-6);
  /* 0.999f is 0.99900001287: 1 - beta2 is 1.3e-5 below 0.001 (relative), so v
   * is computed with the float beta2; the update above hardly sees it (6e-6) */
  PX_ASSERT_REL(v[0], (1.0 - (double)0.999f) * 0.25, 1e-6);
  PX_ASSERT_REL(m[1], -0.1, 1e-6);
  PX_ASSERT_REL(v[1], (1.0 - (double)0.999f) * 1.0, 1e-6);

  /* five steps against a double reference */
  px_tseed(14);
  enum { N = 16 };
  float *pf = px_trand(N, -1, 1), *mf = px_tconst(N, 0), *vf = px_tconst(N, 0);
  double *pd = d_of(pf, N), *md = dalloc(N), *vd = dalloc(N);
  for (int64_t t = 1; t <= 5; t++) {
    float *gr = px_trand(N, -1, 1);
    px_k_adamw(pf, mf, vf, gr, N, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    for (int64_t i = 0; i < N; i++) {
      md[i] = 0.9 * md[i] + 0.1 * gr[i];
      vd[i] = 0.95 * vd[i] + 0.05 * (double)gr[i] * gr[i];
      double mh = md[i] / (1 - pow(0.9, (double)t)), vh = vd[i] / (1 - pow(0.95, (double)t));
      pd[i] -= 1e-2 * (mh / (sqrt(vh) + 1e-8) + 0.1 * pd[i]);
    }
  }
  CU_ASSERT(fwd_close("adamw 5 steps", pf, pd, N));
  px_tfree();
}

static void test_reduce(void) {
  enum { N = 1000 };
  float *x = px_tfloats(N), *y = px_tfloats(N);
  for (int64_t i = 0; i < N; i++) {
    x[i] = (float)(i + 1);
    y[i] = 0.5f * (float)i;
  }
  /* sum of k^2 for k = 1..1000 = 1000 * 1001 * 2001 / 6, exact in double */
  PX_ASSERT_REL(px_k_sumsq(x, N), 333833500.0, 0.0);
  CU_ASSERT_EQUAL(px_k_sumsq(x, 0), 0.0);
  px_k_add(x, x, y, N); /* out aliases a: x = (i + 1) + i / 2 */
  PX_ASSERT_REL(x[10], 11.0 + 5.0, 0.0);
  px_k_acc(x, y, N); /* x = (i + 1) + i */
  PX_ASSERT_REL(x[10], 21.0, 0.0);
  px_k_scale(x, N, 0.5f);
  PX_ASSERT_REL(x[10], 10.5, 0.0);
  PX_ASSERT_REL(x[N - 1], (1000.0 + 999.0) / 2, 0.0);
  px_tfree();
}

/* The shared per-element math: derivatives by central differences, and the RNG's
 * counter property. */
/* The elementwise kernels split over threads give the very bits of one
 * thread (2 and 3 threads, sizes that do and do not split evenly). */
static void test_threads_bitwise(void) {
  const int64_t sizes[] = {200003, 131072 * 3};
  for (size_t si = 0; si < 2; si++) {
    int64_t n = sizes[si];
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
    float *out[3], *m[3], *v[3], *p[3], *d2[3];
    for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7919) % 2001 - 1000) / 250.0f, y[i] = x[(i * 13) % n] * 0.5f, g[i] = x[(i * 31) % n] * 1e-2f;
    for (int t = 0; t < 3; t++) {
      px_k_set_threads(t + 1);
      out[t] = calloc((size_t)n, 4), m[t] = calloc((size_t)n, 4), v[t] = calloc((size_t)n, 4), p[t] = malloc((size_t)n * 4);
      d2[t] = calloc((size_t)n, 4);
      memcpy(p[t], x, (size_t)n * 4);
      px_k_gelu_fwd(out[t], x, n);
      px_k_gelu_bwd(out[t], y, x, n);
      px_k_swiglu_bwd(m[t], d2[t], y, x, g, n);
      px_k_adamw(p[t], v[t], d2[t], g, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    }
    for (int t = 1; t < 3; t++) {
      CU_ASSERT_EQUAL(memcmp(out[t], out[0], (size_t)n * 4), 0);
      CU_ASSERT_EQUAL(memcmp(m[t], m[0], (size_t)n * 4), 0);
      CU_ASSERT_EQUAL(memcmp(p[t], p[0], (size_t)n * 4), 0);
    }
    for (int t = 0; t < 3; t++) free(out[t]), free(m[t]), free(v[t]), free(p[t]), free(d2[t]);
    free(x), free(y), free(g);
  }
  px_k_set_threads(1);
}

/* The row kernels (norms forward and backward, the cross-entropy's pieces),
 * the sum of squares and flash attention, split over threads by rows,
 * columns, blocks or heads: the same bits on 1, 2 and 3 threads. */
static void test_threads_bitwise_rows(void) {
  enum { R = 37, C = 3001, V = 5003 }; /* rows of C (norms) and V (logits) columns, odd */
  const int64_t nn = (int64_t)R * C, nv = (int64_t)R * V;
  float *x = px_trand(nn, -2, 2), *g = px_trand(nn, -1, 1), *w = px_trand(C, 0.5, 1.5), *b = px_trand(C, -1, 1);
  float *lg = px_trand(nv, -8, 8);
  int32_t tg[R];
  for (int i = 0; i < R; i++) tg[i] = i == 5 ? -1 : (int32_t)((i * 977) % V);
  float *o[3], *st[3], *dx[3], *dw[3], *db[3], *ce[3], *dl[3];
  double ss[3];
  for (int t = 0; t < 3; t++) {
    px_k_set_threads(t + 1);
    o[t] = px_tfloats(2 * nn), st[t] = px_tfloats(3 * R), dx[t] = px_tconst(2 * nn, 0.0f);
    dw[t] = px_tconst(2 * C, 0.0f), db[t] = px_tconst(C, 0.0f), ce[t] = px_tfloats(3 * R), dl[t] = px_tfloats(2 * nv);
    px_k_layernorm_fwd(o[t], st[t], st[t] + R, x, w, b, R, C, 1e-5f);
    px_k_layernorm_bwd(dx[t], dw[t], db[t], g, x, w, st[t], st[t] + R, R, C);
    px_k_rmsnorm_fwd(o[t] + nn, st[t] + 2 * R, x, w, R, C, 1e-5f);
    px_k_rmsnorm_bwd(dx[t] + nn, dw[t] + C, g, x, w, st[t] + 2 * R, R, C);
    px_k_ce_max_local(ce[t], lg, R, 0, V, V - 3);
    px_k_ce_sumexp_local(ce[t] + R, lg, ce[t], R, 0, V, V - 3);
    px_k_ce_logprobs(dl[t], lg, ce[t], ce[t] + R, R, V);
    px_k_ce_bwd(dl[t] + nv, lg, ce[t], ce[t] + R, tg, R, 0, V, V - 3, 0.25f);
    ss[t] = px_k_sumsq(lg, nv);
  }
  /* flash attention split by heads (the backward by KV heads: GQA 6 over 3), with and without dropout */
  enum { S = 130, HQ = 6, HKV = 3, D = 16 };
  float *q = px_trand(S * HQ * D, -1, 1), *k = px_trand(S * HKV * D, -1, 1), *v = px_trand(S * HKV * D, -1, 1);
  float *dc = px_trand(S * HQ * D, -1, 1);
  for (int drop = 0; drop < 2; drop++) {
    float *fo[3], *fg[3];
    for (int t = 0; t < 3; t++) {
      px_k_set_threads(t + 1);
      fo[t] = px_tfloats(S * HQ * D + HQ * S), fg[t] = px_tconst(S * HQ * D + 2 * S * HKV * D, 0.0f);
      float *lse = fo[t] + S * HQ * D, *dq = fg[t], *dk = dq + S * HQ * D, *dv = dk + S * HKV * D;
      px_k_flash_fwd(fo[t], lse, q, k, v, S, S, HQ, HKV, D, NULL, NULL, 0, S, drop ? 0.1f : 0.0f, 7, 0);
      px_k_flash_bwd(dq, dk, dv, dc, q, k, v, fo[t], lse, S, S, HQ, HKV, D, NULL, NULL, 0, S, drop ? 0.1f : 0.0f, 7, 0);
    }
    for (int t = 1; t < 3; t++) {
      CU_ASSERT_EQUAL(memcmp(fo[t], fo[0], (size_t)(S * HQ * D + HQ * S) * 4), 0);
      CU_ASSERT_EQUAL(memcmp(fg[t], fg[0], (size_t)(S * HQ * D + 2 * S * HKV * D) * 4), 0);
    }
  }
  for (int t = 1; t < 3; t++) {
    CU_ASSERT_EQUAL(memcmp(o[t], o[0], (size_t)(2 * nn) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(st[t], st[0], (size_t)(3 * R) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(dx[t], dx[0], (size_t)(2 * nn) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(dw[t], dw[0], (size_t)(2 * C) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(db[t], db[0], (size_t)C * 4), 0);
    CU_ASSERT_EQUAL(memcmp(ce[t], ce[0], (size_t)(2 * R) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(dl[t], dl[0], (size_t)(2 * nv) * 4), 0);
    CU_ASSERT_EQUAL(memcmp(&ss[t], &ss[0], sizeof ss[0]), 0);
  }
  px_k_set_threads(1);
  px_tfree();
}

#define GELU_SCALE_D 0.79788456080286535588 /* sqrt(2 / pi) */

/* The fast forms of kernels/math.h against double over dense grids: the
 * bounds their comments state (the measured worst case is printed). */
static void test_fast_math(void) {
  double e_rel = 0.0;
  for (double x = -87.0; x <= 88.0; x += 1e-4) { /* 1.75 M points */
    const float xf = (float)x;
    const double want = exp((double)xf);
    e_rel = fmax(e_rel, fabs(px_exp_fast(xf) - want) / want);
  }
  CU_ASSERT(px_exp_fast(-1000.0f) > 0.0f && px_exp_fast(-1000.0f) < 2e-38f && isfinite(px_exp_fast(1000.0f)));
  CU_ASSERT(isnan(px_exp_fast(NAN)));
  double g_abs = 0.0, g_rel = 0.0, t_abs = 0.0, d_abs = 0.0, s_rel = 0.0, ref_rel = 0.0;
  for (double x = -20.0; x <= 20.0; x += 1e-5) { /* 4 M points */
    const float xf = (float)x;
    const double xd = xf, u = GELU_SCALE_D * (xd + 0.044715 * xd * xd * xd), th = tanh(u);
    const double want = 0.5 * xd * (1.0 + th);
    const double dwant = 0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * GELU_SCALE_D * (1.0 + 3.0 * 0.044715 * xd * xd);
    const double got = px_gelu_fast(xf), err = fabs(got - want);
    g_abs = fmax(g_abs, err);
    if (fabs(want) >= 1e-3) {
      g_rel = fmax(g_rel, err / fabs(want));
      ref_rel = fmax(ref_rel, fabs(px_gelu(xf) - want) / fabs(want));
    }
    /* the tanh it implies: 2 s - 1, s = gelu / x (s in double, so only px_gelu_fast's error counts) */
    if (fabs(xd) > 1e-2) t_abs = fmax(t_abs, fabs(2.0 * (got / xd) - 1.0 - th));
    d_abs = fmax(d_abs, fabs(px_gelu_grad_fast(xf) - dwant));
    const double sw = 1.0 / (1.0 + exp(-xd));
    s_rel = fmax(s_rel, fabs(px_sigmoid_fast(xf) - sw) / sw);
  }
  printf("\n    fast math, worst over the grid: exp rel %.3g; gelu abs %.3g, rel %.3g (tanhf form %.3g), implied tanh abs "
         "%.3g, gelu' abs %.3g; sigmoid rel %.3g\n    ",
         e_rel, g_abs, g_rel, ref_rel, t_abs, d_abs, s_rel);
  CU_ASSERT(e_rel <= 1e-7);
  CU_ASSERT(g_abs <= 6e-7);
  CU_ASSERT(g_rel <= 1.5e-6);
  CU_ASSERT(t_abs <= 2.5e-7);
  CU_ASSERT(d_abs <= 3e-7);
  CU_ASSERT(s_rel <= 2e-7);
}

static void test_math(void) {
  bool ok = true;
  for (int i = -40; i <= 40; i++) {
    double x = i * 0.2, h = 1e-3;
    double dg = (px_gelu((float)(x + h)) - px_gelu((float)(x - h))) / (2 * h);
    double ds = (px_silu((float)(x + h)) - px_silu((float)(x - h))) / (2 * h);
    /* fp32 differences with h = 1e-3: error ~6e-8 * |f| / h ~ 1e-4 near |x| = 8 */
    ok = ok && fabs(dg - px_gelu_grad((float)x)) < 1e-3 && fabs(ds - px_silu_grad((float)x)) < 1e-3;
  }
  CU_ASSERT(ok);
  CU_ASSERT(px_sigmoid(-100.0f) >= 0.0f && px_sigmoid(100.0f) == 1.0f);
  CU_ASSERT_EQUAL(px_rng_u64(7, 123), px_rng_u64(7, 123));
  CU_ASSERT(px_rng_u64(7, 123) != px_rng_u64(8, 123));
  CU_ASSERT(px_rng_u64(7, 123) != px_rng_u64(7, 124));
  float u = px_rng_uniform(1, 0);
  CU_ASSERT(u >= 0.0f && u < 1.0f);
}

/* ---- fp8 (OCP OFP8 rev 1.0): codes derived by hand ---- */

static void test_fp8_codes(void) {
  const px_fp8_format E4 = PX_FP8_E4M3, E5 = PX_FP8_E5M2;
  /* E4M3: S.EEEE.MMM, bias 7; 1 = 0.0111.000, max 0.1111.110 = 1.75 x 2^8, min normal 2^-6, min subnormal 2^-9 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.0f, E4), 0x38);
  CU_ASSERT_EQUAL(px_k_fp8_encode(448.0f, E4), 0x7e);
  CU_ASSERT_EQUAL(px_k_fp8_encode(-448.0f, E4), 0xfe);
  CU_ASSERT_EQUAL(px_k_fp8_encode(0x1p-6f, E4), 0x08);
  CU_ASSERT_EQUAL(px_k_fp8_encode(0x1p-9f, E4), 0x01);
  CU_ASSERT_EQUAL(px_k_fp8_encode(0x1p-10f, E4), 0x00);          /* half the smallest subnormal: ties to even (0) */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.5f * 0x1p-9f, E4), 0x02);     /* 1.5 units: ties to even (2) */
  CU_ASSERT_EQUAL(px_k_fp8_encode(7.5f * 0x1p-9f, E4), 0x08);     /* 7.5 units: up into the normals */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.0625f, E4), 0x38);            /* between 1 and 1.125: even mantissa 0 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.1875f, E4), 0x3a);            /* between 1.125 and 1.25: even mantissa 2 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.07f, E4), 0x39);              /* nearer 1.125 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(15.5f, E4), 0x58);              /* 15 (m 7) and 16: ties to even 16 = 0.1011.000 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(464.0f, E4), 0x7e);             /* halfway to 480 (NaN's code): saturates */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1e9f, E4), 0x7e);
  CU_ASSERT_EQUAL(px_k_fp8_encode(INFINITY, E4), 0x7e);
  CU_ASSERT_EQUAL(px_k_fp8_encode(-INFINITY, E4), 0xfe);
  CU_ASSERT_EQUAL(px_k_fp8_encode(-0.0f, E4), 0x80);
  CU_ASSERT_EQUAL(px_k_fp8_encode(NAN, E4) & 0x7f, 0x7f);
  CU_ASSERT(px_k_fp8_decode(0x7e, E4) == 448.0f && px_k_fp8_decode(0x01, E4) == 0x1p-9f);
  CU_ASSERT(px_k_fp8_decode(0x08, E4) == 0x1p-6f && px_k_fp8_decode(0x07, E4) == 7.0f * 0x1p-9f);
  CU_ASSERT(px_k_fp8_decode(0xb8, E4) == -1.0f && px_k_fp8_decode(0x78, E4) == 256.0f);
  CU_ASSERT(isnan(px_k_fp8_decode(0x7f, E4)) && isnan(px_k_fp8_decode(0xff, E4)));
  CU_ASSERT(px_k_fp8_max(E4) == 448.0f);
  /* E5M2: S.EEEEE.MM, bias 15; 1 = 0.01111.00, max 0.11110.11 = 1.75 x 2^15, min subnormal 2^-16; exponent 31: inf, NaN */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.0f, E5), 0x3c);
  CU_ASSERT_EQUAL(px_k_fp8_encode(57344.0f, E5), 0x7b);
  CU_ASSERT_EQUAL(px_k_fp8_encode(61440.0f, E5), 0x7b); /* halfway to 2^16 (infinity's place): saturates */
  CU_ASSERT_EQUAL(px_k_fp8_encode(INFINITY, E5), 0x7b);
  CU_ASSERT_EQUAL(px_k_fp8_encode(0x1p-16f, E5), 0x01);
  CU_ASSERT_EQUAL(px_k_fp8_encode(0x1p-14f, E5), 0x04);
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.125f, E5), 0x3c);  /* between 1 and 1.25: even mantissa 0 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(1.375f, E5), 0x3e);  /* between 1.25 and 1.5: even mantissa 2 */
  CU_ASSERT_EQUAL(px_k_fp8_encode(-3.0f, E5), 0xc2);   /* 1.5 x 2^1 = 1.10000.10 */
  CU_ASSERT(px_k_fp8_decode(0x7b, E5) == 57344.0f && px_k_fp8_decode(0x01, E5) == 0x1p-16f);
  CU_ASSERT(px_k_fp8_decode(0x7c, E5) == INFINITY && px_k_fp8_decode(0xfc, E5) == -INFINITY);
  CU_ASSERT(isnan(px_k_fp8_decode(0x7d, E5)) && isnan(px_k_fp8_decode(0x7f, E5)));
  CU_ASSERT(isnan(px_k_fp8_decode(px_k_fp8_encode(NAN, E5), E5)));
  /* every finite code decodes to a value that encodes back to it (zero: either sign's) */
  for (int f = 0; f < PX_FP8_FORMAT_COUNT; f++)
    for (int c = 0; c < 256; c++) {
      float v = px_k_fp8_decode((uint8_t)c, (px_fp8_format)f);
      if (isfinite(v)) CU_ASSERT_EQUAL(px_k_fp8_encode(v, (px_fp8_format)f), c);
    }
}

/* Round trips: relative error at most half an ulp over the normal range (E4M3 2^-4, E5M2 2^-3); scaled
 * quantization puts a tensor's (tile's, block's) amax on the largest value exactly. */
static void test_fp8_scaled(void) {
  uint64_t rng = 7;
  for (int f = 0; f < PX_FP8_FORMAT_COUNT; f++) {
    double bound = f == PX_FP8_E4M3 ? 0x1p-4 : 0x1p-3, lo = f == PX_FP8_E4M3 ? 0x1p-6 : 0x1p-14, worst = 0;
    for (int i = 0; i < 20000; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      double u = (double)(rng >> 11) / 9007199254740992.0; /* [0, 1) */
      float x = (float)(lo * pow(px_k_fp8_max((px_fp8_format)f) / lo, u)) * ((rng >> 3) & 1 ? 1.0f : -1.0f);
      float y = px_k_fp8_decode(px_k_fp8_encode(x, (px_fp8_format)f), (px_fp8_format)f);
      double r = fabs((double)y - (double)x) / fabs((double)x);
      if (r > worst) worst = r;
    }
    CU_ASSERT(worst <= bound);
    CU_ASSERT(worst > bound / 2); /* the bound is tight: some value lands near a halfway point */
  }
  enum { R = 3, C = 130 }; /* two 128-wide tiles a row, the second 2 wide */
  float x[R * C], y[R * C], sc[R * 2];
  uint8_t q[R * C];
  for (int i = 0; i < R * C; i++) x[i] = (float)sin(0.37 * i) * (float)(1 + i % 7);
  x[5] = -50.0f, x[C + 128] = 1.0f, x[C + 129] = 3.0f;
  float amax = px_k_fp8_amax(x, R * C), s = px_k_fp8_scale(amax, PX_FP8_E4M3);
  CU_ASSERT(amax == 50.0f && s == 448.0f / 50.0f);
  px_k_fp8_quantize(q, x, R * C, s, PX_FP8_E4M3);
  px_k_fp8_dequantize(y, q, R * C, s, PX_FP8_E4M3);
  CU_ASSERT(q[5] == 0xfe && y[5] == -50.0f);
  for (int i = 0; i < R * C; i++) CU_ASSERT(fabsf(y[i] - x[i]) <= 0x1p-4f * fabsf(x[i]) + 0x1p-10f / s);
  px_k_fp8_roundtrip(y, x, R * C, s, PX_FP8_E4M3); /* the same values in one pass */
  for (int i = 0; i < R * C; i++) CU_ASSERT(y[i] == px_k_fp8_decode(q[i], PX_FP8_E4M3) / s);
  px_k_fp8_quantize_rows(q, sc, x, R, C, 128, PX_FP8_E5M2);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 2; j++) {
      int w = j ? C - 128 : 128;
      PX_ASSERT_REL(sc[r * 2 + j], 57344.0f / px_k_fp8_amax(x + r * C + 128 * j, w), 1e-7);
    }
  CU_ASSERT(q[C + 129] == 0x7b); /* the short tile's amax */
  px_k_fp8_dequantize_rows(y, q, sc, R, C, 128, PX_FP8_E5M2);
  for (int i = 0; i < R * C; i++) CU_ASSERT(y[i] == px_k_fp8_decode(q[i], PX_FP8_E5M2) / sc[(i / C) * 2 + (i % C) / 128]);
  CU_ASSERT(y[C + 129] == 3.0f);
  /* 2 x 2 blocks of a (3, 3) matrix: blocks {0,1}x{0,1}, {0,1}x{2}, {2}x{0,1}, {2}x{2} */
  float w[9] = {1, -2, 0.3f, 0.5f, 0.25f, 7, 100, 10, -0.7f}, v[9];
  px_k_fp8_roundtrip_blocks(v, NULL, w, 3, 3, 2, PX_FP8_E4M3);
  CU_ASSERT(v[1] == -2.0f && v[5] == 7.0f && v[6] == 100.0f && v[8] == -0.7f); /* each block's amax, exact */
  for (int i = 0; i < 9; i++) CU_ASSERT(fabsf(v[i] - w[i]) <= 0x1p-4f * fabsf(w[i]));
  uint8_t wq[9]; /* with its codes: the same values, each its code over its block's scale */
  float v2[9], bmax[9] = {2, 2, 7, 2, 2, 7, 100, 100, 0.7f};
  px_k_fp8_roundtrip_blocks(v2, wq, w, 3, 3, 2, PX_FP8_E4M3);
  for (int i = 0; i < 9; i++)
    CU_ASSERT(v2[i] == v[i] && v2[i] == px_k_fp8_decode(wq[i], PX_FP8_E4M3) / px_k_fp8_scale(bmax[i], PX_FP8_E4M3));
  CU_ASSERT(px_k_fp8_scale(0.0f, PX_FP8_E4M3) == 1.0f && px_k_fp8_scale(INFINITY, PX_FP8_E4M3) == 1.0f);
  float nan3[3] = {NAN, -2.0f, 1.0f};
  CU_ASSERT(px_k_fp8_amax(nan3, 3) == 2.0f);
}

int main(void) {
  static const px_test tests[] = {
      {"per-element math and the counter RNG", test_math},
      {"fast exp, GELU, GELU', sigmoid against double: the stated bounds", test_fast_math},
      {"GEMM, four transpose combinations, beta = 0, k = 0", test_gemm},
      {"linear forward and backward", test_linear},
      {"vocab-parallel embedding, 1, 2 and 4 shards", test_embed_vocab_parallel},
      {"learned positions at an offset", test_pos},
      {"LayerNorm with and without bias", test_layernorm},
      {"RMSNorm", test_rmsnorm},
      {"GELU (tanh)", test_gelu},
      {"SwiGLU", test_swiglu},
      {"RoPE, backward, a sequence shard at pos0 = 3, and a partial rotary", test_rope},
      {"latent attention's decoupled RoPE (DeepSeek): k widened in place, dk_pe summed over heads", test_mla_rope},
      {"YaRN's RoPE: the frequencies as gpt-oss's and transformers' code, the kernels with them", test_rope_yarn},
      {"Llama 3.1's RoPE scaling as llama-models' code, the rotation with it; linear interpolation", test_rope_llama3},
      {"causal GQA attention, forward and backward", test_attention},
      {"causal softmax backward alone", test_attention_softmax_bwd},
      {"attention sinks in the softmax (gpt-oss): scores' and sinks' gradients", test_attention_softmax_sinks},
      {"fused (flash) attention against the three ops, with dropout and sliding windows", test_flash},
      {"flash attention with values of another head dim (latent attention), against finite differences", test_flash_dv},
      {"flash attention by key blocks at global positions (cp 2, 3), merged or gathered = whole", test_flash_blocks},
      {"flash merge: an empty block, explicit positions", test_flash_merge},
      {"dropout: p = 0, pieces, backward", test_dropout},
      {"vocab-parallel cross-entropy, padding, ignore, 2 and 4 shards", test_cross_entropy},
      {"MoE router: softmax, norm, sigmoid, k 1-3, a tie; backward against finite differences", test_moe_route},
      {"MoE permute: expert-major positions, unpermute(permute(x)) = x, adjoint backwards", test_moe_permute},
      {"MoE token dropping: each policy by hand and against a sort, no row for a dropped choice", test_moe_drop},
      {"MoE group-limited routing against a sort, each router; backward against finite differences", test_moe_groups},
      {"AdamW by hand and over five steps", test_adamw},
      {"sum of squares, scale, add, accumulate", test_reduce},
      {"elementwise kernels on 1, 2, 3 threads: the same bits", test_threads_bitwise},
      {"norms, cross-entropy, sum of squares, flash attention on 1, 2, 3 threads: the same bits", test_threads_bitwise_rows},
      {"fp8 codes: E4M3 and E5M2 by hand, ties to even, saturation, NaN, every code back", test_fp8_codes},
      {"fp8 scaled: round-trip bounds, per-tensor, 1x128 row tiles and square blocks", test_fp8_scaled},
  };
  return px_test_main("kernels", tests, sizeof tests / sizeof tests[0]);
}
