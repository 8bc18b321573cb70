/* The simulation driver. Each stage has five streams (compute, tp, dp,
 * pp-send, pp-recv) that run their instances in program order; an instance
 * starts when it heads its stream and its dependencies are done. A compute
 * block runs as segments: compute for a precomputed time, then each TP
 * collective as a flow (an overlapped one beside the compute that follows).
 * Flows (collectives, transfers) first wait their latency, then move bytes
 * over per-GPU link resources (NVLink and NIC, each direction) shared
 * equally with the other flows on them; rates are recomputed whenever a flow
 * joins or leaves. The fast path runs a block as one event while its links
 * are its own, from a timeline of the block run alone once per stage. */
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/engine.h"
#include "sim/host.h"
#include "sim/network.h"
#include "sim/straggler.h"

enum { R_NVL_OUT, R_NVL_IN, R_NIC_OUT, R_NIC_IN, R_PER_STAGE };

PX_NAME_TABLE(px_sim_comm_names, PX_SIM_COMM_COUNT, "tp", "cp", "ep", "pp", "dp", "host");

/* The kind of communication a group's collectives are, in the step's breakdown. */
static px_sim_comm comm_kind(px_group g) {
  switch (g) {
    case PX_GROUP_TP: case PX_GROUP_ETP: return PX_SIM_COMM_TP;
    case PX_GROUP_CP: return PX_SIM_COMM_CP;
    case PX_GROUP_EP: return PX_SIM_COMM_EP;
    case PX_GROUP_PREV: case PX_GROUP_NEXT: return PX_SIM_COMM_PP;
    default: return PX_SIM_COMM_DP;
  }
}

/* What the compute stream waited for when an instance that one ends made it ready: a communication kind,
 * a pipeline receive (WAIT_PIPE: the transfer, and before it the bubble), or nothing but time (WAIT_IDLE). */
enum { WAIT_PIPE = PX_SIM_COMM_COUNT, WAIT_IDLE };
static int wait_cause(px_block_kind k) {
  switch (k) {
    case PX_BLOCK_RECV_FWD: case PX_BLOCK_RECV_BWD: return WAIT_PIPE;
    case PX_BLOCK_SEND_FWD: case PX_BLOCK_SEND_BWD: return PX_SIM_COMM_PP;
    case PX_BLOCK_GRAD_SYNC: case PX_BLOCK_PARAM_SYNC: case PX_BLOCK_EMB_SYNC: return PX_SIM_COMM_DP;
    case PX_BLOCK_OFFLOAD_GRAD: case PX_BLOCK_FETCH_PARAM: case PX_BLOCK_OFFLOAD_ACT: case PX_BLOCK_FETCH_ACT:
      return PX_SIM_COMM_HOST;
    default: return WAIT_IDLE;
  }
}
enum { EV_SEG_DONE, EV_FLOW_JOIN, EV_FLOW_DONE };
enum { OWN_SEGMENT, OWN_ASYNC, OWN_INST, OWN_P2P };

typedef struct px_sim_state sim;

/* One piece of a compute block. */
typedef struct {
  bool comm, async;
  bool launch;      /* not comm: the GPU idle, waiting for the host to launch the next op's kernels */
  uint8_t kind;     /* comm: px_sim_comm */
  bool waits;       /* compute: first waits for async collective `wait` of the block */
  int8_t wait;
  int8_t ord;       /* async: its ordinal in the block */
  double dur_s;     /* compute */
  px_coll_cost cc;  /* TP collective */
} seg;

/* Where a compute block stands in its segments. */
typedef struct {
  int seg;             /* the next segment */
  int async_open;      /* overlapped flows still running */
  uint64_t async_done; /* bit k: the block's async collective k finished */
  int waiting;         /* the async collective the next segment waits for, -1 none */
  bool in_seg;         /* a segment of the block is running (its end moves the block on) */
} cursor;

/* A block run alone, once every event up to t_ns from its start is handled. */
typedef struct {
  uint64_t t_ns;
  cursor c;
  uint64_t seg_end_ns;  /* the running compute segment's end (c.in_seg on a compute segment) */
  int32_t open0, nopen; /* its unfinished flows: seg_list.open[open0, open0 + nopen) */
  int32_t own_sms;      /* SMs its open flows hold */
  uint64_t compute_ns;  /* compute run by t_ns */
  uint64_t own_sm_ns;   /* compute its own flows displaced by t_ns: SMs held x compute time beside them */
} fast_point;

typedef struct {
  int32_t seg; /* the comm segment the flow runs */
  px_flow_state st;
} fast_flow;

typedef struct {
  seg *v;
  int n;
  double op_s[PX_OP_COUNT]; /* compute time by op kind, for reporting */
  double phase_s[PX_PHASE_COUNT]; /* compute time by phase (PX_PHASE_COMM's: the block's own) */
  double launch_s;                 /* its launch segments: the GPU waiting for the host's launches */
  double host_lead_s;              /* how far the host is ahead of the GPU at the block's end */
  uint8_t own_phase;               /* px_phase: the block's (forward, backward, optimizer) */
  double alone_wait_s[PX_SIM_COMM_COUNT]; /* run alone: the time it waits for communication, by kind */
  /* Fast path: the whole block as one event while nothing else uses the
   * links its collectives need; split back into segments, in the state its
   * timeline had then, if something does. */
  bool fast_ok;
  uint64_t fast_ns;
  uint8_t res_mask; /* R_* of the stage its collectives use */
  fast_point *pts;  /* (npts) the timeline, one point per event time */
  int32_t npts, nopen, cap_pts, cap_open;
  fast_flow *open;  /* (nopen) the points' unfinished flows */
  uint64_t *flow_t0, *flow_t1; /* (n) each comm segment's flow start and end */
  uint64_t fast_compute_ns, fast_own_sm_ns; /* a fast_point's figures at fast_ns */
  uint8_t pair[2]; /* a merged pair's: its forward and backward kinds */
} seg_list;

typedef struct {
  int32_t *list;
  int32_t n, next;
  bool busy;
  int32_t inst;   /* running */
  int32_t joined; /* syncs queued behind it that run in its flow: list[next - joined, next) */
  int32_t partner; /* EP overlap: the backward running merged with it (PX_INSTF_MERGED), -1 none */
  cursor c;       /* a compute block's segments (c.seg: a sync instance's running op) */
  uint64_t start_ns;
  bool fast;      /* running the whole block as one event since fast_t0 */
  uint64_t fast_t0;
  uint32_t version; /* discards segment events of a block that was split */
  bool paying;    /* the block runs on for the compute collectives' SMs displaced (block_end) */
  double contention_start_s; /* the stage's contention_s when the running instance started */
} stream_q;

typedef struct {
  const px_program *prog;
  stream_q q[PX_STREAM_COUNT];
  int32_t *pending;     /* unfinished dependencies per instance */
  int32_t *rdep_off, *rdep; /* reverse dependencies (CSR) */
  uint8_t *posted;
  seg_list costs[PX_BLOCK_KIND_COUNT];
  seg_list *pairs;   /* (npairs) EP overlap: the merged (forward, backward) kinds the program runs */
  int32_t npairs;
  int32_t *pair_of;  /* (ninsts) a merged forward's pair in pairs, else -1 */
  px_coll_cost *op_cost; /* (prog->nops) the stage's own DP-stream collectives */
  uint64_t *host_ns;     /* (prog->nops) the stage's own host-stream copies */
  px_coll_cost p2p_next, p2p_prev;
  px_sim_stage stats;
  uint64_t pipe_first_ns, pipe_last_ns, end_ns;
  int32_t ndone;
  /* Collectives against compute (px_coll_cost.sms): the SMs the flows
   * running on the stage's GPU hold, whether the compute stream runs a
   * compute segment (fast blocks: their timeline says), and the SM x ns of
   * compute they displaced in the running block, integrated up to
   * contention_ns (contention_tick). */
  int64_t comm_sms;
  bool computing;
  uint64_t contention_ns, contention_sm_ns;
  /* The step's breakdown (stats.parts): what each instance waited for last (wait_cause of the one whose end
   * made it ready, and for a receive when its transfer started), when the compute stream was last free,
   * the transfer start of the receive running, and what ended last on the stage. */
  uint8_t *cause;
  uint64_t *cause_ns;
  uint64_t compute_free_ns, recv_xfer_ns;
  int end_cause;
} stage_state;

struct px_sim_state {
  const px_plan *plan;
  const px_sim_opts *opts;
  px_engine eng;
  stage_state *st;
  int64_t pp;
  px_net *net;
  px_sim_span *spans; /* (nspans of cap_spans) opts.record_spans */
  int64_t nspans, cap_spans;
  px_err *err;
  px_status status;
  double stretch; /* GPU compute time over the median GPU's: the slowest rank's pace */
  px_engine tl_eng; /* a block's timeline: the block alone in a stage's links */
  px_net *tl_net;
};

/* The segments instance i runs: its block's, or a merged pair's. */
static const seg_list *inst_costs(const stage_state *ss, int32_t i) {
  return ss->pair_of[i] >= 0 ? &ss->pairs[ss->pair_of[i]] : &ss->costs[ss->prog->insts[i].block];
}

/* ---- costs, computed once per stage and block ---- */

static px_status seg_push(seg_list *l, seg s, px_err *err) {
  seg *nv = realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
  if (!nv) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  l->v = nv;
  l->v[l->n++] = s;
  return PX_OK;
}

/* Adds compute time to the list's open compute segment, or opens one that
 * first waits for async collective `wait` (-1: none). */
static px_status seg_add_compute(seg_list *l, double s, int wait, px_err *err) {
  if (l->n > 0 && !l->v[l->n - 1].comm && !l->v[l->n - 1].launch && wait < 0) {
    l->v[l->n - 1].dur_s += s;
    return PX_OK;
  }
  return seg_push(l, (seg){.comm = false, .waits = wait >= 0, .wait = (int8_t)wait, .ord = -1, .dur_s = s}, err);
}

/* At most this many overlapped collectives per block are tracked one by one;
 * later ones are waited for at the block's end only. */
#define ASYNC_MAX 64

px_placement px_sim_group_place(const px_plan *p, px_group g) {
  switch (g) {
    case PX_GROUP_TP: return p->grid.tp_place;
    case PX_GROUP_DP: return p->grid.dp_place;
    case PX_GROUP_EMB: return px_grid_place(&p->grid, 0, (p->par.pp - 1) * p->par.tp * p->grid.wdp, 2);
    case PX_GROUP_CP: return p->grid.cp_place;
    case PX_GROUP_EP: return p->grid.ep_place;
    case PX_GROUP_EDP: return p->grid.edp_place;
    case PX_GROUP_ETP: return p->grid.etp_place;
    case PX_GROUP_ALL: return px_grid_place(&p->grid, 0, 1, p->grid.world);
    case PX_GROUP_SHARD: return p->grid.shard_place;
    case PX_GROUP_REPLICA: return p->grid.replica_place;
    default: return px_grid_place(&p->grid, 0, 1, 1);
  }
}

/* Context parallelism's ring attention (an op with PX_OPF_CP_RING): cp
 * steps of equal work (the load-balanced layout gives every step the same
 * causal share), each step's K/V block (with its gradients in the backward)
 * sent on to the next rank while the current one is computed (Megatron-Core
 * overlaps them so). The hops are asynchronous segments the next step waits
 * for; the backward's last hop brings each rank its dK, dV after the last
 * step, exposed. */
