/* FlashAttention on the CPU: tiles of 64 queries x 64 keys, the products
 * through cblas on strided head slices (no copies), the output accumulated in
 * place in ctx; scratch is two tiles on the stack. Masking is by global
 * position, element by element (causal, and within a sliding window); a tile
 * pair where every key comes after every query, or before every query's
 * window, is skipped. Heads (the backward: KV heads, whose dK and dV the group's
 * query heads share) split over the kernels' threads (kernels/cpu/par.h)
 * while the tile products stay on one BLAS thread (head dim <= 64), one
 * head's work the same on any thread, so the bits do not depend on the
 * split; the softmax loops vectorise (PX_K_SIMD, px_exp_fast, fixed lanes). */
#include "kernels/cpu/flash.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/cpu/par.h"
#include "kernels/math.h"

#define TILE 64

/* cblas sizes are ints: the backends refuse larger ops up front (supports_op). */
static int as_blas(int64_t x) {
  assert(x >= 0 && x <= INT_MAX);
  return (int)x;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The global positions of rows i0..i0+n-1 into out (n <= TILE), and their
 * smallest and largest. Positions need not be monotone: a rank's
 * load-balanced share is two runs. */
static void tile_pos(int32_t *out, const int32_t *pos, int64_t i0, int64_t n, int32_t *lo, int32_t *hi) {
  *lo = *hi = pos ? pos[i0] : (int32_t)i0;
  for (int64_t i = 0; i < n; i++) {
    out[i] = pos ? pos[i0 + i] : (int32_t)(i0 + i);
    *lo = out[i] < *lo ? out[i] : *lo;
    *hi = out[i] > *hi ? out[i] : *hi;
  }
}

/* The last position before query position tq's window: keys at or before it are not seen (INT32_MIN: none). */
static int32_t window_start(int32_t tq, int64_t window) {
  return window > 0 ? (int32_t)((int64_t)tq - window) : INT32_MIN;
}

/* Whether a tile of queries [qlo, qhi] sees none of a tile of keys [klo, khi]: every key after every query, or
 * at or before every query's window. */
static bool tile_unseen(int32_t qlo, int32_t qhi, int32_t klo, int32_t khi, int64_t window) {
  return klo > qhi || khi <= window_start(qlo, window);
}

/* The dropout multiplier of probability element (tq, tk) of head h, at global
 * positions in a sequence of s_full: 0 or 1 / (1 - p). */
static float drop_mul(float p, uint64_t seed, uint64_t off, int64_t h, int64_t s_full, int64_t tq, int64_t tk) {
  if (p <= 0) return 1.0f;
  return px_dropout_keep(seed, off + (uint64_t)((h * s_full + tq) * s_full + tk), p) ? 1.0f / (1.0f - p) : 0.0f;
}

/* Heads per thread: OpenBLAS runs a product of m n k <= 65536 x 4 (its
 * GEMM_MULTITHREAD_THRESHOLD) on the calling thread, so the 64 x 64 x d tile
 * products of different heads run side by side while d <= 64; above it each
 * product would start OpenBLAS's own threads from inside ours (measured:
 * head dim 128, 2 threads, 3-5x slower than one head at a time), so the
 * heads stay on one thread and BLAS threads each product. */
static int64_t heads_per_thread(int64_t heads, int64_t d) { return (int64_t)TILE * TILE * d <= 262144 ? 1 : heads; }

/* Lanes of the softmax row reductions. */
#define LANES 8

/* max(mx, row[c] over the keys c < nc that query position tq sees: at positions after lo, up to tq). */
PX_K_SIMD static float seen_max(const float *row, const int32_t *kp, int32_t tq, int32_t lo, int64_t nc, float mx) {
  float acc[LANES];
  for (int j = 0; j < LANES; j++) acc[j] = mx;
  int64_t c = 0;
  for (; c + LANES <= nc; c += LANES)
    for (int j = 0; j < LANES; j++) {
      const float x = kp[c + j] <= tq && kp[c + j] > lo ? row[c + j] : -INFINITY;
      acc[j] = x > acc[j] ? x : acc[j];
    }
  for (; c < nc; c++) {
    const float x = kp[c] <= tq && kp[c] > lo ? row[c] : -INFINITY;
    acc[0] = x > acc[0] ? x : acc[0];
  }
  float m = acc[0];
  for (int j = 1; j < LANES; j++) m = acc[j] > m ? acc[j] : m;
  return m;
}

/* row[c] = e^(row[c] - mx) where tq sees key c (after lo), else 0; returns their sum (fixed lanes). */
PX_K_SIMD static float seen_exp(float *row, const int32_t *kp, int32_t tq, int32_t lo, int64_t nc, float mx) {
  float acc[LANES] = {0};
  int64_t c = 0;
  for (; c + LANES <= nc; c += LANES)
    for (int j = 0; j < LANES; j++) {
      const float e = kp[c + j] <= tq && kp[c + j] > lo ? px_exp_fast(row[c + j] - mx) : 0.0f;
      acc[j] += e;
      row[c + j] = e;
    }
  for (int j = 0; c < nc; c++, j++) {
    const float e = kp[c] <= tq && kp[c] > lo ? px_exp_fast(row[c] - mx) : 0.0f;
    acc[j] += e;
    row[c] = e;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

PX_K_SIMD static void scale_row(float *o, float s, int64_t d) {
  for (int64_t i = 0; i < d; i++) o[i] *= s;
}

typedef struct {
  float *ctx, *lse, *dq, *dk, *dvv, *dsink, *seen; /* dvv: the values' gradient; seen (Hq, Sq) accumulates */
  const float *q, *k, *v, *dctx, *octx, *olse;
  int64_t sq, sk, hq, hkv, d, dv, s_full, window; /* dv: the values' (and the context's) head dim */
  const int32_t *qpos, *kpos;
  float p;
  uint64_t seed, off;
} flash_args;

/* The forward of query heads [h0, h1). */
static void fwd_heads(void *ctx_, int64_t h0, int64_t h1) {
  const flash_args *a = ctx_;
  const int64_t sq = a->sq, sk = a->sk, d = a->d, dv = a->dv, group = a->hq / a->hkv, ldq = a->hq * d,
                ldk = a->hkv * d, ldo = a->hq * dv, ldv = a->hkv * dv;
  const float scale = 1.0f / sqrtf((float)d), p = a->p;
  float sc[TILE * TILE], m[TILE], l[TILE]; /* scores then probabilities (nr, nc); row max and sum */
  int32_t qp[TILE], kp[TILE];              /* the tiles' global positions */
  for (int64_t h = h0; h < h1; h++) {
    const float *qh = a->q + h * d, *kh = a->k + h / group * d, *vh = a->v + h / group * dv;
    float *ch = a->ctx + h * dv;
    for (int64_t t0 = 0; t0 < sq; t0 += TILE) {
      const int64_t nr = min64(TILE, sq - t0);
      int32_t qlo, qhi, klo, khi;
      tile_pos(qp, a->qpos, t0, nr, &qlo, &qhi);
      for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        memset(ch + (t0 + r) * ldo, 0, (size_t)dv * sizeof *ch);
      }
      for (int64_t s0 = 0; s0 < sk; s0 += TILE) {
        const int64_t nc = min64(TILE, sk - s0);
        tile_pos(kp, a->kpos, s0, nc, &klo, &khi);
        if (tile_unseen(qlo, qhi, klo, khi, a->window)) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, sc, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int32_t tq = qp[r], lo = window_start(tq, a->window);
          float *row = sc + r * TILE;
          const float mx = seen_max(row, kp, tq, lo, nc, m[r]);
          /* mx stays -INFINITY while the row has seen no key: alpha 0, every e 0 */
          const float alpha = m[r] == -INFINITY ? 0.0f : px_exp_fast(m[r] - mx);
          const float sum = seen_exp(row, kp, tq, lo, nc, mx);
          if (p > 0)
            for (int64_t c = 0; c < nc; c++) row[c] *= drop_mul(p, a->seed, a->off, h, a->s_full, tq, kp[c]);
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          scale_row(ch + (t0 + r) * ldo, alpha, dv);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(nr), as_blas(dv), as_blas(nc), 1.0f, sc, TILE,
                    vh + s0 * ldv, as_blas(ldv), 1.0f, ch + t0 * ldo, as_blas(ldo));
      }
      for (int64_t r = 0; r < nr; r++) {
        if (m[r] == -INFINITY) { /* saw no key: ctx stays 0 */
          a->lse[h * sq + t0 + r] = -INFINITY;
          continue;
        }
        scale_row(ch + (t0 + r) * ldo, 1.0f / l[r], dv);
        a->lse[h * sq + t0 + r] = m[r] + logf(l[r]);
      }
    }
  }
}

void px_k_flash_fwd(float *ctx, float *lse, const float *q, const float *k, const float *v, int64_t sq, int64_t sk,
                    int64_t hq, int64_t hkv, int64_t d, const int32_t *qpos, const int32_t *kpos, int64_t window,
                    int64_t s_full, float p, uint64_t seed, uint64_t off) {
  px_k_flash_fwd_dv(ctx, lse, q, k, v, sq, sk, hq, hkv, d, d, qpos, kpos, window, s_full, p, seed, off);
}

void px_k_flash_fwd_dv(float *ctx, float *lse, const float *q, const float *k, const float *v, int64_t sq, int64_t sk,
                       int64_t hq, int64_t hkv, int64_t d, int64_t dval, const int32_t *qpos, const int32_t *kpos,
                       int64_t window, int64_t s_full, float p, uint64_t seed, uint64_t off) {
  if (sq <= 0 || hq <= 0 || hkv <= 0 || d <= 0 || dval <= 0) return;
  flash_args a = {.ctx = ctx, .lse = lse, .q = q, .k = k, .v = v, .sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d,
                  .dv = dval, .s_full = s_full, .window = window, .qpos = qpos, .kpos = kpos, .p = p, .seed = seed,
                  .off = off};
  px_k_parallel_for(hq, heads_per_thread(hq, d > dval ? d : dval), fwd_heads, &a);
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

/* Without dropout: pd = P, ds = P (dP - delta) for the keys tq sees (after lo; 0 elsewhere). */
PX_K_SIMD static void bwd_row(float *pd, float *ds, const int32_t *kp, int32_t tq, int32_t lo, float lt, float delta,
                              int64_t nc) {
  for (int64_t c = 0; c < nc; c++) {
    const float prob = kp[c] <= tq && kp[c] > lo ? px_exp_fast(pd[c] - lt) : 0.0f;
    pd[c] = prob;
    ds[c] = prob * (ds[c] - delta);
  }
}

/* A row's share of its sink logit's gradient, given the probability `seen` of every key it sees and delta = dO . O:
 * the sink's column has probability 1 - seen and gradient 0 (no value), so its logit's is -(1 - seen) delta. */
static double sink_grad(double seen, float delta) { return -(1.0 - seen) * delta; }

/* The backward of KV heads [g0, g1): each one's query heads in order, so dK
 * and dV add them up in the same order on any split. */
static void bwd_kv_heads(void *ctx_, int64_t g0, int64_t g1) {
  const flash_args *a = ctx_;
  const int64_t sq = a->sq, sk = a->sk, d = a->d, dv = a->dv, group = a->hq / a->hkv, ldq = a->hq * d,
                ldk = a->hkv * d, ldo = a->hq * dv, ldv = a->hkv * dv;
  const float scale = 1.0f / sqrtf((float)d), p = a->p;
  /* pd: scores, then the dropped-out probabilities; ds: d(dropped P), then dS */
  float pd[TILE * TILE], ds[TILE * TILE], delta[TILE];
  double seen[TILE];          /* with sinks: the probability of this block's keys each row sees */
  int32_t qp[TILE], kp[TILE]; /* the tiles' global positions */
  for (int64_t h = g0 * group; h < g1 * group; h++) {
    const int64_t g = h / group;
    const float *qh = a->q + h * d, *kh = a->k + g * d, *vh = a->v + g * dv, *doh = a->dctx + h * dv;
    const float *oh = a->octx + h * dv, *lh = a->olse + h * sq;
    float *dqh = a->dq + h * d, *dkh = a->dk + g * d, *dvh = a->dvv + g * dv;
    for (int64_t t0 = 0; t0 < sq; t0 += TILE) {
      const int64_t nr = min64(TILE, sq - t0);
      int32_t qlo, qhi, klo, khi;
      tile_pos(qp, a->qpos, t0, nr, &qlo, &qhi);
      for (int64_t r = 0; r < nr; r++) { /* delta = rowsum(P * dP) = dO . O */
        double acc = 0.0;
        for (int64_t i = 0; i < dv; i++) acc += (double)doh[(t0 + r) * ldo + i] * oh[(t0 + r) * ldo + i];
        delta[r] = (float)acc;
        seen[r] = 0.0;
      }
      for (int64_t s0 = 0; s0 < sk; s0 += TILE) {
        const int64_t nc = min64(TILE, sk - s0);
        tile_pos(kp, a->kpos, s0, nc, &klo, &khi);
        if (tile_unseen(qlo, qhi, klo, khi, a->window)) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(d), scale,
                    qh + t0 * ldq, as_blas(ldq), kh + s0 * ldk, as_blas(ldk), 0.0f, pd, TILE);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas(nr), as_blas(nc), as_blas(dv), 1.0f,
                    doh + t0 * ldo, as_blas(ldo), vh + s0 * ldv, as_blas(ldv), 0.0f, ds, TILE);
        for (int64_t r = 0; r < nr; r++) {
          const int32_t tq = qp[r], lo = window_start(tq, a->window);
          const float lt = lh[t0 + r]; /* -INFINITY: the row saw no key anywhere, contributes nothing */
          if (lt == -INFINITY) {
            memset(pd + r * TILE, 0, (size_t)nc * sizeof *pd);
            memset(ds + r * TILE, 0, (size_t)nc * sizeof *ds);
          } else if (p <= 0) {
            bwd_row(pd + r * TILE, ds + r * TILE, kp, tq, lo, lt, delta[r], nc);
            for (int64_t c = 0; (a->dsink || a->seen) && c < nc; c++) seen[r] += pd[r * TILE + c];
          } else {
            for (int64_t c = 0; c < nc; c++) {
              const float prob = kp[c] <= tq && kp[c] > lo ? px_exp_fast(pd[r * TILE + c] - lt) : 0.0f;
              const float mul = drop_mul(p, a->seed, a->off, h, a->s_full, tq, kp[c]);
              pd[r * TILE + c] = prob * mul;
              ds[r * TILE + c] = prob * (ds[r * TILE + c] * mul - delta[r]);
              seen[r] += prob;
            }
          }
        }
        /* dV += Pd^T dO, dQ += scale dS K, dK += scale dS^T Q */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(nc), as_blas(dv), as_blas(nr), 1.0f, pd, TILE,
                    doh + t0 * ldo, as_blas(ldo), 1.0f, dvh + s0 * ldv, as_blas(ldv));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas(nr), as_blas(d), as_blas(nc), scale, ds, TILE,
                    kh + s0 * ldk, as_blas(ldk), 1.0f, dqh + t0 * ldq, as_blas(ldq));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas(nc), as_blas(d), as_blas(nr), scale, ds, TILE,
                    qh + t0 * ldq, as_blas(ldq), 1.0f, dkh + s0 * ldk, as_blas(ldk));
      }
      for (int64_t r = 0; a->seen && r < nr; r++) a->seen[h * sq + t0 + r] += (float)seen[r];
      if (!a->dsink) continue;
      double gs = 0.0;
      for (int64_t r = 0; r < nr; r++)
        if (lh[t0 + r] != -INFINITY) gs += sink_grad(seen[r], delta[r]);
      a->dsink[h] += (float)gs;
    }
  }
}

