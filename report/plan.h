/* A compiled plan for people and tools: the text of `parallax plan`, the
 * JSON contract (params, flops_per_step, fits, grid, stages, memory.*), and
 * the pieces every other report of a plan shares (its one-line name, the
 * head naming it, the memory object and its per-category fields). */
#ifndef PX_REPORT_PLAN_H
#define PX_REPORT_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "plan/plan.h"

void px_report_plan_text(const px_plan *plan, FILE *out);
/* Writes the plan file of model m on cluster c with choices p (plan/planfile.h; --save-plan). */
px_status px_report_plan_file(const char *path, const px_model *m, const px_cluster *c, const px_parallel *p,
                              px_err *err);
/* "WHAT: llama3-8b on 16 x H100-SXM5-80GB (dgx-h100): tp 2 pp 2 dp 4, ZeRO-1, SP, 1f1b, mbs 1, gbs 64,
 * seq 8192, recompute none" and a newline: the first line of sim and compare. */
void px_report_plan_line(const px_plan *plan, const char *what, FILE *out);

/* A JSON object naming what the plan is of: model, cluster, gpus, parallel. */
cJSON *px_report_plan_head(const px_plan *plan);
cJSON *px_report_plan_json(const px_plan *plan);
/* The "memory" object of the contract: stages[] (each with its fits verdict),
 * peak_bytes_max with the largest stage's categories, capacity and reserve. */
cJSON *px_report_memory_json(const px_plan *plan);
/* The memory fields a sweep row shares with memory_json: peak_bytes_max and
 * <category>_bytes of the stage at that peak (at_peak: PX_MEM_COUNT values). */
void px_report_memory_peak(cJSON *mem, uint64_t peak_bytes, const uint64_t *at_peak);

#endif
