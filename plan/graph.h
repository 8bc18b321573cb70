/* The op graph: what a stage runs, in order, with what each op costs.
 *
 * Two levels, because layers and micro-batches repeat. A *block* is a
 * template: a short list of ops (one layer's forward, one layer's backward,
 * a send, a bucket's reduction ...) over tensor *slots*. A stage's *program*
 * is an ordered list of *instances* of blocks, each binding a micro-batch,
 * a layer and a chunk. A slot operand names its instance by
 * (slot, micro-batch of the instance, layer of the instance + offset).
 * Expanding every instance's ops gives the full op list; the simulator costs
 * each block once and the executor interprets the ops. */
#ifndef PX_PLAN_GRAPH_H
#define PX_PLAN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"

typedef enum {
  PX_STREAM_COMPUTE,
  PX_STREAM_TP,
  PX_STREAM_DP,
  PX_STREAM_PP_SEND,
  PX_STREAM_PP_RECV,
  PX_STREAM_HOST, /* copies between the GPU and host memory (or NVMe behind it), on their own engine */
  PX_STREAM_COUNT
} px_stream;

typedef enum { PX_PHASE_FWD, PX_PHASE_BWD, PX_PHASE_RECOMPUTE, PX_PHASE_OPT, PX_PHASE_COMM, PX_PHASE_COUNT } px_phase;

/* Communication groups of a rank. PREV/NEXT are the neighbouring pipeline
 * stages; EMB joins the first and last stage for tied embeddings; ALL is the
 * whole world (gradient norm). With a ZeRO shard group smaller than dp
 * (hybrid sharding), SHARD is the shard_group consecutive DP ranks a unit's
 * states are sharded over, REPLICA the dp / shard_group ranks holding the
 * same shard (DP ranks shard_group apart). With context parallelism, DP is
 * the DP x CP group (the ranks holding the same weights) and CP the ranks
 * sharing each sequence. */
typedef enum {
  PX_GROUP_NONE,
  PX_GROUP_TP,
  PX_GROUP_DP,
  PX_GROUP_PREV,
  PX_GROUP_NEXT,
  PX_GROUP_EMB,
  PX_GROUP_ALL,
  PX_GROUP_SHARD,
  PX_GROUP_REPLICA,
  PX_GROUP_CP, /* context-parallel ranks: the same tokens' sequence split, tp apart */
  PX_GROUP_EP,  /* expert-parallel ranks: consecutive DP x CP ranks holding different experts */
  PX_GROUP_EDP, /* expert-data-parallel ranks: those holding the same experts (their gradients' group) */
  PX_GROUP_ETP, /* expert-tensor-parallel ranks: consecutive ranks splitting the same experts' GEMMs */
  PX_GROUP_COUNT
} px_group;

/* Each op kind, its name and its family (px_op_family): what it is for
 * the kernels that run it, the cost model and the comparison's rows. */
