/* The sweep table: one short column per plan, the simulator's summary, and
 * time to train, cost and goodput when there are training tokens. */
#include "report/sweep.h"

#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "report/html.h"
#include "report/plotdata.h"
#include "report/plots.h"
#include "report/sweepjson.h"

/* How many of the best plans sweep.json beside the plots holds. */
#define SWEEP_DIR_PLANS 50

void px_report_sweep_progress(void *ctx, int64_t done, int64_t total) {
  FILE *out = ctx ? ctx : stderr;
  if (total <= 0 || (done % 64 && done != total)) return;
  int w = 40, fill = (int)(w * done / total);
  fprintf(out, "\r  [%.*s%*s] %lld/%lld plans", fill, "########################################", w - fill, "",
          (long long)done, (long long)total);
  if (done == total) fputs("\r\033[K", out);
}

const char px_report_plan_legend[] =
    "plan labels: tpN cpN ppN dpN the parallel sizes (cpNag: all-gather, cpNa2a: Ulysses; epN experts split N ways,\n"
    "  epNag/epNdep allgather/DeepEP, etpN expert tensor parallelism); zN ZeRO stage, then f full gradient accumulation,\n"
    "  k parameters kept from forward to backward, pN N layers gathered ahead, hN sharded in groups of N DP ranks,\n"
    "  +oc/+on optimizer offloaded to host memory/NVMe, +pc/+pn parameters too; sp sequence parallelism; mbsN\n"
    "  micro-batch; schedule 1f1b, gpipe, zb-h1, zb-h2 or intV (interleaved, V chunks a rank), fAlB first and last\n"
    "  stage layers, chunks an explicit split; none/sel/full recomputation; fp8, fp8cur, fp8blk: fp8 with delayed,\n"
    "  current or blockwise scaling (then w: fp8 weights, --fp8-params). The flags of each plan: --json (\"flags\")\n"
    "  or --csv (column flags).\n";

void px_report_plan_label(const px_parallel *p, char *buf, size_t cap) {
  static const char *const rc[] = {"none", "sel", "full"};
  char sched[64];
  if (p->schedule == PX_SCHED_INTERLEAVED)
    snprintf(sched, sizeof sched, "int%lld", (long long)p->vpp);
  else
    snprintf(sched, sizeof sched, "%s", px_schedule_names[p->schedule]);
  if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
    snprintf(sched + strlen(sched), sizeof sched - strlen(sched), " f%lldl%lld", (long long)p->first_stage_layers,
             (long long)p->last_stage_layers);
  else if (p->nchunk_layers > 0)
    snprintf(sched + strlen(sched), sizeof sched - strlen(sched), " chunks");
  char zero[32];
  px_report_zero_label(p, zero, sizeof zero);
  char cp[32] = "";
  if (p->cp > 1) snprintf(cp, sizeof cp, " cp%lld%s", (long long)p->cp, p->cp_algo == PX_CP_RING ? "" : p->cp_algo == PX_CP_A2A ? "a2a" : "ag");
  if (p->ep > 1)
    snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " ep%lld%s", (long long)p->ep,
             p->moe_dispatch == PX_MOE_A2A ? "" : p->moe_dispatch == PX_MOE_ALLGATHER ? "ag" : "dep");
  if (p->etp > 0 && p->etp != p->tp) snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " etp%lld", (long long)p->etp);
  static const char *const f8[] = {" fp8", " fp8cur", " fp8blk"}; /* by px_fp8_recipe */
  snprintf(buf, cap, "tp%lld%s pp%lld dp%lld %s%s mbs%lld %s %s%s%s", (long long)p->tp, cp, (long long)p->pp,
           (long long)p->dp, zero, p->sp ? " sp" : "", (long long)p->mbs, p->pp > 1 ? sched : "-", rc[p->recompute],
           p->precision == PX_PREC_FP8 ? f8[p->fp8_recipe >= 0 ? p->fp8_recipe : 0] : "", p->fp8_params > 0 ? "w" : "");
}

/* Why the best plan's ZeRO stage and mode: the same split with each other
 * one the sweep tried, slower by how much or not fitting. */
