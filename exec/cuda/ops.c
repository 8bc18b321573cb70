/* The CUDA backend's ops: the op dispatch onto kernels/cuda and cuBLASLt
 * (16-bit operands widened where a kernel has no 16-bit form), the
 * composite ops, fp8's casts and GEMMs, and what it runs (supports_op). */
#include "exec/cuda/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/fp8.h"
#include "exec/cuda/memory.h"
#include "exec/contract.h"
#include "kernels/cpu/nf4.h"
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
#include "kernels/cuda/nf4.h"
#include "plan/runnable.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/rope.h"

/* Kernel f's launcher for element type dt: f (fp32), f_bf16 or f_fp16 (the
 * operands are void pointers, so one argument list serves all three). */
#define BY_DT(dt, f, ...)                                                                   \
  ((dt) == PX_DTYPE_BF16 ? f##_bf16(__VA_ARGS__) : (dt) == PX_DTYPE_FP16 ? f##_fp16(__VA_ARGS__) \
                                                                          : f(__VA_ARGS__))

/* ---- operands ---- */

/* An operand's dtype, from its slot; the interpreter's synthetic ops (no
 * slot) work on gradients. */
static px_dtype operand_dtype(const px_exec_op *e, px_ref r) {
  const px_slot *s = px_exec_slot(e, r);
  return s ? (px_dtype)s->dtype : e->env->grad_dtype;
}

static uint64_t operand_elems(const px_exec_op *e, px_ref r) {
  const px_slot *s = px_exec_slot(e, r);
  return s ? s->elems : (uint64_t)e->count;
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
static px_status widen(px_cuda *c, const px_exec_op *e, px_exec_op *w, unsigned which, narrowing *nb, px_err *err) {
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
      px_status st = px_cuda_scratch(c, n * sizeof(float), &wide, err);
      if (!st) st = px_cuda_kc(px_kc_convert(wide, *slot, PX_DTYPE_FP32, dt, (int64_t)n, px_cuda_stream(c)), err);
      if (st) return st;
      from[nwide] = *slot, to[nwide++] = wide;
    }
    if (is_out) nb->orig[j] = *slot, nb->n[j] = n, nb->dt[j] = dt;
    *slot = wide;
  }
  return PX_OK;
}

