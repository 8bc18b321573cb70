/* parallax calibrate: measure this machine (under mpirun for the
 * collectives) and write a cluster file the simulator can use. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "exec/calibrate.h"
#include "report/cluster.h"

static const char usage[] =
    "usage: mpirun -np N parallax calibrate -o FILE [--quick] [--json] [--cluster BASE]\n\n"
    "Measures what the simulator needs on this machine, one rank per core: GEMM efficiency\n"
    "over a grid of shapes (OpenBLAS), memory bandwidth, the cost of every other op kind\n"
    "(fitted from profiled runs of reference models through the CPU backend) and, with more\n"
    "than one rank, all-reduce latency and bandwidth (printed like nccl-tests). Writes a\n"
    "cluster file in the topologies/ format (BASE's, local-cpu by default, with the\n"
    "measured figures) to -o, --output FILE.\n\n";

int px_cmd_calibrate(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_CLUSTER | PX_OPT_CALIB;
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) /* what it was called before */
    if (!strncmp(argv[i], "--save-plan", 11))
      return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                    "parallax calibrate: --save-plan is not an option of calibrate (a cluster file "
                                    "is not a plan): write it with -o, --output FILE"),
                         &err);
  int code = px_cli_start(&a, "parallax calibrate", groups, PX_OPT_CALIB, usage, argc, argv);
  if (code >= 0) return code;
  px_status st;
  if (!a.output)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax calibrate: -o, --output FILE (where to write) is required"),
                       &err);
  MPI_Init(NULL, NULL);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  px_cluster base, out;
  if (!(st = px_cluster_load(a.cluster ? a.cluster : "local-cpu", &base, &err)) &&
      !(st = px_args_cluster_finish(&a, &base, a.gpus, &err))) {
    px_calib_opts o = {.quick = a.quick, .progress = rank == 0 ? stderr : NULL, .table = rank == 0 && !a.json ? stdout : NULL};
    st = px_calibrate(&base, &o, MPI_COMM_WORLD, &out, &err);
  }
  if (!st && rank == 0) {
    cJSON *j = px_cluster_to_json(&out);
    st = j ? px_json_write(a.output, j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
    if (!st && a.json) st = px_json_print(j, &err);
    cJSON_Delete(j);
    if (!st && !a.json) px_report_calibrated_text(&out, a.output, stdout);
  }
  code = st ? (rank == 0 ? px_cli_fail(st, &err) : (int)st) : 0;
  MPI_Finalize();
  return code;
}
