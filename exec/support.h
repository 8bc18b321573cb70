/* Which ops a backend can run, asked before a run starts: the plan-level
 * rules of plan/runnable.h, then the walk that refuses a plan with an op the
 * backend cannot run, saying which and why. */
#ifndef PX_EXEC_SUPPORT_H
#define PX_EXEC_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"
#include "plan/plan.h"

extern const char *const px_support_names[PX_SUPPORT_COUNT]; /* "no", "yes", "widened" */

/* be->supports_op on op in the run's env v, or YES when the backend has no such entry. */
px_support px_support_op(px_backend *be, const px_env *v, const px_op *op, char *why, size_t cap);

/* For a backend plan/runnable.h names, its rules for the plan's choices
 * first (PX_ERR_INPUT with their reason). Then asks the backend about every
 * op of every stage's program (each distinct op once; the verdict is the
 * same on every rank) and about the ops the interpreter adds on gradient
 * ranges. PX_ERR_INPUT with one line naming the first op refused, its dtype
 * and why (and the other kinds refused) when any is. */
px_status px_support_check(px_backend *be, const px_plan *plan, px_err *err);

#endif
