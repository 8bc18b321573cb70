/* parallax model show (a model's parameters, FLOPs per token and per-layer
 * breakdown) and parallax topology show (a cluster's figures at a size). */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "report/cluster.h"
#include "report/model.h"

/* parallax topology show NAME|FILE [--gpus N | --nodes N] */
int px_cmd_topology(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax topology", PX_OPT_CLUSTER | PX_OPT_TOPO, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax topology show NAME|FILE [--gpus N | --nodes N] [--set FIELD=VALUE] [--sources] [--json]\n\n");
    px_args_print_help(PX_OPT_CLUSTER | PX_OPT_TOPO);
    return 0;
  }
  const char *name = a.npos == 2 && !strcmp(a.pos[0], "show") ? a.pos[1] : NULL;
  if (!name) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax topology show NAME|FILE"), &err);
  px_cluster c;
  if ((st = px_cluster_load(name, &c, &err)) || (st = px_args_cluster_finish(&a, &c, a.gpus, &err)))
    return px_cli_fail(st, &err);
  if (a.sources && !a.json) {
    px_report_cluster_sources(&c, stdout);
    return 0;
  }
  if (!a.json) {
    px_report_cluster_text(&c, stdout);
    return 0;
  }
  st = px_json_print_free(px_cluster_to_json(&c), &err);
  return st ? px_cli_fail(st, &err) : 0;
}

/* A mixture-of-experts model's show text: the shape with the experts, then the counts by part (dense and
 * MoE layers apart, the active and MTP counts) and the FLOPs. report/model.c's text lists layers x one
 * layer, which a MoE model's layers are not; this belongs there when that file moves. */
static void moe_row(FILE *out, const char *what, uint64_t n, uint64_t total) {
  char g[40];
  fprintf(out, "  %-38s %18s  %5.1f%%\n", what, px_fmt_grouped(n, g, sizeof g), 100.0 * (double)n / (double)total);
}

