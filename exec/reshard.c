/* Checkpoints across plans: the plan record and hashes, and re-splitting a
 * checkpoint's states for another plan through the canonical layout. */
#include "exec/reshard.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "exec/amax.h"
#include "exec/params.h"
#include "plan/lora.h"

/* Old shards a reader keeps open at once; the others are parked (closed, indexed). */
#define OPEN_SHARDS_MAX 64

/* ---- what a checkpoint records of its plan ---- */

void px_reshard_hashes(const px_plan *plan, uint64_t *plan_hash, uint64_t *model_hash) {
  cJSON *m = px_model_to_json(&plan->model);
  cJSON *p = px_parallel_to_json(&plan->par);
  char *ms = m ? cJSON_PrintUnformatted(m) : NULL, *ps = p ? cJSON_PrintUnformatted(p) : NULL;
  *model_hash = ms ? px_ckpt_hash_bytes(ms, strlen(ms), 0) : 0;
  *plan_hash = ps ? px_ckpt_hash_bytes(ps, strlen(ps), *model_hash) : 0;
  cJSON_free(ms), cJSON_free(ps);
  cJSON_Delete(m), cJSON_Delete(p);
}

void px_reshard_meta(const px_plan *plan, int64_t rank, int64_t step, px_ckpt_meta *meta) {
  memset(meta, 0, sizeof *meta);
  px_reshard_hashes(plan, &meta->plan_hash, &meta->model_hash);
  px_param_rank rk;
  px_param_rank_of(plan, rank, &rk);
  meta->step = step;
  meta->rank = (int32_t)rank;
  meta->world = (int32_t)plan->grid.world;
  meta->tp_rank = (int32_t)rk.tp_rank;
  meta->pp_rank = (int32_t)rk.stage;
  meta->dp_rank = (int32_t)rk.wdp_rank; /* the index in the DP x CP group: which ZeRO shard */
}

cJSON *px_reshard_record(const px_plan *plan) { return px_planfile_to_json(&plan->model, &plan->cluster, &plan->par); }

static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
  if (*used >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *used, cap - *used, fmt, ap);
  va_end(ap);
  if (k > 0) *used += (size_t)k;
}

void px_reshard_describe(const px_plan *plan, char *buf, size_t cap) {
  const px_parallel *p = &plan->par;
  size_t n = 0;
  if (!cap) return;
  buf[0] = '\0';
  append(buf, cap, &n, "tp %lld x pp %lld", (long long)p->tp, (long long)p->pp);
  if (p->cp > 1) append(buf, cap, &n, " x cp %lld", (long long)p->cp);
  append(buf, cap, &n, " x dp %lld", (long long)p->dp);
  if (p->ep > 1) append(buf, cap, &n, ", ep %lld", (long long)p->ep);
  append(buf, cap, &n, ", ZeRO-%d", (int)p->zero);
  if (px_parallel_hybrid(p)) append(buf, cap, &n, " in shard groups of %lld", (long long)p->shard_group);
  append(buf, cap, &n, ", %s", px_precision_names[p->precision]);
  if (p->precision == PX_PREC_FP8)
    append(buf, cap, &n, " (%s, %s base)", px_fp8_recipe_names[p->fp8_recipe], px_fp8_base_names[p->fp8_base]);
  char ft[160];
  append(buf, cap, &n, "%s", px_lora_describe(p, ft, sizeof ft)); /* ", full fine-tuning", ", lora rank 4 on ..." */
  append(buf, cap, &n, ", %lld rank%s", (long long)plan->grid.world, plan->grid.world == 1 ? "" : "s");
}

/* A manifest's plan record, read as a plan file. */
static px_status read_record(const px_ckpt_manifest *man, const char *manifest, px_planfile *pf, px_err *err) {
  if (!man->plan)
    return px_err_set(err, PX_ERR_INPUT, "%s: records no plan (checkpoint format version %d, from before "
                      "resharding): it resumes only the plan that wrote it", manifest, (int)man->version);
  char where[4300];
  snprintf(where, sizeof where, "%s: field 'plan'", manifest);
  /* a plan file, and an adapters' checkpoint's frozen base's hash beside it */
  cJSON *rec = cJSON_Duplicate(man->plan, true);
  if (!rec) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  cJSON_DeleteItemFromObjectCaseSensitive(rec, PX_RESHARD_FROZEN_HASH);
  px_status st = px_planfile_from_json(rec, where, pf, err);
  cJSON_Delete(rec);
  if (!st && (!pf->has_model || !pf->has_cluster || pf->gpus < 1))
    st = px_err_set(err, PX_ERR_INPUT, "%s: the plan record lacks its model, cluster or gpus", where);
  return st;
}

