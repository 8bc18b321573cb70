/* The CUDA backend's streams, marks, waits, arenas and scratch (exec/cuda/memory.h). */
#include "exec/cuda/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "kernels/cuda/common.h"

#define ARENA_GROW_MIN ((uint64_t)64 << 20)

px_status px_cuda_check(cudaError_t e, const char *what, px_err *err) {
  if (e == cudaSuccess) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s: %s", what, cudaGetErrorString(e));
}

/* A launcher's status with its message (kernels/cuda keep the text). */
px_status px_cuda_kc(px_status st, px_err *err) {
  if (st == PX_OK) return PX_OK;
  return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s", px_kc_last_error());
}

/* ---- waiting, with the communicators watched ---- */

static void abort_comms(px_cuda *c) {
  for (int g = 0; g < PX_GROUP_COUNT; g++)
    if (c->nc[g]) {
      ncclCommAbort(c->nc[g]);
      c->nc[g] = NULL;
    }
}

px_status px_cuda_wait(px_cuda *c, bool all, px_err *err) {
  double t0 = px_clock_s();
  for (long polls = 0;; polls++) {
    cudaError_t q = cudaSuccess;
    for (int s = 0; s < PX_CUDA_STREAMS && q == cudaSuccess; s++)
      if (all || s == c->cur) q = cudaStreamQuery(c->streams[s]);
    if (q == cudaSuccess) return PX_OK;
    if (q != cudaErrorNotReady) return px_cuda_check(q, "a kernel or copy failed", err);
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
uint64_t px_cuda_record_mark(px_cuda *c) {
  int s = c->cur;
  uint64_t n = ++c->nmarks[s];
  cudaEvent_t *ev = &c->marks[s][n % PX_CUDA_MARK_EVENTS];
  if ((!*ev && cudaEventCreateWithFlags(ev, cudaEventDisableTiming) != cudaSuccess) ||
      cudaEventRecord(*ev, c->streams[s]) != cudaSuccess) {
    cudaStreamSynchronize(c->streams[s]);
    return 0;
  }
  return n * PX_CUDA_STREAMS + (uint64_t)s;
}

void px_cuda_wait_for(px_cuda *c, uint64_t mark) {
  int s = (int)(mark % PX_CUDA_STREAMS);
  if (s != c->cur)
    cudaStreamWaitEvent(px_cuda_stream(c), c->marks[s][(mark / PX_CUDA_STREAMS) % PX_CUDA_MARK_EVENTS], 0);
}

uint64_t px_cuda_mark(px_backend *b) { return px_cuda_record_mark(b->impl); }

/* Scratch chunks, the cuBLASLt workspace, the small fixed buffers and any
 * arena beyond the reserved ones. */
uint64_t px_cuda_own_bytes(px_backend *b) {
  px_cuda *c = b->impl;
  uint64_t n = PX_CUDA_WORKSPACE_BYTES + sizeof *c->dsum + (uint64_t)c->nones * sizeof *c->ones;
  for (int s = 0; s < PX_CUDA_STREAMS; s++)
    for (int i = 0; i < PX_CUDA_SCRATCH_CHUNKS; i++) n += c->scratch[s][i].cap;
  for (int i = c->nreserved; i < c->narenas; i++) n += c->arenas[i].a.size;
  return n;
}

px_status px_cuda_wait_mark(px_backend *b, uint64_t mark, px_err *err) {
  (void)err;
  if (mark) px_cuda_wait_for(b->impl, mark);
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
static void mark(px_cuda *c, void *p, uint64_t live, uint64_t bytes) {
  poison_range *r = malloc(sizeof *r);
  if (!r) { /* no room for the callback's record: mark it now, after the stream's work */
    cudaStreamSynchronize(px_cuda_stream(c));
    ASAN_UNPOISON_MEMORY_REGION(p, live);
    ASAN_POISON_MEMORY_REGION((char *)p + live, px_arena_round(bytes) - live);
    return;
  }
  *r = (poison_range){p, live, px_arena_round(bytes)};
  cudaLaunchHostFunc(px_cuda_stream(c), poison_cb, r);
}
#define POISON_ARENA(p, bytes) ASAN_POISON_MEMORY_REGION(p, bytes)
#define FILL_UNZEROED 1 /* NaN bytes in PX_FILL_POISON memory, as the CPU backend */
#else
#define FILL_UNZEROED 0
#define mark(c, p, live, bytes) ((void)0)
#define POISON_ARENA(p, bytes) ((void)0)
#endif

void px_cuda_arenas_free(px_cuda *c) {
  cudaDeviceSynchronize();
  for (int i = 0; i < c->narenas; i++) {
    cudaFree(c->arenas[i].base);
    px_arena_destroy(&c->arenas[i].a);
  }
  c->narenas = 0;
}

static px_status arena_add(px_cuda *c, uint64_t bytes, px_err *err) {
  if (c->narenas == PX_CUDA_ARENAS)
    return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: device memory fragmented beyond %d arenas", PX_CUDA_ARENAS);
  px_cuda_arena *r = &c->arenas[c->narenas];
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
px_status px_cuda_reserve(px_backend *b, const uint64_t pools[PX_POOLS], px_err *err) {
  px_cuda *c = b->impl;
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
static bool serves(const px_cuda *c, int i, px_pool pool) { return i >= c->nreserved || i == (int)pool; }

px_status px_cuda_alloc(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err) {
  px_cuda *c = b->impl;
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
    if (tag[k]) px_cuda_wait_for(c, tag[k] * PX_CUDA_STREAMS + (uint64_t)(k + 1));
  mark(c, p, bytes, bytes);
  px_status st = PX_OK;
  if (fill == PX_FILL_ZERO || (fill == PX_FILL_POISON && FILL_UNZEROED))
    st = px_cuda_check(cudaMemsetAsync(p, fill == PX_FILL_ZERO ? 0 : 0xff, bytes, px_cuda_stream(c)), "cudaMemsetAsync",
                       err);
  if (!st) *out = p;
  return st;
}

/* A release on a side stream is tagged with a mark there; one on compute
 * needs none (a side stream waits for compute's progress whenever work moves
 * there). */
void px_cuda_release(px_backend *b, void *p, uint64_t bytes) {
  if (!p) return;
  px_cuda *c = b->impl;
  int i = 0;
  while (i < c->narenas && !((char *)p >= c->arenas[i].base && (char *)p < c->arenas[i].base + c->arenas[i].a.size))
    i++;
  if (i == c->narenas) return;
  px_cpu_fp8_forget(c->f8, p, bytes);
  mark(c, p, 0, bytes);
  uint64_t tag[PX_ARENA_TAGS] = {0}, m = c->cur == PX_CUDA_COMPUTE ? 0 : px_cuda_record_mark(c);
  if (m) tag[m % PX_CUDA_STREAMS - 1] = m / PX_CUDA_STREAMS;
  px_err err = {0};
  if (px_arena_give(&c->arenas[i].a, (uint64_t)((char *)p - c->arenas[i].base), bytes, tag, &err))
    fprintf(stderr, "parallax: cuda backend: %s\n", err.msg);
}

px_status px_cuda_zero(px_backend *b, void *p, uint64_t bytes, px_err *err) {
  px_cuda *c = b->impl;
  return px_cuda_check(cudaMemsetAsync(p, 0, bytes, px_cuda_stream(c)), "cudaMemsetAsync", err);
}

px_status px_cuda_copy(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err) {
  px_cuda *c = b->impl;
  if (dst == src || !bytes) return PX_OK;
  return px_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, px_cuda_stream(c)), "cudaMemcpyAsync",
                       err);
}

/* From pageable host memory: returns once the host buffer has been read. */
px_status px_cuda_upload(px_backend *b, void *dst, const void *host, uint64_t bytes, px_err *err) {
  px_cuda *c = b->impl;
  if (!bytes) return PX_OK;
  return px_cuda_check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, px_cuda_stream(c)),
                       "cudaMemcpyAsync (upload)", err);
}

px_status px_cuda_download(px_backend *b, void *host, const void *src, uint64_t bytes, px_err *err) {
  px_cuda *c = b->impl;
  px_status st = px_cuda_wait(c, false, err);
  if (st || !bytes) return st;
  return px_cuda_check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)", err);
}