#define PX_OP_KINDS(X)                                                                                             \
  X(EMBED, "embed", EMBED)                           /* vocab-parallel lookup: (tokens) -> x */                    \
  X(EMBED_BWD, "embed_bwd", EMBED)                                                                                 \
  X(POS, "pos", ELEMENTWISE)                         /* x += learned position rows */                              \
  X(POS_BWD, "pos_bwd", ELEMENTWISE)                                                                               \
  X(NORM, "norm", NORM)                              /* layernorm or rmsnorm, saves stats */                       \
  X(NORM_BWD, "norm_bwd", NORM)                                                                                    \
  X(LINEAR, "linear", GEMM)                          /* y = x W^T (+ b) */                                         \
  X(LINEAR_BWD_DATA, "linear_bwd_data", GEMM)        /* dx += dy W */                                              \
  X(LINEAR_BWD_WEIGHT, "linear_bwd_weight", GEMM)    /* dW += dy^T x, db += sum dy */                              \
  X(ROPE, "rope", ELEMENTWISE)                                                                                     \
  X(ROPE_BWD, "rope_bwd", ELEMENTWISE)                                                                             \
  X(ATTN_SCORES, "attn_scores", ATTENTION)           /* scale Q K^T, batched over heads */                         \
  X(ATTN_SCORES_BWD, "attn_scores_bwd", ATTENTION)                                                                 \
  X(SOFTMAX, "softmax", ATTENTION)                   /* causal softmax */                                          \
  X(SOFTMAX_BWD, "softmax_bwd", ATTENTION)                                                                         \
  X(ATTN_CONTEXT, "attn_context", ATTENTION)         /* P V */                                                     \
  X(ATTN_CONTEXT_BWD, "attn_context_bwd", ATTENTION)                                                               \
  X(FLASH_ATTN, "flash_attn", FLASH)                 /* fused causal attention: q, k, v -> ctx, row log-sum-exp */ \
  X(FLASH_ATTN_BWD, "flash_attn_bwd", FLASH)         /* recomputes the probabilities inside */                     \
  X(DROPOUT, "dropout", ELEMENTWISE)                                                                               \
  X(DROPOUT_BWD, "dropout_bwd", ELEMENTWISE)                                                                       \
  X(ADD, "add", ELEMENTWISE)                         /* residual: y = a + b */                                     \
  X(ACC, "acc", ELEMENTWISE)                         /* gradient accumulate: y += a */                             \
  X(CAST, "cast", ELEMENTWISE)                       /* fp8: y = x quantized (E4M3, E5M2 with PX_OPF_E5M2) */     \
  X(GELU, "gelu", ELEMENTWISE)                                                                                     \
  X(GELU_BWD, "gelu_bwd", ELEMENTWISE)                                                                             \
  X(SWIGLU, "swiglu", ELEMENTWISE)                                                                                 \
  X(SWIGLU_BWD, "swiglu_bwd", ELEMENTWISE)                                                                         \
  X(MOE_ROUTE, "moe_route", ELEMENTWISE)             /* router logits -> top-k experts and their weights */        \
  X(MOE_ROUTE_BWD, "moe_route_bwd", ELEMENTWISE)                                                                   \
  X(MOE_PERMUTE, "moe_permute", ELEMENTWISE)         /* tokens copied to their experts' rows, expert-major */      \
  X(MOE_PERMUTE_BWD, "moe_permute_bwd", ELEMENTWISE) /* rows' gradients summed back into their tokens */            \
  X(MOE_UNPERMUTE, "moe_unpermute", ELEMENTWISE)     /* each token's expert outputs, weighted, summed */           \
  X(MOE_UNPERMUTE_BWD, "moe_unpermute_bwd", ELEMENTWISE)                                                           \
  X(EXPERT_LINEAR, "expert_linear", GEMM)            /* per local expert e: y_e = x_e W_e^T */                      \
  X(EXPERT_LINEAR_BWD_DATA, "expert_linear_bwd_data", GEMM)                                                        \
  X(EXPERT_LINEAR_BWD_WEIGHT, "expert_linear_bwd_weight", GEMM)                                                    \
  X(EXPERT_BIAS, "expert_bias", ELEMENTWISE)         /* per routed row: y += gate x its expert's bias (fc2's) */    \
  X(EXPERT_BIAS_BWD, "expert_bias_bwd", ELEMENTWISE) /* db_e += sum gate dy; dgate += dy . b_e */                   \
  X(LOSS, "loss", LOSS)                              /* vocab-parallel cross-entropy (+ its tp all-reduces) */     \
  X(LOSS_BWD, "loss_bwd", LOSS)                                                                                    \
  X(ALLREDUCE, "allreduce", COLLECTIVE)                                                                            \
  X(ALLGATHER, "allgather", COLLECTIVE)                                                                            \
  X(REDUCE_SCATTER, "reduce_scatter", COLLECTIVE)                                                                  \
  X(ALLTOALL, "alltoall", COLLECTIVE)                /* CP a2a: sequence-split <-> head-split (PX_OPF_TO_HEADS) */ \
  X(SEND, "send", P2P)                                                                                             \
  X(RECV, "recv", P2P)                                                                                             \
  X(GRAD_NORM, "grad_norm", OPTIMIZER)               /* sum of squares over the local shard + all-reduce */        \
  X(ADAMW, "adamw", OPTIMIZER)                                                                                    \
  X(ADAMW_HOST, "adamw_host", OPTIMIZER)             /* offloaded: the host CPU steps the shard */                 \
  X(COPY_D2H, "copy_d2h", COPY)                      /* offload: GPU -> host (and NVMe) */                         \
  X(COPY_H2D, "copy_h2d", COPY)                      /* offload: host (or NVMe) -> GPU */

typedef enum {
#define X(name, str, family) PX_OP_##name,
  PX_OP_KINDS(X)
#undef X
      PX_OP_COUNT
} px_op_kind;

