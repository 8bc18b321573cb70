/* The simulator's result: the summary text and the JSON contract. */
#include "report/sim.h"

#include "core/fmt.h"
#include "core/json.h"
#include "report/plan.h"

const char *px_report_mfu_text(double mfu, int peak_dtype, double mfu_precision, int precision_dtype, char *buf,
                               size_t cap) {
  int n = snprintf(buf, cap, "MFU %.1f%% of %s peak", 100 * mfu, px_dtype_names[peak_dtype]);
  if (precision_dtype != peak_dtype && mfu_precision != mfu && n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " (%.1f%% of %s peak)", 100 * mfu_precision, px_dtype_names[precision_dtype]);
  return buf;
}

void px_report_mfu_peaks_json(cJSON *o, int peak_dtype, int precision_dtype) {
  cJSON_AddStringToObject(o, "mfu_peak", px_dtype_names[peak_dtype]);
  cJSON_AddStringToObject(o, "mfu_precision_peak", px_dtype_names[precision_dtype]);
}

/* The parts of a step's breakdown, in the order they are printed. */
static int breakdown_parts(const px_sim_breakdown *b, const char **names, double *s) {
  int n = 0;
  names[n] = "forward", s[n++] = b->forward_s;
  names[n] = "backward", s[n++] = b->backward_s;
  names[n] = "recomputation", s[n++] = b->recompute_s;
  names[n] = "optimizer", s[n++] = b->optimizer_s;
  names[n] = "pipeline bubble", s[n++] = b->bubble_s;
  static const char *const exposed[PX_SIM_COMM_COUNT] = {"exposed tp", "exposed cp", "exposed ep", "exposed pp",
                                                          "exposed dp", "exposed host copies"};
  for (int k = 0; k < PX_SIM_COMM_COUNT; k++) names[n] = exposed[k], s[n++] = b->exposed_s[k];
  names[n] = "SM contention", s[n++] = b->contention_s;
  names[n] = "host launches", s[n++] = b->launch_s;
  return n;
}

void px_report_breakdown_text(const px_sim_result *r, FILE *out) {
  const char *names[16];
  double s[16], total = 0;
  int n = breakdown_parts(&r->breakdown, names, s);
  for (int i = 0; i < n; i++) total += s[i];
  fprintf(out, "  where the step goes (stage %lld, the last to finish):\n", (long long)r->breakdown_stage);
  for (int i = 0; i < n; i++) {
    char t[32];
    if (s[i] <= 0 && i >= 4) continue; /* a bubble or communication this plan has none of */
    fprintf(out, "    %-20s %10s %6.1f%%\n", names[i], px_fmt_time(s[i], t, sizeof t), total > 0 ? 100 * s[i] / total : 0.0);
  }
}

/* The stage's heaviest op kinds by compute time (px_sim_stage.op_s, uncontended), the share of its compute each:
 * which kernels a profile of the run should be held against first. */
static void heaviest_ops_text(const px_sim_result *r, FILE *out) {
  const px_sim_stage *st = &r->stages[r->breakdown_stage];
  double total = 0;
  for (int k = 0; k < PX_OP_COUNT; k++) total += st->op_s[k];
  if (total <= 0) return;
  bool used[PX_OP_COUNT] = {false};
  char t[32];
  fprintf(out, "  heaviest ops    ");
  for (int n = 0; n < 5; n++) {
    int best = -1;
    for (int k = 0; k < PX_OP_COUNT; k++)
      if (!used[k] && st->op_s[k] > 0 && (best < 0 || st->op_s[k] > st->op_s[best])) best = k;
    if (best < 0) break;
    used[best] = true;
    fprintf(out, "%s %s %.1f%%", n ? "," : "", px_op_names[best], 100 * st->op_s[best] / total);
  }
  fprintf(out, " of %s compute (stage %lld)\n", px_fmt_time(total, t, sizeof t), (long long)r->breakdown_stage);
}

