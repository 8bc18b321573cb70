/* The executor in one process (one MPI rank), so the sanitizers see it:
 * every op kind on both model families (dropout, both attention kernels,
 * every recompute mode), the allocated peak equal to the plan's prediction,
 * training lowering the loss, and fp8 delayed scaling's amax histories:
 * their keys, their checkpoint form (a history saved and loaded gives the
 * same scales, past the history's length too), a resume that is the
 * uninterrupted run bitwise, and a checkpoint without them (from before they
 * were kept) resumed with them afresh. Multi-rank plans are tested through
 * mpirun in tests/cli/exec_*.sh. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/amax.h"
#include "exec/comm.h"
#include "exec/cpu/backend.h"
#include "exec/data.h"
#include "exec/interp.h"
#include "exec/ckpt.h"
#include "exec/params.h"
#include "exec/reshard.h"
#include "exec/train.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/nf4.h"
#include "plan/lora.h"
#include "tests/testutil.h"

static void train(const char *model, double dropout, int attention, int recompute, int64_t steps, px_train_result *r) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(model, &m, &err), PX_OK);
  m.dropout = dropout;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("local-cpu", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 1, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.gbs = 4, p.mbs = 2, p.attention = attention, p.recompute = recompute, p.precision = PX_PREC_FP32;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  px_train_opts o;
  px_train_opts_init(&o);
  o.steps = steps;
  o.backend = "cpu";
  px_status st = px_train(&plan, &o, MPI_COMM_WORLD, r, &err);
  if (st) fprintf(stderr, "\n  %s: %s\n", model, err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(r->peak_bytes, plan.mem[0].peak_bytes);
  CU_ASSERT_EQUAL(r->predicted_peak_bytes, plan.mem[0].peak_bytes);
  px_plan_free(&plan);
}

static void test_all_ops(void) {
  const char *models[] = {"tiny", "tiny-gpt"};
  for (int mi = 0; mi < 2; mi++)
    for (int att = 0; att < PX_ATTN_COUNT; att++)
      for (int rc = 0; rc < PX_RECOMPUTE_COUNT; rc++) {
        if (rc == PX_RECOMPUTE_OP && (mi == 1 || att == PX_ATTN_UNFUSED)) continue; /* refused: biases, unfused */
        px_train_result r;
        train(models[mi], mi == 1 ? 0.1 : 0.0, att, rc, 2, &r);
        CU_ASSERT(isfinite(r.losses[0]) && r.losses[0] > 5.0 && r.losses[0] < 6.0); /* ln 256 = 5.55 */
        px_train_result_free(&r);
      }
}

/* Recomputation replays the same dropout masks: the losses are identical. */
static void test_recompute_same_losses(void) {
  px_train_result a, b;
  train("tiny-gpt", 0.1, PX_ATTN_UNFUSED, PX_RECOMPUTE_NONE, 3, &a);
  train("tiny-gpt", 0.1, PX_ATTN_UNFUSED, PX_RECOMPUTE_FULL, 3, &b);
  for (int k = 0; k < 3; k++) PX_ASSERT_REL(b.losses[k], a.losses[k], 1e-6);
  px_train_result_free(&a);
  px_train_result_free(&b);
}

static void test_loss_falls(void) {
  px_train_result r;
  train("tiny", 0.0, PX_ATTN_FLASH, PX_RECOMPUTE_NONE, 30, &r);
  CU_ASSERT(r.losses[29] < r.losses[0] - 0.3);
  px_train_result_free(&r);
}

/* tiny in fp8 (fp32 base) with the recipe r, on one rank or (pp > 1) on pp stages with a schedule. */
static void compile_fp8_pp(int recipe, int64_t pp, int schedule, px_plan *plan) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, pp, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.gbs = 4, p.mbs = pp > 1 ? 1 : 2, p.precision = PX_PREC_FP8, p.fp8_recipe = recipe, p.fp8_base = PX_FP8_BASE_FP32;
  p.pp = pp;
  if (pp > 1) p.schedule = schedule, p.vpp = schedule == PX_SCHED_INTERLEAVED ? 2 : 1;
  px_parallel_resolve(&p, &m, &c);
  px_status st = px_plan_compile(plan, &m, &c, &p, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
}

