/* The plan compiler's second half: splits layers over pipeline stages, lays
 * parameters out in units (DP buckets, ZeRO shards, ZeRO-3 gathers), orders
 * each stage's program by its schedule (GPipe, 1F1B, interleaved 1F1B),
 * batches its sends and receives, places data-parallel synchronisation, and
 * pairs every send with its receive. */
#include "plan/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/lora.h"
#include "plan/memory.h"

/* One entry of a stage's schedule: forward or backward of a micro-batch on
 * a chunk; with a split backward, B (bwd) or W (bwd and w). */
typedef struct {
  bool bwd;
  bool w;    /* the weight gradients (W) of a split backward: no p2p */
  bool pair; /* runs with the next entry without p2p in between (interleaved steady state) */
  int32_t mb, chunk;
} sched_unit;

#define SCHED_F(i) ((sched_unit){false, false, false, (int32_t)(i), 0})
#define SCHED_B(i) ((sched_unit){true, false, false, (int32_t)(i), 0})
#define SCHED_W(i) ((sched_unit){true, true, false, (int32_t)(i), 0})

/* ZB-H1 (Qi et al., ICLR 2024, section 2.1; the authors' DeepSpeed
 * ZeroBubbleH1Pipeline with exact semantics): 1F1B's warm-up, then s
 * F-B pairs whose W is deferred, F-B-W in the steady state, B-W in the
 * drain and the s deferred W last. At most p micro-batches are in flight
 * on any stage (1F1B's first stage). */
static int64_t schedule_zb_h1(int64_t pp, int64_t m, int64_t s, sched_unit *out) {
  int64_t f = 0, b = 0, w = 0, n = 0;
  int64_t warm = pp - s - 1 < m ? pp - s - 1 : m, pairs = s < m - warm ? s : m - warm;
  while (f < warm) out[n++] = SCHED_F(f++);
  for (int64_t i = 0; i < pairs; i++) out[n++] = SCHED_F(f++), out[n++] = SCHED_B(b++);
  while (f < m) out[n++] = SCHED_F(f++), out[n++] = SCHED_B(b++), out[n++] = SCHED_W(w++);
  while (b < m) out[n++] = SCHED_B(b++), out[n++] = SCHED_W(w++);
  while (w < m) out[n++] = SCHED_W(w++);
  return n;
}

/* ZB-H2 (Qi et al., section 2.2): every stage runs greedily on a clock of
 * equal F, B and W times, B first when its gradient has arrived, else F
 * while fewer than 2p - 1 micro-batches are in flight (forwarded, W not
 * done), else a deferred W. Warm-up forwards fill the time until the first
 * gradient returns (2(p - s) - 1 on stage s) and deferred W fill the drain:
 * the paper's parallelogram. The clock runs every stage at once, so it
 * writes every stage's order (3m entries each, stage s's at out + 3 m s);
 * returns 0, -1 out of memory. */
static int64_t schedule_zb_h2(int64_t pp, int64_t m, sched_unit *out) {
  int64_t *f = calloc((size_t)pp, sizeof *f), *b = calloc((size_t)pp, sizeof *b), *w = calloc((size_t)pp, sizeof *w);
  int64_t *f_end = malloc((size_t)(pp * m) * sizeof *f_end), *b_end = malloc((size_t)(pp * m) * sizeof *b_end);
  int64_t n = -1;
  if (f && b && w && f_end && b_end) {
    n = 0;
    int64_t limit = 2 * pp - 1, left = 3 * pp * m;
    /* one slot per time unit; a stage's op ending at t + 1 is visible to the others from t + 1 */
    for (int64_t t = 0; left > 0 && t < 3 * pp * m + 2 * pp; t++) { /* it ends by 3m + p - 1; the bound is a guard */
      for (int64_t s = 0; s < pp; s++) {
        bool b_ok = b[s] < f[s] && f_end[s * m + b[s]] <= t && (s == pp - 1 || (b[s + 1] > b[s] && b_end[(s + 1) * m + b[s]] <= t));
        bool f_ok = f[s] < m && f[s] - w[s] < limit && (s == 0 || (f[s - 1] > f[s] && f_end[(s - 1) * m + f[s]] <= t));
        sched_unit u;
        if (b_ok)
          b_end[s * m + b[s]] = t + 1, u = SCHED_B(b[s]++);
        else if (f_ok)
          f_end[s * m + f[s]] = t + 1, u = SCHED_F(f[s]++);
        else if (w[s] < b[s])
          u = SCHED_W(w[s]++);
        else
          continue;
        left--;
        out[3 * m * s + f[s] + b[s] + w[s] - 1] = u;
      }
    }
    if (left > 0) n = -1;
  }
  free(f), free(b), free(w), free(f_end), free(b_end);
  return n;
}

/* What the compiler works out once a plan rather than once a stage. */
typedef struct {
  int slots[2][32];  /* a layer's parameter slots, dense [0] or MoE [1], looked up by name ... */
  int nslots[2];     /* ... once (< 0: not yet) */
  sched_unit *zb_h2; /* (pp, 3m) ZB-H2: every stage's order, from one run of its clock */
} plan_cache;

/* Megatron-LM's orders and the zero-bubble ones, of m micro-batches on
 * stage s (3 m vpp entries at most). Returns the entries, -1 out of memory. */
static int64_t schedule_stage(const px_parallel *par, int64_t m, int64_t s, sched_unit *out, plan_cache *pc) {
  int64_t pp = par->pp, v = par->vpp, n = 0;
  if (par->schedule == PX_SCHED_ZB_H1) return schedule_zb_h1(pp, m, s, out);
  if (par->schedule == PX_SCHED_ZB_H2) {
    if (!pc->zb_h2) {
      pc->zb_h2 = malloc((size_t)(3 * pp * m) * sizeof *pc->zb_h2);
      if (!pc->zb_h2 || schedule_zb_h2(pp, m, pc->zb_h2) < 0) {
        free(pc->zb_h2);
        pc->zb_h2 = NULL;
        return -1;
      }
    }
    memcpy(out, pc->zb_h2 + 3 * m * s, (size_t)(3 * m) * sizeof *out);
    return 3 * m;
  }
  if (par->schedule == PX_SCHED_GPIPE) {
    for (int64_t i = 0; i < m; i++) out[n++] = SCHED_F(i);
    for (int64_t i = 0; i < m; i++) out[n++] = SCHED_B(i);
    return n;
  }
  /* EP overlap (Megatron-Core's combined 1F1B): one more forward in the warm-up, so that each steady-state
   * forward and the backward run with it are of different micro-batches, merged layer by layer (emit_merged) */
  int64_t merge = par->overlap > 0 && (par->overlap & PX_OVERLAP_EP) ? 1 : 0;
  if (par->schedule == PX_SCHED_1F1B) {
    int64_t warm = pp - s - 1 + merge < m ? pp - s - 1 + merge : m;
    for (int64_t i = 0; i < warm; i++) out[n++] = SCHED_F(i);
    for (int64_t i = 0; i < m - warm; i++) {
      out[n] = SCHED_F(warm + i);
      out[n++].pair = merge > 0;
      out[n++] = SCHED_B(i);
    }
    for (int64_t i = m - warm; i < m; i++) out[n++] = SCHED_B(i);
    return n;
  }
  /* Interleaved (Megatron-Core's schedules.py: get_schedule_table,
   * get_pp_rank_microbatches): virtual micro-batch k runs the k-th entry of
   * a table that takes the micro-batches in groups of g (the last group the
   * rest) and, within a group, every chunk in turn over the group's
   * micro-batches; backwards visit the chunks in reverse. Warm-up is
   * 2 (pp - s - 1) + (v - 1) g forwards. In the steady state a forward and a
   * backward run back to back and their p2p is posted in one batch after
   * both (send_forward_backward_recv_forward_backward). With g = pp this is
   * Narayanan et al.'s order (SC'21). */
  int64_t total = m * v, g = px_parallel_mb_group(par);
  int32_t *tab_mb = malloc((size_t)total * sizeof *tab_mb), *tab_ch = malloc((size_t)total * sizeof *tab_ch);
  if (!tab_mb || !tab_ch || g < 1) {
    free(tab_mb), free(tab_ch);
    return -1;
  }
  for (int64_t lo = 0, k = 0; lo < m; lo += g) {
    int64_t hi = lo + g >= m ? m : lo + g;
    for (int64_t c = 0; c < v; c++)
      for (int64_t mb = lo; mb < hi; mb++) tab_mb[k] = (int32_t)mb, tab_ch[k++] = (int32_t)c;
  }
  int64_t warm = (pp - s - 1) * 2 + (v - 1) * g;
  if (m == pp || warm > total) warm = total;
  if (merge && warm < total) warm++; /* schedules.py: num_warmup_microbatches + 1 with overlap_moe_expert_parallel_comm */
#define FWD(k) ((sched_unit){false, false, false, tab_mb[k], tab_ch[k]})
#define BWD(k) ((sched_unit){true, false, false, tab_mb[k], (int32_t)(v - 1 - tab_ch[k])})
  for (int64_t k = 0; k < warm; k++) out[n++] = FWD(k);
  for (int64_t i = 0; i < total - warm; i++) {
    out[n] = FWD(warm + i);
    out[n++].pair = true;
    out[n++] = BWD(i);
  }
  for (int64_t k = total - warm; k < total; k++) out[n++] = BWD(k);
#undef FWD
#undef BWD
  free(tab_mb);
  free(tab_ch);
  return n;
}

