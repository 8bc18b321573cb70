/* The training loop: builds the communicators and the backend, runs the
 * steps, reports losses, time and memory, and writes and resumes
 * checkpoints and the per-op profile. Called on every MPI rank. */
#ifndef PX_EXEC_TRAIN_H
#define PX_EXEC_TRAIN_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/interp.h"
#include "plan/plan.h"

typedef struct {
  const char *backend;      /* "cpu" or "cuda"; NULL: cuda when a device is present */
  int64_t steps;            /* run until this many steps are done (counting resumed ones) */
  const char *data_path;    /* NULL: the built-in synthetic stream */
  px_train_hparams hp;
  const char *ckpt_dir;
  int64_t ckpt_every;       /* 0: only at the end when ckpt_dir is set */
  bool resume;
  const char *profile_path; /* per-op times (JSON) */
  bool time_ops;            /* exact per-op times on a device (each op waited for); implied by profile_path */
  const char *grads_path;   /* gradients of the first step, canonical layout, raw fp32 */
} px_train_opts;

typedef struct {
  int64_t first_step, steps;
  double *losses;           /* (steps) */
  double step_time_s;       /* mean over the steps after the first (the first warms up) */
  double tokens_per_s;
  uint64_t peak_bytes;      /* allocated, the largest over ranks */
  uint64_t predicted_peak_bytes; /* the plan's, the largest over stages */
  uint64_t backend_bytes;        /* the backend's own device memory beyond the tensors, largest over ranks */
  uint64_t *stage_peak_bytes;    /* (pp) allocated, largest over the stage's ranks */
  bool is_root;             /* world rank 0: the one that reports */
  const char *backend;
  double *op_s;             /* (nops) this rank's seconds per step of each op of its stage's program */
  int64_t nops;
  double loss_scale;        /* fp16: the final loss scale (1 otherwise) */
  int64_t skipped_steps;    /* fp16: steps skipped for overflowing gradients */
} px_train_result;

void px_train_opts_init(px_train_opts *o);
/* cuda when this build has the CUDA backend and a device is visible, else cpu. */
const char *px_train_default_backend(void);
/* The cluster preset a run on this backend defaults to: local-cpu, or the
 * DGX / HGX preset of device 0 (A100, H200; H100 otherwise). */
const char *px_train_default_cluster(const char *backend);
px_status px_train(const px_plan *plan, const px_train_opts *o, MPI_Comm world, px_train_result *r, px_err *err);
void px_train_result_free(px_train_result *r);

#endif
