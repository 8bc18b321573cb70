/* The sweep table: one short column per plan, the simulator's summary, and
 * time to train, cost and goodput when there are training tokens. */
#include "report/sweep.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "plan/lora.h"
#include "report/flags.h"
#include "report/html.h"
#include "report/plan.h"
#include "report/plotdata.h"
#include "report/plots.h"
#include "report/sweepjson.h"

void px_report_progress_init(px_report_progress *p) {
  memset(p, 0, sizeof *p);
  p->out = stderr;
  p->tty = isatty(fileno(stderr));
  p->interval_s = 5;
  const char *env = getenv("PX_PROGRESS_INTERVAL_S");
  double v = env ? strtod(env, NULL) : 0;
  if (v > 0 && v < 3600) p->interval_s = v;
}

/* The latest state: a bar redrawn on a terminal, else a line. */
static void progress_show(px_report_progress *p) {
  const px_sweep_progress *sp = &p->last;
  char best[160] = "", label[96], tok[32];
  if (p->have_best) {
    px_report_plan_label(&p->best_par, label, sizeof label);
    snprintf(best, sizeof best, ", best so far %s tokens/s (%s)", px_fmt_count(p->best_tokens_per_s, tok, sizeof tok),
             label);
  }
  const char *what = p->what ? p->what : "";
  if (p->tty) {
    int w = 30, fill = (int)(w * sp->done / sp->total);
    fprintf(p->out, "\r\033[K  %s[%.*s%*s] %lld/%lld plans, %lld simulated%s", what, fill,
            "##############################", w - fill, "", (long long)sp->done, (long long)sp->total,
            (long long)sp->simulated, best);
    p->drawn = true;
  } else {
    fprintf(p->out, "parallax sweep: %s%lld of %lld plans checked, %lld simulated%s\n", what, (long long)sp->done,
            (long long)sp->total, (long long)sp->simulated, best);
    p->printed = true;
  }
  p->last_shown = true;
  fflush(p->out);
}

void px_report_sweep_progress(void *ctx, const px_sweep_progress *sp) {
  px_report_progress *p = ctx;
  if (sp->total <= 0) return;
  p->last = *sp;
  p->last.best = NULL; /* valid during the call only: its figures are copied */
  if (sp->best && (!p->have_best || sp->best->sim.tokens_per_s != p->best_tokens_per_s)) {
    p->have_best = true;
    p->best_par = sp->best->par;
    p->best_tokens_per_s = sp->best->sim.tokens_per_s;
  }
  p->last_shown = false;
  double now = px_clock_s();
  if (!p->next_s) p->next_s = now + (p->tty ? 0.1 : p->interval_s);
  if (now < p->next_s) return;
  p->next_s = now + (p->tty ? 0.1 : p->interval_s);
  progress_show(p);
}

void px_report_progress_end(px_report_progress *p) {
  if (p->printed && !p->last_shown) progress_show(p); /* the log ends with where the sweep ended */
  if (p->drawn) fputs("\r\033[K", p->out);
  p->drawn = p->have_best = false; /* printed stays: a log that had lines ends each sweep (--vary's) with one */
  p->next_s = 0;
}

const char px_report_plan_legend[] =
    "plan labels: tpN cpN ppN dpN the parallel sizes (cpNag: all-gather, cpNa2a: Ulysses; epN experts split N ways,\n"
    "  epNag/epNdep/epNhep allgather/DeepEP/HybridEP, ...ov with EP overlap (combined 1F1B), etpN expert tensor parallelism);\n"
    "  zN ZeRO stage, then f full gradient accumulation, k parameters kept from forward to backward, pN N layers\n"
    "  gathered ahead, hN sharded in groups of N DP ranks,\n"
    "  +oc/+on optimizer offloaded to host memory/NVMe, +pc/+pn parameters too; sp sequence parallelism; mbsN\n"
    "  micro-batch; schedule 1f1b, gpipe, zb-h1, zb-h2 or intV (interleaved, V chunks a rank), fAlB first and last\n"
    "  stage layers, chunks an explicit split; none/sel/full/op recomputation (fullN: of the first N layers of\n"
    "  each chunk, Megatron's block method; everyN: of every N-th, torchtitan's layer-wise; selm: selective of the\n"
    "  modules the plan's flags name; op: torchtitan's per-op policy; the last three when asked for), +oaN the\n"
    "  first N layers' activations offloaded to the host; fp8, fp8cur, fp8blk: fp8 with delayed, current or\n"
    "  blockwise scaling; mxfp8, nvfp4 the block-scaled precisions (then w: the weights in that format only;\n"
    "  bf16:N+M: the first N and last M layers unquantized). The flags of each plan: the JSON's \"flags\", the CSV's\n"
    "  column flags.\n";

