/* CUDA backend: its set-up and table; device memory and streams in
 * exec/cuda/memory.c, the op dispatch onto kernels/cuda in ops.c, the
 * collectives (NCCL, or MPI staged through the host) in collectives.c. Four streams: compute
 * (every op, in the interpreter's order), tp (the TP collectives), dp (the
 * gradient reductions and parameter gathers the interpreter puts there) and
 * pp (the p2p batches), so communication overlaps compute. Each NCCL
 * communicator is used from one stream only (TP on tp, DP on dp, the world's
 * p2p on pp, the tied embedding's on compute), so every rank runs a
 * communicator's operations in the same order; a TP collective issued on
 * another stream runs on tp in line with it. Work switched onto a side stream waits for everything
 * issued on compute before it; compute waits for a side stream only at a mark
 * the interpreter names (the program's dependencies) or at join. Device
 * memory comes from arenas (exec/arena.h): two reserved at set-up from the
 * plan's prediction, one for the model states, one for the step's tensors,
 * more only if fragmentation needs it; a range freed on a side stream carries
 * a mark there, so reuse elsewhere waits for it. */
#include "exec/cuda/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/fp8.h"
#include "exec/cuda/collectives.h"
#include "exec/cuda/memory.h"
#include "exec/cuda/ops.h"

int px_cuda_device_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void px_cuda_device_name(char *buf, size_t cap) {
  struct cudaDeviceProp prop;
  if (!cap) return;
  buf[0] = 0;
  if (px_cuda_device_count() > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    snprintf(buf, cap, "%s", prop.name);
}

/* ---- set-up ---- */

/* The histories are the host's (fp8_cast and fp8_weight wait for each amax), current when a step has ended. */
static px_status cu_amax_histories(px_backend *b, bool load, const px_amax_key *keys, int64_t n, int64_t step,
                                   float *hist, px_err *err) {
  return px_cpu_fp8_histories(((px_cuda *)b->impl)->f8, load, keys, n, step, hist, err);
}

/* The codes' scales are the host's too (by the device address): they follow activation offload's copies. */
static void cu_codes_rekeyed(px_backend *b, const void *to, const void *from) {
  px_cpu_fp8_rekey(((px_cuda *)b->impl)->f8, to, from);
}

static void cu_destroy(px_backend *b) {
  if (!b) return;
  px_cuda *c = b->impl;
  if (c) {
    px_cuda_arenas_free(c);
    cudaFreeHost(c->pinned);
    if (c->pinned_read) cudaEventDestroy(c->pinned_read);
    for (int s = 0; s < PX_CUDA_STREAMS; s++)
      for (int i = 0; i < PX_CUDA_MARK_EVENTS; i++)
        if (c->marks[s][i]) cudaEventDestroy(c->marks[s][i]);
    for (int s = 0; s < PX_CUDA_STREAMS; s++)
      for (int i = 0; i < PX_CUDA_SCRATCH_CHUNKS; i++) cudaFree(c->scratch[s][i].p);
    cudaFree(c->workspace);
    cudaFree(c->dsum);
    cudaFree(c->ones);
    px_cpu_fp8_free(c->f8);
    for (int g = 0; g < PX_GROUP_COUNT; g++)
      if (c->nc[g]) ncclCommDestroy(c->nc[g]);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->switched) cudaEventDestroy(c->switched);
    for (int s = 0; s < PX_CUDA_STREAMS; s++)
      if (c->streams[s]) cudaStreamDestroy(c->streams[s]);
    free(c);
  }
  free(b);
}

/* The table; optional entries it leaves out: the all-to-alls (it refuses context parallelism's and expert
 * parallelism in supports_op). */
