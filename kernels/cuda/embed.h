/* Token embedding over a vocabulary shard and learned positions on the GPU;
 * the twins of kernels/cpu/embed.h (same ownership rule, same accumulation
 * order in the backwards, so their results equal the CPU's bit for bit). */
#ifndef PX_KERNELS_CUDA_EMBED_H
#define PX_KERNELS_CUDA_EMBED_H

#include <stdint.h>

#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = table[tokens[i] - vocab_start] when this shard owns tokens[i], else
 * zeros. Writes out. Negative tokens are owned by no shard. */
px_status px_kc_embed_fwd(float *out,            // (N, C)
                          const int32_t *tokens, // (N)
                          const float *table,    // (Vl, C)
                          int64_t n, int64_t vocab_start, int64_t vl, int64_t c, cudaStream_t stream);

/* ACCUMULATES dtable[tokens[i] - vocab_start] += dout[i] for owned tokens, in
 * row order for every table element (deterministic, no atomics). */
px_status px_kc_embed_bwd(float *dtable,         // (Vl, C)
                          const float *dout,     // (N, C)
                          const int32_t *tokens, // (N)
                          int64_t n, int64_t vocab_start, int64_t vl, int64_t c, cudaStream_t stream);

/* out[b, t] += wpe[pos0 + t]. */
px_status px_kc_pos_fwd(float *out,       // (B, T, C)
                        const float *wpe, // (max_positions, C)
                        int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);

/* ACCUMULATES dwpe[pos0 + t] += sum over b of dout[b, t] (b in order). */
px_status px_kc_pos_bwd(float *dwpe,       // (max_positions, C)
                        const float *dout, // (B, T, C)
                        int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);

/* bf16 table and output (a copy, no rounding). */
px_status px_kc_embed_fwd_bf16(px_bf16 *out,          // (N, C)
                               const int32_t *tokens, // (N)
                               const px_bf16 *table,  // (Vl, C)
                               int64_t n, int64_t vocab_start, int64_t vl, int64_t c, cudaStream_t stream);
px_status px_kc_embed_fwd_fp16(px_fp16 *out,          // (N, C)
                               const int32_t *tokens, // (N)
                               const px_fp16 *table,  // (Vl, C)
                               int64_t n, int64_t vocab_start, int64_t vl, int64_t c, cudaStream_t stream);

/* bf16 dwpe and dout: each dwpe element summed in fp32 from its old value in
 * b order and rounded once (the fp32 kernel's result, rounded). ACCUMULATES. */
px_status px_kc_pos_bwd_bf16(px_bf16 *dwpe,       // (max_positions, C)
                             const px_bf16 *dout, // (B, T, C)
                             int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);
px_status px_kc_pos_bwd_fp16(px_fp16 *dwpe,       // (max_positions, C)
                             const px_fp16 *dout, // (B, T, C)
                             int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);

/* Host: the positions of the tokens this shard owns grouped by table row,
 * stably (token order within a row), for px_kc_embed_bwd_sorted_bf16:
 * sorted = [rows (R, increasing) | starts (R + 1) | ... | order at 2N + 1
 * (starts[R] entries)], 3N + 1 int32s. Returns R, or -1 when out of memory. */
int64_t px_kc_embed_sort(int32_t *sorted,       // (3N + 1)
                         const int32_t *tokens, // (N)
                         int64_t n, int64_t vocab_start, int64_t vl);

/* bf16 embedding backward from px_kc_embed_sort's output (copied to the
 * device): each touched dtable element summed in fp32 from its old value in
 * token order and rounded once, so the result is the fp32 kernel's, rounded.
 * No fp32 copy of the table. ACCUMULATES. */
px_status px_kc_embed_bwd_sorted_bf16(px_bf16 *dtable,       // (Vl, C)
                                      const px_bf16 *dout,   // (N, C)
                                      const int32_t *sorted, // (3N + 1) device
                                      int64_t nrows, int64_t n, int64_t c, cudaStream_t stream);
px_status px_kc_embed_bwd_sorted_fp16(px_fp16 *dtable,       // (Vl, C)
                                      const px_fp16 *dout,   // (N, C)
                                      const int32_t *sorted, // (3N + 1) device
                                      int64_t nrows, int64_t n, int64_t c, cudaStream_t stream);

/* bf16 out and wpe: out = bf16(out + wpe), added in fp32. */
px_status px_kc_pos_fwd_bf16(px_bf16 *out,       // (B, T, C)
                             const px_bf16 *wpe, // (max_positions, C)
                             int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);
px_status px_kc_pos_fwd_fp16(px_fp16 *out,       // (B, T, C)
                             const px_fp16 *wpe, // (max_positions, C)
                             int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
