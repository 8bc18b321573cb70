/* Linear layers in the block templates: the forward and
 * the backward's data and weight gradients (fp8 where the input is; the
 * weight gradient in the W block of a split backward), and a branch's end
 * (the row-parallel linear, its TP reduction, bias and dropout). */
#include "plan/linear.h"

#include <stdio.h>
#include <string.h>

#include "plan/fp8.h"
#include "plan/lora.h"

/* ---- adapters (fine-tuning with lora/qlora) ---- */

/* Adapter j of linear w: its A, B and h slots; false when it has none. */
typedef struct {
  int a, b, h;
} adapter;
static bool adapter_of(const px_plan *p, int w, int j, adapter *out) {
  if (!px_parallel_lora(&p->par) || w < 0) return false;
  char name[PX_NAME_MAX];
  snprintf(name, sizeof name, "%.18s.A%d", p->slots[w].name, j);
  if ((out->a = px_plan_slot(p, name)) < 0) return false;
  snprintf(name, sizeof name, "%.18s.B%d", p->slots[w].name, j);
  out->b = px_plan_slot(p, name);
  snprintf(name, sizeof name, "%.18s.h%d", p->slots[w].name, j);
  out->h = px_plan_slot(p, name);
  return out->b >= 0 && out->h >= 0;
}

void px_linear_adapter_slots(px_plan *p, const px_dims *d, int w, const int64_t n[3], int64_t k, bool row_parallel) {
  if (!d->lora || w < 0) return;
  char wname[PX_NAME_MAX], name[PX_NAME_MAX];
  snprintf(wname, sizeof wname, "%s", p->slots[w].name);
  for (int i = 0; i < PX_LORA_LINEARS; i++) {
    if (strcmp(wname, px_lora_linears[i].weight)) continue;
    for (int j = 0; j < 4; j++) {
      if (!(d->lora_targets & px_lora_linears[i].targets[j])) continue;
      int64_t r = d->lora_rank, nj = j == 3 ? n[0] + n[1] + n[2] : n[j];
      snprintf(name, sizeof name, "%.18s.A%c", wname, (char)('0' + j));
      int a = px_bld_param(p, d, name, r, k, !row_parallel, false);
      snprintf(name, sizeof name, "%.18s.B%c", wname, (char)('0' + j));
      int bb = px_bld_param(p, d, name, nj, r, row_parallel, false);
      int part = row_parallel ? bb : a; /* replicated over TP, its gradient a partial sum */
      p->slots[part].sp_partial = p->slots[px_bld_grad_of(p, part)].sp_partial = d->T > 1;
      snprintf(name, sizeof name, "%.18s.h%c", wname, (char)('0' + j));
      px_bld_slot(p, name, PX_SLOT_ACT, d->act, d->B, d->S, r, 1);
    }
  }
}

void px_linear_adapter_keep(px_bld *b, int w) {
  adapter ad;
  for (int j = 0; j < 4; j++)
    if (adapter_of(b->p, w, j, &ad)) px_bld_keep(b, R(ad.h, 0));
}

bool px_linear_needs_input(const px_plan *p, int w) {
  adapter ad;
  bool any = false;
  for (int j = 0; j < 4 && !any; j++) any = adapter_of(p, w, j, &ad);
  return px_bld_param_trained(p, w) || any;
}

/* The outputs adapter j writes (all of y, or y[j] alone) and their widths, into yo/no; returns the width. */
static int64_t adapter_outputs(int j, const px_ref y[3], const int64_t n[3], px_ref yo[3], int64_t no[3]) {
  for (int i = 0; i < 3; i++) yo[i] = j == 3 ? y[i] : NOREF, no[i] = j == 3 ? n[i] : 0;
  if (j < 3) yo[0] = y[j], no[0] = n[j];
  return no[0] + no[1] + no[2];
}

