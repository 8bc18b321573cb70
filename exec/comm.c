/* Communicators per group, split from the world by the rank grid; failure
 * agreement and a byte gather. */
#include "exec/comm.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

px_status px_comm_check(int rc, const char *what, px_err *err) {
  if (rc == MPI_SUCCESS) return PX_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return px_err_set(err, PX_ERR_RUNTIME, "%s failed: %.*s", what, len, msg);
}

px_status px_comm_init(px_comm *c, const px_grid *g, bool shares_embedding, MPI_Comm world, px_err *err) {
  memset(c, 0, sizeof *c);
  c->world = world;
  c->tp = c->cp = c->dp = c->ep = c->edp = c->etp = c->emb = c->shard = c->replica = MPI_COMM_NULL;
  MPI_Comm_rank(world, &c->world_rank);
  MPI_Comm_size(world, &c->world_size);
  if (c->world_size != g->world)
    return px_err_set(err, PX_ERR_INPUT,
                      "the plan needs %lld ranks (tp %lld x cp %lld x pp %lld x dp %lld) but mpirun started %d (hint: "
                      "mpirun -np %lld)",
                      (long long)g->world, (long long)g->tp, (long long)g->cp, (long long)g->pp, (long long)g->dp,
                      c->world_size, (long long)g->world);
  px_grid_coords(g, c->world_rank, &c->tp_rank, &c->cp_rank, &c->dp_rank, &c->pp_rank);
  c->wdp_rank = c->cp_rank + g->cp * c->dp_rank;
  int tp_color = (int)(c->wdp_rank + g->wdp * c->pp_rank), dp_color = (int)(c->tp_rank + g->tp * c->pp_rank);
  int cp_color = (int)(c->tp_rank + g->tp * (c->dp_rank + g->dp * c->pp_rank));
  px_status st;
  if ((st = px_comm_check(MPI_Comm_split(world, tp_color, (int)c->tp_rank, &c->tp), "MPI_Comm_split (tp)", err)) ||
      (st = px_comm_check(MPI_Comm_split(world, cp_color, (int)c->cp_rank, &c->cp), "MPI_Comm_split (cp)", err)) ||
      (st = px_comm_check(MPI_Comm_split(world, dp_color, (int)c->wdp_rank, &c->dp), "MPI_Comm_split (dp)", err)))
    return st;
  { /* the MoE layers' fold of the stage's ranks (px_grid_expert_coords): etp consecutive ranks split an expert's
     * GEMMs, ep of those etp apart hold different experts, the rest (etp ep apart) the same ones */
    int64_t etp_rank, edp_rank, stage = g->tp * g->wdp, base = stage * c->pp_rank;
    px_grid_expert_coords(g, c->tp_rank, c->wdp_rank, &etp_rank, &c->ep_rank, &edp_rank);
    int etp_color = (int)(base + c->ep_rank + g->ep * edp_rank), ep_color = (int)(base + etp_rank + g->etp * edp_rank);
    int edp_color = (int)(base + etp_rank + g->etp * c->ep_rank);
    if ((st = px_comm_check(MPI_Comm_split(world, etp_color, (int)etp_rank, &c->etp), "MPI_Comm_split (etp)", err)) ||
        (st = px_comm_check(MPI_Comm_split(world, ep_color, (int)c->ep_rank, &c->ep), "MPI_Comm_split (ep)", err)) ||
        (st = px_comm_check(MPI_Comm_split(world, edp_color, (int)edp_rank, &c->edp), "MPI_Comm_split (edp)", err)))
      return st;
  }
  bool edge = c->pp_rank == 0 || c->pp_rank == g->pp - 1;
  int emb_color =
      shares_embedding && g->pp > 1 && edge ? (int)(c->tp_rank + g->tp * c->wdp_rank) : MPI_UNDEFINED;
  if ((st = px_comm_check(MPI_Comm_split(world, emb_color, (int)c->pp_rank, &c->emb), "MPI_Comm_split (emb)", err)))
    return st;
  if (g->shard < g->wdp) { /* hybrid sharding: consecutive DP x CP ranks; replicas: shard apart */
    int64_t n = g->shard, group = c->wdp_rank / n, within = c->wdp_rank % n;
    int shard_color = (int)(dp_color + g->tp * g->pp * group), replica_color = (int)(dp_color + g->tp * g->pp * within);
    if ((st = px_comm_check(MPI_Comm_split(world, shard_color, (int)within, &c->shard), "MPI_Comm_split (shard)", err)) ||
        (st = px_comm_check(MPI_Comm_split(world, replica_color, (int)group, &c->replica), "MPI_Comm_split (replica)",
                            err)))
      return st;
  }
  c->prev = (int)px_grid_rank(g, c->tp_rank, c->cp_rank, c->dp_rank, (c->pp_rank - 1 + g->pp) % g->pp);
  c->next = (int)px_grid_rank(g, c->tp_rank, c->cp_rank, c->dp_rank, (c->pp_rank + 1) % g->pp);
  c->cp_prev = (int)px_grid_rank(g, c->tp_rank, (c->cp_rank - 1 + g->cp) % g->cp, c->dp_rank, c->pp_rank);
  c->cp_next = (int)px_grid_rank(g, c->tp_rank, (c->cp_rank + 1) % g->cp, c->dp_rank, c->pp_rank);
  return PX_OK;
}

