/* Plan search over the parallel dimensions, on threads. */
#include "sim/sweep.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fmt.h"
#include "plan/memory.h"
#include "plan/program.h"
#include "sim/bound.h"
#include "sim/sim.h"

/* A sweep ranks plans by step time: the straggler's share (a third simulation) is not reported. */
static const px_sim_opts sweep_sim_opts = {.skip_straggler = true};

PX_NAME_TABLE(px_objective_names, PX_OBJ_COUNT, "throughput", "time", "cost", "memory", "energy");

void px_sweep_opts_init(px_sweep_opts *o) {
  memset(o, 0, sizeof *o);
  px_parallel_unset(&o->fixed);
  o->objective = PX_OBJ_THROUGHPUT;
  o->mtbf_hours = PX_MTBF_HOURS_DEFAULT;
  o->restart_s = PX_RESTART_S_DEFAULT;
  o->parts = 1;
}

/* Seconds training stops for an asynchronous checkpoint: each GPU copies
 * its parameters and optimizer states (offloaded ones included; not fp8's
 * cached weight copies, remade every step) to a host snapshot buffer, all GPUs at once, over its host link (the cluster's
 * host_pcie_bytes_per_s shared by host_pcie_gpus_per_uplink GPUs); a
 * cluster file without a host link gets HBM bandwidth, a lower bound. The
 * largest stage's GPU sets the time. */
static double snapshot_s(const px_plan *plan, double *bytes_out) {
  const px_cluster *c = &plan->cluster;
  double bytes = 0;
  for (int64_t s = 0; s < plan->par.pp; s++) {
    px_states st;
    px_plan_states(plan, s, &st);
    double b = -(double)st.fp8_copy_bytes - (double)st.frozen_bytes; /* the trained parameters and optimizer
                                                                            states, wherever they are */
    for (int pl = 0; pl < PX_PLACE_COUNT; pl++)
      b += (double)st.bytes[pl][PX_MEM_PARAMS] + (double)st.bytes[pl][PX_MEM_OPTIMIZER];
    if (b > bytes) bytes = b;
  }
  double link = px_cluster_host_link_bytes_per_s(c), bw = link > 0 ? link : c->gpu.hbm_bytes_per_s;
  *bytes_out = bytes;
  return bw > 0 ? bytes / bw : 0.0;
}

/* Days, GPU-hours and cost of training `tokens` at tokens_per_s on `gpus` GPUs at t->goodput. */
static void train_wall(double gpus, double tokens_per_s, double tokens, double price, px_train_time *t) {
  if (tokens > 0 && tokens_per_s > 0) {
    double ideal_s = tokens / tokens_per_s;
    double wall_s = t->goodput > 0 ? ideal_s / t->goodput : INFINITY;
    t->days = wall_s / 86400.0;
    t->gpu_hours = wall_s / 3600.0 * gpus;
    t->cost_usd = t->gpu_hours * price;
  }
}

void px_train_time_of(const px_plan *plan, double tokens_per_s, double tokens, double price, double mtbf_hours,
                      double restart_s, bool ckpt_async, px_train_time *t) {
  memset(t, 0, sizeof *t);
  const px_cluster *c = &plan->cluster;
  double gpus = (double)c->gpus;
  /* A checkpoint holds the model states once: parameters and optimizer (fine-tuning: the adapters', the frozen
   * base already on storage). */
  t->checkpoint_bytes = (double)plan->trained_total *
                        ((double)px_dtype_bytes(plan->param_dtype) + (double)plan->optimizer_bytes_per_param);
  double write_bw = c->storage_bytes_per_s * (double)c->nodes;
  t->checkpoint_write_s = write_bw > 0 ? t->checkpoint_bytes / write_bw : 0.0;
  t->checkpoint_snapshot_s = snapshot_s(plan, &t->checkpoint_snapshot_bytes);
  /* What training stops for at each checkpoint (d), and how long after it
   * the checkpoint is durable (l): sync, the write for both; async, the
   * snapshot, the write going on behind (so checkpoints are no closer than
   * one write apart, the next one waiting for it, and a failure also loses
   * the work of the write's duration). */
  double d = ckpt_async ? t->checkpoint_snapshot_s : t->checkpoint_write_s;
  double l = ckpt_async ? t->checkpoint_write_s : 0.0;
  t->checkpoint_blocked_s = d;
  t->goodput = 1.0;
  if (mtbf_hours > 0) {
    double M = mtbf_hours * 3600.0 / gpus;
    t->cluster_mtbf_s = M;
    /* Daly's first-order optimum: tau = sqrt(2 d M) - d, for d < M / 2. */
    double tau = d < M / 2 ? sqrt(2.0 * d * M) - d : M;
    if (tau <= 0) tau = M; /* free checkpoints: every step, nothing lost */
    if (ckpt_async && tau < l) tau = l; /* one write in flight */
    t->checkpoint_interval_s = tau;
    double waste = (tau > 0 && d > 0 ? d / tau : 0.0) + (tau / 2.0 + l + restart_s) / M;
    if (d <= 0) waste = (l + restart_s) / M;
    t->goodput = waste < 1.0 ? 1.0 - waste : 0.0;
  }
  train_wall(gpus, tokens_per_s, tokens, price, t);
}

void px_sweep_train_of(const px_plan *plan, const px_sweep_opts *o, const px_sim_result *sim, px_train_time *t) {
  px_train_time_of(plan, sim->tokens_per_s, o->tokens, o->price_per_gpu_hour, o->mtbf_hours, o->restart_s,
                   o->ckpt_async, t);
  px_power_run(&sim->power, t->days * 86400.0, o->price_per_kwh, &t->energy_mwh, &t->energy_cost_usd);
}

/* ---- enumeration ---- */

typedef struct {
  px_parallel *v;
  int64_t n, cap;
} cand_list;

static bool cand_push(cand_list *l, const px_parallel *p) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 1024;
    px_parallel *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (!nv) return false;
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = *p;
  return true;
}

/* Whether opts.admit (when set) accepts a valid plan. */
static bool admitted(const px_sweep_opts *o, const px_parallel *p, const px_model *m) {
  return !o->admit || o->admit(p, m, o->admit_ctx);
}

/* Adds a candidate when its choices are valid and admitted (*added), else counts it invalid or excluded. */
static px_status cand_add(cand_list *l, const px_parallel *p, const px_model *m, const px_cluster *c,
                          const px_sweep_opts *o, px_sweep_result *r, bool *added, px_err *err) {
  *added = px_parallel_validate(p, m, c, NULL) == PX_OK;
  if (!*added) {
    if (r->invalid++ == 0) r->first_invalid = *p;
    return PX_OK;
  }
  if (!(*added = admitted(o, p, m))) {
    r->excluded++;
    return PX_OK;
  }
  return cand_push(l, p) ? PX_OK : px_err_set(err, PX_ERR_RUNTIME, "out of memory enumerating plans");
}

/* Values of one dimension: the fixed one, or the list. */
static int dim_values(int64_t fixed, bool is_fixed, const int64_t *all, int nall, int64_t *out) {
  if (is_fixed) {
    out[0] = fixed;
    return 1;
  }
  for (int i = 0; i < nall; i++) out[i] = all[i];
  return nall;
}

/* The least ZeRO stage swept with shard groups of one node. ZeRO-1's are
 * not: with gradients reduced once a step its inter-node traffic is the same
 * as full sharding's (an all-reduce of the shard against a reduce-scatter
 * and an all-gather), for more memory; ZeRO-2/3 save their per-micro-batch
 * reduce-scatters and ZeRO-3's gathers across nodes. (Sweeping ZeRO-1 and
 * every ZeRO-2/3 mode with it cost a third more sweep time, 256 GPUs.) */
#define HYBRID_MIN_ZERO 2

/* The shortest sequence for which a sweep tries context parallelism unless
 * told (--cp): below it each CP rank's attention block is too short to hide
 * its K/V transfers and DP splits the tokens with no exchange at all, so CP
 * only adds plans (a 512-GPU sweep at 8K tokens took 4x longer with it and
 * chose no CP plan). Long-context runs (Llama 3's 128K stage) need it. */
#define CP_SWEEP_MIN_SEQ 16384
/* The largest cp a sweep tries (Llama 3 405B's 128K stage used 16). */
#define CP_SWEEP_MAX 32

/* The first and last stage k layers short of the middle stages, whose
 * layers split evenly over their chunks (Megatron-Core's uneven pipeline):
 * sets p's first/last_stage_layers; false when not possible, not wanted
 * (the split is fixed, pp < 3, GPipe) or the same as the default split. */
