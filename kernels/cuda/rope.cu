/* RoPE: one thread per (b, t, i) pair index computes the angle once (double,
 * as the CPU does) and rotates that pair in every head; with a partial rotary
 * the slots past the rotated pairs copy two passed-through dims each. */
#include "kernels/cuda/rope.h"

#include "kernels/math.h"

/* sign = +1 rotates by +angle (forward), -1 by -angle (backward); accumulate
 * adds the result to out instead of writing it. cos and sin carry the
 * rotation's concentration factor. */
template <typename T>
static __global__ void rope_kernel(T *out, const T *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                                   px_rope r, float sign, bool accumulate) {
  const int64_t half = d / 2, rot = px_rope_dims(&r, d), rhalf = rot / 2;
  const float conc = (float)r.concentration;
  PX_KC_FOR(idx, b * t * half) {
    int64_t i = idx % half, bt = idx / half, ti = bt % t;
    if (i >= rhalf) { /* a slot past the rotated pairs: two of the dims passed through, in every head */
      int64_t j = rot + 2 * (i - rhalf);
      for (int64_t hi = 0; hi < h; hi++)
        for (int64_t k = j; k < j + 2; k++) {
          int64_t o = (bt * h + hi) * d + k;
          float y = px_kc_ld(inp + o);
          px_kc_st(out + o, accumulate ? y + px_kc_ld(out + o) : y);
        }
      continue;
    }
    double ang = px_rope_angle(pos0 + ti, i, rot, &r);
    float cs = conc * (float)cos(ang), sn = sign * conc * (float)sin(ang);
    for (int64_t hi = 0; hi < h; hi++) {
      int64_t base = (bt * h + hi) * d;
      float x1 = px_kc_ld(inp + base + i), x2 = px_kc_ld(inp + base + i + rhalf);
      float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
      if (accumulate) {
        y1 += px_kc_ld(out + base + i);
        y2 += px_kc_ld(out + base + i + rhalf);
      }
      px_kc_st(out + base + i, y1);
      px_kc_st(out + base + i + rhalf, y2);
    }
  }
}

template <typename T>
static px_status rope(T *out, const T *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                      const px_rope *r, float sign, bool accumulate, cudaStream_t stream) {
  if (b <= 0 || t <= 0 || h <= 0 || d < 2) return PX_OK;
  rope_kernel<<<px_kc_blocks(b * t * (d / 2), PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, inp, b, t, h, d, pos0,
                                                                                          *r, sign, accumulate);
  return PX_KC_LAUNCHED("rope_kernel");
}

#define ROPE_FWD(T) (T *out, const T *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, \
    const px_rope *r, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_rope_fwd, ROPE_FWD, rope(out, inp, b, t, h, d, pos0, r, 1.0f, false, stream))

#define ROPE_BWD(T) (T *dinp, const T *dout, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0, \
    const px_rope *r, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_rope_bwd, ROPE_BWD, rope(dinp, dout, b, t, h, d, pos0, r, -1.0f, true, stream))

