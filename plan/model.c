/* Model specification: JSON and Hugging Face loading, parameter and FLOP counts. */
#include "plan/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/paths.h"

PX_NAME_TABLE(px_norm_names, PX_NORM_COUNT, "layernorm", "rmsnorm");
PX_NAME_TABLE(px_mlp_names, PX_MLP_COUNT, "gelu", "swiglu");
PX_NAME_TABLE(px_pos_names, PX_POS_COUNT, "learned", "rope");
/* the values of DeepSeek's scoring_func, read as they are */
PX_NAME_TABLE(px_router_names, PX_ROUTER_COUNT, "softmax", "sigmoid");
PX_NAME_TABLE(px_drop_policy_names, PX_DROP_COUNT, "probs", "position");

#define MAX_DIM ((int64_t)1 << 22)

void px_model_init(px_model *m) {
  memset(m, 0, sizeof *m);
  m->norm = PX_NORM_LAYERNORM;
  m->mlp = PX_MLP_GELU;
  m->position = PX_POS_LEARNED;
  m->norm_eps = 1e-5;
  m->rope_theta = 10000.0;
  m->rope_concentration = 1.0;
  m->rope_fraction = 1.0;
  m->rope_yarn.beta_fast = 32.0, m->rope_yarn.beta_slow = 1.0, m->rope_yarn.truncate = true;
  m->rope_llama3.low_freq_factor = 1.0, m->rope_llama3.high_freq_factor = 4.0;
}

/* Fills fields that default from others (kv_heads, head_dim, max_positions, moe_layer_freq). */
static void model_fill_defaults(px_model *m) {
  if (m->kv_heads == 0) m->kv_heads = m->heads;
  if (m->head_dim == 0 && m->kv_lora_rank > 0) m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
  if (m->head_dim == 0 && m->heads > 0 && m->hidden % m->heads == 0) m->head_dim = m->hidden / m->heads;
  if (m->max_positions == 0) m->max_positions = m->seq_len;
  if (m->experts > 0 && m->moe_layer_freq == 0) m->moe_layer_freq = 1;
}

#define BAD(...) px_err_set(err, PX_ERR_INPUT, __VA_ARGS__)

/* The mixture-of-experts fields; file names the source. */
static px_status model_validate_moe(const px_model *m, const char *file, px_err *err) {
  if (m->experts == 0) {
    const char *set = m->experts_per_token ? "experts_per_token" : m->moe_ffn_hidden ? "moe_ffn_hidden"
                      : m->shared_experts ? "shared_experts" : m->first_dense_layers ? "first_dense_layers" : NULL;
    return set ? BAD("%s: field '%s' needs 'experts' (a mixture of experts)", file, set) : PX_OK;
  }
  if (m->experts_per_token < 1 || m->experts_per_token > m->experts)
    return BAD("%s: field 'experts_per_token': %lld is not in [1, experts %lld]", file,
               (long long)m->experts_per_token, (long long)m->experts);
  if (m->moe_ffn_hidden < 1) return BAD("%s: field 'moe_ffn_hidden' must be positive with experts", file);
  if (m->shared_ffn_hidden > 0 && m->shared_experts != 1)
    return BAD("%s: field 'shared_ffn_hidden': a gated shared expert of its own width needs shared_experts 1, got %lld",
               file, (long long)m->shared_experts);
  if (m->first_dense_layers >= m->layers)
    return BAD("%s: field 'first_dense_layers': %lld leaves none of the %lld layers to the experts", file,
               (long long)m->first_dense_layers, (long long)m->layers);
  if (m->moe_layer_freq > m->layers - m->first_dense_layers)
    return BAD("%s: field 'moe_layer_freq': %lld leaves no MoE layer after the %lld dense ones", file,
               (long long)m->moe_layer_freq, (long long)m->first_dense_layers);
  if (!(m->capacity_factor >= 0.0)) return BAD("%s: field 'capacity_factor': %g is negative", file, m->capacity_factor);
  if (!(m->aux_loss_coef >= 0.0)) return BAD("%s: field 'aux_loss_coef': %g is negative", file, m->aux_loss_coef);
  if (m->expert_groups > 0 && (m->experts % m->expert_groups || m->groups_per_token < 1 ||
                               m->groups_per_token > m->expert_groups))
    return BAD("%s: fields 'expert_groups' %lld and 'groups_per_token' %lld: the groups must divide the %lld experts "
               "and a token take 1 to expert_groups of them",
               file, (long long)m->expert_groups, (long long)m->groups_per_token, (long long)m->experts);
  if (m->expert_groups > 0 && m->groups_per_token * (m->experts / m->expert_groups) < m->experts_per_token)
    return BAD("%s: field 'groups_per_token': %lld groups of %lld experts hold fewer than a token's %lld "
               "(experts_per_token)",
               file, (long long)m->groups_per_token, (long long)(m->experts / m->expert_groups),
               (long long)m->experts_per_token);
  return PX_OK;
}

/* Multi-head latent attention's fields. */
static px_status model_validate_mla(const px_model *m, const char *file, px_err *err) {
  if (m->kv_lora_rank == 0) {
    const char *set = m->q_lora_rank ? "q_lora_rank" : m->qk_rope_head_dim ? "qk_rope_head_dim"
                      : m->qk_nope_head_dim ? "qk_nope_head_dim" : m->v_head_dim ? "v_head_dim" : NULL;
    return set ? BAD("%s: field '%s' needs 'kv_lora_rank' (multi-head latent attention)", file, set) : PX_OK;
  }
  if (m->qk_rope_head_dim < 2 || m->qk_rope_head_dim % 2 != 0)
    return BAD("%s: field 'qk_rope_head_dim': latent attention needs an even, positive RoPE part, got %lld", file,
               (long long)m->qk_rope_head_dim);
  if (m->v_head_dim < 1) return BAD("%s: field 'v_head_dim' must be positive with kv_lora_rank", file);
  if (m->head_dim != m->qk_nope_head_dim + m->qk_rope_head_dim)
    return BAD("%s: field 'head_dim': %lld is not qk_nope_head_dim + qk_rope_head_dim = %lld", file,
               (long long)m->head_dim, (long long)(m->qk_nope_head_dim + m->qk_rope_head_dim));
  if (m->kv_heads != m->heads)
    return BAD("%s: field 'kv_heads': latent attention expands keys and values to every head (%lld), got %lld", file,
               (long long)m->heads, (long long)m->kv_heads);
  if (m->qkv_bias || m->bias) return BAD("%s: field 'qkv_bias': biases with kv_lora_rank are not supported", file);
  if (m->qk_norm) return BAD("%s: field 'qk_norm': latent attention normalises its latents, not q and k", file);
  return PX_OK;
}

/* Sliding-window attention's fields. */
static px_status model_validate_window(const px_model *m, const char *file, px_err *err) {
  if (m->sliding_window == 0) {
    const char *set = m->window_layer_freq ? "window_layer_freq" : m->first_full_layers ? "first_full_layers" : NULL;
    return set ? BAD("%s: field '%s' needs 'sliding_window' (sliding-window attention)", file, set) : PX_OK;
  }
  if (m->window_layer_freq < 1)
    return BAD("%s: field 'window_layer_freq' is required with sliding_window: which layers have the window, every "
               "n-th from the first (1: every layer, as Mistral; 2: layers 0, 2, 4, ..., as gpt-oss)", file);
  if (m->first_full_layers >= m->layers)
    return BAD("%s: field 'first_full_layers': %lld leaves none of the %lld layers to the sliding window", file,
               (long long)m->first_full_layers, (long long)m->layers);
  return PX_OK;
}

