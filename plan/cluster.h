/* Cluster specification: the GPU, the node, the intra-node fabric (NVLink /
 * NVSwitch) and the inter-node network (NICs, fat tree), host and storage. */
#ifndef PX_PLAN_CLUSTER_H
#define PX_PLAN_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/dtype.h"
#include "core/status.h"
#include "plan/graph.h"

/* One measured GEMM efficiency: achieved / peak for an (m, n, k) shape. */
typedef struct {
  int64_t m, n, k;
  double efficiency; /* of the dtype's peak */
  int dtype;         /* px_dtype the GEMM ran in, -1: any (calibrate's fp32 sweeps, older files) */
} px_gemm_point;

/* The link classes of a cluster: inside an NVLink domain (NVLink/NVSwitch), and across domains (the NICs). */
typedef enum { PX_LINK_INTRA, PX_LINK_INTER, PX_LINK_COUNT } px_link;
extern const char *const px_link_names[PX_LINK_COUNT];

/* One point of a measured collective curve (nccl-tests: the size column and
 * the out-of-place busbw), and the ranks and nodes it ran on. */
typedef struct {
  int coll; /* px_coll */
  int64_t ranks, nodes;
  uint64_t bytes;
  double bytes_per_s; /* bus bandwidth */
} px_busbw_point;

/* DeepEP's normal (high-throughput) kernels at one EP size, as its
 * benchmark reports them, of the dispatch and of the combine: across nodes
 * (inter_node.deepep) the logical RDMA bandwidth, a rank's copies of its
 * tokens to the nodes they reach (its own included) over the time; within
 * one NVLink domain (intra_node.deepep) the NVLink bandwidth, the token
 * copies a rank receives (its own included) over the time. */
typedef struct {
  int64_t ep;
  double dispatch_bytes_per_s, combine_bytes_per_s;
} px_deepep_point;

#define PX_DEEPEP_MAX 16 /* EP sizes */

/* nccl-tests' names of the collectives parallax uses, by px_coll (NULL: none). */
extern const char *const px_busbw_coll_names[PX_COLL_COUNT];

/* A measured cost of one kind of op: a fixed cost per call plus its HBM
 * bytes at bytes_per_s or, when flops_per_s is set, its FLOPs at that rate. */
typedef struct {
  char kind[32]; /* op kind name, see plan/graph.h */
  double bytes_per_s;
  double flops_per_s;
  double overhead_s; /* fixed cost per call */
} px_kernel_rate;

/* The operand format a fused-attention kernel was measured in: 16-bit (bf16 or fp16), per-tensor-scaled fp8
 * (cuDNN's FP8 SDPA, E4M3 with per-tensor scales) or MXFP8 (cuDNN's MXFP8 SDPA, 32-element block scales):
 * gpu.attention[].dtype "bf16" (absent), "fp8", "mxfp8". */
typedef enum { PX_ATTN_BF16, PX_ATTN_FP8, PX_ATTN_MXFP8, PX_ATTN_FORMAT_COUNT } px_attn_format;
extern const char *const px_attn_format_names[PX_ATTN_FORMAT_COUNT];
/* The kernel a fused-attention curve measured: the GPU's own (its preset's best fused kernel, FlashAttention-3 or
 * cuDNN: what `attention` flash costs; gpu.attention), or FlashAttention-2's (`attention` flash2: PyTorch's SDPA
 * flash backend, flash-attn 2.x; gpu.attention_flash2). gpu.attention_kernel "flash2" says the GPU's own fused
 * kernel is FlashAttention-2 (A100), so its gpu.attention curves serve both. */
typedef enum { PX_ATTN_KERNEL_OWN, PX_ATTN_KERNEL_FLASH2, PX_ATTN_KERNEL_COUNT } px_attn_kernel;
extern const char *const px_attn_kernel_names[PX_ATTN_KERNEL_COUNT];

/* A measured fused-attention curve (FlashAttention's benchmark: batch x seq
 * tokens fixed, heads x head_dim fixed): TFLOP/s against the sequence length,
 * for one format, pass, head dim, mask and sliding window, with FLOPs counted
 * as FlashAttention does (4 s^2 d per head forward, halved when causal, with a
 * window times its attended pairs over the causal pairs,
 * px_attention_window_fraction; the backward 2.5x the forward). */
