/* GELU and SwiGLU over contiguous buffers, one element per thread (grid-stride),
 * templated on the storage type so fp32 and bf16 share one body. */
#include "kernels/cuda/act.h"

#include "kernels/math.h"

template <typename T>
static __global__ void gelu_fwd_kernel(T *out, const T *inp, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(out + i, px_gelu(px_kc_ld(inp + i)));
}

template <typename T>
static __global__ void gelu_bwd_kernel(T *dinp, const T *dout, const T *inp, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(dinp + i, px_kc_ld(dinp + i) + px_kc_ld(dout + i) * px_gelu_grad(px_kc_ld(inp + i)));
}

template <typename T>
static __global__ void swiglu_fwd_kernel(T *out, const T *gate, const T *up, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(out + i, px_silu(px_kc_ld(gate + i)) * px_kc_ld(up + i));
}

template <typename T>
static __global__ void swiglu_bwd_kernel(T *dgate, T *dup, const T *dout, const T *gate, const T *up, int64_t n) {
  PX_KC_FOR(i, n) {
    float g = px_kc_ld(gate + i), d = px_kc_ld(dout + i);
    px_kc_st(dgate + i, px_kc_ld(dgate + i) + d * px_kc_ld(up + i) * px_silu_grad(g));
    px_kc_st(dup + i, px_kc_ld(dup + i) + d * px_silu(g));
  }
}

template <typename T>
static px_status gelu_fwd(T *out, const T *inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  gelu_fwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, inp, n);
  return PX_KC_LAUNCHED("gelu_fwd_kernel");
}

template <typename T>
static px_status gelu_bwd(T *dinp, const T *dout, const T *inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  gelu_bwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(dinp, dout, inp, n);
  return PX_KC_LAUNCHED("gelu_bwd_kernel");
}

template <typename T>
static px_status swiglu_fwd(T *out, const T *gate, const T *up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  swiglu_fwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, gate, up, n);
  return PX_KC_LAUNCHED("swiglu_fwd_kernel");
}

template <typename T>
static px_status swiglu_bwd(T *dgate, T *dup, const T *dout, const T *gate, const T *up, int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  swiglu_bwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(dgate, dup, dout, gate, up, n);
  return PX_KC_LAUNCHED("swiglu_bwd_kernel");
}

#define GELU_FWD(T) (T *out, const T *inp, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_gelu_fwd, GELU_FWD, gelu_fwd(out, inp, n, stream))

#define GELU_BWD(T) (T *dinp, const T *dout, const T *inp, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_gelu_bwd, GELU_BWD, gelu_bwd(dinp, dout, inp, n, stream))

#define SWIGLU_FWD(T) (T *out, const T *gate, const T *up, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_swiglu_fwd, SWIGLU_FWD, swiglu_fwd(out, gate, up, n, stream))

#define SWIGLU_BWD(T) (T *dgate, T *dup, const T *dout, const T *gate, const T *up, int64_t n, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_swiglu_bwd, SWIGLU_BWD, swiglu_bwd(dgate, dup, dout, gate, up, n, stream))

