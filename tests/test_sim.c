/* Simulator, by hand: bandwidth sharing, the exact pipeline bubble with free
 * communication and uniform stages, determinism, cost flat in DP and TP,
 * hybrid sharding's two levels on their own links, overlap, contention,
 * offload, CP, MoE and the straggler. The published figures it reproduces
 * are tests/validation/'s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/check.h"
#include "plan/plan.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/host.h"
#include "sim/network.h"
#include "sim/sim.h"
#include "sim/straggler.h"
#include "tests/testplan.h"
#include "tests/testutil.h"

/* ---- network: hand-computed sharing ---- */

enum { EV_JOIN = 1, EV_DONE = 2 };

/* Runs the engine; records when each tagged flow ends. */
static void run_net(px_engine *e, px_net *n, double *end_s) {
  px_event ev;
  while (px_engine_pop(e, &ev)) {
    if (ev.kind == EV_JOIN) px_net_on_join(n, (int32_t)ev.a);
    uint64_t tag, start;
    if (ev.kind == EV_DONE && px_net_on_done(n, (int32_t)ev.a, ev.b, &tag, &start)) end_s[tag] = (double)e->now_ns * 1e-9;
  }
}

static void test_network_sharing(void) {
  px_engine e;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_engine_init(&e, 16, &err), PX_OK);
  px_net *n = px_net_new(&e, 2, EV_JOIN, EV_DONE, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(n);
  double end[4] = {0};
  /* One flow: 1 GB at 1 GB/s after 1 ms latency: 1.001 s. */
  px_flow_spec one = {.res = {0}, .bytes = {1e9}, .bw = {1e9}, .nres = 1, .latency_s = 1e-3};
  px_net_start(n, &one, 0);
  run_net(&e, n, end);
  PX_ASSERT_REL(end[0], 1.001, 1e-9);
  /* Two flows on the same link from t: each gets half, both end at t + 2 s. */
  px_flow_spec a = {.res = {0}, .bytes = {1e9}, .bw = {1e9}, .nres = 1};
  double t0 = (double)e.now_ns * 1e-9;
  px_net_start(n, &a, 1);
  px_net_start(n, &a, 2);
  run_net(&e, n, end);
  PX_ASSERT_REL(end[1] - t0, 2.0, 1e-9);
  PX_ASSERT_REL(end[2] - t0, 2.0, 1e-9);
  /* A flow that also needs a second, slower link progresses at its pace:
   * 1 GB over link 1 at 0.5 GB/s alone takes 2 s; the first flow on link 0
   * then shares link 0 only while both are on it. Flow 1: link 0 (1 GB at
   * 1 GB/s); flow 2: links 0 and 1 (1 GB each, 1 GB/s and 0.5 GB/s).
   * Shared link 0 gives each 0.5 GB/s: flow 2 runs at min(0.5/1, 0.5/1) =
   * 0.5 per s, flow 1 at 0.5 per s, so both reach 100% at 2 s. */
  t0 = (double)e.now_ns * 1e-9;
  px_flow_spec b = {.res = {0, 1}, .bytes = {1e9, 1e9}, .bw = {1e9, 0.5e9}, .nres = 2};
  px_net_start(n, &a, 1);
  px_net_start(n, &b, 2);
  run_net(&e, n, end);
  PX_ASSERT_REL(end[1] - t0, 2.0, 1e-9);
  PX_ASSERT_REL(end[2] - t0, 2.0, 1e-9);
  /* A late joiner: flow 1 alone for 0.5 s (half done), then flow 2 joins;
   * flow 1 has 0.5 GB left at 0.5 GB/s: ends at 1.5 s; flow 2 moved 0.5 GB
   * by then and finishes the rest alone at 2.0 s. */
  t0 = (double)e.now_ns * 1e-9;
  px_net_start(n, &a, 1);
  CU_ASSERT_EQUAL(px_engine_push(&e, e.now_ns + 500000000ull, 99, 0, 0, &err), PX_OK);
  px_event ev;
  while (px_engine_pop(&e, &ev)) {
    if (ev.kind == 99) {
      px_net_start(n, &a, 2);
      continue;
    }
    if (ev.kind == EV_JOIN) px_net_on_join(n, (int32_t)ev.a);
    uint64_t tag, start;
    if (ev.kind == EV_DONE && px_net_on_done(n, (int32_t)ev.a, ev.b, &tag, &start)) end[tag] = (double)e.now_ns * 1e-9;
  }
  PX_ASSERT_REL(end[1] - t0, 1.5, 1e-8);
  PX_ASSERT_REL(end[2] - t0, 2.0, 1e-8);
  /* A flow on a reused id is not ended by its id's stale events: flows 1 (1 GB) and 2 (2 GB)
   * share link 0 and flow 2 is re-rated when flow 1 ends at 2 s (its first end event, at
   * 4 s, goes stale); flow 2 ends at 3 s, and flow 3 (5 GB), started then on flow 2's id,
   * ends at 8 s, not at 4 s. */
  t0 = (double)e.now_ns * 1e-9;
  px_flow_spec two = {.res = {0}, .bytes = {2e9}, .bw = {1e9}, .nres = 1};
  px_flow_spec five = {.res = {0}, .bytes = {5e9}, .bw = {1e9}, .nres = 1};
  px_net_start(n, &a, 1);
  px_net_start(n, &two, 2);
  while (px_engine_pop(&e, &ev)) {
    if (ev.kind == EV_JOIN) px_net_on_join(n, (int32_t)ev.a);
    uint64_t tag, start;
    if (ev.kind != EV_DONE || !px_net_on_done(n, (int32_t)ev.a, ev.b, &tag, &start)) continue;
    end[tag] = (double)e.now_ns * 1e-9;
    if (tag == 2) px_net_start(n, &five, 3);
  }
  PX_ASSERT_REL(end[1] - t0, 2.0, 1e-8);
  PX_ASSERT_REL(end[2] - t0, 3.0, 1e-8);
  PX_ASSERT_REL(end[3] - t0, 8.0, 1e-8);
  px_net_free(n);
  px_engine_deinit(&e);
}

/* ---- the exact bubble ---- */

static double uniform_cost(void *ctx, int64_t stage, px_block_kind kind) {
  (void)ctx, (void)stage;
  switch (kind) {
    case PX_BLOCK_LAYER_FWD: return 1e-3;
    case PX_BLOCK_LAYER_BWD: return 2e-3;
    default: return 0.0;
  }
}

static px_model gpt(int64_t layers) {
  px_model m;
  px_model_init(&m);
  snprintf(m.name, sizeof m.name, "gpt-test");
  m.layers = layers, m.hidden = 256, m.heads = 8, m.kv_heads = 8, m.head_dim = 32, m.ffn_hidden = 1024;
  m.vocab = 51200, m.seq_len = 256, m.max_positions = 256, m.bias = m.qkv_bias = m.tied_embeddings = true;
  return m;
}

static void test_bubble_exact(void) {
  int64_t pps[] = {2, 4, 8};
  int64_t ms[] = {1, 4, 8, 32};
  for (int sched = 0; sched <= PX_SCHED_INTERLEAVED; sched++) {
    for (size_t i = 0; i < 3; i++) {
      for (size_t j = 0; j < 4; j++) {
        int64_t pp = pps[i], m = ms[j], v = sched == PX_SCHED_INTERLEAVED ? 2 : 1;
        if (sched == PX_SCHED_INTERLEAVED && m % pp) continue;
        px_model model = gpt(pp * v * 2);
        px_parallel p;
        px_parallel_unset(&p);
        p.pp = pp, p.tp = 1, p.mbs = 1, p.gbs = m, p.schedule = sched, p.vpp = v;
        px_plan plan;
        px_err err = {0};
        CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &model, "dgx-a100", pp, &p, &err), PX_OK);
        px_sim_opts o = {.comm_free = true, .block_cost = uniform_cost};
        px_sim_result r;
        CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
        double want = (double)(pp - 1) / (double)(v * m + pp - 1);
        if (r.bubble_fraction < want - 1e-9 || r.bubble_fraction > want + 1e-9)
          fprintf(stderr, "\n  %s pp %lld m %lld: bubble %.9f, formula %.9f\n", px_schedule_names[sched],
                  (long long)pp, (long long)m, r.bubble_fraction, want);
        PX_ASSERT_REL(r.bubble_fraction + 1.0, want + 1.0, 1e-9);
        /* And the step: (v m + p - 1) chunk-units of forward + backward (2 layers x 3 ms). */
        PX_ASSERT_REL(r.step_time_s, (double)(v * m + pp - 1) * 6e-3, 1e-9);
        px_sim_result_free(&r);
        px_plan_free(&plan);
      }
    }
  }
}

/* Interleaving with micro-batch counts pp does not divide (Megatron-Core's
 * micro-batch groups) and uneven chunks (layers pp vpp does not divide),
 * free communication and equal layers: with even stages the simulated
 * bubble is (p-1)/(v m + p-1) exactly, whatever m; with uneven ones
 * px_plan_bubble_analytic is an upper bound (it charges the fill and drain
 * with all the other stages' work), within 8 points here. */
static void test_bubble_uneven(void) {
  static const struct {
    int64_t layers, pp, v, m;
  } cases[] = {{16, 4, 2, 4}, {16, 4, 2, 5}, {16, 4, 2, 6}, {16, 4, 2, 7}, {16, 4, 2, 9}, {16, 4, 2, 13},
               {14, 4, 2, 8}, {13, 4, 2, 8}, {13, 4, 3, 8}, {14, 4, 3, 11}, {15, 2, 3, 5}, {126, 16, 2, 16},
               {126, 16, 2, 17}, {126, 16, 2, 32}, {126, 16, 3, 24}, {126, 16, 4, 19}, {126, 16, 1, 16}, {13, 4, 1, 8}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    px_model model = gpt(cases[i].layers);
    px_parallel p;
    px_parallel_unset(&p);
    p.pp = cases[i].pp, p.tp = 1, p.mbs = 1, p.gbs = cases[i].m, p.vpp = cases[i].v;
    p.schedule = cases[i].v > 1 ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &model, "dgx-a100", cases[i].pp, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
    px_sim_opts o = {.comm_free = true, .block_cost = uniform_cost};
    px_sim_result r;
    px_status st = px_sim_run(&plan, &o, &r, &err);
    if (st) fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    double want = px_plan_bubble_analytic(&plan);
    int64_t pp = cases[i].pp, v = cases[i].v, m = cases[i].m;
    if (cases[i].layers % (pp * v) == 0) {
      PX_ASSERT_REL(want + 1.0, (double)(pp - 1) / (double)(v * m + pp - 1) + 1.0, 1e-12);
      PX_ASSERT_REL(r.bubble_fraction + 1.0, want + 1.0, 1e-9);
    } else {
      CU_ASSERT(r.bubble_fraction <= want + 1e-9 && r.bubble_fraction > want - 0.08);
    }
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
}

/* Zero-bubble schedules with free communication, a layer's F, B and W
 * taking f, b and w (embedding and head free): the simulated bubble is
 * px_plan_bubble_analytic's, Qi et al.'s (ICLR 2024, Table 2) bubble of
 * (p-1)(f+b-w) per stage for ZB-H1 and, for ZB-H2, the (p-1) f stagger of
 * its parallelogram a synchronised optimizer step leaves (the paper's
 * post-validation removes it). 1F1B's is (p-1)(f+b+w). */
typedef struct {
  double f, b, w;
} fbw_cost;

static double zb_cost(void *ctx, int64_t stage, px_block_kind kind) {
  const fbw_cost *c = ctx;
  (void)stage;
  switch (kind) {
    case PX_BLOCK_LAYER_FWD: return c->f;
    case PX_BLOCK_LAYER_BWD: return c->b;
    case PX_BLOCK_LAYER_BWD_W: return c->w;
    default: return 0.0;
  }
}

static void test_bubble_zero_bubble(void) {
  static const fbw_cost costs[] = {{1e-3, 1e-3, 1e-3}, {1e-3, 1.4e-3, 0.6e-3}, {1e-3, 1.2e-3, 0.8e-3},
                                   {1e-3, 2e-3, 0.5e-3}, {1e-3, 1e-3, 2e-3}};
  static const int64_t pps[] = {2, 4, 8}, ms[] = {1, 3, 5, 8, 11, 16, 33};
  for (int sched = PX_SCHED_1F1B; sched < PX_SCHED_COUNT; sched++) {
    if (sched == PX_SCHED_INTERLEAVED) continue;
    for (size_t c = 0; c < sizeof costs / sizeof *costs; c++)
      for (size_t i = 0; i < sizeof pps / sizeof *pps; i++)
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
          int64_t pp = pps[i], m = ms[j];
          px_model model = gpt(pp * 2);
          px_parallel p;
          px_parallel_unset(&p);
          p.pp = pp, p.tp = 1, p.mbs = 1, p.gbs = m, p.schedule = sched;
          px_plan plan;
          px_err err = {0};
          CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &model, "dgx-a100", pp, &p, &err), PX_OK);
          CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
          fbw_cost k = costs[c];
          if (sched == PX_SCHED_1F1B) k.b += k.w, k.w = 0; /* one backward block */
          px_sim_opts o = {.comm_free = true, .block_cost = zb_cost, .block_cost_ctx = &k};
          px_sim_result r;
          CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
          double f = 2 * costs[c].f, b = 2 * costs[c].b, w = 2 * costs[c].w; /* a stage's two layers */
          /* per stage: the paper's steady-state idle, at least F's (p-1) f to the last stage; with
           * few micro-batches the fill and drain, less the W hidden in them */
          double steady = sched == PX_SCHED_1F1B ? f + b + w : sched == PX_SCHED_ZB_H1 ? f + b - w : f + b - 2 * w;
          double idle = (double)(pp - 1) * (steady > f ? steady : f);
          double few = (double)(pp - 1) * (f + b) - (double)(m - 1) * (b < w ? b : w);
          if (sched != PX_SCHED_1F1B && few > idle) idle = few;
          double want = idle / ((double)m * (f + b + w) + idle);
          if (fabs(r.bubble_fraction - want) > 1e-9)
            fprintf(stderr, "\n  %s pp %lld m %lld f %g b %g w %g: bubble %.9f, formula %.9f\n", px_schedule_names[sched],
                    (long long)pp, (long long)m, f, b, w, r.bubble_fraction, want);
          PX_ASSERT_REL(r.bubble_fraction + 1.0, want + 1.0, 1e-9);
          px_sim_result_free(&r);
          px_plan_free(&plan);
        }
  }
}