px_status px_reshard_recorded(const char *dir, px_planfile *pf, px_err *err) {
  px_ckpt_manifest man;
  char manifest[4200];
  snprintf(manifest, sizeof manifest, "%s/%s", dir ? dir : "", PX_CKPT_MANIFEST);
  px_status st = px_ckpt_read_manifest(dir, &man, err);
  if (st) return st;
  st = read_record(&man, manifest, pf, err);
  px_ckpt_manifest_deinit(&man);
  return st;
}

/* ---- an old checkpoint opened for another plan ---- */

/* Where an old state holds canonical elements [canon, canon + n): elements
 * [at, at + n) of that state on old rank `rank`. */
typedef struct {
  uint64_t canon, n, at;
  int32_t rank;
} src_span;

/* Per state kind, every canonical element's first holder (lowest old rank),
 * by increasing canon, without overlaps. */
typedef struct {
  src_span *s;
  uint64_t n;
  bool built;
} src_index;

struct px_reshard {
  char dir[4096], manifest[4200];
  const px_plan *to;
  px_plan from;
  bool have_from;
  px_ckpt_manifest man;
  px_global_params g;
  px_ckpt_shard **shards; /* (old world) */
  uint64_t *used;         /* (old world) when each was last read; 0: parked */
  uint64_t tick;
  int64_t open_n;
  bool old_master;        /* the old plan keeps fp32 master weights: the weights' source */
  src_index src[PX_STATE_COUNT];
  px_amax_key **old_keys; /* (old pp) each old stage's fp8 amax history keys (px_param_amax_keys), made on first use */
  int64_t *old_nkeys;
  bool amax_fresh;        /* some new fp8 amax history had no old one to take */
};

int64_t px_reshard_step(const px_reshard *r) { return r->man.step; }
bool px_reshard_amax_fresh(const px_reshard *r) { return r->amax_fresh; }
const px_plan *px_reshard_from(const px_reshard *r) { return &r->from; }

void px_reshard_free(px_reshard *r) {
  if (!r) return;
  for (int32_t q = 0; r->shards && q < r->man.world; q++) px_ckpt_shard_close(r->shards[q]);
  free(r->shards);
  free(r->used);
  for (int k = 0; k < PX_STATE_COUNT; k++) free(r->src[k].s);
  for (int64_t s = 0; r->old_keys && s < r->from.par.pp; s++) free(r->old_keys[s]);
  free(r->old_keys);
  free(r->old_nkeys);
  px_global_params_free(&r->g);
  if (r->have_from) px_plan_free(&r->from);
  px_ckpt_manifest_deinit(&r->man);
  free(r);
}

/* The plan that wrote the checkpoint, compiled again from its record, and
 * checked to be that plan (its hashes). */
static px_status rebuild_old_plan(px_reshard *r, px_err *err) {
  char where[4300];
  snprintf(where, sizeof where, "%s: field 'plan'", r->manifest);
  px_planfile *pf = px_calloc(1, sizeof *pf, err);
  if (!pf) return PX_ERR_RUNTIME;
  px_status st = read_record(&r->man, r->manifest, pf, err);
  px_cluster c;
  if (!st) {
    c = pf->cluster;
    st = px_cluster_set_size(&c, pf->gpus, 0, err);
  }
  if (!st) {
    px_parallel_resolve(&pf->par, &pf->model, &c); /* fields a record might lack: defaults, as run has them */
    st = px_plan_compile(&r->from, &pf->model, &c, &pf->par, err);
    if (st) px_err_prefix(err, "%s: the plan that wrote the checkpoint does not compile", where);
    else r->have_from = true;
  }
  free(pf);
  if (st) return st;
  uint64_t ph, mh;
  px_reshard_hashes(&r->from, &ph, &mh);
  if (ph != r->man.plan_hash || mh != r->man.model_hash)
    return px_err_set(err, PX_ERR_INPUT, "%s: the plan recorded is not the plan that wrote the checkpoint (it "
                      "hashes to plan 0x%016" PRIx64 " and model 0x%016" PRIx64 ", the checkpoint's are 0x%016" PRIx64
                      " and 0x%016" PRIx64 ")", where, ph, mh, r->man.plan_hash, r->man.model_hash);
  return PX_OK;
}

