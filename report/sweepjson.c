/* sweep.json: the answer of a sweep, written once and read back. */
#include "report/sweepjson.h"

#include <stdio.h>

#include "core/json.h"
#include "report/flags.h"
#include "report/plan.h"
#include "report/sim.h"
#include "report/sweep.h"

static const px_report_field train_fields[] = {
    {NULL, "days", offsetof(px_train_time, days)},
    {NULL, "gpu_hours", offsetof(px_train_time, gpu_hours)},
    {NULL, "cost_usd", offsetof(px_train_time, cost_usd)},
    {NULL, "energy_mwh", offsetof(px_train_time, energy_mwh)}, /* 0 without the cluster's gpu.power_w */
    {NULL, "energy_cost_usd", offsetof(px_train_time, energy_cost_usd)},
    {NULL, "goodput", offsetof(px_train_time, goodput)},
    {NULL, "checkpoint_bytes", offsetof(px_train_time, checkpoint_bytes)},
    {NULL, "checkpoint_write_s", offsetof(px_train_time, checkpoint_write_s)},
    {NULL, "checkpoint_interval_s", offsetof(px_train_time, checkpoint_interval_s)},
    {NULL, "cluster_mtbf_s", offsetof(px_train_time, cluster_mtbf_s)},
    {NULL, "checkpoint_snapshot_s", offsetof(px_train_time, checkpoint_snapshot_s)},
    {NULL, "checkpoint_blocked_s", offsetof(px_train_time, checkpoint_blocked_s)},
};

const px_report_field *px_report_train_fields(size_t *count) {
  *count = sizeof train_fields / sizeof train_fields[0];
  return train_fields;
}

/* One ranked plan: the flags that give it again, what `parallax sim --json`
 * says of it (the same summary fields), its peak memory and time to train. */
static cJSON *entry_json(const px_sweep_entry *e, int64_t rank, const px_model *m, const px_cluster *c,
                         const px_bands *bands) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_json_add_num(o, "rank", (double)rank);
  char flags[PX_REPORT_FLAGS_MAX];
  px_report_plan_flags(&e->par, m, c, flags, sizeof flags);
  cJSON_AddStringToObject(o, "flags", flags);
  cJSON_AddItemToObject(o, "parallel", px_parallel_to_json(&e->par));
  px_report_sim_summary(o, &e->sim);
  cJSON *mem = cJSON_AddObjectToObject(o, "memory");
  if (mem) px_report_memory_peak(mem, e->peak_bytes, e->at_peak);
  if (e->train.days > 0 || e->train.cluster_mtbf_s > 0) {
    cJSON *t = cJSON_AddObjectToObject(o, "time_to_train");
    if (t) px_report_fields_json(t, train_fields, sizeof train_fields / sizeof train_fields[0], &e->train);
  }
  if (bands) cJSON_AddItemToObject(o, "validation", px_report_band_json(bands, m, c, &e->par));
  return o;
}

cJSON *px_report_fixed_json(const px_parallel *f) {
  cJSON *o = px_parallel_to_json(f); /* unset enums are left out already */
  if (!o) return NULL;
  const struct {
    const char *key;
    bool unset;
  } drop[] = {{"tp", f->tp <= 0},   {"pp", f->pp <= 0},   {"dp", f->dp <= 0},        {"zero", f->zero < 0},
              {"sp", f->sp < 0},    {"mbs", f->mbs <= 0}, {"vpp", f->vpp <= 0},      {"bucket_mib", f->bucket_bytes == 0},
              {"gbs", true},        {"seq", true}};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    if (drop[i].unset) cJSON_DeleteItemFromObjectCaseSensitive(o, drop[i].key);
  return o;
}