/* Layer blocks timed by their FLOPs (1 TFLOP/s), the rest free: the
 * costs px_plan_bubble_analytic assumes for a zero-bubble schedule. */
static double flops_cost(void *ctx, int64_t stage, px_block_kind kind) {
  const px_plan *plan = ctx;
  (void)stage;
  const double *fl = plan->blocks[kind].flops;
  switch (kind) {
    case PX_BLOCK_LAYER_FWD:
    case PX_BLOCK_LAYER_FWD_KEPT: return fl[PX_PHASE_FWD] * 1e-12;
    case PX_BLOCK_LAYER_BWD:
    case PX_BLOCK_LAYER_BWD_KEPT: return (fl[PX_PHASE_BWD] + fl[PX_PHASE_RECOMPUTE]) * 1e-12;
    case PX_BLOCK_LAYER_BWD_W: return fl[PX_PHASE_BWD] * 1e-12;
    default: return 0.0;
  }
}

static void test_bubble_zb_analytic(void) {
  for (int sched = PX_SCHED_ZB_H1; sched <= PX_SCHED_ZB_H2; sched++)
    for (int64_t m = 2; m <= 18; m += 4)
      for (int rc = PX_RECOMPUTE_NONE; rc <= PX_RECOMPUTE_COUNT; rc++) { /* COUNT: full of 1 layer a stage */
        if (rc == PX_RECOMPUTE_OP) continue; /* refused on a model with biases */
        px_model model = gpt(8);
        px_parallel p;
        px_parallel_unset(&p);
        p.pp = 4, p.tp = 1, p.mbs = 1, p.gbs = m, p.schedule = sched, p.recompute = rc;
        if (rc == PX_RECOMPUTE_COUNT)
          p.recompute = PX_RECOMPUTE_FULL, p.recompute_method = PX_RECOMPUTE_BLOCK, p.recompute_layers = 1;
        px_plan plan;
        px_err err = {0};
        CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &model, "dgx-a100", 4, &p, &err), PX_OK);
        px_sim_opts o = {.comm_free = true, .block_cost = flops_cost, .block_cost_ctx = &plan};
        px_sim_result r;
        CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
        PX_ASSERT_REL(r.bubble_fraction + 1.0, px_plan_bubble_analytic(&plan) + 1.0, 1e-6); /* ns clocks */
        px_sim_result_free(&r);
        px_plan_free(&plan);
      }
}

/* Partial recomputation (Megatron's block method): the step recomputes only the layers it covers, so its
 * recomputation time is N of the stage's 32 layers' share of full recomputation's (the same blocks, TP-free). */
static void test_recompute_block_time(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double full_s = 0;
  for (int64_t n = 0; n <= 24; n += 8) { /* 0: every layer (full) */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 1, p.dp = 8, p.zero = 1, p.mbs = 1, p.gbs = 16, p.recompute = PX_RECOMPUTE_FULL;
    if (n) p.recompute_method = PX_RECOMPUTE_BLOCK, p.recompute_layers = n;
    px_plan plan;
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    if (!n) full_s = r.breakdown.recompute_s;
    CU_ASSERT(full_s > 0);
    if (n) PX_ASSERT_REL(r.breakdown.recompute_s, full_s * (double)n / 32.0, 1e-6);
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
}

/* --bf16-layers-start/end under nvfp4: the layers kept unquantized run their GEMMs at the bf16 peak, so the step
 * lies strictly between all-nvfp4's and bf16's, and with every layer kept it is bf16's to the nanosecond. */
static void test_bf16_layers_time(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  const struct {
    int precision;
    int64_t start, end;
  } runs[] = {{PX_PREC_BF16, 0, 0}, {PX_PREC_NVFP4, 0, 0}, {PX_PREC_NVFP4, 2, 8}, {PX_PREC_NVFP4, 0, 32}};
  double t[4] = {0};
  for (int i = 0; i < 4; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 1, p.dp = 8, p.zero = 1, p.mbs = 1, p.gbs = 16, p.precision = runs[i].precision;
    p.bf16_layers_start = runs[i].start, p.bf16_layers_end = runs[i].end;
    px_plan plan;
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "gb200-nvl72", 8, &p, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    t[i] = r.step_time_s;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT(t[1] < t[2] && t[2] < t[0]);
  CU_ASSERT_EQUAL(t[3], t[0]);
}

/* ---- determinism, consistency, symmetry ---- */

static void sim_llama(const char *cluster, int64_t gpus, int64_t tp, int64_t pp, int64_t dp, px_sim_result *r,
                      px_plan *plan) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = tp, p.pp = pp, p.dp = dp, p.mbs = 1, p.gbs = dp * 16, p.zero = dp > 1 ? 1 : 0;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(plan, &m, cluster, gpus, &p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, NULL, r, &err), PX_OK);
}

static void test_determinism_and_contract(void) {
  px_sim_result a, b;
  px_plan pa, pb;
  sim_llama("dgx-h100", 64, 2, 4, 8, &a, &pa);
  sim_llama("dgx-h100", 64, 2, 4, 8, &b, &pb);
  CU_ASSERT(memcmp(&a.step_time_s, &b.step_time_s, sizeof a.step_time_s) == 0);
  CU_ASSERT_EQUAL(a.events, b.events);
  CU_ASSERT(memcmp(a.stages, b.stages, (size_t)a.nstages * sizeof *a.stages) == 0);
  PX_ASSERT_REL(a.tokens_per_s, 8.0 * 16 * 8192 / a.step_time_s, 1e-12);
  CU_ASSERT(a.mfu > 0.1 && a.mfu < 1.0);
  CU_ASSERT(a.hfu >= a.mfu);
  CU_ASSERT(a.comm_exposed_s >= 0 && a.step_time_comm_free_s <= a.step_time_s);
  CU_ASSERT(a.bubble_fraction > 0 && a.bubble_fraction < 0.5);
  PX_ASSERT_REL(a.model_tflops_per_gpu * 1e12 * 64 * a.step_time_s, pa.model_flops_per_step, 1e-9);
  px_sim_result_free(&a);
  px_sim_result_free(&b);
  px_plan_free(&pa);
  px_plan_free(&pb);
}

/* Context parallelism on one model and split, llama3-8b at 64K tokens on
 * 16 H100s (tp 4 x cp 4): the ring and the all-gather do the same attention
 * work (the same step with free communication), but the ring overlaps its
 * K/V hops with the attention blocks while the all-gather's collectives
 * stand alone, so the ring exposes less; a2a's all-to-alls (tp 1 x cp 8 in
 * a node) are exposed too. */
static void test_context_parallel_sim(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_sim_result r[PX_CP_ALGO_COUNT], free_r[2];
  for (int a = 0; a < PX_CP_ALGO_COUNT; a++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = a == PX_CP_A2A ? 1 : 4, p.cp = a == PX_CP_A2A ? 8 : 4, p.dp = a == PX_CP_A2A ? 2 : 1, p.pp = 1;
    p.mbs = 1, p.gbs = 4, p.seq = 65536, p.cp_algo = a;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r[a], &err), PX_OK);
    if (a < 2) {
      px_sim_opts o = {.comm_free = true};
      CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &free_r[a], &err), PX_OK);
    }
    CU_ASSERT(r[a].comm_exposed_s > 0);
    px_plan_free(&plan);
  }
  PX_ASSERT_REL(free_r[PX_CP_RING].step_time_s, free_r[PX_CP_ALLGATHER].step_time_s, 1e-12);
  CU_ASSERT(r[PX_CP_RING].step_time_s < r[PX_CP_ALLGATHER].step_time_s);
  CU_ASSERT(r[PX_CP_RING].comm_exposed_s < r[PX_CP_ALLGATHER].comm_exposed_s);
  for (int a = 0; a < PX_CP_ALGO_COUNT; a++) px_sim_result_free(&r[a]);
  for (int a = 0; a < 2; a++) px_sim_result_free(&free_r[a]);
}

/* Mixture of experts, Mixtral 8x7B on 64 H100s, tp 2: the EP all-to-alls
 * of ep 4 stay in a node (4 ranks 2 apart), ep 8's cross to the next node
 * over the NICs and take longer; an imbalanced router (the busiest rank's
 * experts take 1.5x the mean rows) stretches every step; the all-gather
 * dispatch moves every token to every EP rank; buffers for the worst
 * routing (moe_buffers worst, a run's) take more memory, not more time. */
/* EP overlap (`overlap` ep): Megatron-Core's combined 1F1B. The programs take one more forward before the
 * steady state and merge each steady-state forward layer with a backward layer of the micro-batch before
 * (PX_INSTF_MERGED on the forward, the backward next on the compute stream); the simulator runs each pair with
 * its exchanges beside the other's compute: the same compute, far less of the exchanges exposed, a faster step;
 * a little more memory. pp 1 (1f1b) and pp 2 interleaved; the other schedules and the rest refused by name. */
static void test_ep_overlap(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("qwen3-30b-a3b", &m, &err), PX_OK);
  for (int pp = 1; pp <= 2; pp++) {
    px_sim_result r[2];
    uint64_t peak[2];
    for (int ov = 0; ov < 2; ov++) {
      px_parallel p;
      px_parallel_unset(&p);
      p.pp = pp, p.dp = 8, p.ep = 8, p.etp = 1, p.zero = 1, p.mbs = 1, p.gbs = 32 * pp, p.seq = 4096;
      if (pp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 2;
      p.overlap = PX_OVERLAP_ALL | (ov ? PX_OVERLAP_EP : 0);
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8 * pp, &p, &err), PX_OK);
      const px_program *prog = &plan.programs[0];
      int64_t merged = 0, layers = m.layers / pp, mbs = plan.microbatches;
      for (int32_t i = 0; i < prog->ninsts; i++) {
        if (!(prog->insts[i].flags & PX_INSTF_MERGED)) continue;
        merged++;
        int32_t j = i + 1;
        while (j < prog->ninsts && prog->insts[j].stream != PX_STREAM_COMPUTE) j++;
        CU_ASSERT_FATAL(j < prog->ninsts);
        CU_ASSERT(px_block_is_moe_fwd((px_block_kind)prog->insts[i].block));
        CU_ASSERT(px_block_is_layer_bwd((px_block_kind)prog->insts[j].block));
        if (pp == 1) CU_ASSERT_EQUAL(prog->insts[j].mb, prog->insts[i].mb - 1); /* the micro-batch before */
      }
      /* pp 1: every forward but the first, layer by layer; interleaved: each steady-state pair of chunks */
      if (pp == 1) CU_ASSERT_EQUAL(merged, ov ? (mbs - 1) * layers : 0);
      if (pp == 2) CU_ASSERT(ov ? merged > 0 && merged % (layers / 2) == 0 : merged == 0);
      peak[ov] = plan.mem[0].peak_bytes;
      px_sim_opts o = {0};
      CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r[ov], &err), PX_OK);
      double bound;
      CU_ASSERT_EQUAL(px_sim_step_bound_s(&plan, &bound, &err), PX_OK);
      CU_ASSERT(bound <= r[ov].step_time_s);
      if (ov) { /* serial (the CPU executor's order): nothing merged, nothing overlapped */
        px_sim_result rs;
        px_sim_opts so = {.serial = true};
        CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &so, &rs, &err), PX_OK);
        CU_ASSERT(rs.step_time_s > r[ov].step_time_s);
        px_sim_result_free(&rs);
      }
      px_plan_free(&plan);
    }
    const px_sim_breakdown *a = &r[0].stages[0].parts, *b = &r[1].stages[0].parts;
    PX_ASSERT_REL(b->forward_s + b->backward_s, a->forward_s + a->backward_s, 1e-9);
    CU_ASSERT(b->exposed_s[PX_SIM_COMM_EP] < 0.4 * a->exposed_s[PX_SIM_COMM_EP]);
    CU_ASSERT(r[1].step_time_s < 0.95 * r[0].step_time_s);
    CU_ASSERT(peak[1] >= peak[0]);
    fprintf(stderr, "\n  pp %d: step %.3f -> %.3f s, exposed EP %.1f -> %.1f ms, peak %.2f -> %.2f GiB", pp,
            r[0].step_time_s, r[1].step_time_s, 1e3 * a->exposed_s[PX_SIM_COMM_EP], 1e3 * b->exposed_s[PX_SIM_COMM_EP],
            (double)peak[0] / (1 << 30), (double)peak[1] / (1 << 30));
    px_sim_result_free(&r[0]), px_sim_result_free(&r[1]);
  }
  /* what Megatron-Core refuses with it, and what parallax does not plan */
  const struct {
    int pp, ep, dispatch, recompute, zero;
    const char *says;
  } bad[] = {{1, 1, PX_MOE_A2A, PX_RECOMPUTE_NONE, 1, "`ep` 2 or more"},
             {1, 8, PX_MOE_ALLGATHER, PX_RECOMPUTE_NONE, 1, "not `moe_dispatch` allgather"},
             {1, 8, PX_MOE_A2A, PX_RECOMPUTE_FULL, 1, "refuses full recomputation"},
             {2, 8, PX_MOE_A2A, PX_RECOMPUTE_NONE, 1, "`schedule` interleaved, or 1f1b with pp 1"},
             {1, 8, PX_MOE_A2A, PX_RECOMPUTE_NONE, 3, "`zero` 3"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.pp = bad[i].pp, p.dp = 8, p.ep = bad[i].ep, p.etp = 1, p.zero = bad[i].zero, p.mbs = 1, p.gbs = 64, p.seq = 4096;
    p.moe_dispatch = bad[i].dispatch, p.recompute = bad[i].recompute, p.overlap = PX_OVERLAP_ALL | PX_OVERLAP_EP;
    px_plan plan;
    px_err e = {0};
    CU_ASSERT_EQUAL(px_test_compile(&plan, &m, "dgx-h100", 8 * bad[i].pp, &p, &e), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].says));
  }
}

