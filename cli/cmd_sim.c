/* parallax sim: simulate one training step of a plan and report step time,
 * throughput, MFU, memory, bubble and communication. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/json.h"
#include "report/plan.h"
#include "report/plots.h"
#include "report/sim.h"
#include "report/sweep.h"
#include "report/sweepjson.h"
#include "report/trace.h"
#include "sim/replan.h"
#include "sim/sim.h"
#include "sim/sweep.h"

static const char usage[] =
    "usage: parallax sim --model M --cluster C --gpus N [plan flags] [--json] [--trace FILE]\n"
    "                    [--tokens T [--price USD] [--price-per-kwh USD] [--mtbf-hours H] [--ckpt-async]]\n\n"
    "Simulates one training step. First whether the plan fits in GPU memory (as parallax plan says\n"
    "it, with the nearest plans that fit when it does not, and exit status 3); then step time,\n"
    "tokens/s, model TFLOP/s per GPU, MFU against the GPU's dense bf16 peak (and against the peak\n"
    "of the plan's precision where that is another: fp8's), HFU, pipeline bubble, time in TP/PP/DP\n"
    "communication and how much of it is exposed, where the step goes (forward, backward,\n"
    "recomputation, optimizer, bubble, exposed communication by kind), memory per GPU, and how far\n"
    "to trust it: the errors the validation tests found on published runs of the same GPU family,\n"
    "precision and kind of model (dense or MoE), or that none validates it.\n"
    "--tokens T: the time to train T tokens at this step's rate with checkpoints and failures (as a\n"
    "sweep counts them), its GPU-hours and energy, at --price and --price-per-kwh their cost.\n"
    "--trace writes a Chrome trace (open it in Perfetto); --plot DIR writes the memory, timeline\n"
    "and scaling plots.\n\n";

int px_cmd_sim(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_SIM;
  int code = px_cli_start(&a, "parallax sim", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  px_model m;
  px_cluster c;
  px_plan plan;
  px_status st = px_args_plan(&a, &m, &c, &plan, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.save_plan && (st = px_report_plan_file(a.save_plan, &m, &c, &a.par, &err))) {
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  if (a.plot_dir && (st = px_plots_plan(a.plot_dir, &m, &c, &a.par, &err))) { /* memory, timeline, scaling */
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  px_sweep_opts train_opts; /* --tokens: the time to train, as a sweep counts it */
  px_sweep_opts_init(&train_opts);
  if ((st = px_args_train(&a, &c, &train_opts, &err))) {
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  px_replan_fit fits[PX_CLI_NEAREST];
  int nfits = 0;
  px_bands bands;
  if ((st = px_bands_load(NULL, &bands, &err))) {
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  if (!plan.fits && (st = px_replan_nearest(&m, &c, &plan.par, fits, PX_CLI_NEAREST, &nfits, &err))) {
    px_bands_free(&bands);
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  px_sim_opts opts = {.record_spans = a.trace_file != NULL};
  px_sim_result r;
  double t0 = px_clock_s();
  st = px_sim_run(&plan, &opts, &r, &err);
  double wall = px_clock_s() - t0;
  if (!st) {
    if (a.trace_file) st = px_report_trace(&r, a.trace_file, &err);
    px_train_time t = {0};
    if (train_opts.tokens > 0) px_sweep_train_of(&plan, &train_opts, &r, &t);
    if (!st && a.json) {
      cJSON *o = px_report_sim_json(&plan, &r, fits, nfits, &bands);
      size_t nf;
      const px_report_field *f = px_report_train_fields(&nf);
      cJSON *tt = o && train_opts.tokens > 0 ? cJSON_AddObjectToObject(o, "time_to_train") : NULL;
      if (tt) px_json_add_num(tt, "tokens", train_opts.tokens), px_report_fields_json(tt, f, nf, &t);
      st = px_json_print_free(o, &err);
    } else if (!st) {
      px_report_sim_text(&plan, &r, fits, nfits, wall, &bands, stdout);
      if (train_opts.tokens > 0) px_report_train_text(&train_opts, &t, stdout);
    }
    px_sim_result_free(&r);
  }
  px_bands_free(&bands);
  bool fits_mem = plan.fits;
  px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : fits_mem ? 0 : PX_EXIT_NOFIT;
}
