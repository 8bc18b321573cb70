/* Plans to Megatron-LM, Megatron-Bridge, torchtitan and DeepSpeed: what each
 * can run (px_export_check), then its text. The versions whose settings are
 * written are those of tests/data/export (docs/export.md has the tables). */
#include "report/export.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <cJSON.h>

#include "core/fmt.h"
#include "core/json.h"
#include "report/plan.h"

PX_NAME_TABLE(px_framework_names, PX_FW_COUNT, "megatron", "nemo", "torchtitan", "deepspeed");

/* How messages and headers name each framework, with the version whose settings are written. */
static const char *const fw_label[PX_FW_COUNT] = {
    "Megatron-LM (cd4afffa, the one Megatron-Bridge v0.6.0 pins)", "Megatron-Bridge v0.6.0 (NeMo)",
    "torchtitan v0.2.2", "DeepSpeed v0.19.5"};
static const char *const fw_short[PX_FW_COUNT] = {"Megatron-LM", "Megatron-Bridge", "torchtitan", "DeepSpeed"};

static px_status refuse(px_err *err, px_framework fw, const char *what, const char *why, const char *hint) {
  return px_err_set(err, PX_ERR_INPUT, "%s cannot run %s: %s (hint: %s)", fw_short[fw], what, why, hint);
}

/* ---- what each framework can run ---- */

static bool gelu_mlp(const px_model *m) { return m->mlp == PX_MLP_GELU; }

/* Megatron-Bridge's mixed_precision recipe for the plan's precision (src/megatron/bridge/training/mixed_precision.py
 * at v0.6.0) and what it fixes: whether the weights are kept quantized (fp8_param_gather; mxfp8's with
 * reuse_grad_buf_for_mxfp8_param_ag, nvfp4's fp4_param_gather), the layers it keeps in bf16
 * (first_last_layers_bf16 with num_layers_at_start/end_in_bf16) and the gradients' dtype
 * (grad_reduce_in_fp32: fp32 main_grad, true but in fp16_mixed). Nothing overrides those:
 * MixedPrecisionConfig.setup writes each of its fields over the model's, ddp's and optimizer's after the
 * overrides (update_config_with_precision_overrides, from runtime_config_update in config.py), and the recipes
 * run_recipe.py loads name it by a string (recipes/common.py: mixed_precision="bf16_mixed"), whose fields no
 * mixed_precision.* override reaches. bf16 based (fp8_base fp32 is refused). */
typedef struct {
  const char *name;
  bool params;                  /* quantized weights */
  int64_t bf16_start, bf16_end; /* layers kept in bf16 */
  int main_grad;                /* px_main_grad */
} bridge_mp;

static bridge_mp bridge_recipe(const px_parallel *p) {
  const int fp32 = PX_MAIN_GRAD_FP32;
  static const bridge_mp fp8[PX_FP8_RECIPE_COUNT] = {{"bf16_with_fp8_delayed_scaling_mixed", true, 0, 0, fp32},
                                                     {"bf16_with_fp8_current_scaling_mixed", true, 1, 1, fp32},
                                                     {"bf16_with_fp8_subchannel_scaling_mixed", false, 0, 0, fp32}};
  switch (p->precision) {
    case PX_PREC_FP8: return fp8[p->fp8_recipe];
    case PX_PREC_MXFP8: return (bridge_mp){"bf16_with_mxfp8_mixed", true, 0, 0, fp32};
    case PX_PREC_NVFP4: return (bridge_mp){"bf16_with_nvfp4_mixed", true, 0, 0, fp32};
    case PX_PREC_FP16: return (bridge_mp){"fp16_mixed", false, 0, 0, PX_MAIN_GRAD_PARAM};
    default: return (bridge_mp){"bf16_mixed", false, 0, 0, fp32};
  }
}

/* A plan whose quantized weights, bf16 layers or gradient dtype differ from its Megatron-Bridge recipe's: refused,
 * naming them. */
static px_status check_bridge_recipe(const px_parallel *p, px_err *err) {
  bridge_mp r = bridge_recipe(p);
  char what[96], why[256], hint[96], prec[48];
  if (p->precision == PX_PREC_FP8)
    snprintf(prec, sizeof prec, "fp8_recipe %s", px_fp8_recipe_names[p->fp8_recipe]);
  else
    snprintf(prec, sizeof prec, "precision %s", px_precision_names[p->precision]);
  if ((p->fp8_params > 0) != r.params) {
    const char *gather = p->precision == PX_PREC_NVFP4   ? "fp4_param_gather"
                         : p->precision == PX_PREC_MXFP8 ? "fp8_param_gather with reuse_grad_buf_for_mxfp8_param_ag"
                                                         : "fp8_param_gather";
    snprintf(what, sizeof what, r.params ? "%s without fp8_params" : "%s with fp8_params", prec);
    snprintf(why, sizeof why, "its recipe %s sets %s %s, over any override", r.name, gather,
             r.params ? "true" : "false");
    return refuse(err, PX_FW_NEMO, what, why,
                  r.params ? "fp8 params, or export to megatron" : "no fp8 params, or export to megatron");
  }
  if (p->bf16_layers_start != r.bf16_start || p->bf16_layers_end != r.bf16_end) {
    snprintf(why, sizeof why, "its recipe %s keeps the first %lld and last %lld layers in bf16, over any override",
             r.name, (long long)r.bf16_start, (long long)r.bf16_end);
    snprintf(hint, sizeof hint, "bf16 layers start %lld and end %lld, or export to megatron", (long long)r.bf16_start,
             (long long)r.bf16_end);
    snprintf(what, sizeof what, "bf16_layers_start/end with %s", prec);
    return refuse(err, PX_FW_NEMO, what, why, hint);
  }
  if (p->main_grad != r.main_grad) {
    bool fp32 = r.main_grad == PX_MAIN_GRAD_FP32;
    snprintf(what, sizeof what, "main_grad %s with %s", px_main_grad_names[p->main_grad], prec);
    snprintf(why, sizeof why, "its recipe %s sets grad_reduce_in_fp32 %s, over any override", r.name,
             fp32 ? "true" : "false");
    return refuse(err, PX_FW_NEMO, what, why, fp32 ? "main-grad fp32" : "main-grad param");
  }
  return PX_OK;
}

