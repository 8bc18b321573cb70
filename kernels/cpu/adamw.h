/* AdamW optimizer step (decoupled weight decay, bias correction) over a
 * contiguous parameter shard. */
#ifndef PX_KERNELS_CPU_ADAMW_H
#define PX_KERNELS_CPU_ADAMW_H

#include <stdint.h>

/* One step t (t >= 1 on the first step), per element, as in PyTorch's AdamW
 * and llm.c:
 *   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
 *   param -= lr * (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * param)
 * Updates param, m and v in place; grad is read only. */
void px_k_adamw(float *param,      // (n)
                float *m,          // (n) first moment
                float *v,          // (n) second moment
                const float *grad, // (n)
                int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t);

#endif
