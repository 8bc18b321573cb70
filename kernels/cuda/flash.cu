/* FlashAttention in fp32 arithmetic on CUDA cores: tiles of 32 queries x 32
 * keys in dynamic shared memory (rows padded to D + 1 floats against bank
 * conflicts), 256 threads per block. A thread works on one row of a tile:
 * eight threads share a row, thread lane l8 takes columns l8, l8 + 8, ...,
 * and the row's max and sum are reduced over those eight lanes by shuffles. */
#include "kernels/cuda/flash.h"

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

template <typename T, int NI>
static __global__ void __launch_bounds__(THREADS)
    fwd_kernel(T *ctx, float *lse, const T *q, const T *k, const T *v, int64_t s, int64_t hq, int64_t hkv, int d,
               float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, tid = threadIdx.x, r = tid >> 3, l8 = tid & 7;
  float *Qs = smem, *KVs = Qs + TILE * pd, *Ps = KVs + TILE * pd; /* Q, then K or V (TILE, D); P (TILE, TILE) */
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TILE, t = t0 + r;
  const int64_t ldq = hq * d, ldk = hkv * d, kend = t0 + TILE < s ? t0 + TILE : s;
  const float scale = (1.0f / sqrtf((float)d));
  load_tile(Qs, q, t0, s, ldq, h, d);
  float acc[NI], m = -INFINITY, l = 0.0f;
#pragma unroll
  for (int i = 0; i < NI; i++) acc[i] = 0.0f;
  for (int64_t s0 = 0; s0 < kend; s0 += TILE) {
    __syncthreads(); /* the last tile's V is read */
    load_tile(KVs, k, s0, s, ldk, g, d);
    __syncthreads();
    float sc[TILE / 8], mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < TILE / 8; j++) {
      int c = l8 + 8 * j;
      sc[j] = s0 + c <= t && t < s ? scale * dot(Qs + r * pd, KVs + c * pd, d) : -INFINITY;
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

/* The backward's per-row values of a query tile of head h: lse and
 * delta = dO . O (= rowsum(P * dP)), into rows[0..TILE) and rows[TILE..2 TILE).
 * dOs must hold the tile's dO; all threads call. */
template <typename T>
static __device__ void load_rows(float *rows, const float *dOs, const T *ctx, const float *lse, int64_t t0, int64_t s,
                                 int64_t ldq, int64_t h, int d) {
  const int r = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  const int64_t t = t0 + r;
  float part = 0.0f;
  if (t < s)
    for (int c = l8; c < d; c += 8) part += dOs[r * (d + 1) + c] * px_kc_ld(ctx + t * ldq + h * d + c);
  part = row_sum(part);
  if (l8 == 0) {
    rows[r] = t < s ? lse[h * s + t] : 0.0f;
    rows[TILE + r] = part;
  }
}

/* Row r of the (query, key) tile at (t0, s0) for this thread's columns
 * c = l8 + 8 j: the dropped-out probabilities into Ps (when not NULL) and
 * dS = P (dP - delta) into dSs, from Q, dO, K, V tiles and the rows' lse, delta. */
static __device__ void probs_and_ds(float *Ps, float *dSs, const float *Qs, const float *dOs, const float *Ks,
                                    const float *Vs, const float *rows, int64_t t0, int64_t s0, int64_t s, int64_t h,
                                    int d, float p, uint64_t seed, uint64_t off) {
  const int pd = d + 1, r = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  const int64_t t = t0 + r;
  const float scale = (1.0f / sqrtf((float)d));
#pragma unroll
  for (int j = 0; j < TILE / 8; j++) {
    const int c = l8 + 8 * j;
    float pdrop = 0.0f, ds = 0.0f;
    if (s0 + c <= t && t < s) {
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
                  int64_t s, int64_t hq, int64_t hkv, int d, float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, c = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  float *Ks = smem, *Vs = Ks + TILE * pd, *Qs = Vs + TILE * pd, *dOs = Qs + TILE * pd, *Ps = dOs + TILE * pd,
        *dSs = Ps + TILE * PROW, *rows = dSs + TILE * PROW;
  const int64_t g = blockIdx.y, group = hq / hkv, s0 = (int64_t)blockIdx.x * TILE, ldq = hq * d, ldk = hkv * d;
  load_tile(Ks, k, s0, s, ldk, g, d);
  load_tile(Vs, v, s0, s, ldk, g, d);
  float ak[NI], av[NI];
#pragma unroll
  for (int i = 0; i < NI; i++) ak[i] = av[i] = 0.0f;
  for (int64_t h = g * group; h < (g + 1) * group; h++)
    for (int64_t t0 = s0; t0 < s; t0 += TILE) {
      __syncthreads(); /* the last tiles are read */
      load_tile(Qs, q, t0, s, ldq, h, d);
      load_tile(dOs, dctx, t0, s, ldq, h, d);
      __syncthreads();
      load_rows(rows, dOs, ctx, lse, t0, s, ldq, h, d);
      __syncthreads();
      probs_and_ds(Ps, dSs, Qs, dOs, Ks, Vs, rows, t0, s0, s, h, d, p, seed, off);
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
                 int64_t hq, int64_t hkv, int d, float p, uint64_t seed, uint64_t off) {
  PX_KC_DYNAMIC_SMEM(float, smem);
  const int pd = d + 1, r = threadIdx.x >> 3, l8 = threadIdx.x & 7;
  float *Ks = smem, *Vs = Ks + TILE * pd, *Qs = Vs + TILE * pd, *dOs = Qs + TILE * pd, *dSs = dOs + TILE * pd,
        *rows = dSs + TILE * PROW;
  const int64_t h = blockIdx.y, g = h / (hq / hkv), t0 = (int64_t)blockIdx.x * TILE, ldq = hq * d, ldk = hkv * d;
  const int64_t kend = t0 + TILE < s ? t0 + TILE : s;
  load_tile(Qs, q, t0, s, ldq, h, d);
  load_tile(dOs, dctx, t0, s, ldq, h, d);
  __syncthreads();
  load_rows(rows, dOs, ctx, lse, t0, s, ldq, h, d);
  float aq[NI];
#pragma unroll
  for (int i = 0; i < NI; i++) aq[i] = 0.0f;
  for (int64_t s0 = 0; s0 < kend; s0 += TILE) {
    __syncthreads(); /* rows are written; the last K is read */
    load_tile(Ks, k, s0, s, ldk, g, d);
    load_tile(Vs, v, s0, s, ldk, g, d);
    __syncthreads();
    probs_and_ds(NULL, dSs, Qs, dOs, Ks, Vs, rows, t0, s0, s, h, d, p, seed, off);
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
static px_status fwd(void *ctx, float *lse, const void *q, const void *k, const void *v, int64_t s, int64_t hq,
                     int64_t hkv, int d, float p, uint64_t seed, uint64_t off, cudaStream_t stream) {
  size_t bytes = fwd_smem(d);
  px_status st = smem_for(fwd_kernel<T, NI>, bytes);
  if (st) return st;
  dim3 grid((unsigned)((s + TILE - 1) / TILE), (unsigned)hq);
  fwd_kernel<T, NI><<<grid, THREADS, bytes, stream>>>((T *)ctx, lse, (const T *)q, (const T *)k, (const T *)v, s, hq,
                                                      hkv, d, p, seed, off);
  return PX_KC_LAUNCHED("flash fwd_kernel");
}

template <typename T, int NI>
static px_status bwd(void *dq, void *dk, void *dv, const void *dctx, const void *q, const void *k, const void *v,
                     const void *ctx, const float *lse, int64_t s, int64_t hq, int64_t hkv, int d, float p,
                     uint64_t seed, uint64_t off, cudaStream_t stream) {
  size_t bytes = bwd_smem(d);
  px_status st = smem_for(bwd_kv_kernel<T, NI>, bytes);
  if (!st) st = smem_for(bwd_q_kernel<T, NI>, bytes);
  if (st) return st;
  unsigned tiles = (unsigned)((s + TILE - 1) / TILE);
  bwd_kv_kernel<T, NI><<<dim3(tiles, (unsigned)hkv), THREADS, bytes, stream>>>(
      (T *)dk, (T *)dv, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, d,
      p, seed, off);
  st = PX_KC_LAUNCHED("flash bwd_kv_kernel");
  if (st) return st;
  bwd_q_kernel<T, NI><<<dim3(tiles, (unsigned)hq), THREADS, bytes, stream>>>(
      (T *)dq, (const T *)dctx, (const T *)q, (const T *)k, (const T *)v, (const T *)ctx, lse, s, hq, hkv, d, p, seed,
      off);
  return PX_KC_LAUNCHED("flash bwd_q_kernel");
}

/* Refuses what the kernels cannot take; sets *empty for a no-op. */
static px_status check(const char *who, px_dtype dt, int64_t s, int64_t hq, int64_t hkv, int64_t d, bool *empty) {
  *empty = s <= 0 || hq <= 0 || d <= 0;
  if (dt != PX_DTYPE_FP32 && dt != PX_DTYPE_BF16 && dt != PX_DTYPE_FP16)
    return px_kc_fail(__FILE__, __LINE__, "%s: dtype %d is not fp32, bf16 or fp16", who, (int)dt);
  if (d > PX_KC_FLASH_MAX_D || hkv <= 0 || hq % hkv != 0 || hq > 65535)
    return px_kc_fail(__FILE__, __LINE__, "%s: head dim %lld (at most %d) or heads %lld/%lld not supported", who,
                      (long long)d, PX_KC_FLASH_MAX_D, (long long)hq, (long long)hkv);
  return PX_OK;
}

/* Calls F<T, NI>(args) for the dtype's T and the head dim's NI. */
#define DISPATCH(F, dt, d, ...)                                                                   \
  (dt == PX_DTYPE_BF16 ? (ni_for(d) == 16 ? F<__nv_bfloat16, 16>(__VA_ARGS__) : F<__nv_bfloat16, 32>(__VA_ARGS__)) \
   : dt == PX_DTYPE_FP16 ? (ni_for(d) == 16 ? F<__half, 16>(__VA_ARGS__) : F<__half, 32>(__VA_ARGS__))             \
                         : (ni_for(d) == 16 ? F<float, 16>(__VA_ARGS__) : F<float, 32>(__VA_ARGS__)))

extern "C" px_status px_kc_flash_fwd(void *ctx, float *lse, const void *q, const void *k, const void *v, px_dtype dtype,
                                     int64_t s, int64_t hq, int64_t hkv, int64_t d, float p, uint64_t seed,
                                     uint64_t off, cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_fwd", dtype, s, hq, hkv, d, &empty);
  if (st || empty) return st;
  return DISPATCH(fwd, dtype, d, ctx, lse, q, k, v, s, hq, hkv, (int)d, p, seed, off, stream);
}

extern "C" px_status px_kc_flash_bwd(void *dq, void *dk, void *dv, const void *dctx, const void *q, const void *k,
                                     const void *v, const void *ctx, const float *lse, px_dtype dtype, int64_t s,
                                     int64_t hq, int64_t hkv, int64_t d, float p, uint64_t seed, uint64_t off,
                                     cudaStream_t stream) {
  bool empty;
  px_status st = check("px_kc_flash_bwd", dtype, s, hq, hkv, d, &empty);
  if (st || empty) return st;
  return DISPATCH(bwd, dtype, d, dq, dk, dv, dctx, q, k, v, ctx, lse, s, hq, hkv, (int)d, p, seed, off, stream);
}