static bool short_ends(const px_model *m, px_parallel *p, const px_parallel *f, int64_t k, int64_t *a, int64_t *b) {
  if (f->first_stage_layers > 0 || f->last_stage_layers > 0 || f->nchunk_layers > 0) return false;
  if (p->pp < 3 || p->schedule == PX_SCHED_GPIPE) return false;
  int64_t L = m->layers, pp = p->pp, v = p->vpp, mid = (L + pp - 1) / pp; /* a middle stage's layers */
  int64_t ends = mid - k;
  if (ends < v || L - 2 * ends <= 0 || (L - 2 * ends) % ((pp - 2) * v)) return false;
  px_parallel q = *p;
  q.first_stage_layers = q.last_stage_layers = 0;
  p->first_stage_layers = p->last_stage_layers = ends;
  if (px_parallel_chunk_layers(p, L, a, NULL) || px_parallel_chunk_layers(&q, L, b, NULL)) return false;
  for (int64_t i = 0; i < pp * v; i++)
    if (a[i] != b[i]) return true;
  return false;
}

static px_status enumerate(const px_model *m, const px_cluster *c, const px_sweep_opts *o, cand_list *out,
                           px_sweep_result *r, px_err *err) {
  const px_parallel *f = &o->fixed;
  int64_t gpus = c->gpus;
  int64_t max_tp = o->max_tp > 0 ? o->max_tp : px_cluster_nvlink_domain(c); /* TP stays on NVLink */
  int64_t tps[64], pps[64];
  int ntp = 0, npp;
  for (int64_t t = 1; t <= gpus && t <= max_tp && ntp < 64; t++)
    if (gpus % t == 0 && m->heads % t == 0 && m->kv_heads % t == 0 && m->ffn_hidden % t == 0) tps[ntp++] = t;
  if (f->tp > 0) tps[0] = f->tp, ntp = 1;
  /* recomputation: none, selective, full, full of half of each model chunk's layers (Megatron's block
   * method, RECOMPUTE_HALF): half the activations full recomputation drops, for half its extra FLOPs; and
   * with MLA or experts, when asked, selective of the modules that hold most of a MoE layer's activations
   * (RECOMPUTE_MODULES: MLA's up projections, the experts' activation; what DeepSeek-V3's recipes recompute:
   * never faster than none, it only makes plans fit; searched by default it cost DeepSeek-V3's sweep on
   * 1,024 H100s a third more candidates); and for torchtitan its selective AC, per op, and every 2nd layer in
   * place of the block method */
  enum { RECOMPUTE_HALF = PX_RECOMPUTE_COUNT, RECOMPUTE_MODULES };
  static const int64_t zeros[] = {0, 1, 2, 3}, sps[] = {0, 1};
  static const int64_t mbss[] = {1, 2, 4, 8};
  int64_t zv[4], spv[2], rv[6], mv[4];
  int heavy_modules = o->search_modules ? px_parallel_heavy_modules(m) : 0;
  int64_t recs[6] = {PX_RECOMPUTE_NONE, PX_RECOMPUTE_SELECTIVE, PX_RECOMPUTE_FULL, RECOMPUTE_HALF};
  int nrecs = 4;
  if (heavy_modules) recs[nrecs++] = RECOMPUTE_MODULES;
  if (o->torchtitan_ac) recs[nrecs++] = PX_RECOMPUTE_OP;
  int nz = dim_values(f->zero, f->zero >= 0, zeros, 4, zv);
  int nsp = dim_values(f->sp, f->sp >= 0, sps, 2, spv);
  /* recompute_layers alone fixes full recomputation (of those layers), recompute_modules selective */
  int64_t rfix = f->recompute >= 0 ? f->recompute : f->recompute_modules ? PX_RECOMPUTE_SELECTIVE : PX_RECOMPUTE_FULL;
  int nr = dim_values(rfix, f->recompute >= 0 || f->recompute_layers > 0 || f->recompute_modules, recs, nrecs, rv);
  int nm = dim_values(f->mbs, f->mbs > 0, mbss, 4, mv);
  /* context parallelism: powers of two (each with every algorithm unless fixed) for long sequences */
  int64_t seq = f->seq > 0 ? f->seq : m->seq_len, cps[8] = {1};
  int ncp = 1;
  for (int64_t k = 2; f->cp <= 0 && seq >= CP_SWEEP_MIN_SEQ && k <= CP_SWEEP_MAX && ncp < 8; k *= 2)
    if (seq % (2 * k) == 0) cps[ncp++] = k;
  if (f->cp > 0) cps[0] = f->cp, ncp = 1;
  /* precision: the default, and fp8 on a GPU with fp8 tensor cores, unless fixed */
  int precs[2] = {f->precision}, nprec = 1;
  if (f->precision < 0 && c->gpu.peak_flops[PX_DTYPE_FP8] > 0 && c->gpu.peak_flops[PX_DTYPE_BF16] > 0)
    precs[0] = PX_PREC_BF16, precs[1] = PX_PREC_FP8, nprec = 2;
  int64_t *split_a = px_calloc((size_t)m->layers * 8 + 8, sizeof *split_a, err); /* (pp vpp) scratch */
  int64_t *split_b = px_calloc((size_t)m->layers * 8 + 8, sizeof *split_b, err);
  px_status st = split_a && split_b ? PX_OK : PX_ERR_RUNTIME;
  for (int k = 0; k < ntp * ncp && !st; k++) {
    int64_t tp = tps[k / ncp], cp = cps[k % ncp];
    if (gpus % (tp * cp)) continue;
    npp = 0;
    for (int64_t q = 1; q <= gpus / (tp * cp) && q <= m->layers && npp < 64; q++)
      if ((gpus / (tp * cp)) % q == 0) pps[npp++] = q;
    if (f->pp > 0) pps[0] = f->pp, npp = 1;
    for (int ip = 0; ip < npp; ip++) {
      int64_t pp = pps[ip];
      if (gpus % (tp * cp * pp)) continue;
      int64_t dp = gpus / (tp * cp * pp);
      if (f->dp > 0 && f->dp != dp) continue;
      int na = cp > 1 && f->cp_algo < 0 ? PX_CP_ALGO_COUNT : 1; /* CP's algorithms */
      /* expert parallelism (mixture-of-experts models): etp = tp (Megatron-Core's default) and, with TP, etp 1
       * (whole experts, EP folded over the TP ranks too); with each, every ep dividing the experts and the
       * tp x dp x cp / etp ranks it folds over (px_parallel_check's rule) */
      int64_t eps[64][2] = {{f->ep > 0 ? f->ep : 1, f->etp > 0 ? f->etp : tp}};
      int nep = 1;
      for (int t = 0; m->experts > 0 && f->ep <= 0 && t < (tp > 1 ? 2 : 1); t++) {
        int64_t etp = t ? 1 : tp;
        if (f->etp > 0 && f->etp != etp) continue;
        for (int64_t e = t ? 1 : 2; e <= m->experts && nep < 64; e++)
          if (m->experts % e == 0 && (tp * dp * cp) % (etp * e) == 0) eps[nep][0] = e, eps[nep++][1] = etp;
      }
      for (int iza = 0; iza < nz * na * nep * nprec; iza++)
        for (int is = 0, iz = iza % nz, ia = iza / nz % na, ie = iza / (nz * na) % nep, ipr = iza / (nz * na * nep);
             is < nsp; is++)
          for (int im = 0; im < nm; im++)
            for (int ir = 0; ir < nr; ir++) {
              /* schedules: one for pp 1; 1f1b, interleaved with every vpp and the two zero-bubble
               * ones otherwise (GPipe only when asked for: 1F1B's bubble for more memory) */
              int64_t scheds[16][2];
              int nsched = 0;
              if (pp == 1) {
                scheds[nsched][0] = PX_SCHED_1F1B, scheds[nsched++][1] = 1;
              } else {
                if (f->schedule == PX_SCHED_GPIPE) scheds[nsched][0] = PX_SCHED_GPIPE, scheds[nsched++][1] = 1;
                scheds[nsched][0] = PX_SCHED_1F1B, scheds[nsched++][1] = 1;
                scheds[nsched][0] = PX_SCHED_ZB_H1, scheds[nsched++][1] = 1;
                scheds[nsched][0] = PX_SCHED_ZB_H2, scheds[nsched++][1] = 1;
                /* every vpp whose chunks hold a layer each, evenly or not (px_parallel_chunk_layers) */
                for (int64_t v = 2; v <= 8 && nsched < 16; v++)
                  if (pp * v <= m->layers) scheds[nsched][0] = PX_SCHED_INTERLEAVED, scheds[nsched++][1] = v;
              }
              for (int ic = 0; ic < nsched * 2; ic++) {
                /* each schedule with the default layer split, then (unless the split is fixed) the
                 * first and last stage a layer short of the middle ones (two short: ask for it with
                 * --first-stage-layers / --last-stage-layers; searched, it cost a fifth more plans) */
                int64_t k_short = ic % 2;
                if (f->schedule >= 0 && f->schedule != scheds[ic / 2][0]) continue;
                if (f->vpp > 0 && f->vpp != scheds[ic / 2][1]) continue;
                px_parallel p = *f;
                p.tp = tp, p.pp = pp, p.dp = dp, p.zero = (int)zv[iz], p.sp = (int)spv[is], p.mbs = mv[im];
                p.cp = cp, p.cp_algo = f->cp_algo >= 0 ? f->cp_algo : ia, p.ep = eps[ie][0], p.etp = eps[ie][1];
                p.precision = precs[ipr];
                p.recompute = (int)rv[ir], p.schedule = (int)scheds[ic / 2][0], p.vpp = scheds[ic / 2][1];
                /* torchtitan's per-op recomputation goes with its float8, current scaling (delayed is refused) */
                if (p.recompute == PX_RECOMPUTE_OP && p.precision == PX_PREC_FP8 && f->fp8_recipe < 0)
                  p.fp8_recipe = PX_FP8_CURRENT;
                if (rv[ir] == RECOMPUTE_HALF) { /* half of the layers of a chunk of the even split, if it has two */
                  int64_t half = m->layers / (p.pp * p.vpp) / 2;
                  if (half < 1) continue;
                  p.recompute = PX_RECOMPUTE_FULL, p.recompute_method = PX_RECOMPUTE_BLOCK, p.recompute_layers = half;
                  if (o->torchtitan_ac) p.recompute_method = PX_RECOMPUTE_EVERY, p.recompute_layers = 2;
                }
                if (rv[ir] == RECOMPUTE_MODULES)
                  p.recompute = PX_RECOMPUTE_SELECTIVE, p.recompute_modules = heavy_modules;
                if (k_short && !short_ends(m, &p, f, k_short, split_a, split_b)) continue;
                px_parallel_resolve(&p, m, c);
                /* fused attention keeps nothing selective recomputation of core_attn alone would drop: none's plan */
                if (px_parallel_recompute_modules(&p) == PX_RCM_CORE_ATTN && px_attention_fused(p.attention) &&
                    f->recompute < 0)
                  continue;
                /* ZeRO-3's modes: full accumulation (when there is more than one micro-batch)
                 * or keeping gathered parameters, one at a time. Not swept, as never better in
                 * both time and memory: ZeRO-2 with full accumulation (ZeRO-1's traffic, more
                 * memory) and ZeRO-3 with both (ZeRO-1's memory, a gather per micro-batch). */
                for (int acc = 0; acc < PX_ACCUM_COUNT; acc++)
                  for (int rs = 1; rs >= 0; rs--) {
                    px_parallel q = p;
                    if (f->grad_accum < 0) {
                      if (acc == PX_ACCUM_FULL && (q.zero < 3 || q.gbs <= q.mbs * q.dp || (!rs && f->reshard < 0)))
                        continue;
                      q.grad_accum = q.zero >= 2 ? acc : PX_ACCUM_FULL;
                    } else if (acc) {
                      continue;
                    }
                    if (f->reshard < 0) {
                      if (!rs && q.zero != 3) continue;
                      q.reshard = rs;
                    } else if (!rs) {
                      continue;
                    }
                    px_parallel_resolve(&q, m, c);
                    /* EP overlap asked for (`overlap` ep) runs wherever it applies (the plan rule's say):
                     * the plans it does not apply to are swept without it, not refused */
                    if ((q.overlap & PX_OVERLAP_EP) && px_parallel_validate(&q, m, c, NULL) != PX_OK) {
                      px_parallel nov = q;
                      nov.overlap &= ~PX_OVERLAP_EP;
                      if (px_parallel_validate(&nov, m, c, NULL) == PX_OK) q = nov;
                    }
                    bool added;
                    if ((st = cand_add(out, &q, m, c, o, r, &added, err))) goto out;
                    if (!added) continue;
                    /* and sharded within a node, replicated across nodes (hybrid sharding) */
                    int64_t node = tp <= c->gpus_per_node && c->gpus_per_node % tp == 0 ? c->gpus_per_node / tp : 0;
                    if (f->shard_group > 0 || q.zero < HYBRID_MIN_ZERO || node < 2 || node >= dp * cp || (dp * cp) % node)
                      continue;
                    /* in ZeRO-2/3's default modes only, unless fixed: full accumulation already
                     * reduces once a step, and kept parameters already gather once */
                    if ((f->grad_accum < 0 && q.grad_accum != PX_ACCUM_SHARDED) || (f->reshard < 0 && !q.reshard))
                      continue;
                    q.shard_group = node;
                    if ((st = cand_add(out, &q, m, c, o, r, &added, err))) goto out;
                  }
              }
            }
    }
  }
out:
  free(split_a);
  free(split_b);
  return st;
}

