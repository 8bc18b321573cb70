/* Causal self-attention with grouped-query heads, in three ops as Megatron
 * splits it: scores = scale Q K^T, causal softmax, context = probs V; each with
 * its backward. */
#ifndef PX_KERNELS_CPU_ATTENTION_H
#define PX_KERNELS_CPU_ATTENTION_H

#include <stdint.h>

/* Query head h reads kv head h / (Hq / Hkv), and Hq % Hkv == 0 (GQA; Hkv = Hq
 * is multi-head, Hkv = 1 multi-query). T, D and Hq * D fit in an int (cblas). */

/* scores[b, h, t, s] = scale * q[b, t, h] . k[b, s, h / (Hq/Hkv)] for s <= t;
 * entries above the diagonal (s > t) are set to 0 (the softmax ignores them).
 * Writes scores. */
void px_k_attn_scores_fwd(float *scores,   // (B, Hq, T, T)
                          const float *q,  // (B, T, Hq, D)
                          const float *k,  // (B, T, Hkv, D)
                          int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale);

/* Backward: dq += scale dscores K, dk += scale dscores^T Q (several query heads
 * add into one kv head). ACCUMULATES (the caller zeroes dq and dk). The upper
 * triangle of dscores must be 0, as it is after px_k_attn_softmax_bwd into a
 * zeroed buffer. */
void px_k_attn_scores_bwd(float *dq,            // (B, T, Hq, D)
                          float *dk,            // (B, T, Hkv, D)
                          const float *dscores, // (B, Hq, T, T)
                          const float *q,       // (B, T, Hq, D)
                          const float *k,       // (B, T, Hkv, D)
                          int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale);

/* Causal softmax of each row t over columns s <= t (with a sliding window > 0,
 * only t - window < s <= t); the other columns get exactly 0. Writes probs;
 * probs may alias scores (in place). bh = B * Hq. */
void px_k_attn_softmax_fwd(float *probs,        // (B, Hq, T, T)
                           const float *scores, // (B, Hq, T, T)
                           int64_t bh, int64_t t, int64_t window);

/* Backward: dscores += probs * (dprobs - sum_s dprobs * probs) on the columns
 * the forward saw; the others of dscores are left untouched and those of
 * dprobs are not read. ACCUMULATES (the caller zeroes dscores). */
void px_k_attn_softmax_bwd(float *dscores,      // (B, Hq, T, T)
                           const float *dprobs, // (B, Hq, T, T)
                           const float *probs,  // (B, Hq, T, T)
                           int64_t bh, int64_t t, int64_t window);

/* The same with attention sinks (gpt-oss): sinks[h] (Hq) is one more logit in
 * every row of query head h (bh = B * Hq), in the denominator only (the sink
 * has no value); its probability is 1 - the row's. */
void px_k_attn_softmax_sink_fwd(float *probs,        // (B, Hq, T, T)
                                const float *scores, // (B, Hq, T, T)
                                const float *sinks,  // (Hq) or NULL
                                int64_t bh, int64_t hq, int64_t t, int64_t window);

/* Its backward: dscores as px_k_attn_softmax_bwd, and dsinks[h] -= the sum
 * over head h's rows of p_sink (dprobs . probs). ACCUMULATES (dsinks NULL:
 * without sinks). */
void px_k_attn_softmax_sink_bwd(float *dscores,      // (B, Hq, T, T)
                                float *dsinks,       // (Hq) or NULL
                                const float *dprobs, // (B, Hq, T, T)
                                const float *probs,  // (B, Hq, T, T)
                                int64_t bh, int64_t hq, int64_t t, int64_t window);

/* ctx[b, t, h] = sum_s probs[b, h, t, s] v[b, s, h / (Hq/Hkv)]. The upper
 * triangle of probs must be 0 (px_k_attn_softmax_fwd makes it so). Writes ctx. */
void px_k_attn_context_fwd(float *ctx,         // (B, T, Hq, D)
                           const float *probs, // (B, Hq, T, T)
                           const float *v,     // (B, T, Hkv, D)
                           int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d);

/* Backward: dprobs += dctx V^T, dv += probs^T dctx (several query heads add
 * into one kv head, in head order). ACCUMULATES (the caller zeroes dprobs and
 * dv). dprobs' upper triangle receives values no one needs; the softmax
 * backward does not read them. */
void px_k_attn_context_bwd(float *dprobs,      // (B, Hq, T, T)
                           float *dv,          // (B, T, Hkv, D)
                           const float *dctx,  // (B, T, Hq, D)
                           const float *probs, // (B, Hq, T, T)
                           const float *v,     // (B, T, Hkv, D)
                           int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d);

#endif
