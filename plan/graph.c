/* Name tables of the op graph, the bus-bandwidth factor and collective op sizing. */
#include "plan/graph.h"

#include "core/fmt.h"

const char *const px_op_names[PX_OP_COUNT] = {
#define X(name, str, family) str,
    PX_OP_KINDS(X)
#undef X
};

px_op_family px_op_family_of(px_op_kind kind) {
  static const px_op_family families[PX_OP_COUNT] = {
#define X(name, str, family) PX_FAM_##family,
      PX_OP_KINDS(X)
#undef X
  };
  return kind < PX_OP_COUNT ? families[kind] : PX_FAM_ELEMENTWISE;
}

bool px_op_is_collective(px_op_kind kind) { return px_op_family_of(kind) == PX_FAM_COLLECTIVE; }

bool px_op_on_host(px_op_kind kind) { return px_op_family_of(kind) == PX_FAM_COPY || kind == PX_OP_ADAMW_HOST; }

PX_NAME_TABLE(px_stream_names, PX_STREAM_COUNT, "compute", "tp", "dp", "pp-send", "pp-recv", "host");
PX_NAME_TABLE(px_phase_names, PX_PHASE_COUNT, "forward", "backward", "recompute", "optimizer", "comm");
PX_NAME_TABLE(px_group_names, PX_GROUP_COUNT, "none", "tp", "dp", "pp-prev", "pp-next", "emb", "all", "shard",
              "replica", "cp", "ep", "edp", "etp");
PX_NAME_TABLE(px_block_names, PX_BLOCK_KIND_COUNT, "embed_fwd", "embed_bwd", "layer_fwd", "layer_bwd", "head_fwd",
              "head_bwd", "send_fwd", "recv_fwd", "send_bwd", "recv_bwd", "grad_sync", "param_sync", "emb_sync",
              "optimizer", "offload_grad", "fetch_param", "layer_bwd_w", "moe_fwd", "moe_bwd", "layer_fwd_window",
              "layer_bwd_window", "moe_fwd_window", "moe_bwd_window", "layer_fwd_kept", "layer_bwd_kept",
              "moe_fwd_kept", "moe_bwd_kept", "layer_fwd_window_kept", "layer_bwd_window_kept", "moe_fwd_window_kept",
              "moe_bwd_window_kept", "layer_fwd_bf16", "layer_bwd_bf16", "moe_fwd_bf16", "moe_bwd_bf16",
              "layer_fwd_window_bf16", "layer_bwd_window_bf16", "moe_fwd_window_bf16", "moe_bwd_window_bf16",
              "layer_fwd_kept_bf16", "layer_bwd_kept_bf16", "moe_fwd_kept_bf16", "moe_bwd_kept_bf16",
              "layer_fwd_window_kept_bf16", "layer_bwd_window_kept_bf16", "moe_fwd_window_kept_bf16",
              "moe_bwd_window_kept_bf16", "layer_bwd_w_bf16", "moe_bwd_w", "moe_bwd_w_bf16", "offload_act", "fetch_act", "mtp_fwd",
              "mtp_bwd");

/* The layer blocks of the plan's precision, and those of the layers kept in the compute dtype. */
static const px_block_kind layer_kinds[2][2][2][2] = { /* [moe][window][kept][bwd] */
    {{{PX_BLOCK_LAYER_FWD, PX_BLOCK_LAYER_BWD}, {PX_BLOCK_LAYER_FWD_KEPT, PX_BLOCK_LAYER_BWD_KEPT}},
     {{PX_BLOCK_LAYER_FWD_WINDOW, PX_BLOCK_LAYER_BWD_WINDOW},
      {PX_BLOCK_LAYER_FWD_WINDOW_KEPT, PX_BLOCK_LAYER_BWD_WINDOW_KEPT}}},
    {{{PX_BLOCK_MOE_FWD, PX_BLOCK_MOE_BWD}, {PX_BLOCK_MOE_FWD_KEPT, PX_BLOCK_MOE_BWD_KEPT}},
     {{PX_BLOCK_MOE_FWD_WINDOW, PX_BLOCK_MOE_BWD_WINDOW},
      {PX_BLOCK_MOE_FWD_WINDOW_KEPT, PX_BLOCK_MOE_BWD_WINDOW_KEPT}}}};
