/* Shared command-line flags: one option table, per-command groups. */
#include "cli/args.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "exec/result.h"
#include "plan/lora.h"
#include "plan/planfile.h"
#include "plan/runnable.h"
#include "report/export.h"
#include "report/flags.h"
#include "sim/power.h"
#include "sim/sweep.h"

typedef struct {
  const char *name;
  int has_arg;
  int short_opt; /* the short form and what getopt returns; >= 256: long only (or see short_aliases) */
  int group;
  const char *arg;
  const char *help;
} px_opt;

enum { OPT_BUCKET = 1000, OPT_OVERLAP, OPT_NO_OVERLAP, OPT_ATTENTION, OPT_GELU, OPT_ELEMENTWISE, OPT_MAX_TP, OPT_CKPT_EVERY, OPT_RESUME, OPT_GRADS,
       OPT_QUICK, OPT_LOSS_SCALE, OPT_OUTPUT, OPT_PREFETCH, OPT_NO_RESHARD, OPT_GRAD_ACCUM, OPT_MAIN_GRAD, OPT_FP8_PARAMS, OPT_FP8_ATTENTION,
       OPT_OFFLOAD_OPT, OPT_OFFLOAD_PARAMS, OPT_SHARD_GROUP, OPT_FIRST_STAGE, OPT_LAST_STAGE,
       OPT_CHUNK_LAYERS, OPT_MB_GROUP, OPT_CKPT_ASYNC, OPT_NO_PRUNE, OPT_SET, OPT_VARY, OPT_IMPORT, OPT_SOURCES, OPT_CP, OPT_CP_ALGO, OPT_EP, OPT_ETP, OPT_MOE_DISPATCH, OPT_MOE_ROUTER_PADDING, OPT_MTP_LAYERS, OPT_MTP_LOSS_SCALE, OPT_MOE_BUFFERS, OPT_MOE_IMBALANCE, OPT_CUDA_GRAPH,
       OPT_FROM, OPT_TO, OPT_ADAPTERS, OPT_FP8_RECIPE, OPT_FP8_BASE, OPT_FP8_LIBRARY, OPT_MAX_RESTARTS, OPT_MIN_RANKS, OPT_NP, OPT_HOSTFILE,
       OPT_MPIRUN, OPT_LOG, OPT_JITTER, OPT_BACKOFF, OPT_OVERWRITE, OPT_CKPT_KEEP, OPT_RANK, OPT_RUNNABLE_BY,
       OPT_FRAMEWORK, OPT_SUSTAIN, OPT_PRICE_KWH, OPT_FINETUNE, OPT_LORA_RANK, OPT_LORA_ALPHA, OPT_LORA_TARGETS,
       OPT_ADAPTER, OPT_BASE_PRECISION, OPT_RECOMPUTE_LAYERS, OPT_RECOMPUTE_METHOD, OPT_RECOMPUTE_MODULES,
       OPT_BASE_CKPT, OPT_BF16_START,
       OPT_BF16_END, OPT_OFFLOAD_ACT };

