/* Measurements into a cluster file (`parallax calibrate --import FILE...`):
 * nccl-tests outputs (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
 * sendrecv_perf) become the measured collective curves of the link class
 * they ran on, and a GEMM benchmark CSV (m,n,k,dtype,tflops) the measured
 * GEMM table, each efficiency against the GPU's peak for its dtype. */
#ifndef PX_PLAN_IMPORT_H
#define PX_PLAN_IMPORT_H

#include "core/status.h"
#include "plan/cluster.h"

/* Reads each file into c: a file's curve replaces the cluster's points of
 * that collective on that link class; the GEMM rows of every CSV replace
 * its table; the source names each file. A file is an nccl-tests output
 * (its collective from a "KIND=FILE" argument, its "# Collective test
 * concluded:" line or its name; its ranks and nodes from its "Rank ... on
 * HOST" lines) or a CSV whose header has m, n, k, dtype and tflops. Errors
 * name the file, the line and what was wrong; c is unchanged on error. */
px_status px_cluster_import(px_cluster *c, const char *const *files, int n, px_err *err);

#endif
