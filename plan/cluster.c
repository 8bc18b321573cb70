/* Cluster specification: JSON loading and sizing. */
#include "plan/cluster.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/paths.h"

PX_NAME_TABLE(px_net_kind_names, PX_NET_COUNT, "rail_fat_tree", "fat_tree");
PX_NAME_TABLE(px_link_names, PX_LINK_COUNT, "intra", "inter");
const char *const px_busbw_coll_names[PX_COLL_COUNT] = {NULL, "all_reduce", "all_gather", "reduce_scatter",
                                                        "sendrecv", "alltoall"};

#define GIB ((double)(1ull << 30))
#define TRY(x) \
  if ((st = (x))) return st

/* Reads one entry (entry i of a list field, an object) into gpu; ec names its fields "<path>[i]." in messages. */
typedef px_status (*list_entry_fn)(const px_json_ctx *ec, const cJSON *e, int i, px_gpu *gpu, px_err *err);

/* A list field of objects at `path` (key of parent, read through pc), each read by fn; *len
 * gets the entries read (left as is when the field is absent or null).
 * Refused when not an array, longer than max, or an entry is no object or has a key fn does not read. */
static px_status list_read(const px_json_ctx *pc, const cJSON *parent, const char *key, const char *path, int max,
                           list_entry_fn fn, px_gpu *gpu, int *len, px_err *err) {
  const char *file = pc->file;
  const cJSON *a = px_json_get(pc, parent, key);
  if (!a) return PX_OK;
  if (!cJSON_IsArray(a)) return px_err_set(err, PX_ERR_INPUT, "%s: field '%s': expected an array", file, path);
  if (cJSON_GetArraySize(a) > max)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s': more than %d entries", file, path, max);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s[%d].", path, i);
    if (!cJSON_IsObject(e))
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%s[%d]': expected an object", file, path, i);
    px_json_keys keys = {.n = 0};
    px_json_ctx ec = {file, prefix, &keys};
    px_status st = fn(&ec, e, i, gpu, err);
    if (!st) st = px_json_refuse_unknown(&ec, e, NULL, 0, err);
    if (st) return st;
    i++;
  }
  *len = i;
  return PX_OK;
}

const char *const px_attn_format_names[PX_ATTN_FORMAT_COUNT] = {"bf16", "fp8", "mxfp8"};
const char *const px_attn_kernel_names[PX_ATTN_KERNEL_COUNT] = {"own", "flash2"};

bool px_gpu_attn_kernel_measured(const px_gpu *g, px_attn_kernel k) {
  for (int i = 0; i < g->attention_len; i++)
    if (px_attn_curve_of(g, &g->attention[i], k)) return true;
  return false;
}

int64_t px_gpu_attn_cudnn(const px_gpu *g) {
  int64_t newest = 0;
  for (int i = 0; i < g->attention_len; i++)
    if (g->attention[i].cudnn_version > newest) newest = g->attention[i].cudnn_version;
  return newest > 0 && g->cudnn_version > 0 ? g->cudnn_version : newest;
}

/* A cuDNN release field (gpu.cudnn_version, gpu.attention[i].cudnn_version): an integer in
 * cudnn.backend_version()'s form; a release written as its name ("9.13.1", 9.13) is refused saying so. */
static px_status cudnn_version_from_json(const px_json_ctx *c, const cJSON *obj, int64_t *out, px_err *err) {
  const cJSON *v = px_json_get(c, obj, "cudnn_version");
  *out = 0;
  if (v && (cJSON_IsString(v) || (cJSON_IsNumber(v) && v->valuedouble != floor(v->valuedouble))))
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: field '%scudnn_version': expected cudnn.backend_version()'s integer (9.13.1 is 91301)",
                      c->file, c->prefix);
  return px_json_int(c, obj, "cudnn_version", false, 0, PX_CUDNN_VERSION_MAX, out, err);
}

/* gpu.attention[i] (the GPU's own fused kernel) and gpu.attention_flash2[i] (FlashAttention-2's): {"dtype":
 * "bf16"|"fp8"|"mxfp8" (optional, bf16; FlashAttention-2: bf16), "pass": "fwd"|"bwd", "head_dim": D, "causal": B,
 * "window": W (optional, causal only), "cudnn_version": V (optional), "seq": [...], "tflops": [...]}, into *a. */
static px_status attention_curve(const px_json_ctx *ec, const cJSON *e, px_attn_curve *a, px_attn_kernel kernel,
                                 px_err *err) {
  static const char *const passes[] = {"fwd", "bwd"};
  const char *file = ec->file, *at = ec->prefix; /* "gpu.attention[i]." */
  px_status st;
  int pass = 0, fmt = PX_ATTN_BF16;
  TRY(px_json_enum(ec, e, "dtype", false, px_attn_format_names, PX_ATTN_FORMAT_COUNT, &fmt, err));
  a->fmt = (px_attn_format)fmt;
  a->kernel = kernel;
  if (kernel == PX_ATTN_KERNEL_FLASH2 && a->fmt != PX_ATTN_BF16)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%sdtype': FlashAttention-2 has no %s kernel", file, at,
                      px_attn_format_names[a->fmt]);
  TRY(px_json_enum(ec, e, "pass", true, passes, 2, &pass, err));
  a->bwd = pass == 1;
  TRY(px_json_int(ec, e, "head_dim", true, 1, 4096, &a->head_dim, err));
  TRY(px_json_bool(ec, e, "causal", true, &a->causal, err));
  a->window = 0;
  TRY(px_json_int(ec, e, "window", false, 0, 1000000000, &a->window, err));
  if (a->window > 0 && !a->causal)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%swindow': a sliding window is causal ('causal': true)", file, at);
  TRY(cudnn_version_from_json(ec, e, &a->cudnn_version, err));
  const cJSON *seq = px_json_get(ec, e, "seq"), *tf = px_json_get(ec, e, "tflops");
  int n = cJSON_IsArray(seq) ? cJSON_GetArraySize(seq) : 0;
  if (n < 1 || n > PX_ATTN_POINTS_MAX || !cJSON_IsArray(tf) || cJSON_GetArraySize(tf) != n)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%.*s': 'seq' and 'tflops' must be arrays of the same length, 1 to %d",
                      file, (int)strlen(at) - 1, at, PX_ATTN_POINTS_MAX);
  for (int k = 0; k < n; k++) {
    const cJSON *sv = cJSON_GetArrayItem(seq, k), *tv = cJSON_GetArrayItem(tf, k);
    if (!cJSON_IsNumber(sv) || sv->valuedouble < 1 || sv->valuedouble > 1e9 ||
        (k > 0 && (int64_t)sv->valuedouble <= a->seq[k - 1]))
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%sseq[%d]': expected increasing lengths >= 1", file, at, k);
    if (!cJSON_IsNumber(tv) || tv->valuedouble <= 0 || tv->valuedouble > 1e6)
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%stflops[%d]': expected a positive TFLOP/s", file, at, k);
    a->seq[k] = (int64_t)sv->valuedouble;
    a->tflops[k] = tv->valuedouble;
  }
  a->n = n;
  return PX_OK;
}

static px_status attention_entry(const px_json_ctx *ec, const cJSON *e, int i, px_gpu *gpu, px_err *err) {
  return attention_curve(ec, e, &gpu->attention[i], PX_ATTN_KERNEL_OWN, err);
}

/* after the GPU's own curves (gpu->attention_len of them, read first) */
static px_status attention_flash2_entry(const px_json_ctx *ec, const cJSON *e, int i, px_gpu *gpu, px_err *err) {
  return attention_curve(ec, e, &gpu->attention[gpu->attention_len + i], PX_ATTN_KERNEL_FLASH2, err);
}

