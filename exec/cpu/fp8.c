/* The cpu backend's fp8 emulation (exec/cpu/fp8.h): the scales of the fp8
 * codes it wrote, by address, and the amax histories of delayed scaling
 * (exec/amax.h). */
#include "exec/cpu/fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/amax.h"
#include "exec/contract.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/mx.h"
#include "plan/runnable.h"

/* Codes at p: n of them, in format fmt, with one scale or (blockwise) one per
 * 1 x PX_FP8_BLOCK tile of rows of cols; or (mxfp8, nvfp4) a block-scaled
 * tensor: its row-wise copy at p as the GEMM reads it (layout_of), and
 * the values of its column-wise copy. */
typedef struct {
  const uint8_t *p;
  uint64_t n;
  int64_t cols;
  px_fp8_format fmt;
  float scale;
  float *scales;  /* (n / cols, ceil(cols / PX_FP8_BLOCK)), or NULL: per-tensor */
  float *colwise; /* block-scaled: (n / cols, cols) the values of the copy quantized along the columns, or NULL */
  bool src;       /* colwise holds the cast's input instead, quantized where read (expert_values): mxfp8's
                     column-wise copy, the experts' rows with current scaling and in nvfp4 */
  bool grad;      /* nvfp4's experts' rows: a gradient's, rounded stochastically with sr */
  px_k_sr sr[2];  /* ... the streams of its row-wise and column-wise copies */
  int8_t block;   /* a block-scaled tensor's format (PX_PREC_MXFP8, PX_PREC_NVFP4), else 0 */
} codes;

struct px_cpu_fp8 {
  codes *c;
  int64_t nc, capc;
  px_amax *amax; /* delayed scaling's histories */
};

px_cpu_fp8 *px_cpu_fp8_new(void) {
  px_cpu_fp8 *s = calloc(1, sizeof(px_cpu_fp8));
  if (s && !(s->amax = px_amax_new())) {
    free(s);
    return NULL;
  }
  return s;
}

void px_cpu_fp8_free(px_cpu_fp8 *s) {
  if (!s) return;
  for (int64_t i = 0; i < s->nc; i++) free(s->c[i].scales), free(s->c[i].colwise);
  free(s->c);
  px_amax_free(s->amax);
  free(s);
}

static codes *find(px_cpu_fp8 *s, const void *p) {
  for (int64_t i = 0; i < s->nc; i++)
    if (s->c[i].p == p) return &s->c[i];
  return NULL;
}

/* Records the scales of the codes at k.p (taking k.scales), replacing what was there. */
static px_status record(px_cpu_fp8 *s, codes k, px_err *err) {
  codes *old = find(s, k.p);
  if (old) {
    free(old->scales), free(old->colwise);
    *old = k;
    return PX_OK;
  }
  if (s->nc == s->capc) {
    int64_t cap = s->capc ? 2 * s->capc : 64;
    codes *c = realloc(s->c, (size_t)cap * sizeof *c);
    if (!c) {
      free(k.scales), free(k.colwise);
      return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    }
    s->c = c, s->capc = cap;
  }
  s->c[s->nc++] = k;
  return PX_OK;
}

void px_cpu_fp8_rekey(px_cpu_fp8 *s, const void *to, const void *from) {
  codes *k = s ? find(s, from) : NULL;
  if (!k) return;
  px_cpu_fp8_forget(s, to, 1); /* what was noted at `to` before is gone */
  k = find(s, from);           /* (the forget may have moved it) */
  k->p = to;
}

void px_cpu_fp8_forget(px_cpu_fp8 *s, const void *p, uint64_t bytes) {
  const uint8_t *lo = p, *hi = lo + bytes;
  for (int64_t i = 0; s && i < s->nc;)
    if (s->c[i].p >= lo && s->c[i].p < hi) {
      free(s->c[i].scales), free(s->c[i].colwise);
      s->c[i] = s->c[--s->nc];
    } else {
      i++;
    }
}

/* ---- block-scaled tensors (mxfp8, nvfp4) ----
 * A cast writes the tensor's row-wise copy (blocks along its rows, the
 * forward's and the data gradient's operand) into its buffer as the plan
 * sizes it (px_parallel_quant_bytes), and keeps the values of its column-wise
 * copy (blocks down its columns: the weight gradient contracts the rows),
 * which a GPU would hold as a second buffer. nvfp4's column-wise copy is of
 * the random Hadamard transform of the rows (16 at a time, one sign vector
 * for the run, so that the weight gradient's two operands' transforms
 * cancel), and gradients (the E5M2-flagged casts) round stochastically. */

/* The buffer of a (rows, cols) block-scaled row-wise copy: codes, then the
 * scales (rows, ceil(cols / block)), then nvfp4's fp32 tensor scale. */
typedef struct {
  uint8_t *codes, *scales, *tensor_scale;
} block_layout;

static int64_t code_bytes(int64_t n, bool nv) { return nv ? (n + 1) / 2 : n; }
static int64_t scale_bytes(int64_t rows, int64_t cols, bool nv) {
  int64_t blk = nv ? PX_NVFP4_BLOCK : PX_MX_BLOCK;
  return rows * ((cols + blk - 1) / blk);
}

static block_layout layout_of(uint8_t *p, int64_t rows, int64_t cols, bool nv) {
  uint8_t *sc = p + code_bytes(rows * cols, nv);
  return (block_layout){p, sc, sc + scale_bytes(rows, cols, nv)};
}

