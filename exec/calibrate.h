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

typedef struct {
  bool quick;          /* fewer shapes and sizes (the tests) */
  FILE *progress;      /* where rank 0 reports progress, NULL for none */
  FILE *table;         /* where rank 0 prints the collective table (nccl-tests style), NULL for none */
} px_calib_opts;

/* Measures and fills `out`, starting from `base` (names, host, topology). */
px_status px_calibrate(const px_cluster *base, const px_calib_opts *o, MPI_Comm world, px_cluster *out, px_err *err);

#endif
