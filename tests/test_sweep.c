/* Plan search: hand-derivable best plans are found, nothing that does not
 * fit is ranked, fixed flags stay fixed, the objectives order as they say,
 * and the failure model's figures by hand (tests/data/failure_rates.md);
 * re-planning for fewer ranks (sim/replan.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replan.h"
#include "sim/sweep.h"
#include "tests/testutil.h"

static void load(const char *model, const char *cluster, int64_t gpus, px_model *m, px_cluster *c) {
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(model, m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load(cluster, c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(c, gpus, 0, &err), PX_OK);
}

/* A model that fits on one GPU, one node of 8, plenty of batch: pure data
 * parallelism wins (TP adds exposed collectives, PP a bubble). */
static void test_small_model_pure_dp(void) {
  px_model m;
  px_cluster c;
  load("gpt2-350m", "dgx-h100", 8, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 64;
  o.threads = 2;
#ifdef __SANITIZE_ADDRESS__
  o.fixed.mbs = 1; /* a part of the same sweep under the sanitizers (most of this test's minutes there); the main
                      build searches the micro-batch too */
#endif
  px_sweep_result r;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.n > 10);
  CU_ASSERT_EQUAL(r.entries[0].par.tp, 1);
  CU_ASSERT_EQUAL(r.entries[0].par.pp, 1);
  CU_ASSERT_EQUAL(r.entries[0].par.dp, 8);
  CU_ASSERT_EQUAL(r.entries[0].par.recompute, PX_RECOMPUTE_NONE);
  CU_ASSERT_EQUAL(r.enumerated, r.invalid + r.dropped_memory + r.simulated);
  for (int64_t i = 1; i < r.n; i++) CU_ASSERT(r.entries[i].sim.tokens_per_s <= r.entries[i - 1].sim.tokens_per_s);
  px_sweep_result_free(&r);
}

/* 70B on one node: the model states alone (16 bytes x 70.6B / 8 = 141 GB a
 * GPU without ZeRO) do not fit in 80 GB, so every ranked plan uses ZeRO-3 or
 * shards states otherwise, and nothing ranked exceeds the memory. */
static void test_never_ranks_infeasible(void) {
  px_model m;
  px_cluster c;
  load("llama3-70b", "dgx-h100", 16, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 16;
  o.fixed.mbs = 1;
  px_sweep_result r;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT(r.dropped_memory > 0);
  for (int64_t i = 0; i < r.n; i++) {
    CU_ASSERT(px_plan_reserve_bytes(r.entries[i].peak_bytes) + c.gpu.reserved_bytes <= c.gpu.hbm_bytes);
    /* ZeRO-0 keeps 16 bytes a parameter: 70.6e9 x 16 / 16 GPUs > 70 GB, plus activations */
    CU_ASSERT(r.entries[i].par.zero > 0 || r.entries[i].par.pp * r.entries[i].par.tp >= 16);
  }
  /* dropped: the executor's reservation (the peak with its headroom) would not fit */
  for (int64_t i = 0; i < r.ndropped; i++)
    CU_ASSERT(px_plan_reserve_bytes(r.dropped[i].peak_bytes) + c.gpu.reserved_bytes > c.gpu.hbm_bytes);
  px_sweep_result_free(&r);
}

static void test_fixed_flags(void) {
  px_model m;
  px_cluster c;
  load("llama3-8b", "dgx-h100", 32, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 128;
  o.fixed.tp = 2;
  o.fixed.zero = 1;
  o.fixed.recompute = PX_RECOMPUTE_SELECTIVE;
  px_sweep_result r;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.n > 0);
  for (int64_t i = 0; i < r.n; i++) {
    CU_ASSERT_EQUAL(r.entries[i].par.tp, 2);
    CU_ASSERT_EQUAL(r.entries[i].par.zero, 1);
    CU_ASSERT_EQUAL(r.entries[i].par.recompute, PX_RECOMPUTE_SELECTIVE);
  }
  /* the memory objective ranks by peak bytes */
  o.objective = PX_OBJ_MEMORY;
  px_sweep_result rm;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &rm, &err), PX_OK);
  for (int64_t i = 1; i < rm.n; i++) CU_ASSERT(rm.entries[i].peak_bytes >= rm.entries[i - 1].peak_bytes);
  CU_ASSERT_EQUAL(rm.n, r.n);
  px_sweep_result_free(&r);
  px_sweep_result_free(&rm);
}

/* The schedule is a dimension of the search: Meta's Llama 3 405B split
 * (TP 8, PP 16, SP, ZeRO-1, 16 micro-batches) ranks 1F1B, interleaved and
 * both zero-bubble schedules, ZB-H1 ahead of 1F1B (the bubble is half the
 * step: 49% against 28%); a fixed schedule stays fixed. On H200s, whose
 * memory holds every schedule's split (an H100's 79.1 GiB leaves the
 * interleaved one 91 MiB over). */
