/* A simulated step for people and tools: the text of `parallax sim` and the
 * JSON contract (step_time_s, tokens_per_s, ..., comm.*, memory.*), whose
 * summary fields a sweep row prints from the same function. */
#ifndef PX_REPORT_SIM_H
#define PX_REPORT_SIM_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

#include "plan/plan.h"
#include "report/fields.h"
#include "sim/bands.h"
#include "sim/sim.h"

/* wall_s: how long the simulation took (the last line). bands: the validated error bands (sim/bands.h)
 * whose row for the plan's GPU family, precision and kind of model is printed; NULL: none. */
void px_report_sim_text(const px_plan *plan, const px_sim_result *r, double wall_s, const px_bands *bands, FILE *out);
cJSON *px_report_sim_json(const px_plan *plan, const px_sim_result *r, const px_bands *bands);
/* The validated error band of plans of model m on cluster c with choices p:
 * {"family", "precision", "kind", "runs", ["min", "max", "mean" (fractions), "validations"], "text"} (runs 0
 * when no published run validates them; text: px_band_describe's). */
cJSON *px_report_band_json(const px_bands *bands, const px_model *m, const px_cluster *c, const px_parallel *p);
/* The summary of a simulated step in contract order: step_time_s,
 * tokens_per_s, model_tflops_per_gpu, mfu, hfu, bubble_fraction, comm.tp_s,
 * comm.pp_s, comm.dp_s, comm.exposed_s (fits, a bool, is not among them). */
const px_report_field *px_report_sim_fields(size_t *count);
/* Adds the contract fields of a simulated step to o: px_report_sim_fields
 * and fits. `parallax sim --json` and every sweep row. */
void px_report_sim_summary(cJSON *o, const px_sim_result *r);

#endif
