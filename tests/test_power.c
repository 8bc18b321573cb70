/* Power and energy (sim/power.h): the presets' figures from their cited
 * sources (tests/data/power.csv), a step's power and energy by hand from
 * them, the sweep's MWh and energy cost by hand, --objective energy ranks
 * by energy, and the refusals of bad power fields. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/power.h"
#include "sim/sim.h"
#include "sim/sweep.h"
#include "tests/testplan.h"
#include "tests/testutil.h"

static px_cluster cluster(const char *name, int64_t gpus) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load(name, &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, gpus, 0, &err), PX_OK);
  return c;
}

/* Every GPU preset's power figures are the arithmetic of tests/data/power.csv, each with its source; the PUE is
 * the Uptime Institute default, cited. */
static void test_preset_power(void) {
  FILE *fp = fopen(px_test_path("tests/data/power.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512], name[64];
  double tdp, idle, system_w, system_gpus;
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (sscanf(line, "%63[^,],%lf,%lf,%lf,%lf", name, &tdp, &idle, &system_w, &system_gpus) != 5) continue;
    rows++;
    px_cluster c = cluster(name, 8);
    double gpn = (double)c.gpus_per_node;
    PX_ASSERT_REL(c.gpu.power_w, tdp, 1e-12);
    CU_ASSERT_EQUAL(c.gpu.idle_power_w, idle);
    PX_ASSERT_REL(c.node_overhead_w, system_w * gpn / system_gpus - gpn * tdp, 1e-5);
    CU_ASSERT_EQUAL(c.network_w_per_node, 0); /* not counted, and the file says so */
    CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&c, "power.network_w_per_node"));
    CU_ASSERT_EQUAL(c.pue, PX_PUE_DEFAULT);
    CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&c, "gpu.power_w"));
    CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&c, "power.node_overhead_w"));
    CU_ASSERT(idle == 0 || px_cluster_source_of(&c, "gpu.idle_power_w"));
    const char *pue = px_cluster_source_of(&c, "power.pue");
    CU_ASSERT(pue && strstr(pue, "Uptime Institute Global Data Center Survey 2024"));
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 9);
  /* the development machine gives none: no power figures */
  px_cluster cpu = cluster("local-cpu", 2);
  CU_ASSERT(!px_power_known(&cpu));
  px_power p;
  px_power_of(&cpu, 0.5, 1.0, 1000, &p);
  CU_ASSERT(p.gpu_w == 0 && p.facility_w == 0 && p.step_j == 0);
}

/* px_power_of by hand from the DGX H100 preset's cited figures (700 W computing, 70 W waiting, 10.2 kW - 8 x 700 W
 * = 4.6 kW a node besides its GPUs, PUE 1.56): 16 GPUs (2 nodes) computing 75% of a 2 s step of 1M tokens; a
 * partial node draws its whole overhead; the A100 (no idle figure) draws its TDP whatever it does. */
