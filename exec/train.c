/* The training loop, checkpoints and the profile. */
#include "exec/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "core/json.h"
#include "exec/ckpt.h"
#include "exec/ckpt_lock.h"
#include "exec/ckpt_writer.h"
#include "exec/comm.h"
#include "exec/cpu/backend.h"
#include "exec/cuda_load.h"
#include "exec/data.h"
#include "exec/params.h"
#include "exec/reshard.h"
#include "exec/support.h"

void px_train_opts_init(px_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->steps = 10;
  o->hp = (px_train_hparams){.seed = 1234, .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                             .weight_decay = 0.1f, .clip = 1.0f};
}

static void ckpt_meta(const px_plan *plan, const px_comm *c, int64_t step, px_ckpt_meta *meta) {
  px_reshard_meta(plan, c->world_rank, step, meta);
}

/* Whether this rank's shard in dir lacks the fp8 amax histories its plan keeps (a checkpoint from
 * before they were kept); false when it cannot be read (the read that follows says why). */
static bool shard_lacks_amax(const char *dir, const px_comm *c) {
  px_ckpt_shard *s;
  px_err e = {0};
  bool lacks = !px_ckpt_shard_open(dir, c->world_rank, false, &s, &e) &&
               px_ckpt_shard_find(s, px_state_names[PX_STATE_FP8_AMAX], NULL) < 0;
  px_ckpt_shard_close(s);
  return lacks;
}

/* Reads this rank's model states from the checkpoint in dir: its own shard,
 * or with `other` (a checkpoint of another plan) what it needs of every shard.
 * *amax_fresh: the checkpoint held no fp8 amax histories for some of them. */