static void compile_fp8(int recipe, px_plan *plan) { compile_fp8_pp(recipe, 1, 0, plan); }

/* The keys: with delayed scaling only, each once, by (layer, slot), each a cast's output or an fp8 weight. */
static void test_amax_keys(void) {
  px_plan plan;
  compile_fp8(PX_FP8_DELAYED, &plan);
  int64_t n = px_param_amax_keys(&plan, 0, NULL, 0);
  CU_ASSERT_FATAL(n > 4 * plan.model.layers);
  px_amax_key *k = px_talloc((size_t)n * sizeof *k);
  CU_ASSERT_EQUAL(px_param_amax_keys(&plan, 0, k, n), n);
  for (int64_t i = 0; i < n; i++) {
    const px_slot *s = &plan.slots[k[i].slot];
    CU_ASSERT((s->kind == PX_SLOT_PARAM && s->fp8) || s->dtype == PX_DTYPE_FP8);
    CU_ASSERT(k[i].layer >= -1 && k[i].layer <= plan.model.layers); /* an operand's layer offset: one off */
    if (i) CU_ASSERT(k[i].layer > k[i - 1].layer || (k[i].layer == k[i - 1].layer && k[i].slot > k[i - 1].slot));
  }
  px_param_state ps[PX_STATE_COUNT];
  int m = px_param_states(&plan, 0, ps);
  CU_ASSERT(ps[m - 1].kind == PX_STATE_FP8_AMAX && ps[m - 1].count == (uint64_t)n * PX_FP8_AMAX_HISTORY);
  px_plan_free(&plan);
  /* every micro-batch's casts and fp8 weights are among them, in every schedule (the keys walk micro-batch 0's) */
  for (int sched = PX_SCHED_GPIPE; sched < PX_SCHED_COUNT; sched++) {
    compile_fp8_pp(PX_FP8_DELAYED, 2, sched, &plan);
    for (int64_t st = 0; st < 2; st++) {
      int64_t nk = px_param_amax_keys(&plan, st, NULL, 0), missing = 0;
      px_amax_key *ks = px_talloc((size_t)nk * sizeof *ks + 1);
      px_param_amax_keys(&plan, st, ks, nk);
      px_op_iter it = px_op_iter_begin(&plan, st);
      for (const px_op *o; (o = px_op_next(&it));)
        for (int j = -1; j < PX_OP_INS; j++) {
          bool cast = j < 0 && o->kind == PX_OP_CAST && o->out[0].slot >= 0;
          bool w = j >= 0 && (o->flags & PX_OPF_FP8) && o->in[j].slot >= 0 &&
                   plan.slots[o->in[j].slot].kind == PX_SLOT_PARAM && plan.slots[o->in[j].slot].fp8;
          if (!cast && !w) continue;
          px_amax_key use = cast ? px_amax_cast_key(o, it.in->layer) : px_amax_weight_key(o->in[j].slot, it.in->layer);
          bool found = false;
          for (int64_t i = 0; i < nk && !found; i++) found = ks[i].slot == use.slot && ks[i].layer == use.layer;
          missing += !found;
        }
      if (missing) fprintf(stderr, "\n  %s stage %lld: %lld uses of keys it lacks\n", px_schedule_names[sched],
                           (long long)st, (long long)missing);
      CU_ASSERT(nk > 0 && missing == 0);
    }
    px_plan_free(&plan);
  }
  compile_fp8(PX_FP8_CURRENT, &plan);
  CU_ASSERT_EQUAL(px_param_amax_keys(&plan, 0, NULL, 0), 0);
  px_plan_free(&plan);
  px_tfree();
}

/* Two histories over 2600 steps (a few amaxes a step): the scale is from the largest amax of the last
 * PX_FP8_AMAX_HISTORY steps; saved and loaded into a new table at steps 700 and 1800 (before and after
 * the history turns over), the new table gives the same scales and saves the same form. */
