/* Flows over shared link resources. */
#include "sim/network.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  px_flow_spec spec;
  double remaining; /* share of the transfer left, 1 -> 0 */
  double rate;      /* share per second */
  uint64_t last_ns, start_ns, due_ns, tag;
  uint32_t version, stamp;
  bool active, joined;
} flow;

struct px_net {
  px_engine *eng;
  uint32_t ev_join, ev_done;
  flow *flows;
  int32_t nflows, cap;
  int32_t *free_ids;
  int32_t nfree;
  int32_t nres;
  int32_t **on;   /* resource -> flows on it */
  int32_t *n_on, *cap_on;
  int32_t *claims; /* per resource: unfinished flows that use it */
  uint32_t stamp; /* one per re-rating pass, so a flow is rescheduled once */
  bool oom;
};

px_net *px_net_new(px_engine *eng, int32_t nres, uint32_t ev_join, uint32_t ev_done, px_err *err) {
  px_net *n = px_calloc(1, sizeof *n, err);
  if (!n) return NULL;
  n->eng = eng;
  n->ev_join = ev_join;
  n->ev_done = ev_done;
  n->nres = nres;
  n->on = px_calloc((size_t)nres, sizeof *n->on, err);
  n->n_on = px_calloc((size_t)nres, sizeof *n->n_on, err);
  n->cap_on = px_calloc((size_t)nres, sizeof *n->cap_on, err);
  n->claims = px_calloc((size_t)nres, sizeof *n->claims, err);
  if (!n->on || !n->n_on || !n->cap_on || !n->claims) {
    px_net_free(n);
    return NULL;
  }
  return n;
}

void px_net_free(px_net *n) {
  if (!n) return;
  for (int32_t r = 0; n->on && r < n->nres; r++) free(n->on[r]);
  free(n->on);
  free(n->n_on);
  free(n->cap_on);
  free(n->claims);
  free(n->flows);
  free(n->free_ids);
  free(n);
}

int32_t px_net_claims(const px_net *n, int32_t r) { return n->claims[r]; }

px_status px_net_status(const px_net *n, px_err *err) {
  return n->oom ? px_err_set(err, PX_ERR_RUNTIME, "out of memory in the network model") : PX_OK;
}

static void push(px_net *n, uint64_t t, uint32_t kind, int32_t id, uint64_t v) {
  n->flows[id].due_ns = t;
  if (px_engine_push(n->eng, t, kind, (uint32_t)id, v, NULL)) n->oom = true;
}

/* Schedules the flow's end at its rate under the current sharing. */
static void reschedule(px_net *n, int32_t id) {
  flow *f = &n->flows[id];
  double rate = INFINITY;
  for (int i = 0; i < f->spec.nres; i++) {
    double r = f->spec.bw[i] / (double)n->n_on[f->spec.res[i]] / f->spec.bytes[i];
    if (r < rate) rate = r;
  }
  f->rate = rate;
  f->version++;
  uint64_t dt = isfinite(rate) && rate > 0 ? px_ns(f->remaining / rate) : 0;
  push(n, n->eng->now_ns + dt, n->ev_done, id, f->version);
}

/* Progress up to now at the current rate. */
static void advance(px_net *n, flow *f) {
  double dt = (double)(n->eng->now_ns - f->last_ns) * 1e-9;
  if (isfinite(f->rate)) f->remaining -= f->rate * dt;
  if (f->remaining < 0) f->remaining = 0;
  f->last_ns = n->eng->now_ns;
}

/* Re-rates every flow sharing a resource with `id` (which joined or left). */
static void rerate(px_net *n, int32_t id) {
  const flow *f = &n->flows[id];
  n->stamp++;
  for (int i = 0; i < f->spec.nres; i++) {
    int32_t r = f->spec.res[i];
    for (int32_t k = 0; k < n->n_on[r]; k++) {
      int32_t o = n->on[r][k];
      if (n->flows[o].stamp == n->stamp) continue;
      n->flows[o].stamp = n->stamp;
      advance(n, &n->flows[o]);
      reschedule(n, o);
    }
  }
}

