/* The plan-level rules of the executor's backends (plan/runnable.h). */
#include "plan/runnable.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_run_backend_names, PX_RUN_BACKEND_COUNT, "cpu", "cuda");

int px_run_backend_of(const char *name) {
  for (int b = 0; name && b < PX_RUN_BACKEND_COUNT; b++)
    if (!strcmp(name, px_run_backend_names[b])) return b;
  return -1;
}

static bool no(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no(char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* What the executor runs on any backend: trained weights in the parameters' dtype (a frozen base in its
 * base_precision), and mixture of experts with a dropless router and the alltoall dispatcher's op graph (under TP
 * + SP with any etp: the MoE layers' fold, exec/comm.c), which DeepEP's and HybridEP's plans share: they differ in
 * the copies on the wire (px_plan_ep_copies), which the simulator prices, not in the rows the experts get. */
static bool executor_runs(const px_parallel *p, const px_model *m, char *why, size_t cap) {
  if (p->fp8_params > 0)
    return no(why, cap, "fp8 weights (`fp8_params`) are planned and simulated only; the executors keep the weights in "
              "the parameters' dtype and cast them for the quantized GEMMs, fp8, mxfp8 or nvfp4 (hint: without "
              "`fp8_params`)");
  if (m->experts > 0 && p->moe_dispatch == PX_MOE_ALLGATHER)
    return no(why, cap, "mixture of experts runs with the a2a, DeepEP or HybridEP dispatcher's exchange (the allgather "
              "dispatcher's gathers over EP are planned and simulated only; hint: `moe_dispatch` a2a)");
  return true;
}

/* fp8 codes in a collective (exec/cpu/fp8.h, which the cuda backend's
 * all-gather of codes shares): their per-tensor scales follow an all-gather
 * or all-to-all (and the permute after a sequence-parallel all-gather of
 * more than one sequence, on the cpu backend), blockwise scales do not. */
static bool fp8_collectives_run(const px_parallel *p, const px_model *m, char *why, size_t cap) {
  bool sp_gather = p->sp && p->tp > 1; /* the layers' inputs all-gathered in fp8 over TP */
  if (p->precision == PX_PREC_FP8 && p->fp8_recipe == PX_FP8_BLOCKWISE && (sp_gather || (m->experts > 0 && p->ep > 1)))
    return no(why, cap, "fp8 blockwise: the 1x128 scales do not travel with the fp8 codes of a collective on the cpu "
              "backend (sequence or expert parallelism; hint: `fp8_recipe` current)");
  return true;
}

/* The cpu backend computes in fp32 and emulates fp8's, mxfp8's and nvfp4's GEMMs, casts and all-gathers of codes
 * (exec/cpu/fp8.c, px_cpu_fp8_supports: its op-level check says the same). */
static bool cpu_runs(const px_parallel *p, const px_model *m, char *why, size_t cap) {
  px_dtype dt = px_parallel_compute_dtype(p);
  if (dt != PX_DTYPE_FP32)
    return no(why, cap, "the cpu backend runs fp32 only, not %s (hint: `precision` fp32, or fp8 with `fp8_base` fp32)",
              px_dtype_names[dt]);
  if (p->fp8_attention > 0 && p->precision == PX_PREC_FP8 && p->fp8_recipe != PX_FP8_CURRENT)
    return no(why, cap, "fp8 attention (`fp8_attention`) under fp8's %s scaling: the cpu backend emulates the "
              "attention's current scaling only (hint: `fp8_recipe` current)", px_fp8_recipe_names[p->fp8_recipe]);
  if (p->fp8_attention > 0 && p->cp > 1)
    return no(why, cap, "fp8 attention (`fp8_attention`) with context parallelism: the keys and values of other "
              "ranks' blocks are not quantized as cuDNN's would be on the cpu backend (hint: `cp` 1)");
  if (p->precision == PX_PREC_NVFP4) { /* a rank casts its micro-batch's tokens, or with SP its sequence shard's */
    int64_t tokens = p->mbs * p->seq / (p->cp > 1 ? p->cp : 1) / (p->sp && p->tp > 1 ? p->tp : 1);
    if (tokens % 16)
      return no(why, cap, "%s: a micro-batch holds %lld on a rank%s (hint: %s)", PX_RUNNABLE_NVFP4_RHT,
                (long long)tokens, p->sp && p->tp > 1 ? " (its sequence shard)" : "", PX_RUNNABLE_NVFP4_RHT_HINT);
  }
  return fp8_collectives_run(p, m, why, cap);
}

/* The cuda backend (exec/cuda/ops.c, px_cuda_supports_op): fp32, bf16 and
 * fp16 kernels, no CP or latent attention
 * kernels (nor MoE: px_runnable), fp8 with per-tensor scales and unfused GELU, the ops on
 * gradient ranges in the activations' dtype. */
static bool cuda_runs(const px_parallel *p, const px_model *m, char *why, size_t cap) {
  if (p->cp > 1)
    return no(why, cap, "context parallelism (`cp` %lld) needs attention over key blocks at other ranks' positions, "
              "which the CUDA kernels do not have yet (hint: `backend` cpu runs it)", (long long)p->cp);
  if (p->cuda_graph > PX_GRAPH_NONE) /* the cpu backend launches nothing: the op graph is the plan's either way */
    return no(why, cap, "CUDA graphs (`cuda_graph` %s): the cuda backend launches each kernel from the host, and a "
              "run measured without the plan's graphs is not the plan's step (hint: `cuda_graph` none, or `backend` "
              "cpu)", px_cuda_graph_names[p->cuda_graph]);
  if (m->kv_lora_rank > 0) /* exec/cuda/ops.c's RoPE has no latent attention's RoPE key */
    return no(why, cap, "multi-head latent attention (%s): the cuda backend does not run it yet (hint: `backend` cpu "
              "runs it)", m->name);
  if (p->fp8_attention > 0) return no(why, cap, "%s", PX_RUNNABLE_CUDA_FP8_ATTENTION);
  if (px_precision_block_scaled(p->precision)) /* exec/cuda/ops.c says the same of its ops */
    return no(why, cap, "`precision` %s: the cuda backend does not drive cuBLASLt's block-scaled matmul yet (CUDA 12.8, "
              "compute capability 10.0; hint: `backend` cpu emulates it)", px_precision_names[p->precision]);
  if (px_parallel_grad_dtype(p) != px_parallel_compute_dtype(p))
    return no(why, cap, "%s gradients with %s activations: the cuda backend accumulates and steps in the activations' "
              "dtype (hint: `main_grad` param)", px_dtype_names[px_parallel_grad_dtype(p)],
              px_dtype_names[px_parallel_compute_dtype(p)]);
  if (p->precision != PX_PREC_FP8) return true;
  if (p->fp8_recipe == PX_FP8_BLOCKWISE)
    return no(why, cap, "fp8 blockwise scales (1x128 tiles, 128x128 weight blocks) are emulated by the cpu backend "
              "only: the cuda backend does not drive cuBLASLt's block-scaling modes yet (hint: `fp8_recipe` delayed "
              "or current)");
  if (m->mlp == PX_MLP_GELU && p->gelu == PX_GELU_FUSED)
    return no(why, cap, "a fused GELU epilogue on an fp8 GEMM (cuBLASLt's fp8 epilogues are not wired; hint: `gelu` "
              "separate)");
  if (p->sp && p->tp > 1 && p->mbs > 1) /* exec/cuda/ops.c: it has no codes_permuted (exec/backend.h) */
    return no(why, cap, "an fp8 sequence-parallel all-gather with `mbs` > 1 goes through a permute that the cuda "
              "backend's fp8 scales do not follow (hint: `mbs` 1)");
  return fp8_collectives_run(p, m, why, cap);
}

bool px_runnable(px_run_backend b, const px_parallel *p, const px_model *m, char *why, size_t cap) {
  if (why && cap) why[0] = 0;
  if (b == PX_RUN_CUDA && m->experts > 0) /* before the executor's layout of experts, which it has no kernels for */
    return no(why, cap, "no mixture-of-experts kernels (hint: `backend` cpu runs it)");
  if (!executor_runs(p, m, why, cap)) return false;
  return b == PX_RUN_CPU ? cpu_runs(p, m, why, cap) : cuda_runs(p, m, why, cap);
}
