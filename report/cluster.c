/* Clusters: the show text, the preset list, a calibration's summary. */
#include "report/cluster.h"

#include <stdint.h>
#include <string.h>

#include "core/fmt.h"
#include "sim/power.h"

void px_report_cluster_text(const px_cluster *c, FILE *out) {
  char a[32];
  const px_gpu *g = &c->gpu;
  fprintf(out, "cluster %s: %lld GPUs (%lld node%s x %lld)\n", c->name, (long long)c->gpus, (long long)c->nodes,
          c->nodes == 1 ? "" : "s", (long long)c->gpus_per_node);
  if (c->source[0]) fprintf(out, "  source: %s\n", c->source);
  fprintf(out, "  gpu %s: %s HBM at %.0f GB/s, %lld SMs, peak TFLOP/s:", g->name,
          px_fmt_bytes((double)g->hbm_bytes, a, sizeof a), g->hbm_bytes_per_s / 1e9, (long long)g->sm_count);
  for (int t = 0; t < PX_DTYPE_COUNT; t++)
    if (g->peak_flops[t] > 0) fprintf(out, " %s %.1f", px_dtype_names[t], g->peak_flops[t] / 1e12);
  fprintf(out, "\n  gemm efficiency: max %.2f, tiles %lldx%lld, k_half %.0f%s; sustained %.2f of it (and of attention)\n",
          g->gemm_max_efficiency, (long long)g->gemm_tile_m, (long long)g->gemm_tile_n, g->gemm_k_half,
          g->gemm_table_len ? " (measured table given)" : "", g->sustained_share);
  if (g->peak_flops[PX_DTYPE_FP8] > 0)
    fprintf(out, "  fp8 gemm efficiency: max %.2f per-tensor scales (k_half %.0f), %.2f blockwise\n",
            px_gpu_gemm_max(g, PX_DTYPE_FP8, false), px_gpu_gemm_k_half(g, PX_DTYPE_FP8, false),
            px_gpu_gemm_max(g, PX_DTYPE_FP8, true));
  if (px_gpu_block_scaled(g)) { /* the block-scaled GEMMs' rate over per-tensor fp8's, measured or the rule */
    double mx = px_gpu_block_scaled_ratio(g, false), nv = px_gpu_block_scaled_ratio(g, true);
    char mxs[48], nvs[64];
    snprintf(mxs, sizeof mxs, mx > 0 ? "%.3f of fp8's rate" : "fp8's rate", mx);
    snprintf(nvs, sizeof nvs, nv > 0 ? "%.2fx fp8's rate" : "the fp4 peak at fp8's efficiency", nv);
    fprintf(out, "  block-scaled gemms: mxfp8 at %s, nvfp4 at %s\n", mxs, nvs);
  }
  if (g->attention_len) { /* each curve's range, e.g. fwd hd128 causal 292-616, fp8 fwd hd64 causal window 128 165-179 */
    char runs[64] = "", r[24];
    if (g->cudnn_version > 0)
      snprintf(runs, sizeof runs, "; the cluster runs cuDNN %s", px_fmt_release(g->cudnn_version, r, sizeof r));
    fprintf(out, "  attention (measured TFLOP/s, shortest to longest sequence%s%s):",
            g->attention_kernel != PX_ATTN_KERNEL_OWN ? "; the GPU's own kernel is FlashAttention-2's" : "", runs);
    for (int i = 0; i < g->attention_len; i++) {
      const px_attn_curve *cv = &g->attention[i];
      char win[32] = "", fmt[16] = "", rel[48] = "";
      if (cv->window > 0) snprintf(win, sizeof win, " window %lld", (long long)cv->window);
      if (cv->fmt != PX_ATTN_BF16) snprintf(fmt, sizeof fmt, " %s", px_attn_format_names[cv->fmt]);
      if (cv->kernel != PX_ATTN_KERNEL_OWN) snprintf(fmt, sizeof fmt, " %s", px_attn_kernel_names[cv->kernel]);
      if (cv->cudnn_version > 0) snprintf(rel, sizeof rel, " (cuDNN %s)", px_fmt_release(cv->cudnn_version, r, sizeof r));
      fprintf(out, "%s%s %s hd%lld%s%s %.0f-%.0f%s", i ? "," : "", fmt, cv->bwd ? "bwd" : "fwd", (long long)cv->head_dim,
              cv->causal ? " causal" : "", win, cv->tflops[0], cv->tflops[cv->n - 1], rel);
    }
    fputc('\n', out);
  }
  fprintf(out, "  intra-node: %.0f GB/s per GPU per direction, %.1f us, efficiency %.2f, collectives hold %lld SMs\n",
          c->intra_bytes_per_s / 1e9, c->intra_latency_s * 1e6, c->intra_efficiency, (long long)c->intra_comm_sms);
  fprintf(out,
          "  inter-node: %lld NICs x %.0f Gb/s, %.1f us, efficiency %.2f, collectives hold %lld SMs, %s, "
          "oversubscription %.1f:1\n",
          (long long)c->nics_per_node, c->nic_bytes_per_s * 8 / 1e9, c->inter_latency_s * 1e6, c->inter_efficiency,
          (long long)c->inter_comm_sms, px_net_kind_names[c->net_kind], c->oversubscription);
  fprintf(out, "  host: %s memory, storage %.1f GB/s per node", px_fmt_bytes((double)c->host_memory_bytes, a, sizeof a),
          c->storage_bytes_per_s / 1e9);
  double link = px_cluster_host_link_bytes_per_s(c); /* what offload's and snapshots' copies run at */
  if (link > 0) fprintf(out, "; host link %.1f GB/s a GPU", link / 1e9);
  fprintf(out, "\n");
  if (g->power_w > 0)
    fprintf(out, "  power: a GPU %.0f W computing, %.0f W waiting%s; a node %.0f W besides its GPUs and %.0f W of network "
                 "switches; PUE %.2f\n",
            g->power_w, px_power_wait_w(c), g->idle_power_w > 0 ? "" : " (no idle figure)",
            c->node_overhead_w, c->network_w_per_node, c->pue);
  else
    fprintf(out, "  power: not given (no gpu.power_w): no power or energy figures\n");
  px_report_cluster_measured(c, NULL, out);
}