cJSON *px_report_breakdown_json(const px_sim_result *r) {
  const px_sim_breakdown *b = &r->breakdown;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_json_add_num(o, "stage", (double)r->breakdown_stage);
  px_json_add_num(o, "forward_s", b->forward_s);
  px_json_add_num(o, "backward_s", b->backward_s);
  px_json_add_num(o, "recompute_s", b->recompute_s);
  px_json_add_num(o, "optimizer_s", b->optimizer_s);
  px_json_add_num(o, "bubble_s", b->bubble_s);
  cJSON *ex = cJSON_AddObjectToObject(o, "exposed_s");
  for (int k = 0; ex && k < PX_SIM_COMM_COUNT; k++) px_json_add_num(ex, px_sim_comm_names[k], b->exposed_s[k]);
  px_json_add_num(o, "contention_s", b->contention_s);
  px_json_add_num(o, "launch_s", b->launch_s);
  return o;
}

void px_report_power_text(const px_plan *plan, const px_sim_result *r, FILE *out) {
  const px_cluster *c = &plan->cluster;
  const px_power *p = &r->power;
  if (!px_power_known(c)) {
    fprintf(out, "  power            not known: the cluster file gives no gpu.power_w\n");
    return;
  }
  char a[32], b[32], d[32], e[32];
  fprintf(out, "  power            %.0f W per GPU (computing %.0f%% of the step at %.0f W, else %.0f W), %s per node, "
               "%s the job, %s at the site (PUE %.2f)\n",
          p->gpu_w, 100 * r->compute_share, c->gpu.power_w, px_power_wait_w(c),
          px_fmt_si(p->node_w, "W", a, sizeof a), px_fmt_si(p->it_w, "W", b, sizeof b),
          px_fmt_si(p->facility_w, "W", d, sizeof d), c->pue);
  fprintf(out, "  energy           %s a step at the site, %.3g J a token\n", px_fmt_si(p->step_j / 3600, "Wh", e, sizeof e),
          p->j_per_token);
}