/* ---- evaluation ---- */

/* A candidate's state. Without opts.keep each is compiled (offload chosen)
 * and, when it fits, simulated: CAND_FITS or CAND_NOFIT. With it, each first
 * gets its bounds before any compile (sim/bound.h): CAND_NOFIT when its
 * memory floor cannot fit, else CAND_FLOORED with the least score it can
 * reach (floor[i]); those are then compiled least floor first while their
 * floor can make the best keep, each ending CAND_NOFIT, CAND_FITS
 * (simulated) or CAND_PRUNED (it fits, and its compiled plan's bound,
 * px_sim_step_bound_s, keeps it out); the rest end CAND_UNSIZED (pruned
 * without a compile: whether they fit is not known). CAND_OTHER: another
 * part's (opts.parts). */
enum { CAND_PENDING, CAND_FITS, CAND_NOFIT, CAND_FAILED, CAND_FLOORED, CAND_PRUNED, CAND_UNSIZED, CAND_OTHER };

/* What the threads do with each index of their todo list. */
typedef enum {
  JOB_EVALUATE,  /* a candidate: compile, and simulate it if it fits */
  JOB_TEMPLATES, /* a bound cache key: its templates */
  JOB_FLOOR,     /* a candidate: its bounds */
  JOB_TRY,       /* a floored candidate: compile, bound, and simulate it if it can make the best keep */
  JOB_SIMULATE,  /* a candidate that fits (compiled, offload chosen): simulate it */
} job;

typedef struct {
  const px_model *m;
  const px_cluster *c;
  const px_sweep_opts *o;
  const cand_list *cands;
  px_sweep_entry *entries; /* one per candidate */
  uint8_t *state;
  px_bound_cache *bounds;  /* opts.keep: the templates the candidates' bounds read ... */
  int64_t *key;            /* (cands) ... each one's key */
  double *floor;           /* (cands) the least score each can reach */
  double threshold;        /* JOB_TRY: a score a candidate must reach (the keep-th best so far) */
  const int64_t *todo;     /* what the threads take in turn */
  int64_t ntodo;
  job job;
  atomic_llong next;
  int64_t total;           /* candidates of this part */
  job counted;             /* the pass opts.progress counts: the one that takes every candidate (of this part) */
  int64_t done, simulated, best; /* for opts.progress (under lock): counted, simulated, the best (-1 none) */
  px_err first_err;
  pthread_mutex_t lock;
} work;

/* The most offload a sweep may give p: the optimizer's states in host
 * memory, with ZeRO-3 the parameters too (where NVMe puts them is no
 * different to the GPU). */
static void offload_most(px_parallel *p) {
  p->offload_opt = PX_OFFLOAD_CPU;
  p->offload_params = p->zero == 3 ? PX_OFFLOAD_CPU : PX_OFFLOAD_NONE;
}

/* Whether the sweep tries p with offload when it does not fit (more_offload). */
static bool offload_swept(const px_parallel *p, const px_parallel *fixed) {
  return fixed->offload_opt < 0 && fixed->offload_params < 0 && p->zero >= 2;
}

/* The next offload, from least to most (optimizer to host memory, the
 * parameters too, then NVMe), that the plan, the cluster and opts.admit
 * allow; false when there is none or the sweep was told which. */
static bool more_offload(px_parallel *p, const px_model *m, const px_cluster *c, const px_sweep_opts *o) {
  static const int steps[][2] = {{PX_OFFLOAD_CPU, PX_OFFLOAD_NONE}, {PX_OFFLOAD_CPU, PX_OFFLOAD_CPU},
                                 {PX_OFFLOAD_NVME, PX_OFFLOAD_CPU}, {PX_OFFLOAD_NVME, PX_OFFLOAD_NVME}};
  if (!offload_swept(p, &o->fixed)) return false;
  for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
    if (steps[k][0] < p->offload_opt || (steps[k][0] == p->offload_opt && steps[k][1] <= p->offload_params)) continue;
    px_parallel q = *p;
    q.offload_opt = steps[k][0], q.offload_params = steps[k][1];
    if (px_parallel_validate(&q, m, c, NULL) || !admitted(o, &q, m)) continue;
    *p = q;
    return true;
  }
  return false;
}