static const px_backend cuda_table = {
    .name = "cuda",
    .reserve = px_cuda_reserve,
    .alloc = px_cuda_alloc,
    .release = px_cuda_release,
    .zero = px_cuda_zero,
    .copy = px_cuda_copy,
    .upload = px_cuda_upload,
    .download = px_cuda_download,
    .op = px_cuda_op,
    .supports_op = px_cuda_supports_op,
    .allreduce = px_cuda_allreduce,
    .allgather = px_cuda_allgather,
    .reduce_scatter = px_cuda_reduce_scatter,
    .p2p = px_cuda_p2p,
    .host_allreduce = px_cuda_host_allreduce,
    .sync = px_cuda_sync,
    .set_stream = px_cuda_set_stream,
    .mark = px_cuda_mark,
    .wait_mark = px_cuda_wait_mark,
    .join = px_cuda_join,
    .amax_histories = cu_amax_histories,
    .codes_rekeyed = cu_codes_rekeyed,
    .own_bytes = px_cuda_own_bytes,
    .destroy = cu_destroy,
};

px_status px_cuda_backend_new(const px_comm *comm, px_backend **out, px_err *err) {
  *out = NULL;
  /* every rank needs a device; ranks of a node share its devices round-robin */
  int ndev = px_cuda_device_count(), lrank = 0, lsize = 1;
  px_comm_node(comm->world, &lrank, &lsize);
  int all[2] = {ndev > 0 ? 0 : 1, lsize > ndev};
  px_status st = px_comm_allreduce(comm->world, all, all, 2, PX_HOST_INT, PX_RED_MAX, err);
  if (st) return st;
  if (all[0])
    return px_err_set(err, PX_ERR_RUNTIME, "`backend` cuda: %s (hint: `backend` cpu)",
                      ndev ? "another rank sees no CUDA device" : "no CUDA device is visible on this machine");
  px_backend *b = px_calloc(1, sizeof *b, err);
  px_cuda *c = px_calloc(1, sizeof *c, err);
  if (!b || !c) {
    free(b), free(c);
    return PX_ERR_RUNTIME;
  }
  *b = cuda_table;
  b->impl = c;
  c->comm = comm;
  c->device = lrank % ndev;
  const char *mode = getenv("PX_CUDA_COMM");
  c->nccl = !all[1] && !(mode && !strcmp(mode, "mpi"));
  c->timeout_s = px_comm_timeout_s();
  st = px_cuda_check(cudaSetDevice(c->device), "cudaSetDevice", err);
  struct cudaDeviceProp prop;
  if (!st) st = px_cuda_check(cudaGetDeviceProperties(&prop, c->device), "cudaGetDeviceProperties", err);
  if (!st) {
    c->cc = prop.major * 10 + prop.minor;
    snprintf(c->gpu, sizeof c->gpu, "%s", prop.name);
  }
  if (!st && !(c->f8 = px_cpu_fp8_new())) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int s = 0; s < PX_CUDA_STREAMS && !st; s++)
    st = px_cuda_check(cudaStreamCreateWithFlags(&c->streams[s], cudaStreamNonBlocking), "cudaStreamCreate", err);
  if (!st) st = px_cuda_check(cudaEventCreateWithFlags(&c->switched, cudaEventDisableTiming), "cudaEventCreate", err);
  if (!st && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS)
    st = px_err_set(err, PX_ERR_RUNTIME, "cuda backend: cublasLtCreate failed");
  if (!st)
    st = px_cuda_check(cudaMalloc(&c->workspace, PX_CUDA_WORKSPACE_BYTES), "cudaMalloc (cuBLASLt workspace)", err);
  if (!st) st = px_cuda_check(cudaMalloc((void **)&c->dsum, sizeof *c->dsum), "cudaMalloc", err);
  st = px_comm_agree_as(st, comm->world, "cuda backend: another rank failed to set up its device", err);
  if (!st && c->nccl) st = px_cuda_nccl_init(c, err);
  if (!st && !c->nccl && comm->world_rank == 0)
    fprintf(stderr, "parallax: cuda backend: collectives go through MPI staged in host memory (%s)\n",
            all[1] ? "a node has more ranks than GPUs, and NCCL needs one GPU per rank" : "PX_CUDA_COMM=mpi");
  if (st) {
    cu_destroy(b);
    return st;
  }
  *out = b;
  return PX_OK;
}
