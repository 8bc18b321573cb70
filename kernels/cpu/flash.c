/* FlashAttention on the CPU: tiles of 64 queries x 64 keys, the products
 * through cblas on strided head slices (no copies), the output accumulated in
 * place in ctx; scratch is two tiles on the stack. Masking is by global
 * position, element by element; a tile pair where every key comes after every
 * query is skipped. */
#include "kernels/cpu/flash.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/math.h"

#define TILE 64

/* cblas sizes are ints: the backends refuse larger ops up front (supports_op). */
static int as_blas(int64_t x) {
  assert(x >= 0 && x <= INT_MAX);
  return (int)x;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The global positions of rows i0..i0+n-1 into out (n <= TILE); returns their
 * largest (want_max) or smallest. Positions need not be monotone: a rank's
 * load-balanced share is two runs. */
static int64_t tile_pos(int64_t *out, const int32_t *pos, int64_t i0, int64_t n, int want_max) {
  int64_t ext = pos ? pos[i0] : i0;
  for (int64_t i = 0; i < n; i++) {
    out[i] = pos ? pos[i0 + i] : i0 + i;
    ext = want_max ? (out[i] > ext ? out[i] : ext) : (out[i] < ext ? out[i] : ext);
  }
  return ext;
}

/* The dropout multiplier of probability element (tq, tk) of head h, at global
 * positions in a sequence of s_full: 0 or 1 / (1 - p). */
static float drop_mul(float p, uint64_t seed, uint64_t off, int64_t h, int64_t s_full, int64_t tq, int64_t tk) {
  if (p <= 0) return 1.0f;
  return px_dropout_keep(seed, off + (uint64_t)((h * s_full + tq) * s_full + tk), p) ? 1.0f / (1.0f - p) : 0.0f;
}

void px_k_flash_fwd(float *ctx, float *lse, const float *q, const float *k, const float *v, int64_t sq, int64_t sk,
                    int64_t hq, int64_t hkv, int64_t d, const int32_t *qpos, const int32_t *kpos, int64_t s_full,
                    float p, uint64_t seed, uint64_t off) {
  if (sq <= 0 || hq <= 0 || hkv <= 0 || d <= 0) return;
  const int64_t group = hq / hkv, ldq = hq * d, ldk = hkv * d;
  const float scale = 1.0f / sqrtf((float)d);
  float sc[TILE * TILE], m[TILE], l[TILE]; /* scores then probabilities (nr, nc); row max and sum */
  int64_t qp[TILE], kp[TILE];              /* the tiles' global positions */
  for (int64_t h = 0; h < hq; h++) {
    const float *qh = q + h * d, *kh = k + h / group * d, *vh = v + h / group * d;
    float *ch = ctx + h * d;
    for (int64_t t0 = 0; t0 < sq; t0 += TILE) {
      const int64_t nr = min64(TILE, sq - t0), qmax = tile_pos(qp, qpos, t0, nr, 1);
      for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        memset(ch + (t0 + r) * ldq, 0, (size_t)d * sizeof *ch);
      }
      for (int64_t s0 = 0; s0 < sk; s0 += TILE) {
        const int64_t nc = min64(TILE, sk - s0);
        if (tile_pos(kp, kpos, s0, nc, 0) > qmax) continue; /* every key after every query */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, sc, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int64_t tq = qp[r];
          float *row = sc + r * TILE, mx = m[r];
          for (int64_t c = 0; c < nc; c++)
            if (kp[c] <= tq) mx = row[c] > mx ? row[c] : mx;
          /* mx stays -INFINITY while the row has seen no key: alpha 0, every e 0 */
          const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mx);
          float sum = 0.0f;
          for (int64_t c = 0; c < nc; c++) {
            if (kp[c] > tq) {
              row[c] = 0.0f;
              continue;
            }
            float e = expf(row[c] - mx);
            sum += e;
            row[c] = e * drop_mul(p, seed, off, h, s_full, tq, kp[c]);
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          float *o = ch + (t0 + r) * ldq;
          for (int64_t i = 0; i < d; i++) o[i] *= alpha;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(nr), as_blas(d), as_blas(nc), 1.0f, sc, TILE,
                    vh + s0 * ldk, as_blas(ldk), 1.0f, ch + t0 * ldq, as_blas(ldq));
      }
      for (int64_t r = 0; r < nr; r++) {
        if (m[r] == -INFINITY) { /* saw no key: ctx stays 0 */
          lse[h * sq + t0 + r] = -INFINITY;
          continue;
        }
        float *o = ch + (t0 + r) * ldq, inv = 1.0f / l[r];
        for (int64_t i = 0; i < d; i++) o[i] *= inv;
        lse[h * sq + t0 + r] = m[r] + logf(l[r]);
      }
    }
  }
}

