/* NCCL emulated over MPI for the CUDA backend under the emulator (device
 * memory is host memory). Semantics kept: a communicator is a set of ranks;
 * the k-th send from a rank to a peer matches the peer's k-th receive from it
 * (one MPI tag: MPI does not overtake); sends and receives between
 * ncclGroupStart and ncclGroupEnd are posted together; bf16 sums run in fp32
 * and round once, as NCCL's do. Collectives run in their stream's order (a
 * lagging stream runs them late, see emu.h). Sends and receives are
 * exchanged at ncclGroupEnd, after the stream's earlier work has run (MPI in
 * stream order would block the one host thread that also runs the rank's
 * other streams, which a GPU never does); what is received lands in the
 * receive buffers in stream order, so a reader that does not wait for the
 * stream reads stale data, as on a GPU. */
#define OMPI_SKIP_MPICXX 1 /* the C API only: no C++ bindings to link */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "emu.h"

struct ncclComm {
  MPI_Comm comm;
};

struct pending {
  bool send;
  void *buf;
  size_t bytes;
  int peer;
  MPI_Comm comm;
  cudaStream_t stream;
};

static int group_depth;
static std::vector<pending> queued;

static const size_t elem_bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2}; /* by ncclDataType_t up to ncclBfloat16 */

static size_t type_bytes(ncclDataType_t t) { return (size_t)t < sizeof elem_bytes / sizeof *elem_bytes ? elem_bytes[t] : 0; }

static std::vector<float> widen(const void *p, size_t n, ncclDataType_t t) {
  std::vector<float> f(n);
  for (size_t i = 0; i < n; i++)
    f[i] = t == ncclBfloat16 ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
           : t == ncclFloat16 ? __half2float(((const __half *)p)[i])
                              : ((const float *)p)[i];
  return f;
}

static void narrow(void *p, const float *f, size_t n, ncclDataType_t t) {
  for (size_t i = 0; i < n; i++) {
    if (t == ncclBfloat16)
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(f[i]);
    else if (t == ncclFloat16)
      ((__half *)p)[i] = __float2half_rn(f[i]);
    else
      ((float *)p)[i] = f[i];
  }
}

static bool reducible(ncclDataType_t t) { return t == ncclFloat32 || t == ncclBfloat16 || t == ncclFloat16; }

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL error"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  return ncclSuccess;
}

/* The emulator supports the one world communicator the backend makes from an id. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  int size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (size != nranks || me != rank) return ncclInvalidUsage;
  *comm = new ncclComm;
  MPI_Comm_dup(MPI_COMM_WORLD, &(*comm)->comm);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  (void)config;
  MPI_Comm c;
  MPI_Comm_split(comm->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &c);
  *newcomm = NULL;
  if (c == MPI_COMM_NULL) return ncclSuccess;
  *newcomm = new ncclComm;
  (*newcomm)->comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm) {
    MPI_Comm_free(&comm->comm);
    delete comm;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
  (void)comm;
  *async = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  MPI_Comm_rank(comm->comm, rank);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!reducible(t) || (op != ncclSum && op != ncclMax)) return ncclInvalidArgument;
  MPI_Comm c = comm->comm;
  px_emu_enqueue(stream, [=] {
    std::vector<float> f = widen(send, count, t);
    MPI_Allreduce(MPI_IN_PLACE, f.data(), (int)count, MPI_FLOAT, op == ncclMax ? MPI_MAX : MPI_SUM, c);
    narrow(recv, f.data(), count, t);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t stream) {
  MPI_Comm c = comm->comm;
  px_emu_enqueue(stream, [=] {
    int rank = 0;
    MPI_Comm_rank(c, &rank);
    size_t bytes = count * type_bytes(t);
    char *mine = (char *)recv + (size_t)rank * bytes;
    if (send != mine) memmove(mine, send, bytes);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c);
  });
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  if (!reducible(t) || op != ncclSum) return ncclInvalidArgument;
  MPI_Comm c = comm->comm;
  px_emu_enqueue(stream, [=] {
    int n = 0;
    MPI_Comm_size(c, &n);
    std::vector<float> f = widen(send, count * (size_t)n, t);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, f.data(), (int)count, MPI_FLOAT, MPI_SUM, c);
    narrow(recv, f.data(), count, t);
  });
  return ncclSuccess;
}

static ncclResult_t flush(void) {
  for (pending &p : queued) cudaStreamSynchronize(p.stream); /* the sends' data and the buffers are ready */
  std::vector<MPI_Request> req(queued.size());
  std::vector<std::vector<char>> got(queued.size());
  for (size_t i = 0; i < queued.size(); i++) {
    pending &p = queued[i];
    if (p.send) {
      MPI_Isend(p.buf, (int)p.bytes, MPI_BYTE, p.peer, 0, p.comm, &req[i]);
    } else {
      got[i].resize(p.bytes);
      MPI_Irecv(got[i].data(), (int)p.bytes, MPI_BYTE, p.peer, 0, p.comm, &req[i]);
    }
  }
  MPI_Waitall((int)req.size(), req.data(), MPI_STATUSES_IGNORE);
  for (size_t i = 0; i < queued.size(); i++)
    if (!queued[i].send) {
      std::vector<char> data = std::move(got[i]);
      void *dst = queued[i].buf;
      px_emu_enqueue(queued[i].stream, [dst, data] { memcpy(dst, data.data(), data.size()); });
    }
  queued.clear();
  return ncclSuccess;
}

static ncclResult_t p2p(bool send, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                        cudaStream_t stream) {
  queued.push_back(pending{send, buf, count * type_bytes(t), peer, comm->comm, stream});
  return group_depth ? ncclSuccess : flush();
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream) {
  return p2p(true, (void *)buf, count, t, peer, comm, stream);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream) {
  return p2p(false, buf, count, t, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0) return ncclInvalidUsage;
  return --group_depth == 0 ? flush() : ncclSuccess;
}

} /* extern "C" */
