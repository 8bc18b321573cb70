/* Mixture of experts as it runs: the models of its kernels against the
 * microbenchmarks they come from (DeepEP's dispatch and combine, DeepGEMM's
 * grouped GEMMs), and NVIDIA's published Megatron-Bridge MoE throughput on
 * H100 and on Blackwell (B200, GB200, GB300) against the simulator, each row
 * with its recipe's settings, each row's signed error and the means printed
 * and written as docs/validation.md's tables ("Mixture of experts on H100",
 * "... on Blackwell"), and each a run of its validated error band
 * (tests/validation/bands.h, PX_VALIDATION_BANDS). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/sim.h"
#include "tests/testplan.h"
#include "tests/testutil.h"
#include "tests/validation/bands.h"
#include "tests/validation/doc.h"

/* ---- the copies DeepEP sends: px_plan_ep_copies against the routers themselves ---- */

/* Mean distinct ranks and nodes the top-k experts of `tokens` tokens reach,
 * routed as `router` does on random scores: 0 DeepEP's benchmark (groups
 * = nodes, a group's score its best expert's), 1 DeepSeek-V3's
 * (groups_per_token of expert_groups groups by the sum of their two best
 * scores), both then the top k of the chosen groups' experts. */
static void route(int router, int64_t e, int64_t k, int64_t groups, int64_t chosen, int64_t ranks, int64_t per_node,
                  int tokens, double *out_ranks, double *out_nodes) {
  int64_t el = e / ranks, nodes = ranks / per_node, gsz = groups > 0 ? e / groups : e;
  double *s = px_talloc((size_t)e * sizeof *s), *gs = px_talloc((size_t)(groups > 0 ? groups : 1) * sizeof *gs);
  bool *in = px_talloc((size_t)e * sizeof *in), *hit = px_talloc((size_t)ranks * sizeof *hit);
  bool *node_hit = px_talloc((size_t)nodes * sizeof *node_hit);
  double sum_r = 0, sum_n = 0;
  for (int t = 0; t < tokens; t++) {
    for (int64_t i = 0; i < e; i++) s[i] = px_tunit(), in[i] = groups == 0;
    if (groups > 0) {
      for (int64_t g = 0; g < groups; g++) { /* the group's score */
        double a = -1, b = -1;
        for (int64_t i = g * gsz; i < (g + 1) * gsz; i++) {
          if (s[i] > a)
            b = a, a = s[i];
          else if (s[i] > b)
            b = s[i];
        }
        gs[g] = router == 0 ? a : a + b;
      }
      for (int64_t c = 0; c < chosen; c++) { /* the best groups */
        int64_t best = -1;
        for (int64_t g = 0; g < groups; g++)
          if (gs[g] >= 0 && (best < 0 || gs[g] > gs[best])) best = g;
        gs[best] = -1;
        for (int64_t i = best * gsz; i < (best + 1) * gsz; i++) in[i] = true;
      }
    }
    memset(hit, 0, (size_t)ranks * sizeof *hit);
    memset(node_hit, 0, (size_t)nodes * sizeof *node_hit);
    for (int64_t j = 0; j < k; j++) { /* the top k among the allowed */
      int64_t best = -1;
      for (int64_t i = 0; i < e; i++)
        if (in[i] && (best < 0 || s[i] > s[best])) best = i;
      in[best] = false;
      hit[best / el] = true, node_hit[best / el / per_node] = true;
    }
    for (int64_t r = 0; r < ranks; r++) sum_r += hit[r];
    for (int64_t n = 0; n < nodes; n++) sum_n += node_hit[n];
  }
  *out_ranks = sum_r / tokens, *out_nodes = sum_n / tokens;
  px_tfree();
}

/* DeepSeek-V3 on `ep` GPUs of `cluster` (tp 1, one micro-batch of 4,096 tokens a rank, DeepEP's and HybridEP's
 * benchmark shape), with the given routing groups, through `dispatch` (deepep or hybridep). */
static void deepseek_plan(px_plan *plan, const char *cluster, px_moe_dispatch dispatch, int64_t ep, int64_t groups,
                          int64_t chosen, px_precision prec) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  m.expert_groups = groups, m.groups_per_token = chosen;
  if (dispatch == PX_MOE_HYBRIDEP) m.experts = 8 * ep; /* HybridEP's benchmark: 8 local experts a rank */
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 1, p.pp = 1, p.dp = ep, p.ep = ep, p.mbs = 1, p.gbs = ep, p.seq = 4096, p.zero = 1;
  p.moe_dispatch = dispatch, p.precision = prec, p.recompute = PX_RECOMPUTE_FULL;
  if (prec == PX_PREC_FP8) p.fp8_recipe = PX_FP8_BLOCKWISE; /* DeepSeek-V3's: dispatched in fp8 */
  CU_ASSERT_EQUAL_FATAL(px_test_compile(plan, &m, cluster, ep, &p, &err), PX_OK);
}

/* The forward's EP exchanges of plan's MoE layer: ex[0] the dispatch, ex[1] the combine (asserted found). */
static void ep_exchanges(const px_plan *plan, const px_op *ex[2]) {
  const px_block *b = &plan->blocks[PX_BLOCK_MOE_FWD];
  ex[0] = ex[1] = NULL;
  for (int32_t i = 0; i < b->nops; i++)
    if (b->ops[i].kind == PX_OP_ALLTOALL && b->ops[i].group == PX_GROUP_EP)
      ex[!(b->ops[i].flags & PX_OPF_TO_EXPERTS)] = &b->ops[i];
  CU_ASSERT_FATAL(ex[0] && ex[1]);
}

/* The analytic copies a token's experts reach (uniform over the chosen
 * groups' experts but for each chosen group's best) against the routers
 * run on random scores: DeepEP's benchmark routing (groups = nodes, the
 * top 4) on EP 8-64 and DeepSeek-V3's (4 of 8 groups by their two best
 * scores) on EP 8-256, within 2%. */
static void test_ep_copies(void) {
  fprintf(stderr, "\n  %-9s %4s  %12s %12s  %12s %12s\n", "router", "ep", "ranks model", "ranks run", "nodes model",
          "nodes run");
  px_tseed(7);
  for (int router = 0; router < 2; router++) {
    int64_t eps[] = {8, 16, 32, 64, 128, 256};
    for (size_t i = 0; i < (router ? 6 : 4); i++) {
      int64_t ep = eps[i], nodes = ep / 8;
      int64_t groups = router ? 8 : (nodes > 1 ? nodes : 0),
              chosen = router ? 4 : (nodes > 1 ? (nodes < 4 ? nodes : 4) : 0);
      px_plan plan;
      deepseek_plan(&plan, "hgx-h800", PX_MOE_DEEPEP, ep, groups, chosen, PX_PREC_BF16);
      double r, n, rr, rn;
      px_plan_ep_copies(&plan, &r, &n);
      route(router, 256, 8, groups, chosen, ep, 8, 2048, &rr, &rn);
      fprintf(stderr, "  %-9s %4lld  %12.3f %12.3f  %12.3f %12.3f\n", router ? "DeepSeek" : "DeepEP", (long long)ep, r,
              rr, n, rn);
      PX_ASSERT_REL(r, rr, 0.02);
      PX_ASSERT_REL(n, rn, 0.02);
      px_plan_free(&plan);
    }
  }
}