#define PX_ATTN_POINTS_MAX 16
typedef struct {
  px_attn_format fmt;
  px_attn_kernel kernel; /* OWN: the GPU's own fused kernel (gpu.attention), FLASH2: gpu.attention_flash2 */
  bool bwd, causal;
  int64_t head_dim;
  int64_t window; /* causal within a sliding window of this many tokens (a query's own and those before); 0: none */
  int64_t cudnn_version; /* the cuDNN release it was measured with, as cudnn.backend_version() gives it (9.17.0:
                            91700); 0: not given (every release alike) */
  int n;
  int64_t seq[PX_ATTN_POINTS_MAX]; /* increasing */
  double tflops[PX_ATTN_POINTS_MAX];
} px_attn_curve;
#define PX_ATTN_CURVES_MAX 32 /* 3 formats x 2 passes x a few shapes and cuDNN releases (dgx-gb300: 26) */
#define PX_CUDNN_VERSION_MAX 999999 /* cudnn.backend_version()'s form: major x 10000 + minor x 100 + patch */

#define PX_GEMM_TABLE_MAX 256
#define PX_SOURCES_MAX 64 /* per-field sources of a cluster file */

/* Where one figure of a cluster file comes from: the field's dotted path
 * (or an object's, for all the figures under it) and the citation. */
typedef struct {
  char field[64];
  char text[384];
} px_source;
#define PX_BUSBW_MAX 256 /* points per link class */
#define PX_KERNEL_RATES_MAX 32

typedef struct {
  char name[64];
  double peak_flops[PX_DTYPE_COUNT]; /* dense FLOP/s per dtype, 0 when unsupported (fp4: nvfp4's GEMMs) */
  uint64_t hbm_bytes;
  uint64_t reserved_bytes;           /* taken by the runtime (context, allocator slack) */
  double hbm_bytes_per_s;
  double memory_efficiency;          /* share of HBM bandwidth memory-bound kernels reach */
  int64_t sm_count;
  /* GEMM efficiency model: max_efficiency x tile and wave quantization. */
  double gemm_max_efficiency;
  int64_t gemm_tile_m, gemm_tile_n;
  double gemm_k_half;                /* k at which short-k GEMMs reach half of max efficiency */
  double gemm_fp8_k_half;            /* ... fp8 GEMMs with per-tensor scales, where measured apart (their k loop
                                        runs twice as fast against the same fixed cost); 0: k_half */
  double gemm_fp8_max_efficiency;    /* max_efficiency of fp8 GEMMs with per-tensor scales (of the fp8 peak) */
  double gemm_fp8_block_max_efficiency; /* ... with blockwise scales (DeepSeek-V3's 1 x 128 / 128 x 128) */
  double gemm_fp8_split_share;       /* an fp8 GEMM's rate with split (promoted) accumulation over its rate with
                                        fast accumulation, which fp8_max_efficiency measures; 0: the GPU has one
                                        mode (Blackwell) */
  double gemm_best_flops;            /* the best FLOP/s a sweep of 16-bit GEMM shapes measured (MAMF): no
                                        shape runs faster, the model is held under it; 0: no ceiling */
  double gemm_fp8_best_flops;        /* ... of fp8 GEMMs (per-tensor or blockwise scales) */
  double gemm_mxfp8_ratio;           /* an MXFP8 GEMM's rate over the same GEMM's with per-tensor fp8 scales, both
                                        measured on one harness; 0: not given (the same rate) */
  double gemm_nvfp4_ratio;           /* ... an NVFP4 GEMM's; 0: not given (the fp4 peak at fp8's per-tensor
                                        max_efficiency, uncapped) */
  double kernel_overhead_s;          /* launch + tail per kernel */
  double sustained_share;            /* tensor-core compute under sustained load over the burst figures the
                                        GEMM and attention models are built from (power-limited clocks); 1: none */
  double jitter;                     /* per-GPU performance spread: the standard deviation of a GPU's compute
                                        speed over the cluster's median GPU (static), 0: none; see sim/straggler.h */
  px_gemm_point gemm_table[PX_GEMM_TABLE_MAX]; /* measured; used instead of the model when given */
  int gemm_table_len;
  px_kernel_rate kernel_rates[PX_KERNEL_RATES_MAX];
  int kernel_rates_len;
  px_attn_curve attention[PX_ATTN_CURVES_MAX]; /* fused attention (flash); none: costed as GEMMs */
  int attention_len;
  int64_t cudnn_version; /* the cuDNN release the cluster runs (cudnn.backend_version()'s form): of the curves
                            measured at one shape with several releases, the newest at or before it (none: the
                            oldest; sim/compute.c); 0: the newest measured (px_gpu_attn_cudnn) */
  px_attn_kernel attention_kernel;   /* what the GPU's own fused kernel is, when known to be one with a name of its
                                        own (FLASH2: A100's FlashAttention-2); OWN otherwise */
  /* Board power (sim/power.h): while the GPU computes (its TDP where no training measurement is cited: an
   * upper bound), and while it waits for communication or another stage (0: at power_w). 0: not given, no
   * power figures. A draw, not a limit: the speed models do not read it (no power cap is modelled). */
  double power_w, idle_power_w;
} px_gpu;

