/* A sweep for people: the ranked table of `parallax sweep` (counts, the top
 * plans, time to train and the failure model of the best), its progress bar,
 * and the directory of plots and report it writes. */
#ifndef PX_REPORT_SWEEP_H
#define PX_REPORT_SWEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "sim/bands.h"
#include "sim/sweep.h"

/* "tp4 pp2 dp64 z1 sp mbs1 int2 sel": a plan in one short column (with
 * "f7l7" when the first and last stage hold 7 layers each). */
void px_report_plan_label(const px_parallel *p, char *buf, size_t cap);
/* What the labels' parts mean, a few lines (printed under the table and in sweep --help). */
extern const char px_report_plan_legend[];
/* The table of the `top` best plans; wall_s and threads: how long the sweep took, on how many threads; bands:
 * the validated error bands (sim/bands.h) printed for the precisions and kind of model of the plans shown,
 * NULL none. */
void px_report_sweep_text(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                          int64_t top, double wall_s, int threads, const px_bands *bands, FILE *out);
/* `sweep --plot DIR` (html false) and `--report DIR` (html true): creates
 * DIR, writes the data files of the sweep and of its best plan, sweep.json
 * with the 50 best plans, renders the plots and, with html, index.html. */
px_status px_report_sweep_dir(const char *dir, bool html, const px_model *m, const px_cluster *c,
                              const px_sweep_opts *o, const px_sweep_result *r, const px_bands *bands, px_err *err);
/* A px_sweep_opts progress callback: a bar on the FILE * ctx (stderr when NULL). */
void px_report_sweep_progress(void *ctx, int64_t done, int64_t total);

#endif
