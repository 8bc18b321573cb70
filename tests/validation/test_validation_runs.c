/* Validation against published whole runs: Megatron-LM SC'21 Table 1 and
 * Korthikanti et al. 2022 (SP, selective recomputation) within 10% a row
 * with the runs' era's GEMMs and 20% with the preset's; the Llama 3 paper's
 * Table 4, NVIDIA's NeMo and Megatron-Bridge tables and TorchTitan's
 * benchmarks printed beside the simulation, their bands guarding against
 * regressions. Each row's data and source: the tests/data CSV each test
 * names (its header says where the figures come from and how they ran).
 * Every row's error is also a run of its validated error band
 * (tests/validation/bands.h, PX_VALIDATION_BANDS). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "sim/compute.h"
#include "sim/sim.h"
#include "tests/testplan.h"
#include "tests/testutil.h"
#include "tests/validation/bands.h"
#include "tests/validation/doc.h"
#include "tests/validation/mfu.h"

/* One step of a published run's plan as the validations run it (no comm-free twin). */
static void sim_row(const px_plan *plan, px_sim_result *r) {
  px_err err = {0};
  px_sim_opts o = {.skip_exposed = true};
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, &o, r, &err), PX_OK);
}

/* The spread of a validation's errors, printed as docs/validation.md quotes it. */
static void err_print(const char *label, const px_test_err_range *a) {
  if (a->n) fprintf(stderr, "  %smean error %+.1f%% (%+.1f%% to %+.1f%%)\n", label, 100 * a->sum / a->n, 100 * a->min, 100 * a->max);
}

/* Each validation's row of README.md's accuracy table, written after the
 * tests (main) as the block validation-headline. */
enum { DOC_SC21, DOC_KORTHIKANTI, DOC_LLAMA3, DOC_BRIDGE, DOC_TORCHTITAN, DOC_ROWS };
static char doc_headline[DOC_ROWS][512];

/* The GPU counts a validation's rows span: 32-3,072. */
static const char *doc_gpus(const px_test_err_range *g, char buf[72]) {
  char lo[32], hi[32];
  snprintf(buf, 72, "%s-%s", px_test_doc_count((long long)g->min, lo), px_test_doc_count((long long)g->max, hi));
  return buf;
}

/* ---- Megatron-LM SC'21 Table 1 ---- */