static const px_opt opts[] = {
    {"json", no_argument, 'j', PX_OPT_COMMON, NULL, "machine-readable JSON on stdout"},
    {"help", no_argument, 'h', PX_OPT_COMMON, NULL, "this help"},
    {"model", required_argument, 'm', PX_OPT_MODEL, "NAME|FILE", "model preset or JSON / HF config.json file"},
    {"seq", required_argument, 's', PX_OPT_MODEL, "N", "sequence length (default: the model's)"},
    {"cluster", required_argument, 'c', PX_OPT_CLUSTER, "NAME|FILE", "cluster preset or JSON file"},
    {"gpus", required_argument, 'g', PX_OPT_CLUSTER, "N", "number of GPUs"},
    {"nodes", required_argument, 'N', PX_OPT_CLUSTER, "N", "number of nodes (GPUs = nodes x gpus_per_node)"},
    {"set", required_argument, OPT_SET, PX_OPT_CLUSTER, "FIELD=VALUE",
     "what-if: override a cluster file field (repeatable), e.g. inter_node.nic_gbit_per_s=200"},
    {"jitter", required_argument, OPT_JITTER, PX_OPT_CLUSTER, "F",
     "per-GPU speed spread (std dev over the median, e.g. 0.0148); the slowest GPU paces each step; 0: off"},
    {"tp", required_argument, 't', PX_OPT_PLAN, "N", "tensor-parallel size"},
    {"pp", required_argument, 'p', PX_OPT_PLAN, "N", "pipeline-parallel size"},
    {"dp", required_argument, 'd', PX_OPT_PLAN, "N", "data-parallel size (default: GPUs / (tp cp pp))"},
    {"cp", required_argument, OPT_CP, PX_OPT_PLAN, "N", "context-parallel size: ranks splitting each sequence (1)"},
    {"cp-algo", required_argument, OPT_CP_ALGO, PX_OPT_PLAN, "A",
     "context parallelism's attention: ring (K/V around the ring, default) | all-gather | a2a (Ulysses)"},
    {"ep", required_argument, OPT_EP, PX_OPT_PLAN, "N", "expert parallelism: experts split over N of the dp x cp ranks (1)"},
    {"etp", required_argument, OPT_ETP, PX_OPT_PLAN, "N",
     "expert tensor parallelism: each expert's GEMMs split over N ranks (default tp; 1: whole experts, EP folded over the TP ranks too)"},
    {"moe-dispatch", required_argument, OPT_MOE_DISPATCH, PX_OPT_PLAN, "D",
     "tokens to the experts: a2a (all-to-all of the routed rows, default; hybridep with --cuda-graph full) | "
     "allgather (every token over EP) | "
     "deepep (DeepEP's kernels: a token once a rank and once a node) | hybridep (NVIDIA's HybridEP: DeepEP's "
     "figures, the experts' padding for quantized GEMMs in its dispatch)"},
    {"moe-router-padding", no_argument, OPT_MOE_ROUTER_PADDING, PX_OPT_PLAN, NULL,
     "with an fp8 or fp4 recipe, the router pads each expert's tokens to the quantized GEMMs' alignment, so the experts "
     "copy no padding (Megatron-Core's moe_router_padding_for_quantization; a2a, deepep, hybridep)"},
    {"mtp-layers", required_argument, OPT_MTP_LAYERS, PX_OPT_PLAN, "N",
     "train N of the model's multi-token prediction modules (DeepSeek-V3's one; Megatron-Core's mtp_num_layers) on the "
     "last pipeline stage: the next-but-one token's embedding, a decoder layer, the shared head and a second loss "
     "(default 0)"},
    {"mtp-loss-scale", required_argument, OPT_MTP_LOSS_SCALE, PX_OPT_PLAN, "X",
     "the MTP modules' loss weight in the objective (Megatron-Core's mtp_loss_scaling_factor; DeepSeek-V3 used 0.3, "
     "then 0.1; default 0.1)"},
    {"moe-buffers", required_argument, OPT_MOE_BUFFERS, PX_OPT_PLAN, "B",
     "what a dropless router's expert buffers hold: busiest (the busiest EP rank's rows at --moe-imbalance; plan, sim "
     "and sweep's default) | worst (every routing the router can make: run's default, so an imbalanced router never "
     "stops it)"},
    {"moe-imbalance", required_argument, OPT_MOE_IMBALANCE, PX_OPT_PLAN, "F",
     "tokens on the busiest EP rank's experts over the mean (1: a balanced router)"},
    {"cuda-graph", required_argument, OPT_CUDA_GRAPH, PX_OPT_PLAN, "G",
     "CUDA graphs: none (every kernel launched by the host, default) | layers (Megatron-Core's per-layer graphs: a "
     "layer's forward and backward one graph launch each; a MoE layer's attention and router, its experts eager) | "
     "full (Megatron-Core's full-iteration graph: a step's forwards and backwards one launch, nothing waits for the "
     "host; MoE: hybridep, its per-rank budget --moe-imbalance) | router (a MoE layer's pre-MLP norm, router and "
     "dispatcher preprocessing alone: its attention and experts eager)"},
    {"zero", required_argument, 'z', PX_OPT_PLAN, "0-3", "ZeRO stage"},
    {"sp", no_argument, 'S', PX_OPT_PLAN, NULL, "sequence parallelism"},
    {"mbs", required_argument, 'b', PX_OPT_PLAN, "N", "micro-batch size, sequences"},
    {"gbs", required_argument, 'B', PX_OPT_PLAN, "N", "global batch size, sequences"},
    {"schedule", required_argument, 'e', PX_OPT_PLAN, "S", "pipeline schedule: gpipe|1f1b|interleaved|zb-h1|zb-h2"},
    {"vpp", required_argument, 'v', PX_OPT_PLAN, "N", "model chunks per rank (interleaved)"},
    {"first-stage-layers", required_argument, OPT_FIRST_STAGE, PX_OPT_PLAN, "N",
     "layers of the first pipeline stage; the middle stages split the rest evenly (Megatron-Core)"},
    {"last-stage-layers", required_argument, OPT_LAST_STAGE, PX_OPT_PLAN, "N", "layers of the last pipeline stage"},
    {"layers-per-chunk", required_argument, OPT_CHUNK_LAYERS, PX_OPT_PLAN, "LIST",
     "layers of each of the pp x vpp chunks, chunk c of stage s at c pp + s (e.g. 3,4,4,3); the first and last may "
     "be 0, holding only the embedding or the loss (Megatron-Core's account_for_embedding/loss_in_pipeline_split)"},
    {"microbatch-group", required_argument, OPT_MB_GROUP, PX_OPT_PLAN, "N",
     "interleaved: micro-batches per chunk in turn (pp; Megatron-Core's microbatch_group_size_per_vp_stage)"},
    {"recompute", required_argument, 'r', PX_OPT_PLAN, "R", "activation recomputation: none|selective|full|op (op: torchtitan's per-op policy)"},
    {"recompute-layers", required_argument, OPT_RECOMPUTE_LAYERS, PX_OPT_PLAN, "N",
     "full recomputation of N layers (Megatron's recompute_num_layers): with block, the first N of each model chunk; "
     "with every, every N-th"},
    {"recompute-method", required_argument, OPT_RECOMPUTE_METHOD, PX_OPT_PLAN, "M",
     "which layers full recomputation covers: uniform (default; every layer) | block (--recompute-layers per chunk) | "
     "every (every N-th layer of a chunk, N from --recompute-layers: torchtitan's layer-wise selective AC)"},
    {"recompute-modules", required_argument, OPT_RECOMPUTE_MODULES, PX_OPT_PLAN, "LIST",
     "what selective recomputation redoes (Megatron's recompute_modules; implies --recompute selective): "
     "core_attn (default), mla_up_proj, moe_act, layernorm, mlp, comma-separated"},
    {"precision", required_argument, 'P', PX_OPT_PLAN, "P", "fp32|bf16|fp16|fp8|mxfp8|nvfp4 (16-bit: fp32 master weights; fp8: the layers' GEMMs; mxfp8, nvfp4: those GEMMs in Blackwell's block-scaled formats)"},
    {"fp8-recipe", required_argument, OPT_FP8_RECIPE, PX_OPT_PLAN, "R", "fp8 scaling: delayed (default) | current | blockwise"},
    {"fp8-base", required_argument, OPT_FP8_BASE, PX_OPT_PLAN, "D", "fp8, mxfp8, nvfp4: the dtype of all but the quantized GEMMs: bf16 (default; run --backend cpu: fp32) | fp32"},
    {"fp8-library", required_argument, OPT_FP8_LIBRARY, PX_OPT_PLAN, "L",
     "fp8, mxfp8: whose quantized linear layers run the plan: te (Transformer Engine: Megatron-LM, NeMo; default) | "
     "torchao (torchtitan's float8 and MX); under SP, TE gathers a row-parallel layer's output gradient as fp8 codes, "
     "torchao in 16 bits"},
    {"fp8-params", no_argument, OPT_FP8_PARAMS, PX_OPT_PLAN, NULL,
     "fp8, mxfp8, nvfp4: the GEMMs' weights held in their format only, no bf16 copy (Megatron-LM's fp8_param_gather, "
     "fp4_param_gather): ZeRO's parameter all-gathers in fp8 or fp4, mxfp8's in bf16 through the gradient buffer "
     "(zero 1); planned and simulated, the executors refuse it"},
    {"fp8-attention", no_argument, OPT_FP8_ATTENTION, PX_OPT_PLAN, NULL,
     "fp8, mxfp8, nvfp4: the fused attention in fp8 (Megatron-Core's fp8_dot_product_attention): cuDNN's FP8 "
     "attention at its measured rate (mxfp8: MXFP8's), Q, K, V and the output gradient quantized; the cpu backend "
     "emulates those, the cuda backend refuses it"},
    {"bf16-layers-start", required_argument, OPT_BF16_START, PX_OPT_PLAN, "N",
     "fp8 (current or blockwise), mxfp8, nvfp4: the model's first N layers' GEMMs in the compute dtype, unquantized "
     "(Megatron-Core's num_layers_at_start_in_bf16; 0 default)"},
    {"bf16-layers-end", required_argument, OPT_BF16_END, PX_OPT_PLAN, "N",
     "fp8 (current or blockwise), mxfp8, nvfp4: the model's last N layers' GEMMs unquantized (Megatron-Core's "
     "num_layers_at_end_in_bf16; NVIDIA's NVFP4 recipe keeps mostly final layers in BF16)"},
    {"finetune", required_argument, OPT_FINETUNE, PX_OPT_PLAN, "F",
     "none (pre-training, default) | full (every weight trained) | lora (frozen base, low-rank adapters trained) | "
     "qlora (lora on an NF4 base); run trains lora and qlora on the cpu backend (fp32) and on cuda"},
    {"lora-rank", required_argument, OPT_LORA_RANK, PX_OPT_PLAN, "R", "lora/qlora: the adapters' rank r (16)"},
    {"lora-alpha", required_argument, OPT_LORA_ALPHA, PX_OPT_PLAN, "A",
     "lora/qlora: the adapters' output is scaled by alpha / r (2 r); it changes no memory or time"},
    {"lora-targets", required_argument, OPT_LORA_TARGETS, PX_OPT_PLAN, "LIST",
     "lora/qlora: the linear layers given adapters: qkv,o,fc1,fc2 (default, fused as Megatron's) or q,k,v and "
     "gate,up one each (HF PEFT's), all"},
    {"adapter", required_argument, OPT_ADAPTER, PX_OPT_PLAN, "FILE",
     "lora from an HF PEFT adapter_config.json: its r, lora_alpha and target_modules (flags override)"},
    {"base-precision", required_argument, OPT_BASE_PRECISION, PX_OPT_PLAN, "P",
     "lora/qlora: the frozen weights' storage: bf16 (lora's default: the compute dtype) | fp8 (per-tensor E4M3) | nf4 "
     "(qlora's: 4.127 bits a weight, double quantisation), dequantised to the compute dtype before each GEMM"},
    {"attention", required_argument, OPT_ATTENTION, PX_OPT_PLAN, "A",
     "flash (fused, the GPU's own kernel: FlashAttention-3, cuDNN; default) | unfused (Megatron SC'21) | flash2 "
     "(fused, costed as FlashAttention-2's kernel: PyTorch's SDPA flash backend, flash-attn 2)"},
    {"gelu", required_argument, OPT_GELU, PX_OPT_PLAN, "G", "separate (its own op, default) | fused (GEMM epilogues)"},
    {"elementwise", required_argument, OPT_ELEMENTWISE, PX_OPT_PLAN, "E",
     "RMSNorm, RoPE, SwiGLU and loss kernels: fused (one a pass: Transformer Engine, Megatron-Core, torch.compile; "
     "default; a RoPE with YaRN's concentration factor, which TE's kernel lacks, as Megatron-Core's unfused PyTorch "
     "ops) | eager (PyTorch eager's composite ops, torchtitan without torch.compile: RMSNorm in fp32 over 8 kernels, "
     "RoPE through fp32 complex numbers, silu then a product, cross-entropy on the logits cast to fp32) | rope-unfused (Megatron-Core with apply_rope_fusion off, "
     "Megatron-Bridge's default outside its performance recipes: norms and SwiGLU fused, RoPE as PyTorch ops)"},
    {"bucket-mib", required_argument, OPT_BUCKET, PX_OPT_PLAN, "MIB", "data-parallel gradient bucket, may split a layer (25; from 1/1024)"},
    {"grad-accum", required_argument, OPT_GRAD_ACCUM, PX_OPT_PLAN, "M",
     "ZeRO-2/3: sharded (reduce every micro-batch, default) | full (reduce once a step, FSDP no_sync)"},
    {"prefetch", required_argument, OPT_PREFETCH, PX_OPT_PLAN, "N", "ZeRO-3: layers gathered ahead of use (1)"},
    {"no-reshard-after-forward", no_argument, OPT_NO_RESHARD, PX_OPT_PLAN, NULL,
     "ZeRO-3: keep gathered parameters from forward to backward (FSDP SHARD_GRAD_OP)"},
    {"shard-group", required_argument, OPT_SHARD_GROUP, PX_OPT_PLAN, "N",
     "ZeRO: shard model states over groups of N DP ranks, replicated across the groups (FSDP HYBRID_SHARD; dp)"},
    {"main-grad", required_argument, OPT_MAIN_GRAD, PX_OPT_PLAN, "G",
     "16-bit gradient buffer: param (its dtype, default) | fp32 (Megatron-LM's main_grad)"},
    {"offload-optimizer", required_argument, OPT_OFFLOAD_OPT, PX_OPT_PLAN, "D",
     "ZeRO-2/3: gradient shard, master and moments on the host, stepped there: none|cpu|nvme"},
    {"offload-params", required_argument, OPT_OFFLOAD_PARAMS, PX_OPT_PLAN, "D",
     "ZeRO-3: parameter shard on the host, fetched per layer: none|cpu|nvme"},
    {"offload-activations", required_argument, OPT_OFFLOAD_ACT, PX_OPT_PLAN, "N",
     "pp 1: the activations the model's first N layers keep for the backward copied to host memory during the "
     "forward and back before the backward, at most layers - N layers' on the GPU (Megatron-Core's "
     "cpu_offloading_num_layers; N <= layers - 2; 0 default)"},
    {"overlap", required_argument, OPT_OVERLAP, PX_OPT_PLAN, "LIST", "overlap these: dp,zero,pp,tp,tp-bwd,ep,all,none (all: every one but ep; ep: a MoE layer's token exchanges behind another micro-batch's compute, Megatron-Core's combined 1F1B, e.g. all,ep)"},
    {"no-overlap", required_argument, OPT_NO_OVERLAP, PX_OPT_PLAN, "LIST", "expose these: dp,zero,pp,tp,tp-bwd,ep,all"},
    {"plan", required_argument, 'f', PX_OPT_PLAN, "FILE", "read model, cluster and choices from a plan file"},
    {"save-plan", required_argument, 'o', PX_OPT_PLAN, "FILE", "write the resolved plan file"},
    {"graph", required_argument, 'G', PX_OPT_GRAPH, "FILE", "write the op graph as JSON"},
    {"dot", required_argument, 'D', PX_OPT_GRAPH, "FILE", "draw one micro-batch of stage 0 for Graphviz"},
    {"trace", required_argument, 'T', PX_OPT_SIM, "FILE", "write a Chrome trace (Perfetto)"},
    {"plot", required_argument, 'L', PX_OPT_SIM | PX_OPT_SWEEP, "DIR", "write plot data and PNG/SVG plots into DIR"},
    {"report", required_argument, 'R', PX_OPT_SWEEP, "DIR", "write plots and a self-contained HTML report into DIR"},
    {"top", required_argument, 'k', PX_OPT_SWEEP, "K", "plans to show (10)"},
    {"objective", required_argument, 'y', PX_OPT_SWEEP, "O",
     "rank by throughput|time|cost|memory|energy (energy: the site's MWh to train, with --tokens; else J a token)"},
    {"csv", required_argument, 'C', PX_OPT_SWEEP, "FILE", "write every evaluated plan as CSV"},
    {"tokens", required_argument, 'n', PX_OPT_SIM | PX_OPT_SWEEP, "T", "training tokens, e.g. 15T: days, GPU-hours, cost"},
    {"price", required_argument, 'u', PX_OPT_SIM | PX_OPT_SWEEP, "USD", "price per GPU-hour, with --tokens: the cost to train"},
    {"price-per-kwh", required_argument, OPT_PRICE_KWH, PX_OPT_SIM | PX_OPT_SWEEP, "USD",
     "price of a kWh at the site, with --tokens: the energy's cost (needs the cluster's gpu.power_w)"},
    {"mtbf-hours", required_argument, 'F', PX_OPT_SIM | PX_OPT_SWEEP, "H", "mean time between failures per GPU (0: none)"},
    {"restart-min", required_argument, 'W', PX_OPT_SIM | PX_OPT_SWEEP, "MIN", "minutes lost to each restart (15)"},
    {"threads", required_argument, 'x', PX_OPT_SWEEP | PX_OPT_RUN, "N",
     "sweep: simulation threads (one per core); run: BLAS threads per rank (the rank's cores)"},
    {"max-tp", required_argument, OPT_MAX_TP, PX_OPT_SWEEP, "N", "largest tp to sweep (default: GPUs per node)"},
    {"no-prune", no_argument, OPT_NO_PRUNE, PX_OPT_SWEEP, NULL,
     "simulate every plan that fits (else the table simulates what its top K needs, --plot and --report the best 50, "
     "each heatmap cell's best and the Pareto front, the rest shown by their bound; --csv and --json all)"},
    {"rank", required_argument, OPT_RANK, PX_OPT_SWEEP, "K", "with -o FILE: write the plan ranked K (1: the best, default)"},
    {"runnable-by", required_argument, OPT_RUNNABLE_BY, PX_OPT_SWEEP, "FW",
     "only plans this framework can run as planned: megatron|nemo|torchtitan|deepspeed (see parallax export), or this "
     "backend of parallax run: cpu|cuda (docs/parity.md)"},
    {"to", required_argument, OPT_FRAMEWORK, PX_OPT_EXPORT, "FW",
     "the framework: megatron (Megatron-LM arguments) | nemo (Megatron-Bridge overrides) | torchtitan (TOML) | "
     "deepspeed (JSON)"},
    {"vary", required_argument, OPT_VARY, PX_OPT_SWEEP, "FIELD=V1,V2,...",
     "what-if: the sweep for each value of a cluster field (as --set), best plan per value"},
    {"steps", required_argument, 'i', PX_OPT_RUN, "N", "train until N steps are done (10)"},
    {"data", required_argument, 'a', PX_OPT_RUN, "FILE", "tokens: .u16/.bin (uint16), .u32, or any text file as bytes"},
    {"seed", required_argument, 'E', PX_OPT_RUN | PX_OPT_MERGE, "K",
     "initialisation, data and dropout seed (1234; merge: the seed of the adapters' run, whose base it initialises)"},
    {"lr", required_argument, 'l', PX_OPT_RUN, "X", "AdamW learning rate (3e-3; 0: the weights stay as they are)"},
    {"loss-scale", required_argument, OPT_LOSS_SCALE, PX_OPT_RUN, "S",
     "fp16: initial loss scale (65536), halved on overflow, doubled after 2000 clean steps"},
    {"ckpt", required_argument, 'K', PX_OPT_RUN, "DIR",
     "checkpoint directory (written at the end; locked while the run uses it; one holding a checkpoint needs "
     "--resume or --overwrite)"},
    {"ckpt-every", required_argument, OPT_CKPT_EVERY, PX_OPT_RUN, "K", "also checkpoint every K steps"},
    {"ckpt-keep", required_argument, OPT_CKPT_KEEP, PX_OPT_RUN, "K",
     "keep the last K checkpoints: the latest in --ckpt DIR, the older in DIR/step-<N>/ (default: the latest alone)"},
    {"resume", no_argument, OPT_RESUME, PX_OPT_RUN, NULL, "continue from the checkpoint in --ckpt"},
    {"base-ckpt", required_argument, OPT_BASE_CKPT, PX_OPT_RUN | PX_OPT_MERGE, "DIR",
     "--finetune lora/qlora: the frozen base is the weights of this checkpoint (a pre-training or full run's, any "
     "split of the model; quantised at load for an nf4 or fp8 base), not the initialisation's (merge: the adapters' "
     "run's)"},
    {"overwrite", no_argument, OPT_OVERWRITE, PX_OPT_RUN | PX_OPT_RESHARD | PX_OPT_MERGE, NULL,
     "replace the checkpoint(s) --ckpt (run) or --to (reshard, merge) holds; the old one stays until the new one is "
     "written"},
    {"ckpt-async", no_argument, OPT_CKPT_ASYNC, PX_OPT_RUN | PX_OPT_SIM | PX_OPT_SWEEP, NULL,
     "run: write checkpoints from a host snapshot on a background thread; sim --tokens, sweep: cost them so"},
    {"profile", required_argument, 'Q', PX_OPT_RUN | PX_OPT_COMPARE, "FILE",
     "per-op times (JSON): run writes them, compare sets the simulator's prediction beside them"},
    {"backend", required_argument, 'U', PX_OPT_RUN | PX_OPT_CALIB, "B",
     "cpu|cuda (run: default cuda when a GPU is present; calibrate: cpu, the cores, or cuda, one GPU)"},
    {"dump-grads", required_argument, OPT_GRADS, PX_OPT_RUN, "FILE", "the first step's gradients, canonical order, fp32"},
    {"quick", no_argument, OPT_QUICK, PX_OPT_CALIB, NULL, "fewer shapes and sizes (seconds, for tests)"},
    {"sustain-s", required_argument, OPT_SUSTAIN, PX_OPT_CALIB, "S",
     "--backend cuda: seconds of one GEMM back to back for gpu.sustained_share (60; --quick: 0.5)"},
    {"sources", no_argument, OPT_SOURCES, PX_OPT_TOPO, NULL, "every figure of the cluster file with its source"},
    {"import", no_argument, OPT_IMPORT, PX_OPT_CALIB, NULL,
     "read the measurement files named after the flags (nccl-tests outputs, a GEMM CSV) into --cluster's file"},
    {"output", required_argument, OPT_OUTPUT, PX_OPT_CALIB, "FILE", "where to write the cluster file"},
    {"from", required_argument, OPT_FROM, PX_OPT_RESHARD, "DIR", "the checkpoint to re-split"},
    {"to", required_argument, OPT_TO, PX_OPT_RESHARD | PX_OPT_MERGE, "DIR", "where to write it for the plan the flags give"},
    {"adapters", required_argument, OPT_ADAPTERS, PX_OPT_MERGE, "DIR",
     "the checkpoint of a run with adapters (run --finetune lora --ckpt DIR) to merge into its base"},
    {"max-restarts", required_argument, OPT_MAX_RESTARTS, PX_OPT_LAUNCH, "N", "relaunches after failures before giving up (3)"},
    {"min-ranks", required_argument, OPT_MIN_RANKS, PX_OPT_LAUNCH, "M",
     "with fewer slots than the plan's ranks, go on with the best plan for as few as M (default: the plan's: no shrinking)"},
    {"np", required_argument, OPT_NP, PX_OPT_LAUNCH, "N", "ranks (default: the run flags' GPU count, else the slots)"},
    {"hostfile", required_argument, OPT_HOSTFILE, PX_OPT_LAUNCH, "FILE",
     "Open MPI hostfile given to mpirun; its slots= are read again before each attempt"},
    {"mpirun", required_argument, OPT_MPIRUN, PX_OPT_LAUNCH, "CMD", "the launcher and its own flags (mpirun)"},
    {"log", required_argument, OPT_LOG, PX_OPT_LAUNCH, "FILE", "append every attempt, failure, re-plan and restart as JSON lines"},
    {"backoff-s", required_argument, OPT_BACKOFF, PX_OPT_LAUNCH, "S",
     "seconds to wait before relaunching after a rank's failure, doubled for each further restart (see launch --help)"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

/* Short forms of long-only options whose letter means another option in
 * other groups: calibrate's -o is its --output, not --save-plan. */
static const struct {
  int letter, id;
} short_aliases[] = {{'o', OPT_OUTPUT}};

/* The short letter of opts[i] (0: none). */
static int letter_of(size_t i) {
  if (opts[i].short_opt < 256) return opts[i].short_opt;
  for (size_t k = 0; k < sizeof short_aliases / sizeof short_aliases[0]; k++)
    if (short_aliases[k].id == opts[i].short_opt) return short_aliases[k].letter;
  return 0;
}

void px_args_print_help(int groups) {
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].group & groups)) continue;
    char lhs[64];
    char shortf[8] = "    ";
    int letter = letter_of(i);
    if (letter) snprintf(shortf, sizeof shortf, "-%c, ", letter);
    snprintf(lhs, sizeof lhs, "%s--%s%s%s", shortf, opts[i].name, opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
    printf("  %-30s %s\n", lhs, opts[i].help);
  }
}

