/* Questions every reader asks of a compiled plan: its slots, layers,
 * experts and ops, which ops overlap, and its analytic pipeline bubble. */
#include "plan/query.h"

#include <math.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_mem_cat_names, PX_MEM_COUNT, "params", "grads", "optimizer", "activations", "buffers", "workspace");

double px_totals_dp_wire_bytes(const px_stage_totals *t) {
  return t->wire_bytes[PX_GROUP_DP] + t->wire_bytes[PX_GROUP_SHARD] + t->wire_bytes[PX_GROUP_REPLICA] +
         t->wire_bytes[PX_GROUP_EDP];
}

int64_t px_plan_local_experts(const px_plan *p) { return p->model.experts / (p->par.ep > 0 ? p->par.ep : 1); }

/* The expert rows of the busiest rank (worst false) or of the worst routing. */
static int64_t expert_rows(const px_plan *p, bool worst_case) {
  const px_model *m = &p->model;
  if (m->experts == 0) return 0;
  /* each rank routes its sequence shard (SP: Megatron-Core's dispatchers take [S/TP, B, H]); the EP all-to-all
   * brings the busiest rank r rows, the ETP all-gather etp times that */
  int64_t ep = p->par.ep, etp = p->grid.etp, el = px_plan_local_experts(p), k = m->experts_per_token;
  int64_t rows = p->par.mbs * p->seq_local, a = rows * k, worst = ep * rows * (k < el ? k : el), r;
  if (m->capacity_factor > 0) { /* each of the ep ranks sends an expert at most its capacity, a token once */
    int64_t cap = px_moe_capacity(m->capacity_factor, a, m->experts);
    r = el * ep * (cap < rows ? cap : rows);
  }
  else
    r = worst_case ? worst : (int64_t)ceil(p->par.moe_imbalance * (double)a);
  return etp * (r < worst ? r : worst);
}

int64_t px_plan_expert_rows(const px_plan *p) { return expert_rows(p, false); }

int64_t px_plan_expert_buffer_rows(const px_plan *p) {
  return expert_rows(p, p->par.moe_buffers == PX_MOE_BUF_WORST);
}

/* C(a, k) / C(b, k): the chance that k draws without replacement from b
 * items all fall among a given a of them. */
static double all_among(double a, double b, int64_t k) {
  double r = 1.0;
  for (int64_t i = 0; i < k; i++) r *= a - (double)i > 0 ? (a - (double)i) / (b - (double)i) : 0.0;
  return r;
}

/* The chance that a token's copies reach a unit of u consecutive experts (a
 * rank's, a node's), as px_plan_ep_copies routes them. */
static double unit_reached(const px_model *m, double u) {
  double e = (double)m->experts;
  int64_t k = m->experts_per_token, g = m->expert_groups, c = m->groups_per_token;
  if (g <= 0 || c <= 0 || c >= g || c > k) return 1.0 - all_among(e - u, e, k); /* uniform over all experts */
  double gs = e / (double)g, pool = (double)c * gs - (double)c; /* the chosen groups' experts less their best */
  if (u >= gs) /* whole groups: reached when one of them is chosen */
    return 1.0 - all_among((double)g - u / gs, (double)g, c);
  double rest = 1.0 - all_among(pool - u, pool, k - c); /* one of the k - c others among its u */
  return (double)c / (double)g * (u / gs + (1.0 - u / gs) * rest);
}

void px_plan_ep_copies(const px_plan *p, double *ranks, double *nodes) {
  const px_model *m = &p->model;
  *ranks = *nodes = 0.0;
  if (m->experts == 0) return;
  const px_placement *g = &p->grid.ep_place;
  int64_t ep = p->par.ep > 0 ? p->par.ep : 1, pn = g->per_node > 0 ? g->per_node : 1, n = g->nodes > 0 ? g->nodes : 1;
  double el = (double)px_plan_local_experts(p);
  *ranks = (double)ep * unit_reached(m, el);
  *nodes = (double)n * unit_reached(m, el * (double)(pn < ep ? pn : ep));
}

const px_op *px_inst_ops(const px_plan *plan, const px_program *prog, const px_inst *in) {
  return in->ops >= 0 ? &prog->ops[in->ops] : plan->blocks[in->block].ops;
}

px_op_iter px_op_iter_begin(const px_plan *plan, int64_t stage) {
  return (px_op_iter){.plan = plan, .prog = &plan->programs[stage], .id = -1};
}

const px_op *px_op_next(px_op_iter *it) {
  while (it->inst < it->prog->ninsts) {
    const px_inst *in = &it->prog->insts[it->inst];
    const px_block *b = &it->plan->blocks[in->block];
    if (it->k < b->nops) {
      it->in = in;
      it->block = b;
      it->id++;
      return &px_inst_ops(it->plan, it->prog, in)[it->k++];
    }
    it->inst++, it->k = 0;
  }
  return NULL;
}

int64_t px_program_nops(const px_plan *plan, int64_t stage) {
  const px_program *prog = &plan->programs[stage];
  int64_t n = 0;
  for (int32_t i = 0; i < prog->ninsts; i++) n += plan->blocks[prog->insts[i].block].nops;
  return n;
}

