/* Model specs: exact parameter counts against published ones, Megatron's
 * formulas, Hugging Face config loading, and refusal of inconsistent shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "plan/model.h"
#include "plan/planfile.h"
#include "tests/testutil.h"

/* Every row of tests/data/param_counts.csv. */
static void test_published_counts(void) {
  FILE *fp = fopen(px_test_path("tests/data/param_counts.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[1024];
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char name[256];
    unsigned long long want;
    if (sscanf(line, "%255[^,],%llu", name, &want) != 2) continue;
    px_model m;
    px_err err = {0};
    const char *arg = strchr(name, '/') ? px_test_path(name) : name;
    px_status st = px_model_load(arg, &m, &err);
    if (st) fprintf(stderr, "\n  %s: %s\n", name, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    uint64_t got = px_model_param_count(&m);
    if (got != want) fprintf(stderr, "\n  %s: %llu parameters, published %llu\n", name, (unsigned long long)got, want);
    CU_ASSERT_EQUAL(got, want);
    rows++;
  }
  fclose(fp);
  CU_ASSERT(rows >= 15);
}

/* Megatron's closed form P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)) for GPT-3 gives 174.6B. */
static void test_gpt3_megatron_formula(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt3-175b", &m, &err), PX_OK);
  double l = 96, h = 12288, V = 51200, s = 2048;
  double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  PX_ASSERT_REL(formula, 174.6e9, 0.001);
  PX_ASSERT_REL((double)px_model_param_count(&m), formula, 0.002);
  /* With Megatron's padded vocabulary the count is exact but for the final
   * layernorm (2h), which the closed form leaves out. */
  m.vocab = 51200;
  PX_ASSERT_EQ_U64(px_model_param_count(&m), (uint64_t)formula + 2 * 12288);
}

/* Model FLOPs per token x tokens = 72 B s l h^2 (1 + s/(6h) + V/(12lh)), exactly, for GPT models. */
static void test_flops_megatron(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt3-175b", &m, &err), PX_OK);
  m.vocab = 51200;
  double l = 96, h = 12288, V = 51200, s = 2048, B = 1536;
  px_model_flops f;
  px_model_flops_per_token(&m, 2048, &f);
  double per_iter = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  PX_ASSERT_REL(f.train_flops * B * s, per_iter, 1e-12);
  /* Without the attention term: the 6N rule over matmul parameters. */
  double no_attn = 72 * B * s * l * h * h * (1 + V / (12 * l * h));
  PX_ASSERT_REL(f.train_flops_no_attention * B * s, no_attn, 1e-12);
  PX_ASSERT_REL(f.train_flops, 3 * f.forward_flops, 1e-15);
  /* Attention term: 4 s (heads x head_dim) per layer per token. */
  PX_ASSERT_REL(f.forward_attention_flops, 4.0 * s * h * l, 1e-15);
  /* Llama 3 8B, GQA: dense 2 x (matmul params) with K, V of 1024 columns. */
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_model_flops_per_token(&m, 8192, &f);
  double layer = 4096.0 * 4096 * 2 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336;
  PX_ASSERT_REL(f.forward_dense_flops, 2 * (32 * layer + 128256.0 * 4096), 1e-15);
}

static void test_hf_defaults(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/gpt2-config.json"), &m, &err), PX_OK);
  CU_ASSERT_EQUAL(m.ffn_hidden, 4 * 768); /* n_inner absent */
  CU_ASSERT(m.tied_embeddings);
  CU_ASSERT_EQUAL(m.position, PX_POS_LEARNED);
  CU_ASSERT_EQUAL(m.max_positions, 1024);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen2-0.5b-config.json"), &m, &err), PX_OK);
  CU_ASSERT(m.qkv_bias);
  CU_ASSERT(!m.bias);
  CU_ASSERT_EQUAL(m.kv_heads, 2);
  CU_ASSERT_EQUAL(m.head_dim, 64);
  CU_ASSERT_EQUAL(m.norm, PX_NORM_RMSNORM);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/pythia-160m-config.json"), &m, &err), PX_OK);
  CU_ASSERT(m.parallel_residual);
  CU_ASSERT(!m.tied_embeddings);
  CU_ASSERT_EQUAL(m.position, PX_POS_ROPE);
  /* its rotary_pct 0.25 of head_dim 64 and rotary_emb_base 10000 */
  CU_ASSERT_DOUBLE_EQUAL(m.rope_fraction, 0.25, 0);
  CU_ASSERT_EQUAL(px_model_rope_dims(&m), 16);
  CU_ASSERT_DOUBLE_EQUAL(m.rope_theta, 10000.0, 0);
}

/* Parses text as a model; returns the status and leaves the message in err. */
static px_status parse_model(const char *text, px_err *err) {
  cJSON *root = NULL;
  px_status st = px_json_parse(text, strlen(text), "test.json", &root, err);
  if (st) return st;
  px_model m;
  st = px_model_from_json(root, "test.json", &m, err);
  cJSON_Delete(root);
  return st;
}

static void expect_refused(const char *text, const char *needle) {
  px_err err = {0};
  px_status st = parse_model(text, &err);
  if (st != PX_ERR_INPUT || !strstr(err.msg, needle))
    fprintf(stderr, "\n  input %s\n  got status %d, message '%s', wanted '%s'\n", text, st, err.msg, needle);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
}

#define BASE "\"layers\": 2, \"hidden\": 64, \"ffn_hidden\": 128, \"vocab\": 100, \"seq_len\": 16"
static void test_refusals(void) {
  expect_refused("{" BASE ", \"heads\": 3}", "do not divide hidden");
  expect_refused("{" BASE ", \"heads\": 4, \"kv_heads\": 3}", "kv_heads");
  expect_refused("{" BASE ", \"heads\": \"four\"}", "field 'heads': expected an integer, got a string");
  expect_refused("{" BASE ", \"heads\": -4}", "field 'heads': -4 is out of range");
  expect_refused("{" BASE ", \"heads\": 1e300}", "out of range");
  expect_refused("{" BASE ", \"heads\": 9223372036854775807}", "out of range");
  expect_refused("{" BASE ", \"heads\": 2.5}", "expected an integer");
  expect_refused("{" BASE ", \"heads\": 4, \"norm\": \"batchnorm\"}", "is not one of layernorm|rmsnorm");
  expect_refused("{\"layers\": 2, \"heads\": 4}", "field 'hidden' is missing");
  expect_refused("{\"model_type\": \"t5\", \"d_model\": 512}", "'t5' is not supported");
  expect_refused("[1, 2, 3]", "expected a JSON object");
  expect_refused("{\"layers\": ", "invalid JSON");
  expect_refused("   ", "empty");
  expect_refused("{" BASE ", \"heads\": 4, \"position\": \"learned\", \"max_positions\": 8}", "learned positions");
  px_err err = {0};
  CU_ASSERT_EQUAL(parse_model("{" BASE ", \"heads\": 4}", &err), PX_OK);
}

/* A model file up to its limit loads; a byte more is refused before it is read, naming the file
 * and the limit (a plan file's limit holds a model and a cluster file's). */
static void test_file_limit(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", px_test_tmpdir("model_limit"));
  const char *path = px_test_tmp("big.json");
  const char *body = "{" BASE ", \"heads\": 4}";
  size_t n = PX_MODEL_FILE_MAX_BYTES;
  char *text = malloc(n + 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  memset(text, ' ', n + 1);
  memcpy(text, body, strlen(body));
  px_err err = {0};
  px_model m;
  for (size_t size = n; size <= n + 1; size++) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(text, 1, size, f), size);
    fclose(f);
    px_status st = px_model_load_file(path, &m, &err);
    CU_ASSERT_EQUAL(st, size == n ? PX_OK : PX_ERR_INPUT);
    if (size > n) {
      const char *want = "big.json: 1,048,577 bytes, more than a model file may have (1.00 MiB)";
      if (!strstr(err.msg, want)) fprintf(stderr, "\n  %s\n", err.msg);
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    }
  }
  free(text);
  CU_ASSERT(PX_PLAN_FILE_MAX_BYTES > PX_MODEL_FILE_MAX_BYTES + PX_CLUSTER_FILE_MAX_BYTES);
  px_test_rm_tree(dir);
}

static void test_roundtrip(void) {
  px_model a, b;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-405b", &a, &err), PX_OK);
  cJSON *j = px_model_to_json(&a);
  CU_ASSERT_EQUAL_FATAL(px_model_from_json(j, "roundtrip", &b, &err), PX_OK);
  cJSON_Delete(j);
  CU_ASSERT_EQUAL(px_model_param_count(&a), px_model_param_count(&b));
  CU_ASSERT_EQUAL(a.kv_heads, b.kv_heads);
  CU_ASSERT_STRING_EQUAL(a.name, b.name);
}

/* ---- mixture of experts ---- */

/* One 128x128-block float32 scale per block of an FP8 weight (out x in): DeepSeek-V3's weight_scale_inv. */
static uint64_t fp8_blocks(int64_t out, int64_t in) {
  return (uint64_t)((out + 127) / 128) * (uint64_t)((in + 127) / 128);
}

/* DeepSeek-V3's FP8 safetensors beyond our count: the FP8 weights' block scales (every attention and
 * expert/MLP projection of the main and MTP layers; not the router, embedding, head, eh_proj or norms, which
 * are bf16) and the MTP layers' stored copies of the embedding and the head (README_WEIGHTS.md). */
static uint64_t deepseek_checkpoint_extra(const px_model *m, const px_model_params *p) {
  int64_t h = m->hidden, H = m->heads, ql = m->q_lora_rank, kl = m->kv_lora_rank, r = m->qk_rope_head_dim;
  uint64_t attn = fp8_blocks(ql, h) + fp8_blocks(H * m->head_dim, ql) + fp8_blocks(kl + r, h) +
                  fp8_blocks(H * (m->qk_nope_head_dim + m->v_head_dim), kl) + fp8_blocks(h, H * m->v_head_dim);
  uint64_t dense = 2 * fp8_blocks(m->ffn_hidden, h) + fp8_blocks(h, m->ffn_hidden);
  uint64_t expert = 2 * fp8_blocks(m->moe_ffn_hidden, h) + fp8_blocks(h, m->moe_ffn_hidden);
  uint64_t scales = 0;
  for (int64_t l = 0; l < m->layers + m->mtp_layers; l++)
    scales += attn + (px_model_layer_is_moe(m, l) ? (uint64_t)(m->experts + m->shared_experts) * expert : dense);
  return scales + (uint64_t)m->mtp_layers * (p->embedding + p->lm_head);
}

/* The quantity a row of moe_params.csv names. */
static bool moe_quantity(const char *q, const px_model *m, const px_model_params *p, uint64_t *out) {
  if (!strcmp(q, "total")) *out = p->total;
  else if (!strcmp(q, "active")) *out = p->active;
  else if (!strcmp(q, "active_no_embedding")) *out = p->active - p->embedding;
  else if (!strcmp(q, "total_no_embedding")) *out = p->total - p->embedding - p->lm_head;
  else if (!strcmp(q, "mtp")) *out = p->mtp;
  else if (!strcmp(q, "checkpoint")) *out = p->total + p->mtp + deepseek_checkpoint_extra(m, p);
  else return false;
  return true;
}

/* Every row of tests/data/moe_params.csv: our exact count, and the published figure within its rounding
 * (round: within half a unit; floor: the figure was truncated, [published, published + unit)). */
static void test_moe_published(void) {
  FILE *fp = fopen(px_test_path("tests/data/moe_params.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[1024];
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    char name[256], q[64], rule[16];
    unsigned long long exact;
    double published, unit;
    if (line[0] == '#' || sscanf(line, "%255[^,],%63[^,],%llu,%lf,%lf,%15[^,]", name, q, &exact, &published, &unit,
                                 rule) != 6)
      continue;
    px_model m;
    px_err err = {0};
    px_status st = px_model_load(strchr(name, '/') ? px_test_path(name) : name, &m, &err);
    if (st) fprintf(stderr, "\n  %s: %s\n", name, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    px_model_params p;
    px_model_count_params(&m, &p);
    uint64_t got = 0;
    CU_ASSERT_FATAL(moe_quantity(q, &m, &p, &got));
    bool floor_rule = !strcmp(rule, "floor");
    double lo = floor_rule ? published : published - unit / 2, hi = published + (floor_rule ? unit : unit / 2);
    bool in = (double)got >= lo && (floor_rule ? (double)got < hi : (double)got <= hi);
    if (getenv("PX_TEST_VERBOSE") || got != exact || (published > 0 && !in))
      fprintf(stderr, "\n  %-44s %-20s %18llu  published %.6g (%s %g)%s", name, q, (unsigned long long)got, published,
              rule, unit, got != exact ? "  != exact column" : "");
    PX_ASSERT_EQ_U64(got, exact);
    if (published > 0) CU_ASSERT(in);
    rows++;
  }
  fclose(fp);
  CU_ASSERT(rows >= 20);
}

/* The parts, by hand: Mixtral 8x7B and DeepSeek-V3's MLA, router bias, shared expert, dense layers and MTP. */
static void test_moe_parts(void) {
  px_model m;
  px_model_params p;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  px_model_count_params(&m, &p);
  CU_ASSERT_EQUAL(p.moe_layers, 32);
  PX_ASSERT_EQ_U64(p.expert, 3ull * 4096 * 14336);
  PX_ASSERT_EQ_U64(p.router, 8ull * 4096); /* softmax router: no bias */
  PX_ASSERT_EQ_U64(p.shared, 0);
  PX_ASSERT_EQ_U64(p.moe_layer, 2ull * 4096 * 4096 + 2ull * 4096 * 1024 + 2 * 4096 + 8 * 4096 + 8 * p.expert);
  PX_ASSERT_EQ_U64(p.total, 2ull * 32000 * 4096 + 4096 + 32 * p.moe_layer);
  PX_ASSERT_EQ_U64(p.active, p.total - 32ull * 6 * p.expert);
  PX_ASSERT_EQ_U64(p.mtp, 0);

  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  px_model_count_params(&m, &p);
  uint64_t h = 7168;
  uint64_t mla = h * 1536 + 1536 + 1536ull * 128 * 192 /* q_a, q_a_layernorm, q_b */
                 + h * (512 + 64) + 512 + 512ull * 128 * (128 + 128) /* kv_a_proj_with_mqa, kv_a_layernorm, kv_b */
                 + 128ull * 128 * h;                                  /* o_proj */
  PX_ASSERT_EQ_U64(p.attention, mla);
  PX_ASSERT_EQ_U64(p.router, 256 * h + 256); /* sigmoid router: e_score_correction_bias */
  PX_ASSERT_EQ_U64(p.expert, 3 * h * 2048);
  PX_ASSERT_EQ_U64(p.shared, 3 * h * 2048);
  CU_ASSERT_EQUAL(p.moe_layers, 58);
  PX_ASSERT_EQ_U64(p.per_layer, mla + 2 * h + 3 * h * 18432); /* the 3 dense layers */
  PX_ASSERT_EQ_U64(p.mtp, 3 * h + 2 * h * h + p.moe_layer);   /* enorm, hnorm, shared_head.norm, eh_proj, layer */
  PX_ASSERT_EQ_U64(p.active, p.total - 58ull * 248 * p.expert);

  /* Qwen2-MoE: one shared expert of its own width with a sigmoid gate of hidden weights, Q/K/V biases */
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen1.5-moe-a2.7b-config.json"), &m, &err), PX_OK);
  px_model_count_params(&m, &p);
  PX_ASSERT_EQ_U64(p.shared, 3ull * 2048 * 5632 + 2048);
  PX_ASSERT_EQ_U64(p.attention, 4ull * 2048 * 2048 + 3 * 2048);
  CU_ASSERT(!m.norm_topk_prob);

  /* gpt-oss: biases on q, k, v, o, the experts and the router; one sink logit per head */
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt-oss-120b", &m, &err), PX_OK);
  px_model_count_params(&m, &p);
  PX_ASSERT_EQ_U64(p.attention, 2880ull * 4096 * 2 + 2880ull * 512 * 2 + 4096 + 2 * 512 + 2880 + 64);
  PX_ASSERT_EQ_U64(p.expert, 3ull * 2880 * 2880 + 2 * 2880 + 2880);
  PX_ASSERT_EQ_U64(p.router, 128ull * 2880 + 128);
}

/* Each Hugging Face sample imports as the preset (shape, MoE and MLA fields; the presets train on their
 * pre-training sequence length where the config gives the longest context). */
static void test_moe_hf_matches_presets(void) {
  static const char *const pairs[][2] = {
      {"tests/data/hf/mixtral-8x7b-config.json", "mixtral-8x7b"},
      {"tests/data/hf/qwen3-30b-a3b-config.json", "qwen3-30b-a3b"},
      {"tests/data/hf/deepseek-v3-config.json", "deepseek-v3"},
      {"tests/data/hf/gpt-oss-120b-config.json", "gpt-oss-120b"},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    px_model a, b;
    px_err err = {0};
    px_status st = px_model_load(px_test_path(pairs[i][0]), &a, &err);
    if (st) fprintf(stderr, "\n  %s: %s\n", pairs[i][0], err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_model_load(pairs[i][1], &b, &err), PX_OK);
    memcpy(a.name, b.name, sizeof a.name);
    memcpy(a.source, b.source, sizeof a.source);
    a.seq_len = b.seq_len;
    a.max_positions = b.max_positions;
    cJSON *ja = px_model_to_json(&a), *jb = px_model_to_json(&b);
    char *sa = cJSON_PrintUnformatted(ja), *sb = cJSON_PrintUnformatted(jb);
    if (strcmp(sa, sb)) fprintf(stderr, "\n  %s\n  %s\n  %s\n", pairs[i][0], sa, sb);
    CU_ASSERT_STRING_EQUAL(sa, sb);
    cJSON_free(sa);
    cJSON_free(sb);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    CU_ASSERT_EQUAL(px_model_param_count(&a), px_model_param_count(&b));
  }
}

/* Activated experts only: 2 x (attention + router + k experts + shared) per MoE layer; MLA's q.k over
 * nope + rope and attention x V over v_head_dim; gpt-oss's sliding layers attend to 128 keys. */
static void test_moe_flops(void) {
  px_model m;
  px_model_flops f;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  px_model_flops_per_token(&m, 4096, &f);
  double layer = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 8 * 4096.0 + 2 * 3 * 4096.0 * 14336;
  PX_ASSERT_REL(f.forward_dense_flops, 2 * (32 * layer + 32000.0 * 4096), 1e-15);
  PX_ASSERT_REL(f.forward_attention_flops, 4.0 * 4096 * 4096 * 32, 1e-15);

  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  px_model_flops_per_token(&m, 4096, &f);
  px_model_params p;
  px_model_count_params(&m, &p);
  double h = 7168, mla = h * 1536 + 1536.0 * 128 * 192 + h * 576 + 512.0 * 128 * 256 + 128.0 * 128 * h;
  double dense = mla + 3 * h * 18432, moe = mla + 256 * h + 9 * 3 * h * 2048;
  PX_ASSERT_REL(f.forward_dense_flops, 2 * (3 * dense + 58 * moe + 129280 * h), 1e-15);
  PX_ASSERT_REL(f.forward_attention_flops, 2.0 * 4096 * 128 * (192 + 128) * 61, 1e-15);
  /* 6 x activated parameters, as DeepSeek's 37B suggests, to within the biases and norms */
  PX_ASSERT_REL(f.train_flops_no_attention, 6.0 * (double)(p.active - p.embedding), 1e-4);
  /* its MTP module, apart: eh_proj (2h -> h), a MoE layer with its attention, the shared head again */
  PX_ASSERT_REL(f.forward_mtp_flops, 2 * (2 * h * h + moe + 129280 * h) + 2.0 * 4096 * 128 * (192 + 128), 1e-15);
  m.mtp_layers = 0;
  px_model_flops_per_token(&m, 4096, &f);
  CU_ASSERT_EQUAL(f.forward_mtp_flops, 0);

  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt-oss-120b", &m, &err), PX_OK);
  px_model_flops_per_token(&m, 4096, &f);
  PX_ASSERT_REL(f.forward_attention_flops, 2.0 * 64 * (64 + 64) * (18 * 4096 + 18 * 128), 1e-15);
  CU_ASSERT(px_model_layer_is_sliding(&m, 0));
  CU_ASSERT(!px_model_layer_is_sliding(&m, 1));
}

/* A dense model's JSON has no MoE, MLA or gpt-oss keys; MoE presets round-trip. */
static void test_moe_json(void) {
  px_model a, b;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &a, &err), PX_OK);
  cJSON *j = px_model_to_json(&a);
  static const char *const absent[] = {"experts", "router", "kv_lora_rank", "mtp_layers", "sliding_window",
                                       "attention_sinks", "capacity_factor"};
  for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(j, absent[i]));
  cJSON_Delete(j);
  static const char *const presets[] = {"mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "qwen3-30b-a3b",
                                        "qwen3-235b-a22b", "gpt-oss-120b"};
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    CU_ASSERT_EQUAL_FATAL(px_model_load(presets[i], &a, &err), PX_OK);
    j = px_model_to_json(&a);
    CU_ASSERT_EQUAL_FATAL(px_model_from_json(j, "roundtrip", &b, &err), PX_OK);
    cJSON_Delete(j);
    CU_ASSERT(memcmp(&a, &b, sizeof a) == 0);
  }
}

