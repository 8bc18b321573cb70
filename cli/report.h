/* Rendering of compiled plans for the CLI: readable text and the JSON
 * contract (params, flops_per_step, fits, memory.*). */
#ifndef PX_CLI_REPORT_H
#define PX_CLI_REPORT_H

#include <stdio.h>

#include <cJSON.h>

#include "plan/plan.h"
#include "sim/sim.h"

void px_report_plan_text(const px_plan *plan, FILE *out);
/* A JSON object naming what the plan is of: model, cluster, gpus, parallel. */
cJSON *px_report_plan_head(const px_plan *plan);
cJSON *px_report_plan_json(const px_plan *plan);
/* The "memory" object of the contract: peak_bytes_max and stages[]. */
cJSON *px_report_memory_json(const px_plan *plan);
/* The simulator's contract fields (step_time_s, tokens_per_s, ..., comm.*). */
cJSON *px_report_sim_json(const px_plan *plan, const px_sim_result *r);

#endif