void px_report_plan_label(const px_parallel *p, char *buf, size_t cap) {
  static const char *const rc_names[PX_RECOMPUTE_COUNT] = {"none", "sel", "full", "op"};
  char sched[64], rc[32];
  snprintf(rc, sizeof rc, "%s", rc_names[p->recompute]);
  if (px_parallel_recompute_partial(p))
    snprintf(rc, sizeof rc, "%s%lld", p->recompute_method == PX_RECOMPUTE_EVERY ? "every" : "full",
             (long long)p->recompute_layers);
  if (p->recompute_modules) snprintf(rc, sizeof rc, "selm"); /* selective of the modules named */
  if (p->offload_act_layers > 0) /* activation offload: the first N layers' */
    snprintf(rc + strlen(rc), sizeof rc - strlen(rc), "+oa%lld", (long long)p->offload_act_layers);
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
    snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " ep%lld%s%s", (long long)p->ep,
             (const char *const[]){"", "ag", "dep", "hep"}[p->moe_dispatch],
             p->overlap > 0 && (p->overlap & PX_OVERLAP_EP) ? "ov" : "");
  if (p->etp > 0 && p->etp != p->tp) snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " etp%lld", (long long)p->etp);
  static const char *const f8[] = {" fp8", " fp8cur", " fp8blk"}; /* by px_fp8_recipe */
  char hp[48] = ""; /* the first and last layers kept unquantized */
  if (p->bf16_layers_start > 0 || p->bf16_layers_end > 0)
    snprintf(hp, sizeof hp, " bf16:%lld+%lld", (long long)p->bf16_layers_start, (long long)p->bf16_layers_end);
  snprintf(buf, cap, "tp%lld%s pp%lld dp%lld %s%s mbs%lld %s %s%s%s%s", (long long)p->tp, cp, (long long)p->pp,
           (long long)p->dp, zero, p->sp ? " sp" : "", (long long)p->mbs, p->pp > 1 ? sched : "-", rc,
           p->precision == PX_PREC_FP8     ? f8[p->fp8_recipe >= 0 ? p->fp8_recipe : 0]
           : p->precision == PX_PREC_MXFP8 ? " mxfp8"
           : p->precision == PX_PREC_NVFP4 ? " nvfp4"
                                           : "",
           p->fp8_params > 0 ? "w" : "", hp);
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

int px_report_sweep_precisions(const px_sweep_result *r) {
  int seen = 0;
  const px_sweep_entry *lists[3] = {r->entries, r->dropped, r->pruned};
  int64_t counts[3] = {r->n, r->ndropped, r->npruned};
  for (int l = 0; l < 3; l++)
    for (int64_t i = 0; i < counts[l]; i++)
      if (lists[l][i].par.precision >= 0) seen |= 1 << lists[l][i].par.precision;
  return seen;
}

/* The values of one choice the dropped plans took, "1,2,4" (ints) into buf. */
static void values_tried(const px_sweep_result *r, int64_t (*get)(const px_parallel *), const char *const *names,
                         char *buf, size_t cap) {
  int64_t seen[64];
  int n = 0;
  for (int64_t i = 0; i < r->ndropped; i++) {
    int64_t v = get(&r->dropped[i].par);
    int k = 0;
    while (k < n && seen[k] != v) k++;
    if (k == n && n < 64) seen[n++] = v;
  }
  for (int i = 1; i < n; i++) /* ascending */
    for (int k = i; k > 0 && seen[k - 1] > seen[k]; k--) {
      int64_t t = seen[k];
      seen[k] = seen[k - 1], seen[k - 1] = t;
    }
  size_t len = 0;
  if (cap) buf[0] = '\0';
  for (int i = 0; i < n && len < cap; i++) {
    int w = names ? snprintf(buf + len, cap - len, "%s%s", i ? "," : "", names[seen[i]])
                  : snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)seen[i]);
    if (w > 0) len += (size_t)w;
  }
}

static int64_t get_tp(const px_parallel *p) { return p->tp; }
static int64_t get_pp(const px_parallel *p) { return p->pp; }
static int64_t get_zero(const px_parallel *p) { return p->zero; }
static int64_t get_recompute(const px_parallel *p) { return p->recompute; }
static int64_t get_mbs(const px_parallel *p) { return p->mbs; }
static int64_t get_offload(const px_parallel *p) { return p->offload_opt; }
static int64_t get_precision(const px_parallel *p) { return p->precision; }

