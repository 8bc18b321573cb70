/* The validated error bands: the table's reader and writer, and a plan's band. */
#include "sim/bands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/paths.h"

#define BANDS_MAX_BYTES (1u << 20)
static const char header[] = "family\tprecision\tkind\tlaunch\truns\tmin_pct\tmax_pct\tmean_pct\tvalidations";
#define BAND_FIELDS 9

const char *px_band_kind_name(bool moe) { return moe ? "moe" : "dense"; }
const char *px_band_kind_words(bool moe) { return moe ? "MoE" : "dense"; }
const char *px_band_launch_name(bool graphed) { return graphed ? "graph" : "eager"; }
const char *px_band_launch_words(bool graphed) { return graphed ? "full-step graph" : "eager"; }

/* s as one of name(false) and name(true) into *v. */
static bool parse_pair(const char *s, const char *(*name)(bool), bool *v) {
  if (strcmp(s, name(false)) && strcmp(s, name(true))) return false;
  *v = !strcmp(s, name(true));
  return true;
}

bool px_band_kind_parse(const char *s, bool *moe) { return parse_pair(s, px_band_kind_name, moe); }
bool px_band_launch_parse(const char *s, bool *graphed) { return parse_pair(s, px_band_launch_name, graphed); }

void px_band_key_of(const px_model *m, const px_cluster *c, const px_parallel *p, px_band_key *k) {
  memset(k, 0, sizeof *k);
  size_t n = strcspn(c->gpu.name, "-");
  snprintf(k->family, sizeof k->family, "%.*s", (int)(n < sizeof k->family ? n : sizeof k->family - 1), c->gpu.name);
  bool known = p->precision >= 0 && p->precision < PX_PREC_COUNT;
  snprintf(k->precision, sizeof k->precision, "%s", known ? px_precision_names[p->precision] : "?");
  k->moe = m->experts > 0;
  k->graphed = p->cuda_graph == PX_GRAPH_FULL;
}

static bool key_eq(const px_band_key *a, const px_band_key *b) {
  return !strcmp(a->family, b->family) && !strcmp(a->precision, b->precision) && a->moe == b->moe &&
         a->graphed == b->graphed;
}

const px_band *px_bands_find(const px_bands *b, const px_band_key *k) {
  for (int i = 0; i < b->n; i++)
    if (key_eq(&b->v[i].key, k)) return &b->v[i];
  return NULL;
}


static int band_text(char *buf, size_t cap, const px_band *r) {
  return snprintf(buf, cap, "%s %s %s, %s: published runs %+.1f..%+.1f%% (%d run%s)", r->key.family,
                  r->key.precision, px_band_kind_words(r->key.moe), px_band_launch_words(r->key.graphed),
                  100 * r->min, 100 * r->max, r->runs, r->runs == 1 ? "" : "s");
}

void px_band_describe(const px_bands *b, const px_band_key *k, char *buf, size_t cap) {
  const px_band *r = px_bands_find(b, k);
  if (r) {
    band_text(buf, cap, r);
    return;
  }
  int n = snprintf(buf, cap, "no published run validates %s %s %s, %s", k->family, k->precision,
                   px_band_kind_words(k->moe), px_band_launch_words(k->graphed));
  /* the family's other precisions and launches, same kind */
  for (int i = 0; i < b->n && n >= 0 && (size_t)n < cap; i++)
    if (!strcmp(b->v[i].key.family, k->family) && b->v[i].key.moe == k->moe) {
      n += snprintf(buf + n, cap - (size_t)n, "; ");
      if ((size_t)n < cap) n += band_text(buf + n, cap - (size_t)n, &b->v[i]);
    }
}

/* ---- the table ---- */

static px_band *band_slot(px_bands *b, const px_band_key *k, px_err *err) {
  for (int i = 0; i < b->n; i++)
    if (key_eq(&b->v[i].key, k)) return &b->v[i];
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 16;
    px_band *v = realloc(b->v, (size_t)cap * sizeof *v);
    if (!v) {
      px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      return NULL;
    }
    b->v = v, b->cap = cap;
  }
  px_band *r = &b->v[b->n++];
  memset(r, 0, sizeof *r);
  r->key = *k;
  return r;
}

/* Whether item is one of list's "; "-separated items. */
static bool listed(const char *list, const char *item) {
  size_t n = strlen(item);
  for (const char *s = list; *s;) {
    size_t len = strcspn(s, ";");
    if (len == n && !strncmp(s, item, n)) return true;
    s += len;
    while (*s == ';' || *s == ' ') s++;
  }
  return false;
}

px_status px_bands_add(px_bands *b, const px_band_key *k, double err_frac, const char *source, px_err *err) {
  px_band *r = band_slot(b, k, err);
  if (!r) return PX_ERR_RUNTIME;
  if (!r->runs || err_frac < r->min) r->min = err_frac;
  if (!r->runs || err_frac > r->max) r->max = err_frac;
  r->mean = (r->mean * r->runs + err_frac) / (r->runs + 1);
  r->runs++;
  size_t n = strlen(r->sources);
  if (!listed(r->sources, source)) snprintf(r->sources + n, sizeof r->sources - n, "%s%s", n ? "; " : "", source);
  return PX_OK;
}

