/* Loading the executor module (exec/module.h). */
#include "cli/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan/runnable.h"

const px_exec_module *px_cli_exec(px_err *err) {
#if PX_EXEC_LINKED
  (void)err;
  return &px_exec_module_table;
#else
  const void *t = NULL;
  /* OpenBLAS's idle workers spin up to 2^28 cycles (~0.1 s) after each product
   * before they sleep, on the cores the CPU kernels' threads need next
   * (kernels/cpu/par.c): 2^4 cycles unless the user set it. OpenBLAS reads it
   * once, when the module brings libopenblas in, so it is set before. */
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  if (px_module_open(PX_EXEC_MODULE_FILE, PX_EXEC_MODULE_ENV, PX_EXEC_MODULE_SYMBOL, PX_EXEC_MODULE_ABI, &t, err)) {
    px_err_prefix(err, "the executor is not available");
    return NULL;
  }
  return t;
#endif
}

px_status px_cli_run_plan(px_args *a, const px_exec_module *x, int size, const char **backend, px_model *m,
                          px_cluster *c, px_plan *plan, px_err *err) {
  *backend = a->backend ? a->backend : x->default_backend();
  if (!a->cluster && !a->plan_file) a->cluster = x->default_cluster(*backend);
  int64_t need = (a->par.tp > 0 ? a->par.tp : 1) * (a->par.pp > 0 ? a->par.pp : 1) * (a->par.cp > 0 ? a->par.cp : 1) *
                 (a->par.dp > 0 ? a->par.dp : 1);
  if (!a->gpus && !a->nodes && !a->plan_file && (a->par.dp > 0 ? need != size : size % need != 0))
    return px_err_set(err, PX_ERR_INPUT, "mpirun started %d rank%s but the plan needs %s%lld (hint: mpirun -np %lld)",
                      size, size == 1 ? "" : "s", a->par.dp > 0 ? "" : "a multiple of ", (long long)need,
                      (long long)need);
  if (!a->gpus && !a->nodes) a->gpus = size;
  /* the cpu backend computes in fp32: its defaults, where no plan file says otherwise (a saved plan's
   * precision is the plan's: set here, it would replace the file's, and a run would silently train another) */
  if (a->par.precision < 0 && !a->plan_file && !strcmp(*backend, "cpu")) a->par.precision = PX_PREC_FP32;
  if (a->par.fp8_base < 0 && !a->plan_file && !strcmp(*backend, "cpu")) a->par.fp8_base = PX_FP8_BASE_FP32;
  /* a dropless router's expert buffers hold every routing it can make: an imbalanced router never stops the run
   * (Megatron-Core's dropless MoE runs on), and the plan counts them, so the measured peak stays the plan's */
  if (a->par.moe_buffers < 0 && !a->plan_file) a->par.moe_buffers = PX_MOE_BUF_WORST;
  return px_args_plan(a, m, c, plan, err);
}

int64_t px_cli_run_steps(const px_args *a, const px_exec_module *x) {
  px_train_opts o;
  x->train_opts_init(&o);
  return a->steps > 0 ? a->steps : o.steps;
}

bool px_cli_same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  return a && b && !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

px_status px_cli_take_to(const px_exec_module *x, const char *dir, bool overwrite, const char *what, px_ckpt_lock *lock,
                         px_err *err) {
  char note[4800], holds[600];
  if (x->ckpt_lock_take(dir, lock, note, sizeof note, err)) return px_err_prefix(err, "--to");
  if (note[0]) fprintf(stderr, "parallax: %s\n", note);
  px_ckpt_probe_info p;
  x->ckpt_probe(dir, &p);
  if ((p.found || p.kept) && !overwrite) {
    x->ckpt_probe_describe(&p, holds, sizeof holds);
    return px_err_set(err, PX_ERR_INPUT, "--to %s already holds %s: add --overwrite to replace it (it stays until "
                      "the %s one is written), or give another directory", dir, holds, what);
  }
  return PX_OK;
}

px_status px_cli_plan_after(const px_exec_module *x, px_args *a, const char *dir, px_plan *plan, px_err *err) {
  px_planfile *old = px_calloc(1, sizeof *old, err);
  if (!old) return PX_ERR_RUNTIME;
  px_status st = x->reshard_recorded(dir, old, err);
  if (!st && a->par.precision < 0) a->par.precision = old->par.precision;
  if (!st && a->par.gbs <= 0) a->par.gbs = old->par.gbs; /* the same batches as before */
  /* fp8's recipe and base dtype as the run resolved them (run --backend cpu makes the base fp32) */
  if (!st && a->par.fp8_recipe < 0) a->par.fp8_recipe = old->par.fp8_recipe;
  if (!st && a->par.fp8_base < 0) a->par.fp8_base = old->par.fp8_base;
  if (!st && a->par.moe_buffers < 0) a->par.moe_buffers = old->par.moe_buffers; /* run's worst-case expert buffers */
  if (!a->gpus && !a->nodes && !a->plan_file)
    a->gpus = (a->par.tp > 0 ? a->par.tp : 1) * (a->par.pp > 0 ? a->par.pp : 1) * (a->par.cp > 0 ? a->par.cp : 1) *
              (a->par.dp > 0 ? a->par.dp : 1);
  px_model m;
  px_cluster c;
  if (!st && a->plan_file) {
    st = px_args_load(a, &m, &c, err);
  } else if (!st) {
    if (a->model) st = px_model_load(a->model, &m, err);
    else m = old->model;
    if (!st && a->cluster) st = px_cluster_load(a->cluster, &c, err);
    else if (!st) c = old->cluster;
    if (!st) st = px_args_cluster_finish(a, &c, a->gpus, err);
    if (!st) px_parallel_resolve(&a->par, &m, &c);
  }
  free(old);
  if (!st) st = px_plan_compile(plan, &m, &c, &a->par, err);
  /* a checkpoint written for a plan no backend runs would be resumed by none: refused with the cpu backend's reason */
  char why[512];
  if (!st && !px_runnable(PX_RUN_CPU, &plan->par, &plan->model, why, sizeof why) &&
      !px_runnable(PX_RUN_CUDA, &plan->par, &plan->model, NULL, 0)) {
    px_plan_free(plan);
    st = px_err_set(err, PX_ERR_INPUT, "the plan the flags give runs on no backend, so no run would resume its "
                    "checkpoint: %s", why);
  }
  return st;
}
