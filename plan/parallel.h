/* Parallel choices: how a model is split over GPUs (TP, PP, DP, ZeRO, SP),
 * the batch, the pipeline schedule, recomputation, precision and overlap. */
#ifndef PX_PLAN_PARALLEL_H
#define PX_PLAN_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"

/* Pipeline schedules: GPipe, 1F1B, interleaved 1F1B (Narayanan et al.,
 * SC'21), and the zero-bubble ones (Qi et al., ICLR 2024), which split each
 * layer's backward into B (input gradient) and W (weight gradient) and
 * defer W into the bubbles: ZB-H1 (1F1B's memory) and ZB-H2 (up to 2p - 1
 * micro-batches in flight). */
/* The MTP modules' loss weight over the main loss when the plan sets none (mtp_loss_scale): Megatron-Core's
 * mtp_loss_scaling_factor default (transformer_config.py at d98e8a6), which Megatron-Bridge's DeepSeek-V3 recipes
 * keep; each module's loss is the mean over its positions with a target (the last `shift` of each sequence have
 * none), and the weight is shared by the modules (multi_token_prediction.py: the factor over mtp_num_layers). */
#define PX_MTP_LOSS_WEIGHT 0.1
#define PX_MTP_LOSS_SCALE_MIN 1e-6 /* mtp_loss_scale's range (a weight, not 0: the module would learn nothing) */
#define PX_MTP_LOSS_SCALE_MAX 1e3

typedef enum {
  PX_SCHED_GPIPE,
  PX_SCHED_1F1B,
  PX_SCHED_INTERLEAVED,
  PX_SCHED_ZB_H1,
  PX_SCHED_ZB_H2,
  PX_SCHED_COUNT
} px_schedule;
/* op: torchtitan's per-op selective activation checkpointing (selective_ac_option "op"; its policy in
 * torchtitan/models/llama3/infra/parallelize.py and torchtitan/distributed/activation_checkpoint.py at v0.2.2, the
 * same at 9dec370 of the Dec 2024 benchmarks): a transformer block's forward saves the outputs of its matmuls but
 * every second one (aten.mm in forward order: of wq, wk, wv, wo, w1, w3, w2 it recomputes wk, wo and w3), of the
 * fused attention and of the TP reduce-scatters, and the backward makes everything else again (norms, RoPE, the
 * activation, the SP all-gathers) from the block's input. Dense layers without linear biases (nn.Linear with a
 * bias runs addmm, which the policy neither counts nor saves). */
typedef enum {
  PX_RECOMPUTE_NONE,
  PX_RECOMPUTE_SELECTIVE,
  PX_RECOMPUTE_FULL,
  PX_RECOMPUTE_OP,
  PX_RECOMPUTE_COUNT
} px_recompute;
/* Which layers full recomputation covers, as Megatron-Core's recompute_method
 * with recompute_num_layers N (megatron/core/recompute.py; the facts in
 * tests/data/megatron_recompute.md): uniform, every layer of a model chunk,
 * in groups of N whose inputs alone are kept (N 1: every layer's input, what
 * `full` alone is); block, the first N layers of each model chunk, one at a
 * time, the chunk's other layers keeping their activations; every, every N-th
 * layer of each model chunk (its N-th, 2N-th, ...), the others keeping theirs:
 * torchtitan's layer-wise selective activation checkpointing
 * (selective_ac_option N, its default 2; _apply_layer_sac in
 * torchtitan/distributed/activation_checkpoint.py at v0.2.2, which counts a
 * rank's layers across its pipeline stages: the same where a rank's chunks
 * hold multiples of N layers). */
typedef enum { PX_RECOMPUTE_UNIFORM, PX_RECOMPUTE_BLOCK, PX_RECOMPUTE_EVERY, PX_RECOMPUTE_METHOD_COUNT } px_recompute_method;
/* What selective recomputation redoes, as Megatron-Core's recompute_modules (transformer_config.py at d98e8a6;
 * the facts in tests/data/megatron_recompute.md): core_attn the unfused core attention (its default; fused
 * attention recomputes its probabilities anyway), mla_up_proj MLA's up projections and RoPE, moe_act the
 * experts' activation, layernorm the layer's two norms, mlp a dense layer's whole MLP. Each drops the
 * tensors it makes from what the forward keeps and makes them again in the backward, before their first
 * reader there. Megatron-Core's moe (the whole MoE layer) and shared_experts are not planned. */
enum {
  PX_RCM_CORE_ATTN = 1 << 0,
  PX_RCM_MLA_UP_PROJ = 1 << 1,
  PX_RCM_MOE_ACT = 1 << 2,
  PX_RCM_LAYERNORM = 1 << 3,
  PX_RCM_MLP = 1 << 4,
  PX_RCM_BITS = 5,
};
/* fp8: the transformer layers' linear GEMMs (and the experts') in fp8 with
 * fp32 accumulation, everything else in bf16 with fp32 master weights
 * (Transformer Engine's recipe as Megatron-Core runs it). mxfp8 and nvfp4:
 * the same GEMMs in Blackwell's block-scaled formats (kernels/cpu/mx.h):
 * MXFP8 (E4M3 codes, an E8M0 scale per 1 x 32; E4M3 for gradients too, as
 * NVIDIA's MXFP8 recipe, arXiv 2506.08027) and NVFP4 (E2M1 codes, an E4M3
 * scale per 1 x 16, 16 x 16 for weights, a per-tensor fp32 scale; random
 * Hadamard transforms on the weight gradient's inputs and stochastic
 * rounding of gradients, arXiv 2509.25149). */
