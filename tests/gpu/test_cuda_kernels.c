/* Every CUDA kernel against its CPU twin (kernels/cpu) on the same random
 * inputs, fp32 and bf16. Needs a CUDA device: without one it prints
 * "SKIPPED: no CUDA device" and exits 77, which ctest reports as skipped. */

/* Tolerances, as |gpu - cpu| <= rtol |cpu| + atol with inputs of order 1:
 * - EXACT: where both sides perform the same IEEE operations in the same
 *   order (copies, masks, one add or multiply per element, the embedding and
 *   position backwards, which keep the CPU's order of additions): bitwise.
 *   Not where the GPU side has a * b + c, which nvcc contracts into one fma
 *   (C11 compilers do not contract by default).
 * - ELEM (rel 1e-5, abs 1e-6): elementwise math. The CUDA libm functions
 *   (expf, tanhf, cos, ...) are within 1-2 ulp of glibc's and nvcc contracts
 *   a * b + c into one fma, so results differ by a few ulp (~1e-7 relative);
 *   the absolute part covers results that cancel to ~0 (x1 cos - x2 sin).
 * - RED (rel 1e-4, abs 1e-5): anything with a reduction (norms, softmax,
 *   attention products, GEMM, column sums, sum of exponentials). The GPU sums
 *   in another order (lanes, tiles, tree) and in fp32 where the CPU's norms and
 *   softmax use double; the error of a K-term fp32 sum is up to
 *   ~K 2^-24 sum|terms|, ~1.5e-5 relative at K = 256, the longest sum here.
 *   A wrong index or a missing term is off by ~1e-1.
 * - BF16 (rel 1e-2, abs 1e-4): bf16 storage keeps 8 significant bits, so each
 *   stored result is within 2^-9 ~ 2e-3 relative of its fp32 value; the CPU
 *   twin runs on the same bf16-rounded inputs, leaving the output rounding
 *   (twice for read-modify-write gradients) plus fp32 noise.
 * - TC (rel 2e-2, abs 5e-3 per element; relative L2 1e-2 per tensor): the
 *   tensor-core flash attention rounds the probabilities and dS to the 16-bit
 *   type for its second products (as FlashAttention-2 does), an error of up to
 *   2^-9 sum |P dO| per element (~5e-3 at these sizes), which averages to
 *   2-5e-3 (bf16) and 2-6e-4 (fp16) in L2; a wrong tile is off by > 1e-1. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "kernels/cpu/act.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embed.h"
#include "kernels/cpu/flash.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embed.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/flash.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/nf4.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/rope.h"
#include "tests/testutil.h"

#define ELEM_RTOL 1e-5
#define ELEM_ATOL 1e-6
#define RED_RTOL 1e-4
#define RED_ATOL 1e-5
#define BF16_RTOL 1e-2
#define BF16_ATOL 1e-4
#define TC_RTOL 2e-2
#define TC_ATOL 5e-3
#define TC_L2 1e-2
/* Gradients start here, not at 0, so every backward also checks that it accumulates. */
#define ACC0 0.25f

static cudaStream_t stream;

/* ---- device allocations; arena_free() after each test frees them and the host ones (tests/testutil.h) ---- */

static void *darena[512];
static int ndarena;

static void *dalloc(size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess || ndarena == (int)(sizeof darena / sizeof darena[0])) {
    fprintf(stderr, "cudaMalloc(%zu): %s\n", bytes, cudaGetErrorString(e));
    abort();
  }
  darena[ndarena++] = p;
  return p;
}

static void arena_free(void) {
  px_tfree();
  while (ndarena > 0) cudaFree(darena[--ndarena]);
}

/* ---- bf16 on the host: round to nearest even, as __float2bfloat16_rn ---- */

static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* x rounded to bf16 in place, so the CPU twin sees exactly the GPU's inputs. */
static float *bf16_round(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = bf16_value(bf16_bits(x[i]));
  return x;
}

/* ---- copies ---- */

static void check_cuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "\n  %s: %s\n", what, cudaGetErrorString(e));
    CU_FAIL_FATAL("CUDA runtime call failed");
  }
}

/* Copies on the test's stream and waits: kernels on that (non-blocking) stream
 * are ordered after the copy, and the host sees their results. */
static void copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

static void *dev_copy(const void *h, size_t bytes) {
  void *d = dalloc(bytes);
  copy(d, h, bytes, cudaMemcpyHostToDevice);
  return d;
}

static float *dev_f(const float *h, int64_t n) { return dev_copy(h, (size_t)n * sizeof *h); }
static int32_t *dev_i(const int32_t *h, int64_t n) { return dev_copy(h, (size_t)n * sizeof *h); }

static px_bf16 *dev_bf(const float *h, int64_t n) {
  px_bf16 *tmp = px_talloc((size_t)n * sizeof *tmp);
  for (int64_t i = 0; i < n; i++) tmp[i].x = bf16_bits(h[i]);
  return dev_copy(tmp, (size_t)n * sizeof *tmp);
}

static float *host_f(const float *d, int64_t n) {
  float *h = px_tfloats(n);
  copy(h, d, (size_t)n * sizeof *h, cudaMemcpyDeviceToHost);
  return h;
}

static float *host_bf(const px_bf16 *d, int64_t n) {
  px_bf16 *tmp = px_talloc((size_t)n * sizeof *tmp);
  copy(tmp, d, (size_t)n * sizeof *tmp, cudaMemcpyDeviceToHost);
  float *h = px_tfloats(n);
  for (int64_t i = 0; i < n; i++) h[i] = bf16_value(tmp[i].x);
  return h;
}

static uint8_t *host_u8(const uint8_t *d, int64_t n) {
  uint8_t *h = px_talloc((size_t)n);
  copy(h, d, (size_t)n, cudaMemcpyDeviceToHost);
  return h;
}

/* A launcher's status; on failure prints px_kc_last_error(). */
#define LAUNCH(call)                                                                           \
  do {                                                                                         \
    px_status pxs_ = (call);                                                                   \
    if (pxs_ != PX_OK) fprintf(stderr, "\n  %s:%d: %s\n", __FILE__, __LINE__, px_kc_last_error()); \
    CU_ASSERT_EQUAL_FATAL(pxs_, PX_OK);                                                        \
  } while (0)

/* ---- comparisons ---- */

/* |got - want| <= rtol |want| + atol everywhere (NaN fails); prints the first misses. */
/* |got - want| <= rtol |want| + atol + mag_tol mag[i] elementwise (mag: NULL, or a
 * per-element scale of an error the GPU may add, as below). */
static bool close_mag(const char *what, const float *got, const float *want, int64_t n, double rtol, double atol,
                      const float *mag, double mag_tol) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - (double)want[i]);
    if (!(err <= rtol * fabs((double)want[i]) + atol + (mag ? mag_tol * fabs((double)mag[i]) : 0.0))) {
      if (bad < 4) fprintf(stderr, "\n  %s[%lld] = %.9g, cpu %.9g (err %.3g)", what, (long long)i, got[i], want[i], err);
      bad++;
    }
  }
  if (bad) fprintf(stderr, "\n  %s: %lld of %lld elements out of tolerance\n", what, (long long)bad, (long long)n);
  return bad == 0;
}

static bool close_to(const char *what, const float *got, const float *want, int64_t n, double rtol, double atol) {
  return close_mag(what, got, want, n, rtol, atol, NULL, 0.0);
}

static bool elem_close(const char *what, const float *got, const float *want, int64_t n) {
  return close_to(what, got, want, n, ELEM_RTOL, ELEM_ATOL);
}

static bool red_close(const char *what, const float *got, const float *want, int64_t n) {
  return close_to(what, got, want, n, RED_RTOL, RED_ATOL);
}

static bool bf16_close(const char *what, const float *got, const float *want, int64_t n) {
  return close_to(what, got, want, n, BF16_RTOL, BF16_ATOL);
}

/* A real GPU's fp8 GEMM: Hopper's tensor cores keep about 14 bits of the running sum (DeepSeek-V3
 * technical report, arXiv:2412.19437, section 3.3.2), so beyond (rtol, atol) an element may be off
 * by the probabilistic bound of k additions at that precision, sqrt(k) 2^-14 sum_p |a_ip b_jp|
 * (mag); the H200 (bench/gpu/h200-2026-11-28) was off by up to 4e-4 relative at k = 64. */
static bool fp8_close(const char *what, const float *got, const float *want, const float *mag, int64_t n, int64_t k,
                      double rtol, double atol) {
  return close_mag(what, got, want, n, rtol, atol, mag, sqrt((double)k) * ldexp(1.0, -14));
}

/* cuBLASLt's fp32 DGELU epilogue on a real GPU (H200, cuBLASLt 13.1, bench/gpu/h200-2026-11-28)
 * differs from the exact derivative by up to ~3e-5 where |dy W| ~ 1: an error of the size of the
 * fast approximate tanh's (PTX ISA, tanh.approx.f32: maximum relative error 2^-10.987), which
 * moves gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) z'(x) by at most ~1e-3 for the |x| < 4 here.
 * So each element may be off by 1e-3 |dy W| beyond the reduction's tolerance. */
#define DGELU_APPROX_TOL 1e-3
static bool dgelu_close(const char *what, const float *got, const float *want, const float *prod, int64_t n) {
  return close_mag(what, got, want, n, RED_RTOL, RED_ATOL, prod, DGELU_APPROX_TOL);
}

/* Relative L2 error ||got - want|| / ||want|| within tol (a wrong tile shows as ~1e-1). */
static bool l2_close(const char *what, const float *got, const float *want, int64_t n, double tol) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    den += (double)want[i] * want[i];
  }
  double rel = sqrt(num / (den > 0 ? den : 1.0));
  if (getenv("PX_TEST_VERBOSE") || !(rel <= tol)) fprintf(stderr, "\n  %s: relative L2 error %.3g (tolerance %.3g)", what, rel, tol);
  return rel <= tol;
}

static bool same_bits(const char *what, const void *got, const void *want, size_t bytes) {
  if (memcmp(got, want, bytes) == 0) return true;
  fprintf(stderr, "\n  %s: not bitwise equal to the CPU\n", what);
  return false;
}

/* ======================= conversions ======================= */

static void test_convert(void) {
  px_tseed(1);
  const int64_t n = 1000;
  float *x = px_trand(n, -100, 100);
  x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY, x[3] = 1.0f + 1.0f / 256.0f; /* a tie: rounds to even */
  px_bf16 *db = dalloc((size_t)n * sizeof *db);
  float *dx = dev_f(x, n), *dy = dalloc((size_t)n * sizeof(float));
  LAUNCH(px_kc_to_bf16(db, dx, n, stream));
  LAUNCH(px_kc_to_fp32(dy, db, n, stream));
  float *got = host_f(dy, n), *want = bf16_round(px_tcopy(x, n), n);
  CU_ASSERT(same_bits("to_bf16 then to_fp32", got, want, (size_t)n * sizeof *got));
  arena_free();
}

/* ======================= GEMM and linear ======================= */

static cublasLtHandle_t lt;
static void *workspace;
#define WORKSPACE_BYTES ((size_t)32 << 20)

/* Host buffers through the device in any dtype: x rounded to dt in place (the
 * CPU twin sees the GPU's inputs), its device copy, and a device buffer back.
 * With dev_shift = 1 the device copy starts one element past an aligned
 * address (a slice). */
static int dev_shift;
static void *dev_dt(float *x, int64_t n, px_dtype dt) {
  size_t el = px_dtype_bytes(dt);
  char *tmp = px_talloc((size_t)(n + dev_shift) * el);
  px_dtype_from_fp32(tmp + dev_shift * el, dt, x, (uint64_t)n);
  px_dtype_to_fp32(x, tmp + dev_shift * el, dt, (uint64_t)n);
  return (char *)dev_copy(tmp, (size_t)(n + dev_shift) * el) + dev_shift * el;
}

static float *host_dt(const void *d, int64_t n, px_dtype dt) {
  size_t el = px_dtype_bytes(dt);
  void *tmp = px_talloc((size_t)n * el);
  copy(tmp, d, (size_t)n * el, cudaMemcpyDeviceToHost);
  float *h = px_tfloats(n);
  px_dtype_to_fp32(h, tmp, dt, (uint64_t)n);
  return h;
}