static void test_schedules_searched(void) {
  px_model m;
  px_cluster c;
  load("llama3-405b", "hgx-h200", 16384, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 2048, o.fixed.tp = 8, o.fixed.pp = 16, o.fixed.sp = 1, o.fixed.zero = 1, o.fixed.mbs = 1;
  o.fixed.recompute = PX_RECOMPUTE_NONE, o.fixed.precision = PX_PREC_BF16; /* the bubble's question, in bf16 */
  px_sweep_result r;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  double best[PX_SCHED_COUNT] = {0};
  for (int64_t i = 0; i < r.n; i++) {
    int s = r.entries[i].par.schedule;
    if (r.entries[i].sim.tokens_per_s > best[s]) best[s] = r.entries[i].sim.tokens_per_s;
  }
  CU_ASSERT(best[PX_SCHED_1F1B] > 0 && best[PX_SCHED_INTERLEAVED] > 0);
  CU_ASSERT(best[PX_SCHED_ZB_H1] > 1.2 * best[PX_SCHED_1F1B]);
  CU_ASSERT(best[PX_SCHED_ZB_H2] >= best[PX_SCHED_ZB_H1]);
  CU_ASSERT_EQUAL(best[PX_SCHED_GPIPE], 0); /* only when asked for */
  px_sweep_result_free(&r);
  o.fixed.schedule = PX_SCHED_ZB_H2;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.n > 0);
  for (int64_t i = 0; i < r.n; i++) CU_ASSERT_EQUAL(r.entries[i].par.schedule, PX_SCHED_ZB_H2);
  px_sweep_result_free(&r);
}

/* Splitting the space in parts and merging gives the same ranking. */
static void test_parts_merge(void) {
  px_model m;
  px_cluster c;
  load("llama3-8b", "dgx-h100", 8, &m, &c); /* 8 GPUs: short under AddressSanitizer too */
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  /* ZeRO-1 fixed: no ZeRO-3 prefetch refinement, which px_sweep_complete runs after a merge (not called
   * here; test_pruned_same_ranking covers that path); within merged[]'s 4096 plans */
  o.fixed.gbs = 32, o.fixed.precision = PX_PREC_BF16, o.fixed.zero = 1;
  px_sweep_result whole, part[3];
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &whole, &err), PX_OK);
  px_sweep_entry merged[4096];
  int64_t n = 0;
  for (int k = 0; k < 3; k++) {
    o.part = k, o.parts = 3;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &part[k], &err), PX_OK);
    for (int64_t i = 0; i < part[k].n && n < 4096; i++) merged[n++] = part[k].entries[i];
  }
  px_sweep_rank(merged, n, PX_OBJ_THROUGHPUT);
  CU_ASSERT_EQUAL_FATAL(n, whole.n);
  for (int64_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL(merged[i].index, whole.entries[i].index);
    CU_ASSERT(merged[i].sim.tokens_per_s == whole.entries[i].sim.tokens_per_s);
  }
  for (int k = 0; k < 3; k++) px_sweep_result_free(&part[k]);
  px_sweep_result_free(&whole);
}

/* Two rankings agree in their first k: the same plans in the same order, the same figures. */
static void same_top(const px_sweep_result *a, const px_sweep_result *b, int64_t k) {
  CU_ASSERT_FATAL(a->n >= k && b->n >= k);
  for (int64_t i = 0; i < k; i++) {
    CU_ASSERT_EQUAL(a->entries[i].index, b->entries[i].index);
    CU_ASSERT(a->entries[i].sim.step_time_s == b->entries[i].sim.step_time_s);
    CU_ASSERT(a->entries[i].sim.comm_exposed_s == b->entries[i].sim.comm_exposed_s);
    CU_ASSERT(a->entries[i].sim.step_time_comm_free_s == b->entries[i].sim.step_time_comm_free_s);
    CU_ASSERT_EQUAL(a->entries[i].sim.events, b->entries[i].sim.events);
    CU_ASSERT(a->entries[i].score == b->entries[i].score);
  }
}

/* The best plan's ZeRO and precision alternatives agree (the same plans, figures, peaks and order: a
 * pruned sweep stops compiling a plan at its first stage that does not fit, and completes the peaks
 * these lines print). */
