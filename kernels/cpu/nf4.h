/* NF4, 4-bit NormalFloat (Dettmers et al. 2023, "QLoRA", section 3) as bitsandbytes stores a frozen weight
 * (quantize_4bit / dequantize_4bit with quant_type "nf4", blocksize 64, no double quantisation): per block of
 * 64 consecutive elements an fp32 absmax, each element x coded as the nearest of 16 values to x / absmax
 * (bitsandbytes' decision tree on x * (1 / absmax)), two codes a byte, the block's first element in the high
 * nibble; decoded as value[code] x absmax. The values and the tree are bitsandbytes' (csrc/kernels.cu, cited with
 * its commit in tests/data/nf4_bitsandbytes.md). */
#ifndef PX_KERNELS_CPU_NF4_H
#define PX_KERNELS_CPU_NF4_H

#include <stdint.h>

#define PX_NF4_BLOCK 64 /* elements per absmax: bitsandbytes' default blocksize, QLoRA's */

/* The value of each code 0..15 (nf4_dequantization_lut), ascending, from -1 to 1, code 7 zero. */
extern const float px_nf4_values[16];

/* The code of x (already scaled to [-1, 1]): dQuantizeNF4's tree, each branch "x > threshold" at the midpoint of
 * two adjacent values (4 of its 15 fp32 literals 1 ulp from the midpoint of the table's values: kept, they are what
 * bitsandbytes codes with); a NaN gets code 0. */
uint8_t px_k_nf4_encode(float x);
/* x (n) into codes ((n + 1) / 2 bytes; an odd n's last low nibble codes a 0, as the kernel pads) and absmax (ceil(n / 64) fp32): a block's
 * absmax is max |x| over it; its elements are coded as x * (1 / absmax) (a block of zeros: 1 / 0 is infinity, every
 * product NaN (0 x inf), every code 0, decoded as -0). */
void px_k_nf4_quantize(const float *x, uint64_t n, uint8_t *codes, float *absmax);
/* codes and absmax (as px_k_nf4_quantize writes them) back into out (n): value[code] x absmax, in fp32. */
void px_k_nf4_dequantize(const uint8_t *codes, const float *absmax, uint64_t n, float *out);

#endif
