/* The block-scaled formats (kernels/cpu/mx.h) bit for bit against a
 * reference written apart from them: each element rounded by searching the
 * table of every code's value (from the formats' definition, fp8_ref.h for
 * E4M3/E5M2), MXFP8's shared exponent found by doubling, and the edge
 * cases by hand: zeros, subnormals, saturation, infinities and NaNs. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp8_ref.h"
#include "kernels/cpu/mx.h"
#include "testutil.h"

/* ---- the reference ---- */

/* E2M1 code c's value: sign, exponent field e (bias 1), mantissa bit m. */
static double ref_fp4_value(int c) {
  int e = (c >> 1) & 3, m = c & 1;
  double v = e ? ldexp(1.0 + m / 2.0, e - 1) : m / 2.0;
  return (c & 8) ? -v : v;
}

/* The code nearest |a| among the codes 0..ncodes-1 (non-negative, ascending
 * values val), ties to the even code; beyond the largest value, the largest. */
static int ref_nearest(double a, const double *val, int ncodes) {
  int best = 0;
  for (int c = 1; c < ncodes; c++) {
    double d = fabs(a - val[c]), db = fabs(a - val[best]);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return best;
}

static double fp4_vals[8], e4_vals[127], e5_vals[124]; /* the finite non-negative codes' values */

static void ref_tables(void) {
  for (int c = 0; c < 8; c++) fp4_vals[c] = ref_fp4_value(c);
  for (int c = 0; c < 127; c++) e4_vals[c] = px_fp8_ref_value(c, false); /* 0x7f is NaN */
  for (int c = 0; c < 124; c++) e5_vals[c] = px_fp8_ref_value(c, true);  /* 0x7c.. inf and NaNs */
}

static int ref_fp4(float x) {
  if (isnan(x)) return 0;
  return (signbit(x) ? 8 : 0) | ref_nearest(fabs((double)x), fp4_vals, 8);
}

static int ref_fp4_sr(float x, uint32_t r) {
  if (isnan(x)) return 0;
  double a = fabs((double)x);
  int lo = 0;
  while (lo < 7 && fp4_vals[lo + 1] <= a) lo++;
  int c = lo == 7 ? 7 : (double)r < (a - fp4_vals[lo]) / (fp4_vals[lo + 1] - fp4_vals[lo]) * 0x1p24 ? lo + 1 : lo;
  return (signbit(x) ? 8 : 0) | c;
}

static int ref_fp8(float x, bool e5) {
  if (isnan(x)) return 0x7f;
  return (signbit(x) ? 0x80 : 0) | ref_nearest(fabs((double)x), e5 ? e5_vals : e4_vals, e5 ? 124 : 127);
}

/* ---- E2M1 ---- */

static void test_fp4_codes(void) {
  ref_tables();
  /* by hand */
  CU_ASSERT(px_k_fp4_decode(0x7) == 6.0f && px_k_fp4_decode(0xf) == -6.0f && px_k_fp4_decode(0x1) == 0.5f);
  CU_ASSERT(px_k_fp4_decode(0x8) == 0.0f && signbit(px_k_fp4_decode(0x8)));
  CU_ASSERT_EQUAL(px_k_fp4_encode(0.25f), 0x0); /* ties to even: 0 */
  CU_ASSERT_EQUAL(px_k_fp4_encode(0.75f), 0x2); /* 0.5 (odd) or 1 (even): 1 */
  CU_ASSERT_EQUAL(px_k_fp4_encode(2.5f), 0x4);  /* 2 */
  CU_ASSERT_EQUAL(px_k_fp4_encode(3.5f), 0x6);  /* 4 */
  CU_ASSERT_EQUAL(px_k_fp4_encode(5.0f), 0x6);  /* 4 (even) not 6 */
  CU_ASSERT_EQUAL(px_k_fp4_encode(5.01f), 0x7);
  CU_ASSERT_EQUAL(px_k_fp4_encode(1e30f), 0x7);
  CU_ASSERT_EQUAL(px_k_fp4_encode(-INFINITY), 0xf);
  CU_ASSERT_EQUAL(px_k_fp4_encode(-0.0f), 0x8);
  CU_ASSERT_EQUAL(px_k_fp4_encode(0x1p-149f), 0x0); /* fp32's smallest subnormal */
  CU_ASSERT_EQUAL(px_k_fp4_encode(NAN), 0x0);
  for (int c = 0; c < 16; c++) CU_ASSERT_EQUAL(px_k_fp4_encode(px_k_fp4_decode((uint8_t)c)), c); /* every code back */
  for (int c = 0; c < 16; c++) CU_ASSERT(px_k_fp4_decode((uint8_t)c) == (float)ref_fp4_value(c));
  /* every multiple of 1/64 in [-8, 8] (all the ties and their neighbours), then random fp32 over 2^-20..2^4 */
  int bad = 0;
  for (int i = -512; i <= 512; i++) {
    float x = (float)i / 64.0f;
    bad += px_k_fp4_encode(x) != ref_fp4(x);
    bad += px_k_fp4_encode(nextafterf(x, 10.0f)) != ref_fp4(nextafterf(x, 10.0f));
    bad += px_k_fp4_encode(nextafterf(x, -10.0f)) != ref_fp4(nextafterf(x, -10.0f));
  }
  px_tseed(7);
  for (int i = 0; i < 100000; i++) {
    float x = (float)(ldexp(1.0, -20) * pow(2.0, 24 * px_tunit())) * (px_tunit() < 0.5 ? -1.0f : 1.0f);
    bad += px_k_fp4_encode(x) != ref_fp4(x);
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_fp4_stochastic(void) {
  ref_tables();
  int bad = 0;
  px_tseed(11);
  for (int i = 0; i < 100000; i++) {
    float x = (float)(16.0 * px_tunit() - 8.0);
    uint32_t r = px_k_sr_bits(3, (uint64_t)i);
    bad += px_k_fp4_encode_sr(x, r) != ref_fp4_sr(x, r);
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(px_k_fp4_encode_sr(1.5f, 0xffffff), 0x3); /* representable: never moves */
  CU_ASSERT_EQUAL(px_k_fp4_encode_sr(1.25f, 0), 0x3);        /* halfway from 1 to 1.5: up on a small draw */
  CU_ASSERT_EQUAL(px_k_fp4_encode_sr(1.25f, 0x800000), 0x2); /* and down on one of half the range */
  CU_ASSERT_EQUAL(px_k_fp4_encode_sr(7.0f, 0), 0x7);          /* saturates */
  /* unbiased: the mean of many roundings of 4.6 (between 4 and 6) is 4.6 */
  double sum = 0;
  for (uint64_t i = 0; i < 200000; i++) sum += px_k_fp4_decode(px_k_fp4_encode_sr(4.6f, px_k_sr_bits(9, i)));
  PX_ASSERT_REL(sum / 200000, 4.6, 2e-3);
  /* the draws: 24 bits, reproducible, and a fresh stream per seed */
  CU_ASSERT(px_k_sr_bits(1, 5) == px_k_sr_bits(1, 5) && px_k_sr_bits(1, 5) != px_k_sr_bits(2, 5));
  uint32_t top = 0;
  for (uint64_t i = 0; i < 1000; i++) top |= px_k_sr_bits(1, i);
  CU_ASSERT_EQUAL(top, 0xffffffu);
}

/* ---- MXFP8 ---- */

/* The reference's MXFP8 block: the shared exponent by doubling, elements by the table. */
static void ref_mx_block(const float *x, int w, bool e5, uint8_t *q, uint8_t *scale) {
  double amax = 0;
  bool special = false;
  for (int i = 0; i < w; i++) {
    if (!isfinite(x[i])) special = true;
    else if (fabs(x[i]) > amax) amax = fabs(x[i]);
  }
  if (special) {
    *scale = 0xff;
    memset(q, 0, (size_t)w);
    return;
  }
  int k = -127;
  if (amax > 0) {
    int l = -160;
    while (ldexp(1.0, l + 1) <= amax) l++; /* 2^l <= amax < 2^(l+1) */
    k = l - (e5 ? 15 : 8);
    if (k < -127) k = -127;
    if (k > 127) k = 127;
  }
  *scale = (uint8_t)(k + 127);
  for (int i = 0; i < w; i++) q[i] = (uint8_t)ref_fp8((float)ldexp((double)x[i], -k), e5);
}

static void test_mxfp8(void) {
  ref_tables();
  enum { R = 5, C = 70, NB = 3 }; /* a short last block of 6 */
  float x[R * C], y[R * C];
  px_tseed(5);
  for (int i = 0; i < R * C; i++) x[i] = (float)((px_tunit() - 0.5) * pow(2.0, 40 * px_tunit() - 20));
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 0x1p-140f, x[3] = FLT_MAX; /* block 0 of row 0: its scale at E8M0's top */
  for (int i = 32; i < 64; i++) x[i] = 0.0f;                    /* block 1 of row 0: zeros */
  x[C + 5] = NAN, x[2 * C + 40] = INFINITY;                     /* NaN and infinity blocks */
  for (int i = 0; i < 32; i++) x[3 * C + i] = 0x1p-149f * (float)(i + 1); /* subnormals: scale at the bottom */
  for (int i = 0; i < 32; i++) x[4 * C + i] = 1.0f;
  x[4 * C + 1] = 480.0f; /* amax 480: 2^8 / 2^8 = 1, 480 saturates to 448 */
  for (int f = 0; f < 2; f++) {
    uint8_t q[R * C], s[R * NB], rq[R * C], rs[R * NB];
    px_k_mxfp8_quantize(q, s, x, R, C, (px_fp8_format)f);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < NB; j++) {
        int w = j == NB - 1 ? C - 64 : 32;
        ref_mx_block(x + r * C + 32 * j, w, f == 1, rq + r * C + 32 * j, rs + r * NB + j);
      }
    CU_ASSERT(memcmp(q, rq, sizeof q) == 0 && memcmp(s, rs, sizeof s) == 0);
    px_k_mxfp8_dequantize(y, q, s, R, C, (px_fp8_format)f);
    int bad = 0;
    for (int i = 0; i < R * C; i++) {
      int b = (i / C) * NB + (i % C) / 32;
      double want = rs[b] == 0xff ? NAN : ldexp(px_fp8_ref_value(rq[i], f == 1), rs[b] - 127);
      bad += isnan(want) ? !isnan(y[i]) : y[i] != (float)want || (double)y[i] != want; /* exact in fp32 */
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(s[0], 127 + 127 - (f ? 15 : 8)); /* FLT_MAX: 2^127 */
    CU_ASSERT_EQUAL(s[1], 0);                        /* zeros: 2^-127 */
    CU_ASSERT(s[NB] == 0xff && s[2 * NB + 1] == 0xff && isnan(y[C]) && isnan(y[2 * C + 63]));
    CU_ASSERT_EQUAL(s[3 * NB], 0); /* subnormal amax: clamped to 2^-127 */
    if (f == 0) CU_ASSERT(s[4 * NB] == 127 && q[4 * C + 1] == 0x7e && y[4 * C + 2] == 1.0f);
  }
}

/* ---- NVFP4 ---- */

static void ref_nvfp4(const float *x, int rows, int cols, int br, float s, const px_k_sr *sr, uint8_t *codes,
                      uint8_t *scales) {
  int nbc = (cols + 15) / 16;
  for (int r0 = 0; r0 < rows; r0 += br)
    for (int j = 0; j < nbc; j++) {
      double amax = 0;
      bool special = false;
      for (int r = r0; r < r0 + br && r < rows; r++)
        for (int i = 16 * j; i < 16 * j + 16 && i < cols; i++) {
          if (!isfinite(x[r * cols + i])) special = true;
          else if (fabs(x[r * cols + i]) > amax) amax = fabs(x[r * cols + i]);
        }
      int sc = special ? 0x7f : ref_fp8((float)amax * s / 6.0f, false);
      scales[(r0 / br) * nbc + j] = (uint8_t)sc;
      float d = (float)px_fp8_ref_value(sc, false), enc = special || d == 0 ? 0 : s / d;
      for (int r = r0; r < r0 + br && r < rows; r++)
        for (int i = 16 * j; i < 16 * j + 16 && i < cols; i++) {
          int at = r * cols + i;
          float v = x[at] * enc;
          codes[at] = (uint8_t)(enc == 0 ? 0 : sr ? ref_fp4_sr(v, px_k_sr_bits(sr->seed, sr->offset + (uint64_t)at)) : ref_fp4(v));
        }
    }
}

static void test_nvfp4(void) {
  ref_tables();
  enum { R = 35, C = 40 }; /* short last blocks both ways */
  static float x[R * C], y[R * C];
  px_tseed(9);
  for (int i = 0; i < R * C; i++) x[i] = (float)((px_tunit() - 0.5) * pow(2.0, 16 * px_tunit() - 8));
  for (int i = 0; i < 16; i++) x[C + i] = 0.0f;          /* a zero block */
  x[3 * C + 0] = 1e-12f;                                  /* a block whose scale underflows E4M3: zeros */
  for (int i = 1; i < 16; i++) x[3 * C + i] = 0.0f;
  float amax = px_k_fp8_amax(x, R * C), s = px_k_nvfp4_tensor_scale(amax); /* the finite values' */
  CU_ASSERT(s == 2688.0f / amax);
  x[2 * C + 20] = NAN, x[20 * C + 3] = -INFINITY; /* special blocks */
  px_k_sr sr = {42, 1000};
  for (int br = 1; br <= 16; br += 15)
    for (int st = 0; st < 2; st++) {
      int nbr = (R + br - 1) / br, nbc = (C + 15) / 16;
      static uint8_t q[(R * C + 1) / 2], sc[R * 3], rc[R * C], rs[R * 3];
      px_k_nvfp4_quantize(q, sc, x, R, C, br, s, st ? &sr : NULL);
      ref_nvfp4(x, R, C, br, s, st ? &sr : NULL, rc, rs);
      int bad = 0;
      for (int i = 0; i < R * C; i++) bad += ((i % 2 ? q[i / 2] >> 4 : q[i / 2] & 15)) != rc[i];
      CU_ASSERT_EQUAL(bad, 0);
      CU_ASSERT(memcmp(sc, rs, (size_t)(nbr * nbc)) == 0);
      px_k_nvfp4_dequantize(y, q, sc, R, C, br, s);
      bad = 0;
      for (int i = 0; i < R * C; i++) {
        int b = (i / C / br) * nbc + (i % C) / 16;
        float want = (float)ref_fp4_value(rc[i]) * ((float)px_fp8_ref_value(rs[b], false) / s);
        bad += isnan(want) ? !isnan(y[i]) : y[i] != want;
      }
      CU_ASSERT_EQUAL(bad, 0);
      CU_ASSERT(y[C] == 0.0f && isnan(y[2 * C + 16]) && y[3 * C] == 0.0f);
      if (br == 1) { /* row 20's first block NaN, row 21's not; 16 x 16: rows 16..31's first block */
        CU_ASSERT(isnan(y[20 * C]) && !isnan(y[21 * C]));
      } else {
        CU_ASSERT(isnan(y[16 * C]) && isnan(y[31 * C]) && !isnan(y[32 * C]));
      }
      if (!st && br == 1) { /* round to nearest: the error is at most half a step of the block */
        double worst = 0;
        for (int i = 4 * C; i < R * C; i++)
          if (i / C != 20) {
            float d = (float)px_fp8_ref_value(rs[(i / C) * nbc + (i % C) / 16], false) / s;
            double e = fabs(y[i] - x[i]) / d;
            if (fabs(x[i]) / d < 6 && e > worst) worst = e;
          }
        CU_ASSERT(worst <= 1.0); /* steps are at most 2 units (4 to 6) */
      }
    }
  CU_ASSERT(px_k_nvfp4_tensor_scale(0.0f) == 1.0f && px_k_nvfp4_tensor_scale(NAN) == 1.0f &&
            px_k_nvfp4_tensor_scale(INFINITY) == 1.0f);
  CU_ASSERT(px_k_nvfp4_tensor_scale(0x1p-149f) == FLT_MAX);
  CU_ASSERT(px_k_e8m0_decode(127) == 1.0f && px_k_e8m0_decode(0) == 0x1p-127f && px_k_e8m0_decode(254) == 0x1p127f);
  CU_ASSERT(isnan(px_k_e8m0_decode(0xff)));
}

/* ---- the random Hadamard transform ---- */

static void test_rht(void) {
  enum { T = 48, M = 5, N = 3 }; /* tokens (contracted), the two operands' widths */
  float a[T * M], b[T * N], ha[T * M], hb[T * N];
  px_tseed(3);
  for (int i = 0; i < T * M; i++) a[i] = (float)(px_tunit() - 0.5);
  for (int i = 0; i < T * N; i++) b[i] = (float)(px_tunit() - 0.5);
  px_k_rht16(ha, a, T, M, 77);
  px_k_rht16(hb, b, T, N, 77);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) { /* a^T b unchanged */
      double p = 0, q = 0;
      for (int t = 0; t < T; t++) p += (double)a[t * M + i] * b[t * N + j], q += (double)ha[t * M + i] * hb[t * N + j];
      PX_ASSERT_REL(q, p, 1e-5);
    }
  CU_ASSERT(memcmp(a, ha, sizeof a) != 0);
  /* a spike spreads over its 16 rows at +-1/4, with the seed's signs */
  float e[16] = {0}, he[16];
  e[5] = 1.0f;
  px_k_rht16(he, e, 16, 1, 77);
  for (int i = 0; i < 16; i++) CU_ASSERT(fabsf(he[i]) == 0.25f);
  px_k_rht16(e, e, 16, 1, 77); /* in place */
  CU_ASSERT(memcmp(e, he, sizeof e) == 0);
}

int main(void) {
  static const px_test tests[] = {
      {"E2M1: by hand, every code back, ties to even against the table", test_fp4_codes},
      {"E2M1 stochastic rounding: against the table, unbiased, draws", test_fp4_stochastic},
      {"MXFP8: E8M0 shared exponents and E4M3/E5M2 codes against the reference; zeros, subnormals, saturation, NaN/inf",
       test_mxfp8},
      {"NVFP4: 1x16 and 16x16 blocks, nearest and stochastic, against the reference; edge blocks", test_nvfp4},
      {"random Hadamard transform: orthogonal, +-1/4 spread, in place", test_rht},
  };
  return px_test_main("mx", tests, sizeof tests / sizeof tests[0]);
}
