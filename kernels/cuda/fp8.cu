/* fp8 casts on the GPU (kernels/cuda/fp8.h): the OCP OFP8 rev 1.0 formats
 * of kernels/cpu/fp8.c, E4M3 (bias 7, largest 448, NaN S.1111.111) and E5M2
 * (bias 15, largest 57344), encoded with integer arithmetic on the fp32 bits. */
#include "kernels/cuda/fp8.h"

#include <string.h>

/* The code nearest |a| = x's magnitude (bits: x's), as px_k_fp8_encode:
 * r = a 2^(mbits - e) rounded to nearest even, e the exponent clamped to the
 * smallest normal one (subnormals share its unit, and a value rounding up
 * into the normals carries into the exponent field by itself). */
static __device__ __forceinline__ uint8_t encode(float x, bool e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const uint32_t max_code = e5m2 ? 0x7bu : 0x7eu;
  const float mx = e5m2 ? 57344.0f : 448.0f;
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint32_t abits = bits & 0x7fffffffu;
  if (abits > 0x7f800000u) return 0x7f; /* NaN: a NaN in both formats */
  uint8_t sign = (bits >> 31) ? 0x80 : 0;
  if (fabsf(x) >= mx) return sign | (uint8_t)max_code; /* saturate (infinities too) */
  int biased = (int)(abits >> 23);
  /* a = M 2^(E - 23) */
  uint64_t M = biased ? ((abits & 0x7fffffu) | 0x800000u) : (abits & 0x7fffffu);
  int E = biased ? biased - 127 : -126, emin = 1 - bias, e = E < emin ? emin : E;
  int s = 23 - mbits + (e - E); /* r = M / 2^s, s >= 20 */
  uint64_t r = 0;
  if (s < 40) {
    uint64_t q = M >> s, rem = M & ((1ull << s) - 1), half = 1ull << (s - 1);
    r = q + (rem > half || (rem == half && (q & 1)) ? 1 : 0);
  }
  uint32_t code = r < (1u << mbits) ? (uint32_t)r /* subnormal (e == emin) */
                                    : ((uint32_t)(e + bias) << mbits) + ((uint32_t)r - (1u << mbits));
  if (code > max_code) code = max_code; /* rounded past the largest finite value */
  return sign | (uint8_t)code;
}

/* The value of code c, exact in fp32 (px_k_fp8_decode). */
static __device__ __forceinline__ float decode(uint8_t c, bool e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, ebits = 7 - mbits;
  int e = (c >> mbits) & ((1 << ebits) - 1), m = c & ((1 << mbits) - 1);
  float s = (c & 0x80) ? -1.0f : 1.0f;
  if (!e5m2 && e == 15 && m == 7) return NAN;
  if (e5m2 && e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexpf((float)m, 1 - bias - mbits);
  return s * ldexpf((float)((1 << mbits) + m), e - bias - mbits);
}

/* ---- amax: two passes (px_kc_two_pass) ---- */

template <typename T>
static __global__ void amax_partial_kernel(float *partials, const T *x, int64_t n) {
  float m = 0.0f;
  PX_KC_FOR(i, n) m = fmaxf(m, fabsf(px_kc_ld(x + i))); /* fmaxf skips a NaN */
  m = px_kc_block_max(m);
  if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

template <typename T>
static px_status amax(float *out, const T *x, int64_t n, cudaStream_t stream) {
  return px_kc_two_pass<px_kc_max_op>(out, n, [&](int nblocks, float *partials) {
    amax_partial_kernel<<<nblocks, PX_KC_TWO_PASS_THREADS, 0, stream>>>(partials, x, n);
    return PX_KC_LAUNCHED("amax_partial_kernel");
  }, stream);
}

static px_status bad_dtype(px_dtype dt) {
  return px_kc_fail(__FILE__, __LINE__, "fp8: no kernel for %s elements (fp32 and bf16)", px_dtype_names[dt]);
}

extern "C" px_status px_kc_fp8_amax(float *out, const void *x, px_dtype dtype, int64_t n, cudaStream_t stream) {
  if (dtype == PX_DTYPE_FP32) return amax(out, (const float *)x, n, stream);
  if (dtype == PX_DTYPE_BF16) return amax(out, (const px_bf16 *)x, n, stream);
  return bad_dtype(dtype);
}

/* ---- quantize, dequantize, transpose ---- */

template <typename T>
static __global__ void quantize_kernel(uint8_t *q, const T *x, int64_t n, float scale, bool e5m2) {
  PX_KC_FOR(i, n) q[i] = encode(px_kc_ld(x + i) * scale, e5m2);
}

extern "C" px_status px_kc_fp8_quantize(uint8_t *q, const void *x, px_dtype dtype, int64_t n, float scale, bool e5m2,
                                        cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  if (dtype == PX_DTYPE_FP32)
    quantize_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(q, (const float *)x, n, scale, e5m2);
  else if (dtype == PX_DTYPE_BF16)
    quantize_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>(q, (const px_bf16 *)x, n, scale, e5m2);
  else
    return bad_dtype(dtype);
  return PX_KC_LAUNCHED("quantize_kernel");
}

template <typename T>
static __global__ void dequantize_kernel(T *y, const uint8_t *q, int64_t n, float scale, bool e5m2) {
  PX_KC_FOR(i, n) px_kc_st(y + i, decode(q[i], e5m2) / scale);
}

extern "C" px_status px_kc_fp8_dequantize(void *y, const uint8_t *q, px_dtype dtype, int64_t n, float scale,
                                          bool e5m2, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  if (dtype == PX_DTYPE_FP32)
    dequantize_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)y, q, n, scale, e5m2);
  else if (dtype == PX_DTYPE_BF16)
    dequantize_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_bf16 *)y, q, n, scale, e5m2);
  else
    return bad_dtype(dtype);
  return PX_KC_LAUNCHED("dequantize_kernel");
}

template <typename T>
static __global__ void unpack_kernel(T *y, const uint8_t *storage, int64_t n) {
  const uint8_t *at = storage + n; /* the scale, little-endian, as the CPU's memcpy stores it */
  uint32_t bits = (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  PX_KC_FOR(i, n) px_kc_st(y + i, decode(storage[i], false) / scale);
}

extern "C" px_status px_kc_fp8_unpack(void *y, const uint8_t *storage, px_dtype dtype, int64_t n,
                                      cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  if (dtype == PX_DTYPE_FP32)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)y, storage, n);
  else if (dtype == PX_DTYPE_BF16)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_bf16 *)y, storage, n);
  else if (dtype == PX_DTYPE_FP16)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_fp16 *)y, storage, n);
  else
    return px_kc_fail(__FILE__, __LINE__, "fp8: no unpacking into %s elements (fp32, bf16 and fp16)",
                      px_dtype_names[dtype]);
  return PX_KC_LAUNCHED("unpack_kernel");
}

/* One element per thread (a byte matrix made once per GEMM operand: simple
 * over fast; a tiled shared-memory transpose is the known improvement). */
static __global__ void transpose_kernel(uint8_t *out, const uint8_t *in, int64_t rows, int64_t cols) {
  PX_KC_FOR(i, rows * cols) {
    int64_t r = i / cols, c = i % cols;
    out[c * rows + r] = in[i];
  }
}

extern "C" px_status px_kc_fp8_transpose(uint8_t *out, const uint8_t *in, int64_t rows, int64_t cols,
                                         cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return PX_OK;
  transpose_kernel<<<px_kc_blocks(rows * cols, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, in, rows, cols);
  return PX_KC_LAUNCHED("transpose_kernel");
}
