/* Benchmark: the executor on one rank. Tokens/s, model FLOP/s against the
 * machine's peak (MFU), and per op kind the time per step beside its bound
 * (FLOPs at peak or bytes at memory bandwidth, whichever is slower), from the
 * per-op profile; the allocated peak memory beside the plan's prediction.
 *   bench_exec cpu  [MODEL=gpt2-124m] [SEQ=256]  [STEPS=3] [MBS=1] [MICRO=4]   fp32, OpenBLAS
 *   bench_exec cuda [MODEL=gpt2-124m] [SEQ=1024] [STEPS=6] [MBS=4] [MICRO=2]   bf16, device 0
 * On the CPU the peak is OpenBLAS's own sgemm rate measured here; on a GPU the
 * bf16 peak of the device's cluster preset. */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "exec/train.h"

/* OpenBLAS's sgemm ceiling with the threads the run used: the best single
 * n^3 product over at least min_s and 5 repetitions (a ceiling is the best
 * the machine does, so one slow repetition does not lower it). */
static double sgemm_ceiling(int n, double min_s) {
  float *a = calloc((size_t)n * n, 4), *b = calloc((size_t)n * n, 4), *c = calloc((size_t)n * n, 4);
  for (int i = 0; i < n * n; i++) a[i] = b[i] = 1.0f / (float)(1 + i % 7);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n); /* warm */
  double best = 0, start = px_clock_s();
  for (int r = 0; r < 5 || px_clock_s() - start < min_s; r++) {
    double t0 = px_clock_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double f = 2.0 * n * (double)n * n / (px_clock_s() - t0);
    if (f > best) best = f;
  }
  free(a), free(b), free(c);
  return best;
}

