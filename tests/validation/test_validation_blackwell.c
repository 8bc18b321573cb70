/* Blackwell: the presets' GEMM figures against the microbenchmarks they
 * come from (the ceiling a sweep of shapes measured, fp8 GEMMs held under
 * load), and NVIDIA's published Megatron-Bridge throughput on DGX-B200,
 * GB200 NVL72 and GB300 NVL72 against the simulator, each row with its
 * recipe's settings, each row's signed error and the signed mean per GPU
 * family printed (docs/validation.md, "Megatron-Bridge on Blackwell"). */
#include <math.h>
#include <stdarg.h>
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

static px_cluster preset(const char *name) {
  px_cluster c;
  px_err err = {0};
  px_status st = px_cluster_load(name, &c, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  return c;
}

/* ---- the GEMM ceiling: the best a sweep of shapes measured ---- */

/* Where a preset gives the best TFLOP/s of a shape sweep (MAMF), no shape
 * the model costs runs faster, and a training step's shapes, long in k and
 * whole in waves, run at it: Llama 3 70B's fc1 at mbs 2 (16,384 tokens x
 * 2 x 28,672 x 8,192) and 8192^3. Without the ceiling the model's factors
 * there (0.95-0.97) times max_efficiency (fitted at MAMF's own shape, short
 * in k) would put Blackwell's GEMMs 17-21% above the best measured. */
static void test_gemm_ceiling(void) {
  static const char *const presets[] = {"dgx-a100", "dgx-h100", "dgx-b200", "dgx-b300", "gb200-nvl72", "dgx-gb300"};
  static const px_dtype dts[] = {PX_DTYPE_BF16, PX_DTYPE_FP8};
  int capped = 0;
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
    px_cluster c = preset(presets[i]);
    const px_gpu *g = &c.gpu;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
      double best = dts[d] == PX_DTYPE_FP8 ? g->gemm_fp8_best_flops : g->gemm_best_flops;
      if (best <= 0) continue;
      double ceil_eff = best / g->peak_flops[dts[d]];
      PX_ASSERT_REL(px_gpu_gemm_ceiling(g, dts[d]), ceil_eff, 1e-12);
      for (int64_t m = 256; m <= 65536; m *= 2)
        for (int64_t n = 256; n <= 65536; n *= 4)
          for (int64_t k = 128; k <= 32768; k *= 2)
            CU_ASSERT(px_gemm_efficiency8(g, dts[d], false, m, n, k, 1) <= ceil_eff * (1 + 1e-12));
      double fc1 = px_gemm_efficiency8(g, dts[d], false, 16384, 2 * 28672, 8192, 1);
      double cube = px_gemm_efficiency8(g, dts[d], false, 8192, 8192, 8192, 1);
      double free_max = px_gpu_gemm_max(g, dts[d], false) * px_gemm_k_factor(g, dts[d], false, 8192);
      fprintf(stderr, "\n  %-11s %-4s best %7.1f TFLOP/s: 16384x57344x8192 %7.1f, 8192^3 %7.1f (uncapped up to %7.1f)",
              presets[i], px_dtype_names[dts[d]], best / 1e12, fc1 * g->peak_flops[dts[d]] / 1e12,
              cube * g->peak_flops[dts[d]] / 1e12, free_max * g->peak_flops[dts[d]] / 1e12);
      PX_ASSERT_REL(fc1, ceil_eff, 1e-12);
      capped += fabs(fc1 - ceil_eff) < 1e-12;
    }
  }
  fprintf(stderr, "\n");
  CU_ASSERT_EQUAL(capped, 11); /* bf16 on all six, fp8 on H100 (cuBLASLt's 8192^3), B200, B300, GB200, GB300 */
  /* a preset without the figure keeps the model uncapped */
  px_cluster h = preset("dgx-h100");
  CU_ASSERT_EQUAL(px_gpu_gemm_ceiling(&h.gpu, PX_DTYPE_FP32), 1.0);
}

