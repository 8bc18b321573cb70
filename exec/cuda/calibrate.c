/* One GPU measured: GEMMs through the backend's cuBLASLt calls (alone, and a
 * few at once on several streams), its flash-attention kernels, a
 * device-to-device copy, and one GEMM sustained.
 * Every operand holds random values (zeros run faster than real data), each
 * figure is timed on the host around a stream synchronisation after a
 * warm-up call (plans, heuristics and clocks settled), over enough calls to
 * last min_s. */
#include "exec/cuda/calibrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "exec/cuda/memory.h"
#include "kernels/cuda/flash.h"
#include "kernels/cuda/gemm.h"

#define FILL_BLOCK ((size_t)1 << 22) /* bytes of host random data, replicated on the device */

typedef struct {
  cublasLtHandle_t lt;
  cudaStream_t stream;
  void *ws;
  px_err *err;
} dev;

/* bytes of random data at p: bf16 values in [-1, 1], or fp8 E4M3 codes other than NaN */
static px_status fill_random(dev *d, void *p, size_t bytes, bool fp8, uint64_t seed) {
  if (!bytes) return PX_OK;
  size_t n = bytes < FILL_BLOCK ? bytes : FILL_BLOCK;
  unsigned char *h = malloc(n);
  if (!h) return px_err_set(d->err, PX_ERR_RUNTIME, "out of memory");
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i + 1 < n; i += 2) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (fp8) {
      h[i] = (unsigned char)x, h[i + 1] = (unsigned char)(x >> 8);
      if ((h[i] & 0x7f) == 0x7f) h[i] ^= 1; /* E4M3's NaN: S.1111.111 */
      if ((h[i + 1] & 0x7f) == 0x7f) h[i + 1] ^= 1;
    } else { /* bf16: the top half of a float in [-1, 1] */
      float f = (float)((double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      uint16_t b = (uint16_t)(u >> 16);
      memcpy(h + i, &b, sizeof b);
    }
  }
  if (n % 2) h[n - 1] = 0x3c;
  px_status st = px_cuda_check(cudaMemcpy(p, h, n, cudaMemcpyHostToDevice), "cudaMemcpy (random operands)", d->err);
  free(h);
  for (size_t done = n; !st && done < bytes; done *= 2) { /* doubling copies of what is there */
    size_t c = bytes - done < done ? bytes - done : done;
    st = px_cuda_check(cudaMemcpyAsync((char *)p + done, p, c, cudaMemcpyDeviceToDevice, d->stream),
                       "cudaMemcpyAsync (random operands)", d->err);
  }
  return st ? st : px_cuda_check(cudaStreamSynchronize(d->stream), "cudaStreamSynchronize", d->err);
}

/* What a timed call does: one enqueued unit of work on d->stream. */
typedef px_status (*work_fn)(dev *d, void *ctx);

static px_status stream_end(dev *d) {
  return px_cuda_check(cudaStreamSynchronize(d->stream), "a timed kernel", d->err);
}

/* reps calls of w, then the stream's end: seconds per call in *s */
static px_status run_reps(dev *d, work_fn w, void *ctx, int64_t reps, double *s) {
  double t0 = px_clock_s();
  px_status st = PX_OK;
  for (int64_t r = 0; r < reps && !st; r++) st = w(d, ctx);
  if (!st) st = stream_end(d);
  *s = (px_clock_s() - t0) / (double)reps;
  return st;
}

/* Seconds per call of w: a warm-up call, one timed call to size the repetitions, then enough
 * of them to last min_s (at least 2). */
static px_status time_work(dev *d, work_fn w, void *ctx, double min_s, double *s) {
  px_status st;
  double one;
  if ((st = run_reps(d, w, ctx, 1, &one)) || (st = run_reps(d, w, ctx, 1, &one))) return st;
  double want = min_s / (one > 1e-9 ? one : 1e-9);
  int64_t reps = want < 2 ? 2 : want > 1e6 ? 1000000 : (int64_t)want;
  return run_reps(d, w, ctx, reps, s);
}

