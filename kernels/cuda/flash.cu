/* FlashAttention, two implementations behind one launcher:
 * - tensor cores (wmma m16n16k16) for bf16/fp16 with D in {16, 32, 64, 128}:
 *   tiles of 64 queries x 64 keys, four warps of 16 rows each; products in
 *   fp32 accumulators, staged through shared memory for the softmax (the
 *   probabilities and dS rounded to the 16-bit type for the second product,
 *   as FlashAttention-2 does);
 * - CUDA cores, fp32 arithmetic, for everything else (fp32 tensors, other
 *   head dims): tiles of 32 x 32, 256 threads; a thread works on one row of a
 *   tile: eight threads share a row, lane l8 takes columns l8, l8 + 8, ...
 * Both keep their tiles in dynamic shared memory (opted in above 48 KiB). */
#include "kernels/cuda/flash.h"

#include <mma.h>

#include "kernels/math.h"

#define TILE 32
#define THREADS 256
#define PROW (TILE + 1) /* row stride of a (TILE, TILE) probability tile */

/* Per-thread columns of a D-wide row: l8 + 8 i for i < NI; NI = 16 covers D <= 128, 32 covers 256. */
static int ni_for(int64_t d) { return d <= 128 ? 16 : 32; }

/* Sum and max over the eight lanes that share a row (all 32 lanes call). */
static __device__ __forceinline__ float row_sum(float v) {
  for (int o = 1; o < 8; o <<= 1) v += __shfl_xor_sync(PX_KC_FULL_MASK, v, o);
  return v;
}
static __device__ __forceinline__ float row_max(float v) {
  for (int o = 1; o < 8; o <<= 1) v = fmaxf(v, __shfl_xor_sync(PX_KC_FULL_MASK, v, o));
  return v;
}

/* dst (TILE, D + 1) = rows r0.. of head `head` of a (S, H, D) row block, 0 past S. */
template <typename T>
static __device__ void load_tile(float *dst, const T *src, int64_t r0, int64_t s, int64_t ld, int64_t head, int d) {
  for (int i = threadIdx.x; i < TILE * d; i += THREADS) {
    int r = i / d, c = i % d;
    dst[r * (d + 1) + c] = r0 + r < s ? px_kc_ld(src + (r0 + r) * ld + head * d + c) : 0.0f;
  }
}

static __device__ __forceinline__ float dot(const float *a, const float *b, int d) {
  float acc = 0.0f;
  for (int i = 0; i < d; i++) acc += a[i] * b[i];
  return acc;
}

/* The dropout multiplier of element (t, key) of head h: 0 or 1 / (1 - p). */
static __device__ __forceinline__ float drop_mul(float p, uint64_t seed, uint64_t off, int64_t h, int64_t s,
                                                 int64_t t, int64_t key) {
  if (p <= 0.0f) return 1.0f;
  return px_dropout_keep(seed, off + (uint64_t)((h * s + t) * s + key), p) ? 1.0f / (1.0f - p) : 0.0f;
}

/* Whether query position t sees key position key: causal, and within the
 * sliding window of the last `window` positions (window 0: no window). */
static __device__ __forceinline__ bool seen(int64_t t, int64_t key, int64_t window) {
  return key <= t && (window <= 0 || t - key < window);
}

/* The first key tile (of `tile` keys) a query tile from t0 sees: 0, or the one holding its first row's window start. */
static __device__ __forceinline__ int64_t first_key_tile(int64_t t0, int64_t window, int64_t tile) {
  return window > 0 && t0 - window + 1 > 0 ? (t0 - window + 1) / tile * tile : 0;
}

/* One past the last query a key tile from s0 is seen by: s, or the window's end after its last key. */
static __device__ __forceinline__ int64_t query_end(int64_t s0, int64_t window, int64_t tile, int64_t s) {
  return window > 0 && s0 + tile - 1 + window < s ? s0 + tile - 1 + window : s;
}

template <typename T, int NI>
static __global__ void __launch_bounds__(THREADS)
    fwd_kernel(T *ctx, float *lse, const T *q, const T *k, const T *v, int64_t s, int64_t hq, int64_t hkv, int d,
               int64_t window, float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, tid = threadIdx.x, r = tid >> 3, l8 = tid & 7;
  float *Qs = smem, *KVs = Qs + TILE * pd, *Ps = KVs + TILE * pd; /* Q, then K or V (TILE, D); P (TILE, TILE) */
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TILE, t = t0 + r;
  const int64_t ldq = hq * d, ldk = hkv * d, kend = t0 + TILE < s ? t0 + TILE : s, z = blockIdx.z;
  const float scale = (1.0f / sqrtf((float)d));
  q += z * s * ldq, k += z * s * ldk, v += z * s * ldk, ctx += z * s * ldq, lse += z * hq * s; /* batch row z */
  load_tile(Qs, q, t0, s, ldq, h, d);
  float acc[NI], m = -INFINITY, l = 0.0f;
#pragma unroll
  for (int i = 0; i < NI; i++) acc[i] = 0.0f;
  for (int64_t s0 = first_key_tile(t0, window, TILE); s0 < kend; s0 += TILE) {
    __syncthreads(); /* the last tile's V is read */
    load_tile(KVs, k, s0, s, ldk, g, d);
    __syncthreads();
    float sc[TILE / 8], mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < TILE / 8; j++) {
      int c = l8 + 8 * j;
      sc[j] = seen(t, s0 + c, window) && t < s ? scale * dot(Qs + r * pd, KVs + c * pd, d) : -INFINITY;
      mx = fmaxf(mx, sc[j]);
    }
    const float mnew = fmaxf(m, row_max(mx));
    const float alpha = mnew == -INFINITY ? 1.0f : expf(m - mnew);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < TILE / 8; j++) {
      int c = l8 + 8 * j;
      float e = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mnew);
      sum += e;
      Ps[r * PROW + c] = e * drop_mul(p, seed, off, h, s, t, s0 + c);
    }
    l = l * alpha + row_sum(sum);
    m = mnew;
