/* Per-element math shared by the CPU kernels (C11) and the CUDA kernels
 * (device code): activations and their derivatives, RoPE frequencies, and the
 * counter-based RNG behind dropout, the AdamW update. Everything is static inline and PX_HD. */
#ifndef PX_KERNELS_MATH_H
#define PX_KERNELS_MATH_H

#include <math.h>
#include <stdint.h>

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

/* RoPE angle of pair i (0 <= i < D/2) at position pos: pos * theta^(-2i/D).
 * Computed in double on the host; float arithmetic is the device's business. */
static inline PX_HD double px_rope_angle(int64_t pos, int64_t i, int64_t d, double theta) {
  return (double)pos * pow(theta, -2.0 * (double)i / (double)d);
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