void px_comm_deinit(px_comm *c) {
  if (c->tp != MPI_COMM_NULL) MPI_Comm_free(&c->tp);
  if (c->cp != MPI_COMM_NULL) MPI_Comm_free(&c->cp);
  if (c->ep != MPI_COMM_NULL) MPI_Comm_free(&c->ep);
  if (c->edp != MPI_COMM_NULL) MPI_Comm_free(&c->edp);
  if (c->etp != MPI_COMM_NULL) MPI_Comm_free(&c->etp);
  if (c->dp != MPI_COMM_NULL) MPI_Comm_free(&c->dp);
  if (c->emb != MPI_COMM_NULL) MPI_Comm_free(&c->emb);
  if (c->shard != MPI_COMM_NULL) MPI_Comm_free(&c->shard);
  if (c->replica != MPI_COMM_NULL) MPI_Comm_free(&c->replica);
}

MPI_Comm px_comm_of(const px_comm *c, px_group g) {
  switch (g) {
    case PX_GROUP_TP: return c->tp;
    case PX_GROUP_CP: return c->cp;
    case PX_GROUP_EP: return c->ep;
    case PX_GROUP_EDP: return c->edp;
    case PX_GROUP_ETP: return c->etp;
    case PX_GROUP_DP: return c->dp;
    case PX_GROUP_EMB: return c->emb;
    case PX_GROUP_ALL: return c->world;
    case PX_GROUP_SHARD: return c->shard;
    case PX_GROUP_REPLICA: return c->replica;
    default: return MPI_COMM_NULL;
  }
}

/* set when a failed rank's agreement timed out: the others wait for it elsewhere */
static bool peers_stuck;

double px_comm_timeout_s(void) {
  const char *limit = getenv("PX_COMM_TIMEOUT_S");
  return limit && atof(limit) > 0 ? atof(limit) : 600.0;
}

px_status px_comm_agree_as(px_status st, MPI_Comm comm, const char *msg, px_err *err) {
  int mine = (int)st, worst = 0, done = 0;
  MPI_Request req;
  MPI_Iallreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm, &req);
  if (!st) {
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    double limit_s = px_comm_timeout_s(), until = px_clock_s() + limit_s;
    for (MPI_Test(&req, &done, MPI_STATUS_IGNORE); !done && px_clock_s() < until;
         MPI_Test(&req, &done, MPI_STATUS_IGNORE))
      nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    if (!done) {
      peers_stuck = true;
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      char own[sizeof err->msg];
      snprintf(own, sizeof own, "%s", err ? err->msg : "");
      return px_err_set(err, st, "%s (rank %d failed alone: the other ranks did not stop with it in %g s "
                        "(PX_COMM_TIMEOUT_S) but wait for it elsewhere; the job is ended)", own, rank, limit_s);
    }
  }
  if (!st && worst) return px_err_set(err, (px_status)worst, "%s", msg);
  if (err && worst) err->status = (px_status)worst; /* its own message, the agreed status */
  return (px_status)worst;
}

px_status px_comm_agree(px_status st, MPI_Comm comm, px_err *err) {
  return px_comm_agree_as(st, comm, "another rank failed (see its message)", err);
}