_Static_assert(PX_OPT_MERGE == 1 << (PX_OPT_GROUP_COUNT - 1), "PX_OPT_GROUP_COUNT counts every group");

const char *px_args_group_title(int group) {
  static const char *const titles[PX_OPT_GROUP_COUNT] = {
      "Every command", "Model", "Cluster",     "Plan",     "Op graph", "Simulation output", "Sweep",
      "Run",           "Calibration", "Topology", "Reshard",  "Launch",   "Export",            "Compare",
      "Merge"};
  for (int i = 0; i < PX_OPT_GROUP_COUNT; i++)
    if (group == 1 << i) return titles[i];
  return "?";
}

void px_args_md_cell(const char *s, bool code) {
  for (; *s; s++) {
    if (*s == '|' || (!code && (*s == '<' || *s == '>'))) putchar('\\');
    putchar(*s);
  }
}

void px_args_print_markdown(int group) {
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].group & group)) continue;
    int letter = letter_of(i);
    printf("| ");
    if (letter) printf("`-%c`, ", letter);
    printf("`--%s` | ", opts[i].name);
    if (opts[i].arg) {
      putchar('`');
      px_args_md_cell(opts[i].arg, true);
      putchar('`');
    }
    printf(" | ");
    px_args_md_cell(opts[i].help, false);
    printf(" |\n");
  }
}

