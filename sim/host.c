/* The host's issue cost of an op's kernels and its waits for the GPU. */
#include "sim/host.h"

#include "plan/query.h"

static bool is_expert_gemm(px_op_kind k) {
  return k == PX_OP_EXPERT_LINEAR || k == PX_OP_EXPERT_LINEAR_BWD_DATA || k == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
}

/* The exchange that brings the tokens to the experts (an EP all-to-all to them, or the allgather dispatcher's). */
static bool is_dispatch(const px_op *op) {
  return op->group == PX_GROUP_EP &&
         ((op->kind == PX_OP_ALLTOALL && (op->flags & PX_OPF_TO_EXPERTS)) || op->kind == PX_OP_ALLGATHER);
}

/* The local experts a cast quantizes apart: of the routed rows their GEMMs read (PX_OPF_EXPERT_ROWS), or of an
 * expert weight (ZeRO-3's gathered weights, cast at use); 0: neither. */
static int64_t cast_experts(const px_plan *p, const px_op *c) {
  const px_slot *w = c->in[0].slot >= 0 ? &p->slots[c->in[0].slot] : NULL;
  bool weight = w && w->kind == PX_SLOT_PARAM && w->expert;
  return (c->flags & PX_OPF_EXPERT_ROWS) || weight ? px_plan_local_experts(p) : 0;
}

int64_t px_host_kernels(const px_plan *p, const px_op *op) {
  px_op_kind kind = (px_op_kind)op->kind;
  /* Transformer Engine's GroupedLinear runs a cuBLAS GEMM a local expert (general_grouped_gemm over
   * nvte_multi_stream_cublas_gemm, transformer_engine/pytorch/module/grouped_linear.py at d0067d0), BF16 and
   * FP8 alike, in the forward, the data gradient and the weight gradient */
  if (is_expert_gemm(kind)) return op->dim[3] > 0 ? op->dim[3] : 1;
  /* Megatron-Core's gate-scaled bias of the experts' fc2: PyTorch ops, a kernel each */
  if (px_op_expert_bias_kernels(op) > 0) return px_op_expert_bias_kernels(op);
  /* PyTorch eager's composite op: a kernel each of its ops */
  const px_eager_chain *eager = px_op_eager(op);
  if (eager) return px_eager_kernels(eager, (double)px_dtype_bytes(p->act_dtype));
  if (kind == PX_OP_CAST && (op->flags & PX_OPF_FP8) && !(op->flags & PX_OPF_DEQUANT)) {
    /* current scaling quantizes in three kernels: the amax, the scale from it, the cast
     * (Float8CurrentScalingQuantizer::quantize_impl, transformer_engine/pytorch/csrc/quantizer.cpp at d0067d0);
     * delayed scaling's cast-transpose takes its amax inside, and the other recipes' casts are one kernel */
    bool current = p->par.precision == PX_PREC_FP8 && p->par.fp8_recipe == PX_FP8_CURRENT;
    bool delayed = p->par.precision == PX_PREC_FP8 && p->par.fp8_recipe == PX_FP8_DELAYED;
    int64_t per = current ? 3 : 1, experts = cast_experts(p, op);
    /* experts' rows: split_quantize quantizes each local expert's rows apart (its multi-tensor cast-transpose
     * fuses them into one kernel for delayed scaling only: multi_tensor_quantize_impl, extensions/cast.cpp) */
    return experts > 0 && !delayed ? per * experts : per;
  }
  return 1;
}

/* An EP exchange of the tokens, to the experts or back (the combine: an all-to-all, or the allgather
 * dispatcher's reduce-scatter), either way in the backward. */
static bool is_exchange(const px_op *op) {
  return op->group == PX_GROUP_EP &&
         (op->kind == PX_OP_ALLTOALL || op->kind == PX_OP_ALLGATHER || op->kind == PX_OP_REDUCE_SCATTER);
}

/* The first and last of a block's EP exchanges among its ops of phase `phase` (-1: any), -1 without one. */
static void exchange_span(const px_op *ops, int32_t n, int phase, int32_t *first, int32_t *last) {
  *first = *last = -1;
  for (int32_t j = 0; j < n; j++)
    if (is_exchange(&ops[j]) && (phase < 0 || (ops[j].phase == PX_PHASE_BWD) == (phase == PX_PHASE_BWD)))
      *last = j, *first = *first < 0 ? j : *first;
}

bool px_host_graphed(const px_plan *p, px_block_kind k, const px_op *ops, int32_t n, int32_t i) {
  /* the full-iteration graph: every forward and backward op of the step, the optimizer eager */
  if (p->par.cuda_graph == PX_GRAPH_FULL) return px_block_is_compute(k);
  if (!px_graph_router(p->par.cuda_graph) ||
      !(px_block_is_layer_fwd(k) || px_block_is_layer_bwd(k) || px_block_is_layer_w(k)))
    return false;
  int32_t first, last;
  /* the experts' part (dynamic shapes: Megatron-Core captures a MoE layer's attn, moe_router and
   * moe_preprocess only, --cuda-graph-modules) runs eager, its exchanges included */
  if (p->par.cuda_graph == PX_GRAPH_LAYERS) {
    exchange_span(ops, n, -1, &first, &last);
    return first < 0 || i < first || i > last;
  }
  /* router graphs: a MoE layer's pre-MLP norm up to its first exchange, and in the backward from its last exchange
   * to that norm's gradient (a recomputation's forward ops as a forward's); a dense layer (no exchange) eager */
  bool bwd = ops[i].phase == PX_PHASE_BWD;
  exchange_span(ops, n, bwd ? PX_PHASE_BWD : PX_PHASE_FWD, &first, &last);
  if (first < 0) return false;
  int32_t norm = bwd ? last : first;
  if (!bwd) {
    while (norm > 0 && ops[norm].kind != PX_OP_NORM) norm--;
    return i >= norm && i < first;
  }
  while (norm < n - 1 && ops[norm].kind != PX_OP_NORM_BWD) norm++;
  return i > last && i <= norm;
}

