/* Shared command-line flags: one table of options (short and long forms),
 * each command accepting the groups it needs, so plan/sim/sweep/run share
 * the parsing of model, cluster and parallel choices. */
#ifndef PX_CLI_ARGS_H
#define PX_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"
#include "plan/plan.h"
#include "sim/sweep.h"

enum {
  PX_OPT_COMMON = 1 << 0,  /* --json, --help */
  PX_OPT_MODEL = 1 << 1,   /* --model, --seq */
  PX_OPT_CLUSTER = 1 << 2, /* --cluster, --gpus, --nodes */
  PX_OPT_PLAN = 1 << 3,    /* --tp ... --plan, --save-plan */
  PX_OPT_GRAPH = 1 << 4,   /* --graph, --dot */
  PX_OPT_SIM = 1 << 5,     /* --trace, --plot */
  PX_OPT_SWEEP = 1 << 6,   /* --top, --objective, --csv, --tokens, --price, --mtbf-hours, ... */
  PX_OPT_RUN = 1 << 7,     /* --steps, --data, --seed, --lr, --ckpt, --resume, --profile, --backend, ... */
  PX_OPT_CALIB = 1 << 8,   /* --quick, --output, --import, --sustain-s (and --backend) */
  PX_OPT_TOPO = 1 << 9,    /* topology show: --sources */
  PX_OPT_RESHARD = 1 << 10, /* reshard: --from, --to, --overwrite */
  PX_OPT_LAUNCH = 1 << 11,  /* launch: --max-restarts, --min-ranks, --np, --hostfile, --mpirun, --log, --backoff-s */
  PX_OPT_EXPORT = 1 << 12,  /* export: --to FRAMEWORK */
  PX_OPT_COMPARE = 1 << 13, /* compare: --profile (run writes it) */
  PX_OPT_MERGE = 1 << 14,   /* merge: --adapters, --base-ckpt, --seed, --to, --overwrite */
};
#define PX_OPT_GROUP_COUNT 15 /* the groups above: bits 0 .. 14 */

#define PX_ARGS_SETS_MAX PX_CLUSTER_OVERRIDES_MAX

typedef struct {
  const char *command; /* for messages: "parallax plan" */
  bool json;
  bool help;
  const char *model;
  const char *cluster;
  int64_t gpus, nodes;
  const char *sets[PX_ARGS_SETS_MAX]; /* --set FIELD=VALUE, in order */
  int nsets;
  double jitter; /* --jitter: the cluster's gpu.jitter, applied after the --set fields; < 0: the file's */
  px_parallel par; /* unset fields stay unset (see px_parallel_unset) */
  const char *plan_file;
  const char *adapter_file; /* --adapter: an HF PEFT adapter_config.json */
  const char *save_plan;
  const char *graph_file;
  const char *dot_file;
  const char *trace_file;
  const char *plot_dir;
  const char *report_dir;
  const char *csv_file;
  int64_t top;
  int objective;       /* px_objective, -1 unset */
  double tokens;       /* 0 unset (--tokens 0 is refused) */
  double price;        /* USD per GPU-hour; 0 unset (--price 0 is refused) */
  double price_per_kwh; /* USD per kWh of the site's energy; 0 unset (--price-per-kwh 0 is refused) */
  double mtbf_hours;   /* < 0 unset, 0 disables */
  double restart_min;  /* < 0 unset */
  int64_t threads;
  int64_t max_tp;
  const char *vary; /* sweep --vary FIELD=V1,V2,... */
  int64_t rank;     /* sweep -o: the plan of this rank (0 unset: the best) */
  int runnable_by;  /* sweep: px_framework whose plans alone are kept, or PX_FW_COUNT + a px_run_backend, -1 unset */
  int framework;    /* export --to: px_framework, -1 unset */
  /* run */
  int64_t steps;     /* 0 unset (--steps 0 is refused: it would train nothing) */
  const char *data_file;
  int64_t seed;      /* -1 unset */
  double lr;         /* < 0 unset; 0 trains nothing (the weights stay as initialised) */
  double loss_scale; /* 0 unset (--loss-scale 0 is refused) */
  const char *ckpt_dir;
  const char *base_ckpt; /* run --finetune lora, merge: the frozen base's checkpoint */
  int64_t ckpt_every; /* 0 unset */
  bool resume;
  bool overwrite;    /* run, reshard, merge: replace the checkpoint --ckpt / --to holds */
  int64_t ckpt_keep; /* 0 unset */
  bool no_prune;     /* sweep: simulate every plan that fits, even for the table alone */
  bool ckpt_async;   /* run: background checkpoint writes; sweep: the goodput model counts the snapshot */
  const char *profile_file;
  const char *backend;
  const char *grads_file;
  bool quick;
  double sustain_s; /* calibrate --backend cuda: 0 unset */
  bool sources; /* topology show --sources */
  bool import; /* calibrate --import: the positional arguments are measurement files */
  const char *output; /* calibrate: the cluster file */
  const char *from_dir, *to_dir; /* reshard: the checkpoint, and where its re-split copy goes (merge: --to too) */
  const char *adapters_dir;      /* merge: the adapters' checkpoint */
  /* launch */
  int64_t max_restarts; /* -1 unset */
  int64_t min_ranks, np; /* 0 unset */
  double backoff_s; /* -1 unset */
  const char *hostfile, *mpirun, *log_file;
  /* Positional arguments after the flags. */
  int npos;
  char **pos;
} px_args;

