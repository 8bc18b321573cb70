/* Test helpers for the suites that link the planner: a plan of a preset
 * cluster. */
#ifndef PX_TESTS_TESTPLAN_H
#define PX_TESTS_TESTPLAN_H

#include <stdint.h>

#include "plan/plan.h"

/* p's plan of model m on preset `cluster`'s first `gpus` GPUs (p's defaults
 * resolved first); says why on stderr when it refuses. */
px_status px_test_compile(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                          px_err *err);

#endif