static void same_alternatives(const px_sweep_result *a, const px_sweep_result *b) {
  px_sweep_alt x[16], y[16];
  int nx = px_sweep_zero_alternatives(a, &a->entries[0], x, 16), ny = px_sweep_zero_alternatives(b, &b->entries[0], y, 16);
  CU_ASSERT_EQUAL(nx, ny);
  for (int i = 0; i < nx && i < ny; i++) {
    CU_ASSERT_EQUAL(x[i].e->index, y[i].e->index);
    CU_ASSERT_EQUAL(x[i].fits, y[i].fits);
    CU_ASSERT(x[i].e->sim.tokens_per_s == y[i].e->sim.tokens_per_s);
    CU_ASSERT_EQUAL(x[i].e->peak_bytes, y[i].e->peak_bytes);
    CU_ASSERT(x[i].e->par.zero == y[i].e->par.zero && x[i].e->par.offload_opt == y[i].e->par.offload_opt &&
              x[i].e->par.offload_params == y[i].e->par.offload_params);
  }
  px_sweep_alt pa, pb;
  bool ha = px_sweep_precision_alternative(a, &a->entries[0], &pa), hb = px_sweep_precision_alternative(b, &b->entries[0], &pb);
  CU_ASSERT_EQUAL(ha, hb);
  if (ha && hb)
    CU_ASSERT(pa.e->index == pb.e->index && pa.e->sim.tokens_per_s == pb.e->sim.tokens_per_s &&
              pa.e->peak_bytes == pb.e->peak_bytes);
}

/* A sweep that keeps only its best k exact (opts.keep) prunes plans by the
 * simulator's lower bound and still ranks its first k, and names the best
 * plan's alternatives, as the sweep that simulates everything does, by
 * every objective and split in parts; and no plan's bound exceeds its
 * simulated step time. Llama 3 8B on 8 H100s (bf16 and fp8, every tp, pp,
 * schedule, ZeRO), one micro-batch size and no recomputation to stay short
 * (it runs under AddressSanitizer too). */
static void test_pruned_same_ranking(void) {
  px_model m;
  px_cluster c;
  load("llama3-8b", "dgx-h100", 8, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 32, o.fixed.mbs = 1, o.fixed.recompute = PX_RECOMPUTE_NONE;
  o.tokens = 1e12, o.price_per_gpu_hour = 2.5;
  o.threads = 2;
  px_err err = {0};
  for (int obj = 0; obj < PX_OBJ_COUNT; obj++) {
    o.objective = (px_objective)obj;
    px_sweep_result all, pruned;
    o.keep = 0;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &all, &err), PX_OK);
    o.keep = 5;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &pruned, &err), PX_OK);
    CU_ASSERT(pruned.npruned > 0 && all.npruned == 0 && all.unsized == 0);
    CU_ASSERT(pruned.unsized > 0 && pruned.unsized <= pruned.npruned);
    /* every valid plan once: simulated, pruned (fitting, or never compiled) or dropped; the fitting ones
     * and the dropped ones of the whole sweep's */
    CU_ASSERT_EQUAL(pruned.n + pruned.npruned + pruned.ndropped, all.n + all.ndropped);
    CU_ASSERT(pruned.n + pruned.npruned - pruned.unsized <= all.n && pruned.ndropped <= all.ndropped);
    /* the plans dropped are dropped by the whole sweep too, with the same offload tried; a peak cut short
     * (the first stage found not to fit, or the memory floor before any compile) is at most the whole plan's */
    int64_t partial = 0;
    for (int64_t i = 0, j = 0; i < pruned.ndropped; i++) {
      const px_sweep_entry *p = &pruned.dropped[i];
      while (j < all.ndropped && all.dropped[j].index < p->index) j++;
      CU_ASSERT_FATAL(j < all.ndropped && all.dropped[j].index == p->index);
      const px_sweep_entry *q = &all.dropped[j];
      CU_ASSERT(p->par.offload_opt == q->par.offload_opt && p->par.offload_params == q->par.offload_params);
      CU_ASSERT(p->peak_partial ? p->peak_bytes <= q->peak_bytes : p->peak_bytes == q->peak_bytes);
      CU_ASSERT(!q->peak_partial && !p->fit_unknown);
      partial += p->peak_partial;
    }
    CU_ASSERT(partial > 0);
    same_top(&all, &pruned, 5);
    same_alternatives(&all, &pruned);
    if (obj == PX_OBJ_THROUGHPUT) {
      /* split in three parts, merged, completed: the same again */
      px_sweep_result part[3];
      px_sweep_entry *e = calloc((size_t)all.simulated, sizeof *e), *d = calloc((size_t)all.ndropped + 1, sizeof *d),
                     *p = calloc((size_t)all.simulated, sizeof *p);
      int64_t ne = 0, nd = 0, np = 0;
      for (int k = 0; k < 3; k++) {
        o.part = k, o.parts = 3;
        CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &part[k], &err), PX_OK);
        memcpy(e + ne, part[k].entries, (size_t)part[k].n * sizeof *e), ne += part[k].n;
        memcpy(d + nd, part[k].dropped, (size_t)part[k].ndropped * sizeof *d), nd += part[k].ndropped;
        memcpy(p + np, part[k].pruned, (size_t)part[k].npruned * sizeof *p), np += part[k].npruned;
      }
      o.part = 0, o.parts = 1;
      px_sweep_merge(&part[0], e, ne, d, nd, p, np, o.objective);
      CU_ASSERT_EQUAL_FATAL(px_sweep_complete(&m, &c, &o, &part[0], &err), PX_OK);
      same_top(&all, &part[0], 5);
      same_alternatives(&all, &part[0]);
      for (int k = 0; k < 3; k++) px_sweep_result_free(&part[k]);
      /* the bound never exceeds the simulated step */
      for (int64_t i = 0; i < all.n; i++) {
        px_plan plan;
        double lb = -1;
        CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &all.entries[i].par, &err), PX_OK);
        CU_ASSERT_EQUAL(px_sim_step_bound_s(&plan, &lb, &err), PX_OK);
        CU_ASSERT(lb > 0 && lb <= all.entries[i].sim.step_time_s);
        px_plan_free(&plan);
      }
    }
    px_sweep_result_free(&all);
    px_sweep_result_free(&pruned);
  }
}

