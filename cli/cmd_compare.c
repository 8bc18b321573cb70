/* parallax compare: the simulator's prediction of a plan beside a profile of
 * the same plan run by `parallax run --profile`. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "exec/result.h"
#include "report/compare.h"
#include "sim/compare.h"

static const char usage[] =
    "usage: parallax compare --profile FILE --model M --cluster CALIBRATED.json [plan flags] [--json]\n\n"
    "Simulates the plan on the (calibrated) cluster and sets the prediction beside the profile\n"
    "of the same plan written by `parallax run --profile FILE`: per op family, per stream and\n"
    "per step, with the error of each. A CPU-backend profile is simulated serially, as the CPU\n"
    "executor runs each rank's program in order, one p2p batch at a time.\n\n";

int px_cmd_compare(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_COMPARE;
  int code = px_cli_start(&a, "parallax compare", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  px_status st;
  if (!a.profile_file) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax compare: --profile FILE is required"), &err);
  cJSON *prof = NULL;
  if ((st = px_json_load_max(a.profile_file, PX_PROFILE_MAX_BYTES, "a profile", &prof, &err))) return px_cli_fail(st, &err);
  const cJSON *be = cJSON_GetObjectItemCaseSensitive(prof, "backend");
  bool serial = be && cJSON_IsString(be) && !strcmp(be->valuestring, "cpu");
  if (a.par.precision < 0 && serial) a.par.precision = PX_PREC_FP32;
  if (a.par.fp8_base < 0 && serial) a.par.fp8_base = PX_FP8_BASE_FP32; /* as run --backend cpu */
  px_model m;
  px_cluster c;
  px_plan plan;
  bool compiled = false;
  px_sim_result r = {0};
  bool simulated = false;
  px_comparison cmp = {0};
  if (!(st = px_args_plan(&a, &m, &c, &plan, &err))) {
    compiled = true;
    /* calibrate makes one node of its ranks: a run with fewer ranks on that machine has
     * bandwidth, caches and clock boost the calibration's ranks shared */
    if (serial && plan.cluster.gpus < plan.cluster.gpus_per_node)
      fprintf(stderr,
              "parallax compare: note: %s was measured with %lld ranks on the machine and this plan runs %lld: "
              "a rank sharing the machine with fewer others runs faster than the calibration says (calibrate "
              "with `mpirun -np %lld` for this plan)\n",
              a.cluster ? a.cluster : plan.cluster.name, (long long)plan.cluster.gpus_per_node,
              (long long)plan.cluster.gpus, (long long)plan.cluster.gpus);
    px_sim_opts o = {.skip_exposed = true, .serial = serial};
    if (!(st = px_sim_run(&plan, &o, &r, &err))) {
      simulated = true;
      st = px_compare(&plan, &r, prof, a.profile_file, &cmp, &err);
    }
  }
  if (!st) {
    if (a.json) {
      st = px_json_print_free(px_report_compare_json(&cmp), &err);
    } else {
      px_report_compare_text(&plan, &cmp, stdout);
    }
  }
  px_comparison_free(&cmp);
  if (simulated) px_sim_result_free(&r);
  if (compiled) px_plan_free(&plan);
  cJSON_Delete(prof);
  return st ? px_cli_fail(st, &err) : 0;
}