static px_status parse_enum(const char *flag, const char *s, const char *const *names, int n, int *out, px_err *err) {
  for (int i = 0; i < n; i++) {
    if (!strcmp(s, names[i])) {
      *out = i;
      return PX_OK;
    }
  }
  char choices[128] = "";
  for (int i = 0; i < n; i++) snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s", i ? "|" : "", names[i]);
  return px_err_set(err, PX_ERR_INPUT, "--%s: '%.64s' is not one of %s", flag, s, choices);
}

static px_status parse_number(const char *flag, const char *s, double min, double max, double *out, px_err *err) {
  double v;
  if (px_parse_count(s, &v, err)) return px_err_prefix(err, "%s", flag);
  if (!(v >= min && v <= max)) return px_err_set(err, PX_ERR_INPUT, "%s: %.64s is out of range [%g, %g]", flag, s, min, max);
  *out = v;
  return PX_OK;
}

px_status px_args_parse(px_args *a, const char *command, int groups, int argc, char **argv, px_err *err) {
  memset(a, 0, sizeof *a);
  a->command = command;
  px_parallel_unset(&a->par);
  a->objective = -1;
  a->seed = -1;
  a->mtbf_hours = -1;
  a->restart_min = -1;
  a->max_restarts = -1;
  a->backoff_s = -1;
  a->jitter = -1;
  a->lr = -1;
  a->runnable_by = a->framework = -1;
  groups |= PX_OPT_COMMON;
  struct option lopts[NOPTS + 1];
  char shorts[NOPTS * 2 + 2];
  size_t nl = 0, ns = 0;
  shorts[ns++] = ':';
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].group & groups)) continue;
    lopts[nl++] = (struct option){opts[i].name, opts[i].has_arg, NULL, opts[i].short_opt};
    int letter = letter_of(i);
    if (letter) {
      shorts[ns++] = (char)letter;
      if (opts[i].has_arg == required_argument) shorts[ns++] = ':';
    }
  }
  lopts[nl] = (struct option){0, 0, 0, 0};
  shorts[ns] = '\0';

  optind = 0; /* full reset, so tests may parse several times */
  opterr = 0;
  px_status st = PX_OK;
  int c, li;
  int64_t v;
  px_parallel *p = &a->par;
  int no_overlap = 0;
  while (!st && (c = getopt_long(argc, argv, shorts, lopts, &li)) != -1) {
    for (size_t i = 0; i < NOPTS; i++) /* an aliased letter stands for its option's id */
      if (opts[i].short_opt >= 256 && (opts[i].group & groups) && letter_of(i) == c) c = opts[i].short_opt;
    switch (c) {
      case 'j': a->json = true; break;
      case 'h': a->help = true; break;
      case 'm': a->model = optarg; break;
      case 'c': a->cluster = optarg; break;
      case OPT_SET:
        if (a->nsets == PX_ARGS_SETS_MAX)
          st = px_err_set(err, PX_ERR_INPUT, "--set: at most %d fields", PX_ARGS_SETS_MAX);
        else
          a->sets[a->nsets++] = optarg;
        break;
      case OPT_JITTER: st = parse_number("--jitter", optarg, 0, 0.5, &a->jitter, err); break;
      case 'g': st = px_parse_int(optarg, "--gpus", 1, 1 << 24, &a->gpus, err); break;
      case 'N': st = px_parse_int(optarg, "--nodes", 1, 1 << 24, &a->nodes, err); break;
      case 's': st = px_parse_int(optarg, "--seq", 1, 1 << 24, &p->seq, err); break;
      case 't': st = px_parse_int(optarg, "--tp", 1, 1 << 24, &p->tp, err); break;
      case 'p': st = px_parse_int(optarg, "--pp", 1, 1 << 24, &p->pp, err); break;
      case 'd': st = px_parse_int(optarg, "--dp", 1, 1 << 24, &p->dp, err); break;
      case OPT_CP: st = px_parse_int(optarg, "--cp", 1, 1 << 20, &p->cp, err); break;
      case OPT_CP_ALGO: st = parse_enum("cp-algo", optarg, px_cp_algo_names, PX_CP_ALGO_COUNT, &p->cp_algo, err); break;
      case OPT_EP: st = px_parse_int(optarg, "--ep", 1, 1 << 20, &p->ep, err); break;
      case OPT_ETP: st = px_parse_int(optarg, "--etp", 1, 1 << 20, &p->etp, err); break;
      case OPT_MOE_DISPATCH:
        st = parse_enum("moe-dispatch", optarg, px_moe_dispatch_names, PX_MOE_DISPATCH_COUNT, &p->moe_dispatch, err);
        break;
      case OPT_MOE_BUFFERS:
        st = parse_enum("moe-buffers", optarg, px_moe_buffers_names, PX_MOE_BUFFERS_COUNT, &p->moe_buffers, err);
        break;
      case OPT_MOE_IMBALANCE: st = parse_number("--moe-imbalance", optarg, 1, 1e6, &p->moe_imbalance, err); break;
      case OPT_CUDA_GRAPH: st = parse_enum("cuda-graph", optarg, px_cuda_graph_names, PX_GRAPH_COUNT, &p->cuda_graph, err); break;
      case 'z':
        st = px_parse_int(optarg, "--zero", 0, 3, &v, err);
        p->zero = (int)v;
        break;
      case 'S': p->sp = 1; break;
      case 'b': st = px_parse_int(optarg, "--mbs", 1, (int64_t)1 << 30, &p->mbs, err); break;
      case 'B': st = px_parse_int(optarg, "--gbs", 1, (int64_t)1 << 40, &p->gbs, err); break;
      case 'v': st = px_parse_int(optarg, "--vpp", 1, 1 << 16, &p->vpp, err); break;
      case 'e': st = parse_enum("schedule", optarg, px_schedule_names, PX_SCHED_COUNT, &p->schedule, err); break;
      case 'r': st = parse_enum("recompute", optarg, px_recompute_names, PX_RECOMPUTE_COUNT, &p->recompute, err); break;
      case OPT_RECOMPUTE_LAYERS:
        st = px_parse_int(optarg, "--recompute-layers", 1, 1 << 24, &p->recompute_layers, err);
        break;
      case OPT_RECOMPUTE_METHOD:
        st = parse_enum("recompute-method", optarg, px_recompute_method_names, PX_RECOMPUTE_METHOD_COUNT,
                        &p->recompute_method, err);
        break;
      case 'P': st = parse_enum("precision", optarg, px_precision_names, PX_PREC_COUNT, &p->precision, err); break;
      case OPT_FP8_RECIPE:
        st = parse_enum("fp8-recipe", optarg, px_fp8_recipe_names, PX_FP8_RECIPE_COUNT, &p->fp8_recipe, err);
        break;
      case OPT_FP8_BASE: st = parse_enum("fp8-base", optarg, px_fp8_base_names, PX_FP8_BASE_COUNT, &p->fp8_base, err); break;
      case OPT_FP8_LIBRARY:
        st = parse_enum("fp8-library", optarg, px_fp8_library_names, PX_FP8_LIB_COUNT, &p->fp8_library, err);
        break;
      case OPT_FP8_PARAMS: p->fp8_params = 1; break;
      case OPT_FP8_ATTENTION: p->fp8_attention = 1; break;
      case OPT_MOE_ROUTER_PADDING: p->moe_router_padding = 1; break;
      case OPT_MTP_LAYERS: st = px_parse_int(optarg, "--mtp-layers", 0, 1000, &p->mtp_layers, err); break;
      case OPT_MTP_LOSS_SCALE:
        st = parse_number("--mtp-loss-scale", optarg, PX_MTP_LOSS_SCALE_MIN, PX_MTP_LOSS_SCALE_MAX, &p->mtp_loss_scale, err);
        break;
      case OPT_BF16_START: st = px_parse_int(optarg, "--bf16-layers-start", 0, 1 << 24, &p->bf16_layers_start, err); break;
      case OPT_BF16_END: st = px_parse_int(optarg, "--bf16-layers-end", 0, 1 << 24, &p->bf16_layers_end, err); break;
      case OPT_OFFLOAD_ACT:
        st = px_parse_int(optarg, "--offload-activations", 0, 1 << 24, &p->offload_act_layers, err);
        break;
      case OPT_FINETUNE: st = parse_enum("finetune", optarg, px_finetune_names, PX_FT_COUNT, &p->finetune, err); break;
      case OPT_LORA_RANK: st = px_parse_int(optarg, "--lora-rank", 1, PX_LORA_RANK_MAX, &p->lora_rank, err); break;
      case OPT_LORA_ALPHA: st = parse_number("--lora-alpha", optarg, 1e-6, 1e9, &p->lora_alpha, err); break;
      case OPT_RECOMPUTE_MODULES:
        if ((st = px_recompute_modules_parse(optarg, &p->recompute_modules, err)))
          px_err_prefix(err, "--recompute-modules");
        break;
      case OPT_LORA_TARGETS:
        if ((st = px_lora_targets_parse(optarg, &p->lora_targets, err))) px_err_prefix(err, "--lora-targets");
        break;
      case OPT_ADAPTER: a->adapter_file = optarg; break;
      case OPT_BASE_PRECISION:
        st = parse_enum("base-precision", optarg, px_base_precision_names, PX_BASE_COUNT, &p->base_precision, err);
        break;
      case OPT_ATTENTION:
        st = parse_enum("attention", optarg, px_attention_names, PX_ATTN_COUNT, &p->attention, err);
        break;
      case OPT_GELU: st = parse_enum("gelu", optarg, px_gelu_names, PX_GELU_COUNT, &p->gelu, err); break;
      case OPT_ELEMENTWISE:
        st = parse_enum("elementwise", optarg, px_elementwise_names, PX_ELEMWISE_COUNT, &p->elementwise, err);
        break;
      case OPT_BUCKET: {
        double mib = 0;
        st = parse_number("--bucket-mib", optarg, 1.0 / 1024, 1 << 20, &mib, err); /* from 1 KiB, as plan files */
        p->bucket_bytes = (uint64_t)(mib * (1 << 20));
        break;
      }
      case OPT_GRAD_ACCUM:
        st = parse_enum("grad-accum", optarg, px_grad_accum_names, PX_ACCUM_COUNT, &p->grad_accum, err);
        break;
      case OPT_PREFETCH: st = px_parse_int(optarg, "--prefetch", 0, 64, &p->prefetch, err); break;
      case OPT_NO_RESHARD: p->reshard = 0; break;
      case OPT_FIRST_STAGE:
        st = px_parse_int(optarg, "--first-stage-layers", 1, 1 << 24, &p->first_stage_layers, err);
        break;
      case OPT_LAST_STAGE: st = px_parse_int(optarg, "--last-stage-layers", 1, 1 << 24, &p->last_stage_layers, err); break;
      case OPT_CHUNK_LAYERS: st = px_parallel_parse_chunk_list(optarg, p, err); break;
      case OPT_MB_GROUP: st = px_parse_int(optarg, "--microbatch-group", 1, (int64_t)1 << 40, &p->mb_group, err); break;
      case OPT_SHARD_GROUP: st = px_parse_int(optarg, "--shard-group", 1, 1 << 24, &p->shard_group, err); break;
      case OPT_MAIN_GRAD: st = parse_enum("main-grad", optarg, px_main_grad_names, PX_MAIN_GRAD_COUNT, &p->main_grad, err); break;
      case OPT_OFFLOAD_OPT:
        st = parse_enum("offload-optimizer", optarg, px_offload_names, PX_OFFLOAD_COUNT, &p->offload_opt, err);
        break;
      case OPT_OFFLOAD_PARAMS:
        st = parse_enum("offload-params", optarg, px_offload_names, PX_OFFLOAD_COUNT, &p->offload_params, err);
        break;
      case OPT_OVERLAP: {
        int bits = 0;
        st = px_overlap_parse(optarg, &bits, err);
        p->overlap = (p->overlap < 0 ? 0 : p->overlap) | bits;
        break;
      }
      case OPT_NO_OVERLAP: st = px_overlap_parse(optarg, &no_overlap, err); break;
      case 'f': a->plan_file = optarg; break;
      case 'o': a->save_plan = optarg; break;
      case 'G': a->graph_file = optarg; break;
      case 'D': a->dot_file = optarg; break;
      case 'T': a->trace_file = optarg; break;
      case 'L': a->plot_dir = optarg; break;
      case 'R': a->report_dir = optarg; break;
      case 'C': a->csv_file = optarg; break;
      case 'k': st = px_parse_int(optarg, "--top", 1, 1000000, &a->top, err); break;
      case 'x': st = px_parse_int(optarg, "--threads", 1, 256, &a->threads, err); break;
      case OPT_MAX_TP: st = px_parse_int(optarg, "--max-tp", 1, 1 << 20, &a->max_tp, err); break;
      case OPT_VARY: a->vary = optarg; break;
      case OPT_RANK: st = px_parse_int(optarg, "--rank", 1, 1000000, &a->rank, err); break;
      case OPT_RUNNABLE_BY: { /* a framework, or a backend after them */
        const char *names[PX_FW_COUNT + PX_RUN_BACKEND_COUNT];
        for (int i = 0; i < PX_FW_COUNT + PX_RUN_BACKEND_COUNT; i++)
          names[i] = i < PX_FW_COUNT ? px_framework_names[i] : px_run_backend_names[i - PX_FW_COUNT];
        st = parse_enum("runnable-by", optarg, names, PX_FW_COUNT + PX_RUN_BACKEND_COUNT, &a->runnable_by, err);
        break;
      }
      case OPT_FRAMEWORK: st = parse_enum("to", optarg, px_framework_names, PX_FW_COUNT, &a->framework, err); break;
      case 'y': st = parse_enum("objective", optarg, px_objective_names, PX_OBJ_COUNT, &a->objective, err); break;
      case 'n':
        st = px_parse_count(optarg, &a->tokens, err);
        if (!st && !(a->tokens > 0)) st = px_err_set(err, PX_ERR_INPUT, "--tokens: must be positive");
        if (st) px_err_prefix(err, "--tokens");
        break;
      case 'u':
        st = parse_number("--price", optarg, 0, 1e9, &a->price, err);
        if (!st && !(a->price > 0)) st = px_err_set(err, PX_ERR_INPUT, "--price: must be positive (USD per GPU-hour)");
        break;
      case OPT_PRICE_KWH:
        st = parse_number("--price-per-kwh", optarg, 0, 1e6, &a->price_per_kwh, err);
        if (!st && !(a->price_per_kwh > 0)) st = px_err_set(err, PX_ERR_INPUT, "--price-per-kwh: must be positive (USD per kWh)");
        break;
      case 'i': st = px_parse_int(optarg, "--steps", 1, PX_TRAIN_STEPS_MAX, &a->steps, err); break;
      case 'a': a->data_file = optarg; break;
      case 'E': st = px_parse_int(optarg, "--seed", 0, INT64_MAX / 2, &a->seed, err); break;
      case 'l': st = parse_number("--lr", optarg, 0, 10, &a->lr, err); break;
      case OPT_LOSS_SCALE: st = parse_number("--loss-scale", optarg, 1, 1e30, &a->loss_scale, err); break;
      case 'K': a->ckpt_dir = optarg; break;
      case OPT_CKPT_EVERY: st = px_parse_int(optarg, "--ckpt-every", 1, PX_TRAIN_STEPS_MAX, &a->ckpt_every, err); break;
      case OPT_RESUME: a->resume = true; break;
      case OPT_BASE_CKPT: a->base_ckpt = optarg; break;
      case OPT_OVERWRITE: a->overwrite = true; break;
      case OPT_CKPT_KEEP: st = px_parse_int(optarg, "--ckpt-keep", 1, 1000000, &a->ckpt_keep, err); break;
      case OPT_CKPT_ASYNC: a->ckpt_async = true; break;
      case OPT_NO_PRUNE: a->no_prune = true; break;
      case 'Q': a->profile_file = optarg; break;
      case 'U': a->backend = optarg; break;
      case OPT_GRADS: a->grads_file = optarg; break;
      case OPT_QUICK: a->quick = true; break;
      case OPT_SUSTAIN: st = parse_number("--sustain-s", optarg, 0.01, 3600, &a->sustain_s, err); break;
      case OPT_IMPORT: a->import = true; break;
      case OPT_SOURCES: a->sources = true; break;
      case OPT_OUTPUT: a->output = optarg; break;
      case OPT_FROM: a->from_dir = optarg; break;
      case OPT_TO: a->to_dir = optarg; break;
      case OPT_ADAPTERS: a->adapters_dir = optarg; break;
      case OPT_MAX_RESTARTS: st = px_parse_int(optarg, "--max-restarts", 0, 1000000, &a->max_restarts, err); break;
      case OPT_MIN_RANKS: st = px_parse_int(optarg, "--min-ranks", 1, 1 << 24, &a->min_ranks, err); break;
      case OPT_NP: st = px_parse_int(optarg, "--np", 1, 1 << 24, &a->np, err); break;
      case OPT_HOSTFILE: a->hostfile = optarg; break;
      case OPT_MPIRUN: a->mpirun = optarg; break;
      case OPT_LOG: a->log_file = optarg; break;
      case OPT_BACKOFF: st = parse_number("--backoff-s", optarg, 0, 3600, &a->backoff_s, err); break;
      case 'F': st = parse_number("--mtbf-hours", optarg, 0, 1e12, &a->mtbf_hours, err); break;
      case 'W': st = parse_number("--restart-min", optarg, 0, 1e9, &a->restart_min, err); break;
      case ':': st = px_err_set(err, PX_ERR_INPUT, "%s: option %s needs a value", command, argv[optind - 1]); break;
      default:
        st = px_err_set(err, PX_ERR_INPUT, "%s: unknown option '%s' (see %s --help)", command,
                        argv[optind - 1 > 0 ? optind - 1 : 0], command);
        break;
    }
  }
  if (st) return st;
  if (no_overlap) p->overlap = (p->overlap < 0 ? PX_OVERLAP_DEFAULT : p->overlap) & ~no_overlap;
  a->npos = argc - optind;
  a->pos = argv + optind;
  return PX_OK;
}

