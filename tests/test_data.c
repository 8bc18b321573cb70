/* Token data: u16/u32/text files, window and target rule with wrap-around,
 * refusal of bad files, the same global batch under every dp/micro-batch
 * split, and the synthetic stream's determinism and learnability. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/data.h"
#include "tests/testutil.h"

static const char *tmpdir;

static void make_tmpdir(void) { tmpdir = px_test_tmpdir("data"); }

/* Removes the files this suite wrote, then the directory. */
static const char *written[32];
static int n_written;

static const char *write_file(const char *name, const void *bytes, size_t n) {
  static char paths[32][512];
  char *p = paths[n_written];
  snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
  FILE *fp = fopen(p, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  if (n) CU_ASSERT_EQUAL(fwrite(bytes, 1, n, fp), n);
  fclose(fp);
  written[n_written++] = p;
  return p;
}

static void cleanup(void) {
  for (int i = 0; i < n_written; i++) unlink(written[i]);
  n_written = 0;
  CU_ASSERT_EQUAL(rmdir(tmpdir), 0);
}

static void expect_refused(const char *path, px_data_format fmt, int64_t vocab, const char *needle) {
  px_data *d = NULL;
  px_err err = {0};
  px_status st = px_data_open(path, fmt, vocab, &d, &err);
  if (st != PX_ERR_INPUT || !strstr(err.msg, needle))
    fprintf(stderr, "\n  %s: status %d, message '%s', wanted '%s'\n", path, st, err.msg, needle);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NULL(d);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
}

/* u16 file 0..99 (little-endian): windows, targets and the wrap rule. */
static void test_u16_windows(void) {
  make_tmpdir();
  uint8_t bytes[200];
  for (int i = 0; i < 100; i++) {
    uint16_t t = (uint16_t)(i * 300); /* uses the high byte: 0..29700 */
    bytes[2 * i] = (uint8_t)(t & 0xff);
    bytes[2 * i + 1] = (uint8_t)(t >> 8);
  }
  const char *path = write_file("tokens.u16", bytes, sizeof bytes);
  px_data *d = NULL;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_data_open(path, PX_DATA_AUTO, 30000, &d, &err), PX_OK);
  CU_ASSERT_EQUAL(px_data_get_format(d), PX_DATA_U16);
  PX_ASSERT_EQ_U64(px_data_ntokens(d), 100);
  int32_t tok[3 * 10], tgt[3 * 10]; /* (3, 10) */
  /* seq_len 10: start(j) = (10 j) mod 90, so j = 8, 9, 10 start at 80, 0, 10. */
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, 8, 3, 10, tok, tgt, &err), PX_OK);
  int starts[3] = {80, 0, 10};
  for (int r = 0; r < 3; r++) {
    for (int t = 0; t < 10; t++) {
      CU_ASSERT_EQUAL(tok[r * 10 + t], (starts[r] + t) * 300);
      CU_ASSERT_EQUAL(tgt[r * 10 + t], (starts[r] + t + 1) * 300);
    }
  }
  /* The last token of the file is reachable as a target, never beyond: seq_len 99 has one window. */
  int32_t big[99], bigt[99];
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, 12345, 1, 99, big, bigt, &err), PX_OK);
  CU_ASSERT_EQUAL(big[0], 0);
  CU_ASSERT_EQUAL(bigt[98], 99 * 300);
  /* A huge j wraps without overflow: (j * 7) mod 93 computed exactly. */
  uint64_t j = UINT64_MAX - 5;
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, j, 1, 7, tok, tgt, &err), PX_OK);
  CU_ASSERT_EQUAL(tok[0], (int)(((j % 93) * 7) % 93) * 300);
  px_data_close(d);
  px_data_close(NULL);
  cleanup();
}

