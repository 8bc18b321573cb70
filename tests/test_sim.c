/* Simulator: bandwidth sharing by hand, the exact pipeline bubble with free
 * communication and uniform stages, Megatron-LM SC'21 Table 1 within 10% a row with the runs' era's GEMMs
 * with one set of A100 figures from microbenchmarks, Korthikanti et al. 2022 (SP, selective recomputation)
 * likewise, determinism, cost flat in DP and TP, and
 * hybrid sharding's two levels on their own links. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "plan/check.h"
#include "plan/plan.h"
#include "sim/bands.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/network.h"
#include "sim/sim.h"
#include "sim/straggler.h"
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

/* A plan of a preset cluster's first `gpus` GPUs; says why when it refuses. */
static px_status compile(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                         px_err *err) {
  px_cluster c;
  px_status st = px_cluster_load(cluster, &c, err);
  if (!st) st = px_cluster_set_size(&c, gpus, 0, err);
  if (!st) {
    px_parallel_resolve(p, m, &c);
    st = px_plan_compile(plan, m, &c, p, err);
  }
  if (st) fprintf(stderr, "\n  %s\n", err->msg);
  return st;
}

/* One step of a published run's plan as the validations run it (no comm-free twin). */
static void sim_row(const px_plan *plan, px_sim_result *r) {
  px_err err = {0};
  px_sim_opts o = {.skip_exposed = true};
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, &o, r, &err), PX_OK);
}

/* The spread of a validation's errors, printed as docs/validation.md quotes it. */
typedef struct {
  double sum, min, max;
  int n;
} err_range;

static void err_add(err_range *a, double e) {
  if (!a->n || e < a->min) a->min = e;
  if (!a->n || e > a->max) a->max = e;
  a->sum += e, a->n++;
}

static void err_print(const char *label, const err_range *a) {
  if (a->n) fprintf(stderr, "  %smean error %+.1f%% (%+.1f%% to %+.1f%%)\n", label, 100 * a->sum / a->n, 100 * a->min, 100 * a->max);
}

/* The validations' tables for docs/validation.md: where PX_VALIDATION_MD
 * names a file, each validation writes its table there as a generated block
 * (<!-- generated: NAME BEGIN --> ... END), which scripts/docs.sh puts into
 * the doc (`make docs`) and tests/cli/docs.sh checks it holds. */
static bool doc_failed; /* a block could not be written: the run fails */

static FILE *doc_block(const char *name, const char *head) {
  static bool begun; /* the file is this run's: truncated by the first block */
  const char *path = getenv("PX_VALIDATION_MD");
  if (!path || !*path) return NULL;
  FILE *fp = fopen(path, begun ? "a" : "w");
  if (!fp) {
    fprintf(stderr, "\n  PX_VALIDATION_MD: %s: cannot write\n", path);
    doc_failed = true;
    return NULL;
  }
  begun = true;
  fprintf(fp, "<!-- generated: %s BEGIN -->\n\n%s", name, head);
  return fp;
}

static void doc_block_end(FILE *fp, const char *name) {
  if (!fp) return;
  fprintf(fp, "\n<!-- generated: %s END -->\n", name);
  if (fclose(fp)) doc_failed = true;
}

/* Each validation's row of README.md's accuracy table, written after the
 * tests (main) as the block validation-headline. */
enum { DOC_SC21, DOC_KORTHIKANTI, DOC_LLAMA3, DOC_BRIDGE, DOC_TORCHTITAN, DOC_ROWS };
static char doc_headline[DOC_ROWS][512];

/* A signed percentage as the docs print it: +13.2%, −0.3% (a minus sign, U+2212). */
static const char *doc_pct(double e, char buf[24]) {
  char t[16];
  snprintf(t, sizeof t, "%+.1f%%", 100 * e);
  snprintf(buf, 24, "%s%s", t[0] == '-' ? "\u2212" : "", t[0] == '-' ? t + 1 : t);
  return buf;
}

/* A count with thousands separators: 16384 -> 16,384. */
static const char *doc_count(long long v, char buf[32]) {
  char t[24];
  int n = snprintf(t, sizeof t, "%lld", v), o = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = t[i];
  }
  buf[o] = '\0';
  return buf;
}

/* The validated error bands (sim/bands.h): every validation row's error under its plan's GPU family,
 * precision and kind of model, written after the tests (main) to PX_VALIDATION_BANDS, the table sim,
 * sweep and the HTML report read (`make docs` installs it as topologies/validation_bands.tsv), and as
 * the block validation-bands of docs/validation.md. A validation's rows call band_row. */
static px_bands bands;

static void band_row(const px_plan *plan, double e, const char *validation) {
  px_band_key k;
  px_err err = {0};
  px_band_key_of(&plan->model, &plan->cluster, &plan->par, &k);
  CU_ASSERT_EQUAL(px_bands_add(&bands, &k, e, validation, &err), PX_OK);
}

static void bands_write(void) {
  const char *path = getenv("PX_VALIDATION_BANDS");
  FILE *fp = path && *path ? fopen(path, "w") : NULL;
  if (path && *path && !fp) fprintf(stderr, "\n  PX_VALIDATION_BANDS: %s: cannot write\n", path);
  doc_failed |= path && *path && !fp;
  px_bands_write(&bands, fp ? fp : stderr);
  if (fp && fclose(fp)) doc_failed = true;
  FILE *md = doc_block("validation-bands", "| GPU | precision | model | runs | error | mean | validations |\n"
                                           "| --- | --- | --- | ---: | --- | ---: | --- |\n");
  char b[3][24];
  for (int i = 0; md && i < bands.n; i++) {
    const px_band *r = &bands.v[i];
    fprintf(md, "| %s | %s | %s | %d | %s to %s | %s | %s |\n", r->key.family, r->key.precision,
            r->key.moe ? "MoE" : "dense", r->runs, doc_pct(r->min, b[0]), doc_pct(r->max, b[1]), doc_pct(r->mean, b[2]),
            r->sources);
  }
  doc_block_end(md, "validation-bands");
  px_bands_free(&bands);
}

/* The GPU counts a validation's rows span: 32-3,072. */
static const char *doc_gpus(const err_range *g, char buf[72]) {
  char lo[32], hi[32];
  snprintf(buf, 72, "%s-%s", doc_count((long long)g->min, lo), doc_count((long long)g->max, hi));
  return buf;
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
        CU_ASSERT_EQUAL_FATAL(compile(&plan, &model, "dgx-a100", pp, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &model, "dgx-a100", cases[i].pp, &p, &err), PX_OK);
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
          CU_ASSERT_EQUAL_FATAL(compile(&plan, &model, "dgx-a100", pp, &p, &err), PX_OK);
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
    case PX_BLOCK_LAYER_FWD: return fl[PX_PHASE_FWD] * 1e-12;
    case PX_BLOCK_LAYER_BWD: return (fl[PX_PHASE_BWD] + fl[PX_PHASE_RECOMPUTE]) * 1e-12;
    case PX_BLOCK_LAYER_BWD_W: return fl[PX_PHASE_BWD] * 1e-12;
    default: return 0.0;
  }
}

static void test_bubble_zb_analytic(void) {
  for (int sched = PX_SCHED_ZB_H1; sched <= PX_SCHED_ZB_H2; sched++)
    for (int64_t m = 2; m <= 18; m += 4)
      for (int rc = PX_RECOMPUTE_NONE; rc < PX_RECOMPUTE_COUNT; rc++) {
        px_model model = gpt(8);
        px_parallel p;
        px_parallel_unset(&p);
        p.pp = 4, p.tp = 1, p.mbs = 1, p.gbs = m, p.schedule = sched, p.recompute = rc;
        px_plan plan;
        px_err err = {0};
        CU_ASSERT_EQUAL_FATAL(compile(&plan, &model, "dgx-a100", 4, &p, &err), PX_OK);
        px_sim_opts o = {.comm_free = true, .block_cost = flops_cost, .block_cost_ctx = &plan};
        px_sim_result r;
        CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
        PX_ASSERT_REL(r.bubble_fraction + 1.0, px_plan_bubble_analytic(&plan) + 1.0, 1e-6); /* ns clocks */
        px_sim_result_free(&r);
        px_plan_free(&plan);
      }
}

/* ---- Megatron-LM SC'21 Table 1 ---- */

/* dgx-a100's GEMM max_efficiency as the 2020 measurement of
 * tests/data/gemm_a100_2020.csv says, converted through the model's own
 * wave, tile and k factors at the benchmark's shape: the preset's value
 * scaled by published / modelled there. */
static double gemm_max_efficiency_2020(void) {
  FILE *fp = fopen(px_test_path("tests/data/gemm_a100_2020.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  double max = 0;
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    char preset[64], dtype[16];
    long long m, n, k;
    double tflops;
    if (line[0] == '#' ||
        sscanf(line, "%63[^,],%15[^,],%lld,%lld,%lld,%lf", preset, dtype, &m, &n, &k, &tflops) != 6)
      continue;
    CU_ASSERT_STRING_EQUAL(preset, "dgx-a100");
    CU_ASSERT_STRING_EQUAL(dtype, "fp16");
    px_cluster c;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(preset, &c, &err), PX_OK);
    double model = px_gemm_efficiency(&c.gpu, PX_DTYPE_FP16, m, n, k, 1) * c.gpu.peak_flops[PX_DTYPE_FP16];
    max = c.gpu.gemm_max_efficiency * tflops * 1e12 / model;
    fprintf(stderr, "\n  2020 GEMM: %lldx%lldx%lld fp16 %.1f TFLOP/s (the preset models %.1f): max_efficiency %.3f, not %.3f",
            m, n, k, tflops, model / 1e12, max, c.gpu.gemm_max_efficiency);
    rows++;
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 1);
  CU_ASSERT(max > 0.5 && max < 1.0);
  return max;
}