/* The figures under o (path so far in `path`), depth first. */
static int sources_walk(const px_cluster *c, const cJSON *o, char *path, size_t len, size_t cap, FILE *out) {
  int missing = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, o) {
    if (!strcmp(e->string, "name") || (len == 0 && (!strcmp(e->string, "source") || !strcmp(e->string, "sources"))))
      continue; /* names, not figures */
    int n = snprintf(path + len, cap - len, "%s%s", len ? "." : "", e->string);
    if (n < 0 || (size_t)n >= cap - len) continue;
    if (cJSON_IsObject(e)) {
      missing += sources_walk(c, e, path, len + (size_t)n, cap, out);
    } else {
      char value[48];
      if (cJSON_IsNumber(e))
        snprintf(value, sizeof value, "%g", e->valuedouble);
      else if (cJSON_IsString(e))
        snprintf(value, sizeof value, "%s", e->valuestring);
      else if (cJSON_IsArray(e))
        snprintf(value, sizeof value, "[%d points]", cJSON_GetArraySize(e));
      else
        snprintf(value, sizeof value, "%s", cJSON_IsTrue(e) ? "true" : "false");
      const char *src = px_cluster_source_of(c, path);
      if (!src) missing++;
      fprintf(out, "%-34s %-14s %s\n", path, value, src ? src : "-- no source of its own (see the file's source)");
    }
    path[len] = '\0';
  }
  return missing;
}

int px_report_cluster_sources(const px_cluster *c, FILE *out) {
  cJSON *j = px_cluster_to_json(c);
  if (!j) return -1;
  fprintf(out, "cluster %s: every figure and its source\n", c->name);
  if (c->source[0]) fprintf(out, "the file's source: %s\n\n", c->source);
  char path[256] = "";
  int missing = sources_walk(c, j, path, 0, sizeof path, out);
  cJSON_Delete(j);
  fprintf(out, "\n%d figure%s without a source of %s own\n", missing, missing == 1 ? "" : "s", missing == 1 ? "its" : "their");
  return missing;
}

void px_report_cluster_list_header(FILE *out) {
  fputs("name           gpu                    /node TFLOP/s dense     fp8     fp4        HBM     GB/s  NVLink  NICs x Gb/s"
        "   host\n"
        "                                                                                              GB/s/dir"
        "                GB/s\n",
        out);
}

void px_report_cluster_list_row(const char *name, const px_cluster *c, FILE *out) {
  px_dtype fast = c->gpu.peak_flops[PX_DTYPE_BF16] > 0 ? PX_DTYPE_BF16 : PX_DTYPE_FP32;
  char hbm[32];
  char f8[16] = "-", f4[16] = "-";
  if (c->gpu.peak_flops[PX_DTYPE_FP8] > 0) snprintf(f8, sizeof f8, "%.0f", c->gpu.peak_flops[PX_DTYPE_FP8] / 1e12);
  if (c->gpu.peak_flops[PX_DTYPE_FP4] > 0) snprintf(f4, sizeof f4, "%.0f", c->gpu.peak_flops[PX_DTYPE_FP4] / 1e12);
  char nics[32];
  snprintf(nics, sizeof nics, "%lld x %.0f", (long long)c->nics_per_node, c->nic_bytes_per_s * 8 / 1e9);
  fprintf(out, "%-14s %-22s %5lld %8.1f %-4s %7s %7s %10s %8.0f %7.0f %12s %6.1f\n", name, c->gpu.name,
          (long long)c->gpus_per_node, c->gpu.peak_flops[fast] / 1e12, px_dtype_names[fast], f8, f4,
          px_fmt_bytes((double)c->gpu.hbm_bytes, hbm, sizeof hbm), c->gpu.hbm_bytes_per_s / 1e9,
          c->intra_bytes_per_s / 1e9, nics, px_cluster_host_link_bytes_per_s(c) / 1e9);
}

