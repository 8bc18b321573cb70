/* The interpreter of a stage's program. */
#include "exec/interp.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "core/fmt.h"
#include "exec/amax.h"
#include "exec/arena.h"
#include "exec/ckpt.h"
#include "exec/env.h"
#include "exec/offload.h"
#include "exec/optim.h"
#include "exec/params.h"
#include "kernels/math.h"
#include "plan/program.h"

/* A live tensor: (slot, micro-batch, layer) -> buffer. */
typedef struct {
  int16_t slot;
  int32_t mb, layer;
  void *ptr;       /* on the device; NULL while offloaded */
  uint64_t bytes;
  void *host;      /* activation offload: its contents in host memory while it is off the device, else NULL */
} tensor;

struct px_exec {
  const px_plan *plan;
  px_backend *be;
  const px_comm *comm;
  const px_program *prog;
  px_data *data;
  px_optim opt;               /* the hyper-parameters, fp16's loss scaler */
  px_env env;                 /* what every op reads besides its operands */
  px_op_comm op_comm;         /* what an op communicates midway */
  int64_t stage, tp_rank, cp_rank, dp_rank, L;
  int64_t wdp, wdp_rank;                     /* the DP x CP group holding the same weights, this rank's index in it */
  px_param_rank rk;     /* its place in the grid its model states' layout depends on (which ZeRO shards it owns) */
  int64_t replica_rank; /* ZeRO: its replica of the shard group (0 unless hybrid) */
  bool mixed;
  /* model states: flat (ZeRO 0-2 parameters, ZeRO 0-1 gradients) or shard
   * layouts; parameters and gradients in the plan's dtypes (pb, gb bytes an
   * element), master weights and moments in fp32 */
  char *params, *grads;
  float *master, *adam_m, *adam_v;
  char *frozen;               /* fine-tuning: the frozen base weights (prog->frozen) in their storage */
  uint64_t frozen_bytes;
  uint64_t *frozen_at;        /* (nfrozen) each frozen weight's byte offset into frozen (px_param_frozen_layout) */
  double quant_sums[2];       /* ... its quantised weights' squared quantisation error and squares, summed */
  /* the quantized weights' cached copies the plan holds for the step (its fp8_copy_bytes): per param ref its
   * wcopies copies of wcopy_bytes[i] bytes each at wcopy + wcopy_at[i] (wcopy_bytes[i] 0: none held) */
  uint8_t *wcopy;
  uint64_t wcopy_total, *wcopy_at, *wcopy_bytes;
  int wcopies;
  uint64_t pb, gb;
  uint64_t params_elems, grads_elems, opt_elems;
  char **gathered, **bucket; /* per unit: ZeRO-3 parameters, ZeRO-2/3 full gradients */
  /* offload: the host's fp32 gradient shard, weights and moments (opt_elems
   * each), the parameter shard with --offload-params; per unit the device
   * shard between a reduction and its copy out, or a fetch and its gather */
  px_host_arena host;
  float *h_grads, *h_w, *h_m, *h_v;
  char *h_params;
  char **staged_grad, **staged_param;
  int32_t *param_of;          /* [slot * (L + 2) + group + 1] -> index into prog->params */
  px_param_map *maps;         /* per param ref */
  px_optim_range *owned;      /* per param ref: its owned part, for the optimizer */
  px_global_params global;
  /* live tensors */
  tensor *t;
  int64_t nt, cap_t;
  uint64_t cur_bytes, peak_bytes;
  void **late;                /* (nunits) buckets whose overlapped reduction ran: freed after the next compute block */
  uint64_t *late_bytes;
  int32_t nlate;
  /* per step */
  int64_t step;
  uint64_t *seq_index;        /* (mbs) of the micro-batch being run */
  double loss_sum;
  double mtp_loss_sum, mtp_loss; /* the MTP module's token losses this step, and its last step's mean */
  uint64_t *marks;            /* (ninsts) backend marks of the instances run on a side stream this step, 0 none */
  uint64_t *tp_marks;         /* (most ops in a block) marks of the running block's TP collectives, 0 none */
  int32_t tp_last;            /* the running block's latest TP collective on the TP stream, -1 none */
  bool *zero_slot;            /* (nslots) some op accumulates into the slot: its tensors start zeroed */
  bool *act_slot;             /* (nslots) a layer's forward allocates the slot: what activation offload moves */
  int32_t **host_tokens;      /* (microbatches) of (mbs x seq): the tokens last loaded for each micro-batch */
  /* profile */
  int64_t *first_op;
  double *op_time;
  int64_t nops, timed_steps;
  /* fp8 delayed scaling: the histories' keys (px_param_amax_keys) and their checkpoint form, (namax x
   * PX_FP8_AMAX_HISTORY), which px_exec_states_get / _set move to and from the backend */
  px_amax_key *amax_keys;
  int64_t namax;
  float *amax_hist;
  /* gradient capture */
  bool capture;
  float *grad_copy;           /* canonical layout, this rank's owned elements; NaN elsewhere */
  /* fault injection: this rank kills itself (PX_FAULT_KILL) or fails (PX_FAULT_FAIL) before instance fault_inst
   * of step fault_step */
  int64_t fault_step, fault_inst; /* -1: never */
  bool fault_fail;
};

/* Before reading the clock for an op's time: a backend that queues work
 * finishes it first when per-op times are wanted. */
static px_status op_done(px_exec *x, px_status st, px_err *err) {
  return !st && x->be->sync_ops ? x->be->sync(x->be, err) : st;
}

/* ---- fault injection, for the tests of parallax launch ---- */

/* PX_FAULT_KILL="rank=R,step=K,op=I[,attempt=A|*]": rank R raises SIGKILL just
 * before instance I (taken modulo the instance count; or the p2p batch holding
 * it) of its stage's program in step K, when PX_LAUNCH_ATTEMPT (0 when unset) is A (default 0; *: every
 * attempt). PX_FAULT_FAIL, the same spec: rank R's step fails there with an error instead (a rank that
 * fails alone while the others go on to wait for it). Read once here; unset costs one compare per instance. */
static px_status fault_parse(px_exec *x, px_err *err) {
  x->fault_step = x->fault_inst = -1;
  const char *kill = getenv("PX_FAULT_KILL"), *failure = getenv("PX_FAULT_FAIL");
  if (kill && *kill && failure && *failure)
    return px_err_set(err, PX_ERR_INPUT, "PX_FAULT_KILL and PX_FAULT_FAIL are both set: one fault a run");
  x->fault_fail = failure && *failure;
  const char *name = x->fault_fail ? "PX_FAULT_FAIL" : "PX_FAULT_KILL", *spec = x->fault_fail ? failure : kill;
  if (!spec || !*spec) return PX_OK;
  char buf[256];
  if (strlen(spec) >= sizeof buf) return px_err_set(err, PX_ERR_INPUT, "%s: longer than %zu characters", name, sizeof buf - 1);
  strcpy(buf, spec);
  int64_t v[4] = {-1, -1, -1, 0}; /* rank, step, op, attempt (-2: every) */
  static const char *const keys[4] = {"rank", "step", "op", "attempt"};
  px_status st = PX_OK;
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv && !st; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    int k = 0;
    if (eq) *eq = '\0';
    while (k < 4 && strcmp(kv, keys[k]) != 0) k++;
    if (!eq || k == 4) {
      st = PX_ERR_INPUT;
    } else if (k == 3 && !strcmp(eq + 1, "*")) {
      v[3] = -2;
    } else {
      px_err e = {0};
      st = px_parse_int(eq + 1, keys[k], 0, INT64_MAX / 2, &v[k], &e);
    }
  }
  if (st || v[0] < 0 || v[1] < 0 || v[2] < 0)
    return px_err_set(err, PX_ERR_INPUT, "%s='%.200s': expected rank=R,step=K,op=I[,attempt=A|*] "
                      "(non-negative integers)", name, spec);
  const char *at = getenv("PX_LAUNCH_ATTEMPT");
  int64_t attempt = at ? strtoll(at, NULL, 10) : 0;
  if (v[0] == x->comm->world_rank && (v[3] == -2 || v[3] == attempt) && x->prog->ninsts > 0) {
    x->fault_step = v[1];
    x->fault_inst = v[2] % x->prog->ninsts;
  }
  return PX_OK;
}

/* ---- tracked memory ---- */

static px_status pool_alloc(px_exec *x, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err) {
  px_status st = x->be->alloc(x->be, bytes, fill, pool, out, err);
  if (st) return st;
  x->cur_bytes += bytes;
  if (x->cur_bytes > x->peak_bytes) x->peak_bytes = x->cur_bytes;
  return PX_OK;
}

/* A tensor of the step; PX_FILL_ZERO: the first writer accumulates, or the contents must start at 0 */
static px_status mem_alloc(px_exec *x, uint64_t bytes, px_fill fill, void **out, px_err *err) {
  return pool_alloc(x, bytes, fill, PX_POOL_STEP, out, err);
}

/* The fill of a buffer of `bytes` whose first use writes `written` bytes of
 * it from the start before anything reads it: none when that is all of it
 * (a collective's or a transfer's destination), else the poison that shows
 * a read of what was never written. */
static px_fill fill_for(uint64_t written, uint64_t bytes) {
  return written >= bytes ? PX_FILL_NONE : PX_FILL_POISON;
}

static void mem_free(px_exec *x, void *p, uint64_t bytes) {
  if (!p) return;
  x->be->release(x->be, p, bytes);
  x->cur_bytes -= bytes;
}

static void enter_stream(px_exec *x, px_stream s);

/* Frees the buckets of overlapped reductions once the compute block after
 * them is done, as the plan's memory walk does (the reduction reads its
 * bucket while that block runs). The release goes on the DP stream the
 * reductions ran on, after them (called from the compute stream). */
static void free_late(px_exec *x) {
  if (!x->nlate) return;
  enter_stream(x, PX_STREAM_DP);
  for (int32_t i = 0; i < x->nlate; i++) mem_free(x, x->late[i], x->late_bytes[i]);
  x->nlate = 0;
  enter_stream(x, PX_STREAM_COMPUTE);
}

uint64_t px_exec_peak_bytes(const px_exec *x) { return x->peak_bytes; }
uint64_t px_exec_current_bytes(const px_exec *x) { return x->cur_bytes; }
void px_exec_offload_bytes(const px_exec *x, uint64_t *host, uint64_t *nvme) {
  *host = x->host.bytes;
  *nvme = x->host.nvme_bytes;
}

/* ---- live tensors ---- */

static tensor *tensor_find(px_exec *x, int16_t slot, int32_t mb, int32_t layer) {
  for (int64_t i = x->nt - 1; i >= 0; i--) /* recent first: most lookups are of fresh tensors */
    if (x->t[i].slot == slot && x->t[i].mb == mb && x->t[i].layer == layer) return &x->t[i];
  return NULL;
}

/* written: the bytes of it that the op allocating it writes before reading (coll_writes) */
static px_status tensor_new(px_exec *x, int16_t slot, int32_t mb, int32_t layer, uint64_t written, px_err *err) {
  if (tensor_find(x, slot, mb, layer))
    return px_err_set(err, PX_ERR_RUNTIME, "internal: %s (mb %d, layer %d) allocated twice", x->plan->slots[slot].name,
                      mb, layer);
  if (x->nt == x->cap_t) {
    int64_t cap = x->cap_t ? 2 * x->cap_t : 256;
    tensor *nt = realloc(x->t, (size_t)cap * sizeof *nt);
    if (!nt) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    x->t = nt;
    x->cap_t = cap;
  }
  tensor *t = &x->t[x->nt];
  *t = (tensor){slot, mb, layer, NULL, x->plan->slots[slot].bytes, NULL};
  px_status st = mem_alloc(x, t->bytes, x->zero_slot[slot] ? PX_FILL_ZERO : fill_for(written, t->bytes), &t->ptr, err);
  if (st) return st;
  x->nt++;
  return PX_OK;
}

