/* The block compiler's builder: slots, ops, TP collectives, norms, dropout, lifetimes. */
#include "plan/builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ref_eq(px_ref a, px_ref b) { return a.slot == b.slot && a.layer_off == b.layer_off; }

/* ---- slots ---- */

/* Indexes slot i by its name in p->slot_index. */
static void index_slot(px_plan *p, int i) {
  uint32_t mask = (uint32_t)(2 * p->slots_cap - 1), h = px_plan_slot_hash(p->slots[i].name) & mask;
  while (p->slot_index[h] >= 0) h = (h + 1) & mask;
  p->slot_index[h] = (int16_t)i;
}

int px_bld_slot(px_plan *p, const char *name, px_slot_kind kind, px_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                int64_t d3) {
  int found = px_plan_slot(p, name);
  if (found >= 0) return found;
  if (p->nslots == p->slots_cap) { /* grow (the index too); on failure the compile fails (px_compile_blocks checks) */
    int32_t cap = p->slots_cap ? 2 * p->slots_cap : 128;
    px_slot *ns = cap <= PX_SLOTS_MAX ? realloc(p->slots, (size_t)cap * sizeof *ns) : NULL;
    int16_t *ni = ns ? malloc((size_t)(2 * cap) * sizeof *ni) : NULL;
    if (ns) p->slots = ns;
    if (!ni) {
      p->slots_full = true;
      return 0;
    }
    free(p->slot_index);
    p->slot_index = ni;
    p->slots_cap = cap;
    memset(ni, 0xff, (size_t)(2 * cap) * sizeof *ni);
    for (int i = 0; i < p->nslots; i++) index_slot(p, i);
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
  index_slot(p, p->nslots);
  return p->nslots++;
}

int px_bld_param(px_plan *p, const px_dims *d, const char *name, int64_t rows, int64_t cols, bool replicated,
                 bool sp_partial) {
  int w = px_bld_slot(p, name, PX_SLOT_PARAM, d->param, rows, cols, 1, 1);
  p->slots[w].tp_replicated = replicated;
  p->slots[w].sp_partial = sp_partial && d->sp;
  if (d->lora && !strchr(name, '.')) { /* the base (adapters are named after their weight: "qkv_w.A3") */
    p->slots[w].frozen = true;
    p->slots[w].sp_partial = false; /* no gradient to complete */
    return w;
  }
  char gname[PX_NAME_MAX];
  snprintf(gname, sizeof gname, "d%s", name);
  int g = px_bld_slot(p, gname, PX_SLOT_GRAD, d->grad, rows, cols, 1, 1);
  p->slots[g].param = w;
  p->slots[g].tp_replicated = replicated;
  p->slots[g].sp_partial = p->slots[w].sp_partial;
  return w;
}

int px_bld_grad_of(const px_plan *p, int param) {
  for (int i = 0; i < p->nslots; i++)
    if (p->slots[i].param == param) return i;
  return -1;
}

/* ---- ops ---- */

bool px_bld_param_trained(const px_plan *p, int param) { return param >= 0 && !p->slots[param].frozen; }

px_op *px_bld_op(px_bld *b, px_op_kind kind, px_stream stream, px_phase phase) {
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

void px_bld_keep(px_bld *b, px_ref r) {
  if (r.slot < 0) return;
  if (b->nkeep == (int)(sizeof b->keep / sizeof b->keep[0]))
    b->failed = true; /* a block keeps more tensors than the 64 the builder holds */
  else
    b->keep[b->nkeep++] = r;
}

void px_bld_gemm_cost(px_op *o, double m, double n, double k, double batch, double e_in, double e_out) {
  o->flops = 2.0 * m * n * k * batch;
  o->bytes = batch * ((m * k + n * k) * e_in + m * n * e_out);
}

void px_bld_elementwise(px_op *o, double elems_in, double elems_out, double e) {
  o->bytes = (elems_in + elems_out) * e;
}

void px_bld_eager(const px_bld *b, px_op *o, double elems, double e) {
  const px_model *m = &b->p->model;
  /* Megatron-Core's unfused RoPE: asked for (rope-unfused), or where the fused kernels were planned for a model
   * with YaRN's concentration factor, which Transformer Engine's fused RoPE does not take (MLA's RoPE, its own
   * kernels, as before) */
  bool rope = o->kind == PX_OP_ROPE || o->kind == PX_OP_ROPE_BWD;
  int ew = b->p->par.elementwise;
  bool unfused = ew == PX_ELEMWISE_ROPE_UNFUSED || (ew == PX_ELEMWISE_FUSED && m->rope_concentration != 1.0);
  if (rope && unfused && m->kv_lora_rank == 0) {
    o->flags |= PX_OPF_EAGER | PX_OPF_ROPE_UNFUSED;
    o->bytes = px_eager_bytes(px_op_rope_unfused_chain((px_op_kind)o->kind), elems, e);
    return;
  }
  const px_eager_chain *c = px_op_eager_chain((px_op_kind)o->kind);
  bool norm = o->kind == PX_OP_NORM || o->kind == PX_OP_NORM_BWD;
  if (b->p->par.elementwise != PX_ELEMWISE_EAGER || !c || (norm && b->p->model.norm != PX_NORM_RMSNORM)) return;
  o->flags |= PX_OPF_EAGER;
  o->bytes = px_eager_bytes(c, elems, e);
}

px_op *px_bld_coll(px_bld *b, const px_dims *d, px_op_kind kind, px_group g, px_phase ph, px_ref in, px_ref out,
                   int64_t elems_in, int64_t elems_out, px_dtype dt, int64_t n) {
  bool in_layer = g == PX_GROUP_TP || g == PX_GROUP_CP || g == PX_GROUP_EP || g == PX_GROUP_ETP; /* a layer's own */
  px_op *o = px_bld_op(b, kind, in_layer ? PX_STREAM_TP : PX_STREAM_DP, ph);
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

/* Marks a TP collective as running along the sequence axis of (B, S, cols).
 * With B > 1 the ranks' shards are not contiguous: the collective goes
 * through a full-size workspace (out[1]) in rank-major order. */
static void seq_axis(px_bld *b, const px_dims *d, px_op *o, int64_t cols) {
  o->flags |= PX_OPF_SEQ_AXIS;
  if (d->B == 1) return;
  char name[PX_NAME_MAX];
  if (cols == d->H)
    snprintf(name, sizeof name, "seq_ws");
  else
    snprintf(name, sizeof name, "seq_ws.%lld", (long long)cols); /* MLA's latents: a workspace a width */
  o->out[1] = R(px_bld_slot(b->p, name, PX_SLOT_WORKSPACE, d->act, d->B, d->S, cols, 1), 0);
}

px_ref px_bld_tp_reduce_cols(px_bld *b, const px_dims *d, px_phase ph, px_ref part, px_ref sharded, int64_t cols) {
  if (d->T == 1) return part;
  if (!d->sp) {
    px_bld_coll(b, d, PX_OP_ALLREDUCE, PX_GROUP_TP, ph, part, part, d->B * d->S * cols, d->B * d->S * cols, d->act,
                d->T);
    return part;
  }
  px_op *o = px_bld_coll(b, d, PX_OP_REDUCE_SCATTER, PX_GROUP_TP, ph, part, sharded, d->B * d->S * cols,
                         d->B * d->Sl * cols, d->act, d->T);
  seq_axis(b, d, o, cols);
  return sharded;
}

px_ref px_bld_tp_reduce(px_bld *b, const px_dims *d, px_phase ph, px_ref part, px_ref sharded) {
  return px_bld_tp_reduce_cols(b, d, ph, part, sharded, d->H);
}

/* A per-tensor scale's cast of a sequence shard gathered in its format (fp8 with current scaling, nvfp4's tensor
 * scale): Transformer Engine's quantizer reduces the shard's amax over TP before it scales, so that every rank's
 * codes share one scale (Float8CurrentScalingQuantizer::quantize_impl, an all-reduce of one float, waited for:
 * transformer_engine/pytorch/csrc/quantizer.cpp at d0067d0). The cast that wrote `shard` carries it. */
static void amax_reduction(px_bld *b, const px_dims *d, px_ref shard) {
  if (!(d->f8_current || d->f8_format == PX_OPF_NVFP4) || d->T <= 1) return;
  for (int32_t i = b->b->nops - 1; i >= 0; i--) {
    px_op *c = &b->b->ops[i];
    if (c->kind != PX_OP_CAST || c->out[0].slot != shard.slot || c->out[0].layer_off != shard.layer_off) continue;
    c->group = PX_GROUP_TP;
    px_op_coll_bytes(c, PX_COLL_ALLREDUCE, sizeof(float), d->T);
    return;
  }
}

px_ref px_bld_tp_gather_copies(px_bld *b, const px_dims *d, px_phase ph, px_ref shard, px_ref full, int copies) {
  if (!d->sp) return shard;
  if (b->p->slots[shard.slot].dtype == PX_DTYPE_FP8) amax_reduction(b, d, shard);
  int64_t cols = px_slot_row_elems(&b->p->slots[full.slot]); /* H; MLA's latents: their widths */
  px_op *o = px_bld_coll(b, d, PX_OP_ALLGATHER, PX_GROUP_TP, ph, shard, full, d->B * d->Sl * cols, d->B * d->S * cols,
                         (px_dtype)b->p->slots[shard.slot].dtype, d->T);
  if (d->f8_format && b->p->slots[shard.slot].dtype == PX_DTYPE_FP8) { /* block-scaled codes move with their scales */
    const px_parallel *par = &b->p->par;
    uint64_t whole = (uint64_t)copies * px_parallel_quant_bytes(par, (uint64_t)(d->B * d->S * cols), cols);
    px_op_coll_bytes(o, PX_COLL_ALLGATHER, whole, d->T);
    o->bytes = (double)((uint64_t)copies * px_parallel_quant_bytes(par, (uint64_t)(d->B * d->Sl * cols), cols) +
                        o->coll_bytes);
  }
  seq_axis(b, d, o, cols);
  return full;
}

px_ref px_bld_tp_gather(px_bld *b, const px_dims *d, px_phase ph, px_ref shard, px_ref full) {
  return px_bld_tp_gather_copies(b, d, ph, shard, full, 1);
}

double px_bld_norm_bytes(int64_t rows, int64_t cols, double e) {
  px_op o = {0};
  px_bld_elementwise(&o, (double)(rows * cols), (double)(rows * cols), e);
  return o.bytes + (double)rows * 8.0;
}

void px_bld_norm(px_bld *b, const px_dims *d, px_phase ph, px_ref y, px_ref mean, px_ref rstd, px_ref x, int w,
                 int bias, int64_t rows) {
  px_op *o = px_bld_op(b, PX_OP_NORM, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->in[1] = R(w, 0), o->in[2] = bias >= 0 ? R(bias, 0) : NOREF;
  o->out[0] = y, o->out[1] = rstd, o->out[2] = mean;
  o->dim[0] = rows, o->dim[1] = d->H;
  o->bytes = px_bld_norm_bytes(rows, d->H, (double)d->e);
  px_bld_eager(b, o, (double)(rows * d->H), (double)d->e);
}

void px_bld_norm_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref dy, px_ref x, px_ref mean, px_ref rstd, int w,
                     int bias, int64_t rows) {
  px_op *o = px_bld_op(b, PX_OP_NORM_BWD, PX_STREAM_COMPUTE, PX_PHASE_BWD);
  o->in[0] = dy, o->in[1] = x, o->in[2] = rstd, o->in[3] = mean, o->in[4] = R(w, 0);
  o->out[0] = dx, o->out[1] = R(px_bld_grad_of(b->p, w), 0),
  o->out[2] = bias >= 0 ? R(px_bld_grad_of(b->p, bias), 0) : NOREF;
  o->flags = PX_OPF_ACCUMULATE;
  o->dim[0] = rows, o->dim[1] = d->H;
  px_bld_elementwise(o, (double)(3 * rows * d->H), (double)(rows * d->H), (double)d->e);
  px_bld_eager(b, o, (double)(rows * d->H), (double)d->e);
}

px_op *px_bld_simple(px_bld *b, px_op_kind kind, px_phase ph, px_ref y, px_ref a, px_ref c, int64_t elems,
                     double e_bytes) {
  px_op *o = px_bld_op(b, kind, PX_STREAM_COMPUTE, ph);
  o->out[0] = y;
  o->in[0] = a;
  o->in[1] = c;
  o->dim[0] = elems;
  int nin = (a.slot >= 0) + (c.slot >= 0);
  px_bld_elementwise(o, (double)(nin * elems), (double)elems, e_bytes);
  px_bld_eager(b, o, (double)elems, e_bytes);
  return o;
}

px_op *px_bld_dropout(px_bld *b, const px_dims *d, px_phase ph, px_ref y, px_ref mask, px_ref x, px_ref bias,
                      int64_t d1, int64_t d2, int64_t d3, int shard_axis, int site) {
  px_op *o = px_bld_op(b, PX_OP_DROPOUT, PX_STREAM_COMPUTE, ph);
  o->out[0] = y, o->out[1] = mask;
  o->in[0] = x, o->in[1] = bias;
  o->dim[0] = d->B, o->dim[1] = d1, o->dim[2] = d2, o->dim[3] = d3, o->dim[4] = shard_axis, o->dim[5] = site;
  double n = (double)(d->B * d1 * d2 * d3);
  o->bytes = n * (2.0 * (double)d->e + 1.0);
  if (d1 == d->HQ) o->flags |= PX_OPF_ATTN_PROBS;
  return o;
}

void px_bld_dropout_bwd(px_bld *b, const px_dims *d, px_ref dx, px_ref dy, px_ref mask, int64_t elems) {
  px_op *o = px_bld_simple(b, PX_OP_DROPOUT_BWD, PX_PHASE_BWD, dx, dy, mask, elems, (double)d->e);
  o->flags = PX_OPF_ACCUMULATE;
  o->bytes = (double)elems * (2.0 * (double)d->e + 1.0);
}

int px_bld_grad_slot(px_plan *p, int act) {
  if (act < 0) return -1;
  char name[PX_NAME_MAX];
  snprintf(name, sizeof name, "d%.22s", p->slots[act].name);
  const px_slot *s = &p->slots[act];
  return px_bld_slot(p, name, PX_SLOT_ACT_GRAD, (px_dtype)s->dtype, s->shape[0], s->shape[1], s->shape[2], s->shape[3]);
}

/* ---- lifetimes ---- */

static bool is_static(const px_plan *p, px_ref r) {
  px_slot_kind k = (px_slot_kind)p->slots[r.slot].kind;
  return k == PX_SLOT_PARAM || k == PX_SLOT_GRAD;
}

static void push_ref(px_bld *b, px_ref **arr, int32_t *n, int32_t *cap, px_ref r) {
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

void px_bld_finish(px_bld *b) {
  px_block *blk = b->b;
  px_plan *p = b->p;
  /* the distinct tensors the block names: at most every operand of every op; where each is among them
   * (open addressing on slot and layer offset, -1 empty); the op each is last used by, and the tensors
   * by that op in the order first seen (a counting sort) */
  size_t maxr = (size_t)blk->nops * (PX_OP_INS + PX_OP_OUTS) + 1, hcap = 64;
  while (hcap < 2 * maxr) hcap *= 2;
  px_ref *seen = malloc(maxr * sizeof *seen);
  int *last = malloc(maxr * sizeof *last), *at = malloc(hcap * sizeof *at);
  int *by_op = malloc(((size_t)blk->nops + 1) * sizeof *by_op), *order = malloc(maxr * sizeof *order);
  bool *born = malloc(maxr * sizeof *born);
  if (b->failed || !seen || !last || !born || !at || !by_op || !order) {
    free(seen), free(last), free(born), free(at), free(by_op), free(order);
    b->failed = true;
    return;
  }
  memset(at, 0xff, hcap * sizeof *at);
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
      uint32_t key = (uint32_t)(uint16_t)refs[k].slot << 8 | (uint8_t)refs[k].layer_off;
      size_t h = (size_t)(key * 2654435761u) & (hcap - 1);
      while (at[h] >= 0 && !ref_eq(seen[at[h]], refs[k])) h = (h + 1) & (hcap - 1);
      int j = at[h];
      if (j < 0) {
        j = at[h] = n;
        seen[n] = refs[k];
        uint8_t role = p->slots[refs[k].slot].role;
        /* A tensor first seen as an output is born here; the blocks that
         * load the model's inputs (tokens, targets) do so before first use. */
        born[n] = is_out[k] || (b->loads_inputs && (role == PX_ROLE_TOKENS || role == PX_ROLE_TARGETS ||
                                                     role == PX_ROLE_MTP_TARGETS));
        if (born[n]) {
          push_ref(b, &blk->allocs, &blk->nallocs, &acap, refs[k]);
          o->alloc_count++;
        }
        n++;
      }
      last[j] = i;
    }
  }
  memset(by_op, 0, ((size_t)blk->nops + 1) * sizeof *by_op);
  for (int j = 0; j < n; j++) by_op[last[j] + 1]++;
  for (int i = 0; i < blk->nops; i++) by_op[i + 1] += by_op[i];
  for (int j = 0; j < n; j++) order[by_op[last[j]]++] = j; /* by_op[i]: now where op i + 1's start */
  for (int i = 0, x = 0; i < blk->nops; i++) {
    px_op *o = &blk->ops[i];
    o->free_start = blk->nfrees;
    o->free_count = 0;
    for (; x < n && last[order[x]] == i; x++) {
      int j = order[x];
      bool kept = false;
      for (int k = 0; k < b->nkeep; k++) kept |= ref_eq(b->keep[k], seen[j]);
      if (kept) continue;
      push_ref(b, &blk->frees, &blk->nfrees, &fcap, seen[j]);
      o->free_count++;
    }
  }
  free(at), free(by_op), free(order);
  free(seen), free(last), free(born);
  block_deps(blk);
  for (int i = 0; i < PX_PHASE_COUNT; i++) blk->flops[i] = 0;
  blk->bytes = 0;
  for (int i = 0; i < blk->nops; i++) {
    blk->flops[blk->ops[i].phase] += blk->ops[i].flops;
    blk->bytes += blk->ops[i].bytes;
  }
}

void px_bld_begin(px_bld *b, px_plan *p, px_block_kind kind, px_stream stream) {
  bool failed = b->failed; /* a failure sticks across the blocks of one compile */
  memset(b, 0, sizeof *b);
  b->failed = failed;
  b->p = p;
  b->b = &p->blocks[kind];
  b->b->kind = (uint8_t)kind;
  b->b->stream = (uint8_t)stream;
}

void px_dims_make(const px_plan *p, px_dims *d) {
  const px_model *m = &p->model;
  const px_parallel *par = &p->par;
  memset(d, 0, sizeof *d);
  d->B = par->mbs;
  d->S = p->seq_cp;
  d->Sl = p->seq_local;
  d->C = par->cp;
  d->cp_algo = (px_cp_algo)par->cp_algo;
  d->attn_frac = 1.0; /* full attention; a windowed layer's blocks set window and attn_frac */
  d->rcm = px_parallel_recompute_modules(par);
  d->rc_op = par->recompute == PX_RECOMPUTE_OP;
  if (m->experts > 0) {
    d->E = m->experts, d->EP = par->ep, d->El = px_plan_local_experts(p), d->K = m->experts_per_token;
    d->ETP = p->grid.etp;
    d->Fe = m->moe_ffn_hidden / d->ETP;
    d->Fs = px_model_shared_ffn(m) / par->tp;
    d->A = d->B * d->Sl * d->K;
    d->R = px_plan_expert_rows(p);
    d->Rep = d->R / d->ETP;
    d->Rb = px_plan_expert_buffer_rows(p);
    d->Rbep = d->Rb / d->ETP;
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
  d->qk_norm = m->qk_norm;
  d->sinks = m->attention_sinks;
  d->flash = px_attention_fused(par->attention);
  d->flash2 = par->attention == PX_ATTN_FLASH2;
  d->gelu_fused = par->gelu == PX_GELU_FUSED && !d->swiglu;
  d->act = p->act_dtype;
  d->param = p->param_dtype;
  d->grad = p->grad_dtype;
  d->e = px_dtype_bytes(d->act);
  d->f8 = px_precision_quantized(par->precision);
  d->f8_format = par->precision == PX_PREC_MXFP8 ? PX_OPF_MXFP8 : par->precision == PX_PREC_NVFP4 ? PX_OPF_NVFP4 : 0;
  d->f8_block = par->precision == PX_PREC_FP8 && par->fp8_recipe == PX_FP8_BLOCKWISE;
  d->f8_current = par->precision == PX_PREC_FP8 && par->fp8_recipe == PX_FP8_CURRENT;
  d->zero3 = par->zero >= 3;
  d->f8_params = d->f8 && par->fp8_params > 0;
  d->f8_grad_codes = d->f8 && d->sp && par->fp8_library != PX_FP8_LIB_TORCHAO;
  d->attn_fmt = d->f8 && d->flash ? px_parallel_attn_format(par) : PX_ATTN_BF16;
  d->lora = px_parallel_lora(par);
  d->lora_rank = d->lora ? par->lora_rank : 0;
  d->lora_targets = d->lora ? par->lora_targets : 0;
}

void px_dims_unquantized(px_dims *d) {
  d->f8 = d->f8_block = d->f8_current = d->f8_params = d->f8_grad_codes = false;
  d->attn_fmt = PX_ATTN_BF16;
  d->f8_format = 0;
}
