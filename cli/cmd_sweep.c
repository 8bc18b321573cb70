/* parallax sweep: every valid plan for a model on a cluster, ranked; time
 * to train, cost and failures; CSV, JSON, plots and an HTML report. Under
 * mpirun the space is split across ranks and gathered on rank 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/json.h"
#include "plan/planfile.h"
#include "plan/runnable.h"
#include "report/csv.h"
#include "report/export.h"
#include "report/plan.h"
#include "report/sweep.h"
#include "report/sweepjson.h"
#include "report/vary.h"
#include "sim/replan.h"
#include "sim/sweep.h"
#if PX_HAVE_EXEC
#include "cli/exec.h"
#endif

static bool under_mpirun(void) {
  const char *s = getenv("OMPI_COMM_WORLD_SIZE");
  if (!s) s = getenv("PMI_SIZE");
  return s && atoi(s) > 1;
}

#if PX_HAVE_EXEC
/* Every rank's plans to rank 0, which ranks them all; the others keep none. */
static px_status gather(const px_exec_module *x, px_sweep_result *r, px_objective obj, px_err *err) {
  void *e = NULL, *d = NULL, *p = NULL;
  size_t ne = 0, nd = 0, np = 0;
  px_status st = x->gather_bytes(r->entries, (size_t)r->n * sizeof *r->entries, &e, &ne, err);
  if (!st) st = x->gather_bytes(r->dropped, (size_t)r->ndropped * sizeof *r->dropped, &d, &nd, err);
  if (!st) st = x->gather_bytes(r->pruned, (size_t)r->npruned * sizeof *r->pruned, &p, &np, err);
  if (!st && e)
    px_sweep_merge(r, e, (int64_t)(ne / sizeof *r->entries), d, (int64_t)(nd / sizeof *r->dropped), p,
                   (int64_t)(np / sizeof *r->pruned), obj);
  else
    free(e), free(d), free(p);
  return st;
}
#endif

#define VARY_MAX 32

/* sweep --vary FIELD=V1,V2,...: the sweep on a copy of the cluster with each
 * value set (px_cluster_set_field), the best plan of each reported. */
static px_status vary(const px_args *a, const px_model *m, const px_cluster *c, const px_sweep_opts *o,
                      px_report_progress *prog, const px_bands *bands, px_err *err) {
  const char *eq = strchr(a->vary, '=');
  char field[128];
  if (!eq || eq == a->vary || !eq[1] || (size_t)(eq - a->vary) >= sizeof field)
    return px_err_set(err, PX_ERR_INPUT, "--vary '%s': expected FIELD=V1,V2,... e.g. inter_node.nic_gbit_per_s=100,200,400",
                      a->vary);
  memcpy(field, a->vary, (size_t)(eq - a->vary));
  field[eq - a->vary] = '\0';
  px_vary_point *pts = px_calloc(VARY_MAX, sizeof *pts, err);
  if (!pts) return PX_ERR_RUNTIME;
  px_status st = PX_OK;
  int n = 0, nvalues = 1;
  for (const char *v = eq + 1; *v; v++) nvalues += *v == ',';
  for (const char *v = eq + 1; !st && *v;) {
    const char *comma = strchr(v, ',');
    size_t len = comma ? (size_t)(comma - v) : strlen(v);
    if (n == VARY_MAX || len == 0 || len >= sizeof pts[n].value) {
      st = px_err_set(err, PX_ERR_INPUT, "--vary %s: at most %d values, each 1 to %zu characters", a->vary, VARY_MAX,
                      sizeof pts[n].value - 1);
      break;
    }
    memcpy(pts[n].value, v, len);
    pts[n].value[len] = '\0';
    char set[256];
    snprintf(set, sizeof set, "%s=%s", field, pts[n].value);
    pts[n].cluster = *c;
    st = px_cluster_set_field(&pts[n].cluster, set, err);
    if (!st) st = px_cluster_set_size(&pts[n].cluster, c->gpus, 0, err);
    char what[sizeof set + 64];
    snprintf(what, sizeof what, "--vary %s, value %d of %d: ", set, n + 1, nvalues);
    prog->what = what;
    if (!st && !(st = px_sweep_run(m, &pts[n].cluster, o, &pts[n].result, err))) n++;
    px_report_progress_end(prog);
    prog->what = NULL;
    v += len + (comma != NULL);
  }
  if (!st) {
    if (a->json)
      st = px_json_print_free(px_report_vary_json(m, o, field, pts, n, bands), err);
    else
      px_report_vary_text(m, o, field, pts, n, stdout);
  }
  if (!st && a->plot_dir) {
    st = px_report_vary_dir(a->plot_dir, field, pts, n, err);
    if (!st && !a->json) printf("\nplot: %s/vary.png, vary.svg\n", a->plot_dir);
  }
  for (int i = 0; i < n; i++) px_sweep_result_free(&pts[i].result);
  free(pts);
  return st;
}