#define MOE BASE ", \"heads\": 4, \"experts\": 8, \"moe_ffn_hidden\": 32"
static void test_moe_refusals(void) {
  expect_refused("{" MOE "}", "field 'experts_per_token': 0 is not in [1, experts 8]");
  expect_refused("{" MOE ", \"experts_per_token\": 9}", "field 'experts_per_token': 9 is not in [1, experts 8]");
  expect_refused("{" BASE ", \"heads\": 4, \"experts\": 8, \"experts_per_token\": 2}", "field 'moe_ffn_hidden'");
  expect_refused("{" BASE ", \"heads\": 4, \"experts_per_token\": 2}", "field 'experts_per_token' needs 'experts'");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"first_dense_layers\": 2}", "field 'first_dense_layers'");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"moe_layer_freq\": 3}", "field 'moe_layer_freq'");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"router\": \"relu\"}", "is not one of softmax|sigmoid");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"capacity_factor\": -1}", "field 'capacity_factor'");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"capacity_factor\": 1, \"token_drop_policy\": \"random\"}",
                 "is not one of probs|position");
  expect_refused("{" MOE ", \"experts_per_token\": 2, \"shared_experts\": 2, \"shared_ffn_hidden\": 64}",
                 "field 'shared_ffn_hidden'");
  expect_refused("{" BASE ", \"heads\": 4, \"q_lora_rank\": 16}", "field 'q_lora_rank' needs 'kv_lora_rank'");
  expect_refused("{" BASE ", \"heads\": 4, \"kv_lora_rank\": 16, \"v_head_dim\": 16}", "field 'qk_rope_head_dim'");
  expect_refused("{" BASE ", \"heads\": 4, \"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, \"qk_nope_head_dim\": 8, "
                 "\"v_head_dim\": 16, \"head_dim\": 32}", "field 'head_dim': 32 is not qk_nope_head_dim");
  expect_refused("{" BASE ", \"heads\": 4, \"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, \"qk_nope_head_dim\": 8}",
                 "field 'v_head_dim'");
  px_err err = {0};
  CU_ASSERT_EQUAL(parse_model("{" MOE ", \"experts_per_token\": 2, \"first_dense_layers\": 1}", &err), PX_OK);
  CU_ASSERT_EQUAL(parse_model("{" BASE ", \"heads\": 4, \"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, "
                              "\"qk_nope_head_dim\": 8, \"v_head_dim\": 16}", &err), PX_OK);
  /* Hugging Face: the fields named as the config names them */
