/* Plan compilation driver: validation, derived sizes, then the templates,
 * the programs, the memory plan and the per-stage totals. */
#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/compile.h"
#include "plan/program.h"

/* Appends a copy of block kind k's ops to the program's own; returns its index. */
static int32_t own_ops(px_plan *p, px_program *prog, px_block_kind k) {
  const px_block *b = &p->blocks[k];
  memcpy(&prog->ops[prog->nops], b->ops, (size_t)b->nops * sizeof *b->ops);
  prog->nops += b->nops;
  return prog->nops - b->nops;
}

/* A copy of elems elements of elem_bytes between the GPU and `place` (px_offload). */
static void size_copy(px_op *o, uint64_t elems, int place, uint64_t elem_bytes) {
  o->dim[0] = (int64_t)elems;
  o->dim[1] = place;
  o->dim[2] = (int64_t)elem_bytes;
  o->bytes = (double)(elems * elem_bytes);
}

/* The stage's own copies of the blocks whose sizes depend on the stage: each
 * unit's gradient reduction and parameter gather, the tied embedding's
 * all-reduce, the optimizer over the stage's shard. Every reader (the memory
 * plan, the totals, the simulator, the executor) takes the sizes from here. */
static px_status size_stage_ops(px_plan *p, px_program *prog, px_err *err) {
  int64_t wdp = p->grid.wdp, shard_n = px_parallel_shard_size(&p->par), replicas = wdp / shard_n;
  /* hybrid sharding with sharded accumulation: a second copy of each unit's
   * reduction, for the micro-batches before the last (no replica all-reduce) */
  bool mb_copy = px_parallel_hybrid(&p->par) && px_parallel_reduce_per_mb(&p->par);
  int64_t per_unit = (mb_copy ? 2 : 1) * p->blocks[PX_BLOCK_GRAD_SYNC].nops + p->blocks[PX_BLOCK_PARAM_SYNC].nops +
                     p->blocks[PX_BLOCK_OFFLOAD_GRAD].nops + p->blocks[PX_BLOCK_FETCH_PARAM].nops;
  int64_t n = per_unit * (int64_t)prog->nunits + p->blocks[PX_BLOCK_EMB_SYNC].nops + p->blocks[PX_BLOCK_OPTIMIZER].nops;
  int64_t offloaded = p->par.offload_act_layers;
  n += 2 * offloaded;
  prog->ops = px_calloc((size_t)n, sizeof *prog->ops, err);
  if (!prog->ops) return PX_ERR_RUNTIME;
  /* activation offload (pp 1): each offloaded layer's kept activations, to the host and back */
  prog->act_ops = offloaded > 0 ? prog->nops : -1;
  if (offloaded > 0) {
    uint64_t *set = px_calloc((size_t)offloaded, sizeof *set, err); /* (offloaded) each layer's kept bytes */
    if (!set || px_plan_first_layers_kept(p, offloaded, set, err)) {
      free(set);
      return PX_ERR_RUNTIME;
    }
    for (int64_t l = 0; l < offloaded; l++) {
      size_copy(&prog->ops[own_ops(p, prog, PX_BLOCK_OFFLOAD_ACT)], set[l], PX_OFFLOAD_CPU, 1);
      size_copy(&prog->ops[own_ops(p, prog, PX_BLOCK_FETCH_ACT)], set[l], PX_OFFLOAD_CPU, 1);
    }
    free(set);
  }
  px_dtype gd = p->grad_dtype, pd = p->param_dtype;
  uint64_t gb = px_dtype_bytes(gd), pb = px_dtype_bytes(pd);
  /* primary quantized weights: each unit's are gathered, and written by the optimizer, in the bytes
   * px_parallel_param_gather_bytes gives */
  bool primary = px_parallel_fp8_primary(&p->par);
  uint64_t *u8 = primary ? px_calloc((size_t)prog->nunits + 1, sizeof *u8, err) : NULL, shard8 = 0;
  if (primary && !u8) return PX_ERR_RUNTIME;
  if (primary) px_plan_fp8_unit_elems(p, prog - p->programs, u8, &shard8);
  for (int32_t u = 0; u < prog->nunits; u++) {
    px_unit *un = &prog->units[u];
    uint64_t shard = px_plan_unit_shard(p, un);
    int64_t ranks = px_plan_unit_ranks(p, un);
    px_group group = un->expert ? PX_GROUP_EDP : (px_group)p->blocks[PX_BLOCK_GRAD_SYNC].ops[0].group;
    un->grad_op_mb = -1;
    for (int copy = 0; copy < (mb_copy ? 2 : 1); copy++) {
      int32_t first = own_ops(p, prog, PX_BLOCK_GRAD_SYNC);
      if (copy) un->grad_op_mb = first;
      else un->grad_op = first;
      /* the reduction over the shard group (all of dp unless hybrid) ... */
      px_op *g = &prog->ops[first];
      g->group = (uint8_t)group;
      px_op_size_coll(g, (px_coll)g->coll, un->padded, p->par.zero == 0 ? un->padded : shard, gd, ranks);
      /* ... and with hybrid sharding the shard's all-reduce over the replicas (empty before the last micro-batch) */
      if (p->blocks[PX_BLOCK_GRAD_SYNC].nops > 1) {
        uint64_t e = copy ? 0 : shard;
        px_op_size_coll(&prog->ops[first + 1], PX_COLL_ALLREDUCE, e, e, gd, replicas);
      }
    }
    un->gather_op = own_ops(p, prog, PX_BLOCK_PARAM_SYNC);
    prog->ops[un->gather_op].group = (uint8_t)(un->expert ? PX_GROUP_EDP : prog->ops[un->gather_op].group);
    px_op *gather = &prog->ops[un->gather_op];
    px_op_size_coll(gather, PX_COLL_ALLGATHER, shard, un->padded, pd, ranks);
    if (primary && un->padded > 0) { /* its quantized weights in their gathered bytes */
      double share = ((double)(un->padded - u8[u]) * (double)pb + (double)px_parallel_param_gather_bytes(&p->par, u8[u])) /
                     ((double)un->padded * (double)pb);
      gather->coll_bytes = (uint64_t)((double)gather->coll_bytes * share);
      gather->wire_bytes *= share, gather->bytes *= share;
    }
    /* offload: the reduced shard goes to the host, the parameter shard comes from it */
    un->offload_op = own_ops(p, prog, PX_BLOCK_OFFLOAD_GRAD);
    size_copy(&prog->ops[un->offload_op], shard, p->par.offload_opt, gb);
    un->fetch_op = own_ops(p, prog, PX_BLOCK_FETCH_PARAM);
    size_copy(&prog->ops[un->fetch_op], shard, p->par.offload_params, pb);
  }
  /* the tied table's full gradient, summed over the first and last stage */
  int32_t emb = -1;
  for (int32_t i = 0; i < prog->nparams && emb < 0; i++) {
    const px_param_ref *r = &prog->params[i];
    if (p->slots[r->slot].role != PX_ROLE_TIED) continue;
    emb = own_ops(p, prog, PX_BLOCK_EMB_SYNC);
    px_op *o = &prog->ops[emb];
    px_op_size_coll(o, PX_COLL_ALLREDUCE, r->elems, r->elems, gd, 2);
    for (int16_t g = 0; g < p->nslots; g++) /* its operand: the table's gradient */
      if (p->slots[g].kind == PX_SLOT_GRAD && p->slots[g].param == r->slot) o->in[0] = o->out[0] = (px_ref){g, 0};
  }
  /* the optimizer over the stage's shard of the flat buffer */
  int32_t opt = own_ops(p, prog, PX_BLOCK_OPTIMIZER);
  uint64_t shard = p->par.zero >= 1 ? prog->flat_elems / (uint64_t)shard_n : prog->flat_elems, partial = 0;
  for (int32_t i = 0; i < prog->nparams; i++)
    if (p->slots[prog->params[i].slot].sp_partial) partial += prog->params[i].elems;
  for (int32_t k = 0; k < p->blocks[PX_BLOCK_OPTIMIZER].nops; k++) {
    px_op *o = &prog->ops[opt + k];
    switch (o->kind) {
      case PX_OP_ALLREDUCE: /* SP's partial norm and position gradients over TP */
        px_op_size_coll(o, PX_COLL_ALLREDUCE, partial, partial, gd, p->par.tp);
        break;
      case PX_OP_GRAD_NORM: /* the shard's sum of squares, then one double over every rank */
        o->dim[0] = (int64_t)shard;
        o->bytes = (double)(shard * gb);
        px_op_coll_bytes(o, PX_COLL_ALLREDUCE, sizeof(double), p->grid.world);
        break;
      case PX_OP_ADAMW: { /* reads the gradient, reads and writes the states, writes the parameter (primary
                             quantized weights: in their gathered bytes) */
        uint64_t w8 = !primary ? 0 : p->par.zero >= 1 ? shard8 : px_plan_fp8_weight_elems(p, prog - p->programs);
        o->dim[0] = (int64_t)shard;
        o->bytes = (double)shard * ((double)gb + 2.0 * (double)p->optimizer_bytes_per_param + (double)pb) -
                   (double)(w8 * pb) + (double)px_parallel_param_gather_bytes(&p->par, w8);
        break;
      }
      case PX_OP_ADAMW_HOST: /* on the host CPU; on NVMe its states are read and written back (the bytes) */
        o->dim[0] = (int64_t)shard;
        o->dim[1] = p->par.offload_opt;
        o->bytes = p->par.offload_opt == PX_OFFLOAD_NVME ? 2.0 * (double)(shard * PX_HOST_OPT_BYTES) : 0.0;
        break;
      case PX_OP_COPY_H2D: /* the updated parameters, from host memory */
        size_copy(o, shard, PX_OFFLOAD_CPU, pb);
        break;
      case PX_OP_CAST: { /* quantized GEMMs: the weights cast once a step into their cached copies */
        uint64_t w8 = px_plan_fp8_weight_elems(p, prog - p->programs);
        o->dim[0] = (int64_t)w8;
        o->bytes = px_parallel_weight_cast_bytes(&p->par, &p->cluster.gpu, w8);
        break;
      }
      default: break;
    }
  }
  free(u8);
  /* a unit's last reduction of the step all-reduces over the replicas, earlier ones do not */
  int32_t *last = mb_copy ? px_calloc((size_t)prog->nunits + 1, sizeof *last, err) : NULL;
  if (mb_copy && !last) return PX_ERR_RUNTIME;
  for (int32_t i = 0; mb_copy && i < prog->ninsts; i++)
    if (prog->insts[i].block == PX_BLOCK_GRAD_SYNC) last[prog->insts[i].unit] = i;
  for (int32_t i = 0; i < prog->ninsts; i++) {
    px_inst *in = &prog->insts[i];
    switch (in->block) {
      case PX_BLOCK_GRAD_SYNC:
        in->ops = mb_copy && last[in->unit] != i ? prog->units[in->unit].grad_op_mb : prog->units[in->unit].grad_op;
        break;
      case PX_BLOCK_PARAM_SYNC: in->ops = prog->units[in->unit].gather_op; break;
      case PX_BLOCK_EMB_SYNC: in->ops = emb; break;
      case PX_BLOCK_OPTIMIZER: in->ops = opt; break;
      case PX_BLOCK_OFFLOAD_GRAD: in->ops = prog->units[in->unit].offload_op; break;
      case PX_BLOCK_FETCH_PARAM: in->ops = prog->units[in->unit].fetch_op; break;
      case PX_BLOCK_OFFLOAD_ACT: in->ops = prog->act_ops + 2 * in->layer; break;
      case PX_BLOCK_FETCH_ACT: in->ops = prog->act_ops + 2 * in->layer + 1; break;
      default: in->ops = -1; break;
    }
    if (in->block == PX_BLOCK_EMB_SYNC && emb < 0) {
      free(last);
      return px_err_set(err, PX_ERR_RUNTIME, "internal: stage without a tied embedding syncs one");
    }
  }
  free(last);
  return PX_OK;
}