typedef enum {
  PX_PREC_FP32,
  PX_PREC_BF16,
  PX_PREC_FP16,
  PX_PREC_FP8,
  PX_PREC_MXFP8,
  PX_PREC_NVFP4,
  PX_PREC_COUNT
} px_precision;
/* The block-scaled precisions (mxfp8, nvfp4), and those whose layers' GEMMs read quantized operands (fp8 too). */
static inline bool px_precision_block_scaled(int prec) { return prec == PX_PREC_MXFP8 || prec == PX_PREC_NVFP4; }
static inline bool px_precision_quantized(int prec) { return prec == PX_PREC_FP8 || px_precision_block_scaled(prec); }
/* fp8 scaling: delayed (per-tensor scales from an amax history, TE's
 * DelayedScaling), current (per-tensor scales from the tensor's own amax,
 * Float8CurrentScaling) or blockwise (DeepSeek-V3: 1 x 128 tiles of
 * activations and gradients, 128 x 128 blocks of weights). */
typedef enum { PX_FP8_DELAYED, PX_FP8_CURRENT, PX_FP8_BLOCKWISE, PX_FP8_RECIPE_COUNT } px_fp8_recipe;
/* fp8: the dtype of everything but the fp8 GEMMs: bf16 with fp32 master
 * weights (Megatron-Core), or fp32 (Transformer Engine's fp8_autocast around
 * an fp32 model: what the cpu backend, which computes in fp32, runs). */
typedef enum { PX_FP8_BASE_BF16, PX_FP8_BASE_FP32, PX_FP8_BASE_COUNT } px_fp8_base;
/* The library whose quantized linear layers a plan runs: Transformer Engine (Megatron-LM, Megatron-Bridge/NeMo) or
 * torchao (torchtitan's float8 and MX converters). They differ in the backward of a row-parallel layer under
 * sequence parallelism: Transformer Engine quantizes the output gradient's sequence shard and all-gathers the codes
 * (linear.py's backward, TE d0067d0), torchao all-gathers the 16-bit shard and quantizes the whole (its float8 TP
 * styles gather the gradient in high precision). */
typedef enum { PX_FP8_LIB_TE, PX_FP8_LIB_TORCHAO, PX_FP8_LIB_COUNT } px_fp8_library;
/* Attention kernel: fused (FlashAttention: no S x S tensor is kept, the
 * probabilities are recomputed in backward) or unfused (Megatron-LM's
 * scores, softmax, dropout and context ops, as in Korthikanti et al.). Fused
 * runs the GPU's own fused kernel (its preset's curves: FlashAttention-3,
 * cuDNN), flash2 FlashAttention-2's (PyTorch's scaled_dot_product_attention
 * flash backend, flash-attn 2.x): the same op graph, costed at that kernel's
 * measured curves (gpu.attention_flash2). */
typedef enum { PX_ATTN_FLASH, PX_ATTN_UNFUSED, PX_ATTN_FLASH2, PX_ATTN_COUNT } px_attention;
static inline bool px_attention_fused(int attention) { return attention != PX_ATTN_UNFUSED; }
/* GELU MLP: its own op after fc1 (as Megatron-LM), or fused into the GEMMs'
 * epilogues (fc1 forward writes gelu(x W^T + b) and keeps the pre-activation;
 * fc2's data gradient is multiplied by gelu'), saving a pass over the
 * (B, S, F/tp) tensor each way. */
typedef enum { PX_GELU_SEPARATE, PX_GELU_FUSED, PX_GELU_COUNT } px_gelu_mode;
/* The elementwise ops' kernels: fused (each RMSNorm, RoPE and SwiGLU pass one kernel that reads its inputs once
 * and writes its outputs once: Transformer Engine's and Megatron-Core's kernels, torch.compile's fusions), eager
 * (PyTorch eager's composite ops as torchtitan's Llama runs them without torch.compile: RMSNorm in fp32 over
 * eight kernels, RoPE through fp32 complex numbers, SwiGLU as silu then a product, the loss on the logits cast to
 * fp32 with its fp32 transients; px_op_eager_chain), or
 * rope-unfused (Megatron-Core with apply_rope_fusion off, its default and Megatron-Bridge's outside the
 * performance recipes: the norms and SwiGLU fused, RoPE as its unfused PyTorch ops, px_op_rope_unfused_chain,
 * which fused takes too for a model with YaRN's concentration factor). The same math either way; what the GPU
 * moves and the host issues differ. */
typedef enum { PX_ELEMWISE_FUSED, PX_ELEMWISE_EAGER, PX_ELEMWISE_ROPE_UNFUSED, PX_ELEMWISE_COUNT } px_elementwise;
/* Gradient accumulation over micro-batches with ZeRO-2/3: reduce-scatter every
 * micro-batch into the sharded accumulator (DeepSpeed), or keep the full
 * gradient and reduce once a step (FSDP no_sync, Megatron's distributed
 * optimizer). ZeRO-0/1 always keep the full gradient. */