static px_status narrow(px_cuda *c, const px_exec_op *w, const narrowing *nb, px_err *err) {
  px_status st = PX_OK;
  for (int j = 0; j < PX_OP_OUTS && !st; j++)
    if (nb->orig[j])
      st = px_cuda_kc(
          px_kc_convert(nb->orig[j], w->out[j], nb->dt[j], PX_DTYPE_FP32, (int64_t)nb->n[j], px_cuda_stream(c)), err);
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
static px_status embed_bwd_sorted(px_cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const int64_t *d = e->op->dim;
  int64_t n = d[0], vl = d[2], need = 3 * n + 1;
  if (c->pinned_read) cudaEventSynchronize(c->pinned_read); /* the last copy out of the staging buffer */
  if (c->npinned < need) {
    cudaFreeHost(c->pinned);
    c->pinned = NULL;
    c->npinned = 0;
    px_status st =
        px_cuda_check(cudaMallocHost((void **)&c->pinned, (size_t)need * sizeof *c->pinned), "cudaMallocHost", err);
    if (st) return st;
    c->npinned = need;
  }
  if (!c->pinned_read)
    if (px_cuda_check(cudaEventCreateWithFlags(&c->pinned_read, cudaEventDisableTiming), "cudaEventCreate", err))
      return PX_ERR_RUNTIME;
  int64_t nrows = px_kc_embed_sort(c->pinned, e->host_tokens, n, e->env->tp_rank * vl, vl);
  if (nrows < 0) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  int32_t *dev = NULL;
  px_status st = px_cuda_scratch(c, (uint64_t)need * sizeof *dev, (void **)&dev, err);
  if (!st)
    st = px_cuda_check(
        cudaMemcpyAsync(dev, c->pinned, (size_t)need * sizeof *dev, cudaMemcpyHostToDevice, px_cuda_stream(c)),
        "cudaMemcpyAsync", err);
  if (!st) st = px_cuda_check(cudaEventRecord(c->pinned_read, px_cuda_stream(c)), "cudaEventRecord", err);
  if (!st)
    st = px_cuda_kc(dt == PX_DTYPE_BF16
                        ? px_kc_embed_bwd_sorted_bf16(e->out[0], e->in[0], dev, nrows, n, d[1], px_cuda_stream(c))
                        : px_kc_embed_bwd_sorted_fp16(e->out[0], e->in[0], dev, nrows, n, d[1], px_cuda_stream(c)),
                    err);
  return st;
}

/* Vocabulary-parallel cross-entropy: per-row max, sum of exponentials and
 * target logit, each reduced over the vocabulary shards (the op's comm: over
 * TP), then the loss and log-probabilities (out[0], fp32). 16-bit logits are
 * widened into out[0] first. */
static px_status loss_fwd(px_cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const int64_t *d = e->op->dim;
  int64_t n = d[0], vl = d[1], vstart = e->env->tp_rank * vl;
  const float *logits = e->in[0];
  const int32_t *targets = e->in[1];
  px_status st = PX_OK;
  if (dt != PX_DTYPE_FP32) {
    st = px_cuda_kc(px_kc_convert(e->out[0], e->in[0], PX_DTYPE_FP32, dt, n * vl, px_cuda_stream(c)), err);
    logits = e->out[0];
  }
  float *mx = NULL;
  if (!st) st = px_cuda_scratch(c, (uint64_t)(3 * n) * sizeof(float), (void **)&mx, err);
  if (st) return st;
  float *sum = mx + n, *tl = mx + 2 * n;
  st = px_cuda_kc(px_kc_ce_max_local(mx, logits, n, vstart, vl, d[2], px_cuda_stream(c)), err);
  if (!st) st = px_exec_reduce(e, mx, (uint64_t)n, PX_RED_MAX, err);
  if (!st) st = px_cuda_kc(px_kc_ce_sumexp_local(sum, logits, mx, n, vstart, vl, d[2], px_cuda_stream(c)), err);
  if (!st) st = px_exec_reduce(e, sum, (uint64_t)n, PX_RED_SUM, err);
  if (!st) st = px_cuda_kc(px_kc_ce_target_local(tl, logits, targets, n, vstart, vl, px_cuda_stream(c)), err);
  if (!st) st = px_exec_reduce(e, tl, (uint64_t)n, PX_RED_SUM, err);
  if (!st) st = px_cuda_kc(px_kc_ce_loss(e->out[1], mx, sum, tl, targets, n, px_cuda_stream(c)), err);
  if (!st) st = px_cuda_kc(px_kc_ce_logprobs(e->out[0], logits, mx, sum, n, vl, px_cuda_stream(c)), err);
  return st;
}

/* From the log-probabilities (row max 0, row sum 1); with 16 bits the fp32
 * gradient is formed in place of the log-probabilities (their last use) and
 * rounded into out[0]. */
static px_status loss_bwd(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err) {
  px_cuda *c = be->impl;
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
    st = px_cuda_check(cudaMalloc((void **)&c->ones, (size_t)n * sizeof(float)), "cudaMalloc", err);
    if (!st)
      st = px_cuda_check(cudaMemcpy(c->ones, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy",
                         err);
    if (!st) c->nones = n;
    free(host);
  }
  float *zeros = NULL;
  if (!st) st = px_cuda_scratch(c, (uint64_t)n * sizeof(float), (void **)&zeros, err);
  if (!st)
    st = px_cuda_check(cudaMemsetAsync(zeros, 0, (size_t)n * sizeof(float), px_cuda_stream(c)), "cudaMemsetAsync", err);
  float *dlogits = dt != PX_DTYPE_FP32 ? e->in[0] : e->out[0];
  if (!st)
    st = px_cuda_kc(px_kc_ce_bwd(dlogits, e->in[0], zeros, c->ones, e->in[1], n, e->env->tp_rank * vl, vl, d[2],
                                 e->loss_scale, px_cuda_stream(c)),
                    err);
  if (!st && dt != PX_DTYPE_FP32)
    st = px_cuda_kc(px_kc_convert(e->out[0], dlogits, dt, PX_DTYPE_FP32, n * vl, px_cuda_stream(c)), err);
  return st;
}

/* Fused attention, every batch row in one launch (a row at a time with
 * dropout: each row has its offset), in the plan's dtype (fp32, bf16 or fp16),
 * within the layer's sliding window where it has one. */
static px_status flash(px_cuda *c, const px_exec_op *e, px_dtype dt, bool bwd, px_err *err) {
  const int64_t *d = e->op->dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4];
  uint64_t el = px_dtype_bytes(dt), nq = (uint64_t)(S * HQ * D) * el, nkv = (uint64_t)(S * HKV * D) * el;
  float p = (float)e->env->dropout;
  uint64_t seed = px_exec_dropout_seed(e, PX_DROPOUT_SITE_ATTN);
  char *const *out = (char *const *)e->out;
  const char *const *in = (const char *const *)e->in;
  /* batch rows a launch: all (the grid's z takes 65535), one with dropout */
  int64_t W = px_exec_window(e), most = p > 0.0f ? 1 : 65535;
  px_status st = PX_OK;
  for (int64_t b = 0, rows; b < B && !st; b += rows) {
    rows = B - b < most ? B - b : most;
    uint64_t off = px_exec_head_dropout_offset(e, b, 0, S), bq = (uint64_t)b * nq, bkv = (uint64_t)b * nkv;
    if (!bwd)
      st = px_cuda_kc(px_kc_flash_fwd(out[0] + bq, (float *)e->out[1] + b * HQ * S, in[0] + bq, in[1] + bkv,
                                      in[2] + bkv, dt, rows, S, HQ, HKV, D, W, p, seed, off, px_cuda_stream(c)),
                      err);
    else
      st = px_cuda_kc(px_kc_flash_bwd(out[0] + bq, out[1] + bkv, out[2] + bkv, in[0] + bq, in[1] + bq, in[2] + bkv,
                                      in[3] + bkv, in[4] + bq, (const float *)e->in[5] + b * HQ * S, dt, rows, S, HQ,
                                      HKV, D, W, p, seed, off, px_cuda_stream(c)),
                      err);
  }
  if (st || !(bwd ? e->out[3] : e->in[3])) return st;
  /* attention sinks (in[3], their gradient out[3]): folded into every row's lse and ctx after the forward; their
   * gradient from each row's share (the backward's dq, dk and dv need nothing more than the folded lse and ctx) */
  if (!bwd)
    return px_cuda_kc(px_kc_flash_sink_fold(out[0], e->out[1], in[3], dt, B, S, HQ, D, px_cuda_stream(c)), err);
  float *terms; /* (B, Hq, S) */
  st = px_cuda_scratch(c, (uint64_t)(B * HQ * S) * sizeof(float), (void **)&terms, err);
  if (!st)
    st = px_cuda_kc(px_kc_flash_sink_rows(terms, in[0], in[1], in[2], in[4], e->in[5], dt, B, S, HQ, HKV, D, W,
                                          px_cuda_stream(c)),
                    err);
  if (!st) st = px_cuda_kc(px_kc_sink_grad(out[3], terms, dt, B, HQ, S, px_cuda_stream(c)), err);
  return st;
}

/* Bias of a row-parallel layer, then dropout row by row (masks of global indices). */
static px_status dropout_fwd(px_cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const int64_t *d = e->op->dim;
  px_dropout_geom g = px_exec_dropout_geom(e);
  uint64_t el = px_dtype_bytes(dt), n = (uint64_t)(g.rows * g.row_elems);
  char *y = e->out[0];
  uint8_t *mask = e->out[1];
  px_status st = y == e->in[0]
                     ? PX_OK
                     : px_cuda_check(cudaMemcpyAsync(y, e->in[0], n * el, cudaMemcpyDeviceToDevice, px_cuda_stream(c)),
                                     "cudaMemcpyAsync", err);
  if (!st && e->in[1])
    st = px_cuda_kc(BY_DT(dt, px_kc_add_bias, (void *)y, e->in[1], (int64_t)n / d[2], d[2], px_cuda_stream(c)), err);
  for (int64_t b = 0; b < g.rows && !st; b++) {
    uint64_t off = (uint64_t)(b * g.row_elems), first = px_exec_dropout_row(e, &g, b);
    void *yb = y + off * el;
    st = px_cuda_kc(
        BY_DT(dt, px_kc_dropout_fwd, yb, mask + off, yb, g.row_elems, g.p, g.seed, first, px_cuda_stream(c)), err);
  }
  return st;
}

/* RoPE backward in place: the inverse rotation of a copy, accumulated into the zeroed buffer. */
static px_status rope_bwd(px_cuda *c, void *x, int64_t B, int64_t S, int64_t H, int64_t D, const px_rope *r,
                          px_dtype dt, px_err *err) {
  uint64_t bytes = (uint64_t)(B * S * H * D) * px_dtype_bytes(dt);
  void *tmp;
  px_status st = px_cuda_scratch(c, bytes, &tmp, err);
  if (!st)
    st = px_cuda_check(cudaMemcpyAsync(tmp, x, bytes, cudaMemcpyDeviceToDevice, px_cuda_stream(c)), "cudaMemcpyAsync",
                       err);
  if (!st) st = px_cuda_check(cudaMemsetAsync(x, 0, bytes, px_cuda_stream(c)), "cudaMemsetAsync", err);
  if (!st)
    st = px_cuda_kc(BY_DT(dt, px_kc_rope_bwd, x, tmp, B, S, H, D, 0, r, px_cuda_stream(c)), err);
  return st;
}

