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
#include "sim/replan.h"
#include "sim/sim.h"

/* "MFU 44.8% of bf16 peak (22.4% of fp8 peak)" into buf: a step's MFU
 * (px_sim_mfu), and against the peak of the plan's precision where that is
 * another; returns buf. */
const char *px_report_mfu_text(double mfu, int peak_dtype, double mfu_precision, int precision_dtype, char *buf,
                               size_t cap);
/* Adds a step's MFU peaks to o: "mfu_peak" (bf16) and "mfu_precision_peak" (fp8): what the numbers
 * "mfu" and "mfu_precision" are over. */
void px_report_mfu_peaks_json(cJSON *o, int peak_dtype, int precision_dtype);

/* Where the step goes (px_sim_result.breakdown, the stage that ends last):
 * forward, backward, recomputation, optimizer, pipeline bubble, exposed
 * communication by kind and SM contention, each with its share; the lines
 * of `sim`. And the same as the JSON object "breakdown" (stage, forward_s,
 * backward_s, recompute_s, optimizer_s, bubble_s, exposed_s.{tp, cp, ep,
 * pp, dp, host}, contention_s), which sweep rows carry too. */
void px_report_breakdown_text(const px_sim_result *r, FILE *out);
cJSON *px_report_breakdown_json(const px_sim_result *r);

/* The step's power and energy (px_sim_result.power): a GPU's average draw
 * and its busy share, a node's, the job's and the site's, and the site's
 * energy a step and a token; the lines of `sim`. */
void px_report_power_text(const px_plan *plan, const px_sim_result *r, FILE *out);
/* The text of `parallax sim`: the plan, the verdict on memory first (with
 * the nearest plans that fit, px_report_verdict_text), the step's figures;
 * wall_s: how long the simulation took (the last line); bands: the validated
 * error bands (sim/bands.h) whose row for the plan's GPU family, precision
 * and kind of model is printed, NULL none. */
void px_report_sim_text(const px_plan *plan, const px_sim_result *r, const px_replan_fit *fits, int nfits,
                        double wall_s, const px_bands *bands, FILE *out);
/* `sim --json`: the contract fields, "verdict", "breakdown", "validation" (with bands), memory and the stages. */
cJSON *px_report_sim_json(const px_plan *plan, const px_sim_result *r, const px_replan_fit *fits, int nfits,
                          const px_bands *bands);
/* The validated error band of plans of model m on cluster c with choices p:
 * {"family", "precision", "kind", "runs", ["min", "max", "mean" (fractions), "validations"], "text"} (runs 0
 * when no published run validates them; text: px_band_describe's). */
cJSON *px_report_band_json(const px_bands *bands, const px_model *m, const px_cluster *c, const px_parallel *p);
/* The summary of a simulated step in contract order: step_time_s,
 * tokens_per_s, model_tflops_per_gpu, mfu, hfu, mfu_precision,
 * bubble_fraction, comm.tp_s, comm.pp_s, comm.dp_s, comm.exposed_s, ...
 * (fits, a bool, and the MFU peaks' names are not among them). */
const px_report_field *px_report_sim_fields(size_t *count);
/* Adds the contract fields of a simulated step to o: px_report_sim_fields,
 * fits, the MFU peaks and the breakdown. `parallax sim --json` and every
 * sweep row. */
void px_report_sim_summary(cJSON *o, const px_sim_result *r);

#endif