/* Its bytes (px_parallel_quant_bytes's, for the plan's slot). */
static size_t block_bytes(int64_t rows, int64_t cols, bool nv) {
  return (size_t)(code_bytes(rows * cols, nv) + scale_bytes(rows, cols, nv) + (nv ? 4 : 0));
}

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Stochastic rounding's stream for copy `copy` of cast e's output: apart for each run seed, micro-batch
 * (its first sequence's global number), tensor, layer and TP rank, so no two roundings share draws. */
static px_k_sr sr_stream(const px_exec_op *e, int copy) {
  uint64_t h = mix64(e->seed ^ 0x5352ull);
  h = mix64(h ^ (e->seq_index ? e->seq_index[0] : (uint64_t)e->step));
  h = mix64(h ^ ((uint64_t)(uint16_t)e->op->out[0].slot << 40 ^ (uint64_t)(e->layer + e->op->out[0].layer_off) << 8 ^
                 (uint64_t)copy));
  return (px_k_sr){mix64(h ^ (uint64_t)e->env->tp_rank), 0};
}

/* y (cols, rows) = x (rows, cols) transposed. */
static void transpose(float *y, const float *x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) y[c * rows + r] = x[r * cols + c];
}

/* y = the values of x (rows, cols) quantized along its rows and decoded (nvfp4: block_rows 1 or 16, its
 * per-tensor scale from amax, stochastic rounding with sr); codes and scales in scratch q. */
static void block_roundtrip(float *y, const float *x, int64_t rows, int64_t cols, bool nv, int64_t block_rows,
                            float amax, const px_k_sr *sr, uint8_t *q) {
  block_layout b = layout_of(q, rows, cols, nv);
  if (nv) {
    float ts = px_k_nvfp4_tensor_scale(amax);
    px_k_nvfp4_quantize(b.codes, b.scales, x, rows, cols, block_rows, ts, sr);
    px_k_nvfp4_dequantize(y, b.codes, b.scales, rows, cols, block_rows, ts);
  } else {
    px_k_mxfp8_quantize(b.codes, b.scales, x, rows, cols, PX_FP8_E4M3);
    px_k_mxfp8_dequantize(y, b.codes, b.scales, rows, cols, PX_FP8_E4M3);
  }
}

/* y = the values of mxfp8's column-wise copy of x (rows, cols): blocks of 32 down each column, from its first row;
 * t: scratch (rows, cols), q: scratch of block_bytes(cols, rows, false). y may be x. */
static void mx_colwise(float *y, const float *x, int64_t rows, int64_t cols, float *t, uint8_t *q) {
  transpose(t, x, rows, cols);
  block_roundtrip(t, t, cols, rows, false, 1, 0.0f, NULL, q);
  transpose(y, t, cols, rows);
}