#pragma unroll
    for (int i = 0; i < NI; i++) acc[i] *= alpha;
    __syncthreads(); /* K is read, P is written */
    load_tile(KVs, v, s0, s, ldk, g, d);
    __syncthreads();
    for (int c = 0; c < TILE; c++) {
      float pv = Ps[r * PROW + c];
#pragma unroll
      for (int i = 0; i < NI; i++)
        if (l8 + 8 * i < d) acc[i] += pv * KVs[c * pd + l8 + 8 * i];
    }
  }
  if (t >= s) return;
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < NI; i++)
    if (l8 + 8 * i < d) px_kc_st(ctx + t * ldq + h * d + l8 + 8 * i, acc[i] * inv);
  if (l8 == 0) lse[h * s + t] = m + logf(l);
}

/* The backward's per-row values of a query tile (ROWS rows from t0) of head
 * h: lse and delta = dO . O (= rowsum(P * dP)) into rows[0..ROWS) and
 * rows[ROWS..2 ROWS); LANES consecutive threads share a row. All threads call. */
template <int ROWS, int LANES, typename T>
static __device__ void load_rows(float *rows, const T *dctx, const T *ctx, const float *lse, int64_t t0, int64_t s,
                                 int64_t ldq, int64_t h, int d) {
  const int r = threadIdx.x / LANES, lane = threadIdx.x % LANES;
  const int64_t t = t0 + r;
  float part = 0.0f;
  if (t < s)
    for (int c = lane; c < d; c += LANES) part += px_kc_ld(dctx + t * ldq + h * d + c) * px_kc_ld(ctx + t * ldq + h * d + c);
  for (int o = 1; o < LANES; o <<= 1) part += __shfl_xor_sync(PX_KC_FULL_MASK, part, o);
  if (lane == 0) {
    rows[r] = t < s ? lse[h * s + t] : 0.0f;
    rows[ROWS + r] = part;
  }
}

/* Row r of the (query, key) tile at (t0, s0) for this thread's columns
 * c = l8 + 8 j: the dropped-out probabilities into Ps (when not NULL) and
 * dS = P (dP - delta) into dSs, from Q, dO, K, V tiles and the rows' lse, delta. */
static __device__ void probs_and_ds(float *Ps, float *dSs, const float *Qs, const float *dOs, const float *Ks,
                                    const float *Vs, const float *rows, int64_t t0, int64_t s0, int64_t s, int64_t h,
                                    int d, int64_t window, float p, uint64_t seed, uint64_t off) {
  const int pd = d + 1, r = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  const int64_t t = t0 + r;
  const float scale = (1.0f / sqrtf((float)d));
#pragma unroll
  for (int j = 0; j < TILE / 8; j++) {
    const int c = l8 + 8 * j;
    float pdrop = 0.0f, ds = 0.0f;
    if (seen(t, s0 + c, window) && t < s) {
      float prob = expf(scale * dot(Qs + r * pd, Ks + c * pd, d) - rows[r]);
      float mul = drop_mul(p, seed, off, h, s, t, s0 + c);
      pdrop = prob * mul;
      ds = prob * (dot(dOs + r * pd, Vs + c * pd, d) * mul - rows[TILE + r]);
    }
    if (Ps) Ps[r * PROW + c] = pdrop;
    dSs[r * PROW + c] = ds;
  }
}

/* Adds acc (scaled) into row `row` of head `head` of a (S, H, D) row block at this thread's columns. */
template <typename T, int NI>
static __device__ void add_row(T *dst, const float *acc, float scale, int64_t row, int64_t ld, int64_t head, int d) {
  const int l8 = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < NI; i++)
    if (l8 + 8 * i < d) {
      T *x = dst + row * ld + head * d + l8 + 8 * i;
      px_kc_st(x, px_kc_ld(x) + scale * acc[i]);
    }
}

/* Block (key tile, kv head): dk, dv of the tile's keys over the group's query
 * heads and every query tile at or after the keys. */
template <typename T, int NI>
static __global__ void __launch_bounds__(THREADS)
    bwd_kv_kernel(T *dk, T *dv, const T *dctx, const T *q, const T *k, const T *v, const T *ctx, const float *lse,
                  int64_t s, int64_t hq, int64_t hkv, int d, int64_t window, float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, c = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  float *Ks = smem, *Vs = Ks + TILE * pd, *Qs = Vs + TILE * pd, *dOs = Qs + TILE * pd, *Ps = dOs + TILE * pd,
        *dSs = Ps + TILE * PROW, *rows = dSs + TILE * PROW;
  const int64_t g = blockIdx.y, group = hq / hkv, s0 = (int64_t)blockIdx.x * TILE, ldq = hq * d, ldk = hkv * d;
  const int64_t z = blockIdx.z, tend = query_end(s0, window, TILE, s);
  q += z * s * ldq, dctx += z * s * ldq, ctx += z * s * ldq, lse += z * hq * s; /* batch row z */
  k += z * s * ldk, v += z * s * ldk, dk += z * s * ldk, dv += z * s * ldk;
  load_tile(Ks, k, s0, s, ldk, g, d);
  load_tile(Vs, v, s0, s, ldk, g, d);
  float ak[NI], av[NI];
#pragma unroll
  for (int i = 0; i < NI; i++) ak[i] = av[i] = 0.0f;
  for (int64_t h = g * group; h < (g + 1) * group; h++)
    for (int64_t t0 = s0; t0 < tend; t0 += TILE) {
      __syncthreads(); /* the last tiles are read */
      load_tile(Qs, q, t0, s, ldq, h, d);
      load_tile(dOs, dctx, t0, s, ldq, h, d);
      load_rows<TILE, 8>(rows, dctx, ctx, lse, t0, s, ldq, h, d);
      __syncthreads();
      probs_and_ds(Ps, dSs, Qs, dOs, Ks, Vs, rows, t0, s0, s, h, d, window, p, seed, off);
      __syncthreads();
      /* dV[c] += sum_r Pd[r, c] dO[r], dK[c] += sum_r dS[r, c] Q[r] (scaled at the end) */
      for (int r = 0; r < TILE; r++) {
        float pr = Ps[r * PROW + c], dr = dSs[r * PROW + c];
#pragma unroll
        for (int i = 0; i < NI; i++)
          if (l8 + 8 * i < d) {
            av[i] += pr * dOs[r * pd + l8 + 8 * i];
            ak[i] += dr * Qs[r * pd + l8 + 8 * i];
          }
      }
    }
  if (s0 + c >= s) return;
  add_row<T, NI>(dk, ak, (1.0f / sqrtf((float)d)), s0 + c, ldk, g, d);
  add_row<T, NI>(dv, av, 1.0f, s0 + c, ldk, g, d);
}

