/* The CUDA backend's collectives: NCCL on the streams (TP's on the tp
 * stream, in line with the stream that issued them), or MPI staged through
 * host memory when a node has more ranks than GPUs; and the communicators'
 * set-up. */
#include "exec/cuda/collectives.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/comm.h"

static px_status nccl_check(ncclResult_t r, const char *what, px_err *err) {
  if (r == ncclSuccess) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s: %s", what, ncclGetErrorString(r));
}

/* NCCL's and the MPI fallback's element types (fp8 codes: all-gathered as bytes). */
static px_status coll_dtype(px_dtype dt, px_err *err) {
  if (px_cuda_kernel_dtype(dt)) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: no %s collectives (fp32, bf16 and fp16 only)",
                    px_dtype_names[dt]);
}

static ncclDataType_t nccl_type(px_dtype dt) {
  switch (dt) {
    case PX_DTYPE_FP8: return ncclUint8;
    case PX_DTYPE_BF16: return ncclBfloat16;
    case PX_DTYPE_FP16: return ncclFloat16;
    default: return ncclFloat32;
  }
}

static px_status nccl_comm(px_cuda *c, px_group g, ncclComm_t *out, px_err *err) {
  *out = c->nc[g];
  if (!*out) return px_err_set(err, PX_ERR_RUNTIME, "internal: cuda backend has no %s communicator", px_group_names[g]);
  return PX_OK;
}

/* The MPI fallback: device -> host -> MPI -> device. Sums run in fp32 on the host. */
typedef enum { STAGED_ALLREDUCE, STAGED_ALLGATHER, STAGED_REDUCE_SCATTER } staged_kind;

static px_status staged(px_backend *be, staged_kind kind, px_group g, void *out, const void *in, uint64_t count,
                        px_dtype dt, px_redop op, px_err *err) {
  px_cuda *c = be->impl;
  MPI_Comm mc = px_comm_of(c->comm, g);
  int n = px_comm_size(mc), rank = px_comm_rank(mc);
  uint64_t el = px_dtype_bytes(dt), total = kind == STAGED_ALLREDUCE ? count : count * (uint64_t)n;
  if (total > (uint64_t)INT32_MAX / 4)
    return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: a %llu-element collective is too large for the MPI fallback",
                      (unsigned long long)total);
  char *raw = malloc(total * el + 1);
  float *f = malloc(total * sizeof *f + 1);
  px_status st = raw && f ? PX_OK : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  if (!st && kind == STAGED_ALLGATHER) {
    const char *mine = in == out ? (const char *)out + (uint64_t)rank * count * el : in;
    st = be->download(be, raw + (uint64_t)rank * count * el, mine, count * el, err);
    if (!st) st = px_comm_allgather(mc, raw, raw, count * el, PX_HOST_BYTE, err);
    if (!st) st = be->upload(be, out, raw, total * el, err);
  } else if (!st) {
    st = be->download(be, raw, kind == STAGED_ALLREDUCE ? out : in, total * el, err);
    if (!st) px_dtype_to_fp32(f, raw, dt, total);
    if (!st && kind == STAGED_ALLREDUCE) st = px_comm_allreduce(mc, f, f, count, PX_HOST_FLOAT, op, err);
    if (!st && kind == STAGED_REDUCE_SCATTER) st = px_comm_reduce_scatter(mc, f, f, count, PX_HOST_FLOAT, op, err);
    if (!st) px_dtype_from_fp32(raw, dt, f, count);
    if (!st) st = be->upload(be, out, raw, count * el, err);
  }
  free(raw);
  free(f);
  return st;
}

/* TP collectives run on the tp stream. Issued on another stream, in line:
 * tp waits for that stream's work so far, and that stream for the collective
 * (tp_enter returns the stream to go back to, -1 when already on tp). */
static int tp_enter(px_cuda *c, px_group g) {
  int from = c->cur;
  if (g != PX_GROUP_TP || from == PX_CUDA_TP) return -1;
  cudaEventRecord(c->switched, c->streams[from]);
  cudaStreamWaitEvent(c->streams[PX_CUDA_TP], c->switched, 0);
  c->cur = PX_CUDA_TP;
  return from;
}