/* gpu.jitter when the file gives none: Sinha et al., SC'22, 8% average spread
 * between the slowest and the fastest non-outlier GPU of a cluster (the box
 * plot's whiskers), over the median; for normal speeds the whiskers span
 * 2 x (0.674 + 1.5 x 1.349) = 5.40 standard deviations: 0.08 / 5.40
 * (tests/data/gpu_variability.md). */
#define PX_GPU_JITTER_DEFAULT 0.0148
/* host.grouped_expert_ops where a cluster file gives none, and its source, which px_cluster_from_json cites for it
 * (sim/host.c's op and launch costs explain 0.27 ms of the 2.58 ms; the rest, 2.31 ms over 2 calls of 8 experts, is
 * 144 us = 3.9 x 37.08 us) */
#define PX_HOST_GROUPED_EXPERT_OPS_SOURCE                                                                              \
  "the default where the file gives none: NVIDIA's Nsys timeline of DeepSeek-V3 on GB200 (MXFP8, 8 local experts "     \
  "eager; Megatron-LM 79e8592 docs/discussions/deepseek-v3-gb200-optimization/images/image5.png, read at 143.6 px a "  \
  "ms): 2.58 ms of host from the permutation to fc2's last GEMM, 0.27 ms of it ops and launches, the rest over 2 "      \
  "calls of 8 experts 144 us = 3.9 x the GB200's 37.08 us host.op_us"
#define PX_HOST_GROUPED_EXPERT_OPS_DEFAULT 3.9
/* host.router_ops and host.a2a_preprocess_ops where a cluster file gives none, and their sources: the host's work
 * from the attention's output projection to the tokens' exchange, read off the same guide's timelines of a MoE
 * layer's eager forward (the GPU idle between short kernels: host-bound), less the 4 ops the graph issues there
 * itself (the residual add, the pre-MLP norm, the router's GEMM, the routing) */
#define PX_HOST_ROUTER_OPS_SOURCE                                                                                      \
  "the default where the file gives none: NVIDIA's Nsys timeline of DeepSeek-V3 on GB200 with DeepEP and the fused "  \
  "router, eager (Megatron-LM 79e8592 docs/discussions/deepseek-v3-gb200-optimization/images/image4.png, read at "    \
  "57.8 px a ms): 3.88 ms from the attention's output projection (its GEMM ends at +18.29 ms) to DeepEP's dispatch "  \
  "(+22.17 ms) = 104.6 x the GB200's 37.08 us host.op_us, less the 4 ops the graph issues there"
#define PX_HOST_ROUTER_OPS_DEFAULT 100.6
#define PX_HOST_A2A_PREPROCESS_OPS_SOURCE                                                                              \
  "the default where the file gives none: the same guide's timeline with the alltoall dispatcher and the fused "      \
  "router (image2.png, read at 70.6 px a ms): 4.44 ms from the output projection's GEMM (ends at +280.06 ms) to the " \
  "permutation (+284.50 ms) = 119.7 x 37.08 us, less the same 4 ops, 115.7, of which host.router_ops is DeepEP's"
#define PX_HOST_A2A_PREPROCESS_OPS_DEFAULT 15.1

/* power.pue when the file gives none: Uptime Institute Global Data Center
 * Survey 2024, the average annual PUE operators reported for their largest
 * data center (tests/data/power.csv). */
#define PX_PUE_DEFAULT 1.56

