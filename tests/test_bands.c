/* The validated error bands (sim/bands.h): a plan's key, the table written
 * and read back, the words sim and sweep print, the installed table (the
 * tests' own result, tests/cli/docs.sh) and bad tables refused naming the
 * file, the line and the field. */
#include <stdio.h>
#include <string.h>

#include "sim/bands.h"
#include "testutil.h"

static px_band_key key(const char *family, const char *precision, bool moe) {
  px_band_key k = {{0}, {0}, moe, false};
  snprintf(k.family, sizeof k.family, "%s", family);
  snprintf(k.precision, sizeof k.precision, "%s", precision);
  return k;
}

/* The family is the GPU name up to its first '-'; the precision the plan's; MoE with experts; graphed with a
 * full-step CUDA graph (per-layer graphs leave the host issuing the step: eager). */
static void test_key(void) {
  px_model m;
  px_cluster c;
  px_parallel p;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("gb200-nvl72", &c, &err), PX_OK);
  px_parallel_unset(&p);
  p.precision = PX_PREC_FP8;
  px_band_key k;
  px_band_key_of(&m, &c, &p, &k);
  CU_ASSERT_STRING_EQUAL(k.family, "GB200");
  CU_ASSERT_STRING_EQUAL(k.precision, "fp8");
  CU_ASSERT(k.moe);
  CU_ASSERT(!k.graphed);
  p.cuda_graph = PX_GRAPH_LAYERS;
  px_band_key_of(&m, &c, &p, &k);
  CU_ASSERT(!k.graphed);
  p.cuda_graph = PX_GRAPH_FULL;
  px_band_key_of(&m, &c, &p, &k);
  CU_ASSERT(k.graphed);
  p.cuda_graph = PX_GRAPH_NONE;
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("a3-mega", &c, &err), PX_OK);
  p.precision = PX_PREC_BF16;
  px_band_key_of(&m, &c, &p, &k);
  CU_ASSERT_STRING_EQUAL(k.family, "H100"); /* a3-mega's H100s are dgx-h100's family */
  CU_ASSERT(!k.moe);
}

/* Runs added, written, read back: the same bands; each validation named once; the words. */
static void test_round_trip(void) {
  px_bands b = {0}, back;
  px_err err = {0};
  px_band_key h8 = key("H100", "fp8", false), a16 = key("A100", "fp16", false), h8g = h8;
  h8g.graphed = true;
  CU_ASSERT_EQUAL(px_bands_add(&b, &h8g, 0.01, "Megatron-Bridge", &err), PX_OK);
  CU_ASSERT_EQUAL(px_bands_add(&b, &h8, 0.02, "Megatron-Bridge", &err), PX_OK);
  CU_ASSERT_EQUAL(px_bands_add(&b, &h8, 0.16, "torchtitan", &err), PX_OK);
  CU_ASSERT_EQUAL(px_bands_add(&b, &h8, -0.02, "Megatron-Bridge", &err), PX_OK);
  CU_ASSERT_EQUAL(px_bands_add(&b, &a16, 0.05, "SC'21", &err), PX_OK);
  const char *dir = px_test_tmpdir("bands"), *path = px_test_tmp("bands.tsv");
  FILE *fp = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  px_bands_write(&b, fp);
  fclose(fp);
  CU_ASSERT_STRING_EQUAL(b.v[0].key.family, "A100"); /* sorted */
  CU_ASSERT_EQUAL_FATAL(px_bands_load(path, &back, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(back.n, 3);
  CU_ASSERT(!back.v[1].key.graphed && back.v[2].key.graphed); /* eager before graphed */
  const px_band *r = px_bands_find(&back, &h8);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(r->runs, 3);
  CU_ASSERT_DOUBLE_EQUAL(r->min, -0.02, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->max, 0.16, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->mean, 0.053, 1e-12); /* 5.3% as written: one decimal of a percent */
  CU_ASSERT_STRING_EQUAL(r->sources, "Megatron-Bridge; torchtitan");
  char text[512];
  px_band_describe(&back, &h8, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "H100 fp8 dense, eager: published runs -2.0..+16.0% (3 runs)");
  px_band_describe(&back, &h8g, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "H100 fp8 dense, full-step graph: published runs +1.0..+1.0% (1 run)");
  px_band_key b200 = key("B200", "fp8", true), h16 = key("H100", "bf16", false);
  px_band_describe(&back, &b200, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "no published run validates B200 fp8 MoE, eager");
  px_band_describe(&back, &h16, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "no published run validates H100 bf16 dense, eager; H100 fp8 dense, eager: published "
                               "runs -2.0..+16.0% (3 runs); H100 fp8 dense, full-step graph: published runs "
                               "+1.0..+1.0% (1 run)");
  px_bands_free(&b), px_bands_free(&back);
  px_test_rm_tree(dir);
}

/* The installed table reads, and holds the bands the validation suites make: the A100 and H100 dense runs'
 * (test_validation_runs), Blackwell's (test_validation_blackwell) and the MoE runs' (test_validation_moe). */
static void test_installed(void) {
  px_bands b;
  px_err err = {0};
  px_status st = px_bands_load(NULL, &b, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  px_band_key h8 = key("H100", "fp8", false), a16 = key("A100", "fp16", false), h8m = key("H100", "fp8", true);
  px_band_key h16m = key("H100", "bf16", true), gb8 = key("GB200", "fp8", false), gbm = key("GB200", "mxfp8", true);
  gbm.graphed = true; /* the full-step graph's MoE rows (test_validation_moe) */
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &h8));
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &a16));
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &h8m));
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &h16m));
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &gb8));
  CU_ASSERT_PTR_NOT_NULL(px_bands_find(&b, &gbm));
  px_bands_free(&b);
}

