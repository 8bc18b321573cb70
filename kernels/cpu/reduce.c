/* Sum of squares, scale, add and accumulate over contiguous buffers. */
#include "kernels/cpu/reduce.h"

double px_k_sumsq(const float *x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

void px_k_scale(float *x, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void px_k_add(float *out, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void px_k_acc(float *out, const float *inp, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] += inp[i];
}
