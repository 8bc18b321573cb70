/* One GPU measured into a cluster file: what to measure (a grid of GEMM
 * shapes, the plans' own, few-tile GEMMs on several streams, attention by
 * sequence length, a copy, one GEMM sustained), measured by the CUDA module,
 * and the figures that follow. */
#include "exec/calibrate_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/cuda/calibrate.h"
#include "exec/cuda_load.h"
#include "plan/query.h"

/* The grid every calibration measures, each of m, n and k (tokens, and the
 * widths of the presets' layers from GPT-2's 768 to the largest dense FFNs),
 * in bf16 and fp8; --quick: sizes the emulator takes in seconds. */
static const int64_t grid_full[] = {1024, 4096, 16384}, grid_quick[] = {32, 64};
/* Outputs with fewer 128 x 256 tiles than an H100's 132 SMs (24-128), m x n, each at every k of few_tiles_k, in
 * bf16 and fp8: where libraries split k and the simulator's wave model does not, which k and tile counts cuBLAS
 * splits at (a MoE expert's rows, a TP chunk's; docs/validation.md, the GEMM model across output shapes). */
static const int64_t few_tiles_full[][2] = {{512, 1536}, {512, 4096}, {1024, 2048}, {2048, 2048}};
static const int64_t few_tiles_k[] = {512, 1024, 2048, 4096, 8192};
/* Few-tile GEMMs at once on a few streams, and the same GEMMs one after another on one, as Transformer Engine
 * runs them (a cuBLAS GEMM each, round-robin over its streams): a MoE layer's local experts over 4 (GroupedLinear),
 * Qwen3-30B-A3B's up projection at EP 8 (16 experts of 512 rows, 1,536 x 2,048: tgale96/grouped_gemm#37's shape),
 * in bf16 and in fp8 (its FP8 recipes' forward: how much of fp8's rate such GEMMs keep);
 * userbuffers' TP chunks over 3, Llama 3.1 405B's at TP 8 and 8,192 tokens (8 chunks of 1,024 rows: the QKV's
 * 2,304 x 16,384, the FC1's 13,312 x 16,384). How far they fill the SMs together is what the simulator assumes
 * (docs/simulator.md: experts' GEMMs, at most 4 resident) and no source measured. --quick: the emulator's sizes. */
#define BF16 PX_DTYPE_BF16
#define FP8 PX_DTYPE_FP8
static const px_cuda_streams_probe streams_full[] = {
    {512, 1536, 2048, 16, 1, BF16, 0},   {512, 1536, 2048, 16, 4, BF16, 0},   {512, 1536, 2048, 16, 1, FP8, 0},
    {512, 1536, 2048, 16, 4, FP8, 0},    {1024, 2304, 16384, 8, 1, BF16, 0},  {1024, 2304, 16384, 8, 3, BF16, 0},
    {1024, 13312, 16384, 8, 1, BF16, 0}, {1024, 13312, 16384, 8, 3, BF16, 0}},
                                   streams_quick[] = {{64, 64, 64, 4, 1, BF16, 0},
                                                      {64, 64, 64, 4, 2, BF16, 0},
                                                      {64, 64, 64, 4, 1, FP8, 0},
                                                      {64, 64, 64, 4, 2, FP8, 0}};
#undef BF16
#undef FP8
#define STREAMS_PROBES_MAX (sizeof streams_full / sizeof *streams_full)
/* The sustained product: large enough to keep every SM busy. */
#define SUSTAIN_DIM_FULL 8192
#define SUSTAIN_DIM_QUICK 64
/* Attention: FlashAttention's benchmark layout, batch x seq = 16k tokens and
 * heads x head_dim = 2048, at these lengths; causal, as every graph's. */
static const int64_t attn_seq_full[] = {512, 1024, 2048, 4096, 8192}, attn_seq_quick[] = {32, 64};
#define ATTN_TOKENS 16384
#define ATTN_WIDTH 2048
#define COPY_BYTES_FULL ((uint64_t)2 << 30)
#define COPY_BYTES_QUICK ((uint64_t)8 << 20)
#define SUSTAIN_S_FULL 60.0
#define SUSTAIN_S_QUICK 0.5
#define MIN_S_FULL 0.05 /* each figure's calls last at least this */

typedef struct {
  px_cuda_gemm_probe v[PX_GEMM_TABLE_MAX];
  int n;
  int dropped; /* shapes past the table's room */
} gemm_list;

