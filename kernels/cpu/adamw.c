/* AdamW step; the bias corrections are computed once per call in double.
 * The loop vectorises (PX_K_SIMD: sqrtf inlines as an instruction). */
#include "kernels/cpu/adamw.h"

#include <math.h>

#include "kernels/cpu/par.h"
#include "kernels/math.h"

typedef struct {
  float *param, *m, *v;
  const float *grad;
  float lr, beta1, beta2, eps, weight_decay, bc1, bc2;
} adamw_args;

PX_K_SIMD static void adamw_range(void *ctx, int64_t lo, int64_t hi) {
  const adamw_args *a = ctx;
  for (int64_t i = lo; i < hi; i++)
    px_adamw_update(&a->param[i], &a->m[i], &a->v[i], a->grad[i], a->lr, a->beta1, a->beta2, a->eps, a->weight_decay,
                    a->bc1, a->bc2);
}

/* Split over the kernels' threads (kernels/cpu/par.h); each element on its own. */
void px_k_adamw(float *param, float *m, float *v, const float *grad, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t t) {
  adamw_args a = {param, m, v, grad, lr, beta1, beta2, eps, weight_decay,
                  (float)(1.0 - pow((double)beta1, (double)t)), (float)(1.0 - pow((double)beta2, (double)t))};
  px_k_parallel_for(n, 65536, adamw_range, &a);
}
