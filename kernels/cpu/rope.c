/* Rotary position embedding: rotation forward, inverse rotation backward. The
 * angles are computed in double, then the rotation is applied in float. */
#include "kernels/cpu/rope.h"

#include <math.h>
#include <string.h>

/* sign = +1 rotates by +angle (forward), -1 by -angle (backward); accumulate
 * adds the result to out instead of writing it. cos and sin carry the
 * rotation's concentration factor (the transpose of c R is c R^T). */
static void rope(float *out, const float *inp, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                 const px_rope *r, float sign, int accumulate) {
  int64_t rot = px_rope_dims(r, d), half = rot / 2;
  float conc = (float)r->concentration;
  for (int64_t row = 0; row < b * t * h && rot < d; row++) /* the dims it does not rotate pass through */
    for (int64_t j = row * d + rot; j < (row + 1) * d; j++) out[j] = accumulate ? out[j] + inp[j] : inp[j];
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t ti = 0; ti < t; ti++) {
      for (int64_t i = 0; i < half; i++) {
        double ang = px_rope_angle(pos0 + ti, i, rot, r);
        float cs = conc * (float)cos(ang), sn = sign * conc * (float)sin(ang);
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
                   const px_rope *r) {
  rope(out, inp, b, t, h, d, pos0, r, 1.0f, 0);
}

void px_k_rope_bwd(float *dinp, const float *dout, int64_t b, int64_t t, int64_t h, int64_t d, int64_t pos0,
                   const px_rope *r) {
  rope(dinp, dout, b, t, h, d, pos0, r, -1.0f, 1);
}

/* Rotates the dr values of x into y (y may be x) at position pos, times gain: sign +1 forward, -1 inverse;
 * accumulate adds them to y. */
static void rotate(float *y, const float *x, int64_t dr, int64_t pos, const px_rope *r, float gain, float sign,
                   int accumulate) {
  int64_t half = dr / 2;
  for (int64_t i = 0; i < half; i++) {
    double ang = px_rope_angle(pos, i, dr, r);
    float cs = gain * (float)cos(ang), sn = sign * gain * (float)sin(ang), x1 = x[i], x2 = x[i + half];
    float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
    y[i] = accumulate ? y[i] + y1 : y1;
    y[i + half] = accumulate ? y[i + half] + y2 : y2;
  }
}

/* n values times s (a query head's non-rotated part). */
static void scale(float *x, int64_t n, float s) {
  if (s != 1.0f)
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

void px_k_mla_rope_fwd(float *q, float *k, const float *k_pe, int64_t b, int64_t t, int64_t hq, int64_t hkv,
                       int64_t dn, int64_t dr, int64_t pos0, const px_rope *r, float q_scale) {
  int64_t d = dn + dr;
  float conc = (float)r->concentration;
  for (int64_t row = b * t - 1; row >= 0; row--) { /* backwards: k widens in place, (dn) -> (dn + dr) a head */
    int64_t pos = pos0 + row % t;
    for (int64_t h = 0; h < hq; h++) {
      float *qh = q + (row * hq + h) * d;
      scale(qh, dn, q_scale);
      rotate(qh + dn, qh + dn, dr, pos, r, conc * q_scale, 1, 0);
    }
    for (int64_t h = hkv - 1; h >= 0; h--) {
      float *kh = k + (row * hkv + h) * d;
      memmove(kh, k + (row * hkv + h) * dn, (size_t)dn * sizeof *k);
      rotate(kh + dn, k_pe + row * dr, dr, pos, r, conc, 1, 0);
    }
  }
}

void px_k_mla_rope_bwd(float *dq, float *dk, float *dk_pe, int64_t b, int64_t t, int64_t hq, int64_t hkv, int64_t dn,
                       int64_t dr, int64_t pos0, const px_rope *r, float q_scale) {
  int64_t d = dn + dr;
  float conc = (float)r->concentration;
  for (int64_t row = 0; row < b * t; row++) { /* forwards: dk narrows in place, (dn + dr) -> (dn) a head */
    int64_t pos = pos0 + row % t;
    for (int64_t h = 0; h < hq; h++) {
      float *qh = dq + (row * hq + h) * d;
      scale(qh, dn, q_scale);
      rotate(qh + dn, qh + dn, dr, pos, r, conc * q_scale, -1, 0);
    }
    float *pe = dk_pe + row * dr;
    memset(pe, 0, (size_t)dr * sizeof *pe);
    for (int64_t h = 0; h < hkv; h++) {
      const float *kh = dk + (row * hkv + h) * d;
      rotate(pe, kh + dn, dr, pos, r, conc, -1, 1); /* every head's key shares the one RoPE key */
      memmove(dk + (row * hkv + h) * dn, kh, (size_t)dn * sizeof *dk);
    }
  }
}