/* The option of `groups` a long name (or an unambiguous prefix of one) means; -1: none. */
static int find_long(const char *name, size_t len, int groups) {
  int hit = -1, hits = 0;
  for (size_t i = 0; i < NOPTS; i++) {
    if (!(opts[i].group & groups) || strncmp(opts[i].name, name, len) != 0) continue;
    if (strlen(opts[i].name) == len) return (int)i;
    hit = (int)i, hits++;
  }
  return hits == 1 ? hit : -1;
}

bool px_args_plan_choice(const char *name) {
  int o = find_long(name, strlen(name), PX_OPT_PLAN);
  return o >= 0 && !strcmp(opts[o].name, name) && strcmp(name, "save-plan") != 0;
}

static int find_letter(int c, int groups) {
  for (size_t i = 0; i < NOPTS; i++)
    if ((opts[i].group & groups) && letter_of(i) == c) return (int)i;
  return -1;
}

size_t px_args_without_room(int argc, char **argv) {
  size_t n = 1;
  for (int i = 0; i < argc; i++) n += strlen(argv[i]) > 1 ? strlen(argv[i]) : 1; /* a bundle: a token a letter at most */
  return n;
}

int px_args_without(int argc, char **argv, int groups, bool (*drop)(const char *name), char **out) {
  static char singles[128][3]; /* "-X": a bundle's letters one by one */
  groups |= PX_OPT_COMMON;
  int n = 0;
  for (int i = 0; i < argc; i++) {
    const char *t = argv[i];
    if (i == 0 || t[0] != '-' || !t[1]) { /* the command, a positional */
      out[n++] = argv[i];
      continue;
    }
    if (!strcmp(t, "--")) { /* the end of the options */
      while (i < argc) out[n++] = argv[i++];
      break;
    }
    if (t[1] == '-') {
      const char *eq = strchr(t + 2, '=');
      int o = find_long(t + 2, eq ? (size_t)(eq - t - 2) : strlen(t + 2), groups);
      bool value_next = o >= 0 && opts[o].has_arg == required_argument && !eq && i + 1 < argc;
      if (o >= 0 && drop(opts[o].name)) {
        i += value_next;
      } else {
        out[n++] = argv[i];
        if (value_next) out[n++] = argv[++i];
      }
      continue;
    }
    /* short letters: each a flag, until one that takes a value (the rest of the token, or the next) */
    bool any_gone = false, value_next = false;
    for (const char *c = t + 1; *c; c++) {
      int o = find_letter((unsigned char)*c, groups);
      any_gone |= o >= 0 && drop(opts[o].name);
      if (o >= 0 && opts[o].has_arg == required_argument) {
        value_next = !c[1] && i + 1 < argc;
        break;
      }
    }
    if (!any_gone) { /* the token as it is */
      out[n++] = argv[i];
      if (value_next) out[n++] = argv[++i];
      continue;
    }
    for (const char *c = t + 1; *c; c++) {
      int o = find_letter((unsigned char)*c, groups);
      bool takes = o >= 0 && opts[o].has_arg == required_argument, gone = o >= 0 && drop(opts[o].name);
      bool next = takes && !c[1] && i + 1 < argc; /* its value is the next token */
      if (!gone) {
        unsigned char u = (unsigned char)*c & 127;
        singles[u][0] = '-', singles[u][1] = (char)u;
        out[n++] = singles[u];
        if (takes) out[n++] = next ? argv[i + 1] : (char *)(c + 1);
      }
      if (takes) {
        i += next;
        break;
      }
    }
  }
  out[n] = NULL;
  return n;
}

