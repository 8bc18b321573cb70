/* A sweep for tools: `parallax sweep --json` and DIR/sweep.json, written and
 * read here (the HTML report reads it back): the question with the
 * dimensions the caller fixed, the counts, the plans best first (each row the
 * simulator's summary of its plan, its peak memory and time to train) and
 * the assumptions with their sources. */
#ifndef PX_REPORT_SWEEPJSON_H
#define PX_REPORT_SWEEPJSON_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"
#include "report/fields.h"
#include "sim/bands.h"
#include "sim/sweep.h"

/* The whole answer with the `top` best plans. */
/* "z3k": a ZeRO stage and its modes when not the defaults (f: full gradient
 * accumulation, k: parameters kept from forward to backward, p2: ZeRO-3
 * gathers two layers ahead, h8: sharded over
 * shard groups of 8 DP ranks, replicated across them; +oc / +on: the
 * optimizer offloaded to host memory / NVMe, +pc / +pn: the parameters). */
void px_report_zero_label(const px_parallel *p, char *buf, size_t cap);

/* With bands (sim/bands.h; NULL: none), each plan has its validated error band ("validation", as `sim --json`). */
cJSON *px_report_sweep_json(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                            int64_t top, const px_bands *bands);
/* Writes dir/sweep.json (atomically) with the `top` best plans. */
px_status px_report_sweep_write(const char *dir, const px_model *m, const px_cluster *c, const px_sweep_opts *o,
                                const px_sweep_result *r, int64_t top, const px_bands *bands, px_err *err);
/* Reads dir/sweep.json: a JSON object whose "plans", when present, is an array. */
px_status px_report_sweep_load(const char *dir, cJSON **root, px_err *err);

/* question.fixed: the set fields of `fixed` (what the caller fixed), but gbs
 * and seq, which the question holds on their own. */
cJSON *px_report_fixed_json(const px_parallel *fixed);
/* A row's time_to_train: days, gpu_hours, cost_usd, goodput, then the checkpoint and failure figures. */
const px_report_field *px_report_train_fields(size_t *count);

#endif
