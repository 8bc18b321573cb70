/* Benchmark: plan compile, step-time bound and simulation time for large
 * plans, and how they scale with DP, TP, PP and micro-batches (flat, flat,
 * linear in the stages' work, linear). Usage: bench_sim [--quick] */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/clock.h"
#include "plan/plan.h"
#include "sim/sim.h"

static double rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

typedef struct {
  double compile_s, bound_s, sim_s, step_s, mfu, bound_step_s;
  unsigned long long events;
  int insts;
} result;

/* Choices beyond the common ones: SP, interleaving, the overlap, the fast path, expert parallelism. */
typedef struct {
  int sp, overlap; /* overlap -1: the default */
  int64_t vpp;     /* > 1: interleaved */
  bool no_fast;
  int64_t ep;      /* > 1: experts over ep ranks, whole (etp 1), DeepEP's dispatch */
} extra;

/* Median of `reps` runs of compile + simulate (one step, with the comm-free twin). */
static int measure_with(const char *model, const char *cluster, int64_t gpus, int64_t tp, int64_t pp, int64_t mbs,
                        int64_t gbs, int64_t seq, int recompute, const extra *x, int reps, result *out) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  if (px_model_load(model, &m, &err) || px_cluster_load(cluster, &c, &err) || px_cluster_set_size(&c, gpus, 0, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double comp[16], simt[16], bnd[16];
  if (reps > 16) reps = 16;
  for (int r = 0; r < reps; r++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = tp, p.pp = pp, p.mbs = mbs, p.gbs = gbs, p.seq = seq, p.zero = 1, p.recompute = recompute;
    p.sp = x->sp, p.overlap = x->overlap;
    if (x->vpp > 1) p.schedule = PX_SCHED_INTERLEAVED, p.vpp = x->vpp;
    if (x->ep > 1) p.ep = x->ep, p.etp = 1, p.moe_dispatch = PX_MOE_DEEPEP;
    px_parallel_resolve(&p, &m, &c);
    px_plan plan;
    double t0 = px_clock_s();
    if (px_plan_compile(&plan, &m, &c, &p, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    double t1 = px_clock_s(), lb = 0;
    if (px_sim_step_bound_s(&plan, &lb, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      px_plan_free(&plan);
      return 1;
    }
    bnd[r] = px_clock_s() - t1;
    t1 = px_clock_s();
    px_sim_result res;
    px_sim_opts o = {.no_fast = x->no_fast};
    if (px_sim_run(&plan, &o, &res, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      px_plan_free(&plan);
      return 1;
    }
    double t2 = px_clock_s();
    comp[r] = t1 - t0;
    simt[r] = t2 - t1;
    out->step_s = res.step_time_s;
    out->bound_step_s = lb;
    out->mfu = res.mfu;
    out->events = (unsigned long long)res.events;
    out->insts = 0;
    for (int64_t s = 0; s < pp; s++) out->insts += plan.programs[s].ninsts;
    px_sim_result_free(&res);
    px_plan_free(&plan);
  }
  /* medians */
  for (int i = 0; i < reps; i++)
    for (int j = i + 1; j < reps; j++) {
      if (comp[j] < comp[i]) { double t = comp[i]; comp[i] = comp[j]; comp[j] = t; }
      if (simt[j] < simt[i]) { double t = simt[i]; simt[i] = simt[j]; simt[j] = t; }
      if (bnd[j] < bnd[i]) { double t = bnd[i]; bnd[i] = bnd[j]; bnd[j] = t; }
    }
  out->compile_s = comp[reps / 2];
  out->sim_s = simt[reps / 2];
  out->bound_s = bnd[reps / 2];
  return 0;
}

static int measure(const char *model, const char *cluster, int64_t gpus, int64_t tp, int64_t pp, int64_t mbs,
                   int64_t gbs, int64_t seq, int recompute, int reps, result *out) {
  extra x = {.overlap = -1};
  return measure_with(model, cluster, gpus, tp, pp, mbs, gbs, seq, recompute, &x, reps, out);
}

static void row(const char *label, const result *r) {
  printf("%-52s %9.2f %9.2f %9.2f %10llu %8d %9.3f %9.3f %6.1f%%\n", label, r->compile_s * 1e3, r->bound_s * 1e3,
         r->sim_s * 1e3, r->events, r->insts, r->step_s, r->bound_step_s, 100 * r->mfu);
}

int main(int argc, char **argv) {
  int reps = argc > 1 && !strcmp(argv[1], "--quick") ? 1 : 5;
  result r;
  printf("# parallax simulator benchmark (median of %d runs; sim includes the comm-free twin run; bound: the\n"
         "# step-time lower bound a sweep prunes with, px_sim_step_bound_s, and its cost)\n", reps);
  printf("# %-50s %9s %9s %9s %10s %8s %9s %9s %7s\n", "plan", "compile_ms", "bound_ms", "sim_ms", "events", "insts",
         "step_s", "bound_s", "MFU");
  if (!measure("llama3-405b", "dgx-h100", 16384, 8, 16, 1, 2048, 8192, PX_RECOMPUTE_NONE, reps, &r))
    row("llama3-405b 16384xH100 tp8 pp16 dp128 gbs2048", &r);
  if (!measure("gpt3-175b", "dgx-a100", 1024, 8, 8, 1, 1536, 2048, PX_RECOMPUTE_FULL, reps, &r))
    row("gpt3-175b 1024xA100 tp8 pp8 dp16 gbs1536", &r);
  /* Meta's 405B plan (SP, interleaved): the overlap of every TP collective on the fast path and off it */
  printf("# TP overlap (llama3-405b 16384xH100 tp8 pp16 dp128 SP interleaved v2 gbs2048)\n");
  static const struct {
    const char *label;
    extra x;
  } ov[] = {{"llama3-405b SP v2, default overlap (tp-bwd)", {1, -1, 2, false, 0}},
            {"llama3-405b SP v2, --overlap all", {1, PX_OVERLAP_ALL, 2, false, 0}},
            {"llama3-405b SP v2, --overlap all, no fast path", {1, PX_OVERLAP_ALL, 2, true, 0}}};
  for (size_t i = 0; i < sizeof ov / sizeof *ov; i++)
    if (!measure_with("llama3-405b", "dgx-h100", 16384, 8, 16, 1, 2048, 8192, PX_RECOMPUTE_NONE, &ov[i].x, reps, &r))
      row(ov[i].label, &r);
  /* EP overlap: each steady-state forward MoE layer merged with a backward one, a pair's own segments */
  printf("# EP overlap (deepseek-v3 1024xH100 tp2 pp8 ep64 SP interleaved v4 gbs1024)\n");
  static const struct {
    const char *label;
    extra x;
  } epo[] = {{"deepseek-v3 ep64 v4, --overlap all", {1, PX_OVERLAP_ALL, 4, false, 64}},
             {"deepseek-v3 ep64 v4, --overlap all,ep", {1, PX_OVERLAP_ALL | PX_OVERLAP_EP, 4, false, 64}}};
  for (size_t i = 0; i < sizeof epo / sizeof *epo; i++)
    if (!measure_with("deepseek-v3", "dgx-h100", 1024, 2, 8, 1, 1024, 4096, PX_RECOMPUTE_NONE, &epo[i].x, reps, &r))
      row(epo[i].label, &r);
  printf("# DP scaling (llama3-70b, tp8 pp4, 16 micro-batches per rank)\n");
  for (int64_t dp = 2; dp <= 512; dp *= 4) {
    char label[96];
    snprintf(label, sizeof label, "llama3-70b dp %lld (%lld GPUs)", (long long)dp, (long long)(32 * dp));
    if (!measure("llama3-70b", "dgx-h100", 32 * dp, 8, 4, 1, 16 * dp, 8192, PX_RECOMPUTE_SELECTIVE, reps, &r)) row(label, &r);
  }
  printf("# TP scaling (llama3-70b, pp4 dp8, 16 micro-batches per rank)\n");
  for (int64_t tp = 1; tp <= 8; tp *= 2) {
    char label[96];
    snprintf(label, sizeof label, "llama3-70b tp %lld (%lld GPUs)", (long long)tp, (long long)(32 * tp));
    if (!measure("llama3-70b", "dgx-h100", 32 * tp, tp, 4, 1, 128, 4096, PX_RECOMPUTE_FULL, reps, &r)) row(label, &r);
  }
  printf("# PP scaling (llama3-70b, tp8 dp8, 64 micro-batches per rank, 1F1B)\n");
  for (int64_t pp = 1; pp <= 16; pp *= 2) {
    char label[96];
    snprintf(label, sizeof label, "llama3-70b pp %lld (%lld GPUs)", (long long)pp, (long long)(64 * pp));
    if (!measure("llama3-70b", "dgx-h100", 64 * pp, 8, pp, 1, 512, 8192, PX_RECOMPUTE_FULL, reps, &r)) row(label, &r);
  }
  printf("# micro-batch scaling (llama3-70b, tp8 pp4 dp8)\n");
  for (int64_t m = 8; m <= 256; m *= 2) {
    char label[96];
    snprintf(label, sizeof label, "llama3-70b %lld micro-batches", (long long)m);
    if (!measure("llama3-70b", "dgx-h100", 256, 8, 4, 1, 8 * m, 8192, PX_RECOMPUTE_SELECTIVE, reps, &r)) row(label, &r);
  }
  printf("# peak RSS %.1f MiB\n", rss_mib());
  return 0;
}
