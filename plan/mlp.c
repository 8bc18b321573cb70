/* The MLP branch of a layer block: the dense MLP and the
 * mixture of experts (router, dispatch, experts, shared experts). */
#include "plan/mlp.h"

#include "plan/fp8.h"
#include "plan/linear.h"

/* Bytes of a routed row's gate (fp32, as moe_gates) where it moves with the row (moe_send_w, moe_recv_w). */
#define GATE_BYTES 4.0

/* An expert parameter: (local experts, rows, cols), split over EP. */
static int expert_param(px_plan *p, const px_dims *d, const char *name, int64_t rows, int64_t cols) {
  int w = px_bld_param(p, d, name, d->El * rows, cols, false, false);
  int g = px_bld_grad_of(p, w);
  p->slots[w].expert = p->slots[g].expert = true;
  return w;
}

void px_moe_slots(px_plan *p, const px_dims *d, px_layer_slots *L) {
  int *all[] = {&L->moe_probs, &L->moe_idx,      &L->moe_gates,   &L->moe_counts, &L->moe_send,
                &L->moe_recv,  &L->exp_gate,     &L->exp_up,      &L->exp_fc1,    &L->exp_act,
                &L->exp_out,   &L->moe_ret,      &L->sh_gate,     &L->sh_up,      &L->sh_fc1,
                &L->sh_act,    &L->w_router,     &L->w_exp_fc1,   &L->w_exp_fc2,  &L->w_sh_fc1,
                &L->w_sh_fc2,  &L->moe_send_all, &L->moe_recv_ep, &L->exp_out_ep, &L->moe_ret_ep,
                &L->moe_send_w, &L->moe_recv_w_ep, &L->moe_recv_w, &L->b_router, &L->w_exp_b1,
                &L->w_exp_b2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) *all[i] = -1;
  if (d->E == 0) return;
  px_dtype a = d->act;
  bool a2a = d->dispatch != PX_MOE_ALLGATHER, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  L->moe_probs =
      px_bld_slot(p, "moe_probs", PX_SLOT_ACT, a, rows, d->E, 1, 1); /* the router's logits, then probabilities */
  L->moe_idx = px_bld_slot(p, "moe_idx", PX_SLOT_ACT, PX_DTYPE_FP32, rows, d->K, 1, 1); /* int32 */
  L->moe_gates = px_bld_slot(p, "moe_gates", PX_SLOT_ACT, PX_DTYPE_FP32, rows, d->K, 1, 1);
  /* int32: the rows sent to each expert, then the rows each ETP rank takes from each (source, local expert) */
  L->moe_counts = px_bld_slot(p, "moe_counts", PX_SLOT_ACT, PX_DTYPE_FP32, 1 + d->ETP, d->EP, d->El, 1);
  L->moe_send = px_bld_slot(p, "moe_send", PX_SLOT_ACT, a, sent, H, 1, 1);
  L->moe_send_all = etp && !a2a ? px_bld_slot(p, "moe_send_all", PX_SLOT_ACT, a, d->ETP * sent, H, 1, 1) : L->moe_send;
  L->moe_recv = px_bld_slot(p, "moe_recv", PX_SLOT_ACT, a, d->Rb, H, 1, 1);
  L->moe_recv_ep = etp && a2a ? px_bld_slot(p, "moe_recv_ep", PX_SLOT_ACT, a, d->Rbep, H, 1, 1) : L->moe_recv;
  /* fp32: the gate of each routed row, permuted and exchanged with the rows (Megatron-Core's permuted_probs) */
  L->moe_send_w = a2a ? px_bld_slot(p, "moe_send_w", PX_SLOT_ACT, PX_DTYPE_FP32, sent, 1, 1, 1) : -1;
  L->moe_recv_w = px_bld_slot(p, "moe_recv_w", PX_SLOT_ACT, PX_DTYPE_FP32, d->Rb, 1, 1, 1);
  L->moe_recv_w_ep =
      etp && a2a ? px_bld_slot(p, "moe_recv_w_ep", PX_SLOT_ACT, PX_DTYPE_FP32, d->Rbep, 1, 1, 1) : L->moe_recv_w;
  L->exp_gate = d->swiglu ? px_bld_slot(p, "exp_gate", PX_SLOT_ACT, a, d->Rb, d->Fe, 1, 1) : -1;
  L->exp_up = d->swiglu ? px_bld_slot(p, "exp_up", PX_SLOT_ACT, a, d->Rb, d->Fe, 1, 1) : -1;
  L->exp_fc1 = d->swiglu ? -1 : px_bld_slot(p, "exp_fc1", PX_SLOT_ACT, a, d->Rb, d->Fe, 1, 1);
  L->exp_act = px_bld_slot(p, "exp_act", PX_SLOT_ACT, a, d->Rb, d->Fe, 1, 1);
  L->exp_out = px_bld_slot(p, "exp_out", PX_SLOT_ACT, a, d->Rb, H, 1, 1);
  L->exp_out_ep = etp && a2a ? px_bld_slot(p, "exp_out_ep", PX_SLOT_ACT, a, d->Rbep, H, 1, 1) : L->exp_out;
  L->moe_ret = px_bld_slot(p, "moe_ret", PX_SLOT_ACT, a, a2a ? sent : d->ETP * sent, H, 1, 1);
  L->moe_ret_ep = etp && !a2a ? px_bld_slot(p, "moe_ret_ep", PX_SLOT_ACT, a, sent, H, 1, 1) : L->moe_ret;
  int64_t fe1 = d->swiglu ? 2 * d->Fe : d->Fe, fs1 = d->swiglu ? 2 * d->Fs : d->Fs;
  L->w_router = px_bld_param(p, d, "router_w", d->E, H, true, true); /* on sequence shards: SP-partial gradients */
  L->w_exp_fc1 = expert_param(p, d, "exp_fc1_w", fe1, H);
  L->w_exp_fc2 = expert_param(p, d, "exp_fc2_w", H, d->Fe);
  if (px_model_moe_biases(&p->model)) { /* the router's bias (replicated as its weight), a local expert's fc1 (gate
                                           and up) and fc2 */
    L->b_router = px_bld_param(p, d, "router_b", d->E, 1, true, true);
    L->w_exp_b1 = expert_param(p, d, "exp_fc1_b", fe1, 1);
    L->w_exp_b2 = expert_param(p, d, "exp_fc2_b", H, 1);
  }
  if (d->Fs > 0) { /* a TP MLP on the gathered sequence: B S rows */
    int64_t full = d->B * d->S;
    L->sh_gate = d->swiglu ? px_bld_slot(p, "sh_gate", PX_SLOT_ACT, a, full, d->Fs, 1, 1) : -1;
    L->sh_up = d->swiglu ? px_bld_slot(p, "sh_up", PX_SLOT_ACT, a, full, d->Fs, 1, 1) : -1;
    L->sh_fc1 = d->swiglu ? -1 : px_bld_slot(p, "sh_fc1", PX_SLOT_ACT, a, full, d->Fs, 1, 1);
    L->sh_act = px_bld_slot(p, "sh_act", PX_SLOT_ACT, a, full, d->Fs, 1, 1);
    L->w_sh_fc1 = px_bld_param(p, d, "sh_fc1_w", fs1, H, false, false);
    L->w_sh_fc2 = px_bld_param(p, d, "sh_fc2_w", H, d->Fs, false, false);
  }
}

