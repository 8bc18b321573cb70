/* parallax calibrate: measure this machine (under mpirun for the
 * collectives) and write a cluster file the simulator can use. */
#include <mpi.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "exec/calibrate.h"
#include "report/cluster.h"

int px_cmd_calibrate(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_CLUSTER | PX_OPT_PLAN;
  px_status st = px_args_parse(&a, "parallax calibrate", groups | PX_OPT_CALIB, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: mpirun -np N parallax calibrate -o FILE [--quick] [--json]\n\n"
           "Measures what the simulator needs on this machine, one rank per core: GEMM efficiency\n"
           "over a grid of shapes (OpenBLAS), memory bandwidth, the cost of every other op kind\n"
           "(fitted from profiled runs of reference models through the CPU backend) and, with more\n"
           "than one rank, all-reduce latency and bandwidth (printed like nccl-tests). Writes a\n"
           "cluster file in the topologies/ format to --save-plan/-o FILE.\n\n");
    px_args_print_help(PX_OPT_CALIB);
    printf("  %-30s %s\n", "-o, --save-plan FILE", "where to write the cluster file");
    return 0;
  }
  if (!a.save_plan)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax calibrate: -o FILE (where to write) is required"), &err);
  MPI_Init(NULL, NULL);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  px_cluster base, out;
  if (!(st = px_cluster_load(a.cluster ? a.cluster : "local-cpu", &base, &err))) {
    px_calib_opts o = {.quick = a.quick, .progress = rank == 0 ? stderr : NULL, .table = rank == 0 && !a.json ? stdout : NULL};
    st = px_calibrate(&base, &o, MPI_COMM_WORLD, &out, &err);
  }
  if (!st && rank == 0) {
    cJSON *j = px_cluster_to_json(&out);
    st = j ? px_json_write(a.save_plan, j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
    if (!st && a.json) st = px_json_print(j, &err);
    cJSON_Delete(j);
    if (!st && !a.json) px_report_calibrated_text(&out, a.save_plan, stdout);
  }
  int code = st ? (rank == 0 ? px_cli_fail(st, &err) : (int)st) : 0;
  MPI_Finalize();
  return code;
}