/* Adds (m, n, k) in dtype once: the table's key is the shape and the dtype. */
static void add_gemm(gemm_list *l, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int dtype) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  for (int i = 0; i < l->n; i++)
    if (l->v[i].m == m && l->v[i].n == n && l->v[i].k == k && l->v[i].dtype == dtype) return;
  if (l->n == PX_GEMM_TABLE_MAX) {
    l->dropped++;
    return;
  }
  l->v[l->n++] = (px_cuda_gemm_probe){m, n, k, ta, tb, dtype, 0, false};
}

/* The matrix products of a plan's linear layers, as the simulator reads their
 * shapes (sim/compute.c) and the CUDA backend lays them out: forward
 * inp W^T, data gradient dout W, weight gradient dout^T inp. */
static void add_plan_gemms(gemm_list *l, const px_plan *plan) {
  for (int64_t s = 0; s < plan->par.pp; s++) {
    px_op_iter it = px_op_iter_begin(plan, s);
    for (const px_op *op; (op = px_op_next(&it));) {
      const int64_t *d = op->dim;
      for (int f8 = 0; f8 < 2; f8++) {
        int dt = f8 ? PX_DTYPE_FP8 : PX_DTYPE_BF16;
        switch (op->kind) {
          case PX_OP_LINEAR: add_gemm(l, d[0], px_op_linear_cols(op), d[2], false, true, dt); break;
          case PX_OP_LINEAR_BWD_DATA: add_gemm(l, d[0], d[2], d[1], false, false, dt); break;
          case PX_OP_LINEAR_BWD_WEIGHT: add_gemm(l, d[1], d[2], d[0], true, false, dt); break;
          default: break;
        }
      }
    }
  }
}

#define HEAD_DIMS_MAX 8

static void add_head_dim(int64_t *dims, int *n, int64_t d) {
  for (int i = 0; i < *n; i++)
    if (dims[i] == d) return;
  if (*n < HEAD_DIMS_MAX && d > 0 && d <= ATTN_WIDTH) dims[(*n)++] = d;
}

static void progress(void *ctx, const char *what, int done, int total) {
  FILE *f = ctx;
  if (!f) return;
  if (isatty(fileno(f))) fprintf(f, "\r  calibrate: %s %d/%d", what, done, total);
  if (done == total) fprintf(f, "%s  calibrate: %s %d/%d\n", isatty(fileno(f)) ? "\r" : "", what, done, total);
  fflush(f);
}

static double mnk_flops(int64_t m, int64_t n, int64_t k) { return 2.0 * (double)m * (double)n * (double)k; }
static double gemm_flops(const px_cuda_gemm_probe *p) { return mnk_flops(p->m, p->n, p->k); }

/* FlashAttention's count: 4 s^2 d per head and sequence forward, halved when causal; the backward 2.5x. */
static double attn_flops(const px_cuda_attn_probe *p) {
  double fwd = 4.0 * (double)p->seq * (double)p->seq * (double)p->head_dim * (double)p->heads * (double)p->rows * 0.5;
  return p->bwd ? 2.5 * fwd : fwd;
}

/* The GEMM table from the probes, against base's peak per dtype where every
 * rate is a share of it the file can hold ([1e-6, 1]); else (a base for another
 * GPU, an emulated one) the dtype's peak becomes its best measured rate. */
static px_status fill_gemm(px_cluster *c, const gemm_list *l, int grid, bool few_tiles, double min_s, const char *said,
                           px_err *err) {
  px_gpu *g = &c->gpu;
  g->gemm_table_len = 0;
  char note[1024]; /* a source holds the first 383 characters */
  for (int dt = 0; dt < PX_DTYPE_COUNT; dt++) {
    double best = 0, worst = INFINITY;
    for (int i = 0; i < l->n; i++)
      if (l->v[i].dtype == dt && l->v[i].s > 0) {
        double r = gemm_flops(&l->v[i]) / l->v[i].s;
        best = fmax(best, r), worst = fmin(worst, r);
      }
    if (best <= 0) continue;
    double peak = g->peak_flops[dt];
    if (!(peak > 0 && best <= peak && worst >= 1e-6 * peak)) {
      snprintf(note, sizeof note, "%s: the best %s GEMM measured (%.4g TFLOP/s), which the base's %.4g TFLOP/s did "
               "not hold", said, px_dtype_names[dt], best / 1e12, peak / 1e12);
      g->peak_flops[dt] = peak = best;
      char field[64];
      snprintf(field, sizeof field, "gpu.peak_tflops.%s", px_dtype_names[dt]);
      px_status st = px_cluster_set_source(c, field, note, err);
      if (st) return st;
    }
    for (int i = 0; i < l->n; i++) {
      const px_cuda_gemm_probe *p = &l->v[i];
      if (p->dtype == dt && p->s > 0)
        g->gemm_table[g->gemm_table_len++] = (px_gemm_point){p->m, p->n, p->k, gemm_flops(p) / p->s / peak, dt};
    }
  }
  char timed[48] = "over 2 calls";
  if (min_s > 0) snprintf(timed, sizeof timed, "for at least %.2f s", min_s);
  snprintf(note, sizeof note, "%s: cuBLASLt as the CUDA backend calls it, random operands, bf16 out (fp8: E4M3, "
           "per-tensor scales, fast accumulation), each shape timed %s after a warm-up: a %d x %d x %d grid of m, n, "
           "k%s and the given plans' linear layers", said, timed, grid, grid, grid,
           few_tiles ? ", outputs of fewer tiles than SMs at k 512-8192" : "");
  return px_cluster_set_source(c, "gpu.gemm.table", note, err);
}