static void zero_choice(const px_sweep_result *r, FILE *out) {
  px_sweep_alt alt[16];
  int n = px_sweep_zero_alternatives(r, &r->entries[0], alt, 16);
  if (!n) return;
  char label[32], mem[32];
  const px_parallel *best = &r->entries[0].par;
  px_report_zero_label(best, label, sizeof label);
  fprintf(out, "\nZeRO (best plan's split, %s", label);
  if (px_parallel_hybrid(best))
    fprintf(out, ": states sharded within groups of %lld DP ranks, replicated %lld times", (long long)best->shard_group,
            (long long)(px_parallel_weight_dp(best) / best->shard_group));
  fputs("): ", out);
  for (int i = 0; i < n; i++) {
    px_report_zero_label(&alt[i].e->par, label, sizeof label);
    if (alt[i].fits)
      fprintf(out, "%s%s %+.1f%% tokens/s", i ? ", " : "", label,
              100 * (alt[i].e->sim.tokens_per_s / r->entries[0].sim.tokens_per_s - 1));
    else
      fprintf(out, "%s%s does not fit (%s)", i ? ", " : "", label,
              px_fmt_bytes((double)alt[i].e->peak_bytes, mem, sizeof mem));
  }
  fputs("\n", out);
}

/* The validated error band of each precision among the shown plans (a sweep's model and cluster are one). */
static void bands_lines(const px_model *m, const px_cluster *c, const px_sweep_result *r, int64_t top,
                        const px_bands *bands, FILE *out) {
  bool seen[PX_PREC_COUNT] = {false};
  for (int64_t i = 0; bands && i < r->n && i < top; i++) {
    int prec = r->entries[i].par.precision;
    if (prec < 0 || prec >= PX_PREC_COUNT || seen[prec]) continue;
    seen[prec] = true;
    px_band_key k;
    char text[512];
    px_band_key_of(m, c, &r->entries[i].par, &k);
    px_band_describe(bands, &k, text, sizeof text);
    fprintf(out, "Validated (simulated over published throughput, less 1): %s\n", text);
  }
}