typedef enum { PX_ACCUM_SHARDED, PX_ACCUM_FULL, PX_ACCUM_COUNT } px_grad_accum;
/* The gradient buffer with 16-bit training: in the parameters' dtype
 * (DeepSpeed, 16 bytes a parameter with Adam) or fp32 (Megatron-LM's
 * main_grad, 18 bytes). */
typedef enum { PX_MAIN_GRAD_PARAM, PX_MAIN_GRAD_FP32, PX_MAIN_GRAD_COUNT } px_main_grad;
/* Where offloaded model states live (ZeRO-Offload, ZeRO-Infinity): on the
 * GPU (none), in the node's host memory, or on its NVMe drives. */
typedef enum { PX_OFFLOAD_NONE, PX_OFFLOAD_CPU, PX_OFFLOAD_NVME, PX_OFFLOAD_COUNT } px_offload;
/* Context parallelism's attention: how a rank's queries meet the keys and
 * values of the whole sequence. ring: K/V blocks passed around the CP ring,
 * each transfer overlapped with the attention on the previous block
 * (Megatron-Core's P2P context parallelism, ring attention); all-gather: K/V
 * all-gathered over CP before the attention and their gradients
 * reduce-scattered after it (Llama 3); a2a: all-to-all from sequence-split
 * to head-split around the attention (DeepSpeed-Ulysses). */
typedef enum { PX_CP_RING, PX_CP_ALLGATHER, PX_CP_A2A, PX_CP_ALGO_COUNT } px_cp_algo;
/* Mixture of experts: how tokens reach the experts of other EP ranks and
 * come back: all-to-all of the routed tokens, a copy per (token, expert)
 * (Megatron-Core's alltoall dispatcher, NCCL), all-gather of every token
 * over EP and reduce-scatter of the outputs (its allgather dispatcher), or
 * DeepEP's kernels (its flex dispatcher with DeepEP): each token once to
 * each EP rank holding some of its experts and once over RDMA to each node
 * among them, fanned out over NVLink there (px_plan_ep_copies); or the flex
 * dispatcher with NVIDIA's HybridEP, costed with DeepEP's figures (no
 * measurement of its own published), which pads each expert's rows for the
 * quantized GEMMs in its dispatch where Megatron-Core's experts pad them
 * for DeepEP's (plan/mlp.c pad_bytes). */
typedef enum { PX_MOE_A2A, PX_MOE_ALLGATHER, PX_MOE_DEEPEP, PX_MOE_HYBRIDEP, PX_MOE_DISPATCH_COUNT } px_moe_dispatch;
/* DeepEP's kernels' model of the exchange: DeepEP's and HybridEP's. */
bool px_moe_dispatch_deepep(int dispatch);
/* What a dropless router's expert buffers hold: the busiest EP rank's rows at
 * moe_imbalance (what the simulator expects a caching allocator to see), or
 * every routing the router can make (a fixed arena that never overflows). */
typedef enum { PX_MOE_BUF_BUSIEST, PX_MOE_BUF_WORST, PX_MOE_BUFFERS_COUNT } px_moe_buffers;
/* CUDA graphs: none (every kernel launched by the host, eager), layers (Megatron-Core's per-layer graphs,
 * --cuda-graph-impl transformer_engine: each layer's forward and backward of a micro-batch replayed as one
 * graph; a MoE layer's attention and router only, --cuda-graph-modules attn moe_router moe_preprocess, its
 * experts' part eager), full (Megatron-Core's full-iteration graph, --cuda-graph-impl full_iteration: a
 * step's forwards and backwards one graph, the optimizer eager; a MoE layer's exchanges sync-free, HybridEP's
 * static per-rank budget), or router (a MoE layer's pre-MLP norm, router and dispatcher preprocessing alone,
 * --cuda-graph-modules moe_router moe_preprocess: its attention and experts eager, a dense layer eager). What the
 * host issues, not what the GPU runs (sim/host.h). */
typedef enum { PX_GRAPH_NONE, PX_GRAPH_LAYERS, PX_GRAPH_FULL, PX_GRAPH_ROUTER, PX_GRAPH_COUNT } px_cuda_graph;
/* Whether a CUDA graph captures a MoE layer's router (layers, router). */
bool px_graph_router(int cuda_graph);
/* Fine-tuning: none (pre-training), full (every weight trained, as
 * pre-training plans it), lora (Hu et al. 2021: the base frozen, low-rank
 * adapters A (r x in) and B (out x r) beside the targeted linear layers
 * trained) and qlora (Dettmers et al. 2023: lora on an NF4 base). */
typedef enum { PX_FT_NONE, PX_FT_FULL, PX_FT_LORA, PX_FT_QLORA, PX_FT_COUNT } px_finetune;
/* The frozen base weights' storage with lora/qlora: bf16 (the compute
 * dtype), fp8 (E4M3, a scale a tensor) or nf4 (QLoRA's 4-bit NormalFloat
 * with double-quantised block scales, px_lora_frozen_bytes); fp8 and nf4
 * are dequantised to the compute dtype before each GEMM that reads them. */