/* Whether entry e of r (exact) is on the Pareto front of r's simulated plans: no other uses less memory and runs faster. */
static bool on_front(const px_sweep_result *r, const px_sweep_entry *e) {
  for (int64_t j = 0; j < r->n; j++)
    if (r->entries[j].peak_bytes < e->peak_bytes && r->entries[j].sim.tokens_per_s > e->sim.tokens_per_s) return false;
  return true;
}

/* The entry of r (simulated or pruned) with enumeration index i, or NULL. */
static const px_sweep_entry *entry_of(const px_sweep_result *r, int64_t i) {
  for (int64_t j = 0; j < r->n; j++)
    if (r->entries[j].index == i) return &r->entries[j];
  for (int64_t j = 0; j < r->npruned; j++)
    if (r->pruned[j].index == i) return &r->pruned[j];
  return NULL;
}

/* A sweep for the plots (opts.front) compiles every plan and simulates the best keep, the best of each tp x
 * pp and the plans that can be on the memory/throughput Pareto front; the others are shown by their bound.
 * Against the sweep that simulates every plan: the same plans fit with the same peaks, the same top, the
 * same best of each cell and the same front; a bounded plan is faster at its bound than simulated, on no
 * front; split in parts and merged, the same again. Llama 3 8B on 8 H100s. */
static void test_front_exact(void) {
  px_model m;
  px_cluster c;
  load("llama3-8b", "dgx-h100", 8, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 32, o.fixed.mbs = 1, o.fixed.recompute = PX_RECOMPUTE_NONE;
  o.threads = 2;
  px_err err = {0};
  px_sweep_result all, front, part[2];
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &all, &err), PX_OK);
  o.keep = 5, o.front = true;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &front, &err), PX_OK);
  for (int k = 0; k < 2; k++) { /* in two parts, merged and completed */
    o.part = k, o.parts = 2;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &part[k], &err), PX_OK);
  }
  int64_t ne = part[0].n + part[1].n, nd = part[0].ndropped + part[1].ndropped, np = part[0].npruned + part[1].npruned;
  px_sweep_entry *e = calloc((size_t)ne + 1, sizeof *e), *d = calloc((size_t)nd + 1, sizeof *d), *p = calloc((size_t)np + 1, sizeof *p);
  memcpy(e, part[0].entries, (size_t)part[0].n * sizeof *e), memcpy(e + part[0].n, part[1].entries, (size_t)part[1].n * sizeof *e);
  memcpy(d, part[0].dropped, (size_t)part[0].ndropped * sizeof *d);
  memcpy(d + part[0].ndropped, part[1].dropped, (size_t)part[1].ndropped * sizeof *d);
  memcpy(p, part[0].pruned, (size_t)part[0].npruned * sizeof *p), memcpy(p + part[0].npruned, part[1].pruned, (size_t)part[1].npruned * sizeof *p);
  o.part = 0, o.parts = 1;
  px_sweep_merge(&part[0], e, ne, d, nd, p, np, o.objective);
  CU_ASSERT_EQUAL_FATAL(px_sweep_complete(&m, &c, &o, &part[0], &err), PX_OK);
  for (int v = 0; v < 2; v++) {
    const px_sweep_result *r = v ? &part[0] : &front;
    CU_ASSERT(r->npruned > r->n && r->unsized == 0);         /* most shown by their bound, every plan compiled */
    CU_ASSERT_EQUAL(r->n + r->npruned, all.n);               /* the same plans fit ... */
    CU_ASSERT_EQUAL(r->ndropped, all.ndropped);              /* ... and do not */
    same_top(&all, r, 5);
    int64_t fronts = 0;
    for (int64_t i = 0; i < all.n; i++) {
      const px_sweep_entry *x = &all.entries[i], *y = entry_of(r, x->index);
      CU_ASSERT_FATAL(y != NULL);
      CU_ASSERT_EQUAL(y->peak_bytes, x->peak_bytes);
      if (y->bounded) {
        CU_ASSERT(y->sim.tokens_per_s >= x->sim.tokens_per_s && y->sim.step_time_s <= x->sim.step_time_s);
        CU_ASSERT(!on_front(&all, x)); /* nothing on the front is left at its bound */
      } else {
        CU_ASSERT(y->sim.step_time_s == x->sim.step_time_s);
        CU_ASSERT_EQUAL(on_front(r, y), on_front(&all, x));
        fronts += on_front(r, y);
      }
      /* the best of each tp x pp is simulated */
      bool best = true;
      for (int64_t j = 0; j < all.n && best; j++)
        if (all.entries[j].par.tp == x->par.tp && all.entries[j].par.pp == x->par.pp &&
            all.entries[j].sim.tokens_per_s > x->sim.tokens_per_s)
          best = false;
      if (best) CU_ASSERT(!y->bounded);
    }
    CU_ASSERT(fronts >= 3);
  }
  px_sweep_result_free(&all), px_sweep_result_free(&front), px_sweep_result_free(&part[0]), px_sweep_result_free(&part[1]);
}