/* dgx-a100's GEMM max_efficiency as the 2020 measurement of
 * tests/data/gemm_a100_2020.csv says, converted through the model's own
 * wave, tile and k factors at the benchmark's shape: the preset's value
 * scaled by published / modelled there (the model without the 2025 sweep's
 * ceiling, gpu.gemm.best_tflops, which is no figure of 2020's software). */
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
    c.gpu.gemm_best_flops = 0;
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
 * place of the preset's 2025 figures (max_efficiency, and no 2025 sweep's
 * ceiling), nothing else changed (the plan keeps the preset's); the older
 * GEMMs must give a slower step than preset's run. */
static void sim_gemm_2020(px_plan *plan, const px_sim_opts *o, double era_max, const px_sim_result *preset,
                          px_sim_result *r) {
  px_gpu keep = plan->cluster.gpu;
  plan->cluster.gpu.gemm_max_efficiency = era_max, plan->cluster.gpu.gemm_best_flops = 0;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_sim_run(plan, o, r, &err), PX_OK);
  plan->cluster.gpu = keep;
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
  FILE *md = px_test_doc_block(
      "validation-sc21",
      "| params | tp | pp | GPUs | mbs | vpp | published TFLOP/s/GPU | simulated, default straggler | error "
      "| `--jitter 0` | error | 2020 GEMM, default straggler | error |\n"
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  px_test_err_range rng_j = {0}, rng_e = {0}, gpu_rng = {0};
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
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-a100", gpus, &p, &err), PX_OK);
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
              tp, pp, gpus, mbs, vpp, tflops, sim_j, px_test_doc_pct(ej, b[0]), sim_tflops, px_test_doc_pct(e, b[1]),
              sim_e, px_test_doc_pct(ee, b[2]));
    px_test_err_add(&rng_j, ej), px_test_err_add(&rng_e, ee), px_test_err_add(&gpu_rng, (double)gpus);
    CU_ASSERT(px_test_band(&plan, ej, "Megatron-LM SC'21"));
    px_test_mfu_add(&plan, rj.mfu, ej, "Megatron-LM SC'21");
    /* the validation: the preset (its GEMMs at the A100's held rate, gpu.sustained_share) within 12% a row, measured
     * +1.3% to +10.2%; the 2020 GEMM (a burst figure, then at the same held share) printed, guarded within 20% */
    CU_ASSERT(ej > -0.12 && ej < 0.12);
    CU_ASSERT(ee > -0.20 && ee < 0.20);
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
            100 * sum_abs_j / rows, px_test_doc_pct(rng_j.min, b[0]), px_test_doc_pct(rng_j.max, b[1]),
            100 * sum_abs / rows, 100 * sum_abs_e / rows, px_test_doc_pct(rng_e.min, b[2]),
            px_test_doc_pct(rng_e.max, b[3]));
  px_test_doc_block_end(md, "validation-sc21");
  snprintf(doc_headline[DOC_SC21], sizeof doc_headline[DOC_SC21],
           "| [Megatron-LM SC'21](docs/validation.md#megatron-lm-sc21), Table 1: %d runs of GPT 1.7B-1T on A100s | "
           "%s | %s to %s (mean \\|error\\| %.1f%%); with a GEMM figure of the runs' era (2020) %s to %s "
           "(%.1f%%) |\n",
           rows, doc_gpus(&gpu_rng, gr), px_test_doc_pct(rng_j.min, b[0]), px_test_doc_pct(rng_j.max, b[1]),
           100 * sum_abs_j / rows, px_test_doc_pct(rng_e.min, b[2]), px_test_doc_pct(rng_e.max, b[3]),
           100 * sum_abs_e / rows);
  CU_ASSERT(sum_abs_j / rows < 0.07);
  CU_ASSERT(sum_abs_e / rows < 0.15);
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
  FILE *md = px_test_doc_block("validation-korthikanti2022",
                               "| model | recompute | SP | GPUs | published | preset | error | 2020 GEMM | error |\n"
                               "| --- | --- | :-: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  px_test_err_range rng = {0}, rng_e = {0}, gpu_rng = {0};
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
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-a100", gpus, &p, &err), PX_OK);
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
              px_test_doc_count(gpus, b[0]), pub_s, pre, px_test_doc_pct(e, b[1]), era, px_test_doc_pct(ee, b[2]));
    }
    px_test_err_add(&rng, e), px_test_err_add(&rng_e, ee), px_test_err_add(&gpu_rng, (double)gpus);
    CU_ASSERT(px_test_band(&plan, e, "Korthikanti et al. 2022"));
    px_test_mfu_add(&plan, r.mfu, e, "Korthikanti et al. 2022");
    /* the preset within 10% a row, mean |error| under 5% (issue #34's goal for Table 5; measured -1.8% to +7.2%,
     * 2.9%); the 2020 GEMM (a burst figure, at the A100's held share) printed, guarded within 20% (-15.1% to -4.7%) */
    CU_ASSERT(e > -0.10 && e < 0.10);
    CU_ASSERT(ee > -0.20 && ee < 0.20);
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
            100 * sum_abs / rows, px_test_doc_pct(rng.min, b[0]), px_test_doc_pct(rng.max, b[1]),
            100 * sum_abs_e / rows, px_test_doc_pct(rng_e.min, b[2]), px_test_doc_pct(rng_e.max, b[3]));
  px_test_doc_block_end(md, "validation-korthikanti2022");
  snprintf(doc_headline[DOC_KORTHIKANTI], sizeof doc_headline[DOC_KORTHIKANTI],
           "| [Korthikanti et al. 2022](docs/validation.md#korthikanti-et-al-2022): %d runs of GPT 22B-1T with SP and "
           "selective or full recomputation on A100s | %s | %s to %s (mean \\|error\\| %.1f%%); 2020 GEMM %s to "
           "%s (%.1f%%) |\n",
           rows, doc_gpus(&gpu_rng, gr), px_test_doc_pct(rng.min, b[0]), px_test_doc_pct(rng.max, b[1]),
           100 * sum_abs / rows, px_test_doc_pct(rng_e.min, b[2]), px_test_doc_pct(rng_e.max, b[3]),
           100 * sum_abs_e / rows);
  CU_ASSERT(sum_abs / rows < 0.05);
  CU_ASSERT(sum_abs_e / rows < 0.15);
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
  px_test_err_range gpu_rng = {0};
  FILE *md = px_test_doc_block("validation-llama3",
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
    p.schedule = PX_SCHED_INTERLEAVED, p.precision = PX_PREC_BF16;
    p.main_grad = PX_MAIN_GRAD_FP32; /* "FP32 gradient accumulation ... reduce-scatter gradients in FP32" (3.3.2) */
    /* the paper's balanced pipeline (Section 3.3.2): "we reduce one Transformer layer each from the first and the
     * last stages ... the first model chunk on the first stage has only the embedding, and the last model chunk on
     * the last stage has only output projection and loss": a chunk holds one layer, 126 + 2 = 128 chunks, V = 8 */
    p.vpp = (m.layers + 2) / pp;
    CU_ASSERT_EQUAL_FATAL(p.vpp * pp, m.layers + 2);
    p.nchunk_layers = (int32_t)(pp * p.vpp);
    for (int32_t c = 0; c < p.nchunk_layers; c++) p.chunk_layers[c] = c > 0 && c < p.nchunk_layers - 1;
    if (cp > 1) p.cp_algo = PX_CP_ALLGATHER;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
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
      fprintf(md, "| %s | %lld | %lld | %lld | %lld | %s | %.0f | %.1f | %s | %.1f | %s |\n",
              px_test_doc_count(gpus, b[0]), tp, cp, pp, dp, px_test_doc_count(seq, b[1]), tflops, sim,
              px_test_doc_pct(e, b[2]), half, px_test_doc_pct((half - tflops) / tflops, b[3]));
    size_t k = strlen(errs);
    snprintf(errs + k, sizeof errs - k, "%s%s", rows ? ", " : "", px_test_doc_pct(e, b[2]));
    px_test_err_add(&gpu_rng, (double)gpus);
    CU_ASSERT(px_test_band(&plan, e, "Llama 3 paper"));
    px_test_mfu_add(&plan, r.mfu, e, "Llama 3 paper");
    /* measured (2026-12-01, the paper's V = 8, fp32 gradients): +16.4%, +14.3%, +38.8% by parallax's count,
     * +11.9%, +9.9%, -1.0% by half the square; each held within -20% and +45% by the one, 20% by the other */
    CU_ASSERT(e > -0.20 && e < 0.45);
    CU_ASSERT(fabs(half - tflops) / tflops < 0.20);
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 3);
  px_test_doc_block_end(md, "validation-llama3");
  snprintf(doc_headline[DOC_LLAMA3], sizeof doc_headline[DOC_LLAMA3],
           "| [Llama 3 paper](docs/validation.md#llama-3-paper-table-4), Table 4: Llama 3 405B at 8K and 131K tokens "
           "on H100s | %s | %s |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), errs);
}

