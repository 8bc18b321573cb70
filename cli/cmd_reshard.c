/* parallax reshard: re-splits a checkpoint for another plan of the same
 * model, in one process (no mpirun): the plan flags give the new plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "cli/exec.h"

static const char usage[] =
    "usage: parallax reshard --from DIR --to DIR [--model M] [--cluster C] [plan flags] [--json]\n\n"
    "Writes into --to a checkpoint of the plan the flags give, holding the states of the checkpoint\n"
    "in --from (parameters, fp32 master weights, Adam's moments, the fp16 loss scaler, fp8's amax\n"
    "histories, the step) re-split for it: any tp, pp, cp, dp, ep, ZeRO stage, shard group or\n"
    "precision of the same model (fp16's loss scaler only to and from fp16); `mpirun -np N parallax\n"
    "run PLAN-FLAGS --ckpt TO --resume` continues the training. run --resume also takes another\n"
    "plan's checkpoint itself and re-splits it as it loads. The model, the cluster, the precision and\n"
    "the global batch default to the checkpoint's, and so do fp8's recipe and base dtype; the GPU\n"
    "count to tp x pp x cp x dp. --to is locked while it is written (DIR/lock: a job using it refuses\n"
    "the reshard), and one that already holds a checkpoint is refused unless --overwrite replaces it\n"
    "(the old one stays until the new one is written).\n\n";

int px_cmd_reshard(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_RESHARD;
  int code = px_cli_start(&a, "parallax reshard", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  const px_exec_module *x = px_cli_exec(&err);
  if (!x) return px_cli_fail(PX_ERR_INPUT, &err);
  px_status st = PX_OK;
  if (!a.from_dir || !a.to_dir)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax reshard: --from DIR and --to DIR are required (see --help)");
  else if (px_cli_same_dir(a.from_dir, a.to_dir))
    st = px_err_set(&err, PX_ERR_INPUT, "parallax reshard: --to %s is the --from directory: write the re-split "
                    "checkpoint elsewhere (the old one stays as it is)", a.to_dir);
  px_ckpt_lock lock = {0};
  if (!st) st = px_cli_take_to(x, a.to_dir, a.overwrite, "re-split", &lock, &err);
  /* the checkpoint's plan gives the model, the cluster, the precision and the global batch the flags
   * leave out (as run resolved them where the checkpoint was written); one GPU a rank */
  px_plan plan;
  bool have_plan = false;
  if (!st && !(st = px_cli_plan_after(x, &a, a.from_dir, &plan, &err))) have_plan = true;
  px_reshard *r = NULL;
  uint64_t bytes = 0;
  if (!st) st = x->reshard_open(a.from_dir, &plan, 0, 1, &r, &err);
  if (!st) st = x->reshard_write(r, a.to_dir, &bytes, &err);
  if (!st) {
    const px_plan *was = x->reshard_from(r);
    char from[256], to[256];
    x->reshard_describe(was, from, sizeof from);
    x->reshard_describe(&plan, to, sizeof to);
    if (a.json) {
      cJSON *root = cJSON_CreateObject(), *f = NULL, *t = NULL;
      bool ok = root && px_json_add_num(root, "step", (double)x->reshard_step(r)) &&
                (f = cJSON_AddObjectToObject(root, "from")) && cJSON_AddStringToObject(f, "dir", a.from_dir) &&
                cJSON_AddStringToObject(f, "plan", from) && px_json_add_num(f, "world", (double)was->grid.world) &&
                (t = cJSON_AddObjectToObject(root, "to")) && cJSON_AddStringToObject(t, "dir", a.to_dir) &&
                cJSON_AddStringToObject(t, "plan", to) && px_json_add_num(t, "world", (double)plan.grid.world) &&
                px_json_add_num(t, "bytes", (double)bytes);
      if (!ok) cJSON_Delete(root), root = NULL;
      st = px_json_print_free(root, &err);
    } else {
      printf("checkpoint of step %lld re-split\n", (long long)x->reshard_step(r));
      printf("  from %s: %s\n", a.from_dir, from);
      printf("  to   %s: %s, %.1f MiB\n", a.to_dir, to, (double)bytes / (1 << 20));
    }
    if (x->reshard_amax_fresh(r))
      fprintf(stderr, "parallax: note: the checkpoint holds no fp8 amax history for some of the new plan's tensors: "
              "delayed scaling starts those afresh\n");
    if (was->par.gbs != plan.par.gbs)
      fprintf(stderr, "parallax: note: the global batch changes from %lld to %lld sequences: training goes on with "
              "other batches than the old plan's\n", (long long)was->par.gbs, (long long)plan.par.gbs);
  }
  x->reshard_free(r);
  x->ckpt_lock_release(&lock);
  if (have_plan) px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : 0;
}
