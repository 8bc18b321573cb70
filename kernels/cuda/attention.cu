/* Causal GQA attention in three ops: the six per-(batch, head) products go
 * through one tiled kernel over strided slices; the softmaxes are a warp per row. */
#include "kernels/cuda/attention.h"

/* The tiled kernel reads the heads in place (no copies, any GQA mapping) and
 * skips the tiles the causal mask makes zero. Every output element has one
 * writer: the backward into a kv head sums its query heads in a fixed order,
 * so results are deterministic without atomics. */

/* ---------------- strided batched matrix product ---------------- */

/* C (m, n) = alpha * sum_g A_g (m, k) B_g (k, n), written or added to C, for
 * each grid slice z = bi * nh + hi. Element (i, p) of A is
 * a[off_a + i * a_rs + p * a_cs] with off_a = bi * a_bs + (hi / a_hdiv) * a_hs
 * + g * a_gs; the same for B; C is c[bi * c_bs + hi * c_hs + i * c_rs + j]. */
struct mm_args {
  float *c;
  const float *a, *b;
  int64_t m, n, k;
  int64_t a_rs, a_cs, a_bs, a_hs, a_hdiv, a_gs;
  int64_t b_rs, b_cs, b_bs, b_hs, b_hdiv, b_gs;
  int64_t c_rs, c_bs, c_hs;
  int64_t nh, nz, ngroup;
  float alpha;
  bool accumulate;
  int mode;
};

/* Causal shortcuts, by what is zero in the product (i is C's row, j its column, p the summed index). */
enum {
  MM_FULL = 0,
  MM_ZERO_UPPER = 1, /* write 0 to C where j > i (and do not compute tiles wholly there) */
  MM_SKIP_UPPER = 2, /* leave tiles of C wholly above the diagonal alone */
  MM_P_LE_I = 4,     /* A(i, p) = 0 for p > i: stop the sum at the tile's last row */
  MM_P_GE_I = 8,     /* A(i, p) = 0 for p < i: start the sum at the tile's first row */
};

#define MM_BM 64
#define MM_BN 64
#define MM_BK 16
#define MM_THREADS 256 /* 16 x 16 threads, each a 4 x 4 block of C */

static __global__ void __launch_bounds__(MM_THREADS) mm_kernel(const mm_args args) {
  __shared__ float as[MM_BK][MM_BM + 4];
  __shared__ float bs[MM_BK][MM_BN + 4];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t tiles_n = (args.n + MM_BN - 1) / MM_BN;
  const int64_t i0 = (int64_t)(blockIdx.x / tiles_n) * MM_BM, j0 = (int64_t)(blockIdx.x % tiles_n) * MM_BN;
  const bool above = j0 > i0 + MM_BM - 1; /* the tile lies wholly above the diagonal */
  if (above && (args.mode & MM_SKIP_UPPER)) return;

  int64_t p_begin = 0, p_end = args.k;
  if (args.mode & MM_P_LE_I) p_end = p_end < i0 + MM_BM ? p_end : i0 + MM_BM;
  if (args.mode & MM_P_GE_I) p_begin = i0 / MM_BK * MM_BK;
  const bool compute = !(above && (args.mode & MM_ZERO_UPPER));

  for (int64_t z = blockIdx.y; z < args.nz; z += gridDim.y) { /* block-uniform loop */
    const int64_t bi = z / args.nh, hi = z % args.nh;
    float acc[4][4] = {};
    for (int64_t g = 0; compute && g < args.ngroup; g++) {
      const float *a = args.a + bi * args.a_bs + hi / args.a_hdiv * args.a_hs + g * args.a_gs;
      const float *b = args.b + bi * args.b_bs + hi / args.b_hdiv * args.b_hs + g * args.b_gs;
      for (int64_t p0 = p_begin; p0 < p_end; p0 += MM_BK) {
        /* stage A (BM x BK) and B (BK x BN); consecutive threads take
         * consecutive addresses along whichever index has stride 1 */
        for (int q = 0; q < (MM_BM * MM_BK) / MM_THREADS; q++) {
          int e = tid + q * MM_THREADS, ii, pp;
          if (args.a_cs == 1) {
            ii = e / MM_BK;
            pp = e % MM_BK;
          } else {
            ii = e % MM_BM;
            pp = e / MM_BM;
          }
          int64_t gi = i0 + ii, gp = p0 + pp;
          as[pp][ii] = (gi < args.m && gp < p_end) ? a[gi * args.a_rs + gp * args.a_cs] : 0.0f;
        }
        for (int q = 0; q < (MM_BK * MM_BN) / MM_THREADS; q++) {
          int e = tid + q * MM_THREADS, jj, pp;
          if (args.b_cs == 1) {
            jj = e % MM_BN;
            pp = e / MM_BN;
          } else {
            jj = e / MM_BK;
            pp = e % MM_BK;
          }
          int64_t gj = j0 + jj, gp = p0 + pp;
          bs[pp][jj] = (gj < args.n && gp < p_end) ? b[gp * args.b_rs + gj * args.b_cs] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int pp = 0; pp < MM_BK; pp++) {
          float av[4], bv[4];
#pragma unroll
          for (int r = 0; r < 4; r++) av[r] = as[pp][ty + 16 * r];
#pragma unroll
          for (int s = 0; s < 4; s++) bv[s] = bs[pp][tx + 16 * s];
#pragma unroll
          for (int r = 0; r < 4; r++)
#pragma unroll
            for (int s = 0; s < 4; s++) acc[r][s] += av[r] * bv[s];
        }
        __syncthreads(); /* the tiles are reused by the next step */
      }
    }
    float *c = args.c + bi * args.c_bs + hi * args.c_hs;
#pragma unroll
    for (int r = 0; r < 4; r++) {
#pragma unroll
      for (int s = 0; s < 4; s++) {
        int64_t gi = i0 + ty + 16 * r, gj = j0 + tx + 16 * s;
        if (gi >= args.m || gj >= args.n) continue;
        float val = args.alpha * acc[r][s];
        if ((args.mode & MM_ZERO_UPPER) && gj > gi) val = 0.0f;
        float *dst = c + gi * args.c_rs + gj;
        *dst = args.accumulate ? *dst + val : val;
      }
    }
  }
}