/* gpu.gemm.table[i]: {"m", "n", "k", "efficiency", "dtype"}. */
static px_status gemm_entry(const px_json_ctx *ec, const cJSON *e, int i, px_gpu *gpu, px_err *err) {
  px_status st;
  px_gemm_point *p = &gpu->gemm_table[i];
  TRY(px_json_int(ec, e, "m", true, 1, (int64_t)1 << 32, &p->m, err));
  TRY(px_json_int(ec, e, "n", true, 1, (int64_t)1 << 32, &p->n, err));
  TRY(px_json_int(ec, e, "k", true, 1, (int64_t)1 << 32, &p->k, err));
  TRY(px_json_num(ec, e, "efficiency", true, 1e-6, 1.0, &p->efficiency, err));
  p->dtype = -1;
  return px_json_enum(ec, e, "dtype", false, px_dtype_names, PX_DTYPE_COUNT, &p->dtype, err);
}

/* gpu.kernel_rates[i]: {"kind", "gb_per_s" and/or "gflop_per_s", "overhead_us"}. */
static px_status rate_entry(const px_json_ctx *ec, const cJSON *e, int i, px_gpu *gpu, px_err *err) {
  px_status st;
  px_kernel_rate *r = &gpu->kernel_rates[i];
  double gbps = 0, gflops = 0, us = 0;
  TRY(px_json_str(ec, e, "kind", true, r->kind, sizeof r->kind, err));
  TRY(px_json_num(ec, e, "gb_per_s", false, 1e-6, 1e9, &gbps, err));
  TRY(px_json_num(ec, e, "gflop_per_s", false, 1e-6, 1e12, &gflops, err));
  TRY(px_json_num(ec, e, "overhead_us", false, 0.0, 1e9, &us, err));
  if (gbps <= 0 && gflops <= 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.kernel_rates[%d]': needs gb_per_s or gflop_per_s", ec->file,
                      i);
  r->bytes_per_s = gbps * 1e9;
  r->flops_per_s = gflops * 1e9;
  r->overhead_s = us * 1e-6;
  return PX_OK;
}

static px_status gpu_from_json(const cJSON *g, const char *file, px_gpu *gpu, px_err *err) {
  px_json_keys keys = {.n = 0}, peak_keys = {.n = 0}, gemm_keys = {.n = 0};
  px_json_ctx c = {file, "gpu.", &keys};
  px_status st;
  TRY(px_json_str(&c, g, "name", true, gpu->name, sizeof gpu->name, err));
  const cJSON *peak;
  TRY(px_json_obj(&c, g, "peak_tflops", true, &peak, err));
  px_json_ctx pc = {file, "gpu.peak_tflops.", &peak_keys};
  for (int t = 0; t < PX_DTYPE_COUNT; t++) {
    double tf = 0;
    TRY(px_json_num(&pc, peak, px_dtype_names[t], false, 0.0, 1e6, &tf, err));
    gpu->peak_flops[t] = tf * 1e12;
  }
  TRY(px_json_refuse_unknown(&pc, peak, NULL, 0, err));
  if (gpu->peak_flops[PX_DTYPE_FP32] <= 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.peak_tflops.fp32' is missing or zero", file);
  double hbm_gib = 0, reserved_gib = 0, hbm_gbps = 0, overhead_us = 0;
  TRY(px_json_num(&c, g, "hbm_gib", true, 1e-3, 1e6, &hbm_gib, err));
  TRY(px_json_num(&c, g, "reserved_gib", false, 0.0, 1e6, &reserved_gib, err));
  if (reserved_gib >= hbm_gib)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.reserved_gib': %g is not below hbm_gib %g", file,
                      reserved_gib, hbm_gib);
  gpu->hbm_bytes = (uint64_t)(hbm_gib * GIB);
  gpu->reserved_bytes = (uint64_t)(reserved_gib * GIB);
  TRY(px_json_num(&c, g, "hbm_gb_per_s", true, 1e-3, 1e9, &hbm_gbps, err));
  gpu->hbm_bytes_per_s = hbm_gbps * 1e9;
  gpu->memory_efficiency = 0.8;
  TRY(px_json_num(&c, g, "memory_efficiency", false, 0.01, 1.0, &gpu->memory_efficiency, err));
  gpu->sm_count = 1;
  TRY(px_json_int(&c, g, "sm_count", false, 1, 100000, &gpu->sm_count, err));
  TRY(px_json_num(&c, g, "kernel_overhead_us", false, 0.0, 1e6, &overhead_us, err));
  gpu->kernel_overhead_s = overhead_us * 1e-6;
  gpu->jitter = PX_GPU_JITTER_DEFAULT;
  TRY(px_json_num(&c, g, "jitter", false, 0.0, 0.5, &gpu->jitter, err));
  gpu->sustained_share = 1.0;
  TRY(px_json_num(&c, g, "sustained_share", false, 0.1, 1.0, &gpu->sustained_share, err));
  TRY(px_json_num(&c, g, "power_w", false, 0.0, 1e5, &gpu->power_w, err));
  TRY(px_json_num(&c, g, "idle_power_w", false, 0.0, 1e5, &gpu->idle_power_w, err));
  if (gpu->power_w > 0 && gpu->idle_power_w > gpu->power_w)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.idle_power_w': %g W is above gpu.power_w %g W (a GPU "
                      "draws less waiting than computing)", file, gpu->idle_power_w, gpu->power_w);

  gpu->gemm_max_efficiency = 0.8;
  gpu->gemm_tile_m = 128;
  gpu->gemm_tile_n = 128;
  gpu->gemm_k_half = 0;
  gpu->gemm_fp8_k_half = 0;
  const cJSON *gemm;
  TRY(px_json_obj(&c, g, "gemm", false, &gemm, err));
  if (gemm) {
    px_json_ctx gc = {file, "gpu.gemm.", &gemm_keys};
    TRY(px_json_num(&gc, gemm, "max_efficiency", false, 0.01, 1.0, &gpu->gemm_max_efficiency, err));
    TRY(px_json_int(&gc, gemm, "tile_m", false, 1, 4096, &gpu->gemm_tile_m, err));
    TRY(px_json_int(&gc, gemm, "tile_n", false, 1, 4096, &gpu->gemm_tile_n, err));
    TRY(px_json_num(&gc, gemm, "k_half", false, 0.0, 1e6, &gpu->gemm_k_half, err));
    TRY(px_json_num(&gc, gemm, "fp8_k_half", false, 0.0, 1e6, &gpu->gemm_fp8_k_half, err));
    TRY(px_json_num(&gc, gemm, "fp8_max_efficiency", false, 0.01, 1.0, &gpu->gemm_fp8_max_efficiency, err));
    TRY(px_json_num(&gc, gemm, "fp8_block_max_efficiency", false, 0.01, 1.0, &gpu->gemm_fp8_block_max_efficiency,
                    err));
    TRY(px_json_num(&gc, gemm, "fp8_split_accumulation_share", false, 0.01, 1.0, &gpu->gemm_fp8_split_share, err));
    double best_tf = 0, fp8_best_tf = 0;
    TRY(px_json_num(&gc, gemm, "best_tflops", false, 1e-3, 1e6, &best_tf, err));
    TRY(px_json_num(&gc, gemm, "fp8_best_tflops", false, 1e-3, 1e6, &fp8_best_tf, err));
    gpu->gemm_best_flops = best_tf * 1e12, gpu->gemm_fp8_best_flops = fp8_best_tf * 1e12;
    /* block-scaled formats: their rate over per-tensor fp8's, on a GPU with block-scaled tensor cores; NVFP4's at
     * most the fp4 peak's multiple of fp8's */
    TRY(px_json_num(&gc, gemm, "mxfp8_rate_over_fp8", false, 0.1, 2.0, &gpu->gemm_mxfp8_ratio, err));
    TRY(px_json_num(&gc, gemm, "nvfp4_rate_over_fp8", false, 0.1, 8.0, &gpu->gemm_nvfp4_ratio, err));
    double fp8_peak = gpu->peak_flops[PX_DTYPE_FP8];
    double fp4_over_fp8 = fp8_peak > 0 ? gpu->peak_flops[PX_DTYPE_FP4] / fp8_peak : 0;
    if ((gpu->gemm_mxfp8_ratio > 0 || gpu->gemm_nvfp4_ratio > 0) && !px_gpu_block_scaled(gpu))
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.gemm.%s': the GPU has no block-scaled GEMMs (no "
                        "gpu.peak_tflops.fp4)", file, gpu->gemm_mxfp8_ratio > 0 ? "mxfp8_rate_over_fp8"
                                                                                  : "nvfp4_rate_over_fp8");
    if (gpu->gemm_nvfp4_ratio > fp4_over_fp8)
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.gemm.nvfp4_rate_over_fp8': %g is above the fp4 peak's "
                        "multiple of the fp8 peak, %g", file, gpu->gemm_nvfp4_ratio, fp4_over_fp8);
    TRY(list_read(&gc, gemm, "table", "gpu.gemm.table", PX_GEMM_TABLE_MAX, gemm_entry, gpu, &gpu->gemm_table_len,
                  err));
    TRY(px_json_refuse_unknown(&gc, gemm, NULL, 0, err));
  }
  TRY(list_read(&c, g, "kernel_rates", "gpu.kernel_rates", PX_KERNEL_RATES_MAX, rate_entry, gpu,
                &gpu->kernel_rates_len, err));
  int own = PX_ATTN_KERNEL_OWN, flash2 = 0;
  TRY(px_json_enum(&c, g, "attention_kernel", false, px_attn_kernel_names, PX_ATTN_KERNEL_COUNT, &own, err));
  gpu->attention_kernel = (px_attn_kernel)own;
  TRY(list_read(&c, g, "attention", "gpu.attention", PX_ATTN_CURVES_MAX, attention_entry, gpu, &gpu->attention_len,
                err));
  TRY(list_read(&c, g, "attention_flash2", "gpu.attention_flash2", PX_ATTN_CURVES_MAX - gpu->attention_len,
                attention_flash2_entry, gpu, &flash2, err));
  if (flash2 && gpu->attention_kernel == PX_ATTN_KERNEL_FLASH2)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'gpu.attention_flash2': the GPU's own fused kernel is "
                      "FlashAttention-2 (gpu.attention_kernel): its curves are gpu.attention's", file);
  gpu->attention_len += flash2;
  TRY(cudnn_version_from_json(&c, g, &gpu->cudnn_version, err));
  return px_json_refuse_unknown(&c, g, NULL, 0, err);
}