static px_status ring_segments(sim *S, const px_op *op, double t, int *nasync, seg_list *out) {
  const px_plan *p = S->plan;
  int64_t cp = p->par.cp;
  bool bwd = op->kind == PX_OP_FLASH_ATTN_BWD;
  px_placement pl = px_sim_group_place(p, PX_GROUP_CP);
  px_coll_cost hop = px_coll_cost_of(&p->cluster, PX_COLL_P2P, op->coll_bytes, &pl);
  px_status st = PX_OK;
  int prev = -1; /* the async hop the next step waits for */
  for (int64_t k = 0; k < cp && !st; k++) {
    if (k < cp - 1 && !S->opts->comm_free) {
      int8_t ord = *nasync < ASYNC_MAX ? (int8_t)(*nasync)++ : -1;
      st = seg_push(out, (seg){.comm = true, .async = true, .kind = PX_SIM_COMM_CP, .ord = ord, .cc = hop}, S->err);
      if (!st) st = seg_add_compute(out, t / (double)cp, prev, S->err);
      prev = ord;
    } else if (!st) {
      st = seg_add_compute(out, t / (double)cp, prev, S->err);
    }
  }
  if (!st && bwd && !S->opts->comm_free) /* dK, dV home: half the hop's bytes */
    st = seg_push(out, (seg){.comm = true, .kind = PX_SIM_COMM_CP, .ord = -1,
                             .cc = px_coll_cost_of(&p->cluster, PX_COLL_P2P, op->coll_bytes / 2, &pl)},
                  S->err);
  return st;
}

/* Where the walk of a compute stream's ops stands (block_segments_led): the host lane (sim/host.h) from the
 * start, when it has issued the ops so far, and when the compute stream is through them (its collectives alone on
 * the links; async_end: when each overlapped one ends); the overlapped collectives numbered so far. */
typedef struct {
  double host_s, gpu_s, async_end[ASYNC_MAX];
  int nasync;
  bool lane;    /* the compute stream's (a receive's: posted before) */
  int8_t piped; /* the async ordinal of the last piece of the reduce-scatter the GEMM before pipelined, -1 none */
} op_walk;

/* GEMM op beside a TP collective by Transformer Engine's userbuffers (px_plan_op_tp_pipe): the GEMM in n chunks of
 * chunk_s. Ring exchange (the all-gather of coll_bytes before it): each chunk but the first waits for the hop
 * bringing its shard, the hops (p2p of a shard, on the copy engines: no SMs) started a chunk ahead, the gather's
 * consumers after the GEMM waiting for the last. Pipeline (the reduce-scatter of coll_bytes after it): each chunk's
 * reduce-scatter starts after it and runs beside the next; the reduce-scatter's consumers wait for the last. wait:
 * the async collective the GEMM waits for first, -1 none. Returns the ordinal the collective's consumers wait for in
 * *ord (-1: none). */
static px_status tp_pipe_segments(sim *S, double coll_bytes, px_tp_pipe pipe, int64_t n, double chunk_s, int wait,
                                  op_walk *w, seg_list *out, int8_t *ord) {
  const px_plan *p = S->plan;
  px_placement pl = px_sim_group_place(p, PX_GROUP_TP);
  bool ag = pipe == PX_TP_PIPE_AG;
  px_coll_cost cc = px_coll_cost_of(&p->cluster, ag ? PX_COLL_P2P : PX_COLL_REDUCE_SCATTER,
                                    (uint64_t)(coll_bytes / (double)n), &pl);
  cc.sms = ag ? 0 : PX_TP_PIPE_RS_SMS;
  px_status st = PX_OK;
  int prev = wait; /* what the next chunk waits for */
  *ord = -1;
  for (int64_t k = 0; k < n && !st; k++) {
    bool piece = !ag || k < n - 1; /* a hop beside this chunk, or this chunk's reduce-scatter after it */
    int8_t o = piece && w->nasync < ASYNC_MAX ? (int8_t)w->nasync++ : -1;
    if (piece && o >= 0) w->async_end[o] = w->gpu_s + (double)(ag ? k : k + 1) * chunk_s + cc.time_s;
    seg g = {.comm = true, .async = true, .kind = PX_SIM_COMM_TP, .ord = o, .cc = cc};
    if (ag && piece) st = seg_push(out, g, S->err);
    if (!st) st = seg_add_compute(out, chunk_s, prev, S->err);
    if (!st && !ag) st = seg_push(out, g, S->err);
    prev = ag ? o : -1;
    if (piece) *ord = o;
  }
  return st;
}

/* Op i of a block of kind k (ops[0, nops)) onto out; ord_of: (nops, 256 tracked) each of the block's ops' async
 * ordinal, -1 none; ep_async: its EP exchanges overlapped (EP overlap's merged layers), their consumers waiting. */
static px_status op_segments(sim *S, px_block_kind k, const px_op *ops, int32_t nops, int32_t i, int8_t *ord_of,
                             bool ep_async, op_walk *w, seg_list *out) {
  const px_plan *p = S->plan;
  const px_cluster *c = &p->cluster;
  px_status st = PX_OK;
  if (i < 256) ord_of[i] = -1;
  const px_op *op = &ops[i];
  /* a GEMM Transformer Engine's userbuffers run beside the TP collective before or after it, in chunks; an fp8 cast
   * between a gather and its GEMM quantizes the rank's shard alone, before the exchange */
  int32_t gather = S->opts->comm_free ? -1 : px_plan_tp_pipe_gather(p, k, ops, nops, i);
  bool shard_cast = gather >= 0 && op->kind == PX_OP_CAST;
  px_tp_pipe pipe = PX_TP_PIPE_NONE;
  if (gather >= 0 && !shard_cast) pipe = PX_TP_PIPE_AG;
  else if (!S->opts->comm_free && i + 1 < nops && px_plan_op_tp_pipe(p, k, ops, nops, i + 1) == PX_TP_PIPE_RS)
    pipe = PX_TP_PIPE_RS;
  int64_t chunks = px_plan_tp_pipe_chunks(p, pipe);
  px_op chunk = px_op_row_chunk(op, chunks);
  double t = pipe ? (double)chunks * px_compute_op_s(&c->gpu, p->act_dtype, &chunk) * S->stretch
             : px_op_on_host((px_op_kind)op->kind) ? px_host_op_s(c, op)
                                                    : px_compute_op_s(&c->gpu, p->act_dtype, op) * S->stretch;
  if (shard_cast) t /= (double)p->par.tp;
  out->op_s[op->kind] += t;
  out->phase_s[op->phase == PX_PHASE_COMM ? out->own_phase : op->phase] += t;
  /* an op using an overlapped collective's tensors waits for it */
  int wait = op->dep >= 0 && op->dep < i && i < 256 && !shard_cast ? ord_of[op->dep] : -1;
  if (wait >= 0 && w->async_end[wait] > w->gpu_s) w->gpu_s = w->async_end[wait];
  if (px_host_waits(p, op, true) && w->gpu_s > w->host_s) w->host_s = w->gpu_s;
  px_host_issue h = w->lane ? px_host_issue_of(p, k, ops, nops, i) : (px_host_issue){0, 0};
  if (h.issue_s > 0) { /* its first kernel once the op's dispatch is through, its last once the host is */
    double nk = (double)px_host_kernels(p, op), first = w->host_s + h.first_s;
    w->host_s += h.issue_s;
    double idle = fmax(first - w->gpu_s, w->host_s - w->gpu_s - t * (1.0 - 1.0 / nk));
    if (idle >= 1e-9) { /* (a nanosecond, the clock's tick) after the wait for the collective it needs, if
                         * any: the host restarts behind it */
      if (wait >= 0 && !(st = seg_add_compute(out, 0, wait, S->err))) wait = -1;
      if (!st) st = seg_push(out, (seg){.launch = true, .ord = -1, .dur_s = idle}, S->err);
      out->launch_s += idle;
      w->gpu_s += idle;
    }
  }
  if (st) return st;
  if (pipe) { /* the collective's pieces beside the chunks; its consumers wait for the last */
    int8_t last;
    int32_t x = pipe == PX_TP_PIPE_AG ? gather : i + 1;
    st = tp_pipe_segments(S, px_plan_tp_pipe_bytes(p, ops, nops, x), pipe, chunks, t / (double)chunks, wait, w, out,
                          &last);
    if (pipe == PX_TP_PIPE_AG && x < 256) ord_of[x] = last;
    if (pipe == PX_TP_PIPE_RS) w->piped = last;
    w->gpu_s += t;
    return st;
  }
  w->gpu_s += t;
  bool flash = op->kind == PX_OP_FLASH_ATTN || op->kind == PX_OP_FLASH_ATTN_BWD; /* PX_OPF_CP_RING's kinds */
  if (flash && (op->flags & PX_OPF_CP_RING)) return ring_segments(S, op, t, &w->nasync, out);
  if ((t > 0 || wait >= 0) && (st = seg_add_compute(out, t, wait, S->err))) return st;
  px_placement pl = px_sim_group_place(p, (px_group)op->group);
  if (S->opts->comm_free || op->coll == PX_COLL_NONE || op->coll == PX_COLL_P2P || pl.size <= 1 || op->coll_bytes == 0)
    return PX_OK;
  switch (px_plan_op_tp_pipe(p, k, ops, nops, i)) { /* costed beside the GEMM next to it (tp_pipe_segments) */
    case PX_TP_PIPE_AG: return PX_OK;
    case PX_TP_PIPE_RS: if (i < 256) ord_of[i] = w->piped; return PX_OK;
    default: break;
  }
  px_coll_cost cc;
  bool ep = op->kind == PX_OP_ALLTOALL && op->group == PX_GROUP_EP;
  if (ep && px_moe_dispatch_deepep(p->par.moe_dispatch)) {
    double ranks, nodes; /* DeepEP's kernels: a copy a (token, rank), one a node across */
    px_plan_ep_copies(p, &ranks, &nodes);
    cc = px_coll_cost_deepep(c, &pl, px_ep_token_bytes(op, p->model.experts_per_token), ranks, nodes,
                             !(op->flags & PX_OPF_TO_EXPERTS), p->par.moe_dispatch == PX_MOE_HYBRIDEP);
  } else {
    cc = px_coll_cost_of(c, (px_coll)op->coll, op->coll_bytes, &pl);
  }
  /* an overlapped collective runs beside the compute up to its first consumer */
  bool async = (ep && ep_async) || px_plan_op_overlapped(p, ops, nops, i);
  int8_t ord = async && w->nasync < ASYNC_MAX && i < 256 ? (int8_t)w->nasync++ : -1;
  if (i < 256) ord_of[i] = ord;
  st = seg_push(out, (seg){.comm = true, .async = async, .kind = (uint8_t)comm_kind((px_group)op->group), .ord = ord,
                           .cc = cc}, S->err);
  if (!async) w->gpu_s += cc.time_s;
  else if (ord >= 0) w->async_end[ord] = w->gpu_s + cc.time_s;
  if (px_host_waits(p, op, false) && (ord < 0 ? w->gpu_s : w->async_end[ord]) > w->host_s)
    w->host_s = ord < 0 ? w->gpu_s : w->async_end[ord];
  return st;
}

/* The walk's end: how far the host is ahead, and the exposed collectives' time without a timeline (block_timeline's). */
static void walk_end(const op_walk *w, seg_list *out) {
  out->host_lead_s = w->gpu_s > w->host_s ? w->gpu_s - w->host_s : 0;
  for (int i = 0; i < out->n; i++)
    if (out->v[i].comm && !out->v[i].async) out->alone_wait_s[out->v[i].kind] += out->v[i].cc.time_s;
}

