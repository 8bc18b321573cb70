/* Checkpoints: one checksummed shard file per rank plus a manifest.json that
 * rank 0 writes last, so a directory without a manifest is known incomplete. */
#ifndef PX_EXEC_CKPT_H
#define PX_EXEC_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct cJSON;

/*
 * A checkpoint is a directory:
 *   <dir>/shard-<rank>.bin   one per rank, written with px_ckpt_write_shard
 *   <dir>/manifest.json      written by rank 0 after every shard exists
 *                            (the executor puts an MPI barrier in between)
 *   <dir>/.next/             staging: a new checkpoint is written here
 *                            (shards, then its manifest) and moved into
 *                            <dir> by px_ckpt_commit, so that the one in
 *                            <dir> stays whole until the new one is.
 *   <dir>/step-<N>/          with --ckpt-keep K > 1: the K - 1 checkpoints
 *                            before the latest, step N's in step-<N>/, each
 *                            a checkpoint directory of its own (reshard
 *                            --from <dir>/step-<N>, or run --ckpt
 *                            <dir>/step-<N> --resume, which then goes on
 *                            there); made at a commit from the latest's
 *                            files by hard links (a copy where the file
 *                            system has none), the oldest removed after it
 *   <dir>/lock               the job writing <dir> (exec/ckpt_lock.h)
 * The latest checkpoint is always <dir>'s own: --resume, launch and reshard
 * --from <dir> read it there.
 * A run that stops while writing leaves .next without a manifest (the
 * checkpoint in <dir> is the last complete one; px_ckpt_recover discards
 * .next), or, stopped while moving, .next with a manifest (complete and
 * durable; px_ckpt_recover finishes the move, and until then the readers
 * below read that checkpoint: the staged manifest, and each shard from .next
 * where it is still there, else from <dir>).
 *
 * Shard file format, version 1. Every integer is little-endian, no padding:
 *   offset size  field
 *   0      8     magic "PXCKPT01"
 *   8      4     uint32 format version (1)
 *   12     8     uint64 plan_hash
 *   20     8     uint64 model_hash
 *   28     8     int64  step
 *   36     4     int32  rank
 *   40     4     int32  world
 *   44     4     int32  tp_rank
 *   48     4     int32  pp_rank
 *   52     4     int32  dp_rank
 *   56     4     uint32 tensor count n
 *   60           n tensors, each:
 *                  uint32 name length k (1..255)
 *                  k bytes name (no terminating NUL)
 *                  uint64 element count c
 *                  c x 4 bytes IEEE-754 fp32 data
 *   then   8     uint64 checksum: px_ckpt_hash_bytes(every preceding byte, seed 0)
 * The file size is therefore fully determined by the header and tensor
 * entries; any other size is truncation or corruption.
 * The executor's shards hold the rank's states px_param_states lists
 * (exec/params.h), in that order: "params", "master", "adam_m", "adam_v",
 * "loss_scaler" (fp16) and "fp8_amax" (fp8 delayed scaling's amax
 * histories: exec/amax.h), those its plan keeps; every other input of a step
 * is a function of the step and the seed. "fp8_amax" came later within
 * version 1: a shard without it still loads, its histories afresh.
 *
 * Manifest format, version 2 (px_ckpt_write_manifest has its fields): version
 * 1 plus "plan", the plan that wrote the checkpoint as a plan file records it
 * (model, cluster, gpus, parallel: plan/planfile.h), from which a reader
 * rebuilds every rank's layout to re-split the states for another plan
 * (exec/reshard.h). Version 1 manifests (no plan) are still read: such a
 * checkpoint resumes its own plan only. The shards are unchanged (version 1).
 */
#define PX_CKPT_MAGIC "PXCKPT01"
#define PX_CKPT_VERSION 1u
#define PX_CKPT_MANIFEST_VERSION 2u
#define PX_CKPT_HEADER_BYTES 60
#define PX_CKPT_NAME_MAX 255
#define PX_CKPT_MANIFEST "manifest.json"
#define PX_CKPT_STAGING ".next"
#define PX_CKPT_KEPT_PREFIX "step-" /* <dir>/step-<N>: a kept older checkpoint */

typedef struct {
  uint64_t plan_hash;  /* hash of the plan description (px_ckpt_hash_bytes) */
  uint64_t model_hash; /* hash of the model description */
  int64_t step;        /* optimizer steps completed */
  int32_t rank, world; /* 0 <= rank < world */
  int32_t tp_rank, pp_rank, dp_rank;
} px_ckpt_meta;

