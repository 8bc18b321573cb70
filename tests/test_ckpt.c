/* Checkpoint shards and manifest: bitwise round trip, every flipped byte and
 * every truncation detected, mismatches refused with what differs, and a
 * checkpoint without (or disagreeing with) its manifest refused. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "exec/ckpt.h"
#include "exec/ckpt_lock.h"
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
  CU_ASSERT_EQUAL(mkdir(px_test_tmp("empty"), 0777), 0); /* a directory a run's lock just made */
  expect_msg(px_ckpt_read_manifest(px_test_tmp("empty"), &man, &err), &err,
             "empty: holds no checkpoint (no manifest.json)");
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

  /* A failed write abandoned: staging goes, the checkpoint in dir stays. */
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(staging, &r0, t, 1, &err), PX_OK);
  CU_ASSERT_EQUAL(px_ckpt_abandon(dir, &err), PX_OK);
  CU_ASSERT(!px_file_exists(staging));
  expect_step(dir, 7);

  /* Step 9 complete, its commit stopped after moving one shard: the readers
   * read step 9 as it lies (the staged manifest, shard 0 in dir, the others
   * in staging), the probe says so, abandoning it keeps it (its commit
   * stands), and recovery finishes the move. */
  write_all(staging, 3, 9, data, 100);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_manifest(staging, &m9, NULL, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(rename(px_test_tmp("ck/.next/shard-0.bin"), px_test_tmp("ck/shard-0.bin")), 0);
  expect_step(dir, 9);
  px_ckpt_meta e1 = meta_for(1, 3, 9);
  int64_t got_step = -1;
  CU_ASSERT_EQUAL(px_ckpt_read_shard(dir, &e1, t, 1, &got_step, &err), PX_OK);
  CU_ASSERT_EQUAL(got_step, 9);
  px_ckpt_shard *sh = NULL;
  CU_ASSERT_EQUAL(px_ckpt_shard_open(dir, 2, true, &sh, &err), PX_OK);
  if (sh) CU_ASSERT_EQUAL(px_ckpt_shard_meta(sh)->step, 9);
  px_ckpt_shard_close(sh);
  px_ckpt_probe_info p;
  px_ckpt_probe(dir, &p);
  CU_ASSERT(p.found && p.staged && p.step == 9 && p.kept == 0);
  CU_ASSERT_EQUAL(px_ckpt_abandon(dir, &err), PX_OK);
  CU_ASSERT(px_file_exists(staging));
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

/* ---- what a directory holds, older checkpoints kept --------------------- */

static int64_t ino_of(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (int64_t)sb.st_ino : -1;
}

/* dir holds step `top` and exactly the kept steps listed (newest first, -1 ends). */
static void expect_kept(const char *dir, int64_t top, const int64_t *kept) {
  char sub[700];
  expect_step(dir, top);
  int64_t n = 0;
  for (; kept[n] >= 0; n++) {
    snprintf(sub, sizeof sub, "%s/step-%lld", dir, (long long)kept[n]);
    expect_step(sub, kept[n]);
  }
  px_ckpt_probe_info p;
  px_ckpt_probe(dir, &p);
  if (p.kept != n) fprintf(stderr, "\n  %lld kept, expected %lld\n", (long long)p.kept, (long long)n);
  CU_ASSERT(p.found && !p.staged && p.step == top && p.kept == n && p.kept_newest == (n ? kept[0] : -1));
}

/* --ckpt-keep: the latest in dir, the K - 1 before it in dir/step-<N>/, hard
 * links of the files the latest had; keep 0 leaves them, keep 1 and a
 * fresh commit remove them; the probe and its description. */
static void test_keep(void) {
  make_tmpdir();
  float data[100];
  fill_bits(data, 100, 9);
  px_err err = {0};
  char dir[600], staging[600], shard0[700], kept4[700];
  snprintf(dir, sizeof dir, "%s", px_test_tmp("ck"));
  snprintf(staging, sizeof staging, "%s", px_test_tmp("ck/.next"));
  snprintf(shard0, sizeof shard0, "%s/shard-0.bin", dir);
  snprintf(kept4, sizeof kept4, "%s/step-4/shard-0.bin", dir);
  px_ckpt_probe_info p;
  char what[600];
  px_ckpt_probe(dir, &p); /* no directory */
  CU_ASSERT(!p.found && p.step == -1 && p.kept == 0);
  px_ckpt_probe_describe(&p, what, sizeof what);
  CU_ASSERT_STRING_EQUAL(what, "no checkpoint");

  /* Steps 1..5 with keep 3, the first fresh. */
  int64_t ino4 = -1;
  for (int64_t step = 1; step <= 5; step++) {
    write_all(staging, 3, step, data, 100);
    px_ckpt_meta m = meta_for(0, 3, step);
    CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m, NULL, 3, step == 1, &err), PX_OK);
    if (step == 4) ino4 = ino_of(shard0);
  }
  expect_kept(dir, 5, (const int64_t[]){4, 3, -1});
  CU_ASSERT(ino4 > 0 && ino_of(kept4) == ino4); /* step 4's own file, not a copy */
  px_ckpt_probe(dir, &p);
  px_ckpt_probe_describe(&p, what, sizeof what);
  CU_ASSERT_STRING_EQUAL(what, "the checkpoint of step 5 and 2 older checkpoints in step-<N>/ (the newest of step 4)");

  /* A keep that stopped half-way left step-9.tmp: the next prune removes it. */
  CU_ASSERT_EQUAL(mkdir(px_test_tmp("ck/step-9.tmp"), 0777), 0);
  spit_str(px_test_tmp("ck/step-9.tmp/shard-0.bin"), "half");
  /* keep 0 (not asked): the kept ones stay as they are, nothing is added. */
  write_all(staging, 3, 6, data, 100);
  px_ckpt_meta m6 = meta_for(0, 3, 6);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m6, NULL, 0, false, &err), PX_OK);
  expect_kept(dir, 6, (const int64_t[]){4, 3, -1});
  CU_ASSERT(px_file_exists(px_test_tmp("ck/step-9.tmp")));
  /* keep 2: step 6 kept, the oldest go, and the leftover. */
  write_all(staging, 3, 7, data, 100);
  px_ckpt_meta m7 = meta_for(0, 3, 7);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m7, NULL, 2, false, &err), PX_OK);
  expect_kept(dir, 7, (const int64_t[]){6, -1});
  CU_ASSERT(!px_file_exists(px_test_tmp("ck/step-9.tmp")));
  /* Keeping step 7 again (a commit that did not happen after it was kept) replaces the copy. */
  CU_ASSERT_EQUAL(mkdir(px_test_tmp("ck/step-7"), 0777), 0);
  spit_str(px_test_tmp("ck/step-7/junk"), "x");
  write_all(staging, 3, 8, data, 100);
  px_ckpt_meta m8 = meta_for(0, 3, 8);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m8, NULL, 3, false, &err), PX_OK);
  expect_kept(dir, 8, (const int64_t[]){7, 6, -1});
  CU_ASSERT(!px_file_exists(px_test_tmp("ck/step-7/junk")));
  /* keep 1: the latest alone, but for a kept one a job is using (its lock). */
  spit_str(px_test_tmp("ck/step-6/lock"), "{}");
  write_all(staging, 3, 9, data, 100);
  px_ckpt_meta m9 = meta_for(0, 3, 9);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m9, NULL, 1, false, &err), PX_OK);
  expect_kept(dir, 9, (const int64_t[]){6, -1});
  CU_ASSERT_EQUAL(unlink(px_test_tmp("ck/step-6/lock")), 0);
  /* a commit that fails (nothing staged) removes nothing */
  CU_ASSERT_EQUAL(px_ckpt_commit_keep(dir, &m9, NULL, 1, true, &err), PX_ERR_INPUT);
  expect_kept(dir, 9, (const int64_t[]){6, -1});
  write_all(staging, 3, 9, data, 100);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m9, NULL, 1, false, &err), PX_OK);
  expect_kept(dir, 9, (const int64_t[]){-1});
  /* A fresh commit (another run's, or a reshard, replacing dir's) keeps
   * nothing of the old and removes what was kept. */
  write_all(staging, 3, 10, data, 100);
  px_ckpt_meta m10 = meta_for(0, 3, 10);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m10, NULL, 2, false, &err), PX_OK);
  expect_kept(dir, 10, (const int64_t[]){9, -1});
  write_all(staging, 3, 2, data, 100);
  px_ckpt_meta m2 = meta_for(0, 3, 2);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m2, NULL, 2, true, &err), PX_OK);
  expect_kept(dir, 2, (const int64_t[]){-1});

  /* Kept ones alone (the latest removed by hand) still count as held; an unreadable manifest is held, of no step. */
  write_all(staging, 3, 3, data, 100);
  px_ckpt_meta m3 = meta_for(0, 3, 3);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit_keep(dir, &m3, NULL, 2, false, &err), PX_OK);
  CU_ASSERT_EQUAL(unlink(px_test_tmp("ck/manifest.json")), 0);
  px_ckpt_probe(dir, &p);
  px_ckpt_probe_describe(&p, what, sizeof what);
  CU_ASSERT(!p.found && p.kept == 1);
  CU_ASSERT_STRING_EQUAL(what, "1 older checkpoint in step-<N>/ (the newest of step 2)");
  spit_str(px_test_tmp("ck/manifest.json"), "{ not json");
  px_ckpt_probe(dir, &p);
  CU_ASSERT(p.found && p.step == -1);
  px_test_rm_tree(tmpdir);
}

