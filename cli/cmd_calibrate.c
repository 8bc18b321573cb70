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
  const px_exec_module *x = px_cli_exec(&err);
  if (!x) return px_cli_fail(err.status, &err);
  px_status st;
  int rank = 0, size = 1;
  x->mpi_init(false, &rank, &size, NULL);
  px_cluster base, out;
  if (!(st = px_cluster_load(a.cluster ? a.cluster : "local-cpu", &base, &err)) &&
      !(st = px_args_cluster_finish(&a, &base, a.gpus, &err))) {
    px_calib_opts o = {.quick = a.quick, .progress = rank == 0 ? stderr : NULL};
    if (rank == 0 && !a.json) o.coll = print_coll, o.coll_ctx = stdout;
    st = x->calibrate(&base, &o, &out, &err);
  }
  if (!st && rank == 0) {
    cJSON *j = px_cluster_to_json(&out);
    st = j ? px_json_write(a.output, j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
    if (!st && a.json) st = px_json_print(j, &err);
    cJSON_Delete(j);
    if (!st && !a.json) px_report_calibrated_text(&out, a.output, stdout);
  }
  code = st ? (rank == 0 ? px_cli_fail(st, &err) : (int)st) : 0;
  x->mpi_finalize();
  return code;
#endif
}
