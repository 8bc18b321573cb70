/* AdamW step on the GPU over a contiguous fp32 parameter shard; the twin of
 * kernels/cpu/adamw.h (bias corrections computed once per call in double on
 * the host, exactly as the CPU does). */
#ifndef PX_KERNELS_CUDA_ADAMW_H
#define PX_KERNELS_CUDA_ADAMW_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Step t (t >= 1 on the first step):
 *   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
 *   param -= lr * (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * param)
 * Updates param, m and v in place; grad is read only. */
px_status px_kc_adamw(float *param,      // (n)
                      float *m,          // (n) first moment
                      float *v,          // (n) second moment
                      const float *grad, // (n)
                      int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                      cudaStream_t stream);

/* Mixed precision: the same step on fp32 master weights from a 16-bit
 * gradient (dtype BF16 or FP16) multiplied by grad_scale in fp32 (the
 * clipping factor over the loss scale), then param = master rounded to
 * dtype, the model's copy. */
px_status px_kc_adamw_mixed(float *master,    // (n) fp32 master weights
                            float *m,         // (n)
                            float *v,         // (n)
                            const void *grad, // (n) dtype
                            void *param,      // (n) dtype: the model's copy, written
                            px_dtype dtype, int64_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, float grad_scale, int64_t t, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