/* Qi et al. (ICLR 2024, Table 2) give (p-1)(f+b-w) for ZB-H1 and
 * (p-1)(f+b-2w) for ZB-H2 with m >= p (ZB-H2: m >= 2p-1) and w <= b. Two
 * floors apply: with the optimizer step synchronised (gradient norm), a
 * stage is idle at least (p-1) f, the time F takes to reach the last stage
 * (the paper's post-validation removes it; parallax does not model that);
 * and with fewer micro-batches the fill and drain cost (p-1)(f+b) less the
 * W that hide in them, min(b, w) for each micro-batch after the first.
 * Checked against the simulator in tests/test_sim.c. */
double px_zb_idle(int64_t p, int64_t m, double f, double b, double w, bool h2) {
  double steady = f + b - (h2 ? 2 * w : w), few = (double)(p - 1) * (f + b) - (double)(m - 1) * (b < w ? b : w);
  if (steady < f) steady = f;
  steady *= (double)(p - 1);
  return few > steady ? few : steady;
}

/* A chunk's work per micro-batch, its layers' forward, backward (B) and W FLOPs as the dense layer's blocks
 * have them: with partial recomputation the layers that keep their activations have a backward without the
 * recomputed forward. */
static void chunk_work(const px_plan *p, int64_t vs, double fbw[3]) {
  const px_block *bl = p->blocks;
  double b_redo = bl[PX_BLOCK_LAYER_BWD].flops[PX_PHASE_BWD] + bl[PX_BLOCK_LAYER_BWD].flops[PX_PHASE_RECOMPUTE];
  double b_kept = bl[PX_BLOCK_LAYER_BWD_KEPT].flops[PX_PHASE_BWD];
  bool partial = px_parallel_recompute_partial(&p->par);
  for (int64_t i = 0; i < p->vstage_layers[vs]; i++) {
    fbw[0] += bl[PX_BLOCK_LAYER_FWD].flops[PX_PHASE_FWD];
    fbw[1] += partial && !px_parallel_layer_recomputed(&p->par, i) ? b_kept : b_redo;
    fbw[2] += bl[PX_BLOCK_LAYER_BWD_W].flops[PX_PHASE_BWD];
  }
}

double px_plan_bubble_analytic(const px_plan *plan) {
  int64_t pp = plan->par.pp, v = plan->par.schedule == PX_SCHED_INTERLEAVED ? plan->par.vpp : 1;
  double m = (double)plan->microbatches, sum = 0, max = 0;
  if (px_parallel_split_w(&plan->par)) { /* the slowest stage's F, B, W in proportion to its FLOPs */
    double slow[3] = {0};
    for (int64_t s = 0; s < pp; s++) {
      double fbw[3] = {0};
      chunk_work(plan, s, fbw);
      double t = fbw[0] + fbw[1] + fbw[2];
      sum += t;
      if (t > max) max = t, memcpy(slow, fbw, sizeof slow);
    }
    double idle = px_zb_idle(pp, plan->microbatches, slow[0], slow[1], slow[2], plan->par.schedule == PX_SCHED_ZB_H2);
    double T = m * max + idle;
    return T > 0 ? 1.0 - m * sum / ((double)pp * T) : 0.0;
  }
  /* A stage's work per micro-batch (t_s, its chunks' forward and backward FLOPs), free embedding, head and
   * communication: the slowest stage runs m micro-batches, and the others' work, one chunk deep, fills and
   * drains the pipeline: T = m t_max + (sum t - t_max) / v. Even stages give (p-1)/(v m + p-1). */
  for (int64_t s = 0; s < pp; s++) {
    double t = 0;
    for (int64_t c = 0; c < plan->par.vpp; c++) {
      double fbw[3] = {0};
      chunk_work(plan, c * pp + s, fbw);
      t += fbw[0] + fbw[1];
    }
    sum += t;
    if (t > max) max = t;
  }
  if (sum <= 0) return 0;
  double T = m * max + (sum - max) / (double)v;
  return 1.0 - m * sum / ((double)pp * T);
}

bool px_plan_shares_embedding(const px_plan *plan) {
  return plan->par.pp > 1 && (plan->model.tied_embeddings || plan->par.mtp_layers > 0);
}

bool px_plan_op_overlapped(const px_plan *plan, const px_op *ops, int32_t nops, int32_t i) {
  const px_op *o = &ops[i];
  int ov = plan->par.overlap;
  /* a compute op's own exchange (the loss's row statistics over the vocabulary shards) is one it waits for */
  if (!px_op_is_collective((px_op_kind)o->kind)) return false;
  if (o->group != PX_GROUP_TP && o->group != PX_GROUP_CP && o->group != PX_GROUP_EP && o->group != PX_GROUP_ETP)
    return false;
  if (ov & PX_OVERLAP_TP) return true;
  if (!(ov & PX_OVERLAP_TP_BWD) || o->group != PX_GROUP_TP) return false;
  if (o->kind == PX_OP_ALLREDUCE || o->kind == PX_OP_REDUCE_SCATTER) /* dx's, between dx = dy W and dW = dy^T x */
    return i > 0 && ops[i - 1].kind == PX_OP_LINEAR_BWD_DATA && i + 1 < nops &&
           ops[i + 1].kind == PX_OP_LINEAR_BWD_WEIGHT;
  if (o->kind != PX_OP_ALLGATHER) return false;
  bool data = false; /* x's, for the weight gradient: a data-gradient GEMM runs before its first consumer */
  for (int32_t j = i + 1; j < nops; j++) {
    if (ops[j].dep == i) return data && ops[j].kind == PX_OP_LINEAR_BWD_WEIGHT;
    data = data || ops[j].kind == PX_OP_LINEAR_BWD_DATA;
  }
  return false;
}

