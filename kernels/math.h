/* Per-element math shared by the CPU kernels (C11) and the CUDA kernels
 * (device code): activations and their derivatives, RoPE frequencies, and the
 * counter-based RNG behind dropout, the AdamW update. Everything is static inline and PX_HD. */
#ifndef PX_KERNELS_MATH_H
#define PX_KERNELS_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PX_HD __host__ __device__
#else
#define PX_HD
#endif

/* sqrt(2 / pi), the GPT-2 tanh-GELU constant. */
#define PX_GELU_SCALE 0.7978845608028654f
#define PX_GELU_CUBE 0.044715f

/* GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static inline PX_HD float px_gelu(float x) {
  float u = PX_GELU_SCALE * (x + PX_GELU_CUBE * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

/* d px_gelu / dx. */
static inline PX_HD float px_gelu_grad(float x) {
  float u = PX_GELU_SCALE * (x + PX_GELU_CUBE * x * x * x);
  float th = tanhf(u);
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * PX_GELU_SCALE * (1.0f + 3.0f * PX_GELU_CUBE * x * x);
}

#ifndef __CUDACC__
/* Host-only fast forms for the CPU kernels' vectorised loops (straight-line
 * float arithmetic, clamps as selects, no libm call; the device keeps its own
 * intrinsics). Each is checked against double over a dense grid in
 * tests/test_kernels.c (test_fast_math), which pins the bounds stated here. */

/* e^x, Cephes' expf: x = n ln2 + r (|r| <= ln2 / 2, ln2 in two parts so n ln2
 * is exact), a degree-7 polynomial for e^r, 2^n from the exponent bits. x is
 * clamped to [-87, 88] (so 2^n stays normal): relative error <= 1e-7
 * (measured 8.3e-8, 1.4 ulp) there; below -87 it returns e^-87 = 1.6e-38,
 * not 0, above 88 e^88; NaN stays NaN. */