/* What kind of work an op kind is: unfused attention is Megatron's scores,
 * softmax and context ops (and their backwards), fused the flash kernels. */
typedef enum {
  PX_FAM_EMBED,
  PX_FAM_NORM,
  PX_FAM_GEMM,
  PX_FAM_ATTENTION,
  PX_FAM_FLASH,
  PX_FAM_ELEMENTWISE,
  PX_FAM_LOSS,
  PX_FAM_COLLECTIVE,
  PX_FAM_P2P,
  PX_FAM_OPTIMIZER,
  PX_FAM_COPY,
} px_op_family;

px_op_family px_op_family_of(px_op_kind kind);
/* Whether kind is a collective op of its own (an all-reduce, all-gather, reduce-scatter, all-to-all); a compute op
 * may carry an exchange of its own too (its coll), which it waits for. */
bool px_op_is_collective(px_op_kind kind);
/* Offload's ops, run by the host side (copies to and from the GPU, the
 * host's AdamW): the executor runs them itself with the backend's uploads
 * and downloads, the simulator costs them on the host link and CPU. */
bool px_op_on_host(px_op_kind kind);
/* Mixture of experts' own ops: routing, the permutations, the experts' GEMMs and biases. */
bool px_op_is_moe(px_op_kind kind);

extern const char *const px_op_names[PX_OP_COUNT];
extern const char *const px_stream_names[PX_STREAM_COUNT];
extern const char *const px_phase_names[PX_PHASE_COUNT];
extern const char *const px_group_names[PX_GROUP_COUNT];

/* What a collective or p2p op moves. */
typedef enum {
  PX_COLL_NONE,
  PX_COLL_ALLREDUCE,
  PX_COLL_ALLGATHER,
  PX_COLL_REDUCE_SCATTER,
  PX_COLL_P2P,
  PX_COLL_ALLTOALL,
  PX_COLL_COUNT
} px_coll;

/* nccl-tests' bus-bandwidth factor: the share of a collective's buffer size S
 * each of n ranks sends (all-reduce 2(n-1)/n; all-gather, reduce-scatter,
 * all-to-all (n-1)/n; p2p 1; 0 for one rank). The one place it is written. */
double px_coll_busbw_factor(px_coll kind, int64_t n);

typedef enum {
  PX_SLOT_PARAM,     /* a parameter tensor of a layer or of the stage */
  PX_SLOT_GRAD,      /* its gradient */
  PX_SLOT_ACT,       /* activation of a (micro-batch, layer) */
  PX_SLOT_ACT_GRAD,  /* gradient of an activation */
  PX_SLOT_BUFFER,    /* communication buffer (gathered parameters, buckets, p2p) */
  PX_SLOT_WORKSPACE, /* scratch inside one block */
  PX_SLOT_KIND_COUNT
} px_slot_kind;

/* Named roles a slot can play, so the executor can find parameters and the
 * model's inputs without parsing names. */
typedef enum {
  PX_ROLE_NONE,
  PX_ROLE_TOKENS,  /* (b, s) int32 input tokens */
  PX_ROLE_TARGETS, /* (b, s) int32 next tokens */
  PX_ROLE_MTP_TARGETS, /* (b, s) int32 an MTP module's targets: PX_MTP_SHIFT positions past the next token's, -1
                        * past a sequence's end */
  PX_ROLE_LOSS,    /* (b, s) fp32 per-token loss */
  PX_ROLE_TIED,    /* a copy of the tied embedding table (the embedding's, or the head's on another stage) */
} px_slot_role;

/* How many positions further than the model's an MTP module's targets are (DeepSeek-V3's one module: the token
 * after the next): its loss ops' shift (dim[3]) and the targets the executor loads for it. */
#define PX_MTP_SHIFT 1

#define PX_NAME_MAX 24

typedef struct {
  char name[PX_NAME_MAX];
  uint8_t kind;  /* px_slot_kind */
  uint8_t dtype; /* px_dtype */
  uint8_t role;  /* px_slot_role */
  bool tp_replicated; /* parameter identical on every TP rank (norms, biases of row-parallel layers) */
  bool sp_partial;    /* replicated parameter whose gradient is a partial sum over TP: its sequence shards under SP
                         (norms, positions), its heads (q/k norms) */
  bool expert;        /* an expert's parameter (or its gradient): split over EP, reduced over EDP */
  bool frozen;        /* a parameter not trained (fine-tuning's base, px_parallel_lora): no gradient, not in the
                         flat buffer of trained parameters; held in base_precision (px_lora_frozen_bytes) */
  bool fp8;           /* a parameter its GEMMs read in fp8 (precision fp8: a cached fp8 copy, px_plan_fp8_weight_elems) */
  int64_t shape[4];   /* unused dims are 1 */
  uint64_t elems;
  uint64_t bytes;
  int param;          /* for GRAD: the PARAM slot it belongs to; -1 otherwise */
} px_slot;

