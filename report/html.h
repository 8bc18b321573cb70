/* The HTML report of a sweep directory: one self-contained page (inline CSS,
 * plots embedded as data: URIs) with the question, the ranked plans, the plots
 * and every assumption with its source. */
#ifndef PX_REPORT_HTML_H
#define PX_REPORT_HTML_H

#include "core/status.h"

/* How many ranked plans the report's table shows. */
#define PX_HTML_TOP_PLANS 20

/* Reads dir/sweep.json (px_report_sweep_load) and the dir/<plot>.png files
 * px_plots_render wrote (missing ones are left out) and writes dir/index.html
 * atomically. Every string from the JSON is HTML-escaped; "Fixed choices"
 * shows question.fixed as flags. After load, an inline script sets body's
 * data-images-ok (images with naturalWidth > 0) and data-images-total. */
px_status px_html_report(const char *dir, px_err *err);

#endif
