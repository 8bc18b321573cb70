/* The plan compiler's first half: tensor slots and the block templates (one
 * layer's forward and backward with recomputation, the embedding, the head
 * and loss, p2p, data-parallel synchronisation, the optimizer), each op with
 * its FLOPs, HBM bytes and bytes on the wire. plan/program.c orders the
 * blocks into per-stage programs.
 *
 * Layouts: activations are (B, S, H) row-major; with sequence parallelism a
 * rank holds (B, S/tp, H). Linear weights are (out, in), column-parallel
 * layers split `out`, row-parallel layers split `in`. Op dims by kind:
 *   EMBED/EMBED_BWD   rows, H, vocab_local, vocab_real
 *   POS/POS_BWD       B, rows per sequence, H
 *   NORM/NORM_BWD     rows, H
 *   LINEAR*           m, n (all outputs), k, widths of up to three split outputs
 *   ROPE, ATTN_*      B, S, heads_q, heads_kv, head_dim (ROPE: in place on q and k)
 *   SOFTMAX*          B x heads_q, S (causal rows)
 *   DROPOUT*          B, d1, d2, d3 (the tensor's shape), tp-sharded axis (0: none), site
 *   ADD/ACC/GELU*     elements, bias width (ADD)
 *   SWIGLU*           elements
 *   LOSS*             rows, vocab_local, vocab_real
 *   collectives       elements in, elements out, B (sequence-axis gathers of (B, S, H))
 *   SEND/RECV         elements
 *   GRAD_NORM, ADAMW  elements of the shard (ADAMW_HOST: and the states' px_offload place)
 *   COPY_D2H/H2D      elements, the host side's px_offload place (host memory or NVMe), bytes
 *                     an element; the op's bytes are those over the GPU's host link */
#include "plan/compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Model-derived sizes of one rank. */
typedef struct {
  int64_t B, S, Sl, H, T, HQ, HKV, D, QW, KW, F, Vl, V;
  int64_t Dv, VW, OW; /* value head dim (D but with latent attention), v's and the context's widths */
  bool mla;           /* multi-head latent attention (DeepSeek-V2/V3) */
  int64_t QL, KL, Dr, Dn; /* its query and key/value latent ranks, RoPE and non-RoPE query/key dims */
  int64_t C;          /* context-parallel ranks (S is this rank's seq / C tokens of each sequence) */
  px_cp_algo cp_algo;
  /* mixture of experts: experts, local experts, top-k, EP and ETP ranks, an expert's width on this ETP rank
   * and the shared experts' on this TP rank, routed rows this rank sends (A = B Sl K: its sequence shard's),
   * the EP all-to-all brings (Rep, the busiest rank's) and its local experts take after the ETP all-gather
   * (R = ETP Rep) */
  int64_t E, El, K, EP, ETP, Fe, Fs, A, Rep, R;
  bool moe;           /* the block being built is a MoE layer's */
  double attn_frac;   /* sliding windows: the layers' mean attended pairs over the causal pairs (1 without) */
  px_moe_dispatch dispatch;
  bool sp, drop, layernorm, swiglu, rope, bias, qkv_bias, learned, par_res, flash, gelu_fused;
  px_dtype act, param, grad;
  uint64_t e; /* activation bytes per element */
  bool f8, f8_block, f8_current, zero3; /* precision fp8: the recipe's block scales / current scaling; ZeRO-3 */
} dims;

typedef struct bld {
  px_plan *p;
  px_block *b;
  struct bld *w; /* zero-bubble schedules: where linear layers' weight gradients go (the W block), NULL: here */
  int32_t cap, fcap, acap;
  px_ref keep[64];
  int nkeep;
  bool loads_inputs; /* tokens or targets first appear in this block */
  bool failed;       /* out of memory or a capacity exceeded: the block is unusable */
  px_op scratch;     /* what op_new hands out after a failure, so callers need no check */
} bld;

static px_ref R(int slot, int off) { return (px_ref){(int16_t)slot, (int8_t)off}; }
static const px_ref NOREF = {-1, 0};
static bool ref_eq(px_ref a, px_ref b) { return a.slot == b.slot && a.layer_off == b.layer_off; }

/* ---- slots ---- */

/* Slot table capacity: slot operands are int16_t (px_ref). */
#define SLOTS_MAX 4096

static int slot_add(px_plan *p, const char *name, px_slot_kind kind, px_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                    int64_t d3) {
  for (int i = 0; i < p->nslots; i++)
    if (!strcmp(p->slots[i].name, name)) return i;
  if (p->nslots == p->slots_cap) { /* grow; on failure the compile fails (px_compile_blocks checks) */
    int32_t cap = p->slots_cap ? 2 * p->slots_cap : 128;
    px_slot *ns = cap <= SLOTS_MAX ? realloc(p->slots, (size_t)cap * sizeof *ns) : NULL;
    if (!ns) {
      p->slots_full = true;
      return 0;
    }
    p->slots = ns;
    p->slots_cap = cap;
  }
  px_slot *s = &p->slots[p->nslots];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->kind = (uint8_t)kind;
  s->dtype = (uint8_t)dt;
  s->shape[0] = d0;
  s->shape[1] = d1;
  s->shape[2] = d2;
  s->shape[3] = d3;
  s->elems = (uint64_t)d0 * (uint64_t)d1 * (uint64_t)d2 * (uint64_t)d3;
  s->bytes = s->elems * px_dtype_bytes(dt);
  s->param = -1;
  return p->nslots++;
}

/* A parameter and its gradient slot. */
static int param_add(px_plan *p, const dims *d, const char *name, int64_t rows, int64_t cols, bool replicated,
                     bool sp_partial) {
  int w = slot_add(p, name, PX_SLOT_PARAM, d->param, rows, cols, 1, 1);
  p->slots[w].tp_replicated = replicated;
  p->slots[w].sp_partial = sp_partial && d->sp;
  char gname[PX_NAME_MAX];
  snprintf(gname, sizeof gname, "d%s", name);
  int g = slot_add(p, gname, PX_SLOT_GRAD, d->grad, rows, cols, 1, 1);
  p->slots[g].param = w;
  p->slots[g].tp_replicated = replicated;
  p->slots[g].sp_partial = p->slots[w].sp_partial;
  return w;
}

static int grad_of(const px_plan *p, int param) {
  for (int i = 0; i < p->nslots; i++)
    if (p->slots[i].param == param) return i;
  return -1;
}


/* ---- ops ---- */

static px_op *op_new(bld *b, px_op_kind kind, px_stream stream, px_phase phase) {
  px_block *blk = b->b;
  if (blk->nops == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 32;
    px_op *n = realloc(blk->ops, (size_t)b->cap * sizeof *n);
    if (!n) {
      b->failed = true;
      return &b->scratch;
    }
    blk->ops = n;
  }
  px_op *o = &blk->ops[blk->nops++];
  memset(o, 0, sizeof *o);
  o->kind = (uint8_t)kind;
  o->stream = (uint8_t)stream;
  o->phase = (uint8_t)phase;
  o->dep = -1;
  for (int i = 0; i < PX_OP_OUTS; i++) o->out[i] = NOREF;
  for (int i = 0; i < PX_OP_INS; i++) o->in[i] = NOREF;
  return o;
}

static void keep(bld *b, px_ref r) {
  if (r.slot < 0) return;
  if (b->nkeep == (int)(sizeof b->keep / sizeof b->keep[0]))
    b->failed = true; /* a block keeps more tensors than the 64 the builder holds */
  else
    b->keep[b->nkeep++] = r;
}

/* GEMM cost: batch x (m, k) @ (k, n). */
static void cost_gemm(px_op *o, double m, double n, double k, double batch, double e_in, double e_out) {
  o->flops = 2.0 * m * n * k * batch;
  o->bytes = batch * ((m * k + n * k) * e_in + m * n * e_out);
}

/* ---- fp8 (precision fp8) ----
 * A linear layer runs in fp8 when its input is an fp8 tensor: the input's
 * fp8 twin ("<name>_f8", made by a CAST op where the bf16 tensor is
 * produced, before a sequence-parallel all-gather so that it moves in fp8),
 * the weight's cached fp8 copy, and in the backward the output gradients
 * cast to E5M2. The weight gradient reads the twin, which is what the layer
 * keeps for the backward instead of the bf16 tensor where nothing else
 * reads that. */

/* An fp8 op's flags: fp8, and the recipe's block scales. */
static uint16_t f8_flags(const dims *d) { return (uint16_t)(PX_OPF_FP8 | (d->f8_block ? PX_OPF_FP8_BLOCK : 0)); }

/* The fp8 twin of slot s, made on first use; with blockwise scaling its
 * bytes count the tiles' scales (the scales' memory, in one place). */
static int f8_slot(px_plan *p, int s) {
  char name[2 * PX_NAME_MAX]; /* the names are short enough for slot_add's table */
  snprintf(name, sizeof name, "%s_f8", p->slots[s].name);
  int64_t sh[4];
  memcpy(sh, p->slots[s].shape, sizeof sh); /* slot_add may move the table */
  int32_t before = p->nslots;
  int t = slot_add(p, name, PX_SLOT_ACT, PX_DTYPE_FP8, sh[0], sh[1], sh[2], sh[3]);
  if (p->nslots > before && p->par.fp8_recipe == PX_FP8_BLOCKWISE) { /* made now: its fp32 scales, one per 1 x 128 tile */
    px_slot *y = &p->slots[t];
    int64_t row = px_slot_row_elems(y);
    y->bytes += 4 * (y->elems / (uint64_t)row) * (uint64_t)((row + PX_FP8_BLOCK - 1) / PX_FP8_BLOCK);
  }
  return t;
}

/* The tensor a fp8 GEMM reads for r: its twin with fp8, r otherwise. */
static px_ref q8(px_plan *p, const dims *d, px_ref r) {
  return d->f8 && r.slot >= 0 && p->slots[r.slot].dtype != PX_DTYPE_FP8 ? R(f8_slot(p, r.slot), r.layer_off) : r;
}

/* x quantized into its fp8 twin (E4M3, E5M2 for gradients): one pass that
 * reads x and writes the row-wise and the transposed fp8 copies (Hopper's fp8
 * GEMMs take K-major operands only, so the forward and the weight gradient
 * need both); current scaling reads x once more for its amax first. The
 * twin, or x unchanged without fp8. */
static px_ref cast8(bld *b, const dims *d, px_phase ph, px_ref x, bool e5m2) {
  if (!d->f8 || x.slot < 0) return x;
  px_ref y = q8(b->p, d, x);
  const px_slot *xs = &b->p->slots[x.slot];
  double n = (double)xs->elems, e = (double)px_dtype_bytes((px_dtype)xs->dtype);
  px_op *o = op_new(b, PX_OP_CAST, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->out[0] = y;
  o->dim[0] = (int64_t)n;
  o->flags = (uint16_t)(f8_flags(d) | (e5m2 ? PX_OPF_E5M2 : 0));
  o->bytes = n * (e * (d->f8_current ? 2.0 : 1.0) + 2.0);
  return y;
}

/* ZeRO-3 with fp8: the gathered weight w cast before its GEMM (the other
 * stages keep a cast copy for the step, px_plan_fp8_weight_elems). */
static void weight_cast(bld *b, const dims *d, px_phase ph, int w) {
  if (!d->zero3) return;
  px_op *c = op_new(b, PX_OP_CAST, PX_STREAM_COMPUTE, ph);
  c->in[0] = R(w, 0);
  c->dim[0] = (int64_t)b->p->slots[w].elems;
  c->flags = f8_flags(d);
  c->bytes = (double)b->p->slots[w].elems * ((double)px_dtype_bytes(d->param) + 2.0);
}

/* Marks a GEMM op as fp8 and its weight as one with an fp8 copy. */
static void gemm8(bld *b, const dims *d, px_op *o, int w) {
  o->flags |= f8_flags(d);
  b->p->slots[w].fp8 = true;
}

static px_op *linear(bld *b, const dims *d, px_phase ph, px_ref x, int w, int bias, px_ref y0, px_ref y1, px_ref y2,
                     int64_t m, int64_t n0, int64_t n1, int64_t n2, int64_t k) {
  bool f8 = x.slot >= 0 && b->p->slots[x.slot].dtype == PX_DTYPE_FP8;
  if (f8) weight_cast(b, d, ph, w);
  px_op *o = op_new(b, PX_OP_LINEAR, PX_STREAM_COMPUTE, ph);
  int64_t n = n0 + n1 + n2;
  o->in[0] = x;
  o->in[1] = R(w, 0);
  o->in[2] = bias >= 0 ? R(bias, 0) : NOREF;
  o->out[0] = y0;
  o->out[1] = y1;
  o->out[2] = y2;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  cost_gemm(o, (double)m, (double)n, (double)k, 1, f8 ? 1.0 : (double)d->e, (double)d->e);
  if (f8) gemm8(b, d, o, w);
  return o;
}

static void elementwise(px_op *o, double elems_in, double elems_out, double e) { o->bytes = (elems_in + elems_out) * e; }

/* Collective on a group. elems_in/out are this rank's buffer sizes. */
static px_op *coll(bld *b, const dims *d, px_op_kind kind, px_group g, px_phase ph, px_ref in, px_ref out,
                   int64_t elems_in, int64_t elems_out, px_dtype dt, int64_t n) {
  bool in_layer = g == PX_GROUP_TP || g == PX_GROUP_CP || g == PX_GROUP_EP || g == PX_GROUP_ETP; /* a layer's own */
  px_op *o = op_new(b, kind, in_layer ? PX_STREAM_TP : PX_STREAM_DP, ph);
  o->group = (uint8_t)g;
  o->in[0] = in;
  o->out[0] = out;
  px_coll c = kind == PX_OP_ALLREDUCE   ? PX_COLL_ALLREDUCE
              : kind == PX_OP_ALLGATHER ? PX_COLL_ALLGATHER
              : kind == PX_OP_ALLTOALL  ? PX_COLL_ALLTOALL
                                        : PX_COLL_REDUCE_SCATTER;
  px_op_size_coll(o, c, (uint64_t)elems_in, (uint64_t)elems_out, dt, n);
  o->dim[2] = d->B;
  return o;
}

/* Marks a TP collective as running along the sequence axis of (B, S, H).
 * With B > 1 the ranks' shards are not contiguous: the collective goes
 * through a full-size workspace (out[1]) in rank-major order. */
static void seq_axis(bld *b, const dims *d, px_op *o) {
  o->flags |= PX_OPF_SEQ_AXIS;
  if (d->B > 1) o->out[1] = R(slot_add(b->p, "seq_ws", PX_SLOT_WORKSPACE, d->act, d->B, d->S, d->H, 1), 0);
}

/* A TP reduction of a row-parallel output: all-reduce in place, or
 * reduce-scatter along the sequence with SP. Returns the reduced ref. */
static px_ref tp_reduce(bld *b, const dims *d, px_phase ph, px_ref part, px_ref sharded) {
  if (d->T == 1) return part;
  if (!d->sp) {
    coll(b, d, PX_OP_ALLREDUCE, PX_GROUP_TP, ph, part, part, d->B * d->S * d->H, d->B * d->S * d->H, d->act, d->T);
    return part;
  }
  px_op *o = coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_TP, ph, part, sharded, d->B * d->S * d->H,
                  d->B * d->Sl * d->H, d->act, d->T);
  seq_axis(b, d, o);
  return sharded;
}

/* With SP, all-gathers a sequence shard into the full sequence. */
static px_ref tp_gather(bld *b, const dims *d, px_phase ph, px_ref shard, px_ref full) {
  if (!d->sp) return shard;
  px_op *o = coll(b, d, PX_OP_ALLGATHER, PX_GROUP_TP, ph, shard, full, d->B * d->Sl * d->H, d->B * d->S * d->H,
                  (px_dtype)b->p->slots[shard.slot].dtype, d->T);
  seq_axis(b, d, o);
  return full;
}

