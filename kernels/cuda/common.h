/* What every CUDA kernel file shares: the bf16 storage type as C sees it, the
 * status returned by each launcher (with a readable last error), fp32 <-> bf16
 * conversions, and (device code only) loads/stores and warp/block reductions. */
#ifndef PX_KERNELS_CUDA_COMMON_H
#define PX_KERNELS_CUDA_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

/* bf16 and fp16 storage: __nv_bfloat16 and __half in C++/CUDA, their 2-byte
 * raw structs in C (same size and layout, so the launchers have one ABI for
 * both languages). Every _bf16 launcher has an _fp16 twin: the same kernel
 * on fp16 storage (fp32 math, one rounding per result). */
#ifdef __cplusplus
typedef __nv_bfloat16 px_bf16;
typedef __half px_fp16;
#else
typedef __nv_bfloat16_raw px_bf16;
typedef __half_raw px_fp16;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher returns PX_OK, PX_ERR_RUNTIME when a CUDA / cuBLAS call or a
 * kernel launch failed, or PX_ERR_INPUT for arguments it refuses (px_kc_gemm's
 * unsupported types); px_kc_last_error() then says where and why (text of the
 * calling thread's most recent failure, "" when none). Sizes <= 0 are a
 * no-op, as on the CPU. Launches are asynchronous: a fault inside a kernel
 * shows up at the next synchronizing call, as everywhere in CUDA. */
const char *px_kc_last_error(void);

/* Records a failure of `what` at file:line unless e == cudaSuccess. */
px_status px_kc_cuda_status(cudaError_t e, const char *file, int line, const char *what);

/* Records any failure message (cuBLAS and other non-runtime errors); returns PX_ERR_RUNTIME. */
px_status px_kc_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* out = bf16(inp), round to nearest even. */
px_status px_kc_to_bf16(px_bf16 *out,      // (n)
                        const float *inp,  // (n)
                        int64_t n, cudaStream_t stream);

/* out = float(inp), exact. */
px_status px_kc_to_fp32(float *out,          // (n)
                        const px_bf16 *inp,  // (n)
                        int64_t n, cudaStream_t stream);

/* out = inp converted from in_dtype to out_dtype (each of FP32, BF16, FP16;
 * narrowing rounds to nearest even, fp16 saturating to inf as IEEE does). */
px_status px_kc_convert(void *out,       // (n) out_dtype
                        const void *inp, // (n) in_dtype
                        px_dtype out_dtype, px_dtype in_dtype, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* ------------------------- launcher helpers (C++ only) ------------------------- */
#ifdef __CUDACC__

/* The three C launchers of a kernel templated on its storage type: name (fp32),
 * name_bf16 and name_fp16, each `return call;`, PARAMS(T) giving the parameter
 * list for element type T: one ABI per type (C sees no templates), written once. */
#define PX_KC_LAUNCHERS(name, PARAMS, call)                         \
  extern "C" px_status name PARAMS(float) { return call; }          \
  extern "C" px_status name##_bf16 PARAMS(px_bf16) { return call; } \
  extern "C" px_status name##_fp16 PARAMS(px_fp16) { return call; }

/* Returns the status of `expr` (a cudaError_t) when it is not cudaSuccess. */
#define PX_KC_TRY(expr)                                                            \
  do {                                                                             \
    px_status pxst_ = px_kc_cuda_status((expr), __FILE__, __LINE__, #expr);       \
    if (pxst_ != PX_OK) return pxst_;                                              \
  } while (0)

/* After a launch: the launch's status (configuration errors, earlier faults). */
#define PX_KC_LAUNCHED(name) px_kc_cuda_status(cudaGetLastError(), __FILE__, __LINE__, "launch " name)

/* Threads per block for the elementwise kernels, and the block count that
 * covers n items at `per_block` items per block; grid-stride loops take the
 * rest, so any int64 n works. */
#define PX_KC_THREADS 256
static inline unsigned px_kc_blocks(int64_t n, int64_t per_block) {
  int64_t b = (n + per_block - 1) / per_block;
  const int64_t cap = 1 << 20;
  return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

/* ------------------------- device helpers ------------------------- */

/* Grid-stride loop over [0, n) with an int64 index. */
#define PX_KC_FOR(i, n) \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#define PX_KC_FULL_MASK 0xffffffffu

/* The launch's dynamic shared memory as `type name[]` (bytes from the
 * launch), aligned for wmma's 256-bit loads and 16-byte vector copies. */
#ifndef PX_KC_DYNAMIC_SMEM
#define PX_KC_DYNAMIC_SMEM(type, name) extern __shared__ __align__(128) type name[]
#endif

static __device__ __forceinline__ float px_kc_ld(const float *p) { return *p; }
static __device__ __forceinline__ float px_kc_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
static __device__ __forceinline__ void px_kc_st(float *p, float v) { *p = v; }
static __device__ __forceinline__ void px_kc_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
static __device__ __forceinline__ float px_kc_ld(const __half *p) { return __half2float(*p); }
static __device__ __forceinline__ void px_kc_st(__half *p, float v) { *p = __float2half_rn(v); }

/* Butterfly reductions: every lane gets the result, and lanes combine in the
 * same order on every run (deterministic). All 32 lanes must take part. */
template <typename T>
static __device__ __forceinline__ T px_kc_warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(PX_KC_FULL_MASK, v, o);
  return v;
}

static __device__ __forceinline__ float px_kc_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(PX_KC_FULL_MASK, v, o));
  return v;
}

/* Sum over the whole block (blockDim.x a multiple of 32, at most 1024, every
 * thread calling); every thread gets the same value. May be called repeatedly. */
template <typename T>
static __device__ T px_kc_block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = px_kc_warp_sum(v);
  __syncthreads(); /* an earlier call's readers are done with part[] */
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part[lane] : (T)0;
  return px_kc_warp_sum(v); /* every warp adds the partials in the same order */
}