px_status px_args_cluster_finish(const px_args *a, px_cluster *c, int64_t gpus, px_err *err) {
  px_status st = PX_OK;
  for (int i = 0; i < a->nsets && !st; i++) st = px_cluster_set_field(c, a->sets[i], err);
  if (!st && a->jitter >= 0) c->gpu.jitter = a->jitter;
  return st ? st : px_cluster_set_size(c, gpus, a->nodes, err);
}

px_status px_args_load(px_args *a, px_model *m, px_cluster *c, px_err *err) {
  px_status st;
  px_planfile *pf = NULL;
  if (a->plan_file) {
    pf = px_calloc(1, sizeof *pf, err);
    if (!pf) return PX_ERR_RUNTIME;
    if ((st = px_planfile_load(a->plan_file, pf, err))) goto done;
    px_parallel_fill_unset(&a->par, &pf->par); /* flags override the file field by field */
  }
  if (m) {
    if (a->model) {
      if ((st = px_model_load(a->model, m, err))) goto done;
    } else if (pf && pf->has_model) {
      *m = pf->model;
    } else {
      st = px_err_set(err, PX_ERR_INPUT, "%s: --model is required (see `parallax models`)", a->command);
      goto done;
    }
  }
  if (c) {
    if (a->cluster) {
      if ((st = px_cluster_load(a->cluster, c, err))) goto done;
    } else if (pf && pf->has_cluster) {
      *c = pf->cluster;
    } else {
      st = px_err_set(err, PX_ERR_INPUT, "%s: --cluster is required (see `parallax topologies`)", a->command);
      goto done;
    }
    if ((st = px_args_cluster_finish(a, c, a->gpus ? a->gpus : (!a->nodes && pf ? pf->gpus : 0), err))) goto done;
  }
  if (m && a->adapter_file && (st = px_lora_adapter_read(a->adapter_file, m->mlp == PX_MLP_SWIGLU, &a->par, err)))
    goto done;
  if (m && c) px_parallel_resolve(&a->par, m, c);
  st = PX_OK;
done:
  free(pf);
  return st;
}

