/* Writes a sweep directory's index.html from sweep.json and the rendered PNGs:
 * a growable text buffer, HTML escaping and base64 for the data: URIs. */
#include "report/html.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "report/flags.h"
#include "report/plots.h"
#include "report/sweepjson.h"

#ifndef PX_VERSION
#define PX_VERSION "dev"
#endif

/* ---- output buffer ---- */

typedef struct {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static bool sb_reserve(sbuf *b, size_t extra) {
  if (b->oom) return false;
  if (b->n + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 1 << 16;
  while (cap < b->n + extra + 1) cap *= 2;
  char *np = realloc(b->p, cap);
  if (!np) {
    b->oom = true;
    return false;
  }
  b->p = np;
  b->cap = cap;
  return true;
}

static void sb_putn(sbuf *b, const char *s, size_t len) {
  if (!sb_reserve(b, len)) return;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (len < 0 || !sb_reserve(b, (size_t)len)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)len + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)len;
}

/* Text content or attribute value: & < > " ' escaped, other control characters dropped. */
static void sb_esc(sbuf *b, const char *s) {
  if (!s) return;
  for (; *s; s++) {
    switch (*s) {
      case '&': sb_puts(b, "&amp;"); break;
      case '<': sb_puts(b, "&lt;"); break;
      case '>': sb_puts(b, "&gt;"); break;
      case '"': sb_puts(b, "&quot;"); break;
      case '\'': sb_puts(b, "&#39;"); break;
      default:
        if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') sb_putn(b, s, 1);
    }
  }
}

static void sb_base64(sbuf *b, const unsigned char *d, size_t len) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (!sb_reserve(b, (len + 2) / 3 * 4)) return;
  char *o = b->p + b->n;
  size_t i = 0;
  for (; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
    *o++ = tab[v >> 18];
    *o++ = tab[(v >> 12) & 63];
    *o++ = tab[(v >> 6) & 63];
    *o++ = tab[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < len ? (uint32_t)d[i + 1] << 8 : 0);
    *o++ = tab[v >> 18];
    *o++ = tab[(v >> 12) & 63];
    *o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  b->n = (size_t)(o - b->p);
  b->p[b->n] = '\0';
}

/* ---- JSON access (absent or mistyped fields read as absent) ---- */

static const cJSON *jget(const cJSON *o, const char *key) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static bool jnum(const cJSON *o, const char *key, double *v) {
  const cJSON *it = jget(o, key);
  if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) return false;
  *v = it->valuedouble;
  return true;
}