static px_status ckpt_load(px_exec *x, px_backend *be, const px_plan *plan, const px_comm *c, const char *dir,
                           px_reshard *other, int64_t step, int64_t *step_out, bool *amax_fresh, px_err *err) {
  px_exec_state states[8];
  int n = px_exec_states(x, states, 8), nread = n;
  px_ckpt_tensor t[8];
  void *raw[8] = {0}; /* device-format copies when the dtype is not fp32 */
  px_status st = PX_OK;
  /* Shards hold fp32: bf16 / fp16 states widen exactly and narrow back exactly. */
  for (int i = 0; i < n; i++) {
    uint64_t cnt = states[i].count, bytes = cnt * px_dtype_bytes(states[i].dtype);
    t[i] = (px_ckpt_tensor){states[i].name, malloc(cnt * sizeof(float) + 1), cnt};
    raw[i] = states[i].dtype == PX_DTYPE_FP32 ? (void *)t[i].data : malloc(bytes + 1);
    if (!t[i].data || !raw[i]) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  px_ckpt_meta meta;
  ckpt_meta(plan, c, step, &meta);
  *amax_fresh = false;
  if (!st && !other && n && !strcmp(states[n - 1].name, px_state_names[PX_STATE_FP8_AMAX]) &&
      shard_lacks_amax(dir, c)) { /* the others load; the histories are zeros: afresh */
    nread = n - 1, *amax_fresh = true;
    memset(t[n - 1].data, 0, t[n - 1].count * sizeof(float));
  }
  if (!st && other) st = px_reshard_fill(other, c->world_rank, t, n, err);
  else if (!st) st = px_ckpt_read_shard(dir, &meta, t, nread, step_out, err);
  if (!st && other) *amax_fresh = px_reshard_amax_fresh(other);
  for (int i = 0; !st && i < n; i++) {
    px_dtype_from_fp32(raw[i], states[i].dtype, t[i].data, states[i].count);
    uint64_t bytes = states[i].count * px_dtype_bytes(states[i].dtype);
    if (states[i].host)
      memcpy(states[i].data, raw[i], bytes);
    else
      st = be->upload(be, states[i].data, raw[i], bytes, err);
  }
  for (int i = 0; i < n; i++) {
    if (raw[i] != t[i].data) free(raw[i]);
    free(t[i].data);
  }
  return st ? st : px_exec_states_set(x, step, err);
}

/* --resume: loads the checkpoint in dir, this plan's or (re-split on the
 * fly) another plan's of the same model; *start gets its step. Collective. */
static px_status ckpt_resume(px_exec *x, px_backend *be, const px_plan *plan, const px_comm *c, const char *dir,
                             int64_t steps, uint64_t base_hash, int64_t *start, px_err *err) {
  MPI_Comm world = c->world;
  px_status st =
      dir ? PX_OK : px_err_set(err, PX_ERR_INPUT, "`resume` needs `ckpt_dir` (the directory to resume from)");
  px_ckpt_manifest man = {0};
  uint64_t plan_hash, model_hash;
  px_reshard_hashes(plan, &plan_hash, &model_hash);
  if (!st && c->world_rank == 0) st = px_ckpt_read_manifest(dir, &man, err);
  if (!st && c->world_rank == 0 && px_parallel_lora(&plan->par) && man.plan_hash == plan_hash) {
    /* the adapters were trained on a base the checkpoint does not hold: this run's must be it */
    const cJSON *h = man.plan ? cJSON_GetObjectItemCaseSensitive(man.plan, PX_RESHARD_FROZEN_HASH) : NULL;
    char mine[24];
    snprintf(mine, sizeof mine, "0x%016llx", (unsigned long long)base_hash);
    if (!cJSON_IsString(h) || strcmp(h->valuestring, mine))
      st = px_err_set(err, PX_ERR_INPUT, "%s: its adapters were trained on another frozen base (%s %s, this run's "
                      "%s: another `seed` or `base_ckpt`?): refused, the checkpoint is kept", dir, PX_RESHARD_FROZEN_HASH,
                      cJSON_IsString(h) ? h->valuestring : "missing", mine);
  }
  st = px_comm_agree_as(st, world, "another rank refused the checkpoint (rank 0 says why)", err);
  /* the manifest's step, and whether another plan wrote it (the model is checked where it is read) */
  long long head[2] = {man.step, man.plan_hash != plan_hash};
  if (!st) st = px_comm_bcast(world, head, sizeof head, 0, err);
  px_ckpt_manifest_deinit(&man);
  /* steps counts from step 0, the resumed ones included: fewer than the checkpoint has done would train
   * nothing and say nothing (every rank has the same head: they agree) */
  if (!st && head[0] > steps)
    st = c->world_rank != 0 ? px_err_set(err, PX_ERR_INPUT, "another rank refused the checkpoint (rank 0 says why)")
                            : px_err_set(err, PX_ERR_INPUT,
                                         "%s: the checkpoint is of step %lld, past `steps` %lld "
                                         "(the steps to be done in all, the resumed ones included): refused, the "
                                         "checkpoint is kept (hint: `steps` %lld or more trains on from it)",
                                         dir, head[0], (long long)steps, head[0] + 1);
  if (!st && head[0] == steps && c->world_rank == 0)
    fprintf(stderr, "parallax: %s: the checkpoint is of step %lld, the last one asked for: nothing left to train\n", dir,
            head[0]);
  px_reshard *other = NULL;
  if (!st && head[1]) {
    /* every rank indexes the old shards, rank r checking the checksums of r, r + world, ...; rank 0 first,
     * alone to refuse what all would (another model, no plan record) */
    px_status mine = c->world_rank == 0 ? px_reshard_open(dir, plan, 0, c->world_size, &other, err) : PX_OK;
    st = px_comm_agree_as(mine, world, "another rank refused the checkpoint (rank 0 says why)", err);
    if (!st && c->world_rank != 0) mine = px_reshard_open(dir, plan, c->world_rank, c->world_size, &other, err);
    if (!st) st = px_comm_agree_as(mine, world, "another rank refused the checkpoint (see its message)", err);
    if (!st && c->world_rank == 0) {
      char from[256], to[256];
      px_reshard_describe(px_reshard_from(other), from, sizeof from);
      px_reshard_describe(plan, to, sizeof to);
      fprintf(stderr, "parallax: %s: the checkpoint of step %lld was written by another plan (%s): its states are "
              "re-split for this one (%s)\n", dir, head[0], from, to);
    }
  }
  int64_t got = 0;
  bool fresh = false;
  if (!st) st = px_comm_agree(ckpt_load(x, be, plan, c, dir, other, head[0], &got, &fresh, err), world, err);
  px_reshard_free(other);
  int any = fresh;
  if (!st) st = px_comm_allreduce(world, &any, &any, 1, PX_HOST_INT, PX_RED_MAX, err);
  if (!st && any && c->world_rank == 0)
    fprintf(stderr, "parallax: %s: note: the checkpoint holds no fp8 amax history for some of this plan's tensors "
            "(its plan had no delayed scaling, or it was written before checkpoints kept them): delayed scaling "
            "starts those afresh, so the run is not the one it continues bit for bit\n", dir);
  if (!st) *start = head[0];
  return st;
}

/* A writer whose snapshot buffers fit this rank's states. */
static px_status ckpt_writer_for(px_exec *x, bool async, px_ckpt_writer **w, px_err *err) {
  px_exec_state states[8];
  int n = px_exec_states(x, states, 8);
  px_ckpt_tensor layout[8];
  for (int i = 0; i < n; i++) layout[i] = (px_ckpt_tensor){states[i].name, NULL, states[i].count};
  /* Test hook: a slow write, so that a test can stop the run in the middle of one. */
  const char *delay = getenv("PX_CKPT_TEST_DELAY_MS");
  long ms = delay ? strtol(delay, NULL, 10) : 0;
  return px_ckpt_writer_new(layout, n, async, ms > 0 && ms < 3600000 ? (unsigned)ms : 0, w, err);
}

/* Copies this rank's model states before step `step` into the writer's fp32
 * snapshot (from the device where they live there). */
static px_status ckpt_snapshot(px_exec *x, px_backend *be, px_ckpt_writer *w, int64_t step, px_err *err) {
  px_exec_state states[8];
  int n = px_exec_states(x, states, 8);
  px_status st = px_exec_states_get(x, step, err);
  for (int i = 0; !st && i < n; i++) {
    float *dst = px_ckpt_writer_buffer(w, i); /* (count) */
    uint64_t cnt = states[i].count, bytes = cnt * px_dtype_bytes(states[i].dtype);
    void *raw = states[i].dtype == PX_DTYPE_FP32 ? (void *)dst : malloc(bytes + 1);
    if (!raw) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    else if (states[i].host) memcpy(raw, states[i].data, bytes);
    else st = be->download(be, raw, states[i].data, bytes, err);
    if (!st && raw != dst) px_dtype_to_fp32(dst, raw, states[i].dtype, cnt);
    if (raw != dst) free(raw);
  }
  return st;
}

/* Fine-tuning: the frozen base from the checkpoint in dir (a run that trained every weight), re-split for this
 * plan. Collective. */
static px_status load_base(px_exec *x, const px_plan *plan, const px_comm *c, const char *dir, px_err *err) {
  MPI_Comm world = c->world;
  px_reshard *b = NULL;
  /* rank 0 first, alone to refuse what all would; then every rank, checking a share of the shards */
  px_status mine = c->world_rank == 0 ? px_reshard_open_base(dir, plan, 0, c->world_size, &b, err) : PX_OK;
  px_status st = px_comm_agree_as(mine, world, "another rank refused the base checkpoint (rank 0 says why)", err);
  if (!st && c->world_rank != 0) mine = px_reshard_open_base(dir, plan, c->world_rank, c->world_size, &b, err);
  if (!st) st = px_comm_agree_as(mine, world, "another rank refused the base checkpoint (see its message)", err);
  uint64_t n = plan->programs[c->pp_rank].frozen_elems;
  float *w = NULL;
  if (!st) {
    w = px_calloc((size_t)n + 1, sizeof *w, err);
    mine = w ? px_reshard_fill_base(b, c->world_rank, w, n, err) : PX_ERR_RUNTIME;
    if (!mine) mine = px_exec_frozen_set(x, w, err);
    st = px_comm_agree(mine, world, err);
  }
  if (!st && c->world_rank == 0) {
    char from[256];
    px_reshard_describe(px_reshard_from(b), from, sizeof from);
    fprintf(stderr, "parallax: %s: the frozen base is the weights of its checkpoint of step %lld (%s)\n", dir,
            (long long)px_reshard_step(b), from);
  }
  free(w);
  px_reshard_free(b);
  return st;
}

/* Checkpoints of one run: the writer and what it did. */
typedef struct {
  px_ckpt_writer *w;
  int64_t keep;     /* --ckpt-keep (px_ckpt_commit_keep) */
  bool resumed;     /* the run went on from the checkpoint in the directory (else its first commit replaces it) */
  uint64_t base_hash; /* fine-tuning: the frozen base's hash summed over the ranks (PX_RESHARD_FROZEN_HASH) */
  int64_t step;     /* of the write started last */
  int64_t count, waits;
  double blocked_s; /* the training loop's time spent on checkpoints */
} ckpt_run;

/* "the last complete one, step 4 in DIR, is untouched", or that there is none: after a failed write. */
static void say_last(const char *dir, char *buf, size_t cap) {
  px_ckpt_probe_info p;
  px_ckpt_probe(dir, &p);
  if (p.found && p.step >= 0)
    snprintf(buf, cap, "the last complete one, step %lld in %s, is untouched", (long long)p.step, dir);
  else if (p.found) snprintf(buf, cap, "the last complete one in %s is untouched", dir);
  else snprintf(buf, cap, "%s holds no complete checkpoint yet", dir);
}

/* Every rank's shard of step cs->step is written (mine: this rank's write's
 * status, or the async write's to wait for): when all succeeded and are
 * durable, rank 0 writes the manifest and moves the checkpoint in. Collective. */
static px_status ckpt_commit_all(ckpt_run *cs, px_status mine, const px_plan *plan, const px_comm *c, const char *dir,
                                 px_err *err) {
  if (px_ckpt_writer_pending(cs->w)) mine = px_ckpt_writer_wait(cs->w, err);
  if (mine) {
    char last[4300];
    say_last(dir, last, sizeof last);
    px_err_prefix(err, "checkpoint of step %lld not written (%s)", (long long)cs->step, last);
  }
  px_status st = px_comm_agree(mine, c->world, err);
  bool wrote = !st;
  if (!st && c->world_rank == 0) {
    px_ckpt_meta meta;
    ckpt_meta(plan, c, cs->step, &meta);
    cJSON *record = px_reshard_record(plan); /* what a reader needs to re-split it for another plan */
    char h[24];
    snprintf(h, sizeof h, "0x%016llx", (unsigned long long)cs->base_hash);
    if (record && px_parallel_lora(&plan->par) && !cJSON_AddStringToObject(record, PX_RESHARD_FROZEN_HASH, h))
      cJSON_Delete(record), record = NULL;
    st = record ? px_ckpt_commit_keep(dir, &meta, record, cs->keep, !cs->resumed && cs->count == 0, err)
                : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    cJSON_Delete(record);
    if (st) px_err_prefix(err, "checkpoint of step %lld not committed", (long long)cs->step);
  }
  /* every rank's write has ended: what a failed one left in staging goes (the
   * next run would remove it; a commit past its manifest stands) */
  if (st && c->world_rank == 0) {
    px_err ignored = {0};
    px_ckpt_abandon(dir, &ignored);
  }
  if (wrote) st = px_comm_agree(st, c->world, err);
  if (!st) cs->count++;
  return st;
}

/* The checkpoint of step `step` (the states after it): waits for the write
 * in flight, snapshots, and writes (sync) or starts writing (async). Collective. */
static px_status ckpt_save(ckpt_run *cs, px_exec *x, px_backend *be, const px_plan *plan, const px_comm *c,
                           const char *dir, int64_t step, px_err *err) {
  px_status st = PX_OK;
  if (px_ckpt_writer_pending(cs->w)) {
    int busy = px_ckpt_writer_busy(cs->w); /* on any rank */
    if ((st = px_comm_allreduce(c->world, &busy, &busy, 1, PX_HOST_INT, PX_RED_MAX, err))) return st;
    if (busy) {
      cs->waits++;
      if (c->world_rank == 0)
        fprintf(stderr, "parallax: checkpoint of step %lld waits for the write of step %lld to finish\n",
                (long long)step, (long long)cs->step);
    }
    st = ckpt_commit_all(cs, PX_OK, plan, c, dir, err);
  }
  if (!st) st = px_comm_agree(ckpt_snapshot(x, be, cs->w, step, err), c->world, err);
  if (st) return st;
  char staging[4096];
  px_ckpt_meta meta;
  ckpt_meta(plan, c, step, &meta);
  st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  if (!st) st = px_ckpt_writer_start(cs->w, staging, &meta, err);
  cs->step = step;
  if (!px_ckpt_writer_async(cs->w)) return ckpt_commit_all(cs, st, plan, c, dir, err);
  return px_comm_agree(st, c->world, err);
}

/* At a safe point between steps: commits the write in flight when every
 * rank's has finished (never waits). Collective while a write is pending. */
static px_status ckpt_poll(ckpt_run *cs, const px_plan *plan, const px_comm *c, const char *dir, px_err *err) {
  if (!cs->w || !px_ckpt_writer_pending(cs->w)) return PX_OK;
  int busy = px_ckpt_writer_busy(cs->w); /* on any rank */
  px_status st = px_comm_allreduce(c->world, &busy, &busy, 1, PX_HOST_INT, PX_RED_MAX, err);
  return st || busy ? st : ckpt_commit_all(cs, PX_OK, plan, c, dir, err);
}

/* Refuses, before anything is allocated, a plan with an op the backend
 * cannot run. Every rank asks about every stage's ops, so the verdict is the
 * same everywhere and rank 0 alone says it (a rank that alone refuses says
 * it itself). */
static px_status check_support(const px_plan *plan, px_backend *be, const px_comm *c, px_err *err) {
  px_status st = px_support_check(be, plan, err);
  int all[2] = {(int)st, c->world_rank == 0 && st != PX_OK};
  px_status agreed = px_comm_allreduce(c->world, all, all, 2, PX_HOST_INT, PX_RED_MAX, err);
  if (agreed) return agreed;
  px_status worst = (px_status)all[0];
  if (st && c->world_rank != 0 && all[1]) return px_err_set(err, worst, "another rank refused the plan (rank 0 says why)");
  if (!st && worst) return px_err_set(err, worst, "another rank refused the plan (see its message)");
  if (worst && err) err->status = worst;
  return worst;
}


/* The ops of stage s's program, each timed in a profile. */
static int64_t stage_ops(const px_plan *plan, int64_t s) {
  int64_t n = 0;
  const px_program *prog = &plan->programs[s];
  for (int32_t i = 0; i < prog->ninsts; i++) n += plan->blocks[prog->insts[i].block].nops;
  return n;
}

/* A profile of steps steps fits what compare reads: refused before training otherwise. */
static px_status profile_fits(const px_plan *plan, const px_train_opts *o, const px_comm *c, px_err *err) {
  int64_t n = o->steps; /* a time per step, and per op of each stage */
  for (int64_t s = 0; s < plan->par.pp; s++) n += stage_ops(plan, s);
  int64_t most = (int64_t)(PX_PROFILE_MAX_BYTES / PX_PROFILE_NUMBER_BYTES);
  if (!o->profile_path || n <= most) return PX_OK;
  if (c->world_rank != 0) return px_err_set(err, PX_ERR_INPUT, "another rank refused `profile_path` (rank 0 says why)");
  return px_err_set(err, PX_ERR_INPUT, "`profile_path` %s: %lld steps and %lld ops a step are more than the %lld "
                    "times a profile may hold (what parallax compare reads); profile fewer steps or micro-batches",
                    o->profile_path, (long long)o->steps, (long long)(n - o->steps), (long long)most);
}

static px_status write_profile(const px_plan *plan, px_exec *x, const px_comm *c, const char *backend, const char *path,
                               const double *step_times, int64_t nsteps, px_err *err) {
  /* Each stage's tp 0 / dp 0 rank sends its op times to rank 0. */
  int64_t nops, steps;
  const double *t = px_exec_op_times(x, &nops, &steps);
  bool sender = c->tp_rank == 0 && c->wdp_rank == 0;
  cJSON *root = NULL, *stages = NULL;
  if (c->world_rank == 0) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "parallax-profile/1");
    cJSON_AddStringToObject(root, "model", plan->model.name);
    cJSON_AddStringToObject(root, "backend", backend);
    cJSON_AddItemToObject(root, "parallel", px_parallel_to_json(&plan->par));
    px_json_add_num(root, "timed_steps", (double)steps);
    cJSON *st = cJSON_AddArrayToObject(root, "step_times_s");
    for (int64_t i = 0; st && i < nsteps; i++) cJSON_AddItemToArray(st, cJSON_CreateNumber(step_times[i]));
    stages = cJSON_AddArrayToObject(root, "stages");
  }
  px_status status = PX_OK;
  for (int64_t s = 0; s < plan->par.pp; s++) {
    int src = (int)px_grid_rank(&plan->grid, 0, 0, 0, s);
    int64_t n = stage_ops(plan, s);
    double *buf = NULL;
    if (c->world_rank == 0) {
      buf = malloc((size_t)n * sizeof *buf + 1);
      if (!buf) status = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    }
    if (src == 0 && c->world_rank == 0) {
      if (buf) memcpy(buf, t, (size_t)n * sizeof *buf);
    } else if (c->world_rank == src && sender) {
      status = px_comm_send(c->world, t, (uint64_t)nops * sizeof *t, 0, 77, err);
    } else if (c->world_rank == 0) {
      px_status got = px_comm_recv(c->world, buf, (uint64_t)n * sizeof *buf, src, 77, err);
      if (!status) status = got;
    }
    if (c->world_rank == 0 && buf) {
      cJSON *so = cJSON_CreateObject();
      px_json_add_num(so, "stage", (double)s);
      cJSON *ops = cJSON_AddArrayToObject(so, "op_s_per_step");
      for (int64_t k = 0; ops && k < n; k++) cJSON_AddItemToArray(ops, cJSON_CreateNumber(steps ? buf[k] / (double)steps : 0));
      cJSON_AddItemToArray(stages, so);
    }
    free(buf);
  }
  if (c->world_rank == 0 && !status) status = px_json_write(path, root, err);
  cJSON_Delete(root);
  return status;
}

