/* Rotary position embedding: rotation forward, inverse rotation backward. The
 * angles are computed in double, then the rotation is applied in float. */
#include "kernels/cpu/rope.h"

#include <math.h>

#include "kernels/math.h"

/* sign = +1 rotates by +angle (forward), -1 by -angle (backward); accumulate
 * adds the result to out instead of writing it. */
static void rope(float *out, const float *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                 float theta, float sign, int accumulate) {
  int64_t half = d / 2;
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t ti = 0; ti < t; ti++) {
      for (int64_t i = 0; i < half; i++) {
        double ang = px_rope_angle(pos0 + ti, i, d, (double)theta);
        float cs = (float)cos(ang), sn = sign * (float)sin(ang);
        for (int64_t hi = 0; hi < h; hi++) {
          int64_t base = ((bi * t + ti) * h + hi) * d;
          float x1 = inp[base + i], x2 = inp[base + i + half];
          float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
          if (accumulate) {
            out[base + i] += y1;
            out[base + i + half] += y2;
          } else {
            out[base + i] = y1;
            out[base + i + half] = y2;
          }
        }
      }
    }
  }
}

void px_k_rope_fwd(float *out, const float *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                   float theta) {
  rope(out, inp, b, t, h, d, pos0, theta, 1.0f, 0);
}

void px_k_rope_bwd(float *dinp, const float *dout, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                   float theta) {
  rope(dinp, dout, b, t, h, d, pos0, theta, -1.0f, 1);
}
