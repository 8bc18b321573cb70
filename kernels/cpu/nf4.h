/* NF4, 4-bit NormalFloat (Dettmers et al. 2023, "QLoRA", section 3) as bitsandbytes stores a frozen weight
 * (quantize_4bit / dequantize_4bit with quant_type "nf4", blocksize 64): per block of 64 consecutive elements an
 * fp32 absmax, each element x coded as the nearest of 16 values to x / absmax (bitsandbytes' decision tree on
 * x * (1 / absmax)), two codes a byte, the block's first element in the high nibble; decoded as value[code] x
 * absmax. The values and the tree are bitsandbytes' (csrc/kernels.cu, cited with its commit in
 * tests/data/nf4_bitsandbytes.md). With double quantisation (compress_statistics=True, px_k_nf4_pack below) the
 * absmaxes are stored in 8 bits, as the executor holds an nf4 base. */
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

/* ---- double quantisation (QLoRA section 3; bitsandbytes' quantize_4bit with compress_statistics=True) ---- */

#define PX_NF4_DQ_BLOCK 256 /* absmaxes per second-level fp32 constant (quantize_blockwise's blocksize 256) */

/* bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), the 8-bit code of the
 * absmaxes: for i = 0..6 the means of adjacent points of linspace(0.1, 1, 2^i + 1) times +-10^(i - 6), then 0
 * and 1, sorted; computed in fp32 as torch does it on the CPU (the linspace's scalar formula, each mean
 * (a + b) / 2, each product with fp32(10^(i - 6))). */
void px_k_nf4_dynamic_map(float map[256]);
/* x's 8-bit code in `code` (256 ascending values): dQuantize<0>'s binary search from 127 in 7 halvings, then
 * the nearer of the pivot and its neighbour by the fp32 midpoint (a tie, and a NaN, to the pivot's side). */
uint8_t px_k_q8_encode(const float code[256], float x);

/* One quantized weight's storage: codes ((n + 1) / 2 bytes), the 8-bit absmaxes (ceil(n / 64) bytes), their
 * fp32 constants (4 x ceil(absmaxes / 256) bytes) and the fp32 offset (4 bytes), in that order, the fp32 ones
 * unaligned (written and read byte by byte). */
uint64_t px_k_nf4_storage_bytes(uint64_t n);
/* Its parts for n elements (header-only: kernels/cuda/nf4.cu reads the same storage): `blocks` absmaxes in
 * `groups` of 256, each part's byte offset. */
typedef struct {
  uint64_t blocks, groups, absmax_at, consts_at, offset_at;
} px_nf4_layout;
static inline px_nf4_layout px_k_nf4_layout(uint64_t n) {
  px_nf4_layout l;
  l.blocks = (n + PX_NF4_BLOCK - 1) / PX_NF4_BLOCK;
  l.groups = (l.blocks + PX_NF4_DQ_BLOCK - 1) / PX_NF4_DQ_BLOCK;
  l.absmax_at = (n + 1) / 2;
  l.consts_at = l.absmax_at + l.blocks;
  l.offset_at = l.consts_at + 4 * l.groups;
  return l;
}
/* x (n) into storage (px_k_nf4_storage_bytes(n)), absmax (ceil(n / 64)) its scratch: px_k_nf4_quantize, then the absmaxes double-quantised as
 * bitsandbytes does: offset = their mean (in fp32: summed in double, rounded once; torch's reduction order
 * may differ in the last bit), each absmax - offset coded with px_k_q8_encode(the dynamic map, .) times
 * 1 / the largest |absmax - offset| of its 256 (quantize_blockwise). */
void px_k_nf4_pack(const float *x, uint64_t n, uint8_t *storage, float *absmax);
/* storage (as px_k_nf4_pack writes it) back into out (n) in fp32, as bitsandbytes' dequantize_4bit: each absmax
 * map[q] x constant + offset (dequantize_blockwise, then += offset), then value[code] x absmax. */
void px_k_nf4_unpack(const uint8_t *storage, uint64_t n, float *out);

#endif
