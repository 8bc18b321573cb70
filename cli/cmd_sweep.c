/* parallax sweep: every valid plan for a model on a cluster, ranked; time
 * to train, cost and failures; CSV, JSON, plots and an HTML report. Under
 * mpirun the space is split across ranks and gathered on rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/json.h"
#include "report/csv.h"
#include "report/sweep.h"
#include "report/sweepjson.h"
#include "sim/sweep.h"

/* Under mpirun: every rank evaluates its share; rank 0 gathers. */
static px_status gather(px_sweep_result *r, int rank, int size, px_err *err) {
  long long counts[4] = {r->enumerated, r->invalid, r->dropped_memory, r->simulated}, total[4];
  MPI_Reduce(counts, total, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  /* enumeration is the same on every rank: its counts are not summed */
  int mine[2] = {(int)(r->n * (int64_t)sizeof *r->entries), (int)(r->ndropped * (int64_t)sizeof *r->dropped)};
  int *all = rank == 0 ? calloc((size_t)size * 2, sizeof *all) : NULL;
  MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
  px_status st = PX_OK;
  for (int which = 0; which < 2; which++) {
    px_sweep_entry *src = which ? r->dropped : r->entries;
    int *recv = NULL, *displ = NULL;
    char *buf = NULL;
    int64_t bytes = 0;
    if (rank == 0) {
      recv = calloc((size_t)size, sizeof *recv);
      displ = calloc((size_t)size, sizeof *displ);
      for (int i = 0; recv && displ && i < size; i++) {
        recv[i] = all[2 * i + which];
        displ[i] = (int)bytes;
        bytes += recv[i];
      }
      buf = malloc((size_t)bytes + 1);
      if (!recv || !displ || !buf) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory gathering the sweep");
    }
    MPI_Gatherv(src, mine[which], MPI_BYTE, buf, recv, displ, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0 && !st) {
      if (which) {
        free(r->dropped);
        r->dropped = (px_sweep_entry *)buf;
        r->ndropped = bytes / (int64_t)sizeof *r->dropped;
      } else {
        free(r->entries);
        r->entries = (px_sweep_entry *)buf;
        r->n = bytes / (int64_t)sizeof *r->entries;
      }
      buf = NULL;
    }
    free(buf), free(recv), free(displ);
  }
  free(all);
  if (rank == 0) {
    r->enumerated = counts[0];
    r->invalid = counts[1];
    r->dropped_memory = total[2];
    r->simulated = total[3];
  }
  return st;
}

static bool under_mpirun(void) {
  const char *s = getenv("OMPI_COMM_WORLD_SIZE");
  if (!s) s = getenv("PMI_SIZE");
  return s && atoi(s) > 1;
}

static const char usage[] =
    "usage: parallax sweep --model M --cluster C --gpus N --gbs B [--seq S] [--top K] [plan flags to fix]\n"
    "                      [--objective throughput|time|cost|memory] [--tokens T --price USD --mtbf-hours H]\n"
    "                      [--csv FILE] [--json] [--plot DIR] [--report DIR]\n\n"
    "Enumerates every valid plan (tp, pp, dp, ZeRO, SP, micro-batch, schedule and vpp, recomputation);\n"
    "any plan flag given fixes that dimension. Plans that do not fit are dropped and counted; the\n"
    "rest are simulated on all cores and ranked. Under mpirun the space is split across ranks.\n\n";

int px_cmd_sweep(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_SWEEP;
  int code = px_cli_start(&a, "parallax sweep", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  px_status st;
  px_model m;
  px_cluster c;
  px_parallel fixed = a.par; /* before defaults: unset dimensions are swept */
  if ((st = px_args_load(&a, &m, &c, &err))) return px_cli_fail(st, &err);
  if (fixed.gbs <= 0 && !a.plan_file)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sweep: --gbs is required"), &err);
  fixed.gbs = a.par.gbs;
  fixed.seq = a.par.seq;
  if (fixed.precision < 0) fixed.precision = a.par.precision;
  if (fixed.attention < 0) fixed.attention = a.par.attention;
  if (fixed.gelu < 0) fixed.gelu = a.par.gelu;
  if (fixed.overlap < 0) fixed.overlap = a.par.overlap;
  if (fixed.bucket_bytes == 0) fixed.bucket_bytes = a.par.bucket_bytes;

  int rank = 0, size = 1;
  bool mpi = under_mpirun();
  if (mpi) {
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed = fixed;
  o.objective = a.objective >= 0 ? (px_objective)a.objective : PX_OBJ_THROUGHPUT;
  o.tokens = a.tokens;
  o.price_per_gpu_hour = a.price;
  if (a.mtbf_hours >= 0) o.mtbf_hours = a.mtbf_hours;
  if (a.restart_min >= 0) o.restart_s = a.restart_min * 60;
  o.threads = (int)a.threads;
  o.max_tp = a.max_tp;
  o.part = rank;
  o.parts = size;
  if (rank == 0 && isatty(fileno(stderr))) o.progress = px_report_sweep_progress;
  int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int64_t top = a.top > 0 ? a.top : 10;

  px_sweep_result r;
  double t0 = px_clock_s();
  st = px_sweep_run(&m, &c, &o, &r, &err);
  if (mpi) {
    int bad = st != PX_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!st && any) st = px_err_set(&err, PX_ERR_RUNTIME, "another rank failed its part of the sweep");
    if (!st) st = gather(&r, rank, size, &err);
    if (!st && rank == 0) px_sweep_rank(r.entries, r.n, o.objective);
  }
  double wall = px_clock_s() - t0;
  if (!st && rank == 0) {
    if (a.csv_file) st = px_report_sweep_csv(a.csv_file, &r, &err);
    const char *dir = a.report_dir ? a.report_dir : a.plot_dir;
    if (!st && dir && r.n > 0) st = px_report_sweep_dir(dir, a.report_dir != NULL, &m, &c, &o, &r, &err);
    if (!st) {
      if (a.json) {
        st = px_json_print_free(px_report_sweep_json(&m, &c, &o, &r, r.n), &err);
      } else {
        px_report_sweep_text(&m, &c, &o, &r, top, wall, threads * size, stdout);
        if (a.report_dir) printf("\nreport: %s/index.html\n", a.report_dir);
        else if (a.plot_dir) printf("\nplots: %s/*.png, *.svg\n", a.plot_dir);
      }
    }
  }
  px_sweep_result_free(&r);
  if (mpi) MPI_Finalize();
  return st ? px_cli_fail(st, &err) : 0;
}