static void moe_text(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq, FILE *out) {
  char a[96], b[64];
  bool mla = m->kv_lora_rank > 0;
  int64_t dense = m->layers - p->moe_layers;
  fprintf(out, "model %s\n", m->name);
  if (m->source[0]) fprintf(out, "  source: %s\n", m->source);
  fprintf(out, "  layers %lld, hidden %lld, heads %lld (kv %lld, head_dim %lld), ffn %lld, vocab %lld, seq %lld\n",
          (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads,
          (long long)m->head_dim, (long long)m->ffn_hidden, (long long)m->vocab, (long long)seq);
  fprintf(out, "  %s, %s, %s positions, %s embeddings%s%s\n", px_norm_names[m->norm], px_mlp_names[m->mlp],
          px_pos_names[m->position], m->tied_embeddings ? "tied" : "untied", m->bias ? ", biases" : "",
          !m->bias && m->qkv_bias ? ", q/k/v biases" : "");
  fprintf(out, "  experts: %lld routed of width %lld, top %lld (%s router%s)", (long long)m->experts,
          (long long)m->moe_ffn_hidden, (long long)m->experts_per_token, px_router_names[m->router],
          m->norm_topk_prob ? ", weights renormalised" : "");
  if (m->shared_experts) fprintf(out, ", %lld shared", (long long)m->shared_experts);
  if (m->shared_ffn_hidden > 0) fprintf(out, " of width %lld, gated", (long long)m->shared_ffn_hidden);
  fprintf(out, "; %lld MoE layers", (long long)p->moe_layers);
  if (m->first_dense_layers) fprintf(out, " after %lld dense", (long long)m->first_dense_layers);
  if (m->moe_layer_freq > 1) fprintf(out, ", every %lld", (long long)m->moe_layer_freq);
  if (m->capacity_factor > 0)
    fprintf(out, "; capacity factor %g", m->capacity_factor);
  else
    fprintf(out, "; dropless");
  if (m->aux_loss_coef > 0) fprintf(out, ", aux loss %g", m->aux_loss_coef);
  fprintf(out, "\n");
  if (mla)
    fprintf(out, "  latent attention: q_lora_rank %lld, kv_lora_rank %lld, q/k head %lld + %lld RoPE, v head %lld\n",
            (long long)m->q_lora_rank, (long long)m->kv_lora_rank, (long long)m->qk_nope_head_dim,
            (long long)m->qk_rope_head_dim, (long long)m->v_head_dim);
  if (m->sliding_window > 0)
    fprintf(out, "  sliding window %lld on the even layers\n", (long long)m->sliding_window);
  if (m->attention_sinks) fprintf(out, "  attention sinks (one logit per head)\n");

  uint64_t t = p->total;
  fprintf(out, "\nparameters %s (%s)", px_fmt_grouped(t, a, sizeof a), px_fmt_count((double)t, b, sizeof b));
  fprintf(out, ", active %s (%s) per token\n", px_fmt_grouped(p->active, a, sizeof a),
          px_fmt_count((double)p->active, b, sizeof b));
  snprintf(a, sizeof a, "embedding (%lld x %lld)", (long long)m->vocab, (long long)m->hidden);
  moe_row(out, a, p->embedding, t);
  if (p->position) moe_row(out, "learned positions", p->position, t);
  const char *attn = mla ? "    attention (MLA: q, kv latents, o)" : "    attention (q, k, v, o)";
  if (dense > 0) {
    snprintf(a, sizeof a, "%lld dense layers", (long long)dense);
    moe_row(out, a, (uint64_t)dense * p->per_layer, t);
    moe_row(out, "  per layer", p->per_layer, t);
    moe_row(out, attn, p->attention, t);
    moe_row(out, m->mlp == PX_MLP_SWIGLU ? "    mlp (gate, up, down)" : "    mlp (up, down)", p->mlp, t);
    moe_row(out, "    norms", p->norms, t);
  }
  snprintf(a, sizeof a, "%lld MoE layers", (long long)p->moe_layers);
  moe_row(out, a, (uint64_t)p->moe_layers * p->moe_layer, t);
  moe_row(out, "  per layer", p->moe_layer, t);
  moe_row(out, attn, p->attention, t);
  moe_row(out, "    norms", p->norms, t);
  moe_row(out, "    router", p->router, t);
  snprintf(a, sizeof a, "    %lld experts", (long long)m->experts);
  moe_row(out, a, (uint64_t)m->experts * p->expert, t);
  moe_row(out, "      each", p->expert, t);
  if (p->shared) moe_row(out, "    shared experts", p->shared, t);
  moe_row(out, "final norm", p->final_norm, t);
  if (p->lm_head) moe_row(out, "lm head", p->lm_head, t);
  moe_row(out, "active per token", p->active, t);
  moe_row(out, "  without the embedding", p->active - p->embedding, t);
  if (p->mtp) {
    snprintf(a, sizeof a, "MTP modules (%lld, not in the total)", (long long)m->mtp_layers);
    moe_row(out, a, p->mtp, t);
  }
  fprintf(out, "\nFLOPs per token (training = 3 x forward, Megatron accounting, activated experts only)\n");
  fprintf(out, "  forward, dense (2 x matmul params)  %s\n", px_fmt_flops(f->forward_dense_flops, a, sizeof a));
  fprintf(out, "  forward, attention (seq %lld)       %s\n", (long long)seq,
          px_fmt_flops(f->forward_attention_flops, a, sizeof a));
  fprintf(out, "  training, without attention (6N)    %s\n", px_fmt_flops(f->train_flops_no_attention, a, sizeof a));
  fprintf(out, "  training, with attention            %s\n", px_fmt_flops(f->train_flops, a, sizeof a));
}

/* --json: the MoE counts next to report/model.c's fields (only for a MoE model, so a dense one's is as it was). */
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

int px_cmd_model(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax model", PX_OPT_MODEL, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax model show NAME|FILE [--seq N] [--json]\n\n"
           "Shows a model preset, our JSON or a Hugging Face config.json: exact parameters,\n"
           "per-layer breakdown and FLOPs per token; for a mixture of experts, the dense and\n"
           "MoE layers apart, the active parameters per token and the MTP modules.\n\n");
    px_args_print_help(PX_OPT_MODEL);
    return 0;
  }
  if (a.npos < 1 || strcmp(a.pos[0], "show"))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax model show NAME|FILE"), &err);
  const char *name = a.npos >= 2 ? a.pos[1] : a.model;
  if (!name || a.npos > 2)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax model show NAME|FILE"), &err);
  px_model m;
  if ((st = px_model_load(name, &m, &err))) return px_cli_fail(st, &err);
  int64_t seq = a.par.seq > 0 ? a.par.seq : m.seq_len;
  px_model_params p;
  px_model_flops f;
  px_model_count_params(&m, &p);
  px_model_flops_per_token(&m, seq, &f);
  if (!a.json) {
    if (m.experts > 0)
      moe_text(&m, &p, &f, seq, stdout);
    else
      px_report_model_text(&m, &p, &f, seq, stdout);
    return 0;
  }
  st = px_json_print_free(moe_json(px_report_model_json(&m, &p, &f, seq), &m, &p), &err);
  return st ? px_cli_fail(st, &err) : 0;
}