/* Elements along a row of a slot's tensor: the axis a GEMM contracts for it
 * as an operand, and the one fp8 blockwise tiles run along. (B, S, H, 1):
 * rows of H; (B, S, heads, D): heads x D; (rows, H, 1, 1): H. */
int64_t px_slot_row_elems(const px_slot *s);

/* One operand: a slot and a layer offset from the instance's layer. */
typedef struct {
  int16_t slot; /* -1: none */
  int8_t layer_off;
} px_ref;

#define PX_OP_OUTS 5
#define PX_OP_INS 6

typedef struct {
  uint8_t kind;   /* px_op_kind */
  uint8_t stream; /* px_stream */
  uint8_t phase;  /* px_phase */
  uint8_t group;  /* px_group for collectives */
  uint8_t coll;   /* px_coll */
  uint16_t flags; /* PX_OPF_* */
  int16_t dep;    /* compute ops: the latest earlier TP collective of the block whose tensors it uses, -1 none */
  px_ref out[PX_OP_OUTS];
  px_ref in[PX_OP_INS];
  int64_t dim[6];  /* meaning per kind, see plan/compile.c; LINEAR*: m, n, k, then the widths of split outputs */
  int64_t window;  /* FLASH_ATTN(_BWD) flagged PX_OPF_WINDOW: the sliding window in tokens (its kernel's cost) */
  double flops;
  double bytes;      /* HBM bytes read + written */
  double wire_bytes; /* bytes each rank sends (collectives, p2p) */
  uint64_t coll_bytes; /* collectives: the buffer size S (nccl-tests' "size") */
  int32_t free_start, free_count; /* refs freed after this op, in block->frees */
  int32_t alloc_start, alloc_count; /* refs allocated by this op, in block->allocs */
} px_op;

