/* The compiled plan: the rank grid, the layers of each stage, the op-graph
 * templates and one program per pipeline stage, and the memory plan. Both
 * the simulator and the executor read only this. */
#ifndef PX_PLAN_PLAN_H
#define PX_PLAN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/graph.h"
#include "plan/grid.h"
#include "plan/model.h"
#include "plan/parallel.h"

/* Bytes per category on one GPU of a stage. */
typedef enum {
  PX_MEM_PARAMS,
  PX_MEM_GRADS,
  PX_MEM_OPTIMIZER,
  PX_MEM_ACTIVATIONS,
  PX_MEM_BUFFERS,
  PX_MEM_WORKSPACE,
  PX_MEM_COUNT
} px_mem_cat;

extern const char *const px_mem_cat_names[PX_MEM_COUNT];

typedef struct {
  uint64_t peak_bytes;          /* at the worst moment of a step */
  uint64_t at_peak[PX_MEM_COUNT]; /* the breakdown at that moment (sums to peak_bytes) */
  uint64_t static_bytes;        /* params + grads + optimizer */
  uint64_t activations_peak_bytes; /* largest activation footprint over the step */
  int32_t peak_inst;            /* program instance where the peak occurs */
  int32_t peak_mbs_in_flight;   /* micro-batches with live activations at the peak */
  uint64_t host_bytes;          /* offload: this GPU's states in host memory */
  uint64_t nvme_bytes;          /* ... and on NVMe */
} px_memplan;

/* Per-step totals for one rank of a stage. */
typedef struct {
  double model_flops;   /* forward + backward (Megatron's model FLOPs) */
  double hw_flops;      /* + recomputation */
  double wire_bytes[PX_GROUP_COUNT]; /* bytes sent per group kind */
} px_stage_totals;

/* Bytes sent over data-parallel groups: the whole DP group's, and with hybrid
 * sharding the shard and replica groups' (the figure reported as "dp"). */
double px_totals_dp_wire_bytes(const px_stage_totals *t);

typedef struct {
  px_model model;
  px_cluster cluster;
  px_parallel par;
  px_grid grid;
  int64_t vocab_padded;   /* vocab rounded up so tp divides it (Megatron: a multiple of 128 x tp) */
  int64_t seq;            /* sequence length */
  int64_t seq_cp;         /* a rank's tokens of each sequence: seq / cp (px_cp_position says which) */
  int64_t seq_local;      /* seq_cp / tp with SP, else seq_cp */
  int64_t microbatches;   /* per DP rank per step */
  int64_t vstages;        /* pp x vpp model chunks */
  int64_t *vstage_first;  /* (vstages) first layer of each chunk */
  int64_t *vstage_layers; /* (vstages) layers in each chunk */
  px_dtype act_dtype, param_dtype, grad_dtype;
  uint64_t optimizer_bytes_per_param;
  px_slot *slots;
  int32_t nslots, slots_cap;
  bool slots_full;        /* the compiler could not grow the slot table (compile fails) */
  px_block blocks[PX_BLOCK_KIND_COUNT];
  px_program *programs;   /* (pp) */
  px_memplan *mem;        /* (pp) */
  int64_t stages_done;    /* stages with a program and memory plan: pp, fewer when px_plan_compile_fit stopped */
  px_stage_totals *totals; /* (pp) */
  uint64_t params_total;  /* the model's parameters (unpadded) */
  double model_flops_per_step; /* all ranks together */
  double hw_flops_per_step;
  bool fits;              /* every stage's peak + reserved <= HBM, and offloaded states fit each node */
  uint64_t host_node_bytes; /* offload: the most host memory one node's GPUs take */
  uint64_t nvme_node_bytes; /* ... and NVMe */
} px_plan;

/* Offloaded states on the host, bytes an element of the optimizer's shard:
 * the fp32 gradient accumulator, and the fp32 weights with Adam's two
 * moments (DeepSpeed's 4 + 12 = 16; 18 with the 16-bit parameters too). */
#define PX_HOST_GRAD_BYTES 4
#define PX_HOST_OPT_BYTES 12
_Static_assert(PX_HOST_GRAD_BYTES == 4 && PX_HOST_OPT_BYTES == 3 * 4, "the executor's host arena: fp32 arrays");