px_status px_model_validate(const px_model *m, const char *file, px_err *err) {
  if (m->layers < 1) return px_err_set(err, PX_ERR_INPUT, "%s: field 'layers' must be at least 1", file);
  if (m->hidden < 1 || m->heads < 1 || m->vocab < 1 || m->seq_len < 1 || m->ffn_hidden < 1)
    return px_err_set(err, PX_ERR_INPUT, "%s: hidden, heads, ffn_hidden, vocab and seq_len must be positive", file);
  if (m->head_dim < 1)
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: field 'heads': %lld heads do not divide hidden %lld (give head_dim to override)", file,
                      (long long)m->heads, (long long)m->hidden);
  if (m->kv_heads < 1 || m->kv_heads > m->heads || m->heads % m->kv_heads != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'kv_heads': %lld does not divide heads %lld", file,
                      (long long)m->kv_heads, (long long)m->heads);
  if (m->position == PX_POS_LEARNED && m->max_positions < m->seq_len)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'seq_len': %lld exceeds the %lld learned positions", file,
                      (long long)m->seq_len, (long long)m->max_positions);
  if (m->position == PX_POS_ROPE && m->head_dim % 2 != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'head_dim': RoPE needs an even head_dim, got %lld", file,
                      (long long)m->head_dim);
  if (!(m->dropout >= 0.0 && m->dropout < 1.0))
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'dropout': %g is not in [0, 1)", file, m->dropout);
  if (m->rope_yarn.factor > 0 && m->position != PX_POS_ROPE)
    return BAD("%s: field 'rope_yarn': YaRN scales RoPE's frequencies, and the model's position is %s", file,
               px_pos_names[m->position]);
  if (m->rope_llama3.factor > 0 && m->position != PX_POS_ROPE)
    return BAD("%s: field 'rope_llama3': it scales RoPE's frequencies, and the model's position is %s", file,
               px_pos_names[m->position]);
  if (m->position == PX_POS_ROPE && m->rope_fraction < 1.0) {
    int64_t rot = px_model_rope_dims(m);
    if (rot < 2 || rot % 2 != 0)
      return BAD("%s: field 'rope_fraction': %g of head_dim %lld rotates %lld dims, not an even count", file,
                 m->rope_fraction, (long long)m->head_dim, (long long)rot);
    if (m->kv_lora_rank > 0)
      return BAD("%s: field 'rope_fraction': latent attention rotates its own qk_rope_head_dim dims", file);
  }
  if (m->rope_linear_factor > 0 && m->position != PX_POS_ROPE)
    return BAD("%s: field 'rope_linear_factor': it scales RoPE's frequencies, and the model's position is %s", file,
               px_pos_names[m->position]);
  if ((m->rope_llama3.factor > 0) + (m->rope_yarn.factor > 0) + (m->rope_linear_factor > 0) > 1)
    return BAD("%s: fields 'rope_yarn', 'rope_llama3', 'rope_linear_factor': the frequencies are scaled one way, and "
               "the model has more than one", file);
  if (m->rope_llama3.factor > 0 && !(m->rope_llama3.high_freq_factor > m->rope_llama3.low_freq_factor))
    return BAD("%s: field 'rope_llama3.high_freq_factor': %g is not above low_freq_factor %g", file,
               m->rope_llama3.high_freq_factor, m->rope_llama3.low_freq_factor);
  px_status st = model_validate_moe(m, file, err);
  if (!st) st = model_validate_window(m, file, err);
  return st ? st : model_validate_mla(m, file, err);
}

#define TRY(x) \
  if ((st = (x))) return st

/* Our schema. */
/* What every RoPE scaling object requires: its factor and the context length the model was trained at. */
static px_status rope_scaling_from_json(const px_json_ctx *c, const cJSON *obj, double *factor, int64_t *positions,
                                        px_err *err) {
  px_status st;
  TRY(px_json_num(c, obj, "factor", true, 1.0, 1e6, factor, err));
  return px_json_int(c, obj, "original_positions", true, 1, (int64_t)1 << 24, positions, err);
}

/* The rope_yarn object (px_model.rope_yarn): factor and original_positions required, the betas and truncate
 * defaulting as Hugging Face's. */
static px_status yarn_from_json(const px_json_ctx *cp, const cJSON *obj, px_model *m, px_err *err) {
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {cp->file, "rope_yarn.", &keys};
  px_status st;
  TRY(rope_scaling_from_json(&c, obj, &m->rope_yarn.factor, &m->rope_yarn.original_positions, err));
  TRY(px_json_num(&c, obj, "beta_fast", false, 1e-3, 1e6, &m->rope_yarn.beta_fast, err));
  TRY(px_json_num(&c, obj, "beta_slow", false, 1e-3, 1e6, &m->rope_yarn.beta_slow, err));
  TRY(px_json_bool(&c, obj, "truncate", false, &m->rope_yarn.truncate, err));
  TRY(px_json_num(&c, obj, "mscale_all_dim", false, 0.0, 10.0, &m->rope_yarn.mscale_all_dim, err));
  return px_json_refuse_unknown(&c, obj, NULL, 0, err);
}

/* The rope_llama3 object (px_model.rope_llama3): factor and original_positions required, the two wavelength
 * factors defaulting to Llama 3.1's. */
static px_status llama3_from_json(const px_json_ctx *cp, const cJSON *obj, px_model *m, px_err *err) {
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {cp->file, "rope_llama3.", &keys};
  px_status st;
  TRY(rope_scaling_from_json(&c, obj, &m->rope_llama3.factor, &m->rope_llama3.original_positions, err));
  TRY(px_json_num(&c, obj, "low_freq_factor", false, 1e-3, 1e6, &m->rope_llama3.low_freq_factor, err));
  TRY(px_json_num(&c, obj, "high_freq_factor", false, 1e-3, 1e6, &m->rope_llama3.high_freq_factor, err));
  return px_json_refuse_unknown(&c, obj, NULL, 0, err);
}

