/* parallax models / topologies: list presets with their key figures. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/paths.h"
#include "report/cluster.h"
#include "report/model.h"

/* One preset: its row on stdout, or its object added to arr (json). */
typedef px_status (*preset_row_fn)(const char *name, cJSON *arr, px_err *err);

/* Lists presets of one kind. */
static int list_presets(const char *kind, int argc, char **argv, preset_row_fn row, void (*header)(FILE *out)) {
  px_args a;
  px_err err = {0};
  char cmd[64];
  snprintf(cmd, sizeof cmd, "parallax %s", kind);
  px_status st = px_args_parse(&a, cmd, PX_GROUPS_PRESETS, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: %s [--json]\n\nLists the presets in %s/%s.\n\n", cmd, px_data_dir(), kind);
    px_args_print_help(PX_GROUPS_PRESETS);
    return 0;
  }
  if (a.npos) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "%s takes no arguments", cmd), &err);
  char **names;
  size_t n;
  if ((st = px_preset_list(kind, &names, &n, &err))) return px_cli_fail(st, &err);
  cJSON *root = a.json ? cJSON_CreateObject() : NULL;
  cJSON *arr = root ? cJSON_AddArrayToObject(root, kind) : NULL;
  if (a.json && !arr) st = px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
  if (!a.json) header(stdout);
  for (size_t i = 0; i < n && !st; i++) st = row(names[i], arr, &err);
  px_preset_list_free(names, n);
  if (!st && root) {
    st = px_json_print_free(root, &err);
    root = NULL;
  }
  cJSON_Delete(root);
  return st ? px_cli_fail(st, &err) : 0;
}

static px_status model_row(const char *name, cJSON *arr, px_err *err) {
  px_model m;
  px_status st = px_model_load(name, &m, err);
  if (st) return st;
  px_model_params p;
  px_model_count_params(&m, &p);
  if (!arr) {
    px_report_model_list_row(name, &m, &p, stdout);
    if (m.experts > 0) { /* a mixture of experts: its shape and active count under its row */
      char act[32];
      printf("%-16s %10s active: %lld experts, top %lld%s\n", "", px_fmt_count((double)p.active, act, sizeof act),
             (long long)m.experts, (long long)m.experts_per_token, m.shared_experts ? ", shared" : "");
    }
    return PX_OK;
  }
  cJSON *o = px_report_model_list_json(name, &m, &p);
  if (!o || (m.experts > 0 && !px_json_add_num(o, "params_active", (double)p.active))) {
    cJSON_Delete(o);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  cJSON_AddItemToArray(arr, o);
  return PX_OK;
}

static px_status cluster_row(const char *name, cJSON *arr, px_err *err) {
  px_cluster c;
  px_status st = px_cluster_load(name, &c, err);
  if (st) return st;
  if (!arr) {
    px_report_cluster_list_row(name, &c, stdout);
    return PX_OK;
  }
  cJSON *o = px_report_cluster_list_json(name, &c);
  if (!o) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  cJSON_AddItemToArray(arr, o);
  return PX_OK;
}

int px_cmd_models(int argc, char **argv) {
  return list_presets("models", argc, argv, model_row, px_report_model_list_header);
}

int px_cmd_topologies(int argc, char **argv) {
  return list_presets("topologies", argc, argv, cluster_row, px_report_cluster_list_header);
}
