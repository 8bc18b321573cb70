/* Plan search: enumerate every valid plan for a model on a cluster (the
 * dimensions not fixed by the caller), drop those that do not fit in GPU
 * memory, simulate the rest on several threads and rank them; time to
 * train, cost and a failure model (optimal checkpoint interval, goodput). */
#ifndef PX_SIM_SWEEP_H
#define PX_SIM_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"
#include "sim/sim.h"

/* What a sweep ranks by: tokens/s, days to train, cost (GPU-hours and energy), peak memory, or the site's energy
 * to train (a token's without training tokens). */
typedef enum { PX_OBJ_THROUGHPUT, PX_OBJ_TIME, PX_OBJ_COST, PX_OBJ_MEMORY, PX_OBJ_ENERGY, PX_OBJ_COUNT } px_objective;
extern const char *const px_objective_names[PX_OBJ_COUNT];

/* Per-GPU mean time between failures from the Llama 3 paper (section 3.3.4):
 * 419 unexpected interruptions in 54 days on 16,384 GPUs. */
#define PX_MTBF_HOURS_DEFAULT (16384.0 * 54.0 * 24.0 / 419.0)
#define PX_RESTART_S_DEFAULT (15.0 * 60.0)

typedef struct px_sweep_entry px_sweep_entry;

/* Where a sweep stands, for opts.progress. */
typedef struct {
  int64_t done, total;        /* candidates of this part through the pass that takes them all (bounded or compiled) */
  int64_t simulated;          /* plans simulated so far */
  const px_sweep_entry *best; /* the best simulated so far by the objective, NULL none (valid during the call) */
} px_sweep_progress;

typedef struct {
  px_parallel fixed;     /* set fields fix that dimension; unset ones are swept */
  px_objective objective;
  double tokens;         /* training tokens (0: no time to train) */
  double price_per_gpu_hour;
  double price_per_kwh;  /* USD a kWh of the site's energy (0: no energy cost; needs the cluster's gpu.power_w) */
  double mtbf_hours;     /* per GPU; 0 disables the failure model */
  double restart_s;      /* lost to each failure besides the work since the last checkpoint */
  bool ckpt_async;       /* checkpoints cost their host snapshot, the write going on behind (run --ckpt-async) */
  int threads;           /* 0: one per core */
  int64_t part, parts;   /* evaluate part `part` of `parts` (MPI split): the candidates i with i % parts == part,
                            with keep those whose bound key k (sim/bound.h) has k % parts == part, so that
                            plans sharing block templates are bounded in one part */
  int64_t max_tp;        /* largest TP swept (default: GPUs per node) */
  bool search_modules;   /* also selective recomputation of MLA's up projections and the experts' activation where
                            the model has them (re-planning's fixes; a sweep given --recompute-modules keeps those) */
  bool torchtitan_ac;    /* torchtitan's activation checkpointing (a sweep for torchtitan): its per-op policy
                            (`recompute` op) too, and half the layers as its layer-wise one (every 2nd) rather
                            than Megatron's block method (the first half of each chunk) */
  bool front;            /* with keep: the report's plots exact too: every plan is compiled (fit and peak exact)
                            and, beside the first keep, the best of each tp x pp (the heatmap) and every plan
                            that can be on the memory/throughput Pareto front is simulated; the other plans
                            that fit are pruned, shown by their bound (entry.bounded) */
  int64_t keep;          /* > 0: only the first keep of the ranking (and the refinement's 8) must be exact,
                            so a plan whose score's lower bound keeps it out of them is pruned (what the
                            ranking prints is the same): before it is compiled by its bounds (sim/bound.h:
                            a memory floor that cannot fit drops it, a score floor past the keep-th best
                            prunes it, fitting or not), once compiled by the simulator's
                            (px_sim_step_bound_s); and past the first keep entries the comm-free twin is not
                            run (comm_exposed_s, step_time_comm_free_s 0); 0: every plan is compiled and
                            every one that fits simulated whole */
  /* called as candidates go through the sweep's passes (each counted once, in the pass that takes them all)
   * and plans are simulated, from the sweep's threads one at a time */
  void (*progress)(void *ctx, const px_sweep_progress *p);
  void *progress_ctx;
  /* When set, only plans admit() accepts are kept (a framework's rule, sweep --runnable-by): the others,
   * offloaded variants included, are counted in `excluded`; admit_name says whose rule in outputs */
  bool (*admit)(const px_parallel *p, const px_model *m, void *ctx);
  void *admit_ctx;
  const char *admit_name;
} px_sweep_opts;

typedef struct {
  double days;            /* wall-clock days including failures and checkpoints */
  double gpu_hours;
  double cost_usd;        /* the GPU-hours at price_per_gpu_hour */
  double energy_mwh;      /* the site's energy over the wall-clock time at the step's draw (sim/power.h) */
  double energy_cost_usd; /* ... at price_per_kwh */
  double goodput;         /* share of wall-clock time that trains */
  double checkpoint_bytes;
  double checkpoint_write_s;
  double checkpoint_interval_s; /* Young/Daly optimum */
  double checkpoint_snapshot_bytes; /* async: the largest GPU's states copied to host memory */
  double checkpoint_snapshot_s;     /* ... over its host link (HBM bandwidth when the cluster gives none) */
  double checkpoint_blocked_s;      /* what training stops for at each checkpoint: the write, or async the snapshot */
  double cluster_mtbf_s;
} px_train_time;