/* Opens and indexes old shard q, and checks it holds the states its plan gives it, sized by that plan's layout. */
static px_status open_shard(px_reshard *r, int32_t q, bool verify, px_err *err) {
  px_status st = px_ckpt_shard_open(r->dir, q, verify, &r->shards[q], err);
  if (st) return st;
  px_ckpt_shard_park(r->shards[q]);
  char path[4200];
  px_ckpt_shard_path(r->dir, q, path, sizeof path, err);
  px_param_rank rk;
  px_param_rank_of(&r->from, q, &rk);
  px_param_state ps[PX_STATE_COUNT];
  int k = px_param_states(&r->from, rk.stage, ps);
  for (int i = 0; i < k; i++) {
    const char *name = px_state_names[ps[i].kind];
    uint64_t count = 0;
    int t = px_ckpt_shard_find(r->shards[q], name, &count);
    if (t < 0 && ps[i].kind == PX_STATE_FP8_AMAX) continue; /* a checkpoint from before they were kept */
    if (t < 0)
      return px_err_set(err, PX_ERR_INPUT, "%s: holds no '%s', which its plan keeps on that rank", path, name);
    if (count != ps[i].count)
      return px_err_set(err, PX_ERR_INPUT, "%s: its '%s' has %" PRIu64 " elements, its plan's layout %" PRIu64
                        " (a shard of another plan?)", path, name, count, ps[i].count);
  }
  return PX_OK;
}

/* What a checkpoint is opened for: re-split for another plan (px_reshard_open), as the frozen base of one
 * (px_reshard_open_base), or its adapters read for merging (px_reshard_open_adapters: `to` is its own plan). */
typedef enum { OPEN_RESPLIT, OPEN_BASE, OPEN_ADAPTERS } open_mode;