static const char *jstr(const cJSON *o, const char *key) {
  const cJSON *it = jget(o, key);
  return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* A scalar as text: numbers with up to 6 significant digits. */
static void sb_scalar(sbuf *b, const cJSON *it) {
  if (cJSON_IsString(it))
    sb_esc(b, it->valuestring);
  else if (cJSON_IsNumber(it))
    sb_printf(b, "%.6g", it->valuedouble);
  else if (cJSON_IsBool(it))
    sb_puts(b, cJSON_IsTrue(it) ? "true" : "false");
  else if (cJSON_IsNull(it))
    sb_puts(b, "null");
}

/* "key value, key value, nested (k v, ...)" for every member of an object
 * but the skipped ones; an array's items without keys, "[a, b, (k v)]". */
static void sb_members(sbuf *b, const cJSON *o, const char *const *skip) {
  bool first = true, array = cJSON_IsArray(o);
  const cJSON *it;
  if (array) sb_puts(b, "[");
  cJSON_ArrayForEach(it, o) {
    bool skipped = false;
    for (const char *const *s = skip; s && *s && !array; s++) skipped = skipped || (it->string && !strcmp(it->string, *s));
    if (skipped) continue;
    if (!first) sb_puts(b, ", ");
    first = false;
    if (!array) {
      sb_puts(b, "<span class=\"k\">");
      sb_esc(b, it->string ? it->string : "");
      sb_puts(b, "</span> ");
    }
    if (cJSON_IsObject(it)) {
      sb_puts(b, "(");
      sb_members(b, it, NULL);
      sb_puts(b, ")");
    } else if (cJSON_IsArray(it)) {
      sb_members(b, it, NULL);
    } else {
      sb_scalar(b, it);
    }
  }
  if (array) sb_puts(b, "]");
  else if (first) sb_puts(b, "&mdash;");
}

/* ---- formatting ---- */

static void sb_grouped(sbuf *b, double v) {
  char buf[48];
  if (v < 0 || v > 1.8e19) {
    sb_printf(b, "%.4g", v);
    return;
  }
  sb_puts(b, px_fmt_grouped((uint64_t)llround(v), buf, sizeof buf));
}

static void sb_time(sbuf *b, double s) {
  char buf[48];
  sb_puts(b, px_fmt_time(s, buf, sizeof buf));
}

/* The flags that give one plan again: its "flags" (report/flags.c, px_report_plan_flags, the one mapping from
 * a plan's choices to the command line). */
static void sb_plan_flags(sbuf *b, const cJSON *plan) {
  const char *f = jstr(plan, "flags");
  if (f) sb_esc(b, f);
}

static const char css[] =
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#222;"
    "background:#fafafa;margin:0}\n"
    "main{max-width:1240px;margin:0 auto;padding:1.5em 2em 3em}\n"
    "h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd;"
    "padding-bottom:.2em}\n"
    ".sub{color:#666;margin:0 0 1em}\n"
    "table{border-collapse:collapse;background:#fff}\n"
    "th,td{padding:.3em .6em;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}\n"
    "th{background:#f0f0f0;font-weight:600}\n"
    "table.kv th{width:13em}\n"
    "table.plans td.num,table.plans th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "table.plans tr.best td{background:#fff6d5}\n"
    "table.plans tbody tr:nth-child(even) td{background:#f8f8f8}\n"
    "table.plans tbody tr.best:nth-child(even) td{background:#fff6d5}\n"
    "code{font:13px ui-monospace,'DejaVu Sans Mono',monospace}\n"
    ".tiles{display:flex;gap:1em;flex-wrap:wrap}\n"
    ".tile{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:.6em 1em;min-width:9em}\n"
    ".tile b{display:block;font-size:1.5em}\n"
    ".tile span{color:#666;font-size:.9em}\n"
    ".best-box{background:#fff;border-left:4px solid #d62728;padding:.6em 1em;margin:1em 0}\n"
    "figure{background:#fff;border:1px solid #e0e0e0;border-radius:6px;margin:1em 0;padding:1em}\n"
    "figure img{max-width:100%;height:auto;display:block;margin:0 auto}\n"
    "figcaption{color:#444;font-size:.93em;margin-top:.6em}\n"
    "ul.assume li{margin:.35em 0}\n"
    ".k{color:#555}\n"
    "footer{color:#888;font-size:.85em;margin-top:3em}\n";

static const char script[] =
    "window.addEventListener('load', function () {\n"
    "  var imgs = document.images, ok = 0;\n"
    "  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;\n"
    "  document.body.dataset.imagesOk = String(ok);\n"
    "  document.body.dataset.imagesTotal = String(imgs.length);\n"
    "});\n";

/* ---- sections ---- */

static void kv_row(sbuf *b, const char *key) {
  sb_puts(b, "<tr><th>");
  sb_puts(b, key);
  sb_puts(b, "</th><td>");
}

static void section_question(sbuf *b, const cJSON *q) {
  const cJSON *model = jget(q, "model"), *cluster = jget(q, "cluster"), *gpu = jget(cluster, "gpu");
  double v, gpus = 0, gbs = 0, seq = 0;
  sb_puts(b, "<section id=\"question\"><h2>The question</h2>\n<table class=\"kv\">\n");

  kv_row(b, "Model");
  sb_puts(b, "<b>");
  sb_esc(b, jstr(model, "name") ? jstr(model, "name") : "(unnamed)");
  sb_puts(b, "</b>");
  static const char *const mk[][2] = {{"layers", "layers"},     {"hidden", "hidden"}, {"heads", "heads"},
                                      {"kv_heads", "KV heads"}, {"ffn_hidden", "FFN"}, {"vocab", "vocab"}};
  bool any = false;
  for (size_t i = 0; i < sizeof mk / sizeof mk[0]; i++)
    if (jnum(model, mk[i][0], &v)) {
      sb_printf(b, "%s%s %.0f", any ? ", " : ": ", mk[i][1], v);
      any = true;
    }
  sb_puts(b, "</td></tr>\n");

  kv_row(b, "Cluster");
  sb_puts(b, "<b>");
  sb_esc(b, jstr(cluster, "name") ? jstr(cluster, "name") : "(unnamed)");
  sb_puts(b, "</b>");
  if (jstr(gpu, "name")) {
    sb_puts(b, ": ");
    sb_esc(b, jstr(gpu, "name"));
  }
  if (jnum(gpu, "hbm_gib", &v)) sb_printf(b, ", %.6g GiB HBM", v);
  if (jnum(jget(gpu, "peak_tflops"), "bf16", &v)) sb_printf(b, ", %.6g TFLOP/s bf16 dense", v);
  double gpn = 0;
  if (jnum(cluster, "gpus_per_node", &gpn)) sb_printf(b, ", %.0f GPUs per node", gpn);
  sb_puts(b, "</td></tr>\n");

  const cJSON *ov = jget(q, "overrides"), *o;
  if (cJSON_GetArraySize(ov) > 0) { /* the cluster fields set over the file's */
    kv_row(b, "Cluster fields set");
    int i = 0;
    cJSON_ArrayForEach(o, ov) if (cJSON_IsString(o)) {
      sb_puts(b, i++ ? ", <code>" : "<code>");
      sb_esc(b, o->valuestring);
      sb_puts(b, "</code>");
    }
    sb_puts(b, "</td></tr>\n");
  }
  const char *not_planned = jstr(jget(q, "not_planned"), "text"); /* what of the model no plan has (report/plan.c) */
  if (not_planned) {
    kv_row(b, "Not planned");
    sb_esc(b, not_planned);
    sb_puts(b, "</td></tr>\n");
  }

  kv_row(b, "GPUs");
  if (jnum(q, "gpus", &gpus)) {
    sb_grouped(b, gpus);
    if (gpn > 0) sb_printf(b, " (%.6g nodes)", gpus / gpn);
  } else {
    sb_puts(b, "&mdash;");
  }
  sb_puts(b, "</td></tr>\n");

  bool have_gbs = jnum(q, "gbs", &gbs), have_seq = jnum(q, "seq", &seq);
  kv_row(b, "Global batch");
  if (have_gbs) {
    sb_grouped(b, gbs);
    sb_puts(b, " sequences");
    if (have_seq) {
      sb_puts(b, " = ");
      sb_grouped(b, gbs * seq);
      sb_puts(b, " tokens per step");
    }
  } else {
    sb_puts(b, "&mdash;");
  }
  sb_puts(b, "</td></tr>\n");

  kv_row(b, "Sequence length");
  if (have_seq)
    sb_grouped(b, seq);
  else
    sb_puts(b, "&mdash;");
  sb_puts(b, " tokens");
  if (jstr(q, "seq_from")) sb_puts(b, " (the Hugging Face config's max_position_embeddings: no sequence length was given)");
  sb_puts(b, "</td></tr>\n");

  kv_row(b, "Training tokens");
  if (jnum(q, "tokens", &v) && v > 0) {
    char buf[48];
    sb_puts(b, px_fmt_count(v, buf, sizeof buf));
  } else {
    sb_puts(b, "not given (no time to train)");
  }
  sb_puts(b, "</td></tr>\n");

  kv_row(b, "Price");
  if (jnum(q, "price_usd_per_gpu_hour", &v) && v > 0)
    sb_printf(b, "$%.4g per GPU-hour", v);
  else
    sb_puts(b, "not given (no cost)");
  sb_puts(b, "</td></tr>\n");

  const cJSON *precs = jget(q, "precisions");
  if (cJSON_GetArraySize(precs) > 0) {
    kv_row(b, "Precisions searched");
    const cJSON *it;
    int k = 0;
    cJSON_ArrayForEach(it, precs) {
      if (!cJSON_IsString(it)) continue;
      sb_puts(b, k++ ? ", " : "");
      sb_esc(b, it->valuestring);
    }
    sb_puts(b, "</td></tr>\n");
  }

  kv_row(b, "Objective");
  sb_esc(b, jstr(q, "objective") ? jstr(q, "objective") : "throughput");
  sb_puts(b, "</td></tr>\n");

  kv_row(b, "Failures");
  if (jnum(q, "mtbf_hours", &v) && v > 0)
    sb_printf(b, "mean time between failures %.6g hours per GPU", v);
  else
    sb_puts(b, "not modelled");
  sb_puts(b, "</td></tr>\n");

  /* question.fixed holds only what the user fixed, each as its flag (a false switch is no flag) */
  kv_row(b, "Fixed choices");
  const cJSON *fixed = jget(q, "fixed");
  const cJSON *it;
  any = false;
  cJSON_ArrayForEach(it, fixed) {
    if (!it->string || cJSON_IsFalse(it)) continue;
    sb_puts(b, any ? " <code>--" : "<code>--");
    for (const char *k = it->string; *k; k++) { /* the JSON key as its flag: bucket_mib -> --bucket-mib */
      char ch[2] = {*k == '_' ? '-' : *k, '\0'};
      sb_esc(b, ch);
    }
    if (!cJSON_IsTrue(it)) {
      sb_puts(b, " ");
      sb_scalar(b, it);
    }
    sb_puts(b, "</code>");
    any = true;
  }
  if (!any) sb_puts(b, "none: every dimension swept");
  sb_puts(b, "</td></tr>\n</table></section>\n");
}

/* The plans that fit: counts.fit (a sweep.json before it: the plans it holds). */
static double plans_fit(const cJSON *counts, int nplans) {
  double v;
  return jnum(counts, "fit", &v) ? v : nplans;
}

static void section_counts(sbuf *b, const cJSON *counts, int nplans) {
  static const char *const keys[][2] = {{"enumerated", "plans enumerated"},
                                        {"invalid", "invalid combinations"},
                                        {"dropped_memory", "dropped: do not fit in memory"},
                                        {"simulated", "simulated"},
                                        {"bounded", "fit, shown by their bound"}};
  sb_puts(b, "<section id=\"counts\"><h2>The search</h2>\n<div class=\"tiles\">\n");
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    double v;
    if (!strcmp(keys[i][0], "bounded") && !jnum(counts, "bounded", &v)) continue; /* a sweep that simulated all */
    sb_puts(b, "<div class=\"tile\"><b>");
    if (jnum(counts, keys[i][0], &v))
      sb_grouped(b, v);
    else
      sb_puts(b, "&mdash;");
    sb_printf(b, "</b><span>%s</span></div>\n", keys[i][1]);
  }
  sb_puts(b, "<div class=\"tile\"><b>");
  sb_grouped(b, plans_fit(counts, nplans));
  sb_puts(b, "</b><span>plans that fit, ranked</span></div>\n");
  sb_puts(b, "</div></section>\n");
}

/* Why the best plan's ZeRO stage and mode: sweep.json's zero_choice. */
static void zero_choice(sbuf *b, const cJSON *zc) {
  const cJSON *alts = jget(zc, "alternatives");
  if (!jstr(zc, "best") || cJSON_GetArraySize(alts) == 0) return;
  sb_puts(b, "<br>ZeRO: <code>");
  sb_esc(b, jstr(zc, "best"));
  sb_puts(b, "</code>; the same split with ");
  int i = 0;
  const cJSON *a;
  cJSON_ArrayForEach(a, alts) {
    double v;
    sb_puts(b, i++ ? ", <code>" : "<code>");
    sb_esc(b, jstr(a, "zero") ? jstr(a, "zero") : "?");
    sb_puts(b, "</code> ");
    if (jnum(a, "tokens_per_s_ratio", &v))
      sb_printf(b, "%+.1f%% tokens/s", 100 * (v - 1));
    else if (jnum(a, "peak_bytes", &v))
      sb_printf(b, "does not fit (%.1f GiB)", v / (1024.0 * 1024 * 1024));
  }
}

/* The best plan in the other precision: sweep.json's precision_choice. */
static void precision_choice(sbuf *b, const cJSON *pc) {
  double v;
  if (!jstr(pc, "best") || !jstr(pc, "other")) return;
  sb_puts(b, "<br>Precision: <code>");
  sb_esc(b, jstr(pc, "best"));
  sb_puts(b, "</code>; the same plan in <code>");
  sb_esc(b, jstr(pc, "other"));
  sb_puts(b, "</code> ");
  if (jnum(pc, "tokens_per_s_ratio", &v))
    sb_printf(b, "%+.1f%% tokens/s", 100 * (v - 1));
  else if (jnum(pc, "peak_bytes", &v))
    sb_printf(b, "does not fit (%.1f GiB)", v / (1024.0 * 1024 * 1024));
}

static void section_best(sbuf *b, const cJSON *best, const cJSON *zc, const cJSON *pc, const char *objective) {
  if (!best) return;
  double v;
  sb_puts(b, "<div class=\"best-box\"><b>Best plan");
  if (objective) {
    sb_puts(b, " for ");
    sb_esc(b, objective);
  }
  sb_puts(b, ":</b> <code>");
  sb_plan_flags(b, best);
  sb_puts(b, "</code><br>");
  if (jnum(best, "tokens_per_s", &v)) {
    sb_grouped(b, v);
    sb_puts(b, " tokens/s");
  }
  if (jnum(best, "step_time_s", &v)) {
    sb_puts(b, ", ");
    sb_time(b, v);
    sb_puts(b, " per step");
  }
  if (jnum(best, "mfu", &v)) {
    const char *peak = jstr(best, "mfu_peak"), *own = jstr(best, "mfu_precision_peak");
    double w;
    sb_printf(b, ", MFU %.1f%%", 100 * v);
    if (peak) {
      sb_puts(b, " of ");
      sb_esc(b, peak);
      sb_puts(b, " peak");
    }
    if (peak && own && strcmp(peak, own) && jnum(best, "mfu_precision", &w) && w != v) {
      sb_printf(b, " (%.1f%% of ", 100 * w);
      sb_esc(b, own);
      sb_puts(b, " peak)");
    }
  }
  if (jnum(jget(best, "memory"), "peak_bytes_max", &v)) sb_printf(b, ", %.1f GiB per GPU", v / (1024.0 * 1024 * 1024));
  const cJSON *tt = jget(best, "time_to_train");
  if (jnum(tt, "days", &v) && v > 0) sb_printf(b, ", %.1f days to train", v);
  if (jnum(tt, "cost_usd", &v) && v > 0) {
    sb_puts(b, " for $");
    sb_grouped(b, v);
  }
  if (jnum(tt, "energy_mwh", &v) && v > 0) { /* with the cluster's power figures (sim/power.h) */
    sb_printf(b, ", %.3g MWh at the site", v);
    if (jnum(tt, "energy_cost_usd", &v) && v > 0) {
      sb_puts(b, " ($");
      sb_grouped(b, v);
      sb_puts(b, ")");
    }
  }
  zero_choice(b, zc);
  precision_choice(b, pc);
  const char *trust = jstr(jget(best, "validation"), "text"); /* how far to trust the prediction (sim/bands.h) */
  if (trust) {
    sb_puts(b, "<br><b>How far to trust it:</b> ");
    sb_esc(b, trust);
    sb_puts(b, " (simulated over published throughput, less 1: above 0 the simulator was optimistic; "
               "docs/validation.md)");
  }
  sb_puts(b, "</div>\n");
}

/* Where the best plan's step goes: its row's breakdown as a bar of the step and a table. */
static void section_breakdown(sbuf *b, const cJSON *best) {
  const cJSON *bd = jget(best, "breakdown"), *ex = jget(bd, "exposed_s");
  if (!bd) return;
  static const char *const colors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#7f7f7f", "#d62728", "#ff7f0e",
                                       "#e377c2", "#bcbd22", "#17becf", "#aec7e8", "#c49c94"};
  const char *names[16];
  bool exposed[16] = {0};
  double v[16], total = 0;
  int n = 0;
  static const char *const own[][2] = {{"forward_s", "forward"},   {"backward_s", "backward"},
                                       {"recompute_s", "recomputation"}, {"optimizer_s", "optimizer"},
                                       {"bubble_s", "pipeline bubble"}};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (jnum(bd, own[i][0], &v[n])) names[n++] = own[i][1];
  const cJSON *it;
  cJSON_ArrayForEach(it, ex) {
    if (n < 14 && cJSON_IsNumber(it) && it->string) exposed[n] = true, names[n] = it->string, v[n++] = it->valuedouble;
  }
  if (jnum(bd, "contention_s", &v[n])) names[n++] = "SM contention";
  if (jnum(bd, "launch_s", &v[n])) names[n++] = "host launches";
  for (int i = 0; i < n; i++) total += v[i] > 0 ? v[i] : 0;
  if (total <= 0) return;
  double stage = 0;
  jnum(bd, "stage", &stage);
  sb_printf(b, "<section id=\"breakdown\"><h2>Where the best plan&#39;s step goes</h2>\n<p>Stage %.0f, the last to "
               "finish: its compute stream from the step&#39;s start to its end, simulated event by event. Exposed "
               "communication is the time it waits for collectives or transfers of that kind; the bubble, for "
               "another stage.</p>\n<div style=\"display:flex;height:1.6em;border:1px solid #ccc\">", stage);
  for (int i = 0; i < n; i++)
    if (v[i] > 0) {
      sb_puts(b, exposed[i] ? "<div title=\"exposed " : "<div title=\"");
      sb_esc(b, names[i]);
      sb_printf(b, "\" style=\"width:%.3f%%;background:%s\"></div>", 100 * v[i] / total, colors[i % 12]);
    }
  sb_puts(b, "</div>\n<table class=\"plans\"><thead><tr><th></th><th>part</th><th class=\"num\">time</th>"
             "<th class=\"num\">share</th></tr></thead><tbody>\n");
  for (int i = 0; i < n; i++) {
    if (v[i] <= 0 && i >= 4) continue; /* a bubble or communication this plan has none of */
    sb_printf(b, "<tr><td style=\"background:%s;width:1em\"></td><td>", colors[i % 12]);
    if (exposed[i]) sb_puts(b, "exposed ");
    sb_esc(b, names[i]);
    sb_puts(b, "</td><td class=\"num\">");
    sb_time(b, v[i]);
    sb_printf(b, "</td><td class=\"num\">%.1f%%</td></tr>\n", 100 * v[i] / total);
  }
  sb_puts(b, "</tbody></table></section>\n");
}