static void test_gemm(void) {
  px_tseed(2);
  const int64_t m = 67, n = 45, k = 130;
  for (int combo = 0; combo < 4; combo++) {
    bool ta = combo & 1, tb = combo & 2;
    float *a = px_trand(m * k, -1, 1), *b = px_trand(k * n, -1, 1), *c = px_trand(m * n, -1, 1);
    float *dc = dev_f(c, m * n);
    LAUNCH(px_kc_gemm(lt, dc, dev_f(a, m * k), dev_f(b, k * n), m, n, k, ta, tb, 0.7f, 0.3f, PX_DTYPE_FP32,
                      workspace, WORKSPACE_BYTES, stream));
    px_k_gemm(c, a, b, m, n, k, ta, tb, 0.7f, 0.3f);
    char what[64];
    snprintf(what, sizeof what, "gemm fp32 trans_a=%d trans_b=%d", ta, tb);
    CU_ASSERT(red_close(what, host_f(dc, m * n), c, m * n));
  }
  /* beta = 0 does not read C (NaNs overwritten); unaligned operands (offset by one element) */
  float *a = px_trand(m * k + 1, -1, 1), *b = px_trand(k * n + 1, -1, 1), *c = px_tconst(m * n + 1, NAN);
  float *da = dev_f(a, m * k + 1), *db = dev_f(b, k * n + 1), *dc = dev_f(c, m * n + 1);
  LAUNCH(px_kc_gemm(lt, dc + 1, da + 1, db + 1, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, workspace,
                    WORKSPACE_BYTES, stream));
  px_k_gemm(c + 1, a + 1, b + 1, m, n, k, false, false, 1.0f, 0.0f);
  CU_ASSERT(red_close("gemm beta=0 over NaN, unaligned", host_f(dc, m * n + 1) + 1, c + 1, m * n));
  /* no workspace at all */
  LAUNCH(px_kc_gemm(lt, dc + 1, da + 1, db + 1, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, NULL, 0, stream));
  CU_ASSERT(red_close("gemm without workspace", host_f(dc, m * n + 1) + 1, c + 1, m * n));
  /* kept plans: the same shape again finds its plan and gives the same bits;
   * another alignment or a bias makes a new one; past 128 shapes the oldest
   * are replaced and products stay right */
  uint64_t h0, m0, h1, m1;
  float *dd = dev_f(c, m * n + 1);
  px_kc_gemm_plan_stats(&h0, &m0);
  LAUNCH(px_kc_gemm(lt, dd + 1, da + 1, db + 1, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, NULL, 0, stream));
  px_kc_gemm_plan_stats(&h1, &m1);
  PX_ASSERT_EQ_U64(h1 - h0, 1);
  PX_ASSERT_EQ_U64(m1 - m0, 0);
  CU_ASSERT(same_bits("gemm from a kept plan", host_f(dd, m * n + 1) + 1, host_f(dc, m * n + 1) + 1,
                      (size_t)(m * n) * sizeof(float)));
  LAUNCH(px_kc_gemm(lt, dd, da, db, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, NULL, 0, stream)); /* aligned */
  LAUNCH(px_kc_gemm_ex(lt, dd, da, db, db, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, PX_DTYPE_FP32, NULL, 0,
                       stream)); /* with a bias */
  px_kc_gemm_plan_stats(&h0, &m0);
  PX_ASSERT_EQ_U64(m0 - m1, 2);
  for (int64_t kk = 1; kk <= 130; kk++)
    LAUNCH(px_kc_gemm(lt, dd, da, db, 3, 5, kk, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, NULL, 0, stream));
  LAUNCH(px_kc_gemm(lt, dd + 1, da + 1, db + 1, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, NULL, 0, stream));
  CU_ASSERT(red_close("gemm after its plan was replaced", host_f(dd, m * n + 1) + 1, c + 1, m * n));
  /* k = 0: C = beta C */
  float *c0 = px_tconst(m * n, 2.0f), *dc0 = dev_f(c0, m * n);
  LAUNCH(px_kc_gemm(lt, dc0, da, db, m, n, 0, false, false, 1.0f, 0.5f, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES,
                    stream));
  px_k_gemm(c0, a, b, m, n, 0, false, false, 1.0f, 0.5f);
  CU_ASSERT(same_bits("gemm k=0", host_f(dc0, m * n), c0, (size_t)(m * n) * sizeof *c0));
  /* bias epilogue: C = A B^T + bias, as px_k_linear_fwd */
  float *x = px_trand(m * k, -1, 1), *w = px_trand(n * k, -1, 1), *bias = px_trand(n, -1, 1), *out = px_tfloats(m * n);
  float *dout = dalloc((size_t)(m * n) * sizeof(float));
  LAUNCH(px_kc_gemm_ex(lt, dout, dev_f(x, m * k), dev_f(w, n * k), dev_f(bias, n), m, n, k, false, true, 1.0f, 0.0f,
                       PX_DTYPE_FP32, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES, stream));
  px_k_linear_fwd(out, x, w, bias, m, k, n);
  CU_ASSERT(red_close("gemm bias epilogue", host_f(dout, m * n), out, m * n));
  /* bf16 A, B and C, fp32 accumulation; then bf16 A, B into fp32 C (accumulating) */
  for (int combo = 0; combo < 4; combo++) {
    bool ta = combo & 1, tb = combo & 2;
    float *ab = bf16_round(px_trand(m * k, -1, 1), m * k), *bb = bf16_round(px_trand(k * n, -1, 1), k * n);
    float *cb = bf16_round(px_trand(m * n, -1, 1), m * n);
    px_bf16 *dab = dev_bf(ab, m * k), *dbb = dev_bf(bb, k * n), *dcb = dev_bf(cb, m * n);
    float *cf = px_trand(m * n, -1, 1), *dcf = dev_f(cf, m * n);
    LAUNCH(px_kc_gemm(lt, dcb, dab, dbb, m, n, k, ta, tb, 1.0f, 0.5f, PX_DTYPE_BF16, workspace, WORKSPACE_BYTES,
                      stream));
    LAUNCH(px_kc_gemm_ex(lt, dcf, dab, dbb, NULL, m, n, k, ta, tb, 1.0f, 1.0f, PX_DTYPE_BF16, PX_DTYPE_FP32,
                         workspace, WORKSPACE_BYTES, stream));
    px_k_gemm(cb, ab, bb, m, n, k, ta, tb, 1.0f, 0.5f);
    px_k_gemm(cf, ab, bb, m, n, k, ta, tb, 1.0f, 1.0f);
    char what[64];
    snprintf(what, sizeof what, "gemm bf16 trans_a=%d trans_b=%d", ta, tb);
    CU_ASSERT(bf16_close(what, host_bf(dcb, m * n), cb, m * n));
    snprintf(what, sizeof what, "gemm bf16 -> fp32 C trans_a=%d trans_b=%d", ta, tb);
    CU_ASSERT(red_close(what, host_f(dcf, m * n), cf, m * n));
  }
  /* bad types are refused */
  CU_ASSERT_EQUAL(px_kc_gemm_ex(lt, dc, da, db, NULL, m, n, k, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, PX_DTYPE_BF16,
                                workspace, WORKSPACE_BYTES, stream),
                  PX_ERR_INPUT);
  arena_free();
}

/* GELU epilogues against the CPU's linear, gelu and dgelu: n = 48 runs them
 * in the GEMM, n = 50 (aux's leading dimension not a multiple of 8) after it,
 * and so does a library without them (the emulator's PX_EMU_LT_NO_GELU; a new
 * m, so no kept plan answers). */
static void test_gemm_gelu(void) {
  px_tseed(21);
  const int64_t k = 24;
  for (int bf = 0; bf < 2; bf++)
    for (int variant = 0; variant < 3; variant++)
      for (int with_bias = 0; with_bias < 2; with_bias++) {
        int64_t m = variant == 2 ? 29 : 37, n = variant == 1 ? 50 : 48;
        if (variant == 2) setenv("PX_EMU_LT_NO_GELU", "1", 1);
        px_dtype dt = bf ? PX_DTYPE_BF16 : PX_DTYPE_FP32;
        size_t el = bf ? 2 : 4;
        float *x = px_trand(m * k, -1, 1), *w = px_trand(n * k, -1, 1), *b = px_trand(n, -1, 1);
        if (bf) bf16_round(x, m * k), bf16_round(w, n * k), bf16_round(b, n);
        void *dx = bf ? (void *)dev_bf(x, m * k) : dev_f(x, m * k), *dw = bf ? (void *)dev_bf(w, n * k) : dev_f(w, n * k);
        void *db = with_bias ? (bf ? (void *)dev_bf(b, n) : dev_f(b, n)) : NULL;
        void *dact = dalloc((size_t)(m * n) * el), *dpre = dalloc((size_t)(m * n) * el);
        LAUNCH(px_kc_gemm_epi(lt, dact, dx, dw, db, dpre, PX_KC_EPI_GELU, m, n, k, false, true, 1.0f, 0.0f, dt, dt,
                              workspace, WORKSPACE_BYTES, stream));
        float *pre = px_tfloats(m * n), *act = px_tfloats(m * n);
        px_k_linear_fwd(pre, x, w, with_bias ? b : NULL, m, k, n);
        px_k_gelu_fwd(act, pre, m * n);
        float *got_pre = bf ? host_bf(dpre, m * n) : host_f(dpre, m * n);
        float *got_act = bf ? host_bf(dact, m * n) : host_f(dact, m * n);
        char what[96];
        snprintf(what, sizeof what, "gelu epilogue %s m=%lld n=%lld bias=%d: pre-activation", bf ? "bf16" : "fp32",
                 (long long)m, (long long)n, with_bias);
        CU_ASSERT(bf ? bf16_close(what, got_pre, pre, m * n) : red_close(what, got_pre, pre, m * n));
        snprintf(what, sizeof what, "gelu epilogue %s m=%lld n=%lld bias=%d: gelu", bf ? "bf16" : "fp32",
                 (long long)m, (long long)n, with_bias);
        /* bf16: gelu of the rounded pre-activation (a second kernel) or of the
         * fp32 one (in the GEMM) moves by up to gelu' x 2^-8 |pre|: an absolute bound */
        CU_ASSERT(bf ? close_to(what, got_act, act, m * n, BF16_RTOL, 2e-3) : red_close(what, got_act, act, m * n));
        /* the backward shape: (m, n) = dy (m, k) W (k, n), times gelu'(pre) */
        float *dy = px_trand(m * k, -1, 1), *wt = px_trand(k * n, -1, 1), *g = px_tfloats(m * n);
        if (bf) bf16_round(dy, m * k), bf16_round(wt, k * n), bf16_round(pre, m * n);
        void *ddy = bf ? (void *)dev_bf(dy, m * k) : dev_f(dy, m * k), *dwt = bf ? (void *)dev_bf(wt, k * n) : dev_f(wt, k * n);
        void *dp = bf ? (void *)dev_bf(pre, m * n) : dev_f(pre, m * n), *dg = dalloc((size_t)(m * n) * el);
        LAUNCH(px_kc_gemm_epi(lt, dg, ddy, dwt, NULL, dp, PX_KC_EPI_DGELU, m, n, k, false, false, 1.0f, 0.0f, dt, dt,
                              workspace, WORKSPACE_BYTES, stream));
        px_k_gemm(g, dy, wt, m, n, k, false, false, 1.0f, 0.0f);
        float *prod = px_tfloats(m * n); /* dy W before gelu' */
        memcpy(prod, g, (size_t)(m * n) * sizeof *g);
        px_k_dgelu_inplace(g, pre, m * n);
        snprintf(what, sizeof what, "dgelu epilogue %s m=%lld n=%lld", bf ? "bf16" : "fp32", (long long)m, (long long)n);
        float *got_g = bf ? host_bf(dg, m * n) : host_f(dg, m * n);
        CU_ASSERT(bf ? bf16_close(what, got_g, g, m * n) : dgelu_close(what, got_g, g, prod, m * n));
        /* beta != 0 with an epilogue is refused */
        CU_ASSERT_EQUAL(px_kc_gemm_epi(lt, dg, ddy, dwt, NULL, dp, PX_KC_EPI_DGELU, m, n, k, false, false, 1.0f, 1.0f,
                                       dt, dt, workspace, WORKSPACE_BYTES, stream),
                        PX_ERR_INPUT);
        unsetenv("PX_EMU_LT_NO_GELU");
      }
  arena_free();
}

static void test_linear(void) {
  px_tseed(3);
  const int64_t n = 33, ic = 70, oc = 50;
  float *x = px_trand(n * ic, -1, 1), *w = px_trand(oc * ic, -1, 1), *b = px_trand(oc, -1, 1);
  float *dx_ = dev_f(x, n * ic), *dw_ = dev_f(w, oc * ic), *db_ = dev_f(b, oc);
  float *out = px_tfloats(n * oc), *dout = dalloc((size_t)(n * oc) * sizeof(float));
  for (int with_bias = 0; with_bias < 2; with_bias++) {
    LAUNCH(px_kc_linear_fwd(lt, dout, dx_, dw_, with_bias ? db_ : NULL, n, ic, oc, PX_DTYPE_FP32, workspace,
                            WORKSPACE_BYTES, stream));
    px_k_linear_fwd(out, x, w, with_bias ? b : NULL, n, ic, oc);
    CU_ASSERT(red_close(with_bias ? "linear out" : "linear out, no bias", host_f(dout, n * oc), out, n * oc));
  }
  float *g = px_trand(n * oc, -1, 1);
  float *gx = px_tconst(n * ic, ACC0), *gw = px_tconst(oc * ic, ACC0), *gb = px_tconst(oc, ACC0);
  float *dgx = dev_f(gx, n * ic), *dgw = dev_f(gw, oc * ic), *dgb = dev_f(gb, oc), *dg = dev_f(g, n * oc);
  LAUNCH(px_kc_linear_bwd(lt, dgx, dgw, dgb, dg, dx_, dw_, n, ic, oc, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES,
                          stream));
  px_k_linear_bwd(gx, gw, gb, g, x, w, n, ic, oc);
  CU_ASSERT(red_close("linear dinp", host_f(dgx, n * ic), gx, n * ic));
  CU_ASSERT(red_close("linear dweight", host_f(dgw, oc * ic), gw, oc * ic));
  CU_ASSERT(red_close("linear dbias", host_f(dgb, oc), gb, oc));
  /* NULL gradients are skipped: dinp accumulates a second time, the others stay */
  LAUNCH(px_kc_linear_bwd(lt, dgx, NULL, NULL, dg, dx_, dw_, n, ic, oc, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES,
                          stream));
  px_k_linear_bwd(gx, NULL, NULL, g, x, w, n, ic, oc);
  CU_ASSERT(red_close("linear dinp, twice", host_f(dgx, n * ic), gx, n * ic));
  CU_ASSERT(red_close("linear dbias untouched", host_f(dgb, oc), gb, oc));
  arena_free();
}