static void test_moe_sim(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  struct {
    int64_t ep;
    double imbalance;
    int dispatch;
    int overlap;
  } k[] = {{4, 1.0, PX_MOE_A2A, -1},       {8, 1.0, PX_MOE_A2A, -1}, {8, 1.5, PX_MOE_A2A, -1},
           {8, 1.0, PX_MOE_ALLGATHER, -1}, {8, 1.0, PX_MOE_A2A, PX_OVERLAP_ALL}, {8, 1.0, PX_MOE_A2A, -1}};
  px_sim_result r[6];
  double ep_bytes[6], act_bytes[6];
  for (size_t i = 0; i < 6; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 2, p.pp = 1, p.dp = 32, p.zero = 1, p.mbs = 1, p.gbs = 256, p.seq = 4096, p.sp = 1;
    p.ep = k[i].ep, p.moe_imbalance = k[i].imbalance, p.moe_dispatch = k[i].dispatch, p.overlap = k[i].overlap;
    if (i == 5) p.moe_buffers = PX_MOE_BUF_WORST;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(plan.grid.ep_place.intra, k[i].ep == 4);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r[i], &err), PX_OK);
    ep_bytes[i] = plan.totals[0].wire_bytes[PX_GROUP_EP];
    act_bytes[i] = (double)plan.mem[0].activations_peak_bytes;
    px_plan_free(&plan);
  }
  CU_ASSERT(r[1].comm_tp_s > 2 * r[0].comm_tp_s); /* in-layer communication: the EP exchanges across nodes */
  CU_ASSERT(r[1].step_time_s > r[0].step_time_s);
  CU_ASSERT(r[2].step_time_s > 1.1 * r[1].step_time_s);
  /* all-gather: each rank sends its tokens to 7 others, against 7/8 of its 2 choices: ep / k = 4x the bytes (of
   * the rows: the all-to-alls' 4 H 2 bytes a row, the dispatch's and its backward's 4 of fp32 gate more) */
  PX_ASSERT_REL(ep_bytes[3], 4 * ep_bytes[1] * (4.0 * 4096 * 2) / (4.0 * 4096 * 2 + 8), 1e-12);
  CU_ASSERT(r[3].step_time_s > r[1].step_time_s);
  /* with the layers' collectives overlapped, the router's and permutation's work hides part of the EP exchanges */
  CU_ASSERT(r[4].step_time_s < r[1].step_time_s && r[4].comm_exposed_s < r[1].comm_exposed_s);
  /* worst-case buffers (8 ranks x 2048 tokens x min(2, 1) x etp 2 = 4x the busiest rank's rows): the same
   * step, more activation memory */
  PX_ASSERT_REL(r[5].step_time_s, r[1].step_time_s, 1e-12);
  CU_ASSERT(act_bytes[5] > 1.2 * act_bytes[1]);
  for (size_t i = 0; i < 6; i++) px_sim_result_free(&r[i]);
  /* group-limited routing: NCCL's all-to-all (a2a) sends a copy per (token, expert) whatever the groups;
   * DeepEP's kernels (deepep) one per (token, rank) and one a node across (px_plan_ep_copies): DeepSeek-V3's
   * tokens reach at most 4 of the 8 nodes of EP 64, fewer ranks and nodes than without its groups */
  px_model ds;
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &ds, &err), PX_OK);
  px_sim_result g[4];
  double gbytes[4], ranks[4], nodes[4];
  for (int i = 0; i < 4; i++) { /* (groups, no groups) x (a2a, deepep) */
    ds.expert_groups = i % 2 ? 0 : 8, ds.groups_per_token = i % 2 ? 0 : 4;
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 4, p.dp = 256, p.zero = 3, p.mbs = 1, p.gbs = 1024, p.ep = 64, p.recompute = PX_RECOMPUTE_FULL;
    p.moe_dispatch = i < 2 ? PX_MOE_A2A : PX_MOE_DEEPEP;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &ds, "dgx-h100", 1024, &p, &err), PX_OK);
    px_plan_ep_copies(&plan, &ranks[i], &nodes[i]);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &g[i], &err), PX_OK);
    gbytes[i] = plan.totals[1].wire_bytes[PX_GROUP_EP];
    px_plan_free(&plan);
  }
  PX_ASSERT_REL(gbytes[0], gbytes[1], 1e-12); /* the all-to-all: 8 copies a token either way */
  PX_ASSERT_REL(nodes[2], 4.0, 1e-9);         /* each of its 4 groups (nodes) takes the group's best expert */
  CU_ASSERT(nodes[3] > 5.0 && ranks[2] < ranks[3] && ranks[3] < 8.0);
  /* a copy a (token, rank): the all-to-all's bytes x ranks / k, each exchange alike */
  PX_ASSERT_REL(gbytes[2], gbytes[0] * ranks[2] / 8.0, 1e-9);
  PX_ASSERT_REL(gbytes[3], gbytes[1] * ranks[3] / 8.0, 1e-9);
  CU_ASSERT(g[2].step_time_s < g[3].step_time_s && g[2].step_time_s < g[0].step_time_s);
  for (int i = 0; i < 4; i++) px_sim_result_free(&g[i]);
}

/* One program per stage: the work does not grow with DP or TP. */
static void test_flat_in_dp_tp(void) {
  px_sim_result a, b, c;
  px_plan pa, pb, pc;
  sim_llama("dgx-h100", 64, 2, 4, 8, &a, &pa);
  sim_llama("dgx-h100", 1024, 2, 4, 128, &b, &pb);
  sim_llama("dgx-h100", 256, 8, 4, 8, &c, &pc);
  /* Same micro-batches per rank: same programs, same number of events. With
   * more TP a rank's tensors are smaller, so fewer gradient buckets: the
   * programs differ only there, and the events are no more. */
  CU_ASSERT_EQUAL(pa.programs[0].ninsts, pb.programs[0].ninsts);
  CU_ASSERT_EQUAL(pa.programs[0].ninsts - 2 * pa.programs[0].nunits, pc.programs[0].ninsts - 2 * pc.programs[0].nunits);
  CU_ASSERT(pc.programs[0].nunits < pa.programs[0].nunits);
  CU_ASSERT(b.events <= a.events * 11 / 10 && b.events >= a.events * 9 / 10);
  CU_ASSERT(c.events <= a.events * 11 / 10);
  px_sim_result_free(&a), px_sim_result_free(&b), px_sim_result_free(&c);
  px_plan_free(&pa), px_plan_free(&pb), px_plan_free(&pc);
}

/* Seconds a step's data-parallel collectives of stage 0 spend on each link
 * class, each costed alone on its group's placement, by group kind. */
static void dp_link_s(const px_plan *p, double inter_s[PX_GROUP_COUNT], double intra_s[PX_GROUP_COUNT]) {
  for (int g = 0; g < PX_GROUP_COUNT; g++) inter_s[g] = intra_s[g] = 0;
  px_op_iter it = px_op_iter_begin(p, 0);
  for (const px_op *o; (o = px_op_next(&it));) {
    if (o->stream != PX_STREAM_DP || o->coll == PX_COLL_NONE || o->coll_bytes == 0) continue;
    px_placement pl = px_sim_group_place(p, (px_group)o->group);
    px_coll_cost cc = px_coll_cost_of(&p->cluster, (px_coll)o->coll, o->coll_bytes, &pl);
    if (cc.bw[PX_LINK_INTER] > 0) inter_s[o->group] += cc.bytes[PX_LINK_INTER] / cc.bw[PX_LINK_INTER];
    if (cc.bw[PX_LINK_INTRA] > 0) intra_s[o->group] += cc.bytes[PX_LINK_INTRA] / cc.bw[PX_LINK_INTRA];
  }
}

/* Hybrid sharding on 32 nodes, ZeRO-3, dp 256: with shard groups of one
 * node the per-micro-batch reduce-scatters and the gathers stay on NVLink
 * and only the shard's all-reduce (once a step) crosses nodes, so the
 * inter-node DP time is a fraction of full sharding's; both levels appear. */
