/* Dropout forward and backward over contiguous buffers. */
#include "kernels/cpu/dropout.h"

#include "kernels/math.h"

void px_k_dropout_fwd(float *out, uint8_t *mask, const float *inp, int64_t n, float p, uint64_t seed,
                      uint64_t offset) {
  if (p >= 1.0f) {
    for (int64_t i = 0; i < n; i++) {
      mask[i] = 0;
      out[i] = 0.0f;
    }
    return;
  }
  float scale = 1.0f / (1.0f - p); /* exactly 1 when p = 0 */
  for (int64_t i = 0; i < n; i++) {
    uint8_t keep = px_dropout_keep(seed, offset + (uint64_t)i, p);
    mask[i] = keep;
    out[i] = keep ? inp[i] * scale : 0.0f;
  }
}

void px_k_dropout_bwd(float *dinp, const float *dout, const uint8_t *mask, int64_t n, float p) {
  if (p >= 1.0f) return;
  float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; i++)
    if (mask[i]) dinp[i] += dout[i] * scale;
}