/* ======================= embeddings ======================= */

static void test_embed(void) {
  px_tseed(4);
  const int64_t n = 600, v = 90, c = 300; /* > one token chunk, > one column block, > the row slices */
  int32_t *tokens = px_talloc((size_t)n * sizeof *tokens);
  for (int64_t i = 0; i < n; i++) tokens[i] = (int32_t)(px_tunit() * v);
  tokens[5] = -1, tokens[17] = -1, tokens[40] = 0, tokens[41] = (int32_t)(v - 1);
  for (int64_t i = 100; i < 140; i++) tokens[i] = 7; /* a repeated row: order of additions matters */
  int32_t *dtok = dev_i(tokens, n);
  float *table = px_trand(v * c, -1, 1), *g = px_trand(n * c, -1, 1), *dg = dev_f(g, n * c);
  for (int shards = 1; shards <= 3; shards++) {
    int64_t vl = v / shards;
    for (int s = 0; s < shards; s++) {
      const float *tab = table + s * vl * c;
      float *out = px_tconst(n * c, NAN), *dout = dev_f(out, n * c);
      LAUNCH(px_kc_embed_fwd(dout, dtok, dev_f(tab, vl * c), n, s * vl, vl, c, stream));
      px_k_embed_fwd(out, tokens, tab, n, s * vl, vl, c);
      CU_ASSERT(same_bits("embed out", host_f(dout, n * c), out, (size_t)(n * c) * sizeof *out));
      float *dtab = px_tconst(vl * c, ACC0), *ddtab = dev_f(dtab, vl * c);
      LAUNCH(px_kc_embed_bwd(ddtab, dg, dtok, n, s * vl, vl, c, stream));
      px_k_embed_bwd(dtab, g, tokens, n, s * vl, vl, c);
      CU_ASSERT(same_bits("embed dtable", host_f(ddtab, vl * c), dtab, (size_t)(vl * c) * sizeof *dtab));
    }
  }
  /* bf16 table: a copy */
  float *tb = bf16_round(px_tcopy(table, v * c), v * c), *out = px_tfloats(n * c);
  px_bf16 *dout = dalloc((size_t)(n * c) * sizeof *dout);
  LAUNCH(px_kc_embed_fwd_bf16(dout, dtok, dev_bf(tb, v * c), n, 0, v, c, stream));
  px_k_embed_fwd(out, tokens, tb, n, 0, v, c);
  CU_ASSERT(same_bits("embed out bf16", host_bf(dout, n * c), out, (size_t)(n * c) * sizeof *out));
  /* bf16 backward from the host-grouped positions, per shard: the fp32
   * kernel's result (the CPU's order of additions) rounded once, bitwise */
  float *gb = bf16_round(px_tcopy(g, n * c), n * c);
  px_bf16 *dgb = dev_bf(gb, n * c);
  int32_t *sorted = px_talloc((size_t)(3 * n + 1) * sizeof *sorted);
  for (int s = 0; s < 2; s++) {
    int64_t vl = v / 2, rows = px_kc_embed_sort(sorted, tokens, n, s * vl, vl);
    CU_ASSERT_FATAL(rows > 0 && rows <= vl);
    float *dtab = bf16_round(px_trand(vl * c, -1, 1), vl * c);
    px_bf16 *ddtab = dev_bf(dtab, vl * c);
    LAUNCH(px_kc_embed_bwd_sorted_bf16(ddtab, dgb, dev_i(sorted, 3 * n + 1), rows, n, c, stream));
    px_k_embed_bwd(dtab, gb, tokens, n, s * vl, vl, c);
    CU_ASSERT(same_bits("embed dtable bf16", host_bf(ddtab, vl * c), bf16_round(dtab, vl * c),
                        (size_t)(vl * c) * sizeof *dtab));
  }
  arena_free();
}

static void test_pos(void) {
  px_tseed(5);
  const int64_t b = 3, t = 20, c = 70, pos0 = 5, maxpos = 32, nx = b * t * c;
  float *wpe = px_trand(maxpos * c, -1, 1), *out = px_trand(nx, -1, 1), *dout = dev_f(out, nx);
  LAUNCH(px_kc_pos_fwd(dout, dev_f(wpe, maxpos * c), b, t, c, pos0, stream));
  px_k_pos_fwd(out, wpe, b, t, c, pos0);
  CU_ASSERT(same_bits("pos out", host_f(dout, nx), out, (size_t)nx * sizeof *out));
  float *g = px_trand(nx, -1, 1), *dwpe = px_tconst(maxpos * c, ACC0), *ddwpe = dev_f(dwpe, maxpos * c);
  LAUNCH(px_kc_pos_bwd(ddwpe, dev_f(g, nx), b, t, c, pos0, stream));
  px_k_pos_bwd(dwpe, g, b, t, c, pos0);
  CU_ASSERT(same_bits("pos dwpe", host_f(ddwpe, maxpos * c), dwpe, (size_t)(maxpos * c) * sizeof *dwpe));
  /* bf16 */
  float *wb = bf16_round(px_trand(maxpos * c, -1, 1), maxpos * c), *ob = bf16_round(px_trand(nx, -1, 1), nx);
  px_bf16 *dob = dev_bf(ob, nx);
  LAUNCH(px_kc_pos_fwd_bf16(dob, dev_bf(wb, maxpos * c), b, t, c, pos0, stream));
  px_k_pos_fwd(ob, wb, b, t, c, pos0);
  CU_ASSERT(bf16_close("pos out bf16", host_bf(dob, nx), ob, nx));
  /* bf16 backward: the fp32 sums rounded once, bitwise */
  float *gb = bf16_round(px_trand(nx, -1, 1), nx), *dwb = bf16_round(px_trand(maxpos * c, -1, 1), maxpos * c);
  px_bf16 *ddwb = dev_bf(dwb, maxpos * c);
  LAUNCH(px_kc_pos_bwd_bf16(ddwb, dev_bf(gb, nx), b, t, c, pos0, stream));
  px_k_pos_bwd(dwb, gb, b, t, c, pos0);
  CU_ASSERT(same_bits("pos dwpe bf16", host_bf(ddwb, maxpos * c), bf16_round(dwb, maxpos * c),
                      (size_t)(maxpos * c) * sizeof *dwb));
  arena_free();
}

/* ======================= normalization ======================= */

static void check_norm(bool rms, bool with_bias, int64_t n, int64_t c) {
  const int64_t nx = n * c;
  float *x = px_trand(nx, -2, 2), *w = px_trand(c, 0.5, 1.5), *b = px_trand(c, -0.5, 0.5);
  for (int64_t i = 0; i < nx; i += 7) x[i] += 3.0f; /* a mean away from 0 */
  float *dx = dev_f(x, nx), *dw = dev_f(w, c), *db = with_bias ? dev_f(b, c) : NULL;
  float *out = px_tfloats(nx), *mean = px_tfloats(n), *rstd = px_tfloats(n);
  float *dout = dalloc((size_t)nx * sizeof(float)), *dmean = dalloc((size_t)n * sizeof(float));
  float *drstd = dalloc((size_t)n * sizeof(float));
  const char *name = rms ? "rmsnorm" : "layernorm";
  char what[64];
  if (rms) {
    LAUNCH(px_kc_rmsnorm_fwd(dout, drstd, dx, dw, n, c, 1e-5f, stream));
    px_k_rmsnorm_fwd(out, rstd, x, w, n, c, 1e-5f);
  } else {
    LAUNCH(px_kc_layernorm_fwd(dout, dmean, drstd, dx, dw, db, n, c, 1e-5f, stream));
    px_k_layernorm_fwd(out, mean, rstd, x, w, with_bias ? b : NULL, n, c, 1e-5f);
    snprintf(what, sizeof what, "%s mean", name);
    CU_ASSERT(red_close(what, host_f(dmean, n), mean, n));
  }
  snprintf(what, sizeof what, "%s out", name);
  CU_ASSERT(red_close(what, host_f(dout, nx), out, nx));
  snprintf(what, sizeof what, "%s rstd", name);
  CU_ASSERT(red_close(what, host_f(drstd, n), rstd, n));
  /* NULL statistics are allowed */
  if (rms) {
    LAUNCH(px_kc_rmsnorm_fwd(dout, NULL, dx, dw, n, c, 1e-5f, stream));
  } else {
    LAUNCH(px_kc_layernorm_fwd(dout, NULL, NULL, dx, dw, db, n, c, 1e-5f, stream));
  }
  snprintf(what, sizeof what, "%s out, no statistics", name);
  CU_ASSERT(red_close(what, host_f(dout, nx), out, nx));

  /* backward from the CPU's statistics, so both sides see the same inputs */
  float *g = px_trand(nx, -1, 1), *dg = dev_f(g, nx);
  float *gx = px_tconst(nx, ACC0), *gw = px_tconst(c, ACC0), *gb = px_tconst(c, ACC0);
  float *dgx = dev_f(gx, nx), *dgw = dev_f(gw, c), *dgb = dev_f(gb, c);
  if (rms) {
    LAUNCH(px_kc_rmsnorm_bwd(dgx, dgw, dg, dx, dw, dev_f(rstd, n), n, c, stream));
    px_k_rmsnorm_bwd(gx, gw, g, x, w, rstd, n, c);
  } else {
    LAUNCH(px_kc_layernorm_bwd(dgx, dgw, with_bias ? dgb : NULL, dg, dx, dw, dev_f(mean, n), dev_f(rstd, n), n, c,
                               stream));
    px_k_layernorm_bwd(gx, gw, with_bias ? gb : NULL, g, x, w, mean, rstd, n, c);
  }
  snprintf(what, sizeof what, "%s dinp", name);
  CU_ASSERT(red_close(what, host_f(dgx, nx), gx, nx));
  snprintf(what, sizeof what, "%s dweight", name);
  CU_ASSERT(red_close(what, host_f(dgw, c), gw, c));
  snprintf(what, sizeof what, "%s dbias", name);
  CU_ASSERT(red_close(what, host_f(dgb, c), gb, c)); /* untouched (ACC0) when NULL */
  /* deterministic: the same call again gives the same bits */
  float *first = host_f(dgw, c), *dgw2 = dev_f(px_tconst(c, ACC0), c);
  if (rms) {
    LAUNCH(px_kc_rmsnorm_bwd(dgx, dgw2, dg, dx, dw, dev_f(rstd, n), n, c, stream));
  } else {
    LAUNCH(px_kc_layernorm_bwd(dgx, dgw2, NULL, dg, dx, dw, dev_f(mean, n), dev_f(rstd, n), n, c, stream));
  }
  snprintf(what, sizeof what, "%s dweight, run twice", name);
  CU_ASSERT(same_bits(what, host_f(dgw2, c), first, (size_t)c * sizeof *first));

  /* bf16 activations and weights, fp32 statistics and parameter gradients */
  float *xb = bf16_round(px_tcopy(x, nx), nx), *wb = bf16_round(px_tcopy(w, c), c), *bb = bf16_round(px_tcopy(b, c), c);
  px_bf16 *dxb = dev_bf(xb, nx), *dwb = dev_bf(wb, c), *dbb = with_bias ? dev_bf(bb, c) : NULL;
  px_bf16 *doutb = dalloc((size_t)nx * sizeof *doutb);
  if (rms) {
    LAUNCH(px_kc_rmsnorm_fwd_bf16(doutb, drstd, dxb, dwb, n, c, 1e-5f, stream));
    px_k_rmsnorm_fwd(out, rstd, xb, wb, n, c, 1e-5f);
  } else {
    LAUNCH(px_kc_layernorm_fwd_bf16(doutb, dmean, drstd, dxb, dwb, dbb, n, c, 1e-5f, stream));
    px_k_layernorm_fwd(out, mean, rstd, xb, wb, with_bias ? bb : NULL, n, c, 1e-5f);
    snprintf(what, sizeof what, "%s mean bf16", name);
    CU_ASSERT(red_close(what, host_f(dmean, n), mean, n));
  }
  snprintf(what, sizeof what, "%s out bf16", name);
  CU_ASSERT(bf16_close(what, host_bf(doutb, nx), out, nx));
  snprintf(what, sizeof what, "%s rstd bf16", name);
  CU_ASSERT(red_close(what, host_f(drstd, n), rstd, n));
  float *gbf = bf16_round(px_tcopy(g, nx), nx);
  float *gxb = px_tconst(nx, ACC0), *gwb = px_tconst(c, ACC0), *gbb = px_tconst(c, ACC0);
  px_bf16 *dgxb = dev_bf(gxb, nx);
  float *dgwb = dev_f(gwb, c), *dgbb = dev_f(gbb, c);
  if (rms) {
    LAUNCH(px_kc_rmsnorm_bwd_bf16(dgxb, dgwb, dev_bf(gbf, nx), dxb, dwb, dev_f(rstd, n), n, c, stream));
    px_k_rmsnorm_bwd(gxb, gwb, gbf, xb, wb, rstd, n, c);
  } else {
    LAUNCH(px_kc_layernorm_bwd_bf16(dgxb, dgwb, with_bias ? dgbb : NULL, dev_bf(gbf, nx), dxb, dwb, dev_f(mean, n),
                                    dev_f(rstd, n), n, c, stream));
    px_k_layernorm_bwd(gxb, gwb, with_bias ? gbb : NULL, gbf, xb, wb, mean, rstd, n, c);
  }
  snprintf(what, sizeof what, "%s dinp bf16", name);
  CU_ASSERT(bf16_close(what, host_bf(dgxb, nx), gxb, nx));
  snprintf(what, sizeof what, "%s dweight (fp32) from bf16", name);
  CU_ASSERT(red_close(what, host_f(dgwb, c), gwb, c));
  snprintf(what, sizeof what, "%s dbias (fp32) from bf16", name);
  CU_ASSERT(red_close(what, host_f(dgbb, c), gbb, c));
}

