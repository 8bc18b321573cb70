/* Power and energy of a plan: the one place they are computed (sim, sweep
 * and report read it). A GPU draws gpu.power_w while its compute stream
 * computes (forward, backward, recomputation, optimizer, and the compute
 * the SMs of collectives beside it took) and gpu.idle_power_w the rest of
 * the step (pipeline bubbles, exposed communication, a stage done before
 * the step ends; gpu.power_w where the file gives no idle figure). A node
 * adds power.node_overhead_w (CPUs, memory, NICs, fans, switches in the
 * node, power supply losses) and power.network_w_per_node (the fabric's
 * switches), constant through the step; the site multiplies it all by its
 * PUE. No power cap is modelled: the figures are a draw the speed models do
 * not read. */
#ifndef PX_SIM_POWER_H
#define PX_SIM_POWER_H

#include <stdbool.h>

#include "plan/cluster.h"

typedef struct {
  double gpu_w;      /* a GPU's board power, averaged over the step */
  double node_w;     /* a node's: its GPUs, its overhead and its share of the network */
  double it_w;       /* the job's IT power: every node of the cluster (a partial node draws its whole overhead) */
  double facility_w; /* it_w x PUE: what the site draws for the job */
  double step_j;     /* the site's energy of one step: facility_w x the step time */
  double j_per_token; /* step_j over the tokens of a step */
} px_power;

/* Whether the cluster file gives the GPUs' power (gpu.power_w): without it
 * every figure is 0. */
bool px_power_known(const px_cluster *c);

/* A GPU's board power while it waits: gpu.idle_power_w, or gpu.power_w
 * where the file gives no idle figure. */
double px_power_wait_w(const px_cluster *c);

/* The figures of a step of step_s seconds whose GPUs compute for
 * compute_share of it (0 to 1; px_sim_result.compute_share) and train
 * tokens_per_step tokens. All 0 without gpu.power_w. The figures rise with
 * compute_share: at 0 they are a floor for any plan of that step time. */
void px_power_of(const px_cluster *c, double compute_share, double step_s, double tokens_per_step, px_power *out);

/* A training run of wall_s seconds at p's draw: the site's energy in MWh
 * (lost work, checkpoint stalls and restarts taken at the step's draw) and
 * its cost at price_per_kwh USD a kWh (0 without a price). */
void px_power_run(const px_power *p, double wall_s, double price_per_kwh, double *mwh, double *cost_usd);

#endif
