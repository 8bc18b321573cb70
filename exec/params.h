/* Where each local parameter element lives in the model's global tensors:
 * the canonical layout (layer by layer, Q/K/V/O, MLP (or router, experts, shared experts), norms; embedding,
 * positions, final norm, head) that every plan shares, and each rank's shard
 * of it: which elements of a unit it owns, and where its model states keep
 * them. Used to initialise shards identically whatever the parallelism, to
 * gather gradients for comparison across plans, and to re-split checkpoints
 * for another plan. */
#ifndef PX_EXEC_PARAMS_H
#define PX_EXEC_PARAMS_H

#include <stdint.h>

#include "core/status.h"
#include "exec/amax.h"
#include "plan/plan.h"

/* NORMAL: N(0, std^2); UNIFORM: U(-std, std) (std holds the bound) */
typedef enum { PX_INIT_NORMAL, PX_INIT_ONES, PX_INIT_ZEROS, PX_INIT_UNIFORM } px_init_kind;

/* Local rows [row0, row0 + rows) of a parameter go to global tensor
 * `tensor` starting at its row grow0. */
typedef struct {
  int64_t row0, rows, tensor, grow0;
} px_param_section;

/* How one local parameter slot maps to global tensors. */
typedef struct {
  int16_t slot;
  int32_t group;        /* layer, -1 embedding, L head */
  /* row sections of the local matrix: local rows [row0, row0 + rows) go to
   * global tensor `tensor` starting at global row grow0 */
  px_param_section sec[3];
  int nsec;
  int64_t col0;         /* global column of local column 0 (column-sharded tensors) */
  /* experts: the sections describe one local expert's rows (expert_rows of them); local expert x is global
   * expert expert0 + x, whose rows in each global tensor start expert_grows x (expert0 + x) further */
  int64_t expert_rows, expert0, expert_grows;
  bool replicated;      /* identical on every TP rank */
  bool tied_copy;       /* the last stage's copy of a tied embedding */
} px_param_map;

typedef struct {
  char name[40];
  int64_t rows, cols;
  uint64_t offset;      /* into the canonical flat vector */
  px_init_kind init;
  double std;
} px_global_tensor;

typedef struct {
  px_global_tensor *t;
  int64_t n;
  int64_t model_n;      /* the model's tensors, t[0 .. model_n); fine-tuning's adapters after them */
  uint64_t total;       /* = the model's parameter count */
} px_global_params;

/* The canonical layout of m's tensors: each layer's ("layerN.ln1.w" ...), the mtp MTP modules' trained beside
 * it (their layers' as a layer's, "mtp0.ln1.w" ..., then "mtp0.enorm.w", "hnorm.w", "eh_proj.w",
 * "final_norm.w"), then the embedding, positions, final norm and head. */
px_status px_global_params_build(const px_model *m, int64_t mtp, px_global_params *g, px_err *err);
/* Fine-tuning with adapters (px_parallel_lora): appends each layer's
 * adapters, "layerN.qkv_w.A3", "layerN.qkv_w.B3" ... (A (r, in), B (out, r)
 * of the whole model, in px_lora_linears' order, A then B), after the
 * model's tensors, whose canonical indices stay. A is initialised as HF
 * PEFT's LoRA layers are (nn.Linear's kaiming_uniform_(a = sqrt 5):
 * U(-1/sqrt(in), 1/sqrt(in))), B to zero: a step-0 model is its base. */
px_status px_global_params_add_adapters(const px_plan *plan, px_global_params *g, px_err *err);
/* One adapter of px_global_params_add_adapters: its A (r, in) and B (out, r) as indices of g->t, and the layer's
 * weights (each (rows, in)) that B's rows belong to, one after another: base[0 .. nbase). */
typedef struct {
  int64_t a, b, base[3];
  int nbase;
} px_global_adapter;
/* The plan's adapters in their canonical order, up to cap into out (may be NULL); returns how many there are. */
int64_t px_global_adapters(const px_plan *plan, const px_global_params *g, px_global_adapter *out, int64_t cap);
void px_global_params_free(px_global_params *g);
typedef struct px_param_rank px_param_rank;
/* The mapping of one local parameter (a px_param_ref of rk's stage) on rank rk. */
px_status px_param_map_of(const px_plan *plan, const px_global_params *g, const px_param_ref *ref,
                          const px_param_rank *rk, px_param_map *out, px_err *err);
/* Canonical index of local element (r, c) of a parameter, or -1 for vocabulary padding. */
int64_t px_param_global_index(const px_plan *plan, const px_global_params *g, const px_param_map *pm,
                              const px_param_ref *ref, int64_t r, int64_t c, int64_t *tensor);
/* Deterministic initial value of canonical element `index` of tensor t. */
float px_param_init_value(const px_global_params *g, int64_t tensor, uint64_t index, uint64_t seed);

/* ---- a rank's shard of its stage's parameters ---- */

/* What of a rank's place in the grid its model states' layout depends on. */
struct px_param_rank {
  int64_t stage, tp_rank;
  int64_t wdp_rank;   /* in the DP x CP group: cp_rank + cp x dp_rank (as px_comm_init counts it) */
  /* the MoE layers' fold (px_grid_expert_coords) */
  int64_t etp_rank;   /* which slice of its experts' width it holds */
  int64_t ep_rank;    /* which experts it holds */
  int64_t shard_rank; /* wdp_rank mod the shard group: which ZeRO shard of each dense unit it owns */
  int64_t edp_rank;   /* in its expert-data-parallel group (wdp_rank / ep with etp = tp): which ZeRO shard of each
                         expert unit it owns */
};
void px_param_rank_of(const px_plan *plan, int64_t world_rank, px_param_rank *out);