static px_status tensor_drop(px_exec *x, int16_t slot, int32_t mb, int32_t layer, px_err *err) {
  tensor *t = tensor_find(x, slot, mb, layer);
  if (!t)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: %s (mb %d, layer %d) freed but not live", x->plan->slots[slot].name,
                      mb, layer);
  mem_free(x, t->ptr, t->bytes);
  free(t->host);
  *t = x->t[--x->nt];
  return PX_OK;
}

/* Activation offload: every live tensor of the instance's micro-batch and layer that a layer's forward made
 * (what it kept: not the embedding's, tagged with the first layer) to host memory, its device buffer freed (the
 * plan's memory walk takes the set off here, plan/memory.c) ... */
static px_status run_offload_act(px_exec *x, const px_inst *in, px_err *err) {
  for (int64_t i = 0; i < x->nt; i++) {
    tensor *t = &x->t[i];
    if (t->mb != in->mb || t->layer != in->layer || !t->ptr || !x->act_slot[t->slot]) continue;
    if (!(t->host = malloc(t->bytes ? t->bytes : 1))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    px_status st = x->be->download(x->be, t->host, t->ptr, t->bytes, err);
    if (st) return st;
    if (x->be->codes_rekeyed) x->be->codes_rekeyed(x->be, t->host, t->ptr); /* fp8 codes: their scales follow */
    mem_free(x, t->ptr, t->bytes);
    t->ptr = NULL;
  }
  return PX_OK;
}
/* ... and back before the layer's backward. */
static px_status run_fetch_act(px_exec *x, const px_inst *in, px_err *err) {
  for (int64_t i = 0; i < x->nt; i++) {
    tensor *t = &x->t[i];
    if (t->mb != in->mb || t->layer != in->layer || !t->host) continue;
    px_status st = mem_alloc(x, t->bytes, PX_FILL_NONE, &t->ptr, err);
    if (!st) st = x->be->upload(x->be, t->ptr, t->host, t->bytes, err);
    if (st) return st;
    if (x->be->codes_rekeyed) x->be->codes_rekeyed(x->be, t->ptr, t->host);
    free(t->host);
    t->host = NULL;
  }
  return PX_OK;
}

/* ---- parameters ---- */

static const px_param_ref *param_ref(const px_exec *x, int16_t slot, int64_t layer, int32_t *index) {
  int64_t stride = px_program_ngroups(x->plan);
  int32_t i = x->param_of[slot * stride + layer + 1];
  if (i < 0) i = x->param_of[slot * stride]; /* stage-level parameters: one per slot */
  if (index) *index = i;
  if (i >= x->prog->nparams) return &x->prog->frozen[i - x->prog->nparams]; /* a frozen base weight */
  return i >= 0 ? &x->prog->params[i] : NULL;
}

/* Owned flat range of a unit: its shard with ZeRO, all of it without. */
static void owned_range(const px_exec *x, const px_unit *u, uint64_t *lo, uint64_t *hi) {
  px_param_owned_range(x->plan, u, &x->rk, lo, hi);
}

/* Bytes of unit u's full gradient (what its reduction reads) and of its
 * gathered parameters (what its gather writes), from the plan's sized ops. */
static uint64_t full_grad_bytes(const px_exec *x, int32_t u) {
  return x->prog->ops[x->prog->units[u].grad_op].coll_bytes;
}
static uint64_t gathered_bytes(const px_exec *x, int32_t u) {
  return x->prog->ops[x->prog->units[u].gather_op].coll_bytes;
}
/* Offload: bytes of unit u's shard staged on the device: a fetched
 * parameter shard before its gather, or a reduced gradient shard before its
 * copy out. */
static uint64_t staged_bytes(const px_exec *x, int32_t u, bool param) {
  const px_unit *un = &x->prog->units[u];
  return (uint64_t)x->prog->ops[param ? un->fetch_op : un->offload_op].bytes;
}

/* Shard-layout index of an owned flat index of unit u. */
static uint64_t shard_index(const px_exec *x, const px_unit *u, uint64_t flat) {
  return px_param_shard_index(x->plan, u, &x->rk, flat);
}

static void *param_ptr(px_exec *x, const px_param_ref *r, px_err *err) {
  if (r->unit < 0) return x->frozen + x->frozen_at[r - x->prog->frozen]; /* frozen: its own buffer, never sharded */
  if (x->plan->par.zero < 3) return x->params + r->offset * x->pb;
  const px_unit *u = &x->prog->units[r->unit];
  if (!x->gathered[r->unit]) {
    px_err_set(err, PX_ERR_RUNTIME, "internal: ZeRO-3 unit %d used before it was gathered", r->unit);
    return NULL;
  }
  return x->gathered[r->unit] + (r->offset - u->offset) * x->pb;
}

static void *grad_ptr(px_exec *x, const px_param_ref *r, px_err *err) {
  if (x->plan->par.zero < 2) return x->grads + r->offset * x->gb;
  const px_unit *u = &x->prog->units[r->unit];
  if (!x->bucket[r->unit]) {
    void *p;
    if (mem_alloc(x, full_grad_bytes(x, r->unit), PX_FILL_ZERO, &p, err)) return NULL;
    x->bucket[r->unit] = p;
  }
  return x->bucket[r->unit] + (r->offset - u->offset) * x->gb;
}

/* ---- setup ---- */

/* The initial values of parameter r (mapped by pm) into host[r->offset ...]: its canonical elements'
 * (px_param_init_value), 0 for vocabulary padding. */
static void init_values(const px_exec *x, const px_param_ref *r, const px_param_map *pm, float *host) {
  const px_slot *s = &x->plan->slots[r->slot];
  int64_t rows = s->shape[0], cols = (int64_t)(s->elems / (uint64_t)rows);
  for (int64_t a = 0; a < rows; a++)
    for (int64_t b = 0; b < cols; b++) {
      int64_t tensor_id;
      int64_t gi = px_param_global_index(x->plan, &x->global, pm, r, a, b, &tensor_id);
      host[r->offset + (uint64_t)(a * cols + b)] =
          gi < 0 ? 0.0f : px_param_init_value(&x->global, tensor_id, (uint64_t)gi, x->opt.hp.seed);
    }
}

px_status px_exec_frozen_set(px_exec *x, const float *values, px_err *err) {
  if (!x->frozen) return PX_OK;
  char *conv = px_calloc((size_t)x->frozen_bytes + 1, 1, err);
  if (!conv) return PX_ERR_RUNTIME;
  px_status st = px_param_frozen_encode(x->plan, x->stage, values, conv, x->quant_sums, err); /* quantized at load */
  if (!st) st = x->be->upload(x->be, x->frozen, conv, x->frozen_bytes, err);
  free(conv);
  return st;
}

/* Fine-tuning's frozen base: its weights as a run from scratch initialises them (the model's canonical values,
 * whatever the split), in the parameter dtype. */
static px_status init_frozen(px_exec *x, px_err *err) {
  const px_program *prog = x->prog;
  float *host = px_calloc((size_t)prog->frozen_elems + 1, sizeof *host, err);
  px_status st = host ? PX_OK : PX_ERR_RUNTIME;
  for (int32_t i = 0; i < prog->nfrozen && !st; i++) {
    px_param_map pm;
    st = px_param_map_of(x->plan, &x->global, &prog->frozen[i], &x->rk, &pm, err);
    if (!st) init_values(x, &prog->frozen[i], &pm, host);
  }
  if (!st) st = px_exec_frozen_set(x, host, err);
  free(host);
  return st;
}

/* Where each quantized weight's cached copies go (px_plan_param_quantized; ZeRO-3 casts gathered weights at use
 * instead): px_parallel_weight_copies copies of px_parallel_quant_weight_bytes of its elements, in param order,
 * within the plan's `total` (equal when every weight's elements fill their blocks; one that does not fit is
 * quantized into the backend's scratch, the buffer still the plan's). */
static px_status lay_weight_copies(px_exec *x, uint64_t total, px_err *err) {
  const px_plan *p = x->plan;
  const px_program *prog = x->prog;
  x->wcopies = px_parallel_weight_copies(&p->par, &p->cluster.gpu);
  if (!total || x->wcopies <= 0) return PX_OK;
  x->wcopy_at = px_calloc((size_t)prog->nparams + 1, sizeof *x->wcopy_at, err);
  x->wcopy_bytes = px_calloc((size_t)prog->nparams + 1, sizeof *x->wcopy_bytes, err);
  if (!x->wcopy_at || !x->wcopy_bytes) return PX_ERR_RUNTIME;
  x->wcopy_total = total;
  uint64_t at = 0;
  for (int32_t i = 0; i < prog->nparams; i++) {
    if (!px_plan_param_quantized(p, &prog->params[i])) continue;
    uint64_t one = px_parallel_quant_weight_bytes(&p->par, prog->params[i].elems);
    if (at + (uint64_t)x->wcopies * one > total) continue;
    x->wcopy_at[i] = at, x->wcopy_bytes[i] = one;
    at += (uint64_t)x->wcopies * one;
  }
  return PX_OK;
}

static px_status init_params(px_exec *x, px_err *err) {
  const px_program *prog = x->prog;
  x->maps = px_calloc((size_t)prog->nparams + 1, sizeof *x->maps, err);
  float *host = px_calloc((size_t)prog->flat_elems + 1, sizeof *host, err);
  if (!x->maps || !host) {
    free(host);
    return PX_ERR_RUNTIME;
  }
  px_status st = PX_OK;
  for (int32_t i = 0; i < prog->nparams && !st; i++) {
    const px_param_ref *r = &prog->params[i];
    if ((st = px_param_map_of(x->plan, &x->global, r, &x->rk, &x->maps[i], err))) break;
    init_values(x, r, &x->maps[i], host);
  }
  /* Parameters in their dtype: the whole flat buffer, or with ZeRO-3 this rank's shard of each unit. */
  char *conv = st ? NULL : px_calloc((size_t)(prog->flat_elems * x->pb) + 1, 1, err);
  if (!st && !conv) st = PX_ERR_RUNTIME;
  if (!st) px_dtype_from_fp32(conv, x->plan->param_dtype, host, prog->flat_elems);
  if (!st && x->plan->par.zero < 3) st = x->be->upload(x->be, x->params, conv, prog->flat_elems * x->pb, err);
  for (int32_t u = 0; !st && x->plan->par.zero == 3 && u < prog->nunits; u++) {
    uint64_t lo, hi;
    owned_range(x, &prog->units[u], &lo, &hi);
    uint64_t at = shard_index(x, &prog->units[u], lo) * x->pb;
    if (x->h_params)
      memcpy(x->h_params + at, conv + lo * x->pb, (hi - lo) * x->pb);
    else
      st = x->be->upload(x->be, x->params + at, conv + lo * x->pb, (hi - lo) * x->pb, err);
  }
  free(conv);
  if (!st && x->frozen) st = init_frozen(x, err);
  /* fp32 master weights of the owned part (mixed precision; the host's with offload) */
  for (int32_t u = 0; !st && (x->master || x->h_w) && u < prog->nunits; u++) {
    uint64_t lo, hi;
    owned_range(x, &prog->units[u], &lo, &hi);
    uint64_t si = shard_index(x, &prog->units[u], lo);
    if (x->h_w)
      memcpy(x->h_w + si, host + lo, (hi - lo) * sizeof *host);
    else
      st = x->be->upload(x->be, x->master + si, host + lo, (hi - lo) * sizeof *host, err);
  }
  free(host);
  return st;
}

static px_status init_owned(px_exec *x, px_err *err);
static px_status op_reduce(const px_exec_op *e, float *buf, uint64_t n, px_redop op, px_err *err);
static px_status op_ring(const px_exec_op *e, void *send, void *recv, uint64_t bytes, px_err *err);

px_status px_exec_new(const px_plan *plan, px_backend *be, const px_comm *comm, px_data *data,
                      const px_train_hparams *hp, px_exec **out, px_err *err) {
  *out = NULL;
  px_exec *x = px_calloc(1, sizeof *x, err);
  if (!x) return PX_ERR_RUNTIME;
  x->plan = plan;
  x->be = be;
  x->comm = comm;
  x->data = data;
  px_optim_init(&x->opt, hp, plan->act_dtype == PX_DTYPE_FP16);
  x->stage = comm->pp_rank;
  x->tp_rank = comm->tp_rank;
  x->cp_rank = comm->cp_rank;
  x->dp_rank = comm->dp_rank;
  x->wdp = plan->grid.wdp;
  x->wdp_rank = comm->wdp_rank;
  px_param_rank_of(plan, comm->world_rank, &x->rk);
  x->replica_rank = x->wdp_rank / px_parallel_shard_size(&plan->par);
  x->L = plan->model.layers;
  x->prog = &plan->programs[x->stage];
  x->mixed = px_parallel_mixed(&plan->par);
  x->pb = px_dtype_bytes(plan->param_dtype);
  x->gb = px_dtype_bytes(plan->grad_dtype);
  const px_program *prog = x->prog;
  x->op_comm = (px_op_comm){.reduce = op_reduce, .ring = op_ring, .ctx = x};
  px_status st = fault_parse(x, err);
  if (!st) st = px_env_init(&x->env, plan, x->tp_rank, x->cp_rank, err);
  if (!st) st = px_global_params_build(&plan->model, plan->par.mtp_layers, &x->global, err);
  if (!st) st = px_global_params_add_adapters(plan, &x->global, err);
  if (!st && (x->namax = px_param_amax_keys(plan, x->stage, NULL, 0)) > 0) {
    x->amax_keys = px_calloc((size_t)x->namax, sizeof *x->amax_keys, err);
    x->amax_hist = px_calloc((size_t)x->namax * PX_FP8_AMAX_HISTORY, sizeof *x->amax_hist, err);
    if (!x->amax_keys || !x->amax_hist) st = PX_ERR_RUNTIME;
    else px_param_amax_keys(plan, x->stage, x->amax_keys, x->namax);
    if (!st && !be->amax_histories)
      st = px_err_set(err, PX_ERR_INPUT, "the %s backend keeps no fp8 amax histories: it cannot run delayed scaling "
                      "(hint: `fp8_recipe` current)", be->name);
  }
  int64_t stride = px_program_ngroups(plan); /* [slot][group + 1] */
  if (!st) {
    x->param_of = px_calloc((size_t)(plan->nslots * stride), sizeof *x->param_of, err);
    x->gathered = px_calloc((size_t)prog->nunits + 1, sizeof *x->gathered, err);
    x->bucket = px_calloc((size_t)prog->nunits + 1, sizeof *x->bucket, err);
    x->staged_grad = px_calloc((size_t)prog->nunits + 1, sizeof *x->staged_grad, err);
    x->staged_param = px_calloc((size_t)prog->nunits + 1, sizeof *x->staged_param, err);
    x->late = px_calloc((size_t)prog->nunits + 1, sizeof *x->late, err);
    x->late_bytes = px_calloc((size_t)prog->nunits + 1, sizeof *x->late_bytes, err);
    x->seq_index = px_calloc((size_t)plan->par.mbs, sizeof *x->seq_index, err);
    x->marks = px_calloc((size_t)prog->ninsts + 1, sizeof *x->marks, err);
    int32_t most = 1;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) most = plan->blocks[k].nops > most ? plan->blocks[k].nops : most;
    x->tp_marks = px_calloc((size_t)most, sizeof *x->tp_marks, err);
    x->zero_slot = px_calloc((size_t)plan->nslots + 1, sizeof *x->zero_slot, err);
    x->act_slot = px_calloc((size_t)plan->nslots + 1, sizeof *x->act_slot, err);
    x->host_tokens = px_calloc((size_t)plan->microbatches + 1, sizeof *x->host_tokens, err);
    x->first_op = px_calloc((size_t)prog->ninsts + 1, sizeof *x->first_op, err);
    if (!x->param_of || !x->gathered || !x->bucket || !x->staged_grad || !x->staged_param || !x->late ||
        !x->late_bytes || !x->seq_index || !x->marks ||
        !x->tp_marks || !x->zero_slot || !x->act_slot || !x->host_tokens || !x->first_op)
      st = PX_ERR_RUNTIME;
  }
  if (!st) {
    for (int64_t i = 0; i < plan->nslots * stride; i++) x->param_of[i] = -1;
    for (int32_t i = 0; i < prog->nparams; i++) {
      const px_param_ref *r = &prog->params[i];
      bool layer_slot = r->group >= 0 && r->group != x->L; /* a layer's or the MTP module's, not the head's */
      x->param_of[r->slot * stride + (layer_slot ? r->group + 1 : 0)] = i;
    }
    for (int32_t i = 0; i < prog->nfrozen; i++) { /* after the trained ones (param_ref) */
      const px_param_ref *r = &prog->frozen[i];
      bool layer_slot = r->group >= 0 && r->group != x->L;
      x->param_of[r->slot * stride + (layer_slot ? r->group + 1 : 0)] = prog->nparams + i;
    }
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
      for (int32_t o = 0; o < plan->blocks[k].nops; o++) {
        const px_op *op = &plan->blocks[k].ops[o];
        for (int j = 0; j < PX_OP_OUTS && (op->flags & PX_OPF_ACCUMULATE); j++)
          if (op->out[j].slot >= 0) x->zero_slot[op->out[j].slot] = true;
      }
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
      for (int32_t a = 0; px_block_is_layer_fwd((px_block_kind)k) && a < plan->blocks[k].nallocs; a++)
        x->act_slot[plan->blocks[k].allocs[a].slot] = true;
    for (int32_t i = 0; i < prog->ninsts; i++) {
      x->first_op[i] = x->nops;
      x->nops += plan->blocks[prog->insts[i].block].nops;
    }
    x->op_time = px_calloc((size_t)x->nops + 1, sizeof *x->op_time, err);
    if (!x->op_time) st = PX_ERR_RUNTIME;
  }
  px_states ps;
  px_plan_states(plan, x->stage, &ps);
  x->params_elems = ps.params_elems;
  x->grads_elems = ps.grads_elems;
  x->opt_elems = ps.opt_elems;
  bool off = plan->par.offload_opt != PX_OFFLOAD_NONE;
  /* the model states on the device, zeroed: parameters, gradients, master weights (mixed precision), moments,
   * fine-tuning's frozen base, the quantized weights' cached copies */
  enum { NSTATES = 7 };
  uint64_t ob = off ? 0 : x->opt_elems * sizeof(float);
  x->frozen_bytes = prog->frozen_bytes; /* in base_precision (px_lora_frozen_bytes) */
  if (!st && !(x->frozen_at = px_calloc((size_t)prog->nfrozen + 1, sizeof *x->frozen_at, err))) st = PX_ERR_RUNTIME;
  if (!st) st = px_param_frozen_layout(plan, x->stage, x->frozen_at, err);
  if (!st) st = lay_weight_copies(x, ps.fp8_copy_bytes, err);
  uint64_t states[NSTATES] = {x->params_elems * x->pb, x->grads_elems * x->gb, x->mixed ? ob : 0, ob, ob,
                              x->frozen_bytes, x->wcopy_total};
  if (!st && be->reserve) { /* the states as they are taken (whole arena units); the step's tensors to the peak */
    const px_memplan *mp = &plan->mem[x->stage];
    uint64_t pools[PX_POOLS] = {0, px_plan_reserve_bytes(mp->peak_bytes) - mp->static_bytes};
    for (int i = 0; i < NSTATES; i++) pools[PX_POOL_STATES] += states[i] ? px_arena_round(states[i]) : 0;
    st = be->reserve(be, pools, err);
  }
  void *p[NSTATES] = {0};
  for (int i = 0; i < NSTATES && !st; i++)
    if (states[i]) st = pool_alloc(x, states[i], PX_FILL_ZERO, PX_POOL_STATES, &p[i], err);
  x->params = p[0], x->grads = p[1], x->master = p[2], x->adam_m = p[3], x->adam_v = p[4], x->frozen = p[5];
  x->wcopy = p[6];
  /* offloaded: the host arena, where the plan places each state (px_plan_states): the fp32
   * gradient accumulator, then the fp32 weights and the two moments (PX_HOST_OPT_BYTES a
   * parameter, 4 each), then the parameter shard */
  if (!st && off) {
    bool opt_nvme = ps.bytes[PX_PLACE_NVME][PX_MEM_OPTIMIZER] > 0;
    uint64_t fb = x->opt_elems * sizeof(float);
    void *h[4] = {0};
    for (int i = 0; i < 4 && !st; i++) st = px_host_alloc(&x->host, fb, i > 0 && opt_nvme, &h[i], err);
    x->h_grads = h[0], x->h_w = h[1], x->h_m = h[2], x->h_v = h[3];
    uint64_t pbytes = ps.bytes[PX_PLACE_HOST][PX_MEM_PARAMS] + ps.bytes[PX_PLACE_NVME][PX_MEM_PARAMS];
    if (!st && pbytes)
      st = px_host_alloc(&x->host, pbytes, ps.bytes[PX_PLACE_NVME][PX_MEM_PARAMS] > 0, (void **)&x->h_params, err);
  }
  if (!st) st = init_params(x, err);
  if (!st) st = init_owned(x, err);
  if (st) {
    px_exec_free(x);
    return st;
  }
  *out = x;
  return PX_OK;
}

