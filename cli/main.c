/* parallax: entry point and subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

#if PX_HAVE_EXEC
#define EXEC_CMD(f) f
#else
/* run, reshard, merge and launch in a build without the executor (cmake -DPX_EXEC=OFF); calibrate says what it can do there. */
static int no_exec(int argc, char **argv) {
  (void)argc;
  px_err err = {0};
  return px_cli_fail(px_err_set(&err, PX_ERR_INPUT,
                                "parallax was built without the executor (PX_EXEC=OFF): %s is not available", argv[0]),
                     &err);
}
#define EXEC_CMD(f) no_exec
#endif

/* The commands, as `parallax --help` lists them; the docs' command table and
 * flag reference come from here too (`parallax help --markdown`). */
static const px_command commands[] = {
    {"calibrate", px_cmd_calibrate, PX_GROUPS_CALIBRATE, 0, "calibration.md",
     "measure this machine (mpirun -np N) or one GPU (--backend cuda), or import measurements, into a cluster file"},
    {"compare", px_cmd_compare, PX_GROUPS_COMPARE, 0, "calibration.md",
     "a run's profile beside the simulator's prediction of the same plan"},
    {"export", px_cmd_export, PX_GROUPS_EXPORT, 0, "export.md",
     "a plan as Megatron-LM arguments, NeMo overrides, a torchtitan TOML or a DeepSpeed JSON"},
    {"launch", EXEC_CMD(px_cmd_launch), PX_GROUPS_LAUNCH, PX_GROUPS_RUN, "checkpoints-and-launch.md",
     "run under supervision: relaunch from the last checkpoint when a rank dies, on fewer ranks if need be"},
    {"merge", EXEC_CMD(px_cmd_merge), PX_GROUPS_MERGE, 0, "finetuning.md",
     "merge LoRA adapters into their base as a full checkpoint: --adapters DIR [--base-ckpt DIR] --to DIR"},
    {"models", px_cmd_models, PX_GROUPS_PRESETS, 0, "models-and-clusters.md", "list model presets with their size"},
    {"topologies", px_cmd_topologies, PX_GROUPS_PRESETS, 0, "models-and-clusters.md",
     "list cluster presets with their key figures"},
    {"model", px_cmd_model, PX_GROUPS_MODEL, 0, "models-and-clusters.md",
     "model show NAME|FILE: parameters, FLOPs per token, per-layer breakdown"},
    {"plan", px_cmd_plan, PX_GROUPS_PLAN, 0, "compiler.md",
     "compile a plan: grid, groups, layers per stage, memory per GPU, FLOPs, bubble"},
    {"plot", px_cmd_plot, PX_GROUPS_PLOT, 0, "sweeps.md", "render the plots of a --plot directory again"},
    {"reshard", EXEC_CMD(px_cmd_reshard), PX_GROUPS_RESHARD, 0, "checkpoints-and-launch.md",
     "re-split a checkpoint for another plan of its model: --from DIR --to DIR [plan flags]"},
    {"run", EXEC_CMD(px_cmd_run), PX_GROUPS_RUN, 0, "executor.md",
     "train a plan for real: mpirun -np N parallax run --model M [plan flags] --steps S"},
    {"sim", px_cmd_sim, PX_GROUPS_SIM, 0, "simulator.md",
     "simulate a step: time, tokens/s, MFU, memory, idle and bubble, communication (--trace)"},
    {"sweep", px_cmd_sweep, PX_GROUPS_SWEEP, 0, "sweeps.md",
     "rank every plan that fits: throughput, time to train, cost, plots, report"},
    {"topology", px_cmd_topology, PX_GROUPS_TOPOLOGY, 0, "models-and-clusters.md",
     "topology show NAME|FILE: a cluster's GPU, fabric and network figures"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out,
          "parallax %s: plan, simulate and run 3D-parallel transformer training\n\n"
          "usage: parallax <command> [options]   (parallax <command> --help for its options)\n\ncommands:\n",
          PX_VERSION);
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nexit codes: 0 ok, 1 runtime failure, 2 bad input or usage, %d the plan does not fit in memory "
          "(plan, sim; sweep: no plan fits)\n", PX_EXIT_NOFIT);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
    printf("parallax %s\n", PX_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "help") && argc == 3 && !strcmp(argv[2], "--markdown")) /* the docs' generated parts */
    return px_cli_docs(commands, NCOMMANDS);
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "parallax: unknown command '%s' (see parallax --help)\n", cmd);
  return 2;
}