static px_status block_cast(px_cpu_fp8 *s, const px_exec_op *e, px_err *err) {
  const px_op *o = e->op;
  const float *x = e->in[0];
  int64_t n = o->dim[0], cols = px_slot_row_elems(px_exec_slot(e, o->out[0])), rows = n / cols;
  bool nv = e->env->block_format == PX_PREC_NVFP4, grad = (o->flags & PX_OPF_E5M2) != 0;
  /* nvfp4's experts' rows: kept, each expert's own tensor scales and transform where its GEMMs read them
   * (expert_values, expert_padded) */
  bool experts = nv && (o->flags & PX_OPF_EXPERT_ROWS);
  if (rows * cols != n || (nv && !experts && rows % 16)) /* refused before the run (px_cpu_fp8_supports) */
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: block-scaled cast of %lld elements is not rows (a multiple "
                      "of 16 for nvfp4) of %lld", (long long)n, (long long)cols);
  codes k = {.p = e->out[0], .n = (uint64_t)n, .cols = cols, .fmt = PX_FP8_E4M3, .scale = 1.0f,
             .block = (int8_t)e->env->block_format};
  if (experts) {
    if (!(k.colwise = malloc((size_t)n * sizeof *k.colwise))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    memcpy(k.colwise, x, (size_t)n * sizeof *k.colwise);
    k.src = true, k.grad = grad, k.sr[0] = sr_stream(e, 0), k.sr[1] = sr_stream(e, 1);
    return record(s, k, err);
  }
  float *t = nv ? malloc(2 * (size_t)n * sizeof *t) : NULL;     /* (2, n) the transform, the transposed copy */
  uint8_t *q = nv ? malloc(block_bytes(cols, rows, nv)) : NULL; /* the column-wise copy's codes and scales */
  k.colwise = malloc((size_t)n * sizeof *k.colwise);
  if ((nv && (!t || !q)) || !k.colwise) {
    free(t), free(q), free(k.colwise);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  /* the row-wise copy, into the buffer; nvfp4's tensor scales from amaxes reduced as fp8's (the op's comm) */
  block_layout b = layout_of(e->out[0], rows, cols, nv);
  float amax[2] = {0.0f, 0.0f};
  const float *src = x;
  if (nv) {
    px_k_rht16(t, x, rows, cols, PX_CPU_RHT_SEED);
    src = t;
    amax[0] = px_k_fp8_amax(x, n), amax[1] = px_k_fp8_amax(t, n);
  }
  px_status st = nv ? px_exec_reduce(e, amax, 2, PX_RED_MAX, err) : PX_OK;
  if (!st) {
    px_k_sr sr0 = sr_stream(e, 0), sr1 = sr_stream(e, 1);
    if (nv) {
      float ts = px_k_nvfp4_tensor_scale(amax[0]);
      px_k_nvfp4_quantize(b.codes, b.scales, x, rows, cols, 1, ts, grad ? &sr0 : NULL);
      memcpy(b.tensor_scale, &ts, sizeof ts);
      /* the column-wise copy: the rows contracted, so blocks down the columns (of the transposed tensor's rows) */
      float *tr = t + n;
      transpose(tr, src, rows, cols);
      block_roundtrip(tr, tr, cols, rows, nv, 1, amax[1], grad ? &sr1 : NULL, q);
      transpose(k.colwise, tr, cols, rows);
    } else { /* mxfp8's column-wise copy is made where the weight gradient reads it (expert_values) */
      px_k_mxfp8_quantize(b.codes, b.scales, x, rows, cols, PX_FP8_E4M3);
      memcpy(k.colwise, x, (size_t)n * sizeof *k.colwise);
      k.src = true;
    }
  }
  free(t), free(q);
  if (st) {
    free(k.colwise);
    return st;
  }
  return record(s, k, err);
}

px_status px_cpu_fp8_cast(px_cpu_fp8 *s, const px_exec_op *e, px_err *err) {
  const px_op *o = e->op;
  if (!e->out[0]) return PX_OK; /* the weights' cached copies: each GEMM writes its weight's at use (wcopy) */
  if (e->env->block_format) return block_cast(s, e, err);
  const float *x = e->in[0];
  uint8_t *q = e->out[0];
  int64_t n = o->dim[0];
  px_fp8_format f = (o->flags & PX_OPF_E5M2) ? PX_FP8_E5M2 : PX_FP8_E4M3;
  codes k = {.p = q, .n = (uint64_t)n, .cols = px_slot_row_elems(px_exec_slot(e, o->out[0])), .fmt = f, .scale = 1.0f};
  if (e->env->fp8_blockwise) {
    int64_t rows = n / k.cols, nb = (k.cols + PX_FP8_BLOCK - 1) / PX_FP8_BLOCK;
    if (rows * k.cols != n)
      return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: cast of %lld elements is not rows of %lld", (long long)n,
                        (long long)k.cols);
    k.scales = malloc((size_t)(rows * nb) * sizeof *k.scales);
    if (!k.scales) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    px_k_fp8_quantize_rows(q, k.scales, x, rows, k.cols, PX_FP8_BLOCK, f);
    return record(s, k, err);
  }
  /* per-tensor: the amax shared by the ranks that may exchange these codes (TE's amax reduction: the op's comm);
   * the experts' rows with current scaling: each expert's own, where its GEMMs read them (expert_values) */
  bool rows = (o->flags & PX_OPF_EXPERT_ROWS) && !e->env->fp8_delayed;
  float amax = px_k_fp8_amax(x, n);
  px_status st = rows ? PX_OK : px_exec_reduce(e, &amax, 1, PX_RED_MAX, err);
  if (!st) st = px_cpu_fp8_cast_scale(s, e, amax, f, &k.scale, err);
  if (st) return st;
  px_k_fp8_quantize(q, x, n, k.scale, f);
  if (rows) {
    if (!(k.colwise = malloc((size_t)n * sizeof *k.colwise))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    memcpy(k.colwise, x, (size_t)n * sizeof *k.colwise);
    k.src = true;
  }
  return record(s, k, err);
}

px_status px_cpu_fp8_cast_scale(px_cpu_fp8 *s, const px_exec_op *e, float amax, px_fp8_format f, float *scale,
                                px_err *err) {
  const px_op *o = e->op;
  if (!e->env->fp8_delayed) {
    *scale = px_k_fp8_scale(amax, f);
    return PX_OK;
  }
  return px_amax_scale(s->amax, px_amax_cast_key(o, e->layer), e->step, amax, f, scale, err);
}

px_status px_cpu_fp8_weight_scale(px_cpu_fp8 *s, const px_exec_op *e, int32_t ws, float amax, float *scale,
                                  px_err *err) {
  *scale = px_k_fp8_scale(amax, PX_FP8_E4M3);
  if (e->env->fp8_delayed)
    return px_amax_scale(s->amax, px_amax_weight_key(ws, e->layer), e->step, amax, PX_FP8_E4M3, scale, err);
  return PX_OK;
}

px_status px_cpu_fp8_note(px_cpu_fp8 *s, const void *p, uint64_t n, px_fp8_format f, float scale, px_err *err) {
  codes k = {.p = p, .n = n, .cols = 1, .fmt = f, .scale = scale};
  return record(s, k, err);
}

bool px_cpu_fp8_scale_of(px_cpu_fp8 *s, const void *p, float *scale, px_fp8_format *f) {
  const codes *k = find(s, p);
  if (!k || k->scales) return false;
  *scale = k->scale, *f = k->fmt;
  return true;
}

/* The weight operand w (slot ws) of a quantized GEMM, El matrices of (n, k), quantized and decoded into y. Its
 * codes and block scales go into the copy the plan holds for it (e->wcopy), else into scratch: the forward's
 * row-wise copy, the data gradient's the transposed weight's (the column-wise copy: mxfp8's blocks down the
 * columns; the other formats' the same values transposed, the copy a GPU's GEMMs without any-layout fp8 read). */
static px_status weight(px_cpu_fp8 *s, const px_exec_op *e, int32_t ws, const float *w, float *y, int64_t El, int64_t n,
                        int64_t k, px_err *err) {
  int bf = e->env->block_format;
  bool nv = bf == PX_PREC_NVFP4;
  bool dgrad = e->op->kind == PX_OP_LINEAR_BWD_DATA || e->op->kind == PX_OP_EXPERT_LINEAR_BWD_DATA;
  bool flip = dgrad && (bf == PX_PREC_MXFP8 || (e->wcopy && e->wcopies > 1));
  int64_t rows = flip ? k : n, cols = flip ? n : k;
  int64_t one = bf ? code_bytes(rows * cols, nv) + scale_bytes(rows, cols, nv) : rows * cols; /* a matrix's */
  bool held = e->wcopy && El * one <= (int64_t)e->wcopy_bytes;
  uint8_t *q = held ? e->wcopy + (flip && e->wcopies > 1 ? e->wcopy_bytes : 0) : malloc((size_t)one);
  float *t = flip ? malloc(2 * (size_t)(n * k) * sizeof *t) : NULL; /* (2, k, n) the weight, its values, transposed */
  if (!q || (flip && !t)) {
    if (!held) free(q);
    free(t);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  /* per-tensor fp8: each matrix its own scale (Transformer Engine's GroupedLinear quantizes each expert's weight
   * apart); delayed scaling's one, from the weight's history, over the El matrices */
  bool per_tensor = !bf && !e->env->fp8_blockwise, delayed = e->env->fp8_delayed;
  float scale = 1.0f;
  px_status st = PX_OK;
  if (per_tensor && delayed) st = px_cpu_fp8_weight_scale(s, e, ws, px_k_fp8_amax(w, El * n * k), &scale, err);
  for (int64_t x = 0; x < El && !st; x++) {
    const float *wx = w + x * n * k, *src = wx;
    float *yx = y + x * n * k, *dst = yx;
    uint8_t *qx = held ? q + x * one : q;
    if (flip) transpose(t, wx, n, k), src = t, dst = t + n * k;
    if (bf) /* nvfp4: 16 x 16 blocks, the tensor scale from the matrix's amax */
      block_roundtrip(dst, src, rows, cols, nv, nv ? PX_NVFP4_BLOCK : 1, nv ? px_k_fp8_amax(wx, n * k) : 0.0f, NULL, qx);
    else if (e->env->fp8_blockwise)
      px_k_fp8_roundtrip_blocks(dst, qx, src, rows, cols, PX_FP8_BLOCK, PX_FP8_E4M3);
    else {
      if (!delayed) scale = px_k_fp8_scale(px_k_fp8_amax(wx, n * k), PX_FP8_E4M3);
      px_k_fp8_quantize(qx, src, rows * cols, scale, PX_FP8_E4M3), px_k_fp8_dequantize(dst, qx, rows * cols, scale, PX_FP8_E4M3);
    }
    if (flip) transpose(yx, dst, k, n);
  }
  if (!held) free(q);
  free(t);
  return st;
}

/* The row segments of a buffer of routed rows as an expert GEMM reads them (cpu_expert_linear's): counts[s el + x]
 * rows of local expert x from source s, source-major, from row at[s el + x]; any other op's: one segment of all
 * the rows. */
typedef struct {
  int64_t el, ns;
  const int32_t *counts; /* (ns, el), or NULL: the one segment */
  int64_t rows;
  int64_t at[];          /* (ns, el) */
} segments;

static segments *segments_of(const px_exec_op *e, int64_t rows, px_err *err) {
  const px_op *o = e->op;
  bool expert = o->kind == PX_OP_EXPERT_LINEAR || o->kind == PX_OP_EXPERT_LINEAR_BWD_DATA ||
                o->kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
  int64_t el = expert ? o->dim[3] : 1, ns = 1;
  const int32_t *taken = expert ? (const int32_t *)e->in[4] + px_contract_expert_taken(e, &ns) : NULL;
  segments *g = malloc(sizeof *g + (size_t)(ns * el) * sizeof g->at[0]);
  if (!g) {
    px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    return NULL;
  }
  g->el = el, g->ns = ns, g->rows = rows, g->counts = taken;
  int64_t r = 0;
  for (int64_t i = 0; i < ns * el; i++) g->at[i] = r, r += g->counts ? g->counts[i] : rows;
  if (r > rows) {
    px_err_set(err, PX_ERR_RUNTIME, "cpu backend: %s: the experts' %lld rows exceed the %lld of the buffer",
               px_op_names[o->kind], (long long)r, (long long)rows);
    free(g);
    return NULL;
  }
  return g;
}

/* Expert xe's rows (cols wide): gathered from x into t, each source's in turn (the order Megatron-Core's sort by
 * expert gives split_quantize), or with back scattered from t into x. Returns their number. */
static int64_t expert_rows(const segments *g, int64_t xe, float *t, float *x, int64_t cols, bool back) {
  int64_t r = 0;
  for (int64_t sc = 0; sc < g->ns; sc++) {
    int64_t c = g->counts ? g->counts[sc * g->el + xe] : g->rows;
    float *seg = x + g->at[sc * g->el + xe] * cols;
    if (back) memcpy(seg, t + r * cols, (size_t)(c * cols) * sizeof *t);
    else memcpy(t + r * cols, seg, (size_t)(c * cols) * sizeof *t);
    r += c;
  }
  return r;
}

/* y = the values an expert GEMM (or a dense weight gradient) reads of the rows whose cast kept its input x
 * (rows, cols) (codes k.src): each segment's expert quantized apart. mxfp8 (colwise, a weight gradient's operand):
 * the column-wise copy, blocks of 32 down each column within the expert's rows; nvfp4 (the forward's and the data
 * gradient's operand): the row-wise copy at the expert's own tensor scale; fp8 with current scaling: the expert's
 * own scale from its rows' amax, its codes written into the cast's buffer. Rows outside every segment read as
 * unwritten memory. */
static px_status expert_values(const px_exec_op *e, const codes *k, float *y, int64_t rows, px_err *err) {
  int64_t cols = k->cols, n = rows * cols, done = 0;
  bool nv = e->env->block_format == PX_PREC_NVFP4;
  segments *g = segments_of(e, rows, err);
  float *t = malloc(2 * (size_t)n * sizeof *t); /* (2, rows, cols) an expert's rows, and transposed */
  uint8_t *q = malloc(block_bytes(cols, rows, false) > (size_t)n ? block_bytes(cols, rows, false) : (size_t)n);
  px_status st = g ? PX_OK : PX_ERR_RUNTIME;
  if (!st && (!t || !q)) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int64_t i = 0; !st && i < n; i++) y[i] = NAN;
  for (int64_t xe = 0; !st && xe < g->el; xe++) {
    int64_t r = expert_rows(g, xe, t, k->colwise, cols, false);
    if (!r) continue;
    if (nv) { /* 1 x 16 blocks along the rows, the expert's tensor scale; a gradient's draws from its place */
      px_k_sr sr = {k->sr[0].seed, k->sr[0].offset + (uint64_t)(done * cols)};
      block_roundtrip(t, t, r, cols, true, 1, px_k_fp8_amax(t, r * cols), k->grad ? &sr : NULL, q);
      done += r;
    } else if (e->env->block_format) { /* mxfp8's column-wise copy */
      mx_colwise(t, t, r, cols, t + n, q);
    } else { /* the expert's own per-tensor scale: its codes into the buffer's rows, their values */
      float scale = px_k_fp8_scale(px_k_fp8_amax(t, r * cols), k->fmt);
      px_k_fp8_quantize(q, t, r * cols, scale, k->fmt);
      px_k_fp8_dequantize(t, q, r * cols, scale, k->fmt);
      for (int64_t sc = 0, off = 0; sc < g->ns; sc++) {
        int64_t c = g->counts[sc * g->el + xe] * cols;
        memcpy((uint8_t *)k->p + g->at[sc * g->el + xe] * cols, q + off, (size_t)c);
        off += c;
      }
    }
    expert_rows(g, xe, t, y, cols, true);
  }
  free(g), free(t), free(q);
  return st;
}

/* nvfp4's column-wise copy of the rows whose cast kept its input (codes k.src) as an expert weight gradient reads
 * it: each expert's rows (gathered as expert_rows does) padded with zero rows to a multiple of 16, as Megatron-Core
 * pads each expert's rows for Transformer Engine (to 128, get_fp4_align_size: the further groups of zeros transform
 * and quantize to zeros, adding nothing), their random Hadamard transform 16 rows at a time from the expert's
 * first (its last group mixes the padding in, and the GEMM sums over it), the expert's own tensor scale, blocks of
 * 16 down each column. *y (the padded rows, cols): the experts one after another; *counts as the expert GEMM
 * reads its rows (px_exec_op.in[4]: (ep, el) unread, then (sources, el)): every expert's padded rows from source 0. */
static px_status expert_padded(const px_exec_op *e, const codes *k, int64_t rows, float **y, int32_t **counts,
                               px_err *err) {
  int64_t cols = k->cols, cap = (rows + 15) * cols, done = 0;
  segments *g = segments_of(e, rows, err);
  if (!g) return PX_ERR_RUNTIME;
  int64_t sources, el = g->el, lead = px_contract_expert_taken(e, &sources), total = 0;
  int32_t *c = calloc((size_t)(lead + g->ns * el), sizeof *c);
  for (int64_t xe = 0; c && xe < el; xe++) {
    int64_t r = 0;
    for (int64_t sc = 0; sc < g->ns; sc++) r += g->counts[sc * el + xe];
    c[lead + xe] = (int32_t)((r + 15) / 16 * 16), total += c[lead + xe];
  }
  float *out = malloc((size_t)(total * cols + 1) * sizeof *out);
  float *t = malloc(2 * (size_t)cap * sizeof *t); /* (2, rows + 15, cols) an expert's padded rows, transposed */
  uint8_t *q = malloc(block_bytes(cols, rows + 15, true));
  px_status st = c && out && t && q ? PX_OK : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int64_t xe = 0; !st && xe < el; xe++) {
    int64_t r = expert_rows(g, xe, t, k->colwise, cols, false), r16 = c[lead + xe];
    if (!r16) continue;
    memset(t + r * cols, 0, (size_t)((r16 - r) * cols) * sizeof *t);
    px_k_rht16(t, t, r16, cols, PX_CPU_RHT_SEED);
    float *tr = t + cap;
    transpose(tr, t, r16, cols);
    px_k_sr sr = {k->sr[1].seed, k->sr[1].offset + (uint64_t)(done * cols)};
    block_roundtrip(tr, tr, cols, r16, true, 1, px_k_fp8_amax(t, r16 * cols), k->grad ? &sr : NULL, q);
    transpose(out + done * cols, tr, cols, r16);
    done += r16;
  }
  free(g), free(t), free(q);
  if (st) {
    free(c), free(out);
    return st;
  }
  *y = out, *counts = c;
  return PX_OK;
}

/* The fused attention in fp8 (fp8_attention: the op flagged PX_OPF_FP8): the values of the inputs cuDNN's FP8
 * attention reads quantized, into d and scratch: Q, K and V in E4M3 and the backward's output gradient in E5M2
 * (Transformer Engine's HYBRID format), each at the scale of its own amax on the rank (current scaling); MXFP8
 * attention's in E4M3 blocks of 32 along each head's dims (MXFP8BlockScaling's format). What cuDNN quantizes inside
 * the kernel (the probabilities, their gradient) stays fp32 here, and the output O, which the backward reads, in
 * the activations' dtype (Transformer Engine's default, NVTE_DPA_FP8CS_O_in_F16). */
static px_status attention_operands(const px_exec_op *e, px_exec_op *d, void *scratch[PX_OP_INS], px_err *err) {
  const px_op *o = e->op;
  bool bwd = o->kind == PX_OP_FLASH_ATTN_BWD, mx = e->env->block_format == PX_PREC_MXFP8;
  for (int j = 0; j < (bwd ? 4 : 3); j++) { /* forward: q, k, v; backward: dctx, q, k, v */
    const px_slot *sl = px_exec_slot(e, o->in[j]);
    int64_t n = (int64_t)sl->elems, cols = sl->shape[3] > 0 ? sl->shape[3] : 1, rows = n / cols;
    px_fp8_format f = bwd && j == 0 && !mx ? PX_FP8_E5M2 : PX_FP8_E4M3;
    float *y = malloc((size_t)n * sizeof *y);
    uint8_t *q = malloc((size_t)(n + rows * ((cols + PX_MX_BLOCK - 1) / PX_MX_BLOCK)));
    scratch[j] = y, d->in[j] = y;
    if (!y || !q) {
      free(q);
      return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    }
    const float *x = e->in[j];
    if (mx) {
      px_k_mxfp8_quantize(q, q + n, x, rows, cols, f);
      px_k_mxfp8_dequantize(y, q, q + n, rows, cols, f);
    } else {
      float scale = px_k_fp8_scale(px_k_fp8_amax(x, n), f);
      px_k_fp8_quantize(q, x, n, scale, f);
      px_k_fp8_dequantize(y, q, n, scale, f);
    }
    free(q);
  }
  return PX_OK;
}

px_status px_cpu_fp8_operands(px_cpu_fp8 *s, const px_exec_op *e, px_exec_op *d, void *scratch[PX_OP_INS], px_err *err) {
  const px_op *o = e->op;
  *d = *e;
  memset(scratch, 0, PX_OP_INS * sizeof *scratch);
  if (o->kind == PX_OP_FLASH_ATTN || o->kind == PX_OP_FLASH_ATTN_BWD) return attention_operands(e, d, scratch, err);
  bool expert = o->kind == PX_OP_EXPERT_LINEAR || o->kind == PX_OP_EXPERT_LINEAR_BWD_DATA ||
                o->kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
  px_status st = PX_OK;
  int quantized = 0, padded = 0; /* activation operands; of them nvfp4 experts' padded ones (expert_padded) */
  for (int j = 0; j < PX_OP_INS && !st; j++) {
    if (o->in[j].slot < 0 || !e->in[j]) continue;
    const px_slot *sl = px_exec_slot(e, o->in[j]);
    bool is_w = sl->kind == PX_SLOT_PARAM && sl->fp8;
    if (sl->dtype != PX_DTYPE_FP8 && !is_w) continue;
    int64_t El = expert ? o->dim[3] : 1, n = is_w ? El * o->dim[1] * o->dim[2] : (int64_t)sl->elems;
    float *y = malloc((size_t)n * sizeof *y);
    if (!y) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    scratch[j] = y, d->in[j] = y;
    if (is_w) {
      st = weight(s, e, o->in[j].slot, e->in[j], y, El, o->dim[1], o->dim[2], err);
      continue;
    }
    const codes *k = find(s, e->in[j]);
    if (!k)
      return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: %s reads fp8 %s, which no cast or collective wrote with "
                        "its scales", px_op_names[o->kind], sl->name);
    int64_t have = (int64_t)k->n < n ? (int64_t)k->n : n; /* an all-to-all fills the rows that arrive */
    bool wgrad = o->kind == PX_OP_LINEAR_BWD_WEIGHT || o->kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
    bool nv = e->env->block_format == PX_PREC_NVFP4;
    quantized++;
    if (k->src && nv && wgrad) { /* the experts' rows padded: the GEMM reads them, and their counts, from scratch */
      int32_t *counts = NULL;
      free(y), scratch[j] = d->in[j] = NULL;
      st = expert_padded(e, k, have / k->cols, &y, &counts, err);
      if (st) return st;
      scratch[j] = y, d->in[j] = y;
      free(scratch[4]), scratch[4] = counts, d->in[4] = counts;
      padded++;
      continue;
    }
    if (k->src && (e->env->block_format == PX_PREC_MXFP8 ? wgrad : expert)) { /* each expert apart */
      st = expert_values(e, k, y, have / k->cols, err);
    } else if (k->colwise && wgrad) { /* the weight gradient contracts the rows: the column-wise copy */
      memcpy(y, k->colwise, (size_t)have * sizeof *y);
    } else if (k->colwise && e->env->block_format) {
      int64_t rows = have / k->cols;
      block_layout b = layout_of((uint8_t *)k->p, rows, k->cols, nv);
      float ts = 1.0f;
      if (nv) memcpy(&ts, b.tensor_scale, sizeof ts);
      if (nv) px_k_nvfp4_dequantize(y, b.codes, b.scales, rows, k->cols, 1, ts);
      else px_k_mxfp8_dequantize(y, b.codes, b.scales, rows, k->cols, PX_FP8_E4M3);
    } else if (k->scales)
      px_k_fp8_dequantize_rows(y, k->p, k->scales, have / k->cols, k->cols, PX_FP8_BLOCK, k->fmt);
    else
      px_k_fp8_dequantize(y, k->p, have, k->scale, k->fmt);
    for (int64_t i = have; i < n; i++) y[i] = NAN; /* never written: as unwritten memory reads */
  }
  if (!st && padded && padded != quantized) /* the GEMM reads every operand's rows by the one layout */
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: %s: nvfp4 operands not all quantized expert by expert",
                      px_op_names[o->kind]);
  return st;
}