struct px_sweep_entry {
  int64_t index;          /* enumeration order (deterministic tie-break) */
  px_parallel par;
  px_sim_result sim;      /* what `parallax sim` reports for the plan (no per-stage detail: stages NULL) */
  uint64_t peak_bytes;    /* the largest stage */
  uint64_t at_peak[PX_MEM_COUNT];
  bool peak_partial;      /* dropped by a pruned sweep (opts.keep) at its first stage found not to fit, or by
                             its memory floor before a compile: the peak is that stage's, or the floor;
                             px_sweep_complete makes the printed ones whole */
  bool bounded;           /* pruned with opts.front: fits, not simulated; sim and train hold the bound's figures
                             (step_time_s no more than the simulation's, tokens_per_s and mfu no less) */
  bool fit_unknown;       /* pruned by its bound before it was compiled (opts.keep): whether it fits is not
                             known, no offload is chosen and the peak is a floor */
  px_train_time train;
  double score;           /* by the objective: lower is better */
};

typedef struct {
  px_sweep_entry *entries; /* simulated plans that fit, best first */
  int64_t n;
  px_sweep_entry *dropped; /* valid plans that do not fit (peak memory only), enumeration order */
  int64_t ndropped;
  px_sweep_entry *pruned;  /* plans not simulated as their bound keeps them out of the best opts.keep, enumeration
                              order: those that fit (memory only), and those never compiled (fit_unknown) */
  int64_t npruned;
  int64_t unsized;         /* of those, the ones never compiled */
  int64_t enumerated, invalid, dropped_memory, simulated;
  px_parallel first_invalid; /* the first plan refused (invalid > 0): px_parallel_validate says why */
  int64_t excluded;        /* valid plans opts.admit refused */
} px_sweep_result;

void px_sweep_opts_init(px_sweep_opts *o);
px_status px_sweep_run(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                       px_err *err);
/* A split sweep put together (opts.parts > 1, one part per process): r holds
 * one part's result and takes over `entries` and `dropped`, every part's
 * together (freed with r), as its own; the counts of simulated, dropped
 * and pruned plans become theirs (enumeration counts are the same in every part), the
 * dropped are put back in enumeration order and the entries ranked. */
void px_sweep_merge(px_sweep_result *r, px_sweep_entry *entries, int64_t n, px_sweep_entry *dropped, int64_t ndropped,
                    px_sweep_entry *pruned, int64_t npruned, px_objective obj);
/* Refines the leaders' ZeRO-3 prefetch; then, for a pruned sweep (opts.keep),
 * simulates the pruned plans the best plan's ZeRO and precision alternatives
 * (below) name, so that they are those of the sweep that prunes nothing
 * (compiling first, offload chosen, those never compiled), compiles whole
 * the dropped ones they name (their peaks), with opts.front simulates what
 * the heatmap's cells and the Pareto front still need, and runs the
 * comm-free twins of the first keep. px_sweep_run does it for one process; a
 * split sweep calls it once its parts are merged. */
px_status px_sweep_complete(const px_model *m, const px_cluster *c, const px_sweep_opts *o, px_sweep_result *r,
                            px_err *err);
/* Sorts entries by the objective (ties: enumeration order). */
void px_sweep_rank(px_sweep_entry *e, int64_t n, px_objective obj);
void px_sweep_result_free(px_sweep_result *r);

/* Why a plan's ZeRO stage and mode: the plans of the sweep that split the
 * model as `of` does (tp, pp, dp, SP, micro-batch, schedule, recompute) with
 * another ZeRO stage or mode, simulated ones first (fits) then dropped ones.
 * Fills at most cap; returns how many. */
typedef struct {
  const px_sweep_entry *e;
  bool fits;
} px_sweep_alt;
int px_sweep_zero_alternatives(const px_sweep_result *r, const px_sweep_entry *of, px_sweep_alt *out, int cap);
/* The plan `of` in the other precision the sweep tried (bf16 or fp8: the
 * same split, ZeRO and offload), ranked or dropped; false when none was. */
bool px_sweep_precision_alternative(const px_sweep_result *r, const px_sweep_entry *of, px_sweep_alt *out);

/* Time to train `tokens` at `tokens_per_s` on the plan's cluster, with checkpoints
 * and failures (mtbf_hours <= 0: none). Checkpoints stop training for their
 * write to storage, or with ckpt_async for the snapshot to host memory only
 * (interval at least one write; a failure also loses the write's duration). */
void px_train_time_of(const px_plan *plan, double tokens_per_s, double tokens, double price, double mtbf_hours,
                      double restart_s, bool ckpt_async, px_train_time *out);

/* Time to train o->tokens at sim's rate (px_train_time_of with o's price, failures and checkpoints) and the site's
 * energy for that time at sim's draw (o->price_per_kwh). */
void px_sweep_train_of(const px_plan *plan, const px_sweep_opts *o, const px_sim_result *sim, px_train_time *t);

#endif
