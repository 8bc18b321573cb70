/* Roofline compute cost with a GEMM efficiency model. */
#include "sim/compute.h"

#include <math.h>
#include <string.h>

#include "plan/attention.h"
#include "plan/parallel.h"

static double ceil_div(double a, double b) { return ceil(a / b); }

/* Nearest measured point of the dtype (or of any) in log space; -1 when none. */
static double gemm_table_lookup(const px_gpu *g, px_dtype dt, int64_t m, int64_t n, int64_t k) {
  double best = INFINITY, eff = -1;
  double lm = log((double)m), ln = log((double)n), lk = log((double)k);
  for (int i = 0; i < g->gemm_table_len; i++) {
    const px_gemm_point *p = &g->gemm_table[i];
    if (p->dtype >= 0 && p->dtype != (int)dt) continue;
    double d = pow(lm - log((double)p->m), 2) + pow(ln - log((double)p->n), 2) + pow(lk - log((double)p->k), 2);
    if (d < best) {
      best = d;
      eff = p->efficiency;
    }
  }
  return eff;
}

double px_gemm_efficiency(const px_gpu *g, px_dtype dt, int64_t m, int64_t n, int64_t k, int64_t batch) {
  return px_gemm_efficiency8(g, dt, false, m, n, k, batch);
}

double px_gemm_k_factor(const px_gpu *g, px_dtype dt, bool fp8_block, int64_t k) {
  double half = px_gpu_gemm_k_half(g, dt, fp8_block);
  return half > 0 ? (double)k / ((double)k + half) : 1.0;
}

/* Tiles of `tile` along a side of `len`, the last one partly empty. */
static double tiles_of(int64_t len, int64_t tile) { return ceil_div((double)len, (double)tile); }

/* The wave model over a batch of GEMMs of which at most `resident` (0: all, one kernel over every GEMM's tiles)
 * have their tiles on the SMs at once: GEMMs launched apart on a few streams fill at most that many GEMMs' tiles
 * of SMs, each tile running its whole k loop. */
static double gemm_efficiency(const px_gpu *g, px_dtype dt, bool fp8_block, int64_t m, int64_t n, int64_t k,
                              int64_t batch, int64_t resident) {
  double max = px_gpu_gemm_max(g, dt, fp8_block);
  if (m <= 0 || n <= 0 || k <= 0) return max;
  double measured = g->gemm_table_len > 0 ? gemm_table_lookup(g, dt, m, n, k) : -1;
  if (measured > 0) return measured;
  double tm = (double)g->gemm_tile_m, tn = (double)g->gemm_tile_n;
  /* each GEMM's rows are padded to the tile on their own (a group's, not the batch's sum) */
  double tiles_m = tiles_of(m, g->gemm_tile_m), tiles_n = tiles_of(n, g->gemm_tile_n);
  double tiles = tiles_m * tiles_n * (double)(batch > 0 ? batch : 1);
  double sms = (double)g->sm_count, lanes = resident > 0 ? fmin(sms, (double)resident * tiles_m * tiles_n) : sms;
  double waves = ceil_div(tiles, lanes);
  double wave_eff = tiles / (waves * sms);                                      /* last wave partly idle */
  double tile_eff = ((double)m * (double)n) / (tiles_m * tm * tiles_n * tn);   /* padding inside edge tiles */
  double k_eff = px_gemm_k_factor(g, dt, fp8_block, k);
  /* never above the best a sweep of shapes measured: max_efficiency is that best over the model's factors at
   * its shape, so where they are better than there (long k, full waves) the product alone would exceed it */
  return fmin(max * wave_eff * tile_eff * k_eff, px_gpu_gemm_ceiling(g, dt));
}

double px_gemm_efficiency8(const px_gpu *g, px_dtype dt, bool fp8_block, int64_t m, int64_t n, int64_t k,
                           int64_t batch) {
  return gemm_efficiency(g, dt, fp8_block, m, n, k, batch, 0);
}

