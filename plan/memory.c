/* The memory plan: walks each stage's program in order applying tensor
 * lifetimes, for the peak bytes per GPU and their breakdown. Model states
 * (parameters, gradients, optimizer) follow from the ZeRO stage; everything
 * else from the ops' allocations and frees. */
#include "plan/memory.h"

#include <stdlib.h>
#include <string.h>


static px_mem_cat slot_cat(const px_slot *s) {
  switch (s->kind) {
    case PX_SLOT_BUFFER: return PX_MEM_BUFFERS;
    case PX_SLOT_WORKSPACE: return PX_MEM_WORKSPACE;
    default: return PX_MEM_ACTIVATIONS;
  }
}

static void block_summary(const px_plan *p, const px_block *b, px_block_mem *bm) {
  memset(bm, 0, sizeof *bm);
  int64_t cur[PX_MEM_COUNT] = {0}, total = 0;
  for (int32_t i = 0; i < b->nops; i++) {
    const px_op *o = &b->ops[i];
    for (int32_t k = 0; k < o->alloc_count; k++) {
      const px_slot *s = &p->slots[b->allocs[o->alloc_start + k].slot];
      cur[slot_cat(s)] += (int64_t)s->bytes;
      total += (int64_t)s->bytes;
    }
    if (total > bm->peak) {
      bm->peak = total;
      memcpy(bm->at_peak, cur, sizeof cur);
    }
    for (int32_t k = 0; k < o->free_count; k++) {
      const px_slot *s = &p->slots[b->frees[o->free_start + k].slot];
      cur[slot_cat(s)] -= (int64_t)s->bytes;
      total -= (int64_t)s->bytes;
    }
  }
  memcpy(bm->delta, cur, sizeof cur);
}


void px_plan_block_mem(const px_plan *p, px_block_kind k, px_block_mem *out) { block_summary(p, &p->blocks[k], out); }

uint64_t px_plan_kept_bytes(const px_plan *p, px_block_kind fwd) {
  px_block_mem bm;
  block_summary(p, &p->blocks[fwd], &bm);
  return (uint64_t)(bm.delta[PX_MEM_ACTIVATIONS] + bm.delta[PX_MEM_BUFFERS] + bm.delta[PX_MEM_WORKSPACE]);
}

uint64_t px_plan_layer_activation_bytes(const px_plan *p) { return px_plan_kept_bytes(p, PX_BLOCK_LAYER_FWD); }


/* Bytes of the full tensor a unit's gather writes, or its reduction reads. */
static int64_t gathered_bytes(const px_program *prog, const px_unit *u) {
  return (int64_t)prog->ops[u->gather_op].coll_bytes;
}
static int64_t full_grad_bytes(const px_program *prog, const px_unit *u) {
  return (int64_t)prog->ops[u->grad_op].coll_bytes;
}

int64_t px_plan_unit_ranks(const px_plan *p, const px_unit *u) {
  return u->expert ? px_parallel_expert_dp(&p->par) : px_parallel_shard_size(&p->par);
}

uint64_t px_plan_unit_shard(const px_plan *p, const px_unit *u) { return u->padded / (uint64_t)px_plan_unit_ranks(p, u); }

uint64_t px_plan_reserve_bytes(uint64_t peak) {
  return peak + peak / PX_RESERVE_SHARE + ((uint64_t)PX_RESERVE_MIB << 20);
}

int64_t px_plan_peak_stage(const px_plan *p) {
  int64_t worst = 0;
  for (int64_t s = 1; s < p->par.pp; s++)
    if (p->mem[s].peak_bytes > p->mem[worst].peak_bytes) worst = s;
  return worst;
}

/* The one rule for "does it fit": the executor's reservation for the stage's
 * peak plus what the runtime keeps, within the HBM. */
bool px_plan_stage_fits(const px_plan *p, int64_t stage) {
  return px_plan_reserve_bytes(p->mem[stage].peak_bytes) <= px_gpu_usable_bytes(&p->cluster.gpu);
}

