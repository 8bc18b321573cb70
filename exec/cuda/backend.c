/* CUDA backend: device memory, the op dispatch onto kernels/cuda, and the
 * collectives (NCCL, or MPI staged through the host). Four streams: compute
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

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "exec/arena.h"
#include "exec/cpu/fp8.h"
#include "exec/support.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embed.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/flash.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/rope.h"

#define ARENAS 16                       /* the reserved ones (a pool each) and the rest grown for fragmentation */
#define ARENA_GROW_MIN ((uint64_t)64 << 20)
#define MARK_EVENTS 256                 /* per stream, a ring: re-recording one later only makes a wait longer */
#define SCRATCH_CHUNKS 16
#define WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt: what Hopper kernels want */

enum { COMPUTE, TP, DP, PP, NSTREAMS };
_Static_assert(PX_ARENA_TAGS == NSTREAMS - 1, "an arena tag per side stream");

/* A cudaMalloc'd range and its offset allocator. */
typedef struct {
  char *base;
  px_arena a;
} arena;

/* Scratch of one op call: chunks that never move (a pointer handed out stays
 * valid for the whole call) and are all free again at the next call. */
typedef struct {
  char *p;
  uint64_t cap, used;
} chunk;

typedef struct {
  const px_comm *comm;
  int device;
  cudaStream_t streams[NSTREAMS];
  int cur;                           /* the stream work goes on */
  cudaEvent_t switched;              /* compute's progress when work moved to dp, or at join: dp's */
  cublasLtHandle_t lt;
  void *workspace;
  bool nccl;                         /* false: MPI through host memory */
  ncclComm_t nc[PX_GROUP_COUNT];     /* per group (ALL: the world, also for p2p) */
  int nc_rank[PX_GROUP_COUNT];
  double timeout_s;
  arena arenas[ARENAS];
  int narenas;
  uint64_t reserved;                 /* bytes the plan predicted, both pools (0: nothing reserved) */
  int nreserved;                     /* arenas[p] holds pool p for p < nreserved (PX_POOLS or 0) */
  cudaEvent_t marks[NSTREAMS][MARK_EVENTS]; /* mark m: stream m % NSTREAMS, event (m / NSTREAMS) % MARK_EVENTS */
  uint64_t nmarks[NSTREAMS];
  chunk scratch[NSTREAMS][SCRATCH_CHUNKS];
  double *dsum;                      /* (1) device: sums of squares */
  int32_t *pinned;                   /* (npinned) page-locked host staging for the embedding backward's index */
  int64_t npinned;
  cudaEvent_t pinned_read;           /* recorded after the last copy out of pinned */
  float *ones;                       /* (nones) device: 1.0f, the loss backward's row sums */
  int64_t nones;
  int cc;                            /* the device's compute capability, major * 10 + minor (fp8 needs 89) */
  char gpu[256];                     /* its name (cudaDeviceProp.name) */
  px_cpu_fp8 *f8;                    /* the scales of the fp8 codes written, the amax histories (host side) */
} cuda;

static cudaStream_t stream_of(const cuda *c) { return c->streams[c->cur]; }

static px_status cu_check(cudaError_t e, const char *what, px_err *err) {
  if (e == cudaSuccess) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s: %s", what, cudaGetErrorString(e));
}

static px_status nccl_check(ncclResult_t r, const char *what, px_err *err) {
  if (r == ncclSuccess) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s: %s", what, ncclGetErrorString(r));
}

/* Kernel f's launcher for element type dt: f (fp32), f_bf16 or f_fp16 (the
 * operands are void pointers, so one argument list serves all three). */
#define BY_DT(dt, f, ...)                                                                   \
  ((dt) == PX_DTYPE_BF16 ? f##_bf16(__VA_ARGS__) : (dt) == PX_DTYPE_FP16 ? f##_fp16(__VA_ARGS__) \
                                                                          : f(__VA_ARGS__))

/* A launcher's status with its message (kernels/cuda keep the text). */
static px_status kc(px_status st, px_err *err) {
  if (st == PX_OK) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s", px_kc_last_error());
}

int px_cuda_device_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void px_cuda_device_name(char *buf, size_t cap) {
  struct cudaDeviceProp prop;
  if (!cap) return;
  buf[0] = 0;
  if (px_cuda_device_count() > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(buf, cap, "%s", prop.name);
}

/* ---- waiting, with the communicators watched ---- */

static void abort_comms(cuda *c) {
  for (int g = 0; g < PX_GROUP_COUNT; g++)
    if (c->nc[g]) {
      ncclCommAbort(c->nc[g]);
      c->nc[g] = NULL;
    }
}

/* Waits for the current stream, or every stream; a NCCL error reported
 * asynchronously, or no progress within the timeout, aborts the
 * communicators (which releases the stuck kernels) and fails. */
static px_status wait_streams(cuda *c, bool all, px_err *err) {
  double t0 = px_clock_s();
  for (long polls = 0;; polls++) {
    cudaError_t q = cudaSuccess;
    for (int s = 0; s < NSTREAMS && q == cudaSuccess; s++)
      if (all || s == c->cur) q = cudaStreamQuery(c->streams[s]);
    if (q == cudaSuccess) return PX_OK;
    if (q != cudaErrorNotReady) return cu_check(q, "a kernel or copy failed", err);
    for (int g = 0; g < PX_GROUP_COUNT; g++) {
      ncclResult_t async = ncclSuccess;
      if (c->nc[g] && ncclCommGetAsyncError(c->nc[g], &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        abort_comms(c);
        return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: NCCL (%s group) failed: %s", px_group_names[g],
                          ncclGetErrorString(async));
      }
    }
    if (px_clock_s() - t0 > c->timeout_s) {
      abort_comms(c);
      return px_err_set(err, PX_ERR_RUNTIME,
                        "cuda backend: the device made no progress for %.0f s (a collective waits for a rank that "
                        "failed or stopped?); communicators aborted (PX_COMM_TIMEOUT_S sets the limit)",
                        c->timeout_s);
    }
    if (polls > 2000) { /* spin through short waits (a gradient norm), sleep through long ones */
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- marks: events naming the work issued so far on a stream ---- */

/* A mark on the current stream; 0 when no event can be had (the stream is
 * then waited for here, so there is nothing left to wait for). */
static uint64_t record_mark(cuda *c) {
  int s = c->cur;
  uint64_t n = ++c->nmarks[s];
  cudaEvent_t *ev = &c->marks[s][n % MARK_EVENTS];
  if ((!*ev && cudaEventCreateWithFlags(ev, cudaEventDisableTiming) != cudaSuccess) ||
      cudaEventRecord(*ev, c->streams[s]) != cudaSuccess) {
    cudaStreamSynchronize(c->streams[s]);
    return 0;
  }
  return n * NSTREAMS + (uint64_t)s;
}

static void wait_for(cuda *c, uint64_t mark) {
  int s = (int)(mark % NSTREAMS);
  if (s != c->cur) cudaStreamWaitEvent(stream_of(c), c->marks[s][(mark / NSTREAMS) % MARK_EVENTS], 0);
}

static uint64_t cu_mark(px_backend *b) { return record_mark(b->impl); }

/* Scratch chunks, the cuBLASLt workspace, the small fixed buffers and any
 * arena beyond the reserved ones. */
static uint64_t cu_own_bytes(px_backend *b) {
  cuda *c = b->impl;
  uint64_t n = WORKSPACE_BYTES + sizeof *c->dsum + (uint64_t)c->nones * sizeof *c->ones;
  for (int s = 0; s < NSTREAMS; s++)
    for (int i = 0; i < SCRATCH_CHUNKS; i++) n += c->scratch[s][i].cap;
  for (int i = c->nreserved; i < c->narenas; i++) n += c->arenas[i].a.size;
  return n;
}

static px_status cu_wait_mark(px_backend *b, uint64_t mark, px_err *err) {
  (void)err;
  if (mark) wait_for(b->impl, mark);
  return PX_OK;
}

/* ---- memory ---- */

#ifdef PX_EMU_POISON
/* The emulator's device memory is host memory under AddressSanitizer: what
 * is not taken is poisoned, so a kernel that runs past its tensor is caught
 * as it was with one allocation per tensor. Takes and releases mark the
 * range in stream order (after the work queued before them). */
#include <sanitizer/asan_interface.h>
typedef struct {
  char *p;
  uint64_t live, bytes; /* [p, p + live) usable, the rest of [p, p + bytes) poisoned */
} poison_range;
static void CUDART_CB poison_cb(void *data) {
  poison_range *r = data;
  ASAN_UNPOISON_MEMORY_REGION(r->p, r->live);
  ASAN_POISON_MEMORY_REGION(r->p + r->live, r->bytes - r->live);
  free(r);
}
static void mark(cuda *c, void *p, uint64_t live, uint64_t bytes) {
  poison_range *r = malloc(sizeof *r);
  if (!r) { /* no room for the callback's record: mark it now, after the stream's work */
    cudaStreamSynchronize(stream_of(c));
    ASAN_UNPOISON_MEMORY_REGION(p, live);
    ASAN_POISON_MEMORY_REGION((char *)p + live, px_arena_round(bytes) - live);
    return;
  }
  *r = (poison_range){p, live, px_arena_round(bytes)};
  cudaLaunchHostFunc(stream_of(c), poison_cb, r);
}
#define POISON_ARENA(p, bytes) ASAN_POISON_MEMORY_REGION(p, bytes)
#define FILL_UNZEROED 1 /* NaN bytes in PX_FILL_POISON memory, as the CPU backend */
#else
#define FILL_UNZEROED 0
#define mark(c, p, live, bytes) ((void)0)
#define POISON_ARENA(p, bytes) ((void)0)
#endif

static void arenas_free(cuda *c) {
  cudaDeviceSynchronize();
  for (int i = 0; i < c->narenas; i++) {
    cudaFree(c->arenas[i].base);
    px_arena_destroy(&c->arenas[i].a);
  }
  c->narenas = 0;
}

static px_status arena_add(cuda *c, uint64_t bytes, px_err *err) {
  if (c->narenas == ARENAS)
    return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: device memory fragmented beyond %d arenas", ARENAS);
  arena *r = &c->arenas[c->narenas];
  bytes = px_arena_round(bytes);
  cudaError_t e = cudaMalloc((void **)&r->base, bytes);
  if (e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    return px_err_set(err, PX_ERR_RUNTIME,
                      "cuda backend: out of device memory: %.2f GiB wanted%s, %.2f GiB of %.2f GiB free (%s)",
                      (double)bytes / 1073741824.0,
                      c->reserved ? " beyond the plan's peak (fragmentation)" : " for the plan's predicted peak",
                      (double)free_b / 1073741824.0, (double)total_b / 1073741824.0, cudaGetErrorString(e));
  }
  px_status st = px_arena_init(&r->a, bytes, err);
  if (st) {
    cudaFree(r->base);
    return st;
  }
  POISON_ARENA(r->base, bytes);
  c->narenas++;
  return PX_OK;
}

/* An arena per pool, sized by the plan, before anything is allocated. */
static px_status cu_reserve(px_backend *b, const uint64_t pools[PX_POOLS], px_err *err) {
  cuda *c = b->impl;
  if (c->narenas) return px_err_set(err, PX_ERR_RUNTIME, "internal: cuda backend: reserve after an allocation");
  uint64_t bytes = 0;
  for (int p = 0; p < PX_POOLS; p++) bytes += px_arena_round(pools[p]);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && bytes > free_b)
    return px_err_set(err, PX_ERR_RUNTIME,
                      "cuda backend: the plan needs %.2f GiB on GPU %d (its predicted peak, with headroom) but "
                      "%.2f GiB of its %.2f GiB are free (a smaller GPU than the cluster preset, or memory held by "
                      "another process); choose a plan that fits (parallax sweep)",
                      (double)bytes / 1073741824.0, c->device, (double)free_b / 1073741824.0,
                      (double)total_b / 1073741824.0);
  px_status st = PX_OK;
  for (int p = 0; p < PX_POOLS && !st; p++) st = arena_add(c, pools[p], err);
  if (!st) c->reserved = bytes, c->nreserved = PX_POOLS;
  return st;
}

/* Arena i serves `pool`: its own when reserved for it, any grown one. */
static bool serves(const cuda *c, int i, px_pool pool) { return i >= c->nreserved || i == (int)pool; }

static px_status cu_alloc(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err) {
  cuda *c = b->impl;
  *out = NULL;
  uint64_t off = 0, tag[PX_ARENA_TAGS] = {0};
  int i = 0;
  while (i < c->narenas && !(serves(c, i, pool) && px_arena_take(&c->arenas[i].a, bytes, &off, tag))) i++;
  if (i == c->narenas) { /* none holds it: grow */
    uint64_t grow = c->reserved / 8 > ARENA_GROW_MIN ? c->reserved / 8 : ARENA_GROW_MIN;
    px_status st = arena_add(c, bytes > grow ? bytes : grow, err);
    if (st) return st;
    if (c->reserved && c->comm->world_rank == 0)
      fprintf(stderr, "parallax: cuda backend: %.1f MiB beyond the plan's %.1f MiB for the %s (fragmentation)\n",
              (double)px_arena_round(bytes > grow ? bytes : grow) / 1048576.0, (double)c->reserved / 1048576.0,
              pool == PX_POOL_STATES ? "model states" : "step's tensors");
    if (!px_arena_take(&c->arenas[i].a, bytes, &off, tag))
      return px_err_set(err, PX_ERR_RUNTIME, "internal: cuda backend: a fresh arena refused %llu bytes",
                        (unsigned long long)bytes);
  }
  void *p = c->arenas[i].base + off;
  /* last used on a side stream: wait for that use (tag k: stream k + 1) */
  for (int k = 0; k < PX_ARENA_TAGS; k++)
    if (tag[k]) wait_for(c, tag[k] * NSTREAMS + (uint64_t)(k + 1));
  mark(c, p, bytes, bytes);
  px_status st = PX_OK;
  if (fill == PX_FILL_ZERO || (fill == PX_FILL_POISON && FILL_UNZEROED))
    st = cu_check(cudaMemsetAsync(p, fill == PX_FILL_ZERO ? 0 : 0xff, bytes, stream_of(c)), "cudaMemsetAsync", err);
  if (!st) *out = p;
  return st;
}

/* A release on a side stream is tagged with a mark there; one on compute
 * needs none (a side stream waits for compute's progress whenever work moves
 * there). */
static void cu_release(px_backend *b, void *p, uint64_t bytes) {
  if (!p) return;
  cuda *c = b->impl;
  int i = 0;
  while (i < c->narenas && !((char *)p >= c->arenas[i].base && (char *)p < c->arenas[i].base + c->arenas[i].a.size)) i++;
  if (i == c->narenas) return;
  px_cpu_fp8_forget(c->f8, p, bytes);
  mark(c, p, 0, bytes);
  uint64_t tag[PX_ARENA_TAGS] = {0}, m = c->cur == COMPUTE ? 0 : record_mark(c);
  if (m) tag[m % NSTREAMS - 1] = m / NSTREAMS;
  px_err err = {0};
  if (px_arena_give(&c->arenas[i].a, (uint64_t)((char *)p - c->arenas[i].base), bytes, tag, &err))
    fprintf(stderr, "parallax: cuda backend: %s\n", err.msg);
}

static px_status cu_zero(px_backend *b, void *p, uint64_t bytes, px_err *err) {
  cuda *c = b->impl;
  return cu_check(cudaMemsetAsync(p, 0, bytes, stream_of(c)), "cudaMemsetAsync", err);
}

static px_status cu_copy(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err) {
  cuda *c = b->impl;
  if (dst == src || !bytes) return PX_OK;
  return cu_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(c)), "cudaMemcpyAsync", err);
}

/* From pageable host memory: returns once the host buffer has been read. */
static px_status cu_upload(px_backend *b, void *dst, const void *host, uint64_t bytes, px_err *err) {
  cuda *c = b->impl;
  if (!bytes) return PX_OK;
  return cu_check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_of(c)), "cudaMemcpyAsync (upload)",
                  err);
}

