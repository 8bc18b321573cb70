/* NF4 (kernels/cpu/nf4.h) bit for bit against a reference written apart from it: the 16 values as bitsandbytes'
 * Python side lists them (bitsandbytes/functional.py, get_4bit_type("nf4"); the kernel's table is csrc/kernels.cu's:
 * tests/data/nf4_bitsandbytes.md cites both at one commit), each element coded by counting the thresholds it exceeds
 * (dQuantizeNF4's, listed in order; the midpoints of adjacent values within 1 ulp), the nearest value, blocks of 64 with their absmax; and by hand: a block's
 * codes, the packing, a block of zeros, a NaN, an odd tail; and the executor's storage of a frozen weight with double
 * quantisation (px_k_nf4_pack / _unpack) against a reference of bitsandbytes' quantize_4bit(compress_statistics=True)
 * written here: the dynamic map from its formula, the 8-bit code as the nearest value by a linear scan. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/nf4.h"
#include "testutil.h"

/* bitsandbytes/functional.py, get_4bit_type("nf4") */
static const double ref_values[16] = {-1.0,
                                      -0.6961928009986877,
                                      -0.5250730514526367,
                                      -0.39491748809814453,
                                      -0.28444138169288635,
                                      -0.18477343022823334,
                                      -0.09105003625154495,
                                      0.0,
                                      0.07958029955625534,
                                      0.16093020141124725,
                                      0.24611230194568634,
                                      0.33791524171829224,
                                      0.44070982933044434,
                                      0.5626170039176941,
                                      0.7229568362236023,
                                      1.0};

/* The midpoint of values k and k + 1, in fp32. */
static float ref_mid(int k) { return (float)((ref_values[k] + ref_values[k + 1]) / 2.0); }

/* dQuantizeNF4's thresholds in ascending order (csrc/kernels.cu: the tree's literals): the midpoints, but for
 * 4 of them 1 ulp off (below 0, 8, 12, 14 of ref_mid), which bitsandbytes' coding follows */
static const float ref_thresholds[15] = {
    -0.8480964004993439f, -0.6106329262256622f, -0.4599952697753906f, -0.33967943489551544f, -0.23460740596055984f,
    -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f, 0.1202552504837513f, 0.2035212516784668f,
    0.2920137718319893f,  0.3893125355243683f,  0.5016634166240692f,  0.6427869200706482f,  0.8614784181118011f};

/* x's code: how many thresholds it exceeds (a NaN none) */
static int ref_encode(float x) {
  int c = 0;
  for (int k = 0; k < 15; k++) c += x > ref_thresholds[k];
  return c;
}

static void ref_quantize(const float *x, uint64_t n, uint8_t *codes, float *absmax) {
  memset(codes, 0, (n + 1) / 2);
  for (uint64_t b = 0; b * 64 < n; b++) {
    float amax = 0; /* max |x| of the block (every |x| >= 0 > -FLT_MAX) */
    for (uint64_t i = b * 64; i < n && i < b * 64 + 64; i++)
      if (fabsf(x[i]) > amax || isnan(x[i])) amax = isnan(x[i]) ? amax : fabsf(x[i]);
    absmax[b] = amax;
    float inv = 1.0f / amax;
    for (uint64_t i = b * 64; i < b * 64 + 64 && i < ((n + 1) / 2) * 2; i++) { /* the kernel codes a missing element as 0 */
      int c = ref_encode(i < n ? x[i] * inv : 0.0f * inv);
      codes[i / 2] |= (uint8_t)(i % 2 ? c : c << 4);
    }
  }
}

static void test_values(void) {
  for (int c = 0; c < 16; c++) {
    CU_ASSERT_EQUAL(px_nf4_values[c], (float)ref_values[c]); /* the kernel's table is the Python side's */
    CU_ASSERT_EQUAL(px_k_nf4_encode(px_nf4_values[c]), c);   /* every value back to its code */
  }
  /* the tree's thresholds: each stays below, the next float above goes up; each is its midpoint within 1 ulp,
   * 11 of them exactly */
  int exact = 0;
  for (int k = 0; k < 15; k++) {
    float t = ref_thresholds[k], m = ref_mid(k);
    CU_ASSERT_EQUAL(px_k_nf4_encode(t), k);
    CU_ASSERT_EQUAL(px_k_nf4_encode(nextafterf(t, 2.0f)), k + 1);
    CU_ASSERT(t == m || nextafterf(m, 2.0f) == t || nextafterf(m, -2.0f) == t);
    exact += t == m;
  }
  CU_ASSERT_EQUAL(exact, 11);
  CU_ASSERT_EQUAL(px_k_nf4_encode(NAN), 0);
  CU_ASSERT_EQUAL(px_k_nf4_encode(-5.0f), 0);
  CU_ASSERT_EQUAL(px_k_nf4_encode(5.0f), 15);
}

