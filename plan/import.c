/* Measured curves into a cluster: nccl-tests outputs and GEMM CSVs. */
#include "plan/import.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fileio.h"
#include "core/paths.h"

#define IMPORT_MAX_BYTES (64u << 20)

/* Splits a line in place on whitespace (or on sep when not 0); returns the tokens found. */
static int split(char *line, char sep, char **tok, int max) {
  int n = 0;
  char *p = line;
  while (*p && n < max) {
    if (!sep)
      while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) break;
    tok[n++] = p;
    while (*p && (sep ? *p != sep : !isspace((unsigned char)*p))) p++;
    if (*p) *p++ = '\0';
  }
  return n;
}

static bool parse_num(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  while (*end && isspace((unsigned char)*end)) end++;
  if (end == s || *end || errno) return false;
  *out = v;
  return true;
}

/* The collective a name says (all_reduce, all_reduce_perf, .../all_gather_perf.txt); 0: none. */
static int coll_in(const char *name) {
  for (int k = 1; k < PX_COLL_COUNT; k++)
    if (strstr(name, px_busbw_coll_names[k])) return k;
  return 0;
}

typedef struct {
  char host[64];
} host_name;

/* One nccl-tests output: its out-of-place busbw per size into c's curve of
 * the link class it ran on. */
static px_status import_nccl(px_cluster *c, const char *path, int coll, char *text, char *note, size_t note_cap,
                             px_err *err) {
  host_name hosts[64];
  int nhosts = 0;
  int64_t ranks = 0;
  px_busbw_point pts[PX_BUSBW_MAX];
  int npts = 0, lineno = 0;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    lineno++;
    char *tok[32];
    int nt = split(line, 0, tok, 32);
    if (nt == 0) continue;
    if (tok[0][0] == '#') {
      /* "#  Rank  3 Group  0 Pid 316 on HOST device  3 [0x5d] NVIDIA H100 80GB HBM3" */
      for (int i = 0; i + 1 < nt; i++) {
        if (!strcmp(tok[i], "Rank") && i == 1) ranks++;
        if (!strcmp(tok[i], "on") && i > 2 && !strcmp(tok[1], "Rank")) {
          int h;
          for (h = 0; h < nhosts && strcmp(hosts[h].host, tok[i + 1]); h++) {
          }
          if (h == nhosts && nhosts < 64) snprintf(hosts[nhosts++].host, sizeof hosts[0].host, "%s", tok[i + 1]);
        }
        if (!strcmp(tok[i], "concluded:") && !coll) coll = coll_in(tok[i + 1]);
      }
      continue;
    }
    /* size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong */
    double size, busbw;
    if (nt < 10 || !parse_num(tok[0], &size) || size < 1 || !parse_num(tok[nt - 6], &busbw) || busbw < 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "%s:%d: not an nccl-tests result row (size count type redop [root] then time, algbw, busbw, "
                        "#wrong out of place and in place)",
                        path, lineno);
    if (busbw <= 0) continue; /* a size too small to show in two decimals */
    if (npts == PX_BUSBW_MAX)
      return px_err_set(err, PX_ERR_INPUT, "%s: more than %d result rows", path, PX_BUSBW_MAX);
    pts[npts++] = (px_busbw_point){coll, 0, 0, (uint64_t)size, busbw * 1e9};
  }
  if (!coll)
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: which collective? no '# Collective test concluded:' line and no all_reduce, all_gather, "
                      "reduce_scatter, sendrecv or alltoall in its name (name it: all_reduce=%s)",
                      path, path);
  if (ranks < 2 || nhosts < 1)
    return px_err_set(err, PX_ERR_INPUT, "%s: no '#  Rank N ... on HOST' lines for 2 or more ranks: cannot tell the "
                      "ranks and nodes it ran on (keep nccl-tests' header)", path);
  if (npts == 0) return px_err_set(err, PX_ERR_INPUT, "%s: no result rows with a bus bandwidth above 0", path);
  px_link link = nhosts > 1 ? PX_LINK_INTER : PX_LINK_INTRA;
  /* the file's points replace the cluster's of that collective on that link */
  px_busbw_point *dst = c->busbw[link];
  int kept = 0;
  for (int i = 0; i < c->busbw_len[link]; i++)
    if (dst[i].coll != coll) dst[kept++] = dst[i];
  if (kept + npts > PX_BUSBW_MAX)
    return px_err_set(err, PX_ERR_INPUT, "%s: the cluster would hold more than %d %s-node points", path, PX_BUSBW_MAX,
                      px_link_names[link]);
  for (int i = 0; i < npts; i++) {
    pts[i].coll = coll, pts[i].ranks = ranks, pts[i].nodes = nhosts;
    dst[kept++] = pts[i];
  }
  c->busbw_len[link] = kept;
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  snprintf(note, note_cap, "%s (nccl-tests %s, %lld ranks on %d node%s)", base, px_busbw_coll_names[coll],
           (long long)ranks, nhosts, nhosts == 1 ? "" : "s");
  return px_cluster_add_source(c, link == PX_LINK_INTER ? "inter_node.busbw" : "intra_node.busbw", note, err);
}