static px_status tp_leave(px_cuda *c, int from, px_status st, px_err *err) {
  if (from < 0) return st;
  c->cur = from;
  px_status e = px_cuda_check(cudaEventRecord(c->switched, c->streams[PX_CUDA_TP]), "cudaEventRecord", err);
  if (!e) e = px_cuda_check(cudaStreamWaitEvent(c->streams[from], c->switched, 0), "cudaStreamWaitEvent", err);
  return st ? st : e;
}

px_status px_cuda_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op,
                            px_err *err) {
  px_cuda *c = be->impl;
  if (!count) return PX_OK;
  if (coll_dtype(dt, err)) return PX_ERR_RUNTIME;
  if (!c->nccl) return staged(be, STAGED_ALLREDUCE, g, buf, buf, count, dt, op, err);
  ncclComm_t nc;
  px_status st = nccl_comm(c, g, &nc, err);
  if (st) return st;
  int from = tp_enter(c, g);
  st = nccl_check(
      ncclAllReduce(buf, buf, count, nccl_type(dt), op == PX_RED_MAX ? ncclMax : ncclSum, nc, px_cuda_stream(c)),
      "ncclAllReduce", err);
  return tp_leave(c, from, st, err);
}

/* in == out: in place, this rank's part already at its place in out. */
px_status px_cuda_allgather(px_backend *be, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                            px_err *err) {
  px_cuda *c = be->impl;
  if (!count_in) return PX_OK;
  if (dt != PX_DTYPE_FP8 && coll_dtype(dt, err)) return PX_ERR_RUNTIME;
  px_status st = PX_OK;
  if (!c->nccl) {
    st = staged(be, STAGED_ALLGATHER, g, out, in, count_in, dt, PX_RED_SUM, err);
  } else {
    ncclComm_t nc;
    if ((st = nccl_comm(c, g, &nc, err))) return st;
    const void *send = in == out ? (const char *)out + (uint64_t)c->nc_rank[g] * count_in * px_dtype_bytes(dt) : in;
    int from = tp_enter(c, g);
    st = nccl_check(ncclAllGather(send, out, count_in, nccl_type(dt), nc, px_cuda_stream(c)), "ncclAllGather", err);
    st = tp_leave(c, from, st, err);
  }
  if (!st && dt == PX_DTYPE_FP8) /* the codes keep their scale (shared over TP: the amax reduction) */
    st = px_cpu_fp8_moved(c->f8, out, in, count_in * (uint64_t)px_comm_size(px_comm_of(c->comm, g)), err);
  return st;
}

px_status px_cuda_reduce_scatter(px_backend *be, px_group g, void *out, const void *in, uint64_t count_out, px_dtype dt,
                                 px_err *err) {
  px_cuda *c = be->impl;
  if (!count_out) return PX_OK;
  if (coll_dtype(dt, err)) return PX_ERR_RUNTIME;
  if (!c->nccl) return staged(be, STAGED_REDUCE_SCATTER, g, out, in, count_out, dt, PX_RED_SUM, err);
  ncclComm_t nc;
  px_status st = nccl_comm(c, g, &nc, err);
  if (st) return st;
  int from = tp_enter(c, g);
  st = nccl_check(ncclReduceScatter(in, out, count_out, nccl_type(dt), ncclSum, nc, px_cuda_stream(c)),
                  "ncclReduceScatter", err);
  return tp_leave(c, from, st, err);
}

/* NCCL pairs the k-th send from a rank with the k-th receive from it on the
 * peer; both sides order their batch by tag (forward before backward), as MPI
 * matches by tag. */