static __device__ __forceinline__ float px_kc_block_max(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = px_kc_warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part[lane] : -INFINITY;
  return px_kc_warp_max(v);
}

/* A deterministic two-pass reduction of n elements: pass 1 runs up to
 * PX_KC_TWO_PASS_MAX_BLOCKS blocks of PX_KC_TWO_PASS_THREADS, each folding its
 * grid-stride share into partials[block]; pass 2, one block, folds the
 * partials in a fixed order into *out. The split depends on n alone, so the
 * same input gives the same bits. Op: fold and block (px_kc_sum_op, or
 * px_kc_max_op for non-negative values: both start from 0). */
#define PX_KC_TWO_PASS_THREADS 256
#define PX_KC_TWO_PASS_MAX_BLOCKS 1024

struct px_kc_sum_op {
  template <typename T>
  static __device__ T fold(T a, T b) { return a + b; }
  template <typename T>
  static __device__ T block(T v) { return px_kc_block_sum(v); }
};

struct px_kc_max_op {
  static __device__ float fold(float a, float b) { return fmaxf(a, b); }
  static __device__ float block(float v) { return px_kc_block_max(v); }
};

template <typename Op, typename Acc>
static __global__ void px_kc_fold_partials_kernel(Acc *out, const Acc *partials, int nparts) {
  Acc v = 0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) v = Op::fold(v, partials[i]);
  v = Op::block(v);
  if (threadIdx.x == 0) *out = v;
}

/* pass1(nblocks, partials) launches pass 1 (blocks of PX_KC_TWO_PASS_THREADS on
 * stream) and returns its launch status; n <= 0 writes 0. */
template <typename Op, typename Acc, typename Pass1>
static px_status px_kc_two_pass(Acc *out, int64_t n, Pass1 pass1, cudaStream_t stream) {
  if (n <= 0) return px_kc_cuda_status(cudaMemsetAsync(out, 0, sizeof *out, stream), __FILE__, __LINE__, "memset");
  int64_t want = (n + (int64_t)PX_KC_TWO_PASS_THREADS * 8 - 1) / ((int64_t)PX_KC_TWO_PASS_THREADS * 8);
  int nblocks = (int)(want > PX_KC_TWO_PASS_MAX_BLOCKS ? PX_KC_TWO_PASS_MAX_BLOCKS : want);
  Acc *partials = NULL;
  PX_KC_TRY(cudaMallocAsync((void **)&partials, (size_t)nblocks * sizeof *partials, stream));
  px_status st = pass1(nblocks, partials);
  if (st == PX_OK) {
    px_kc_fold_partials_kernel<Op><<<1, PX_KC_TWO_PASS_THREADS, 0, stream>>>(out, partials, nblocks);
    st = PX_KC_LAUNCHED("px_kc_fold_partials_kernel");
  }
  px_status st_free = px_kc_cuda_status(cudaFreeAsync(partials, stream), __FILE__, __LINE__, "cudaFreeAsync");
  return st != PX_OK ? st : st_free;
}