/* Bad tables: the file, line and field named, status 2. */
static void test_refusals(void) {
  static const char head[] =
      "# a comment\nfamily\tprecision\tkind\tlaunch\truns\tmin_pct\tmax_pct\tmean_pct\tvalidations\n";
  static const struct {
    const char *rows, *says;
  } cases[] = {
      {"H100\tfp8\tdense\teager\t3\t-2.0\t16.0\t5.0\n", "expected 9 tab-separated fields"},
      {"H100\tfp4\tdense\teager\t3\t-2.0\t16.0\t5.0\tx\n", ":3: field 'precision': 'fp4'"},
      {"H100\tfp8\tsparse\teager\t3\t-2.0\t16.0\t5.0\tx\n", ":3: field 'kind'"},
      {"H100\tfp8\tdense\tlayers\t3\t-2.0\t16.0\t5.0\tx\n", ":3: field 'launch': 'layers'"},
      {"H100\tfp8\tdense\teager\t0\t-2.0\t16.0\t5.0\tx\n", ":3: field 'runs'"},
      {"H100\tfp8\tdense\teager\t3\t-2.0\t16.0\t20.0\tx\n", "min <= mean <= max"},
      {"H100\tfp8\tdense\teager\t3\t-2.0\tlots\t5.0\tx\n", "not percentages"},
      {"\tfp8\tdense\teager\t3\t-2.0\t16.0\t5.0\tx\n", "field 'family'"},
      {"H100\tfp8\tdense\teager\t3\t-2.0\t16.0\t5.0\tx\nH100\tfp8\tdense\teager\t3\t-2.0\t16.0\t5.0\ty\n",
       ":4: a second row"},
  };
  const char *dir = px_test_tmpdir("bands_bad"), *path = px_test_tmp("bands.tsv");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    FILE *fp = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fprintf(fp, "%s%s", head, cases[i].rows);
    fclose(fp);
    px_bands b;
    px_err err = {0};
    CU_ASSERT_EQUAL(px_bands_load(path, &b, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, cases[i].says) || !strstr(err.msg, path))
      fprintf(stderr, "\n  case %zu: '%s', wanted '%s'\n", i, err.msg, cases[i].says);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].says));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
  }
  FILE *fp = fopen(path, "w"); /* no header */
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fprintf(fp, "H100\tfp8\tdense\teager\t3\t-2.0\t16.0\t5.0\tx\n");
  fclose(fp);
  px_bands b;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_bands_load(path, &b, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ":1: expected the header"));
  CU_ASSERT_EQUAL(px_bands_load(px_test_tmp("none.tsv"), &b, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "none.tsv: cannot open"));
  px_test_rm_tree(dir);
}

int main(void) {
  static const px_test tests[] = {
      {"a plan's key: GPU family, precision, dense or MoE, eager or graphed", test_key},
      {"bands written and read back, and their words", test_round_trip},
      {"the installed table holds the validations' bands", test_installed},
      {"bad tables refused naming the file, line and field", test_refusals},
  };
  return px_test_main("bands", tests, sizeof tests / sizeof tests[0]);
}