static px_status cu_download(px_backend *b, void *host, const void *src, uint64_t bytes, px_err *err) {
  cuda *c = b->impl;
  px_status st = wait_streams(c, false, err);
  if (st || !bytes) return st;
  return cu_check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)", err);
}

static px_status cu_sync(px_backend *b, px_err *err) { return wait_streams(b->impl, true, err); }

/* Onto a side stream: after everything issued on compute so far. Back onto compute: no wait. */
static void cu_set_stream(px_backend *b, px_stream s) {
  cuda *c = b->impl;
  int want = s == PX_STREAM_TP   ? TP
             : s == PX_STREAM_DP ? DP
             : s == PX_STREAM_PP_SEND || s == PX_STREAM_PP_RECV ? PP
                                                                : COMPUTE;
  if (want == c->cur) return;
  if (want != COMPUTE) { /* the side stream starts after compute's work so far */
    cudaEventRecord(c->switched, c->streams[COMPUTE]);
    cudaStreamWaitEvent(c->streams[want], c->switched, 0);
  }
  c->cur = want;
}

/* Compute waits for everything issued on the side streams. */
static px_status cu_join(px_backend *b, px_err *err) {
  cuda *c = b->impl;
  c->cur = COMPUTE;
  px_status st = PX_OK;
  for (int s = COMPUTE + 1; s < NSTREAMS && !st; s++) {
    st = cu_check(cudaEventRecord(c->switched, c->streams[s]), "cudaEventRecord", err);
    if (!st) st = cu_check(cudaStreamWaitEvent(c->streams[COMPUTE], c->switched, 0), "cudaStreamWaitEvent", err);
  }
  return st;
}

/* n bytes of scratch for the current op call (see chunk). */
static px_status scratch(cuda *c, uint64_t bytes, void **out, px_err *err) {
  bytes = (bytes + 255) & ~(uint64_t)255;
  uint64_t largest = 0;
  chunk *set = c->scratch[c->cur];
  for (int i = 0; i < SCRATCH_CHUNKS; i++) {
    chunk *k = &set[i];
    if (k->p && k->cap - k->used >= bytes) {
      *out = k->p + k->used;
      k->used += bytes;
      return PX_OK;
    }
    if (k->cap > largest) largest = k->cap;
  }
  for (int i = 0; i < SCRATCH_CHUNKS; i++) {
    chunk *k = &set[i];
    if (k->p) continue;
    uint64_t cap = bytes > 2 * largest ? bytes : 2 * largest;
    cudaError_t e = cudaMalloc((void **)&k->p, cap);
    if (e != cudaSuccess) {
      k->p = NULL;
      return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: out of device memory for %llu bytes of scratch (%s)",
                        (unsigned long long)bytes, cudaGetErrorString(e));
    }
    k->cap = cap;
    k->used = bytes;
    *out = k->p;
    return PX_OK;
  }
  return px_err_set(err, PX_ERR_RUNTIME, "internal: cuda backend scratch chunks exhausted");
}

static void scratch_reset(cuda *c) {
  for (int i = 0; i < SCRATCH_CHUNKS; i++) c->scratch[c->cur][i].used = 0;
}

/* ---- operands ---- */

/* An operand's dtype, from its slot; the interpreter's synthetic ops (no
 * slot) work on gradients. */
static px_dtype operand_dtype(const px_exec_op *e, px_ref r) {
  return r.slot >= 0 ? (px_dtype)e->plan->slots[r.slot].dtype : e->plan->grad_dtype;
}

static uint64_t operand_elems(const px_exec_op *e, px_ref r) {
  return r.slot >= 0 ? e->plan->slots[r.slot].elems : (uint64_t)e->count;
}

/* Operand bits for widen(): outputs 0..3, inputs 4..9. */
#define OUT_BIT(j) (1u << (j))
#define IN_BIT(j) (1u << (PX_OP_OUTS + (j)))
#define ALL_OPERANDS 0x3ffu

/* Widened outputs to narrow back after the op. */
typedef struct {
  void *orig[PX_OP_OUTS];
  uint64_t n[PX_OP_OUTS];
  px_dtype dt[PX_OP_OUTS];
} narrowing;

static bool half_dtype(px_dtype t) { return t == PX_DTYPE_BF16 || t == PX_DTYPE_FP16; }

/* *w = *e with the chosen 16-bit operands replaced by fp32 copies in scratch
 * (an operand given twice, as in place ops do, gets one copy). */
