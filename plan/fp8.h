/* Precision fp8 in the block templates (plan/fp8.c): the fp8 twins of
 * tensors, their casts, the weights' cast copies and fp8 GEMMs' flags. */
#ifndef PX_PLAN_FP8_H
#define PX_PLAN_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/builder.h"

uint16_t px_fp8_flags(const px_dims *d);

/* The tensor a fp8 GEMM reads for r: its twin with fp8, r otherwise. */
px_ref px_fp8_twin(px_plan *p, const px_dims *d, px_ref r);

/* x quantized into its fp8 twin (E4M3, E5M2 for gradients): one pass that
 * reads x and writes the row-wise and the transposed fp8 copies (Hopper's fp8
 * GEMMs take K-major operands only, so the forward and the weight gradient
 * need both); current scaling reads x once more for its amax first. The
 * twin, or x unchanged without fp8 or where it is fp8 codes already. */
px_ref px_fp8_cast(px_bld *b, const px_dims *d, px_phase ph, px_ref x, bool e5m2);

/* ZeRO-3 with fp8: the gathered weight w cast before its GEMM (the other
 * stages keep a cast copy for the step, px_plan_fp8_weight_elems). */
void px_fp8_weight_cast(px_bld *b, const px_dims *d, px_phase ph, int w);

/* Marks a GEMM op as fp8 and its weight as one with an fp8 copy. */
void px_fp8_gemm(px_bld *b, const px_dims *d, px_op *o, int w);

#endif