typedef enum { PX_BASE_BF16, PX_BASE_FP8, PX_BASE_NF4, PX_BASE_COUNT } px_base_precision;

extern const char *const px_schedule_names[PX_SCHED_COUNT];
extern const char *const px_recompute_names[PX_RECOMPUTE_COUNT];
extern const char *const px_recompute_method_names[PX_RECOMPUTE_METHOD_COUNT];
extern const char *const px_recompute_module_names[PX_RCM_BITS];
extern const char *const px_precision_names[PX_PREC_COUNT];
extern const char *const px_attention_names[PX_ATTN_COUNT];
extern const char *const px_gelu_names[PX_GELU_COUNT];
extern const char *const px_elementwise_names[PX_ELEMWISE_COUNT];
extern const char *const px_grad_accum_names[PX_ACCUM_COUNT];
extern const char *const px_main_grad_names[PX_MAIN_GRAD_COUNT];
extern const char *const px_offload_names[PX_OFFLOAD_COUNT];
extern const char *const px_cp_algo_names[PX_CP_ALGO_COUNT];
extern const char *const px_moe_dispatch_names[PX_MOE_DISPATCH_COUNT];
extern const char *const px_moe_buffers_names[PX_MOE_BUFFERS_COUNT];
extern const char *const px_cuda_graph_names[PX_GRAPH_COUNT];
extern const char *const px_fp8_recipe_names[PX_FP8_RECIPE_COUNT];
extern const char *const px_fp8_base_names[PX_FP8_BASE_COUNT];
extern const char *const px_fp8_library_names[PX_FP8_LIB_COUNT];
extern const char *const px_finetune_names[PX_FT_COUNT];
extern const char *const px_base_precision_names[PX_BASE_COUNT];

/* Overlap switches (bit set = overlapped). The default follows current
 * Megatron-Core: DP (--overlap-grad-reduce), ZeRO's gathers
 * (--overlap-param-gather), PP, and the backward TP overlap its column-
 * parallel linear layers always run (tp-bwd, see px_plan_op_overlapped);
 * every TP collective (tp) only with --tp-comm-overlap; the MoE exchanges (ep) only with
 * --overlap-moe-expert-parallel-comm. */
enum {
  PX_OVERLAP_DP = 1 << 0,    /* gradient reduction in buckets during backward */
  PX_OVERLAP_ZERO = 1 << 1,  /* ZeRO-3 prefetch of the next layer, ZeRO-1/2 gather with next step's forward */
  PX_OVERLAP_PP = 1 << 2,    /* pipeline sends and receives on their own streams */
  PX_OVERLAP_TP = 1 << 3,    /* every collective of a layer's own groups (TP, CP, EP) hidden behind the compute up
                                to its first consumer, forward and backward (Megatron-LM --tp-comm-overlap); implies
                                tp-bwd */
  PX_OVERLAP_TP_BWD = 1 << 4, /* a backward column-parallel linear's TP collectives: its input gradient's all-reduce
                                 (reduce-scatter with SP) beside the weight-gradient GEMM, with SP the all-gather of
                                 its saved input beside the data-gradient GEMM (Megatron-Core's default) */
  PX_OVERLAP_EP = 1 << 5,    /* a MoE layer's token exchanges (dispatch, combine) hidden behind another micro-batch's
                                compute: Megatron-Core's overlap_moe_expert_parallel_comm, which runs each steady-state
                                forward merged layer by layer with a backward (its combined 1F1B schedule, one more
                                forward in the warm-up); not in `all` (a schedule with its own rules and memory) */
  PX_OVERLAP_BITS = 6,
  PX_OVERLAP_DEFAULT = PX_OVERLAP_DP | PX_OVERLAP_ZERO | PX_OVERLAP_PP | PX_OVERLAP_TP_BWD,
  PX_OVERLAP_ALL = PX_OVERLAP_DP | PX_OVERLAP_ZERO | PX_OVERLAP_PP | PX_OVERLAP_TP | PX_OVERLAP_TP_BWD,
};
/* The switches' names, bit i's at [i] (--overlap, plan files). */
extern const char *const px_overlap_names[PX_OVERLAP_BITS];

/* Longest explicit --layers-per-chunk list (pp x vpp entries). */
#define PX_MAX_CHUNK_LIST 256