static void test_hybrid_sharding(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double inter[2][PX_GROUP_COUNT], intra[2][PX_GROUP_COUNT], dp_s[2], step_s[2];
  uint64_t events[2];
  for (int h = 0; h < 2; h++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 1, p.zero = 3, p.mbs = 1, p.gbs = 1024;
    if (h) p.shard_group = 8;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 256, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(plan.par.dp, 256);
    dp_link_s(&plan, inter[h], intra[h]);
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    dp_s[h] = r.comm_dp_s, step_s[h] = r.step_time_s, events[h] = r.events;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  double full = inter[0][PX_GROUP_DP], hybrid = inter[1][PX_GROUP_SHARD] + inter[1][PX_GROUP_REPLICA];
  fprintf(stderr, "\n  inter-node DP s: full %.4f, hybrid %.4f (replica %.4f); dp_s %.4f vs %.4f; step %.4f vs %.4f\n",
          full, hybrid, inter[1][PX_GROUP_REPLICA], dp_s[0], dp_s[1], step_s[0], step_s[1]);
  CU_ASSERT(full > 0);
  CU_ASSERT(hybrid < full / 2);
  CU_ASSERT_EQUAL(inter[1][PX_GROUP_SHARD], 0);   /* one node: NVLink only */
  CU_ASSERT(intra[1][PX_GROUP_SHARD] > 0);
  CU_ASSERT(inter[1][PX_GROUP_REPLICA] > 0);      /* across nodes */
  CU_ASSERT_EQUAL(inter[1][PX_GROUP_DP], 0);
  CU_ASSERT(dp_s[1] < dp_s[0]);
  /* (the step is not always faster: each rank's optimizer now updates 1/8 of
   * the model, not 1/256, and the shard's all-reduce trails the last backward) */
  /* the simulation stays flat in GPU count: the same plan on 64 GPUs, same micro-batches per rank */
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 1, p.pp = 1, p.zero = 3, p.mbs = 1, p.gbs = 256, p.shard_group = 8;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
  px_sim_result r;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT(events[1] <= r.events * 11 / 10 && events[1] >= r.events * 9 / 10);
  px_sim_result_free(&r);
  px_plan_free(&plan);
}

/* Overlap switches: exposing the DP reduction cannot make a step faster. */
static void test_overlap_switches(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double t[2];
  for (int i = 0; i < 2; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 8, p.pp = 1, p.mbs = 1, p.gbs = 64;
    p.overlap = i == 0 ? PX_OVERLAP_DEFAULT : (PX_OVERLAP_DEFAULT & ~PX_OVERLAP_DP);
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    t[i] = r.step_time_s;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT(t[1] > t[0]);
}

/* Offload's costs by hand: each unit's reduced shard crosses the GPU's share
 * of its PCIe uplink (DGX A100: 32 GB/s a direction, two GPUs an uplink),
 * the host's AdamW takes the shard at the node's rate over its eight GPUs,
 * and the new parameters come back over the link; the step slows. */
static void test_offload_costs(void) {
  px_model m = gpt(4);
  px_err err = {0};
  double step[2];
  for (int off = 0; off < 2; off++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 1, p.zero = 2, p.mbs = 1, p.gbs = 16, p.precision = PX_PREC_BF16;
    if (off) p.offload_opt = PX_OFFLOAD_CPU;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-a100", 8, &p, &err), PX_OK);
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    step[off] = r.step_time_s;
    if (off) {
      const px_program *prog = &plan.programs[0];
      double link = 32e9 / 2, shard = (double)prog->flat_elems / 8, copies = 0;
      for (int32_t u = 0; u < prog->nunits; u++) copies += (double)(prog->units[u].padded / 8) * 2; /* bf16 */
      /* two micro-batches a step, each reduced and copied out */
      PX_ASSERT_REL(r.comm_host_s, 2 * copies / link, 1e-6);
      PX_ASSERT_REL(r.stages[0].op_s[PX_OP_COPY_D2H], 2 * copies / link, 1e-6);
      PX_ASSERT_REL(r.stages[0].op_s[PX_OP_ADAMW_HOST], shard / (13.6e9 / 8), 1e-9);
      PX_ASSERT_REL(r.stages[0].op_s[PX_OP_COPY_H2D], shard * 2 / link, 1e-9);
      CU_ASSERT_EQUAL(r.stages[0].op_s[PX_OP_ADAMW], 0);
    }
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT(step[1] > step[0]);
}

/* Activation offload: each offloaded layer's kept activations go to the host and back once a micro-batch, on
 * the host link; free copies cost nothing (the step without offload), and on a link slow enough that every
 * copy waits for the one before, the step is at least all of them end to end. */
static void test_offload_activations_costs(void) {
  px_model m = gpt(6);
  px_err err = {0};
  double step[3], copies_s = 0;
  for (int k = 0; k < 3; k++) { /* none; offload at the preset's link; offload on a 1 MB/s link */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 1, p.zero = 1, p.mbs = 1, p.gbs = 16, p.precision = PX_PREC_BF16;
    if (k) p.offload_act_layers = 3;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-a100", 8, &p, &err), PX_OK);
    if (k == 2) plan.cluster.host_pcie_bytes_per_s = 1e6;
    px_sim_result r;
    px_sim_opts o = {.skip_exposed = true};
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
    step[k] = r.step_time_s;
    if (k) { /* two micro-batches a rank, three layers' sets each, out and back */
      double set = (double)px_plan_layer_activation_bytes(&plan), link = px_cluster_host_link_bytes_per_s(&plan.cluster);
      copies_s = 2 * 3 * 2 * set / link;
      PX_ASSERT_REL(r.comm_host_s, copies_s, 1e-6);
      PX_ASSERT_REL(r.stages[0].op_s[PX_OP_COPY_D2H], copies_s / 2, 1e-6);
      PX_ASSERT_REL(r.stages[0].op_s[PX_OP_COPY_H2D], copies_s / 2, 1e-6);
    }
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT(step[1] >= step[0]);
  CU_ASSERT(step[2] >= copies_s);
  PX_ASSERT_REL(step[2], copies_s, 0.05); /* the layers' compute is small beside 1 MB/s copies */
}

/* What TP overlap saves in one block, by hand: each TP collective the
 * plan overlaps runs beside the compute between it and the first op that
 * uses its tensors (the block's end when none does), less the compute its
 * SMs take meanwhile (paid at the block's end, when no collective holds
 * any). One collective in flight at a time here. */
static double tp_overlap_saving_s(const px_plan *p, const px_block *b) {
  double saved = 0, sms = (double)p->cluster.gpu.sm_count;
  for (int32_t j = 0; j < b->nops; j++) {
    const px_op *c = &b->ops[j];
    if (c->group != PX_GROUP_TP || c->coll == PX_COLL_NONE || c->coll_bytes == 0 ||
        !px_plan_op_overlapped(p, b->ops, b->nops, j))
      continue;
    px_coll_cost cc = px_coll_cost_of(&p->cluster, (px_coll)c->coll, c->coll_bytes, &p->grid.tp_place);
    double t = cc.time_s, beside = 0;
    for (int32_t k = j + 1; k < b->nops && b->ops[k].dep != j; k++)
      if (b->ops[k].stream == PX_STREAM_COMPUTE) /* at the slowest GPU's pace */
        beside += px_compute_op_s(&p->cluster.gpu, p->act_dtype, &b->ops[k]) * px_straggler_plan_stretch(p);
    saved += (t < beside ? t : beside) * (1.0 - (double)cc.sms / sms);
  }
  return saved;
}

/* TP overlap hides each collective behind the compute up to its first
 * consumer and no further: the forward's all-reduces (consumed at once) stay
 * exposed, the backward's hide behind the weight-gradient GEMMs. The
 * default (tp-bwd, Megatron-Core's) hides those of the backward already. */
static void test_tp_overlap_dependencies(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double t[3], expect[3] = {0}, fwd = 0;
  int ov[3] = {PX_OVERLAP_DEFAULT & ~PX_OVERLAP_TP_BWD, PX_OVERLAP_DEFAULT, PX_OVERLAP_ALL};
  for (int i = 0; i < 3; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 8, p.pp = 1, p.mbs = 1, p.gbs = 1;
    p.overlap = ov[i];
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    t[i] = r.step_time_s;
    const px_program *prog = &plan.programs[0];
    for (int32_t k = 0; k < prog->ninsts; k++) {
      const px_block *b = &plan.blocks[prog->insts[k].block];
      expect[i] += tp_overlap_saving_s(&plan, b);
      if (i == 2 && b->kind == PX_BLOCK_LAYER_FWD) fwd += tp_overlap_saving_s(&plan, b);
    }
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT_DOUBLE_EQUAL(expect[0], 0, 0);
  CU_ASSERT_DOUBLE_EQUAL(fwd, 0, 1e-12);
  CU_ASSERT(expect[2] > 0.05 * t[0]); /* the backward's all-reduces are worth hiding */
  CU_ASSERT(expect[1] > 0.05 * t[0]);
  CU_ASSERT_DOUBLE_EQUAL(t[0] - t[1], expect[1], 1e-6 * t[0]);
  CU_ASSERT_DOUBLE_EQUAL(t[0] - t[2], expect[2], 1e-6 * t[0]);
}

/* Every compute block 1 s long: each data-parallel reduction then runs
 * inside the block that follows the one it reduces, and all are done when
 * that block ends, but the last ones, which run with the compute stream
 * idle. */
static double second_blocks(void *ctx, int64_t stage, px_block_kind kind) {
  (void)ctx, (void)stage, (void)kind;
  return 1.0;
}

/* Collectives hold SMs that compute beside them loses (intra_node.comm_sms):
 * by hand on a DDP plan whose reductions each run inside one compute block,
 * where every block ends with none in flight: a block runs on for
 * comm_sms / sm_count of the reductions beside it, so over the step
 * contention = comm_sms / sm_count x (dp_s - idle), with the compute stream
 * idle for step - blocks - contention. No SMs held: no contention, the same
 * step as before the model. */
static void test_collective_sm_contention(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 1, p.pp = 1, p.dp = 8, p.mbs = 1, p.gbs = 8, p.zero = 0;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
  int64_t sms = plan.cluster.intra_comm_sms;
  CU_ASSERT(sms > 0);
  double blocks = 0, share = (double)sms / (double)plan.cluster.gpu.sm_count, step[2];
  for (int32_t k = 0; k < plan.programs[0].ninsts; k++) blocks += plan.programs[0].insts[k].stream == PX_STREAM_COMPUTE;
  for (int held = 0; held < 2; held++) {
    plan.cluster.intra_comm_sms = held ? sms : 0;
    px_sim_opts o = {.block_cost = second_blocks, .skip_exposed = true};
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
    double c = r.comm_contention_s, idle = r.step_time_s - blocks - c;
    step[held] = r.step_time_s;
    if (held) {
      fprintf(stderr, "\n  %lld SMs of %lld: contention %.6f s of dp %.6f s, idle %.6f s ", (long long)sms,
              (long long)plan.cluster.gpu.sm_count, c, r.comm_dp_s, idle);
      CU_ASSERT(c > 0.5 * share * r.comm_dp_s); /* most reductions ran beside a block */
      CU_ASSERT_DOUBLE_EQUAL(c, share * (r.comm_dp_s - idle), 1e-8 * blocks);
    } else {
      CU_ASSERT_EQUAL(c, 0);
    }
    px_sim_result_free(&r);
  }
  px_plan_free(&plan);
  CU_ASSERT(step[1] > step[0]);
}

/* tp-bwd overlaps what Megatron-Core's column-parallel linear overlaps in its
 * backward, and the compiled order makes it real: without SP, the input
 * gradient's all-reduce of QKV and fc1 (two a layer), issued right after
 * the data-gradient GEMM, with the weight-gradient GEMM next and its first
 * consumer after that; with SP, their reduce-scatters and the all-gathers of
 * the saved norm outputs, consumed by the weight gradient after a
 * data-gradient GEMM (four). Nothing of the forward; tp: every TP collective. */
static void test_tp_bwd_overlap_ops(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  for (int sp = 0; sp < 2; sp++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 8, p.pp = 1, p.mbs = 1, p.gbs = 1, p.sp = sp;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(plan.par.overlap, PX_OVERLAP_DEFAULT);
    const px_block *bwd = &plan.blocks[PX_BLOCK_LAYER_BWD], *fwd = &plan.blocks[PX_BLOCK_LAYER_FWD];
    int n = 0, nag = 0, ncoll = 0;
    for (int32_t i = 0; i < bwd->nops; i++) {
      const px_op *o = &bwd->ops[i];
      if (o->group == PX_GROUP_TP && o->coll != PX_COLL_NONE) ncoll++;
      if (!px_plan_op_overlapped(&plan, bwd->ops, bwd->nops, i)) continue;
      n++;
      int32_t use = i + 1, wgrad = -1; /* its first consumer; the weight gradient it is beside */
      while (use < bwd->nops && bwd->ops[use].dep != i) use++;
      CU_ASSERT(use < bwd->nops);
      if (o->kind == PX_OP_ALLGATHER) {
        nag++;
        CU_ASSERT_EQUAL(bwd->ops[use].kind, PX_OP_LINEAR_BWD_WEIGHT);
        CU_ASSERT_EQUAL(bwd->ops[use - 2].kind, PX_OP_LINEAR_BWD_DATA); /* then the input gradient's reduction */
      } else {
        CU_ASSERT_EQUAL(o->kind, sp ? PX_OP_REDUCE_SCATTER : PX_OP_ALLREDUCE);
        CU_ASSERT_EQUAL(bwd->ops[i - 1].kind, PX_OP_LINEAR_BWD_DATA);
        wgrad = i + 1;
        CU_ASSERT_EQUAL(bwd->ops[wgrad].kind, PX_OP_LINEAR_BWD_WEIGHT);
        CU_ASSERT(use > wgrad);
      }
    }
    CU_ASSERT_EQUAL(n, sp ? 4 : 2);
    CU_ASSERT_EQUAL(nag, sp ? 2 : 0);
    if (sp) CU_ASSERT(ncoll > n); /* the row-parallel layers' output gradients' all-gathers stay in line */
    if (!sp) CU_ASSERT_EQUAL(ncoll, n);
    for (int32_t i = 0; i < fwd->nops; i++) CU_ASSERT(!px_plan_op_overlapped(&plan, fwd->ops, fwd->nops, i));
    plan.par.overlap = PX_OVERLAP_ALL;
    for (int32_t i = 0; i < bwd->nops; i++)
      if (bwd->ops[i].group == PX_GROUP_TP && bwd->ops[i].coll != PX_COLL_NONE)
        CU_ASSERT(px_plan_op_overlapped(&plan, bwd->ops, bwd->nops, i));
    /* the loss's row statistics, reduced over the vocabulary shards inside the op, are waited for whatever the
     * overlap (a compute op's exchange, not a collective the schedule moves) */
    const px_block *head = &plan.blocks[PX_BLOCK_HEAD_FWD];
    int nloss = 0;
    for (int32_t i = 0; i < head->nops; i++)
      if (head->ops[i].kind == PX_OP_LOSS) {
        nloss++;
        CU_ASSERT_EQUAL(head->ops[i].group, PX_GROUP_TP);
        CU_ASSERT(!px_plan_op_overlapped(&plan, head->ops, head->nops, i));
      }
    CU_ASSERT_EQUAL(nloss, 1);
    plan.par.overlap = PX_OVERLAP_DEFAULT & ~PX_OVERLAP_TP_BWD;
    for (int32_t i = 0; i < bwd->nops; i++) CU_ASSERT(!px_plan_op_overlapped(&plan, bwd->ops, bwd->nops, i));
    px_plan_free(&plan);
  }
}

/* Whose quantized layers (fp8_library) on Llama 3 8B at TP 4 with SP in fp8 with current scaling: in each layer's
 * backward the output projection's and fc2's output gradients are gathered over TP as fp8 codes of their quantized
 * shards (Transformer Engine: each cast carries its amax all-reduce) or in bf16 and cast whole after (torchao); the
 * forward's gathers are fp8 in both. TE's step is the shorter (half the bytes gathered, a quarter of the elements
 * cast), torchao's gathered gradient a bf16 tensor more. */
static void test_fp8_library(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double step[PX_FP8_LIB_COUNT] = {0};
  for (int lib = 0; lib < PX_FP8_LIB_COUNT; lib++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 4, p.pp = 1, p.mbs = 1, p.gbs = 1, p.sp = 1, p.zero = 0, p.seq = 4096;
    p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT, p.fp8_library = lib;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 4, &p, &err), PX_OK);
    int gathers[2][2] = {{0}}; /* [block fwd, bwd][shard cast then codes gathered, bf16 gathered then cast] */
    for (int k = 0; k < 2; k++) {
      const px_block *b = &plan.blocks[k ? PX_BLOCK_LAYER_BWD : PX_BLOCK_LAYER_FWD];
      for (int32_t j = 0; j + 2 < b->nops; j++) {
        const px_op *o = &b->ops[j], *before = j ? &b->ops[j - 1] : NULL, *after = &b->ops[j + 1];
        if (o->kind != PX_OP_ALLGATHER || o->group != PX_GROUP_TP) continue;
        if (plan.slots[o->in[0].slot].dtype == PX_DTYPE_FP8) {
          if (!before || before->kind != PX_OP_CAST || before->out[0].slot != o->in[0].slot) continue; /* kept shard */
          gathers[k][0]++; /* the shard's amax reduced over TP first, waited for */
          CU_ASSERT(before->group == PX_GROUP_TP && before->coll == PX_COLL_ALLREDUCE && before->coll_bytes == 4);
          CU_ASSERT_EQUAL(after->kind, k ? PX_OP_LINEAR_BWD_DATA : PX_OP_LINEAR);
        } else { /* the whole cast after, read by the data gradient's GEMM */
          gathers[k][1]++;
          CU_ASSERT(after->kind == PX_OP_CAST && after->in[0].slot == o->out[0].slot && after->group == PX_GROUP_NONE);
          CU_ASSERT_EQUAL(b->ops[j + 2].kind, PX_OP_LINEAR_BWD_DATA);
        }
      }
    }
    CU_ASSERT(gathers[0][0] == 2 && gathers[0][1] == 0); /* QKV's and fc1's inputs */
    CU_ASSERT_EQUAL(gathers[1][lib == PX_FP8_LIB_TORCHAO], 2); /* the output projection's and fc2's gradients */
    CU_ASSERT_EQUAL(gathers[1][lib == PX_FP8_LIB_TE], 0);
    px_sim_result r;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    step[lib] = r.step_time_s;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fprintf(stderr, "\n  step te %.3f ms, torchao %.3f ms ", 1e3 * step[PX_FP8_LIB_TE], 1e3 * step[PX_FP8_LIB_TORCHAO]);
  CU_ASSERT(step[PX_FP8_LIB_TE] < step[PX_FP8_LIB_TORCHAO]);
}

/* Transformer Engine's userbuffers under `overlap` tp (px_plan_op_tp_pipe), on Llama 3 8B at TP 4 with SP: the
 * layers' all-gathers into the GEMM after them (the forward's QKV and fc1; the backward's output-projection and fc2
 * data gradients; in fp8 each shard's cast before its gather) run ring exchange, the forward's
 * reduce-scatters after the output projection and fc2 pipeline; not the embedding's or the head's, nothing without
 * tp overlap or SP. The step: shorter than with them in line (the default's tp-bwd), no shorter than its compute
 * alone, its TP waits at most every other collective in full, a pipelined reduce-scatter's last piece and a ring's
 * hops beyond its chunks ((tp - 1) (hop - chunk) where a hop is the longer). */
static void test_tp_pipe(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  for (int fp8 = 0; fp8 < 2; fp8++) {
    double step[2] = {0};
    for (int ov = 0; ov < 2; ov++) {
      px_parallel p;
      px_parallel_unset(&p);
      p.tp = 4, p.pp = 1, p.mbs = 1, p.gbs = 1, p.sp = 1, p.zero = 0, p.seq = 4096;
      p.overlap = ov ? PX_OVERLAP_ALL : PX_OVERLAP_DEFAULT;
      if (fp8) p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT;
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 4, &p, &err), PX_OK);
      const px_program *prog = &plan.programs[0];
      int pipes[PX_BLOCK_KIND_COUNT][3] = {{0}};
      double bound = 0, whole = 0, stretch = px_straggler_plan_stretch(&plan);
      for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
        const px_block *b = &plan.blocks[k];
        for (int32_t j = 0; j < b->nops; j++) {
          px_tp_pipe pipe = px_plan_op_tp_pipe(&plan, (px_block_kind)k, b->ops, b->nops, j);
          pipes[k][pipe]++;
          if (pipe == PX_TP_PIPE_AG) { /* its GEMM next, or after the cast of the gathered tensor */
            int32_t g = b->ops[j + 1].kind == PX_OP_CAST ? j + 2 : j + 1;
            CU_ASSERT_EQUAL(b->ops[g].kind, k == PX_BLOCK_LAYER_FWD ? PX_OP_LINEAR : PX_OP_LINEAR_BWD_DATA);
            CU_ASSERT_EQUAL(g - j, 1); /* fp8: codes gathered, Transformer Engine's (torchao's: test_fp8_library) */
            CU_ASSERT_EQUAL(px_plan_tp_pipe_gather(&plan, (px_block_kind)k, b->ops, b->nops, g), j);
            if (fp8) { /* the shard's cast, its amax reduced over TP first, waited for */
              const px_op *c = &b->ops[j - 1];
              CU_ASSERT_EQUAL(c->kind, PX_OP_CAST);
              CU_ASSERT(c->group == PX_GROUP_TP && c->coll == PX_COLL_ALLREDUCE && c->coll_bytes == 4);
              CU_ASSERT(!px_plan_op_overlapped(&plan, b->ops, b->nops, j - 1));
            }
          }
          if (pipe == PX_TP_PIPE_RS) CU_ASSERT_EQUAL(b->ops[j - 1].kind, PX_OP_LINEAR);
        }
      }
      int want_fwd = ov ? 2 : 0;
      CU_ASSERT_EQUAL(pipes[PX_BLOCK_LAYER_FWD][PX_TP_PIPE_AG], want_fwd);
      CU_ASSERT_EQUAL(pipes[PX_BLOCK_LAYER_FWD][PX_TP_PIPE_RS], want_fwd);
      CU_ASSERT_EQUAL(pipes[PX_BLOCK_LAYER_BWD][PX_TP_PIPE_AG], want_fwd);
      CU_ASSERT_EQUAL(pipes[PX_BLOCK_LAYER_BWD][PX_TP_PIPE_RS], 0);
      CU_ASSERT_EQUAL(pipes[PX_BLOCK_HEAD_FWD][PX_TP_PIPE_AG] + pipes[PX_BLOCK_EMBED_FWD][PX_TP_PIPE_RS], 0);
      for (int32_t k = 0; k < prog->ninsts; k++) { /* the bound on the step's TP waits, its instances' collectives */
        px_block_kind kind = (px_block_kind)prog->insts[k].block;
        const px_block *b = &plan.blocks[kind];
        for (int32_t j = 0; j < b->nops; j++) {
          const px_op *o = &b->ops[j];
          if (o->group != PX_GROUP_TP || o->coll == PX_COLL_NONE || o->coll_bytes == 0) continue;
          double full = px_coll_cost_of(&plan.cluster, (px_coll)o->coll, o->coll_bytes, &plan.grid.tp_place).time_s;
          whole += full;
          px_tp_pipe pipe = px_plan_op_tp_pipe(&plan, kind, b->ops, b->nops, j);
          if (pipe == PX_TP_PIPE_NONE) {
            bound += full;
          } else {
            int64_t n = px_plan_tp_pipe_chunks(&plan, pipe);
            uint64_t piece = (uint64_t)(px_plan_tp_pipe_bytes(&plan, b->ops, b->nops, j) / (double)n);
            if (pipe == PX_TP_PIPE_AG) { /* fp8: bf16 gathered, fp8 exchanged */
              CU_ASSERT_EQUAL(piece * n * (b->ops[j + 1].kind == PX_OP_CAST ? 2 : 1), o->coll_bytes);
            }
            if (pipe == PX_TP_PIPE_RS) {
              bound += px_coll_cost_of(&plan.cluster, PX_COLL_REDUCE_SCATTER, piece, &plan.grid.tp_place).time_s;
            } else {
              int32_t g = b->ops[j + 1].kind == PX_OP_CAST ? j + 2 : j + 1;
              px_op chunk = px_op_row_chunk(&b->ops[g], n);
              CU_ASSERT_EQUAL(chunk.dim[0] * n, b->ops[g].dim[0]);
              double c = px_compute_op_s(&plan.cluster.gpu, plan.act_dtype, &chunk) * stretch,
                     h = px_coll_cost_of(&plan.cluster, PX_COLL_P2P, piece, &plan.grid.tp_place).time_s;
              bound += (double)(n - 1) * fmax(0.0, h - c);
            }
          }
        }
      }
      px_sim_result r;
      CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
      step[ov] = r.step_time_s;
      CU_ASSERT(r.step_time_s >= r.step_time_comm_free_s);
      if (ov) {
        fprintf(stderr, "\n  fp8 %d: TP waits %.3f ms, at most %.3f, of %.3f ms of TP collectives", fp8,
                1e3 * r.breakdown.exposed_s[PX_SIM_COMM_TP], 1e3 * bound, 1e3 * whole);
        CU_ASSERT(r.breakdown.exposed_s[PX_SIM_COMM_TP] <= bound * (1 + 1e-9));
        CU_ASSERT(bound < 0.8 * whole);
      }
      px_sim_result_free(&r);
      px_plan_free(&plan);
    }
    CU_ASSERT(step[1] < step[0]);
  }
  /* without SP: all-reduces, nothing to pipeline */
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 4, p.pp = 1, p.mbs = 1, p.gbs = 1, p.zero = 0, p.overlap = PX_OVERLAP_ALL;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 4, &p, &err), PX_OK);
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
    for (int32_t j = 0; j < plan.blocks[k].nops; j++)
      CU_ASSERT_EQUAL(px_plan_op_tp_pipe(&plan, (px_block_kind)k, plan.blocks[k].ops, plan.blocks[k].nops, j),
                      PX_TP_PIPE_NONE);
  px_plan_free(&plan);
}