/* Whether the GPU has block-scaled tensor cores (MXFP8, NVFP4): Blackwell's
 * fifth-generation tensor cores brought them with fp4 (NVIDIA Blackwell
 * architecture technical brief), so a GPU with an fp4 peak has them. */
static inline bool px_gpu_block_scaled(const px_gpu *g) { return g->peak_flops[PX_DTYPE_FP4] > 0; }
/* Whether curve a measured kernel k (a FlashAttention-2 curve: tagged so, or the GPU's own where that is it) */
static inline bool px_attn_curve_of(const px_gpu *g, const px_attn_curve *a, px_attn_kernel k) {
  return k == PX_ATTN_KERNEL_OWN ? a->kernel == PX_ATTN_KERNEL_OWN
                                 : a->kernel == k || (a->kernel == PX_ATTN_KERNEL_OWN && g->attention_kernel == k);
}
/* Whether the GPU has a measured curve of kernel k */
bool px_gpu_attn_kernel_measured(const px_gpu *g, px_attn_kernel k);
/* The cuDNN release the GPU's fused attention is costed at: gpu.cudnn_version, else the newest its curves name;
 * 0 when no curve names one. */
int64_t px_gpu_attn_cudnn(const px_gpu *g);
/* Whether the GPU's fp8 GEMMs read their operands in any layout, not only
 * "TN" (A row-major, B column-major), so that one copy of a per-tensor-scaled
 * fp8 tensor serves the forward and both gradients and none is transposed:
 * Blackwell's data-center tensor cores, compute capability 10.x and from
 * 13.0 (Transformer Engine's nvte_is_non_tn_fp8_gemm_supported, and its
 * Float8Quantizer making no transpose there, transformer_engine.cpp and
 * quantizer.cpp at d0067d0); Hopper and Ada take TN only. Among the presets
 * these are the GPUs with block-scaled GEMMs (TE still treats 12.x, which
 * has them too, as TN-only; no preset is one). */
static inline bool px_gpu_fp8_any_layout(const px_gpu *g) { return px_gpu_block_scaled(g); }

/* The GEMM model's max efficiency for a dtype: fp8's (blockwise scales or
 * per-tensor; fp4's GEMMs take fp8's per-tensor figure, used where the file
 * gives no gpu.gemm.nvfp4_rate_over_fp8), the 16-bit one where the file gives
 * no fp8 figure. */
double px_gpu_gemm_max(const px_gpu *g, px_dtype dt, bool fp8_block);
/* The k at which a GEMM of dt (fp8_block: blockwise fp8 scales) reaches half its max efficiency: fp8_k_half for
 * per-tensor fp8 and fp4 where given, else k_half (blockwise fp8 too: DeepGEMM's kernels, whose published k 2,048
 * over k 7,168 rate, 0.90, k_half's 0.93 matches and fp8_k_half's 0.79 does not). */
double px_gpu_gemm_k_half(const px_gpu *g, px_dtype dt, bool fp8_block);
/* The output tiles of an m x n GEMM on the GPU's tile (gpu.gemm.tile_m x tile_n), the last of each side partly
 * empty: the unit the simulator's wave model spreads over the SMs (sim/compute.c). */
int64_t px_gpu_gemm_tiles(const px_gpu *g, int64_t m, int64_t n);
/* A block-scaled GEMM's rate over the same GEMM's with per-tensor fp8 scales
 * (gpu.gemm.mxfp8_rate_over_fp8, nvfp4_rate_over_fp8: kernel measurements on
 * one harness); 0 where the file gives none. */
double px_gpu_block_scaled_ratio(const px_gpu *g, bool nvfp4);
/* The ceiling on a dtype's GEMM efficiency (of its peak): the best a sweep
 * of shapes measured (gpu.gemm.best_tflops, fp8_best_tflops; fp4 takes
 * fp8's share, as it takes fp8's max_efficiency); 1 where the file gives
 * none. */
double px_gpu_gemm_ceiling(const px_gpu *g, px_dtype dt);
/* The share of an fp8 GEMM's fast-accumulation rate it keeps with split
 * accumulation (gpu.gemm.fp8_split_accumulation_share; 1 where the file gives
 * none). Transformer Engine and torchao split the backward's fp8 GEMMs only. */
double px_gpu_fp8_split_share(const px_gpu *g);

