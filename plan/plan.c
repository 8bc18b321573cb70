/* Plan compilation driver: validation, derived sizes, then the templates,
 * the programs, the memory plan and the per-stage totals. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "plan/compile.h"

/* Bytes a unit-sized sync op moves, from the unit's size. */
static void unit_op_cost(const px_plan *p, const px_program *prog, const px_inst *in, double *wire) {
  const px_unit *u = &prog->units[in->unit];
  double n = (double)p->par.dp, frac = (n - 1) / n;
  double gb = (double)px_dtype_bytes(p->grad_dtype), pb = (double)px_dtype_bytes(p->param_dtype);
  switch (in->block) {
    case PX_BLOCK_GRAD_SYNC:
      wire[PX_GROUP_DP] += (p->par.zero == 0 ? 2 * frac : frac) * (double)u->padded * gb;
      break;
    case PX_BLOCK_PARAM_SYNC: wire[PX_GROUP_DP] += frac * (double)u->padded * pb; break;
    case PX_BLOCK_EMB_SYNC: { /* the tied weight's full gradient, 2 ranks: 2 (n-1)/n = 1 */
      int slot = px_plan_slot(p, prog->has_embed ? "emb_w" : "head_w");
      wire[PX_GROUP_EMB] += slot >= 0 ? (double)p->slots[slot].elems * gb : 0.0;
      break;
    }
    default: break;
  }
}

static void stage_totals(px_plan *p) {
  for (int64_t s = 0; s < p->par.pp; s++) {
    const px_program *prog = &p->programs[s];
    px_stage_totals *t = &p->totals[s];
    memset(t, 0, sizeof *t);
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      const px_block *b = &p->blocks[in->block];
      t->model_flops += b->flops[PX_PHASE_FWD] + b->flops[PX_PHASE_BWD];
      t->hw_flops += b->flops[PX_PHASE_FWD] + b->flops[PX_PHASE_BWD] + b->flops[PX_PHASE_RECOMPUTE];
      if (in->unit >= 0 && b->stream == PX_STREAM_DP) {
        unit_op_cost(p, prog, in, t->wire_bytes);
        continue;
      }
      for (int32_t k = 0; k < b->nops; k++) {
        const px_op *o = &b->ops[k];
        px_group g = (px_group)o->group;
        if (o->kind == PX_OP_SEND) g = in->block == PX_BLOCK_SEND_FWD ? PX_GROUP_NEXT : PX_GROUP_PREV;
        t->wire_bytes[g] += o->wire_bytes;
      }
    }
    p->model_flops_per_step += t->model_flops * (double)(p->par.tp * p->par.dp);
    p->hw_flops_per_step += t->hw_flops * (double)(p->par.tp * p->par.dp);
  }
}

px_op_iter px_op_iter_begin(const px_plan *plan, int64_t stage) {
  return (px_op_iter){.plan = plan, .prog = &plan->programs[stage], .id = -1};
}

const px_op *px_op_next(px_op_iter *it) {
  while (it->inst < it->prog->ninsts) {
    const px_inst *in = &it->prog->insts[it->inst];
    const px_block *b = &it->plan->blocks[in->block];
    if (it->k < b->nops) {
      it->in = in;
      it->block = b;
      it->id++;
      return &b->ops[it->k++];
    }
    it->inst++, it->k = 0;
  }
  return NULL;
}

int64_t px_program_nops(const px_plan *plan, int64_t stage) {
  const px_program *prog = &plan->programs[stage];
  int64_t n = 0;
  for (int32_t i = 0; i < prog->ninsts; i++) n += plan->blocks[prog->insts[i].block].nops;
  return n;
}

px_status px_plan_compile(px_plan *p, const px_model *m, const px_cluster *c, const px_parallel *par, px_err *err) {
  memset(p, 0, sizeof *p);
  px_status st = px_parallel_validate(par, m, c, err);
  if (st) return st;
  p->model = *m;
  p->cluster = *c;
  p->par = *par;
  px_grid_init(&p->grid, c, par->tp, par->dp, par->pp);
  int64_t pad = 128 * par->tp; /* Megatron-LM's make-vocab-size-divisible-by 128, times tp */
  p->vocab_padded = m->vocab % par->tp == 0 ? m->vocab : (m->vocab + pad - 1) / pad * pad;
  p->seq = par->seq;
  p->seq_local = par->sp ? par->seq / par->tp : par->seq;
  p->microbatches = px_parallel_microbatches(par);
  p->vstages = par->pp * par->vpp;
  bool mixed = par->precision != PX_PREC_FP32;
  p->act_dtype = px_parallel_compute_dtype(par);
  p->param_dtype = p->act_dtype;
  p->grad_dtype = p->act_dtype;
  /* Adam: fp32 momentum and variance, plus an fp32 master copy with mixed precision. */
  p->optimizer_bytes_per_param = mixed ? 12 : 8;
  p->params_total = px_model_param_count(m);
  p->vstage_first = px_calloc((size_t)p->vstages, sizeof *p->vstage_first, err);
  p->vstage_layers = px_calloc((size_t)p->vstages, sizeof *p->vstage_layers, err);
  p->totals = px_calloc((size_t)par->pp, sizeof *p->totals, err);
  if (!p->vstage_first || !p->vstage_layers || !p->totals) {
    px_plan_free(p);
    return PX_ERR_RUNTIME;
  }
  if ((st = px_compile_blocks(p, err)) || (st = px_compile_programs(p, err)) || (st = px_compile_memory(p, err))) {
    px_plan_free(p);
    return st;
  }
  stage_totals(p);
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
  }
  free(p->programs);
  free(p->mem);
  free(p->totals);
  free(p->slots);
  free(p->vstage_first);
  free(p->vstage_layers);
  memset(p, 0, sizeof *p);
}

double px_plan_bubble_analytic(const px_plan *plan) {
  double p = (double)plan->par.pp, m = (double)plan->microbatches;
  double v = plan->par.schedule == PX_SCHED_INTERLEAVED ? (double)plan->par.vpp : 1.0;
  return (p - 1) / (v * m + p - 1);
}