/* The object a dotted path's last name lives in, and that name; NULL when
 * a name before it is not an object of root. */
static cJSON *path_parent(cJSON *root, const char *path, char *leaf, size_t cap) {
  cJSON *o = root;
  const char *p = path;
  for (const char *dot; (dot = strchr(p, '.')); p = dot + 1) {
    char name[64];
    size_t n = (size_t)(dot - p);
    if (n == 0 || n >= sizeof name) return NULL;
    memcpy(name, p, n);
    name[n] = '\0';
    o = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsObject(o)) return NULL;
  }
  snprintf(leaf, cap, "%s", p);
  return *leaf ? o : NULL;
}

/* "sources": {"gpu.hbm_gb_per_s": "citation", "gpu.peak_tflops": "..."}, each key a field (or object) of the file. */
static px_status sources_from_json(const cJSON *root, const char *file, px_cluster *cl, px_err *err) {
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "sources");
  cl->nsources = 0;
  if (!src || cJSON_IsNull(src)) return PX_OK;
  if (!cJSON_IsObject(src)) return px_err_set(err, PX_ERR_INPUT, "%s: field 'sources': expected an object", file);
  const cJSON *e;
  cJSON_ArrayForEach(e, src) {
    char leaf[64];
    const cJSON *parent = path_parent((cJSON *)root, e->string, leaf, sizeof leaf);
    if (!parent || !cJSON_GetObjectItemCaseSensitive(parent, leaf) || !strcmp(e->string, "sources"))
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'sources.%s' names no field of the file", file, e->string);
    if (!cJSON_IsString(e)) return px_err_set(err, PX_ERR_INPUT, "%s: field 'sources.%s': expected a string", file, e->string);
    if (cl->nsources == PX_SOURCES_MAX)
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'sources': more than %d entries", file, PX_SOURCES_MAX);
    if (strlen(e->string) >= sizeof cl->sources[0].field || strlen(e->valuestring) >= sizeof cl->sources[0].text)
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'sources.%s': the path or the citation is too long (%zu, %zu)",
                        file, e->string, sizeof cl->sources[0].field - 1, sizeof cl->sources[0].text - 1);
    px_source *s = &cl->sources[cl->nsources++];
    snprintf(s->field, sizeof s->field, "%s", e->string);
    snprintf(s->text, sizeof s->text, "%s", e->valuestring);
  }
  return PX_OK;
}

const char *px_cluster_source_of(const px_cluster *c, const char *field) {
  const char *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < c->nsources; i++) {
    const char *f = c->sources[i].field;
    size_t n = strlen(f);
    bool covers = !strncmp(field, f, n) && (field[n] == '\0' || field[n] == '.');
    if (covers && n > best_len) best = c->sources[i].text, best_len = n;
  }
  return best;
}

/* The index of the source that cites exactly field (one a field: px_cluster_add_source), or -1. */
static int source_at(const px_cluster *c, const char *field) {
  for (int i = 0; i < c->nsources; i++)
    if (!strcmp(c->sources[i].field, field)) return i;
  return -1;
}

px_status px_cluster_add_source(px_cluster *c, const char *field, const char *text, px_err *err) {
  int at = source_at(c, field);
  px_source *s = at >= 0 ? &c->sources[at] : NULL;
  if (!s) {
    if (c->nsources == PX_SOURCES_MAX || strlen(field) >= sizeof s->field)
      return px_err_set(err, PX_ERR_INPUT, "cluster %s: no room for the source of '%s'", c->name, field);
    s = &c->sources[c->nsources++];
    snprintf(s->field, sizeof s->field, "%s", field);
    s->text[0] = '\0';
  }
  size_t used = strlen(s->text);
  snprintf(s->text + used, sizeof s->text - used, "%s%s", used ? "; " : "", text);
  return PX_OK;
}

px_status px_cluster_set_source(px_cluster *c, const char *field, const char *text, px_err *err) {
  int at = source_at(c, field);
  if (at >= 0) c->sources[at].text[0] = '\0';
  return px_cluster_add_source(c, field, text, err);
}

/* link.comm_sms: at most 255 (it travels in a flow's tag) and fewer than the GPU's SMs. */
static px_status comm_sms_from_json(const px_json_ctx *c, const cJSON *link_obj, int64_t sm_count, int64_t *out,
                                    px_err *err) {
  px_status st;
  *out = 0;
  TRY(px_json_int(c, link_obj, "comm_sms", false, 0, 255, out, err));
  if (*out > 0 && *out >= sm_count)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%scomm_sms': %lld is not below gpu.sm_count %lld", c->file,
                      c->prefix, (long long)*out, (long long)sm_count);
  return PX_OK;
}

/* A link's measured collective curve: link_obj.busbw, [{coll, ranks, nodes, bytes, gb_per_s}]. */
static px_status busbw_from_json(const px_json_ctx *lc, const cJSON *link_obj, const char *where,
                                 px_busbw_point *pts, int *len, px_err *err) {
  const char *file = lc->file;
  px_status st;
  *len = 0;
  const cJSON *arr = px_json_get(lc, link_obj, "busbw");
  if (!arr) return PX_OK;
  if (!cJSON_IsArray(arr)) return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.busbw': expected an array", file, where);
  if (cJSON_GetArraySize(arr) > PX_BUSBW_MAX)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.busbw': more than %d points", file, where, PX_BUSBW_MAX);
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s.busbw[%d].", where, *len);
    px_json_keys keys = {.n = 0};
    px_json_ctx ec = {file, prefix, &keys};
    if (!cJSON_IsObject(e))
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.busbw[%d]': expected an object", file, where, *len);
    px_busbw_point *p = &pts[*len];
    int coll = 0;
    int64_t bytes = 0;
    double gbps = 0;
    TRY(px_json_enum(&ec, e, "coll", true, px_busbw_coll_names + 1, PX_COLL_COUNT - 1, &coll, err));
    p->coll = coll + 1;
    TRY(px_json_int(&ec, e, "ranks", true, 2, 1 << 24, &p->ranks, err));
    p->nodes = 1;
    TRY(px_json_int(&ec, e, "nodes", false, 1, 1 << 24, &p->nodes, err));
    TRY(px_json_int(&ec, e, "bytes", true, 1, INT64_MAX, &bytes, err));
    TRY(px_json_num(&ec, e, "gb_per_s", true, 1e-9, 1e9, &gbps, err));
    TRY(px_json_refuse_unknown(&ec, e, NULL, 0, err));
    p->bytes = (uint64_t)bytes;
    p->bytes_per_s = gbps * 1e9;
    (*len)++;
  }
  return PX_OK;
}