void px_exec_free(px_exec *x) {
  if (!x) return;
  for (int64_t i = 0; i < x->nt; i++) {
    if (x->t[i].ptr) x->be->release(x->be, x->t[i].ptr, x->t[i].bytes);
    free(x->t[i].host);
  }
  for (int32_t u = 0; x->gathered && u < x->prog->nunits; u++) {
    if (x->gathered[u]) x->be->release(x->be, x->gathered[u], gathered_bytes(x, u));
    if (x->bucket[u]) x->be->release(x->be, x->bucket[u], full_grad_bytes(x, u));
  }
  for (int32_t i = 0; x->late && i < x->nlate; i++) x->be->release(x->be, x->late[i], x->late_bytes[i]);
  void *bufs[] = {x->params, x->grads, x->master, x->adam_m, x->adam_v, x->frozen, x->wcopy};
  uint64_t ob = x->h_w ? 0 : x->opt_elems * sizeof(float);
  uint64_t bytes[] = {x->params_elems * x->pb, x->grads_elems * x->gb, ob, ob, ob, x->frozen_bytes, x->wcopy_total};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    if (bufs[i]) x->be->release(x->be, bufs[i], bytes[i]);
  for (int32_t u = 0; x->staged_grad && x->staged_param && u < x->prog->nunits; u++) {
    if (x->staged_grad[u]) x->be->release(x->be, x->staged_grad[u], staged_bytes(x, u, false));
    if (x->staged_param[u]) x->be->release(x->be, x->staged_param[u], staged_bytes(x, u, true));
  }
  free(x->staged_grad);
  free(x->staged_param);
  px_host_arena_free(&x->host);
  free(x->t);
  free(x->gathered);
  free(x->bucket);
  free(x->late);
  free(x->late_bytes);
  free(x->param_of);
  free(x->frozen_at);
  free(x->wcopy_at);
  free(x->wcopy_bytes);
  free(x->maps);
  free(x->owned);
  free(x->seq_index);
  free(x->marks);
  free(x->tp_marks);
  free(x->zero_slot);
  free(x->act_slot);
  for (int64_t m = 0; x->host_tokens && m < x->plan->microbatches; m++) free(x->host_tokens[m]);
  free(x->host_tokens);
  free(x->first_op);
  free(x->op_time);
  free(x->grad_copy);
  free(x->amax_keys);
  free(x->amax_hist);
  px_global_params_free(&x->global);
  px_env_free(&x->env);
  free(x);
}