/* Megatron-LM and Megatron-Bridge: the same Megatron-Core. */
static px_status check_megatron(px_framework fw, const px_parallel *p, const px_model *m, px_err *err) {
  if (px_parallel_recompute_partial(p) && p->recompute_method == PX_RECOMPUTE_EVERY)
    return refuse(err, fw, "recompute_method every",
                  "Megatron-Core recomputes every layer in uniform groups or the first N layers of each model chunk "
                  "(block), not every N-th (torchtitan's layer-wise selective checkpointing)",
                  "recompute_method block, or export to torchtitan");
  if (p->recompute == PX_RECOMPUTE_OP)
    return refuse(err, fw, "recompute op",
                  "Megatron-Core recomputes whole layers or named modules, not torchtitan's every second matmul and "
                  "every elementwise op",
                  "recompute selective (with recompute_modules) or full, or export to torchtitan");
  if (p->pp > 1 && p->schedule == PX_SCHED_GPIPE)
    return refuse(err, fw, "schedule gpipe", "Megatron-Core's pipelines run 1F1B or interleaved 1F1B, no GPipe",
                  "schedule 1f1b");
  if (p->pp > 1 && px_parallel_split_w(p))
    return refuse(err, fw, p->schedule == PX_SCHED_ZB_H1 ? "schedule zb-h1" : "schedule zb-h2",
                  "Megatron-Core has no zero-bubble schedule (no backward split into B and W)",
                  "schedule 1f1b or interleaved");
  if (gelu_mlp(m) && p->gelu == PX_GELU_FUSED)
    return refuse(err, fw, "gelu fused", "Megatron-Core runs GELU as its own (bias-GELU) kernel, not in the GEMM's epilogue",
                  "gelu separate");
  if (p->elementwise == PX_ELEMWISE_EAGER)
    return refuse(err, fw, "elementwise eager",
                  "Megatron-Core runs its norms, RoPE and SwiGLU as fused kernels (Transformer Engine's norms, "
                  "apply_rope_fusion, bias_swiglu_fusion)",
                  "elementwise fused");
  if (p->tp > 1 && !(p->overlap & PX_OVERLAP_TP_BWD))
    return refuse(err, fw, "overlap without tp-bwd",
                  "Megatron-Core always overlaps a column-parallel layer's backward TP collectives with its GEMMs",
                  "overlap tp-bwd");
  if (p->tp > 1 && (p->overlap & PX_OVERLAP_TP) && !p->sp)
    return refuse(err, fw, "overlap tp without sequence parallelism",
                  "Megatron-LM's `tp_comm_overlap` needs `sequence_parallel`", "sp, or overlap without tp");
  if (p->zero >= 1 && (p->overlap & PX_OVERLAP_ZERO) && !(p->overlap & PX_OVERLAP_DP) && px_parallel_weight_dp(p) > 1)
    return refuse(err, fw, "overlap zero without dp",
                  "Megatron-LM overlaps the parameter all-gather (`overlap_param_gather`) only with `overlap_grad_reduce`",
                  "overlap dp too, or not zero");
  if (p->zero >= 2 && p->grad_accum == PX_ACCUM_FULL)
    return refuse(err, fw, "grad_accum full with ZeRO-2/3",
                  "Megatron-FSDP's optim_grads and optim_grads_params reduce-scatter every micro-batch's gradients",
                  "grad_accum sharded, or zero 1: the distributed optimizer reduces once a step");
  if (p->zero == 3 && !p->reshard)
    return refuse(err, fw, "reshard_after_forward false",
                  "Megatron-FSDP frees gathered parameters after each forward (keeping them is torch FSDP2's "
                  "reshard_after_forward=False, which Megatron-LM refuses with pipeline or expert parallelism)",
                  "reshard after forward, or export to torchtitan");
  if (p->zero == 3 && p->prefetch != 1)
    return refuse(err, fw, "prefetch other than 1",
                  "Megatron-FSDP sizes its prefetch in elements (`suggested_communication_unit_size`), not layers",
                  "prefetch 1");
  if (p->offload_opt != PX_OFFLOAD_NONE || p->offload_params != PX_OFFLOAD_NONE)
    return refuse(err, fw, "offload",
                  "Megatron-LM offloads only its distributed optimizer's states (`optimizer_cpu_offload`, ZeRO-1), not "
                  "ZeRO-2/3's gradient shard, parameters, or to NVMe",
                  "offload none");
  /* primary quantized weights: Megatron-LM asserts that --fp8-param-gather has the distributed optimizer or an
   * FSDP (megatron/training/arguments.py at cd4afffa), and NVFP4 weights are the distributed optimizer's alone
   * (megatron/core/optimizer/distrib_optimizer.py, quantize_nvfp4_param_shard; Megatron-FSDP's buffers have no
   * NVFP4 path, megatron/core/distributed/fsdp) */
  if (p->fp8_params > 0 && p->zero == 0)
    return refuse(err, fw, "fp8_params without ZeRO",
                  "Megatron-LM keeps quantized weights (DistributedDataParallelConfig's fp8_param_gather, "
                  "fp4_param_gather) with its distributed optimizer or Megatron-FSDP only",
                  "zero 1");
  if (p->fp8_params > 0 && p->precision == PX_PREC_NVFP4 && p->zero >= 2)
    return refuse(err, fw, "fp8_params in nvfp4 with ZeRO-2/3",
                  "Megatron-FSDP has no NVFP4 weights: the distributed optimizer alone shards and gathers them",
                  "zero 1");
  /* TransformerConfig.fp8_dot_product_attention: among the fields arguments.py builds no argument for
   * (megatron/training/arguments.py at d98e8a6); Megatron-Bridge's MixedPrecisionConfig holds it, False in every
   * registered recipe, which setup writes over the model's after any override (bridge_recipe): its performance
   * recipes set it in Python */
  if (p->fp8_attention > 0)
    return refuse(err, fw, "fp8_attention",
                  fw == PX_FW_MEGATRON ? "Megatron-LM has no argument for TransformerConfig's fp8_dot_product_attention"
                                       : "no mixed_precision recipe of Megatron-Bridge sets fp8_dot_product_attention "
                                         "(it stays False over any override; its performance recipes set it in Python)",
                  "drop fp8_attention");
  if (fw == PX_FW_NEMO &&
      (p->precision == PX_PREC_FP32 || (px_precision_quantized(p->precision) && p->fp8_base == PX_FP8_BASE_FP32)))
    return refuse(err, fw, p->precision == PX_PREC_FP32 ? "precision fp32" : "fp8_base fp32",
                  "Megatron-Bridge's mixed_precision recipes are bf16 or fp16 based", "precision bf16, or export to megatron");
  if (fw == PX_FW_NEMO) return check_bridge_recipe(p, err);
  return PX_OK;
}

/* PyTorch's Interleaved1F1B runs the micro-batches in rounds of pp. */
static bool interleaved_rounds_of_pp(const px_parallel *p) { return px_parallel_mb_group(p) == p->pp; }

/* Whether torchtitan's job runs under torch.compile ([compile] enable): to fuse the elementwise ops (`elementwise`
 * fused) and for async TP. */
static bool torchtitan_compiles(const px_parallel *p) {
  return p->elementwise == PX_ELEMWISE_FUSED || (p->tp > 1 && (p->overlap & PX_OVERLAP_TP));
}

