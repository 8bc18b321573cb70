/* The plan compiler's driver: validates the parallel choices and compiles
 * a plan (the templates, the programs, the memory plan and the per-stage
 * totals). Both the simulator and the executor read only the plan:
 * plan/query.h (what it holds and the questions asked of it) and
 * plan/memory.h (its memory), both included here. */
#ifndef PX_PLAN_PLAN_H
#define PX_PLAN_PLAN_H

#include "core/status.h"
#include "plan/memory.h"
#include "plan/query.h"

/* Resolves the choices par leaves unset (px_parallel_resolve, on a copy:
 * plan->par holds them), validates and compiles. On failure the plan is
 * left empty (safe to free). */
px_status px_plan_compile(px_plan *plan, const px_model *m, const px_cluster *c, const px_parallel *par,
                          px_err *err);
/* Whether a compile may stop at `stage`, which does not fit (px_plan_stage_fits). */
typedef bool (*px_plan_stop_fn)(const px_plan *plan, int64_t stage, void *ctx);
/* px_plan_compile for a search, which asks whether a plan fits and bounds
 * its step (px_sim_step_bound_s) before it simulates a few: no per-stage
 * totals are made (totals, model_flops_per_step and hw_flops_per_step stay
 * 0: simulate a px_plan_compile'd plan), and stages are compiled one at a
 * time (the first, the last, then the others), so that after one that does
 * not fit, stop (may be NULL: never) may end the compile. The plan then
 * does not fit and is partial: stages_done < pp, only those stages have
 * programs and memory plans and sends and receives are unpaired (read fits
 * and mem, then free it). */
px_status px_plan_compile_fit(px_plan *plan, const px_model *m, const px_cluster *c, const px_parallel *par,
                              px_plan_stop_fn stop, void *ctx, px_err *err);
/* Makes a whole px_plan_compile_fit'd plan (stages_done == pp) what
 * px_plan_compile gives: its per-stage totals. */
void px_plan_totals(px_plan *plan);
/* The first part of a compile alone: the choices, the grid, the derived
 * sizes, the slots and the block templates (plan->blocks), without
 * programs or memory plan (stages_done 0): what a bound on every plan
 * sharing those templates reads (sim/bound.h). Free it as a plan. */
px_status px_plan_compile_blocks(px_plan *plan, const px_model *m, const px_cluster *c, const px_parallel *par,
                                 px_err *err);
void px_plan_free(px_plan *plan);

#endif
