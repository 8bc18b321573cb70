/* Fine-tuning with low-rank adapters (plan/lora.c): the linear layers an
 * adapter targets, HF PEFT's adapter_config.json, and the bytes of a frozen
 * base weight in its storage precision. The adapters' GEMMs are built
 * beside their linear layers (plan/linear.c), their slots with the layer's
 * (plan/layer.c). */
#ifndef PX_PLAN_LORA_H
#define PX_PLAN_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/lora_targets.h"
#include "plan/parallel.h"

/* The frozen base's storage as a name: base_precision bf16 is the compute dtype's (bf16, fp16; fp32 on a CPU
 * cluster), fp8 and nf4 their own. */
const char *px_lora_base_name(const px_parallel *p);
/* ", lora rank 16 on qkv,o,fc1,fc2 (bf16 base)", ", full fine-tuning", or "" (none): a resolved plan's. */
char *px_lora_describe(const px_parallel *p, char *buf, size_t cap);

/* Reads an HF PEFT adapter_config.json into p's lora fields: finetune lora,
 * lora_rank (r), lora_alpha, lora_targets (target_modules: Llama's q_proj
 * ... down_proj, Megatron's linear_qkv ... linear_fc2, GPT-2's c_attn and
 * c_fc, "all-linear"). Refuses, naming the file and key, what the planner
 * cannot express (and with `finetune` none or full, adapters at all):
 * another peft_type, adapter dropout, DoRA, trained biases
 * or whole modules, per-layer ranks or layers, a regular expression. A
 * SwiGLU model's gate_proj and up_proj map to gate and up, its fused fc1
 * otherwise (swiglu). */
px_status px_lora_adapter_read(const char *file, bool swiglu, px_parallel *p, px_err *err);

/* Whether a frozen base tensor is held in base_precision: the transformer
 * layers' linear weights (px_lora_linears), which bitsandbytes'
 * Linear4bit replaces; the embedding, the output layer, norms and biases
 * stay in the compute dtype, as QLoRA keeps them. */
bool px_lora_quantized(const char *slot_name);
/* Bytes of one frozen base tensor of `elems` elements (one rank's shard):
 * the compute dtype's unless quantized, then by par's base_precision: bf16 2
 * a weight; fp8 1 a weight and a 4-byte fp32 scale; nf4 (Dettmers et al.
 * 2023, section 3) 4-bit codes, one 8-bit absmax a block of 64 weights, one
 * fp32 constant a block of 256 absmaxes (double quantisation): 4 + 8/64 +
 * 32/(64 x 256) = 4.127 bits a weight, and the absmaxes' mean, subtracted
 * before their quantisation, one fp32 a tensor (bitsandbytes' `offset`). */
uint64_t px_lora_frozen_bytes(const px_parallel *par, uint64_t elems, bool quantized);

#endif
