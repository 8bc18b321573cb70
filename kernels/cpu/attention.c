/* Causal GQA attention in three ops; the per-(batch, head) matrix products go
 * through cblas with strided leading dimensions, so no copies are made. */
#include "kernels/cpu/attention.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>

/* cblas sizes are ints: the backends refuse larger ops up front (supports_op). */
static int as_blas(int64_t x) {
  assert(x >= 0 && x <= INT_MAX);
  return (int)x;
}

/* Offsets of the (b, head) slices: rows t of a (B, T, H, D) tensor are H*D apart. */
static int64_t head_off(int64_t bi, int64_t hi, int64_t t, int64_t h, int64_t d) { return bi * t * h * d + hi * d; }

void px_k_attn_scores_fwd(float *scores, const float *q, const float *k, int64_t b, int64_t t, int64_t hq,
                          int64_t hkv, int64_t d, float scale) {
  if (b <= 0 || t <= 0 || hq <= 0 || d <= 0) return;
  int64_t group = hq / hkv;
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t hi = 0; hi < hq; hi++) {
      float *s = scores + (bi * hq + hi) * t * t;
      const float *qh = q + head_off(bi, hi, t, hq, d);
      const float *kh = k + head_off(bi, hi / group, t, hkv, d);
      /* S (T, T) = scale Q_h (T, D) K_h^T (D, T); the upper triangle is computed and then cleared */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(t), as_blas(t), as_blas(d), scale, qh,
                  as_blas(hq * d), kh, as_blas(hkv * d), 0.0f, s, as_blas(t));
      for (int64_t i = 0; i < t; i++)
        for (int64_t j = i + 1; j < t; j++) s[i * t + j] = 0.0f;
    }
  }
}

void px_k_attn_scores_bwd(float *dq, float *dk, const float *dscores, const float *q, const float *k, int64_t b,
                          int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale) {
  if (b <= 0 || t <= 0 || hq <= 0 || d <= 0) return;
  int64_t group = hq / hkv;
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t hi = 0; hi < hq; hi++) {
      const float *ds = dscores + (bi * hq + hi) * t * t;
      int64_t oq = head_off(bi, hi, t, hq, d), ok = head_off(bi, hi / group, t, hkv, d);
      /* dQ_h (T, D) += scale dS (T, T) K_h (T, D) */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(t), as_blas(d), as_blas(t), scale, ds,
                  as_blas(t), k + ok, as_blas(hkv * d), 1.0f, dq + oq, as_blas(hq * d));
      /* dK_h (T, D) += scale dS^T (T, T) Q_h (T, D) */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(t), as_blas(d), as_blas(t), scale, ds,
                  as_blas(t), q + oq, as_blas(hq * d), 1.0f, dk + ok, as_blas(hkv * d));
    }
  }
}

/* The first column query position i sees: 0, or the start of its window. */
static int64_t first_seen(int64_t i, int64_t window) { return window > 0 && i >= window ? i - window + 1 : 0; }

void px_k_attn_softmax_fwd(float *probs, const float *scores, int64_t bh, int64_t t, int64_t window) {
  px_k_attn_softmax_sink_fwd(probs, scores, NULL, bh, 1, t, window);
}

void px_k_attn_softmax_sink_fwd(float *probs, const float *scores, const float *sinks, int64_t bh, int64_t hq,
                                int64_t t, int64_t window) {
  for (int64_t r = 0; r < bh * t; r++) {
    int64_t i = r % t, j0 = first_seen(i, window); /* query position: columns j0..i are visible */
    const float *s = scores + r * t;
    float *p = probs + r * t;
    float mx = sinks ? sinks[r / t % hq] : -INFINITY; /* the sink: one more logit, no value */
    for (int64_t j = j0; j <= i; j++) mx = s[j] > mx ? s[j] : mx;
    double sum = sinks ? exp((double)sinks[r / t % hq] - mx) : 0.0;
    for (int64_t j = j0; j <= i; j++) {
      float e = expf(s[j] - mx);
      p[j] = e;
      sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < j0; j++) p[j] = 0.0f;
    for (int64_t j = j0; j <= i; j++) p[j] *= inv;
    for (int64_t j = i + 1; j < t; j++) p[j] = 0.0f;
  }
}

void px_k_attn_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int64_t bh, int64_t t,
                           int64_t window) {
  px_k_attn_softmax_sink_bwd(dscores, NULL, dprobs, probs, bh, 1, t, window);
}

void px_k_attn_softmax_sink_bwd(float *dscores, float *dsinks, const float *dprobs, const float *probs, int64_t bh,
                                int64_t hq, int64_t t, int64_t window) {
  for (int64_t r = 0; r < bh * t; r++) {
    int64_t i = r % t, j0 = first_seen(i, window);
    const float *dp = dprobs + r * t, *p = probs + r * t;
    float *ds = dscores + r * t;
    double dot = 0.0, seen = 0.0;
    for (int64_t j = j0; j <= i; j++) dot += (double)dp[j] * p[j], seen += p[j];
    float dotf = (float)dot;
    for (int64_t j = j0; j <= i; j++) ds[j] += p[j] * (dp[j] - dotf);
    /* the sink's column: probability 1 - the keys', gradient 0, so its logit's is -p_sink dot */
    if (dsinks) dsinks[r / t % hq] -= (float)((1.0 - seen) * dot);
  }
}

void px_k_attn_context_fwd(float *ctx, const float *probs, const float *v, int64_t b, int64_t t, int64_t hq,
                           int64_t hkv, int64_t d) {
  if (b <= 0 || t <= 0 || hq <= 0 || d <= 0) return;
  int64_t group = hq / hkv;
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t hi = 0; hi < hq; hi++) {
      const float *p = probs + (bi * hq + hi) * t * t;
      /* C_h (T, D) = P (T, T) V_h (T, D) */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(t), as_blas(d), as_blas(t), 1.0f, p,
                  as_blas(t), v + head_off(bi, hi / group, t, hkv, d), as_blas(hkv * d), 0.0f,
                  ctx + head_off(bi, hi, t, hq, d), as_blas(hq * d));
    }
  }
}

void px_k_attn_context_bwd(float *dprobs, float *dv, const float *dctx, const float *probs, const float *v,
                           int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d) {
  if (b <= 0 || t <= 0 || hq <= 0 || d <= 0) return;
  int64_t group = hq / hkv;
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t hi = 0; hi < hq; hi++) {
      const float *p = probs + (bi * hq + hi) * t * t;
      float *dp = dprobs + (bi * hq + hi) * t * t;
      int64_t oc = head_off(bi, hi, t, hq, d), ov = head_off(bi, hi / group, t, hkv, d);
      /* dP (T, T) += dC_h (T, D) V_h^T (D, T) */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(t), as_blas(t), as_blas(d), 1.0f, dctx + oc,
                  as_blas(hq * d), v + ov, as_blas(hkv * d), 1.0f, dp, as_blas(t));
      /* dV_h (T, D) += P^T (T, T) dC_h (T, D) */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(t), as_blas(d), as_blas(t), 1.0f, p,
                  as_blas(t), dctx + oc, as_blas(hq * d), 1.0f, dv + ov, as_blas(hkv * d));
    }
  }
}