/* The input of a linear layer's weight gradient: with SP, the full sequence
 * all-gathered from the kept shard where the weight gradient runs (in the W
 * block when the backward is split, so B neither gathers nor holds it). */
static px_ref wgrad_input(bld *b, const dims *d, px_ref shard, px_ref full) {
  return d->sp && !b->w ? tp_gather(b, d, PX_PHASE_BWD, shard, full) : full;
}

/* A tensor the W block reads: with SP and a sequence shard given, W
 * all-gathers it again from the shard B keeps (as x of a linear layer, or
 * the output gradient of a row-parallel one: B then frees the full tensor,
 * a TP all-gather in W for (tp - 1)/tp of its memory per deferred W);
 * otherwise B keeps it. */
static px_ref wgrad_keep(bld *b, const dims *d, px_ref full, px_ref shard) {
  if (full.slot < 0) return full;
  if (d->sp && shard.slot >= 0) {
    keep(b, shard);
    return tp_gather(b->w, d, PX_PHASE_BWD, shard, full);
  }
  keep(b, full);
  return full;
}

/* dx += dy W, then (reduce_into set) dx's TP reduction into *reduce_into,
 * then dW += dy^T x (+ db): Megatron's order, so the reduction can run on the
 * TP stream while the weight gradient is computed. With a split backward
 * (b->w) the weight gradient goes to the W block: x from x_shard and dy0
 * from dy_shard as wgrad_keep says. Returns the reduced dx. */
