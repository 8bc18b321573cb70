/* parallax merge: LoRA adapters merged into their frozen base, written as a full checkpoint of the plan the flags
 * give (exec/merge.h), in one process (no mpirun). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/exec.h"
#include "core/json.h"

static const char usage[] =
    "usage: parallax merge --adapters DIR [--base-ckpt DIR | --seed K] --to DIR [--model M] [--cluster C]\n"
    "                      [plan flags] [--json]\n\n"
    "Merges the LoRA adapters of a fine-tuning run's checkpoint (run --finetune lora --ckpt DIR) into the frozen\n"
    "base they were trained on: every adapted weight becomes W + (alpha / r) B A, every other weight is the base's.\n"
    "The base is the checkpoint the run took with --base-ckpt, or without it the model as --seed initialises it\n"
    "(the run's seed, 1234 unless it was given); either is checked against the base's hash the adapters'\n"
    "checkpoint records, and refused if it is not that base. --to gets the full checkpoint of the plan the\n"
    "flags give (a pre-training run's: the model, the cluster, the precision and the global batch default to\n"
    "the adapters' run's, the parallel split to one GPU), of the adapters' step, its Adam moments zero: `mpirun\n"
    "-np N parallax run PLAN-FLAGS --ckpt TO --resume` goes on training every weight, and reshard re-splits it.\n"
    "--to is locked while it is written, and one that already holds a checkpoint is refused unless --overwrite\n"
    "replaces it (the old one stays until the merged one is written).\n\n";

int px_cmd_merge(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_MERGE;
  int code = px_cli_start(&a, "parallax merge", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  const px_exec_module *x = px_cli_exec(&err);
  if (!x) return px_cli_fail(PX_ERR_INPUT, &err);
  px_status st = PX_OK;
  if (!a.adapters_dir || !a.to_dir)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax merge: --adapters DIR and --to DIR are required (see --help)");
  else if (px_cli_same_dir(a.adapters_dir, a.to_dir) || px_cli_same_dir(a.base_ckpt, a.to_dir))
    st = px_err_set(&err, PX_ERR_INPUT, "parallax merge: --to %s is the %s directory: write the merged checkpoint "
                    "elsewhere (the old one stays as it is)", a.to_dir,
                    px_cli_same_dir(a.adapters_dir, a.to_dir) ? "--adapters" : "--base-ckpt");
  else if (a.base_ckpt && a.seed >= 0)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax merge: --base-ckpt and --seed: the base is one or the other (--seed "
                    "initialises it as the adapters' run did without --base-ckpt)");
  px_ckpt_lock lock = {0};
  if (!st) st = px_cli_take_to(x, a.to_dir, a.overwrite, "merged", &lock, &err);
  /* the adapters' plan gives the model, the cluster, the precision and the global batch the flags leave out */
  px_plan plan;
  bool have_plan = false;
  if (!st && !(st = px_cli_plan_after(x, &a, a.adapters_dir, &plan, &err))) have_plan = true;
  px_train_opts defaults;
  x->train_opts_init(&defaults);
  px_merge_opts mo = {.adapters = a.adapters_dir, .base_ckpt = a.base_ckpt,
                      .seed = a.seed >= 0 ? (uint64_t)a.seed : defaults.hp.seed};
  px_merge *mg = NULL;
  uint64_t bytes = 0;
  if (!st) st = x->merge_open(&mo, &mg, &err);
  if (!st) st = x->merge_write(mg, &plan, a.to_dir, &bytes, &err);
  if (!st) {
    char from[256], to[256];
    x->reshard_describe(x->merge_from(mg), from, sizeof from);
    x->reshard_describe(&plan, to, sizeof to);
    if (a.json) {
      cJSON *root = cJSON_CreateObject(), *f = NULL, *t = NULL;
      bool ok = root && px_json_add_num(root, "step", (double)x->merge_step(mg)) &&
                px_json_add_num(root, "adapters_merged", (double)x->merge_count(mg)) &&
                cJSON_AddStringToObject(root, "base", x->merge_base(mg)) &&
                (f = cJSON_AddObjectToObject(root, "adapters")) && cJSON_AddStringToObject(f, "dir", a.adapters_dir) &&
                cJSON_AddStringToObject(f, "plan", from) &&
                (t = cJSON_AddObjectToObject(root, "to")) && cJSON_AddStringToObject(t, "dir", a.to_dir) &&
                cJSON_AddStringToObject(t, "plan", to) && px_json_add_num(t, "world", (double)plan.grid.world) &&
                px_json_add_num(t, "bytes", (double)bytes);
      if (!ok) cJSON_Delete(root), root = NULL;
      st = px_json_print_free(root, &err);
    } else {
      printf("%lld adapters of step %lld merged into %s\n", (long long)x->merge_count(mg),
             (long long)x->merge_step(mg), x->merge_base(mg));
      printf("  adapters %s: %s\n", a.adapters_dir, from);
      printf("  to       %s: %s, %.1f MiB\n", a.to_dir, to, (double)bytes / (1 << 20));
    }
  }
  x->merge_free(mg);
  x->ckpt_lock_release(&lock);
  if (have_plan) px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : 0;
}