static px_status check_torchtitan(const px_parallel *p, const px_model *m, px_err *err) {
  px_framework fw = PX_FW_TORCHTITAN;
  if (p->elementwise == PX_ELEMWISE_ROPE_UNFUSED)
    return refuse(err, fw, "elementwise rope-unfused",
                  "torchtitan's RoPE is its model code's: fused under torch.compile, its complex-number ops eager, "
                  "not Megatron-Core's unfused one",
                  "elementwise fused or eager");
  if (p->zero == 1 || p->zero == 2)
    return refuse(err, fw, p->zero == 1 ? "zero 1" : "zero 2",
                  "torchtitan shards parameters, gradients and optimizer states together (FSDP2, ZeRO-3) or replicates "
                  "them (DDP): no ZeRO-1/2",
                  "zero 3, or zero 0 without other parallelism");
  if (p->zero == 0 && px_parallel_weight_dp(p) > 1 && (p->tp > 1 || p->pp > 1 || p->cp > 1 || p->ep > 1))
    return refuse(err, fw, "zero 0 with tp, pp, cp or ep", "torchtitan's DDP runs alone (\"DDP has not supported > 1D parallelism\")",
                  "zero 3");
  if (p->tp > 1 && !p->sp)
    return refuse(err, fw, "tp without sequence parallelism",
                  "torchtitan's tensor parallelism always shards the norms and dropout along the sequence", "sp");
  if (p->pp > 1 && px_parallel_split_w(p))
    return refuse(err, fw, p->schedule == PX_SCHED_ZB_H1 ? "schedule zb-h1" : "schedule zb-h2",
                  "PyTorch's zero-bubble schedules (InterleavedZeroBubble, ZBVZeroBubble) run several chunks a rank, "
                  "not ZB-H1/H2's one",
                  "schedule 1f1b or interleaved");
  if (p->pp > 1 && p->schedule == PX_SCHED_INTERLEAVED && !interleaved_rounds_of_pp(p))
    return refuse(err, fw, "microbatch_group other than pp",
                  "PyTorch's Interleaved1F1B runs the micro-batches on a chunk in rounds of pp",
                  "a micro-batch count that pp divides, and no microbatch_group");
  if (p->cp > 1 && p->cp_algo == PX_CP_A2A)
    return refuse(err, fw, "cp_algo a2a", "PyTorch's context parallelism passes K/V shards (allgather, alltoall); no Ulysses",
                  "cp_algo ring or all-gather");
  if (p->ep > 1 && p->moe_dispatch != PX_MOE_A2A) {
    char what[40];
    snprintf(what, sizeof what, "moe_dispatch %s", px_moe_dispatch_names[p->moe_dispatch]);
    return refuse(err, fw, what, "torchtitan sends tokens to experts by all-to-all", "moe_dispatch a2a");
  }
  if (p->mtp_layers > 0) /* torchtitan/models/deepseek_v3/MTP.md at 030cd95 */
    return refuse(err, fw, "mtp_layers",
                  "torchtitan builds DeepSeek-V3's MTP modules from its model flavor (num_mtp_layers), not from the job "
                  "file, and refuses them with pipeline parallelism",
                  "mtp_layers 0");
  if (p->recompute == PX_RECOMPUTE_SELECTIVE)
    return refuse(err, fw, "recompute selective",
                  "torchtitan's selective activation checkpointing saves op by op or every n-th layer, not Megatron's "
                  "modules",
                  "recompute op, its per-op policy; or none or full");
  if (px_parallel_recompute_partial(p) && p->recompute_method == PX_RECOMPUTE_BLOCK)
    return refuse(err, fw, "recompute_method block",
                  "torchtitan's full activation checkpointing covers every layer, and its layer-wise selective one "
                  "every n-th, not the first n of each model chunk",
                  "recompute_method every, or full of every layer, or none");
  if (p->precision == PX_PREC_FP16)
    return refuse(err, fw, "precision fp16", "torchtitan's mixed precision is bfloat16 or float32", "precision bf16");
  /* async TP runs under torch.compile, which fuses the elementwise ops an eager plan prices apart */
  bool async_tp = p->tp > 1 && (p->overlap & PX_OVERLAP_TP);
  if (async_tp && p->elementwise == PX_ELEMWISE_EAGER)
    return refuse(err, fw, "elementwise eager with overlap tp",
                  "torchtitan's async TP needs torch.compile, which fuses the elementwise ops", "elementwise fused");
  /* torchtitan/components/quantization/mx.py at v0.2.2: MXLinearConverter refuses torch.compile with TP */
  if (p->precision == PX_PREC_MXFP8 && p->tp > 1 && torchtitan_compiles(p))
    return refuse(err, fw, async_tp ? "precision mxfp8 with overlap tp" : "precision mxfp8 with tp and elementwise fused",
                  async_tp ? "torchtitan's async TP needs torch.compile, which its MXFP8 converter refuses with TP (\"TP "
                             "not yet supported with torch.compile for mxfp8\")"
                           : "torchtitan fuses the norms, RoPE and SwiGLU with torch.compile, which its MXFP8 converter "
                             "refuses with TP",
                  async_tp ? "overlap without tp" : "elementwise eager");
  if (p->offload_act_layers > 0)
    return refuse(err, fw, "offload_activations",
                  "torchtitan has no offload of a layer's activations to the host (its activation checkpointing "
                  "recomputes them)",
                  "no activation offload, or export to megatron");
  if (p->fp8_params > 0)
    return refuse(err, fw, "fp8_params",
                  "torchtitan's float8 keeps the sharded weights in high precision and all-gathers them in float8 "
                  "(enable_fsdp_float8_all_gather): no fp8 weights",
                  "no fp8 params, or export to megatron");
  if (px_precision_quantized(p->precision) && m->experts > 0) {
    char what[64];
    snprintf(what, sizeof what, "precision %s with experts", px_precision_names[p->precision]);
    return refuse(err, fw, what,
                  "torchtitan's float8 and MXFP8 grouped GEMMs for experts are prototypes (quantize.grouped_mm.float8, "
                  "quantize.grouped_mm.mx)",
                  "precision bf16");
  }
  if (px_parallel_mixed(p) && p->main_grad != PX_MAIN_GRAD_FP32)
    return refuse(err, fw, "main_grad param", "torchtitan reduces gradients in float32 (training.mixed_precision_reduce)",
                  "main-grad fp32");
  if (!px_attention_fused(p->attention))
    return refuse(err, fw, "attention unfused", "torchtitan's attention is fused (SDPA or FlexAttention)", "attention flash");
  if (gelu_mlp(m) && p->gelu == PX_GELU_FUSED)
    return refuse(err, fw, "gelu fused", "torchtitan runs the activation as its own op", "gelu separate");
  if (p->zero == 3) {
    if (p->offload_opt != p->offload_params || p->offload_opt == PX_OFFLOAD_NVME)
      return refuse(err, fw, "this offload",
                    "torchtitan offloads parameters, gradients and optimizer states together, to host memory "
                    "(training.enable_cpu_offload)",
                    "offload-optimizer cpu with offload-params cpu, or none");
    if (p->prefetch != 1)
      return refuse(err, fw, "prefetch other than 1", "FSDP2 gathers one block ahead and torchtitan has no setting for more",
                    "prefetch 1");
    if ((p->overlap & (PX_OVERLAP_DP | PX_OVERLAP_ZERO)) != (PX_OVERLAP_DP | PX_OVERLAP_ZERO))
      return refuse(err, fw, "overlap without dp or zero", "FSDP2 always overlaps its gathers and reduce-scatters",
                    "overlap dp,zero");
    if (px_parallel_hybrid(p) && p->shard_group % p->cp)
      return refuse(err, fw, "this shard_group", "torchtitan shards over data_parallel_shard_degree x cp ranks, which cp must divide",
                    "a shard group cp divides");
    /* FSDP2 reduce-scatters each micro-batch's gradients; PyTorch's pipeline schedules once a step */
    if (p->pp == 1 && p->grad_accum == PX_ACCUM_FULL && px_parallel_microbatches(p) > 1)
      return refuse(err, fw, "grad_accum full without pp", "torchtitan's FSDP2 reduce-scatters every micro-batch's gradients",
                    "grad-accum sharded");
    if (p->pp > 1 && p->grad_accum == PX_ACCUM_SHARDED && px_parallel_microbatches(p) > 1)
      return refuse(err, fw, "grad_accum sharded with pp",
                    "PyTorch's pipeline schedules reduce FSDP2's gradients once a step (the last micro-batch's backward)",
                    "grad-accum full");
  }
  if (p->pp > 1 && !(p->overlap & PX_OVERLAP_PP))
    return refuse(err, fw, "overlap without pp", "PyTorch's pipeline schedules always send and receive asynchronously",
                  "overlap pp");
  if (p->overlap & PX_OVERLAP_EP)
    return refuse(err, fw, "overlap ep", "torchtitan has no schedule that merges a forward with a backward to hide the "
                  "experts' all-to-all (Megatron-Core's combined 1F1B)", "overlap without ep, or export to megatron");
  return PX_OK;
}

static px_status check_deepspeed(const px_parallel *p, px_err *err) {
  px_framework fw = PX_FW_DEEPSPEED;
  if (p->tp > 1 || p->pp > 1 || p->cp > 1 || p->ep > 1)
    return refuse(err, fw, p->tp > 1 ? "tp > 1" : p->pp > 1 ? "pp > 1" : p->cp > 1 ? "cp > 1" : "ep > 1",
                  "DeepSpeed's JSON config has no tensor, pipeline, context or expert parallel size: they are the model "
                  "code's (Megatron-DeepSpeed, PipelineModule)",
                  "tp 1, pp 1, cp 1, ep 1, or export to megatron");
  if (px_precision_quantized(p->precision)) {
    char what[32];
    snprintf(what, sizeof what, "precision %s", px_precision_names[p->precision]);
    return refuse(err, fw, what,
                  "DeepSpeed's JSON config has no fp8 or block-scaled recipe (Transformer Engine in the model code)",
                  "precision bf16");
  }
  if (p->zero >= 2 && p->grad_accum == PX_ACCUM_FULL)
    return refuse(err, fw, "grad_accum full with ZeRO-2/3", "DeepSpeed's ZeRO-2/3 reduce-scatter every micro-batch's gradients",
                  "grad-accum sharded");
  if (p->zero == 3 && !p->reshard)
    return refuse(err, fw, "reshard_after_forward false",
                  "DeepSpeed's ZeRO-3 releases gathered parameters after use (stage3_max_reuse_distance keeps them "
                  "within a distance, not from forward to backward)",
                  "reshard after forward");
  if (px_parallel_hybrid(p) && p->zero != 3)
    return refuse(err, fw, "shard_group with ZeRO-1/2", "DeepSpeed shards within groups (MiCS, mics_shard_size) with ZeRO-3 only",
                  "zero 3, or no shard group");
  if (p->zero < 3 && p->offload_params != PX_OFFLOAD_NONE)
    return refuse(err, fw, "offload_params without ZeRO-3", "DeepSpeed offloads parameters with ZeRO-3 only", "zero 3");
  if (p->offload_act_layers > 0)
    return refuse(err, fw, "offload_activations",
                  "DeepSpeed moves activations to the host only as checkpoints of activation checkpointing "
                  "(cpu_checkpointing), not a layer's kept activations without recomputation",
                  "no activation offload, or export to megatron");
  return PX_OK;
}

/* The library whose quantized linear layers a framework runs: Megatron-Core's are Transformer Engine's, torchtitan's
 * torchao's float8 and MX converters (what torchao's recipes are, the plan's fp8_library rules say: plan/parallel.c);
 * -1: DeepSpeed's config names none (check_deepspeed refuses the quantized precisions). */
static int fw_fp8_library(px_framework fw) {
  return fw == PX_FW_TORCHTITAN ? PX_FP8_LIB_TORCHAO : fw == PX_FW_DEEPSPEED ? -1 : PX_FP8_LIB_TE;
}

px_status px_export_check(px_framework fw, const px_parallel *p, const px_model *m, px_err *err) {
  if (px_parallel_lora(p)) /* every exporter writes a pre-training job's settings */
    return refuse(err, fw, p->finetune == PX_FT_QLORA ? "finetune qlora" : "finetune lora",
                  "the export writes pre-training settings, not a PEFT or Megatron-Bridge LoRA recipe",
                  "finetune full or none");
  if (p->cuda_graph > PX_GRAPH_NONE && (fw == PX_FW_TORCHTITAN || fw == PX_FW_DEEPSPEED)) {
    char what[32];
    snprintf(what, sizeof what, "cuda_graph %s", px_cuda_graph_names[p->cuda_graph]);
    return refuse(err, fw, what, "it captures no CUDA graph of a training step", "cuda_graph none");
  }
  px_status st;
  switch (fw) {
    case PX_FW_MEGATRON:
    case PX_FW_NEMO: st = check_megatron(fw, p, m, err); break;
    case PX_FW_TORCHTITAN: st = check_torchtitan(p, m, err); break;
    case PX_FW_DEEPSPEED: st = check_deepspeed(p, err); break;
    default: return px_err_set(err, PX_ERR_INPUT, "unknown framework %d", (int)fw);
  }
  int lib = fw_fp8_library(fw);
  if (st || !px_precision_quantized(p->precision) || lib < 0 || p->fp8_library == lib) return st;
  static const char *const words[PX_FP8_LIB_COUNT] = {"Transformer Engine's", "torchao's"};
  char what[32], why[96], hint[64];
  snprintf(what, sizeof what, "fp8_library %s", px_fp8_library_names[p->fp8_library]);
  snprintf(why, sizeof why, "its quantized linear layers are %s, not %s", words[lib], words[p->fp8_library]);
  snprintf(hint, sizeof hint, "fp8-library %s, or export to %s", px_fp8_library_names[lib],
           lib == PX_FP8_LIB_TORCHAO ? "megatron" : "torchtitan");
  return refuse(err, fw, what, why, hint);
}

