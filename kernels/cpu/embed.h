/* Token embedding over a vocabulary shard (tensor parallel: each rank holds
 * rows [vocab_start, vocab_start + Vl) of the table) and learned positions. */
#ifndef PX_KERNELS_CPU_EMBED_H
#define PX_KERNELS_CPU_EMBED_H

#include <stdint.h>

/* out[i] = table[tokens[i] - vocab_start] when this shard owns tokens[i], else
 * zeros (another rank owns it; the caller all-reduces out over the tensor
 * parallel group). Writes out. Negative tokens are owned by no shard. */
void px_k_embed_fwd(float *out,            // (N, C)
                    const int32_t *tokens, // (N)
                    const float *table,    // (Vl, C)
                    int64_t n, int64_t vocab_start, int64_t vl, int64_t c);

/* Backward: ACCUMULATES dtable[tokens[i] - vocab_start] += dout[i] for owned
 * tokens, in row order (deterministic); the caller zeroes dtable. */
void px_k_embed_bwd(float *dtable,         // (Vl, C)
                    const float *dout,     // (N, C)
                    const int32_t *tokens, // (N)
                    int64_t n, int64_t vocab_start, int64_t vl, int64_t c);

/* Learned positions: out[b, t] += wpe[pos0 + t]. pos0 is the position of the
 * first row (a sequence shard starts mid-sequence); pos0 + T <= rows of wpe. */
void px_k_pos_fwd(float *out,       // (B, T, C)
                  const float *wpe, // (max_positions, C)
                  int64_t b, int64_t t, int64_t c, int64_t pos0);

/* Backward: ACCUMULATES dwpe[pos0 + t] += sum over b of dout[b, t]. */
void px_k_pos_bwd(float *dwpe,       // (max_positions, C)
                  const float *dout, // (B, T, C)
                  int64_t b, int64_t t, int64_t c, int64_t pos0);

#endif