static px_status model_from_ours(const cJSON *root, const char *file, px_model *m, px_err *err) {
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {file, "", &keys};
  px_status st;
  int e;
  px_path_stem(file, m->name, sizeof m->name);
  TRY(px_json_str(&c, root, "name", false, m->name, sizeof m->name, err));
  TRY(px_json_str(&c, root, "source", false, m->source, sizeof m->source, err));
  TRY(px_json_int(&c, root, "layers", true, 1, 100000, &m->layers, err));
  TRY(px_json_int(&c, root, "hidden", true, 1, MAX_DIM, &m->hidden, err));
  TRY(px_json_int(&c, root, "heads", true, 1, 65536, &m->heads, err));
  TRY(px_json_int(&c, root, "kv_heads", false, 1, 65536, &m->kv_heads, err));
  TRY(px_json_int(&c, root, "head_dim", false, 1, 65536, &m->head_dim, err));
  TRY(px_json_int(&c, root, "ffn_hidden", true, 1, MAX_DIM, &m->ffn_hidden, err));
  TRY(px_json_int(&c, root, "vocab", true, 1, (int64_t)1 << 24, &m->vocab, err));
  TRY(px_json_int(&c, root, "seq_len", true, 1, (int64_t)1 << 24, &m->seq_len, err));
  TRY(px_json_int(&c, root, "max_positions", false, 1, (int64_t)1 << 24, &m->max_positions, err));
  e = m->norm;
  TRY(px_json_enum(&c, root, "norm", false, px_norm_names, PX_NORM_COUNT, &e, err));
  m->norm = (px_norm)e;
  e = m->mlp;
  TRY(px_json_enum(&c, root, "mlp", false, px_mlp_names, PX_MLP_COUNT, &e, err));
  m->mlp = (px_mlp)e;
  e = m->position;
  TRY(px_json_enum(&c, root, "position", false, px_pos_names, PX_POS_COUNT, &e, err));
  m->position = (px_pos)e;
  TRY(px_json_bool(&c, root, "tied_embeddings", false, &m->tied_embeddings, err));
  TRY(px_json_bool(&c, root, "qkv_bias", false, &m->qkv_bias, err));
  TRY(px_json_bool(&c, root, "bias", false, &m->bias, err));
  TRY(px_json_bool(&c, root, "parallel_residual", false, &m->parallel_residual, err));
  TRY(px_json_num(&c, root, "dropout", false, 0.0, 0.99, &m->dropout, err));
  TRY(px_json_num(&c, root, "norm_eps", false, 0.0, 1.0, &m->norm_eps, err));
  TRY(px_json_num(&c, root, "rope_theta", false, 1.0, 1e12, &m->rope_theta, err));
  TRY(px_json_num(&c, root, "rope_concentration", false, 0.01, 100.0, &m->rope_concentration, err));
  TRY(px_json_num(&c, root, "rope_linear_factor", false, 1.0, 1e6, &m->rope_linear_factor, err));
  TRY(px_json_num(&c, root, "rope_fraction", false, 1e-6, 1.0, &m->rope_fraction, err));
  const cJSON *yarn;
  TRY(px_json_obj(&c, root, "rope_yarn", false, &yarn, err));
  if (yarn) TRY(yarn_from_json(&c, yarn, m, err));
  const cJSON *llama3;
  TRY(px_json_obj(&c, root, "rope_llama3", false, &llama3, err));
  if (llama3) TRY(llama3_from_json(&c, llama3, m, err));
  /* mixture of experts */
  TRY(px_json_int(&c, root, "experts", false, 0, 1 << 20, &m->experts, err));
  TRY(px_json_int(&c, root, "experts_per_token", false, 0, 1 << 20, &m->experts_per_token, err));
  TRY(px_json_int(&c, root, "moe_ffn_hidden", false, 0, MAX_DIM, &m->moe_ffn_hidden, err));
  TRY(px_json_int(&c, root, "shared_experts", false, 0, 1 << 20, &m->shared_experts, err));
  TRY(px_json_int(&c, root, "shared_ffn_hidden", false, 0, MAX_DIM, &m->shared_ffn_hidden, err));
  TRY(px_json_int(&c, root, "first_dense_layers", false, 0, 100000, &m->first_dense_layers, err));
  TRY(px_json_int(&c, root, "moe_layer_freq", false, 1, 100000, &m->moe_layer_freq, err));
  e = m->router;
  TRY(px_json_enum(&c, root, "router", false, px_router_names, PX_ROUTER_COUNT, &e, err));
  m->router = (px_router)e;
  TRY(px_json_bool(&c, root, "norm_topk_prob", false, &m->norm_topk_prob, err));
  TRY(px_json_num(&c, root, "capacity_factor", false, 0.0, 1e6, &m->capacity_factor, err));
  e = m->token_drop_policy;
  TRY(px_json_enum(&c, root, "token_drop_policy", false, px_drop_policy_names, PX_DROP_COUNT, &e, err));
  m->token_drop_policy = (px_drop_policy)e;
  TRY(px_json_num(&c, root, "aux_loss_coef", false, 0.0, 1e6, &m->aux_loss_coef, err));
  TRY(px_json_int(&c, root, "expert_groups", false, 0, 1 << 20, &m->expert_groups, err));
  TRY(px_json_int(&c, root, "groups_per_token", false, 0, 1 << 20, &m->groups_per_token, err));
  /* multi-head latent attention, multi-token prediction, gpt-oss's attention */
  TRY(px_json_int(&c, root, "q_lora_rank", false, 0, MAX_DIM, &m->q_lora_rank, err));
  TRY(px_json_int(&c, root, "kv_lora_rank", false, 0, MAX_DIM, &m->kv_lora_rank, err));
  TRY(px_json_int(&c, root, "qk_rope_head_dim", false, 0, 65536, &m->qk_rope_head_dim, err));
  TRY(px_json_int(&c, root, "qk_nope_head_dim", false, 0, 65536, &m->qk_nope_head_dim, err));
  TRY(px_json_int(&c, root, "v_head_dim", false, 0, 65536, &m->v_head_dim, err));
  TRY(px_json_int(&c, root, "mtp_layers", false, 0, 1000, &m->mtp_layers, err));
  TRY(px_json_int(&c, root, "sliding_window", false, 0, (int64_t)1 << 24, &m->sliding_window, err));
  TRY(px_json_int(&c, root, "window_layer_freq", false, 1, 100000, &m->window_layer_freq, err));
  TRY(px_json_int(&c, root, "first_full_layers", false, 0, 100000, &m->first_full_layers, err));
  TRY(px_json_bool(&c, root, "attention_sinks", false, &m->attention_sinks, err));
  TRY(px_json_bool(&c, root, "qk_norm", false, &m->qk_norm, err));
  return px_json_refuse_unknown(&c, root, NULL, 0, err);
}

/* The Hugging Face model types we read, and what their configs leave implicit. */
typedef enum { HF_LLAMA, HF_NEOX, HF_GPT2 } hf_family;
/* Which layers a config's sliding_window covers: none (the family has no window), every layer (Mistral,
 * Mixtral), the layers after the first max_window_layers and only with use_sliding_window (Qwen), or
 * every other one from layer 0 (gpt-oss); layer_types, where a config lists them, says it per layer. */
typedef enum { HF_WINDOW_NONE, HF_WINDOW_ALL, HF_WINDOW_QWEN, HF_WINDOW_ALTERNATE } hf_window;
typedef struct {
  const char *type;
  hf_family family;
  bool qkv_bias;   /* Q/K/V biases without a config key (Qwen2) */
  bool moe;        /* reads the mixture-of-experts and latent-attention keys */
  bool norm_topk;  /* the top-k weights sum to 1 without a norm_topk_prob key (Mixtral, gpt-oss, DeepSeek-V3) */
  px_router router; /* without a scoring_func key */
  bool gpt_oss;    /* biases on every linear layer, attention sinks */
  bool qk_norm;    /* a per-head RMSNorm of q and k (Qwen3) */
  hf_window window;
  int64_t window_default; /* the window without a sliding_window key (the family's configuration default) */
} hf_type;

/* Sources: each family's configuration_*.py and modeling_*.py in Hugging Face transformers. */
static const hf_type hf_types[] = {
    {"llama", HF_LLAMA, false, false, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_NONE, 0},
    {"mistral", HF_LLAMA, false, false, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_ALL, 4096},
    {"qwen2", HF_LLAMA, true, false, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_QWEN, 4096},
    {"qwen3", HF_LLAMA, false, false, false, PX_ROUTER_SOFTMAX, false, true, HF_WINDOW_QWEN, 4096},
    {"mixtral", HF_LLAMA, false, true, true, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_ALL, 0},
    {"qwen2_moe", HF_LLAMA, true, true, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_QWEN, 4096},
    {"qwen3_moe", HF_LLAMA, false, true, false, PX_ROUTER_SOFTMAX, false, true, HF_WINDOW_QWEN, 4096},
    {"deepseek_v2", HF_LLAMA, false, true, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_NONE, 0},
    {"deepseek_v3", HF_LLAMA, false, true, true, PX_ROUTER_SIGMOID, false, false, HF_WINDOW_NONE, 0},
    {"gpt_oss", HF_LLAMA, false, true, true, PX_ROUTER_SOFTMAX, true, false, HF_WINDOW_ALTERNATE, 128},
    {"gpt_neox", HF_NEOX, false, false, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_NONE, 0},
    {"gpt2", HF_GPT2, false, false, false, PX_ROUTER_SOFTMAX, false, false, HF_WINDOW_NONE, 0},
};
#define HF_TYPES (sizeof hf_types / sizeof hf_types[0])

/* Reads the first of keys[] that is present (none required when all are absent). */
static px_status hf_int_any(const px_json_ctx *c, const cJSON *root, const char *const *keys, int64_t max,
                            int64_t *out, px_err *err) {
  size_t n = 0;
  while (keys[n]) n++;
  px_json_known(c, keys, n); /* every family's name for it */
  for (; *keys; keys++)
    if (px_json_get(c, root, *keys)) return px_json_int(c, root, *keys, true, 1, max, out, err);
  return PX_OK;
}

