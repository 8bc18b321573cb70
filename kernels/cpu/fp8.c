/* fp8 emulation: E4M3 and E5M2 byte codes from fp32 and back, and scaled
 * quantization (per tensor, 1 x B row tiles, B x B blocks). The format facts
 * are the OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (2023): E4M3
 * has no infinities and one NaN mantissa (S.1111.111), so its largest value
 * is 1.75 x 2^8 = 448; E5M2 follows IEEE 754 (exponent 31: inf and NaNs), its
 * largest value 1.75 x 2^15 = 57344. Conversion saturates (the "satfinite"
 * mode Transformer Engine and DeepSeek-V3 use). */
#include "kernels/cpu/fp8.h"

#include <math.h>

typedef struct {
  int mbits, bias;
  uint8_t max_code; /* the largest finite magnitude's code */
} fmt;

static const fmt fmts[PX_FP8_FORMAT_COUNT] = {
    [PX_FP8_E4M3] = {3, 7, 0x7e},  /* 0.1111.110 = 1.75 x 2^8 */
    [PX_FP8_E5M2] = {2, 15, 0x7b}, /* 0.11110.11 = 1.75 x 2^15 */
};

float px_k_fp8_max(px_fp8_format f) { return f == PX_FP8_E4M3 ? 448.0f : 57344.0f; }

uint8_t px_k_fp8_encode(float x, px_fp8_format f) {
  const fmt *t = &fmts[f];
  if (isnan(x)) return 0x7f; /* a NaN in both formats */
  uint8_t sign = signbit(x) ? 0x80 : 0;
  double a = fabs((double)x);
  if (a >= (double)px_k_fp8_max(f)) return sign | t->max_code; /* saturate (infinities too) */
  int emin = 1 - t->bias; /* the smallest normal exponent */
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1): the unbiased exponent is e - 1 */
  e = e - 1 < emin ? emin : e - 1;
  /* the significand in units of the last place at exponent e, rounded to nearest even (the default
   * rounding mode); subnormals share emin's unit, so a value rounding up into the normals carries
   * into the exponent field by itself */
  double r = rint(ldexp(a, t->mbits - e));
  uint32_t code = r < ldexp(1.0, t->mbits) ? (uint32_t)r /* subnormal (e == emin) */
                                           : ((uint32_t)(e + t->bias) << t->mbits) + ((uint32_t)r - (1u << t->mbits));
  if (code > t->max_code) code = t->max_code; /* rounded past the largest finite value */
  return sign | (uint8_t)code;
}

float px_k_fp8_decode(uint8_t c, px_fp8_format f) {
  const fmt *t = &fmts[f];
  int ebits = 7 - t->mbits, e = (c >> t->mbits) & ((1 << ebits) - 1), m = c & ((1 << t->mbits) - 1);
  float s = (c & 0x80) ? -1.0f : 1.0f;
  if (f == PX_FP8_E4M3 && e == 15 && m == 7) return NAN;
  if (f == PX_FP8_E5M2 && e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexpf((float)m, 1 - t->bias - t->mbits);
  return s * ldexpf((float)((1 << t->mbits) + m), e - t->bias - t->mbits);
}

float px_k_fp8_amax(const float *x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float a = fabsf(x[i]);
    if (a > m) m = a; /* false for NaN */
  }
  return m;
}

float px_k_fp8_scale(float amax, px_fp8_format f) {
  return amax > 0.0f && isfinite(amax) ? px_k_fp8_max(f) / amax : 1.0f;
}

void px_k_fp8_quantize(uint8_t *q, const float *x, int64_t n, float scale, px_fp8_format f) {
  for (int64_t i = 0; i < n; i++) q[i] = px_k_fp8_encode(x[i] * scale, f);
}

/* The 256 codes' values over scale. */
static void table(float *lut, float scale, px_fp8_format f) {
  for (int c = 0; c < 256; c++) lut[c] = px_k_fp8_decode((uint8_t)c, f) / scale;
}

void px_k_fp8_dequantize(float *y, const uint8_t *q, int64_t n, float scale, px_fp8_format f) {
  float lut[256];
  table(lut, scale, f);
  for (int64_t i = 0; i < n; i++) y[i] = lut[q[i]];
}

void px_k_fp8_roundtrip(float *y, const float *x, int64_t n, float scale, px_fp8_format f) {
  float lut[256];
  table(lut, scale, f);
  for (int64_t i = 0; i < n; i++) y[i] = lut[px_k_fp8_encode(x[i] * scale, f)];
}

void px_k_fp8_quantize_rows(uint8_t *q, float *scales, const float *x, int64_t rows, int64_t cols, int64_t block,
                            px_fp8_format f) {
  int64_t nb = (cols + block - 1) / block;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < nb; j++) {
      int64_t at = r * cols + j * block, w = cols - j * block < block ? cols - j * block : block;
      float s = px_k_fp8_scale(px_k_fp8_amax(x + at, w), f);
      scales[r * nb + j] = s;
      px_k_fp8_quantize(q + at, x + at, w, s, f);
    }
}

void px_k_fp8_dequantize_rows(float *y, const uint8_t *q, const float *scales, int64_t rows, int64_t cols,
                              int64_t block, px_fp8_format f) {
  int64_t nb = (cols + block - 1) / block;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < nb; j++) {
      int64_t at = r * cols + j * block, w = cols - j * block < block ? cols - j * block : block;
      float s = scales[r * nb + j];
      for (int64_t i = 0; i < w; i++) y[at + i] = px_k_fp8_decode(q[at + i], f) / s;
    }
}

void px_k_fp8_roundtrip_blocks(float *y, uint8_t *q, const float *x, int64_t rows, int64_t cols, int64_t block,
                               px_fp8_format f) {
  for (int64_t r0 = 0; r0 < rows; r0 += block)
    for (int64_t c0 = 0; c0 < cols; c0 += block) {
      int64_t h = rows - r0 < block ? rows - r0 : block, w = cols - c0 < block ? cols - c0 : block;
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + h; r++) {
        float a = px_k_fp8_amax(x + r * cols + c0, w);
        if (a > amax) amax = a;
      }
      float s = px_k_fp8_scale(amax, f);
      for (int64_t r = r0; r < r0 + h; r++) {
        int64_t at = r * cols + c0;
        if (q) px_k_fp8_quantize(q + at, x + at, w, s, f), px_k_fp8_dequantize(y + at, q + at, w, s, f);
        else px_k_fp8_roundtrip(y + at, x + at, w, s, f);
      }
    }
}
