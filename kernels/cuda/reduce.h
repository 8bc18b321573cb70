/* Whole-buffer helpers on the GPU: sum of squares (gradient-norm clipping),
 * scale, add and the residual accumulate; the twins of kernels/cpu/reduce.h. */
#ifndef PX_KERNELS_CUDA_REDUCE_H
#define PX_KERNELS_CUDA_REDUCE_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *out = sum of x[i]^2, accumulated in double. The result stays on the device
 * (no synchronization). Deterministic: a fixed partition that depends only on
 * n, so the same input gives the same bits; it differs from the CPU's
 * index-order sum only by double rounding. Uses a stream-ordered temporary
 * (cudaMallocAsync) of at most 8 KiB. n <= 0 writes 0. */
px_status px_kc_sumsq(double *out,     // (1) device
                      const float *x,  // (n)
                      int64_t n, cudaStream_t stream);
/* The same of bf16 or fp16 elements (each widened exactly; an inf or NaN
 * gives inf or NaN: the loss scaler's overflow test). */
px_status px_kc_sumsq_bf16(double *out,      // (1) device
                           const px_bf16 *x, // (n)
                           int64_t n, cudaStream_t stream);
px_status px_kc_sumsq_fp16(double *out,   // (1) device
                           const void *x, // (n) fp16
                           int64_t n, cudaStream_t stream);

/* x[r, j] += bias[j] for every row r (the bias of a row-parallel layer, added
 * after its all-reduce). bf16: added in fp32, rounded once. */
px_status px_kc_add_bias(float *x,          // (rows, c)
                         const float *bias, // (c)
                         int64_t rows, int64_t c, cudaStream_t stream);
px_status px_kc_add_bias_bf16(px_bf16 *x,          // (rows, c)
                              const px_bf16 *bias, // (c)
                              int64_t rows, int64_t c, cudaStream_t stream);
px_status px_kc_add_bias_fp16(px_fp16 *x,          // (rows, c)
                              const px_fp16 *bias, // (c)
                              int64_t rows, int64_t c, cudaStream_t stream);

/* x *= s, in place. */
px_status px_kc_scale(float *x, // (n)
                      int64_t n, float s, cudaStream_t stream);

/* out = a + b. Writes out; out may alias a or b. */
px_status px_kc_add(float *out,     // (n)
                    const float *a, // (n)
                    const float *b, // (n)
                    int64_t n, cudaStream_t stream);

/* out += inp. ACCUMULATES; out must not partially overlap inp. */
px_status px_kc_acc(float *out,       // (n)
                    const float *inp, // (n)
                    int64_t n, cudaStream_t stream);

/* bf16 storage, fp32 math, one rounding per result. */
px_status px_kc_add_bf16(px_bf16 *out,     // (n)
                         const px_bf16 *a, // (n)
                         const px_bf16 *b, // (n)
                         int64_t n, cudaStream_t stream);
px_status px_kc_add_fp16(px_fp16 *out,     // (n)
                         const px_fp16 *a, // (n)
                         const px_fp16 *b, // (n)
                         int64_t n, cudaStream_t stream);
px_status px_kc_acc_bf16(px_bf16 *out,       // (n)
                         const px_bf16 *inp, // (n)
                         int64_t n, cudaStream_t stream);
px_status px_kc_acc_fp16(px_fp16 *out,       // (n)
                         const px_fp16 *inp, // (n)
                         int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