static inline float px_exp_fast(float x) {
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  /* round(x / ln2) by the 1.5 2^23 trick: t's low mantissa bits hold n */
  const float t = x * 1.44269504088896341f + 12582912.0f, n = t - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  uint32_t bits; /* 2^n: n + 127 into the exponent field, in unsigned arithmetic (NaN gives junk, not UB) */
  memcpy(&bits, &t, sizeof bits);
  bits = (bits - 0x4B400000u + 127u) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

/* px_gelu through 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)): the same function,
 * with the tanh taken as 2 s - 1 of the logistic s = 1 / (1 + e^(-2u)) on
 * px_exp_fast. No cancellation where tanh(u) -> -1, so it is more accurate
 * than the tanhf form (x <= -3: 0.5 x (1 + tanhf(u)) loses up to 5e-5
 * relative): against the double-precision tanh GELU over [-20, 20] in steps
 * of 1e-5, |error| <= 6e-7 (measured 5.2e-7) and relative error <= 1.5e-6
 * (1.2e-6) where |gelu| >= 1e-3, most of it the float rounding of u itself;
 * the tanh it implies (2 s - 1) is within 2.5e-7 (2.4e-7) of tanh(u). */
static inline float px_gelu_fast(float x) {
  const float u = PX_GELU_SCALE * (x + PX_GELU_CUBE * x * x * x);
  return x / (1.0f + px_exp_fast(-2.0f * u));
}

/* d px_gelu / dx the same way: 0.5 (1 + tanh) = s and sech^2 = 4 s (1 - s),
 * with 1 - s = e s (e = e^(-2u); no cancellation, no inf * 0 since e is
 * clamped): s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 0.044715 x^2); |error| <=
 * 3e-7 (measured 2.1e-7) against double over the same grid. */
static inline float px_gelu_grad_fast(float x) {
  const float x2 = x * x;
  const float u = PX_GELU_SCALE * (x + PX_GELU_CUBE * x2 * x);
  const float e = px_exp_fast(-2.0f * u), s = 1.0f / (1.0f + e);
  return s + 2.0f * PX_GELU_SCALE * x * (1.0f + 3.0f * PX_GELU_CUBE * x2) * (s * (e * s));
}

/* px_sigmoid on px_exp_fast, one branch-free form: 1 / (1 + e^-x) (e^-x
 * clamped, so no inf); relative error <= 2e-7 (measured 1.5e-7) over
 * [-20, 20]. */
static inline float px_sigmoid_fast(float x) { return 1.0f / (1.0f + px_exp_fast(-x)); }
#endif

/* Logistic sigmoid, written so that neither branch overflows. */
static inline PX_HD float px_sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

/* SiLU (swish): x sigmoid(x). */
static inline PX_HD float px_silu(float x) { return x * px_sigmoid(x); }

/* d px_silu / dx = s (1 + x (1 - s)), s = sigmoid(x). */
static inline PX_HD float px_silu_grad(float x) {
  float s = px_sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

/* A RoPE's frequencies and the factor on its cos and sin: theta's, or YaRN's
 * (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large
 * Language Models", section 3.2), each pair's frequency a blend of theta's
 * and theta's over the factor along a ramp between the dimensions that turn
 * beta_fast and beta_slow times over the original context, as Hugging Face's
 * _compute_yarn_parameters and Megatron-Core's YarnRotaryEmbedding compute it;
 * or Llama 3.1's (Meta's llama-models apply_scaling, Hugging Face's
 * _compute_llama3_parameters), a blend by wavelength; or linear interpolation's
 * (Chen et al. 2023, "Extending Context Window of Large Language Models via
 * Positional Interpolation"), every frequency over one factor. */
typedef struct {
  double theta;             /* the base */
  double concentration;     /* cos and sin times this (YaRN's attention factor; 1: none) */
  double yarn_factor;       /* the context's scaling factor; <= 1: none */
  double yarn_positions;    /* the context the frequencies were trained at */
  double yarn_beta_fast, yarn_beta_slow; /* the ramp's ends, in rotations over that context */
  int yarn_truncate;        /* the ends rounded outwards to whole dimensions */
  double llama3_factor;     /* Llama 3.1's scaling factor; <= 0: none */
  double llama3_positions;  /* its original context */
  double llama3_low, llama3_high; /* wavelengths over positions / low: slowed by the factor; under positions / high:
                                   * kept */
  double linear_factor;     /* linear position interpolation: every frequency over this; <= 0: none */
  int64_t dims;             /* the leading dims of a head it rotates, the rest passed through; 0: all */
} px_rope;

/* The dims of a d-wide head a rope rotates. */
static inline PX_HD int64_t px_rope_dims(const px_rope *r, int64_t d) { return r->dims > 0 ? r->dims : d; }

/* The rotary dimension (of d) whose wavelength turns `rotations` times over YaRN's original context. */
static inline PX_HD double px_rope_yarn_dim(double rotations, int64_t d, const px_rope *r) {
  return (double)d * log(r->yarn_positions / (rotations * 6.283185307179586)) / (2.0 * log(r->theta));
}

/* The frequency of pair i (0 <= i < D/2) of a D-wide rotation: theta^(-2i/D); with
 * linear interpolation that over its factor; with Llama 3.1's scaling that over the factor for long wavelengths, unscaled for short
 * ones, blended between; with YaRN that over the factor where the ramp is 1 (slow
 * pairs), unscaled where it is 0 (fast pairs), linear between. */
static inline PX_HD double px_rope_inv_freq(int64_t i, int64_t d, const px_rope *r) {
  double f = pow(r->theta, -2.0 * (double)i / (double)d);
  if (r->linear_factor > 0) return f / r->linear_factor;
  if (r->llama3_factor > 0) {
    double wavelen = 6.283185307179586 / f;
    if (wavelen < r->llama3_positions / r->llama3_high) return f;
    if (wavelen > r->llama3_positions / r->llama3_low) return f / r->llama3_factor;
    double smooth = (r->llama3_positions / wavelen - r->llama3_low) / (r->llama3_high - r->llama3_low);
    return (1.0 - smooth) * f / r->llama3_factor + smooth * f;
  }
  if (!(r->yarn_factor > 1.0)) return f;
  double lo = px_rope_yarn_dim(r->yarn_beta_fast, d, r), hi = px_rope_yarn_dim(r->yarn_beta_slow, d, r);
  if (r->yarn_truncate) lo = floor(lo), hi = ceil(hi);
  lo = fmax(lo, 0.0), hi = fmin(hi, (double)(d - 1));
  if (lo == hi) hi += 0.001; /* Hugging Face's guard against a zero-width ramp */
  double ramp = fmin(fmax(((double)i - lo) / (hi - lo), 0.0), 1.0);
  return f / r->yarn_factor * ramp + f * (1.0 - ramp);
}

/* RoPE angle of pair i (0 <= i < D/2) at position pos: pos times its frequency.
 * Computed in double on the host; float arithmetic is the device's business. */
static inline PX_HD double px_rope_angle(int64_t pos, int64_t i, int64_t d, const px_rope *r) {
  return (double)pos * px_rope_inv_freq(i, d, r);
}

/* splitmix64's output function (Steele, Lea, Flood 2014): a bijection on 64 bits. */
static inline PX_HD uint64_t px_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Counter-based random bits: element `counter` of the splitmix64 stream whose
 * start depends on seed. A pure function of (seed, counter), so a value never
 * depends on which thread, block or rank computes it. */
static inline PX_HD uint64_t px_rng_u64(uint64_t seed, uint64_t counter) {
  return px_mix64(px_mix64(seed) + counter * 0x9E3779B97F4A7C15ull);
}

/* Uniform in [0, 1) with 24 random bits, exactly representable in float. */
static inline PX_HD float px_rng_uniform(uint64_t seed, uint64_t counter) {
  return (float)(px_rng_u64(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

/* Dropout decision for one element: 1 keeps it, 0 drops it; p = 0 keeps all. */
static inline PX_HD uint8_t px_dropout_keep(uint64_t seed, uint64_t counter, float p) {
  return px_rng_uniform(seed, counter) >= p ? 1 : 0;
}

/* One AdamW element: updates *w, *m, *v from gradient g; bc1 = 1 - beta1^t,
 * bc2 = 1 - beta2^t. */
static inline PX_HD void px_adamw_update(float *w, float *m, float *v, float g, float lr, float beta1, float beta2,
                                         float eps, float weight_decay, float bc1, float bc2) {
  float mi = beta1 * *m + (1.0f - beta1) * g;
  float vi = beta2 * *v + (1.0f - beta2) * g * g;
  *m = mi;
  *v = vi;
  float mhat = mi / bc1, vhat = vi / bc2;
  *w -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * *w);
}

#endif