static px_ref linear_bwd(bld *b, const dims *d, px_ref dx, px_ref x, px_ref x_shard, int w, int bias, px_ref dy0,
                         px_ref dy_shard, px_ref dy1, px_ref dy2, int64_t m, int64_t n0, int64_t n1, int64_t n2,
                         int64_t k, const px_ref *reduce_into) {
  int64_t n = n0 + n1 + n2;
  bool f8 = b->p->slots[w].fp8; /* its forward ran in fp8: E5M2 output gradients, the fp8 input and weight */
  double e_in = f8 ? 1.0 : (double)d->e;
  if (f8) {
    weight_cast(b, d, PX_PHASE_BWD, w);
    dy0 = cast8(b, d, PX_PHASE_BWD, dy0, true), dy1 = cast8(b, d, PX_PHASE_BWD, dy1, true);
    dy2 = cast8(b, d, PX_PHASE_BWD, dy2, true);
    x = q8(b->p, d, x);
    dy_shard = x_shard = NOREF; /* W keeps the full fp8 tensors */
  }
  px_op *o = op_new(b, PX_OP_LINEAR_BWD_DATA, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy0, o->in[1] = dy1, o->in[2] = dy2, o->in[3] = R(w, 0);
  o->out[0] = dx;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  cost_gemm(o, (double)m, (double)k, (double)n, 1, e_in, (double)d->e);
  if (f8) gemm8(b, d, o, w);
  px_ref reduced = reduce_into ? tp_reduce(b, d, PX_PHASE_BWD, dx, *reduce_into) : dx;
  bld *wb = b;
  if (b->w) {
    wb = b->w;
    dy0 = wgrad_keep(b, d, dy0, dy_shard);
    dy1 = wgrad_keep(b, d, dy1, NOREF), dy2 = wgrad_keep(b, d, dy2, NOREF);
    x = wgrad_keep(b, d, x, x_shard);
  }
  o = op_new(wb, PX_OP_LINEAR_BWD_WEIGHT, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy0, o->in[1] = dy1, o->in[2] = dy2, o->in[3] = x;
  o->out[0] = R(grad_of(b->p, w), 0);
  o->out[1] = bias >= 0 ? R(grad_of(b->p, bias), 0) : NOREF;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = m, o->dim[1] = n, o->dim[2] = k, o->dim[3] = n0, o->dim[4] = n1, o->dim[5] = n2;
  cost_gemm(o, (double)n, (double)k, (double)m, 1, e_in, (double)px_dtype_bytes(d->grad));
  o->bytes += (double)(n * k) * (double)px_dtype_bytes(d->grad); /* read-modify-write of dW */
  if (f8) gemm8(b, d, o, w);
  return reduced;
}

static void norm(bld *b, const dims *d, px_phase ph, px_ref y, px_ref mean, px_ref rstd, px_ref x, int w, int bias,
                 int64_t rows) {
  px_op *o = op_new(b, PX_OP_NORM, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->in[1] = R(w, 0), o->in[2] = bias >= 0 ? R(bias, 0) : NOREF;
  o->out[0] = y, o->out[1] = rstd, o->out[2] = mean;
  o->dim[0] = rows, o->dim[1] = d->H;
  elementwise(o, (double)(rows * d->H), (double)(rows * d->H), (double)d->e);
  o->bytes += (double)rows * 8.0;
}

static void norm_bwd(bld *b, const dims *d, px_ref dx, px_ref dy, px_ref x, px_ref mean, px_ref rstd, int w, int bias,
                     int64_t rows) {
  px_op *o = op_new(b, PX_OP_NORM_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy, o->in[1] = x, o->in[2] = rstd, o->in[3] = mean, o->in[4] = R(w, 0);
  o->out[0] = dx, o->out[1] = R(grad_of(b->p, w), 0), o->out[2] = bias >= 0 ? R(grad_of(b->p, bias), 0) : NOREF;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = rows, o->dim[1] = d->H;
  elementwise(o, (double)(3 * rows * d->H), (double)(rows * d->H), (double)d->e);
}

static px_op *simple(bld *b, px_op_kind kind, px_phase ph, px_ref y, px_ref a, px_ref c, int64_t elems, double e_bytes) {
  px_op *o = op_new(b, kind, PX_STREAM_COMPUTE, ph);
  o->out[0] = y;
  o->in[0] = a;
  o->in[1] = c;
  o->dim[0] = elems;
  int nin = (a.slot >= 0) + (c.slot >= 0);
  elementwise(o, (double)(nin * elems), (double)elems, e_bytes);
  return o;
}

static px_op *dropout(bld *b, const dims *d, px_phase ph, px_ref y, px_ref mask, px_ref x, px_ref bias, int64_t d1,
                      int64_t d2, int64_t d3, int shard_axis, int site) {
  px_op *o = op_new(b, PX_OP_DROPOUT, PX_STREAM_COMPUTE, ph);
  o->out[0] = y, o->out[1] = mask;
  o->in[0] = x, o->in[1] = bias;
  o->dim[0] = d->B, o->dim[1] = d1, o->dim[2] = d2, o->dim[3] = d3, o->dim[4] = shard_axis, o->dim[5] = site;
  double n = (double)(d->B * d1 * d2 * d3);
  o->bytes = n * (2.0 * (double)d->e + 1.0);
  if (d1 == d->HQ) o->flags |= PX_OPF_ATTN_PROBS;
  return o;
}

static void dropout_bwd(bld *b, const dims *d, px_ref dx, px_ref dy, px_ref mask, int64_t elems) {
  px_op *o = simple(b, PX_OP_DROPOUT_BWD, PX_PHASE_BWD, dx, dy, mask, elems, (double)d->e);
  o->flags = PX_OPF_ACCUMULATE;
  o->bytes = (double)elems * (2.0 * (double)d->e + 1.0);
}

/* Slot names of one layer's tensors, shared by forward, recompute and backward. */
typedef struct {
  int x, out, ln1, ln1_mean, ln1_rstd, ln1_full, q, k, v, q_cp, k_cp, v_cp, ctx_cp, scores, probs, probs_drop,
      attn_mask, lse, ctx, attn_part,
      attn_out, attn_drop, attn_dmask, x2, ln2, ln2_mean, ln2_rstd, ln2_full, fc1, gate, up, act, mlp_part, mlp_out,
      mlp_drop, mlp_dmask;
  /* parameters */
  int w_ln1, b_ln1, w_qkv, b_qkv, w_o, b_o, w_ln2, b_ln2, w_fc1, b_fc1, w_fc2, b_fc2;
  /* mixture of experts (-1 in a dense model): the router's probabilities, each token's experts and weights,
   * the routed rows sent and received (a2a; all-gather: every EP rank's tokens), the experts' hidden rows,
   * their outputs and the outputs returned; the shared experts' tensors; parameters. With ETP > 1 the
   * rows before the ETP all-gather / after the reduce-scatter have their own slots (the _ep ones, and
   * moe_send_all after the all-gather dispatcher's second gather); otherwise those name the same slots. */
  int moe_probs, moe_idx, moe_gates, moe_counts, moe_send, moe_recv, exp_gate, exp_up, exp_fc1, exp_act, exp_out, moe_ret,
      sh_gate, sh_up, sh_fc1, sh_act;
  int moe_send_all, moe_recv_ep, exp_out_ep, moe_ret_ep;
  int w_router, w_exp_fc1, w_exp_fc2, w_sh_fc1, w_sh_fc2;
  /* multi-head latent attention (-1 otherwise): the latents, their norms' outputs and statistics, parameters */
  int q_lat, q_latn, q_rstd, kv_lat, k_pe, kv_latn, kv_rstd;
  int w_q_down, w_q_norm, w_q_up, w_kv_down, w_kv_norm, w_kv_up;
} layer_slots;

static void moe_slots_make(px_plan *p, const dims *d, layer_slots *L);
static void mla_slots_make(px_plan *p, const dims *d, layer_slots *L);

static void layer_slots_make(px_plan *p, const dims *d, layer_slots *L) {
  px_dtype a = d->act;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  L->x = slot_add(p, "layer_in", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->out = L->x; /* layer_in at offset +1 */
  L->ln1 = slot_add(p, "ln1", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln1_rstd = slot_add(p, "ln1_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  L->ln1_mean = d->layernorm ? slot_add(p, "ln1_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  L->ln1_full = d->sp ? slot_add(p, "ln1_full", PX_SLOT_ACT, a, B, S, H, 1) : L->ln1;
  L->q = slot_add(p, "q", PX_SLOT_ACT, a, B, S, d->HQ, d->D);
  L->k = slot_add(p, "k", PX_SLOT_ACT, a, B, S, d->HKV, d->D);
  L->v = slot_add(p, "v", PX_SLOT_ACT, a, B, S, d->HKV, d->Dv);
  bool unfused = !d->flash, udrop = unfused && d->drop;
  L->scores = unfused ? slot_add(p, "scores", PX_SLOT_ACT, a, B, d->HQ, S, S) : -1;
  L->probs = unfused ? slot_add(p, "probs", PX_SLOT_ACT, a, B, d->HQ, S, S) : -1;
  L->probs_drop = udrop ? slot_add(p, "probs_drop", PX_SLOT_ACT, a, B, d->HQ, S, S) : L->probs;
  L->attn_mask = udrop ? slot_add(p, "attn_mask", PX_SLOT_ACT, PX_DTYPE_U8, B, d->HQ, S, S) : -1;
  L->lse = d->flash ? slot_add(p, "lse", PX_SLOT_ACT, PX_DTYPE_FP32, B, d->HQ, S, 1) : -1;
  L->ctx = slot_add(p, "ctx", PX_SLOT_ACT, a, B, S, d->HQ, d->Dv);
  /* context parallelism: the whole sequence's keys and values (all-gather), or
   * the whole sequence of 1/cp of the heads (a2a) */
  L->q_cp = L->k_cp = L->v_cp = L->ctx_cp = -1;
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    L->k_cp = slot_add(p, "k_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV, d->D);
    L->v_cp = slot_add(p, "v_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV, d->D);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    L->q_cp = slot_add(p, "q_cp", PX_SLOT_ACT, a, B, S * d->C, d->HQ / d->C, d->D);
    L->k_cp = slot_add(p, "k_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV / d->C, d->D);
    L->v_cp = slot_add(p, "v_cp", PX_SLOT_ACT, a, B, S * d->C, d->HKV / d->C, d->D);
    L->ctx_cp = slot_add(p, "ctx_cp", PX_SLOT_ACT, a, B, S * d->C, d->HQ / d->C, d->D);
  }
  L->attn_part = slot_add(p, "attn_part", PX_SLOT_ACT, a, B, S, H, 1);
  L->attn_out = d->sp ? slot_add(p, "attn_out", PX_SLOT_ACT, a, B, Sl, H, 1) : L->attn_part;
  L->attn_drop = d->drop ? slot_add(p, "attn_drop", PX_SLOT_ACT, a, B, Sl, H, 1) : -1;
  L->attn_dmask = d->drop ? slot_add(p, "attn_dmask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;
  L->x2 = d->par_res ? -1 : slot_add(p, "x2", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln2 = slot_add(p, "ln2", PX_SLOT_ACT, a, B, Sl, H, 1);
  L->ln2_rstd = slot_add(p, "ln2_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  L->ln2_mean = d->layernorm ? slot_add(p, "ln2_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  L->ln2_full = d->sp ? slot_add(p, "ln2_full", PX_SLOT_ACT, a, B, S, H, 1) : L->ln2;
  L->fc1 = d->swiglu ? -1 : slot_add(p, "fc1", PX_SLOT_ACT, a, B, S, d->F, 1);
  L->gate = d->swiglu ? slot_add(p, "gate", PX_SLOT_ACT, a, B, S, d->F, 1) : -1;
  L->up = d->swiglu ? slot_add(p, "up", PX_SLOT_ACT, a, B, S, d->F, 1) : -1;
  L->act = slot_add(p, "act", PX_SLOT_ACT, a, B, S, d->F, 1);
  L->mlp_part = slot_add(p, "mlp_part", PX_SLOT_ACT, a, B, S, H, 1);
  L->mlp_out = d->sp ? slot_add(p, "mlp_out", PX_SLOT_ACT, a, B, Sl, H, 1) : L->mlp_part;
  L->mlp_drop = d->drop ? slot_add(p, "mlp_drop", PX_SLOT_ACT, a, B, Sl, H, 1) : -1;
  L->mlp_dmask = d->drop ? slot_add(p, "mlp_dmask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;

  int64_t qkv = d->QW + 2 * d->KW, fc1 = d->swiglu ? 2 * d->F : d->F;
  L->w_ln1 = param_add(p, d, "ln1_w", H, 1, true, true);
  L->b_ln1 = d->layernorm ? param_add(p, d, "ln1_b", H, 1, true, true) : -1;
  L->w_qkv = d->mla ? -1 : param_add(p, d, "qkv_w", qkv, H, false, false);
  L->b_qkv = d->qkv_bias && !d->mla ? param_add(p, d, "qkv_b", qkv, 1, false, false) : -1;
  L->w_o = param_add(p, d, "o_w", H, d->OW, false, false);
  mla_slots_make(p, d, L);
  L->b_o = d->bias ? param_add(p, d, "o_b", H, 1, true, false) : -1;
  L->w_ln2 = param_add(p, d, "ln2_w", H, 1, true, true);
  L->b_ln2 = d->layernorm ? param_add(p, d, "ln2_b", H, 1, true, true) : -1;
  L->w_fc1 = param_add(p, d, "fc1_w", fc1, H, false, false);
  L->b_fc1 = d->bias ? param_add(p, d, "fc1_b", fc1, 1, false, false) : -1;
  L->w_fc2 = param_add(p, d, "fc2_w", H, d->F, false, false);
  L->b_fc2 = d->bias ? param_add(p, d, "fc2_b", H, 1, true, false) : -1;
  moe_slots_make(p, d, L);
}

/* An expert parameter: (local experts, rows, cols), split over EP. */
static int expert_param(px_plan *p, const dims *d, const char *name, int64_t rows, int64_t cols) {
  int w = param_add(p, d, name, d->El * rows, cols, false, false);
  int g = grad_of(p, w);
  p->slots[w].expert = p->slots[g].expert = true;
  return w;
}

/* A mixture-of-experts layer's tensors (rows: B S of the layer's tokens; A
 * routed rows sent, R taken by the local experts). */
static void moe_slots_make(px_plan *p, const dims *d, layer_slots *L) {
  int *all[] = {&L->moe_probs, &L->moe_idx, &L->moe_gates, &L->moe_counts, &L->moe_send, &L->moe_recv, &L->exp_gate, &L->exp_up,
                &L->exp_fc1, &L->exp_act, &L->exp_out, &L->moe_ret, &L->sh_gate, &L->sh_up, &L->sh_fc1, &L->sh_act,
                &L->w_router, &L->w_exp_fc1, &L->w_exp_fc2, &L->w_sh_fc1, &L->w_sh_fc2, &L->moe_send_all,
                &L->moe_recv_ep, &L->exp_out_ep, &L->moe_ret_ep};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) *all[i] = -1;
  if (d->E == 0) return;
  px_dtype a = d->act;
  bool a2a = d->dispatch == PX_MOE_A2A, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  L->moe_probs = slot_add(p, "moe_probs", PX_SLOT_ACT, a, rows, d->E, 1, 1); /* the router's logits, then probabilities */
  L->moe_idx = slot_add(p, "moe_idx", PX_SLOT_ACT, PX_DTYPE_FP32, rows, d->K, 1, 1); /* int32 */
  L->moe_gates = slot_add(p, "moe_gates", PX_SLOT_ACT, PX_DTYPE_FP32, rows, d->K, 1, 1);
  /* int32: the rows sent to each expert, then the rows taken from each (source, local expert) */
  L->moe_counts = slot_add(p, "moe_counts", PX_SLOT_ACT, PX_DTYPE_FP32, 2, d->EP, d->El, 1);
  L->moe_send = slot_add(p, "moe_send", PX_SLOT_ACT, a, sent, H, 1, 1);
  L->moe_send_all = etp && !a2a ? slot_add(p, "moe_send_all", PX_SLOT_ACT, a, d->ETP * sent, H, 1, 1) : L->moe_send;
  L->moe_recv = slot_add(p, "moe_recv", PX_SLOT_ACT, a, d->R, H, 1, 1);
  L->moe_recv_ep = etp && a2a ? slot_add(p, "moe_recv_ep", PX_SLOT_ACT, a, d->Rep, H, 1, 1) : L->moe_recv;
  L->exp_gate = d->swiglu ? slot_add(p, "exp_gate", PX_SLOT_ACT, a, d->R, d->Fe, 1, 1) : -1;
  L->exp_up = d->swiglu ? slot_add(p, "exp_up", PX_SLOT_ACT, a, d->R, d->Fe, 1, 1) : -1;
  L->exp_fc1 = d->swiglu ? -1 : slot_add(p, "exp_fc1", PX_SLOT_ACT, a, d->R, d->Fe, 1, 1);
  L->exp_act = slot_add(p, "exp_act", PX_SLOT_ACT, a, d->R, d->Fe, 1, 1);
  L->exp_out = slot_add(p, "exp_out", PX_SLOT_ACT, a, d->R, H, 1, 1);
  L->exp_out_ep = etp && a2a ? slot_add(p, "exp_out_ep", PX_SLOT_ACT, a, d->Rep, H, 1, 1) : L->exp_out;
  L->moe_ret = slot_add(p, "moe_ret", PX_SLOT_ACT, a, a2a ? sent : d->ETP * sent, H, 1, 1);
  L->moe_ret_ep = etp && !a2a ? slot_add(p, "moe_ret_ep", PX_SLOT_ACT, a, sent, H, 1, 1) : L->moe_ret;
  int64_t fe1 = d->swiglu ? 2 * d->Fe : d->Fe, fs1 = d->swiglu ? 2 * d->Fs : d->Fs;
  L->w_router = param_add(p, d, "router_w", d->E, H, true, true); /* on sequence shards: SP-partial gradients */
  L->w_exp_fc1 = expert_param(p, d, "exp_fc1_w", fe1, H);
  L->w_exp_fc2 = expert_param(p, d, "exp_fc2_w", H, d->Fe);
  if (d->Fs > 0) {
    L->sh_gate = d->swiglu ? slot_add(p, "sh_gate", PX_SLOT_ACT, a, rows, d->Fs, 1, 1) : -1;
    L->sh_up = d->swiglu ? slot_add(p, "sh_up", PX_SLOT_ACT, a, rows, d->Fs, 1, 1) : -1;
    L->sh_fc1 = d->swiglu ? -1 : slot_add(p, "sh_fc1", PX_SLOT_ACT, a, rows, d->Fs, 1, 1);
    L->sh_act = slot_add(p, "sh_act", PX_SLOT_ACT, a, rows, d->Fs, 1, 1);
    L->w_sh_fc1 = param_add(p, d, "sh_fc1_w", fs1, H, false, false);
    L->w_sh_fc2 = param_add(p, d, "sh_fc2_w", H, d->Fs, false, false);
  }
}

/* An activation-gradient slot named after its activation. */
static int grad_slot(px_plan *p, int act) {
  if (act < 0) return -1;
  char name[PX_NAME_MAX];
  snprintf(name, sizeof name, "d%.22s", p->slots[act].name);
  const px_slot *s = &p->slots[act];
  return slot_add(p, name, PX_SLOT_ACT_GRAD, (px_dtype)s->dtype, s->shape[0], s->shape[1], s->shape[2], s->shape[3]);
}

/* Scores, causal softmax and attention-probability dropout. */
static void attention_core(bld *b, const dims *d, const layer_slots *L, px_phase ph) {
  px_op *o = op_new(b, PX_OP_ATTN_SCORES, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(L->q, 0), o->in[1] = R(L->k, 0);
  o->out[0] = R(L->scores, 0);
  o->dim[0] = d->B, o->dim[1] = d->S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  cost_gemm(o, (double)d->S, (double)d->S, (double)d->D, (double)(d->B * d->HQ), (double)d->e, (double)d->e);
  o = op_new(b, PX_OP_SOFTMAX, PX_STREAM_COMPUTE, ph);
  o->in[0] = R(L->scores, 0);
  o->out[0] = R(L->probs, 0);
  o->dim[0] = d->B * d->HQ, o->dim[1] = d->S;
  elementwise(o, (double)(d->B * d->HQ * d->S * d->S), (double)(d->B * d->HQ * d->S * d->S), (double)d->e);
  if (d->drop)
    dropout(b, d, ph, R(L->probs_drop, 0), R(L->attn_mask, 0), R(L->probs, 0), NOREF, d->HQ, d->S, d->S, 1, 0);
}

/* ---- multi-head latent attention (DeepSeek-V2/V3) ----
 *
 * The queries from a low-rank latent (q_down to q_lora_rank, its RMSNorm,
 * q_up to heads x (nope + rope); or one q projection), keys and values from
 * a shared latent (kv_down to kv_lora_rank plus one RoPE key head, its
 * RMSNorm, kv_up to heads x (nope + v)): the down projections and norms
 * replicated over TP, the up projections column-parallel, the output
 * projection row-parallel (Megatron-Core's MLA). k's RoPE columns are the
 * one RoPE head's, the same for every head (costed in the RoPE op); the
 * latents' gradients are summed over TP before their norms. The executors
 * refuse it (planned and simulated only). */

static void mla_slots_make(px_plan *p, const dims *d, layer_slots *L) {
  int *all[] = {&L->q_lat, &L->q_latn, &L->q_rstd, &L->kv_lat, &L->k_pe, &L->kv_latn, &L->kv_rstd, &L->w_q_down,
                &L->w_q_norm, &L->w_q_up, &L->w_kv_down, &L->w_kv_norm, &L->w_kv_up};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) *all[i] = -1;
  if (!d->mla) return;
  px_dtype a = d->act;
  int64_t rows = d->B * d->S, H = d->H;
  if (d->QL > 0) {
    L->q_lat = slot_add(p, "q_lat", PX_SLOT_ACT, a, rows, d->QL, 1, 1);
    L->q_latn = slot_add(p, "q_latn", PX_SLOT_ACT, a, rows, d->QL, 1, 1);
    L->q_rstd = slot_add(p, "q_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, rows, 1, 1, 1);
    L->w_q_down = param_add(p, d, "q_down_w", d->QL, H, true, false);
    L->w_q_norm = param_add(p, d, "q_norm_w", d->QL, 1, true, false);
    L->w_q_up = param_add(p, d, "q_up_w", d->QW, d->QL, false, false);
  } else {
    L->w_q_up = param_add(p, d, "q_up_w", d->QW, H, false, false); /* one query projection */
  }
  L->kv_lat = slot_add(p, "kv_lat", PX_SLOT_ACT, a, rows, d->KL, 1, 1);
  L->k_pe = slot_add(p, "k_pe", PX_SLOT_ACT, a, rows, d->Dr, 1, 1);
  L->kv_latn = slot_add(p, "kv_latn", PX_SLOT_ACT, a, rows, d->KL, 1, 1);
  L->kv_rstd = slot_add(p, "kv_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, rows, 1, 1, 1);
  L->w_kv_down = param_add(p, d, "kv_down_w", d->KL + d->Dr, H, true, false);
  L->w_kv_norm = param_add(p, d, "kv_norm_w", d->KL, 1, true, false);
  L->w_kv_up = param_add(p, d, "kv_up_w", d->HKV * d->Dn + d->VW, d->KL, false, false);
}

/* RMSNorm of a latent (width columns) and its backward. */
static void latent_norm(bld *b, const dims *d, px_phase ph, px_ref y, px_ref rstd, px_ref x, int w, int64_t width) {
  px_op *o = op_new(b, PX_OP_NORM, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->in[1] = R(w, 0);
  o->out[0] = y, o->out[1] = rstd;
  o->dim[0] = d->B * d->S, o->dim[1] = width;
  elementwise(o, (double)(d->B * d->S * width), (double)(d->B * d->S * width), (double)d->e);
}

static void latent_norm_bwd(bld *b, const dims *d, px_ref dx, px_ref dy, px_ref x, px_ref rstd, int w, int64_t width) {
  px_op *o = op_new(b, PX_OP_NORM_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy, o->in[1] = x, o->in[2] = rstd, o->in[4] = R(w, 0);
  o->out[0] = dx, o->out[1] = R(grad_of(b->p, w), 0);
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = d->B * d->S, o->dim[1] = width;
  elementwise(o, (double)(3 * d->B * d->S * width), (double)(d->B * d->S * width), (double)d->e);
}

/* q, k, v from the norm's output x (B S rows). */
static void mla_forward(bld *b, const dims *d, const layer_slots *L, px_phase ph, px_ref x) {
  int64_t rows = d->B * d->S, H = d->H;
  if (d->QL > 0) {
    linear(b, d, ph, x, L->w_q_down, -1, R(L->q_lat, 0), NOREF, NOREF, rows, d->QL, 0, 0, H);
    latent_norm(b, d, ph, R(L->q_latn, 0), R(L->q_rstd, 0), R(L->q_lat, 0), L->w_q_norm, d->QL);
    linear(b, d, ph, R(L->q_latn, 0), L->w_q_up, -1, R(L->q, 0), NOREF, NOREF, rows, d->QW, 0, 0, d->QL);
  } else {
    linear(b, d, ph, x, L->w_q_up, -1, R(L->q, 0), NOREF, NOREF, rows, d->QW, 0, 0, H);
  }
  linear(b, d, ph, x, L->w_kv_down, -1, R(L->kv_lat, 0), R(L->k_pe, 0), NOREF, rows, d->KL, d->Dr, 0, H);
  latent_norm(b, d, ph, R(L->kv_latn, 0), R(L->kv_rstd, 0), R(L->kv_lat, 0), L->w_kv_norm, d->KL);
  linear(b, d, ph, R(L->kv_latn, 0), L->w_kv_up, -1, R(L->k, 0), R(L->v, 0), NOREF, rows, d->HKV * d->Dn, d->VW, 0,
         d->KL);
}

/* From dq, dk, dv to the gradient of the norm's output x (reduced over TP, into sharded with SP). */
static px_ref mla_backward(bld *b, const dims *d, const layer_slots *L, px_ref x, px_ref x_shard, px_ref dq, px_ref dk,
                           px_ref dv, px_ref dx, px_ref sharded) {
  px_plan *p = b->p;
  int64_t rows = d->B * d->S, H = d->H;
  px_ref dkv_latn = R(grad_slot(p, L->kv_latn), 0), dkv_lat = R(grad_slot(p, L->kv_lat), 0);
  px_ref dk_pe = R(grad_slot(p, L->k_pe), 0);
  linear_bwd(b, d, dkv_latn, R(L->kv_latn, 0), NOREF, L->w_kv_up, -1, dk, NOREF, dv, NOREF, rows, d->HKV * d->Dn,
             d->VW, 0, d->KL, NULL);
  if (d->T > 1) /* the latent's gradient: partial over the TP ranks' heads */
    coll(b, d, PX_OP_ALLREDUCE, PX_GROUP_TP, PX_PHASE_BWD, dkv_latn, dkv_latn, rows * d->KL, rows * d->KL, d->act, d->T);
  latent_norm_bwd(b, d, dkv_lat, dkv_latn, R(L->kv_lat, 0), R(L->kv_rstd, 0), L->w_kv_norm, d->KL);
  linear_bwd(b, d, dx, x, x_shard, L->w_kv_down, -1, dkv_lat, NOREF, dk_pe, NOREF, rows, d->KL, d->Dr, 0, H, NULL);
  if (d->QL > 0) {
    px_ref dq_latn = R(grad_slot(p, L->q_latn), 0), dq_lat = R(grad_slot(p, L->q_lat), 0);
    linear_bwd(b, d, dq_latn, R(L->q_latn, 0), NOREF, L->w_q_up, -1, dq, NOREF, NOREF, NOREF, rows, d->QW, 0, 0, d->QL,
               NULL);
    if (d->T > 1)
      coll(b, d, PX_OP_ALLREDUCE, PX_GROUP_TP, PX_PHASE_BWD, dq_latn, dq_latn, rows * d->QL, rows * d->QL, d->act, d->T);
    latent_norm_bwd(b, d, dq_lat, dq_latn, R(L->q_lat, 0), R(L->q_rstd, 0), L->w_q_norm, d->QL);
    return linear_bwd(b, d, dx, x, x_shard, L->w_q_down, -1, dq_lat, NOREF, NOREF, NOREF, rows, d->QL, 0, 0, H,
                      &sharded);
  }
  return linear_bwd(b, d, dx, x, x_shard, L->w_q_up, -1, dq, NOREF, NOREF, NOREF, rows, d->QW, 0, 0, H, &sharded);
}

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
 * cost model takes the causal half), times attn_frac with sliding windows:
 * one layer block stands for every layer of a chunk, and a chunk holds as
 * many sliding as full layers (px_parallel_validate), so the mean is exact
 * per chunk. gpt-oss's sink logits (one per head, added to each row's
 * softmax denominator) are folded into the flash op: a row's one extra
 * exp against its keys', not costed apart. */

/* The tensors and shape the flash op works on. */
typedef struct {
  px_ref q, k, v, ctx;
  int64_t sq, sk, hq, hkv;
} attn_view;

static attn_view attn_view_of(const dims *d, const layer_slots *L) {
  attn_view a = {R(L->q, 0), R(L->k, 0), R(L->v, 0), R(L->ctx, 0), d->S, d->S, d->HQ, d->HKV};
  if (d->C == 1) return a;
  a.sk = d->S * d->C;
  if (d->cp_algo == PX_CP_ALLGATHER) a.k = R(L->k_cp, 0), a.v = R(L->v_cp, 0);
  if (d->cp_algo == PX_CP_A2A) {
    a.q = R(L->q_cp, 0), a.k = R(L->k_cp, 0), a.v = R(L->v_cp, 0), a.ctx = R(L->ctx_cp, 0);
    a.sq = a.sk, a.hq = d->HQ / d->C, a.hkv = d->HKV / d->C;
  }
  return a;
}

/* A CP collective of a (B, rows, heads, D) activation: an all-gather or
 * reduce-scatter along the sequence (through a workspace of the gathered
 * size in rank-major order when B > 1), or an all-to-all. */
static void cp_coll(bld *b, const dims *d, px_op_kind kind, px_phase ph, px_ref in, px_ref out, int64_t heads,
                    bool to_heads) {
  int64_t local = d->B * d->S * heads * d->D, full = local * d->C;
  int64_t n_in = kind == PX_OP_REDUCE_SCATTER ? full : local, n_out = kind == PX_OP_ALLGATHER ? full : local;
  px_op *o = coll(b, d, kind, PX_GROUP_CP, ph, in, out, n_in, n_out, d->act, d->C);
  if (kind == PX_OP_ALLTOALL) { /* through per-rank blocks: what is sent, then what arrives */
    o->dim[3] = d->S, o->dim[4] = heads, o->dim[5] = d->D;
    if (to_heads) o->flags |= PX_OPF_TO_HEADS;
    o->out[1] = R(slot_add(b->p, "a2a_ws", PX_SLOT_WORKSPACE, d->act, 2, d->B * d->S, heads, d->D), 0);
    o->bytes *= 2.0;
    return;
  }
  o->flags |= PX_OPF_SEQ_AXIS;
  if (d->B > 1) o->out[1] = R(slot_add(b->p, "cp_ws", PX_SLOT_WORKSPACE, d->act, d->B, d->S * d->C, heads, d->D), 0);
}

/* The ring's flash op: its transfers (bytes each rank sends over the CP
 * ring, one block a hop) and the double buffers the blocks arrive in. */
static void ring_op(bld *b, const dims *d, px_op *o, bool bwd) {
  double block = (double)(d->B * d->S * (d->KW + d->VW)) * (double)d->e; /* one rank's K and V */
  o->flags |= PX_OPF_CP_RING;
  o->group = PX_GROUP_CP;
  o->coll = PX_COLL_P2P;
  o->coll_bytes = (uint64_t)block * (bwd ? 2 : 1); /* the backward's hops carry dK, dV too */
  o->wire_bytes = bwd ? (double)(2 * d->C - 1) * block : (double)(d->C - 1) * block;
  int64_t per = bwd ? 4 : 2; /* k, v (and dk, dv) of a block */
  int ws = slot_add(b->p, bwd ? "ring_bwd_ws" : "ring_ws", PX_SLOT_WORKSPACE, d->act, 2 * per,
                    d->B * d->S, d->HKV, d->D);
  o->out[bwd ? 3 : 2] = R(ws, 0);
  if (!bwd) /* a block's partial context and log-sum-exp, merged into the running ones */
    o->out[3] = R(slot_add(b->p, "ring_part", PX_SLOT_WORKSPACE, PX_DTYPE_FP32, d->B, d->S, d->HQ, d->D + 1), 0);
}

static void flash_forward(bld *b, const dims *d, const layer_slots *L, px_phase ph) {
  attn_view a = attn_view_of(d, L);
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    cp_coll(b, d, PX_OP_ALLGATHER, ph, R(L->k, 0), a.k, d->HKV, false);
    cp_coll(b, d, PX_OP_ALLGATHER, ph, R(L->v, 0), a.v, d->HKV, false);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->q, 0), a.q, d->HQ, true);
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->k, 0), a.k, d->HKV, true);
    cp_coll(b, d, PX_OP_ALLTOALL, ph, R(L->v, 0), a.v, d->HKV, true);
  }
  px_op *o = op_new(b, PX_OP_FLASH_ATTN, PX_STREAM_COMPUTE, ph);
  o->in[0] = a.q, o->in[1] = a.k, o->in[2] = a.v;
  o->out[0] = a.ctx, o->out[1] = R(L->lse, 0);
  o->dim[0] = d->B, o->dim[1] = a.sq, o->dim[2] = a.hq, o->dim[3] = a.hkv, o->dim[4] = d->D, o->dim[5] = a.sk;
  o->flops = 2.0 * (double)(d->B * a.hq) * (double)a.sq * (double)a.sk * (double)(d->D + d->Dv) * d->attn_frac;
  elementwise(o, (double)(d->B * ((d->D + d->Dv) * a.sq * a.hq + (d->D + d->Dv) * a.sk * a.hkv)), 0, (double)d->e);
  if (d->C > 1 && d->cp_algo == PX_CP_RING) ring_op(b, d, o, false);
  if (d->C > 1 && d->cp_algo == PX_CP_A2A) cp_coll(b, d, PX_OP_ALLTOALL, ph, a.ctx, R(L->ctx, 0), d->HQ, false);
}

/* The fused attention's backward from dctx to dq, dk, dv (accumulated). */
static void flash_backward(bld *b, const dims *d, const layer_slots *L, px_ref dctx, px_ref dq, px_ref dk, px_ref dv) {
  px_plan *p = b->p;
  attn_view a = attn_view_of(d, L);
  px_ref gq = dq, gk = dk, gv = dv, gctx = dctx; /* the gradients the flash backward reads and writes */
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    gk = R(grad_slot(p, L->k_cp), 0), gv = R(grad_slot(p, L->v_cp), 0);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    gq = R(grad_slot(p, L->q_cp), 0), gk = R(grad_slot(p, L->k_cp), 0), gv = R(grad_slot(p, L->v_cp), 0);
    gctx = R(grad_slot(p, L->ctx_cp), 0);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, dctx, gctx, d->HQ, true);
  }
  px_op *o = op_new(b, PX_OP_FLASH_ATTN_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = gctx, o->in[1] = a.q, o->in[2] = a.k, o->in[3] = a.v, o->in[4] = a.ctx, o->in[5] = R(L->lse, 0);
  o->out[0] = gq, o->out[1] = gk, o->out[2] = gv;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = d->B, o->dim[1] = a.sq, o->dim[2] = a.hq, o->dim[3] = a.hkv, o->dim[4] = d->D, o->dim[5] = a.sk;
  o->flops = 4.0 * (double)(d->B * a.hq) * (double)a.sq * (double)a.sk * (double)(d->D + d->Dv) * d->attn_frac;
  double q_el = (double)(d->B * a.sq * a.hq * d->D), kv_el = (double)(d->B * a.sk * a.hkv * d->D);
  elementwise(o, 3 * q_el + 2 * kv_el, q_el + 2 * kv_el, (double)d->e);
  if (d->C > 1 && d->cp_algo == PX_CP_RING) ring_op(b, d, o, true);
  if (d->C > 1 && d->cp_algo == PX_CP_ALLGATHER) {
    cp_coll(b, d, PX_OP_REDUCE_SCATTER, PX_PHASE_BWD, gk, dk, d->HKV, false);
    cp_coll(b, d, PX_OP_REDUCE_SCATTER, PX_PHASE_BWD, gv, dv, d->HKV, false);
  } else if (d->C > 1 && d->cp_algo == PX_CP_A2A) {
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gq, dq, d->HQ, false);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gk, dk, d->HKV, false);
    cp_coll(b, d, PX_OP_ALLTOALL, PX_PHASE_BWD, gv, dv, d->HKV, false);
  }
}

/* ---- mixture of experts ----
 *
 * A MoE layer's MLP as Megatron-Core's dispatchers run it: each rank routes
 * its sequence shard (B Sl rows; SP is required with TP): the router (a
 * linear layer to one logit per expert, replicated over TP, its gradient a
 * partial sum like a norm's under SP) picks each token's top-k experts and
 * weights; the rows go to the EP ranks holding those experts (all-to-all of
 * the A = B Sl k routed rows, then an all-gather over the ETP group; or the
 * all-gather dispatcher's gather of every token over EP, then ETP), the
 * local experts run as grouped GEMMs on the R rows they take, split over
 * ETP (moe_ffn / etp wide), and the outputs come back the same way reversed
 * (reduce-scatter over ETP, all-to-all; or reduce-scatters of the weighted
 * partial sums). Each token's k outputs, summed with their weights, land on
 * its shard after the shared experts' output (a TP MLP on the gathered
 * sequence, reduce-scattered as the dense MLP's) is reduced. Expert GEMMs
 * count the mean rank's FLOPs (A ETP rows: model FLOPs) and carry the
 * busiest rank's shape (R rows over its local experts) for their time. */

/* A grouped GEMM over the local experts, from k to n (split into n0 + n1
 * outputs when two are given). kind: the forward, the data gradient (from
 * n back to k) or the weight gradient. */
static px_op *expert_gemm(bld *b, const dims *d, const layer_slots *L, px_op_kind kind, px_phase ph, int64_t n0,
                          int64_t n1, int64_t k) {
  px_op *o = op_new(b, kind, PX_STREAM_COMPUTE, ph);
  int64_t n = n0 + n1;
  o->dim[0] = (d->R + d->El - 1) / d->El, o->dim[1] = n, o->dim[2] = k, o->dim[3] = d->El, o->dim[4] = n0, o->dim[5] = n1;
  o->flops = 2.0 * (double)(d->A * d->ETP) * (double)n * (double)k; /* the mean rank's rows after the ETP gather */
  o->in[4] = R(L->moe_counts, 0); /* the rows each local expert took */
  double e = (double)d->e, ei = d->f8 ? 1.0 : e, rows = (double)d->R, w = (double)(d->El * n * k);
  if (kind == PX_OP_EXPERT_LINEAR) o->bytes = (rows * (double)k + w) * ei + rows * (double)n * e;
  else if (kind == PX_OP_EXPERT_LINEAR_BWD_DATA) o->bytes = (rows * (double)n + w) * ei + rows * (double)k * e;
  else o->bytes = (rows * (double)(n + k)) * ei + 2.0 * w * (double)px_dtype_bytes(d->grad);
  if (kind != PX_OP_EXPERT_LINEAR) o->flags = PX_OPF_ACCUMULATE;
  return o;
}

/* The experts on the R rows in `rows`: fc1 (gate and up with SwiGLU), the
 * activation, fc2 into `out`. */
static void experts_forward(bld *b, const dims *d, const layer_slots *L, px_phase ph) {
  int64_t fe = d->Fe, nr = d->R;
  if (d->f8) weight_cast(b, d, ph, L->w_exp_fc1);
  px_op *o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR, ph, fe, d->swiglu ? fe : 0, d->H);
  o->in[0] = q8(b->p, d, R(L->moe_recv, 0)), o->in[1] = R(L->w_exp_fc1, 0);
  if (d->f8) gemm8(b, d, o, L->w_exp_fc1);
  o->out[0] = R(d->swiglu ? L->exp_gate : L->exp_fc1, 0), o->out[1] = d->swiglu ? R(L->exp_up, 0) : NOREF;
  if (d->swiglu)
    simple(b, PX_OP_SWIGLU, ph, R(L->exp_act, 0), R(L->exp_gate, 0), R(L->exp_up, 0), nr * fe, (double)d->e);
  else
    simple(b, PX_OP_GELU, ph, R(L->exp_act, 0), R(L->exp_fc1, 0), NOREF, nr * fe, (double)d->e);
  px_ref act = cast8(b, d, ph, R(L->exp_act, 0), false);
  if (d->f8) weight_cast(b, d, ph, L->w_exp_fc2);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR, ph, d->H, 0, fe);
  o->in[0] = act, o->in[1] = R(L->w_exp_fc2, 0);
  o->out[0] = R(L->exp_out, 0);
  if (d->f8) gemm8(b, d, o, L->w_exp_fc2);
}

static void experts_backward(bld *b, const dims *d, const layer_slots *L) {
  px_plan *p = b->p;
  int64_t fe = d->Fe, nr = d->R;
  px_ref dout = R(grad_slot(p, L->exp_out), 0), dact = R(grad_slot(p, L->exp_act), 0);
  if (d->f8) weight_cast(b, d, PX_PHASE_BWD, L->w_exp_fc2);
  dout = cast8(b, d, PX_PHASE_BWD, dout, true);
  px_op *o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_DATA, PX_PHASE_BWD, d->H, 0, fe);
  o->in[0] = dout, o->in[3] = R(L->w_exp_fc2, 0), o->out[0] = dact;
  if (d->f8) gemm8(b, d, o, L->w_exp_fc2);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_WEIGHT, PX_PHASE_BWD, d->H, 0, fe);
  o->in[0] = dout, o->in[3] = q8(p, d, R(L->exp_act, 0)), o->out[0] = R(grad_of(p, L->w_exp_fc2), 0);
  if (d->f8) gemm8(b, d, o, L->w_exp_fc2);
  px_ref d1 = R(grad_slot(p, d->swiglu ? L->exp_gate : L->exp_fc1), 0);
  px_ref d2 = d->swiglu ? R(grad_slot(p, L->exp_up), 0) : NOREF;
  if (d->swiglu) {
    o = op_new(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->exp_gate, 0), o->in[2] = R(L->exp_up, 0);
    o->out[0] = d1, o->out[1] = d2;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = nr * fe;
    elementwise(o, (double)(3 * nr * fe), (double)(2 * nr * fe), (double)d->e);
  } else {
    o = simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, d1, dact, R(L->exp_fc1, 0), nr * fe, (double)d->e);
    o->flags = PX_OPF_ACCUMULATE;
  }
  px_ref drecv = R(grad_slot(p, L->moe_recv), 0);
  if (d->f8) weight_cast(b, d, PX_PHASE_BWD, L->w_exp_fc1);
  d1 = cast8(b, d, PX_PHASE_BWD, d1, true), d2 = cast8(b, d, PX_PHASE_BWD, d2, true);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_DATA, PX_PHASE_BWD, fe, d->swiglu ? fe : 0, d->H);
  o->in[0] = d1, o->in[1] = d2, o->in[3] = R(L->w_exp_fc1, 0), o->out[0] = drecv;
  if (d->f8) gemm8(b, d, o, L->w_exp_fc1);
  o = expert_gemm(b, d, L, PX_OP_EXPERT_LINEAR_BWD_WEIGHT, PX_PHASE_BWD, fe, d->swiglu ? fe : 0, d->H);
  o->in[0] = d1, o->in[1] = d2, o->in[3] = q8(p, d, R(L->moe_recv, 0)), o->out[0] = R(grad_of(p, L->w_exp_fc1), 0);
  if (d->f8) gemm8(b, d, o, L->w_exp_fc1);
}

