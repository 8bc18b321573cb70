/* A simulated step's spans (px_sim_run with opts.record_spans) on disk: a
 * Chrome trace (open it in Perfetto) and the gnuplot table the timeline
 * plot draws. */
#ifndef PX_REPORT_TRACE_H
#define PX_REPORT_TRACE_H

#include "core/status.h"
#include "plan/plan.h"
#include "sim/sim.h"

/* Chrome trace JSON: a process per stage, a thread per stream, an event per span. */
px_status px_report_trace(const px_sim_result *r, const char *path, px_err *err);
/* gnuplot table, a span a line: stage stream start_ms end_ms kind mb (kind: fwd, bwd, wgrad, opt, comm). */
px_status px_report_timeline(const px_plan *plan, const px_sim_result *r, const char *path, px_err *err);

#endif
