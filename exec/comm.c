/* Communicators per group, split from the world by the rank grid; failure
 * agreement and a byte gather. */
#include "exec/comm.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

px_status px_comm_check(int rc, const char *what, px_err *err) {
  if (rc == MPI_SUCCESS) return PX_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return px_err_set(err, PX_ERR_RUNTIME, "%s failed: %.*s", what, len, msg);
}

px_status px_comm_init(px_comm *c, const px_plan *plan, MPI_Comm world, px_err *err) {
  memset(c, 0, sizeof *c);
  c->world = world;
  c->tp = c->cp = c->dp = c->ep = c->edp = c->emb = c->shard = c->replica = MPI_COMM_NULL;
  MPI_Comm_rank(world, &c->world_rank);
  MPI_Comm_size(world, &c->world_size);
  const px_grid *g = &plan->grid;
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
  { /* expert groups: ep consecutive DP x CP ranks; those ep apart hold the same experts */
    int64_t ep = g->ep, group = c->wdp_rank / ep, within = c->ep_rank = c->wdp_rank % ep;
    int ep_color = (int)(dp_color + g->tp * g->pp * group), edp_color = (int)(dp_color + g->tp * g->pp * within);
    if ((st = px_comm_check(MPI_Comm_split(world, ep_color, (int)within, &c->ep), "MPI_Comm_split (ep)", err)) ||
        (st = px_comm_check(MPI_Comm_split(world, edp_color, (int)group, &c->edp), "MPI_Comm_split (edp)", err)))
      return st;
  }
  bool edge = c->pp_rank == 0 || c->pp_rank == g->pp - 1;
  int emb_color =
      plan->model.tied_embeddings && g->pp > 1 && edge ? (int)(c->tp_rank + g->tp * c->wdp_rank) : MPI_UNDEFINED;
  if ((st = px_comm_check(MPI_Comm_split(world, emb_color, (int)c->pp_rank, &c->emb), "MPI_Comm_split (emb)", err)))
    return st;
  if (px_parallel_hybrid(&plan->par)) { /* shard groups: consecutive DP x CP ranks; replicas: shard apart */
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
    case PX_GROUP_DP: return c->dp;
    case PX_GROUP_EMB: return c->emb;
    case PX_GROUP_ALL: return c->world;
    case PX_GROUP_SHARD: return c->shard;
    case PX_GROUP_REPLICA: return c->replica;
    default: return MPI_COMM_NULL;
  }
}

px_status px_comm_agree_as(px_status st, MPI_Comm comm, const char *msg, px_err *err) {
  int mine = (int)st, worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm);
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