/* ---- DeepEP's normal kernels (tests/data/deepep_h800.csv) ---- */

/* The deepep dispatcher's exchanges of a DeepSeek-V3 plan in DeepEP's
 * benchmark shape (4,096 tokens a rank, hidden 7,168, top 8 of 256, the top
 * 4 nodes, FP8 dispatch with its 1 x 128 scales, BF16 combine) on hgx-h800,
 * as the simulator costs them, against DeepEP's measured time for the same
 * exchange: the logical RDMA bytes its benchmark counts (the tokens' node
 * copies, own node included, from its routing run here, x hidden x
 * 2 (1 + 4/128)/2 bytes for FP8, 2 for BF16) over its bottleneck bandwidth.
 * Within 5% at EP 16, 32 and 64. */
static void test_deepep_kernels(void) {
  FILE *fp = fopen(px_test_path("tests/data/deepep_h800.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  int rows = 0;
  px_tseed(11);
  fprintf(stderr, "\n  %4s %-8s  %8s %10s %10s %7s\n", "ep", "pass", "GB/s pub", "us DeepEP", "us model", "error");
  while (fgets(line, sizeof line, fp)) {
    char kernel[16], type[16], link[16];
    long long ep, tokens, hidden, topk;
    double dgbps, cgbps;
    if (line[0] == '#' || sscanf(line, "%15[^,],%15[^,],%lld,%lld,%lld,%lld,%15[^,],%lf,%lf", kernel, type, &ep,
                                 &tokens, &hidden, &topk, link, &dgbps, &cgbps) != 9)
      continue;
    if (strcmp(kernel, "normal") || strcmp(type, "internode")) continue;
    int64_t nodes = ep / 8, chosen = nodes < 4 ? nodes : 4;
    px_plan plan;
    deepseek_plan(&plan, "hgx-h800", PX_MOE_DEEPEP, ep, nodes, chosen, PX_PREC_FP8);
    CU_ASSERT_EQUAL(plan.model.hidden, hidden);
    double ranks, copies, run_ranks, run_nodes;
    px_plan_ep_copies(&plan, &ranks, &copies);
    route(0, 256, topk, nodes, chosen, ep, 8, 2048, &run_ranks, &run_nodes);
    px_placement pl = px_sim_group_place(&plan, PX_GROUP_EP);
    const px_op *ex[2];
    ep_exchanges(&plan, ex);
    for (int combine = 0; combine < 2; combine++) {
      const px_op *o = ex[combine];
      px_coll_cost cc = px_coll_cost_deepep(&plan.cluster, &pl, px_ep_token_bytes(o, topk), ranks, copies, combine, false);
      double elem = combine ? 2.0 : 2.0 * (1.0 + 4.0 / 128.0) / 2.0, gbps = combine ? cgbps : dgbps;
      double t = (double)tokens * run_nodes * (double)hidden * elem / (gbps * 1e9);
      fprintf(stderr, "  %4lld %-8s  %8.0f %10.1f %10.1f %+6.1f%%\n", ep, combine ? "combine" : "dispatch", gbps,
              t * 1e6, cc.time_s * 1e6, 100 * (cc.time_s / t - 1));
      PX_ASSERT_REL(cc.time_s, t, 0.05);
    }
    rows++;
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 3);
}

/* ---- HybridEP's kernels (tests/data/hybridep_nvidia.csv) ---- */

/* The hybridep dispatcher's exchanges of a plan in HybridEP's benchmark shape (4,096 tokens a rank, hidden 7,168,
 * top 8 of 8 local experts a rank, BF16), as the simulator costs them, against NVIDIA's measured algorithm
 * bandwidth (the rows a rank receives, its own included, x hidden x 2 bytes over the kernel's time): inside an
 * NVLink domain (GB200 NVL36, DGX H100) and across 4 DGX H100 over RDMA. Every row is printed; the rows at the
 * SMs Megatron-Bridge's recipes give HybridEP (16 and 32; the RDMA chart's largest, 8) are asserted. */
static void test_hybridep_kernels(void) {
  FILE *fp = fopen(px_test_path("tests/data/hybridep_nvidia.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0, asserted = 0;
  fprintf(stderr, "\n  %-12s %3s %5s %6s  %-8s %9s %9s %7s\n", "system", "ep", "nodes", "blocks", "pass", "GB/s pub",
          "GB/s sim", "error");
  while (fgets(line, sizeof line, fp)) {
    char sys[32];
    long long ep, nodes, blocks;
    double gbps[2];
    if (line[0] == '#' ||
        sscanf(line, "%31[^,],%lld,%lld,%lld,%lf,%lf", sys, &ep, &nodes, &blocks, &gbps[0], &gbps[1]) != 6)
      continue;
    px_plan plan;
    deepseek_plan(&plan, sys, PX_MOE_HYBRIDEP, ep, 0, 0, PX_PREC_BF16);
    px_placement pl = px_sim_group_place(&plan, PX_GROUP_EP);
    CU_ASSERT_EQUAL(pl.nodes, nodes);
    double ranks, copies;
    px_plan_ep_copies(&plan, &ranks, &copies);
    bool on_recipe = nodes > 1 ? blocks >= 8 : blocks >= 16;
    const px_op *ex[2];
    ep_exchanges(&plan, ex);
    for (int combine = 0; combine < 2; combine++) {
      double tok = px_ep_token_bytes(ex[combine], plan.model.experts_per_token);
      px_coll_cost cc = px_coll_cost_deepep(&plan.cluster, &pl, tok, ranks, copies, combine, true);
      double sim = tok * ranks / cc.time_s / 1e9, pub = gbps[combine];
      fprintf(stderr, "  %-12s %3lld %5lld %6lld  %-8s %9.1f %9.1f %+6.1f%%%s\n", sys, ep, nodes, blocks,
              combine ? "combine" : "dispatch", pub, sim, 100 * (sim / pub - 1), on_recipe ? "" : "  (fewer SMs)");
      if (on_recipe) {
        PX_ASSERT_REL(sim, pub, 0.15);
        asserted++;
      }
    }
    rows++;
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 11);
  CU_ASSERT_EQUAL(asserted, 8);
}

/* DeepEP's intranode kernels across a GB200 NVL72's NVLink domain (tests/data/deepep_mnnvl.csv, NVIDIA's
 * DeepSeek-V3 on GB200 guide: EP 32, 24 SMs): the deepep dispatcher's exchanges of DeepSeek-V3's tokens (4,096 a
 * rank) take the figures, a rank's received copies over the time; HybridEP's (the same plan through hybridep) run
 * at the links' model, faster, as the guide found switching to HybridEP; below the smallest measured EP size
 * DeepEP's take the links' model too. */
static void test_deepep_mnnvl(void) {
  FILE *fp = fopen(px_test_path("tests/data/deepep_mnnvl.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0;
  fprintf(stderr, "\n  %-12s %3s  %-8s %9s %9s %12s\n", "system", "ep", "pass", "GB/s pub", "GB/s sim", "hybridep sim");
  while (fgets(line, sizeof line, fp)) {
    char sys[32];
    long long ep, sms;
    double gbps[2];
    if (line[0] == '#' || sscanf(line, "%31[^,],%lld,%lld,%lf,%lf", sys, &ep, &sms, &gbps[0], &gbps[1]) != 5) continue;
    px_plan plan, small;
    deepseek_plan(&plan, sys, PX_MOE_DEEPEP, ep, 0, 0, PX_PREC_BF16);
    deepseek_plan(&small, sys, PX_MOE_DEEPEP, 8, 0, 0, PX_PREC_BF16);
    px_placement pl = px_sim_group_place(&plan, PX_GROUP_EP), pl8 = px_sim_group_place(&small, PX_GROUP_EP);
    CU_ASSERT_EQUAL(pl.nodes, 1);
    double ranks, copies, ranks8, copies8;
    px_plan_ep_copies(&plan, &ranks, &copies);
    px_plan_ep_copies(&small, &ranks8, &copies8);
    const px_op *ex[2];
    ep_exchanges(&plan, ex);
    for (int combine = 0; combine < 2; combine++) {
      double tok = px_ep_token_bytes(ex[combine], plan.model.experts_per_token);
      px_coll_cost dep = px_coll_cost_deepep(&plan.cluster, &pl, tok, ranks, copies, combine, false);
      px_coll_cost hyb = px_coll_cost_deepep(&plan.cluster, &pl, tok, ranks, copies, combine, true);
      px_coll_cost dep8 = px_coll_cost_deepep(&small.cluster, &pl8, tok, ranks8, copies8, combine, false);
      double sim = tok * ranks / (dep.time_s - dep.latency_s) / 1e9, hsim = tok * ranks / hyb.time_s / 1e9;
      fprintf(stderr, "  %-12s %3lld  %-8s %9.1f %9.1f %12.1f\n", sys, ep, combine ? "combine" : "dispatch",
              gbps[combine], sim, hsim);
      CU_ASSERT(dep.measured && !hyb.measured && !dep8.measured);
      PX_ASSERT_REL(sim, gbps[combine], 1e-9);
      CU_ASSERT(hyb.time_s < dep.time_s);
    }
    rows++;
    px_plan_free(&plan);
    px_plan_free(&small);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 1);
}

/* ---- DeepGEMM's grouped GEMMs (tests/data/deepgemm_h800.csv) ---- */

/* The GEMM model (fp8 with blockwise scales, the burst figure the README
 * measures) on DeepGEMM's grouped GEMMs: groups x (m, n, k) with m rows a
 * group, costed as one grouped kernel (the wave model over every group's
 * tiles, each group's rows padded to the tile on their own). Printed; the
 * groups of 1,024 rows and more (the contiguous layout's 4,096-8,192, a
 * training step's experts) within -6.8% to +8.1%; fewer rows a group are
 * optimistic (the masked layout's 256 and 512: +9% to +35%): their kernels
 * run the same tiles in the same waves as the 1,024-row group's, and differ
 * in each group's weights, which the roofline's memory time does not reach
 * (docs/validation.md, "Mixture of experts on H100"). */
static void test_deepgemm_grouped(void) {
  FILE *fp = fopen(px_test_path("tests/data/deepgemm_h800.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("hgx-h800", &c, &err), PX_OK);
  char line[256];
  int rows = 0;
  fprintf(stderr, "\n  %-10s %6s %6s %6s %6s  %9s %9s %7s\n", "layout", "groups", "m", "n", "k", "TFLOP pub", "model",
          "error");
  while (fgets(line, sizeof line, fp)) {
    char layout[16];
    long long g, m, n, k;
    double tflops;
    if (line[0] == '#' || sscanf(line, "%15[^,],%lld,%lld,%lld,%lld,%lf", layout, &g, &m, &n, &k, &tflops) != 6)
      continue;
    if (!strcmp(layout, "normal")) continue;
    px_op o = {.kind = PX_OP_EXPERT_LINEAR, .flags = PX_OPF_FP8 | PX_OPF_FP8_BLOCK};
    o.dim[0] = m, o.dim[1] = n, o.dim[2] = k, o.dim[3] = g;
    o.flops = 2.0 * (double)(g * m * n * k);
    o.bytes = (double)(g * (m * k + n * k)) + 2.0 * (double)(g * m * n); /* fp8 in, bf16 out */
    c.gpu.sustained_share = 1.0;                                         /* the README's runs: short, at boost clocks */
    double t = px_compute_grouped_op_s(&c.gpu, PX_DTYPE_BF16, &o) - c.gpu.kernel_overhead_s, model = o.flops / t / 1e12;
    double e = model / tflops - 1;
    fprintf(stderr, "  %-10s %6lld %6lld %6lld %6lld  %9.0f %9.0f %+6.1f%%\n", layout, g, m, n, k, tflops, model,
            100 * e);
    if (m >= 1024) CU_ASSERT(e > -0.08 && e < 0.09);
    if (m < 1024) CU_ASSERT(e > 0.08 && e < 0.36); /* optimistic as found: a change here is a model change */
    rows++;
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 10);
}

/* ---- Megatron-Bridge's published MoE runs (tests/data/megatron_bridge_*_moe.csv) ---- */

/* A published run and its recipe's settings, one CSV row (the CSVs' headers
 * say what each column holds). */
typedef struct {
  char release[16], sys[32], name[32], prec[16], dispatch[16], routing[16], recompute[48], graph[16], recipe[96],
      note[16];
  long long gpus, gbs, mbs, seq, tp, pp, vp, ep;
  int overlap, fp8_attention, router_padding; /* router_padding: moe_router_padding_for_quantization (not in the CSVs) */
  double tokens, tflops;
} mb_row;

/* The H100 CSV's row (no system or recipe column: dgx-h100). */
static bool mb_row_h100(const char *line, mb_row *w) {
  memset(w, 0, sizeof *w);
  snprintf(w->sys, sizeof w->sys, "dgx-h100");
  return line[0] != '#' &&
         sscanf(line,
                "%15[^,],%31[^,],%lld,%15[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld,%15[^,],%15[^,],%d,%47[^,],%15[^,],"
                "%lf,%lf,%15[^,\n]",
                w->release, w->name, &w->gpus, w->prec, &w->gbs, &w->mbs, &w->seq, &w->tp, &w->pp, &w->vp, &w->ep,
                w->dispatch, w->routing, &w->overlap, w->recompute, w->graph, &w->tokens, &w->tflops, w->note) == 19;
}

/* A row whose figure measures a bug NVIDIA names (the CSV's note): "regression", the performance page's own
 * footnote; "known-issue", its release's known-issues page. Simulated and printed, kept out of the means and the
 * validated bands; "-" for the others. */
static bool mb_known_bug(const mb_row *w) {
  CU_ASSERT_FATAL(!strcmp(w->note, "-") || !strcmp(w->note, "regression") || !strcmp(w->note, "known-issue"));
  return strcmp(w->note, "-") != 0;
}

/* The Blackwell CSV's row. */
static bool mb_row_blackwell(const char *line, mb_row *w) {
  memset(w, 0, sizeof *w);
  return line[0] != '#' &&
         sscanf(line,
                "%15[^,],%31[^,],%31[^,],%lld,%15[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld,%15[^,],%15[^,],%d,%47[^,],"
                "%15[^,],%d,%lf,%lf,%95[^,],%15[^,\n]",
                w->release, w->sys, w->name, &w->gpus, w->prec, &w->gbs, &w->mbs, &w->seq, &w->tp, &w->pp, &w->vp,
                &w->ep, w->dispatch, w->routing, &w->overlap, w->recompute, w->graph, &w->fp8_attention, &w->tokens,
                &w->tflops, w->recipe, w->note) == 22;
}

/* The multi-token prediction modules w's run trained: DeepSeek-V3's recipes train one (mtp_num_layers 1), and its
 * published TFLOP/s count it; where they are Megatron's count without it (25.11's GB200 and GB300 rows: 249.1-249.7
 * GFLOP a token, 249.8 without the module and 260.0 with it; the layout of NVIDIA's GB200 guide, Et|(tt|)*30L, has
 * none), the run trained none. */
static int64_t mb_mtp(const mb_row *w, const px_model *m) {
  if (strcmp(w->name, "deepseek-v3")) return 0;
  double per_token = w->tflops * 1e12 / w->tokens;
  double without = px_test_nemo_flops_per_token(m, w->seq, w->tp, true, 0);
  double with = px_test_nemo_flops_per_token(m, w->seq, w->tp, true, 1);
  return fabs(per_token / with - 1) < fabs(per_token / without - 1) ? 1 : 0;
}

/* The row's TFLOP/s over its tokens/s against Megatron's FLOPs per token (px_test_nemo_flops_per_token: causal
 * attention as half the square, the MTP modules the run trained), the data's own check: within 2% for DeepSeek-V3
 * and Qwen3 (tokens/s printed in steps of 32, and rounding). GPT-OSS's figures count its windows otherwise and are
 * not checked. */
static void mb_check_flops(const mb_row *w) {
  if (strcmp(w->name, "deepseek-v3") && strncmp(w->name, "qwen3-", 6)) return;
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(w->name, &m, &err), PX_OK);
  PX_ASSERT_REL(w->tflops * 1e12 / w->tokens, px_test_nemo_flops_per_token(&m, w->seq, w->tp, true, mb_mtp(w, &m)),
                0.02);
}

/* w's plan on its preset as its recipe runs it and the simulated step:
 * dispatcher (HybridEP with DeepEP's figures), routing (force-balanced:
 * uniform, the busiest rank's rows the mean; token drop: every expert its
 * capacity), layout, CUDA graphs (layers for the recipes' attention +
 * router graphs, router for their router-only ones, full for their
 * full-iteration graphs); EP overlap as the recipe sets it (Megatron-Core's
 * combined 1F1B: `overlap` ep); the recipe's module recomputation
 * (`recompute_modules`). The simulated tokens/s a GPU. */
static double mb_simulate(const mb_row *w, px_plan *plan, px_sim_result *r) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(w->name, &m, &err), PX_OK);
  CU_ASSERT_FATAL(!strcmp(w->routing, "drop") || !strcmp(w->routing, "forced"));
  if (!strcmp(w->routing, "drop")) m.capacity_factor = 1.0; /* padded to capacity: every expert its share */
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = w->tp, p.pp = w->pp, p.dp = w->gpus / (w->tp * w->pp), p.ep = w->ep, p.etp = 1, p.seq = w->seq;
  p.gbs = w->gbs, p.mbs = w->mbs, p.sp = w->tp > 1, p.zero = 1, p.overlap = PX_OVERLAP_ALL | (w->overlap ? PX_OVERLAP_EP : 0);
  p.recompute = PX_RECOMPUTE_NONE;
  if (strcmp(w->recompute, "none")) { /* the recipe's recompute_modules, '+'-separated in the CSVs */
    char mods[48];
    snprintf(mods, sizeof mods, "%s", w->recompute);
    for (char *c = mods; *c; c++)
      if (*c == '+') *c = ',';
    CU_ASSERT_EQUAL_FATAL(px_recompute_modules_parse(mods, &p.recompute_modules, &err), PX_OK);
    p.recompute = PX_RECOMPUTE_SELECTIVE;
  }
  CU_ASSERT_FATAL(!strcmp(w->dispatch, "a2a") || !strcmp(w->dispatch, "deepep") || !strcmp(w->dispatch, "hybridep"));
  p.moe_dispatch = !strcmp(w->dispatch, "a2a") ? PX_MOE_A2A : !strcmp(w->dispatch, "deepep") ? PX_MOE_DEEPEP : PX_MOE_HYBRIDEP;
  CU_ASSERT_FATAL(px_test_precision(w->prec, &p));
  int graph = px_test_cuda_graph(w->graph);
  CU_ASSERT_FATAL(graph >= 0);
  p.cuda_graph = graph;
  p.fp8_attention = w->fp8_attention; /* the recipe's fp8_dot_product_attention */
  p.moe_router_padding = w->router_padding;
  if (w->vp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = w->vp;
  int64_t chunks = w->pp * w->vp;
  CU_ASSERT_FATAL(chunks <= PX_MAX_CHUNK_LIST);
  p.mtp_layers = mb_mtp(w, &m); /* DeepSeek-V3's MTP module, where the run trained it */
  if (!strcmp(w->name, "deepseek-v3") && chunks > 1) { /* the recipes' layouts, the CSVs' headers say */
    p.nchunk_layers = (int32_t)chunks;
    for (int64_t c = 0; c < chunks; c++)
      if (chunks == 32) /* "Et|(tt|)*30mL" or "Et|(tt|)*30L": 1, 2 x 30, and the MTP module (if any) and loss */
        p.chunk_layers[c] = (uint16_t)(c == 0 ? 1 : c == chunks - 1 ? 0 : 2);
      else { /* "Et*4|(t*4|)*14tmL" and its kin: 64 / chunks a chunk, the last the rest of 61 */
        CU_ASSERT_FATAL(64 % chunks == 0);
        p.chunk_layers[c] = (uint16_t)(c < chunks - 1 ? 64 / chunks : m.layers - (chunks - 1) * (64 / chunks));
      }
  } else
    px_test_megatron_split(&m, w->pp, w->vp, &p); /* Qwen3-235B's embedding and loss as a layer each */
  /* on its container's cuDNN release: the fused attention of the newest release measured at or before it */
  CU_ASSERT_EQUAL_FATAL(px_test_compile_cudnn(plan, &m, w->sys, w->gpus, &p, px_test_release_cudnn(w->release), &err),
                        PX_OK);
  px_sim_opts o = {.skip_exposed = true};
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, &o, r, &err), PX_OK);
  return r->tokens_per_s / (double)w->gpus;
}

/* A CSV word as the docs write it (the word itself where none is given). */
static const char *mb_doc_word(const char *w) {
  static const char *const words[][2] = {{"a2a", "all-to-all"}, {"deepep", "DeepEP"},  {"hybridep", "HybridEP"},
                                         {"bf16", "BF16"},      {"fp8-cs", "FP8-CS"},  {"mxfp8", "MXFP8"},
                                         {"full", "full step"}, {"drop", "dropped at capacity"}};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (!strcmp(words[i][0], w)) return words[i][1];
  return w;
}

/* The H100 CSV's release as the docs name it: the case study's and the verification card's rows by their source. */
static const char *mb_doc_release(const char *release) {
  return !strcmp(release, "card") ? "case study" : !strcmp(release, "vcard") ? "verification card" : release;
}

/* Each H100 row (tests/data/megatron_bridge_h100_moe.csv) beside the
 * simulated tokens/s a GPU on dgx-h100, with the mean per dispatcher, per
 * model and overall; the bands are what the model reaches now
 * (docs/validation.md, "Mixture of experts on H100", says what is missing). */
static void test_megatron_bridge_moe(void) {
  FILE *fp = fopen(px_test_path("tests/data/megatron_bridge_h100_moe.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  int rows = 0, known = 0;
  px_test_err_range all = {0}, by_dispatch[PX_MOE_DISPATCH_COUNT] = {{0}};
  static const char *const models[] = {"deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"};
  enum { MODELS = sizeof models / sizeof *models };
  px_test_err_range by_model[MODELS] = {{0}};
  fprintf(stderr, "\n  %-8s %-15s %5s %-6s %2s %2s %2s %3s %-8s %-6s %2s  %9s %9s %7s  %s\n", "release", "model",
          "gpus", "prec", "tp", "pp", "vp", "ep", "dispatch", "route", "ov", "tok/s pub", "tok/s sim", "error", "fits");
  FILE *md = px_test_doc_block("validation-moe-h100",
                               "| release | model | GPUs | tp·pp, vp, ep | precision | dispatch, routing | published "
                               "tokens/s/GPU | simulated | error | fits 80 GB |\n"
                               "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | --- |\n");
  while (fgets(line, sizeof line, fp)) {
    mb_row w;
    if (!mb_row_h100(line, &w)) continue;
    mb_check_flops(&w);
    int mi = 0;
    while (mi < MODELS && strcmp(models[mi], w.name)) mi++;
    CU_ASSERT_FATAL(mi < MODELS);
    px_plan plan;
    px_sim_result r;
    double sim = mb_simulate(&w, &plan, &r), e = sim / w.tokens - 1;
    bool bug = mb_known_bug(&w);
    fprintf(stderr, "  %-8s %-15s %5lld %-6s %2lld %2lld %2lld %3lld %-8s %-6s %2d  %9.0f %9.0f %+6.1f%%  %s%s\n",
            w.release, w.name, w.gpus, w.prec, w.tp, w.pp, w.vp, w.ep, w.dispatch, w.routing, w.overlap, w.tokens, sim,
            100 * e, r.fits ? "yes" : "no", bug ? " (the release's known issue: not in the means)" : "");
    /* measured (with Qwen3's q/k norms, EP overlap where the recipe sets it, the FP8 GroupedLinear's per-expert
     * Python loop on the host): Qwen3-30B-A3B BF16 +3.5%, +8.4% with EP overlap (the case study's A/B); FP8 +3.9% to
     * +50.6% but for 25.11's and 26.02's EP 8 rows of Qwen3-30B-A3B (+136%, +94%: the same layout ran 1.7x faster a
     * point release later; 26.02's container had no DeepEP, the release's known issue); the FP8 rows' kernels miss
     * what docs/validation.md names. GPT-OSS-120B's BF16 rows +22.3% to +42.6% with its experts' gate-scaled fc2 bias
     * as Megatron-Core runs it (+35% to +58% without; not from its windows: docs/validation.md). No row may turn more
     * than 15% pessimistic; Qwen3's BF16 rows within 10% */
    CU_ASSERT(e > -0.15 && e < 2.5);
    if (!strcmp(w.name, "qwen3-30b-a3b") && plan.par.precision == PX_PREC_BF16) CU_ASSERT(fabs(e) < 0.10);
    if (!strcmp(w.name, "gpt-oss-120b")) CU_ASSERT(e > 0.15 && e < 0.55);
    if (!bug)
      px_test_err_add(&all, e), px_test_err_add(&by_dispatch[plan.par.moe_dispatch], e),
          px_test_err_add(&by_model[mi], e);
    known += bug;
    if (md) {
      char b[5][32], mbs[32] = "", vp[32] = "";
      if (w.mbs > 1) snprintf(mbs, sizeof mbs, " (mbs %lld)", w.mbs);
      if (w.vp > 1) snprintf(vp, sizeof vp, ", %lld", w.vp);
      fprintf(md, "| %s | `%s`%s | %s | %lld·%lld%s, %lld | %s | %s, %s%s | %s | %s | %s%s | %s |\n",
              mb_doc_release(w.release), w.name, mbs, px_test_doc_count(w.gpus, b[0]), w.tp,
              w.pp, vp, w.ep, mb_doc_word(w.prec), mb_doc_word(w.dispatch), mb_doc_word(w.routing),
              w.overlap ? ", EP overlap" : "", px_test_doc_count(llround(w.tokens), b[1]),
              px_test_doc_count(llround(sim), b[2]), px_test_doc_pct(e, b[3]),
              bug ? " (the release's known issue: not in the means)" : "", r.fits ? "yes" : "no");
    }
    const char *source = !strcmp(w.release, "card")    ? "NVIDIA's Qwen3-30B-A3B case study"
                         : !strcmp(w.release, "vcard") ? "Megatron-Bridge's verification card"
                                                       : "Megatron-Bridge";
    if (!bug) CU_ASSERT(px_test_band(&plan, e, source));
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 23);
  for (int d = 0; d < PX_MOE_DISPATCH_COUNT; d++)
    if (by_dispatch[d].n)
      fprintf(stderr, "  dispatch %-8s %2d rows: mean %+.1f%% (%+.1f%% to %+.1f%%)\n", px_moe_dispatch_names[d],
              by_dispatch[d].n, 100 * by_dispatch[d].sum / by_dispatch[d].n, 100 * by_dispatch[d].min,
              100 * by_dispatch[d].max);
  fprintf(stderr, "  H100 MoE, all %d rows but the %d of a known issue: mean %+.1f%% (%+.1f%% to %+.1f%%)\n", all.n,
          known, 100 * all.sum / all.n, 100 * all.min, 100 * all.max);
  CU_ASSERT_EQUAL(known, 1);
  if (md) {
    char b[3][24];
    fprintf(md, "\nMean error, all %d rows but the %d of a known issue: %s (%s to %s)", all.n, known,
            px_test_doc_pct(all.sum / all.n, b[0]), px_test_doc_pct(all.min, b[1]), px_test_doc_pct(all.max, b[2]));
    for (int mi = 0; mi < MODELS; mi++)
      fprintf(md, "; `%s` %s (%d)", models[mi], px_test_doc_pct(by_model[mi].sum / by_model[mi].n, b[0]),
              by_model[mi].n);
    fprintf(md, ".\n");
  }
  px_test_doc_block_end(md, "validation-moe-h100");
  CU_ASSERT(all.sum / all.n < 0.50); /* +32.3% */
}

/* The Blackwell systems of tests/data/megatron_bridge_blackwell_moe.csv: a
 * system's rows run where enabled (a system without a preset: false, its
 * rows printed as skipped), its mean error as measured at this change (NAN:
 * none yet, printed only). */
static const struct {
  const char *preset;
  bool enabled;
  double mean;
} mb_systems[] = {
    {"dgx-b200", true, 0.344}, {"gb200-nvl72", true, 0.172}, {"dgx-gb300", true, 0.066}, {"dgx-b300", true, 0.421}};
enum { MB_SYSTEMS = sizeof mb_systems / sizeof *mb_systems, MB_PRECS = 3 };
static const char *const mb_precs[MB_PRECS] = {"bf16", "fp8-cs", "mxfp8"};

/* One line of the means table: system, precision, rows, spread, mean. */
static void mb_doc_range(FILE *md, const char *sys, const char *prec, const px_test_err_range *a) {
  if (!md) return;
  char b[3][24];
  const char *q = strcmp(sys, "all") ? "`" : ""; /* a preset's name as code */
  fprintf(md, "| %s%s%s | %s | %d | %s to %s | %s |\n", q, sys, q, prec, a->n, px_test_doc_pct(a->min, b[0]),
          px_test_doc_pct(a->max, b[1]), px_test_doc_pct(a->sum / a->n, b[2]));
}

/* Every Blackwell MoE row, as its recipe runs it (the CSV's header), on its
 * preset: published tokens/s a GPU beside the simulated, the error, whether
 * the plan fits, and the signed mean per system and precision and per
 * system. A row the page marks as a known regression (the CSV's note) is
 * printed, and kept out of the means and the bands. Issue #34's goal for MoE (each row within +-20%, each mean within
 * 10%) is printed, not asserted: it is not reached (docs/validation.md,
 * "Mixture of experts on Blackwell"); the bounds asserted are what the model reaches,
 * loose, and fail a row or a mean that moves far. Each row's error is also a
 * run of its validated error band (PX_VALIDATION_BANDS). */
static void test_megatron_bridge_blackwell_moe(void) {
  FILE *fp = fopen(px_test_path("tests/data/megatron_bridge_blackwell_moe.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  int rows = 0, skipped = 0, skipped_of[MB_SYSTEMS] = {0}, regressed = 0;
  px_test_err_range fam[MB_SYSTEMS] = {{0}}, fam_prec[MB_SYSTEMS][MB_PRECS] = {{{0}}}, all = {0};
  /* by the recipe's CUDA graphs (px_cuda_graph_names): how far the host's model errs shows in the eager ones against
   * the full step's */
  px_test_err_range by_graph[PX_GRAPH_COUNT] = {{0}};
  fprintf(stderr, "\n  %-8s %-11s %-15s %4s %-6s %-8s %3s %-8s %2s %-6s  %9s %9s %7s  %4s %-17s %s\n", "release",
          "system", "model", "gpus", "prec", "pp.vp", "ep", "dispatch", "ov", "graph", "tok/s pub", "tok/s sim",
          "error", "fits", "recompute", "recipe");
  FILE *md =
      px_test_doc_block("validation-moe-blackwell",
                        "| release | system | model | GPUs | precision | mbs | pp, vp, ep | dispatch | EP "
                        "overlap | CUDA graphs | FP8 attention | recomputed modules | published tokens/s/GPU | "
                        "simulated | error | fits |\n"
                        "| --- | --- | --- | ---: | --- | ---: | --- | --- | --- | --- | --- | --- | ---: | ---: | "
                        "---: | --- |\n");
  while (fgets(line, sizeof line, fp)) {
    mb_row w;
    if (!mb_row_blackwell(line, &w)) continue;
    mb_check_flops(&w);
    int s = 0, k = 0;
    while (s < MB_SYSTEMS && strcmp(mb_systems[s].preset, w.sys)) s++;
    while (k < MB_PRECS && strcmp(mb_precs[k], w.prec)) k++;
    CU_ASSERT_FATAL(s < MB_SYSTEMS && k < MB_PRECS);
    if (!mb_systems[s].enabled) {
      skipped++, skipped_of[s]++;
      continue;
    }
    px_plan plan;
    px_sim_result r;
    double sim = mb_simulate(&w, &plan, &r), e = sim / w.tokens - 1;
    char layout[16];
    snprintf(layout, sizeof layout, "%lld.%lld", w.pp, w.vp);
    bool bug = mb_known_bug(&w); /* the page's own footnote: the figure measures a known bug */
    fprintf(stderr, "  %-8s %-11s %-15s %4lld %-6s %-8s %3lld %-8s %2d %-6s  %9.0f %9.0f %+6.1f%%  %4s %-17s %s%s\n",
            w.release, w.sys, w.name, w.gpus, w.prec, layout, w.ep, w.dispatch, w.overlap, w.graph, w.tokens, sim,
            100 * e, r.fits ? "yes" : "no", w.recompute, w.recipe, bug ? " (regression: not in the means)" : "");
    /* measured at this change: -16.9% to +124.4%, the known regression's two +92.4% and +109.8%
     * (docs/validation.md); no row may turn more than 30% pessimistic */
    CU_ASSERT(e > -0.30 && e < 2.5);
    int g = px_test_cuda_graph(w.graph);
    if (!bug)
      px_test_err_add(&fam[s], e), px_test_err_add(&fam_prec[s][k], e), px_test_err_add(&all, e),
          px_test_err_add(&by_graph[g], e);
    regressed += bug;
    if (md) {
      char b[4][32], rec[64], err_cell[96];
      snprintf(err_cell, sizeof err_cell, "%s%s", px_test_doc_pct(e, b[3]),
               bug ? " (the page's known regression: not in the means)" : "");
      snprintf(rec, sizeof rec, "%s", w.recompute);
      for (char *c = rec; *c; c++)
        if (*c == '+') *c = ' ';
      fprintf(md,
              "| %s | `%s` | `%s` | %s | %s | %lld | %lld, %lld, %lld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
              w.release, w.sys, w.name, px_test_doc_count(w.gpus, b[0]), mb_doc_word(w.prec), w.mbs, w.pp, w.vp, w.ep,
              mb_doc_word(w.dispatch), w.overlap ? "yes" : "no", mb_doc_word(w.graph), w.fp8_attention ? "yes" : "no",
              rec,
              px_test_doc_count(llround(w.tokens), b[1]), px_test_doc_count(llround(sim), b[2]), err_cell,
              r.fits ? "yes" : "no");
    }
    if (!bug) CU_ASSERT(px_test_band(&plan, e, "Megatron-Bridge"));
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  int goal = 1;
  if (md) fprintf(md, "\n| system | precision | rows | error | mean |\n| --- | --- | ---: | --- | ---: |\n");
  for (int s = 0; s < MB_SYSTEMS; s++) {
    if (skipped_of[s])
      fprintf(stderr, "  %-11s %2d rows skipped: no %s preset yet (enable it in mb_systems)\n", mb_systems[s].preset,
              skipped_of[s], mb_systems[s].preset);
    if (!fam[s].n) continue;
    for (int k = 0; k < MB_PRECS; k++) {
      const px_test_err_range *a = &fam_prec[s][k];
      if (!a->n) continue;
      fprintf(stderr, "  %-11s %-6s %2d rows: mean %+.1f%% (%+.1f%% to %+.1f%%)\n", mb_systems[s].preset, mb_precs[k],
              a->n, 100 * a->sum / a->n, 100 * a->min, 100 * a->max);
      mb_doc_range(md, mb_systems[s].preset, mb_doc_word(mb_precs[k]), a);
    }
    const px_test_err_range *a = &fam[s];
    double mean = a->sum / a->n;
    mb_doc_range(md, mb_systems[s].preset, "all", a);
    fprintf(stderr, "  %-11s all    %2d rows: mean %+.1f%% (%+.1f%% to %+.1f%%)\n", mb_systems[s].preset, a->n,
            100 * mean, 100 * a->min, 100 * a->max);
    goal &= fabs(mean) <= 0.10 && a->min >= -0.20 && a->max <= 0.20;
    if (!isnan(mb_systems[s].mean)) CU_ASSERT(fabs(mean - mb_systems[s].mean) < 0.15); /* a 15-point move fails */
  }
  for (int g = 0; g < PX_GRAPH_COUNT; g++)
    if (by_graph[g].n)
      fprintf(stderr, "  CUDA graphs %-6s %2d rows: mean %+.1f%% (%+.1f%% to %+.1f%%)\n",
              mb_doc_word(px_cuda_graph_names[g]),
              by_graph[g].n, 100 * by_graph[g].sum / by_graph[g].n, 100 * by_graph[g].min, 100 * by_graph[g].max);
  fprintf(stderr,
          "  Blackwell MoE, all %d rows but the %d the page marks as a known regression: mean %+.1f%%; issue #34's goal "
          "(each row within +-20%%, each mean within 10%%): %s\n",
          all.n, regressed, 100 * all.sum / all.n, goal && !regressed ? "reached" : "not reached");
  CU_ASSERT_EQUAL(regressed, 2);
  mb_doc_range(md, "all", "all", &all);
  for (int s = 0; md && s < MB_SYSTEMS; s++)
    if (skipped_of[s])
      fprintf(md, "\n`%s`'s %d rows are in the CSV and skipped: no preset yet.\n", mb_systems[s].preset, skipped_of[s]);
  px_test_doc_block_end(md, "validation-moe-blackwell");
  CU_ASSERT_EQUAL(rows + skipped, 114);
}

/* NVIDIA's optimization history of DeepSeek-V3 on 256 GB200s (tests/data/deepseek_v3_gb200_history.csv): each step's
 * plan as far as the simulator expresses it (dispatcher, recomputed modules, CUDA graphs) against the published
 * throughput, and the gain of each step that changes one of those against the published gain: how far the
 * simulator's A/B of a dispatcher, a recomputation or CUDA graphs holds where the rest of the run is fixed. */
static void test_deepseek_v3_gb200_history(void) {
  FILE *fp = fopen(px_test_path("tests/data/deepseek_v3_gb200_history.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  double per_token = px_test_nemo_flops_per_token(&m, 4096, 1, true, 0); /* Megatron-LM's count: 249.8 GFLOP */
  PX_ASSERT_REL(per_token, 249.812e9, 1e-4);
  char line[512], feature[96], prev_key[96] = "";
  double prev_pub = 0, prev_sim = 0, last_e = 0;
  int rows = 0, ab = 0;
  fprintf(stderr, "\n  %4s %-44s %-8s %-16s %-6s %9s %9s %7s   %s\n", "step", "feature", "dispatch", "recompute",
          "graphs", "tok/s pub", "tok/s sim", "error", "step's gain: published, simulated");
  FILE *md = px_test_doc_block("validation-dsv3-gb200-history",
                               "| step | published change | the plan as simulated | published tokens/s/GPU (TFLOP/s) | "
                               "simulated | error | the step's gain: published | simulated |\n"
                               "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  while (fgets(line, sizeof line, fp)) {
    mb_row w;
    memset(&w, 0, sizeof w);
    int step;
    if (line[0] == '#' || sscanf(line, "%d,%95[^,],%15[^,],%47[^,],%15[^,],%lf", &step, feature, w.dispatch,
                                 w.recompute, w.graph, &w.tflops) != 6)
      continue;
    /* the guide's run: TP1 PP8 VPP4 EP32, MBS 1, GBS 2048, 4,096 tokens, MXFP8, force-balanced, router padding; the
     * release "guide" names no container: the newest cuDNN curves measured (DeepSeek-V3's MLA at one release) */
    snprintf(w.release, sizeof w.release, "guide"), snprintf(w.sys, sizeof w.sys, "gb200-nvl72");
    snprintf(w.name, sizeof w.name, "deepseek-v3"), snprintf(w.prec, sizeof w.prec, "mxfp8");
    snprintf(w.routing, sizeof w.routing, "forced");
    w.gpus = 256, w.gbs = 2048, w.mbs = 1, w.seq = 4096, w.tp = 1, w.pp = 8, w.vp = 4, w.ep = 32, w.router_padding = 1;
    w.tokens = w.tflops * 1e12 / per_token;
    CU_ASSERT_EQUAL(mb_mtp(&w, &m), 0);
    px_plan plan;
    px_sim_result r;
    double sim = mb_simulate(&w, &plan, &r), e = sim / w.tokens - 1;
    char key[96], gains[64] = "", b[5][32];
    snprintf(key, sizeof key, "%s %s %s", w.dispatch, w.recompute, w.graph);
    bool changed = rows > 0 && strcmp(key, prev_key);
    double gain_pub = rows ? w.tokens / prev_pub - 1 : 0, gain_sim = rows ? sim / prev_sim - 1 : 0;
    if (changed) snprintf(gains, sizeof gains, "%+6.1f%% %+6.1f%%", 100 * gain_pub, 100 * gain_sim);
    fprintf(stderr, "  %4d %-44.44s %-8s %-16s %-6s %9.0f %9.0f %+6.1f%%   %s\n", step, feature, w.dispatch,
            w.recompute, w.graph, w.tokens, sim, 100 * e, gains);
    if (md) {
      char plan_txt[96];
      snprintf(plan_txt, sizeof plan_txt, "%s, %s, CUDA graphs %s", mb_doc_word(w.dispatch), w.recompute, w.graph);
      for (char *c = plan_txt; *c; c++)
        if (*c == '+') *c = ' ';
      fprintf(md, "| %d | %s | %s | %s (%.0f) | %s | %s | %s | %s |\n", step, feature, plan_txt,
              px_test_doc_count(llround(w.tokens), b[0]), w.tflops, px_test_doc_count(llround(sim), b[1]),
              px_test_doc_pct(e, b[2]), rows ? px_test_doc_pct(gain_pub, b[3]) : "",
              changed ? px_test_doc_pct(gain_sim, b[4]) : rows ? "same plan" : "");
    }
    /* measured: the simulated throughput over the run's, +85% at the baseline to +10% at the last step (the early
     * steps' kernels and host code slower than those the presets describe, which the later steps fixed); the steps
     * it expresses: DeepEP over NCCL's all-to-all -11% (published +5%), the recomputation +2% (+8%), CUDA graphs +1%
     * (+9%), HybridEP over DeepEP +27% (+14%): docs/validation.md says why */
    CU_ASSERT(e > 0 && e < 1.0);
    if (changed) {
      CU_ASSERT(fabs(gain_sim) < 0.35);
      ab++;
    }
    snprintf(prev_key, sizeof prev_key, "%s", key);
    prev_pub = w.tokens, prev_sim = sim, last_e = e, rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  px_test_doc_block_end(md, "validation-dsv3-gb200-history");
  CU_ASSERT_EQUAL(rows, 13);
  CU_ASSERT_EQUAL(ab, 4);
  CU_ASSERT(last_e > 0.0 && last_e < 0.2); /* +9.7%: the run's last step against the latest plan it expresses */
}

/* Megatron-Bridge's weak-scaling run of Qwen3-30B-A3B on GB300 (tests/data/qwen3_30b_gb300_weak_scaling.csv): the
 * 26.08 GB300 row's recipe at 8 to 256 GPUs, 64 sequences a GPU. The runs hold 44.5-45.1K tokens/s a GPU; the
 * simulation loses 2.2% from 8 to 256 GPUs, the straggler model's slowest of N GPUs (jitter 1.48%: 2.1% at 8,
 * 4.1% at 256); the exchanges add 2 ms a step. Printed with each point's error and its throughput over the 8-GPU
 * point's, published and simulated. */
static void test_qwen3_gb300_weak_scaling(void) {
  FILE *fp = fopen(px_test_path("tests/data/megatron_bridge_blackwell_moe.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512];
  mb_row base;
  bool found = false;
  while (!found && fgets(line, sizeof line, fp))
    found = mb_row_blackwell(line, &base) && !strcmp(base.release, "26.08") && !strcmp(base.sys, "dgx-gb300") &&
            !strcmp(base.name, "qwen3-30b-a3b");
  fclose(fp);
  CU_ASSERT_FATAL(found);
  CU_ASSERT_FATAL(base.gpus == 8 && base.gbs == 512 && base.mbs == 8 && base.ep == 8); /* the card's 8-GPU point */
  fp = fopen(px_test_path("tests/data/qwen3_30b_gb300_weak_scaling.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  double pub0 = 0, sim0 = 0;
  int rows = 0;
  fprintf(stderr, "\n  %5s %6s %9s %9s %7s   %s\n", "gpus", "gbs", "tok/s pub", "tok/s sim", "error",
          "over 8 GPUs: published, simulated");
  while (fgets(line, sizeof line, fp)) {
    long long gpus, gbs;
    double step_ms, tflops, tokens;
    if (line[0] == '#' || sscanf(line, "%lld,%lld,%lf,%lf,%lf", &gpus, &gbs, &step_ms, &tflops, &tokens) != 5)
      continue;
    PX_ASSERT_REL(tokens, (double)gbs * 4096 / (double)gpus / (step_ms * 1e-3), 1e-5);
    CU_ASSERT_EQUAL(gbs, 64 * gpus);
    mb_row w = base;
    w.gpus = gpus, w.gbs = gbs, w.tokens = tokens, w.tflops = tflops;
    px_plan plan;
    px_sim_result r;
    double sim = mb_simulate(&w, &plan, &r), e = sim / tokens - 1;
    if (!rows) pub0 = tokens, sim0 = sim;
    double kept_pub = tokens / pub0, kept_sim = sim / sim0;
    fprintf(stderr, "  %5lld %6lld %9.0f %9.0f %+6.1f%%   %.3f %.3f\n", gpus, gbs, tokens, sim, 100 * e, kept_pub,
            kept_sim);
    /* measured: +10.9% at 8 GPUs to +7.2% at 256 (the 26.08 row's +10.8%); the published points within 1.3% of the
     * first, the simulated within 2.2% under it */
    CU_ASSERT(e > 0.0 && e < 0.2);
    CU_ASSERT(fabs(kept_sim - kept_pub) < 0.05);
    px_sim_result_free(&r);
    px_plan_free(&plan);
    rows++;
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 4);
}

int main(void) {
  static const px_test tests[] = {
      {"DeepEP's copies: the routers run", test_ep_copies},
      {"DeepEP's normal kernels on H800", test_deepep_kernels},
      {"HybridEP's kernels on GB200 and H100", test_hybridep_kernels},
      {"DeepEP's kernels across GB200 NVL72", test_deepep_mnnvl},
      {"DeepGEMM's grouped GEMMs on H800", test_deepgemm_grouped},
      {"Megatron-Bridge MoE on H100", test_megatron_bridge_moe},
      {"Megatron-Bridge MoE on Blackwell", test_megatron_bridge_blackwell_moe},
      {"DeepSeek-V3 on 256 GB200s: NVIDIA's optimization history", test_deepseek_v3_gb200_history},
      {"Qwen3-30B-A3B on GB300 from 8 to 256 GPUs: Megatron-Bridge's weak scaling (printed)",
       test_qwen3_gb300_weak_scaling},
  };
  return px_test_main("validation_moe", tests, sizeof tests / sizeof *tests) || px_test_doc_failed();
}
