/* Causal GQA self-attention on the GPU in the three ops of
 * kernels/cpu/attention.h (scores = scale Q K^T, causal softmax, context =
 * probs V), each with its backward and the same write/accumulate contract. */

/* Query head h reads kv head h / (Hq / Hkv); Hq % Hkv == 0. fp32. */
#ifndef PX_KERNELS_CUDA_ATTENTION_H
#define PX_KERNELS_CUDA_ATTENTION_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* scores[b, h, t, s] = scale * q[b, t, h] . k[b, s, h / (Hq/Hkv)] for s <= t,
 * 0 above the diagonal. Writes scores. */
px_status px_kc_attn_scores_fwd(float *scores,  // (B, Hq, T, T)
                                const float *q, // (B, T, Hq, D)
                                const float *k, // (B, T, Hkv, D)
                                int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale,
                                cudaStream_t stream);

/* dq += scale dscores K, dk += scale dscores^T Q. ACCUMULATES. The upper
 * triangle of dscores must be 0 (it is not read). */
px_status px_kc_attn_scores_bwd(float *dq,            // (B, T, Hq, D)
                                float *dk,            // (B, T, Hkv, D)
                                const float *dscores, // (B, Hq, T, T)
                                const float *q,       // (B, T, Hq, D)
                                const float *k,       // (B, T, Hkv, D)
                                int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, float scale,
                                cudaStream_t stream);

/* Causal softmax of each row t over columns s <= t (and, with a sliding window
 * (window > 0), s > t - window); the other columns get exactly 0. Writes
 * probs; probs may alias scores. bh = B * Hq. */
px_status px_kc_attn_softmax_fwd(float *probs,        // (B, Hq, T, T)
                                 const float *scores, // (B, Hq, T, T)
                                 int64_t bh, int64_t t, int64_t window, cudaStream_t stream);

/* The same with attention sinks (gpt-oss): sinks[h] (Hq) is one more logit
 * in every row of query head h (bh = B * Hq), in the denominator only (no
 * value). sinks NULL: px_kc_attn_softmax_fwd. */
px_status px_kc_attn_softmax_sink_fwd(float *probs,        // (B, Hq, T, T)
                                      const float *scores, // (B, Hq, T, T)
                                      const float *sinks,  // (Hq) or NULL
                                      int64_t bh, int64_t hq, int64_t t, int64_t window, cudaStream_t stream);

/* dscores += probs * (dprobs - sum_s dprobs * probs) on the columns row t
 * sees (as the forward's); the others of dscores are untouched and dprobs'
 * are not read. ACCUMULATES. */
px_status px_kc_attn_softmax_bwd(float *dscores,      // (B, Hq, T, T)
                                 const float *dprobs, // (B, Hq, T, T)
                                 const float *probs,  // (B, Hq, T, T)
                                 int64_t bh, int64_t t, int64_t window, cudaStream_t stream);

/* Its backward with sinks: dscores as px_kc_attn_softmax_bwd, and each row's
 * share of its sink's gradient, -p_sink (dprobs . probs) with p_sink = 1 -
 * the row's probabilities, written to terms (px_kc_sink_grad of
 * kernels/cuda/flash.h sums them per head). terms NULL: without sinks. */
px_status px_kc_attn_softmax_sink_bwd(float *dscores,      // (B, Hq, T, T)
                                      float *terms,        // (B, Hq, T) or NULL
                                      const float *dprobs, // (B, Hq, T, T)
                                      const float *probs,  // (B, Hq, T, T)
                                      int64_t bh, int64_t t, int64_t window, cudaStream_t stream);

/* ctx[b, t, h] = sum_s probs[b, h, t, s] v[b, s, h / (Hq/Hkv)]. The upper
 * triangle of probs must be 0 (it is not read). Writes ctx. */
px_status px_kc_attn_context_fwd(float *ctx,         // (B, T, Hq, D)
                                 const float *probs, // (B, Hq, T, T)
                                 const float *v,     // (B, T, Hkv, D)
                                 int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, cudaStream_t stream);

/* dprobs += dctx V^T, dv += probs^T dctx. ACCUMULATES. Only the lower triangle
 * (s <= t) of dprobs is guaranteed: 64 x 64 tiles wholly above the diagonal are
 * skipped, so unlike the CPU some upper entries keep their old value (no one
 * reads them: the softmax backward does not). */
px_status px_kc_attn_context_bwd(float *dprobs,      // (B, Hq, T, T)
                                 float *dv,          // (B, T, Hkv, D)
                                 const float *dctx,  // (B, T, Hq, D)
                                 const float *probs, // (B, Hq, T, T)
                                 const float *v,     // (B, T, Hkv, D)
                                 int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