static px_status widen(cuda *c, const px_exec_op *e, px_exec_op *w, unsigned which, narrowing *nb, px_err *err) {
  *w = *e;
  memset(nb, 0, sizeof *nb);
  void *from[PX_OP_OUTS + PX_OP_INS], *to[PX_OP_OUTS + PX_OP_INS];
  int nwide = 0;
  for (int k = 0; k < PX_OP_OUTS + PX_OP_INS; k++) {
    bool is_out = k < PX_OP_OUTS;
    int j = is_out ? k : k - PX_OP_OUTS;
    void **slot = is_out ? &w->out[j] : &w->in[j];
    px_ref r = is_out ? e->op->out[j] : e->op->in[j];
    px_dtype dt = operand_dtype(e, r);
    if (!(which & (1u << k)) || !*slot || !half_dtype(dt)) continue;
    void *wide = NULL;
    for (int i = 0; i < nwide && !wide; i++)
      if (from[i] == *slot) wide = to[i];
    uint64_t n = operand_elems(e, r);
    if (!wide) {
      px_status st = scratch(c, n * sizeof(float), &wide, err);
      if (!st) st = kc(px_kc_convert(wide, *slot, PX_DTYPE_FP32, dt, (int64_t)n, stream_of(c)), err);
      if (st) return st;
      from[nwide] = *slot, to[nwide++] = wide;
    }
    if (is_out) nb->orig[j] = *slot, nb->n[j] = n, nb->dt[j] = dt;
    *slot = wide;
  }
  return PX_OK;
}

static px_status narrow(cuda *c, const px_exec_op *w, const narrowing *nb, px_err *err) {
  px_status st = PX_OK;
  for (int j = 0; j < PX_OP_OUTS && !st; j++)
    if (nb->orig[j])
      st = kc(px_kc_convert(nb->orig[j], w->out[j], nb->dt[j], PX_DTYPE_FP32, (int64_t)nb->n[j], stream_of(c)), err);
  return st;
}

static px_status op_dispatch(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err);

/* An op without a kernel for its 16-bit type: on fp32 copies of every 16-bit operand. */
static px_status widened(px_backend *be, const px_exec_op *e, px_err *err) {
  px_exec_op w;
  narrowing nb;
  px_status st = widen(be->impl, e, &w, ALL_OPERANDS, &nb, err);
  if (!st) st = op_dispatch(be, &w, PX_DTYPE_FP32, err);
  if (!st) st = narrow(be->impl, &w, &nb, err);
  return st;
}

/* ---- composite ops ---- */

/* bf16 embedding backward without an fp32 copy of the table: the tokens'
 * positions grouped by row on the host (from the interpreter's copy of the
 * tokens), staged through page-locked memory (so the copy does not wait for
 * the stream), one fp32 sum per touched element. */
static px_status embed_bwd_sorted(cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const int64_t *d = e->op->dim;
  int64_t n = d[0], vl = d[2], need = 3 * n + 1;
  if (c->pinned_read) cudaEventSynchronize(c->pinned_read); /* the last copy out of the staging buffer */
  if (c->npinned < need) {
    cudaFreeHost(c->pinned);
    c->pinned = NULL;
    c->npinned = 0;
    px_status st = cu_check(cudaMallocHost((void **)&c->pinned, (size_t)need * sizeof *c->pinned), "cudaMallocHost", err);
    if (st) return st;
    c->npinned = need;
  }
  if (!c->pinned_read)
    if (cu_check(cudaEventCreateWithFlags(&c->pinned_read, cudaEventDisableTiming), "cudaEventCreate", err))
      return PX_ERR_RUNTIME;
  int64_t nrows = px_kc_embed_sort(c->pinned, e->host_tokens, n, e->tp_rank * vl, vl);
  if (nrows < 0) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  int32_t *dev = NULL;
  px_status st = scratch(c, (uint64_t)need * sizeof *dev, (void **)&dev, err);
  if (!st)
    st = cu_check(cudaMemcpyAsync(dev, c->pinned, (size_t)need * sizeof *dev, cudaMemcpyHostToDevice, stream_of(c)),
                  "cudaMemcpyAsync", err);
  if (!st) st = cu_check(cudaEventRecord(c->pinned_read, stream_of(c)), "cudaEventRecord", err);
  if (!st)
    st = kc(dt == PX_DTYPE_BF16 ? px_kc_embed_bwd_sorted_bf16(e->out[0], e->in[0], dev, nrows, n, d[1], stream_of(c))
                                : px_kc_embed_bwd_sorted_fp16(e->out[0], e->in[0], dev, nrows, n, d[1], stream_of(c)),
            err);
  return st;
}

/* Vocabulary-parallel cross-entropy: per-row max, sum of exponentials and
 * target logit, each all-reduced over TP, then the loss and log-probabilities
 * (out[0], fp32). 16-bit logits are widened into out[0] first. */
static px_status loss_fwd(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err) {
  cuda *c = be->impl;
  const int64_t *d = e->op->dim;
  int64_t n = d[0], vl = d[1], vstart = e->tp_rank * vl;
  bool tp = e->plan->par.tp > 1;
  const float *logits = e->in[0];
  const int32_t *targets = e->in[1];
  px_status st = PX_OK;
  if (dt != PX_DTYPE_FP32) {
    st = kc(px_kc_convert(e->out[0], e->in[0], PX_DTYPE_FP32, dt, n * vl, stream_of(c)), err);
    logits = e->out[0];
  }
  float *mx = NULL;
  if (!st) st = scratch(c, (uint64_t)(3 * n) * sizeof(float), (void **)&mx, err);
  if (st) return st;
  float *sum = mx + n, *tl = mx + 2 * n;
  st = kc(px_kc_ce_max_local(mx, logits, n, vstart, vl, d[2], stream_of(c)), err);
  if (!st && tp) st = be->allreduce(be, PX_GROUP_TP, mx, (uint64_t)n, PX_DTYPE_FP32, PX_RED_MAX, err);
  if (!st) st = kc(px_kc_ce_sumexp_local(sum, logits, mx, n, vstart, vl, d[2], stream_of(c)), err);
  if (!st && tp) st = be->allreduce(be, PX_GROUP_TP, sum, (uint64_t)n, PX_DTYPE_FP32, PX_RED_SUM, err);
  if (!st) st = kc(px_kc_ce_target_local(tl, logits, targets, n, vstart, vl, stream_of(c)), err);
  if (!st && tp) st = be->allreduce(be, PX_GROUP_TP, tl, (uint64_t)n, PX_DTYPE_FP32, PX_RED_SUM, err);
  if (!st) st = kc(px_kc_ce_loss(e->out[1], mx, sum, tl, targets, n, stream_of(c)), err);
  if (!st) st = kc(px_kc_ce_logprobs(e->out[0], logits, mx, sum, n, vl, stream_of(c)), err);
  return st;
}

/* From the log-probabilities (row max 0, row sum 1); with 16 bits the fp32
 * gradient is formed in place of the log-probabilities (their last use) and
 * rounded into out[0]. */