/* The segments of a block's ops (the block's, or the stage's own sized copies), the host lead_s ahead of the
 * GPU at its start; out->host_lead_s: how far ahead it is at the end. */
static px_status block_segments_led(sim *S, int64_t s, px_block_kind k, const px_op *ops, double lead_s,
                                    seg_list *out) {
  const px_plan *p = S->plan;
  const px_block *b = &p->blocks[k];
  px_status st = PX_OK;
  double over = S->opts->block_cost ? S->opts->block_cost(S->opts->block_cost_ctx, s, k) : -1.0;
  px_phase own = k == PX_BLOCK_OPTIMIZER ? PX_PHASE_OPT : px_block_is_bwd(k) ? PX_PHASE_BWD : PX_PHASE_FWD;
  out->own_phase = (uint8_t)own;
  if (over >= 0) {
    out->phase_s[own] += over;
    return seg_add_compute(out, over, -1, S->err);
  }
  int8_t ord_of[256]; /* op -> its async ordinal, -1 none */
  op_walk w = {.host_s = -lead_s, .lane = px_block_is_compute(k) || k == PX_BLOCK_OPTIMIZER, .piped = -1};
  for (int32_t i = 0; i < b->nops && !st; i++) st = op_segments(S, k, ops, b->nops, i, ord_of, false, &w, out);
  if (!st) walk_end(&w, out);
  return st;
}

/* EP overlap: a MoE layer's forward kf and a backward kb run merged as Megatron-Core's combined 1F1B runs a layer
 * pair (TransformerLayerSchedulePlan.run, model_chunk_schedule_plan.py at d98e8a6), each one's token exchanges on
 * the communication stream beside the other's compute: the backward's combine (with the unpermutation before it)
 * beside the forward's attention, router and permutation; the forward's dispatch, then the backward's, beside the
 * backward's expert MLP and the forward's; the forward's combine beside the backward's router, norm and attention;
 * last the forward's unpermutation and residual add. A dense layer's ops run where its attention would. */
static px_status merged_segments_led(sim *S, px_block_kind kf, px_block_kind kb, double lead_s, seg_list *out) {
  const px_plan *p = S->plan;
  const px_block *f = &p->blocks[kf], *b = &p->blocks[kb];
  int32_t xf[2], xb[2], nxf = 0, nxb = 0; /* each block's EP exchanges: the forward's dispatch and combine, the
                                             backward's combine and dispatch */
  for (int32_t i = 0; i < f->nops; i++)
    if (f->ops[i].kind == PX_OP_ALLTOALL && f->ops[i].group == PX_GROUP_EP && nxf < 2) xf[nxf++] = i;
  for (int32_t i = 0; i < b->nops; i++)
    if (b->ops[i].kind == PX_OP_ALLTOALL && b->ops[i].group == PX_GROUP_EP && nxb < 2) xb[nxb++] = i;
  /* the ends of the first two pieces of each (a dense layer: all of it in its attention's piece) */
  int32_t f1 = nxf == 2 ? xf[0] + 1 : f->nops, f2 = nxf == 2 ? xf[1] + 1 : f->nops;
  int32_t b1 = nxb == 2 ? xb[0] + 1 : 0, b2 = nxb == 2 ? xb[1] + 1 : 0;
  const struct {
    bool bwd;
    int32_t lo, hi;
  } piece[] = {{true, 0, b1}, {false, 0, f1}, {true, b1, b2}, {false, f1, f2}, {true, b2, b->nops}, {false, f2, f->nops}};
  int8_t ord_f[256], ord_b[256];
  op_walk w = {.host_s = -lead_s, .lane = true, .piped = -1};
  px_status st = PX_OK;
  out->own_phase = PX_PHASE_FWD; /* its collectives' time by phase: the forward's */
  for (size_t k = 0; k < sizeof piece / sizeof *piece && !st; k++) {
    const px_block *blk = piece[k].bwd ? b : f;
    for (int32_t i = piece[k].lo; i < piece[k].hi && !st; i++)
      st = op_segments(S, piece[k].bwd ? kb : kf, blk->ops, blk->nops, i, piece[k].bwd ? ord_b : ord_f, true, &w, out);
  }
  if (!st) walk_end(&w, out);
  return st;
}

/* A block's segments, the host as far ahead at its start as the block alone leaves it at its end: the step
 * repeats each block kind (a layer's forward, micro-batch after micro-batch and layer after layer), so the
 * host's lead over the GPU entering one is about the lead the one before it left. A merged pair (kb >= 0) alike. */
static px_status block_segments(sim *S, int64_t s, px_block_kind k, int kb, const px_op *ops, seg_list *out) {
  const px_cluster *c = &S->plan->cluster;
  bool lane = c->host_op_s > 0 || c->host_launch_s > 0;
  seg_list first = {0};
  px_status st = PX_OK;
  double lead = 0;
  if (lane) {
    st = kb >= 0 ? merged_segments_led(S, k, (px_block_kind)kb, 0.0, &first) : block_segments_led(S, s, k, ops, 0.0, &first);
    lead = first.host_lead_s;
    free(first.v);
  }
  if (st) return st;
  return kb >= 0 ? merged_segments_led(S, k, (px_block_kind)kb, lead, out) : block_segments_led(S, s, k, ops, lead, out);
}

/* ---- a block's segments, walked by the event loop and by its timeline ---- */

enum { STEP_COMPUTE, STEP_ASYNC, STEP_SYNC, STEP_WAIT, STEP_END };

/* The block's next step from c: a compute segment or a sync collective to
 * run (the block goes on when it ends), an async collective to start (then
 * the next step), a wait for an async collective, or the end. */
static int cursor_step(const seg_list *l, cursor *c, const seg **g) {
  c->in_seg = false;
  while (c->seg < l->n) {
    *g = &l->v[c->seg];
    if ((*g)->waits && !(c->async_done >> (*g)->wait & 1)) { /* resumed when that collective ends */
      c->waiting = (*g)->wait;
      return STEP_WAIT;
    }
    c->seg++;
    if ((*g)->async) {
      c->async_open++;
      return STEP_ASYNC;
    }
    c->in_seg = true;
    return (*g)->comm ? STEP_SYNC : STEP_COMPUTE;
  }
  return c->async_open == 0 ? STEP_END : STEP_WAIT;
}

/* An async collective's flow tag: its ordinal, ASYNC_MAX past the ones tracked. */
static int64_t async_tag(const seg *g) { return g->ord < 0 ? ASYNC_MAX : g->ord; }

/* Async collective x ended: STEP_SYNC when the block goes on (it waited for
 * x), STEP_END when the block is done, STEP_WAIT otherwise. */
static int cursor_async_done(const seg_list *l, cursor *c, int64_t x) {
  c->async_open--;
  if (x >= 0 && x < ASYNC_MAX) c->async_done |= (uint64_t)1 << x;
  if (c->waiting >= 0 && c->waiting == x) {
    c->waiting = -1;
    return STEP_SYNC;
  }
  return c->async_open == 0 && !c->in_seg && c->seg >= l->n ? STEP_END : STEP_WAIT;
}

/* SMs a collective's kernel holds on each GPU it runs on (none with free communication). */
static int held_sms(const sim *S, const px_coll_cost *cc) { return S->opts->comm_free ? 0 : cc->sms; }

/* The flow of a collective; src/dst are the stages whose link resources it
 * uses (equal for collectives, neighbours for p2p). */
static void flow_spec_of(const sim *S, const px_coll_cost *cc, int64_t src, int64_t dst, px_flow_spec *f) {
  memset(f, 0, sizeof *f);
  if (S->opts->comm_free) return;
  f->latency_s = cc->latency_s;
  for (int l = 0; l < PX_LINK_COUNT; l++) {
    if (cc->bytes[l] <= 0 || cc->bw[l] <= 0) continue;
    int out = l == PX_LINK_INTRA ? R_NVL_OUT : R_NIC_OUT, in = l == PX_LINK_INTRA ? R_NVL_IN : R_NIC_IN;
    f->res[f->nres] = (int32_t)(src * R_PER_STAGE + out), f->bytes[f->nres] = cc->bytes[l], f->bw[f->nres++] = cc->bw[l];
    f->res[f->nres] = (int32_t)(dst * R_PER_STAGE + in), f->bytes[f->nres] = cc->bytes[l], f->bw[f->nres++] = cc->bw[l];
  }
}

/* The kind of communication a block whose compute segments are not running waits for: its sync collective,
 * the async one its next segment needs, or at its end one still open (fid: each segment's open flow); -1 none. */
static int awaited_kind(const seg_list *l, const cursor *c, const int32_t *fid) {
  if (c->in_seg && c->seg > 0 && l->v[c->seg - 1].comm) return l->v[c->seg - 1].kind;
  for (int k = 0; c->waiting >= 0 && k < l->n; k++)
    if (l->v[k].async && l->v[k].ord == c->waiting) return l->v[k].kind;
  for (int k = 0; k < l->n; k++)
    if (fid[k] >= 0) return l->v[k].kind;
  return -1;
}

/* Appends the point the timeline is at (fid: each segment's open flow, -1 none; at: its SM figures). */
static px_status timeline_point(sim *S, seg_list *l, const cursor *c, uint64_t seg_end_ns, const int32_t *fid,
                                const fast_point *at) {
  int32_t nopen = 0;
  for (int k = 0; k < l->n; k++) nopen += fid[k] >= 0;
  if (l->npts == l->cap_pts) {
    fast_point *np = realloc(l->pts, (size_t)(2 * l->cap_pts + 16) * sizeof *np);
    if (!np) return px_err_set(S->err, PX_ERR_RUNTIME, "out of memory");
    l->pts = np, l->cap_pts = 2 * l->cap_pts + 16;
  }
  if (l->nopen + nopen > l->cap_open) {
    int32_t cap = 2 * (l->nopen + nopen) + 16;
    fast_flow *nf = realloc(l->open, (size_t)cap * sizeof *nf);
    if (!nf) return px_err_set(S->err, PX_ERR_RUNTIME, "out of memory");
    l->open = nf, l->cap_open = cap;
  }
  l->pts[l->npts++] = (fast_point){S->tl_eng.now_ns, *c, seg_end_ns, l->nopen, nopen, at->own_sms, at->compute_ns,
                                    at->own_sm_ns};
  for (int k = 0; k < l->n; k++)
    if (fid[k] >= 0) {
      l->open[l->nopen].seg = k;
      px_net_state(S->tl_net, fid[k], &l->open[l->nopen++].st);
    }
  return PX_OK;
}

/* The block run alone on one stage's links, as the event loop runs it (the
 * same steps, the same network): its length, and a point at each event time
 * for split_fast to resume from. An uncontended block then takes fast_ns to
 * the nanosecond, whatever its overlapped flows share. */
