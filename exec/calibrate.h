/* Calibration of this machine for the simulator: GEMM efficiency over a grid
 * of shapes, memory bandwidth, per-kind costs of the other ops (fitted from
 * profiled runs of reference plans through the real backend) and collective
 * latency and bandwidth over the ranks at hand. Writes a cluster file in the
 * topologies/ format. Call on every rank (mpirun -np N for the collectives). */
#ifndef PX_EXEC_CALIBRATE_H
#define PX_EXEC_CALIBRATE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/plan.h"

/* One size of a measured collective curve, as rank 0 hands it to
 * px_calib_opts.coll (report/calibrate.h prints them nccl-tests style). */
typedef struct {
  px_coll kind;
  int ranks;
  double busbw_factor; /* busbw = algbw x this */
  uint64_t bytes;      /* nccl-tests' size */
  double time_s;       /* a call, the slowest rank's */
  bool first;          /* the curve's first size */
} px_calib_coll_point;

typedef struct {
  bool quick;          /* fewer shapes and sizes (the tests) */
  bool cuda;           /* one GPU through the CUDA backend (exec/calibrate_gpu.h), not this machine's cores */
  double sustain_s;    /* cuda: seconds of one GEMM back to back for gpu.sustained_share; <= 0: the default */
  const px_plan *const *plans; /* cuda: their linear layers' GEMM shapes and head dims are measured too */
  int nplans;
  FILE *progress;      /* where rank 0 reports progress, NULL for none */
  /* Each size of the collective curves as rank 0 measures it, NULL for none. */
  void (*coll)(void *ctx, const px_calib_coll_point *pt);
  void *coll_ctx;
} px_calib_opts;

/* Measures and fills `out`, starting from `base` (names, host, topology); with
 * o->cuda one GPU (px_calibrate_gpu: one process, the world of one rank). */
px_status px_calibrate(const px_cluster *base, const px_calib_opts *o, MPI_Comm world, px_cluster *out, px_err *err);

#endif
