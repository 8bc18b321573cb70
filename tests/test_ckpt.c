/* Checkpoint shards and manifest: bitwise round trip, every flipped byte and
 * every truncation detected, mismatches refused with what differs, and a
 * checkpoint without (or disagreeing with) its manifest refused. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "exec/ckpt.h"
#include "tests/testutil.h"

static const char *tmpdir;

static void make_tmpdir(void) { tmpdir = px_test_tmpdir("ckpt"); }

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *b = malloc(size ? (size_t)size : 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT_EQUAL(fread(b, 1, (size_t)size, fp), (size_t)size);
  fclose(fp);
  *n = (size_t)size;
  return b;
}

static void spit(const char *path, const void *b, size_t n) {
  FILE *fp = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  if (n) CU_ASSERT_EQUAL(fwrite(b, 1, n, fp), n);
  fclose(fp);
}

static void spit_str(const char *path, const char *s) { spit(path, s, strlen(s)); }

static void expect_msg(px_status st, const px_err *err, const char *needle) {
  if (st != PX_ERR_INPUT || !strstr(err->msg, needle))
    fprintf(stderr, "\n  status %d, message '%s', wanted '%s'\n", st, err->msg, needle);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->msg, needle));
}

static px_ckpt_meta meta_for(int32_t rank, int32_t world, int64_t step) {
  px_ckpt_meta m = {.plan_hash = 0x0123456789abcdefull, .model_hash = 0xfeedface00c0ffeeull, .step = step,
                    .rank = rank, .world = world, .tp_rank = rank % 2, .pp_rank = rank / 4, .dp_rank = (rank / 2) % 2};
  return m;
}

/* Fills x with bit patterns of every kind: NaNs with payloads, infinities, -0, denormals. */
static void fill_bits(float *x, uint64_t n, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    uint32_t u = s ^ (s >> 13);
    if (i % 97 == 0) u = 0x7fc01234u; /* quiet NaN with a payload */
    if (i % 89 == 0) u = 0x80000000u; /* -0 */
    if (i % 83 == 0) u = 0x00000001u; /* smallest denormal */
    memcpy(&x[i], &u, 4);
  }
}

/* The entries of dir (not . and ..), each asserted to pass `expected`. */
static int dir_entries(const char *dir, bool (*expected)(const char *name)) {
  DIR *d = opendir(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *e;
  int entries = 0;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    entries++;
    if (!expected(e->d_name)) fprintf(stderr, "\n  unexpected file %s in %s\n", e->d_name, dir);
    CU_ASSERT(expected(e->d_name));
  }
  closedir(d);
  return entries;
}

static bool is_shard_1(const char *name) { return !strcmp(name, "shard-1.bin"); }

static bool is_checkpoint_file(const char *name) {
  return (!strcmp(name, "manifest.json") || !strncmp(name, "shard-", 6)) && !strstr(name, "tmp");
}

static void test_hash_vectors(void) {
  /* Reference values from the xxHash library (XXH64). */
  PX_ASSERT_EQ_U64(px_ckpt_hash_bytes("", 0, 0), 0xef46db3751d8e999ull);
  PX_ASSERT_EQ_U64(px_ckpt_hash_bytes("abc", 3, 0), 0x44bc2cf5ad770999ull);
  const char *s = "Nobody inspects the spammish repetition";
  PX_ASSERT_EQ_U64(px_ckpt_hash_bytes(s, strlen(s), 0), 0xfbcea83c8a378bf1ull);
  PX_ASSERT_EQ_U64(px_ckpt_hash_bytes(s, strlen(s), 12345), 0x081a876428a9313bull);
  unsigned char b[771];
  for (int i = 0; i < 768; i++) b[i] = (unsigned char)i;
  memcpy(b + 768, "xyz", 3);
  PX_ASSERT_EQ_U64(px_ckpt_hash_bytes(b, sizeof b, 0), 0xe921a1b45bd779f8ull);
}

