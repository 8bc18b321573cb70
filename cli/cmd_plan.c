/* parallax plan: compile a plan and describe it (grid, groups, layers,
 * memory per stage against the GPU, FLOPs and bytes per step, bubble). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "report/graph.h"
#include "report/plan.h"

static const char usage[] =
    "usage: parallax plan --model M --cluster C --gpus N [plan flags] [--json] [--graph FILE] [--dot FILE]\n\n"
    "Compiles the plan and shows the rank grid, where each group lives, the layers of each\n"
    "stage, memory per GPU by category against the GPU's capacity, FLOPs and bytes per step,\n"
    "and the analytic pipeline bubble.\n\n";

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
  if (a.json) {
    st = px_json_print_free(px_report_plan_json(&plan), &err);
  } else {
    px_report_plan_text(&plan, stdout);
  }
done:
  px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : 0;
}
