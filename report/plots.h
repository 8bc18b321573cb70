/* Plots of a sweep directory: runs the gnuplot scripts of $PARALLAX_HOME/plots
 * on the .dat files parallax wrote there, producing <name>.png and <name>.svg. */
#ifndef PX_REPORT_PLOTS_H
#define PX_REPORT_PLOTS_H

#include <stddef.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"

/* One plot: plots/<name>.gp reads <dir>/<input> and writes <dir>/<name>.png|svg. */
typedef struct {
  const char *name;    /* "heatmap" */
  const char *input;   /* "heatmap.dat" */
  const char *title;   /* short heading for reports */
  const char *caption; /* one or two sentences saying how to read it */
} px_plot_desc;

/* The plots, in report order. */
const px_plot_desc *px_plots_list(size_t *count);

/* For every plot whose input file is in dir and has at least one data line,
 * runs `gnuplot -e "dir='DIR'; fmt='png|svg'; out='TMP'" $PARALLAX_HOME/plots/NAME.gp`
 * and renames TMP onto dir/NAME.png and dir/NAME.svg. Plots whose input is
 * missing are skipped. Fails (PX_ERR_RUNTIME) when gnuplot is not on PATH, a
 * script is missing, or gnuplot fails; the message names the script and
 * carries gnuplot's stderr. */
px_status px_plots_render(const char *dir, px_err *err);

/* `sim --plot DIR`: creates DIR, writes the plan's data files
 * (px_plotdata_plan) and renders them. */
px_status px_plots_plan(const char *dir, const px_model *m, const px_cluster *c, const px_parallel *par, px_err *err);

#endif