static px_status block_timeline(sim *S, seg_list *l) {
  px_engine *e = &S->tl_eng;
  e->n = 0, e->now_ns = 0;
  int32_t *fid = malloc((size_t)l->n * sizeof *fid);
  l->flow_t0 = calloc((size_t)l->n, sizeof *l->flow_t0);
  l->flow_t1 = calloc((size_t)l->n, sizeof *l->flow_t1);
  if (!fid || !l->flow_t0 || !l->flow_t1) {
    free(fid);
    return px_err_set(S->err, PX_ERR_RUNTIME, "out of memory");
  }
  for (int k = 0; k < l->n; k++) fid[k] = -1;
  cursor c = {.waiting = -1};
  uint64_t seg_end = 0, last = 0;
  fast_point at = {0}; /* the SM figures as they stand */
  double wait_s[PX_SIM_COMM_COUNT] = {0}; /* the block's waits for communication, by kind */
  bool go = true, end = false, computing = false, launching = false;
  px_status st = PX_OK;
  px_event ev;
  for (;;) {
    while (go && !st) { /* the block on from c, as run_segment goes */
      const seg *g = NULL;
      int step = cursor_step(l, &c, &g), k = c.seg - 1;
      go = false;
      if (step == STEP_COMPUTE) {
        seg_end = e->now_ns + px_ns(g->dur_s);
        computing = !g->launch, launching = g->launch;
        st = px_engine_push(e, seg_end, EV_SEG_DONE, 0, 0, S->err);
      } else if (step == STEP_ASYNC || step == STEP_SYNC) {
        px_flow_spec f;
        flow_spec_of(S, &g->cc, 0, 0, &f);
        fid[k] = px_net_start(S->tl_net, &f, (uint64_t)k);
        l->flow_t0[k] = e->now_ns;
        at.own_sms += held_sms(S, &g->cc);
        go = step == STEP_ASYNC;
      } else if (step == STEP_END) {
        end = true;
      }
    }
    if (st || end) break;
    if ((e->n == 0 || e->heap[0].t_ns > e->now_ns) && (st = timeline_point(S, l, &c, seg_end, fid, &at))) break;
    if (!px_engine_pop(e, &ev)) break; /* stalled: cannot happen, and the block then never goes fast */
    if (computing) { /* as contention_tick integrates it */
      at.compute_ns += e->now_ns - last;
      at.own_sm_ns += (uint64_t)at.own_sms * (e->now_ns - last);
    } else if (!launching) { /* waiting, since the last event, as the state before this one says */
      int k = awaited_kind(l, &c, fid);
      if (k >= 0) wait_s[k] += (double)(e->now_ns - last) * 1e-9;
    }
    last = e->now_ns;
    uint64_t tag, start;
    if (ev.kind == EV_SEG_DONE) {
      computing = launching = false;
      go = true;
    } else if (ev.kind == EV_FLOW_JOIN) {
      px_net_on_join(S->tl_net, (int32_t)ev.a);
    } else if (px_net_on_done(S->tl_net, (int32_t)ev.a, ev.b, &tag, &start)) {
      l->flow_t1[tag] = e->now_ns;
      fid[tag] = -1;
      at.own_sms -= held_sms(S, &l->v[tag].cc);
      int step = l->v[tag].async ? cursor_async_done(l, &c, async_tag(&l->v[tag])) : STEP_SYNC;
      go = step == STEP_SYNC;
      end = step == STEP_END;
    }
  }
  free(fid);
  e->n = 0; /* stale events of re-rated flows */
  if (!st) st = px_net_status(S->tl_net, S->err);
  l->fast_ok = !st && end;
  if (l->fast_ok) memcpy(l->alone_wait_s, wait_s, sizeof wait_s);
  l->fast_ns = e->now_ns;
  l->fast_compute_ns = at.compute_ns;
  l->fast_own_sm_ns = at.own_sm_ns;
  return st;
}

/* A segment list's links and, run alone, its timeline (the fast path). */
static px_status costs_finish(sim *S, seg_list *l) {
  for (int k = 0; k < l->n; k++) {
    const seg *g = &l->v[k];
    if (g->comm && g->cc.bytes[PX_LINK_INTRA] > 0) l->res_mask |= 1 << R_NVL_OUT | 1 << R_NVL_IN;
    if (g->comm && g->cc.bytes[PX_LINK_INTER] > 0) l->res_mask |= 1 << R_NIC_OUT | 1 << R_NIC_IN;
  }
  return l->n > 1 && !S->opts->no_fast ? block_timeline(S, l) : PX_OK;
}

/* Per-stage costs of every block kind, merged pair, unit syncs and p2p. */
static px_status stage_costs(sim *S, int64_t s) {
  const px_plan *p = S->plan;
  const px_cluster *c = &p->cluster;
  stage_state *ss = &S->st[s];
  const px_program *prog = ss->prog;
  px_status st;
  /* blocks run as segments; a receive's segments (the TP all-gather of
   * scattered slices) follow its transfer */
  int32_t opt = -1; /* the stage's own optimizer ops */
  for (int32_t i = 0; i < prog->ninsts && opt < 0; i++)
    if (prog->insts[i].block == PX_BLOCK_OPTIMIZER) opt = i;
  for (int kk = 0; kk < PX_BLOCK_KIND_COUNT; kk++) {
    px_block_kind kind = (px_block_kind)kk;
    if (!px_block_is_compute(kind) && kind != PX_BLOCK_OPTIMIZER && kind != PX_BLOCK_RECV_FWD &&
        kind != PX_BLOCK_RECV_BWD)
      continue;
    seg_list *l = &ss->costs[kind];
    const px_op *ops =
        kind == PX_BLOCK_OPTIMIZER && opt >= 0 ? px_inst_ops(p, prog, &prog->insts[opt]) : p->blocks[kind].ops;
    if ((st = block_segments(S, s, kind, -1, ops, l)) || (st = costs_finish(S, l))) return st;
  }
  /* EP overlap: each merged forward with the backward after it on the compute stream (serial: never merged) */
  for (int32_t i = 0; i < prog->ninsts; i++) {
    ss->pair_of[i] = -1;
    if (!(prog->insts[i].flags & PX_INSTF_MERGED) || S->opts->serial) continue;
    int32_t j = i + 1;
    while (j < prog->ninsts && prog->insts[j].stream != PX_STREAM_COMPUTE) j++;
    if (j == prog->ninsts) continue;
    px_block_kind kf = (px_block_kind)prog->insts[i].block, kb = (px_block_kind)prog->insts[j].block;
    int32_t x = 0;
    while (x < ss->npairs && !(ss->pairs[x].pair[0] == kf && ss->pairs[x].pair[1] == kb)) x++;
    if (x == ss->npairs) {
      seg_list *np = realloc(ss->pairs, (size_t)(ss->npairs + 1) * sizeof *np);
      if (!np) return px_err_set(S->err, PX_ERR_RUNTIME, "out of memory");
      ss->pairs = np;
      seg_list *l = &ss->pairs[ss->npairs++];
      memset(l, 0, sizeof *l);
      l->pair[0] = (uint8_t)kf, l->pair[1] = (uint8_t)kb;
      if ((st = block_segments(S, s, kf, kb, NULL, l))) return st;
      if ((st = costs_finish(S, l))) return st;
    }
    ss->pair_of[i] = x;
  }
  /* the stage's own sized collectives: unit reductions and gathers, the tied embedding's */
  ss->op_cost = px_calloc((size_t)prog->nops + 1, sizeof *ss->op_cost, S->err);
  if (!ss->op_cost) return PX_ERR_RUNTIME;
  ss->host_ns = px_calloc((size_t)prog->nops + 1, sizeof *ss->host_ns, S->err);
  if (!ss->host_ns) return PX_ERR_RUNTIME;
  for (int32_t k = 0; k < prog->nops; k++) {
    const px_op *o = &prog->ops[k];
    if (o->stream == PX_STREAM_HOST) ss->host_ns[k] = S->opts->comm_free ? 0 : px_ns(px_host_op_s(c, o));
    if (o->stream != PX_STREAM_DP) continue;
    px_placement pl = px_sim_group_place(p, (px_group)o->group);
    ss->op_cost[k] = px_coll_cost_of(c, (px_coll)o->coll, o->coll_bytes, &pl);
  }
  uint64_t act = p->blocks[PX_BLOCK_SEND_FWD].ops[0].coll_bytes;
  if (p->par.pp > 1) {
    ss->p2p_next = px_coll_cost_p2p(c, act, px_grid_pp_link_intra(&p->grid, s));
    ss->p2p_prev = px_coll_cost_p2p(c, act, px_grid_pp_link_intra(&p->grid, (s - 1 + p->par.pp) % p->par.pp));
  }
  return PX_OK;
}

/* ---- a lower bound on the step time, without the event engine ---- */

/* A compute block's least time on its stream: its compute segments, as
 * run_segment times them (each px_ns of its duration), and the collectives
 * it waits for in turn (not overlapped: async false), each no faster than
 * alone on its links (px_coll_cost's time_s, as the block's fast path takes
 * it; a flow that shares a link is slower), less 2 ns for the rounding of
 * a flow split or re-rated on its way. */
static px_status block_compute_ns(sim *S, int64_t s, px_block_kind k, const px_op *ops, uint64_t *out) {
  seg_list l = {0};
  px_status st = block_segments(S, s, k, -1, ops, &l);
  bool ep_hidden = S->plan->par.overlap & PX_OVERLAP_EP; /* merged layers may hide every exchange */
  *out = 0;
  for (int i = 0; !st && i < l.n; i++) {
    const seg *g = &l.v[i];
    uint64_t t = px_ns(g->comm ? g->cc.time_s : g->dur_s);
    if (!g->comm) *out += t;
    else if (!g->async && !(ep_hidden && g->kind == PX_SIM_COMM_EP) && t > 2) *out += t - 2;
  }
  free(l.v);
  return st;
}

px_status px_sim_block_bounds_ns(const px_plan *p, uint64_t out_ns[PX_BLOCK_KIND_COUNT], px_err *err) {
  px_sim_opts defaults = {0};
  /* compute at the pace the simulation runs it (the straggler's stretch), as sim_once sets it */
  sim S = {.plan = p, .opts = &defaults, .pp = p->par.pp, .err = err, .stretch = px_straggler_plan_stretch(p)};
  px_status st = PX_OK;
  memset(out_ns, 0, PX_BLOCK_KIND_COUNT * sizeof *out_ns);
  for (int k = 0; !st && k < PX_BLOCK_KIND_COUNT; k++) /* the compute blocks: layers, embedding, head */
    if (px_block_is_compute((px_block_kind)k))
      st = block_compute_ns(&S, 0, (px_block_kind)k, p->blocks[k].ops, &out_ns[k]);
  return st;
}

/* The least time of a stage's data-parallel and host streams, each of which
 * runs its instances one at a time (try_start): a DP collective is a flow
 * of its latency and bytes on each link at no more than the fastest rate
 * any of the stage's DP ops gets there (one that joins others carries their
 * bytes at its own rate), less 2 ns a flow for the rounding; a host copy
 * takes its time. The more loaded stream's time. */
static px_status side_streams_ns(const px_plan *p, int64_t s, uint64_t *out_ns, px_err *err) {
  const px_program *prog = &p->programs[s];
  const px_cluster *c = &p->cluster;
  px_coll_cost *cost = px_calloc((size_t)prog->nops + 1, sizeof *cost, err); /* (nops) each DP op alone */
  if (!cost) return PX_ERR_RUNTIME;
  double bw[PX_LINK_COUNT] = {0}, bytes[PX_LINK_COUNT] = {0}, dp_s = 0;
  uint64_t host_ns = 0, flows = 0;
  for (int32_t k = 0; k < prog->nops; k++) {
    const px_op *o = &prog->ops[k];
    if (o->stream != PX_STREAM_DP) continue;
    px_placement pl = px_sim_group_place(p, (px_group)o->group);
    cost[k] = px_coll_cost_of(c, (px_coll)o->coll, o->coll_bytes, &pl);
    for (int l = 0; l < PX_LINK_COUNT; l++)
      if (cost[k].bw[l] > bw[l]) bw[l] = cost[k].bw[l];
  }
  for (int32_t i = 0; i < prog->ninsts; i++) {
    const px_inst *in = &prog->insts[i];
    if (in->ops < 0 || (in->stream != PX_STREAM_DP && in->stream != PX_STREAM_HOST)) continue;
    for (int32_t j = 0; j < p->blocks[in->block].nops; j++) {
      const px_op *o = &prog->ops[in->ops + j];
      if (in->stream == PX_STREAM_HOST) {
        host_ns += px_ns(px_host_op_s(c, o));
        continue;
      }
      const px_coll_cost *cc = &cost[in->ops + j];
      dp_s += cc->latency_s;
      for (int l = 0; l < PX_LINK_COUNT; l++) bytes[l] += cc->bytes[l];
      flows++;
    }
  }
  double link_s = 0;
  for (int l = 0; l < PX_LINK_COUNT; l++)
    if (bw[l] > 0 && bytes[l] / bw[l] > link_s) link_s = bytes[l] / bw[l];
  uint64_t dp_ns = (uint64_t)((dp_s + link_s) * 1e9);
  dp_ns = dp_ns > 2 * flows ? dp_ns - 2 * flows : 0;
  *out_ns = dp_ns > host_ns ? dp_ns : host_ns;
  free(cost);
  return PX_OK;
}