px_status px_comm_gather_bytes(const void *mine, size_t bytes, int root, MPI_Comm comm, void **all, size_t *total,
                               px_err *err) {
  *all = NULL;
  *total = 0;
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  uint64_t mine_bytes = bytes;
  uint64_t *sizes = NULL;           /* (size) on root */
  int *counts = NULL, *displs = NULL; /* (size) on root */
  char *buf = NULL;
  px_status st = PX_OK;
  if (rank == root && !(sizes = calloc((size_t)size, sizeof *sizes))) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  /* every rank takes part in each call, whatever root's state; root then says whether to go on */
  int ok = 1;
  MPI_Gather(&mine_bytes, 1, MPI_UINT64_T, sizes, 1, MPI_UINT64_T, root, comm);
  if (rank == root && !st) {
    uint64_t sum = 0;
    for (int i = 0; i < size; i++) sum += sizes[i];
    if (sum > INT_MAX)
      st = px_err_set(err, PX_ERR_RUNTIME, "gathering %llu bytes: more than one MPI call carries", (unsigned long long)sum);
    else if (!(counts = calloc((size_t)size, sizeof *counts)) || !(displs = calloc((size_t)size, sizeof *displs)) ||
             !(buf = malloc(sum ? (size_t)sum : 1)))
      st = px_err_set(err, PX_ERR_RUNTIME, "out of memory gathering %llu bytes", (unsigned long long)sum);
    for (int i = 0, at = 0; !st && i < size; at += counts[i], i++) counts[i] = (int)sizes[i], displs[i] = at;
    *total = (size_t)sum;
  }
  if (rank == root) ok = st == PX_OK;
  MPI_Bcast(&ok, 1, MPI_INT, root, comm);
  if (ok) /* root's total fits an int, so each rank's share does */
    st = px_comm_check(MPI_Gatherv(mine, (int)bytes, MPI_BYTE, buf, counts, displs, MPI_BYTE, root, comm),
                       "MPI_Gatherv", err);
  else if (rank != root)
    st = px_err_set(err, PX_ERR_RUNTIME, "gathering bytes: the root rank could not take them");
  free(sizes), free(counts), free(displs);
  if (st || rank != root) {
    free(buf);
    *total = 0;
    return st;
  }
  *all = buf;
  return PX_OK;
}

/* ---- MPI's calls ---- */

void px_comm_mpi_init(bool threads, int *rank, int *size, bool *threads_ok) {
  int got = MPI_THREAD_SINGLE;
  if (threads)
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &got);
  else
    MPI_Init(NULL, NULL);
  if (threads_ok) *threads_ok = got >= MPI_THREAD_FUNNELED;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
}

void px_comm_mpi_finalize(int code) {
  if (peers_stuck) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
  MPI_Finalize();
}

int px_comm_size(MPI_Comm c) {
  int n = 1;
  if (c != MPI_COMM_NULL) MPI_Comm_size(c, &n);
  return n;
}

int px_comm_rank(MPI_Comm c) {
  int r = 0;
  if (c != MPI_COMM_NULL) MPI_Comm_rank(c, &r);
  return r;
}

void px_comm_barrier(MPI_Comm c) { MPI_Barrier(c); }

void px_comm_node(MPI_Comm c, int *rank, int *size) {
  MPI_Comm local;
  MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, px_comm_rank(c), MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, rank);
  MPI_Comm_size(local, size);
  MPI_Comm_free(&local);
}

int px_comm_first_rank(MPI_Comm group, MPI_Comm world) {
  if (group == MPI_COMM_NULL) return -1;
  MPI_Group gg, wg;
  int zero = 0, first = 0;
  MPI_Comm_group(group, &gg);
  MPI_Comm_group(world, &wg);
  MPI_Group_translate_ranks(gg, 1, &zero, wg, &first);
  MPI_Group_free(&gg);
  MPI_Group_free(&wg);
  return first;
}

static MPI_Datatype mpi_type(px_host_type t) {
  switch (t) {
    case PX_HOST_INT: return MPI_INT;
    case PX_HOST_FLOAT: return MPI_FLOAT;
    case PX_HOST_DOUBLE: return MPI_DOUBLE;
    case PX_HOST_LLONG: return MPI_LONG_LONG;
    case PX_HOST_ULLONG: return MPI_UNSIGNED_LONG_LONG;
    default: return MPI_BYTE;
  }
}

static MPI_Op mpi_op(px_redop op) { return op == PX_RED_MAX ? MPI_MAX : MPI_SUM; }

/* MPI counts are ints: n elements (what is counted) fit one, or a refusal. */
static px_status int_count(uint64_t n, const char *what, px_err *err) {
  if (n <= INT_MAX) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "%s of %llu elements or bytes: beyond MPI's int counts", what,
                    (unsigned long long)n);
}

px_status px_comm_allreduce(MPI_Comm c, void *out, const void *in, uint64_t count, px_host_type t, px_redop op,
                            px_err *err) {
  px_status st = int_count(count, "an all-reduce", err);
  if (st) return st;
  return px_comm_check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, mpi_type(t), mpi_op(op), c),
                       "MPI_Allreduce", err);
}

px_status px_comm_allgather(MPI_Comm c, void *out, const void *in, uint64_t count_in, px_host_type t, px_err *err) {
  px_status st = int_count(count_in * (uint64_t)px_comm_size(c), "an all-gather", err);
  if (st) return st;
  MPI_Datatype mt = mpi_type(t);
  return px_comm_check(MPI_Allgather(in == out ? MPI_IN_PLACE : in, (int)count_in, mt, out, (int)count_in, mt, c),
                       "MPI_Allgather", err);
}