#define HF_BASE                                                                                           \
  "\"num_hidden_layers\": 4, \"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 128, " \
  "\"vocab_size\": 100, \"max_position_embeddings\": 16"
  expect_refused("{\"model_type\": \"mixtral\", " HF_BASE "}",
                 "field 'num_local_experts' (num_experts, n_routed_experts) is missing");
  expect_refused("{\"model_type\": \"qwen3_moe\", " HF_BASE ", \"num_experts\": 4, \"num_experts_per_tok\": 2, "
                 "\"mlp_only_layers\": [1]}", "field 'mlp_only_layers'");
  expect_refused("{\"model_type\": \"deepseek_v3\", " HF_BASE ", \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, "
                 "\"moe_layer_freq\": 2}", "field 'moe_layer_freq': only 1");
  expect_refused("{\"model_type\": \"qwen3_moe\", " HF_BASE ", \"num_experts\": 4, \"num_experts_per_tok\": 2, "
                 "\"scoring_func\": \"tanh\"}", "field 'scoring_func'");
  expect_refused("{\"model_type\": \"gpt_oss\", " HF_BASE ", \"num_local_experts\": 4, \"num_experts_per_tok\": 2, "
                 "\"sliding_window\": 8, \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                 "field 'layer_types'");
  expect_refused("{\"model_type\": \"t5\"}", "(llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, "
                                             "deepseek_v2, deepseek_v3, gpt_oss, gpt_neox, gpt2)");
  /* mlp_only_layers [0, 1] is first_dense_layers 2 */
  const char *dense2 = "{\"model_type\": \"qwen3_moe\", " HF_BASE ", \"num_experts\": 4, "
                       "\"moe_intermediate_size\": 32, \"num_experts_per_tok\": 2, \"mlp_only_layers\": [0, 1]}";
  cJSON *root = cJSON_Parse(dense2);
  px_model m;
  CU_ASSERT_EQUAL_FATAL(px_model_from_json(root, "t.json", &m, &err), PX_OK);
  cJSON_Delete(root);
  CU_ASSERT_EQUAL(m.first_dense_layers, 2);
  CU_ASSERT(!px_model_layer_is_moe(&m, 1));
  CU_ASSERT(px_model_layer_is_moe(&m, 2));
  /* rope_scaling: YaRN's concentration factor as Hugging Face computes it (0.1 ln factor + 1; the mscale ratio
   * where both are given; attention_factor where given); other scalings none */
  static const struct {
    const char *scaling;
    double want;
  } rs[] = {{"null", 1.0},
            {"{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
             "\"original_max_position_embeddings\": 8192}",
             1.0},
            {"{\"rope_type\": \"linear\", \"factor\": 4.0}", 1.0},
            {"{\"type\": \"dynamic\", \"factor\": 2.0}", 1.0},
            {"{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0}", 1.3465735902799727},
            {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}", 1.0},
            {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 0.5}",
             (0.1 * log(40.0) + 1) / (0.05 * log(40.0) + 1)},
            {"{\"rope_type\": \"yarn\", \"factor\": 4.0, \"attention_factor\": 1.2}", 1.2}};
  for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
    char text[512];
    snprintf(text, sizeof text, "{\"model_type\": \"llama\", " HF_BASE ", \"rope_scaling\": %s}", rs[i].scaling);
    root = cJSON_Parse(text);
    CU_ASSERT_EQUAL_FATAL(px_model_from_json(root, "t.json", &m, &err), PX_OK);
    cJSON_Delete(root);
    PX_ASSERT_REL(m.rope_concentration, rs[i].want, 1e-12);
    bool yarn = strstr(rs[i].scaling, "yarn") != NULL; /* its frequencies' parameters, the defaults' where unsaid */
    CU_ASSERT_EQUAL(m.rope_yarn.factor > 0, yarn);
    if (yarn) {
      CU_ASSERT_EQUAL(m.rope_yarn.original_positions, 16); /* max_position_embeddings: none given */
      CU_ASSERT_DOUBLE_EQUAL(m.rope_yarn.beta_fast, 32, 0);
      CU_ASSERT_DOUBLE_EQUAL(m.rope_yarn.beta_slow, 1, 0);
      CU_ASSERT(m.rope_yarn.truncate);
      /* mscale_all_dim where given (the latent attention's softmax factor), else none */
      CU_ASSERT_DOUBLE_EQUAL(m.rope_yarn.mscale_all_dim, strstr(rs[i].scaling, "\"mscale_all_dim\": 0.5")   ? 0.5
                                                         : strstr(rs[i].scaling, "\"mscale_all_dim\": 1.0") ? 1.0
                                                                                                            : 0.0,
                             0);
    }
    CU_ASSERT_DOUBLE_EQUAL(px_model_softmax_scale_factor(&m), 1.0, 0); /* not latent attention: no factor */
    /* linear interpolation's factor; dynamic NTK's none (theta's frequencies up to max_position_embeddings) */
    CU_ASSERT_DOUBLE_EQUAL(m.rope_linear_factor, strstr(rs[i].scaling, "linear") ? 4.0 : 0.0, 0);
    bool llama3 = strstr(rs[i].scaling, "llama3") != NULL; /* Llama 3.1's frequencies, every key read */
    CU_ASSERT_EQUAL(m.rope_llama3.factor > 0, llama3);
    if (llama3)
      CU_ASSERT(m.rope_llama3.factor == 8.0 && m.rope_llama3.low_freq_factor == 1.0 &&
                m.rope_llama3.high_freq_factor == 4.0 && m.rope_llama3.original_positions == 8192);
  }
  expect_refused("{\"model_type\": \"llama\", " HF_BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}}",
                 "field 'rope_scaling.low_freq_factor' is missing");
  expect_refused("{" BASE ", \"heads\": 4, \"position\": \"rope\", \"rope_llama3\": {\"factor\": 8, "
                 "\"original_positions\": 64, \"high_freq_factor\": 1}}",
                 "field 'rope_llama3.high_freq_factor': 1 is not above low_freq_factor 1");
  expect_refused("{" BASE ", \"heads\": 4, \"position\": \"rope\", \"rope_llama3\": {\"factor\": 8, "
                 "\"original_positions\": 64}, \"rope_yarn\": {\"factor\": 4, \"original_positions\": 8}}",
                 "fields 'rope_yarn', 'rope_llama3', 'rope_linear_factor': the frequencies are scaled one way, and "
                 "the model has more than one");
  /* a partial rotary: Hugging Face's partial_rotary_factor; an odd count of rotated dims and latent attention refused */
  root = cJSON_Parse("{\"model_type\": \"llama\", " HF_BASE ", \"partial_rotary_factor\": 0.5}");
  CU_ASSERT_EQUAL_FATAL(px_model_from_json(root, "t.json", &m, &err), PX_OK);
  cJSON_Delete(root);
  CU_ASSERT_EQUAL(px_model_rope_dims(&m), m.head_dim / 2);
  expect_refused("{" BASE ", \"heads\": 4, \"position\": \"rope\", \"rope_fraction\": 0.1875}",
                 "field 'rope_fraction': 0.1875 of head_dim 16 rotates 3 dims, not an even count");
  expect_refused("{" BASE ", \"heads\": 4, \"rope_linear_factor\": 2}",
                 "field 'rope_linear_factor': it scales RoPE's frequencies, and the model's position is learned");
  expect_refused("{" BASE ", \"heads\": 4, \"rope_llama3\": {\"factor\": 8, \"original_positions\": 64}}",
                 "field 'rope_llama3': it scales RoPE's frequencies, and the model's position is learned");
  /* DeepSeek-V3's softmax factor, mscale(40, 1)^2, as its attention computes it; gpt-oss has none */
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  PX_ASSERT_REL(px_model_softmax_scale_factor(&m), pow(0.1 * log(40.0) + 1.0, 2), 1e-12);
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt-oss-120b", &m, &err), PX_OK);
  CU_ASSERT_DOUBLE_EQUAL(px_model_softmax_scale_factor(&m), 1.0, 0);
  expect_refused("{\"model_type\": \"llama\", " HF_BASE ", \"rope_scaling\": {\"rope_type\": \"yarn\"}}",
                 "field 'rope_scaling.factor' is missing");
  expect_refused("{" BASE ", \"heads\": 4, \"position\": \"rope\", \"rope_yarn\": {\"factor\": 4}}",
                 "field 'rope_yarn.original_positions' is missing");
  expect_refused("{" BASE ", \"heads\": 4, \"rope_yarn\": {\"factor\": 4, \"original_positions\": 8}}",
                 "field 'rope_yarn': YaRN scales RoPE's frequencies, and the model's position is learned");
  expect_refused("{" BASE ", \"heads\": 4, \"rope_concentration\": 0}",
                 "field 'rope_concentration': 0 is out of range");
}

