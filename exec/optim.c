/* The optimizer: partial sums, the gradient norm and clipping, fp16's loss
 * scaling, AdamW on the device or the host. */
#include "exec/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "exec/offload.h"

void px_optim_init(px_optim *o, const px_train_hparams *hp, bool fp16) {
  memset(o, 0, sizeof *o);
  o->hp = *hp;
  o->scaling = fp16;
  o->scaler[0] = fp16 ? (hp->loss_scale > 0 ? hp->loss_scale : 65536.0f) : 1.0f;
}

px_status px_optim_range_op(px_backend *be, px_exec_op *e, px_op_kind kind, uint64_t count, px_err *err) {
  px_op op = {.kind = (uint8_t)kind};
  op.dim[0] = (int64_t)count;
  for (int j = 0; j < PX_OP_OUTS; j++) op.out[j] = (px_ref){-1, 0};
  for (int j = 0; j < PX_OP_INS; j++) op.in[j] = (px_ref){-1, 0}; /* no slots: gradient ranges */
  e->op = &op;
  e->count = (int64_t)count;
  px_status st = be->op(be, e, err);
  e->op = NULL;
  return st;
}

/* Adds the time since *t0 to op kind's, once the work is done when exact op times are wanted; restarts the clock. */
static px_status timed(px_backend *be, px_op_kind kind, double *t0, double op_s[PX_OP_COUNT], px_status st,
                       px_err *err) {
  if (!st && be->sync_ops) st = be->sync(be, err);
  double t = px_clock_s();
  op_s[kind] += t - *t0;
  *t0 = t;
  return st;
}

static bool offloaded(const px_optim_states *s) { return s->h_grads != NULL; }

px_status px_optim_sum_partials(px_backend *be, const px_optim_range *r, int32_t n, const px_optim_states *s,
                                double op_s[PX_OP_COUNT], px_err *err) {
  double t0 = px_clock_s();
  px_status st = PX_OK;
  for (int32_t i = 0; i < n && !st; i++) {
    if (!r[i].partial || !r[i].n) continue;
    if (offloaded(s)) /* in host memory */
      st = be->host_allreduce(be, PX_GROUP_TP, r[i].grad, r[i].n, PX_HOST_FLOAT, PX_RED_SUM, err);
    else
      st = be->allreduce(be, PX_GROUP_TP, r[i].grad, r[i].n, s->grad_dtype, PX_RED_SUM, err);
  }
  return timed(be, PX_OP_ALLREDUCE, &t0, op_s, st, err);
}

/* The sum of squares of the counted gradients over every rank, adjacent
 * ranges summed in one call (a device backend waits for each). */
static px_status grad_sumsq(px_backend *be, const px_exec_op *base, const px_optim_range *r, int32_t n,
                            const px_optim_states *s, double *sumsq, px_err *err) {
  uint64_t el = offloaded(s) ? sizeof(float) : px_dtype_bytes(s->grad_dtype);
  px_status st = PX_OK;
  char *run = NULL;
  uint64_t run_n = 0;
  *sumsq = 0;
  for (int32_t i = 0; i <= n && !st; i++) {
    if (i < n && (!r[i].counted || !r[i].n)) continue;
    char *g = i < n ? r[i].grad : NULL;
    if (run && g == run + run_n * el) {
      run_n += r[i].n;
      continue;
    }
    if (run && offloaded(s)) {
      for (uint64_t e = 0; e < run_n; e++) *sumsq += (double)((float *)run)[e] * ((float *)run)[e];
    } else if (run) {
      px_exec_op e = *base;
      e.in[0] = run, e.sumsq_out = sumsq;
      st = px_optim_range_op(be, &e, PX_OP_GRAD_NORM, run_n, err);
    }
    run = g, run_n = i < n ? r[i].n : 0;
  }
  /* a host scalar, once this rank's device work is done: a rank that counts no norm (another replica)
   * must not enter it with collectives of the step still queued that the others wait for */
  if (!st) st = be->sync(be, err);
  if (!st) st = be->host_allreduce(be, PX_GROUP_ALL, sumsq, 1, PX_HOST_DOUBLE, PX_RED_SUM, err);
  return st;
}

/* Offload's AdamW: the host's over each owned range in a helper thread
 * while this thread rounds each finished range to the parameter dtype and
 * copies it where the model reads it (the device's parameters, or the host's
 * parameter shard with the parameters offloaded). */
typedef struct {
  px_backend *be;
  const px_optim_range *r;
  const px_optim_states *s;
  char *conv; /* the largest range in the parameter dtype */
  double copy_s;
} host_step;

static px_status copy_back(void *ctx, int32_t i, px_err *err) {
  host_step *h = ctx;
  const px_optim_range *r = &h->r[i];
  const px_optim_states *s = h->s;
  uint64_t pb = px_dtype_bytes(s->param_dtype);
  double t0 = px_clock_s();
  px_status st = PX_OK;
  if (s->h_params) {
    px_dtype_from_fp32(s->h_params + r->at * pb, s->param_dtype, s->h_w + r->at, r->n);
  } else {
    px_dtype_from_fp32(h->conv, s->param_dtype, s->h_w + r->at, r->n);
    st = h->be->upload(h->be, s->params + r->model_at * pb, h->conv, r->n * pb, err);
    if (!st && h->be->sync_ops) st = h->be->sync(h->be, err);
  }
  h->copy_s += px_clock_s() - t0;
  return st;
}

