/* Models: the show text and JSON, the preset list. */
#include "report/model.h"

#include "core/fmt.h"
#include "core/json.h"

static void param_row(FILE *out, const char *what, uint64_t n, uint64_t total) {
  char g[40];
  fprintf(out, "  %-38s %18s  %5.1f%%\n", what, px_fmt_grouped(n, g, sizeof g), 100.0 * (double)n / (double)total);
}

/* The FLOPs per token rows (what: the title's addition). */
static void flops_rows(const px_model_flops *f, int64_t seq, const char *what, FILE *out) {
  char a[64];
  fprintf(out, "\nFLOPs per token (training = 3 x forward, Megatron accounting%s)\n", what);
  fprintf(out, "  forward, dense (2 x matmul params)  %s\n", px_fmt_flops(f->forward_dense_flops, a, sizeof a));
  fprintf(out, "  forward, attention (seq %lld)       %s\n", (long long)seq,
          px_fmt_flops(f->forward_attention_flops, a, sizeof a));
  fprintf(out, "  training, without attention (6N)    %s\n", px_fmt_flops(f->train_flops_no_attention, a, sizeof a));
  fprintf(out, "  training, with attention            %s\n", px_fmt_flops(f->train_flops, a, sizeof a));
  if (f->forward_mtp_flops > 0) /* apart, as the parameters: no plan has them (report/plan.c says so) */
    fprintf(out, "  MTP modules' forward, not planned   %s\n", px_fmt_flops(f->forward_mtp_flops, a, sizeof a));
}

void px_report_seq_from_text(const px_model *m, int64_t seq, FILE *out) {
  if (!m->seq_from_positions || seq != m->seq_len) return;
  char above[64] = "";
  if (seq > PX_MODEL_HF_SEQ_MAX) snprintf(above, sizeof above, "; above %d a plan asks for one", PX_MODEL_HF_SEQ_MAX);
  fprintf(out, "  seq %lld is the Hugging Face config's max_position_embeddings (no sequence length was given%s)\n",
          (long long)seq, above);
}

/* The model's name, source and shape: the show text's first lines, dense or MoE (the second line ends
 * without its newline, for what follows to add). */
