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

/* Slices common to all six products; the caller fills in the operands. */
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

static bool attn_empty(int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d) {
  return b <= 0 || t <= 0 || hq <= 0 || hkv <= 0 || d <= 0;
}

extern "C" px_status px_kc_attn_scores_fwd(float *scores, const float *q, const float *k, int64_t b, int64_t t,
                                           int64_t hq, int64_t hkv, int64_t d, float scale, cudaStream_t stream) {
  if (attn_empty(b, t, hq, hkv, d)) return PX_OK;
  const int64_t group = hq / hkv, qs = hq * d, ks = hkv * d;
  /* S (T, T) = scale Q_h (T, D) K_h^T (D, T), zero above the diagonal */
  mm_args s = mm_base(t, t, d, hq, b * hq);
  s.c = scores, s.c_rs = t, s.c_bs = hq * t * t, s.c_hs = t * t;
  s.a = q, s.a_rs = qs, s.a_cs = 1, s.a_bs = t * qs, s.a_hs = d;
  s.b = k, s.b_rs = 1, s.b_cs = ks, s.b_bs = t * ks, s.b_hs = d, s.b_hdiv = group;
  s.alpha = scale;
  s.mode = MM_ZERO_UPPER;
  return mm(s, stream);
}

extern "C" px_status px_kc_attn_scores_bwd(float *dq, float *dk, const float *dscores, const float *q, const float *k,
                                           int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale,
                                           cudaStream_t stream) {
  if (attn_empty(b, t, hq, hkv, d)) return PX_OK;
  const int64_t group = hq / hkv, qs = hq * d, ks = hkv * d;
  /* dQ_h (T, D) += scale dS (T, T) K_h (T, D); dS(t, s) = 0 for s > t */
  mm_args x = mm_base(t, d, t, hq, b * hq);
  x.c = dq, x.c_rs = qs, x.c_bs = t * qs, x.c_hs = d;
  x.a = dscores, x.a_rs = t, x.a_cs = 1, x.a_bs = hq * t * t, x.a_hs = t * t;
  x.b = k, x.b_rs = ks, x.b_cs = 1, x.b_bs = t * ks, x.b_hs = d, x.b_hdiv = group;
  x.alpha = scale;
  x.accumulate = true;
  x.mode = MM_P_LE_I;
  px_status st = mm(x, stream);
  if (st != PX_OK) return st;
  /* dK_kv (T, D) += scale sum over the group's heads g of dS_g^T (T, T) Q_g (T, D);
   * A(s, t) = dS_g(t, s) = 0 for t < s */
  mm_args y = mm_base(t, d, t, hkv, b * hkv);
  y.c = dk, y.c_rs = ks, y.c_bs = t * ks, y.c_hs = d;
  y.a = dscores, y.a_rs = 1, y.a_cs = t, y.a_bs = hq * t * t, y.a_hs = group * t * t, y.a_gs = t * t;
  y.b = q, y.b_rs = qs, y.b_cs = 1, y.b_bs = t * qs, y.b_hs = group * d, y.b_gs = d;
  y.ngroup = group;
  y.alpha = scale;
  y.accumulate = true;
  y.mode = MM_P_GE_I;
  return mm(y, stream);
}

extern "C" px_status px_kc_attn_context_fwd(float *ctx, const float *probs, const float *v, int64_t b, int64_t t,
                                            int64_t hq, int64_t hkv, int64_t d, cudaStream_t stream) {
  if (attn_empty(b, t, hq, hkv, d)) return PX_OK;
  const int64_t group = hq / hkv, qs = hq * d, ks = hkv * d;
  /* C_h (T, D) = P (T, T) V_h (T, D); P(t, s) = 0 for s > t */
  mm_args x = mm_base(t, d, t, hq, b * hq);
  x.c = ctx, x.c_rs = qs, x.c_bs = t * qs, x.c_hs = d;
  x.a = probs, x.a_rs = t, x.a_cs = 1, x.a_bs = hq * t * t, x.a_hs = t * t;
  x.b = v, x.b_rs = ks, x.b_cs = 1, x.b_bs = t * ks, x.b_hs = d, x.b_hdiv = group;
  x.mode = MM_P_LE_I;
  return mm(x, stream);
}

