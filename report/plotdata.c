/* Writers of the plot data files. */
#include "report/plotdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "report/trace.h"
#include "sim/sim.h"

#define GIB ((double)(1ull << 30))

static px_status open_in(px_afile *f, const char *dir, const char *name, px_err *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return px_afile_open(f, path, err);
}

px_status px_plotdata_memory(const px_plan *plan, const char *dir, px_err *err) {
  px_afile f;
  px_status st = open_in(&f, dir, "memory.dat", err);
  if (st) return st;
  double cap = (double)px_gpu_usable_bytes(&plan->cluster.gpu) / GIB;
  fprintf(f.fp, "# %s on %lld x %s: memory per GPU at each stage's peak\n", plan->model.name,
          (long long)plan->cluster.gpus, plan->cluster.gpu.name);
  fprintf(f.fp, "# stage params_gib grads_gib optimizer_gib activations_gib buffers_gib workspace_gib capacity_gib\n");
  for (int64_t s = 0; s < plan->par.pp; s++) {
    fprintf(f.fp, "%lld", (long long)s);
    for (int k = 0; k < PX_MEM_COUNT; k++) fprintf(f.fp, " %.4f", (double)plan->mem[s].at_peak[k] / GIB);
    fprintf(f.fp, " %.4f\n", cap);
  }
  return px_afile_commit(&f, err);
}

px_status px_plotdata_sweep(const px_sweep_result *r, const char *dir, px_err *err) {
  px_afile f;
  px_status st = open_in(&f, dir, "plans.dat", err);
  if (st) return st;
  fprintf(f.fp, "# every plan that fits: those simulated best first, then those a sweep for the plots shows by\n"
                "# their bound (simulated 0: step_s at most, tokens_per_s and mfu at least what it would simulate;\n"
                "# never on the Pareto front, rank 0)\n");
  fprintf(f.fp, "# tp pp dp zero sp mbs vpp recompute schedule peak_gib tokens_per_s mfu step_s pareto rank simulated\n");
  for (int64_t i = 0; i < r->n + r->npruned; i++) {
    const px_sweep_entry *e = i < r->n ? &r->entries[i] : &r->pruned[i - r->n];
    if (i >= r->n && !e->bounded) continue; /* pruned without figures: not for the plots */
    /* no other plan uses less memory and runs faster (a bounded one never does when a simulated one
     * does not: sim/sweep.h, opts.front) */
    bool pareto = i < r->n;
    for (int64_t j = 0; j < r->n && pareto; j++)
      if (r->entries[j].peak_bytes < e->peak_bytes && r->entries[j].sim.tokens_per_s > e->sim.tokens_per_s) pareto = false;
    const px_parallel *p = &e->par;
    fprintf(f.fp, "%lld %lld %lld %d %d %lld %lld %d %d %.4f %.2f %.5f %.6f %d %lld %d\n", (long long)p->tp,
            (long long)p->pp, (long long)p->dp, p->zero, p->sp, (long long)p->mbs, (long long)p->vpp, p->recompute,
            p->schedule, (double)e->peak_bytes / GIB, e->sim.tokens_per_s, e->sim.mfu, e->sim.step_time_s, pareto,
            (long long)(i < r->n ? i + 1 : 0), i < r->n);
  }
  if ((st = px_afile_commit(&f, err))) return st;

  /* The grid: every tp and pp that appears among valid plans. */
  int64_t tps[64], pps[64];
  int ntp = 0, npp = 0;
  for (int pass = 0; pass < 3; pass++) {
    const px_sweep_entry *list = pass == 2 ? r->pruned : pass ? r->dropped : r->entries;
    int64_t n = pass == 2 ? r->npruned : pass ? r->ndropped : r->n;
    for (int64_t i = 0; i < n; i++) {
      int64_t t = list[i].par.tp, q = list[i].par.pp;
      bool have = false;
      for (int k = 0; k < ntp; k++) have |= tps[k] == t;
      if (!have && ntp < 64) tps[ntp++] = t;
      have = false;
      for (int k = 0; k < npp; k++) have |= pps[k] == q;
      if (!have && npp < 64) pps[npp++] = q;
    }
  }
  for (int a = 0; a < ntp; a++) /* ascending */
    for (int b = a + 1; b < ntp; b++)
      if (tps[b] < tps[a]) { int64_t t = tps[a]; tps[a] = tps[b]; tps[b] = t; }
  for (int a = 0; a < npp; a++)
    for (int b = a + 1; b < npp; b++)
      if (pps[b] < pps[a]) { int64_t t = pps[a]; pps[a] = pps[b]; pps[b] = t; }
  if ((st = open_in(&f, dir, "heatmap.dat", err))) return st;
  fprintf(f.fp, "# best tokens/s over the other dimensions for each tp x pp; NaN: no plan fits; absent: no valid plan\n# tp pp tokens_per_s\n");
  for (int a = 0; a < ntp; a++) {
    for (int b = 0; b < npp; b++) {
      double best = NAN;
      bool valid = false; /* some valid plan has this tp x pp (fitting or not) */
      for (int64_t i = 0; i < r->n; i++)
        if (r->entries[i].par.tp == tps[a] && r->entries[i].par.pp == pps[b]) {
          valid = true;
          if (isnan(best) || r->entries[i].sim.tokens_per_s > best) best = r->entries[i].sim.tokens_per_s;
        }
      for (int64_t i = 0; i < r->ndropped && !valid; i++)
        valid = r->dropped[i].par.tp == tps[a] && r->dropped[i].par.pp == pps[b];
      for (int64_t i = 0; i < r->npruned && !valid; i++)
        valid = r->pruned[i].par.tp == tps[a] && r->pruned[i].par.pp == pps[b];
      if (!valid) continue; /* no such plan: an empty cell */
      if (isnan(best))
        fprintf(f.fp, "%lld %lld NaN\n", (long long)tps[a], (long long)pps[b]);
      else
        fprintf(f.fp, "%lld %lld %.2f\n", (long long)tps[a], (long long)pps[b], best);
    }
  }
  return px_afile_commit(&f, err);
}

