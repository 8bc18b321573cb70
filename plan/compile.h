/* The block templates (plan/compile.c): what plan/plan.c calls first. */
#ifndef PX_PLAN_COMPILE_H
#define PX_PLAN_COMPILE_H

#include "core/status.h"
#include "plan/query.h"

/* Creates the slots and the block templates of every px_block_kind. */
px_status px_compile_blocks(px_plan *p, px_err *err);

#endif