/* An EP all-to-all of routed rows: to the experts (the send counts per
 * expert to the rows taken per source; the forward's also exchanges the
 * counts) or back from them. */
static void ep_exchange(bld *b, const dims *d, px_op *o, const layer_slots *L, bool to_experts) {
  o->in[1] = R(L->moe_counts, 0);
  if (to_experts) o->flags |= PX_OPF_TO_EXPERTS;
  int64_t nodes = px_plan_expert_nodes(b->p);
  if (nodes > 0 && nodes < d->K && b->p->grid.ep_place.nodes > 1) { /* group-limited: min(k, nodes) copies cross */
    const px_placement *g = &b->p->grid.ep_place;
    double n = (double)g->size, pn = (double)g->per_node, f = (double)nodes / (double)d->K;
    o->dim[3] = d->K, o->dim[4] = nodes;
    o->wire_bytes = (double)o->coll_bytes * ((pn - 1.0) / n + (n - pn) / n * f);
  }
}

/* A routing op over the B Sl token rows of this rank's sequence shard. */
static px_op *moe_op(bld *b, const dims *d, px_op_kind kind, px_phase ph, double bytes) {
  px_op *o = op_new(b, kind, PX_STREAM_COMPUTE, ph);
  o->dim[0] = d->B * d->Sl, o->dim[1] = d->H, o->dim[2] = d->K, o->dim[3] = d->E;
  o->dim[4] = d->dispatch == PX_MOE_A2A ? d->A : d->EP * d->B * d->Sl;
  o->bytes = bytes;
  if (kind == PX_OP_MOE_ROUTE_BWD || kind == PX_OP_MOE_PERMUTE_BWD || kind == PX_OP_MOE_UNPERMUTE_BWD)
    o->flags = PX_OPF_ACCUMULATE;
  return o;
}