/* A fresh flow of spec (its claims counted); -1 on allocation failure. */
static int32_t flow_new(px_net *n, const px_flow_spec *spec, uint64_t tag) {
  int32_t id;
  uint32_t version = 0;
  if (n->nfree > 0) {
    id = n->free_ids[--n->nfree];
    /* versions go on across an id's flows: an end event left stale by a re-rating
     * of its last flow must not end this one */
    version = n->flows[id].version + 1;
  } else {
    if (n->nflows == n->cap) {
      int32_t cap = n->cap ? 2 * n->cap : 64;
      flow *nf = realloc(n->flows, (size_t)cap * sizeof *nf);
      if (nf) n->flows = nf;
      int32_t *ni = realloc(n->free_ids, (size_t)cap * sizeof *ni);
      if (ni) n->free_ids = ni;
      if (!nf || !ni) {
        n->oom = true;
        return -1;
      }
      n->cap = cap;
    }
    id = n->nflows++;
  }
  flow *f = &n->flows[id];
  memset(f, 0, sizeof *f);
  f->spec = *spec;
  f->tag = tag;
  f->remaining = 1.0;
  f->active = true;
  f->start_ns = n->eng->now_ns;
  f->version = version;
  for (int i = 0; i < spec->nres; i++) n->claims[spec->res[i]]++;
  return id;
}

int32_t px_net_start(px_net *n, const px_flow_spec *spec, uint64_t tag) {
  int32_t id = flow_new(n, spec, tag);
  if (id >= 0) push(n, n->eng->now_ns + px_ns(spec->latency_s), n->ev_join, id, 0);
  return id;
}

/* Puts a joined flow on its resources' lists; false on allocation failure. */
static bool attach(px_net *n, int32_t id) {
  const flow *f = &n->flows[id];
  for (int i = 0; i < f->spec.nres; i++) {
    int32_t r = f->spec.res[i];
    if (n->n_on[r] == n->cap_on[r]) {
      int32_t cap = n->cap_on[r] ? 2 * n->cap_on[r] : 8;
      int32_t *nv = realloc(n->on[r], (size_t)cap * sizeof *nv);
      if (!nv) {
        n->oom = true;
        return false;
      }
      n->on[r] = nv;
      n->cap_on[r] = cap;
    }
    n->on[r][n->n_on[r]++] = id;
  }
  return true;
}

void px_net_state(const px_net *n, int32_t id, px_flow_state *out) {
  const flow *f = &n->flows[id];
  *out = (px_flow_state){.remaining = f->remaining, .rate = f->rate, .start_ns = f->start_ns, .last_ns = f->last_ns,
                         .due_ns = f->due_ns, .joined = f->joined};
}

int32_t px_net_resume(px_net *n, const px_flow_spec *spec, uint64_t tag, const px_flow_state *st, uint64_t shift_ns) {
  int32_t id = flow_new(n, spec, tag);
  if (id < 0) return -1;
  flow *f = &n->flows[id];
  f->remaining = st->remaining;
  f->rate = st->rate;
  f->start_ns = st->start_ns + shift_ns;
  f->last_ns = st->last_ns + shift_ns;
  f->joined = st->joined; /* its version its own (fresh for the id), not the one it had */
  if (f->joined && spec->nres > 0 && !attach(n, id)) return -1;
  push(n, st->due_ns + shift_ns, f->joined ? n->ev_done : n->ev_join, id, f->version);
  return id;
}

void px_net_on_join(px_net *n, int32_t id) {
  flow *f = &n->flows[id];
  f->joined = true;
  f->last_ns = n->eng->now_ns;
  if (f->spec.nres == 0) { /* latency only */
    f->rate = INFINITY;
    f->version++;
    push(n, n->eng->now_ns, n->ev_done, id, f->version);
    return;
  }
  if (attach(n, id)) rerate(n, id);
}

bool px_net_on_done(px_net *n, int32_t id, uint64_t version, uint64_t *tag, uint64_t *start_ns) {
  flow *f = &n->flows[id];
  if (!f->active || !f->joined || f->version != (uint32_t)version) return false;
  f->active = false;
  for (int i = 0; i < f->spec.nres; i++) {
    int32_t r = f->spec.res[i];
    n->claims[r]--;
    for (int32_t k = 0; k < n->n_on[r]; k++)
      if (n->on[r][k] == id) {
        n->on[r][k] = n->on[r][--n->n_on[r]];
        break;
      }
  }
  rerate(n, id); /* the others on its resources speed up */
  *tag = f->tag;
  *start_ns = f->start_ns;
  n->free_ids[n->nfree++] = id;
  return true;
}