extern "C" px_status px_kc_attn_context_bwd(float *dprobs, float *dv, const float *dctx, const float *probs,
                                            const float *v, int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d,
                                            cudaStream_t stream) {
  if (attn_empty(b, t, hq, hkv, d)) return PX_OK;
  const int64_t group = hq / hkv, qs = hq * d, ks = hkv * d;
  /* dP (T, T) += dC_h (T, D) V_h^T (D, T), lower triangle */
  mm_args x = mm_base(t, t, d, hq, b * hq);
  x.c = dprobs, x.c_rs = t, x.c_bs = hq * t * t, x.c_hs = t * t;
  x.a = dctx, x.a_rs = qs, x.a_cs = 1, x.a_bs = t * qs, x.a_hs = d;
  x.b = v, x.b_rs = 1, x.b_cs = ks, x.b_bs = t * ks, x.b_hs = d, x.b_hdiv = group;
  x.accumulate = true;
  x.mode = MM_SKIP_UPPER;
  px_status st = mm(x, stream);
  if (st != PX_OK) return st;
  /* dV_kv (T, D) += sum over the group's heads g of P_g^T (T, T) dC_g (T, D);
   * A(s, t) = P_g(t, s) = 0 for t < s */
  mm_args y = mm_base(t, d, t, hkv, b * hkv);
  y.c = dv, y.c_rs = ks, y.c_bs = t * ks, y.c_hs = d;
  y.a = probs, y.a_rs = 1, y.a_cs = t, y.a_bs = hq * t * t, y.a_hs = group * t * t, y.a_gs = t * t;
  y.b = dctx, y.b_rs = qs, y.b_cs = 1, y.b_bs = t * qs, y.b_hs = group * d, y.b_gs = d;
  y.ngroup = group;
  y.accumulate = true;
  y.mode = MM_P_GE_I;
  return mm(y, stream);
}

/* ---------------- causal softmax: a warp per row ---------------- */

#define SOFTMAX_WARPS 8

static __global__ void softmax_fwd_kernel(float *probs, const float *scores, int64_t rows, int64_t t) {
  const int64_t r = (int64_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
  if (r >= rows) return; /* warp-uniform */
  const int lane = threadIdx.x & 31;
  const int64_t i = r % t; /* query position: columns 0..i are visible */
  const float *s = scores + r * t;
  float *p = probs + r * t;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= i; j += 32) mx = fmaxf(mx, s[j]);
  mx = px_kc_warp_max(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) { /* a lane reads s[j] before writing p[j]: in place is fine */
    float e = expf(s[j] - mx);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / px_kc_warp_sum(sum);
  for (int64_t j = lane; j < t; j += 32) p[j] = j <= i ? p[j] * inv : 0.0f;
}

static __global__ void softmax_bwd_kernel(float *dscores, const float *dprobs, const float *probs, int64_t rows,
                                          int64_t t) {
  const int64_t r = (int64_t)blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t i = r % t;
  const float *dp = dprobs + r * t, *p = probs + r * t;
  float *ds = dscores + r * t;
  float dot = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) dot += dp[j] * p[j];
  dot = px_kc_warp_sum(dot);
  for (int64_t j = lane; j <= i; j += 32) ds[j] += p[j] * (dp[j] - dot);
}

extern "C" px_status px_kc_attn_softmax_fwd(float *probs, const float *scores, int64_t bh, int64_t t,
                                            cudaStream_t stream) {
  if (bh <= 0 || t <= 0) return PX_OK;
  const int64_t rows = bh * t;
  softmax_fwd_kernel<<<(unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS), SOFTMAX_WARPS * 32, 0, stream>>>(
      probs, scores, rows, t);
  return PX_KC_LAUNCHED("softmax_fwd_kernel");
}

extern "C" px_status px_kc_attn_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int64_t bh,
                                            int64_t t, cudaStream_t stream) {
  if (bh <= 0 || t <= 0) return PX_OK;
  const int64_t rows = bh * t;
  softmax_bwd_kernel<<<(unsigned)((rows + SOFTMAX_WARPS - 1) / SOFTMAX_WARPS), SOFTMAX_WARPS * 32, 0, stream>>>(
      dscores, dprobs, probs, rows, t);
  return PX_KC_LAUNCHED("softmax_bwd_kernel");
}