static px_status open_for(const char *dir, const px_plan *to, open_mode mode, int64_t verify_rank, int64_t verify_ranks,
                          px_reshard **out, px_err *err) {
  *out = NULL;
  bool base = mode == OPEN_BASE, adapters = mode == OPEN_ADAPTERS;
  if (mode == OPEN_RESPLIT && px_parallel_lora(&to->par)) /* its checkpoints hold the adapters alone, resumed by the plan that wrote them */
    return px_err_set(err, PX_ERR_INPUT, "`finetune` %s: a checkpoint is not re-split into a plan with adapters on a "
                      "frozen base (its adapters' states are resumed by the plan that wrote them; a full run's "
                      "checkpoint is read as the base by `base_ckpt`) (hint: the checkpoint's own plan)",
                      px_finetune_names[to->par.finetune]);
  if (base && !px_parallel_lora(&to->par))
    return px_err_set(err, PX_ERR_INPUT, "`base_ckpt` is the frozen base of a fine-tuning run with adapters: it needs "
                      "`finetune` lora (hint: `resume` goes on from a checkpoint)");
  px_reshard *r = px_calloc(1, sizeof *r, err);
  if (!r) return PX_ERR_RUNTIME;
  r->to = to;
  snprintf(r->dir, sizeof r->dir, "%s", dir ? dir : "");
  snprintf(r->manifest, sizeof r->manifest, "%s/%s", r->dir, PX_CKPT_MANIFEST);
  px_status st = px_ckpt_read_manifest(dir, &r->man, err);
  uint64_t ph, mh;
  if (to) px_reshard_hashes(to, &ph, &mh);
  if (!st && to && r->man.model_hash != mh)
    st = px_err_set(err, PX_ERR_INPUT, "%s: a checkpoint of another model (model hash 0x%016" PRIx64
                    ", this plan's 0x%016" PRIx64 "): its states fit only a plan of the same model", r->manifest,
                    r->man.model_hash, mh);
  bool has_adapters = r->man.plan && cJSON_GetObjectItemCaseSensitive(r->man.plan, PX_RESHARD_FROZEN_HASH);
  if (!st && adapters && !has_adapters)
    st = px_err_set(err, PX_ERR_INPUT, "%s: holds no adapters (its plan records no `finetune` lora and no frozen "
                    "base's hash): merging takes the checkpoint of a fine-tuning run with adapters", r->manifest);
  if (!st && !adapters && has_adapters)
    st = px_err_set(err, PX_ERR_INPUT, "%s: holds the adapters of a fine-tuning run (`finetune` lora) and not its "
                    "frozen base: only the plan that wrote it resumes it, no other plan is re-split from it%s",
                    r->manifest, base ? " and it is no base (hint: a pre-training or full fine-tuning run's)" : "");
  if (!st) st = rebuild_old_plan(r, err);
  if (!st && adapters) r->to = to = &r->from;
  if (!st && r->from.par.mtp_layers != to->par.mtp_layers) /* the canonical layout holds the MTP module's tensors */
    st = px_err_set(err, PX_ERR_INPUT, "%s: written by a plan training %lld MTP modules, this plan trains %lld: the "
                    "states of one are not the other's (hint: `mtp_layers` %lld)", r->manifest,
                    (long long)r->from.par.mtp_layers, (long long)to->par.mtp_layers, (long long)r->from.par.mtp_layers);
  if (!st && mode == OPEN_RESPLIT && (r->from.act_dtype == PX_DTYPE_FP16) != (to->act_dtype == PX_DTYPE_FP16))
    st = px_err_set(err, PX_ERR_INPUT, "%s: written by a plan in %s, this plan is in %s: fp16's loss scaler (its "
                    "scale and count of optimizer steps) has no counterpart in the other precision (hint: "
                    "`precision` %s)", r->manifest, px_precision_names[r->from.par.precision],
                    px_precision_names[to->par.precision], px_precision_names[r->from.par.precision]);
  if (!st) st = px_global_params_build(&to->model, to->par.mtp_layers, &r->g, err);
  if (!st && adapters) st = px_global_params_add_adapters(to, &r->g, err);
  if (!st) {
    r->shards = px_calloc((size_t)r->man.world, sizeof *r->shards, err);
    r->used = px_calloc((size_t)r->man.world, sizeof *r->used, err);
    if (!r->shards || !r->used) st = PX_ERR_RUNTIME;
  }
  for (int32_t q = 0; !st && q < r->man.world; q++)
    st = open_shard(r, q, verify_ranks <= 1 || q % verify_ranks == verify_rank, err);
  if (!st) {
    px_param_state ps[PX_STATE_COUNT];
    int k = px_param_states(&r->from, 0, ps);
    for (int i = 0; i < k; i++) r->old_master |= ps[i].kind == PX_STATE_MASTER;
  }
  if (st) {
    px_reshard_free(r);
    return st;
  }
  *out = r;
  return PX_OK;
}

px_status px_reshard_open(const char *dir, const px_plan *to, int64_t verify_rank, int64_t verify_ranks,
                          px_reshard **out, px_err *err) {
  return open_for(dir, to, OPEN_RESPLIT, verify_rank, verify_ranks, out, err);
}

px_status px_reshard_open_base(const char *dir, const px_plan *to, int64_t verify_rank, int64_t verify_ranks,
                               px_reshard **out, px_err *err) {
  return open_for(dir, to, OPEN_BASE, verify_rank, verify_ranks, out, err);
}

px_status px_reshard_open_adapters(const char *dir, px_reshard **out, px_err *err) {
  return open_for(dir, NULL, OPEN_ADAPTERS, 0, 1, out, err);
}

const px_global_params *px_reshard_global(const px_reshard *r) { return &r->g; }

px_status px_reshard_frozen_hash(const px_reshard *r, uint64_t *hash, px_err *err) {
  const cJSON *h = r->man.plan ? cJSON_GetObjectItemCaseSensitive(r->man.plan, PX_RESHARD_FROZEN_HASH) : NULL;
  char *end = NULL;
  unsigned long long v = cJSON_IsString(h) ? strtoull(h->valuestring, &end, 16) : 0;
  if (!cJSON_IsString(h) || strncmp(h->valuestring, "0x", 2) || !end || *end || strlen(h->valuestring) != 18)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'plan.%s' is not \"0x\" and 16 hex digits", r->manifest,
                      PX_RESHARD_FROZEN_HASH);
  *hash = v;
  return PX_OK;
}