static void test_roundtrip(void) {
  make_tmpdir();
  enum { NE = 1000, NL = 3 };
  float *embed = malloc(NE * sizeof *embed), ln[NL] = {1.0f, -2.5f, 3.25e-30f};
  CU_ASSERT_PTR_NOT_NULL_FATAL(embed);
  fill_bits(embed, NE, 7);
  px_ckpt_tensor t[3] = {{"embed", embed, NE}, {"ln.weight", ln, NL}, {"empty", NULL, 0}};
  px_ckpt_meta m = meta_for(1, 4, 42);
  px_err err = {0};
  const char *dir = px_test_tmp("run/ckpt/step-42"); /* created with its parents */
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m, t, 3, &err), PX_OK);

  float *embed2 = malloc(NE * sizeof *embed2), ln2[NL];
  CU_ASSERT_PTR_NOT_NULL_FATAL(embed2);
  memset(embed2, 0, NE * sizeof *embed2);
  px_ckpt_tensor r[3] = {{"embed", embed2, NE}, {"ln.weight", ln2, NL}, {"empty", NULL, 0}};
  int64_t step = -1;
  px_status st = px_ckpt_read_shard(dir, &m, r, 3, &step, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(step, 42);
  CU_ASSERT_EQUAL(memcmp(embed, embed2, NE * sizeof *embed), 0);
  CU_ASSERT_EQUAL(memcmp(ln, ln2, sizeof ln), 0);
  /* The step is not part of what must match: a run resuming at any step reads it. */
  m.step = 0;
  CU_ASSERT_EQUAL(px_ckpt_read_shard(dir, &m, r, 3, NULL, &err), PX_OK);

  /* Size and trailer as documented: header + entries + xxHash64 of the rest. */
  char path[1024];
  CU_ASSERT_EQUAL_FATAL(px_ckpt_shard_path(dir, 1, path, sizeof path, &err), PX_OK);
  size_t n;
  unsigned char *b = slurp(path, &n);
  size_t want = PX_CKPT_HEADER_BYTES + (4 + 5 + 8 + 4 * NE) + (4 + 9 + 8 + 4 * NL) + (4 + 5 + 8) + 8;
  PX_ASSERT_EQ_U64(n, want);
  CU_ASSERT_EQUAL(memcmp(b, "PXCKPT01", 8), 0);
  uint64_t stored = 0;
  for (int i = 7; i >= 0; i--) stored = stored << 8 | b[n - 8 + (size_t)i];
  PX_ASSERT_EQ_U64(stored, px_ckpt_hash_bytes(b, n - 8, 0));
  free(b);

  /* Only the shard is left in the directory: no temporary files. */
  CU_ASSERT_EQUAL(dir_entries(dir, is_shard_1), 1);
  free(embed);
  free(embed2);
  px_test_rm_tree(tmpdir);
}

/* A small shard: every single-byte change and every truncation is caught. */
static void test_corruption(void) {
  make_tmpdir();
  float a[8], bb[5], a2[8], bb2[5];
  fill_bits(a, 8, 1);
  fill_bits(bb, 5, 2);
  px_ckpt_tensor t[2] = {{"a", a, 8}, {"bb", bb, 5}};
  px_ckpt_tensor r[2] = {{"a", a2, 8}, {"bb", bb2, 5}};
  px_ckpt_meta m = meta_for(0, 1, 3);
  px_err err = {0};
  const char *dir = px_test_tmp("c");
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m, t, 2, &err), PX_OK);
  char path[1024];
  CU_ASSERT_EQUAL_FATAL(px_ckpt_shard_path(dir, 0, path, sizeof path, &err), PX_OK);
  size_t n;
  unsigned char *orig = slurp(path, &n);
  PX_ASSERT_EQ_U64(n, 60 + (4 + 1 + 8 + 32) + (4 + 2 + 8 + 20) + 8);
  unsigned char *b = malloc(n + 16);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  int missed = 0;
  for (size_t i = 0; i < n; i++) {
    for (int bit = 0; bit < 8; bit += 7) {
      memcpy(b, orig, n);
      b[i] ^= (unsigned char)(1u << bit);
      spit(path, b, n);
      px_err e2 = {0};
      px_status st = px_ckpt_read_shard(dir, &m, r, 2, NULL, &e2);
      if (st != PX_ERR_INPUT || !strstr(e2.msg, path)) {
        if (missed++ < 5) fprintf(stderr, "\n  byte %zu bit %d: status %d '%s'\n", i, bit, st, e2.msg);
      }
    }
  }
  CU_ASSERT_EQUAL(missed, 0);
  /* A flipped data byte is reported as a checksum failure. */
  memcpy(b, orig, n);
  b[60 + 4 + 1 + 8 + 3] ^= 0x40;
  spit(path, b, n);
  expect_msg(px_ckpt_read_shard(dir, &m, r, 2, NULL, &err), &err, "corrupt (stored checksum 0x");
  /* Every truncation. */
  missed = 0;
  for (size_t k = 0; k < n; k++) {
    spit(path, orig, k);
    px_err e2 = {0};
    px_status st = px_ckpt_read_shard(dir, &m, r, 2, NULL, &e2);
    if (st != PX_ERR_INPUT || !strstr(e2.msg, "truncated")) {
      if (missed++ < 5) fprintf(stderr, "\n  truncated to %zu: status %d '%s'\n", k, st, e2.msg);
    }
  }
  CU_ASSERT_EQUAL(missed, 0);
  /* Bytes appended. */
  memcpy(b, orig, n);
  memset(b + n, 0, 16);
  spit(path, b, n + 16);
  expect_msg(px_ckpt_read_shard(dir, &m, r, 2, NULL, &err), &err, "corrupt");
  /* Restored, it reads again. */
  spit(path, orig, n);
  CU_ASSERT_EQUAL(px_ckpt_read_shard(dir, &m, r, 2, NULL, &err), PX_OK);
  CU_ASSERT_EQUAL(memcmp(a, a2, sizeof a), 0);
  CU_ASSERT_EQUAL(memcmp(bb, bb2, sizeof bb), 0);
  free(b);
  free(orig);
  px_test_rm_tree(tmpdir);
}