/* Every field 0 (or -1 for enums) means "not set": px_parallel_resolve fills defaults. */
typedef struct {
  int64_t tp, pp, dp;
  int64_t cp;        /* context parallelism: ranks splitting each sequence (1: none), 0 unset */
  int cp_algo;       /* px_cp_algo, -1 unset (ring) */
  int64_t ep;        /* expert parallelism: ranks of the DP x CP group the experts are split over, 0 unset (1) */
  int64_t etp;       /* expert tensor parallelism: ranks each expert's GEMMs are split over (Megatron-Core's
                        expert_tensor_parallel_size), 0 unset (tp); the planner takes etp = tp only so far */
  int moe_dispatch;  /* px_moe_dispatch, -1 unset (a2a) */
  int moe_router_padding; /* with an fp8 or fp4 recipe: the router pads each expert's tokens to the quantized GEMMs'
                             alignment (Megatron-Core's moe_router_padding_for_quantization: added routings of zero
                             gate), so the experts skip their padding copies; -1 unset (0) */
  int moe_buffers;   /* px_moe_buffers, -1 unset (busiest; the run's default: worst) */
  int64_t mtp_layers; /* multi-token prediction modules trained beside the model (Megatron-Core's mtp_num_layers; at
                         most the model's own, one so far), on the last pipeline stage; -1 unset (0) */
  double mtp_loss_scale; /* their loss's weight in the objective (Megatron-Core's mtp_loss_scaling_factor; DeepSeek-V3's
                            paper: 0.3 for its first 10T tokens, then 0.1); 0 unset (PX_MTP_LOSS_WEIGHT with
                            mtp_layers, else none) */
  double moe_imbalance; /* tokens on the busiest EP rank's experts over the mean (>= 1), 0 unset (1) */
  int cuda_graph;    /* px_cuda_graph, -1 unset (none) */
  int zero;          /* 0-3, -1 unset */
  int sp;            /* sequence parallelism: 0/1, -1 unset */
  int64_t mbs;       /* micro-batch size, sequences */
  int64_t gbs;       /* global batch, sequences */
  int64_t seq;       /* sequence length (the model's when 0) */
  int schedule;      /* px_schedule, -1 unset */
  int64_t vpp;       /* virtual pipeline stages (model chunks) per rank */
  int recompute;     /* px_recompute, -1 unset */
  int recompute_method;     /* px_recompute_method with full recomputation, -1 unset (uniform) */
  int64_t recompute_layers; /* its N (Megatron's recompute_num_layers), 0 unset (1 uniform: every layer) */
  int recompute_modules;    /* PX_RCM_* bits selective recomputation redoes, 0 unset (core_attn) */
  int precision;     /* px_precision, -1 unset */
  int fp8_recipe;    /* px_fp8_recipe with fp8, -1 unset (delayed) */
  int fp8_base;      /* px_fp8_base with fp8, -1 unset (bf16) */
  int fp8_library;   /* px_fp8_library with a quantized precision, -1 unset (te) */
  int fp8_params;    /* fp8, mxfp8, nvfp4: the layers' GEMM weights held in the GEMMs' format only, no 16-bit
                        copy (Transformer Engine's primary weights, Megatron's --fp8-param-gather and
                        --fp4-param-gather): px_parallel_fp8_primary, px_parallel_param_gather_bytes; -1 unset (0) */
  int fp8_attention; /* fp8, mxfp8, nvfp4: the fused attention's products in fp8 (Megatron-Core's
                        fp8_dot_product_attention, Transformer Engine's fp8_dpa): cuDNN's FP8 attention, MXFP8's
                        under mxfp8; -1 unset (0) */
  int attention;     /* px_attention, -1 unset */
  int gelu;          /* px_gelu_mode, -1 unset */
  int elementwise;   /* px_elementwise, -1 unset */
  uint64_t bucket_bytes; /* DP gradient bucket */
  int overlap;       /* PX_OVERLAP_* bits, -1 unset */
  int64_t prefetch;  /* ZeRO-3: units whose gathers are issued ahead of the one in use (FSDP's in-flight
                        all-gathers less one; 0 none), -1 unset (1) */
  int reshard;       /* ZeRO-3: free gathered parameters after the forward and gather again for the
                        backward (1, FSDP's reshard_after_forward) or keep them (0, SHARD_GRAD_OP), -1 unset */
  int grad_accum;    /* px_grad_accum, -1 unset (sharded with ZeRO-2/3, full otherwise) */
  int main_grad;     /* px_main_grad, -1 unset (param) */
  int offload_opt;   /* px_offload: the fp32 gradient shard, master weights and moments, stepped by the
                        host CPU (ZeRO-2/3); -1 unset (none) */
  int offload_params; /* px_offload: ZeRO-3's parameter shard, fetched per unit before its gather; -1 unset */
  int64_t shard_group; /* ZeRO: data-parallel ranks a model state is sharded over (consecutive DP ranks,
                          replicated across the dp / shard_group groups: FSDP HYBRID_SHARD, MiCS);
                          0 unset (dp: the whole data-parallel group) */
  int64_t first_stage_layers; /* layers of the first pipeline stage, spread over its chunks (Megatron-Core's
                                 num_layers_in_first_pipeline_stage); 0 unset */
  int64_t last_stage_layers;  /* ... of the last stage (num_layers_in_last_pipeline_stage); 0 unset */
  int64_t bf16_layers_start;  /* quantized precisions: the model's first layers whose GEMMs stay in the compute
                                 dtype (Megatron-Core's num_layers_at_start_in_bf16), -1 unset (0) */
  int64_t bf16_layers_end;    /* ... its last layers (num_layers_at_end_in_bf16), -1 unset (0) */
  int64_t offload_act_layers; /* activation offload: the activations the model's first N layers keep for their
                                 backward copied to host memory during the forward and back before it
                                 (Megatron-Core's cpu_offloading_num_layers, Transformer Engine's CPU offload),
                                 -1 unset (0) */
  int64_t mb_group;  /* interleaved: micro-batches run on a chunk before the next chunk (Megatron-Core's
                        microbatch_group_size_per_vp_stage), pp..micro-batches; 0 unset (px_parallel_mb_group) */
  int finetune;      /* px_finetune, -1 unset (none) */
  int64_t lora_rank; /* lora/qlora: the adapters' rank r, 0 unset (16) */
  double lora_alpha; /* lora/qlora: the adapters' scale is alpha / r (the math only, not the plan), 0 unset (2 r) */
  int lora_targets;  /* lora/qlora: PX_LORA_* bits of the linear layers given adapters, 0 unset (qkv,o,fc1,fc2) */
  int base_precision; /* lora/qlora: px_base_precision of the frozen weights, -1 unset (lora bf16, qlora nf4) */
  int32_t nchunk_layers;                         /* entries in chunk_layers; 0 unset */
  uint16_t chunk_layers[PX_MAX_CHUNK_LIST];      /* (pp x vpp) layers of each model chunk, virtual-stage order
                                                    (chunk c of stage s is entry c pp + s) */
} px_parallel;

