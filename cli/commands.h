/* The parallax subcommands, one file each; each returns the exit code. */
#ifndef PX_CLI_COMMANDS_H
#define PX_CLI_COMMANDS_H

#include <stddef.h>

#include "cli/args.h"

/* The flag groups each command takes (cli/args.h): read by the command's
 * parser and by the flag reference of `parallax help --markdown`. */
#define PX_GROUPS_PRESETS 0 /* models, topologies: --json, --help */
#define PX_GROUPS_MODEL PX_OPT_MODEL
#define PX_GROUPS_TOPOLOGY (PX_OPT_CLUSTER | PX_OPT_TOPO)
#define PX_GROUPS_PLAN (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_GRAPH)
#define PX_GROUPS_SIM (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_SIM)
#define PX_GROUPS_SWEEP (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_SWEEP)
#define PX_GROUPS_RUN (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_RUN)
#define PX_GROUPS_COMPARE (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_COMPARE)
#define PX_GROUPS_RESHARD (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_RESHARD)
#define PX_GROUPS_MERGE (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_MERGE)
#define PX_GROUPS_LAUNCH PX_OPT_LAUNCH /* and the run's, PX_GROUPS_RUN, after its `--` */
#define PX_GROUPS_CALIBRATE (PX_OPT_CLUSTER | PX_OPT_CALIB | PX_OPT_MODEL | PX_OPT_PLAN) /* a plan: --backend cuda's shapes */
#define PX_GROUPS_PLOT PX_OPT_SWEEP
#define PX_GROUPS_EXPORT (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_EXPORT)

/* A command of cli/main.c's table: what `parallax --help` lists and the
 * docs' command table and flag reference are generated from. */
typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  int groups;      /* the flag groups it takes (PX_GROUPS_*) */
  int after_dash;  /* the groups it takes after `--` (launch: the run's), else 0 */
  const char *doc; /* the page of docs/ that explains it */
  const char *summary;
} px_command;

int px_cmd_models(int argc, char **argv);
int px_cmd_topologies(int argc, char **argv);
int px_cmd_model(int argc, char **argv);
int px_cmd_topology(int argc, char **argv);
int px_cmd_plan(int argc, char **argv);
int px_cmd_sim(int argc, char **argv);
int px_cmd_sweep(int argc, char **argv);
int px_cmd_run(int argc, char **argv);
int px_cmd_reshard(int argc, char **argv);
int px_cmd_merge(int argc, char **argv);
int px_cmd_launch(int argc, char **argv);
int px_cmd_calibrate(int argc, char **argv);
int px_cmd_compare(int argc, char **argv);
int px_cmd_plot(int argc, char **argv);
int px_cmd_export(int argc, char **argv);

/* `parallax help --markdown`: the generated parts of the docs (README.md's
 * command table, docs/flags.md, the preset tables of
 * docs/models-and-clusters.md), each between its marker lines, on stdout
 * (scripts/docs.sh puts them in place). */
int px_cli_docs(const px_command *cmds, size_t n);

#endif