static px_status mm(const mm_args &args, cudaStream_t stream) {
  int64_t tiles = ((args.m + MM_BM - 1) / MM_BM) * ((args.n + MM_BN - 1) / MM_BN);
  if (tiles > 0x7fffffff) return px_kc_fail(__FILE__, __LINE__, "attention: %lld tiles is too many", (long long)tiles);
  dim3 grid((unsigned)tiles, (unsigned)(args.nz < 65535 ? args.nz : 65535));
  mm_kernel<<<grid, MM_THREADS, 0, stream>>>(args);
  return PX_KC_LAUNCHED("mm_kernel");
}

/* Slices common to all products; the caller fills in the operands. */
static mm_args mm_base(int64_t m, int64_t n, int64_t k, int64_t nh, int64_t nz) {
  mm_args a = {};
  a.m = m;
  a.n = n;
  a.k = k;
  a.nh = nh;
  a.nz = nz;
  a.ngroup = 1;
  a.a_hdiv = a.b_hdiv = 1;
  a.alpha = 1.0f;
  return a;
}

/* The attention shapes: b batch rows, t positions, hq query heads, hkv kv
 * heads (query head h reads kv head h / (hq / hkv)), d head size. */
struct attn_dims {
  int64_t b, t, hq, hkv, d;
};

static bool attn_empty(attn_dims s) { return s.b <= 0 || s.t <= 0 || s.hq <= 0 || s.hkv <= 0 || s.d <= 0; }

/* The three products of the six ops, per batch row and query head h (kv its kv head):
 *   rows_by_kvt  C_h (T, T) = alpha X_h (T, D) KV_kv^T (D, T)   X (B, T, Hq, D), C (B, Hq, T, T)
 *   mats_by_kv   C_h (T, D) = alpha M_h (T, T) KV_kv (T, D)     M (B, Hq, T, T) lower triangular, C like X
 *   group_sum    C_kv (T, D) += alpha sum over the group's heads g of M_g^T (T, T) X_g (T, D), C (B, T, Hkv, D) */
static px_status rows_by_kvt(float *c, const float *x, const float *kv, attn_dims s, float alpha, bool accumulate,
                             int mode, cudaStream_t stream) {
  const int64_t qs = s.hq * s.d, ks = s.hkv * s.d, t = s.t;
  mm_args a = mm_base(t, t, s.d, s.hq, s.b * s.hq);
  a.c = c, a.c_rs = t, a.c_bs = s.hq * t * t, a.c_hs = t * t;
  a.a = x, a.a_rs = qs, a.a_cs = 1, a.a_bs = t * qs, a.a_hs = s.d;
  a.b = kv, a.b_rs = 1, a.b_cs = ks, a.b_bs = t * ks, a.b_hs = s.d, a.b_hdiv = s.hq / s.hkv;
  a.alpha = alpha;
  a.accumulate = accumulate;
  a.mode = mode;
  return mm(a, stream);
}