void px_cpu_fp8_release(void *scratch[PX_OP_INS]) {
  for (int j = 0; j < PX_OP_INS; j++) free(scratch[j]), scratch[j] = NULL;
}

px_status px_cpu_fp8_moved(px_cpu_fp8 *s, const void *out, const void *in, uint64_t count_out, px_err *err) {
  const codes *k = find(s, in);
  if (!k) return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: a collective moved fp8 codes that no cast wrote");
  if (k->colwise) /* its column-wise copy would have to move too (px_cpu_fp8_supports refuses such moves) */
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: codes with a column-wise copy moved by a collective that "
                      "leaves it (an all-to-all)");
  codes c = *k;
  c.p = out, c.n = count_out;
  if (k->scales) { /* blockwise: only a copy within one rank keeps its tiles (px_cpu_fp8_supports) */
    if (count_out != k->n) return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: blockwise fp8 codes moved between ranks");
    size_t nb = (size_t)(k->n / (uint64_t)k->cols) * (size_t)((k->cols + PX_FP8_BLOCK - 1) / PX_FP8_BLOCK);
    if (!(c.scales = malloc(nb * sizeof *c.scales))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    memcpy(c.scales, k->scales, nb * sizeof *c.scales);
  }
  return record(s, c, err);
}

bool px_cpu_fp8_block_scaled(px_cpu_fp8 *s, const void *p) {
  const codes *k = find(s, p);
  return k && k->block;
}