/* Sum of squares of a gradient range into the host double. */
static px_status grad_norm(px_cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  px_status st = px_cuda_kc(dt == PX_DTYPE_BF16   ? px_kc_sumsq_bf16(c->dsum, e->in[0], e->count, px_cuda_stream(c))
                    : dt == PX_DTYPE_FP16 ? px_kc_sumsq_fp16(c->dsum, e->in[0], e->count, px_cuda_stream(c))
                                          : px_kc_sumsq(c->dsum, e->in[0], e->count, px_cuda_stream(c)),
                    err);
  double v = 0;
  if (!st) st = px_cuda_wait(c, false, err);
  if (!st) st = px_cuda_check(cudaMemcpy(&v, c->dsum, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy", err);
  if (!st) *e->sumsq_out += v;
  return st;
}

static px_status adamw(px_cuda *c, const px_exec_op *e, px_err *err) {
  if (e->out[3]) /* mixed precision: fp32 master, 16-bit gradient and model copy */
    return px_cuda_kc(
        px_kc_adamw_mixed(e->out[0], e->out[1], e->out[2], e->in[0], e->out[3], e->env->grad_dtype, e->count, e->lr,
                          e->beta1, e->beta2, e->eps, e->weight_decay, e->grad_scale, e->adam_t, px_cuda_stream(c)),
        err);
  px_status st = PX_OK;
  if (e->grad_scale != 1.0f) st = px_cuda_kc(px_kc_scale(e->in[0], e->count, e->grad_scale, px_cuda_stream(c)), err);
  if (!st)
    st = px_cuda_kc(px_kc_adamw(e->out[0], e->out[1], e->out[2], e->in[0], e->count, e->lr, e->beta1, e->beta2, e->eps,
                        e->weight_decay, e->adam_t, px_cuda_stream(c)),
            err);
  return st;
}

/* The unfused attention's ops, fp32. */
static px_status unfused_attention(px_cuda *c, const px_exec_op *e, px_err *err) {
  cudaStream_t s = px_cuda_stream(c);
  const int64_t *d = e->op->dim;
  void *const *out = e->out, *const *in = e->in;
  float sc = 1.0f / sqrtf((float)d[4]);
  switch ((px_op_kind)e->op->kind) {
    case PX_OP_ATTN_SCORES:
      return px_cuda_kc(px_kc_attn_scores_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4], sc, s), err);
    case PX_OP_ATTN_SCORES_BWD:
      return px_cuda_kc(px_kc_attn_scores_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4], sc, s),
                        err);
    case PX_OP_SOFTMAX: /* in[1]: sink logits of the d[2] heads, or NULL */
      return px_cuda_kc(px_kc_attn_softmax_sink_fwd(out[0], in[0], in[1], d[0], d[2], d[1], px_exec_window(e), s), err);
    case PX_OP_SOFTMAX_BWD: { /* out[1]: the sinks' gradient, or NULL */
      float *terms = NULL; /* (B, Hq, S) */
      px_status st = out[1] ? px_cuda_scratch(c, (uint64_t)(d[0] * d[1]) * sizeof(float), (void **)&terms, err) : PX_OK;
      if (!st)
        st = px_cuda_kc(px_kc_attn_softmax_sink_bwd(out[0], terms, in[0], in[1], d[0], d[1], px_exec_window(e), s),
                        err);
      if (!st && out[1])
        st = px_cuda_kc(px_kc_sink_grad(out[1], terms, PX_DTYPE_FP32, d[0] / d[2], d[2], d[1], s), err);
      return st;
    }
    case PX_OP_ATTN_CONTEXT:
      return px_cuda_kc(px_kc_attn_context_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4], s), err);
    default:
      return px_cuda_kc(px_kc_attn_context_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4], s),
                        err);
  }
}

/* An adapter's B GEMM (PX_OPF_LORA_SCALE), times s = alpha / r, over the
 * outputs' sections (B's rows), as the cpu backend's lora_gemm: y_i += s h B_i^T;
 * dh = s sum_i dy_i B_i (added to dh with PX_OPF_ACCUMULATE); dB_i += s dy_i^T h.
 * d: m, n, r, then the sections' widths. */
static px_status lora_gemm(px_cuda *c, const px_exec_op *e, px_dtype dt, px_err *err) {
  const px_op *o = e->op;
  const int64_t *d = o->dim;
  void *const *out = e->out, *const *in = e->in;
  float sc = (float)e->env->lora_scale;
  uint64_t el = px_dtype_bytes(dt);
  px_status st = PX_OK;
  int64_t off = 0;
  for (int i = 0; i < 3 && d[3 + i] > 0 && !st; i++) {
    uint64_t bo = (uint64_t)(off * d[2]) * el; /* section i of B (n, r), or of dB */
    switch ((px_op_kind)o->kind) {
      case PX_OP_LINEAR:
        st = px_kc_gemm(c->lt, out[i], in[0], (const char *)in[1] + bo, d[0], d[3 + i], d[2], false, true, sc, 1.0f,
                        dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, px_cuda_stream(c));
        break;
      case PX_OP_LINEAR_BWD_DATA: /* in[3]: B */
        st = px_kc_gemm(c->lt, out[0], in[i], (const char *)in[3] + bo, d[0], d[2], d[3 + i], false, false, sc,
                        i > 0 || (o->flags & PX_OPF_ACCUMULATE) ? 1.0f : 0.0f, dt, c->workspace,
                        PX_CUDA_WORKSPACE_BYTES, px_cuda_stream(c));
        break;
      default:
        st = px_kc_gemm(c->lt, (char *)out[0] + bo, in[i], in[3], d[3 + i], d[2], d[0], true, false, sc, 1.0f, dt,
                        c->workspace, PX_CUDA_WORKSPACE_BYTES, px_cuda_stream(c));
        break;
    }
    st = px_cuda_kc(st, err);
    off += d[3 + i];
  }
  return st;
}

/* ---- the op dispatch ---- */