/* <link>.deepep (link "inter_node" or "intra_node"): [{ep, dispatch_gb_per_s, combine_gb_per_s}], EP sizes
 * ascending, into pts (at most PX_DEEPEP_MAX), their count in *len. */
static px_status deepep_from_json(const px_json_ctx *nc, const cJSON *obj, const char *link, px_deepep_point *pts,
                                  int *len, px_err *err) {
  const char *file = nc->file;
  px_status st;
  *len = 0;
  const cJSON *arr = px_json_get(nc, obj, "deepep");
  if (!arr) return PX_OK;
  if (!cJSON_IsArray(arr)) return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.deepep': expected an array", file, link);
  if (cJSON_GetArraySize(arr) > PX_DEEPEP_MAX)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.deepep': more than %d points", file, link, PX_DEEPEP_MAX);
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    int i = *len;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.deepep[%d].", link, i);
    px_json_keys keys = {.n = 0};
    px_json_ctx ec = {file, prefix, &keys};
    if (!cJSON_IsObject(e))
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.deepep[%d]': expected an object", file, link, i);
    px_deepep_point *p = &pts[i];
    double d = 0, c = 0;
    TRY(px_json_int(&ec, e, "ep", true, 2, 1 << 24, &p->ep, err));
    TRY(px_json_num(&ec, e, "dispatch_gb_per_s", true, 1e-6, 1e9, &d, err));
    TRY(px_json_num(&ec, e, "combine_gb_per_s", true, 1e-6, 1e9, &c, err));
    TRY(px_json_refuse_unknown(&ec, e, NULL, 0, err));
    if (i > 0 && p->ep <= pts[i - 1].ep)
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%s.deepep[%d].ep': %lld after %lld: EP sizes must ascend", file,
                        link, i, (long long)p->ep, (long long)pts[i - 1].ep);
    p->dispatch_bytes_per_s = d * 1e9, p->combine_bytes_per_s = c * 1e9;
    (*len)++;
  }
  return PX_OK;
}

static void deepep_to_json(cJSON *link_obj, const px_deepep_point *pts, int len) {
  cJSON *dep = len > 0 ? cJSON_AddArrayToObject(link_obj, "deepep") : NULL;
  for (int i = 0; dep && i < len; i++) {
    cJSON *e = cJSON_CreateObject();
    if (!e) break;
    px_json_add_num(e, "ep", (double)pts[i].ep);
    px_json_add_num(e, "dispatch_gb_per_s", pts[i].dispatch_bytes_per_s / 1e9);
    px_json_add_num(e, "combine_gb_per_s", pts[i].combine_bytes_per_s / 1e9);
    cJSON_AddItemToArray(dep, e);
  }
}

static void busbw_to_json(cJSON *link_obj, const px_busbw_point *pts, int len) {
  if (len <= 0) return;
  cJSON *arr = cJSON_AddArrayToObject(link_obj, "busbw");
  for (int i = 0; arr && i < len; i++) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return;
    cJSON_AddStringToObject(e, "coll", px_busbw_coll_names[pts[i].coll]);
    px_json_add_num(e, "ranks", (double)pts[i].ranks);
    px_json_add_num(e, "nodes", (double)pts[i].nodes);
    px_json_add_num(e, "bytes", (double)pts[i].bytes);
    px_json_add_num(e, "gb_per_s", pts[i].bytes_per_s / 1e9);
    cJSON_AddItemToArray(arr, e);
  }
}

/* power: {node_overhead_w, network_w_per_node, pue}, beside gpu.power_w (read before it). */
static px_status power_from_json(const px_json_ctx *rc, const cJSON *root, px_cluster *cl, px_err *err) {
  const char *file = rc->file;
  px_json_keys keys = {.n = 0};
  px_json_ctx pc = {file, "power.", &keys};
  px_status st;
  const cJSON *pw;
  cl->pue = PX_PUE_DEFAULT;
  TRY(px_json_obj(rc, root, "power", false, &pw, err));
  if (pw) {
    TRY(px_json_num(&pc, pw, "node_overhead_w", false, 0.0, 1e7, &cl->node_overhead_w, err));
    TRY(px_json_num(&pc, pw, "network_w_per_node", false, 0.0, 1e7, &cl->network_w_per_node, err));
    TRY(px_json_num(&pc, pw, "pue", false, 1.0, 10.0, &cl->pue, err));
    TRY(px_json_refuse_unknown(&pc, pw, NULL, 0, err));
  }
  if (!(cl->gpu.power_w > 0) && (cl->node_overhead_w > 0 || cl->network_w_per_node > 0 || cl->gpu.idle_power_w > 0))
    return px_err_set(err, PX_ERR_INPUT, "%s: power figures without field 'gpu.power_w' (the GPUs' draw, which the "
                      "others are added to)", file);
  if (cl->gpu.power_w > 0 && !cJSON_GetObjectItemCaseSensitive(pw, "pue") && cl->nsources < PX_SOURCES_MAX)
    TRY(px_cluster_add_source(cl, "power.pue",
                              "the default where the file gives none: Uptime Institute Global Data Center Survey 2024, "
                              "average annual PUE 1.56 at operators' largest data center (tests/data/power.csv)",
                              err));
  return PX_OK;
}

/* The host's framework figures, in host.op_us: each file key (host.KEY), its default and that default's source, and
 * the cluster's field; read and written from this one list. */
static const struct {
  const char *key, *field, *source;
  double def;
  size_t off;
} host_figures[] = {
    {"grouped_expert_ops", "host.grouped_expert_ops", PX_HOST_GROUPED_EXPERT_OPS_SOURCE,
     PX_HOST_GROUPED_EXPERT_OPS_DEFAULT, offsetof(px_cluster, host_grouped_expert_ops)},
    {"router_ops", "host.router_ops", PX_HOST_ROUTER_OPS_SOURCE, PX_HOST_ROUTER_OPS_DEFAULT,
     offsetof(px_cluster, host_router_ops)},
    {"a2a_preprocess_ops", "host.a2a_preprocess_ops", PX_HOST_A2A_PREPROCESS_OPS_SOURCE,
     PX_HOST_A2A_PREPROCESS_OPS_DEFAULT, offsetof(px_cluster, host_a2a_preprocess_ops)},
};
#define HOST_FIGURES (sizeof host_figures / sizeof *host_figures)

static double host_figure_of(const px_cluster *cl, size_t i) {
  return *(const double *)((const char *)cl + host_figures[i].off);
}

/* The host figures from the file's host object: each the file's, or its default, whose source is cited where the
 * file gives none and the host's op cost is known (cite). */
static px_status host_figures_from_json(const px_json_ctx *hc, const cJSON *host, bool cite, px_cluster *cl,
                                        px_err *err) {
  px_status st;
  for (size_t i = 0; i < HOST_FIGURES; i++) {
    double *v = (double *)((char *)cl + host_figures[i].off);
    *v = host_figures[i].def;
    TRY(px_json_num(hc, host, host_figures[i].key, false, 0.0, 1e6, v, err));
    if (cite && !cJSON_GetObjectItemCaseSensitive(host, host_figures[i].key) && cl->nsources < PX_SOURCES_MAX)
      TRY(px_cluster_add_source(cl, host_figures[i].field, host_figures[i].source, err));
  }
  return PX_OK;
}

