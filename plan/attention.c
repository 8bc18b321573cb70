/* The attention of a layer block: q, k, v from the
 * norm's output (multi-head latent attention too), RoPE, the unfused or
 * fused attention with context parallelism, and their backward. */
#include "plan/attention.h"

#include "plan/fp8.h"
#include "plan/linear.h"

/* The sinks' gradient (gpt-oss's sink logits, trained), or none. */
static px_ref sinks_grad(const px_plan *p, const px_layer_slots *L) {
  int g = L->w_sinks >= 0 ? px_bld_grad_of(p, L->w_sinks) : -1;
  return g >= 0 ? R(g, 0) : NOREF;
}

/* Scores, causal softmax and attention-probability dropout. */
static void attention_core(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_op *o = px_bld_op(b, PX_OP_ATTN_SCORES, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(L->q, 0), o->in[1] = R(L->k, 0);
  o->out[0] = R(L->scores, 0);
  o->dim[0] = d->B, o->dim[1] = d->S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  px_bld_gemm_cost(o, (double)d->S, (double)d->S, (double)d->D, (double)(d->B * d->HQ), (double)d->e, (double)d->e);
  o = px_bld_op(b, PX_OP_SOFTMAX, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(L->scores, 0);
  o->in[1] = L->w_sinks >= 0 ? R(L->w_sinks, 0) : NOREF; /* gpt-oss: a logit of the denominator's alone */
  o->out[0] = R(L->probs, 0);
  o->dim[0] = d->B * d->HQ, o->dim[1] = d->S, o->dim[2] = d->HQ;
  if (d->window > 0) o->flags |= PX_OPF_WINDOW; /* the scores' GEMMs stay whole: Megatron's unfused path */
  px_bld_elementwise(o, (double)(d->B * d->HQ * d->S * d->S), (double)(d->B * d->HQ * d->S * d->S), (double)d->e);
  if (d->drop)
    px_bld_dropout(b, d, ph, R(L->probs_drop, 0), R(L->attn_mask, 0), R(L->probs, 0), NOREF, d->HQ, d->S, d->S, 1, 0);
}

/* The probabilities' product with the values into ctx. */
static void attention_context(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref ctx) {
  px_op *o = px_bld_op(b, PX_OP_ATTN_CONTEXT, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(L->probs_drop, 0), o->in[1] = R(L->v, 0);
  o->out[0] = ctx;
  o->dim[0] = d->B, o->dim[1] = d->S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  px_bld_gemm_cost(o, (double)d->S, (double)d->D, (double)d->S, (double)(d->B * d->HQ), (double)d->e, (double)d->e);
}

/* ---- multi-head latent attention (DeepSeek-V2/V3) ----
 *
 * The queries from a low-rank latent (q_down to q_lora_rank, its RMSNorm,
 * q_up to heads x (nope + rope); or one q projection), keys and values from
 * a shared latent (kv_down to kv_lora_rank plus one RoPE key head, its
 * RMSNorm, kv_up to heads x (nope + v)). Under TP, Megatron-Core's layout
 * (megatron/core/transformer/multi_latent_attention.py, MLASelfAttention,
 * and gpt_layer_specs.py's MLA spec, NVIDIA/Megatron-LM at
 * d98e8a64ddf34856e74b24714e3bedb2f5a39553): the down projections
 * (backend.linear(): TELinear, parallel_mode "duplicated") and the latent
 * norms replicated and run on the layer input as it comes, its sequence
 * shard with SP; the up projections (and the one q projection)
 * column-parallel; the output projection row-parallel. So with SP the
 * forward all-gathers the normed latents (q_lora_rank and kv_lora_rank
 * wide) and the RoPE key (gather_from_sequence_parallel_region), not the
 * hidden states, and the backward reduce-scatters their gradients; without
 * SP the column-parallel up projections' input gradients are all-reduced
 * (copy_to_tensor_model_parallel_region's backward) and so is the RoPE
 * key's (each rank's heads give part of it: Megatron-LM issue #1699, the
 * all-reduce of pull request #6839), and the layer input's gradient is then
 * whole on every rank: no further reduction. The down projections' and
 * norms' weight gradients are partial over the sequence shards with SP
 * (summed over TP with the optimizer's, as the layer norms'). Only the one
 * q projection (no q_lora_rank) reads the gathered hidden states and
 * reduces its input gradient over TP, as the dense qkv does.
 *
 * k's RoPE columns are the one RoPE head's, the same for every head: the
 * RoPE op reads k_pe (in[2], the RoPE dims in dim[5]) and widens k, which
 * kv_up writes as (rows, heads x nope), to (rows, heads, nope + rope) in
 * place; its backward narrows dk back and writes k_pe's gradient (out[2]). */

void px_attn_mla_slots(px_plan *p, const px_dims *d, px_layer_slots *L) {
  int *all[] = {&L->q_lat,     &L->q_latn,    &L->q_rstd,     &L->kv_lat,      &L->k_pe,
                &L->kv_latn,   &L->kv_rstd,   &L->q_latn_full, &L->kv_latn_full, &L->k_pe_full,
                &L->w_q_down,  &L->w_q_norm,  &L->w_q_up,     &L->w_kv_down,   &L->w_kv_norm,
                &L->w_kv_up};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) *all[i] = -1;
  if (!d->mla) return;
  px_dtype a = d->act;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  /* (B, Sl, width): the shard the replicated down projections and norms make; (B, S, width): gathered */
#define MLA_ACT(name, width) px_bld_slot(p, name, PX_SLOT_ACT, a, B, Sl, width, 1)
#define MLA_FULL(shard, name, width) (d->sp ? px_bld_slot(p, name, PX_SLOT_ACT, a, B, S, width, 1) : (shard))
  if (d->QL > 0) {
    L->q_lat = MLA_ACT("q_lat", d->QL);
    L->q_latn = MLA_ACT("q_latn", d->QL);
    L->q_rstd = px_bld_slot(p, "q_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
    L->q_latn_full = MLA_FULL(L->q_latn, "q_latn_full", d->QL);
    L->w_q_down = px_bld_param(p, d, "q_down_w", d->QL, H, true, true);
    L->w_q_norm = px_bld_param(p, d, "q_norm_w", d->QL, 1, true, true);
    L->w_q_up = px_bld_param(p, d, "q_up_w", d->QW, d->QL, false, false);
  } else {
    L->w_q_up = px_bld_param(p, d, "q_up_w", d->QW, H, false, false); /* one query projection */
  }
  L->kv_lat = MLA_ACT("kv_lat", d->KL);
  L->k_pe = MLA_ACT("k_pe", d->Dr);
  L->kv_latn = MLA_ACT("kv_latn", d->KL);
  L->kv_rstd = px_bld_slot(p, "kv_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  L->kv_latn_full = MLA_FULL(L->kv_latn, "kv_latn_full", d->KL);
  L->k_pe_full = MLA_FULL(L->k_pe, "k_pe_full", d->Dr);
#undef MLA_ACT
#undef MLA_FULL
  L->w_kv_down = px_bld_param(p, d, "kv_down_w", d->KL + d->Dr, H, true, true);
  L->w_kv_norm = px_bld_param(p, d, "kv_norm_w", d->KL, 1, true, true);
  L->w_kv_up = px_bld_param(p, d, "kv_up_w", d->HKV * d->Dn + d->VW, d->KL, false, false);
}

/* RMSNorm of rows of width columns (MLA's latents: B S rows; q/k norms: a row per token and head) and its
 * backward. */
static void latent_norm(px_bld *b, const px_dims *d, px_phase ph, px_ref y, px_ref rstd, px_ref x, int w, int64_t rows,
                        int64_t width) {
  px_op *o = px_bld_op(b, PX_OP_NORM, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->in[1] = R(w, 0);
  o->out[0] = y, o->out[1] = rstd;
  o->dim[0] = rows, o->dim[1] = width;
  px_bld_elementwise(o, (double)(rows * width), (double)(rows * width), (double)d->e);
  px_bld_eager(b, o, (double)(rows * width), (double)d->e);
}

static void latent_norm_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref dy, px_ref x, px_ref rstd, int w,
                            int64_t rows, int64_t width) {
  px_op *o = px_bld_op(b, PX_OP_NORM_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy, o->in[1] = x, o->in[2] = rstd, o->in[4] = R(w, 0);
  o->out[0] = dx, o->out[1] = R(px_bld_grad_of(b->p, w), 0);
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = rows, o->dim[1] = width;
  px_bld_elementwise(o, (double)(3 * rows * width), (double)(rows * width), (double)d->e);
  px_bld_eager(b, o, (double)(rows * width), (double)d->e);
}

/* ---- per-head q/k norms (Qwen3; Megatron's qk_layernorm) ----
 *
 * An RMSNorm of each head's query and key (head_dim wide, one weight of
 * head_dim for the query heads and one for the key heads, replicated over
 * TP: each TP rank's heads give part of its gradient, summed over TP with
 * the optimizer's) between the q/k projection and RoPE; the projection's
 * outputs are kept for the norms' backward. The executors refuse it
 * (planned and simulated only). */

void px_attn_qk_norm_slots(px_plan *p, const px_dims *d, px_layer_slots *L) {
  L->q_pre = L->k_pre = L->qh_rstd = L->kh_rstd = L->w_q_head_norm = L->w_k_head_norm = -1;
  /* per-op recomputation keeps q's projection, which RoPE rotates into q (kept without RoPE; normed first with
   * the q/k norms) */
  if (!d->qk_norm && d->rc_op && d->rope && !d->mla)
    L->q_pre = px_bld_slot(p, "q_pre", PX_SLOT_ACT, d->act, d->B, d->S, d->HQ, d->D);
  if (!d->qk_norm) return;
  L->q_pre = px_bld_slot(p, "q_pre", PX_SLOT_ACT, d->act, d->B, d->S, d->HQ, d->D);
  L->k_pre = px_bld_slot(p, "k_pre", PX_SLOT_ACT, d->act, d->B, d->S, d->HKV, d->D);
  L->qh_rstd = px_bld_slot(p, "q_head_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, d->B * d->S * d->HQ, 1, 1, 1);
  L->kh_rstd = px_bld_slot(p, "k_head_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, d->B * d->S * d->HKV, 1, 1, 1);
  int *w[] = {&L->w_q_head_norm, &L->w_k_head_norm};
  const char *names[] = {"q_head_norm_w", "k_head_norm_w"};
  for (int i = 0; i < 2; i++) {
    *w[i] = px_bld_param(p, d, names[i], d->D, 1, true, false);
    int g = px_bld_grad_of(p, *w[i]); /* none when frozen */
    if (g >= 0) p->slots[*w[i]].sp_partial = p->slots[g].sp_partial = d->T > 1;
  }
}

/* Without SP every TP rank runs the replicated down projections on the whole sequence alike: the FLOPs of the
 * ops added to the block (and its W block) since n0 (w0) are the same work on every rank (px_block.dup_flops). */
static void count_duplicated(px_bld *b, const px_dims *d, int32_t n0, int32_t w0) {
  for (int32_t k = n0; !d->sp && d->T > 1 && k < b->b->nops; k++) b->b->dup_flops += b->b->ops[k].flops;
  for (int32_t k = w0; !d->sp && d->T > 1 && b->w && k < b->w->b->nops; k++)
    b->w->b->dup_flops += b->w->b->ops[k].flops;
}

/* The query up projection from the normed latent (gathered over TP with SP), or the one q projection from the
 * whole sequence's norm output x_full. */
static void mla_q_up(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x_full) {
  int64_t rows_full = d->B * d->S;
  if (d->QL > 0) {
    px_ref q_latn = px_bld_tp_gather(b, d, ph, R(L->q_latn, 0), R(L->q_latn_full, 0));
    px_linear(b, d, ph, q_latn, L->w_q_up, -1, R(L->q, 0), NOREF, NOREF, rows_full, d->QW, 0, 0, d->QL);
  } else {
    px_linear(b, d, ph, x_full, L->w_q_up, -1, R(L->q, 0), NOREF, NOREF, rows_full, d->QW, 0, 0, d->H);
  }
}

/* The keys' and values' up projection from the normed latent, and the RoPE key, gathered over TP with SP. */
static void mla_kv_up(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_ref kv_latn = px_bld_tp_gather(b, d, ph, R(L->kv_latn, 0), R(L->kv_latn_full, 0));
  px_bld_tp_gather(b, d, ph, R(L->k_pe, 0), R(L->k_pe_full, 0));
  px_linear(b, d, ph, kv_latn, L->w_kv_up, -1, R(L->k, 0), R(L->v, 0), NOREF, d->B * d->S, d->HKV * d->Dn, d->VW, 0,
            d->KL);
}

/* q, k, v from the norm's output: x its shard (B Sl rows), x_full the whole sequence (the one q projection's). */
static void mla_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x, px_ref x_full) {
  int64_t rows = d->B * d->Sl, H = d->H;
  if (d->QL > 0) {
    int32_t n0 = b->b->nops;
    px_linear(b, d, ph, x, L->w_q_down, -1, R(L->q_lat, 0), NOREF, NOREF, rows, d->QL, 0, 0, H);
    if (ph != PX_PHASE_RECOMPUTE) count_duplicated(b, d, n0, 0);
    latent_norm(b, d, ph, R(L->q_latn, 0), R(L->q_rstd, 0), R(L->q_lat, 0), L->w_q_norm, rows, d->QL);
  }
  mla_q_up(b, d, L, ph, x_full);
  int32_t n0 = b->b->nops;
  px_linear(b, d, ph, x, L->w_kv_down, -1, R(L->kv_lat, 0), R(L->k_pe, 0), NOREF, rows, d->KL, d->Dr, 0, H);
  if (ph != PX_PHASE_RECOMPUTE) count_duplicated(b, d, n0, 0);
  latent_norm(b, d, ph, R(L->kv_latn, 0), R(L->kv_rstd, 0), R(L->kv_lat, 0), L->w_kv_norm, rows, d->KL);
  mla_kv_up(b, d, L, ph);
}

/* A column-parallel up projection's backward from its output gradient dy to
 * its input's (a latent's, partial over the TP ranks' heads), reduced over
 * TP into the shard's gradient (reduce-scattered with SP); returns it. The
 * weight gradient reads the gathered latent (gathered again with SP). */
static px_ref mla_up_bwd(px_bld *b, const px_dims *d, int w, int shard, int full, px_ref dy0, px_ref dy1, int64_t n0,
                         int64_t n1, int64_t cols) {
  px_plan *p = b->p;
  px_ref dfull = R(px_bld_grad_slot(p, full), 0), dshard = R(px_bld_grad_slot(p, shard), 0);
  px_ref x = px_linear_wgrad_input(b, d, w, R(shard, 0), R(full, 0));
  px_linear_bwd(b, d, dfull, x, R(shard, 0), w, -1, dy0, NOREF, dy1, NOREF, d->B * d->S, n0, n1, 0, cols, NULL);
  return px_bld_tp_reduce_cols(b, d, PX_PHASE_BWD, dfull, dshard, cols);
}

/* From dq, dk, dv and the RoPE key's gradient to the gradient of the norm's
 * output: dx its shard's (whole over TP), x its shard, x_full and dx_part the
 * whole sequence's (the one q projection's). */
static px_ref mla_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref x, px_ref x_full, px_ref dq,
                           px_ref dk, px_ref dv, px_ref dx_part, px_ref dx) {
  px_plan *p = b->p;
  int64_t rows = d->B * d->Sl, H = d->H;
  px_ref dq_lat = NOREF;
  if (d->QL > 0) {
    px_ref dq_latn = mla_up_bwd(b, d, L->w_q_up, L->q_latn, L->q_latn_full, dq, NOREF, d->QW, 0, d->QL);
    dq_lat = R(px_bld_grad_slot(p, L->q_lat), 0);
    latent_norm_bwd(b, d, dq_lat, dq_latn, R(L->q_lat, 0), R(L->q_rstd, 0), L->w_q_norm, rows, d->QL);
  } else { /* first: its reduction writes dx, which the down projection's backward then adds to */
    px_linear_bwd(b, d, dx_part, x_full, x, L->w_q_up, -1, dq, NOREF, NOREF, NOREF, d->B * d->S, d->QW, 0, 0, H, &dx);
  }
  px_ref dkv_latn = mla_up_bwd(b, d, L->w_kv_up, L->kv_latn, L->kv_latn_full, dk, dv, d->HKV * d->Dn, d->VW, d->KL);
  px_ref dk_pe = px_bld_tp_reduce_cols(b, d, PX_PHASE_BWD, R(px_bld_grad_slot(p, L->k_pe_full), 0),
                                       R(px_bld_grad_slot(p, L->k_pe), 0), d->Dr);
  px_ref dkv_lat = R(px_bld_grad_slot(p, L->kv_lat), 0);
  latent_norm_bwd(b, d, dkv_lat, dkv_latn, R(L->kv_lat, 0), R(L->kv_rstd, 0), L->w_kv_norm, rows, d->KL);
  int32_t n0 = b->b->nops, w0 = b->w ? b->w->b->nops : 0;
  px_linear_bwd(b, d, dx, x, NOREF, L->w_kv_down, -1, dkv_lat, NOREF, dk_pe, NOREF, rows, d->KL, d->Dr, 0, H, NULL);
  if (d->QL > 0)
    px_linear_bwd(b, d, dx, x, NOREF, L->w_q_down, -1, dq_lat, NOREF, NOREF, NOREF, rows, d->QL, 0, 0, H, NULL);
  count_duplicated(b, d, n0, w0);
  return dx;
}

px_attn_view px_attn_view_of(const px_dims *d, const px_layer_slots *L) {
  px_attn_view a = {R(L->q, 0), R(L->k, 0), R(L->v, 0), R(L->ctx, 0), d->S, d->S, d->HQ, d->HKV};
  if (d->C == 1) return a;
  a.sk = d->S * d->C;
  if (d->cp_algo == PX_CP_ALLGATHER) a.k = R(L->k_cp, 0), a.v = R(L->v_cp, 0);
  if (d->cp_algo == PX_CP_A2A) {
    a.q = R(L->q_cp, 0), a.k = R(L->k_cp, 0), a.v = R(L->v_cp, 0), a.ctx = R(L->ctx_cp, 0);
    a.sq = a.sk, a.hq = d->HQ / d->C, a.hkv = d->HKV / d->C;
  }
  return a;
}

/* A CP collective of a (B, rows, heads, D) activation: an all-gather or
 * reduce-scatter along the sequence (through a workspace of the gathered
 * size in rank-major order when B > 1), or an all-to-all. */
static void cp_coll(px_bld *b, const px_dims *d, px_op_kind kind, px_phase ph, px_ref in, px_ref out, int64_t heads,
                    bool to_heads) {
  int64_t local = d->B * d->S * heads * d->D, full = local * d->C;
  int64_t n_in = kind == PX_OP_REDUCE_SCATTER ? full : local, n_out = kind == PX_OP_ALLGATHER ? full : local;
  px_op *o = px_bld_coll(b, d, kind, PX_GROUP_CP, ph, in, out, n_in, n_out, d->act, d->C);
  if (kind == PX_OP_ALLTOALL) { /* through per-rank blocks: what is sent, then what arrives */
    o->dim[3] = d->S, o->dim[4] = heads, o->dim[5] = d->D;
    if (to_heads) o->flags |= PX_OPF_TO_HEADS;
    o->out[1] = R(px_bld_slot(b->p, "a2a_ws", PX_SLOT_WORKSPACE, d->act, 2, d->B * d->S, heads, d->D), 0);
    o->bytes *= 2.0;
    return;
  }
  o->flags |= PX_OPF_SEQ_AXIS;
  if (d->B > 1) o->out[1] = R(px_bld_slot(b->p, "cp_ws", PX_SLOT_WORKSPACE, d->act, d->B, d->S * d->C, heads, d->D), 0);
}

uint16_t px_attn_format_flags(px_attn_format f) {
  return f == PX_ATTN_BF16 ? 0 : (uint16_t)(PX_OPF_FP8 | (f == PX_ATTN_MXFP8 ? PX_OPF_MXFP8 : 0));
}

/* A fused attention op's flags of its kernel's cost: the sliding window, the operands' format, the kernel */
static uint16_t flash_flags(const px_dims *d) {
  return (uint16_t)((d->window > 0 ? PX_OPF_WINDOW : 0) | px_attn_format_flags(d->attn_fmt) |
                    (d->flash2 ? PX_OPF_FLASH2 : 0));
}

px_attn_format px_attn_op_format(const px_op *op) {
  return op->flags & PX_OPF_MXFP8 ? PX_ATTN_MXFP8 : op->flags & PX_OPF_FP8 ? PX_ATTN_FP8 : PX_ATTN_BF16;
}

/* The ring's flash op: its transfers (bytes each rank sends over the CP
 * ring, one block a hop) and the double buffers the blocks arrive in. */
static void ring_op(px_bld *b, const px_dims *d, const px_layer_slots *L, px_op *o, bool bwd) {
  double block = (double)(d->B * d->S * (d->KW + d->VW)) * (double)d->e; /* one rank's K and V */
  o->flags |= PX_OPF_CP_RING;
  o->group = PX_GROUP_CP;
  o->coll = PX_COLL_P2P;
  o->coll_bytes = (uint64_t)block * (bwd ? 2 : 1); /* the backward's hops carry dK, dV too */
  o->wire_bytes = bwd ? (double)(2 * d->C - 1) * block : (double)(d->C - 1) * block;
  int64_t per = bwd ? 4 : 2; /* k, v (and dk, dv) of a block */
  /* per token row: two buffers of a block's rows of k, v (and dk, dv), then backward with sinks each query head's
   * probability of the keys seen so far (B, HQ, S) */
  int64_t row = 2 * per * d->HKV * d->D + (bwd && L->w_sinks >= 0 ? d->HQ : 0);
  int ws = px_bld_slot(b->p, bwd ? "ring_bwd_ws" : "ring_ws", PX_SLOT_WORKSPACE, d->act, d->B * d->S, row, 1, 1);
  o->out[bwd ? 4 : 2] = R(ws, 0);
  if (!bwd) /* a block's partial context and log-sum-exp, merged into the running ones */
    o->out[3] = R(px_bld_slot(b->p, "ring_part", PX_SLOT_WORKSPACE, PX_DTYPE_FP32, d->B, d->S, d->HQ, d->D + 1), 0);
}

static void flash_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_attn_view a = px_attn_view_of(d, L);
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    cp_coll(b, d, PX_OP_ALLGATHER, ph, R(L->k, 0), a.k, d->HKV, false);
    cp_coll(b, d, PX_OP_ALLGATHER, ph, R(L->v, 0), a.v, d->HKV, false);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->q, 0), a.q, d->HQ, true);
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->k, 0), a.k, d->HKV, true);
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->v, 0), a.v, d->HKV, true);
  }
  px_op *o = px_bld_op(b, PX_OP_FLASH_ATTN, PX_STREAM_COMPUTE, ph);
  o->in[0] = a.q, o->in[1] = a.k, o->in[2] = a.v;
  if (L->w_sinks >= 0) o->in[3] = R(L->w_sinks, 0); /* folded into each row's log-sum-exp */
  o->out[0] = a.ctx, o->out[1] = R(L->lse, 0);
  o->dim[0] = d->B, o->dim[1] = a.sq, o->dim[2] = a.hq, o->dim[3] = a.hkv, o->dim[4] = d->D, o->dim[5] = a.sk;
  o->flags |= flash_flags(d);
  o->window = d->window;
  o->flops = 2.0 * (double)(d->B * a.hq) * (double)a.sq * (double)a.sk * (double)(d->D + d->Dv) * d->attn_frac;
  px_bld_elementwise(o, (double)(d->B * ((d->D + d->Dv) * a.sq * a.hq + (d->D + d->Dv) * a.sk * a.hkv)), 0,
                     (double)d->e);
  if (d->C > 1 && d->cp_algo == PX_CP_RING) ring_op(b, d, L, o, false);
  if (d->C > 1 && d->cp_algo == PX_CP_A2A) cp_coll(b, d, PX_OP_ALLTOALL, ph, a.ctx, R(L->ctx, 0), d->HQ, false);
}

