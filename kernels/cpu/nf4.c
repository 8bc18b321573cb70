/* NF4 quantisation and dequantisation as bitsandbytes does it (kernels/cpu/nf4.h). */
#include "kernels/cpu/nf4.h"

#include <math.h>

/* bitsandbytes csrc/kernels.cu, nf4_dequantization_lut */
const float px_nf4_values[16] = {
    -1.0f,                 -0.6961928009986877f,  -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f,  0.16093020141124725f,  0.24611230194568634f,  0.33791524171829224f,
    0.44070982933044434f,  0.5626170039176941f,   0.7229568362236023f,   1.0f};

/* bitsandbytes csrc/kernels.cu, dQuantizeNF4: the same tree, the same float thresholds */
uint8_t px_k_nf4_encode(float x) {
  if (x > 0.03979014977812767f) {
    if (x > 0.3893125355243683f) {
      if (x > 0.6427869200706482f) return x > 0.8614784181118011f ? 0xf : 0xe;
      return x > 0.5016634166240692f ? 0xd : 0xc;
    }
    if (x > 0.2035212516784668f) return x > 0.2920137718319893f ? 0xb : 0xa;
    return x > 0.1202552504837513f ? 0x9 : 0x8;
  }
  if (x > -0.33967943489551544f) {
    if (x > -0.13791173323988914f) return x > -0.045525018125772476f ? 0x7 : 0x6;
    return x > -0.23460740596055984f ? 0x5 : 0x4;
  }
  if (x > -0.6106329262256622f) return x > -0.4599952697753906f ? 0x3 : 0x2;
  return x > -0.8480964004993439f ? 0x1 : 0x0;
}

void px_k_nf4_quantize(const float *x, uint64_t n, uint8_t *codes, float *absmax) {
  for (uint64_t b = 0; b * PX_NF4_BLOCK < n; b++) {
    uint64_t lo = b * PX_NF4_BLOCK, hi = lo + PX_NF4_BLOCK < n ? lo + PX_NF4_BLOCK : n;
    float amax = -3.40282347e38f; /* -FLT_MAX, as the kernel starts its reduction */
    for (uint64_t i = lo; i < hi; i++) amax = fmaxf(amax, fabsf(x[i]));
    absmax[b] = amax;
    float inv = 1.0f / amax;
    for (uint64_t i = lo; i < hi; i++) {
      uint8_t c = px_k_nf4_encode(x[i] * inv);
      if (i % 2 == 0) codes[i / 2] = (uint8_t)(c << 4);
      else codes[i / 2] |= c;
    }
    if (hi % 2) codes[hi / 2] |= px_k_nf4_encode(0.0f * inv); /* the kernel codes the missing element as a 0 */
  }
}

void px_k_nf4_dequantize(const uint8_t *codes, const float *absmax, uint64_t n, float *out) {
  for (uint64_t i = 0; i < n; i++) {
    uint8_t c = i % 2 == 0 ? codes[i / 2] >> 4 : codes[i / 2] & 0xf;
    out[i] = px_nf4_values[c] * absmax[i / PX_NF4_BLOCK];
  }
}
