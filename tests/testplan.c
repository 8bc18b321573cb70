/* Test helpers for the suites that link the planner. */
#include "tests/testplan.h"

#include <stdio.h>

px_status px_test_compile(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                          px_err *err) {
  px_cluster c;
  px_status st = px_cluster_load(cluster, &c, err);
  if (!st) st = px_cluster_set_size(&c, gpus, 0, err);
  if (!st) {
    px_parallel_resolve(p, m, &c);
    st = px_plan_compile(plan, m, &c, p, err);
  }
  if (st) fprintf(stderr, "\n  %s\n", err->msg);
  return st;
}