/* Counts a failed probe, keeps the first one's message, and clears the error for the next. */
static void failed(dev *d, px_cuda_calib *c) {
  if (!c->failed++) snprintf(c->failure, sizeof c->failure, "%.255s", d->err->msg);
  d->err->msg[0] = '\0';
  d->err->status = PX_OK;
}

/* A probe's timing; a failure is counted and leaves *s at 0. */
static void probe(dev *d, px_cuda_calib *c, work_fn w, void *ctx, double *s) {
  if (!time_work(d, w, ctx, c->min_s, s)) return;
  *s = 0;
  failed(d, c);
}

/* ---- GEMMs ---- */

typedef struct {
  const px_cuda_gemm_probe *p;
  void *a, *b, *c;        /* bf16 operands and the product */
  uint8_t *a8, *b8;       /* fp8 codes */
  float *one;             /* device 1.0f: the fp8 dequantization factors */
} gemm_ctx;

static px_status gemm_once(dev *d, void *ctx) {
  gemm_ctx *g = ctx;
  const px_cuda_gemm_probe *p = g->p;
  px_status st = p->dtype == PX_DTYPE_FP8
                     ? px_kc_gemm_fp8(d->lt, g->c, g->a8, g->b8, g->one, g->one, p->m, p->n, p->k, false, false,
                                      p->fast_accum, 1.0f, 0.0f, PX_DTYPE_BF16, d->ws, PX_CUDA_WORKSPACE_BYTES,
                                      d->stream)
                     : px_kc_gemm_ex(d->lt, g->c, g->a, g->b, NULL, p->m, p->n, p->k, p->trans_a, p->trans_b, 1.0f,
                                     0.0f, PX_DTYPE_BF16, PX_DTYPE_BF16, d->ws, PX_CUDA_WORKSPACE_BYTES, d->stream);
  return px_cuda_kc(st, d->err);
}

/* Whether probe p can run here: fp8 needs compute capability 8.9 and dimensions in 16s. */
static bool gemm_runs(const px_cuda_gemm_probe *p, int cc) {
  if (p->dtype != PX_DTYPE_FP8) return true;
  return cc >= 89 && p->m % 16 == 0 && p->n % 16 == 0 && p->k % 16 == 0;
}

/* ---- attention ---- */

typedef struct {
  const px_cuda_attn_probe *p;
  px_bf16 *q, *k, *v, *ctx, *dctx, *dq, *dk, *dv; /* (rows, S, H or Hkv, D) */
  float *lse;                                     /* (rows, H, S) */
} attn_ctx;

static px_status attn_pass(dev *d, void *ctx, bool bwd) {
  attn_ctx *a = ctx;
  const px_cuda_attn_probe *p = a->p;
  int64_t s = p->seq, h = p->heads, hkv = p->kv_heads, dd = p->head_dim, b = p->rows;
  /* the rows in one launch, as the executor runs a micro-batch without dropout */
  px_status st = bwd ? px_kc_flash_bwd(a->dq, a->dk, a->dv, a->dctx, a->q, a->k, a->v, a->ctx, a->lse, PX_DTYPE_BF16,
                                       b, s, h, hkv, dd, 0, 0.0f, 0, 0, d->stream)
                     : px_kc_flash_fwd(a->ctx, a->lse, a->q, a->k, a->v, PX_DTYPE_BF16, b, s, h, hkv, dd, 0, 0.0f, 0, 0,
                                       d->stream);
  return px_cuda_kc(st, d->err);
}
static px_status attn_fwd(dev *d, void *ctx) { return attn_pass(d, ctx, false); }
static px_status attn_bwd(dev *d, void *ctx) { return attn_pass(d, ctx, true); }

/* ---- the copy ---- */

typedef struct {
  void *src, *dst;
  uint64_t bytes;
} copy_ctx;

static px_status copy_once(dev *d, void *ctx) {
  copy_ctx *c = ctx;
  return px_cuda_check(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, d->stream),
                       "cudaMemcpyAsync (device to device)", d->err);
}

/* ---- the whole ---- */