void px_k_flash_merge(float *ctx, float *lse, const float *ctx2, const float *lse2, int64_t sq, int64_t hq,
                      int64_t d) {
  for (int64_t h = 0; h < hq; h++)
    for (int64_t t = 0; t < sq; t++) {
      const float a = lse[h * sq + t], b = lse2[h * sq + t];
      float *o = ctx + (t * hq + h) * d;
      const float *o2 = ctx2 + (t * hq + h) * d;
      if (b == -INFINITY) continue; /* the other block saw nothing of this row */
      if (a == -INFINITY) {
        memcpy(o, o2, (size_t)d * sizeof *o);
        lse[h * sq + t] = b;
        continue;
      }
      const float mx = a > b ? a : b, ls = mx + log1pf(expf(-fabsf(a - b)));
      const float wa = expf(a - ls), wb = expf(b - ls);
      for (int64_t i = 0; i < d; i++) o[i] = o[i] * wa + o2[i] * wb;
      lse[h * sq + t] = ls;
    }
}

void px_k_flash_bwd(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k, const float *v,
                    const float *ctx, const float *lse, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
                    const int32_t *qpos, const int32_t *kpos, int64_t s_full, float p, uint64_t seed, uint64_t off) {
  if (sq <= 0 || sk <= 0 || hq <= 0 || hkv <= 0 || d <= 0) return;
  const int64_t group = hq / hkv, ldq = hq * d, ldk = hkv * d;
  const float scale = 1.0f / sqrtf((float)d);
  /* pd: scores, then the dropped-out probabilities; ds: d(dropped P), then dS */
  float pd[TILE * TILE], ds[TILE * TILE], delta[TILE];
  int64_t qp[TILE], kp[TILE]; /* the tiles' global positions */
  for (int64_t h = 0; h < hq; h++) {
    const int64_t g = h / group;
    const float *qh = q + h * d, *kh = k + g * d, *vh = v + g * d, *doh = dctx + h * d, *oh = ctx + h * d;
    const float *lh = lse + h * sq;
    float *dqh = dq + h * d, *dkh = dk + g * d, *dvh = dv + g * d;
    for (int64_t t0 = 0; t0 < sq; t0 += TILE) {
      const int64_t nr = min64(TILE, sq - t0), qmax = tile_pos(qp, qpos, t0, nr, 1);
      for (int64_t r = 0; r < nr; r++) { /* delta = rowsum(P * dP) = dO . O */
        double acc = 0.0;
        for (int64_t i = 0; i < d; i++) acc += (double)doh[(t0 + r) * ldq + i] * oh[(t0 + r) * ldq + i];
        delta[r] = (float)acc;
      }
      for (int64_t s0 = 0; s0 < sk; s0 += TILE) {
        const int64_t nc = min64(TILE, sk - s0);
        if (tile_pos(kp, kpos, s0, nc, 0) > qmax) continue; /* every key after every query */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, pd, TILE);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), 1.0f,
                    doh + t0 * ldq, as_blas(ldq), vh + s0 * ldk, as_blas(ldk), 0.0f, ds, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int64_t tq = qp[r];
          const float lt = lh[t0 + r]; /* -INFINITY: the row saw no key anywhere, contributes nothing */
          for (int64_t c = 0; c < nc; c++) {
            const bool seen = kp[c] <= tq && lt != -INFINITY;
            float prob = seen ? expf(pd[r * TILE + c] - lt) : 0.0f, mul = drop_mul(p, seed, off, h, s_full, tq, kp[c]);
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