static void add_assumptions(cJSON *as, const px_model *m, const px_cluster *c, const px_sweep_opts *o) {
  char line[1400];
  /* the model's and the cluster's sources are question.model.source and question.cluster.source */
  (void)m;
  snprintf(line, sizeof line,
           "Compute: roofline per op, GEMM efficiency %.2f x wave and tile quantization on %lld SMs (tiles %lldx%lld, "
           "k_half %.0f), memory-bound ops at %.0f%% of %.0f GB/s, %.1f us per kernel.",
           c->gpu.gemm_max_efficiency, (long long)c->gpu.sm_count, (long long)c->gpu.gemm_tile_m,
           (long long)c->gpu.gemm_tile_n, c->gpu.gemm_k_half, 100 * c->gpu.memory_efficiency,
           c->gpu.hbm_bytes_per_s / 1e9, c->gpu.kernel_overhead_s * 1e6);
  cJSON_AddItemToArray(as, cJSON_CreateString(line));
  if (c->gpu.peak_flops[PX_DTYPE_FP8] > 0) {
    double split = px_gpu_fp8_split_share(&c->gpu);
    char bwd[128] = "";
    if (split < 1)
      snprintf(bwd, sizeof bwd, "; the backward's per-tensor GEMMs at %.2f of that rate (split accumulation)", split);
    snprintf(line, sizeof line,
             "fp8 GEMMs: efficiency %.2f of the fp8 peak with per-tensor scales (k_half %.0f), %.2f with blockwise "
             "scales%s.", px_gpu_gemm_max(&c->gpu, PX_DTYPE_FP8, false),
             px_gpu_gemm_k_half(&c->gpu, PX_DTYPE_FP8, false), px_gpu_gemm_max(&c->gpu, PX_DTYPE_FP8, true), bwd);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
  }
  snprintf(line, sizeof line,
           "Network: NVLink %.0f GB/s per GPU per direction at %.0f%%, %lld x %.0f Gb/s NICs per node at %.0f%%; ring, "
           "tree or hierarchical collectives, whichever is cheapest; concurrent flows share links equally.",
           c->intra_bytes_per_s / 1e9, 100 * c->intra_efficiency, (long long)c->nics_per_node,
           c->nic_bytes_per_s * 8 / 1e9, 100 * c->inter_efficiency);
  cJSON_AddItemToArray(as, cJSON_CreateString(line));
  snprintf(line, sizeof line,
           "Memory: a plan fits when its peak per GPU plus the executor's allocation headroom (1/%d of it and "
           "%d MiB) is within the HBM less the runtime's reserve (%.1f GiB usable).",
           PX_RESERVE_SHARE, PX_RESERVE_MIB, (double)px_gpu_usable_bytes(&c->gpu) / 1073741824.0);
  cJSON_AddItemToArray(as, cJSON_CreateString(line));
  snprintf(line, sizeof line,
           "Failures: %.0f hours MTBF per GPU (Llama 3 paper: 419 unexpected interruptions in 54 days on 16,384 "
           "GPUs), %.0f minutes lost per restart, checkpoints of parameters and optimizer written at %.1f GB/s per "
           "node, interval by Young/Daly.",
           o->mtbf_hours, o->restart_s / 60, c->storage_bytes_per_s / 1e9);
  cJSON_AddItemToArray(as, cJSON_CreateString(line));
  if (px_power_known(c)) {
    snprintf(line, sizeof line,
             "Power: a GPU draws %.0f W while it computes and %.0f W while it waits (bubbles, exposed communication), "
             "a node %.0f W besides its GPUs and %.0f W of network switches, the site %.2f times the IT power (PUE); "
             "the energy to train is the site's draw over the wall-clock days. No power cap is modelled.",
             c->gpu.power_w, px_power_wait_w(c), c->node_overhead_w,
             c->network_w_per_node, c->pue);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
  }
  if (o->ckpt_async) {
    if (c->host_pcie_bytes_per_s > 0)
      snprintf(line, sizeof line,
               "Asynchronous checkpoints: training stops only to copy each GPU's parameters and optimizer states to "
               "host memory at %.1f GB/s a GPU (host link), the write going on behind; checkpoints at least one "
               "write apart, and a failure also loses the write's duration.",
               c->host_pcie_bytes_per_s / 1e9 /
                   (double)(c->host_pcie_gpus_per_uplink > 0 ? c->host_pcie_gpus_per_uplink : 1));
    else
      snprintf(line, sizeof line,
               "Asynchronous checkpoints: training stops only to copy each GPU's parameters and optimizer states to "
               "host memory, timed at HBM bandwidth (%.0f GB/s; the cluster file gives no host link, so this is a "
               "lower bound), the write going on behind; checkpoints at least one write apart, and a failure also "
               "loses the write's duration.",
               c->gpu.hbm_bytes_per_s / 1e9);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
  }
}