static void section_plans(sbuf *b, const cJSON *plans, const cJSON *counts) {
  int n = cJSON_IsArray(plans) ? cJSON_GetArraySize(plans) : 0;
  bool days = false, cost = false, energy = false;
  const cJSON *p;
  double v;
  cJSON_ArrayForEach(p, plans) {
    const cJSON *tt = jget(p, "time_to_train");
    days = days || jnum(tt, "days", &v);
    cost = cost || (jnum(tt, "cost_usd", &v) && v > 0);
    energy = energy || (jnum(tt, "energy_mwh", &v) && v > 0);
  }
  double fit = plans_fit(counts, n);
  sb_printf(b, "<section id=\"plans\"><h2>Ranked plans</h2>\n<p>The %d best of ", n < PX_HTML_TOP_PLANS ? n : PX_HTML_TOP_PLANS);
  sb_grouped(b, fit);
  sb_printf(b, " plans that fit, best first%s", fit > n ? " (sweep.json beside this page holds the best " : ".");
  char csv[64];
  if (fit > n) sb_printf(b, "%d; <code>parallax sweep %s FILE</code> writes them all).", n, px_report_flag("csv", csv));
  sb_puts(b, "</p>\n");
  if (n == 0) {
    sb_puts(b, "<p>No plan fits in GPU memory.</p></section>\n");
    return;
  }
  sb_puts(b, "<table class=\"plans\"><thead><tr><th class=\"num\">#</th><th>plan</th>"
             "<th class=\"num\">step time</th><th class=\"num\">tokens/s</th><th class=\"num\">MFU</th>"
             "<th class=\"num\">memory per GPU</th><th class=\"num\">compute idle</th><th class=\"num\">exposed comm</th>");
  if (days) sb_puts(b, "<th class=\"num\">days</th>");
  if (cost) sb_puts(b, "<th class=\"num\">cost</th>");
  if (energy) sb_puts(b, "<th class=\"num\">energy (MWh)</th>");
  sb_puts(b, "</tr></thead>\n<tbody>\n");
  int row = 0;
  cJSON_ArrayForEach(p, plans) {
    if (row >= PX_HTML_TOP_PLANS) break;
    double rank = row + 1;
    jnum(p, "rank", &rank);
    sb_printf(b, "<tr%s><td class=\"num\">%.0f</td><td><code>", row == 0 ? " class=\"best\"" : "", rank);
    sb_plan_flags(b, p);
    sb_puts(b, "</code></td><td class=\"num\">");
    if (jnum(p, "step_time_s", &v)) sb_time(b, v);
    sb_puts(b, "</td><td class=\"num\">");
    if (jnum(p, "tokens_per_s", &v)) sb_grouped(b, v);
    sb_puts(b, "</td><td class=\"num\">");
    if (jnum(p, "mfu", &v)) sb_printf(b, "%.1f%%", 100 * v);
    sb_puts(b, "</td><td class=\"num\">");
    if (jnum(jget(p, "memory"), "peak_bytes_max", &v)) sb_printf(b, "%.1f GiB", v / (1024.0 * 1024 * 1024));
    sb_puts(b, "</td><td class=\"num\">");
    if (jnum(p, "bubble_fraction", &v)) sb_printf(b, "%.1f%%", 100 * v);
    sb_puts(b, "</td><td class=\"num\">");
    if (jnum(jget(p, "comm"), "exposed_s", &v)) sb_time(b, v);
    sb_puts(b, "</td>");
    const cJSON *tt = jget(p, "time_to_train");
    if (days) {
      sb_puts(b, "<td class=\"num\">");
      if (jnum(tt, "days", &v)) sb_printf(b, "%.1f", v);
      sb_puts(b, "</td>");
    }
    if (cost) {
      sb_puts(b, "<td class=\"num\">");
      if (jnum(tt, "cost_usd", &v)) {
        sb_puts(b, "$");
        sb_grouped(b, v);
      }
      sb_puts(b, "</td>");
    }
    if (energy) {
      sb_puts(b, "<td class=\"num\">");
      if (jnum(tt, "energy_mwh", &v)) sb_printf(b, "%.3g", v);
      sb_puts(b, "</td>");
    }
    sb_puts(b, "</tr>\n");
    row++;
  }
  sb_puts(b, "</tbody></table>\n<p class=\"sub\">MFU is model FLOP/s per GPU over the GPU&#39;s dense peak the "
             "best plan names above, whatever a plan&#39;s precision (Megatron-Bridge&#39;s and PaLM&#39;s convention); "
             "memory per GPU is the peak of the largest pipeline stage; "
             "exposed comm is communication time not hidden behind compute, including the compute "
             "that collectives' SMs take from the kernels beside them.</p></section>\n");
}

