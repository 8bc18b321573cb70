/* Dropout forward and backward, one element per thread; the keep decision is
 * the shared px_dropout_keep, so masks match the CPU's for any launch shape. */
#include "kernels/cuda/dropout.h"

#include "kernels/math.h"

template <typename T>
static __global__ void dropout_fwd_kernel(T *out, uint8_t *mask, const T *inp, int64_t n, float p, float scale,
                                          uint64_t seed, uint64_t offset) {
  PX_KC_FOR(i, n) {
    uint8_t keep = p >= 1.0f ? 0 : px_dropout_keep(seed, offset + (uint64_t)i, p);
    mask[i] = keep;
    px_kc_st(out + i, keep ? px_kc_ld(inp + i) * scale : 0.0f);
  }
}

template <typename T>
static __global__ void dropout_bwd_kernel(T *dinp, const T *dout, const uint8_t *mask, int64_t n, float scale) {
  PX_KC_FOR(i, n) {
    if (mask[i]) px_kc_st(dinp + i, px_kc_ld(dinp + i) + px_kc_ld(dout + i) * scale);
  }
}

template <typename T>
static px_status dropout_fwd(T *out, uint8_t *mask, const T *inp, int64_t n, float p, uint64_t seed,
                             uint64_t offset, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p); /* exactly 1 when p = 0 */
  dropout_fwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, mask, inp, n, p, scale, seed,
                                                                                   offset);
  return PX_KC_LAUNCHED("dropout_fwd_kernel");
}

template <typename T>
static px_status dropout_bwd(T *dinp, const T *dout, const uint8_t *mask, int64_t n, float p, cudaStream_t stream) {
  if (n <= 0 || p >= 1.0f) return PX_OK;
  float scale = 1.0f / (1.0f - p);
  dropout_bwd_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(dinp, dout, mask, n, scale);
  return PX_KC_LAUNCHED("dropout_bwd_kernel");
}

#define DROPOUT_FWD(T) (T *out, uint8_t *mask, const T *inp, int64_t n, float p, uint64_t seed, uint64_t offset, \
    cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_dropout_fwd, DROPOUT_FWD, dropout_fwd(out, mask, inp, n, p, seed, offset, stream))

#define DROPOUT_BWD(T) (T *dinp, const T *dout, const uint8_t *mask, int64_t n, float p, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_dropout_bwd, DROPOUT_BWD, dropout_bwd(dinp, dout, mask, n, p, stream))

