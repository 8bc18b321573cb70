/* parallax run: train a compiled plan for real with MPI ranks (mpirun -np N
 * parallax run ...); rank 0 reports losses, step time, tokens/s and memory. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "exec/train.h"

static void print_run(const px_plan *plan, const px_train_result *r) {
  char a[64], b[64];
  for (int64_t k = 0; k < r->steps; k++) printf("step %5lld  loss %.6f\n", (long long)(r->first_step + k + 1), r->losses[k]);
  printf("backend %s, %lld ranks (tp %lld pp %lld dp %lld): %s per step, %.0f tokens/s\n", r->backend,
         (long long)plan->grid.world, (long long)plan->par.tp, (long long)plan->par.pp, (long long)plan->par.dp,
         px_fmt_time(r->step_time_s, a, sizeof a), r->tokens_per_s);
  printf("memory: %s allocated at peak (largest rank), %s predicted by the plan\n",
         px_fmt_bytes((double)r->peak_bytes, a, sizeof a), px_fmt_bytes((double)r->predicted_peak_bytes, b, sizeof b));
  if (r->backend_bytes)
    printf("memory: %s more held by the %s backend itself (scratch for fp32 copies, library workspaces)\n",
           px_fmt_bytes((double)r->backend_bytes, a, sizeof a), r->backend);
  if (plan->par.precision == PX_PREC_FP16)
    printf("fp16: loss scale %g, %lld step%s skipped for overflow\n", r->loss_scale, (long long)r->skipped_steps,
           r->skipped_steps == 1 ? "" : "s");
}

static cJSON *run_json(const px_plan *plan, const px_train_result *r) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "model", plan->model.name);
  cJSON_AddStringToObject(o, "backend", r->backend);
  cJSON_AddItemToObject(o, "parallel", px_parallel_to_json(&plan->par));
  px_json_add_num(o, "first_step", (double)r->first_step);
  cJSON *l = cJSON_AddArrayToObject(o, "losses");
  for (int64_t k = 0; l && k < r->steps; k++) cJSON_AddItemToArray(l, cJSON_CreateNumber(r->losses[k]));
  px_json_add_num(o, "step_time_s", r->step_time_s);
  px_json_add_num(o, "tokens_per_s", r->tokens_per_s);
  px_json_add_num(o, "peak_bytes", (double)r->peak_bytes);
  px_json_add_num(o, "predicted_peak_bytes", (double)r->predicted_peak_bytes);
  px_json_add_num(o, "backend_bytes", (double)r->backend_bytes);
  if (plan->par.precision == PX_PREC_FP16) {
    px_json_add_num(o, "loss_scale", r->loss_scale);
    px_json_add_num(o, "skipped_steps", (double)r->skipped_steps);
  }
  cJSON *st = cJSON_AddArrayToObject(o, "stages");
  for (int64_t s = 0; st && s < plan->par.pp; s++) {
    cJSON *so = cJSON_CreateObject();
    if (!so) break;
    px_json_add_num(so, "peak_bytes", (double)(r->stage_peak_bytes ? r->stage_peak_bytes[s] : 0));
    px_json_add_num(so, "predicted_peak_bytes", (double)plan->mem[s].peak_bytes);
    cJSON_AddItemToArray(st, so);
  }
  return o;
}

int px_cmd_run(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_RUN;
  px_status st = px_args_parse(&a, "parallax run", groups, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: mpirun -np N parallax run --model M [--cluster C] [plan flags] [--steps S] [--data FILE]\n"
           "                                [--seed K] [--lr X] [--ckpt DIR [--ckpt-every K] [--resume]]\n"
           "                                [--profile FILE] [--backend cpu|cuda] [--json]\n\n"
           "Runs the plan's programs for real: each rank finds its (tp, pp, dp) coordinates, splits a\n"
           "communicator per group and runs its stage's program. The backend defaults to cuda when\n"
           "a GPU is visible, else cpu; the cluster to the backend's (local-cpu, or the DGX/HGX preset\n"
           "of the GPU), the GPU count to the number of ranks and the precision to bf16 on GPUs, fp32\n"
           "on the CPU.\n\n");
    px_args_print_help(groups);
    return 0;
  }
  if (a.npos) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax run takes no positional arguments"), &err);
  MPI_Init(NULL, NULL);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *backend = a.backend ? a.backend : px_train_default_backend();
  if (!a.cluster && !a.plan_file) a.cluster = px_train_default_cluster(backend);
  int64_t need = (a.par.tp > 0 ? a.par.tp : 1) * (a.par.pp > 0 ? a.par.pp : 1) * (a.par.dp > 0 ? a.par.dp : 1);
  if (!a.gpus && !a.nodes && !a.plan_file && (a.par.dp > 0 ? need != size : size % need != 0))
    st = px_err_set(&err, PX_ERR_INPUT, "mpirun started %d rank%s but the plan needs %s%lld (hint: mpirun -np %lld)",
                    size, size == 1 ? "" : "s", a.par.dp > 0 ? "" : "a multiple of ", (long long)need, (long long)need);
  if (!a.gpus && !a.nodes) a.gpus = size;
  if (a.par.precision < 0 && !strcmp(backend, "cpu")) a.par.precision = PX_PREC_FP32;
  px_model m;
  px_cluster c;
  px_plan plan;
  bool have_plan = false;
  px_train_result r = {0};
  bool local = false; /* a failure of this rank's training, rather than of the (common) input */
  if (!st && !(st = px_args_load(&a, &m, &c, &err)) && !(st = px_plan_compile(&plan, &m, &c, &a.par, &err))) {
    have_plan = true;
    px_train_opts o;
    px_train_opts_init(&o);
    o.backend = backend;
    if (a.steps > 0) o.steps = a.steps;
    o.data_path = a.data_file;
    if (a.seed >= 0) o.hp.seed = (uint64_t)a.seed;
    if (a.lr > 0) o.hp.lr = (float)a.lr;
    if (a.loss_scale > 0) o.hp.loss_scale = (float)a.loss_scale;
    o.ckpt_dir = a.ckpt_dir;
    o.ckpt_every = a.ckpt_every;
    o.resume = a.resume;
    o.profile_path = a.profile_file;
    o.grads_path = a.grads_file;
    st = px_train(&plan, &o, MPI_COMM_WORLD, &r, &err);
    local = st != PX_OK;
  }
  if (!st && rank == 0) {
    if (a.json) {
      cJSON *j = run_json(&plan, &r);
      st = j ? px_json_print(j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
      cJSON_Delete(j);
    } else {
      print_run(&plan, &r);
    }
  }
  px_train_result_free(&r);
  if (have_plan) px_plan_free(&plan);
  /* Bad input is the same on every rank: rank 0 says it; training failures are said where they happen. */
  bool say = local ? !strstr(err.msg, "another rank") : rank == 0;
  int code = st ? (say ? px_cli_fail(st, &err) : (int)st) : 0;
  MPI_Finalize();
  return code;
}
