/* Head gather and scatter, one element per thread. */
#include "kernels/cuda/heads.h"

template <typename T>
static __global__ void head_get_kernel(float *dst, const T *src, int64_t s, int64_t h, int64_t d, int64_t head) {
  PX_KC_FOR(i, s * d) {
    int64_t t = i / d, j = i % d;
    dst[i] = px_kc_ld(src + (t * h + head) * d + j);
  }
}

template <typename T>
static __global__ void head_put_kernel(T *dst, const float *src, int64_t s, int64_t h, int64_t d, int64_t head,
                                       bool accumulate) {
  PX_KC_FOR(i, s * d) {
    int64_t t = i / d, j = i % d;
    T *p = dst + (t * h + head) * d + j;
    px_kc_st(p, accumulate ? px_kc_ld(p) + src[i] : src[i]);
  }
}

static bool supported(px_dtype dt) { return dt == PX_DTYPE_FP32 || dt == PX_DTYPE_BF16; }

extern "C" px_status px_kc_head_get(float *dst, const void *src, px_dtype src_dtype, int64_t s, int64_t h, int64_t d,
                                    int64_t head, cudaStream_t stream) {
  if (!supported(src_dtype)) return px_kc_fail(__FILE__, __LINE__, "px_kc_head_get: dtype %d is not fp32 or bf16", (int)src_dtype);
  if (s * d <= 0) return PX_OK;
  unsigned blocks = px_kc_blocks(s * d, PX_KC_THREADS);
  if (src_dtype == PX_DTYPE_BF16)
    head_get_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(dst, (const __nv_bfloat16 *)src, s, h, d, head);
  else
    head_get_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(dst, (const float *)src, s, h, d, head);
  return PX_KC_LAUNCHED("head_get_kernel");
}

extern "C" px_status px_kc_head_put(void *dst, const float *src, px_dtype dst_dtype, int64_t s, int64_t h, int64_t d,
                                    int64_t head, bool accumulate, cudaStream_t stream) {
  if (!supported(dst_dtype)) return px_kc_fail(__FILE__, __LINE__, "px_kc_head_put: dtype %d is not fp32 or bf16", (int)dst_dtype);
  if (s * d <= 0) return PX_OK;
  unsigned blocks = px_kc_blocks(s * d, PX_KC_THREADS);
  if (dst_dtype == PX_DTYPE_BF16)
    head_put_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((__nv_bfloat16 *)dst, src, s, h, d, head, accumulate);
  else
    head_put_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)dst, src, s, h, d, head, accumulate);
  return PX_KC_LAUNCHED("head_put_kernel");
}