/* The fast path (a block as one event while its links are its own, split
 * back into segments in its timeline's state when another flow claims
 * them) gives the segment path's step time, to the nanosecond: the timeline
 * is the block run through the same steps in the same network code, and a
 * split carries each open flow's exact state (share left, pace, pending
 * event) into the shared network. Plans with TP overlap, forward and
 * backward or the default's, SP on and off, a CP ring, MoE's EP exchanges,
 * and pipelines whose p2p and DP flows contend for the blocks' links; the
 * events fall (by more than half over the plans: a block split often, as
 * MoE's beside the DP reductions on the NICs, may cost a few more). */
static void test_fast_path_exact(void) {
  struct {
    const char *model;
    int64_t gpus, tp, pp, cp, ep, gbs;
    int sp, overlap, schedule;
  } k[] = {
      {"llama3-8b", 8, 8, 1, 1, 1, 2, 0, PX_OVERLAP_ALL, -1},
      {"llama3-8b", 8, 8, 1, 1, 1, 2, 1, -1, -1},
      {"llama3-8b", 16, 2, 2, 1, 1, 16, 0, -1, PX_SCHED_1F1B},
      {"llama3-8b", 16, 4, 2, 1, 1, 16, 1, PX_OVERLAP_ALL, PX_SCHED_INTERLEAVED},
      {"llama3-8b", 16, 4, 2, 1, 1, 16, 1, -1, PX_SCHED_INTERLEAVED},
      {"llama3-8b", 16, 2, 1, 2, 1, 8, 1, PX_OVERLAP_ALL, -1},
      {"mixtral-8x7b", 16, 2, 1, 1, 4, 8, 1, PX_OVERLAP_ALL, -1},
      {"mixtral-8x7b", 16, 2, 2, 1, 4, 16, 1, -1, PX_SCHED_1F1B},
  };
  px_err err = {0};
  uint64_t events[2] = {0};
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
    px_model m;
    CU_ASSERT_EQUAL_FATAL(px_model_load(k[i].model, &m, &err), PX_OK);
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = k[i].tp, p.pp = k[i].pp, p.cp = k[i].cp, p.ep = k[i].ep, p.mbs = 1, p.gbs = k[i].gbs, p.sp = k[i].sp;
    p.overlap = k[i].overlap, p.schedule = k[i].schedule, p.seq = 4096;
    p.zero = k[i].gpus > k[i].tp * k[i].pp * k[i].cp; /* ZeRO-1 where there is DP */
    if (k[i].schedule == PX_SCHED_INTERLEAVED) p.vpp = 2;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", k[i].gpus, &p, &err), PX_OK);
    px_sim_opts slow = {.no_fast = true}, fast = {0};
    px_sim_result rs, rf;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &slow, &rs, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &fast, &rf, &err), PX_OK);
    fprintf(stderr, "\n  %s tp %lld pp %lld cp %lld ep %lld sp %d: step %.9f s, %.9f s fast; events %llu, %llu fast",
            k[i].model, (long long)k[i].tp, (long long)k[i].pp, (long long)k[i].cp, (long long)k[i].ep, k[i].sp,
            rs.step_time_s, rf.step_time_s, (unsigned long long)rs.events, (unsigned long long)rf.events);
    CU_ASSERT_DOUBLE_EQUAL(rf.step_time_s, rs.step_time_s, 0.5e-9);
    CU_ASSERT_DOUBLE_EQUAL(rf.step_time_comm_free_s, rs.step_time_comm_free_s, 0.5e-9);
    PX_ASSERT_REL(rf.comm_tp_s, rs.comm_tp_s, 1e-9);
    CU_ASSERT(rf.events <= rs.events + rs.events / 20);
    events[0] += rs.events, events[1] += rf.events;
    px_sim_result_free(&rs);
    px_sim_result_free(&rf);
    px_plan_free(&plan);
  }
  CU_ASSERT(events[1] < events[0] / 2);
}

/* The step's spans (what the trace and timeline draw): stage 1's compute, and
 * the zero-bubble backward's B and W, one of each per layer and micro-batch. */
static void test_trace(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2, p.pp = 2, p.mbs = 1, p.gbs = 8, p.schedule = PX_SCHED_ZB_H1;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
  px_sim_opts o = {.record_spans = true};
  px_sim_result r;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
  CU_ASSERT(r.nspans > 36);
  int stage1_compute = 0, b = 0, w = 0;
  for (int64_t i = 0; i < r.nspans; i++) {
    const px_sim_span *e = &r.spans[i];
    if (e->stage == 1 && e->stream == PX_STREAM_COMPUTE) stage1_compute++;
    if (e->block == PX_BLOCK_LAYER_BWD && e->mb >= 0) b++;
    if (e->block == PX_BLOCK_LAYER_BWD_W && e->mb >= 0) w++;
    CU_ASSERT(e->ts_ns + e->dur_ns <= (uint64_t)(r.step_time_s * 1e9) + 1);
  }
  CU_ASSERT(stage1_compute > 7);
  CU_ASSERT_EQUAL(b, (int)(m.layers * plan.microbatches));
  CU_ASSERT_EQUAL(w, (int)(m.layers * plan.microbatches));
  px_sim_result_free(&r);
  /* recorded only when asked */
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT(r.spans == NULL && r.nspans == 0);
  px_sim_result_free(&r);
  px_plan_free(&plan);
}

