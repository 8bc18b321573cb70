/* The training loop: builds the communicators and the backend, runs the
 * steps, reports losses, time and memory, and writes and resumes
 * checkpoints and the per-op profile. Called on every MPI rank. */
#ifndef PX_EXEC_TRAIN_H
#define PX_EXEC_TRAIN_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/interp.h"
#include "exec/result.h"
#include "plan/plan.h"

typedef struct {
  const char *backend;      /* "cpu" or "cuda"; NULL: cuda when a device is present */
  int64_t steps;            /* run until this many steps are done (counting resumed ones) */
  const char *data_path;    /* NULL: the built-in synthetic stream */
  px_train_hparams hp;
  const char *ckpt_dir;
  const char *base_ckpt;    /* fine-tuning: the frozen base is this checkpoint's weights (a run that trained every
                               weight, any plan of the model; px_reshard_open_base), not the initialisation's */
  int64_t ckpt_every;       /* 0: only at the end when ckpt_dir is set */
  bool ckpt_async;          /* snapshot to host memory, write on a background thread while training goes on */
  bool resume;
  bool overwrite;           /* ckpt_dir may hold a checkpoint, which this run's first one replaces (else refused
                               unless resume) */
  int64_t ckpt_keep;        /* keep the last K checkpoints (ckpt_dir/step-<N>/ the older ones); 0: not asked,
                               the latest alone, older ones left as they are (px_ckpt_commit_keep) */
  const char *profile_path; /* per-op times (JSON) */
  bool time_ops;            /* exact per-op times on a device (each op waited for); implied by profile_path */
  const char *grads_path;   /* gradients of the first step, canonical layout, raw fp32 */
  int threads;              /* cpu backend: BLAS threads per rank, 0: px_cpu_blas_threads' choice */
  /* Called on world rank 0 as each step ends (before its checkpoint), with
   * what the run's log says of it; the caller owns the format (report/run.h). */
  void (*on_step)(void *ctx, const px_train_step *s);
  void *on_step_ctx;
} px_train_opts;

void px_train_opts_init(px_train_opts *o);
/* cuda when the NVIDIA driver is there and the CUDA module (exec/cuda_load.h) loads and sees a device, else cpu. */
const char *px_train_default_backend(void);
/* Whether `backend` runs every op of plan, asked as a run's first check
 * does but in this process alone (no MPI, no device): PX_ERR_INPUT naming
 * the first op refused and why. The cpu backend answers from the plan; the
 * cuda backend's answer depends on the GPU each rank gets (fp8 needs
 * compute capability 8.9), so for it PX_OK: its run asks. */
px_status px_train_support(const px_plan *plan, const char *backend, px_err *err);
/* The cluster preset a run on this backend defaults to: local-cpu, or the
 * DGX / HGX preset of device 0 (A100, H200; H100 otherwise). */
const char *px_train_default_cluster(const char *backend);
px_status px_train(const px_plan *plan, const px_train_opts *o, MPI_Comm world, px_train_result *r, px_err *err);

#endif