/* GEMMs held at the power limit (tests/data/gemm_held.csv: cuBLASLt after 10,000 warm-up iterations, one harness
 * on five GPUs, Azure's; and parallax calibrate's 60 s of 8192^3 bf16 on an H200) against the model's sustained
 * rate as the simulator costs a GEMM (px_compute_op_s: burst x gpu.sustained_share, with its launch). The shares
 * come from these rows: a GPU's own share is the mean of its source's held rates over the burst model's at the same
 * shapes (the H200's from parallax's rows, GB200's and A100's from Azure's), recomputed here; GB300's is GB200's
 * times GB300's rows over GB200's (same fp8 peak, SMs and harness), the H100-class presets borrow the H200's. The
 * H200's and H100's Azure rows are the check on the harness: the model at the H200's own share within 3% of them
 * (measured at this change: +0.7% both). Every row printed, held within 15%. The fp4 rows (GB200, GB300) are
 * printed beside the model's NVFP4 rate, not bounded (one figure for every shape); their ratio over fp8, GB200's
 * at or above GB300's at each shape, is why both carry the same NVFP4 figure. */
static void test_gemm_held(void) {
  enum { GPUS = 5, SHAPES = 4, H100 = 1, H200 = 2, GB200 = 3, GB300 = 4 };
  static const char *const gpus[GPUS] = {"dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72", "dgx-gb300"};
  /* the source each GPU's own share comes from (NULL: none, borrowed or derived) */
  static const char *const own[GPUS] = {"azure-a100", NULL, "parallax-h200", "azure-gb200", NULL};
  px_test_csv r = {0};
  int n[GPUS] = {0}, n4[GPUS] = {0}, nown[GPUS] = {0};
  double sum[GPUS] = {0}, held[GPUS][SHAPES] = {{0}}, fp4[GPUS][SHAPES] = {{0}}, own_sum[GPUS] = {0};
  while (px_test_csv_next(&r, "tests/data/gemm_held.csv", 7)) {
    char **f = r.f;
    bool is_fp4 = !strcmp(f[1], "fp4"), is_fp8 = !strcmp(f[1], "fp8"), is_bf16 = !strcmp(f[1], "bf16");
    CU_ASSERT_FATAL(is_fp4 || is_fp8 || is_bf16 || !strcmp(f[1], "fp16"));
    int i = 0;
    while (i < GPUS && strcmp(f[0], gpus[i])) i++;
    CU_ASSERT_FATAL(i < GPUS);
    px_cluster c = preset(f[0]);
    /* the simulator's own op cost: a GEMM's burst rate at the GPU's sustained share */
    px_op op = {.kind = PX_OP_LINEAR,
                .flags = (uint16_t)(is_fp4 ? PX_OPF_FP8 | PX_OPF_NVFP4 : is_fp8 ? PX_OPF_FP8 : 0),
                .dim = {atoll(f[2]), atoll(f[3]), atoll(f[4])}};
    op.flops = 2.0 * (double)op.dim[0] * (double)op.dim[1] * (double)op.dim[2];
    px_dtype dt = is_fp4 || is_fp8 || is_bf16 ? PX_DTYPE_BF16 : PX_DTYPE_FP16;
    double tflops = atof(f[5]), model = op.flops / px_compute_op_s(&c.gpu, dt, &op) / 1e12, e = model / tflops - 1;
    double share = c.gpu.sustained_share;
    c.gpu.sustained_share = 1;
    double burst = op.flops / px_compute_op_s(&c.gpu, dt, &op) / 1e12;
    fprintf(stderr, "\n  %-11s %-4s %5sx%5sx%5s  held %7.1f  model %7.1f TFLOP/s  %+5.1f%%  (share %.3f; held over burst %.3f, %s)",
            f[0], f[1], f[2], f[3], f[4], tflops, model, 100 * e, share, tflops / burst, f[6]);
    if (own[i] && !strcmp(own[i], f[6]) && !is_fp4) own_sum[i] += tflops / burst, nown[i]++;
    if (is_fp4) { /* every GPU's rows in one shape order */
      CU_ASSERT_FATAL(n4[i] < SHAPES);
      fp4[i][n4[i]++] = tflops;
      continue;
    }
    CU_ASSERT(fabs(e) < 0.15);
    if (strncmp(f[6], "azure-", 6)) continue;
    CU_ASSERT_FATAL(n[i] < SHAPES);
    held[i][n[i]++] = tflops;
    sum[i] += e;
  }
  CU_ASSERT_EQUAL(r.rows, GPUS * SHAPES + 6 + 2);
  fprintf(stderr, "\n  Azure's rows, the model over them, mean:");
  for (int i = 0; i < GPUS; i++) {
    CU_ASSERT_EQUAL(n[i], SHAPES);
    fprintf(stderr, " %s %+.1f%%", gpus[i], n[i] ? 100 * sum[i] / n[i] : 0.0);
  }
  for (int i = 0; i < GPUS; i++) {
    if (!own[i]) continue;
    double want = own_sum[i] / nown[i];
    px_cluster c = preset(gpus[i]);
    fprintf(stderr, "\n  %s: held over burst, %d rows of %s: %.4f; gpu.sustained_share %.3f", gpus[i], nown[i], own[i],
            want, c.gpu.sustained_share);
    CU_ASSERT(nown[i] >= 2);
    CU_ASSERT_DOUBLE_EQUAL(c.gpu.sustained_share, want, 0.0005);
  }
  /* the harness against the H200's own measurement: the model at the H200's share meets Azure's Hopper rows */
  CU_ASSERT(fabs(sum[H200] / SHAPES) < 0.03 && fabs(sum[H100] / SHAPES) < 0.03);
  px_cluster h200 = preset(gpus[H200]);
  static const char *const borrowers[] = {"dgx-h100", "hgx-h800", "a3-mega", "grand-teton-h100"};
  for (size_t b = 0; b < sizeof borrowers / sizeof *borrowers; b++)
    CU_ASSERT_EQUAL(preset(borrowers[b]).gpu.sustained_share, h200.gpu.sustained_share);
  double ratio = 0;
  for (int s = 0; s < SHAPES; s++) ratio += held[GB300][s] / held[GB200][s] / SHAPES;
  px_cluster gb200 = preset(gpus[GB200]), gb300 = preset(gpus[GB300]);
  fprintf(stderr, "\n  GB300 held over GB200 held: x%.3f; GB200's share %.3f x that = %.3f, dgx-gb300's %.3f\n", ratio,
          gb200.gpu.sustained_share, gb200.gpu.sustained_share * ratio, gb300.gpu.sustained_share);
  CU_ASSERT_DOUBLE_EQUAL(gb300.gpu.sustained_share, gb200.gpu.sustained_share * ratio, 0.0005);
  CU_ASSERT(n4[GB200] == 3 && n4[GB300] == 3);
  fprintf(stderr, "  fp4 held over fp8 held (GB200, GB300):");
  for (int s = 0; s < n4[GB200]; s++) {
    double r200 = fp4[GB200][s] / held[GB200][s], r300 = fp4[GB300][s] / held[GB300][s];
    fprintf(stderr, " %.2f %.2f;", r200, r300);
    CU_ASSERT(r200 >= r300);
  }
  fprintf(stderr, " NVFP4 figure over fp8: GB200 %.2f, GB300 %.2f\n", gb200.gpu.gemm_nvfp4_ratio,
          gb300.gpu.gemm_nvfp4_ratio);
  CU_ASSERT_EQUAL(gb200.gpu.gemm_nvfp4_ratio, gb300.gpu.gemm_nvfp4_ratio);
}