/* Old shard q, opened again if it was parked (parking the least recently read beyond the limit). */
static px_ckpt_shard *shard_at(px_reshard *r, int32_t q) {
  if (!r->used[q]) {
    if (r->open_n >= OPEN_SHARDS_MAX) {
      int32_t lru = -1;
      for (int32_t i = 0; i < r->man.world; i++)
        if (r->used[i] && (lru < 0 || r->used[i] < r->used[lru])) lru = i;
      px_ckpt_shard_park(r->shards[lru]);
      r->used[lru] = 0;
      r->open_n--;
    }
    r->open_n++;
  }
  r->used[q] = ++r->tick;
  return r->shards[q];
}

static int src_by_canon(const void *a, const void *b) {
  const src_span *x = a, *y = b;
  if (x->canon != y->canon) return x->canon < y->canon ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The index of state `kind` over every old rank. */
static px_status src_build(px_reshard *r, px_state_kind kind, px_err *err) {
  src_index *x = &r->src[kind];
  if (x->built) return PX_OK;
  uint64_t cap = 0;
  px_status st = PX_OK;
  for (int32_t q = 0; q < r->man.world && !st; q++) {
    px_param_rank rk;
    px_param_rank_of(&r->from, q, &rk);
    px_param_state ps[PX_STATE_COUNT];
    int k = px_param_states(&r->from, rk.stage, ps);
    px_param_view view = PX_VIEW_NONE;
    for (int i = 0; i < k; i++)
      if (ps[i].kind == kind) view = ps[i].view;
    px_param_span *sp = NULL;
    uint64_t n = 0;
    if ((st = px_param_spans(&r->from, &r->g, &rk, view, &sp, &n, err))) break;
    if (x->n + n > cap) {
      uint64_t ncap = (x->n + n) * 2;
      src_span *ns = realloc(x->s, ncap * sizeof *ns + 1);
      if (!ns) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      else x->s = ns, cap = ncap;
    }
    for (uint64_t i = 0; !st && i < n; i++) x->s[x->n++] = (src_span){sp[i].canon, sp[i].n, sp[i].at, q};
    free(sp);
  }
  if (st) return st;
  qsort(x->s, (size_t)x->n, sizeof *x->s, src_by_canon);
  /* the first holder of each element: later spans lose what an earlier one covers */
  uint64_t kept = 0, covered = 0;
  for (uint64_t i = 0; i < x->n; i++) {
    src_span s = x->s[i];
    if (s.canon + s.n <= covered) continue;
    if (s.canon < covered) {
      uint64_t cut = covered - s.canon;
      s.canon += cut, s.at += cut, s.n -= cut;
    }
    x->s[kept++] = s;
    covered = s.canon + s.n;
  }
  x->n = kept;
  x->built = true;
  return PX_OK;
}

/* The canonical tensor holding element canon, for messages. */
static const char *canon_tensor(const px_reshard *r, uint64_t canon) {
  for (int64_t i = r->g.n - 1; i >= 0; i--)
    if (r->g.t[i].offset <= canon && r->g.t[i].rows * r->g.t[i].cols > 0) return r->g.t[i].name;
  return "?";
}

/* Canonical elements [canon, canon + n) of old state `kind` into out (n). */
static px_status copy_canon(px_reshard *r, px_state_kind kind, uint64_t canon, uint64_t n, float *out, px_err *err) {
  const src_index *x = &r->src[kind];
  uint64_t lo = 0, hi = x->n;
  while (lo < hi) { /* the first span ending after canon */
    uint64_t mid = lo + (hi - lo) / 2;
    if (x->s[mid].canon + x->s[mid].n <= canon) lo = mid + 1;
    else hi = mid;
  }
  const char *name = px_state_names[kind];
  for (uint64_t k = lo; n; k++) {
    if (k >= x->n || x->s[k].canon > canon)
      return px_err_set(err, PX_ERR_RUNTIME, "internal: no rank of the checkpoint's plan holds element %" PRIu64
                        " of the canonical layout (in %s) in its '%s'", canon, canon_tensor(r, canon), name);
    const src_span *s = &x->s[k];
    uint64_t take = s->canon + s->n - canon;
    if (take > n) take = n;
    px_ckpt_shard *sh = shard_at(r, s->rank);
    px_status st = px_ckpt_shard_read(sh, px_ckpt_shard_find(sh, name, NULL), s->at + (canon - s->canon), take, out, err);
    if (st) return st;
    out += take, canon += take, n -= take;
  }
  return PX_OK;
}

px_status px_reshard_weights(px_reshard *r, uint64_t canon, uint64_t n, float *out, px_err *err) {
  px_state_kind src = r->old_master ? PX_STATE_MASTER : PX_STATE_PARAMS;
  px_status st = src_build(r, src, err);
  return st ? st : copy_canon(r, src, canon, n, out, err);
}

/* ---- fp8 amax histories ---- */

/* Each old stage's fp8 amax history keys, once. */
static px_status old_keys(px_reshard *r, px_err *err) {
  if (r->old_keys) return PX_OK;
  int64_t pp = r->from.par.pp;
  r->old_keys = px_calloc((size_t)pp, sizeof *r->old_keys, err);
  r->old_nkeys = px_calloc((size_t)pp, sizeof *r->old_nkeys, err);
  for (int64_t s = 0; r->old_keys && r->old_nkeys && s < pp; s++) {
    int64_t n = px_param_amax_keys(&r->from, s, NULL, 0);
    if (!(r->old_keys[s] = px_calloc((size_t)n + 1, sizeof **r->old_keys, err))) return PX_ERR_RUNTIME;
    r->old_nkeys[s] = px_param_amax_keys(&r->from, s, r->old_keys[s], n);
  }
  return r->old_keys && r->old_nkeys ? PX_OK : PX_ERR_RUNTIME;
}

/* The index of the history of slot `name`, layer `layer` among old stage s's keys (ordered by layer, then
 * slot); -1 when it keeps none. */
static int64_t old_key(const px_reshard *r, int64_t s, const char *name, int64_t layer) {
  const px_amax_key *k = r->old_keys[s];
  int64_t lo = 0, hi = r->old_nkeys[s];
  while (lo < hi) { /* the first key of the layer */
    int64_t mid = lo + (hi - lo) / 2;
    if (k[mid].layer < layer) lo = mid + 1;
    else hi = mid;
  }
  for (; lo < r->old_nkeys[s] && k[lo].layer == layer; lo++)
    if (!strcmp(r->from.slots[k[lo].slot].name, name)) return lo;
  return -1;
}

/* The fp8 amax histories of a rank rk of the new plan, by tensor (slot name) and global layer: the old
 * histories of that tensor and layer, elementwise the largest, of the old ranks at rk's place along each
 * axis whose degree the plans share (TP; DP x CP x EP together), and of every place along one that
 * changes. Casts' amaxes are reduced over TP (and EP), so equal there; a weight's is its TP shard's; an
 * activation's covers the rank's DP x CP share of the batch. So a rank's histories are its own where
 * its place keeps its meaning (a PP or ZeRO change), exact where an axis collapses to 1 (the whole
 * weight, the whole batch), and elsewhere the largest over the whole: a scale never too large, at
 * worst a little coarse until the history turns over. A history no old rank holds (a plan without
 * delayed scaling, a checkpoint from before they were kept) starts afresh: zeros. */
static px_status fill_amax(px_reshard *r, const px_param_rank *rk, float *data, uint64_t count, px_err *err) {
  const px_plan *to = r->to, *from = &r->from;
  int64_t n = px_param_amax_keys(to, rk->stage, NULL, 0);
  if ((uint64_t)n * PX_FP8_AMAX_HISTORY != count)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: %" PRIu64 " fp8 amax elements for %lld keys", count, (long long)n);
  bool same_tp = from->par.tp == to->par.tp;
  bool same_data = from->par.dp == to->par.dp && from->par.cp == to->par.cp && from->par.ep == to->par.ep;
  px_amax_key *keys = px_calloc((size_t)n + 1, sizeof *keys, err);
  int32_t *srcs = px_calloc((size_t)r->man.world + 1, sizeof *srcs, err); /* the old ranks at rk's place */
  int64_t *stage_of = px_calloc((size_t)r->man.world + 1, sizeof *stage_of, err);
  float *h = px_calloc(PX_FP8_AMAX_HISTORY, sizeof *h, err);
  px_status st = keys && srcs && stage_of && h ? old_keys(r, err) : PX_ERR_RUNTIME;
  int32_t nsrc = 0;
  for (int32_t q = 0; !st && q < r->man.world; q++) {
    px_param_rank o;
    px_param_rank_of(from, q, &o);
    if ((same_tp && o.tp_rank != rk->tp_rank) || (same_data && o.wdp_rank != rk->wdp_rank)) continue;
    stage_of[nsrc] = o.stage;
    srcs[nsrc++] = q;
  }
  if (!st) px_param_amax_keys(to, rk->stage, keys, n);
  const char *name = px_state_names[PX_STATE_FP8_AMAX];
  for (int64_t i = 0; !st && i < n; i++) {
    float *out = data + (uint64_t)i * PX_FP8_AMAX_HISTORY;
    const char *slot = to->slots[keys[i].slot].name;
    bool found = false;
    for (int32_t j = 0; !st && j < nsrc; j++) {
      int64_t at = old_key(r, stage_of[j], slot, keys[i].layer);
      px_ckpt_shard *sh = at >= 0 ? shard_at(r, srcs[j]) : NULL;
      int t = sh ? px_ckpt_shard_find(sh, name, NULL) : -1;
      if (t < 0) continue;
      st = px_ckpt_shard_read(sh, t, (uint64_t)at * PX_FP8_AMAX_HISTORY, PX_FP8_AMAX_HISTORY, h, err);
      for (int e = 0; !st && e < PX_FP8_AMAX_HISTORY; e++) /* out starts at zeros */
        if (h[e] > out[e]) out[e] = h[e];
      found = true;
    }
    if (!found) r->amax_fresh = true;
  }
  free(keys), free(srcs), free(stage_of), free(h);
  return st;
}

px_status px_reshard_fill(px_reshard *r, int64_t rank, px_ckpt_tensor *tensors, int n, px_err *err) {
  const px_plan *to = r->to;
  if (rank < 0 || rank >= to->grid.world)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: rank %lld of a plan of %lld", (long long)rank,
                      (long long)to->grid.world);
  px_param_rank rk;
  px_param_rank_of(to, rank, &rk);
  px_param_state ps[PX_STATE_COUNT];
  int k = px_param_states(to, rk.stage, ps);
  if (n != k) return px_err_set(err, PX_ERR_RUNTIME, "internal: %d states to fill, the plan has %d", n, k);
  for (int i = 0; i < k; i++)
    if (strcmp(tensors[i].name, px_state_names[ps[i].kind]) != 0 || tensors[i].count != ps[i].count)
      return px_err_set(err, PX_ERR_RUNTIME, "internal: state %d is '%s' of %" PRIu64 ", the plan's is '%s' of %" PRIu64,
                        i, tensors[i].name, tensors[i].count, px_state_names[ps[i].kind], ps[i].count);
  px_status st = PX_OK;
  for (int i = 0; i < k && !st; i++) {
    float *data = tensors[i].data;
    memset(data, 0, ps[i].count * sizeof *data);
    if (ps[i].kind == PX_STATE_LOSS_SCALER) { /* the same on every rank: old rank 0's */
      px_ckpt_shard *sh = shard_at(r, 0);
      uint64_t count = 0;
      int t = px_ckpt_shard_find(sh, px_state_names[PX_STATE_LOSS_SCALER], &count);
      st = count == ps[i].count ? px_ckpt_shard_read(sh, t, 0, count, data, err)
                                : px_err_set(err, PX_ERR_RUNTIME, "internal: loss scaler of %" PRIu64 " elements", count);
      continue;
    }
    if (ps[i].kind == PX_STATE_FP8_AMAX) {
      st = fill_amax(r, &rk, data, ps[i].count, err);
      continue;
    }
    px_state_kind src = ps[i].kind;
    if (src == PX_STATE_PARAMS || src == PX_STATE_MASTER) src = r->old_master ? PX_STATE_MASTER : PX_STATE_PARAMS;
    px_param_span *sp = NULL;
    uint64_t nsp = 0;
    /* every element the new state holds, its non-owned ones too (current: what its next gather would bring) */
    px_param_view view = ps[i].view == PX_VIEW_FLAT_OWNED ? PX_VIEW_FLAT : ps[i].view;
    if (!(st = src_build(r, src, err))) st = px_param_spans(to, &r->g, &rk, view, &sp, &nsp, err);
    for (uint64_t j = 0; !st && j < nsp; j++) st = copy_canon(r, src, sp[j].canon, sp[j].n, data + sp[j].at, err);
    free(sp);
    if (!st && ps[i].kind == PX_STATE_PARAMS && px_dtype_bytes(ps[i].dtype) < 4) {
      /* what the optimizer leaves there: the fp32 weight rounded to the parameter dtype */
      void *raw = malloc(ps[i].count * px_dtype_bytes(ps[i].dtype) + 1);
      if (!raw) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      else {
        px_dtype_from_fp32(raw, ps[i].dtype, data, ps[i].count);
        px_dtype_to_fp32(data, raw, ps[i].dtype, ps[i].count);
        free(raw);
      }
    }
  }
  return st;
}

