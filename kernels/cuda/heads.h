/* One attention head in and out of a (S, H, D) row block: what the fused
 * attention of the CUDA backend works on, a head at a time, in an fp32
 * workspace (the CPU backend's head_get / head_add twins). */
#ifndef PX_KERNELS_CUDA_HEADS_H
#define PX_KERNELS_CUDA_HEADS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[t, i] = src[t, head, i], widened to fp32. src_dtype: FP32 or BF16. */
px_status px_kc_head_get(float *dst,      // (S, D)
                         const void *src, // (S, H, D)
                         px_dtype src_dtype, int64_t s, int64_t h, int64_t d, int64_t head, cudaStream_t stream);

/* dst[t, head, i] = src[t, i], or += when accumulate; rounded once to
 * dst_dtype (FP32 or BF16). */
px_status px_kc_head_put(void *dst,        // (S, H, D)
                         const float *src, // (S, D)
                         px_dtype dst_dtype, int64_t s, int64_t h, int64_t d, int64_t head, bool accumulate,
                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
