/* Fuzz harness: a run's profile (parallax-profile/1 JSON) set beside a
 * simulated plan by `compare` is accepted or refused, never a crash. */
#include <stdlib.h>

#include "core/json.h"
#include "plan/plan.h"
#include "sim/compare.h"
#include "sim/sim.h"

#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static px_plan plan;
  static px_sim_result sim;
  static int ready; /* 1: the plan and its simulation, once; -1: could not */
  px_err err = {0};
  if (!ready) {
    px_model m;
    px_cluster c;
    px_parallel p;
    px_parallel_unset(&p);
    p.pp = 2, p.gbs = 4;
    ready = -1;
    if (!px_model_load("tiny", &m, &err) && !px_cluster_load("local-cpu", &c, &err) &&
        !px_cluster_set_size(&c, 2, 0, &err)) {
      px_parallel_resolve(&p, &m, &c);
      if (!px_plan_compile(&plan, &m, &c, &p, &err) && !px_sim_run(&plan, NULL, &sim, &err)) ready = 1;
    }
  }
  if (ready < 0) abort(); /* the harness itself is broken: say so at once */
  cJSON *root = NULL;
  if (parse(data, size, "profile.json", &root, &err)) return 0;
  px_comparison cmp;
  if (!px_compare(&plan, &sim, root, "profile.json", &cmp, &err)) px_comparison_free(&cmp);
  cJSON_Delete(root);
  return 0;
}