void px_report_zero_label(const px_parallel *p, char *buf, size_t cap) {
  static const char *const opt[PX_OFFLOAD_COUNT] = {"", "+oc", "+on"}, *const par[PX_OFFLOAD_COUNT] = {"", "+pc", "+pn"};
  int o = p->offload_opt > 0 && p->offload_opt < PX_OFFLOAD_COUNT ? p->offload_opt : 0;
  int q = p->offload_params > 0 && p->offload_params < PX_OFFLOAD_COUNT ? p->offload_params : 0;
  char hybrid[24] = "", ahead[24] = "";
  if (px_parallel_hybrid(p)) snprintf(hybrid, sizeof hybrid, "h%lld", (long long)p->shard_group);
  if (p->zero == 3 && p->prefetch > 1) snprintf(ahead, sizeof ahead, "p%lld", (long long)p->prefetch);
  snprintf(buf, cap, "z%d%s%s%s%s%s%s", p->zero, p->zero >= 2 && p->grad_accum == PX_ACCUM_FULL ? "f" : "",
           p->zero == 3 && !p->reshard ? "k" : "", ahead, hybrid, opt[o], par[q]);
}

/* Why the best plan's ZeRO stage and mode (px_sweep_zero_alternatives):
 * {"best": "z2", ["shard_group": 8 when hybrid,] "alternatives": [{"zero", "fits",
 * "tokens_per_s_ratio" | "peak_bytes"}]}. */
static cJSON *zero_choice_json(const px_sweep_result *r) {
  px_sweep_alt alt[16];
  int n = px_sweep_zero_alternatives(r, &r->entries[0], alt, 16);
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  char label[32];
  px_report_zero_label(&r->entries[0].par, label, sizeof label);
  cJSON_AddStringToObject(o, "best", label);
  if (px_parallel_hybrid(&r->entries[0].par)) px_json_add_num(o, "shard_group", (double)r->entries[0].par.shard_group);
  cJSON *list = cJSON_AddArrayToObject(o, "alternatives");
  for (int i = 0; list && i < n; i++) {
    cJSON *a = cJSON_CreateObject();
    if (!a) break;
    px_report_zero_label(&alt[i].e->par, label, sizeof label);
    cJSON_AddStringToObject(a, "zero", label);
    cJSON_AddBoolToObject(a, "fits", alt[i].fits);
    if (alt[i].fits)
      px_json_add_num(a, "tokens_per_s_ratio", alt[i].e->sim.tokens_per_s / r->entries[0].sim.tokens_per_s);
    else
      px_json_add_num(a, "peak_bytes", (double)alt[i].e->peak_bytes);
    cJSON_AddItemToArray(list, a);
  }
  return o;
}

/* The best plan in the other precision (px_sweep_precision_alternative):
 * {"best": "fp8", "other": "bf16", "fits", "tokens_per_s_ratio" | "peak_bytes"}; NULL when none. */
static cJSON *precision_choice_json(const px_sweep_result *r) {
  px_sweep_alt alt;
  if (!px_sweep_precision_alternative(r, &r->entries[0], &alt)) return NULL;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "best", px_precision_names[r->entries[0].par.precision]);
  cJSON_AddStringToObject(o, "other", px_precision_names[alt.e->par.precision]);
  cJSON_AddBoolToObject(o, "fits", alt.fits);
  if (alt.fits)
    px_json_add_num(o, "tokens_per_s_ratio", alt.e->sim.tokens_per_s / r->entries[0].sim.tokens_per_s);
  else
    px_json_add_num(o, "peak_bytes", (double)alt.e->peak_bytes);
  return o;
}

