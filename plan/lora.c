/* Fine-tuning with low-rank adapters: targets, PEFT's adapter config, frozen bytes. */
#include "plan/lora.h"

#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "core/fmt.h"
#include "core/json.h"

bool px_lora_quantized(const char *slot_name) {
  for (int i = 0; i < PX_LORA_LINEARS; i++)
    if (!strcmp(slot_name, px_lora_linears[i].weight)) return true;
  return false;
}

uint64_t px_lora_frozen_bytes(const px_parallel *par, uint64_t elems, bool quantized) {
  switch (quantized ? par->base_precision : PX_BASE_BF16) {
    case PX_BASE_FP8: return elems + 4;
    case PX_BASE_NF4: {
      uint64_t blocks = (elems + 63) / 64; /* 8-bit absmax each */
      return (elems + 1) / 2 + blocks + 4 * ((blocks + 255) / 256) + 4; /* and the absmaxes' fp32 mean */
    }
    default: return elems * px_dtype_bytes(px_parallel_compute_dtype(par));
  }
}

const char *px_lora_base_name(const px_parallel *p) {
  return p->base_precision == PX_BASE_BF16 ? px_dtype_names[px_parallel_compute_dtype(p)]
                                           : px_base_precision_names[p->base_precision];
}

char *px_lora_describe(const px_parallel *p, char *buf, size_t cap) {
  char t[96];
  buf[0] = '\0';
  if (p->finetune == PX_FT_FULL) snprintf(buf, cap, ", full fine-tuning");
  if (px_parallel_lora(p))
    snprintf(buf, cap, ", %s rank %lld on %s (%s base)", px_finetune_names[p->finetune], (long long)p->lora_rank,
             px_lora_targets_str(p->lora_targets, t, sizeof t), px_lora_base_name(p));
  return buf;
}

/* PEFT module names (HF Llama, Mistral, Qwen; Megatron-Core; GPT-2, Falcon, GPT-NeoX) and the target each is. */
static const struct {
  const char *name;
  int bits;      /* with a SwiGLU MLP */
  int gelu_bits; /* without */
} modules[] = {
    {"q_proj", PX_LORA_Q, PX_LORA_Q},
    {"k_proj", PX_LORA_K, PX_LORA_K},
    {"v_proj", PX_LORA_V, PX_LORA_V},
    {"o_proj", PX_LORA_O, PX_LORA_O},
    {"gate_proj", PX_LORA_GATE, 0},
    {"up_proj", PX_LORA_UP, PX_LORA_FC1},
    {"down_proj", PX_LORA_FC2, PX_LORA_FC2},
    {"linear_qkv", PX_LORA_QKV, PX_LORA_QKV},
    {"linear_proj", PX_LORA_O, PX_LORA_O},
    {"linear_fc1", PX_LORA_FC1, PX_LORA_FC1},
    {"linear_fc2", PX_LORA_FC2, PX_LORA_FC2},
    {"c_attn", PX_LORA_QKV, PX_LORA_QKV},
    {"c_fc", PX_LORA_FC1, PX_LORA_FC1},
    {"query_key_value", PX_LORA_QKV, PX_LORA_QKV},
    {"dense_h_to_4h", PX_LORA_FC1, PX_LORA_FC1},
    {"dense_4h_to_h", PX_LORA_FC2, PX_LORA_FC2},
};

/* A key that must be absent, null, false, empty or equal to `none` (a string) for the planner to express it. */
static bool key_unset(const cJSON *v, const char *none) {
  if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return true;
  if (cJSON_IsString(v)) return none && !strcmp(v->valuestring, none);
  if (cJSON_IsArray(v) || cJSON_IsObject(v)) return cJSON_GetArraySize(v) == 0;
  if (cJSON_IsNumber(v)) return v->valuedouble == 0;
  return false;
}

static int module_bits(const char *name, bool swiglu) {
  for (size_t i = 0; i < sizeof modules / sizeof *modules; i++)
    if (!strcmp(name, modules[i].name)) return swiglu ? modules[i].bits : modules[i].gelu_bits;
  return -1;
}