static px_status section_plots(sbuf *b, const char *dir, px_err *err) {
  size_t n;
  const px_plot_desc *pl = px_plots_list(&n);
  sb_puts(b, "<section id=\"plots\"><h2>Plots</h2>\n");
  int shown = 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    int w = snprintf(path, sizeof path, "%s/%s.png", dir, pl[i].name);
    if (w < 0 || (size_t)w >= sizeof path) return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
    if (!px_file_exists(path)) continue;
    char *data = NULL;
    size_t len = 0;
    px_status st = px_file_read(path, (size_t)64 << 20, &data, &len, err);
    if (st) return st;
    sb_printf(b, "<figure id=\"plot-%s\"><img alt=\"%s\" src=\"data:image/png;base64,", pl[i].name, pl[i].title);
    sb_base64(b, (const unsigned char *)data, len);
    free(data);
    sb_printf(b, "\"><figcaption><b>%s.</b> %s (Vector version: %s.svg beside this page.)</figcaption></figure>\n",
              pl[i].title, pl[i].caption, pl[i].name);
    shown++;
  }
  if (!shown) sb_puts(b, "<p>No plots were rendered in this directory.</p>\n");
  sb_puts(b, "</section>\n");
  return PX_OK;
}

static void assumption(sbuf *b, const char *what) {
  sb_puts(b, "<li><b>");
  sb_puts(b, what);
  sb_puts(b, "</b> ");
}

