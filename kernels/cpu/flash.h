/* Causal GQA attention fused with its softmax and dropout (FlashAttention):
 * softmax(scale q k^T) v a tile of queries x keys at a time with an online
 * softmax, so the (S, S) probabilities never exist; the backward recomputes
 * them from the forward's row log-sum-exp. One batch row per call (the
 * caller knows each row's dropout offset). fp32; the CUDA twin is
 * kernels/cuda/flash.h. */

/* Query head h reads kv head h / (Hq / Hkv); Hq % Hkv == 0; scale = 1/sqrt(D).
 * Dropout of the probabilities with rate p: element (t, s) of query head h is
 * kept when px_dropout_keep(seed, off + (h S + t) S + s, p) and then scaled by
 * 1 / (1 - p); the log-sum-exp is that of the probabilities before dropout. */
#ifndef PX_KERNELS_CPU_FLASH_H
#define PX_KERNELS_CPU_FLASH_H

#include <stdint.h>

/* Writes ctx and lse. */
void px_k_flash_fwd(float *ctx,     // (S, Hq, D)
                    float *lse,     // (Hq, S)
                    const float *q, // (S, Hq, D)
                    const float *k, // (S, Hkv, D)
                    const float *v, // (S, Hkv, D)
                    int64_t s, int64_t hq, int64_t hkv, int64_t d, float p, uint64_t seed, uint64_t off);

/* dq, dk, dv += the gradients of ctx given dctx. ACCUMULATES. ctx and lse
 * are the forward's outputs. */
void px_k_flash_bwd(float *dq,         // (S, Hq, D)
                    float *dk,         // (S, Hkv, D)
                    float *dv,         // (S, Hkv, D)
                    const float *dctx, // (S, Hq, D)
                    const float *q,    // (S, Hq, D)
                    const float *k,    // (S, Hkv, D)
                    const float *v,    // (S, Hkv, D)
                    const float *ctx,  // (S, Hq, D)
                    const float *lse,  // (Hq, S)
                    int64_t s, int64_t hq, int64_t hkv, int64_t d, float p, uint64_t seed, uint64_t off);

#endif
