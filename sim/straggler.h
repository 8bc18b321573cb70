/* The straggler model: synchronous training runs at the pace of its slowest
 * GPU. From a per-GPU performance spread (the cluster's gpu.jitter) and the
 * ranks that synchronise, the expected slowest GPU's compute stretch, as an
 * order statistic (no sampling: flat in the GPU count). */
#ifndef PX_SIM_STRAGGLER_H
#define PX_SIM_STRAGGLER_H

#include <stdint.h>

#include "plan/plan.h"

/* The standard normal quantile Phi^-1(p), 0 < p < 1 (Acklam's rational
 * approximation, relative error below 1.2e-9). */
double px_straggler_normal_quantile(double p);

/* The expected largest of n standard normal draws, by Blom's approximation
 * Phi^-1((n - 0.375) / (n + 0.25)) (0 for n <= 1). */
double px_straggler_expected_max(int64_t n);

/* Compute time of a step over its time on median GPUs: 1 + jitter x the
 * expected largest of n standard normals, n the ranks that synchronise. */
double px_straggler_stretch(double jitter, int64_t n);

/* The plan's: every rank of the job synchronises every step (see straggler.c). */
double px_straggler_plan_stretch(const px_plan *plan);

#endif