/* The fused attention's backward from dctx to dq, dk, dv (accumulated). */
static void flash_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dctx, px_ref dq, px_ref dk,
                           px_ref dv) {
  px_plan *p = b->p;
  px_attn_view a = px_attn_view_of(d, L);
  px_ref gq = dq, gk = dk, gv = dv, gctx = dctx; /* the gradients the flash backward reads and writes */
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    gk = R(px_bld_grad_slot(p, L->k_cp), 0), gv = R(px_bld_grad_slot(p, L->v_cp), 0);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    gq = R(px_bld_grad_slot(p, L->q_cp), 0), gk = R(px_bld_grad_slot(p, L->k_cp), 0),
    gv = R(px_bld_grad_slot(p, L->v_cp), 0);
    gctx = R(px_bld_grad_slot(p, L->ctx_cp), 0);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, dctx, gctx, d->HQ, true);
  }
  px_op *o = px_bld_op(b, PX_OP_FLASH_ATTN_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = gctx, o->in[1] = a.q, o->in[2] = a.k, o->in[3] = a.v, o->in[4] = a.ctx, o->in[5] = R(L->lse, 0);
  o->out[0] = gq, o->out[1] = gk, o->out[2] = gv;
  o->out[3] = sinks_grad(p, L);
  o->flags = PX_OPF_ACCUMULATE | flash_flags(d);
  o->window = d->window;
  o->dim[0] = d->B, o->dim[1] = a.sq, o->dim[2] = a.hq, o->dim[3] = a.hkv, o->dim[4] = d->D, o->dim[5] = a.sk;
  o->flops = 4.0 * (double)(d->B * a.hq) * (double)a.sq * (double)a.sk * (double)(d->D + d->Dv) * d->attn_frac;
  double q_el = (double)(d->B * a.sq * a.hq * d->D), kv_el = (double)(d->B * a.sk * a.hkv * d->D);
  px_bld_elementwise(o, 3 * q_el + 2 * kv_el, q_el + 2 * kv_el, (double)d->e);
  if (d->C > 1 && d->cp_algo == PX_CP_RING) ring_op(b, d, L, o, true);
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    cp_coll(b, d, PX_OP_REDUCE_SCATTER, PX_PHASE_BWD, gk, dk, d->HKV, false);
    cp_coll(b, d, PX_OP_REDUCE_SCATTER, PX_PHASE_BWD, gv, dv, d->HKV, false);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gq, dq, d->HQ, false);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gk, dk, d->HKV, false);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gv, dv, d->HKV, false);
  }
}

