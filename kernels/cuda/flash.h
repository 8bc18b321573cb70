/* Causal GQA attention fused with its softmax and dropout (FlashAttention) on
 * the GPU: the CUDA twin of kernels/cpu/flash.h, with the same contract (query
 * head h reads kv head h / (Hq / Hkv), scale 1/sqrt(D), query t sees keys
 * s <= t, and with a sliding window (window > 0) only s > t - window, element
 * (t, s) of head h kept when px_dropout_keep(seed, off + (h S + t) S + s, p)),
 * B batch rows of S tokens in one launch (the grid's z), one only where p > 0
 * (each row has its own dropout offset), in fp32 arithmetic on FP32, BF16 or FP16
 * tensors (lse is always fp32). D <= 256. BF16/FP16 with D in {16, 32, 64,
 * 128} and every tensor 16-byte aligned run on tensor cores (P and dS rounded
 * to the 16-bit type for the second products), the rest on CUDA cores.
 * Deterministic: no atomics, each output element is summed by one thread in
 * a fixed order. */
#ifndef PX_KERNELS_CUDA_FLASH_H
#define PX_KERNELS_CUDA_FLASH_H

#include <stdint.h>

#include "core/dtype.h"
#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest head dimension the kernels take. */
#define PX_KC_FLASH_MAX_D 256

/* Writes ctx and lse. */
px_status px_kc_flash_fwd(void *ctx,     // (B, S, Hq, D) dtype
                          float *lse,    // (B, Hq, S)
                          const void *q, // (B, S, Hq, D) dtype
                          const void *k, // (B, S, Hkv, D) dtype
                          const void *v, // (B, S, Hkv, D) dtype
                          px_dtype dtype, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t window,
                          float p, uint64_t seed, uint64_t off, cudaStream_t stream);

/* dq, dk, dv += the gradients of ctx given dctx. ACCUMULATES. Two kernels:
 * one over key tiles (dk, dv; summing the kv head's query heads), one over
 * query tiles (dq); each recomputes the probabilities from lse. */
px_status px_kc_flash_bwd(void *dq,         // (B, S, Hq, D) dtype
                          void *dk,         // (B, S, Hkv, D) dtype
                          void *dv,         // (B, S, Hkv, D) dtype
                          const void *dctx, // (B, S, Hq, D) dtype
                          const void *q,    // (B, S, Hq, D) dtype
                          const void *k,    // (B, S, Hkv, D) dtype
                          const void *v,    // (B, S, Hkv, D) dtype
                          const void *ctx,  // (B, S, Hq, D) dtype
                          const float *lse, // (B, Hq, S)
                          px_dtype dtype, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t window,
                          float p, uint64_t seed, uint64_t off, cudaStream_t stream);

/* Attention sinks (gpt-oss), after px_kc_flash_fwd: folds sinks[h], one more
 * logit of every row of query head h with no value, into lse and ctx as
 * kernels/cpu/flash.h's px_k_flash_sink_fold: lse' = log(e^lse + e^sink),
 * ctx *= e^(lse - lse') (a row that saw no key: lse' = sink, ctx 0). The
 * backward then takes the folded ctx and lse as they are. */
px_status px_kc_flash_sink_fold(void *ctx,         // (B, S, Hq, D) dtype
                                float *lse,        // (B, Hq, S)
                                const void *sinks, // (Hq) dtype
                                px_dtype dtype, int64_t b, int64_t s, int64_t hq, int64_t d, cudaStream_t stream);

/* Each row's share of its sink's gradient, of a forward folded with sinks:
 * terms = -p_sink (dctx . ctx), p_sink = 1 - the probability of the keys the
 * row sees (recomputed from q, k and lse), 0 for a row that saw no key.
 * Writes terms; px_kc_sink_grad sums them per head. */
px_status px_kc_flash_sink_rows(float *terms,     // (B, Hq, S)
                                const void *dctx, // (B, S, Hq, D) dtype
                                const void *q,    // (B, S, Hq, D) dtype
                                const void *k,    // (B, S, Hkv, D) dtype
                                const void *ctx,  // (B, S, Hq, D) dtype
                                const float *lse, // (B, Hq, S)
                                px_dtype dtype, int64_t b, int64_t s, int64_t hq, int64_t hkv, int64_t d,
                                int64_t window, cudaStream_t stream);

/* dsink[h] += the sum over b and t of terms[b, h, t], a block per head in a
 * fixed order (deterministic), in fp32, one rounding to dtype. ACCUMULATES.
 * The fused (px_kc_flash_sink_rows) and the unfused attention's
 * (px_kc_attn_softmax_sink_bwd) sinks' gradient. */
px_status px_kc_sink_grad(void *dsink,        // (Hq) dtype
                          const float *terms, // (B, Hq, S)
                          px_dtype dtype, int64_t b, int64_t hq, int64_t s, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