/* HBM a plan may use: the capacity less what the runtime keeps (context, allocator). */
uint64_t px_gpu_usable_bytes(const px_gpu *g);

typedef enum { PX_NET_RAIL_FAT_TREE, PX_NET_FAT_TREE, PX_NET_COUNT } px_net_kind;
extern const char *const px_net_kind_names[PX_NET_COUNT];

/* Fields a cluster may have set over its file's (px_cluster_set_field). */
#define PX_CLUSTER_OVERRIDES_MAX 16

typedef struct {
  char name[64];
  char source[1024];                 /* the file's general source */
  char overrides[PX_CLUSTER_OVERRIDES_MAX][128]; /* "FIELD=VALUE" set over the file's figures, in order: every
                                                    output states them ("overrides" in its JSON) */
  int noverrides;
  px_source sources[PX_SOURCES_MAX]; /* "sources": each figure's, by field path */
  int nsources;
  px_gpu gpu;
  int64_t gpus_per_node;
  int64_t gpus;  /* total, from the file, --gpus or --nodes */
  int64_t nodes; /* ceil(gpus / gpus_per_node) */
  int64_t nvlink_domain; /* GPUs on one NVLink/NVSwitch fabric when a rack of nodes (GB200 NVL72: 72); 0: the node.
                            Read it through px_cluster_nvlink_domain */
  /* Intra-node (NVLink domain) fabric, per GPU per direction. */
  double intra_bytes_per_s;
  double intra_latency_s;
  double intra_efficiency; /* busbw reached by NCCL-style rings / link rate */
  int64_t intra_comm_sms;  /* SMs a collective over this fabric holds while it runs (NCCL: a CTA per channel,
                              an SM each, shared with no compute kernel); 0: none. See px_coll_cost.sms */
  double intra_nvls_efficiency; /* NVLS (NVLink SHARP: the switch reduces) all-reduce inside the domain: the share
                                   of the link rate it reaches, each GPU sending and receiving the buffer once;
                                   0: the fabric has no NVLS (sim/collective.h) */
  double intra_nvls_latency_s;  /* ... its fixed time */
  /* Inter-node network. */
  int64_t nics_per_node;
  double nic_bytes_per_s; /* per NIC per direction */
  double inter_latency_s;
  double inter_efficiency;
  int64_t inter_comm_sms;  /* ... over the network (intra_comm_sms) */
  /* Measured collective curves (intra_node.busbw, inter_node.busbw): inside
   * one node, and across nodes. Where one covers a collective, it replaces
   * the model (sim/collective.h). */
  px_busbw_point busbw[PX_LINK_COUNT][PX_BUSBW_MAX]; /* by px_link */
  int busbw_len[PX_LINK_COUNT];
  /* DeepEP's measured kernels across nodes by EP size (inter_node.deepep),
   * in EP order; where given they time the deepep dispatcher's exchanges
   * across nodes (sim/collective.h, px_coll_cost_deepep). */
  px_deepep_point deepep[PX_DEEPEP_MAX];
  int deepep_len;
  /* DeepEP's measured kernels within one NVLink domain by EP size
   * (intra_node.deepep); where given they time the deepep dispatcher's
   * exchanges that stay in one domain. */
  px_deepep_point intra_deepep[PX_DEEPEP_MAX];
  int intra_deepep_len;
  px_net_kind net_kind;
  double oversubscription; /* leaf uplink : downlink ratio >= 1 */
  int64_t nodes_per_leaf;  /* nodes under one leaf switch (rail group) */
  /* Host and storage. */
  uint64_t host_memory_bytes;
  double storage_bytes_per_s; /* checkpoint write bandwidth per node */
  /* Offload (0 when the file has none): the host link of one GPU per
   * direction and how many GPUs share its uplink to the CPU; the node's CPU
   * AdamW rate and its NVMe drives (bandwidth, the slower direction, and size). */
  double host_pcie_bytes_per_s;
  int64_t host_pcie_gpus_per_uplink;
  double host_cpu_adam_params_per_s;
  double host_nvme_bytes_per_s;
  uint64_t host_nvme_bytes;
  /* The host's issue cost of the kernels (sim/host.h): a framework op's dispatch with its first kernel's launch
   * (Python module, autograd, ATen dispatcher, cudaLaunchKernel), and each further kernel the op launches from
   * C++, and a CUDA graph's replay (cudaGraphLaunch); 0: launches are free (no host lane). */
  double host_op_s, host_launch_s, host_graph_s;
  /* A quantized GroupedLinear call's Python work a local expert, in host_op_s (host.grouped_expert_ops; default
   * PX_HOST_GROUPED_EXPERT_OPS_DEFAULT): Transformer Engine's loop over the experts (sim/host.c). */
  double host_grouped_expert_ops;
  /* A MoE layer's router and its dispatcher's preprocessing on the host, in host_op_s, beyond the ops the graph
   * issues (host.router_ops: Megatron-Core's fused router and the flex dispatchers' (DeepEP, HybridEP) preprocessing;
   * host.a2a_preprocess_ops: the alltoall dispatcher's own on top); defaults PX_HOST_ROUTER_OPS_DEFAULT and
   * PX_HOST_A2A_PREPROCESS_OPS_DEFAULT (sim/host.c). */
  double host_router_ops, host_a2a_preprocess_ops;
  /* Power besides the GPUs' (power.*, read with gpu.power_w by sim/power.h): a node's draw besides its GPUs
   * (CPUs, memory, NICs, NVSwitches, fans, drives, power supply losses), the network's switches per node,
   * and the site's power usage effectiveness (facility over IT power, >= 1). */
  double node_overhead_w;
  double network_w_per_node;
  double pue;
} px_cluster;