static void test_u32_and_text(void) {
  make_tmpdir();
  uint8_t bytes[4 * 20];
  for (int i = 0; i < 20; i++) {
    uint32_t t = 70000u + (uint32_t)i;
    for (int k = 0; k < 4; k++) bytes[4 * i + k] = (uint8_t)(t >> (8 * k));
  }
  const char *p32 = write_file("tokens.u32", bytes, sizeof bytes);
  px_data *d = NULL;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_data_open(p32, PX_DATA_AUTO, 100000, &d, &err), PX_OK);
  CU_ASSERT_EQUAL(px_data_get_format(d), PX_DATA_U32);
  PX_ASSERT_EQ_U64(px_data_ntokens(d), 20);
  int32_t tok[2 * 4], tgt[2 * 4]; /* (2, 4) */
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, 1, 2, 4, tok, tgt, &err), PX_OK);
  for (int i = 0; i < 8; i++) {
    CU_ASSERT_EQUAL(tok[i], 70004 + i);
    CU_ASSERT_EQUAL(tgt[i], 70005 + i);
  }
  px_data_close(d);

  const char *text = "hello, world\n\xff";
  const char *pt = write_file("hello.txt", text, strlen(text));
  CU_ASSERT_EQUAL_FATAL(px_data_open(pt, PX_DATA_AUTO, 256, &d, &err), PX_OK);
  CU_ASSERT_EQUAL(px_data_get_format(d), PX_DATA_TEXT);
  PX_ASSERT_EQ_U64(px_data_ntokens(d), 14);
  int32_t tk[5], tg[5];
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, 0, 1, 5, tk, tg, &err), PX_OK);
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(tk[i], (unsigned char)text[i]);
    CU_ASSERT_EQUAL(tg[i], (unsigned char)text[i + 1]);
  }
  px_data_close(d);
  /* An explicit format overrides the extension: 14 bytes as u16 is 7 tokens. */
  CU_ASSERT_EQUAL_FATAL(px_data_open(pt, PX_DATA_U16, 65536, &d, &err), PX_OK);
  PX_ASSERT_EQ_U64(px_data_ntokens(d), 7);
  px_data_close(d);
  expect_refused(pt, PX_DATA_TEXT, 255, "at least 256");
  cleanup();
}

static void test_refusals(void) {
  make_tmpdir();
  uint8_t bytes[8] = {1, 0, 2, 0, 200, 1, 3, 0}; /* u16: 1, 2, 456, 3 */
  const char *p = write_file("bad.u16", bytes, sizeof bytes);
  expect_refused(p, PX_DATA_AUTO, 456, "token 2 has value 456, not below the vocabulary size 456");
  px_data *d = NULL;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_data_open(p, PX_DATA_AUTO, 457, &d, &err), PX_OK);
  /* Too short for the sequence: 4 tokens hold one window of 3, not of 4. */
  int32_t tok[4], tgt[4];
  CU_ASSERT_EQUAL(px_data_batch(d, 0, 1, 3, tok, tgt, &err), PX_OK);
  px_status st = px_data_batch(d, 0, 1, 4, tok, tgt, &err);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "4 tokens is shorter than one sequence of 4 tokens"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, p));
  CU_ASSERT_EQUAL(px_data_batch(d, 0, 1, 0, tok, tgt, &err), PX_ERR_INPUT);
  CU_ASSERT_EQUAL(px_data_batch(d, 0, -1, 2, tok, tgt, &err), PX_ERR_INPUT);
  px_data_close(d);

  expect_refused(write_file("odd.u16", bytes, 7), PX_DATA_AUTO, 1000, "7 bytes is not a whole number of u16 tokens");
  expect_refused(write_file("six.u32", bytes, 6), PX_DATA_AUTO, 1000, "6 bytes is not a whole number of u32 tokens");
  expect_refused(write_file("empty.bin", bytes, 0), PX_DATA_AUTO, 1000, "file is empty");
  expect_refused(write_file("empty.txt", bytes, 0), PX_DATA_TEXT, 1000, "file is empty");
  char missing[512];
  snprintf(missing, sizeof missing, "%s/missing.u16", tmpdir);
  expect_refused(missing, PX_DATA_AUTO, 1000, "cannot open");
  expect_refused(tmpdir, PX_DATA_AUTO, 1000, "is a directory");
  expect_refused(p, PX_DATA_AUTO, 0, "vocabulary size 0 is out of range");
  expect_refused(p, PX_DATA_SYNTHETIC, 1000, "cannot be read from a file");
  cleanup();
}

