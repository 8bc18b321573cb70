/* fp8 emulation: the OCP 8-bit floating-point formats (E4M3, E5M2) as byte
 * codes, encoded from and decoded to fp32, and scaled quantization (one
 * scale per tensor, per 1 x B tile of a row, or per B x B block). */
#ifndef PX_KERNELS_CPU_FP8_H
#define PX_KERNELS_CPU_FP8_H

#include <stdint.h>

/* E4M3 (bias 7, max 448, no infinity, NaN S.1111.111) for weights and
 * activations; E5M2 (bias 15, max 57344, IEEE-like inf and NaN) for gradients. */
typedef enum { PX_FP8_E4M3, PX_FP8_E5M2, PX_FP8_FORMAT_COUNT } px_fp8_format;

/* The largest finite value of format f (448, 57344). */
float px_k_fp8_max(px_fp8_format f);
/* x rounded to the nearest code (ties to even), saturating beyond the
 * largest finite value (infinities too); NaN gives a NaN code. */
uint8_t px_k_fp8_encode(float x, px_fp8_format f);
/* The value of code c (exact in fp32). */
float px_k_fp8_decode(uint8_t c, px_fp8_format f);

/* The largest |x| over n elements, NaNs skipped (0 for none). */
float px_k_fp8_amax(const float *x, int64_t n);
/* The scale that maps amax onto the format's largest value (1 when amax is
 * 0 or not finite): x scale is what is encoded, code / scale what it means. */
float px_k_fp8_scale(float amax, px_fp8_format f);

/* q = encode(x scale) over n elements (one scale: per-tensor scaling). */
void px_k_fp8_quantize(uint8_t *q,       // (n)
                       const float *x,   // (n)
                       int64_t n, float scale, px_fp8_format f);
/* y = decode(q) / scale. */
void px_k_fp8_dequantize(float *y,         // (n)
                         const uint8_t *q, // (n)
                         int64_t n, float scale, px_fp8_format f);

/* y = decode(encode(x scale)) / scale: the values x has in fp8. y may be x. */
void px_k_fp8_roundtrip(float *y,        // (n)
                        const float *x,  // (n)
                        int64_t n, float scale, px_fp8_format f);

/* Tiles of 1 x block along each row (DeepSeek-V3's activations and
 * gradients): scales[r nb + j] from the amax of tile j of row r, where
 * nb = ceil(cols / block) (the last tile may be short). */
void px_k_fp8_quantize_rows(uint8_t *q,      // (rows, cols)
                            float *scales,   // (rows, nb)
                            const float *x,  // (rows, cols)
                            int64_t rows, int64_t cols, int64_t block, px_fp8_format f);
void px_k_fp8_dequantize_rows(float *y,            // (rows, cols)
                              const uint8_t *q,    // (rows, cols)
                              const float *scales, // (rows, nb)
                              int64_t rows, int64_t cols, int64_t block, px_fp8_format f);

/* y = decode(encode(x s)) / s with one s per block x block block of a
 * (rows, cols) matrix (DeepSeek-V3's weights), from the block's amax: the
 * values an fp8 GEMM reads, the codes into q unless it is NULL. y may be x. */
void px_k_fp8_roundtrip_blocks(float *y,        // (rows, cols)
                               uint8_t *q,      // (rows, cols) or NULL
                               const float *x,  // (rows, cols)
                               int64_t rows, int64_t cols, int64_t block, px_fp8_format f);

#endif