px_status px_schedule_forwards_first(const px_parallel *par, int64_t m, int nstages, const int64_t *stages,
                                     int64_t *out, px_err *err) {
  int64_t v = par->vpp;
  sched_unit *sched = px_calloc((size_t)(3 * m * v + 2), sizeof *sched, err);
  if (!sched) return PX_ERR_RUNTIME;
  plan_cache pc = {.nslots = {-1, -1}};
  px_status st = PX_OK;
  for (int i = 0; i < nstages && !st; i++) {
    int64_t *n = out + (int64_t)i * v, ns = schedule_stage(par, m, stages[i], sched, &pc);
    if (ns < 0) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory ordering the schedule");
    for (int64_t c = 0; c < v; c++) n[c] = 0;
    for (int64_t k = 0; k < ns && !sched[k].bwd; k++) n[sched[k].chunk]++;
  }
  free(pc.zb_h2);
  free(sched);
  return st;
}

/* Layers of each model chunk: px_parallel_chunk_layers (the default split,
 * the first and last stage's counts, or an explicit list), validated before. */
static px_status split_layers(px_plan *p, px_err *err) {
  int64_t V = p->vstages;
  px_status st = px_parallel_chunk_layers(&p->par, p->model.layers, p->vstage_layers, err);
  if (st) return st;
  int64_t first = 0;
  for (int64_t i = 0; i < V; i++) {
    p->vstage_first[i] = first;
    first += p->vstage_layers[i];
  }
  return PX_OK;
}


/* ---- growable arrays ---- */

typedef struct {
  px_inst *v;
  int32_t n, cap;
  int32_t *deps;
  int32_t nd, dcap;
  bool failed; /* a list could not grow: nothing more is added, and the program is refused */
} inst_list;

/* v (of *cap entries of size bytes, n used) with room for one more: v, or
 * it grown; NULL (and l->failed) when it cannot grow. */
static void *grow(inst_list *l, void *v, int32_t n, int32_t *cap, size_t size, int32_t first) {
  if (l->failed) return NULL;
  if (n < *cap) return v;
  int32_t want = *cap ? (*cap <= INT32_MAX / 2 ? 2 * *cap : INT32_MAX) : first;
  void *nv = want > *cap ? realloc(v, (size_t)want * size) : NULL;
  if (!nv) {
    l->failed = true;
    return NULL;
  }
  *cap = want;
  return nv;
}

static int32_t inst_push(inst_list *l, px_block_kind b, px_stream st, px_phase ph, int32_t mb, int32_t layer,
                         int32_t chunk, int32_t unit) {
  px_inst *nv = grow(l, l->v, l->n, &l->cap, sizeof *nv, 256);
  if (!nv) return -1;
  l->v = nv;
  px_inst *in = &l->v[l->n];
  memset(in, 0, sizeof *in);
  in->block = (uint16_t)b;
  in->stream = (uint8_t)st;
  in->phase = (uint8_t)ph;
  in->mb = mb;
  in->layer = layer;
  in->chunk = (int16_t)chunk;
  in->unit = unit;
  in->batch = -1;
  in->peer = -1;
  in->ops = -1;
  in->dep_start = l->nd;
  return l->n++;
}

/* Adds a dependency of the last pushed instance. */
static bool dep_push(inst_list *l, int32_t on) {
  if (on < 0 || l->failed) return !l->failed;
  px_inst *in = &l->v[l->n - 1];
  for (int32_t i = 0; i < in->ndeps; i++)
    if (l->deps[in->dep_start + i] == on) return true;
  int32_t *nd = grow(l, l->deps, l->nd, &l->dcap, sizeof *nd, 512);
  if (!nd) return false;
  l->deps = nd;
  l->deps[l->nd++] = on;
  in->ndeps++;
  return true;
}

/* ---- parameter layout ---- */

/* Parameter groups of a stage, in flat-buffer order. */
typedef struct {
  int32_t id; /* -1 embedding, 0..L-1 layer, L head */
  uint64_t elems;
} group;

static bool tied_single(const px_plan *p) { return p->model.tied_embeddings && p->par.pp == 1; }

int64_t px_program_ngroups(const px_plan *p) { return p->model.layers + 2 + p->par.mtp_layers; }

/* The parameter slots of a group, and whether the slot is a layer slot
 * (a MoE layer's MLP: the router, the shared experts, then the experts). */
static int group_slots(const px_plan *p, int32_t gid, int *out) {
  /* the attention's (q, k, v in one, or latent attention's), then the MLP's */
#define ATTN_NAMES "ln1_w", "ln1_b", "qkv_w", "qkv_b", "q_down_w", "q_norm_w", "q_up_w", "kv_down_w", "kv_norm_w", \
                   "kv_up_w", "q_head_norm_w", "k_head_norm_w", "sinks", "o_w", "o_b", "ln2_w", "ln2_b"
  static const char *const layer_names[] = {ATTN_NAMES, "fc1_w", "fc1_b", "fc2_w", "fc2_b"};
  static const char *const moe_names[] = {ATTN_NAMES, "router_w", "sh_fc1_w", "sh_fc2_w", "exp_fc1_w", "exp_fc2_w",
                                          "router_b", "exp_fc1_b", "exp_fc2_b"};
#undef ATTN_NAMES
  static const char *const embed_names[] = {"emb_w", "pos_w"};
  static const char *const head_names[] = {"lnf_w", "lnf_b", "head_w"};
  /* the MTP module's own (compile.c's mtp_slots), after its layer's */
  static const char *const mtp_names[] = {"mtp_emb_w", "mtp_enorm_w", "mtp_hnorm_w", "mtp_eh_e_w", "mtp_eh_h_w", "mtp_lnf_w"};
  int n = 0;
  int64_t L = p->model.layers;
  bool mtp = gid > L;
  if ((gid >= 0 && gid < L) || mtp) {
    bool moe = px_model_layer_is_moe(&p->model, mtp ? L : gid);
    const char *const *names = moe ? moe_names : layer_names;
    size_t count = moe ? sizeof moe_names / sizeof *moe_names : sizeof layer_names / sizeof *layer_names;
    for (size_t i = 0; i < count; i++) {
      int s = px_plan_slot(p, names[i]);
      if (s >= 0) out[n++] = s;
    }
    /* fine-tuning's adapters, A then B, named after their linear layer's weight (px_linear_adapter_slots): 14
     * at most (q, k, v, o, gate, up, fc2), 26 slots beside a biased model's 12 (29 with q/k norms and sinks; MoE and MLA
     * are refused) */
    for (int i = 0; px_parallel_lora(&p->par) && i < PX_LORA_LINEARS; i++)
      for (int j = 0; j < 4; j++)
        for (int ab = 0; ab < 2; ab++) {
          char name[PX_NAME_MAX];
          snprintf(name, sizeof name, "%s.%c%d", px_lora_linears[i].weight, ab ? 'B' : 'A', j);
          int s = px_plan_slot(p, name);
          if (s >= 0) out[n++] = s;
        }
    for (size_t i = 0; mtp && i < sizeof mtp_names / sizeof *mtp_names; i++) {
      int s = px_plan_slot(p, mtp_names[i]);
      if (s >= 0) out[n++] = s;
    }
    return n;
  }
  if (gid == L || tied_single(p)) {
    for (size_t i = 0; i < sizeof head_names / sizeof *head_names; i++) {
      int s = px_plan_slot(p, head_names[i]);
      if (s >= 0) out[n++] = s;
    }
  }
  if (gid == -1 || (gid == L && tied_single(p))) {
    for (size_t i = 0; i < sizeof embed_names / sizeof *embed_names; i++) {
      int s = px_plan_slot(p, embed_names[i]);
      if (s >= 0) out[n++] = s;
    }
  }
  return n;
}

