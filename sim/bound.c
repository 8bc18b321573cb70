/* Bounds on a plan's peak memory and step time from shared block templates. */
#include "sim/bound.h"

#include <stdlib.h>
#include <string.h>

#include "plan/program.h"
#include "sim/sim.h"

/* One key's templates, as the bounds read them. */
typedef struct {
  px_parallel key;   /* the choices, those the templates do not read normalised (tmpl_key) */
  px_parallel par;   /* the first plan added with the key: its templates are the key's */
  uint64_t hash;
  bool made;
  uint64_t ns[PX_BLOCK_KIND_COUNT];  /* each block's least time (px_sim_block_bounds_ns) */
  int64_t net[PX_BLOCK_KIND_COUNT];  /* each block's net allocation (px_block_mem's delta, every category) */
  px_group_elems dense, moe, embed, head, mtp; /* a dense layer's, a MoE layer's, the embedding's, the head's, the
                                                   MTP module's (its layer's and its own) */
  bool embed_group;  /* px_program_embed_group */
} tmpl;

/* A schedule's forwards before its first backward, on the first and last stage. */
typedef struct {
  int64_t k[5]; /* schedule, pp, vpp, micro-batches, interleaved group */
  uint64_t hash;
  int64_t *first; /* (2 vpp) stage 0's per chunk, then stage pp - 1's */
} sched;

/* Open addressing: slots hold an index + 1 (0: empty). */
typedef struct {
  int64_t *slot;
  int64_t cap;
} table;

struct px_bound_cache {
  const px_model *m;
  const px_cluster *c;
  tmpl *t;
  int64_t nt, capt;
  table tt;
  sched *s;
  int64_t ns, caps;
  table st;
};

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define HASH_SEED 0xcbf29ce484222325ull

/* The choices only the programs read (plan/program.c and the stage's own
 * sized ops), normalised: plans equal in the rest share their templates.
 * tests/test_props.c checks that two plans of one key, each compiled alone,
 * have the same templates. Copied field by field into a zeroed struct, so
 * that equal choices have equal bytes (padding too) in every process: the
 * keys' order splits an MPI sweep. */
static void tmpl_key(const px_parallel *par, px_parallel *key) {
  _Static_assert(sizeof(px_parallel) == 864, "px_parallel changed: copy (or normalise) its new field here");
  /* mtp_loss_scale: the objective's weights, the same ops and bytes (normalised away) */
  memset(key, 0, sizeof *key);
  key->tp = par->tp, key->pp = par->pp, key->dp = par->dp, key->cp = par->cp, key->cp_algo = par->cp_algo;
  key->ep = par->ep, key->etp = par->etp, key->moe_dispatch = par->moe_dispatch, key->moe_router_padding = par->moe_router_padding, key->mtp_layers = par->mtp_layers,
  key->moe_buffers = par->moe_buffers,
  key->moe_imbalance = par->moe_imbalance, key->cuda_graph = par->cuda_graph;
  key->zero = par->zero, key->sp = par->sp, key->mbs = par->mbs, key->gbs = par->gbs, key->seq = par->seq;
  key->recompute = par->recompute, key->recompute_modules = px_parallel_recompute_modules(par);
  key->precision = par->precision, key->fp8_recipe = par->fp8_recipe;
  key->fp8_base = par->fp8_base, key->fp8_library = par->fp8_library, key->fp8_params = par->fp8_params, key->fp8_attention = par->fp8_attention, key->attention = par->attention, key->gelu = par->gelu, key->overlap = par->overlap;
  key->elementwise = par->elementwise;
  key->main_grad = par->main_grad, key->offload_opt = par->offload_opt, key->offload_params = par->offload_params;
  key->shard_group = par->shard_group;
  key->finetune = par->finetune, key->lora_rank = par->lora_rank, key->lora_alpha = par->lora_alpha;
  key->lora_targets = par->lora_targets, key->base_precision = par->base_precision;
  key->bf16_layers_start = par->bf16_layers_start, key->bf16_layers_end = par->bf16_layers_end;
  /* normalised: a split backward is two blocks, the rest is the programs' */
  key->schedule = px_parallel_split_w(par) ? PX_SCHED_ZB_H1 : PX_SCHED_1F1B;
  key->vpp = 1;
  /* partial recomputation's blocks are the same whatever its N (the programs pick them per layer) */
  bool partial = px_parallel_recompute_partial(par);
  key->recompute_method = partial ? PX_RECOMPUTE_BLOCK : PX_RECOMPUTE_UNIFORM, key->recompute_layers = partial;
  key->grad_accum = key->reshard = -1;
  key->prefetch = -1;
  /* first_stage_layers, last_stage_layers, mb_group, bucket_bytes, chunk_layers, offload_act_layers: 0 */
}

