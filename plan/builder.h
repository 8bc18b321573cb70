/* The block compiler's builder (plan/builder.c): the sizes a block is
 * built for, tensor slots, ops with their costs, TP collectives along the
 * sequence, norms, dropout, and each op's allocations and frees; what
 * plan/fp8.c, linear.c, attention.c, mlp.c, layer.c and compile.c build on.
 *
 * Layouts: activations are (B, S, H) row-major; with sequence parallelism a
 * rank holds (B, S/tp, H). Linear weights are (out, in), column-parallel
 * layers split `out`, row-parallel layers split `in`. Op dims by kind:
 *   EMBED/EMBED_BWD   rows, H, vocab_local, vocab_real
 *   POS/POS_BWD       B, rows per sequence, H
 *   NORM/NORM_BWD     rows, H
 *   LINEAR*           m, n (all outputs), k, widths of up to three split outputs
 *   ROPE, ATTN_*      B, S, heads_q, heads_kv, head_dim (ROPE: in place on q and k)
 *   SOFTMAX*          B x heads_q, S (causal rows; PX_OPF_WINDOW: within the sliding window)
 *   DROPOUT*          B, d1, d2, d3 (the tensor's shape), tp-sharded axis (0: none), site
 *   ADD/ACC/GELU*     elements, bias width (ADD)
 *   SWIGLU*           elements
 *   LOSS*             rows, vocab_local, vocab_real, target shift (an MTP module's: 1), tokens a sequence
 *   collectives       elements in, elements out, B (sequence-axis gathers of (B, S, H))
 *   SEND/RECV         elements
 *   GRAD_NORM, ADAMW  elements of the shard (ADAMW_HOST: and the states' px_offload place)
 *   COPY_D2H/H2D      elements, the host side's px_offload place (host memory or NVMe), bytes
 *                     an element; the op's bytes are those over the GPU's host link */
#ifndef PX_PLAN_BUILDER_H
#define PX_PLAN_BUILDER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/query.h"

/* Model-derived sizes of one rank. */
typedef struct {
  int64_t B, S, Sl, H, T, HQ, HKV, D, QW, KW, F, Vl, V;
  int64_t Dv, VW, OW;     /* value head dim (D but with latent attention), v's and the context's widths */
  bool mla;               /* multi-head latent attention (DeepSeek-V2/V3) */
  int64_t QL, KL, Dr, Dn; /* its query and key/value latent ranks, RoPE and non-RoPE query/key dims */
  int64_t C;              /* context-parallel ranks (S is this rank's seq / C tokens of each sequence) */
  px_cp_algo cp_algo;
  /* mixture of experts: experts, local experts, top-k, EP and ETP ranks, an expert's width on this ETP rank
   * and the shared experts' on this TP rank, routed rows this rank sends (A = B Sl K: its sequence shard's),
   * the EP all-to-all brings (Rep, the busiest rank's) and its local experts take after the ETP all-gather
   * (R = ETP Rep); Rb and Rbep the rows their buffers hold (px_plan_expert_buffer_rows: R, or the worst
   * routing's): the slots and the sizes the executor works on, while the costs take R */
  int64_t E, El, K, EP, ETP, Fe, Fs, A, Rep, R, Rb, Rbep;
  bool moe;         /* the block being built is a MoE layer's */
  int64_t window;   /* the block being built is a sliding-window layer's: its window (0: full attention) */
  double attn_frac; /* its attended pairs over the causal pairs (1 without a window) */
  px_moe_dispatch dispatch;
  bool sp, drop, layernorm, swiglu, rope, bias, qkv_bias, learned, par_res, flash, gelu_fused, qk_norm, sinks;
  bool flash2; /* the fused attention costed as FlashAttention-2's kernel (`attention` flash2) */
  px_dtype act, param, grad;
  uint64_t e;                           /* activation bytes per element */
  bool f8, f8_block, f8_current, zero3; /* quantized GEMMs (fp8, mxfp8, nvfp4): fp8's recipe's block scales /
                                           current scaling; ZeRO-3 */
  uint16_t f8_format;                   /* quantized GEMMs: 0 (fp8), PX_OPF_MXFP8 or PX_OPF_NVFP4 */
  bool f8_params;                       /* fp8: the weights held in fp8 (fp8_params) */
  bool f8_grad_codes;                   /* quantized GEMMs under SP: a row-parallel layer's output gradient gathered
                                           as its shard's codes (Transformer Engine), not in 16 bits (torchao) */
  px_attn_format attn_fmt;              /* the fused attention's operands (px_parallel_attn_format; bf16 layers: bf16) */
  bool lora;                            /* fine-tuning with adapters: the base's parameters frozen */
  int64_t lora_rank;                    /* their rank r */
  int lora_targets;                     /* PX_LORA_* bits */
  int rcm;                              /* PX_RCM_* bits: what selective recomputation redoes (0 none) */
  bool rc_op;                           /* torchtitan's per-op recomputation (`recompute` op) */
} px_dims;