void px_report_sweep_text(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                          int64_t top, double wall_s, int threads, const px_bands *bands, FILE *out) {
  char a[64], b[64];
  const px_parallel *f = &o->fixed;
  fprintf(out, "sweep: %s on %lld x %s (%s), gbs %lld, seq %lld, objective %s\n", m->name, (long long)c->gpus,
          c->gpu.name, c->name, (long long)f->gbs, (long long)(f->seq > 0 ? f->seq : m->seq_len),
          px_objective_names[o->objective]);
  fprintf(out, "  %lld plans enumerated: %lld invalid, %lld do not fit in %s, %lld simulated", (long long)r->enumerated,
          (long long)r->invalid, (long long)r->dropped_memory, px_fmt_bytes((double)px_gpu_usable_bytes(&c->gpu), a, sizeof a),
          (long long)r->simulated);
  if (r->npruned > 0) fprintf(out, ", %lld fit but cannot make the top %lld (bound)", (long long)r->npruned, (long long)top);
  if (o->admit_name) fprintf(out, ", %lld valid but not runnable by %s", (long long)r->excluded, o->admit_name);
  fprintf(out, " (%s on %d thread%s)\n", px_fmt_time(wall_s, b, sizeof b), threads, threads == 1 ? "" : "s");
  if (r->n == 0) {
    fprintf(out, "  no plan fits: try more GPUs, ZeRO-3, full recomputation or a smaller micro-batch\n");
    return;
  }
  bool ttt = o->tokens > 0;
  fprintf(out, "\n%4s  %-44s %9s %10s %6s %9s %6s %8s", "rank", "plan", "step", "tokens/s", "MFU", "mem/GPU", "bubble",
          "exposed");
  if (ttt) fprintf(out, " %8s %9s %7s", "days", "GPU-hours", "goodput");
  if (ttt && o->price_per_gpu_hour > 0) fprintf(out, " %10s", "cost");
  fprintf(out, "\n");
  for (int64_t i = 0; i < r->n && i < top; i++) {
    const px_sweep_entry *e = &r->entries[i];
    char label[96], step[32], tok[32], mem[32], exp[32];
    px_report_plan_label(&e->par, label, sizeof label);
    fprintf(out, "%4lld  %-44s %9s %10s %5.1f%% %9s %5.1f%% %8s", (long long)(i + 1), label,
            px_fmt_time(e->sim.step_time_s, step, sizeof step), px_fmt_count(e->sim.tokens_per_s, tok, sizeof tok),
            100 * e->sim.mfu, px_fmt_bytes((double)e->peak_bytes, mem, sizeof mem), 100 * e->sim.bubble_fraction,
            px_fmt_time(e->sim.comm_exposed_s, exp, sizeof exp));
    if (ttt)
      fprintf(out, " %8.1f %9s %6.1f%%", e->train.days, px_fmt_count(e->train.gpu_hours, a, sizeof a),
              100 * e->train.goodput);
    if (ttt && o->price_per_gpu_hour > 0) fprintf(out, " %10s", px_fmt_count(e->train.cost_usd, b, sizeof b));
    fprintf(out, "\n");
  }
  fprintf(out, "\n%s", px_report_plan_legend);
  zero_choice(r, out);
  px_sweep_alt pa;
  if (r->n > 0 && px_sweep_precision_alternative(r, &r->entries[0], &pa)) {
    fprintf(out, "Precision (best plan, %s): %s ", px_precision_names[r->entries[0].par.precision],
            px_precision_names[pa.e->par.precision]);
    if (pa.fits)
      fprintf(out, "%+.1f%% tokens/s\n", 100 * (pa.e->sim.tokens_per_s / r->entries[0].sim.tokens_per_s - 1));
    else
      fprintf(out, "does not fit (%s)\n", px_fmt_bytes((double)pa.e->peak_bytes, b, sizeof b));
  }
  bands_lines(m, c, r, top, bands, out);
  const px_train_time *t = &r->entries[0].train;
  if (ttt && t->cluster_mtbf_s > 0 && o->ckpt_async) {
    char w[32], iv[32], sn[32];
    fprintf(out,
            "\nfailures (best plan): cluster MTBF %s (%.0f h per GPU), async checkpoint of %s: training stops %s "
            "for the host snapshot, written in %s behind, every %s (Young/Daly), goodput %.1f%%\n",
            px_fmt_time(t->cluster_mtbf_s, a, sizeof a), o->mtbf_hours, px_fmt_bytes(t->checkpoint_bytes, b, sizeof b),
            px_fmt_time(t->checkpoint_snapshot_s, sn, sizeof sn), px_fmt_time(t->checkpoint_write_s, w, sizeof w),
            px_fmt_time(t->checkpoint_interval_s, iv, sizeof iv), 100 * t->goodput);
  } else if (ttt && t->cluster_mtbf_s > 0) {
    char w[32], iv[32];
    fprintf(out,
            "\nfailures (best plan): cluster MTBF %s (%.0f h per GPU), checkpoint of %s written in %s every %s "
            "(Young/Daly), goodput %.1f%%\n",
            px_fmt_time(t->cluster_mtbf_s, a, sizeof a), o->mtbf_hours, px_fmt_bytes(t->checkpoint_bytes, b, sizeof b),
            px_fmt_time(t->checkpoint_write_s, w, sizeof w), px_fmt_time(t->checkpoint_interval_s, iv, sizeof iv),
            100 * t->goodput);
  }
}

px_status px_report_sweep_dir(const char *dir, bool html, const px_model *m, const px_cluster *c,
                              const px_sweep_opts *o, const px_sweep_result *r, const px_bands *bands, px_err *err) {
  px_status st = px_mkdir_p(dir, err);
  if (!st) st = px_plotdata_sweep(r, dir, err);
  if (!st && r->n > 0) st = px_plotdata_plan(m, c, &r->entries[0].par, dir, err);
  if (!st) st = px_report_sweep_write(dir, m, c, o, r, SWEEP_DIR_PLANS, bands, err);
  if (!st) st = px_plots_render(dir, err);
  if (!st && html) st = px_html_report(dir, err);
  return st;
}