static px_status fill_attention(px_cluster *c, const px_cuda_attn_probe *a, int n, const char *said, px_err *err) {
  px_gpu *g = &c->gpu;
  /* the GPU's own kernel is parallax's now; what the file measured of FlashAttention-2 stays (its own curves too
   * where its own kernel was FlashAttention-2: `attention` flash2 keeps its measurements) */
  int keep = 0;
  for (int i = 0; i < g->attention_len; i++)
    if (px_attn_curve_of(g, &g->attention[i], PX_ATTN_KERNEL_FLASH2)) {
      g->attention[keep] = g->attention[i];
      g->attention[keep++].kernel = PX_ATTN_KERNEL_FLASH2;
    }
  g->attention_len = keep, g->attention_kernel = PX_ATTN_KERNEL_OWN;
  for (int i = 0; i < n; i++) {
    if (a[i].s <= 0) continue;
    px_attn_curve *cv = NULL;
    for (int j = keep; j < g->attention_len && !cv; j++)
      if (g->attention[j].bwd == a[i].bwd && g->attention[j].head_dim == a[i].head_dim) cv = &g->attention[j];
    if (!cv) {
      if (g->attention_len == PX_ATTN_CURVES_MAX) continue;
      cv = &g->attention[g->attention_len++];
      *cv = (px_attn_curve){.bwd = a[i].bwd, .causal = true, .head_dim = a[i].head_dim};
    }
    if (cv->n == PX_ATTN_POINTS_MAX) continue;
    cv->seq[cv->n] = a[i].seq; /* the probes go up in seq */
    cv->tflops[cv->n++] = attn_flops(&a[i]) / a[i].s / 1e12;
  }
  char note[1024]; /* a source holds the first 383 characters */
  long long tokens = n ? (long long)(a[0].rows * a[0].seq) : 0, width = n ? (long long)(a[0].heads * a[0].head_dim) : 0;
  snprintf(note, sizeof note, "%s: parallax's flash kernels (kernels/cuda/flash.cu), bf16, causal, no dropout, batch x "
           "seq = %lld tokens, heads x head_dim = %lld, FLOPs counted as FlashAttention does (4 s^2 d a head forward, "
           "halved by the mask; backward 2.5x)", said, tokens, width);
  px_status st = px_cluster_set_source(c, "gpu.attention", note, err);
  /* the base file's cuDNN release picked among its curves; these name none */
  if (!st && g->cudnn_version > 0)
    st = px_cluster_set_source(c, "gpu.cudnn_version", "the base cluster's; the calibrated gpu.attention curves "
                               "(parallax's kernels) name no cuDNN release, so it picks none of them", err);
  return st;
}

/* The GEMMs on several streams, each beside the same GEMMs on one stream (the probe before it), on f; their
 * tiles as the simulator's wave model counts them on g (the base cluster's GEMM tile). */
