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
#include "sim/replan.h"

/* The text of `parallax plan`: the plan, the verdict on memory first
 * (px_report_verdict_text, with the nearest plans that fit), and its
 * simulated step's time and MFU when sim is not NULL. */
/* Fine-tuning's line (none without it): the adapters, the frozen base's bytes, what is trained. */
void px_report_finetune_text(const px_plan *plan, FILE *out);
void px_report_plan_text(const px_plan *plan, const px_sim_result *sim, const px_replan_fit *fits, int nfits, FILE *out);
/* Writes the plan file of model m on cluster c with choices p (plan/planfile.h; --save-plan). */
px_status px_report_plan_file(const char *path, const px_model *m, const px_cluster *c, const px_parallel *p,
                              px_err *err);
/* "WHAT: llama3-8b on 16 x H100-SXM5-80GB (dgx-h100): tp 2 pp 2 dp 4, ZeRO-1, SP, 1f1b, mbs 1, gbs 64,
 * seq 8192, recompute none" and a newline: the first line of sim and compare. */
void px_report_plan_line(const px_plan *plan, const char *what, FILE *out);
/* The plan's recomputation in words: "none", "full", "full of 2 layers a
 * chunk (block)". */
const char *px_report_recompute_text(const px_parallel *p, char *buf, size_t cap);
/* What the output rests on that its reader may not know was taken, a line
 * each (none when none applies): the cluster fields set over the file's, a
 * sequence length that is a Hugging Face config's max_position_embeddings, and
 * the model's MTP modules beyond the plan's mtp_layers (not planned). */
void px_report_inputs_text(const px_model *m, const px_cluster *c, int64_t seq, int64_t mtp_layers, FILE *out);
/* The same as members of o: "overrides" (["FIELD=VALUE", ...]), "seq_from"
 * ("max_position_embeddings") and "not_planned". */
void px_report_inputs_json(cJSON *o, const px_model *m, const px_cluster *c, int64_t seq, int64_t mtp_layers);

/* The verdict on memory, the first line of `plan` and `sim` after the one
 * naming the plan: "fits: stage 1 needs 61.2 GiB of the 78.4 GiB usable
 * (17.2 GiB to spare)", or "DOES NOT FIT: stage 0 needs 162.2 GiB ... (83.8
 * GiB over)" (or the host memory the offloaded states need) and then the
 * nearest plans that fit (px_replan_nearest's fits[0..nfits)) with what
 * each changes, as flags. */
void px_report_verdict_text(const px_plan *plan, const px_replan_fit *fits, int nfits, FILE *out);
/* The same as the JSON object "verdict": fits, stage, need_bytes,
 * usable_bytes, over_bytes (0 when it fits), host_fits, and nearest[]
 * ({change, flags, changed[], step_time_s, tokens_per_s, mfu, peak_bytes}). */
cJSON *px_report_verdict_json(const px_plan *plan, const px_replan_fit *fits, int nfits);

/* A JSON object naming what the plan is of: model, cluster, gpus, parallel. */
cJSON *px_report_plan_head(const px_plan *plan);
/* `plan --json`: the plan, its "verdict" and, when sim is not NULL, its simulated "step" (the sim summary). */
cJSON *px_report_plan_json(const px_plan *plan, const px_sim_result *sim, const px_replan_fit *fits, int nfits);
/* The "memory" object of the contract: stages[] (each with its fits verdict),
 * peak_bytes_max with the largest stage's categories, capacity and reserve. */
cJSON *px_report_memory_json(const px_plan *plan);
/* The memory fields a sweep row shares with memory_json: peak_bytes_max and
 * <category>_bytes of the stage at that peak (at_peak: PX_MEM_COUNT values). */
void px_report_memory_peak(cJSON *mem, uint64_t peak_bytes, const uint64_t *at_peak);

#endif