static void test_by_hand(void) {
  /* absmax 2: 2 -> 1 (15), -2 -> -1 (0), 1 -> 0.5 below the midpoint 0.50166 (12), 0 (7), 0.1 -> 0.05 (8) */
  float x[5] = {2.0f, -2.0f, 1.0f, 0.0f, 0.1f}, y[5], amax;
  uint8_t q[3];
  px_k_nf4_quantize(x, 5, q, &amax);
  CU_ASSERT_EQUAL(amax, 2.0f);
  CU_ASSERT_EQUAL(q[0], 0xf0);
  CU_ASSERT_EQUAL(q[1], 0xc7);
  CU_ASSERT_EQUAL(q[2], 0x87); /* the odd tail's low nibble codes a 0 */
  px_k_nf4_dequantize(q, &amax, 5, y);
  CU_ASSERT_EQUAL(y[0], 2.0f);
  CU_ASSERT_EQUAL(y[1], -2.0f);
  CU_ASSERT_EQUAL(y[2], 0.44070982933044434f * 2.0f);
  CU_ASSERT_EQUAL(y[3], 0.0f);
  CU_ASSERT_EQUAL(y[4], 0.07958029955625534f * 2.0f);
  /* a block of zeros: absmax 0, 0 x (1 / 0) is NaN, code 0, decoded -1 x 0 = -0 */
  float z[64] = {0}, zd[64];
  uint8_t zq[32];
  px_k_nf4_quantize(z, 64, zq, &amax);
  px_k_nf4_dequantize(zq, &amax, 64, zd);
  CU_ASSERT_EQUAL(amax, 0.0f);
  CU_ASSERT_EQUAL(zq[0], 0x00);
  CU_ASSERT(zd[0] == 0.0f && signbit(zd[0]));
}

static void test_random(void) {
  enum { N = 64 * 37 + 13 }; /* whole blocks and a partial one, odd */
  static float x[N], y[N];
  static uint8_t q[(N + 1) / 2], rq[(N + 1) / 2];
  static float a[(N + 63) / 64], ra[(N + 63) / 64];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) { /* blocks of very different scales, some all zero */
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(s >> 11) / 9007199254740992.0 - 0.5;
    int b = i / 64;
    x[i] = b % 11 == 5 ? 0.0f : (float)(u * ldexp(1.0, (b % 7) * 5 - 15));
  }
  px_k_nf4_quantize(x, N, q, a);
  ref_quantize(x, N, rq, ra);
  CU_ASSERT_EQUAL(memcmp(q, rq, sizeof q), 0);
  CU_ASSERT_EQUAL(memcmp(a, ra, sizeof a), 0);
  px_k_nf4_dequantize(q, a, N, y);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    int c = i % 2 ? rq[i / 2] & 0xf : rq[i / 2] >> 4;
    float want = (float)ref_values[c] * ra[i / 64];
    bad += memcmp(&y[i], &want, sizeof want) != 0;
    /* nearest: no other value is closer to x / absmax (where absmax > 0) */
    if (ra[i / 64] > 0) {
      double t = (double)x[i] / ra[i / 64], d = fabs(t - ref_values[c]);
      for (int k = 0; k < 16; k++) bad += fabs(t - ref_values[k]) < d - 1e-6; /* up to the thresholds' ulp */
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
}

/* ---- double quantisation, written apart from kernels/cpu/nf4.c ---- */

/* bitsandbytes' create_dynamic_map(signed=True): 127 positive values, their negatives, 0 and 1, sorted; each the
 * mean of two adjacent points of torch.linspace(0.1, 1, 2^i + 1) (fp32: start + step k below the half, end - step
 * (n - 1 - k) from it) times fp32(10^(i - 6)), the fp32 operations done in double and rounded once (exact: a sum
 * or product of two floats fits a double) */
static void ref_map(double *m) {
  int n = 0;
  for (int i = 0; i < 7; i++) {
    int items = (1 << i) + 1;
    float step = (1.0f - 0.1f) / (float)(items - 1);
    for (int j = 0; j + 1 < items; j++) {
      float a = j < items / 2 ? 0.1f + step * (float)j : 1.0f - step * (float)(items - 1 - j);
      float b = j + 1 < items / 2 ? 0.1f + step * (float)(j + 1) : 1.0f - step * (float)(items - 2 - j);
      double mean = (double)(float)((double)a + (double)b) / 2.0;
      double v = (double)(float)(mean * (double)(float)pow(10.0, i - 6));
      m[n++] = v, m[n++] = -v;
    }
  }
  m[n++] = 0.0, m[n++] = 1.0;
  for (int i = 1; i < n; i++) /* insertion sort */
    for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
      double t = m[j];
      m[j] = m[j - 1], m[j - 1] = t;
    }
}

/* The code of x in map: the nearest value, a tie to the lower code (dQuantize's midpoint tests: above the
 * midpoint up, at or below it the pivot); by a linear scan, not a binary search. */
static int ref_q8(const float *map, float x) {
  int best = 0;
  for (int k = 1; k < 256; k++) {
    float mid = (map[k - 1] + map[k]) * 0.5f;
    if (x > mid) best = k;
  }
  return best;
}