static void test_power_by_hand(void) {
  px_cluster c = cluster("dgx-h100", 16);
  px_power p;
  px_power_of(&c, 0.75, 2.0, 1e6, &p);
  double gpu = 0.75 * 700 + 0.25 * 70;       /* 542.5 W */
  double it = 16 * gpu + 2 * (10200 - 5600); /* 8,680 + 9,200 = 17,880 W */
  PX_ASSERT_REL(p.gpu_w, 542.5, 1e-12);
  PX_ASSERT_REL(p.it_w, it, 1e-12);
  PX_ASSERT_REL(p.node_w, it / 2, 1e-12);
  PX_ASSERT_REL(p.facility_w, 1.56 * 17880, 1e-12); /* 27,892.8 W */
  PX_ASSERT_REL(p.step_j, 1.56 * 17880 * 2.0, 1e-12);
  PX_ASSERT_REL(p.j_per_token, 1.56 * 17880 * 2.0 / 1e6, 1e-12);
  /* the floor: nothing computing; the ceiling: all of the step */
  px_power_of(&c, 0, 2.0, 1e6, &p);
  PX_ASSERT_REL(p.gpu_w, 70, 1e-12);
  px_power_of(&c, 1, 2.0, 1e6, &p);
  PX_ASSERT_REL(p.it_w, 16 * 700 + 2 * 4600.0, 1e-12);
  /* 4 GPUs of one DGX: the node's whole overhead */
  px_cluster four = cluster("dgx-h100", 4);
  px_power_of(&four, 1, 1.0, 1, &p);
  PX_ASSERT_REL(p.it_w, 4 * 700 + 4600.0, 1e-12);
  /* no idle reading for the A100: its TDP through the step; 6.5 kW - 8 x 400 W a node */
  px_cluster a100 = cluster("dgx-a100", 8);
  px_power_of(&a100, 0.3, 1.0, 1, &p);
  PX_ASSERT_REL(p.gpu_w, 400, 1e-12);
  PX_ASSERT_REL(p.facility_w, 1.56 * 6500, 1e-12);
  /* a GB200 NVL72 rack: 18 trays of 4 GPUs at 1,200 W, 120 kW the rack */
  px_cluster nvl = cluster("gb200-nvl72", 72);
  px_power_of(&nvl, 1, 1.0, 1, &p);
  PX_ASSERT_REL(p.it_w, 120000, 1e-5);
  /* a run: 10 days at 27,892.8 W = 6,694.272 kWh, $669.43 at $0.10 */
  px_power_of(&c, 0.75, 2.0, 1e6, &p);
  double mwh, usd;
  px_power_run(&p, 10 * 86400.0, 0.10, &mwh, &usd);
  PX_ASSERT_REL(mwh, 6.694272, 1e-12);
  PX_ASSERT_REL(usd, 669.4272, 1e-12);
}

/* A simulated step's power: its compute share is its breakdown's computing parts over the step (one stage here:
 * the breakdown is the stage's), and its power and energy that share's, by hand; --set gpu.power_w changes the
 * energy and not the step (no power cap is modelled). */
static void test_sim_step_energy(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2, p.gbs = 16, p.mbs = 1, p.zero = 1;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-h100", 8, &p, &err), PX_OK);
  px_sim_result r;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  const px_sim_breakdown *b = &r.breakdown;
  double compute = b->forward_s + b->backward_s + b->recompute_s + b->optimizer_s + b->contention_s;
  PX_ASSERT_REL(r.compute_share, compute / r.step_time_s, 1e-9);
  CU_ASSERT(r.compute_share > 0.5 && r.compute_share < 1);
  double gpu = r.compute_share * 700 + (1 - r.compute_share) * 70, it = 8 * gpu + 4600;
  PX_ASSERT_REL(r.power.gpu_w, gpu, 1e-12);
  PX_ASSERT_REL(r.power.facility_w, 1.56 * it, 1e-12);
  PX_ASSERT_REL(r.power.step_j, 1.56 * it * r.step_time_s, 1e-12);
  PX_ASSERT_REL(r.power.j_per_token, 1.56 * it * r.step_time_s / (16 * 8192.0), 1e-12);
  double step = r.step_time_s;
  px_sim_result_free(&r);
  px_plan_free(&plan);
  /* a what-if: the same plan at 500 W computing */
  px_cluster c = cluster("dgx-h100", 8);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "gpu.power_w=500", &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, NULL, &r, &err), PX_OK);
  CU_ASSERT_EQUAL(r.step_time_s, step);
  PX_ASSERT_REL(r.power.gpu_w, r.compute_share * 500 + (1 - r.compute_share) * 70, 1e-12);
  px_sim_result_free(&r);
  px_plan_free(&plan);
}

/* The sweep's energy to train by hand: each ranked plan's MWh is the site's draw over its wall-clock days, its
 * cost that at the price a kWh; --objective energy ranks by it (and without training tokens by a token's energy
 * over the goodput), and --objective cost by the GPU-hours' cost and the energy's together. */