px_status px_args_train(const px_args *a, const px_cluster *c, px_sweep_opts *o, px_err *err) {
  if (a->price > 0 && !(a->tokens > 0))
    return px_err_set(err, PX_ERR_INPUT, "--price needs --tokens T: the cost is the GPU-hours to train T tokens times "
                      "the price");
  if (a->price_per_kwh > 0 && !(a->tokens > 0))
    return px_err_set(err, PX_ERR_INPUT, "--price-per-kwh needs --tokens T: the cost is the energy to train T tokens "
                      "times the price");
  if (a->price_per_kwh > 0 && !px_power_known(c))
    return px_err_set(err, PX_ERR_INPUT, "--price-per-kwh: cluster %s gives no gpu.power_w (the GPUs' draw), so no "
                      "energy; add its power figures to the file or --set gpu.power_w=W", c->name);
  o->tokens = a->tokens;
  o->price_per_gpu_hour = a->price;
  o->price_per_kwh = a->price_per_kwh;
  if (a->mtbf_hours >= 0) o->mtbf_hours = a->mtbf_hours;
  if (a->restart_min >= 0) o->restart_s = a->restart_min * 60;
  o->ckpt_async = a->ckpt_async;
  return PX_OK;
}

px_status px_args_plan(px_args *a, px_model *m, px_cluster *c, px_plan *plan, px_err *err) {
  px_status st = px_args_load(a, m, c, err);
  return st ? st : px_plan_compile(plan, m, c, &a->par, err);
}

