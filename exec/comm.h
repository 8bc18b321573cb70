/* Communicators of one rank: its (tp, dp, pp) coordinates and one MPI
 * communicator per group of the plan (TP, DP, the tied-embedding pair of
 * first and last stage, everyone), plus its pipeline neighbours. */
#ifndef PX_EXEC_COMM_H
#define PX_EXEC_COMM_H

#include <mpi.h>
#include <stdbool.h>

#include "core/status.h"
#include "plan/plan.h"

typedef struct {
  int world_rank, world_size;
  int64_t tp_rank, dp_rank, pp_rank;
  MPI_Comm world;
  MPI_Comm tp, dp, emb; /* emb: MPI_COMM_NULL unless this rank holds a tied embedding copy across stages */
  int prev, next;       /* world ranks of the same (tp, dp) in the previous / next stage (wrapping) */
} px_comm;

/* MPI must be initialized; the world size must equal the plan's GPUs. */
px_status px_comm_init(px_comm *c, const px_plan *plan, MPI_Comm world, px_err *err);
void px_comm_deinit(px_comm *c);
MPI_Comm px_comm_of(const px_comm *c, px_group g);
/* Translates an MPI error code into a status with a message. */
px_status px_comm_check(int rc, const char *what, px_err *err);

#endif