/* Adds an instance's ops' bytes on the wire to t, by group (a send's: the next or previous stage). */
static void add_wire(px_stage_totals *t, const px_inst *in, const px_op *ops, int32_t k) {
  px_group g = (px_group)ops[k].group;
  if (ops[k].kind == PX_OP_SEND) g = in->block == PX_BLOCK_SEND_FWD ? PX_GROUP_NEXT : PX_GROUP_PREV;
  t->wire_bytes[g] += ops[k].wire_bytes;
}

void px_plan_totals(px_plan *p) {
  /* the block ops that send anything: adding the others' zeros changes no sum, so they are skipped */
  int32_t wired[PX_BLOCK_KIND_COUNT][32], nwired[PX_BLOCK_KIND_COUNT];
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    nwired[k] = 0;
    for (int32_t j = 0; j < p->blocks[k].nops && nwired[k] >= 0; j++)
      if (p->blocks[k].ops[j].wire_bytes != 0) nwired[k] = nwired[k] < 32 ? nwired[k] + 1 : -1;
    for (int32_t j = 0, n = 0; nwired[k] > 0 && j < p->blocks[k].nops; j++)
      if (p->blocks[k].ops[j].wire_bytes != 0) wired[k][n++] = j;
  }
  for (int64_t s = 0; s < p->par.pp; s++) {
    const px_program *prog = &p->programs[s];
    px_stage_totals *t = &p->totals[s];
    memset(t, 0, sizeof *t);
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      const px_block *b = &p->blocks[in->block];
      /* work every TP rank does alike counts once over them */
      t->model_flops += b->flops[PX_PHASE_FWD] + b->flops[PX_PHASE_BWD] -
                        b->dup_flops * (double)(p->par.tp - 1) / (double)p->par.tp;
      t->hw_flops += b->flops[PX_PHASE_FWD] + b->flops[PX_PHASE_BWD] + b->flops[PX_PHASE_RECOMPUTE];
      const px_op *ops = px_inst_ops(p, prog, in);
      if (in->ops < 0 && nwired[in->block] >= 0) /* the block's own ops: those that send */
        for (int32_t j = 0; j < nwired[in->block]; j++) add_wire(t, in, ops, wired[in->block][j]);
      else
        for (int32_t k = 0; k < b->nops; k++) add_wire(t, in, ops, k);
    }
    p->model_flops_per_step += t->model_flops * (double)(p->par.tp * p->grid.wdp);
    p->hw_flops_per_step += t->hw_flops * (double)(p->par.tp * p->grid.wdp);
  }
}