bool px_program_embed_group(const px_plan *p) { return !tied_single(p); }

void px_program_group_elems(const px_plan *p, int32_t gid, px_group_elems *out) {
  int slots[32];
  int n = group_slots(p, gid, slots);
  memset(out, 0, sizeof *out);
  for (int i = 0; i < n; i++) {
    const px_slot *sl = &p->slots[slots[i]];
    if (sl->frozen) {
      out->frozen_bytes += px_lora_frozen_bytes(&p->par, sl->elems, px_lora_quantized(sl->name));
      continue;
    }
    if (sl->expert) out->expert_elems += sl->elems;
    else out->elems += sl->elems;
    if (sl->fp8) out->fp8_elems += sl->elems;
  }
}

/* The stage's parameters in flat order (embedding, layers chunk by chunk,
 * head) cut into units, and each group's units [lo, hi] by group id + 1. */
static px_status layout_params(px_plan *p, int64_t stage, px_program *prog, int32_t *unit_lo, int32_t *unit_hi,
                               plan_cache *pc, px_err *err) {
  int64_t L = p->model.layers;
  group *groups = px_calloc((size_t)px_program_ngroups(p), sizeof *groups, err);
  if (!groups) return PX_ERR_RUNTIME;
  int ng = 0;
  if (prog->has_embed && !tied_single(p)) groups[ng++] = (group){-1, 0};
  for (int64_t c = 0; c < p->par.vpp; c++) {
    int64_t vs = c * p->par.pp + stage;
    for (int64_t l = 0; l < p->vstage_layers[vs]; l++) groups[ng++] = (group){(int32_t)(p->vstage_first[vs] + l), 0};
  }
  if (prog->has_head) groups[ng++] = (group){(int32_t)L, 0};
  for (int64_t k = 0; prog->has_head && k < p->par.mtp_layers; k++) groups[ng++] = (group){(int32_t)(L + 1 + k), 0};
  /* at most 32 parameters a group (group_slots), and a unit per parameter at most: the stage's groups, not the model's */
  px_param_ref *refs = px_calloc(((size_t)ng + 1) * 32, sizeof *refs, err);
  px_unit *units = px_calloc(((size_t)ng + 1) * 32, sizeof *units, err);
  int32_t *ref_unit = px_calloc(((size_t)ng + 1) * 32, sizeof *ref_unit, err);
  px_param_ref *frozen = px_parallel_lora(&p->par) ? px_calloc(((size_t)ng + 1) * 32, sizeof *frozen, err) : NULL;
  if (!refs || !units || !ref_unit || (px_parallel_lora(&p->par) && !frozen)) {
    free(groups), free(refs), free(units), free(ref_unit), free(frozen);
    return PX_ERR_RUNTIME;
  }
  /* Sizes and parameter references, flat order without padding first. */
  int nrefs = 0;
  for (int g = 0; g < ng; g++) {
    int own[32], *slots = own, ns;
    int32_t id = groups[g].id;
    if (id >= 0 && id < L) {
      int moe = px_model_layer_is_moe(&p->model, id);
      if (pc->nslots[moe] < 0) pc->nslots[moe] = group_slots(p, id, pc->slots[moe]);
      slots = pc->slots[moe], ns = pc->nslots[moe];
    } else {
      ns = group_slots(p, id, own);
    }
    for (int i = 0; i < ns; i++) {
      if (p->slots[slots[i]].frozen) { /* not trained: outside the flat buffer, held in its base precision */
        const px_slot *sl = &p->slots[slots[i]];
        frozen[prog->nfrozen++] = (px_param_ref){(int16_t)slots[i], groups[g].id, -1, prog->frozen_elems, sl->elems};
        prog->frozen_elems += sl->elems;
        prog->frozen_bytes += px_lora_frozen_bytes(&p->par, sl->elems, px_lora_quantized(sl->name));
        continue;
      }
      refs[nrefs++] = (px_param_ref){(int16_t)slots[i], groups[g].id, -1, 0, p->slots[slots[i]].elems};
      groups[g].elems += p->slots[slots[i]].elems;
    }
  }
  /* Units, built from the back (the order gradients complete): with ZeRO-3
   * one per group (FSDP's unit, a layer); otherwise buckets of whole tensors
   * filled up to the bucket size, as DDP's and Megatron-LM's are, so a bucket
   * may end inside a layer (never inside a tensor). */
  int nu = 0;
  uint64_t bucket_elems = p->par.bucket_bytes / px_dtype_bytes(p->grad_dtype);
  for (int r = nrefs - 1; r >= 0;) {
    int last = r;
    uint64_t elems = refs[r--].elems;
    bool expert = p->slots[refs[last].slot].expert; /* experts and the rest are reduced over other groups */
    while (r >= 0 && p->slots[refs[r].slot].expert == expert &&
           (p->par.zero == 3 ? refs[r].group == refs[last].group : elems < bucket_elems))
      elems += refs[r--].elems;
    units[nu].first_group = refs[r + 1].group;
    units[nu].last_group = refs[last].group;
    units[nu].elems = elems;
    units[nu].expert = expert;
    uint64_t shard = (uint64_t)px_plan_unit_ranks(p, &units[nu]);
    units[nu].padded = (elems + shard - 1) / shard * shard;
    for (int k = r + 1; k <= last; k++) ref_unit[k] = nu;
    nu++;
  }
  /* Built back to front: reverse into flat (forward) order and assign offsets. */
  for (int i = 0; i < nu / 2; i++) {
    px_unit t = units[i];
    units[i] = units[nu - 1 - i];
    units[nu - 1 - i] = t;
  }
  uint64_t off = 0, shard_off = 0;
  for (int u = 0; u < nu; u++) {
    units[u].offset = off, units[u].shard_offset = shard_off;
    off += units[u].padded;
    shard_off += px_plan_unit_shard(p, &units[u]);
  }
  prog->flat_elems = off;
  prog->param_elems = 0;
  for (int g = 0; g < ng; g++) unit_lo[groups[g].id + 1] = nu, unit_hi[groups[g].id + 1] = -1;
  uint64_t in_unit = 0;
  for (int r = 0; r < nrefs; r++) {
    int u = nu - 1 - ref_unit[r];
    if (r > 0 && refs[r - 1].unit != u) in_unit = 0;
    refs[r].unit = u;
    refs[r].offset = units[u].offset + in_unit;
    in_unit += refs[r].elems;
    prog->param_elems += refs[r].elems;
    int32_t gi = refs[r].group + 1;
    if (u < unit_lo[gi]) unit_lo[gi] = u;
    if (u > unit_hi[gi]) unit_hi[gi] = u;
  }
  for (int g = 0; g < ng; g++) /* a group with nothing trained (fine-tuning's embedding, head): no unit */
    if (unit_hi[groups[g].id + 1] < unit_lo[groups[g].id + 1])
      unit_lo[groups[g].id + 1] = -1, unit_hi[groups[g].id + 1] = -2;
  if (tied_single(p)) unit_lo[0] = unit_lo[L + 1], unit_hi[0] = unit_hi[L + 1]; /* the embedding is in the head's group */
  free(groups);
  free(ref_unit);
  prog->units = units;
  prog->nunits = nu;
  prog->params = refs;
  prog->nparams = nrefs;
  prog->frozen = frozen;
  return PX_OK;
}

/* ---- programs ---- */

/* A compute block of a schedule entry: its kind, parameter group, layer,
 * micro-batch and chunk. */