static void model_head(const px_model *m, int64_t seq, FILE *out) {
  fprintf(out, "model %s\n", m->name);
  if (m->source[0]) fprintf(out, "  source: %s\n", m->source);
  px_report_seq_from_text(m, seq, out);
  fprintf(out, "  layers %lld, hidden %lld, heads %lld (kv %lld, head_dim %lld), ffn %lld, vocab %lld, seq %lld\n",
          (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads,
          (long long)m->head_dim, (long long)m->ffn_hidden, (long long)m->vocab, (long long)seq);
  fprintf(out, "  %s, %s, %s positions, %s embeddings%s%s%s", px_norm_names[m->norm], px_mlp_names[m->mlp],
          px_pos_names[m->position], m->tied_embeddings ? "tied" : "untied", m->bias ? ", biases" : "",
          !m->bias && m->qkv_bias ? ", q/k/v biases" : "", m->parallel_residual ? ", parallel residual" : "");
  if (m->dropout > 0) fprintf(out, ", dropout %g", m->dropout);
  /* YaRN's factor on cos and sin: Megatron-Core's RoPE is unfused for it (compiler.md, Eager elementwise ops) */
  if (m->rope_yarn.factor > 0)
    fprintf(out, ", YaRN x%g from %lld positions", m->rope_yarn.factor, (long long)m->rope_yarn.original_positions);
  if (m->rope_llama3.factor > 0)
    fprintf(out, ", Llama 3.1 RoPE scaling x%g from %lld positions", m->rope_llama3.factor,
            (long long)m->rope_llama3.original_positions);
  if (m->rope_linear_factor > 0) fprintf(out, ", RoPE positions interpolated x%g", m->rope_linear_factor);
  if (m->position == PX_POS_ROPE && m->rope_fraction < 1.0)
    fprintf(out, ", RoPE on %lld of %lld dims a head", (long long)px_model_rope_dims(m), (long long)m->head_dim);
  if (m->rope_concentration != 1.0)
    fprintf(out, ", RoPE concentration %.4g (unfused in Megatron-Core)", m->rope_concentration);
}

/* The attention's variants, a line each: the sliding window's layers, sinks, q/k norms. */
static void attention_lines(const px_model *m, FILE *out) {
  char win[96];
  px_model_window_desc(m, win, sizeof win);
  if (m->sliding_window > 0) fprintf(out, "  sliding-window attention: %s\n", win);
  if (m->attention_sinks) fprintf(out, "  attention sinks (one logit per head)\n");
  if (m->qk_norm) fprintf(out, "  q/k norms: an RMSNorm of each head's queries and keys, before RoPE\n");
}

/* A mixture-of-experts model's show text: the shape with the experts, then the counts by part (dense and
 * MoE layers apart, the active and MTP counts) and the FLOPs. */

static void moe_text(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq, FILE *out) {
  char a[96], b[64];
  bool mla = m->kv_lora_rank > 0;
  int64_t dense = m->layers - p->moe_layers;
  model_head(m, seq, out);
  fprintf(out, "\n");
  fprintf(out, "  experts: %lld routed of width %lld, top %lld (%s router%s)", (long long)m->experts,
          (long long)m->moe_ffn_hidden, (long long)m->experts_per_token, px_router_names[m->router],
          m->norm_topk_prob ? ", weights renormalised" : "");
  if (m->shared_experts) fprintf(out, ", %lld shared", (long long)m->shared_experts);
  if (m->shared_ffn_hidden > 0) fprintf(out, " of width %lld, gated", (long long)m->shared_ffn_hidden);
  fprintf(out, "; %lld MoE layers", (long long)p->moe_layers);
  if (m->first_dense_layers) fprintf(out, " after %lld dense", (long long)m->first_dense_layers);
  if (m->moe_layer_freq > 1) fprintf(out, ", every %lld", (long long)m->moe_layer_freq);
  if (m->capacity_factor > 0)
    fprintf(out, "; capacity factor %g (drop by %s)", m->capacity_factor, px_drop_policy_names[m->token_drop_policy]);
  else
    fprintf(out, "; dropless");
  if (m->aux_loss_coef > 0) fprintf(out, ", aux loss %g", m->aux_loss_coef);
  fprintf(out, "\n");
  if (mla)
    fprintf(out, "  latent attention: q_lora_rank %lld, kv_lora_rank %lld, q/k head %lld + %lld RoPE, v head %lld\n",
            (long long)m->q_lora_rank, (long long)m->kv_lora_rank, (long long)m->qk_nope_head_dim,
            (long long)m->qk_rope_head_dim, (long long)m->v_head_dim);
  attention_lines(m, out);

  uint64_t t = p->total;
  fprintf(out, "\nparameters %s (%s)", px_fmt_grouped(t, a, sizeof a), px_fmt_count((double)t, b, sizeof b));
  fprintf(out, ", active %s (%s) per token\n", px_fmt_grouped(p->active, a, sizeof a),
          px_fmt_count((double)p->active, b, sizeof b));
  snprintf(a, sizeof a, "embedding (%lld x %lld)", (long long)m->vocab, (long long)m->hidden);
  param_row(out, a, p->embedding, t);
  if (p->position) param_row(out, "learned positions", p->position, t);
  const char *attn = mla ? "    attention (MLA: q, kv latents, o)"
                     : m->qk_norm ? "    attention (q, k, v, o, q/k norms)"
                                  : "    attention (q, k, v, o)";
  if (dense > 0) {
    snprintf(a, sizeof a, "%lld dense layers", (long long)dense);
    param_row(out, a, (uint64_t)dense * p->per_layer, t);
    param_row(out, "  per layer", p->per_layer, t);
    param_row(out, attn, p->attention, t);
    param_row(out, m->mlp == PX_MLP_SWIGLU ? "    mlp (gate, up, down)" : "    mlp (up, down)", p->mlp, t);
    param_row(out, "    norms", p->norms, t);
  }
  snprintf(a, sizeof a, "%lld MoE layers", (long long)p->moe_layers);
  param_row(out, a, (uint64_t)p->moe_layers * p->moe_layer, t);
  param_row(out, "  per layer", p->moe_layer, t);
  param_row(out, attn, p->attention, t);
  param_row(out, "    norms", p->norms, t);
  param_row(out, "    router", p->router, t);
  snprintf(a, sizeof a, "    %lld experts", (long long)m->experts);
  param_row(out, a, (uint64_t)m->experts * p->expert, t);
  param_row(out, "      each", p->expert, t);
  if (p->shared) param_row(out, "    shared experts", p->shared, t);
  param_row(out, "final norm", p->final_norm, t);
  if (p->lm_head) param_row(out, "lm head", p->lm_head, t);
  param_row(out, "active per token", p->active, t);
  param_row(out, "  without the embedding", p->active - p->embedding, t);
  if (p->mtp) {
    snprintf(a, sizeof a, "MTP modules (%lld, not in the total)", (long long)m->mtp_layers);
    param_row(out, a, p->mtp, t);
  }
  flops_rows(f, seq, ", activated experts only", out);
}

/* --json: the MoE counts next to the dense fields (only for a MoE model, so a dense one's is as it was). */
static cJSON *moe_json(cJSON *o, const px_model *m, const px_model_params *p) {
  if (!o || m->experts == 0) return o;
  cJSON *e = cJSON_AddObjectToObject(o, "moe");
  if (!e || !px_json_add_num(o, "params_active", (double)p->active) ||
      !px_json_add_num(e, "moe_layers", (double)p->moe_layers) ||
      !px_json_add_num(e, "dense_layers", (double)(m->layers - p->moe_layers)) ||
      !px_json_add_num(e, "expert", (double)p->expert) || !px_json_add_num(e, "router", (double)p->router) ||
      !px_json_add_num(e, "shared", (double)p->shared) || !px_json_add_num(e, "moe_layer", (double)p->moe_layer) ||
      !px_json_add_num(e, "active", (double)p->active) ||
      !px_json_add_num(e, "active_no_embedding", (double)(p->active - p->embedding)) ||
      !px_json_add_num(e, "mtp", (double)p->mtp)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

void px_report_model_text(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq,
                          FILE *out) {
  if (m->experts > 0) {
    moe_text(m, p, f, seq, out);
    return;
  }
  char a[64], b[64];
  model_head(m, seq, out);
  fprintf(out, "\n");
  attention_lines(m, out);
  fprintf(out, "\nparameters %s (%s)\n", px_fmt_grouped(p->total, a, sizeof a),
          px_fmt_count((double)p->total, b, sizeof b));
  snprintf(a, sizeof a, "embedding (%lld x %lld)", (long long)m->vocab, (long long)m->hidden);
  param_row(out, a, p->embedding, p->total);
  if (p->position) param_row(out, "learned positions", p->position, p->total);
  snprintf(a, sizeof a, "%lld layers", (long long)m->layers);
  param_row(out, a, p->per_layer * (uint64_t)m->layers, p->total);
  param_row(out, "  per layer", p->per_layer, p->total);
  param_row(out, m->qk_norm ? "    attention (q, k, v, o, q/k norms)" : "    attention (q, k, v, o)", p->attention,
            p->total);
  param_row(out, m->mlp == PX_MLP_SWIGLU ? "    mlp (gate, up, down)" : "    mlp (up, down)", p->mlp, p->total);
  param_row(out, "    norms", p->norms, p->total);
  param_row(out, "final norm", p->final_norm, p->total);
  if (p->lm_head) param_row(out, "lm head", p->lm_head, p->total);
  flops_rows(f, seq, "", out);
}

cJSON *px_report_model_json(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq) {
  cJSON *o = px_model_to_json(m);
  if (!o) return NULL;
  px_json_add_num(o, "params", (double)p->total);
  cJSON *b = cJSON_AddObjectToObject(o, "params_breakdown");
  if (b) {
    px_json_add_num(b, "embedding", (double)p->embedding);
    px_json_add_num(b, "position", (double)p->position);
    px_json_add_num(b, "per_layer", (double)p->per_layer);
    px_json_add_num(b, "attention_per_layer", (double)p->attention);
    px_json_add_num(b, "mlp_per_layer", (double)p->mlp);
    px_json_add_num(b, "norms_per_layer", (double)p->norms);
    px_json_add_num(b, "final_norm", (double)p->final_norm);
    px_json_add_num(b, "lm_head", (double)p->lm_head);
  }
  cJSON *fl = cJSON_AddObjectToObject(o, "flops_per_token");
  if (fl) {
    px_json_add_num(fl, "seq", (double)seq);
    px_json_add_num(fl, "forward_dense", f->forward_dense_flops);
    px_json_add_num(fl, "forward_attention", f->forward_attention_flops);
    px_json_add_num(fl, "forward", f->forward_flops);
    px_json_add_num(fl, "train", f->train_flops);
    px_json_add_num(fl, "train_no_attention", f->train_flops_no_attention);
    if (f->forward_mtp_flops > 0) px_json_add_num(fl, "forward_mtp", f->forward_mtp_flops);
  }
  return moe_json(o, m, p);
}

void px_report_model_list_header(FILE *out) {
  fputs("name                 params  layers  hidden heads/kv    vocab     seq  norm/mlp/position\n", out);
}

void px_report_model_list_row(const char *name, const px_model *m, const px_model_params *p, FILE *out) {
  char pc[32];
  fprintf(out, "%-16s %10s %7lld %7lld %5lld/%-4lld %7lld %7lld  %s/%s/%s\n", name,
          px_fmt_count((double)p->total, pc, sizeof pc), (long long)m->layers, (long long)m->hidden,
          (long long)m->heads, (long long)m->kv_heads, (long long)m->vocab, (long long)m->seq_len,
          px_norm_names[m->norm], px_mlp_names[m->mlp], px_pos_names[m->position]);
}

cJSON *px_report_model_list_json(const char *name, const px_model *m, const px_model_params *p) {
  cJSON *o = px_model_to_json(m);
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "preset", name);
  px_json_add_num(o, "params", (double)p->total);
  return o;
}