const px_sweep_entry *px_report_sweep_least(const px_sweep_result *r, uint64_t usable, int64_t *host) {
  const px_sweep_entry *least = NULL;
  *host = 0;
  for (int64_t i = 0; i < r->ndropped; i++) {
    const px_sweep_entry *x = &r->dropped[i];
    if (px_plan_reserve_bytes(x->peak_bytes) <= usable) (*host)++;
    else if (!least || x->peak_bytes < least->peak_bytes) least = x;
  }
  return least;
}

/* No plan fits: what the sweep tried, and how near its nearest came (the
 * least peak of the dropped plans, made exact by px_replan_least_peak). */
static void no_fit_text(const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r, FILE *out) {
  char a[64], b[64], d[64], e[64];
  if (r->ndropped == 0) {
    fprintf(out, "  no plan fits: no valid plan was left to evaluate%s\n",
            o->admit_name ? " (see the plans not runnable above)" : "");
    return;
  }
  static const struct {
    const char *what;
    int64_t (*get)(const px_parallel *);
    const char *const *names;
  } dims[] = {{"tp", get_tp, NULL},       {"pp", get_pp, NULL},
              {"ZeRO", get_zero, NULL},    {"recompute", get_recompute, px_recompute_names},
              {"mbs", get_mbs, NULL},      {"optimizer offload", get_offload, px_offload_names},
              {"precision", get_precision, px_precision_names}};
  fprintf(out, "  no plan fits. Tried %lld valid plans:", (long long)r->ndropped);
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    char vals[256];
    values_tried(r, dims[i].get, dims[i].names, vals, sizeof vals);
    fprintf(out, "%s %s %s", i ? ";" : "", dims[i].what, vals);
  }
  fputs(".\n", out);
  uint64_t usable = px_gpu_usable_bytes(&c->gpu);
  int64_t host;
  const px_sweep_entry *least = px_report_sweep_least(r, usable, &host);
  if (least) {
    uint64_t need = px_plan_reserve_bytes(least->peak_bytes);
    char label[96];
    px_report_plan_label(&least->par, label, sizeof label);
    fprintf(out, "  Bound by GPU memory: the least peak, %s (%s), needs %s per GPU with the allocator's headroom of "
            "the %s usable: %s over.\n", px_fmt_bytes((double)least->peak_bytes, a, sizeof a), label,
            px_fmt_bytes((double)need, b, sizeof b), px_fmt_bytes((double)usable, d, sizeof d),
            px_fmt_bytes((double)(need - usable), e, sizeof e));
  }
  if (host)
    fprintf(out, "  %lld of them fit the GPUs only with states offloaded to host memory or NVMe, more than a node has "
            "(host.memory_gib, host.nvme_tb).\n", (long long)host);
  cJSON *fixed = px_report_fixed_json(&o->fixed);
  bool any = fixed && fixed->child;
  if (any) {
    fputs("  Fixed by the flags (the sweep searched the rest):", out);
    const cJSON *it;
    cJSON_ArrayForEach(it, fixed) {
      if (cJSON_IsFalse(it)) continue;
      fputs(" --", out);
      for (const char *k = it->string; *k; k++) fputc(*k == '_' ? '-' : *k, out); /* the key as its flag */
      if (cJSON_IsNumber(it)) fprintf(out, " %.6g", it->valuedouble);
      else if (cJSON_IsString(it)) fprintf(out, " %s", it->valuestring);
    }
    fputc('\n', out);
  }
  cJSON_Delete(fixed);
  char g[64], q[64];
  fprintf(out, "  Try more GPUs (%s), a shorter %s, %sor GPUs with more memory.\n", px_report_flag("gpus", g),
          px_report_flag("seq", q), any ? "fewer fixed choices, " : "");
}