/* Where a model state lives: on the GPU, in host memory, on NVMe. */
typedef enum { PX_PLACE_GPU, PX_PLACE_HOST, PX_PLACE_NVME, PX_PLACE_COUNT } px_place;

/* A rank's model states: how many elements of each it has and, per place,
 * the bytes of each (params, grads, optimizer: PX_MEM_PARAMS..OPTIMIZER).
 * The one account the memory plan, the executor (what it allocates where)
 * and the checkpoint snapshot all read. */
typedef struct {
  uint64_t params_elems;  /* on the GPU, param dtype: flat, or the shard (ZeRO-3); 0 when offloaded */
  uint64_t grads_elems;   /* on the GPU, grad dtype: flat, or the shard (ZeRO-2/3); 0 when offloaded */
  uint64_t opt_elems;     /* the optimizer's elements: flat, or the shard (ZeRO >= 1) */
  uint64_t bytes[PX_PLACE_COUNT][PX_MEM_ACTIVATIONS];
  uint64_t fp8_copy_bytes; /* of bytes[GPU][PARAMS]: the cached fp8 copies, remade from the parameters
                              every step, so not a state a checkpoint keeps */
} px_states;
void px_plan_states(const px_plan *plan, int64_t stage, px_states *out);
/* The same for other choices of the plan's parallel settings (e.g. another offload). */
void px_plan_states_for(const px_plan *plan, const px_parallel *par, int64_t stage, px_states *out);
/* Precision fp8: the parameters of a stage (one rank's) whose GEMMs read an
 * fp8 copy (the transformer layers' linear weights and experts; not the
 * embedding, head, norms, biases, router or MLA's up-projections). Without
 * ZeRO-3 each rank keeps the copies, row-wise and transposed (2 bytes an
 * element, in the params' memory), made once a step after the optimizer, as
 * Transformer Engine caches them from the first micro-batch; ZeRO-3 casts
 * each gathered weight where it is used. */
uint64_t px_plan_fp8_weight_elems(const px_plan *p, int64_t stage);
/* Bytes of a place, over the three states. */
uint64_t px_states_bytes(const px_states *s, px_place place);

/* Validates and compiles. On failure the plan is left empty (safe to free). */
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
void px_plan_free(px_plan *plan);

/* The stage a global layer index lives on, and its chunk; -1 when out of range. */
int64_t px_plan_layer_stage(const px_plan *plan, int64_t layer, int64_t *chunk);

/* Checks that every send has one matching receive and that running every
 * stage's program with blocking, rendezvous sends and receives (each p2p
 * batch posted together, as batch_isend_irecv) finishes. */
px_status px_plan_check_p2p(const px_plan *plan, px_err *err);

/* Analytic pipeline bubble as a share of the pipeline's time:
 * (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m + p-1) interleaved; for the
 * zero-bubble schedules px_zb_idle with a layer's F, B and W times in
 * proportion to their FLOPs. */
double px_plan_bubble_analytic(const px_plan *plan);

/* A stage's idle time in a zero-bubble step of m micro-batches over p
 * stages whose F, B and W take f, b and w, with free communication and a
 * synchronised optimizer step: ZB-H1 (h2 false) or ZB-H2. */
double px_zb_idle(int64_t p, int64_t m, double f, double b, double w, bool h2);

/* Activation bytes one layer keeps from its forward to its backward, per
 * micro-batch on one GPU (what Korthikanti et al. count). */
uint64_t px_plan_layer_activation_bytes(const px_plan *p);
/* Mixture of experts: the experts one EP rank holds (experts / ep); 0 for a dense model. */
int64_t px_plan_local_experts(const px_plan *p);
/* Mixture of experts: token rows one rank's local experts take per MoE
 * layer and micro-batch, the busiest rank's: each rank routes its sequence
 * shard's A = mbs x seq_local x top-k rows (Megatron-Core's dispatchers);
 * the EP all-to-all brings r of them: with a capacity factor cf every
 * expert takes at most ceil(cf x A x ep / experts), dropless the busiest
 * rank --moe-imbalance x A, never more than every token of the ep ranks on
 * as many of its experts as top-k allows; the ETP all-gather makes that
 * etp x r. 0 for a dense model. */
