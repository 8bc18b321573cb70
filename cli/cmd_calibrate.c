/* parallax calibrate: measure this machine (under mpirun for the
 * collectives), or import measurements taken elsewhere (--import), and
 * write a cluster file the simulator can use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "plan/import.h"
#include "report/cluster.h"
#if PX_HAVE_EXEC
#include "cli/exec.h"
#include "report/calibrate.h"
#endif

static const char usage[] =
    "usage: mpirun -np N parallax calibrate -o FILE [--quick] [--json] [--cluster BASE]\n\n"
    "Measures what the simulator needs on this machine, one rank per core: GEMM efficiency\n"
    "over a grid of shapes (OpenBLAS), memory bandwidth, the cost of every other op kind\n"
    "(fitted from profiled runs of reference models through the CPU backend) and, with more\n"
    "than one rank, the bus bandwidth of all-reduce, all-gather, reduce-scatter, all-to-all and\n"
    "sendrecv by message size (printed like nccl-tests; the simulator uses these curves). Writes a\n"
    "cluster file in the topologies/ format (BASE's, local-cpu by default, with the\n"
    "measured figures) to -o, --output FILE.\n\n"
    "usage: parallax calibrate --backend cuda -o FILE [--quick] [--sustain-s S] [--cluster BASE]\n"
    "                          [-m MODEL[,MODEL...] [plan flags]]\n\n"
    "Measures one GPU (device 0, no mpirun) through the CUDA backend's own calls: the cuBLASLt\n"
    "GEMM rate over a grid of shapes and the linear layers of the plan each MODEL makes with\n"
    "the plan flags, in bf16 and (compute capability 8.9 and up) fp8; one GEMM back to back\n"
    "for S seconds against its burst rate (gpu.sustained_share); the flash-attention kernels'\n"
    "causal forward and backward by sequence length (gpu.attention); a device-to-device copy\n"
    "(gpu.memory_efficiency). Writes BASE's cluster file (default: the preset of this GPU)\n"
    "with those figures, each cited as measured on this GPU today.\n\n"
    "usage: parallax calibrate --import --cluster BASE -o FILE MEASUREMENT...\n\n"
    "Reads measurements of a cluster (nccl-tests outputs of all_reduce_perf, all_gather_perf,\n"
    "reduce_scatter_perf and sendrecv_perf; a GEMM benchmark CSV m,n,k,dtype,tflops) into\n"
    "BASE's cluster file: the collectives' measured curves replace the model where they\n"
    "apply, the GEMM rows the efficiency model. Name a file's collective as KIND=FILE when\n"
    "neither its name nor its last line says it.\n\n";

/* --import: measurements into the base cluster, written to -o. */
static int import(const px_args *a) {
  px_err err = {0};
  px_status st = PX_OK;
  if (!a->cluster)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax calibrate --import: --cluster BASE (the file the measurements go into) is required");
  else if (a->npos < 1)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax calibrate --import: name the measurement files (nccl-tests outputs, a GEMM CSV)");
  px_cluster *c = st ? NULL : px_calloc(1, sizeof *c, &err);
  if (!st && !c) st = PX_ERR_RUNTIME;
  if (!st) st = px_cluster_load(a->cluster, c, &err);
  if (!st) st = px_args_cluster_finish(a, c, a->gpus, &err);
  if (!st) st = px_cluster_import(c, (const char *const *)a->pos, a->npos, &err);
  cJSON *j = st ? NULL : px_cluster_to_json(c);
  if (!st && !j) st = px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
  if (!st) st = px_json_write(a->output, j, &err);
  if (!st && a->json) st = px_json_print(j, &err);
  if (!st && !a->json) px_report_cluster_measured(c, a->output, stdout);
  cJSON_Delete(j);
  free(c);
  return st ? px_cli_fail(st, &err) : 0;
}

#if PX_HAVE_EXEC
#define CALIB_PLANS_MAX 8

/* The plan of a's flags on one GPU into plans[*n]. */
static px_status calib_plan(const px_args *a, const px_exec_module *x, px_plan *plans, int *n, px_err *err) {
  if (*n == CALIB_PLANS_MAX)
    return px_err_set(err, PX_ERR_INPUT, "parallax calibrate: -m, --model: at most %d models", CALIB_PLANS_MAX);
  px_args one = *a;
  px_model m;
  px_cluster c;
  const char *backend;
  px_status st = px_cli_run_plan(&one, x, 1, &backend, &m, &c, &plans[*n], err);
  if (!st) ++*n;
  return st;
}

