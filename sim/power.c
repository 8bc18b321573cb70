/* Power and energy of a plan (see power.h). */
#include "sim/power.h"

#include <string.h>

bool px_power_known(const px_cluster *c) { return c->gpu.power_w > 0; }

double px_power_wait_w(const px_cluster *c) { return c->gpu.idle_power_w > 0 ? c->gpu.idle_power_w : c->gpu.power_w; }

void px_power_of(const px_cluster *c, double compute_share, double step_s, double tokens_per_step, px_power *out) {
  memset(out, 0, sizeof *out);
  if (!px_power_known(c) || c->gpus <= 0 || c->nodes <= 0) return;
  double share = compute_share < 0 ? 0 : compute_share > 1 ? 1 : compute_share;
  out->gpu_w = share * c->gpu.power_w + (1 - share) * px_power_wait_w(c);
  double nodes = (double)c->nodes;
  out->it_w = (double)c->gpus * out->gpu_w + nodes * (c->node_overhead_w + c->network_w_per_node);
  out->node_w = out->it_w / nodes;
  out->facility_w = out->it_w * c->pue;
  out->step_j = step_s > 0 ? out->facility_w * step_s : 0;
  out->j_per_token = tokens_per_step > 0 ? out->step_j / tokens_per_step : 0;
}

void px_power_run(const px_power *p, double wall_s, double price_per_kwh, double *mwh, double *cost_usd) {
  double kwh = wall_s > 0 ? p->facility_w * wall_s / 3.6e6 : 0;
  *mwh = kwh / 1e3;
  *cost_usd = kwh * price_per_kwh;
}