/* Qwen-MoE's mlp_only_layers: dense layers by index; only a leading run 0..k-1 (first_dense_layers k) is
 * expressible, and only with decoder_sparse_step 1. */
static px_status hf_mlp_only_layers(const px_json_ctx *c, const cJSON *root, px_model *m, px_err *err) {
  const char *file = c->file;
  const cJSON *a = px_json_get(c, root, "mlp_only_layers");
  if (!a) return PX_OK;
  if (!cJSON_IsArray(a)) return BAD("%s: field 'mlp_only_layers': expected an array of layer indices", file);
  int64_t k = 0;
  for (const cJSON *x = a->child; x; x = x->next, k++)
    if (!cJSON_IsNumber(x) || x->valuedouble != (double)k)
      return BAD("%s: field 'mlp_only_layers': only the leading layers 0, 1, ..., k-1 can be dense "
                 "(element %lld is not %lld)", file, (long long)k, (long long)k);
  if (k > 0 && m->moe_layer_freq > 1)
    return BAD("%s: field 'mlp_only_layers': dense leading layers with decoder_sparse_step %lld are not supported",
               file, (long long)m->moe_layer_freq);
  if (k > 0) m->first_dense_layers = k;
  return PX_OK;
}

/* The mixture-of-experts, latent-attention and multi-token-prediction keys of mixtral, qwen2_moe, qwen3_moe,
 * deepseek_v2/v3 and gpt_oss configs (each family names the expert count its own way). */
static px_status hf_moe(const px_json_ctx *cp, const cJSON *root, const hf_type *t, px_model *m, px_err *err) {
  const px_json_ctx c = *cp;
  const char *file = c.file;
  px_status st;
  static const char *const experts[] = {"num_local_experts", "num_experts", "n_routed_experts", NULL};
  static const char *const topk[] = {"num_experts_per_tok", "experts_per_token", NULL};
  static const char *const aux[] = {"router_aux_loss_coef", "aux_loss_alpha", NULL};
  TRY(hf_int_any(&c, root, experts, 1 << 20, &m->experts, err));
  if (m->experts == 0) return BAD("%s: field 'num_local_experts' (num_experts, n_routed_experts) is missing", file);
  TRY(hf_int_any(&c, root, topk, 1 << 20, &m->experts_per_token, err));
  if (m->experts_per_token == 0) return BAD("%s: field 'num_experts_per_tok' is missing", file);
  m->moe_ffn_hidden = m->ffn_hidden; /* Mixtral's and gpt-oss's experts are intermediate_size wide */
  TRY(px_json_int(&c, root, "moe_intermediate_size", false, 1, MAX_DIM, &m->moe_ffn_hidden, err));
  TRY(px_json_int(&c, root, "n_shared_experts", false, 0, 1 << 20, &m->shared_experts, err));
  int64_t shared_w = 0; /* Qwen2-MoE: one shared expert of its own width, with a sigmoid gate */
  TRY(px_json_int(&c, root, "shared_expert_intermediate_size", false, 0, MAX_DIM, &shared_w, err));
  if (shared_w > 0) m->shared_experts = 1, m->shared_ffn_hidden = shared_w;
  TRY(px_json_int(&c, root, "first_k_dense_replace", false, 0, 100000, &m->first_dense_layers, err));
  TRY(px_json_int(&c, root, "decoder_sparse_step", false, 1, 100000, &m->moe_layer_freq, err));
  int64_t ds_freq = 1; /* DeepSeek puts experts where layer % moe_layer_freq == 0, which only 1 matches here */
  TRY(px_json_int(&c, root, "moe_layer_freq", false, 1, 100000, &ds_freq, err));
  if (ds_freq != 1) return BAD("%s: field 'moe_layer_freq': only 1 is supported, got %lld", file, (long long)ds_freq);
  TRY(hf_mlp_only_layers(&c, root, m, err));
  m->norm_topk_prob = t->norm_topk;
  TRY(px_json_bool(&c, root, "norm_topk_prob", false, &m->norm_topk_prob, err));
  int e = t->router;
  TRY(px_json_enum(&c, root, "scoring_func", false, px_router_names, PX_ROUTER_COUNT, &e, err));
  m->router = (px_router)e;
  for (const char *const *k = aux; *k; k++) TRY(px_json_num(&c, root, *k, false, 0.0, 1e6, &m->aux_loss_coef, err));
  TRY(px_json_int(&c, root, "n_group", false, 0, 1 << 20, &m->expert_groups, err)); /* DeepSeek's group-limited routing */
  TRY(px_json_int(&c, root, "topk_group", false, 0, 1 << 20, &m->groups_per_token, err));
  if (m->expert_groups <= 1) m->expert_groups = m->groups_per_token = 0; /* one group: no limit */
  TRY(px_json_int(&c, root, "q_lora_rank", false, 0, MAX_DIM, &m->q_lora_rank, err));
  TRY(px_json_int(&c, root, "kv_lora_rank", false, 0, MAX_DIM, &m->kv_lora_rank, err));
  TRY(px_json_int(&c, root, "qk_rope_head_dim", false, 0, 65536, &m->qk_rope_head_dim, err));
  TRY(px_json_int(&c, root, "qk_nope_head_dim", false, 0, 65536, &m->qk_nope_head_dim, err));
  TRY(px_json_int(&c, root, "v_head_dim", false, 0, 65536, &m->v_head_dim, err));
  /* transformers' DeepseekV3Config saves head_dim = qk_rope_head_dim; ours is the whole q/k head */
  if (m->kv_lora_rank > 0) m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
  TRY(px_json_int(&c, root, "num_nextn_predict_layers", false, 0, 1000, &m->mtp_layers, err));
  if (t->gpt_oss) {
    bool attention_bias = true; /* its experts and router have biases either way: `bias` holds all of them */
    TRY(px_json_bool(&c, root, "attention_bias", false, &attention_bias, err));
    if (!attention_bias)
      return BAD("%s: field 'attention_bias': gpt_oss without attention biases is not supported", file);
    m->bias = m->attention_sinks = true;
  }
  return PX_OK;
}

/* Sliding-window attention (t->window): the window, then which layers have it: layer_types where the config
 * lists them ("sliding_attention" or "full_attention" per layer; transformers writes them since 4.53), else the
 * family's rule. Our model has a leading run of full layers, then a window every n-th layer from the first:
 * other patterns are refused naming the element that breaks it. */
