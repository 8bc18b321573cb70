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
#include "plan/parallel.h"

/* The linear layers an adapter may sit beside: the fused q/k/v projection
 * (qkv: one adapter over the fused output, as NeMo's linear_qkv; q, k, v:
 * one each, as HF PEFT's q_proj, k_proj, v_proj), the attention's output
 * (o), the MLP's first linear (fc1: one over the fused gate and up of a
 * SwiGLU MLP; gate, up: one each) and its second (fc2). */
enum {
  PX_LORA_Q = 1 << 0,
  PX_LORA_K = 1 << 1,
  PX_LORA_V = 1 << 2,
  PX_LORA_QKV = 1 << 3,
  PX_LORA_O = 1 << 4,
  PX_LORA_FC1 = 1 << 5,
  PX_LORA_GATE = 1 << 6,
  PX_LORA_UP = 1 << 7,
  PX_LORA_FC2 = 1 << 8,
  PX_LORA_TARGET_BITS = 9,
  PX_LORA_DEFAULT_TARGETS = PX_LORA_QKV | PX_LORA_O | PX_LORA_FC1 | PX_LORA_FC2,
};
extern const char *const px_lora_target_names[PX_LORA_TARGET_BITS];

/* The blocks' linear layers adapters may sit beside, by their weight's slot
 * name, and the target bits of each adapter on one: targets[j] for one on
 * output j alone (j < 3: q, k, v; gate, up), targets[3] for one over all
 * its outputs. */
#define PX_LORA_LINEARS 4
typedef struct {
  const char *weight;
  int targets[4];
} px_lora_linear;
extern const px_lora_linear px_lora_linears[PX_LORA_LINEARS];
#define PX_LORA_DEFAULT_RANK 16
#define PX_LORA_RANK_MAX 65536

/* Parses "qkv,o,fc1,fc2" (or "all") into PX_LORA_* bits; the message says
 * what is wrong with the list, the caller names the field or flag. */
px_status px_lora_targets_parse(const char *s, int *bits, px_err *err);
/* "qkv,o,fc1,fc2": the names of bits, comma-separated. */
char *px_lora_targets_str(int bits, char *buf, size_t cap);

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
 * 32/(64 x 256) = 4.127 bits a weight. */
uint64_t px_lora_frozen_bytes(const px_parallel *par, uint64_t elems, bool quantized);

#endif