/* ---- operands ---- */

/* e's cached copies of weight operand r, when it is a quantized weight the plan holds copies of. */
static void bind_weight_copy(const px_exec *x, const px_inst *in, px_ref r, px_exec_op *e) {
  if (r.slot < 0 || x->plan->slots[r.slot].kind != PX_SLOT_PARAM) return;
  int32_t i = -1;
  if (!param_ref(x, r.slot, in->layer + r.layer_off, &i) || i < 0 || i >= x->prog->nparams || !x->wcopy_bytes[i])
    return;
  e->wcopy = x->wcopy + x->wcopy_at[i], e->wcopy_bytes = x->wcopy_bytes[i], e->wcopies = x->wcopies;
}

static px_status resolve(px_exec *x, const px_inst *in, px_ref r, void **out, px_err *err) {
  *out = NULL;
  if (r.slot < 0) return PX_OK;
  const px_slot *s = &x->plan->slots[r.slot];
  int64_t layer = in->layer + r.layer_off;
  if (s->kind == PX_SLOT_PARAM || s->kind == PX_SLOT_GRAD) {
    int16_t pslot = s->kind == PX_SLOT_GRAD ? (int16_t)s->param : r.slot;
    const px_param_ref *pr = param_ref(x, pslot, layer, NULL);
    if (!pr)
      return px_err_set(err, PX_ERR_RUNTIME, "internal: stage %lld holds no parameter %s of layer %lld",
                        (long long)x->stage, x->plan->slots[pslot].name, (long long)layer);
    *out = s->kind == PX_SLOT_PARAM ? param_ptr(x, pr, err) : grad_ptr(x, pr, err);
    return *out ? PX_OK : PX_ERR_RUNTIME;
  }
  tensor *t = tensor_find(x, r.slot, in->mb, (int32_t)layer);
  if (!t || !t->ptr)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: %s (mb %d, layer %lld) is %s at %s", s->name, in->mb,
                      (long long)layer, t ? "offloaded to the host" : "not live", px_block_names[in->block]);
  *out = t->ptr;
  return PX_OK;
}

/* Loads a micro-batch's tokens, targets or an MTP module's targets (the tokens after the next, -1 past each
 * sequence's end) into a fresh tensor: with context parallelism the rank's seq / cp of each sequence
 * (px_cp_position), each position's own from the whole sequence. */
static px_status load_inputs(px_exec *x, const px_inst *in, const px_slot *s, void *buf, px_err *err) {
  const px_parallel *p = &x->plan->par;
  int64_t B = p->mbs, S = x->plan->seq, Sc = x->plan->seq_cp;
  int32_t *tok = malloc((size_t)(2 * B * S) * sizeof *tok);
  if (!tok) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  uint64_t first = px_data_seq_index(x->step, p->gbs, p->dp, x->dp_rank, p->mbs, in->mb, 0);
  px_status st = px_data_batch(x->data, first, B, S, tok, tok + B * S, err);
  if (!st && s->role == PX_ROLE_MTP_TARGETS) /* the targets PX_MTP_SHIFT positions further, in place of the tokens */
    for (int64_t r = 0; r < B; r++)
      for (int64_t i = 0; i < S; i++) tok[r * S + i] = i + PX_MTP_SHIFT < S ? tok[(B + r) * S + i + PX_MTP_SHIFT] : -1;
  if (!st && Sc < S) /* keep the rank's tokens, in place: (2B, S) -> (2B, Sc) */
    for (int64_t r = 0; r < 2 * B; r++)
      for (int64_t i = 0; i < Sc; i++) tok[r * Sc + i] = tok[r * S + px_cp_position(p->cp, x->cp_rank, Sc, i)];
  if (!st)
    st = x->be->upload(x->be, buf, s->role == PX_ROLE_TARGETS ? tok + B * Sc : tok, (uint64_t)(B * Sc) * sizeof *tok,
                       err);
  if (!st && s->role == PX_ROLE_TOKENS && in->mb >= 0 && in->mb < x->plan->microbatches) {
    /* kept for the embedding backward (the backend may group positions by row on the host) */
    free(x->host_tokens[in->mb]);
    x->host_tokens[in->mb] = tok;
    return PX_OK;
  }
  free(tok);
  return st;
}

/* Gathers (or reduce-scatters) along the sequence axis of (B, S, W) with B > 1
 * over n ranks: rank-major chunks (n, B, S/n, W) <-> (B, S, W); row is one
 * rank's (S/n, W) of one batch row, in bytes. */
static px_status seq_permute(px_exec *x, char *dst, const char *src, int64_t n, int64_t B, uint64_t row, bool to_bsh,
                             px_err *err) {
  px_status st = PX_OK;
  for (int64_t r = 0; r < n && !st; r++)
    for (int64_t b = 0; b < B && !st; b++) {
      uint64_t chunk = (uint64_t)(r * B + b) * row, bsh = (uint64_t)(b * n + r) * row;
      st = x->be->copy(x->be, dst + (to_bsh ? bsh : chunk), src + (to_bsh ? chunk : bsh), row, err);
    }
  return st;
}

/* Context parallelism's all-to-all (DeepSpeed-Ulysses) over the CP group of
 * n ranks: (B, S, h, D) of the rank's S tokens <-> (B, n S, h / n, D) of
 * every rank's tokens (rank-major) and 1/n of the heads, through ws: the
 * blocks sent, (n, B, S, h / n, D), then those received. */
static px_status cp_alltoall(px_exec *x, const px_op *o, char *out, const char *in, char *ws, px_err *err) {
  px_backend *be = x->be;
  int64_t n = x->plan->par.cp, B = o->dim[2], S = o->dim[3], h = o->dim[4], D = o->dim[5], hn = h / n;
  px_dtype dt = (px_dtype)x->plan->slots[o->out[0].slot].dtype;
  uint64_t el = px_dtype_bytes(dt), piece = (uint64_t)(hn * D) * el, block = (uint64_t)(B * S) * piece;
  uint64_t count = (uint64_t)(B * S * hn * D); /* elements to each rank */
  char *send = ws, *recv = ws + (uint64_t)n * block;
  bool to_heads = o->flags & PX_OPF_TO_HEADS;
  if (!be->alltoall) return px_err_set(err, PX_ERR_RUNTIME, "internal: the %s backend has no all-to-all", be->name);
  px_status st = PX_OK;
  /* head group j of row (b, t) on the sequence-split side <-> row (b, t) of block j on the head-split side */
  for (int64_t j = 0; j < n && !st; j++)
    for (int64_t b = 0; b < B && !st; b++)
      for (int64_t t = 0; t < S && !st; t++) {
        uint64_t blk = (uint64_t)j * block + (uint64_t)(b * S + t) * piece;
        st = to_heads ? be->copy(be, send + blk, in + (uint64_t)((b * S + t) * h + j * hn) * D * el, piece, err)
                      : be->copy(be, send + blk, in + (uint64_t)(b * n * S + j * S + t) * piece, piece, err);
      }
  if (!st) st = be->alltoall(be, PX_GROUP_CP, recv, send, count, dt, err);
  for (int64_t j = 0; j < n && !st; j++)
    for (int64_t b = 0; b < B && !st; b++)
      for (int64_t t = 0; t < S && !st; t++) {
        uint64_t blk = (uint64_t)j * block + (uint64_t)(b * S + t) * piece;
        st = to_heads ? be->copy(be, out + (uint64_t)(b * n * S + j * S + t) * piece, recv + blk, piece, err)
                      : be->copy(be, out + (uint64_t)((b * S + t) * h + j * hn) * D * el, recv + blk, piece, err);
      }
  return st;
}

/* Mixture of experts: an all-to-all of routed rows over the EP group. The
 * rows are expert-major, so by destination rank; counts (device memory,
 * (1 + etp) E int32) holds the rows sent to each expert, then those each
 * ETP member takes from each (source, local expert), which the forward's
 * dispatch exchanges (this rank's row: 1 + its ETP rank). To the experts:
 * each member's rows for my experts, source-major; back: the reverse, into
 * the sender's order. The rows' gates (in[2] to out[2]) go with them. */
