/* parallax sim: simulate one training step of a plan and report step time,
 * throughput, MFU, memory, bubble and communication. */
#include <stdio.h>
#include <time.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "core/fmt.h"
#include "core/json.h"
#include "plan/planfile.h"
#include "core/fileio.h"
#include "sim/plotdata.h"
#include "sim/plots.h"
#include "sim/sim.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_sim(const px_plan *plan, const px_sim_result *r, double wall_s) {
  char a[64], b[64], c[64];
  const px_parallel *p = &plan->par;
  printf("sim: %s on %lld x %s (%s): tp %lld pp %lld dp %lld, ZeRO-%d%s, %s, mbs %lld, gbs %lld, seq %lld, "
         "recompute %s\n",
         plan->model.name, (long long)plan->cluster.gpus, plan->cluster.gpu.name, plan->cluster.name,
         (long long)p->tp, (long long)p->pp, (long long)p->dp, p->zero, p->sp ? ", SP" : "",
         px_schedule_names[p->schedule], (long long)p->mbs, (long long)p->gbs, (long long)plan->seq,
         px_recompute_names[p->recompute]);
  printf("  step time        %s\n", px_fmt_time(r->step_time_s, a, sizeof a));
  printf("  throughput       %s tokens/s (%.0f per GPU)\n", px_fmt_count(r->tokens_per_s, a, sizeof a),
         r->tokens_per_s / (double)plan->cluster.gpus);
  printf("  model TFLOP/s    %.1f per GPU: MFU %.1f%%, HFU %.1f%%\n", r->model_tflops_per_gpu, 100 * r->mfu,
         100 * r->hfu);
  printf("  pipeline bubble  %.1f%% (analytic %.1f%%)\n", 100 * r->bubble_fraction,
         100 * px_plan_bubble_analytic(plan));
  printf("  communication    tp %s, pp %s, dp %s; exposed %s\n", px_fmt_time(r->comm_tp_s, a, sizeof a),
         px_fmt_time(r->comm_pp_s, b, sizeof b), px_fmt_time(r->comm_dp_s, c, sizeof c),
         px_fmt_time(r->comm_exposed_s, a + 32, 32));
  uint64_t peak = 0;
  int64_t worst = 0;
  for (int64_t s = 0; s < p->pp; s++)
    if (plan->mem[s].peak_bytes > peak) peak = plan->mem[s].peak_bytes, worst = s;
  printf("  memory           peak %s per GPU (stage %lld) of %s: %s\n", px_fmt_bytes((double)peak, a, sizeof a),
         (long long)worst, px_fmt_bytes((double)plan->cluster.gpu.hbm_bytes, b, sizeof b),
         r->fits ? "fits" : "DOES NOT FIT");
  printf("  simulated        %llu events in %s\n", (unsigned long long)r->events, px_fmt_time(wall_s, a, sizeof a));
}

cJSON *px_report_sim_json(const px_plan *plan, const px_sim_result *r) {
  cJSON *o = px_report_plan_head(plan);
  if (!o) return NULL;
  px_json_add_num(o, "step_time_s", r->step_time_s);
  px_json_add_num(o, "tokens_per_s", r->tokens_per_s);
  px_json_add_num(o, "model_tflops_per_gpu", r->model_tflops_per_gpu);
  px_json_add_num(o, "mfu", r->mfu);
  px_json_add_num(o, "hfu", r->hfu);
  px_json_add_num(o, "bubble_fraction", r->bubble_fraction);
  px_json_add_num(o, "bubble_analytic", px_plan_bubble_analytic(plan));
  cJSON_AddBoolToObject(o, "fits", r->fits);
  cJSON *comm = cJSON_AddObjectToObject(o, "comm");
  if (comm) {
    px_json_add_num(comm, "tp_s", r->comm_tp_s);
    px_json_add_num(comm, "pp_s", r->comm_pp_s);
    px_json_add_num(comm, "dp_s", r->comm_dp_s);
    px_json_add_num(comm, "exposed_s", r->comm_exposed_s);
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

int px_cmd_sim(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_SIM;
  px_status st = px_args_parse(&a, "parallax sim", groups, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax sim --model M --cluster C --gpus N [plan flags] [--json] [--trace FILE]\n\n"
           "Simulates one training step: step time, tokens/s, model TFLOP/s per GPU, MFU and HFU,\n"
           "pipeline bubble, time in TP/PP/DP communication and how much of it is exposed, and\n"
           "memory per GPU. --trace writes a Chrome trace (open it in Perfetto); --plot DIR writes the\n"
           "memory, timeline and scaling plots.\n\n");
    px_args_print_help(groups);
    return 0;
  }
  if (a.npos) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sim takes no positional arguments"), &err);
  px_model m;
  px_cluster c;
  if ((st = px_args_load(&a, &m, &c, &err))) return px_cli_fail(st, &err);
  px_plan plan;
  if ((st = px_plan_compile(&plan, &m, &c, &a.par, &err))) return px_cli_fail(st, &err);
  if (a.save_plan && (st = px_planfile_save(a.save_plan, &m, &c, &a.par, &err))) {
    px_plan_free(&plan);
    return px_cli_fail(st, &err);
  }
  if (a.plot_dir) { /* the plan's memory, timeline and scaling, rendered */
    if ((st = px_mkdir_p(a.plot_dir, &err)) || (st = px_plotdata_plan(&m, &c, &a.par, a.plot_dir, &err)) ||
        (st = px_plots_render(a.plot_dir, &err))) {
      px_plan_free(&plan);
      return px_cli_fail(st, &err);
    }
  }
  px_sim_opts opts = {.trace_path = a.trace_file};
  px_sim_result r;
  double t0 = now_s();
  st = px_sim_run(&plan, &opts, &r, &err);
  double wall = now_s() - t0;
  if (!st) {
    if (a.json) {
      cJSON *o = px_report_sim_json(&plan, &r);
      st = o ? px_json_print(o, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
      cJSON_Delete(o);
    } else {
      print_sim(&plan, &r, wall);
    }
    px_sim_result_free(&r);
  }
  px_plan_free(&plan);
  return st ? px_cli_fail(st, &err) : 0;
}