static void say(const px_cuda_calib *c, const char *what, int done, int total) {
  if (c->progress) c->progress(c->progress_ctx, what, done, total);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static px_status alloc(void **p, uint64_t bytes, const char *what, px_err *err) {
  if (!bytes) return PX_OK;
  cudaError_t e = cudaMalloc(p, bytes);
  if (e == cudaSuccess) return PX_OK;
  *p = NULL;
  return px_err_set(err, PX_ERR_RUNTIME, "calibrate: %.2f GiB for the %s: %s", (double)bytes / (1 << 30), what,
                    cudaGetErrorString(e));
}

/* Device buffers for every GEMM probe (and the sustained one), random-filled. */
static px_status gemm_buffers(dev *d, const px_cuda_calib *c, gemm_ctx *g) {
  int64_t amax = 0, bmax = 0, cmax = 0, a8 = 0, b8 = 0;
  for (int i = -1; i < c->ngemm; i++) {
    const px_cuda_gemm_probe *p = i < 0 ? &c->sustain : &c->gemm[i];
    if (p->m <= 0 || !gemm_runs(p, c->cc)) continue;
    cmax = max64(cmax, p->m * p->n);
    if (p->dtype == PX_DTYPE_FP8)
      a8 = max64(a8, p->m * p->k), b8 = max64(b8, p->n * p->k);
    else
      amax = max64(amax, p->m * p->k), bmax = max64(bmax, p->k * p->n);
  }
  const float one = 1.0f;
  px_status st;
  if ((st = alloc(&g->a, (uint64_t)amax * 2, "GEMM operand A", d->err)) ||
      (st = alloc(&g->b, (uint64_t)bmax * 2, "GEMM operand B", d->err)) ||
      (st = alloc(&g->c, (uint64_t)cmax * 2, "GEMM product", d->err)) ||
      (st = alloc((void **)&g->a8, (uint64_t)a8, "fp8 GEMM operand A", d->err)) ||
      (st = alloc((void **)&g->b8, (uint64_t)b8, "fp8 GEMM operand B", d->err)) ||
      (st = alloc((void **)&g->one, sizeof(float), "fp8 scale", d->err)))
    return st;
  if ((st = px_cuda_check(cudaMemcpy(g->one, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy", d->err)) ||
      (st = fill_random(d, g->a, (size_t)amax * 2, false, 1)) || (st = fill_random(d, g->b, (size_t)bmax * 2, false, 2)) ||
      (st = fill_random(d, g->a8, (size_t)a8, true, 3)))
    return st;
  return fill_random(d, g->b8, (size_t)b8, true, 4);
}

static void gemm_buffers_free(gemm_ctx *g) {
  cudaFree(g->a), cudaFree(g->b), cudaFree(g->c), cudaFree(g->a8), cudaFree(g->b8), cudaFree(g->one);
}

/* The sustained product's burst rate, then every probe. */
static void measure_gemms(dev *d, px_cuda_calib *c, gemm_ctx *g) {
  c->burst_s = 0;
  if (c->sustain.m > 0 && gemm_runs(&c->sustain, c->cc)) {
    g->p = &c->sustain;
    probe(d, c, gemm_once, g, &c->burst_s);
  }
  for (int i = 0; i < c->ngemm; i++) {
    px_cuda_gemm_probe *p = &c->gemm[i];
    p->s = 0;
    if (gemm_runs(p, c->cc)) {
      g->p = p;
      probe(d, c, gemm_once, g, &p->s);
    }
    say(c, "GEMM shapes", i + 1, c->ngemm);
  }
}

/* The sustained product back to back for sustain_s, timed in windows of window_s. */
static void measure_sustained(dev *d, px_cuda_calib *c, gemm_ctx *g) {
  c->nwindows = 0;
  if (c->burst_s <= 0 || c->sustain_s <= 0) return;
  g->p = &c->sustain;
  int64_t per = (int64_t)(c->window_s / c->burst_s);
  if (per < 1) per = 1;
  int total = (int)(c->sustain_s / c->window_s + 0.5);
  if (total < 1) total = 1;
  if (total > PX_CUDA_SUSTAIN_WINDOWS_MAX) total = PX_CUDA_SUSTAIN_WINDOWS_MAX;
  while (c->nwindows < total) {
    if (run_reps(d, gemm_once, g, per, &c->window_s_per_product[c->nwindows])) {
      failed(d, c); /* the windows so far stand */
      break;
    }
    say(c, "sustained GEMM windows", ++c->nwindows, total);
  }
}

static px_status measure_attention(dev *d, px_cuda_calib *c) {
  int64_t qmax = 0, kvmax = 0, lmax = 0;
  for (int i = 0; i < c->nattn; i++) {
    const px_cuda_attn_probe *p = &c->attn[i];
    qmax = max64(qmax, p->rows * p->seq * p->heads * p->head_dim);
    kvmax = max64(kvmax, p->rows * p->seq * p->kv_heads * p->head_dim);
    lmax = max64(lmax, p->rows * p->heads * p->seq);
  }
  attn_ctx a = {0};
  px_status st = PX_OK;
  void **q_like[] = {(void **)&a.q, (void **)&a.ctx, (void **)&a.dctx, (void **)&a.dq};
  void **kv_like[] = {(void **)&a.k, (void **)&a.v, (void **)&a.dk, (void **)&a.dv};
  for (int i = 0; i < 4 && !st; i++) st = alloc(q_like[i], (uint64_t)qmax * 2, "attention tensors", d->err);
  for (int i = 0; i < 4 && !st; i++) st = alloc(kv_like[i], (uint64_t)kvmax * 2, "attention tensors", d->err);
  if (!st) st = alloc((void **)&a.lse, (uint64_t)lmax * sizeof(float), "attention statistics", d->err);
  if (!st) st = fill_random(d, a.q, (size_t)qmax * 2, false, 5);
  if (!st) st = fill_random(d, a.k, (size_t)kvmax * 2, false, 6);
  if (!st) st = fill_random(d, a.v, (size_t)kvmax * 2, false, 7);
  if (!st) st = fill_random(d, a.dctx, (size_t)qmax * 2, false, 8);
  for (int i = 0; i < 3 && !st; i++) /* the gradients accumulate: from zero */
    st = px_cuda_check(cudaMemsetAsync(i == 0 ? (void *)a.dq : i == 1 ? (void *)a.dk : (void *)a.dv, 0,
                                       (size_t)(i == 0 ? qmax : kvmax) * 2, d->stream),
                       "cudaMemsetAsync", d->err);
  for (int i = 0; i < c->nattn && !st; i++) {
    px_cuda_attn_probe *p = &c->attn[i];
    a.p = p;
    p->s = 0;
    if (p->bwd && attn_fwd(d, &a)) /* the backward reads a forward's output and statistics */
      failed(d, c);
    else
      probe(d, c, p->bwd ? attn_bwd : attn_fwd, &a, &p->s);
    say(c, "attention passes", i + 1, c->nattn);
  }
  for (int i = 0; i < 4; i++) cudaFree(*q_like[i]), cudaFree(*kv_like[i]);
  cudaFree(a.lse);
  return st;
}

static px_status measure_copy(dev *d, px_cuda_calib *c) {
  copy_ctx k = {NULL, NULL, c->copy_bytes};
  c->copy_s = 0;
  if (!c->copy_bytes) return PX_OK;
  px_status st;
  if (!(st = alloc(&k.src, k.bytes, "copy's source", d->err)) && !(st = alloc(&k.dst, k.bytes, "copy's destination", d->err)) &&
      !(st = fill_random(d, k.src, k.bytes, false, 9)))
    probe(d, c, copy_once, &k, &c->copy_s);
  say(c, "device copy", 1, 1);
  cudaFree(k.src), cudaFree(k.dst);
  return st;
}

/* ---- GEMMs on several streams ---- */

typedef struct {
  const px_cuda_streams_probe *p;
  void *a, *b, *c;                     /* bf16: A_i (m, k), B_i (n, k) and C_i (m, n), gemms of each */
  uint8_t *a8, *b8;                    /* fp8 codes: A_i (m, k), B_i (n, k) */
  float *one;                          /* device 1.0f: the fp8 dequantization factors */
  void *ws[PX_CUDA_PROBE_STREAMS_MAX]; /* a cuBLASLt workspace a stream */
  cudaStream_t side[PX_CUDA_PROBE_STREAMS_MAX];
  cudaEvent_t fork, join[PX_CUDA_PROBE_STREAMS_MAX];
} streams_ctx;

/* Whether probe p can run here: fp8 needs compute capability 8.9 and dimensions in 16s. */
static bool streams_runs(const px_cuda_streams_probe *p, int cc) {
  px_cuda_gemm_probe g = {p->m, p->n, p->k, false, true, p->dtype, 0, true};
  return gemm_runs(&g, cc);
}

/* The probe's GEMMs round-robin over its streams, forked from and joined back into d->stream. */
static px_status streams_once(dev *d, void *ctx) {
  streams_ctx *x = ctx;
  const px_cuda_streams_probe *p = x->p;
  int ns = p->streams;
  px_status st = px_cuda_check(cudaEventRecord(x->fork, d->stream), "cudaEventRecord", d->err);
  for (int s = 0; s < ns && !st; s++)
    st = px_cuda_check(cudaStreamWaitEvent(x->side[s], x->fork, 0), "cudaStreamWaitEvent", d->err);
  for (int i = 0; i < p->gemms && !st; i++) {
    int s = i % ns;
    size_t ai = (size_t)i * (size_t)(p->m * p->k), bi = (size_t)i * (size_t)(p->n * p->k);
    void *c = (char *)x->c + (size_t)i * (size_t)(p->m * p->n) * 2;
    st = px_cuda_kc(p->dtype == PX_DTYPE_FP8
                        ? px_kc_gemm_fp8(d->lt, c, x->a8 + ai, x->b8 + bi, x->one, x->one, p->m, p->n, p->k, false,
                                         false, true, 1.0f, 0.0f, PX_DTYPE_BF16, x->ws[s], PX_CUDA_WORKSPACE_BYTES,
                                         x->side[s])
                        : px_kc_gemm_ex(d->lt, c, (char *)x->a + ai * 2, (char *)x->b + bi * 2, NULL, p->m, p->n, p->k,
                                        false, true, 1.0f, 0.0f, PX_DTYPE_BF16, PX_DTYPE_BF16, x->ws[s],
                                        PX_CUDA_WORKSPACE_BYTES, x->side[s]),
                    d->err);
  }
  for (int s = 0; s < ns && !st; s++) {
    st = px_cuda_check(cudaEventRecord(x->join[s], x->side[s]), "cudaEventRecord", d->err);
    if (!st) st = px_cuda_check(cudaStreamWaitEvent(d->stream, x->join[s], 0), "cudaStreamWaitEvent", d->err);
  }
  return st;
}

static px_status measure_streams(dev *d, px_cuda_calib *c) {
  if (c->nconcurrent <= 0) return PX_OK;
  int64_t amax = 0, bmax = 0, cmax = 0, a8 = 0, b8 = 0; /* elements */
  for (int i = 0; i < c->nconcurrent; i++) {
    const px_cuda_streams_probe *p = &c->concurrent[i];
    bool f8 = p->dtype == PX_DTYPE_FP8;
    if (f8 && !streams_runs(p, c->cc)) continue;
    int64_t a = p->gemms * p->m * p->k, b = p->gemms * p->n * p->k;
    if (f8)
      a8 = max64(a8, a), b8 = max64(b8, b);
    else
      amax = max64(amax, a), bmax = max64(bmax, b);
    cmax = max64(cmax, p->gemms * p->m * p->n);
  }
  streams_ctx x = {0};
  const float one = 1.0f;
  px_status st = alloc(&x.a, (uint64_t)amax * 2, "streams' GEMM operands A", d->err);
  if (!st) st = alloc(&x.b, (uint64_t)bmax * 2, "streams' GEMM operands B", d->err);
  if (!st) st = alloc(&x.c, (uint64_t)cmax * 2, "streams' GEMM products", d->err);
  if (!st) st = alloc((void **)&x.a8, (uint64_t)a8, "streams' fp8 GEMM operands A", d->err);
  if (!st) st = alloc((void **)&x.b8, (uint64_t)b8, "streams' fp8 GEMM operands B", d->err);
  if (!st) st = alloc((void **)&x.one, sizeof one, "fp8 scale", d->err);
  if (!st) st = px_cuda_check(cudaMemcpy(x.one, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy", d->err);
  for (int s = 0; s < PX_CUDA_PROBE_STREAMS_MAX && !st; s++) {
    st = alloc(&x.ws[s], PX_CUDA_WORKSPACE_BYTES, "a stream's cuBLASLt workspace", d->err);
    if (!st) st = px_cuda_check(cudaStreamCreateWithFlags(&x.side[s], cudaStreamNonBlocking), "cudaStreamCreate", d->err);
    if (!st) st = px_cuda_check(cudaEventCreateWithFlags(&x.join[s], cudaEventDisableTiming), "cudaEventCreate", d->err);
  }
  if (!st) st = px_cuda_check(cudaEventCreateWithFlags(&x.fork, cudaEventDisableTiming), "cudaEventCreate", d->err);
  if (!st) st = fill_random(d, x.a, (size_t)amax * 2, false, 10);
  if (!st) st = fill_random(d, x.b, (size_t)bmax * 2, false, 11);
  if (!st) st = fill_random(d, x.a8, (size_t)a8, true, 12);
  if (!st) st = fill_random(d, x.b8, (size_t)b8, true, 13);
  for (int i = 0; i < c->nconcurrent && !st; i++) {
    px_cuda_streams_probe *p = &c->concurrent[i];
    p->s = 0;
    if (p->streams >= 1 && p->streams <= PX_CUDA_PROBE_STREAMS_MAX && p->gemms >= 1 && streams_runs(p, c->cc)) {
      x.p = p;
      probe(d, c, streams_once, &x, &p->s);
    }
    say(c, "GEMMs on streams", i + 1, c->nconcurrent);
  }
  cudaStreamSynchronize(d->stream);
  for (int s = 0; s < PX_CUDA_PROBE_STREAMS_MAX; s++) {
    cudaFree(x.ws[s]);
    if (x.side[s]) cudaStreamDestroy(x.side[s]);
    if (x.join[s]) cudaEventDestroy(x.join[s]);
  }
  if (x.fork) cudaEventDestroy(x.fork);
  cudaFree(x.a), cudaFree(x.b), cudaFree(x.c), cudaFree(x.a8), cudaFree(x.b8), cudaFree(x.one);
  return st;
}

px_status px_cuda_calibrate(px_cuda_calib *c, px_err *err) {
  dev d = {.err = err};
  px_status st = px_cuda_check(cudaSetDevice(0), "cudaSetDevice", err);
  struct cudaDeviceProp prop;
  if (!st) st = px_cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", err);
  if (st) return st;
  snprintf(c->gpu, sizeof c->gpu, "%.95s", prop.name);
  c->cc = prop.major * 10 + prop.minor;
  c->sms = prop.multiProcessorCount;
  size_t free_b = 0, total_b = 0;
  if (!(st = px_cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", err))) c->hbm_bytes = total_b;
  if (!st) st = px_cuda_check(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate", err);
  if (!st && cublasLtCreate(&d.lt) != CUBLAS_STATUS_SUCCESS)
    st = px_err_set(err, PX_ERR_RUNTIME, "calibrate: cublasLtCreate failed");
  if (!st) st = alloc(&d.ws, PX_CUDA_WORKSPACE_BYTES, "cuBLASLt workspace", err);
  /* the burst figures first, while the clocks are not yet held down by a minute of load */
  gemm_ctx g = {0};
  c->failed = 0;
  c->failure[0] = '\0';
  if (!st) st = gemm_buffers(&d, c, &g);
  if (!st) measure_gemms(&d, c, &g);
  if (!st) st = measure_streams(&d, c);
  if (!st) st = measure_attention(&d, c);
  if (!st) st = measure_copy(&d, c);
  if (!st) measure_sustained(&d, c, &g);
  gemm_buffers_free(&g);
  cudaFree(d.ws);
  if (d.lt) cublasLtDestroy(d.lt);
  if (d.stream) cudaStreamDestroy(d.stream);
  return st;
}