static void test_amax_roundtrip(void) {
  enum { STEPS = 2600, H = PX_FP8_AMAX_HISTORY };
  px_amax_key keys[2] = {{3, 0}, {5, 1}};
  px_err err = {0};
  px_amax *a = px_amax_new(), *b = NULL;
  float *step_max = px_tconst(2 * STEPS, 0.0f), *ha = px_tfloats(2 * H), *hb = px_tfloats(2 * H);
  px_tseed(7);
  for (int64_t s = 0; s < STEPS; s++) {
    if (s == 700 || s == 1800) { /* a resume */
      CU_ASSERT_EQUAL_FATAL(px_amax_save(a, keys, 2, s, ha, &err), PX_OK);
      px_amax_free(b);
      b = px_amax_new();
      CU_ASSERT_EQUAL_FATAL(px_amax_load(b, keys, 2, s, ha, &err), PX_OK);
      CU_ASSERT_EQUAL_FATAL(px_amax_save(b, keys, 2, s, hb, &err), PX_OK);
      CU_ASSERT(memcmp(ha, hb, 2 * H * sizeof *ha) == 0);
    }
    for (int call = 0; call < 3; call++)
      for (int k = 0; k < 2; k++) {
        /* mostly small, now and then a spike that must leave the history H steps later */
        float amax = (float)(px_tunit() * (px_tunit() < 0.01 ? 400.0 : 4.0));
        float sa, sb;
        CU_ASSERT_EQUAL_FATAL(px_amax_scale(a, keys[k], s, amax, PX_FP8_E4M3, &sa, &err), PX_OK);
        float past = 0.0f;
        for (int64_t t = s - H > 0 ? s - H : 0; t < s; t++) past = step_max[2 * t + k] > past ? step_max[2 * t + k] : past;
        CU_ASSERT(sa == px_k_fp8_scale(past > 0.0f ? past : amax, PX_FP8_E4M3));
        if (b) {
          CU_ASSERT_EQUAL_FATAL(px_amax_scale(b, keys[k], s, amax, PX_FP8_E4M3, &sb, &err), PX_OK);
          CU_ASSERT(sa == sb);
        }
        if (amax > step_max[2 * s + k]) step_max[2 * s + k] = amax;
      }
  }
  CU_ASSERT_EQUAL(px_amax_save(a, keys, 2, STEPS, ha, &err), PX_OK);
  CU_ASSERT_EQUAL(px_amax_save(b, keys, 2, STEPS, hb, &err), PX_OK);
  CU_ASSERT(memcmp(ha, hb, 2 * H * sizeof *ha) == 0);
  CU_ASSERT(ha[H - 1] == step_max[2 * (STEPS - 1)] && ha[0] == step_max[2 * (STEPS - H)]);
  /* a history no key names would be lost: refused */
  CU_ASSERT_EQUAL(px_amax_save(a, keys, 1, STEPS, ha, &err), PX_ERR_RUNTIME);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "slot 5, layer 1"));
  px_amax_free(a);
  px_amax_free(b);
  px_tfree();
}