/* Whether the sweep offloads p's activations when it does not fit (fit_entry): the user left
 * offload_activations unset and p with one layer's offloaded is valid (px_parallel_validate's rules:
 * pp 1, 1F1B, no recomputation or CUDA graphs, a host link). */
static bool act_offload_swept(const px_parallel *p, const px_parallel *fixed, const px_model *m, const px_cluster *c) {
  if (fixed->offload_act_layers >= 0) return false;
  px_parallel q = *p;
  q.offload_act_layers = 1;
  return px_parallel_validate(&q, m, c, NULL) == PX_OK;
}

/* The fewest offloaded layers whose kept activations, first layer first, cover what plan's peak is over the
 * GPU (the end of a forward holds them all: offloading N layers takes N sets off the peak), or 0 when even
 * layers - 2 do not. */
static int64_t act_offload_layers(const px_plan *plan) {
  uint64_t usable = px_gpu_usable_bytes(&plan->cluster.gpu), peak = plan->mem[0].peak_bytes, lo = 0, hi = peak;
  while (lo < hi) { /* the largest peak px_plan_reserve_bytes lets fit */
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (px_plan_reserve_bytes(mid) <= usable) lo = mid;
    else hi = mid - 1;
  }
  uint64_t over = peak - lo;
  int64_t L = plan->model.layers, n = 0;
  uint64_t *set = calloc((size_t)L + 1, sizeof *set), freed = 0; /* (L) each layer's kept bytes */
  px_err err = {0};
  if (!set || px_plan_first_layers_kept(plan, L, set, &err)) {
    free(set);
    return 0;
  }
  for (; n < L - 2 && freed < over; n++) freed += set[n];
  free(set);
  return freed >= over ? n : 0;
}

/* Whether some offload could make a stage fit: its peak with the GPU's
 * states as the most offload its ZeRO stage allows leaves them
 * (px_plan_states_for) must fit. */
static bool stage_offload_may_fit(const px_plan *plan, int64_t s) {
  px_parallel most = plan->par;
  offload_most(&most);
  px_states st;
  px_plan_states_for(plan, &most, s, &st);
  const px_memplan *mp = &plan->mem[s];
  uint64_t left = mp->peak_bytes - mp->static_bytes + px_states_bytes(&st, PX_PLACE_GPU);
  return px_plan_reserve_bytes(left) <= px_gpu_usable_bytes(&plan->cluster.gpu);
}

/* ... and the plan: every stage. */
static bool offload_may_fit(const px_plan *plan) {
  for (int64_t s = 0; s < plan->par.pp; s++)
    if (!stage_offload_may_fit(plan, s)) return false;
  return true;
}

/* A pruned sweep's compile stops at a stage that does not fit when evaluate
 * would then drop the plan whatever the other stages hold: no offload could
 * make this stage fit, or none is left to try (px_plan_stop_fn; ctx: the
 * sweep's options). */
static bool stop_unfit(const px_plan *plan, int64_t s, void *opts) {
  px_parallel next = plan->par;
  return !stage_offload_may_fit(plan, s) || !more_offload(&next, &plan->model, &plan->cluster, opts);
}

/* Keeps the first error the threads meet. */
static void note_err(work *w, const px_err *err) {
  pthread_mutex_lock(&w->lock);
  if (!w->first_err.msg[0]) w->first_err = *err;
  pthread_mutex_unlock(&w->lock);
}

static void failed(work *w, int64_t i, const px_err *err) {
  w->state[i] = CAND_FAILED;
  note_err(w, err);
}

static double score_of(const px_sweep_entry *e, px_objective obj);

/* A compiled plan's peak memory into e: its largest stage's (of those compiled). */
static void entry_peak(const px_plan *plan, px_sweep_entry *e) {
  int64_t worst = px_plan_peak_stage(plan);
  e->peak_bytes = plan->mem[worst].peak_bytes;
  memcpy(e->at_peak, plan->mem[worst].at_peak, sizeof e->at_peak);
  e->peak_partial = plan->stages_done < plan->par.pp;
}

/* Simulates a compiled plan that fits into e: what `parallax sim` says of
 * it, and its time to train; with exposed false, not the comm-free twin
 * (comm_exposed_s, which ranks nothing: px_sim_exposed adds it later). */
static px_status simulate_plan(const px_plan *plan, const px_sweep_opts *o, bool exposed, px_sweep_entry *e,
                               px_err *err) {
  px_sim_result r;
  px_sim_opts so = sweep_sim_opts;
  so.skip_exposed = !exposed;
  px_status st = px_sim_run(plan, &so, &r, err);
  if (st) return st;
  px_sim_result_free(&r); /* the per-stage detail; the summary stays */
  px_sweep_train_of(plan, o, &r, &e->train);
  e->sim = r;
  e->bounded = false;
  e->score = score_of(e, o->objective);
  return PX_OK;
}

/* Compiles e->par (a plan the sweep found to fit, offload chosen) and simulates it (exposed: as simulate_plan). */
static px_status simulate_entry(const px_model *m, const px_cluster *c, const px_sweep_opts *o, bool exposed,
                                px_sweep_entry *e, px_err *err) {
  px_plan plan;
  px_status st = px_plan_compile(&plan, m, c, &e->par, err);
  if (!st) st = simulate_plan(&plan, o, exposed, e, err);
  px_plan_free(&plan);
  return st;
}

/* The least score a plan that fits can get: its score with the step time
 * at the simulator's lower bound (px_sim_step_bound_s, into *step_s), every
 * other figure (memory, goodput) its own; -inf when there is no bound. */
static px_status bound_score(const px_plan *plan, const px_sweep_opts *o, const px_sweep_entry *e, double *out,
                             double *step_s, px_err *err) {
  px_status st = px_sim_step_bound_s(plan, step_s, err);
  *out = -INFINITY;
  if (st || *step_s <= 0) return st;
  px_sweep_entry b = *e;
  b.sim.step_time_s = *step_s;
  b.sim.tokens_per_s = px_sim_tokens_per_s(plan, *step_s);
  px_power_of(&plan->cluster, 0, *step_s, (double)plan->par.gbs * (double)plan->par.seq, &b.sim.power);
  px_sweep_train_of(plan, o, &b.sim, &b.train);
  *out = score_of(&b, o->objective);
  return PX_OK;
}

/* A plan that fits but is not simulated (opts.front) shown by its bound:
 * the step time at its bound and the rates and time to train that gives
 * (each as good as the plan can be), its score's floor. */
static void bound_figures(px_plan *plan, const px_sweep_opts *o, double step_s, double score, px_sweep_entry *e) {
  px_plan_totals(plan);
  memset(&e->sim, 0, sizeof e->sim);
  e->sim.step_time_s = step_s;
  e->sim.fits = true;
  px_sim_rates(plan, &e->sim); /* compute_share 0: the power's floor */
  px_sweep_train_of(plan, o, &e->sim, &e->train);
  e->score = score;
  e->bounded = true;
}

/* The least score a plan can get before it is compiled, whichever offload it
 * ends with: its score at the bounds' step time and memory floor, with no
 * time lost to failures or checkpoints (goodput 1); -inf when there is no
 * bound. */
static double floor_score(const px_sweep_opts *o, const px_cluster *c, const px_parallel *par, const px_bound *b) {
  if (!(b->step_s > 0) && o->objective != PX_OBJ_MEMORY) return -INFINITY;
  px_sweep_entry e = {.peak_bytes = b->peak_bytes};
  e.sim.step_time_s = b->step_s;
  e.sim.tokens_per_s = b->step_s > 0 ? px_sim_tokens_per_s_of(par, b->step_s) : 0;
  px_power_of(c, 0, b->step_s, (double)par->gbs * (double)par->seq, &e.sim.power);
  e.train.goodput = 1;
  train_wall((double)c->gpus, e.sim.tokens_per_s, o->tokens, o->price_per_gpu_hour, &e.train);
  px_power_run(&e.sim.power, e.train.days * 86400.0, o->price_per_kwh, &e.train.energy_mwh, &e.train.energy_cost_usd);
  return score_of(&e, o->objective);
}

/* The compile of a sweep's plan: pruned (opts.keep), without the totals and stopping at a stage that
 * does not fit when no offload can help (the caller adds the totals before it simulates). */
static px_status compile_entry(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_parallel *par,
                               px_plan *plan, px_err *err) {
  return o->keep > 0 ? px_plan_compile_fit(plan, m, c, par, stop_unfit, (void *)o, err)
                     : px_plan_compile(plan, m, c, par, err);
}