static const px_block_kind bf16_kinds[2][2][2][2] = {
    {{{PX_BLOCK_LAYER_FWD_BF16, PX_BLOCK_LAYER_BWD_BF16}, {PX_BLOCK_LAYER_FWD_KEPT_BF16, PX_BLOCK_LAYER_BWD_KEPT_BF16}},
     {{PX_BLOCK_LAYER_FWD_WINDOW_BF16, PX_BLOCK_LAYER_BWD_WINDOW_BF16},
      {PX_BLOCK_LAYER_FWD_WINDOW_KEPT_BF16, PX_BLOCK_LAYER_BWD_WINDOW_KEPT_BF16}}},
    {{{PX_BLOCK_MOE_FWD_BF16, PX_BLOCK_MOE_BWD_BF16}, {PX_BLOCK_MOE_FWD_KEPT_BF16, PX_BLOCK_MOE_BWD_KEPT_BF16}},
     {{PX_BLOCK_MOE_FWD_WINDOW_BF16, PX_BLOCK_MOE_BWD_WINDOW_BF16},
      {PX_BLOCK_MOE_FWD_WINDOW_KEPT_BF16, PX_BLOCK_MOE_BWD_WINDOW_KEPT_BF16}}}};

enum { LK_FWD = 1, LK_BWD = 2, LK_MOE = 4, LK_BF16 = 8, LK_W = 16 };
/* Each layer block's bits (0: not a layer's). */
static const uint8_t layer_bits[PX_BLOCK_KIND_COUNT] = {
    [PX_BLOCK_LAYER_FWD] = LK_FWD,
    [PX_BLOCK_LAYER_BWD] = LK_BWD,
    [PX_BLOCK_LAYER_FWD_KEPT] = LK_FWD,
    [PX_BLOCK_LAYER_BWD_KEPT] = LK_BWD,
    [PX_BLOCK_LAYER_FWD_WINDOW] = LK_FWD,
    [PX_BLOCK_LAYER_BWD_WINDOW] = LK_BWD,
    [PX_BLOCK_LAYER_FWD_WINDOW_KEPT] = LK_FWD,
    [PX_BLOCK_LAYER_BWD_WINDOW_KEPT] = LK_BWD,
    [PX_BLOCK_MOE_FWD] = LK_FWD | LK_MOE,
    [PX_BLOCK_MOE_BWD] = LK_BWD | LK_MOE,
    [PX_BLOCK_MOE_FWD_KEPT] = LK_FWD | LK_MOE,
    [PX_BLOCK_MOE_BWD_KEPT] = LK_BWD | LK_MOE,
    [PX_BLOCK_MOE_FWD_WINDOW] = LK_FWD | LK_MOE,
    [PX_BLOCK_MOE_BWD_WINDOW] = LK_BWD | LK_MOE,
    [PX_BLOCK_MOE_FWD_WINDOW_KEPT] = LK_FWD | LK_MOE,
    [PX_BLOCK_MOE_BWD_WINDOW_KEPT] = LK_BWD | LK_MOE,
    [PX_BLOCK_LAYER_FWD_BF16] = LK_FWD | LK_BF16,
    [PX_BLOCK_LAYER_BWD_BF16] = LK_BWD | LK_BF16,
    [PX_BLOCK_LAYER_FWD_KEPT_BF16] = LK_FWD | LK_BF16,
    [PX_BLOCK_LAYER_BWD_KEPT_BF16] = LK_BWD | LK_BF16,
    [PX_BLOCK_LAYER_FWD_WINDOW_BF16] = LK_FWD | LK_BF16,
    [PX_BLOCK_LAYER_BWD_WINDOW_BF16] = LK_BWD | LK_BF16,
    [PX_BLOCK_LAYER_FWD_WINDOW_KEPT_BF16] = LK_FWD | LK_BF16,
    [PX_BLOCK_LAYER_BWD_WINDOW_KEPT_BF16] = LK_BWD | LK_BF16,
    [PX_BLOCK_MOE_FWD_BF16] = LK_FWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_BWD_BF16] = LK_BWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_FWD_KEPT_BF16] = LK_FWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_BWD_KEPT_BF16] = LK_BWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_FWD_WINDOW_BF16] = LK_FWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_BWD_WINDOW_BF16] = LK_BWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_FWD_WINDOW_KEPT_BF16] = LK_FWD | LK_MOE | LK_BF16,
    [PX_BLOCK_MOE_BWD_WINDOW_KEPT_BF16] = LK_BWD | LK_MOE | LK_BF16,
    [PX_BLOCK_LAYER_BWD_W] = LK_W,
    [PX_BLOCK_LAYER_BWD_W_BF16] = LK_W | LK_BF16,
    [PX_BLOCK_MOE_BWD_W] = LK_W | LK_MOE,
    [PX_BLOCK_MOE_BWD_W_BF16] = LK_W | LK_MOE | LK_BF16,
};

