/* Linear layers in the block templates: the forward and
 * the backward's data and weight gradients (fp8 where the input is; the
 * weight gradient in the W block of a split backward), and a branch's end
 * (the row-parallel linear, its TP reduction, bias and dropout). */
#include "plan/linear.h"

#include "plan/fp8.h"

px_op *px_linear(px_bld *b, const px_dims *d, px_phase ph, px_ref x, int w, int bias, px_ref y0, px_ref y1, px_ref y2,
                 int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k) {
  bool f8 = x.slot >= 0 && b->p->slots[x.slot].dtype == PX_DTYPE_FP8;
  if (f8) px_fp8_weight_cast(b, d, ph, w);
  px_op *o = px_bld_op(b, PX_OP_LINEAR, PX_STREAM_COMPUTE, ph);
  int64_t n = n0 + n1 + n2;
  o->in[0] = x;
  o->in[1] = R(w, 0);
  o->in[2] = bias >= 0 ? R(bias, 0) : NOREF;
  o->out[0] = y0;
  o->out[1] = y1;
  o->out[2] = y2;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  px_bld_gemm_cost(o, (double)m, (double)n, (double)k, 1, f8 ? 1.0 : (double)d->e, (double)d->e);
  if (f8) px_fp8_gemm(b, d, o, w);
  return o;
}

px_ref px_linear_wgrad_input(px_bld *b, const px_dims *d, px_ref shard, px_ref full) {
  return d->sp && !b->w ? px_bld_tp_gather(b, d, PX_PHASE_BWD, shard, full) : full;
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
  bool f8 = b->p->slots[w].fp8; /* its forward ran in fp8: E5M2 output gradients, the fp8 input and weight */
  double e_in = f8 ? 1.0 : (double)d->e;
  if (f8) {
    px_fp8_weight_cast(b, d, PX_PHASE_BWD, w);
    dy0 = px_fp8_cast(b, d, PX_PHASE_BWD, dy0, true), dy1 = px_fp8_cast(b, d, PX_PHASE_BWD, dy1, true);
    dy2 = px_fp8_cast(b, d, PX_PHASE_BWD, dy2, true);
    x = px_fp8_twin(b->p, d, x);
    dy_shard = x_shard = NOREF; /* W keeps the full fp8 tensors */
  }
  px_op *o = px_bld_op(b, PX_OP_LINEAR_BWD_DATA, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy0, o->in[1] = dy1, o->in[2] = dy2, o->in[3] = R(w, 0);
  o->out[0] = dx;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  px_bld_gemm_cost(o, (double)m, (double)k, (double)n, 1, e_in, (double)d->e);
  if (f8) px_fp8_gemm(b, d, o, w);
  px_ref reduced = reduce_into ? px_bld_tp_reduce(b, d, PX_PHASE_BWD, dx, *reduce_into) : dx;
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
  if (!d->drop) return y;
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
 * shard's with SP). */
static px_ref branch_tail_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask, int part, px_ref *dbranch) {
  *dbranch = px_branch_dropout_bwd(b, d, dres, out, dmask);
  return px_bld_tp_gather(b, d, PX_PHASE_BWD, *dbranch, R(px_bld_grad_slot(b->p, part), 0));
}

void px_branch_end_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask, int part, int in, int w, int bias,
                       int64_t in_width, int pre) {
  px_plan *p = b->p;
  px_ref dbranch, dfull = branch_tail_bwd(b, d, dres, out, dmask, part, &dbranch);
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