/* ---- mixture of experts ----
 *
 * A MoE layer's MLP as Megatron-Core's dispatchers run it: each rank routes
 * its sequence shard (B Sl rows; SP is required with TP): the router (a
 * linear layer to one logit per expert, replicated over TP, its gradient a
 * partial sum like a norm's under SP) picks each token's top-k experts and
 * weights; the rows go to the EP ranks holding those experts (all-to-all of
 * the A = B Sl k routed rows, then an all-gather over the ETP group; or the
 * all-gather dispatcher's gather of every token over EP, then ETP), the
 * local experts run as grouped GEMMs on the R rows they take, split over
 * ETP (moe_ffn / etp wide), and the outputs come back the same way reversed
 * (reduce-scatter over ETP, all-to-all; or reduce-scatters of the partial
 * sums). As Megatron-Core's grouped experts, each routed row's gate goes
 * with it (permuted and exchanged) into the experts' activation, which
 * multiplies by it (the gates' gradient: act(x) . dy a row, in the
 * activation's backward, from its input); each token's k outputs, summed
 * plainly, land on its shard after the shared experts' output (a TP MLP on the gathered
 * sequence, reduce-scattered as the dense MLP's) is reduced. Expert GEMMs
 * count the mean rank's FLOPs (A ETP rows: model FLOPs) and carry the
 * busiest rank's shape (R rows over its local experts) for their time. */

/* The expert ops' shape over the local experts (GEMMs and fc2's bias): dim[0] the rows a local expert takes (the
 * busiest rank's R over them, rounded up), dim[3] the local experts. */
static void expert_dims(px_op *o, const px_dims *d) { o->dim[0] = (d->R + d->El - 1) / d->El, o->dim[3] = d->El; }

/* A grouped GEMM over the local experts, from k to n (split into n0 + n1
 * outputs when two are given). kind: the forward, the data gradient (from
 * n back to k) or the weight gradient. */
static px_op *expert_gemm(px_bld *b, const px_dims *d, const px_layer_slots *L, px_op_kind kind, px_phase ph,
                          int64_t n0, int64_t n1, int64_t k) {
  px_op *o = px_bld_op(b, kind, PX_STREAM_COMPUTE, ph);
  int64_t n = n0 + n1;
  expert_dims(o, d);
  o->dim[1] = n, o->dim[2] = k, o->dim[4] = n0, o->dim[5] = n1;
  o->flops = 2.0 * (double)(d->A * d->ETP) * (double)n * (double)k; /* the mean rank's rows after the ETP gather */
  o->in[4] = R(L->moe_counts, 0);                                   /* the rows each local expert took */
  double e = (double)d->e, ei = d->f8 ? 1.0 : e, rows = (double)d->R, w = (double)(d->El * n * k);
  if (kind == PX_OP_EXPERT_LINEAR)
    o->bytes = (rows * (double)k + w) * ei + rows * (double)n * e;
  else if (kind == PX_OP_EXPERT_LINEAR_BWD_DATA)
    o->bytes = (rows * (double)n + w) * ei + rows * (double)k * e;
  else
    o->bytes = (rows * (double)(n + k)) * ei + 2.0 * w * (double)px_dtype_bytes(d->grad);
  if (kind != PX_OP_EXPERT_LINEAR) o->flags = PX_OPF_ACCUMULATE;
  return o;
}

/* The quantized copy of routed rows the local experts' GEMMs read: each expert's rows quantized apart, as
 * Transformer Engine's split_quantize does (PX_OPF_EXPERT_ROWS). */
static px_ref rows_cast(px_bld *b, const px_dims *d, px_phase ph, px_ref x, bool e5m2) {
  int32_t n = b->b->nops;
  px_ref y = px_fp8_cast(b, d, ph, x, e5m2);
  if (b->b->nops > n) b->b->ops[n].flags |= PX_OPF_EXPERT_ROWS;
  return y;
}

/* The experts' activation times each row's gate (Megatron-Core's weighted_bias_swiglu_impl; with GELU its
 * activation times permuted_probs) and its quantized copy, fc2's input; returns that. */