void px_states_of(const px_parallel *par, const px_gpu *g, uint64_t flat, uint64_t shard, uint64_t fp8_elems,
                  uint64_t fp8_shard, px_states *out) {
  uint64_t pb = px_dtype_bytes(px_parallel_compute_dtype(par)), gb = px_dtype_bytes(px_parallel_grad_dtype(par));
  memset(out, 0, sizeof *out);
  out->opt_elems = par->zero >= 1 ? shard : flat;
  out->params_elems = par->offload_params ? 0 : par->zero >= 3 ? shard : flat;
  out->grads_elems = par->offload_opt ? 0 : par->zero >= 2 ? shard : flat;
  uint64_t(*b)[PX_MEM_ACTIVATIONS] = out->bytes;
  b[PX_PLACE_GPU][PX_MEM_PARAMS] = out->params_elems * pb;
  bool f8 = px_precision_quantized(par->precision);
  if (px_parallel_fp8_primary(par)) { /* the weights in their format's row-wise copy, no 16-bit copy (ZeRO-3: the
                                         shard's) */
    uint64_t held8 = par->zero >= 3 ? fp8_shard : fp8_elems;
    if (held8 > out->params_elems) held8 = out->params_elems;
    b[PX_PLACE_GPU][PX_MEM_PARAMS] -= held8 * pb;
    b[PX_PLACE_GPU][PX_MEM_PARAMS] += px_parallel_quant_weight_bytes(par, held8);
  }
  if (f8 && par->zero < 3) /* the cached quantized copies (px_parallel_weight_copies) */
    out->fp8_copy_bytes = (uint64_t)px_parallel_weight_copies(par, g) * px_parallel_quant_weight_bytes(par, fp8_elems);
  b[PX_PLACE_GPU][PX_MEM_PARAMS] += out->fp8_copy_bytes;
  b[PX_PLACE_GPU][PX_MEM_GRADS] = out->grads_elems * gb;
  if (!par->offload_opt) {
    b[PX_PLACE_GPU][PX_MEM_OPTIMIZER] = out->opt_elems * px_parallel_optimizer_bytes(par);
  } else { /* the fp32 gradient accumulator on the host; weights and moments on the host or NVMe */
    b[PX_PLACE_HOST][PX_MEM_GRADS] = shard * PX_HOST_GRAD_BYTES;
    b[par->offload_opt == PX_OFFLOAD_NVME ? PX_PLACE_NVME : PX_PLACE_HOST][PX_MEM_OPTIMIZER] = shard * PX_HOST_OPT_BYTES;
  }
  if (par->offload_params)
    b[par->offload_params == PX_OFFLOAD_NVME ? PX_PLACE_NVME : PX_PLACE_HOST][PX_MEM_PARAMS] = shard * pb;
}

void px_plan_states_for(const px_plan *p, const px_parallel *par, int64_t stage, px_states *out) {
  const px_program *prog = &p->programs[stage];
  uint64_t shard = 0;
  for (int32_t u = 0; u < prog->nunits; u++) shard += px_plan_unit_shard(p, &prog->units[u]);
  uint64_t shard8;
  px_plan_fp8_unit_elems(p, stage, NULL, &shard8);
  px_states_of(par, &p->cluster.gpu, prog->flat_elems, shard, px_plan_fp8_weight_elems(p, stage), shard8, out);
  px_states_add_frozen(out, prog->frozen_bytes);
}

void px_states_add_frozen(px_states *s, uint64_t frozen_bytes) {
  s->frozen_bytes = frozen_bytes;
  s->bytes[PX_PLACE_GPU][PX_MEM_PARAMS] += frozen_bytes;
}

/* where its slot's are, in a layer not kept in the compute dtype (px_parallel_layer_bf16; slots are every layer's) */
bool px_plan_param_quantized(const px_plan *p, const px_param_ref *r) {
  return p->slots[r->slot].fp8 && !px_parallel_layer_bf16(&p->par, p->model.layers, r->group);
}

uint64_t px_plan_fp8_weight_elems(const px_plan *p, int64_t stage) {
  const px_program *prog = &p->programs[stage];
  uint64_t n = 0;
  for (int32_t i = 0; i < prog->nparams; i++)
    if (px_plan_param_quantized(p, &prog->params[i])) n += prog->params[i].elems;
  return n;
}

void px_plan_fp8_unit_elems(const px_plan *p, int64_t stage, uint64_t *u8, uint64_t *shard8) {
  const px_program *prog = &p->programs[stage];
  if (u8) memset(u8, 0, (size_t)prog->nunits * sizeof *u8);
  *shard8 = 0;
  for (int32_t i = 0; i < prog->nparams; i++) {
    const px_param_ref *r = &prog->params[i];
    if (!px_plan_param_quantized(p, r)) continue;
    if (u8) u8[r->unit] += r->elems;
    *shard8 += r->elems / (uint64_t)px_plan_unit_ranks(p, &prog->units[r->unit]);
  }
}

void px_plan_states(const px_plan *p, int64_t stage, px_states *out) { px_plan_states_for(p, &p->par, stage, out); }

uint64_t px_states_bytes(const px_states *s, px_place place) {
  uint64_t n = 0;
  for (int c = 0; c < PX_MEM_ACTIVATIONS; c++) n += s->bytes[place][c];
  return n;
}