px_status px_cluster_from_json(const cJSON *root, const char *file, px_cluster *cl, px_err *err) {
  memset(cl, 0, sizeof *cl);
  if (!cJSON_IsObject(root)) return px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object at the top level", file);
  px_json_keys keys = {.n = 0}, intra_keys = {.n = 0}, inter_keys = {.n = 0}, host_keys = {.n = 0};
  px_json_ctx c = {file, "", &keys};
  px_status st;
  px_path_stem(file, cl->name, sizeof cl->name);
  px_json_get(&c, root, "sources"); /* read by sources_from_json */
  const cJSON *ov = px_json_get(&c, root, "overrides"), *o;
  if (ov && (!cJSON_IsArray(ov) || cJSON_GetArraySize(ov) > PX_CLUSTER_OVERRIDES_MAX))
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'overrides': expected an array of at most %d strings", file,
                      PX_CLUSTER_OVERRIDES_MAX);
  cJSON_ArrayForEach(o, ov) {
    if (!cJSON_IsString(o) || strlen(o->valuestring) >= sizeof cl->overrides[0])
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'overrides[%d]': expected a string of at most %zu characters",
                        file, cl->noverrides, sizeof cl->overrides[0] - 1);
    snprintf(cl->overrides[cl->noverrides++], sizeof cl->overrides[0], "%s", o->valuestring);
  }
  TRY(px_json_str(&c, root, "name", false, cl->name, sizeof cl->name, err));
  TRY(px_json_str(&c, root, "source", false, cl->source, sizeof cl->source, err));
  TRY(sources_from_json(root, file, cl, err));
  const cJSON *g;
  TRY(px_json_obj(&c, root, "gpu", true, &g, err));
  TRY(gpu_from_json(g, file, &cl->gpu, err));
  if (!cJSON_GetObjectItemCaseSensitive(g, "jitter") && cl->nsources < PX_SOURCES_MAX)
    TRY(px_cluster_add_source(cl, "gpu.jitter",
                              "the default where the file gives none: Sinha et al., SC'22 (arXiv:2208.11035), 8% average "
                              "performance variation across a cluster's GPUs of one SKU, read as a box plot's "
                              "whisker span, 5.40 std devs of a normal: 0.08 / 5.40 (tests/data/gpu_variability.md)",
                              err));
  TRY(px_json_int(&c, root, "gpus_per_node", true, 1, 4096, &cl->gpus_per_node, err));
  cl->nodes = 1;
  TRY(px_json_int(&c, root, "nodes", false, 1, 1 << 24, &cl->nodes, err));
  cl->gpus = cl->nodes * cl->gpus_per_node;

  const cJSON *intra;
  TRY(px_json_obj(&c, root, "intra_node", true, &intra, err));
  px_json_ctx ic = {file, "intra_node.", &intra_keys};
  double gbps = 0, us = 0;
  TRY(px_json_num(&ic, intra, "gb_per_s", true, 1e-6, 1e9, &gbps, err));
  TRY(px_json_num(&ic, intra, "latency_us", true, 0.0, 1e6, &us, err));
  cl->intra_bytes_per_s = gbps * 1e9;
  cl->intra_latency_s = us * 1e-6;
  cl->intra_efficiency = 0.8;
  TRY(px_json_num(&ic, intra, "efficiency", false, 0.01, 1.0, &cl->intra_efficiency, err));
  TRY(comm_sms_from_json(&ic, intra, cl->gpu.sm_count, &cl->intra_comm_sms, err));
  double nvls_us = 0;
  TRY(px_json_num(&ic, intra, "nvls_efficiency", false, 0.0, 1.0, &cl->intra_nvls_efficiency, err));
  TRY(px_json_num(&ic, intra, "nvls_latency_us", false, 0.0, 1e6, &nvls_us, err));
  cl->intra_nvls_latency_s = nvls_us * 1e-6;
  cl->nvlink_domain = 0; /* the node */
  TRY(px_json_int(&ic, intra, "nvlink_domain", false, 1, 1 << 20, &cl->nvlink_domain, err));
  if (cl->nvlink_domain % cl->gpus_per_node)
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: field 'intra_node.nvlink_domain': %lld is not a whole number of nodes of %lld GPUs", file,
                      (long long)cl->nvlink_domain, (long long)cl->gpus_per_node);
  TRY(busbw_from_json(&ic, intra, "intra_node", cl->busbw[PX_LINK_INTRA], &cl->busbw_len[PX_LINK_INTRA], err));
  TRY(deepep_from_json(&ic, intra, "intra_node", cl->intra_deepep, &cl->intra_deepep_len, err));
  TRY(px_json_refuse_unknown(&ic, intra, NULL, 0, err));

  const cJSON *inter;
  TRY(px_json_obj(&c, root, "inter_node", true, &inter, err));
  px_json_ctx nc = {file, "inter_node.", &inter_keys};
  double gbit = 0;
  TRY(px_json_int(&nc, inter, "nics_per_node", true, 1, 1024, &cl->nics_per_node, err));
  TRY(px_json_num(&nc, inter, "nic_gbit_per_s", true, 1e-6, 1e9, &gbit, err));
  TRY(px_json_num(&nc, inter, "latency_us", true, 0.0, 1e6, &us, err));
  cl->nic_bytes_per_s = gbit * 1e9 / 8.0;
  cl->inter_latency_s = us * 1e-6;
  cl->inter_efficiency = 0.8;
  TRY(px_json_num(&nc, inter, "efficiency", false, 0.01, 1.0, &cl->inter_efficiency, err));
  TRY(comm_sms_from_json(&nc, inter, cl->gpu.sm_count, &cl->inter_comm_sms, err));
  TRY(busbw_from_json(&nc, inter, "inter_node", cl->busbw[PX_LINK_INTER], &cl->busbw_len[PX_LINK_INTER], err));
  TRY(deepep_from_json(&nc, inter, "inter_node", cl->deepep, &cl->deepep_len, err));
  int kind = PX_NET_RAIL_FAT_TREE;
  TRY(px_json_enum(&nc, inter, "topology", false, px_net_kind_names, PX_NET_COUNT, &kind, err));
  cl->net_kind = (px_net_kind)kind;
  cl->oversubscription = 1.0;
  TRY(px_json_num(&nc, inter, "oversubscription", false, 1.0, 1024.0, &cl->oversubscription, err));
  cl->nodes_per_leaf = 32;
  TRY(px_json_int(&nc, inter, "nodes_per_leaf", false, 1, 1 << 20, &cl->nodes_per_leaf, err));
  TRY(px_json_refuse_unknown(&nc, inter, NULL, 0, err));

  cl->host_pcie_gpus_per_uplink = 1;
  const cJSON *host;
  TRY(px_json_obj(&c, root, "host", false, &host, err));
  if (host) {
    px_json_ctx hc = {file, "host.", &host_keys};
    double gib = 0, sgbps = 0;
    TRY(px_json_num(&hc, host, "memory_gib", false, 0.0, 1e9, &gib, err));
    TRY(px_json_num(&hc, host, "storage_gb_per_s", false, 0.0, 1e9, &sgbps, err));
    cl->host_memory_bytes = (uint64_t)(gib * GIB);
    cl->storage_bytes_per_s = sgbps * 1e9;
    double pcie = 0, adam = 0, nvme = 0, nvme_tb = 0, op_us = 0, launch_us = 0, graph_us = 0;
    TRY(px_json_num(&hc, host, "pcie_gb_per_s", false, 0.0, 1e6, &pcie, err));
    TRY(px_json_int(&hc, host, "pcie_gpus_per_uplink", false, 1, 1024, &cl->host_pcie_gpus_per_uplink, err));
    TRY(px_json_num(&hc, host, "cpu_adam_gparams_per_s", false, 0.0, 1e6, &adam, err));
    TRY(px_json_num(&hc, host, "nvme_gb_per_s", false, 0.0, 1e6, &nvme, err));
    TRY(px_json_num(&hc, host, "nvme_tb", false, 0.0, 1e6, &nvme_tb, err));
    TRY(px_json_num(&hc, host, "op_us", false, 0.0, 1e6, &op_us, err));
    TRY(px_json_num(&hc, host, "launch_us", false, 0.0, 1e6, &launch_us, err));
    TRY(px_json_num(&hc, host, "graph_launch_us", false, 0.0, 1e6, &graph_us, err));
    TRY(host_figures_from_json(&hc, host, op_us > 0, cl, err));
    cl->host_op_s = op_us * 1e-6;
    cl->host_launch_s = launch_us * 1e-6;
    cl->host_graph_s = graph_us * 1e-6;
    cl->host_pcie_bytes_per_s = pcie * 1e9;
    cl->host_cpu_adam_params_per_s = adam * 1e9;
    cl->host_nvme_bytes_per_s = nvme * 1e9;
    cl->host_nvme_bytes = (uint64_t)(nvme_tb * 1e12);
    TRY(px_json_refuse_unknown(&hc, host, NULL, 0, err));
  }
  TRY(power_from_json(&c, root, cl, err));
  return px_json_refuse_unknown(&c, root, NULL, 0, err);
}