static px_ref experts_act(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  int64_t fe = d->Fe, nr = d->R;
  px_op *o;
  /* in[2] the gates, dim[1] the row width */
  if (d->swiglu)
    o = px_bld_simple(b, PX_OP_SWIGLU, ph, R(L->exp_act, 0), R(L->exp_gate, 0), R(L->exp_up, 0), nr * fe, (double)d->e);
  else
    o = px_bld_simple(b, PX_OP_GELU, ph, R(L->exp_act, 0), R(L->exp_fc1, 0), NOREF, nr * fe, (double)d->e);
  o->in[2] = R(L->moe_recv_w, 0);
  o->bytes += (double)nr * GATE_BYTES;
  o->dim[0] = d->Rb * fe, o->dim[1] = fe; /* the whole buffer; the cost the busiest rank's rows */
  return rows_cast(b, d, ph, R(L->exp_act, 0), false);
}

/* fc2's bias a routed row's gate times its expert's, added to fc2's output (Megatron-Core's
 * TEGroupedMLP._apply_bias, fc2 built with skip_bias_add: moe/experts.py since a329dd6 of 2025-09), or its backward
 * (the bias's gradient a gate-weighted sum of its expert's rows, each gate's the row's output gradient dot the
 * bias). Bytes as PyTorch runs it, a pass of each op on the rows of width H per local expert: forward the
 * gate-scaled bias (fp32), the sum with the output (read both, an fp32 result), their concatenation, the cast to
 * the compute dtype: (24 + 2 e) H a row; backward the cast's and the sum's gradients (the compute dtype and fp32
 * each way), the bias's and each gate's products and sums (fp32, 12 H each), the split's concatenation of the
 * output's gradient: (32 + 4 e) H a row. Kernels: px_op_expert_bias_kernels. */
static px_op *expert_bias(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  bool bwd = ph == PX_PHASE_BWD;
  px_op *o = px_bld_op(b, bwd ? PX_OP_EXPERT_BIAS_BWD : PX_OP_EXPERT_BIAS, PX_STREAM_COMPUTE, ph);
  double e = (double)d->e, rows = (double)d->R, h = (double)d->H;
  expert_dims(o, d);
  o->dim[1] = d->H;
  o->bytes = rows * h * (bwd ? 32.0 + 4.0 * e : 24.0 + 2.0 * e) + rows * (bwd ? 2.0 : 1.0) * GATE_BYTES;
  o->flags = PX_OPF_ACCUMULATE;
  o->in[4] = R(L->moe_counts, 0);
  return o;
}

/* The experts on the R rows in `rows`: fc1 (gate and up with SwiGLU; its bias in the GEMM, Transformer Engine's
 * GroupedLinear epilogue), the activation, fc2 into `out` (its bias then, gate-scaled: expert_bias). */
static void experts_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph) {
  int64_t fe = d->Fe;
  if (d->f8) px_fp8_weight_cast(b, d, ph, L->w_exp_fc1);
  px_op *o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR, ph, fe, d->swiglu ? fe : 0, d->H);
  o->in[0] = px_fp8_twin(b->p, d, R(L->moe_recv, 0)), o->in[1] = R(L->w_exp_fc1, 0);
  if (L->w_exp_b1 >= 0) o->in[2] = R(L->w_exp_b1, 0);
  if (d->f8) px_fp8_gemm(b, d, o, L->w_exp_fc1);
  o->out[0] = R(d->swiglu ? L->exp_gate : L->exp_fc1, 0), o->out[1] = d->swiglu ? R(L->exp_up, 0) : NOREF;
  px_ref act = experts_act(b, d, L, ph);
  if (d->f8) px_fp8_weight_cast(b, d, ph, L->w_exp_fc2);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR, ph, d->H, 0, fe);
  o->in[0] = act, o->in[1] = R(L->w_exp_fc2, 0);
  o->out[0] = R(L->exp_out, 0);
  if (d->f8) px_fp8_gemm(b, d, o, L->w_exp_fc2);
  if (L->w_exp_b2 < 0) return;
  o = expert_bias(b, d, L, ph);
  o->in[0] = R(L->w_exp_b2, 0), o->in[1] = R(L->moe_recv_w, 0), o->out[0] = R(L->exp_out, 0);
}

/* A weight-gradient grouped GEMM from dy (and dy2) and the input x into dW (and the bias's gradient, bias >= 0: the
 * epilogue's sum of dy): in the block, or with a zero-bubble schedule in W, B keeping what it reads (the rows each
 * expert took too). */
static void expert_wgrad(px_bld *b, const px_dims *d, const px_layer_slots *L, int w, int bias, px_ref dy, px_ref dy2,
                         px_ref x, int64_t n0, int64_t n1, int64_t k) {
  px_bld *wb = b->w ? b->w : b;
  if (b->w) px_bld_keep(b, dy), px_bld_keep(b, dy2), px_bld_keep(b, x), px_bld_keep(b, R(L->moe_counts, 0));
  px_op *o = expert_gemm(wb, d, L, PX_OP_EXPERT_LINEAR_BWD_WEIGHT, PX_PHASE_BWD, n0, n1, k);
  o->in[0] = dy, o->in[1] = dy2, o->in[3] = x, o->out[0] = R(px_bld_grad_of(b->p, w), 0);
  if (bias >= 0) o->out[1] = R(px_bld_grad_of(b->p, bias), 0);
  if (d->f8) px_fp8_gemm(b, d, o, w);
}

