/* A training run for people and tools: the losses and summary `parallax run`
 * prints, and `run --json` (the plan's head, losses, time, memory per stage
 * beside the plan's prediction). Reads exec's result struct; links no executor. */
#ifndef PX_REPORT_RUN_H
#define PX_REPORT_RUN_H

#include <stdio.h>

#include <cJSON.h>

#include "exec/result.h"
#include "plan/plan.h"

void px_report_run_text(const px_plan *plan, const px_train_result *r, FILE *out);
cJSON *px_report_run_json(const px_plan *plan, const px_train_result *r);

#endif