/* A GPT of Megatron-LM's papers (SC'21 Table 1, Korthikanti et al. Table 3):
 * MLP 4h, vocabulary 51200, 2048 learned positions, tied embeddings, biases,
 * dropout 0.1; its parameters checked against Megatron's closed form. */
static px_model megatron_gpt(const char *name, int64_t layers, int64_t hidden, int64_t heads) {
  px_model m;
  px_model_init(&m);
  snprintf(m.name, sizeof m.name, "%s", name);
  m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = heads, m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden, m.vocab = 51200, m.seq_len = 2048, m.max_positions = 2048;
  m.bias = m.qkv_bias = m.tied_embeddings = true, m.dropout = 0.1;
  /* the tables round it: SC'21 lists 1.65B as 1.7 */
  double l = (double)layers, h = (double)hidden;
  PX_ASSERT_REL((double)px_model_param_count(&m), 12 * l * h * h * (1 + 13 / (12 * h) + (51200 + 2048) / (12 * l * h)),
                1e-3);
  return m;
}

/* The plan run again with the GEMMs of its runs' era (late-2020 software,
 * tests/data/gemm_a100_2020.csv, era_max from gemm_max_efficiency_2020) in
 * place of the preset's 2025 figure, nothing else changed (the plan keeps
 * the preset's); the older GEMMs must give a slower step than preset's run. */
static void sim_gemm_2020(px_plan *plan, const px_sim_opts *o, double era_max, const px_sim_result *preset,
                          px_sim_result *r) {
  double keep = plan->cluster.gpu.gemm_max_efficiency;
  plan->cluster.gpu.gemm_max_efficiency = era_max;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, o, r, &err), PX_OK);
  plan->cluster.gpu.gemm_max_efficiency = keep;
  CU_ASSERT(r->step_time_s > preset->step_time_s);
}

static void test_megatron_table1(void) {
  double era_max = gemm_max_efficiency_2020();
  FILE *fp = fopen(px_test_path("tests/data/megatron_sc21_table1.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  int rows = 0;
  double sum_abs = 0;
  double sum_abs_j = 0;
  double sum_abs_e = 0;
  fprintf(stderr, "\n  %8s %3s %3s %5s  %9s %9s %7s  %-26s  %s\n", "params_b", "tp", "pp", "gpus", "published", "--jitter 0",
          "error", "default straggler (asserted)", "2020 GEMM, default straggler");
  FILE *md =
      doc_block("validation-sc21",
                "| params | tp | pp | GPUs | mbs | vpp | published TFLOP/s/GPU | simulated, default straggler | error "
                "| `--jitter 0` | error | 2020 GEMM, default straggler | error |\n"
                "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  err_range rng_j = {0}, rng_e = {0}, gpu_rng = {0};
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == 'p') continue;
    double params_b, tflops, pct, agg;
    long long heads, hidden, layers, tp, pp, gpus, gbs, mbs, vpp, ddp_overlap;
    if (sscanf(line, "%lf,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%lf,%lf,%lld,%lld,%lld", &params_b, &heads, &hidden,
               &layers, &tp, &pp, &gpus, &gbs, &tflops, &pct, &agg, &mbs, &vpp, &ddp_overlap) != 14)
      continue;
    char name[32];
    snprintf(name, sizeof name, "gpt-%.1fb", params_b);
    px_model m = megatron_gpt(name, layers, hidden, heads);
    /* The paper's setup: fp16, full recomputation, unfused attention, no SP
     * or ZeRO, blocking p2p, TP collectives in line (Megatron-LM 2021 overlapped
     * none of them; the default's tp-bwd came later, so the overlap is set
     * here); each row's micro-batch, interleaving and DDP as its reproduction
     * script runs it (the CSV's header): PyTorch DDP's all-reduce overlaps
     * the backward, Megatron's local DDP reduces after it. */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.mbs = mbs, p.gbs = gbs, p.recompute = PX_RECOMPUTE_FULL, p.precision = PX_PREC_FP16;
    p.attention = PX_ATTN_UNFUSED, p.overlap = PX_OVERLAP_ZERO | (ddp_overlap ? PX_OVERLAP_DP : 0);
    if (vpp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = vpp;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-a100", gpus, &p, &err), PX_OK);
    /* With the default straggler: dgx-a100's kernel figures come from
     * single-GPU microbenchmarks (MAMF, BabelStream), which hold none of a
     * cluster's GPU-to-GPU spread. The --jitter 0 figures are printed
     * beside, for docs/validation.md. Nothing here is fitted to this table (the
     * project's rule): the band is a guard against regressions, not a
     * claim of accuracy; docs/validation.md reports the errors. */
    px_sim_opts o = {.skip_exposed = true}, oj = o;
    o.no_straggler = true;
    px_sim_result r, rj;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &oj, &rj, &err), PX_OK);
    CU_ASSERT_DOUBLE_EQUAL(plan.cluster.gpu.jitter, PX_GPU_JITTER_DEFAULT, 0);
    CU_ASSERT(rj.step_time_s > r.step_time_s);
    /* Table 1's TFLOP/s count the recomputation: our hardware FLOPs. */
    double sim_tflops = r.hfu * plan.cluster.gpu.peak_flops[PX_DTYPE_FP16] / 1e12;
    double sim_j = rj.hfu * plan.cluster.gpu.peak_flops[PX_DTYPE_FP16] / 1e12;
    double e = (sim_tflops - tflops) / tflops, ej = (sim_j - tflops) / tflops;
    px_sim_result re;
    sim_gemm_2020(&plan, &oj, era_max, &rj, &re);
    double sim_e = re.hfu * plan.cluster.gpu.peak_flops[PX_DTYPE_FP16] / 1e12, ee = (sim_e - tflops) / tflops;
    fprintf(stderr, "  %8.1f %3lld %3lld %5lld  %9.0f %9.1f %+6.1f%%  %9.1f %+6.1f%% (x%.4f)  %9.1f %+6.1f%%\n", params_b,
            tp, pp, gpus, tflops, sim_tflops, 100 * e, sim_j, 100 * ej, rj.straggler_stretch, sim_e, 100 * ee);
    char b[3][24];
    if (md)
      fprintf(md, "| %.1fB | %lld | %lld | %lld | %lld | %lld | %.0f | %.1f | %s | %.1f | %s | %.1f | %s |\n", params_b,
              tp, pp, gpus, mbs, vpp, tflops, sim_j, doc_pct(ej, b[0]), sim_tflops, doc_pct(e, b[1]), sim_e,
              doc_pct(ee, b[2]));
    err_add(&rng_j, ej), err_add(&rng_e, ee), err_add(&gpu_rng, (double)gpus);
    band_row(&plan, ej, "Megatron-LM SC'21");
    CU_ASSERT(ej > -0.20 && ej < 0.20);
    CU_ASSERT(ee > -0.10 && ee < 0.10); /* the validation: the runs' own era's GEMMs, every row within 10% */
    sum_abs_e += ee < 0 ? -ee : ee;
    px_sim_result_free(&re);
    sum_abs += e < 0 ? -e : e;
    sum_abs_j += ej < 0 ? -ej : ej;
    rows++;
    px_sim_result_free(&r);
    px_sim_result_free(&rj);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 10);
  fprintf(stderr, "  mean absolute error: with the default straggler %.1f%%, --jitter 0 %.1f%%, 2020 GEMM %.1f%%\n",
          100 * sum_abs_j / rows, 100 * sum_abs / rows, 100 * sum_abs_e / rows);
  char b[4][24], gr[72];
  if (md)
    fprintf(md,
            "\nMean absolute error: with the default straggler %.1f%% (%s to %s), `--jitter 0` %.1f%%, the 2020 GEMM "
            "%.1f%% (%s to %s).\n",
            100 * sum_abs_j / rows, doc_pct(rng_j.min, b[0]), doc_pct(rng_j.max, b[1]), 100 * sum_abs / rows,
            100 * sum_abs_e / rows, doc_pct(rng_e.min, b[2]), doc_pct(rng_e.max, b[3]));
  doc_block_end(md, "validation-sc21");
  snprintf(doc_headline[DOC_SC21], sizeof doc_headline[DOC_SC21],
           "| [Megatron-LM SC'21](docs/validation.md#megatron-lm-sc21), Table 1: %d runs of GPT 1.7B-1T on A100s | "
           "%s | %s to %s (mean \\|error\\| %.1f%%); with a GEMM figure of the runs' era (2020) %s to %s "
           "(%.1f%%) |\n",
           rows, doc_gpus(&gpu_rng, gr), doc_pct(rng_j.min, b[0]), doc_pct(rng_j.max, b[1]), 100 * sum_abs_j / rows,
           doc_pct(rng_e.min, b[2]), doc_pct(rng_e.max, b[3]), 100 * sum_abs_e / rows);
  CU_ASSERT(sum_abs_j / rows < 0.15);
  CU_ASSERT(sum_abs_e / rows < 0.05);
}

