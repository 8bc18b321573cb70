/* The CUDA backend's device state, which its parts share (exec/cuda/ops.c,
 * collectives.c, backend.c), and its memory: four streams (compute, tp, dp,
 * pp) and the marks that order them, the waits that watch the
 * communicators, the arenas the plan's pools are reserved in, and each op
 * call's scratch. The backend table's memory and stream entries. */
#ifndef PX_EXEC_CUDA_MEMORY_H
#define PX_EXEC_CUDA_MEMORY_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/arena.h"
#include "exec/backend.h"
#include "exec/comm.h"
#include "exec/cpu/fp8.h"
#include "kernels/cuda/nf4.h"

#define PX_CUDA_ARENAS 16       /* the reserved ones (a pool each) and the rest grown for fragmentation */
#define PX_CUDA_MARK_EVENTS 256 /* per stream, a ring: re-recording one later only makes a wait longer */
#define PX_CUDA_SCRATCH_CHUNKS 16
#define PX_CUDA_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt: what Hopper kernels want */

enum { PX_CUDA_COMPUTE, PX_CUDA_TP, PX_CUDA_DP, PX_CUDA_PP, PX_CUDA_STREAMS };
_Static_assert(PX_ARENA_TAGS == PX_CUDA_STREAMS - 1, "an arena tag per side stream");

/* A cudaMalloc'd range and its offset allocator. */
typedef struct {
  char *base;
  px_arena a;
} px_cuda_arena;

/* Scratch of one op call: chunks that never move (a pointer handed out stays
 * valid for the whole call) and are all free again at the next call. */
typedef struct {
  char *p;
  uint64_t cap, used;
} px_cuda_chunk;

typedef struct {
  const px_comm *comm;
  int device;
  cudaStream_t streams[PX_CUDA_STREAMS];
  int cur;                           /* the stream work goes on */
  cudaEvent_t switched;              /* compute's progress when work moved to dp, or at join: dp's */
  cublasLtHandle_t lt;
  void *workspace;
  bool nccl;                         /* false: MPI through host memory */
  ncclComm_t nc[PX_GROUP_COUNT];     /* per group (ALL: the world, also for p2p) */
  int nc_rank[PX_GROUP_COUNT];
  double timeout_s;
  px_cuda_arena arenas[PX_CUDA_ARENAS];
  int narenas;
  uint64_t reserved;                 /* bytes the plan predicted, both pools (0: nothing reserved) */
  int nreserved;                     /* arenas[p] holds pool p for p < nreserved (PX_POOLS or 0) */
  /* mark m: stream m % PX_CUDA_STREAMS, event (m / PX_CUDA_STREAMS) % PX_CUDA_MARK_EVENTS */
  cudaEvent_t marks[PX_CUDA_STREAMS][PX_CUDA_MARK_EVENTS];
  uint64_t nmarks[PX_CUDA_STREAMS];
  px_cuda_chunk scratch[PX_CUDA_STREAMS][PX_CUDA_SCRATCH_CHUNKS];
  double *dsum;                      /* (1) device: sums of squares */
  int32_t *pinned;                   /* (npinned) page-locked host staging for the embedding backward's index */
  int64_t npinned;
  cudaEvent_t pinned_read;           /* recorded after the last copy out of pinned */
  float *ones;                       /* (nones) device: 1.0f, the loss backward's row sums */
  int64_t nones;
  int cc;                            /* the device's compute capability, major * 10 + minor (fp8 needs 89) */
  char gpu[256];                     /* its name (cudaDeviceProp.name) */
  px_cpu_fp8 *f8;                    /* the scales of the fp8 codes written, the amax histories (host side) */
  px_kc_nf4_tables nf4;              /* an nf4 base's decode tables (host side), filled at its first cast */
  bool nf4_filled;
} px_cuda;

static inline cudaStream_t px_cuda_stream(const px_cuda *c) { return c->streams[c->cur]; }
/* fp32, bf16 and fp16: the element types of the kernels and the collectives */
static inline bool px_cuda_kernel_dtype(px_dtype dt) {
  return dt == PX_DTYPE_FP32 || dt == PX_DTYPE_BF16 || dt == PX_DTYPE_FP16;
}

/* A CUDA runtime call's status, and a kernel launcher's (kernels/cuda keep the text), with the message. */
px_status px_cuda_check(cudaError_t e, const char *what, px_err *err);
px_status px_cuda_kc(px_status st, px_err *err);

/* Waits for the current stream, or every stream; a NCCL error reported
 * asynchronously, or no progress within the timeout, aborts the
 * communicators (which releases the stuck kernels) and fails. */
px_status px_cuda_wait(px_cuda *c, bool all, px_err *err);
/* A mark on the current stream (0 when no event can be had: the stream is
 * then waited for here), and the current stream waiting for one. */
uint64_t px_cuda_record_mark(px_cuda *c);
void px_cuda_wait_for(px_cuda *c, uint64_t mark);

/* n bytes of scratch for the current op call on the current stream: chunks
 * that never move, all free again after px_cuda_scratch_reset. */
px_status px_cuda_scratch(px_cuda *c, uint64_t bytes, void **out, px_err *err);
void px_cuda_scratch_reset(px_cuda *c);
/* Frees every arena (after the device is idle). */
void px_cuda_arenas_free(px_cuda *c);

/* The backend table's entries (exec/backend.h). */
px_status px_cuda_reserve(px_backend *b, const uint64_t pools[PX_POOLS], px_err *err);
px_status px_cuda_alloc(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err);
void px_cuda_release(px_backend *b, void *p, uint64_t bytes);
px_status px_cuda_zero(px_backend *b, void *p, uint64_t bytes, px_err *err);
px_status px_cuda_copy(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err);
px_status px_cuda_upload(px_backend *b, void *dst, const void *host, uint64_t bytes, px_err *err);
px_status px_cuda_download(px_backend *b, void *host, const void *src, uint64_t bytes, px_err *err);
px_status px_cuda_sync(px_backend *b, px_err *err);
void px_cuda_set_stream(px_backend *b, px_stream s);
uint64_t px_cuda_mark(px_backend *b);
px_status px_cuda_wait_mark(px_backend *b, uint64_t mark, px_err *err);
px_status px_cuda_join(px_backend *b, px_err *err);
uint64_t px_cuda_own_bytes(px_backend *b);

#endif