px_status px_sim_step_bound_s(const px_plan *p, double *out_s, px_err *err) {
  px_sim_opts defaults = {0};
  sim S = {.plan = p, .opts = &defaults, .pp = p->par.pp, .err = err, .stretch = px_straggler_plan_stretch(p)};
  int64_t pp = p->par.pp, total = 0;
  *out_s = 0;
  for (int64_t s = 0; s < pp; s++) total += p->programs[s].ninsts;
  /* per stage, its compute stream's instances in program order: pos (instance -> place, -1 off the
   * stream), the instance at each place, its time and the earliest it can end */
  int32_t *pos = px_calloc((size_t)total + 1, sizeof *pos, err), *inst = px_calloc((size_t)total + 1, sizeof *inst, err);
  uint64_t *dur = px_calloc((size_t)total + 1, sizeof *dur, err), *end = px_calloc((size_t)total + 1, sizeof *end, err);
  int64_t *base = px_calloc((size_t)pp * 4 + 1, sizeof *base, err); /* stage s: offset, count, cursor, clock */
  px_status st = pos && inst && dur && end && base ? PX_OK : PX_ERR_RUNTIME;
  uint64_t kind_ns[PX_BLOCK_KIND_COUNT] = {0};
  bool runs[PX_BLOCK_KIND_COUNT] = {0}; /* kinds timed from their segments */
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) runs[k] = px_block_is_compute((px_block_kind)k);
  if (!st) st = px_sim_block_bounds_ns(p, kind_ns, err);
  for (int64_t s = 0, off = 0; !st && s < pp; s++) {
    const px_program *prog = &p->programs[s];
    int64_t n = 0;
    base[4 * s] = off;
    int32_t opt = -1; /* the first optimizer instance */
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      pos[off + i] = -1;
      if (in->stream != PX_STREAM_COMPUTE) continue;
      if (in->block == PX_BLOCK_OPTIMIZER && opt < 0) opt = i;
      pos[off + i] = (int32_t)n;
      inst[off + n] = i;
      dur[off + n] = runs[in->block] ? kind_ns[in->block] : 0;
      n++;
    }
    /* the optimizer's ops are the stage's own, its first instance's (as stage_costs takes them): timed
     * once the walk above has found it (it comes last) */
    uint64_t opt_ns = 0;
    if (opt >= 0) st = block_compute_ns(&S, s, PX_BLOCK_OPTIMIZER, px_inst_ops(p, prog, &prog->insts[opt]), &opt_ns);
    for (int64_t k = pos[off + (opt >= 0 ? opt : 0)]; !st && opt >= 0 && k < n; k++)
      if (prog->insts[inst[off + k]].block == PX_BLOCK_OPTIMIZER) dur[off + k] = opt_ns;
    base[4 * s + 1] = n;
    off += prog->ninsts;
  }
  /* Each stream runs its instances in order, so one ends no earlier than the one before it plus
   * its own time; one that waits for a receive starts no earlier than the instances the peer's
   * send waits for have ended (a transfer starts when both sides are posted). Stages advance in
   * turn as far as what they wait for is known: a longest path over the compute streams and the
   * transfers with everything else free, which the simulation (everything else taking its time,
   * flows sharing links) cannot beat. */
  bool progress = true, done = false;
  while (!st && progress && !done) {
    progress = false, done = true;
    for (int64_t s = 0; s < pp; s++) {
      const px_program *prog = &p->programs[s];
      int64_t off = base[4 * s], n = base[4 * s + 1];
      for (; base[4 * s + 2] < n; base[4 * s + 2]++) {
        int64_t k = base[4 * s + 2];
        const px_inst *in = &prog->insts[inst[off + k]];
        uint64_t t = (uint64_t)base[4 * s + 3];
        bool ready = true;
        for (int32_t d = 0; d < in->ndeps && ready; d++) {
          const px_inst *r = &prog->insts[prog->deps[in->dep_start + d]];
          if (r->block != PX_BLOCK_RECV_FWD && r->block != PX_BLOCK_RECV_BWD) continue;
          int64_t ps = r->block == PX_BLOCK_RECV_BWD ? (s + 1) % pp : (s - 1 + pp) % pp;
          const px_program *pprog = &p->programs[ps];
          const px_inst *send = &pprog->insts[r->peer];
          int64_t poff = base[4 * ps];
          for (int32_t e = 0; e < send->ndeps; e++) {
            int32_t at = pos[poff + pprog->deps[send->dep_start + e]];
            if (at < 0) continue;
            if (at >= base[4 * ps + 2]) {
              ready = false;
              break;
            }
            if (end[poff + at] > t) t = end[poff + at];
          }
        }
        if (!ready) break;
        end[off + k] = t + dur[off + k];
        base[4 * s + 3] = (int64_t)end[off + k];
        progress = true;
      }
      if (base[4 * s + 2] < n) done = false;
    }
  }
  uint64_t lb = 0;
  for (int64_t s = 0; !st && done && s < pp; s++) {
    uint64_t side = 0;
    if ((uint64_t)base[4 * s + 3] > lb) lb = (uint64_t)base[4 * s + 3];
    if ((st = side_streams_ns(p, s, &side, err))) break;
    if (side > lb) lb = side;
  }
  *out_s = (double)lb * 1e-9; /* 0 when the walk could not finish: no bound */
  free(pos), free(inst), free(dur), free(end), free(base);
  return st;
}

/* ---- flows ---- */

static void fail(sim *S, px_status st) {
  if (!S->status) S->status = st;
}

static void split_fast(sim *S, int64_t s, int res);

/* A flow's owner, packed in its tag: who to tell when it ends, and the SMs it holds. */
static uint64_t tag_of(int owner, int stream, px_stream kind, int64_t stage, int64_t x, int sms) {
  return (uint64_t)owner | (uint64_t)stream << 2 | (uint64_t)kind << 5 | (uint64_t)stage << 8 |
         ((uint64_t)x & 0xffffff) << 32 | (uint64_t)sms << 56;
}

/* ---- collectives' SMs against compute ---- */

/* The last point of a block's timeline at or before t (the first is at 0). */
static const fast_point *timeline_at(const seg_list *l, uint64_t t) {
  int32_t lo = 0, hi = l->npts - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (l->pts[mid].t_ns <= t) lo = mid;
    else hi = mid - 1;
  }
  return &l->pts[lo];
}

static bool point_running(const seg_list *l, const fast_point *pt) {
  return pt->c.in_seg && !l->v[pt->c.seg - 1].comm;
}
/* ... and it is compute, not a wait for the host's launches */
static bool point_computing(const seg_list *l, const fast_point *pt) {
  return point_running(l, pt) && !l->v[pt->c.seg - 1].launch;
}

/* Compute a fast block has run t ns after its start, and the compute its own
 * flows displaced by then (SM x ns): between points nothing changes. */
static uint64_t fast_compute_ns(const seg_list *l, uint64_t t) {
  if (t >= l->fast_ns) return l->fast_compute_ns;
  const fast_point *pt = timeline_at(l, t);
  return pt->compute_ns + (point_computing(l, pt) ? t - pt->t_ns : 0);
}
static uint64_t fast_own_sm_ns(const seg_list *l, uint64_t t) {
  if (t >= l->fast_ns) return l->fast_own_sm_ns;
  const fast_point *pt = timeline_at(l, t);
  return pt->own_sm_ns + (point_computing(l, pt) ? (uint64_t)pt->own_sms * (t - pt->t_ns) : 0);
}

/* Adds to stage s's running block the compute the SMs its flows hold took
 * since the last tick: the SMs held x the compute run meanwhile (a fast
 * block's own flows are in its timeline and added when it ends or splits). */
static void contention_tick(sim *S, int64_t s) {
  stage_state *ss = &S->st[s];
  uint64_t now = S->eng.now_ns, from = ss->contention_ns;
  ss->contention_ns = now;
  if (ss->comm_sms == 0 || now == from) return;
  const stream_q *q = &ss->q[PX_STREAM_COMPUTE];
  uint64_t ran = ss->computing ? now - from : 0;
  if (q->fast) {
    const seg_list *l = inst_costs(ss, q->inst);
    ran = fast_compute_ns(l, now - q->fast_t0) - fast_compute_ns(l, from - q->fast_t0);
  }
  ss->contention_sm_ns += (uint64_t)ss->comm_sms * ran;
}

/* A flow holding sms SMs of stage s's GPU starts (sms > 0) or ends (< 0). */
static void hold_sms(sim *S, int64_t s, int sms) {
  if (sms == 0) return;
  contention_tick(S, s);
  S->st[s].comm_sms += sms;
}

/* Starts a flow from a collective cost; src/dst are the stages whose link
 * resources it uses (equal for collectives, neighbours for p2p). x is the
 * peer stage for p2p. */
static void flow_start(sim *S, const px_coll_cost *cc, int64_t src, int64_t dst, int owner, int stream,
                       px_stream kind, int64_t x) {
  px_flow_spec f;
  flow_spec_of(S, cc, src, dst, &f);
  for (int i = 0; i < f.nres; i++) split_fast(S, f.res[i] / R_PER_STAGE, f.res[i] % R_PER_STAGE);
  int sms = held_sms(S, cc);
  hold_sms(S, src, sms);
  if (dst != src) hold_sms(S, dst, sms);
  if (px_net_start(S->net, &f, tag_of(owner, stream, kind, src, x, sms)) < 0) fail(S, px_net_status(S->net, S->err));
}

/* ---- instances ---- */

static void span_add(sim *S, int64_t stage, int stream, uint64_t start, uint64_t end, int32_t block, int32_t mb,
                     int32_t layer) {
  if (!S->opts->record_spans || S->opts->comm_free) return;
  if (S->nspans == S->cap_spans) {
    int64_t cap = S->cap_spans ? 2 * S->cap_spans : 4096;
    px_sim_span *nt = realloc(S->spans, (size_t)cap * sizeof *nt);
    if (!nt) {
      fail(S, px_err_set(S->err, PX_ERR_RUNTIME, "out of memory recording the trace"));
      return;
    }
    S->spans = nt;
    S->cap_spans = cap;
  }
  S->spans[S->nspans++] = (px_sim_span){(int32_t)stage, stream, start, end - start, block, mb, layer};
}

static void try_start(sim *S, int64_t s, int stream);

/* The compute stream of stage s waited gap ns for what `cause` says (wait_cause; a pipeline receive whose
 * transfer started at xfer_ns), up to now: the step's breakdown. */