/* Block (query tile, query head): dq of the tile's queries over the keys at or before them. */
template <typename T, int NI>
static __global__ void __launch_bounds__(THREADS)
    bwd_q_kernel(T *dq, const T *dctx, const T *q, const T *k, const T *v, const T *ctx, const float *lse, int64_t s,
                 int64_t hq, int64_t hkv, int d, int64_t window, float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, r = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  float *Ks = smem, *Vs = Ks + TILE * pd, *Qs = Vs + TILE * pd, *dOs = Qs + TILE * pd, *dSs = dOs + TILE * pd,
        *rows = dSs + TILE * PROW;
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TILE, ldq = hq * d, ldk = hkv * d;
  const int64_t kend = t0 + TILE < s ? t0 + TILE : s, z = blockIdx.z;
  q += z * s * ldq, dctx += z * s * ldq, ctx += z * s * ldq, dq += z * s * ldq, lse += z * hq * s; /* batch row z */
  k += z * s * ldk, v += z * s * ldk;
  load_tile(Qs, q, t0, s, ldq, h, d);
  load_tile(dOs, dctx, t0, s, ldq, h, d);
  load_rows<TILE, 8>(rows, dctx, ctx, lse, t0, s, ldq, h, d);
  float aq[NI];
#pragma unroll
  for (int i = 0; i < NI; i++) aq[i] = 0.0f;
  for (int64_t s0 = first_key_tile(t0, window, TILE); s0 < kend; s0 += TILE) {
    __syncthreads(); /* rows are written; the last K is read */
    load_tile(Ks, k, s0, s, ldk, g, d);
    load_tile(Vs, v, s0, s, ldk, g, d);
    __syncthreads();
    probs_and_ds(NULL, dSs, Qs, dOs, Ks, Vs, rows, t0, s0, s, h, d, window, p, seed, off);
    __syncthreads();
    for (int c = 0; c < TILE; c++) {
      float dr = dSs[r * PROW + c];
#pragma unroll
      for (int i = 0; i < NI; i++)
        if (l8 + 8 * i < d) aq[i] += dr * Ks[c * pd + l8 + 8 * i];
    }
  }
  if (t0 + r < s) add_row<T, NI>(dq, aq, (1.0f / sqrtf((float)d)), t0 + r, ldq, h, d);
}

/* ------------------------- tensor cores ------------------------- */

namespace wmma = nvcuda::wmma;

#define TC 64                   /* queries or keys per tile */
#define TC_THREADS 128          /* four warps, 16 rows of the tile each */
#define TC_LS (TC + 4)          /* row stride of an fp32 (., TC) tile */
#define TC_LP (TC + 8)          /* row stride of a 16-bit (., TC) tile */

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_t;
template <typename T>
using a_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;

static bool tc_head_dim(int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }

/* The tensor-core kernels copy rows in 16-byte pieces: every tensor must start on a 16-byte boundary. */
static bool tc_aligned(const void *const *ptrs, int n) {
  for (int i = 0; i < n; i++)
    if ((uintptr_t)ptrs[i] % 16) return false;
  return true;
}

/* dst (TC, D + 8) = rows r0.. of head `head` of a (S, H, D) 16-bit row block,
 * 0 past S, in 16-byte pieces. */
template <typename T>
static __device__ void tc_load(T *dst, const T *src, int64_t r0, int64_t s, int64_t ld, int64_t head, int d) {
  const int pieces = d / 8;
  for (int i = threadIdx.x; i < TC * pieces; i += TC_THREADS) {
    int r = i / pieces, c = (i % pieces) * 8;
    uint4 x = {0, 0, 0, 0};
    if (r0 + r < s) x = *(const uint4 *)(src + (r0 + r) * ld + head * d + c);
    *(uint4 *)(dst + r * (d + 8) + c) = x;
  }
}

/* out (16, TC) fp32 = a (16, 16 NK) b^T, b a row-major (TC, 16 NK) tile. One warp. */
template <typename T, int NK>
static __device__ void tc_abt(float *out, const T *a, const T *b, int ld) {
  for (int n = 0; n < TC / 16; n++) {
    acc_t acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < NK; k++) {
      a_row<T> fa;
      b_col<T> fb;
      wmma::load_matrix_sync(fa, a + k * 16, ld);
      wmma::load_matrix_sync(fb, b + n * 16 * ld + k * 16, ld);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, TC_LS, wmma::mem_row_major);
  }
}

