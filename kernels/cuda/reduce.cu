/* Sum of squares (two deterministic passes in double), scale, add, accumulate. */
#include "kernels/cuda/reduce.h"

/* Pass 1 of the sum of squares: block b sums elements b*256 + t, stepping by
 * the grid, in double, and writes partials[b]. The partition depends only on n. */
#define SUMSQ_THREADS 256
#define SUMSQ_MAX_BLOCKS 1024

template <typename T>
static __global__ void sumsq_partial_kernel(double *partials, const T *x, int64_t n) {
  double s = 0.0;
  PX_KC_FOR(i, n) {
    double xi = px_kc_ld(x + i);
    s += xi * xi;
  }
  s = px_kc_block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

/* Pass 2: one block adds the partials in a fixed order. */
static __global__ void sumsq_final_kernel(double *out, const double *partials, int nparts) {
  double s = 0.0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partials[i];
  s = px_kc_block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

template <typename T>
static px_status sumsq(double *out, const T *x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return px_kc_cuda_status(cudaMemsetAsync(out, 0, sizeof *out, stream), __FILE__, __LINE__, "memset");
  int64_t want = (n + (int64_t)SUMSQ_THREADS * 8 - 1) / ((int64_t)SUMSQ_THREADS * 8);
  int nblocks = (int)(want > SUMSQ_MAX_BLOCKS ? SUMSQ_MAX_BLOCKS : want);
  double *partials = NULL;
  PX_KC_TRY(cudaMallocAsync((void **)&partials, (size_t)nblocks * sizeof *partials, stream));
  sumsq_partial_kernel<<<nblocks, SUMSQ_THREADS, 0, stream>>>(partials, x, n);
  px_status st = PX_KC_LAUNCHED("sumsq_partial_kernel");
  if (st == PX_OK) {
    sumsq_final_kernel<<<1, SUMSQ_THREADS, 0, stream>>>(out, partials, nblocks);
    st = PX_KC_LAUNCHED("sumsq_final_kernel");
  }
  px_status st_free = px_kc_cuda_status(cudaFreeAsync(partials, stream), __FILE__, __LINE__, "cudaFreeAsync");
  return st != PX_OK ? st : st_free;
}

extern "C" px_status px_kc_sumsq(double *out, const float *x, int64_t n, cudaStream_t stream) {
  return sumsq(out, x, n, stream);
}

extern "C" px_status px_kc_sumsq_bf16(double *out, const px_bf16 *x, int64_t n, cudaStream_t stream) {
  return sumsq(out, x, n, stream);
}

extern "C" px_status px_kc_sumsq_fp16(double *out, const void *x, int64_t n, cudaStream_t stream) {
  return sumsq(out, (const __half *)x, n, stream);
}

template <typename T>
static __global__ void add_bias_kernel(T *x, const T *bias, int64_t n, int64_t c) {
  PX_KC_FOR(i, n) px_kc_st(x + i, px_kc_ld(x + i) + px_kc_ld(bias + i % c));
}

template <typename T>
static px_status add_bias(T *x, const T *bias, int64_t rows, int64_t c, cudaStream_t stream) {
  int64_t n = rows * c;
  if (n <= 0) return PX_OK;
  add_bias_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(x, bias, n, c);
  return PX_KC_LAUNCHED("add_bias_kernel");
}

#define ADD_BIAS(T) (T *x, const T *bias, int64_t rows, int64_t c, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_add_bias, ADD_BIAS, add_bias(x, bias, rows, c, stream))

static __global__ void scale_kernel(float *x, int64_t n, float s) {
  PX_KC_FOR(i, n) x[i] *= s;
}

template <typename T>
static __global__ void add_kernel(T *out, const T *a, const T *b, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(out + i, px_kc_ld(a + i) + px_kc_ld(b + i));
}

template <typename T>
static __global__ void acc_kernel(T *out, const T *inp, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(out + i, px_kc_ld(out + i) + px_kc_ld(inp + i));
}

extern "C" px_status px_kc_scale(float *x, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  scale_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(x, n, s);
  return PX_KC_LAUNCHED("scale_kernel");
}

template <typename T>
static px_status add(T *out, const T *a, const T *b, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  add_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, a, b, n);
  return PX_KC_LAUNCHED("add_kernel");
}

template <typename T>
static px_status acc(T *out, const T *inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  acc_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, inp, n);
  return PX_KC_LAUNCHED("acc_kernel");
}

#define ADD(T) (T *out, const T *a, const T *b, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_add, ADD, add(out, a, b, n, stream))

#define ACC(T) (T *out, const T *inp, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_acc, ACC, acc(out, inp, n, stream))

