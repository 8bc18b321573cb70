/* Model specs: exact parameter counts against published ones, Megatron's
 * formulas, Hugging Face config loading, and refusal of inconsistent shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "plan/model.h"
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

int main(void) {
  static const px_test tests[] = {
      {"published parameter counts, exact", test_published_counts},
      {"GPT-3 175B vs Megatron's formula", test_gpt3_megatron_formula},
      {"FLOPs per token vs Megatron's formula", test_flops_megatron},
      {"Hugging Face config defaults", test_hf_defaults},
      {"bad model inputs are refused with the field", test_refusals},
      {"JSON round trip", test_roundtrip},
  };
  return px_test_main("model", tests, sizeof tests / sizeof tests[0]);
}