static unsigned bits_of(px_block_kind kind) { return kind < PX_BLOCK_KIND_COUNT ? layer_bits[kind] : 0; }
bool px_block_is_layer_fwd(px_block_kind kind) { return bits_of(kind) & LK_FWD; }
bool px_block_is_moe_fwd(px_block_kind kind) { return (bits_of(kind) & (LK_FWD | LK_MOE)) == (LK_FWD | LK_MOE); }
bool px_block_is_moe(px_block_kind kind) { return bits_of(kind) & LK_MOE; }
bool px_block_is_layer_bwd(px_block_kind kind) { return bits_of(kind) & LK_BWD; }
bool px_block_is_layer_w(px_block_kind kind) { return bits_of(kind) & LK_W; }
bool px_block_is_bf16(px_block_kind kind) { return bits_of(kind) & LK_BF16; }

px_block_kind px_layer_block(bool moe, bool window, bool kept, bool bf16, bool bwd) {
  return (bf16 ? bf16_kinds : layer_kinds)[moe][window][kept][bwd];
}
px_block_kind px_layer_w_block(bool moe, bool bf16) {
  static const px_block_kind kinds[2][2] = {{PX_BLOCK_LAYER_BWD_W, PX_BLOCK_LAYER_BWD_W_BF16},
                                            {PX_BLOCK_MOE_BWD_W, PX_BLOCK_MOE_BWD_W_BF16}}; /* [moe][bf16] */
  return kinds[moe][bf16];
}

bool px_block_is_bwd(px_block_kind kind) {
  return px_block_is_layer_bwd(kind) || kind == PX_BLOCK_HEAD_BWD || kind == PX_BLOCK_EMBED_BWD ||
         kind == PX_BLOCK_MTP_BWD || px_block_is_layer_w(kind);
}

bool px_block_is_compute(px_block_kind kind) {
  return px_block_is_bwd(kind) || kind == PX_BLOCK_EMBED_FWD || px_block_is_layer_fwd(kind) || kind == PX_BLOCK_HEAD_FWD ||
         kind == PX_BLOCK_MTP_FWD;
}

double px_coll_busbw_factor(px_coll kind, int64_t n) {
  if (kind == PX_COLL_P2P) return 1.0;
  if (n <= 0) return 0.0;
  double nd = (double)n;
  switch (kind) {
    case PX_COLL_ALLREDUCE: return 2.0 * (nd - 1.0) / nd;
    case PX_COLL_ALLGATHER:
    case PX_COLL_REDUCE_SCATTER:
    case PX_COLL_ALLTOALL: return (nd - 1.0) / nd;
    default: return 0.0;
  }
}

void px_op_size_coll(px_op *o, px_coll kind, uint64_t elems_in, uint64_t elems_out, px_dtype dt, int64_t n) {
  double e = (double)px_dtype_bytes(dt);
  o->dim[0] = (int64_t)elems_in;
  o->dim[1] = (int64_t)elems_out;
  px_op_coll_bytes(o, kind, (uint64_t)((double)(kind == PX_COLL_ALLGATHER ? elems_out : elems_in) * e), n);
  o->bytes = (double)(elems_in + elems_out) * e;
}

void px_op_coll_bytes(px_op *o, px_coll kind, uint64_t bytes, int64_t n) {
  o->coll = (uint8_t)kind;
  o->coll_bytes = bytes;
  o->wire_bytes = px_coll_busbw_factor(kind, n) * (double)bytes;
}