/* A GEMM benchmark CSV: header with m, n, k, dtype, tflops (any order). */
static px_status import_gemm(px_cluster *c, const char *path, char *text, px_gemm_point *table, int *len, px_err *err) {
  static const char *const want[] = {"m", "n", "k", "dtype", "tflops"};
  int col[5] = {-1, -1, -1, -1, -1}, lineno = 0;
  bool header = false;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    lineno++;
    char *tok[32];
    int nt = split(line, ',', tok, 32);
    for (int i = 0; i < nt; i++) { /* trim */
      while (isspace((unsigned char)*tok[i])) tok[i]++;
      for (char *e = tok[i] + strlen(tok[i]); e > tok[i] && isspace((unsigned char)e[-1]);) *--e = '\0';
    }
    if (nt == 0 || (nt == 1 && !*tok[0]) || tok[0][0] == '#') continue;
    if (!header) {
      for (int i = 0; i < nt; i++)
        for (int w = 0; w < 5; w++)
          if (!strcasecmp(tok[i], want[w])) col[w] = i;
      for (int w = 0; w < 5; w++)
        if (col[w] < 0) return px_err_set(err, PX_ERR_INPUT, "%s:%d: the header has no '%s' column (m,n,k,dtype,tflops)", path, lineno, want[w]);
      header = true;
      continue;
    }
    double v[3], tflops;
    int dt = -1;
    for (int w = 0; w < 3; w++)
      if (col[w] >= nt || !parse_num(tok[col[w]], &v[w]) || v[w] < 1 || v[w] > 1e9)
        return px_err_set(err, PX_ERR_INPUT, "%s:%d: '%s' is not a size from 1", path, lineno, want[w]);
    for (int d = 0; col[3] < nt && d < PX_DTYPE_COUNT; d++)
      if (!strcasecmp(tok[col[3]], px_dtype_names[d])) dt = d;
    if (dt < 0) return px_err_set(err, PX_ERR_INPUT, "%s:%d: dtype '%s' is not fp32, tf32, bf16, fp16 or fp8", path, lineno, col[3] < nt ? tok[col[3]] : "");
    if (col[4] >= nt || !parse_num(tok[col[4]], &tflops) || tflops <= 0)
      return px_err_set(err, PX_ERR_INPUT, "%s:%d: 'tflops' is not a positive number", path, lineno);
    double peak = c->gpu.peak_flops[dt];
    if (peak <= 0)
      return px_err_set(err, PX_ERR_INPUT, "%s:%d: the cluster's %s has no %s peak to measure against", path, lineno, c->gpu.name, px_dtype_names[dt]);
    if (tflops * 1e12 > peak * 1.0001)
      return px_err_set(err, PX_ERR_INPUT, "%s:%d: %g TFLOP/s is above the %s's %s peak of %g (wrong GPU or dtype?)", path, lineno,
                        tflops, c->gpu.name, px_dtype_names[dt], peak / 1e12);
    if (*len == PX_GEMM_TABLE_MAX) return px_err_set(err, PX_ERR_INPUT, "%s: more than %d GEMM rows in all", path, PX_GEMM_TABLE_MAX);
    double eff = tflops * 1e12 / peak;
    table[(*len)++] = (px_gemm_point){(int64_t)v[0], (int64_t)v[1], (int64_t)v[2], eff > 1 ? 1 : eff, dt};
  }
  if (!header) return px_err_set(err, PX_ERR_INPUT, "%s: empty: expected a header m,n,k,dtype,tflops and rows", path);
  return PX_OK;
}

px_status px_cluster_import(px_cluster *c, const char *const *files, int n, px_err *err) {
  px_cluster *next = malloc(sizeof *next);
  px_gemm_point *table = malloc(PX_GEMM_TABLE_MAX * sizeof *table);
  if (!next || !table) {
    free(next), free(table);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  *next = *c;
  int ngemm = 0, csvs = 0;
  px_status st = PX_OK;
  size_t used = strlen(next->source);
  for (int i = 0; i < n && !st; i++) {
    const char *arg = files[i], *path = arg, *eq = strchr(arg, '=');
    int coll = 0;
    if (eq && (!strchr(arg, '/') || eq < strchr(arg, '/'))) { /* KIND=FILE */
      char kind[32];
      snprintf(kind, sizeof kind, "%.*s", (int)(eq - arg < 31 ? eq - arg : 31), arg);
      if (!(coll = coll_in(kind)) || strlen(kind) != strlen(px_busbw_coll_names[coll])) {
        st = px_err_set(err, PX_ERR_INPUT, "%s: '%s' is not all_reduce, all_gather, reduce_scatter, sendrecv or alltoall", arg,
                        kind);
        break;
      }
      path = eq + 1;
    }
    char *text = NULL;
    size_t len = 0;
    if ((st = px_file_read(path, IMPORT_MAX_BYTES, &text, &len, err))) break;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char note[512] = "";
    /* a CSV: its first line that is not a '#' comment has a comma */
    const char *first = text + strspn(text, " \t\r\n");
    while (*first == '#' && strchr(first, '\n')) first = strchr(first, '\n') + 1 + strspn(strchr(first, '\n') + 1, " \t\r\n");
    const char *eol = strchr(first, '\n') ? strchr(first, '\n') : first + strlen(first);
    bool csv = !coll && *first != '#' && memchr(first, ',', (size_t)(eol - first));
    if (csv) {
      st = import_gemm(next, path, text, table, &ngemm, err);
      snprintf(note, sizeof note, "%s (GEMM benchmark)", base);
      if (!st) st = px_cluster_add_source(next, "gpu.gemm.table", note, err);
      csvs++;
    } else {
      if (!coll) coll = coll_in(base);
      st = import_nccl(next, path, coll, text, note, sizeof note, err);
    }
    free(text);
    if (!st && used + strlen(note) + 16 < sizeof next->source)
      used += (size_t)snprintf(next->source + used, sizeof next->source - used, "%s%s", used ? "; measured: " : "measured: ", note);
  }
  if (!st && csvs) {
    memcpy(next->gpu.gemm_table, table, (size_t)ngemm * sizeof *table);
    next->gpu.gemm_table_len = ngemm;
  }
  if (!st) *c = *next;
  free(next), free(table);
  return st;
}