/* ---- Korthikanti et al. 2022: sequence parallelism, selective recomputation ---- */

/* Table 5's runs, full recomputation and SP with selective, and the 530B at
 * 8-way DP (tests/data/korthikanti2022.csv), each as the paper ran it (the
 * CSV's header), on dgx-a100 with the preset's figures and with the 2020
 * GEMM, the default straggler in both. Compared as throughput: the published
 * iteration time over the simulated one, or the MFUs where only an MFU is
 * published (the plan's model FLOPs are the paper's Eq. 7, checked); > 0 is
 * optimistic. Nothing is fitted to these runs: the bands guard against
 * regressions (docs/validation.md gives the errors). */
static void test_korthikanti2022(void) {
  double era_max = gemm_max_efficiency_2020();
  FILE *fp = fopen(px_test_path("tests/data/korthikanti2022.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  int rows = 0;
  double sum_abs = 0, sum_abs_e = 0;
  fprintf(stderr, "\n  %5s %-9s %2s %5s %3s  %-14s  %-22s  %s\n", "model", "recompute", "sp", "gpus", "vpp",
          "published", "preset (asserted)", "2020 GEMM (asserted)");
  FILE *md = doc_block("validation-korthikanti2022",
                       "| model | recompute | SP | GPUs | published | preset | error | 2020 GEMM | error |\n"
                       "| --- | --- | :-: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  err_range rng = {0}, rng_e = {0}, gpu_rng = {0};
  while (fgets(line, sizeof line, fp)) {
    char name[16], rc_name[16];
    long long heads, hidden, layers, tp, pp, gpus, gbs, mbs, vpp, sp;
    double iter_s, mfu_pct, hfu_pct;
    if (line[0] == '#' ||
        sscanf(line, "%15[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%15[^,],%lf,%lf,%lf", name, &heads,
               &hidden, &layers, &tp, &pp, &gpus, &gbs, &mbs, &vpp, &sp, rc_name, &iter_s, &mfu_pct, &hfu_pct) != 15)
      continue;
    CU_ASSERT_FATAL(iter_s > 0 || mfu_pct > 0);
    int rc = -1;
    for (int i = 0; i < PX_RECOMPUTE_COUNT; i++)
      if (!strcmp(rc_name, px_recompute_names[i])) rc = i;
    CU_ASSERT_FATAL(rc == PX_RECOMPUTE_FULL || rc == PX_RECOMPUTE_SELECTIVE);
    px_model m = megatron_gpt(name, layers, hidden, heads);
    /* The paper's setup (the CSV's header): fp16, unfused attention, the
     * backward TP overlap (tp-bwd, Sections 4.2.2 and 6.2), blocking p2p,
     * gradient all-reduce after the backward, no ZeRO. */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.mbs = mbs, p.gbs = gbs, p.sp = (int)sp, p.recompute = rc, p.precision = PX_PREC_FP16;
    p.attention = PX_ATTN_UNFUSED, p.overlap = PX_OVERLAP_TP_BWD;
    if (vpp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = vpp;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-a100", gpus, &p, &err), PX_OK);
    /* Appendix A, Eq. 7: the paper's model FLOPs, B the global batch */
    double B = (double)gbs, L = (double)layers, h = (double)hidden, s = 2048, v = 51200;
    PX_ASSERT_REL(plan.model_flops_per_step, 72 * B * L * s * h * h * (1 + s / (6 * h) + v / (12 * h * L)), 1e-3);
    px_sim_opts o = {.skip_exposed = true};
    px_sim_result r, re;
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
    CU_ASSERT(r.fits); /* the paper ran each on 80 GB */
    sim_gemm_2020(&plan, &o, era_max, &r, &re);
    double e = iter_s > 0 ? iter_s / r.step_time_s - 1 : r.mfu / (mfu_pct / 100) - 1;
    double ee = iter_s > 0 ? iter_s / re.step_time_s - 1 : re.mfu / (mfu_pct / 100) - 1;
    /* printed: the MFU Eq. 7 gives a published time without one */
    char pub[32] = "";
    if (iter_s > 0) snprintf(pub, sizeof pub, "%.2f s", iter_s);
    double pub_mfu = mfu_pct > 0 ? mfu_pct / 100 : r.mfu * r.step_time_s / iter_s;
    fprintf(stderr, "  %5s %-9s %2lld %5lld %3lld  %8s %5.1f%%  %6.2f s %5.1f%% %+6.1f%%  %6.2f s %5.1f%% %+6.1f%%\n",
            name, rc_name, sp, gpus, vpp, pub, 100 * pub_mfu, r.step_time_s, 100 * r.mfu, 100 * e, re.step_time_s,
            100 * re.mfu, 100 * ee);
    if (md) { /* the time, or the MFU where only an MFU is published */
      char model[16], b[3][32], pub_s[32], pre[32], era[32];
      snprintf(model, sizeof model, "%s", name);
      model[strlen(model) - 1] = (char)(model[strlen(model) - 1] == 'b' ? 'B' : 'T');
      if (iter_s > 0) {
        snprintf(pub_s, sizeof pub_s, "%.2f s", iter_s);
        snprintf(pre, sizeof pre, "%.2f s", r.step_time_s), snprintf(era, sizeof era, "%.2f s", re.step_time_s);
      } else {
        snprintf(pub_s, sizeof pub_s, "MFU %.1f%%", mfu_pct);
        snprintf(pre, sizeof pre, "%.1f%%", 100 * r.mfu), snprintf(era, sizeof era, "%.1f%%", 100 * re.mfu);
      }
      fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", model, rc_name, sp ? "yes" : "no",
              doc_count(gpus, b[0]), pub_s, pre, doc_pct(e, b[1]), era, doc_pct(ee, b[2]));
    }
    err_add(&rng, e), err_add(&rng_e, ee), err_add(&gpu_rng, (double)gpus);
    band_row(&plan, e, "Korthikanti et al. 2022");
    /* SC'21's bands, one standard for both validations (measured: preset
     * +6.6% to +17.5%, mean 11.3%; 2020 GEMM -8.2% to +4.5%, mean 3.9%) */
    CU_ASSERT(e > -0.20 && e < 0.20);
    CU_ASSERT(ee > -0.10 && ee < 0.10);
    sum_abs += fabs(e), sum_abs_e += fabs(ee);
    rows++;
    px_sim_result_free(&r);
    px_sim_result_free(&re);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 10);
  fprintf(stderr, "  mean absolute error: preset %.1f%%, 2020 GEMM %.1f%%\n", 100 * sum_abs / rows,
          100 * sum_abs_e / rows);
  char b[4][24], gr[72];
  if (md)
    fprintf(md, "\nMean absolute error: the preset %.1f%% (%s to %s), the 2020 GEMM %.1f%% (%s to %s).\n",
            100 * sum_abs / rows, doc_pct(rng.min, b[0]), doc_pct(rng.max, b[1]), 100 * sum_abs_e / rows,
            doc_pct(rng_e.min, b[2]), doc_pct(rng_e.max, b[3]));
  doc_block_end(md, "validation-korthikanti2022");
  snprintf(doc_headline[DOC_KORTHIKANTI], sizeof doc_headline[DOC_KORTHIKANTI],
           "| [Korthikanti et al. 2022](docs/validation.md#korthikanti-et-al-2022): %d runs of GPT 22B-1T with SP and "
           "selective or full recomputation on A100s | %s | %s to %s (mean \\|error\\| %.1f%%); 2020 GEMM %s to "
           "%s (%.1f%%) |\n",
           rows, doc_gpus(&gpu_rng, gr), doc_pct(rng.min, b[0]), doc_pct(rng.max, b[1]), 100 * sum_abs / rows,
           doc_pct(rng_e.min, b[2]), doc_pct(rng_e.max, b[3]), 100 * sum_abs_e / rows);
  CU_ASSERT(sum_abs / rows < 0.15);
  CU_ASSERT(sum_abs_e / rows < 0.05);
}

/* ---- Llama 3 405B on H100 (Llama 3 paper, Table 4) ---- */

/* Meta's published TFLOP/s a GPU beside the simulated ones, on dgx-h100's
 * microbenchmark figures. Printed for docs/validation.md; the band only guards
 * against regressions (the model is optimistic here). */
static void test_llama3_table4(void) {
  FILE *fp = fopen(px_test_path("tests/data/llama3_table4.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-405b", &m, &err), PX_OK);
  char line[256];
  int rows = 0;
  fprintf(stderr, "\n  %6s %3s %3s %3s %4s %7s  %9s %9s %7s  %9s %7s\n", "gpus", "tp", "cp", "pp", "dp", "seq",
          "published", "simulated", "error", "half sq.", "error");
  char errs[128] = ""; /* each row's error, for the headline */
  err_range gpu_rng = {0};
  FILE *md = doc_block("validation-llama3",
                       "| GPUs | tp | cp | pp | dp | seq | published TFLOP/s/GPU | simulated | error "
                       "| simulated, attention as half the square | error |\n"
                       "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  while (fgets(line, sizeof line, fp)) {
    long long gpus, tp, cp, pp, dp, seq, gbs;
    double tflops;
    if (line[0] == '#' ||
        sscanf(line, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf", &gpus, &tp, &cp, &pp, &dp, &seq, &gbs, &tflops) != 8)
      continue;
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.cp = cp, p.pp = pp, p.dp = dp, p.seq = seq, p.gbs = gbs, p.mbs = 1, p.sp = 1, p.zero = 1;
    p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 2, p.precision = PX_PREC_BF16;
    if (cp > 1) p.cp_algo = PX_CP_ALLGATHER;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
    px_sim_result r;
    sim_row(&plan, &r);
    /* Table 4 counts model FLOPs (MFU against the bf16 peak); the paper does not say whether causal
     * attention counts the whole square, as parallax does, or half (12 s h L a token fwd+bwd either way
     * or half of it: 4% at 8K, 40% at 131K), so the half count is printed beside it */
    double sim = r.mfu * plan.cluster.gpu.peak_flops[PX_DTYPE_BF16] / 1e12, e = (sim - tflops) / tflops;
    double half = sim - r.tokens_per_s / (double)gpus * 6.0 * (double)seq * (double)(m.heads * m.head_dim) * (double)m.layers / 1e12;
    fprintf(stderr, "  %6lld %3lld %3lld %3lld %4lld %7lld  %9.0f %9.1f %+6.1f%%  %9.1f %+6.1f%%\n", gpus, tp, cp, pp, dp,
            seq, tflops, sim, 100 * e, half, 100 * (half - tflops) / tflops);
    char b[4][32];
    if (md)
      fprintf(md, "| %s | %lld | %lld | %lld | %lld | %s | %.0f | %.1f | %s | %.1f | %s |\n", doc_count(gpus, b[0]), tp,
              cp, pp, dp, doc_count(seq, b[1]), tflops, sim, doc_pct(e, b[2]), half,
              doc_pct((half - tflops) / tflops, b[3]));
    size_t k = strlen(errs);
    snprintf(errs + k, sizeof errs - k, "%s%s", rows ? ", " : "", doc_pct(e, b[2]));
    err_add(&gpu_rng, (double)gpus);
    band_row(&plan, e, "Llama 3 paper");
    /* pessimistic to -20%: at 16,384 GPUs 16 micro-batches run on 16 stages, whose interleaved bubble
     * Meta cut with schedule changes this plan does not make (the paper's Section 3.3.2) */
    CU_ASSERT(e > -0.20 && e < 0.40);
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 3);
  doc_block_end(md, "validation-llama3");
  snprintf(doc_headline[DOC_LLAMA3], sizeof doc_headline[DOC_LLAMA3],
           "| [Llama 3 paper](docs/validation.md#llama-3-paper-table-4), Table 4: Llama 3 405B at 8K and 131K tokens "
           "on H100s | %s | %s |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), errs);
}

/* ---- Llama 2, 3 and GPT-3 on H100 (NVIDIA's NeMo and Megatron-Bridge performance tables) ---- */

/* Megatron-Bridge's model FLOPs per token (flop_utils.py, transformer_flops;
 * the CSV's header): the vocabulary padded to a multiple of 128 x tp, causal
 * attention as half the square (half) or, as NeMo 24.07 counted it, the
 * whole square. */
static double nemo_flops_per_token(const px_model *m, int64_t seq, int64_t tp, bool half) {
  double h = (double)m->hidden, q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
  int64_t mult = 128 * tp, vocab = (m->vocab + mult - 1) / mult * mult;
  double mlp = (m->mlp == PX_MLP_SWIGLU ? 3.0 : 2.0) * h * (double)m->ffn_hidden;
  double attn = h * (q + 2 * kv) + q * h + (half ? 1.0 : 2.0) * q * (double)seq;
  return 6.0 * (double)m->layers * (mlp + attn) + 6.0 * h * (double)vocab;
}

/* NVIDIA's published tokens/s a GPU beside the simulated ones, on
 * dgx-h100's microbenchmark figures, each row with its recipe's settings
 * (the CSV's header): Megatron-Bridge's tables (NeMo 25.09-26.02) and
 * NeMo 24.07's. Tokens/s are compared: no FLOP accounting touches them;
 * the TFLOP/s are printed in the tables' accounting. Printed for the
 * docs; the bands only guard against regressions (optimistic:
 * docs/validation.md). */
static void test_megatron_bridge_h100(void) {
  FILE *fp = fopen(px_test_path("tests/data/megatron_bridge_h100.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0;
  err_range errs[2] = {{0}}, gpu_rng = {0};
  fprintf(stderr, "\n  %-7s %-11s %5s %2s %2s %2s %2s %4s %4s  %9s %9s  %9s %9s %7s  %9s %s\n", "release", "model",
          "gpus", "tp", "pp", "cp", "vp", "gbs", "zero", "tok/s pub", "tok/s sim", "TFLOP pub", "TFLOP sim", "error",
          "px TFLOP", "fits");
  FILE *md =
      doc_block("validation-megatron-bridge",
                "| release | model | GPUs | tp·pp·cp, vp | GBS | ZeRO | published tokens/s/GPU | simulated | error "
                "| published TFLOP/s/GPU | simulated, their count |\n"
                "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  while (fgets(line, sizeof line, fp)) {
    char release[16], name[32], prec[16], count[8];
    long long gpus, gbs, mbs, seq, fsdp, tp, pp, cp, vp;
    double tokens, tflops;
    if (line[0] == '#' ||
        sscanf(line, "%15[^,],%31[^,],%lld,%15[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%lf,%7[a-z]", release,
               name, &gpus, prec, &gbs, &mbs, &seq, &fsdp, &tp, &pp, &cp, &vp, &tokens, &tflops, count) != 15)
      continue;
    px_model m;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(name, &m, &err), PX_OK);
    /* the tables' TFLOP/s are their tokens/s times this formula (rounding: within 1%) */
    CU_ASSERT(!strcmp(count, "half") || !strcmp(count, "full"));
    PX_ASSERT_REL(tflops * 1e12 / tokens, nemo_flops_per_token(&m, seq, tp, !strcmp(count, "half")), 0.01);
    int old = strcmp(release, "25") < 0; /* NeMo 24.07: mid-2024 software */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.cp = cp, p.dp = gpus / (tp * pp * cp), p.seq = seq, p.gbs = gbs, p.mbs = mbs;
    p.sp = tp > 1, p.zero = fsdp ? 3 : 1, p.overlap = PX_OVERLAP_ALL, p.cp_algo = PX_CP_RING;
    p.precision = PX_PREC_FP8, p.recompute = PX_RECOMPUTE_NONE;
    p.fp8_recipe = !strcmp(prec, "fp8-ds") ? PX_FP8_DELAYED : PX_FP8_CURRENT;
    if (vp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = vp;
    /* Megatron's pipeline split counting the embedding and the loss as a
     * layer each: the first and the last chunk one layer short */
    int64_t chunks = pp * vp;
    if (m.layers % chunks && (m.layers + 2) % chunks == 0) {
      CU_ASSERT_FATAL(chunks <= PX_MAX_CHUNK_LIST);
      p.nchunk_layers = (int32_t)chunks;
      for (int64_t c = 0; c < chunks; c++)
        p.chunk_layers[c] = (uint16_t)((m.layers + 2) / chunks - (c == 0 || c == chunks - 1));
    }
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
    px_sim_result r;
    sim_row(&plan, &r);
    double sim_tokens = r.tokens_per_s / (double)gpus, e = sim_tokens / tokens - 1;
    fprintf(stderr, "  %-7s %-11s %5lld %2lld %2lld %2lld %2lld %4lld %4d  %9.0f %9.0f  %9.0f %9.1f %+6.1f%%  %9.1f %s\n",
            release, name, gpus, tp, pp, cp, vp, gbs, p.zero, tokens, sim_tokens, tflops, sim_tokens * tflops / tokens,
            100 * e, r.model_tflops_per_gpu, r.fits ? "yes" : "no");
    if (md) {
      char b[5][32], vps[32] = "", mbss[32] = "";
      if (vp > 1) snprintf(vps, sizeof vps, ", %lld", vp);
      if (mbs > 1) snprintf(mbss, sizeof mbss, " (mbs %lld)", mbs);
      fprintf(md, "| %s | `%s`%s | %s | %lld·%lld·%lld%s | %s | %d | %s | %s | %s | %.0f | %.1f |\n", release, name,
              mbss, doc_count(gpus, b[0]), tp, pp, cp, vps, doc_count(gbs, b[1]), p.zero,
              doc_count(llround(tokens), b[2]), doc_count(llround(sim_tokens), b[3]), doc_pct(e, b[4]), tflops,
              sim_tokens * tflops / tokens);
    }
    /* measured (2026-11-25) +13.8% to +30.7% on Megatron-Bridge's rows,
     * +29.5% to +48.6% on 24.07's: each band leaves some 15 points above
     * its worst row for the cluster figures others are changing, and
     * fails a row that turns 10% pessimistic */
    CU_ASSERT(e > -0.10 && e < (old ? 0.65 : 0.45));
    err_add(&errs[old], e), err_add(&gpu_rng, (double)gpus);
    band_row(&plan, e, old ? "NeMo 24.07" : "Megatron-Bridge");
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 15);
  CU_ASSERT_EQUAL(errs[1].n, 7);
  err_print("Megatron-Bridge 25.09-26.02: ", &errs[0]);
  err_print("NeMo 24.07: ", &errs[1]);
  char b[6][24];
  if (md)
    fprintf(md, "\nMean error: Megatron-Bridge (25.09-26.02) %s (%s to %s), NeMo 24.07 %s (%s to %s).\n",
            doc_pct(errs[0].sum / errs[0].n, b[0]), doc_pct(errs[0].min, b[1]), doc_pct(errs[0].max, b[2]),
            doc_pct(errs[1].sum / errs[1].n, b[3]), doc_pct(errs[1].min, b[4]), doc_pct(errs[1].max, b[5]));
  doc_block_end(md, "validation-megatron-bridge");
  snprintf(doc_headline[DOC_BRIDGE], sizeof doc_headline[DOC_BRIDGE],
           "| [Megatron-Bridge](docs/validation.md#megatron-bridge-and-nemo-on-h100) (NeMo 25.09-26.02): Llama 3 "
           "8B-405B in FP8 on H100s; NeMo 24.07's older rows | %s | %s to %s (mean %s); NeMo 24.07 %s to %s "
           "(mean %s) |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), doc_pct(errs[0].min, b[1]), doc_pct(errs[0].max, b[2]),
           doc_pct(errs[0].sum / errs[0].n, b[0]), doc_pct(errs[1].min, b[4]), doc_pct(errs[1].max, b[5]),
           doc_pct(errs[1].sum / errs[1].n, b[3]));
}

/* ---- Llama 3.1 on H100 with FSDP2, TP and PP (TorchTitan's benchmarks) ---- */

/* torchtitan's default pipeline split (pipelining_utils.py,
 * generate_split_points): each of the stages gets layers / stages, the
 * middle ones one more while the remainder lasts, the last the rest. */
static void torchtitan_split(int64_t layers, int64_t stages, px_parallel *p) {
  int64_t base = layers / stages, extra = layers % stages, left = layers;
  CU_ASSERT_FATAL(stages <= PX_MAX_CHUNK_LIST);
  p->nchunk_layers = (int32_t)stages;
  for (int64_t c = 0; c < stages - 1; c++) {
    int64_t n = base + (c > 0 && extra > 0);
    if (c > 0 && extra > 0) extra--;
    p->chunk_layers[c] = (uint16_t)n, left -= n;
  }
  p->chunk_layers[stages - 1] = (uint16_t)left;
}

/* The torchtitan team's published tokens/s a GPU (Llama 3.1 8B-405B, FSDP2
 * on 8-128 GPUs, FSDP2 + TP on 256, + PP on 512) beside the simulated ones
 * on dgx-h100, each row as torchtitan runs it (the CSV's header: settings,
 * sources, what parallax cannot express). Their GPUs are 500 W HBM2e H100s,
 * slower than the preset. Printed for docs/validation.md; the band only guards
 * against regressions (optimistic). */
static void test_torchtitan_h100(void) {
  FILE *fp = fopen(px_test_path("tests/data/torchtitan_h100.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0, prev_table = 0, prev_compile = 0;
  double prev_pub = 0, prev_sim = 0;
  err_range errs = {0}, gpu_rng = {0};
  fprintf(stderr, "\n  %2s %-11s %4s %4s %4s %3s %4s %2s %2s %-11s %3s %5s  %9s %9s %7s  %7s %7s\n", "tb", "model",
          "gpus", "prec", "comp", "lbs", "fsdp", "tp", "pp", "schedule", "mb", "async", "tok/s pub", "tok/s sim",
          "error", "GiB pub", "GiB sim");
  FILE *md = doc_block("validation-torchtitan",
                       "| table | model | GPUs | layout | precision | published tokens/s/GPU | simulated | error "
                       "| published GiB | simulated GiB |\n"
                       "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  while (fgets(line, sizeof line, fp)) {
    char name[32], prec[8], sched[16], ac[16];
    int table, compiled, async_tp;
    long long gpus, seq, lbs, gbs, fsdp, tp, pp, vp, mb;
    double tokens, mem_gib;
    if (line[0] == '#' ||
        sscanf(line, "%d,%31[^,],%lld,%7[^,],%d,%lld,%lld,%lld,%lld,%lld,%lld,%15[^,],%lld,%lld,%15[^,],%d,%lf,%lf",
               &table, name, &gpus, prec, &compiled, &seq, &lbs, &gbs, &fsdp, &tp, &pp, sched, &vp, &mb, ac, &async_tp,
               &tokens, &mem_gib) != 18)
      continue;
    px_model m;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(name, &m, &err), PX_OK);
    /* the layout adds up: FSDP x TP x PP GPUs, lbs x FSDP sequences, the
     * micro-batches torchtitan's PP makes (one a stage, none without PP) */
    CU_ASSERT_EQUAL(fsdp * tp * pp, gpus);
    CU_ASSERT_EQUAL(lbs * fsdp, gbs);
    CU_ASSERT_EQUAL(mb, pp > 1 ? pp * vp : 1);
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.dp = fsdp, p.seq = seq, p.gbs = gbs, p.mbs = lbs / mb, p.sp = tp > 1, p.zero = 3;
    p.main_grad = PX_MAIN_GRAD_FP32; /* FSDP2's reduce_dtype float32 */
    p.recompute = !strcmp(ac, "full") ? PX_RECOMPUTE_FULL : PX_RECOMPUTE_SELECTIVE;
    CU_ASSERT(!strcmp(ac, "full") || !strcmp(ac, "selective-op"));
    p.overlap = async_tp ? PX_OVERLAP_ALL : PX_OVERLAP_DP | PX_OVERLAP_ZERO | PX_OVERLAP_PP;
    p.precision = !strcmp(prec, "fp8") ? PX_PREC_FP8 : PX_PREC_BF16;
    if (p.precision == PX_PREC_FP8) p.fp8_recipe = PX_FP8_CURRENT;
    if (pp > 1) {
      p.reshard = 0, p.grad_accum = PX_ACCUM_FULL;
      p.schedule = !strcmp(sched, "interleaved") ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B, p.vpp = vp;
      torchtitan_split(m.layers, pp * vp, &p);
    }
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
    px_sim_result r;
    sim_row(&plan, &r);
    uint64_t peak = 0;
    for (int64_t s = 0; s < plan.par.pp; s++) peak = plan.mem[s].peak_bytes > peak ? plan.mem[s].peak_bytes : peak;
    double sim = r.tokens_per_s / (double)gpus, e = sim / tokens - 1;
    fprintf(stderr,
            "  %2d %-11s %4lld %4s %4d %3lld %4lld %2lld %2lld %-11s %3lld %5d  %9.0f %9.0f %+6.1f%%  %7.1f %7.1f\n", table,
            name, gpus, prec, compiled, lbs, fsdp, tp, pp, sched, mb, async_tp, tokens, sim, 100 * e, mem_gib,
            (double)peak / (1u << 30));
    if (md) { /* FSDP x TP x PP, then the pipeline's schedule or the local batch, and what else the row sets */
      char layout[160], b[4][32];
      int n = snprintf(layout, sizeof layout, "FSDP %lld", fsdp);
      if (tp > 1) n += snprintf(layout + n, sizeof layout - (size_t)n, " × TP %lld", tp);
      if (pp > 1)
        n += snprintf(layout + n, sizeof layout - (size_t)n, " × PP %lld, %s, %lld stage%s a rank, %lld micro-batches",
                      pp, sched, vp, vp > 1 ? "s" : "", mb);
      else
        n += snprintf(layout + n, sizeof layout - (size_t)n, ", lbs %lld", lbs);
      if (!strcmp(ac, "full")) n += snprintf(layout + n, sizeof layout - (size_t)n, ", full AC");
      if (async_tp) snprintf(layout + n, sizeof layout - (size_t)n, ", async TP");
      fprintf(md, "| %d | `%s` | %s | %s | %s | %s | %s | %s | %.1f | %.1f |\n", table, name, doc_count(gpus, b[0]),
              layout,
              !strcmp(prec, "fp8") ? "Float8"
              : compiled           ? "BF16, compiled"
                                   : "BF16, eager",
              doc_count(llround(tokens), b[1]), doc_count(llround(sim), b[2]), doc_pct(e, b[3]), mem_gib,
              (double)peak / (1u << 30));
    }
    /* measured (2026-11-25) +44% to +113%, every row optimistic: the band
     * leaves some 15 points above the worst row for the cluster figures
     * others are changing, and fails a row that turns 10% pessimistic */
    CU_ASSERT(e > -0.10 && e < 1.30);
    /* each technique the table stacks (Float8, async TP, interleaving) gains
     * in the simulation as it does in the table; torch.compile is not modelled */
    if (table == prev_table && compiled && prev_compile) CU_ASSERT((sim > prev_sim) == (tokens > prev_pub));
    prev_table = table, prev_compile = compiled, prev_pub = tokens, prev_sim = sim;
    err_add(&errs, e), err_add(&gpu_rng, (double)gpus);
    band_row(&plan, e, "torchtitan");
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 10);
  err_print("", &errs);
  char b[3][24];
  if (md)
    fprintf(md, "\nMean error %s (%s to %s).\n", doc_pct(errs.sum / errs.n, b[0]), doc_pct(errs.min, b[1]),
            doc_pct(errs.max, b[2]));
  doc_block_end(md, "validation-torchtitan");
  snprintf(doc_headline[DOC_TORCHTITAN], sizeof doc_headline[DOC_TORCHTITAN],
           "| [torchtitan](docs/validation.md#torchtitan-on-h100): Llama 3.1 8B-405B with FSDP2, TP and PP, BF16 and "
           "Float8, on 500 W H100s | %s | %s to %s (mean %s) |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), doc_pct(errs.min, b[1]), doc_pct(errs.max, b[2]),
           doc_pct(errs.sum / errs.n, b[0]));
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
  CU_ASSERT_EQUAL_FATAL(compile(plan, &m, cluster, gpus, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 16, &p, &err), PX_OK);
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
 * dispatch moves every token to every EP rank. */
static void test_moe_sim(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  struct {
    int64_t ep;
    double imbalance;
    int dispatch;
    int overlap;
  } k[] = {{4, 1.0, PX_MOE_A2A, -1}, {8, 1.0, PX_MOE_A2A, -1}, {8, 1.5, PX_MOE_A2A, -1}, {8, 1.0, PX_MOE_ALLGATHER, -1},
           {8, 1.0, PX_MOE_A2A, PX_OVERLAP_ALL}};
  px_sim_result r[5];
  double ep_bytes[5];
  for (size_t i = 0; i < 5; i++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 2, p.pp = 1, p.dp = 32, p.zero = 1, p.mbs = 1, p.gbs = 256, p.seq = 4096, p.sp = 1;
    p.ep = k[i].ep, p.moe_imbalance = k[i].imbalance, p.moe_dispatch = k[i].dispatch, p.overlap = k[i].overlap;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(plan.grid.ep_place.intra, k[i].ep == 4);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r[i], &err), PX_OK);
    ep_bytes[i] = plan.totals[0].wire_bytes[PX_GROUP_EP];
    px_plan_free(&plan);
  }
  CU_ASSERT(r[1].comm_tp_s > 2 * r[0].comm_tp_s); /* in-layer communication: the EP exchanges across nodes */
  CU_ASSERT(r[1].step_time_s > r[0].step_time_s);
  CU_ASSERT(r[2].step_time_s > 1.1 * r[1].step_time_s);
  /* all-gather: each rank sends its tokens to 7 others, against 7/8 of its 2 choices: ep / k = 4x the bytes */
  PX_ASSERT_REL(ep_bytes[3], 4 * ep_bytes[1], 1e-12);
  CU_ASSERT(r[3].step_time_s > r[1].step_time_s);
  /* with the layers' collectives overlapped, the router's and permutation's work hides part of the EP exchanges */
  CU_ASSERT(r[4].step_time_s < r[1].step_time_s && r[4].comm_exposed_s < r[1].comm_exposed_s);
  for (size_t i = 0; i < 5; i++) px_sim_result_free(&r[i]);
  /* group-limited routing: DeepSeek-V3's tokens reach at most 4 of the 8 nodes of EP 64, so half of each token's 8
   * copies cross nodes (one a node, fanned out there); without the groups, all */
  px_model ds;
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &ds, &err), PX_OK);
  px_sim_result g[2];
  double gbytes[2];
  for (int i = 0; i < 2; i++) {
    if (i) ds.expert_groups = ds.groups_per_token = 0;
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = 1, p.pp = 4, p.dp = 256, p.zero = 3, p.mbs = 1, p.gbs = 1024, p.ep = 64, p.recompute = PX_RECOMPUTE_FULL;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &ds, "dgx-h100", 1024, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(px_plan_expert_nodes(&plan), i ? 0 : 4);
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &g[i], &err), PX_OK);
    gbytes[i] = plan.totals[1].wire_bytes[PX_GROUP_EP];
    px_plan_free(&plan);
  }
  /* per exchange each rank sends 63/64 of its copies, 7/64 in its node and 56/64 across; with the groups half of
   * those cross: 35/64 */
  PX_ASSERT_REL(gbytes[0], gbytes[1] * (7.0 / 64 + 56.0 / 64 * 0.5) / (63.0 / 64), 1e-9);
  CU_ASSERT(g[0].step_time_s < g[1].step_time_s);
  for (int i = 0; i < 2; i++) px_sim_result_free(&g[i]);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 256, &p, &err), PX_OK);
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
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 64, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-a100", 8, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
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
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
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
    plan.par.overlap = PX_OVERLAP_DEFAULT & ~PX_OVERLAP_TP_BWD;
    for (int32_t i = 0; i < bwd->nops; i++) CU_ASSERT(!px_plan_op_overlapped(&plan, bwd->ops, bwd->nops, i));
    px_plan_free(&plan);
  }
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", k[i].gpus, &p, &err), PX_OK);
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

static void test_trace(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2, p.pp = 2, p.mbs = 1, p.gbs = 8, p.schedule = PX_SCHED_ZB_H1;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
  char path[] = "/tmp/px_trace_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  px_sim_opts o = {.trace_path = path};
  px_sim_result r;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
  cJSON *root = NULL;
  CU_ASSERT_EQUAL_FATAL(px_json_load(path, &root, &err), PX_OK);
  const cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
  CU_ASSERT(cJSON_IsArray(evs) && cJSON_GetArraySize(evs) > 50);
  int stage1_compute = 0, b = 0, w = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    if (pid && tid && pid->valueint == 1 && tid->valueint == PX_STREAM_COMPUTE) stage1_compute++;
    /* the zero-bubble backward's B and W, one of each per layer and micro-batch */
    if (name && !strncmp(name, "layer_bwd mb", 12)) b++;
    if (name && !strncmp(name, "layer_bwd_w mb", 14)) w++;
  }
  CU_ASSERT(stage1_compute > 8);
  CU_ASSERT_EQUAL(b, (int)(m.layers * plan.microbatches));
  CU_ASSERT_EQUAL(w, (int)(m.layers * plan.microbatches));
  cJSON_Delete(root);
  remove(path);
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

/* fp8 GEMMs on H100: the model reproduces the cuBLASLt microbenchmark its
 * figure comes from (8192^3, per-tensor scales: 1,609 TFLOP/s) within 5%,
 * blockwise scales reach DeepGEMM's 1,350 at most, and an fp8 linear op runs
 * at the fp8 rate where its bf16 twin runs at the bf16 one. */
static void test_fp8_gemm(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  const px_gpu *g = &c.gpu;
  double peak = g->peak_flops[PX_DTYPE_FP8];
  double tensor = px_gemm_efficiency8(g, PX_DTYPE_FP8, false, 8192, 8192, 8192, 1) * peak;
  PX_ASSERT_REL(tensor, 1609e12, 0.05);
  double block = px_gemm_efficiency8(g, PX_DTYPE_FP8, true, 8192, 8192, 8192, 1) * peak;
  CU_ASSERT(block <= 1350e12 && block > 0.9 * 1350e12);
  /* a 16-bit GEMM keeps its own figure */
  PX_ASSERT_REL(px_gemm_efficiency8(g, PX_DTYPE_BF16, true, 8192, 8192, 8192, 1),
                px_gemm_efficiency(g, PX_DTYPE_BF16, 8192, 8192, 8192, 1), 1e-12);
  px_op op = {.kind = PX_OP_LINEAR, .dim = {8192, 8192, 8192, 8192, 0, 0}, .flops = 2.0 * 8192 * 8192 * 8192};
  double t16 = px_compute_op_s(g, PX_DTYPE_BF16, &op) - g->kernel_overhead_s;
  op.flags = PX_OPF_FP8;
  double t8 = px_compute_op_s(g, PX_DTYPE_BF16, &op) - g->kernel_overhead_s;
  PX_ASSERT_REL(t16 / t8, (peak * g->gemm_fp8_max_efficiency) / (g->peak_flops[PX_DTYPE_BF16] * g->gemm_max_efficiency),
                1e-9);
  /* a cast is a memory-bound pass, whatever its flags */
  px_op cast = {.kind = PX_OP_CAST, .flags = PX_OPF_FP8, .bytes = 1e9};
  PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &cast), px_compute_mem_s(g, PX_OP_CAST, 1e9), 1e-12);
}