/* ---- Megatron-Bridge's published runs on Blackwell ---- */

enum { FAM_B200, FAM_GB200, FAM_GB300, FAMS };
static const char *const fam_presets[FAMS] = {"dgx-b200", "gb200-nvl72", "dgx-gb300"};
/* the CSV's precisions: FP8 with current scaling, MXFP8, NVFP4 */
enum { PREC_FP8CS, PREC_MXFP8, PREC_NVFP4, PRECS };
static const char *const prec_names[PRECS] = {"fp8-cs", "mxfp8", "nvfp4"};

/* Every dense row of tests/data/megatron_bridge_blackwell.csv, as its
 * recipe runs it (the CSV's header), on the row's preset: published
 * tokens/s a GPU beside the simulated, the error, whether the plan fits
 * (with the layers whose activations the recipe offloads to the Grace CPU
 * offloaded: --offload-activations, and a full-iteration CUDA graph as
 * --cuda-graph full), and per GPU family and precision the signed mean. A row
 * parallax refuses (a precision a preset cannot run) is printed with the
 * refusal and fails the count below, never skipped. The recipes' parameter
 * all-gathers in their
 * weights' format (fp8_param_gather, fp4_param_gather) are fp8_params. The goal of
 * issue #34 (each row within +-12%, the mean within 6%) is printed, not
 * asserted: it is not reached (docs/validation.md); the bands asserted are
 * what the model reaches, with room for the figures others change, and fail
 * a row or a mean that moves 10 points. Each row's error is also a run
 * of its validated error band (tests/validation/bands.h, PX_VALIDATION_BANDS). */
