/* LayerNorm and RMSNorm, forward and backward (llm.c's formulation). */
#include "kernels/cpu/norm.h"

#include <math.h>

void px_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                        const float *bias, int64_t n, int64_t c, float eps) {
  for (int64_t i = 0; i < n; i++) {
    const float *x = inp + i * c;
    float *o = out + i * c;
    double s = 0.0;
    for (int64_t j = 0; j < c; j++) s += x[j];
    double m = s / (double)c;
    double v = 0.0;
    for (int64_t j = 0; j < c; j++) v += ((double)x[j] - m) * ((double)x[j] - m);
    v /= (double)c;
    float mf = (float)m;
    float r = (float)(1.0 / sqrt(v + (double)eps));
    for (int64_t j = 0; j < c; j++) {
      float y = (x[j] - mf) * r * weight[j];
      o[j] = bias ? y + bias[j] : y;
    }
    if (mean) mean[i] = mf;
    if (rstd) rstd[i] = r;
  }
}

void px_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; i++) {
    const float *x = inp + i * c;
    const float *g = dout + i * c;
    float *dx = dinp + i * c;
    float m = mean[i], r = rstd[i];
    /* the two row means of the backward: mean(dnorm) and mean(dnorm * xhat) */
    double sd = 0.0, sdx = 0.0;
    for (int64_t j = 0; j < c; j++) {
      float xhat = (x[j] - m) * r;
      float dnorm = weight[j] * g[j];
      sd += dnorm;
      sdx += (double)dnorm * xhat;
    }
    float md = (float)(sd / (double)c), mdx = (float)(sdx / (double)c);
    for (int64_t j = 0; j < c; j++) {
      float xhat = (x[j] - m) * r;
      float dnorm = weight[j] * g[j];
      dx[j] += r * (dnorm - md - xhat * mdx);
      if (dweight) dweight[j] += g[j] * xhat;
      if (dbias) dbias[j] += g[j];
    }
  }
}

void px_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int64_t n, int64_t c,
                      float eps) {
  for (int64_t i = 0; i < n; i++) {
    const float *x = inp + i * c;
    float *o = out + i * c;
    double ss = 0.0;
    for (int64_t j = 0; j < c; j++) ss += (double)x[j] * x[j];
    float r = (float)(1.0 / sqrt(ss / (double)c + (double)eps));
    for (int64_t j = 0; j < c; j++) o[j] = x[j] * r * weight[j];
    if (rstd) rstd[i] = r;
  }
}

void px_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; i++) {
    const float *x = inp + i * c;
    const float *g = dout + i * c;
    float *dx = dinp + i * c;
    float r = rstd[i];
    double sdx = 0.0; /* sum of dnorm * xhat */
    for (int64_t j = 0; j < c; j++) sdx += (double)(weight[j] * g[j]) * (x[j] * r);
    float mdx = (float)(sdx / (double)c);
    for (int64_t j = 0; j < c; j++) {
      float xhat = x[j] * r;
      dx[j] += r * (weight[j] * g[j] - xhat * mdx);
      if (dweight) dweight[j] += g[j] * xhat;
    }
  }
}