void px_parallel_unset(px_parallel *p);
/* Fills unset fields: dp = gpus / (tp pp), 1F1B, bf16 where the GPU has it
 * (fp32 otherwise), flash attention, ... */
void px_parallel_resolve(px_parallel *p, const px_model *m, const px_cluster *c);
/* Refuses impossible combinations with the reason and a hint. */
px_status px_parallel_validate(const px_parallel *p, const px_model *m, const px_cluster *c, px_err *err);

/* Sets every unset field of p to from's (flags over a plan file's choices). */
void px_parallel_fill_unset(px_parallel *p, const px_parallel *from);

/* Whether layer `index` of its model chunk (0 the chunk's first) is fully
 * recomputed (px_recompute_method); false without full recomputation. */
bool px_parallel_layer_recomputed(const px_parallel *p, int64_t index);
/* Full recomputation of some layers only (block or every with N set): the plan
 * has blocks for the layers that keep their activations beside the others'. */
bool px_parallel_recompute_partial(const px_parallel *p);

/* Whether gradients are reduced every micro-batch (ZeRO-2/3, sharded accumulation). */
bool px_parallel_reduce_per_mb(const px_parallel *p);
/* The schedule runs layers' weight gradients (W) apart from their input gradients (B). */
bool px_parallel_split_w(const px_parallel *p);

/* Ranks holding the same weights: data-parallel x context-parallel
 * (Megatron-Core's data-parallel group with CP). Gradients are reduced and
 * ZeRO shards model states over them. */
int64_t px_parallel_weight_dp(const px_parallel *p);
/* Context parallelism's sequence layout: the sequence is cut into 2 cp
 * chunks and CP rank r holds chunks r and 2 cp - 1 - r, in that order, so
 * every rank has the same share of the causal attention (Megatron-Core's
 * load balancing). The global position of row i of the s_local rows of
 * rank r (i < s_local = seq / cp). */
int64_t px_cp_position(int64_t cp, int64_t cp_rank, int64_t s_local, int64_t i);

/* Ranks holding the same experts: the expert-data-parallel group. Megatron-Core
 * folds a stage's tp x cp x dp ranks into etp x ep x edp for the MoE layers
 * (etp fastest, then ep), so edp = tp x cp x dp / (etp x ep); dp x cp / ep
 * with etp = tp. */
int64_t px_parallel_expert_dp(const px_parallel *p);

/* Ranks a unit's model states are sharded over: shard_group, or dp x cp when unset. */
int64_t px_parallel_shard_size(const px_parallel *p);
/* Whether model states are sharded over part of the DP (x CP) group and
 * replicated across the rest (shard_group < dp x cp). */
bool px_parallel_hybrid(const px_parallel *p);

/* Micro-batches per DP rank per step. */
int64_t px_parallel_microbatches(const px_parallel *p);

/* A step's layer passes, what the size of a plan's programs grows with:
 * micro-batches x (layers + pp x vpp model chunks); each pass is a block
 * instance or two of a stage's program (a layer's forward or backward, a
 * chunk's transfers), which the compiler builds and the simulator runs. */
int64_t px_parallel_layer_passes(const px_parallel *p, int64_t layers);
/* The most layer passes a plan may have, 2^21: at the limit a plan takes up
 * to about 1 GiB and 20 s to compile and simulate (ZeRO-3, which gathers
 * each layer for each micro-batch, the most; 1F1B a third of that). Llama 3
 * 405B's 2,048 micro-batches on 16 stages are 2^18.2. px_parallel_validate
 * refuses more. */
#define PX_PLAN_LAYER_PASSES_MAX ((int64_t)1 << 21)
/* The most tokens a micro-batch may have (mbs x seq), so that every tensor
 * size the compiler works out is exact in 64 bits: 2^32 tokens of logits
 * over the largest vocabulary a model may have (2^24) are 2^58 bytes in
 * fp32. A sequence of 1 M tokens is 2^20. */