static const char usage[] =
    "usage: parallax sweep --model M --cluster C --gpus N --gbs B [--seq S] [--top K] [plan flags to fix]\n"
    "                      [--objective throughput|time|cost|memory|energy]\n"
    "                      [--tokens T --price USD --price-per-kwh USD --mtbf-hours H [--ckpt-async]]\n"
    "                      [--csv FILE] [--json] [--plot DIR] [--report DIR] [--vary FIELD=V1,V2,...] [--no-prune]\n\n"
    "Enumerates every valid plan (tp, pp, dp, ZeRO, SP, micro-batch, schedule and vpp, recomputation);\n"
    "any plan flag given fixes that dimension. Plans that do not fit are dropped and counted; the\n"
    "rest are simulated on all cores and ranked. For the table, plans whose bounds keep them out of the\n"
    "top K are pruned and counted, most before they are compiled; for --plot and --report, those that\n"
    "cannot be among the best 50, a heatmap cell's best or on the Pareto front are shown by their bound.\n"
    "Under mpirun the space is split across ranks.\n"
    "With --tokens: days, GPU-hours and goodput; with the cluster's power figures (gpu.power_w) the site's MWh, and\n"
    "their cost at --price-per-kwh beside the GPU-hours' at --price (--objective cost ranks by the two together).\n"
    "--vary sweeps once per value of a cluster field (a hardware what-if) and reports each one's best plan.\n"
    "Progress goes to stderr: a bar on a terminal, else a line every 5 s (plans checked, simulated, the\n"
    "best so far; with --vary, which value).\n"
    "-o FILE (--save-plan) writes the best plan as a plan file (--rank K: the K-th) for sim -f, run -f or export -f;\n"
    "--runnable-by FW keeps to plans that framework runs as planned (the rule parallax export applies);\n"
    "--runnable-by cpu|cuda to plans that backend of parallax run runs (the rule run checks first).\n\n";

/* sweep --runnable-by: px_export_check's rule as the sweep's filter (ctx: the px_framework). */
static bool runnable(const px_parallel *p, const px_model *m, void *fw) {
  return px_export_check(*(const px_framework *)fw, p, m, NULL) == PX_OK;
}

/* sweep --runnable-by cpu|cuda: px_runnable's rule (ctx: the px_run_backend). */
static bool backend_runs(const px_parallel *p, const px_model *m, void *b) {
  return px_runnable(*(const px_run_backend *)b, p, m, NULL, 0);
}

