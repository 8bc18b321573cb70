/* AdamW, one element per thread; the update is kernels/math.h's, as on the CPU. */
#include "kernels/cuda/adamw.h"

#include <math.h>

#include "kernels/math.h"

static __global__ void adamw_kernel(float *param, float *m, float *v, const float *grad, int64_t n, float lr,
                                    float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2) {
  PX_KC_FOR(i, n) px_adamw_update(&param[i], &m[i], &v[i], grad[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

template <typename T>
static __global__ void adamw_mixed_kernel(float *master, float *m, float *v, const T *grad, T *param, int64_t n,
                                          float lr, float beta1, float beta2, float eps, float weight_decay,
                                          float grad_scale, float bc1, float bc2) {
  PX_KC_FOR(i, n) {
    float g = px_kc_ld(grad + i) * grad_scale;
    px_adamw_update(&master[i], &m[i], &v[i], g, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
    px_kc_st(param + i, master[i]);
  }
}

/* The bias corrections in double on the host, as the CPU computes them. */
static void corrections(float beta1, float beta2, int64_t t, float *bc1, float *bc2) {
  *bc1 = (float)(1.0 - pow((double)beta1, (double)t));
  *bc2 = (float)(1.0 - pow((double)beta2, (double)t));
}

extern "C" px_status px_kc_adamw(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1,
                                 float beta2, float eps, float weight_decay, int64_t t, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  float bc1, bc2;
  corrections(beta1, beta2, t, &bc1, &bc2);
  adamw_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(param, m, v, grad, n, lr, beta1, beta2,
                                                                             eps, weight_decay, bc1, bc2);
  return PX_KC_LAUNCHED("adamw_kernel");
}

extern "C" px_status px_kc_adamw_mixed(float *master, float *m, float *v, const void *grad, void *param,
                                       px_dtype dtype, int64_t n, float lr, float beta1, float beta2, float eps,
                                       float weight_decay, float grad_scale, int64_t t, cudaStream_t stream) {
  if (dtype != PX_DTYPE_BF16 && dtype != PX_DTYPE_FP16)
    return px_kc_fail(__FILE__, __LINE__, "px_kc_adamw_mixed: dtype %d is not bf16 or fp16", (int)dtype);
  if (n <= 0) return PX_OK;
  float bc1, bc2;
  corrections(beta1, beta2, t, &bc1, &bc2);
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  if (dtype == PX_DTYPE_BF16)
    adamw_mixed_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(master, m, v, (const __nv_bfloat16 *)grad,
                                                             (__nv_bfloat16 *)param, n, lr, beta1, beta2, eps,
                                                             weight_decay, grad_scale, bc1, bc2);
  else
    adamw_mixed_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(master, m, v, (const __half *)grad, (__half *)param, n,
                                                             lr, beta1, beta2, eps, weight_decay, grad_scale, bc1, bc2);
  return PX_KC_LAUNCHED("adamw_mixed_kernel");
}