/* gbs 8 under dp 1/2/4 and mbs 1/2 assembles the same 8 sequences per step. */
static void check_decompositions(px_data *d, int64_t seq_len) {
  enum { GBS = 8, T = 16 };
  int32_t ref_tok[GBS * T], ref_tgt[GBS * T]; /* (GBS, T) */
  px_err err = {0};
  for (int64_t step = 0; step < 3; step++) {
    CU_ASSERT_EQUAL_FATAL(px_data_batch(d, (uint64_t)(step * GBS), GBS, seq_len, ref_tok, ref_tgt, &err), PX_OK);
    int64_t dps[3] = {1, 2, 4}, mbss[2] = {1, 2};
    for (int a = 0; a < 3; a++) {
      for (int b = 0; b < 2; b++) {
        int64_t dp = dps[a], mbs = mbss[b], n_micro = GBS / dp / mbs;
        int32_t got_tok[GBS * T], got_tgt[GBS * T];
        memset(got_tok, 0xff, sizeof got_tok);
        memset(got_tgt, 0xff, sizeof got_tgt);
        for (int64_t rank = 0; rank < dp; rank++) {
          for (int64_t mb = 0; mb < n_micro; mb++) {
            uint64_t j = px_data_seq_index(step, GBS, dp, rank, mbs, mb, 0);
            int32_t tk[2 * T], tg[2 * T]; /* (mbs, T) */
            CU_ASSERT_EQUAL_FATAL(px_data_batch(d, j, mbs, seq_len, tk, tg, &err), PX_OK);
            for (int64_t row = 0; row < mbs; row++) {
              uint64_t jr = px_data_seq_index(step, GBS, dp, rank, mbs, mb, row);
              CU_ASSERT_EQUAL(jr, j + (uint64_t)row);
              int64_t slot = (int64_t)jr - step * GBS;
              CU_ASSERT_FATAL(slot >= 0 && slot < GBS);
              memcpy(got_tok + slot * seq_len, tk + row * seq_len, (size_t)seq_len * sizeof *tk);
              memcpy(got_tgt + slot * seq_len, tg + row * seq_len, (size_t)seq_len * sizeof *tg);
            }
          }
        }
        CU_ASSERT_EQUAL(memcmp(got_tok, ref_tok, (size_t)(GBS * seq_len) * sizeof *got_tok), 0);
        CU_ASSERT_EQUAL(memcmp(got_tgt, ref_tgt, (size_t)(GBS * seq_len) * sizeof *got_tgt), 0);
      }
    }
  }
}

static void test_same_batch_any_split(void) {
  make_tmpdir();
  uint8_t bytes[1000];
  for (int i = 0; i < 1000; i++) bytes[i] = (uint8_t)((i * 7 + i / 13) & 0xff);
  px_data *d = NULL;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_data_open(write_file("t.txt", bytes, sizeof bytes), PX_DATA_TEXT, 256, &d, &err), PX_OK);
  check_decompositions(d, 16); /* 3 steps x 8 x 16 tokens > 1000: wraps */
  px_data_close(d);
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(97, 42, &d, &err), PX_OK);
  check_decompositions(d, 16);
  px_data_close(d);
  /* The index formula by hand: step 3, gbs 8, dp 2, rank 1, mbs 2, micro-batch 1, row 1 -> 24 + 4 + 2 + 1. */
  PX_ASSERT_EQ_U64(px_data_seq_index(3, 8, 2, 1, 2, 1, 1), 31);
  cleanup();
}

