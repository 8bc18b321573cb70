/* LayerNorm and RMSNorm (llm.c's formulation): a warp per row for the forward
 * and for dinp, lanes striding over C; column sums for dweight and dbias. */
#include "kernels/cuda/norm.h"

#define NORM_WARPS 8 /* rows per block of the row kernels */

static unsigned norm_blocks(int64_t n) { return (unsigned)((n + NORM_WARPS - 1) / NORM_WARPS); }

/* The row of this warp, or -1 past the end (the whole warp then returns together). */
static __device__ __forceinline__ int64_t warp_row(int64_t n) {
  int64_t row = (int64_t)blockIdx.x * NORM_WARPS + (threadIdx.x >> 5);
  return row < n ? row : -1;
}

template <typename T>
static __global__ void layernorm_fwd_kernel(T *out, float *mean, float *rstd, const T *inp, const T *weight,
                                            const T *bias, int64_t n, int64_t c, float eps) {
  const int64_t row = warp_row(n);
  if (row < 0) return;
  const int lane = threadIdx.x & 31;
  const T *x = inp + row * c;
  T *o = out + row * c;
  float s = 0.0f;
  for (int64_t j = lane; j < c; j += 32) s += px_kc_ld(x + j);
  const float m = px_kc_warp_sum(s) / (float)c;
  float v = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    float dx = px_kc_ld(x + j) - m;
    v += dx * dx;
  }
  const float r = 1.0f / sqrtf(px_kc_warp_sum(v) / (float)c + eps);
  for (int64_t j = lane; j < c; j += 32) {
    float y = (px_kc_ld(x + j) - m) * r * px_kc_ld(weight + j);
    px_kc_st(o + j, bias ? y + px_kc_ld(bias + j) : y);
  }
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
}

template <typename T>
static __global__ void layernorm_bwd_kernel(T *dinp, const T *dout, const T *inp, const T *weight, const float *mean,
                                            const float *rstd, int64_t n, int64_t c) {
  const int64_t row = warp_row(n);
  if (row < 0) return;
  const int lane = threadIdx.x & 31;
  const T *x = inp + row * c, *g = dout + row * c;
  T *dx = dinp + row * c;
  const float m = mean[row], r = rstd[row];
  /* the two row means of the backward: mean(dnorm) and mean(dnorm * xhat) */
  float sd = 0.0f, sdx = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    float xhat = (px_kc_ld(x + j) - m) * r;
    float dnorm = px_kc_ld(weight + j) * px_kc_ld(g + j);
    sd += dnorm;
    sdx += dnorm * xhat;
  }
  const float md = px_kc_warp_sum(sd) / (float)c, mdx = px_kc_warp_sum(sdx) / (float)c;
  for (int64_t j = lane; j < c; j += 32) {
    float xhat = (px_kc_ld(x + j) - m) * r;
    float dnorm = px_kc_ld(weight + j) * px_kc_ld(g + j);
    px_kc_st(dx + j, px_kc_ld(dx + j) + r * (dnorm - md - xhat * mdx));
  }
}

template <typename T>
static __global__ void rmsnorm_fwd_kernel(T *out, float *rstd, const T *inp, const T *weight, int64_t n, int64_t c,
                                          float eps) {
  const int64_t row = warp_row(n);
  if (row < 0) return;
  const int lane = threadIdx.x & 31;
  const T *x = inp + row * c;
  T *o = out + row * c;
  float ss = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    float xj = px_kc_ld(x + j);
    ss += xj * xj;
  }
  const float r = 1.0f / sqrtf(px_kc_warp_sum(ss) / (float)c + eps);
  for (int64_t j = lane; j < c; j += 32) px_kc_st(o + j, px_kc_ld(x + j) * r * px_kc_ld(weight + j));
  if (lane == 0 && rstd) rstd[row] = r;
}

template <typename T>
static __global__ void rmsnorm_bwd_kernel(T *dinp, const T *dout, const T *inp, const T *weight, const float *rstd,
                                          int64_t n, int64_t c) {
  const int64_t row = warp_row(n);
  if (row < 0) return;
  const int lane = threadIdx.x & 31;
  const T *x = inp + row * c, *g = dout + row * c;
  T *dx = dinp + row * c;
  const float r = rstd[row];
  float sdx = 0.0f; /* sum of dnorm * xhat */
  for (int64_t j = lane; j < c; j += 32) sdx += (px_kc_ld(weight + j) * px_kc_ld(g + j)) * (px_kc_ld(x + j) * r);
  const float mdx = px_kc_warp_sum(sdx) / (float)c;
  for (int64_t j = lane; j < c; j += 32) {
    float xhat = px_kc_ld(x + j) * r;
    px_kc_st(dx + j, px_kc_ld(dx + j) + r * (px_kc_ld(weight + j) * px_kc_ld(g + j) - xhat * mdx));
  }
}