static void test_mismatches(void) {
  make_tmpdir();
  float w[6] = {1, 2, 3, 4, 5, 6}, v[2] = {7, 8}, out[6], out2[2], out3[2];
  px_ckpt_tensor t[2] = {{"w", w, 6}, {"v", v, 2}};
  px_ckpt_meta m = meta_for(3, 8, 10);
  px_err err = {0};
  const char *dir = px_test_tmp("checkpoint");
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m, t, 2, &err), PX_OK);
  char shard[1024];
  snprintf(shard, sizeof shard, "%s/shard-3.bin", dir);
  px_ckpt_tensor r[3] = {{"w", out, 6}, {"v", out2, 2}, {"x", out3, 2}};

  px_ckpt_meta e = m;
  e.plan_hash = 0xabcull;
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err,
             "shard-3.bin: written by another plan (plan hash 0x0123456789abcdef, this run 0x0000000000000abc)");
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, shard));
  e = m;
  e.model_hash = 1;
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err,
             "written for another model (model hash 0xfeedface00c0ffee, this run 0x0000000000000001)");
  e = m;
  e.world = 16;
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err, "written by a run of 8 ranks, this run has 16");
  e = m;
  e.dp_rank = 0;
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err,
             "written at (tp, pp, dp) rank (1, 0, 1), this rank is at (1, 0, 0)");
  /* Another rank's file under this rank's name. */
  size_t n;
  unsigned char *b = slurp(shard, &n);
  spit(px_test_tmp("checkpoint/shard-5.bin"), b, n);
  free(b);
  e = meta_for(5, 8, 10);
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err, "shard-5.bin: written by rank 3, this is rank 5");
  e = meta_for(6, 8, 10);
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err, "shard-6.bin: missing");
  /* Tensor names and counts. */
  px_ckpt_tensor bad_name[2] = {{"w", out, 6}, {"u", out2, 2}};
  expect_msg(px_ckpt_read_shard(dir, &m, bad_name, 2, NULL, &err), &err,
             "shard-3.bin: tensor 1 is 'v' with 2 elements, this run expects 'u' with 2 elements");
  px_ckpt_tensor bad_count[2] = {{"w", out, 5}, {"v", out2, 2}};
  expect_msg(px_ckpt_read_shard(dir, &m, bad_count, 2, NULL, &err), &err,
             "tensor 0 is 'w' with 6 elements, this run expects 'w' with 5 elements");
  expect_msg(px_ckpt_read_shard(dir, &m, r, 1, NULL, &err), &err, "holds 2 tensors, this run expects 1");
  expect_msg(px_ckpt_read_shard(dir, &m, r, 3, NULL, &err), &err, "holds 2 tensors, this run expects 3");
  /* Bad arguments. */
  px_ckpt_tensor noname[1] = {{"", out, 6}};
  expect_msg(px_ckpt_write_shard(dir, &m, noname, 1, &err), &err, "name must be 1..255 bytes");
  char longname[300];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  px_ckpt_tensor toolong[1] = {{longname, out, 6}};
  expect_msg(px_ckpt_write_shard(dir, &m, toolong, 1, &err), &err, "name must be 1..255 bytes (got 299)");
  e = m;
  e.rank = 8;
  expect_msg(px_ckpt_write_shard(dir, &e, t, 2, &err), &err, "rank 8 is out of range 0..7");
  /* A file that is not a shard. */
  spit_str(px_test_tmp("checkpoint/shard-7.bin"),
           "this is not a checkpoint shard at all: it is a text file long enough to hold a header and a checksum");
  e = meta_for(7, 8, 10);
  expect_msg(px_ckpt_read_shard(dir, &e, r, 2, NULL, &err), &err, "not a parallax checkpoint shard");
  /* The right question still gets the right answer. */
  int64_t step = 0;
  CU_ASSERT_EQUAL(px_ckpt_read_shard(dir, &m, r, 2, &step, &err), PX_OK);
  CU_ASSERT_EQUAL(step, 10);
  CU_ASSERT_EQUAL(memcmp(out, w, sizeof w), 0);
  px_test_rm_tree(tmpdir);
}