void px_export_sweep_fixed(px_framework fw, px_parallel *fixed) {
  if (fw == PX_FW_TORCHTITAN && fixed->main_grad < 0) fixed->main_grad = PX_MAIN_GRAD_FP32;
  /* torchao's float8: tensorwise, current scaling (the fp8_library rules refuse the others) */
  if (fw == PX_FW_TORCHTITAN && fixed->fp8_recipe < 0 && (fixed->precision < 0 || fixed->precision == PX_PREC_FP8))
    fixed->fp8_recipe = PX_FP8_CURRENT;
  if (fixed->fp8_library < 0) fixed->fp8_library = fw_fp8_library(fw); /* whose quantized layers (-1: none named) */
  if (fw != PX_FW_NEMO) return;
  /* Megatron-Bridge (check_bridge_recipe): the precision recipe's gradient dtype (an unset precision's sweep
   * searches bf16-based recipes; the fp8 ones differ in weights and bf16 layers only); a fixed quantized precision's
   * recipe fixes the weights' format and the bf16 layers, fp8's once its scaling is fixed too */
  px_parallel q = *fixed;
  if (q.fp8_recipe < 0) q.fp8_recipe = PX_FP8_CURRENT;
  bridge_mp r = bridge_recipe(&q);
  if (fixed->main_grad < 0) fixed->main_grad = r.main_grad;
  if (px_precision_quantized(fixed->precision) && (fixed->precision != PX_PREC_FP8 || fixed->fp8_recipe >= 0)) {
    if (fixed->fp8_params < 0) fixed->fp8_params = r.params;
    if (fixed->bf16_layers_start < 0) fixed->bf16_layers_start = r.bf16_start;
    if (fixed->bf16_layers_end < 0) fixed->bf16_layers_end = r.bf16_end;
  }
}

/* ---- text ---- */

/* The gradient bucket in elements of the gradient buffer's dtype (Megatron's and DeepSpeed's unit). */
static uint64_t bucket_elems(const px_parallel *p) { return p->bucket_bytes / px_dtype_bytes(px_parallel_grad_dtype(p)); }

/* Megatron-LM arguments or Megatron-Bridge overrides, one a line of a bash array. */
typedef struct {
  FILE *out;
  px_framework fw;
} emit;

static void vline(emit *e, const char *name, const char *fmt, va_list ap) {
  fprintf(e->out, "  %s", name);
  if (fmt) {
    fputs(e->fw == PX_FW_NEMO ? "=" : " ", e->out);
    vfprintf(e->out, fmt, ap);
  }
  fputc('\n', e->out);
}

static void mcore_arg(const char *k, char *cli, size_t cap);

/* A Megatron-LM argument with a value (fmt) or a flag (fmt NULL), named by its field (mcore_arg); nothing for
 * Megatron-Bridge. */
