/* The what-if table: one row per value of the varied cluster field. */
#include "report/vary.h"

#include <stdbool.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "report/plots.h"
#include "report/sweep.h"
#include "report/sweepjson.h"

void px_report_vary_text(const px_model *m, const px_sweep_opts *o, const char *field, const px_vary_point *pts, int n,
                         FILE *out) {
  if (n <= 0) return;
  bool ttt = o->tokens > 0, cost = ttt && o->price_per_gpu_hour > 0, energy = ttt && px_power_known(&pts[0].cluster);
  fprintf(out, "what-if: %s on %lld x %s (%s), gbs %lld: the best plan for each %s\n\n", m->name,
          (long long)pts[0].cluster.gpus, pts[0].cluster.gpu.name, pts[0].cluster.name, (long long)o->fixed.gbs, field);
  int w = (int)strlen(field) > 12 ? (int)strlen(field) : 12;
  fprintf(out, "%-*s  %-40s %9s %10s %6s %9s", w, field, "best plan", "step", "tokens/s", "MFU", "mem/GPU");
  if (ttt) fprintf(out, " %8s", "days");
  if (cost) fprintf(out, " %10s", "cost");
  if (energy) fprintf(out, " %10s", "energy");
  fputc('\n', out);
  for (int i = 0; i < n; i++) {
    const px_sweep_result *r = &pts[i].result;
    if (r->n == 0) {
      fprintf(out, "%-*s  no plan fits (%lld plans do not fit in memory)\n", w, pts[i].value, (long long)r->dropped_memory);
      continue;
    }
    const px_sweep_entry *e = &r->entries[0];
    char label[128], step[32], tok[32], mem[32], usd[32];
    px_report_plan_label(&e->par, label, sizeof label);
    fprintf(out, "%-*s  %-40s %9s %10s %5.1f%% %9s", w, pts[i].value, label,
            px_fmt_time(e->sim.step_time_s, step, sizeof step), px_fmt_count(e->sim.tokens_per_s, tok, sizeof tok),
            100 * e->sim.mfu, px_fmt_bytes((double)e->peak_bytes, mem, sizeof mem));
    if (ttt) fprintf(out, " %8.1f", e->train.days);
    if (cost) fprintf(out, " %10s", px_fmt_count(e->train.cost_usd, usd, sizeof usd));
    if (energy) fprintf(out, " %10s", px_fmt_si(e->train.energy_mwh * 1e6, "Wh", usd, sizeof usd));
    fputc('\n', out);
  }
}

cJSON *px_report_vary_json(const px_model *m, const px_sweep_opts *o, const char *field, const px_vary_point *pts,
                           int n, const px_bands *bands) {
  cJSON *root = cJSON_CreateObject(), *arr = root ? cJSON_AddArrayToObject(root, "points") : NULL;
  if (!arr || !cJSON_AddStringToObject(root, "field", field)) {
    cJSON_Delete(root);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    cJSON *pt = cJSON_CreateObject(), *sw = px_report_sweep_json(m, &pts[i].cluster, o, &pts[i].result, 1, bands);
    if (!pt || !sw || !cJSON_AddStringToObject(pt, "value", pts[i].value)) {
      cJSON_Delete(pt), cJSON_Delete(sw), cJSON_Delete(root);
      return NULL;
    }
    cJSON_AddItemToObject(pt, "sweep", sw);
    cJSON_AddItemToArray(arr, pt);
  }
  return root;
}

px_status px_report_vary_dir(const char *dir, const char *field, const px_vary_point *pts, int n, px_err *err) {
  px_status st = px_mkdir_p(dir, err);
  if (st) return st;
  char path[4096];
  snprintf(path, sizeof path, "%s/vary.dat", dir);
  px_afile f;
  if ((st = px_afile_open(&f, path, err))) return st;
  fprintf(f.fp, "# field: %s\n# index value best_tokens_per_s mfu cost_usd\n", field);
  for (int i = 0; i < n; i++) {
    const px_sweep_result *r = &pts[i].result;
    if (r->n == 0) {
      fprintf(f.fp, "%d %s NaN NaN NaN\n", i, pts[i].value);
      continue;
    }
    const px_sweep_entry *e = &r->entries[0];
    fprintf(f.fp, "%d %s %.6g %.6g ", i, pts[i].value, e->sim.tokens_per_s, e->sim.mfu);
    if (e->train.cost_usd > 0)
      fprintf(f.fp, "%.6g\n", e->train.cost_usd);
    else
      fputs("NaN\n", f.fp);
  }
  if ((st = px_afile_commit(&f, err))) return st;
  return px_plots_render(dir, err);
}