static px_status host_adamw(px_optim *o, px_backend *be, const px_optim_range *r, int32_t n, const px_optim_states *s,
                            float scale, double op_s[PX_OP_COUNT], px_err *err) {
  px_host_range *ranges = px_calloc((size_t)n + 1, sizeof *ranges, err);
  px_optim_range *live = px_calloc((size_t)n + 1, sizeof *live, err); /* those with elements, as ranges[] */
  int32_t m = 0;
  uint64_t most = 0;
  for (int32_t i = 0; ranges && live && i < n; i++) {
    if (!r[i].n) continue;
    ranges[m] = (px_host_range){r[i].at, r[i].n, r[i].matrix ? o->hp.weight_decay : 0.0f};
    live[m++] = r[i];
    if (r[i].n > most) most = r[i].n;
  }
  host_step h = {.be = be, .r = live, .s = s, .conv = malloc(most * px_dtype_bytes(s->param_dtype) + 1)};
  px_status st = ranges && live && h.conv ? PX_OK : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_host_adamw_job job = {.w = s->h_w, .m = s->h_m, .v = s->h_v, .g = s->h_grads, .ranges = ranges, .nranges = m,
                           .lr = o->hp.lr, .beta1 = o->hp.beta1, .beta2 = o->hp.beta2, .eps = o->hp.eps,
                           .grad_scale = scale, .t = o->adam_t};
  double t0 = px_clock_s();
  if (!st && m) st = px_host_adamw(&job, copy_back, &h, err);
  op_s[PX_OP_ADAMW_HOST] += px_clock_s() - t0 - h.copy_s;
  op_s[PX_OP_COPY_H2D] += h.copy_s;
  free(ranges), free(live), free(h.conv);
  return st;
}

/* AdamW on the device, range by range; the model's copy of the owned part
 * is what it updates, or with mixed precision the fp32 master, whose
 * rounded result it writes there. */
static px_status device_adamw(px_optim *o, px_backend *be, const px_exec_op *base, const px_optim_range *r, int32_t n,
                              const px_optim_states *s, float scale, px_err *err) {
  uint64_t pb = px_dtype_bytes(s->param_dtype);
  px_status st = PX_OK;
  for (int32_t i = 0; i < n && !st; i++) {
    if (!r[i].n) continue;
    char *model = s->params + r[i].model_at * pb;
    px_exec_op e = *base;
    e.out[0] = s->master ? (void *)(s->master + r[i].at) : model;
    e.out[1] = s->adam_m + r[i].at, e.out[2] = s->adam_v + r[i].at;
    e.out[3] = s->master ? model : NULL;
    e.in[0] = r[i].grad;
    e.lr = o->hp.lr, e.beta1 = o->hp.beta1, e.beta2 = o->hp.beta2, e.eps = o->hp.eps;
    e.weight_decay = r[i].matrix ? o->hp.weight_decay : 0.0f, e.grad_scale = scale, e.adam_t = o->adam_t;
    st = px_optim_range_op(be, &e, PX_OP_ADAMW, r[i].n, err);
  }
  return st;
}

px_status px_optim_update(px_optim *o, px_backend *be, const px_exec_op *base, const px_optim_range *r, int32_t n,
                          const px_optim_states *s, int64_t step, double op_s[PX_OP_COUNT], px_err *err) {
  double t0 = px_clock_s(), sumsq = 0;
  px_status st = grad_sumsq(be, base, r, n, s, &sumsq, err);
  if (!st && o->scaling && !isfinite(sumsq)) { /* overflow: skip the step, halve the scale */
    o->scaler[0] = o->scaler[0] > 1.0f ? o->scaler[0] / 2 : 1.0f;
    o->scaler[1] = 0;
    o->skipped_steps++;
    o->grad_norm = NAN;
    return timed(be, PX_OP_GRAD_NORM, &t0, op_s, st, err);
  }
  double norm = sqrt(sumsq) / o->scaler[0];
  o->grad_norm = norm;
  /* the clipping factor, and the loss scale taken back out */
  float scale = o->hp.clip > 0 && norm > o->hp.clip ? (float)(o->hp.clip / norm) : 1.0f;
  scale = (float)(scale / o->scaler[0]);
  o->adam_t = o->scaling ? (int64_t)++o->scaler[2] : step + 1;
  st = timed(be, PX_OP_GRAD_NORM, &t0, op_s, st, err);
  if (!st && offloaded(s)) {
    st = host_adamw(o, be, r, n, s, scale, op_s, err);
  } else if (!st) {
    st = device_adamw(o, be, base, r, n, s, scale, err);
    st = timed(be, PX_OP_ADAMW, &t0, op_s, st, err);
  }
  if (o->scaling && ++o->scaler[1] >= PX_LOSS_SCALE_GROWTH_STEPS) {
    o->scaler[0] *= 2;
    o->scaler[1] = 0;
  }
  return st;
}
