/* Token data for training: loads token files whole, checks them against the
 * vocabulary, and serves windows by global sequence number. */
#include "exec/data.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct px_data {
  char name[4096];     /* the path, or "synthetic data" */
  px_data_format fmt;  /* U16, U32, TEXT or SYNTHETIC */
  int64_t vocab;
  uint8_t *bytes;      /* (nbytes) the file, for U16/U32/TEXT */
  uint64_t nbytes;
  uint64_t ntokens;
  unsigned width;      /* bytes per token: 1, 2 or 4 */
  uint64_t seed;       /* SYNTHETIC */
};

static const char *format_name(px_data_format f) {
  switch (f) {
    case PX_DATA_U16: return "u16";
    case PX_DATA_U32: return "u32";
    case PX_DATA_TEXT: return "text";
    case PX_DATA_SYNTHETIC: return "synthetic";
    default: return "auto";
  }
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static uint64_t token_at(const px_data *d, uint64_t i) {
  const uint8_t *b = d->bytes + i * d->width;
  switch (d->width) {
    case 1: return b[0];
    case 2: return (uint64_t)b[0] | (uint64_t)b[1] << 8;
    default: return (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24;
  }
}

/* Reads the whole file; refuses directories, empty and oversized files. */
static px_status read_all(px_data *d, const char *path, px_err *err) {
  struct stat sb;
  if (stat(path, &sb) != 0) return px_err_set(err, PX_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: is a directory, not a token file", path);
  if (sb.st_size <= 0) return px_err_set(err, PX_ERR_INPUT, "%s: file is empty", path);
  uint64_t size = (uint64_t)sb.st_size;
  if (size > PX_DATA_MAX_BYTES)
    return px_err_set(err, PX_ERR_INPUT, "%s: %" PRIu64 " bytes is larger than the %" PRIu64
                      " bytes (4 GiB) a token file may hold; split it", path, size, PX_DATA_MAX_BYTES);
  if (size > SIZE_MAX) return px_err_set(err, PX_ERR_RUNTIME, "%s: too large for this machine", path);
  FILE *fp = fopen(path, "rb");
  if (!fp) return px_err_set(err, PX_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
  d->bytes = malloc((size_t)size);
  if (!d->bytes) {
    fclose(fp);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory reading %" PRIu64 " bytes", path, size);
  }
  size_t got = fread(d->bytes, 1, (size_t)size, fp);
  bool bad = ferror(fp);
  int saved = errno;
  fclose(fp);
  if (bad) return px_err_set(err, PX_ERR_RUNTIME, "%s: read error: %s", path, strerror(saved));
  if (got != size)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: read %zu of %" PRIu64 " bytes (file changed while reading?)", path,
                      got, size);
  d->nbytes = size;
  return PX_OK;
}

px_status px_data_open(const char *path, px_data_format fmt, int64_t vocab, px_data **out, px_err *err) {
  *out = NULL;
  if (!path || !*path) return px_err_set(err, PX_ERR_INPUT, "data: no file given");
  if (vocab < 1 || vocab > INT32_MAX)
    return px_err_set(err, PX_ERR_INPUT, "%s: vocabulary size %" PRId64 " is out of range 1..%d", path, vocab,
                      INT32_MAX);
  if (fmt == PX_DATA_AUTO) {
    if (ends_with(path, ".u16") || ends_with(path, ".bin"))
      fmt = PX_DATA_U16;
    else if (ends_with(path, ".u32"))
      fmt = PX_DATA_U32;
    else
      fmt = PX_DATA_TEXT;
  }
  if (fmt != PX_DATA_U16 && fmt != PX_DATA_U32 && fmt != PX_DATA_TEXT)
    return px_err_set(err, PX_ERR_INPUT, "%s: format '%s' cannot be read from a file (expected u16, u32 or text)",
                      path, format_name(fmt));
  if (fmt == PX_DATA_TEXT && vocab < 256)
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: text is read as bytes 0..255, which needs a vocabulary of at least 256 (got %" PRId64 ")",
                      path, vocab);
  px_data *d = px_calloc(1, sizeof *d, err);
  if (!d) return PX_ERR_RUNTIME;
  if (strlen(path) >= sizeof d->name) {
    free(d);
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", path);
  }
  snprintf(d->name, sizeof d->name, "%s", path);
  d->fmt = fmt;
  d->vocab = vocab;
  d->width = fmt == PX_DATA_U16 ? 2 : fmt == PX_DATA_U32 ? 4 : 1;
  px_status st = read_all(d, path, err);
  if (st) {
    px_data_close(d);
    return st;
  }
  if (d->nbytes % d->width) {
    st = px_err_set(err, PX_ERR_INPUT, "%s: %" PRIu64 " bytes is not a whole number of %s tokens (%u bytes each)",
                    path, d->nbytes, format_name(fmt), d->width);
    px_data_close(d);
    return st;
  }
  d->ntokens = d->nbytes / d->width;
  for (uint64_t i = 0; i < d->ntokens; i++) {
    uint64_t t = token_at(d, i);
    if (t >= (uint64_t)vocab) {
      st = px_err_set(err, PX_ERR_INPUT, "%s: token %" PRIu64 " has value %" PRIu64
                      ", not below the vocabulary size %" PRId64, path, i, t, vocab);
      px_data_close(d);
      return st;
    }
  }
  *out = d;
  return PX_OK;
}

px_status px_data_open_synthetic(int64_t vocab, uint64_t seed, px_data **out, px_err *err) {
  *out = NULL;
  if (vocab < 2 || vocab > INT32_MAX)
    return px_err_set(err, PX_ERR_INPUT, "synthetic data: vocabulary size %" PRId64 " is out of range 2..%d", vocab,
                      INT32_MAX);
  px_data *d = px_calloc(1, sizeof *d, err);
  if (!d) return PX_ERR_RUNTIME;
  snprintf(d->name, sizeof d->name, "synthetic data (seed %" PRIu64 ")", seed);
  d->fmt = PX_DATA_SYNTHETIC;
  d->vocab = vocab;
  d->ntokens = UINT64_MAX;
  d->seed = seed;
  *out = d;
  return PX_OK;
}

/* splitmix64's finalizer: a bijection with good avalanche. */
static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t hash4(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b) {
  return mix64(mix64(mix64(mix64(seed) ^ tag) ^ a) ^ b);
}

enum { TAG_START = 1, TAG_DRAW = 2, TAG_BIGRAM = 3, TAG_TRIGRAM = 5 };

/* The token after (a, b) at position p. */
static uint64_t synth_next(const px_data *d, uint64_t a, uint64_t b, uint64_t p) {
  uint64_t V = (uint64_t)d->vocab;
  unsigned u = (unsigned)(hash4(d->seed, TAG_DRAW, p, 0) & 7);
  if (u < 4) return hash4(d->seed, TAG_BIGRAM, b, 0) % V;
  if (u < 6) return hash4(d->seed, TAG_BIGRAM, b, 1) % V;
  return hash4(d->seed, TAG_TRIGRAM + (u & 1), a, b) % V;
}

/* Tokens start .. start + n - 1 of the synthetic stream (positions mod 2^64). */
static void synth_fill(const px_data *d, uint64_t start, uint64_t n, int32_t *out /* (n) */) {
  uint64_t skip = start % PX_DATA_SYNTH_BLOCK;
  uint64_t p = start - skip, a = 0, b = 0;
  for (uint64_t i = 0; i < skip + n; i++, p++) {
    uint64_t off = p % PX_DATA_SYNTH_BLOCK, t;
    if (off < 2)
      t = hash4(d->seed, TAG_START, p / PX_DATA_SYNTH_BLOCK, off) % (uint64_t)d->vocab;
    else
      t = synth_next(d, a, b, p);
    a = b;
    b = t;
    if (i >= skip) out[i - skip] = (int32_t)t;
  }
}

/* (a * b) mod m without overflow. */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
  a %= m;
  b %= m;
  if (a <= UINT32_MAX && b <= UINT32_MAX) return (a * b) % m;
  uint64_t r = 0;
  while (b) {
    if (b & 1) r = (r >= m - a) ? r - (m - a) : r + a;
    a = (a >= m - a) ? a - (m - a) : a + a;
    b >>= 1;
  }
  return r;
}

px_status px_data_batch(px_data *d, uint64_t first_seq, int64_t n_seq, int64_t seq_len, int32_t *tokens,
                        int32_t *targets, px_err *err) {
  if (!d) return px_err_set(err, PX_ERR_INPUT, "data: no data source");
  if (seq_len < 1 || seq_len > INT32_MAX)
    return px_err_set(err, PX_ERR_INPUT, "%s: sequence length %" PRId64 " is out of range 1..%d", d->name, seq_len,
                      INT32_MAX);
  if (n_seq < 0 || (n_seq > 0 && n_seq > INT64_MAX / seq_len))
    return px_err_set(err, PX_ERR_INPUT, "%s: %" PRId64 " sequences is out of range", d->name, n_seq);
  if (n_seq > 0 && (!tokens || !targets))
    return px_err_set(err, PX_ERR_INPUT, "%s: no buffers for the batch", d->name);
  uint64_t L = (uint64_t)seq_len;
  if (d->fmt == PX_DATA_SYNTHETIC) {
    int32_t *win = px_calloc((size_t)L + 1, sizeof *win, err); /* (seq_len + 1) */
    if (!win) return PX_ERR_RUNTIME;
    for (int64_t r = 0; r < n_seq; r++) {
      uint64_t start = (first_seq + (uint64_t)r) * L;
      synth_fill(d, start, L + 1, win);
      memcpy(tokens + r * seq_len, win, L * sizeof *win);
      memcpy(targets + r * seq_len, win + 1, L * sizeof *win);
    }
    free(win);
    return PX_OK;
  }
  if (d->ntokens < L + 1)
    return px_err_set(err, PX_ERR_INPUT, "%s: %" PRIu64 " tokens is shorter than one sequence of %" PRId64
                      " tokens plus its next-token target (%" PRId64 " tokens)", d->name, d->ntokens, seq_len,
                      seq_len + 1);
  uint64_t m = d->ntokens - L;
  for (int64_t r = 0; r < n_seq; r++) {
    uint64_t start = mulmod(first_seq + (uint64_t)r, L, m);
    int32_t *tk = tokens + r * seq_len, *tg = targets + r * seq_len;
    for (uint64_t t = 0; t < L; t++) {
      tk[t] = (int32_t)token_at(d, start + t);
      tg[t] = (int32_t)token_at(d, start + t + 1);
    }
  }
  return PX_OK;
}

uint64_t px_data_seq_index(int64_t step, int64_t gbs, int64_t dp, int64_t dp_rank, int64_t mbs, int64_t microbatch,
                           int64_t row) {
  uint64_t per_rank = dp > 0 ? (uint64_t)gbs / (uint64_t)dp : 0;
  return (uint64_t)step * (uint64_t)gbs + (uint64_t)dp_rank * per_rank + (uint64_t)microbatch * (uint64_t)mbs +
         (uint64_t)row;
}

uint64_t px_data_ntokens(const px_data *d) { return d ? d->ntokens : 0; }

int64_t px_data_vocab(const px_data *d) { return d ? d->vocab : 0; }

px_data_format px_data_get_format(const px_data *d) { return d ? d->fmt : PX_DATA_AUTO; }

void px_data_close(px_data *d) {
  if (!d) return;
  free(d->bytes);
  free(d);
}