/* Failure model by hand: 1024 H100s, MTBF 50,677 h per GPU -> M = 178,161 s;
 * a 70.6B model's checkpoint (2 + 12 bytes a parameter) = 987.75 GB over
 * 128 nodes x 20 GB/s = 0.3859 s; tau = sqrt(2 d M) - d; waste d/tau + (tau/2 + R)/M. */
static void test_train_time_by_hand(void) {
  px_model m;
  px_cluster c;
  load("llama3-70b", "dgx-h100", 1024, &m, &c);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 8, p.pp = 4, p.zero = 1, p.mbs = 1, p.gbs = 512;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  px_train_time t;
  double mtbf_h = 16384.0 * 54 * 24 / 419, R = 900;
  px_train_time_of(&plan, 1e6, 15e12, 2.0, mtbf_h, R, false, &t);
  double M = mtbf_h * 3600 / 1024, bytes = 70553706496.0 * 14, d = bytes / (128 * 20e9);
  PX_ASSERT_REL(t.cluster_mtbf_s, M, 1e-12);
  PX_ASSERT_REL(t.checkpoint_bytes, bytes, 1e-12);
  PX_ASSERT_REL(t.checkpoint_write_s, d, 1e-12);
  double tau = sqrt(2 * d * M) - d;
  PX_ASSERT_REL(t.checkpoint_interval_s, tau, 1e-12);
  double good = 1 - (d / tau + (tau / 2 + R) / M);
  PX_ASSERT_REL(t.goodput, good, 1e-12);
  PX_ASSERT_REL(t.days, 15e12 / 1e6 / good / 86400, 1e-12);
  PX_ASSERT_REL(t.gpu_hours, 15e12 / 1e6 / good / 3600 * 1024, 1e-12);
  PX_ASSERT_REL(t.cost_usd, t.gpu_hours * 2.0, 1e-12);
  PX_ASSERT_REL(t.checkpoint_blocked_s, d, 1e-12);
  /* no failures: goodput 1 */
  px_train_time_of(&plan, 1e6, 15e12, 2.0, 0, R, false, &t);
  PX_ASSERT_REL(t.goodput, 1.0, 1e-15);
  PX_ASSERT_REL(t.days, 15e12 / 1e6 / 86400, 1e-12);
  /* Async: training stops for the snapshot only. The largest GPU holds a
   * stage's bf16 parameters / tp 8 and 12 bytes a parameter / tp 8 / dp 32
   * of optimizer states: 70.55B / 32 x (2 + 12 / 32) = 5.24 GB, a few
   * percent more on the stage with an embedding; at the dgx-h100 host link
   * of 44.8 GB/s a GPU (tests/data/host_link.csv) that is ~0.12 s, against the 0.386 s write. */
  double good_sync = good;
  px_train_time_of(&plan, 1e6, 15e12, 2.0, mtbf_h, R, true, &t);
  double snap = t.checkpoint_snapshot_bytes, s = snap / 44.8e9;
  CU_ASSERT(snap > 70553706496.0 / 32 * (2 + 12.0 / 32) && snap < 1.1 * 70553706496.0 / 32 * (2 + 12.0 / 32));
  PX_ASSERT_REL(t.checkpoint_snapshot_s, s, 1e-12);
  PX_ASSERT_REL(t.checkpoint_blocked_s, s, 1e-12);
  PX_ASSERT_REL(t.checkpoint_write_s, d, 1e-12); /* still reported */
  double tau_a = sqrt(2 * s * M) - s;            /* > d: one write in flight is no constraint here */
  CU_ASSERT(tau_a > d);
  PX_ASSERT_REL(t.checkpoint_interval_s, tau_a, 1e-12);
  double good_a = 1 - (s / tau_a + (tau_a / 2 + d + R) / M);
  PX_ASSERT_REL(t.goodput, good_a, 1e-12);
  CU_ASSERT(good_a > good_sync);
  /* fp8 keeps the same states (its weight copies are remade each step, not snapshotted) */
  {
    px_parallel p8 = plan.par;
    p8.precision = PX_PREC_FP8;
    px_plan plan8;
    px_err err8 = {0};
    CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan8, &plan.model, &plan.cluster, &p8, &err8), PX_OK);
    px_states st8;
    px_plan_states(&plan8, 0, &st8);
    CU_ASSERT(st8.fp8_copy_bytes > 0);
    px_train_time t8;
    px_train_time_of(&plan8, 1e6, 15e12, 2.0, mtbf_h, R, true, &t8);
    PX_ASSERT_REL(t8.checkpoint_snapshot_bytes, snap, 1e-12);
    px_plan_free(&plan8);
  }
  /* a cluster without a host link: HBM bandwidth bounds the copy */
  plan.cluster.host_pcie_bytes_per_s = 0;
  px_train_time_of(&plan, 1e6, 15e12, 2.0, mtbf_h, R, true, &t);
  PX_ASSERT_REL(t.checkpoint_snapshot_s, snap / 3350e9, 1e-12);
  /* the interval is at least one write: with a free snapshot it is the write */
  plan.cluster.gpu.hbm_bytes_per_s = 1e30;
  px_train_time_of(&plan, 1e6, 15e12, 2.0, mtbf_h, R, true, &t);
  PX_ASSERT_REL(t.checkpoint_interval_s, d, 1e-12);
  px_plan_free(&plan);
}

