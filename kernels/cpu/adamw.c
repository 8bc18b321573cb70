/* AdamW step; the bias corrections are computed once per call in double. */
#include "kernels/cpu/adamw.h"

#include <math.h>

void px_k_adamw(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t t) {
  float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
  float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
  for (int64_t i = 0; i < n; i++) {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    param[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param[i]);
  }
}