#define PX_PLAN_MB_TOKENS_MAX ((int64_t)1 << 32)

/* Interleaved: the micro-batches run on one chunk before the next (a group;
 * the last group takes the rest): mb_group, or unset pp when pp divides the
 * micro-batches and otherwise the least count from pp whose last group is
 * empty or at least pp (Megatron-Core refuses a shorter one). 0 when there is
 * none (fewer micro-batches than pp). */
int64_t px_parallel_mb_group(const px_parallel *p);

/* Layers of each of the pp x vpp model chunks, in virtual-stage order
 * (out: pp x vpp entries): chunk_layers; or first/last_stage_layers with the
 * rest split evenly over the middle stages' chunks; or the default split.
 * Refuses, with a hint, a split that cannot be made. */
px_status px_parallel_chunk_layers(const px_parallel *p, int64_t layers, int64_t *out, px_err *err);
/* Parses "3,4,4,3" into chunk_layers. */
px_status px_parallel_parse_chunk_list(const char *s, px_parallel *p, px_err *err);
/* The dtype of activations and of every op but fp8's GEMMs: with fp8 its
 * base (bf16 unless fp8_base says fp32). */
px_dtype px_parallel_compute_dtype(const px_parallel *p);
/* The dtype whose peak the layers' GEMMs run at: fp8 for fp8 and mxfp8,
 * fp4 for nvfp4, the compute dtype otherwise. */
px_dtype px_parallel_gemm_dtype(const px_parallel *p);
/* Whether layer l (0-based) of a model of `layers` layers keeps its GEMMs out
 * of the quantized precision, in the compute dtype: one of the first
 * bf16_layers_start or last bf16_layers_end layers (Megatron-Core's
 * is_first_last_bf16_layer, megatron/core/fp8_utils.py). NVIDIA's NVFP4
 * recipe keeps about 16% of the linear layers in BF16, most of them in the
 * final blocks (arXiv 2509.25149). False without quantized GEMMs. */
bool px_parallel_layer_bf16(const px_parallel *p, int64_t layers, int64_t l);
/* Activation offload: whether layer l's kept activations go to the host (one of the first offload_act_layers). */
bool px_parallel_layer_offloaded(const px_parallel *p, int64_t l);
/* ... and the sets of layer activations Transformer Engine's offload keeps on the GPU at once: the model's layers
 * less the offloaded ones (get_cpu_offload_context's model_layers - num_layers): layer j's forward waits for
 * the copy of layer j - window, and layer l's copy back for the backward of layer l + window. */
int64_t px_parallel_offload_window(const px_parallel *p, int64_t layers);
/* Mixed precision: a compute dtype narrower than fp32, so fp32 master
 * weights (and the optimizer's 12 bytes a parameter). */
bool px_parallel_mixed(const px_parallel *p);
/* Adam's bytes a parameter: fp32 momentum and variance, plus an fp32 master copy with mixed precision. */
uint64_t px_parallel_optimizer_bytes(const px_parallel *p);
/* The gradient buffer's dtype (what DP reduces, what a bucket holds): fp32
 * with mixed precision and main_grad fp32, else the compute dtype. */
px_dtype px_parallel_grad_dtype(const px_parallel *p);
/* Elements one fp8 scale covers along a row (blockwise: 128), 0 for per-tensor scales. */
#define PX_FP8_BLOCK 128
/* The bytes of one quantized copy (codes and scales) of a tensor of elems
 * elements in rows of `row` under p's precision: fp8 1 B an element (blockwise
 * and an fp32 scale per 1 x 128 of a row); mxfp8 1 B and an E8M0 byte per
 * 1 x 32; nvfp4 half a byte (two E2M1 codes a byte), an E4M3 byte per 1 x 16
 * and the fp32 tensor scale. 0 without quantized GEMMs. */
uint64_t px_parallel_quant_bytes(const px_parallel *p, uint64_t elems, int64_t row);
/* The same for a sum of GEMM weights of elems elements (rows a multiple of
 * every block): nvfp4's 16 x 16 blocks keep their scale once per 1 x 16 as
 * the GEMM reads it; not counted: fp8 blockwise weights' 128 x 128 scales and
 * nvfp4's per-tensor ones (4 B a tensor). */
uint64_t px_parallel_quant_weight_bytes(const px_parallel *p, uint64_t elems);
/* The quantized copies of a tensor its GEMMs read, which a cast writes and
 * a weight's cache keeps: the row-wise one (the forward's operand) and the
 * column-wise one (a gradient contracts the other axis: a transposed copy,
 * or block scales along the columns); one copy serves both where the scale
 * is per-tensor and the GPU's fp8 GEMMs take any layout
 * (px_gpu_fp8_any_layout). 0 without quantized GEMMs. */
int px_parallel_quant_copies(const px_parallel *p, const px_gpu *g);
/* The bytes a cast of elems elements of in_bytes each (rows of row elements)
 * to the quantized format moves: its input read (twice where the scale comes
 * from the tensor's own amax first: fp8's current scaling, and nvfp4's
 * per-tensor scales, of x and of its Hadamard transform, in one pass), and
 * `copies` quantized copies written (px_parallel_quant_bytes a block-scaled
 * one, codes alone a per-tensor one). */