/* dt: the op's activation dtype (fp32 on widened copies). */
static px_status op_dispatch(px_backend *be, const px_exec_op *e, px_dtype dt, px_err *err) {
  px_cuda *c = be->impl;
  cudaStream_t s = px_cuda_stream(c);
  const px_op *o = e->op;
  const px_env *v = e->env;
  const int64_t *d = o->dim;
  void *const *out = e->out, *const *in = e->in;
  bool half = dt != PX_DTYPE_FP32, ln = px_contract_layernorm(o); /* a norm's kind: per-head q/k norms are RMSNorms */
  uint64_t el = px_dtype_bytes(dt);
  float eps = (float)v->norm_eps;
  const px_rope *rope = &v->rope;
  int64_t vstart = v->tp_rank * d[2];
  if (px_op_family_of((px_op_kind)o->kind) == PX_FAM_ATTENTION) /* Megatron's unfused attention ops */
    return half ? widened(be, e, err) : unfused_attention(c, e, err);
  switch ((px_op_kind)o->kind) {
    case PX_OP_EMBED:
      return px_cuda_kc(BY_DT(dt, px_kc_embed_fwd, out[0], in[0], in[1], d[0], vstart, d[2], d[1], s), err);
    case PX_OP_EMBED_BWD:
      if (!out[0]) return PX_OK; /* a frozen table (fine-tuning): the gradient is dropped */
      if (half && e->host_tokens) return embed_bwd_sorted(c, e, dt, err);
      if (half) return widened(be, e, err);
      return px_cuda_kc(px_kc_embed_bwd(out[0], in[0], in[1], d[0], vstart, d[2], d[1], s), err);
    case PX_OP_POS: {
      int64_t pos0 = v->sp ? v->tp_rank * d[1] : 0;
      return px_cuda_kc(BY_DT(dt, px_kc_pos_fwd, out[0], in[1], d[0], d[1], d[2], pos0, s), err);
    }
    case PX_OP_POS_BWD: {
      int64_t pos0 = v->sp ? v->tp_rank * d[1] : 0;
      return px_cuda_kc(BY_DT(dt, px_kc_pos_bwd, out[0], in[0], d[0], d[1], d[2], pos0, s), err);
    }
    case PX_OP_NORM:
      if (ln)
        return px_cuda_kc(
            BY_DT(dt, px_kc_layernorm_fwd, out[0], out[2], out[1], in[0], in[1], in[2], d[0], d[1], eps, s), err);
      return px_cuda_kc(BY_DT(dt, px_kc_rmsnorm_fwd, out[0], out[1], in[0], in[1], d[0], d[1], eps, s), err);
    case PX_OP_NORM_BWD: {
      if (!half) {
        if (ln)
          return px_cuda_kc(
              px_kc_layernorm_bwd(out[0], out[1], out[2], in[0], in[1], in[4], in[3], in[2], d[0], d[1], s), err);
        return px_cuda_kc(px_kc_rmsnorm_bwd(out[0], out[1], in[0], in[1], in[4], in[2], d[0], d[1], s), err);
      }
      /* the 16-bit kernels accumulate weight gradients in fp32: widen those */
      px_exec_op w;
      narrowing nb;
      px_status st = widen(c, e, &w, OUT_BIT(1) | OUT_BIT(2), &nb, err);
      if (!st && ln)
        st = px_cuda_kc(BY_DT(dt, px_kc_layernorm_bwd, w.out[0], w.out[1], w.out[2], in[0], in[1], in[4], in[3], in[2],
                              d[0], d[1], s),
                        err);
      else if (!st)
        st = px_cuda_kc(BY_DT(dt, px_kc_rmsnorm_bwd, w.out[0], w.out[1], in[0], in[1], in[4], in[2], d[0], d[1], s),
                        err);
      if (!st) st = narrow(c, &w, &nb, err);
      return st;
    }
    case PX_OP_LINEAR: {
      if (o->flags & PX_OPF_LORA_SCALE) return lora_gemm(c, e, dt, err);
      if (o->flags & PX_OPF_GELU) /* act = gelu(x W^T + b) and the pre-activation, in one GEMM */
        return px_cuda_kc(px_kc_gemm_epi(c->lt, out[0], in[0], in[1], in[2], out[3], PX_KC_EPI_GELU, d[0], d[3], d[2],
                                         false, true, 1.0f, 0.0f, dt, dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                          err);
      px_status st = PX_OK;
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0 && !st; i++) {
        const char *w = (const char *)in[1] + (uint64_t)(off * d[2]) * el;
        const char *bias = in[2] ? (const char *)in[2] + (uint64_t)off * el : NULL;
        if (out[i]) /* a section without an output is not made (px_op_linear_cols) */
          st = px_cuda_kc(px_kc_linear_fwd(c->lt, out[i], in[0], w, bias, d[0], d[2], d[3 + i], dt, c->workspace,
                                           PX_CUDA_WORKSPACE_BYTES, s),
                          err);
        off += d[3 + i];
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT: {
      bool data = o->kind == PX_OP_LINEAR_BWD_DATA;
      if (o->flags & PX_OPF_LORA_SCALE) return lora_gemm(c, e, dt, err);
      if (data && (o->flags & PX_OPF_DGELU)) /* the pre-activation's gradient: (dy W) gelu'(pre) */
        return px_cuda_kc(px_kc_gemm_epi(c->lt, out[0], in[0], in[3], NULL, in[4], PX_KC_EPI_DGELU, d[0], d[2], d[3],
                                         false, false, 1.0f, 0.0f, dt, dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                          err);
      px_status st = PX_OK;
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0 && !st; i++) {
        uint64_t wo = (uint64_t)(off * d[2]) * el, bo = (uint64_t)off * el;
        if (data)
          st = px_cuda_kc(px_kc_linear_bwd(c->lt, out[0], NULL, NULL, in[i], NULL, (const char *)in[3] + wo, d[0], d[2],
                                   d[3 + i], dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                  err);
        else
          st = px_cuda_kc(px_kc_linear_bwd(c->lt, NULL, (char *)out[0] + wo, out[1] ? (char *)out[1] + bo : NULL, in[i],
                                   in[3], NULL, d[0], d[2], d[3 + i], dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                  err);
        off += d[3 + i];
      }
      return st;
    }
    case PX_OP_ROPE: {
      px_status st = px_cuda_kc(BY_DT(dt, px_kc_rope_fwd, out[0], in[0], d[0], d[1], d[2], d[4], 0, rope, s), err);
      if (!st) st = px_cuda_kc(BY_DT(dt, px_kc_rope_fwd, out[1], in[1], d[0], d[1], d[3], d[4], 0, rope, s), err);
      return st;
    }
    case PX_OP_ROPE_BWD: {
      px_status st = rope_bwd(c, out[0], d[0], d[1], d[2], d[4], rope, dt, err);
      if (!st) st = rope_bwd(c, out[1], d[0], d[1], d[3], d[4], rope, dt, err);
      return st;
    }
    case PX_OP_FLASH_ATTN: return flash(c, e, dt, false, err);
    case PX_OP_FLASH_ATTN_BWD: return flash(c, e, dt, true, err);
    case PX_OP_DROPOUT: return dropout_fwd(c, e, dt, err);
    case PX_OP_DROPOUT_BWD: {
      float p = (float)v->dropout;
      return px_cuda_kc(BY_DT(dt, px_kc_dropout_bwd, out[0], in[0], in[1], d[0], p, s), err);
    }
    case PX_OP_ADD: {
      px_status st = px_cuda_kc(BY_DT(dt, px_kc_add, out[0], in[0], in[1], d[0], s), err);
      if (!st && in[2]) st = px_cuda_kc(BY_DT(dt, px_kc_add_bias, out[0], in[2], d[0] / d[1], d[1], s), err);
      return st;
    }
    case PX_OP_ACC: return px_cuda_kc(BY_DT(dt, px_kc_acc, out[0], in[0], d[0], s), err);
    case PX_OP_GELU: return px_cuda_kc(BY_DT(dt, px_kc_gelu_fwd, out[0], in[0], d[0], s), err);
    case PX_OP_GELU_BWD:
      return px_cuda_kc(BY_DT(dt, px_kc_gelu_bwd, out[0], in[0], in[1], d[0], s), err);
    case PX_OP_SWIGLU:
      return px_cuda_kc(BY_DT(dt, px_kc_swiglu_fwd, out[0], in[0], in[1], d[0], s), err);
    case PX_OP_SWIGLU_BWD:
      return px_cuda_kc(BY_DT(dt, px_kc_swiglu_bwd, out[0], out[1], in[0], in[1], in[2], d[0], s), err);
    case PX_OP_LOSS: return loss_fwd(c, e, dt, err);
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

/* The largest |x| of n elements of dtype dt, on the host (waits for the
 * stream); a cast's (shared by the ranks that may exchange its codes: TE's
 * amax reduction, the op's comm, as on the cpu backend) when `shared`. */
static px_status fp8_amax(px_backend *be, const px_exec_op *e, bool shared, const void *x, px_dtype dt, int64_t n,
                          float *amax, px_err *err) {
  px_cuda *c = be->impl;
  float *dev = NULL;
  px_status st = px_cuda_scratch(c, sizeof *dev, (void **)&dev, err);
  if (!st) st = px_cuda_kc(px_kc_fp8_amax(dev, x, dt, n, px_cuda_stream(c)), err);
  if (!st && shared) st = px_exec_reduce(e, dev, 1, PX_RED_MAX, err);
  if (!st) st = be->download(be, amax, dev, sizeof *amax, err);
  return st;
}

/* A CAST: in[0] (fp32 or bf16) into out[0]'s codes, E5M2 with PX_OPF_E5M2, else E4M3. Without an output
 * (the weights' cached copies) nothing: the GEMMs quantize weights at use, as on the cpu backend. */
static px_status fp8_cast(px_backend *be, const px_exec_op *e, px_err *err) {
  px_cuda *c = be->impl;
  const px_op *o = e->op;
  if (!e->out[0]) return PX_OK;
  px_dtype dt = operand_dtype(e, o->in[0]);
  int64_t n = o->dim[0];
  px_fp8_format f = (o->flags & PX_OPF_E5M2) ? PX_FP8_E5M2 : PX_FP8_E4M3;
  float amax = 0.0f, scale = 1.0f;
  px_status st = fp8_amax(be, e, true, e->in[0], dt, n, &amax, err);
  if (!st) st = px_cpu_fp8_cast_scale(c->f8, e, amax, f, &scale, err);
  if (!st)
    st = px_cuda_kc(px_kc_fp8_quantize(e->out[0], e->in[0], dt, n, scale, f == PX_FP8_E5M2, px_cuda_stream(c)), err);
  if (!st) st = px_cpu_fp8_note(c->f8, e->out[0], (uint64_t)n, f, scale, err);
  return st;
}

/* The scale and format of fp8 input j (codes a cast or a collective wrote). */
static px_status fp8_input(px_cuda *c, const px_exec_op *e, int j, float *scale, bool *e5m2, px_err *err) {
  px_fp8_format f;
  if (!px_cpu_fp8_scale_of(c->f8, e->in[j], scale, &f))
    return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s reads fp8 %s, which no cast or collective wrote with "
                      "its scale", px_op_names[e->op->kind], px_exec_slot(e, e->op->in[j])->name);
  *e5m2 = f == PX_FP8_E5M2;
  return PX_OK;
}

/* The GEMM's weight in[j] ((rows, k), the parameters' dtype) as E4M3 codes, and its scale: into the row-wise copy
 * the plan holds for it (e->wcopy), else scratch. */
static px_status fp8_weight(px_backend *be, const px_exec_op *e, int j, int64_t rows, int64_t k, uint8_t **q,
                            float *scale, px_err *err) {
  px_cuda *c = be->impl;
  px_dtype dt = operand_dtype(e, e->op->in[j]);
  float amax = 0.0f;
  px_status st = fp8_amax(be, e, false, e->in[j], dt, rows * k, &amax, err);
  if (!st) st = px_cpu_fp8_weight_scale(c->f8, e, e->op->in[j].slot, amax, scale, err);
  bool held = e->wcopy && (uint64_t)(rows * k) <= e->wcopy_bytes;
  if (held) *q = e->wcopy;
  else if (!st) st = px_cuda_scratch(c, (uint64_t)(rows * k), (void **)q, err);
  if (!st) st = px_cuda_kc(px_kc_fp8_quantize(*q, e->in[j], dt, rows * k, *scale, false, px_cuda_stream(c)), err);
  return st;
}

/* The dequantization factors 1 / sa and 1 / sb on the device (cuBLASLt's scale
 * pointers), 16 bytes apart: fp8 GEMMs refuse factors less aligned. */
static px_status fp8_factors(px_backend *be, float sa, float sb, float **fa, float **fb, px_err *err) {
  float h[8] = {1.0f / sa, 0.0f, 0.0f, 0.0f, 1.0f / sb}; /* (2, 4): a factor and its padding each */
  px_status st = px_cuda_scratch(be->impl, sizeof h, (void **)fa, err);
  if (!st) st = be->upload(be, *fa, h, sizeof h, err);
  if (!st) *fb = *fa + 4;
  return st;
}

/* (rows, cols) codes transposed into `into`, or scratch when NULL. */
static px_status fp8_transposed(px_cuda *c, const void *q, int64_t rows, int64_t cols, uint8_t *into, uint8_t **out,
                                px_err *err) {
  px_status st = into ? PX_OK : px_cuda_scratch(c, (uint64_t)(rows * cols), (void **)out, err);
  if (into) *out = into;
  if (!st) st = px_cuda_kc(px_kc_fp8_transpose(*out, q, rows, cols, px_cuda_stream(c)), err);
  return st;
}

/* The linear layer's fp8 GEMMs (the sections of a fused QKV or gate/up
 * weight one by one, dims as in op_dispatch): forward out_i = x W_i^T (+ b),
 * data gradient dx += dy_i W_i, weight gradient dW_i += dy_i^T x (+ db: the
 * column sums of dy_i's values). */
static px_status fp8_gemm(px_backend *be, const px_exec_op *e, px_err *err) {
  px_cuda *c = be->impl;
  cudaStream_t s = px_cuda_stream(c);
  const px_op *o = e->op;
  const int64_t *d = o->dim;
  int64_t N = d[0], K = d[2];
  px_status st = PX_OK;
  float sw = 1.0f, sx = 1.0f, *f = NULL, *g = NULL; /* the factors of A and B */
  bool xe5 = false;
  uint8_t *qw = NULL;
  switch ((px_op_kind)o->kind) {
    case PX_OP_LINEAR: {
      px_dtype dt = operand_dtype(e, o->out[o->out[0].slot >= 0 ? 0 : o->out[1].slot >= 0 ? 1 : 2]); /* a made one's */
      uint64_t el = px_dtype_bytes(dt);
      if ((st = fp8_input(c, e, 0, &sx, &xe5, err)) || (st = fp8_weight(be, e, 1, d[1], K, &qw, &sw, err)) ||
          (st = fp8_factors(be, sx, sw, &f, &g, err)))
        return st;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        if (!e->out[i]) continue; /* a section without an output is not made (px_op_linear_cols) */
        st = px_cuda_kc(px_kc_gemm_fp8(c->lt, e->out[i], e->in[0], qw + off * K, f, g, N, d[3 + i], K, xe5, false,
                                       false, 1.0f, 0.0f, dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                        err);
        if (!st && e->in[2]) /* the bias after the product (cuBLASLt's fp8 bias epilogue wants a bf16 bias) */
          st = px_cuda_kc(BY_DT(dt, px_kc_add_bias, e->out[i],
                                (const void *)((const char *)e->in[2] + (uint64_t)off * el), N, d[3 + i], s),
                          err);
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_DATA: {
      px_dtype dt = operand_dtype(e, o->out[0]);
      if ((st = fp8_weight(be, e, 3, d[1], K, &qw, &sw, err))) return st;
      /* W^T into the transposed copy the plan holds (a section's (K, n_i) at the section's offset) */
      uint8_t *wtq = qw == e->wcopy && e->wcopies > 1 ? e->wcopy + e->wcopy_bytes : NULL;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        float sy = 1.0f;
        bool ye5 = false;
        uint8_t *wt = NULL; /* W_i^T: (K, n_i) */
        if ((st = fp8_input(c, e, (int)i, &sy, &ye5, err)) || (st = fp8_factors(be, sy, sw, &f, &g, err)) ||
            (st = fp8_transposed(c, qw + off * K, d[3 + i], K, wtq ? wtq + off * K : NULL, &wt, err)))
          return st;
        st = px_cuda_kc(px_kc_gemm_fp8(c->lt, e->out[0], e->in[i], wt, f, g, N, K, d[3 + i], ye5, false, false, 1.0f,
                                       1.0f, dt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                        err);
      }
      return st;
    }
    case PX_OP_LINEAR_BWD_WEIGHT: {
      px_dtype gt = operand_dtype(e, o->out[0]);
      uint64_t gel = px_dtype_bytes(gt);
      uint8_t *xt = NULL; /* x^T: (K, N) */
      if ((st = fp8_input(c, e, 3, &sx, &xe5, err)) || (st = fp8_transposed(c, e->in[3], N, K, NULL, &xt, err))) return st;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0 && !st; off += d[3 + i], i++) {
        float sy = 1.0f;
        bool ye5 = false;
        uint8_t *dyt = NULL; /* dy_i^T: (n_i, N) */
        if ((st = fp8_input(c, e, (int)i, &sy, &ye5, err)) || (st = fp8_factors(be, sy, sx, &f, &g, err)) ||
            (st = fp8_transposed(c, e->in[i], N, d[3 + i], NULL, &dyt, err)))
          return st;
        /* dw_i (n_i, K) += dy_i^T x; cuBLASLt's fp8 kernels write 16-byte aligned C only, and a weight after a
         * parameter of a few elements (the sinks' Hq logits) is not: its product goes through scratch then */
        char *dw = (char *)e->out[0] + (uint64_t)(off * K) * gel;
        void *cw = dw;
        bool staged = (uintptr_t)dw % 16 != 0;
        if (staged) st = px_cuda_scratch(c, (uint64_t)(d[3 + i] * K) * gel, &cw, err);
        if (!st)
          st = px_cuda_kc(px_kc_gemm_fp8(c->lt, cw, dyt, xt, f, g, d[3 + i], K, N, ye5, xe5, false, 1.0f,
                                         staged ? 0.0f : 1.0f, gt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                          err);
        if (!st && staged) st = px_cuda_kc(BY_DT(gt, px_kc_acc, (void *)dw, cw, d[3 + i] * K, s), err);
        if (!st && e->out[1]) { /* db_i += column sums of dy_i's values */
          px_dtype bt = operand_dtype(e, o->out[1]);
          void *dy = NULL;
          st = px_cuda_scratch(c, (uint64_t)(N * d[3 + i]) * px_dtype_bytes(bt), &dy, err);
          if (!st) st = px_cuda_kc(px_kc_fp8_dequantize(dy, e->in[i], bt, N * d[3 + i], sy, ye5, s), err);
          if (!st)
            st = px_cuda_kc(
                px_kc_linear_bwd(c->lt, NULL, NULL, (char *)e->out[1] + (uint64_t)off * px_dtype_bytes(bt), dy, NULL,
                                 NULL, N, K, d[3 + i], bt, c->workspace, PX_CUDA_WORKSPACE_BYTES, s),
                err);
        }
      }
      return st;
    }
    default:
      return px_err_set(err, PX_ERR_RUNTIME, "cuda backend: %s has no fp8 kernel", px_op_names[o->kind]);
  }
}

/* A frozen weight from its base_precision storage into the op's dtype (PX_OPF_DEQUANT), as the cpu backend's
 * px_param_frozen_decode and bit for bit (kernels/cuda/nf4.h, fp8.h): bitsandbytes' dequantize_4bit before each
 * GEMM that reads it. */
static px_status dequant(px_cuda *c, const px_exec_op *e, px_err *err) {
  px_dtype dt = operand_dtype(e, e->op->out[0]);
  int64_t n = e->op->dim[0];
  if (e->env->base_precision == PX_BASE_FP8)
    return px_cuda_kc(px_kc_fp8_unpack(e->out[0], e->in[0], dt, n, px_cuda_stream(c)), err);
  if (!c->nf4_filled) {
    memcpy(c->nf4.values, px_nf4_values, sizeof c->nf4.values);
    px_k_nf4_dynamic_map(c->nf4.map);
    c->nf4_filled = true;
  }
  return px_cuda_kc(px_kc_nf4_unpack(e->out[0], e->in[0], dt, n, &c->nf4, px_cuda_stream(c)), err);
}

px_status px_cuda_op(px_backend *be, const px_exec_op *e, px_err *err) {
  px_cuda *c = be->impl;
  px_cuda_scratch_reset(c);
  if (e->op->kind == PX_OP_CAST && (e->op->flags & PX_OPF_DEQUANT)) return dequant(c, e, err);
  if (e->op->kind == PX_OP_CAST) return fp8_cast(be, e, err);
  if (e->op->flags & PX_OPF_FP8) return fp8_gemm(be, e, err);
  return op_dispatch(be, e, e->env->act_dtype, err);
}

/* ---- what it runs ---- */

/* What the fp8 path (fp8_cast, fp8_gemm, the all-gather of codes) runs: on
 * a GPU with fp8 tensor cores (compute capability 8.9: Ada, Hopper,
 * Blackwell; an A100 is 8.0), per-tensor scales (current or delayed), the
 * linear layers' GEMMs (no fused GELU epilogue) with every dimension a
 * multiple of 16 (cuBLASLt's fp8 kernels), casts of fp32 or bf16 tensors,
 * and the SP all-gather of codes under the cpu backend's own limits. */
static px_support fp8_supports(const px_cuda *c, const px_exec_op *e, char *why, size_t cap) {
  const px_op *op = e->op;
  const int64_t *d = op->dim;
  if (c->cc < 89)
    return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                              "precision fp8 needs fp8 tensor cores (compute capability 8.9 or later: Ada, Hopper, "
                              "Blackwell); GPU %d (%s) is %d.%d (hint: `precision` bf16)",
                              c->device, c->gpu, c->cc / 10, c->cc % 10);
  if (e->env->block_format)
    return px_contract_refuse(
        why, cap, PX_SUPPORT_NO,
        "precision %s: its block-scaled GEMMs need cuBLASLt's block-scaling modes (CUDA 12.8+, compute "
        "capability 10.0: CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 for MXFP8, VEC16_UE4M3 for NVFP4), which the cuda "
        "backend does not drive (hint: `backend` cpu emulates it, or `precision` fp8)",
        px_precision_names[e->env->block_format]);
  if (e->env->fp8_blockwise)
    return px_contract_refuse(
        why, cap, PX_SUPPORT_NO,
        "fp8 blockwise scales (1x128 tiles, 128x128 weight blocks) are emulated by `backend` cpu only: "
        "the cuda backend does not drive cuBLASLt's block-scaling modes (CUDA 12.9+, "
        "CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F / BLK128x128_32F) yet (hint: `fp8_recipe` delayed or "
        "current)");
  switch ((px_op_kind)op->kind) {
    case PX_OP_CAST: {
      const px_slot *x = px_exec_slot(e, op->in[0]);
      px_dtype in = x ? (px_dtype)x->dtype : e->env->weight_dtype;
      if (in != PX_DTYPE_FP32 && in != PX_DTYPE_BF16)
        return px_contract_refuse(why, cap, PX_SUPPORT_NO, "no fp8 cast of %s tensors (fp32 and bf16)",
                                  px_dtype_names[in]);
      return PX_SUPPORT_YES;
    }
    case PX_OP_ALLGATHER:
      if ((op->flags & PX_OPF_SEQ_AXIS) && d[2] > 1) /* no codes_permuted: the scales do not follow the permute */
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "an fp8 sequence-parallel all-gather with `mbs` > 1 goes through a permute that the "
                                  "cuda backend's fp8 scales do not follow (hint: `mbs` 1)");
      return px_cpu_fp8_supports(e, why, cap) ? PX_SUPPORT_YES : PX_SUPPORT_NO; /* the same scales' rules */
    case PX_OP_LINEAR:
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT:
      if (op->flags & (PX_OPF_GELU | PX_OPF_DGELU))
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "a fused GELU epilogue on an fp8 GEMM (cuBLASLt's fp8 epilogues are not wired; hint: "
                                  "`gelu` unfused)");
      for (int i = 0; i < 6; i++)
        if (i != 1 && d[i] > 0 && d[i] % 16)
          return px_contract_refuse(
              why, cap, PX_SUPPORT_NO,
              "fp8 GEMM of %lld tokens, %lld inputs and outputs of %lld/%lld/%lld: cuBLASLt's fp8 "
              "kernels need every dimension a multiple of 16 (hint: `precision` bf16, or a batch and "
              "model whose sizes are)",
              (long long)d[0], (long long)d[2], (long long)d[3], (long long)d[4], (long long)d[5]);
      return PX_SUPPORT_YES;
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
      return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                "no mixture-of-experts kernels (hint: `backend` cpu runs ep 1)");
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD: /* fp8_attention */
      return px_contract_refuse(why, cap, PX_SUPPORT_NO, "%s", PX_RUNNABLE_CUDA_FP8_ATTENTION);
    default:
      return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                "an fp8 operand of an op the cuda backend's fp8 path does not read (it runs casts, the "
                                "linear layers' GEMMs and the SP all-gather of codes)");
  }
}

/* What the cpu backend runs of the attention variants and these kernels do not (plan/runnable.c refuses their
 * plans first, by name): an op's extra operands say which; NULL when none. */
static const char *variant_refused(const px_env *env, const px_op *op) {
  const char *dv = "values of another head dim than the queries' and keys' (latent attention): the CUDA flash "
                   "kernels take one head dim";
  switch ((px_op_kind)op->kind) {
    case PX_OP_FLASH_ATTN: return env->slots[op->in[2].slot].shape[3] != op->dim[4] ? dv : NULL;
    case PX_OP_FLASH_ATTN_BWD: return env->slots[op->in[3].slot].shape[3] != op->dim[4] ? dv : NULL;
    case PX_OP_ROPE:
    case PX_OP_ROPE_BWD:
      return (op->kind == PX_OP_ROPE ? op->in[2] : op->out[2]).slot >= 0
                 ? "multi-head latent attention's RoPE key: the CUDA RoPE kernel does not build the keys from it yet"
                 : NULL;
    case PX_OP_LOSS:
    case PX_OP_LOSS_BWD:
      return op->dim[3] > 0 ? "the MTP module's loss against the targets shifted once more: the CUDA loss kernels "
                              "read each position's own target"
                            : NULL;
    default: return NULL;
  }
}

/* What op_dispatch and the collectives do with each op, said up front:
 * - every kind in fp32, bf16 and fp16, one dtype per op (the plan's
 *   activations'; the ops on gradient ranges run in it too);
 * - a frozen base weight stored in nf4 or fp8 dequantised into it (dequant);
 * - fused attention with head dims up to PX_KC_FLASH_MAX_D and at most 65535
 *   query heads and batch rows (the kernels' limits), sliding windows too;
 * - per-head q/k norms (rows: tokens x heads, width: head dim), the norm
 *   each op's operands say (px_contract_layernorm);
 * - attention sinks, fused (folded into lse and ctx, their gradient from each
 *   row's probabilities recomputed) and unfused;
 * - no latent attention's RoPE key nor values of another head dim
 *   (variant_refused);
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
px_support px_cuda_supports_op(px_backend *be, const px_exec_op *e, char *why, size_t cap) {
  const px_cuda *c = be->impl;
  const px_op *op = e->op;
  const px_env *env = e->env;
  px_dtype dt = px_contract_dtype(env, op);
  const int64_t *d = op->dim;
  const char *kind = px_op_names[op->kind];
  /* offload's host side: the interpreter's own code over uploads and downloads */
  if (px_op_on_host((px_op_kind)op->kind)) return PX_SUPPORT_YES;
  if (px_contract_fp8(env, op)) {
    px_support v = fp8_supports(c, e, why, cap);
    if (v != PX_SUPPORT_YES) return v;
    if (dt == PX_DTYPE_FP8) /* a cast or a collective of codes */
      return px_contract_check(env, op, dt, why, cap) ? PX_SUPPORT_YES : PX_SUPPORT_NO;
  }
  if (!px_cuda_kernel_dtype(dt))
    return px_contract_refuse(why, cap, PX_SUPPORT_NO, "no %s kernels (fp32, bf16 and fp16 only)", px_dtype_names[dt]);
  if (!px_contract_check(env, op, dt, why, cap)) return PX_SUPPORT_NO;
  switch (env->cp > 1 ? (px_op_kind)op->kind : PX_OP_COUNT) {
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
    case PX_OP_ALLTOALL:
    case PX_OP_ROPE:
    case PX_OP_ROPE_BWD:
    case PX_OP_POS:
    case PX_OP_POS_BWD:
    case PX_OP_DROPOUT:
      return px_contract_refuse(
          why, cap, PX_SUPPORT_NO,
          "context parallelism (cp %lld) needs attention over key blocks at other ranks' positions, which "
          "the CUDA kernels do not have yet (hint: `backend` cpu runs it)",
          (long long)env->cp);
    default: break;
  }
  /* the experts' activation times the routed rows' gates (in[2]; SwiGLU's backward: in[3]) is a MoE op too */
  bool act = op->kind == PX_OP_SWIGLU || op->kind == PX_OP_GELU || op->kind == PX_OP_GELU_BWD,
       gated = (act && op->in[2].slot >= 0) || (op->kind == PX_OP_SWIGLU_BWD && op->in[3].slot >= 0);
  if (px_op_is_moe((px_op_kind)op->kind) || gated)
    return px_contract_refuse(why, cap, PX_SUPPORT_NO, "no mixture-of-experts kernels (hint: `backend` cpu runs ep 1)");
  const char *variant = variant_refused(env, op);
  if (variant) return px_contract_refuse(why, cap, PX_SUPPORT_NO, "%s (hint: `backend` cpu runs it)", variant);
  bool half = dt != PX_DTYPE_FP32;
  if (px_op_family_of((px_op_kind)op->kind) == PX_FAM_ATTENTION) /* Megatron's unfused attention ops */
    return half ? px_contract_refuse(why, cap, PX_SUPPORT_WIDENED,
                                     "no %s kernels: runs on fp32 copies of its operands (hint: `attention` flash)",
                                     px_dtype_names[dt])
                : PX_SUPPORT_YES;
  switch ((px_op_kind)op->kind) {
    case PX_OP_ACC:
    case PX_OP_GRAD_NORM:
      if (dt != env->act_dtype) /* op_dispatch runs every op in the activations' dtype */
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "%s gradients with %s activations: %s runs in the activations' dtype",
                                  px_dtype_names[dt], px_dtype_names[env->act_dtype], kind);
      return PX_SUPPORT_YES;
    case PX_OP_ADAMW:
      if (!env->master_weights && (env->grad_dtype != PX_DTYPE_FP32 || env->weight_dtype != PX_DTYPE_FP32))
        return px_contract_refuse(why, cap, PX_SUPPORT_NO, "fp32 AdamW needs fp32 weights and gradients, not %s and %s",
                                  px_dtype_names[env->weight_dtype], px_dtype_names[env->grad_dtype]);
      if (env->master_weights && (!half || env->weight_dtype != env->grad_dtype))
        return px_contract_refuse(
            why, cap, PX_SUPPORT_NO,
            "mixed-precision AdamW needs bf16 or fp16 gradients and model weights of that dtype, not %s "
            "and %s",
            px_dtype_names[env->grad_dtype], px_dtype_names[env->weight_dtype]);
      return PX_SUPPORT_YES;
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
      if (d[4] > PX_KC_FLASH_MAX_D)
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "head dim %lld, the flash kernels take at most %d (hint: `attention` unfused)",
                                  (long long)d[4], PX_KC_FLASH_MAX_D);
      if (d[2] > 65535)
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "%lld query heads per rank, the flash kernels take at most 65535", (long long)d[2]);
      return PX_SUPPORT_YES;
    case PX_OP_ALLREDUCE:
    case PX_OP_ALLGATHER:
    case PX_OP_REDUCE_SCATTER:
      if (!c->nccl && (d[0] > INT32_MAX / 4 || d[1] > INT32_MAX / 4))
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "%lld elements: beyond the MPI fallback's int counts (NCCL has none)",
                                  (long long)(d[0] > d[1] ? d[0] : d[1]));
      return PX_SUPPORT_YES;
    case PX_OP_ALLTOALL:
      return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                "no all-to-all (context parallelism's a2a runs on the cpu backend)");
    case PX_OP_SEND:
    case PX_OP_RECV:
      if (!c->nccl && (uint64_t)d[0] * px_dtype_bytes(dt) > (uint64_t)INT32_MAX)
        return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                                  "%llu bytes: beyond the MPI fallback's int counts (NCCL has none)",
                                  (unsigned long long)((uint64_t)d[0] * px_dtype_bytes(dt)));
      return PX_SUPPORT_YES;
    default: return PX_SUPPORT_YES;
  }
}
