/* Communicators of one rank: its (tp, cp, dp, pp) coordinates and one MPI
 * communicator per group of the plan (TP, CP, DP x CP, the tied-embedding pair of
 * first and last stage, everyone, ZeRO's shard and replica groups), plus its
 * pipeline neighbours; and the generic steps every MPI caller needs (agreeing
 * on failure, gathering bytes). */
#ifndef PX_EXEC_COMM_H
#define PX_EXEC_COMM_H

#include <mpi.h>
#include <stdbool.h>

#include "core/status.h"
#include "plan/plan.h"

typedef struct {
  int world_rank, world_size;
  int64_t tp_rank, cp_rank, dp_rank, pp_rank;
  int64_t wdp_rank;     /* in the DP x CP group: cp_rank + cp x dp_rank */
  int64_t ep_rank;      /* in its EP group (wdp_rank mod ep): which experts it holds */
  MPI_Comm world;
  MPI_Comm tp, cp;
  MPI_Comm ep, edp;     /* expert parallelism: the DP x CP ranks splitting the experts, those holding the same ones */
  MPI_Comm dp;          /* the DP x CP group: the ranks holding the same weights */
  MPI_Comm emb;         /* MPI_COMM_NULL unless this rank holds a tied embedding copy across stages */
  MPI_Comm shard, replica; /* hybrid sharding (shard group < dp): the rank's ZeRO shard group and the ranks
                              holding its shard; MPI_COMM_NULL otherwise */
  int prev, next;       /* world ranks of the same (tp, cp, dp) in the previous / next stage (wrapping) */
  int cp_prev, cp_next; /* world ranks before and after this one on the CP ring (wrapping) */
} px_comm;

/* MPI must be initialized; the world size must equal the plan's GPUs. */
px_status px_comm_init(px_comm *c, const px_plan *plan, MPI_Comm world, px_err *err);
void px_comm_deinit(px_comm *c);
MPI_Comm px_comm_of(const px_comm *c, px_group g);
/* Translates an MPI error code into a status with a message. */
px_status px_comm_check(int rc, const char *what, px_err *err);

/* Every rank of comm learns whether any failed, and every one returns the
 * same status: the largest any rank had (an input error, 2, over a runtime
 * one, 1), so that the job's exit status does not depend on which rank ends
 * first. A failed rank keeps its message; the others get msg. PX_OK when none
 * failed. Collective. */
px_status px_comm_agree_as(px_status st, MPI_Comm comm, const char *msg, px_err *err);
/* px_comm_agree_as with "another rank failed (see its message)". */
px_status px_comm_agree(px_status st, MPI_Comm comm, px_err *err);
/* Gathers `bytes` bytes from each rank of comm to root, in rank order. On
 * root *all (malloc'd, the caller frees it) holds them and *total their size;
 * elsewhere *all is NULL and *total 0. Knows nothing of what the bytes are.
 * Collective; when root cannot take them (out of memory, more than INT_MAX
 * bytes in all) every rank returns the error. */
px_status px_comm_gather_bytes(const void *mine, size_t bytes, int root, MPI_Comm comm, void **all, size_t *total,
                               px_err *err);

#endif
