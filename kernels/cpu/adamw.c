/* AdamW step; the bias corrections are computed once per call in double. */
#include "kernels/cpu/adamw.h"

#include <math.h>

#include "kernels/math.h"

void px_k_adamw(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t t) {
  float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
  float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
  for (int64_t i = 0; i < n; i++)
    px_adamw_update(&param[i], &m[i], &v[i], grad[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}