static px_status loss_bwd(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err) {
  cuda *c = be->impl;
  const int64_t *d = e->op->dim;
  int64_t n = d[0], vl = d[1];
  px_status st = PX_OK;
  if (c->nones < n) {
    float *host = malloc((size_t)n * sizeof *host);
    if (!host) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    for (int64_t i = 0; i < n; i++) host[i] = 1.0f;
    cudaFree(c->ones);
    c->ones = NULL;
    c->nones = 0;
    st = cu_check(cudaMalloc((void **)&c->ones, (size_t)n * sizeof(float)), "cudaMalloc", err);
    if (!st) st = cu_check(cudaMemcpy(c->ones, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy", err);
    if (!st) c->nones = n;
    free(host);
  }
  float *zeros = NULL;
  if (!st) st = scratch(c, (uint64_t)n * sizeof(float), (void **)&zeros, err);
  if (!st) st = cu_check(cudaMemsetAsync(zeros, 0, (size_t)n * sizeof(float), stream_of(c)), "cudaMemsetAsync", err);
  float *dlogits = dt != PX_DTYPE_FP32 ? e->in[0] : e->out[0];
  if (!st)
    st = kc(px_kc_ce_bwd(dlogits, e->in[0], zeros, c->ones, e->in[1], n, e->tp_rank * vl, vl, d[2], e->loss_scale,
                         stream_of(c)),
            err);
  if (!st && dt != PX_DTYPE_FP32) st = kc(px_kc_convert(e->out[0], dlogits, dt, PX_DTYPE_FP32, n * vl, stream_of(c)), err);
  return st;
}

/* Fused attention, a batch row at a time (each row has its dropout offset),
 * in the plan's dtype (fp32, bf16 or fp16). */
static px_status flash(cuda *c, const px_exec_op *e, px_dtype dt, bool bwd, px_err *err) {
  const int64_t *d = e->op->dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4];
  uint64_t el = px_dtype_bytes(dt), nq = (uint64_t)(S * HQ * D) * el, nkv = (uint64_t)(S * HKV * D) * el;
  float p = (float)e->plan->model.dropout;
  uint64_t seed = px_exec_dropout_seed(e, PX_DROPOUT_SITE_ATTN);
  char *const *out = (char *const *)e->out;
  const char *const *in = (const char *const *)e->in;
  px_status st = PX_OK;
  for (int64_t b = 0; b < B && !st; b++) {
    uint64_t off = px_exec_head_dropout_offset(e, b, 0, S), bq = (uint64_t)b * nq, bkv = (uint64_t)b * nkv;
    if (!bwd)
      st = kc(px_kc_flash_fwd(out[0] + bq, (float *)e->out[1] + b * HQ * S, in[0] + bq, in[1] + bkv, in[2] + bkv, dt,
                              S, HQ, HKV, D, p, seed, off, stream_of(c)),
              err);
    else
      st = kc(px_kc_flash_bwd(out[0] + bq, out[1] + bkv, out[2] + bkv, in[0] + bq, in[1] + bq, in[2] + bkv,
                              in[3] + bkv, in[4] + bq, (const float *)e->in[5] + b * HQ * S, dt, S, HQ, HKV, D, p,
                              seed, off, stream_of(c)),
              err);
  }
  return st;
}

/* Bias of a row-parallel layer, then dropout row by row (masks of global indices). */
static px_status dropout_fwd(cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const int64_t *d = e->op->dim;
  px_dropout_geom g = px_exec_dropout_geom(e);
  uint64_t el = px_dtype_bytes(dt), n = (uint64_t)(g.rows * g.row_elems);
  char *y = e->out[0];
  uint8_t *mask = e->out[1];
  px_status st = y == e->in[0] ? PX_OK
                               : cu_check(cudaMemcpyAsync(y, e->in[0], n * el, cudaMemcpyDeviceToDevice, stream_of(c)),
                                          "cudaMemcpyAsync", err);
  if (!st && e->in[1])
    st = kc(BY_DT(dt, px_kc_add_bias, (void *)y, e->in[1], (int64_t)n / d[2], d[2], stream_of(c)), err);
  for (int64_t b = 0; b < g.rows && !st; b++) {
    uint64_t off = (uint64_t)(b * g.row_elems), first = px_exec_dropout_row(e, &g, b);
    void *yb = y + off * el;
    st = kc(BY_DT(dt, px_kc_dropout_fwd, yb, mask + off, yb, g.row_elems, g.p, g.seed, first, stream_of(c)), err);
  }
  return st;
}

/* RoPE backward in place: the inverse rotation of a copy, accumulated into the zeroed buffer. */
static px_status rope_bwd(cuda *c, void *x, int64_t B, int64_t S, int64_t H, int64_t D, float theta, px_dtype dt,
                          px_err *err) {
  uint64_t bytes = (uint64_t)(B * S * H * D) * px_dtype_bytes(dt);
  void *tmp;
  px_status st = scratch(c, bytes, &tmp, err);
  if (!st) st = cu_check(cudaMemcpyAsync(tmp, x, bytes, cudaMemcpyDeviceToDevice, stream_of(c)), "cudaMemcpyAsync", err);
  if (!st) st = cu_check(cudaMemsetAsync(x, 0, bytes, stream_of(c)), "cudaMemsetAsync", err);
  if (!st)
    st = kc(BY_DT(dt, px_kc_rope_bwd, x, tmp, B, S, H, D, 0, theta, stream_of(c)), err);
  return st;
}

/* Sum of squares of a gradient range into the host double. */
static px_status grad_norm(cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  px_status st = kc(dt == PX_DTYPE_BF16   ? px_kc_sumsq_bf16(c->dsum, e->in[0], e->count, stream_of(c))
                    : dt == PX_DTYPE_FP16 ? px_kc_sumsq_fp16(c->dsum, e->in[0], e->count, stream_of(c))
                                          : px_kc_sumsq(c->dsum, e->in[0], e->count, stream_of(c)),
                    err);
  double v = 0;
  if (!st) st = wait_streams(c, false, err);
  if (!st) st = cu_check(cudaMemcpy(&v, c->dsum, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy", err);
  if (!st) *e->sumsq_out += v;
  return st;
}

static px_status adamw(cuda *c, const px_exec_op *e, px_err *err) {
  if (e->out[3]) /* mixed precision: fp32 master, 16-bit gradient and model copy */
    return kc(px_kc_adamw_mixed(e->out[0], e->out[1], e->out[2], e->in[0], e->out[3], e->plan->grad_dtype, e->count,
                                e->lr, e->beta1, e->beta2, e->eps, e->weight_decay, e->grad_scale, e->adam_t,
                                stream_of(c)),
              err);
  px_status st = PX_OK;
  if (e->grad_scale != 1.0f) st = kc(px_kc_scale(e->in[0], e->count, e->grad_scale, stream_of(c)), err);
  if (!st)
    st = kc(px_kc_adamw(e->out[0], e->out[1], e->out[2], e->in[0], e->count, e->lr, e->beta1, e->beta2, e->eps,
                        e->weight_decay, e->adam_t, stream_of(c)),
            err);
  return st;
}

/* The unfused attention's ops, fp32. */
static px_status unfused_attention(cuda *c, const px_exec_op *e, px_err *err) {
  cudaStream_t s = stream_of(c);
  const int64_t *d = e->op->dim;
  void *const *out = e->out, *const *in = e->in;
  float sc = 1.0f / sqrtf((float)d[4]);
  switch ((px_op_kind)e->op->kind) {
    case PX_OP_ATTN_SCORES: return kc(px_kc_attn_scores_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4], sc, s), err);
    case PX_OP_ATTN_SCORES_BWD:
      return kc(px_kc_attn_scores_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4], sc, s), err);
    case PX_OP_SOFTMAX: return kc(px_kc_attn_softmax_fwd(out[0], in[0], d[0], d[1], s), err);
    case PX_OP_SOFTMAX_BWD: return kc(px_kc_attn_softmax_bwd(out[0], in[0], in[1], d[0], d[1], s), err);
    case PX_OP_ATTN_CONTEXT: return kc(px_kc_attn_context_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4], s), err);
    default:
      return kc(px_kc_attn_context_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4], s), err);
  }
}

/* ---- the op dispatch ---- */

/* dt: the op's activation dtype (fp32 on widened copies). */
static px_status op_dispatch(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err) {
  cuda *c = be->impl;
  cudaStream_t s = stream_of(c);
  const px_op *o = e->op;
  const px_model *m = &e->plan->model;
  const int64_t *d = o->dim;
  void *const *out = e->out, *const *in = e->in;
  bool half = dt != PX_DTYPE_FP32, ln = m->norm == PX_NORM_LAYERNORM;
  uint64_t el = px_dtype_bytes(dt);
  float eps = (float)m->norm_eps, theta = (float)m->rope_theta;
  int64_t vstart = e->tp_rank * d[2];
  if (px_op_family_of((px_op_kind)o->kind) == PX_FAM_ATTENTION) /* Megatron's unfused attention ops */
    return half ? widened(be, e, err) : unfused_attention(c, e, err);
  switch ((px_op_kind)o->kind) {
    case PX_OP_EMBED:
      return kc(BY_DT(dt, px_kc_embed_fwd, out[0], in[0], in[1], d[0], vstart, d[2], d[1], s), err);
    case PX_OP_EMBED_BWD:
      if (half && e->host_tokens) return embed_bwd_sorted(c, e, dt, err);
      if (half) return widened(be, e, err);
      return kc(px_kc_embed_bwd(out[0], in[0], in[1], d[0], vstart, d[2], d[1], s), err);
    case PX_OP_POS: {
      int64_t pos0 = e->plan->par.sp ? e->tp_rank * d[1] : 0;
      return kc(BY_DT(dt, px_kc_pos_fwd, out[0], in[1], d[0], d[1], d[2], pos0, s), err);
    }
    case PX_OP_POS_BWD: {
      int64_t pos0 = e->plan->par.sp ? e->tp_rank * d[1] : 0;
      return kc(BY_DT(dt, px_kc_pos_bwd, out[0], in[0], d[0], d[1], d[2], pos0, s), err);
    }
    case PX_OP_NORM:
      if (ln)
        return kc(BY_DT(dt, px_kc_layernorm_fwd, out[0], out[2], out[1], in[0], in[1], in[2], d[0], d[1], eps, s), err);
      return kc(BY_DT(dt, px_kc_rmsnorm_fwd, out[0], out[1], in[0], in[1], d[0], d[1], eps, s), err);
    case PX_OP_NORM_BWD: {
      if (!half) {
        if (ln)
          return kc(px_kc_layernorm_bwd(out[0], out[1], out[2], in[0], in[1], in[4], in[3], in[2], d[0], d[1], s), err);
        return kc(px_kc_rmsnorm_bwd(out[0], out[1], in[0], in[1], in[4], in[2], d[0], d[1], s), err);
      }
      /* the 16-bit kernels accumulate weight gradients in fp32: widen those */
      px_exec_op w;
      narrowing nb;
      px_status st = widen(c, e, &w, OUT_BIT(1) | OUT_BIT(2), &nb, err);
      if (!st && ln)
        st = kc(BY_DT(dt, px_kc_layernorm_bwd, w.out[0], w.out[1], w.out[2], in[0], in[1], in[4], in[3], in[2], d[0],
                      d[1], s),
                err);
      else if (!st)
        st = kc(BY_DT(dt, px_kc_rmsnorm_bwd, w.out[0], w.out[1], in[0], in[1], in[4], in[2], d[0], d[1], s), err);
      if (!st) st = narrow(c, &w, &nb, err);
      return st;
    }
    case PX_OP_LINEAR: {
      if (o->flags & PX_OPF_GELU) /* act = gelu(x W^T + b) and the pre-activation, in one GEMM */
        return kc(px_kc_gemm_epi(c->lt, out[0], in[0], in[1], in[2], out[3], PX_KC_EPI_GELU, d[0], d[3], d[2], false,
                                 true, 1.0f, 0.0f, dt, dt, c->workspace, WORKSPACE_BYTES, s),
                  err);
      px_status st = PX_OK;
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0 && !st; i++) {
        const char *w = (const char *)in[1] + (uint64_t)(off * d[2]) * el;
        const char *bias = in[2] ? (const char *)in[2] + (uint64_t)off * el : NULL;
        st = kc(px_kc_linear_fwd(c->lt, out[i], in[0], w, bias, d[0], d[2], d[3 + i], dt, c->workspace,
                                 WORKSPACE_BYTES, s),
                err);
        off += d[3 + i];
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT: {
      bool data = o->kind == PX_OP_LINEAR_BWD_DATA;
      if (data && (o->flags & PX_OPF_DGELU)) /* the pre-activation's gradient: (dy W) gelu'(pre) */
        return kc(px_kc_gemm_epi(c->lt, out[0], in[0], in[3], NULL, in[4], PX_KC_EPI_DGELU, d[0], d[2], d[3], false,
                                 false, 1.0f, 0.0f, dt, dt, c->workspace, WORKSPACE_BYTES, s),
                  err);
      px_status st = PX_OK;
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0 && !st; i++) {
        uint64_t wo = (uint64_t)(off * d[2]) * el, bo = (uint64_t)off * el;
        if (data)
          st = kc(px_kc_linear_bwd(c->lt, out[0], NULL, NULL, in[i], NULL, (const char *)in[3] + wo, d[0], d[2],
                                   d[3 + i], dt, c->workspace, WORKSPACE_BYTES, s),
                  err);
        else
          st = kc(px_kc_linear_bwd(c->lt, NULL, (char *)out[0] + wo, out[1] ? (char *)out[1] + bo : NULL, in[i],
                                   in[3], NULL, d[0], d[2], d[3 + i], dt, c->workspace, WORKSPACE_BYTES, s),
                  err);
        off += d[3 + i];
      }
      return st;
    }
    case PX_OP_ROPE: {
      px_status st = kc(BY_DT(dt, px_kc_rope_fwd, out[0], in[0], d[0], d[1], d[2], d[4], 0, theta, s), err);
      if (!st) st = kc(BY_DT(dt, px_kc_rope_fwd, out[1], in[1], d[0], d[1], d[3], d[4], 0, theta, s), err);
      return st;
    }
    case PX_OP_ROPE_BWD: {
      px_status st = rope_bwd(c, out[0], d[0], d[1], d[2], d[4], theta, dt, err);
      if (!st) st = rope_bwd(c, out[1], d[0], d[1], d[3], d[4], theta, dt, err);
      return st;
    }
    case PX_OP_FLASH_ATTN: return flash(c, e, dt, false, err);
    case PX_OP_FLASH_ATTN_BWD: return flash(c, e, dt, true, err);
    case PX_OP_DROPOUT: return dropout_fwd(c, e, dt, err);
    case PX_OP_DROPOUT_BWD: {
      float p = (float)m->dropout;
      return kc(BY_DT(dt, px_kc_dropout_bwd, out[0], in[0], in[1], d[0], p, s), err);
    }
    case PX_OP_ADD: {
      px_status st = kc(BY_DT(dt, px_kc_add, out[0], in[0], in[1], d[0], s), err);
      if (!st && in[2]) st = kc(BY_DT(dt, px_kc_add_bias, out[0], in[2], d[0] / d[1], d[1], s), err);
      return st;
    }
    case PX_OP_ACC: return kc(BY_DT(dt, px_kc_acc, out[0], in[0], d[0], s), err);
    case PX_OP_GELU: return kc(BY_DT(dt, px_kc_gelu_fwd, out[0], in[0], d[0], s), err);
    case PX_OP_GELU_BWD:
      return kc(BY_DT(dt, px_kc_gelu_bwd, out[0], in[0], in[1], d[0], s), err);
    case PX_OP_SWIGLU:
      return kc(BY_DT(dt, px_kc_swiglu_fwd, out[0], in[0], in[1], d[0], s), err);
    case PX_OP_SWIGLU_BWD:
      return kc(BY_DT(dt, px_kc_swiglu_bwd, out[0], out[1], in[0], in[1], in[2], d[0], s), err);
    case PX_OP_LOSS: return loss_fwd(be, e, dt, err);
    case PX_OP_LOSS_BWD: return loss_bwd(be, e, dt, err);
    case PX_OP_GRAD_NORM: return grad_norm(c, e, dt, err);
    case PX_OP_ADAMW: return adamw(c, e, err);
    default: return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: op %s is not an op it runs", px_op_names[o->kind]);
  }
}