/* The backward of one key block: sinks' gradient into dsink, or each row's probability of the block's keys into
 * seen (for a sinks' gradient over blocks, px_k_flash_sink_bwd), or neither. */
static void flash_bwd(float *dq, float *dk, float *dv, float *dsink, float *seen, const float *dctx, const float *q,
                      const float *k, const float *v, const float *ctx, const float *lse, int64_t sq, int64_t sk,
                      int64_t hq, int64_t hkv, int64_t d, int64_t dval, const int32_t *qpos, const int32_t *kpos,
                      int64_t window, int64_t s_full, float p, uint64_t seed, uint64_t off) {
  if (sq <= 0 || sk <= 0 || hq <= 0 || hkv <= 0 || d <= 0 || dval <= 0) return;
  flash_args a = {.dq = dq, .dk = dk, .dvv = dv, .dsink = dsink, .seen = seen, .dctx = dctx, .q = q, .k = k, .v = v,
                  .octx = ctx, .olse = lse, .sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d, .dv = dval,
                  .s_full = s_full, .window = window, .qpos = qpos, .kpos = kpos, .p = p, .seed = seed, .off = off};
  px_k_parallel_for(hkv, heads_per_thread(hkv, d > dval ? d : dval), bwd_kv_heads, &a);
}

void px_k_flash_bwd(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k, const float *v,
                    const float *ctx, const float *lse, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
                    const int32_t *qpos, const int32_t *kpos, int64_t window, int64_t s_full, float p, uint64_t seed,
                    uint64_t off) {
  px_k_flash_bwd_seen(dq, dk, dv, NULL, dctx, q, k, v, ctx, lse, sq, sk, hq, hkv, d, qpos, kpos, window, s_full, p,
                      seed, off);
}

