/* The op graph on disk: JSON (format "parallax-graph/1", documented in
 * docs/compiler.md, "The op graph") and Graphviz DOT of one micro-batch of one stage. */
#ifndef PX_PLAN_GRAPHIO_H
#define PX_PLAN_GRAPHIO_H

#include <cJSON.h>

#include "plan/plan.h"

cJSON *px_graph_to_json(const px_plan *plan);
px_status px_graph_write_json(const px_plan *plan, const char *path, px_err *err);
/* Draws micro-batch 0 of stage 0: ops as nodes, tensors flowing between them as edges. */
px_status px_graph_write_dot(const px_plan *plan, const char *path, px_err *err);
/* A stage-local op id: the ops of instances before `inst` plus `op`. */
int64_t px_graph_op_id(const px_plan *plan, int64_t stage, int32_t inst, int32_t op);

#endif