typedef struct {
  const char *name; /* 1..255 bytes */
  float *data;      /* (count) */
  uint64_t count;
} px_ckpt_tensor;

typedef struct {
  int32_t rank;
  uint64_t size_bytes;
  uint64_t checksum; /* the shard's trailer */
} px_ckpt_shard_info;

/* Caller-owned; release with px_ckpt_manifest_deinit. */
typedef struct {
  int32_t version; /* of the manifest: 1 or 2 */
  int64_t step;
  int32_t world;
  uint64_t plan_hash, model_hash;
  struct cJSON *plan;         /* the plan record (version 2), NULL when the manifest has none */
  px_ckpt_shard_info *shards; /* (world), shards[r].rank == r */
} px_ckpt_manifest;

/* xxHash64 (the published algorithm) of n bytes; px_ckpt_hash_bytes("", 0, 0)
 * = 0xEF46DB3751D8E999. Shard checksums use seed 0. */
uint64_t px_ckpt_hash_bytes(const void *p, size_t n, uint64_t seed);

/* "<dir>/shard-<rank>.bin" into buf. */
px_status px_ckpt_shard_path(const char *dir, int32_t rank, char *buf, size_t cap, px_err *err);

/* Writes <dir>/shard-<meta->rank>.bin through a temporary file, fsync,
 * rename and fsync of dir, creating dir if needed. Names must be 1..255
 * bytes. A failed write names the file and the system's reason (errno). */
px_status px_ckpt_write_shard(const char *dir, const px_ckpt_meta *meta, const px_ckpt_tensor *tensors, int n,
                              px_err *err);
/* The same, sleeping pause_ms after the first tensor's data is written and
 * flushed: a test hook (PX_CKPT_TEST_DELAY_MS), so that a test can stop a
 * run in the middle of a write. */
px_status px_ckpt_write_shard_paced(const char *dir, const px_ckpt_meta *meta, const px_ckpt_tensor *tensors, int n,
                                    unsigned pause_ms, px_err *err);

/* Reads shard expect->rank of the checkpoint in dir (<dir>/shard-<rank>.bin,
 * or in staging during a stopped commit) into the caller's buffers: checks the
 * magic, version, size and checksum (refused as corrupt or truncated), then
 * that plan_hash, model_hash, rank, world and tp/pp/dp ranks equal expect's
 * (expect->step is not compared), and that the file holds exactly n tensors
 * with tensors[i].name and .count in order. The messages name the shard and
 * what differs. *step_out (may be NULL) gets the shard's step. On failure the
 * buffers' contents are unspecified. */
px_status px_ckpt_read_shard(const char *dir, const px_ckpt_meta *expect, px_ckpt_tensor *tensors, int n,
                             int64_t *step_out, px_err *err);

/* Rank 0, after every rank's shard exists: reads each shard's header and
 * trailer, checks they belong to this checkpoint (same step, world, plan and
 * model hash as meta), and writes <dir>/manifest.json atomically:
 *   {"format": "parallax-checkpoint", "version": 2, "step": ..., "world": ...,
 *    "plan_hash": "0x<16 hex>", "model_hash": "0x<16 hex>",
 *    "plan": {...},
 *    "shards": [{"file": "shard-0.bin", "rank": 0, "size_bytes": ...,
 *                "checksum": "0x<16 hex>"}, ...]}
 * plan (copied as it is; NULL leaves the field out) is the caller's record
 * of the plan: this module does not read it. */
px_status px_ckpt_write_manifest(const char *dir, const px_ckpt_meta *meta, const struct cJSON *plan, px_err *err);

/* Reads the manifest of the checkpoint in dir (version 1 or 2; the staged one
 * of a stopped commit, see above) and checks every shard it lists exists with
 * the recorded size and trailer checksum, and a header that agrees with it.
 * A directory without a manifest is refused: as incomplete when it has
 * shards, else as holding no checkpoint. */
px_status px_ckpt_read_manifest(const char *dir, px_ckpt_manifest *out, px_err *err);
void px_ckpt_manifest_deinit(px_ckpt_manifest *m);

/* Parts of a shard, for a reader that takes pieces of many (resharding). */
typedef struct px_ckpt_shard px_ckpt_shard; /* opaque: an open, indexed shard file */
/* Opens shard `rank` of the checkpoint in dir (as px_ckpt_read_shard finds
 * it) and indexes its tensors (name, count, where
 * the data lie) from its header and entries, checking its structure as
 * px_ckpt_read_shard does. verify: reads all of it and checks the checksum
 * too (else the data read later are as trusted as the caller's other checks:
 * the manifest's size and stored checksum, or a verifying open elsewhere). */
