/* Fuzz harness: a checkpoint's manifest and a shard file (header, tensors,
 * trailer) read back, whole or in parts, are accepted or refused as corrupt,
 * never a crash. */
#include <string.h>

#include "exec/ckpt.h"
#include "tests/fuzz/fuzz_util.h"

/* The one checkpoint the harness expects: two small tensors of rank 0 of 1. */
static float a[16], b[4];
static px_ckpt_tensor expect_t[2] = {{"params", a, 16}, {"adam_m", b, 4}};
static const px_ckpt_meta expect = {.plan_hash = 1, .model_hash = 2, .step = 3, .rank = 0, .world = 1};

/* With PX_FUZZ_SEED_DIR set (scripts/fuzz.sh: the corpus), a valid shard and
 * manifest of that checkpoint are written there as seeds. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *dir = getenv("PX_FUZZ_SEED_DIR");
  px_err err = {0};
  for (int i = 0; i < 16; i++) a[i] = (float)i;
  if (dir && !px_ckpt_write_shard(dir, &expect, expect_t, 2, &err)) (void)px_ckpt_write_manifest(dir, &expect, NULL, &err);
  (void)argc, (void)argv;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  px_err err = {0};
  /* as the manifest (whose shards the input also stands for) */
  if (fuzz_file("manifest.json", data, size, path, sizeof path) && fuzz_file("shard-0.bin", data, size, path, sizeof path)) {
    px_ckpt_manifest man;
    if (!px_ckpt_read_manifest(fuzz_dir(), &man, &err)) px_ckpt_manifest_deinit(&man);
  }
  /* as the shard of the checkpoint expected */
  int64_t step;
  (void)px_ckpt_read_shard(fuzz_dir(), &expect, expect_t, 2, &step, &err);
  /* as a shard opened for resharding: indexed (checked in full, and not), then read in parts */
  for (int verify = 0; verify < 2; verify++) {
    px_ckpt_shard *sh = NULL;
    if (px_ckpt_shard_open(fuzz_dir(), 0, verify, &sh, &err)) continue;
    uint64_t count = 0;
    int t = px_ckpt_shard_find(sh, "params", &count);
    if (t >= 0 && count >= 2) (void)px_ckpt_shard_read(sh, t, count - 2, 2, b, &err);
    px_ckpt_shard_close(sh);
  }
  return 0;
}
