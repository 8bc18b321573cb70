/* The simulator: runs each pipeline stage's program through the event
 * engine, costing compute with the roofline model and communication with
 * the collective model as flows that share link bandwidth. One program per
 * stage is simulated: ranks of a stage are symmetric, so the cost does not
 * grow with TP or DP. */
#ifndef PX_SIM_SIM_H
#define PX_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"
#include "sim/power.h"

/* Test hook: replaces a compute block's duration (seconds; < 0 keeps the model's). */
typedef double (*px_sim_block_cost_fn)(void *ctx, int64_t stage, px_block_kind kind);

typedef struct {
  bool comm_free;          /* every collective and transfer takes no time */
  bool skip_exposed;       /* do not run the twins (comm.exposed_s and straggler_s stay 0) */
  bool skip_straggler;     /* do not run the median-pace twin (straggler_s stays 0) */
  bool no_straggler;       /* every GPU at the median pace: the cluster's gpu.jitter ignored */
  bool serial;             /* each stage runs its program strictly in order, a p2p batch at a
                              time, as the CPU executor does: no overlap between streams */
  bool no_fast;            /* every block as segments, never as one event (the fast path off: its tests) */
  bool record_spans;       /* keep the step's spans in px_sim_result.spans (report/trace.h draws them) */
  px_sim_block_cost_fn block_cost;
  void *block_cost_ctx;
} px_sim_opts;

/* The kinds of communication a step's breakdown names: tensor (and expert
 * tensor) parallel, context parallel, expert parallel (token dispatch),
 * pipeline transfers, data parallel (gradient reductions, ZeRO gathers, the
 * tied embedding's), and offload's copies to and from the host. */
typedef enum { PX_SIM_COMM_TP, PX_SIM_COMM_CP, PX_SIM_COMM_EP, PX_SIM_COMM_PP, PX_SIM_COMM_DP, PX_SIM_COMM_HOST,
               PX_SIM_COMM_COUNT } px_sim_comm;
extern const char *const px_sim_comm_names[PX_SIM_COMM_COUNT];

/* Where a stage's step goes (Calculon's breakdown), from the simulated
 * events of its compute stream, 0 to the stage's end: compute by phase, what
 * the SMs of collectives beside it took from it, the time it waits for
 * another stage (bubble: the part of a pipeline wait that is not the
 * transfer itself), the time it waits for communication by kind
 * (exposed), and its waits for the host to launch kernels (launch).
 * The parts sum to the stage's end. */
typedef struct {
  double forward_s, backward_s, recompute_s, optimizer_s;
  double contention_s;
  double bubble_s;
  double exposed_s[PX_SIM_COMM_COUNT];
  double launch_s; /* the compute stream idle, waiting for the host to launch kernels (sim/host.h) */
} px_sim_breakdown;

typedef struct {
  double busy_s;   /* compute stream busy with forward/backward blocks */
  double end_s;    /* when the stage's last instance finished */
  double tp_s, pp_s, dp_s; /* time in collectives/transfers of each kind */
  double host_s;   /* offload: copies on the GPU's host link (their own stream) */
  double compute_s; /* pure compute (no TP) in forward/backward blocks */
  double contention_s; /* compute blocks' added time: the compute the SMs of collectives beside them took
                          (px_coll_cost.sms) */
  double op_s[PX_OP_COUNT]; /* compute seconds by op kind over the step (uncontended) */
  px_sim_breakdown parts;   /* where the stage's step goes, summing to end_s */
} px_sim_stage;

/* One span of a simulated step: an instance on its stream, or a TP
 * collective of a compute block on the tp stream. */
typedef struct {
  int32_t stage, stream;   /* px_stream */
  uint64_t ts_ns, dur_ns;  /* from the step's start */
  int32_t block;           /* px_block_kind, -1 for a TP collective */
  int32_t mb, layer;       /* -1 where none */
} px_sim_span;

/* Model FLOP/s per GPU against the GPU's peaks, the one place MFU is
 * computed (sim, sweep, report and run read it). MFU's convention
 * (Megatron-Bridge, the PaLM paper): model FLOPs (Megatron's accounting, no
 * recomputation) per second per GPU over the dense bf16 peak whatever the
 * plan's precision, so that a faster plan never shows a lower MFU; fp16's
 * peak, else fp32's, on a GPU without bf16. HFU counts recomputation too.
 * Where the plan's GEMMs run at another peak (fp8's for fp8, fp32's for
 * fp32 on a GPU with bf16), the MFU against that peak too, labelled with it. */