static void account_wait(stage_state *ss, int cause, uint64_t xfer_ns, uint64_t gap, uint64_t now) {
  px_sim_breakdown *b = &ss->stats.parts;
  double g = (double)gap * 1e-9;
  if (cause < PX_SIM_COMM_COUNT) {
    b->exposed_s[cause] += g;
  } else if (cause == WAIT_PIPE) { /* the transfer (and the receive's own collectives), the rest the bubble */
    double x = now > xfer_ns ? (double)(now - xfer_ns) * 1e-9 : 0.0, pp = x < g ? x : g;
    b->exposed_s[PX_SIM_COMM_PP] += pp;
    b->bubble_s += g - pp;
  } else {
    b->bubble_s += g;
  }
}

/* A compute-stream instance of stage s ran from q->start_ns to now: its compute by phase, the compute
 * collectives' SMs took from it, and the rest, its waits for its collectives, by kind (as the block alone
 * waits, else as its collectives take). */
static void account_block(stage_state *ss, int32_t i, const stream_q *q, uint64_t now) {
  const seg_list *l = inst_costs(ss, i);
  px_sim_breakdown *b = &ss->stats.parts;
  double compute = 0, w[PX_SIM_COMM_COUNT], wsum = 0;
  for (int p = 0; p < PX_PHASE_COUNT; p++) compute += l->phase_s[p];
  b->forward_s += l->phase_s[PX_PHASE_FWD];
  b->backward_s += l->phase_s[PX_PHASE_BWD];
  b->recompute_s += l->phase_s[PX_PHASE_RECOMPUTE];
  b->optimizer_s += l->phase_s[PX_PHASE_OPT];
  b->launch_s += l->launch_s;
  double cont = ss->stats.contention_s - q->contention_start_s;
  b->contention_s += cont;
  double rest = (double)(now - q->start_ns) * 1e-9 - compute - cont - l->launch_s;
  for (int k = 0; k < PX_SIM_COMM_COUNT; k++) wsum += w[k] = l->alone_wait_s[k];
  for (int x = 0; wsum <= 0 && x < l->n; x++) /* overlapped alone, exposed here */
    if (l->v[x].comm) wsum += l->v[x].cc.time_s, w[l->v[x].kind] += l->v[x].cc.time_s;
  if (wsum > 0) {
    for (int k = 0; k < PX_SIM_COMM_COUNT; k++) b->exposed_s[k] += rest * w[k] / wsum;
  } else { /* no collective: the nanoseconds of rounding, to the block's own phase */
    *(l->own_phase == PX_PHASE_OPT ? &b->optimizer_s : l->own_phase == PX_PHASE_BWD ? &b->backward_s : &b->forward_s) += rest;
  }
}

/* Instance i ended now: its stats and trace, its dependents told; release
 * frees its stream for the next one (an instance that ran joined to the
 * stream's running one ends without it, before that one: a sync joined to
 * a flow, a backward merged with a forward, whose figures the pair's are). */
static void inst_end(sim *S, int64_t s, int32_t i, bool release) {
  stage_state *ss = &S->st[s];
  const px_inst *in = &ss->prog->insts[i];
  stream_q *q = &ss->q[in->stream];
  uint64_t now = S->eng.now_ns;
  bool merged = !release && in->stream == PX_STREAM_COMPUTE;
  const seg_list *l = in->block < PX_BLOCK_KIND_COUNT ? inst_costs(ss, i) : NULL;
  if (l && l->n > 0 && !merged)
    for (int k = 0; k < PX_OP_COUNT; k++) ss->stats.op_s[k] += l->op_s[k];
  if (px_block_is_compute((px_block_kind)in->block) && !merged) {
    ss->stats.busy_s += (double)(now - q->start_ns) * 1e-9;
    if (q->start_ns < ss->pipe_first_ns) ss->pipe_first_ns = q->start_ns;
    if (now > ss->pipe_last_ns) ss->pipe_last_ns = now;
  }
  if (in->stream == PX_STREAM_COMPUTE && release) {
    account_block(ss, i, q, now);
    ss->compute_free_ns = now;
  }
  if (now >= ss->end_ns) ss->end_cause = wait_cause((px_block_kind)in->block);
  if (now > ss->end_ns) ss->end_ns = now;
  span_add(S, s, in->stream, q->start_ns, now, in->block, in->mb, in->layer);
  ss->ndone++;
  if (release) {
    q->busy = false;
    q->inst = -1;
  }
  /* every dependent told first, then the streams started: syncs made ready together can join one flow */
  unsigned ready = release ? 1u << in->stream : 0;
  for (int32_t k = ss->rdep_off[i]; k < ss->rdep_off[i + 1]; k++) {
    int32_t d = ss->rdep[k];
    if (--ss->pending[d] == 0) {
      ready |= 1u << ss->prog->insts[d].stream;
      ss->cause[d] = (uint8_t)wait_cause((px_block_kind)in->block);
      ss->cause_ns[d] = ss->cause[d] == WAIT_PIPE ? ss->recv_xfer_ns : now;
    }
  }
  for (int st = 0; st < PX_STREAM_COUNT; st++)
    if (ready >> st & 1) try_start(S, s, st);
}

/* The running instance i of its stream is done (and the backward merged with it, first). */
static void inst_done(sim *S, int64_t s, int32_t i) {
  stream_q *q = &S->st[s].q[S->st[s].prog->insts[i].stream];
  if (q->partner >= 0) {
    int32_t j = q->partner;
    q->partner = -1;
    inst_end(S, s, j, false);
  }
  inst_end(S, s, i, true);
}

static void push_seg_done(sim *S, int64_t s, int stream, uint64_t at_ns) {
  stream_q *q = &S->st[s].q[stream];
  px_status st = px_engine_push(&S->eng, at_ns, EV_SEG_DONE, (uint32_t)s, (uint64_t)stream | (uint64_t)q->version << 8,
                                S->err);
  if (st) fail(S, st);
}

/* Stats and trace of a fast block that began at t0, up to where its
 * timeline is at upto_ns: the compute segments before nseg (compute time
 * counts for forward/backward blocks only, as in slow mode) and the flows
 * ended by then. */
static void fast_account(sim *S, int64_t s, const seg_list *l, uint64_t t0, int nseg, uint64_t upto_ns, bool pipe) {
  stage_state *ss = &S->st[s];
  for (int k = 0; k < l->n; k++) {
    const seg *g = &l->v[k];
    if (g->comm && l->flow_t1[k] <= upto_ns) {
      ss->stats.tp_s += (double)(l->flow_t1[k] - l->flow_t0[k]) * 1e-9;
      span_add(S, s, PX_STREAM_TP, t0 + l->flow_t0[k], t0 + l->flow_t1[k], -1, -1, -1);
    } else if (!g->comm && !g->launch && pipe && k < nseg) {
      ss->stats.compute_s += g->dur_s;
    }
  }
}

/* Nothing else of stage s uses the links in mask: no flow claims them and no
 * other block runs fast on them. */
static bool links_free(sim *S, int64_t s, uint8_t mask) {
  for (int r = 0; r < R_PER_STAGE; r++)
    if ((mask >> r & 1) && px_net_claims(S->net, (int32_t)(s * R_PER_STAGE + r)) > 0) return false;
  const stage_state *ss = &S->st[s];
  for (int k = 0; k < PX_STREAM_COUNT; k++)
    if (ss->q[k].fast && (inst_costs(ss, ss->q[k].inst)->res_mask & mask)) return false;
  return true;
}

/* A block's segments are done. On the compute stream it first runs on for
 * the compute the collectives beside it displaced: their SM x ns over the
 * SMs left to it now (the work at the rate it gets now, read once). */
static void block_end(sim *S, int64_t s, int stream) {
  stage_state *ss = &S->st[s];
  stream_q *q = &ss->q[stream];
  if (stream == PX_STREAM_COMPUTE && ss->contention_sm_ns > 0) {
    int64_t left = S->plan->cluster.gpu.sm_count - ss->comm_sms;
    uint64_t t = ss->contention_sm_ns / (uint64_t)(left > 1 ? left : 1);
    ss->contention_sm_ns = 0;
    if (t > 0) {
      ss->stats.contention_s += (double)t * 1e-9;
      q->paying = true;
      push_seg_done(S, s, stream, S->eng.now_ns + t);
      return;
    }
  }
  inst_done(S, s, q->inst);
}

/* Runs the next segment of the compute block on a stream, or finishes it. */
static void run_segment(sim *S, int64_t s, int stream) {
  stage_state *ss = &S->st[s];
  stream_q *q = &ss->q[stream];
  const px_inst *in = &ss->prog->insts[q->inst];
  const seg_list *l = inst_costs(ss, q->inst);
  bool pipe = px_block_is_compute((px_block_kind)in->block), main = stream == PX_STREAM_COMPUTE;
  if (main) { /* whatever ran on the compute stream has ended */
    contention_tick(S, s);
    ss->computing = false;
  }
  if (q->paying) {
    q->paying = false;
    inst_done(S, s, q->inst);
    return;
  }
  if (q->fast) { /* the whole block finished uncontended */
    q->fast = false;
    fast_account(S, s, l, q->fast_t0, l->n, l->fast_ns, pipe);
    if (main) ss->contention_sm_ns += l->fast_own_sm_ns;
    block_end(S, s, stream);
    return;
  }
  if (q->c.seg == 0 && l->fast_ok && links_free(S, s, l->res_mask)) {
    q->fast = true;
    q->fast_t0 = S->eng.now_ns;
    push_seg_done(S, s, stream, S->eng.now_ns + l->fast_ns);
    return;
  }
  for (;;) {
    const seg *g = NULL;
    int step = cursor_step(l, &q->c, &g);
    if (step == STEP_COMPUTE) {
      ss->stats.compute_s += pipe && !g->launch ? g->dur_s : 0;
      ss->computing = main && !g->launch;
      push_seg_done(S, s, stream, S->eng.now_ns + px_ns(g->dur_s));
    } else if (step == STEP_ASYNC) {
      flow_start(S, &g->cc, s, s, OWN_ASYNC, stream, PX_STREAM_TP, async_tag(g));
      continue;
    } else if (step == STEP_SYNC) {
      flow_start(S, &g->cc, s, s, OWN_SEGMENT, stream, PX_STREAM_TP, 0);
    } else if (step == STEP_END) {
      block_end(S, s, stream);
    }
    return;
  }
}

/* Another flow needs resource `res` of stage s: a block running as one
 * event there goes back to segments in the state its timeline has now
 * (the running compute segment's end, its open flows as they stand). */
