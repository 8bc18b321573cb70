/* parallax export: a plan as the launch arguments or config file of the
 * framework that will run it (Megatron-LM, Megatron-Bridge, torchtitan,
 * DeepSpeed), or a refusal naming the choice it cannot express. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "plan/planfile.h"
#include "report/export.h"
#include "report/plan.h"

static const char usage[] =
    "usage: parallax export --to megatron|nemo|torchtitan|deepspeed PLAN-FLAGS   (or -f PLAN.json, as sweep -o writes)\n\n"
    "Writes on stdout what runs the same plan in that framework:\n"
    "  megatron    Megatron-LM's arguments (parallel sizes, schedule and split, batch, distributed optimizer or\n"
    "              Megatron-FSDP, recomputation, precision: fp8, mxfp8, nvfp4, overlap, the model's shape), a bash array\n"
    "  nemo        Megatron-Bridge's (NeMo's) ConfigContainer overrides for run_recipe.py, a bash array; its precision\n"
    "              recipe fixes the quantized weights, bf16 layers and gradient dtype, and other plans are refused\n"
    "  torchtitan  a TOML job config (FSDP2/HSDP, TP, PP schedule and split, CP, EP, float8 or MXFP8, checkpointing)\n"
    "  deepspeed   a JSON config (ZeRO stage, offload, buckets, prefetch, batch, bf16/fp16)\n"
    "A choice of the plan the framework cannot express is refused (exit 2) with the reason and a hint;\n"
    "what it leaves to the model code or the launcher is said in comments (on stderr for JSON).\n"
    "The settings are those of the versions in docs/export.md; sweep --runnable-by FW keeps to plans FW runs.\n\n";

/* The command that runs what export writes, in the launching program's own flags (torchrun's, run_recipe.py's):
 * the comment that heads the file; DeepSpeed's JSON has no comments. Written into buf. */
static const char *launch_line(px_framework fw, char *buf, size_t cap) {
  const char *arr = px_export_array(fw);
  switch (fw) {
    case PX_FW_MEGATRON:
      snprintf(buf, cap, "torchrun --nproc-per-node <GPUs a node> --nnodes <nodes> ... pretrain_gpt.py \"${%s[@]}\" "
               "<data, tokenizer, optimizer, checkpoints>", arr);
      return buf;
    case PX_FW_NEMO:
      snprintf(buf, cap, "python scripts/training/run_recipe.py --recipe <your model's pretrain recipe> \"${%s[@]}\"",
               arr);
      return buf;
    case PX_FW_TORCHTITAN:
      return "torchrun --nproc-per-node <GPUs a node> --nnodes <nodes> -m torchtitan.train --job.config_file THIS.toml";
    default: return NULL;
  }
}

int px_cmd_export(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_GROUPS_EXPORT;
  int code = px_cli_start(&a, "parallax export", groups, groups, usage, argc, argv);
  if (code >= 0) return code;
  if (a.framework < 0)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax export: --to is required (megatron|nemo|torchtitan|deepspeed)"),
                       &err);
  if (a.json)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax export: --json: export writes the framework's own format"),
                       &err);
  px_status st;
  px_model m;
  px_cluster c;
  if ((st = px_args_load(&a, &m, &c, &err))) return px_cli_fail(st, &err);
  px_plan plan; /* the plan must compile (and fit or not, as `plan` says) before it is exported */
  if ((st = px_plan_compile(&plan, &m, &c, &a.par, &err))) return px_cli_fail(st, &err);
  if (!plan.fits)
    fprintf(stderr, "parallax export: warning: this plan does not fit in %s's memory (see parallax plan)\n", c.gpu.name);
  px_plan_free(&plan);
  if (a.save_plan && (st = px_report_plan_file(a.save_plan, &m, &c, &a.par, &err))) return px_cli_fail(st, &err);
  char launch[256];
  st = px_export_write((px_framework)a.framework, &m, &c, &a.par, launch_line((px_framework)a.framework, launch,
                       sizeof launch), stdout, stderr, &err);
  if (st) {
    px_err_prefix(&err, "parallax export --to %s", px_framework_names[a.framework]);
    return px_cli_fail(st, &err);
  }
  return fflush(stdout) ? 1 : 0;
}