enum {
  PX_OPF_ACCUMULATE = 1 << 0, /* adds into its output */
  PX_OPF_SEQ_AXIS = 1 << 1,   /* collective along the sequence axis of (B, S, H): shards are (B, S/tp, H) */
  PX_OPF_ATTN_PROBS = 1 << 2, /* dropout site: attention probabilities */
  PX_OPF_TP_SLICE = 1 << 3,  /* p2p: this TP rank's 1/tp slice of the tensor only */
  PX_OPF_GELU = 1 << 4,      /* LINEAR (one output): out[0] = gelu(product + bias), out[3] = product + bias */
  PX_OPF_DGELU = 1 << 5,     /* LINEAR_BWD_DATA: out[0] = (dy W) gelu'(in[4]), written, not accumulated */
  PX_OPF_CP_RING = 1 << 6,   /* FLASH_ATTN(_BWD): the keys and values come around the CP ring a block at a time */
  PX_OPF_ROPE_UNFUSED = 1 << 6, /* ROPE(_BWD), with PX_OPF_EAGER: Megatron-Core's unfused RoPE, the bytes and kernels
                                  of px_op_rope_unfused_chain, not torchtitan's */
  PX_OPF_TO_HEADS = 1 << 7,  /* ALLTOALL: (B, S/cp, h, D) sequence-split -> (B, S, h/cp, D) head-split; unset: back */
  PX_OPF_TO_EXPERTS = 1 << 7, /* ALLTOALL over EP: routed rows to the experts (in[1]: the counts); unset: back */
  PX_OPF_COLS = 1 << 7,      /* ALLGATHER over TP: (B, S, n/tp) column shards -> the (B, S, n) rows this rank keeps
                                (its sequence shard with SP: Megatron-Core's gather_from_tensor_model_parallel_region,
                                then scatter_to_sequence_parallel_region), through the workspace out[1] (tp, B S,
                                n/tp), dim[3] S; LINEAR_BWD_*: in[0] (dy) is this TP rank's columns of a tensor of
                                tp times the op's n columns (the split backward of that gather) */
  PX_OPF_EXPERT_ROWS = 1 << 7, /* CAST: routed rows the local experts' GEMMs read, each expert's quantized apart
                                  (Transformer Engine's split_quantize) */
  PX_OPF_FLASH2 = 1 << 7,    /* FLASH_ATTN(_BWD): FlashAttention-2's kernel (`attention` flash2), costed at its curves */
  PX_OPF_EAGER = 1 << 7,     /* NORM(_BWD) of an RMSNorm, ROPE(_BWD), SWIGLU(_BWD), LOSS(_BWD): PyTorch eager's
                                composite ops (`elementwise` eager): the bytes and kernels of px_op_eager_chain (LOSS's
                                fp32 copy of the logits, LOSS_BWD's two fp32 gradients, the workspaces of out[2] and
                                out[1..2], their lifetimes the op's) */
  PX_OPF_FP8 = 1 << 8,       /* GEMMs: fp8 operands (E4M3 forward, E5M2 gradients), fp32 accumulation; CAST: into fp8 */
  PX_OPF_FP8_BLOCK = 1 << 9, /* ... with blockwise scales (1 x 128 activation tiles, 128 x 128 weight blocks) */
  PX_OPF_E5M2 = 1 << 10,     /* CAST: to E5M2 (gradients) rather than E4M3 */
  PX_OPF_WINDOW = 1 << 11,   /* FLASH_ATTN(_BWD), SOFTMAX(_BWD): a query sees only the model's sliding_window
                                tokens up to its own */
  PX_OPF_DEQUANT = 1 << 12,  /* CAST: a frozen weight from its base_precision storage (fp8, nf4) to the compute dtype,
                                into a workspace the GEMM after it reads (QLoRA's dequantise-then-matmul) */
  PX_OPF_MXFP8 = 1 << 13,    /* with PX_OPF_FP8 (GEMMs, CASTs): MXFP8 blocks (E4M3, E8M0 scales per 1 x 32) */
  PX_OPF_NVFP4 = 1 << 14,    /* with PX_OPF_FP8: NVFP4 blocks (E2M1, E4M3 scales per 1 x 16, weights 16 x 16, a
                                per-tensor scale; CASTs: stochastic rounding with E5M2, random Hadamard transforms
                                on the weight gradient's copies), GEMMs at the fp4 peak */
  PX_OPF_LORA_SCALE = 1 << 15, /* LINEAR*: an adapter's B GEMM, its product times alpha / r (lora_alpha / lora_rank):
                                  y += s h B^T, dh = s dy B, dB += s dy^T h */
};

/* Sizes collective op o of kind `kind` (its coll): elems_in / elems_out are
 * one rank's buffers in elements of dt (dim[0], dim[1]), n the group size;
 * sets coll_bytes (nccl-tests' size: the input of an all-reduce,
 * reduce-scatter or all-to-all, the output of an all-gather), wire_bytes
 * and HBM bytes. */
void px_op_size_coll(px_op *o, px_coll kind, uint64_t elems_in, uint64_t elems_out, px_dtype dt, int64_t n);
/* Op o's exchange of `bytes` (nccl-tests' size) of kind `kind` over a group of n: its coll, coll_bytes and the
 * wire bytes those move (px_coll_busbw_factor); what it reads and writes in HBM is its own. */
void px_op_coll_bytes(px_op *o, px_coll kind, uint64_t bytes, int64_t n);

/* An EP all-to-all of routed rows (dispatch or combine, top-k k): the bytes
 * of the tokens behind it on the busiest rank, one copy of each: the
 * dispatch's input (a copy per (token, expert)) over k, times the busiest
 * rank's rows over the mean; the combine's input is those rows. What
 * DeepEP's kernels count their copies of. */
double px_ep_token_bytes(const px_op *o, int64_t k);
/* The output columns a LINEAR op computes: the widths of its sections (dim[3..5]) whose outputs it has. All of its
 * weight's rows n (dim[1]) but where it makes part of a fused weight's output again (`recompute` op: the k rows of
 * the fused QKV weight, the up rows of SwiGLU's fused gate/up weight; the executors skip a section without an
 * output). */
int64_t px_op_linear_cols(const px_op *o);
/* A GEMM op's (LINEAR, LINEAR_BWD_DATA: dim[0] its rows) 1/n of its rows (rounded up), FLOPs and bytes: a chunk
 * Transformer Engine's userbuffers run (px_plan_op_tp_pipe). */
px_op px_op_row_chunk(const px_op *op, int64_t n);

