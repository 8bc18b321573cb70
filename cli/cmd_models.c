/* parallax models / topologies: list presets with their key figures. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/paths.h"

/* Lists presets of one kind; `show` prints or adds one entry. */
static int list_presets(const char *kind, int argc, char **argv,
                        px_status (*row)(const char *name, bool json, cJSON *arr, px_err *err), const char *header) {
  px_args a;
  px_err err = {0};
  char cmd[64];
  snprintf(cmd, sizeof cmd, "parallax %s", kind);
  px_status st = px_args_parse(&a, cmd, 0, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: %s [--json]\n\nLists the presets in %s/%s.\n\n", cmd, px_data_dir(), kind);
    px_args_print_help(0);
    return 0;
  }
  if (a.npos) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "%s takes no arguments", cmd), &err);
  char **names;
  size_t n;
  if ((st = px_preset_list(kind, &names, &n, &err))) return px_cli_fail(st, &err);
  cJSON *root = a.json ? cJSON_CreateObject() : NULL;
  cJSON *arr = root ? cJSON_AddArrayToObject(root, kind) : NULL;
  if (!a.json) puts(header);
  for (size_t i = 0; i < n && !st; i++) st = row(names[i], a.json, arr, &err);
  px_preset_list_free(names, n);
  if (!st && root) st = px_json_print(root, &err);
  cJSON_Delete(root);
  return st ? px_cli_fail(st, &err) : 0;
}

static px_status model_row(const char *name, bool json, cJSON *arr, px_err *err) {
  px_model m;
  px_status st = px_model_load(name, &m, err);
  if (st) return st;
  px_model_params p;
  px_model_count_params(&m, &p);
  if (json) {
    cJSON *o = px_model_to_json(&m);
    if (!o) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    cJSON_AddStringToObject(o, "preset", name);
    px_json_add_num(o, "params", (double)p.total);
    cJSON_AddItemToArray(arr, o);
    return PX_OK;
  }
  char pc[32];
  printf("%-16s %10s %7lld %7lld %5lld/%-4lld %7lld %7lld  %s/%s/%s\n", name, px_fmt_count((double)p.total, pc, sizeof pc),
         (long long)m.layers, (long long)m.hidden, (long long)m.heads, (long long)m.kv_heads, (long long)m.vocab,
         (long long)m.seq_len, px_norm_names[m.norm], px_mlp_names[m.mlp], px_pos_names[m.position]);
  return PX_OK;
}

static px_status cluster_row(const char *name, bool json, cJSON *arr, px_err *err) {
  px_cluster c;
  px_status st = px_cluster_load(name, &c, err);
  if (st) return st;
  if (json) {
    cJSON *o = px_cluster_to_json(&c);
    if (!o) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    cJSON_AddStringToObject(o, "preset", name);
    cJSON_AddItemToArray(arr, o);
    return PX_OK;
  }
  px_dtype fast = c.gpu.peak_flops[PX_DTYPE_BF16] > 0 ? PX_DTYPE_BF16 : PX_DTYPE_FP32;
  char hbm[32];
  printf("%-14s %-22s %5lld %8.1f %-4s %10s %8.0f %7.0f %5lld x %.0f\n", name, c.gpu.name, (long long)c.gpus_per_node,
         c.gpu.peak_flops[fast] / 1e12, px_dtype_names[fast], px_fmt_bytes((double)c.gpu.hbm_bytes, hbm, sizeof hbm),
         c.gpu.hbm_bytes_per_s / 1e9, c.intra_bytes_per_s / 1e9, (long long)c.nics_per_node,
         c.nic_bytes_per_s * 8 / 1e9);
  return PX_OK;
}

int px_cmd_models(int argc, char **argv) {
  return list_presets("models", argc, argv, model_row,
                      "name                 params  layers  hidden heads/kv    vocab     seq  norm/mlp/position");
}

int px_cmd_topologies(int argc, char **argv) {
  return list_presets("topologies", argc, argv, cluster_row,
                      "name           gpu                    /node   TFLOP/s       HBM    GB/s  NVLink  NICs x Gb/s\n"
                      "                                                                        GB/s/dir");
}