static void train_fp8(const px_plan *plan, int64_t steps, const char *ckpt, bool resume, px_train_result *r) {
  px_train_opts o;
  px_train_opts_init(&o);
  o.steps = steps, o.backend = "cpu", o.ckpt_dir = ckpt, o.resume = resume;
  px_err err = {0};
  px_status st = px_train(plan, &o, MPI_COMM_WORLD, r, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
}

/* The checkpoint in dir written again without its fp8_amax (as before checkpoints kept them). */
static void drop_histories(const px_plan *plan, const char *dir) {
  px_err err = {0};
  px_ckpt_manifest man;
  CU_ASSERT_EQUAL_FATAL(px_ckpt_read_manifest(dir, &man, &err), PX_OK);
  px_ckpt_shard *sh;
  CU_ASSERT_EQUAL_FATAL(px_ckpt_shard_open(dir, 0, true, &sh, &err), PX_OK);
  px_param_state ps[PX_STATE_COUNT];
  px_ckpt_tensor t[PX_STATE_COUNT];
  int n = px_param_states(plan, 0, ps) - 1;
  CU_ASSERT_EQUAL_FATAL(ps[n].kind, PX_STATE_FP8_AMAX);
  for (int i = 0; i < n; i++) {
    t[i] = (px_ckpt_tensor){px_state_names[ps[i].kind], px_tfloats((int64_t)ps[i].count), ps[i].count};
    CU_ASSERT_EQUAL_FATAL(px_ckpt_shard_read(sh, px_ckpt_shard_find(sh, t[i].name, NULL), 0, t[i].count, t[i].data, &err),
                          PX_OK);
  }
  px_ckpt_shard_close(sh);
  char staging[600];
  px_ckpt_meta meta;
  px_reshard_meta(plan, 0, man.step, &meta);
  cJSON *record = px_reshard_record(plan);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_staging_path(dir, staging, sizeof staging, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(staging, &meta, t, n, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit(dir, &meta, record, &err), PX_OK);
  cJSON_Delete(record);
  px_ckpt_manifest_deinit(&man);
  px_tfree();
}

/* fp8 delayed scaling: 4 steps straight are 2, a resume and 2 more, bitwise; a checkpoint without the
 * histories still resumes (them afresh: the first step after it scales as current scaling does). */
static void test_fp8_resume(void) {
  const char *tmpdir = px_test_tmpdir("exec");
  px_plan plan;
  compile_fp8(PX_FP8_DELAYED, &plan);
  px_train_result full, first, again, second, legacy;
  train_fp8(&plan, 4, NULL, false, &full);
  train_fp8(&plan, 2, px_test_tmp("ck"), false, &first);
  train_fp8(&plan, 2, px_test_tmp("old"), false, &again);
  train_fp8(&plan, 4, px_test_tmp("ck"), true, &second);
  CU_ASSERT_EQUAL_FATAL(second.first_step, 2);
  for (int k = 0; k < 2; k++) {
    CU_ASSERT(memcmp(&first.losses[k], &full.losses[k], sizeof(double)) == 0);
    CU_ASSERT(memcmp(&second.losses[k], &full.losses[2 + k], sizeof(double)) == 0);
  }
  drop_histories(&plan, px_test_tmp("old"));
  train_fp8(&plan, 4, px_test_tmp("old"), true, &legacy);
  CU_ASSERT(isfinite(legacy.losses[0]) && isfinite(legacy.losses[1]));
  CU_ASSERT(legacy.losses[0] != full.losses[2]); /* the histories did matter */
  px_train_result_free(&full), px_train_result_free(&first), px_train_result_free(&again);
  px_train_result_free(&second);
  px_train_result_free(&legacy);
  px_plan_free(&plan);
  px_test_rm_tree(tmpdir);
}

/* The executor's frozen base in its storage (px_param_frozen_encode / _decode, what a run holds and its dequantising
 * casts write), for tiny at tp 2 with qlora and with an fp8 base: each weight at the offset the layout gives, its
 * bytes the plan's; an nf4 weight's codes bitwise kernels/cpu/nf4.c's reference quantisation (px_k_nf4_quantize,
 * tests/test_nf4.c checks it and the double quantisation against bitsandbytes'), its storage px_k_nf4_pack's and
 * its values px_k_nf4_unpack's; an fp8 weight's values its E4M3 round trip at the per-tensor scale; the others
 * their fp32 values; the error sums those of the values decoded. */
static void test_frozen_storage(void) {
  for (int base = PX_BASE_FP8; base <= PX_BASE_NF4; base++) {
    px_model m;
    px_cluster c;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_cluster_load("local-cpu", &c, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 2, 0, &err), PX_OK);
    px_parallel p;
    px_parallel_unset(&p);
    p.gbs = 4, p.mbs = 2, p.tp = 2, p.precision = PX_PREC_FP32, p.lora_rank = 4;
    p.finetune = base == PX_BASE_NF4 ? PX_FT_QLORA : PX_FT_LORA, p.base_precision = base;
    px_parallel_resolve(&p, &m, &c);
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
    const px_program *prog = &plan.programs[0];
    uint64_t n = prog->frozen_elems, at[64];
    CU_ASSERT_FATAL(prog->nfrozen <= 64);
    float *x = calloc(n, sizeof *x), *y = calloc(n, sizeof *y), *r = calloc(n, sizeof *r);
    uint8_t *store = calloc(prog->frozen_bytes, 1), *want = calloc(prog->frozen_bytes, 1), *codes = calloc(n, 1);
    float *absmax = calloc(n / 64 + 2, sizeof *absmax);
    CU_ASSERT_FATAL(x && y && r && store && want && codes && absmax);
    uint64_t s = 0x853c49e6748fea9bull;
    for (uint64_t i = 0; i < n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
    }
    double sums[2];
    CU_ASSERT_EQUAL_FATAL(px_param_frozen_layout(&plan, 0, at, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_param_frozen_encode(&plan, 0, x, (char *)store, sums, &err), PX_OK);
    int quantized = 0, bad = 0;
    double e2 = 0, x2 = 0;
    for (int32_t i = 0; i < prog->nfrozen; i++) {
      const px_param_ref *f = &prog->frozen[i];
      const float *xi = x + f->offset;
      uint64_t next = i + 1 < prog->nfrozen ? at[i + 1] : prog->frozen_bytes;
      bool q = px_lora_quantized(plan.slots[f->slot].name);
      CU_ASSERT_EQUAL(next - at[i], px_lora_frozen_bytes(&plan.par, f->elems, q));
      if (!q) {
        bad += memcmp(store + at[i], xi, f->elems * sizeof *xi) != 0;
        continue;
      }
      quantized++;
      px_param_frozen_decode(base, store + at[i], f->elems, y);
      if (base == PX_BASE_NF4) {
        px_k_nf4_quantize(xi, f->elems, codes, absmax);
        bad += memcmp(store + at[i], codes, (f->elems + 1) / 2) != 0;
        px_k_nf4_pack(xi, f->elems, want, absmax);
        bad += memcmp(store + at[i], want, next - at[i]) != 0;
        px_k_nf4_unpack(want, f->elems, r);
      } else {
        float scale = px_k_fp8_scale(px_k_fp8_amax(xi, (int64_t)f->elems), PX_FP8_E4M3);
        px_k_fp8_roundtrip(r, xi, (int64_t)f->elems, scale, PX_FP8_E4M3);
      }
      bad += memcmp(y, r, f->elems * sizeof *y) != 0;
      for (uint64_t j = 0; j < f->elems; j++) e2 += ((double)y[j] - xi[j]) * ((double)y[j] - xi[j]), x2 += (double)xi[j] * xi[j];
    }
    CU_ASSERT_EQUAL(quantized, 4 * (int)m.layers); /* qkv, o, fc1, fc2 of every layer */
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_DOUBLE_EQUAL(sums[0], e2, 1e-9 * e2);
    CU_ASSERT_DOUBLE_EQUAL(sums[1], x2, 1e-9 * x2);
    free(x), free(y), free(r), free(store), free(want), free(codes), free(absmax);
    px_plan_free(&plan);
  }
}

/* The gradients of plan's parameters against central finite differences of the objective they are the gradient
 * of: the main loss plus mtp_loss_scale times the MTP modules' (with one). For the largest-gradient element of each
 * named global tensor: the same batch again with that element moved by +-h (the learning rate 0), within 1% (+ 3e-6
 * for fp32's rounding of the losses). On one rank in fp32. */
static void check_gradients(px_plan *plan, const px_model *m, const char *const *names, size_t nnames, double h) {
  px_err err = {0};
  px_comm comm;
  CU_ASSERT_EQUAL_FATAL(px_comm_init(&comm, &plan->grid, false, MPI_COMM_WORLD, &err), PX_OK);
  px_backend *be = NULL;
  CU_ASSERT_EQUAL_FATAL(px_cpu_backend_new(&comm, 1, &be, &err), PX_OK);
  px_train_opts o;
  px_train_opts_init(&o);
  o.hp.lr = 0, o.hp.clip = 0; /* the weights stay; the gradients unclipped */
  px_data *data = NULL;
  px_exec *x = NULL;
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(m->vocab, o.hp.seed, &data, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_exec_new(plan, be, &comm, data, &o.hp, &x, &err), PX_OK);
  char path[] = "/tmp/px-grads-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  double loss;
  px_exec_capture_grads(x, true);
  CU_ASSERT_EQUAL_FATAL(px_exec_step(x, 0, &loss, &err), PX_OK);
  px_exec_capture_grads(x, false);
  if (plan->par.mtp_layers) CU_ASSERT(px_exec_mtp_loss(x) > 5.0 && px_exec_mtp_loss(x) < 6.0); /* ln 256 = 5.55 */
  CU_ASSERT_EQUAL_FATAL(px_exec_write_grads(x, path, &err), PX_OK);
  px_global_params g;
  CU_ASSERT_EQUAL_FATAL(px_global_params_build(m, plan->par.mtp_layers, &g, &err), PX_OK);
  float *grad = malloc(g.total * sizeof *grad);
  FILE *fp = fopen(path, "rb");
  CU_ASSERT_FATAL(fp && grad && fread(grad, sizeof *grad, g.total, fp) == g.total);
  fclose(fp);
  remove(path);
  px_exec_state states[16];
  int ns = px_exec_states(x, states, 16);
  float *params = NULL;
  for (int i = 0; i < ns; i++)
    if (!strcmp(states[i].name, "params")) params = states[i].data; /* the cpu backend's memory is the host's */
  CU_ASSERT_PTR_NOT_NULL_FATAL(params);
  const px_program *prog = &plan->programs[0];
  px_param_rank rk;
  px_param_rank_of(plan, 0, &rk);
  for (size_t k = 0; k < nnames; k++) {
    int64_t t = -1;
    for (int64_t i = 0; i < g.n; i++)
      if (!strcmp(g.t[i].name, names[k])) t = i;
    CU_ASSERT_FATAL(t >= 0 && g.t[t].rows * g.t[t].cols > 0);
    uint64_t best = g.t[t].offset, n = (uint64_t)(g.t[t].rows * g.t[t].cols);
    for (uint64_t j = 0; j < n; j++)
      if (fabsf(grad[g.t[t].offset + j]) > fabsf(grad[best])) best = g.t[t].offset + j;
    int64_t at = -1; /* the element's place in the stage's flat parameters */
    for (int32_t i = 0; i < prog->nparams && at < 0; i++) {
      const px_param_ref *r = &prog->params[i];
      px_param_map pm;
      CU_ASSERT_EQUAL_FATAL(px_param_map_of(plan, &g, r, &rk, &pm, &err), PX_OK);
      const px_slot *sl = &plan->slots[r->slot];
      for (int64_t e = 0; e < (int64_t)r->elems && at < 0; e++)
        if (px_param_global_index(plan, &g, &pm, r, e / sl->shape[1], e % sl->shape[1], NULL) == (int64_t)best)
          at = (int64_t)(r->offset + (uint64_t)e);
    }
    CU_ASSERT_FATAL(at >= 0);
    double j[2];
    for (int side = 0; side < 2; side++) {
      float keep = params[at];
      params[at] = keep + (float)(side ? -h : h);
      CU_ASSERT_EQUAL_FATAL(px_exec_step(x, 0, &loss, &err), PX_OK);
      j[side] = loss + (plan->par.mtp_layers ? plan->par.mtp_loss_scale * px_exec_mtp_loss(x) : 0.0);
      params[at] = keep;
    }
    double diff = (j[0] - j[1]) / (2 * h), an = grad[best];
    bool ok = fabs(diff - an) <= 0.01 * fabs(an) + 3e-6 && an != 0.0;
    if (!ok) fprintf(stderr, "\n  %s[%llu]: gradient %g, finite difference %g\n", names[k],
                     (unsigned long long)(best - g.t[t].offset), an, diff);
    CU_ASSERT(ok);
  }
  free(grad);
  px_global_params_free(&g);
  px_exec_free(x);
  px_data_close(data);
  be->destroy(be);
  px_comm_deinit(&comm);
}

/* One rank of the local cluster in fp32, the plan's micro-batch two sequences (a whole batch). */
static void compile_fp32(px_plan *plan, const px_model *m, int64_t mtp) {
  px_err err = {0};
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("local-cpu", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 1, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.gbs = 2, p.mbs = 2, p.precision = PX_PREC_FP32, p.mtp_layers = mtp;
  if (mtp) p.mtp_loss_scale = 0.3;
  px_parallel_resolve(&p, m, &c);
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(plan, m, &c, &p, &err), PX_OK);
}

/* The MTP module's gradients, against central finite differences of the objective they are the gradient of: the
 * main loss plus mtp_loss_scale (0.3, DeepSeek-V3's first weight; PX_MTP_LOSS_WEIGHT, 0.1, unset) times the
 * module's (each a mean over its positions with a target), tiny-mla with one module, two sequences a micro-batch,
 * so the masked last positions fall inside the batch: the module's own tensors, its layer's, the shared
 * embedding and head and the main model's last layer (they agree to 0.4% or 2e-6). */
static void test_mtp_gradients(void) {
  px_err err = {0};
  px_model m;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-mla", &m, &err), PX_OK);
  m.mtp_layers = 1;
  px_plan plan;
  compile_fp32(&plan, &m, 1);
  static const char *const names[] = {"mtp0.enorm.w", "mtp0.hnorm.w", "mtp0.eh_proj.w", "mtp0.final_norm.w",
                                      "mtp0.ln1.w",   "mtp0.kv_up.w", "mtp0.fc2.w",     "emb.w",
                                      "head.w",       "layer3.fc2.w", "layer3.ln2.w"};
  check_gradients(&plan, &m, names, sizeof names / sizeof *names, 1e-2);
  px_plan_free(&plan);
}

/* gpt-oss's experts' biases (tiny-moe with every linear layer's bias): fc1's (gate and up, in their GEMM) and fc2's
 * (each routed row's gate times its expert's, Megatron-Core's _apply_bias), against central finite differences of
 * the loss, in the last layer, whose biases no router downstream sees (a router's top-2 would change with them;
 * its own gradients are not checked so: one token's choice flips within h); its experts' weights beside them. */
static void test_expert_bias_gradients(void) {
  px_err err = {0};
  px_model m;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-moe", &m, &err), PX_OK);
  m.bias = m.qkv_bias = true;
  px_plan plan;
  compile_fp32(&plan, &m, 0);
  static const char *const names[] = {"layer3.experts.gate.b", "layer3.experts.up.b", "layer3.experts.fc2.b",
                                      "layer3.experts.fc2.w"};
  check_gradients(&plan, &m, names, sizeof names / sizeof *names, 1e-2);
  px_plan_free(&plan);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  static const px_test tests[] = {
      {"every op on both model families and attention kernels", test_all_ops},
      {"recomputation gives the same losses (dropout replayed)", test_recompute_same_losses},
      {"training lowers the loss", test_loss_falls},
      {"the MTP module's gradients: central finite differences of the main loss + 0.3 x its own", test_mtp_gradients},
      {"the experts' biases (fc1's, gate-scaled fc2's): central finite differences of the loss",
       test_expert_bias_gradients},
      {"fp8 amax histories: the keys a stage keeps", test_amax_keys},
      {"fp8 amax histories: the scale's window, saved and loaded past its length", test_amax_roundtrip},
      {"fp8 delayed: a resume is the uninterrupted run bitwise; a checkpoint without histories resumes",
       test_fp8_resume},
      {"a frozen base in nf4 and fp8 as the executor stores and dequantises it, bitwise against the kernels' "
       "reference", test_frozen_storage},
  };
  int rc = px_test_main("exec", tests, sizeof tests / sizeof tests[0]);
  MPI_Finalize();
  return rc;
}