/* PyTorch eager's kernels for an elementwise op kind (`elementwise` eager), per element of the op's tensor (a norm's
 * rows x width, RoPE's rotated q and k elements, SwiGLU's activation, the loss's logits): the passes over 16-bit elements (e bytes:
 * the activations' dtype) and over fp32 ones its kernels make (a read or a write each), its kernels; and of them
 * the dtype conversions' (x.float(), type_as: one 16-bit and one fp32 pass an element, no kernel with fp32
 * activations). NULL for the kinds eager runs as one kernel, as fused does (LayerNorm, GELU: PyTorch's native
 * kernels). */
typedef struct {
  int act_passes, f32_passes, kernels;
  int conv_passes, conv_kernels;
} px_eager_chain;
const px_eager_chain *px_op_eager_chain(px_op_kind kind);
/* Megatron-Core's unfused RoPE (ROPE or ROPE_BWD), which it runs where Transformer Engine's fused kernel cannot
 * (model.rope_concentration not 1); NULL for another kind. */
const px_eager_chain *px_op_rope_unfused_chain(px_op_kind kind);
/* The kernels an EXPERT_BIAS(_BWD) op runs as Megatron-Core's PyTorch ops (plan/mlp.c's expert_bias): forward a
 * product and a sum a local expert (dim[3] of them), the concatenation and the cast; backward five a local expert
 * and two. 0 for any other op. */
int64_t px_op_expert_bias_kernels(const px_op *op);
/* Op o's chain when it runs as PyTorch eager's kernels (PX_OPF_EAGER on a kind that has one), else NULL. */
const px_eager_chain *px_op_eager(const px_op *o);
/* An eager op's kernels (activations of e bytes an element). */
int px_eager_kernels(const px_eager_chain *c, double e);
/* Its HBM bytes over `elems` elements. */
double px_eager_bytes(const px_eager_chain *c, double elems, double e);

typedef enum {
  PX_BLOCK_EMBED_FWD,
  PX_BLOCK_EMBED_BWD,
  PX_BLOCK_LAYER_FWD,
  PX_BLOCK_LAYER_BWD,
  PX_BLOCK_HEAD_FWD,
  PX_BLOCK_HEAD_BWD,
  PX_BLOCK_SEND_FWD,
  PX_BLOCK_RECV_FWD,
  PX_BLOCK_SEND_BWD,
  PX_BLOCK_RECV_BWD,
  PX_BLOCK_GRAD_SYNC,   /* DP reduction of one unit's gradients */
  PX_BLOCK_PARAM_SYNC,  /* DP all-gather of one unit's parameters */
  PX_BLOCK_EMB_SYNC,    /* tied-embedding gradient all-reduce, first and last stage */
  PX_BLOCK_OPTIMIZER,
  PX_BLOCK_OFFLOAD_GRAD, /* offload: one unit's reduced gradient shard to the host */
  PX_BLOCK_FETCH_PARAM,  /* offload: one unit's parameter shard from the host, before its gather */
  PX_BLOCK_LAYER_BWD_W,  /* zero-bubble schedules: a layer's weight gradients (W), split from LAYER_BWD (B) */
  PX_BLOCK_MOE_FWD,      /* a mixture-of-experts layer's forward (its MLP is the router and experts) */
  PX_BLOCK_MOE_BWD,
  /* sliding-window attention: the blocks of a windowed layer (px_model_layer_is_sliding), the same but for
   * their attention's window (its ops flagged PX_OPF_WINDOW); a W block has no attention and serves both */
  PX_BLOCK_LAYER_FWD_WINDOW,
  PX_BLOCK_LAYER_BWD_WINDOW,
  PX_BLOCK_MOE_FWD_WINDOW,
  PX_BLOCK_MOE_BWD_WINDOW,
  /* full recomputation of some layers only (px_parallel_recompute_partial): the blocks of the layers that keep
   * their activations, built as without recomputation, beside the others' (the kinds above) */
  PX_BLOCK_LAYER_FWD_KEPT,
  PX_BLOCK_LAYER_BWD_KEPT,
  PX_BLOCK_MOE_FWD_KEPT,
  PX_BLOCK_MOE_BWD_KEPT,
  PX_BLOCK_LAYER_FWD_WINDOW_KEPT,
  PX_BLOCK_LAYER_BWD_WINDOW_KEPT,
  PX_BLOCK_MOE_FWD_WINDOW_KEPT,
  PX_BLOCK_MOE_BWD_WINDOW_KEPT,
  /* quantized precisions: the blocks of the layers kept in the compute dtype (px_parallel_layer_bf16), each
   * the same as its kind above but for GEMMs without quantized operands (no casts, no fp8 twins) */
  PX_BLOCK_LAYER_FWD_BF16,
  PX_BLOCK_LAYER_BWD_BF16,
  PX_BLOCK_MOE_FWD_BF16,
  PX_BLOCK_MOE_BWD_BF16,
  PX_BLOCK_LAYER_FWD_WINDOW_BF16,
  PX_BLOCK_LAYER_BWD_WINDOW_BF16,
  PX_BLOCK_MOE_FWD_WINDOW_BF16,
  PX_BLOCK_MOE_BWD_WINDOW_BF16,
  PX_BLOCK_LAYER_FWD_KEPT_BF16,
  PX_BLOCK_LAYER_BWD_KEPT_BF16,
  PX_BLOCK_MOE_FWD_KEPT_BF16,
  PX_BLOCK_MOE_BWD_KEPT_BF16,
  PX_BLOCK_LAYER_FWD_WINDOW_KEPT_BF16,
  PX_BLOCK_LAYER_BWD_WINDOW_KEPT_BF16,
  PX_BLOCK_MOE_FWD_WINDOW_KEPT_BF16,
  PX_BLOCK_MOE_BWD_WINDOW_KEPT_BF16,
  PX_BLOCK_LAYER_BWD_W_BF16,
  PX_BLOCK_MOE_BWD_W, /* zero-bubble schedules: a mixture-of-experts layer's W (its experts' and router's too) */
  PX_BLOCK_MOE_BWD_W_BF16,
  PX_BLOCK_OFFLOAD_ACT, /* activation offload: the activations a layer's forward keeps (a micro-batch's), to the host */
  PX_BLOCK_FETCH_ACT,   /* ... and back, before that layer's backward */
  PX_BLOCK_MTP_FWD,     /* the multi-token prediction module on the last stage (plan/compile.c): its embedding, norms,
                           projection, decoder layer, head and loss */
  PX_BLOCK_MTP_BWD,
  PX_BLOCK_KIND_COUNT
} px_block_kind;