px_status px_cluster_from_json(const cJSON *root, const char *file, px_cluster *c, px_err *err);
/* The largest cluster file loaded: 1 MiB, eight times one with every table
 * full (PX_GEMM_TABLE_MAX GEMM rows, PX_BUSBW_MAX points a link class,
 * PX_ATTN_CURVES_MAX curves, PX_KERNEL_RATES_MAX rates, PX_SOURCES_MAX
 * sources, each string at its longest: 134 KB as px_cluster_to_json writes
 * it); the presets are 9 KB. */
#define PX_CLUSTER_FILE_MAX_BYTES ((size_t)1 << 20)
px_status px_cluster_load_file(const char *path, px_cluster *c, px_err *err);
/* A preset name (topologies/NAME.json) or a file path. */
px_status px_cluster_load(const char *name_or_path, px_cluster *c, px_err *err);
cJSON *px_cluster_to_json(const px_cluster *c);

/* The source of the figure at a dotted field path: its own entry in
 * "sources", else its nearest enclosing object's, else NULL (the file's
 * general source is all there is). */
const char *px_cluster_source_of(const px_cluster *c, const char *field);
/* Adds text to field's own source entry (a new one if it has none; "; " between). */
px_status px_cluster_add_source(px_cluster *c, const char *field, const char *text, px_err *err);
/* Replaces field's own source entry with text (a new one if it has none): a figure measured anew. */
px_status px_cluster_set_source(px_cluster *c, const char *field, const char *text, px_err *err);

/* A what-if: sets one field of the cluster file, "FIELD=VALUE" with FIELD
 * a dotted path as in the file (gpu.hbm_gib, inter_node.nic_gbit_per_s,
 * host.nvme_gb_per_s, gpu.peak_tflops.bf16), and validates the result as a
 * file is; an unknown field is refused with the fields its object has.
 * The assignment is added to c->overrides. */
px_status px_cluster_set_field(px_cluster *c, const char *assignment, px_err *err);
/* The overrides as one line, "gpu.hbm_gib=141, nodes=4", "" when none. */
const char *px_cluster_overrides_text(const px_cluster *c, char *buf, size_t cap);

/* Sets the size from a GPU or node count (0 = keep); more GPUs than one node
 * holds must fill whole nodes. */
px_status px_cluster_set_size(px_cluster *c, int64_t gpus, int64_t nodes, px_err *err);
/* One GPU's bandwidth to host memory, per direction, while every GPU of the
 * node copies (its link's share of the uplink it shares); 0 when not given. */
double px_cluster_host_link_bytes_per_s(const px_cluster *c);
/* GPUs on one NVLink fabric: nvlink_domain when the file gives one, else the node's. */
int64_t px_cluster_nvlink_domain(const px_cluster *c);
/* GPUs that share a node (gpus_per_node, or fewer in a one-node cluster). */
int64_t px_cluster_node_size(const px_cluster *c);

#endif