/* What px_plan_compile_fit's stage callback needs: the blocks' memory, and when to stop. */
typedef struct {
  px_block_mem bm[PX_BLOCK_KIND_COUNT];
  px_plan_stop_fn stop;
  void *ctx;
  px_err *err;
} compile_ctx;

/* A stage's program is made: its own sized ops, its memory walk, and whether the compile goes on. */
static px_status stage_done(px_plan *p, int64_t s, bool *stop, void *arg) {
  compile_ctx *x = arg;
  px_status st = size_stage_ops(p, &p->programs[s], x->err);
  if (!st) st = px_compile_memory_stage(p, s, x->bm, x->err);
  p->stages_done++;
  *stop = !st && x->stop && !px_plan_stage_fits(p, s) && x->stop(p, s, x->ctx);
  return st;
}

static px_status compile(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par, bool totals,
                         px_plan_stop_fn stop, void *ctx, px_err *err);

px_status px_plan_compile(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par, px_err *err) {
  return compile(p, m, c, par, true, NULL, NULL, err);
}

px_status px_plan_compile_fit(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par,
                              px_plan_stop_fn stop, void *ctx, px_err *err) {
  return compile(p, m, c, par, false, stop, ctx, err);
}

/* What every compile starts with: the resolved, validated choices, the grid and the derived sizes. */
static px_status prelude(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par, px_err *err) {
  memset(p, 0, sizeof *p);
  px_parallel resolved = *par; /* the defaults of the choices left unset: no caller need resolve them */
  px_parallel_resolve(&resolved, m, c);
  par = &resolved;
  px_status st = px_parallel_validate(par, m, c, err);
  if (st) return st;
  p->model = *m;
  p->cluster = *c;
  p->par = *par;
  px_grid_init(&p->grid, c, par->tp, par->cp, par->dp, par->pp);
  px_grid_set_shard(&p->grid, px_parallel_shard_size(par));
  px_grid_set_ep(&p->grid, par->ep, par->etp);
  /* Megatron-LM's make-vocab-size-divisible-by 128, times tp, always (vocab_size_with_padding in
   * megatron/core/tokenizers/utils/build_tokenizer.py at d98e8a6): GPT-2's 50,257 becomes 50,304 on one
   * GPU too, Llama 3's 128,256 129,024 at tp 8, where an
   * unaligned vocabulary ran the logits' GEMMs at 82-147 TFLOP/s on an H200 against ~600 aligned
   * (bench/gpu/h200-2026-11-28); the losses skip the padded columns */
  int64_t pad = 128 * par->tp;
  p->vocab_padded = (m->vocab + pad - 1) / pad * pad;
  p->seq = par->seq;
  p->seq_cp = par->seq / par->cp;
  p->seq_local = par->sp ? p->seq_cp / par->tp : p->seq_cp;
  p->microbatches = px_parallel_microbatches(par);
  p->vstages = par->pp * par->vpp;
  p->act_dtype = px_parallel_compute_dtype(par);
  p->param_dtype = p->act_dtype;
  p->grad_dtype = px_parallel_grad_dtype(par);
  p->optimizer_bytes_per_param = px_parallel_optimizer_bytes(par);
  p->params_total = px_model_param_count(m);
  p->vstage_first = px_calloc((size_t)p->vstages, sizeof *p->vstage_first, err);
  p->vstage_layers = px_calloc((size_t)p->vstages, sizeof *p->vstage_layers, err);
  p->totals = px_calloc((size_t)par->pp, sizeof *p->totals, err);
  if (!p->vstage_first || !p->vstage_layers || !p->totals) {
    px_plan_free(p);
    return PX_ERR_RUNTIME;
  }
  return PX_OK;
}