static void print_streams(const px_cuda_streams_probe *p, int n, const px_gpu *g, int64_t sms, FILE *f) {
  if (!f) return;
  for (int i = 0; i < n; i++) {
    if (p[i].s <= 0) continue;
    double rate = (double)p[i].gemms * mnk_flops(p[i].m, p[i].n, p[i].k) / p[i].s;
    long long tiles = (long long)px_gpu_gemm_tiles(g, p[i].m, p[i].n);
    char on[32] = "";
    if (sms > 0) snprintf(on, sizeof on, " of %lld SMs", (long long)sms);
    fprintf(f, "  calibrate: %d %s GEMMs %lldx%lldx%lld (%lld tile%s of %lld x %lld each%s) on %d stream%s: %.4g TFLOP/s",
            p[i].gemms, px_dtype_names[p[i].dtype], (long long)p[i].m, (long long)p[i].n, (long long)p[i].k, tiles,
            tiles == 1 ? "" : "s", (long long)g->gemm_tile_m, (long long)g->gemm_tile_n, on, p[i].streams,
            p[i].streams == 1 ? "" : "s", rate / 1e12);
    const px_cuda_streams_probe *one = i > 0 ? &p[i - 1] : NULL;
    if (one && one->streams == 1 && p[i].streams > 1 && one->s > 0 && one->m == p[i].m && one->n == p[i].n &&
        one->k == p[i].k && one->gemms == p[i].gemms && one->dtype == p[i].dtype)
      fprintf(f, ", %.3fx one stream's", one->s / p[i].s);
    fputc('\n', f);
  }
}

/* fp8 with fast accumulation beside the promoted (split) sums at the same shapes: probes [n, nall) are the
 * fast twins of the fp8 probes before n, in order. The table's fp8 points become the fast twins' (the rate
 * gpu.gemm's fp8 figures mean: Transformer Engine's and torchao's forward GEMMs), and the mean of the
 * promoted rates over the fast ones is gpu.gemm.fp8_split_accumulation_share (their backward GEMMs). */
static px_status fill_fast_accum(px_cluster *c, px_cuda_gemm_probe *p, int n, int nall, const char *said, FILE *f,
                                 px_err *err) {
  double best = 0, share_sum = 0;
  int pairs = 0;
  for (int i = 0, j = n; i < n && j < nall; i++) {
    if (p[i].dtype != PX_DTYPE_FP8) continue;
    px_cuda_gemm_probe *x = &p[i];
    const px_cuda_gemm_probe *y = &p[j++];
    if (x->s > 0 && y->s > 0) {
      if (f)
        fprintf(f, "  calibrate: fp8 %lldx%lldx%lld: %.4g TFLOP/s promoted, %.4g with fast accumulation (%.3fx)\n",
                (long long)x->m, (long long)x->n, (long long)x->k, gemm_flops(x) / x->s / 1e12,
                gemm_flops(y) / y->s / 1e12, x->s / y->s);
      best = fmax(best, gemm_flops(y) / y->s), share_sum += y->s / x->s, pairs++;
    }
    x->s = y->s; /* the table's point is the fast twin's (none where it failed) */
  }
  if (!pairs) return PX_OK;
  double share = fmin(1.0, fmax(0.01, share_sum / pairs)); /* what the file holds */
  c->gpu.gemm_fp8_split_share = share;
  if (f)
    fprintf(f, "  calibrate: fp8 with fast accumulation: best %.4g TFLOP/s; the promoted sums run at %.3f of its "
            "rate (mean of %d shapes): gpu.gemm.fp8_split_accumulation_share\n", best / 1e12, share, pairs);
  char note[512];
  snprintf(note, sizeof note, "%s: the mean over %d fp8 GEMM shapes of the rate with promoted sums over the rate "
           "with cuBLASLt's fast accumulation (the table's fp8 points)", said, pairs);
  return px_cluster_set_source(c, "gpu.gemm.fp8_split_accumulation_share", note, err);
}