/* Rank 0, before anything reads or writes the checkpoint directory: creates
 * it and takes its lock (a second job on it is refused), and refuses one
 * holding a checkpoint the run was not told to resume or replace. */
static px_status take_ckpt_dir(const px_train_opts *o, px_ckpt_lock *lock, px_err *err) {
  const char *dir = o->ckpt_dir;
  char note[4800];
  px_status st = px_ckpt_lock_take(dir, lock, note, sizeof note, err);
  if (st) return px_err_prefix(err, "`ckpt_dir`");
  if (note[0]) fprintf(stderr, "parallax: %s\n", note);
  px_ckpt_probe_info p;
  px_ckpt_probe(dir, &p);
  if ((p.found || p.kept) && !o->resume && !o->overwrite) {
    char what[600];
    px_ckpt_probe_describe(&p, what, sizeof what);
    return px_err_set(err, PX_ERR_INPUT, "`ckpt_dir` %s already holds %s: add `resume` to go on from it, or "
                      "`overwrite` to replace it (it stays until this run's first checkpoint is written), or give "
                      "another directory", dir, what);
  }
  return PX_OK;
}

/* Every place the run writes, checked before it computes anything: the
 * checkpoint directory (above), the profile, the gradients file. Rank 0
 * checks, every rank returns the verdict (2 for a refusal). Collective. */