/* ---- Llama 2, 3 and GPT-3 on H100 (NVIDIA's NeMo and Megatron-Bridge performance tables) ---- */

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
  px_test_err_range errs[2] = {{0}}, gpu_rng = {0};
  fprintf(stderr, "\n  %-7s %-11s %5s %2s %2s %2s %2s %4s %4s  %9s %9s  %9s %9s %7s  %9s %s\n", "release", "model",
          "gpus", "tp", "pp", "cp", "vp", "gbs", "zero", "tok/s pub", "tok/s sim", "TFLOP pub", "TFLOP sim", "error",
          "px TFLOP", "fits");
  FILE *md = px_test_doc_block(
      "validation-megatron-bridge",
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
    PX_ASSERT_REL(tflops * 1e12 / tokens, px_test_nemo_flops_per_token(&m, seq, tp, !strcmp(count, "half"), 0), 0.01);
    int old = strcmp(release, "25") < 0; /* NeMo 24.07: mid-2024 software */
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.cp = cp, p.dp = gpus / (tp * pp * cp), p.seq = seq, p.gbs = gbs, p.mbs = mbs;
    p.sp = tp > 1, p.zero = fsdp ? 3 : 1, p.overlap = PX_OVERLAP_ALL, p.cp_algo = PX_CP_RING;
    p.precision = PX_PREC_FP8, p.recompute = PX_RECOMPUTE_NONE;
    p.fp8_recipe = !strcmp(prec, "fp8-ds") ? PX_FP8_DELAYED : PX_FP8_CURRENT;
    if (vp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = vp;
    px_test_megatron_split(&m, pp, vp, &p); /* the embedding and the loss a layer each */
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
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
              mbss, px_test_doc_count(gpus, b[0]), tp, pp, cp, vps, px_test_doc_count(gbs, b[1]), p.zero,
              px_test_doc_count(llround(tokens), b[2]), px_test_doc_count(llround(sim_tokens), b[3]),
              px_test_doc_pct(e, b[4]), tflops, sim_tokens * tflops / tokens);
    }
    /* measured (2026-11-25) +13.8% to +30.7% on Megatron-Bridge's rows,
     * +29.5% to +48.6% on 24.07's: each band leaves some 15 points above
     * its worst row for the cluster figures others are changing, and
     * fails a row that turns 10% pessimistic */
    CU_ASSERT(e > -0.10 && e < (old ? 0.65 : 0.45));
    px_test_err_add(&errs[old], e), px_test_err_add(&gpu_rng, (double)gpus);
    CU_ASSERT(px_test_band(&plan, e, old ? "NeMo 24.07" : "Megatron-Bridge"));
    px_test_mfu_add(&plan, r.mfu, e, old ? "NeMo 24.07" : "Megatron-Bridge");
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
            px_test_doc_pct(errs[0].sum / errs[0].n, b[0]), px_test_doc_pct(errs[0].min, b[1]),
            px_test_doc_pct(errs[0].max, b[2]), px_test_doc_pct(errs[1].sum / errs[1].n, b[3]),
            px_test_doc_pct(errs[1].min, b[4]), px_test_doc_pct(errs[1].max, b[5]));
  px_test_doc_block_end(md, "validation-megatron-bridge");
  snprintf(doc_headline[DOC_BRIDGE], sizeof doc_headline[DOC_BRIDGE],
           "| [Megatron-Bridge](docs/validation.md#megatron-bridge-and-nemo-on-h100) (NeMo 25.09-26.02): Llama 3 "
           "8B-405B in FP8 on H100s; NeMo 24.07's older rows | %s | %s to %s (mean %s); NeMo 24.07 %s to %s "
           "(mean %s) |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), px_test_doc_pct(errs[0].min, b[1]), px_test_doc_pct(errs[0].max, b[2]),
           px_test_doc_pct(errs[0].sum / errs[0].n, b[0]), px_test_doc_pct(errs[1].min, b[4]),
           px_test_doc_pct(errs[1].max, b[5]), px_test_doc_pct(errs[1].sum / errs[1].n, b[3]));
}