int64_t px_op_linear_cols(const px_op *o) {
  int64_t n = o->dim[1];
  for (int i = 0; i < 3; i++)
    if (o->out[i].slot < 0 && o->dim[3 + i] > 0) n -= o->dim[3 + i]; /* a section not made */
  return n;
}

px_op px_op_row_chunk(const px_op *op, int64_t n) {
  px_op c = *op;
  c.dim[0] = (op->dim[0] + n - 1) / n;
  c.flops /= (double)n, c.bytes /= (double)n;
  return c;
}

double px_ep_token_bytes(const px_op *o, int64_t k) {
  double f = o->dim[0] > 0 && o->dim[1] > o->dim[0] ? (double)o->dim[1] / (double)o->dim[0] : 1.0;
  return (double)o->coll_bytes / (double)(k > 0 ? k : 1) * f;
}

/* torchtitan's Llama without torch.compile (torchtitan 9dec370, the Dec 2024 benchmarks' tree): RMSNorm
 * (torchtitan/models/norms.py) `(x.float() * rsqrt(x.float().pow(2).mean(-1, keepdim) + eps)).type_as(x) *
 * weight`, RoPE (models/llama/model.py apply_rotary_emb) `view_as_real(view_as_complex(xq.float()...) *
 * freqs_cis).type_as(xq)` for q and for k, SwiGLU (FeedForward) `silu(w1(x)) * w3(x)`; their backwards as PyTorch's
 * autograd formulas run them (tools/autograd/derivatives.yaml, torch/csrc/autograd/FunctionsManual.cpp: mul's two
 * products, the weight's a sum over the rows after; mean's expand divided; pow_backward grad * (2 * x.pow(1));
 * the two gradients of x.float() summed). Passes a kernel: a conversion 1 + 1; pow, x * r, silu, * weight 1 + 1;
 * the mean 1; products of two tensors 2 + 1.
 *   NORM: float, pow, mean, add, rsqrt, x * r, type_as, * weight: 8 kernels; 16-bit 1 + 1 + 2, fp32
 *     1 + 2 + 1 + 2 + 1.
 *   NORM_BWD: * weight's two products and the weight's sum, type_as's, x * r's two products and r's sum, rsqrt's,
 *     mean's, pow's three, the sum of x.float()'s two gradients, float's, and the residual stream's gradient
 *     summed with it (the op accumulates): 15 kernels; 16-bit 2 + 3 + 1, 1, 1, 3; fp32 1, 2 + 3 + 1, 1, 2 + 2 + 3,
 *     3, 1.
 *   ROPE (and its backward: the conversions, and the product by the conjugate): for q and k each a float, the
 *     complex product, a type_as: 6 kernels; 16-bit 1 + 1, fp32 1 + 2 + 1.
 *   SWIGLU: silu, the product: 2 kernels, 16-bit 2 + 3. SWIGLU_BWD: the product's two, silu's: 16-bit 3 + 3 + 3. */
/* The loss, per element of the logits (the vocabulary shard's): torchtitan's cross_entropy_loss,
 * `F.cross_entropy(pred.flatten(0, 1).float(), labels)` (torchtitan/components/loss.py; train.py's loss_fn at 9dec370,
 * its compile commented out there), i.e. x.float() 1 + 1, log_softmax 3 + 1 in fp32 (PyTorch's cunn_SoftMaxForward,
 * aten/src/ATen/native/cuda/SoftMax.cu at pytorch/pytorch 000cace5: a max pass, a sum-of-exponentials pass and the
 * write pass over each row, the rows of a 128K vocabulary too long for its shared-memory variant) and nll_loss (a
 * gather): 3 kernels; its backward nll_loss_backward (zeros then the scatter: 0 + 1, 2 kernels), log_softmax's
 * (cunn_SoftMaxBackward: the gradient's sum, then the gradient and the output read, the result written, 3 + 1) and
 * .float()'s (the cast back, 1 + 1): 4 kernels. */
