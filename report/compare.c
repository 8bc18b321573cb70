/* The comparison of a prediction with a profile: text and JSON. */
#include "report/compare.h"

#include <math.h>

#include "core/fmt.h"
#include "core/json.h"
#include "report/plan.h"

/* (predicted - measured) / measured; 0 where nothing was measured. */
static double rel_err(double pred, double meas) { return meas > 0 ? (pred - meas) / meas : 0.0; }

void px_report_compare_text(const px_plan *plan, const px_comparison *c, FILE *out) {
  char a[32], b[32], d[32];
  px_report_plan_line(plan, "compare", out);
  px_report_inputs_text(&plan->model, &plan->cluster, plan->par.seq, out);
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
    cJSON_AddItemToArray(st, so);
  }
  return o;
}