/* Backward of the unfused attention (with selective recomputation first). */
static void attention_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dctx,
                               px_ref dq, px_ref dk, px_ref dv) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S;
  /* Megatron's selective recomputation checkpoints the whole core attention (Korthikanti et al. 2022, Section 5
   * and Appendix A's FLOPs; Megatron-Core's _checkpointed_attention_forward): the product with the values is
   * redone too, its output a scratch tensor the backward does not read */
  if (d->rcm & PX_RCM_CORE_ATTN) {
    attention_core(b, d, L, PX_PHASE_RECOMPUTE);
    attention_context(b, d, L, PX_PHASE_RECOMPUTE,
                      R(px_bld_slot(p, "ctx_recompute", PX_SLOT_WORKSPACE, d->act, B, S, d->HQ, d->Dv), 0));
  }
  px_ref dprobs_drop = R(px_bld_grad_slot(p, L->probs_drop), 0);
  px_op *o = px_bld_op(b, PX_OP_ATTN_CONTEXT_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dctx, o->in[1] = R(L->probs_drop, 0), o->in[2] = R(L->v, 0);
  o->out[0] = dprobs_drop, o->out[1] = dv;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  px_bld_gemm_cost(o, (double)S, (double)S, (double)d->D, (double)(2 * B * d->HQ), (double)d->e, (double)d->e);
  px_ref dprobs = dprobs_drop;
  if (d->drop) {
    dprobs = R(px_bld_grad_slot(p, L->probs), 0);
    px_bld_dropout_bwd(b, d, dprobs, dprobs_drop, R(L->attn_mask, 0), B * d->HQ * S * S);
  }
  px_ref dscores = R(px_bld_grad_slot(p, L->scores), 0);
  o = px_bld_op(b, PX_OP_SOFTMAX_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dprobs, o->in[1] = R(L->probs, 0);
  o->out[0] = dscores, o->out[1] = sinks_grad(p, L);
  o->flags = PX_OPF_ACCUMULATE | (d->window > 0 ? PX_OPF_WINDOW : 0);
  o->dim[0] = B * d->HQ, o->dim[1] = S, o->dim[2] = d->HQ;
  px_bld_elementwise(o, (double)(2 * B * d->HQ * S * S), (double)(B * d->HQ * S * S), (double)d->e);
  o = px_bld_op(b, PX_OP_ATTN_SCORES_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dscores, o->in[1] = R(L->q, 0), o->in[2] = R(L->k, 0);
  o->out[0] = dq, o->out[1] = dk;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  px_bld_gemm_cost(o, (double)S, (double)d->D, (double)S, (double)(2 * B * d->HQ), (double)d->e, (double)d->e);
}

/* q's projection before RoPE: q itself (rotated in place) but where per-op recomputation keeps it apart */
static px_ref q_projected(const px_dims *d, const px_layer_slots *L) {
  return R(!d->qk_norm && L->q_pre >= 0 ? L->q_pre : L->q, 0);
}

/* RoPE on q (from its projection) and k in place (MLA's k from its heads' parts and the one RoPE key). */
static void rope(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  px_op *o = px_bld_op(b, PX_OP_ROPE, PX_STREAM_COMPUTE, ph);
  o->in[0] = q_projected(d, L), o->in[1] = R(L->k, 0);
  o->out[0] = R(L->q, 0), o->out[1] = R(L->k, 0);
  o->dim[0] = d->B, o->dim[1] = d->S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  if (d->mla) o->in[2] = R(L->k_pe_full, 0), o->dim[5] = d->Dr;
  double rotated = (double)(d->B * d->S * (d->mla ? (d->HQ + 1) * d->Dr : d->QW + d->KW)); /* MLA: the RoPE dims */
  px_bld_elementwise(o, rotated, rotated, (double)d->e);
  px_bld_eager(b, o, rotated, (double)d->e);
}

void px_attn_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x_shard) {
  int64_t B = d->B, S = d->S, H = d->H, rows_full = B * S;
  px_ref x = NOREF; /* the whole sequence: MLA's down projections read the shard */
  if (!d->mla || d->QL == 0) x = px_bld_tp_gather(b, d, ph, x_shard, px_fp8_twin(b->p, d, R(L->ln1_full, 0)));
  if (d->mla) {
    mla_forward(b, d, L, ph, x_shard, x);
  } else if (d->qk_norm) {
    px_linear(b, d, ph, x, L->w_qkv, L->b_qkv, R(L->q_pre, 0), R(L->k_pre, 0), R(L->v, 0), rows_full, d->QW, d->KW,
              d->KW, H);
    latent_norm(b, d, ph, R(L->q, 0), R(L->qh_rstd, 0), R(L->q_pre, 0), L->w_q_head_norm, rows_full * d->HQ, d->D);
    latent_norm(b, d, ph, R(L->k, 0), R(L->kh_rstd, 0), R(L->k_pre, 0), L->w_k_head_norm, rows_full * d->HKV, d->D);
  } else {
    px_linear(b, d, ph, x, L->w_qkv, L->b_qkv, q_projected(d, L), R(L->k, 0), R(L->v, 0), rows_full, d->QW, d->KW,
              d->KW, H);
  }
  if (d->rope) rope(b, d, L, ph);
  if (d->flash) {
    flash_forward(b, d, L, ph);
  } else {
    attention_core(b, d, L, ph);
    attention_context(b, d, L, ph, R(L->ctx, 0));
  }
}

void px_attn_recompute_op(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref x_shard) {
  const px_phase rp = PX_PHASE_RECOMPUTE;
  int64_t rows_full = d->B * d->S;
  px_ref x = px_bld_tp_gather(b, d, rp, x_shard, px_fp8_twin(b->p, d, R(L->ln1_full, 0)));
  px_linear(b, d, rp, x, L->w_qkv, L->b_qkv, NOREF, R(d->qk_norm ? L->k_pre : L->k, 0), NOREF, rows_full, d->QW,
            d->KW, d->KW, d->H);
  if (d->qk_norm) {
    latent_norm(b, d, rp, R(L->q, 0), R(L->qh_rstd, 0), R(L->q_pre, 0), L->w_q_head_norm, rows_full * d->HQ, d->D);
    latent_norm(b, d, rp, R(L->k, 0), R(L->kh_rstd, 0), R(L->k_pre, 0), L->w_k_head_norm, rows_full * d->HKV, d->D);
  }
  if (d->rope) rope(b, d, L, rp);
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) { /* the all-gathers, which the policy does not save */
    px_attn_view a = px_attn_view_of(d, L);
    cp_coll(b, d, PX_OP_ALLGATHER, rp, R(L->k, 0), a.k, d->HKV, false);
    cp_coll(b, d, PX_OP_ALLGATHER, rp, R(L->v, 0), a.v, d->HKV, false);
  }
}