px_status px_cluster_load_file(const char *path, px_cluster *c, px_err *err) {
  cJSON *root = NULL;
  px_status st = px_json_load_max(path, PX_CLUSTER_FILE_MAX_BYTES, "a cluster file", &root, err);
  if (st) return st;
  st = px_cluster_from_json(root, path, c, err);
  cJSON_Delete(root);
  return st;
}

px_status px_cluster_load(const char *name_or_path, px_cluster *c, px_err *err) {
  char path[4096];
  px_status st = px_preset_path("topologies", name_or_path, path, sizeof path, err);
  if (st) return st;
  if (!strchr(name_or_path, '/') && !px_file_exists(path))
    return px_err_set(err, PX_ERR_INPUT, "cluster '%s': no such preset or file (see `parallax topologies`)", name_or_path);
  return px_cluster_load_file(path, c, err);
}

cJSON *px_cluster_to_json(const px_cluster *c) {
  cJSON *o = cJSON_CreateObject(), *g = cJSON_CreateObject(), *peak = cJSON_CreateObject();
  cJSON *gemm = cJSON_CreateObject(), *intra = cJSON_CreateObject(), *inter = cJSON_CreateObject();
  cJSON *host = cJSON_CreateObject();
  if (!o || !g || !peak || !gemm || !intra || !inter || !host) {
    cJSON_Delete(o), cJSON_Delete(g), cJSON_Delete(peak), cJSON_Delete(gemm);
    cJSON_Delete(intra), cJSON_Delete(inter), cJSON_Delete(host);
    return NULL;
  }
  const px_gpu *gpu = &c->gpu;
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "source", c->source);
  if (c->noverrides) {
    cJSON *ov = cJSON_AddArrayToObject(o, "overrides");
    for (int i = 0; ov && i < c->noverrides; i++) cJSON_AddItemToArray(ov, cJSON_CreateString(c->overrides[i]));
  }
  if (c->nsources) {
    cJSON *src = cJSON_AddObjectToObject(o, "sources");
    for (int i = 0; src && i < c->nsources; i++) cJSON_AddStringToObject(src, c->sources[i].field, c->sources[i].text);
  }
  cJSON_AddItemToObject(o, "gpu", g);
  cJSON_AddStringToObject(g, "name", gpu->name);
  cJSON_AddItemToObject(g, "peak_tflops", peak);
  for (int t = 0; t < PX_DTYPE_COUNT; t++)
    if (gpu->peak_flops[t] > 0) px_json_add_num(peak, px_dtype_names[t], gpu->peak_flops[t] / 1e12);
  px_json_add_num(g, "hbm_gib", (double)gpu->hbm_bytes / GIB);
  px_json_add_num(g, "reserved_gib", (double)gpu->reserved_bytes / GIB);
  px_json_add_num(g, "hbm_gb_per_s", gpu->hbm_bytes_per_s / 1e9);
  px_json_add_num(g, "memory_efficiency", gpu->memory_efficiency);
  px_json_add_num(g, "sm_count", (double)gpu->sm_count);
  px_json_add_num(g, "kernel_overhead_us", gpu->kernel_overhead_s * 1e6);
  px_json_add_num(g, "jitter", gpu->jitter);
  px_json_add_num(g, "sustained_share", gpu->sustained_share);
  if (gpu->attention_kernel != PX_ATTN_KERNEL_OWN)
    cJSON_AddStringToObject(g, "attention_kernel", px_attn_kernel_names[gpu->attention_kernel]);
  if (gpu->cudnn_version > 0) px_json_add_num(g, "cudnn_version", (double)gpu->cudnn_version);
  if (gpu->power_w > 0) px_json_add_num(g, "power_w", gpu->power_w); /* none: no power figures (px_power_known) */
  if (gpu->idle_power_w > 0) px_json_add_num(g, "idle_power_w", gpu->idle_power_w);
  cJSON_AddItemToObject(g, "gemm", gemm);
  px_json_add_num(gemm, "max_efficiency", gpu->gemm_max_efficiency);
  px_json_add_num(gemm, "tile_m", (double)gpu->gemm_tile_m);
  px_json_add_num(gemm, "tile_n", (double)gpu->gemm_tile_n);
  px_json_add_num(gemm, "k_half", gpu->gemm_k_half);
  if (gpu->gemm_fp8_k_half > 0) px_json_add_num(gemm, "fp8_k_half", gpu->gemm_fp8_k_half);
  if (gpu->gemm_fp8_max_efficiency > 0) px_json_add_num(gemm, "fp8_max_efficiency", gpu->gemm_fp8_max_efficiency);
  if (gpu->gemm_fp8_block_max_efficiency > 0)
    px_json_add_num(gemm, "fp8_block_max_efficiency", gpu->gemm_fp8_block_max_efficiency);
  if (gpu->gemm_fp8_split_share > 0) px_json_add_num(gemm, "fp8_split_accumulation_share", gpu->gemm_fp8_split_share);
  if (gpu->gemm_best_flops > 0) px_json_add_num(gemm, "best_tflops", gpu->gemm_best_flops / 1e12);
  if (gpu->gemm_fp8_best_flops > 0) px_json_add_num(gemm, "fp8_best_tflops", gpu->gemm_fp8_best_flops / 1e12);
  if (gpu->gemm_mxfp8_ratio > 0) px_json_add_num(gemm, "mxfp8_rate_over_fp8", gpu->gemm_mxfp8_ratio);
  if (gpu->gemm_nvfp4_ratio > 0) px_json_add_num(gemm, "nvfp4_rate_over_fp8", gpu->gemm_nvfp4_ratio);
  if (gpu->gemm_table_len) {
    cJSON *t = cJSON_AddArrayToObject(gemm, "table");
    for (int i = 0; t && i < gpu->gemm_table_len; i++) {
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      px_json_add_num(e, "m", (double)gpu->gemm_table[i].m);
      px_json_add_num(e, "n", (double)gpu->gemm_table[i].n);
      px_json_add_num(e, "k", (double)gpu->gemm_table[i].k);
      px_json_add_num(e, "efficiency", gpu->gemm_table[i].efficiency);
      if (gpu->gemm_table[i].dtype >= 0) cJSON_AddStringToObject(e, "dtype", px_dtype_names[gpu->gemm_table[i].dtype]);
      cJSON_AddItemToArray(t, e);
    }
  }
  if (gpu->kernel_rates_len) {
    cJSON *t = cJSON_AddArrayToObject(g, "kernel_rates");
    for (int i = 0; t && i < gpu->kernel_rates_len; i++) {
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      cJSON_AddStringToObject(e, "kind", gpu->kernel_rates[i].kind);
      if (gpu->kernel_rates[i].bytes_per_s > 0) px_json_add_num(e, "gb_per_s", gpu->kernel_rates[i].bytes_per_s / 1e9);
      if (gpu->kernel_rates[i].flops_per_s > 0) px_json_add_num(e, "gflop_per_s", gpu->kernel_rates[i].flops_per_s / 1e9);
      px_json_add_num(e, "overhead_us", gpu->kernel_rates[i].overhead_s * 1e6);
      cJSON_AddItemToArray(t, e);
    }
  }
  for (int k = 0; k < PX_ATTN_KERNEL_COUNT; k++) { /* the GPU's own kernel's curves, then FlashAttention-2's */
    cJSON *t = NULL;
    for (int i = 0; i < gpu->attention_len; i++) {
      const px_attn_curve *a = &gpu->attention[i];
      if (a->kernel != (px_attn_kernel)k) continue;
      if (!t && !(t = cJSON_AddArrayToObject(g, k == PX_ATTN_KERNEL_OWN ? "attention" : "attention_flash2"))) break;
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      if (a->fmt != PX_ATTN_BF16) cJSON_AddStringToObject(e, "dtype", px_attn_format_names[a->fmt]);
      cJSON_AddStringToObject(e, "pass", a->bwd ? "bwd" : "fwd");
      px_json_add_num(e, "head_dim", (double)a->head_dim);
      cJSON_AddBoolToObject(e, "causal", a->causal);
      if (a->window > 0) px_json_add_num(e, "window", (double)a->window);
      if (a->cudnn_version > 0) px_json_add_num(e, "cudnn_version", (double)a->cudnn_version);
      cJSON *sq = cJSON_AddArrayToObject(e, "seq"), *tf = cJSON_AddArrayToObject(e, "tflops");
      for (int j = 0; sq && tf && j < a->n; j++) {
        cJSON_AddItemToArray(sq, cJSON_CreateNumber((double)a->seq[j]));
        cJSON_AddItemToArray(tf, cJSON_CreateNumber(a->tflops[j]));
      }
      cJSON_AddItemToArray(t, e);
    }
  }
  px_json_add_num(o, "gpus_per_node", (double)c->gpus_per_node);
  px_json_add_num(o, "nodes", (double)c->nodes);
  cJSON_AddItemToObject(o, "intra_node", intra);
  px_json_add_num(intra, "gb_per_s", c->intra_bytes_per_s / 1e9);
  px_json_add_num(intra, "latency_us", c->intra_latency_s * 1e6);
  px_json_add_num(intra, "efficiency", c->intra_efficiency);
  px_json_add_num(intra, "comm_sms", (double)c->intra_comm_sms);
  if (c->intra_nvls_efficiency > 0) {
    px_json_add_num(intra, "nvls_efficiency", c->intra_nvls_efficiency);
    px_json_add_num(intra, "nvls_latency_us", c->intra_nvls_latency_s * 1e6);
  }
  if (c->nvlink_domain) px_json_add_num(intra, "nvlink_domain", (double)c->nvlink_domain);
  busbw_to_json(intra, c->busbw[PX_LINK_INTRA], c->busbw_len[PX_LINK_INTRA]);
  deepep_to_json(intra, c->intra_deepep, c->intra_deepep_len);
  cJSON_AddItemToObject(o, "inter_node", inter);
  px_json_add_num(inter, "nics_per_node", (double)c->nics_per_node);
  px_json_add_num(inter, "nic_gbit_per_s", c->nic_bytes_per_s * 8.0 / 1e9);
  px_json_add_num(inter, "latency_us", c->inter_latency_s * 1e6);
  px_json_add_num(inter, "efficiency", c->inter_efficiency);
  px_json_add_num(inter, "comm_sms", (double)c->inter_comm_sms);
  cJSON_AddStringToObject(inter, "topology", px_net_kind_names[c->net_kind]);
  px_json_add_num(inter, "oversubscription", c->oversubscription);
  px_json_add_num(inter, "nodes_per_leaf", (double)c->nodes_per_leaf);
  busbw_to_json(inter, c->busbw[PX_LINK_INTER], c->busbw_len[PX_LINK_INTER]);
  deepep_to_json(inter, c->deepep, c->deepep_len);
  cJSON_AddItemToObject(o, "host", host);
  px_json_add_num(host, "memory_gib", (double)c->host_memory_bytes / GIB);
  px_json_add_num(host, "storage_gb_per_s", c->storage_bytes_per_s / 1e9);
  if (c->host_pcie_bytes_per_s > 0) {
    px_json_add_num(host, "pcie_gb_per_s", c->host_pcie_bytes_per_s / 1e9);
    px_json_add_num(host, "pcie_gpus_per_uplink", (double)c->host_pcie_gpus_per_uplink);
  }
  if (c->host_cpu_adam_params_per_s > 0) px_json_add_num(host, "cpu_adam_gparams_per_s", c->host_cpu_adam_params_per_s / 1e9);
  if (c->host_nvme_bytes_per_s > 0) px_json_add_num(host, "nvme_gb_per_s", c->host_nvme_bytes_per_s / 1e9);
  if (c->host_nvme_bytes > 0) px_json_add_num(host, "nvme_tb", (double)c->host_nvme_bytes / 1e12);
  /* the host's issue costs: 0 (free launches) written where a source cites the field, so that a --set of one to
   * 0 survives the reload of the next --set */
  if (c->host_op_s > 0 || source_at(c, "host.op_us") >= 0) px_json_add_num(host, "op_us", c->host_op_s * 1e6);
  if (c->host_launch_s > 0 || source_at(c, "host.launch_us") >= 0) px_json_add_num(host, "launch_us", c->host_launch_s * 1e6);
  if (c->host_graph_s > 0 || source_at(c, "host.graph_launch_us") >= 0)
    px_json_add_num(host, "graph_launch_us", c->host_graph_s * 1e6);
  for (size_t i = 0; i < HOST_FIGURES; i++)
    if (c->host_op_s > 0 || source_at(c, host_figures[i].field) >= 0)
      px_json_add_num(host, host_figures[i].key, host_figure_of(c, i));
  cJSON *pw = cJSON_AddObjectToObject(o, "power"); /* always: --set power.FIELD reaches it */
  if (pw) {
    px_json_add_num(pw, "node_overhead_w", c->node_overhead_w);
    px_json_add_num(pw, "network_w_per_node", c->network_w_per_node);
    px_json_add_num(pw, "pue", c->pue);
  }
  return o;
}