void px_report_sim_text(const px_plan *plan, const px_sim_result *r, const px_replan_fit *fits, int nfits,
                        double wall_s, const px_bands *bands, FILE *out) {
  char a[64], b[64], c[64], d[64], mfu[96];
  px_report_plan_line(plan, "sim", out);
  px_report_inputs_text(&plan->model, &plan->cluster, plan->par.seq, plan->par.mtp_layers, out);
  px_report_verdict_text(plan, fits, nfits, out);
  fprintf(out, "  step time        %s\n", px_fmt_time(r->step_time_s, a, sizeof a));
  fprintf(out, "  throughput       %s tokens/s (%.0f per GPU)\n", px_fmt_count(r->tokens_per_s, a, sizeof a),
          r->tokens_per_s / (double)plan->cluster.gpus);
  fprintf(out, "  model TFLOP/s    %.1f per GPU: %s, HFU %.1f%%\n", r->model_tflops_per_gpu,
          px_report_mfu_text(r->mfu, r->mfu_peak_dtype, r->mfu_precision, r->precision_peak_dtype, mfu, sizeof mfu),
          100 * r->hfu);
  /* the compute streams' idle share of the forward-backward phase: the pipeline's bubble and every wait */
  if (plan->par.pp > 1)
    fprintf(out, "  compute idle     %.1f%% of the forward-backward phase (the pipeline bubble's analytic %.1f%%)\n",
            100 * r->bubble_fraction, 100 * px_plan_bubble_analytic(plan));
  else
    fprintf(out, "  compute idle     %.1f%% of the forward-backward phase (waits: no pipeline)\n",
            100 * r->bubble_fraction);
  /* comm_tp_s: every collective inside the layers (TP's, CP's, EP's and ETP's), named by the groups the plan's grid
   * has (a group of one exchanges nothing) */
  const px_grid *g = &plan->grid;
  bool tp = g->tp_place.size > 1 || g->etp_place.size > 1, cp = g->cp_place.size > 1, ep = g->ep_place.size > 1;
  char groups[16];
  snprintf(groups, sizeof groups, "%s%s%s", tp || (!cp && !ep) ? "tp" : "", cp ? (tp ? "+cp" : "cp") : "",
           ep ? (tp || cp ? "+ep" : "ep") : "");
  fprintf(out, "  communication    %s %s, pp %s, dp %s; exposed %s\n", groups, px_fmt_time(r->comm_tp_s, a, sizeof a),
          px_fmt_time(r->comm_pp_s, b, sizeof b), px_fmt_time(r->comm_dp_s, c, sizeof c),
          px_fmt_time(r->comm_exposed_s, d, sizeof d));
  if (r->comm_contention_s > 0)
    fprintf(out, "  contention       collectives' SMs took %s of compute beside them (in exposed)\n",
            px_fmt_time(r->comm_contention_s, a, sizeof a));
  if (r->straggler_stretch > 1)
    fprintf(out, "  straggler        slowest of %lld GPUs (jitter %.2f%%): compute x%.3f, %s of the step\n",
            (long long)r->straggler_ranks, 100 * plan->cluster.gpu.jitter, r->straggler_stretch,
            px_fmt_time(r->straggler_s, a, sizeof a));
  if (plan->par.offload_opt)
    fprintf(out, "  offload          %s on the host link; optimizer step on the host CPU %s\n",
            px_fmt_time(r->comm_host_s, a, sizeof a), px_fmt_time(r->stages[0].op_s[PX_OP_ADAMW_HOST], b, sizeof b));
  else if (plan->par.offload_act_layers > 0) /* the copies' time, and what of it the compute waited for */
    fprintf(out, "  offload          activations of %lld layers: %s on the host link, %s of it exposed\n",
            (long long)plan->par.offload_act_layers, px_fmt_time(r->comm_host_s, a, sizeof a),
            px_fmt_time(r->stages[0].parts.exposed_s[PX_SIM_COMM_HOST], b, sizeof b));
  px_report_breakdown_text(r, out);
  heaviest_ops_text(r, out);
  px_report_power_text(plan, r, out);
  int64_t worst = px_plan_peak_stage(plan);
  fprintf(out, "  memory           peak %s per GPU (stage %lld) of %s HBM\n",
          px_fmt_bytes((double)plan->mem[worst].peak_bytes, a, sizeof a), (long long)worst,
          px_fmt_bytes((double)plan->cluster.gpu.hbm_bytes, b, sizeof b));
  if (bands) {
    px_band_key k;
    char text[512];
    px_band_key_of(&plan->model, &plan->cluster, &plan->par, &k);
    px_band_describe(bands, &k, text, sizeof text);
    fprintf(out, "  validated        %s\n", text);
  }
  int64_t release = px_gpu_attn_cudnn(&plan->cluster.gpu);
  if (release > 0) { /* what the fused attention's figures assume */
    char rel[24];
    fprintf(out, "  attention        cuDNN %s (gpu.cudnn_version): the curves measured with it, or the newest before\n",
            px_fmt_release(release, rel, sizeof rel));
  }
  fprintf(out, "  simulated        %llu events in %s\n", (unsigned long long)r->events, px_fmt_time(wall_s, a, sizeof a));
}

cJSON *px_report_band_json(const px_bands *bands, const px_model *m, const px_cluster *c, const px_parallel *p) {
  px_band_key k;
  char text[512];
  px_band_key_of(m, c, p, &k);
  px_band_describe(bands, &k, text, sizeof text);
  const px_band *b = px_bands_find(bands, &k);
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "family", k.family);
  cJSON_AddStringToObject(o, "precision", k.precision);
  cJSON_AddStringToObject(o, "kind", px_band_kind_name(k.moe));
  cJSON_AddStringToObject(o, "launch", px_band_launch_name(k.graphed));
  px_json_add_num(o, "runs", b ? b->runs : 0);
  if (b) {
    px_json_add_num(o, "min", b->min);
    px_json_add_num(o, "max", b->max);
    px_json_add_num(o, "mean", b->mean);
    cJSON_AddStringToObject(o, "validations", b->sources);
  }
  cJSON_AddStringToObject(o, "text", text);
  return o;
}