px_ref px_attn_backward(px_bld *b, const px_dims *d, const px_layer_slots *L) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, H = d->H, rows_full = B * S;
  px_op *o;
  px_ref dctx = R(px_bld_grad_slot(p, L->ctx), 0);
  px_ref dq = R(px_bld_grad_slot(p, L->q), 0), dk = R(px_bld_grad_slot(p, L->k), 0),
         dv = R(px_bld_grad_slot(p, L->v), 0);
  if (d->mla && (d->rcm & PX_RCM_MLA_UP_PROJ)) { /* q, k, v made again for the attention's backward */
    mla_q_up(b, d, L, PX_PHASE_RECOMPUTE,
             d->QL > 0 ? NOREF
                       : px_bld_tp_gather(b, d, PX_PHASE_RECOMPUTE, px_fp8_twin(p, d, R(L->ln1, 0)),
                                          px_fp8_twin(p, d, R(L->ln1_full, 0))));
    mla_kv_up(b, d, L, PX_PHASE_RECOMPUTE);
    if (d->rope) rope(b, d, L, PX_PHASE_RECOMPUTE);
  }
  if (d->flash) {
    flash_backward(b, d, L, dctx, dq, dk, dv);
  } else {
    attention_backward(b, d, L, dctx, dq, dk, dv);
  }
  if (d->rope) {
    o = px_bld_op(b, PX_OP_ROPE_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dq, o->in[1] = dk;
    o->out[0] = dq, o->out[1] = dk;
    o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
    if (d->mla) /* and the RoPE key's gradient: partial over the TP ranks' heads */
      o->out[2] = R(px_bld_grad_slot(p, L->k_pe_full), 0), o->dim[5] = d->Dr;
    double rotated = (double)(rows_full * (d->mla ? (d->HQ + 1) * d->Dr : d->QW + d->KW));
    px_bld_elementwise(o, rotated, rotated, (double)d->e);
    px_bld_eager(b, o, rotated, (double)d->e);
  }
  if (d->qk_norm) { /* the norms' backward: the gradients of q and k as the projection made them */
    px_ref dq_pre = R(px_bld_grad_slot(p, L->q_pre), 0), dk_pre = R(px_bld_grad_slot(p, L->k_pre), 0);
    latent_norm_bwd(b, d, dq_pre, dq, R(L->q_pre, 0), R(L->qh_rstd, 0), L->w_q_head_norm, rows_full * d->HQ, d->D);
    latent_norm_bwd(b, d, dk_pre, dk, R(L->k_pre, 0), R(L->kh_rstd, 0), L->w_k_head_norm, rows_full * d->HKV, d->D);
    dq = dq_pre, dk = dk_pre;
  }
  px_ref ln1 = px_fp8_twin(p, d, R(L->ln1, 0));
  px_ref dln1_part = R(px_bld_grad_slot(p, L->ln1_full), 0);
  px_ref dln1_sh = R(px_bld_grad_slot(p, L->ln1), 0);
  if (d->mla && d->QL > 0) return mla_backward(b, d, L, ln1, NOREF, dq, dk, dv, dln1_part, dln1_sh);
  px_ref ln1_full = px_linear_wgrad_input(b, d, d->mla ? L->w_q_up : L->w_qkv, ln1, px_fp8_twin(p, d, R(L->ln1_full, 0)));
  return d->mla ? mla_backward(b, d, L, ln1, ln1_full, dq, dk, dv, dln1_part, dln1_sh)
                : px_linear_bwd(b, d, dln1_part, ln1_full, R(L->ln1, 0), L->w_qkv, L->b_qkv, dq, NOREF, dk, dv,
                                rows_full, d->QW, d->KW, d->KW, H, &dln1_sh);
}