/* "a, b, c": the keys of an object, for messages. */
static void keys_of(const cJSON *o, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  const cJSON *e;
  cJSON_ArrayForEach(e, o) if (e->string && used + strlen(e->string) + 3 < cap) used +=
      (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", e->string);
}

/* Whether the loader reads the number at path (leaf in parent): set to 1 in a copy of root, it is 1 again in
 * the cluster written back. */
static bool reads_one(const cJSON *root, const char *path, const char *leaf, const char *assignment) {
  cJSON *probe = cJSON_Duplicate(root, true), *after = NULL;
  char l[64];
  cJSON *parent = probe ? path_parent(probe, path, l, sizeof l) : NULL;
  bool ok = false;
  px_cluster c;
  px_err err = {0};
  if (parent && cJSON_ReplaceItemInObjectCaseSensitive(parent, leaf, cJSON_CreateNumber(1)) &&
      !px_cluster_from_json(probe, assignment, &c, &err) && (after = px_cluster_to_json(&c))) {
    cJSON *np = path_parent(after, path, l, sizeof l);
    const cJSON *got = np ? cJSON_GetObjectItemCaseSensitive(np, leaf) : NULL;
    ok = cJSON_IsNumber(got) && got->valuedouble == 1;
  }
  cJSON_Delete(probe);
  cJSON_Delete(after);
  return ok;
}

px_status px_cluster_set_field(px_cluster *c, const char *assignment, px_err *err) {
  const char *eq = strchr(assignment, '=');
  char path[128], leaf[64], keys[512];
  if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof path)
    return px_err_set(err, PX_ERR_INPUT, "'%s': expected FIELD=VALUE, e.g. gpu.hbm_gib=141", assignment);
  if (c->noverrides == PX_CLUSTER_OVERRIDES_MAX || strlen(assignment) >= sizeof c->overrides[0])
    return px_err_set(err, PX_ERR_INPUT, "'%.64s': at most %d fields of at most %zu characters may be set", assignment,
                      PX_CLUSTER_OVERRIDES_MAX, sizeof c->overrides[0] - 1);
  memcpy(path, assignment, (size_t)(eq - assignment));
  path[eq - assignment] = '\0';
  const char *text = eq + 1;
  cJSON *root = px_cluster_to_json(c), *after = NULL;
  if (!root) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_status st = PX_OK;
  cJSON *parent = path_parent(root, path, leaf, sizeof leaf);
  if (!parent) {
    keys_of(root, keys, sizeof keys);
    st = px_err_set(err, PX_ERR_INPUT, "%s: the cluster has no object on the way to '%s' (top-level fields: %s)",
                    assignment, path, keys);
    goto done;
  }
  /* the value: a number when it reads as a decimal one, true/false, else a string (so "0x10", "inf" or
   * " 5" meet the field's own type check) */
  bool is_num = *text && px_scan_decimal(text) == strlen(text);
  double num = is_num ? strtod(text, NULL) : 0;
  cJSON *v = is_num ? cJSON_CreateNumber(num)
             : !strcmp(text, "true") || !strcmp(text, "false") ? cJSON_CreateBool(!strcmp(text, "true"))
                                                               : cJSON_CreateString(text);
  if (!v || (cJSON_GetObjectItemCaseSensitive(parent, leaf) ? !cJSON_ReplaceItemInObjectCaseSensitive(parent, leaf, v)
                                                             : !cJSON_AddItemToObject(parent, leaf, v))) {
    cJSON_Delete(v);
    st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    goto done;
  }
  px_cluster next;
  if ((st = px_cluster_from_json(root, assignment, &next, err))) goto done;
  /* a field the loader does not read would be dropped silently: refuse it */
  after = px_cluster_to_json(&next);
  cJSON *np = after ? path_parent(after, path, leaf, sizeof leaf) : NULL;
  const cJSON *got = np ? cJSON_GetObjectItemCaseSensitive(np, leaf) : NULL;
  bool same = got && (cJSON_IsNumber(got) ? cJSON_IsNumber(v) && fabs(got->valuedouble - num) <= 1e-6 * fabs(num)
                      : cJSON_IsString(got) ? cJSON_IsString(v) && !strcmp(got->valuestring, text)
                                            : cJSON_IsBool(got) && cJSON_IsBool(v) && cJSON_IsTrue(got) == cJSON_IsTrue(v));
  if (!got && is_num && num == 0) /* an optional figure the file leaves out when 0 (none): read if 1 is */
    same = reads_one(root, path, leaf, assignment);
  if (!same) {
    keys_of(np ? np : after, keys, sizeof keys);
    st = px_err_set(err, PX_ERR_INPUT, "%s: '%s' is not a cluster field the planner reads, or not that kind of "
                    "value (fields of its object: %s)", assignment, path, keys);
    goto done;
  }
  if (strcmp(path, "nodes")) { /* the size stays (in GPUs); --gpus / --nodes apply after */
    next.gpus = c->gpus;
    next.nodes = (c->gpus + next.gpus_per_node - 1) / next.gpus_per_node;
  }
  snprintf(next.overrides[next.noverrides++], sizeof next.overrides[0], "%s", assignment);
  *c = next;
done:
  cJSON_Delete(root);
  cJSON_Delete(after);
  return st;
}

