/* Linear layers in the block templates (plan/linear.c): the forward and
 * the backward's data and weight gradients (fp8 where the input is; the
 * weight gradient in the W block of a split backward), and a branch's end
 * (the row-parallel linear, its TP reduction, bias and dropout). */
#ifndef PX_PLAN_LINEAR_H
#define PX_PLAN_LINEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/builder.h"

/* y_i = x W_i^T (+ b_i) for the sections of weight w's rows of widths n0, n1, n2 (a fused weight's outputs, e.g.
 * q, k, v); a section whose output is NOREF is not computed (part of a fused weight's output made again). */
px_op *px_linear(px_bld *b, const px_dims *d, px_phase ph, px_ref x, int w, int bias, px_ref y0, px_ref y1, px_ref y2,
                 int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k);

/* The input of a linear layer's weight gradient: with SP, the full sequence
 * all-gathered from the kept shard where the weight gradient runs (in the W
 * block when the backward is split, so B neither gathers nor holds it), but
 * with per-op recomputation, which made the full sequence again. */
px_ref px_linear_wgrad_input(px_bld *b, const px_dims *d, int w, px_ref shard, px_ref full);
/* Whether linear w's backward reads its input: for its own weight gradient
 * (w trained) or an adapter's (px_linear_adapter_slots). Not for a frozen
 * weight without adapters: its forward need not keep the input. */
bool px_linear_needs_input(const px_plan *p, int w);

/* Fine-tuning with adapters: the slots of the adapters lora_targets puts
 * beside linear w of k input columns and outputs of widths n[0..2] (one
 * rank's): adapter j < 3 on output j alone, adapter 3 on all of them; each
 * A (r, k) and B (n_j, r) parameters, and h = x A^T (B, S, r) kept for B's
 * gradient. A column-parallel layer's A is replicated over TP with a partial
 * gradient (each rank's B gives part of dh), a row-parallel one's B (each
 * rank's A gives part of h, completed by the output's TP reduction). */
void px_linear_adapter_slots(px_plan *p, const px_dims *d, int w, const int64_t n[3], int64_t k, bool row_parallel);
/* Keeps each adapter's h of linear w from the forward for the backward. */
void px_linear_adapter_keep(px_bld *b, int w);

/* dx += dy W (+ the adapters' dh A), then (reduce_into set) dx's TP reduction into *reduce_into,
 * then dW += dy^T x (+ db): Megatron's order, so the reduction can run on the
 * TP stream while the weight gradient is computed. With a split backward
 * (b->w) the weight gradient goes to the W block: x from x_shard and dy0
 * from dy_shard as wgrad_keep says. Returns the reduced dx. */
px_ref px_linear_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref x, px_ref x_shard, int w, int bias, px_ref dy0,
                     px_ref dy_shard, px_ref dy1, px_ref dy2, int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k,
                     const px_ref *reduce_into);

px_ref px_branch_end_fwd(px_bld *b, const px_dims *d, px_phase ph, int in, int w, int bias, int part, int out,
                         int dropped, int dmask, int64_t in_width, int site, px_ref *bias_left);

/* A branch's reduced output y through its bias and dropout (at `site`) into dropped. */
px_ref px_branch_dropout(px_bld *b, const px_dims *d, px_phase ph, px_ref y, int bias, int dropped, int dmask, int site,
                         px_ref *bias_left);

/* From the residual's gradient dres back through a branch's dropout (with
 * its mask): the gradient of the branch's reduced output (the sequence
 * shard's with SP). */
px_ref px_branch_dropout_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask);

/* Backward of a branch's end (attention or MLP): from the residual's
 * gradient dres through the dropout (with its mask) and the TP gather to the
 * row-parallel linear w (bias), whose input `in` of in_width columns gets its
 * gradient; with pre >= 0, `in` is gelu(pre) and the data-gradient GEMM's
 * epilogue gives pre's gradient instead. */
void px_branch_end_bwd(px_bld *b, const px_dims *d, px_ref dres, int out, int dmask, int part, int in, int w, int bias,
                       int64_t in_width, int pre);

#endif