static void split_fast(sim *S, int64_t s, int res) {
  stage_state *ss = &S->st[s];
  for (int stream = 0; stream < PX_STREAM_COUNT; stream++) {
    stream_q *q = &ss->q[stream];
    if (!q->fast) continue;
    const px_inst *in = &ss->prog->insts[q->inst];
    const seg_list *l = inst_costs(ss, q->inst);
    uint64_t t0 = q->fast_t0, elapsed = S->eng.now_ns - t0;
    if (!(l->res_mask >> res & 1) || elapsed >= l->fast_ns) continue; /* ending now: its flows are done */
    const fast_point *pt = timeline_at(l, elapsed);
    bool main = stream == PX_STREAM_COMPUTE;
    if (main) { /* the timeline's SM-time up to now, then the segments' */
      contention_tick(S, s);
      ss->contention_sm_ns += fast_own_sm_ns(l, elapsed);
      ss->computing = point_computing(l, pt);
    }
    fast_account(S, s, l, t0, pt->c.seg, pt->t_ns, px_block_is_compute((px_block_kind)in->block));
    q->fast = false;
    q->version++;
    q->c = pt->c;
    if (point_running(l, pt)) push_seg_done(S, s, stream, t0 + pt->seg_end_ns);
    for (int32_t k = pt->open0; k < pt->open0 + pt->nopen; k++) {
      const seg *g = &l->v[l->open[k].seg];
      px_flow_spec f;
      flow_spec_of(S, &g->cc, s, s, &f);
      int sms = held_sms(S, &g->cc);
      uint64_t tag = g->async ? tag_of(OWN_ASYNC, stream, PX_STREAM_TP, s, async_tag(g), sms)
                              : tag_of(OWN_SEGMENT, stream, PX_STREAM_TP, s, 0, sms);
      hold_sms(S, s, sms);
      if (px_net_resume(S->net, &f, tag, &l->open[k].st, t0) < 0) fail(S, px_net_status(S->net, S->err));
    }
  }
}

static bool is_send(px_block_kind k) { return k == PX_BLOCK_SEND_FWD || k == PX_BLOCK_SEND_BWD; }
static bool is_recv(px_block_kind k) { return k == PX_BLOCK_RECV_FWD || k == PX_BLOCK_RECV_BWD; }

static void try_start(sim *S, int64_t s, int stream) {
  stage_state *ss = &S->st[s];
  stream_q *q = &ss->q[stream];
  if (q->busy || q->next >= q->n) return;
  int32_t i = q->list[q->next];
  if (ss->pending[i] > 0) return;
  /* a merged forward starts with its backward (the next on the compute stream) ready too */
  int32_t partner = ss->pair_of[i] >= 0 && q->next + 1 < q->n ? q->list[q->next + 1] : -1;
  if (partner >= 0 && ss->pending[partner] > 0) return;
  q->next += partner >= 0 ? 2 : 1;
  q->partner = partner;
  q->busy = true;
  q->inst = i;
  q->c = (cursor){.waiting = -1};
  q->start_ns = S->eng.now_ns;
  if (stream == PX_STREAM_COMPUTE) { /* the compute stream waited since it was last free, for what made i ready */
    if (q->start_ns > ss->compute_free_ns)
      account_wait(ss, ss->cause[i], ss->cause_ns[i], q->start_ns - ss->compute_free_ns, q->start_ns);
    q->contention_start_s = ss->stats.contention_s;
  }
  const px_inst *in = &ss->prog->insts[i];
  px_block_kind k = (px_block_kind)in->block;
  if (k == PX_BLOCK_GRAD_SYNC || k == PX_BLOCK_PARAM_SYNC || k == PX_BLOCK_EMB_SYNC) {
    /* one flow per op, in order (q->c.seg: the op running): a hybrid reduction's
     * shard-group reduce-scatter, then its replica all-reduce. The buckets of
     * a layer, issued together after its backward block, run back to back:
     * the one-op reductions queued behind this one with the same dependencies
     * join its flow (bytes and latencies add up) and end with it. */
    px_coll_cost cc = ss->op_cost[in->ops];
    q->joined = 0;
    while (k == PX_BLOCK_GRAD_SYNC && S->plan->blocks[k].nops == 1 && q->next < q->n) {
      int32_t j = q->list[q->next];
      const px_inst *nj = &ss->prog->insts[j];
      if (nj->block != k || ss->pending[j] > 0 || nj->ndeps != in->ndeps ||
          memcmp(&ss->prog->deps[nj->dep_start], &ss->prog->deps[in->dep_start], (size_t)in->ndeps * sizeof(int32_t)))
        break;
      const px_coll_cost *o = &ss->op_cost[nj->ops];
      cc.latency_s += o->latency_s;
      cc.time_s += o->time_s;
      for (int l = 0; l < PX_LINK_COUNT; l++) cc.bytes[l] += o->bytes[l];
      q->next++;
      q->joined++;
    }
    flow_start(S, &cc, s, s, OWN_INST, stream, PX_STREAM_DP, 0);
    return;
  }
  if (in->stream == PX_STREAM_HOST) { /* a copy on the host link: run_segment ends it */
    uint64_t t = ss->host_ns[in->ops];
    ss->stats.host_s += (double)t * 1e-9;
    ss->stats.op_s[ss->prog->ops[in->ops].kind] += (double)t * 1e-9;
    push_seg_done(S, s, stream, S->eng.now_ns + t);
    return;
  }
  if (is_send(k) || is_recv(k)) {
    ss->posted[i] = 1;
    int64_t peer = k == PX_BLOCK_SEND_FWD || k == PX_BLOCK_RECV_BWD ? (s + 1) % S->pp : (s - 1 + S->pp) % S->pp;
    if (!S->st[peer].posted[in->peer]) return; /* the transfer starts when both sides are posted */
    int64_t src = is_send(k) ? s : peer, dst = is_send(k) ? peer : s;
    const px_coll_cost *cc = (src + 1) % S->pp == dst ? &S->st[src].p2p_next : &S->st[src].p2p_prev;
    flow_start(S, cc, src, dst, OWN_P2P, PX_STREAM_PP_SEND, PX_STREAM_PP_SEND, dst);
    return;
  }
  run_segment(S, s, stream);
}

/* A flow ended: account for it and tell its owner. */
static void flow_done(sim *S, uint64_t tag, uint64_t start_ns) {
  int owner = (int)(tag & 3), stream = (int)(tag >> 2 & 7), sms = (int)(tag >> 56);
  px_stream kind = (px_stream)(tag >> 5 & 7);
  int64_t s = (int64_t)(tag >> 8 & 0xffffff), x = (int64_t)(tag >> 32 & 0xffffff);
  uint64_t now = S->eng.now_ns;
  hold_sms(S, s, -sms);
  if (owner == OWN_P2P && x != s) hold_sms(S, x, -sms);
  double dur = (double)(now - start_ns) * 1e-9;
  stage_state *ss = &S->st[s];
  switch (kind) {
    case PX_STREAM_TP: ss->stats.tp_s += dur; break;
    case PX_STREAM_DP: ss->stats.dp_s += dur; break;
    default:
      ss->stats.pp_s += dur;
      S->st[x].stats.pp_s += dur;
      break;
  }
  if (kind == PX_STREAM_TP) span_add(S, s, PX_STREAM_TP, start_ns, now, -1, -1, -1);
  stream_q *q = &ss->q[stream];
  switch (owner) {
    case OWN_SEGMENT: run_segment(S, s, stream); break;
    case OWN_ASYNC:
      switch (cursor_async_done(inst_costs(ss, q->inst), &q->c, x)) {
        case STEP_SYNC: run_segment(S, s, stream); break;
        case STEP_END: block_end(S, s, stream); break;
        default: break;
      }
      break;
    case OWN_INST: {
      const px_inst *in = &ss->prog->insts[q->inst];
      if (++q->c.seg < S->plan->blocks[in->block].nops) {
        flow_start(S, &ss->op_cost[in->ops + q->c.seg], s, s, OWN_INST, stream, PX_STREAM_DP, 0);
        break;
      }
      for (int32_t k = q->next - q->joined; k < q->next; k++) inst_end(S, s, q->list[k], false);
      inst_done(S, s, q->inst);
      break;
    }
    case OWN_P2P:
      inst_done(S, s, q->inst);
      S->st[x].recv_xfer_ns = start_ns;
      run_segment(S, x, PX_STREAM_PP_RECV); /* the receive's all-gather, if any */
      break;
  }
}

/* ---- setup, run, results ---- */

static px_status stage_init(sim *S, int64_t s) {
  stage_state *ss = &S->st[s];
  const px_program *prog = &S->plan->programs[s];
  ss->prog = prog;
  ss->pipe_first_ns = UINT64_MAX;
  int32_t n = prog->ninsts;
  ss->pending = px_calloc((size_t)n, sizeof *ss->pending, S->err);
  ss->rdep_off = px_calloc((size_t)n + 1, sizeof *ss->rdep_off, S->err);
  ss->rdep = px_calloc((size_t)prog->ndeps + 1, sizeof *ss->rdep, S->err);
  ss->posted = px_calloc((size_t)n, 1, S->err);
  ss->cause = px_calloc((size_t)n + 1, 1, S->err);
  ss->cause_ns = px_calloc((size_t)n + 1, sizeof *ss->cause_ns, S->err);
  ss->pair_of = px_calloc((size_t)n + 1, sizeof *ss->pair_of, S->err);
  if (!ss->pending || !ss->rdep_off || !ss->rdep || !ss->posted || !ss->cause || !ss->cause_ns || !ss->pair_of)
    return PX_ERR_RUNTIME;
  memset(ss->cause, WAIT_IDLE, (size_t)n + 1);
  ss->end_cause = WAIT_IDLE;
  int32_t counts[PX_STREAM_COUNT] = {0};
  /* Dependencies: the program's, and in serial mode also every instance of
   * the previous group (a p2p batch is one group, everything else alone). */
  int32_t *first = px_calloc((size_t)n + 1, sizeof *first, S->err); /* first instance of i's group */
  if (!first) return PX_ERR_RUNTIME;
  for (int32_t i = 0; i < n; i++)
    first[i] = i > 0 && prog->insts[i].batch >= 0 && prog->insts[i].batch == prog->insts[i - 1].batch ? first[i - 1] : i;
  int32_t nextra = 0;
  for (int32_t i = 0; i < n; i++) {
    const px_inst *in = &prog->insts[i];
    counts[in->stream]++;
    ss->pending[i] = in->ndeps;
    for (int32_t d = 0; d < in->ndeps; d++) ss->rdep_off[prog->deps[in->dep_start + d] + 1]++;
    if (S->opts->serial && first[i] > 0)
      for (int32_t j = first[first[i] - 1]; j < first[i]; j++) ss->pending[i]++, ss->rdep_off[j + 1]++, nextra++;
  }
  if (nextra) {
    int32_t *nr = realloc(ss->rdep, (size_t)(prog->ndeps + nextra + 1) * sizeof *nr);
    if (!nr) {
      free(first);
      return px_err_set(S->err, PX_ERR_RUNTIME, "out of memory");
    }
    ss->rdep = nr;
  }
  for (int32_t i = 0; i < n; i++) ss->rdep_off[i + 1] += ss->rdep_off[i];
  int32_t *fill = px_calloc((size_t)n + 1, sizeof *fill, S->err);
  if (!fill) {
    free(first);
    return PX_ERR_RUNTIME;
  }
  for (int32_t i = 0; i < n; i++) {
    const px_inst *in = &prog->insts[i];
    for (int32_t d = 0; d < in->ndeps; d++) {
      int32_t on = prog->deps[in->dep_start + d];
      ss->rdep[ss->rdep_off[on] + fill[on]++] = i;
    }
    if (S->opts->serial && first[i] > 0)
      for (int32_t j = first[first[i] - 1]; j < first[i]; j++) ss->rdep[ss->rdep_off[j] + fill[j]++] = i;
  }
  free(fill);
  free(first);
  for (int k = 0; k < PX_STREAM_COUNT; k++) {
    ss->q[k].list = px_calloc((size_t)counts[k] + 1, sizeof *ss->q[k].list, S->err);
    if (!ss->q[k].list) return PX_ERR_RUNTIME;
    ss->q[k].inst = ss->q[k].partner = -1;
  }
  for (int32_t i = 0; i < n; i++) {
    stream_q *q = &ss->q[prog->insts[i].stream];
    q->list[q->n++] = i;
  }
  return stage_costs(S, s);
}