/* GPT-3 175B with ZeRO-3 and no model parallelism, as Megatron SC'21 compares
 * it (batch 1536): on 384, 768 and 1536 A100s a plan fits, as it does in
 * DeepSpeed and FSDP (each layer's full gradient and gathered parameters
 * live only around their use). */
static void test_gpt3_zero3_fits(void) {
  int64_t sizes[] = {384, 768, 1536};
  for (int i = 0; i < 3; i++) {
    px_model m;
    px_cluster c;
    load("gpt3-175b", "dgx-a100", sizes[i], &m, &c);
    px_sweep_opts o;
    px_sweep_opts_init(&o);
    o.fixed.gbs = 1536, o.fixed.tp = 1, o.fixed.pp = 1, o.fixed.zero = 3;
    o.threads = 2;
    px_sweep_result r;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
    if (r.n < 1) fprintf(stderr, "\n  GPT-3 175B ZeRO-3 on %lld A100s: no plan fits\n", (long long)sizes[i]);
    CU_ASSERT(r.n >= 1);
    for (int64_t k = 0; k < r.n; k++) CU_ASSERT(r.entries[k].sim.fits && r.entries[k].par.zero == 3);
    px_sweep_result_free(&r);
  }
}

/* ---- re-planning for fewer ranks (sim/replan.h) ---- */

/* A backend for px_replan_best: it logs the plans offered and refuses the
 * first `refuse` of each ranking (-1: all), with status `fail` instead of
 * PX_ERR_INPUT when that is set. */
typedef struct {
  int refuse;
  px_status fail;
  int n;
  char *seen[4]; /* the first plans offered: their choices as JSON */
} backend_log;

static char *par_text(const px_parallel *p) {
  cJSON *j = px_parallel_to_json(p);
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  return s;
}

static px_status backend(void *ctx, const px_plan *plan, int64_t ranks, int64_t refused, px_err *why) {
  backend_log *l = ctx;
  CU_ASSERT_EQUAL(plan->grid.world, ranks);
  if (l->n < 4) l->seen[l->n] = par_text(&plan->par);
  l->n++;
  if (l->refuse >= 0 && refused >= l->refuse) return PX_OK;
  return px_err_set(why, l->fail ? l->fail : PX_ERR_INPUT, "not on this backend");
}

static void backend_log_free(backend_log *l) {
  for (int i = 0; i < 4 && i < l->n; i++) cJSON_free(l->seen[i]);
}

/* tiny trained on 8 GPUs as tp 2 x pp 2 x dp 2, 16 sequences of 16 tokens
 * in fp32 with worst-case MoE buffers (a run's): o gets that training and
 * keeps tp 2 and pp 2. */
static void replan_setup(px_model *m, px_cluster *c, px_replan_opts *o) {
  load("tiny", "dgx-h100", 8, m, c);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2, p.pp = 2, p.gbs = 16, p.seq = 16, p.precision = PX_PREC_FP32, p.moe_buffers = PX_MOE_BUF_WORST;
  px_parallel_resolve(&p, m, c);
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, m, c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(plan.grid.dp, 2);
  memset(o, 0, sizeof *o);
  px_parallel_unset(&o->fixed);
  o->fixed.tp = 2, o->fixed.pp = 2;
  o->train = plan.par;
  px_plan_free(&plan);
}

/* Fewer ranks: the most that a plan fits, the training's global batch,
 * sequence, precision and MoE buffers kept; tp 2 and pp 2 kept where the ranks allow
 * them (4), dropped where they do not (5, 6). */