typedef struct px_bld {
  px_plan *p;
  px_block *b;
  struct px_bld *w; /* zero-bubble schedules: where linear layers' weight gradients go (the W block), NULL: here */
  int32_t cap, fcap, acap;
  px_ref keep[64];
  int nkeep;
  bool loads_inputs; /* tokens or targets first appear in this block */
  bool failed;       /* out of memory or a capacity exceeded: the block is unusable */
  px_op scratch;     /* what op_new hands out after a failure, so callers need no check */
} px_bld;

/* A tensor operand: slot and layer offset (R), and none (NOREF). */
static inline px_ref R(int slot, int off) { return (px_ref){(int16_t)slot, (int8_t)off}; }
static const px_ref NOREF = {-1, 0};

/* Slot table capacity: slot operands are int16_t (px_ref). */
#define PX_SLOTS_MAX 4096

/* Slot names of one layer's tensors, shared by forward, recompute and backward. */
typedef struct {
  int x, out, ln1, ln1_mean, ln1_rstd, ln1_full, q, k, v, q_cp, k_cp, v_cp, ctx_cp, scores, probs, probs_drop,
      attn_mask, lse, ctx, attn_part, attn_out, attn_drop, attn_dmask, x2, ln2, ln2_mean, ln2_rstd, ln2_full, fc1, gate,
      up, act, mlp_part, mlp_out, mlp_drop, mlp_dmask;
  /* parameters */
  int w_ln1, b_ln1, w_qkv, b_qkv, w_o, b_o, w_ln2, b_ln2, w_fc1, b_fc1, w_fc2, b_fc2;
  /* mixture of experts (-1 in a dense model): the router's probabilities, each token's experts and weights,
   * the routed rows sent and received (a2a; all-gather: every EP rank's tokens), the experts' hidden rows,
   * their outputs and the outputs returned; the shared experts' tensors; parameters. With ETP > 1 the
   * rows before the ETP all-gather / after the reduce-scatter have their own slots (the _ep ones, and
   * moe_send_all after the all-gather dispatcher's second gather); otherwise those name the same slots. */
  int moe_probs, moe_idx, moe_gates, moe_counts, moe_send, moe_recv, exp_gate, exp_up, exp_fc1, exp_act, exp_out,
      moe_ret, sh_gate, sh_up, sh_fc1, sh_act;
  int moe_send_all, moe_recv_ep, exp_out_ep, moe_ret_ep;
  int moe_send_w, moe_recv_w_ep, moe_recv_w; /* the routed rows' gates, moved with them to the experts' activation */
  int w_router, w_exp_fc1, w_exp_fc2, w_sh_fc1, w_sh_fc2;
  int b_router, w_exp_b1, w_exp_b2; /* the router's and the experts' biases (px_model_moe_biases), -1 otherwise */
  /* multi-head latent attention (-1 otherwise): the latents, their norms' outputs and statistics (a sequence shard
   * with SP), the norms' outputs and the RoPE key over the whole sequence (gathered with SP, else the same), parameters */
  int q_lat, q_latn, q_rstd, kv_lat, k_pe, kv_latn, kv_rstd, q_latn_full, kv_latn_full, k_pe_full;
  int w_q_down, w_q_norm, w_q_up, w_kv_down, w_kv_norm, w_kv_up;
  /* per-head q/k norms (-1 otherwise): q and k as the linear layer makes them, the norms' statistics, weights */
  int q_pre, k_pre, qh_rstd, kh_rstd, w_q_head_norm, w_k_head_norm;
  /* attention sinks (-1 otherwise): one logit per query head of this TP rank */
  int w_sinks;
} px_layer_slots;