static px_status moe_alltoall(px_exec *x, const px_op *o, void **outs, void **ins, px_err *err) {
  void *out = outs[0], *counts = ins[1];
  const void *in = ins[0];
  const px_plan *p = x->plan;
  px_backend *be = x->be;
  int64_t ep = p->par.ep, E = p->model.experts, el = px_plan_local_experts(p), H = p->model.hidden;
  int64_t mine = (1 + x->rk.etp_rank) * E, n = (1 + p->grid.etp) * E; /* my taken counts; all of them */
  bool to = o->flags & PX_OPF_TO_EXPERTS;
  px_dtype dt = (px_dtype)p->slots[o->out[0].slot].dtype;
  if (!be->alltoallv || !be->host_alltoall)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: the %s backend has no all-to-all-v", be->name);
  int32_t *c = malloc((size_t)n * sizeof *c);
  uint64_t *v = malloc((size_t)(2 * ep) * sizeof *v); /* elements to each member, from each */
  if (!c || !v) {
    free(c), free(v);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  px_status st = be->download(be, c, counts, (uint64_t)n * sizeof *c, err);
  if (!st && to && o->phase != PX_PHASE_BWD) { /* the forward's dispatch: who takes how many rows of mine */
    st = be->host_alltoall(be, PX_GROUP_EP, c + mine, c, (uint64_t)el, PX_HOST_INT, err);
    if (!st) st = be->upload(be, (int32_t *)counts + mine, c + mine, (uint64_t)E * sizeof *c, err);
  }
  uint64_t rows_out = 0;
  for (int64_t j = 0; j < ep; j++) {
    uint64_t sent = 0, taken = 0;
    for (int64_t l = 0; l < el; l++) sent += (uint64_t)c[j * el + l], taken += (uint64_t)c[mine + j * el + l];
    v[j] = (to ? sent : taken) * (uint64_t)H, v[ep + j] = (to ? taken : sent) * (uint64_t)H;
    rows_out += to ? taken : sent;
  }
  /* every member learns whether one's rows overflow its buffer (else the others would wait in the exchange); the
   * buffer holds the plan's px_plan_expert_buffer_rows (the exchange's dims carry the busiest rank's, its cost) */
  uint64_t cap_rows = p->slots[o->out[0].slot].elems / (uint64_t)H;
  int over = !st && rows_out > cap_rows, any = over;
  if (!st) st = be->host_allreduce(be, PX_GROUP_EP, &any, 1, PX_HOST_INT, PX_RED_MAX, err);
  if (!st && any && !over)
    st = px_err_set(err, PX_ERR_RUNTIME, "another EP rank's experts take more rows than the plan holds (see its message)");
  if (!st && over)
    st = px_err_set(err, PX_ERR_RUNTIME,
                    "EP rank %lld: %llu routed rows arrive for its experts, the plan holds %llu (`moe_buffers` %s: "
                    "the busiest rank's at `moe_imbalance` %g; hint: `moe_buffers` worst holds every routing, or "
                    "raise `moe_imbalance`)",
                    (long long)x->comm->ep_rank, (unsigned long long)rows_out, (unsigned long long)cap_rows,
                    px_moe_buffers_names[p->par.moe_buffers], p->par.moe_imbalance);
  if (!st) st = be->alltoallv(be, PX_GROUP_EP, out, v + ep, in, v, dt, err);
  if (!st && ins[2]) { /* the rows' gates (fp32, one a row) the same way */
    for (int64_t j = 0; j < 2 * ep; j++) v[j] /= (uint64_t)H;
    st = be->alltoallv(be, PX_GROUP_EP, outs[2], v + ep, ins[2], v, PX_DTYPE_FP32, err);
  }
  free(c);
  free(v);
  return st;
}

/* Mixture of experts with expert tensor parallelism: the routed rows each
 * ETP member took from the EP all-to-all (counts' rows 1 + j: member j's,
 * moe_alltoall), gathered member after member into the experts' input (the
 * forward's gathers the members' counts first), or the experts' outputs on
 * those rows, partial sums over the members' slices of the width, summed
 * and each member's own taken back. Through the backend's fixed-size
 * entries: the gather in blocks of the most rows a member took, closed up
 * after; the reduce-scatter an all-reduce of every row in place (the input
 * is not read after it), then the member's rows. */
static px_status moe_etp(px_exec *x, const px_op *o, void **outs, void **ins, px_err *err) {
  const px_plan *p = x->plan;
  px_backend *be = x->be;
  int64_t etp = p->grid.etp, E = p->model.experts, me = x->rk.etp_rank;
  void *counts = ins[1];
  uint64_t most = 0, total = 0, at_me = 0;
  int32_t *c = malloc((size_t)((1 + etp) * E) * sizeof *c);
  if (!c) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_status st = be->download(be, c, counts, (uint64_t)((1 + etp) * E) * sizeof *c, err);
  if (!st && o->kind == PX_OP_ALLGATHER && o->phase != PX_PHASE_BWD) { /* each member's own counts, summed */
    for (int64_t j = 0; j < etp; j++)
      if (j != me) memset(c + (1 + j) * E, 0, (size_t)E * sizeof *c);
    st = be->host_allreduce(be, PX_GROUP_ETP, c + E, (uint64_t)(etp * E), PX_HOST_INT, PX_RED_SUM, err);
    if (!st) st = be->upload(be, (int32_t *)counts + E, c + E, (uint64_t)(etp * E) * sizeof *c, err);
  }
  uint64_t *rows = malloc((size_t)etp * sizeof *rows); /* (etp) rows each member took */
  if (!rows && !st) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int64_t j = 0; !st && j < etp; j++) {
    rows[j] = 0;
    for (int64_t i = 0; i < E; i++) rows[j] += (uint64_t)c[(1 + j) * E + i];
    if (j == me) at_me = total;
    total += rows[j], most = rows[j] > most ? rows[j] : most;
  }
  /* the rows (H wide), then their gates (fp32, one a row) where the op moves them */
  for (int pair = 0; !st && pair <= 2 && outs[pair]; pair += 2) {
    char *out = outs[pair], *in = ins[pair];
    const px_slot *s = &p->slots[o->out[pair].slot];
    px_dtype dt = (px_dtype)s->dtype;
    uint64_t w = (uint64_t)px_slot_row_elems(s), row = w * px_dtype_bytes(dt);
    if (o->kind == PX_OP_ALLGATHER) {
      st = be->allgather(be, PX_GROUP_ETP, out, in, most * w, dt, err);
      /* member j's block from j x most up to the rows before it: whole rows down, each a copy of its own */
      for (uint64_t j = 1, at = rows[0]; !st && j < (uint64_t)etp; at += rows[j], j++)
        for (uint64_t r = 0; !st && at < j * most && r < rows[j]; r++)
          st = be->copy(be, out + (at + r) * row, out + (j * most + r) * row, row, err);
    } else {
      st = be->allreduce(be, PX_GROUP_ETP, in, total * w, dt, PX_RED_SUM, err);
      if (!st && rows[me]) st = be->copy(be, out, in + at_me * row, rows[me] * row, err);
    }
  }
  free(c), free(rows);
  return st;
}

/* Ranks of a TP, CP or ETP collective's group. */
static int64_t coll_ranks(const px_exec *x, const px_op *o) {
  switch ((px_group)o->group) {
    case PX_GROUP_CP: return x->plan->par.cp;
    case PX_GROUP_ETP: return x->plan->grid.etp;
    default: return x->plan->par.tp;
  }
}

/* Bytes of `slot` that op o writes from its start before reading it: an
 * all-gather's destinations (the permuted one's workspace too), a
 * reduce-scatter's, a receive's; 0 for every other op and operand. */
static uint64_t coll_writes(const px_exec *x, const px_op *o, int16_t slot) {
  /* in place: it reads its own part; the experts' rows over ETP: as many as the members took */
  if (slot < 0 || o->out[0].slot < 0 || o->in[0].slot == slot || o->group == PX_GROUP_ETP) return 0;
  uint64_t el = px_dtype_bytes((px_dtype)x->plan->slots[o->out[0].slot].dtype);
  bool permute = (o->flags & PX_OPF_SEQ_AXIS) && o->dim[2] > 1;
  switch (o->kind) {
    case PX_OP_ALLGATHER:
      return slot == o->out[0].slot || (permute && slot == o->out[1].slot)
                 ? (uint64_t)o->dim[0] * (uint64_t)coll_ranks(x, o) * el : 0;
    case PX_OP_REDUCE_SCATTER: return slot == o->out[0].slot ? (uint64_t)o->dim[1] * el : 0;
    case PX_OP_RECV: return slot == o->out[0].slot ? (uint64_t)o->dim[0] * el : 0;
    default: return 0;
  }
}

/* An all-gather of the n TP ranks' column shards (B S, h / n) into the rows this rank keeps of (B, S, h): every
 * row, or with SP its sequence shard's (PX_OPF_COLS: the MTP module's projection), through ws (n, B S, h / n). */
static px_status cols_gather(px_exec *x, const px_op *o, char *out, const void *in, char *ws, px_err *err) {
  px_backend *be = x->be;
  int64_t n = coll_ranks(x, o), B = o->dim[2], S = o->dim[3], w = o->dim[0] / (B * S);
  px_dtype dt = (px_dtype)x->plan->slots[o->out[0].slot].dtype;
  uint64_t el = px_dtype_bytes(dt), piece = (uint64_t)w * el;
  px_status st = be->allgather(be, (px_group)o->group, ws, in, (uint64_t)o->dim[0], dt, err);
  int64_t kept = x->plan->par.sp ? S / n : S, first = x->plan->par.sp ? x->tp_rank * kept : 0;
  for (int64_t b = 0; b < B && !st; b++)
    for (int64_t s = 0; s < kept && !st; s++)
      for (int64_t q = 0; q < n && !st; q++) {
        uint64_t row = (uint64_t)(b * S + first + s), dst = (uint64_t)((b * kept + s) * n + q);
        st = be->copy(be, out + dst * piece, ws + ((uint64_t)(q * B * S) + row) * piece, piece, err);
      }
  return st;
}

static px_status run_collective(px_exec *x, const px_op *o, void **outs, void **ins, px_err *err) {
  px_backend *be = x->be;
  px_group g = (px_group)o->group;
  uint64_t n_in = (uint64_t)o->dim[0], n_out = (uint64_t)o->dim[1];
  int64_t B = o->dim[2], n = coll_ranks(x, o);
  bool permute = (o->flags & PX_OPF_SEQ_AXIS) && B > 1;
  px_dtype dt = (px_dtype)x->plan->slots[o->out[0].slot].dtype;
  uint64_t el = px_dtype_bytes(dt);
  px_status st;
  if (g == PX_GROUP_ETP) return moe_etp(x, o, outs, ins, err);
  switch (o->kind) {
    case PX_OP_ALLREDUCE: return be->allreduce(be, g, outs[0], n_in, dt, PX_RED_SUM, err);
    case PX_OP_ALLGATHER: /* permuted: through the plan's workspace out[1] */
      if (o->flags & PX_OPF_COLS) return cols_gather(x, o, outs[0], ins[0], outs[1], err);
      if (!permute) return be->allgather(be, g, outs[0], ins[0], n_in, dt, err);
      if ((st = be->allgather(be, g, outs[1], ins[0], n_in, dt, err))) return st;
      if (dt != PX_DTYPE_FP8) return seq_permute(x, outs[0], outs[1], n, B, n_in / (uint64_t)B * el, true, err);
      /* fp8 codes: the backend permutes them with their scales (supports_op asked for the entry) */
      return be->codes_permuted
                 ? be->codes_permuted(be, outs[0], outs[1], n, B, err)
                 : px_err_set(err, PX_ERR_RUNTIME, "internal: the %s backend has no codes_permuted", be->name);
    case PX_OP_REDUCE_SCATTER:
      if (!permute) return be->reduce_scatter(be, g, outs[0], ins[0], n_out, dt, err);
      if ((st = seq_permute(x, outs[1], ins[0], n, B, n_out / (uint64_t)B * el, false, err))) return st;
      return be->reduce_scatter(be, g, outs[0], outs[1], n_out, dt, err);
    case PX_OP_ALLTOALL:
      return g == PX_GROUP_CP ? cp_alltoall(x, o, outs[0], ins[0], outs[1], err)
                              : moe_alltoall(x, o, outs, ins, err);
    default: return px_err_set(err, PX_ERR_RUNTIME, "internal: %s is not a collective", px_op_names[o->kind]);
  }
}

/* ---- what an op communicates midway (px_op_comm), through the backend's entries ---- */

/* The loss's row statistics over its vocabulary shards (its group, TP); a
 * cast's amax over every rank that may exchange its codes (TP, then EP:
 * Transformer Engine's amax reduction); the router's expert shares over
 * the TP (sequence parallelism) and CP ranks that split its micro-batch. */
static px_status op_reduce(const px_exec_op *e, float *buf, uint64_t n, px_redop op, px_err *err) {
  px_exec *x = e->comm->ctx;
  const px_parallel *par = &x->plan->par;
  bool cast = e->op->kind == PX_OP_CAST, shares = e->op->kind == PX_OP_MOE_ROUTE_BWD;
  px_status st = PX_OK;
  if (par->tp > 1 && (cast || e->op->group == PX_GROUP_TP || (shares && par->sp)))
    st = x->be->allreduce(x->be, PX_GROUP_TP, buf, n, PX_DTYPE_FP32, op, err);
  if (!st && cast && par->ep > 1) st = x->be->allreduce(x->be, PX_GROUP_EP, buf, n, PX_DTYPE_FP32, op, err);
  if (!st && shares && par->cp > 1) st = x->be->allreduce(x->be, PX_GROUP_CP, buf, n, PX_DTYPE_FP32, op, err);
  return st;
}

/* The CP ring: to the next rank of the CP group, from the previous one; the
 * forward's and the backward's messages apart. */
static px_status op_ring(const px_exec_op *e, void *send, void *recv, uint64_t bytes, px_err *err) {
  px_exec *x = e->comm->ctx;
  int tag = e->op->kind == PX_OP_FLASH_ATTN ? 3 : 4;
  px_p2p items[2] = {{true, x->comm->cp_next, send, bytes, tag}, {false, x->comm->cp_prev, recv, bytes, tag}};
  return x->be->p2p(x->be, items, 2, err);
}

static void enter_stream(px_exec *x, px_stream s) {
  if (x->be->set_stream) x->be->set_stream(x->be, s);
}


/* The TP collectives the plan's overlap runs beside the compute (op k of
 * the block's ops, px_plan_op_overlapped) go on the TP stream (after the
 * compute issued before them), and compute waits for one only at the first
 * op that uses its tensors (the op's dep), or at the block's end. */
