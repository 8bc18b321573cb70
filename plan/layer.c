/* One transformer layer's blocks: its tensors, forward,
 * backward with recomputation, and what the forward keeps. */
#include "plan/layer.h"

#include "plan/attention.h"
#include "plan/fp8.h"
#include "plan/linear.h"
#include "plan/mlp.h"

void px_layer_slots_make(px_plan *p, const px_dims *d, px_layer_slots *L) {
  px_dtype a = d->act;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  L->x = px_bld_slot(p, "layer_in", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->out = L->x; /* layer_in at offset +1 */
  L->ln1 = px_bld_slot(p, "ln1", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln1_rstd = px_bld_slot(p, "ln1_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  L->ln1_mean = d->layernorm ? px_bld_slot(p, "ln1_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  L->ln1_full = d->sp && (!d->mla || d->QL == 0) /* MLA's down projections read the shard */
                    ? px_bld_slot(p, "ln1_full", PX_SLOT_ACT, a, B, S, H, 1)
                    : L->ln1;
  L->q = px_bld_slot(p, "q", PX_SLOT_ACT, a, B, S, d->HQ, d->D);
  L->k = px_bld_slot(p, "k", PX_SLOT_ACT, a, B, S, d->HKV, d->D);
  L->v = px_bld_slot(p, "v", PX_SLOT_ACT, a, B, S, d->HKV, d->Dv);
  bool unfused = !d->flash, udrop = unfused && d->drop;
  L->scores = unfused ? px_bld_slot(p, "scores", PX_SLOT_ACT, a, B, d->HQ, S, S) : -1;
  L->probs = unfused ? px_bld_slot(p, "probs", PX_SLOT_ACT, a, B, d->HQ, S, S) : -1;
  L->probs_drop = udrop ? px_bld_slot(p, "probs_drop", PX_SLOT_ACT, a, B, d->HQ, S, S) : L->probs;
  L->attn_mask = udrop ? px_bld_slot(p, "attn_mask", PX_SLOT_ACT, PX_DTYPE_U8, B, d->HQ, S, S) : -1;
  L->lse = d->flash ? px_bld_slot(p, "lse", PX_SLOT_ACT, PX_DTYPE_FP32, B, d->HQ, S, 1) : -1;
  L->ctx = px_bld_slot(p, "ctx", PX_SLOT_ACT, a, B, S, d->HQ, d->Dv);
  /* context parallelism: the whole sequence's keys and values (all-gather), or
   * the whole sequence of 1/cp of the heads (a2a) */
  L->q_cp = L->k_cp = L->v_cp = L->ctx_cp = -1;
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    L->k_cp = px_bld_slot(p, "k_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV, d->D);
    L->v_cp = px_bld_slot(p, "v_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV, d->D);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    L->q_cp = px_bld_slot(p, "q_cp", PX_SLOT_ACT, a, B, S * d->C, d->HQ / d->C, d->D);
    L->k_cp = px_bld_slot(p, "k_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV / d->C, d->D);
    L->v_cp = px_bld_slot(p, "v_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV / d->C, d->D);
    L->ctx_cp = px_bld_slot(p, "ctx_cp", PX_SLOT_ACT, a, B, S * d->C, d->HQ / d->C, d->D);
  }
  L->attn_part = px_bld_slot(p, "attn_part", PX_SLOT_ACT, a, B, S, H, 1);
  L->attn_out = d->sp ? px_bld_slot(p, "attn_out", PX_SLOT_ACT, a, B, Sl, H, 1) : L->attn_part;
  L->attn_drop = d->drop ? px_bld_slot(p, "attn_drop", PX_SLOT_ACT, a, B, Sl, H, 1) : -1;
  L->attn_dmask = d->drop ? px_bld_slot(p, "attn_dmask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;
  L->x2 = d->par_res ? -1 : px_bld_slot(p, "x2", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln2 = px_bld_slot(p, "ln2", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln2_rstd = px_bld_slot(p, "ln2_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  L->ln2_mean = d->layernorm ? px_bld_slot(p, "ln2_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  L->ln2_full = d->sp ? px_bld_slot(p, "ln2_full", PX_SLOT_ACT, a, B, S, H, 1) : L->ln2;
  L->fc1 = d->swiglu ? -1 : px_bld_slot(p, "fc1", PX_SLOT_ACT, a, B, S, d->F, 1);
  L->gate = d->swiglu ? px_bld_slot(p, "gate", PX_SLOT_ACT, a, B, S, d->F, 1) : -1;
  L->up = d->swiglu ? px_bld_slot(p, "up", PX_SLOT_ACT, a, B, S, d->F, 1) : -1;
  L->act = px_bld_slot(p, "act", PX_SLOT_ACT, a, B, S, d->F, 1);
  L->mlp_part = px_bld_slot(p, "mlp_part", PX_SLOT_ACT, a, B, S, H, 1);
  L->mlp_out = d->sp ? px_bld_slot(p, "mlp_out", PX_SLOT_ACT, a, B, Sl, H, 1) : L->mlp_part;
  L->mlp_drop = d->drop ? px_bld_slot(p, "mlp_drop", PX_SLOT_ACT, a, B, Sl, H, 1) : -1;
  L->mlp_dmask = d->drop ? px_bld_slot(p, "mlp_dmask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;

  int64_t qkv = d->QW + 2 * d->KW, fc1 = d->swiglu ? 2 * d->F : d->F;
  L->w_ln1 = px_bld_param(p, d, "ln1_w", H, 1, true, true);
  L->b_ln1 = d->layernorm ? px_bld_param(p, d, "ln1_b", H, 1, true, true) : -1;
  L->w_qkv = d->mla ? -1 : px_bld_param(p, d, "qkv_w", qkv, H, false, false);
  L->b_qkv = d->qkv_bias && !d->mla ? px_bld_param(p, d, "qkv_b", qkv, 1, false, false) : -1;
  L->w_o = px_bld_param(p, d, "o_w", H, d->OW, false, false);
  px_attn_mla_slots(p, d, L);
  px_attn_qk_norm_slots(p, d, L);
  L->w_sinks = d->sinks ? px_bld_param(p, d, "sinks", d->HQ, 1, false, false) : -1; /* split over TP with the heads */
  L->b_o = d->bias ? px_bld_param(p, d, "o_b", H, 1, true, false) : -1;
  L->w_ln2 = px_bld_param(p, d, "ln2_w", H, 1, true, true);
  L->b_ln2 = d->layernorm ? px_bld_param(p, d, "ln2_b", H, 1, true, true) : -1;
  L->w_fc1 = px_bld_param(p, d, "fc1_w", fc1, H, false, false);
  L->b_fc1 = d->bias ? px_bld_param(p, d, "fc1_b", fc1, 1, false, false) : -1;
  L->w_fc2 = px_bld_param(p, d, "fc2_w", H, d->F, false, false);
  L->b_fc2 = d->bias ? px_bld_param(p, d, "fc2_b", H, 1, true, false) : -1;
  if (d->lora && !d->mla) { /* the adapters: column-parallel qkv and fc1, row-parallel o and fc2 */
    px_linear_adapter_slots(p, d, L->w_qkv, (const int64_t[3]){d->QW, d->KW, d->KW}, H, false);
    px_linear_adapter_slots(p, d, L->w_o, (const int64_t[3]){H, 0, 0}, d->OW, true);
    px_linear_adapter_slots(p, d, L->w_fc1, (const int64_t[3]){d->F, d->swiglu ? d->F : 0, 0}, H, false);
    px_linear_adapter_slots(p, d, L->w_fc2, (const int64_t[3]){H, 0, 0}, d->F, true);
  }
  px_moe_slots(p, d, L);
}

/* The MLP's input as the forward makes it from the norm's output: the dense MLP's (its fp8 twin, gathered over TP
 * with SP), the shared experts' (gathered), or none (the router reads the shard). */
static px_ref mlp_input(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  if (d->moe) return d->Fs > 0 ? px_bld_tp_gather(b, d, ph, R(L->ln2, 0), R(L->ln2_full, 0)) : NOREF;
  return px_bld_tp_gather(b, d, ph, px_fp8_cast(b, d, ph, R(L->ln2, 0), false),
                          px_fp8_twin(b->p, d, R(L->ln2_full, 0)));
}

/* layernorm recomputation's pre-MLP norm: Megatron-Core keeps it in a MoE layer whose router a CUDA graph captures
 * unless the alltoall dispatcher's preprocessing is captured too, the norm's output being the graph's otherwise
 * (transformer_layer.py at d98e8a6, can_recompute_pre_mlp_layernorm_for_cudagraph) */
static bool norm2_recomputed(const px_plan *p, const px_dims *d) {
  if (!(d->rcm & PX_RCM_LAYERNORM)) return false;
  return !d->moe || !px_graph_router(p->par.cuda_graph) || d->dispatch == PX_MOE_A2A;
}

static void norm1(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_bld_norm(b, d, ph, R(L->ln1, 0), L->ln1_mean >= 0 ? R(L->ln1_mean, 0) : NOREF, R(L->ln1_rstd, 0), R(L->x, 0),
              L->w_ln1, L->b_ln1, d->B * d->Sl);
}

static void norm2(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_bld_norm(b, d, ph, R(L->ln2, 0), L->ln2_mean >= 0 ? R(L->ln2_mean, 0) : NOREF, R(L->ln2_rstd, 0),
              d->par_res ? R(L->x, 0) : R(L->x2, 0), L->w_ln2, L->b_ln2, d->B * d->Sl);
}

void px_layer_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, bool produce_out) {
  int64_t rows = d->B * d->Sl, H = d->H;
  px_ref x = R(L->x, 0);
  norm1(b, d, L, ph);
  px_attn_forward(b, d, L, ph, px_fp8_cast(b, d, ph, R(L->ln1, 0), false));
  px_op *o;
  px_ref bo;
  px_ref attn = px_branch_end_fwd(b, d, ph, px_fp8_cast(b, d, ph, R(L->ctx, 0), false).slot, L->w_o, L->b_o,
                                  L->attn_part, L->attn_out, L->attn_drop, L->attn_dmask, d->OW, 1, &bo);
  if (!d->par_res) {
    o = px_bld_simple(b, PX_OP_ADD, ph, R(L->x2, 0), x, attn, rows * H, (double)d->e);
    o->in[2] = bo;
    o->dim[1] = H;
  }
  norm2(b, d, L, ph);
  px_ref ln2 = mlp_input(b, d, L, ph);
  px_ref bf;
  px_ref mlp =
      d->moe ? px_moe_forward(b, d, L, ph, R(L->ln2, 0), ln2, &bf) : px_mlp_forward(b, d, L, ph, ln2, true, &bf);
  if (!produce_out) return;
  px_ref out = R(L->out, 1);
  if (d->par_res) {
    /* out = x + attn (+ b_o) + mlp (+ b_fc2) */
    o = px_bld_simple(b, PX_OP_ADD, ph, out, x, attn, rows * H, (double)d->e);
    o->in[2] = bo;
    o->dim[1] = H;
    o = px_bld_simple(b, PX_OP_ADD, ph, out, out, mlp, rows * H, (double)d->e);
    o->in[2] = bf;
    o->dim[1] = H;
  } else {
    o = px_bld_simple(b, PX_OP_ADD, ph, out, R(L->x2, 0), mlp, rows * H, (double)d->e);
    o->in[2] = bf;
    o->dim[1] = H;
  }
}

/* torchtitan's per-op recomputation (`recompute` op), at the start of the layer's backward as its checkpoint's
 * first unpacked tensor runs it: what the forward did not keep, from the layer's input and the outputs it kept (q's
 * and v's projections, the attention's, w1's (gate), the TP reduce-scatters'): the norms and the SP all-gathers,
 * k's projection, the q/k norms and RoPE, wo's product without SP (with SP its reduce-scatter's output is kept;
 * eager PyTorch multiplies again anyway, its recomputation rerunning each op not kept, where torch.compile's
 * partitioner drops the unread product), the residual, up's projection (w3) and the activation. */
static void recompute_op(px_bld *b, const px_dims *d, const px_layer_slots *L) {
  px_plan *p = b->p;
  const px_phase rp = PX_PHASE_RECOMPUTE;
  int64_t rows = d->B * d->Sl, rows_full = d->B * d->S, H = d->H;
  double e = (double)d->e;
  norm1(b, d, L, rp);
  px_attn_recompute_op(b, d, L, px_fp8_cast(b, d, rp, R(L->ln1, 0), false));
  /* the attention's output cast again for wo (torchao's Float8Linear keeps its high-precision input and casts it
   * again in the backward; under the policy that input is the saved attention output) */
  px_ref ctx = px_fp8_cast(b, d, rp, R(L->ctx, 0), false);
  if (!d->par_res) {
    px_ref attn = R(L->attn_out, 0), bo;
    if (!d->sp)
      attn = px_branch_end_fwd(b, d, rp, ctx.slot, L->w_o, -1, L->attn_part, L->attn_out, -1, -1, d->OW, 1, &bo);
    else if (p->par.elementwise == PX_ELEMWISE_EAGER)
      px_linear(b, d, rp, ctx, L->w_o, -1, R(L->attn_part, 0), NOREF, NOREF, rows_full, H, 0, 0, d->OW);
    px_op *o = px_bld_simple(b, PX_OP_ADD, rp, R(L->x2, 0), R(L->x, 0), attn, rows * H, e);
    o->dim[1] = H;
  }
  norm2(b, d, L, rp);
  px_ref x = mlp_input(b, d, L, rp);
  if (d->swiglu) {
    px_linear(b, d, rp, x, L->w_fc1, -1, NOREF, R(L->up, 0), NOREF, rows_full, d->F, d->F, 0, H);
    px_bld_simple(b, PX_OP_SWIGLU, rp, R(L->act, 0), R(L->gate, 0), R(L->up, 0), rows_full * d->F, e);
  } else { /* the GELU from w1's kept output (the fused epilogue's pre-activation) */
    px_bld_simple(b, PX_OP_GELU, rp, R(L->act, 0), R(L->fc1, 0), NOREF, rows_full * d->F, e);
  }
  px_fp8_cast(b, d, rp, R(L->act, 0), false); /* w2's weight gradient's operand */
  if (p->par.elementwise == PX_ELEMWISE_EAGER && !d->par_res) {
    /* eager PyTorch runs the layer to its end (torchtitan's early_stop False): w2's kept output read (and freed),
     * the residual added again and dropped */
    px_op *o = px_bld_simple(b, PX_OP_ADD, rp, R(L->out, 1), R(L->x2, 0), R(L->mlp_out, 0), rows * H, e);
    o->dim[1] = H;
  }
}

void px_layer_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_recompute rc) {
  px_plan *p = b->p;
  int64_t rows = d->B * d->Sl, H = d->H;
  if (rc == PX_RECOMPUTE_FULL) px_layer_forward(b, d, L, PX_PHASE_RECOMPUTE, false);
  if (rc == PX_RECOMPUTE_OP) recompute_op(b, d, L);
  /* selective recomputation's modules, each before its first reader in the backward: the MLP's norm (and the
   * casts its readers keep), a dense layer's MLP from it (Megatron-Core's checkpoint reruns the module, fc2 and
   * its TP reduction too; the bias-dropout-add after it is not the module's) */
  const px_phase rp = PX_PHASE_RECOMPUTE;
  if (norm2_recomputed(p, d)) {
    norm2(b, d, L, rp);
    if (d->moe && d->f8 && d->Fs > 0) px_fp8_cast(b, d, rp, mlp_input(b, d, L, rp), false);
    if (!d->moe && !(d->rcm & PX_RCM_MLP)) px_fp8_cast(b, d, rp, R(L->ln2, 0), false);
  }
  if (!d->moe && (d->rcm & PX_RCM_MLP)) {
    px_ref bf;
    px_mlp_forward(b, d, L, rp, mlp_input(b, d, L, rp), false, &bf);
  }
  px_ref dout = R(px_bld_grad_slot(p, L->x), 1);
  px_ref dx = R(px_bld_grad_slot(p, L->x), 0);
  px_ref dln2_part = R(px_bld_grad_slot(p, L->ln2_full), 0), dln2_sh = R(px_bld_grad_slot(p, L->ln2), 0), dln2;
  if (d->moe) { /* MoE branch: dout -> (dropout) -> the shard's experts and the shared experts */
    dln2 = px_moe_backward(b, d, L, px_branch_dropout_bwd(b, d, dout, L->mlp_out, L->mlp_dmask), dln2_part, dln2_sh);
  } else {
    dln2 = px_mlp_backward(b, d, L, dout, dln2_part, dln2_sh);
  }
  /* dmid: gradient at the MLP norm's input (x2, or x with a parallel residual) */
  px_ref dmid = d->par_res ? dx : R(px_bld_grad_slot(p, L->x2), 0);
  px_op *o = px_bld_simple(b, PX_OP_ACC, PX_PHASE_BWD, dmid, dout, NOREF, rows * H, (double)d->e);
  o->flags = PX_OPF_ACCUMULATE;
  px_bld_norm_bwd(b, d, dmid, dln2, d->par_res ? R(L->x, 0) : R(L->x2, 0), L->ln2_mean >= 0 ? R(L->ln2_mean, 0) : NOREF,
                  R(L->ln2_rstd, 0), L->w_ln2, L->b_ln2, rows);
  if (d->rcm & PX_RCM_LAYERNORM) { /* the attention's norm, and its fp8 twin the projections' weights read */
    norm1(b, d, L, rp);
    px_fp8_cast(b, d, rp, R(L->ln1, 0), false);
  }
  /* Attention branch: the residual's gradient (dout with a parallel residual) */
  px_branch_end_bwd(b, d, d->par_res ? dout : dmid, L->attn_out, L->attn_dmask, L->attn_part, L->ctx, L->w_o, L->b_o,
                    d->OW, -1);
  px_ref dln1 = px_attn_backward(b, d, L);
  if (!d->par_res) {
    o = px_bld_simple(b, PX_OP_ACC, PX_PHASE_BWD, dx, dmid, NOREF, rows * H, (double)d->e);
    o->flags = PX_OPF_ACCUMULATE;
  }
  px_bld_norm_bwd(b, d, dx, dln1, R(L->x, 0), L->ln1_mean >= 0 ? R(L->ln1_mean, 0) : NOREF, R(L->ln1_rstd, 0), L->w_ln1,
                  L->b_ln1, rows);
}

/* What per-op recomputation keeps beside the layer's input: the outputs torchtitan's policy saves, which its
 * backward reads: q's projection (before RoPE and the q norm), v's, the attention's output (not its fp8 copy,
 * which the backward makes again) and row statistics, w1's output (gate, or the GELU's pre-activation), wo's
 * reduce-scatter's output with SP; and where PyTorch runs eagerly, w2's output (its reduce-scatter's with SP),
 * which its checkpoint stores though no gradient reads it (torch.compile's partitioner drops it; with SP eager
 * PyTorch stores w2's product too, which is not counted). */
static void keep_saved_op(px_bld *b, const px_dims *d, const px_layer_slots *L) {
  px_plan *p = b->p;
  bool eager = p->par.elementwise == PX_ELEMWISE_EAGER;
  int saved[] = {L->q_pre >= 0 ? L->q_pre : L->q,
                 L->v,
                 L->lse,
                 L->ctx,
                 d->swiglu ? L->gate : L->fc1,
                 d->sp && !d->par_res ? L->attn_out : -1,
                 eager && !d->par_res ? L->mlp_out : -1};
  for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
    if (saved[i] >= 0) px_bld_keep(b, R(saved[i], 0));
}

void px_layer_keep_saved(px_bld *b, const px_dims *d, const px_layer_slots *L, px_recompute rc) {
  px_bld_keep(b, R(L->x, 0));
  px_bld_keep(b, R(L->out, 1));
  if (rc == PX_RECOMPUTE_FULL) return;
  if (rc == PX_RECOMPUTE_OP) {
    keep_saved_op(b, d, L);
    return;
  }
  px_plan *p = b->p;
  px_attn_view a = px_attn_view_of(d, L); /* what the attention's backward reads (with CP: gathered or head-split) */
  bool norm1_rc = d->rcm & PX_RCM_LAYERNORM, norm2_rc = norm2_recomputed(p, d);
  bool mlp_rc = !d->moe && (d->rcm & PX_RCM_MLP);
  /* with fp8 the linear layers' inputs as their fp8 twins (the weight gradients' operands); the bf16
   * context only for the fused attention's backward where it reads it (not CP a2a's: the head-split one, a.ctx),
   * the bf16 MoE norm output for the router's */
  int n1 = norm1_rc ? -1 : L->ln1_mean, r1 = norm1_rc ? -1 : L->ln1_rstd, n2 = norm2_rc ? -1 : L->ln2_mean,
      r2 = norm2_rc ? -1 : L->ln2_rstd; /* the norms' statistics made again with their outputs */
  int saved[] = {n1,                  r1,           L->lse,
                 L->attn_dmask,       L->x2,        n2,
                 r2,                  L->mlp_dmask, d->f8 && d->flash && a.ctx.slot == L->ctx ? L->ctx : -1,
                 d->moe && !norm2_rc ? L->ln2 : -1,
                 d->mla && (d->rcm & PX_RCM_MLA_UP_PROJ) ? L->k_pe : -1};
  for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
    if (saved[i] >= 0) px_bld_keep(b, R(saved[i], 0));
  /* a linear layer's input, for its weight's or its adapters' gradients: not a frozen one's without adapters */
  bool qkv_in = px_linear_needs_input(p, d->mla ? L->w_kv_down : L->w_qkv), fc1_in = px_linear_needs_input(p, L->w_fc1);
  if (norm1_rc) qkv_in = false; /* the norms' outputs made again from x and x2 */
  if (norm2_rc) fc1_in = false;
  if (mlp_rc && !norm2_rc) px_bld_keep(b, R(L->ln2, 0)); /* the recomputed MLP's input, as its checkpoint keeps it */
  if (mlp_rc) fc1_in = false;
  if (qkv_in) px_bld_keep(b, px_fp8_twin(p, d, R(L->ln1, 0)));
  if (px_linear_needs_input(p, L->w_o) || d->flash) px_bld_keep(b, px_fp8_twin(p, d, R(L->ctx, 0)));
  for (int w = 0; w < (mlp_rc ? 2 : 4); w++) /* a recomputed MLP makes its adapters' again */
    px_linear_adapter_keep(b, (int[]){L->w_qkv, L->w_o, L->w_fc1, L->w_fc2}[w]);
  if (!d->moe && fc1_in)
    px_bld_keep(b, px_fp8_twin(p, d, R(L->ln2, 0)));
  else if (d->f8 && d->Fs > 0 && !norm2_rc)
    px_bld_keep(b, px_fp8_twin(p, d, R(L->ln2_full, 0))); /* the shared experts' */
  /* the MLP's: the dense one's, or the router's choice, the rows the local experts took (and their gates, which
   * the activation applied) and computed, and the shared experts' */
  int latent[] = {L->q_lat, L->q_latn, L->q_rstd, L->kv_lat, L->kv_latn, L->kv_rstd, /* MLA's, the q/k norms' */
                  L->q_pre, L->k_pre, L->qh_rstd, L->kh_rstd};
  for (size_t i = 0; i < sizeof latent / sizeof *latent; i++)
    if (latent[i] >= 0) px_bld_keep(b, R(latent[i], 0));
  int dense[] = {L->fc1, L->gate, L->up, L->act};
  int moe[] = {L->moe_probs, L->moe_idx, L->moe_counts, L->moe_recv, L->moe_recv_w, L->exp_gate, L->exp_up,
               L->exp_fc1,   L->exp_act, L->sh_gate,    L->sh_up,    L->sh_fc1,     L->sh_act};
  const int *mlp = d->moe ? moe : dense;
  size_t nmlp = d->moe ? sizeof moe / sizeof *moe : sizeof dense / sizeof *dense;
  for (size_t i = 0; i < nmlp; i++) {
    int s = mlp[i];
    bool gemm_in =
        s == L->act || s == L->moe_recv || s == L->exp_act || s == L->sh_act; /* read by a weight gradient only */
    if (s == L->act && !px_linear_needs_input(p, L->w_fc2)) continue;
    if (mlp_rc || (s == L->exp_act && (d->rcm & PX_RCM_MOE_ACT))) continue; /* made again in the backward */
    if (s >= 0) px_bld_keep(b, gemm_in ? px_fp8_twin(p, d, R(s, 0)) : R(s, 0));
  }
  if (!(d->mla && (d->rcm & PX_RCM_MLA_UP_PROJ))) px_bld_keep(b, a.q), px_bld_keep(b, a.k), px_bld_keep(b, a.v);
  if (a.ctx.slot != L->ctx) px_bld_keep(b, a.ctx);
  if (!d->sp && qkv_in) px_bld_keep(b, px_fp8_twin(p, d, R(L->ln1_full, 0)));
  if (!d->sp && (fc1_in || (d->moe && !norm2_rc)))
    px_bld_keep(b, d->moe ? R(L->ln2_full, 0) : px_fp8_twin(p, d, R(L->ln2_full, 0)));
  if (!(d->rcm & PX_RCM_CORE_ATTN) && !d->flash) {
    px_bld_keep(b, R(L->probs, 0));
    if (d->drop) px_bld_keep(b, R(L->probs_drop, 0)), px_bld_keep(b, R(L->attn_mask, 0));
  }
}