/* Deterministic column sums of an (N, C) matrix given by a functor f(i, j):
 * out[j] += sum_i f(i, j), for the weight and bias gradients of the norms and
 * the linear layer. Pass 1: a block of (32 columns) x (PX_KC_COLSUM_ROWS row
 * lanes) per 32 columns and chunk of rows; lane y sums its chunk's rows y,
 * y + ROWS, ... in order, lane 0 adds the lanes' partials in lane order into
 * part[chunk][j]. Pass 2 adds the chunks in order (one chunk: pass 1 adds into
 * out itself). No atomics: the same input gives the same bits. Chunks, not one
 * block per 32 columns: on an H200 that left most SMs idle, the norms'
 * backward 12-20x its bytes' time (bench/gpu/h200-2026-11-28). */
#define PX_KC_COLSUM_ROWS 32
#define PX_KC_COLSUM_CHUNK 256 /* rows a block sums, at least (8 a lane) */
template <typename T, typename F>
static __global__ void px_kc_colsum_kernel(T *out, float *part, int64_t n, int64_t c, int64_t chunk, F f) {
  __shared__ float sh[PX_KC_COLSUM_ROWS][33];
  const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
  const int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < n ? r0 + chunk : n;
  float s = 0.0f;
  if (j < c)
    for (int64_t i = r0 + threadIdx.y; i < r1; i += PX_KC_COLSUM_ROWS) s += f(i, j);
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < c) {
    float acc = 0.0f;
    for (int y = 0; y < PX_KC_COLSUM_ROWS; y++) acc += sh[y][threadIdx.x];
    if (part)
      part[(int64_t)blockIdx.y * c + j] = acc;
    else
      px_kc_st(out + j, px_kc_ld(out + j) + acc);
  }
}

template <typename T>
static __global__ void px_kc_colsum_fold_kernel(T *out, const float *part, int64_t chunks, int64_t c) {
  PX_KC_FOR(j, c) {
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; k++) acc += part[k * c + j];
    px_kc_st(out + j, px_kc_ld(out + j) + acc);
  }
}

template <typename T, typename F>
static px_status px_kc_colsum(T *out, int64_t n, int64_t c, F f, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  /* at most 65535 chunks (the grid's y limit): past ~16M rows, longer ones */
  int64_t chunk = PX_KC_COLSUM_CHUNK, least = (n + 65534) / 65535;
  if (least > chunk) chunk = (least + PX_KC_COLSUM_ROWS - 1) / PX_KC_COLSUM_ROWS * PX_KC_COLSUM_ROWS;
  int64_t chunks = (n + chunk - 1) / chunk;
  float *part = NULL; /* (chunks, c) */
  if (chunks > 1) PX_KC_TRY(cudaMallocAsync((void **)&part, (size_t)(chunks * c) * sizeof *part, stream));
  dim3 block(32, PX_KC_COLSUM_ROWS), grid((unsigned)((c + 31) / 32), (unsigned)chunks);
  px_kc_colsum_kernel<<<grid, block, 0, stream>>>(out, part, n, c, chunk, f);
  px_status st = PX_KC_LAUNCHED("px_kc_colsum_kernel");
  if (part) {
    if (st == PX_OK) {
      px_kc_colsum_fold_kernel<<<px_kc_blocks(c, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, part, chunks, c);
      st = PX_KC_LAUNCHED("px_kc_colsum_fold_kernel");
    }
    px_status st_free = px_kc_cuda_status(cudaFreeAsync(part, stream), __FILE__, __LINE__, "cudaFreeAsync");
    if (st == PX_OK) st = st_free;
  }
  return st;
}

#endif /* __CUDACC__ */

#endif