void px_report_sweep_text(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                          int64_t top, double wall_s, int threads, const px_bands *bands, FILE *out) {
  char a[64], b[64];
  const px_parallel *f = &o->fixed;
  char ft[128];
  px_parallel resolved = *f; /* the fine-tuning choices, fixed over the sweep, with their defaults */
  px_parallel_resolve(&resolved, m, c);
  fprintf(out, "sweep: %s on %lld x %s (%s), gbs %lld, seq %lld%s, objective %s\n", m->name, (long long)c->gpus,
          c->gpu.name, c->name, (long long)f->gbs, (long long)(f->seq > 0 ? f->seq : m->seq_len),
          px_lora_describe(&resolved, ft, sizeof ft), px_objective_names[o->objective]);
  px_report_inputs_text(m, c, f->seq > 0 ? f->seq : m->seq_len, f->mtp_layers > 0 ? f->mtp_layers : 0, out);
  int precs = px_report_sweep_precisions(r);
  if (precs) {
    fputs("  precisions searched:", out);
    for (int p = 0, k = 0; p < PX_PREC_COUNT; p++)
      if (precs >> p & 1) fprintf(out, "%s %s", k++ ? "," : "", px_precision_names[p]);
    char flag[32];
    px_report_field_flag("precision", strlen("precision"), flag, sizeof flag);
    if (f->precision >= 0) fprintf(out, " (fixed by --%s)", flag);
    else if (px_gpu_block_scaled(&c->gpu)) /* searched on request only: their numerics are the user's call */
      fprintf(out, " (mxfp8 and nvfp4, which this GPU runs, when --%s names one)", flag);
    if (r->n > 0) { /* the peak MFU is over: the cluster's, whatever the plan (px_sim_mfu) */
      int peak = r->entries[0].sim.mfu_peak_dtype;
      fprintf(out, "; MFU over the %s dense peak (%.0f TFLOP/s) whatever the plan's precision", px_dtype_names[peak],
              c->gpu.peak_flops[peak] / 1e12);
    }
    fputc('\n', out);
  }
  if (m->experts > 0) { /* searched only when asked for (sim/sweep.c) */
    char flag[32];
    px_report_field_flag("overlap", strlen("overlap"), flag, sizeof flag);
    if (f->overlap > 0 && (f->overlap & PX_OVERLAP_EP))
      fputs("  EP overlap (Megatron-Core's combined 1F1B) on every plan it applies to (epNov), the rest without\n", out);
    else
      fprintf(out, "  EP overlap not searched (ask for it with --%s all,ep)\n", flag);
  }
  if (f->moe_router_padding > 0) /* fixed: the router pads the quantized plans' expert rows, the others refused */
    fputs("  the router's padding on every plan (a quantized precision's: plans of another precision or the allgather "
          "dispatcher are invalid)\n", out);
  if (f->fp8_attention > 0) /* fixed: the quantized plans' attention in their fp8 format, the others refused */
    fputs("  fp8 attention on every plan (a quantized precision's: plans of another precision are invalid)\n", out);
  if (f->recompute_modules) { /* fixed: the plans recompute these (selm), none searched */
    char t[96];
    fprintf(out, "  recomputed modules on every plan (selm): %s\n",
            px_recompute_modules_str(f->recompute_modules, t, sizeof t));
  } else if (px_parallel_heavy_modules(m) && f->recompute < 0) {
    char flag[32], t[96];
    px_report_field_flag("recompute_modules", strlen("recompute_modules"), flag, sizeof flag);
    fprintf(out, "  recomputed modules not searched (ask for them with --%s %s)\n", flag,
            px_recompute_modules_str(px_parallel_heavy_modules(m), t, sizeof t));
  }
  fprintf(out, "  %lld plans enumerated: %lld invalid, %lld do not fit in %s, %lld simulated", (long long)r->enumerated,
          (long long)r->invalid, (long long)r->dropped_memory, px_fmt_bytes((double)px_gpu_usable_bytes(&c->gpu), a, sizeof a),
          (long long)r->simulated);
  if (r->npruned > r->unsized && o->front)
    fprintf(out, ", %lld fit, shown by their bound (neither among the best %lld, the heatmap's nor on the Pareto front)",
            (long long)(r->npruned - r->unsized), (long long)o->keep);
  else if (r->npruned > r->unsized)
    fprintf(out, ", %lld fit but cannot make the top %lld (bound)", (long long)(r->npruned - r->unsized), (long long)top);
  if (r->unsized > 0)
    fprintf(out, ", %lld cannot make the top %lld whether they fit or not (bound before compiling)", (long long)r->unsized,
            (long long)top);
  if (o->admit_name) fprintf(out, ", %lld valid but not runnable by %s", (long long)r->excluded, o->admit_name);
  fprintf(out, " (%s on %d thread%s)\n", px_fmt_time(wall_s, b, sizeof b), threads, threads == 1 ? "" : "s");
  if (r->n == 0) {
    no_fit_text(c, o, r, out);
    return;
  }
  bool ttt = o->tokens > 0, energy = ttt && px_power_known(c);
  bool j_token = !ttt && o->objective == PX_OBJ_ENERGY; /* what that objective ranks by without tokens */
  fprintf(out, "\n%4s  %-44s %9s %10s %6s %9s %6s %8s", "rank", "plan", "step", "tokens/s", "MFU", "mem/GPU", "idle",
          "exposed");
  if (ttt) fprintf(out, " %8s %9s %7s", "days", "GPU-hours", "goodput");
  if (ttt && o->price_per_gpu_hour > 0) fprintf(out, " %10s", "cost");
  if (energy) fprintf(out, " %10s", "energy");
  if (energy && o->price_per_kwh > 0) fprintf(out, " %10s", "energy $");
  if (j_token) fprintf(out, " %8s", "J/token");
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
    if (energy) fprintf(out, " %10s", px_fmt_si(e->train.energy_mwh * 1e6, "Wh", a, sizeof a));
    if (energy && o->price_per_kwh > 0) fprintf(out, " %10s", px_fmt_count(e->train.energy_cost_usd, b, sizeof b));
    if (j_token) fprintf(out, " %8.3g", e->sim.power.j_per_token);
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
  if (px_power_known(c)) {
    const px_power *p = &r->entries[0].sim.power;
    char w[32], it[32], st[32];
    fprintf(out, "\npower (best plan): %s at the site (%s IT, PUE %.2f; %.0f W a GPU, %s a node), %s a step",
            px_fmt_si(p->facility_w, "W", w, sizeof w), px_fmt_si(p->it_w, "W", it, sizeof it), c->pue, p->gpu_w,
            px_fmt_si(p->node_w, "W", a, sizeof a), px_fmt_si(p->step_j / 3600, "Wh", st, sizeof st));
    if (ttt)
      fprintf(out, "; %s tokens: %s", px_fmt_count(o->tokens, b, sizeof b), px_fmt_si(t->energy_mwh * 1e6, "Wh", a, sizeof a));
    if (ttt && o->price_per_kwh > 0)
      fprintf(out, ", $%s at $%g a kWh", px_fmt_count(t->energy_cost_usd, b, sizeof b), o->price_per_kwh);
    fputc('\n', out);
  }
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

void px_report_train_text(const px_sweep_opts *o, const px_train_time *t, FILE *out) {
  char a[32], b[32], c[32], d[32];
  fprintf(out, "  to train         %s tokens: %.1f days, goodput %.1f%%", px_fmt_count(o->tokens, a, sizeof a), t->days,
          100 * t->goodput);
  if (t->cluster_mtbf_s > 0)
    fprintf(out, " (cluster MTBF %s at %.0f h a GPU; a checkpoint of %s every %s, training held %s each)",
            px_fmt_time(t->cluster_mtbf_s, a, sizeof a), o->mtbf_hours, px_fmt_bytes(t->checkpoint_bytes, b, sizeof b),
            px_fmt_time(t->checkpoint_interval_s, c, sizeof c), px_fmt_time(t->checkpoint_blocked_s, d, sizeof d));
  fprintf(out, "\n                   %s GPU-hours", px_fmt_count(t->gpu_hours, a, sizeof a));
  if (o->price_per_gpu_hour > 0)
    fprintf(out, ", $%s at $%g a GPU-hour", px_fmt_count(t->cost_usd, a, sizeof a), o->price_per_gpu_hour);
  if (t->energy_mwh > 0) fprintf(out, "; %s at the site", px_fmt_si(t->energy_mwh * 1e6, "Wh", a, sizeof a));
  if (o->price_per_kwh > 0)
    fprintf(out, ", $%s at $%g a kWh", px_fmt_count(t->energy_cost_usd, a, sizeof a), o->price_per_kwh);
  fputc('\n', out);
}

px_status px_report_sweep_dir(const char *dir, bool html, const px_model *m, const px_cluster *c,
                              const px_sweep_opts *o, const px_sweep_result *r, const px_bands *bands, px_err *err) {
  px_status st = px_mkdir_p(dir, err);
  if (!st) st = px_plotdata_sweep(r, dir, err);
  if (!st && r->n > 0) st = px_plotdata_plan(m, c, &r->entries[0].par, dir, err);
  if (!st) st = px_report_sweep_write(dir, m, c, o, r, PX_REPORT_SWEEP_PLANS, bands, err);
  if (!st) st = px_plots_render(dir, err);
  if (!st && html) st = px_html_report(dir, err);
  return st;
}