typedef struct {
  px_block_kind kind;
  int64_t gid, layer;
  int32_t mb, chunk;
} blk_ref;

typedef struct {
  px_plan *p;
  int64_t stage;
  inst_list il;
  blk_ref *blocks;        /* (L + 3) scratch: the blocks of one entry */
  blk_ref *blocks_b;      /* (L + 3) scratch: the backward's of a merged pair (emit_merged) */
  px_block_kind *kinds;   /* (L + 3) scratch: their kinds */
  blk_ref *seq;           /* ZeRO-3: every compute block of the stage in emission order (nseq) */
  bool *seq_gather;       /* (nseq) the block's unit must be gathered for it (it is not resident) */
  bool *seq_reshard;      /* (nseq) the unit's gathered parameters are freed after the block */
  int64_t *seq_after;     /* (nseq) the block before it that frees its unit, -1 none */
  int64_t nseq, cursor;   /* ... and the index of the next one emitted */
  int64_t issued;         /* ZeRO-3: gathers issued for seq[0 .. issued) */
  int32_t *unit_lo, *unit_hi; /* (px_program_ngroups) by group id + 1: the group's units [lo, hi] (one with ZeRO-3) */
  int32_t *gathered;      /* ZeRO-3: per unit, the pending gather instance */
  int32_t last_compute;   /* last compute instance emitted */
  int32_t *grad_sync_last; /* per unit: the last GRAD_SYNC instance */
  int32_t *param_sync;    /* ZeRO-1/2 with overlap: per unit, the step-start gather */
  bool *unit_fwd_seen;    /* ZeRO-1/2 with overlap: unit's first forward already waits */
  int32_t *last_bwd_k;    /* per unit x mb (sharded accumulation) or unit: last schedule entry writing it */
  int32_t *pending_sync;  /* (nunits) reductions waiting to be emitted (without DP overlap) */
  int32_t nunits;
  int32_t npending;
  int32_t emb_unit; /* the unit holding this stage's tied-embedding copy, -1 none */
  int32_t *act_fwd, *act_copy; /* (L) activation offload: the micro-batch's forward of layer l, and its
                                  activations' copy to the host (forward) or back (backward) */
  int32_t batch_lo, batch_hi; /* a p2p batch [lo, hi) the next compute block waits for, whole */
} emitter;

static int32_t unit_of(const emitter *e, int64_t gid) { return e->unit_lo[gid + 1]; }
static int32_t unit_last(const emitter *e, int64_t gid) { return e->unit_hi[gid + 1]; }

/* ZeRO-3: before the compute block seq[cursor], the parameter gathers of
 * the blocks up to `prefetch` ahead of it, in the order they are used, each
 * issued once the block before is done (so it runs behind the ones between,
 * as FSDP's backward prefetch and its limit on in-flight all-gathers do).
 * A block gathers every unit of its group (an MoE layer has two: the
 * experts are sharded over their own group), and the units of a group are
 * gathered, kept and freed together, so the first one's state stands for
 * all. A unit has one gather outstanding at a time: its next waits for the use. */
static void zero3_gathers(emitter *e) {
  px_plan *p = e->p;
  int64_t ahead = (p->par.overlap & PX_OVERLAP_ZERO) ? p->par.prefetch : 0;
  while (e->issued < e->nseq && e->issued <= e->cursor + ahead) {
    const blk_ref *b = &e->seq[e->issued];
    int32_t lo = unit_of(e, b->gid);
    if (!e->seq_gather[e->issued]) { /* resident since an earlier block's gather */
      e->issued++;
      continue;
    }
    /* one copy of a unit at a time: not before the last user of the previous one */
    if (e->gathered[lo] >= 0 || e->seq_after[e->issued] >= e->cursor) break;
    for (int32_t u = lo; u <= unit_last(e, b->gid); u++) {
      int32_t fetch = -1; /* offloaded parameters: the shard comes from the host first */
      if (p->par.offload_params) {
        fetch =
            inst_push(&e->il, PX_BLOCK_FETCH_PARAM, PX_STREAM_HOST, PX_PHASE_COMM, b->mb, (int32_t)b->gid, b->chunk, u);
        if (fetch < 0) return;
        dep_push(&e->il, e->last_compute);
      }
      int32_t idx =
          inst_push(&e->il, PX_BLOCK_PARAM_SYNC, PX_STREAM_DP, PX_PHASE_COMM, b->mb, (int32_t)b->gid, b->chunk, u);
      if (idx < 0) return;
      dep_push(&e->il, e->last_compute);
      dep_push(&e->il, fetch);
      e->gathered[u] = idx;
    }
    e->issued++;
  }
}

/* A compute block; waits for the given instance (a receive) and, with
 * ZeRO-3, for its unit's gather issued before it. */
static int32_t compute(emitter *e, const blk_ref *b, px_phase ph, int32_t wait) {
  px_plan *p = e->p;
  int32_t u = unit_of(e, b->gid);
  if (p->par.zero == 3) zero3_gathers(e);
  int64_t x = e->cursor++;
  int32_t idx = inst_push(&e->il, b->kind, PX_STREAM_COMPUTE, ph, b->mb, (int32_t)b->layer, b->chunk, u);
  if (idx < 0) return -1;
  e->il.v[idx].units = (uint16_t)(unit_last(e, b->gid) - u + 1);
  dep_push(&e->il, wait);
  for (int32_t i = e->batch_lo; i < e->batch_hi; i++) dep_push(&e->il, i);
  e->batch_lo = e->batch_hi = 0;
  if (p->par.zero == 3) {
    for (int32_t v = u; e->seq_gather[x] && v <= unit_last(e, b->gid); v++) {
      dep_push(&e->il, e->gathered[v]);
      e->gathered[v] = -1;
    }
    if (e->seq_reshard[x]) e->il.v[idx].flags |= PX_INSTF_RESHARD;
  }
  for (int32_t v = u; p->par.zero > 0 && p->par.zero < 3 && (p->par.overlap & PX_OVERLAP_ZERO) && v <= unit_last(e, b->gid);
       v++)
    if (!e->unit_fwd_seen[v]) {
      dep_push(&e->il, e->param_sync[v]);
      e->unit_fwd_seen[v] = true;
    }
  e->last_compute = idx;
  return idx;
}

/* Data-parallel gradient reduction of a unit. A unit holding a tied
 * embedding copy (first and last stage) first sums its gradient with the
 * other copy's, while both are still full (unreduced) gradients. */
static int32_t grad_sync(emitter *e, int32_t u, int32_t mb, int32_t after) {
  if (u == e->emb_unit) {
    after = inst_push(&e->il, PX_BLOCK_EMB_SYNC, PX_STREAM_DP, PX_PHASE_COMM, mb, -1, 0, u);
    if (after < 0) return -1;
    dep_push(&e->il, e->last_compute);
  }
  int32_t idx = inst_push(&e->il, PX_BLOCK_GRAD_SYNC, PX_STREAM_DP, PX_PHASE_COMM, mb, -1, 0, u);
  if (idx < 0) return -1;
  dep_push(&e->il, after);
  e->grad_sync_last[u] = idx;
  if (e->p->par.offload_opt) { /* the reduced shard streams to the host on the copy engine */
    int32_t off = inst_push(&e->il, PX_BLOCK_OFFLOAD_GRAD, PX_STREAM_HOST, PX_PHASE_COMM, mb, -1, 0, u);
    if (off < 0) return -1;
    dep_push(&e->il, idx);
    e->grad_sync_last[u] = off;
  }
  return idx;
}

/* Unit u's gradients are complete for schedule entry k (micro-batch mb),
 * last written by instance idx. If no later entry writes them before their
 * reduction (per micro-batch with ZeRO-2/3's sharded accumulation, per step
 * otherwise), they are reduced now: overlapped, right after that block on
 * the DP stream, as DDP's buckets and ZeRO's reduce-scatters are; otherwise
 * queued until the entry (sharded) or the backward ends. */
static void unit_done(emitter *e, int32_t u, int32_t k, int32_t mb, int32_t idx) {
  px_plan *p = e->p;
  bool per_mb = px_parallel_reduce_per_mb(&p->par);
  int32_t last = per_mb ? e->last_bwd_k[u * p->microbatches + mb] : e->last_bwd_k[u];
  if (last != k || u == e->emb_unit) return; /* the tied unit is reduced at the end of the step, see emit_program */
  if (p->par.overlap & PX_OVERLAP_DP)
    grad_sync(e, u, per_mb ? mb : -1, idx);
  else
    e->pending_sync[e->npending++] = u;
}

