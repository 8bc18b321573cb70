/* Fuzz harness: a token file opened and a batch read from it, or refused with
 * the reason; never a crash. The input's first HEADER bytes choose how (what
 * the file is read as, the vocabulary, the window and the first sequence:
 * the header below) and the rest is the file, so a mutation reaches every format
 * and every check; an accepted batch must follow exec/data.h's window rule. */
#include <string.h>

#include "exec/data.h"
#include "tests/fuzz/fuzz_util.h"

/* Header, little-endian:
 *   0  1  how the file is read: kinds[byte % NKINDS]
 *   1  4  vocabulary (uint32: 0 and > INT32_MAX are refused)
 *   5  2  sequence length (int16, mod MAX_SEQ + 1: may be <= 0)
 *   7  1  sequences (int8, mod MAX_ROWS + 1: may be < 0)
 *   8  8  first global sequence number (uint64)
 * 16     the file */
#define HEADER 16
#define MAX_SEQ 1024
#define MAX_ROWS 8

static const struct {
  const char *name; /* the file's name; NULL: the synthetic stream (seeded with the first sequence number) */
  px_data_format fmt;
} kinds[] = {{"d.u16", PX_DATA_AUTO}, {"d.bin", PX_DATA_AUTO},  {"d.u32", PX_DATA_AUTO},
             {"d.txt", PX_DATA_AUTO}, {"d", PX_DATA_U16},       {"d", PX_DATA_U32},
             {"d", PX_DATA_TEXT},     {"d", PX_DATA_SYNTHETIC}, {NULL, PX_DATA_SYNTHETIC}};
#define NKINDS (sizeof kinds / sizeof *kinds)

static uint64_t le(const uint8_t *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static unsigned width_of(px_data_format fmt) { return fmt == PX_DATA_U16 ? 2 : fmt == PX_DATA_U32 ? 4 : 1; }

static int32_t tokens[MAX_ROWS * MAX_SEQ], targets[MAX_ROWS * MAX_SEQ]; /* (rows, seq) */
static int32_t row_tokens[MAX_SEQ], row_targets[MAX_SEQ];                /* (seq) */

/* exec/data.h's rule, for a batch of rows windows of L tokens from first. */
static void check(px_data *d, const uint8_t *file, uint64_t first, int64_t rows, int64_t L) {
  int64_t vocab = px_data_vocab(d);
  px_data_format fmt = px_data_get_format(d);
  unsigned width = width_of(fmt);
  uint64_t n = px_data_ntokens(d);
  for (int64_t r = 0; r < rows; r++) {
    const int32_t *tk = tokens + r * L, *tg = targets + r * L;
    for (int64_t t = 0; t < L; t++) {
      fuzz_check(tk[t] >= 0 && tk[t] < vocab && tg[t] >= 0 && tg[t] < vocab, "tokens below the vocabulary");
      fuzz_check(t + 1 == L || tg[t] == tk[t + 1], "each target the next token");
    }
    if (fmt == PX_DATA_SYNTHETIC) { /* start(j) = j L: window j + 1 follows window j */
      fuzz_check(r + 1 == rows || tokens[(r + 1) * L] == tg[L - 1], "synthetic windows one after another");
    } else { /* start(j) = j L mod (n - L) */
      uint64_t start = (uint64_t)((unsigned __int128)(first + (uint64_t)r) * (uint64_t)L % (n - (uint64_t)L));
      fuzz_check(tk[0] == (int32_t)le(file + start * width, (int)width) &&
                     tg[L - 1] == (int32_t)le(file + (start + (uint64_t)L) * width, (int)width),
                 "window j starts at token j seq_len mod (tokens - seq_len)");
    }
  }
  px_err err = {0};
  fuzz_check(!px_data_batch(d, first + (uint64_t)rows - 1, 1, L, row_tokens, row_targets, &err) &&
                 !memcmp(row_tokens, tokens + (rows - 1) * L, (size_t)L * sizeof *row_tokens) &&
                 !memcmp(row_targets, targets + (rows - 1) * L, (size_t)L * sizeof *row_targets),
             "a row fetched alone is the same window");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HEADER) return 0;
  size_t kind = data[0] % NKINDS;
  int64_t vocab = (int64_t)le(data + 1, 4);
  int64_t seq_len = (int16_t)le(data + 5, 2) % (MAX_SEQ + 1);
  int64_t rows = (int8_t)data[7] % (MAX_ROWS + 1);
  uint64_t first = le(data + 8, 8);
  const uint8_t *file = data + HEADER;
  size_t file_bytes = size - HEADER;
  px_err err = {0};
  px_data *d;
  if (kinds[kind].name) {
    char path[512];
    if (!fuzz_file(kinds[kind].name, file, file_bytes, path, sizeof path)) return 0;
    if (px_data_open(path, kinds[kind].fmt, vocab, &d, &err)) return 0;
    px_data_format fmt = px_data_get_format(d);
    fuzz_check(fmt != PX_DATA_AUTO && px_data_ntokens(d) == file_bytes / width_of(fmt), "the file's tokens, all");
  } else if (px_data_open_synthetic(vocab, first, &d, &err)) {
    return 0;
  }
  if (!px_data_batch(d, first, rows, seq_len, tokens, targets, &err) && rows > 0) check(d, file, first, rows, seq_len);
  px_data_close(d);
  return 0;
}