/* ---- fp8 ----
 * The cpu backend's recipe (exec/cpu/fp8.h), op for op: a CAST quantizes
 * with the per-tensor scale of current or delayed scaling, from the amax
 * reduced (max) over the TP and EP groups; the scales and amax histories are
 * kept on the host by the same bookkeeping as the cpu backend's (so both
 * scale alike), which costs a device-to-host copy of each amax (a
 * synchronization per cast and per fp8 weight: correct, not fast; device-side
 * scales are what a tuned version would keep). fp8 GEMMs run in cuBLASLt on
 * the codes (E4M3 forward, E5M2 output gradients), the scales' inverses
 * passed as its A/B scale pointers, fp32 accumulation, output in the base
 * dtype; cuBLASLt's fp8 kernels take K-major operands only (the "TN"
 * layout on Ada and Hopper), so the data gradient reads the weight's codes
 * transposed and the weight gradient both operands transposed, made here in
 * scratch (the plan counts the transposed copies but no op makes them).
 * Weights are quantized at use (E4M3, their own current or delayed scale),
 * as on the cpu backend. */

/* The largest |x| of n elements of dtype dt, on the host (waits for the stream). */
static px_status fp8_amax(px_backend *be, const void *x, px_dtype dt, int64_t n, float *amax, px_err *err) {
  cuda *c = be->impl;
  float *dev = NULL;
  px_status st = scratch(c, sizeof *dev, (void **)&dev, err);
  if (!st) st = kc(px_kc_fp8_amax(dev, x, dt, n, stream_of(c)), err);
  if (!st) st = be->download(be, amax, dev, sizeof *amax, err);
  return st;
}

/* The amax shared by the ranks that may exchange the codes (TE's amax reduction; the cpu backend's). */
static px_status fp8_amax_reduce(cuda *c, const px_plan *p, float *amax, px_err *err) {
  px_status st = PX_OK;
  px_group groups[2] = {PX_GROUP_TP, PX_GROUP_EP};
  int64_t sizes[2] = {p->par.tp, p->par.ep};
  for (int i = 0; i < 2 && !st; i++)
    if (sizes[i] > 1)
      st = px_comm_check(MPI_Allreduce(MPI_IN_PLACE, amax, 1, MPI_FLOAT, MPI_MAX, px_comm_of(c->comm, groups[i])),
                         "MPI_Allreduce (fp8 amax)", err);
  return st;
}

/* A CAST: in[0] (fp32 or bf16) into out[0]'s codes, E5M2 with PX_OPF_E5M2, else E4M3. Without an output
 * (the weights' cached copies) nothing: the GEMMs quantize weights at use, as on the cpu backend. */
static px_status fp8_cast(px_backend *be, const px_exec_op *e, px_err *err) {
  cuda *c = be->impl;
  const px_op *o = e->op;
  if (!e->out[0]) return PX_OK;
  px_dtype dt = operand_dtype(e, o->in[0]);
  int64_t n = o->dim[0];
  px_fp8_format f = (o->flags & PX_OPF_E5M2) ? PX_FP8_E5M2 : PX_FP8_E4M3;
  float amax = 0.0f, scale = 1.0f;
  px_status st = fp8_amax(be, e->in[0], dt, n, &amax, err);
  if (!st) st = fp8_amax_reduce(c, e->plan, &amax, err);
  if (!st) st = px_cpu_fp8_cast_scale(c->f8, e, amax, f, &scale, err);
  if (!st) st = kc(px_kc_fp8_quantize(e->out[0], e->in[0], dt, n, scale, f == PX_FP8_E5M2, stream_of(c)), err);
  if (!st) st = px_cpu_fp8_note(c->f8, e->out[0], (uint64_t)n, f, scale, err);
  return st;
}

/* The scale and format of fp8 input j (codes a cast or a collective wrote). */
static px_status fp8_input(cuda *c, const px_exec_op *e, int j, float *scale, bool *e5m2, px_err *err) {
  px_fp8_format f;
  if (!px_cpu_fp8_scale_of(c->f8, e->in[j], scale, &f))
    return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s reads fp8 %s, which no cast or collective wrote with "
                      "its scale", px_op_names[e->op->kind], e->plan->slots[e->op->in[j].slot].name);
  *e5m2 = f == PX_FP8_E5M2;
  return PX_OK;
}

/* The GEMM's weight in[j] ((rows, k), the parameters' dtype) as E4M3 codes in scratch, and its scale. */
static px_status fp8_weight(px_backend *be, const px_exec_op *e, int j, int64_t rows, int64_t k, uint8_t **q,
                            float *scale, px_err *err) {
  cuda *c = be->impl;
  px_dtype dt = operand_dtype(e, e->op->in[j]);
  float amax = 0.0f;
  px_status st = fp8_amax(be, e->in[j], dt, rows * k, &amax, err);
  if (!st) st = px_cpu_fp8_weight_scale(c->f8, e, e->op->in[j].slot, amax, scale, err);
  if (!st) st = scratch(c, (uint64_t)(rows * k), (void **)q, err);
  if (!st) st = kc(px_kc_fp8_quantize(*q, e->in[j], dt, rows * k, *scale, false, stream_of(c)), err);
  return st;
}

/* The dequantization factors 1 / sa and 1 / sb on the device (cuBLASLt's scale pointers). */
static px_status fp8_factors(px_backend *be, float sa, float sb, float **dev, px_err *err) {
  float h[2] = {1.0f / sa, 1.0f / sb};
  px_status st = scratch(be->impl, sizeof h, (void **)dev, err);
  if (!st) st = be->upload(be, *dev, h, sizeof h, err);
  return st;
}

/* (rows, cols) codes transposed into scratch. */
static px_status fp8_transposed(cuda *c, const void *q, int64_t rows, int64_t cols, uint8_t **out, px_err *err) {
  px_status st = scratch(c, (uint64_t)(rows * cols), (void **)out, err);
  if (!st) st = kc(px_kc_fp8_transpose(*out, q, rows, cols, stream_of(c)), err);
  return st;
}

/* The linear layer's fp8 GEMMs (the sections of a fused QKV or gate/up
 * weight one by one, dims as in op_dispatch): forward out_i = x W_i^T (+ b),
 * data gradient dx += dy_i W_i, weight gradient dW_i += dy_i^T x (+ db: the
 * column sums of dy_i's values). */