/* ---- block-scaled codes in a sequence-parallel all-gather ----
 * Transformer Engine's _all_gather_mxfp8 and _all_gather_nvfp4: each rank casts its own shard of the tokens and
 * the all-gather moves both copies with their scales. Here: the row-wise copy's codes and scales into the buffer
 * as a cast of all the rows lays them out (the ranks' rows one after another; a row's blocks run along it, so a
 * shard's are the whole tensor's), nvfp4's tensor scale (every rank's: the cast reduced its amaxes over TP, as
 * TE's quantizer does under sequence parallelism, with_amax_reduction), and the values of the column-wise copy
 * each rank quantized from its shard alone (blocks and nvfp4's Hadamard groups down the shard's rows, from its
 * first; a gradient's draws from the casting rank's stream). mxfp8's column-wise copy, which the cast defers
 * (expert_values), is quantized from the shard here when TE's quantizer takes the shard (is_quantizable: its
 * rows a multiple of 32); else TE all-gathers the shards in high precision and casts the whole, and so the
 * shards' values move, quantized as one tensor where the weight gradient reads them. */
px_status px_cpu_fp8_gather(px_cpu_fp8 *s, px_cpu_fp8_gather_fn gather, void *ctx, void *out, const void *in,
                            int64_t ranks, px_err *err) {
  const codes *k = find(s, in);
  if (!k || !k->block || !k->colwise)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: px_cpu_fp8_gather: no block-scaled codes at the input");
  bool nv = k->block == PX_PREC_NVFP4;
  int64_t cols = k->cols, rows = (int64_t)k->n / cols, n = rows * cols;
  if (nv && (k->src || n % 2)) /* (the experts' rows move by all-to-all; a shard's codes fill whole bytes) */
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: nvfp4 codes of %lld rows of %lld gathered", (long long)rows,
                      (long long)cols);
  bool shard_cast = !nv && k->src && rows % PX_MX_BLOCK == 0; /* mxfp8: the shard's column-wise copy, now */
  codes c = *k;
  c.p = out, c.n = (uint64_t)(n * ranks), c.src = k->src && !shard_cast;
  c.colwise = malloc((size_t)(n * ranks) * sizeof *c.colwise);                     /* (ranks rows, cols) */
  float *mine = shard_cast ? malloc(2 * (size_t)n * sizeof *mine) : NULL;          /* (2, rows, cols): it, scratch */
  uint8_t *q = shard_cast ? malloc(block_bytes(cols, rows, false)) : NULL;
  if (!c.colwise || (shard_cast && (!mine || !q))) {
    free(c.colwise), free(mine), free(q);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  if (shard_cast) mx_colwise(mine, k->colwise, rows, cols, mine + n, q);
  block_layout a = layout_of((uint8_t *)in, rows, cols, nv), b = layout_of(out, rows * ranks, cols, nv);
  px_status st = gather(ctx, b.codes, a.codes, (uint64_t)code_bytes(n, nv), err);
  if (!st) st = gather(ctx, b.scales, a.scales, (uint64_t)scale_bytes(rows, cols, nv), err);
  if (!st) st = gather(ctx, c.colwise, shard_cast ? mine : k->colwise, (uint64_t)n * sizeof *c.colwise, err);
  if (!st && nv) memcpy(b.tensor_scale, a.tensor_scale, sizeof(float));
  free(mine), free(q);
  if (st) {
    free(c.colwise);
    return st;
  }
  return record(s, c, err);
}