static px_status check_outputs(const px_train_opts *o, const px_comm *c, px_ckpt_lock *lock, px_err *err) {
  px_status st = PX_OK;
  if (c->world_rank == 0) {
    if (o->ckpt_dir) st = take_ckpt_dir(o, lock, err);
    if (!st && o->profile_path && (st = px_file_check_writable(o->profile_path, err)))
      px_err_prefix(err, "`profile_path`");
    if (!st && o->grads_path && (st = px_file_check_writable(o->grads_path, err))) px_err_prefix(err, "`grads_path`");
  }
  return px_comm_agree_as(st, c->world, "another rank refused the run's outputs (rank 0 says why)", err);
}

/* The CUDA module, loaded here only when it is asked for (NULL: none). */
static const px_cuda_module *cuda_module(void) {
  const px_cuda_module *m = NULL;
  px_err e = {0};
  return px_cuda_load(&m, &e) ? NULL : m;
}

const char *px_train_default_backend(void) {
  if (!px_cuda_driver_present()) return "cpu"; /* no driver, no device: the module is not worth loading */
  const px_cuda_module *m = cuda_module();
  return m && m->device_count() > 0 ? "cuda" : "cpu";
}

const char *px_train_default_cluster(const char *backend) {
  if (strcmp(backend, "cuda") != 0) return "local-cpu";
  char name[256] = "";
  const px_cuda_module *m = cuda_module();
  if (m) m->device_name(name, sizeof name);
  if (strstr(name, "A100")) return "dgx-a100";
  if (strstr(name, "H200")) return "hgx-h200";
  return "dgx-h100";
}

