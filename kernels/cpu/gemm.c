/* Matrix multiply through OpenBLAS cblas and the linear layer on top of it. */
#include "kernels/cpu/gemm.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <string.h>

/* cblas sizes are ints: the backends refuse larger ops up front (supports_op). */
static int as_blas(int64_t x) {
  assert(x >= 0 && x <= INT_MAX);
  return (int)x;
}

static int ld(int64_t x) { return x > 0 ? as_blas(x) : 1; }

void px_k_gemm(float *c, const float *a, const float *b, int64_t m, int64_t n, int64_t k, bool trans_a,
               bool trans_b, float alpha, float beta) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) { /* op(A) op(B) is the zero matrix: C = beta C, without reading C when beta = 0 */
    if (beta == 0.0f) {
      memset(c, 0, (size_t)m * (size_t)n * sizeof *c);
    } else {
      for (int64_t i = 0; i < m * n; i++) c[i] *= beta;
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              as_blas(m), as_blas(n), as_blas(k), alpha, a, ld(trans_a ? m : k), b, ld(trans_b ? k : n), beta,
              c, ld(n));
}

void px_k_linear_fwd(float *out, const float *inp, const float *weight, const float *bias, int64_t n, int64_t ic,
                     int64_t oc) {
  if (bias) {
    for (int64_t i = 0; i < n; i++) memcpy(out + i * oc, bias, (size_t)oc * sizeof *out);
  }
  px_k_gemm(out, inp, weight, n, oc, ic, false, true, 1.0f, bias ? 1.0f : 0.0f);
}

/* Column sums in blocks of columns, accumulated in double, rows in order. */
#define PX_COLSUM_BLOCK 64
static void colsum_acc(float *dbias, const float *dout, int64_t n, int64_t oc) {
  double acc[PX_COLSUM_BLOCK];
  for (int64_t o0 = 0; o0 < oc; o0 += PX_COLSUM_BLOCK) {
    int64_t w = oc - o0 < PX_COLSUM_BLOCK ? oc - o0 : PX_COLSUM_BLOCK;
    for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
    for (int64_t i = 0; i < n; i++) {
      const float *row = dout + i * oc + o0;
      for (int64_t j = 0; j < w; j++) acc[j] += row[j];
    }
    for (int64_t j = 0; j < w; j++) dbias[o0 + j] += (float)acc[j];
  }
}

void px_k_linear_bwd(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int64_t n, int64_t ic, int64_t oc) {
  if (dinp) px_k_gemm(dinp, dout, weight, n, ic, oc, false, false, 1.0f, 1.0f);
  if (dweight) px_k_gemm(dweight, dout, inp, oc, ic, n, true, false, 1.0f, 1.0f);
  if (dbias) colsum_acc(dbias, dout, n, oc);
}
