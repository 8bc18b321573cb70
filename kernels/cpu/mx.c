/* Block-scaled formats' emulation: MXFP8 (OCP MX v1.0) and NVFP4 (arXiv
 * 2509.25149) blocks, E2M1 codes, stochastic rounding, the 16-point random
 * Hadamard transform (the facts are in mx.h). */
#include "kernels/cpu/mx.h"

#include <float.h>
#include <math.h>

float px_k_e8m0_decode(uint8_t c) { return c == PX_E8M0_NAN ? NAN : ldexpf(1.0f, (int)c - 127); }

/* |x| < 6 (finite) split as t = |x| / unit, unit the spacing of E2M1's
 * values around |x| (0.5 below 2, then 1, then 2); e the exponent field - 1. */
static double fp4_units(float x, int *e) {
  double a = fabs((double)x);
  int k;
  frexp(a, &k); /* a = m 2^k, m in [0.5, 1) */
  *e = k - 1 < 0 ? 0 : k - 1;
  return ldexp(a, 1 - *e);
}

/* The code of n units at exponent e (n may carry into the next exponent). */
static uint8_t fp4_code(double n, int e) {
  uint32_t c = n < 2 ? (uint32_t)n : ((uint32_t)(e + 1) << 1) + ((uint32_t)n - 2);
  return (uint8_t)(c > 7 ? 7 : c);
}

uint8_t px_k_fp4_encode(float x) {
  if (isnan(x)) return 0;
  uint8_t sign = signbit(x) ? 0x8 : 0;
  if (fabsf(x) >= PX_FP4_MAX) return sign | 7;
  int e;
  double t = rint(fp4_units(x, &e)); /* ties to even in the default rounding mode */
  return sign | fp4_code(t, e);
}

uint8_t px_k_fp4_encode_sr(float x, uint32_t r) {
  if (isnan(x)) return 0;
  uint8_t sign = signbit(x) ? 0x8 : 0;
  if (fabsf(x) >= PX_FP4_MAX) return sign | 7;
  int e;
  double t = fp4_units(x, &e), n = floor(t);
  return sign | fp4_code((double)r < (t - n) * 0x1p24 ? n + 1 : n, e);
}

float px_k_fp4_decode(uint8_t c) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (c & 0x8) ? -mag[c & 7] : mag[c & 7];
}

uint32_t px_k_sr_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed ^ (index * 0x9e3779b97f4a7c15ull); /* splitmix64 (Steele et al. 2014) of the pair */
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (uint32_t)(z >> 40);
}

/* The largest |x| of a block and whether it holds an infinity or NaN. */
static float block_amax(const float *x, int64_t ld, int64_t h, int64_t w, bool *special) {
  float m = 0.0f;
  *special = false;
  for (int64_t r = 0; r < h; r++)
    for (int64_t i = 0; i < w; i++) {
      float a = fabsf(x[r * ld + i]);
      if (!isfinite(a)) *special = true;
      else if (a > m) m = a;
    }
  return m;
}

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

void px_k_mxfp8_quantize(uint8_t *q, uint8_t *scales, const float *x, int64_t rows, int64_t cols, px_fp8_format f) {
  int64_t nb = (cols + PX_MX_BLOCK - 1) / PX_MX_BLOCK;
  int emax = f == PX_FP8_E4M3 ? 8 : 15; /* the element format's largest exponent */
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < nb; j++) {
      int64_t at = r * cols + j * PX_MX_BLOCK, w = imin(cols - j * PX_MX_BLOCK, PX_MX_BLOCK);
      bool special;
      float amax = block_amax(x + at, cols, 1, w, &special);
      if (special) {
        scales[r * nb + j] = PX_E8M0_NAN;
        for (int64_t i = 0; i < w; i++) q[at + i] = 0;
        continue;
      }
      int k = -127;
      if (amax > 0.0f) {
        frexpf(amax, &k);
        k = k - 1 - emax; /* floor(log2(amax)) - emax */
        k = k < -127 ? -127 : k > 127 ? 127 : k;
      }
      scales[r * nb + j] = (uint8_t)(k + 127);
      for (int64_t i = 0; i < w; i++) q[at + i] = px_k_fp8_encode(ldexpf(x[at + i], -k), f);
    }
}

