/* Cross-entropy over a vocabulary shard, in pieces so the caller can all-reduce
 * across the tensor-parallel group between them (Megatron's vocab-parallel loss). */
#ifndef PX_KERNELS_CPU_LOSS_H
#define PX_KERNELS_CPU_LOSS_H

#include <stdint.h>

/* A shard holds logits for global columns [vocab_start, vocab_start + Vl).
 * Columns whose global index is >= vocab_real (vocabulary padding) count as
 * -inf: they are left out of the max and the sum and get zero gradient.
 * Targets are global token ids in [0, vocab_real), or -1 for "ignore this
 * position" (zero loss, zero gradient). Per position, in order:
 *   1. px_k_ce_max_local           then all-reduce MAX -> gmax
 *   2. px_k_ce_sumexp_local (gmax) then all-reduce SUM -> gsum
 *   3. px_k_ce_target_local        then all-reduce SUM -> tlogit (any time before 4)
 *   4. px_k_ce_loss, and px_k_ce_bwd for the gradient. */

/* maxes[i] = max over this shard's real columns of logits[i] (-inf when the
 * shard has none). Writes maxes. */
void px_k_ce_max_local(float *maxes,        // (N)
                       const float *logits, // (N, Vl)
                       int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real);

/* sums[i] = sum over this shard's real columns of exp(logits[i] - gmax[i]),
 * accumulated in double. Writes sums. */
void px_k_ce_sumexp_local(float *sums,          // (N)
                          const float *logits,  // (N, Vl)
                          const float *gmax,    // (N) global row max
                          int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real);

/* tlogit[i] = logits[i, targets[i] - vocab_start] when this shard owns
 * targets[i], else 0 (also for ignored targets). Writes tlogit. */
void px_k_ce_target_local(float *tlogit,          // (N)
                          const float *logits,    // (N, Vl)
                          const int32_t *targets, // (N)
                          int64_t n, int64_t vocab_start, int64_t vl);

/* losses[i] = log(gsum[i]) + gmax[i] - tlogit[i], or 0 where targets[i] = -1.
 * Writes losses. Rank-independent: every rank of the group gets the same. */
void px_k_ce_loss(float *losses,          // (N)
                  const float *gmax,      // (N) global row max
                  const float *gsum,      // (N) global sum of exp(logit - gmax)
                  const float *tlogit,    // (N) global target logit
                  const int32_t *targets, // (N)
                  int64_t n);

/* dlogits[i, j] = (softmax[i, j] - [j is the target]) * dloss_scale, with the
 * softmax from the global max and sum; 0 in padded columns and in rows whose
 * target is -1. WRITES dlogits (does not accumulate); dlogits may alias logits
 * (in place). dloss_scale is d(total loss)/d(loss_i), e.g. 1 / (valid tokens). */
void px_k_ce_bwd(float *dlogits,         // (N, Vl)
                 const float *logits,    // (N, Vl)
                 const float *gmax,      // (N)
                 const float *gsum,      // (N)
                 const int32_t *targets, // (N)
                 int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, float dloss_scale);

/* Log-probabilities from the global row max and sum: out = logits - gmax -
 * log(gsum), for saving in place of the logits; out may alias logits. Then
 * px_k_ce_bwd(dlogits, out, zeros, ones, ...) gives the gradient. */
void px_k_ce_logprobs(float *out,          // (N, Vl)
                      const float *logits, // (N, Vl)
                      const float *gmax,   // (N)
                      const float *gsum,   // (N)
                      int64_t n, int64_t vl);

#endif