/* Emits the pending (non-overlapped) reductions, the compute stream waiting for them. */
static void flush_syncs(emitter *e, int32_t mb) {
  int32_t last = -1;
  for (int i = 0; i < e->npending; i++)
    last = grad_sync(e, e->pending_sync[i], px_parallel_reduce_per_mb(&e->p->par) ? mb : -1, e->last_compute);
  e->npending = 0;
  if (last >= 0) e->last_compute = last; /* the next compute block waits for it */
}

/* The compute blocks of schedule entry u, in order: forward the embedding,
 * the layers, the head; backward the head, the layers last to first, the
 * embedding (whichever of them the entry's chunk holds). */
int px_program_entry_kinds(const px_model *m, const px_parallel *par, int64_t first, int64_t n, bool embed, bool head,
                           int entry, px_block_kind *out) {
  bool partial = px_parallel_recompute_partial(par); /* the layers not recomputed have blocks of their own */
  int k = 0;
#define BF16(l) px_parallel_layer_bf16(par, m->layers, l) /* the layers kept in the compute dtype have theirs too */
  if (entry == PX_ENTRY_W) { /* W: the chunk's layers in the backward's order (no attention: windowed or not) */
    for (int64_t l = first + n - 1; l >= first; l--) out[k++] = px_layer_w_block(px_model_layer_is_moe(m, l), BF16(l));
  } else if (entry == PX_ENTRY_F) {
    if (embed) out[k++] = PX_BLOCK_EMBED_FWD;
    for (int64_t l = first; l < first + n; l++)
      out[k++] = px_layer_block(px_model_layer_is_moe(m, l), px_model_layer_is_sliding(m, l),
                                partial && !px_parallel_layer_recomputed(par, l - first), BF16(l), false);
    if (head && par->mtp_layers > 0) out[k++] = PX_BLOCK_MTP_FWD;
    if (head) out[k++] = PX_BLOCK_HEAD_FWD;
  } else {
    if (head) out[k++] = PX_BLOCK_HEAD_BWD;
    if (head && par->mtp_layers > 0) out[k++] = PX_BLOCK_MTP_BWD;
    for (int64_t l = first + n - 1; l >= first; l--)
      out[k++] = px_layer_block(px_model_layer_is_moe(m, l), px_model_layer_is_sliding(m, l),
                                partial && !px_parallel_layer_recomputed(par, l - first), BF16(l), true);
    if (embed) out[k++] = PX_BLOCK_EMBED_BWD;
  }
#undef BF16
  return k;
}

/* The compute blocks of schedule entry u, in order (px_program_entry_kinds),
 * with each one's parameter group, layer, micro-batch and chunk (kinds: (L + 3) scratch). */
static int entry_blocks(const px_plan *p, int64_t stage, sched_unit u, blk_ref *out, px_block_kind *kinds) {
  int64_t pp = p->par.pp, V = p->vstages, L = p->model.layers;
  int64_t vs = u.chunk * pp + stage, first = p->vstage_first[vs], n = p->vstage_layers[vs];
  int64_t egid = tied_single(p) ? L : -1; /* the embedding's parameter group */
  int entry = u.w ? PX_ENTRY_W : u.bwd ? PX_ENTRY_B : PX_ENTRY_F;
  int k = px_program_entry_kinds(&p->model, &p->par, first, n, vs == 0 && !u.w, vs == V - 1 && !u.w, entry, kinds);
  /* the layers in the entry's order: ascending forward, descending backward */
  for (int i = 0, l = 0; i < k; i++) {
    if (kinds[i] == PX_BLOCK_EMBED_FWD || kinds[i] == PX_BLOCK_EMBED_BWD) {
      out[i] = (blk_ref){kinds[i], egid, first, u.mb, u.chunk};
    } else if (kinds[i] == PX_BLOCK_HEAD_FWD || kinds[i] == PX_BLOCK_HEAD_BWD) {
      out[i] = (blk_ref){kinds[i], L, L, u.mb, u.chunk};
    } else if (kinds[i] == PX_BLOCK_MTP_FWD || kinds[i] == PX_BLOCK_MTP_BWD) { /* its group and its layer: L + 1 */
      out[i] = (blk_ref){kinds[i], L + 1, L + 1, u.mb, u.chunk};
    } else {
      int64_t layer = entry == PX_ENTRY_F ? first + l : first + n - 1 - l;
      out[i] = (blk_ref){kinds[i], layer, layer, u.mb, u.chunk};
      l++;
    }
  }
  return k;
}

/* Activation offload (pp 1, one micro-batch's forward then its backward), as Transformer Engine's CPU
 * offload schedules it with model_layers - num_layers = W sets of activations on the GPU at most: layer l's
 * copy to the host starts after its forward, and layer l + W's forward waits for it; its copy back starts when
 * layer l + W's backward has freed a set, and layer l's backward waits for it. In program order the copy to
 * the host stands before the forward that waits for it and the copy back after the backward it waits for,
 * where the memory walk takes the set off and puts it back. Before compute block b: the copy it waits for
 * (pushed now, -1 none). */
static int32_t offload_before(emitter *e, const blk_ref *b, bool bwd) {
  const px_parallel *par = &e->p->par;
  if (par->offload_act_layers <= 0 || (!px_block_is_layer_fwd(b->kind) && !px_block_is_layer_bwd(b->kind))) return -1;
  if (bwd) return px_parallel_layer_offloaded(par, b->layer) ? e->act_copy[b->layer] : -1;
  int64_t l = b->layer - px_parallel_offload_window(par, e->p->model.layers);
  if (l < 0 || !px_parallel_layer_offloaded(par, l)) return -1;
  int32_t copy = inst_push(&e->il, PX_BLOCK_OFFLOAD_ACT, PX_STREAM_HOST, PX_PHASE_COMM, b->mb, (int32_t)l, 0, -1);
  dep_push(&e->il, e->act_fwd[l]);
  return copy;
}
/* ... and after it (instance idx): a forward is remembered; a backward lets a copy back start. */
static void offload_after(emitter *e, const blk_ref *b, bool bwd, int32_t idx) {
  const px_parallel *par = &e->p->par;
  if (par->offload_act_layers <= 0) return;
  if (!bwd && px_block_is_layer_fwd(b->kind)) e->act_fwd[b->layer] = idx;
  if (!bwd || !px_block_is_layer_bwd(b->kind)) return;
  int64_t l = b->layer - px_parallel_offload_window(par, e->p->model.layers);
  if (l < 0 || !px_parallel_layer_offloaded(par, l)) return;
  e->act_copy[l] = inst_push(&e->il, PX_BLOCK_FETCH_ACT, PX_STREAM_HOST, PX_PHASE_COMM, b->mb, (int32_t)l, 0, -1);
  dep_push(&e->il, idx);
}

/* Block i of schedule entry k's blocks bl[0, nb) (with ZeRO-3 gathers and gradient reductions around it): its
 * instance. In the backward each unit is reduced as soon as the last of its blocks in the entry is done. */
static int32_t emit_block(emitter *e, const sched_unit *sched, int64_t k, const blk_ref *bl, int nb, int i,
                          int32_t wait) {
  sched_unit u = sched[k];
  int32_t copy = offload_before(e, &bl[i], u.bwd);
  int32_t idx = compute(e, &bl[i], u.bwd ? PX_PHASE_BWD : PX_PHASE_FWD, wait);
  dep_push(&e->il, copy);
  offload_after(e, &bl[i], u.bwd, idx);
  for (int32_t unit = unit_of(e, bl[i].gid); u.bwd && unit <= unit_last(e, bl[i].gid); unit++) {
    bool later = false;
    for (int j = i + 1; j < nb && !later; j++) later = unit_of(e, bl[j].gid) <= unit && unit <= unit_last(e, bl[j].gid);
    if (!later) unit_done(e, unit, (int32_t)k, u.mb, idx);
  }
  return idx;
}