/* dst = src's ranks x seqs pieces of `piece` bytes, from (ranks, seqs) order into (seqs, ranks). */
static void permute(uint8_t *dst, const uint8_t *src, int64_t ranks, int64_t seqs, size_t piece) {
  for (int64_t r = 0; r < ranks; r++)
    for (int64_t b = 0; b < seqs; b++) memcpy(dst + (size_t)(b * ranks + r) * piece, src + (size_t)(r * seqs + b) * piece, piece);
}

px_status px_cpu_fp8_permuted(px_cpu_fp8 *s, void *out, const void *in, int64_t ranks, int64_t seqs, px_err *err) {
  const codes *k = find(s, in);
  if (!k) return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: a collective moved fp8 codes that no cast wrote");
  bool nv = k->block == PX_PREC_NVFP4;
  int64_t pieces = ranks * seqs, cols = k->block ? k->cols : 1, rows = (int64_t)k->n / cols, prows = rows / pieces;
  if (k->scales || rows % pieces || (nv && prows * cols % 2)) /* (blockwise fp8: px_cpu_fp8_supports refuses it) */
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: fp8 codes of %lld rows of %lld do not permute as %lld "
                      "sequences' shards", (long long)rows, (long long)cols, (long long)pieces);
  codes c = *k;
  c.p = out, c.colwise = NULL;
  if (k->colwise && !(c.colwise = malloc((size_t)k->n * sizeof *c.colwise)))
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  block_layout a = layout_of((uint8_t *)in, rows, cols, nv), b = layout_of(out, rows, cols, nv);
  permute(b.codes, a.codes, ranks, seqs, (size_t)code_bytes(prows * cols, nv));
  if (k->block) permute(b.scales, a.scales, ranks, seqs, (size_t)scale_bytes(prows, cols, nv));
  if (nv) memcpy(b.tensor_scale, a.tensor_scale, sizeof(float));
  if (k->colwise)
    permute((uint8_t *)c.colwise, (const uint8_t *)k->colwise, ranks, seqs, (size_t)(prows * cols) * sizeof(float));
  return record(s, c, err);
}