/* TFLOP/s of curve a at seq: linear in log(seq) between its points, flat beyond them. */
static double attn_curve_at(const px_attn_curve *a, int64_t seq) {
  if (seq <= a->seq[0]) return a->tflops[0];
  for (int k = 1; k < a->n; k++)
    if (seq <= a->seq[k]) {
      double t = (log((double)seq) - log((double)a->seq[k - 1])) / (log((double)a->seq[k]) - log((double)a->seq[k - 1]));
      return a->tflops[k - 1] + t * (a->tflops[k] - a->tflops[k - 1]);
    }
  return a->tflops[a->n - 1];
}

/* The keys a query of a window's attention sees at most at seq: the window, or the sequence when the window
 * is none or as long (the causal mask). */
static double attn_reach(int64_t window, int64_t seq) { return (double)(window > 0 && window < seq ? window : seq); }

/* Whether a curve measured with cuDNN release v is the better pick than one with cur for the release want the
 * attention is costed at (px_gpu_attn_cudnn): the newest at or before want, else the oldest after it. A curve of no
 * release (0) counts as at or before any. */
static bool cudnn_pick(int64_t v, int64_t cur, int64_t want) {
  bool v_in = v <= want, cur_in = cur <= want;
  if (v_in != cur_in) return v_in;
  return v_in ? v > cur : v < cur;
}

/* The curve of a kernel, format, pass and mask at the window, then the head dim, nearest the op's (in log2) at seq,
 * then of the cuDNN release the cluster runs (cudnn_pick); NULL when none. A window changes the kernel's work per
 * query tile more than a head dim does: it is matched first; a shape measured with one release only takes that
 * release's curve whatever the cluster runs. */
static const px_attn_curve *attn_curve(const px_gpu *g, px_attn_kernel kernel, px_attn_format fmt, bool bwd,
                                       bool causal, int64_t head_dim, int64_t window, int64_t seq) {
  const px_attn_curve *best = NULL;
  double best_w = INFINITY, best_d = INFINITY, reach = log2(attn_reach(window, seq));
  int64_t release = px_gpu_attn_cudnn(g);
  for (int i = 0; i < g->attention_len; i++) {
    const px_attn_curve *a = &g->attention[i];
    if (!px_attn_curve_of(g, a, kernel) || a->fmt != fmt || a->bwd != bwd || a->causal != causal) continue;
    double w = fabs(log2(attn_reach(a->window, seq)) - reach);
    double d = fabs(log2((double)a->head_dim) - log2((double)head_dim));
    if (w < best_w || (w == best_w && d < best_d) ||
        (w == best_w && d == best_d && cudnn_pick(a->cudnn_version, best->cudnn_version, release)))
      best_w = w, best_d = d, best = a;
  }
  return best;
}

double px_attn_efficiency(const px_gpu *g, px_attn_kernel kernel, px_attn_format fmt, bool bwd, int64_t head_dim,
                          bool causal, int64_t window, int64_t seq) {
  double peak = g->peak_flops[PX_DTYPE_BF16] > 0 ? g->peak_flops[PX_DTYPE_BF16] : g->peak_flops[PX_DTYPE_FP16];
  if (peak <= 0) return -1;
  /* no curve of the format for this pass: the 16-bit kernel's (no gain assumed) */
  if (!attn_curve(g, kernel, fmt, bwd, causal, head_dim, window, seq) &&
      !attn_curve(g, kernel, fmt, bwd, !causal, head_dim, 0, seq))
    fmt = PX_ATTN_BF16;
  const px_attn_curve *a = attn_curve(g, kernel, fmt, bwd, causal, head_dim, window, seq);
  if (a) return attn_curve_at(a, seq) * 1e12 / peak;
  /* FlashAttention-3 publishes its backward without the mask only */
  const px_attn_curve *nc = attn_curve(g, kernel, fmt, bwd, !causal, head_dim, 0, seq);
  if (!nc) return -1;
  double tf = attn_curve_at(nc, seq);
  const px_attn_curve *fc = attn_curve(g, kernel, fmt, false, causal, nc->head_dim, 0, seq),
                      *fn = attn_curve(g, kernel, fmt, false, !causal, nc->head_dim, 0, seq);
  if (bwd && fc && fn) tf *= attn_curve_at(fc, seq) / attn_curve_at(fn, seq);
  return tf * 1e12 / peak;
}

