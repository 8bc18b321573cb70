/* A training run for people and tools: the losses and summary `parallax run`
 * prints, and `run --json` (the plan's head, losses, time, memory per stage
 * beside the plan's prediction). Reads exec's result struct; links no executor. */
#ifndef PX_REPORT_RUN_H
#define PX_REPORT_RUN_H

#include <stdio.h>

#include <cJSON.h>

#include "exec/result.h"
#include "plan/plan.h"

/* A step's line as the run goes, in the spirit of Megatron-LM's log:
 * "step  3/10 | loss 5.373657 | grad norm 1.02 | 101.2 ms | 2530 tokens/s |
 * 0.0061 TFLOP/s/GPU | peak 1006.25 KiB" (fp16: the loss scale, or that
 * the step was skipped). */
void px_report_run_step_text(const px_plan *plan, const px_train_step *s, FILE *out);
/* The same as one JSON object (`run --json` prints one a line): step, steps,
 * loss, grad_norm, step_time_s, tokens_per_s, model_tflops_per_gpu, mfu,
 * peak_bytes (and loss_scale with fp16). */
cJSON *px_report_run_step_json(const px_plan *plan, const px_train_step *s);
/* The summary after the steps: backend, ranks, mean step time, tokens/s,
 * model TFLOP/s per GPU and MFU (px_sim_mfu), memory against the plan. */
void px_report_run_text(const px_plan *plan, const px_train_result *r, FILE *out);
cJSON *px_report_run_json(const px_plan *plan, const px_train_result *r);

#endif
