/* Checkpoints across plans: what a checkpoint records of its plan, and the
 * re-splitting of its states for another plan of the same model through the
 * canonical layout (parallax reshard, and run --resume of another plan's). */
#ifndef PX_EXEC_RESHARD_H
#define PX_EXEC_RESHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"
#include "exec/ckpt.h"
#include "exec/params.h"
#include "plan/plan.h"
#include "plan/planfile.h"

/* What a plan's checkpoints belong to: the model's hash, and the plan's
 * (the parallel choices, seeded with the model's). */
void px_reshard_hashes(const px_plan *plan, uint64_t *plan_hash, uint64_t *model_hash);
/* The shard header of world rank `rank` of a plan at `step`. */
void px_reshard_meta(const px_plan *plan, int64_t rank, int64_t step, px_ckpt_meta *meta);
/* The record of a plan a manifest keeps (a plan file's JSON, plan/planfile.h);
 * NULL when out of memory. The caller deletes it. */
cJSON *px_reshard_record(const px_plan *plan);
/* The record's key of a fine-tuning run's frozen base ("0x" and 16 hex digits: px_exec_frozen_hash summed over
 * the ranks): the base its adapters were trained on, which the checkpoint does not hold. */
#define PX_RESHARD_FROZEN_HASH "frozen_base_hash"
/* "tp 2 x pp 2 x dp 2, ZeRO-1, fp32, 8 ranks" (cp, ep and a shard group when
 * used; fp8's recipe and base: "fp8 (delayed, bf16 base)"). */
void px_reshard_describe(const px_plan *plan, char *buf, size_t cap);

/* The plan record of the checkpoint in dir, read as a plan file (refused for
 * a checkpoint that records none): what reshard takes its defaults from. */
px_status px_reshard_recorded(const char *dir, px_planfile *pf, px_err *err);

typedef struct px_reshard px_reshard; /* opaque: a checkpoint opened to be re-split for a plan */

/* Opens the checkpoint in dir to re-split it for plan `to`: reads the
 * manifest (px_ckpt_read_manifest's checks), refuses a checkpoint of another
 * model, one that records no plan (manifest version 1), a record that does
 * not rebuild the plan that wrote it (its hash), and a change into or out of
 * fp16's loss scaling (whose state has no counterpart); compiles the old
 * plan and indexes every old shard, checking the names and sizes of its
 * states. The checksums of the shards i with i mod verify_ranks ==
 * verify_rank are checked in full (0 and 1: all of them; a caller that
 * splits the checking must agree on its outcome). Every message names the
 * file and the reason. */
px_status px_reshard_open(const char *dir, const px_plan *to, int64_t verify_rank, int64_t verify_ranks,
                          px_reshard **out, px_err *err);
/* The same for the frozen base of a fine-tuning plan `to` (finetune lora): the checkpoint of a run that trained
 * every weight (pre-training or full fine-tuning, any plan of the same model), read by px_reshard_fill_base;
 * refused for an adapters' checkpoint or a `to` without adapters. */
px_status px_reshard_open_base(const char *dir, const px_plan *to, int64_t verify_rank, int64_t verify_ranks,
                               px_reshard **out, px_err *err);
/* The same for merging (parallax merge): the checkpoint of a fine-tuning run with adapters, opened for its own plan
 * (px_reshard_from), its canonical layout with the adapters (px_reshard_global); refused for one without. */
px_status px_reshard_open_adapters(const char *dir, px_reshard **out, px_err *err);
void px_reshard_free(px_reshard *r);
/* The step the checkpoint was taken after, and the plan that wrote it. */
int64_t px_reshard_step(const px_reshard *r);
/* After px_reshard_fill: whether some fp8 amax history of the new plan had
 * none in the checkpoint to take (its plan had no delayed scaling, or it is
 * from before checkpoints kept them) and starts afresh. */
bool px_reshard_amax_fresh(const px_reshard *r);
const px_plan *px_reshard_from(const px_reshard *r);

/* The states of world rank `rank` of plan `to`, in fp32: tensors[i] must be
 * the rank's px_param_states in order (name px_state_names, count). Each
 * element gets the old value of its canonical element: the weights from the
 * fp32 master weights where the old plan has them (rounded to the new
 * parameter dtype for "params" when that is 16-bit), the moments as they
 * are, the loss scaler from old rank 0; padding gets zeros. The fp8 amax
 * histories go by tensor and global layer (exec/reshard.c's fill_amax says
 * from which old ranks). */
px_status px_reshard_fill(px_reshard *r, int64_t rank, px_ckpt_tensor *tensors, int n, px_err *err);
/* After px_reshard_open_base: the frozen base of world rank `rank` of `to` (its prog->frozen, n elements in
 * fp32), each weight the checkpoint's (from its fp32 master weights where the old plan has them). */
px_status px_reshard_fill_base(px_reshard *r, int64_t rank, float *data, uint64_t n, px_err *err);

/* The checkpoint's weights of canonical elements [canon, canon + n) (px_reshard_global's layout) into out (n), in
 * fp32: from its fp32 master weights where its plan keeps them. */
px_status px_reshard_weights(px_reshard *r, uint64_t canon, uint64_t n, float *out, px_err *err);
/* The canonical layout the checkpoint is read in: the model's tensors, and px_reshard_open_adapters' adapters. */
const px_global_params *px_reshard_global(const px_reshard *r);
/* The frozen base's hash an adapters' checkpoint records (PX_RESHARD_FROZEN_HASH); refused when malformed. */
px_status px_reshard_frozen_hash(const px_reshard *r, uint64_t *hash, px_err *err);

/* parallax reshard: writes into dir a checkpoint of plan `to` (every rank's
 * shard, then the manifest; staged and committed as a run's checkpoint is,
 * so a checkpoint already in dir stays whole until the new one is, and the
 * older ones kept in dir/step-<N>/ go after it: px_ckpt_commit_keep's
 * fresh). Whether dir may be written is the caller's: its lock, and
 * whether what it holds may be replaced (px_ckpt_probe).
 * *bytes_out (may be NULL) gets the bytes of the shards written. */
px_status px_reshard_write(px_reshard *r, const char *dir, uint64_t *bytes_out, px_err *err);
/* The states of world rank `rank` of the plan being written, as px_reshard_fill fills them. */
typedef px_status (*px_reshard_filler)(void *ctx, int64_t rank, px_ckpt_tensor *tensors, int n, px_err *err);
/* The same writing (and commit) for any source: each rank's states of plan `to` from fill, the checkpoint of `step`. */
px_status px_reshard_write_states(const px_plan *to, int64_t step, px_reshard_filler fill, void *ctx, const char *dir,
                                  uint64_t *bytes_out, px_err *err);

#endif
