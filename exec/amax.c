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
