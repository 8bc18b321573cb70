/* FlashAttention on the CPU: tiles of 64 queries x 64 keys, the products
 * through cblas on strided head slices (no copies), the output accumulated in
 * place in ctx; scratch is two tiles on the stack. */
#include "kernels/cpu/flash.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "kernels/math.h"

#define TILE 64

/* cblas sizes are ints: the backends refuse larger ops up front (supports_op). */
static int as_blas(int64_t x) {
  assert(x >= 0 && x <= INT_MAX);
  return (int)x;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The dropout multiplier of probability element (t, j) of head h: 0 or 1 / (1 - p). */
static float drop_mul(float p, uint64_t seed, uint64_t off, int64_t h, int64_t s, int64_t t, int64_t j) {
  if (p <= 0) return 1.0f;
  return px_dropout_keep(seed, off + (uint64_t)((h * s + t) * s + j), p) ? 1.0f / (1.0f - p) : 0.0f;
}

void px_k_flash_fwd(float *ctx, float *lse, const float *q, const float *k, const float *v, int64_t s, int64_t hq,
                    int64_t hkv, int64_t d, float p, uint64_t seed, uint64_t off) {
  if (s <= 0 || hq <= 0 || d <= 0) return;
  const int64_t group = hq / hkv, ldq = hq * d, ldk = hkv * d;
  const float scale = 1.0f / sqrtf((float)d);
  float sc[TILE * TILE], m[TILE], l[TILE]; /* scores then probabilities (nr, nc); row max and sum */
  for (int64_t h = 0; h < hq; h++) {
    const float *qh = q + h * d, *kh = k + h / group * d, *vh = v + h / group * d;
    float *ch = ctx + h * d;
    for (int64_t t0 = 0; t0 < s; t0 += TILE) {
      const int64_t nr = min64(TILE, s - t0);
      for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        memset(ch + (t0 + r) * ldq, 0, (size_t)d * sizeof *ch);
      }
      for (int64_t s0 = 0; s0 < t0 + nr; s0 += TILE) {
        const int64_t nc = min64(TILE, s - s0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, sc, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int64_t t = t0 + r, seen = min64(nc, t - s0 + 1); /* columns c < seen are causal */
          float *row = sc + r * TILE, mx = m[r];
          for (int64_t c = 0; c < seen; c++) mx = row[c] > mx ? row[c] : mx;
          const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mx);
          float sum = 0.0f;
          for (int64_t c = 0; c < nc; c++) {
            float e = c < seen ? expf(row[c] - mx) : 0.0f;
            sum += e;
            row[c] = e * drop_mul(p, seed, off, h, s, t, s0 + c);
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          float *o = ch + t * ldq;
          for (int64_t i = 0; i < d; i++) o[i] *= alpha;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(nr), as_blas(d), as_blas(nc), 1.0f, sc, TILE,
                    vh + s0 * ldk, as_blas(ldk), 1.0f, ch + t0 * ldq, as_blas(ldq));
      }
      for (int64_t r = 0; r < nr; r++) {
        float *o = ch + (t0 + r) * ldq, inv = 1.0f / l[r];
        for (int64_t i = 0; i < d; i++) o[i] *= inv;
        lse[h * s + t0 + r] = m[r] + logf(l[r]);
      }
    }
  }
}

void px_k_flash_bwd(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k, const float *v,
                    const float *ctx, const float *lse, int64_t s, int64_t hq, int64_t hkv, int64_t d, float p,
                    uint64_t seed, uint64_t off) {
  if (s <= 0 || hq <= 0 || d <= 0) return;
  const int64_t group = hq / hkv, ldq = hq * d, ldk = hkv * d;
  const float scale = 1.0f / sqrtf((float)d);
  /* pd: scores, then the dropped-out probabilities; ds: d(dropped P), then dS */
  float pd[TILE * TILE], ds[TILE * TILE], delta[TILE];
  for (int64_t h = 0; h < hq; h++) {
    const int64_t g = h / group;
    const float *qh = q + h * d, *kh = k + g * d, *vh = v + g * d, *doh = dctx + h * d, *oh = ctx + h * d;
    const float *lh = lse + h * s;
    float *dqh = dq + h * d, *dkh = dk + g * d, *dvh = dv + g * d;
    for (int64_t t0 = 0; t0 < s; t0 += TILE) {
      const int64_t nr = min64(TILE, s - t0);
      for (int64_t r = 0; r < nr; r++) { /* delta = rowsum(P * dP) = dO . O */
        double acc = 0.0;
        for (int64_t i = 0; i < d; i++) acc += (double)doh[(t0 + r) * ldq + i] * oh[(t0 + r) * ldq + i];
        delta[r] = (float)acc;
      }
      for (int64_t s0 = 0; s0 < t0 + nr; s0 += TILE) {
        const int64_t nc = min64(TILE, s - s0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, pd, TILE);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), 1.0f,
                    doh + t0 * ldq, as_blas(ldq), vh + s0 * ldk, as_blas(ldk), 0.0f, ds, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int64_t t = t0 + r;
          for (int64_t c = 0; c < nc; c++) {
            const int64_t j = s0 + c;
            float prob = j <= t ? expf(pd[r * TILE + c] - lh[t]) : 0.0f, mul = drop_mul(p, seed, off, h, s, t, j);
            pd[r * TILE + c] = prob * mul;
            ds[r * TILE + c] = prob * (ds[r * TILE + c] * mul - delta[r]);
          }
        }
        /* dV += Pd^T dO, dQ += scale dS K, dK += scale dS^T Q */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(nc), as_blas(d), as_blas(nr), 1.0f, pd, TILE,
                    doh + t0 * ldq, as_blas(ldq), 1.0f, dvh + s0 * ldk, as_blas(ldk));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(nr), as_blas(d), as_blas(nc), scale, ds, TILE,
                    kh + s0 * ldk, as_blas(ldk), 1.0f, dqh + t0 * ldq, as_blas(ldq));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(nc), as_blas(d), as_blas(nr), scale, ds, TILE,
                    qh + t0 * ldq, as_blas(ldq), 1.0f, dkh + s0 * ldk, as_blas(ldk));
      }
    }
  }
}
