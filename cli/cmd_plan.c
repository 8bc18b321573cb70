/* parallax plan: compile a plan and describe it (grid, groups, layers,
 * memory per stage against the GPU, FLOPs and bytes per step, bubble). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "report/graph.h"
#include "report/plan.h"
#include "sim/replan.h"
#include "sim/sim.h"

static const char usage[] =
    "usage: parallax plan --model M --cluster C --gpus N [plan flags] [--json] [--graph FILE] [--dot FILE]\n\n"
    "Compiles the plan and says first whether it fits in GPU memory: the stage with the least room,\n"
    "what it needs and the bytes to spare or over; a plan that does not fit gets the nearest plans\n"
    "that do (the sweep's best with one group of choices changed: ZeRO, recomputation, micro-batch,\n"
    "tp/pp split or offload; two groups when one is not enough) and exit status 3. Then the rank\n"
    "grid, where each group lives, the layers of each stage, memory per GPU by category, FLOPs and\n"
    "bytes per step, the analytic pipeline bubble, and the simulated step's time and MFU.\n\n";

int px_cmd_plan(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_PLAN;
  int code = px_cli_start(&a, "parallax plan", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  px_model m;
  px_cluster c;
  px_plan plan;
  px_status st = px_args_plan(&a, &m, &c, &plan, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.save_plan && (st = px_report_plan_file(a.save_plan, &m, &c, &a.par, &err))) goto done;
  if (a.graph_file && (st = px_report_graph_write_json(&plan, a.graph_file, &err))) goto done;
  if (a.dot_file && (st = px_report_graph_write_dot(&plan, a.dot_file, &err))) goto done;
  px_replan_fit fits[PX_CLI_NEAREST];
  int nfits = 0;
  if (!plan.fits && (st = px_replan_nearest(&m, &c, &plan.par, fits, PX_CLI_NEAREST, &nfits, &err))) goto done;
  px_sim_result r; /* the step's time and MFU (parallax sim says the rest) */
  if ((st = px_sim_run(&plan, &(px_sim_opts){.skip_straggler = true}, &r, &err))) goto done;
  if (a.json) {
    st = px_json_print_free(px_report_plan_json(&plan, &r, fits, nfits), &err);
  } else {
    px_report_plan_text(&plan, &r, fits, nfits, stdout);
  }
  px_sim_result_free(&r);
done:;
  bool fits_mem = plan.fits;
  px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : fits_mem ? 0 : PX_EXIT_NOFIT;
}