px_status px_plan_compile_blocks(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par,
                                 px_err *err) {
  px_status st = prelude(p, m, c, par, err);
  if (!st && (st = px_compile_blocks(p, err))) px_plan_free(p);
  return st;
}

static px_status compile(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par, bool totals,
                         px_plan_stop_fn stop, void *ctx, px_err *err) {
  px_status st = prelude(p, m, c, par, err);
  if (st) return st;
  compile_ctx x = {.stop = stop, .ctx = ctx, .err = err};
  if ((st = px_compile_blocks(p, err)) || (st = px_compile_memory_begin(p, x.bm, err)) ||
      (st = px_compile_programs(p, stage_done, &x, err))) {
    px_plan_free(p);
    return st;
  }
  if (p->stages_done < p->par.pp) { /* stopped at a stage that does not fit */
    p->fits = false;
    return PX_OK;
  }
  px_compile_memory_end(p);
  if (totals) px_plan_totals(p);
  return PX_OK;
}

void px_plan_free(px_plan *p) {
  if (!p) return;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    free(p->blocks[k].ops);
    free(p->blocks[k].frees);
    free(p->blocks[k].allocs);
  }
  for (int64_t s = 0; p->programs && s < p->par.pp; s++) {
    px_program *prog = &p->programs[s];
    free(prog->insts);
    free(prog->deps);
    free(prog->units);
    free(prog->params);
    free(prog->frozen);
    free(prog->ops);
  }
  free(p->programs);
  free(p->mem);
  free(p->totals);
  free(p->slots);
  free(p->slot_index);
  free(p->vstage_first);
  free(p->vstage_layers);
  memset(p, 0, sizeof *p);
}
