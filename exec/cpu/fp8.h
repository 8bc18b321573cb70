/* The cpu backend's fp8 emulation: CAST ops quantize fp32 tensors into fp8
 * codes with the recipe's scales, which this module keeps by the codes'
 * address (and moves with them through collectives); fp8 GEMMs get their
 * operands decoded to fp32 (weights quantized and decoded at use) and run in
 * fp32 (kernels/cpu/fp8.h has the formats). mxfp8 and nvfp4 (kernels/cpu/mx.h)
 * likewise: a cast writes the row-wise block-scaled copy into its buffer and
 * keeps the column-wise copy's values for the weight gradient, and a
 * sequence-parallel all-gather moves both (fp8.c). */
#ifndef PX_EXEC_CPU_FP8_H
#define PX_EXEC_CPU_FP8_H

#include "exec/backend.h"
#include "kernels/cpu/fp8.h"

typedef struct px_cpu_fp8 px_cpu_fp8;

/* nvfp4's random Hadamard signs, the run's (any fixed value: a weight gradient's two operands share it). */
#define PX_CPU_RHT_SEED 0x52485431ull

/* NULL when out of memory. */
px_cpu_fp8 *px_cpu_fp8_new(void);
void px_cpu_fp8_free(px_cpu_fp8 *s);

/* A CAST op: in[0] (fp32) into out[0]'s codes, E5M2 with PX_OPF_E5M2 else
 * E4M3; per-tensor amaxes are reduced by the op's comm (over the TP and EP
 * groups, so that ranks which exchange the codes share the scale). A cast
 * without an output (the weights' copies) does nothing: GEMMs quantize
 * weights at use. */
px_status px_cpu_fp8_cast(px_cpu_fp8 *s, const px_exec_op *e, px_err *err);

/* An fp8 GEMM's operands in fp32: *d is e with each fp8 input replaced by
 * its decoded values and the fp8 weight by its quantized-and-decoded copy,
 * in buffers the caller frees with px_cpu_fp8_release(scratch). */
px_status px_cpu_fp8_operands(px_cpu_fp8 *s, const px_exec_op *e, px_exec_op *d, void *scratch[PX_OP_INS], px_err *err);
void px_cpu_fp8_release(void *scratch[PX_OP_INS]);

/* A collective moved fp8 codes from in to out: out is decoded with in's
 * (per-tensor) scale from now on; codes with a column-wise copy (block-scaled,
 * or the experts' rows kept for their own scales) are an error (an all-to-all
 * leaves the copy behind). */
px_status px_cpu_fp8_moved(px_cpu_fp8 *s, const void *out, const void *in, uint64_t count_out, px_err *err);

/* Whether the codes at p are an mxfp8 or nvfp4 tensor's. */
bool px_cpu_fp8_block_scaled(px_cpu_fp8 *s, const void *p);

/* Gathers `bytes` from each member of the caller's group into out, in rank order (ctx: the caller's). */
typedef px_status (*px_cpu_fp8_gather_fn)(void *ctx, void *out, const void *in, uint64_t bytes, px_err *err);

/* A sequence-parallel all-gather over `ranks` ranks of the block-scaled codes at in (this rank's shard of the
 * tokens) into out: the row-wise copies' codes and scales laid out as one tensor's, and the column-wise copies
 * each rank made of its shard, through gather (Transformer Engine's _all_gather_mxfp8, _all_gather_nvfp4). */
px_status px_cpu_fp8_gather(px_cpu_fp8 *s, px_cpu_fp8_gather_fn gather, void *ctx, void *out, const void *in,
                            int64_t ranks, px_err *err);

/* The codes at in (a sequence-parallel all-gather's: ranks x seqs shards of a sequence's tokens) into out, in
 * (seqs, ranks) order, with their scales and column-wise copy (exec/backend.h, codes_permuted). */
px_status px_cpu_fp8_permuted(px_cpu_fp8 *s, void *out, const void *in, int64_t ranks, int64_t seqs, px_err *err);

/* The codes at `from` (with their scales and column-wise copy) are at `to` now: activation offload's copy to
 * host memory and back. Nothing when no codes are at `from`. */
void px_cpu_fp8_rekey(px_cpu_fp8 *s, const void *to, const void *from);
/* Drops the scales of codes in [p, p + bytes) (released memory). */
void px_cpu_fp8_forget(px_cpu_fp8 *s, const void *p, uint64_t bytes);

/* The bookkeeping the cuda backend shares (its codes on the device, their
 * scales here, so that both backends scale alike, op for op). */

/* The per-tensor scale of CAST op e (format f) whose input's amax, reduced
 * as px_cpu_fp8_cast reduces it, is amax: current scaling's, or delayed
 * scaling's from the history of (its output slot, layer). */
px_status px_cpu_fp8_cast_scale(px_cpu_fp8 *s, const px_exec_op *e, float amax, px_fp8_format f, float *scale,
                                px_err *err);
/* The E4M3 scale of fp8 GEMM e's weight (slot ws) whose amax is amax. */
px_status px_cpu_fp8_weight_scale(px_cpu_fp8 *s, const px_exec_op *e, int32_t ws, float amax, float *scale,
                                  px_err *err);
/* Notes that the n codes at p (format f) were made with one scale. */
px_status px_cpu_fp8_note(px_cpu_fp8 *s, const void *p, uint64_t n, px_fp8_format f, float scale, px_err *err);
/* The per-tensor scale and format of the codes at p; false when none was noted (or they are blockwise). */
bool px_cpu_fp8_scale_of(px_cpu_fp8 *s, const void *p, float *scale, px_fp8_format *f);

/* The backends' amax_histories entry (exec/backend.h): delayed scaling's
 * histories of keys[0..n), saved into hist or (load) taken from it. */
px_status px_cpu_fp8_histories(px_cpu_fp8 *s, bool load, const px_amax_key *keys, int64_t n, int64_t step,
                               float *hist, px_err *err);

/* Whether the cpu backend runs fp8 op e (a CAST, an fp8 GEMM, or a
 * collective of fp8 codes; with mxfp8 and nvfp4 the casts, the linear
 * layers' GEMMs and sequence parallelism's all-gathers; no buffers); why
 * says what it does not. */
bool px_cpu_fp8_supports(const px_exec_op *e, char *why, size_t cap);

#endif