int px_bld_slot(px_plan *p, const char *name, px_slot_kind kind, px_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                int64_t d3);
/* A parameter and its gradient slot. */
int px_bld_param(px_plan *p, const px_dims *d, const char *name, int64_t rows, int64_t cols, bool replicated,
                 bool sp_partial);
int px_bld_grad_of(const px_plan *p, int param);
/* A parameter trained in this plan (a gradient slot of its own): not a frozen base weight. */
bool px_bld_param_trained(const px_plan *p, int param);
px_op *px_bld_op(px_bld *b, px_op_kind kind, px_stream stream, px_phase phase);
void px_bld_keep(px_bld *b, px_ref r);
/* GEMM cost: batch x (m, k) @ (k, n). */
void px_bld_gemm_cost(px_op *o, double m, double n, double k, double batch, double e_in, double e_out);
void px_bld_elementwise(px_op *o, double elems_in, double elems_out, double e);
/* A fused norm forward's bytes over rows of cols: x read and y written (e bytes each), a row's fp32 mean and rstd. */
double px_bld_norm_bytes(int64_t rows, int64_t cols, double e);
/* `elementwise` eager: an RMSNorm's, RoPE's or SwiGLU's op o over `elems` elements of e bytes as PyTorch eager's
 * kernels run it (px_op_eager_chain: its bytes, PX_OPF_EAGER); any other op, or fused, unchanged. */
void px_bld_eager(const px_bld *b, px_op *o, double elems, double e);
/* Collective on a group. elems_in/out are this rank's buffer sizes. */
px_op *px_bld_coll(px_bld *b, const px_dims *d, px_op_kind kind, px_group g, px_phase ph, px_ref in, px_ref out,
                   int64_t elems_in, int64_t elems_out, px_dtype dt, int64_t n);
/* A TP reduction of a row-parallel output: all-reduce in place, or
 * reduce-scatter along the sequence with SP. Returns the reduced ref. */
px_ref px_bld_tp_reduce(px_bld *b, const px_dims *d, px_phase ph, px_ref part, px_ref sharded);
/* The same of a (B, S, cols) tensor (MLA's latents and RoPE key). */
px_ref px_bld_tp_reduce_cols(px_bld *b, const px_dims *d, px_phase ph, px_ref part, px_ref sharded, int64_t cols);
/* With SP, all-gathers a sequence shard into the full sequence (B, S, cols): cols full's row width. */
px_ref px_bld_tp_gather(px_bld *b, const px_dims *d, px_phase ph, px_ref shard, px_ref full);
/* The same, gathering `copies` of a block-scaled shard's codes (mxfp8, nvfp4: the row-wise and the column-wise
 * copies where the data and the weight gradients both read the gathered tensor). */
px_ref px_bld_tp_gather_copies(px_bld *b, const px_dims *d, px_phase ph, px_ref shard, px_ref full, int copies);
void px_bld_norm(px_bld *b, const px_dims *d, px_phase ph, px_ref y, px_ref mean, px_ref rstd, px_ref x, int w,
                 int bias, int64_t rows);
void px_bld_norm_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref dy, px_ref x, px_ref mean, px_ref rstd, int w,
                     int bias, int64_t rows);
px_op *px_bld_simple(px_bld *b, px_op_kind kind, px_phase ph, px_ref y, px_ref a, px_ref c, int64_t elems,
                     double e_bytes);
px_op *px_bld_dropout(px_bld *b, const px_dims *d, px_phase ph, px_ref y, px_ref mask, px_ref x, px_ref bias,
                      int64_t d1, int64_t d2, int64_t d3, int shard_axis, int site);
void px_bld_dropout_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref dy, px_ref mask, int64_t elems);
/* An activation-gradient slot named after its activation. */
int px_bld_grad_slot(px_plan *p, int act);
/* Records, per op, which slot instances it allocates (first write of a
 * tensor not live at the block's start) and frees (last use, unless kept
 * for a later block). Inputs live at the start come from earlier blocks. */
void px_bld_finish(px_bld *b);
void px_bld_begin(px_bld *b, px_plan *p, px_block_kind kind, px_stream stream);
void px_dims_make(const px_plan *p, px_dims *d);
/* The sizes of a layer kept in the compute dtype under a quantized precision (px_parallel_layer_bf16): no
 * quantized GEMMs, so no casts, fp8 twins or quantized weight copies. */
void px_dims_unquantized(px_dims *d);

#endif
