/* NF4 quantisation and dequantisation as bitsandbytes does it (kernels/cpu/nf4.h). */
#include "kernels/cpu/nf4.h"

#include <math.h>
#include <stdlib.h> /* qsort */
#include <string.h>

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

/* ---- double quantisation ---- */

/* torch.linspace(0.1, 1, steps) in fp32 on the CPU: start + step * i below the half, end - step * (steps - 1 - i)
 * from it, step = (end - start) / (steps - 1) */
static float linspace_at(int64_t steps, int64_t i) {
  const float start = 0.1f, end = 1.0f, step = (end - start) / (float)(steps - 1);
  return i < steps / 2 ? start + step * (float)i : end - step * (float)(steps - 1 - i);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

void px_k_nf4_dynamic_map(float map[256]) {
  int n = 0;
  for (int i = 0; i < 7; i++) {
    int64_t items = ((int64_t)1 << i) + 1;
    float scale = (float)pow(10.0, i - 6); /* fp32(10 ** (i - 6)): the scalar as torch's fp32 mul takes it */
    for (int64_t j = 0; j + 1 < items; j++) {
      float mean = (linspace_at(items, j) + linspace_at(items, j + 1)) / 2.0f;
      map[n++] = scale * mean;
      map[n++] = -scale * mean;
    }
  }
  map[n++] = 0.0f;
  map[n++] = 1.0f;
  qsort(map, (size_t)n, sizeof *map, cmp_float);
}

/* bitsandbytes csrc/kernels.cu, dQuantize<0> */
uint8_t px_k_q8_encode(const float code[256], float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f, val = code[pivot];
  for (int i = 64; i > 0; i >>= 1) {
    if (x > val) lower_pivot = pivot, lower = val, pivot += i;
    else upper_pivot = pivot, upper = val, pivot -= i;
    val = code[pivot];
  }
  if (upper_pivot == 255) upper = code[upper_pivot];
  if (lower_pivot == 0) lower = code[lower_pivot];
  if (x > val) return (uint8_t)(x > (upper + val) * 0.5f ? upper_pivot : pivot);
  return (uint8_t)(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

uint64_t px_k_nf4_storage_bytes(uint64_t n) { return px_k_nf4_layout(n).offset_at + 4; }

void px_k_nf4_pack(const float *x, uint64_t n, uint8_t *storage, float *absmax) {
  px_nf4_layout l = px_k_nf4_layout(n);
  float map[256];
  px_k_nf4_quantize(x, n, storage, absmax);
  double sum = 0;
  for (uint64_t b = 0; b < l.blocks; b++) sum += absmax[b];
  float offset = l.blocks ? (float)(sum / (double)l.blocks) : 0.0f;
  for (uint64_t b = 0; b < l.blocks; b++) absmax[b] -= offset;
  px_k_nf4_dynamic_map(map);
  for (uint64_t g = 0; g < l.groups; g++) { /* quantize_blockwise's kernel: as the nf4 blocks, with the 8-bit code */
    uint64_t lo = g * PX_NF4_DQ_BLOCK, hi = lo + PX_NF4_DQ_BLOCK < l.blocks ? lo + PX_NF4_DQ_BLOCK : l.blocks;
    float amax = -3.40282347e38f;
    for (uint64_t b = lo; b < hi; b++) amax = fmaxf(amax, fabsf(absmax[b]));
    float inv = 1.0f / amax;
    for (uint64_t b = lo; b < hi; b++) storage[l.absmax_at + b] = px_k_q8_encode(map, absmax[b] * inv);
    memcpy(storage + l.consts_at + 4 * g, &amax, 4);
  }
  memcpy(storage + l.offset_at, &offset, 4);
}

void px_k_nf4_unpack(const uint8_t *storage, uint64_t n, float *out) {
  px_nf4_layout l = px_k_nf4_layout(n);
  float map[256], offset, c = 0;
  px_k_nf4_dynamic_map(map);
  memcpy(&offset, storage + l.offset_at, 4);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t b = i / PX_NF4_BLOCK;
    if (i % PX_NF4_BLOCK == 0 && b % PX_NF4_DQ_BLOCK == 0) memcpy(&c, storage + l.consts_at + 4 * (b / PX_NF4_DQ_BLOCK), 4);
    float absmax = map[storage[l.absmax_at + b]] * c + offset;
    uint8_t q = i % 2 == 0 ? storage[i / 2] >> 4 : storage[i / 2] & 0xf;
    out[i] = px_nf4_values[q] * absmax;
  }
}