/* A quantized GroupedLinear call's Python work a local expert, host.grouped_expert_ops host.op_us each (its
 * default's source: PX_HOST_GROUPED_EXPERT_OPS_SOURCE, plan/cluster.h): Transformer Engine's _GroupedLinear
 * forward and backward loop over the experts in Python (each expert's quantizers set, split_quantize's tensors
 * wrapped, the weights' quantized workspaces looked up, the tensors saved for the backward, the main_grad fetched;
 * transformer_engine/pytorch/module/grouped_linear.py at d0067d0) besides the GEMMs' launches. The backward's call
 * (data and weight gradients together) is taken at the forward's; a BF16 call's loop (no quantizers) is not measured
 * and not counted. Here: that work of op's call before its first GEMM; 0 for any other op (the backward's call is
 * its data gradient's op). */
static double grouped_python_s(const px_cluster *c, const px_op *op) {
  bool call = op->kind == PX_OP_EXPERT_LINEAR || op->kind == PX_OP_EXPERT_LINEAR_BWD_DATA;
  if (!call || !(op->flags & PX_OPF_FP8)) return 0.0;
  return (double)(op->dim[3] > 0 ? op->dim[3] : 1) * c->host_grouped_expert_ops * c->host_op_s;
}

/* A MoE layer's router and its dispatcher's preprocessing in Python beyond the ops the graph issues (the routing
 * scores' top-k, the auxiliary loss and its bookkeeping, the tokens' counts and the exchange's splits; Megatron-Core's
 * TopKRouter with moe_router_fusion, every Megatron-Bridge recipe's): host.router_ops host.op_us, the alltoall
 * dispatcher's own preprocessing host.a2a_preprocess_ops more (their defaults' sources: plan/cluster.h). Charged at
 * the routing op of a forward or a recomputation (the backward runs through autograd's engine: not measured, not
 * counted); 0 for any other op. */
static double router_python_s(const px_plan *p, const px_op *op) {
  if (op->kind != PX_OP_MOE_ROUTE || op->phase == PX_PHASE_BWD) return 0.0;
  const px_cluster *c = &p->cluster;
  double ops = c->host_router_ops + (p->par.moe_dispatch == PX_MOE_A2A ? c->host_a2a_preprocess_ops : 0.0);
  return ops * c->host_op_s;
}

px_host_issue px_host_issue_of(const px_plan *p, px_block_kind k, const px_op *ops, int32_t n, int32_t i) {
  const px_cluster *c = &p->cluster;
  px_host_issue h = {0, 0};
  if (c->host_op_s <= 0 && c->host_launch_s <= 0 && c->host_graph_s <= 0) return h;
  if (px_host_graphed(p, k, ops, n, i)) { /* the graphed module's call (an op's dispatch) and its replay */
    /* the full-iteration graph's one replay a step (about host.op_us + host.graph_launch_us) is left out */
    bool first = p->par.cuda_graph != PX_GRAPH_FULL && (i == 0 || !px_host_graphed(p, k, ops, n, i - 1));
    if (first) h.issue_s = h.first_s = c->host_op_s + c->host_graph_s;
    return h;
  }
  h.first_s = c->host_op_s + grouped_python_s(c, &ops[i]) + router_python_s(p, &ops[i]);
  int64_t kernels = px_host_kernels(p, &ops[i]);
  /* an eager composite op's kernels are PyTorch ops each, dispatched from Python one by one, as the experts' bias's
   * forward loop over them (its backward's from autograd's engine) */
  bool python = px_op_eager(&ops[i]) || ops[i].kind == PX_OP_EXPERT_BIAS;
  h.issue_s = python ? (double)kernels * c->host_op_s + (h.first_s - c->host_op_s)
                     : h.first_s + (double)(kernels - 1) * c->host_launch_s;
  return h;
}

bool px_host_waits(const px_plan *p, const px_op *op, bool before) {
  if (op->phase == PX_PHASE_BWD) return false; /* the backward reuses the counts the forward brought */
  /* a full-iteration graph copies nothing to the host: HybridEP's static per-rank budget
   * (moe_expert_rank_capacity_factor) sizes the experts' rows, Transformer Engine's grouped GEMMs read the
   * counts on the device (use_transformer_engine_op_fuser; transformer_config.py at d98e8a6) */
  if (p->par.cuda_graph == PX_GRAPH_FULL) return false;
  /* the router's padding (moe_router_padding) sizes the alltoall dispatcher's permuted rows by the padded counts: it
   * waits for them before its first permutation ("before_permutation_1", token_dispatcher.py at d98e8a6) */
  if (p->par.moe_router_padding > 0 && p->par.moe_dispatch == PX_MOE_A2A)
    return before && op->kind == PX_OP_MOE_PERMUTE;
  /* the dispatch to the experts: the alltoall dispatcher waits for the counts before its exchange
   * ("before_ep_alltoall", megatron/core/transformer/moe/token_dispatcher.py at d98e8a6), DeepEP's and
   * HybridEP's after theirs (the received tokens' count sizes the permuted buffer, tokens_per_expert.sum());
   * at EP 1 the graph keeps the exchange, a no-op, where the dispatcher ends its preprocessing ("before_finish") */
  return is_dispatch(op) && before == (!px_moe_dispatch_deepep(p->par.moe_dispatch) && op->kind == PX_OP_ALLTOALL);
}
