/* parallax merge: adapters merged into their frozen base, written as a full checkpoint. */
#include "exec/merge.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "exec/params.h"
#include "exec/reshard.h"

struct px_merge {
  px_reshard *ad;            /* the adapters' checkpoint, open for its own plan */
  const px_plan *from;       /* its plan */
  const px_global_params *g; /* the canonical layout: the model's tensors, then the adapters' */
  uint64_t model_n;          /* canonical elements of the model's tensors (the adapters' follow) */
  float *canon;              /* (g->total) the merged model's weights, then the adapters' */
  int64_t count;             /* adapters merged */
  char base[4400];
  const px_plan *to;         /* of the write under way */
};

const px_plan *px_merge_from(const px_merge *m) { return m->from; }
int64_t px_merge_step(const px_merge *m) { return px_reshard_step(m->ad); }
int64_t px_merge_count(const px_merge *m) { return m->count; }
const char *px_merge_base(const px_merge *m) { return m->base; }

void px_merge_free(px_merge *m) {
  if (!m) return;
  px_reshard_free(m->ad);
  free(m->canon);
  free(m);
}

/* The base into m->canon[0, model_n): o->base_ckpt's weights, or the initialisation of o->seed. */
static px_status read_base(px_merge *m, const px_merge_opts *o, px_err *err) {
  const px_global_params *g = m->g;
  if (!o->base_ckpt) {
    for (int64_t t = 0; t < g->model_n; t++)
      for (uint64_t e = g->t[t].offset; e < g->t[t].offset + (uint64_t)(g->t[t].rows * g->t[t].cols); e++)
        m->canon[e] = px_param_init_value(g, t, e, o->seed);
    snprintf(m->base, sizeof m->base, "the initialisation of seed %" PRIu64, o->seed);
    return PX_OK;
  }
  px_reshard *b = NULL;
  px_status st = px_reshard_open_base(o->base_ckpt, m->from, 0, 1, &b, err);
  if (!st) st = px_reshard_weights(b, 0, m->model_n, m->canon, err);
  if (!st) {
    char from[256];
    px_reshard_describe(px_reshard_from(b), from, sizeof from);
    snprintf(m->base, sizeof m->base, "the weights of %s's checkpoint of step %lld (%s)", o->base_ckpt,
             (long long)px_reshard_step(b), from);
  }
  px_reshard_free(b);
  return st;
}

/* The base's hash as the adapters' run computed it: each rank's frozen buffer in its storage (px_exec_frozen_hash;
 * an nf4 or fp8 base quantised as the run quantised it, px_param_frozen_encode), summed over the ranks of its plan. */
static px_status base_hash(const px_merge *m, uint64_t *sum, px_err *err) {
  const px_plan *p = m->from;
  *sum = 0;
  px_status st = PX_OK;
  for (int64_t q = 0; q < p->grid.world && !st; q++) {
    px_param_rank rk;
    px_param_rank_of(p, q, &rk);
    uint64_t n = p->programs[rk.stage].frozen_elems, bytes = p->programs[rk.stage].frozen_bytes;
    if (!n) continue; /* no frozen buffer: the run's hash is 0 */
    float *w = px_calloc((size_t)n, sizeof *w, err); /* (n) the rank's frozen buffer, its padding zeros */
    char *raw = px_calloc((size_t)bytes, 1, err);
    px_param_span *sp = NULL;
    uint64_t nsp = 0;
    st = w && raw ? px_param_frozen_spans(p, m->g, &rk, &sp, &nsp, err) : PX_ERR_RUNTIME;
    for (uint64_t j = 0; !st && j < nsp; j++) memcpy(w + sp[j].at, m->canon + sp[j].canon, sp[j].n * sizeof *w);
    if (!st) st = px_param_frozen_encode(p, rk.stage, w, raw, NULL, err);
    if (!st) *sum += px_ckpt_hash_bytes(raw, (size_t)bytes, 0);
    free(sp), free(w), free(raw);
  }
  return st;
}

/* W += (alpha / r) B A for every adapter: B's rows over its weights' rows, one weight after another. */
static px_status merge_adapters(px_merge *m, px_err *err) {
  const px_global_params *g = m->g;
  const px_parallel *par = &m->from->par;
  double scale = par->lora_alpha / (double)par->lora_rank; /* as the run's (exec/env.c) */
  int64_t n = px_global_adapters(m->from, g, NULL, 0);
  px_global_adapter *ad = px_calloc((size_t)n + 1, sizeof *ad, err);
  if (!ad) return PX_ERR_RUNTIME;
  px_global_adapters(m->from, g, ad, n);
  px_status st = PX_OK;
  for (int64_t i = 0; i < n && !st; i++) {
    const px_global_tensor *A = &g->t[ad[i].a], *B = &g->t[ad[i].b];
    int64_t r = A->rows, in = A->cols, row = 0;
    const float *a = m->canon + A->offset, *b = m->canon + B->offset; /* (r, in), (out, r) */
    for (int k = 0; k < ad[i].nbase && !st; k++) {
      const px_global_tensor *W = &g->t[ad[i].base[k]];
      if (W->cols != in || row + W->rows > B->rows)
        st = px_err_set(err, PX_ERR_RUNTIME, "internal: adapter %s (%lld x %lld) does not fit %s (%lld x %lld)", B->name,
                        (long long)B->rows, (long long)in, W->name, (long long)W->rows, (long long)W->cols);
      float *w = m->canon + W->offset; /* (rows, in) */
      for (int64_t o = 0; !st && o < W->rows; o++, row++)
        for (int64_t c = 0; c < in; c++) {
          double d = 0;
          for (int64_t j = 0; j < r; j++) d += (double)b[row * r + j] * (double)a[j * in + c];
          w[o * in + c] = (float)((double)w[o * in + c] + scale * d);
        }
    }
    if (!st && row != B->rows)
      st = px_err_set(err, PX_ERR_RUNTIME, "internal: adapter %s has %lld rows, its weights %lld", B->name,
                      (long long)B->rows, (long long)row);
  }
  m->count = n;
  free(ad);
  return st;
}

