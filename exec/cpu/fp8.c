/* The cpu backend's fp8 emulation (exec/cpu/fp8.h): the scales of the fp8
 * codes it wrote, by address, and the amax histories of delayed scaling
 * (exec/amax.h). */
#include "exec/cpu/fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/amax.h"
#include "kernels/cpu/fp8.h"

/* Codes at p: n of them, in format fmt, with one scale or (blockwise) one per
 * 1 x PX_FP8_BLOCK tile of rows of cols. */
typedef struct {
  const uint8_t *p;
  uint64_t n;
  int64_t cols;
  px_fp8_format fmt;
  float scale;
  float *scales; /* (n / cols, ceil(cols / PX_FP8_BLOCK)), or NULL: per-tensor */
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
  for (int64_t i = 0; i < s->nc; i++) free(s->c[i].scales);
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
    free(old->scales);
    *old = k;
    return PX_OK;
  }
  if (s->nc == s->capc) {
    int64_t cap = s->capc ? 2 * s->capc : 64;
    codes *c = realloc(s->c, (size_t)cap * sizeof *c);
    if (!c) {
      free(k.scales);
      return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    }
    s->c = c, s->capc = cap;
  }
  s->c[s->nc++] = k;
  return PX_OK;
}

void px_cpu_fp8_forget(px_cpu_fp8 *s, const void *p, uint64_t bytes) {
  const uint8_t *lo = p, *hi = lo + bytes;
  for (int64_t i = 0; s && i < s->nc;)
    if (s->c[i].p >= lo && s->c[i].p < hi) {
      free(s->c[i].scales);
      s->c[i] = s->c[--s->nc];
    } else {
      i++;
    }
}

px_status px_cpu_fp8_cast(px_cpu_fp8 *s, const px_exec_op *e, px_err *err) {
  const px_op *o = e->op;
  if (!e->out[0]) return PX_OK; /* a weight's copy: GEMMs quantize weights at use */
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
  /* per-tensor: the amax shared by the ranks that may exchange these codes (TE's amax reduction: the op's comm) */
  float amax = px_k_fp8_amax(x, n);
  px_status st = px_exec_reduce(e, &amax, 1, PX_RED_MAX, err);
  if (!st) st = px_cpu_fp8_cast_scale(s, e, amax, f, &k.scale, err);
  if (st) return st;
  px_k_fp8_quantize(q, x, n, k.scale, f);
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

/* The weight operand w (slot ws) of an fp8 GEMM quantized and decoded into y: El matrices of (n, k). */
static px_status weight(px_cpu_fp8 *s, const px_exec_op *e, int32_t ws, const float *w, float *y, int64_t El, int64_t n,
                        int64_t k, px_err *err) {
  if (e->env->fp8_blockwise) {
    for (int64_t x = 0; x < El; x++) px_k_fp8_roundtrip_blocks(y + x * n * k, w + x * n * k, n, k, PX_FP8_BLOCK, PX_FP8_E4M3);
    return PX_OK;
  }
  float amax = px_k_fp8_amax(w, El * n * k), scale;
  px_status st = px_cpu_fp8_weight_scale(s, e, ws, amax, &scale, err);
  if (!st) px_k_fp8_roundtrip(y, w, El * n * k, scale, PX_FP8_E4M3);
  return st;
}

px_status px_cpu_fp8_operands(px_cpu_fp8 *s, const px_exec_op *e, px_exec_op *d, void *scratch[PX_OP_INS], px_err *err) {
  const px_op *o = e->op;
  *d = *e;
  memset(scratch, 0, PX_OP_INS * sizeof *scratch);
  bool expert = o->kind == PX_OP_EXPERT_LINEAR || o->kind == PX_OP_EXPERT_LINEAR_BWD_DATA ||
                o->kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
  px_status st = PX_OK;
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
    if (k->scales)
      px_k_fp8_dequantize_rows(y, k->p, k->scales, have / k->cols, k->cols, PX_FP8_BLOCK, k->fmt);
    else
      px_k_fp8_dequantize(y, k->p, have, k->scale, k->fmt);
    for (int64_t i = have; i < n; i++) y[i] = NAN; /* never written: as unwritten memory reads */
  }
  return st;
}

void px_cpu_fp8_release(void *scratch[PX_OP_INS]) {
  for (int j = 0; j < PX_OP_INS; j++) free(scratch[j]), scratch[j] = NULL;
}

px_status px_cpu_fp8_moved(px_cpu_fp8 *s, const void *out, const void *in, uint64_t count_out, px_err *err) {
  const codes *k = find(s, in);
  if (!k) return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: a collective moved fp8 codes that no cast wrote");
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
  switch ((px_op_kind)op->kind) {
    case PX_OP_ALLGATHER:
    case PX_OP_ALLTOALL: {
      int64_t members = op->group == PX_GROUP_TP ? v->tp : op->group == PX_GROUP_EP ? v->ep : v->cp;
      if (v->fp8_blockwise && members > 1)
        return no(why, cap, "fp8 blockwise: the 1x128 scales do not travel with the fp8 codes of a collective on the "
                  "cpu backend (sequence or expert parallelism; hint: `fp8_recipe` current)");
      return true; /* (a sequence-parallel one with mbs > 1: its permute through codes_moved) */
    }
    case PX_OP_CAST:
    case PX_OP_LINEAR:
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT:
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT: return true;
    default: return no(why, cap, "an fp8 operand of an op that the cpu backend's fp8 emulation does not read");
  }
}