/* y += s (x A^T) B^T for each adapter of w, s = alpha / r on B's GEMM (PX_OPF_LORA_SCALE). */
static void adapters_fwd(px_bld *b, const px_dims *d, px_phase ph, px_ref x, int w, const px_ref y[3],
                         const int64_t n[3], int64_t m, int64_t k) {
  adapter ad;
  double e = (double)d->e, r = (double)d->lora_rank;
  for (int j = 0; j < 4; j++) {
    if (!adapter_of(b->p, w, j, &ad)) continue;
    px_ref yo[3];
    int64_t no[3], nj = adapter_outputs(j, y, n, yo, no);
    px_op *o = px_bld_op(b, PX_OP_LINEAR, PX_STREAM_COMPUTE, ph); /* h = x A^T */
    o->in[0] = x, o->in[1] = R(ad.a, 0), o->out[0] = R(ad.h, 0);
    o->dim[0] = m, o->dim[1] = d->lora_rank, o->dim[2] = k, o->dim[3] = d->lora_rank;
    px_bld_gemm_cost(o, (double)m, r, (double)k, 1, e, e);
    o = px_bld_op(b, PX_OP_LINEAR, PX_STREAM_COMPUTE, ph); /* y += h B^T */
    o->in[0] = R(ad.h, 0), o->in[1] = R(ad.b, 0);
    o->out[0] = yo[0], o->out[1] = yo[1], o->out[2] = yo[2];
    o->flags = PX_OPF_ACCUMULATE | PX_OPF_LORA_SCALE;
    o->dim[0] = m, o->dim[1] = nj, o->dim[2] = d->lora_rank, o->dim[3] = no[0], o->dim[4] = no[1], o->dim[5] = no[2];
    px_bld_gemm_cost(o, (double)m, (double)nj, r, 1, e, e);
    o->bytes += (double)(m * nj) * e; /* y read to add to */
  }
}

/* The adapters' backward but their A gradients: dh = dy B, dB += dy^T h, dx += dh A. */
static void adapters_bwd_data(px_bld *b, const px_dims *d, px_ref dx, int w, const px_ref dy[3], const int64_t n[3],
                              int64_t m, int64_t k) {
  adapter ad;
  double e = (double)d->e, r = (double)d->lora_rank, gb = (double)px_dtype_bytes(d->grad);
  for (int j = 0; j < 4; j++) {
    if (!adapter_of(b->p, w, j, &ad)) continue;
    px_ref yo[3], dh = R(px_bld_grad_slot(b->p, ad.h), 0);
    int64_t no[3], nj = adapter_outputs(j, dy, n, yo, no);
    px_op *o = px_bld_op(b, PX_OP_LINEAR_BWD_DATA, PX_STREAM_COMPUTE, PX_PHASE_BWD); /* dh = dy B */
    o->in[0] = yo[0], o->in[1] = yo[1], o->in[2] = yo[2], o->in[3] = R(ad.b, 0);
    o->out[0] = dh;
    o->flags = PX_OPF_LORA_SCALE;
    o->dim[0] = m, o->dim[1] = nj, o->dim[2] = d->lora_rank, o->dim[3] = no[0], o->dim[4] = no[1], o->dim[5] = no[2];
    px_bld_gemm_cost(o, (double)m, r, (double)nj, 1, e, e);
    o = px_bld_op(b, PX_OP_LINEAR_BWD_WEIGHT, PX_STREAM_COMPUTE, PX_PHASE_BWD); /* dB += dy^T h */
    o->in[0] = yo[0], o->in[1] = yo[1], o->in[2] = yo[2], o->in[3] = R(ad.h, 0);
    o->out[0] = R(px_bld_grad_of(b->p, ad.b), 0);
    o->flags = PX_OPF_ACCUMULATE | PX_OPF_LORA_SCALE;
    o->dim[0] = m, o->dim[1] = nj, o->dim[2] = d->lora_rank, o->dim[3] = no[0], o->dim[4] = no[1], o->dim[5] = no[2];
    px_bld_gemm_cost(o, (double)nj, r, (double)m, 1, e, gb);
    o->bytes += (double)nj * r * gb;
    o = px_bld_op(b, PX_OP_LINEAR_BWD_DATA, PX_STREAM_COMPUTE, PX_PHASE_BWD); /* dx += dh A */
    o->in[0] = dh, o->in[3] = R(ad.a, 0);
    o->out[0] = dx;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = m, o->dim[1] = d->lora_rank, o->dim[2] = k, o->dim[3] = d->lora_rank;
    px_bld_gemm_cost(o, (double)m, (double)k, r, 1, e, e);
  }
}