/* Fused attention on H100 from FlashAttention-3's measurements: every
 * published point comes back exactly from the curves, and a causal forward
 * op of the benchmark's shape (batch x seq = 16k tokens, heads x head dim =
 * 2048) takes its published time within 5% (the wave of 128-row tiles and
 * the launch overhead are the rest); the causal backward, not published, is
 * the non-causal one scaled as the mask scales the forward (hd 128, 4k: 542
 * x 579 / 638 TFLOP/s); a GPU without curves keeps the GEMM model. */
static void test_attention_kernels(void) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  c.gpu.sustained_share = 1; /* a benchmark's burst against the burst model */
  const px_gpu *g = &c.gpu;
  double peak = g->peak_flops[PX_DTYPE_BF16];
  CU_ASSERT_FATAL(g->attention_len >= 7);
  for (int i = 0; i < g->attention_len; i++) {
    const px_attn_curve *a = &g->attention[i];
    for (int k = 0; k < a->n; k++) {
      int64_t s = a->seq[k], hd = a->head_dim;
      PX_ASSERT_REL(px_attn_efficiency(g, a->bwd, hd, a->causal, s) * peak, a->tflops[k] * 1e12, 1e-9);
      if (a->bwd || !a->causal) continue;
      int64_t b = 16384 / s, h = 2048 / hd;
      px_op op = {.kind = PX_OP_FLASH_ATTN, .dim = {b, s, h, h, hd, s}};
      op.flops = 2.0 * (double)(b * h) * (double)s * (double)s * (double)(2 * hd); /* the compiler's: the full square */
      double published_s = op.flops / 2 / (a->tflops[k] * 1e12);                /* FlashAttention counts causal as half */
      PX_ASSERT_REL(px_compute_op_s(g, PX_DTYPE_BF16, &op), published_s, 0.05);
    }
  }
  PX_ASSERT_REL(px_attn_efficiency(g, true, 128, true, 4096) * peak, 542e12 * 579 / 638, 1e-9);
  /* between the points: linear in log(seq); beyond them: flat */
  PX_ASSERT_REL(px_attn_efficiency(g, false, 128, true, 2896) * peak, (521 + 0.5 * (579 - 521)) * 1e12, 1e-3);
  PX_ASSERT_REL(px_attn_efficiency(g, false, 128, true, 131072) * peak, 616e12, 1e-9);
  /* a pass without a curve of either mask (A100: forward only) keeps the GEMM model */
  px_cluster a100;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-a100", &a100, &err), PX_OK);
  CU_ASSERT(px_attn_efficiency(&a100.gpu, false, 128, true, 4096) > 0);
  CU_ASSERT(px_attn_efficiency(&a100.gpu, true, 128, true, 4096) < 0);
}