/* The shared experts' first half: fc1 (gate and up with SwiGLU) and the activation. */
static void shared_fc1(bld *b, const dims *d, const layer_slots *L, px_phase ph, px_ref x) {
  int64_t rows = d->B * d->S;
  x = cast8(b, d, ph, x, false);
  if (d->swiglu) {
    linear(b, d, ph, x, L->w_sh_fc1, -1, R(L->sh_gate, 0), R(L->sh_up, 0), NOREF, rows, d->Fs, d->Fs, 0, d->H);
    simple(b, PX_OP_SWIGLU, ph, R(L->sh_act, 0), R(L->sh_gate, 0), R(L->sh_up, 0), rows * d->Fs, (double)d->e);
  } else {
    linear(b, d, ph, x, L->w_sh_fc1, -1, R(L->sh_fc1, 0), NOREF, NOREF, rows, d->Fs, 0, 0, d->H);
    simple(b, PX_OP_GELU, ph, R(L->sh_act, 0), R(L->sh_fc1, 0), NOREF, rows * d->Fs, (double)d->e);
  }
}

static px_ref branch_dropout(bld *b, const dims *d, px_phase ph, px_ref y, int bias, int dropped, int dmask, int site,
                             px_ref *bias_left);

/* The MoE MLP's forward from the norm's output: x, this rank's sequence
 * shard (the router's and the dispatcher's input), and x_full, the gathered
 * sequence the shared experts read (NOREF without them). The shared experts,
 * which need no routed row, run while the dispatch is in flight (with
 * --overlap tp): fc1 behind the dispatch, fc2 behind the combine. Returns
 * the branch's output (after its dropout; *bias_left as branch_end_fwd). */
static px_ref moe_forward(bld *b, const dims *d, const layer_slots *L, px_phase ph, px_ref x, px_ref x_full,
                          px_ref *bias_left) {
  px_plan *p = b->p;
  bool a2a = d->dispatch == PX_MOE_A2A, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  double e = (double)d->e;
  linear(b, d, ph, x, L->w_router, -1, R(L->moe_probs, 0), NOREF, NOREF, rows, d->E, 0, 0, H);
  px_op *o = moe_op(b, d, PX_OP_MOE_ROUTE, ph, (double)(rows * d->E) * 8.0 + (double)(rows * d->K) * 8.0);
  o->in[0] = R(L->moe_probs, 0), o->out[0] = R(L->moe_probs, 0), o->out[1] = R(L->moe_idx, 0),
  o->out[2] = R(L->moe_gates, 0);
  if (a2a) {
    o = moe_op(b, d, PX_OP_MOE_PERMUTE, ph, (double)(rows + d->A) * (double)H * e);
    o->in[0] = x, o->in[1] = R(L->moe_idx, 0), o->out[0] = R(L->moe_send, 0), o->out[1] = R(L->moe_counts, 0);
    px_ref send = cast8(b, d, ph, R(L->moe_send, 0), false); /* fp8: dispatched in fp8 (DeepSeek-V3) */
    px_dtype dt = (px_dtype)p->slots[send.slot].dtype;
    o = coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, ph, send, q8(p, d, R(L->moe_recv_ep, 0)), d->A * H, d->Rep * H, dt,
             d->EP);
    ep_exchange(b, d, o, L, true);
    if (etp)
      coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, ph, q8(p, d, R(L->moe_recv_ep, 0)), q8(p, d, R(L->moe_recv, 0)),
           d->Rep * H, d->R * H, dt, d->ETP);
    if (d->Fs > 0) shared_fc1(b, d, L, ph, x_full);
  } else { /* every EP (then ETP) rank's tokens, then the local experts' rows among them */
    coll(b, d, PX_OP_ALLGATHER, PX_GROUP_EP, ph, x, R(L->moe_send, 0), rows * H, sent * H, d->act, d->EP);
    if (etp)
      coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, ph, R(L->moe_send, 0), R(L->moe_send_all, 0), sent * H,
           d->ETP * sent * H, d->act, d->ETP);
    if (d->Fs > 0) shared_fc1(b, d, L, ph, x_full);
    o = moe_op(b, d, PX_OP_MOE_PERMUTE, ph, (double)(d->ETP * sent + d->R) * (double)H * e);
    o->in[0] = R(L->moe_send_all, 0), o->in[1] = R(L->moe_idx, 0), o->out[0] = R(L->moe_recv, 0);
    cast8(b, d, ph, R(L->moe_recv, 0), false);
  }
  experts_forward(b, d, L, ph);
  if (a2a) {
    if (etp)
      coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, ph, R(L->exp_out, 0), R(L->exp_out_ep, 0), d->R * H, d->Rep * H,
           d->act, d->ETP);
    o = coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, ph, R(L->exp_out_ep, 0), R(L->moe_ret, 0), d->Rep * H, d->A * H,
             d->act, d->EP);
    ep_exchange(b, d, o, L, false);
  } else { /* the weighted partial sums of every gathered token, each rank's own after the reduce-scatters */
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE, ph, (double)(d->R + d->ETP * sent) * (double)H * e);
    o->in[0] = R(L->exp_out, 0), o->in[1] = R(L->moe_gates, 0), o->in[2] = R(L->moe_idx, 0);
    o->out[0] = R(L->moe_ret, 0);
    o->flags |= PX_OPF_ACCUMULATE;
    if (etp)
      coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, ph, R(L->moe_ret, 0), R(L->moe_ret_ep, 0), d->ETP * sent * H,
           sent * H, d->act, d->ETP);
  }
  /* the shared experts' output reduced over TP as the dense MLP's; the routed outputs add onto the shard */
  px_ref part = R(L->mlp_part, 0), y = d->T == 1 ? part : R(L->mlp_out, 0);
  if (d->Fs > 0) {
    linear(b, d, ph, cast8(b, d, ph, R(L->sh_act, 0), false), L->w_sh_fc2, -1, part, NOREF, NOREF, d->B * d->S, H, 0,
           0, d->Fs);
    y = tp_reduce(b, d, ph, part, R(L->mlp_out, 0));
  }
  if (a2a) {
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE, ph, (double)(d->A + rows) * (double)H * e);
    o->in[0] = R(L->moe_ret, 0), o->in[1] = R(L->moe_gates, 0), o->in[2] = R(L->moe_idx, 0), o->out[0] = y;
    o->flags |= PX_OPF_ACCUMULATE;
  } else {
    o = coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_EP, ph, R(L->moe_ret_ep, 0), y, sent * H, rows * H, d->act, d->EP);
    if (d->Fs > 0) o->flags |= PX_OPF_ACCUMULATE;
  }
  return branch_dropout(b, d, ph, y, -1, L->mlp_drop, L->mlp_dmask, 2, bias_left);
}

/* The shared experts' backward from dpart into dx (accumulated). */
static void shared_backward(bld *b, const dims *d, const layer_slots *L, px_ref dpart, px_ref x, px_ref x_shard,
                            px_ref dx) {
  px_plan *p = b->p;
  int64_t rows = d->B * d->S, H = d->H;
  double e = (double)d->e;
  px_ref dact = R(grad_slot(p, L->sh_act), 0);
  linear_bwd(b, d, dact, R(L->sh_act, 0), NOREF, L->w_sh_fc2, -1, dpart, NOREF, NOREF, NOREF, rows, H, 0, 0, d->Fs, NULL);
  px_ref d1 = R(grad_slot(p, d->swiglu ? L->sh_gate : L->sh_fc1), 0);
  px_ref d2 = d->swiglu ? R(grad_slot(p, L->sh_up), 0) : NOREF;
  px_op *o;
  if (d->swiglu) {
    o = op_new(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->sh_gate, 0), o->in[2] = R(L->sh_up, 0);
    o->out[0] = d1, o->out[1] = d2;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = rows * d->Fs;
    elementwise(o, (double)(3 * rows * d->Fs), (double)(2 * rows * d->Fs), e);
  } else {
    o = simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, d1, dact, R(L->sh_fc1, 0), rows * d->Fs, e);
    o->flags = PX_OPF_ACCUMULATE;
  }
  linear_bwd(b, d, dx, x, x_shard, L->w_sh_fc1, -1, d1, NOREF, d2, NOREF, rows, d->Fs, d->swiglu ? d->Fs : 0, 0, H, NULL);
}

/* The MoE MLP's backward from dbranch, the gradient of the branch's output
 * (this rank's sequence shard), to the norm output's gradient: the shared
 * experts' into dln2_part (the gathered sequence, reduced over TP into
 * dln2_sh), the router's and the dispatch's onto the reduced shard; returns
 * it. The shared experts' backward runs behind the first all-to-all, the
 * router's behind the second. */
static px_ref moe_backward(bld *b, const dims *d, const layer_slots *L, px_ref dbranch, px_ref dln2_part,
                           px_ref dln2_sh) {
  px_plan *p = b->p;
  bool a2a = d->dispatch == PX_MOE_A2A, etp = d->ETP > 1;
  int64_t rows = d->B * d->Sl, H = d->H, sent = a2a ? d->A : d->EP * rows;
  double e = (double)d->e;
  px_ref x = R(L->ln2, 0), dpart = NOREF, x_full = NOREF;
  if (d->Fs > 0) {
    dpart = tp_gather(b, d, PX_PHASE_BWD, dbranch, R(grad_slot(p, L->mlp_part), 0));
    x_full = wgrad_input(b, d, x, R(L->ln2_full, 0));
  }
  px_ref dx = d->T == 1 ? dln2_part : dln2_sh, dln2 = dx;
  px_ref dret = R(grad_slot(p, L->moe_ret), 0), dgates = R(grad_slot(p, L->moe_gates), 0);
  px_ref dexp = R(grad_slot(p, L->exp_out), 0), dsend = R(grad_slot(p, L->moe_send), 0);
  px_op *o;
  if (a2a) {
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE_BWD, PX_PHASE_BWD, (double)(rows + 2 * d->A) * (double)H * e);
    o->in[0] = dbranch, o->in[1] = R(L->moe_ret, 0), o->in[2] = R(L->moe_gates, 0), o->in[3] = R(L->moe_idx, 0);
    o->out[0] = dret, o->out[1] = dgates;
    px_ref dexp_ep = R(grad_slot(p, L->exp_out_ep), 0);
    o = coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, PX_PHASE_BWD, dret, dexp_ep, d->A * H, d->Rep * H, d->act, d->EP);
    ep_exchange(b, d, o, L, true);
    if (etp)
      coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, PX_PHASE_BWD, dexp_ep, dexp, d->Rep * H, d->R * H, d->act, d->ETP);
  } else {
    px_ref dret_ep = R(grad_slot(p, L->moe_ret_ep), 0);
    coll(b, d, PX_OP_ALLGATHER, PX_GROUP_EP, PX_PHASE_BWD, dbranch, dret_ep, rows * H, sent * H, d->act, d->EP);
    if (etp)
      coll(b, d, PX_OP_ALLGATHER, PX_GROUP_ETP, PX_PHASE_BWD, dret_ep, dret, sent * H, d->ETP * sent * H, d->act,
           d->ETP);
    o = moe_op(b, d, PX_OP_MOE_UNPERMUTE_BWD, PX_PHASE_BWD, (double)(d->ETP * sent + 2 * d->R) * (double)H * e);
    o->in[0] = dret, o->in[1] = R(L->exp_out, 0), o->in[2] = R(L->moe_gates, 0), o->in[3] = R(L->moe_idx, 0);
    o->out[0] = dexp, o->out[1] = dgates;
  }
  if (d->Fs > 0) {
    shared_backward(b, d, L, dpart, x_full, x, dln2_part);
    dln2 = tp_reduce(b, d, PX_PHASE_BWD, dln2_part, dln2_sh);
  }
  experts_backward(b, d, L);
  px_ref drecv = R(grad_slot(p, L->moe_recv), 0);
  if (a2a) {
    px_ref drecv_ep = R(grad_slot(p, L->moe_recv_ep), 0);
    if (etp)
      coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, PX_PHASE_BWD, drecv, drecv_ep, d->R * H, d->Rep * H, d->act,
           d->ETP);
    ep_exchange(b, d, coll(b, d, PX_OP_ALLTOALL, PX_GROUP_EP, PX_PHASE_BWD, drecv_ep, dsend, d->Rep * H, d->A * H,
                           d->act, d->EP),
                L, false);
  }
  px_ref dlogits = R(grad_slot(p, L->moe_probs), 0);
  o = moe_op(b, d, PX_OP_MOE_ROUTE_BWD, PX_PHASE_BWD, (double)(rows * d->E) * 12.0 + (double)(rows * d->K) * 8.0);
  o->in[0] = dgates, o->in[1] = R(L->moe_probs, 0), o->in[2] = R(L->moe_idx, 0), o->out[0] = dlogits;
  linear_bwd(b, d, dx, x, NOREF, L->w_router, -1, dlogits, NOREF, NOREF, NOREF, rows, d->E, 0, 0, H, NULL);
  if (a2a) {
    o = moe_op(b, d, PX_OP_MOE_PERMUTE_BWD, PX_PHASE_BWD, (double)(d->A + rows) * (double)H * e);
    o->in[0] = dsend, o->in[1] = R(L->moe_idx, 0), o->out[0] = dx;
  } else {
    px_ref dsend_all = R(grad_slot(p, L->moe_send_all), 0);
    o = moe_op(b, d, PX_OP_MOE_PERMUTE_BWD, PX_PHASE_BWD, (double)(d->R + d->ETP * sent) * (double)H * e);
    o->in[0] = drecv, o->in[1] = R(L->moe_idx, 0), o->out[0] = dsend_all;
    if (etp)
      coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_ETP, PX_PHASE_BWD, dsend_all, dsend, d->ETP * sent * H, sent * H,
           d->act, d->ETP);
    coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_EP, PX_PHASE_BWD, dsend, dx, sent * H, rows * H, d->act, d->EP);
    b->b->ops[b->b->nops - 1].flags |= PX_OPF_ACCUMULATE;
  }
  return dln2;
}

/* One layer's forward. With `recompute` the ops are the recomputation inside
 * the backward block and the layer output is not produced. */
/* The end of a branch (attention or MLP): the row-parallel linear w on `in`
 * (in_width columns), the TP reduce into out, then with dropout (at `site`)
 * the bias and the dropout into dropped. Returns the branch's output;
 * *bias_left is the bias the residual add still has to add (none after a
 * dropout, which adds it first). */
static px_ref branch_tail_fwd(bld *b, const dims *d, px_phase ph, int bias, int part, int out, int dropped, int dmask,
                              int site, px_ref *bias_left);

static px_ref branch_end_fwd(bld *b, const dims *d, px_phase ph, int in, int w, int bias, int part, int out, int dropped,
                             int dmask, int64_t in_width, int site, px_ref *bias_left) {
  linear(b, d, ph, R(in, 0), w, -1, R(part, 0), NOREF, NOREF, d->B * d->S, d->H, 0, 0, in_width);
  return branch_tail_fwd(b, d, ph, bias, part, out, dropped, dmask, site, bias_left);
}

/* A branch's partial output `part` (over TP) reduced into out, then the bias and dropout as branch_end_fwd says. */
static px_ref branch_tail_fwd(bld *b, const dims *d, px_phase ph, int bias, int part, int out, int dropped, int dmask,
                              int site, px_ref *bias_left) {
  return branch_dropout(b, d, ph, tp_reduce(b, d, ph, R(part, 0), R(out, 0)), bias, dropped, dmask, site, bias_left);
}