/* Column-sum terms: dweight gets dout * xhat, dbias gets dout. mean = NULL is RMSNorm (xhat = x * rstd). */
template <typename T>
struct dweight_term {
  const T *dout, *inp;
  const float *mean, *rstd;
  int64_t c;
  __device__ float operator()(int64_t i, int64_t j) const {
    float m = mean ? mean[i] : 0.0f;
    return px_kc_ld(dout + i * c + j) * ((px_kc_ld(inp + i * c + j) - m) * rstd[i]);
  }
};

template <typename T>
struct dbias_term {
  const T *dout;
  int64_t c;
  __device__ float operator()(int64_t i, int64_t j) const { return px_kc_ld(dout + i * c + j); }
};

template <typename T>
static px_status layernorm_fwd(T *out, float *mean, float *rstd, const T *inp, const T *weight, const T *bias,
                               int64_t n, int64_t c, float eps, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  layernorm_fwd_kernel<<<norm_blocks(n), NORM_WARPS * 32, 0, stream>>>(out, mean, rstd, inp, weight, bias, n, c, eps);
  return PX_KC_LAUNCHED("layernorm_fwd_kernel");
}

template <typename T>
static px_status layernorm_bwd(T *dinp, float *dweight, float *dbias, const T *dout, const T *inp, const T *weight,
                               const float *mean, const float *rstd, int64_t n, int64_t c, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  layernorm_bwd_kernel<<<norm_blocks(n), NORM_WARPS * 32, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, n, c);
  px_status st = PX_KC_LAUNCHED("layernorm_bwd_kernel");
  if (st == PX_OK && dweight) st = px_kc_colsum(dweight, n, c, dweight_term<T>{dout, inp, mean, rstd, c}, stream);
  if (st == PX_OK && dbias) st = px_kc_colsum(dbias, n, c, dbias_term<T>{dout, c}, stream);
  return st;
}

template <typename T>
static px_status rmsnorm_fwd(T *out, float *rstd, const T *inp, const T *weight, int64_t n, int64_t c, float eps,
                             cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  rmsnorm_fwd_kernel<<<norm_blocks(n), NORM_WARPS * 32, 0, stream>>>(out, rstd, inp, weight, n, c, eps);
  return PX_KC_LAUNCHED("rmsnorm_fwd_kernel");
}

template <typename T>
static px_status rmsnorm_bwd(T *dinp, float *dweight, const T *dout, const T *inp, const T *weight, const float *rstd,
                             int64_t n, int64_t c, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  rmsnorm_bwd_kernel<<<norm_blocks(n), NORM_WARPS * 32, 0, stream>>>(dinp, dout, inp, weight, rstd, n, c);
  px_status st = PX_KC_LAUNCHED("rmsnorm_bwd_kernel");
  if (st == PX_OK && dweight) st = px_kc_colsum(dweight, n, c, dweight_term<T>{dout, inp, NULL, rstd, c}, stream);
  return st;
}

#define LAYERNORM_FWD(T) (T *out, float *mean, float *rstd, const T *inp, const T *weight, const T *bias, int64_t n, \
    int64_t c, float eps, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_layernorm_fwd, LAYERNORM_FWD,
                layernorm_fwd(out, mean, rstd, inp, weight, bias, n, c, eps, stream))

#define LAYERNORM_BWD(T) (T *dinp, float *dweight, float *dbias, const T *dout, const T *inp, const T *weight, \
    const float *mean, const float *rstd, int64_t n, int64_t c, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_layernorm_bwd, LAYERNORM_BWD,
                layernorm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c, stream))

#define RMSNORM_FWD(T) (T *out, float *rstd, const T *inp, const T *weight, int64_t n, int64_t c, float eps, \
    cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_rmsnorm_fwd, RMSNORM_FWD, rmsnorm_fwd(out, rstd, inp, weight, n, c, eps, stream))

#define RMSNORM_BWD(T) (T *dinp, float *dweight, const T *dout, const T *inp, const T *weight, const float *rstd, \
    int64_t n, int64_t c, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_rmsnorm_bwd, RMSNORM_BWD, rmsnorm_bwd(dinp, dweight, dout, inp, weight, rstd, n, c, stream))

