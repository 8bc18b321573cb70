/* Vocabulary-parallel cross-entropy on the GPU, in the pieces of
 * kernels/cpu/loss.h (the caller all-reduces between them): local max, local
 * sum of exponentials, local target logit, loss, and the logits' gradient. */

/* Padded columns (global index >= vocab_real) count as -inf; target -1 means
 * "ignore this position"; the order of calls is the one loss.h gives. */
#ifndef PX_KERNELS_CUDA_LOSS_H
#define PX_KERNELS_CUDA_LOSS_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* maxes[i] = max over this shard's real columns of logits[i] (-inf when none). Writes maxes. */
px_status px_kc_ce_max_local(float *maxes,        // (N)
                             const float *logits, // (N, Vl)
                             int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, cudaStream_t stream);

/* sums[i] = sum over this shard's real columns of exp(logits[i] - gmax[i]),
 * accumulated in double. Writes sums. */
px_status px_kc_ce_sumexp_local(float *sums,         // (N)
                                const float *logits, // (N, Vl)
                                const float *gmax,   // (N) global row max
                                int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, cudaStream_t stream);

/* tlogit[i] = logits[i, targets[i] - vocab_start] when this shard owns
 * targets[i], else 0 (also for ignored targets). Writes tlogit. */
px_status px_kc_ce_target_local(float *tlogit,          // (N)
                                const float *logits,    // (N, Vl)
                                const int32_t *targets, // (N)
                                int64_t n, int64_t vocab_start, int64_t vl, cudaStream_t stream);

/* losses[i] = log(gsum[i]) + gmax[i] - tlogit[i] (in double), or 0 where
 * targets[i] = -1. Writes losses. */
px_status px_kc_ce_loss(float *losses,          // (N)
                        const float *gmax,      // (N)
                        const float *gsum,      // (N)
                        const float *tlogit,    // (N)
                        const int32_t *targets, // (N)
                        int64_t n, cudaStream_t stream);

/* dlogits[i, j] = (softmax[i, j] - [j is the target]) * dloss_scale; 0 in
 * padded columns and in rows whose target is -1. WRITES dlogits; dlogits may
 * alias logits (in place). */
px_status px_kc_ce_bwd(float *dlogits,         // (N, Vl)
                       const float *logits,    // (N, Vl)
                       const float *gmax,      // (N)
                       const float *gsum,      // (N)
                       const int32_t *targets, // (N)
                       int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, float dloss_scale,
                       cudaStream_t stream);

/* Log-probabilities from the global row max and sum: out = logits - (gmax +
 * log(gsum)), the shift computed as the CPU does (log in double, rounded to
 * float); out may alias logits. */
px_status px_kc_ce_logprobs(float *out,          // (N, Vl)
                            const float *logits, // (N, Vl)
                            const float *gmax,   // (N)
                            const float *gsum,   // (N)
                            int64_t n, int64_t vl, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
