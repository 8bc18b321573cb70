/* Launcher status and error text shared by the CUDA kernels, and the fp32 <->
 * bf16 conversions. */
#include "kernels/cuda/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The calling thread's most recent failure. */
static thread_local char px_kc_err_msg[512];

extern "C" const char *px_kc_last_error(void) { return px_kc_err_msg; }

/* Only the file's name from here on: __FILE__ may be an absolute path. */
static const char *short_file(const char *file) {
  const char *k = strstr(file, "kernels/");
  return k ? k : file;
}

extern "C" px_status px_kc_cuda_status(cudaError_t e, const char *file, int line, const char *what) {
  if (e == cudaSuccess) return PX_OK;
  snprintf(px_kc_err_msg, sizeof px_kc_err_msg, "%s:%d: %s: %s (%s)", short_file(file), line, what,
           cudaGetErrorString(e), cudaGetErrorName(e));
  return PX_ERR_RUNTIME;
}

extern "C" px_status px_kc_fail(const char *file, int line, const char *fmt, ...) {
  int len = snprintf(px_kc_err_msg, sizeof px_kc_err_msg, "%s:%d: ", short_file(file), line);
  if (len < 0 || (size_t)len >= sizeof px_kc_err_msg) return PX_ERR_RUNTIME;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(px_kc_err_msg + len, sizeof px_kc_err_msg - (size_t)len, fmt, ap);
  va_end(ap);
  return PX_ERR_RUNTIME;
}

template <typename TO, typename TI>
static __global__ void convert_kernel(TO *out, const TI *inp, int64_t n) {
  PX_KC_FOR(i, n) px_kc_st(out + i, px_kc_ld(inp + i));
}

extern "C" px_status px_kc_to_bf16(px_bf16 *out, const float *inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  convert_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, inp, n);
  return PX_KC_LAUNCHED("convert_kernel");
}

extern "C" px_status px_kc_to_fp32(float *out, const px_bf16 *inp, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  convert_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, inp, n);
  return PX_KC_LAUNCHED("convert_kernel");
}

template <typename TO>
static px_status convert_from(TO *out, const void *inp, px_dtype in_dtype, int64_t n, cudaStream_t stream) {
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  switch (in_dtype) {
    case PX_DTYPE_FP32: convert_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(out, (const float *)inp, n); break;
    case PX_DTYPE_BF16: convert_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(out, (const __nv_bfloat16 *)inp, n); break;
    default: convert_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(out, (const __half *)inp, n); break;
  }
  return PX_KC_LAUNCHED("convert_kernel");
}

static bool convertible(px_dtype t) { return t == PX_DTYPE_FP32 || t == PX_DTYPE_BF16 || t == PX_DTYPE_FP16; }

extern "C" px_status px_kc_convert(void *out, const void *inp, px_dtype out_dtype, px_dtype in_dtype, int64_t n,
                                   cudaStream_t stream) {
  if (!convertible(out_dtype) || !convertible(in_dtype))
    return px_kc_fail(__FILE__, __LINE__, "px_kc_convert: dtypes %d <- %d are not fp32, bf16 or fp16", (int)out_dtype,
                      (int)in_dtype);
  if (n <= 0) return PX_OK;
  switch (out_dtype) {
    case PX_DTYPE_FP32: return convert_from((float *)out, inp, in_dtype, n, stream);
    case PX_DTYPE_BF16: return convert_from((__nv_bfloat16 *)out, inp, in_dtype, n, stream);
    default: return convert_from((__half *)out, inp, in_dtype, n, stream);
  }
}