cJSON *px_report_sweep_json(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                            int64_t top, const px_bands *bands) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON *q = cJSON_AddObjectToObject(root, "question");
  if (q) {
    cJSON_AddItemToObject(q, "model", px_model_to_json(m));
    cJSON_AddItemToObject(q, "cluster", px_cluster_to_json(c));
    px_json_add_num(q, "gpus", (double)c->gpus);
    px_json_add_num(q, "gbs", (double)o->fixed.gbs);
    px_json_add_num(q, "seq", (double)(o->fixed.seq > 0 ? o->fixed.seq : m->seq_len));
    px_report_inputs_json(q, m, c, o->fixed.seq > 0 ? o->fixed.seq : m->seq_len, o->fixed.mtp_layers > 0 ? o->fixed.mtp_layers : 0);
    cJSON_AddStringToObject(q, "objective", px_objective_names[o->objective]);
    px_json_add_num(q, "tokens", o->tokens);
    px_json_add_num(q, "price_usd_per_gpu_hour", o->price_per_gpu_hour);
    px_json_add_num(q, "price_usd_per_kwh", o->price_per_kwh);
    px_json_add_num(q, "mtbf_hours", o->mtbf_hours);
    px_json_add_num(q, "restart_s", o->restart_s);
    cJSON_AddBoolToObject(q, "ckpt_async", o->ckpt_async);
    cJSON_AddItemToObject(q, "fixed", px_report_fixed_json(&o->fixed));
    if (o->admit_name) cJSON_AddStringToObject(q, "runnable_by", o->admit_name);
    cJSON *pr = cJSON_AddArrayToObject(q, "precisions"); /* searched */
    for (int p = 0, seen = px_report_sweep_precisions(r); pr && p < PX_PREC_COUNT; p++)
      if (seen >> p & 1) cJSON_AddItemToArray(pr, cJSON_CreateString(px_precision_names[p]));
  }
  cJSON *counts = cJSON_AddObjectToObject(root, "counts");
  if (counts) {
    px_json_add_num(counts, "enumerated", (double)r->enumerated);
    px_json_add_num(counts, "invalid", (double)r->invalid);
    px_json_add_num(counts, "dropped_memory", (double)r->dropped_memory);
    px_json_add_num(counts, "simulated", (double)r->simulated);
    /* the plans known to fit: those simulated and those pruned once compiled (the never compiled: unsized) */
    px_json_add_num(counts, "fit", (double)(r->n + r->npruned - r->unsized));
    if (r->unsized) px_json_add_num(counts, "unsized", (double)r->unsized);
    if (o->front) px_json_add_num(counts, "bounded", (double)(r->npruned - r->unsized));
    if (o->admit) px_json_add_num(counts, "not_runnable", (double)r->excluded);
  }
  if (r->n == 0 && r->ndropped > 0) { /* none fits: how near the nearest came */
    uint64_t usable = px_gpu_usable_bytes(&c->gpu);
    int64_t host;
    const px_sweep_entry *least = px_report_sweep_least(r, usable, &host);
    cJSON *nf = cJSON_AddObjectToObject(root, "no_fit");
    if (nf) {
      px_json_add_num(nf, "usable_bytes", (double)usable);
      px_json_add_num(nf, "host_bound", (double)host);
    }
    if (nf && least) {
      char flags[PX_REPORT_FLAGS_MAX];
      px_report_plan_flags(&least->par, m, c, flags, sizeof flags);
      cJSON_AddStringToObject(nf, "least_flags", flags);
      px_json_add_num(nf, "least_peak_bytes", (double)least->peak_bytes);
      px_json_add_num(nf, "least_need_bytes", (double)px_plan_reserve_bytes(least->peak_bytes));
    }
  }
  cJSON *plans = cJSON_AddArrayToObject(root, "plans");
  for (int64_t i = 0; plans && i < r->n && i < top; i++) cJSON_AddItemToArray(plans, entry_json(&r->entries[i], i + 1, m, c, bands));
  if (r->n > 0) cJSON_AddItemToObject(root, "zero_choice", zero_choice_json(r));
  cJSON *pc = r->n > 0 ? precision_choice_json(r) : NULL;
  if (pc) cJSON_AddItemToObject(root, "precision_choice", pc);
  cJSON *as = cJSON_AddArrayToObject(root, "assumptions");
  if (as) add_assumptions(as, m, c, o);
  return root;
}

static px_status sweep_path(const char *dir, char *path, size_t cap, px_err *err) {
  int w = snprintf(path, cap, "%s/sweep.json", dir);
  if (w < 0 || (size_t)w >= cap) return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
  return PX_OK;
}

px_status px_report_sweep_write(const char *dir, const px_model *m, const px_cluster *c, const px_sweep_opts *o,
                                const px_sweep_result *r, int64_t top, const px_bands *bands, px_err *err) {
  char path[4096];
  px_status st = sweep_path(dir, path, sizeof path, err);
  if (st) return st;
  cJSON *j = px_report_sweep_json(m, c, o, r, top, bands);
  st = j ? px_json_write(path, j, err) : px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory", path);
  cJSON_Delete(j);
  return st;
}

px_status px_report_sweep_load(const char *dir, cJSON **root, px_err *err) {
  char path[4096];
  *root = NULL;
  px_status st = sweep_path(dir, path, sizeof path, err);
  if (st || (st = px_json_load(path, root, err))) return st;
  const char *bad = !cJSON_IsObject(*root) ? "not a JSON object"
                    : cJSON_GetObjectItemCaseSensitive(*root, "plans") &&
                            !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(*root, "plans"))
                        ? "field 'plans' is not an array"
                        : NULL;
  if (!bad) return PX_OK;
  cJSON_Delete(*root);
  *root = NULL;
  return px_err_set(err, PX_ERR_INPUT, "%s: %s", path, bad);
}