/* A branch's reduced output y through its bias and dropout (at `site`) into dropped. */
static px_ref branch_dropout(bld *b, const dims *d, px_phase ph, px_ref y, int bias, int dropped, int dmask, int site,
                             px_ref *bias_left) {
  *bias_left = bias >= 0 ? R(bias, 0) : NOREF;
  if (!d->drop) return y;
  dropout(b, d, ph, R(dropped, 0), R(dmask, 0), y, *bias_left, d->Sl, d->H, 1, d->sp ? 1 : 0, site);
  *bias_left = NOREF;
  return R(dropped, 0);
}

static void layer_forward(bld *b, const dims *d, const layer_slots *L, px_phase ph, bool produce_out) {
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  int64_t rows = B * Sl, rows_full = B * S;
  px_ref x = R(L->x, 0);
  norm(b, d, ph, R(L->ln1, 0), L->ln1_mean >= 0 ? R(L->ln1_mean, 0) : NOREF, R(L->ln1_rstd, 0), x, L->w_ln1,
       L->b_ln1, rows);
  px_plan *p = b->p;
  px_ref ln1 = tp_gather(b, d, ph, cast8(b, d, ph, R(L->ln1, 0), false), q8(p, d, R(L->ln1_full, 0)));
  if (d->mla)
    mla_forward(b, d, L, ph, ln1);
  else
    linear(b, d, ph, ln1, L->w_qkv, L->b_qkv, R(L->q, 0), R(L->k, 0), R(L->v, 0), rows_full, d->QW, d->KW, d->KW, H);
  if (d->rope) {
    px_op *o = op_new(b, PX_OP_ROPE, PX_STREAM_COMPUTE, ph);
    o->in[0] = R(L->q, 0), o->in[1] = R(L->k, 0);
    o->out[0] = R(L->q, 0), o->out[1] = R(L->k, 0);
    o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
    double rotated = (double)(rows_full * (d->mla ? (d->HQ + 1) * d->Dr : d->QW + d->KW)); /* MLA: the RoPE dims */
    elementwise(o, rotated, rotated, (double)d->e);
  }
  px_op *o;
  if (d->flash) {
    flash_forward(b, d, L, ph);
  } else {
    attention_core(b, d, L, ph);
    o = op_new(b, PX_OP_ATTN_CONTEXT, PX_STREAM_COMPUTE, ph);
    o->in[0] = R(L->probs_drop, 0), o->in[1] = R(L->v, 0);
    o->out[0] = R(L->ctx, 0);
    o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
    cost_gemm(o, (double)S, (double)d->D, (double)S, (double)(B * d->HQ), (double)d->e, (double)d->e);
  }
  px_ref bo;
  px_ref attn = branch_end_fwd(b, d, ph, cast8(b, d, ph, R(L->ctx, 0), false).slot, L->w_o, L->b_o, L->attn_part, L->attn_out, L->attn_drop, L->attn_dmask,
                               d->OW, 1, &bo);
  px_ref mid; /* the MLP's norm input */
  if (d->par_res) {
    mid = x;
  } else {
    o = simple(b, PX_OP_ADD, ph, R(L->x2, 0), x, attn, rows * H, (double)d->e);
    o->in[2] = bo;
    o->dim[1] = H;
    mid = R(L->x2, 0);
  }
  norm(b, d, ph, R(L->ln2, 0), L->ln2_mean >= 0 ? R(L->ln2_mean, 0) : NOREF, R(L->ln2_rstd, 0), mid, L->w_ln2,
       L->b_ln2, rows);
  px_ref ln2 = d->moe ? (d->Fs > 0 ? tp_gather(b, d, ph, R(L->ln2, 0), R(L->ln2_full, 0)) : NOREF) /* shared experts' */
                      : tp_gather(b, d, ph, cast8(b, d, ph, R(L->ln2, 0), false), q8(p, d, R(L->ln2_full, 0)));
  px_ref bf, mlp;
  if (d->moe) {
    mlp = moe_forward(b, d, L, ph, R(L->ln2, 0), ln2, &bf);
  } else if (d->swiglu) {
    linear(b, d, ph, ln2, L->w_fc1, L->b_fc1, R(L->gate, 0), R(L->up, 0), NOREF, rows_full, d->F, d->F, 0, H);
    o = simple(b, PX_OP_SWIGLU, ph, R(L->act, 0), R(L->gate, 0), R(L->up, 0), rows_full * d->F, (double)d->e);
  } else if (d->gelu_fused) { /* the GEMM's epilogue: act and the pre-activation the backward needs */
    o = linear(b, d, ph, ln2, L->w_fc1, L->b_fc1, R(L->act, 0), NOREF, NOREF, rows_full, d->F, 0, 0, H);
    o->flags |= PX_OPF_GELU;
    o->out[3] = R(L->fc1, 0);
    o->bytes += (double)(rows_full * d->F) * (double)d->e;
  } else {
    linear(b, d, ph, ln2, L->w_fc1, L->b_fc1, R(L->fc1, 0), NOREF, NOREF, rows_full, d->F, 0, 0, H);
    simple(b, PX_OP_GELU, ph, R(L->act, 0), R(L->fc1, 0), NOREF, rows_full * d->F, (double)d->e);
  }
  if (!d->moe)
    mlp = branch_end_fwd(b, d, ph, cast8(b, d, ph, R(L->act, 0), false).slot, L->w_fc2, L->b_fc2, L->mlp_part, L->mlp_out, L->mlp_drop, L->mlp_dmask, d->F,
                         2, &bf);
  if (!produce_out) return;
  px_ref out = R(L->out, 1);
  if (d->par_res) {
    /* out = x + attn (+ b_o) + mlp (+ b_fc2) */
    o = simple(b, PX_OP_ADD, ph, out, x, attn, rows * H, (double)d->e);
    o->in[2] = bo;
    o->dim[1] = H;
    o = simple(b, PX_OP_ADD, ph, out, out, mlp, rows * H, (double)d->e);
    o->in[2] = bf;
    o->dim[1] = H;
  } else {
    o = simple(b, PX_OP_ADD, ph, out, R(L->x2, 0), mlp, rows * H, (double)d->e);
    o->in[2] = bf;
    o->dim[1] = H;
  }
}

