/* Fuzz harness: a run's profile (parallax-profile/1 JSON) set beside a
 * simulated plan by `compare`, or refused; never a crash. The tiny model's
 * plans below are compiled and simulated once, as `compare` does a CPU
 * profile's; each input is compared with every one of them, so a mutation of
 * a real profile (tests/fuzz/seeds/profile: one per plan, written by the
 * command named; the harness refuses to start when one no longer matches its
 * plan, as after a change to the plans' ops: write it again) still matches
 * its plan and reaches the whole comparison, and its report as `compare`
 * prints it (text and JSON). A profile accepted has only finite,
 * non-negative times, the comparison made of it too, and its report only
 * finite numbers. */
#include <math.h>
#include <stdlib.h>

#include "core/json.h"
#include "core/paths.h"
#include "plan/plan.h"
#include "report/compare.h"
#include "sim/compare.h"
#include "sim/sim.h"

#include "tests/fuzz/fuzz_util.h"

/* mpirun -np GPUS parallax run --backend cpu -m tiny -B 2 --steps 2 FLAGS --profile tests/fuzz/seeds/profile/SEED.json */
static const struct {
  const char *flags, *seed;
  int64_t gpus, tp, pp, dp, vpp;
  int zero, sp;
} plans[] = {
    {"-p 1", "p1", 1, 1, 1, 1, 1, 0, 0},           {"-p 2", "p2", 2, 1, 2, 1, 1, 0, 0},
    {"-t 2 -S", "t2-S", 2, 2, 1, 1, 1, 0, 1},      {"-d 2 -z 1", "d2-z1", 2, 1, 1, 2, 1, 1, 0},
    {"-d 2 -z 3", "d2-z3", 2, 1, 1, 2, 1, 3, 0},   {"-p 2 --vpp 2", "p2-vpp2", 2, 1, 2, 1, 2, 0, 0},
};
#define NPLANS (sizeof plans / sizeof *plans)
static px_plan plan[NPLANS];
static px_sim_result sim[NPLANS];
static FILE *sink; /* the text report's */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  for (size_t i = 0; i < NPLANS; i++) {
    px_err err = {0};
    px_model m;
    px_cluster c;
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = plans[i].tp, p.pp = plans[i].pp, p.dp = plans[i].dp, p.vpp = plans[i].vpp;
    p.zero = plans[i].zero, p.sp = plans[i].sp, p.gbs = 2, p.precision = PX_PREC_FP32; /* as run --backend cpu */
    px_sim_opts o = {.skip_exposed = true, .serial = true};                          /* as compare a CPU profile */
    char seed[4096];
    snprintf(seed, sizeof seed, "%s/tests/fuzz/seeds/profile/%s.json", px_data_dir(), plans[i].seed);
    cJSON *prof = NULL;
    px_comparison cmp;
    if (px_model_load("tiny", &m, &err) || px_cluster_load("local-cpu", &c, &err) ||
        px_cluster_set_size(&c, plans[i].gpus, 0, &err) || (px_parallel_resolve(&p, &m, &c), 0) ||
        px_plan_compile(&plan[i], &m, &c, &p, &err) || px_sim_run(&plan[i], &o, &sim[i], &err) ||
        px_json_load(seed, &prof, &err) || px_compare(&plan[i], &sim[i], prof, seed, &cmp, &err)) {
      fprintf(stderr, "fuzz_profile: plan '%s': %s\n", plans[i].flags, err.msg);
      fuzz_check(false, "the harness's plans compile and simulate, and each seed matches its plan");
    }
    px_comparison_free(&cmp);
    cJSON_Delete(prof);
  }
  sink = fopen("/dev/null", "w");
  fuzz_check(sink, "/dev/null opens");
  (void)argc, (void)argv;
  return 0;
}

/* Every item of a list of times is a number, finite and >= 0. */
static bool times(const cJSON *list) {
  const cJSON *t;
  cJSON_ArrayForEach(t, list) if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble) || t->valuedouble < 0) return false;
  return true;
}

/* An accepted profile's times, and the comparison's, are times. */
static void check(const cJSON *root, const px_comparison *cmp) {
  bool ok = times(cJSON_GetObjectItemCaseSensitive(root, "step_times_s"));
  const cJSON *st;
  cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(root, "stages")) ok =
      ok && times(cJSON_GetObjectItemCaseSensitive(st, "op_s_per_step"));
  fuzz_check(ok, "an accepted profile holds only times (numbers, finite, >= 0)");
  ok = isfinite(cmp->step_measured_s) && cmp->step_measured_s >= 0;
  for (int64_t s = 0; s < cmp->nstages; s++)
    for (int r = 0; r < PX_CMP_COUNT; r++)
      ok = ok && isfinite(cmp->stages[s].measured_s[r]) && cmp->stages[s].measured_s[r] >= 0;
  fuzz_check(ok, "the comparison's measured times are finite and >= 0");
}

/* Every number in the tree is finite (cJSON would print another as null). */
static bool finite(const cJSON *j) {
  if (cJSON_IsNumber(j) && !isfinite(j->valuedouble)) return false;
  for (const cJSON *c = j->child; c; c = c->next)
    if (!finite(c)) return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  px_err err = {0};
  cJSON *root = NULL;
  if (parse(data, size, "profile.json", &root, &err)) return 0;
  for (size_t i = 0; i < NPLANS; i++) {
    px_comparison cmp;
    if (px_compare(&plan[i], &sim[i], root, "profile.json", &cmp, &err)) continue;
    check(root, &cmp);
    px_report_compare_text(&plan[i], &cmp, sink);
    cJSON *report = px_report_compare_json(&cmp);
    fuzz_check(report && finite(report), "the JSON report's numbers are finite");
    cJSON_Delete(report);
    px_comparison_free(&cmp);
  }
  cJSON_Delete(root);
  return 0;
}