double px_parallel_cast_bytes(const px_parallel *p, uint64_t elems, int64_t row, int in_bytes, int copies);
/* Primary quantized weights (fp8_params, a quantized precision): the GEMM
 * weights held in their GEMMs' format only, the row-wise copy (codes and
 * scales, px_parallel_quant_weight_bytes) in place of the 16-bit weights,
 * the fp32 master in the optimizer. Transformer Engine's primary weights
 * keep both usages between steps (TransformerEngine d0067d0,
 * transformer_engine/pytorch/tensor/utils.py: _cast_master_weights_to_fp8_mxfp8_scaling
 * writes the row-wise and column-wise data and scales; post_all_gather_processing
 * makes nvfp4's column-wise copy, _nvfp4_2d_multi_tensor_transpose, and
 * fp8's transpose where the GEMMs need one). */
bool px_parallel_fp8_primary(const px_parallel *p);
/* The quantized copies of its GEMM weights a rank caches beside the weights
 * (px_parallel_quant_copies, less the one primary weights are themselves),
 * and the bytes a cast of n such weight elements moves: from primary fp8 or
 * nvfp4 weights the row-wise copy read and the others written; else (and
 * mxfp8's, gathered in the compute dtype: px_parallel_param_gather_bytes)
 * the 16-bit weights read (twice where their own amax scales them, as
 * px_parallel_cast_bytes reads an activation) and every copy written; 0
 * where there are none to make. */
int px_parallel_weight_copies(const px_parallel *p, const px_gpu *g);
double px_parallel_weight_cast_bytes(const px_parallel *p, const px_gpu *g, uint64_t n);
/* Bytes of n GEMM weight elements as ZeRO's parameter all-gather moves them
 * and the optimizer writes its shard of them: the compute dtype's, or with
 * primary weights (Megatron-LM d98e8a6, megatron/core/distributed/param_and_grad_buffer.py)
 * fp8's 1 byte (a uint8 param buffer); nvfp4's packed row-wise codes, half a
 * byte (fp4_param_gather: "remap packed rowwise bytes only"; every rank
 * makes the block scales from all-reduced amaxes, TE's
 * _cast_master_weights_to_nvfp4_2d, and the column-wise copy after the
 * gather); mxfp8's the compute dtype's: its param buffer is the gradient
 * buffer viewed as bf16 (reuse_grad_buf_for_mxfp8_param_ag; the optimizer
 * writes bf16 there, _copy_main_params_to_param_buffer in
 * megatron/core/optimizer/distrib_optimizer.py, and each rank casts what it
 * gathers into its MXFP8 weights, _post_param_sync), so the gathered
 * weights take no memory of their own, and it needs the full gradient
 * buffer and a gather: `zero` 1. */
uint64_t px_parallel_param_gather_bytes(const px_parallel *p, uint64_t n);
/* Delayed scaling: a tensor's scale comes from the largest amax of its last
 * 1024 steps (Transformer Engine's DelayedScaling defaults: amax_history_len
 * 1024, amax_compute_algo "max", margin 0). */
#define PX_FP8_AMAX_HISTORY 1024

/* Fine-tuning with adapters (lora or qlora): the base frozen. */
/* The fused attention's operand format (fp8_attention): bf16 without it, cuDNN's MXFP8 attention under mxfp8, its
 * per-tensor FP8 one under fp8 and nvfp4 (Transformer Engine's fp8_dpa follows the linear layers' recipe; NVIDIA's
 * NVFP4 recipes run the attention in FP8). A layer kept in bf16 keeps bf16 whatever this says. */
px_attn_format px_parallel_attn_format(const px_parallel *p);
/* Copies what defines the training, not its split: the global batch, the sequence, the precision and fp8
 * recipe, fine-tuning's method and adapters, the MTP modules and their loss's weight (a re-plan keeps them). */
void px_parallel_keep_training(px_parallel *to, const px_parallel *from);
bool px_parallel_lora(const px_parallel *p);

/* JSON: reads the fields present (unset otherwise); file names the source. */
px_status px_parallel_from_json(const cJSON *obj, const char *file, px_parallel *p, px_err *err);
cJSON *px_parallel_to_json(const px_parallel *p);
/* Parses "dp,zero,pp,tp,tp-bwd", "all", "none" into PX_OVERLAP_* bits ("tp" sets tp-bwd too). */
px_status px_overlap_parse(const char *s, int *bits, px_err *err);
/* Parses "core_attn,mla_up_proj,moe_act,layernorm,mlp" (any of them) into PX_RCM_* bits; writes them back
 * comma-separated into buf. */
px_status px_recompute_modules_parse(const char *s, int *bits, px_err *err);
char *px_recompute_modules_str(int bits, char *buf, size_t cap);
/* The modules selective recomputation redoes in p (0 without it). */
int px_parallel_recompute_modules(const px_parallel *p);
/* The modules that hold most of a MoE or MLA layer's activations, which DeepSeek-V3's recipes recompute: MLA's up
 * projections where m has MLA, the experts' activation where it has experts (0: neither). */
int px_parallel_heavy_modules(const px_model *m);

#endif