static void arg(emit *e, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void arg(emit *e, const char *name, const char *fmt, ...) {
  if (e->fw != PX_FW_MEGATRON) return;
  char cli[96];
  mcore_arg(name, cli, sizeof cli);
  va_list ap;
  va_start(ap, fmt);
  vline(e, cli, fmt, ap);
  va_end(ap);
}

/* A Megatron-Bridge override; nothing for Megatron-LM. */
static void key(emit *e, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void key(emit *e, const char *k, const char *fmt, ...) {
  if (e->fw != PX_FW_NEMO) return;
  va_list ap;
  va_start(ap, fmt);
  vline(e, k, fmt, ap);
  va_end(ap);
}

/* The same setting in both: Megatron-LM's argument (named by its field: mcore_arg) with the value,
 * Megatron-Bridge's key=value, where the two names differ. */
static void both(emit *e, const char *name, const char *k, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void both(emit *e, const char *name, const char *k, const char *fmt, ...) {
  char cli[96];
  mcore_arg(name, cli, sizeof cli);
  va_list ap;
  va_start(ap, fmt);
  vline(e, e->fw == PX_FW_NEMO ? k : cli, fmt, ap);
  va_end(ap);
}

/* Megatron-LM's argument for a field of a Megatron-Core config (TransformerConfig, DistributedDataParallelConfig;
 * k: the Bridge key, model.FIELD or ddp.FIELD, or the argument's own name): arguments.py builds it from the
 * field's name, '-' for '_' (ArgumentGroupFactory; its hand-written arguments follow the same rule), but for the
 * few whose argparse_meta arg_names rename them (megatron/core/transformer/transformer_config.py at d98e8a6).
 * The exporter names fields; this is the one place their command-line spelling is made. */
static void mcore_arg(const char *k, char *cli, size_t cap) {
  static const struct {
    const char *field, *arg;
  } renamed[] = {{"fp8", "fp8-format"}, {"fp4", "fp4-format"}, {"fp4_param", "fp4-param-gather"}};
  const char *f = strrchr(k, '.') ? strrchr(k, '.') + 1 : k;
  for (size_t i = 0; i < sizeof renamed / sizeof renamed[0]; i++)
    if (!strcmp(f, renamed[i].field)) f = renamed[i].arg;
  size_t n = 0;
  cli[n++] = '-', cli[n++] = '-';
  for (; *f && n + 1 < cap; f++) cli[n++] = *f == '_' ? '-' : *f;
  cli[n] = '\0';
}

/* A setting of a Megatron-Core config, in both: Megatron-LM's argument (mcore_arg), Megatron-Bridge's key k. */
static void config(emit *e, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void config(emit *e, const char *k, const char *fmt, ...) {
  char cli[96];
  mcore_arg(k, cli, sizeof cli);
  va_list ap;
  va_start(ap, fmt);
  vline(e, e->fw == PX_FW_NEMO ? k : cli, fmt, ap);
  va_end(ap);
}

/* A switch: Megatron-LM's flag (named by its field: mcore_arg) when on (nothing when off), Megatron-Bridge's
 * key=true|false. */
static void flag(emit *e, const char *name, const char *k, bool on) {
  if (e->fw == PX_FW_NEMO) fprintf(e->out, "  %s=%s\n", k, on ? "true" : "false");
  if (e->fw == PX_FW_MEGATRON && on) arg(e, name, NULL);
}

/* A switch of a Megatron-Core config, in both: Megatron-LM's flag (mcore_arg) when on, Megatron-Bridge's key k. */
static void config_flag(emit *e, const char *k, bool on) { flag(e, k, k, on); }

/* Megatron's pipeline layout: a stage per model chunk in virtual-stage order, "E" the embedding, "t" a
 * layer, "m" an MTP module (mtp of them, with the last chunk), "L" the loss ("Ettt|tttt|tttmL"), from the plan's
 * chunk split (n chunks). */
static void layout(const int64_t *chunk, int64_t n, int64_t mtp, char *buf, size_t cap) {
  size_t k = 0;
  for (int64_t i = 0; i < n && k + 4 < cap; i++) {
    if (i) buf[k++] = '|';
    if (i == 0) buf[k++] = 'E';
    for (int64_t l = 0; l < chunk[i] && k + 3 < cap; l++) buf[k++] = 't';
    for (int64_t l = 0; i == n - 1 && l < mtp && k + 3 < cap; l++) buf[k++] = 'm';
    if (i == n - 1) buf[k++] = 'L';
  }
  buf[k] = '\0';
}

/* The model's shape as Megatron-LM's arguments; what they cannot say, noted. */
/* A per-layer pattern of Megatron-LM's in its list form, quoted for bash: 1 where is(m, l) (moe_layer_freq,
 * window_attn_skip_freq); nothing where every layer is (Megatron's default then). */
static void layer_pattern(emit *e, const char *name, const px_model *m, bool (*is)(const px_model *, int64_t)) {
  bool all = true;
  for (int64_t l = 0; l < m->layers; l++) all = all && is(m, l);
  if (all || e->fw != PX_FW_MEGATRON) return;
  char cli[96];
  mcore_arg(name, cli, sizeof cli);
  fprintf(e->out, "  %s \"[", cli);
  for (int64_t l = 0; l < m->layers; l++) fprintf(e->out, "%s%d", l ? "," : "", is(m, l) ? 1 : 0);
  fputs("]\"\n", e->out);
}

/* Whether Megatron-LM's arguments say the model's YaRN RoPE (its frequencies' parameters, rope_yarn; MLA's YaRN is
 * its attention's own, noted with it). */
static bool megatron_yarn(const px_model *m) {
  return m->position == PX_POS_ROPE && m->rope_yarn.factor > 0 && m->kv_lora_rank == 0;
}

/* Whether Megatron-LM's arguments say the model's Llama 3.1 scaling (rope_llama3): --use-rope-scaling takes the
 * factor and fixes the rest at Llama 3.1's, low 1, high 4, 8192 positions (RotaryEmbedding._apply_scaling,
 * megatron/core/models/common/embeddings/rotary_pos_embedding.py at d98e8a6). */
static bool megatron_llama3(const px_model *m) {
  return m->position == PX_POS_ROPE && m->rope_llama3.factor > 0 && m->rope_llama3.low_freq_factor == 1.0 &&
         m->rope_llama3.high_freq_factor == 4.0 && m->rope_llama3.original_positions == 8192;
}

/* Whether Megatron-LM's arguments say the model's linear interpolation: --rotary-seq-len-interpolation-factor divides
 * the positions, so the frequencies, by a whole number (arguments.py at d98e8a6: type=int). */
static bool megatron_linear(const px_model *m) {
  double f = m->rope_linear_factor;
  return m->position == PX_POS_ROPE && f > 0 && f == floor(f);
}

static void megatron_model(emit *e, const px_model *m, const px_parallel *p) {
  arg(e, "num_layers", "%lld", (long long)m->layers);
  arg(e, "hidden_size", "%lld", (long long)m->hidden);
  arg(e, "ffn_hidden_size", "%lld", (long long)m->ffn_hidden);
  arg(e, "num_attention_heads", "%lld", (long long)m->heads);
  if (m->kv_heads != m->heads) {
    arg(e, "group_query_attention", NULL);
    arg(e, "num_query_groups", "%lld", (long long)m->kv_heads);
  }
  if (m->head_dim != m->hidden / m->heads) arg(e, "kv_channels", "%lld", (long long)m->head_dim);
  arg(e, "normalization", "%s", m->norm == PX_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
  arg(e, "norm_epsilon", "%g", m->norm_eps);
  if (m->mlp == PX_MLP_SWIGLU) arg(e, "swiglu", NULL);
  if (!m->bias) arg(e, "disable_bias_linear", NULL);
  if (m->qkv_bias && !m->bias) arg(e, "add_qkv_bias", NULL);
  if (m->qk_norm) arg(e, "qk_layernorm", NULL);
  bool yarn = megatron_yarn(m);
  arg(e, "position_embedding_type", "%s", yarn ? "yarn" : m->position == PX_POS_ROPE ? "rope" : "learned_absolute");
  if (m->position == PX_POS_ROPE) arg(e, "rotary_base", "%.0f", m->rope_theta);
  if (m->position == PX_POS_ROPE && m->rope_fraction < 1.0) arg(e, "rotary_percent", "%g", m->rope_fraction);
  if (yarn) { /* Megatron-LM's argument_utils.py _apply_yarn_config_from_args (cd4afffa) and its defaults */
    arg(e, "rotary_scaling_factor", "%g", m->rope_yarn.factor);
    arg(e, "yarn_original_max_position_embeddings", "%lld", (long long)m->rope_yarn.original_positions);
    arg(e, "yarn_beta_fast", "%g", m->rope_yarn.beta_fast);
    arg(e, "yarn_beta_slow", "%g", m->rope_yarn.beta_slow);
    if (!m->rope_yarn.truncate) arg(e, "no_yarn_correction_range_round_to_int", NULL);
    /* its concentration, mscale(factor, mscale) / mscale(factor, mscale_all_dim 0), linear in mscale (1 by
     * default): the model's through mscale */
    double f = m->rope_yarn.factor, unit = px_model_yarn_mscale(f, 1.0) - 1.0;
    if (unit > 0 && fabs(m->rope_concentration - (1.0 + unit)) > 1e-9)
      arg(e, "mscale", "%.9g", (m->rope_concentration - 1.0) / unit);
  }
  if (megatron_llama3(m)) {
    arg(e, "use_rope_scaling", NULL);
    arg(e, "rope_scaling_factor", "%g", m->rope_llama3.factor);
  }
  if (megatron_linear(m)) arg(e, "rotary_seq_len_interpolation_factor", "%.0f", m->rope_linear_factor);
  arg(e, "max_position_embeddings", "%lld", (long long)(m->position == PX_POS_ROPE ? p->seq : m->max_positions));
  if (!m->tied_embeddings) arg(e, "untie_embeddings_and_output_weights", NULL);
  arg(e, "hidden_dropout", "%g", m->dropout);
  arg(e, "attention_dropout", "%g", m->dropout);
  if (m->experts > 0) {
    arg(e, "num_experts", "%lld", (long long)m->experts);
    arg(e, "moe_router_topk", "%lld", (long long)m->experts_per_token);
    arg(e, "moe_ffn_hidden_size", "%lld", (long long)m->moe_ffn_hidden);
    if (px_model_shared_ffn(m) > 0) arg(e, "moe_shared_expert_intermediate_size", "%lld", (long long)px_model_shared_ffn(m));
    arg(e, "moe_router_score_function", "%s", m->router == PX_ROUTER_SIGMOID ? "sigmoid" : "softmax");
    layer_pattern(e, "moe_layer_freq", m, px_model_layer_is_moe); /* 1 a MoE layer */
  }
  /* the sliding window as Megatron-Core's (left, right): a query attends to itself and `left` tokens before it
   * (Megatron-Bridge's HF bridges: sliding_window - 1, 0); the windowed layers as a list, 1 a windowed layer
   * (window_attn_skip_freq, is_layer_window_attention: transformer/utils.py at d98e8a6) unless every layer is */
  if (m->sliding_window > 0) {
    arg(e, "window_size", "%lld,0", (long long)(m->sliding_window - 1));
    layer_pattern(e, "window_attn_skip_freq", m, px_model_layer_is_sliding);
  }
  if (m->attention_sinks) arg(e, "softmax_type", "%s", "learnable"); /* gpt-oss's sinks (its HF bridge's) */
}

/* What the model has that the arguments above do not say. */
static void model_notes(FILE *out, const char *prefix, const px_model *m, px_framework fw) {
  const char *what[9];
  int n = 0;
  if (m->kv_lora_rank > 0) what[n++] = "multi-head latent attention";
  if (m->sliding_window > 0 && fw != PX_FW_MEGATRON) what[n++] = "sliding-window layers";
  if (m->attention_sinks && fw != PX_FW_MEGATRON) what[n++] = "attention sinks";
  if (m->parallel_residual) what[n++] = "a parallel residual";
  bool yarn = m->position == PX_POS_ROPE && (m->rope_yarn.factor > 0 || m->rope_concentration != 1.0);
  if (yarn && m->kv_lora_rank == 0 && !(fw == PX_FW_MEGATRON && megatron_yarn(m)))
    what[n++] = "YaRN's RoPE scaling (factor, original length, betas, concentration)";
  if (m->rope_llama3.factor > 0 && !(fw == PX_FW_MEGATRON && megatron_llama3(m)))
    what[n++] = "Llama 3.1's RoPE scaling (factor, wavelength factors, original length)";
  if (m->rope_linear_factor > 0 && !(fw == PX_FW_MEGATRON && megatron_linear(m)))
    what[n++] = "RoPE's linear position interpolation (its factor)";
  if (m->position == PX_POS_ROPE && m->rope_fraction < 1.0 && fw != PX_FW_MEGATRON)
    what[n++] = "a partial rotary (the rotated share of a head)";
  if (m->experts > 0) what[n++] = "the router's normalisation, capacity, load balancing and expert groups";
  for (int i = 0; i < n; i++)
    fprintf(out, "%s%s: %s, not written here: take it from %s's own recipe for this model\n", prefix, m->name, what[i],
            fw_short[fw]);
}

/* The command that runs what is written, as a comment: the caller's (another program's command line), or none. */
static void launch_comment(FILE *out, const char *launch) {
  if (launch) fprintf(out, "# %s\n", launch);
}

static void write_megatron(emit *e, const px_model *m, const px_cluster *c, const px_parallel *p, const char *launch) {
  FILE *out = e->out;
  bool nemo = e->fw == PX_FW_NEMO;
  fprintf(out, "# %s: %s on %lld x %s (%s), tp %lld, pp %lld, cp %lld, dp %lld: %lld ranks\n", fw_label[e->fw], m->name,
          (long long)c->gpus, c->gpu.name, c->name, (long long)p->tp, (long long)p->pp, (long long)p->cp, (long long)p->dp,
          (long long)(p->tp * p->pp * p->cp * p->dp));
  launch_comment(out, launch);
  if (nemo) fputs("# (the model's shape comes from its recipe; these set the plan)\n", out);
  fprintf(out, "%s=(\n", px_export_array(e->fw));
  if (!nemo) megatron_model(e, m, p);
  /* the grid */
  config(e, "model.tensor_model_parallel_size", "%lld", (long long)p->tp);
  config(e, "model.pipeline_model_parallel_size", "%lld", (long long)p->pp);
  config(e, "model.context_parallel_size", "%lld", (long long)p->cp);
  if (p->cp > 1) {
    static const char *const cp_type[PX_CP_ALGO_COUNT] = {"p2p", "all_gather", "a2a"};
    config(e, "model.cp_comm_type", "%s", cp_type[p->cp_algo]);
  }
  if (m->experts > 0) {
    config(e, "model.expert_model_parallel_size", "%lld", (long long)p->ep);
    config(e, "model.expert_tensor_parallel_size", "%lld", (long long)p->etp);
    static const char *const dispatcher[PX_MOE_DISPATCH_COUNT] = {"alltoall", "allgather", "flex", "flex"};
    config(e, "model.moe_token_dispatcher_type", "%s", dispatcher[p->moe_dispatch]);
    if (px_moe_dispatch_deepep(p->moe_dispatch)) /* the flex dispatcher's backend: deepep or hybridep */
      config(e, "model.moe_flex_dispatcher_backend", "%s",
           px_moe_dispatch_names[p->moe_dispatch]);
    if (p->moe_router_padding > 0)
      config_flag(e, "model.moe_router_padding_for_quantization", true);
    /* the kernels the plan costs: Transformer Engine's grouped GEMM over the local experts (TEGroupedMLP), one
     * fused permutation each way and the fused router (top-k, scores and aux loss); Megatron-Core's defaults are
     * a loop of per-expert MLPs (SequentialMLP) and unfused ops (transformer_config.py at d98e8a6) */
    config_flag(e, "model.moe_grouped_gemm", true);
    config_flag(e, "model.moe_permute_fusion", true);
    config_flag(e, "model.moe_router_fusion", true);
  }
  /* the MTP modules trained and their loss's weight (said even at Megatron-Core's default, 0.1: the objective is
   * the plan's); none: Megatron-Bridge's recipe for a model with them trains them unless told not to */
  if (p->mtp_layers > 0) {
    config(e, "model.mtp_num_layers", "%lld", (long long)p->mtp_layers);
    config(e, "model.mtp_loss_scaling_factor", "%g", p->mtp_loss_scale);
  } else if (m->mtp_layers > 0)
    key(e, "model.mtp_num_layers", "null");
  /* CUDA graphs: Transformer Engine's per-layer ones (a MoE layer's attention and router), or the full-iteration
   * graph, without the NaN check's host sync it forbids */
  if (p->cuda_graph > PX_GRAPH_NONE)
    config(e, "model.cuda_graph_impl", "%s", p->cuda_graph == PX_GRAPH_FULL ? "full_iteration" : "transformer_engine");
  if (p->cuda_graph == PX_GRAPH_LAYERS && m->experts > 0) {
    arg(e, "cuda_graph_modules", "%s", "attn moe_router moe_preprocess");
    key(e, "model.cuda_graph_modules", "%s", "[attn,moe_router,moe_preprocess]");
  }
  if (p->cuda_graph == PX_GRAPH_ROUTER) { /* planned with experts only */
    arg(e, "cuda_graph_modules", "%s", "moe_router moe_preprocess");
    key(e, "model.cuda_graph_modules", "%s", "[moe_router,moe_preprocess]");
  }
  if (p->cuda_graph == PX_GRAPH_FULL) {
    arg(e, "no_check_for_nan_in_loss_and_grad", NULL); /* a store_false switch: its name, not its field's */
    key(e, "rerun_state_machine.check_for_nan_in_loss", "false");
    if (m->experts > 0) { /* HybridEP's static per-rank budget, the plan's busiest rank (tokens past it dropped), read
                           * by Transformer Engine's fused ops on the device (transformer_config.py at d98e8a6) */
      config(e, "model.moe_expert_rank_capacity_factor", "%g", p->moe_imbalance);
      config_flag(e, "model.use_transformer_engine_op_fuser", true);
    }
  }
  config_flag(e, "model.sequence_parallel", p->sp);
  /* the pipeline's split and schedule: an even split as the virtual stages a rank, any other (first and last
   * stages, an explicit list, layers that pp x vpp does not divide) as the layout, layer by layer */
  if (p->pp > 1) {
    int64_t n = p->pp * p->vpp, chunk[PX_MAX_CHUNK_LIST];
    bool even = true;
    if (n <= PX_MAX_CHUNK_LIST && !px_parallel_chunk_layers(p, m->layers, chunk, NULL))
      for (int64_t i = 1; i < n; i++) even = even && chunk[i] == chunk[0];
    if (!even) {
      char lay[PX_MAX_CHUNK_LIST * 2 + 65536];
      layout(chunk, n, p->mtp_layers, lay, sizeof lay);
      config(e, "model.pipeline_model_parallel_layout", "\"%s\"", lay); /* | */
    } else if (p->schedule == PX_SCHED_INTERLEAVED) {
      both(e, "num_virtual_stages_per_pipeline_rank", "model.virtual_pipeline_model_parallel_size", "%lld",
           (long long)p->vpp);
    }
    if (p->schedule == PX_SCHED_INTERLEAVED && px_parallel_mb_group(p) > 0)
      both(e, "microbatch_group_size_per_virtual_pipeline_stage", "model.microbatch_group_size_per_vp_stage", "%lld",
           (long long)px_parallel_mb_group(p));
  }
  /* the batch */
  config(e, "train.micro_batch_size", "%lld", (long long)p->mbs);
  config(e, "train.global_batch_size", "%lld", (long long)p->gbs);
  config(e, "dataset.seq_length", "%lld", (long long)p->seq);
  /* data parallelism: DDP, the distributed optimizer (ZeRO-1) or Megatron-FSDP (ZeRO-2/3) */
  config_flag(e, "ddp.use_distributed_optimizer", p->zero >= 1);
  if (p->zero >= 2) {
    config_flag(e, "ddp.use_megatron_fsdp", true);
    key(e, "dist.use_megatron_fsdp", "true");
    config(e, "ddp.data_parallel_sharding_strategy", "%s",
         p->zero == 3 ? "optim_grads_params" : "optim_grads");
    config(e, "checkpoint.ckpt_format", "fsdp_dtensor");
  }
  if (px_parallel_hybrid(p))
    config(e, "ddp.num_distributed_optimizer_instances", "%lld",
         (long long)(px_parallel_weight_dp(p) / p->shard_group));
  if (p->zero < 2) both(e, "ddp_bucket_size", "ddp.bucket_size", "%llu", (unsigned long long)bucket_elems(p));
  config_flag(e, "ddp.overlap_grad_reduce", (p->overlap & PX_OVERLAP_DP) != 0);
  /* Megatron-LM overlaps the parameter gather only with the gradient reduction (the check refuses the rest) */
  if (p->zero >= 1)
    flag(e, "overlap_param_gather", "ddp.overlap_param_gather",
         (p->overlap & (PX_OVERLAP_ZERO | PX_OVERLAP_DP)) == (PX_OVERLAP_ZERO | PX_OVERLAP_DP));
  if (p->tp > 1) config_flag(e, "comm_overlap.tp_comm_overlap", (p->overlap & PX_OVERLAP_TP) != 0);
  if (p->ep > 1) { /* Megatron-Core's field, set by Megatron-Bridge's CommOverlapConfig */
    flag(e, "model.overlap_moe_expert_parallel_comm", "comm_overlap.overlap_moe_expert_parallel_comm",
         (p->overlap & PX_OVERLAP_EP) != 0);
  }
  if (p->pp > 1 && !(p->overlap & PX_OVERLAP_PP)) arg(e, "no_overlap_p2p_communication", NULL);
  if (p->pp > 1) key(e, "comm_overlap.overlap_p2p_comm", "%s", p->overlap & PX_OVERLAP_PP ? "true" : "false");
  /* recomputation */
  if (p->recompute == PX_RECOMPUTE_FULL) {
    config(e, "model.recompute_granularity", "full");
    /* Megatron-Core's method and count (block: the first N layers of each model chunk; uniform 1: every layer) */
    bool block = px_parallel_recompute_partial(p);
    config(e, "model.recompute_method", "%s", block ? "block" : "uniform");
    config(e, "model.recompute_num_layers", "%lld",
         block ? (long long)p->recompute_layers : 1LL);
  } else if (p->recompute == PX_RECOMPUTE_SELECTIVE) {
    config(e, "model.recompute_granularity", "selective");
    if (p->recompute_modules) { /* Megatron-Core's default, core_attn, where unset */
      char t[96];
      px_recompute_modules_str(p->recompute_modules, t, sizeof t);
      key(e, "model.recompute_modules", "[%s]", t);
      for (char *s = t; *s; s++) *s = *s == ',' ? ' ' : *s; /* nargs '+': one argument a module */
      arg(e, "model.recompute_modules", "%s", t);
    }
  }
  config(e, "model.attention_backend", "%s", p->attention == PX_ATTN_UNFUSED ? "unfused" : "flash");
  if (p->elementwise == PX_ELEMWISE_ROPE_UNFUSED) { /* Megatron-Core's unfused RoPE: apply_rope_fusion off */
    arg(e, "no_rope_fusion", NULL);
    key(e, "model.apply_rope_fusion", "false");
  }
  /* precision: 16-bit, fp8, and the gradient buffer */
  bool fp16 = p->precision == PX_PREC_FP16, bf16 = px_parallel_compute_dtype(p) == PX_DTYPE_BF16;
  if (nemo) {
    key(e, "mixed_precision", "%s", bridge_recipe(p).name);
  } else {
    if (bf16) arg(e, "bf16", NULL);
    if (fp16) arg(e, "fp16", NULL);
    if (p->precision == PX_PREC_FP8) {
      static const char *const recipe[PX_FP8_RECIPE_COUNT] = {"delayed", "tensorwise", "blockwise"};
      config(e, "model.fp8", "%s", p->fp8_recipe == PX_FP8_BLOCKWISE ? "e4m3" : "hybrid");
      config(e, "model.fp8_recipe", "%s", recipe[p->fp8_recipe]);
      if (p->fp8_recipe == PX_FP8_DELAYED) {
        arg(e, "fp8_amax_history_len", "%d", PX_FP8_AMAX_HISTORY);
        arg(e, "fp8_amax_compute_algo", "max");
      }
    }
    /* Transformer Engine's MXFP8BlockScaling (E4M3 gradients too) and NVFP4BlockScaling (megatron/core/fp8_utils.py,
     * fp4_utils.py at cd4afffa) */
    if (p->precision == PX_PREC_MXFP8) {
      config(e, "model.fp8", "e4m3");
      config(e, "model.fp8_recipe", "mxfp8");
    }
    if (p->precision == PX_PREC_NVFP4) {
      config(e, "model.fp4", "e2m1");
      config(e, "model.fp4_recipe", "nvfp4");
    }
    if (p->fp8_params > 0) { /* Transformer Engine's primary quantized weights, gathered as such (mxfp8's in bf16
                                through the gradient buffer: px_parallel_param_gather_bytes) */
      arg(e, p->precision == PX_PREC_NVFP4 ? "ddp.fp4_param_gather" : "ddp.fp8_param_gather", NULL);
      if (p->precision == PX_PREC_MXFP8) arg(e, "ddp.reuse_grad_buf_for_mxfp8_param_ag", NULL);
    }
  }
  if (p->bf16_layers_start > 0 || p->bf16_layers_end > 0) { /* TransformerConfig's fields, both counts (each
                                                               defaults to 1 there) */
    arg(e, "first_last_layers_bf16", NULL);
    key(e, "model.first_last_layers_bf16", "true");
    config(e, "model.num_layers_at_start_in_bf16", "%lld",
         (long long)p->bf16_layers_start);
    config(e, "model.num_layers_at_end_in_bf16", "%lld", (long long)p->bf16_layers_end);
  }
  if (p->offload_act_layers > 0) { /* ModelParallelConfig's cpu_offloading (activations by default) of the first N
                                      layers; Megatron-LM has no --cpu-offloading: a count above 0 sets it
                                      (megatron/training/arguments.py at d98e8a6) */
    key(e, "model.cpu_offloading", "true");
    config(e, "model.cpu_offloading_num_layers", "%lld", (long long)p->offload_act_layers);
  }
  if (p->fp8_params > 0) { /* Megatron-Bridge: the model's quantized weights and the DDP's gathers of them, as the
                              recipe sets them (the check refuses plans it does not) */
    bool fp4 = p->precision == PX_PREC_NVFP4;
    key(e, fp4 ? "model.fp4_param" : "model.fp8_param", "true");
    key(e, fp4 ? "ddp.fp4_param_gather" : "ddp.fp8_param_gather", "true");
    if (p->precision == PX_PREC_MXFP8) key(e, "ddp.reuse_grad_buf_for_mxfp8_param_ag", "true");
  }
  if (px_parallel_mixed(p)) {
    bool fp32_grads = p->main_grad == PX_MAIN_GRAD_FP32;
    if (bf16 && !fp32_grads) arg(e, "grad_reduce_in_bf16", NULL);
    if (fp16 && fp32_grads) arg(e, "accumulate_allreduce_grads_in_fp32", NULL);
    key(e, "ddp.grad_reduce_in_fp32", "%s", fp32_grads ? "true" : "false");
  }
  fputs(")\n", out);
  if (p->zero == 2 && px_parallel_weight_dp(p) > 1)
    fputs("# note: Megatron-FSDP groups gradients by module, not in buckets of the plan's size\n", out);
  if (p->moe_imbalance != 1.0 && p->cuda_graph != PX_GRAPH_FULL)
    fprintf(out, "# note: moe_imbalance %g is the simulator's assumption about the router, no setting\n", p->moe_imbalance);
  if (p->cuda_graph == PX_GRAPH_FULL && m->experts > 0)
    fprintf(out, "# note: HybridEP drops the tokens past an EP rank's budget, moe_imbalance %g times the mean: plan "
                 "with the router's busiest rank as moe_imbalance\n", p->moe_imbalance);
  model_notes(out, "# note: ", m, e->fw);
}

/* torchtitan's quantize converters skip each linear layer whose FQN contains one of filter_fqns
 * (torchtitan/components/quantization/utils.py at v0.2.2, module_filter_fn; they convert the whole model before
 * it is split or parallelized, its blocks "layers.N"): the output layer (the plan quantizes the transformer
 * layers' GEMMs only; float8's default skips nothing) and the layers kept in bf16. */
static void filter_fqns(FILE *out, const px_model *m, const px_parallel *p) {
  fputs("filter_fqns = [\"output\"", out);
  for (int64_t l = 0; l < m->layers; l++)
    if (px_parallel_layer_bf16(p, m->layers, l)) fprintf(out, ", \"layers.%lld.\"", (long long)l);
  fputs("]\n", out);
}

/* torchtitan: TOML. */
static void write_torchtitan(FILE *out, const px_model *m, const px_cluster *c, const px_parallel *p,
                             const char *launch) {
  fprintf(out, "# %s job config: %s on %lld x %s (%s): %lld ranks\n", fw_label[PX_FW_TORCHTITAN], m->name,
          (long long)c->gpus, c->gpu.name, c->name, (long long)(p->tp * p->pp * p->cp * p->dp));
  launch_comment(out, launch);
  fputs("# (torchtitan's main branch configures in Python; the same fields are its config dataclasses')\n\n", out);
  fprintf(out, "[model]\n# name and flavor: torchtitan's definition of %s\n", m->name);
  if (p->precision == PX_PREC_FP8) fputs("converters = [\"quantize.linear.float8\"]\n", out);
  if (p->precision == PX_PREC_MXFP8) fputs("converters = [\"quantize.linear.mx\"]\n", out);
  fputs("\n[training]\n", out);
  /* with PP the local batch is split into micro-batches; without, each micro-batch is a step of accumulation */
  fprintf(out, "local_batch_size = %lld\nglobal_batch_size = %lld\nseq_len = %lld\n",
          (long long)(p->pp > 1 ? p->gbs / p->dp : p->mbs), (long long)p->gbs, (long long)p->seq);
  fprintf(out, "mixed_precision_param = \"%s\"\n", px_parallel_compute_dtype(p) == PX_DTYPE_BF16 ? "bfloat16" : "float32");
  if (px_parallel_mixed(p)) fputs("mixed_precision_reduce = \"float32\"\n", out);
  if (p->zero == 3) fprintf(out, "enable_cpu_offload = %s\n", p->offload_opt == PX_OFFLOAD_CPU ? "true" : "false");
  fputs("\n[parallelism]\n", out);
  int64_t shard = p->zero == 3 ? (px_parallel_hybrid(p) ? p->shard_group / p->cp : p->dp) : 1;
  fprintf(out, "data_parallel_shard_degree = %lld\ndata_parallel_replicate_degree = %lld\n", (long long)shard,
          (long long)(p->dp / shard));
  if (p->zero == 3) fprintf(out, "fsdp_reshard_after_forward = \"%s\"\n", p->reshard ? "always" : "never");
  fprintf(out, "tensor_parallel_degree = %lld\n", (long long)p->tp);
  if (p->tp > 1 && (p->overlap & PX_OVERLAP_TP)) fputs("enable_async_tensor_parallel = true\n", out);
  fprintf(out, "context_parallel_degree = %lld\n", (long long)p->cp);
  if (p->cp > 1) fprintf(out, "context_parallel_rotate_method = \"%s\"\n", p->cp_algo == PX_CP_RING ? "alltoall" : "allgather");
  if (m->experts > 0)
    fprintf(out, "expert_parallel_degree = %lld\nexpert_tensor_parallel_degree = %lld\n", (long long)p->ep, (long long)p->etp);
  fprintf(out, "pipeline_parallel_degree = %lld\n", (long long)p->pp);
  if (p->pp > 1) {
    static const char *const sched[PX_SCHED_COUNT] = {"GPipe", "1F1B", "Interleaved1F1B", "", ""};
    fprintf(out, "pipeline_parallel_schedule = \"%s\"\npipeline_parallel_microbatch_size = %lld\n", sched[p->schedule],
            (long long)p->mbs);
    /* the split, chunk by chunk in virtual-stage order (chunk i on rank i mod pp) */
    int64_t n = p->pp * p->vpp, chunk[PX_MAX_CHUNK_LIST];
    if (n <= PX_MAX_CHUNK_LIST && !px_parallel_chunk_layers(p, m->layers, chunk, NULL)) {
      fputs("module_fqns_per_model_part = [\n", out);
      for (int64_t i = 0, l = 0; i < n; i++) {
        fputs("  [", out);
        int k = 0;
        if (i == 0) fprintf(out, "%s\"tok_embeddings\"", k++ ? ", " : "");
        for (int64_t j = 0; j < chunk[i]; j++, l++) fprintf(out, "%s\"layers.%lld\"", k++ ? ", " : "", (long long)l);
        if (i == n - 1) fprintf(out, "%s\"norm\", \"output\"", k++ ? ", " : "");
        fprintf(out, "]%s\n", i < n - 1 ? "," : "");
      }
      fputs("]\n", out);
    }
  }
  /* full of every N-th layer: torchtitan's layer-wise selective checkpointing (selective_ac_option N) */
  bool layer_sac = px_parallel_recompute_partial(p) && p->recompute_method == PX_RECOMPUTE_EVERY;
  fprintf(out, "\n[activation_checkpoint]\nmode = \"%s\"\n",
          p->recompute == PX_RECOMPUTE_OP || layer_sac ? "selective"
          : p->recompute == PX_RECOMPUTE_FULL          ? "full"
                                                       : "none");
  if (p->recompute == PX_RECOMPUTE_OP) fputs("selective_ac_option = \"op\"\n", out);
  if (layer_sac) fprintf(out, "selective_ac_option = \"%lld\"\n", (long long)p->recompute_layers);
  if (torchtitan_compiles(p)) fputs("\n[compile]\nenable = true\n", out);
  /* float8 tensorwise; torchao's MXFP8 through cuBLAS, its block scales the OCP spec's floor (mxfp8_cublas_rceil
   * rounds them up; docs/mxfp8.md at v0.2.2) */
  if (p->precision == PX_PREC_FP8) fputs("\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n", out);
  if (p->precision == PX_PREC_MXFP8) fputs("\n[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\n", out);
  if (px_precision_quantized(p->precision)) filter_fqns(out, m, p);
  fputs("\n", out);
  if (p->zero == 3 && px_parallel_weight_dp(p) > 1)
    fputs("# note: FSDP2 reduces each transformer block's gradients at once, not in buckets of the plan's size\n", out);
  if (p->zero == 0 && px_parallel_weight_dp(p) > 1)
    fputs("# note: torchtitan's DDP sets its own gradient bucket size, not the plan's\n", out);
  if (layer_sac && p->vpp > 1)
    fprintf(out, "# note: torchtitan counts a rank's layers across its stages for selective_ac_option %lld, the plan "
                 "each model chunk's from its first: the same layers where every chunk holds a multiple of %lld\n",
            (long long)p->recompute_layers, (long long)p->recompute_layers);
  if (p->moe_imbalance != 1.0)
    fprintf(out, "# note: moe_imbalance %g is the simulator's assumption about the router, no setting\n", p->moe_imbalance);
  model_notes(out, "# note: ", m, PX_FW_TORCHTITAN);
}

/* DeepSpeed: JSON. */
static px_status write_deepspeed(FILE *out, FILE *notes, const px_model *m, const px_parallel *p, px_err *err) {
  cJSON *root = cJSON_CreateObject(), *z = cJSON_AddObjectToObject(root, "zero_optimization");
  if (!root || !z) {
    cJSON_Delete(root);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  px_json_add_num(root, "train_batch_size", (double)p->gbs);
  px_json_add_num(root, "train_micro_batch_size_per_gpu", (double)p->mbs);
  px_json_add_num(root, "gradient_accumulation_steps", (double)px_parallel_microbatches(p));
  if (p->precision == PX_PREC_BF16) cJSON_AddBoolToObject(cJSON_AddObjectToObject(root, "bf16"), "enabled", true);
  if (p->precision == PX_PREC_FP16) cJSON_AddBoolToObject(cJSON_AddObjectToObject(root, "fp16"), "enabled", true);
  if (px_parallel_mixed(p) && p->main_grad == PX_MAIN_GRAD_FP32)
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "data_types"), "grad_accum_dtype", "fp32");
  px_json_add_num(z, "stage", p->zero);
  /* ZeRO-3 reduces and gathers a layer at a time (the plan's unit), the others in the plan's buckets */
  px_model_params mp;
  px_model_count_params(m, &mp);
  uint64_t layer = mp.moe_layers > 0 && mp.moe_layer > mp.per_layer ? mp.moe_layer : mp.per_layer;
  if (p->zero >= 1) {
    cJSON_AddBoolToObject(z, "overlap_comm", (p->overlap & PX_OVERLAP_DP) != 0);
    px_json_add_num(z, "reduce_bucket_size", (double)(p->zero == 3 ? layer : bucket_elems(p)));
    px_json_add_num(z, "allgather_bucket_size", (double)(p->zero == 3 ? layer : bucket_elems(p)));
  }
  if (p->zero == 3) {
    /* the prefetch in parameters: `prefetch` of the largest layers (0: none, or the gathers not overlapped) */
    uint64_t ahead = (p->overlap & PX_OVERLAP_ZERO) ? (uint64_t)p->prefetch * layer : 0;
    px_json_add_num(z, "stage3_prefetch_bucket_size", (double)ahead);
    if (px_parallel_hybrid(p)) px_json_add_num(z, "mics_shard_size", (double)p->shard_group);
  }
  static const char *const dev[PX_OFFLOAD_COUNT] = {"none", "cpu", "nvme"};
  const struct {
    const char *key;
    int where;
  } off[] = {{"offload_optimizer", p->offload_opt}, {"offload_param", p->offload_params}};
  for (int i = 0; i < 2; i++) {
    if (off[i].where == PX_OFFLOAD_NONE) continue;
    cJSON *o = cJSON_AddObjectToObject(z, off[i].key);
    cJSON_AddStringToObject(o, "device", dev[off[i].where]);
    if (off[i].where == PX_OFFLOAD_NVME) {
      cJSON_AddStringToObject(o, "nvme_path", "/local_nvme");
      fprintf(notes, "note: zero_optimization.%s.nvme_path: set your NVMe mount (written as /local_nvme)\n", off[i].key);
    }
  }
  px_status st = px_json_print_free(root, err);
  if (st) return st;
  char rc[96];
  fprintf(notes, "note: %s: the model code's (DeepSpeed's JSON has none): the attention kernel (%s), the MLP, "
                 "the sequence length (%lld), activation recomputation (%s: %s in the model), "
                 "the norms', RoPE's and SwiGLU's kernels (elementwise %s: %s)\n",
          m->name, px_attention_names[p->attention], (long long)p->seq, px_report_recompute_text(p, rc, sizeof rc),
          p->recompute == PX_RECOMPUTE_OP ? "PyTorch's selective checkpoint policy, torchtitan's per-op one,"
                                          : "deepspeed.checkpointing",
          px_elementwise_names[p->elementwise],
          p->elementwise == PX_ELEMWISE_EAGER          ? "PyTorch eager's composite ops"
          : p->elementwise == PX_ELEMWISE_ROPE_UNFUSED ? "fused but RoPE, as Megatron-Core's unfused PyTorch ops"
                                                       : "fused, e.g. under torch.compile");
  if (p->zero == 0 && px_parallel_weight_dp(p) > 1)
    fprintf(notes, "note: ZeRO-0: DeepSpeed's engine reduces gradients in its own buckets (not the plan's %g MiB)\n",
            (double)p->bucket_bytes / (1 << 20));
  return PX_OK;
}

const char *px_export_array(px_framework fw) {
  return fw == PX_FW_MEGATRON ? "MEGATRON_ARGS" : fw == PX_FW_NEMO ? "OVERRIDES" : NULL;
}

px_status px_export_write(px_framework fw, const px_model *m, const px_cluster *c, const px_parallel *p,
                          const char *launch, FILE *out, FILE *notes, px_err *err) {
  px_status st = px_export_check(fw, p, m, err);
  if (st) return st;
  if (fw == PX_FW_DEEPSPEED) return write_deepspeed(out, notes, m, p, err);
  if (fw == PX_FW_TORCHTITAN) {
    write_torchtitan(out, m, c, p, launch);
  } else {
    emit e = {out, fw};
    write_megatron(&e, m, c, p, launch);
  }
  return PX_OK;
}