static void test_layernorm(void) {
  px_tseed(6);
  check_norm(false, true, 37, 300);
  check_norm(false, false, 5, 20); /* C < 32: idle lanes */
  check_norm(false, true, 1000, 70); /* the weight and bias sums in 4 chunks of rows, the last partial */
  arena_free();
}

static void test_rmsnorm(void) {
  px_tseed(7);
  check_norm(true, false, 37, 300);
  check_norm(true, false, 5, 20);
  check_norm(true, false, 600, 40);
  check_norm(true, false, 2 * 32 * 4, 16); /* Qwen3's per-head q/k norms: rows of tokens x heads, width head_dim */
  arena_free();
}

/* ======================= activations ======================= */

static void test_gelu(void) {
  px_tseed(8);
  const int64_t n = 5000;
  float *x = px_trand(n, -6, 6), *out = px_tfloats(n), *dx = dev_f(x, n), *dout = dalloc((size_t)n * sizeof(float));
  LAUNCH(px_kc_gelu_fwd(dout, dx, n, stream));
  px_k_gelu_fwd(out, x, n);
  CU_ASSERT(elem_close("gelu out", host_f(dout, n), out, n));
  float *g = px_trand(n, -1, 1), *gx = px_tconst(n, ACC0), *dgx = dev_f(gx, n);
  LAUNCH(px_kc_gelu_bwd(dgx, dev_f(g, n), dx, n, stream));
  px_k_gelu_bwd(gx, g, x, n);
  CU_ASSERT(elem_close("gelu dinp", host_f(dgx, n), gx, n));
  /* in place */
  LAUNCH(px_kc_gelu_fwd(dx, dx, n, stream));
  CU_ASSERT(elem_close("gelu out, in place", host_f(dx, n), out, n));
  /* bf16 */
  float *xb = bf16_round(px_trand(n, -6, 6), n), *gb = bf16_round(px_trand(n, -1, 1), n);
  px_bf16 *dxb = dev_bf(xb, n), *doutb = dalloc((size_t)n * sizeof *doutb);
  LAUNCH(px_kc_gelu_fwd_bf16(doutb, dxb, n, stream));
  px_k_gelu_fwd(out, xb, n);
  CU_ASSERT(bf16_close("gelu out bf16", host_bf(doutb, n), out, n));
  float *gxb = px_tconst(n, ACC0);
  px_bf16 *dgxb = dev_bf(gxb, n);
  LAUNCH(px_kc_gelu_bwd_bf16(dgxb, dev_bf(gb, n), dxb, n, stream));
  px_k_gelu_bwd(gxb, gb, xb, n);
  CU_ASSERT(bf16_close("gelu dinp bf16", host_bf(dgxb, n), gxb, n));
  arena_free();
}

static void test_swiglu(void) {
  px_tseed(9);
  const int64_t n = 5000;
  float *gate = px_trand(n, -8, 8), *up = px_trand(n, -2, 2), *out = px_tfloats(n);
  float *dgate = dev_f(gate, n), *dup = dev_f(up, n), *dout = dalloc((size_t)n * sizeof(float));
  LAUNCH(px_kc_swiglu_fwd(dout, dgate, dup, n, stream));
  px_k_swiglu_fwd(out, gate, up, n);
  CU_ASSERT(elem_close("swiglu out", host_f(dout, n), out, n));
  float *g = px_trand(n, -1, 1), *gg = px_tconst(n, ACC0), *gu = px_tconst(n, ACC0);
  float *dgg = dev_f(gg, n), *dgu = dev_f(gu, n);
  LAUNCH(px_kc_swiglu_bwd(dgg, dgu, dev_f(g, n), dgate, dup, n, stream));
  px_k_swiglu_bwd(gg, gu, g, gate, up, n);
  CU_ASSERT(elem_close("swiglu dgate", host_f(dgg, n), gg, n));
  CU_ASSERT(elem_close("swiglu dup", host_f(dgu, n), gu, n));
  /* bf16 */
  bf16_round(gate, n);
  bf16_round(up, n);
  bf16_round(g, n);
  px_bf16 *dgateb = dev_bf(gate, n), *dupb = dev_bf(up, n), *doutb = dalloc((size_t)n * sizeof *doutb);
  LAUNCH(px_kc_swiglu_fwd_bf16(doutb, dgateb, dupb, n, stream));
  px_k_swiglu_fwd(out, gate, up, n);
  CU_ASSERT(bf16_close("swiglu out bf16", host_bf(doutb, n), out, n));
  float *ggb = px_tconst(n, ACC0), *gub = px_tconst(n, ACC0);
  px_bf16 *dggb = dev_bf(ggb, n), *dgub = dev_bf(gub, n);
  LAUNCH(px_kc_swiglu_bwd_bf16(dggb, dgub, dev_bf(g, n), dgateb, dupb, n, stream));
  px_k_swiglu_bwd(ggb, gub, g, gate, up, n);
  CU_ASSERT(bf16_close("swiglu dgate bf16", host_bf(dggb, n), ggb, n));
  CU_ASSERT(bf16_close("swiglu dup bf16", host_bf(dgub, n), gub, n));
  arena_free();
}

/* ======================= RoPE ======================= */

static void test_rope(void) {
  px_tseed(10);
  const int64_t b = 2, t = 40, h = 3, d = 64, pos0 = 4000, nx = b * t * h * d; /* large angles */
  /* gpt-oss's YaRN frequencies and concentration (the CPU kernel's own test checks them against its reference) */
  const px_rope *rope = &(px_rope){.theta = 150000.0, .concentration = 0.1 * log(32.0) + 1.0, .yarn_factor = 32.0,
                                    .yarn_positions = 4096.0, .yarn_beta_fast = 32.0, .yarn_beta_slow = 1.0};
  float *x = px_trand(nx, -1, 1), *out = px_tfloats(nx), *dx = dev_f(x, nx), *dout = dalloc((size_t)nx * sizeof(float));
  LAUNCH(px_kc_rope_fwd(dout, dx, b, t, h, d, pos0, rope, stream));
  px_k_rope_fwd(out, x, b, t, h, d, pos0, rope);
  CU_ASSERT(elem_close("rope out", host_f(dout, nx), out, nx));
  float *g = px_trand(nx, -1, 1), *gx = px_tconst(nx, ACC0), *dgx = dev_f(gx, nx);
  LAUNCH(px_kc_rope_bwd(dgx, dev_f(g, nx), b, t, h, d, pos0, rope, stream));
  px_k_rope_bwd(gx, g, b, t, h, d, pos0, rope);
  CU_ASSERT(elem_close("rope dinp", host_f(dgx, nx), gx, nx));
  LAUNCH(px_kc_rope_fwd(dx, dx, b, t, h, d, pos0, rope, stream));
  CU_ASSERT(elem_close("rope out, in place", host_f(dx, nx), out, nx));
  /* bf16 */
  float *xb = bf16_round(px_trand(nx, -1, 1), nx), *gb = bf16_round(px_trand(nx, -1, 1), nx);
  px_bf16 *dxb = dev_bf(xb, nx), *doutb = dalloc((size_t)nx * sizeof *doutb);
  LAUNCH(px_kc_rope_fwd_bf16(doutb, dxb, b, t, h, d, pos0, rope, stream));
  px_k_rope_fwd(out, xb, b, t, h, d, pos0, rope);
  CU_ASSERT(bf16_close("rope out bf16", host_bf(doutb, nx), out, nx));
  float *gxb = px_tconst(nx, ACC0);
  px_bf16 *dgxb = dev_bf(gxb, nx);
  LAUNCH(px_kc_rope_bwd_bf16(dgxb, dev_bf(gb, nx), b, t, h, d, pos0, rope, stream));
  px_k_rope_bwd(gxb, gb, b, t, h, d, pos0, rope);
  CU_ASSERT(bf16_close("rope dinp bf16", host_bf(dgxb, nx), gxb, nx));
  /* a partial rotary: 16 of 64 dims rotated, the rest passed through (copied forward, accumulated backward) */
  const px_rope *partial = &(px_rope){.theta = 10000.0, .concentration = 1.0, .dims = 16};
  float *op = px_tfloats(nx), *gp = px_tconst(nx, ACC0), *dgp = dev_f(gp, nx);
  float *dop = dalloc((size_t)nx * sizeof(float));
  LAUNCH(px_kc_rope_fwd(dop, dev_f(x, nx), b, t, h, d, pos0, partial, stream));
  px_k_rope_fwd(op, x, b, t, h, d, pos0, partial);
  CU_ASSERT(elem_close("partial rope out", host_f(dop, nx), op, nx));
  LAUNCH(px_kc_rope_bwd(dgp, dev_f(g, nx), b, t, h, d, pos0, partial, stream));
  px_k_rope_bwd(gp, g, b, t, h, d, pos0, partial);
  CU_ASSERT(elem_close("partial rope dinp", host_f(dgp, nx), gp, nx));
  arena_free();
}

/* ======================= attention ======================= */

/* Keeps entries s <= t of each (T, T) matrix, zeroes the rest. */
static void lower_only(float *x, int64_t bh, int64_t t) {
  for (int64_t r = 0; r < bh * t; r++)
    for (int64_t j = r % t + 1; j < t; j++) x[r * t + j] = 0.0f;
}

static void check_attention(int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t d, int64_t w) {
  const int64_t nq = b * t * hq * d, nk = b * t * hkv * d, ns = b * hq * t * t;
  const float scale = 1.0f / sqrtf((float)d);
  char what[96];
#define NAME(s) (snprintf(what, sizeof what, "%s (B=%lld T=%lld Hq=%lld Hkv=%lld D=%lld W=%lld)", s, (long long)b, \
                          (long long)t, (long long)hq, (long long)hkv, (long long)d, (long long)w), what)
  float *q = px_trand(nq, -1, 1), *k = px_trand(nk, -1, 1), *v = px_trand(nk, -1, 1);
  float *dq_ = dev_f(q, nq), *dk_ = dev_f(k, nk), *dv_ = dev_f(v, nk);
  /* scores over a NaN-filled buffer: every entry, upper triangle included, is written */
  float *scores = px_tconst(ns, NAN), *dscores = dev_f(scores, ns);
  LAUNCH(px_kc_attn_scores_fwd(dscores, dq_, dk_, b, t, hq, hkv, d, scale, stream));
  px_k_attn_scores_fwd(scores, q, k, b, t, hq, hkv, d, scale);
  CU_ASSERT(red_close(NAME("attn scores"), host_f(dscores, ns), scores, ns));
  /* softmax in place, from the CPU's scores */
  float *probs = px_tcopy(scores, ns), *dprobs_ = dev_f(scores, ns);
  LAUNCH(px_kc_attn_softmax_fwd(dprobs_, dprobs_, b * hq, t, w, stream));
  px_k_attn_softmax_fwd(probs, probs, b * hq, t, w);
  CU_ASSERT(red_close(NAME("attn probs"), host_f(dprobs_, ns), probs, ns));
  float *dprobs = dev_f(probs, ns);
  /* context */
  float *ctx = px_tconst(nq, NAN), *dctx = dev_f(ctx, nq);
  LAUNCH(px_kc_attn_context_fwd(dctx, dprobs, dv_, b, t, hq, hkv, d, stream));
  px_k_attn_context_fwd(ctx, probs, v, b, t, hq, hkv, d);
  CU_ASSERT(red_close(NAME("attn ctx"), host_f(dctx, nq), ctx, nq));
  /* context backward: dprobs compared on the lower triangle only (see attention.h) */
  float *gctx = px_trand(nq, -1, 1), *gp = px_tconst(ns, ACC0), *gv = px_tconst(nk, ACC0);
  float *dgp = dev_f(gp, ns), *dgv = dev_f(gv, nk), *dgctx = dev_f(gctx, nq);
  LAUNCH(px_kc_attn_context_bwd(dgp, dgv, dgctx, dprobs, dv_, b, t, hq, hkv, d, stream));
  px_k_attn_context_bwd(gp, gv, gctx, probs, v, b, t, hq, hkv, d);
  float *gp_got = host_f(dgp, ns);
  lower_only(gp_got, b * hq, t);
  float *gp_want = px_tcopy(gp, ns);
  lower_only(gp_want, b * hq, t);
  CU_ASSERT(red_close(NAME("attn dprobs (lower)"), gp_got, gp_want, ns));
  CU_ASSERT(red_close(NAME("attn dv"), host_f(dgv, nk), gv, nk));
  /* softmax backward into a zeroed buffer, from the CPU's dprobs */
  float *gs = px_tconst(ns, 0.0f), *dgs = dev_f(gs, ns);
  LAUNCH(px_kc_attn_softmax_bwd(dgs, dev_f(gp, ns), dprobs, b * hq, t, w, stream));
  px_k_attn_softmax_bwd(gs, gp, probs, b * hq, t, w);
  CU_ASSERT(red_close(NAME("attn dscores"), host_f(dgs, ns), gs, ns));
  /* scores backward from the CPU's dscores (upper triangle 0) */
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nk, ACC0), *dgq = dev_f(gq, nq), *dgk = dev_f(gk, nk);
  LAUNCH(px_kc_attn_scores_bwd(dgq, dgk, dev_f(gs, ns), dq_, dk_, b, t, hq, hkv, d, scale, stream));
  px_k_attn_scores_bwd(gq, gk, gs, q, k, b, t, hq, hkv, d, scale);
  CU_ASSERT(red_close(NAME("attn dq"), host_f(dgq, nq), gq, nq));
  CU_ASSERT(red_close(NAME("attn dk"), host_f(dgk, nk), gk, nk));