static void section_assumptions(sbuf *b, const cJSON *root) {
  const cJSON *q = jget(root, "question"), *model = jget(q, "model"), *cluster = jget(q, "cluster");
  const cJSON *gpu = jget(cluster, "gpu");
  sb_puts(b, "<section id=\"assumptions\"><h2>Assumptions and their sources</h2>\n<ul class=\"assume\">\n");

  assumption(b, "Cluster");
  sb_puts(b, "<code>");
  sb_esc(b, jstr(cluster, "name") ? jstr(cluster, "name") : "?");
  sb_puts(b, "</code>: ");
  sb_esc(b, jstr(cluster, "source") ? jstr(cluster, "source") : "no source given.");
  sb_puts(b, "</li>\n");

  assumption(b, "Model");
  sb_puts(b, "<code>");
  sb_esc(b, jstr(model, "name") ? jstr(model, "name") : "?");
  sb_puts(b, "</code>: ");
  sb_esc(b, jstr(model, "source") ? jstr(model, "source") : "no source given.");
  sb_puts(b, "</li>\n");

  static const char *const gpu_skip[] = {"name", "source", NULL};
  assumption(b, "Efficiency model: GPU");
  sb_puts(b, "<code>");
  sb_esc(b, jstr(gpu, "name") ? jstr(gpu, "name") : "?");
  sb_puts(b, "</code> (compute time = max(FLOPs / (peak &times; GEMM efficiency), bytes / (HBM bandwidth "
             "&times; memory efficiency)) plus a per-kernel overhead): ");
  sb_members(b, gpu, gpu_skip);
  sb_puts(b, ".</li>\n");
  static const char *const no_skip[] = {"source", NULL};
  assumption(b, "Network within a node:");
  sb_members(b, jget(cluster, "intra_node"), no_skip);
  sb_puts(b, ".</li>\n");
  assumption(b, "Network between nodes:");
  sb_members(b, jget(cluster, "inter_node"), no_skip);
  sb_puts(b, ".</li>\n");

  assumption(b, "Failure model:");
  double mtbf = 0, gpus = 0, v;
  jnum(q, "mtbf_hours", &mtbf);
  jnum(q, "gpus", &gpus);
  if (mtbf > 0) {
    sb_printf(b, "mean time between failures %.6g hours per GPU", mtbf);
    if (gpus > 0) sb_printf(b, ", so %.3g hours for the %.0f GPUs together", mtbf / gpus, gpus);
    const cJSON *plans = jget(root, "plans");
    const cJSON *tt = jget(cJSON_IsArray(plans) ? cJSON_GetArrayItem(plans, 0) : NULL, "time_to_train");
    if (jnum(tt, "checkpoint_interval_s", &v)) {
      sb_puts(b, "; for the best plan a checkpoint every ");
      sb_time(b, v);
      if (jnum(tt, "checkpoint_write_s", &v)) {
        sb_puts(b, ", each taking ");
        sb_time(b, v);
        sb_puts(b, " to write");
      }
    }
    if (jnum(tt, "goodput", &v)) sb_printf(b, "; goodput %.1f%%", 100 * v);
    sb_puts(b, ".");
  } else {
    sb_puts(b, "none: no failures or checkpoints are counted.");
  }
  sb_puts(b, "</li>\n");

  const cJSON *it;
  cJSON_ArrayForEach(it, jget(root, "assumptions")) {
    sb_puts(b, "<li>");
    if (cJSON_IsString(it))
      sb_esc(b, it->valuestring);
    else
      sb_scalar(b, it);
    sb_puts(b, "</li>\n");
  }
  sb_puts(b, "</ul></section>\n");
}