static void experts_backward(px_bld *b, const px_dims *d, const px_layer_slots *L) {
  px_plan *p = b->p;
  int64_t fe = d->Fe, nr = d->R;
  px_ref dout = R(px_bld_grad_slot(p, L->exp_out), 0), dact = R(px_bld_grad_slot(p, L->exp_act), 0);
  /* moe_act recomputation: the activation (and its copy) made again when fc2's backward starts (Megatron-Core
   * discards it after fc2's forward and registers the recomputation on fc2's output) */
  if (d->rcm & PX_RCM_MOE_ACT) experts_act(b, d, L, PX_PHASE_RECOMPUTE);
  if (L->w_exp_b2 >= 0) { /* fc2's gate-scaled bias: its gradient and the gates' share */
    px_op *bo = expert_bias(b, d, L, PX_PHASE_BWD);
    bo->in[0] = dout, bo->in[1] = R(L->w_exp_b2, 0), bo->in[2] = R(L->moe_recv_w, 0);
    bo->out[0] = R(px_bld_grad_of(p, L->w_exp_b2), 0), bo->out[1] = R(px_bld_grad_slot(p, L->moe_recv_w), 0);
  }
  if (d->f8) px_fp8_weight_cast(b, d, PX_PHASE_BWD, L->w_exp_fc2);
  dout = rows_cast(b, d, PX_PHASE_BWD, dout, true);
  px_op *o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_DATA, PX_PHASE_BWD, d->H, 0, fe);
  o->in[0] = dout, o->in[3] = R(L->w_exp_fc2, 0), o->out[0] = dact;
  if (d->f8) px_fp8_gemm(b, d, o, L->w_exp_fc2);
  expert_wgrad(b, d, L, L->w_exp_fc2, -1, dout, NOREF, px_fp8_twin(p, d, R(L->exp_act, 0)), d->H, 0, fe);
  px_ref d1 = R(px_bld_grad_slot(p, d->swiglu ? L->exp_gate : L->exp_fc1), 0);
  px_ref d2 = d->swiglu ? R(px_bld_grad_slot(p, L->exp_up), 0) : NOREF;
  /* the weighted activation's backward: the input's gradient from w dy, each gate's the row's act(x) . dy
   * (partial over the ETP ranks' slices of the width), recomputed from the activation's input */
  px_ref dw = R(px_bld_grad_slot(p, L->moe_recv_w), 0);
  if (d->swiglu) {
    o = px_bld_op(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->exp_gate, 0), o->in[2] = R(L->exp_up, 0), o->in[3] = R(L->moe_recv_w, 0);
    o->out[0] = d1, o->out[1] = d2, o->out[2] = dw;
    px_bld_elementwise(o, (double)(3 * nr * fe), (double)(2 * nr * fe), (double)d->e);
    px_bld_eager(b, o, (double)(nr * fe), (double)d->e);
  } else {
    o = px_bld_simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, d1, dact, R(L->exp_fc1, 0), nr * fe, (double)d->e);
    o->in[2] = R(L->moe_recv_w, 0), o->out[1] = dw;
  }
  o->flags |= PX_OPF_ACCUMULATE;
  o->bytes += (double)nr * 2.0 * GATE_BYTES; /* the gates read, their gradients written */
  o->dim[0] = d->Rb * fe, o->dim[1] = fe; /* the whole buffer; the cost the busiest rank's rows */
  px_ref drecv = R(px_bld_grad_slot(p, L->moe_recv), 0);
  if (d->f8) px_fp8_weight_cast(b, d, PX_PHASE_BWD, L->w_exp_fc1);
  d1 = rows_cast(b, d, PX_PHASE_BWD, d1, true), d2 = rows_cast(b, d, PX_PHASE_BWD, d2, true);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_DATA, PX_PHASE_BWD, fe, d->swiglu ? fe : 0, d->H);
  o->in[0] = d1, o->in[1] = d2, o->in[3] = R(L->w_exp_fc1, 0), o->out[0] = drecv;
  if (d->f8) px_fp8_gemm(b, d, o, L->w_exp_fc1);
  expert_wgrad(b, d, L, L->w_exp_fc1, L->w_exp_b1, d1, d2, px_fp8_twin(p, d, R(L->moe_recv, 0)), fe,
               d->swiglu ? fe : 0, d->H);
}

/* An EP all-to-all of routed rows: to the experts (the send counts per
 * expert to the rows taken per source; the forward's also exchanges the
 * counts) or back from them. NCCL's all-to-all (the alltoall dispatcher)
 * sends a copy per (token, expert); DeepEP's kernels one per (token, rank)
 * and one a node over RDMA (px_plan_ep_copies; the simulator costs them):
 * a rank sends its tokens, the busiest rank's share (its rows over the
 * mean) as many times, to the copies' other ranks. */
static void ep_exchange(px_bld *b, const px_dims *d, px_op *o, const px_layer_slots *L, bool to_experts) {
  o->in[1] = R(L->moe_counts, 0);
  if (to_experts) o->flags |= PX_OPF_TO_EXPERTS;
  if (!px_moe_dispatch_deepep(d->dispatch)) return;
  double ranks, nodes;
  px_plan_ep_copies(b->p, &ranks, &nodes);
  o->wire_bytes = px_ep_token_bytes(o, d->K) * ranks * (1.0 - 1.0 / (double)d->EP);
}

/* The routed rows' gates (fp32, one a row) moved by the collective o of
 * those rows: in[2] to out[2], the same rows' exchange (Megatron-Core's
 * dispatchers move permuted_probs with the tokens), its bytes added. */
static void carry_gates(const px_dims *d, px_op *o, px_ref in, px_ref out) {
  double rows_in = (double)o->dim[0] / (double)d->H, rows_out = (double)o->dim[1] / (double)d->H;
  double more = GATE_BYTES * (o->coll == PX_COLL_ALLGATHER ? rows_out : rows_in);
  if (o->coll_bytes > 0) o->wire_bytes *= 1.0 + more / (double)o->coll_bytes;
  o->coll_bytes += (uint64_t)more;
  o->bytes += GATE_BYTES * (rows_in + rows_out);
  o->in[2] = in, o->out[2] = out;
}

