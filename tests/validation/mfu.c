/* The published runs' MFU per GPU family and precision class, and a sweep's
 * best plan against it (mfu.h). */
#include "tests/validation/mfu.h"

#include <stdio.h>
#include <string.h>

#include "sim/bands.h"
#include "sim/sweep.h"
#include "tests/testutil.h"
#include "tests/validation/doc.h"

/* fp16 and bf16 share the dense peak MFU is counted over: one class */
static const char *prec_class(const char *precision) {
  return !strcmp(precision, "fp16") || !strcmp(precision, "bf16") ? "16-bit" : precision;
}

/* One family and class: the published MFU's least and largest and the runs
 * giving them, and the sum of the simulator's errors on those runs. */
typedef struct {
  char family[24], cls[8];
  double min, max, err_sum;
  char min_run[96], max_run[96];
  int runs;
} mfu_range;

static mfu_range ranges[16];
static int nranges;

static mfu_range *range_of(const char *family, const char *cls, bool add) {
  for (int i = 0; i < nranges; i++)
    if (!strcmp(ranges[i].family, family) && !strcmp(ranges[i].cls, cls)) return &ranges[i];
  if (!add || nranges == (int)(sizeof ranges / sizeof ranges[0])) return NULL;
  mfu_range *r = &ranges[nranges++];
  memset(r, 0, sizeof *r);
  snprintf(r->family, sizeof r->family, "%s", family);
  snprintf(r->cls, sizeof r->cls, "%s", cls);
  return r;
}

void px_test_mfu_add(const px_plan *plan, double sim_mfu, double err_frac, const char *run) {
  px_band_key k;
  px_band_key_of(&plan->model, &plan->cluster, &plan->par, &k);
  if (k.moe) return; /* the sweeps are of dense models */
  mfu_range *r = range_of(k.family, prec_class(k.precision), true);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  double pub = sim_mfu / (1 + err_frac);
  char name[96];
  snprintf(name, sizeof name, "%s %s on %lld", run, plan->model.name, (long long)plan->cluster.gpus);
  if (!r->runs || pub < r->min) r->min = pub, snprintf(r->min_run, sizeof r->min_run, "%s", name);
  if (!r->runs || pub > r->max) r->max = pub, snprintf(r->max_run, sizeof r->max_run, "%s", name);
  r->err_sum += err_frac, r->runs++;
}

/* Where an MFU falls against a published range. */
static const char *where(double mfu, const mfu_range *r) {
  return mfu > r->max ? "above" : mfu < r->min ? "below" : "inside";
}

void px_test_mfu_head(FILE *md) {
  fprintf(stderr, "\n  %-6s %-6s %-10s %4s %4s  %-36s %6s %6s %6s %6s  %-13s %6s  %-13s  %s\n", "family", "class",
          "model", "gpus", "gbs", "sweep's best plan", "MFU", "where", "error", "/(1+e)", "published", "where",
          "allowed", "published ends");
  if (md)
    fprintf(md,
            "| GPU family | precision | sweep: model, GPUs, global batch | its best plan | MFU | published MFU: "
            "lowest, highest (runs) | simulator's mean error on them | MFU / (1 + error) | |\n"
            "| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- |\n");
}

void px_test_mfu_sweep(const char *model, const char *cluster, int64_t gpus, int64_t gbs, int64_t seq,
                       px_precision prec, px_attention attention, double margin_frac, FILE *md) {
#ifdef __SANITIZE_ADDRESS__
  /* a sweep of hundreds of GPUs takes half a minute under the sanitizers: the main build runs it */
  if (gpus > 8) {
    fprintf(stderr, "  %-6s %-6s %-10s %4lld %4lld  skipped under the sanitizers\n", "", "", model, (long long)gpus,
            (long long)gbs);
    return;
  }
#endif
  px_model m;
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(model, &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load(cluster, &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, gpus, 0, &err), PX_OK);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = gbs, o.fixed.precision = (int)prec, o.fixed.attention = (int)attention, o.keep = 1;
  if (seq) o.fixed.seq = seq;
  px_sweep_result r;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.n > 0);
  const px_sweep_entry *best = &r.entries[0];
  px_band_key k;
  px_band_key_of(&m, &c, &best->par, &k);
  char plan[96], oa[24] = "";
  if (best->par.offload_act_layers > 0) snprintf(oa, sizeof oa, "+oa%lld", (long long)best->par.offload_act_layers);
  snprintf(plan, sizeof plan, "tp%lld pp%lld dp%lld cp%lld z%d mbs%lld vpp%lld %s%s%s%s", (long long)best->par.tp,
           (long long)best->par.pp, (long long)best->par.dp, (long long)best->par.cp, best->par.zero,
           (long long)best->par.mbs, (long long)best->par.vpp, px_recompute_names[best->par.recompute], oa,
           attention == PX_ATTN_FLASH ? "" : " ", attention == PX_ATTN_FLASH ? "" : px_attention_names[attention]);
  double mfu = best->sim.mfu;
  const mfu_range *pr = range_of(k.family, prec_class(k.precision), false);
  fprintf(stderr, "  %-6s %-6s %-10s %4lld %4lld  ", k.family, prec_class(k.precision), model, (long long)gpus,
          (long long)gbs);
  if (!pr) {
    fprintf(stderr, "%-36s no published run of %s %s in tests/data: nothing to check\n", plan, k.family,
            prec_class(k.precision));
    if (md)
      fprintf(md, "| %s | %s | `%s`, %lld, %lld | %s | %.1f%% | no published run in `tests/data` | | | |\n", k.family,
              prec_class(k.precision), model, (long long)gpus, (long long)gbs, plan, 100 * mfu);
  } else {
    double mean_err = pr->err_sum / pr->runs, corrected = mfu / (1 + mean_err);
    double lo = pr->min * (1 - margin_frac), hi = pr->max * (1 + margin_frac);
    fprintf(stderr, "%-36s %5.1f%% %6s %+5.1f%% %5.1f%%  %5.1f-%5.1f%% %6s  %5.1f-%5.1f%%  %s; %s (%d runs)\n", plan,
            100 * mfu, where(mfu, pr), 100 * mean_err, 100 * corrected, 100 * pr->min, 100 * pr->max,
            where(corrected, pr), 100 * lo, 100 * hi, pr->min_run, pr->max_run, pr->runs);
    char e[24];
    if (md)
      fprintf(
          md,
          "| %s | %s | `%s`, %lld, %lld | %s | %.1f%% (%s) | %.1f%% (%s), %.1f%% (%s) (%d runs) | %s | %.1f%% | %s |\n",
          k.family, prec_class(k.precision), model, (long long)gpus, (long long)gbs, plan, 100 * mfu, where(mfu, pr),
          100 * pr->min, pr->min_run, 100 * pr->max, pr->max_run, pr->runs, px_test_doc_pct(mean_err, e),
          100 * corrected, where(corrected, pr));
    CU_ASSERT(corrected >= lo && corrected <= hi);
  }
  px_sweep_result_free(&r);
}
