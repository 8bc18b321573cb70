/* Re-planning for fewer ranks (parallax launch, when a relaunch gets fewer
 * slots than its plan's ranks): the planner's best plan for the most ranks
 * in a range that a backend runs, keeping what makes it the same training
 * (px_parallel_keep_training: the global batch, the sequence, the precision, fine-tuning, the MTP modules). */
#ifndef PX_SIM_REPLAN_H
#define PX_SIM_REPLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"
#include "sim/sim.h"
#include "sim/sweep.h"

/* Whether the backend runs plan (compiled for `ranks`): PX_OK yes;
 * PX_ERR_INPUT no, and the next plan of the ranking is tried; any other
 * status ends the search with why as its error. `refused`: the plans of this
 * ranking it refused before this one. */
typedef px_status (*px_replan_runs_fn)(void *ctx, const px_plan *plan, int64_t ranks, int64_t refused, px_err *why);

typedef struct {
  px_parallel fixed;      /* choices kept where a plan for the ranks has them, unset where none (dp is swept) */
  px_parallel train;      /* the training's (resolved): its gbs, seq, precision, fp8 recipe and MoE buffers are always kept */
  int64_t max_ranks, min_ranks; /* tried from the most down */
  px_replan_runs_fn runs; /* NULL: every plan runs */
  void *runs_ctx;
} px_replan_opts;

typedef struct {
  int64_t ranks;
  px_cluster cluster;     /* sized for ranks */
  px_parallel par;        /* the ranking's choices: what a plan file records */
  px_plan plan;           /* compiled from them (px_plan_free) */
  int64_t refused;        /* plans ranked above it that `runs` refused */
  bool relaxed;           /* no plan for the ranks kept `fixed`: only the training's choices are kept */
} px_replan;

/* For each rank count from max_ranks down to min_ranks: the sweep with
 * o->fixed (but dp) and the training's choices fixed, else with the
 * training's alone; the first of its ranking that o->runs takes. PX_OK with
 * *out filled, or PX_ERR_RUNTIME when no rank count has one. */
px_status px_replan_best(const px_model *m, const px_cluster *c, const px_replan_opts *o, px_replan *out, px_err *err);

/* Groups of choices the nearest plans that fit change (px_replan_nearest). */
enum {
  PX_REPLAN_ZERO = 1 << 0,      /* the ZeRO stage and its modes (accumulation, resharding, prefetch, shard group) */
  PX_REPLAN_RECOMPUTE = 1 << 1, /* activation recomputation */
  PX_REPLAN_MBS = 1 << 2,       /* the micro-batch size */
  PX_REPLAN_SPLIT = 1 << 3,     /* tp and pp (dp follows), SP, the schedule and the layer split */
  PX_REPLAN_OFFLOAD = 1 << 4,   /* the optimizer's (and ZeRO-3's parameters') offload, and the activations' */
};
#define PX_REPLAN_GROUPS 5

/* A plan that fits near another. */
typedef struct {
  px_parallel par;     /* the other's choices with the groups `changed` swept */
  int changed;         /* PX_REPLAN_* */
  px_sim_result sim;   /* what the sweep simulated of it (the summary; stages NULL) */
  uint64_t peak_bytes; /* its largest stage's peak */
} px_replan_fit;

/* The plans nearest p (resolved, one that does not fit on c) that fit, from
 * the sweep's own machinery: for each group of choices alone, the sweep's
 * best plan with every other choice as p has it (the global batch, the
 * sequence and the precision too); when no group alone gives one, each pair
 * of groups. The fewest groups that give one, each group's (or pair's) best,
 * fastest first, at most cap in out; *n 0 when no group or pair of groups
 * fits. */
px_status px_replan_nearest(const px_model *m, const px_cluster *c, const px_parallel *p, px_replan_fit *out, int cap,
                            int *n, px_err *err);

/* A sweep in which no plan fits (r->n 0): makes the least peak of its
 * dropped plans exact (a pruned sweep's dropped ones may hold the peak of
 * the first stage found not to fit: those that could be the least are
 * compiled whole), for its report to say how near the nearest came. */
px_status px_replan_least_peak(const px_model *m, const px_cluster *c, px_sweep_result *r, px_err *err);

#endif