static const px_report_field sim_fields[] = {
    {NULL, "step_time_s", offsetof(px_sim_result, step_time_s)},
    {NULL, "tokens_per_s", offsetof(px_sim_result, tokens_per_s)},
    {NULL, "model_tflops_per_gpu", offsetof(px_sim_result, model_tflops_per_gpu)},
    {NULL, "mfu", offsetof(px_sim_result, mfu)},
    {NULL, "hfu", offsetof(px_sim_result, hfu)},
    {NULL, "mfu_precision", offsetof(px_sim_result, mfu_precision)},
    {NULL, "bubble_fraction", offsetof(px_sim_result, bubble_fraction)},
    {"comm", "tp_s", offsetof(px_sim_result, comm_tp_s)},
    {"comm", "pp_s", offsetof(px_sim_result, comm_pp_s)},
    {"comm", "dp_s", offsetof(px_sim_result, comm_dp_s)},
    {"comm", "exposed_s", offsetof(px_sim_result, comm_exposed_s)},
    {"comm", "host_s", offsetof(px_sim_result, comm_host_s)},
    {"comm", "contention_s", offsetof(px_sim_result, comm_contention_s)},
    {NULL, "compute_share", offsetof(px_sim_result, compute_share)},
    {"power", "gpu_w", offsetof(px_sim_result, power.gpu_w)}, /* sim/power.h; 0 without gpu.power_w */
    {"power", "node_w", offsetof(px_sim_result, power.node_w)},
    {"power", "it_w", offsetof(px_sim_result, power.it_w)},
    {"power", "facility_w", offsetof(px_sim_result, power.facility_w)},
    {"power", "step_j", offsetof(px_sim_result, power.step_j)},
    {"power", "j_per_token", offsetof(px_sim_result, power.j_per_token)},
};

const px_report_field *px_report_sim_fields(size_t *count) {
  *count = sizeof sim_fields / sizeof sim_fields[0];
  return sim_fields;
}

void px_report_sim_summary(cJSON *o, const px_sim_result *r) {
  px_report_fields_json(o, sim_fields, sizeof sim_fields / sizeof sim_fields[0], r);
  px_report_mfu_peaks_json(o, r->mfu_peak_dtype, r->precision_peak_dtype);
  cJSON_AddItemToObject(o, "breakdown", px_report_breakdown_json(r));
  cJSON_AddBoolToObject(o, "fits", r->fits);
}

cJSON *px_report_sim_json(const px_plan *plan, const px_sim_result *r, const px_replan_fit *fits, int nfits,
                          const px_bands *bands) {
  cJSON *o = px_report_plan_head(plan);
  if (!o) return NULL;
  px_report_sim_summary(o, r);
  cJSON_AddItemToObject(o, "verdict", px_report_verdict_json(plan, fits, nfits));
  if (bands) cJSON_AddItemToObject(o, "validation", px_report_band_json(bands, &plan->model, &plan->cluster, &plan->par));
  px_json_add_num(o, "bubble_analytic", px_plan_bubble_analytic(plan));
  cJSON *sg = cJSON_AddObjectToObject(o, "straggler"); /* sim/straggler.h */
  if (sg) {
    px_json_add_num(sg, "jitter", plan->cluster.gpu.jitter);
    px_json_add_num(sg, "ranks", (double)r->straggler_ranks);
    px_json_add_num(sg, "compute_stretch", r->straggler_stretch);
    px_json_add_num(sg, "step_s", r->straggler_s);
  }
  cJSON_AddItemToObject(o, "memory", px_report_memory_json(plan));
  cJSON *stages = cJSON_AddArrayToObject(o, "stages");
  for (int64_t s = 0; stages && s < r->nstages; s++) {
    const px_sim_stage *ps = &r->stages[s];
    cJSON *so = cJSON_CreateObject();
    if (!so) break;
    px_json_add_num(so, "busy_s", ps->busy_s);
    px_json_add_num(so, "end_s", ps->end_s);
    px_json_add_num(so, "compute_s", ps->compute_s);
    px_json_add_num(so, "tp_s", ps->tp_s);
    px_json_add_num(so, "pp_s", ps->pp_s);
    px_json_add_num(so, "dp_s", ps->dp_s);
    px_json_add_num(so, "host_s", ps->host_s);
    px_json_add_num(so, "contention_s", ps->contention_s);
    cJSON *ops = cJSON_AddObjectToObject(so, "op_s");
    for (int k = 0; ops && k < PX_OP_COUNT; k++)
      if (ps->op_s[k] > 0) px_json_add_num(ops, px_op_names[k], ps->op_s[k]);
    cJSON_AddItemToArray(stages, so);
  }
  px_json_add_num(o, "params", (double)plan->params_total);
  px_json_add_num(o, "flops_per_step", plan->model_flops_per_step);
  px_json_add_num(o, "events", (double)r->events);
  return o;
}
