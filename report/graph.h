/* A plan's op graph on disk (plan --graph, --dot): JSON (format
 * "parallax-graph/1", documented in the README) and Graphviz DOT of one
 * micro-batch of one stage. */
#ifndef PX_REPORT_GRAPH_H
#define PX_REPORT_GRAPH_H

#include <cJSON.h>

#include "plan/plan.h"

/* The graph's JSON (NULL when out of memory; the caller deletes it). */
cJSON *px_report_graph_json(const px_plan *plan);
px_status px_report_graph_write_json(const px_plan *plan, const char *path, px_err *err);
/* Draws micro-batch 0 of stage 0: ops as nodes, tensors flowing between them as edges. */
px_status px_report_graph_write_dot(const px_plan *plan, const char *path, px_err *err);

#endif