/* The compute blocks of one schedule entry; the first waits for `wait`. */
static void emit_entry(emitter *e, const sched_unit *sched, int64_t k, int32_t wait) {
  int nb = entry_blocks(e->p, e->stage, sched[k], e->blocks, e->kinds);
  for (int i = 0; i < nb; i++) emit_block(e, sched, k, e->blocks, nb, i, i == 0 ? wait : -1);
  if (sched[k].bwd && px_parallel_reduce_per_mb(&e->p->par)) flush_syncs(e, sched[k].mb);
}

static bool mtp_block(px_block_kind k) { return k == PX_BLOCK_MTP_FWD || k == PX_BLOCK_MTP_BWD; }
/* A layer's block, or the MTP module's, of a MoE layer. */
static bool layer_moe(const px_plan *p, px_block_kind k) {
  return px_block_is_moe(k) || (mtp_block(k) && px_model_layer_is_moe(&p->model, p->model.layers));
}

/* EP overlap: a steady-state forward (entry k) and backward (k + 1) merged as Megatron-Core's combined 1F1B runs
 * them (model_chunk_schedule_plan.py, TransformerModelChunkSchedulePlan.run, at d98e8a6): the forward's embedding,
 * the backward's head, then forward layer i beside the backward's i-th (the MTP module a layer, after the
 * model's: TransformerLayerSchedulePlan's mtp nodes; each such pair of a MoE layer run as one, PX_INSTF_MERGED
 * on the forward's instance), the backward's remaining layers, the forward's, its head, the backward's
 * embedding. Their receives wait_f, wait_b; last_f, last_b: each entry's last instance. */
static void emit_merged(emitter *e, const sched_unit *sched, int64_t k, int32_t wait_f, int32_t wait_b,
                        int32_t *last_f, int32_t *last_b) {
  blk_ref *fb = e->blocks, *bb = e->blocks_b;
  int nf = entry_blocks(e->p, e->stage, sched[k], fb, e->kinds), nb = entry_blocks(e->p, e->stage, sched[k + 1], bb, e->kinds);
  int fi = 0, bi = 0;
#define LAYER(b) (px_block_is_layer_fwd((b).kind) || px_block_is_layer_bwd((b).kind) || mtp_block((b).kind))
#define EMIT_F() (*last_f = emit_block(e, sched, k, fb, nf, fi, fi == 0 ? wait_f : -1), fi++)
#define EMIT_B() (*last_b = emit_block(e, sched, k + 1, bb, nb, bi, bi == 0 ? wait_b : -1), bi++)
  if (fi < nf && !LAYER(fb[fi])) EMIT_F(); /* the embedding */
  if (bi < nb && !LAYER(bb[bi])) EMIT_B(); /* the head */
  while (fi < nf && bi < nb && LAYER(fb[fi]) && LAYER(bb[bi])) {
    bool moe = layer_moe(e->p, fb[fi].kind) || layer_moe(e->p, bb[bi].kind);
    EMIT_F();
    if (moe && *last_f >= 0) e->il.v[*last_f].flags |= PX_INSTF_MERGED;
    EMIT_B();
  }
  while (bi < nb && LAYER(bb[bi])) EMIT_B();
  while (fi < nf) EMIT_F();
  while (bi < nb) EMIT_B();
#undef LAYER
#undef EMIT_F
#undef EMIT_B
  if (px_parallel_reduce_per_mb(&e->p->par)) flush_syncs(e, sched[k + 1].mb);
}

/* ZeRO-3: which blocks of the stage gather their units (kept by the
 * group's first unit: its others go with it), and after which their
 * gathered parameters are freed. Resharding after the forward, every block
 * gathers and frees; without it (FSDP's SHARD_GRAD_OP), a unit gathered for
 * a forward stays until the backwards of every micro-batch in flight on it
 * are done. A zero-bubble W gathers nothing: its GEMMs read the activations
 * and output gradients B kept, and write the unit's full gradient, reduced
 * after the last W that writes it (last_bwd_k). */
static px_status zero3_residency(emitter *e, px_err *err) {
  int32_t nu = e->nunits;
  int64_t *users = px_calloc((size_t)nu, sizeof *users, err);
  int64_t *last_free = px_calloc((size_t)nu, sizeof *last_free, err);
  bool *resident = px_calloc((size_t)nu, sizeof *resident, err);
  e->seq_gather = px_calloc((size_t)e->nseq + 1, sizeof *e->seq_gather, err);
  e->seq_reshard = px_calloc((size_t)e->nseq + 1, sizeof *e->seq_reshard, err);
  e->seq_after = px_calloc((size_t)e->nseq + 1, sizeof *e->seq_after, err);
  bool ok = users && last_free && resident && e->seq_gather && e->seq_reshard && e->seq_after;
  px_status st = ok ? PX_OK : PX_ERR_RUNTIME;
  for (int32_t u = 0; !st && u < nu; u++) last_free[u] = -1;
  for (int64_t x = 0; !st && x < e->nseq; x++) {
    const blk_ref *b = &e->seq[x];
    if (px_block_is_layer_w(b->kind)) continue; /* W reads activations and output gradients, no parameter */
    int32_t u = unit_of(e, b->gid);
    bool bwd = px_block_is_bwd(b->kind);
    e->seq_gather[x] = !resident[u];
    e->seq_after[x] = last_free[u];
    resident[u] = true;
    users[u] += bwd ? -1 : 1;
    if (e->p->par.reshard || (bwd && users[u] == 0)) {
      e->seq_reshard[x] = true;
      resident[u] = false;
      last_free[u] = x;
    }
  }
  free(users), free(last_free), free(resident);
  return st;
}

/* The receive of schedule entry u's input (forward) or output gradient
 * (backward) from the neighbouring stage, if it has one: its instance, or -1. */
static int32_t post_recv(emitter *e, sched_unit u) {
  px_plan *p = e->p;
  int64_t pp = p->par.pp, V = p->vstages, vs = u.chunk * pp + e->stage;
  int32_t first = (int32_t)p->vstage_first[vs], n = (int32_t)p->vstage_layers[vs], r = -1;
  if (u.w) return -1;
  if (!u.bwd && vs > 0)
    r = inst_push(&e->il, PX_BLOCK_RECV_FWD, PX_STREAM_PP_RECV, PX_PHASE_COMM, u.mb, first, u.chunk, -1);
  else if (u.bwd && vs < V - 1)
    r = inst_push(&e->il, PX_BLOCK_RECV_BWD, PX_STREAM_PP_RECV, PX_PHASE_COMM, u.mb, first + n, u.chunk, -1);
  /* without p2p overlap a receive is posted only when the stage reaches it */
  if (r >= 0 && !(p->par.overlap & PX_OVERLAP_PP)) dep_push(&e->il, e->last_compute);
  return r;
}