/* The flat range [lo, hi) of unit u a rank owns (updates): its shard with
 * ZeRO (of a dense unit over the shard group, of an expert unit over the
 * expert-data-parallel group, as Megatron-Core's distributed optimizer
 * shards them), all of it without. */
void px_param_owned_range(const px_plan *plan, const px_unit *u, const px_param_rank *rk, uint64_t *lo, uint64_t *hi);
/* Where an owned flat index of unit u sits in the rank's shard layout (the
 * owned ranges of the stage's units one after another, from the unit's
 * shard_offset; the flat index itself without ZeRO). */
uint64_t px_param_shard_index(const px_plan *plan, const px_unit *u, const px_param_rank *rk, uint64_t flat);

/* The fp8 amax histories (exec/amax.h) a rank of `stage` keeps under plan:
 * with delayed scaling, the keys of every CAST with an output and every fp8
 * GEMM's fp8 weights in its program, ordered by (layer, slot), each once
 * (none otherwise). Up to cap into out (may be NULL); returns how many
 * there are. */
int64_t px_param_amax_keys(const px_plan *plan, int64_t stage, px_amax_key *out, int64_t cap);

/* The model states a rank checkpoints, in this order, those its plan has. */
typedef enum {
  PX_STATE_PARAMS,      /* the model's weights, in the parameter dtype */
  PX_STATE_MASTER,      /* fp32 weights: mixed precision, or offloaded to the host */
  PX_STATE_ADAM_M,      /* Adam's moments, fp32 */
  PX_STATE_ADAM_V,
  PX_STATE_LOSS_SCALER, /* fp16: {scale, clean steps, optimizer steps} */
  PX_STATE_FP8_AMAX,    /* fp8 delayed scaling: the amax histories (exec/amax.h: px_param_amax_keys' order,
                           px_amax_save's form), kept by the backend */
  PX_STATE_COUNT
} px_state_kind;
extern const char *const px_state_names[PX_STATE_COUNT];

/* How a state's elements lie: the stage's flat parameter buffer, every
 * element current (ZeRO-0's parameters) or only the owned ones (ZeRO-1/2's:
 * the others are gathered from their owners when the next step starts), the
 * owned shard layout (px_param_shard_index), or not per parameter. */
typedef enum { PX_VIEW_FLAT, PX_VIEW_FLAT_OWNED, PX_VIEW_OWNED, PX_VIEW_NONE } px_param_view;

typedef struct {
  px_state_kind kind;
  uint64_t count;     /* elements */
  px_dtype dtype;     /* as the executor keeps it (a checkpoint holds fp32) */
  px_param_view view;
  bool host;          /* kept in host memory (offload, the loss scaler, the amax histories) rather than on the device */
} px_param_state;
/* The states of a rank of `stage`, in checkpoint order; returns how many. */
int px_param_states(const px_plan *plan, int64_t stage, px_param_state out[PX_STATE_COUNT]);

/* A run of a state's elements holding consecutive canonical elements:
 * state elements [at, at + n) are canonical [canon, canon + n). */
typedef struct {
  uint64_t at, canon, n;
} px_param_span;
/* The spans of the current elements of a state laid out as `view` on rank
 * rk, in increasing `at`; the elements between them hold no parameter (unit
 * and vocabulary padding) or, in PX_VIEW_FLAT_OWNED, other ranks' parts.
 * *out is malloc'd (the caller frees it). */
px_status px_param_spans(const px_plan *plan, const px_global_params *g, const px_param_rank *rk, px_param_view view,
                         px_param_span **out, uint64_t *n, px_err *err);
/* The same for fine-tuning's frozen base of rank rk (prog->frozen: `at` counts elements of its buffer), in
 * increasing `at`. */
px_status px_param_frozen_spans(const px_plan *plan, const px_global_params *g, const px_param_rank *rk,
                                px_param_span **out, uint64_t *n, px_err *err);

/* Fine-tuning's frozen base of a stage in its storage (prog->frozen_bytes): the frozen weights one after another,
 * a layer's linear weights (px_lora_quantized) in base_precision (nf4: kernels/cpu/nf4.h's px_k_nf4_pack; fp8:
 * E4M3 codes scaled per tensor, amax onto 448, then the fp32 scale), the others in the parameter dtype. The byte
 * offset of each frozen weight into at (nfrozen; may be NULL); refused (internal) where a weight's storage is not
 * the plan's px_lora_frozen_bytes. */
px_status px_param_frozen_layout(const px_plan *plan, int64_t stage, uint64_t *at, px_err *err);
/* values (prog->frozen's elements in fp32) into out (prog->frozen_bytes) as px_param_frozen_layout lays it out:
 * the run's frozen buffer, and what its hash is of (exec/merge.c). sums (may be NULL): the quantised weights'
 * squared quantisation errors (decoded less given) and their squares, each summed over their elements. */
px_status px_param_frozen_encode(const px_plan *plan, int64_t stage, const float *values, char *out, double sums[2],
                                 px_err *err);
/* One quantized frozen weight of n elements (base_precision nf4 or fp8, as px_param_frozen_encode stores it)
 * back into out (n) in fp32: what a PX_OPF_DEQUANT cast writes. */
void px_param_frozen_decode(int base_precision, const void *storage, uint64_t n, float *out);

#endif
