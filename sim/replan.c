/* Re-planning: the sweep for fewer ranks, walked until the backend takes a plan. */
#include "sim/replan.h"

#include <stdlib.h>
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
    px_parallel_keep_training(&so.fixed, &o->train);
    so.fixed.moe_buffers = o->train.moe_buffers; /* the run's (worst by default): its router never overflows them */
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

/* p with the choices of the groups in `groups` unset, for the sweep to search. */
static px_parallel freed(const px_parallel *p, int groups) {
  px_parallel f = *p;
  bool hybrid = px_parallel_hybrid(p);
  if (groups & PX_REPLAN_ZERO) f.zero = -1, f.grad_accum = -1, f.reshard = -1, f.prefetch = -1, f.shard_group = 0;
  if (groups & PX_REPLAN_RECOMPUTE)
    f.recompute = f.recompute_method = -1, f.recompute_layers = 0, f.recompute_modules = 0;
  if (groups & PX_REPLAN_MBS) f.mbs = 0, f.mb_group = 0;
  if (groups & PX_REPLAN_SPLIT) {
    f.tp = f.pp = f.dp = 0, f.sp = -1, f.schedule = -1, f.vpp = 0, f.mb_group = 0;
    f.first_stage_layers = f.last_stage_layers = 0, f.nchunk_layers = 0;
    if (p->etp == p->tp) f.etp = 0; /* the default follows tp */
    if (!hybrid) f.shard_group = 0; /* the whole DP group, whatever dp becomes */
  }
  if (groups & PX_REPLAN_OFFLOAD) f.offload_opt = -1, f.offload_params = -1, f.offload_act_layers = -1;
  return f;
}

/* Whether q keeps p's layer split unless the split is among `groups` (the sweep also tries the first and
 * last stage short of a layer where the split is the default). */
static bool within(const px_parallel *p, const px_parallel *q, int groups) {
  return (groups & PX_REPLAN_SPLIT) ||
         (q->first_stage_layers == p->first_stage_layers && q->last_stage_layers == p->last_stage_layers);
}

/* The same choices (two groups' sweeps may find the same plan). */
static bool same_choices(const px_parallel *a, const px_parallel *b) {
  return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->zero == b->zero && a->sp == b->sp &&
         a->mbs == b->mbs && a->schedule == b->schedule && a->vpp == b->vpp && a->recompute == b->recompute &&
         a->recompute_method == b->recompute_method && a->recompute_layers == b->recompute_layers &&
         a->recompute_modules == b->recompute_modules && a->grad_accum == b->grad_accum && a->reshard == b->reshard &&
         a->prefetch == b->prefetch &&
         a->shard_group == b->shard_group && a->offload_opt == b->offload_opt &&
         a->offload_params == b->offload_params && a->offload_act_layers == b->offload_act_layers &&
         a->first_stage_layers == b->first_stage_layers &&
         a->last_stage_layers == b->last_stage_layers && a->nchunk_layers == b->nchunk_layers && a->etp == b->etp;
}

static int cmp_fit(const void *a, const void *b) {
  const px_replan_fit *x = a, *y = b;
  if (x->sim.tokens_per_s != y->sim.tokens_per_s) return x->sim.tokens_per_s > y->sim.tokens_per_s ? -1 : 1;
  return x->changed - y->changed;
}

px_status px_replan_nearest(const px_model *m, const px_cluster *c, const px_parallel *p, px_replan_fit *out, int cap,
                            int *n, px_err *err) {
  *n = 0;
  px_replan_fit found[PX_REPLAN_GROUPS * PX_REPLAN_GROUPS];
  int nf = 0;
  for (int size = 1; size <= 2 && nf == 0; size++)
    for (int groups = 1; groups < 1 << PX_REPLAN_GROUPS; groups++) {
      if (__builtin_popcount((unsigned)groups) != size) continue;
      px_sweep_opts o;
      px_sweep_opts_init(&o);
      o.fixed = freed(p, groups);
      o.search_modules = (groups & PX_REPLAN_RECOMPUTE) != 0;
      /* the best alone: a sweep of the split prunes (the rest are a few dozen plans, simulated whole, as the
       * best that keeps the layer split may rank below plans that change it) */
      o.keep = groups & PX_REPLAN_SPLIT ? 1 : 0;
      px_sweep_result r;
      px_status st = px_sweep_run(m, c, &o, &r, err);
      if (st) return st;
      for (int64_t i = 0; i < r.n; i++) { /* the best that changes these groups alone */
        const px_sweep_entry *e = &r.entries[i];
        if (!within(p, &e->par, groups)) continue;
        bool seen = false;
        for (int k = 0; k < nf && !seen; k++) seen = same_choices(&found[k].par, &e->par);
        if (!seen) found[nf++] = (px_replan_fit){e->par, groups, e->sim, e->peak_bytes};
        break;
      }
      px_sweep_result_free(&r);
    }
  qsort(found, (size_t)nf, sizeof *found, cmp_fit);
  for (int i = 0; i < nf && *n < cap; i++) out[(*n)++] = found[i];
  return PX_OK;
}

px_status px_replan_least_peak(const px_model *m, const px_cluster *c, px_sweep_result *r, px_err *err) {
  for (;;) { /* a partial peak is a lower bound of the plan's: the least is exact once it is whole */
    px_sweep_entry *least = NULL; /* of those whose GPUs it does not fit (the others: their host) */
    uint64_t usable = px_gpu_usable_bytes(&c->gpu);
    for (int64_t i = 0; i < r->ndropped; i++)
      if (px_plan_reserve_bytes(r->dropped[i].peak_bytes) > usable &&
          (!least || r->dropped[i].peak_bytes < least->peak_bytes))
        least = &r->dropped[i];
    if (!least || !least->peak_partial) return PX_OK;
    px_plan plan;
    px_status st = px_plan_compile(&plan, m, c, &least->par, err);
    if (st) return st;
    int64_t worst = px_plan_peak_stage(&plan);
    least->peak_bytes = plan.mem[worst].peak_bytes;
    memcpy(least->at_peak, plan.mem[worst].at_peak, sizeof least->at_peak);
    least->peak_partial = false;
    px_plan_free(&plan);
  }
}
