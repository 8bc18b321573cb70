/* Sum of squares (two deterministic passes in double), scale, add, accumulate. */
#include "kernels/cuda/reduce.h"

/* Pass 1 of the sum of squares (px_kc_two_pass): block b sums elements
 * b*256 + t, stepping by the grid, in double, and writes partials[b]. */

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

template <typename T>
static px_status sumsq(double *out, const T *x, int64_t n, cudaStream_t stream) {
  return px_kc_two_pass<px_kc_sum_op>(out, n, [&](int nblocks, double *partials) {
    sumsq_partial_kernel<<<nblocks, PX_KC_TWO_PASS_THREADS, 0, stream>>>(partials, x, n);
    return PX_KC_LAUNCHED("sumsq_partial_kernel");
  }, stream);
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