static void stage_static(const px_plan *p, int64_t stage, px_memplan *mp) {
  px_states st;
  px_plan_states(p, stage, &st);
  for (int c = 0; c < PX_MEM_ACTIVATIONS; c++) mp->at_peak[c] = st.bytes[PX_PLACE_GPU][c];
  mp->static_bytes = px_states_bytes(&st, PX_PLACE_GPU);
  mp->host_bytes = px_states_bytes(&st, PX_PLACE_HOST);
  const px_program *prog = &p->programs[stage]; /* activation offload: one micro-batch's sets at a time (pp 1) */
  for (int64_t l = 0; prog->act_ops >= 0 && l < p->par.offload_act_layers; l++)
    mp->host_bytes += (uint64_t)prog->ops[prog->act_ops + 2 * l].bytes;
  mp->nvme_bytes = px_states_bytes(&st, PX_PLACE_NVME);
}

/* The most host memory and NVMe one node's GPUs take (ranks are stage-major). */
static void node_offload(px_plan *p) {
  int64_t gpn = px_cluster_node_size(&p->cluster), per_stage = p->par.tp * p->grid.wdp;
  p->host_node_bytes = p->nvme_node_bytes = 0;
  if (!p->par.offload_opt && !p->par.offload_act_layers) return;
  for (int64_t first = 0; first < p->grid.world; first += gpn) {
    uint64_t host = 0, nvme = 0;
    for (int64_t r = first; r < first + gpn && r < p->grid.world;) {
      int64_t s = r / per_stage, end = (s + 1) * per_stage < first + gpn ? (s + 1) * per_stage : first + gpn;
      if (end > p->grid.world) end = p->grid.world;
      host += (uint64_t)(end - r) * p->mem[s].host_bytes;
      nvme += (uint64_t)(end - r) * p->mem[s].nvme_bytes;
      r = end;
    }
    if (host > p->host_node_bytes) p->host_node_bytes = host;
    if (nvme > p->nvme_node_bytes) p->nvme_node_bytes = nvme;
  }
}

bool px_plan_host_fits(const px_plan *p) {
  return p->host_node_bytes <= p->cluster.host_memory_bytes && p->nvme_node_bytes <= p->cluster.host_nvme_bytes;
}

px_status px_compile_memory_begin(px_plan *p, px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err) {
  p->mem = px_calloc((size_t)p->par.pp, sizeof *p->mem, err);
  if (!p->mem) return PX_ERR_RUNTIME;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) block_summary(p, &p->blocks[k], &bm[k]);
  p->fits = true;
  return PX_OK;
}