/* Qwen3-8B in BF16 on 16 H100s, Megatron-Bridge's verification card (tests/data/qwen3_8b_h100_card.csv: its recipe's
 * settings and why the model is read from Qwen3-8B-Base's config): a functional run of current software, BF16, with
 * Megatron-Core's unfused RoPE (apply_rope_fusion off). Printed with the fused RoPE beside it. */
static void test_qwen3_8b_card(void) {
  FILE *fp = fopen(px_test_path("tests/data/qwen3_8b_h100_card.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0;
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen3-8b-base-config.json"), &m, &err), PX_OK);
  while (fgets(line, sizeof line, fp)) {
    long long gpus, gbs, mbs, seq;
    double step_ms, tflops, tokens;
    if (line[0] == '#' ||
        sscanf(line, "%lld,%lld,%lld,%lld,%lf,%lf,%lf", &gpus, &gbs, &mbs, &seq, &step_ms, &tflops, &tokens) != 7)
      continue;
    PX_ASSERT_REL(tokens, (double)gbs * (double)seq / (double)gpus / (step_ms * 1e-3), 1e-5);
    /* Megatron-Bridge's count, causal attention as half the square */
    PX_ASSERT_REL(tflops * 1e12 / tokens, px_test_nemo_flops_per_token(&m, seq, 1, true, 0), 0.01);
    double sim[2];
    for (int fused = 0; fused < 2; fused++) {
      px_parallel p;
      px_parallel_unset(&p);
      p.tp = 1, p.pp = 1, p.dp = gpus, p.seq = seq, p.gbs = gbs, p.mbs = mbs, p.zero = 1, p.overlap = PX_OVERLAP_ALL;
      p.precision = PX_PREC_BF16, p.recompute = PX_RECOMPUTE_NONE, p.main_grad = PX_MAIN_GRAD_PARAM;
      p.elementwise = fused ? PX_ELEMWISE_FUSED : PX_ELEMWISE_ROPE_UNFUSED;
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", gpus, &p, &err), PX_OK);
      px_sim_result r;
      sim_row(&plan, &r);
      sim[fused] = r.tokens_per_s / (double)gpus;
      CU_ASSERT(r.fits);
      if (!fused) CU_ASSERT(px_test_band(&plan, sim[0] / tokens - 1, "Megatron-Bridge's verification card"));
      px_sim_result_free(&r);
      px_plan_free(&plan);
    }
    double e = sim[0] / tokens - 1;
    fprintf(stderr, "\n  qwen3-8b %lld H100s, BF16, TP1 DP%lld: published %.0f, simulated %.0f (%+.1f%%); with the fused "
            "RoPE %.0f (%+.1f%%)\n", gpus, gpus, tokens, sim[0], 100 * e, sim[1], 100 * (sim[1] / tokens - 1));
    /* measured +7.4% (+11.2% with the fused RoPE) */
    CU_ASSERT(e > -0.05 && e < 0.15);
    CU_ASSERT(sim[1] > sim[0]);
    rows++;
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 1);
}

/* ---- Llama 3.1 on H100 with FSDP2, TP, PP and CP (TorchTitan's benchmarks) ---- */

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
 * on 8-128 GPUs, FSDP2 + TP on 256, + PP on 512, with CP at 32K-256K), torchao's
 * Float8 benchmark and the Trainy team's H200 runs, beside the simulated ones on
 * the row's system (grand-teton-h100, the runs' hardware, but the H200 rows' hgx-h200), each row as
 * torchtitan runs it (the CSV's header: settings, sources, approximations).
 * The H100s run at a 500 W limit, the preset's peak Meta's stated figure for
 * them (800 TF/s bf16). Printed for docs/validation.md, each row held in a band. */
static void test_torchtitan_h100(void) {
  FILE *fp = fopen(px_test_path("tests/data/torchtitan_h100.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[256];
  int rows = 0, prev_table = 0, prev_compile = 0, prev_async = 0;
  bool prev_bf16 = false;
  double prev_pub = 0, prev_sim = 0;
  px_test_err_range errs = {0}, gpu_rng = {0};
  fprintf(stderr, "\n  %2s %-11s %4s %5s %4s %4s %3s %4s %2s %2s %2s %-11s %3s %5s  %9s %9s %7s  %7s %7s\n", "tb",
          "model", "gpus", "prec", "comp", "seqK", "lbs", "fsdp", "cp", "tp", "pp", "schedule", "mb", "async",
          "tok/s pub", "tok/s sim", "error", "GiB pub", "GiB sim");
  FILE *md =
      px_test_doc_block("validation-torchtitan",
                        "| table | model | GPUs | layout | precision | published tokens/s/GPU | simulated | error "
                        "| published GiB | simulated GiB |\n"
                        "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  while (fgets(line, sizeof line, fp)) {
    char name[32], prec[8], sched[16], ac[16], sys[24];
    int table, compiled, async_tp;
    long long gpus, seq, lbs, gbs, fsdp, tp, pp, cp, vp, mb;
    double tokens, mem_gib;
    if (line[0] == '#' ||
        sscanf(line,
               "%d,%31[^,],%lld,%7[^,],%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%15[^,],%lld,%lld,%15[^,],%d,%lf,%lf,%23[^,\n]",
               &table, name, &gpus, prec, &compiled, &seq, &lbs, &gbs, &fsdp, &tp, &pp, &cp, sched, &vp, &mb, ac,
               &async_tp, &tokens, &mem_gib, sys) != 20)
      continue;
    px_model m;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(name, &m, &err), PX_OK);
    /* the layout adds up: FSDP x TP x PP GPUs, lbs x FSDP sequences, the
     * micro-batches torchtitan's PP makes (one a stage, none without PP) */
    CU_ASSERT_EQUAL(fsdp * cp * tp * pp, gpus);
    CU_ASSERT_EQUAL(lbs * fsdp, gbs);
    CU_ASSERT_EQUAL(mb, pp > 1 ? pp * vp : 1);
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.dp = fsdp, p.seq = seq, p.gbs = gbs, p.mbs = lbs / mb, p.sp = tp > 1, p.zero = 3;
    if (cp > 1) p.cp = cp, p.cp_algo = PX_CP_ALLGATHER; /* torchtitan's rotate method "allgather" (the CSV) */
    p.main_grad = PX_MAIN_GRAD_FP32; /* FSDP2's reduce_dtype float32 */
    p.recompute = !strcmp(ac, "full") ? PX_RECOMPUTE_FULL : PX_RECOMPUTE_OP; /* per-op SAC: torchtitan's policy */
    CU_ASSERT(!strcmp(ac, "full") || !strcmp(ac, "selective-op"));
    p.overlap = async_tp ? PX_OVERLAP_ALL : PX_OVERLAP_DP | PX_OVERLAP_ZERO | PX_OVERLAP_PP;
    bool f8ag = !strcmp(prec, "fp8ag"); /* torchao's float8 with FSDP's float8 all-gather (table 8) */
    CU_ASSERT(f8ag || !strcmp(prec, "fp8") || !strcmp(prec, "bf16"));
    p.precision = f8ag || !strcmp(prec, "fp8") ? PX_PREC_FP8 : PX_PREC_BF16;
    if (p.precision == PX_PREC_FP8) p.fp8_recipe = PX_FP8_CURRENT, p.fp8_library = PX_FP8_LIB_TORCHAO;
    if (f8ag) p.fp8_params = 1;
    p.attention = PX_ATTN_FLASH2; /* F.scaled_dot_product_attention's default order: its flash backend (the CSV) */
    p.elementwise = compiled ? PX_ELEMWISE_FUSED : PX_ELEMWISE_EAGER; /* torch.compile fuses them; eager: the CSV */
    if (pp > 1) {
      p.reshard = 0, p.grad_accum = PX_ACCUM_FULL;
      p.schedule = !strcmp(sched, "interleaved") ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B, p.vpp = vp;
      torchtitan_split(m.layers, pp * vp, &p);
    }
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, sys, gpus, &p, &err), PX_OK);
    px_sim_result r;
    sim_row(&plan, &r);
    uint64_t peak = 0;
    for (int64_t s = 0; s < plan.par.pp; s++) peak = plan.mem[s].peak_bytes > peak ? plan.mem[s].peak_bytes : peak;
    double sim = r.tokens_per_s / (double)gpus, e = sim / tokens - 1;
    fprintf(stderr,
            "  %2d %-11s %4lld %5s %4d %4lld %3lld %4lld %2lld %2lld %2lld %-11s %3lld %5d  %9.0f %9.0f %+6.1f%%  %7.1f "
            "%7.1f\n",
            table, name, gpus, prec, compiled, seq / 1024, lbs, fsdp, cp, tp, pp, sched, mb, async_tp, tokens, sim,
            100 * e, mem_gib, (double)peak / (1u << 30)); /* published GiB 0: none published */
    if (md) { /* FSDP x TP x PP, then the pipeline's schedule or the local batch, and what else the row sets */
      char layout[160], b[4][32];
      int n = snprintf(layout, sizeof layout, "FSDP %lld", fsdp);
      if (cp > 1) n += snprintf(layout + n, sizeof layout - (size_t)n, " × CP %lld", cp);
      if (tp > 1) n += snprintf(layout + n, sizeof layout - (size_t)n, " × TP %lld", tp);
      if (pp > 1)
        n += snprintf(layout + n, sizeof layout - (size_t)n, " × PP %lld, %s, %lld stage%s a rank, %lld micro-batches",
                      pp, sched, vp, vp > 1 ? "s" : "", mb);
      else
        n += snprintf(layout + n, sizeof layout - (size_t)n, ", lbs %lld", lbs);
      if (seq != 8192) n += snprintf(layout + n, sizeof layout - (size_t)n, ", %lldK tokens", seq / 1024);
      if (strcmp(sys, "grand-teton-h100")) n += snprintf(layout + n, sizeof layout - (size_t)n, ", on `%s`", sys);
      if (!strcmp(ac, "full")) n += snprintf(layout + n, sizeof layout - (size_t)n, ", full AC");
      if (async_tp) snprintf(layout + n, sizeof layout - (size_t)n, ", async TP");
      char pub_gib[16] = "—"; /* none published */
      if (mem_gib > 0) snprintf(pub_gib, sizeof pub_gib, "%.1f", mem_gib);
      fprintf(md, "| %d | `%s` | %s | %s | %s | %s | %s | %s | %s | %.1f |\n", table, name,
              px_test_doc_count(gpus, b[0]), layout,
              f8ag                 ? "Float8, float8 all-gather"
              : !strcmp(prec, "fp8") ? "Float8"
              : compiled             ? "BF16, compiled"
                                     : "BF16, eager",
              px_test_doc_count(llround(tokens), b[1]), px_test_doc_count(llround(sim), b[2]), px_test_doc_pct(e, b[3]),
              pub_gib, (double)peak / (1u << 30));
    }
    /* measured (2026-12-01, the 500 W parts at Meta's stated 800 TF/s peak) -13.4% to +19.5%, mean +4.8%: the
     * CP rows straddle it (-13.4% at CP 2, +13.3% at CP 4), where the published tokens/s fall 0.65x from 32K to 64K
     * and 0.42x from 64K to 128K (the simulated 0.59x, 0.55x); held within -20% and +30% */
    CU_ASSERT(e > -0.20 && e < 0.30);
    /* each technique the table stacks (torch.compile, Float8, async TP, interleaving) gains in the simulation as
     * it does in the table. torch.compile over eager (the same run but its elementwise kernels): the time eager's
     * kernels add to a step is HBM-bound, so it checks the memory-bound model apart from the GEMMs' clocks (the
     * 500 W limit's): measured on grand-teton-h100 (HBM2e at 2.4 TB/s) 0.48 s and 0.49 s a step simulated, 0.39 s
     * and 0.41 s published; held within 30% */
    if (table == prev_table) CU_ASSERT((sim > prev_sim) == (tokens > prev_pub));
    if (table == prev_table && compiled && !prev_compile) {
      double step_tokens = (double)(gbs * seq) / (double)gpus; /* a GPU's tokens a step */
      double eager_pub = step_tokens / prev_pub - step_tokens / tokens, eager_sim = step_tokens / prev_sim - step_tokens / sim;
      fprintf(stderr, "     torch.compile's gain: published %+.1f%%, simulated %+.1f%%; eager's kernels add %.3f s a step "
              "published, %.3f s simulated\n", 100 * (tokens / prev_pub - 1), 100 * (sim / prev_sim - 1), eager_pub,
              eager_sim);
      CU_ASSERT(fabs(eager_sim / eager_pub - 1) < 0.30);
    }
    /* async TP over the same layout without it (table 7: the June 2025 A/B runs), printed: how much of the TP
     * collectives the pipelined GEMMs hide (docs/simulator.md, Overlap) */
    if (table == prev_table && f8ag && prev_bf16) /* torchao's float8 over the same run in BF16 (table 8) */
      fprintf(stderr, "     Float8's gain: published %+.1f%%, simulated %+.1f%%\n", 100 * (tokens / prev_pub - 1),
              100 * (sim / prev_sim - 1));
    if (table == prev_table && async_tp && !prev_async)
      fprintf(stderr, "     async TP's gain: published %+.1f%%, simulated %+.1f%%\n", 100 * (tokens / prev_pub - 1),
              100 * (sim / prev_sim - 1));
    prev_table = table, prev_compile = compiled, prev_async = async_tp, prev_pub = tokens, prev_sim = sim;
    prev_bf16 = p.precision == PX_PREC_BF16;
    px_test_err_add(&errs, e), px_test_err_add(&gpu_rng, (double)gpus);
    CU_ASSERT(px_test_band(&plan, e, "torchtitan"));
    px_test_mfu_add(&plan, r.mfu, e, "torchtitan");
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 30);
  err_print("", &errs);
  char b[3][24];
  if (md)
    fprintf(md, "\nMean error %s (%s to %s).\n", px_test_doc_pct(errs.sum / errs.n, b[0]),
            px_test_doc_pct(errs.min, b[1]), px_test_doc_pct(errs.max, b[2]));
  px_test_doc_block_end(md, "validation-torchtitan");
  snprintf(doc_headline[DOC_TORCHTITAN], sizeof doc_headline[DOC_TORCHTITAN],
           "| [torchtitan](docs/validation.md#torchtitan-on-h100): Llama 3.1 8B-405B with FSDP2, TP, PP and CP, BF16 and "
           "Float8, on 500 W H100s (and H200s) | %s | %s to %s (mean %s) |\n",
           doc_gpus(&gpu_rng, (char[72]){0}), px_test_doc_pct(errs.min, b[1]), px_test_doc_pct(errs.max, b[2]),
           px_test_doc_pct(errs.sum / errs.n, b[0]));
}

/* ---- issue #34: the sweep's best plans against the published MFU ---- */

/* Sweeps at published runs' models, GPU counts and global batches (SC'21's
 * GPT-3 175B on 1,024 A100s at 1,536; Megatron-Bridge's Llama 3 70B on 64
 * and 8B on 8 H100s at 128, 8K), their best MFU against the range of the
 * rows above (run first: the ranges are theirs). A sweep may beat every
 * published plan: it searches what they fixed (recompute, micro-batch); the
 * margin of 15% over the range widened by the simulator's own errors on those
 * runs is the regression guard. The attention kernel is the runs': the 16-bit
 * H100 runs are torchtitan's, FlashAttention-2's through SDPA (flash2), and
 * the Llama 3 paper's (its kernel not stated). */
static void test_sweep_mfu(void) {
  FILE *md = px_test_doc_block("validation-sweep-mfu", "");
  px_test_mfu_head(md);
  px_test_mfu_sweep("gpt3-175b", "dgx-a100", 1024, 1536, 0, PX_PREC_BF16, PX_ATTN_FLASH, 0.15, md);
  px_test_mfu_sweep("llama3-70b", "dgx-h100", 64, 128, 8192, PX_PREC_FP8, PX_ATTN_FLASH, 0.15, md);
  px_test_mfu_sweep("llama3-8b", "dgx-h100", 8, 128, 8192, PX_PREC_FP8, PX_ATTN_FLASH, 0.15, md);
  px_test_mfu_sweep("llama3-8b", "dgx-h100", 8, 128, 8192, PX_PREC_BF16, PX_ATTN_FLASH2, 0.15, md);
  /* H200: torchtitan's two runs (Llama 3 8B, FSDP, per-op SAC, Float8, FlashAttention-2 through SDPA): the sweep at
   * their model, smaller GPU count, global batch and kernel */
  px_test_mfu_sweep("llama3-8b", "hgx-h200", 32, 64, 8192, PX_PREC_FP8, PX_ATTN_FLASH2, 0.15, md);
  px_test_doc_block_end(md, "validation-sweep-mfu");
}

int main(void) {
  static const px_test tests[] = {
      {"Megatron-LM SC'21 Table 1: the preset within 12% a row (7% mean), the 2020 GEMM within 20% (15%)",
       test_megatron_table1},
      {"Korthikanti et al. 2022 (SP, selective recompute), 10 runs: the preset within 10% a row (5% mean), the "
       "2020 GEMM within 20% (15%)",
       test_korthikanti2022},
      {"Llama 3 405B on H100, the Llama 3 paper's Table 4 (printed)", test_llama3_table4},
      {"Llama 2, 3 and GPT-3 on H100, NeMo and Megatron-Bridge's performance tables (printed; optimistic)",
       test_megatron_bridge_h100},
      {"Qwen3-8B in BF16 on 16 H100s, Megatron-Bridge's verification card (printed)", test_qwen3_8b_card},
      {"Llama 3.1 8B-405B on H100 with FSDP2, TP, PP and CP, TorchTitan's benchmarks (printed; optimistic)",
       test_torchtitan_h100},
      {"issue #34: the best plans sweeps find on A100, H100 and H200 against the published runs' MFU above",
       test_sweep_mfu},
  };
  int failed = px_test_main("validation_runs", tests, sizeof tests / sizeof tests[0]);
  FILE *md = px_test_doc_block("validation-headline",
                               "| published runs | GPUs | error of the simulated step or throughput |\n"
                               "| --- | ---: | --- |\n");
  for (int i = 0; md && i < DOC_ROWS; i++) fputs(doc_headline[i], md);
  px_test_doc_block_end(md, "validation-headline");
  return failed || px_test_doc_failed();
}