/* A table's rows for docs/validation.md, gathered while the rows run (the
 * FP8 and the block-scaled rows are written as two blocks). */
typedef struct {
  char text[24576];
  size_t len;
} doc_rows;

static void doc_add(doc_rows *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void doc_add(doc_rows *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->text + d->len, sizeof d->text - d->len, fmt, ap);
  va_end(ap);
  CU_ASSERT_FATAL(n >= 0 && (size_t)n < sizeof d->text - d->len); /* room for every row */
  d->len += (size_t)n;
}

/* "DGX-GB200" for gb200-nvl72: the tables' system names */
static const char *const fam_systems[] = {"DGX-B200", "DGX-GB200", "DGX-GB300"};

static void test_megatron_bridge_blackwell(void) {
  FILE *fp = fopen(px_test_path("tests/data/megatron_bridge_blackwell.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  static doc_rows doc_fp8, doc_block; /* the two tables' rows (static: 48 KiB) */
  doc_fp8.len = doc_block.len = 0;
  char line[512];
  int rows = 0, refused = 0, nofit[PRECS] = {0};
  px_test_err_range cell[FAMS][PRECS] = {{{0}}}, fam[FAMS] = {{0}}, prec[PRECS] = {{0}}, all = {0};
  fprintf(stderr, "\n  %-8s %-11s %-11s %5s %-6s %-15s %4s  %9s %9s %7s  %4s %s\n", "release", "system", "model", "gpus",
          "prec", "tp.pp.cp vp fsdp", "gbs", "tok/s pub", "tok/s sim", "error", "fits", "recipe");
  while (fgets(line, sizeof line, fp)) {
    char release[16], sys[32], name[32], pname[16], count[8], graph[8], overlap[32], gather[8], commit[16];
    long long gpus, gbs, mbs, seq, fsdp, tp, pp, cp, vp, offload;
    double tokens, tflops;
    if (line[0] == '#' ||
        sscanf(line,
               "%15[^,],%31[^,],%31[^,],%lld,%15[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lf,%lf,%7[a-z],%7[a-z],%lld,"
               "%31[a-z+-],%7[a-z0-9],%15[0-9a-f]",
               release, sys, name, &gpus, pname, &gbs, &mbs, &seq, &fsdp, &tp, &pp, &cp, &vp, &tokens, &tflops, count,
               graph, &offload, overlap, gather, commit) != 21)
      continue;
    int f = 0, q = 0;
    while (f < FAMS && strcmp(fam_presets[f], sys)) f++;
    while (q < PRECS && strcmp(prec_names[q], pname)) q++;
    CU_ASSERT_FATAL(f < FAMS && q < PRECS);
    CU_ASSERT(!strcmp(graph, "none") || !strcmp(graph, "full"));
    CU_ASSERT(!strcmp(gather, "none") || !strcmp(gather, "fp8") || !strcmp(gather, "fp4"));
    CU_ASSERT_EQUAL(strlen(commit), 7); /* the Megatron-Bridge commit whose presets the row runs */
    px_model m;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(name, &m, &err), PX_OK);
    /* the tables' TFLOP/s are their tokens/s times Megatron-Bridge's formula (rounding: within 1%; 26.04.01
     * prints tokens/s in steps of 32, 1,024 and 864 for 405B: within 2%) */
    CU_ASSERT_STRING_EQUAL(count, "half");
    PX_ASSERT_REL(tflops * 1e12 / tokens, px_test_nemo_flops_per_token(&m, seq, tp, true, 0), 0.02);
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.cp = cp, p.dp = gpus / (tp * pp * cp), p.seq = seq, p.gbs = gbs, p.mbs = mbs;
    p.sp = tp > 1, p.zero = fsdp ? 3 : 1, p.cp_algo = PX_CP_RING, p.recompute = PX_RECOMPUTE_NONE;
    for (char *c = overlap; *c; c++) /* the CSV's '+' for px_overlap_parse's ',' */
      if (*c == '+') *c = ',';
    CU_ASSERT_EQUAL_FATAL(px_overlap_parse(overlap, &p.overlap, &err), PX_OK);
    CU_ASSERT_FATAL(px_test_precision(prec_names[q], &p));
    /* the recipes' fp8_param_gather (fp8, mxfp8) and fp4_param_gather (nvfp4): the weights in their format, no
     * bf16 copy */
    CU_ASSERT(!strcmp(gather, "none") || !strcmp(gather, q == PREC_NVFP4 ? "fp4" : "fp8"));
    p.fp8_params = strcmp(gather, "none") != 0;
    p.offload_act_layers = offload; /* the recipe's cpu_offloading_num_layers, over NVLink-C2C to the Grace */
    p.cuda_graph = px_test_cuda_graph(graph); /* full: cuda_graph_impl full_iteration */
    if (vp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = vp;
    px_test_megatron_split(&m, pp, vp, &p);
    char layout[32], recipe[96] = "";
    snprintf(layout, sizeof layout, "%lld.%lld.%lld %lld %lld", tp, pp, cp, vp, fsdp);
    px_plan plan;
    /* on its container's cuDNN release: the fused attention of the newest release measured at or before it */
    if (px_test_compile_cudnn(&plan, &m, sys, gpus, &p, px_test_release_cudnn(release), &err) != PX_OK) {
      fprintf(stderr, "  %-8s %-11s %-11s %5lld %-6s %-15s %4lld  %9.0f   REFUSED: %s\n", release, sys, name, gpus, pname,
              layout, gbs, tokens, err.msg);
      refused++;
      continue;
    }
    px_sim_result r;
    px_sim_opts o = {.skip_exposed = true};
    CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
    double sim_tokens = r.tokens_per_s / (double)gpus, e = sim_tokens / tokens - 1;
#define NOTE(...) snprintf(recipe + strlen(recipe), sizeof recipe - strlen(recipe), __VA_ARGS__)
    if (!strcmp(graph, "full")) NOTE("CUDA graph");
    if (offload) NOTE("%s%lld layers offloaded", *recipe ? ", " : "", offload);
    if (!(p.overlap & PX_OVERLAP_TP) && tp > 1) NOTE("%sno TP overlap", *recipe ? ", " : "");
    if (!(p.overlap & PX_OVERLAP_ZERO)) NOTE("%sno param-gather overlap", *recipe ? ", " : "");
#undef NOTE
    fprintf(stderr, "  %-8s %-11s %-11s %5lld %-6s %-15s %4lld  %9.0f %9.0f %+6.1f%%  %4s %s\n", release, sys, name,
            gpus, pname, layout, gbs, tokens, sim_tokens, 100 * e, r.fits ? "yes" : "no", recipe);
    { /* its row of docs/validation.md's table */
      char b[4][32], split[48];
      if (fsdp) snprintf(split, sizeof split, "%lld\u00b7%lld\u00b7%lld, FSDP %lld", tp, pp, cp, fsdp);
      else if (vp > 1) snprintf(split, sizeof split, "%lld\u00b7%lld\u00b7%lld, %lld", tp, pp, cp, vp);
      else snprintf(split, sizeof split, "%lld\u00b7%lld\u00b7%lld", tp, pp, cp);
      doc_rows *d = q == PREC_FP8CS ? &doc_fp8 : &doc_block;
      doc_add(d, "| %s | %s | `%s` | %s |", release, fam_systems[f], name, px_test_doc_count(gpus, b[0]));
      if (q != PREC_FP8CS) doc_add(d, " %s |", q == PREC_MXFP8 ? "MXFP8" : "NVFP4");
      doc_add(d, " %s | %s | %s | %s | %s%s |\n", split, px_test_doc_count(llround(tokens), b[1]),
              px_test_doc_count(llround(sim_tokens), b[2]), px_test_doc_pct(e, b[3]), recipe,
              r.fits ? "" : *recipe ? "; does not fit" : "does not fit");
    }
    /* measured at this change (docs/validation.md): fp8-cs +0.9% to +25.3%, mxfp8 +0.6% to +50.6%, nvfp4
     * -5.6% to +30.0% (the block-scaled GEMMs at B300's measured rates; GB300's clocks from Azure's held
     * GEMMs over GB200's; TP collectives pipelined as userbuffers run them); held 10 points wider */
    static const double lo[PRECS] = {-0.10, -0.10, -0.16}, hi[PRECS] = {0.36, 0.61, 0.40};
    CU_ASSERT(e > lo[q] && e < hi[q]);
    px_test_err_add(&cell[f][q], e), px_test_err_add(&fam[f], e), px_test_err_add(&prec[q], e);
    px_test_err_add(&all, e);
    nofit[q] += !r.fits;
    CU_ASSERT(px_test_band(&plan, e, "Megatron-Bridge"));
    px_test_mfu_add(&plan, r.mfu, e, "Megatron-Bridge");
    rows++;
    px_sim_result_free(&r);
    px_plan_free(&plan);
  }
  fclose(fp);
  /* every row's precision runs on its preset (B200, GB200, GB300 have block-scaled tensor cores), and every
   * layout (GB200's 405B at pp 16 x vp 8: 128 chunks for 126 layers, the first and last the embedding's and the
   * loss's alone) */
  CU_ASSERT_EQUAL(refused, 0);
  CU_ASSERT_EQUAL(rows + refused, 76);
  /* and fits in its GPUs' HBM, as the published run did, with the weights held as its recipe holds them (the
   * nine GB300 MXFP8 plans were 9.7-17.9 GiB over with a bf16 copy beside the MXFP8 weights) */
  for (int q = 0; q < PRECS; q++) CU_ASSERT_EQUAL(nofit[q], 0);
  int goal = 1;
  for (int f = 0; f < FAMS; f++) {
    for (int q = 0; q < PRECS; q++) {
      const px_test_err_range *a = &cell[f][q];
      if (!a->n) {
        fprintf(stderr, "  %-11s %-6s  no rows\n", fam_presets[f], prec_names[q]);
        continue;
      }
      fprintf(stderr, "  %-11s %-6s %2d rows: mean error %+.1f%% (%+.1f%% to %+.1f%%)\n", fam_presets[f], prec_names[q],
              a->n, 100 * a->sum / a->n, 100 * a->min, 100 * a->max);
      goal &= fabs(a->sum / a->n) <= 0.06 && a->min >= -0.12 && a->max <= 0.12;
    }
    fprintf(stderr, "  %-11s all    %2d rows: mean error %+.1f%%\n", fam_presets[f], fam[f].n, 100 * fam[f].sum / fam[f].n);
  }
  for (int q = 0; q < PRECS; q++)
    fprintf(stderr, "  %-6s %2d rows: mean error %+.1f%% (%+.1f%% to %+.1f%%), %d not fitting\n", prec_names[q], prec[q].n,
            100 * prec[q].sum / prec[q].n, 100 * prec[q].min, 100 * prec[q].max, nofit[q]);
  /* docs/validation.md: the FP8 rows, the block-scaled rows, and the means per family and precision */
  FILE *md = px_test_doc_block("validation-blackwell-fp8",
                               "| release | system | model | GPUs | tp\u00b7pp\u00b7cp, vp, FSDP | published tokens/s/GPU "
                               "| simulated | error | recipe |\n| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |\n");
  if (md) fputs(doc_fp8.text, md);
  px_test_doc_block_end(md, "validation-blackwell-fp8");
  md = px_test_doc_block("validation-blackwell-blockscaled",
                         "| release | system | model | GPUs | precision | tp\u00b7pp\u00b7cp, vp, FSDP | published "
                         "tokens/s/GPU | simulated | error | recipe |\n| --- | --- | --- | ---: | --- | --- | ---: | ---: "
                         "| ---: | --- |\n");
  if (md) {
    fputs(doc_block.text, md);
    fprintf(md, "\n| system | precision | rows | error | mean |\n| --- | --- | ---: | --- | ---: |\n");
    static const char *const prec_words[PRECS] = {"FP8 (current scaling)", "MXFP8", "NVFP4"};
    for (int q = 0; q < PRECS; q++)
      for (int f = 0; f < FAMS; f++) {
        const px_test_err_range *a = &cell[f][q];
        char b[3][24];
        if (a->n)
          fprintf(md, "| %s | %s | %d | %s to %s | %s |\n", fam_systems[f], prec_words[q], a->n,
                  px_test_doc_pct(a->min, b[0]), px_test_doc_pct(a->max, b[1]), px_test_doc_pct(a->sum / a->n, b[2]));
      }
    char b[24];
    fprintf(md, "| all | all | %d | | %s |\n", all.n, px_test_doc_pct(all.sum / all.n, b));
  }
  px_test_doc_block_end(md, "validation-blackwell-blockscaled");
  fprintf(stderr, "  all %d rows: mean error %+.1f%%; issue #34's goal (each row within +-12%%, each mean within 6%%): %s\n",
          all.n, 100 * all.sum / all.n, goal ? "reached" : "not reached");
  /* measured at this change: the means of fp8-cs +11.8% (B200), +14.0% (GB200), +6.1% (GB300); mxfp8 +14.1%,
   * +17.9%, +6.7%; nvfp4 (GB200, GB300) +14.0%, -0.9%: each held within 10 points more than its precision's
   * largest */
  static const double mean_max[PRECS] = {0.24, 0.28, 0.24};
  for (int f = 0; f < FAMS; f++)
    for (int q = 0; q < PRECS; q++)
      if (cell[f][q].n) CU_ASSERT(fabs(cell[f][q].sum / cell[f][q].n) < mean_max[q]);
  static const int expect[FAMS][PRECS] = {{4, 4, 0}, {15, 13, 9}, {12, 10, 9}};
  for (int f = 0; f < FAMS; f++)
    for (int q = 0; q < PRECS; q++) CU_ASSERT_EQUAL(cell[f][q].n, expect[f][q]);
}

/* issue #34: a sweep at Megatron-Bridge's Llama 3 8B on 8 B200s (global
 * batch 128, 8K, fp8) against the MFU of the B200 rows above (run first);
 * the guard as test_validation_runs' (tests/validation/mfu.h). */
static void test_sweep_mfu(void) {
  FILE *md = px_test_doc_block("validation-sweep-mfu-b200", "");
  px_test_mfu_head(md);
  px_test_mfu_sweep("llama3-8b", "dgx-b200", 8, 128, 8192, PX_PREC_FP8, PX_ATTN_FLASH, 0.15, md);
  px_test_doc_block_end(md, "validation-sweep-mfu-b200");
}

int main(void) {
  static const px_test tests[] = {
      {"GEMMs never above the best a sweep of shapes measured (MAMF), at it for a training step's shapes",
       test_gemm_ceiling},
      {"GEMMs held at the power limit (cuBLASLt after 10,000 warm-up iterations) against burst x sustained share",
       test_gemm_held},
      {"Llama 3 8B-405B in FP8, MXFP8 and NVFP4 on B200, GB200 and GB300, Megatron-Bridge's performance tables (printed)",
       test_megatron_bridge_blackwell},
      {"issue #34: the best plan a sweep finds on B200 against the published runs' MFU above", test_sweep_mfu},
  };
  return px_test_main("validation_blackwell", tests, sizeof tests / sizeof tests[0]) || px_test_doc_failed();
}
