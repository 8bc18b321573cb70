/* The comparison of a prediction with a profile: text and JSON. */
#include "report/compare.h"

#include <math.h>

#include "core/fmt.h"
#include "core/json.h"
#include "report/plan.h"

#define CMP_OPS_SHOWN 12 /* op kinds a stage lists in the text */

/* (predicted - measured) / measured; 0 where nothing was measured. */
static double rel_err(double pred, double meas) { return meas > 0 ? (pred - meas) / meas : 0.0; }

/* The kinds of a stage, the most measured time first (ties: the enum's order). */
static int sorted_kinds(const px_cmp_stage *st, int kinds[PX_OP_COUNT]) {
  int n = 0;
  for (int k = 0; k < PX_OP_COUNT; k++)
    if (st->op_count[k] > 0) kinds[n++] = k;
  for (int i = 1; i < n; i++) /* insertion sort: at most PX_OP_COUNT kinds */
    for (int j = i; j > 0 && st->op_measured_s[kinds[j]] > st->op_measured_s[kinds[j - 1]]; j--) {
      int t = kinds[j];
      kinds[j] = kinds[j - 1];
      kinds[j - 1] = t;
    }
  return n;
}

/* A stage's shown op kinds with the most measured time: which kernel is off. */
static void compare_ops_text(const px_cmp_stage *st, int64_t stage, int shown, FILE *out) {
  int kinds[PX_OP_COUNT], n = sorted_kinds(st, kinds);
  char a[32], b[32];
  fprintf(out, "\nstage %lld by op kind, the %d measured longest %11s %11s %8s %6s\n", (long long)stage,
          n < shown ? n : shown, "predicted", "measured", "error", "ops");
  for (int i = 0; i < n && i < shown; i++) {
    int k = kinds[i];
    double pr = st->op_predicted_s[k], me = st->op_measured_s[k];
    char e[16] = "-";
    if (me > 0) snprintf(e, sizeof e, "%+.1f%%", 100 * rel_err(pr, me));
    fprintf(out, "  %-39s %11s %11s %8s %6lld\n", px_op_names[k], px_fmt_time(pr, a, sizeof a),
            px_fmt_time(me, b, sizeof b), e, (long long)st->op_count[k]);
  }
}

void px_report_compare_text(const px_plan *plan, const px_comparison *c, FILE *out) {
  char a[32], b[32], d[32];
  px_report_plan_line(plan, "compare", out);
  px_report_inputs_text(&plan->model, &plan->cluster, plan->par.seq, plan->par.mtp_layers, out);
  fprintf(out, "step time: predicted %s, measured %s (%+.1f%%, mean of %lld steps)\n",
          px_fmt_time(c->step_predicted_s, a, sizeof a), px_fmt_time(c->step_measured_s, b, sizeof b),
          100 * rel_err(c->step_predicted_s, c->step_measured_s), (long long)c->timed_steps);
  int worst_s = 0, worst_r = 0;
  double worst = 0;
  for (int64_t s = 0; s < c->nstages; s++) {
    fprintf(out, "\nstage %-3lld %-14s %11s %11s %8s\n", (long long)s, "", "predicted", "measured", "error");
    for (int r = 0; r < PX_CMP_COUNT; r++) {
      double pr = c->stages[s].predicted_s[r], me = c->stages[s].measured_s[r];
      if (pr == 0 && me == 0) continue;
      char e[16] = "-";
      if (me > 0) snprintf(e, sizeof e, "%+.1f%%", 100 * rel_err(pr, me));
      fprintf(out, "  %-24s %11s %11s %8s\n", px_cmp_row_names[r], px_fmt_time(pr, a, sizeof a),
              px_fmt_time(me, b, sizeof b), e);
      if (fabs(pr - me) > worst) worst = fabs(pr - me), worst_s = (int)s, worst_r = r;
    }
  }
  if (worst > 0)
    fprintf(out, "\nfurthest off: stage %d %s, %s %s than predicted\n", worst_s, px_cmp_row_names[worst_r],
            px_fmt_time(worst, d, sizeof d),
            c->stages[worst_s].measured_s[worst_r] > c->stages[worst_s].predicted_s[worst_r] ? "slower" : "faster");
  for (int64_t s = 0; s < c->nstages; s++) compare_ops_text(&c->stages[s], s, CMP_OPS_SHOWN, out);
}

cJSON *px_report_compare_json(const px_comparison *c) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON *step = cJSON_AddObjectToObject(o, "step");
  if (step) {
    px_json_add_num(step, "predicted_s", c->step_predicted_s);
    px_json_add_num(step, "measured_s", c->step_measured_s);
    px_json_add_num(step, "error", rel_err(c->step_predicted_s, c->step_measured_s));
    px_json_add_num(step, "timed_steps", (double)c->timed_steps);
  }
  cJSON *st = cJSON_AddArrayToObject(o, "stages");
  for (int64_t s = 0; st && s < c->nstages; s++) {
    cJSON *so = cJSON_CreateObject();
    if (!so) break;
    px_json_add_num(so, "stage", (double)s);
    cJSON *rows = cJSON_AddArrayToObject(so, "rows");
    for (int r = 0; rows && r < PX_CMP_COUNT; r++) {
      cJSON *ro = cJSON_CreateObject();
      if (!ro) break;
      cJSON_AddStringToObject(ro, "row", px_cmp_row_names[r]);
      px_json_add_num(ro, "predicted_s", c->stages[s].predicted_s[r]);
      px_json_add_num(ro, "measured_s", c->stages[s].measured_s[r]);
      px_json_add_num(ro, "error", rel_err(c->stages[s].predicted_s[r], c->stages[s].measured_s[r]));
      cJSON_AddItemToArray(rows, ro);
    }
    const px_cmp_stage *cs = &c->stages[s];
    int kinds[PX_OP_COUNT], n = sorted_kinds(cs, kinds);
    cJSON *ops = cJSON_AddArrayToObject(so, "ops"); /* by op kind, the most measured time first */
    for (int i = 0; ops && i < n; i++) {
      cJSON *ko = cJSON_CreateObject();
      if (!ko) break;
      cJSON_AddStringToObject(ko, "kind", px_op_names[kinds[i]]);
      px_json_add_num(ko, "count", (double)cs->op_count[kinds[i]]);
      px_json_add_num(ko, "predicted_s", cs->op_predicted_s[kinds[i]]);
      px_json_add_num(ko, "measured_s", cs->op_measured_s[kinds[i]]);
      px_json_add_num(ko, "error", rel_err(cs->op_predicted_s[kinds[i]], cs->op_measured_s[kinds[i]]));
      cJSON_AddItemToArray(ops, ko);
    }
    cJSON_AddItemToArray(st, so);
  }
  return o;
}