typedef struct {
  double model_tflops_per_gpu;
  double mfu, hfu;        /* over the dense peak of peak_dtype */
  int peak_dtype;         /* px_dtype: bf16 (fp16, fp32 where the GPU has none) */
  double mfu_precision;   /* over the dense peak of precision_dtype; mfu where that peak is peak_dtype's */
  int precision_dtype;    /* px_dtype the plan's GEMMs run in, as far as the GPU has a peak for it (else peak_dtype) */
} px_sim_mfu;

/* The MFU figures of plan at a step time of step_s (0 when step_s <= 0). */
void px_sim_mfu_of(const px_plan *plan, double step_s, px_sim_mfu *out);

typedef struct {
  double step_time_s;
  double tokens_per_s;
  double model_tflops_per_gpu;
  double mfu, hfu;         /* px_sim_mfu's */
  int mfu_peak_dtype;      /* px_sim_mfu.peak_dtype */
  double mfu_precision;    /* px_sim_mfu's */
  int precision_peak_dtype; /* px_sim_mfu.precision_dtype */
  double bubble_fraction; /* compute idle share of the pipeline phase, all stages */
  bool fits;
  double comm_tp_s, comm_pp_s, comm_dp_s; /* max over stages */
  double comm_host_s;     /* offload copies, max over stages */
  double comm_contention_s; /* contention_s, max over stages (part of comm_exposed_s) */
  double comm_exposed_s;  /* step time minus the step time with free communication */
  double step_time_comm_free_s;
  /* The straggler (sim/straggler.h): the ranks that synchronise, the slowest
   * one's compute time over the median GPU's, and the step time it adds (the
   * step minus the step with every GPU at the median pace; 0 when not run). */
  int64_t straggler_ranks;
  double straggler_stretch;
  double straggler_s;
  px_sim_breakdown breakdown; /* where the step goes: the parts of the stage that ends last (summing to the step) */
  int64_t breakdown_stage;
  double compute_share;   /* GPU-time computing over GPU-time, every stage over the whole step: the parts of the
                             breakdowns that compute (forward, backward, recomputation, optimizer, contention) */
  px_power power;         /* the step's power and energy at compute_share (sim/power.h) */
  uint64_t events;        /* events processed (both runs) */
  int64_t nstages;
  px_sim_stage *stages;   /* (pp) */
  px_sim_span *spans;     /* (nspans) as the simulation recorded them; NULL without opts.record_spans */
  int64_t nspans;
} px_sim_result;

px_status px_sim_run(const px_plan *plan, const px_sim_opts *opts, px_sim_result *out, px_err *err);
/* The comm-free twin of a plan px_sim_run simulated with opts.skip_exposed:
 * sets out's step_time_comm_free_s and comm_exposed_s and adds its events,
 * as px_sim_run does without skip_exposed. */
px_status px_sim_exposed(const px_plan *plan, const px_sim_opts *opts, px_sim_result *out, px_err *err);
/* A lower bound on the step_time_s px_sim_run gives the plan (default
 * options), at a fraction of its cost: the longest path through each
 * stage's compute stream (its blocks' compute as the simulator costs them,
 * and the collectives they wait for as each takes alone on its links, in
 * program order) and the pipeline transfers between stages, with the
 * overlapped collectives, transfers, data-parallel traffic and waits free.
 * A sweep skips the plans whose bound cannot make its ranking. *out_s is 0
 * (no bound) when the walk cannot finish. */
px_status px_sim_step_bound_s(const px_plan *plan, double *out_s, px_err *err);
/* The least time of each block kind on its compute stream, as that walk
 * takes it (its compute, and the collectives it waits for each at its time
 * alone on its links; 0 for the kinds not timed so: transfers, syncs, the
 * optimizer): reads only the plan's templates (px_plan_compile_blocks). */
px_status px_sim_block_bounds_ns(const px_plan *plan, uint64_t out_ns[PX_BLOCK_KIND_COUNT], px_err *err);
/* Sets out's rates at its step_time_s (tokens/s, model TFLOP/s per GPU,
 * MFU, HFU) and its power at its compute_share, as px_sim_run does: of a
 * bound's step (compute_share 0), their bounds. */
void px_sim_rates(const px_plan *plan, px_sim_result *out);
/* Tokens a second of the plan at a step time of step_s. */
double px_sim_tokens_per_s(const px_plan *plan, double step_s);
/* ... of a plan with those (resolved) choices. */
double px_sim_tokens_per_s_of(const px_parallel *par, double step_s);
/* Where a group's collectives run (the group holding rank 0), as the simulator costs them. */
px_placement px_sim_group_place(const px_plan *plan, px_group g);
void px_sim_result_free(px_sim_result *r);

#endif
