/* The straggler model. A GPU's speed differs from its siblings' of the same
 * SKU by a static, per-GPU amount (manufacturing and power management: the
 * same GPU is slow run after run; Sinha et al., SC'22, tests/data/gpu_variability.md).
 * Synchronous training waits for the slowest participant at every
 * synchronisation: the TP group every layer, pipeline neighbours every
 * micro-batch, and every rank at the gradient reduction and the optimizer
 * step. Pipelining and the reduction couple all ranks, so with a static
 * spread the slowest GPU of the whole job sets the pace of every step (a
 * static straggler does not average out over micro-batches or steps, as
 * step-to-step noise would). Its expected slowness is that of the largest of
 * N draws: jitter x E[max of N standard normals], N the job's ranks. The
 * simulator stretches every GPU's compute by it: an upper bound, by the
 * pipeline's fill and drain, which only the slowest GPU's own stage pays
 * at the full stretch. */
#include "sim/straggler.h"

#include <math.h>

double px_straggler_normal_quantile(double p) {
  /* P. J. Acklam, "An algorithm for computing the inverse normal cumulative
   * distribution function" (2003): rational approximations in the centre and
   * the tails, relative error below 1.15e-9. */
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  if (!(p > 0)) return -INFINITY;
  if (!(p < 1)) return INFINITY;
  if (p < lo || p > 1 - lo) {
    double q = sqrt(-2 * log(p < lo ? p : 1 - p));
    double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    return p < lo ? x : -x;
  }
  double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double px_straggler_expected_max(int64_t n) {
  /* G. Blom, "Statistical Estimates and Transformed Beta-Variables" (1958):
   * E[X(n:n)] ~ Phi^-1((n - 0.375) / (n + 0.25)); 4.5% above the exact mean
   * at n = 2 (1/sqrt(pi)), within 1% of Harter's (1961) table from n = 10
   * (tests/test_sim.c). */
  if (n <= 1) return 0.0;
  return px_straggler_normal_quantile(((double)n - 0.375) / ((double)n + 0.25));
}

double px_straggler_stretch(double jitter, int64_t n) {
  return jitter > 0 ? 1.0 + jitter * px_straggler_expected_max(n) : 1.0;
}

double px_straggler_plan_stretch(const px_plan *plan) {
  return px_straggler_stretch(plan->cluster.gpu.jitter, plan->grid.world);
}