static void sim_free(sim *S) {
  for (int64_t s = 0; S->st && s < S->pp; s++) {
    stage_state *ss = &S->st[s];
    free(ss->pending);
    free(ss->rdep_off);
    free(ss->rdep);
    free(ss->posted);
    free(ss->cause);
    free(ss->cause_ns);
    free(ss->op_cost);
    free(ss->host_ns);
    for (int k = 0; k < PX_STREAM_COUNT; k++) free(ss->q[k].list);
    for (int k = 0; k < PX_BLOCK_KIND_COUNT + ss->npairs; k++) {
      seg_list *l = k < PX_BLOCK_KIND_COUNT ? &ss->costs[k] : &ss->pairs[k - PX_BLOCK_KIND_COUNT];
      free(l->v), free(l->pts), free(l->open), free(l->flow_t0), free(l->flow_t1);
    }
    free(ss->pairs);
    free(ss->pair_of);
  }
  free(S->st);
  px_net_free(S->net);
  px_net_free(S->tl_net);
  px_engine_deinit(&S->tl_eng);
  free(S->spans);
  px_engine_deinit(&S->eng);
}

/* One pass of the simulation. */
static px_status sim_once(const px_plan *plan, const px_sim_opts *opts, px_sim_result *out, px_err *err) {
  memset(out, 0, sizeof *out); /* a failure frees it */
  sim S;
  memset(&S, 0, sizeof S);
  S.plan = plan;
  S.opts = opts;
  S.pp = plan->par.pp;
  S.err = err;
  S.stretch = opts->no_straggler ? 1.0 : px_straggler_plan_stretch(plan);
  px_status st = px_engine_init(&S.eng, 1024, err);
  if (st) return st;
  S.st = px_calloc((size_t)S.pp, sizeof *S.st, err);
  S.net = px_net_new(&S.eng, (int32_t)(S.pp * R_PER_STAGE), EV_FLOW_JOIN, EV_FLOW_DONE, err);
  if (!st) st = px_engine_init(&S.tl_eng, 64, err);
  if (!st) S.tl_net = px_net_new(&S.tl_eng, R_PER_STAGE, EV_FLOW_JOIN, EV_FLOW_DONE, err);
  if (st || !S.st || !S.net || !S.tl_net) {
    sim_free(&S);
    return PX_ERR_RUNTIME;
  }
  for (int64_t s = 0; s < S.pp && !st; s++) st = stage_init(&S, s);
  for (int64_t s = 0; s < S.pp && !st; s++)
    for (int k = 0; k < PX_STREAM_COUNT; k++) try_start(&S, s, k);
  px_event ev;
  while (!st && !S.status && px_engine_pop(&S.eng, &ev)) {
    switch (ev.kind) {
      case EV_SEG_DONE:
        if ((uint32_t)(ev.b >> 8) == S.st[ev.a].q[ev.b & 0xff].version) run_segment(&S, ev.a, (int)(ev.b & 0xff));
        break;
      case EV_FLOW_JOIN: px_net_on_join(S.net, (int32_t)ev.a); break;
      case EV_FLOW_DONE: {
        uint64_t tag, start;
        if (px_net_on_done(S.net, (int32_t)ev.a, ev.b, &tag, &start)) flow_done(&S, tag, start);
        break;
      }
    }
  }
  if (!st) st = S.status;
  if (!st && S.net) st = px_net_status(S.net, err);
  for (int64_t s = 0; !st && s < S.pp; s++) {
    if (S.st[s].ndone != S.st[s].prog->ninsts) {
      const stage_state *ss = &S.st[s];
      char at[256] = "";
      for (int k = 0, n = 0; k < PX_STREAM_COUNT && n < (int)sizeof at; k++) { /* what heads each stuck stream */
        const stream_q *q = &ss->q[k];
        if (q->next >= q->n && !q->busy) continue;
        const px_inst *in = &ss->prog->insts[q->busy ? q->inst : q->list[q->next]];
        n += snprintf(at + n, sizeof at - (size_t)n, "%s%s: %s mb %d", n ? ", " : "", px_stream_names[k],
                      px_block_names[in->block], in->mb);
      }
      st = px_err_set(err, PX_ERR_RUNTIME, "simulation stalled: stage %lld finished %d of %d instances (waiting: %s)",
                      (long long)s, ss->ndone, ss->prog->ninsts, at);
    }
  }
  if (!st) {
    out->nstages = S.pp;
    out->stages = px_calloc((size_t)S.pp, sizeof *out->stages, err);
    if (!out->stages) st = PX_ERR_RUNTIME;
  }
  if (!st) {
    uint64_t end = 0, first = UINT64_MAX, last = 0;
    double busy = 0, compute = 0;
    for (int64_t s = 0; s < S.pp; s++) {
      stage_state *ss = &S.st[s];
      ss->stats.end_s = (double)ss->end_ns * 1e-9;
      if (ss->end_ns > ss->compute_free_ns) /* after the compute stream's last block: what ended last */
        account_wait(ss, ss->end_cause, ss->end_ns, ss->end_ns - ss->compute_free_ns, ss->end_ns);
      out->stages[s] = ss->stats;
      if (ss->end_ns > end) end = ss->end_ns;
      if (ss->pipe_first_ns < first) first = ss->pipe_first_ns;
      if (ss->pipe_last_ns > last) last = ss->pipe_last_ns;
      busy += ss->stats.busy_s;
      const px_sim_breakdown *b = &ss->stats.parts;
      compute += b->forward_s + b->backward_s + b->recompute_s + b->optimizer_s + b->contention_s;
      if (ss->stats.tp_s > out->comm_tp_s) out->comm_tp_s = ss->stats.tp_s;
      if (ss->stats.pp_s > out->comm_pp_s) out->comm_pp_s = ss->stats.pp_s;
      if (ss->stats.dp_s > out->comm_dp_s) out->comm_dp_s = ss->stats.dp_s;
      if (ss->stats.host_s > out->comm_host_s) out->comm_host_s = ss->stats.host_s;
      if (ss->stats.contention_s > out->comm_contention_s) out->comm_contention_s = ss->stats.contention_s;
    }
    out->step_time_s = (double)end * 1e-9;
    out->compute_share = end > 0 ? fmin(1.0, compute / ((double)S.pp * out->step_time_s)) : 0.0;
    for (int64_t s = S.pp - 1; s >= 0; s--) /* the first stage that ends last */
      if (S.st[s].end_ns == end) out->breakdown = S.st[s].stats.parts, out->breakdown_stage = s;
    double span = last > first ? (double)(last - first) * 1e-9 : 0.0;
    out->bubble_fraction = span > 0 ? 1.0 - busy / ((double)S.pp * span) : 0.0;
    if (out->bubble_fraction < 0) out->bubble_fraction = 0; /* rounding of nanosecond clocks */
    out->events = S.eng.processed;
    out->spans = S.spans, out->nspans = S.nspans;
    S.spans = NULL;
  }
  sim_free(&S);
  if (st) px_sim_result_free(out);
  return st;
}

px_status px_sim_exposed(const px_plan *plan, const px_sim_opts *opts, px_sim_result *out, px_err *err) {
  px_sim_opts free_opts = {0};
  if (opts) free_opts = *opts;
  free_opts.comm_free = true;
  px_sim_result twin;
  px_status st = sim_once(plan, &free_opts, &twin, err);
  if (st) return st;
  out->step_time_comm_free_s = twin.step_time_s;
  out->comm_exposed_s = out->step_time_s > twin.step_time_s ? out->step_time_s - twin.step_time_s : 0.0;
  out->events += twin.events;
  px_sim_result_free(&twin);
  return PX_OK;
}

px_status px_sim_run(const px_plan *plan, const px_sim_opts *opts, px_sim_result *out, px_err *err) {
  px_sim_opts defaults = {0};
  if (!opts) opts = &defaults;
  px_status st = sim_once(plan, opts, out, err);
  if (st) return st;
  if (!opts->comm_free && !opts->skip_exposed) {
    if ((st = px_sim_exposed(plan, opts, out, err))) {
      px_sim_result_free(out);
      return st;
    }
  } else if (opts->comm_free) {
    out->step_time_comm_free_s = out->step_time_s;
  }
  out->straggler_ranks = plan->grid.world;
  out->straggler_stretch = opts->no_straggler ? 1.0 : px_straggler_plan_stretch(plan);
  if (out->straggler_stretch > 1 && !opts->skip_exposed && !opts->skip_straggler) {
    px_sim_opts median = *opts;
    median.no_straggler = true;
    median.skip_exposed = true;
    median.record_spans = false;
    px_sim_result twin;
    if ((st = sim_once(plan, &median, &twin, err))) {
      px_sim_result_free(out);
      return st;
    }
    out->straggler_s = out->step_time_s > twin.step_time_s ? out->step_time_s - twin.step_time_s : 0.0;
    out->events += twin.events;
    px_sim_result_free(&twin);
  }
  out->fits = plan->fits;
  px_sim_rates(plan, out);
  return PX_OK;
}

void px_sim_rates(const px_plan *plan, px_sim_result *out) {
  double t = out->step_time_s;
  if (t > 0) out->tokens_per_s = px_sim_tokens_per_s(plan, t);
  px_sim_mfu m;
  px_sim_mfu_of(plan, t, &m);
  out->model_tflops_per_gpu = m.model_tflops_per_gpu;
  out->mfu = m.mfu, out->hfu = m.hfu, out->mfu_peak_dtype = m.peak_dtype;
  out->mfu_precision = m.mfu_precision, out->precision_peak_dtype = m.precision_dtype;
  px_power_of(&plan->cluster, out->compute_share, t, (double)plan->par.gbs * (double)plan->par.seq, &out->power);
}

void px_sim_mfu_of(const px_plan *plan, double step_s, px_sim_mfu *out) {
  const px_gpu *g = &plan->cluster.gpu;
  memset(out, 0, sizeof *out);
  px_dtype base = g->peak_flops[PX_DTYPE_BF16] > 0 ? PX_DTYPE_BF16
                  : g->peak_flops[PX_DTYPE_FP16] > 0 ? PX_DTYPE_FP16 : PX_DTYPE_FP32;
  /* the dtype the linear layers' GEMMs run in: fp8's for an fp8 or mxfp8 plan, fp4's for nvfp4 */
  px_dtype own = px_parallel_gemm_dtype(&plan->par);
  if (!(g->peak_flops[own] > 0)) own = base;
  out->peak_dtype = base, out->precision_dtype = own;
  double per_gpu = step_s > 0 ? 1.0 / step_s / (double)plan->cluster.gpus : 0.0;
  out->model_tflops_per_gpu = plan->model_flops_per_step * per_gpu / 1e12;
  if (!(g->peak_flops[base] > 0)) return; /* a cluster file refuses a GPU without an fp32 peak */
  out->mfu = plan->model_flops_per_step * per_gpu / g->peak_flops[base];
  out->hfu = plan->hw_flops_per_step * per_gpu / g->peak_flops[base];
  out->mfu_precision = plan->model_flops_per_step * per_gpu / g->peak_flops[own];
}

double px_sim_tokens_per_s(const px_plan *plan, double step_s) { return px_sim_tokens_per_s_of(&plan->par, step_s); }

double px_sim_tokens_per_s_of(const px_parallel *par, double step_s) { return (double)par->gbs * (double)par->seq / step_s; }

void px_sim_result_free(px_sim_result *r) {
  if (!r) return;
  free(r->stages);
  free(r->spans);
  r->stages = NULL;
  r->spans = NULL;
  r->nspans = 0;
}