const char *px_cluster_overrides_text(const px_cluster *c, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < c->noverrides && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", c->overrides[i]);
  return buf;
}

px_status px_cluster_set_size(px_cluster *c, int64_t gpus, int64_t nodes, px_err *err) {
  if (gpus < 0 || nodes < 0) return px_err_set(err, PX_ERR_INPUT, "`gpus` and `nodes` must be positive");
  if (gpus > ((int64_t)1 << 24) || nodes > ((int64_t)1 << 24))
    return px_err_set(err, PX_ERR_INPUT, "`gpus`/`nodes`: at most %d", 1 << 24);
  if (nodes > 0) {
    if (gpus > 0 && gpus != nodes * c->gpus_per_node)
      return px_err_set(err, PX_ERR_INPUT, "`gpus` %lld does not equal `nodes` %lld x %lld GPUs per node",
                        (long long)gpus, (long long)nodes, (long long)c->gpus_per_node);
    c->nodes = nodes;
    c->gpus = nodes * c->gpus_per_node;
    return PX_OK;
  }
  if (gpus > 0) {
    if (gpus > c->gpus_per_node && gpus % c->gpus_per_node != 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "`gpus` %lld does not fill whole nodes of %lld GPUs (%s); use a multiple of %lld",
                        (long long)gpus, (long long)c->gpus_per_node, c->name, (long long)c->gpus_per_node);
    c->gpus = gpus;
    c->nodes = (gpus + c->gpus_per_node - 1) / c->gpus_per_node;
  }
  return PX_OK;
}

int64_t px_cluster_nvlink_domain(const px_cluster *c) {
  return c->nvlink_domain > 0 ? c->nvlink_domain : c->gpus_per_node;
}

int64_t px_cluster_node_size(const px_cluster *c) {
  return c->gpus < c->gpus_per_node ? c->gpus : c->gpus_per_node;
}

/* The dtype whose measured GEMM figures (max_efficiency, the sweep's best) a dtype's GEMMs take: fp4, which no
 * sweep measured, takes fp8's pair (one fit: the max over the model's factors at the sweep's best shape, valid
 * under that best); every other its own. */
static px_dtype gemm_figures_of(px_dtype dt) { return dt == PX_DTYPE_FP4 ? PX_DTYPE_FP8 : dt; }

double px_gpu_gemm_max(const px_gpu *g, px_dtype dt, bool fp8_block) {
  bool fp4 = dt == PX_DTYPE_FP4; /* per-tensor fp8's: no blockwise fp4 */
  double f8 = fp8_block && !fp4 && g->gemm_fp8_block_max_efficiency > 0 ? g->gemm_fp8_block_max_efficiency
                                                                         : g->gemm_fp8_max_efficiency;
  return gemm_figures_of(dt) == PX_DTYPE_FP8 && f8 > 0 ? f8 : g->gemm_max_efficiency;
}

double px_gpu_gemm_k_half(const px_gpu *g, px_dtype dt, bool fp8_block) {
  bool fp8 = gemm_figures_of(dt) == PX_DTYPE_FP8 && !(fp8_block && dt != PX_DTYPE_FP4);
  return fp8 && g->gemm_fp8_k_half > 0 ? g->gemm_fp8_k_half : g->gemm_k_half;
}

int64_t px_gpu_gemm_tiles(const px_gpu *g, int64_t m, int64_t n) {
  int64_t tm = g->gemm_tile_m > 0 ? g->gemm_tile_m : 1, tn = g->gemm_tile_n > 0 ? g->gemm_tile_n : 1;
  return ((m + tm - 1) / tm) * ((n + tn - 1) / tn);
}

double px_gpu_block_scaled_ratio(const px_gpu *g, bool nvfp4) {
  return nvfp4 ? g->gemm_nvfp4_ratio : g->gemm_mxfp8_ratio;
}

double px_gpu_fp8_split_share(const px_gpu *g) { return g->gemm_fp8_split_share > 0 ? g->gemm_fp8_split_share : 1.0; }

double px_gpu_gemm_ceiling(const px_gpu *g, px_dtype dt) {
  dt = gemm_figures_of(dt); /* fp4: fp8's best share of its peak */
  bool half = dt == PX_DTYPE_BF16 || dt == PX_DTYPE_FP16;
  double best = dt == PX_DTYPE_FP8 ? g->gemm_fp8_best_flops : half ? g->gemm_best_flops : 0;
  return best > 0 && g->peak_flops[dt] > 0 ? fmin(1.0, best / g->peak_flops[dt]) : 1.0;
}

uint64_t px_gpu_usable_bytes(const px_gpu *g) {
  return g->hbm_bytes > g->reserved_bytes ? g->hbm_bytes - g->reserved_bytes : 0;
}

double px_cluster_host_link_bytes_per_s(const px_cluster *c) {
  return c->host_pcie_bytes_per_s / (double)(c->host_pcie_gpus_per_uplink > 0 ? c->host_pcie_gpus_per_uplink : 1);
}
