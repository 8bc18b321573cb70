/* parallax model show: a model's parameters, FLOPs per token and per-layer breakdown. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"

static void print_row(const char *what, uint64_t n, uint64_t total) {
  char g[40];
  printf("  %-34s %18s  %5.1f%%\n", what, px_fmt_grouped(n, g, sizeof g), 100.0 * (double)n / (double)total);
}

static void print_model(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq) {
  char a[64], b[64];
  printf("model %s\n", m->name);
  if (m->source[0]) printf("  source: %s\n", m->source);
  printf("  layers %lld, hidden %lld, heads %lld (kv %lld, head_dim %lld), ffn %lld, vocab %lld, seq %lld\n",
         (long long)m->layers, (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads,
         (long long)m->head_dim, (long long)m->ffn_hidden, (long long)m->vocab, (long long)seq);
  printf("  %s, %s, %s positions, %s embeddings%s%s%s", px_norm_names[m->norm], px_mlp_names[m->mlp],
         px_pos_names[m->position], m->tied_embeddings ? "tied" : "untied", m->bias ? ", biases" : "",
         !m->bias && m->qkv_bias ? ", q/k/v biases" : "", m->parallel_residual ? ", parallel residual" : "");
  if (m->dropout > 0) printf(", dropout %g", m->dropout);
  printf("\n\nparameters %s (%s)\n", px_fmt_grouped(p->total, a, sizeof a), px_fmt_count((double)p->total, b, sizeof b));
  snprintf(a, sizeof a, "embedding (%lld x %lld)", (long long)m->vocab, (long long)m->hidden);
  print_row(a, p->embedding, p->total);
  if (p->position) print_row("learned positions", p->position, p->total);
  snprintf(a, sizeof a, "%lld layers", (long long)m->layers);
  print_row(a, p->per_layer * (uint64_t)m->layers, p->total);
  print_row("  per layer", p->per_layer, p->total);
  print_row("    attention (q, k, v, o)", p->attention, p->total);
  print_row(m->mlp == PX_MLP_SWIGLU ? "    mlp (gate, up, down)" : "    mlp (up, down)", p->mlp, p->total);
  print_row("    norms", p->norms, p->total);
  print_row("final norm", p->final_norm, p->total);
  if (p->lm_head) print_row("lm head", p->lm_head, p->total);
  printf("\nFLOPs per token (training = 3 x forward, Megatron accounting)\n");
  printf("  forward, dense (2 x matmul params)  %s\n", px_fmt_flops(f->forward_dense_flops, a, sizeof a));
  printf("  forward, attention (seq %lld)       %s\n", (long long)seq, px_fmt_flops(f->forward_attention_flops, a, sizeof a));
  printf("  training, without attention (6N)    %s\n", px_fmt_flops(f->train_flops_no_attention, a, sizeof a));
  printf("  training, with attention            %s\n", px_fmt_flops(f->train_flops, a, sizeof a));
}

static cJSON *model_json(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq) {
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

static void print_cluster(const px_cluster *c) {
  char a[32];
  const px_gpu *g = &c->gpu;
  printf("cluster %s: %lld GPUs (%lld node%s x %lld)\n", c->name, (long long)c->gpus, (long long)c->nodes, c->nodes == 1 ? "" : "s",
         (long long)c->gpus_per_node);
  if (c->source[0]) printf("  source: %s\n", c->source);
  printf("  gpu %s: %s HBM at %.0f GB/s, %lld SMs, peak TFLOP/s:", g->name,
         px_fmt_bytes((double)g->hbm_bytes, a, sizeof a), g->hbm_bytes_per_s / 1e9, (long long)g->sm_count);
  for (int t = 0; t < PX_DTYPE_COUNT; t++)
    if (g->peak_flops[t] > 0) printf(" %s %.1f", px_dtype_names[t], g->peak_flops[t] / 1e12);
  printf("\n  gemm efficiency: max %.2f, tiles %lldx%lld, k_half %.0f%s\n", g->gemm_max_efficiency,
         (long long)g->gemm_tile_m, (long long)g->gemm_tile_n, g->gemm_k_half,
         g->gemm_table_len ? " (measured table given)" : "");
  printf("  intra-node: %.0f GB/s per GPU per direction, %.1f us, efficiency %.2f\n", c->intra_bytes_per_s / 1e9,
         c->intra_latency_s * 1e6, c->intra_efficiency);
  printf("  inter-node: %lld NICs x %.0f Gb/s, %.1f us, efficiency %.2f, %s, oversubscription %.1f:1\n",
         (long long)c->nics_per_node, c->nic_bytes_per_s * 8 / 1e9, c->inter_latency_s * 1e6, c->inter_efficiency,
         px_net_kind_names[c->net_kind], c->oversubscription);
  printf("  host: %s memory, storage %.1f GB/s per node\n", px_fmt_bytes((double)c->host_memory_bytes, a, sizeof a),
         c->storage_bytes_per_s / 1e9);
}

/* parallax topology show NAME|FILE [--gpus N | --nodes N] */
int px_cmd_topology(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax topology", PX_OPT_CLUSTER, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax topology show NAME|FILE [--gpus N | --nodes N] [--json]\n\n");
    px_args_print_help(PX_OPT_CLUSTER);
    return 0;
  }
  const char *name = a.npos == 2 && !strcmp(a.pos[0], "show") ? a.pos[1] : NULL;
  if (!name) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax topology show NAME|FILE"), &err);
  px_cluster c;
  if ((st = px_cluster_load(name, &c, &err)) || (st = px_cluster_set_size(&c, a.gpus, a.nodes, &err)))
    return px_cli_fail(st, &err);
  if (!a.json) {
    print_cluster(&c);
    return 0;
  }
  cJSON *o = px_cluster_to_json(&c);
  if (!o) return px_cli_fail(px_err_set(&err, PX_ERR_RUNTIME, "out of memory"), &err);
  st = px_json_print(o, &err);
  cJSON_Delete(o);
  return st ? px_cli_fail(st, &err) : 0;
}

int px_cmd_model(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax model", PX_OPT_MODEL, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax model show NAME|FILE [--seq N] [--json]\n\n"
           "Shows a model preset, our JSON or a Hugging Face config.json: exact parameters,\n"
           "per-layer breakdown and FLOPs per token.\n\n");
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
    print_model(&m, &p, &f, seq);
    return 0;
  }
  cJSON *o = model_json(&m, &p, &f, seq);
  if (!o) return px_cli_fail(px_err_set(&err, PX_ERR_RUNTIME, "out of memory"), &err);
  st = px_json_print(o, &err);
  cJSON_Delete(o);
  return st ? px_cli_fail(st, &err) : 0;
}