/* GEMM efficiency: wave and tile quantization by hand, and a measured table. */
static void test_gemm_efficiency(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-a100", &c, &err), PX_OK);
  px_gpu g = c.gpu; /* 108 SMs, 128 x 256 tiles, max efficiency and k_half from the file */
  double max = g.gemm_max_efficiency, big_k = (double)(1u << 30) / ((double)(1u << 30) + g.gemm_k_half);
  CU_ASSERT_EQUAL_FATAL(g.sm_count, 108);
  CU_ASSERT_EQUAL_FATAL(g.gemm_tile_m, 128);
  CU_ASSERT_EQUAL_FATAL(g.gemm_tile_n, 256);
  CU_ASSERT_FATAL(g.gemm_k_half == floor(g.gemm_k_half) && g.gemm_k_half > 0);
  /* 108 full tiles: one full wave; k = k_half halves it */
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 128 * 12, 256 * 9, (int64_t)g.gemm_k_half, 1), max * 0.5, 1e-12);
  /* 109 tiles: two waves, the second nearly empty: 109 / 216 */
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 128 * 109, 256, 1u << 30, 1), max * big_k * 109.0 / 216.0, 1e-12);
  /* an edge tile half full: 1.5 tiles of work in 2 */
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 192, 256, 1u << 30, 1), max * big_k * (2.0 / 108.0) * 0.75, 1e-12);
  /* a measured table replaces the model: nearest point in log space */
  g.gemm_table[0] = (px_gemm_point){1024, 1024, 1024, 0.5, -1};
  g.gemm_table[1] = (px_gemm_point){8192, 8192, 8192, 0.9, -1};
  g.gemm_table_len = 2;
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 1000, 1100, 900, 1), 0.5, 1e-12);
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 9000, 8000, 8192, 1), 0.9, 1e-12);
  /* points of a dtype answer for it alone; a dtype without points falls back to the model */
  g.gemm_table[0].dtype = PX_DTYPE_FP8, g.gemm_table[1].dtype = PX_DTYPE_FP8;
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_FP8, 1000, 1100, 900, 1), 0.5, 1e-12);
  PX_ASSERT_REL(px_gemm_efficiency(&g, PX_DTYPE_BF16, 128 * 12, 256 * 9, (int64_t)g.gemm_k_half, 1), max * 0.5, 1e-12);
  /* memory-bound op: bytes over HBM x efficiency + overhead */
  px_op op = {.kind = PX_OP_GELU, .bytes = 2.039e12 * c.gpu.memory_efficiency}; /* one second of HBM at its share */
  PX_ASSERT_REL(px_compute_op_s(&c.gpu, PX_DTYPE_BF16, &op), 1.0 + c.gpu.kernel_overhead_s, 1e-9);
}

/* Expert GEMMs: as Transformer Engine runs them by default (a GEMM an expert, 4 streams: at most 4 experts' tiles
 * on the SMs at once, a kernel's fixed cost each, 4 at a time) and as one grouped kernel over every expert's tiles. */
static void test_expert_gemm_streams(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-a100", &c, &err), PX_OK);
  const px_gpu *g = &c.gpu; /* 108 SMs, 128 x 256 tiles */
  double max = g->gemm_max_efficiency, k = 1 << 20, big_k = k / (k + g->gemm_k_half);
  double peak = g->peak_flops[PX_DTYPE_BF16] * g->sustained_share, o = g->kernel_overhead_s;
  /* 64 experts of 256 rows, 1536 wide: 12 tiles each, 768 in all; grouped: 8 waves of 108; 4 streams: 48 SMs
   * busy at a time, 16 waves */
  px_op op = {.kind = PX_OP_EXPERT_LINEAR, .dim = {256, 1536, (int64_t)k, 64}};
  op.flops = 2.0 * 256 * 1536 * k * 64;
  PX_ASSERT_REL(px_compute_grouped_op_s(g, PX_DTYPE_BF16, &op), op.flops / (peak * max * big_k * 768.0 / 864.0) + o, 1e-12);
  PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op), op.flops / (peak * max * big_k * 768.0 / 1728.0) + 16 * o, 1e-12);
  /* 4,096 rows an expert: 192 tiles each, 4 of them more than fill the SMs, so the waves are the grouped kernel's;
   * the weight gradient (rows as k) likewise */
  op.dim[0] = 4096, op.dim[3] = 8, op.flops = 2.0 * 4096 * 1536 * k * 8;
  double grouped = px_compute_grouped_op_s(g, PX_DTYPE_BF16, &op);
  PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op), grouped + o, 1e-12);
  /* one local expert: one kernel either way */
  op.dim[3] = 1, op.flops = 2.0 * 4096 * 1536 * k;
  PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op), px_compute_grouped_op_s(g, PX_DTYPE_BF16, &op), 1e-12);
}

/* Block-scaled GEMMs: an nvfp4 GEMM at the fp8 rate times gpu.gemm.nvfp4_rate_over_fp8, without the figure at
 * the fp4 peak with fp8's per-tensor efficiency model; an mxfp8 one at the fp8 rate times
 * gpu.gemm.mxfp8_rate_over_fp8; an op without the fp8 flag at bf16's. */
static void test_block_scaled_gemm(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("gb200-nvl72", &c, &err), PX_OK);
  px_gpu *g = &c.gpu;
  int64_t m = 8192, n = 14336, k = 4096;
  px_op op = {.kind = PX_OP_LINEAR, .dim = {m, n, k}, .flops = 2.0 * (double)m * (double)n * (double)k};
  double e8 = px_gemm_efficiency8(g, PX_DTYPE_FP8, false, m, n, k, 1), e4 = px_gemm_efficiency8(g, PX_DTYPE_FP4, false, m, n, k, 1);
  CU_ASSERT(e8 > 0 && px_gpu_gemm_max(g, PX_DTYPE_FP4, false) == px_gpu_gemm_max(g, PX_DTYPE_FP8, false));
  CU_ASSERT(g->gemm_mxfp8_ratio > 0 && g->gemm_mxfp8_ratio < 1 && g->gemm_nvfp4_ratio > 1);
  double nvfp4 = g->gemm_nvfp4_ratio;
  const struct {
    uint16_t flags;
    double nvfp4_ratio, peak, eff;
  } cases[] = {{PX_OPF_FP8 | PX_OPF_NVFP4, nvfp4, g->peak_flops[PX_DTYPE_FP8], e8 * nvfp4},
               {PX_OPF_FP8 | PX_OPF_NVFP4, 0, g->peak_flops[PX_DTYPE_FP4], e4},
               {PX_OPF_FP8 | PX_OPF_MXFP8, nvfp4, g->peak_flops[PX_DTYPE_FP8], e8 * g->gemm_mxfp8_ratio},
               {PX_OPF_FP8, nvfp4, g->peak_flops[PX_DTYPE_FP8], e8}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    op.flags = cases[i].flags, g->gemm_nvfp4_ratio = cases[i].nvfp4_ratio;
    PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op),
                  op.flops / (cases[i].peak * cases[i].eff * g->sustained_share) + g->kernel_overhead_s, 1e-12);
  }
  CU_ASSERT(g->peak_flops[PX_DTYPE_FP4] == 2 * g->peak_flops[PX_DTYPE_FP8]);
}

/* fp8 attention (PX_OPF_FP8; MXFP8 with PX_OPF_MXFP8): on gb200-nvl72 its measured cuDNN curves, an Llama-shaped
 * causal op faster than bf16's in both passes at 16K and mxfp8 between (tests/data/attention_blackwell_cudnn.csv),
 * costed against the same 16-bit peak; on a GPU without fp8 curves (dgx-b200, dgx-h100) and on one without attention
 * curves (dgx-a100's backward: the GEMM model) exactly the bf16 op's time: no gain assumed. */
static void test_fp8_attention(void) {
  static const char *const presets[] = {"gb200-nvl72", "dgx-b200", "dgx-h100", "dgx-a100"};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
    px_cluster c;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(presets[i], &c, &err), PX_OK);
    c.gpu.kernel_overhead_s = 0; /* the curves' ratio alone */
    for (int bwd = 0; bwd < 2; bwd++) {
      int64_t b = 2, s = 16384, h = 64, hd = 128;
      px_op op = {.kind = bwd ? PX_OP_FLASH_ATTN_BWD : PX_OP_FLASH_ATTN, .dim = {b, s, h, 8, hd, s},
                  .flops = 4.0 * (double)(b * h) * (double)s * (double)s * (double)hd * (bwd ? 2 : 1)};
      double bf16_s = px_compute_op_s(&c.gpu, PX_DTYPE_BF16, &op);
      op.flags = PX_OPF_FP8;
      double fp8_s = px_compute_op_s(&c.gpu, PX_DTYPE_BF16, &op);
      op.flags = PX_OPF_FP8 | PX_OPF_MXFP8;
      double mx_s = px_compute_op_s(&c.gpu, PX_DTYPE_BF16, &op);
      fprintf(stderr, "\n  %-11s %s: bf16 %.3f ms, fp8 %.3f ms, mxfp8 %.3f ms", presets[i], bwd ? "bwd" : "fwd",
              bf16_s * 1e3, fp8_s * 1e3, mx_s * 1e3);
      if (i == 0) {
        CU_ASSERT(fp8_s < mx_s && mx_s < bf16_s);
        /* the curves' ratio at 16K: GB200 fp8 forward 2154 against bf16's 1708 TFLOP/s, backward 1632 against 1328 */
        PX_ASSERT_REL(bf16_s / fp8_s, bwd ? 1632.0 / 1328 : 2154.0 / 1708, 1e-9);
      } else {
        CU_ASSERT_EQUAL(fp8_s, bf16_s);
        CU_ASSERT_EQUAL(mx_s, bf16_s);
      }
    }
  }
}

/* fp8 split accumulation: on a Hopper preset the backward's per-tensor fp8 GEMMs (data and weight gradients,
 * dense and expert) run at gpu.gemm.fp8_split_accumulation_share of the forward's rate, by hand; blockwise
 * scales and 16-bit GEMMs keep theirs; a file without the share (Blackwell's) has one rate. */
static void test_fp8_split_accumulation(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  px_gpu *g = &c.gpu;
  CU_ASSERT_FATAL(g->gemm_fp8_split_share > 0.8 && g->gemm_fp8_split_share < 0.9);
  g->kernel_overhead_s = 0;
  int64_t m = 8192, n = 8192, k = 8192; /* the same shape every way round: one efficiency for every pass */
  double flops = 2.0 * (double)m * (double)n * (double)k;
  double fwd8 = flops / (g->peak_flops[PX_DTYPE_FP8] * px_gemm_efficiency8(g, PX_DTYPE_FP8, false, m, n, k, 1) *
                         g->sustained_share);
  const struct {
    px_op_kind kind;
    uint16_t flags;
    double want_s;
  } cases[] = {
      {PX_OP_LINEAR, PX_OPF_FP8, fwd8},
      {PX_OP_LINEAR_BWD_DATA, PX_OPF_FP8, fwd8 / g->gemm_fp8_split_share},
      {PX_OP_LINEAR_BWD_WEIGHT, PX_OPF_FP8, fwd8 / g->gemm_fp8_split_share},
      {PX_OP_LINEAR_BWD_DATA, PX_OPF_FP8 | PX_OPF_FP8_BLOCK,
       flops / (g->peak_flops[PX_DTYPE_FP8] * px_gemm_efficiency8(g, PX_DTYPE_FP8, true, m, n, k, 1) * g->sustained_share)},
      {PX_OP_LINEAR_BWD_DATA, 0,
       flops / (g->peak_flops[PX_DTYPE_BF16] * px_gemm_efficiency8(g, PX_DTYPE_BF16, false, m, n, k, 1) *
                g->sustained_share)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    px_op op = {.kind = cases[i].kind, .flags = cases[i].flags, .dim = {m, n, k}, .flops = flops};
    PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op), cases[i].want_s, 1e-12);
  }
  /* expert GEMMs (dims: rows, n, k, local experts): the backward's at the share too */
  px_op fe = {.kind = PX_OP_EXPERT_LINEAR, .flags = PX_OPF_FP8, .dim = {4096, 2048, 2048, 8}};
  px_op be = {.kind = PX_OP_EXPERT_LINEAR_BWD_WEIGHT, .flags = PX_OPF_FP8, .dim = {2048, 4096, 2048, 8}}; /* fe's GEMM */
  PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &be) * g->gemm_fp8_split_share, px_compute_op_s(g, PX_DTYPE_BF16, &fe),
                1e-12);
  px_gpu one = *g;
  one.gemm_fp8_split_share = 0; /* none in the file: one mode */
  px_op bd = {.kind = PX_OP_LINEAR_BWD_DATA, .flags = PX_OPF_FP8, .dim = {m, n, k}, .flops = flops};
  PX_ASSERT_REL(px_compute_op_s(&one, PX_DTYPE_BF16, &bd), fwd8, 1e-12);
}

