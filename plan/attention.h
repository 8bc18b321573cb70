/* The attention of a layer block (plan/attention.c): q, k, v from the
 * norm's output (multi-head latent attention too), RoPE, the unfused or
 * fused attention with context parallelism, and their backward. */
#ifndef PX_PLAN_ATTENTION_H
#define PX_PLAN_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/builder.h"

/* ---- fused attention and context parallelism ----
 *
 * With cp > 1 a rank holds S = seq / cp tokens of each sequence (two chunks,
 * px_cp_position) for the whole layer; only the attention needs the other
 * ranks' keys and values:
 *   ring        the flash op itself passes K/V blocks around the CP ring, cp
 *               steps of (B, S) queries against (B, S) keys, each step's
 *               transfer overlapped with the previous block; the backward
 *               passes K/V and their gradient accumulators (2 cp - 1 hops);
 *   all-gather  K and V all-gathered over CP to (B, S cp) before the flash op,
 *               their gradients reduce-scattered after its backward;
 *   a2a         q, k, v all-to-all to the whole sequence of 1/cp of the heads,
 *               the context back (and the reverse in the backward).
 * The flash op's dims: B, query rows, query heads, kv heads, head dim, key
 * rows (over every ring step); its FLOPs those of the full rectangle (the
 * cost model takes the causal half), times attn_frac on a sliding-window
 * layer: its attended pairs over the causal pairs (px_attention_window_fraction),
 * each windowed layer having blocks of its own (px_layer_block), so a chunk
 * may hold any mix of windowed and full layers. gpt-oss's sink logits (a
 * parameter of one per query head, split over TP with the heads; one more
 * logit in each row's softmax denominator) are the flash op's in[3] and its
 * backward's out[3] (their gradient; with the ring, from each row's
 * probability of every block's keys, which its workspace out[4] keeps), the
 * unfused softmax's in[1] and its backward's out[1]: a row's one extra exp
 * against its keys', not costed apart. */

/* The tensors and shape the flash op works on. */
typedef struct {
  px_ref q, k, v, ctx;
  int64_t sq, sk, hq, hkv;
} px_attn_view;

/* Multi-head latent attention's tensors and parameters in L (-1 without it). */
void px_attn_mla_slots(px_plan *p, const px_dims *d, px_layer_slots *L);

/* The per-head q/k norms' tensors and parameters in L (-1 without them). */
void px_attn_qk_norm_slots(px_plan *p, const px_dims *d, px_layer_slots *L);

/* What the flash op reads and writes: with CP, the gathered or head-split tensors. */
px_attn_view px_attn_view_of(const px_dims *d, const px_layer_slots *L);

/* q, k, v from the norm's output x (its sequence shard with SP: gathered
 * here, or MLA's latents gathered), RoPE, and the attention into ctx: fused
 * (with context parallelism) or unfused. */
void px_attn_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x);

/* Per-op recomputation (`recompute` op) of what the attention's backward reads and the forward did not keep, from
 * the norm's recomputed output x_shard (gathered here with SP): k's projection (the fused weight's k rows), the
 * q/k norms, RoPE (from q's kept projection) and with CP's all-gather the gathered keys and values. */
void px_attn_recompute_op(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref x_shard);

/* From ctx's gradient back to the gradient of the norm's output (reduced
 * over TP, into its sequence shard with SP); returns it. */
px_ref px_attn_backward(px_bld *b, const px_dims *d, const px_layer_slots *L);

/* A fused attention op's format as its flags carry it (fp8_attention): none for bf16, PX_OPF_FP8 for cuDNN's FP8
 * attention, with PX_OPF_MXFP8 for MXFP8's; and back from an op's flags (the simulator's curve). */
uint16_t px_attn_format_flags(px_attn_format f);
px_attn_format px_attn_op_format(const px_op *op);

#endif
