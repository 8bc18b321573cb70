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

#ifdef __cplusplus
}
#endif

#endif
