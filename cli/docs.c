/* parallax help --markdown: the parts of the docs the code writes (README.md's
 * command table, docs/flags.md's flag reference, the preset tables of
 * docs/models-and-clusters.md), each between its marker lines, which
 * scripts/docs.sh puts in place and tests/cli/docs.sh checks. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/paths.h"
#include "plan/cluster.h"
#include "plan/model.h"

static void begin(const char *name) { printf("<!-- generated: %s BEGIN -->\n\n", name); }
static void end(const char *name) { printf("\n<!-- generated: %s END -->\n", name); }

/* An exact count with thousands separators: 46,702,792,704. */
static const char *commas(uint64_t v, char buf[32]) {
  char t[24];
  int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v), o = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = t[i];
  }
  buf[o] = '\0';
  return buf;
}

static void command_table(const px_command *cmds, size_t n) {
  begin("commands");
  printf("| command | what it does | docs |\n| --- | --- | --- |\n");
  for (size_t i = 0; i < n; i++) {
    printf("| `parallax %s` | ", cmds[i].name);
    px_args_md_cell(cmds[i].summary, false);
    printf(" | [%s](docs/%s) |\n", cmds[i].doc, cmds[i].doc);
  }
  end("commands");
}

/* Every flag, a table per group, each saying which commands take it. */
static void flag_reference(const px_command *cmds, size_t n) {
  begin("flags");
  for (int g = 0; g < PX_OPT_GROUP_COUNT; g++) {
    int bit = 1 << g;
    printf("%s### %s\n\n", g ? "\n" : "", px_args_group_title(bit));
    if (bit == PX_OPT_COMMON) {
      printf("Taken by every command.\n");
    } else {
      printf("Taken by");
      int k = 0;
      for (size_t i = 0; i < n; i++)
        if (cmds[i].groups & bit) printf("%s `%s`", k++ ? "," : "", cmds[i].name);
      for (size_t i = 0; i < n; i++)
        if (cmds[i].after_dash & bit) printf("%s `%s` after its `--`", k++ ? "," : "", cmds[i].name);
      printf(".\n");
    }
    printf("\n| flag | value | what it does |\n| --- | --- | --- |\n");
    px_args_print_markdown(bit);
  }
  end("flags");
}

/* One row per model preset. */
static px_status model_table(px_err *err) {
  char **names;
  size_t n;
  px_status st = px_preset_list("models", &names, &n, err);
  if (st) return st;
  begin("models");
  printf(
      "| preset | parameters | active | layers | hidden | heads / KV | FFN | vocab | seq | norm, MLP, positions "
      "| experts | attention, MTP |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- |\n");
  for (size_t i = 0; i < n && !st; i++) {
    px_model m;
    if ((st = px_model_load(names[i], &m, err))) break;
    px_model_params p;
    px_model_count_params(&m, &p);
    char total[32], active[32] = "", ffn[64], experts[64] = "", attention[96] = "";
    snprintf(ffn, sizeof ffn, "%lld", (long long)m.ffn_hidden);
    if (m.experts > 0) {
      commas(p.active, active);
      if (m.first_dense_layers > 0 || m.moe_layer_freq > 1)
        snprintf(ffn, sizeof ffn, "expert %lld, dense %lld", (long long)m.moe_ffn_hidden, (long long)m.ffn_hidden);
      else
        snprintf(ffn, sizeof ffn, "expert %lld", (long long)m.moe_ffn_hidden);
      int k = snprintf(experts, sizeof experts, "%lld, top %lld", (long long)m.experts, (long long)m.experts_per_token);
      if (m.shared_experts)
        snprintf(experts + k, sizeof experts - (size_t)k, ", %lld shared", (long long)m.shared_experts);
    }
    if (m.kv_lora_rank > 0) snprintf(attention, sizeof attention, "latent (MLA)");
    if (m.qk_norm) snprintf(attention, sizeof attention, "q/k norms");
    if (m.sliding_window > 0) {
      char win[80];
      px_model_window_desc(&m, win, sizeof win);
      snprintf(attention, sizeof attention, "%s%s", win, m.attention_sinks ? ", sinks" : "");
    } else if (m.attention_sinks) {
      snprintf(attention, sizeof attention, "sinks");
    }
    if (m.mtp_layers > 0) { /* the multi-token prediction modules the model file has (trained with --mtp-layers) */
      size_t k = strlen(attention);
      snprintf(attention + k, sizeof attention - k, "%s%lld MTP", k ? ", " : "", (long long)m.mtp_layers);
    }
    printf("| `%s` | %s | %s | %lld | %lld | %lld / %lld | %s | %lld | %lld | %s, %s, %s | %s | %s |\n", names[i],
           commas(p.total, total), active, (long long)m.layers, (long long)m.hidden, (long long)m.heads,
           (long long)m.kv_heads, ffn, (long long)m.vocab, (long long)m.seq_len, px_norm_names[m.norm],
           px_mlp_names[m.mlp], px_pos_names[m.position], experts, attention);
  }
  px_preset_list_free(names, n);
  if (!st) end("models");
  return st;
}

