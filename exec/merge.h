/* parallax merge: LoRA adapters merged into their frozen base, W + (alpha / r) B A for every adapted linear
 * weight, written as the full checkpoint a pre-training run writes (exec/ckpt.h), for any plan of the model. */
#ifndef PX_EXEC_MERGE_H
#define PX_EXEC_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

typedef struct {
  const char *adapters;  /* the checkpoint of a fine-tuning run with adapters (run --finetune lora --ckpt) */
  const char *base_ckpt; /* the frozen base its run took (`base_ckpt`); NULL: the initialisation of `seed` */
  uint64_t seed;
} px_merge_opts;

typedef struct px_merge px_merge; /* opaque: adapters merged into their base, in the canonical layout (fp32) */

/* Reads the adapters' checkpoint (px_reshard_open_adapters' checks) and the base (o->base_ckpt's weights, re-split
 * as px_reshard_open_base does, or the model's initialisation of o->seed), refuses a base whose hash over the
 * adapters' plan's ranks (px_exec_frozen_hash, summed) is not the one the adapters' manifest records (PX_ERR_INPUT:
 * naming both hashes, `seed` and `base_ckpt`), and merges. The whole model is held in memory in fp32. */
px_status px_merge_open(const px_merge_opts *o, px_merge **out, px_err *err);
void px_merge_free(px_merge *m);
/* The adapters' plan, the step of their checkpoint, how many adapters were merged, and where the base came from
 * ("the initialisation of seed 1234", "the weights of DIR's checkpoint of step 40 (tp 1 x pp 1 x dp 2, ...)"). */
const px_plan *px_merge_from(const px_merge *m);
int64_t px_merge_step(const px_merge *m);
int64_t px_merge_count(const px_merge *m);
const char *px_merge_base(const px_merge *m);
/* Writes into dir the full checkpoint of plan `to` (a plan of the same model without adapters; not fp16, whose loss
 * scaler has no state to take): every weight the merged one, Adam's moments zero, fp8's amax histories empty, the
 * adapters' step; staged and committed as px_reshard_write's (whether dir may be written is the caller's: its
 * lock and px_ckpt_probe). *bytes_out (may be NULL) gets the bytes of the shards. */
px_status px_merge_write(px_merge *m, const px_plan *to, const char *dir, uint64_t *bytes_out, px_err *err);

#endif