px_status px_calibrate_gpu(const px_cluster *base, const px_calib_opts *o, px_cluster *out, px_err *err) {
  const px_cuda_module *mod;
  px_status st = px_cuda_load(&mod, err);
  if (st) return st;
  if (mod->device_count() < 1)
    return px_err_set(err, PX_ERR_RUNTIME, "calibrate: `backend` cuda: no CUDA device is visible on this machine");
  bool quick = o->quick;
  gemm_list *gl = calloc(1, sizeof *gl);
  if (!gl) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int i = 0; i < o->nplans; i++) add_plan_gemms(gl, o->plans[i]);
  const int64_t *grid = quick ? grid_quick : grid_full;
  int ng = quick ? 2 : 3;
  for (int dt = 0; dt < 2; dt++)
    for (int a = 0; a < ng; a++)
      for (int b = 0; b < ng; b++)
        for (int k = 0; k < ng; k++) add_gemm(gl, grid[a], grid[b], grid[k], false, true, dt ? PX_DTYPE_FP8 : PX_DTYPE_BF16);
  if (!quick)
    for (int dt = 0; dt < 2; dt++)
      for (size_t i = 0; i < sizeof few_tiles_full / sizeof *few_tiles_full; i++)
        for (size_t k = 0; k < sizeof few_tiles_k / sizeof *few_tiles_k; k++)
          add_gemm(gl, few_tiles_full[i][0], few_tiles_full[i][1], few_tiles_k[k], false, true,
                   dt ? PX_DTYPE_FP8 : PX_DTYPE_BF16);

  int64_t dims[HEAD_DIMS_MAX];
  int nd = 0;
  for (int i = 0; i < o->nplans; i++) add_head_dim(dims, &nd, o->plans[i]->model.head_dim);
  if (quick)
    add_head_dim(dims, &nd, 16);
  else
    add_head_dim(dims, &nd, 64), add_head_dim(dims, &nd, 128);
  const int64_t *seqs = quick ? attn_seq_quick : attn_seq_full;
  int ns = quick ? 2 : 5;
  px_cuda_attn_probe attn[2 * HEAD_DIMS_MAX * 5];
  int na = 0;
  for (int bwd = 0; bwd < 2; bwd++)
    for (int d = 0; d < nd; d++)
      for (int s = 0; s < ns; s++) {
        int64_t heads = quick ? 2 : ATTN_WIDTH / dims[d] > 0 ? ATTN_WIDTH / dims[d] : 1;
        attn[na++] = (px_cuda_attn_probe){seqs[s], heads, heads, dims[d], quick ? 1 : ATTN_TOKENS / seqs[s], bwd, 0};
      }

  int64_t sd = quick ? SUSTAIN_DIM_QUICK : SUSTAIN_DIM_FULL;
  add_gemm(gl, sd, sd, sd, false, true, PX_DTYPE_FP8); /* beside the sustained bf16 product */
  /* the fp8 shapes again with fast accumulation (Transformer Engine's and torchao's forward GEMMs): the
   * table's fp8 points; the promoted sums (their data and weight gradients) give the split share */
  px_cuda_gemm_probe *probes = malloc((size_t)(2 * gl->n) * sizeof *probes);
  px_cuda_calib *m = calloc(1, sizeof *m);
  if (!m || !probes) {
    free(gl), free(m), free(probes);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  int nprobes = gl->n;
  memcpy(probes, gl->v, (size_t)gl->n * sizeof *probes);
  for (int i = 0; i < gl->n; i++)
    if (gl->v[i].dtype == PX_DTYPE_FP8) probes[nprobes] = gl->v[i], probes[nprobes++].fast_accum = true;
  double sustain_s = o->sustain_s > 0 ? o->sustain_s : quick ? SUSTAIN_S_QUICK : SUSTAIN_S_FULL;
  px_cuda_streams_probe concurrent[STREAMS_PROBES_MAX];
  int nc = quick ? (int)(sizeof streams_quick / sizeof *streams_quick) : (int)STREAMS_PROBES_MAX;
  memcpy(concurrent, quick ? streams_quick : streams_full, (size_t)nc * sizeof *concurrent);
  *m = (px_cuda_calib){.gemm = probes, .ngemm = nprobes, .attn = attn, .nattn = na, .concurrent = concurrent,
                       .nconcurrent = nc,
                       .copy_bytes = quick ? COPY_BYTES_QUICK : COPY_BYTES_FULL,
                       .sustain = {sd, sd, sd, false, true, PX_DTYPE_BF16, 0, false},
                       .sustain_s = sustain_s, .window_s = sustain_s >= 10 ? 1.0 : sustain_s / 10,
                       .min_s = quick ? 0 : MIN_S_FULL, .progress = progress, .progress_ctx = o->progress};
  if (o->progress && gl->dropped)
    fprintf(o->progress, "  calibrate: %d GEMM shapes past the table's %d left out\n", gl->dropped, PX_GEMM_TABLE_MAX);
  st = mod->calibrate(m, err);
  if (!st && m->failed && o->progress) /* the figures of the rest are written */
    fprintf(o->progress, "  calibrate: %d measurement%s failed, left out of the file; the first: %s\n", m->failed,
            m->failed == 1 ? "" : "s", m->failure);
  *out = *base;
  px_cluster *c = out;
  char host[64] = "this machine", when[32], said[256];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  time_t now = time(NULL);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  snprintf(said, sizeof said, "measured by parallax calibrate on %s (compute capability %d.%d) at %s", m->gpu,
           m->cc / 10, m->cc % 10, when);
  if (!st) st = fill_fast_accum(c, probes, gl->n, nprobes, said, o->progress, err);
  if (!st) print_streams(concurrent, nc, &base->gpu, m->sms, o->progress);
  memcpy(gl->v, probes, (size_t)gl->n * sizeof *probes);
  free(probes);
  if (!st) {
    snprintf(c->name, sizeof c->name, "calibrated");
    snprintf(c->gpu.name, sizeof c->gpu.name, "%.63s", m->gpu);
    snprintf(c->source, sizeof c->source, "GPU figures measured by parallax calibrate on the cuda backend on %.95s "
             "(%.63s) at %.31s: gpu.gemm.table, gpu.gemm.fp8_split_accumulation_share, gpu.sustained_share, "
             "gpu.attention, gpu.memory_efficiency (see sources); the rest from %.63s: %.500s", m->gpu, host, when, base->name, base->source);
    if (m->sms > 0) c->gpu.sm_count = m->sms;
    st = fill_gemm(c, gl, ng, !quick, m->min_s, said, err);
  }
  if (!st) st = fill_attention(c, attn, na, said, err);
  char note[1024]; /* a source holds the first 383 characters */
  if (!st && m->copy_s > 0) { /* bytes read and written */
    double bw = 2.0 * (double)m->copy_bytes / m->copy_s, eff = bw / c->gpu.hbm_bytes_per_s;
    if (eff >= 0.01 && eff <= 1.0) {
      c->gpu.memory_efficiency = eff;
      snprintf(note, sizeof note, "%s: a %.0f MiB device-to-device copy, %.4g GB/s read + written, of the %.4g GB/s "
               "of gpu.hbm_gb_per_s", said, (double)m->copy_bytes / (1 << 20), bw / 1e9, c->gpu.hbm_bytes_per_s / 1e9);
    } else { /* a base for another GPU, or an emulated one */
      snprintf(note, sizeof note, "%s: a %.0f MiB device-to-device copy, %.4g GB/s read + written, taken as the "
               "bandwidth itself (the base's %.4g GB/s did not hold it)", said, (double)m->copy_bytes / (1 << 20),
               bw / 1e9, c->gpu.hbm_bytes_per_s / 1e9);
      c->gpu.hbm_bytes_per_s = bw;
      c->gpu.memory_efficiency = 1.0;
      st = px_cluster_set_source(c, "gpu.hbm_gb_per_s", note, err);
    }
    if (!st) st = px_cluster_set_source(c, "gpu.memory_efficiency", note, err);
  }
  if (!st && m->burst_s > 0 && m->nwindows > 0) {
    double f = gemm_flops(&m->sustain), burst = f / m->burst_s, sum = 0, lo = INFINITY, hi = 0;
    int from = m->nwindows / 2;
    for (int i = 0; i < m->nwindows; i++) {
      double r = f / m->window_s_per_product[i];
      lo = fmin(lo, r), hi = fmax(hi, r);
      if (i >= from) sum += m->window_s_per_product[i];
    }
    double sustained = f * (m->nwindows - from) / sum, share = sustained / burst;
    double held = share < 0.1 ? 0.1 : share > 1 ? 1 : share; /* what the file can hold */
    c->gpu.sustained_share = held;
    snprintf(note, sizeof note, "%s: %lldx%lldx%lld bf16 GEMMs: %.4g TFLOP/s burst (timed first), back to back %.4g over "
             "the last %d of %d windows of %.2f s (window rates %.4g-%.4g): %.3f%s", said, (long long)m->sustain.m,
             (long long)m->sustain.n, (long long)m->sustain.k, burst / 1e12, sustained / 1e12,
             m->nwindows - from, m->nwindows, m->window_s, lo / 1e12, hi / 1e12, share,
             held != share ? " (clamped to [0.1, 1])" : "");
    st = px_cluster_set_source(c, "gpu.sustained_share", note, err);
  }
  if (!st && m->hbm_bytes > 0 && m->hbm_bytes > c->gpu.reserved_bytes) {
    c->gpu.hbm_bytes = m->hbm_bytes;
    snprintf(note, sizeof note, "%s: the device's memory (cudaMemGetInfo)", said);
    st = px_cluster_set_source(c, "gpu.hbm_gib", note, err);
  }
  if (!st && m->sms > 0) {
    snprintf(note, sizeof note, "%s: the device's multiprocessors", said);
    st = px_cluster_set_source(c, "gpu.sm_count", note, err);
  }
  free(m);
  free(gl);
  return st;
}