static void test_synthetic(void) {
  enum { N = 64, L = 300 }; /* windows span block boundaries */
  px_data *a = NULL, *b = NULL, *c = NULL;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(64, 1, &a, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(64, 1, &b, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(64, 2, &c, &err), PX_OK);
  CU_ASSERT_EQUAL(px_data_ntokens(a), UINT64_MAX);
  int32_t *ta = calloc(N * L, sizeof *ta), *ga = calloc(N * L, sizeof *ga); /* (N, L) */
  int32_t *tb = calloc(N * L, sizeof *tb), *gb = calloc(N * L, sizeof *gb);
  CU_ASSERT_FATAL(ta && ga && tb && gb);
  CU_ASSERT_EQUAL_FATAL(px_data_batch(a, 5, N, L, ta, ga, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_data_batch(b, 5, N, L, tb, gb, &err), PX_OK);
  CU_ASSERT_EQUAL(memcmp(ta, tb, N * L * sizeof *ta), 0);
  CU_ASSERT_EQUAL(memcmp(ga, gb, N * L * sizeof *ga), 0);
  /* Targets are the next tokens; window j + 1 starts where window j's targets end. */
  for (int r = 0; r < N; r++) {
    for (int t = 0; t + 1 < L; t++) CU_ASSERT_EQUAL(ga[r * L + t], ta[r * L + t + 1]);
    if (r + 1 < N) CU_ASSERT_EQUAL(ga[r * L + L - 1], ta[(r + 1) * L]);
  }
  /* One window asked for alone equals its row in the batch. */
  CU_ASSERT_EQUAL_FATAL(px_data_batch(b, 5 + 17, 1, L, tb, gb, &err), PX_OK);
  CU_ASSERT_EQUAL(memcmp(tb, ta + 17 * L, L * sizeof *ta), 0);
  /* Another seed, another stream. */
  CU_ASSERT_EQUAL_FATAL(px_data_batch(c, 5, N, L, tb, gb, &err), PX_OK);
  int same = 0;
  for (int i = 0; i < N * L; i++) same += ta[i] == tb[i];
  CU_ASSERT(same < N * L / 8);
  /* Learnable: each token's most frequent successor covers about half its
   * occurrences (1/64 for uniform noise); all tokens stay below the vocab. */
  static int counts[64][64];
  memset(counts, 0, sizeof counts);
  for (int i = 0; i < N * L; i++) {
    CU_ASSERT_FATAL(ta[i] >= 0 && ta[i] < 64);
    counts[ta[i]][ga[i]]++;
  }
  long top = 0, total = 0;
  for (int x = 0; x < 64; x++) {
    int best = 0;
    for (int y = 0; y < 64; y++) {
      best = counts[x][y] > best ? counts[x][y] : best;
      total += counts[x][y];
    }
    top += best;
  }
  CU_ASSERT(top * 10 > total * 4);
  free(ta);
  free(ga);
  free(tb);
  free(gb);
  px_data_close(a);
  px_data_close(b);
  px_data_close(c);
  px_data *d = NULL;
  CU_ASSERT_EQUAL(px_data_open_synthetic(1, 0, &d, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "synthetic data: vocabulary size 1"));
}

/* tests/data/tinyshakespeare.txt: 64,000 bytes of plain ASCII, read as byte tokens. */
static void test_tinyshakespeare(void) {
  px_data *d = NULL;
  px_err err = {0};
  px_status st = px_data_open(px_test_path("tests/data/tinyshakespeare.txt"), PX_DATA_AUTO, 256, &d, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(px_data_get_format(d), PX_DATA_TEXT);
  PX_ASSERT_EQ_U64(px_data_ntokens(d), 64000);
  int32_t tok[2 * 14], tgt[2 * 14]; /* (2, 14) */
  CU_ASSERT_EQUAL_FATAL(px_data_batch(d, 0, 2, 14, tok, tgt, &err), PX_OK);
  const char *want = "First Citizen:\nBefore we proc";
  for (int i = 0; i < 28; i++) {
    CU_ASSERT_EQUAL(tok[i], (unsigned char)want[i]);
    CU_ASSERT_EQUAL(tgt[i], (unsigned char)want[i + 1]);
  }
  px_data_close(d);
}

int main(void) {
  static const px_test tests[] = {
      {"u16 windows, targets and wrap-around", test_u16_windows},
      {"u32 and byte-level text", test_u32_and_text},
      {"bad files are refused with the file and reason", test_refusals},
      {"same global batch under every dp and micro-batch split", test_same_batch_any_split},
      {"synthetic stream: deterministic, seeded, learnable", test_synthetic},
      {"tinyshakespeare excerpt loads as byte tokens", test_tinyshakespeare},
  };
  return px_test_main("data", tests, sizeof tests / sizeof tests[0]);
}
