/* What a training run reports (px_train fills it on every rank): losses,
 * time, memory against the plan's prediction. Plain data without MPI, so
 * that report/ can print it without linking the executor. */
#ifndef PX_EXEC_RESULT_H
#define PX_EXEC_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most steps a run trains (--steps), 2^24: it keeps each step's loss and
 * time (16 bytes a step, 256 MiB at the limit); Llama 3 405B's 15.6 T tokens
 * at its final 16 M a step are under a million. */
#define PX_TRAIN_STEPS_MAX ((int64_t)1 << 24)

/* The largest profile (run --profile) parallax compare reads, and so the
 * most a run writes: 64 MiB, numbers of up to 24 bytes of JSON each (32
 * counted), a time per step and per op of each stage's program: 2 M of
 * them. Tiny's 16 micro-batches on 2 stages take 1,878 (45 KB). */
#define PX_PROFILE_MAX_BYTES ((size_t)64 << 20)
#define PX_PROFILE_NUMBER_BYTES 32

/* One training step as it ends (px_train_opts.on_step): what rank 0 logs. */
typedef struct {
  int64_t step;        /* from 1, counting resumed ones */
  int64_t last;        /* the step the run trains to (--steps) */
  double loss;         /* the step's mean loss (the same on every rank) */
  double mtp_loss;     /* the MTP module's (px_exec_mtp_loss); 0 without one */
  double grad_norm;    /* the global gradient norm before clipping; NaN: an fp16 step skipped for overflow */
  double loss_scale;   /* fp16's loss scale after the step (1 otherwise) */
  double step_time_s;  /* the slowest rank's */
  uint64_t peak_bytes; /* allocated at peak so far, the largest rank's */
} px_train_step;

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
  uint64_t frozen_hash;     /* fine-tuning: the frozen base weights' hashes (px_exec_frozen_hash) summed over the
                               ranks; the run fails if any rank's changed while training */
  double base_quant_error;  /* ... an nf4 or fp8 base: the relative RMS error of its quantised weights, sqrt(sum of
                               squared errors / sum of squares) over every rank's (px_exec_frozen_quant_sums); 0 else */
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
