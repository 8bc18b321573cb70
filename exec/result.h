/* What a training run reports (px_train fills it on every rank): losses,
 * time, memory against the plan's prediction. Plain data without MPI, so
 * that report/ can print it without linking the executor. */
#ifndef PX_EXEC_RESULT_H
#define PX_EXEC_RESULT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
  int64_t first_step, steps;
  double *losses;           /* (steps) */
  double step_time_s;       /* mean over the steps after the first (the first warms up) */
  double tokens_per_s;
  uint64_t peak_bytes;      /* allocated, the largest over ranks */
  uint64_t predicted_peak_bytes; /* the plan's, the largest over stages */
  uint64_t backend_bytes;        /* the backend's own device memory beyond the tensors, largest over ranks */
  uint64_t *stage_peak_bytes;    /* (pp) allocated, largest over the stage's ranks */
  uint64_t *stage_host_bytes;    /* (pp) offloaded to host memory, largest over the stage's ranks */
  uint64_t *stage_nvme_bytes;    /* (pp) ... and to NVMe */
  bool is_root;             /* world rank 0: the one that reports */
  const char *backend;
  int threads;              /* cpu backend: BLAS threads per rank (rank 0's) */
  double *op_s;             /* (nops) this rank's seconds per step of each op of its stage's program */
  int64_t nops;
  double loss_scale;        /* fp16: the final loss scale (1 otherwise) */
  int64_t skipped_steps;    /* fp16: steps skipped for overflowing gradients */
  /* checkpoints (--ckpt): how many were committed, the host snapshot buffer
   * of the largest rank (not in the plan's memory), and the time rank 0's
   * training loop spent on them (snapshots, writes or waits for them) */
  int64_t ckpt_count, ckpt_waits;
  bool ckpt_async;
  uint64_t ckpt_snapshot_bytes;
  double ckpt_blocked_s;
} px_train_result;

void px_train_result_free(px_train_result *r);

#endif