static bool on_tp_stream(const px_exec *x, const px_op *ops, int32_t nops, int32_t k) {
  const px_op *o = &ops[k];
  return o->stream == PX_STREAM_TP && px_op_is_collective((px_op_kind)o->kind) && x->be->mark &&
         px_plan_op_overlapped(x->plan, ops, nops, k);
}

static px_status wait_tp(px_exec *x, int32_t k, px_err *err) {
  uint64_t m = k >= 0 ? x->tp_marks[k] : 0;
  return m && x->be->wait_mark ? x->be->wait_mark(x->be, m, err) : PX_OK;
}

/* Runs op k of instance i: allocations, the op itself, frees. */
static px_status run_op(px_exec *x, int32_t i, int32_t k, px_err *err) {
  const px_inst *in = &x->prog->insts[i];
  const px_block *b = &x->plan->blocks[in->block];
  const px_op *ops = px_inst_ops(x->plan, x->prog, in), *o = &ops[k];
  bool tp = on_tp_stream(x, ops, b->nops, k);
  /* a collective run in line follows those on the TP stream, as one process group's do */
  bool coll = px_op_is_collective((px_op_kind)o->kind);
  px_status st = wait_tp(x, !tp && coll && x->tp_last > o->dep ? x->tp_last : o->dep, err);
  double t0 = px_clock_s();
  if (tp) enter_stream(x, PX_STREAM_TP);
  for (int32_t a = 0; a < o->alloc_count && !st; a++) {
    px_ref r = b->allocs[o->alloc_start + a];
    const px_slot *s = &x->plan->slots[r.slot];
    int32_t layer = in->layer + r.layer_off;
    if (!(st = tensor_new(x, r.slot, in->mb, layer, coll_writes(x, o, r.slot), err)) &&
        (s->role == PX_ROLE_TOKENS || s->role == PX_ROLE_TARGETS || s->role == PX_ROLE_MTP_TARGETS))
      st = load_inputs(x, in, s, tensor_find(x, r.slot, in->mb, layer)->ptr, err);
  }
  /* d loss / d token loss: 1 / (gbs x seq); an MTP module's (its targets shifted by dim[3]) weighted over its
   * positions with a target */
  int64_t shift = o->kind == PX_OP_LOSS_BWD ? o->dim[3] : 0;
  double weight = shift > 0 ? x->plan->par.mtp_loss_scale / (double)x->plan->par.mtp_layers : 1.0;
  px_exec_op e = {.env = &x->env, .op = o, .comm = &x->op_comm, .layer = in->layer, .seq_index = x->seq_index,
                  .seed = x->opt.hp.seed, .step = x->step,
                  .loss_scale = (float)(x->opt.scaler[0] * weight /
                                        ((double)x->plan->par.gbs * (double)(x->plan->seq - shift)))};
  if (o->kind == PX_OP_EMBED_BWD && in->mb >= 0 && in->mb < x->plan->microbatches &&
      x->plan->slots[o->in[1].slot].role == PX_ROLE_TOKENS &&
      o->dim[0] == x->plan->par.mbs * x->plan->seq_cp)
    e.host_tokens = x->host_tokens[in->mb];
  for (int j = 0; j < PX_OP_OUTS && !st; j++) st = resolve(x, in, o->out[j], &e.out[j], err);
  for (int j = 0; j < PX_OP_INS && !st; j++) st = resolve(x, in, o->in[j], &e.in[j], err);
  for (int j = 0; j < PX_OP_INS && !st && x->wcopy; j++) bind_weight_copy(x, in, o->in[j], &e);
  if (!st) {
    if (coll)
      st = run_collective(x, o, e.out, e.in, err);
    else if (o->kind != PX_OP_SEND && o->kind != PX_OP_RECV)
      st = x->be->op(x->be, &e, err);
  }
  if (!st && o->kind == PX_OP_LOSS && x->tp_rank == 0) { /* the step's loss, from each token's (the main head's,
                                                           and an MTP module's apart) */
    int64_t n = o->dim[0];
    float *host = malloc((size_t)n * sizeof *host);
    if (!host) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    st = x->be->download(x->be, host, e.out[1], (uint64_t)n * sizeof *host, err);
    double *sum = o->dim[3] > 0 ? &x->mtp_loss_sum : &x->loss_sum;
    for (int64_t j = 0; !st && j < n; j++) *sum += host[j];
    free(host);
  }
  for (int32_t f = 0; f < o->free_count && !st; f++) { /* on the TP stream, a release waits for the collective */
    px_ref r = b->frees[o->free_start + f];
    st = tensor_drop(x, r.slot, in->mb, in->layer + r.layer_off, err);
  }
  if (tp) {
    x->tp_marks[k] = x->be->mark(x->be);
    x->tp_last = k;
    enter_stream(x, PX_STREAM_COMPUTE);
  }
  st = op_done(x, st, err);
  x->op_time[x->first_op[i] + k] += px_clock_s() - t0;
  return st;
}

static px_status run_block(px_exec *x, int32_t i, int32_t from, px_err *err) {
  const px_inst *in = &x->prog->insts[i];
  const px_block *b = &x->plan->blocks[in->block];
  px_status st = PX_OK;
  /* ZeRO-2/3: a unit's full gradients exist from its first backward block to its reduce-scatter */
  bool bwd = px_block_is_bwd((px_block_kind)in->block);
  for (int32_t u = in->unit; bwd && from == 0 && x->plan->par.zero >= 2 && u >= 0 && u < in->unit + in->units; u++)
    if (!x->bucket[u]) {
      void *p;
      if ((st = mem_alloc(x, full_grad_bytes(x, u), PX_FILL_ZERO, &p, err))) return st;
      x->bucket[u] = p;
    }
  x->tp_last = -1;
  for (int32_t k = from; k < b->nops && !st; k++) st = run_op(x, i, k, err);
  if (!st) st = wait_tp(x, x->tp_last, err); /* the block ends with its collectives */
  if (x->tp_last >= 0) memset(x->tp_marks, 0, (size_t)b->nops * sizeof *x->tp_marks);
  return st;
}

/* ---- communication instances ---- */

static bool is_p2p(px_block_kind k) {
  return k == PX_BLOCK_SEND_FWD || k == PX_BLOCK_SEND_BWD || k == PX_BLOCK_RECV_FWD || k == PX_BLOCK_RECV_BWD;
}

/* ---- streams: the backend's side streams, ordered by the program's dependencies ---- */

/* The stream an instance of block kind k runs on: with the plan's overlaps,
 * gradient reductions and parameter gathers on the DP stream, p2p batches on
 * the PP stream; everything else, and everything without them, on compute. */
static px_stream stream_for(const px_exec *x, px_block_kind k) {
  unsigned ov = x->plan->par.overlap;
  if (k == PX_BLOCK_GRAD_SYNC && (ov & PX_OVERLAP_DP)) return PX_STREAM_DP;
  if (k == PX_BLOCK_PARAM_SYNC && (ov & PX_OVERLAP_ZERO)) return PX_STREAM_DP;
  if (is_p2p(k) && (ov & PX_OVERLAP_PP)) return PX_STREAM_PP_SEND;
  return PX_STREAM_COMPUTE;
}

/* Instance i ran on a side stream: its mark, for the instances that depend on it. */
static void mark_done(px_exec *x, int32_t i, px_stream s) {
  if (s != PX_STREAM_COMPUTE && x->be->mark) x->marks[i] = x->be->mark(x->be);
}

/* The current stream waits for the side-stream instances i depends on. */
static px_status wait_deps(px_exec *x, int32_t i, px_err *err) {
  const px_inst *in = &x->prog->insts[i];
  px_status st = PX_OK;
  for (int32_t d = 0; d < in->ndeps && !st && x->be->wait_mark; d++) {
    uint64_t m = x->marks[x->prog->deps[in->dep_start + d]];
    if (m) st = x->be->wait_mark(x->be, m, err);
  }
  return st;
}

/* The compute stream catches up with every side stream (before anything
 * reads or writes reduced gradients). */
static px_status join_streams(px_exec *x, px_err *err) { return x->be->join ? x->be->join(x->be, err) : PX_OK; }

/* The p2p batch starting at instance first, on stream s: every send and
 * receive posted together, then waited for; then the receives' own ops (the
 * TP all-gather of scattered slices), on compute after waiting for the batch. */
static px_status run_p2p_batch(px_exec *x, int32_t first, px_stream s, int32_t *next, px_err *err) {
  const px_program *prog = x->prog;
  int32_t batch = prog->insts[first].batch, last = first;
  while (last + 1 < prog->ninsts && prog->insts[last + 1].batch == batch) last++;
  *next = last + 1;
  px_p2p items[16];
  int n = 0;
  px_status st = PX_OK;
  double t0 = px_clock_s();
  for (int32_t i = first; i <= last && !st; i++) {
    const px_inst *in = &prog->insts[i];
    const px_block *b = &x->plan->blocks[in->block];
    const px_op *o = &b->ops[0];
    bool send = o->kind == PX_OP_SEND, fwd = in->block == PX_BLOCK_SEND_FWD || in->block == PX_BLOCK_RECV_FWD;
    for (int32_t a = 0; a < o->alloc_count && !st; a++) {
      px_ref r = b->allocs[o->alloc_start + a];
      st = tensor_new(x, r.slot, in->mb, in->layer + r.layer_off, coll_writes(x, o, r.slot), err);
    }
    px_ref data = send ? o->in[0] : o->out[0];
    void *buf = NULL;
    if (!st) st = resolve(x, in, data, &buf, err);
    if (st) break;
    uint64_t bytes = (uint64_t)o->dim[0] * px_dtype_bytes((px_dtype)x->plan->slots[data.slot].dtype);
    if (send && (o->flags & PX_OPF_TP_SLICE)) buf = (char *)buf + (uint64_t)x->tp_rank * bytes;
    if (n == 16) return px_err_set(err, PX_ERR_RUNTIME, "internal: p2p batch too large");
    /* forward traffic flows to the next stage, gradients to the previous */
    int peer = send ? (fwd ? x->comm->next : x->comm->prev) : (fwd ? x->comm->prev : x->comm->next);
    items[n++] = (px_p2p){send, peer, buf, bytes, fwd ? 1 : 2};
  }
  if (!st && n) st = op_done(x, x->be->p2p(x->be, items, n, err), err);
  double dt = n ? (px_clock_s() - t0) / n : 0;
  for (int32_t i = first; i <= last && !st; i++) {
    const px_inst *in = &prog->insts[i];
    const px_block *b = &x->plan->blocks[in->block];
    const px_op *o = &b->ops[0];
    for (int32_t f = 0; f < o->free_count && !st; f++) {
      px_ref r = b->frees[o->free_start + f];
      st = tensor_drop(x, r.slot, in->mb, in->layer + r.layer_off, err);
    }
    x->op_time[x->first_op[i]] += dt;
  }
  if (st) return st;
  mark_done(x, first, s);
  for (int32_t i = first + 1; i <= last; i++) x->marks[i] = x->marks[first];
  enter_stream(x, PX_STREAM_COMPUTE);
  for (int32_t i = first; i <= last && !st; i++) {
    const px_block *b = &x->plan->blocks[prog->insts[i].block];
    if (b->ops[0].kind != PX_OP_RECV || b->nops < 2) continue;
    if (x->marks[i] && x->be->wait_mark) st = x->be->wait_mark(x->be, x->marks[i], err);
    if (!st) st = run_block(x, i, 1, err);
  }
  return st;
}

/* The op arguments of the ops on gradient ranges (px_optim_range_op). */
static px_exec_op range_args(px_exec *x) { return (px_exec_op){.env = &x->env}; }