#undef NAME
}

static void test_attention(void) {
  px_tseed(11);
  check_attention(2, 70, 4, 2, 24, 0);  /* GQA, T across two 64-tiles */
  check_attention(1, 130, 2, 2, 40, 0); /* multi-head, three tiles, diagonal tiles partly masked */
  check_attention(2, 5, 3, 1, 8, 0);    /* multi-query, tiny */
  check_attention(2, 70, 4, 2, 24, 33); /* a sliding window: the softmaxes see 33 keys at most */
  arena_free();
}

/* ======================= dropout ======================= */

static void test_dropout(void) {
  px_tseed(12);
  const int64_t n = 10000;
  const uint64_t seed = 1234, offset = 77;
  float *x = px_trand(n, -1, 1), *dx = dev_f(x, n), *g = px_trand(n, -1, 1), *dg = dev_f(g, n);
  const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
    float p = ps[pi];
    float *out = px_tfloats(n), *dout = dalloc((size_t)n * sizeof(float));
    uint8_t *mask = px_talloc((size_t)n), *dmask = dalloc((size_t)n);
    LAUNCH(px_kc_dropout_fwd(dout, dmask, dx, n, p, seed, offset, stream));
    px_k_dropout_fwd(out, mask, x, n, p, seed, offset);
    CU_ASSERT(same_bits("dropout mask", host_u8(dmask, n), mask, (size_t)n));
    CU_ASSERT(same_bits("dropout out", host_f(dout, n), out, (size_t)n * sizeof *out));
    float *gx = px_tconst(n, ACC0), *dgx = dev_f(gx, n);
    LAUNCH(px_kc_dropout_bwd(dgx, dg, dmask, n, p, stream));
    px_k_dropout_bwd(gx, g, mask, n, p);
    CU_ASSERT(elem_close("dropout dinp", host_f(dgx, n), gx, n)); /* nvcc fuses d + g * scale into an fma */
    /* bf16: same masks */
    float *xb = bf16_round(px_tcopy(x, n), n), *gb = bf16_round(px_tcopy(g, n), n);
    px_bf16 *doutb = dalloc((size_t)n * sizeof *doutb);
    LAUNCH(px_kc_dropout_fwd_bf16(doutb, dmask, dev_bf(xb, n), n, p, seed, offset, stream));
    px_k_dropout_fwd(out, mask, xb, n, p, seed, offset);
    CU_ASSERT(same_bits("dropout mask bf16", host_u8(dmask, n), mask, (size_t)n));
    CU_ASSERT(bf16_close("dropout out bf16", host_bf(doutb, n), out, n));
    float *gxb = px_tconst(n, ACC0);
    px_bf16 *dgxb = dev_bf(gxb, n);
    LAUNCH(px_kc_dropout_bwd_bf16(dgxb, dev_bf(gb, n), dmask, n, p, stream));
    px_k_dropout_bwd(gxb, gb, mask, n, p);
    CU_ASSERT(bf16_close("dropout dinp bf16", host_bf(dgxb, n), gxb, n));
  }
  /* in two pieces, each with the offset of its first element: the same mask */
  uint8_t *whole = dalloc((size_t)n), *parts = dalloc((size_t)n);
  float *o = dalloc((size_t)n * sizeof(float));
  LAUNCH(px_kc_dropout_fwd(o, whole, dx, n, 0.3f, seed, offset, stream));
  LAUNCH(px_kc_dropout_fwd(o, parts, dx, 3000, 0.3f, seed, offset, stream));
  LAUNCH(px_kc_dropout_fwd(o + 3000, parts + 3000, dx + 3000, n - 3000, 0.3f, seed, offset + 3000, stream));
  CU_ASSERT(same_bits("dropout mask in pieces", host_u8(parts, n), host_u8(whole, n), (size_t)n));
  arena_free();
}

/* ======================= cross-entropy ======================= */

static void test_cross_entropy(void) {
  px_tseed(13);
  enum { N = 9 };
  const int64_t vreal = 997, vpad = 1000;
  const int32_t targets[N] = {3, 996, -1, 500, 499, 0, -1, 750, 12};
  int32_t *dt = dev_i(targets, N);
  float *logits = px_trand(N * vpad, -4, 4);
  for (int64_t i = 0; i < N; i++) logits[i * vpad + 998] = 50.0f; /* padding: must be ignored */
  for (int shards = 1; shards <= 2; shards++) {
    int64_t vl = vpad / shards;
    for (int s = 0; s < shards; s++) {
      int64_t v0 = s * vl;
      /* the shard's logits as a contiguous (N, Vl) block */
      float *l = px_tfloats(N * vl);
      for (int64_t i = 0; i < N; i++) memcpy(l + i * vl, logits + i * vpad + v0, (size_t)vl * sizeof *l);
      float *dl = dev_f(l, N * vl);
      float *mx = px_tfloats(N), *dmx = dalloc(N * sizeof(float));
      LAUNCH(px_kc_ce_max_local(dmx, dl, N, v0, vl, vreal, stream));
      px_k_ce_max_local(mx, l, N, v0, vl, vreal);
      CU_ASSERT(same_bits("ce max", host_f(dmx, N), mx, N * sizeof *mx));
      float *gmax = px_tconst(N, 1.5f), *dgmax = dev_f(gmax, N); /* any global max: the pieces take it as input */
      float *se = px_tfloats(N), *dse = dalloc(N * sizeof(float));
      LAUNCH(px_kc_ce_sumexp_local(dse, dl, dgmax, N, v0, vl, vreal, stream));
      px_k_ce_sumexp_local(se, l, gmax, N, v0, vl, vreal);
      CU_ASSERT(red_close("ce sumexp", host_f(dse, N), se, N));
      float *tl = px_tfloats(N), *dtl = dalloc(N * sizeof(float));
      LAUNCH(px_kc_ce_target_local(dtl, dl, dt, N, v0, vl, stream));
      px_k_ce_target_local(tl, l, targets, N, v0, vl);
      CU_ASSERT(same_bits("ce target", host_f(dtl, N), tl, N * sizeof *tl));
      /* loss and gradient from given global statistics */
      float *gsum = px_trand(N, 100, 200), *tlog = px_trand(N, -4, 4), *dgsum = dev_f(gsum, N);
      float *loss = px_tfloats(N), *dloss = dalloc(N * sizeof(float));
      LAUNCH(px_kc_ce_loss(dloss, dgmax, dgsum, dev_f(tlog, N), dt, N, stream));
      px_k_ce_loss(loss, gmax, gsum, tlog, targets, N);
      CU_ASSERT(elem_close("ce loss", host_f(dloss, N), loss, N));
      float *g = px_tconst(N * vl, NAN), *dg = dev_f(g, N * vl);
      LAUNCH(px_kc_ce_bwd(dg, dl, dgmax, dgsum, dt, N, v0, vl, vreal, 0.125f, stream));
      px_k_ce_bwd(g, l, gmax, gsum, targets, N, v0, vl, vreal, 0.125f);
      CU_ASSERT(elem_close("ce dlogits", host_f(dg, N * vl), g, N * vl));
      /* log-probabilities, then in place */
      float *lp = px_tfloats(N * vl), *dlp = dalloc((size_t)(N * vl) * sizeof(float));
      LAUNCH(px_kc_ce_logprobs(dlp, dl, dgmax, dgsum, N, vl, stream));
      px_k_ce_logprobs(lp, l, gmax, gsum, N, vl);
      CU_ASSERT(elem_close("ce logprobs", host_f(dlp, N * vl), lp, N * vl));
      LAUNCH(px_kc_ce_logprobs(dlp, dlp, dgmax, dgsum, N, vl, stream));
      px_k_ce_logprobs(lp, lp, gmax, gsum, N, vl);
      CU_ASSERT(elem_close("ce logprobs, in place", host_f(dlp, N * vl), lp, N * vl));
      /* the gradient in place */
      LAUNCH(px_kc_ce_bwd(dl, dl, dgmax, dgsum, dt, N, v0, vl, vreal, 0.125f, stream));
      CU_ASSERT(elem_close("ce dlogits, in place", host_f(dl, N * vl), g, N * vl));
    }
  }
  arena_free();
}

/* ======================= AdamW ======================= */

static void test_adamw(void) {
  px_tseed(14);
  const int64_t n = 3000;
  float *p = px_trand(n, -1, 1), *m = px_tconst(n, 0.0f), *v = px_tconst(n, 0.0f);
  float *dp = dev_f(p, n), *dm = dev_f(m, n), *dv = dev_f(v, n);
  for (int64_t t = 1; t <= 3; t++) {
    float *g = px_trand(n, -1, 1);
    LAUNCH(px_kc_adamw(dp, dm, dv, dev_f(g, n), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, stream));
    px_k_adamw(p, m, v, g, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
  }
  CU_ASSERT(elem_close("adamw param", host_f(dp, n), p, n));
  CU_ASSERT(elem_close("adamw m", host_f(dm, n), m, n));
  CU_ASSERT(elem_close("adamw v", host_f(dv, n), v, n));
  /* mixed precision: bf16 gradient scaled by the clip factor, fp32 master, bf16 copy */
  float *w = px_trand(n, -1, 1), *mw = px_tconst(n, 0.0f), *vw = px_tconst(n, 0.0f);
  float *dw = dev_f(w, n), *dmw = dev_f(mw, n), *dvw = dev_f(vw, n);
  px_bf16 *dcopy = dalloc((size_t)n * sizeof *dcopy);
  for (int64_t t = 1; t <= 3; t++) {
    float *g = bf16_round(px_trand(n, -1, 1), n);
    LAUNCH(px_kc_adamw_mixed(dw, dmw, dvw, dev_bf(g, n), dcopy, PX_DTYPE_BF16, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f,
                             t, stream));
    px_k_scale(g, n, 0.5f);
    px_k_adamw(w, mw, vw, g, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
  }
  CU_ASSERT(elem_close("adamw bf16 master", host_f(dw, n), w, n));
  CU_ASSERT(elem_close("adamw bf16 m", host_f(dmw, n), mw, n));
  CU_ASSERT(same_bits("adamw bf16 copy = bf16(master)", host_bf(dcopy, n), bf16_round(host_f(dw, n), n),
                      (size_t)n * sizeof(float)));
  arena_free();
}

/* ======================= reduce ======================= */

static void test_reduce(void) {
  px_tseed(15);
  const int64_t n = 3000001; /* many blocks, odd */
  float *x = px_trand(n, -1, 1), *dx = dev_f(x, n);
  double *dsum = dalloc(sizeof(double)), got = 0.0, again = 0.0;
  LAUNCH(px_kc_sumsq(dsum, dx, n, stream));
  copy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost);
  PX_ASSERT_REL(got, px_k_sumsq(x, n), 1e-12); /* double sums in two orders */
  LAUNCH(px_kc_sumsq(dsum, dx, n, stream));
  copy(&again, dsum, sizeof again, cudaMemcpyDeviceToHost);
  CU_ASSERT(memcmp(&got, &again, sizeof got) == 0); /* deterministic */
  LAUNCH(px_kc_sumsq(dsum, dx, 0, stream));
  copy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost);
  CU_ASSERT_EQUAL(got, 0.0);

  const int64_t m = 5000;
  float *a = px_trand(m, -1, 1), *b = px_trand(m, -1, 1), *da = dev_f(a, m), *db = dev_f(b, m);
  float *out = px_tfloats(m), *dout = dalloc((size_t)m * sizeof(float));
  LAUNCH(px_kc_add(dout, da, db, m, stream));
  px_k_add(out, a, b, m);
  CU_ASSERT(same_bits("add", host_f(dout, m), out, (size_t)m * sizeof *out));
  LAUNCH(px_kc_acc(dout, da, m, stream));
  px_k_acc(out, a, m);
  CU_ASSERT(same_bits("acc", host_f(dout, m), out, (size_t)m * sizeof *out));
  LAUNCH(px_kc_scale(dout, m, 0.37f, stream));
  px_k_scale(out, m, 0.37f);
  CU_ASSERT(same_bits("scale", host_f(dout, m), out, (size_t)m * sizeof *out));
  LAUNCH(px_kc_add(da, da, db, m, stream)); /* out aliases a */
  px_k_add(a, a, b, m);
  CU_ASSERT(same_bits("add in place", host_f(da, m), a, (size_t)m * sizeof *a));
  /* bf16 */
  float *ab = bf16_round(px_trand(m, -1, 1), m), *bb = bf16_round(px_trand(m, -1, 1), m);
  px_bf16 *dab = dev_bf(ab, m), *dbb = dev_bf(bb, m), *doutb = dalloc((size_t)m * sizeof *doutb);
  LAUNCH(px_kc_add_bf16(doutb, dab, dbb, m, stream));
  px_k_add(out, ab, bb, m);
  CU_ASSERT(bf16_close("add bf16", host_bf(doutb, m), out, m));
  CU_ASSERT(same_bits("add bf16 is the rounded fp32 sum", host_bf(doutb, m), bf16_round(out, m),
                      (size_t)m * sizeof *out));
  LAUNCH(px_kc_acc_bf16(dab, dbb, m, stream));
  px_k_acc(ab, bb, m);
  CU_ASSERT(bf16_close("acc bf16", host_bf(dab, m), ab, m));
  double gotb = 0;
  LAUNCH(px_kc_sumsq_bf16(dsum, dev_bf(ab, m), m, stream));
  copy(&gotb, dsum, sizeof gotb, cudaMemcpyDeviceToHost);
  PX_ASSERT_REL(gotb, px_k_sumsq(bf16_round(ab, m), m), 1e-12);
  /* bias rows: (rows, c) += bias */
  const int64_t rows = 37, c = 129;
  float *y = px_trand(rows * c, -1, 1), *bias = px_trand(c, -1, 1), *dy = dev_f(y, rows * c);
  LAUNCH(px_kc_add_bias(dy, dev_f(bias, c), rows, c, stream));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < c; j++) y[r * c + j] += bias[j];
  CU_ASSERT(same_bits("add bias", host_f(dy, rows * c), y, (size_t)(rows * c) * sizeof *y));
  float *yb = bf16_round(px_trand(rows * c, -1, 1), rows * c), *biasb = bf16_round(px_trand(c, -1, 1), c);
  px_bf16 *dyb = dev_bf(yb, rows * c);
  LAUNCH(px_kc_add_bias_bf16(dyb, dev_bf(biasb, c), rows, c, stream));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < c; j++) yb[r * c + j] += biasb[j];
  CU_ASSERT(same_bits("add bias bf16", host_bf(dyb, rows * c), bf16_round(yb, rows * c), (size_t)(rows * c) * sizeof *yb));
  arena_free();
}