px_status px_comm_reduce_scatter(MPI_Comm c, void *out, const void *in, uint64_t count_out, px_host_type t,
                                 px_redop op, px_err *err) {
  px_status st = int_count(count_out * (uint64_t)px_comm_size(c), "a reduce-scatter", err);
  if (st) return st;
  return px_comm_check(
      MPI_Reduce_scatter_block(in == out ? MPI_IN_PLACE : in, out, (int)count_out, mpi_type(t), mpi_op(op), c),
      "MPI_Reduce_scatter", err);
}

px_status px_comm_alltoall(MPI_Comm c, void *out, const void *in, uint64_t count, px_host_type t, px_err *err) {
  px_status st = int_count(count * (uint64_t)px_comm_size(c), "an all-to-all", err);
  if (st) return st;
  MPI_Datatype mt = mpi_type(t);
  return px_comm_check(MPI_Alltoall(in, (int)count, mt, out, (int)count, mt, c), "MPI_Alltoall", err);
}

px_status px_comm_alltoallv(MPI_Comm c, void *out, const uint64_t *recv, const void *in, const uint64_t *send,
                            px_host_type t, px_err *err) {
  int n = px_comm_size(c);
  int *v = malloc((size_t)(4 * n) * sizeof *v); /* send counts, displacements, receive counts, displacements */
  if (!v) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  uint64_t so = 0, ro = 0;
  for (int j = 0; j < n; j++) so += send[j], ro += recv[j];
  px_status st = int_count(so > ro ? so : ro, "an all-to-all", err);
  so = ro = 0;
  for (int j = 0; j < n && !st; j++) {
    v[j] = (int)send[j], v[n + j] = (int)so, v[2 * n + j] = (int)recv[j], v[3 * n + j] = (int)ro;
    so += send[j], ro += recv[j];
  }
  MPI_Datatype mt = mpi_type(t);
  if (!st) st = px_comm_check(MPI_Alltoallv(in, v, v + n, mt, out, v + 2 * n, v + 3 * n, mt, c), "MPI_Alltoallv", err);
  free(v);
  return st;
}

px_status px_comm_bcast(MPI_Comm c, void *buf, uint64_t bytes, int root, px_err *err) {
  px_status st = int_count(bytes, "a broadcast", err);
  return st ? st : px_comm_check(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c), "MPI_Bcast", err);
}

px_status px_comm_p2p(MPI_Comm c, const px_p2p *items, int n, px_err *err) {
  MPI_Request req[16];
  if (n > 16) return px_err_set(err, PX_ERR_RUNTIME, "internal: a p2p batch of %d messages (16 at most)", n);
  px_status st = PX_OK;
  for (int i = 0; i < n && !st; i++) st = int_count(items[i].bytes, "a message", err);
  int posted = 0;
  for (int i = 0; i < n && !st; i++) {
    int bytes = (int)items[i].bytes;
    int rc = items[i].send ? MPI_Isend(items[i].buf, bytes, MPI_BYTE, items[i].peer, items[i].tag, c, &req[i])
                           : MPI_Irecv(items[i].buf, bytes, MPI_BYTE, items[i].peer, items[i].tag, c, &req[i]);
    st = px_comm_check(rc, items[i].send ? "MPI_Isend" : "MPI_Irecv", err);
    if (!st) posted++;
  }
  px_status w = posted ? px_comm_check(MPI_Waitall(posted, req, MPI_STATUSES_IGNORE), "MPI_Waitall (p2p)", err) : PX_OK;
  return st ? st : w;
}

px_status px_comm_sendrecv(MPI_Comm c, const void *send, int to, void *recv, int from, uint64_t bytes, px_err *err) {
  px_status st = int_count(bytes, "a message", err);
  if (st) return st;
  return px_comm_check(MPI_Sendrecv(send, (int)bytes, MPI_BYTE, to, 0, recv, (int)bytes, MPI_BYTE, from, 0, c,
                                    MPI_STATUS_IGNORE),
                       "MPI_Sendrecv", err);
}

px_status px_comm_send(MPI_Comm c, const void *buf, uint64_t bytes, int to, int tag, px_err *err) {
  px_status st = int_count(bytes, "a message", err);
  return st ? st : px_comm_check(MPI_Send(buf, (int)bytes, MPI_BYTE, to, tag, c), "MPI_Send", err);
}

px_status px_comm_recv(MPI_Comm c, void *buf, uint64_t bytes, int from, int tag, px_err *err) {
  px_status st = int_count(bytes, "a message", err);
  return st ? st : px_comm_check(MPI_Recv(buf, (int)bytes, MPI_BYTE, from, tag, c, MPI_STATUS_IGNORE), "MPI_Recv", err);
}