px_status px_ckpt_shard_open(const char *dir, int32_t rank, bool verify, px_ckpt_shard **out, px_err *err);
void px_ckpt_shard_close(px_ckpt_shard *s);
/* Closes the file but keeps the index; the next read opens it again (to
 * read from more shards than a process may have open). */
void px_ckpt_shard_park(px_ckpt_shard *s);
const px_ckpt_meta *px_ckpt_shard_meta(const px_ckpt_shard *s);
/* The index of the tensor called name and its element count; -1 when absent. */
int px_ckpt_shard_find(const px_ckpt_shard *s, const char *name, uint64_t *count);
/* Elements [first, first + n) of tensor i into out (n). */
px_status px_ckpt_shard_read(px_ckpt_shard *s, int i, uint64_t first, uint64_t n, float *out, px_err *err);

/* "<dir>/.next": where every rank writes its shard of a new checkpoint. */
px_status px_ckpt_staging_path(const char *dir, char *buf, size_t cap, px_err *err);
/* Rank 0, after every rank's shard is in staging and durable: writes the
 * manifest there (checking the shards as px_ckpt_write_manifest does), then
 * moves the shards and the manifest, last, into dir (fsync of dir after
 * each), removes staging, and then the shards of ranks >= meta->world that
 * a checkpoint of a larger world left in dir. */
px_status px_ckpt_commit(const char *dir, const px_ckpt_meta *meta, const struct cJSON *plan, px_err *err);

typedef enum {
  PX_CKPT_RECOVERY_NONE,      /* no staging directory */
  PX_CKPT_RECOVERY_DISCARDED, /* a write that had not finished: removed */
  PX_CKPT_RECOVERY_COMPLETED, /* a commit that had not finished: done now */
} px_ckpt_recovery;
/* Rank 0, before anything reads or writes dir: puts in order what a run
 * that stopped while checkpointing left in staging (see above). */
px_status px_ckpt_recover(const char *dir, px_ckpt_recovery *what, px_err *err);
/* Rank 0, after a checkpoint's write or commit failed and every rank's write
 * has ended: removes staging and what it holds, unless its manifest was
 * written (that checkpoint is complete: the commit stands, px_ckpt_recover
 * finishes it). */
px_status px_ckpt_abandon(const char *dir, px_err *err);

/* Rank 0: px_ckpt_commit, keeping older checkpoints as --ckpt-keep asks.
 * keep > 1: the checkpoint dir holds now is kept in dir/step-<its step>/
 * first, and after the commit the kept ones but the keep - 1 newest go;
 * keep 1: every kept one goes; keep 0 (not asked): they stay as they are.
 * A kept one that a job is using (its lock: run --ckpt dir/step-<N>) stays.
 * fresh: the first commit of a run that did not resume what dir holds (or
 * a reshard): it replaces dir's checkpoints, so none is kept and every
 * step-<N>/ goes after the commit. */
px_status px_ckpt_commit_keep(const char *dir, const px_ckpt_meta *meta, const struct cJSON *plan, int64_t keep,
                              bool fresh, px_err *err);

/* What a directory holds, read only: the one rule for "does dir hold a
 * checkpoint, and of which step" (run and reshard --to refuse such a
 * directory unless told to resume or replace it; launch resumes from it). */
typedef struct {
  bool found;      /* a complete checkpoint: dir's manifest, or a staged one (a stopped commit) */
  bool staged;     /* found in staging: a commit stopped midway, which the next run finishes */
  int64_t step;    /* its step; -1 when its manifest cannot be read */
  char model[128]; /* the model its plan record names; "" when it records none */
  int64_t kept;    /* older checkpoints kept in dir/step-<N>/ */
  int64_t kept_newest; /* the step of the newest of them; -1 none */
} px_ckpt_probe_info;
/* Never fails: a directory that is missing or cannot be read holds nothing. */
void px_ckpt_probe(const char *dir, px_ckpt_probe_info *out);
/* For messages: "the checkpoint of step 6 (model tiny)", "... and 2 older
 * checkpoints in step-<N>/ (the newest of step 5)", "no checkpoint". */
void px_ckpt_probe_describe(const px_ckpt_probe_info *p, char *buf, size_t cap);

#endif