/* The layers a model's sliding window covers, as a string of 's' (windowed) and 'f' (full). */
static const char *window_layers(const px_model *m, char *buf) {
  int64_t l = 0;
  for (; l < m->layers && l < 63; l++) buf[l] = px_model_layer_is_sliding(m, l) ? 's' : 'f';
  buf[l] = '\0';
  return buf;
}

/* Sliding-window attention from Hugging Face configs, as transformers reads them: Mistral's sliding_window on
 * every layer (v0.1's 4096; Mixtral's null is none), Qwen's only with use_sliding_window and after the first
 * max_window_layers, gpt-oss's on the even layers, and layer_types where a config lists them (a pattern our
 * model cannot hold refused naming the element); Qwen3's q/k norms from its model types. */
static void test_hf_windows(void) {
  px_model m;
  px_err err = {0};
  char b[64];
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/mistral-7b-config.json"), &m, &err), PX_OK);
  CU_ASSERT_EQUAL(m.sliding_window, 4096);
  CU_ASSERT_STRING_EQUAL(window_layers(&m, b), "ssssssssssssssssssssssssssssssss");
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/mixtral-8x7b-config.json"), &m, &err), PX_OK);
  CU_ASSERT_EQUAL(m.sliding_window, 0);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen2-0.5b-config.json"), &m, &err), PX_OK);
  CU_ASSERT_EQUAL(m.sliding_window, 0); /* use_sliding_window false */
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/gpt-oss-20b-config.json"), &m, &err), PX_OK);
  CU_ASSERT_EQUAL(m.sliding_window, 128);
  CU_ASSERT_STRING_EQUAL(window_layers(&m, b), "sfsfsfsfsfsfsfsfsfsfsfsf");
  px_model preset;
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt-oss-120b", &preset, &err), PX_OK);
  CU_ASSERT_EQUAL(preset.window_layer_freq, 2);
  CU_ASSERT_STRING_EQUAL(window_layers(&preset, b), "sfsfsfsfsfsfsfsfsfsfsfsfsfsfsfsfsfsf");
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen3-8b-base-config.json"), &m, &err), PX_OK);
  CU_ASSERT(m.qk_norm);
  CU_ASSERT_EQUAL(m.sliding_window, 0);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/qwen3-30b-a3b-config.json"), &m, &err), PX_OK);
  CU_ASSERT(m.qk_norm);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/hf/llama3-8b-config.json"), &m, &err), PX_OK);
  CU_ASSERT(!m.qk_norm);
  static const struct {
    const char *json, *layers; /* NULL: refused */
  } cases[] = {
      /* Qwen2 with the window on: the layers after max_window_layers; its default 28 covers all 4 here */
      {"\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 1", "fsss"},
      {"\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 8", "ffff"},
      {"\"model_type\": \"qwen2\", \"use_sliding_window\": false, \"sliding_window\": 8, \"max_window_layers\": 0", "ffff"},
      {"\"model_type\": \"mistral\", \"sliding_window\": null", "ffff"},
      {"\"model_type\": \"mistral\"", "ssss"}, /* MistralConfig's default window, 4096 */
      {"\"model_type\": \"llama\", \"sliding_window\": 8", "ffff"}, /* Llama has none */
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
       "\"sliding_attention\", \"full_attention\", \"sliding_attention\"]", "fsfs"},
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
       "\"full_attention\", \"full_attention\", \"sliding_attention\"]", "fffs"},
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"sliding_attention\", "
       "\"full_attention\", \"full_attention\", \"sliding_attention\"]", "sffs"},
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"sliding_attention\", "
       "\"sliding_attention\", \"full_attention\", \"sliding_attention\"]", NULL}, /* Gemma-like: refused */
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"sliding_attention\"]", NULL},
      {"\"model_type\": \"mistral\", \"sliding_window\": 8, \"layer_types\": [\"local\", \"full_attention\", "
       "\"full_attention\", \"full_attention\"]", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[1024];
    snprintf(text, sizeof text, "{%s, \"num_hidden_layers\": 4, \"hidden_size\": 64, \"num_attention_heads\": 4, "
             "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 16}", cases[i].json);
    cJSON *root = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    px_err e = {0};
    px_status st = px_model_from_json(root, "config.json", &m, &e);
    cJSON_Delete(root);
    if (!cases[i].layers) {
      CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
      CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "config.json: field 'layer_types'"));
      continue;
    }
    if (st) fprintf(stderr, "\n  %s: %s\n", cases[i].json, e.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    if (strcmp(window_layers(&m, b), cases[i].layers))
      fprintf(stderr, "\n  %s: layers %s, wanted %s\n", cases[i].json, b, cases[i].layers);
    CU_ASSERT_STRING_EQUAL(b, cases[i].layers);
  }
  /* our schema: a window says which layers, and the fields need one */
  expect_refused("{" BASE ", \"heads\": 4, \"sliding_window\": 8}", "field 'window_layer_freq' is required");
  expect_refused("{" BASE ", \"heads\": 4, \"window_layer_freq\": 2}", "field 'window_layer_freq' needs 'sliding_window'");
  expect_refused("{" BASE ", \"heads\": 4, \"sliding_window\": 8, \"window_layer_freq\": 1, \"first_full_layers\": 2}",
                 "field 'first_full_layers': 2 leaves none of the 2 layers");
  expect_refused("{" BASE ", \"heads\": 4, \"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, \"qk_nope_head_dim\": 8, "
                 "\"v_head_dim\": 16, \"qk_norm\": true}", "field 'qk_norm'");
  CU_ASSERT_EQUAL(parse_model("{" BASE ", \"heads\": 4, \"sliding_window\": 8, \"window_layer_freq\": 1, "
                              "\"first_full_layers\": 1}", &err), PX_OK);
}

int main(void) {
  static const px_test tests[] = {
      {"published parameter counts, exact", test_published_counts},
      {"GPT-3 175B vs Megatron's formula", test_gpt3_megatron_formula},
      {"FLOPs per token vs Megatron's formula", test_flops_megatron},
      {"Hugging Face config defaults", test_hf_defaults},
      {"bad model inputs are refused with the field", test_refusals},
      {"sliding windows from Hugging Face configs (Mistral, Qwen2, gpt-oss, layer_types), Qwen3's q/k norms", test_hf_windows},
      {"JSON round trip", test_roundtrip},
      {"a model file up to 1 MiB loads, a byte more is refused", test_file_limit},
      {"MoE: published counts within their rounding", test_moe_published},
      {"MoE: layer parts by hand (MLA, router bias, shared experts, MTP)", test_moe_parts},
      {"MoE: Hugging Face configs import as the presets", test_moe_hf_matches_presets},
      {"MoE: FLOPs per token count activated experts only", test_moe_flops},
      {"MoE: dense JSON unchanged, MoE presets round-trip", test_moe_json},
      {"MoE: bad MoE and MLA fields are refused with the field", test_moe_refusals},
  };
  return px_test_main("model", tests, sizeof tests / sizeof tests[0]);
}