cJSON *px_report_cluster_list_json(const char *name, const px_cluster *c) {
  cJSON *o = px_cluster_to_json(c);
  if (o) cJSON_AddStringToObject(o, "preset", name);
  return o;
}

void px_report_cluster_measured(const px_cluster *c, const char *path, FILE *out) {
  static const char *const link[PX_LINK_COUNT] = {"inside a node", "across nodes"}; /* by px_link */
  char lo[32], hi[32];
  for (int l = 0; l < PX_LINK_COUNT; l++)
    for (int k = 1; k < PX_COLL_COUNT; k++) {
      int n = 0;
      uint64_t min = UINT64_MAX, max = 0;
      double best = 0;
      const px_busbw_point *any = NULL;
      for (int i = 0; i < c->busbw_len[l]; i++) {
        const px_busbw_point *p = &c->busbw[l][i];
        if (p->coll != k) continue;
        n++, any = p;
        if (p->bytes < min) min = p->bytes;
        if (p->bytes > max) max = p->bytes;
        if (p->bytes_per_s > best) best = p->bytes_per_s;
      }
      if (!n) continue;
      fprintf(out, "  measured %s %s: %d sizes from %s to %s (%lld ranks on %lld node%s), busbw up to %.1f GB/s\n",
              px_busbw_coll_names[k], link[l], n, px_fmt_bytes((double)min, lo, sizeof lo),
              px_fmt_bytes((double)max, hi, sizeof hi), (long long)any->ranks, (long long)any->nodes,
              any->nodes == 1 ? "" : "s", best / 1e9);
    }
  if (c->gpu.gemm_table_len) {
    double best = 0;
    for (int i = 0; i < c->gpu.gemm_table_len; i++)
      if (c->gpu.gemm_table[i].efficiency > best) best = c->gpu.gemm_table[i].efficiency;
    fprintf(out, "  measured GEMMs: %d shapes, up to %.1f%% of peak\n", c->gpu.gemm_table_len, 100 * best);
  }
  if (path) fprintf(out, "-> %s\n", path);
}

void px_report_calibrated_text(const px_cluster *c, const char *path, FILE *out) {
  char bw[32];
  fprintf(out, "calibrated: fp32 GEMM peak %.1f GFLOP/s per rank, memory %s/s, %d op kinds measured, ",
          c->gpu.peak_flops[PX_DTYPE_FP32] / 1e9, px_fmt_bytes(c->gpu.hbm_bytes_per_s, bw, sizeof bw),
          c->gpu.kernel_rates_len);
  fprintf(out, "all-reduce %.2f GB/s, %.1f us per step -> %s\n", c->intra_bytes_per_s / 1e9, c->intra_latency_s * 1e6,
          path);
}

void px_report_calibrated_gpu_text(const px_cluster *c, const char *path, FILE *out) {
  const px_gpu *g = &c->gpu;
  double best[PX_DTYPE_COUNT] = {0};
  fprintf(out, "# GEMM (cuBLASLt)       m        n        k  dtype    TFLOP/s  of peak\n");
  for (int i = 0; i < g->gemm_table_len; i++) {
    const px_gemm_point *p = &g->gemm_table[i];
    double tf = p->dtype >= 0 ? p->efficiency * g->peak_flops[p->dtype] / 1e12 : 0;
    if (p->dtype >= 0 && tf > best[p->dtype]) best[p->dtype] = tf;
    fprintf(out, "%24lld %8lld %8lld  %-5s %10.4g  %7.3f\n", (long long)p->m, (long long)p->n, (long long)p->k,
            p->dtype >= 0 ? px_dtype_names[p->dtype] : "any", tf, p->efficiency);
  }
  for (int i = 0; i < g->attention_len; i++) {
    const px_attn_curve *a = &g->attention[i];
    fprintf(out, "# attention %s %s, head dim %lld%s, TFLOP/s by sequence length:", px_attn_format_names[a->fmt],
            a->bwd ? "backward" : "forward", (long long)a->head_dim, a->causal ? ", causal" : "");
    for (int k = 0; k < a->n; k++) fprintf(out, " %lld: %.4g", (long long)a->seq[k], a->tflops[k]);
    fputc('\n', out);
  }
  const char *mem = px_cluster_source_of(c, "gpu.memory_efficiency"), *sus = px_cluster_source_of(c, "gpu.sustained_share");
  if (mem) fprintf(out, "# memory: %.4g GB/s, %.3f of gpu.hbm_gb_per_s: %s\n",
                   g->hbm_bytes_per_s * g->memory_efficiency / 1e9, g->memory_efficiency, mem);
  if (sus) fprintf(out, "# sustained share %.3f: %s\n", g->sustained_share, sus);
  fprintf(out, "calibrated: GPU %s: %d GEMM shapes (best bf16 %.4g, fp8 %.4g TFLOP/s), %d attention curves, memory "
          "%.4g GB/s, sustained share %.3f -> %s\n", g->name, g->gemm_table_len, best[PX_DTYPE_BF16], best[PX_DTYPE_FP8],
          g->attention_len, g->hbm_bytes_per_s * g->memory_efficiency / 1e9, g->sustained_share, path);
}