px_status px_cuda_p2p(px_backend *be, px_p2p *items, int n, px_err *err) {
  px_cuda *c = be->impl;
  if (n > 16) return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: p2p batch of %d is too large", n);
  px_status st = PX_OK;
  if (c->nccl) {
    int order[16];
    for (int i = 0; i < n; i++) {
      int j = i;
      for (; j > 0 && items[order[j - 1]].tag > items[i].tag; j--) order[j] = order[j - 1];
      order[j] = i;
    }
    ncclComm_t nc;
    if ((st = nccl_comm(c, PX_GROUP_ALL, &nc, err))) return st;
    st = nccl_check(ncclGroupStart(), "ncclGroupStart", err);
    for (int k = 0; k < n && !st; k++) {
      px_p2p *it = &items[order[k]];
      st = nccl_check(it->send ? ncclSend(it->buf, it->bytes, ncclInt8, it->peer, nc, px_cuda_stream(c))
                               : ncclRecv(it->buf, it->bytes, ncclInt8, it->peer, nc, px_cuda_stream(c)),
                      it->send ? "ncclSend" : "ncclRecv", err);
    }
    px_status end = nccl_check(ncclGroupEnd(), "ncclGroupEnd", err);
    return st ? st : end;
  }
  /* MPI: stage sends through the host, receive into the host, then upload */
  px_p2p host[16] = {{false}};
  for (int i = 0; i < n; i++) host[i] = items[i], host[i].buf = NULL;
  for (int i = 0; i < n && !st; i++) {
    if (!(host[i].buf = malloc(items[i].bytes + 1))) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    if (!st && items[i].send) st = be->download(be, host[i].buf, items[i].buf, items[i].bytes, err);
  }
  if (!st) st = px_comm_p2p(c->comm->world, host, n, err);
  for (int i = 0; i < n && !st; i++)
    if (!items[i].send) st = be->upload(be, items[i].buf, host[i].buf, items[i].bytes, err);
  for (int i = 0; i < n; i++) free(host[i].buf);
  return st;
}

/* What the interpreter computes in host memory: MPI's collectives on it (exec/comm.h). */
px_status px_cuda_host_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_host_type t, px_redop op,
                                 px_err *err) {
  return px_comm_allreduce(px_comm_of(((px_cuda *)be->impl)->comm, g), buf, buf, count, t, op, err);
}

/* The NCCL split colour of a group: the world rank of its first member
 * (NCCL_SPLIT_NOCOLOR when this rank is in none). */
static int split_color(MPI_Comm group, MPI_Comm world) {
  int first = px_comm_first_rank(group, world);
  return first < 0 ? NCCL_SPLIT_NOCOLOR : first;
}

/* The world communicator from an id broadcast over MPI, then one split per group. */
px_status px_cuda_nccl_init(px_cuda *c, px_err *err) {
  const px_comm *m = c->comm;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  px_status st = m->world_rank == 0 ? nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", err) : PX_OK;
  if ((st = px_comm_agree_as(st, m->world, "cuda backend: rank 0 could not create a NCCL id", err))) return st;
  if ((st = px_comm_bcast(m->world, &id, sizeof id, 0, err))) return st;
  if ((st = nccl_check(ncclCommInitRank(&c->nc[PX_GROUP_ALL], m->world_size, id, m->world_rank), "ncclCommInitRank",
                       err)))
    return st;
  c->nc_rank[PX_GROUP_ALL] = m->world_rank;
  /* the shard and replica groups exist on every rank or on none (hybrid sharding) */
  px_group groups[] = {PX_GROUP_TP, PX_GROUP_DP, PX_GROUP_EMB, PX_GROUP_SHARD, PX_GROUP_REPLICA};
  for (size_t i = 0; i < sizeof groups / sizeof *groups && !st; i++) {
    MPI_Comm mc = px_comm_of(m, groups[i]);
    if ((groups[i] == PX_GROUP_SHARD || groups[i] == PX_GROUP_REPLICA) && m->shard == MPI_COMM_NULL) continue;
    int key = px_comm_rank(mc);
    st = nccl_check(ncclCommSplit(c->nc[PX_GROUP_ALL], split_color(mc, m->world), key, &c->nc[groups[i]], NULL),
                    "ncclCommSplit", err);
    c->nc_rank[groups[i]] = key;
  }
  return st;
}
