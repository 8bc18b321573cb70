/* Prediction beside measurement for people and tools: the table of
 * `parallax compare` (per stage, per row, with the error of each) and its JSON. */
#ifndef PX_REPORT_COMPARE_H
#define PX_REPORT_COMPARE_H

#include <stdio.h>

#include <cJSON.h>

#include "plan/plan.h"
#include "sim/compare.h"

void px_report_compare_text(const px_plan *plan, const px_comparison *c, FILE *out);
/* {"step": {predicted_s, measured_s, error, timed_steps}, "stages": [{stage, rows: [{row, predicted_s, measured_s,
 * error}], ops: [{kind, count, predicted_s, measured_s, error}] (by op kind, the most measured first)}]} */
cJSON *px_report_compare_json(const px_comparison *c);

#endif