/* ---- the lock ---------------------------------------------------------- */

/* A pid no process has (a child that ended and was reaped). */
static pid_t dead_pid(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  CU_ASSERT_FATAL(pid > 0);
  waitpid(pid, NULL, 0);
  return pid;
}

static void write_lock(const char *path, const char *host, long long pid, unsigned long long start) {
  char text[600];
  snprintf(text, sizeof text, "{\"host\": \"%s\", \"pid\": %lld, \"pid_start\": %llu, \"since_unix_s\": 1700000000}\n",
           host, pid, start);
  spit_str(path, text);
}

static void expect_refused(const char *dir, const char *needle) {
  px_ckpt_lock lk;
  px_err err = {0};
  char note[600];
  expect_msg(px_ckpt_lock_take(dir, &lk, note, sizeof note, &err), &err, needle);
  CU_ASSERT(!lk.held);
}

static void expect_taken_over(const char *dir, const char *lock, long long pid) {
  px_ckpt_lock lk;
  px_err err = {0};
  char note[600], want[400];
  px_status st = px_ckpt_lock_take(dir, &lk, note, sizeof note, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  snprintf(want, sizeof want, "took over the lock of a job that is gone (pid %lld on ", pid);
  CU_ASSERT_PTR_NOT_NULL(strstr(note, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(note, "since 2023-11-14 22:13:20 UTC"));
  char text[600];
  FILE *fp = fopen(lock, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  char mine[64];
  snprintf(mine, sizeof mine, "\"pid\":%lld,", (long long)getpid());
  CU_ASSERT_PTR_NOT_NULL(strstr(text, mine)); /* now ours */
  px_ckpt_lock_release(&lk);
  CU_ASSERT(!px_file_exists(lock));
}

/* One job a directory: a second is refused naming the holder; a stale lock
 * (its pid gone, a zombie, or another process's since) is taken over; one
 * from another host, or unreadable, stands; release removes only one's own. */
static void test_lock(void) {
  make_tmpdir();
  char dir[600], lock[700], host[256] = "";
  snprintf(dir, sizeof dir, "%s", px_test_tmp("a/b/ck"));
  snprintf(lock, sizeof lock, "%s/lock", dir);
  gethostname(host, sizeof host - 1);
  px_err err = {0};
  px_ckpt_lock lk;
  char note[600], want[400];
  /* taken: the directory is created, the lock file names this process */
  CU_ASSERT_EQUAL_FATAL(px_ckpt_lock_take(dir, &lk, note, sizeof note, &err), PX_OK);
  CU_ASSERT(lk.held && note[0] == '\0' && px_file_exists(lock));
  /* a second taker (here: this process again) is refused, the holder named */
  snprintf(want, sizeof want, "is in use by another job: pid %lld on %s since ", (long long)getpid(), host);
  expect_refused(dir, want);
  px_ckpt_lock_release(&lk);
  CU_ASSERT(!lk.held && !px_file_exists(lock));
  CU_ASSERT(!px_file_exists(dir) && px_file_exists(px_test_tmp("a/b"))); /* made by the take, left empty: removed */
  px_ckpt_lock_release(&lk); /* twice is fine */
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0777), 0); /* from here on, one that exists: it stays */

  /* stale: a pid no process has */
  pid_t gone = dead_pid();
  write_lock(lock, host, gone, 0);
  expect_taken_over(dir, lock, gone);
  /* stale: a zombie (killed, not reaped) */
  pid_t z = fork();
  if (z == 0) _exit(0);
  CU_ASSERT_FATAL(z > 0);
  for (int i = 0; i < 200; i++) { /* until it has ended */
    char state[64] = "", path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)z);
    FILE *fp = fopen(path, "r");
    if (fp && fgets(state, sizeof state, fp) && strstr(state, ") Z")) i = 200;
    if (fp) fclose(fp);
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  write_lock(lock, host, z, 0);
  expect_taken_over(dir, lock, z);
  waitpid(z, NULL, 0);
  /* stale: the pid runs another process, started at another time than the holder */
  write_lock(lock, host, getppid(), 1);
  expect_taken_over(dir, lock, getppid());
  /* live: the pid runs (start unknown) */
  write_lock(lock, host, getppid(), 0);
  snprintf(want, sizeof want, "in use by another job: pid %lld on %s", (long long)getppid(), host);
  expect_refused(dir, want);
  /* another host: cannot be checked, stands */
  write_lock(lock, "elsewhere.invalid", gone, 0);
  expect_refused(dir, "from another host, which cannot be checked: if that job is gone, remove the lock file");
  /* unreadable */
  spit_str(lock, "garbage");
  expect_refused(dir, "is locked by a lock file that cannot be read");
  CU_ASSERT_EQUAL(unlink(lock), 0);
  /* taken over by another meanwhile: release leaves theirs */
  CU_ASSERT_EQUAL_FATAL(px_ckpt_lock_take(dir, &lk, note, sizeof note, &err), PX_OK);
  write_lock(lock, "elsewhere.invalid", 4242, 0);
  px_ckpt_lock_release(&lk);
  CU_ASSERT(px_file_exists(lock));
  CU_ASSERT_EQUAL(unlink(lock), 0);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_lock_take(dir, &lk, note, sizeof note, &err), PX_OK);
  px_ckpt_lock_release(&lk);
  CU_ASSERT(px_file_exists(dir)); /* it existed before */
  /* not a directory; cannot be created */
  spit_str(px_test_tmp("file"), "x");
  expect_refused(px_test_tmp("file"), "file: not a directory");
  expect_refused(px_test_tmp("file/sub"), "cannot create directory");
  px_test_rm_tree(tmpdir);
}

int main(void) {
  static const px_test tests[] = {
      {"xxHash64 reference values", test_hash_vectors},
      {"write then read is bitwise, no temporary files", test_roundtrip},
      {"every flipped byte and truncation is detected", test_corruption},
      {"plan, model, rank, coordinates and tensors must match", test_mismatches},
      {"manifest: complete, incomplete, replaced, stale", test_manifest},
      {"staging: a partial write discarded, a stopped commit read and finished", test_staging},
      {"keep: the last K checkpoints, the probe", test_keep},
      {"lock: a second job refused, stale locks taken over", test_lock},
  };
  return px_test_main("ckpt", tests, sizeof tests / sizeof tests[0]);
}
