/* Names of element types. */
#include "core/dtype.h"

#include <math.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_dtype_names, PX_DTYPE_COUNT, "fp32", "tf32", "bf16", "fp16", "fp8", "u8", "fp4");

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                         /* round to nearest even */
  return (uint16_t)(u >> 16);
}

static float f32_of_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t fp16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
  if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0)); /* inf, NaN */
  int32_t ex = (int32_t)e - 127 + 15;
  if (ex >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (ex <= 0) {                                   /* subnormal or zero */
    if (ex < -10) return (uint16_t)sign;
    m |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - ex);
    uint32_t half = m >> shift, rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)ex << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into the exponent: correct */
  return (uint16_t)half;
}

static float f32_of_fp16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  if (e == 31) {
    uint32_t u = sign | 0x7f800000u | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  uint32_t u = sign | ((e - 15 + 127) << 23) | (m << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void px_dtype_from_fp32(void *dst, px_dtype dt, const float *src, uint64_t n) {
  uint16_t *h = dst;
  switch (dt) {
    case PX_DTYPE_BF16:
      for (uint64_t i = 0; i < n; i++) h[i] = bf16_of(src[i]);
      break;
    case PX_DTYPE_FP16:
      for (uint64_t i = 0; i < n; i++) h[i] = fp16_of(src[i]);
      break;
    default: memmove(dst, src, n * sizeof *src); break;
  }
}

void px_dtype_to_fp32(float *dst, const void *src, px_dtype dt, uint64_t n) {
  const uint16_t *h = src;
  switch (dt) {
    case PX_DTYPE_BF16:
      for (uint64_t i = 0; i < n; i++) dst[i] = f32_of_bf16(h[i]);
      break;
    case PX_DTYPE_FP16:
      for (uint64_t i = 0; i < n; i++) dst[i] = f32_of_fp16(h[i]);
      break;
    default: memmove(dst, src, n * sizeof *dst); break;
  }
}