/* The rows of a tests/data CSV with at least `need` fields, '#' lines
 * skipped, split at commas (the last, a source, may hold more): opened on
 * the first call, closed when it returns false; rows counts them. */
typedef struct {
  FILE *fp;
  char line[512];
  char *f[12];
  int rows;
} csv_rows;

static bool csv_next(csv_rows *r, const char *rel, int need) {
  if (!r->fp) r->fp = fopen(px_test_path(rel), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->fp);
  while (fgets(r->line, sizeof r->line, r->fp)) {
    if (r->line[0] == '#') continue;
    int n = 0;
    r->line[strcspn(r->line, "\r\n")] = '\0';
    for (char *p = r->line; n < 12 && p; n++) {
      r->f[n] = p;
      p = n + 1 < 12 ? strchr(p, ',') : NULL;
      if (p) *p++ = '\0';
    }
    if (n < need) continue;
    r->rows++;
    return true;
  }
  fclose(r->fp);
  r->fp = NULL;
  return false;
}

/* A preset cluster file, loaded or the test stops. */
static px_cluster preset(const char *name) {
  px_cluster c;
  px_err err = {0};
  px_status st = px_cluster_load(name, &c, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  return c;
}

/* gpu.sustained_share: mamf-finder's sustained (MSMF) over burst (MAMF)
 * matmul rate on the same GPU, the mid-points of five runs each
 * (tests/data/gemm_sustained.csv), within 1%; the presets that borrow a
 * GPU's figure carry the same; A100, with no MSMF published, keeps its bursts. */
static void test_sustained_share(void) {
  px_err err = {0};
  csv_rows r = {0};
  while (csv_next(&r, "tests/data/gemm_sustained.csv", 6)) {
    char **f = r.f;
    px_cluster c = preset(f[0]);
    double want = (atof(f[1]) + atof(f[2])) / (atof(f[3]) + atof(f[4]));
    fprintf(stderr, "\n  %s: MSMF/MAMF %.4f, sustained_share %.2f", f[0], want, c.gpu.sustained_share);
    PX_ASSERT_REL(c.gpu.sustained_share, want, 0.01);
    for (char *tok = strtok(f[5], " \r\n"); tok; tok = strtok(NULL, " \r\n")) {
      px_cluster b;
      CU_ASSERT_EQUAL_FATAL(px_cluster_load(tok, &b, &err), PX_OK);
      CU_ASSERT_EQUAL(b.gpu.sustained_share, c.gpu.sustained_share);
    }
  }
  CU_ASSERT_EQUAL(r.rows, 2);
  px_cluster a;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-a100", &a, &err), PX_OK);
  CU_ASSERT_EQUAL(a.gpu.sustained_share, 1.0);
}

/* Blackwell's fused attention: cuDNN's published causal hd-128 curves (tests/data/attention_blackwell_cudnn.csv,
 * with its source), each point exactly from its preset's gpu.attention, and a causal op of the benchmark's shape
 * (batch 1, 128 query heads, 8 KV heads), forward or backward, in the published time within the row's tol. */
static void test_attention_kernels_blackwell(void) {
  int points = 0;
  csv_rows r = {0};
  while (csv_next(&r, "tests/data/attention_blackwell_cudnn.csv", 10)) {
    char **f = r.f;
    px_cluster c = preset(f[0]);
    c.gpu.sustained_share = 1; /* a benchmark's burst against the burst model */
    const px_gpu *g = &c.gpu;
    bool bwd = !strcmp(f[1], "bwd"), causal = atoi(f[3]) != 0;
    int64_t hd = atoll(f[2]), b = atoll(f[4]), s = atoll(f[5]), h = atoll(f[6]), hkv = atoll(f[7]);
    double tflops = atof(f[8]), tol = atof(f[9]);
    PX_ASSERT_REL(px_attn_efficiency(g, bwd, hd, causal, s) * g->peak_flops[PX_DTYPE_BF16], tflops * 1e12, 1e-9);
    /* the row is one of the curve's points, not an interpolation */
    for (int i = 0; i < g->attention_len; i++)
      if (g->attention[i].bwd == bwd && g->attention[i].causal == causal && g->attention[i].head_dim == hd)
        for (int k = 0; k < g->attention[i].n; k++) points += g->attention[i].seq[k] == s;
    px_op op = {.kind = bwd ? PX_OP_FLASH_ATTN_BWD : PX_OP_FLASH_ATTN, .dim = {b, s, h, hkv, hd, s}};
    op.flops = 2.0 * (double)(b * h) * (double)s * (double)s * (double)(2 * hd) * (bwd ? 2 : 1); /* the compiler's */
    /* the benchmark's count: 4 b s^2 h hd, halved for the mask, the backward 2.5x */
    double published_s = 4.0 * (double)(b * h) * (double)s * (double)s * (double)hd / 2 * (bwd ? 2.5 : 1) / (tflops * 1e12);
    double model_s = px_compute_op_s(g, PX_DTYPE_BF16, &op);
    fprintf(stderr, "\n  %-11s %s causal s%-6lld published %8.3f ms, model %8.3f ms (%+.1f%%)", f[0], f[1], (long long)s,
            published_s * 1e3, model_s * 1e3, 100 * (model_s / published_s - 1));
    PX_ASSERT_REL(model_s, published_s, tol);
  }
  CU_ASSERT_EQUAL(r.rows, 42);
  CU_ASSERT_EQUAL(points, 42);
  /* every Blackwell preset carries curves for both passes and nothing else */
  static const char *const bw[] = {"dgx-b200", "gb200-nvl72", "dgx-gb300"};
  for (size_t i = 0; i < sizeof bw / sizeof *bw; i++) {
    px_cluster c;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(bw[i], &c, &err), PX_OK);
    CU_ASSERT_EQUAL(c.gpu.attention_len, 2);
    /* no unmasked curve: the causal one answers (no forward pair to scale the backward by) */
    CU_ASSERT_EQUAL(px_attn_efficiency(&c.gpu, true, 128, false, 8192), px_attn_efficiency(&c.gpu, true, 128, true, 8192));
    /* below the first point: flat */
    CU_ASSERT_EQUAL(px_attn_efficiency(&c.gpu, false, 64, true, 256), px_attn_efficiency(&c.gpu, false, 128, true, c.gpu.attention[0].seq[0]));
  }
}