static px_status mats_by_kv(float *c, const float *m, const float *kv, attn_dims s, float alpha, bool accumulate,
                            cudaStream_t stream) {
  const int64_t qs = s.hq * s.d, ks = s.hkv * s.d, t = s.t;
  mm_args a = mm_base(t, s.d, t, s.hq, s.b * s.hq);
  a.c = c, a.c_rs = qs, a.c_bs = t * qs, a.c_hs = s.d;
  a.a = m, a.a_rs = t, a.a_cs = 1, a.a_bs = s.hq * t * t, a.a_hs = t * t;
  a.b = kv, a.b_rs = ks, a.b_cs = 1, a.b_bs = t * ks, a.b_hs = s.d, a.b_hdiv = s.hq / s.hkv;
  a.alpha = alpha;
  a.accumulate = accumulate;
  a.mode = MM_P_LE_I; /* M(t, p) = 0 for p > t */
  return mm(a, stream);
}

static px_status group_sum(float *c, const float *m, const float *x, attn_dims s, float alpha, cudaStream_t stream) {
  const int64_t group = s.hq / s.hkv, qs = s.hq * s.d, ks = s.hkv * s.d, t = s.t;
  mm_args a = mm_base(t, s.d, t, s.hkv, s.b * s.hkv);
  a.c = c, a.c_rs = ks, a.c_bs = t * ks, a.c_hs = s.d;
  a.a = m, a.a_rs = 1, a.a_cs = t, a.a_bs = s.hq * t * t, a.a_hs = group * t * t, a.a_gs = t * t;
  a.b = x, a.b_rs = qs, a.b_cs = 1, a.b_bs = t * qs, a.b_hs = group * s.d, a.b_gs = s.d;
  a.ngroup = group;
  a.alpha = alpha;
  a.accumulate = true;
  a.mode = MM_P_GE_I; /* M^T(t, p) = M(p, t) = 0 for p < t */
  return mm(a, stream);
}

extern "C" px_status px_kc_attn_scores_fwd(float *scores, const float *q, const float *k, int64_t b, int64_t t,
                                           int64_t hq, int64_t hkv, int64_t d, float scale, cudaStream_t stream) {
  attn_dims s = {b, t, hq, hkv, d};
  if (attn_empty(s)) return PX_OK;
  /* S = scale Q K^T, zero above the diagonal */
  return rows_by_kvt(scores, q, k, s, scale, false, MM_ZERO_UPPER, stream);
}

extern "C" px_status px_kc_attn_scores_bwd(float *dq, float *dk, const float *dscores, const float *q, const float *k,
                                           int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale,
                                           cudaStream_t stream) {
  attn_dims s = {b, t, hq, hkv, d};
  if (attn_empty(s)) return PX_OK;
  /* dQ += scale dS K; dK += scale dS^T Q over the group */
  px_status st = mats_by_kv(dq, dscores, k, s, scale, true, stream);
  return st != PX_OK ? st : group_sum(dk, dscores, q, s, scale, stream);
}

extern "C" px_status px_kc_attn_context_fwd(float *ctx, const float *probs, const float *v, int64_t b, int64_t t,
                                            int64_t hq, int64_t hkv, int64_t d, cudaStream_t stream) {
  attn_dims s = {b, t, hq, hkv, d};
  if (attn_empty(s)) return PX_OK;
  return mats_by_kv(ctx, probs, v, s, 1.0f, false, stream); /* C = P V */
}

extern "C" px_status px_kc_attn_context_bwd(float *dprobs, float *dv, const float *dctx, const float *probs,
                                            const float *v, int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d,
                                            cudaStream_t stream) {
  attn_dims s = {b, t, hq, hkv, d};
  if (attn_empty(s)) return PX_OK;
  /* dP += dC V^T (lower triangle); dV += P^T dC over the group */
  px_status st = rows_by_kvt(dprobs, dctx, v, s, 1.0f, true, MM_SKIP_UPPER, stream);
  return st != PX_OK ? st : group_sum(dv, probs, dctx, s, 1.0f, stream);
}