static px_status fp8_gemm(px_backend *be, const px_exec_op *e, px_err *err) {
  cuda *c = be->impl;
  cudaStream_t s = stream_of(c);
  const px_op *o = e->op;
  const int64_t *d = o->dim;
  int64_t N = d[0], K = d[2];
  px_status st = PX_OK;
  float sw = 1.0f, sx = 1.0f, *f = NULL;
  bool xe5 = false;
  uint8_t *qw = NULL;
  switch ((px_op_kind)o->kind) {
    case PX_OP_LINEAR: {
      px_dtype dt = operand_dtype(e, o->out[0]);
      uint64_t el = px_dtype_bytes(dt);
      if ((st = fp8_input(c, e, 0, &sx, &xe5, err)) || (st = fp8_weight(be, e, 1, d[1], K, &qw, &sw, err)) ||
          (st = fp8_factors(be, sx, sw, &f, err)))
        return st;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        st = kc(px_kc_gemm_fp8(c->lt, e->out[i], e->in[0], qw + off * K, f, f + 1, N, d[3 + i], K, xe5, false, 1.0f,
                               0.0f, dt, c->workspace, WORKSPACE_BYTES, s),
                err);
        if (!st && e->in[2]) /* the bias after the product (cuBLASLt's fp8 bias epilogue wants a bf16 bias) */
          st = kc(BY_DT(dt, px_kc_add_bias, e->out[i], (const void *)((const char *)e->in[2] + (uint64_t)off * el), N,
                        d[3 + i], s),
                  err);
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_DATA: {
      px_dtype dt = operand_dtype(e, o->out[0]);
      if ((st = fp8_weight(be, e, 3, d[1], K, &qw, &sw, err))) return st;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        float sy = 1.0f;
        bool ye5 = false;
        uint8_t *wt = NULL; /* W_i^T: (K, n_i) */
        if ((st = fp8_input(c, e, (int)i, &sy, &ye5, err)) || (st = fp8_factors(be, sy, sw, &f, err)) ||
            (st = fp8_transposed(c, qw + off * K, d[3 + i], K, &wt, err)))
          return st;
        st = kc(px_kc_gemm_fp8(c->lt, e->out[0], e->in[i], wt, f, f + 1, N, K, d[3 + i], ye5, false, 1.0f, 1.0f, dt,
                               c->workspace, WORKSPACE_BYTES, s),
                err);
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_WEIGHT: {
      px_dtype gt = operand_dtype(e, o->out[0]);
      uint64_t gel = px_dtype_bytes(gt);
      uint8_t *xt = NULL; /* x^T: (K, N) */
      if ((st = fp8_input(c, e, 3, &sx, &xe5, err)) || (st = fp8_transposed(c, e->in[3], N, K, &xt, err))) return st;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        float sy = 1.0f;
        bool ye5 = false;
        uint8_t *dyt = NULL; /* dy_i^T: (n_i, N) */
        if ((st = fp8_input(c, e, (int)i, &sy, &ye5, err)) || (st = fp8_factors(be, sy, sx, &f, err)) ||
            (st = fp8_transposed(c, e->in[i], N, d[3 + i], &dyt, err)))
          return st;
        st = kc(px_kc_gemm_fp8(c->lt, (char *)e->out[0] + (uint64_t)(off * K) * gel, dyt, xt, f, f + 1, d[3 + i], K, N,
                               ye5, xe5, 1.0f, 1.0f, gt, c->workspace, WORKSPACE_BYTES, s),
                err);
        if (!st && e->out[1]) { /* db_i += column sums of dy_i's values */
          px_dtype bt = operand_dtype(e, o->out[1]);
          void *dy = NULL;
          st = scratch(c, (uint64_t)(N * d[3 + i]) * px_dtype_bytes(bt), &dy, err);
          if (!st) st = kc(px_kc_fp8_dequantize(dy, e->in[i], bt, N * d[3 + i], sy, ye5, s), err);
          if (!st)
            st = kc(px_kc_linear_bwd(c->lt, NULL, NULL, (char *)e->out[1] + (uint64_t)off * px_dtype_bytes(bt), dy,
                                     NULL, NULL, N, K, d[3 + i], bt, c->workspace, WORKSPACE_BYTES, s),
                    err);
        }
      }
      return st;
    }
    default:
      return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s has no fp8 kernel", px_op_names[o->kind]);
  }
}

static px_status cu_op(px_backend *be, const px_exec_op *e, px_err *err) {
  cuda *c = be->impl;
  scratch_reset(c);
  if (e->op->kind == PX_OP_CAST) return fp8_cast(be, e, err);
  if (e->op->flags & PX_OPF_FP8) return fp8_gemm(be, e, err);
  return op_dispatch(be, e, e->plan->act_dtype, err);
}

/* ---- what it runs ---- */

static px_support refuse(char *why, size_t cap, px_support verdict, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static px_support refuse(char *why, size_t cap, px_support verdict, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return verdict;
}

static bool kernel_dtype(px_dtype dt) { return dt == PX_DTYPE_FP32 || dt == PX_DTYPE_BF16 || dt == PX_DTYPE_FP16; }

/* What the fp8 path (fp8_cast, fp8_gemm, the all-gather of codes) runs: on
 * a GPU with fp8 tensor cores (compute capability 8.9: Ada, Hopper,
 * Blackwell; an A100 is 8.0), per-tensor scales (current or delayed), the
 * linear layers' GEMMs (no fused GELU epilogue) with every dimension a
 * multiple of 16 (cuBLASLt's fp8 kernels), casts of fp32 or bf16 tensors,
 * and the SP all-gather of codes under the cpu backend's own limits. */
static px_support fp8_supports(const cuda *c, const px_plan *plan, const px_op *op, char *why, size_t cap) {
  const int64_t *d = op->dim;
  if (c->cc < 89)
    return refuse(why, cap, PX_SUPPORT_NO,
                  "precision fp8 needs fp8 tensor cores (compute capability 8.9 or later: Ada, Hopper, "
                  "Blackwell); GPU %d (%s) is %d.%d (hint: --precision bf16)",
                  c->device, c->gpu, c->cc / 10, c->cc % 10);
  if (plan->par.fp8_recipe == PX_FP8_BLOCKWISE)
    return refuse(why, cap, PX_SUPPORT_NO,
                  "fp8 blockwise scales (1x128 tiles, 128x128 weight blocks) are emulated by --backend cpu only: "
                  "the cuda backend does not drive cuBLASLt's block-scaling modes (CUDA 12.9+, "
                  "CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F / BLK128x128_32F) yet (hint: --fp8-recipe delayed or "
                  "current)");
  switch ((px_op_kind)op->kind) {
    case PX_OP_CAST: {
      px_dtype in = op->in[0].slot >= 0 ? (px_dtype)plan->slots[op->in[0].slot].dtype : plan->param_dtype;
      if (in != PX_DTYPE_FP32 && in != PX_DTYPE_BF16)
        return refuse(why, cap, PX_SUPPORT_NO, "no fp8 cast of %s tensors (fp32 and bf16)", px_dtype_names[in]);
      return PX_SUPPORT_YES;
    }
    case PX_OP_ALLGATHER:
      return px_cpu_fp8_supports(plan, op, why, cap) ? PX_SUPPORT_YES : PX_SUPPORT_NO; /* the same scales' rules */
    case PX_OP_LINEAR:
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT:
      if (op->flags & (PX_OPF_GELU | PX_OPF_DGELU))
        return refuse(why, cap, PX_SUPPORT_NO,
                      "a fused GELU epilogue on an fp8 GEMM (cuBLASLt's fp8 epilogues are not wired; hint: "
                      "--gelu unfused)");
      for (int i = 0; i < 6; i++)
        if (i != 1 && d[i] > 0 && d[i] % 16)
          return refuse(why, cap, PX_SUPPORT_NO,
                        "fp8 GEMM of %lld tokens, %lld inputs and outputs of %lld/%lld/%lld: cuBLASLt's fp8 "
                        "kernels need every dimension a multiple of 16 (hint: --precision bf16, or a batch and "
                        "model whose sizes are)",
                        (long long)d[0], (long long)d[2], (long long)d[3], (long long)d[4], (long long)d[5]);
      return PX_SUPPORT_YES;
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
      return refuse(why, cap, PX_SUPPORT_NO, "no mixture-of-experts kernels (hint: --backend cpu runs ep 1)");
    default:
      return refuse(why, cap, PX_SUPPORT_NO,
                    "an fp8 operand of an op the cuda backend's fp8 path does not read (it runs casts, the "
                    "linear layers' GEMMs and the SP all-gather of codes)");
  }
}

/* What op_dispatch and the collectives do with each op, said up front:
 * - every kind in fp32, bf16 and fp16, one dtype per op (the plan's
 *   activations'; the ops on gradient ranges run in it too);
 * - fused attention with head dims up to PX_KC_FLASH_MAX_D and at most 65535
 *   query heads (the kernels' limits);
 * - the unfused attention's six ops in 16 bits widened: fp32 copies of their
 *   (B, heads, S, S) operands in scratch memory the plan does not count;
 * - (not flagged) the embedding backward in 16 bits needs the host's copy of
 *   the tokens, which the interpreter passes (without, it widens the table);
 *   the norms' 16-bit backward sums the weight gradients in fp32 copies (H
 *   elements); the GELU epilogues fall back to a second kernel where
 *   cuBLASLt has none: all exact;
 * - AdamW on fp32 weights with fp32 gradients, or mixed: fp32 master weights
 *   with bf16 or fp16 gradients and model copy;
 * - collectives through MPI (PX_CUDA_COMM=mpi, or ranks outnumbering GPUs)
 *   up to MPI's int counts. */
static px_support cu_supports_op(px_backend *be, const px_plan *plan, const px_op *op, char *why, size_t cap) {
  const cuda *c = be->impl;
  px_dtype dt = px_support_op_dtype(plan, op);
  const int64_t *d = op->dim;
  const char *kind = px_op_names[op->kind];
  if (plan->par.fp8_params > 0) /* the whole plan: its weights are not what the executors hold */
    return refuse(why, cap, PX_SUPPORT_NO,
                  "fp8 weights (--fp8-params) are planned and simulated: the executors keep 16-bit weights and cast "
                  "them for the fp8 GEMMs (hint: drop --fp8-params)");
  /* offload's host side: the interpreter's own code over uploads and downloads */
  if (px_op_on_host((px_op_kind)op->kind)) return PX_SUPPORT_YES;
  if (px_support_fp8(plan, op)) {
    px_support v = fp8_supports(c, plan, op, why, cap);
    if (v != PX_SUPPORT_YES) return v;
    if (dt == PX_DTYPE_FP8) /* a cast or a collective of codes */
      return px_support_contract(plan, op, dt, why, cap) ? PX_SUPPORT_YES : PX_SUPPORT_NO;
  }
  if (!kernel_dtype(dt))
    return refuse(why, cap, PX_SUPPORT_NO, "no %s kernels (fp32, bf16 and fp16 only)", px_dtype_names[dt]);
  if (!px_support_contract(plan, op, dt, why, cap)) return PX_SUPPORT_NO;
  switch (plan->par.cp > 1 ? (px_op_kind)op->kind : PX_OP_COUNT) {
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
    case PX_OP_ALLTOALL:
    case PX_OP_ROPE:
    case PX_OP_ROPE_BWD:
    case PX_OP_POS:
    case PX_OP_POS_BWD:
    case PX_OP_DROPOUT:
      return refuse(why, cap, PX_SUPPORT_NO,
                    "context parallelism (cp %lld) needs attention over key blocks at other ranks' positions, which "
                    "the CUDA kernels do not have yet (hint: --backend cpu runs it)",
                    (long long)plan->par.cp);
    default: break;
  }
  if (plan->model.kv_lora_rank > 0 && (op->kind == PX_OP_FLASH_ATTN || op->kind == PX_OP_FLASH_ATTN_BWD))
    return refuse(why, cap, PX_SUPPORT_NO, "multi-head latent attention is planned and simulated only");
  if ((plan->model.attention_sinks || plan->model.qk_norm) &&
      (op->kind == PX_OP_FLASH_ATTN || op->kind == PX_OP_FLASH_ATTN_BWD ||
       px_op_family_of((px_op_kind)op->kind) == PX_FAM_ATTENTION))
    return refuse(why, cap, PX_SUPPORT_NO, "%s (%s) are planned and simulated; the executors do not run them yet",
                  plan->model.attention_sinks ? "attention sinks" : "per-head q/k norms", plan->model.name);
  if (op->flags & PX_OPF_WINDOW)
    return refuse(why, cap, PX_SUPPORT_NO,
                  "sliding-window attention (%s's window of %lld): the CUDA attention kernels have no window yet "
                  "(hint: --backend cpu runs it)", plan->model.name, (long long)plan->model.sliding_window);
  if (px_op_is_moe((px_op_kind)op->kind))
    return refuse(why, cap, PX_SUPPORT_NO, "no mixture-of-experts kernels (hint: --backend cpu runs ep 1)");
  bool half = dt != PX_DTYPE_FP32;
  if (px_op_family_of((px_op_kind)op->kind) == PX_FAM_ATTENTION) /* Megatron's unfused attention ops */
    return half ? refuse(why, cap, PX_SUPPORT_WIDENED,
                         "no %s kernels: runs on fp32 copies of its operands (hint: --attention flash)",
                         px_dtype_names[dt])
                : PX_SUPPORT_YES;
  switch ((px_op_kind)op->kind) {
    case PX_OP_ACC:
    case PX_OP_GRAD_NORM:
      if (dt != plan->act_dtype) /* op_dispatch runs every op in the activations' dtype */
        return refuse(why, cap, PX_SUPPORT_NO, "%s gradients with %s activations: %s runs in the activations' dtype",
                      px_dtype_names[dt], px_dtype_names[plan->act_dtype], kind);
      return PX_SUPPORT_YES;
    case PX_OP_ADAMW:
      if (!px_parallel_mixed(&plan->par) &&
          (plan->grad_dtype != PX_DTYPE_FP32 || plan->param_dtype != PX_DTYPE_FP32))
        return refuse(why, cap, PX_SUPPORT_NO, "fp32 AdamW needs fp32 weights and gradients, not %s and %s",
                      px_dtype_names[plan->param_dtype], px_dtype_names[plan->grad_dtype]);
      if (px_parallel_mixed(&plan->par) && (!half || plan->param_dtype != plan->grad_dtype))
        return refuse(why, cap, PX_SUPPORT_NO,
                      "mixed-precision AdamW needs bf16 or fp16 gradients and model weights of that dtype, not %s "
                      "and %s", px_dtype_names[plan->grad_dtype], px_dtype_names[plan->param_dtype]);
      return PX_SUPPORT_YES;
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
      if (d[4] > PX_KC_FLASH_MAX_D)
        return refuse(why, cap, PX_SUPPORT_NO,
                      "head dim %lld, the flash kernels take at most %d (hint: --attention unfused)", (long long)d[4],
                      PX_KC_FLASH_MAX_D);
      if (d[2] > 65535)
        return refuse(why, cap, PX_SUPPORT_NO, "%lld query heads per rank, the flash kernels take at most 65535",
                      (long long)d[2]);
      return PX_SUPPORT_YES;
    case PX_OP_ALLREDUCE:
    case PX_OP_ALLGATHER:
    case PX_OP_REDUCE_SCATTER:
      if (!c->nccl && (d[0] > INT32_MAX / 4 || d[1] > INT32_MAX / 4))
        return refuse(why, cap, PX_SUPPORT_NO, "%lld elements: beyond the MPI fallback's int counts (NCCL has none)",
                      (long long)(d[0] > d[1] ? d[0] : d[1]));
      return PX_SUPPORT_YES;
    case PX_OP_ALLTOALL:
      return refuse(why, cap, PX_SUPPORT_NO, "no all-to-all (context parallelism's a2a runs on the cpu backend)");
    case PX_OP_SEND:
    case PX_OP_RECV:
      if (!c->nccl && (uint64_t)d[0] * px_dtype_bytes(dt) > (uint64_t)INT32_MAX)
        return refuse(why, cap, PX_SUPPORT_NO, "%llu bytes: beyond the MPI fallback's int counts (NCCL has none)",
                      (unsigned long long)((uint64_t)d[0] * px_dtype_bytes(dt)));
      return PX_SUPPORT_YES;
    default: return PX_SUPPORT_YES;
  }
}

/* ---- collectives ---- */

/* NCCL's and the MPI fallback's element types (fp8 codes: all-gathered as bytes). */
static px_status coll_dtype(px_dtype dt, px_err *err) {
  if (kernel_dtype(dt)) return PX_OK;
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

static px_status nccl_comm(cuda *c, px_group g, ncclComm_t *out, px_err *err) {
  *out = c->nc[g];
  if (!*out) return px_err_set(err, PX_ERR_RUNTIME, "internal: cuda backend has no %s communicator", px_group_names[g]);
  return PX_OK;
}

/* The MPI fallback: device -> host -> MPI -> device. Sums run in fp32 on the host. */
typedef enum { STAGED_ALLREDUCE, STAGED_ALLGATHER, STAGED_REDUCE_SCATTER } staged_kind;

static px_status staged(px_backend *be, staged_kind kind, px_group g, void *out, const void *in, uint64_t count,
                        px_dtype dt, px_redop op, px_err *err) {
  cuda *c = be->impl;
  MPI_Comm mc = px_comm_of(c->comm, g);
  int n = 1, rank = 0;
  MPI_Comm_size(mc, &n);
  MPI_Comm_rank(mc, &rank);
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
    if (!st)
      st = px_comm_check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, raw, (int)(count * el), MPI_BYTE, mc), "MPI_Allgather", err);
    if (!st) st = be->upload(be, out, raw, total * el, err);
  } else if (!st) {
    st = be->download(be, raw, kind == STAGED_ALLREDUCE ? out : in, total * el, err);
    if (!st) px_dtype_to_fp32(f, raw, dt, total);
    MPI_Op mop = op == PX_RED_MAX ? MPI_MAX : MPI_SUM;
    if (!st && kind == STAGED_ALLREDUCE)
      st = px_comm_check(MPI_Allreduce(MPI_IN_PLACE, f, (int)count, MPI_FLOAT, mop, mc), "MPI_Allreduce", err);
    if (!st && kind == STAGED_REDUCE_SCATTER)
      st = px_comm_check(MPI_Reduce_scatter_block(MPI_IN_PLACE, f, (int)count, MPI_FLOAT, mop, mc),
                         "MPI_Reduce_scatter", err);
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
static int tp_enter(cuda *c, px_group g) {
  int from = c->cur;
  if (g != PX_GROUP_TP || from == TP) return -1;
  cudaEventRecord(c->switched, c->streams[from]);
  cudaStreamWaitEvent(c->streams[TP], c->switched, 0);
  c->cur = TP;
  return from;
}

static px_status tp_leave(cuda *c, int from, px_status st, px_err *err) {
  if (from < 0) return st;
  c->cur = from;
  px_status e = cu_check(cudaEventRecord(c->switched, c->streams[TP]), "cudaEventRecord", err);
  if (!e) e = cu_check(cudaStreamWaitEvent(c->streams[from], c->switched, 0), "cudaStreamWaitEvent", err);
  return st ? st : e;
}

static px_status cu_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op,
                              px_err *err) {
  cuda *c = be->impl;
  if (!count) return PX_OK;
  if (coll_dtype(dt, err)) return PX_ERR_RUNTIME;
  if (!c->nccl) return staged(be, STAGED_ALLREDUCE, g, buf, buf, count, dt, op, err);
  ncclComm_t nc;
  px_status st = nccl_comm(c, g, &nc, err);
  if (st) return st;
  int from = tp_enter(c, g);
  st = nccl_check(ncclAllReduce(buf, buf, count, nccl_type(dt), op == PX_RED_MAX ? ncclMax : ncclSum, nc, stream_of(c)),
                  "ncclAllReduce", err);
  return tp_leave(c, from, st, err);
}

/* in == out: in place, this rank's part already at its place in out. */
static px_status cu_allgather(px_backend *be, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                              px_err *err) {
  cuda *c = be->impl;
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
    st = nccl_check(ncclAllGather(send, out, count_in, nccl_type(dt), nc, stream_of(c)), "ncclAllGather", err);
    st = tp_leave(c, from, st, err);
  }
  if (!st && dt == PX_DTYPE_FP8) { /* the codes keep their scale (shared over TP: the amax reduction) */
    int n = 1;
    MPI_Comm_size(px_comm_of(c->comm, g), &n);
    st = px_cpu_fp8_moved(c->f8, out, in, count_in * (uint64_t)n, err);
  }
  return st;
}