int px_cli_start(px_args *a, const char *command, int groups, int help_groups, const char *usage, int argc,
                 char **argv) {
  px_err err = {0};
  px_status st = px_args_parse(a, command, groups, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a->help) {
    fputs(usage, stdout);
    px_args_print_help(help_groups);
    return 0;
  }
  if (a->npos && !a->import) /* calibrate --import names its files */
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "%s takes no positional arguments", command), &err);
  return -1;
}

/* Phrases of a field and its value that one flag says (px_parallel.reshard false). */
static const struct {
  const char *phrase, *flag;
} renamed_phrases[] = {{"`reshard_after_forward` false", "--no-reshard-after-forward"}};

/* The flag that sets the field of n bytes at f, or NULL. */
static const char *flag_of(const char *f, size_t n) {
  char name[64];
  if (n >= sizeof name) return NULL;
  px_report_field_flag(f, n, name, sizeof name); /* px_parallel.fp8_recipe: --fp8-recipe */
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (!strcmp(opts[i].name, name)) return opts[i].name;
  return NULL;
}

void px_cli_words(const char *msg, char *out, size_t cap) {
  size_t o = 0;
  if (!cap) return;
  for (const char *p = msg; *p && o + 1 < cap;) {
    const char *end = *p == '`' ? strchr(p + 1, '`') : NULL;
    size_t n = end ? (size_t)(end - p - 1) : 0;
    const char *phrase = NULL;
    size_t phrase_len = 0;
    for (size_t i = 0; i < sizeof renamed_phrases / sizeof renamed_phrases[0] && !phrase && end; i++)
      if (!strncmp(p, renamed_phrases[i].phrase, (phrase_len = strlen(renamed_phrases[i].phrase))))
        phrase = renamed_phrases[i].flag;
    if (!phrase && (!n || strspn(p + 1, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)) { /* not a field: as it is */
      out[o++] = *p++;
      continue;
    }
    const char *flag = phrase ? NULL : flag_of(p + 1, n);
    int w = phrase ? snprintf(out + o, cap - o, "%s", phrase)
            : flag ? snprintf(out + o, cap - o, "--%s", flag)
                   : snprintf(out + o, cap - o, "%.*s", (int)n, p + 1);
    o = w < 0 || (size_t)w >= cap - o ? cap - 1 : o + (size_t)w;
    p = phrase ? p + phrase_len : end + 1;
  }
  out[o] = '\0';
}

int px_cli_fail(px_status st, const px_err *err) {
  char msg[sizeof err->msg + 256];
  px_cli_words(err->msg[0] ? err->msg : "failed", msg, sizeof msg);
  fprintf(stderr, "parallax: %s\n", msg);
  return st ? (int)st : 1;
}