px_status px_compile_memory_stage(px_plan *p, int64_t s, const px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err) {
  int64_t pp = p->par.pp;
  uint64_t gb = px_dtype_bytes(p->grad_dtype);
  const px_program *prog = &p->programs[s];
  px_memplan *mp = &p->mem[s];
  stage_static(p, s, mp);
  bool *gathered = px_calloc((size_t)prog->nunits, sizeof *gathered, err);
  bool *bucket = px_calloc((size_t)prog->nunits, sizeof *bucket, err);
  int64_t *staged = px_calloc((size_t)prog->nunits, sizeof *staged, err); /* offload: a shard between copies */
  if (!gathered || !bucket || !staged) {
    free(gathered), free(bucket), free(staged);
    return PX_ERR_RUNTIME;
  }
  int64_t cur[PX_MEM_COUNT] = {0}, total = 0, best = -1, inflight = 0, late = 0;
  int64_t best_at[PX_MEM_COUNT] = {0};
  /* per block kind, once: a backward (ZeRO-2/3 buckets), a layer's forward (a micro-batch arrives with its
   * chunk's first), the block a micro-batch leaves with (its last backward block, W when split) */
  bool bwd[PX_BLOCK_KIND_COUNT], arrive[PX_BLOCK_KIND_COUNT], leave[PX_BLOCK_KIND_COUNT];
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    bwd[k] = px_block_is_bwd((px_block_kind)k);
    arrive[k] = px_block_is_layer_fwd((px_block_kind)k);
    leave[k] = px_parallel_split_w(&p->par) ? px_block_is_layer_w((px_block_kind)k)
                                            : px_block_is_layer_bwd((px_block_kind)k);
  }
  for (int32_t i = 0; i < prog->ninsts; i++) {
    const px_inst *in = &prog->insts[i];
    const px_unit *u = in->unit >= 0 ? &prog->units[in->unit] : NULL;
    /* Unit buffers: ZeRO-3 gathered parameters, ZeRO-2/3 full-gradient buckets. */
    if (in->block == PX_BLOCK_PARAM_SYNC && p->par.zero == 3) {
      cur[PX_MEM_BUFFERS] += gathered_bytes(prog, u);
      total += gathered_bytes(prog, u);
      gathered[in->unit] = true;
    }
    for (int32_t v = in->unit; bwd[in->block] && p->par.zero >= 2 && u && v < in->unit + in->units; v++)
      if (!bucket[v]) {
        cur[PX_MEM_BUFFERS] += full_grad_bytes(prog, &prog->units[v]);
        total += full_grad_bytes(prog, &prog->units[v]);
        bucket[v] = true;
      }
    /* offload: a fetched parameter shard waits for its gather; a reduced
     * gradient shard for its copy to the host */
    int64_t stage_in = 0;
    if (in->block == PX_BLOCK_FETCH_PARAM) stage_in = (int64_t)prog->ops[u->fetch_op].bytes;
    if (in->block == PX_BLOCK_GRAD_SYNC && p->par.offload_opt) stage_in = (int64_t)prog->ops[u->offload_op].bytes;
    cur[PX_MEM_BUFFERS] += stage_in;
    total += stage_in;
    if (u) staged[in->unit] += stage_in;
    /* activation offload: a layer's kept activations leave before the forward that waits for their copy and
     * are back after the backward their copy back waits for (program.c, offload_before) */
    if (in->block == PX_BLOCK_OFFLOAD_ACT || in->block == PX_BLOCK_FETCH_ACT) {
      int64_t set = (int64_t)prog->ops[in->ops].bytes * (in->block == PX_BLOCK_OFFLOAD_ACT ? -1 : 1);
      cur[PX_MEM_ACTIVATIONS] += set;
      total += set;
    }
    if (arrive[in->block] && in->layer == p->vstage_first[in->chunk * pp + s]) inflight++;
    const px_block_mem *b = &bm[in->block];
    /* a ZeRO reduce-scatter lands in a temporary shard first */
    if (in->block == PX_BLOCK_GRAD_SYNC && p->par.zero >= 1 && !p->par.offload_opt) {
      int64_t tmp = prog->ops[u->grad_op].dim[1] * (int64_t)gb;
      if (total + tmp > best) {
        best = total + tmp;
        for (int c = 0; c < PX_MEM_COUNT; c++) best_at[c] = cur[c];
        best_at[PX_MEM_BUFFERS] += tmp;
        mp->peak_inst = i;
        mp->peak_mbs_in_flight = (int32_t)inflight;
      }
    }
    if (total + b->peak > best) {
      best = total + b->peak;
      for (int c = 0; c < PX_MEM_COUNT; c++) best_at[c] = cur[c] + b->at_peak[c];
      mp->peak_inst = i;
      mp->peak_mbs_in_flight = (int32_t)inflight;
    }
    for (int c = 0; c < PX_MEM_COUNT; c++) {
      cur[c] += b->delta[c];
      total += b->delta[c];
    }
    if ((uint64_t)cur[PX_MEM_ACTIVATIONS] > mp->activations_peak_bytes)
      mp->activations_peak_bytes = (uint64_t)cur[PX_MEM_ACTIVATIONS];
    /* a micro-batch leaves with its last backward block (W when the backward is split) */
    if (leave[in->block] && in->layer == p->vstage_first[in->chunk * pp + s])
      inflight--;
    if ((in->block == PX_BLOCK_OFFLOAD_GRAD || (in->block == PX_BLOCK_PARAM_SYNC && p->par.offload_params)) &&
        staged[in->unit]) {
      cur[PX_MEM_BUFFERS] -= staged[in->unit];
      total -= staged[in->unit];
      staged[in->unit] = 0;
    }
    for (int32_t v = in->unit; (in->flags & PX_INSTF_RESHARD) && v < in->unit + in->units; v++)
      if (gathered[v]) {
        cur[PX_MEM_BUFFERS] -= gathered_bytes(prog, &prog->units[v]);
        total -= gathered_bytes(prog, &prog->units[v]);
        gathered[v] = false;
      }
    if (in->block == PX_BLOCK_GRAD_SYNC && p->par.zero >= 2 && bucket[in->unit]) {
      late += full_grad_bytes(prog, u);
      bucket[in->unit] = false;
    }
    /* An overlapped reduction reads its bucket while the next compute block
     * runs: the bucket is freed after that block (at once without overlap). */
    if (in->stream == PX_STREAM_COMPUTE || !(p->par.overlap & PX_OVERLAP_DP)) {
      cur[PX_MEM_BUFFERS] -= late;
      total -= late;
      late = 0;
    }
  }
  free(gathered);
  free(bucket);
  free(staged);
  for (int c = PX_MEM_ACTIVATIONS; c < PX_MEM_COUNT; c++) mp->at_peak[c] = best_at[c] > 0 ? (uint64_t)best_at[c] : 0;
  mp->peak_bytes = mp->static_bytes;
  for (int c = PX_MEM_ACTIVATIONS; c < PX_MEM_COUNT; c++) mp->peak_bytes += mp->at_peak[c];
  if (!px_plan_stage_fits(p, s)) p->fits = false;
  return PX_OK;
}

void px_compile_memory_end(px_plan *p) {
  node_offload(p);
  if (!px_plan_host_fits(p)) p->fits = false;
}
