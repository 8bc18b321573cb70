/* The interpreter: runs one stage's program of the compiled plan on a
 * backend, step after step. Tensors are allocated and freed exactly where
 * the plan's lifetimes say, so the memory it allocates can be set beside the
 * plan's prediction; every op is timed for the profile. */
#ifndef PX_EXEC_INTERP_H
#define PX_EXEC_INTERP_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/backend.h"
#include "exec/comm.h"
#include "exec/data.h"
#include "exec/optim.h"
#include "plan/plan.h"

typedef struct px_exec px_exec;

/* Allocates parameters (initialised from the seed, identically whatever the
 * plan), gradients and optimizer state for this rank's stage. The backend
 * must support every op of the plan (px_support_check; px_train asks it). */
px_status px_exec_new(const px_plan *plan, px_backend *be, const px_comm *comm, px_data *data,
                      const px_train_hparams *hp, px_exec **out, px_err *err);
void px_exec_free(px_exec *x);
/* One training step; returns the step's mean loss (the same on every rank). */
px_status px_exec_step(px_exec *x, int64_t step, double *loss, px_err *err);
/* After a step: the reduced gradient of every parameter in the canonical
 * layout (rank 0 writes it to path; others contribute). Call right after
 * the step whose gradients are wanted; set with px_exec_capture_grads first. */
void px_exec_capture_grads(px_exec *x, bool on);
px_status px_exec_write_grads(px_exec *x, const char *path, px_err *err);

/* fp16: the current loss scale and the steps skipped for overflow (1 and 0 otherwise). */
void px_exec_loss_scale(const px_exec *x, double *scale, int64_t *skipped);
/* The last step's global gradient norm before clipping (the same on every rank; NaN: an fp16 step skipped). */
double px_exec_grad_norm(const px_exec *x);
/* The last step's MTP module loss (mean over its positions with a target, before its weight PX_MTP_LOSS_WEIGHT);
 * 0 without one. */
double px_exec_mtp_loss(const px_exec *x);

/* Fine-tuning: a hash of this rank's frozen base weights as they are now (px_ckpt_hash_bytes of their bytes; 0
 * without a frozen base), to show that training left them as they were. */
px_status px_exec_frozen_hash(px_exec *x, uint64_t *hash, px_err *err);
/* Fine-tuning: replaces the frozen base with `values` (prog->frozen's elements in fp32, px_reshard_fill_base). */
px_status px_exec_frozen_set(px_exec *x, const float *values, px_err *err);
/* Fine-tuning with an nf4 or fp8 base: the rank's quantised frozen weights' squared quantisation error (the stored
 * weight dequantised, less the value it was given) and their squares, each summed over the elements, as last set. */
void px_exec_frozen_quant_sums(const px_exec *x, double sums[2]);

/* Bytes allocated through the interpreter now and at most. */
uint64_t px_exec_peak_bytes(const px_exec *x);
uint64_t px_exec_current_bytes(const px_exec *x);
/* Offload: bytes this rank keeps in host memory and on NVMe. */
void px_exec_offload_bytes(const px_exec *x, uint64_t *host, uint64_t *nvme);

/* Checkpoint state of this rank: named buffers. */
typedef struct {
  const char *name;
  void *data;     /* device pointer, or host pointer when host */
  uint64_t count; /* elements of dtype */
  px_dtype dtype;
  bool host;
} px_exec_state;
int px_exec_states(px_exec *x, px_exec_state *out, int cap);
/* The states a backend keeps in its own form (fp8 delayed scaling's amax
 * histories) have buffers here: px_exec_states_get fills them with what the
 * backend holds before step `step` (the steps run so far), before a
 * checkpoint reads the states; px_exec_states_set hands them back to the
 * backend, after a resume wrote them, as they stand before step `step`. */
px_status px_exec_states_get(px_exec *x, int64_t step, px_err *err);
px_status px_exec_states_set(px_exec *x, int64_t step, px_err *err);

/* Per-op timing over the steps since the last reset (seconds, by stage-local
 * op id = program instance's first op + index in its block). */
const double *px_exec_op_times(const px_exec *x, int64_t *nops, int64_t *steps);
void px_exec_reset_times(px_exec *x);

#endif