px_status px_cuda_sync(px_backend *b, px_err *err) { return px_cuda_wait(b->impl, true, err); }

/* Onto a side stream: after everything issued on compute so far. Back onto compute: no wait. */
void px_cuda_set_stream(px_backend *b, px_stream s) {
  px_cuda *c = b->impl;
  int want = s == PX_STREAM_TP   ? PX_CUDA_TP
             : s == PX_STREAM_DP ? PX_CUDA_DP
             : s == PX_STREAM_PP_SEND || s == PX_STREAM_PP_RECV ? PX_CUDA_PP
                                                                : PX_CUDA_COMPUTE;
  if (want == c->cur) return;
  if (want != PX_CUDA_COMPUTE) { /* the side stream starts after compute's work so far */
    cudaEventRecord(c->switched, c->streams[PX_CUDA_COMPUTE]);
    cudaStreamWaitEvent(c->streams[want], c->switched, 0);
  }
  c->cur = want;
}

/* Compute waits for everything issued on the side streams. */
px_status px_cuda_join(px_backend *b, px_err *err) {
  px_cuda *c = b->impl;
  c->cur = PX_CUDA_COMPUTE;
  px_status st = PX_OK;
  for (int s = PX_CUDA_COMPUTE + 1; s < PX_CUDA_STREAMS && !st; s++) {
    st = px_cuda_check(cudaEventRecord(c->switched, c->streams[s]), "cudaEventRecord", err);
    if (!st)
      st = px_cuda_check(cudaStreamWaitEvent(c->streams[PX_CUDA_COMPUTE], c->switched, 0), "cudaStreamWaitEvent", err);
  }
  return st;
}

/* n bytes of scratch for the current op call (see chunk). */
px_status px_cuda_scratch(px_cuda *c, uint64_t bytes, void **out, px_err *err) {
  bytes = (bytes + 255) & ~(uint64_t)255;
  uint64_t largest = 0;
  px_cuda_chunk *set = c->scratch[c->cur];
  for (int i = 0; i < PX_CUDA_SCRATCH_CHUNKS; i++) {
    px_cuda_chunk *k = &set[i];
    if (k->p && k->cap - k->used >= bytes) {
      *out = k->p + k->used;
      k->used += bytes;
      return PX_OK;
    }
    if (k->cap > largest) largest = k->cap;
  }
  for (int i = 0; i < PX_CUDA_SCRATCH_CHUNKS; i++) {
    px_cuda_chunk *k = &set[i];
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

void px_cuda_scratch_reset(px_cuda *c) {
  for (int i = 0; i < PX_CUDA_SCRATCH_CHUNKS; i++) c->scratch[c->cur][i].used = 0;
}