/* The straggler model against hand-derived values: the normal quantile at
 * tabulated points, Blom's expected maximum against the exact means (n = 2:
 * 1/sqrt(pi); n = 3: 3/(2 sqrt(pi)); Harter 1961 for 10, 100, 1000), the
 * stretch, and the simulator: with free communication every duration is
 * GPU compute, so the step scales by the stretch exactly. */
static void test_straggler(void) {
  PX_ASSERT_REL(px_straggler_normal_quantile(0.975), 1.959963984540054, 1e-8);
  PX_ASSERT_REL(px_straggler_normal_quantile(0.8413447460685429), 1.0, 1e-8); /* Phi(1) */
  PX_ASSERT_REL(px_straggler_normal_quantile(1e-5), -4.264890793922825, 1e-8); /* the lower tail */
  CU_ASSERT_DOUBLE_EQUAL(px_straggler_normal_quantile(0.5), 0.0, 1e-15);
  CU_ASSERT_EQUAL(px_straggler_expected_max(1), 0.0);
  PX_ASSERT_REL(px_straggler_expected_max(2), 0.5894557978497785, 1e-8); /* Phi^-1(1.625 / 2.25) */
  PX_ASSERT_REL(px_straggler_expected_max(16384), 3.9557566853248916, 1e-8);
  static const struct {
    int64_t n;
    double exact, tol;
  } harter[] = {{2, 0.5641895835, 0.045}, {3, 0.8462843753, 0.028}, {10, 1.538753, 0.01}, {100, 2.507594, 0.01},
                {1000, 3.241436, 0.01}};
  for (size_t i = 0; i < sizeof harter / sizeof harter[0]; i++)
    PX_ASSERT_REL(px_straggler_expected_max(harter[i].n), harter[i].exact, harter[i].tol);
  for (int64_t n = 2; n < (int64_t)1 << 24; n *= 2) /* more ranks, a slower slowest */
    CU_ASSERT(px_straggler_expected_max(2 * n) > px_straggler_expected_max(n));
  PX_ASSERT_REL(px_straggler_stretch(0.0148, 16384), 1 + 0.0148 * 3.9557566853248916, 1e-9);
  CU_ASSERT_EQUAL(px_straggler_stretch(0.0, 16384), 1.0);
  CU_ASSERT_EQUAL(px_straggler_stretch(0.05, 1), 1.0);

  /* the cluster field: the published default when absent, set, refused out of range */
  px_err err = {0};
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  CU_ASSERT_EQUAL(c.gpu.jitter, PX_GPU_JITTER_DEFAULT);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "gpu.jitter=0.03", &err), PX_OK);
  CU_ASSERT_EQUAL(c.gpu.jitter, 0.03);
  CU_ASSERT_EQUAL(px_cluster_set_field(&c, "gpu.jitter=-0.01", &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gpu.jitter"));

  px_model m;
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  double free_step[2] = {0}, stretch = 0;
  for (int jit = 0; jit < 2; jit++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 8, p.pp = 2, p.mbs = 1, p.gbs = 64;
    /* TP in line: with tp-bwd the stretched weight-gradient GEMMs hide more of the all-reduces beside them
     * (the step grows 28% less than the compute here), which is not what this checks */
    p.overlap = PX_OVERLAP_DEFAULT & ~PX_OVERLAP_TP_BWD;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 1024, &p, &err), PX_OK);
    plan.cluster.gpu.jitter = jit ? 0.02 : 0.0;
    /* no SMs held by collectives: slower compute would overlap more of the reductions (1 micro-batch
     * here) and lose more to their SMs (+10%), which is not what this checks either */
    plan.cluster.intra_comm_sms = plan.cluster.inter_comm_sms = 0;
    px_sim_opts fo = {.comm_free = true};
    px_sim_result r, med, all;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &fo, &r, &err), PX_OK);
    free_step[jit] = r.step_time_s;
    CU_ASSERT_EQUAL(r.straggler_ranks, 1024);
    stretch = r.straggler_stretch;
    px_sim_result_free(&r);
    /* with communication: straggler_s is the step less the median-pace step */
    px_sim_opts mo = {.no_straggler = true};
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &all, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &mo, &med, &err), PX_OK);
    CU_ASSERT_DOUBLE_EQUAL(all.straggler_s, all.step_time_s - med.step_time_s, 1e-12);
    if (jit) {
      CU_ASSERT(all.straggler_s > 0);
      /* about the compute it stretches, the comm-free step's (stretch - 1); not
       * exactly: the slower compute moves the flows that share links (+0.6% here) */
      PX_ASSERT_REL(all.straggler_s, med.step_time_comm_free_s * (stretch - 1), 0.02);
    } else {
      CU_ASSERT_EQUAL(all.straggler_s, 0.0);
      CU_ASSERT_EQUAL(all.step_time_s, med.step_time_s);
    }
    px_sim_result_free(&all);
    px_sim_result_free(&med);
    px_plan_free(&plan);
  }
  /* 1 + 0.02 x Phi^-1(1023.625 / 1024.25) = 1 + 0.02 x 3.234067712411284 */
  PX_ASSERT_REL(stretch, 1 + 0.02 * 3.234067712411284, 1e-8);
  PX_ASSERT_REL(free_step[1] / free_step[0], stretch, 1e-6); /* nanosecond clocks */
}

/* Step parts summed: they make the stage's end. */
static double breakdown_sum(const px_sim_breakdown *b) {
  double t = b->forward_s + b->backward_s + b->recompute_s + b->optimizer_s + b->contention_s + b->bubble_s + b->launch_s;
  for (int k = 0; k < PX_SIM_COMM_COUNT; k++) t += b->exposed_s[k];
  return t;
}

/* The host lane (sim/host.h): a small model on one H100 waits for the host's launches (its kernels take
 * microseconds, the host 13.48 us an op), a step no shorter than the host's issue of every op once its
 * ops cost the host far more than the GPU; a large dense model hides them behind long kernels. Kernel
 * counts as Transformer Engine launches them: an expert GEMM a local expert, current scaling's cast three
 * kernels a local expert, delayed scaling's one; the MoE forward's host waits for the dispatch's counts. */
