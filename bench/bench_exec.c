/* Benchmark: the CPU executor on a GPT-2-124M-shaped model, one rank:
 * tokens/s, the share of step time in GEMMs (from the per-op profile)
 * beside OpenBLAS's own sgemm rate, and the allocated peak memory beside
 * the plan's prediction. Usage: bench_exec [SEQ [STEPS]] */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/train.h"
#include "core/json.h"
#include "sim/compute.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double sgemm_gflops(int n) {
  float *a = calloc((size_t)n * n, 4), *b = calloc((size_t)n * n, 4), *c = calloc((size_t)n * n, 4);
  for (int i = 0; i < n * n; i++) a[i] = b[i] = 1.0f / (float)(1 + i % 7);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n); /* warm */
  double t0 = now_s();
  int reps = 3;
  for (int r = 0; r < reps; r++) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
  double t = (now_s() - t0) / reps;
  free(a), free(b), free(c);
  return 2.0 * n * (double)n * n / t / 1e9;
}

static bool is_gemm(int kind) {
  return kind == PX_OP_LINEAR || kind == PX_OP_LINEAR_BWD_DATA || kind == PX_OP_LINEAR_BWD_WEIGHT ||
         kind == PX_OP_ATTN_SCORES || kind == PX_OP_ATTN_SCORES_BWD || kind == PX_OP_ATTN_CONTEXT ||
         kind == PX_OP_ATTN_CONTEXT_BWD;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int64_t seq = argc > 1 ? atoll(argv[1]) : 256, steps = argc > 2 ? atoll(argv[2]) : 3;
  px_model m;
  px_cluster c;
  px_err err = {0};
  if (px_model_load("gpt2-124m", &m, &err) || px_cluster_load("local-cpu", &c, &err) ||
      px_cluster_set_size(&c, 1, 0, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  m.dropout = 0;
  px_parallel p;
  px_parallel_unset(&p);
  p.gbs = 4, p.mbs = 1, p.seq = seq, p.precision = PX_PREC_FP32, p.attention = PX_ATTN_UNFUSED;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  if (px_plan_compile(&plan, &m, &c, &p, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  char prof[] = "/tmp/px_bench_prof_XXXXXX";
  int fd = mkstemp(prof);
  if (fd >= 0) close(fd);
  px_train_opts o;
  px_train_opts_init(&o);
  o.steps = steps;
  o.backend = "cpu";
  o.profile_path = prof;
  px_train_result r;
  if (px_train(&plan, &o, MPI_COMM_WORLD, &r, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  /* GEMM share from the profile: op ids in program order */
  cJSON *pj = NULL;
  double gemm_s = 0, all_s = 0, gemm_flops = 0, kind_s[PX_OP_COUNT] = {0};
  if (!px_json_load(prof, &pj, &err)) {
    const cJSON *ops = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(pj, "stages"), 0), "op_s_per_step");
    const px_program *prog = &plan.programs[0];
    int64_t id = 0;
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_block *b = &plan.blocks[prog->insts[i].block];
      for (int32_t k = 0; k < b->nops; k++, id++) {
        double t = cJSON_GetArrayItem(ops, (int)id) ? cJSON_GetArrayItem(ops, (int)id)->valuedouble : 0;
        all_s += t;
        kind_s[b->ops[k].kind] += t;
        if (is_gemm(b->ops[k].kind)) gemm_s += t, gemm_flops += b->ops[k].flops;
      }
    }
  }
  cJSON_Delete(pj);
  remove(prof);
  double peak = sgemm_gflops(1024);
  printf("# parallax CPU executor: gpt2-124m shape, seq %lld, 4 micro-batches of 1, fp32, one rank, %lld steps\n", (long long)seq,
         (long long)steps);
  printf("step time           %.3f s (steps after the first)\n", r.step_time_s);
  printf("tokens/s            %.1f\n", r.tokens_per_s);
  printf("GEMM share          %.1f%% of op time, %.1f GFLOP/s inside GEMMs\n", 100 * gemm_s / all_s,
         gemm_flops / gemm_s / 1e9);
  printf("OpenBLAS sgemm      %.1f GFLOP/s (1024^3, this machine)\n", peak);
  printf("model FLOP/s        %.1f GFLOP/s (%.0f%% of sgemm)\n", plan.model_flops_per_step / r.step_time_s / 1e9,
         100 * plan.model_flops_per_step / r.step_time_s / 1e9 / peak);
  printf("time by op kind     ");
  for (int shown = 0; shown < 6; shown++) {
    int best = 0;
    for (int k = 1; k < PX_OP_COUNT; k++)
      if (kind_s[k] > kind_s[best]) best = k;
    if (kind_s[best] <= 0) break;
    printf("%s%s %.0f%%", shown ? ", " : "", px_op_names[best], 100 * kind_s[best] / all_s);
    kind_s[best] = 0;
  }
  printf("\n");
  printf("peak memory         %.1f MiB allocated, %.1f MiB predicted by the plan\n", (double)r.peak_bytes / 1048576.0,
         (double)r.predicted_peak_bytes / 1048576.0);
  px_train_result_free(&r);
  px_plan_free(&plan);
  MPI_Finalize();
  return 0;
}