/* An ETP collective of the rows the alltoall dispatcher's EP all-to-all
 * brought (and of their gates: w_in to w_out): each ETP rank's own number
 * (the counts' rows of the ranks). */
static void etp_rows(px_bld *b, const px_dims *d, const px_layer_slots *L, px_op_kind kind, px_phase ph, px_ref in,
                     px_ref out, px_ref w_in, px_ref w_out, px_dtype dt) {
  bool gather = kind == PX_OP_ALLGATHER;
  px_op *o = px_bld_coll(b, d, kind, PX_GROUP_ETP, ph, in, out, (gather ? d->Rep : d->R) * d->H,
                         (gather ? d->R : d->Rep) * d->H, dt, d->ETP);
  o->in[1] = R(L->moe_counts, 0);
  if (w_in.slot >= 0) carry_gates(d, o, w_in, w_out);
}

/* HBM bytes of the copy that pads each local expert's R rows to the quantized GEMMs' alignment, or takes the
 * padding off (one a pass of the permutation or its inverse): with an fp8 or fp4 recipe (every MoE layer: the
 * model's config, bf16-kept layers too) Megatron-Core's experts pad their input (and gates) and unpad their output
 * (TEGroupedMLP's quantization_padding / _unpadding, megatron/core/transformer/moe/experts.py at d98e8a6; Transformer
 * Engine's fused_multi_row_padding, module/fp8_padding.py at d0067d0), and the backward the reverse, unless the
 * router pads (moe_router_padding: moe_router_padding_for_quantization, off in Megatron-Bridge's Qwen3 and DeepSeek
 * recipes; its added zero-gate rows, fewer than the alignment an expert, are not counted) or the dispatcher does
 * (HybridEP, skip_routed_expert_padding, moe_utils.py; DeepEP only with TE's grouped tensor, which parallax does not
 * model): every dispatcher's but HybridEP's. */
static double pad_bytes(const px_plan *p, const px_dims *d) {
  bool pads = px_precision_quantized(p->par.precision) && d->dispatch != PX_MOE_HYBRIDEP && p->par.moe_router_padding <= 0;
  return pads ? 2.0 * (double)d->R * (double)d->H * (double)d->e : 0.0; /* read and written; the gates' 4 B a row left out */
}

/* HBM bytes of one pass of the permutation into expert-major rows (or of
 * its inverse) as the dispatcher runs it, and the experts' padding (pad_bytes).
 * alltoall: the rank's rows gathered into its A routed rows before the
 * exchange, then, with several local experts, the R rows received sorted by
 * local expert (sort_chunks_by_idxs: a copy, read and written). DeepEP: the
 * copies it delivers, one a (token, rank), expanded into the R expert rows. */
static double permute_bytes(const px_plan *p, const px_dims *d) {
  double rows = (double)(d->B * d->Sl), he = (double)d->H * (double)d->e;
  if (px_moe_dispatch_deepep(d->dispatch)) {
    double ranks, nodes;
    px_plan_ep_copies(p, &ranks, &nodes);
    return (rows * ranks * (double)d->Rep / (double)d->A + (double)d->R) * he + pad_bytes(p, d);
  }
  return (rows + (double)d->A) * he + (d->EP > 1 && d->El > 1 ? 2.0 * (double)d->R * he : 0.0) + pad_bytes(p, d);
}

/* A routing op over the B Sl token rows of this rank's sequence shard. */
static px_op *moe_op(px_bld *b, const px_dims *d, px_op_kind kind, px_phase ph, double bytes) {
  px_op *o = px_bld_op(b, kind, PX_STREAM_COMPUTE, ph);
  o->dim[0] = d->B * d->Sl, o->dim[1] = d->H, o->dim[2] = d->K, o->dim[3] = d->E;
  o->dim[4] = d->dispatch != PX_MOE_ALLGATHER ? d->A : d->EP * d->B * d->Sl;
  o->bytes = bytes;
  if (kind == PX_OP_MOE_ROUTE_BWD || kind == PX_OP_MOE_PERMUTE_BWD || kind == PX_OP_MOE_UNPERMUTE_BWD)
    o->flags = PX_OPF_ACCUMULATE;
  return o;
}

/* The shared experts' first half: fc1 (gate and up with SwiGLU) and the activation. */
static void shared_fc1(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x) {
  int64_t rows = d->B * d->S;
  x = px_fp8_cast(b, d, ph, x, false);
  if (d->swiglu) {
    px_linear(b, d, ph, x, L->w_sh_fc1, -1, R(L->sh_gate, 0), R(L->sh_up, 0), NOREF, rows, d->Fs, d->Fs, 0, d->H);
    px_bld_simple(b, PX_OP_SWIGLU, ph, R(L->sh_act, 0), R(L->sh_gate, 0), R(L->sh_up, 0), rows * d->Fs, (double)d->e);
  } else {
    px_linear(b, d, ph, x, L->w_sh_fc1, -1, R(L->sh_fc1, 0), NOREF, NOREF, rows, d->Fs, 0, 0, d->H);
    px_bld_simple(b, PX_OP_GELU, ph, R(L->sh_act, 0), R(L->sh_fc1, 0), NOREF, rows * d->Fs, (double)d->e);
  }
}