/* A memory-bound op of `bytes` on a preset's GPU, as the simulator times it. */
static double mem_op_s(const char *name, double bytes) {
  px_cluster c = preset(name);
  px_op op = {.kind = PX_OP_GELU, .bytes = bytes};
  return px_compute_op_s(&c.gpu, PX_DTYPE_BF16, &op);
}

/* The kernel figures against the microbenchmarks they come from
 * (tests/data/gemm_microbench.csv, attention_a100_fa2.csv,
 * hbm_babelstream.csv, each with its source): the model at the benchmark's
 * shape reproduces the published figure within the row's tolerance. Presets
 * that borrow a GPU's measurement (same SMs and clocks) carry its figures. */
static void test_kernel_microbenchmarks(void) {
  px_err err = {0};
  csv_rows r = {0};
  while (csv_next(&r, "tests/data/gemm_microbench.csv", 7)) {
    char **f = r.f;
    px_cluster c = preset(f[0]);
    px_dtype dt = !strcmp(f[1], "fp8") ? PX_DTYPE_FP8 : PX_DTYPE_BF16;
    int64_t m = atoll(f[2]), n = atoll(f[3]), k = atoll(f[4]);
    double published = atof(f[5]) * 1e12, tol = atof(f[6]);
    double model = px_gemm_efficiency8(&c.gpu, dt, false, m, n, k, 1) * c.gpu.peak_flops[dt];
    fprintf(stderr, "\n  %-12s %-4s %6lldx%6lldx%6lld  published %7.1f  model %7.1f TFLOP/s  %+5.1f%%", f[0], f[1],
            (long long)m, (long long)n, (long long)k, published / 1e12, model / 1e12, 100 * (model / published - 1));
    PX_ASSERT_REL(model, published, tol);
  }
  CU_ASSERT_EQUAL(r.rows, 11);

  /* borrowed: the figures of the GPU whose measurement a preset cites */
  static const char *const borrow[][2] = {{"hgx-h200", "dgx-h100"}, {"hgx-h800", "dgx-h100"}, {"a3-mega", "dgx-h100"},
                                          {"dgx-gb300", "gb200-nvl72"}};
  for (size_t i = 0; i < sizeof borrow / sizeof *borrow; i++) {
    px_cluster b, l;
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(borrow[i][0], &b, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(borrow[i][1], &l, &err), PX_OK);
    CU_ASSERT_EQUAL(b.gpu.gemm_max_efficiency, l.gpu.gemm_max_efficiency);
    CU_ASSERT_EQUAL(b.gpu.gemm_fp8_max_efficiency, l.gpu.gemm_fp8_max_efficiency);
    CU_ASSERT_EQUAL(b.gpu.gemm_k_half, l.gpu.gemm_k_half);
  }
  /* every Blackwell preset borrows the H100's k_half (no Blackwell short-k table) */
  px_cluster h100, bw;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &h100, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-b200", &bw, &err), PX_OK);
  CU_ASSERT_EQUAL(bw.gpu.gemm_k_half, h100.gpu.gemm_k_half);

  /* A100 attention: FlashAttention-2's forward points exactly, a causal op of the row's shape in its time */
  px_cluster a100;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-a100", &a100, &err), PX_OK);
  const px_gpu *g = &a100.gpu;
  csv_rows ra = {0};
  while (csv_next(&ra, "tests/data/attention_a100_fa2.csv", 8)) {
    char **f = ra.f;
    bool causal = atoi(f[2]) != 0;
    int64_t hd = atoll(f[1]), b = atoll(f[3]), sq = atoll(f[4]), h = atoll(f[5]);
    double tflops = atof(f[6]), tol = atof(f[7]);
    PX_ASSERT_REL(px_attn_efficiency(g, false, hd, causal, sq) * g->peak_flops[PX_DTYPE_BF16], tflops * 1e12, 1e-9);
    if (causal) { /* the graphs' attention is causal: the op costs half the square */
      px_op op = {.kind = PX_OP_FLASH_ATTN, .dim = {b, sq, h, h, hd, sq}};
      op.flops = 2.0 * (double)(b * h) * (double)sq * (double)sq * (double)(2 * hd);
      double published_s = op.flops / 2 / (tflops * 1e12), model_s = px_compute_op_s(g, PX_DTYPE_BF16, &op);
      fprintf(stderr, "\n  dgx-a100 causal fwd b%lld s%lld: published %.3f ms, model %.3f ms (%+.1f%%)", (long long)b,
              (long long)sq, published_s * 1e3, model_s * 1e3, 100 * (model_s / published_s - 1));
      PX_ASSERT_REL(model_s, published_s, tol);
    }
  }
  CU_ASSERT_EQUAL(ra.rows, 4);

  /* HBM: a memory-bound op moving BabelStream Triad's bytes at its rate */
  csv_rows rh = {0};
  while (csv_next(&rh, "tests/data/hbm_babelstream.csv", 4)) {
    char **f = rh.f;
    double bytes = atof(f[1]), rate = atof(f[2]) * 1e9, model_s = mem_op_s(f[0], bytes);
    fprintf(stderr, "\n  %-9s Triad %.3g B: published %7.1f  model %7.1f GB/s  %+5.1f%%", f[0], bytes, rate / 1e9,
            bytes / model_s / 1e9, 100 * (bytes / model_s / rate - 1));
    PX_ASSERT_REL(model_s, bytes / rate, atof(f[3]));
  }
  CU_ASSERT_EQUAL(rh.rows, 4);
  /* kernel overhead: a tiny memory-bound kernel back to back on one stream, in the published time */
  csv_rows rk = {0};
  while (csv_next(&rk, "tests/data/kernel_overhead.csv", 4)) {
    char **f = rk.f;
    double us = mem_op_s(f[0], atof(f[1])) * 1e6;
    fprintf(stderr, "\n  %-9s tiny kernel, %s B: published %s-%s us, model %.3f us", f[0], f[1], f[2], f[3], us);
    CU_ASSERT(us >= atof(f[2]) && us <= atof(f[3]));
  }
  CU_ASSERT_EQUAL(rk.rows, 1);
  /* borrowed: H800 and A3 Mega carry the H100's HBM3 (80 GB at 3.35 TB/s) and its measured share */
  static const char *const hbm_borrow[] = {"hgx-h800", "a3-mega"};
  px_cluster h100hbm;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &h100hbm, &err), PX_OK);
  for (size_t i = 0; i < sizeof hbm_borrow / sizeof *hbm_borrow; i++) {
    px_cluster b;
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(hbm_borrow[i], &b, &err), PX_OK);
    CU_ASSERT_EQUAL(b.gpu.memory_efficiency, h100hbm.gpu.memory_efficiency);
    CU_ASSERT_EQUAL(b.gpu.hbm_bytes_per_s, h100hbm.gpu.hbm_bytes_per_s);
  }
  fputc('\n', stderr);
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
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, "dgx-h100", 1024, &p, &err), PX_OK);
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