/* Compiles e->par, with the least offload that makes it fit if it needs
 * one (into e->par: model states', then activations'), into plan (the caller frees it), and its peak into e.
 * Pruned (opts.keep), the compile stops at a stage that does not fit when no
 * offload can help. Offload only adds work to a plan: one that fits
 * without it is never faster with it, so it is tried, least first, only
 * when the plan does not fit. */
static px_status fit_entry(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_entry *e,
                           px_plan *plan, px_err *err) {
  px_parallel first = e->par;
  for (;;) {
    px_status st = compile_entry(m, c, o, &e->par, plan, err);
    if (st) return st;
    if (plan->fits || plan->stages_done < plan->par.pp || !offload_may_fit(plan)) break;
    px_parallel next = e->par;
    if (!more_offload(&next, m, c, o)) break;
    px_plan_free(plan);
    e->par = next;
  }
  /* then, on the plan without model-state offload, its first layers' activations: as few as cover the
   * peak's excess, one more at a time while the peak lies elsewhere (at most three tries) */
  for (int tries = 0; !plan->fits && plan->stages_done == plan->par.pp && tries < 3 &&
                      act_offload_swept(&first, &o->fixed, m, c);
       tries++) {
    px_parallel next = first;
    next.offload_act_layers = tries ? e->par.offload_act_layers + 1 : act_offload_layers(plan);
    if (next.offload_act_layers <= 0 || next.offload_act_layers > m->layers - 2 || !admitted(o, &next, m)) break;
    px_plan q;
    px_status st = compile_entry(m, c, o, &next, &q, err);
    if (st) return st;
    px_plan_free(plan);
    *plan = q;
    e->par = next;
  }
  entry_peak(plan, e);
  e->fit_unknown = false;
  return PX_OK;
}

/* Compiles candidate i (offload chosen) and, if it fits, simulates it; with
 * opts.keep (JOB_TRY) only when its compiled plan's bound can reach the
 * threshold. */
static void evaluate(work *w, int64_t i) {
  px_plan plan;
  px_err err = {0};
  px_sweep_entry *e = &w->entries[i];
  memset(e, 0, sizeof *e);
  e->index = i;
  e->par = w->cands->v[i];
  if (fit_entry(w->m, w->c, w->o, e, &plan, &err)) {
    failed(w, i, &err);
    return;
  }
  double b = -INFINITY, step_s = 0;
  if (!plan.fits) {
    w->state[i] = CAND_NOFIT;
  } else if (w->o->keep > 0) { /* its bound first, then the simulation (with the totals a fit's compile skips) */
    if (bound_score(&plan, w->o, e, &b, &step_s, &err)) {
      failed(w, i, &err);
    } else if (b > w->threshold) {
      w->floor[i] = b; /* opts.front: the order they are simulated in */
      if (w->o->front) bound_figures(&plan, w->o, step_s, b, e);
      w->state[i] = CAND_PRUNED;
    } else {
      px_plan_totals(&plan);
      if (simulate_plan(&plan, w->o, false, e, &err)) failed(w, i, &err);
      else w->state[i] = CAND_FITS;
    }
  } else {
    if (simulate_plan(&plan, w->o, true, e, &err)) failed(w, i, &err);
    else w->state[i] = CAND_FITS;
  }
  px_plan_free(&plan);
}

/* Candidate i's bounds (opts.keep): dropped when its memory floor cannot
 * fit whatever offload it is given, else floored. The floor stands in for
 * its peak (peak_partial: px_sweep_complete compiles whole the dropped plans
 * it prints). */
static void floor_candidate(work *w, int64_t i) {
  px_sweep_entry *e = &w->entries[i];
  memset(e, 0, sizeof *e);
  e->index = i;
  e->par = w->cands->v[i];
  px_parallel states = e->par;
  if (offload_swept(&e->par, &w->o->fixed)) offload_most(&states);
  if (act_offload_swept(&e->par, &w->o->fixed, w->m, w->c)) states.offload_act_layers = w->m->layers - 2;
  px_bound b;
  px_err err = {0};
  if (px_bound_of(w->bounds, w->key[i], &e->par, &states, &b, &err)) {
    failed(w, i, &err);
    return;
  }
  e->peak_bytes = b.peak_bytes;
  e->peak_partial = e->fit_unknown = true;
  if (px_plan_reserve_bytes(b.peak_bytes) > px_gpu_usable_bytes(&w->c->gpu)) {
    e->fit_unknown = false; /* it does not fit */
    w->state[i] = CAND_NOFIT;
    return;
  }
  w->floor[i] = floor_score(w->o, w->c, &e->par, &b);
  w->state[i] = CAND_FLOORED;
}

/* Tells opts.progress where the sweep stands once candidate i has been through the current pass. */
static void progress(work *w, int64_t i) {
  const px_sweep_opts *o = w->o;
  if (!o->progress) return;
  pthread_mutex_lock(&w->lock);
  w->done += w->job == w->counted;
  if (w->state[i] == CAND_FITS && w->job != JOB_FLOOR) { /* simulated in this pass */
    w->simulated++;
    if (w->best < 0 || w->entries[i].score < w->entries[w->best].score) w->best = i;
  }
  px_sweep_progress p = {w->done, w->total, w->simulated, w->best >= 0 ? &w->entries[w->best] : NULL};
  o->progress(o->progress_ctx, &p);
  pthread_mutex_unlock(&w->lock);
}

static void *worker(void *arg) {
  work *w = arg;
  const px_sweep_opts *o = w->o;
  for (;;) {
    int64_t k = atomic_fetch_add(&w->next, 1);
    if (k >= w->ntodo) break;
    int64_t i = w->todo[k];
    px_err err = {0};
    switch (w->job) {
      case JOB_TEMPLATES:
        if (px_bound_cache_make(w->bounds, i, &err)) note_err(w, &err);
        continue;
      case JOB_FLOOR: floor_candidate(w, i); break;
      case JOB_EVALUATE:
      case JOB_TRY: evaluate(w, i); break;
      case JOB_SIMULATE:
        if (simulate_entry(w->m, w->c, o, false, &w->entries[i], &err)) failed(w, i, &err);
        else w->state[i] = CAND_FITS;
        break;
    }
    progress(w, i);
  }
  return NULL;
}

/* Runs the todo list on the sweep's threads (this one among them). */
static void run_threads(work *w, const int64_t *todo, int64_t n, job j) {
  w->todo = todo;
  w->ntodo = n;
  w->job = j;
  atomic_store(&w->next, 0);
  int nt = w->o->threads > 0 ? w->o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (nt < 1) nt = 1;
  if (nt > 64) nt = 64;
  if (nt > n) nt = n > 0 ? (int)n : 1;
  pthread_t th[64];
  int started = 0;
  for (int t = 1; t < nt; t++)
    if (pthread_create(&th[started], NULL, worker, w) == 0) started++;
  worker(w);
  for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
}

/* Every candidate's bound cache key (opts.keep), the same in every part of a split sweep. */
static px_status bound_keys(work *w, px_err *err) {
  px_status st = PX_OK;
  w->bounds = px_bound_cache_new(w->m, w->c, err);
  if (!w->bounds) return PX_ERR_RUNTIME;
  for (int64_t i = 0; i < w->cands->n && !st; i++) st = px_bound_cache_add(w->bounds, &w->cands->v[i], &w->key[i], err);
  return st;
}

/* The candidates of the todo list bounded (opts.keep): the templates of
 * their keys made once, on the threads, then each candidate's bounds. */
static px_status floor_all(work *w, const int64_t *todo, int64_t n, px_err *err) {
  int64_t nkeys = px_bound_cache_size(w->bounds), nk = 0;
  int64_t *keys = px_calloc((size_t)nkeys + 1, sizeof *keys, err);
  bool *used = px_calloc((size_t)nkeys + 1, sizeof *used, err);
  px_status st = keys && used ? PX_OK : PX_ERR_RUNTIME;
  for (int64_t k = 0; !st && k < n; k++) used[w->key[todo[k]]] = true;
  for (int64_t k = 0; !st && k < nkeys; k++)
    if (used[k]) keys[nk++] = k;
  if (!st) run_threads(w, keys, nk, JOB_TEMPLATES);
  free(keys), free(used);
  if (!st && w->first_err.msg[0]) st = px_err_set(err, PX_ERR_RUNTIME, "internal: a plan's templates: %s", w->first_err.msg);
  if (!st) run_threads(w, todo, n, JOB_FLOOR);
  return st;
}

/* The floored candidates tried a chunk at a time, least floor first; after
 * each chunk the threshold is the keep-th best score so far, and a
 * candidate whose floor (or, once compiled, its bound) exceeds it cannot
 * be among the best keep. The chunks do not depend on the threads, so
 * neither do the plans compiled and simulated. */
#define TRY_CHUNK 32

typedef struct {
  double floor;
  int64_t i;
} floored;