int64_t px_plan_expert_rows(const px_plan *p);
/* Group-limited routing (DeepSeek-V3's node-limited routing): the most
 * nodes one token's expert copies reach, min(EP nodes, groups_per_token x
 * the nodes one group's experts span); 0 without groups. A dispatcher that
 * sends a token once to each node and fans it out there (DeepEP) moves
 * min(k, that) copies of it across nodes instead of k. */
int64_t px_plan_expert_nodes(const px_plan *p);

/* Elements of a unit one DP rank owns (its shard group's share with ZeRO). */
/* Ranks unit u's states are sharded over (and its gradients reduced over):
 * dp x cp or the shard group; a MoE layer's experts, dp x cp / ep. */
int64_t px_plan_unit_ranks(const px_plan *p, const px_unit *u);
uint64_t px_plan_unit_shard(const px_plan *p, const px_unit *u);

/* What the executor reserves on a GPU whose predicted peak is `peak` bytes:
 * the peak plus headroom for per-tensor alignment and fragmentation (1/64 of
 * it and 16 MiB; a plan fits only when this and the runtime's reserve do). */
#define PX_RESERVE_SHARE 64 /* headroom: 1/64 of the peak ... */
#define PX_RESERVE_MIB 16   /* ... and 16 MiB */
uint64_t px_plan_reserve_bytes(uint64_t peak);

/* The stage with the largest peak (the first of equals). */
int64_t px_plan_peak_stage(const px_plan *plan);

/* Whether a stage fits on its GPU: the one rule every printer reads
 * (px_plan_reserve_bytes of its peak + the runtime's reserve <= HBM);
 * plan->fits is this over every stage. */
bool px_plan_stage_fits(const px_plan *plan, int64_t stage);
/* Whether the offloaded states of the fullest node fit its host memory and NVMe. */
bool px_plan_host_fits(const px_plan *plan);

/* The ops of a stage's program in the order they run (and are profiled):
 * instance by instance, each block's ops in order.
 *   px_op_iter it = px_op_iter_begin(plan, stage);
 *   for (const px_op *op; (op = px_op_next(&it));) ... it.id, it.in, it.block ... */
typedef struct {
  const px_plan *plan;
  const px_program *prog;
  int32_t inst, k;        /* the next op: instance and op within its block */
  int64_t id;             /* index of the op px_op_next returned last, counting from 0 */
  const px_inst *in;      /* its instance */
  const px_block *block;  /* its block */
} px_op_iter;

px_op_iter px_op_iter_begin(const px_plan *plan, int64_t stage);
const px_op *px_op_next(px_op_iter *it); /* NULL after the last */

/* The ops an instance runs (as many as its block has): the stage's own sized
 * copies for unit syncs, the tied embedding's sync and the optimizer, else
 * the block's. */
const px_op *px_inst_ops(const px_plan *plan, const px_program *prog, const px_inst *in);

/* Whether the plan's overlap runs op i of a block's ops (nops of them) beside
 * the block's compute, up to the first op that uses its tensors (op->dep),
 * rather than in line. With PX_OVERLAP_TP, every collective of a layer's own
 * groups (TP, CP, EP, expert TP). With PX_OVERLAP_TP_BWD, as Megatron-Core's
 * LinearWithGradAccumulationAndAsyncCommunication.backward runs a column-
 * parallel linear (megatron/core/tensor_parallel/layers.py): its input
 * gradient's TP all-reduce, or reduce-scatter with SP, issued after the
 * data-gradient GEMM and beside the weight-gradient GEMM that follows it;
 * with SP, the all-gather of its saved input, beside the data-gradient GEMM,
 * for the weight gradient. */
bool px_plan_op_overlapped(const px_plan *plan, const px_op *ops, int32_t nops, int32_t i);

/* Ops in a stage's program. */
int64_t px_program_nops(const px_plan *plan, int64_t stage);

/* Slot lookup by name (-1 when absent). */
int px_plan_slot(const px_plan *plan, const char *name);

#endif
