/* Matrix multiply (OpenBLAS cblas, fp32, row-major) and the linear layer built
 * on it: out = inp W^T + b, and its backward. */
#ifndef PX_KERNELS_CPU_GEMM_H
#define PX_KERNELS_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* C = alpha op(A) op(B) + beta C, all row-major and contiguous, where op(X) is X
 * or X^T. op(A) is (m, k) and op(B) is (k, n), so A is stored (m, k), or (k, m)
 * when trans_a; B is stored (k, n), or (n, k) when trans_b. beta = 0 never reads
 * C (NaNs in it are overwritten). m, n, k must each fit in an int (cblas). */
void px_k_gemm(float *c,       // (m, n)
               const float *a, // (m, k) or (k, m) when trans_a
               const float *b, // (k, n) or (n, k) when trans_b
               int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta);

/* Forward of a linear layer: out = inp weight^T + bias. Writes out (does not
 * accumulate). bias may be NULL. */
void px_k_linear_fwd(float *out,          // (N, OC)
                     const float *inp,    // (N, IC)
                     const float *weight, // (OC, IC)
                     const float *bias,   // (OC) or NULL
                     int64_t n, int64_t ic, int64_t oc);

/* Backward of px_k_linear_fwd. ACCUMULATES: dinp += dout weight,
 * dweight += dout^T inp, dbias += column sums of dout; the caller zeroes them
 * first. Each of dinp, dweight, dbias may be NULL to skip it. */
void px_k_linear_bwd(float *dinp,         // (N, IC) or NULL
                     float *dweight,      // (OC, IC) or NULL
                     float *dbias,        // (OC) or NULL
                     const float *dout,   // (N, OC)
                     const float *inp,    // (N, IC)
                     const float *weight, // (OC, IC)
                     int64_t n, int64_t ic, int64_t oc);

#endif
