/* The executor in one process (one MPI rank), so the sanitizers see it:
 * every op kind on both model families (dropout, both attention kernels,
 * every recompute mode), the allocated peak equal to the plan's prediction,
 * and training lowering the loss. Multi-rank plans are tested through
 * mpirun in tests/cli/exec_*.sh. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "exec/train.h"
#include "tests/testutil.h"

static void train(const char *model, double dropout, int attention, int recompute, int64_t steps, px_train_result *r) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(model, &m, &err), PX_OK);
  m.dropout = dropout;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("local-cpu", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 1, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.gbs = 4, p.mbs = 2, p.attention = attention, p.recompute = recompute, p.precision = PX_PREC_FP32;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  px_train_opts o;
  px_train_opts_init(&o);
  o.steps = steps;
  o.backend = "cpu";
  px_status st = px_train(&plan, &o, MPI_COMM_WORLD, r, &err);
  if (st) fprintf(stderr, "\n  %s: %s\n", model, err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(r->peak_bytes, plan.mem[0].peak_bytes);
  CU_ASSERT_EQUAL(r->predicted_peak_bytes, plan.mem[0].peak_bytes);
  px_plan_free(&plan);
}

static void test_all_ops(void) {
  const char *models[] = {"tiny", "tiny-gpt"};
  for (int mi = 0; mi < 2; mi++)
    for (int att = 0; att < PX_ATTN_COUNT; att++)
      for (int rc = 0; rc < PX_RECOMPUTE_COUNT; rc++) {
        px_train_result r;
        train(models[mi], mi == 1 ? 0.1 : 0.0, att, rc, 2, &r);
        CU_ASSERT(isfinite(r.losses[0]) && r.losses[0] > 5.0 && r.losses[0] < 6.0); /* ln 256 = 5.55 */
        px_train_result_free(&r);
      }
}

/* Recomputation replays the same dropout masks: the losses are identical. */
static void test_recompute_same_losses(void) {
  px_train_result a, b;
  train("tiny-gpt", 0.1, PX_ATTN_UNFUSED, PX_RECOMPUTE_NONE, 3, &a);
  train("tiny-gpt", 0.1, PX_ATTN_UNFUSED, PX_RECOMPUTE_FULL, 3, &b);
  for (int k = 0; k < 3; k++) PX_ASSERT_REL(b.losses[k], a.losses[k], 1e-6);
  px_train_result_free(&a);
  px_train_result_free(&b);
}

static void test_loss_falls(void) {
  px_train_result r;
  train("tiny", 0.0, PX_ATTN_FLASH, PX_RECOMPUTE_NONE, 30, &r);
  CU_ASSERT(r.losses[29] < r.losses[0] - 0.3);
  px_train_result_free(&r);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  static const px_test tests[] = {
      {"every op on both model families and attention kernels", test_all_ops},
      {"recomputation gives the same losses (dropout replayed)", test_recompute_same_losses},
      {"training lowers the loss", test_loss_falls},
  };
  int rc = px_test_main("exec", tests, sizeof tests / sizeof tests[0]);
  MPI_Finalize();
  return rc;
}