/* ======================= fp16 twins ======================= */

#define FP16_RTOL 2e-3 /* fp16 keeps 11 significant bits: one rounding is 2^-11 relative */
#define FP16_ATOL 1e-4

static bool fp16_close(const char *what, const void *dev, const float *want, int64_t n) {
  return close_to(what, host_dt(dev, n, PX_DTYPE_FP16), want, n, FP16_RTOL, FP16_ATOL);
}

/* The _fp16 launchers against the CPU twins on fp16-rounded inputs: the
 * same templates as bf16, so this checks the launchers and the storage type. */
static void test_fp16(void) {
  px_tseed(22);
  const px_dtype h = PX_DTYPE_FP16;
  const int64_t n = 3000, rows = 20, c = 96, b = 2, t = 6, hd = 3, d = 16;
  float *x = px_trand(n, -6, 6), *y = px_trand(n, -1, 1), *z = px_trand(n, -1, 1), *want = px_tfloats(n);
  void *dx = dev_dt(x, n, h), *dy = dev_dt(y, n, h), *dz = dev_dt(z, n, h), *dout = dev_dt(px_tfloats(n), n, h);
  LAUNCH(px_kc_gelu_fwd_fp16(dout, dx, n, stream));
  px_k_gelu_fwd(want, x, n);
  CU_ASSERT(fp16_close("gelu out fp16", dout, want, n));
  float *acc = px_tconst(n, ACC0);
  void *dacc = dev_dt(acc, n, h);
  LAUNCH(px_kc_gelu_bwd_fp16(dacc, dy, dx, n, stream));
  px_k_gelu_bwd(acc, y, x, n);
  CU_ASSERT(fp16_close("gelu dinp fp16", dacc, acc, n));
  LAUNCH(px_kc_swiglu_fwd_fp16(dout, dy, dz, n, stream));
  px_k_swiglu_fwd(want, y, z, n);
  CU_ASSERT(fp16_close("swiglu out fp16", dout, want, n));
  float *dg = px_tconst(n, ACC0), *du = px_tconst(n, ACC0);
  void *ddg = dev_dt(dg, n, h), *ddu = dev_dt(du, n, h);
  LAUNCH(px_kc_swiglu_bwd_fp16(ddg, ddu, dx, dy, dz, n, stream));
  px_k_swiglu_bwd(dg, du, x, y, z, n);
  CU_ASSERT(fp16_close("swiglu dgate fp16", ddg, dg, n));
  CU_ASSERT(fp16_close("swiglu dup fp16", ddu, du, n));
  LAUNCH(px_kc_add_fp16(dout, dy, dz, n, stream));
  px_k_add(want, y, z, n);
  CU_ASSERT(fp16_close("add fp16", dout, want, n));
  void *dsum = dev_dt(want, n, h); /* from the rounded sum, as both sides start */
  LAUNCH(px_kc_acc_fp16(dsum, dx, n, stream));
  px_k_acc(want, x, n);
  CU_ASSERT(fp16_close("acc fp16", dsum, want, n));
  /* norms: fp16 activations and weights, fp32 statistics and weight gradients */
  float *xn = px_trand(rows * c, -2, 2), *w = px_trand(c, 0.5, 1.5), *bias = px_trand(c, -0.5, 0.5);
  void *dxn = dev_dt(xn, rows * c, h), *dw = dev_dt(w, c, h), *dbias = dev_dt(bias, c, h);
  float *mean = px_tfloats(rows), *rstd = px_tfloats(rows), *out = px_tfloats(rows * c);
  float *dmean = dalloc((size_t)rows * sizeof(float)), *drstd = dalloc((size_t)rows * sizeof(float));
  void *dnorm = dev_dt(px_tfloats(rows * c), rows * c, h);
  LAUNCH(px_kc_layernorm_fwd_fp16(dnorm, dmean, drstd, dxn, dw, dbias, rows, c, 1e-5f, stream));
  px_k_layernorm_fwd(out, mean, rstd, xn, w, bias, rows, c, 1e-5f);
  CU_ASSERT(fp16_close("layernorm out fp16", dnorm, out, rows * c));
  CU_ASSERT(red_close("layernorm rstd fp16", host_f(drstd, rows), rstd, rows));
  float *g = px_trand(rows * c, -1, 1), *gx = px_tconst(rows * c, ACC0), *gw = px_tconst(c, ACC0);
  float *gb = px_tconst(c, ACC0), *dgw = dev_f(gw, c), *dgb = dev_f(gb, c);
  void *dg2 = dev_dt(g, rows * c, h), *dgx = dev_dt(gx, rows * c, h);
  LAUNCH(px_kc_layernorm_bwd_fp16(dgx, dgw, dgb, dg2, dxn, dw, dev_f(mean, rows), dev_f(rstd, rows), rows, c, stream));
  px_k_layernorm_bwd(gx, gw, gb, g, xn, w, mean, rstd, rows, c);
  CU_ASSERT(fp16_close("layernorm dinp fp16", dgx, gx, rows * c));
  CU_ASSERT(red_close("layernorm dweight fp16", host_f(dgw, c), gw, c));
  CU_ASSERT(red_close("layernorm dbias fp16", host_f(dgb, c), gb, c));
  LAUNCH(px_kc_rmsnorm_fwd_fp16(dnorm, drstd, dxn, dw, rows, c, 1e-5f, stream));
  px_k_rmsnorm_fwd(out, rstd, xn, w, rows, c, 1e-5f);
  CU_ASSERT(fp16_close("rmsnorm out fp16", dnorm, out, rows * c));
  /* rotary embedding */
  int64_t nr = b * t * hd * d;
  float *q = px_trand(nr, -1, 1), *qr = px_tfloats(nr);
  void *dq = dev_dt(q, nr, h), *dqr = dev_dt(px_tfloats(nr), nr, h);
  const px_rope *plain = &(px_rope){.theta = 10000.0, .concentration = 1.0};
  LAUNCH(px_kc_rope_fwd_fp16(dqr, dq, b, t, hd, d, 0, plain, stream));
  px_k_rope_fwd(qr, q, b, t, hd, d, 0, plain);
  CU_ASSERT(fp16_close("rope out fp16", dqr, qr, nr));
  arena_free();
}

/* ======================= fused (flash) attention ======================= */

/* B batch rows in one call (one with dropout) against the CPU twin row by
 * row, within a sliding window of w keys (0: none); the backward runs on the
 * GPU's own ctx and lse, which the CPU side is given too (the same inputs on
 * both). fp32 within RED, 16-bit types within BF16 (fp16 keeps 3 more bits). */
static void check_flash(px_dtype dt, int64_t bn, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t w, float p) {
  const int64_t rq = s * hq * d, rkv = s * hkv * d, nq = bn * rq, nkv = bn * rkv, nl = bn * hq * s;
  const uint64_t seed = 99, off = 123456;
  bool wide = dt == PX_DTYPE_FP32, tc = !wide && !dev_shift && (d == 16 || d == 32 || d == 64 || d == 128);
  double rtol = wide ? RED_RTOL : tc ? TC_RTOL : BF16_RTOL, atol = wide ? RED_ATOL : tc ? TC_ATOL : BF16_ATOL;
  char what[112];
#define NAME(x) (snprintf(what, sizeof what, "flash %s (%s B=%lld S=%lld Hq=%lld Hkv=%lld D=%lld W=%lld p=%.2f)", x, \
                          px_dtype_names[dt], (long long)bn, (long long)s, (long long)hq, (long long)hkv, (long long)d, \
                          (long long)w, p), what)
  float *q = px_trand(nq, -2, 2), *k = px_trand(nkv, -2, 2), *v = px_trand(nkv, -1, 1), *go = px_trand(nq, -1, 1);
  void *dq_ = dev_dt(q, nq, dt), *dk_ = dev_dt(k, nkv, dt), *dv_ = dev_dt(v, nkv, dt), *dgo = dev_dt(go, nq, dt);
  float *nan = px_tconst(nq, NAN), *lse_nan = px_tconst(nl, NAN);
  void *dctx = dev_dt(nan, nq, dt);
  float *dlse = dev_f(lse_nan, nl);
  LAUNCH(px_kc_flash_fwd(dctx, dlse, dq_, dk_, dv_, dt, bn, s, hq, hkv, d, w, p, seed, off, stream));
  float *ctx = px_tfloats(nq), *lse = px_tfloats(nl);
  for (int64_t b = 0; b < bn; b++)
    px_k_flash_fwd(ctx + b * rq, lse + b * hq * s, q + b * rq, k + b * rkv, v + b * rkv, s, s, hq, hkv, d, NULL, NULL,
                   w, s, p, seed, off);
  float *ctx_got = host_dt(dctx, nq, dt), *lse_got = host_f(dlse, nl);
  CU_ASSERT(close_to(NAME("ctx"), ctx_got, ctx, nq, rtol, atol));
  CU_ASSERT(red_close(NAME("lse"), lse_got, lse, nl));
  float *gq = px_tconst(nq, ACC0), *gk = px_tconst(nkv, ACC0), *gv = px_tconst(nkv, ACC0);
  void *dgq = dev_dt(gq, nq, dt), *dgk = dev_dt(gk, nkv, dt), *dgv = dev_dt(gv, nkv, dt);
  LAUNCH(px_kc_flash_bwd(dgq, dgk, dgv, dgo, dq_, dk_, dv_, dctx, dlse, dt, bn, s, hq, hkv, d, w, p, seed, off, stream));
  for (int64_t b = 0; b < bn; b++)
    px_k_flash_bwd(gq + b * rq, gk + b * rkv, gv + b * rkv, go + b * rq, q + b * rq, k + b * rkv, v + b * rkv,
                   ctx_got + b * rq, lse_got + b * hq * s, s, s, hq, hkv, d, NULL, NULL, w, s, p, seed, off);
  float *gq_got = host_dt(dgq, nq, dt), *gk_got = host_dt(dgk, nkv, dt), *gv_got = host_dt(dgv, nkv, dt);
  CU_ASSERT(close_to(NAME("dq"), gq_got, gq, nq, rtol, atol));
  CU_ASSERT(close_to(NAME("dk"), gk_got, gk, nkv, rtol, atol));
  CU_ASSERT(close_to(NAME("dv"), gv_got, gv, nkv, rtol, atol));
  if (tc) { /* the products' rounding of P and dS averages out over a tensor */
    CU_ASSERT(l2_close(NAME("ctx"), ctx_got, ctx, nq, TC_L2));
    for (int64_t i = 0; i < nq; i++) gq_got[i] -= ACC0, gq[i] -= ACC0;
    for (int64_t i = 0; i < nkv; i++) gk_got[i] -= ACC0, gk[i] -= ACC0, gv_got[i] -= ACC0, gv[i] -= ACC0;
    CU_ASSERT(l2_close(NAME("dq"), gq_got, gq, nq, TC_L2));
    CU_ASSERT(l2_close(NAME("dk"), gk_got, gk, nkv, TC_L2));
    CU_ASSERT(l2_close(NAME("dv"), gv_got, gv, nkv, TC_L2));
  }
  /* repeatable to the bit (no atomics) */
  void *dgq2 = dev_dt(px_tconst(nq, ACC0), nq, dt), *dgk2 = dev_dt(px_tconst(nkv, ACC0), nkv, dt);
  void *dgv2 = dev_dt(px_tconst(nkv, ACC0), nkv, dt);
  float *once = host_dt(dgq, nq, dt);
  LAUNCH(px_kc_flash_bwd(dgq2, dgk2, dgv2, dgo, dq_, dk_, dv_, dctx, dlse, dt, bn, s, hq, hkv, d, w, p, seed, off,
                         stream));
  CU_ASSERT(same_bits(NAME("dq, run twice"), host_dt(dgq2, nq, dt), once, (size_t)nq * sizeof(float)));
#undef NAME
}

/* Attention sinks on the fused attention: the forward folded with them
 * (px_kc_flash_sink_fold) against px_k_flash_sink_fold, and their gradient
 * (px_kc_flash_sink_rows, px_kc_sink_grad) against px_k_flash_bwd_dv's
 * dsink, both on the GPU's folded ctx and lse; deterministic. Tolerances as
 * check_flash's; dsink, a sum over every row, 16-bit within 1e-2 absolute. */
