/* The host's side of a step: what the framework's host thread spends to
 * issue each op's kernels, and where it waits for the GPU. The simulator
 * runs a host lane beside each rank's compute stream (sim/sim.c's
 * block_segments): the host issues a block's ops in program order, each at
 * its cost, and an op's kernels start no earlier than the host launched
 * them. Kernel counts are those the frameworks launch for the op
 * (Transformer Engine 2.x with Megatron-Core, eager: no CUDA graph). */
#ifndef PX_SIM_HOST_H
#define PX_SIM_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/plan.h"

/* Kernels op launches as the framework runs it (>= 1; an fp8 cast of the
 * experts' rows one quantization a local expert). */
int64_t px_host_kernels(const px_plan *p, const px_op *op);
/* Whether op i of a block of kind k (n ops) is replayed from a CUDA graph:
 * with cuda_graph layers, every op of a layer's block but a MoE layer's
 * experts' part, from its exchange to the experts to the one back; with
 * full, every op of a forward or backward block. */
bool px_host_graphed(const px_plan *p, px_block_kind k, const px_op *ops, int32_t n, int32_t i);
/* What the host spends to issue op i: issue_s in all, first_s until its
 * first kernel is launched. Eager, the cluster's host.op_us with its first
 * kernel and host.launch_us each further one (a quantized GroupedLinear
 * call, forward or backward, first loops over its local experts in Python:
 * 3.9 host.op_us each); graphed, host.op_us (the
 * graphed module's call) and host.graph_launch_us (its replay) for the first
 * op of a layer's graph, nothing for the rest (the full-iteration graph's one
 * replay a step left out); 0 without them. */
typedef struct {
  double issue_s, first_s;
} px_host_issue;
px_host_issue px_host_issue_of(const px_plan *p, px_block_kind k, const px_op *ops, int32_t n, int32_t i);
/* The host waits for the GPU before issuing op (before) or after it
 * ends (!before): Megatron-Core's MoE dispatchers copy the tokens' counts to
 * the host once a layer's forward, at their exchange to the experts
 * (Transformer Engine's grouped GEMM needs them there: m_splits.tolist());
 * never under a full-iteration graph. */
bool px_host_waits(const px_plan *p, const px_op *op, bool before);

#endif
