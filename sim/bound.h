/* Lower bounds on a plan's peak memory and step time before its programs
 * are made: what a sweep rules plans out by before it compiles them.
 *
 * Both come from the block templates (px_plan_compile_blocks), which many
 * plans share: the templates read the model, the split (tp, cp, dp, pp, ep,
 * SP, the micro-batch), ZeRO, offload, precision, recomputation and the
 * overlap, but not the schedule, vpp, the layer split, the ZeRO-3 modes,
 * prefetch or the bucket size, which only the programs read. A cache holds
 * one set of templates per key (the choices with those normalised), and a
 * plan's bounds follow in closed form from its layer split and schedule:
 *
 * - memory: on every stage, the model states of its parameters (the
 *   programs' parameter groups, px_program_group_elems, under the rule
 *   px_states_of applies, without the units' padding); on the first and last
 *   stage also the activations the forwards its schedule runs before its
 *   first backward keep (px_schedule_forwards_first, each entry's blocks'
 *   net allocation as the memory plan adds it up). No stage's peak is less.
 * - step time: on every stage, the forwards of micro-batch 0's first chunk
 *   on the stages before it (its first block waits for them), then every
 *   compute block it runs, at the least time the walk of px_sim_step_bound_s
 *   gives each (px_sim_block_bounds_ns), then (unless the backward is split)
 *   the last micro-batch's backward on the stages before it. That walk,
 *   which the simulation cannot beat, takes at least as long. */
#ifndef PX_SIM_BOUND_H
#define PX_SIM_BOUND_H

#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

typedef struct {
  uint64_t peak_bytes; /* no stage's peak (px_memplan.peak_bytes) is less on the stage ... */
  int64_t stage;       /* ... this one */
  double step_s;       /* px_sim_run's step_time_s is no less */
} px_bound;

typedef struct px_bound_cache px_bound_cache;

px_bound_cache *px_bound_cache_new(const px_model *m, const px_cluster *c, px_err *err);
/* Adds the templates of par's key and its schedule's counts (the first time
 * each is seen): *index is its key's. Not thread-safe. */
px_status px_bound_cache_add(px_bound_cache *bc, const px_parallel *par, int64_t *index, px_err *err);
/* Keys added. */
int64_t px_bound_cache_size(const px_bound_cache *bc);
/* Compiles key `index`'s templates (from the first plan added with it) and
 * times their blocks; threads may make distinct keys at once. */
px_status px_bound_cache_make(px_bound_cache *bc, int64_t index, px_err *err);
/* The bounds of par, added with key `index` (made), with its model states
 * where `states` puts them (par itself, or the same plan with more offload;
 * with pp 1 its offload_act_layers' activations too): thread-safe. */
px_status px_bound_of(const px_bound_cache *bc, int64_t index, const px_parallel *par, const px_parallel *states,
                      px_bound *out, px_err *err);
void px_bound_cache_free(px_bound_cache *bc);

/* The same for one plan (par resolved or not), with its states as `states`
 * (resolved) puts them, or (NULL) its own. */
px_status px_bound_plan(const px_model *m, const px_cluster *c, const px_parallel *par, const px_parallel *states,
                        px_bound *out, px_err *err);

#endif