/* ---------------- causal softmax: a warp per row ---------------- */

#define SOFTMAX_WARPS 8

/* The first column query position i sees: 0, or its sliding window's start (window > 0). */
static __device__ __forceinline__ int64_t first_seen(int64_t i, int64_t window) {
  return window > 0 && i >= window ? i - window + 1 : 0;
}

/* sinks (Hq) or NULL: one more logit of each row of head r / t % hq, in the denominator only. */
static __global__ void softmax_fwd_kernel(float *probs, const float *scores, const float *sinks, int64_t rows,
                                          int64_t hq, int64_t t, int64_t window) {
  const int64_t r = (int64_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
  if (r >= rows) return; /* warp-uniform */
  const int lane = threadIdx.x & 31;
  const int64_t i = r % t, j0 = first_seen(i, window); /* query position: columns j0..i are visible */
  const float *s = scores + r * t;
  float *p = probs + r * t;
  const float sink = sinks ? sinks[r / t % hq] : -INFINITY;
  float mx = sink;
  for (int64_t j = j0 + lane; j <= i; j += 32) mx = fmaxf(mx, s[j]);
  mx = px_kc_warp_max(mx);
  float sum = 0.0f;
  for (int64_t j = j0 + lane; j <= i; j += 32) { /* a lane reads s[j] before writing p[j]: in place is fine */
    float e = expf(s[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / (px_kc_warp_sum(sum) + (sinks ? expf(sink - mx) : 0.0f));
  for (int64_t j = lane; j < t; j += 32) p[j] = j >= j0 && j <= i ? p[j] * inv : 0.0f;
}

/* terms (rows) or NULL: each row's share of its sink's gradient, -(1 - the row's probabilities) dot. */
static __global__ void softmax_bwd_kernel(float *dscores, float *terms, const float *dprobs, const float *probs,
                                          int64_t rows, int64_t t, int64_t window) {
  const int64_t r = (int64_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t i = r % t, j0 = first_seen(i, window);
  const float *dp = dprobs + r * t, *p = probs + r * t;
  float *ds = dscores + r * t;
  float dot = 0.0f, seen = 0.0f;
  for (int64_t j = j0 + lane; j <= i; j += 32) dot += dp[j] * p[j], seen += p[j];
  dot = px_kc_warp_sum(dot);
  seen = px_kc_warp_sum(seen);
  for (int64_t j = j0 + lane; j <= i; j += 32) ds[j] += p[j] * (dp[j] - dot);
  if (terms && lane == 0) terms[r] = -(1.0f - seen) * dot;
}

extern "C" px_status px_kc_attn_softmax_sink_fwd(float *probs, const float *scores, const float *sinks, int64_t bh,
                                                 int64_t hq, int64_t t, int64_t window, cudaStream_t stream) {
  if (bh <= 0 || t <= 0) return PX_OK;
  const int64_t rows = bh * t;
  softmax_fwd_kernel<<<(unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS), SOFTMAX_WARPS * 32, 0, stream>>>(
      probs, scores, sinks, rows, hq > 0 ? hq : 1, t, window);
  return PX_KC_LAUNCHED("softmax_fwd_kernel");
}

extern "C" px_status px_kc_attn_softmax_fwd(float *probs, const float *scores, int64_t bh, int64_t t, int64_t window,
                                            cudaStream_t stream) {
  return px_kc_attn_softmax_sink_fwd(probs, scores, NULL, bh, 1, t, window, stream);
}

extern "C" px_status px_kc_attn_softmax_sink_bwd(float *dscores, float *terms, const float *dprobs, const float *probs,
                                                 int64_t bh, int64_t t, int64_t window, cudaStream_t stream) {
  if (bh <= 0 || t <= 0) return PX_OK;
  const int64_t rows = bh * t;
  softmax_bwd_kernel<<<(unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS), SOFTMAX_WARPS * 32, 0, stream>>>(
      dscores, terms, dprobs, probs, rows, t, window);
  return PX_KC_LAUNCHED("softmax_bwd_kernel");
}

extern "C" px_status px_kc_attn_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int64_t bh,
                                            int64_t t, int64_t window, cudaStream_t stream) {
  return px_kc_attn_softmax_sink_bwd(dscores, NULL, dprobs, probs, bh, t, window, stream);
}