static void sched_key(const px_parallel *par, int64_t k[5]) {
  k[0] = par->schedule, k[1] = par->pp, k[2] = par->vpp, k[3] = px_parallel_microbatches(par);
  k[4] = par->schedule == PX_SCHED_INTERLEAVED ? px_parallel_mb_group(par) : 0;
}

/* Where hash h's entry is, or the empty slot it would take (eq: entry i is the one). */
static int64_t *table_find(const table *t, uint64_t h, bool (*eq)(const px_bound_cache *, int64_t, const void *),
                           const px_bound_cache *bc, const void *key) {
  for (int64_t i = (int64_t)(h & (uint64_t)(t->cap - 1));; i = (i + 1) & (t->cap - 1))
    if (!t->slot[i] || eq(bc, t->slot[i] - 1, key)) return &t->slot[i];
}

static bool tmpl_eq(const px_bound_cache *bc, int64_t i, const void *key) {
  return !memcmp(&bc->t[i].key, key, sizeof bc->t[i].key);
}
static bool sched_eq(const px_bound_cache *bc, int64_t i, const void *key) {
  return !memcmp(bc->s[i].k, key, sizeof bc->s[i].k);
}

/* Room for one more entry: the table at most half full (rehashed from the entries' hashes). */
static px_status table_grow(px_bound_cache *bc, table *t, int64_t n, bool tmpls, px_err *err) {
  if (2 * (n + 1) <= t->cap) return PX_OK;
  int64_t cap = t->cap ? 2 * t->cap : 256;
  int64_t *slot = px_calloc((size_t)cap, sizeof *slot, err);
  if (!slot) return PX_ERR_RUNTIME;
  free(t->slot);
  t->slot = slot, t->cap = cap;
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = tmpls ? bc->t[i].hash : bc->s[i].hash;
    int64_t j = (int64_t)(h & (uint64_t)(cap - 1));
    while (slot[j]) j = (j + 1) & (cap - 1);
    slot[j] = i + 1;
  }
  return PX_OK;
}

px_bound_cache *px_bound_cache_new(const px_model *m, const px_cluster *c, px_err *err) {
  px_bound_cache *bc = px_calloc(1, sizeof *bc, err);
  if (bc) bc->m = m, bc->c = c;
  return bc;
}

void px_bound_cache_free(px_bound_cache *bc) {
  if (!bc) return;
  for (int64_t i = 0; i < bc->ns; i++) free(bc->s[i].first);
  free(bc->t), free(bc->s), free(bc->tt.slot), free(bc->st.slot);
  free(bc);
}

int64_t px_bound_cache_size(const px_bound_cache *bc) { return bc->nt; }

static px_status add_sched(px_bound_cache *bc, const px_parallel *par, px_err *err) {
  int64_t k[5];
  sched_key(par, k);
  uint64_t h = hash_bytes(k, sizeof k, HASH_SEED);
  px_status st = table_grow(bc, &bc->st, bc->ns, false, err);
  if (st) return st;
  int64_t *at = table_find(&bc->st, h, sched_eq, bc, k);
  if (*at) return PX_OK;
  if (bc->ns == bc->caps) {
    int64_t cap = bc->caps ? 2 * bc->caps : 64;
    sched *ns = realloc(bc->s, (size_t)cap * sizeof *ns);
    if (!ns) return px_err_set(err, PX_ERR_RUNTIME, "out of memory bounding plans");
    bc->s = ns, bc->caps = cap;
  }
  sched *s = &bc->s[bc->ns];
  memcpy(s->k, k, sizeof k);
  s->hash = h;
  s->first = px_calloc((size_t)(2 * par->vpp), sizeof *s->first, err);
  if (!s->first) return PX_ERR_RUNTIME;
  int64_t stages[2] = {0, par->pp - 1};
  if ((st = px_schedule_forwards_first(par, k[3], 2, stages, s->first, err))) {
    free(s->first);
    return st;
  }
  *at = ++bc->ns;
  return PX_OK;
}

px_status px_bound_cache_add(px_bound_cache *bc, const px_parallel *par, int64_t *index, px_err *err) {
  px_parallel key;
  tmpl_key(par, &key);
  uint64_t h = hash_bytes(&key, sizeof key, HASH_SEED);
  px_status st = table_grow(bc, &bc->tt, bc->nt, true, err);
  if (!st) st = add_sched(bc, par, err);
  if (st) return st;
  int64_t *at = table_find(&bc->tt, h, tmpl_eq, bc, &key);
  if (*at) {
    *index = *at - 1;
    return PX_OK;
  }
  if (bc->nt == bc->capt) {
    int64_t cap = bc->capt ? 2 * bc->capt : 64;
    tmpl *nt = realloc(bc->t, (size_t)cap * sizeof *nt);
    if (!nt) return px_err_set(err, PX_ERR_RUNTIME, "out of memory bounding plans");
    bc->t = nt, bc->capt = cap;
  }
  tmpl *t = &bc->t[bc->nt];
  memset(t, 0, sizeof *t);
  t->key = key, t->par = *par, t->hash = h;
  *index = bc->nt;
  *at = ++bc->nt;
  return PX_OK;
}