px_status px_merge_open(const px_merge_opts *o, px_merge **out, px_err *err) {
  *out = NULL;
  px_merge *m = px_calloc(1, sizeof *m, err);
  if (!m) return PX_ERR_RUNTIME;
  px_status st = px_reshard_open_adapters(o->adapters, &m->ad, err);
  if (!st) {
    m->from = px_reshard_from(m->ad);
    m->g = px_reshard_global(m->ad);
    m->model_n = m->g->model_n < m->g->n ? m->g->t[m->g->model_n].offset : m->g->total;
    m->canon = px_calloc((size_t)m->g->total + 1, sizeof *m->canon, err);
    if (!m->canon) st = PX_ERR_RUNTIME;
  }
  /* the adapters as trained */
  if (!st) st = px_reshard_weights(m->ad, m->model_n, m->g->total - m->model_n, m->canon + m->model_n, err);
  if (!st) st = read_base(m, o, err);
  uint64_t want = 0, have = 0;
  if (!st) st = px_reshard_frozen_hash(m->ad, &want, err);
  if (!st) st = base_hash(m, &have, err);
  if (!st && have != want)
    st = px_err_set(err, PX_ERR_INPUT, "%s: its adapters were trained on another frozen base (frozen_base_hash "
                    "0x%016" PRIx64 "; %s hashes to 0x%016" PRIx64 "): give the `base_ckpt` or `seed` of the run that "
                    "trained them", o->adapters, want, m->base, have);
  if (!st) st = merge_adapters(m, err);
  if (st) {
    px_merge_free(m);
    return st;
  }
  *out = m;
  return PX_OK;
}

/* The states of world rank `rank` of m->to: the merged weights, the rest zero. */
static px_status fill_merged(void *ctx, int64_t rank, px_ckpt_tensor *t, int n, px_err *err) {
  px_merge *m = ctx;
  px_param_rank rk;
  px_param_rank_of(m->to, rank, &rk);
  px_param_state ps[PX_STATE_COUNT];
  int k = px_param_states(m->to, rk.stage, ps);
  if (n != k) return px_err_set(err, PX_ERR_RUNTIME, "internal: %d states to fill, the plan has %d", n, k);
  px_status st = PX_OK;
  for (int i = 0; i < k && !st; i++) {
    memset(t[i].data, 0, t[i].count * sizeof *t[i].data);
    if (ps[i].kind != PX_STATE_PARAMS && ps[i].kind != PX_STATE_MASTER) continue; /* Adam's moments, amax: none yet */
    px_param_span *sp = NULL;
    uint64_t nsp = 0;
    /* every element the state holds, its non-owned ones too (what its next gather would bring) */
    px_param_view view = ps[i].view == PX_VIEW_FLAT_OWNED ? PX_VIEW_FLAT : ps[i].view;
    st = px_param_spans(m->to, m->g, &rk, view, &sp, &nsp, err);
    for (uint64_t j = 0; !st && j < nsp; j++)
      memcpy(t[i].data + sp[j].at, m->canon + sp[j].canon, sp[j].n * sizeof *t[i].data);
    free(sp);
    if (!st && ps[i].kind == PX_STATE_PARAMS && px_dtype_bytes(ps[i].dtype) < 4) { /* rounded as the optimizer leaves it */
      void *raw = malloc(ps[i].count * px_dtype_bytes(ps[i].dtype) + 1);
      if (!raw) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      else {
        px_dtype_from_fp32(raw, ps[i].dtype, t[i].data, ps[i].count);
        px_dtype_to_fp32(t[i].data, raw, ps[i].dtype, ps[i].count);
        free(raw);
      }
    }
  }
  return st;
}

px_status px_merge_write(px_merge *m, const px_plan *to, const char *dir, uint64_t *bytes_out, px_err *err) {
  uint64_t ph, mh, fph, fmh;
  px_reshard_hashes(to, &ph, &mh);
  px_reshard_hashes(m->from, &fph, &fmh);
  if (mh != fmh)
    return px_err_set(err, PX_ERR_INPUT, "the adapters were trained on another model (%s): the merged checkpoint is "
                      "of a plan of that model", m->from->model.name);
  if (px_parallel_lora(&to->par))
    return px_err_set(err, PX_ERR_INPUT, "`finetune` %s: the merged checkpoint is of a plan that trains every weight "
                      "(`finetune` none or full)", px_finetune_names[to->par.finetune]);
  if (to->act_dtype == PX_DTYPE_FP16)
    return px_err_set(err, PX_ERR_INPUT, "`precision` fp16: its loss scaler has no state in the adapters' checkpoint "
                      "to start from (hint: `precision` %s)", px_precision_names[m->from->par.precision]);
  m->to = to;
  return px_reshard_write_states(to, px_reshard_step(m->ad), fill_merged, m, dir, bytes_out, err);
}