px_status px_html_report(const char *dir, px_err *err) {
  cJSON *root = NULL;
  px_status st = px_report_sweep_load(dir, &root, err);
  if (st) return st;
  const cJSON *plans = jget(root, "plans");
  const cJSON *q = jget(root, "question"), *model = jget(q, "model"), *gpu = jget(jget(q, "cluster"), "gpu");
  double gpus = 0;
  jnum(q, "gpus", &gpus);

  sbuf b = {0};
  sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
              "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>parallax sweep: ");
  sb_esc(&b, jstr(model, "name") ? jstr(model, "name") : "model");
  sb_printf(&b, " on %.0f &times; ", gpus);
  sb_esc(&b, jstr(gpu, "name") ? jstr(gpu, "name") : "GPU");
  sb_printf(&b, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<h1>Parallel plans for ", css);
  sb_esc(&b, jstr(model, "name") ? jstr(model, "name") : "the model");
  sb_printf(&b, " on %.0f &times; ", gpus);
  sb_esc(&b, jstr(gpu, "name") ? jstr(gpu, "name") : "GPU");
  sb_puts(&b, "</h1>\n<p class=\"sub\">Every tensor &times; pipeline &times; data-parallel plan, ZeRO stage, "
              "micro-batch, schedule and recomputation choice, simulated by parallax and ranked.</p>\n");
  section_question(&b, q);
  section_counts(&b, jget(root, "counts"), plans ? cJSON_GetArraySize(plans) : 0);
  section_best(&b, plans ? cJSON_GetArrayItem(plans, 0) : NULL, jget(root, "zero_choice"), jget(root, "precision_choice"),
               jstr(q, "objective"));
  section_plans(&b, plans, jget(root, "counts"));
  section_breakdown(&b, plans ? cJSON_GetArrayItem(plans, 0) : NULL);
  st = section_plots(&b, dir, err);
  if (!st) {
    section_assumptions(&b, root);
    sb_printf(&b, "<footer>Written by parallax %s from sweep.json and the plots beside this page.</footer>\n</main>\n<script>\n%s</script>\n"
                  "</body>\n</html>\n",
              PX_VERSION, script);
  }
  cJSON_Delete(root);
  if (!st && b.oom) st = px_err_set(err, PX_ERR_RUNTIME, "%s/index.html: out of memory", dir);
  char path[4096];
  int w = snprintf(path, sizeof path, "%s/index.html", dir);
  if (!st) {
    if (w < 0 || (size_t)w >= sizeof path)
      st = px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
    else
      st = px_file_write(path, b.p, b.n, err);
  }
  free(b.p);
  return st;
}
