/* Block-scaled formats' emulation (Blackwell's tensor-core formats): MXFP8
 * (OCP Microscaling Formats (MX) Specification v1.0, 2023: E4M3 or E5M2
 * elements, one E8M0 power-of-two scale per 32 consecutive elements) and
 * NVFP4 (E2M1 elements, one E4M3 scale per 16 elements, 1 x 16 or 16 x 16,
 * and one fp32 scale per tensor: NVIDIA, "Pretraining Large Language Models
 * with NVFP4", arXiv 2509.25149), with round to
 * nearest even or stochastic rounding, and the 16-point random Hadamard
 * transform that recipe applies to the weight gradient's inputs. */
#ifndef PX_KERNELS_CPU_MX_H
#define PX_KERNELS_CPU_MX_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h" /* PX_MX_BLOCK, PX_NVFP4_BLOCK */
#include "kernels/cpu/fp8.h"

#define PX_E8M0_NAN 0xff  /* the E8M0 code of NaN: every element of its block is NaN */

/* ---- E8M0 scales: 2^(c - 127), c in 0..254; 255 NaN ---- */
float px_k_e8m0_decode(uint8_t c);

/* ---- E2M1 (FP4): sign, 2 exponent bits (bias 1), 1 mantissa bit; the
 * magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no infinity or NaN. Codes are
 * 4 bits (sign 0x8); packed two a byte, element 2i in the low nibble. ---- */
#define PX_FP4_MAX 6.0f
/* x to the nearest code, ties to even, saturating at +-6 (infinities too); a
 * NaN has no code (0: a NaN's block carries it in its scale). */
uint8_t px_k_fp4_encode(float x);
/* The same rounded stochastically: up in magnitude with probability the
 * fraction of the way |x| is between its two neighbours, by the draw r
 * (24 uniform bits): up when r < fraction 2^24. */
uint8_t px_k_fp4_encode_sr(float x, uint32_t r);
float px_k_fp4_decode(uint8_t c);

/* Stochastic rounding's draws: element `index`'s 24 uniform bits of stream
 * `seed` (splitmix64 of the two), so that a rounding is reproducible from
 * (seed, index) alone, on any thread count. */
uint32_t px_k_sr_bits(uint64_t seed, uint64_t index);

/* Stochastic rounding for a quantization: element i of it draws
 * px_k_sr_bits(seed, offset + i) (i counts the whole (rows, cols) row-major). */
typedef struct {
  uint64_t seed, offset;
} px_k_sr;

/* ---- MXFP8 (OCP MX v1.0, its conversion of floats to MX): per block of 32 along a row, the
 * shared exponent floor(log2(amax)) - emax of the element format (8 for
 * E4M3, 15 for E5M2), clamped to E8M0's [-127, 127]; elements x / 2^shared
 * rounded to nearest even, saturating (the spec's clamp to the largest
 * normal). A block of zeros gets 2^-127; a block holding an infinity or NaN
 * gets the NaN scale (E4M3 has no infinity; we use it for both formats).
 * The last block of a row may be short. ---- */
void px_k_mxfp8_quantize(uint8_t *q,       // (rows, cols)
                         uint8_t *scales,  // (rows, ceil(cols / 32))
                         const float *x,   // (rows, cols)
                         int64_t rows, int64_t cols, px_fp8_format f);
/* y = decode(q) 2^(scale - 127) (exact in fp32). */
void px_k_mxfp8_dequantize(float *y,              // (rows, cols)
                           const uint8_t *q,      // (rows, cols)
                           const uint8_t *scales, // (rows, ceil(cols / 32))
                           int64_t rows, int64_t cols, px_fp8_format f);

/* ---- NVFP4 (arXiv 2509.25149, in fp32 arithmetic): the tensor's
 * encode scale s = 6 x 448 / amax (1 when amax is 0 or not finite, fp32's
 * largest when the quotient overflows); a block's scale code
 * e4m3((amax_b s) / 6) (nearest even, saturating), its decode scale d the
 * code's value; elements x (s / d) to E2M1 (nearest even, or stochastically
 * with sr), all zeros where d is 0; a block holding an infinity or NaN gets
 * the E4M3 NaN code as its scale. Blocks are block_rows x 16 (block_rows 1:
 * activations and gradients; 16: weights, so that the transposed copy holds
 * the same values), the last ones short where the shape is not a multiple. ---- */
float px_k_nvfp4_tensor_scale(float amax); /* amax: px_k_fp8_amax of the tensor */
void px_k_nvfp4_quantize(uint8_t *q,          // ((rows cols + 1) / 2): packed codes
                         uint8_t *scales,     // (ceil(rows / block_rows), ceil(cols / 16))
                         const float *x,      // (rows, cols)
                         int64_t rows, int64_t cols, int64_t block_rows, float s, const px_k_sr *sr);
/* y = code's value (d / s), d / s once a block in fp32 (exact products). */
void px_k_nvfp4_dequantize(float *y,              // (rows, cols)
                           const uint8_t *q,      // ((rows cols + 1) / 2)
                           const uint8_t *scales, // (ceil(rows / block_rows), ceil(cols / 16))
                           int64_t rows, int64_t cols, int64_t block_rows, float s);

/* ---- The 16-point random Hadamard transform (arXiv 2509.25149: on both
 * inputs of the weight gradient's GEMM, along the dimension it contracts): y = (H16 diag(signs) / 4) x on each group of 16 consecutive
 * rows of every column, H16 the Sylvester Hadamard matrix (entry (i, j) is
 * (-1)^popcount(i & j)), sign j of seed's draw px_k_sr_bits(seed, 0) bit j.
 * Orthogonal, so y_a^T y_b = x_a^T x_b in exact arithmetic. rows a
 * multiple of 16; y may be x. ---- */
void px_k_rht16(float *y,        // (rows, cols)
                const float *x,  // (rows, cols)
                int64_t rows, int64_t cols, uint64_t seed);

#endif