px_ref px_moe_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x, px_ref x_full,
                      px_ref *bias_left) {
  px_plan *p = b->p;
  bool a2a = d->dispatch != PX_MOE_ALLGATHER, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  double e = (double)d->e;
  px_linear(b, d, ph, x, L->w_router, L->b_router, R(L->moe_probs, 0), NOREF, NOREF, rows, d->E, 0, 0, H);
  px_op *o = moe_op(b, d, PX_OP_MOE_ROUTE, ph, (double)(rows * d->E) * 8.0 + (double)(rows * d->K) * 8.0);
  o->in[0] = R(L->moe_probs, 0), o->out[0] = R(L->moe_probs, 0), o->out[1] = R(L->moe_idx, 0),
  o->out[2] = R(L->moe_gates, 0);
  if (a2a) { /* the rows and their gates (each read and written) */
    o = moe_op(b, d, PX_OP_MOE_PERMUTE, ph, permute_bytes(p, d) + (double)d->A * 2.0 * GATE_BYTES);
    o->in[0] = x, o->in[1] = R(L->moe_idx, 0), o->out[0] = R(L->moe_send, 0), o->out[1] = R(L->moe_counts, 0);
    o->in[2] = R(L->moe_gates, 0), o->out[2] = R(L->moe_send_w, 0);
    /* blockwise fp8 (DeepSeek-V3): dispatched in fp8, each row with its 1 x 128 tiles' scales; per-tensor
     * recipes quantize the experts' input after the dispatch (Transformer Engine's GroupedLinear) */
    px_ref send = d->f8_block ? px_fp8_cast(b, d, ph, R(L->moe_send, 0), false) : R(L->moe_send, 0);
    px_dtype dt = (px_dtype)p->slots[send.slot].dtype;
    o = px_bld_coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, ph, send,
                    d->f8_block ? px_fp8_twin(p, d, R(L->moe_recv_ep, 0)) : R(L->moe_recv_ep, 0), d->A * H, d->Rep * H,
                    dt, d->EP);
    carry_gates(d, o, R(L->moe_send_w, 0), R(L->moe_recv_w_ep, 0));
    ep_exchange(b, d, o, L, true);
    px_ref recv_ep = R(L->moe_recv_ep, 0), recv = R(L->moe_recv, 0);
    if (d->f8_block) recv_ep = px_fp8_twin(p, d, recv_ep), recv = px_fp8_twin(p, d, recv);
    if (etp) etp_rows(b, d, L, PX_OP_ALLGATHER, ph, recv_ep, recv, R(L->moe_recv_w_ep, 0), R(L->moe_recv_w, 0), dt);
    if (!d->f8_block) rows_cast(b, d, ph, recv, false);
    if (d->Fs > 0) shared_fc1(b, d, L, ph, x_full);
  } else { /* every EP (then ETP) rank's tokens, then the local experts' rows among them */
    px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_EP, ph, x, R(L->moe_send, 0), rows * H, sent * H, d->act, d->EP);
    if (etp)
      px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, ph, R(L->moe_send, 0), R(L->moe_send_all, 0), sent * H,
                  d->ETP * sent * H, d->act, d->ETP);
    if (d->Fs > 0) shared_fc1(b, d, L, ph, x_full);
    /* the gathered tokens' gates (their k each) picked with their rows; Megatron-Core gathers the probabilities
     * and routing map with the tokens: the graph gathers neither (k values a token against its h) */
    o = moe_op(b, d, PX_OP_MOE_PERMUTE, ph,
               (double)(d->ETP * sent + d->R) * (double)H * e + (double)(d->ETP * sent * d->K + d->R) * GATE_BYTES +
                   pad_bytes(p, d));
    o->in[0] = R(L->moe_send_all, 0), o->in[1] = R(L->moe_idx, 0), o->out[0] = R(L->moe_recv, 0);
    o->in[2] = R(L->moe_gates, 0), o->out[2] = R(L->moe_recv_w, 0);
    rows_cast(b, d, ph, R(L->moe_recv, 0), false);
  }
  experts_forward(b, d, L, ph);
  if (a2a) {
    if (etp) etp_rows(b, d, L, PX_OP_REDUCE_SCATTER, ph, R(L->exp_out, 0), R(L->exp_out_ep, 0), NOREF, NOREF, d->act);
    o = px_bld_coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, ph, R(L->exp_out_ep, 0), R(L->moe_ret, 0), d->Rep * H, d->A * H,
                    d->act, d->EP);
    ep_exchange(b, d, o, L, false);
  } else { /* the partial sums of every gathered token, each rank's own after the reduce-scatters */
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE, ph, (double)(d->R + d->ETP * sent) * (double)H * e + pad_bytes(p, d));
    o->in[0] = R(L->exp_out, 0), o->in[2] = R(L->moe_idx, 0);
    o->out[0] = R(L->moe_ret, 0);
    o->flags |= PX_OPF_ACCUMULATE;
    if (etp)
      px_bld_coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, ph, R(L->moe_ret, 0), R(L->moe_ret_ep, 0),
                  d->ETP * sent * H, sent * H, d->act, d->ETP);
  }
  /* the shared experts' output reduced over TP as the dense MLP's; the routed outputs add onto the shard */
  px_ref part = R(L->mlp_part, 0), y = d->T == 1 ? part : R(L->mlp_out, 0);
  if (d->Fs > 0) {
    px_linear(b, d, ph, px_fp8_cast(b, d, ph, R(L->sh_act, 0), false), L->w_sh_fc2, -1, part, NOREF, NOREF, d->B * d->S,
              H, 0, 0, d->Fs);
    y = px_bld_tp_reduce(b, d, ph, part, R(L->mlp_out, 0));
  }
  if (a2a) {
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE, ph, permute_bytes(p, d));
    o->in[0] = R(L->moe_ret, 0), o->in[2] = R(L->moe_idx, 0), o->out[0] = y; /* the gates applied: a plain sum */
    o->flags |= PX_OPF_ACCUMULATE;
  } else {
    o = px_bld_coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_EP, ph, R(L->moe_ret_ep, 0), y, sent * H, rows * H, d->act,
                    d->EP);
    if (d->Fs > 0) o->flags |= PX_OPF_ACCUMULATE;
  }
  return px_branch_dropout(b, d, ph, y, -1, L->mlp_drop, L->mlp_dmask, 2, bias_left);
}

