/* parallax compare: the simulator's prediction of a plan beside a profile of
 * the same plan run by `parallax run --profile`. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "sim/compare.h"

static void print_cmp(const px_plan *plan, const px_comparison *c) {
  char a[32], b[32], d[32];
  const px_parallel *p = &plan->par;
  printf("compare: %s on %lld x %s (%s): tp %lld pp %lld dp %lld, ZeRO-%d, %s, mbs %lld, gbs %lld, recompute %s\n",
         plan->model.name, (long long)plan->cluster.gpus, plan->cluster.gpu.name, plan->cluster.name, (long long)p->tp,
         (long long)p->pp, (long long)p->dp, p->zero, px_schedule_names[p->schedule], (long long)p->mbs,
         (long long)p->gbs, px_recompute_names[p->recompute]);
  printf("step time: predicted %s, measured %s (%+.1f%%, mean of %lld steps)\n",
         px_fmt_time(c->step_predicted_s, a, sizeof a), px_fmt_time(c->step_measured_s, b, sizeof b),
         100 * (c->step_predicted_s - c->step_measured_s) / c->step_measured_s, (long long)c->timed_steps);
  int worst_s = 0, worst_r = 0;
  double worst = 0;
  for (int64_t s = 0; s < c->nstages; s++) {
    printf("\nstage %-3lld %-14s %11s %11s %8s\n", (long long)s, "", "predicted", "measured", "error");
    for (int r = 0; r < PX_CMP_COUNT; r++) {
      double pr = c->stages[s].predicted_s[r], me = c->stages[s].measured_s[r];
      if (pr == 0 && me == 0) continue;
      char e[16] = "-";
      if (me > 0) snprintf(e, sizeof e, "%+.1f%%", 100 * (pr - me) / me);
      printf("  %-24s %11s %11s %8s\n", px_cmp_row_names[r], px_fmt_time(pr, a, sizeof a), px_fmt_time(me, b, sizeof b), e);
      if (fabs(pr - me) > worst) worst = fabs(pr - me), worst_s = (int)s, worst_r = r;
    }
  }
  if (worst > 0)
    printf("\nfurthest off: stage %d %s, %s %s than predicted\n", worst_s, px_cmp_row_names[worst_r],
           px_fmt_time(worst, d, sizeof d),
           c->stages[worst_s].measured_s[worst_r] > c->stages[worst_s].predicted_s[worst_r] ? "slower" : "faster");
}

int px_cmd_compare(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_RUN;
  px_status st = px_args_parse(&a, "parallax compare", groups, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax compare --profile FILE --model M --cluster CALIBRATED.json [plan flags] [--json]\n\n"
           "Simulates the plan on the (calibrated) cluster and sets the prediction beside the profile\n"
           "of the same plan written by `parallax run --profile FILE`: per op family, per stream and\n"
           "per step, with the error of each. A CPU-backend profile is simulated serially, as the CPU\n"
           "executor runs each rank's program in order, one p2p batch at a time.\n\n");
    px_args_print_help(groups);
    return 0;
  }
  if (!a.profile_file) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax compare: --profile FILE is required"), &err);
  cJSON *prof = NULL;
  if ((st = px_json_load(a.profile_file, &prof, &err))) return px_cli_fail(st, &err);
  const cJSON *be = cJSON_GetObjectItemCaseSensitive(prof, "backend");
  if (a.par.precision < 0 && be && cJSON_IsString(be) && !strcmp(be->valuestring, "cpu")) a.par.precision = PX_PREC_FP32;
  bool serial = be && cJSON_IsString(be) && !strcmp(be->valuestring, "cpu");
  px_model m;
  px_cluster c;
  px_plan plan;
  bool compiled = false;
  px_sim_result r = {0};
  bool simulated = false;
  px_comparison cmp = {0};
  if (!(st = px_args_load(&a, &m, &c, &err)) && !(st = px_plan_compile(&plan, &m, &c, &a.par, &err))) {
    compiled = true;
    px_sim_opts o = {.skip_exposed = true, .serial = serial};
    if (!(st = px_sim_run(&plan, &o, &r, &err))) {
      simulated = true;
      st = px_compare(&plan, &r, prof, a.profile_file, &cmp, &err);
    }
  }
  if (!st) {
    if (a.json) {
      cJSON *j = px_comparison_json(&cmp);
      st = j ? px_json_print(j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
      cJSON_Delete(j);
    } else {
      print_cmp(&plan, &cmp);
    }
  }
  px_comparison_free(&cmp);
  if (simulated) px_sim_result_free(&r);
  if (compiled) px_plan_free(&plan);
  cJSON_Delete(prof);
  return st ? px_cli_fail(st, &err) : 0;
}