static px_status hf_window_layers(const px_json_ctx *cp, const cJSON *root, const hf_type *t, px_model *m,
                                  px_err *err) {
  const px_json_ctx c = *cp;
  const char *file = c.file;
  px_status st;
  px_json_get(&c, root, "sliding_window"); /* recorded (a family without windows ignores it); null is none */
  if (t->window == HF_WINDOW_NONE) return PX_OK;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
  m->sliding_window = w ? 0 : t->window_default; /* a null window is none */
  if (w && !cJSON_IsNull(w)) TRY(px_json_int(&c, root, "sliding_window", true, 1, (int64_t)1 << 24, &m->sliding_window, err));
  if (t->window == HF_WINDOW_QWEN) { /* Qwen2Config: sliding_window only with use_sliding_window */
    bool use = false;
    int64_t full = 28; /* max_window_layers' default */
    TRY(px_json_bool(&c, root, "use_sliding_window", false, &use, err));
    TRY(px_json_int(&c, root, "max_window_layers", false, 0, 100000, &full, err));
    if (!use) m->sliding_window = 0;
    m->first_full_layers = full < m->layers ? full : m->layers; /* all full: no window (below) */
  }
  m->window_layer_freq = t->window == HF_WINDOW_ALTERNATE ? 2 : 1;
  const cJSON *lt = px_json_get(&c, root, "layer_types");
  if (lt) {
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != m->layers)
      return BAD("%s: field 'layer_types': expected an array of the %lld layers' attention types", file,
                 (long long)m->layers);
    int64_t l = 0, first = -1, second = -1;
    for (const cJSON *x = lt->child; x; x = x->next, l++) {
      bool sliding = cJSON_IsString(x) && !strcmp(x->valuestring, "sliding_attention");
      if (!sliding && !(cJSON_IsString(x) && !strcmp(x->valuestring, "full_attention")))
        return BAD("%s: field 'layer_types': element %lld is not \"sliding_attention\" or \"full_attention\"", file,
                   (long long)l);
      if (sliding && first >= 0 && second < 0) second = l;
      if (sliding && first < 0) first = l;
    }
    m->first_full_layers = first >= 0 ? first : m->layers;
    m->window_layer_freq = second >= 0 ? second - first : m->layers - m->first_full_layers;
    l = 0;
    for (const cJSON *x = lt->child; x && first >= 0 && m->sliding_window > 0; x = x->next, l++)
      if (!strcmp(x->valuestring, "sliding_attention") != px_model_layer_is_sliding(m, l))
        return BAD("%s: field 'layer_types': only full layers, then a sliding window every n-th layer from the first "
                   "(layers %lld, %lld, ...) can be expressed; element %lld breaks it", file, (long long)first,
                   (long long)(first + m->window_layer_freq), (long long)l);
  }
  if (m->sliding_window == 0 || m->first_full_layers >= m->layers) /* no layer has the window */
    m->sliding_window = m->window_layer_freq = m->first_full_layers = 0;
  return PX_OK;
}

/* Keys of Hugging Face configs that say nothing about training cost or memory, accepted and not read (any other
 * key parallax does not read is refused, so that a misspelt one is not silently left at its default): */
static const char *const hf_ignored[] = {
    /* bookkeeping and inference settings */
    "architectures", "auto_map", "_name_or_path", "model_type", "transformers_version", "torch_dtype", "dtype",
    "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "tokenizer_class", "initializer_range",
    "output_router_logits", "quantization_config", "ep_size",
    /* the activation is the family's (SwiGLU with SiLU, GELU for GPT-2 and NeoX) */
    "hidden_act", "activation_function",
    /* gpt-oss's original context (its rope_scaling's original_max_position_embeddings is read: hf_rope_scaling) */
    "initial_context_length",
    /* Llama's emulation of a TP-sliced checkpoint's GEMMs (the same products) */
    "pretraining_tp",
    /* GPT-2: embedding and attention dropouts (resid_pdrop is read) and the classification head's settings */
    "attn_pdrop", "embd_pdrop", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
    "summary_type", "summary_use_proj",
    /* routing details that change no cost: DeepSeek's output scale, top-k method and sequence-wise aux loss,
     * gpt-oss's SwiGLU clamp, Mixtral's router jitter */
    "routed_scaling_factor", "topk_method", "seq_aux", "swiglu_limit", "router_jitter_noise",
    /* NeoX's attention dropout (its hidden_dropout is read; the Llama family's attention_dropout is) */
    "attention_dropout",
};

double px_model_yarn_mscale(double s, double m) { return s > 1.0 ? 0.1 * m * log(s) + 1.0 : 1.0; }

int64_t px_model_rope_dims(const px_model *m) { return (int64_t)((double)m->head_dim * m->rope_fraction); }

double px_model_softmax_scale_factor(const px_model *m) {
  if (m->kv_lora_rank <= 0 || !(m->rope_yarn.factor > 1.0) || !(m->rope_yarn.mscale_all_dim > 0)) return 1.0;
  double s = px_model_yarn_mscale(m->rope_yarn.factor, m->rope_yarn.mscale_all_dim);
  return s * s;
}

/* rope_scaling's concentration factor (model.rope_concentration), as Hugging Face's _compute_yarn_parameters and
 * Megatron-Core's _yarn_get_concentration_factor compute it for "yarn": attention_factor where the config gives one,
 * else mscale(factor, mscale) / mscale(factor, mscale_all_dim) where it gives both (DeepSeek's: 1), else
 * mscale(factor, 1) (gpt-oss: factor 32, 1.3466); YaRN's frequencies into rope_yarn, Llama 3's (rope_type "llama3")
 * into rope_llama3, linear interpolation's factor into rope_linear_factor. Dynamic NTK is read for nothing: at
 * training lengths up to max_position_embeddings it is theta's frequencies (its base grows only beyond). */
static px_status hf_rope_scaling(const px_json_ctx *cp, const cJSON *root, px_model *m, px_err *err) {
  px_status st;
  const cJSON *rs;
  TRY(px_json_obj(cp, root, "rope_scaling", false, &rs, err));
  if (!rs) return PX_OK;
  px_json_ctx c = {cp->file, "rope_scaling.", NULL};
  char type[32] = "";
  TRY(px_json_str(&c, rs, px_json_get(&c, rs, "rope_type") ? "rope_type" : "type", false, type, sizeof type, err));
  if (!strcmp(type, "llama3")) { /* every key required, as transformers' _validate_llama3_parameters has them */
    TRY(px_json_num(&c, rs, "factor", true, 1.0, 1e6, &m->rope_llama3.factor, err));
    TRY(px_json_num(&c, rs, "low_freq_factor", true, 1e-3, 1e6, &m->rope_llama3.low_freq_factor, err));
    TRY(px_json_num(&c, rs, "high_freq_factor", true, 1e-3, 1e6, &m->rope_llama3.high_freq_factor, err));
    return px_json_int(&c, rs, "original_max_position_embeddings", true, 1, (int64_t)1 << 24,
                       &m->rope_llama3.original_positions, err);
  }
  if (!strcmp(type, "linear"))
    return px_json_num(&c, rs, "factor", true, 1.0, 1e6, &m->rope_linear_factor, err);
  if (strcmp(type, "yarn")) return PX_OK;
  double factor = 1.0, ms = 1.0, ms_all = 1.0;
  TRY(px_json_num(&c, rs, "factor", true, 1e-3, 1e6, &factor, err));
  TRY(px_json_num(&c, rs, "mscale", false, 0.0, 10.0, &ms, err));
  TRY(px_json_num(&c, rs, "mscale_all_dim", false, 0.0, 10.0, &ms_all, err));
  bool ms_all_given = px_json_get(&c, rs, "mscale_all_dim") != NULL;
  bool both = px_json_get(&c, rs, "mscale") && ms_all_given;
  m->rope_concentration = both ? px_model_yarn_mscale(factor, ms) / px_model_yarn_mscale(factor, ms_all)
                                : px_model_yarn_mscale(factor, 1.0);
  TRY(px_json_num(&c, rs, "attention_factor", false, 0.01, 100.0, &m->rope_concentration, err));
  /* the frequencies' ramp (_compute_yarn_parameters): the original context where given, else the config's */
  m->rope_yarn.factor = factor < 1.0 ? 1.0 : factor;
  m->rope_yarn.original_positions = m->seq_len;
  TRY(px_json_int(&c, rs, "original_max_position_embeddings", false, 1, (int64_t)1 << 24,
                  &m->rope_yarn.original_positions, err));
  TRY(px_json_num(&c, rs, "beta_fast", false, 1e-3, 1e6, &m->rope_yarn.beta_fast, err));
  TRY(px_json_num(&c, rs, "beta_slow", false, 1e-3, 1e6, &m->rope_yarn.beta_slow, err));
  m->rope_yarn.mscale_all_dim = ms_all_given ? ms_all : 0.0;
  return px_json_bool(&c, rs, "truncate", false, &m->rope_yarn.truncate, err);
}

