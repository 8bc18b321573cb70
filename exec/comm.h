/* Communicators of one rank: its (tp, cp, dp, pp) coordinates and one MPI
 * communicator per group of the plan (TP, CP, DP x CP, the tied-embedding pair of
 * first and last stage, everyone, ZeRO's shard and replica groups, the MoE
 * layers' EP, expert-DP and ETP groups), plus its pipeline neighbours; the
 * generic steps every MPI caller needs (agreeing on failure, gathering bytes);
 * and every MPI call of exec/: the backends' collectives in host memory, the
 * training loop's. */
#ifndef PX_EXEC_COMM_H
#define PX_EXEC_COMM_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "exec/backend.h"
#include "plan/grid.h"

typedef struct {
  int world_rank, world_size;
  int64_t tp_rank, cp_rank, dp_rank, pp_rank;
  int64_t wdp_rank;     /* in the DP x CP group: cp_rank + cp x dp_rank */
  int64_t ep_rank;      /* in its EP group: which experts it holds (px_grid_expert_coords) */
  MPI_Comm world;
  MPI_Comm tp, cp;
  MPI_Comm ep, edp;     /* expert parallelism (the MoE layers' fold of a stage's ranks, px_grid_set_ep): the ranks
                           splitting the experts, those holding the same ones */
  MPI_Comm etp;         /* expert tensor parallelism: the ranks splitting the same experts' width */
  MPI_Comm dp;          /* the DP x CP group: the ranks holding the same weights */
  MPI_Comm emb;         /* MPI_COMM_NULL unless this rank holds a tied embedding copy across stages */
  MPI_Comm shard, replica; /* hybrid sharding (shard group < dp): the rank's ZeRO shard group and the ranks
                              holding its shard; MPI_COMM_NULL otherwise */
  int prev, next;       /* world ranks of the same (tp, cp, dp) in the previous / next stage (wrapping) */
  int cp_prev, cp_next; /* world ranks before and after this one on the CP ring (wrapping) */
} px_comm;

/* The communicators of grid g (a compiled plan's) over world: MPI must be
 * initialized, the world size equal to the grid's ranks. shares_embedding:
 * the first and last stage hold copies of the embedding (the EMB group; px_plan_shares_embedding). */
px_status px_comm_init(px_comm *c, const px_grid *g, bool shares_embedding, MPI_Comm world, px_err *err);
void px_comm_deinit(px_comm *c);
MPI_Comm px_comm_of(const px_comm *c, px_group g);
/* Translates an MPI error code into a status with a message. */
px_status px_comm_check(int rc, const char *what, px_err *err);

/* Every rank of comm learns whether any failed, and every one returns the
 * same status: the largest any rank had (an input error, 2, over a runtime
 * one, 1), so that the job's exit status does not depend on which rank ends
 * first. A failed rank keeps its message; the others get msg. PX_OK when none
 * failed. Collective. A failed rank waits px_comm_timeout_s() for the others at
 * most: those that wait for it elsewhere (a failure mid-step, theirs blocked in
 * its sends) never come, and then its message says so and px_comm_mpi_finalize
 * ends the whole job. */
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

/* ---- MPI's calls, on host memory ---- */

/* MPI_Init (MPI_Init_thread asking for MPI_THREAD_FUNNELED when threads is
 * set: *threads_ok says whether it was given), this rank and the world's
 * size; MPI_Finalize, or, where an agreement found other ranks stuck waiting
 * for this one, MPI_Abort with code (which ends every rank: they cannot finish
 * without it, and MPI_Finalize would wait for them). */
void px_comm_mpi_init(bool threads, int *rank, int *size, bool *threads_ok);
void px_comm_mpi_finalize(int code);
/* How long a rank waits for a collective that makes no progress before it
 * fails: PX_COMM_TIMEOUT_S seconds, 600 when unset. */
double px_comm_timeout_s(void);

/* Members of c and this rank's place among them (1 and 0 for MPI_COMM_NULL). */
int px_comm_size(MPI_Comm c);
int px_comm_rank(MPI_Comm c);
void px_comm_barrier(MPI_Comm c);
/* This rank's place among the ranks of its node, and how many share it. */
void px_comm_node(MPI_Comm c, int *rank, int *size);
/* The world rank of group's first member; -1 for MPI_COMM_NULL. */
int px_comm_first_rank(MPI_Comm group, MPI_Comm world);

/* Collectives over c, counts in elements of t, each within MPI's int counts
 * (refused beyond). in == out: in place (an all-gather's own part already
 * at its place in out). */
px_status px_comm_allreduce(MPI_Comm c, void *out, const void *in, uint64_t count, px_host_type t, px_redop op,
                            px_err *err);
px_status px_comm_allgather(MPI_Comm c, void *out, const void *in, uint64_t count_in, px_host_type t, px_err *err);
px_status px_comm_reduce_scatter(MPI_Comm c, void *out, const void *in, uint64_t count_out, px_host_type t,
                                 px_redop op, px_err *err);
/* count elements to and from each member, in member order */
px_status px_comm_alltoall(MPI_Comm c, void *out, const void *in, uint64_t count, px_host_type t, px_err *err);
/* per member, elements sent (send[j] to member j, from in in member order) and received (recv[j] into out) */
px_status px_comm_alltoallv(MPI_Comm c, void *out, const uint64_t *recv, const void *in, const uint64_t *send,
                            px_host_type t, px_err *err);
px_status px_comm_bcast(MPI_Comm c, void *buf, uint64_t bytes, int root, px_err *err);
/* Posts every send and receive of host buffers (peers: ranks of c), then waits for all. */
px_status px_comm_p2p(MPI_Comm c, const px_p2p *items, int n, px_err *err);
/* bytes to rank `to` and as many from rank `from`, at once */
px_status px_comm_sendrecv(MPI_Comm c, const void *send, int to, void *recv, int from, uint64_t bytes, px_err *err);
px_status px_comm_send(MPI_Comm c, const void *buf, uint64_t bytes, int to, int tag, px_err *err);
px_status px_comm_recv(MPI_Comm c, void *buf, uint64_t bytes, int from, int tag, px_err *err);

#endif