px_status px_reshard_fill_base(px_reshard *r, int64_t rank, float *data, uint64_t n, px_err *err) {
  const px_plan *to = r->to;
  px_param_rank rk;
  px_param_rank_of(to, rank, &rk);
  if (n != to->programs[rk.stage].frozen_elems)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: %" PRIu64 " frozen weights to fill, the plan's %" PRIu64, n,
                      to->programs[rk.stage].frozen_elems);
  memset(data, 0, n * sizeof *data);
  px_param_span *sp = NULL;
  uint64_t nsp = 0;
  px_status st = px_param_frozen_spans(to, &r->g, &rk, &sp, &nsp, err);
  for (uint64_t j = 0; !st && j < nsp; j++) st = px_reshard_weights(r, sp[j].canon, sp[j].n, data + sp[j].at, err);
  free(sp);
  return st;
}

static px_status fill_resplit(void *r, int64_t rank, px_ckpt_tensor *tensors, int n, px_err *err) {
  return px_reshard_fill(r, rank, tensors, n, err);
}

px_status px_reshard_write(px_reshard *r, const char *dir, uint64_t *bytes_out, px_err *err) {
  return px_reshard_write_states(r->to, r->man.step, fill_resplit, r, dir, bytes_out, err);
}

px_status px_reshard_write_states(const px_plan *to, int64_t step, px_reshard_filler fill, void *ctx, const char *dir,
                                  uint64_t *bytes_out, px_err *err) {
  char staging[4096];
  px_ckpt_recovery what;
  px_status st = px_ckpt_recover(dir, &what, err);
  if (!st) st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  px_ckpt_tensor t[PX_STATE_COUNT] = {{0}};
  uint64_t cap[PX_STATE_COUNT] = {0}, bytes = 0;
  for (int64_t rank = 0; !st && rank < to->grid.world; rank++) {
    px_param_rank rk;
    px_param_rank_of(to, rank, &rk);
    px_param_state ps[PX_STATE_COUNT];
    int k = px_param_states(to, rk.stage, ps);
    bytes += PX_CKPT_HEADER_BYTES + 8;
    for (int i = 0; i < k && !st; i++) {
      if (ps[i].count > cap[i]) {
        float *nd = realloc(t[i].data, ps[i].count * sizeof *nd);
        if (!nd) {
          st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
          break;
        }
        t[i].data = nd, cap[i] = ps[i].count;
      }
      t[i].name = px_state_names[ps[i].kind];
      t[i].count = ps[i].count;
      bytes += 4 + strlen(t[i].name) + 8 + 4 * ps[i].count;
    }
    px_ckpt_meta meta;
    px_reshard_meta(to, rank, step, &meta);
    if (!st) st = fill(ctx, rank, t, k, err);
    if (!st) st = px_ckpt_write_shard(staging, &meta, t, k, err);
  }
  for (int i = 0; i < PX_STATE_COUNT; i++) free(t[i].data);
  if (st) return st;
  cJSON *record = px_reshard_record(to);
  if (!record) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_ckpt_meta meta;
  px_reshard_meta(to, 0, step, &meta);
  st = px_ckpt_commit_keep(dir, &meta, record, 0, true, err); /* it replaces what dir held, step-<N>/ too */
  cJSON_Delete(record);
  if (!st && bytes_out) *bytes_out = bytes;
  return st;
}
