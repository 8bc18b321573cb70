/* parallax model show (a model's parameters, FLOPs per token and per-layer
 * breakdown) and parallax topology show (a cluster's figures at a size). */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/fmt.h"
#include "core/json.h"
#include "report/cluster.h"
#include "report/model.h"

/* parallax topology show NAME|FILE [--gpus N | --nodes N]; the cluster may also be --cluster's (its help lists it) */
int px_cmd_topology(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax topology", PX_GROUPS_TOPOLOGY, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax topology show NAME|FILE [--gpus N | --nodes N] [--set FIELD=VALUE] [--sources] [--json]\n"
           "       parallax topology show --cluster NAME|FILE ...\n\n");
    px_args_print_help(PX_GROUPS_TOPOLOGY);
    return 0;
  }
  if (a.npos < 1 || strcmp(a.pos[0], "show"))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax topology show NAME|FILE"), &err);
  if (a.npos == 2 && a.cluster)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax topology show: the cluster twice (%s and --cluster %s): "
                                  "give one", a.pos[1], a.cluster), &err);
  const char *name = a.npos == 2 ? a.pos[1] : a.cluster;
  if (!name || a.npos > 2)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax topology show NAME|FILE"), &err);
  px_cluster c;
  if ((st = px_cluster_load(name, &c, &err)) || (st = px_args_cluster_finish(&a, &c, a.gpus, &err)))
    return px_cli_fail(st, &err);
  if (a.sources && !a.json) {
    px_report_cluster_sources(&c, stdout);
    return 0;
  }
  if (!a.json) {
    px_report_cluster_text(&c, stdout);
    return 0;
  }
  st = px_json_print_free(px_cluster_to_json(&c), &err);
  return st ? px_cli_fail(st, &err) : 0;
}

int px_cmd_model(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  px_status st = px_args_parse(&a, "parallax model", PX_GROUPS_MODEL, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax model show NAME|FILE [--seq N] [--json]\n\n"
           "Shows a model preset, our JSON or a Hugging Face config.json: exact parameters,\n"
           "per-layer breakdown and FLOPs per token; for a mixture of experts, the dense and\n"
           "MoE layers apart, the active parameters per token and the MTP modules.\n\n");
    px_args_print_help(PX_GROUPS_MODEL);
    return 0;
  }
  if (a.npos < 1 || strcmp(a.pos[0], "show"))
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax model show NAME|FILE"), &err);
  if (a.npos == 2 && a.model)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax model show: the model twice (%s and --model %s): give one",
                                  a.pos[1], a.model), &err);
  const char *name = a.npos >= 2 ? a.pos[1] : a.model;
  if (!name || a.npos > 2)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "usage: parallax model show NAME|FILE"), &err);
  px_model m;
  if ((st = px_model_load(name, &m, &err))) return px_cli_fail(st, &err);
  int64_t seq = a.par.seq > 0 ? a.par.seq : m.seq_len;
  px_model_params p;
  px_model_flops f;
  px_model_count_params(&m, &p);
  px_model_flops_per_token(&m, seq, &f);
  if (!a.json) {
    px_report_model_text(&m, &p, &f, seq, stdout);
    return 0;
  }
  st = px_json_print_free(px_report_model_json(&m, &p, &f, seq), &err);
  return st ? px_cli_fail(st, &err) : 0;
}