static px_status emit_program(px_plan *p, int64_t s, px_program *prog, plan_cache *pc, px_err *err) {
  int64_t pp = p->par.pp, V = p->vstages, L = p->model.layers, m = p->microbatches;
  sched_unit *sched = px_calloc((size_t)(3 * m * p->par.vpp + 2), sizeof *sched, err);
  if (!sched) return PX_ERR_RUNTIME;
  int64_t ns = schedule_stage(&p->par, m, s, sched, pc);
  emitter e = {.p = p, .stage = s, .last_compute = -1};
  if (ns < 0) {
    free(sched);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory ordering the schedule");
  }
  /* room for what an entry usually emits (its chunk's blocks, transfers and a few reductions), so the
   * lists seldom grow: growing copies them */
  int64_t guess = ns * (prog->nlayers / p->par.vpp + 4) + 256;
  if (guess < INT32_MAX / 2) {
    e.il.v = malloc((size_t)guess * sizeof *e.il.v);
    e.il.deps = malloc((size_t)guess * 2 * sizeof *e.il.deps);
    e.il.cap = e.il.v ? (int32_t)guess : 0;
    e.il.dcap = e.il.deps ? (int32_t)guess * 2 : 0;
  }
  e.unit_lo = px_calloc((size_t)px_program_ngroups(p), sizeof *e.unit_lo, err);
  e.unit_hi = px_calloc((size_t)px_program_ngroups(p), sizeof *e.unit_hi, err);
  px_status st = PX_OK;
  if (!e.unit_lo || !e.unit_hi) st = PX_ERR_RUNTIME;
  if (st || (st = layout_params(p, s, prog, e.unit_lo, e.unit_hi, pc, err))) goto done;
  int32_t nu = prog->nunits;
  e.nunits = nu;
  e.gathered = px_calloc((size_t)nu, sizeof *e.gathered, err);
  e.grad_sync_last = px_calloc((size_t)nu, sizeof *e.grad_sync_last, err);
  e.param_sync = px_calloc((size_t)nu, sizeof *e.param_sync, err);
  e.unit_fwd_seen = px_calloc((size_t)nu, sizeof *e.unit_fwd_seen, err);
  e.last_bwd_k = px_calloc((size_t)nu * (size_t)m, sizeof *e.last_bwd_k, err);
  e.pending_sync = px_calloc((size_t)nu, sizeof *e.pending_sync, err);
  e.blocks = px_calloc((size_t)L + 3, sizeof *e.blocks, err);
  e.blocks_b = px_calloc((size_t)L + 3, sizeof *e.blocks_b, err);
  e.kinds = px_calloc((size_t)L + 3, sizeof *e.kinds, err);
  e.act_fwd = px_calloc((size_t)L + 1, sizeof *e.act_fwd, err);
  e.act_copy = px_calloc((size_t)L + 1, sizeof *e.act_copy, err);
  if (!e.act_fwd || !e.act_copy || !e.gathered || !e.grad_sync_last || !e.param_sync || !e.unit_fwd_seen ||
      !e.last_bwd_k || !e.pending_sync || !e.blocks || !e.blocks_b || !e.kinds) {
    st = PX_ERR_RUNTIME;
    goto done;
  }
  for (int32_t u = 0; u < nu; u++) e.gathered[u] = e.grad_sync_last[u] = e.param_sync[u] = -1;
  e.emb_unit = -1;
  if (px_plan_shares_embedding(p) && (prog->has_embed || prog->has_head))
    for (int32_t i = 0; i < prog->nparams; i++)
      if (p->slots[prog->params[i].slot].role == PX_ROLE_TIED) e.emb_unit = prog->params[i].unit;
  for (int64_t i = 0; i < (int64_t)nu * m; i++) e.last_bwd_k[i] = -1;
  /* The last schedule entry writing each unit (per micro-batch for ZeRO-2/3). */
  bool per_mb = px_parallel_reduce_per_mb(&p->par);
  for (int64_t k = 0; k < ns; k++) {
    if (!sched[k].bwd) continue;
    int64_t vs = sched[k].chunk * pp + s;
    int64_t lo = vs == 0 && !sched[k].w ? -1 : p->vstage_first[vs]; /* W: the layers only */
    int64_t hi = vs == V - 1 && !sched[k].w ? L + p->par.mtp_layers /* the head's group, the MTP module's */
                                            : p->vstage_first[vs] + p->vstage_layers[vs] - 1;
    for (int64_t gid = lo; gid <= hi; gid++)
      for (int32_t u = unit_of(&e, gid); u <= unit_last(&e, gid); u++) {
        if (per_mb)
          e.last_bwd_k[u * m + sched[k].mb] = (int32_t)k;
        else
          e.last_bwd_k[u] = (int32_t)k;
      }
  }
  /* ZeRO-3: every compute block in emission order, for the gathers issued ahead of them */
  if (p->par.zero == 3) {
    for (int64_t k = 0; k < ns; k++) e.nseq += entry_blocks(p, s, sched[k], e.blocks, e.kinds);
    e.seq = px_calloc((size_t)e.nseq + 1, sizeof *e.seq, err);
    if (!e.seq) {
      st = PX_ERR_RUNTIME;
      goto done;
    }
    for (int64_t k = 0, n = 0; k < ns; k++) n += entry_blocks(p, s, sched[k], e.seq + n, e.kinds);
    if ((st = zero3_residency(&e, err))) goto done;
  }
  /* ZeRO-1/2, overlapped: the previous step's parameter all-gather runs at the start. */
  if (p->par.zero > 0 && p->par.zero < 3 && (p->par.overlap & PX_OVERLAP_ZERO))
    for (int32_t u = 0; u < nu; u++)
      e.param_sync[u] = inst_push(&e.il, PX_BLOCK_PARAM_SYNC, PX_STREAM_DP, PX_PHASE_COMM, -1, -1, 0, u);

  /* Groups of schedule entries run without p2p in between; before each group
   * one batch posts the previous group's sends and this group's receives,
   * except the receives that wrap around the pipeline (interleaved: the last
   * stage's forward output into the first stage's next chunk, the first
   * stage's gradient into the last stage's previous chunk). Those are posted
   * as Megatron-Core does (recv_tensor_from_previous_stage): the leading
   * stage is pp - 1 virtual micro-batches ahead of the one sending, so the
   * output of virtual micro-batch k is received in the batch before virtual
   * micro-batch k + pp, and kept until its chunk runs (later when the group
   * of micro-batches is longer than pp). */
  int32_t *recv_of = px_calloc((size_t)ns + 1, sizeof *recv_of, err);
  int32_t *last_of = px_calloc((size_t)ns + 1, sizeof *last_of, err);
  int64_t *post_at = px_calloc((size_t)ns + 1, sizeof *post_at, err); /* (ns) wrap receives: the entry whose group posts it, else -1 */
  int64_t *pos_of = px_calloc((size_t)ns + 1, sizeof *pos_of, err);   /* (m v) the entry of forward (backward) k */
  if (!recv_of || !last_of || !post_at || !pos_of) {
    free(recv_of), free(last_of), free(post_at), free(pos_of);
    st = PX_ERR_RUNTIME;
    goto done;
  }
  for (int64_t j = 0; j < ns; j++) post_at[j] = -1;
  bool lead_fwd = s == 0, lead_bwd = s == pp - 1; /* the wrap-around traffic this stage receives */
  if (p->par.vpp > 1) {
    int64_t g = px_parallel_mb_group(&p->par), v = p->par.vpp, nk = 0;
    for (int64_t j = 0; j < ns; j++)
      if (sched[j].bwd == !lead_fwd) pos_of[nk++] = j;
    for (int64_t j = 0, k = 0; j < ns; j++) {
      if (sched[j].bwd != !lead_fwd) continue;
      int64_t chunk = sched[j].chunk;
      bool wrap = lead_fwd ? chunk > 0 : (lead_bwd && chunk < v - 1);
      if (wrap) {
        /* virtual micro-batch k's input is the output of virtual micro-batch k - (its group's size) */
        int64_t grp = sched[j].mb / g * g, size = grp + g >= m ? m - grp : g;
        post_at[j] = pos_of[k - size + pp];
      }
      k++;
    }
  }
  int32_t batch = 0;
  int64_t prev_lo = 0, prev_hi = 0, wrap_next[2] = {0, 0};
  bool merge = p->par.overlap & PX_OVERLAP_EP; /* a steady-state forward and backward pair run merged */
  for (int64_t k = 0;;) {
    int64_t lo = k, hi = k;
    if (k < ns)
      for (hi = k + 1; hi < ns && sched[hi - 1].pair; hi++) {
      }
    int32_t batch_first = e.il.n;
    for (int64_t j = prev_lo; j < prev_hi; j++) {
      sched_unit pu = sched[j];
      if (pu.w) continue;
      int64_t pvs = pu.chunk * pp + s;
      int32_t first = (int32_t)p->vstage_first[pvs], n = (int32_t)p->vstage_layers[pvs];
      if (!pu.bwd && pvs < V - 1)
        inst_push(&e.il, PX_BLOCK_SEND_FWD, PX_STREAM_PP_SEND, PX_PHASE_COMM, pu.mb, first + n, pu.chunk, -1);
      else if (pu.bwd && pvs > 0)
        inst_push(&e.il, PX_BLOCK_SEND_BWD, PX_STREAM_PP_SEND, PX_PHASE_COMM, pu.mb, first, pu.chunk, -1);
      else
        continue;
      dep_push(&e.il, last_of[j]);
    }
    /* this group's own receives and the wrap-around ones due by its end:
     * forward activations first, then gradients (as Megatron-Core's batch),
     * each in schedule order */
    for (int dir = 0; dir < 2; dir++) {
      for (; wrap_next[dir] < ns; wrap_next[dir]++) {
        int64_t w = wrap_next[dir];
        if (post_at[w] < 0 || sched[w].bwd != dir) continue;
        if (post_at[w] >= hi) break;
        recv_of[w] = post_recv(&e, sched[w]);
      }
      for (int64_t j = lo; j < hi; j++)
        if (post_at[j] < 0 && sched[j].bwd == dir) recv_of[j] = post_recv(&e, sched[j]);
    }
    int32_t batch_end = e.il.n;
    if (batch_end > batch_first) {
      for (int32_t i = batch_first; i < batch_end; i++) e.il.v[i].batch = batch;
      batch++;
    }
    if (k >= ns) break;
    for (int64_t j = lo; j < hi; j++) {
      /* Without p2p overlap the group's first compute block waits for the whole batch. */
      if (!(p->par.overlap & PX_OVERLAP_PP) && j == lo) e.batch_lo = batch_first, e.batch_hi = batch_end;
      if (merge && j + 1 < hi && !sched[j].bwd && sched[j + 1].bwd) {
        emit_merged(&e, sched, j, recv_of[j], recv_of[j + 1], &last_of[j], &last_of[j + 1]);
        j++;
        continue;
      }
      emit_entry(&e, sched, j, recv_of[j]);
      last_of[j] = e.last_compute;
    }
    prev_lo = lo;
    prev_hi = hi;
    k = hi;
  }
  free(recv_of);
  free(last_of);
  free(post_at);
  free(pos_of);
  flush_syncs(&e, -1);
  /* The unit holding a tied embedding copy is summed with the other stage's
   * copy and reduced once, after every transfer of the step: a collective
   * between the first and last stage placed earlier could wait on a stage
   * that waits on a transfer. Its full gradients live until then. */
  if (e.emb_unit >= 0) grad_sync(&e, e.emb_unit, -1, e.last_compute);

  int32_t opt = inst_push(&e.il, PX_BLOCK_OPTIMIZER, PX_STREAM_COMPUTE, PX_PHASE_OPT, -1, -1, 0, -1);
  for (int32_t u = 0; u < nu; u++) dep_push(&e.il, e.grad_sync_last[u]);
  if (p->par.zero > 0 && p->par.zero < 3 && !(p->par.overlap & PX_OVERLAP_ZERO))
    for (int32_t u = 0; u < nu; u++) {
      inst_push(&e.il, PX_BLOCK_PARAM_SYNC, PX_STREAM_DP, PX_PHASE_COMM, -1, -1, 0, u);
      dep_push(&e.il, opt);
    }
  if (e.il.failed) {
    st = px_err_set(err, PX_ERR_RUNTIME, "out of memory at %d block instances and %d dependencies (%.0f MiB), from "
                    "%lld schedule entries", e.il.n, e.il.nd,
                    ((double)e.il.cap * sizeof *e.il.v + (double)e.il.dcap * sizeof *e.il.deps) / (1 << 20),
                    (long long)ns);
    goto done;
  }
  prog->insts = e.il.v;
  prog->ninsts = e.il.n;
  prog->deps = e.il.deps;
  prog->ndeps = e.il.nd;
  e.il.v = NULL;
  e.il.deps = NULL;
done:
  free(sched);
  free(e.unit_lo);
  free(e.unit_hi);
  free(e.gathered);
  free(e.grad_sync_last);
  free(e.param_sync);
  free(e.unit_fwd_seen);
  free(e.last_bwd_k);
  free(e.pending_sync);
  free(e.blocks);
  free(e.blocks_b);
  free(e.kinds);
  free(e.act_fwd);
  free(e.act_copy);
  free(e.seq);
  free(e.seq_gather);
  free(e.seq_reshard);
  free(e.seq_after);
  free(e.il.v);
  free(e.il.deps);
  return st;
}