extern const char *const px_block_names[PX_BLOCK_KIND_COUNT];

/* The blocks that compute (forward, backward, W) and those of the backward (B and W). */
bool px_block_is_compute(px_block_kind kind);
bool px_block_is_bwd(px_block_kind kind);
/* A transformer layer's forward or backward, dense or mixture of experts, windowed or not, kept or not. */
bool px_block_is_layer_fwd(px_block_kind kind);
bool px_block_is_layer_bwd(px_block_kind kind);
/* A mixture-of-experts layer's forward; its forward, backward or W. */
bool px_block_is_moe_fwd(px_block_kind kind);
bool px_block_is_moe(px_block_kind kind);
/* A zero-bubble schedule's W block, of either precision. */
bool px_block_is_layer_w(px_block_kind kind);
/* The block of a layer kept in the compute dtype under a quantized precision. */
bool px_block_is_bf16(px_block_kind kind);
/* The forward or backward block of a layer: dense or MoE, with a sliding window or not, keeping its
 * activations where the plan recomputes some layers (kept) or as the plan's recomputation has it, its GEMMs
 * in the plan's precision or kept in the compute dtype (bf16). */
px_block_kind px_layer_block(bool moe, bool window, bool kept, bool bf16, bool bwd);
/* The W block of a layer (zero-bubble schedules), dense or mixture of experts, its GEMMs in the plan's precision
 * or the compute dtype. */
px_block_kind px_layer_w_block(bool moe, bool bf16);

typedef struct {
  uint8_t kind;   /* px_block_kind */
  uint8_t stream; /* the stream the block occupies (its TP ops also use tp) */
  px_op *ops;
  int32_t nops;
  px_ref *frees, *allocs;
  int32_t nfrees, nallocs;
  /* Summaries, from the ops. */
  double flops[PX_PHASE_COUNT];
  double bytes;
  double dup_flops; /* of flops: what every TP rank computes alike (MLA's replicated down projections without SP),
                       counted once over TP in model FLOPs */
} px_block;