/* The first layer of the model that is (moe) or is not a MoE layer's, -1 none. */
static int64_t first_layer(const px_model *m, bool moe) {
  for (int64_t l = 0; l < m->layers; l++)
    if ((m->experts > 0 && px_model_layer_is_moe(m, l)) == moe) return l;
  return -1;
}

px_status px_bound_cache_make(px_bound_cache *bc, int64_t index, px_err *err) {
  tmpl *t = &bc->t[index];
  px_plan p;
  px_status st = px_plan_compile_blocks(&p, bc->m, bc->c, &t->par, err);
  if (st) return st;
  st = px_sim_block_bounds_ns(&p, t->ns, err);
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    px_block_mem bm;
    px_plan_block_mem(&p, (px_block_kind)k, &bm);
    t->net[k] = 0;
    for (int c = 0; c < PX_MEM_COUNT; c++) t->net[k] += bm.delta[c];
  }
  int64_t dense = first_layer(bc->m, false), moe = first_layer(bc->m, true);
  if (dense >= 0) px_program_group_elems(&p, (int32_t)dense, &t->dense);
  if (moe >= 0) px_program_group_elems(&p, (int32_t)moe, &t->moe);
  px_program_group_elems(&p, -1, &t->embed);
  px_program_group_elems(&p, (int32_t)bc->m->layers, &t->head);
  if (t->par.mtp_layers > 0) px_program_group_elems(&p, (int32_t)bc->m->layers + 1, &t->mtp);
  else memset(&t->mtp, 0, sizeof t->mtp);
  t->embed_group = px_program_embed_group(&p);
  t->made = !st;
  px_plan_free(&p);
  return st;
}

/* Adds `times` groups g (of layers kept in the compute dtype: bf16, without quantized weights). */
static void elems_add(px_group_elems *to, const px_group_elems *g, int64_t times, bool bf16) {
  to->elems += (uint64_t)times * g->elems;
  to->expert_elems += (uint64_t)times * g->expert_elems;
  if (!bf16) to->fp8_elems += (uint64_t)times * g->fp8_elems;
  to->frozen_bytes += (uint64_t)times * g->frozen_bytes;
}