static px_status read_targets(const char *file, const cJSON *t, bool swiglu, int *bits, px_err *err) {
  if (cJSON_IsString(t) && !strcmp(t->valuestring, "all-linear")) { /* PEFT: every linear but the output layer */
    *bits = swiglu ? PX_LORA_Q | PX_LORA_K | PX_LORA_V | PX_LORA_O | PX_LORA_GATE | PX_LORA_UP | PX_LORA_FC2
                   : PX_LORA_DEFAULT_TARGETS;
    return PX_OK;
  }
  if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) < 1)
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: key 'target_modules': expected a list of module names or \"all-linear\" (a regular "
                      "expression is not read)",
                      file);
  int out = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, t) {
    int b = cJSON_IsString(x) ? module_bits(x->valuestring, swiglu) : -1;
    if (b < 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "%s: key 'target_modules': '%.48s' is not a module the planner knows (q_proj, k_proj, "
                        "v_proj, o_proj, gate_proj, up_proj, down_proj; linear_qkv, linear_proj, linear_fc1, "
                        "linear_fc2; c_attn, c_fc; query_key_value, dense_h_to_4h, dense_4h_to_h)",
                        file, cJSON_IsString(x) ? x->valuestring : "(not a string)");
    if (!b)
      return px_err_set(err, PX_ERR_INPUT, "%s: key 'target_modules': '%s' needs a SwiGLU MLP, which the model has not",
                        file, x->valuestring);
    out |= b;
  }
  *bits = out;
  return PX_OK;
}

px_status px_lora_adapter_read(const char *file, bool swiglu, px_parallel *p, px_err *err) {
  if (p->finetune == PX_FT_NONE || p->finetune == PX_FT_FULL)
    return px_err_set(err, PX_ERR_INPUT, "%s: LoRA adapters, but `finetune` is %s (hint: `finetune` lora or qlora)",
                      file, px_finetune_names[p->finetune]);
  cJSON *root = NULL;
  px_status st = px_json_load_max(file, 1 << 20, "an adapter config", &root, err);
  if (st) return st;
  const cJSON *v;
  if (!cJSON_IsObject(root)) {
    st = px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object (PEFT's adapter_config.json)", file);
    goto done;
  }
  v = cJSON_GetObjectItemCaseSensitive(root, "peft_type");
  if (v && !(cJSON_IsString(v) && !strcmp(v->valuestring, "LORA"))) {
    st = px_err_set(err, PX_ERR_INPUT, "%s: key 'peft_type': only LORA adapters are planned", file);
    goto done;
  }
  /* what would change the adapters' shapes, count or saved tensors, and is not planned */
  static const struct {
    const char *key, *none, *why;
  } refused[] = {
      {"lora_dropout", NULL, "adapter dropout keeps a dropped copy of each targeted input; plan with 0"},
      {"use_dora", NULL, "DoRA's magnitude vectors and weight norms are not planned"},
      {"bias", "none", "trained biases are not planned (\"none\")"},
      {"modules_to_save", NULL, "whole modules trained beside the adapters are not planned"},
      {"layers_to_transform", NULL, "adapters on some layers only are not planned"},
      {"rank_pattern", NULL, "per-module ranks are not planned"},
      {"alpha_pattern", NULL, "per-module alphas are not planned"},
      {"target_parameters", NULL, "adapters on parameters (not modules) are not planned"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    if (!key_unset(cJSON_GetObjectItemCaseSensitive(root, refused[i].key), refused[i].none)) {
      st = px_err_set(err, PX_ERR_INPUT, "%s: key '%s': %s", file, refused[i].key, refused[i].why);
      goto done;
    }
  px_json_ctx c = {file, "", NULL}; /* PEFT writes many keys the plan has no use for: not refused */
  int64_t r = 0;
  double alpha = 0;
  if ((st = px_json_int(&c, root, "r", true, 1, PX_LORA_RANK_MAX, &r, err))) goto done;
  if ((st = px_json_num(&c, root, "lora_alpha", false, 1e-6, 1e9, &alpha, err))) goto done;
  int bits = 0;
  v = cJSON_GetObjectItemCaseSensitive(root, "target_modules");
  if (!v) {
    st = px_err_set(err, PX_ERR_INPUT, "%s: key 'target_modules' is missing", file);
    goto done;
  }
  if ((st = read_targets(file, v, swiglu, &bits, err))) goto done;
  if (p->finetune != PX_FT_QLORA) p->finetune = PX_FT_LORA;
  if (!p->lora_rank) p->lora_rank = r; /* flags over the file */
  if (p->lora_alpha <= 0 && alpha > 0) p->lora_alpha = alpha;
  if (!p->lora_targets) p->lora_targets = bits;
done:
  cJSON_Delete(root);
  return st;
}