/* Hugging Face config.json for the families we know. */
static px_status model_from_hf(const cJSON *root, const char *file, const char *type, px_model *m, px_err *err) {
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {file, "", &keys};
  px_status st;
  const hf_type *t = NULL;
  for (size_t i = 0; i < HF_TYPES && !t; i++)
    if (!strcmp(type, hf_types[i].type)) t = &hf_types[i];
  if (!t) {
    char list[256] = "";
    for (size_t i = 0; i < HF_TYPES; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", hf_types[i].type);
    return BAD("%s: field 'model_type': '%.64s' is not supported (%s)", file, type, list);
  }
  snprintf(m->source, sizeof m->source, "Hugging Face config.json (model_type %s)", type);
  if (t->family != HF_GPT2) {
    TRY(px_json_int(&c, root, "num_hidden_layers", true, 1, 100000, &m->layers, err));
    TRY(px_json_int(&c, root, "hidden_size", true, 1, MAX_DIM, &m->hidden, err));
    TRY(px_json_int(&c, root, "num_attention_heads", true, 1, 65536, &m->heads, err));
    TRY(px_json_int(&c, root, "intermediate_size", true, 1, MAX_DIM, &m->ffn_hidden, err));
    TRY(px_json_int(&c, root, "vocab_size", true, 1, (int64_t)1 << 24, &m->vocab, err));
    TRY(px_json_int(&c, root, "max_position_embeddings", true, 1, (int64_t)1 << 24, &m->seq_len, err));
    TRY(px_json_num(&c, root, "rope_theta", false, 1.0, 1e12, &m->rope_theta, err));
    TRY(hf_rope_scaling(&c, root, m, err));
    m->position = PX_POS_ROPE;
    if (t->family == HF_LLAMA) {
      m->norm = PX_NORM_RMSNORM;
      m->mlp = PX_MLP_SWIGLU;
      m->tied_embeddings = false;
      m->qkv_bias = t->qkv_bias;
      TRY(px_json_int(&c, root, "num_key_value_heads", false, 1, 65536, &m->kv_heads, err));
      TRY(px_json_int(&c, root, "head_dim", false, 1, 65536, &m->head_dim, err));
      TRY(px_json_bool(&c, root, "attention_bias", false, &m->qkv_bias, err));
      TRY(px_json_bool(&c, root, "mlp_bias", false, &m->bias, err));
      TRY(px_json_num(&c, root, "rms_norm_eps", false, 0.0, 1.0, &m->norm_eps, err));
      TRY(px_json_num(&c, root, "attention_dropout", false, 0.0, 0.99, &m->dropout, err));
      TRY(px_json_num(&c, root, "partial_rotary_factor", false, 1e-6, 1.0, &m->rope_fraction, err));
      m->qk_norm = t->qk_norm;
      if (t->moe) TRY(hf_moe(&c, root, t, m, err));
      TRY(hf_window_layers(&c, root, t, m, err));
    } else {
      m->norm = PX_NORM_LAYERNORM;
      m->mlp = PX_MLP_GELU;
      m->bias = true;
      m->parallel_residual = true;
      TRY(px_json_bool(&c, root, "use_parallel_residual", false, &m->parallel_residual, err));
      TRY(px_json_num(&c, root, "layer_norm_eps", false, 0.0, 1.0, &m->norm_eps, err));
      TRY(px_json_num(&c, root, "hidden_dropout", false, 0.0, 0.99, &m->dropout, err));
      /* GPTNeoXConfig's rotary_pct (0.25 by default; partial_rotary_factor in later transformers) and
       * rotary_emb_base (rope_theta later) */
      m->rope_fraction = 0.25;
      TRY(px_json_num(&c, root, "rotary_pct", false, 1e-6, 1.0, &m->rope_fraction, err));
      TRY(px_json_num(&c, root, "partial_rotary_factor", false, 1e-6, 1.0, &m->rope_fraction, err));
      TRY(px_json_num(&c, root, "rotary_emb_base", false, 1.0, 1e12, &m->rope_theta, err));
    }
    TRY(px_json_bool(&c, root, "tie_word_embeddings", false, &m->tied_embeddings, err));
  } else {
    TRY(px_json_int(&c, root, "n_layer", true, 1, 100000, &m->layers, err));
    TRY(px_json_int(&c, root, "n_embd", true, 1, MAX_DIM, &m->hidden, err));
    TRY(px_json_int(&c, root, "n_head", true, 1, 65536, &m->heads, err));
    TRY(px_json_int(&c, root, "vocab_size", true, 1, (int64_t)1 << 24, &m->vocab, err));
    m->max_positions = 1024;
    TRY(px_json_int(&c, root, "n_ctx", false, 1, (int64_t)1 << 24, &m->max_positions, err));
    TRY(px_json_int(&c, root, "n_positions", false, 1, (int64_t)1 << 24, &m->max_positions, err));
    m->ffn_hidden = 4 * m->hidden;
    TRY(px_json_int(&c, root, "n_inner", false, 1, MAX_DIM, &m->ffn_hidden, err));
    m->seq_len = m->max_positions;
    m->norm = PX_NORM_LAYERNORM;
    m->mlp = PX_MLP_GELU;
    m->position = PX_POS_LEARNED;
    m->tied_embeddings = true;
    m->bias = true;
    m->dropout = 0.1;
    TRY(px_json_num(&c, root, "resid_pdrop", false, 0.0, 0.99, &m->dropout, err));
    TRY(px_json_num(&c, root, "layer_norm_epsilon", false, 0.0, 1.0, &m->norm_eps, err));
  }
  if (m->bias) m->qkv_bias = true;
  m->seq_from_positions = true;
  return px_json_refuse_unknown(&c, root, hf_ignored, sizeof hf_ignored / sizeof *hf_ignored, err);
}
#undef TRY

px_status px_model_from_json(const cJSON *root, const char *file, px_model *m, px_err *err) {
  px_model_init(m);
  if (!cJSON_IsObject(root)) return px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object at the top level", file);
  px_status st;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  if (type) {
    if (!cJSON_IsString(type))
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'model_type': expected a string", file);
    px_path_stem(file, m->name, sizeof m->name);
    if (!strcmp(m->name, "config")) snprintf(m->name, sizeof m->name, "%.40s", type->valuestring);
    st = model_from_hf(root, file, type->valuestring, m, err);
  } else {
    st = model_from_ours(root, file, m, err);
  }
  if (st) return st;
  model_fill_defaults(m);
  return px_model_validate(m, file, err);
}

px_status px_model_load_file(const char *path, px_model *m, px_err *err) {
  cJSON *root = NULL;
  px_status st = px_json_load_max(path, PX_MODEL_FILE_MAX_BYTES, "a model file", &root, err);
  if (st) return st;
  st = px_model_from_json(root, path, m, err);
  cJSON_Delete(root);
  return st;
}

px_status px_model_load(const char *name_or_path, px_model *m, px_err *err) {
  char path[4096];
  px_status st = px_preset_path("models", name_or_path, path, sizeof path, err);
  if (st) return st;
  if (!strchr(name_or_path, '/') && !px_file_exists(path))
    return px_err_set(err, PX_ERR_INPUT, "model '%s': no such preset or file (see `parallax models`)", name_or_path);
  return px_model_load_file(path, m, err);
}

cJSON *px_model_to_json(const px_model *m) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "name", m->name);
  px_json_add_num(o, "layers", (double)m->layers);
  px_json_add_num(o, "hidden", (double)m->hidden);
  px_json_add_num(o, "heads", (double)m->heads);
  px_json_add_num(o, "kv_heads", (double)m->kv_heads);
  px_json_add_num(o, "head_dim", (double)m->head_dim);
  px_json_add_num(o, "ffn_hidden", (double)m->ffn_hidden);
  px_json_add_num(o, "vocab", (double)m->vocab);
  px_json_add_num(o, "seq_len", (double)m->seq_len);
  px_json_add_num(o, "max_positions", (double)m->max_positions);
  cJSON_AddStringToObject(o, "norm", px_norm_names[m->norm]);
  cJSON_AddStringToObject(o, "mlp", px_mlp_names[m->mlp]);
  cJSON_AddStringToObject(o, "position", px_pos_names[m->position]);
  cJSON_AddBoolToObject(o, "tied_embeddings", m->tied_embeddings);
  cJSON_AddBoolToObject(o, "qkv_bias", m->qkv_bias);
  cJSON_AddBoolToObject(o, "bias", m->bias);
  cJSON_AddBoolToObject(o, "parallel_residual", m->parallel_residual);
  px_json_add_num(o, "dropout", m->dropout);
  px_json_add_num(o, "norm_eps", m->norm_eps);
  px_json_add_num(o, "rope_theta", m->rope_theta);
  if (m->rope_concentration != 1.0) px_json_add_num(o, "rope_concentration", m->rope_concentration);
  if (m->rope_linear_factor > 0) px_json_add_num(o, "rope_linear_factor", m->rope_linear_factor);
  if (m->rope_fraction < 1.0) px_json_add_num(o, "rope_fraction", m->rope_fraction);
  if (m->rope_yarn.factor > 0) {
    cJSON *y = cJSON_AddObjectToObject(o, "rope_yarn");
    if (y) {
      px_json_add_num(y, "factor", m->rope_yarn.factor);
      px_json_add_num(y, "original_positions", (double)m->rope_yarn.original_positions);
      px_json_add_num(y, "beta_fast", m->rope_yarn.beta_fast);
      px_json_add_num(y, "beta_slow", m->rope_yarn.beta_slow);
      cJSON_AddBoolToObject(y, "truncate", m->rope_yarn.truncate);
      if (m->rope_yarn.mscale_all_dim > 0) px_json_add_num(y, "mscale_all_dim", m->rope_yarn.mscale_all_dim);
    }
  }
  if (m->rope_llama3.factor > 0) {
    cJSON *l = cJSON_AddObjectToObject(o, "rope_llama3");
    if (l) {
      px_json_add_num(l, "factor", m->rope_llama3.factor);
      px_json_add_num(l, "low_freq_factor", m->rope_llama3.low_freq_factor);
      px_json_add_num(l, "high_freq_factor", m->rope_llama3.high_freq_factor);
      px_json_add_num(l, "original_positions", (double)m->rope_llama3.original_positions);
    }
  }
  /* the mixture-of-experts, latent-attention, MTP and gpt-oss fields only where the model has them, so a dense
   * model's JSON is as it was */
  if (m->experts > 0) {
    px_json_add_num(o, "experts", (double)m->experts);
    px_json_add_num(o, "experts_per_token", (double)m->experts_per_token);
    px_json_add_num(o, "moe_ffn_hidden", (double)m->moe_ffn_hidden);
    px_json_add_num(o, "shared_experts", (double)m->shared_experts);
    if (m->shared_ffn_hidden > 0) px_json_add_num(o, "shared_ffn_hidden", (double)m->shared_ffn_hidden);
    px_json_add_num(o, "first_dense_layers", (double)m->first_dense_layers);
    px_json_add_num(o, "moe_layer_freq", (double)m->moe_layer_freq);
    cJSON_AddStringToObject(o, "router", px_router_names[m->router]);
    cJSON_AddBoolToObject(o, "norm_topk_prob", m->norm_topk_prob);
    px_json_add_num(o, "capacity_factor", m->capacity_factor);
    if (m->capacity_factor > 0) cJSON_AddStringToObject(o, "token_drop_policy", px_drop_policy_names[m->token_drop_policy]);
    px_json_add_num(o, "aux_loss_coef", m->aux_loss_coef);
    if (m->expert_groups > 0) px_json_add_num(o, "expert_groups", (double)m->expert_groups);
    if (m->expert_groups > 0) px_json_add_num(o, "groups_per_token", (double)m->groups_per_token);
  }
  if (m->kv_lora_rank > 0) {
    px_json_add_num(o, "q_lora_rank", (double)m->q_lora_rank);
    px_json_add_num(o, "kv_lora_rank", (double)m->kv_lora_rank);
    px_json_add_num(o, "qk_rope_head_dim", (double)m->qk_rope_head_dim);
    px_json_add_num(o, "qk_nope_head_dim", (double)m->qk_nope_head_dim);
    px_json_add_num(o, "v_head_dim", (double)m->v_head_dim);
  }
  if (m->mtp_layers > 0) px_json_add_num(o, "mtp_layers", (double)m->mtp_layers);
  if (m->sliding_window > 0) {
    px_json_add_num(o, "sliding_window", (double)m->sliding_window);
    px_json_add_num(o, "window_layer_freq", (double)m->window_layer_freq);
    if (m->first_full_layers > 0) px_json_add_num(o, "first_full_layers", (double)m->first_full_layers);
  }
  if (m->qk_norm) cJSON_AddBoolToObject(o, "qk_norm", true);
  if (m->attention_sinks) cJSON_AddBoolToObject(o, "attention_sinks", true);
  cJSON_AddStringToObject(o, "source", m->source);
  return o;
}