px_status px_cpu_fp8_histories(px_cpu_fp8 *s, bool load, const px_amax_key *keys, int64_t n, int64_t step,
                               float *hist, px_err *err) {
  return load ? px_amax_load(s->amax, keys, n, step, hist, err) : px_amax_save(s->amax, keys, n, step, hist, err);
}

static bool no(char *why, size_t cap, const char *msg) {
  snprintf(why, cap, "%s", msg);
  return false;
}

bool px_cpu_fp8_supports(const px_exec_op *e, char *why, size_t cap) {
  const px_op *op = e->op;
  const px_env *v = e->env;
  if (v->block_format) /* the casts, the linear layers' GEMMs and sequence parallelism's all-gathers of codes */
    switch ((px_op_kind)op->kind) {
      case PX_OP_CAST: {
        const px_slot *y = op->out[0].slot >= 0 ? px_exec_slot(e, op->out[0]) : NULL;
        int64_t rows = y ? (int64_t)y->elems / px_slot_row_elems(y) : 0;
        if (v->block_format == PX_PREC_NVFP4 && rows % 16 && !(op->flags & PX_OPF_EXPERT_ROWS)) {
          snprintf(why, cap, "%s: %s has %lld rows (hint: %s)", PX_RUNNABLE_NVFP4_RHT, y->name, (long long)rows,
                   PX_RUNNABLE_NVFP4_RHT_HINT);
          return false;
        }
        return true;
      }
      case PX_OP_ALLGATHER: /* each rank's shard cast, both copies gathered (px_cpu_fp8_gather) */
        if (op->group == PX_GROUP_TP && (op->flags & PX_OPF_SEQ_AXIS) && !(op->flags & PX_OPF_COLS)) return true;
        return no(why, cap, "mxfp8 and nvfp4 codes in an all-gather other than sequence parallelism's of a layer's "
                  "input: the cpu backend moves a block-scaled tensor's column-wise copy in those only");
      case PX_OP_LINEAR:
      case PX_OP_LINEAR_BWD_DATA:
      case PX_OP_LINEAR_BWD_WEIGHT:
      case PX_OP_EXPERT_LINEAR:
      case PX_OP_EXPERT_LINEAR_BWD_DATA:
      case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
      case PX_OP_FLASH_ATTN: /* fp8_attention (attention_operands) */
      case PX_OP_FLASH_ATTN_BWD: return true;
      default:
        return no(why, cap, "mxfp8 and nvfp4 codes in an op that the cpu backend's emulation neither reads nor moves "
                  "with their column-wise copy");
    }
  switch ((px_op_kind)op->kind) {
    case PX_OP_ALLGATHER:
    case PX_OP_ALLTOALL: {
      int64_t members = op->group == PX_GROUP_TP ? v->tp : op->group == PX_GROUP_EP ? v->ep : v->cp;
      if (v->fp8_blockwise && members > 1)
        return no(why, cap, "fp8 blockwise: the 1x128 scales do not travel with the fp8 codes of a collective on the "
                  "cpu backend (sequence or expert parallelism; hint: `fp8_recipe` current)");
      return true; /* (a sequence-parallel one with mbs > 1: its permute through codes_permuted) */
    }
    case PX_OP_CAST:
    case PX_OP_LINEAR:
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT:
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD: return true;
    default: return no(why, cap, "an fp8 operand of an op that the cpu backend's fp8 emulation does not read");
  }
}