/* A peak in TFLOP/s as the datasheets give it: 989.4, 2250, 15000, 0.05. */
static const char *tflops(double flops_per_s, char buf[24]) {
  double t = flops_per_s / 1e12;
  snprintf(buf, 24, t >= 1000 ? "%.0f" : "%.4g", t);
  return buf;
}

/* One row per cluster preset. */
static px_status cluster_table(px_err *err) {
  char **names;
  size_t n;
  px_status st = px_preset_list("topologies", &names, &n, err);
  if (st) return st;
  begin("topologies");
  printf(
      "| preset | GPU | GPUs a node | NVLink domain | dense TFLOP/s | fp8 | fp4 | HBM | HBM GB/s | NVLink GB/s a "
      "direction | NICs × Gb/s | network | host link GB/s a GPU |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n");
  for (size_t i = 0; i < n && !st; i++) {
    px_cluster c;
    if ((st = px_cluster_load(names[i], &c, err))) break;
    px_dtype fast = c.gpu.peak_flops[PX_DTYPE_BF16] > 0 ? PX_DTYPE_BF16 : PX_DTYPE_FP32;
    char hbm[32], dense[24], f8[24] = "", f4[24] = "";
    if (c.gpu.peak_flops[PX_DTYPE_FP8] > 0) tflops(c.gpu.peak_flops[PX_DTYPE_FP8], f8);
    if (c.gpu.peak_flops[PX_DTYPE_FP4] > 0) tflops(c.gpu.peak_flops[PX_DTYPE_FP4], f4);
    printf("| `%s` | %s | %lld | %lld | %s %s | %s | %s | %s | %.0f | %.0f | %lld × %.0f | %s | %.4g |\n", names[i],
           c.gpu.name, (long long)c.gpus_per_node, (long long)px_cluster_nvlink_domain(&c),
           tflops(c.gpu.peak_flops[fast], dense), px_dtype_names[fast], f8, f4,
           px_fmt_bytes((double)c.gpu.hbm_bytes, hbm, sizeof hbm), c.gpu.hbm_bytes_per_s / 1e9,
           c.intra_bytes_per_s / 1e9, (long long)c.nics_per_node, c.nic_bytes_per_s * 8 / 1e9,
           px_net_kind_names[c.net_kind], px_cluster_host_link_bytes_per_s(&c) / 1e9);
  }
  px_preset_list_free(names, n);
  if (!st) end("topologies");
  return st;
}

int px_cli_docs(const px_command *cmds, size_t n) {
  px_err err = {0};
  command_table(cmds, n);
  flag_reference(cmds, n);
  px_status st = model_table(&err);
  if (!st) st = cluster_table(&err);
  return st ? px_cli_fail(st, &err) : 0;
}
