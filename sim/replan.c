/* Re-planning: the sweep for fewer ranks, walked until the backend takes a plan. */
#include "sim/replan.h"

#include <string.h>

#include "sim/sweep.h"

/* The best plan for `ranks` GPUs that o->runs takes, first with o->fixed
 * (relax 0), then with the training's choices alone; *found says whether
 * there is one. */
static px_status best_for(const px_model *m, const px_replan_opts *o, int64_t ranks, px_replan *out, bool *found,
                          px_err *err) {
  *found = false;
  for (int relax = 0; relax < 2 && !*found; relax++) {
    px_sweep_opts so;
    px_sweep_opts_init(&so);
    if (relax) px_parallel_unset(&so.fixed);
    else so.fixed = o->fixed;
    so.fixed.dp = 0;
    so.fixed.gbs = o->train.gbs;
    so.fixed.seq = o->train.seq;
    so.fixed.precision = o->train.precision;
    so.fixed.fp8_recipe = o->train.fp8_recipe;
    so.threads = 1;
    px_sweep_result r;
    px_status st = px_sweep_run(m, &out->cluster, &so, &r, err);
    if (st) return st;
    out->refused = 0;
    for (int64_t i = 0; i < r.n && !*found && !st; i++) {
      out->par = r.entries[i].par;
      if ((st = px_plan_compile(&out->plan, m, &out->cluster, &out->par, err))) break;
      px_err why = {0};
      px_status runs = o->runs ? o->runs(o->runs_ctx, &out->plan, ranks, out->refused, &why) : PX_OK;
      if (runs == PX_OK) {
        *found = true;
        out->relaxed = relax;
        break;
      }
      px_plan_free(&out->plan);
      if (runs == PX_ERR_INPUT) { /* not on this backend: the next one */
        out->refused++;
        continue;
      }
      *err = why;
      st = runs;
    }
    px_sweep_result_free(&r);
    if (st) return st;
  }
  return PX_OK;
}

px_status px_replan_best(const px_model *m, const px_cluster *c, const px_replan_opts *o, px_replan *out, px_err *err) {
  memset(out, 0, sizeof *out);
  for (int64_t g = o->max_ranks; g >= o->min_ranks; g--) {
    out->ranks = g;
    out->cluster = *c;
    px_status st = px_cluster_set_size(&out->cluster, g, 0, err);
    bool found = false;
    if (!st) st = best_for(m, o, g, out, &found, err);
    if (st || found) return st;
  }
  return px_err_set(err, PX_ERR_RUNTIME, "no plan of %s fits on %lld to %lld ranks", m->name, (long long)o->min_ranks,
                    (long long)o->max_ranks);
}
