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
/* The precisions of the plans the sweep evaluated, fitting or not: bit 1 << px_precision for each. */
int px_report_sweep_precisions(const px_sweep_result *r);
/* Of the plans a sweep dropped, the one of least peak of those that do not
 * fit their GPUs (NULL: none; px_replan_least_peak makes it exact), and in
 * *host how many fit the GPUs (usable bytes each) but not the host memory
 * their offloaded states need. */
const px_sweep_entry *px_report_sweep_least(const px_sweep_result *r, uint64_t usable, int64_t *host);
/* The table of the `top` best plans; wall_s and threads: how long the sweep took, on how many threads; bands:
 * the validated error bands (sim/bands.h) printed for the precisions and kind of model of the plans shown,
 * NULL none. */
void px_report_sweep_text(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                          int64_t top, double wall_s, int threads, const px_bands *bands, FILE *out);
/* How many of the best plans sweep.json beside the plots holds (a sweep for them keeps as many exact). */
#define PX_REPORT_SWEEP_PLANS 50
/* `sweep --plot DIR` (html false) and `--report DIR` (html true): creates
 * DIR, writes the data files of the sweep and of its best plan, sweep.json
 * with the PX_REPORT_SWEEP_PLANS best plans, renders the plots and, with
 * html, index.html. */
/* A plan's time to train o->tokens (t: px_sweep_train_of) as sim prints it: days and goodput with the
 * checkpoints and failures behind it, GPU-hours and their cost, the site's energy and its cost. */
void px_report_train_text(const px_sweep_opts *o, const px_train_time *t, FILE *out);

px_status px_report_sweep_dir(const char *dir, bool html, const px_model *m, const px_cluster *c,
                              const px_sweep_opts *o, const px_sweep_result *r, const px_bands *bands, px_err *err);
/* A sweep's progress on stderr (px_sweep_opts.progress with a
 * px_report_progress as its ctx): on a terminal a bar redrawn in place; else
 * a line every interval_s: plans checked (bounded or compiled) of all, simulated, the best so far
 * (its label and tokens/s), each after `what` ("--vary gpu.hbm_gib=80, value
 * 2 of 3: ") when set. */
typedef struct {
  FILE *out;
  bool tty;
  double interval_s;  /* between lines without a terminal (a bar: redrawn at most 10 times a second) */
  double next_s;      /* px_clock_s when the next is due: 0 to start (the first after interval_s) */
  const char *what;
  bool drawn;         /* a bar is on the terminal's line */
  bool printed;       /* a line was printed (no terminal): the last state is printed at the end too */
  px_sweep_progress last; /* the latest state (last.best: NULL, the best is copied below) */
  bool have_best, last_shown; /* a best so far; the latest state is the one printed */
  px_parallel best_par;
  double best_tokens_per_s;
} px_report_progress;
/* Starts p for stderr; the interval is 5 s, or the environment's PX_PROGRESS_INTERVAL_S (tests). */
void px_report_progress_init(px_report_progress *p);
void px_report_sweep_progress(void *ctx, const px_sweep_progress *sp);
/* Clears a bar left on the terminal's line, or, without a terminal, prints
 * the last state when lines were printed and it is not the last printed
 * (call after px_sweep_run). */
void px_report_progress_end(px_report_progress *p);

#endif