/* Pairs sends and receives per (source stage, destination stage, direction)
 * in program order, checking that they agree on micro-batch and chunk. */
static px_status match_p2p(px_plan *p, px_err *err) {
  int64_t pp = p->par.pp;
  for (int64_t s = 0; s < pp; s++) {
    px_program *src = &p->programs[s];
    for (int dir = 0; dir < 2; dir++) {
      px_block_kind sk = dir == 0 ? PX_BLOCK_SEND_FWD : PX_BLOCK_SEND_BWD;
      px_block_kind rk = dir == 0 ? PX_BLOCK_RECV_FWD : PX_BLOCK_RECV_BWD;
      int64_t d = dir == 0 ? (s + 1) % pp : (s - 1 + pp) % pp;
      px_program *dst = &p->programs[d];
      int32_t j = 0;
      for (int32_t i = 0; i < src->ninsts; i++) {
        px_inst *si = &src->insts[i];
        if (si->block != sk) continue;
        while (j < dst->ninsts && dst->insts[j].block != rk) j++;
        if (j == dst->ninsts)
          return px_err_set(err, PX_ERR_RUNTIME, "internal: stage %lld sends micro-batch %d with no receive on stage %lld",
                            (long long)s, si->mb, (long long)d);
        px_inst *ri = &dst->insts[j];
        /* The chunk advances by one when a forward send wraps from the last stage to the first. */
        int32_t want_chunk = si->chunk + (dir == 0 ? (s == pp - 1) : -(s == 0));
        int32_t want_layer = si->layer;
        if (ri->mb != si->mb || ri->chunk != want_chunk || ri->layer != want_layer)
          return px_err_set(err, PX_ERR_RUNTIME,
                            "internal: stage %lld's send (mb %d, chunk %d) meets stage %lld's receive (mb %d, chunk %d)",
                            (long long)s, si->mb, si->chunk, (long long)d, ri->mb, ri->chunk);
        si->peer = j;
        ri->peer = i;
        j++;
      }
      for (; j < dst->ninsts; j++)
        if (dst->insts[j].block == rk)
          return px_err_set(err, PX_ERR_RUNTIME, "internal: stage %lld receives micro-batch %d that is never sent",
                            (long long)d, dst->insts[j].mb);
    }
  }
  return PX_OK;
}

px_status px_compile_programs(px_plan *p, px_stage_done_fn done, void *ctx, px_err *err) {
  int64_t pp = p->par.pp;
  px_status st = split_layers(p, err);
  if (st) return st;
  p->programs = px_calloc((size_t)pp, sizeof *p->programs, err);
  if (!p->programs) return PX_ERR_RUNTIME;
  plan_cache pc = {.nslots = {-1, -1}};
  bool stop = false;
  /* the first stage, the last, then the others: the ends hold the most (1F1B's in-flight
   * micro-batches, the embedding, the head), so a caller that stops at a stage that does
   * not fit mostly stops at the first */
  for (int64_t k = 0; k < pp && !st && !stop; k++) {
    int64_t s = k == 0 ? 0 : k == 1 ? pp - 1 : k - 1;
    px_program *prog = &p->programs[s];
    prog->has_embed = s == 0;
    prog->has_head = s == pp - 1;
    prog->first_layer = p->vstage_first[s];
    prog->nlayers = 0;
    for (int64_t c = 0; c < p->par.vpp; c++) prog->nlayers += p->vstage_layers[c * pp + s];
    st = emit_program(p, s, prog, &pc, err);
    if (st == PX_ERR_RUNTIME) /* out of memory: what for, and how large */
      px_err_prefix(err, "stage %lld's program (%lld micro-batches, %lld layers)", (long long)s,
                    (long long)p->microbatches, (long long)prog->nlayers);
    if (!st && done) st = done(p, s, &stop, ctx);
  }
  free(pc.zb_h2);
  return st || stop ? st : match_p2p(p, err);
}

px_status px_plan_first_layers_kept(const px_plan *p, int64_t n, uint64_t *out, px_err *err) {
  px_block_kind *kinds = px_calloc((size_t)p->model.layers + 3, sizeof *kinds, err); /* (L) forward kinds */
  if (!kinds) return PX_ERR_RUNTIME;
  px_program_entry_kinds(&p->model, &p->par, 0, p->model.layers, false, false, PX_ENTRY_F, kinds);
  for (int64_t l = 0; l < n && l < p->model.layers; l++) out[l] = px_plan_kept_bytes(p, kinds[l]);
  free(kinds);
  return PX_OK;
}
