/* Binary-heap event queue. */
#include "sim/engine.h"

#include <stdlib.h>

static bool ev_less(const px_event *x, const px_event *y) {
  return x->t_ns < y->t_ns || (x->t_ns == y->t_ns && x->seq < y->seq);
}

px_status px_engine_init(px_engine *e, uint64_t cap, px_err *err) {
  e->heap = px_calloc(cap ? cap : 64, sizeof *e->heap, err);
  e->n = 0;
  e->cap = cap ? cap : 64;
  e->next_seq = 0;
  e->now_ns = 0;
  e->processed = 0;
  return e->heap ? PX_OK : PX_ERR_RUNTIME;
}

void px_engine_deinit(px_engine *e) {
  free(e->heap);
  e->heap = NULL;
  e->n = e->cap = 0;
}

px_status px_engine_push(px_engine *e, uint64_t t_ns, uint32_t kind, uint32_t a, uint64_t b, px_err *err) {
  if (e->n == e->cap) {
    px_event *nh = realloc(e->heap, (size_t)e->cap * 2 * sizeof *nh);
    if (!nh) return px_err_set(err, PX_ERR_RUNTIME, "out of memory growing the event queue");
    e->heap = nh;
    e->cap *= 2;
  }
  px_event ev = {t_ns < e->now_ns ? e->now_ns : t_ns, e->next_seq++, kind, a, b};
  uint64_t i = e->n++;
  while (i > 0) {
    uint64_t parent = (i - 1) / 2;
    if (!ev_less(&ev, &e->heap[parent])) break;
    e->heap[i] = e->heap[parent];
    i = parent;
  }
  e->heap[i] = ev;
  return PX_OK;
}

/* Floyd's pop: the hole at the root goes down to a leaf along the lesser
 * children (one comparison a level), then the last event rises from there
 * (seldom far: it came from the bottom). */
bool px_engine_pop(px_engine *e, px_event *out) {
  if (e->n == 0) return false;
  *out = e->heap[0];
  uint64_t n = --e->n, i = 0;
  if (n > 0) {
    px_event last = e->heap[n];
    px_event *h = e->heap;
    for (uint64_t l; (l = 2 * i + 1) < n; i = l) {
      if (l + 1 < n && ev_less(&h[l + 1], &h[l])) l++;
      h[i] = h[l];
    }
    while (i > 0) {
      uint64_t parent = (i - 1) / 2;
      if (!ev_less(&last, &h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = last;
  }
  e->now_ns = out->t_ns;
  e->processed++;
  return true;
}
