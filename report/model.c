/* Models: the show text and JSON, the preset list. */
#include "report/model.h"

#include "core/fmt.h"
#include "core/json.h"

static void param_row(FILE *out, const char *what, uint64_t n, uint64_t total) {
  char g[40];
  fprintf(out, "  %-34s %18s  %5.1f%%\n", what, px_fmt_grouped(n, g, sizeof g), 100.0 * (double)n / (double)total);
}

void px_report_model_text(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq,
                          FILE *out) {
  char a[64], b[64];
  fprintf(out, "model %s\n", m->name);
  if (m->source[0]) fprintf(out, "  source: %s\n", m->source);
  fprintf(out, "  layers %lld, hidden %lld, heads %lld (kv %lld, head_dim %lld), ffn %lld, vocab %lld, seq %lld\n",
          (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads,
          (long long)m->head_dim, (long long)m->ffn_hidden, (long long)m->vocab, (long long)seq);
  fprintf(out, "  %s, %s, %s positions, %s embeddings%s%s%s", px_norm_names[m->norm], px_mlp_names[m->mlp],
          px_pos_names[m->position], m->tied_embeddings ? "tied" : "untied", m->bias ? ", biases" : "",
          !m->bias && m->qkv_bias ? ", q/k/v biases" : "", m->parallel_residual ? ", parallel residual" : "");
  if (m->dropout > 0) fprintf(out, ", dropout %g", m->dropout);
  fprintf(out, "\n\nparameters %s (%s)\n", px_fmt_grouped(p->total, a, sizeof a),
          px_fmt_count((double)p->total, b, sizeof b));
  snprintf(a, sizeof a, "embedding (%lld x %lld)", (long long)m->vocab, (long long)m->hidden);
  param_row(out, a, p->embedding, p->total);
  if (p->position) param_row(out, "learned positions", p->position, p->total);
  snprintf(a, sizeof a, "%lld layers", (long long)m->layers);
  param_row(out, a, p->per_layer * (uint64_t)m->layers, p->total);
  param_row(out, "  per layer", p->per_layer, p->total);
  param_row(out, "    attention (q, k, v, o)", p->attention, p->total);
  param_row(out, m->mlp == PX_MLP_SWIGLU ? "    mlp (gate, up, down)" : "    mlp (up, down)", p->mlp, p->total);
  param_row(out, "    norms", p->norms, p->total);
  param_row(out, "final norm", p->final_norm, p->total);
  if (p->lm_head) param_row(out, "lm head", p->lm_head, p->total);
  fprintf(out, "\nFLOPs per token (training = 3 x forward, Megatron accounting)\n");
  fprintf(out, "  forward, dense (2 x matmul params)  %s\n", px_fmt_flops(f->forward_dense_flops, a, sizeof a));
  fprintf(out, "  forward, attention (seq %lld)       %s\n", (long long)seq,
          px_fmt_flops(f->forward_attention_flops, a, sizeof a));
  fprintf(out, "  training, without attention (6N)    %s\n", px_fmt_flops(f->train_flops_no_attention, a, sizeof a));
  fprintf(out, "  training, with attention            %s\n", px_fmt_flops(f->train_flops, a, sizeof a));
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
  }
  return o;
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