int px_cmd_sweep(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_SWEEP;
  int code = px_cli_start(&a, "parallax sweep", groups, groups, usage, argc, argv);
  if (code >= 0) {
    if (a.help) printf("\n%s", px_report_plan_legend);
    return code;
  }
  if (a.rank > 0 && !a.save_plan)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sweep: --rank K needs -o FILE (the plan file it writes)"),
                       &err);
  px_status st;
  /* flags that mean nothing without another are refused, not ignored */
  if (a.objective == PX_OBJ_COST && !(a.price > 0) && !(a.price_per_kwh > 0))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "--objective cost needs --tokens T and --price USD (or "
                                  "--price-per-kwh USD)"), &err);
  px_model m;
  px_cluster c;
  px_parallel fixed = a.par; /* before defaults: unset dimensions are swept */
  if ((st = px_args_load(&a, &m, &c, &err))) return px_cli_fail(st, &err);
  if (fixed.gbs <= 0 && !a.plan_file)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sweep: --gbs is required"), &err);
  if (a.objective == PX_OBJ_ENERGY && !px_power_known(&c))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "--objective energy: cluster %s gives no gpu.power_w (the GPUs' "
                                  "draw), so no energy; add its power figures to the file or --set gpu.power_w=W",
                                  c.name),
                       &err);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  if ((st = px_args_train(&a, &c, &o, &err))) return px_cli_fail(st, &err);
  fixed.gbs = a.par.gbs; /* from the flag or the plan file */
  fixed.seq = a.par.seq;

  int rank = 0, size = 1;
  bool mpi = under_mpirun();
  if (a.vary && (mpi || a.csv_file || a.report_dir || a.save_plan))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                  "parallax sweep --vary: one process, and --json or --plot DIR for its output (not "
                                  "--csv, --report, -o or mpirun)"),
                       &err);
  px_bands bands; /* the validated error bands its outputs print (sim/bands.h) */
  if ((st = px_bands_load(NULL, &bands, &err))) return px_cli_fail(st, &err);
#if PX_HAVE_EXEC
  /* MPI comes with the executor, loaded only for a split sweep */
  const px_exec_module *x = NULL;
  if (mpi) {
    if (!(x = px_cli_exec(&err))) {
      px_bands_free(&bands);
      return px_cli_fail(err.status, &err);
    }
    x->mpi_init(false, &rank, &size, NULL);
  }
#else
  if (mpi) {
    px_bands_free(&bands);
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                  "parallax was built without the executor (PX_EXEC=OFF): a sweep split under mpirun "
                                  "is not available; run it as one process"),
                       &err);
  }
#endif
  o.fixed = fixed;
  o.objective = a.objective >= 0 ? (px_objective)a.objective : PX_OBJ_THROUGHPUT;
  o.threads = (int)a.threads;
  o.max_tp = a.max_tp;
  o.part = rank;
  o.parts = size;
  px_framework fw = (px_framework)a.runnable_by;
  px_run_backend be = (px_run_backend)(a.runnable_by - PX_FW_COUNT);
  if (a.runnable_by >= PX_FW_COUNT) {
    o.admit = backend_runs;
    o.admit_ctx = &be;
    o.admit_name = px_run_backend_names[be];
  } else if (a.runnable_by >= 0) {
    px_export_sweep_fixed(fw, &o.fixed);
    o.torchtitan_ac = fw == PX_FW_TORCHTITAN; /* its selective activation checkpointing, per op or every 2nd layer */
    o.admit = runnable;
    o.admit_ctx = &fw;
    o.admit_name = px_framework_names[fw];
  }
  px_report_progress prog;
  px_report_progress_init(&prog);
  if (rank == 0) o.progress = px_report_sweep_progress, o.progress_ctx = &prog;
  int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int64_t top = a.top > 0 ? a.top : 10;
  int64_t save_rank = a.rank > 0 ? a.rank : 1; /* -o: exact as far as this rank */
  /* the table shows the best top plans and their alternatives only: the rest need no simulation
   * when their bound rules them out; the plots (and sweep.json beside them) need the best 50, each
   * heatmap cell's best and the Pareto front exact, the rest shown by their bound; --csv and --json
   * list every plan simulated; --vary shows each value's best */
  if (!a.no_prune && a.vary) {
    o.keep = 1;
  } else if (!a.no_prune && !a.json && !a.csv_file) {
    o.keep = a.save_plan && save_rank > top ? save_rank : top;
    o.front = a.plot_dir || a.report_dir;
    if (o.front && o.keep < PX_REPORT_SWEEP_PLANS) o.keep = PX_REPORT_SWEEP_PLANS;
  }

  if (a.vary) {
    px_alloc_keep_freed();
    st = vary(&a, &m, &c, &o, &prog, &bands, &err);
    px_bands_free(&bands);
    return st ? px_cli_fail(st, &err) : 0;
  }
  px_sweep_result r;
  px_alloc_keep_freed(); /* a plan compiled and freed per candidate: a fifth of the CPU time went to page faults */
  double t0 = px_clock_s();
  st = px_sweep_run(&m, &c, &o, &r, &err);
  px_report_progress_end(&prog);
  if (!st && r.enumerated > 0 && r.invalid == r.enumerated) { /* the flags leave no valid plan: why */
    st = px_parallel_validate(&r.first_invalid, &m, &c, &err);
    if (st) px_err_prefix(&err, "parallax sweep: none of the %lld plans enumerated is valid; the first", (long long)r.enumerated);
  }