void px_k_flash_bwd_seen(float *dq, float *dk, float *dv, float *seen, const float *dctx, const float *q,
                         const float *k, const float *v, const float *ctx, const float *lse, int64_t sq, int64_t sk,
                         int64_t hq, int64_t hkv, int64_t d, const int32_t *qpos, const int32_t *kpos, int64_t window,
                         int64_t s_full, float p, uint64_t seed, uint64_t off) {
  flash_bwd(dq, dk, dv, NULL, seen, dctx, q, k, v, ctx, lse, sq, sk, hq, hkv, d, d, qpos, kpos, window, s_full, p, seed,
            off);
}

void px_k_flash_sink_bwd(float *dsink, const float *seen, const float *dctx, const float *ctx, const float *lse,
                         int64_t sq, int64_t hq, int64_t d) {
  for (int64_t h = 0; h < hq; h++) {
    double gs = 0.0;
    for (int64_t t = 0; t < sq; t++) {
      if (lse[h * sq + t] == -INFINITY) continue;
      double delta = 0.0; /* dO . O, as the backward's */
      for (int64_t i = 0; i < d; i++) delta += (double)dctx[(t * hq + h) * d + i] * ctx[(t * hq + h) * d + i];
      gs += sink_grad(seen[h * sq + t], (float)delta);
    }
    dsink[h] += (float)gs;
  }
}