static const char *arg(int argc, char **argv, int i, const char *def) { return argc > i ? argv[i] : def; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *backend = arg(argc, argv, 1, "cpu");
  bool gpu = !strcmp(backend, "cuda");
  const char *model = arg(argc, argv, 2, "gpt2-124m");
  int64_t seq = atoll(arg(argc, argv, 3, gpu ? "1024" : "256")), steps = atoll(arg(argc, argv, 4, gpu ? "6" : "3"));
  int64_t mbs = atoll(arg(argc, argv, 5, gpu ? "4" : "1")), micro = atoll(arg(argc, argv, 6, gpu ? "2" : "4"));
  if (gpu && strcmp(px_train_default_backend(), "cuda") != 0) {
    printf("# bench_exec cuda: no CUDA device (or no CUDA backend in this build): skipped\n");
    MPI_Finalize();
    return 0;
  }
  px_model m;
  px_cluster c;
  px_err err = {0};
  if (px_model_load(model, &m, &err) || px_cluster_load(px_train_default_cluster(backend), &c, &err) ||
      px_cluster_set_size(&c, 1, 0, &err)) {
    fprintf(stderr, "bench_exec: %s\n", err.msg);
    return 1;
  }
  m.dropout = 0;
  px_parallel p;
  px_parallel_unset(&p);
  p.mbs = mbs, p.gbs = mbs * micro, p.seq = seq;
  p.precision = gpu ? PX_PREC_BF16 : PX_PREC_FP32;
  p.attention = gpu ? PX_ATTN_FLASH : PX_ATTN_UNFUSED;
  p.gelu = gpu ? PX_GELU_FUSED : PX_GELU_SEPARATE; /* on a GPU, the fastest plan the executor runs */
  px_plan plan;
  px_parallel_resolve(&p, &m, &c);
  if (px_plan_compile(&plan, &m, &c, &p, &err)) {
    fprintf(stderr, "bench_exec: %s\n", err.msg);
    return 1;
  }
  px_train_opts o;
  px_train_opts_init(&o);
  o.steps = steps;
  o.backend = backend;
  px_train_result r;
  double ceiling = 0; /* CPU: measured in the run's window, before and after it */
  double t0 = px_clock_s();
  if (px_train(&plan, &o, MPI_COMM_WORLD, &r, &err)) { /* step times: no per-op waits */
    fprintf(stderr, "bench_exec: %s\n", err.msg);
    return 1;
  }
  double wall = px_clock_s() - t0;
  if (!gpu) ceiling = sgemm_ceiling(1024, 1.0); /* with the threads the backend chose */
  px_train_result prof; /* per-op times: each op waited for */
  o.steps = 3;
  o.time_ops = true;
  if (px_train(&plan, &o, MPI_COMM_WORLD, &prof, &err)) {
    fprintf(stderr, "bench_exec: %s\n", err.msg);
    return 1;
  }
  px_dtype dt = px_parallel_compute_dtype(&plan.par);
  if (!gpu) {
    double again = sgemm_ceiling(1024, 1.0);
    if (again > ceiling) ceiling = again;
  }
  double peak = gpu ? c.gpu.peak_flops[dt] : ceiling, bw = c.gpu.hbm_bytes_per_s;
  double kind_s[PX_OP_COUNT] = {0}, kind_bound[PX_OP_COUNT] = {0}, all_s = 0;
  px_op_iter it = px_op_iter_begin(&plan, 0);
  for (const px_op *op; (op = px_op_next(&it));) {
    double t = it.id < prof.nops ? prof.op_s[it.id] : 0, f = op->flops / peak, mem = op->bytes / bw;
    all_s += t;
    kind_s[op->kind] += t;
    kind_bound[op->kind] += f > mem ? f : mem;
  }
  double flops = plan.model_flops_per_step / r.step_time_s;
  /* a measured ceiling the run beat was not the ceiling: say so and use the run's rate, never above 100% */
  bool raised = !gpu && flops > peak;
  if (raised) peak = flops;
  printf("# parallax executor, %s backend: %s, seq %lld, %lld micro-batches of %lld, %s, %s attention, %s GELU, "
         "one rank, %lld steps (%.1f s)\n",
         backend, model, (long long)seq, (long long)micro, (long long)mbs, px_dtype_names[dt],
         px_attention_names[plan.par.attention], px_gelu_names[plan.par.gelu], (long long)steps, wall);
  printf("step time           %.4f s (steps after the first)\n", r.step_time_s);
  printf("tokens/s            %.1f\n", r.tokens_per_s);
  printf("model FLOP/s        %.1f GFLOP/s = %.1f%% of %s %.1f GFLOP/s (MFU)\n", flops / 1e9, 100 * flops / peak,
         gpu ? c.gpu.name : raised ? "the run's own rate (it beat the measured sgemm ceiling)"
                                   : "OpenBLAS sgemm (1024^3, best of >= 1 s before and after the run)",
         peak / 1e9);
  printf("by op kind          ms/step   share   bound ms   of bound (bound: FLOPs at %.0f GFLOP/s or bytes at %.0f GB/s;\n"
         "                    - where the plan gives the op no cost)\n",
         peak / 1e9, bw / 1e9);
  for (int shown = 0; shown < 12; shown++) {
    int best = 0;
    for (int k = 1; k < PX_OP_COUNT; k++)
      if (kind_s[k] > kind_s[best]) best = k;
    if (kind_s[best] <= 0) break;
    printf("  %-18s %8.2f  %5.1f%%", px_op_names[best], 1e3 * kind_s[best], 100 * kind_s[best] / all_s);
    if (kind_bound[best] > kind_s[best]) /* faster than its bound: the bound's rate (a preset figure) is low */
      printf("  %9.2f   above (rate low)\n", 1e3 * kind_bound[best]);
    else if (kind_bound[best] > 0)
      printf("  %9.2f  %6.1f%%\n", 1e3 * kind_bound[best], 100 * kind_bound[best] / kind_s[best]);
    else
      printf("          -        -\n");
    kind_s[best] = 0;
  }
  printf("peak memory         %.1f MiB allocated, %.1f MiB predicted by the plan\n", (double)r.peak_bytes / 1048576.0,
         (double)r.predicted_peak_bytes / 1048576.0);
  px_train_result_free(&r);
  px_train_result_free(&prof);
  px_plan_free(&plan);
  MPI_Finalize();
  return 0;
}
