/* Compute cost of one op on one GPU: a roofline of FLOPs at the GEMM
 * efficiency of its shape against HBM bytes, plus a fixed kernel overhead.
 * GEMM efficiency models tile and wave quantization on the GPU's SMs, or
 * comes from a measured table in the cluster file. */
#ifndef PX_SIM_COMPUTE_H
#define PX_SIM_COMPUTE_H

#include "plan/cluster.h"
#include "plan/graph.h"

/* The GEMM model's short-k factor, k / (k + k_half) with the k_half of dt's GEMMs (px_gpu_gemm_k_half): a tile's
 * k loop against its fixed load and store (1 without k_half). */
double px_gemm_k_factor(const px_gpu *g, px_dtype dt, bool fp8_block, int64_t k);
/* Achieved share of peak for a batch of (m x k) @ (k x n) GEMMs (fp8: with
 * per-tensor scales; px_gemm_efficiency8 says which). */
double px_gemm_efficiency(const px_gpu *g, px_dtype dt, int64_t m, int64_t n, int64_t k, int64_t batch);
double px_gemm_efficiency8(const px_gpu *g, px_dtype dt, bool fp8_block, int64_t m, int64_t n, int64_t k,
                           int64_t batch);
/* Achieved share of the 16-bit peak of a fused attention pass (bwd or
 * forward) of a kernel (the GPU's own, or FlashAttention-2's) in operand
 * format fmt for a head dim, mask, sliding window (0: none) and sequence
 * length, from the GPU's measured curves of that kernel (gpu.attention);
 * -1 when it has none for that pass. The share is of the 16-bit peak in every
 * format (an fp8 kernel's may exceed 1), so an fp8 op's time is its FLOPs
 * over the curve's TFLOP/s as a 16-bit one's is. Curves of fmt, or the
 * 16-bit ones where the GPU has none of fmt for the pass (no gain assumed);
 * of those, the curve of the nearest window (in log2; a window of at least
 * the sequence, and a curve without one, count as the sequence), then of the
 * nearest head dim, interpolated in log(seq) and held flat beyond its ends; a
 * causal backward without a curve of its own is the non-causal one scaled as
 * the mask scales the forward at that length. */
double px_attn_efficiency(const px_gpu *g, px_attn_kernel kernel, px_attn_format fmt, bool bwd, int64_t head_dim,
                          bool causal, int64_t window, int64_t seq);
/* Seconds for the op's compute (0 for pure communication ops). dt is the
 * plan's compute dtype; elems scales size-less ops (optimizer: the shard).
 * GEMMs and fused attention run at gpu.sustained_share of their burst
 * efficiency (the clocks a GPU holds at its power limit under sustained
 * load); memory-bound passes at the HBM share. */
double px_compute_op_s(const px_gpu *g, px_dtype dt, const px_op *op);
/* Expert GEMMs (PX_OP_EXPERT_LINEAR*) run as Megatron-Core runs them through Transformer Engine's GroupedLinear
 * by default: a GEMM a local expert, 4 at once on 4 streams, each its own kernel; px_compute_grouped_op_s costs
 * them as one grouped kernel over every expert's tiles (DeepGEMM's m-grouped GEMMs). Other ops alike in both. */
double px_compute_grouped_op_s(const px_gpu *g, px_dtype dt, const px_op *op);
/* Seconds for a memory-bound pass over `bytes` by an op of `kind`. */
double px_compute_mem_s(const px_gpu *g, px_op_kind kind, double bytes);

/* Offload's ops, on the host side: a copy over the GPU's host link (and
 * the NVMe behind it), or the host CPU's AdamW over a shard. Every GPU of
 * a node moves and steps its shard at once, so each takes its share of a
 * shared uplink, of the node's NVMe drives and of its CPU. */
double px_host_op_s(const px_cluster *c, const px_op *op);

#endif