static void test_replan_fewer_ranks(void) {
  px_model m;
  px_cluster c;
  px_replan_opts o;
  replan_setup(&m, &c, &o);
  for (int64_t max = 4; max <= 6; max++) {
    o.max_ranks = max, o.min_ranks = 1;
    px_replan r;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_replan_best(&m, &c, &o, &r, &err), PX_OK);
    CU_ASSERT(r.ranks >= 1 && r.ranks <= max);
    CU_ASSERT_EQUAL(r.plan.grid.world, r.ranks);
    CU_ASSERT_EQUAL(r.cluster.gpus, r.ranks);
    CU_ASSERT_EQUAL(r.plan.par.gbs, 16);
    CU_ASSERT_EQUAL(r.plan.par.seq, 16);
    CU_ASSERT_EQUAL(r.plan.par.precision, PX_PREC_FP32);
    CU_ASSERT_EQUAL(r.plan.par.moe_buffers, PX_MOE_BUF_WORST);
    CU_ASSERT_EQUAL(r.refused, 0);
    CU_ASSERT_EQUAL(r.relaxed, r.ranks % 4 != 0);
    if (!r.relaxed) CU_ASSERT(r.plan.par.tp == 2 && r.plan.par.pp == 2);
    if (max == 4) CU_ASSERT(r.ranks == 4 && r.plan.grid.dp == 1);
    px_plan_free(&r.plan);
  }
}

/* The backend refuses the best plan: the second of the ranking, and the
 * count of those refused. */
