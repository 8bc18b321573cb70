/* The block templates: a layer's (plan/layer.c), and the embedding, the
 * head and loss, p2p, data-parallel synchronisation and the optimizer, each
 * op with its FLOPs, HBM bytes and bytes on the wire (plan/builder.h says
 * how ops and tensors are laid out). plan/program.c orders the blocks into
 * per-stage programs. */
#include "plan/compile.h"

#include <stdlib.h>

#include "plan/attention.h"
#include "plan/fp8.h"
#include "plan/layer.h"
#include "plan/linear.h"

/* ---- embedding, head, communication, optimizer ---- */

typedef struct {
  int tokens, targets, loss, w_emb, wpe, w_lnf, b_lnf, w_head, emb_part, emb, emb_mask, lnf, lnf_mean, lnf_rstd,
      lnf_full, logits, ce_probs;
} stage_slots;

static void stage_slots_make(px_plan *p, const px_dims *d, stage_slots *s) {
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  s->tokens = px_bld_slot(p, "tokens", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1); /* int32, 4 bytes */
  p->slots[s->tokens].role = PX_ROLE_TOKENS;
  s->targets = px_bld_slot(p, "targets", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1);
  p->slots[s->targets].role = PX_ROLE_TARGETS;
  s->loss = px_bld_slot(p, "loss", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1);
  p->slots[s->loss].role = PX_ROLE_LOSS;
  s->w_emb = px_bld_param(p, d, "emb_w", d->Vl, H, false, false);
  s->wpe = d->learned ? px_bld_param(p, d, "pos_w", p->model.max_positions, H, true, true) : -1;
  s->w_lnf = px_bld_param(p, d, "lnf_w", H, 1, true, true);
  s->b_lnf = d->layernorm ? px_bld_param(p, d, "lnf_b", H, 1, true, true) : -1;
  /* Tied embeddings on one stage share the table; across stages the last
   * stage holds a copy kept equal by the embedding-group all-reduce. */
  s->w_head =
      p->model.tied_embeddings && p->par.pp == 1 ? s->w_emb : px_bld_param(p, d, "head_w", d->Vl, H, false, false);
  s->emb_part = d->sp ? px_bld_slot(p, "emb_part", PX_SLOT_ACT, d->act, B, S, H, 1) : -1;
  s->emb = d->drop ? px_bld_slot(p, "emb", PX_SLOT_ACT, d->act, B, Sl, H, 1) : -1;
  s->emb_mask = d->drop ? px_bld_slot(p, "emb_mask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;
  s->lnf = px_bld_slot(p, "lnf", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  s->lnf_rstd = px_bld_slot(p, "lnf_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  s->lnf_mean = d->layernorm ? px_bld_slot(p, "lnf_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  s->lnf_full = d->sp ? px_bld_slot(p, "lnf_full", PX_SLOT_ACT, d->act, B, S, H, 1) : s->lnf;
  s->logits = px_bld_slot(p, "logits", PX_SLOT_ACT, d->act, B * S, d->Vl, 1, 1);
  s->ce_probs = px_bld_slot(p, "ce_probs", PX_SLOT_ACT, PX_DTYPE_FP32, B * S, d->Vl, 1, 1);
}

/* The vocabulary-parallel lookup of tokens (B, S) in table w into out, the full sequence (B, S, H), partial
 * over the TP ranks' vocabulary shards until reduced. */
static void lookup(px_bld *b, const px_dims *d, px_ref tokens, int w, px_ref out) {
  int64_t rows = d->B * d->S;
  px_op *o = px_bld_op(b, PX_OP_EMBED, PX_STREAM_COMPUTE, PX_PHASE_FWD);
  o->in[0] = tokens, o->in[1] = R(w, 0);
  o->out[0] = out;
  o->dim[0] = rows, o->dim[1] = d->H, o->dim[2] = d->Vl, o->dim[3] = b->p->model.vocab;
  px_bld_elementwise(o, (double)(rows * d->H), (double)(rows * d->H), (double)d->e);
}

/* Its backward: dy (B, S, H) added into w's gradient at the tokens' rows (w frozen: dropped, nothing computed). */
static void lookup_bwd(px_bld *b, const px_dims *d, px_ref dy, px_ref tokens, int w) {
  int64_t rows = d->B * d->S;
  px_op *o = px_bld_op(b, PX_OP_EMBED_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy, o->in[1] = tokens;
  o->dim[0] = rows, o->dim[1] = d->H, o->dim[2] = d->Vl, o->dim[3] = b->p->model.vocab;
  if (!px_bld_param_trained(b->p, w)) return;
  o->out[0] = R(px_bld_grad_of(b->p, w), 0);
  o->flags = PX_OPF_ACCUMULATE;
  px_bld_elementwise(o, (double)(rows * d->H), (double)(2 * rows * d->H), (double)d->e);
}

static void embed_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, const stage_slots *s) {
  int64_t B = d->B, Sl = d->Sl, H = d->H;
  px_ref x = R(L->x, 0);
  /* The token lookup fills the full sequence; with TP the partial rows are summed. */
  px_ref target = d->drop ? R(s->emb, 0) : x;
  px_ref part = d->sp ? R(s->emb_part, 0) : target;
  lookup(b, d, R(s->tokens, 0), s->w_emb, part);
  px_bld_tp_reduce(b, d, PX_PHASE_FWD, part, target);
  if (d->learned) {
    px_op *o = px_bld_op(b, PX_OP_POS, PX_STREAM_COMPUTE, PX_PHASE_FWD);
    o->in[0] = target, o->in[1] = R(s->wpe, 0);
    o->out[0] = target;
    o->dim[0] = B, o->dim[1] = Sl, o->dim[2] = H;
    px_bld_elementwise(o, (double)(2 * B * Sl * H), (double)(B * Sl * H), (double)d->e);
  }
  if (d->drop) px_bld_dropout(b, d, PX_PHASE_FWD, x, R(s->emb_mask, 0), target, NOREF, Sl, H, 1, d->sp ? 1 : 0, 0);
  px_bld_keep(b, x);
  if (d->drop && px_bld_param_trained(b->p, s->w_emb)) /* a frozen table's backward reads no mask */
    px_bld_keep(b, R(s->emb_mask, 0));
}

static void embed_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, const stage_slots *s) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  px_ref dx = R(px_bld_grad_slot(p, L->x), 0);
  if (!px_bld_param_trained(p, s->w_emb)) { /* a frozen table: the gradient arriving here (and the tokens the
                                               forward kept) are dropped, nothing computed */
    lookup_bwd(b, d, dx, R(s->tokens, 0), s->w_emb);
    return;
  }
  px_ref demb = dx;
  if (d->drop) {
    demb = R(px_bld_grad_slot(p, s->emb), 0);
    px_bld_dropout_bwd(b, d, demb, dx, R(s->emb_mask, 0), B * Sl * H);
  }
  if (d->learned) {
    px_op *o = px_bld_op(b, PX_OP_POS_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = demb;
    o->out[0] = R(px_bld_grad_of(p, s->wpe), 0);
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = B, o->dim[1] = Sl, o->dim[2] = H;
    px_bld_elementwise(o, (double)(B * Sl * H), (double)(2 * S * H), (double)d->e);
  }
  px_ref dfull = d->sp ? px_bld_tp_gather(b, d, PX_PHASE_BWD, demb, R(px_bld_grad_slot(p, s->emb_part), 0)) : demb;
  lookup_bwd(b, d, dfull, R(s->tokens, 0), s->w_emb);
}

/* ---- multi-token prediction (DeepSeek-V3; Megatron-Core's multi_token_prediction.py at d98e8a6) ----
 *
 * One module on the last stage, its block an instance at layer L + 1 (its parameters group L + 1): the main
 * model's last hidden state h is x at offset -1, the targets are the head's (at -1). RMSNorms of the targets'
 * embedding (the next-but-one token's: the tokens shifted once, as roll_tensor makes them) and of h, eh_proj
 * over their concatenation (2h -> h: two GEMMs over the halves, column-parallel, the output gathered over TP
 * and, with SP, kept as this rank's sequence shard), a decoder layer of the model's kind (x at 0 -> x at +1),
 * a final norm, the shared head and a second loss against the targets shifted once more (the last position
 * masked). It runs as Megatron-Core orders it: after the last layer's forward and before the head's (the
 * targets first loaded here), its backward after the head's, which leaves its share of the hidden state's
 * gradient apart (mtp_head_dx) for the module's backward to add to hnorm's. */
typedef struct {
  int w_emb, w_enorm, w_hnorm, w_eh_e, w_eh_h, w_lnf;
  int emb_part, emb, en, en_rstd, hn, hn_rstd, en_full, hn_full, eh_e, eh_h, eh, eh_ws, dx_full, head_dx, lnf,
      lnf_rstd, lnf_full, logits, ce_probs, loss, targets;
} mtp_slots;

static void mtp_slots_make(px_plan *p, const px_dims *d, const stage_slots *s, mtp_slots *t) {
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H, Hl = d->H / d->T;
  /* the embedding table: the model's on one stage; on the last of several a copy kept equal by the
   * embedding-group all-reduce (the tied head's, or one of its own, as Megatron-Core's mtp_process builds) */
  t->w_emb = p->par.pp == 1 ? s->w_emb : p->model.tied_embeddings ? s->w_head : px_bld_param(p, d, "mtp_emb_w", d->Vl, H, false, false);
  t->w_enorm = px_bld_param(p, d, "mtp_enorm_w", H, 1, true, true);
  t->w_hnorm = px_bld_param(p, d, "mtp_hnorm_w", H, 1, true, true);
  t->w_eh_e = px_bld_param(p, d, "mtp_eh_e_w", Hl, H, false, false);
  t->w_eh_h = px_bld_param(p, d, "mtp_eh_h_w", Hl, H, false, false);
  t->w_lnf = px_bld_param(p, d, "mtp_lnf_w", H, 1, true, true);
  t->emb_part = d->sp ? px_bld_slot(p, "mtp_emb_part", PX_SLOT_ACT, d->act, B, S, H, 1) : -1;
  t->emb = px_bld_slot(p, "mtp_emb", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  t->en = px_bld_slot(p, "mtp_en", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  t->en_rstd = px_bld_slot(p, "mtp_en_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  t->hn = px_bld_slot(p, "mtp_hn", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  t->hn_rstd = px_bld_slot(p, "mtp_hn_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  t->en_full = d->sp ? px_bld_slot(p, "mtp_en_full", PX_SLOT_ACT, d->act, B, S, H, 1) : t->en;
  t->hn_full = d->sp ? px_bld_slot(p, "mtp_hn_full", PX_SLOT_ACT, d->act, B, S, H, 1) : t->hn;
  t->eh_e = px_bld_slot(p, "mtp_eh_e", PX_SLOT_ACT, d->act, B, S, Hl, 1);
  t->eh_h = px_bld_slot(p, "mtp_eh_h", PX_SLOT_ACT, d->act, B, S, Hl, 1);
  t->eh = d->T > 1 ? px_bld_slot(p, "mtp_eh", PX_SLOT_ACT, d->act, B, S, Hl, 1) : -1;
  /* the column gather's landing place: every rank's (B S, h / tp), rank-major */
  t->eh_ws = d->T > 1 ? px_bld_slot(p, "mtp_eh_ws", PX_SLOT_WORKSPACE, d->act, d->T, B * S, Hl, 1) : -1;
  t->dx_full = d->sp ? px_bld_slot(p, "mtp_dx_full", PX_SLOT_ACT_GRAD, d->act, B, S, H, 1) : -1;
  t->head_dx = px_bld_slot(p, "mtp_head_dx", PX_SLOT_ACT_GRAD, d->act, B, Sl, H, 1); /* the head's share of h's */
  t->lnf = px_bld_slot(p, "mtp_lnf", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  t->lnf_rstd = px_bld_slot(p, "mtp_lnf_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  t->lnf_full = d->sp ? px_bld_slot(p, "mtp_lnf_full", PX_SLOT_ACT, d->act, B, S, H, 1) : t->lnf;
  t->logits = px_bld_slot(p, "mtp_logits", PX_SLOT_ACT, d->act, B * S, d->Vl, 1, 1);
  t->ce_probs = px_bld_slot(p, "mtp_ce_probs", PX_SLOT_ACT, PX_DTYPE_FP32, B * S, d->Vl, 1, 1);
  t->loss = px_bld_slot(p, "mtp_loss", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1);
  /* its targets, loaded as the model's are: from the whole sequence, so a CP rank's chunk ends on the next one's
   * token (Megatron-Core's roll_tensor exchanges it between the CP ranks: a few bytes, not costed) */
  t->targets = px_bld_slot(p, "mtp_targets", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1); /* int32, 4 bytes */
  p->slots[t->targets].role = PX_ROLE_MTP_TARGETS;
}

/* The vocabulary-parallel cross-entropy of logits against targets (shift 0: the next tokens; 1: the MTP
 * module's, one further, loaded so, the last position of each sequence masked: -1). LOSS, LOSS_BWD dims: rows,
 * vocab_local, vocab_real, shift (the loss's weight and its positions), tokens a sequence. */
static px_op *loss_op(px_bld *b, const px_dims *d, px_ref logits, px_ref targets, px_ref probs, px_ref loss, int shift) {
  int64_t rows = d->B * d->S;
  px_op *o = px_bld_op(b, PX_OP_LOSS, PX_STREAM_COMPUTE, PX_PHASE_FWD);
  o->in[0] = logits, o->in[1] = targets;
  o->out[0] = probs, o->out[1] = loss;
  o->group = PX_GROUP_TP;
  o->dim[0] = rows, o->dim[1] = d->Vl, o->dim[2] = b->p->model.vocab, o->dim[3] = shift, o->dim[4] = d->S;
  px_bld_elementwise(o, (double)(rows * d->Vl), (double)(rows * d->Vl), 4.0);
  px_bld_eager(b, o, (double)(rows * d->Vl), (double)d->e);
  if ((o->flags & PX_OPF_EAGER) && d->e < 4) /* eager: the logits' fp32 copy (logits.float()) */
    o->out[2] = R(px_bld_slot(b->p, "ce_float", PX_SLOT_WORKSPACE, PX_DTYPE_FP32, rows, d->Vl, 1, 1), 0);
  /* three all-reduces of one float per row: max, sum of exponentials, target logit */
  if (d->T > 1) px_op_coll_bytes(o, PX_COLL_ALLREDUCE, (uint64_t)(3 * rows) * sizeof(float), d->T);
  return o;
}

static px_op *loss_bwd_op(px_bld *b, const px_dims *d, px_ref probs, px_ref targets, px_ref dlogits, int shift) {
  int64_t rows = d->B * d->S;
  px_op *o = px_bld_op(b, PX_OP_LOSS_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = probs, o->in[1] = targets;
  o->out[0] = dlogits;
  o->dim[0] = rows, o->dim[1] = d->Vl, o->dim[2] = b->p->model.vocab, o->dim[3] = shift, o->dim[4] = d->S;
  px_bld_elementwise(o, (double)(rows * d->Vl), (double)(rows * d->Vl), 4.0);
  px_bld_eager(b, o, (double)(rows * d->Vl), (double)d->e);
  if (o->flags & PX_OPF_EAGER) { /* eager: nll_loss's full gradient, and log_softmax's in fp32 before its cast */
    o->out[1] = R(px_bld_slot(b->p, "ce_dnll", PX_SLOT_WORKSPACE, PX_DTYPE_FP32, rows, d->Vl, 1, 1), 0);
    if (d->e < 4) o->out[2] = R(px_bld_slot(b->p, "ce_dlogp", PX_SLOT_WORKSPACE, PX_DTYPE_FP32, rows, d->Vl, 1, 1), 0);
  }
  return o;
}

static void mtp_forward(px_bld *b, const px_dims *d, const px_dims *dl, const px_layer_slots *L, const stage_slots *s,
                        const mtp_slots *t, px_recompute rc) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H, Hl = d->H / d->T;
  px_ref h = R(L->x, -1), targets = R(s->targets, -1);
  /* the next-but-one tokens' embedding (the targets looked up), reduced over the vocabulary shards */
  px_ref part = d->sp ? R(t->emb_part, 0) : R(t->emb, 0);
  lookup(b, d, targets, t->w_emb, part);
  px_bld_tp_reduce(b, d, PX_PHASE_FWD, part, R(t->emb, 0));
  px_bld_norm(b, d, PX_PHASE_FWD, R(t->en, 0), NOREF, R(t->en_rstd, 0), R(t->emb, 0), t->w_enorm, -1, B * Sl);
  px_bld_norm(b, d, PX_PHASE_FWD, R(t->hn, 0), NOREF, R(t->hn_rstd, 0), h, t->w_hnorm, -1, B * Sl);
  /* eh_proj: [en, hn] W^T = en We^T + hn Wh^T, column-parallel over the whole sequence */
  px_ref en = px_bld_tp_gather(b, d, PX_PHASE_FWD, px_fp8_cast(b, d, PX_PHASE_FWD, R(t->en, 0), false),
                               px_fp8_twin(p, d, R(t->en_full, 0)));
  px_ref hn = px_bld_tp_gather(b, d, PX_PHASE_FWD, px_fp8_cast(b, d, PX_PHASE_FWD, R(t->hn, 0), false),
                               px_fp8_twin(p, d, R(t->hn_full, 0)));
  px_linear(b, d, PX_PHASE_FWD, en, t->w_eh_e, -1, R(t->eh_e, 0), NOREF, NOREF, B * S, Hl, 0, 0, H);
  px_linear(b, d, PX_PHASE_FWD, hn, t->w_eh_h, -1, R(t->eh_h, 0), NOREF, NOREF, B * S, Hl, 0, 0, H);
  px_ref eh = d->T > 1 ? R(t->eh, 0) : R(L->x, 0);
  px_bld_simple(b, PX_OP_ADD, PX_PHASE_FWD, eh, R(t->eh_e, 0), R(t->eh_h, 0), B * S * Hl, (double)d->e);
  if (d->T > 1) { /* gathered over the hidden columns (this rank keeps its sequence shard with SP) */
    px_op *o = px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_TP, PX_PHASE_FWD, eh, R(L->x, 0), B * S * Hl, B * S * H, d->act,
                    d->T);
    o->flags |= PX_OPF_COLS;
    o->out[1] = R(t->eh_ws, 0);
    o->dim[3] = S;
  }
  px_layer_forward(b, dl, L, PX_PHASE_FWD, true);
  px_layer_keep_saved(b, dl, L, rc);
  /* the module's own final norm, the shared head, the second loss */
  px_bld_norm(b, d, PX_PHASE_FWD, R(t->lnf, 0), NOREF, R(t->lnf_rstd, 0), R(L->x, 1), t->w_lnf, -1, B * Sl);
  px_ref lnf = px_bld_tp_gather(b, d, PX_PHASE_FWD, R(t->lnf, 0), R(t->lnf_full, 0));
  px_linear(b, d, PX_PHASE_FWD, lnf, s->w_head, -1, R(t->logits, 0), NOREF, NOREF, B * S, d->Vl, 0, 0, H);
  loss_op(b, d, R(t->logits, 0), R(t->targets, 0), R(t->ce_probs, 0), R(t->loss, 0), PX_MTP_SHIFT);
  /* what the backward reads, and what the head after it still reads */
  px_bld_keep(b, h), px_bld_keep(b, targets), px_bld_keep(b, R(t->targets, 0)), px_bld_keep(b, R(L->x, 1));
  px_bld_keep(b, R(t->emb, 0)), px_bld_keep(b, R(t->en_rstd, 0)), px_bld_keep(b, R(t->hn_rstd, 0));
  px_bld_keep(b, R(t->lnf_rstd, 0));
  if (px_linear_needs_input(p, t->w_eh_e)) /* the projection's inputs (fp8: their twins), a sequence shard with SP */
    px_bld_keep(b, px_fp8_twin(p, d, R(t->en, 0))), px_bld_keep(b, px_fp8_twin(p, d, R(t->hn, 0)));
  if (px_linear_needs_input(p, s->w_head)) px_bld_keep(b, R(t->lnf, 0));
  px_bld_keep(b, R(t->ce_probs, 0));
}

static void mtp_backward(px_bld *b, const px_dims *d, const px_dims *dl, const px_layer_slots *L, const stage_slots *s,
                         const mtp_slots *t, px_recompute rc) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H, Hl = d->H / d->T;
  px_ref h = R(L->x, -1), targets = R(s->targets, -1);
  px_ref dlogits = R(px_bld_grad_slot(p, t->logits), 0);
  loss_bwd_op(b, d, R(t->ce_probs, 0), R(t->targets, 0), dlogits, PX_MTP_SHIFT);
  px_ref lnf = px_linear_needs_input(p, s->w_head) ? R(t->lnf_full, 0) : NOREF;
  if (d->sp && lnf.slot >= 0) lnf = px_bld_tp_gather(b, d, PX_PHASE_BWD, R(t->lnf, 0), R(t->lnf_full, 0));
  px_ref dlnf_sh = R(px_bld_grad_slot(p, t->lnf), 0);
  px_ref dlnf = px_linear_bwd(b, d, R(px_bld_grad_slot(p, t->lnf_full), 0), lnf, NOREF, s->w_head, -1, dlogits, NOREF,
                              NOREF, NOREF, B * S, d->Vl, 0, 0, H, &dlnf_sh);
  px_bld_norm_bwd(b, d, R(px_bld_grad_slot(p, L->x), 1), dlnf, R(L->x, 1), NOREF, R(t->lnf_rstd, 0), t->w_lnf, -1, B * Sl);
  px_layer_backward(b, dl, L, rc);
  /* eh_proj: each rank's columns of the output gradient (the whole sequence gathered with SP) */
  px_ref dy = R(px_bld_grad_slot(p, L->x), 0);
  if (d->sp) dy = px_bld_tp_gather(b, d, PX_PHASE_BWD, dy, R(t->dx_full, 0));
  px_ref en = px_linear_wgrad_input(b, d, t->w_eh_e, px_fp8_twin(p, d, R(t->en, 0)), px_fp8_twin(p, d, R(t->en_full, 0)));
  px_ref hn = px_linear_wgrad_input(b, d, t->w_eh_h, px_fp8_twin(p, d, R(t->hn, 0)), px_fp8_twin(p, d, R(t->hn_full, 0)));
  px_ref den = R(px_bld_grad_slot(p, t->en), 0), dhn = R(px_bld_grad_slot(p, t->hn), 0);
  int32_t first = b->b->nops;
  den = px_linear_bwd(b, d, R(px_bld_grad_slot(p, t->en_full), 0), en, R(t->en, 0), t->w_eh_e, -1, dy, NOREF, NOREF,
                      NOREF, B * S, Hl, 0, 0, H, &den);
  dhn = px_linear_bwd(b, d, R(px_bld_grad_slot(p, t->hn_full), 0), hn, R(t->hn, 0), t->w_eh_h, -1, dy, NOREF, NOREF,
                      NOREF, B * S, Hl, 0, 0, H, &dhn);
  int32_t dy_q = px_fp8_twin(p, d, dy).slot; /* dy as the quantized GEMMs read it: its cast's codes */
  for (int32_t i = first; d->T > 1 && !b->failed && i < b->b->nops; i++) { /* their dy: this rank's columns of it */
    px_op *o = &b->b->ops[i];
    if ((o->kind == PX_OP_LINEAR_BWD_DATA || o->kind == PX_OP_LINEAR_BWD_WEIGHT) &&
        (o->in[0].slot == dy.slot || o->in[0].slot == dy_q))
      o->flags |= PX_OPF_COLS;
  }
  /* the hidden state's gradient: hnorm's, plus the head's (its backward, before this one, left it apart) */
  px_ref dh = R(px_bld_grad_slot(p, L->x), -1);
  px_bld_norm_bwd(b, d, dh, dhn, h, NOREF, R(t->hn_rstd, 0), t->w_hnorm, -1, B * Sl);
  px_bld_simple(b, PX_OP_ACC, PX_PHASE_BWD, dh, R(t->head_dx, -1), NOREF, B * Sl * H, (double)d->e);
  px_ref demb = R(px_bld_grad_slot(p, t->emb), 0);
  px_bld_norm_bwd(b, d, demb, den, R(t->emb, 0), NOREF, R(t->en_rstd, 0), t->w_enorm, -1, B * Sl);
  px_ref dfull = d->sp ? px_bld_tp_gather(b, d, PX_PHASE_BWD, demb, R(px_bld_grad_slot(p, t->emb_part), 0)) : demb;
  lookup_bwd(b, d, dfull, targets, t->w_emb);
  px_bld_keep(b, dh); /* for the last layer's backward */
}

static void head_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, const stage_slots *s) {
  int64_t B = d->B, S = d->S, Sl = d->Sl;
  px_ref x = R(L->x, 0);
  px_bld_norm(b, d, PX_PHASE_FWD, R(s->lnf, 0), s->lnf_mean >= 0 ? R(s->lnf_mean, 0) : NOREF, R(s->lnf_rstd, 0), x,
              s->w_lnf, s->b_lnf, B * Sl);
  px_ref lnf = px_bld_tp_gather(b, d, PX_PHASE_FWD, R(s->lnf, 0), R(s->lnf_full, 0));
  px_linear(b, d, PX_PHASE_FWD, lnf, s->w_head, -1, R(s->logits, 0), NOREF, NOREF, B * S, d->Vl, 0, 0, d->H);
  loss_op(b, d, R(s->logits, 0), R(s->targets, 0), R(s->ce_probs, 0), R(s->loss, 0), 0);
  px_bld_keep(b, x);
  if (px_linear_needs_input(b->p, s->w_head)) px_bld_keep(b, R(s->lnf, 0)); /* the head's weight gradient's */
  px_bld_keep(b, R(s->lnf_rstd, 0));
  if (s->lnf_mean >= 0) px_bld_keep(b, R(s->lnf_mean, 0));
  px_bld_keep(b, R(s->ce_probs, 0));
  px_bld_keep(b, R(s->targets, 0));
}

static void head_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, const stage_slots *s, px_ref dx) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl;
  px_ref dlogits = R(px_bld_grad_slot(p, s->logits), 0);
  loss_bwd_op(b, d, R(s->ce_probs, 0), R(s->targets, 0), dlogits, 0);
  px_ref lnf = px_linear_needs_input(p, s->w_head) ? R(s->lnf_full, 0) : NOREF;
  if (d->sp && lnf.slot >= 0) lnf = px_bld_tp_gather(b, d, PX_PHASE_BWD, R(s->lnf, 0), R(s->lnf_full, 0));
  px_ref dlnf_part = R(px_bld_grad_slot(p, s->lnf_full), 0);
  px_ref dlnf_sh = R(px_bld_grad_slot(p, s->lnf), 0);
  px_ref dlnf = px_linear_bwd(b, d, dlnf_part, lnf, NOREF, s->w_head, -1, dlogits, NOREF, NOREF, NOREF, B * S, d->Vl, 0,
                              0, d->H, &dlnf_sh);
  px_bld_norm_bwd(b, d, dx, dlnf, R(L->x, 0), s->lnf_mean >= 0 ? R(s->lnf_mean, 0) : NOREF, R(s->lnf_rstd, 0), s->w_lnf,
                  s->b_lnf, B * Sl);
}

/* Send or receive of the activation (or its gradient) at a chunk boundary.
 * Without SP every TP rank holds the whole tensor, so (as Megatron-LM's
 * scatter-gather optimisation) each sends only its 1/tp slice and the
 * receiver all-gathers the slices over the TP group. */
static void p2p(px_bld *b, const px_dims *d, px_op_kind kind, px_ref r, int buf) {
  bool scatter = !d->sp && d->T > 1;
  int64_t elems = d->B * d->Sl * d->H, part = scatter ? elems / d->T : elems;
  px_op *o = px_bld_op(b, kind, kind == PX_OP_SEND ? PX_STREAM_PP_SEND : PX_STREAM_PP_RECV, PX_PHASE_COMM);
  if (kind == PX_OP_SEND)
    o->in[0] = r;
  else
    o->out[0] = scatter ? R(buf, 0) : r;
  if (scatter) o->flags |= PX_OPF_TP_SLICE;
  o->coll = PX_COLL_P2P;
  o->dim[0] = part;
  o->coll_bytes = (uint64_t)part * d->e;
  o->wire_bytes = kind == PX_OP_SEND ? (double)o->coll_bytes : 0.0;
  if (kind == PX_OP_RECV && scatter) {
    px_op *g = px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_TP, PX_PHASE_COMM, R(buf, 0), r, part, elems, d->act, d->T);
    g->stream = PX_STREAM_PP_RECV;
  }
  if (kind == PX_OP_RECV) px_bld_keep(b, r);
}

/* A layer's forward and backward blocks (px_layer_block of d's kind; bf16: a layer kept in the compute dtype,
 * d without quantized GEMMs). A zero-bubble schedule's backward is two blocks: B (input gradients; it keeps what
 * the linear layers' and experts' weight gradients read) and W, made once per dense or MoE kind (with_w: this
 * kind's W; a windowed layer's W is the full one's, with no attention in it). */
static void layer_blocks(px_bld *b, px_plan *p, const px_dims *d, const px_layer_slots *L, px_recompute rc, bool kept,
                         bool bf16, bool with_w) {
  px_bld_begin(b, p, px_layer_block(d->moe, d->window > 0, kept, bf16, false), PX_STREAM_COMPUTE);
  px_layer_forward(b, d, L, PX_PHASE_FWD, true);
  px_layer_keep_saved(b, d, L, rc);
  px_bld_finish(b);
  px_bld wb = {.failed = false};
  px_block other = {0}; /* the W of a windowed layer, the same as the full one's: built and dropped */
  bool split = px_parallel_split_w(&p->par);
  if (split) px_bld_begin(&wb, p, px_layer_w_block(d->moe, bf16), PX_STREAM_COMPUTE);
  if (split && !with_w) wb.b = &other;
  px_bld_begin(b, p, px_layer_block(d->moe, d->window > 0, kept, bf16, true), PX_STREAM_COMPUTE);
  b->w = split ? &wb : NULL;
  px_layer_backward(b, d, L, rc);
  px_bld_keep(b, R(px_bld_grad_slot(p, L->x), 0));
  px_bld_finish(b);
  if (split) {
    px_bld_finish(&wb);
    b->failed |= wb.failed;
  }
  free(other.ops), free(other.frees), free(other.allocs);
}

px_status px_compile_blocks(px_plan *p, px_err *err) {
  px_dims d;
  px_dims_make(p, &d);
  px_layer_slots L;
  stage_slots s;
  px_layer_slots_make(p, &d, &L);
  stage_slots_make(p, &d, &s);
  bool mtp = p->par.mtp_layers > 0;
  mtp_slots t = {0};
  if (mtp) mtp_slots_make(p, &d, &s, &t);
  if (px_plan_shares_embedding(p)) /* the first stage's table and the last stage's copy (tied head, MTP lookup) */
    p->slots[s.w_emb].role = p->slots[mtp ? t.w_emb : s.w_head].role = PX_ROLE_TIED;
  px_recompute rc = (px_recompute)p->par.recompute;
  px_bld b = {.failed = false};

  /* the layers' blocks: dense or mixture-of-experts, with full or sliding-window attention, in the plan's
   * precision or kept in the compute dtype, those the model has (the dense full-attention ones of each
   * precision it has always: the plan's readers take a layer's activations from them, W is theirs) */
  bool kinds[2][2][2] = {{{true}}}; /* [bf16][window][moe] */
  for (int64_t l = 0; l < p->model.layers; l++) {
    bool bf16 = px_parallel_layer_bf16(&p->par, p->model.layers, l);
    kinds[bf16][0][0] = true;
    kinds[bf16][px_model_layer_is_sliding(&p->model, l)][px_model_layer_is_moe(&p->model, l)] = true;
  }
  for (int bf16 = 0; bf16 < 2; bf16++)
    for (int window = 0; window < 2; window++)
      for (int moe = 0; moe < 2; moe++) {
        if (!kinds[bf16][window][moe]) continue;
        px_dims dl = d;
        if (bf16) px_dims_unquantized(&dl);
        dl.moe = moe, dl.window = window ? p->model.sliding_window : 0;
        dl.attn_frac = px_attention_window_fraction(p->seq_cp, dl.window);
        /* W from the full-attention kind, or the windowed one where a model's MoE layers are all windowed */
        layer_blocks(&b, p, &dl, &L, rc, false, bf16, !window || !kinds[bf16][0][moe]);
        /* partial recomputation: the layers that keep their activations, as without recomputation */
        if (px_parallel_recompute_partial(&p->par)) layer_blocks(&b, p, &dl, &L, PX_RECOMPUTE_NONE, true, bf16, false);
      }

  px_bld_begin(&b, p, PX_BLOCK_EMBED_FWD, PX_STREAM_COMPUTE);
  b.loads_inputs = true;
  embed_forward(&b, &d, &L, &s);
  px_bld_keep(&b, R(s.tokens, 0));
  px_bld_finish(&b);

  px_bld_begin(&b, p, PX_BLOCK_EMBED_BWD, PX_STREAM_COMPUTE);
  embed_backward(&b, &d, &L, &s);
  px_bld_finish(&b);

  px_bld_begin(&b, p, PX_BLOCK_HEAD_FWD, PX_STREAM_COMPUTE);
  b.loads_inputs = !mtp; /* with the MTP module its block, before the head's, loads the targets */
  head_forward(&b, &d, &L, &s);
  px_bld_finish(&b);

  px_bld_begin(&b, p, PX_BLOCK_HEAD_BWD, PX_STREAM_COMPUTE);
  /* the hidden state's gradient, for the last layer; with the MTP module apart, for its backward to complete */
  px_ref dx = mtp ? R(t.head_dx, 0) : R(px_bld_grad_slot(p, L.x), 0);
  head_backward(&b, &d, &L, &s, dx);
  px_bld_keep(&b, dx);
  if (mtp) px_bld_keep(&b, R(L.x, 0)), px_bld_keep(&b, R(s.targets, 0)); /* the MTP module's backward, after it */
  px_bld_finish(&b);

  if (mtp) { /* the module's layer: the kind a layer after the model's last would have (px_model_layer_is_moe) */
    px_dims dl = d;
    dl.moe = px_model_layer_is_moe(&p->model, p->model.layers);
    dl.window = px_model_layer_is_sliding(&p->model, p->model.layers) ? p->model.sliding_window : 0;
    dl.attn_frac = px_attention_window_fraction(p->seq_cp, dl.window);
    px_bld_begin(&b, p, PX_BLOCK_MTP_FWD, PX_STREAM_COMPUTE);
    b.loads_inputs = true;
    mtp_forward(&b, &d, &dl, &L, &s, &t, rc);
    px_bld_finish(&b);
    px_bld_begin(&b, p, PX_BLOCK_MTP_BWD, PX_STREAM_COMPUTE); /* its weight gradients here, split schedules too */
    mtp_backward(&b, &d, &dl, &L, &s, &t, rc);
    px_bld_finish(&b);
  }

  int p2p_buf = px_bld_slot(p, "p2p_slice", PX_SLOT_BUFFER, d.act, d.B * d.Sl * d.H / d.T, 1, 1, 1);
  px_bld_begin(&b, p, PX_BLOCK_SEND_FWD, PX_STREAM_PP_SEND);
  p2p(&b, &d, PX_OP_SEND, R(L.x, 0), p2p_buf);
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_RECV_FWD, PX_STREAM_PP_RECV);
  p2p(&b, &d, PX_OP_RECV, R(L.x, 0), p2p_buf);
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_SEND_BWD, PX_STREAM_PP_SEND);
  p2p(&b, &d, PX_OP_SEND, R(px_bld_grad_slot(p, L.x), 0), p2p_buf);
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_RECV_BWD, PX_STREAM_PP_RECV);
  p2p(&b, &d, PX_OP_RECV, R(px_bld_grad_slot(p, L.x), 0), p2p_buf);
  px_bld_finish(&b);

  /* Blocks sized per stage: the ops here fix kind and group; each stage's
   * copies, sized for its units and shard, are in its program (plan/plan.c). */
  px_op *o;
  /* With a shard group smaller than dp (hybrid sharding): the gradient is
   * reduce-scattered within the shard group, then each shard all-reduced
   * over the replicas holding it; parameters are gathered within the group. */
  bool hybrid = px_parallel_hybrid(&p->par);
  px_bld_begin(&b, p, PX_BLOCK_GRAD_SYNC, PX_STREAM_DP);
  o = px_bld_op(&b, p->par.zero == 0 ? PX_OP_ALLREDUCE : PX_OP_REDUCE_SCATTER, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = hybrid ? PX_GROUP_SHARD : PX_GROUP_DP;
  o->coll = p->par.zero == 0 ? PX_COLL_ALLREDUCE : PX_COLL_REDUCE_SCATTER;
  if (hybrid) {
    o = px_bld_op(&b, PX_OP_ALLREDUCE, PX_STREAM_DP, PX_PHASE_COMM);
    o->group = PX_GROUP_REPLICA;
    o->coll = PX_COLL_ALLREDUCE;
  }
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_PARAM_SYNC, PX_STREAM_DP);
  o = px_bld_op(&b, PX_OP_ALLGATHER, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = hybrid ? PX_GROUP_SHARD : PX_GROUP_DP;
  o->coll = PX_COLL_ALLGATHER;
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_EMB_SYNC, PX_STREAM_DP);
  o = px_bld_op(&b, PX_OP_ALLREDUCE, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = PX_GROUP_EMB;
  o->coll = PX_COLL_ALLREDUCE;
  px_bld_finish(&b);
  px_bld_begin(&b, p, PX_BLOCK_OPTIMIZER, PX_STREAM_COMPUTE);
  if (d.sp || ((d.qk_norm || d.lora) && d.T > 1)) { /* norm and position gradients: partial sums over sequence
                                                         shards (SP) or heads (q/k norms); adapters' replicated A or B
                                                         (px_linear_adapter_slots) */
    o = px_bld_op(&b, PX_OP_ALLREDUCE, PX_STREAM_TP, PX_PHASE_OPT);
    o->group = PX_GROUP_TP;
    o->coll = PX_COLL_ALLREDUCE;
  }
  o = px_bld_op(&b, PX_OP_GRAD_NORM, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  o->group = PX_GROUP_ALL; /* and one double summed over every rank */
  o->coll = PX_COLL_ALLREDUCE;
  if (p->par.offload_opt) { /* the host steps the shard; the new parameters come back unless they live there */
    px_bld_op(&b, PX_OP_ADAMW_HOST, PX_STREAM_COMPUTE, PX_PHASE_OPT);
    if (!p->par.offload_params) px_bld_op(&b, PX_OP_COPY_H2D, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  } else {
    px_bld_op(&b, PX_OP_ADAMW, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  }
  if (d.f8 && !d.zero3 && px_parallel_weight_copies(&p->par, &p->cluster.gpu) > 0) {
    /* the updated weights' fp8 copies for the next step (px_plan_fp8_weight_elems) */
    o = px_bld_op(&b, PX_OP_CAST, PX_STREAM_COMPUTE, PX_PHASE_OPT);
    o->flags = px_fp8_flags(&d);
  }
  px_bld_finish(&b);
  /* the host link's copies, one op each (each program sizes its own): offload's gradient and parameter
   * shards, activation offload's sets */
  static const struct {
    px_block_kind block;
    px_op_kind op;
  } copies[] = {{PX_BLOCK_OFFLOAD_GRAD, PX_OP_COPY_D2H},
                {PX_BLOCK_FETCH_PARAM, PX_OP_COPY_H2D},
                {PX_BLOCK_OFFLOAD_ACT, PX_OP_COPY_D2H},
                {PX_BLOCK_FETCH_ACT, PX_OP_COPY_H2D}};
  for (size_t i = 0; i < sizeof copies / sizeof *copies; i++) {
    px_bld_begin(&b, p, copies[i].block, PX_STREAM_HOST);
    px_bld_op(&b, copies[i].op, PX_STREAM_HOST, PX_PHASE_COMM);
    px_bld_finish(&b);
  }
  if (b.failed || p->slots_full)
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory building the op templates (or more than %d slots)",
                      PX_SLOTS_MAX);
  /* what is trained over the model: every parameter, or fine-tuning's adapters (each layer's alike: refused
   * with experts), TP-split ones once a rank, replicated ones once */
  p->trained_total = p->params_total;
  if (d.lora) {
    uint64_t layer = 0;
    for (int i = 0; i < p->nslots; i++) {
      const px_slot *sl = &p->slots[i];
      if (sl->kind == PX_SLOT_PARAM && !sl->frozen) layer += sl->elems * (uint64_t)(sl->tp_replicated ? 1 : d.T);
    }
    p->trained_total = layer * (uint64_t)p->model.layers;
  }
  return PX_OK;
}