px_status px_bound_of(const px_bound_cache *bc, int64_t index, const px_parallel *par, const px_parallel *states,
                      px_bound *out, px_err *err) {
  const tmpl *t = &bc->t[index];
  const px_model *m = bc->m;
  memset(out, 0, sizeof *out);
  if (!t->made) return px_err_set(err, PX_ERR_RUNTIME, "internal: a bound's templates were not made");
  int64_t k[5];
  sched_key(par, k);
  int64_t *at = table_find(&bc->st, hash_bytes(k, sizeof k, HASH_SEED), sched_eq, bc, k);
  if (!*at) return px_err_set(err, PX_ERR_RUNTIME, "internal: a bound's schedule was not added");
  const int64_t *fwd_first = bc->s[*at - 1].first;
  int64_t L = m->layers, pp = par->pp, v = par->vpp, V = pp * v, mbs = px_parallel_microbatches(par);
  bool split = px_parallel_split_w(par);
  /* per chunk (virtual stage): its layers, the least time of a forward, backward and W entry, what a
   * forward entry keeps allocated (with its receive and send), its parameters */
  int64_t *layers = px_calloc((size_t)V, sizeof *layers, err), *keep = px_calloc((size_t)V, sizeof *keep, err);
  uint64_t *ns = px_calloc((size_t)V * 3, sizeof *ns, err);
  px_group_elems *el = px_calloc((size_t)V, sizeof *el, err);
  px_block_kind *kinds = px_calloc((size_t)L + 3, sizeof *kinds, err); /* px_program_entry_kinds: n + 3 at most */
  px_status st = layers && keep && ns && el && kinds ? PX_OK : PX_ERR_RUNTIME;
  if (!st) st = px_parallel_chunk_layers(par, L, layers, err);
  for (int64_t vs = 0, first = 0; !st && vs < V; first += layers[vs++]) {
    bool embed = vs == 0, head = vs == V - 1;
    for (int e = PX_ENTRY_F; e <= (split ? PX_ENTRY_W : PX_ENTRY_B); e++) {
      int nk = px_program_entry_kinds(m, par, first, layers[vs], embed && e != PX_ENTRY_W, head && e != PX_ENTRY_W, e,
                                      kinds);
      for (int i = 0; i < nk; i++) ns[3 * vs + e] += t->ns[kinds[i]];
      if (e != PX_ENTRY_F) continue;
      int64_t n[2][2] = {{0}}; /* [moe][bf16] layers */
      /* activation offload (pp 1), where `states` puts it: the offloaded layers' sets are off the GPU when the
       * forward ends (program.c, offload_before) */
      int64_t off = V == 1 && states->offload_act_layers > 0 ? states->offload_act_layers : 0;
      for (int i = 0, l = 0; i < nk; i++) {
        bool layer = px_block_is_layer_fwd(kinds[i]);
        if (!layer || l++ >= off) keep[vs] += t->net[kinds[i]];
        if (layer) n[px_block_is_moe_fwd(kinds[i])][px_block_is_bf16(kinds[i])]++;
      }
      if (!embed) keep[vs] += t->net[PX_BLOCK_RECV_FWD];
      if (!head) keep[vs] += t->net[PX_BLOCK_SEND_FWD];
      for (int bf16 = 0; bf16 < 2; bf16++)
        elems_add(&el[vs], &t->moe, n[1][bf16], bf16), elems_add(&el[vs], &t->dense, n[0][bf16], bf16);
    }
  }
  uint64_t head_ns = 0, tail_ns = 0, step_ns = 0;
  int64_t shard_n = px_parallel_shard_size(par), expert_n = px_parallel_expert_dp(par);
  for (int64_t s = 0; !st && s < pp; s++) {
    /* time: micro-batch 0's first chunk forwarded by the stages before, every block here, then (not
     * split) the last micro-batch's first-chunk backward on the stages before */
    uint64_t busy = 0;
    for (int64_t c = 0; c < v; c++) busy += ns[3 * (c * pp + s)] + ns[3 * (c * pp + s) + 1] + ns[3 * (c * pp + s) + 2];
    uint64_t t_ns = head_ns + (uint64_t)mbs * busy + (split ? 0 : tail_ns);
    if (t_ns > step_ns) step_ns = t_ns;
    head_ns += ns[3 * s], tail_ns += ns[3 * s + 1];
    /* memory: the stage's states; on the first and last stage the forwards before the first backward */
    px_group_elems g = {0};
    for (int64_t c = 0; c < v; c++) elems_add(&g, &el[c * pp + s], 1, false);
    if (s == 0 && t->embed_group) elems_add(&g, &t->embed, 1, false);
    if (s == pp - 1) elems_add(&g, &t->head, 1, false), elems_add(&g, &t->mtp, 1, false);
    px_states sts;
    uint64_t shard = g.elems / (uint64_t)shard_n + g.expert_elems / (uint64_t)expert_n;
    /* fp8_params under ZeRO-3: no fewer fp8 weights in the shard than the plan's (each is in it), so that
     * the 16-bit bytes they save are no fewer and the floor stays one */
    px_states_of(states, &bc->c->gpu, g.elems + g.expert_elems, shard, g.fp8_elems, g.fp8_elems < shard ? g.fp8_elems : shard, &sts);
    px_states_add_frozen(&sts, g.frozen_bytes);
    int64_t act = 0;
    for (int64_t c = 0; (s == 0 || s == pp - 1) && c < v; c++)
      act += fwd_first[(s == 0 ? 0 : v) + c] * keep[c * pp + s];
    uint64_t floor = px_states_bytes(&sts, PX_PLACE_GPU) + (act > 0 ? (uint64_t)act : 0);
    if (floor > out->peak_bytes) out->peak_bytes = floor, out->stage = s;
  }
  out->step_s = (double)step_ns * 1e-9;
  free(layers), free(keep), free(ns), free(el), free(kinds);
  return st;
}

px_status px_bound_plan(const px_model *m, const px_cluster *c, const px_parallel *par, const px_parallel *states,
                        px_bound *out, px_err *err) {
  px_parallel p = *par;
  px_parallel_resolve(&p, m, c);
  px_bound_cache *bc = px_bound_cache_new(m, c, err);
  int64_t i = 0;
  px_status st = bc ? px_bound_cache_add(bc, &p, &i, err) : PX_ERR_RUNTIME;
  if (!st) st = px_bound_cache_make(bc, i, err);
  if (!st) st = px_bound_of(bc, i, &p, states ? states : &p, out, err);
  px_bound_cache_free(bc);
  return st;
}