static const px_kernel_rate *measured(const px_gpu *g, px_op_kind kind) {
  for (int i = 0; i < g->kernel_rates_len; i++)
    if (!strcmp(g->kernel_rates[i].kind, px_op_names[kind])) return &g->kernel_rates[i];
  return NULL;
}

double px_compute_mem_s(const px_gpu *g, px_op_kind kind, double bytes) {
  const px_kernel_rate *r = measured(g, kind);
  if (r && r->bytes_per_s > 0) return r->overhead_s + bytes / r->bytes_per_s;
  return g->kernel_overhead_s + bytes / (g->hbm_bytes_per_s * g->memory_efficiency);
}

/* GEMM-like ops: the shapes of their matrix products (two for some backwards). */
static int op_gemms(const px_op *op, int64_t shapes[2][4]) {
  const int64_t *d = op->dim;
  switch (op->kind) {
    case PX_OP_LINEAR:
      shapes[0][0] = d[0], shapes[0][1] = px_op_linear_cols(op), shapes[0][2] = d[2], shapes[0][3] = 1;
      return 1;
    case PX_OP_LINEAR_BWD_DATA: shapes[0][0] = d[0], shapes[0][1] = d[2], shapes[0][2] = d[1], shapes[0][3] = 1; return 1;
    case PX_OP_LINEAR_BWD_WEIGHT: shapes[0][0] = d[1], shapes[0][1] = d[2], shapes[0][2] = d[0], shapes[0][3] = 1; return 1;
    case PX_OP_ATTN_SCORES:
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
      shapes[0][0] = d[1], shapes[0][1] = d[1], shapes[0][2] = d[4], shapes[0][3] = d[0] * d[2];
      return 1;
    case PX_OP_ATTN_CONTEXT: shapes[0][0] = d[1], shapes[0][1] = d[4], shapes[0][2] = d[1], shapes[0][3] = d[0] * d[2]; return 1;
    /* grouped expert GEMMs: each local expert's rows (the busiest rank's), batched over the experts */
    case PX_OP_EXPERT_LINEAR: shapes[0][0] = d[0], shapes[0][1] = d[1], shapes[0][2] = d[2], shapes[0][3] = d[3]; return 1;
    case PX_OP_EXPERT_LINEAR_BWD_DATA: shapes[0][0] = d[0], shapes[0][1] = d[2], shapes[0][2] = d[1], shapes[0][3] = d[3]; return 1;
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT: shapes[0][0] = d[1], shapes[0][1] = d[2], shapes[0][2] = d[0], shapes[0][3] = d[3]; return 1;
    case PX_OP_ATTN_SCORES_BWD:
    case PX_OP_ATTN_CONTEXT_BWD:
      shapes[0][0] = d[1], shapes[0][1] = d[4], shapes[0][2] = d[1], shapes[0][3] = d[0] * d[2];
      shapes[1][0] = d[1], shapes[1][1] = d[1], shapes[1][2] = d[4], shapes[1][3] = d[0] * d[2];
      return 2;
    default: return 0;
  }
}

/* Transformer Engine's GroupedLinear runs each local expert's GEMM as its own cuBLAS call, round-robin over 4
 * streams (nvte_multi_tensor_gemm -> multi_stream_cublas_gemm, num_compute_streams = 4 in
 * transformer_engine/common/util/multi_stream.cpp, NVIDIA/TransformerEngine d0067d0, 2026-08): on Hopper and
 * Blackwell, BF16 and every FP8 recipe (blockwise FP8 converted to MXFP8 on Blackwell). Its one-kernel grouped
 * paths are opt-in: a CUTLASS grouped GEMM on Hopper (NVTE_USE_CUTLASS_GROUPED_GEMM) and cuBLASLt's grouped GEMM
 * (GroupedLinear(use_grouped_tensor), Megatron-Core's moe_use_grouped_tensor, False by default at d98e8a6). */
#define TE_GEMM_STREAMS 4

static bool is_expert_gemm(px_op_kind kind) {
  return kind == PX_OP_EXPERT_LINEAR || kind == PX_OP_EXPERT_LINEAR_BWD_DATA || kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
}