int main(void) {
  static const px_test tests[] = {
      {"flows share links as computed by hand", test_network_sharing},
      {"GEMM efficiency: wave and tile quantization, measured table", test_gemm_efficiency},
      {"fp8 GEMMs: the microbenchmarks reproduced, the fp8 rate", test_fp8_gemm},
      {"fused attention: FlashAttention-3's measurements reproduced", test_attention_kernels},
      {"sustained clocks: mamf-finder's sustained over burst matmul rate", test_sustained_share},
      {"fused attention on Blackwell: cuDNN's measurements reproduced", test_attention_kernels_blackwell},
      {"kernel figures: the GEMM, attention and HBM microbenchmarks reproduced", test_kernel_microbenchmarks},
      {"bubble equals (p-1)/(vm+p-1) with free comm and uniform stages", test_bubble_exact},
      {"uneven chunks and any micro-batch count: simulated bubble vs analytic", test_bubble_uneven},
      {"zero-bubble schedules: ZB-H1 and ZB-H2 bubbles with free comm", test_bubble_zero_bubble},
      {"zero-bubble schedules: analytic bubble from FLOPs equals the simulation", test_bubble_zb_analytic},
      {"Megatron-LM SC'21 Table 1: the 2020 GEMM within 10% a row (5% mean), the preset within 20% (15%)", test_megatron_table1},
      {"Korthikanti et al. 2022 (SP, selective recompute), 10 runs: the 2020 GEMM within 10% a row (5% mean), the "
       "preset within 20% (15%)",
       test_korthikanti2022},
      {"Llama 3 405B on H100, the Llama 3 paper's Table 4 (printed)", test_llama3_table4},
      {"Llama 2, 3 and GPT-3 on H100, NeMo and Megatron-Bridge's performance tables (printed; optimistic)",
       test_megatron_bridge_h100},
      {"Llama 3.1 8B-405B on H100 with FSDP2, TP and PP, TorchTitan's benchmarks (printed; optimistic)",
       test_torchtitan_h100},
      {"deterministic; contract fields consistent", test_determinism_and_contract},
      {"simulation work flat in DP and TP", test_flat_in_dp_tp},
      {"exposing DP reduction slows the step", test_overlap_switches},
      {"offload: copies on the host link and the host's AdamW, by hand", test_offload_costs},
      {"hybrid sharding: less inter-node DP time than full sharding, both levels", test_hybrid_sharding},
      {"TP overlap up to each collective's first consumer", test_tp_overlap_dependencies},
      {"collectives hold SMs: compute beside them slows, by hand", test_collective_sm_contention},
      {"tp-bwd: Megatron-Core's backward overlap, on the compiled order", test_tp_bwd_overlap_ops},
      {"fast path: the segment path's step time with overlap and contention, fewer events", test_fast_path_exact},
      {"Chrome trace written and readable", test_trace},
      {"context parallelism: the ring hides its hops, all-gather and a2a do not", test_context_parallel_sim},
      {"mixture of experts: EP exchanges on their links, imbalance, all-gather dispatch", test_moe_sim},
      {"straggler: order statistic by hand, the step at the slowest GPU's pace", test_straggler},
  };
  int failed = px_test_main("sim", tests, sizeof tests / sizeof tests[0]);
  FILE *md = doc_block("validation-headline",
                       "| published runs | GPUs | error of the simulated step or throughput |\n"
                       "| --- | ---: | --- |\n");
  for (int i = 0; md && i < DOC_ROWS; i++) fputs(doc_headline[i], md);
  doc_block_end(md, "validation-headline");
  bands_write();
  return failed || doc_failed;
}
