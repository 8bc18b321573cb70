/* AdamW, one element per thread. */
#include "kernels/cuda/adamw.h"

#include <math.h>

static __global__ void adamw_kernel(float *param, float *m, float *v, const float *grad, int64_t n, float lr,
                                    float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2) {
  PX_KC_FOR(i, n) {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    param[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param[i]);
  }
}

extern "C" px_status px_kc_adamw(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1,
                                 float beta2, float eps, float weight_decay, int64_t t, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
  float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
  adamw_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(param, m, v, grad, n, lr, beta1, beta2,
                                                                             eps, weight_decay, bc1, bc2);
  return PX_KC_LAUNCHED("adamw_kernel");
}
