/* Token data for training: raw uint16/uint32 token files, byte-level text, or
 * a built-in synthetic stream, cut into fixed windows addressed by a global
 * sequence number so that every parallel plan sees the same global batch. */
#ifndef PX_EXEC_DATA_H
#define PX_EXEC_DATA_H

#include <stdint.h>

#include "core/status.h"

typedef enum {
  PX_DATA_AUTO = 0, /* by extension: .u16 or .bin -> U16, .u32 -> U32, anything else -> TEXT */
  PX_DATA_U16,      /* raw little-endian uint16 tokens, no header */
  PX_DATA_U32,      /* raw little-endian uint32 tokens, no header */
  PX_DATA_TEXT,     /* the file's bytes are the tokens 0..255 (byte-level tokenizer; vocab >= 256) */
  PX_DATA_SYNTHETIC /* px_data_open_synthetic; not accepted by px_data_open */
} px_data_format;

/* Files larger than this are refused (the whole file is read into memory). */
#define PX_DATA_MAX_BYTES ((uint64_t)4 << 30)
/* The synthetic stream restarts its Markov chain every this many tokens. */
#define PX_DATA_SYNTH_BLOCK 256

typedef struct px_data px_data;

/* Reads a token file into memory and checks every token is below vocab
 * (1 <= vocab <= INT32_MAX). Refuses missing, empty, oversized and
 * misaligned files (u16: odd size, u32: not a multiple of 4), and text with
 * vocab < 256; a bad token is named by its index and value. */
px_status px_data_open(const char *path, px_data_format fmt, int64_t vocab, px_data **out, px_err *err);

/* A deterministic, learnable, unbounded stream (2 <= vocab <= INT32_MAX):
 * the token at position p is a function of (seed, p) only. The stream is cut
 * into blocks of PX_DATA_SYNTH_BLOCK tokens; each block starts from two
 * tokens drawn from (seed, block) and then follows a fixed order-2 Markov
 * chain derived from the seed: after (a, b) the next token is c0(b) with
 * probability 1/2, c1(b) with 1/4, c2(a, b) and c3(a, b) with 1/8 each,
 * where the ck are pseudo-random functions of the seed. A model can lower
 * its loss from ln(vocab) towards ~1.2 nats by learning bigrams and trigrams. */
px_status px_data_open_synthetic(int64_t vocab, uint64_t seed, px_data **out, px_err *err);

/* Fills n_seq windows of seq_len tokens for the global sequences
 * first_seq, first_seq + 1, ...:
 *   tokens[r * seq_len + t]  = tok[start(first_seq + r) + t]       // (n_seq, seq_len)
 *   targets[r * seq_len + t] = tok[start(first_seq + r) + t + 1]   // (n_seq, seq_len)
 * Window rule, files: start(j) = (j * seq_len) mod (ntokens - seq_len), so
 * consecutive j take consecutive windows and wrap around the file
 * deterministically; the file must hold at least seq_len + 1 tokens.
 * Synthetic: start(j) = j * seq_len (mod 2^64).
 * start(j) depends only on j: the same j gives the same window whichever
 * rank, micro-batch or row asks for it. */
px_status px_data_batch(px_data *d, uint64_t first_seq, int64_t n_seq, int64_t seq_len, int32_t *tokens,
                        int32_t *targets, px_err *err);

/* The global sequence number of one row of one micro-batch on one
 * data-parallel rank at one optimizer step, as the executor uses it:
 *   j = step*gbs + dp_rank*(gbs/dp) + microbatch*mbs + row
 * with gbs the global batch in sequences, dp the data-parallel degree
 * (gbs % dp == 0), mbs the micro-batch size, 0 <= microbatch < gbs/dp/mbs and
 * 0 <= row < mbs. Each step covers j = step*gbs .. step*gbs + gbs - 1 once,
 * whatever dp and mbs are. A micro-batch's rows are consecutive, so
 * px_data_batch(d, px_data_seq_index(..., row = 0), mbs, ...) fetches it. */
uint64_t px_data_seq_index(int64_t step, int64_t gbs, int64_t dp, int64_t dp_rank, int64_t mbs, int64_t microbatch,
                           int64_t row);

/* Tokens in the file; UINT64_MAX for the synthetic stream. */
uint64_t px_data_ntokens(const px_data *d);
int64_t px_data_vocab(const px_data *d);
/* The resolved format (never PX_DATA_AUTO). */
px_data_format px_data_get_format(const px_data *d);
/* px_data_close(NULL) is fine. */
void px_data_close(px_data *d);

#endif
