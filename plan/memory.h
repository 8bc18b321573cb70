/* The memory plan (plan/memory.c): a rank's model states and where they
 * live, whether a stage fits its GPU, and the walk of each stage's program
 * that finds its peak. */
#ifndef PX_PLAN_MEMORY_H
#define PX_PLAN_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/query.h"

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
  uint64_t frozen_bytes;   /* of bytes[GPU][PARAMS]: fine-tuning's frozen base weights (px_states_add_frozen) */
  uint64_t fp8_copy_bytes; /* of bytes[GPU][PARAMS]: the cached fp8 copies, remade from the parameters
                              every step, so not a state a checkpoint keeps (with fp8_params: the column-wise) */
} px_states;
void px_plan_states(const px_plan *plan, int64_t stage, px_states *out);
/* The same for other choices of the plan's parallel settings (e.g. another offload). */
void px_plan_states_for(const px_plan *plan, const px_parallel *par, int64_t stage, px_states *out);
/* The rule it applies: the states of a rank holding `flat` elements of the
 * flat buffer, `shard` of them its ZeRO shard (and fp8_elems read by fp8
 * GEMMs, fp8_shard of them in its shard: the fp8 weights ZeRO-3 holds with
 * fp8_params), under par's ZeRO stage, offload and precision on GPU g. */
void px_states_of(const px_parallel *par, const px_gpu *g, uint64_t flat, uint64_t shard, uint64_t fp8_elems,
                  uint64_t fp8_shard, px_states *out);
/* Adds frozen base weights (fine-tuning: no gradient, no optimizer state, not sharded by ZeRO) to the GPU's params. */
void px_states_add_frozen(px_states *s, uint64_t frozen_bytes);
/* Precision fp8: the parameters of a stage (one rank's) whose GEMMs read an
 * fp8 copy (the transformer layers' linear weights and experts; not the
 * embedding, head, norms, biases, router or MLA's up-projections, nor the
 * layers kept in the compute dtype, px_parallel_layer_bf16). Without
 * ZeRO-3 each rank keeps the copies (px_parallel_weight_copies: row-wise and
 * transposed, 2 bytes an element, or one on Blackwell; in the params'
 * memory), made once a step after the optimizer, as
 * Transformer Engine caches them from the first micro-batch; ZeRO-3 casts
 * each gathered weight where it is used. */
uint64_t px_plan_fp8_weight_elems(const px_plan *p, int64_t stage);
/* Whether quantized GEMMs read parameter r of the plan (one counted in px_plan_fp8_weight_elems). */
bool px_plan_param_quantized(const px_plan *p, const px_param_ref *r);
/* Primary quantized weights (fp8_params, px_parallel_fp8_primary): those elements (px_plan_fp8_weight_elems) are
 * the parameters themselves, their format's row-wise copy in place of the param dtype's bytes (the copies left:
 * the column-wise one); of a unit, u8[u] of them, and of the rank's shard (ZeRO-3) *shard8 (each unit's u8 over
 * its ranks). u8 may be NULL. */
void px_plan_fp8_unit_elems(const px_plan *p, int64_t stage, uint64_t *u8, uint64_t *shard8);
/* Bytes of a place, over the three states. */
uint64_t px_states_bytes(const px_states *s, px_place place);

/* Activation bytes one layer keeps from its forward to its backward, per
 * micro-batch on one GPU (what Korthikanti et al. count): of a dense layer,
 * and of a layer whose forward is block kind fwd (what activation offload copies). */
uint64_t px_plan_layer_activation_bytes(const px_plan *p);
uint64_t px_plan_kept_bytes(const px_plan *p, px_block_kind fwd);

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

/* What one block does to dynamic memory: net change and the largest
 * excursion inside it, with the breakdown at that moment. */
typedef struct {
  int64_t delta[PX_MEM_COUNT];
  int64_t peak;                  /* max over ops of the running total (relative) */
  int64_t at_peak[PX_MEM_COUNT]; /* relative breakdown at that op */
} px_block_mem;
/* ... of block kind k's template: what the memory plan adds up at each of its instances. */
void px_plan_block_mem(const px_plan *p, px_block_kind k, px_block_mem *out);

/* The memory plan, a stage at a time: begin allocates it and sums up each
 * block (bm), stage walks a stage's program applying lifetimes (its peak,
 * and whether it fits), end adds the nodes' offloaded states once every
 * stage is walked. */
px_status px_compile_memory_begin(px_plan *p, px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err);
px_status px_compile_memory_stage(px_plan *p, int64_t stage, const px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err);
void px_compile_memory_end(px_plan *p);

#endif