static int band_cmp(const void *a, const void *b) {
  const px_band *x = a, *y = b;
  int c = strcmp(x->key.family, y->key.family);
  if (!c) c = strcmp(x->key.precision, y->key.precision);
  if (!c) c = (int)x->key.moe - (int)y->key.moe;
  return c ? c : (int)x->key.graphed - (int)y->key.graphed;
}

void px_bands_write(px_bands *b, FILE *fp) {
  fputs("# parallax's validated error bands: for each GPU family, precision, kind of model and launch (eager: the\n"
        "# host issues the step's kernels, per-layer graphs included; graph: one full-step CUDA graph), the errors of\n"
        "# the validation tests' published runs (simulated throughput over the published one, less 1; above 0 the\n"
        "# simulator was optimistic), in percent. Written by `make docs` from the validation suites' own rows\n"
        "# (tests/validation/, PX_VALIDATION_BANDS); tests/cli/docs.sh fails where they differ. Do not edit.\n",
        fp);
  fprintf(fp, "%s\n", header);
  if (b->n) qsort(b->v, (size_t)b->n, sizeof *b->v, band_cmp);
  const px_band *v = b->v;
  for (int i = 0; i < b->n; i++)
    fprintf(fp, "%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", v[i].key.family, v[i].key.precision,
            px_band_kind_name(v[i].key.moe), px_band_launch_name(v[i].key.graphed), v[i].runs, 100 * v[i].min,
            100 * v[i].max, 100 * v[i].mean, v[i].sources);
}

/* A percentage field into a fraction. */
static bool pct(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || v < -1000 || v > 1000) return false;
  *out = v / 100;
  return true;
}

static px_status parse_row(char *line, const char *path, int lineno, px_bands *b, px_err *err) {
  char *f[BAND_FIELDS];
  int n = 0;
  for (char *p = line; n < BAND_FIELDS; n++) {
    f[n] = p;
    p = strchr(p, '\t');
    if (!p) {
      n++;
      break;
    }
    *p++ = '\0';
  }
  if (n != BAND_FIELDS)
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: expected %d tab-separated fields (%s)", path, lineno, BAND_FIELDS,
                      header);
  px_band_key k = {0};
  if (!*f[0] || strlen(f[0]) >= sizeof k.family)
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: field 'family': '%.32s' is not a GPU family", path, lineno, f[0]);
  snprintf(k.family, sizeof k.family, "%s", f[0]);
  int prec = -1;
  for (int i = 0; i < PX_PREC_COUNT; i++)
    if (!strcmp(f[1], px_precision_names[i])) prec = i;
  if (prec < 0) return px_err_set(err, PX_ERR_INPUT, "%s:%d: field 'precision': '%.16s' is not one", path, lineno, f[1]);
  snprintf(k.precision, sizeof k.precision, "%s", f[1]);
  if (!px_band_kind_parse(f[2], &k.moe))
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: field 'kind': '%.16s' is not dense or moe", path, lineno, f[2]);
  if (!px_band_launch_parse(f[3], &k.graphed))
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: field 'launch': '%.16s' is not eager or graph", path, lineno, f[3]);
  char *end;
  long runs = strtol(f[4], &end, 10);
  double lo, hi, mean;
  if (end == f[4] || *end || runs < 1 || runs > 100000)
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: field 'runs': '%.16s' is not a count from 1", path, lineno, f[4]);
  if (!pct(f[5], &lo) || !pct(f[6], &hi) || !pct(f[7], &mean) || lo > mean || mean > hi)
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: fields 'min_pct', 'max_pct', 'mean_pct': not percentages with min <= "
                      "mean <= max", path, lineno);
  if (px_bands_find(b, &k))
    return px_err_set(err, PX_ERR_INPUT, "%s:%d: a second row for %s %s %s %s", path, lineno, k.family, k.precision,
                      f[2], f[3]);
  px_band *r = band_slot(b, &k, err);
  if (!r) return PX_ERR_RUNTIME;
  r->runs = (int)runs, r->min = lo, r->max = hi, r->mean = mean;
  snprintf(r->sources, sizeof r->sources, "%s", f[8]);
  return PX_OK;
}

px_status px_bands_load(const char *path, px_bands *b, px_err *err) {
  memset(b, 0, sizeof *b);
  char def[4096];
  if (!path) {
    snprintf(def, sizeof def, "%s/topologies/validation_bands.tsv", px_data_dir());
    path = def;
  }
  char *text = NULL;
  size_t len = 0;
  px_status st = px_file_read(path, BANDS_MAX_BYTES, &text, &len, err);
  if (st) return st;
  int lineno = 0;
  bool seen_header = false;
  for (char *line = text, *next; !st && line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    lineno++;
    if (line[0] == '#' || !line[0]) continue;
    if (!seen_header) {
      if (strcmp(line, header))
        st = px_err_set(err, PX_ERR_INPUT, "%s:%d: expected the header '%s'", path, lineno, header);
      seen_header = true;
      continue;
    }
    st = parse_row(line, path, lineno, b, err);
  }
  if (!st && !seen_header) st = px_err_set(err, PX_ERR_INPUT, "%s: no header '%s'", path, header);
  free(text);
  if (st) px_bands_free(b);
  return st;
}

void px_bands_free(px_bands *b) {
  free(b->v);
  memset(b, 0, sizeof *b);
}