/* --backend cuda's plans: each model of -m's comma-separated list with the plan flags (or --plan's), on one GPU. */
static px_status calib_plans(const px_args *a, const px_exec_module *x, px_plan *plans, int *n, px_err *err) {
  *n = 0;
  if (!a->model) return a->plan_file ? calib_plan(a, x, plans, n, err) : PX_OK;
  char list[1024];
  if (strlen(a->model) >= sizeof list)
    return px_err_set(err, PX_ERR_INPUT, "parallax calibrate: -m, --model: a list of at most %zu characters",
                      sizeof list - 1);
  strcpy(list, a->model);
  px_status st = PX_OK;
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name && !st; name = strtok_r(NULL, ",", &save)) {
    px_args one = *a;
    one.model = name;
    st = calib_plan(&one, x, plans, n, err);
  }
  return st;
}

/* The collective table as rank 0 measures it (px_calib_opts.coll), on the FILE ctx. */
static void print_coll(void *ctx, const px_calib_coll_point *pt) {
  if (pt->first) px_report_calib_coll_header(px_busbw_coll_names[pt->kind], pt->ranks, pt->busbw_factor, ctx);
  px_report_calib_coll_row(pt->bytes, pt->time_s, pt->busbw_factor, ctx);
}
#endif

int px_cmd_calibrate(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_CALIBRATE;
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* what it was called before */
    if (!strncmp(argv[i], "--save-plan", 11))
      return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                    "parallax calibrate: --save-plan is not an option of calibrate (a cluster file "
                                    "is not a plan): write it with -o, --output FILE"),
                         &err);
  int code = px_cli_start(&a, "parallax calibrate", groups, PX_OPT_CALIB, usage, argc, argv);
  if (code >= 0) return code;
  if (!a.output)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax calibrate: -o, --output FILE (where to write) is required"),
                       &err);
  if (a.import) return import(&a);
#if !PX_HAVE_EXEC
  return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                "parallax was built without the executor (PX_EXEC=OFF): calibrate measures nothing here; "
                                "calibrate --import still reads measurements"),
                     &err);
#else
  bool cuda = a.backend && !strcmp(a.backend, "cuda");
  if (a.backend && !cuda && strcmp(a.backend, "cpu"))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax calibrate: --backend: '%.64s' is not one of cpu|cuda",
                                  a.backend), &err);
  if (!cuda && (a.model || a.plan_file || a.sustain_s > 0))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax calibrate: %s: only with --backend cuda (the CPU "
                                  "calibration measures a fixed grid and reference models)",
                                  a.sustain_s > 0 ? "--sustain-s" : "a plan (-m, --plan)"), &err);
  const px_exec_module *x = px_cli_exec(&err);
  if (!x) return px_cli_fail(err.status, &err);
  px_status st;
  int rank = 0, size = 1;
  x->mpi_init(false, &rank, &size, NULL);
  px_cluster base, out;
  px_plan plans[CALIB_PLANS_MAX];
  const px_plan *plan_ptrs[CALIB_PLANS_MAX];
  int nplans = 0;
  if (cuda && !a.cluster) a.cluster = x->default_cluster("cuda"); /* the preset of this GPU */
  if (!(st = px_cluster_load(a.cluster ? a.cluster : "local-cpu", &base, &err)) &&
      !(st = px_args_cluster_finish(&a, &base, a.gpus, &err)) && !(st = calib_plans(&a, x, plans, &nplans, &err))) {
    for (int i = 0; i < nplans; i++) plan_ptrs[i] = &plans[i];
    px_calib_opts o = {.quick = a.quick, .cuda = cuda, .sustain_s = a.sustain_s, .plans = plan_ptrs,
                       .nplans = nplans, .progress = rank == 0 ? stderr : NULL};
    if (rank == 0 && !a.json) o.coll = print_coll, o.coll_ctx = stdout;
    st = x->calibrate(&base, &o, &out, &err);
  }
  for (int i = 0; i < nplans; i++) px_plan_free(&plans[i]);
  if (!st && rank == 0) {
    cJSON *j = px_cluster_to_json(&out);
    st = j ? px_json_write(a.output, j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
    if (!st && a.json) st = px_json_print(j, &err);
    cJSON_Delete(j);
    if (!st && !a.json) (cuda ? px_report_calibrated_gpu_text : px_report_calibrated_text)(&out, a.output, stdout);
  }
  code = st ? (rank == 0 ? px_cli_fail(st, &err) : (int)st) : 0;
  x->mpi_finalize(code);
  return code;
#endif
}
