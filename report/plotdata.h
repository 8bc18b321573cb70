/* Data files for the gnuplot scripts in plots/: whitespace-separated
 * columns with '#' headers (docs/sweeps.md, "Plots and report"). */
#ifndef PX_REPORT_PLOTDATA_H
#define PX_REPORT_PLOTDATA_H

#include "core/status.h"
#include "plan/plan.h"
#include "sim/sweep.h"

/* memory.dat: per stage, GiB by category and the usable capacity. */
px_status px_plotdata_memory(const px_plan *plan, const char *dir, px_err *err);
/* plans.dat (every fitting plan, with its Pareto flag) and heatmap.dat
 * (best tokens/s per tp x pp, NaN where nothing fits). */
px_status px_plotdata_sweep(const px_sweep_result *r, const char *dir, px_err *err);
/* scaling.dat: the plan's shape (tp, pp and the rest fixed) at GPU counts
 * from an eighth to 4x, dp scaling; points that are invalid or do not fit are left out. */
px_status px_plotdata_scaling(const px_model *m, const px_cluster *c, const px_parallel *par, const char *dir,
                              px_err *err);
/* The chosen plan's per-stage memory, timeline (simulated) and scaling. */
px_status px_plotdata_plan(const px_model *m, const px_cluster *c, const px_parallel *par, const char *dir, px_err *err);

#endif
