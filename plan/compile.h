/* Internal interface between the plan compiler's halves: the block
 * templates (plan/compile.c) and the per-stage programs (plan/program.c). */
#ifndef PX_PLAN_COMPILE_H
#define PX_PLAN_COMPILE_H

#include "plan/plan.h"

/* Creates the slots and the block templates of every px_block_kind. */
px_status px_compile_blocks(px_plan *p, px_err *err);
/* Lays out parameters into units and orders each stage's program. */
px_status px_compile_programs(px_plan *p, px_err *err);
/* Walks each program applying lifetimes: the memory plan. */
px_status px_compile_memory(px_plan *p, px_err *err);

#endif