static void test_dynamic_map(void) {
  double ref[256];
  float map[256];
  ref_map(ref);
  px_k_nf4_dynamic_map(map);
  int off = 0;
  for (int k = 0; k < 256; k++) {
    off += map[k] != (float)ref[k];
    if (k) CU_ASSERT(map[k] > map[k - 1]); /* strictly ascending: 256 distinct codes */
  }
  CU_ASSERT_EQUAL(off, 0);
  CU_ASSERT_EQUAL(map[255], 1.0f);
  CU_ASSERT_EQUAL(map[127], 0.0f); /* 127 negatives below 0 */
  CU_ASSERT(map[0] > -1.0f && map[0] < -0.99f);
  for (int k = 0; k < 256; k++) CU_ASSERT_EQUAL(px_k_q8_encode(map, map[k]), k); /* every value back to its code */
}

/* px_k_nf4_pack / _unpack against the reference: the codes and absmaxes as ref_quantize, then the absmaxes less
 * their mean coded by ref_q8 in groups of 256 with their largest |.|, the layout by hand (codes, 8-bit absmaxes,
 * fp32 constants, the fp32 mean), and the values decoded as bitsandbytes' dequantize_4bit. */
static void test_double_quant(void) {
  enum { N = 64 * 600 + 7 }; /* 601 blocks: 3 groups of 256, the last partial; an odd tail */
  enum { NB = (N + 63) / 64, NG = (NB + 255) / 256 };
  static float x[N], y[N], ra[NB];
  static uint8_t rq[(N + 1) / 2], store[(N + 1) / 2 + NB + 4 * NG + 4], want[sizeof store];
  float scratch[NB], map[256];
  uint64_t s = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < N; i++) { /* Gaussian-ish weights (a sum of 4 uniforms), blocks of a few scales */
    double u = 0;
    for (int k = 0; k < 4; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      u += (double)(s >> 11) / 9007199254740992.0 - 0.5;
    }
    x[i] = (float)(u * 0.02 * (1 + (i / 64) % 3));
  }
  CU_ASSERT_EQUAL(px_k_nf4_storage_bytes(N), sizeof store);
  px_k_nf4_pack(x, N, store, scratch);
  /* the reference */
  px_k_nf4_dynamic_map(map);
  ref_quantize(x, N, rq, ra);
  double sum = 0;
  for (int b = 0; b < NB; b++) sum += ra[b];
  float mean = (float)(sum / NB);
  memcpy(want, rq, sizeof rq);
  for (int g = 0; g < NG; g++) {
    float amax = 0;
    for (int b = g * 256; b < NB && b < g * 256 + 256; b++) amax = fmaxf(amax, fabsf(ra[b] - mean));
    for (int b = g * 256; b < NB && b < g * 256 + 256; b++)
      want[sizeof rq + b] = (uint8_t)ref_q8(map, (ra[b] - mean) * (1.0f / amax));
    memcpy(want + sizeof rq + NB + 4 * g, &amax, 4);
  }
  memcpy(want + sizeof rq + NB + 4 * NG, &mean, 4);
  CU_ASSERT_EQUAL(memcmp(store, want, sizeof store), 0);
  /* decoded: bitwise the reference's, and what a dequantising cast writes (exec's px_param_frozen_decode is this
   * function: tests/cli/exec_qlora.sh runs it) */
  px_k_nf4_unpack(store, N, y);
  int bad = 0;
  double err = 0, sq = 0, aerr = 0;
  for (int i = 0; i < N; i++) {
    int b = i / 64, c = i % 2 ? rq[i / 2] & 0xf : rq[i / 2] >> 4;
    float amax2;
    memcpy(&amax2, want + sizeof rq + NB + 4 * (b / 256), 4);
    float absmax = map[want[sizeof rq + b]] * amax2 + mean, v = (float)ref_values[c] * absmax;
    bad += memcmp(&y[i], &v, sizeof v) != 0;
    err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), sq += (double)x[i] * x[i];
    if (i % 64 == 0) aerr = fmax(aerr, fabs(absmax - ra[b]) / amax2);
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* NF4's error on Gaussian weights: about 0.1 of their RMS; an 8-bit absmax within half the map's widest gap
   * (0.9 / 64, between its values in [0.1, 1]) of its group's constant */
  CU_ASSERT(sqrt(err / sq) > 0.05 && sqrt(err / sq) < 0.13);
  CU_ASSERT(aerr > 0 && aerr <= 0.9 / 64 / 2 * (1 + 1e-6));
}

int main(void) {
  static const px_test tests[] = {
      {"NF4 values: bitsandbytes' table, every code back, the tree's thresholds the midpoints", test_values},
      {"NF4 by hand: codes, packing (first element high), an odd tail, a block of zeros", test_by_hand},
      {"NF4 blocks of 64 against the reference, bitwise: codes, absmax, dequantised values; nearest", test_random},
      {"the absmaxes' 8-bit dynamic map: create_dynamic_map's values, ascending, every code back",
       test_dynamic_map},
      {"NF4 with double quantisation as the executor stores it, bitwise against the reference: layout, 8-bit "
       "absmaxes, constants, mean; dequantised values", test_double_quant},
  };
  return px_test_main("nf4", tests, sizeof tests / sizeof tests[0]);
}
