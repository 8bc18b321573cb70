/* Causal GQA attention fused with its softmax and dropout (FlashAttention):
 * softmax(scale q k^T) v a tile of queries x keys at a time with an online
 * softmax, so the (S, S) probabilities never exist; the backward recomputes
 * them from the forward's row log-sum-exp. One batch row per call (the
 * caller knows each row's dropout offset), on a block of queries against a
 * block of keys at any global positions, so that context parallelism (ring
 * attention, gathered K/V) runs the same kernel per block and merges the
 * partial results (px_k_flash_merge). fp32; the CUDA twin, kernels/cuda/flash.h,
 * takes whole sequences only (no positions) so far. */

/* Query head h reads kv head h / (Hq / Hkv); Hq % Hkv == 0; scale = 1/sqrt(D).
 * q has Sq rows at global positions qpos[i] (NULL: 0..Sq-1), k and v have Sk
 * rows at kpos[j] (NULL: 0..Sk-1), in any order; query i sees key j when
 * kpos[j] <= qpos[i] (causal by position) and, with a sliding window > 0,
 * kpos[j] > qpos[i] - window (the window tokens up to its own). Dropout of the probabilities with
 * rate p: element (i, j) of query head h is kept when
 * px_dropout_keep(seed, off + (h S_full + qpos[i]) S_full + kpos[j], p) and
 * then scaled by 1 / (1 - p), S_full being the sequence length the indices
 * count in; the log-sum-exp is that of the probabilities before dropout.
 * With NULL positions and Sq = Sk = S_full this is whole-sequence attention. */
#ifndef PX_KERNELS_CPU_FLASH_H
#define PX_KERNELS_CPU_FLASH_H

#include <stdint.h>

/* Writes ctx and lse; a row that sees no key gets ctx 0 and lse -INFINITY. */
void px_k_flash_fwd(float *ctx,     // (Sq, Hq, D)
                    float *lse,     // (Hq, Sq)
                    const float *q, // (Sq, Hq, D)
                    const float *k, // (Sk, Hkv, D)
                    const float *v, // (Sk, Hkv, D)
                    int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
                    const int32_t *qpos, // (Sq) or NULL
                    const int32_t *kpos, // (Sk) or NULL
                    int64_t window, int64_t s_full, float p, uint64_t seed, uint64_t off);

/* px_k_flash_fwd with values (and the context) of head dim dval, the queries
 * and keys of d (latent attention: nope + rope against v_head_dim); the
 * scale stays 1/sqrt(d). */
void px_k_flash_fwd_dv(float *ctx,     // (Sq, Hq, dval)
                       float *lse,     // (Hq, Sq)
                       const float *q, // (Sq, Hq, D)
                       const float *k, // (Sk, Hkv, D)
                       const float *v, // (Sk, Hkv, dval)
                       int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, int64_t dval,
                       const int32_t *qpos, const int32_t *kpos, int64_t window, int64_t s_full, float p,
                       uint64_t seed, uint64_t off);

/* Merges the partial result (ctx2, lse2) of another key block into (ctx, lse),
 * the online-softmax rule: lse' = log(e^lse + e^lse2),
 * ctx' = ctx e^(lse - lse') + ctx2 e^(lse2 - lse'). A row where lse2 is
 * -INFINITY is left as it is (both -INFINITY: ctx 0, lse -INFINITY). */
void px_k_flash_merge(float *ctx,        // (Sq, Hq, D)
                      float *lse,        // (Hq, Sq)
                      const float *ctx2, // (Sq, Hq, D)
                      const float *lse2, // (Hq, Sq)
                      int64_t sq, int64_t hq, int64_t d);

/* dq, dk, dv += the gradients of ctx given dctx, for this key block.
 * ACCUMULATES. ctx and lse are the final forward outputs over all key blocks
 * (after every merge), so the sums over key blocks of dq (and over query
 * blocks of dk, dv) are the backward of the whole; a row whose lse is
 * -INFINITY contributes nothing. */
void px_k_flash_bwd(float *dq,         // (Sq, Hq, D)
                    float *dk,         // (Sk, Hkv, D)
                    float *dv,         // (Sk, Hkv, D)
                    const float *dctx, // (Sq, Hq, D)
                    const float *q,    // (Sq, Hq, D)
                    const float *k,    // (Sk, Hkv, D)
                    const float *v,    // (Sk, Hkv, D)
                    const float *ctx,  // (Sq, Hq, D)
                    const float *lse,  // (Hq, Sq)
                    int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
                    const int32_t *qpos, // (Sq) or NULL
                    const int32_t *kpos, // (Sk) or NULL
                    int64_t window, int64_t s_full, float p, uint64_t seed, uint64_t off);

/* px_k_flash_bwd that also adds each row's probability over this block's
 * keys into seen (Hq, Sq; ACCUMULATES; NULL: not): a sink's share of a row
 * is 1 - its sum over every key block, so the ring's blocks, one call each,
 * leave what px_k_flash_sink_bwd needs. */
void px_k_flash_bwd_seen(float *dq, float *dk, float *dv,
                         float *seen, // (Hq, Sq) or NULL
                         const float *dctx, const float *q, const float *k, const float *v, const float *ctx,
                         const float *lse, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d,
                         const int32_t *qpos, const int32_t *kpos, int64_t window, int64_t s_full, float p,
                         uint64_t seed, uint64_t off);

/* The sinks' gradient from every key block's seen (px_k_flash_bwd_seen):
 * dsink[h] -= the sum over head h's rows of (1 - seen) (dctx . ctx), as
 * px_k_flash_bwd_dv's dsink of one call over all the keys. ACCUMULATES. */
void px_k_flash_sink_bwd(float *dsink,      // (Hq)
                         const float *seen, // (Hq, Sq)
                         const float *dctx, // (Sq, Hq, D)
                         const float *ctx,  // (Sq, Hq, D)
                         const float *lse,  // (Hq, Sq)
                         int64_t sq, int64_t hq, int64_t d);

/* Attention sinks (gpt-oss): folds sinks[h] (Hq), one more logit of every
 * row of query head h with no value, into a finished forward: lse' =
 * log(e^lse + e^sink), ctx' = ctx e^(lse - lse') (a row that saw no key: ctx
 * 0, lse' = sink). After every key block's merge (the ring's too). */
void px_k_flash_sink_fold(float *ctx,         // (Sq, Hq, D)
                          float *lse,         // (Hq, Sq)
                          const float *sinks, // (Hq)
                          int64_t sq, int64_t hq, int64_t d);

/* px_k_flash_bwd with values, the context and their gradients of head dim
 * dval (px_k_flash_fwd_dv), of a forward folded with sinks or not (its lse
 * the folded one, which is all dq, dk and dv need), and with sinks' dsink[h]
 * -= the sum over head h's rows of p_sink (dctx . ctx), p_sink = 1 - the
 * probability of the keys the row sees: every key block at once (a ring's
 * blocks: px_k_flash_bwd_seen). dsink (Hq) ACCUMULATES; NULL: no sinks. */
void px_k_flash_bwd_dv(float *dq, float *dk, float *dv,
                         float *dsink, // (Hq) or NULL
                         const float *dctx, const float *q, const float *k, const float *v, const float *ctx,
                         const float *lse, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, int64_t dval,
                         const int32_t *qpos, const int32_t *kpos, int64_t window, int64_t s_full, float p,
                         uint64_t seed, uint64_t off);

#endif