static void test_sweep_energy(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 16);
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed.gbs = 64, o.fixed.mbs = 1, o.fixed.pp = 1; /* pp 1: a fast sweep, still dozens of plans */
  o.tokens = 1e12, o.price_per_kwh = 0.08, o.price_per_gpu_hour = 2;
  o.threads = 2;
  o.objective = PX_OBJ_ENERGY;
  px_sweep_result r;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  CU_ASSERT_FATAL(r.n > 10);
  for (int64_t i = 0; i < r.n; i++) {
    const px_sweep_entry *e = &r.entries[i];
    double mwh = e->sim.power.facility_w * e->train.days * 86400 / 3.6e9;
    PX_ASSERT_REL(e->train.energy_mwh, mwh, 1e-12);
    PX_ASSERT_REL(e->train.energy_cost_usd, mwh * 1000 * 0.08, 1e-12);
    if (i > 0) CU_ASSERT(e->train.energy_mwh >= r.entries[i - 1].train.energy_mwh);
  }
  px_sweep_result_free(&r);
  o.objective = PX_OBJ_COST;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  for (int64_t i = 1; i < r.n; i++)
    CU_ASSERT(r.entries[i].train.cost_usd + r.entries[i].train.energy_cost_usd >=
              r.entries[i - 1].train.cost_usd + r.entries[i - 1].train.energy_cost_usd);
  px_sweep_result_free(&r);
  o.tokens = 0, o.price_per_kwh = 0, o.price_per_gpu_hour = 0, o.objective = PX_OBJ_ENERGY;
  CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
  for (int64_t i = 0; i < r.n; i++) {
    CU_ASSERT_EQUAL(r.entries[i].train.energy_mwh, 0);
    PX_ASSERT_REL(r.entries[i].score, r.entries[i].sim.power.j_per_token / r.entries[i].train.goodput, 1e-12);
    if (i > 0) CU_ASSERT(r.entries[i].score >= r.entries[i - 1].score);
  }
  px_sweep_result_free(&r);
}

/* Bad power fields are refused, naming the field: negative power, a PUE below 1, an idle draw above the
 * computing one, power figures without the GPUs'. */
static void test_power_refusals(void) {
  static const struct {
    const char *set, *says;
  } bad[] = {
      {"gpu.power_w=-5", "field 'gpu.power_w': -5 is out of range"},
      {"gpu.idle_power_w=-1", "field 'gpu.idle_power_w': -1 is out of range"},
      {"power.node_overhead_w=-100", "field 'power.node_overhead_w': -100 is out of range"},
      {"power.network_w_per_node=-1", "field 'power.network_w_per_node': -1 is out of range"},
      {"power.pue=0.9", "field 'power.pue': 0.9 is out of range [1, 10]"},
      {"gpu.idle_power_w=800", "field 'gpu.idle_power_w': 800 W is above gpu.power_w 700 W"},
  };
  px_err err = {0};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_cluster c = cluster("dgx-h100", 8);
    CU_ASSERT_EQUAL(px_cluster_set_field(&c, bad[i].set, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, bad[i].says)) fprintf(stderr, "\n  %s: %s\n", bad[i].set, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].says));
    CU_ASSERT_EQUAL(c.gpu.power_w, 700); /* untouched */
  }
  px_cluster cpu = cluster("local-cpu", 2);
  CU_ASSERT_EQUAL(px_cluster_set_field(&cpu, "power.node_overhead_w=300", &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "power figures without field 'gpu.power_w'"));
  /* and the what-ifs that are fine */
  px_cluster c = cluster("dgx-h100", 8);
  CU_ASSERT_EQUAL(px_cluster_set_field(&c, "power.pue=1.1", &err), PX_OK);
  CU_ASSERT_EQUAL(c.pue, 1.1);
  CU_ASSERT_EQUAL(px_cluster_set_field(&c, "power.network_w_per_node=150", &err), PX_OK);
  CU_ASSERT_EQUAL(c.network_w_per_node, 150);
  CU_ASSERT_EQUAL(px_cluster_set_field(&cpu, "gpu.power_w=65", &err), PX_OK);
  CU_ASSERT(px_power_known(&cpu));
}

int main(void) {
  static const px_test tests[] = {
      {"presets' power figures: datasheet arithmetic of tests/data/power.csv, each cited", test_preset_power},
      {"a step's power and energy by hand from the DGX H100's figures", test_power_by_hand},
      {"a simulated step's compute share, power and energy; --set gpu.power_w", test_sim_step_energy},
      {"the sweep's MWh and energy cost by hand; objectives energy and cost", test_sweep_energy},
      {"bad power fields refused, naming the field", test_power_refusals},
  };
  return px_test_main("power", tests, sizeof tests / sizeof tests[0]);
}