void px_k_mxfp8_dequantize(float *y, const uint8_t *q, const uint8_t *scales, int64_t rows, int64_t cols,
                           px_fp8_format f) {
  int64_t nb = (cols + PX_MX_BLOCK - 1) / PX_MX_BLOCK;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < nb; j++) {
      int64_t at = r * cols + j * PX_MX_BLOCK, w = imin(cols - j * PX_MX_BLOCK, PX_MX_BLOCK);
      uint8_t s = scales[r * nb + j];
      for (int64_t i = 0; i < w; i++)
        y[at + i] = s == PX_E8M0_NAN ? NAN : ldexpf(px_k_fp8_decode(q[at + i], f), (int)s - 127);
    }
}

float px_k_nvfp4_tensor_scale(float amax) {
  if (!(amax > 0.0f) || !isfinite(amax)) return 1.0f;
  float s = (PX_FP4_MAX * 448.0f) / amax;
  return isfinite(s) ? s : FLT_MAX;
}

static void put4(uint8_t *q, int64_t i, uint8_t c) {
  q[i / 2] = (uint8_t)(i % 2 ? (q[i / 2] & 0x0f) | (c << 4) : (q[i / 2] & 0xf0) | c);
}
static uint8_t get4(const uint8_t *q, int64_t i) { return (uint8_t)(i % 2 ? q[i / 2] >> 4 : q[i / 2] & 0x0f); }

void px_k_nvfp4_quantize(uint8_t *q, uint8_t *scales, const float *x, int64_t rows, int64_t cols, int64_t block_rows,
                         float s, const px_k_sr *sr) {
  int64_t nbc = (cols + PX_NVFP4_BLOCK - 1) / PX_NVFP4_BLOCK;
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows)
    for (int64_t j = 0; j < nbc; j++) {
      int64_t c0 = j * PX_NVFP4_BLOCK, h = imin(rows - r0, block_rows), w = imin(cols - c0, PX_NVFP4_BLOCK);
      bool special;
      float amax = block_amax(x + r0 * cols + c0, cols, h, w, &special);
      uint8_t sc = special ? 0x7f : px_k_fp8_encode(amax * s / PX_FP4_MAX, PX_FP8_E4M3);
      scales[(r0 / block_rows) * nbc + j] = sc;
      float d = px_k_fp8_decode(sc, PX_FP8_E4M3), enc = special || d == 0.0f ? 0.0f : s / d;
      for (int64_t r = r0; r < r0 + h; r++)
        for (int64_t i = c0; i < c0 + w; i++) {
          int64_t at = r * cols + i;
          float v = x[at] * enc;
          put4(q, at, enc == 0.0f ? 0 : sr ? px_k_fp4_encode_sr(v, px_k_sr_bits(sr->seed, sr->offset + (uint64_t)at))
                                           : px_k_fp4_encode(v));
        }
    }
}

void px_k_nvfp4_dequantize(float *y, const uint8_t *q, const uint8_t *scales, int64_t rows, int64_t cols,
                           int64_t block_rows, float s) {
  int64_t nbc = (cols + PX_NVFP4_BLOCK - 1) / PX_NVFP4_BLOCK;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < nbc; j++) {
      float t = px_k_fp8_decode(scales[(r / block_rows) * nbc + j], PX_FP8_E4M3) / s; /* NaN for the NaN code */
      for (int64_t i = j * PX_NVFP4_BLOCK; i < imin(cols, (j + 1) * PX_NVFP4_BLOCK); i++)
        y[r * cols + i] = px_k_fp4_decode(get4(q, r * cols + i)) * t;
    }
}

void px_k_rht16(float *y, const float *x, int64_t rows, int64_t cols, uint64_t seed) {
  uint32_t bits = px_k_sr_bits(seed, 0);
  float t[16][16]; /* H16 diag(signs) / 4 */
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++)
      t[i][j] = ((__builtin_popcount((unsigned)(i & j)) & 1) ? -0.25f : 0.25f) * ((bits >> j) & 1 ? -1.0f : 1.0f);
  float v[16];
  for (int64_t r0 = 0; r0 + 16 <= rows; r0 += 16)
    for (int64_t c = 0; c < cols; c++) {
      for (int j = 0; j < 16; j++) v[j] = x[(r0 + j) * cols + c];
      for (int i = 0; i < 16; i++) {
        float acc = 0.0f;
        for (int j = 0; j < 16; j++) acc += t[i][j] * v[j];
        y[(r0 + i) * cols + c] = acc;
      }
    }
}