/* Pointer to the reduced gradient of an owned flat index of unit u (in
 * host memory, fp32, when offloaded). */
static void *owned_grad(px_exec *x, const px_unit *u, uint64_t flat) {
  if (x->h_grads) return x->h_grads + shard_index(x, u, flat);
  return x->grads + (x->plan->par.zero < 2 ? flat : shard_index(x, u, flat)) * x->gb;
}

/* A unit's gradient reduction, sized by the plan: an all-reduce of its
 * dim[0] elements (ZeRO-0), or a reduce-scatter to dim[1] (ZeRO-1: into the
 * owned range; ZeRO-2/3: from the full-gradient bucket, summed into the shard),
 * over the op's group. With hybrid sharding that reduce-scatter is within the
 * shard group and a second op all-reduces the owned shard over the replicas
 * (empty before a step's last micro-batch: the shard accumulates first).
 * times: the ops' profile entries. */
static px_status run_grad_sync(px_exec *x, const px_inst *in, const px_op *o, double *times, px_err *err) {
  const px_unit *u = &x->prog->units[in->unit];
  px_backend *be = x->be;
  int z = x->plan->par.zero;
  uint64_t full = (uint64_t)o->dim[0], shard = (uint64_t)o->dim[1], gb = x->gb;
  px_dtype dt = x->plan->grad_dtype;
  px_group g = (px_group)o->group;
  double t0 = px_clock_s();
  if (z == 0) {
    px_status st = x->wdp > 1 ? be->allreduce(be, g, x->grads + u->offset * gb, full, dt, PX_RED_SUM, err) : PX_OK;
    st = op_done(x, st, err);
    times[0] += px_clock_s() - t0;
    return st;
  }
  char *src = z == 1 ? x->grads + u->offset * gb : x->bucket[in->unit];
  if (!src) return px_err_set(err, PX_ERR_RUNTIME, "internal: unit %d reduced before any gradient", in->unit);
  void *tmp;
  px_status st = mem_alloc(x, shard * gb, PX_FILL_NONE, &tmp, err); /* the reduce-scatter's destination */
  if (st) return st;
  uint64_t lo, hi;
  owned_range(x, u, &lo, &hi);
  if (!(st = be->reduce_scatter(be, g, tmp, src, shard, dt, err))) {
    if (x->h_grads) { /* offload: the shard waits for its copy to the host */
      x->staged_grad[in->unit] = tmp;
      tmp = NULL;
    } else if (z == 1)
      st = be->copy(be, x->grads + lo * gb, tmp, shard * gb, err);
    else {
      px_exec_op e = range_args(x);
      e.out[0] = owned_grad(x, u, lo), e.in[0] = tmp;
      st = px_optim_range_op(be, &e, PX_OP_ACC, shard, err);
    }
  }
  if (tmp) mem_free(x, tmp, shard * gb);
  st = op_done(x, st, err);
  times[0] += px_clock_s() - t0;
  if (!st && x->plan->blocks[in->block].nops > 1 && o[1].dim[0] > 0) { /* the replicas' sum of the owned shard */
    t0 = px_clock_s();
    st = be->allreduce(be, (px_group)o[1].group, owned_grad(x, u, lo), (uint64_t)o[1].dim[0], dt, PX_RED_SUM, err);
    st = op_done(x, st, err);
    times[1] += px_clock_s() - t0;
  }
  if (z >= 2) {
    if (x->plan->par.overlap & PX_OVERLAP_DP) {
      x->late[x->nlate] = x->bucket[in->unit];
      x->late_bytes[x->nlate++] = o->coll_bytes;
    } else {
      mem_free(x, x->bucket[in->unit], o->coll_bytes);
    }
    x->bucket[in->unit] = NULL;
  }
  return st;
}

/* A unit's parameter all-gather, sized by the plan: dim[0] elements from
 * each rank into dim[1]. */
static px_status run_param_sync(px_exec *x, const px_inst *in, const px_op *o, px_err *err) {
  const px_unit *u = &x->prog->units[in->unit];
  uint64_t shard = (uint64_t)o->dim[0], pb = x->pb;
  px_dtype dt = x->plan->param_dtype;
  if (x->plan->par.zero < 3) { /* in place: every rank's shard sits at its place in the unit */
    char *unit = x->params + u->offset * pb;
    return x->be->allgather(x->be, (px_group)o->group, unit, unit, shard, dt, err);
  }
  void *g;
  px_status st = mem_alloc(x, o->coll_bytes, fill_for(u->padded * pb, o->coll_bytes), &g, err);
  if (st) return st;
  x->gathered[in->unit] = g;
  char *from = x->h_params ? x->staged_param[in->unit] : x->params + u->shard_offset * pb;
  if (!from) return px_err_set(err, PX_ERR_RUNTIME, "internal: unit %d gathered before its fetch", in->unit);
  st = x->be->allgather(x->be, (px_group)o->group, g, from, shard, dt, err);
  if (x->h_params) {
    mem_free(x, from, staged_bytes(x, in->unit, true));
    x->staged_param[in->unit] = NULL;
  }
  return st;
}

/* Offload: a unit's reduced gradient shard to the host, summed into its fp32 accumulator. */
static px_status run_offload_grad(px_exec *x, const px_inst *in, const px_op *o, px_err *err) {
  const px_unit *u = &x->prog->units[in->unit];
  char *dev = x->staged_grad[in->unit];
  if (!dev) return px_err_set(err, PX_ERR_RUNTIME, "internal: unit %d copied out before its reduction", in->unit);
  uint64_t n = (uint64_t)o->dim[0], lo, hi;
  void *raw = malloc(n * x->gb + 1);
  float *f = malloc(n * sizeof *f + 1);
  px_status st = raw && f ? x->be->download(x->be, raw, dev, n * x->gb, err)
                           : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  if (!st) {
    px_dtype_to_fp32(f, raw, x->plan->grad_dtype, n);
    owned_range(x, u, &lo, &hi);
    float *acc = owned_grad(x, u, lo);
    for (uint64_t i = 0; i < n; i++) acc[i] += f[i];
  }
  free(raw), free(f);
  mem_free(x, dev, staged_bytes(x, in->unit, false));
  x->staged_grad[in->unit] = NULL;
  return st;
}

/* Offload: a unit's parameter shard from the host, for its gather. */
static px_status run_fetch_param(px_exec *x, const px_inst *in, px_err *err) {
  const px_unit *u = &x->prog->units[in->unit];
  uint64_t bytes = staged_bytes(x, in->unit, true), lo, hi;
  void *dev;
  px_status st = mem_alloc(x, bytes, PX_FILL_NONE, &dev, err); /* the upload's destination */
  if (st) return st;
  x->staged_param[in->unit] = dev;
  owned_range(x, u, &lo, &hi);
  return x->be->upload(x->be, dev, x->h_params + shard_index(x, u, lo) * x->pb, bytes, err);
}

/* The tied weight's full gradient (the op's in[0]) summed with the other stage's copy. */
static px_status run_emb_sync(px_exec *x, const px_op *o, px_err *err) {
  const px_param_ref *r = NULL; /* the stage's one copy: the embedding's, the head's or the MTP module's */
  for (int32_t i = 0; i < x->prog->nparams && !r; i++)
    if (x->prog->params[i].slot == x->plan->slots[o->in[0].slot].param) r = &x->prog->params[i];
  if (!r) return px_err_set(err, PX_ERR_RUNTIME, "internal: no tied embedding on stage %lld", (long long)x->stage);
  char *g = x->plan->par.zero < 2 ? x->grads + r->offset * x->gb : NULL;
  if (!g) {
    const px_unit *u = &x->prog->units[r->unit];
    if (!x->bucket[r->unit]) return PX_OK; /* no gradient this micro-batch (cannot happen: both stages write it) */
    g = x->bucket[r->unit] + (r->offset - u->offset) * x->gb;
  }
  return x->be->allreduce(x->be, PX_GROUP_EMB, g, (uint64_t)o->dim[0], x->plan->grad_dtype, PX_RED_SUM, err);
}

/* ---- the optimizer (exec/optim.h), over this rank's owned parts ---- */

static bool is_matrix(const px_slot *s) { return s->shape[1] > 1; }

/* Owned part of a parameter: [lo, hi) in flat coordinates (empty if none). */
static void param_owned(const px_exec *x, const px_param_ref *r, uint64_t *lo, uint64_t *hi) {
  uint64_t ulo, uhi;
  owned_range(x, &x->prog->units[r->unit], &ulo, &uhi);
  *lo = r->offset > ulo ? r->offset : ulo;
  *hi = r->offset + r->elems < uhi ? r->offset + r->elems : uhi;
  if (*hi < *lo) *hi = *lo;
}

/* Whether parameter ref i's owned gradient is this rank's to count (each
 * element once: replicated ones on tp rank 0, the tied copy on the first
 * stage, without ZeRO on DP x CP rank 0, with hybrid sharding on the first replica). */
static bool counts_once(const px_exec *x, int32_t i) {
  const px_param_ref *r = &x->prog->params[i];
  if ((x->plan->slots[r->slot].tp_replicated && x->tp_rank != 0) || x->maps[i].tied_copy) return false;
  if (x->plan->slots[r->slot].expert) /* experts: one copy per expert-data-parallel group */
    return x->plan->par.zero != 0 || x->rk.edp_rank == 0;
  return (x->plan->par.zero != 0 || x->wdp_rank == 0) && x->replica_rank == 0;
}

/* Each parameter ref's owned part, as the optimizer reads it (after init_params: the maps). */
static px_status init_owned(px_exec *x, px_err *err) {
  const px_program *prog = x->prog;
  const px_parallel *par = &x->plan->par;
  if (!(x->owned = px_calloc((size_t)prog->nparams + 1, sizeof *x->owned, err))) return PX_ERR_RUNTIME;
  for (int32_t i = 0; i < prog->nparams; i++) {
    const px_param_ref *r = &prog->params[i];
    const px_slot *sl = &x->plan->slots[r->slot];
    const px_unit *u = &prog->units[r->unit];
    uint64_t lo, hi;
    param_owned(x, r, &lo, &hi);
    uint64_t si = hi > lo ? shard_index(x, u, lo) : 0;
    x->owned[i] = (px_optim_range){.grad = hi > lo ? owned_grad(x, u, lo) : NULL, .n = hi - lo, .at = si,
                                   .model_at = par->zero == 3 ? si : lo, .matrix = is_matrix(sl),
                                   .counted = counts_once(x, i), .partial = par->tp > 1 && sl->sp_partial};
  }
  return PX_OK;
}