/* acc[n] += a (16, TC) b[:, 16 n : 16 n + 16], b a row-major (TC, 16 NF) tile. One warp. */
template <typename T, int NF>
static __device__ void tc_ab_acc(acc_t *acc, const T *a, const T *b, int ldb) {
  for (int n = 0; n < NF; n++)
    for (int k = 0; k < TC / 16; k++) {
      a_row<T> fa;
      b_row<T> fb;
      wmma::load_matrix_sync(fa, a + k * 16, TC_LP);
      wmma::load_matrix_sync(fb, b + k * 16 * ldb + n * 16, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
}

/* Adds scale * acc[n] (16 rows of a warp) into rows row0.. of head `head` of a
 * (S, H, D) row block, staged through the warp's (16, TC_LS) fp32 area. */
template <typename T, int NF>
static __device__ void tc_add_rows(T *dst, const acc_t *acc, float scale, float *stage, int64_t row0, int64_t s,
                                   int64_t ld, int64_t head) {
  const int lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  for (int n = 0; n < NF; n++) {
    __syncwarp();
    wmma::store_matrix_sync(stage, acc[n], TC_LS, wmma::mem_row_major);
    __syncwarp();
    if (row0 + r < s)
      for (int i = half * 8; i < half * 8 + 8; i++) {
        T *x = dst + (row0 + r) * ld + head * 16 * NF + n * 16 + i;
        px_kc_st(x, px_kc_ld(x) + scale * stage[r * TC_LS + i]);
      }
  }
}

/* Shared memory: the forward's Q, K, V, S, O, P; the backward kernels' four
 * 16-bit tiles, two fp32 (TC, TC) tiles, two 16-bit ones (dQ uses one) and the rows. */
static size_t tc_fwd_smem(int d) {
  return (size_t)(3 * TC * (d + 8) * 2 + TC * TC_LS * 4 + TC * (d + 4) * 4 + TC * TC_LP * 2);
}
static size_t tc_bwd_smem(int d) {
  return (size_t)(4 * TC * (d + 8) * 2 + 2 * TC * TC_LS * 4 + 2 * TC * TC_LP * 2 + 2 * TC * 4);
}

template <typename T, int NF>
static __global__ void __launch_bounds__(TC_THREADS)
    tc_fwd_kernel(T *ctx, float *lse, const T *q, const T *k, const T *v, int64_t s, int64_t hq, int64_t hkv,
                  int64_t window, float p, uint64_t seed, uint64_t off) {
  constexpr int D = 16 * NF, LD = D + 8, LO = D + 4;
  PX_KC_DYNAMIC_SMEM(float, smem);
  T *Qs = (T *)smem, *Ks = Qs + TC * LD, *Vs = Ks + TC * LD; /* (TC, LD) */
  float *Ss = (float *)(Vs + TC * LD), *Os = Ss + TC * TC_LS; /* scores (TC, TC_LS), output (TC, LO) */
  T *Ps = (T *)(Os + TC * LO);                                /* probabilities (TC, TC_LP) */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TC, t = t0 + warp * 16 + r;
  const int64_t ldq = hq * D, ldk = hkv * D, kend = t0 + TC < s ? t0 + TC : s, z = blockIdx.z;
  const float scale = 1.0f / sqrtf((float)D);
  float *Sw = Ss + warp * 16 * TC_LS, *Ow = Os + warp * 16 * LO; /* the warp's 16 rows */
  T *Pw = Ps + warp * 16 * TC_LP;
  q += z * s * ldq, k += z * s * ldk, v += z * s * ldk, ctx += z * s * ldq, lse += z * hq * s; /* batch row z */
  tc_load(Qs, q, t0, s, ldq, h, D);
  for (int i = half * (D / 2); i < (half + 1) * (D / 2); i++) Ow[r * LO + i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t s0 = first_key_tile(t0, window, TC); s0 < kend; s0 += TC) {
    __syncthreads(); /* the last K and V are read */
    tc_load(Ks, k, s0, s, ldk, g, D);
    tc_load(Vs, v, s0, s, ldk, g, D);
    __syncthreads();
    tc_abt<T, NF>(Sw, Qs + warp * 16 * LD, Ks, LD);
    __syncwarp();
    /* online softmax of row r, columns half * 32 .. + 32 (two lanes per row) */
    float *srow = Sw + r * TC_LS + half * 32, mx = -INFINITY;
    for (int c = 0; c < 32; c++) {
      float x = seen(t, s0 + half * 32 + c, window) && t < s ? scale * srow[c] : -INFINITY;
      srow[c] = x;
      mx = fmaxf(mx, x);
    }
    const float mnew = fmaxf(m, fmaxf(mx, __shfl_xor_sync(PX_KC_FULL_MASK, mx, 1)));
    const float alpha = mnew == -INFINITY ? 1.0f : expf(m - mnew);
    float sum = 0.0f;
    T *prow = Pw + r * TC_LP + half * 32;
    for (int c = 0; c < 32; c++) {
      float e = srow[c] == -INFINITY ? 0.0f : expf(srow[c] - mnew);
      sum += e;
      px_kc_st(prow + c, e * drop_mul(p, seed, off, h, s, t, s0 + half * 32 + c));
    }
    l = l * alpha + sum + __shfl_xor_sync(PX_KC_FULL_MASK, sum, 1);
    m = mnew;
    for (int i = half * (D / 2); i < (half + 1) * (D / 2); i++) Ow[r * LO + i] *= alpha;
    __syncwarp();
    /* O += P V */
    for (int n = 0; n < NF; n++) {
      acc_t acc;
      wmma::load_matrix_sync(acc, Ow + n * 16, LO, wmma::mem_row_major);
      for (int kk = 0; kk < TC / 16; kk++) {
        a_row<T> fa;
        b_row<T> fb;
        wmma::load_matrix_sync(fa, Pw + kk * 16, TC_LP);
        wmma::load_matrix_sync(fb, Vs + kk * 16 * LD + n * 16, LD);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Ow + n * 16, acc, LO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (t >= s) return;
  const float inv = 1.0f / l;
  for (int i = half * (D / 2); i < (half + 1) * (D / 2); i++)
    px_kc_st(ctx + t * ldq + h * D + i, Ow[r * LO + i] * inv);
  if (half == 0) lse[h * s + t] = m + logf(l);
}

/* dS (and the dropped-out P, when Pd is not NULL) of a warp's 16 rows of a
 * (row, column) tile: S and dP (fp32, TC_LS) from the products, lse and delta
 * by query; rows are keys and columns queries when `keys_rows` (the dK/dV
 * kernel's transposed tile), the other way round otherwise. */
template <typename T>
static __device__ void tc_ds(T *Pd, T *dS, const float *S, const float *dP, const float *rows, bool keys_rows,
                             int64_t row0, int64_t col0, int64_t s, int64_t h, int d, int64_t window, float p,
                             uint64_t seed, uint64_t off) {
  const int lane = threadIdx.x & 31, r = lane >> 1, half = lane & 1;
  const float scale = 1.0f / sqrtf((float)d);
  for (int c = half * 32; c < half * 32 + 32; c++) {
    const int64_t t = keys_rows ? col0 + c : row0 + r, key = keys_rows ? row0 + r : col0 + c;
    const int qi = keys_rows ? c : (int)(row0 % TC) + r; /* the query's index in rows[] */
    float pdrop = 0.0f, ds = 0.0f;
    if (seen(t, key, window) && t < s) {
      float prob = expf(scale * S[r * TC_LS + c] - rows[qi]), mul = drop_mul(p, seed, off, h, s, t, key);
      pdrop = prob * mul;
      ds = prob * (dP[r * TC_LS + c] * mul - rows[TC + qi]);
    }
    if (Pd) px_kc_st(Pd + r * TC_LP + c, pdrop);
    px_kc_st(dS + r * TC_LP + c, ds);
  }
}

/* Block (key tile, kv head): dK, dV of the tile's keys over the group's query heads and later query tiles. */
template <typename T, int NF>
static __global__ void __launch_bounds__(TC_THREADS)
    tc_bwd_kv_kernel(T *dk, T *dv, const T *dctx, const T *q, const T *k, const T *v, const T *ctx, const float *lse,
                     int64_t s, int64_t hq, int64_t hkv, int64_t window, float p, uint64_t seed, uint64_t off) {
  constexpr int D = 16 * NF, LD = D + 8;
  PX_KC_DYNAMIC_SMEM(float, smem);
  T *Ks = (T *)smem, *Vs = Ks + TC * LD, *Qs = Vs + TC * LD, *dOs = Qs + TC * LD;
  float *St = (float *)(dOs + TC * LD), *dPt = St + TC * TC_LS;
  T *Pt = (T *)(dPt + TC * TC_LS), *dSt = Pt + TC * TC_LP;
  float *rows = (float *)(dSt + TC * TC_LP);
  const int warp = threadIdx.x >> 5;
  const int64_t g = blockIdx.y, group = hq / hkv, s0 = (int64_t)blockIdx.x * TC, ldq = hq * D, ldk = hkv * D;
  const int64_t key0 = s0 + warp * 16, z = blockIdx.z, tend = query_end(s0, window, TC, s);
  float *Stw = St + warp * 16 * TC_LS, *dPtw = dPt + warp * 16 * TC_LS;
  T *Ptw = Pt + warp * 16 * TC_LP, *dStw = dSt + warp * 16 * TC_LP;
  q += z * s * ldq, dctx += z * s * ldq, ctx += z * s * ldq, lse += z * hq * s; /* batch row z */
  k += z * s * ldk, v += z * s * ldk, dk += z * s * ldk, dv += z * s * ldk;
  tc_load(Ks, k, s0, s, ldk, g, D);
  tc_load(Vs, v, s0, s, ldk, g, D);
  acc_t ak[NF], av[NF];
  for (int n = 0; n < NF; n++) {
    wmma::fill_fragment(ak[n], 0.0f);
    wmma::fill_fragment(av[n], 0.0f);
  }
  for (int64_t h = g * group; h < (g + 1) * group; h++)
    for (int64_t t0 = s0; t0 < tend; t0 += TC) {
      __syncthreads(); /* the last tiles are read */
      tc_load(Qs, q, t0, s, ldq, h, D);
      tc_load(dOs, dctx, t0, s, ldq, h, D);
      load_rows<TC, 2>(rows, dctx, ctx, lse, t0, s, ldq, h, D);
      __syncthreads();
      tc_abt<T, NF>(Stw, Ks + warp * 16 * LD, Qs, LD);   /* S^T: the warp's keys x the tile's queries */
      tc_abt<T, NF>(dPtw, Vs + warp * 16 * LD, dOs, LD); /* dP^T */
      __syncwarp();
      tc_ds(Ptw, dStw, Stw, dPtw, rows, true, key0, t0, s, h, D, window, p, seed, off);
      __syncwarp();
      tc_ab_acc<T, NF>(av, Ptw, dOs, LD); /* dV += P^T dO */
      tc_ab_acc<T, NF>(ak, dStw, Qs, LD); /* dK += dS^T Q (scaled at the end) */
    }
  tc_add_rows<T, NF>(dk, ak, 1.0f / sqrtf((float)D), Stw, key0, s, ldk, g);
  tc_add_rows<T, NF>(dv, av, 1.0f, Stw, key0, s, ldk, g);
}

/* Block (query tile, query head): dQ of the tile's queries over the keys at or before them. */
template <typename T, int NF>
static __global__ void __launch_bounds__(TC_THREADS)
    tc_bwd_q_kernel(T *dq, const T *dctx, const T *q, const T *k, const T *v, const T *ctx, const float *lse,
                    int64_t s, int64_t hq, int64_t hkv, int64_t window, float p, uint64_t seed, uint64_t off) {
  constexpr int D = 16 * NF, LD = D + 8;
  PX_KC_DYNAMIC_SMEM(float, smem);
  T *Qs = (T *)smem, *dOs = Qs + TC * LD, *Ks = dOs + TC * LD, *Vs = Ks + TC * LD;
  float *S = (float *)(Vs + TC * LD), *dP = S + TC * TC_LS;
  T *dS = (T *)(dP + TC * TC_LS);
  float *rows = (float *)(dS + TC * TC_LP);
  const int warp = threadIdx.x >> 5;
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TC, ldq = hq * D, ldk = hkv * D;
  const int64_t kend = t0 + TC < s ? t0 + TC : s, row0 = t0 + warp * 16, z = blockIdx.z;
  float *Sw = S + warp * 16 * TC_LS, *dPw = dP + warp * 16 * TC_LS;
  T *dSw = dS + warp * 16 * TC_LP;
  q += z * s * ldq, dctx += z * s * ldq, ctx += z * s * ldq, dq += z * s * ldq, lse += z * hq * s; /* batch row z */
  k += z * s * ldk, v += z * s * ldk;
  tc_load(Qs, q, t0, s, ldq, h, D);
  tc_load(dOs, dctx, t0, s, ldq, h, D);
  load_rows<TC, 2>(rows, dctx, ctx, lse, t0, s, ldq, h, D);
  acc_t aq[NF];
  for (int n = 0; n < NF; n++) wmma::fill_fragment(aq[n], 0.0f);
  for (int64_t s0 = first_key_tile(t0, window, TC); s0 < kend; s0 += TC) {
    __syncthreads(); /* rows are written; the last K and V are read */
    tc_load(Ks, k, s0, s, ldk, g, D);
    tc_load(Vs, v, s0, s, ldk, g, D);
    __syncthreads();
    tc_abt<T, NF>(Sw, Qs + warp * 16 * LD, Ks, LD);
    tc_abt<T, NF>(dPw, dOs + warp * 16 * LD, Vs, LD);
    __syncwarp();
    tc_ds((T *)NULL, dSw, Sw, dPw, rows, false, row0, s0, s, h, D, window, p, seed, off);
    __syncwarp();
    tc_ab_acc<T, NF>(aq, dSw, Ks, LD); /* dQ += dS K */
  }
  tc_add_rows<T, NF>(dq, aq, 1.0f / sqrtf((float)D), Sw, row0, s, ldq, h);
}

/* Dynamic shared memory of a kernel, opted in above the default 48 KiB once per kernel. */
template <typename K>
static px_status smem_for(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    PX_KC_TRY(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  return PX_OK;
}

static size_t fwd_smem(int d) { return (size_t)(2 * TILE * (d + 1) + TILE * PROW) * sizeof(float); }
static size_t bwd_smem(int d) { return (size_t)(4 * TILE * (d + 1) + 2 * TILE * PROW + 2 * TILE) * sizeof(float); }

template <typename T, int NI>
static px_status fwd(void *ctx, float *lse, const void *q, const void *k, const void *v, int64_t b, int64_t s,
                     int64_t hq, int64_t hkv, int d, int64_t w, float p, uint64_t seed, uint64_t off,
                     cudaStream_t stream) {
  size_t bytes = fwd_smem(d);
  px_status st = smem_for(fwd_kernel<T, NI>, bytes);
  if (st) return st;
  dim3 grid((unsigned)((s + TILE - 1) / TILE), (unsigned)hq, (unsigned)b);
  fwd_kernel<T, NI><<<grid, THREADS, bytes, stream>>>((T *)ctx, lse, (const T *)q, (const T *)k, (const T *)v, s, hq,
                                                      hkv, d, w, p, seed, off);
  return PX_KC_LAUNCHED("flash fwd_kernel");
}

template <typename T, int NI>
static px_status bwd(void *dq, void *dk, void *dv, const void *dctx, const void *q, const void *k, const void *v,
                     const void *ctx, const float *lse, int64_t b, int64_t s, int64_t hq, int64_t hkv, int d,
                     int64_t w, float p, uint64_t seed, uint64_t off, cudaStream_t stream) {
  size_t bytes = bwd_smem(d);
  px_status st = smem_for(bwd_kv_kernel<T, NI>, bytes);
  if (!st) st = smem_for(bwd_q_kernel<T, NI>, bytes);
  if (st) return st;
  unsigned tiles = (unsigned)((s + TILE - 1) / TILE);
  bwd_kv_kernel<T, NI><<<dim3(tiles, (unsigned)hkv, (unsigned)b), THREADS, bytes, stream>>>(
      (T *)dk, (T *)dv, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, d,
      w, p, seed, off);
  st = PX_KC_LAUNCHED("flash bwd_kv_kernel");
  if (st) return st;
  bwd_q_kernel<T, NI><<<dim3(tiles, (unsigned)hq, (unsigned)b), THREADS, bytes, stream>>>(
      (T *)dq, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, d, w, p,
      seed, off);
  return PX_KC_LAUNCHED("flash bwd_q_kernel");
}

template <typename T, int NF>
static px_status tc_fwd(void *ctx, float *lse, const void *q, const void *k, const void *v, int64_t b, int64_t s,
                        int64_t hq, int64_t hkv, int64_t w, float p, uint64_t seed, uint64_t off, cudaStream_t stream) {
  size_t bytes = tc_fwd_smem(16 * NF);
  px_status st = smem_for(tc_fwd_kernel<T, NF>, bytes);
  if (st) return st;
  dim3 grid((unsigned)((s + TC - 1) / TC), (unsigned)hq, (unsigned)b);
  tc_fwd_kernel<T, NF><<<grid, TC_THREADS, bytes, stream>>>((T *)ctx, lse, (const T *)q, (const T *)k, (const T *)v,
                                                            s, hq, hkv, w, p, seed, off);
  return PX_KC_LAUNCHED("flash tc_fwd_kernel");
}

template <typename T, int NF>
static px_status tc_bwd(void *dq, void *dk, void *dv, const void *dctx, const void *q, const void *k, const void *v,
                        const void *ctx, const float *lse, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t w,
                        float p, uint64_t seed, uint64_t off, cudaStream_t stream) {
  size_t bytes = tc_bwd_smem(16 * NF);
  px_status st = smem_for(tc_bwd_kv_kernel<T, NF>, bytes);
  if (!st) st = smem_for(tc_bwd_q_kernel<T, NF>, bytes);
  if (st) return st;
  unsigned tiles = (unsigned)((s + TC - 1) / TC);
  tc_bwd_kv_kernel<T, NF><<<dim3(tiles, (unsigned)hkv, (unsigned)b), TC_THREADS, bytes, stream>>>(
      (T *)dk, (T *)dv, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, w,
      p, seed, off);
  st = PX_KC_LAUNCHED("flash tc_bwd_kv_kernel");
  if (st) return st;
  tc_bwd_q_kernel<T, NF><<<dim3(tiles, (unsigned)hq, (unsigned)b), TC_THREADS, bytes, stream>>>(
      (T *)dq, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, w, p, seed,
      off);
  return PX_KC_LAUNCHED("flash tc_bwd_q_kernel");
}

/* Refuses what the kernels cannot take; sets *empty for a no-op. */
static px_status check(const char *who, px_dtype dt, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d,
                       float p, bool *empty) {
  *empty = b <= 0 || s <= 0 || hq <= 0 || d <= 0;
  if (b > 65535 || (b > 1 && p > 0.0f))
    return px_kc_fail(__FILE__, __LINE__, "%s: %lld batch rows in one call (at most 65535, and one with dropout: each "
                      "row has its own dropout offset)", who, (long long)b);
  if (dt != PX_DTYPE_FP32 && dt != PX_DTYPE_BF16 && dt != PX_DTYPE_FP16)
    return px_kc_fail(__FILE__, __LINE__, "%s: dtype %d is not fp32, bf16 or fp16", who, (int)dt);
  if (d > PX_KC_FLASH_MAX_D || hkv <= 0 || hq % hkv != 0 || hq > 65535)
    return px_kc_fail(__FILE__, __LINE__, "%s: head dim %lld (at most %d) or heads %lld/%lld not supported", who,
                      (long long)d, PX_KC_FLASH_MAX_D, (long long)hq, (long long)hkv);
  return PX_OK;
}

/* Calls F<T, NF>(args) for a tensor-core head dim (NF = D / 16). */
#define TC_DISPATCH(F, T, d, ...)                                                          \
  (d == 16 ? F<T, 1>(__VA_ARGS__) : d == 32 ? F<T, 2>(__VA_ARGS__) : d == 64 ? F<T, 4>(__VA_ARGS__) \
           : F<T, 8>(__VA_ARGS__))

/* Calls F<T, NI>(args) for the dtype's T and the head dim's NI. */
#define DISPATCH(F, dt, d, ...)                                                                   \
  (dt == PX_DTYPE_BF16 ? (ni_for(d) == 16 ? F<__nv_bfloat16, 16>(__VA_ARGS__) : F<__nv_bfloat16, 32>(__VA_ARGS__)) \
   : dt == PX_DTYPE_FP16 ? (ni_for(d) == 16 ? F<__half, 16>(__VA_ARGS__) : F<__half, 32>(__VA_ARGS__))             \
                         : (ni_for(d) == 16 ? F<float, 16>(__VA_ARGS__) : F<float, 32>(__VA_ARGS__)))

extern "C" px_status px_kc_flash_fwd(void *ctx, float *lse, const void *q, const void *k, const void *v, px_dtype dtype,
                                     int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t window, float p,
                                     uint64_t seed, uint64_t off, cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_fwd", dtype, b, s, hq, hkv, d, p, &empty);
  if (st || empty) return st;
  const void *ptrs[] = {ctx, q, k, v};
  bool tc = tc_head_dim(d) && tc_aligned(ptrs, 4);
  if (tc && dtype == PX_DTYPE_BF16)
    return TC_DISPATCH(tc_fwd, __nv_bfloat16, d, ctx, lse, q, k, v, b, s, hq, hkv, window, p, seed, off, stream);
  if (tc && dtype == PX_DTYPE_FP16)
    return TC_DISPATCH(tc_fwd, __half, d, ctx, lse, q, k, v, b, s, hq, hkv, window, p, seed, off, stream);
  return DISPATCH(fwd, dtype, d, ctx, lse, q, k, v, b, s, hq, hkv, (int)d, window, p, seed, off, stream);
}

extern "C" px_status px_kc_flash_bwd(void *dq, void *dk, void *dv, const void *dctx, const void *q, const void *k,
                                     const void *v, const void *ctx, const float *lse, px_dtype dtype, int64_t b,
                                     int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t window, float p,
                                     uint64_t seed, uint64_t off, cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_bwd", dtype, b, s, hq, hkv, d, p, &empty);
  if (st || empty) return st;
  const void *ptrs[] = {dq, dk, dv, dctx, q, k, v, ctx};
  bool tc = tc_head_dim(d) && tc_aligned(ptrs, 8);
  if (tc && dtype == PX_DTYPE_BF16)
    return TC_DISPATCH(tc_bwd, __nv_bfloat16, d, dq, dk, dv, dctx, q, k, v, ctx, lse, b, s, hq, hkv, window, p, seed,
                       off, stream);
  if (tc && dtype == PX_DTYPE_FP16)
    return TC_DISPATCH(tc_bwd, __half, d, dq, dk, dv, dctx, q, k, v, ctx, lse, b, s, hq, hkv, window, p, seed, off,
                       stream);
  return DISPATCH(bwd, dtype, d, dq, dk, dv, dctx, q, k, v, ctx, lse, b, s, hq, hkv, (int)d, window, p, seed, off,
                  stream);
}

/* ---------------- attention sinks: a warp per (batch row, head, query) row of lse ---------------- */

#define SINK_WARPS 8 /* rows per block */

/* The (B, Hq, S) row of this warp, or -1 past the end (the whole warp then returns together). */
static __device__ __forceinline__ int64_t sink_row(int64_t rows) {
  const int64_t r = (int64_t)blockIdx.x * SINK_WARPS + (threadIdx.x >> 5);
  return r < rows ? r : -1;
}

static unsigned sink_blocks(int64_t rows) { return (unsigned)((rows + SINK_WARPS - 1) / SINK_WARPS); }

/* lse' = log(e^lse + e^sink), ctx *= e^(lse - lse'); a row that saw no key: lse' = sink, ctx stays 0. */
template <typename T>
static __global__ void sink_fold_kernel(T *ctx, float *lse, const T *sinks, int64_t rows, int64_t s, int64_t hq,
                                        int d) {
  const int64_t r = sink_row(rows);
  if (r < 0) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = r % s, h = r / s % hq, b = r / s / hq;
  const float a = lse[r], sk = px_kc_ld(sinks + h);
  __syncwarp(); /* every lane has read lse[r] before lane 0 writes it */
  if (a == -INFINITY) {
    if (lane == 0) lse[r] = sk;
    return;
  }
  const float ls = fmaxf(a, sk) + log1pf(expf(-fabsf(a - sk))), f = expf(a - ls);
  T *o = ctx + ((b * s + t) * hq + h) * d;
  for (int j = lane; j < d; j += 32) px_kc_st(o + j, px_kc_ld(o + j) * f);
  if (lane == 0) lse[r] = ls;
}

/* terms[r] = -(1 - seen) (dctx . ctx), seen the probability of the keys row r sees (recomputed from q, k and the
 * folded lse; before dropout), 0 where the row saw no key. */
template <typename T>
static __global__ void sink_rows_kernel(float *terms, const T *dctx, const T *q, const T *k, const T *ctx,
                                        const float *lse, int64_t rows, int64_t s, int64_t hq, int64_t hkv, int d,
                                        int64_t window) {
  const int64_t r = sink_row(rows);
  if (r < 0) return;
  const int lane = threadIdx.x & 31;
  const int64_t t = r % s, h = r / s % hq, b = r / s / hq, g = h / (hq / hkv), ldk = hkv * d;
  const int64_t row = ((b * s + t) * hq + h) * d; /* of q, ctx and dctx */
  const T *kb = k + b * s * ldk + g * d;
  const float l = lse[r], scale = 1.0f / sqrtf((float)d);
  float dl = 0.0f, sn = 0.0f;
  for (int j = lane; j < d; j += 32) dl += px_kc_ld(dctx + row + j) * px_kc_ld(ctx + row + j);
  for (int64_t key = window > 0 && t >= window ? t - window + 1 : 0; key + lane <= t; key += 32) {
    float acc = 0.0f;
    for (int i = 0; i < d; i++) acc += px_kc_ld(q + row + i) * px_kc_ld(kb + (key + lane) * ldk + i);
    sn += expf(acc * scale - l);
  }
  const float delta = px_kc_warp_sum(dl), seen_p = px_kc_warp_sum(sn);
  if (lane == 0) terms[r] = l == -INFINITY ? 0.0f : -(1.0f - seen_p) * delta;
}

/* dsink[h] += the sum of head h's terms, in a fixed order: a block per head. */
template <typename T>
static __global__ void sink_grad_kernel(T *dsink, const float *terms, int64_t b, int64_t hq, int64_t s) {
  const int64_t h = blockIdx.x;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < b * s; j += blockDim.x) acc += terms[(j / s * hq + h) * s + j % s];
  acc = px_kc_block_sum(acc);
  if (threadIdx.x == 0) px_kc_st(dsink + h, px_kc_ld(dsink + h) + acc);
}

/* Calls F<T>(args) for the dtype's T. */
#define BY_T(F, dt, ...)                                                                                   \
  (dt == PX_DTYPE_BF16 ? F<__nv_bfloat16>(__VA_ARGS__) : dt == PX_DTYPE_FP16 ? F<__half>(__VA_ARGS__) \
                                                                               : F<float>(__VA_ARGS__))

template <typename T>
static px_status sink_fold(void *ctx, float *lse, const void *sinks, int64_t b, int64_t s, int64_t hq, int64_t d,
                           cudaStream_t stream) {
  const int64_t rows = b * hq * s;
  sink_fold_kernel<T><<<sink_blocks(rows), SINK_WARPS * 32, 0, stream>>>((T *)ctx, lse, (const T *)sinks, rows, s, hq,
                                                                        (int)d);
  return PX_KC_LAUNCHED("flash sink_fold_kernel");
}

template <typename T>
static px_status sink_rows(float *terms, const void *dctx, const void *q, const void *k, const void *ctx,
                           const float *lse, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t window,
                           cudaStream_t stream) {
  const int64_t rows = b * hq * s;
  sink_rows_kernel<T><<<sink_blocks(rows), SINK_WARPS * 32, 0, stream>>>(
      terms, (const T *)dctx, (const T *)q, (const T *)k, (const T *)ctx, lse, rows, s, hq, hkv, (int)d, window);
  return PX_KC_LAUNCHED("flash sink_rows_kernel");
}

template <typename T>
static px_status sink_grad(void *dsink, const float *terms, int64_t b, int64_t hq, int64_t s, cudaStream_t stream) {
  sink_grad_kernel<T><<<(unsigned)hq, THREADS, 0, stream>>>((T *)dsink, terms, b, hq, s);
  return PX_KC_LAUNCHED("flash sink_grad_kernel");
}

extern "C" px_status px_kc_flash_sink_fold(void *ctx, float *lse, const void *sinks, px_dtype dtype, int64_t b,
                                           int64_t s, int64_t hq, int64_t d, cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_sink_fold", dtype, b, s, hq, 1, d, 0.0f, &empty);
  if (st || empty) return st;
  return BY_T(sink_fold, dtype, ctx, lse, sinks, b, s, hq, d, stream);
}

extern "C" px_status px_kc_flash_sink_rows(float *terms, const void *dctx, const void *q, const void *k,
                                           const void *ctx, const float *lse, px_dtype dtype, int64_t b, int64_t s,
                                           int64_t hq, int64_t hkv, int64_t d, int64_t window, cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_sink_rows", dtype, b, s, hq, hkv, d, 0.0f, &empty);
  if (st || empty) return st;
  return BY_T(sink_rows, dtype, terms, dctx, q, k, ctx, lse, b, s, hq, hkv, d, window, stream);
}

extern "C" px_status px_kc_sink_grad(void *dsink, const float *terms, px_dtype dtype, int64_t b, int64_t hq, int64_t s,
                                     cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_sink_grad", dtype, b, s, hq, 1, 1, 0.0f, &empty);
  if (st || empty) return st;
  return BY_T(sink_grad, dtype, dsink, terms, b, hq, s, stream);
}
