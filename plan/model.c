/* Model specification: JSON and Hugging Face loading, parameter and FLOP counts. */
#include "plan/model.h"

#include <stdio.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/paths.h"

PX_NAME_TABLE(px_norm_names, PX_NORM_COUNT, "layernorm", "rmsnorm");
PX_NAME_TABLE(px_mlp_names, PX_MLP_COUNT, "gelu", "swiglu");
PX_NAME_TABLE(px_pos_names, PX_POS_COUNT, "learned", "rope");

#define MAX_DIM ((int64_t)1 << 22)

void px_model_init(px_model *m) {
  memset(m, 0, sizeof *m);
  m->norm = PX_NORM_LAYERNORM;
  m->mlp = PX_MLP_GELU;
  m->position = PX_POS_LEARNED;
  m->norm_eps = 1e-5;
  m->rope_theta = 10000.0;
}

/* Fills fields that default from others (kv_heads, head_dim, max_positions). */
static void model_fill_defaults(px_model *m) {
  if (m->kv_heads == 0) m->kv_heads = m->heads;
  if (m->head_dim == 0 && m->heads > 0 && m->hidden % m->heads == 0) m->head_dim = m->hidden / m->heads;
  if (m->max_positions == 0) m->max_positions = m->seq_len;
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
  return PX_OK;
}

/* Our schema. */
static px_status model_from_ours(const cJSON *root, const char *file, px_model *m, px_err *err) {
  px_json_ctx c = {file, ""};
  px_status st;
  int e;
  px_path_stem(file, m->name, sizeof m->name);
#define TRY(x) \
  if ((st = (x))) return st
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
#undef TRY
  return PX_OK;
}

/* Hugging Face config.json for the families we know. */
static px_status model_from_hf(const cJSON *root, const char *file, const char *type, px_model *m, px_err *err) {
  px_json_ctx c = {file, ""};
  px_status st;
#define TRY(x) \
  if ((st = (x))) return st
  bool llama_like = !strcmp(type, "llama") || !strcmp(type, "mistral") || !strcmp(type, "qwen2");
  snprintf(m->source, sizeof m->source, "Hugging Face config.json (model_type %s)", type);
  if (llama_like || !strcmp(type, "gpt_neox")) {
    TRY(px_json_int(&c, root, "num_hidden_layers", true, 1, 100000, &m->layers, err));
    TRY(px_json_int(&c, root, "hidden_size", true, 1, MAX_DIM, &m->hidden, err));
    TRY(px_json_int(&c, root, "num_attention_heads", true, 1, 65536, &m->heads, err));
    TRY(px_json_int(&c, root, "intermediate_size", true, 1, MAX_DIM, &m->ffn_hidden, err));
    TRY(px_json_int(&c, root, "vocab_size", true, 1, (int64_t)1 << 24, &m->vocab, err));
    TRY(px_json_int(&c, root, "max_position_embeddings", true, 1, (int64_t)1 << 24, &m->seq_len, err));
    TRY(px_json_num(&c, root, "rope_theta", false, 1.0, 1e12, &m->rope_theta, err));
    m->position = PX_POS_ROPE;
    if (llama_like) {
      m->norm = PX_NORM_RMSNORM;
      m->mlp = PX_MLP_SWIGLU;
      m->tied_embeddings = false;
      m->qkv_bias = !strcmp(type, "qwen2");
      TRY(px_json_int(&c, root, "num_key_value_heads", false, 1, 65536, &m->kv_heads, err));
      TRY(px_json_int(&c, root, "head_dim", false, 1, 65536, &m->head_dim, err));
      TRY(px_json_bool(&c, root, "attention_bias", false, &m->qkv_bias, err));
      TRY(px_json_bool(&c, root, "mlp_bias", false, &m->bias, err));
      TRY(px_json_num(&c, root, "rms_norm_eps", false, 0.0, 1.0, &m->norm_eps, err));
      TRY(px_json_num(&c, root, "attention_dropout", false, 0.0, 0.99, &m->dropout, err));
    } else {
      m->norm = PX_NORM_LAYERNORM;
      m->mlp = PX_MLP_GELU;
      m->bias = true;
      m->parallel_residual = true;
      TRY(px_json_bool(&c, root, "use_parallel_residual", false, &m->parallel_residual, err));
      TRY(px_json_num(&c, root, "layer_norm_eps", false, 0.0, 1.0, &m->norm_eps, err));
      TRY(px_json_num(&c, root, "hidden_dropout", false, 0.0, 0.99, &m->dropout, err));
    }
    TRY(px_json_bool(&c, root, "tie_word_embeddings", false, &m->tied_embeddings, err));
  } else if (!strcmp(type, "gpt2")) {
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
  } else {
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: field 'model_type': '%.64s' is not supported (llama, mistral, qwen2, gpt2, gpt_neox)",
                      file, type);
  }
#undef TRY
  if (m->bias) m->qkv_bias = true;
  return PX_OK;
}

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
  px_status st = px_json_load(path, &root, err);
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
  cJSON_AddStringToObject(o, "source", m->source);
  return o;
}

void px_model_count_params(const px_model *m, px_model_params *p) {
  memset(p, 0, sizeof *p);
  uint64_t h = (uint64_t)m->hidden, f = (uint64_t)m->ffn_hidden, v = (uint64_t)m->vocab;
  uint64_t q = (uint64_t)(m->heads * m->head_dim), kv = (uint64_t)(m->kv_heads * m->head_dim);
  p->embedding = v * h;
  p->position = m->position == PX_POS_LEARNED ? (uint64_t)m->max_positions * h : 0;
  p->attention = h * q + 2 * h * kv + q * h;
  if (m->qkv_bias) p->attention += q + 2 * kv;
  if (m->bias) p->attention += h;
  if (m->mlp == PX_MLP_GELU)
    p->mlp = 2 * h * f + (m->bias ? f + h : 0);
  else
    p->mlp = 3 * h * f + (m->bias ? 2 * f + h : 0);
  uint64_t norm = m->norm == PX_NORM_LAYERNORM ? 2 * h : h;
  p->norms = 2 * norm;
  p->per_layer = p->attention + p->mlp + p->norms;
  p->final_norm = norm;
  p->lm_head = m->tied_embeddings ? 0 : v * h;
  p->total = p->embedding + p->position + (uint64_t)m->layers * p->per_layer + p->final_norm + p->lm_head;
}

uint64_t px_model_param_count(const px_model *m) {
  px_model_params p;
  px_model_count_params(m, &p);
  return p.total;
}

void px_model_flops_per_token(const px_model *m, int64_t seq, px_model_flops *f) {
  if (seq <= 0) seq = m->seq_len;
  double h = (double)m->hidden, ff = (double)m->ffn_hidden, v = (double)m->vocab;
  double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
  double mlp_w = (m->mlp == PX_MLP_GELU ? 2.0 : 3.0) * h * ff;
  double layer_w = h * q + 2 * h * kv + q * h + mlp_w;
  double matmul_params = (double)m->layers * layer_w + v * h; /* the LM head GEMM runs even when tied */
  f->forward_dense_flops = 2.0 * matmul_params;
  f->forward_attention_flops = 4.0 * (double)seq * q * (double)m->layers;
  f->forward_flops = f->forward_dense_flops + f->forward_attention_flops;
  f->train_flops = 3.0 * f->forward_flops;
  f->train_flops_no_attention = 3.0 * f->forward_dense_flops;
}
