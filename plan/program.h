/* The per-stage programs (plan/program.c): layers over stages, parameters
 * in units, each stage's schedule of block instances. */
#ifndef PX_PLAN_PROGRAM_H
#define PX_PLAN_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/query.h"

/* Called once a stage's program is made; setting *stop ends the compile
 * there (the other stages are left without programs, the sends and
 * receives unpaired). */
typedef px_status (*px_stage_done_fn)(px_plan *p, int64_t stage, bool *stop, void *ctx);
/* Lays out parameters into units and orders each stage's program (the
 * first stage, the last, then the others), calling done (may be NULL)
 * after each; then pairs sends with receives. */
px_status px_compile_programs(px_plan *p, px_stage_done_fn done, void *ctx, px_err *err);

#endif