/* dA += dh^T x for each adapter of w. */
static void adapters_bwd_weight(px_bld *b, const px_dims *d, px_ref x, int w, int64_t m, int64_t k) {
  adapter ad;
  double e = (double)d->e, r = (double)d->lora_rank, gb = (double)px_dtype_bytes(d->grad);
  for (int j = 0; j < 4; j++) {
    if (!adapter_of(b->p, w, j, &ad)) continue;
    px_op *o = px_bld_op(b, PX_OP_LINEAR_BWD_WEIGHT, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = R(px_bld_grad_slot(b->p, ad.h), 0), o->in[3] = x;
    o->out[0] = R(px_bld_grad_of(b->p, ad.a), 0);
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = m, o->dim[1] = d->lora_rank, o->dim[2] = k, o->dim[3] = d->lora_rank;
    px_bld_gemm_cost(o, r, (double)k, (double)m, 1, e, gb);
    o->bytes += r * (double)k * gb;
  }
}

/* Weight w as a GEMM reads it: a frozen layer weight stored in fp8 or nf4 is first
 * dequantised into a workspace of the compute dtype (bitsandbytes'
 * dequantize_4bit before each matmul, forward and backward), read from its
 * storage (px_lora_frozen_bytes) and written in full. */
static px_ref weight_read(px_bld *b, const px_dims *d, px_phase ph, int w) {
  px_plan *p = b->p;
  if (!p->slots[w].frozen || p->par.base_precision == PX_BASE_BF16 || !px_lora_quantized(p->slots[w].name))
    return R(w, 0);
  char name[PX_NAME_MAX];
  snprintf(name, sizeof name, "%.18s.deq", p->slots[w].name);
  int64_t rows = p->slots[w].shape[0], cols = p->slots[w].shape[1];
  uint64_t elems = p->slots[w].elems;
  int ws = px_bld_slot(p, name, PX_SLOT_WORKSPACE, d->act, rows, cols, 1, 1);
  px_op *o = px_bld_op(b, PX_OP_CAST, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(w, 0), o->out[0] = R(ws, 0);
  o->flags = PX_OPF_DEQUANT;
  o->dim[0] = (int64_t)elems;
  o->bytes = (double)px_lora_frozen_bytes(&p->par, elems, true) + (double)elems * (double)d->e;
  return R(ws, 0);
}

/* ---- linear layers ---- */

px_op *px_linear(px_bld *b, const px_dims *d, px_phase ph, px_ref x, int w, int bias, px_ref y0, px_ref y1, px_ref y2,
                 int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k) {
  bool f8 = x.slot >= 0 && b->p->slots[x.slot].dtype == PX_DTYPE_FP8;
  if (f8) px_fp8_weight_cast(b, d, ph, w);
  px_ref wr = weight_read(b, d, ph, w);
  int32_t at = b->b->nops; /* the op returned, by index: the adapters' ops after it may move the ops */
  px_op *o = px_bld_op(b, PX_OP_LINEAR, PX_STREAM_COMPUTE, ph);
  int64_t n = n0 + n1 + n2;
  o->in[0] = x;
  o->in[1] = wr;
  o->in[2] = bias >= 0 ? R(bias, 0) : NOREF;
  o->out[0] = y0;
  o->out[1] = y1;
  o->out[2] = y2;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  px_bld_gemm_cost(o, (double)m, (double)px_op_linear_cols(o), (double)k, 1, f8 ? 1.0 : (double)d->e, (double)d->e);
  if (f8) px_fp8_gemm(b, d, o, w);
  const px_ref y[3] = {y0, y1, y2};
  const int64_t widths[3] = {n0, n1, n2};
  adapters_fwd(b, d, ph, x, w, y, widths, m, k);
  return b->failed ? o : &b->b->ops[at];
}

px_ref px_linear_wgrad_input(px_bld *b, const px_dims *d, int w, px_ref shard, px_ref full) {
  if (!px_linear_needs_input(b->p, w)) return NOREF;
  /* per-op recomputation gathered it again already, and keeps it for the weight gradients as PyTorch does */
  return d->sp && !b->w && !d->rc_op ? px_bld_tp_gather(b, d, PX_PHASE_BWD, shard, full) : full;
}

/* A tensor the W block reads: with SP and a sequence shard given, W
 * all-gathers it again from the shard B keeps (as x of a linear layer, or
 * the output gradient of a row-parallel one: B then frees the full tensor,
 * a TP all-gather in W for (tp - 1)/tp of its memory per deferred W);
 * otherwise B keeps it. */
static px_ref wgrad_keep(px_bld *b, const px_dims *d, px_ref full, px_ref shard) {
  if (full.slot < 0) return full;
  if (d->sp && shard.slot >= 0) {
    px_bld_keep(b, shard);
    return px_bld_tp_gather(b->w, d, PX_PHASE_BWD, shard, full);
  }
  px_bld_keep(b, full);
  return full;
}

px_ref px_linear_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref x, px_ref x_shard, int w, int bias, px_ref dy0,
                     px_ref dy_shard, px_ref dy1, px_ref dy2, int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k,
                     const px_ref *reduce_into) {
  int64_t n = n0 + n1 + n2;
  bool f8 = d->f8 && b->p->slots[w].fp8; /* its forward ran in fp8: E5M2 output gradients, the fp8 input and weight */
  double e_in = f8 ? 1.0 : (double)d->e;
  if (f8) {
    px_fp8_weight_cast(b, d, PX_PHASE_BWD, w);
    dy0 = px_fp8_cast(b, d, PX_PHASE_BWD, dy0, true), dy1 = px_fp8_cast(b, d, PX_PHASE_BWD, dy1, true);
    dy2 = px_fp8_cast(b, d, PX_PHASE_BWD, dy2, true);
    x = px_fp8_twin(b->p, d, x);
    dy_shard = x_shard = NOREF; /* W keeps the full fp8 tensors */
  }
  px_ref wr = weight_read(b, d, PX_PHASE_BWD, w);
  px_op *o = px_bld_op(b, PX_OP_LINEAR_BWD_DATA, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy0, o->in[1] = dy1, o->in[2] = dy2, o->in[3] = wr;
  o->out[0] = dx;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  px_bld_gemm_cost(o, (double)m, (double)k, (double)n, 1, e_in, (double)d->e);
  if (f8) px_fp8_gemm(b, d, o, w);
  const px_ref dy[3] = {dy0, dy1, dy2};
  const int64_t widths[3] = {n0, n1, n2};
  adapters_bwd_data(b, d, dx, w, dy, widths, m, k); /* before dx's TP reduction: a column-parallel dh A is partial */
  px_ref reduced = reduce_into ? px_bld_tp_reduce(b, d, PX_PHASE_BWD, dx, *reduce_into) : dx;
  adapters_bwd_weight(b, d, x, w, m, k);
  if (!px_bld_param_trained(b->p, w)) return reduced; /* frozen: no weight gradient */
  px_bld *wb = b;
  if (b->w) {
    wb = b->w;
    dy0 = wgrad_keep(b, d, dy0, dy_shard);
    dy1 = wgrad_keep(b, d, dy1, NOREF), dy2 = wgrad_keep(b, d, dy2, NOREF);
    x = wgrad_keep(b, d, x, x_shard);
  }
  o = px_bld_op(wb, PX_OP_LINEAR_BWD_WEIGHT, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy0, o->in[1] = dy1, o->in[2] = dy2, o->in[3] = x;
  o->out[0] = R(px_bld_grad_of(b->p, w), 0);
  o->out[1] = bias >= 0 ? R(px_bld_grad_of(b->p, bias), 0) : NOREF;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  px_bld_gemm_cost(o, (double)n, (double)k, (double)m, 1, e_in, (double)px_dtype_bytes(d->grad));
  o->bytes += (double)(n * k) * (double)px_dtype_bytes(d->grad); /* read-modify-write of dW */
  if (f8) px_fp8_gemm(b, d, o, w);
  return reduced;
}

/* The end of a branch (attention or MLP): the row-parallel linear w on `in`
 * (in_width columns), the TP reduce into out, then with dropout (at `site`)
 * the bias and the dropout into dropped. Returns the branch's output;
 * *bias_left is the bias the residual add still has to add (none after a
 * dropout, which adds it first). */
static px_ref branch_tail_fwd(px_bld *b, const px_dims *d, px_phase ph, int bias, int part, int out, int dropped,
                              int dmask, int site, px_ref *bias_left);

px_ref px_branch_end_fwd(px_bld *b, const px_dims *d, px_phase ph, int in, int w, int bias, int part, int out,
                         int dropped, int dmask, int64_t in_width, int site, px_ref *bias_left) {
  px_linear(b, d, ph, R(in, 0), w, -1, R(part, 0), NOREF, NOREF, d->B * d->S, d->H, 0, 0, in_width);
  return branch_tail_fwd(b, d, ph, bias, part, out, dropped, dmask, site, bias_left);
}

/* A branch's partial output `part` (over TP) reduced into out, then the bias and dropout as branch_end_fwd says. */
static px_ref branch_tail_fwd(px_bld *b, const px_dims *d, px_phase ph, int bias, int part, int out, int dropped,
                              int dmask, int site, px_ref *bias_left) {
  return px_branch_dropout(b, d, ph, px_bld_tp_reduce(b, d, ph, R(part, 0), R(out, 0)), bias, dropped, dmask, site,
                           bias_left);
}

px_ref px_branch_dropout(px_bld *b, const px_dims *d, px_phase ph, px_ref y, int bias, int dropped, int dmask, int site,
                         px_ref *bias_left) {
  *bias_left = bias >= 0 ? R(bias, 0) : NOREF;
  /* none, or not asked for (a recomputed MLP's: the bias-dropout-add is not in it) */
  if (!d->drop || dropped < 0) return y;
  px_bld_dropout(b, d, ph, R(dropped, 0), R(dmask, 0), y, *bias_left, d->Sl, d->H, 1, d->sp ? 1 : 0, site);
  *bias_left = NOREF;
  return R(dropped, 0);
}

px_ref px_branch_dropout_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask) {
  if (!d->drop) return dres;
  px_ref dbranch = R(px_bld_grad_slot(b->p, out), 0);
  px_bld_dropout_bwd(b, d, dbranch, dres, R(dmask, 0), d->B * d->Sl * d->H);
  return dbranch;
}

/* From the residual's gradient dres through a branch's dropout and the TP
 * gather: the gradient of its partial output `part` (*dbranch: the sequence
 * shard's with SP). With `codes` (the row-parallel layer's backward in a
 * quantized format, d->f8_grad_codes) the shard is quantized and its codes
 * gathered, as Transformer Engine's grad_output_preprocess does (its amax
 * reduced over TP first: px_bld_tp_gather): a block-scaled format's row-wise
 * and column-wise codes both (_all_gather_mxfp8, _all_gather_nvfp4 in
 * distributed.py, TE d0067d0), per-tensor fp8's row-wise ones, which it then
 * transposes (_all_gather_fp8; not costed: the cast writes the shard's). */
static px_ref branch_tail_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask, int part, bool codes,
                              px_ref *dbranch) {
  *dbranch = px_branch_dropout_bwd(b, d, dres, out, dmask);
  px_ref full = R(px_bld_grad_slot(b->p, part), 0);
  if (codes)
    return px_bld_tp_gather_copies(b, d, PX_PHASE_BWD, px_fp8_cast(b, d, PX_PHASE_BWD, *dbranch, true),
                                   px_fp8_twin(b->p, d, full), d->f8_format ? 2 : 1);
  return px_bld_tp_gather(b, d, PX_PHASE_BWD, *dbranch, full);
}

void px_branch_end_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask, int part, int in, int w, int bias,
                       int64_t in_width, int pre) {
  px_plan *p = b->p;
  bool codes = d->f8_grad_codes && p->slots[w].fp8;
  px_ref dbranch, dfull = branch_tail_bwd(b, d, dres, out, dmask, part, codes, &dbranch);
  int32_t data = b->b->nops; /* linear_bwd's first op */
  px_linear_bwd(b, d, R(px_bld_grad_slot(p, pre >= 0 ? pre : in), 0), R(in, 0), NOREF, w, bias, dfull, dbranch, NOREF,
                NOREF, d->B * d->S, d->H, 0, 0, in_width, NULL);
  if (pre >= 0) {
    while (b->b->ops[data].kind != PX_OP_LINEAR_BWD_DATA) data++; /* past fp8's casts */
    px_op *o = &b->b->ops[data];
    o->flags = (uint16_t)((o->flags & (PX_OPF_FP8 | PX_OPF_FP8_BLOCK)) | PX_OPF_DGELU);
    o->in[4] = R(pre, 0);
    o->bytes += (double)(d->B * d->S * in_width) * (double)d->e;
  }
}
