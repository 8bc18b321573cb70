/* Benchmark: plan-search speed, in plans that fit evaluated a second (each
 * simulated, or ruled out of the top K by its bound), for the two
 * questions of docs/simulator.md, "Sweep speed": the demo's (Llama 3 70B on 512 H100s) and GPT-3 175B on 1,024
 * A100s. With --all it also runs the sweep that simulates every plan and
 * checks that both rank the same top K.
 * Usage: bench_sweep [--threads N] [--top K] [--all] [--quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/clock.h"
#include "sim/sweep.h"

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

typedef struct {
  const char *label, *model, *cluster;
  int64_t gpus, gbs;
  double tokens, price;
} question;

/* One sweep: prints a row and returns its result (caller frees). */
static int sweep(const question *q, int threads, int64_t keep, px_sweep_result *r) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  if (px_model_load(q->model, &m, &err) || px_cluster_load(q->cluster, &c, &err) ||
      px_cluster_set_size(&c, q->gpus, 0, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = q->gbs;
  o.tokens = q->tokens, o.price_per_gpu_hour = q->price;
  o.threads = threads;
  o.keep = keep;
  double w0 = px_clock_s(), c0 = cpu_s();
  if (px_sweep_run(&m, &c, &o, r, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double wall = px_clock_s() - w0, cpu = cpu_s() - c0;
  int64_t fit = r->simulated + r->npruned;
  printf("%-28s %5s %8lld %8lld %9lld %8lld %8.2f %8.2f %9.0f %9.0f\n", q->label, keep ? "top" : "all",
         (long long)r->enumerated, (long long)fit, (long long)r->simulated, (long long)r->npruned, wall, cpu,
         (double)fit / wall, (double)fit / cpu * threads);
  return 0;
}

int main(int argc, char **argv) {
  int threads = 2;
  int64_t top = 10;
  bool all = false, quick = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--all")) all = true;
    else if (!strcmp(argv[i], "--quick")) quick = true;
    else {
      fprintf(stderr, "usage: bench_sweep [--threads N] [--top K] [--all] [--quick]\n");
      return 2;
    }
  }
  static const question qs[] = {
      {"llama3-70b 512xH100 B512", "llama3-70b", "dgx-h100", 512, 512, 15e12, 2.5},
      {"gpt3-175b 1024xA100 B1536", "gpt3-175b", "dgx-a100", 1024, 1536, 0, 0},
      {"llama3-8b 16xH100 B64", "llama3-8b", "dgx-h100", 16, 64, 0, 0}, /* --quick: this one alone */
  };
  px_alloc_keep_freed(); /* as parallax sweep does */
  printf("# parallax sweep benchmark: %d threads, top %lld; fit = simulated + pruned (ruled out of the top by the\n"
         "# bound); plans/s = fit / wall, and / (CPU s / threads), the rate on %d idle cores\n",
         threads, (long long)top, threads);
  printf("# %-26s %5s %8s %8s %9s %8s %8s %8s %9s %9s\n", "question", "sims", "enum", "fit", "simulated", "pruned",
         "wall_s", "cpu_s", "plans/s", "plans/cpu");
  int rc = 0;
  for (size_t k = quick ? 2 : 0; k < (quick ? 3 : 2); k++) {
    px_sweep_result pruned, every;
    if (sweep(&qs[k], threads, top, &pruned)) return 1;
    if (all) {
      if (sweep(&qs[k], threads, 0, &every)) return 1;
      bool same = pruned.n >= top && every.n >= top;
      for (int64_t i = 0; same && i < top; i++)
        same = pruned.entries[i].index == every.entries[i].index &&
               pruned.entries[i].sim.step_time_s == every.entries[i].sim.step_time_s;
      printf("# %s: top %lld %s\n", qs[k].label, (long long)top, same ? "identical" : "DIFFERENT");
      if (!same) rc = 1;
      px_sweep_result_free(&every);
    }
    px_sweep_result_free(&pruned);
  }
  return rc;
}