/* resident: for expert GEMMs, how many experts' GEMMs run at once (0: one grouped kernel over them all) */
static double compute_op_s(const px_gpu *g, px_dtype dt, const px_op *op, int64_t resident) {
  /* Collectives and transfers are costed by the network model (their
   * reduction kernels are inside the measured bus bandwidth). */
  px_op_family fam = px_op_family_of((px_op_kind)op->kind);
  if (fam == PX_FAM_COLLECTIVE || fam == PX_FAM_P2P || px_op_on_host((px_op_kind)op->kind)) return 0.0; /* host side: px_host_op_s */
  /* a measured FLOP rate for this kind of op replaces the model */
  const px_kernel_rate *r = measured(g, (px_op_kind)op->kind);
  if (r && r->flops_per_s > 0) return r->overhead_s + op->flops / r->flops_per_s;
  int64_t shapes[2][4];
  int n = op_gemms(op, shapes);
  bool f8_block = (op->flags & PX_OPF_FP8_BLOCK) != 0, nvfp4 = (op->flags & PX_OPF_NVFP4) != 0;
  /* a GEMM on fp8 operands at the fp8 rate, on NVFP4 operands at the fp4 rate; a block-scaled format (MXFP8,
   * NVFP4) whose rate over per-tensor fp8's the GPU has measured runs at per-tensor fp8's rate (its model and
   * ceiling) times that; without the figure MXFP8 at fp8's (its scales applied in the tensor cores) and NVFP4 at
   * the fp4 peak with fp8's max_efficiency and ceiling share */
  double fmt_ratio = 0;
  bool flash = op->kind == PX_OP_FLASH_ATTN || op->kind == PX_OP_FLASH_ATTN_BWD;
  if (n > 0 && (op->flags & PX_OPF_FP8) && !flash) { /* fp8 attention: its measured curves, against dt's peak */
    dt = nvfp4 ? PX_DTYPE_FP4 : PX_DTYPE_FP8;
    if (op->flags & (PX_OPF_MXFP8 | PX_OPF_NVFP4)) fmt_ratio = px_gpu_block_scaled_ratio(g, nvfp4);
  }
  double peak = g->peak_flops[dt] > 0 ? g->peak_flops[dt] : g->peak_flops[PX_DTYPE_FP32];
  double mem_s = op->bytes > 0 ? px_compute_mem_s(g, (px_op_kind)op->kind, op->bytes) : 0.0;
  /* PyTorch eager's composite op: each of its kernels' fixed cost (dt: the activations') */
  const px_eager_chain *eager = px_op_eager(op);
  if (eager)
    mem_s += (double)(px_eager_kernels(eager, (double)px_dtype_bytes(dt)) - 1) * px_compute_mem_s(g, (px_op_kind)op->kind, 0);
  /* the experts' gate-scaled bias: each of its PyTorch ops' kernels' fixed cost */
  int64_t bias_kernels = px_op_expert_bias_kernels(op);
  if (bias_kernels > 1) mem_s += (double)(bias_kernels - 1) * px_compute_mem_s(g, (px_op_kind)op->kind, 0);
  if (n == 0) return op->bytes > 0 ? mem_s : (op->flops > 0 ? op->flops / peak : 0.0);
  px_dtype eff_dt = fmt_ratio > 0 ? PX_DTYPE_FP8 : dt;
  double eff = 0;
  for (int i = 0; i < n; i++)
    eff += gemm_efficiency(g, eff_dt, f8_block && fmt_ratio <= 0, shapes[i][0], shapes[i][1], shapes[i][2],
                           shapes[i][3], is_expert_gemm((px_op_kind)op->kind) ? resident : 0);
  eff /= n;
  if (fmt_ratio > 0) eff *= fmt_ratio * g->peak_flops[PX_DTYPE_FP8] / peak; /* of dt's peak */
  /* fp8 with per-tensor scales: Transformer Engine (recipe MMParams: fprop use_split_accumulator False, dgrad and
   * wgrad True) and torchao (use_fast_accum in the forward only) promote the backward's sums out of the tensor
   * cores (split accumulation) at the GPU's measured share of the fast rate; blockwise scales' figure is
   * DeepGEMM's, promoted already, and the block-scaled formats have one mode (Blackwell) */
  bool bwd_gemm = op->kind == PX_OP_LINEAR_BWD_DATA || op->kind == PX_OP_LINEAR_BWD_WEIGHT ||
                  op->kind == PX_OP_EXPERT_LINEAR_BWD_DATA || op->kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
  if (bwd_gemm && (op->flags & PX_OPF_FP8) && !(op->flags & (PX_OPF_FP8_BLOCK | PX_OPF_MXFP8 | PX_OPF_NVFP4)))
    eff *= px_gpu_fp8_split_share(g);
  if (flash && px_dtype_bytes(dt) == 2) {
    /* a measured kernel of the op's format (fp8 attention: PX_OPF_FP8, MXFP8 with PX_OPF_MXFP8) where the GPU has
     * one, else its 16-bit kernel (every graph's attention is causal; a sliding-window layer's within its window),
     * on the waves of its 128-row query tiles (FlashAttention-3's block) over the SMs */
    int64_t window = op->flags & PX_OPF_WINDOW ? op->window : 0;
    px_attn_kernel kernel = op->flags & PX_OPF_FLASH2 ? PX_ATTN_KERNEL_FLASH2 : PX_ATTN_KERNEL_OWN;
    /* a CP ring's kernels run a step at a time, the rank's queries against one rank's block of keys (Transformer
     * Engine's AttnFuncWithCPAndKVP2P): the curve at that block's length, not the whole sequence's */
    int64_t seq = op->flags & PX_OPF_CP_RING ? op->dim[1] : op->dim[5];
    double fa = px_attn_efficiency(g, kernel, px_attn_op_format(op), op->kind == PX_OP_FLASH_ATTN_BWD, op->dim[4], true,
                                   window, seq);
    if (fa > 0) {
      double tiles = (double)(op->dim[0] * op->dim[2]) * ceil_div((double)op->dim[1], 128.0), sms = (double)g->sm_count;
      eff = fa * tiles / (ceil_div(tiles, sms) * sms);
    }
  }
  double flops = op->flops, kernels = 1;
  /* Expert GEMMs' FLOPs are the mean rank's; the busiest rank's rows (its shape) set the time. Launched apart,
   * `resident` at once, their kernels' fixed costs overlap that many ways. */
  if (is_expert_gemm((px_op_kind)op->kind)) {
    flops = 2.0 * (double)op->dim[0] * (double)op->dim[1] * (double)op->dim[2] * (double)op->dim[3];
    if (resident > 0) kernels = ceil_div((double)op->dim[3], (double)resident);
  }
  /* Fused causal attention skips the masked half; its backward recomputes the
   * probabilities (five products against the forward's two, 2.5x not 2x). */
  if (op->kind == PX_OP_FLASH_ATTN) flops *= 0.5;
  if (op->kind == PX_OP_FLASH_ATTN_BWD) flops *= 0.5 * 1.25;
  /* at the clocks the GPU holds under sustained load, not the burst the figures were measured at */
  double flop_s = flops / (peak * eff * g->sustained_share) + kernels * g->kernel_overhead_s;
  return flop_s > mem_s ? flop_s : mem_s;
}

double px_compute_op_s(const px_gpu *g, px_dtype dt, const px_op *op) {
  return compute_op_s(g, dt, op, TE_GEMM_STREAMS);
}

double px_compute_grouped_op_s(const px_gpu *g, px_dtype dt, const px_op *op) { return compute_op_s(g, dt, op, 0); }

double px_host_op_s(const px_cluster *c, const px_op *op) {
  double node = (double)px_cluster_node_size(c);
  double pcie = px_cluster_host_link_bytes_per_s(c);
  double nvme = c->host_nvme_bytes_per_s / node, cpu = c->host_cpu_adam_params_per_s / node;
  bool on_nvme = op->dim[1] == PX_OFFLOAD_NVME;
  if (op->kind == PX_OP_ADAMW_HOST) { /* the step streams its states from NVMe while it computes (ZeRO-Infinity) */
    double step_s = cpu > 0 ? (double)op->dim[0] / cpu : 0.0, io_s = on_nvme && nvme > 0 ? op->bytes / nvme : 0.0;
    return step_s > io_s ? step_s : io_s;
  }
  double bw = on_nvme && nvme < pcie ? nvme : pcie; /* a pipelined read from NVMe runs at the slower link */
  return bw > 0 ? op->bytes / bw : 0.0;
}
