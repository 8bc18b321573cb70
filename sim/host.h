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

/* Kernels op i of a block's ops (n of them) launches as the framework runs
 * it (>= 1; an fp8 cast of the experts' rows one quantization a local expert). */
int64_t px_host_kernels(const px_plan *p, const px_op *ops, int32_t n, int32_t i);
/* Seconds the host takes to issue op i: the cluster's host.op_us with its
 * first kernel, host.launch_us each further one; 0 without them. */
double px_host_issue_s(const px_plan *p, const px_op *ops, int32_t n, int32_t i);
/* The host waits for the GPU before issuing op (before) or after it
 * ends (!before): Megatron-Core's MoE dispatchers copy the tokens' counts to
 * the host once a layer's forward, at their exchange to the experts
 * (Transformer Engine's grouped GEMM needs them there: m_splits.tolist()). */
bool px_host_waits(const px_plan *p, const px_op *op, bool before);

#endif
