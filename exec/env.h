/* A rank's op environment (px_env, exec/backend.h) from the compiled plan:
 * the model's constants, the run's dtypes and precision, the rank's groups
 * and the CP ranks' positions, which the backends read instead of the plan. */
#ifndef PX_EXEC_ENV_H
#define PX_EXEC_ENV_H

#include "exec/backend.h"
#include "plan/plan.h"

/* The env of the rank at (tp_rank, cp_rank) of plan's grid (the CP positions
 * allocated); plan must outlive it. */
px_status px_env_init(px_env *v, const px_plan *plan, int64_t tp_rank, int64_t cp_rank, px_err *err);
void px_env_free(px_env *v);

#endif