static void check_flash_sinks(px_dtype dt, int64_t bn, int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t w,
                              float p) {
  const int64_t rq = s * hq * d, rkv = s * hkv * d, nq = bn * rq, nkv = bn * rkv, nl = bn * hq * s;
  const uint64_t seed = 7, off = 4321;
  bool wide = dt == PX_DTYPE_FP32, tc = !wide && (d == 16 || d == 32 || d == 64 || d == 128);
  double rtol = wide ? RED_RTOL : tc ? TC_RTOL : BF16_RTOL, atol = wide ? RED_ATOL : tc ? TC_ATOL : BF16_ATOL;
  char what[128];
#define NAME(x)                                                                                                  \
  (snprintf(what, sizeof what, "flash sinks %s (%s B=%lld S=%lld Hq=%lld Hkv=%lld D=%lld W=%lld p=%.2f)", x,        \
            px_dtype_names[dt], (long long)bn, (long long)s, (long long)hq, (long long)hkv, (long long)d, (long long)w, \
            p),                                                                                                    \
   what)
  float *q = px_trand(nq, -2, 2), *k = px_trand(nkv, -2, 2), *v = px_trand(nkv, -1, 1), *go = px_trand(nq, -1, 1);
  float *sinks = px_trand(hq, -1, 3), *gs = px_tconst(hq, ACC0);
  void *dq_ = dev_dt(q, nq, dt), *dk_ = dev_dt(k, nkv, dt), *dv_ = dev_dt(v, nkv, dt), *dgo = dev_dt(go, nq, dt);
  void *dsinks = dev_dt(sinks, hq, dt), *dgs = dev_dt(gs, hq, dt), *dgs2 = dev_dt(gs, hq, dt);
  void *dctx = dalloc((size_t)nq * px_dtype_bytes(dt));
  float *dlse = dalloc((size_t)nl * sizeof(float)), *terms = dalloc((size_t)nl * sizeof(float));
  LAUNCH(px_kc_flash_fwd(dctx, dlse, dq_, dk_, dv_, dt, bn, s, hq, hkv, d, w, p, seed, off, stream));
  LAUNCH(px_kc_flash_sink_fold(dctx, dlse, dsinks, dt, bn, s, hq, d, stream));
  float *ctx = px_tfloats(nq), *lse = px_tfloats(nl);
  for (int64_t b = 0; b < bn; b++) {
    px_k_flash_fwd(ctx + b * rq, lse + b * hq * s, q + b * rq, k + b * rkv, v + b * rkv, s, s, hq, hkv, d, NULL, NULL,
                   w, s, p, seed, off);
    px_k_flash_sink_fold(ctx + b * rq, lse + b * hq * s, sinks, s, hq, d);
  }
  float *ctx_got = host_dt(dctx, nq, dt), *lse_got = host_f(dlse, nl);
  CU_ASSERT(close_to(NAME("ctx"), ctx_got, ctx, nq, rtol, atol));
  CU_ASSERT(red_close(NAME("lse"), lse_got, lse, nl));
  LAUNCH(px_kc_flash_sink_rows(terms, dgo, dq_, dk_, dctx, dlse, dt, bn, s, hq, hkv, d, w, stream));
  LAUNCH(px_kc_sink_grad(dgs, terms, dt, bn, hq, s, stream));
  float *gq = px_tfloats(rq), *gk = px_tfloats(rkv), *gv = px_tfloats(rkv);
  for (int64_t b = 0; b < bn; b++)
    px_k_flash_bwd_dv(gq, gk, gv, gs, go + b * rq, q + b * rq, k + b * rkv, v + b * rkv, ctx_got + b * rq,
                      lse_got + b * hq * s, s, s, hq, hkv, d, d, NULL, NULL, w, s, p, seed, off);
  float *gs_got = host_dt(dgs, hq, dt);
  CU_ASSERT(close_to(NAME("dsink"), gs_got, gs, hq, wide ? RED_RTOL : BF16_RTOL, wide ? RED_ATOL : 1e-2));
  /* repeatable to the bit (no atomics) */
  LAUNCH(px_kc_flash_sink_rows(terms, dgo, dq_, dk_, dctx, dlse, dt, bn, s, hq, hkv, d, w, stream));
  LAUNCH(px_kc_sink_grad(dgs2, terms, dt, bn, hq, s, stream));
  CU_ASSERT(same_bits(NAME("dsink, run twice"), host_dt(dgs2, hq, dt), gs_got, (size_t)hq * sizeof(float)));
#undef NAME
}

/* The unfused softmax with sinks (px_kc_attn_softmax_sink_fwd and _bwd, px_kc_sink_grad) against
 * px_k_attn_softmax_sink_fwd and _bwd, within RED. */
static void check_softmax_sinks(int64_t b, int64_t hq, int64_t t, int64_t w) {
  const int64_t bh = b * hq, n = bh * t * t;
  float *scores = px_trand(n, -3, 3), *sinks = px_trand(hq, -1, 3), *gp = px_trand(n, -1, 1);
  float *probs = px_tfloats(n), *gsc = px_tconst(n, ACC0), *gs = px_tconst(hq, ACC0);
  float *dprobs = dalloc((size_t)n * sizeof(float)), *dgsc = dev_f(gsc, n), *dgs = dev_f(gs, hq);
  float *terms = dalloc((size_t)(bh * t) * sizeof(float));
  LAUNCH(px_kc_attn_softmax_sink_fwd(dprobs, dev_f(scores, n), dev_f(sinks, hq), bh, hq, t, w, stream));
  px_k_attn_softmax_sink_fwd(probs, scores, sinks, bh, hq, t, w);
  CU_ASSERT(red_close("softmax with sinks", host_f(dprobs, n), probs, n));
  LAUNCH(px_kc_attn_softmax_sink_bwd(dgsc, terms, dev_f(gp, n), dprobs, bh, t, w, stream));
  LAUNCH(px_kc_sink_grad(dgs, terms, PX_DTYPE_FP32, b, hq, t, stream));
  px_k_attn_softmax_sink_bwd(gsc, gs, gp, host_f(dprobs, n), bh, hq, t, w);
  CU_ASSERT(red_close("softmax with sinks: dscores", host_f(dgsc, n), gsc, n));
  CU_ASSERT(red_close("softmax with sinks: dsink", host_f(dgs, hq), gs, hq));
}

static void test_sinks(void) {
  px_tseed(17);
  check_flash_sinks(PX_DTYPE_FP32, 2, 70, 4, 2, 24, 0, 0.0f); /* GQA, batch rows, three 32-tiles */
  check_flash_sinks(PX_DTYPE_FP32, 1, 45, 2, 2, 40, 7, 0.25f); /* a window, dropout, D > 32 (lanes over keys) */
  check_flash_sinks(PX_DTYPE_BF16, 1, 130, 4, 2, 64, 0, 0.0f); /* tensor cores */
  check_flash_sinks(PX_DTYPE_FP16, 2, 50, 2, 1, 16, 0, 0.0f);
  check_softmax_sinks(2, 3, 40, 0);
  check_softmax_sinks(1, 2, 70, 9); /* a sliding window */
  arena_free();
}

static void test_flash(void) {
  px_tseed(16);
  check_flash(PX_DTYPE_FP32, 1, 70, 4, 2, 24, 0, 0.0f);  /* GQA, three 32-tiles, the last partial */
  check_flash(PX_DTYPE_FP32, 1, 45, 2, 2, 5, 0, 0.25f);  /* odd head dim, dropout */
  check_flash(PX_DTYPE_FP32, 1, 33, 2, 1, 136, 0, 0.0f); /* D > 128: the wide variant, multi-query */
  check_flash(PX_DTYPE_BF16, 1, 50, 4, 1, 40, 0, 0.1f);  /* 16-bit on CUDA cores (D not a tensor-core size) */
  /* tensor cores: D in {16, 32, 64, 128}, 64-tiles */
  check_flash(PX_DTYPE_BF16, 1, 130, 4, 2, 64, 0, 0.1f); /* GPT-2's head dim, three tiles, GQA, dropout */
  check_flash(PX_DTYPE_BF16, 1, 70, 2, 1, 128, 0, 0.0f); /* Llama's */
  check_flash(PX_DTYPE_FP16, 1, 40, 2, 2, 32, 0, 0.0f);
  check_flash(PX_DTYPE_FP16, 1, 64, 2, 2, 16, 0, 0.2f);
  /* batch rows in one launch; sliding windows shorter than a tile, across tiles, and past the sequence */
  check_flash(PX_DTYPE_FP32, 3, 70, 4, 2, 24, 0, 0.0f);
  check_flash(PX_DTYPE_FP32, 2, 100, 2, 1, 16, 40, 0.0f);  /* 32-tiles: windows reach back across two */
  check_flash(PX_DTYPE_FP32, 1, 45, 2, 2, 5, 7, 0.25f);    /* a window inside a tile, dropout */
  check_flash(PX_DTYPE_BF16, 2, 200, 4, 2, 64, 70, 0.0f);  /* 64-tiles on tensor cores */
  check_flash(PX_DTYPE_BF16, 1, 130, 2, 2, 32, 3, 0.1f);   /* a window of three inside a tile */
  check_flash(PX_DTYPE_FP16, 2, 50, 2, 2, 16, 500, 0.0f);  /* a window longer than the sequence: causal */
  dev_shift = 1; /* tensors off the 16-byte grid: the CUDA-core kernel takes them */
  check_flash(PX_DTYPE_BF16, 1, 40, 2, 2, 64, 0, 0.0f);
  dev_shift = 0;
  /* refused: fp8, head dims past the limit, several batch rows with dropout */
  float *x = dalloc(64);
  CU_ASSERT_EQUAL(px_kc_flash_fwd(x, x, x, x, x, PX_DTYPE_FP8, 1, 1, 1, 1, 1, 0, 0, 0, 0, stream), PX_ERR_RUNTIME);
  CU_ASSERT_EQUAL(px_kc_flash_fwd(x, x, x, x, x, PX_DTYPE_FP32, 1, 1, 1, 1, PX_KC_FLASH_MAX_D + 1, 0, 0, 0, 0, stream),
                  PX_ERR_RUNTIME);
  CU_ASSERT_EQUAL(px_kc_flash_fwd(x, x, x, x, x, PX_DTYPE_FP32, 2, 1, 1, 1, 1, 0, 0.1f, 0, 0, stream), PX_ERR_RUNTIME);
  arena_free();
}

/* Sizes <= 0 are no-ops that launch nothing (a zero-block launch would fail). */
/* fp8 (kernels/cuda/fp8.h) against kernels/cpu/fp8.c, bit for bit: codes of
 * values over both formats' whole range (normals, subnormals, beyond the
 * largest: saturation), every halfway point between neighbouring codes
 * (ties to even), zeros, infinities and NaN, from fp32 and bf16, at two
 * scales; the amax (a NaN skipped); decoded values; the transpose. Then the
 * fp8 GEMM (cuBLASLt, TN, E4M3 x E4M3 and E5M2 x E4M3, scale pointers) against
 * sgemm on the decoded values, and its refusals. */