/* The shared experts' backward from dpart into dx (accumulated). */
static void shared_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dpart, px_ref x,
                            px_ref x_shard, px_ref dx) {
  px_plan *p = b->p;
  int64_t rows = d->B * d->S, H = d->H;
  double e = (double)d->e;
  px_ref dact = R(px_bld_grad_slot(p, L->sh_act), 0);
  px_linear_bwd(b, d, dact, R(L->sh_act, 0), NOREF, L->w_sh_fc2, -1, dpart, NOREF, NOREF, NOREF, rows, H, 0, 0, d->Fs,
                NULL);
  px_ref d1 = R(px_bld_grad_slot(p, d->swiglu ? L->sh_gate : L->sh_fc1), 0);
  px_ref d2 = d->swiglu ? R(px_bld_grad_slot(p, L->sh_up), 0) : NOREF;
  px_op *o;
  if (d->swiglu) {
    o = px_bld_op(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->sh_gate, 0), o->in[2] = R(L->sh_up, 0);
    o->out[0] = d1, o->out[1] = d2;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = rows * d->Fs;
    px_bld_elementwise(o, (double)(3 * rows * d->Fs), (double)(2 * rows * d->Fs), e);
    px_bld_eager(b, o, (double)(rows * d->Fs), e);
  } else {
    o = px_bld_simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, d1, dact, R(L->sh_fc1, 0), rows * d->Fs, e);
    o->flags = PX_OPF_ACCUMULATE;
  }
  px_linear_bwd(b, d, dx, x, x_shard, L->w_sh_fc1, -1, d1, NOREF, d2, NOREF, rows, d->Fs, d->swiglu ? d->Fs : 0, 0, H,
                NULL);
}

px_ref px_moe_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dbranch, px_ref dln2_part,
                       px_ref dln2_sh) {
  px_plan *p = b->p;
  bool a2a = d->dispatch != PX_MOE_ALLGATHER, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  double e = (double)d->e;
  px_ref x = R(L->ln2, 0), dpart = NOREF, x_full = NOREF;
  if (d->Fs > 0) {
    dpart = px_bld_tp_gather(b, d, PX_PHASE_BWD, dbranch, R(px_bld_grad_slot(p, L->mlp_part), 0));
    x_full = px_linear_wgrad_input(b, d, L->w_sh_fc1, x, R(L->ln2_full, 0));
  }
  px_ref dx = d->T == 1 ? dln2_part : dln2_sh, dln2 = dx;
  px_ref dret = R(px_bld_grad_slot(p, L->moe_ret), 0), dgates = R(px_bld_grad_slot(p, L->moe_gates), 0);
  px_ref dexp = R(px_bld_grad_slot(p, L->exp_out), 0), dsend = R(px_bld_grad_slot(p, L->moe_send), 0);
  px_op *o;
  if (a2a) { /* the plain sum's backward: each token's gradient to its routed rows */
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE_BWD, PX_PHASE_BWD, permute_bytes(p, d));
    o->in[0] = dbranch, o->in[3] = R(L->moe_idx, 0), o->out[0] = dret;
    px_ref dexp_ep = R(px_bld_grad_slot(p, L->exp_out_ep), 0);
    o = px_bld_coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, PX_PHASE_BWD, dret, dexp_ep, d->A * H, d->Rep * H, d->act,
                    d->EP);
    ep_exchange(b, d, o, L, true);
    if (etp) etp_rows(b, d, L, PX_OP_ALLGATHER, PX_PHASE_BWD, dexp_ep, dexp, NOREF, NOREF, d->act);
  } else {
    px_ref dret_ep = R(px_bld_grad_slot(p, L->moe_ret_ep), 0);
    px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_EP, PX_PHASE_BWD, dbranch, dret_ep, rows * H, sent * H, d->act, d->EP);
    if (etp)
      px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, PX_PHASE_BWD, dret_ep, dret, sent * H, d->ETP * sent * H, d->act,
                  d->ETP);
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE_BWD, PX_PHASE_BWD,
               (double)(d->ETP * sent + d->R) * (double)H * e + pad_bytes(p, d));
    o->in[0] = dret, o->in[3] = R(L->moe_idx, 0), o->out[0] = dexp;
  }
  if (d->Fs > 0) {
    shared_backward(b, d, L, dpart, x_full, x, dln2_part);
    dln2 = px_bld_tp_reduce(b, d, PX_PHASE_BWD, dln2_part, dln2_sh);
  }
  experts_backward(b, d, L);
  /* the rows' gradients and their gates' (partial sums over the ETP ranks' slices) back to the router */
  px_ref drecv = R(px_bld_grad_slot(p, L->moe_recv), 0), dw = R(px_bld_grad_slot(p, L->moe_recv_w), 0);
  if (a2a) {
    px_ref drecv_ep = R(px_bld_grad_slot(p, L->moe_recv_ep), 0), dw_ep = R(px_bld_grad_slot(p, L->moe_recv_w_ep), 0);
    px_ref dsend_w = R(px_bld_grad_slot(p, L->moe_send_w), 0);
    if (etp) etp_rows(b, d, L, PX_OP_REDUCE_SCATTER, PX_PHASE_BWD, drecv, drecv_ep, dw, dw_ep, d->act);
    o = px_bld_coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, PX_PHASE_BWD, drecv_ep, dsend, d->Rep * H, d->A * H, d->act,
                    d->EP);
    carry_gates(d, o, dw_ep, dsend_w);
    ep_exchange(b, d, o, L, false);
    o = moe_op(b, d, PX_OP_MOE_PERMUTE_BWD, PX_PHASE_BWD, permute_bytes(p, d) + (double)d->A * 2.0 * GATE_BYTES);
    o->in[0] = dsend, o->in[1] = R(L->moe_idx, 0), o->in[2] = dsend_w, o->out[0] = dx, o->out[1] = dgates;
  } else {
    px_ref dsend_all = R(px_bld_grad_slot(p, L->moe_send_all), 0);
    o = moe_op(b, d, PX_OP_MOE_PERMUTE_BWD, PX_PHASE_BWD,
               (double)(d->R + d->ETP * sent) * (double)H * e + (double)(d->R + d->ETP * sent * d->K) * GATE_BYTES +
                   pad_bytes(p, d));
    o->in[0] = drecv, o->in[1] = R(L->moe_idx, 0), o->in[2] = dw, o->out[0] = dsend_all, o->out[1] = dgates;
    if (etp)
      px_bld_coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, PX_PHASE_BWD, dsend_all, dsend, d->ETP * sent * H, sent * H,
                  d->act, d->ETP);
    px_bld_coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_EP, PX_PHASE_BWD, dsend, dx, sent * H, rows * H, d->act, d->EP);
    b->b->ops[b->b->nops - 1].flags |= PX_OPF_ACCUMULATE;
  }
  px_ref dlogits = R(px_bld_grad_slot(p, L->moe_probs), 0);
  o = moe_op(b, d, PX_OP_MOE_ROUTE_BWD, PX_PHASE_BWD, (double)(rows * d->E) * 12.0 + (double)(rows * d->K) * 8.0);
  o->in[0] = dgates, o->in[1] = R(L->moe_probs, 0), o->in[2] = R(L->moe_idx, 0), o->out[0] = dlogits;
  px_linear_bwd(b, d, dx, x, NOREF, L->w_router, L->b_router, dlogits, NOREF, NOREF, NOREF, rows, d->E, 0, 0, H, NULL);
  return dln2;
}