/* A block instance in a stage's program. */
typedef struct {
  uint16_t block;
  uint8_t stream;
  uint8_t phase;   /* forward, backward, comm ... for reporting */
  int32_t mb;      /* micro-batch, -1 when none */
  int32_t layer;   /* the layer the block binds (first layer of the chunk for embed/recv) */
  int16_t chunk;   /* model chunk (virtual stage index on this rank) */
  int32_t unit;    /* parameter unit: the one a sync block moves, the first of those a
                      compute block reads (ZeRO-3) and writes gradients of; -1 none */
  uint16_t units;  /* compute blocks: the units [unit, unit + units) of its layer (more than
                      one when buckets split it, or with ZeRO-3 an MoE layer's two: the rest
                      and the experts) */
  int32_t batch;   /* p2p batch: consecutive sends/recvs posted together, -1 none */
  int32_t peer;    /* send/recv: index of the matching instance in the peer stage's program */
  int32_t dep_start, ndeps; /* instances (same stage) this one waits for, in program->deps */
  int32_t ops;     /* the instance's own sized ops in program->ops (as many as its block has), -1: the block's */
  uint8_t flags;   /* PX_INSTF_* */
} px_inst;

enum {
  PX_INSTF_RESHARD = 1 << 0, /* ZeRO-3: the gathered parameters of the block's units
                                [unit, unit + units) are freed after it */
  PX_INSTF_MERGED = 1 << 1,  /* EP overlap: a MoE layer's forward run merged with the backward instance after it on
                                the compute stream, their token exchanges behind each other's compute (combined 1F1B) */
};

/* Parameter units: the granularity of DP reduction, ZeRO sharding and
 * ZeRO-3 gathering. A unit is a contiguous range of the stage's flat
 * parameter buffer, padded to a multiple of the ranks it is sharded over
 * (px_plan_unit_ranks: dp x cp, the shard group, or for experts dp x cp / ep). */
typedef struct {
  uint64_t offset;      /* elements into the flat buffer */
  uint64_t elems;       /* real elements */
  uint64_t padded;      /* elems rounded up to a multiple of the shard size */
  uint64_t shard_offset; /* elements into a rank's shard layout: the shards (px_plan_unit_shard) of the units
                            before it, one after another */
  int32_t first_group, last_group; /* parameter groups covered: -1 the embedding,
                                      0..L-1 layers, L the head (and the embedding
                                      when tied on a single stage) */
  int32_t grad_op;   /* in program->ops: its gradient reduction (all-reduce, ZeRO: reduce-scatter; with a
                        shard group: reduce-scatter in it, then all-reduce of the shard over the replicas) */
  int32_t grad_op_mb; /* hybrid sharding with sharded accumulation: the reduction of the micro-batches
                         before the last, whose replica all-reduce is empty (the accumulated shard is
                         all-reduced once a step, by grad_op, as MiCS does); -1 none */
  int32_t gather_op; /* in program->ops: its parameter all-gather (ZeRO) */
  int32_t offload_op, fetch_op; /* in program->ops: its shard's copies to and from the host (offload) */
  bool expert;       /* a MoE layer's experts: reduced and sharded over the expert-data-parallel group */
} px_unit;

/* Where one parameter (slot, group) lives in the flat buffer. */
typedef struct {
  int16_t slot;
  int32_t group; /* the layer, or -1 / L for embedding / head parameters */
  int32_t unit;
  uint64_t offset; /* elements into the flat buffer */
  uint64_t elems;
} px_param_ref;

typedef struct {
  px_inst *insts;
  int32_t ninsts;
  int32_t *deps;
  int32_t ndeps;
  px_unit *units;
  int32_t nunits;
  px_param_ref *params;
  int32_t nparams;
  px_op *ops;            /* ops sized for this stage: each unit's reduction and gather, the tied
                            embedding's all-reduce, the optimizer's over this stage's shard */
  int32_t nops;
  uint64_t flat_elems;   /* sum of unit padded sizes */
  uint64_t param_elems;  /* real parameters held by one rank of this stage (its TP shard), trained ones */
  uint64_t frozen_elems, frozen_bytes; /* fine-tuning: the frozen base weights it holds too, in base_precision */
  px_param_ref *frozen;  /* ... each (slot, group), offset in elements into their own buffer (unit -1) */
  int32_t nfrozen;
  int64_t first_layer, nlayers; /* over all chunks */
  bool has_embed, has_head;
  int32_t act_ops; /* activation offload: in ops, layer l's copy to the host at act_ops + 2 l and back at + 1 (the
                      bytes its forward keeps, px_plan_kept_bytes); -1 none */
} px_program;

#endif