px_status px_train_support(const px_plan *plan, const char *backend, px_err *err) {
  if (strcmp(backend, "cpu") != 0) return PX_OK;
  px_backend probe;
  px_cpu_backend_probe(&probe);
  return px_support_check(&probe, plan, err);
}

static px_status make_backend(const px_train_opts *o, const px_comm *c, px_backend **be, px_err *err) {
  const char *want = o->backend ? o->backend : px_train_default_backend();
  if (!strcmp(want, "cpu")) return px_cpu_backend_new(c, o->threads, be, err);
  if (strcmp(want, "cuda") != 0) return px_err_set(err, PX_ERR_INPUT, "`backend`: '%s' is not cpu or cuda", want);
  const px_cuda_module *m;
  px_status st = px_cuda_load(&m, err);
  if (st) return px_err_prefix(err, "`backend` cuda");
  return m->backend_new(c, be, err);
}

px_status px_train(const px_plan *plan, const px_train_opts *o, MPI_Comm world, px_train_result *r, px_err *err) {
  memset(r, 0, sizeof *r);
  px_comm comm;
  px_status st = px_comm_init(&comm, &plan->grid, px_plan_shares_embedding(plan), world, err);
  if (st) return st;
  r->is_root = comm.world_rank == 0;
  px_backend *be = NULL;
  px_data *data = NULL;
  px_exec *x = NULL;
  double *times = NULL;
  px_ckpt_lock lock = {0}; /* rank 0's, of the checkpoint directory */
  st = check_outputs(o, &comm, &lock, err);
  if (!st) st = profile_fits(plan, o, &comm, err); /* the same on every rank */
  if (!st) st = px_comm_agree(make_backend(o, &comm, &be, err), world, err);
  if (!st) {
    r->backend = be->name;
    r->threads = !strcmp(be->name, "cpu") ? px_cpu_backend_threads(be) : 0;
    be->sync_ops = o->time_ops || o->profile_path;
    st = check_support(plan, be, &comm, err);
  }
  if (!st) {
    int64_t vocab = plan->model.vocab;
    st = o->data_path ? px_data_open(o->data_path, PX_DATA_AUTO, vocab, &data, err)
                      : px_data_open_synthetic(vocab, o->hp.seed, &data, err);
    st = px_comm_agree(st, world, err);
  }
  if (!st) st = px_comm_agree(px_exec_new(plan, be, &comm, data, &o->hp, &x, err), world, err);
  /* What a run stopped while checkpointing left behind is put in order first. */
  if (!st && o->ckpt_dir) {
    px_ckpt_recovery what = PX_CKPT_RECOVERY_NONE;
    if (comm.world_rank == 0) st = px_ckpt_recover(o->ckpt_dir, &what, err);
    if (what == PX_CKPT_RECOVERY_DISCARDED) {
      char last[4300];
      say_last(o->ckpt_dir, last, sizeof last);
      fprintf(stderr, "parallax: %s: removed the incomplete checkpoint a stopped run was writing (%s); %s\n",
              o->ckpt_dir, PX_CKPT_STAGING, last);
    }
    else if (what == PX_CKPT_RECOVERY_COMPLETED)
      fprintf(stderr, "parallax: %s: finished moving in the complete checkpoint a stopped run was committing\n",
              o->ckpt_dir);
    st = px_comm_agree(st, world, err);
  }
  ckpt_run cs = {.keep = o->ckpt_keep, .resumed = o->resume};
  if (!st && o->ckpt_dir) st = px_comm_agree(ckpt_writer_for(x, o->ckpt_async, &cs.w, err), world, err);
  int64_t start = 0;
  if (!st && o->base_ckpt) st = load_base(x, plan, &comm, o->base_ckpt, err);
  uint64_t frozen0 = 0; /* fine-tuning: the frozen base as the run starts, this rank's and summed over the ranks */
  if (!st) st = px_comm_agree(px_exec_frozen_hash(x, &frozen0, err), world, err);
  unsigned long long base_sum = frozen0;
  if (!st) st = px_comm_allreduce(world, &base_sum, &base_sum, 1, PX_HOST_ULLONG, PX_RED_SUM, err);
  cs.base_hash = base_sum;
  double qs[2] = {0, 0}; /* an nf4 or fp8 base's quantisation error and squares, summed over the ranks */
  if (!st) px_exec_frozen_quant_sums(x, qs);
  if (!st) st = px_comm_allreduce(world, qs, qs, 2, PX_HOST_DOUBLE, PX_RED_SUM, err);
  r->base_quant_error = qs[1] > 0 ? sqrt(qs[0] / qs[1]) : 0;
  if (!st && o->resume) st = ckpt_resume(x, be, plan, &comm, o->ckpt_dir, o->steps, cs.base_hash, &start, err);
  int64_t n = o->steps > start ? o->steps - start : 0;
  r->first_step = start;
  r->steps = n;
  r->losses = calloc((size_t)n + 1, sizeof *r->losses);
  times = calloc((size_t)n + 1, sizeof *times);
  if (!st && (!r->losses || !times)) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int64_t k = 0; !st && k < n; k++) {
    int64_t step = start + k;
    if (k == 1) px_exec_reset_times(x); /* the first step warms up */
    px_exec_capture_grads(x, o->grads_path && k == 0);
    px_comm_barrier(world);
    double t0 = px_clock_s();
    st = px_comm_agree(px_exec_step(x, step, &r->losses[k], err), world, err);
    /* the slowest rank's time and the largest rank's peak (exact in a double) */
    double most[2] = {px_clock_s() - t0, (double)px_exec_peak_bytes(x)};
    if (!st) st = px_comm_allreduce(world, most, most, 2, PX_HOST_DOUBLE, PX_RED_MAX, err);
    double dt = most[0];
    times[k] = dt;
    if (!st && o->on_step && comm.world_rank == 0) {
      px_train_step ts = {.step = step + 1, .last = o->steps, .loss = r->losses[k], .mtp_loss = px_exec_mtp_loss(x),
                          .grad_norm = px_exec_grad_norm(x),
                          .step_time_s = dt, .peak_bytes = (uint64_t)most[1]};
      int64_t skipped;
      px_exec_loss_scale(x, &ts.loss_scale, &skipped);
      o->on_step(o->on_step_ctx, &ts);
    }
    if (!st && k == 0 && o->grads_path) st = px_comm_agree(px_exec_write_grads(x, o->grads_path, err), world, err);
    bool save = o->ckpt_dir && ((o->ckpt_every > 0 && (step + 1) % o->ckpt_every == 0) || k == n - 1);
    double c0 = px_clock_s();
    if (!st && save) st = ckpt_save(&cs, x, be, plan, &comm, o->ckpt_dir, step + 1, err);
    if (!st) st = ckpt_poll(&cs, plan, &comm, o->ckpt_dir, err);
    cs.blocked_s += px_clock_s() - c0;
  }
  /* The last write is finished and committed before the run ends. */
  if (!st && cs.w && px_ckpt_writer_pending(cs.w)) {
    double c0 = px_clock_s();
    st = ckpt_commit_all(&cs, PX_OK, plan, &comm, o->ckpt_dir, err);
    cs.blocked_s += px_clock_s() - c0;
  }
  if (!st) {
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t k = n > 1 ? 1 : 0; k < n; k++) sum += times[k], cnt++;
    r->step_time_s = cnt ? sum / (double)cnt : 0;
    r->tokens_per_s = r->step_time_s > 0 ? (double)plan->par.gbs * (double)plan->seq / r->step_time_s : 0;
    /* the largest rank's: device peak, the backend's own memory, the snapshot */
    unsigned long long mine = px_exec_peak_bytes(x), most[3] = {mine, be->own_bytes ? be->own_bytes(be) : 0,
                                                                 cs.w ? px_ckpt_writer_bytes(cs.w) : 0};
    st = px_comm_allreduce(world, most, most, 3, PX_HOST_ULLONG, PX_RED_MAX, err);
    r->peak_bytes = most[0];
    r->backend_bytes = most[1];
    px_exec_loss_scale(x, &r->loss_scale, &r->skipped_steps);
    uint64_t frozen1 = 0;
    if (!st) st = px_comm_agree(px_exec_frozen_hash(x, &frozen1, err), world, err);
    if (!st)
      st = px_comm_agree(frozen1 == frozen0 ? PX_OK
                                            : px_err_set(err, PX_ERR_RUNTIME, "internal: rank %lld's frozen base "
                                                         "weights changed while training", (long long)comm.world_rank),
                         world, err);
    r->frozen_hash = cs.base_hash;
    if (cs.w) {
      r->ckpt_snapshot_bytes = most[2];
      r->ckpt_async = o->ckpt_async;
      r->ckpt_count = cs.count;
      r->ckpt_waits = cs.waits;
      r->ckpt_blocked_s = cs.blocked_s;
    }
    /* per stage, the largest rank's: device peak, host memory and NVMe */
    uint64_t host, nvme;
    px_exec_offload_bytes(x, &host, &nvme);
    unsigned long long own3[3] = {mine, host, nvme};
    uint64_t **outs[3] = {&r->stage_peak_bytes, &r->stage_host_bytes, &r->stage_nvme_bytes};
    unsigned long long *per = calloc((size_t)plan->par.pp, sizeof *per);
    for (int k = 0; k < 3 && per && !st; k++) {
      *outs[k] = calloc((size_t)plan->par.pp, sizeof **outs[k]);
      memset(per, 0, (size_t)plan->par.pp * sizeof *per);
      per[comm.pp_rank] = own3[k];
      st = px_comm_allreduce(world, per, per, (uint64_t)plan->par.pp, PX_HOST_ULLONG, PX_RED_MAX, err);
      for (int64_t s = 0; *outs[k] && s < plan->par.pp; s++) (*outs[k])[s] = per[s];
    }
    free(per);
    for (int64_t s = 0; s < plan->par.pp; s++)
      if (plan->mem[s].peak_bytes > r->predicted_peak_bytes) r->predicted_peak_bytes = plan->mem[s].peak_bytes;
    int64_t nops, timed;
    const double *ot = px_exec_op_times(x, &nops, &timed);
    r->op_s = malloc((size_t)nops * sizeof *r->op_s + 1);
    r->nops = r->op_s ? nops : 0;
    for (int64_t k = 0; r->op_s && k < nops; k++) r->op_s[k] = timed ? ot[k] / (double)timed : 0;
    if (o->profile_path) st = px_comm_agree(write_profile(plan, x, &comm, be->name, o->profile_path, times, n, err), world, err);
  }
  free(times);
  px_ckpt_writer_free(cs.w); /* after a failure, a write in flight is finished and left uncommitted */
  px_ckpt_lock_release(&lock);
  px_exec_free(x);
  px_data_close(data);
  if (be) be->destroy(be);
  px_comm_deinit(&comm);
  if (st) px_train_result_free(r);
  return st;
}