static void test_replan_refused(void) {
  px_model m;
  px_cluster c;
  px_replan_opts o;
  replan_setup(&m, &c, &o);
  px_parallel_unset(&o.fixed); /* a ranking of many plans */
  o.max_ranks = 4, o.min_ranks = 4;
  o.runs = backend;
  backend_log all = {.refuse = 0}, first = {.refuse = 1};
  px_replan r;
  px_err err = {0};
  o.runs_ctx = &all;
  CU_ASSERT_EQUAL_FATAL(px_replan_best(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT(all.n == 1 && r.refused == 0);
  px_plan_free(&r.plan);
  o.runs_ctx = &first;
  CU_ASSERT_EQUAL_FATAL(px_replan_best(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(first.n, 2);
  CU_ASSERT_EQUAL(r.refused, 1);
  CU_ASSERT_STRING_EQUAL(first.seen[0], all.seen[0]); /* the best, refused */
  CU_ASSERT(strcmp(first.seen[1], first.seen[0]) != 0);
  char *taken = par_text(&r.plan.par);
  CU_ASSERT_STRING_EQUAL(taken, first.seen[1]);
  CU_ASSERT_EQUAL(r.plan.par.gbs, 16);
  cJSON_free(taken);
  px_plan_free(&r.plan);
  backend_log_free(&all);
  backend_log_free(&first);
}

/* No plan: every one refused, none fits, or the backend's own failure. */
static void test_replan_none(void) {
  px_model m;
  px_cluster c;
  px_replan_opts o;
  replan_setup(&m, &c, &o);
  o.max_ranks = 4, o.min_ranks = 1;
  o.runs = backend;
  backend_log none = {.refuse = -1};
  o.runs_ctx = &none;
  px_replan r;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_replan_best(&m, &c, &o, &r, &err), PX_ERR_RUNTIME);
  CU_ASSERT_STRING_EQUAL(err.msg, "no plan of tiny fits on 1 to 4 ranks");
  CU_ASSERT(none.n > 4);
  backend_log_free(&none);

  backend_log failing = {.refuse = -1, .fail = PX_ERR_RUNTIME};
  o.runs_ctx = &failing;
  CU_ASSERT_EQUAL(px_replan_best(&m, &c, &o, &r, &err), PX_ERR_RUNTIME);
  CU_ASSERT_STRING_EQUAL(err.msg, "not on this backend");
  CU_ASSERT_EQUAL(failing.n, 1); /* the first failure ends it */
  backend_log_free(&failing);

  px_model big;
  px_cluster big_c;
  load("llama3-405b", "dgx-h100", 8, &big, &big_c);
  o.train.seq = 8192;
  o.max_ranks = 2, o.min_ranks = 1;
  o.runs = NULL;
  CU_ASSERT_EQUAL(px_replan_best(&big, &big_c, &o, &r, &err), PX_ERR_RUNTIME);
  CU_ASSERT_STRING_EQUAL(err.msg, "no plan of llama3-405b fits on 1 to 2 ranks");
}

/* Activation offload in the sweep: Llama 3 70B on 64 GB200s (fp8 current scaling, seq 8192, gbs 256; tp 1, pp 1
 * fixed, the whole sweep's best split too) is best as NVIDIA's Megatron-Bridge GB200 recipe runs it
 * (tests/data/megatron_bridge_blackwell.csv: Megatron-FSDP over 64, mbs 2, cpu_offloading_num_layers 40), the
 * sweep offloading as few layers as fit (40: 3.63 GiB a layer against the 145 GiB excess); pruned or not, the
 * same; and a fixed 0 keeps every plan on the GPU (mbs 1 then). */
static void test_activation_offload_swept(void) {
  px_model m;
  px_cluster c;
  load("llama3-70b", "gb200-nvl72", 64, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 256, o.fixed.seq = 8192, o.fixed.precision = PX_PREC_FP8, o.fixed.fp8_recipe = PX_FP8_CURRENT;
  o.fixed.tp = 1, o.fixed.pp = 1; /* the recipe's split (the full sweep's best too): a short sweep under ASan */
  o.threads = 2;
  px_err err = {0};
  for (int keep = 0; keep < 2; keep++) {
    o.keep = keep ? 3 : 0;
    px_sweep_result r;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
    CU_ASSERT_FATAL(r.n > 0);
    const px_parallel *b = &r.entries[0].par;
    CU_ASSERT(b->tp == 1 && b->pp == 1 && b->dp == 64 && b->zero == 3 && b->mbs == 2);
    CU_ASSERT_EQUAL(b->offload_act_layers, 40);
    px_sweep_result_free(&r);
  }
  o.keep = 3, o.fixed.offload_act_layers = 0;
  px_sweep_result r;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  for (int64_t i = 0; i < r.n; i++) CU_ASSERT_EQUAL(r.entries[i].par.offload_act_layers, 0);
  CU_ASSERT(r.n > 0 && r.entries[0].par.mbs == 1); /* mbs 2 fits only with offload */
  px_sweep_result_free(&r);
}

/* EP overlap asked for (`overlap` ep) applies to every plan it can (ep > 1 and a schedule Megatron-Core merges),
 * the rest swept without it rather than refused: a Qwen3-30B-A3B sweep of ep on two nodes refuses no more plans
 * with it and gives every ep > 1 plan the overlap, and its best plan beats the best without the overlap. Not asked
 * for, no plan has it (a sweep does not search it: twice the MoE plans, DeepSeek-V3's README sweep 3x slower). */
static void test_ep_overlap_swept(void) {
  px_model m;
  px_cluster c;
  load("qwen3-30b-a3b", "dgx-h100", 16, &m, &c);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 256, o.fixed.precision = PX_PREC_BF16, o.fixed.tp = 1, o.fixed.pp = 1, o.fixed.zero = 1;
  o.fixed.mbs = 1, o.fixed.recompute = PX_RECOMPUTE_NONE; /* short, for the ASan suite: the ep values searched */
  o.keep = 0;
  px_err err = {0};
  double best[2] = {0};
  int64_t invalid[2] = {0};
  for (int ov = 0; ov < 2; ov++) {
    o.fixed.overlap = ov ? PX_OVERLAP_DEFAULT | PX_OVERLAP_EP : -1;
    px_sweep_result r;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
    CU_ASSERT_FATAL(r.n > 1);
    for (int64_t i = 0; i < r.n; i++) {
      const px_parallel *q = &r.entries[i].par;
      CU_ASSERT_EQUAL((q->overlap & PX_OVERLAP_EP) != 0, ov && q->ep > 1);
    }
    best[ov] = r.entries[0].sim.tokens_per_s, invalid[ov] = r.invalid;
    px_sweep_result_free(&r);
  }
  CU_ASSERT(best[1] > 1.05 * best[0]);
  CU_ASSERT_EQUAL(invalid[1], invalid[0]); /* ep 1's plans (which do not fit here) swept, not refused */
}

int main(void) {
  static const px_test tests[] = {
      {"a small model on one node: pure data parallel wins", test_small_model_pure_dp},
      {"plans that do not fit are never ranked", test_never_ranks_infeasible},
      {"the schedule is searched; zero-bubble beats 1F1B on Llama 3 405B's split", test_schedules_searched},
      {"fixed flags stay fixed; the memory objective", test_fixed_flags},
      {"split in parts and merged: same ranking", test_parts_merge},
      {"pruned by the bound: the same top plans and alternatives, every objective, split or not", test_pruned_same_ranking},
      {"a sweep for the plots: the top, the heatmap's bests and the Pareto front exact, split or not", test_front_exact},
      {"time to train, checkpoints and goodput by hand", test_train_time_by_hand},
      {"GPT-3 175B with ZeRO-3, tp 1, pp 1 fits on 384, 768 and 1536 A100s", test_gpt3_zero3_fits},
      {"activation offload: Llama 3 70B on 64 GB200s is best as NVIDIA's recipe, 40 layers offloaded",
       test_activation_offload_swept},
      {"EP overlap asked for: on every plan it applies to, the rest without it", test_ep_overlap_swept},
      {"re-planned for fewer ranks: the global batch, sequence, precision and MoE buffers kept", test_replan_fewer_ranks},
      {"re-planned: a plan the backend refuses gives way to the next", test_replan_refused},
      {"re-planned: no plan on any rank count, or the backend's failure, is an error", test_replan_none},
  };
  return px_test_main("sweep", tests, sizeof tests / sizeof tests[0]);
}