static void write_all(const char *dir, int32_t world, int64_t step, float *data, uint64_t count) {
  px_err err = {0};
  for (int32_t rank = 0; rank < world; rank++) {
    px_ckpt_meta m = meta_for(rank, world, step);
    data[0] = (float)rank;
    px_ckpt_tensor t[1] = {{"params", data, count}};
    CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m, t, 1, &err), PX_OK);
  }
}

static void test_manifest(void) {
  make_tmpdir();
  float data[100];
  fill_bits(data, 100, 3);
  px_err err = {0};
  const char *dir = px_test_tmp("ck");
  write_all(dir, 3, 7, data, 100);
  px_ckpt_manifest man;
  /* Shards without a manifest: the run stopped while writing. */
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err,
             "incomplete (no manifest.json: the run stopped while writing)");
  CU_ASSERT_PTR_NULL(man.shards);
  px_ckpt_meta m0 = meta_for(0, 3, 7);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_manifest(dir, &m0, NULL, &err), PX_OK);
  px_status st = px_ckpt_read_manifest(dir, &man, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(man.step, 7);
  CU_ASSERT_EQUAL(man.world, 3);
  PX_ASSERT_EQ_U64(man.plan_hash, m0.plan_hash);
  PX_ASSERT_EQ_U64(man.model_hash, m0.model_hash);
  for (int r = 0; r < 3; r++) {
    CU_ASSERT_EQUAL(man.shards[r].rank, r);
    PX_ASSERT_EQ_U64(man.shards[r].size_bytes, 60 + 4 + 6 + 8 + 400 + 8);
  }
  px_ckpt_manifest_deinit(&man);
  px_ckpt_manifest_deinit(&man); /* twice is fine */

  /* Exactly the shards and the manifest: no temporary files. */
  CU_ASSERT_EQUAL(dir_entries(dir, is_checkpoint_file), 4);

  /* A shard replaced after the manifest: same size, other contents. */
  px_ckpt_meta m1 = meta_for(1, 3, 7);
  data[1] += 1.0f;
  px_ckpt_tensor t[1] = {{"params", data, 100}};
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m1, t, 1, &err), PX_OK);
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "shard-1.bin: checksum 0x");
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the manifest says 0x"));
  CU_ASSERT_PTR_NULL(man.shards);
  /* Another size. */
  t[0].count = 99;
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &m1, t, 1, &err), PX_OK);
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "shard-1.bin: 482 bytes, the manifest says 486");
  /* Missing. */
  CU_ASSERT_EQUAL(unlink(px_test_tmp("ck/shard-1.bin")), 0);
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "shard-1.bin: missing");
  /* Rank 0 refuses to write a manifest over a missing or stale shard. */
  expect_msg(px_ckpt_write_manifest(dir, &m0, NULL, &err), &err, "shard-1.bin: missing");
  px_ckpt_meta stale = meta_for(1, 3, 6);
  t[0].count = 100;
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(dir, &stale, t, 1, &err), PX_OK);
  expect_msg(px_ckpt_write_manifest(dir, &m0, NULL, &err), &err, "shard-1.bin: holds step 6, the manifest is for step 7");
  /* A broken manifest. */
  spit_str(px_test_tmp("ck/manifest.json"), "{\"format\": \"parallax-checkpoint\", \"version\": 1, \"step\": 7");
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "invalid JSON");
  spit_str(px_test_tmp("ck/manifest.json"), "{\"format\": \"parallax-checkpoint\", \"version\": 1, \"step\": 7, \"world\": 3, "
                                    "\"plan_hash\": \"12\", \"model_hash\": \"0x1\", \"shards\": []}");
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "field 'plan_hash': '12' is not a 64-bit hex number");
  expect_msg(px_ckpt_read_manifest(px_test_tmp("nowhere"), &man, &err), &err, "no such checkpoint directory");
  px_test_rm_tree(tmpdir);
}