/* Parses argv (argv[0] is the command name). Flags outside `groups` are
 * refused as unknown. Returns PX_ERR_INPUT with a message on bad usage. */
px_status px_args_parse(px_args *a, const char *command, int groups, int argc, char **argv, px_err *err);
/* Copies argv[0..argc) into out (room for px_args_without_room entries;
 * NULL-terminated) without the options, with their values, whose long name
 * drop() accepts, reading the tokens as px_args_parse does with `groups`
 * (long names, unambiguous prefixes, --name=value, short letters, bundles:
 * a bundle's kept letters are split out, and may outnumber it). Unknown
 * tokens are kept. Returns the count copied. */
int px_args_without(int argc, char **argv, int groups, bool (*drop)(const char *name), char **out);
/* Entries px_args_without may write for argv, the NULL included. */
size_t px_args_without_room(int argc, char **argv);
/* Whether the long flag `name` sets a choice a plan file holds: every flag of the plan group but
 * --save-plan (--plan, and --adapter, whose LoRA fields the plan holds resolved, included). */
bool px_args_plan_choice(const char *name);
/* Prints the flags of the given groups, one per line, for --help. */
void px_args_print_help(int groups);
/* The flag reference of the docs (`parallax help --markdown`): a group's
 * title (one PX_OPT_* bit), and its flags as the rows of a Markdown table
 * (flag, value, what it does) on stdout. */
const char *px_args_group_title(int group);
void px_args_print_markdown(int group);
/* Prints s for a Markdown table cell: | escaped (GFM reads \| inside a code
 * span too), and < > where the cell is text (code: in a code span, where a
 * backslash would show). */
void px_args_md_cell(const char *s, bool code);

/* The cluster's --set fields, then its size (gpus, or --nodes; 0: keep). */
px_status px_args_cluster_finish(const px_args *a, px_cluster *c, int64_t gpus, px_err *err);
/* Loads --model and --cluster (and --plan FILE when given), sizes the cluster
 * from --gpus/--nodes and resolves parallel defaults. Either pointer may be NULL. */
px_status px_args_load(px_args *a, px_model *m, px_cluster *c, px_err *err);
/* The plan the flags give, as every command that compiles one starts:
 * px_args_load, then the plan compiled (freed by the caller when PX_OK). */
px_status px_args_plan(px_args *a, px_model *m, px_cluster *c, px_plan *plan, px_err *err);

/* The time-to-train flags (--tokens, --price, --price-per-kwh,
 * --mtbf-hours, --restart-min, --ckpt-async) into o (px_sweep_opts_init'd),
 * refusing one that means nothing without another, and an energy price on a
 * cluster c without power figures. */
px_status px_args_train(const px_args *a, const px_cluster *c, px_sweep_opts *o, px_err *err);

/* How a command starts: parses argv for `groups`; with --help prints usage
 * and the flags of help_groups; refuses positional arguments (the command
 * takes none). Returns -1 to go on, else the exit code to return. */
int px_cli_start(px_args *a, const char *command, int groups, int help_groups, const char *usage, int argc,
                 char **argv);

/* A library message in the command line's words: the library names the
 * settings it speaks of by their fields, in backquotes (`fp8_recipe`,
 * `ckpt_dir`); each becomes the flag that sets it (--fp8-recipe, --ckpt), a
 * phrase one flag says its flag (`reshard_after_forward` false:
 * --no-reshard-after-forward), a field no flag sets its bare name. The rest
 * is copied as it is. */
void px_cli_words(const char *msg, char *out, size_t cap);

/* How many of the nearest plans that fit `plan` and `sim` name for one that does not. */
#define PX_CLI_NEAREST 3

/* Prints "parallax: <message>" (px_cli_words) on stderr and returns the exit code of st. */
int px_cli_fail(px_status st, const px_err *err);

#endif
