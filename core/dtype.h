/* Element types of tensors and GPU peak-rate tables. */
#ifndef PX_CORE_DTYPE_H
#define PX_CORE_DTYPE_H

#include <stdint.h>

typedef enum {
  PX_DTYPE_FP32,
  PX_DTYPE_TF32, /* fp32 storage, tensor-core math */
  PX_DTYPE_BF16,
  PX_DTYPE_FP16,
  PX_DTYPE_FP8,
  PX_DTYPE_U8,  /* masks */
  PX_DTYPE_FP4, /* E2M1: a GPU's fp4 peak (nvfp4's GEMMs); no tensor is stored as it (px_parallel_quant_bytes counts the codes' bytes) */
  PX_DTYPE_COUNT
} px_dtype;

extern const char *const px_dtype_names[PX_DTYPE_COUNT];

/* Block-scaled formats' blocks (kernels/cpu/mx.h): elements one scale covers along a row. */
#define PX_MX_BLOCK 32    /* MXFP8: an E8M0 scale per 32 (OCP MX v1.0) */
#define PX_NVFP4_BLOCK 16 /* NVFP4: an E4M3 scale per 16 (and 16 rows for weights' 16 x 16 blocks) */

static inline uint64_t px_dtype_bytes(px_dtype t) {
  switch (t) {
    case PX_DTYPE_FP32:
    case PX_DTYPE_TF32: return 4;
    case PX_DTYPE_BF16:
    case PX_DTYPE_FP16: return 2;
    default: return 1;
  }
}

/* Host conversions between fp32 and a storage dtype (bf16, fp16: round to
 * nearest even; fp32/tf32: copies). */
void px_dtype_from_fp32(void *dst, px_dtype dt, const float *src, uint64_t n);
void px_dtype_to_fp32(float *dst, const void *src, px_dtype dt, uint64_t n);

#endif
