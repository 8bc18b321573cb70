/* Plots and HTML report of a sweep directory, on tests/data/sample_sweep:
 * every PNG and SVG made, the page self-contained and escaped, errors named;
 * the question's fixed choices are only what the user fixed.
 * `test_report --keep DIR` only renders the sample into DIR (for tests/cli/report.sh). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"
#include "core/paths.h"
#include "report/html.h"
#include "report/plots.h"
#include "report/sweepjson.h"
#include "report/trace.h"
#include "sim/sim.h"
#include "tests/testutil.h"

static const char *const sample_files[] = {"plans.dat",    "heatmap.dat", "memory.dat",
                                           "timeline.dat", "scaling.dat", "vary.dat",   "sweep.json"};
#define N_SAMPLE (sizeof sample_files / sizeof sample_files[0])

static bool copy_file(const char *from, const char *to) {
  char *data = NULL;
  size_t len = 0;
  px_err err;
  if (px_file_read(from, (size_t)64 << 20, &data, &len, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return false;
  }
  bool ok = px_file_write(to, data, len, &err) == PX_OK;
  if (!ok) fprintf(stderr, "%s\n", err.msg);
  free(data);
  return ok;
}

/* Copies the sample sweep into dir (created). */
static bool copy_sample(const char *dir) {
  px_err err;
  if (px_mkdir_p(dir, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return false;
  }
  for (size_t i = 0; i < N_SAMPLE; i++) {
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/tests/data/sample_sweep/%s", px_data_dir(), sample_files[i]);
    snprintf(to, sizeof to, "%s/%s", dir, sample_files[i]);
    if (!copy_file(from, to)) return false;
  }
  return true;
}

static char *new_tmpdir(void) {
  char tmpl[] = "/tmp/px_report_XXXXXX";
  char *d = mkdtemp(tmpl);
  return d ? strdup(d) : NULL;
}

/* Removes a directory and what is in it (two levels: plots/ in a fake home). */
static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
      rm_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static long file_size(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat sb;
  return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

static char *read_text(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  char *s = NULL;
  px_err err;
  if (px_file_read(p, (size_t)64 << 20, &s, NULL, &err)) fprintf(stderr, "%s\n", err.msg);
  return s;
}

/* Writes dir's report (asserting it succeeds) and returns its index.html. */
static char *report_html(const char *dir) {
  px_err err = {0};
  px_status st = px_html_report(dir, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL(st, PX_OK);
  char *html = read_text(dir, "index.html");
  CU_ASSERT_PTR_NOT_NULL_FATAL(html);
  return html;
}

/* Every string of `in` is in html, none of `out` is (NULL-terminated lists). */
static void expect_strings(const char *html, const char *const *in, const char *const *out) {
  for (; *in; in++) {
    if (!strstr(html, *in)) fprintf(stderr, "\n  missing from the report: %s\n", *in);
    CU_ASSERT(strstr(html, *in) != NULL);
  }
  for (; *out; out++) {
    if (strstr(html, *out)) fprintf(stderr, "\n  in the report but should not be: %s\n", *out);
    CU_ASSERT(strstr(html, *out) == NULL);
  }
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* No temporary file left behind by an atomic write. */
static bool no_tmp_left(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool ok = true;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp")) {
      fprintf(stderr, "\n  left behind: %s/%s\n", dir, e->d_name);
      ok = false;
    }
  closedir(d);
  return ok;
}

static void test_render_all(void) {
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  CU_ASSERT_FATAL(copy_sample(dir));
  px_err err = {0};
  px_status st = px_plots_render(dir, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL(st, PX_OK);
  size_t n;
  const px_plot_desc *pl = px_plots_list(&n);
  CU_ASSERT_EQUAL(n, 6);
  for (size_t i = 0; i < n; i++) {
    char png[64], svg[64];
    snprintf(png, sizeof png, "%s.png", pl[i].name);
    snprintf(svg, sizeof svg, "%s.svg", pl[i].name);
    if (file_size(dir, png) <= 0 || file_size(dir, svg) <= 0) fprintf(stderr, "\n  missing %s or %s\n", png, svg);
    CU_ASSERT(file_size(dir, png) > 1000);
    CU_ASSERT(file_size(dir, svg) > 1000);
    char *s = read_text(dir, png);
    CU_ASSERT(s && !memcmp(s, "\x89PNG", 4));
    free(s);
    s = read_text(dir, svg);
    CU_ASSERT(s && strstr(s, "<svg"));
    free(s);
  }
  CU_ASSERT(no_tmp_left(dir));

  char *html = report_html(dir);
  CU_ASSERT_EQUAL(count_of(html, "data:image/png;base64,iVBORw0KGgo"), 6);
  for (size_t i = 0; i < n; i++) {
    char id[64];
    snprintf(id, sizeof id, "id=\"plot-%s\"", pl[i].name);
    CU_ASSERT(strstr(html, id) != NULL);
  }
  /* The question, the ranking (62,703 best tokens/s), the assumptions with
   * their sources (model, cluster, efficiency model, memory, FLOPs), the
   * image fallback; self-contained: no external resources. */
  expect_strings(html,
                 (const char *const[]){"llama3-70b", "H100-SXM5-80GB",
                                       "--tp 8 --pp 2 --zero 1 --sp --mbs 1 --gbs 64 --schedule interleaved --vpp 2 --recompute selective",
                                       "62,703", "The Llama 3 Herd of Models", "NVIDIA H100 SXM5 datasheet",
                                       "max_efficiency",
                                       "usable HBM (hbm_gib - reserved_gib = 79 GiB) are dropped &amp; not simulated",
                                       "peak memory &gt; usable", "Megatron&#39;s accounting", "dataset.imagesOk", NULL},
                 (const char *const[]){"src=\"http", "<link", "url(", NULL});
  CU_ASSERT_EQUAL(count_of(html, "<tr class=\"best\">"), 1);
  CU_ASSERT_EQUAL(count_of(html, "<td><code>--tp"), PX_HTML_TOP_PLANS);
  CU_ASSERT(no_tmp_left(dir));
  free(html);
  rm_tree(dir);
  free(dir);
}

static void test_missing_inputs_skipped(void) {
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  CU_ASSERT_FATAL(copy_sample(dir));
  char p[4096];
  snprintf(p, sizeof p, "%s/timeline.dat", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/scaling.dat", dir);
  CU_ASSERT_FATAL(px_file_write(p, "# gpus tokens_per_s mfu\n", 24, NULL) == PX_OK); /* header only */
  px_err err = {0};
  px_status st = px_plots_render(dir, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL(st, PX_OK);
  CU_ASSERT(file_size(dir, "heatmap.png") > 0);
  CU_ASSERT(file_size(dir, "memory.svg") > 0);
  CU_ASSERT(file_size(dir, "timeline.png") < 0);
  CU_ASSERT(file_size(dir, "scaling.png") < 0);
  CU_ASSERT_EQUAL(px_html_report(dir, &err), PX_OK);
  char *html = read_text(dir, "index.html");
  CU_ASSERT_EQUAL(count_of(html, "data:image/png;base64,"), 4); /* heatmap, pareto, memory, vary */
  free(html);
  rm_tree(dir);
  free(dir);
}

/* One line in every data file, including a plan off the Pareto front and a NaN cell. */
static void test_single_lines(void) {
  static const char *const files[][2] = {
      {"heatmap.dat", "# tp pp tokens_per_s\n8 2 NaN\n"},
      {"memory.dat", "0 8.4 16.9 12.7 21.2 2.1 1.3 79\n"},
      {"timeline.dat", "0 0 0.0 81.7 fwd 0\n"},
      {"scaling.dat", "64 61448.9 0.4733\n"},
      {"vary.dat", "# field: gpu.hbm_gib\n0 80 517231 0.49 NaN\n"},
      {"plans.dat", "8 2 4 1 1 1 2 1 2 62.674 62703.0 0.4830 8.3614 0 1\n"},
  };
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, files[i][0]);
    CU_ASSERT_FATAL(px_file_write(p, files[i][1], strlen(files[i][1]), NULL) == PX_OK);
  }
  px_err err = {0};
  px_status st = px_plots_render(dir, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL(st, PX_OK);
  size_t n;
  const px_plot_desc *pl = px_plots_list(&n);
  for (size_t i = 0; i < n; i++) {
    char png[64];
    snprintf(png, sizeof png, "%s.png", pl[i].name);
    CU_ASSERT(file_size(dir, png) > 0);
  }
  /* the scaling plot's log axis is labelled within a decade too (38 to 98 thousand tokens/s: 40, 50, 60, 80;
   * gnuplot's own log ticks label powers of ten alone) */
  char *svg = read_text(dir, "scaling.svg");
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  expect_strings(svg, (const char *const[]){"<text>40</text>", "<text>50</text>", "<text>60</text>", "<text>80</text>", NULL},
                 (const char *const[]){NULL});
  free(svg);
  rm_tree(dir);
  free(dir);
}

/* The report's figures say what they are: the plans that fit counted (counts.fit, not the plans sweep.json
 * keeps), MFU with its peak and the fp8 peak's beside it, the best plan's step broken down; the
 * assumptions' arrays without "?" keys, the cluster's and model's sources once. */
static void test_report_figures(void) {
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  const char *plan = "{\"rank\": %d, \"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 8, \"zero\": 1, \"mbs\": 1}, "
                     "\"step_time_s\": 2, \"tokens_per_s\": 1000, \"mfu\": 0.9, \"mfu_peak\": \"bf16\", "
                     "\"mfu_precision\": 0.45, \"mfu_precision_peak\": \"fp8\"%s}";
  const char *bd = ", \"breakdown\": {\"stage\": 0, \"forward_s\": 0.6, \"backward_s\": 1.2, \"recompute_s\": 0, "
                   "\"optimizer_s\": 0.01, \"bubble_s\": 0, \"exposed_s\": {\"tp\": 0.15, \"dp\": 0.04, \"cp\": 0}, "
                   "\"contention_s\": 0}";
  char json[4096], p1[1024], p2[1024];
  snprintf(p1, sizeof p1, plan, 1, bd);
  snprintf(p2, sizeof p2, plan, 2, "");
  snprintf(json, sizeof json,
           "{\"question\": {\"model\": {\"name\": \"m\", \"source\": \"the model's paper\"}, \"cluster\": "
           "{\"name\": \"c\", \"source\": \"the cluster's datasheet\", \"gpu\": {\"name\": \"g\", \"attention\": "
           "[{\"pass\": \"fwd\", \"seq\": [512, 1024], \"tflops\": [333, 392]}]}}, \"gpus\": 8, "
           "\"precisions\": [\"bf16\", \"fp8\"]}, \"counts\": {\"enumerated\": 20000, \"fit\": 10046}, "
           "\"plans\": [%s, %s], \"assumptions\": []}", p1, p2);
  char path[4096];
  snprintf(path, sizeof path, "%s/sweep.json", dir);
  CU_ASSERT_FATAL(px_file_write(path, json, strlen(json), NULL) == PX_OK);
  char *html = report_html(dir);
  expect_strings(html,
                 (const char *const[]){"The 2 best of 10,046 plans that fit", "<b>10,046</b><span>plans that fit",
                                       "MFU 90.0% of bf16 peak (45.0% of fp8 peak)", "<th>Precisions searched</th><td>bf16, fp8",
                                       "[512, 1024]", "id=\"breakdown\"", "exposed tp</td><td class=\"num\">150.00 ms",
                                       "backward</td><td class=\"num\">1.20 s</td><td class=\"num\">60.0%", NULL},
                 (const char *const[]){"<span class=\"k\">?</span>", "<span class=\"k\"></span>", "exposed cp",
                                       "days to train", NULL});
  CU_ASSERT_EQUAL(count_of(html, "the cluster&#39;s datasheet"), 1);
  CU_ASSERT_EQUAL(count_of(html, "the model&#39;s paper"), 1);
  free(html);
  rm_tree(dir);
  free(dir);
}

/* A failing script names itself and carries gnuplot's message; a missing
 * script and a missing gnuplot are errors too. */
static void test_errors(void) {
  char *dir = new_tmpdir(), *home = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(home);
  CU_ASSERT_FATAL(copy_sample(dir));
  char *old_home = getenv("PARALLAX_HOME") ? strdup(getenv("PARALLAX_HOME")) : NULL;
  char *old_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
  char p[4096];
  snprintf(p, sizeof p, "%s/plots", home);
  CU_ASSERT_FATAL(px_mkdir_p(p, NULL) == PX_OK);
  setenv("PARALLAX_HOME", home, 1);

  px_err err = {0};
  CU_ASSERT_EQUAL(px_plots_render(dir, &err), PX_ERR_RUNTIME);
  CU_ASSERT(strstr(err.msg, "heatmap.gp") && strstr(err.msg, "missing"));

  snprintf(p, sizeof p, "%s/plots/heatmap.gp", home);
  const char *bad = "set output out\nfrobnicate the data\n";
  CU_ASSERT_FATAL(px_file_write(p, bad, strlen(bad), NULL) == PX_OK);
  CU_ASSERT_EQUAL(px_plots_render(dir, &err), PX_ERR_RUNTIME);
  CU_ASSERT(strstr(err.msg, "heatmap.gp") != NULL);
  CU_ASSERT(strstr(err.msg, "gnuplot failed") != NULL);
  CU_ASSERT(strstr(err.msg, "invalid command") != NULL); /* gnuplot's own stderr */
  CU_ASSERT(strchr(err.msg, '\n') == NULL);
  CU_ASSERT(file_size(dir, "heatmap.png") < 0);
  CU_ASSERT(no_tmp_left(dir));

  /* A script that succeeds without writing its output. */
  const char *quiet = "print 'nothing'\n";
  CU_ASSERT_FATAL(px_file_write(p, quiet, strlen(quiet), NULL) == PX_OK);
  CU_ASSERT_EQUAL(px_plots_render(dir, &err), PX_ERR_RUNTIME);
  CU_ASSERT(strstr(err.msg, "heatmap.gp") && strstr(err.msg, "no png output"));

  if (old_home) setenv("PARALLAX_HOME", old_home, 1);
  else unsetenv("PARALLAX_HOME");
  setenv("PATH", "/nonexistent-px", 1);
  CU_ASSERT_EQUAL(px_plots_render(dir, &err), PX_ERR_RUNTIME);
  CU_ASSERT(strstr(err.msg, "gnuplot not found") != NULL);
  if (old_path) setenv("PATH", old_path, 1);

  CU_ASSERT_EQUAL(px_plots_render("/nonexistent-px/dir", &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "/nonexistent-px/dir") != NULL);
  snprintf(p, sizeof p, "%s/sweep.json", dir);
  unlink(p);
  CU_ASSERT_EQUAL(px_html_report(dir, &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "sweep.json") != NULL);
  CU_ASSERT(file_size(dir, "index.html") < 0);

  free(old_home);
  free(old_path);
  rm_tree(home);
  rm_tree(dir);
  free(home);
  free(dir);
}

/* Strings from the JSON cannot inject markup; missing sections still render. */
static void test_escaping(void) {
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  const char *json =
      "{\"question\": {\"model\": {\"name\": \"<script>alert(1)</script>\", \"source\": \"a & b \\\"c\\\" 'd'\"},"
      " \"cluster\": {\"name\": \"x<y\", \"gpu\": {\"name\": \"<b>gpu</b>\"}}, \"gpus\": 8,"
      " \"fixed\": {\"tp\": 8, \"sp\": true, \"schedule\": \"<i>1f1b</i>\"}},"
      " \"plans\": [], \"assumptions\": [\"</li><script>x()</script>\"]}";
  char p[4096];
  snprintf(p, sizeof p, "%s/sweep.json", dir);
  CU_ASSERT_FATAL(px_file_write(p, json, strlen(json), NULL) == PX_OK);
  char *html = report_html(dir);
  expect_strings(html,
                 (const char *const[]){"&lt;script&gt;alert(1)&lt;/script&gt;", "a &amp; b &quot;c&quot; &#39;d&#39;",
                                       "x&lt;y", "<code>--sp</code>",
                                       "<code>--schedule &lt;i&gt;1f1b&lt;/i&gt;</code>", "No plan fits", NULL},
                 (const char *const[]){"<script>alert", "<script>x()", "<b>gpu", NULL});
  CU_ASSERT_EQUAL(count_of(html, "<script>"), 1); /* only the page's own */
  free(html);
  rm_tree(dir);
  free(dir);
}

/* question.fixed holds the dimensions the caller set and nothing else: not
 * the defaults a resolved plan has, nor gbs and seq (their own fields). */
static void test_fixed_json(void) {
  px_parallel f;
  px_parallel_unset(&f);
  cJSON *o = px_report_fixed_json(&f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  CU_ASSERT_EQUAL(cJSON_GetArraySize(o), 0);
  cJSON_Delete(o);

  f.tp = 2, f.sp = 1, f.zero = 0, f.gbs = 64, f.seq = 4096, f.recompute = PX_RECOMPUTE_FULL;
  o = px_report_fixed_json(&f);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  char *text = cJSON_PrintUnformatted(o);
  CU_ASSERT_STRING_EQUAL(text, "{\"tp\":2,\"zero\":0,\"sp\":true,\"recompute\":\"full\"}");
  cJSON_free(text);
  cJSON_Delete(o);
}

/* The report's "Fixed choices" row: each fixed dimension as its flag, no
 * other flag; a switch fixed off is no flag; nothing fixed says so. */
static void test_fixed_choices(void) {
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  static const char *const cases[][3] = {
      {"{\"tp\": 2, \"sp\": false}", "<th>Fixed choices</th><td><code>--tp 2</code></td>", "--sp"},
      {"{\"tp\": 8, \"zero\": 1, \"sp\": true}",
       "<th>Fixed choices</th><td><code>--tp 8</code> <code>--zero 1</code> <code>--sp</code></td>", "--pp"},
      {"{\"bucket_mib\": 50, \"overlap\": \"dp,pp\"}",
       "<th>Fixed choices</th><td><code>--bucket-mib 50</code> <code>--overlap dp,pp</code></td>", "bucket_mib"},
      {"{}", "<th>Fixed choices</th><td>none: every dimension swept</td>", "<code>--"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char json[512], p[4096];
    snprintf(json, sizeof json, "{\"question\": {\"gpus\": 8, \"fixed\": %s}, \"plans\": []}", cases[i][0]);
    snprintf(p, sizeof p, "%s/sweep.json", dir);
    CU_ASSERT_FATAL(px_file_write(p, json, strlen(json), NULL) == PX_OK);
    char *html = report_html(dir);
    const char *row = strstr(html, "<th>Fixed choices</th>");
    char *end = row ? strstr(row, "</tr>") : NULL;
    if (end) *end = '\0';
    expect_strings(row ? row : "", (const char *const[]){cases[i][1], NULL}, (const char *const[]){cases[i][2], NULL});
    free(html);
  }
  rm_tree(dir);
  free(dir);
}

/* The simulated step's writers: a Chrome trace with a process per stage, a
 * thread per stream and an event per span; a timeline with a line per span,
 * its kinds those the timeline plot colours. */
static void test_trace_files(void) {
  px_err err = {0};
  px_model m;
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 8, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2, p.pp = 2, p.mbs = 1, p.gbs = 8, p.schedule = PX_SCHED_ZB_H1;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  px_sim_opts o = {.record_spans = true};
  px_sim_result r;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.nspans > 0);
  char *dir = new_tmpdir();
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  char trace[4200], timeline[4200];
  snprintf(trace, sizeof trace, "%s/trace.json", dir);
  snprintf(timeline, sizeof timeline, "%s/timeline.dat", dir);
  CU_ASSERT_EQUAL_FATAL(px_report_trace(&r, trace, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_report_timeline(&plan, &r, timeline, &err), PX_OK);
  cJSON *root = NULL;
  CU_ASSERT_EQUAL_FATAL(px_json_load(trace, &root, &err), PX_OK);
  const cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
  CU_ASSERT_EQUAL(cJSON_GetArraySize(evs), 2 * (1 + PX_STREAM_COUNT) + r.nspans);
  int spans = 0, named = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    if (ph && !strcmp(ph, "X")) spans++;
    if (name && !strcmp(name, "thread_name")) named++;
  }
  CU_ASSERT_EQUAL(spans, r.nspans);
  CU_ASSERT_EQUAL(named, 2 * PX_STREAM_COUNT);
  cJSON_Delete(root);
  char *text = read_text(dir, "timeline.dat");
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT(!strncmp(text, "# one simulated step of tiny:", 29));
  CU_ASSERT_EQUAL(count_of(text, "\n"), 2 + r.nspans);
  CU_ASSERT(strstr(text, " fwd ") && strstr(text, " bwd ") && strstr(text, " wgrad ") && strstr(text, " comm "));
  free(text);
  CU_ASSERT(no_tmp_left(dir));
  rm_tree(dir);
  free(dir);
  px_sim_result_free(&r);
  px_plan_free(&plan);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--keep")) {
    px_err err = {0};
    if (!copy_sample(argv[2])) return 1;
    if (px_plots_render(argv[2], &err) || px_html_report(argv[2], &err)) {
      fprintf(stderr, "test_report: %s\n", err.msg);
      return 1;
    }
    printf("%s/index.html\n", argv[2]);
    return 0;
  }
  if (argc != 1) {
    fprintf(stderr, "usage: test_report [--keep DIR]\n");
    return 2;
  }
  static const px_test tests[] = {
      {"every plot rendered as PNG and SVG; self-contained index.html", test_render_all},
      {"missing or empty inputs are skipped", test_missing_inputs_skipped},
      {"every script copes with single-line data", test_single_lines},
      {"errors name the script and carry gnuplot's stderr", test_errors},
      {"JSON strings are HTML-escaped", test_escaping},
      {"the plans that fit, MFU's peaks, the step's breakdown, the assumptions", test_report_figures},
      {"question.fixed: only what was fixed", test_fixed_json},
      {"Fixed choices: only the fixed flags", test_fixed_choices},
      {"a simulated step's trace and timeline", test_trace_files},
  };
  return px_test_main("report", tests, sizeof tests / sizeof tests[0]);
}