static px_status cu_reduce_scatter(px_backend *be, px_group g, void *out, const void *in, uint64_t count_out,
                                   px_dtype dt, px_err *err) {
  cuda *c = be->impl;
  if (!count_out) return PX_OK;
  if (coll_dtype(dt, err)) return PX_ERR_RUNTIME;
  if (!c->nccl) return staged(be, STAGED_REDUCE_SCATTER, g, out, in, count_out, dt, PX_RED_SUM, err);
  ncclComm_t nc;
  px_status st = nccl_comm(c, g, &nc, err);
  if (st) return st;
  int from = tp_enter(c, g);
  st = nccl_check(ncclReduceScatter(in, out, count_out, nccl_type(dt), ncclSum, nc, stream_of(c)), "ncclReduceScatter",
                  err);
  return tp_leave(c, from, st, err);
}

/* NCCL pairs the k-th send from a rank with the k-th receive from it on the
 * peer; both sides order their batch by tag (forward before backward), as MPI
 * matches by tag. */
static px_status cu_p2p(px_backend *be, px_p2p *items, int n, px_err *err) {
  cuda *c = be->impl;
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
      st = nccl_check(it->send ? ncclSend(it->buf, it->bytes, ncclInt8, it->peer, nc, stream_of(c))
                               : ncclRecv(it->buf, it->bytes, ncclInt8, it->peer, nc, stream_of(c)),
                      it->send ? "ncclSend" : "ncclRecv", err);
    }
    px_status end = nccl_check(ncclGroupEnd(), "ncclGroupEnd", err);
    return st ? st : end;
  }
  /* MPI: stage sends through the host, receive into the host, then upload */
  char *host[16] = {0};
  MPI_Request req[16];
  int posted = 0;
  for (int i = 0; i < n && !st; i++) {
    if (items[i].bytes > (uint64_t)INT32_MAX) {
      st = px_err_set(err, PX_ERR_RUNTIME, "cuda backend: a %llu-byte message is too large for the MPI fallback",
                      (unsigned long long)items[i].bytes);
      break;
    }
    host[i] = malloc(items[i].bytes + 1);
    if (!host[i]) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    if (!st && items[i].send) st = be->download(be, host[i], items[i].buf, items[i].bytes, err);
    if (st) break;
    int rc = items[i].send ? MPI_Isend(host[i], (int)items[i].bytes, MPI_BYTE, items[i].peer, items[i].tag,
                                       c->comm->world, &req[i])
                           : MPI_Irecv(host[i], (int)items[i].bytes, MPI_BYTE, items[i].peer, items[i].tag,
                                       c->comm->world, &req[i]);
    st = px_comm_check(rc, items[i].send ? "MPI_Isend" : "MPI_Irecv", err);
    if (!st) posted++;
  }
  if (posted) {
    px_status w = px_comm_check(MPI_Waitall(posted, req, MPI_STATUSES_IGNORE), "MPI_Waitall (p2p)", err);
    if (!st) st = w;
  }
  for (int i = 0; i < n && !st; i++)
    if (!items[i].send) st = be->upload(be, items[i].buf, host[i], items[i].bytes, err);
  for (int i = 0; i < n; i++) free(host[i]);
  return st;
}

