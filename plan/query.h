/* The compiled plan (px_plan: the rank grid, the layers of each stage, the
 * op-graph templates, one program per pipeline stage, the memory plan) and
 * the questions its readers ask of it. The parts of the compiler include
 * this, not plan/plan.h (the compiler's driver, which includes them). */
#ifndef PX_PLAN_QUERY_H
#define PX_PLAN_QUERY_H

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
  int16_t *slot_index;    /* (2 slots_cap) the slots by name: open addressing on px_plan_slot_hash, -1 empty */
  bool slots_full;        /* the compiler could not grow the slot table (compile fails) */
  px_block blocks[PX_BLOCK_KIND_COUNT];
  px_program *programs;   /* (pp) */
  px_memplan *mem;        /* (pp) */
  int64_t stages_done;    /* stages with a program and memory plan: pp, fewer when px_plan_compile_fit stopped */
  px_stage_totals *totals; /* (pp) */
  uint64_t params_total;  /* the model's parameters (unpadded) */
  uint64_t trained_total; /* those trained: params_total, or fine-tuning's adapters (the rest frozen) */
  double model_flops_per_step; /* all ranks together */
  double hw_flops_per_step;
  bool fits;              /* every stage's peak + reserved <= HBM, and offloaded states fit each node */
  uint64_t host_node_bytes; /* offload: the most host memory one node's GPUs take */
  uint64_t nvme_node_bytes; /* ... and NVMe */
} px_plan;

/* The stage a global layer index lives on, and its chunk; -1 when out of range. */
int64_t px_plan_layer_stage(const px_plan *plan, int64_t layer, int64_t *chunk);

/* Whether the last pipeline stage holds a copy of the embedding table, kept equal to the first stage's by the
 * embedding group's all-reduce (PX_ROLE_TIED): tied embeddings, or an MTP module's lookup, with pp > 1. */
bool px_plan_shares_embedding(const px_plan *plan);

/* Analytic pipeline bubble as a share of the pipeline's time:
 * (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m + p-1) interleaved; for the
 * zero-bubble schedules px_zb_idle with a layer's F, B and W times in
 * proportion to their FLOPs. */
double px_plan_bubble_analytic(const px_plan *plan);

/* A stage's idle time in a zero-bubble step of m micro-batches over p
 * stages whose F, B and W take f, b and w, with free communication and a
 * synchronised optimizer step: ZB-H1 (h2 false) or ZB-H2. */
double px_zb_idle(int64_t p, int64_t m, double f, double b, double w, bool h2);

/* Mixture of experts: the experts one EP rank holds (experts / ep); 0 for a dense model. */
int64_t px_plan_local_experts(const px_plan *p);
/* Mixture of experts: token rows one rank's local experts take per MoE
 * layer and micro-batch, the busiest rank's: each rank routes its sequence
 * shard's A = mbs x seq_local x top-k rows (Megatron-Core's dispatchers);
 * the EP all-to-all brings r of them: with a capacity factor every
 * expert takes at most ep x px_moe_capacity(A) (each rank's own drop: a
 * token once), dropless the busiest
 * rank --moe-imbalance x A, never more than every token of the ep ranks on
 * as many of its experts as top-k allows; the ETP all-gather makes that
 * etp x r. 0 for a dense model. */
int64_t px_plan_expert_rows(const px_plan *p);
/* Mixture of experts: the token rows one rank's expert buffers hold (the
 * routed rows' slots and the ops that fill them): px_plan_expert_rows, or
 * with moe_buffers worst and no capacity factor every routing a dropless
 * router can make, all ep ranks' tokens on min(top-k, local experts) of
 * its experts (x etp), so no router overflows them. 0 for a dense model. */
int64_t px_plan_expert_buffer_rows(const px_plan *p);
/* Mixture of experts: the distinct EP ranks (*ranks) and nodes (*nodes)
 * one token's top-k copies reach on average, what DeepEP's kernels send a
 * token to (one copy a rank, one over RDMA a node: PX_MOE_DEEPEP). Routing
 * is uniform over the experts, as a force-balanced router's random logits
 * make it; with group-limited routing (0 < groups_per_token < expert_groups)
 * the token's groups are those whose best experts score highest, so each
 * chosen group takes its best expert and the other k - groups_per_token are
 * uniform over the rest of the chosen groups' experts. Groups and the ranks'
 * experts are laid in expert order (a rank's experts in one group, or whole
 * groups). 0 for a dense model. */
void px_plan_ep_copies(const px_plan *p, double *ranks, double *nodes);

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

/* How Transformer Engine's userbuffers (Megatron-LM's --tp-comm-overlap: PX_OVERLAP_TP) run a layer's
 * sequence-parallel TP collective beside the GEMM next to it, by TE's default methods (initialize_ub,
 * transformer_engine/pytorch/module/base.py at d0067d0): an all-gather whose next op is the GEMM reading it,
 * "ring_exchange" (qkv_fprop, fc1_fprop; proj_dgrad, fc2_dgrad: the output gradient gathered into the
 * data-gradient GEMM, an fp8 cast of it between), the GEMM in tp chunks of its rows, each while the next shard
 * comes from the neighbour over the copy engines; a forward reduce-scatter of the GEMM before it, "pipeline"
 * (proj_fprop, fc2_fprop), the GEMM in PX_TP_PIPE_RS_SPLITS chunks, each chunk's reduce-scatter, on
 * PX_TP_PIPE_RS_SMS SMs, beside the next chunk. The backward's other TP collectives are tp-bwd's (TE's "bulk");
 * the embedding's and the head's (Megatron-Core's own linear layers) stay whole. */
typedef enum { PX_TP_PIPE_NONE, PX_TP_PIPE_AG, PX_TP_PIPE_RS } px_tp_pipe;
#define PX_TP_PIPE_RS_SPLITS 4 /* "num_splits": 4 for "pipeline" */
#define PX_TP_PIPE_RS_SMS 16   /* "num_sm": 16 for "pipeline" */
px_tp_pipe px_plan_op_tp_pipe(const px_plan *plan, px_block_kind k, const px_op *ops, int32_t nops, int32_t i);
/* The all-gather op i runs ring exchange with (px_plan_op_tp_pipe), -1 none: the GEMM reading it, or an fp8 cast
 * of it before that GEMM (Transformer Engine quantizes a rank's shard before the exchange). */
int32_t px_plan_tp_pipe_gather(const px_plan *plan, px_block_kind k, const px_op *ops, int32_t nops, int32_t i);
/* The chunks a pipelined collective's GEMM runs in: tp for a ring exchange, PX_TP_PIPE_RS_SPLITS for a pipeline. */
int64_t px_plan_tp_pipe_chunks(const px_plan *plan, px_tp_pipe pipe);
/* The bytes pipelined collective j (px_plan_op_tp_pipe) moves: a ring exchange's in its GEMM's operand format (an
 * fp8 cast's between, the rank's shard quantized before the exchange), a reduce-scatter's its own. */
double px_plan_tp_pipe_bytes(const px_plan *plan, const px_op *ops, int32_t nops, int32_t j);

/* Ops in a stage's program. */
int64_t px_program_nops(const px_plan *plan, int64_t stage);

/* Slot lookup by name (-1 when absent). */
int px_plan_slot(const px_plan *plan, const char *name);
/* Where a name starts its probe in slot_index. */
uint32_t px_plan_slot_hash(const char *name);

#endif