/* One layer's parameters by part. With weights_only, only the matmul weights (what FLOPs count): no biases,
 * norms, sink logits or DeepSeek's router bias. */
typedef struct {
  uint64_t attention, norms, mlp; /* a dense layer: attention, its two norms, the MLP of ffn_hidden */
  uint64_t router, expert, shared; /* a MoE layer's MLP instead: the router, one routed expert, the shared experts */
} layer_parts;

/* An MLP of inner width f: up and down (GELU) or gate, up and down (SwiGLU), with their biases. */
static uint64_t mlp_params(const px_model *m, uint64_t f, bool biases) {
  uint64_t h = (uint64_t)m->hidden;
  if (m->mlp == PX_MLP_GELU) return 2 * h * f + (biases ? f + h : 0);
  return 3 * h * f + (biases ? 2 * f + h : 0);
}

static void layer_parts_count(const px_model *m, bool weights_only, layer_parts *p) {
  bool all = !weights_only;
  uint64_t h = (uint64_t)m->hidden, H = (uint64_t)m->heads, nw = m->norm == PX_NORM_LAYERNORM ? 2 : 1;
  if (m->kv_lora_rank > 0) { /* MLA: q (through a normed low-rank latent when q_lora_rank > 0), the shared kv
                              * latent plus the RoPE key, its up-projection to per-head keys and values, o */
    uint64_t ql = (uint64_t)m->q_lora_rank, kl = (uint64_t)m->kv_lora_rank, rope = (uint64_t)m->qk_rope_head_dim;
    uint64_t qk = (uint64_t)m->head_dim, v = (uint64_t)m->v_head_dim, nope = (uint64_t)m->qk_nope_head_dim;
    p->attention = (ql ? h * ql + (all ? nw * ql : 0) + ql * H * qk : h * H * qk) + h * (kl + rope) +
                   (all ? nw * kl : 0) + kl * H * (nope + v) + H * v * h;
  } else {
    uint64_t q = H * (uint64_t)m->head_dim, kv = (uint64_t)(m->kv_heads * m->head_dim);
    p->attention = h * q + 2 * h * kv + q * h;
    if (all && m->qkv_bias) p->attention += q + 2 * kv;
    if (all && m->bias) p->attention += h;
  }
  if (all && m->attention_sinks) p->attention += H;
  if (all && m->qk_norm) p->attention += 2 * (uint64_t)m->head_dim; /* one RMSNorm weight of head_dim for q, one for k */
  p->norms = all ? 2 * nw * h : 0;
  p->mlp = mlp_params(m, (uint64_t)m->ffn_hidden, all && m->bias);
  uint64_t E = (uint64_t)m->experts;
  p->expert = E ? mlp_params(m, (uint64_t)m->moe_ffn_hidden, all && px_model_moe_biases(m)) : 0;
  /* router: hidden x experts, with a bias per expert (gpt-oss's linear bias, DeepSeek-V3's e_score_correction_bias) */
  p->router = E * h + (all && (px_model_moe_biases(m) || m->router == PX_ROUTER_SIGMOID) ? E : 0);
  uint64_t sw = (uint64_t)px_model_shared_ffn(m);
  /* a shared expert of its own width (Qwen2-MoE) has a sigmoid gate: a hidden x 1 linear layer */
  p->shared = sw ? mlp_params(m, sw, all && m->bias) + (m->shared_ffn_hidden > 0 ? h : 0) : 0;
}