px_status px_plotdata_scaling(const px_model *m, const px_cluster *c, const px_parallel *par, const char *dir,
                              px_err *err) {
  px_afile f;
  px_status st = open_in(&f, dir, "scaling.dat", err);
  if (st) return st;
  fprintf(f.fp, "# the plan's shape (tp %lld, pp %lld, mbs %lld, gbs %lld, ZeRO-%d) as dp grows\n# gpus tokens_per_s mfu\n",
          (long long)par->tp, (long long)par->pp, (long long)par->mbs, (long long)par->gbs, par->zero);
  static const double factors[] = {0.125, 0.25, 0.5, 1, 2, 4};
  for (size_t i = 0; i < sizeof factors / sizeof *factors; i++) {
    double dpf = (double)par->dp * factors[i];
    if (dpf < 1 || dpf != floor(dpf)) continue;
    px_cluster cc = *c;
    px_parallel p = *par;
    p.dp = (int64_t)dpf;
    if (p.dp == 1 && p.zero > 0) p.zero = 0;
    if (px_cluster_set_size(&cc, p.tp * p.pp * p.dp, 0, NULL)) continue;
    px_plan plan;
    if (px_plan_compile(&plan, m, &cc, &p, NULL)) continue;
    px_sim_opts o = {.skip_exposed = true};
    px_sim_result r;
    if (plan.fits && !px_sim_run(&plan, &o, &r, NULL)) {
      fprintf(f.fp, "%lld %.2f %.5f\n", (long long)cc.gpus, r.tokens_per_s, r.mfu);
      px_sim_result_free(&r);
    }
    px_plan_free(&plan);
  }
  return px_afile_commit(&f, err);
}

px_status px_plotdata_plan(const px_model *m, const px_cluster *c, const px_parallel *par, const char *dir, px_err *err) {
  px_plan plan;
  px_status st = px_plan_compile(&plan, m, c, par, err);
  if (st) return st;
  char path[4200];
  snprintf(path, sizeof path, "%s/timeline.dat", dir);
  px_sim_opts o = {.skip_exposed = true, .record_spans = true};
  px_sim_result r;
  if (!(st = px_plotdata_memory(&plan, dir, err)) && !(st = px_sim_run(&plan, &o, &r, err))) {
    st = px_report_timeline(&plan, &r, path, err);
    px_sim_result_free(&r);
    if (!st) st = px_plotdata_scaling(m, c, par, dir, err);
  }
  px_plan_free(&plan);
  return st;
}