static int cmp_floored(const void *a, const void *b) {
  const floored *x = a, *y = b;
  if (x->floor != y->floor) return x->floor < y->floor ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Adds score sc to the keep least (best, ascending, *n of them). */
static void order_best(double *best, int64_t *n, int64_t keep, double sc) {
  if (*n == keep && sc >= best[keep - 1]) return;
  int64_t at = *n < keep ? (*n)++ : keep - 1;
  for (; at > 0 && best[at - 1] > sc; at--) best[at] = best[at - 1];
  best[at] = sc;
}

/* The candidates in state `from` tried (job) least floor first, as long as
 * their floor can make the best keep; those left end in state `rest`. */
static px_status try_floored(work *w, int64_t keep, int from, job j, int rest, px_err *err) {
  int64_t n = 0;
  for (int64_t i = 0; i < w->cands->n; i++)
    if (w->state[i] == from) n++;
  floored *order = px_calloc((size_t)n + 1, sizeof *order, err);
  int64_t *sel = px_calloc(TRY_CHUNK, sizeof *sel, err);
  double *best = px_calloc((size_t)keep + 1, sizeof *best, err); /* the keep least scores, ascending */
  if (!order || !sel || !best) {
    free(order), free(sel), free(best);
    return PX_ERR_RUNTIME;
  }
  n = 0;
  for (int64_t i = 0; i < w->cands->n; i++)
    if (w->state[i] == from) order[n++] = (floored){w->floor[i], i};
  qsort(order, (size_t)n, sizeof *order, cmp_floored);
  w->threshold = INFINITY;
  int64_t nbest = 0;
  for (int64_t i = 0; i < w->cands->n; i++) /* the ones simulated already count */
    if (w->state[i] == CAND_FITS) order_best(best, &nbest, keep, w->entries[i].score);
  if (nbest == keep) w->threshold = best[keep - 1];
  for (int64_t c = 0; c < n && order[c].floor <= w->threshold; c += TRY_CHUNK) {
    int64_t nsel = 0;
    for (int64_t k = c; k < n && k < c + TRY_CHUNK; k++)
      if (order[k].floor <= w->threshold) sel[nsel++] = order[k].i;
    run_threads(w, sel, nsel, j);
    for (int64_t k = 0; k < nsel; k++)
      if (w->state[sel[k]] == CAND_FITS) order_best(best, &nbest, keep, w->entries[sel[k]].score);
    if (nbest == keep) w->threshold = best[keep - 1];
  }
  for (int64_t k = 0; k < n; k++)
    if (w->state[order[k].i] == from) w->state[order[k].i] = rest;
  free(order), free(sel), free(best);
  return PX_OK;
}

static double score_of(const px_sweep_entry *e, px_objective obj) {
  switch (obj) {
    case PX_OBJ_TIME: return e->train.days > 0 ? e->train.days : e->sim.step_time_s / (e->train.goodput > 0 ? e->train.goodput : 1e-9);
    case PX_OBJ_COST: {
      double usd = e->train.cost_usd + e->train.energy_cost_usd;
      return usd > 0 ? usd : e->sim.step_time_s;
    }
    case PX_OBJ_MEMORY: return (double)e->peak_bytes;
    case PX_OBJ_ENERGY:
      return e->train.energy_mwh > 0 ? e->train.energy_mwh
                                     : e->sim.power.j_per_token / (e->train.goodput > 0 ? e->train.goodput : 1e-9);
    default: return -e->sim.tokens_per_s;
  }
}

static int cmp_entry(const void *a, const void *b) {
  const px_sweep_entry *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? -1 : 1;
  if (x->sim.tokens_per_s != y->sim.tokens_per_s) return x->sim.tokens_per_s > y->sim.tokens_per_s ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

void px_sweep_rank(px_sweep_entry *e, int64_t n, px_objective obj) {
  for (int64_t i = 0; i < n; i++) e[i].score = score_of(&e[i], obj);
  if (n > 1) qsort(e, (size_t)n, sizeof *e, cmp_entry);
}

/* ZeRO-3's prefetch depth, when not fixed: the best plans are tried with one
 * layer more in flight, each kept if it fits and is faster (a refinement of
 * the leaders, not a dimension of the search: it changes little and each
 * try costs a simulation). */
#define REFINE_TOP 8
static void refine_prefetch(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r) {
  bool changed = false;
  for (int64_t i = 0; i < r->n && i < REFINE_TOP; i++) {
    px_sweep_entry *e = &r->entries[i];
    if (e->par.zero != 3 || o->fixed.prefetch >= 0 || !(e->par.overlap & PX_OVERLAP_ZERO)) continue;
    px_parallel deeper = e->par;
    deeper.prefetch++;
    if (!admitted(o, &deeper, m)) continue;
    px_plan plan;
    px_sim_result sr;
    px_err err = {0};
    if (px_plan_compile(&plan, m, c, &deeper, &err)) continue;
    if (plan.fits && !px_sim_run(&plan, &sweep_sim_opts, &sr, &err)) {
      px_sim_result_free(&sr);
      if (sr.tokens_per_s > e->sim.tokens_per_s) {
        e->par = deeper;
        e->sim = sr;
        entry_peak(&plan, e);
        px_sweep_train_of(&plan, o, &sr, &e->train);
        changed = true;
      }
    }
    px_plan_free(&plan);
  }
  if (changed) px_sweep_rank(r->entries, r->n, o->objective);
}

static px_status complete_front(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                                px_err *err);

px_status px_sweep_run(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                       px_err *err) {
  memset(r, 0, sizeof *r);
  cand_list cands = {0};
  px_status st = enumerate(m, c, o, &cands, r, err);
  if (st) {
    free(cands.v);
    return st;
  }
  r->enumerated = cands.n + r->invalid + r->excluded;
  work w = {.m = m, .c = c, .o = o, .cands = &cands};
  int64_t parts = o->parts > 0 ? o->parts : 1;
  w.entries = px_calloc((size_t)cands.n + 1, sizeof *w.entries, err);
  w.state = px_calloc((size_t)cands.n + 1, 1, err);
  w.floor = px_calloc((size_t)cands.n + 1, sizeof *w.floor, err);
  w.key = px_calloc((size_t)cands.n + 1, sizeof *w.key, err);
  int64_t *todo = px_calloc((size_t)cands.n + 1, sizeof *todo, err);
  if (!w.entries || !w.state || !w.floor || !w.key || !todo) {
    free(cands.v), free(w.entries), free(w.state), free(w.floor), free(w.key), free(todo);
    return PX_ERR_RUNTIME;
  }
  atomic_init(&w.next, 0);
  w.best = -1;
  pthread_mutex_init(&w.lock, NULL);
  /* the best keep exact (and the ZeRO-3 refinement's leaders): the rest only as far as their bounds need */
  int64_t keep = o->keep > 0 ? (o->keep > REFINE_TOP ? o->keep : REFINE_TOP) : 0;
  if (keep > 0) st = bound_keys(&w, err);
  /* this part's candidates: with keep those of its keys (plans sharing templates together), else every
   * parts-th */
  w.total = 0;
  for (int64_t i = 0; !st && i < cands.n; i++)
    if ((keep > 0 ? w.key[i] : i) % parts == o->part) todo[w.total++] = i;
    else w.state[i] = CAND_OTHER;
  w.counted = keep == 0 ? JOB_EVALUATE : o->front ? JOB_TRY : JOB_FLOOR;
  if (!st && keep > 0) {
    st = floor_all(&w, todo, w.total, err);
    if (!st && !o->front) st = try_floored(&w, keep, CAND_FLOORED, JOB_TRY, CAND_UNSIZED, err);
    if (!st && o->front) { /* every plan compiled (fit and peak exact) and bounded, then the best keep simulated */
      int64_t nf = 0;
      for (int64_t k = 0; k < w.total; k++)
        if (w.state[todo[k]] == CAND_FLOORED) todo[nf++] = todo[k];
      w.threshold = -INFINITY;
      w.total = nf;
      run_threads(&w, todo, nf, JOB_TRY);
      st = try_floored(&w, keep, CAND_PRUNED, JOB_SIMULATE, CAND_PRUNED, err);
    }
  } else if (!st) {
    run_threads(&w, todo, w.total, JOB_EVALUATE);
  }
  pthread_mutex_destroy(&w.lock);
  px_bound_cache_free(w.bounds);
  free(todo);
  free(w.floor);
  free(w.key);
  /* Split into the fitting ones, the dropped ones and the pruned ones. */
  int64_t n = 0, nd = 0, np = 0;
  for (int64_t i = 0; i < cands.n; i++) {
    if (w.state[i] == CAND_NOFIT) nd++;
    if (w.state[i] == CAND_PRUNED || w.state[i] == CAND_UNSIZED) np++;
    if (w.state[i] == CAND_FAILED && !st)
      st = px_err_set(err, PX_ERR_RUNTIME, "internal: a valid plan failed to compile or simulate: %s", w.first_err.msg);
  }
  r->dropped = px_calloc((size_t)nd + 1, sizeof *r->dropped, err);
  r->pruned = px_calloc((size_t)np + 1, sizeof *r->pruned, err);
  if ((!r->dropped || !r->pruned) && !st) st = PX_ERR_RUNTIME;
  for (int64_t i = 0; !st && i < cands.n; i++) {
    if (w.state[i] == CAND_NOFIT) r->dropped[r->ndropped++] = w.entries[i];
    if (w.state[i] == CAND_PRUNED || w.state[i] == CAND_UNSIZED) r->pruned[r->npruned++] = w.entries[i];
    r->unsized += w.state[i] == CAND_UNSIZED;
    if (w.state[i] == CAND_FITS) w.entries[n++] = w.entries[i];
  }
  r->dropped_memory = r->ndropped;
  r->simulated = n;
  r->entries = w.entries;
  r->n = n;
  free(w.state);
  free(cands.v);
  if (st) {
    px_sweep_result_free(r);
    return st;
  }
  px_sweep_rank(r->entries, r->n, o->objective);
  /* a split sweep refines its leaders and completes the best plan's alternatives once its parts are merged
   * (its part's plots first, on its own threads: most of what the whole needs) */
  if (parts == 1) st = px_sweep_complete(m, c, o, r, err);
  else if (keep > 0 && o->front) st = complete_front(m, c, o, r, err);
  if (st) px_sweep_result_free(r);
  return st;
}

/* The best plan in another precision of the same split (px_sweep_precision_alternative's match). */
static bool precision_alt(const px_parallel *a, const px_parallel *b);
static bool same_split(const px_parallel *a, const px_parallel *b);

/* Whether the best plan's ZeRO or precision line names e: a ZeRO
 * alternative, or the other precision of the same split (px_sweep_zero_
 * alternatives, px_sweep_precision_alternative); one never compiled with
 * whatever offload its compile would choose. */
static bool named(const px_parallel *best, const px_sweep_entry *e) {
  if (same_split(&e->par, best)) return true;
  px_parallel p = e->par;
  if (e->fit_unknown)
    p.offload_opt = best->offload_opt, p.offload_params = best->offload_params,
    p.offload_act_layers = best->offload_act_layers;
  return precision_alt(best, &p);
}

static int cmp_index(const void *a, const void *b);

static px_status complete_alternatives(const px_model *m, const px_cluster *c, const px_sweep_opts *o,
                                      px_sweep_result *r, px_err *err) {
  if (r->n == 0) return PX_OK;
  const px_parallel best = r->entries[0].par;
  /* the pruned ones named: compiled if they never were (offload chosen), simulated if they fit */
  int64_t na = 0, kept = 0, nd = r->ndropped;
  for (int64_t i = 0; i < r->npruned; i++) na += named(&best, &r->pruned[i]);
  if (na) {
    px_sweep_entry *ne = realloc(r->entries, (size_t)(r->n + na) * sizeof *ne);
    if (ne) r->entries = ne;
    px_sweep_entry *dr = ne ? realloc(r->dropped, (size_t)(r->ndropped + na) * sizeof *dr) : NULL;
    if (!dr) return px_err_set(err, PX_ERR_RUNTIME, "out of memory completing the sweep");
    r->dropped = dr;
  }
  for (int64_t i = 0; na && i < r->npruned; i++) {
    px_sweep_entry *e = &r->pruned[i];
    if (!named(&best, e)) {
      r->pruned[kept++] = *e;
      continue;
    }
    if (e->fit_unknown) {
      px_plan plan;
      px_status st = fit_entry(m, c, o, e, &plan, err);
      bool fits = plan.fits;
      px_plan_free(&plan);
      if (st) return st;
      r->unsized--;
      if (!fits) {
        r->dropped[r->ndropped++] = *e;
        continue;
      }
    }
    px_status st = simulate_entry(m, c, o, false, e, err);
    if (st) return st;
    r->entries[r->n++] = *e;
  }
  if (na) {
    r->npruned = kept;
    r->simulated = r->n;
    r->dropped_memory = r->ndropped;
    if (r->ndropped > nd) qsort(r->dropped, (size_t)r->ndropped, sizeof *r->dropped, cmp_index);
    px_sweep_rank(r->entries, r->n, o->objective);
  }
  /* the dropped ones named with their peak: compiled whole (the same plan: the search stopped only where
   * the rest could not change its fate) */
  for (int64_t i = 0; i < r->ndropped; i++) {
    px_sweep_entry *e = &r->dropped[i];
    if (!e->peak_partial || !named(&best, e)) continue;
    px_plan plan;
    px_status st = px_plan_compile(&plan, m, c, &e->par, err);
    if (!st) entry_peak(&plan, e);
    px_plan_free(&plan);
    if (st) return st;
  }
  return PX_OK;
}

/* ---- the report's plots without every plan simulated (opts.front) ---- */

/* Simulates the pruned plans r->pruned[idx[k]] (compiled, fitting, shown by their bound) on the threads. */
static px_status simulate_pruned(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                                 const int64_t *idx, int64_t n, px_err *err) {
  if (n == 0) return PX_OK;
  work w = {.m = m, .c = c, .o = o, .entries = r->pruned};
  w.state = px_calloc((size_t)r->npruned + 1, 1, err);
  if (!w.state) return PX_ERR_RUNTIME;
  atomic_init(&w.next, 0);
  w.best = -1;
  pthread_mutex_init(&w.lock, NULL);
  run_threads(&w, idx, n, JOB_SIMULATE);
  pthread_mutex_destroy(&w.lock);
  free(w.state);
  return w.first_err.msg[0] ? px_err_set(err, PX_ERR_RUNTIME, "internal: a plan that fits failed to simulate: %s",
                                         w.first_err.msg)
                            : PX_OK;
}

/* Moves the pruned plans simulated since (bounded false) to the ranking. */
static px_status promote(px_sweep_result *r, const px_sweep_opts *o, px_err *err) {
  int64_t nm = 0, kept = 0;
  for (int64_t i = 0; i < r->npruned; i++) nm += !r->pruned[i].bounded && !r->pruned[i].fit_unknown;
  if (!nm) return PX_OK;
  px_sweep_entry *ne = realloc(r->entries, (size_t)(r->n + nm) * sizeof *ne);
  if (!ne) return px_err_set(err, PX_ERR_RUNTIME, "out of memory completing the sweep");
  r->entries = ne;
  for (int64_t i = 0; i < r->npruned; i++) {
    if (!r->pruned[i].bounded && !r->pruned[i].fit_unknown) r->entries[r->n++] = r->pruned[i];
    else r->pruned[kept++] = r->pruned[i];
  }
  r->npruned = kept;
  r->simulated = r->n;
  px_sweep_rank(r->entries, r->n, o->objective);
  return PX_OK;
}

/* A bounded plan that may beat its heatmap cell's best: the cell, its tokens/s bound, its place in r->pruned. */
typedef struct {
  int64_t cell;
  double tps;
  int64_t i;
} cell_cand;

static int cmp_cell_cand(const void *a, const void *b) {
  const cell_cand *x = a, *y = b;
  if (x->cell != y->cell) return x->cell < y->cell ? -1 : 1;
  if (x->tps != y->tps) return x->tps > y->tps ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* The heatmap's cells (tp x pp) exact: the bounded plans whose tokens/s
 * bound beats their cell's best simulated one are simulated, the highest
 * bounds first, in rounds of at most a chunk (shared by the cells still
 * open) until none does. */
static px_status front_cells(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                             px_err *err) {
  enum { MAX_CELLS = 4096 };
  int64_t *tp = px_calloc(MAX_CELLS, sizeof *tp, err), *pp = px_calloc(MAX_CELLS, sizeof *pp, err), ncell = 0;
  double *best = px_calloc(MAX_CELLS, sizeof *best, err);
  cell_cand *cand = px_calloc((size_t)r->npruned + 1, sizeof *cand, err);
  int64_t *pick = px_calloc((size_t)r->npruned + 1, sizeof *pick, err);
  px_status st = tp && pp && best && cand && pick ? PX_OK : PX_ERR_RUNTIME;
  for (bool more = !st; more && !st;) {
    for (int64_t k = 0; k < ncell; k++) best[k] = -INFINITY;
    int64_t ncand = 0, npick = 0, open = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int64_t i = 0; i < (pass ? r->npruned : r->n); i++) {
        const px_sweep_entry *e = pass ? &r->pruned[i] : &r->entries[i];
        if (pass && !e->bounded) continue;
        int64_t k = 0;
        while (k < ncell && (tp[k] != e->par.tp || pp[k] != e->par.pp)) k++;
        if (k == ncell && ncell < MAX_CELLS) tp[k] = e->par.tp, pp[k] = e->par.pp, best[k] = -INFINITY, ncell++;
        if (k == ncell) continue;
        if (!pass) best[k] = fmax(best[k], e->sim.tokens_per_s);
        else if (e->sim.tokens_per_s > best[k]) cand[ncand++] = (cell_cand){k, e->sim.tokens_per_s, i};
      }
    qsort(cand, (size_t)ncand, sizeof *cand, cmp_cell_cand);
    for (int64_t j = 0; j < ncand; j++) open += j == 0 || cand[j].cell != cand[j - 1].cell;
    int64_t quota = open > 0 && TRY_CHUNK / open > 1 ? TRY_CHUNK / open : 1;
    for (int64_t j = 0, in_cell = 0; j < ncand; j++) {
      in_cell = j > 0 && cand[j].cell == cand[j - 1].cell ? in_cell + 1 : 0;
      if (in_cell < quota) pick[npick++] = cand[j].i;
    }
    more = npick > 0;
    if (more && !(st = simulate_pruned(m, c, o, r, pick, npick, err))) st = promote(r, o, err);
  }
  free(tp), free(pp), free(best), free(cand), free(pick);
  return st;
}

typedef struct {
  uint64_t peak;
  int64_t i; /* r->pruned's i, or (entries) -1 - i */
} by_peak;

static int cmp_peak(const void *a, const void *b) {
  const by_peak *x = a, *y = b;
  if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* The Pareto front of memory and tokens/s exact: a bounded plan is not on
 * it when a simulated one with less memory is faster than its bound (that
 * one is then also faster than any plan the bounded one would dominate).
 * The others are simulated in rounds, each those of them that nothing with
 * less memory beats (simulated, or by its bound): the front of what is not
 * yet known, whose simulations settle the most of the rest. */
static px_status front_pareto(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                              px_err *err) {
  px_status st = PX_OK;
  for (bool more = true; more && !st;) {
    int64_t n = r->n + r->npruned, npick = 0;
    by_peak *v = px_calloc((size_t)n + 1, sizeof *v, err);
    int64_t *pick = px_calloc((size_t)n + 1, sizeof *pick, err);
    if (!v || !pick) {
      free(v), free(pick);
      return PX_ERR_RUNTIME;
    }
    for (int64_t i = 0; i < r->n; i++) v[i] = (by_peak){r->entries[i].peak_bytes, -1 - i};
    for (int64_t i = 0; i < r->npruned; i++) v[r->n + i] = (by_peak){r->pruned[i].peak_bytes, i};
    qsort(v, (size_t)n, sizeof *v, cmp_peak);
    /* the best simulated tokens/s and the best of all (bounds too) with less memory than the plan at k, and
     * those of the plans with as much as it */
    double exact = -INFINITY, all = -INFINITY, exact_grp = -INFINITY, all_grp = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
      if (k > 0 && v[k].peak > v[k - 1].peak)
        exact = fmax(exact, exact_grp), all = fmax(all, all_grp), exact_grp = all_grp = -INFINITY;
      const px_sweep_entry *e = v[k].i < 0 ? &r->entries[-1 - v[k].i] : &r->pruned[v[k].i];
      if (v[k].i >= 0 && !e->bounded) continue; /* pruned without figures (never with opts.front) */
      double tps = e->sim.tokens_per_s;
      all_grp = fmax(all_grp, tps);
      if (v[k].i < 0) exact_grp = fmax(exact_grp, tps);
      else if (!(exact > tps) && !(all > tps)) pick[npick++] = v[k].i;
    }
    free(v);
    more = npick > 0;
    if (more && !(st = simulate_pruned(m, c, o, r, pick, npick, err))) st = promote(r, o, err);
    free(pick);
  }
  return st;
}

/* Both, the cells first (their bests certify the most). */
static px_status complete_front(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                                px_err *err) {
  px_status st = front_cells(m, c, o, r, err);
  return st ? st : front_pareto(m, c, o, r, err);
}

/* A pruned sweep simulated without the comm-free twins: the first keep
 * entries get theirs (comm_exposed_s, the table's "exposed"). */
static px_status complete_exposed(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                                  px_err *err) {
  for (int64_t i = 0; i < r->n && i < o->keep; i++) {
    px_sweep_entry *e = &r->entries[i];
    if (e->sim.step_time_comm_free_s > 0) continue; /* refined: simulated whole */
    px_plan plan;
    px_status st = px_plan_compile(&plan, m, c, &e->par, err);
    if (!st) st = px_sim_exposed(&plan, NULL, &e->sim, err);
    px_plan_free(&plan);
    if (st) return st;
  }
  return PX_OK;
}

px_status px_sweep_complete(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                            px_err *err) {
  /* the whole ranking's leaders: a part's own would refine plans the whole sweep does not */
  refine_prefetch(m, c, o, r);
  if (o->keep <= 0) return PX_OK;
  px_status st = complete_alternatives(m, c, o, r, err);
  if (!st && o->front) st = complete_front(m, c, o, r, err);
  return st ? st : complete_exposed(m, c, o, r, err);
}

static int cmp_index(const void *a, const void *b) {
  const px_sweep_entry *x = a, *y = b;
  return x->index < y->index ? -1 : x->index > y->index;
}

void px_sweep_merge(px_sweep_result *r, px_sweep_entry *entries, int64_t n, px_sweep_entry *dropped, int64_t ndropped,
                    px_sweep_entry *pruned, int64_t npruned, px_objective obj) {
  free(r->entries);
  free(r->dropped);
  free(r->pruned);
  r->entries = entries;
  r->n = r->simulated = n;
  r->dropped = dropped;
  r->ndropped = r->dropped_memory = ndropped;
  r->pruned = pruned;
  r->npruned = npruned;
  r->unsized = 0;
  for (int64_t i = 0; i < npruned; i++) r->unsized += pruned[i].fit_unknown;
  if (ndropped > 1) qsort(r->dropped, (size_t)ndropped, sizeof *r->dropped, cmp_index);
  if (npruned > 1) qsort(r->pruned, (size_t)npruned, sizeof *r->pruned, cmp_index);
  px_sweep_rank(r->entries, r->n, obj);
}

void px_sweep_result_free(px_sweep_result *r) {
  if (!r) return;
  free(r->entries);
  free(r->dropped);
  free(r->pruned);
  r->entries = r->dropped = r->pruned = NULL;
  r->n = r->ndropped = r->npruned = r->unsized = 0;
}

/* The same split in any precision. */
static bool same_shape(const px_parallel *a, const px_parallel *b) {
  return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->cp_algo == b->cp_algo && a->ep == b->ep && a->etp == b->etp &&
         a->overlap == b->overlap && a->sp == b->sp && a->mbs == b->mbs &&
         a->schedule == b->schedule && a->vpp == b->vpp && a->recompute == b->recompute &&
         a->recompute_method == b->recompute_method && a->recompute_layers == b->recompute_layers &&
         a->recompute_modules == b->recompute_modules && a->first_stage_layers == b->first_stage_layers && a->last_stage_layers == b->last_stage_layers;
}

static bool same_split(const px_parallel *a, const px_parallel *b) {
  return same_shape(a, b) && a->precision == b->precision && a->fp8_recipe == b->fp8_recipe;
}

static bool precision_alt(const px_parallel *a, const px_parallel *b) {
  return b->precision != a->precision && same_shape(a, b) && a->zero == b->zero && a->grad_accum == b->grad_accum &&
         a->reshard == b->reshard && a->shard_group == b->shard_group && a->offload_opt == b->offload_opt &&
         a->offload_params == b->offload_params && a->offload_act_layers == b->offload_act_layers;
}

bool px_sweep_precision_alternative(const px_sweep_result *r, const px_sweep_entry *of, px_sweep_alt *out) {
  const px_parallel *a = &of->par;
  for (int pass = 0; pass < 2; pass++) {
    const px_sweep_entry *list = pass ? r->dropped : r->entries;
    int64_t count = pass ? r->ndropped : r->n;
    for (int64_t i = 0; i < count; i++) {
      const px_parallel *b = &list[i].par;
      if (precision_alt(a, b)) {
        *out = (px_sweep_alt){&list[i], !pass};
        return true;
      }
    }
  }
  return false;
}

int px_sweep_zero_alternatives(const px_sweep_result *r, const px_sweep_entry *of, px_sweep_alt *out, int cap) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++) {
    const px_sweep_entry *list = pass ? r->dropped : r->entries;
    int64_t count = pass ? r->ndropped : r->n;
    for (int64_t i = 0; i < count && n < cap; i++)
      if (&list[i] != of && same_split(&list[i].par, &of->par)) out[n++] = (px_sweep_alt){&list[i], !pass};
  }
  return n;
}
