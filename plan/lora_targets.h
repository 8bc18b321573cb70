/* The linear layers a low-rank adapter may target (plan/lora_targets.c):
 * their bits, names and lists, below plan/parallel.h, which holds them as a
 * plan's field; plan/lora.h has the rest of fine-tuning. */
#ifndef PX_PLAN_LORA_TARGETS_H
#define PX_PLAN_LORA_TARGETS_H

#include <stddef.h>

#include "core/status.h"

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

#endif