static void test_host_launches(void) {
  px_err err = {0};
  px_model m;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.mbs = 1, p.gbs = 4;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 1, &p, &err), PX_OK);
  PX_ASSERT_REL(plan.cluster.host_op_s, 13.48e-6, 1e-12);
  px_sim_result r, none, slow;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT(r.breakdown.launch_s > 0.3 * r.step_time_s); /* launch-bound */
  PX_ASSERT_REL(breakdown_sum(&r.breakdown), r.step_time_s, 1e-6);
  /* 1 ms an op: the host's issue of every compute-stream op, one after another, is the step */
  double host_s = 0;
  plan.cluster.host_op_s = 1e-3;
  const px_program *prog = &plan.programs[0];
  for (int32_t i = 0; i < prog->ninsts; i++)
    if (prog->insts[i].stream == PX_STREAM_COMPUTE) host_s += 1e-3 * (double)plan.blocks[prog->insts[i].block].nops;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &slow, &err), PX_OK);
  CU_ASSERT(slow.step_time_s >= host_s && slow.step_time_s < 1.02 * host_s);
  plan.cluster.host_op_s = plan.cluster.host_launch_s = 0; /* launches free: no wait */
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &none, &err), PX_OK);
  CU_ASSERT_EQUAL(none.breakdown.launch_s, 0.0);
  CU_ASSERT(none.step_time_s < 0.7 * r.step_time_s);
  px_sim_result_free(&r), px_sim_result_free(&none), px_sim_result_free(&slow);
  px_plan_free(&plan);

  /* llama3-70b, tp 8 pp 4 on 64 H100s: a layer's kernels run milliseconds, its launches hide behind them */
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-70b", &m, &err), PX_OK);
  px_parallel_unset(&p);
  p.tp = 8, p.pp = 4, p.dp = 2, p.zero = 1, p.mbs = 1, p.gbs = 64, p.sp = 1;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT(r.breakdown.launch_s < 1e-3 * r.step_time_s);
  px_sim_result_free(&r);
  px_plan_free(&plan);

  /* Qwen3-30B-A3B, EP 16 (8 local experts), DeepEP: the kernels of its MoE forward by recipe */
  CU_ASSERT_EQUAL_FATAL(px_model_load("qwen3-30b-a3b", &m, &err), PX_OK);
  for (int rec = 0; rec < 3; rec++) { /* bf16, fp8 current scaling, fp8 delayed */
    px_parallel_unset(&p);
    p.ep = 16, p.etp = 1, p.zero = 1, p.mbs = 1, p.gbs = 64, p.moe_dispatch = PX_MOE_DEEPEP;
    p.precision = rec ? PX_PREC_FP8 : PX_PREC_BF16;
    if (rec) p.fp8_recipe = rec == 1 ? PX_FP8_CURRENT : PX_FP8_DELAYED;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
    const px_block *b = &plan.blocks[PX_BLOCK_MOE_FWD];
    int gemms = 0, casts = 0, waits = 0;
    for (int32_t i = 0; i < b->nops; i++) {
      const px_op *o = &b->ops[i];
      int64_t k = px_host_kernels(&plan, &b->ops[i]);
      if (o->kind == PX_OP_EXPERT_LINEAR) {
        CU_ASSERT_EQUAL(k, 8);
        gemms++;
      }
      bool expert_cast = o->kind == PX_OP_CAST && i + 1 < b->nops && b->ops[i + 1].kind == PX_OP_EXPERT_LINEAR;
      if (expert_cast) {
        CU_ASSERT_EQUAL(k, rec == 1 ? 24 : 1);
        casts++;
      }
      if (o->kind == PX_OP_LINEAR) CU_ASSERT_EQUAL(k, 1);
      /* a quantized GroupedLinear call: its Python loop, 3.9 ops' worth a local expert, before its first GEMM */
      double python_s = rec && o->kind == PX_OP_EXPERT_LINEAR ? 8 * PX_HOST_GROUPED_EXPERT_OPS_DEFAULT * 13.48e-6 : 0.0;
      px_host_issue h = px_host_issue_of(&plan, PX_BLOCK_MOE_FWD, b->ops, b->nops, i);
      if (k > 1) PX_ASSERT_REL(h.issue_s, 13.48e-6 + python_s + (double)(k - 1) * 3e-6, 1e-9);
      if (k > 1) PX_ASSERT_REL(h.first_s, 13.48e-6 + python_s, 1e-9);
      CU_ASSERT(!px_host_waits(&plan, &b->ops[i], true)); /* DeepEP: after its dispatch, not before */
      if (px_host_waits(&plan, &b->ops[i], false)) {
        CU_ASSERT(o->kind == PX_OP_ALLTOALL && o->group == PX_GROUP_EP && (o->flags & PX_OPF_TO_EXPERTS));
        waits++;
      }
    }
    CU_ASSERT_EQUAL(gemms, 2);
    CU_ASSERT_EQUAL(casts, rec ? 2 : 0);
    for (int32_t i = 0; i < b->nops; i++) /* a profile's own figure replaces the loop's: none, one op's dispatch */
      if (b->ops[i].kind == PX_OP_EXPERT_LINEAR) {
        plan.cluster.host_grouped_expert_ops = 0;
        PX_ASSERT_REL(px_host_issue_of(&plan, PX_BLOCK_MOE_FWD, b->ops, b->nops, i).first_s, 13.48e-6, 1e-9);
        plan.cluster.host_grouped_expert_ops = PX_HOST_GROUPED_EXPERT_OPS_DEFAULT;
      }
    CU_ASSERT_EQUAL(waits, 1);
    const px_block *bb = &plan.blocks[PX_BLOCK_MOE_BWD];
    for (int32_t i = 0; i < bb->nops; i++) { /* the backward keeps the forward's counts */
      CU_ASSERT(!px_host_waits(&plan, &bb->ops[i], false));
      /* its GroupedLinear call (data and weight gradients together) loops as the forward's, at its data gradient */
      double python_s = rec && bb->ops[i].kind == PX_OP_EXPERT_LINEAR_BWD_DATA ? 8 * PX_HOST_GROUPED_EXPERT_OPS_DEFAULT * 13.48e-6 : 0.0;
      px_op_kind kd = (px_op_kind)bb->ops[i].kind;
      if (kd == PX_OP_EXPERT_LINEAR_BWD_DATA || kd == PX_OP_EXPERT_LINEAR_BWD_WEIGHT)
        PX_ASSERT_REL(px_host_issue_of(&plan, PX_BLOCK_MOE_BWD, bb->ops, bb->nops, i).first_s, 13.48e-6 + python_s, 1e-9);
    }
    /* after the wait the host issues the layer's rest while the GPU idles: at least one op's dispatch a
     * forward (48 MoE layers, 4 micro-batches a rank) */
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    CU_ASSERT(r.breakdown.launch_s >= 48 * 4 * 13.48e-6 * 0.999);
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  /* the alltoall dispatcher waits before its exchange, at EP 1 too (a no-op exchange: Megatron-Core's
   * "before_finish", the end of its preprocessing) */
  for (int ep = 1; ep <= 16; ep += 15) {
    px_parallel_unset(&p);
    p.ep = ep, p.etp = 1, p.zero = 1, p.mbs = 1, p.gbs = 64, p.moe_dispatch = PX_MOE_A2A;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
    const px_block *b = &plan.blocks[PX_BLOCK_MOE_FWD];
    int before = 0, after = 0;
    for (int32_t i = 0; i < b->nops; i++) {
      if (px_host_waits(&plan, &b->ops[i], true)) {
        CU_ASSERT(b->ops[i].kind == PX_OP_ALLTOALL && b->ops[i].group == PX_GROUP_EP);
        before++;
      }
      after += px_host_waits(&plan, &b->ops[i], false);
    }
    CU_ASSERT_EQUAL(before, 1);
    CU_ASSERT_EQUAL(after, 0);
    /* the router's and the alltoall dispatcher's Python before the routing op's kernel (host.router_ops and
     * host.a2a_preprocess_ops op dispatches more, their defaults), at a forward's alone; DeepEP's without the latter */
    for (int32_t i = 0; i < b->nops; i++)
      if (b->ops[i].kind == PX_OP_MOE_ROUTE)
        for (int deepep = 0; deepep < 2; deepep++) {
          plan.par.moe_dispatch = deepep ? PX_MOE_DEEPEP : PX_MOE_A2A;
          double ops = 1 + PX_HOST_ROUTER_OPS_DEFAULT + (deepep ? 0 : PX_HOST_A2A_PREPROCESS_OPS_DEFAULT);
          px_host_issue h = px_host_issue_of(&plan, PX_BLOCK_MOE_FWD, b->ops, b->nops, i);
          PX_ASSERT_REL(h.first_s, ops * 13.48e-6, 1e-9);
          PX_ASSERT_REL(h.issue_s, ops * 13.48e-6, 1e-9);
        }
    plan.par.moe_dispatch = PX_MOE_A2A;
    const px_block *bb = &plan.blocks[PX_BLOCK_MOE_BWD];
    for (int32_t i = 0; i < bb->nops; i++)
      if (bb->ops[i].kind == PX_OP_MOE_ROUTE_BWD)
        PX_ASSERT_REL(px_host_issue_of(&plan, PX_BLOCK_MOE_BWD, bb->ops, bb->nops, i).issue_s, 13.48e-6, 1e-9);
    px_plan_free(&plan);
  }
  /* the router's padding (moe_router_padding) moves that wait before the first permutation (Megatron-Core's
   * "before_permutation_1"): the padded counts size its rows */
  px_parallel_unset(&p);
  p.ep = 16, p.etp = 1, p.zero = 1, p.mbs = 1, p.gbs = 64, p.moe_dispatch = PX_MOE_A2A, p.moe_router_padding = 1;
  p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
  int waits = 0;
  for (int32_t i = 0; i < plan.blocks[PX_BLOCK_MOE_FWD].nops; i++) {
    const px_op *o = &plan.blocks[PX_BLOCK_MOE_FWD].ops[i];
    if (px_host_waits(&plan, o, true)) {
      CU_ASSERT(o->kind == PX_OP_MOE_PERMUTE);
      waits++;
    }
    CU_ASSERT(!px_host_waits(&plan, o, false));
  }
  CU_ASSERT_EQUAL(waits, 1);
  px_plan_free(&plan);

  /* CUDA graphs per layer (cuda_graph layers): a MoE layer's attention and router replayed, its experts' part
   * (the exchanges and what is between them) eager; a dense layer one replay, its issue the module's call and
   * the replay's; the embedding eager. The small model waits less for its host, the MoE one as before */
  px_parallel_unset(&p);
  p.ep = 16, p.etp = 1, p.zero = 1, p.mbs = 1, p.gbs = 64, p.moe_dispatch = PX_MOE_DEEPEP, p.cuda_graph = PX_GRAPH_LAYERS;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
  for (int bk = 0; bk < 2; bk++) {
    px_block_kind kind = bk ? PX_BLOCK_MOE_BWD : PX_BLOCK_MOE_FWD;
    const px_block *b = &plan.blocks[kind];
    int32_t first = -1, last = -1;
    for (int32_t i = 0; i < b->nops; i++)
      if (b->ops[i].group == PX_GROUP_EP) last = i, first = first < 0 ? i : first;
    CU_ASSERT_FATAL(first > 0 && last > first);
    for (int32_t i = 0; i < b->nops; i++) {
      bool g = px_host_graphed(&plan, kind, b->ops, b->nops, i);
      CU_ASSERT_EQUAL(g, i < first || i > last);
      if (b->ops[i].kind == PX_OP_EXPERT_LINEAR || b->ops[i].kind == PX_OP_FLASH_ATTN) CU_ASSERT_EQUAL(g, b->ops[i].kind == PX_OP_FLASH_ATTN);
    }
    PX_ASSERT_REL(px_host_issue_of(&plan, kind, b->ops, b->nops, 0).issue_s, (13.48 + 15.0) * 1e-6, 1e-9);
    if (first > 1) CU_ASSERT_EQUAL(px_host_issue_of(&plan, kind, b->ops, b->nops, 1).issue_s, 0.0); /* the same replay */
  }
  CU_ASSERT(!px_host_graphed(&plan, PX_BLOCK_EMBED_FWD, plan.blocks[PX_BLOCK_EMBED_FWD].ops, 1, 0));
  px_plan_free(&plan);

  /* the router's graphs alone (cuda_graph router, --cuda-graph-modules moe_router moe_preprocess): a MoE layer's
   * pre-MLP norm to its first exchange replayed, and in the backward from its last exchange to that norm's
   * gradient, the routing op's Python with them; the attention and the experts eager, a dense model refused */
  p.cuda_graph = PX_GRAPH_ROUTER;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
  for (int bk = 0; bk < 2; bk++) {
    px_block_kind kind = bk ? PX_BLOCK_MOE_BWD : PX_BLOCK_MOE_FWD;
    const px_block *b = &plan.blocks[kind];
    int32_t first = -1, last = -1, norm = -1;
    for (int32_t i = 0; i < b->nops; i++)
      if (b->ops[i].group == PX_GROUP_EP) last = i, first = first < 0 ? i : first;
    for (int32_t i = 0; i < b->nops; i++) /* the pre-MLP norm: the forward's last before the exchanges, the
                                             backward's first gradient after them */
      if (bk ? b->ops[i].kind == PX_OP_NORM_BWD && i > last && norm < 0 : b->ops[i].kind == PX_OP_NORM && i < first)
        norm = i;
    CU_ASSERT_FATAL(norm >= 0 && first > 0 && last > first);
    int graphed = 0;
    for (int32_t i = 0; i < b->nops; i++) {
      bool g = px_host_graphed(&plan, kind, b->ops, b->nops, i);
      CU_ASSERT_EQUAL(g, bk ? i > last && i <= norm : i >= norm && i < first);
      graphed += g;
      if (b->ops[i].kind == PX_OP_MOE_ROUTE || b->ops[i].kind == PX_OP_MOE_ROUTE_BWD) CU_ASSERT(g);
      if (b->ops[i].kind == PX_OP_FLASH_ATTN || b->ops[i].kind == PX_OP_EXPERT_LINEAR) CU_ASSERT(!g);
    }
    CU_ASSERT(graphed >= 3); /* the norm, the router's GEMM, the routing */
    /* one replay a run: at its first op */
    PX_ASSERT_REL(px_host_issue_of(&plan, kind, b->ops, b->nops, bk ? last + 1 : norm).issue_s, (13.48 + 15.0) * 1e-6,
                  1e-9);
  }
  px_plan_free(&plan);
  px_model dense;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &dense, &err), PX_OK);
  px_parallel pd;
  px_parallel_unset(&pd);
  pd.mbs = 1, pd.gbs = 4, pd.cuda_graph = PX_GRAPH_ROUTER;
  CU_ASSERT_EQUAL(px_test_compile(&plan, &dense, "dgx-h100", 1, &pd, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`cuda_graph` router captures a MoE layer's router"));

  /* the full-iteration graph (cuda_graph full): every op of a forward or backward block replayed, the MoE
   * layer's experts' part too, nothing issued op by op and no wait for the tokens' counts; the optimizer eager.
   * A MoE plan needs HybridEP's sync-free exchange */
  p.cuda_graph = PX_GRAPH_FULL;
  CU_ASSERT_EQUAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`cuda_graph` full with `moe_dispatch` deepep"));
  p.moe_dispatch = PX_MOE_HYBRIDEP;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
  for (int bk = 0; bk < 2; bk++) {
    px_block_kind kind = bk ? PX_BLOCK_MOE_BWD : PX_BLOCK_MOE_FWD;
    const px_block *b = &plan.blocks[kind];
    for (int32_t i = 0; i < b->nops; i++) {
      CU_ASSERT(px_host_graphed(&plan, kind, b->ops, b->nops, i));
      CU_ASSERT_EQUAL(px_host_issue_of(&plan, kind, b->ops, b->nops, i).issue_s, 0.0);
      CU_ASSERT(!px_host_waits(&plan, &b->ops[i], true) && !px_host_waits(&plan, &b->ops[i], false));
    }
  }
  CU_ASSERT(px_host_graphed(&plan, PX_BLOCK_EMBED_FWD, plan.blocks[PX_BLOCK_EMBED_FWD].ops, 1, 0));
  CU_ASSERT(!px_host_graphed(&plan, PX_BLOCK_OPTIMIZER, plan.blocks[PX_BLOCK_OPTIMIZER].ops,
                             plan.blocks[PX_BLOCK_OPTIMIZER].nops, 0));
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT(r.breakdown.launch_s < 1e-4 * r.step_time_s); /* the eager optimizer's, if any */
  px_sim_result_free(&r);
  px_plan_free(&plan);

  /* tiny waits for its host eager, less with a graph a layer, with the step's for its eager optimizer only */
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  double step[3], wait[3];
  for (int g = 0; g < 3; g++) {
    px_parallel_unset(&p);
    p.mbs = 1, p.gbs = 4, p.cuda_graph = g == 2 ? PX_GRAPH_FULL : g ? PX_GRAPH_LAYERS : PX_GRAPH_NONE;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 1, &p, &err), PX_OK);
    const px_block *b = &plan.blocks[PX_BLOCK_LAYER_FWD];
    for (int32_t i = 0; i < b->nops; i++) CU_ASSERT_EQUAL(px_host_graphed(&plan, PX_BLOCK_LAYER_FWD, b->ops, b->nops, i), g > 0);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
    step[g] = r.step_time_s, wait[g] = r.breakdown.launch_s;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT(step[1] < 0.5 * step[0] && wait[1] < 0.2 * wait[0] && wait[1] > 0);
  CU_ASSERT(step[2] < step[1] && wait[2] > 0 && wait[2] < 0.1 * wait[1]);
}

int main(void) {
  static const px_test tests[] = {
      {"flows share links as computed by hand", test_network_sharing},
      {"GEMM efficiency: wave and tile quantization, measured table", test_gemm_efficiency},
      {"block-scaled GEMMs: nvfp4 and mxfp8 at the fp8 rate times their figures, nvfp4 at the fp4 peak without", test_block_scaled_gemm},
      {"fp8 split accumulation: the backward's per-tensor fp8 GEMMs at the share, by hand", test_fp8_split_accumulation},
      {"fp8 attention: cuDNN's fp8 and mxfp8 curves where measured, else the bf16 op's time", test_fp8_attention},
      {"expert GEMMs: Transformer Engine's 4 streams, one grouped kernel", test_expert_gemm_streams},
      {"bubble equals (p-1)/(vm+p-1) with free comm and uniform stages", test_bubble_exact},
      {"uneven chunks and any micro-batch count: simulated bubble vs analytic", test_bubble_uneven},
      {"zero-bubble schedules: ZB-H1 and ZB-H2 bubbles with free comm", test_bubble_zero_bubble},
      {"zero-bubble schedules: analytic bubble from FLOPs equals the simulation", test_bubble_zb_analytic},
      {"deterministic; contract fields consistent", test_determinism_and_contract},
      {"simulation work flat in DP and TP", test_flat_in_dp_tp},
      {"exposing DP reduction slows the step", test_overlap_switches},
      {"offload: copies on the host link and the host's AdamW, by hand", test_offload_costs},
      {"activation offload: each set out and back on the host link; a slow link paces the step", test_offload_activations_costs},
      {"hybrid sharding: less inter-node DP time than full sharding, both levels", test_hybrid_sharding},
      {"TP overlap up to each collective's first consumer", test_tp_overlap_dependencies},
      {"collectives hold SMs: compute beside them slows, by hand", test_collective_sm_contention},
      {"tp-bwd: Megatron-Core's backward overlap, on the compiled order", test_tp_bwd_overlap_ops},
      {"tp: Transformer Engine's userbuffers pipeline the layers' TP collectives with their GEMMs", test_tp_pipe},
      {"fp8_library: TE gathers a row-parallel layer's output gradient as fp8 codes, torchao in bf16", test_fp8_library},
      {"fast path: the segment path's step time with overlap and contention, fewer events", test_fast_path_exact},
      {"the step's spans recorded when asked", test_trace},
      {"context parallelism: the ring hides its hops, all-gather and a2a do not", test_context_parallel_sim},
      {"mixture of experts: EP exchanges on their links, imbalance, all-gather dispatch", test_moe_sim},
      {"EP overlap: merged forward and backward layers hide the exchanges", test_ep_overlap},
      {"host launches: a lane issuing each block's ops, the kernels Transformer Engine launches", test_host_launches},
      {"straggler: order statistic by hand, the step at the slowest GPU's pace", test_straggler},
      {"partial recomputation: the recomputed layers' share of full recomputation's time", test_recompute_block_time},
      {"bf16 layers under nvfp4: a step between all-nvfp4's and bf16's, bf16's with every layer kept",
       test_bf16_layers_time},
  };
  return px_test_main("sim", tests, sizeof tests / sizeof tests[0]);
}
