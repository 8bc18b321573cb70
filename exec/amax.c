/* fp8 delayed scaling's amax histories (exec/amax.h). */
#include "exec/amax.h"

#include <stdlib.h>
#include <string.h>

#define H PX_FP8_AMAX_HISTORY

/* The history of one tensor: the amaxes of the steps before `step`, newest
 * at hist[at - 1] (n of them; the oldest at hist[(at - n) mod H]), and the
 * largest of this step's so far. */
typedef struct {
  px_amax_key k;
  int64_t step;
  float cur;
  int32_t n, at;
  float hist[H];
} history;

struct px_amax {
  history *h;
  int64_t n, cap;
};

/* ---- the keys a stage's program uses ---- */

/* The keys op o of an instance at `layer` uses under delayed scaling (at most PX_OP_INS + 1). */
static int op_keys(const px_plan *p, const px_op *o, int64_t layer, px_amax_key *k) {
  int n = 0;
  if (o->kind == PX_OP_CAST && o->out[0].slot >= 0) k[n++] = px_amax_cast_key(o, layer);
  for (int j = 0; j < PX_OP_INS && (o->flags & PX_OPF_FP8); j++) {
    int16_t s = o->in[j].slot;
    if (s >= 0 && p->slots[s].kind == PX_SLOT_PARAM && p->slots[s].fp8) k[n++] = px_amax_weight_key(s, layer);
  }
  return n;
}

/* Calls f on every key of the stage's program, in the instances of
 * micro-batch 0 and of none (every other micro-batch's repeat them). */
static void each_key(const px_plan *plan, int64_t stage, void (*f)(void *ctx, px_amax_key k), void *ctx) {
  const px_program *prog = &plan->programs[stage];
  for (int32_t i = 0; i < prog->ninsts; i++) {
    const px_inst *in = &prog->insts[i];
    if (in->mb > 0) continue;
    const px_op *ops = px_inst_ops(plan, prog, in);
    for (int32_t o = 0; o < plan->blocks[in->block].nops; o++) {
      px_amax_key k[PX_OP_INS + 1];
      int n = op_keys(plan, &ops[o], in->layer, k);
      for (int j = 0; j < n; j++) f(ctx, k[j]);
    }
  }
}

/* The layers the keys name, and for one of them the slots (px_ref's int16_t slots: 2^15 bits). */
typedef struct {
  int64_t lo, hi, layer;
  uint64_t seen[(1 << 15) / 64];
} key_walk;

static void key_range(void *ctx, px_amax_key k) {
  key_walk *w = ctx;
  if (k.layer < w->lo) w->lo = k.layer;
  if (k.layer > w->hi) w->hi = k.layer;
}

static void key_mark(void *ctx, px_amax_key k) {
  key_walk *w = ctx;
  if (k.layer == w->layer) w->seen[k.slot / 64] |= 1ull << (k.slot % 64);
}

int64_t px_amax_keys(const px_plan *plan, int64_t stage, px_amax_key *out, int64_t cap) {
  if (plan->par.precision != PX_PREC_FP8 || plan->par.fp8_recipe != PX_FP8_DELAYED) return 0;
  key_walk w = {.lo = INT64_MAX, .hi = INT64_MIN};
  each_key(plan, stage, key_range, &w);
  int64_t n = 0;
  for (w.layer = w.lo; w.layer <= w.hi; w.layer++) { /* layer by layer, in slot order */
    memset(w.seen, 0, sizeof w.seen);
    each_key(plan, stage, key_mark, &w);
    for (int32_t s = 0; s < plan->nslots; s++)
      if (w.seen[s / 64] >> (s % 64) & 1) {
        if (out && n < cap) out[n] = (px_amax_key){s, w.layer};
        n++;
      }
  }
  return n;
}

/* ---- the histories ---- */

px_amax *px_amax_new(void) { return calloc(1, sizeof(px_amax)); }

void px_amax_free(px_amax *t) {
  if (!t) return;
  free(t->h);
  free(t);
}

static history *find(const px_amax *t, px_amax_key k) {
  for (int64_t i = 0; i < t->n; i++)
    if (t->h[i].k.slot == k.slot && t->h[i].k.layer == k.layer) return &t->h[i];
  return NULL;
}

/* A new, empty history for k, before `step`. */
static history *add(px_amax *t, px_amax_key k, int64_t step, px_err *err) {
  if (t->n == t->cap) {
    int64_t cap = t->cap ? 2 * t->cap : 16;
    history *h = realloc(t->h, (size_t)cap * sizeof *h);
    if (!h) {
      px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      return NULL;
    }
    t->h = h, t->cap = cap;
  }
  history *h = &t->h[t->n++];
  memset(h, 0, sizeof *h);
  h->k = k, h->step = step;
  return h;
}

px_status px_amax_scale(px_amax *t, px_amax_key k, int64_t step, float amax, px_fp8_format f, float *scale,
                        px_err *err) {
  history *h = find(t, k);
  if (!h && !(h = add(t, k, step, err))) return PX_ERR_RUNTIME;
  if (h->step != step) { /* a new step: the last one's amax joins the history */
    h->hist[h->at] = h->cur;
    h->at = (h->at + 1) % H;
    if (h->n < H) h->n++;
    h->cur = 0.0f, h->step = step;
  }
  float past = 0.0f;
  for (int32_t i = 0; i < h->n; i++)
    if (h->hist[i] > past) past = h->hist[i];
  *scale = px_k_fp8_scale(past > 0.0f ? past : amax, f);
  if (amax > h->cur) h->cur = amax;
  return PX_OK;
}

px_status px_amax_save(const px_amax *t, const px_amax_key *keys, int64_t n, int64_t step, float *hist, px_err *err) {
  int64_t found = 0;
  for (int64_t i = 0; i < n; i++) {
    float *out = hist + i * H; /* (H) */
    memset(out, 0, H * sizeof *out);
    const history *h = find(t, keys[i]);
    if (!h) continue;
    found++;
    bool pending = h->step < step; /* its step's amax joins before `step` */
    int32_t m = h->n + pending < H ? h->n + (int32_t)pending : H, old = m - (int32_t)pending;
    float *o = out + (H - m);
    for (int32_t j = 0; j < old; j++) o[j] = h->hist[((h->at - old + j) % H + H) % H];
    if (pending) o[old] = h->cur;
  }
  for (int64_t i = 0; found < t->n && i < t->n; i++) {
    bool named = false;
    for (int64_t j = 0; j < n && !named; j++)
      named = keys[j].slot == t->h[i].k.slot && keys[j].layer == t->h[i].k.layer;
    if (!named)
      return px_err_set(err, PX_ERR_RUNTIME, "internal: the fp8 amax history of slot %d, layer %lld is not one the "
                        "plan's keys name (a checkpoint would lose it)", (int)t->h[i].k.slot,
                        (long long)t->h[i].k.layer);
  }
  return PX_OK;
}

px_status px_amax_load(px_amax *t, const px_amax_key *keys, int64_t n, int64_t step, const float *hist, px_err *err) {
  t->n = 0;
  for (int64_t i = 0; i < n; i++) {
    history *h = add(t, keys[i], step, err);
    if (!h) return PX_ERR_RUNTIME;
    memcpy(h->hist, hist + i * H, H * sizeof *h->hist);
    h->n = H, h->at = 0;
  }
  return PX_OK;
}