/* Backward of the unfused attention (with selective recomputation first). */
static void attention_backward(bld *b, const dims *d, const layer_slots *L, px_recompute rc, px_ref dctx, px_ref dq,
                               px_ref dk, px_ref dv) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S;
  if (rc == PX_RECOMPUTE_SELECTIVE) attention_core(b, d, L, PX_PHASE_RECOMPUTE);
  px_ref dprobs_drop = R(grad_slot(p, L->probs_drop), 0);
  px_op *o = op_new(b, PX_OP_ATTN_CONTEXT_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dctx, o->in[1] = R(L->probs_drop, 0), o->in[2] = R(L->v, 0);
  o->out[0] = dprobs_drop, o->out[1] = dv;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  cost_gemm(o, (double)S, (double)S, (double)d->D, (double)(2 * B * d->HQ), (double)d->e, (double)d->e);
  px_ref dprobs = dprobs_drop;
  if (d->drop) {
    dprobs = R(grad_slot(p, L->probs), 0);
    dropout_bwd(b, d, dprobs, dprobs_drop, R(L->attn_mask, 0), B * d->HQ * S * S);
  }
  px_ref dscores = R(grad_slot(p, L->scores), 0);
  o = op_new(b, PX_OP_SOFTMAX_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dprobs, o->in[1] = R(L->probs, 0);
  o->out[0] = dscores;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B * d->HQ, o->dim[1] = S;
  elementwise(o, (double)(2 * B * d->HQ * S * S), (double)(B * d->HQ * S * S), (double)d->e);
  o = op_new(b, PX_OP_ATTN_SCORES_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dscores, o->in[1] = R(L->q, 0), o->in[2] = R(L->k, 0);
  o->out[0] = dq, o->out[1] = dk;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
  cost_gemm(o, (double)S, (double)d->D, (double)S, (double)(2 * B * d->HQ), (double)d->e, (double)d->e);
}

/* From the residual's gradient dres back through a branch's dropout (with
 * its mask): the gradient of the branch's reduced output (the sequence
 * shard's with SP). */
static px_ref branch_dropout_bwd(bld *b, const dims *d, px_ref dres, int out, int dmask) {
  if (!d->drop) return dres;
  px_ref dbranch = R(grad_slot(b->p, out), 0);
  dropout_bwd(b, d, dbranch, dres, R(dmask, 0), d->B * d->Sl * d->H);
  return dbranch;
}

/* From the residual's gradient dres through a branch's dropout and the TP
 * gather: the gradient of its partial output `part` (*dbranch: the sequence
 * shard's with SP). */
static px_ref branch_tail_bwd(bld *b, const dims *d, px_ref dres, int out, int dmask, int part, px_ref *dbranch) {
  *dbranch = branch_dropout_bwd(b, d, dres, out, dmask);
  return tp_gather(b, d, PX_PHASE_BWD, *dbranch, R(grad_slot(b->p, part), 0));
}

/* Backward of a branch's end (attention or MLP): from the residual's
 * gradient dres through the dropout (with its mask) and the TP gather to the
 * row-parallel linear w (bias), whose input `in` of in_width columns gets its
 * gradient; with pre >= 0, `in` is gelu(pre) and the data-gradient GEMM's
 * epilogue gives pre's gradient instead. */
static void branch_end_bwd(bld *b, const dims *d, px_ref dres, int out, int dmask, int part, int in, int w, int bias,
                           int64_t in_width, int pre) {
  px_plan *p = b->p;
  px_ref dbranch, dfull = branch_tail_bwd(b, d, dres, out, dmask, part, &dbranch);
  int32_t data = b->b->nops; /* linear_bwd's first op */
  linear_bwd(b, d, R(grad_slot(p, pre >= 0 ? pre : in), 0), R(in, 0), NOREF, w, bias, dfull, dbranch, NOREF, NOREF,
             d->B * d->S, d->H, 0, 0, in_width, NULL);
  if (pre >= 0) {
    while (b->b->ops[data].kind != PX_OP_LINEAR_BWD_DATA) data++; /* past fp8's casts */
    px_op *o = &b->b->ops[data];
    o->flags = (uint16_t)((o->flags & (PX_OPF_FP8 | PX_OPF_FP8_BLOCK)) | PX_OPF_DGELU);
    o->in[4] = R(pre, 0);
    o->bytes += (double)(d->B * d->S * in_width) * (double)d->e;
  }
}

/* The dense MLP's backward from the residual's gradient dout to the norm
 * output's gradient (reduced over TP, into dln2_sh with SP). */
static px_ref mlp_backward(bld *b, const dims *d, const layer_slots *L, px_ref dout, px_ref dln2_part, px_ref dln2_sh) {
  px_plan *p = b->p;
  int64_t rows_full = d->B * d->S, H = d->H;
  px_ref dln2;
  /* MLP branch: dout -> (dropout) -> row-parallel fc2 */
  branch_end_bwd(b, d, dout, L->mlp_out, L->mlp_dmask, L->mlp_part, L->act, L->w_fc2, L->b_fc2, d->F,
                 d->gelu_fused ? L->fc1 : -1);
  px_ref dact = R(grad_slot(p, L->act), 0);
  /* Megatron-SP keeps the sharded norm output and gathers it again */
  px_ref ln2_full = wgrad_input(b, d, q8(p, d, R(L->ln2, 0)), q8(p, d, R(L->ln2_full, 0)));
  if (d->swiglu) {
    px_ref dgate = R(grad_slot(p, L->gate), 0), dup = R(grad_slot(p, L->up), 0);
    px_op *o = op_new(b, PX_OP_SWIGLU_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dact, o->in[1] = R(L->gate, 0), o->in[2] = R(L->up, 0);
    o->out[0] = dgate, o->out[1] = dup;
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = rows_full * d->F;
    elementwise(o, (double)(3 * rows_full * d->F), (double)(2 * rows_full * d->F), (double)d->e);
    dln2 = linear_bwd(b, d, dln2_part, ln2_full, R(L->ln2, 0), L->w_fc1, L->b_fc1, dgate, NOREF, dup, NOREF, rows_full, d->F,
                      d->F, 0, H, &dln2_sh);
  } else {
    px_ref dfc1 = R(grad_slot(p, L->fc1), 0);
    if (!d->gelu_fused) {
      px_op *o = simple(b, PX_OP_GELU_BWD, PX_PHASE_BWD, dfc1, dact, R(L->fc1, 0), rows_full * d->F, (double)d->e);
      o->flags = PX_OPF_ACCUMULATE;
    }
    dln2 = linear_bwd(b, d, dln2_part, ln2_full, R(L->ln2, 0), L->w_fc1, L->b_fc1, dfc1, NOREF, NOREF, NOREF, rows_full, d->F,
                      0, 0, H, &dln2_sh);
  }
  return dln2;
}

/* One layer's backward; recomputation first when chosen. */
static void layer_backward(bld *b, const dims *d, const layer_slots *L, px_recompute rc) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  int64_t rows = B * Sl, rows_full = B * S;
  if (rc == PX_RECOMPUTE_FULL) layer_forward(b, d, L, PX_PHASE_RECOMPUTE, false);
  px_ref dout = R(grad_slot(p, L->x), 1);
  px_ref dx = R(grad_slot(p, L->x), 0);
  px_ref dln2_part = R(grad_slot(p, L->ln2_full), 0), dln2_sh = R(grad_slot(p, L->ln2), 0), dln2;
  if (d->moe) { /* MoE branch: dout -> (dropout) -> the shard's experts and the shared experts */
    dln2 = moe_backward(b, d, L, branch_dropout_bwd(b, d, dout, L->mlp_out, L->mlp_dmask), dln2_part, dln2_sh);
  } else {
    dln2 = mlp_backward(b, d, L, dout, dln2_part, dln2_sh);
  }
  /* dmid: gradient at the MLP norm's input (x2, or x with a parallel residual) */
  px_ref dmid = d->par_res ? dx : R(grad_slot(p, L->x2), 0);
  px_op *o = simple(b, PX_OP_ACC, PX_PHASE_BWD, dmid, dout, NOREF, rows * H, (double)d->e);
  o->flags = PX_OPF_ACCUMULATE;
  norm_bwd(b, d, dmid, dln2, d->par_res ? R(L->x, 0) : R(L->x2, 0),
           L->ln2_mean >= 0 ? R(L->ln2_mean, 0) : NOREF, R(L->ln2_rstd, 0), L->w_ln2, L->b_ln2, rows);
  /* Attention branch: the residual's gradient (dout with a parallel residual) */
  branch_end_bwd(b, d, d->par_res ? dout : dmid, L->attn_out, L->attn_dmask, L->attn_part, L->ctx, L->w_o, L->b_o,
                 d->OW, -1);
  px_ref dctx = R(grad_slot(p, L->ctx), 0);
  px_ref dq = R(grad_slot(p, L->q), 0), dk = R(grad_slot(p, L->k), 0), dv = R(grad_slot(p, L->v), 0);
  if (d->flash) {
    flash_backward(b, d, L, dctx, dq, dk, dv);
  } else {
    attention_backward(b, d, L, rc, dctx, dq, dk, dv);
  }
  if (d->rope) {
    o = op_new(b, PX_OP_ROPE_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = dq, o->in[1] = dk;
    o->out[0] = dq, o->out[1] = dk;
    o->dim[0] = B, o->dim[1] = S, o->dim[2] = d->HQ, o->dim[3] = d->HKV, o->dim[4] = d->D;
    double rotated = (double)(rows_full * (d->mla ? (d->HQ + 1) * d->Dr : d->QW + d->KW));
    elementwise(o, rotated, rotated, (double)d->e);
  }
  px_ref ln1_full = wgrad_input(b, d, q8(p, d, R(L->ln1, 0)), q8(p, d, R(L->ln1_full, 0)));
  px_ref dln1_part = R(grad_slot(p, L->ln1_full), 0);
  px_ref dln1_sh = R(grad_slot(p, L->ln1), 0);
  px_ref dln1 = d->mla ? mla_backward(b, d, L, ln1_full, R(L->ln1, 0), dq, dk, dv, dln1_part, dln1_sh)
                       : linear_bwd(b, d, dln1_part, ln1_full, R(L->ln1, 0), L->w_qkv, L->b_qkv, dq, NOREF, dk, dv,
                                    rows_full, d->QW, d->KW, d->KW, H, &dln1_sh);
  if (!d->par_res) {
    o = simple(b, PX_OP_ACC, PX_PHASE_BWD, dx, dmid, NOREF, rows * H, (double)d->e);
    o->flags = PX_OPF_ACCUMULATE;
  }
  norm_bwd(b, d, dx, dln1, R(L->x, 0), L->ln1_mean >= 0 ? R(L->ln1_mean, 0) : NOREF, R(L->ln1_rstd, 0), L->w_ln1,
           L->b_ln1, rows);
}

/* ---- embedding, head, communication, optimizer ---- */

typedef struct {
  int tokens, targets, loss, w_emb, wpe, w_lnf, b_lnf, w_head, emb_part, emb, emb_mask, lnf, lnf_mean, lnf_rstd,
      lnf_full, logits, ce_probs;
} stage_slots;

static void stage_slots_make(px_plan *p, const dims *d, stage_slots *s) {
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  s->tokens = slot_add(p, "tokens", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1); /* int32, 4 bytes */
  p->slots[s->tokens].role = PX_ROLE_TOKENS;
  s->targets = slot_add(p, "targets", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1);
  p->slots[s->targets].role = PX_ROLE_TARGETS;
  s->loss = slot_add(p, "loss", PX_SLOT_ACT, PX_DTYPE_FP32, B, S, 1, 1);
  p->slots[s->loss].role = PX_ROLE_LOSS;
  s->w_emb = param_add(p, d, "emb_w", d->Vl, H, false, false);
  s->wpe = d->learned ? param_add(p, d, "pos_w", p->model.max_positions, H, true, true) : -1;
  s->w_lnf = param_add(p, d, "lnf_w", H, 1, true, true);
  s->b_lnf = d->layernorm ? param_add(p, d, "lnf_b", H, 1, true, true) : -1;
  /* Tied embeddings on one stage share the table; across stages the last
   * stage holds a copy kept equal by the embedding-group all-reduce. */
  s->w_head = p->model.tied_embeddings && p->par.pp == 1 ? s->w_emb : param_add(p, d, "head_w", d->Vl, H, false, false);
  if (p->model.tied_embeddings && p->par.pp > 1) p->slots[s->w_emb].role = p->slots[s->w_head].role = PX_ROLE_TIED;
  s->emb_part = d->sp ? slot_add(p, "emb_part", PX_SLOT_ACT, d->act, B, S, H, 1) : -1;
  s->emb = d->drop ? slot_add(p, "emb", PX_SLOT_ACT, d->act, B, Sl, H, 1) : -1;
  s->emb_mask = d->drop ? slot_add(p, "emb_mask", PX_SLOT_ACT, PX_DTYPE_U8, B, Sl, H, 1) : -1;
  s->lnf = slot_add(p, "lnf", PX_SLOT_ACT, d->act, B, Sl, H, 1);
  s->lnf_rstd = slot_add(p, "lnf_rstd", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1);
  s->lnf_mean = d->layernorm ? slot_add(p, "lnf_mean", PX_SLOT_ACT, PX_DTYPE_FP32, B * Sl, 1, 1, 1) : -1;
  s->lnf_full = d->sp ? slot_add(p, "lnf_full", PX_SLOT_ACT, d->act, B, S, H, 1) : s->lnf;
  s->logits = slot_add(p, "logits", PX_SLOT_ACT, d->act, B * S, d->Vl, 1, 1);
  s->ce_probs = slot_add(p, "ce_probs", PX_SLOT_ACT, PX_DTYPE_FP32, B * S, d->Vl, 1, 1);
}

static void embed_forward(bld *b, const dims *d, const layer_slots *L, const stage_slots *s) {
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  px_ref x = R(L->x, 0);
  /* The token lookup fills the full sequence; with TP the partial rows are summed. */
  px_ref target = d->drop ? R(s->emb, 0) : x;
  px_ref part = d->sp ? R(s->emb_part, 0) : target;
  px_op *o = op_new(b, PX_OP_EMBED, PX_STREAM_COMPUTE, PX_PHASE_FWD);
  o->in[0] = R(s->tokens, 0), o->in[1] = R(s->w_emb, 0);
  o->out[0] = part;
  o->dim[0] = B * S, o->dim[1] = H, o->dim[2] = d->Vl, o->dim[3] = b->p->model.vocab;
  elementwise(o, (double)(B * S * H), (double)(B * S * H), (double)d->e);
  tp_reduce(b, d, PX_PHASE_FWD, part, target);
  if (d->learned) {
    o = op_new(b, PX_OP_POS, PX_STREAM_COMPUTE, PX_PHASE_FWD);
    o->in[0] = target, o->in[1] = R(s->wpe, 0);
    o->out[0] = target;
    o->dim[0] = B, o->dim[1] = Sl, o->dim[2] = H;
    elementwise(o, (double)(2 * B * Sl * H), (double)(B * Sl * H), (double)d->e);
  }
  if (d->drop) dropout(b, d, PX_PHASE_FWD, x, R(s->emb_mask, 0), target, NOREF, Sl, H, 1, d->sp ? 1 : 0, 0);
  keep(b, x);
  if (d->drop) keep(b, R(s->emb_mask, 0));
}

static void embed_backward(bld *b, const dims *d, const layer_slots *L, const stage_slots *s) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl, H = d->H;
  px_ref dx = R(grad_slot(p, L->x), 0);
  px_ref demb = dx;
  if (d->drop) {
    demb = R(grad_slot(p, s->emb), 0);
    dropout_bwd(b, d, demb, dx, R(s->emb_mask, 0), B * Sl * H);
  }
  if (d->learned) {
    px_op *o = op_new(b, PX_OP_POS_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
    o->in[0] = demb;
    o->out[0] = R(grad_of(p, s->wpe), 0);
    o->flags = PX_OPF_ACCUMULATE;
    o->dim[0] = B, o->dim[1] = Sl, o->dim[2] = H;
    elementwise(o, (double)(B * Sl * H), (double)(2 * S * H), (double)d->e);
  }
  px_ref dfull = d->sp ? tp_gather(b, d, PX_PHASE_BWD, demb, R(grad_slot(p, s->emb_part), 0)) : demb;
  px_op *o = op_new(b, PX_OP_EMBED_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dfull, o->in[1] = R(s->tokens, 0);
  o->out[0] = R(grad_of(p, s->w_emb), 0);
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = B * S, o->dim[1] = H, o->dim[2] = d->Vl, o->dim[3] = p->model.vocab;
  elementwise(o, (double)(B * S * H), (double)(2 * B * S * H), (double)d->e);
}

static void head_forward(bld *b, const dims *d, const layer_slots *L, const stage_slots *s) {
  int64_t B = d->B, S = d->S, Sl = d->Sl;
  px_ref x = R(L->x, 0);
  norm(b, d, PX_PHASE_FWD, R(s->lnf, 0), s->lnf_mean >= 0 ? R(s->lnf_mean, 0) : NOREF, R(s->lnf_rstd, 0), x, s->w_lnf,
       s->b_lnf, B * Sl);
  px_ref lnf = tp_gather(b, d, PX_PHASE_FWD, R(s->lnf, 0), R(s->lnf_full, 0));
  linear(b, d, PX_PHASE_FWD, lnf, s->w_head, -1, R(s->logits, 0), NOREF, NOREF, B * S, d->Vl, 0, 0, d->H);
  px_op *o = op_new(b, PX_OP_LOSS, PX_STREAM_COMPUTE, PX_PHASE_FWD);
  o->in[0] = R(s->logits, 0), o->in[1] = R(s->targets, 0);
  o->out[0] = R(s->ce_probs, 0), o->out[1] = R(s->loss, 0);
  o->group = PX_GROUP_TP;
  o->dim[0] = B * S, o->dim[1] = d->Vl, o->dim[2] = b->p->model.vocab;
  elementwise(o, (double)(B * S * d->Vl), (double)(B * S * d->Vl), 4.0);
  /* three all-reduces of one float per row: max, sum of exponentials, target logit */
  if (d->T > 1) {
    o->coll = PX_COLL_ALLREDUCE;
    o->coll_bytes = (uint64_t)(3 * B * S * 4);
    o->wire_bytes = px_coll_busbw_factor(PX_COLL_ALLREDUCE, d->T) * (double)o->coll_bytes;
  }
  keep(b, x);
  keep(b, R(s->lnf, 0));
  keep(b, R(s->lnf_rstd, 0));
  if (s->lnf_mean >= 0) keep(b, R(s->lnf_mean, 0));
  keep(b, R(s->ce_probs, 0));
  keep(b, R(s->targets, 0));
}

static void head_backward(bld *b, const dims *d, const layer_slots *L, const stage_slots *s) {
  px_plan *p = b->p;
  int64_t B = d->B, S = d->S, Sl = d->Sl;
  px_ref dlogits = R(grad_slot(p, s->logits), 0);
  px_op *o = op_new(b, PX_OP_LOSS_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = R(s->ce_probs, 0), o->in[1] = R(s->targets, 0);
  o->out[0] = dlogits;
  o->dim[0] = B * S, o->dim[1] = d->Vl, o->dim[2] = p->model.vocab;
  elementwise(o, (double)(B * S * d->Vl), (double)(B * S * d->Vl), 4.0);
  px_ref lnf = R(s->lnf_full, 0);
  if (d->sp) lnf = tp_gather(b, d, PX_PHASE_BWD, R(s->lnf, 0), R(s->lnf_full, 0));
  px_ref dlnf_part = R(grad_slot(p, s->lnf_full), 0);
  px_ref dlnf_sh = R(grad_slot(p, s->lnf), 0);
  px_ref dlnf =
      linear_bwd(b, d, dlnf_part, lnf, NOREF, s->w_head, -1, dlogits, NOREF, NOREF, NOREF, B * S, d->Vl, 0, 0, d->H,
                 &dlnf_sh);
  norm_bwd(b, d, R(grad_slot(p, L->x), 0), dlnf, R(L->x, 0), s->lnf_mean >= 0 ? R(s->lnf_mean, 0) : NOREF,
           R(s->lnf_rstd, 0), s->w_lnf, s->b_lnf, B * Sl);
}

/* Send or receive of the activation (or its gradient) at a chunk boundary.
 * Without SP every TP rank holds the whole tensor, so (as Megatron-LM's
 * scatter-gather optimisation) each sends only its 1/tp slice and the
 * receiver all-gathers the slices over the TP group. */
static void p2p(bld *b, const dims *d, px_op_kind kind, px_ref r, int buf) {
  bool scatter = !d->sp && d->T > 1;
  int64_t elems = d->B * d->Sl * d->H, part = scatter ? elems / d->T : elems;
  px_op *o = op_new(b, kind, kind == PX_OP_SEND ? PX_STREAM_PP_SEND : PX_STREAM_PP_RECV, PX_PHASE_COMM);
  if (kind == PX_OP_SEND)
    o->in[0] = r;
  else
    o->out[0] = scatter ? R(buf, 0) : r;
  if (scatter) o->flags |= PX_OPF_TP_SLICE;
  o->coll = PX_COLL_P2P;
  o->dim[0] = part;
  o->coll_bytes = (uint64_t)part * d->e;
  o->wire_bytes = kind == PX_OP_SEND ? (double)o->coll_bytes : 0.0;
  if (kind == PX_OP_RECV && scatter) {
    px_op *g = coll(b, d, PX_OP_ALLGATHER, PX_GROUP_TP, PX_PHASE_COMM, R(buf, 0), r, part, elems, d->act, d->T);
    g->stream = PX_STREAM_PP_RECV;
  }
  if (kind == PX_OP_RECV) keep(b, r);
}

/* ---- lifetimes ---- */

static bool is_static(const px_plan *p, px_ref r) {
  px_slot_kind k = (px_slot_kind)p->slots[r.slot].kind;
  return k == PX_SLOT_PARAM || k == PX_SLOT_GRAD;
}

static void push_ref(bld *b, px_ref **arr, int32_t *n, int32_t *cap, px_ref r) {
  if (*n == *cap) {
    int32_t ncap = *cap ? 2 * *cap : 32;
    px_ref *na = realloc(*arr, (size_t)ncap * sizeof *na);
    if (!na) {
      b->failed = true;
      return;
    }
    *arr = na;
    *cap = ncap;
  }
  (*arr)[(*n)++] = r;
}

/* True when ops a and b name a common tensor (either side). */
static bool ops_share(const px_op *a, const px_op *b) {
  px_ref ra[PX_OP_INS + PX_OP_OUTS], rb[PX_OP_INS + PX_OP_OUTS];
  memcpy(ra, a->in, sizeof a->in), memcpy(ra + PX_OP_INS, a->out, sizeof a->out);
  memcpy(rb, b->in, sizeof b->in), memcpy(rb + PX_OP_INS, b->out, sizeof b->out);
  for (int i = 0; i < PX_OP_INS + PX_OP_OUTS; i++)
    for (int j = 0; ra[i].slot >= 0 && j < PX_OP_INS + PX_OP_OUTS; j++)
      if (ref_eq(ra[i], rb[j])) return true;
  return false;
}

/* The cross-stream dependencies: a compute op that reads or writes a tensor
 * of an earlier TP collective waits for the latest such (the TP stream runs
 * its collectives in order). Everything between may overlap it. */
static void block_deps(px_block *blk) {
  for (int i = 0; i < blk->nops; i++) {
    px_op *o = &blk->ops[i];
    o->dep = -1;
    if (o->stream != PX_STREAM_COMPUTE) continue;
    for (int j = i - 1; j >= 0 && o->dep < 0; j--)
      if (blk->ops[j].stream == PX_STREAM_TP && ops_share(o, &blk->ops[j])) o->dep = (int16_t)j;
  }
}

/* Records, per op, which slot instances it allocates (first write of a
 * tensor not live at the block's start) and frees (last use, unless kept
 * for a later block). Inputs live at the start come from earlier blocks. */
static void block_finish(bld *b) {
  px_block *blk = b->b;
  px_plan *p = b->p;
  /* the distinct tensors the block names: at most every operand of every op */
  size_t maxr = (size_t)blk->nops * (PX_OP_INS + PX_OP_OUTS) + 1;
  px_ref *seen = malloc(maxr * sizeof *seen);
  int *last = malloc(maxr * sizeof *last);
  bool *born = malloc(maxr * sizeof *born);
  if (b->failed || !seen || !last || !born) {
    free(seen), free(last), free(born);
    b->failed = true;
    return;
  }
  int n = 0;
  blk->nallocs = blk->nfrees = 0;
  int32_t acap = 0, fcap = 0;
  for (int i = 0; i < blk->nops; i++) {
    px_op *o = &blk->ops[i];
    o->alloc_start = blk->nallocs;
    o->alloc_count = 0;
    px_ref refs[PX_OP_INS + PX_OP_OUTS];
    bool is_out[PX_OP_INS + PX_OP_OUTS];
    int nr = 0;
    for (int k = 0; k < PX_OP_INS; k++)
      if (o->in[k].slot >= 0) refs[nr] = o->in[k], is_out[nr++] = false;
    for (int k = 0; k < PX_OP_OUTS; k++)
      if (o->out[k].slot >= 0) refs[nr] = o->out[k], is_out[nr++] = true;
    for (int k = 0; k < nr; k++) {
      if (is_static(p, refs[k])) continue;
      int j;
      for (j = 0; j < n && !ref_eq(seen[j], refs[k]); j++) {
      }
      if (j == n) {
        seen[n] = refs[k];
        uint8_t role = p->slots[refs[k].slot].role;
        /* A tensor first seen as an output is born here; the blocks that
         * load the model's inputs (tokens, targets) do so before first use. */
        born[n] = is_out[k] || (b->loads_inputs && (role == PX_ROLE_TOKENS || role == PX_ROLE_TARGETS));
        if (born[n]) {
          push_ref(b, &blk->allocs, &blk->nallocs, &acap, refs[k]);
          o->alloc_count++;
        }
        n++;
      }
      last[j] = i;
    }
  }
  for (int i = 0; i < blk->nops; i++) {
    px_op *o = &blk->ops[i];
    o->free_start = blk->nfrees;
    o->free_count = 0;
    for (int j = 0; j < n; j++) {
      if (last[j] != i) continue;
      bool kept = false;
      for (int k = 0; k < b->nkeep; k++) kept |= ref_eq(b->keep[k], seen[j]);
      if (kept) continue;
      push_ref(b, &blk->frees, &blk->nfrees, &fcap, seen[j]);
      o->free_count++;
    }
  }
  free(seen), free(last), free(born);
  block_deps(blk);
  for (int i = 0; i < PX_PHASE_COUNT; i++) blk->flops[i] = 0;
  blk->bytes = 0;
  for (int i = 0; i < blk->nops; i++) {
    blk->flops[blk->ops[i].phase] += blk->ops[i].flops;
    blk->bytes += blk->ops[i].bytes;
  }
}

static void block_begin(bld *b, px_plan *p, px_block_kind kind, px_stream stream) {
  bool failed = b->failed; /* a failure sticks across the blocks of one compile */
  memset(b, 0, sizeof *b);
  b->failed = failed;
  b->p = p;
  b->b = &p->blocks[kind];
  b->b->kind = (uint8_t)kind;
  b->b->stream = (uint8_t)stream;
}

/* Keeps what the backward reads from a layer's forward. */
static void keep_layer_saved(bld *b, const dims *d, const layer_slots *L, px_recompute rc) {
  keep(b, R(L->x, 0));
  keep(b, R(L->out, 1));
  if (rc == PX_RECOMPUTE_FULL) return;
  px_plan *p = b->p;
  /* with fp8 the linear layers' inputs as their fp8 twins (the weight gradients' operands); the bf16
   * context only for the fused attention's backward, the bf16 MoE norm output for the router's */
  int saved[] = {L->ln1_mean, L->ln1_rstd, L->lse, L->attn_dmask, L->x2, L->ln2_mean, L->ln2_rstd, L->mlp_dmask,
                 d->f8 && d->flash ? L->ctx : -1, d->moe ? L->ln2 : -1};
  for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++)
    if (saved[i] >= 0) keep(b, R(saved[i], 0));
  keep(b, q8(p, d, R(L->ln1, 0))), keep(b, q8(p, d, R(L->ctx, 0)));
  if (!d->moe) keep(b, q8(p, d, R(L->ln2, 0)));
  else if (d->f8 && d->Fs > 0) keep(b, q8(p, d, R(L->ln2_full, 0))); /* the shared experts' */
  /* the MLP's: the dense one's, or the router's choice, the rows the local experts took and computed, the
   * outputs they returned, and the shared experts' */
  int latent[] = {L->q_lat, L->q_latn, L->q_rstd, L->kv_lat, L->kv_latn, L->kv_rstd}; /* MLA's */
  for (size_t i = 0; i < sizeof latent / sizeof *latent; i++)
    if (latent[i] >= 0) keep(b, R(latent[i], 0));
  int dense[] = {L->fc1, L->gate, L->up, L->act};
  int moe[] = {L->moe_probs, L->moe_idx, L->moe_gates, L->moe_counts, L->moe_recv, L->exp_gate, L->exp_up,
               L->exp_fc1,   L->exp_act, L->sh_gate,   L->sh_up,    L->sh_fc1,   L->sh_act,
               d->dispatch == PX_MOE_A2A ? L->moe_ret : L->exp_out};
  const int *mlp = d->moe ? moe : dense;
  size_t nmlp = d->moe ? sizeof moe / sizeof *moe : sizeof dense / sizeof *dense;
  for (size_t i = 0; i < nmlp; i++) {
    int s = mlp[i];
    bool gemm_in = s == L->act || s == L->moe_recv || s == L->exp_act || s == L->sh_act; /* read by a weight gradient only */
    if (s >= 0) keep(b, gemm_in ? q8(p, d, R(s, 0)) : R(s, 0));
  }
  attn_view a = attn_view_of(d, L); /* what the attention's backward reads (with CP: gathered or head-split) */
  keep(b, a.q), keep(b, a.k), keep(b, a.v);
  if (a.ctx.slot != L->ctx) keep(b, a.ctx);
  if (!d->sp) keep(b, q8(p, d, R(L->ln1_full, 0))), keep(b, d->moe ? R(L->ln2_full, 0) : q8(p, d, R(L->ln2_full, 0)));
  if (rc == PX_RECOMPUTE_NONE && !d->flash) {
    keep(b, R(L->probs, 0));
    if (d->drop) keep(b, R(L->probs_drop, 0)), keep(b, R(L->attn_mask, 0));
  }
}

static void dims_make(const px_plan *p, dims *d) {
  const px_model *m = &p->model;
  const px_parallel *par = &p->par;
  memset(d, 0, sizeof *d);
  d->B = par->mbs;
  d->S = p->seq_cp;
  d->Sl = p->seq_local;
  d->C = par->cp;
  d->cp_algo = (px_cp_algo)par->cp_algo;
  d->attn_frac = px_model_attention_fraction(m, p->seq_cp);
  if (m->experts > 0) {
    d->E = m->experts, d->EP = par->ep, d->El = px_plan_local_experts(p), d->K = m->experts_per_token;
    d->ETP = p->grid.etp;
    d->Fe = m->moe_ffn_hidden / d->ETP;
    d->Fs = px_model_shared_ffn(m) / par->tp;
    d->A = d->B * d->Sl * d->K;
    d->R = px_plan_expert_rows(p);
    d->Rep = d->R / d->ETP;
    d->dispatch = (px_moe_dispatch)par->moe_dispatch;
  }
  d->H = m->hidden;
  d->T = par->tp;
  d->HQ = m->heads / par->tp;
  d->HKV = m->kv_heads / par->tp;
  d->D = m->head_dim;
  d->QW = d->HQ * d->D;
  d->KW = d->HKV * d->D;
  d->mla = m->kv_lora_rank > 0;
  d->Dv = d->mla ? m->v_head_dim : d->D;
  d->VW = d->HKV * d->Dv, d->OW = d->HQ * d->Dv;
  d->QL = m->q_lora_rank, d->KL = m->kv_lora_rank, d->Dr = m->qk_rope_head_dim, d->Dn = m->qk_nope_head_dim;
  d->F = m->ffn_hidden / par->tp;
  d->V = p->vocab_padded;
  d->Vl = p->vocab_padded / par->tp;
  d->sp = par->sp > 0;
  d->drop = m->dropout > 0;
  d->layernorm = m->norm == PX_NORM_LAYERNORM;
  d->swiglu = m->mlp == PX_MLP_SWIGLU;
  d->rope = m->position == PX_POS_ROPE;
  d->learned = m->position == PX_POS_LEARNED;
  d->bias = m->bias;
  d->qkv_bias = m->qkv_bias || m->bias;
  d->par_res = m->parallel_residual;
  d->flash = par->attention == PX_ATTN_FLASH;
  d->gelu_fused = par->gelu == PX_GELU_FUSED && !d->swiglu;
  d->act = p->act_dtype;
  d->param = p->param_dtype;
  d->grad = p->grad_dtype;
  d->e = px_dtype_bytes(d->act);
  d->f8 = par->precision == PX_PREC_FP8;
  d->f8_block = d->f8 && par->fp8_recipe == PX_FP8_BLOCKWISE;
  d->f8_current = d->f8 && par->fp8_recipe == PX_FP8_CURRENT;
  d->zero3 = par->zero >= 3;
}

px_status px_compile_blocks(px_plan *p, px_err *err) {
  dims d;
  dims_make(p, &d);
  layer_slots L;
  stage_slots s;
  layer_slots_make(p, &d, &L);
  stage_slots_make(p, &d, &s);
  px_recompute rc = (px_recompute)p->par.recompute;
  bld b = {.failed = false};

  block_begin(&b, p, PX_BLOCK_LAYER_FWD, PX_STREAM_COMPUTE);
  layer_forward(&b, &d, &L, PX_PHASE_FWD, true);
  keep_layer_saved(&b, &d, &L, rc);
  block_finish(&b);

  /* A zero-bubble schedule's backward is two blocks: B (input gradients;
   * it keeps what the linear layers' weight gradients read) and W. */
  bld wb = {.failed = false};
  bool split = px_parallel_split_w(&p->par);
  if (split) block_begin(&wb, p, PX_BLOCK_LAYER_BWD_W, PX_STREAM_COMPUTE);
  block_begin(&b, p, PX_BLOCK_LAYER_BWD, PX_STREAM_COMPUTE);
  b.w = split ? &wb : NULL;
  layer_backward(&b, &d, &L, rc);
  keep(&b, R(grad_slot(p, L.x), 0));
  block_finish(&b);
  if (split) {
    block_finish(&wb);
    b.failed |= wb.failed;
  }
  if (p->model.experts > 0) { /* mixture-of-experts layers: the same with the router and experts for the MLP */
    dims dm = d;
    dm.moe = true;
    block_begin(&b, p, PX_BLOCK_MOE_FWD, PX_STREAM_COMPUTE);
    layer_forward(&b, &dm, &L, PX_PHASE_FWD, true);
    keep_layer_saved(&b, &dm, &L, rc);
    block_finish(&b);
    block_begin(&b, p, PX_BLOCK_MOE_BWD, PX_STREAM_COMPUTE);
    layer_backward(&b, &dm, &L, rc);
    keep(&b, R(grad_slot(p, L.x), 0));
    block_finish(&b);
  }

  block_begin(&b, p, PX_BLOCK_EMBED_FWD, PX_STREAM_COMPUTE);
  b.loads_inputs = true;
  embed_forward(&b, &d, &L, &s);
  keep(&b, R(s.tokens, 0));
  block_finish(&b);

  block_begin(&b, p, PX_BLOCK_EMBED_BWD, PX_STREAM_COMPUTE);
  embed_backward(&b, &d, &L, &s);
  block_finish(&b);

  block_begin(&b, p, PX_BLOCK_HEAD_FWD, PX_STREAM_COMPUTE);
  b.loads_inputs = true;
  head_forward(&b, &d, &L, &s);
  block_finish(&b);

  block_begin(&b, p, PX_BLOCK_HEAD_BWD, PX_STREAM_COMPUTE);
  head_backward(&b, &d, &L, &s);
  keep(&b, R(grad_slot(p, L.x), 0));
  block_finish(&b);

  int p2p_buf = slot_add(p, "p2p_slice", PX_SLOT_BUFFER, d.act, d.B * d.Sl * d.H / d.T, 1, 1, 1);
  block_begin(&b, p, PX_BLOCK_SEND_FWD, PX_STREAM_PP_SEND);
  p2p(&b, &d, PX_OP_SEND, R(L.x, 0), p2p_buf);
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_RECV_FWD, PX_STREAM_PP_RECV);
  p2p(&b, &d, PX_OP_RECV, R(L.x, 0), p2p_buf);
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_SEND_BWD, PX_STREAM_PP_SEND);
  p2p(&b, &d, PX_OP_SEND, R(grad_slot(p, L.x), 0), p2p_buf);
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_RECV_BWD, PX_STREAM_PP_RECV);
  p2p(&b, &d, PX_OP_RECV, R(grad_slot(p, L.x), 0), p2p_buf);
  block_finish(&b);

  /* Blocks sized per stage: the ops here fix kind and group; each stage's
   * copies, sized for its units and shard, are in its program (plan/plan.c). */
  px_op *o;
  /* With a shard group smaller than dp (hybrid sharding): the gradient is
   * reduce-scattered within the shard group, then each shard all-reduced
   * over the replicas holding it; parameters are gathered within the group. */
  bool hybrid = px_parallel_hybrid(&p->par);
  block_begin(&b, p, PX_BLOCK_GRAD_SYNC, PX_STREAM_DP);
  o = op_new(&b, p->par.zero == 0 ? PX_OP_ALLREDUCE : PX_OP_REDUCE_SCATTER, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = hybrid ? PX_GROUP_SHARD : PX_GROUP_DP;
  o->coll = p->par.zero == 0 ? PX_COLL_ALLREDUCE : PX_COLL_REDUCE_SCATTER;
  if (hybrid) {
    o = op_new(&b, PX_OP_ALLREDUCE, PX_STREAM_DP, PX_PHASE_COMM);
    o->group = PX_GROUP_REPLICA;
    o->coll = PX_COLL_ALLREDUCE;
  }
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_PARAM_SYNC, PX_STREAM_DP);
  o = op_new(&b, PX_OP_ALLGATHER, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = hybrid ? PX_GROUP_SHARD : PX_GROUP_DP;
  o->coll = PX_COLL_ALLGATHER;
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_EMB_SYNC, PX_STREAM_DP);
  o = op_new(&b, PX_OP_ALLREDUCE, PX_STREAM_DP, PX_PHASE_COMM);
  o->group = PX_GROUP_EMB;
  o->coll = PX_COLL_ALLREDUCE;
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_OPTIMIZER, PX_STREAM_COMPUTE);
  if (d.sp) { /* norm and position gradients are partial sums over sequence shards */
    o = op_new(&b, PX_OP_ALLREDUCE, PX_STREAM_TP, PX_PHASE_OPT);
    o->group = PX_GROUP_TP;
    o->coll = PX_COLL_ALLREDUCE;
  }
  o = op_new(&b, PX_OP_GRAD_NORM, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  o->group = PX_GROUP_ALL; /* and one double summed over every rank */
  o->coll = PX_COLL_ALLREDUCE;
  if (p->par.offload_opt) { /* the host steps the shard; the new parameters come back unless they live there */
    op_new(&b, PX_OP_ADAMW_HOST, PX_STREAM_COMPUTE, PX_PHASE_OPT);
    if (!p->par.offload_params) op_new(&b, PX_OP_COPY_H2D, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  } else {
    op_new(&b, PX_OP_ADAMW, PX_STREAM_COMPUTE, PX_PHASE_OPT);
  }
  if (d.f8 && !d.zero3) { /* the updated weights' fp8 copies for the next step (px_plan_fp8_weight_elems) */
    o = op_new(&b, PX_OP_CAST, PX_STREAM_COMPUTE, PX_PHASE_OPT);
    o->flags = f8_flags(&d);
  }
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_OFFLOAD_GRAD, PX_STREAM_HOST);
  op_new(&b, PX_OP_COPY_D2H, PX_STREAM_HOST, PX_PHASE_COMM);
  block_finish(&b);
  block_begin(&b, p, PX_BLOCK_FETCH_PARAM, PX_STREAM_HOST);
  op_new(&b, PX_OP_COPY_H2D, PX_STREAM_HOST, PX_PHASE_COMM);
  block_finish(&b);
  if (b.failed || p->slots_full)
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory building the op templates (or more than %d slots)", SLOTS_MAX);
  return PX_OK;
}
