/* Re-planning for fewer ranks (parallax launch, when a relaunch gets fewer
 * slots than its plan's ranks): the planner's best plan for the most ranks
 * in a range that a backend runs, keeping what makes it the same training
 * (the global batch, the sequence, the precision). */
#ifndef PX_SIM_REPLAN_H
#define PX_SIM_REPLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

/* Whether the backend runs plan (compiled for `ranks`): PX_OK yes;
 * PX_ERR_INPUT no, and the next plan of the ranking is tried; any other
 * status ends the search with why as its error. `refused`: the plans of this
 * ranking it refused before this one. */
typedef px_status (*px_replan_runs_fn)(void *ctx, const px_plan *plan, int64_t ranks, int64_t refused, px_err *why);

typedef struct {
  px_parallel fixed;      /* choices kept where a plan for the ranks has them, unset where none (dp is swept) */
  px_parallel train;      /* the training's (resolved): its gbs, seq, precision and fp8 recipe are always kept */
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

#endif