static bool tp_pipe_gemm(const px_op *o) { return o->kind == PX_OP_LINEAR || o->kind == PX_OP_LINEAR_BWD_DATA; }

/* The GEMM all-gather j feeds: the next op reading it, or the one after an fp8 cast of it between; -1 none. */
static int32_t gather_gemm(const px_op *ops, int32_t nops, int32_t j) {
  if (j + 1 < nops && ops[j + 1].dep == j && tp_pipe_gemm(&ops[j + 1])) return j + 1;
  if (j + 2 < nops && ops[j + 1].kind == PX_OP_CAST && ops[j + 1].dep == j && tp_pipe_gemm(&ops[j + 2]) &&
      ops[j + 2].in[0].slot == ops[j + 1].out[0].slot)
    return j + 2;
  return -1;
}

px_tp_pipe px_plan_op_tp_pipe(const px_plan *plan, px_block_kind k, const px_op *ops, int32_t nops, int32_t i) {
  const px_op *o = &ops[i];
  if (!(plan->par.overlap & PX_OVERLAP_TP) || o->group != PX_GROUP_TP || !(o->flags & PX_OPF_SEQ_AXIS) ||
      !(px_block_is_layer_fwd(k) || px_block_is_layer_bwd(k)))
    return PX_TP_PIPE_NONE;
  if (o->kind == PX_OP_ALLGATHER && gather_gemm(ops, nops, i) >= 0) return PX_TP_PIPE_AG;
  /* the forward GEMM's partial sums reduced (the backward's, beside their weight gradient, are tp-bwd's) */
  if (o->kind == PX_OP_REDUCE_SCATTER && o->phase != PX_PHASE_BWD && i > 0 && ops[i - 1].kind == PX_OP_LINEAR &&
      ops[i - 1].out[0].slot == o->in[0].slot && px_plan_tp_pipe_gather(plan, k, ops, nops, i - 1) < 0)
    return PX_TP_PIPE_RS;
  return PX_TP_PIPE_NONE;
}

int32_t px_plan_tp_pipe_gather(const px_plan *plan, px_block_kind k, const px_op *ops, int32_t nops, int32_t i) {
  for (int32_t j = i - 1; j >= 0 && j >= i - 2; j--) {
    if (ops[j].kind != PX_OP_ALLGATHER || px_plan_op_tp_pipe(plan, k, ops, nops, j) != PX_TP_PIPE_AG) continue;
    int32_t g = gather_gemm(ops, nops, j);
    if (g == i || (g == i + 1 && ops[i].kind == PX_OP_CAST)) return j;
  }
  return -1;
}

int64_t px_plan_tp_pipe_chunks(const px_plan *plan, px_tp_pipe pipe) {
  return pipe == PX_TP_PIPE_AG ? plan->par.tp : PX_TP_PIPE_RS_SPLITS;
}

double px_plan_tp_pipe_bytes(const px_plan *plan, const px_op *ops, int32_t nops, int32_t j) {
  double bytes = (double)ops[j].coll_bytes;
  if (ops[j].kind == PX_OP_ALLGATHER && gather_gemm(ops, nops, j) == j + 2)
    bytes *= (double)px_dtype_bytes((px_dtype)plan->slots[ops[j + 1].out[0].slot].dtype) /
             (double)px_dtype_bytes((px_dtype)plan->slots[ops[j].out[0].slot].dtype);
  return bytes;
}

uint32_t px_plan_slot_hash(const char *name) {
  uint32_t h = 2166136261u;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 16777619u;
  return h;
}

int px_plan_slot(const px_plan *plan, const char *name) {
  if (!plan->slot_index) return -1;
  uint32_t mask = (uint32_t)(2 * plan->slots_cap - 1);
  for (uint32_t i = px_plan_slot_hash(name) & mask; plan->slot_index[i] >= 0; i = (i + 1) & mask)
    if (!strcmp(plan->slots[plan->slot_index[i]].name, name)) return plan->slot_index[i];
  return -1;
}

int64_t px_plan_layer_stage(const px_plan *plan, int64_t layer, int64_t *chunk) {
  for (int64_t vs = 0; vs < plan->vstages; vs++) {
    if (layer >= plan->vstage_first[vs] && layer < plan->vstage_first[vs] + plan->vstage_layers[vs]) {
      if (chunk) *chunk = vs / plan->par.pp;
      return vs % plan->par.pp;
    }
  }
  return -1;
}