static void expect_step(const char *dir, int64_t step) {
  px_ckpt_manifest man;
  px_err err = {0};
  px_status st = px_ckpt_read_manifest(dir, &man, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(man.step, step);
  px_ckpt_manifest_deinit(&man);
}

/* A new checkpoint is staged in <dir>/.next and moved in whole: the one in
 * dir stays valid through a partial write (discarded by recovery) and a
 * commit stopped half-way is finished by recovery. */
static void test_staging(void) {
  make_tmpdir();
  float data[100];
  fill_bits(data, 100, 5);
  px_err err = {0};
  char dir[600], staging[600], path[600]; /* px_test_tmp()'s buffers are reused */
  snprintf(dir, sizeof dir, "%s", px_test_tmp("ck"));
  snprintf(staging, sizeof staging, "%s", px_test_tmp("ck/.next"));
  CU_ASSERT_EQUAL(px_ckpt_staging_path(dir, path, sizeof path, &err), PX_OK);
  CU_ASSERT_STRING_EQUAL(path, staging);
  px_ckpt_recovery what;
  CU_ASSERT_EQUAL(px_ckpt_recover(dir, &what, &err), PX_OK); /* no directory at all: nothing to do */
  CU_ASSERT_EQUAL(what, PX_CKPT_RECOVERY_NONE);

  /* Written and committed: shards and manifest in dir, staging gone. */
  write_all(staging, 3, 7, data, 100);
  px_ckpt_meta m7 = meta_for(0, 3, 7), m9 = meta_for(0, 3, 9);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit(dir, &m7, NULL, &err), PX_OK);
  expect_step(dir, 7);
  CU_ASSERT_EQUAL(dir_entries(dir, is_checkpoint_file), 4);
  CU_ASSERT_EQUAL(px_ckpt_recover(dir, &what, &err), PX_OK);
  CU_ASSERT_EQUAL(what, PX_CKPT_RECOVERY_NONE);

  /* Step 9 half-written (rank 2's shard missing, a writer's temporary file
   * left): the commit is refused and nothing in dir changes; recovery
   * removes the staging directory. */
  px_ckpt_meta r0 = meta_for(0, 3, 9), r1 = meta_for(1, 3, 9);
  px_ckpt_tensor t[1] = {{"params", data, 100}};
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(staging, &r0, t, 1, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(staging, &r1, t, 1, &err), PX_OK);
  spit_str(px_test_tmp("ck/.next/shard-2.bin.tmp.4242"), "half");
  expect_msg(px_ckpt_commit(dir, &m9, NULL, &err), &err, "shard-2.bin: missing");
  expect_step(dir, 7);
  CU_ASSERT_EQUAL(px_ckpt_recover(dir, &what, &err), PX_OK);
  CU_ASSERT_EQUAL(what, PX_CKPT_RECOVERY_DISCARDED);
  CU_ASSERT(!px_file_exists(staging));
  expect_step(dir, 7);

  /* Step 9 complete, its commit stopped after moving one shard: dir is not
   * a valid checkpoint until recovery finishes the move. */
  write_all(staging, 3, 9, data, 100);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_manifest(staging, &m9, NULL, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(rename(px_test_tmp("ck/.next/shard-0.bin"), px_test_tmp("ck/shard-0.bin")), 0);
  px_ckpt_manifest man;
  expect_msg(px_ckpt_read_manifest(dir, &man, &err), &err, "shard-0.bin: checksum 0x");
  CU_ASSERT_EQUAL(px_ckpt_recover(dir, &what, &err), PX_OK);
  CU_ASSERT_EQUAL(what, PX_CKPT_RECOVERY_COMPLETED);
  expect_step(dir, 9);
  CU_ASSERT(!px_file_exists(staging));
  CU_ASSERT_EQUAL(dir_entries(dir, is_checkpoint_file), 4);

  /* The test hook's pause changes nothing in the file. */
  size_t n1, n2;
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(px_test_tmp("a"), &r0, t, 1, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard_paced(px_test_tmp("b"), &r0, t, 1, 1, &err), PX_OK);
  unsigned char *b1 = slurp(px_test_tmp("a/shard-0.bin"), &n1), *b2 = slurp(px_test_tmp("b/shard-0.bin"), &n2);
  CU_ASSERT(n1 == n2 && memcmp(b1, b2, n1) == 0);
  free(b1), free(b2);
  px_test_rm_tree(tmpdir);
}

int main(void) {
  static const px_test tests[] = {
      {"xxHash64 reference values", test_hash_vectors},
      {"write then read is bitwise, no temporary files", test_roundtrip},
      {"every flipped byte and truncation is detected", test_corruption},
      {"plan, model, rank, coordinates and tensors must match", test_mismatches},
      {"manifest: complete, incomplete, replaced, stale", test_manifest},
      {"staging: a partial write discarded, a stopped commit finished", test_staging},
  };
  return px_test_main("ckpt", tests, sizeof tests / sizeof tests[0]);
}