/* Keeps a copy of this rank's reduced gradients in the canonical layout. */
static px_status capture_grads(px_exec *x, px_err *err) {
  if (!x->grad_copy) {
    x->grad_copy = malloc(x->global.total * sizeof *x->grad_copy);
    if (!x->grad_copy) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  for (uint64_t i = 0; i < x->global.total; i++) x->grad_copy[i] = NAN;
  const px_program *prog = x->prog;
  float *host = NULL;
  char *raw = NULL;
  px_status st = PX_OK;
  for (int32_t i = 0; i < prog->nparams && !st; i++) {
    const px_param_ref *r = &prog->params[i];
    const px_slot *s = &x->plan->slots[r->slot];
    if (!x->owned[i].counted) continue;
    uint64_t lo, hi;
    param_owned(x, r, &lo, &hi);
    if (hi == lo) continue;
    float *nh = realloc(host, (hi - lo) * sizeof *nh);
    if (nh) host = nh;
    char *nr = nh ? realloc(raw, (hi - lo) * x->gb) : NULL;
    if (!nr) {
      st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      break;
    }
    raw = nr;
    void *g = x->owned[i].grad;
    if (x->h_grads) {
      memcpy(host, g, (hi - lo) * sizeof *host);
    } else {
      st = x->be->download(x->be, raw, g, (hi - lo) * x->gb, err);
      if (!st) px_dtype_to_fp32(host, raw, x->plan->grad_dtype, hi - lo);
    }
    int64_t cols = (int64_t)(s->elems / (uint64_t)s->shape[0]);
    for (uint64_t f = lo; !st && f < hi; f++) {
      int64_t e = (int64_t)(f - r->offset);
      int64_t gi = px_param_global_index(x->plan, &x->global, &x->maps[i], r, e / cols, e % cols, NULL);
      if (gi >= 0) x->grad_copy[gi] = host[f - lo] / x->opt.scaler[0]; /* unscaled (fp16) */
    }
  }
  free(host);
  free(raw);
  return st;
}

/* Adds seconds to the op of a kind within instance idx's block (the optimizer's phases). */
static void add_op_time(px_exec *x, int32_t idx, px_op_kind kind, double s) {
  const px_block *b = &x->plan->blocks[x->prog->insts[idx].block];
  for (int32_t k = 0; k < b->nops; k++)
    if (b->ops[k].kind == kind) {
      x->op_time[x->first_op[idx] + k] += s;
      return;
    }
}

static px_status run_optimizer(px_exec *x, int32_t idx, px_err *err) {
  px_optim_states s = {.param_dtype = x->plan->param_dtype, .grad_dtype = x->plan->grad_dtype, .params = x->params,
                       .master = x->master, .adam_m = x->adam_m, .adam_v = x->adam_v, .h_grads = x->h_grads,
                       .h_w = x->h_w, .h_m = x->h_m, .h_v = x->h_v, .h_params = x->h_params};
  double op_s[PX_OP_COUNT] = {0};
  int32_t n = x->prog->nparams;
  px_status st = px_optim_sum_partials(x->be, x->owned, n, &s, op_s, err);
  if (!st && x->capture) st = capture_grads(x, err);
  px_exec_op base = range_args(x);
  if (!st) st = px_optim_update(&x->opt, x->be, &base, x->owned, n, &s, x->step, op_s, err);
  for (int k = 0; k < PX_OP_COUNT; k++)
    if (op_s[k] > 0) add_op_time(x, idx, (px_op_kind)k, op_s[k]);
  return st;
}

/* ---- a step ---- */

static px_status zero_grads(px_exec *x, px_err *err) {
  if (x->h_grads) memset(x->h_grads, 0, x->opt_elems * sizeof *x->h_grads);
  return x->grads ? x->be->zero(x->be, x->grads, x->grads_elems * x->gb, err) : PX_OK;
}

px_status px_exec_step(px_exec *x, int64_t step, double *loss, px_err *err) {
  const px_program *prog = x->prog;
  const px_parallel *par = &x->plan->par;
  px_status st = zero_grads(x, err);
  x->step = step;
  x->loss_sum = x->mtp_loss_sum = 0;
  memset(x->marks, 0, (size_t)prog->ninsts * sizeof *x->marks);
  for (int32_t i = 0; i < prog->ninsts && !st;) {
    const px_inst *in = &prog->insts[i];
    px_block_kind k = (px_block_kind)in->block;
    /* PX_FAULT_KILL: a rank lost mid-step (at op I, or the p2p batch holding it); PX_FAULT_FAIL: its step fails */
    if (step == x->fault_step && i >= x->fault_inst && x->fault_fail) {
      st = px_err_set(err, PX_ERR_RUNTIME, "rank %d: PX_FAULT_FAIL: failed before op %d of %d of step %lld",
                      x->comm->world_rank, i, prog->ninsts, (long long)step);
      break;
    }
    if (step == x->fault_step && i >= x->fault_inst) {
      fprintf(stderr, "parallax: rank %d: PX_FAULT_KILL: killed before op %d of %d of step %lld\n",
              x->comm->world_rank, i, prog->ninsts, (long long)step);
      raise(SIGKILL);
    }
    if (in->mb >= 0)
      for (int64_t r = 0; r < par->mbs; r++)
        x->seq_index[r] = px_data_seq_index(step, par->gbs, par->dp, x->dp_rank, par->mbs, in->mb, r);
    px_stream s = stream_for(x, k);
    enter_stream(x, s);
    if (k == PX_BLOCK_OPTIMIZER || k == PX_BLOCK_EMB_SYNC) st = join_streams(x, err);
    if (!st) st = wait_deps(x, i, err);
    if (st) break;
    if (is_p2p(k) && in->batch >= 0) {
      int32_t next;
      st = run_p2p_batch(x, i, s, &next, err);
      i = next;
      continue;
    }
    double t0 = px_clock_s();
    switch (k) {
      case PX_BLOCK_GRAD_SYNC:
        st = run_grad_sync(x, in, px_inst_ops(x->plan, prog, in), x->op_time + x->first_op[i], err);
        break;
      case PX_BLOCK_PARAM_SYNC: st = run_param_sync(x, in, px_inst_ops(x->plan, prog, in), err); break;
      case PX_BLOCK_EMB_SYNC: st = run_emb_sync(x, px_inst_ops(x->plan, prog, in), err); break;
      case PX_BLOCK_OFFLOAD_GRAD: st = run_offload_grad(x, in, px_inst_ops(x->plan, prog, in), err); break;
      case PX_BLOCK_FETCH_PARAM: st = run_fetch_param(x, in, err); break;
      case PX_BLOCK_OFFLOAD_ACT: st = run_offload_act(x, in, err); break;
      case PX_BLOCK_FETCH_ACT: st = run_fetch_act(x, in, err); break;
      case PX_BLOCK_OPTIMIZER:
        st = run_optimizer(x, i, err);
        free_late(x);
        break;
      default:
        st = run_block(x, i, 0, err);
        /* ZeRO-3: the block after which its units' gathered parameters go */
        for (int32_t u = in->unit; !st && (in->flags & PX_INSTF_RESHARD) && u < in->unit + in->units; u++)
          if (x->gathered[u]) {
            mem_free(x, x->gathered[u], gathered_bytes(x, u));
            x->gathered[u] = NULL;
          }
        free_late(x);
        break;
    }
    if (k == PX_BLOCK_PARAM_SYNC || k == PX_BLOCK_EMB_SYNC || k == PX_BLOCK_OFFLOAD_GRAD || k == PX_BLOCK_FETCH_PARAM ||
        k == PX_BLOCK_OFFLOAD_ACT || k == PX_BLOCK_FETCH_ACT) {
      /* (a reduction times its ops itself) */
      st = op_done(x, st, err);
      x->op_time[x->first_op[i]] += px_clock_s() - t0;
    }
    mark_done(x, i, s);
    i++;
  }
  if (!st && x->nt != 0)
    st = px_err_set(err, PX_ERR_RUNTIME, "internal: %lld tensors still live after the step (first %s)", (long long)x->nt,
                    x->plan->slots[x->t[0].slot].name);
  if (!st) st = join_streams(x, err);
  if (!st) st = x->be->sync(x->be, err); /* the step ends when the device is done */
  /* The loss lives on the last stage's tp rank 0 of every DP replica: sum over all. The MTP module's over its
   * positions with a target (one fewer a sequence). */
  double sum[2] = {x->loss_sum, x->mtp_loss_sum};
  if (!st) st = x->be->host_allreduce(x->be, PX_GROUP_ALL, sum, 2, PX_HOST_DOUBLE, PX_RED_SUM, err);
  if (loss) *loss = sum[0] / ((double)par->gbs * (double)x->plan->seq);
  x->mtp_loss = par->mtp_layers > 0 ? sum[1] / ((double)par->gbs * (double)(x->plan->seq - PX_MTP_SHIFT)) : 0;
  x->timed_steps++;
  return st;
}

void px_exec_capture_grads(px_exec *x, bool on) { x->capture = on; }

double px_exec_grad_norm(const px_exec *x) { return x->opt.grad_norm; }

double px_exec_mtp_loss(const px_exec *x) { return x->mtp_loss; }

void px_exec_frozen_quant_sums(const px_exec *x, double sums[2]) { sums[0] = x->quant_sums[0], sums[1] = x->quant_sums[1]; }

px_status px_exec_frozen_hash(px_exec *x, uint64_t *hash, px_err *err) {
  *hash = 0;
  if (!x->frozen) return PX_OK;
  char *host = px_calloc((size_t)x->frozen_bytes, 1, err);
  if (!host) return PX_ERR_RUNTIME;
  px_status st = x->be->download(x->be, host, x->frozen, x->frozen_bytes, err);
  if (!st) *hash = px_ckpt_hash_bytes(host, (size_t)x->frozen_bytes, 0);
  free(host);
  return st;
}

void px_exec_loss_scale(const px_exec *x, double *scale, int64_t *skipped) {
  *scale = x->opt.scaler[0];
  *skipped = x->opt.skipped_steps;
}

px_status px_exec_write_grads(px_exec *x, const char *path, px_err *err) {
  if (!x->grad_copy) return px_err_set(err, PX_ERR_RUNTIME, "no gradients were captured");
  /* Every canonical element is owned by exactly one rank: take the non-NaN ones. */
  uint64_t n = x->global.total;
  for (uint64_t i = 0; i < n; i++)
    if (isnan(x->grad_copy[i])) x->grad_copy[i] = -INFINITY; /* MAX ignores it */
  px_status st = x->be->host_allreduce(x->be, PX_GROUP_ALL, x->grad_copy, n, PX_HOST_FLOAT, PX_RED_MAX, err);
  /* fine-tuning: the adapters' gradients only (the frozen base has none), in their canonical order */
  const px_global_params *g = &x->global;
  uint64_t lo = g->model_n < g->n ? g->t[g->model_n].offset : 0;
  if (!st && x->comm->world_rank == 0) st = px_file_write(path, x->grad_copy + lo, (n - lo) * sizeof *x->grad_copy, err);
  return st;
}

int px_exec_states(px_exec *x, px_exec_state *out, int cap) {
  px_param_state ps[PX_STATE_COUNT];
  int k = px_param_states(x->plan, x->stage, ps), n = 0;
  for (int i = 0; i < k && n < cap; i++) {
    void *p = NULL;
    switch (ps[i].kind) {
      case PX_STATE_PARAMS: p = ps[i].host ? (void *)x->h_params : (void *)x->params; break;
      case PX_STATE_MASTER: p = ps[i].host ? x->h_w : x->master; break;
      case PX_STATE_ADAM_M: p = ps[i].host ? x->h_m : x->adam_m; break;
      case PX_STATE_ADAM_V: p = ps[i].host ? x->h_v : x->adam_v; break;
      case PX_STATE_FP8_AMAX: p = x->amax_hist; break;
      default: p = x->opt.scaler; break;
    }
    out[n++] = (px_exec_state){px_state_names[ps[i].kind], p, ps[i].count, ps[i].dtype, ps[i].host};
  }
  return n;
}

px_status px_exec_states_get(px_exec *x, int64_t step, px_err *err) {
  return x->namax ? x->be->amax_histories(x->be, false, x->amax_keys, x->namax, step, x->amax_hist, err) : PX_OK;
}

px_status px_exec_states_set(px_exec *x, int64_t step, px_err *err) {
  return x->namax ? x->be->amax_histories(x->be, true, x->amax_keys, x->namax, step, x->amax_hist, err) : PX_OK;
}

const double *px_exec_op_times(const px_exec *x, int64_t *nops, int64_t *steps) {
  *nops = x->nops;
  *steps = x->timed_steps;
  return x->op_time;
}

void px_exec_reset_times(px_exec *x) {
  memset(x->op_time, 0, (size_t)x->nops * sizeof *x->op_time);
  x->timed_steps = 0;
}