void px_k_flash_sink_fold(float *ctx, float *lse, const float *sinks, int64_t sq, int64_t hq, int64_t d) {
  for (int64_t h = 0; h < hq; h++)
    for (int64_t t = 0; t < sq; t++) {
      const float a = lse[h * sq + t], b = sinks[h];
      float *o = ctx + (t * hq + h) * d;
      if (a == -INFINITY) { /* saw no key: the sink takes the whole row, ctx stays 0 */
        lse[h * sq + t] = b;
        continue;
      }
      const float mx = a > b ? a : b, ls = mx + log1pf(expf(-fabsf(a - b)));
      scale_row(o, expf(a - ls), d);
      lse[h * sq + t] = ls;
    }
}

void px_k_flash_bwd_dv(float *dq, float *dk, float *dv, float *dsink, const float *dctx, const float *q,
                         const float *k, const float *v, const float *ctx, const float *lse, int64_t sq, int64_t sk,
                         int64_t hq, int64_t hkv, int64_t d, int64_t dval, const int32_t *qpos, const int32_t *kpos,
                         int64_t window, int64_t s_full, float p, uint64_t seed, uint64_t off) {
  flash_bwd(dq, dk, dv, dsink, NULL, dctx, q, k, v, ctx, lse, sq, sk, hq, hkv, d, dval, qpos, kpos, window, s_full, p,
            seed, off);
}
