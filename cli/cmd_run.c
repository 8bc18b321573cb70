/* parallax run: train a compiled plan for real with MPI ranks (mpirun -np N
 * parallax run ...); rank 0 reports losses, step time, tokens/s and memory. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/exec.h"
#include "cli/launch.h"
#include "core/json.h"
#include "report/run.h"

static const char usage[] =
    "usage: mpirun -np N parallax run --model M [--cluster C] [plan flags] [--steps S] [--data FILE]\n"
    "                                [--seed K] [--lr X] [--ckpt DIR [--ckpt-every K] [--ckpt-async] [--ckpt-keep K]\n"
    "                                [--resume] [--overwrite]] [--profile FILE] [--backend cpu|cuda] [--json]\n\n"
    "Runs the plan's programs for real: each rank finds its (tp, pp, dp) coordinates, splits a\n"
    "communicator per group and runs its stage's program. The backend defaults to cuda when\n"
    "a GPU is visible, else cpu; the cluster to the backend's (local-cpu, or the DGX/HGX preset\n"
    "of the GPU), the GPU count to the number of ranks and the precision to bf16 on GPUs, fp32\n"
    "on the CPU (where --precision fp8 is emulated around fp32: --fp8-base fp32).\n\n"
    "Rank 0 prints a line per step as it ends (step, loss, gradient norm, step time, tokens/s, model\n"
    "TFLOP/s per GPU, peak memory; --json: a JSON object a line), flushed, so a log file keeps every\n"
    "step a run that dies got through; then the summary (--json: the run's JSON object).\n\n"
    "--ckpt DIR: rank 0 locks DIR (DIR/lock: a second job on it is refused) and checks every output\n"
    "path before the first step. A DIR already holding a checkpoint is refused unless --resume goes\n"
    "on from it or --overwrite replaces it (the old one stays until the run's first checkpoint is\n"
    "written; with --resume, --overwrite changes nothing). --ckpt-keep K keeps the K - 1 checkpoints\n"
    "before the latest in DIR/step-<N>/.\n\n";

/* Rank 0's log as the run goes: a line per step (px_train_opts.on_step), flushed, so that a run that
 * dies keeps every line it printed. */
typedef struct {
  const px_plan *plan;
  bool json;
} step_log;

static void log_step(void *ctx, const px_train_step *s) {
  const step_log *l = ctx;
  if (l->json) {
    cJSON *o = px_report_run_step_json(l->plan, s);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    if (text) printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(o);
  } else {
    px_report_run_step_text(l->plan, s, stdout);
  }
  fflush(stdout);
}

int px_cmd_run(int argc, char **argv) {
  px_launch_rank_tie(); /* no rank outlives its job's launcher */
  setvbuf(stdout, NULL, _IOLBF, 0); /* a run's log is read as it goes, from a file or a pipe too */
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_RUN;
  int code = px_cli_start(&a, "parallax run", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  /* MPI, OpenBLAS and (for --backend cuda) the GPU's libraries come with the executor */
  const px_exec_module *x = px_cli_exec(&err);
  if (!x) return px_cli_fail(err.status, &err);
  px_status st = PX_OK;
  /* A checkpoint writer thread may run beside the main thread, which alone calls MPI. */
  bool threads = false;
  int rank = 0, size = 1;
  x->mpi_init(true, &rank, &size, &threads);
  px_launch_rank_started(rank, size); /* under launch: the job started (a failure from now on is a rank's) */
  /* A file size limit (ulimit -f) fails the write with EFBIG, which the checkpoint reports, instead of a signal. */
  signal(SIGXFSZ, SIG_IGN);
  px_model m;
  px_cluster c;
  px_plan plan;
  bool have_plan = false;
  px_train_result r = {0};
  bool local = false; /* a failure of this rank's training, rather than of the (common) input */
  const char *backend = NULL;
  if (!(st = px_cli_run_plan(&a, x, size, &backend, &m, &c, &plan, &err))) {
    have_plan = true;
    px_train_opts o;
    x->train_opts_init(&o);
    o.backend = backend;
    o.steps = px_cli_run_steps(&a, x);
    o.data_path = a.data_file;
    if (a.seed >= 0) o.hp.seed = (uint64_t)a.seed;
    if (a.lr >= 0) o.hp.lr = (float)a.lr; /* 0 too: the weights stay as initialised */
    if (a.loss_scale > 0) o.hp.loss_scale = (float)a.loss_scale;
    o.ckpt_dir = a.ckpt_dir;
    o.base_ckpt = a.base_ckpt;
    o.ckpt_every = a.ckpt_every;
    o.resume = a.resume;
    o.overwrite = a.overwrite;
    o.ckpt_keep = a.ckpt_keep;
    o.ckpt_async = a.ckpt_async;
    o.threads = (int)a.threads;
    /* flags that mean nothing without --ckpt are refused, not ignored */
    const char *needs_ckpt = a.ckpt_every ? "--ckpt-every" : a.resume ? "--resume" : a.overwrite ? "--overwrite"
                             : a.ckpt_keep ? "--ckpt-keep" : a.ckpt_async ? "--ckpt-async" : NULL;
    if (!a.ckpt_dir && needs_ckpt) st = px_err_set(&err, PX_ERR_INPUT, "%s needs --ckpt DIR", needs_ckpt);
    if (!st && a.loss_scale > 0 && plan.par.precision != PX_PREC_FP16)
      st = px_err_set(&err, PX_ERR_INPUT, "--loss-scale is fp16's; the plan's precision is %s (hint: --precision fp16)",
                      px_precision_names[plan.par.precision]);
    if (!st && a.ckpt_async && !threads)
      st = px_err_set(&err, PX_ERR_RUNTIME, "--ckpt-async: the MPI library gives no thread support (needs "
                      "MPI_THREAD_FUNNELED: only the main thread calls MPI)");
    o.profile_path = a.profile_file;
    o.grads_path = a.grads_file;
    o.on_step = log_step;
    o.on_step_ctx = &(step_log){&plan, a.json};
    if (!st) {
      st = x->train(&plan, &o, &r, &err);
      local = st != PX_OK;
    }
  }
  if (!st && rank == 0) {
    if (a.json) {
      st = px_json_print_free(px_report_run_json(&plan, &r), &err);
    } else {
      px_report_run_text(&plan, &r, stdout);
      if (r.threads > 0) /* the launcher's own flag: Open MPI binds a rank to one core by default */
        puts("hint: under mpirun, `--bind-to none` lets a rank's BLAS threads use every core");
    }
  }
  x->train_result_free(&r);
  if (have_plan) px_plan_free(&plan);
  /* Bad input is the same on every rank: rank 0 says it; training failures are said where they happen. */
  bool say = local ? !strstr(err.msg, "another rank") : rank == 0;
  code = st ? (say ? px_cli_fail(st, &err) : (int)st) : 0;
  x->mpi_finalize(code);
  return code;
}