static void test_fp8(void) {
  px_tseed(16);
  const int64_t nr = 3000, n = nr + 4 * 127 + 12;
  float *x = px_tfloats(n);
  for (int64_t i = 0; i < nr; i++) {
    float u = px_trand(1, 0, 1)[0], mant = px_trand(1, 1, 2)[0];
    x[i] = (i % 2 ? -1.0f : 1.0f) * ldexpf(mant, (int)(u * 40.0f) - 22); /* 2^-22 .. 2^18 */
  }
  int64_t at = nr;
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 127; c++) { /* halfway between code c and c + 1, both signs */
      float mid = (px_k_fp8_decode((uint8_t)c, (px_fp8_format)f) + px_k_fp8_decode((uint8_t)(c + 1), (px_fp8_format)f)) / 2;
      if (!isfinite(mid)) mid = 1e6f;
      x[at++] = mid, x[at++] = -mid;
    }
  const float special[12] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 1e-30f,
                             -1e-40f};
  for (int i = 0; i < 12; i++) x[at++] = special[i];
  float *dx = dev_f(x, n);
  float *xb = bf16_round(px_tfloats(n), n);
  memcpy(xb, x, (size_t)n * sizeof *x);
  bf16_round(xb, n);
  px_bf16 *dxb = dev_bf(xb, n);
  uint8_t *dq = dalloc((size_t)n), *got = px_talloc((size_t)n), *want = px_talloc((size_t)n);
  float *dy = dalloc((size_t)n * sizeof(float)), *y = px_tfloats(n), *yw = px_tfloats(n);
  const float scales[2] = {1.0f, 0.37f};
  for (int f = 0; f < 2; f++)
    for (int si = 0; si < 2; si++) {
      char what[96];
      bool e5 = f == PX_FP8_E5M2;
      LAUNCH(px_kc_fp8_quantize(dq, dx, PX_DTYPE_FP32, n, scales[si], e5, stream));
      copy(got, dq, (size_t)n, cudaMemcpyDeviceToHost);
      px_k_fp8_quantize(want, x, n, scales[si], (px_fp8_format)f);
      snprintf(what, sizeof what, "fp8 %s quantize fp32, scale %g", e5 ? "e5m2" : "e4m3", scales[si]);
      CU_ASSERT(same_bits(what, got, want, (size_t)n));
      LAUNCH(px_kc_fp8_dequantize(dy, dq, PX_DTYPE_FP32, n, scales[si], e5, stream));
      copy(y, dy, (size_t)n * sizeof *y, cudaMemcpyDeviceToHost);
      px_k_fp8_dequantize(yw, want, n, scales[si], (px_fp8_format)f);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) bad += !(y[i] == yw[i] || (isnan(y[i]) && isnan(yw[i])));
      if (bad) fprintf(stderr, "\n  fp8 dequantize %s: %lld values differ\n", e5 ? "e5m2" : "e4m3", (long long)bad);
      CU_ASSERT_EQUAL(bad, 0);
      LAUNCH(px_kc_fp8_quantize(dq, dxb, PX_DTYPE_BF16, n, scales[si], e5, stream));
      copy(got, dq, (size_t)n, cudaMemcpyDeviceToHost);
      px_k_fp8_quantize(want, xb, n, scales[si], (px_fp8_format)f);
      snprintf(what, sizeof what, "fp8 %s quantize bf16, scale %g", e5 ? "e5m2" : "e4m3", scales[si]);
      CU_ASSERT(same_bits(what, got, want, (size_t)n));
    }
  /* amax: NaN skipped, infinities counted; bf16 */
  float *da = dalloc(sizeof(float)), amax = 0;
  LAUNCH(px_kc_fp8_amax(da, dx, PX_DTYPE_FP32, nr, stream));
  copy(&amax, da, sizeof amax, cudaMemcpyDeviceToHost);
  CU_ASSERT_EQUAL(amax, px_k_fp8_amax(x, nr));
  x[17] = NAN;
  LAUNCH(px_kc_fp8_amax(da, dev_f(x, nr), PX_DTYPE_FP32, nr, stream));
  copy(&amax, da, sizeof amax, cudaMemcpyDeviceToHost);
  CU_ASSERT_EQUAL(amax, px_k_fp8_amax(x, nr));
  LAUNCH(px_kc_fp8_amax(da, dxb, PX_DTYPE_BF16, nr, stream));
  copy(&amax, da, sizeof amax, cudaMemcpyDeviceToHost);
  CU_ASSERT_EQUAL(amax, px_k_fp8_amax(xb, nr));
  /* transpose */
  const int64_t rows = 37, cols = 53;
  for (int64_t i = 0; i < rows * cols; i++) want[i] = (uint8_t)(i * 7 + i / 5);
  uint8_t *dt = dev_copy(want, (size_t)(rows * cols));
  LAUNCH(px_kc_fp8_transpose(dq, dt, rows, cols, stream));
  copy(got, dq, (size_t)(rows * cols), cudaMemcpyDeviceToHost);
  int64_t tbad = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) tbad += got[c * rows + r] != want[r * cols + c];
  CU_ASSERT_EQUAL(tbad, 0);

  /* GEMM: C = (A / sa)(B / sb)^T (+ C) on the codes */
  const int64_t m = 32, nn = 48, k = 64;
  float *a = px_trand(m * k, -2, 2), *b = px_trand(nn * k, -2, 2), *c0 = px_trand(m * nn, -1, 1);
  for (int e5a = 0; e5a < 2; e5a++) {
    px_fp8_format fa = e5a ? PX_FP8_E5M2 : PX_FP8_E4M3;
    float sa = px_k_fp8_scale(px_k_fp8_amax(a, m * k), fa), sb = px_k_fp8_scale(px_k_fp8_amax(b, nn * k), PX_FP8_E4M3);
    uint8_t *qa = px_talloc((size_t)(m * k)), *qb = px_talloc((size_t)(nn * k));
    px_k_fp8_quantize(qa, a, m * k, sa, fa);
    px_k_fp8_quantize(qb, b, nn * k, sb, PX_FP8_E4M3);
    float *ad = px_tfloats(m * k), *bd = px_tfloats(nn * k), *c = px_tfloats(m * nn);
    float inv[8] = {1.0f / sa, 0, 0, 0, 1.0f / sb}; /* each factor 16-byte aligned */
    px_k_fp8_dequantize(ad, qa, m * k, sa, fa);
    px_k_fp8_dequantize(bd, qb, nn * k, sb, PX_FP8_E4M3);
    float *dinv = dev_f(inv, 8), *dc = dev_f(c0, m * nn);
    memcpy(c, c0, (size_t)(m * nn) * sizeof *c);
    LAUNCH(px_kc_gemm_fp8(lt, dc, dev_copy(qa, (size_t)(m * k)), dev_copy(qb, (size_t)(nn * k)), dinv, dinv + 4, m, nn,
                          k, e5a, false, false, 1.0f, 1.0f, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES, stream));
    px_k_gemm(c, ad, bd, m, nn, k, false, true, 1.0f, 1.0f);
    /* sum_p |a_ip b_jp|: the scale of the tensor cores' accumulation error */
    float *aa = px_tfloats(m * k), *ba = px_tfloats(nn * k), *mag = px_tfloats(m * nn);
    for (int64_t i = 0; i < m * k; i++) aa[i] = fabsf(ad[i]);
    for (int64_t i = 0; i < nn * k; i++) ba[i] = fabsf(bd[i]);
    px_k_gemm(mag, aa, ba, m, nn, k, false, true, 1.0f, 0.0f);
    CU_ASSERT(fp8_close(e5a ? "gemm fp8 e5m2 x e4m3, beta 1" : "gemm fp8 e4m3 x e4m3, beta 1", host_f(dc, m * nn), c,
                        mag, m * nn, k, RED_RTOL, RED_ATOL));
    px_bf16 *dcb = dalloc((size_t)(m * nn) * sizeof *dcb);
    LAUNCH(px_kc_gemm_fp8(lt, dcb, dev_copy(qa, (size_t)(m * k)), dev_copy(qb, (size_t)(nn * k)), dinv, dinv + 4, m,
                          nn, k, e5a, false, e5a, 1.0f, 0.0f, PX_DTYPE_BF16, workspace, WORKSPACE_BYTES, stream));
    px_k_gemm(c, ad, bd, m, nn, k, false, true, 1.0f, 0.0f);
    CU_ASSERT(fp8_close("gemm fp8 into bf16", host_bf(dcb, m * nn), c, mag, m * nn, k, BF16_RTOL, BF16_ATOL));
  }
  /* refused: E5M2 x E5M2, a dimension not a multiple of 16, a factor not 16-byte aligned */
  float *dinv = dev_f(px_tconst(8, 1.0f), 8), *dc = dalloc((size_t)(m * nn) * sizeof(float));
  uint8_t *qz = dalloc((size_t)(nn * k));
  CU_ASSERT_EQUAL(px_kc_gemm_fp8(lt, dc, qz, qz, dinv, dinv + 1, m, nn, k, false, false, false, 1.0f, 0.0f, PX_DTYPE_FP32,
                                 workspace, WORKSPACE_BYTES, stream),
                  PX_ERR_INPUT);
  CU_ASSERT_EQUAL(px_kc_gemm_fp8(lt, dc, qz, qz, dinv, dinv + 4, m, nn, k, true, true, false, 1.0f, 0.0f, PX_DTYPE_FP32,
                                 workspace, WORKSPACE_BYTES, stream),
                  PX_ERR_INPUT);
  CU_ASSERT_EQUAL(px_kc_gemm_fp8(lt, dc, qz, qz, dinv, dinv + 4, m - 8, nn, k, false, false, false, 1.0f, 0.0f, PX_DTYPE_FP32,
                                 workspace, WORKSPACE_BYTES, stream),
                  PX_ERR_INPUT);
  arena_free();
}

/* ======================= a frozen base's nf4 and fp8 storage ======================= */

/* A decode of a stored weight (dev, at an odd address) against the CPU's (want, fp32), rounded to each dtype: bitwise. */
static bool unpack_same(const char *what, px_dtype dt, const void *dev, const float *want, int64_t n) {
  size_t bytes = (size_t)n * px_dtype_bytes(dt);
  void *got = px_talloc(bytes + 1), *w = px_talloc(bytes + 1);
  copy(got, dev, bytes, cudaMemcpyDeviceToHost);
  px_dtype_from_fp32(w, dt, want, (uint64_t)n);
  char name[96];
  snprintf(name, sizeof name, "%s into %s, n %lld", what, px_dtype_names[dt], (long long)n);
  return same_bits(name, got, w, bytes);
}

/* px_kc_nf4_unpack and px_kc_fp8_unpack against px_k_nf4_unpack and px_k_fp8_dequantize (what the cpu backend's
 * PX_OPF_DEQUANT cast runs, exec/params.c) into fp32, bf16 and fp16: odd sizes, partial 64-element blocks and
 * 256-absmax groups, a block of zeros, storage at an odd address (the frozen buffer packs weights byte by byte). */
static void test_frozen_unpack(void) {
  px_tseed(11);
  const int64_t sizes[] = {1, 63, 64, 129, 1001, 64 * 256 + 100, 64 * 512 + 777};
  const px_dtype dts[] = {PX_DTYPE_FP32, PX_DTYPE_BF16, PX_DTYPE_FP16};
  px_kc_nf4_tables t;
  memcpy(t.values, px_nf4_values, sizeof t.values);
  px_k_nf4_dynamic_map(t.map);
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    int64_t n = sizes[si];
    float *x = px_trand(n, -0.3, 0.3), *want = px_tfloats(n);
    for (int64_t i = 0; i < n; i++) x[i] *= (float)(1 + (i / PX_NF4_BLOCK) % 7); /* absmaxes that differ */
    for (int64_t i = 64; i < 128 && i < n; i++) x[i] = 0.0f;                    /* a block of zeros */
    void *dout = dalloc((size_t)n * sizeof(float));
    /* nf4 */
    uint64_t sb = px_k_nf4_storage_bytes((uint64_t)n);
    uint8_t *st = px_talloc(sb + 1);
    px_k_nf4_pack(x, (uint64_t)n, st + 1, px_tfloats((n + PX_NF4_BLOCK - 1) / PX_NF4_BLOCK));
    px_k_nf4_unpack(st + 1, (uint64_t)n, want);
    uint8_t *dst = dev_copy(st, sb + 1);
    for (int d = 0; d < 3; d++) {
      LAUNCH(px_kc_nf4_unpack(dout, dst + 1, dts[d], n, &t, stream));
      CU_ASSERT(unpack_same("nf4 unpack", dts[d], dout, want, n));
    }
    /* fp8: E4M3 codes and their per-tensor scale */
    float scale = px_k_fp8_scale(px_k_fp8_amax(x, n), PX_FP8_E4M3);
    uint8_t *f8 = px_talloc((size_t)n + 5);
    px_k_fp8_quantize(f8 + 1, x, n, scale, PX_FP8_E4M3);
    memcpy(f8 + 1 + n, &scale, sizeof scale);
    px_k_fp8_dequantize(want, f8 + 1, n, scale, PX_FP8_E4M3);
    uint8_t *df8 = dev_copy(f8, (size_t)n + 5);
    for (int d = 0; d < 3; d++) {
      LAUNCH(px_kc_fp8_unpack(dout, df8 + 1, dts[d], n, stream));
      CU_ASSERT(unpack_same("fp8 unpack", dts[d], dout, want, n));
    }
  }
  CU_ASSERT_EQUAL(px_kc_nf4_unpack(NULL, NULL, PX_DTYPE_FP32, 0, &t, stream), PX_OK); /* empty: nothing read */
  CU_ASSERT_EQUAL(px_kc_fp8_unpack(NULL, NULL, PX_DTYPE_FP32, 0, stream), PX_OK);
  arena_free();
}

static void test_empty(void) {
  float *p = dalloc(16);
  LAUNCH(px_kc_gelu_fwd(p, p, 0, stream));
  LAUNCH(px_kc_layernorm_fwd(p, NULL, NULL, p, p, NULL, 0, 4, 1e-5f, stream));
  LAUNCH(px_kc_attn_scores_fwd(p, p, p, 0, 4, 2, 2, 4, 1.0f, stream));
  LAUNCH(px_kc_attn_softmax_fwd(p, p, 0, 4, 0, stream));
  LAUNCH(px_kc_ce_bwd(p, p, p, p, NULL, 0, 0, 4, 4, 1.0f, stream));
  LAUNCH(px_kc_embed_bwd(p, p, NULL, 0, 0, 4, 4, stream));
  LAUNCH(px_kc_gemm(lt, p, p, p, 0, 4, 4, false, false, 1.0f, 0.0f, PX_DTYPE_FP32, workspace, WORKSPACE_BYTES,
                    stream));
  check_cuda(cudaStreamSynchronize(stream), "sync");
  arena_free();
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&workspace, WORKSPACE_BYTES) != cudaSuccess) {
    fprintf(stderr, "test_cuda_kernels: cannot set up a stream, a cuBLASLt handle and a workspace\n");
    return 1;
  }
  static const px_test tests[] = {
      {"fp32 <-> bf16", test_convert},   {"gemm (cuBLASLt)", test_gemm},    {"gemm GELU epilogues", test_gemm_gelu},
      {"linear", test_linear},
      {"embedding", test_embed},         {"positions", test_pos},           {"layernorm", test_layernorm},
      {"rmsnorm", test_rmsnorm},         {"gelu", test_gelu},               {"swiglu", test_swiglu},
      {"rope", test_rope},               {"attention", test_attention},     {"dropout", test_dropout},
      {"cross-entropy", test_cross_entropy}, {"adamw", test_adamw},        {"reduce", test_reduce},
      {"fp16 twins", test_fp16},         {"flash attention", test_flash},             {"attention sinks", test_sinks},
      {"empty sizes", test_empty},
      {"fp8 casts and GEMM", test_fp8}, {"frozen nf4 and fp8 unpack", test_frozen_unpack},
  };
  int rc = px_test_main("cuda_kernels", tests, sizeof tests / sizeof tests[0]);
  cudaFree(workspace);
  cublasLtDestroy(lt);
  cudaStreamDestroy(stream);
  return rc;
}