#if PX_HAVE_EXEC
  if (mpi) {
    st = x->agree(st, &err);
    if (!st) st = gather(x, &r, o.objective, &err);
    if (!st && rank == 0) st = px_sweep_complete(&m, &c, &o, &r, &err);
  }
#endif
  double wall = px_clock_s() - t0;
  bool none_fits = !st && rank == 0 && r.n == 0;
  if (none_fits) st = px_replan_least_peak(&m, &c, &r, &err); /* how near the nearest came, exact */
  if (!st && rank == 0) {
    if (a.save_plan && r.n > 0 && r.n < save_rank)
      st = px_err_set(&err, PX_ERR_INPUT, "parallax sweep -o %s: %lld plan%s fit, none ranked %lld%s", a.save_plan,
                      (long long)r.n, r.n == 1 ? "" : "s", (long long)save_rank, r.n ? " (see --rank)" : "");
    if (!st && a.save_plan && r.n > 0) st = px_report_plan_file(a.save_plan, &m, &c, &r.entries[save_rank - 1].par, &err);
    if (!st && a.csv_file) st = px_report_sweep_csv(a.csv_file, &m, &c, &r, &err);
    const char *dir = a.report_dir ? a.report_dir : a.plot_dir;
    if (!st && dir && r.n > 0) st = px_report_sweep_dir(dir, a.report_dir != NULL, &m, &c, &o, &r, &bands, &err);
    if (!st) {
      if (a.json) {
        st = px_json_print_free(px_report_sweep_json(&m, &c, &o, &r, r.n, &bands), &err);
      } else {
        px_report_sweep_text(&m, &c, &o, &r, top, wall, threads * size, &bands, stdout);
        if (a.report_dir) printf("\nreport: %s/index.html\n", a.report_dir);
        else if (a.plot_dir) printf("\nplots: %s/*.png, *.svg\n", a.plot_dir);
        if (a.save_plan && r.n == 0) {
          printf("\nplan file: none written to %s (no plan fits)\n", a.save_plan);
        } else if (a.save_plan) {
          const px_parallel *best = &r.entries[save_rank - 1].par;
          char label[96], fws[64] = "";
          px_report_plan_label(best, label, sizeof label);
          for (int f = 0; f < PX_FW_COUNT; f++) /* what parallax export can write it for */
            if (!px_export_check((px_framework)f, best, &m, NULL))
              snprintf(fws + strlen(fws), sizeof fws - strlen(fws), "%s%s", fws[0] ? "|" : "", px_framework_names[f]);
          printf("\nplan file: %s (rank %lld, %s): parallax sim -f %s; ", a.save_plan, (long long)save_rank, label,
                 a.save_plan);
          if (fws[0])
            printf("parallax export -f %s --to %s\n", a.save_plan, fws);
          else
            printf("no framework parallax export knows runs it as planned (see --runnable-by)\n");
        }
      }
    }
  }
  px_sweep_result_free(&r);
  px_bands_free(&bands);
  code = st ? px_cli_fail(st, &err) : none_fits ? PX_EXIT_NOFIT : 0;
#if PX_HAVE_EXEC
  if (mpi) x->mpi_finalize(code);
#endif
  return code;
}