/* ---- set-up ---- */

/* The histories are the host's (fp8_cast and fp8_weight wait for each amax), current when a step has ended. */
static px_status cu_amax_histories(px_backend *b, bool load, const px_amax_key *keys, int64_t n, int64_t step,
                                   float *hist, px_err *err) {
  return px_cpu_fp8_histories(((cuda *)b->impl)->f8, load, keys, n, step, hist, err);
}

static void cu_destroy(px_backend *b) {
  if (!b) return;
  cuda *c = b->impl;
  if (c) {
    arenas_free(c);
    cudaFreeHost(c->pinned);
    if (c->pinned_read) cudaEventDestroy(c->pinned_read);
    for (int s = 0; s < NSTREAMS; s++)
      for (int i = 0; i < MARK_EVENTS; i++)
        if (c->marks[s][i]) cudaEventDestroy(c->marks[s][i]);
    for (int s = 0; s < NSTREAMS; s++)
      for (int i = 0; i < SCRATCH_CHUNKS; i++) cudaFree(c->scratch[s][i].p);
    cudaFree(c->workspace);
    cudaFree(c->dsum);
    cudaFree(c->ones);
    px_cpu_fp8_free(c->f8);
    for (int g = 0; g < PX_GROUP_COUNT; g++)
      if (c->nc[g]) ncclCommDestroy(c->nc[g]);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->switched) cudaEventDestroy(c->switched);
    for (int s = 0; s < NSTREAMS; s++)
      if (c->streams[s]) cudaStreamDestroy(c->streams[s]);
    free(c);
  }
  free(b);
}

/* The NCCL split colour of a group: the world rank of its first member
 * (NCCL_SPLIT_NOCOLOR when this rank is in none). */
static int split_color(MPI_Comm group, MPI_Comm world) {
  if (group == MPI_COMM_NULL) return NCCL_SPLIT_NOCOLOR;
  MPI_Group gg, wg;
  int zero = 0, first = 0;
  MPI_Comm_group(group, &gg);
  MPI_Comm_group(world, &wg);
  MPI_Group_translate_ranks(gg, 1, &zero, wg, &first);
  MPI_Group_free(&gg);
  MPI_Group_free(&wg);
  return first;
}

/* The world communicator from an id broadcast over MPI, then one split per group. */
static px_status nccl_init(cuda *c, px_err *err) {
  const px_comm *m = c->comm;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  px_status st = m->world_rank == 0 ? nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", err) : PX_OK;
  int bad = st != PX_OK, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, m->world);
  if (any) return st ? st : px_err_set(err, PX_ERR_RUNTIME, "cuda backend: rank 0 could not create a NCCL id");
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, m->world);
  if ((st = nccl_check(ncclCommInitRank(&c->nc[PX_GROUP_ALL], m->world_size, id, m->world_rank), "ncclCommInitRank",
                       err)))
    return st;
  c->nc_rank[PX_GROUP_ALL] = m->world_rank;
  /* the shard and replica groups exist on every rank or on none (hybrid sharding) */
  px_group groups[] = {PX_GROUP_TP, PX_GROUP_DP, PX_GROUP_EMB, PX_GROUP_SHARD, PX_GROUP_REPLICA};
  for (size_t i = 0; i < sizeof groups / sizeof *groups && !st; i++) {
    MPI_Comm mc = px_comm_of(m, groups[i]);
    if ((groups[i] == PX_GROUP_SHARD || groups[i] == PX_GROUP_REPLICA) && m->shard == MPI_COMM_NULL) continue;
    int key = 0;
    if (mc != MPI_COMM_NULL) MPI_Comm_rank(mc, &key);
    st = nccl_check(ncclCommSplit(c->nc[PX_GROUP_ALL], split_color(mc, m->world), key, &c->nc[groups[i]], NULL),
                    "ncclCommSplit", err);
    c->nc_rank[groups[i]] = key;
  }
  return st;
}

px_status px_cuda_backend_new(const px_comm *comm, px_backend **out, px_err *err) {
  *out = NULL;
  /* every rank needs a device; ranks of a node share its devices round-robin */
  int ndev = px_cuda_device_count(), lrank = 0, lsize = 1;
  MPI_Comm local;
  MPI_Comm_split_type(comm->world, MPI_COMM_TYPE_SHARED, comm->world_rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &lrank);
  MPI_Comm_size(local, &lsize);
  MPI_Comm_free(&local);
  int mine[2] = {ndev > 0 ? 0 : 1, lsize > ndev}, all[2] = {0, 0};
  MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, comm->world);
  if (all[0])
    return px_err_set(err, PX_ERR_RUNTIME, "--backend cuda: %s (hint: --backend cpu)",
                      ndev ? "another rank sees no CUDA device" : "no CUDA device is visible on this machine");
  px_backend *b = px_calloc(1, sizeof *b, err);
  cuda *c = px_calloc(1, sizeof *c, err);
  if (!b || !c) {
    free(b), free(c);
    return PX_ERR_RUNTIME;
  }
  b->name = "cuda";
  b->impl = c;
  c->comm = comm;
  c->device = lrank % ndev;
  const char *mode = getenv("PX_CUDA_COMM"), *limit = getenv("PX_COMM_TIMEOUT_S");
  c->nccl = !all[1] && !(mode && !strcmp(mode, "mpi"));
  c->timeout_s = limit && atof(limit) > 0 ? atof(limit) : 600.0;
  px_status st = cu_check(cudaSetDevice(c->device), "cudaSetDevice", err);
  struct cudaDeviceProp prop;
  if (!st) st = cu_check(cudaGetDeviceProperties(&prop, c->device), "cudaGetDeviceProperties", err);
  if (!st) {
    c->cc = prop.major * 10 + prop.minor;
    snprintf(c->gpu, sizeof c->gpu, "%s", prop.name);
  }
  if (!st && !(c->f8 = px_cpu_fp8_new())) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int s = 0; s < NSTREAMS && !st; s++)
    st = cu_check(cudaStreamCreateWithFlags(&c->streams[s], cudaStreamNonBlocking), "cudaStreamCreate", err);
  if (!st) st = cu_check(cudaEventCreateWithFlags(&c->switched, cudaEventDisableTiming), "cudaEventCreate", err);
  if (!st && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS)
    st = px_err_set(err, PX_ERR_RUNTIME, "cuda backend: cublasLtCreate failed");
  if (!st) st = cu_check(cudaMalloc(&c->workspace, WORKSPACE_BYTES), "cudaMalloc (cuBLASLt workspace)", err);
  if (!st) st = cu_check(cudaMalloc((void **)&c->dsum, sizeof *c->dsum), "cudaMalloc", err);
  int bad = st != PX_OK, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm->world);
  if (!st && any) st = px_err_set(err, PX_ERR_RUNTIME, "cuda backend: another rank failed to set up its device");
  if (!st && c->nccl) st = nccl_init(c, err);
  if (!st && !c->nccl && comm->world_rank == 0)
    fprintf(stderr, "parallax: cuda backend: collectives go through MPI staged in host memory (%s)\n",
            all[1] ? "a node has more ranks than GPUs, and NCCL needs one GPU per rank" : "PX_CUDA_COMM=mpi");
  if (st) {
    cu_destroy(b);
    return st;
  }
  b->reserve = cu_reserve;
  b->alloc = cu_alloc;
  b->release = cu_release;
  b->zero = cu_zero;
  b->copy = cu_copy;
  b->upload = cu_upload;
  b->download = cu_download;
  b->op = cu_op;
  b->supports_op = cu_supports_op;
  b->allreduce = cu_allreduce;
  b->allgather = cu_allgather;
  b->reduce_scatter = cu_reduce_scatter;
  b->p2p = cu_p2p;
  b->sync = cu_sync;
  b->set_stream = cu_set_stream;
  b->mark = cu_mark;
  b->wait_mark = cu_wait_mark;
  b->join = cu_join;
  b->own_bytes = cu_own_bytes;
  b->amax_histories = cu_amax_histories;
  b->destroy = cu_destroy;
  *out = b;
  return PX_OK;
}