px_ref px_mlp_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dout, px_ref dln2_part,
                       px_ref dln2_sh) {
  px_plan *p = b->p;
  int64_t rows_full = d->B * d->S, H = d->H;
  px_ref dln2;
  /* MLP branch: dout -> (dropout) -> row-parallel fc2 */
  px_branch_end_bwd(b, d, dout, L->mlp_out, L->mlp_dmask, L->mlp_part, L->act, L->w_fc2, L->b_fc2, d->F,
                    d->gelu_fused ? L->fc1 : -1);
  px_ref dact = R(px_bld_grad_slot(p, L->act), 0);
  /* Megatron-SP keeps the sharded norm output and gathers it again */
  px_ref ln2_full =
      px_linear_wgrad_input(b, d, L->w_fc1, px_fp8_twin(p, d, R(L->ln2, 0)), px_fp8_twin(p, d, R(L->ln2_full, 0)));
  if (d->swiglu) {
    px_ref dgate = R(px_bld_grad_slot(p, L->gate), 0), dup = R(px_bld_grad_slot(p, L->up), 0);
    px_op *o = px_bld_op(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->gate, 0), o->in[2] = R(L->up, 0);
    o->out[0] = dgate, o->out[1] = dup;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = rows_full * d->F;
    px_bld_elementwise(o, (double)(3 * rows_full * d->F), (double)(2 * rows_full * d->F), (double)d->e);
    px_bld_eager(b, o, (double)(rows_full * d->F), (double)d->e);
    dln2 = px_linear_bwd(b, d, dln2_part, ln2_full, R(L->ln2, 0), L->w_fc1, L->b_fc1, dgate, NOREF, dup, NOREF,
                         rows_full, d->F, d->F, 0, H, &dln2_sh);
  } else {
    px_ref dfc1 = R(px_bld_grad_slot(p, L->fc1), 0);
    if (!d->gelu_fused) {
      px_op *o =
          px_bld_simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, dfc1, dact, R(L->fc1, 0), rows_full * d->F, (double)d->e);
      o->flags = PX_OPF_ACCUMULATE;
    }
    dln2 = px_linear_bwd(b, d, dln2_part, ln2_full, R(L->ln2, 0), L->w_fc1, L->b_fc1, dfc1, NOREF, NOREF, NOREF,
                         rows_full, d->F, 0, 0, H, &dln2_sh);
  }
  return dln2;
}

px_ref px_mlp_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x, bool dropout,
                      px_ref *bias_left) {
  int64_t rows_full = d->B * d->S, H = d->H;
  if (d->swiglu) {
    px_linear(b, d, ph, x, L->w_fc1, L->b_fc1, R(L->gate, 0), R(L->up, 0), NOREF, rows_full, d->F, d->F, 0, H);
    px_bld_simple(b, PX_OP_SWIGLU, ph, R(L->act, 0), R(L->gate, 0), R(L->up, 0), rows_full * d->F, (double)d->e);
  } else if (d->gelu_fused) { /* the GEMM's epilogue: act and the pre-activation the backward needs */
    px_op *o = px_linear(b, d, ph, x, L->w_fc1, L->b_fc1, R(L->act, 0), NOREF, NOREF, rows_full, d->F, 0, 0, H);
    o->flags |= PX_OPF_GELU;
    o->out[3] = R(L->fc1, 0);
    o->bytes += (double)(rows_full * d->F) * (double)d->e;
  } else {
    px_linear(b, d, ph, x, L->w_fc1, L->b_fc1, R(L->fc1, 0), NOREF, NOREF, rows_full, d->F, 0, 0, H);
    px_bld_simple(b, PX_OP_GELU, ph, R(L->act, 0), R(L->fc1, 0), NOREF, rows_full * d->F, (double)d->e);
  }
  return px_branch_end_fwd(b, d, ph, px_fp8_cast(b, d, ph, R(L->act, 0), false).slot, L->w_fc2, L->b_fc2, L->mlp_part,
                           L->mlp_out, dropout ? L->mlp_drop : -1, dropout ? L->mlp_dmask : -1, d->F, 2, bias_left);
}