static int64_t model_moe_layers(const px_model *m) {
  int64_t n = 0;
  for (int64_t l = 0; l < m->layers; l++) n += px_model_layer_is_moe(m, l);
  return n;
}

/* DeepSeek-V3's MTP module k (Megatron-Core's multi_token_prediction.py at d98e8a6): the RMSNorms of the hidden
 * state and of the next token's embedding (enorm, hnorm), their projection eh_proj (2h -> h: these weights), one
 * transformer layer of the decoder's kind at layer index mtp_layer(m, k), the norm before the shared head; read by
 * the parameter count and the FLOPs a token alike. */
static uint64_t mtp_proj_weights(const px_model *m) { return 2 * (uint64_t)m->hidden * (uint64_t)m->hidden; }
static int64_t mtp_layer(const px_model *m, int64_t k) { return m->layers + k; }

void px_model_count_params(const px_model *m, px_model_params *p) {
  memset(p, 0, sizeof *p);
  layer_parts l = {0};
  layer_parts_count(m, false, &l);
  uint64_t h = (uint64_t)m->hidden, v = (uint64_t)m->vocab, norm = m->norm == PX_NORM_LAYERNORM ? 2 * h : h;
  p->embedding = v * h;
  p->position = m->position == PX_POS_LEARNED ? (uint64_t)m->max_positions * h : 0;
  p->attention = l.attention;
  p->mlp = l.mlp;
  p->norms = l.norms;
  p->per_layer = p->attention + p->mlp + p->norms;
  p->final_norm = norm;
  p->lm_head = m->tied_embeddings ? 0 : v * h;
  p->moe_layers = model_moe_layers(m);
  uint64_t moe = (uint64_t)p->moe_layers, dense = (uint64_t)m->layers - moe, E = (uint64_t)m->experts;
  if (moe) {
    p->expert = l.expert;
    p->router = l.router;
    p->shared = l.shared;
    p->moe_layer = p->attention + p->norms + p->router + E * p->expert + p->shared;
  }
  p->total = p->embedding + p->position + dense * p->per_layer + moe * p->moe_layer + p->final_norm + p->lm_head;
  p->active = p->total - moe * (E - (uint64_t)m->experts_per_token) * p->expert;
  for (int64_t k = 0; k < m->mtp_layers; k++) /* the MTP modules: three norms, eh_proj, a layer (mtp_proj_weights) */
    p->mtp += 3 * norm + mtp_proj_weights(m) + (px_model_layer_is_moe(m, mtp_layer(m, k)) ? p->moe_layer : p->per_layer);
}

uint64_t px_model_param_count(const px_model *m) {
  px_model_params p;
  px_model_count_params(m, &p);
  return p.total;
}

void px_model_flops_per_token(const px_model *m, int64_t seq, px_model_flops *f) {
  if (seq <= 0) seq = m->seq_len;
  layer_parts w = {0};
  layer_parts_count(m, true, &w);
  uint64_t moe = (uint64_t)model_moe_layers(m), dense = (uint64_t)m->layers - moe;
  uint64_t moe_w = w.attention + w.router + (uint64_t)m->experts_per_token * w.expert + w.shared;
  /* the LM head GEMM runs even when tied; the embedding is a lookup */
  uint64_t matmul = dense * (w.attention + w.mlp) + moe * moe_w + (uint64_t)m->vocab * (uint64_t)m->hidden;
  f->forward_dense_flops = 2.0 * (double)matmul;
  /* QK^T over the q/k head width and attention x V over the v head width, per head, for the keys in reach */
  bool mla = m->kv_lora_rank > 0;
  double per_key = 2.0 * (double)m->heads * (double)(m->head_dim + (mla ? m->v_head_dim : m->head_dim));
  int64_t sliding = 0;
  for (int64_t l = 0; l < m->layers; l++) sliding += px_model_layer_is_sliding(m, l);
  int64_t window = m->sliding_window < seq ? m->sliding_window : seq;
  f->forward_attention_flops =
      per_key * ((double)seq * (double)(m->layers - sliding) + (double)window * (double)sliding);
  f->forward_flops = f->forward_dense_flops + f->forward_attention_flops;
  f->train_flops = 3.0 * f->forward_flops;
  f->train_flops_no_attention = 3.0 * f->forward_dense_flops;
  f->forward_mtp_flops = 0;
  for (int64_t k = 0; k < m->mtp_layers; k++) {
    int64_t l = mtp_layer(m, k); /* its projection, its layer's matmuls and attention, the shared head again */
    uint64_t layer = px_model_layer_is_moe(m, l) ? moe_w : w.attention + w.mlp;
    double keys = px_model_layer_is_sliding(m, l) ? (double)window : (double)seq;
    f->forward_mtp_flops +=
        2.0 * (double)(mtp_proj_weights(m) + layer + (uint64_t)m->vocab * (uint64_t)m->hidden) + per_key * keys;
  }
}

int64_t px_moe_capacity(double cf, int64_t routed, int64_t experts) {
  return (int64_t)ceil((double)routed / (double)experts * cf);
}

bool px_model_moe_biases(const px_model *m) { return m->experts > 0 && m->bias; }

bool px_model_layer_is_moe(const px_model *m, int64_t l) {
  if (m->experts == 0 || l < m->first_dense_layers) return false;
  int64_t freq = m->moe_layer_freq > 0 ? m->moe_layer_freq : 1;
  return (l - m->first_dense_layers + 1) % freq == 0;
}

double px_attention_pairs(int64_t seq, int64_t window) {
  double s = (double)seq;
  if (window <= 0 || window >= seq) return s * (s + 1.0) / 2.0;
  double w = (double)window;
  return w * (w + 1.0) / 2.0 + (s - w) * w;
}

double px_attention_window_fraction(int64_t seq, int64_t window) {
  return window > 0 && seq > 0 ? px_attention_pairs(seq, window) / px_attention_pairs(seq, 0) : 1.0;
}

void px_model_window_desc(const px_model *m, char *buf, size_t cap) {
  int64_t shown = 0, n = 0;
  if (cap) buf[0] = '\0';
  if (m->sliding_window <= 0) return;
  if (m->window_layer_freq == 1 && m->first_full_layers == 0) {
    snprintf(buf, cap, "window %lld on every layer", (long long)m->sliding_window);
    return;
  }
  int k = snprintf(buf, cap, "window %lld on layers", (long long)m->sliding_window);
  for (int64_t l = 0; l < m->layers && k >= 0 && (size_t)k < cap; l++) {
    if (!px_model_layer_is_sliding(m, l)) continue;
    n++;
    if (shown < 3) k += snprintf(buf + k, cap - (size_t)k, "%s %lld", shown ? "," : "", (long long)l), shown++;
  }
  if (n > shown && k >= 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, ", ...");
}

bool px_model_layer_is_sliding(const px_model *m, int64_t l) {
  return m->sliding_window > 0 && m->window_layer_freq > 0 && l >= m->first_full_layers &&
         (l - m->first_full_layers) % m->window_layer_freq == 0;
}

int64_t px_model_shared_ffn(const px_model *m) {
  return m->shared_ffn_hidden > 0 ? m->shared_ffn_hidden : m->shared_experts * m->moe_ffn_hidden;
}