const px_eager_chain *px_op_eager_chain(px_op_kind kind) {
  static const px_eager_chain norm = {4, 7, 8, 2, 2}, norm_bwd = {11, 19, 15, 2, 2}, rope = {2, 4, 6, 2, 4},
                              swiglu = {5, 0, 2, 0, 0}, swiglu_bwd = {9, 0, 3, 0, 0}, loss = {1, 5, 3, 1, 1},
                              loss_bwd = {1, 6, 4, 1, 1};
  switch (kind) {
    case PX_OP_LOSS: return &loss;
    case PX_OP_LOSS_BWD: return &loss_bwd;
    case PX_OP_NORM: return &norm;
    case PX_OP_NORM_BWD: return &norm_bwd;
    case PX_OP_ROPE:
    case PX_OP_ROPE_BWD: return &rope;
    case PX_OP_SWIGLU: return &swiglu;
    case PX_OP_SWIGLU_BWD: return &swiglu_bwd;
    default: return NULL;
  }
}

/* Megatron-Core's unfused RoPE for bshd tensors (_apply_rotary_pos_emb_bshd, rope_utils.py at d98e8a6; taken where
 * apply_rope_fusion is off or mscale is not 1, "not supported by TE's fused RoPE", since 9873958), for q and for k
 * each: cos_ and sin_ from the frequencies (cos or sin, times mscale, to the dtype: 6 kernels on a table of
 * sequence x head_dim, its bytes left out), t * cos_ 1 + 1, _rotate_half's -x2 (half the tensor) 0.5 + 0.5 and
 * cat 1 + 1, * sin_ 1 + 1, the sum 2 + 1, cat with the empty t_pass 1 + 1: 12 kernels a tensor, 16-bit 6.5 + 5.5.
 * Its backward, PyTorch's autograd formulas (tools/autograd/derivatives.yaml): the products' gradients by sin_
 * and cos_ 1 + 1 each, neg's 0.5 + 0.5, chunk's (a cat) 1 + 1, t's two gradients summed 2 + 1, and the slice
 * t[..., :rot_dim]'s slice_backward (zeros, then the copy into them) 0 + 1 and 1 + 1: 7 kernels a tensor, 16-bit
 * 6.5 + 6.5 (the empty t_pass slice's own zeros and sum, if autograd runs them, left out). */
const px_eager_chain *px_op_rope_unfused_chain(px_op_kind kind) {
  static const px_eager_chain fwd = {12, 0, 24, 0, 0}, bwd = {13, 0, 14, 0, 0};
  return kind == PX_OP_ROPE ? &fwd : kind == PX_OP_ROPE_BWD ? &bwd : NULL;
}

const px_eager_chain *px_op_eager(const px_op *o) {
  if (!(o->flags & PX_OPF_EAGER)) return NULL;
  const px_eager_chain *unfused = o->flags & PX_OPF_ROPE_UNFUSED ? px_op_rope_unfused_chain((px_op_kind)o->kind) : NULL;
  return unfused ? unfused : px_op_eager_chain((px_op_kind)o->kind);
}

/* fp32 activations: x.float() and type_as return their input, no kernel */
int px_eager_kernels(const px_eager_chain *c, double e) { return c->kernels - (e >= 4 ? c->conv_kernels : 0); }

double px_eager_bytes(const px_eager_chain *c, double elems, double e) {
  int conv = e >= 4 ? c->conv_passes : 0;
  return elems * ((double)(c->act_passes - conv) * e + (double)(c->f32_passes - conv) * 4.0);
}

bool px_op_is_moe(px_op_kind kind) { return kind >= PX_OP_MOE_ROUTE && kind <= PX_OP_EXPERT_BIAS_BWD; }

int64_t px_op_expert_bias_kernels(const px_op *op) {
  int64_t el = op->dim[3] > 0 ? op->dim[3] : 1;
  if (op->kind == PX_OP_EXPERT_BIAS) return 2 * el + 2;
  return op->kind == PX_OP_EXPERT_BIAS_BWD ? 5 * el + 2 : 0;
}

int64_t px_slot_row_elems(const px_slot *s) {
  return s->shape[3] > 1 ? s->shape[2] * s->shape[3] : s->shape[2] > 1 ? s->shape[2] : s->shape[1];
}
