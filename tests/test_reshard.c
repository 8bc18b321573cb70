/* Resharding, the layout: a synthetic checkpoint of one plan, whose every
 * state element holds a value made from its canonical index (the other
 * ranks' parts of ZeRO-1/2's parameters and all padding a poison), is
 * re-split for another plan and every element of every new shard is checked
 * (the weights from the master weights where there are any, rounded for
 * 16-bit parameters, the moments, the loss scaler, zeros in padding), over
 * pairs of plans that change tp, pp, dp, cp, ep, ZeRO, shard groups,
 * offload, interleaving and precision (fp8's amax histories by tensor and
 * layer, from the old ranks at the new one's place; afresh where the
 * checkpoint has none); every canonical element has an owner
 * in each plan; refusals name the file and the reason. That training goes
 * on as before is tests/cli/reshard.sh's. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/amax.h"
#include "exec/params.h"
#include "exec/reshard.h"
#include "tests/testutil.h"

#define POISON -777.0f
#define STEP 5

typedef struct {
  const char *model;
  int64_t tp, pp, dp, cp, ep, vpp, shard_group;
  int zero, precision, offload_opt, offload_params;
} spec;


static void compile(const spec *s, px_plan *plan) {
  px_model m;
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(s->model, &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK); /* has 16-bit peaks */
  int64_t cp = s->cp ? s->cp : 1;
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, s->tp * s->pp * s->dp * cp, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = s->tp, p.pp = s->pp, p.dp = s->dp, p.cp = cp, p.ep = s->ep ? s->ep : 1, p.zero = s->zero;
  p.precision = s->precision, p.gbs = 8 * s->dp * cp, p.mbs = 1, p.shard_group = s->shard_group;
  if (m.experts > 0 && s->tp > 1) p.sp = 1; /* Megatron-Core's rule: experts with TP need SP */
  if (s->vpp > 1) p.vpp = s->vpp, p.schedule = PX_SCHED_INTERLEAVED;
  if (s->offload_opt) p.offload_opt = s->offload_opt;
  if (s->offload_params) p.offload_params = s->offload_params;
  px_parallel_resolve(&p, &m, &c);
  px_status st = px_plan_compile(plan, &m, &c, &p, &err);
  if (st) fprintf(stderr, "\n  %s: %s\n", s->model, err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
}

/* The synthetic value of canonical element canon in a state of this kind. */
static float value(px_state_kind kind, uint64_t canon) {
  return (float)((canon * 2654435761u + (uint64_t)kind * 7919u) % 100003u) / 1024.0f - 40.0f;
}

/* The synthetic amax history element e of tensor `name`, layer `layer` on an old rank at (tp_rank, wdp_rank). */
static float amax_value(const char *name, int64_t layer, int64_t tp_rank, int64_t wdp_rank, int e) {
  uint64_t h = 1469598103934665603ull;
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  return (float)((h + (uint64_t)layer * 7919u + (uint64_t)tp_rank * 104729u + (uint64_t)wdp_rank * 1299709u +
                  (uint64_t)e * 15485863u) % 100003u) / 64.0f;
}

static bool has_master(const px_plan *p) {
  px_param_state ps[PX_STATE_COUNT];
  int k = px_param_states(p, 0, ps);
  for (int i = 0; i < k; i++)
    if (ps[i].kind == PX_STATE_MASTER) return true;
  return false;
}

/* Writes into dir a checkpoint of plan p at STEP whose current elements hold value(). */
/* World rank r's place, its states and a tensor of each (test buffers filled with v); returns their count. */
static int rank_states(const px_plan *p, int64_t r, px_param_rank *rk, px_param_state *ps, px_ckpt_tensor *t, float v) {
  px_param_rank_of(p, r, rk);
  int k = px_param_states(p, rk->stage, ps);
  for (int i = 0; i < k; i++)
    t[i] = (px_ckpt_tensor){px_state_names[ps[i].kind], px_tconst((int64_t)ps[i].count, v), ps[i].count};
  return k;
}

/* amax: with the fp8 amax histories its plan keeps (without: as checkpoints from before they were kept). */
static void write_synthetic(const px_plan *p, const char *dir, bool record, bool amax) {
  px_err err = {0};
  px_global_params g;
  CU_ASSERT_EQUAL_FATAL(px_global_params_build(&p->model, p->par.mtp_layers, &g, &err), PX_OK);
  char staging[600];
  CU_ASSERT_EQUAL_FATAL(px_ckpt_staging_path(dir, staging, sizeof staging, &err), PX_OK);
  for (int64_t q = 0; q < p->grid.world; q++) {
    px_param_rank rk;
    px_param_state ps[PX_STATE_COUNT];
    px_ckpt_tensor t[PX_STATE_COUNT];
    int k = rank_states(p, q, &rk, ps, t, POISON);
    for (int i = 0; i < k; i++) {
      if (ps[i].kind == PX_STATE_LOSS_SCALER) {
        t[i].data[0] = 1024, t[i].data[1] = 7, t[i].data[2] = STEP - 1;
        continue;
      }
      if (ps[i].kind == PX_STATE_FP8_AMAX) {
        int64_t nk = px_param_amax_keys(p, rk.stage, NULL, 0);
        px_amax_key *keys = px_talloc((size_t)nk * sizeof *keys);
        px_param_amax_keys(p, rk.stage, keys, nk);
        for (int64_t j = 0; j < nk; j++)
          for (int e = 0; e < PX_FP8_AMAX_HISTORY; e++)
            t[i].data[j * PX_FP8_AMAX_HISTORY + e] =
                amax_value(p->slots[keys[j].slot].name, keys[j].layer, rk.tp_rank, rk.wdp_rank, e);
        continue;
      }
      px_param_span *sp;
      uint64_t n;
      bool flat_owned = ps[i].view == PX_VIEW_FLAT_OWNED;
      CU_ASSERT_EQUAL_FATAL(px_param_spans(p, &g, &rk, flat_owned ? PX_VIEW_FLAT : ps[i].view, &sp, &n, &err), PX_OK);
      for (uint64_t j = 0; j < n; j++)
        for (uint64_t e = 0; e < sp[j].n; e++) t[i].data[sp[j].at + e] = value(ps[i].kind, sp[j].canon + e);
      free(sp);
      /* ZeRO-1/2's parameters: what other ranks own is stale until the next step's gather */
      const px_program *prog = &p->programs[rk.stage];
      for (int32_t u = 0; flat_owned && u < prog->nunits; u++) {
        uint64_t lo, hi, f0 = prog->units[u].offset, f1 = f0 + prog->units[u].padded;
        px_param_owned_range(p, &prog->units[u], &rk, &lo, &hi);
        for (uint64_t f = f0; f < f1; f++)
          if (f < lo || f >= hi) t[i].data[f] = POISON;
      }
    }
    if (!amax && k && ps[k - 1].kind == PX_STATE_FP8_AMAX) k--;
    px_ckpt_meta meta;
    px_reshard_meta(p, q, STEP, &meta);
    CU_ASSERT_EQUAL_FATAL(px_ckpt_write_shard(staging, &meta, t, k, &err), PX_OK);
  }
  cJSON *rec = record ? px_reshard_record(p) : NULL;
  px_ckpt_meta meta;
  px_reshard_meta(p, 0, STEP, &meta);
  CU_ASSERT_EQUAL_FATAL(px_ckpt_commit(dir, &meta, rec, &err), PX_OK);
  cJSON_Delete(rec);
  px_global_params_free(&g);
  px_tfree();
}

/* Every canonical element has a current holder on some rank of p, for every state. */
static void check_owned(const px_plan *p) {
  px_err err = {0};
  px_global_params g;
  CU_ASSERT_EQUAL_FATAL(px_global_params_build(&p->model, p->par.mtp_layers, &g, &err), PX_OK);
  char *seen = calloc(g.total, 1);
  px_param_state ps0[PX_STATE_COUNT];
  int k = px_param_states(p, 0, ps0);
  for (int i = 0; i < k; i++) {
    if (ps0[i].view == PX_VIEW_NONE) continue;
    memset(seen, 0, g.total);
    for (int64_t q = 0; q < p->grid.world; q++) {
      px_param_rank rk;
      px_param_rank_of(p, q, &rk);
      px_param_state ps[PX_STATE_COUNT];
      px_param_states(p, rk.stage, ps);
      px_param_span *sp;
      uint64_t n;
      CU_ASSERT_EQUAL_FATAL(px_param_spans(p, &g, &rk, ps[i].view, &sp, &n, &err), PX_OK);
      for (uint64_t j = 0; j < n; j++) {
        CU_ASSERT_FATAL(sp[j].canon + sp[j].n <= g.total && sp[j].at + sp[j].n <= ps[i].count);
        memset(seen + sp[j].canon, 1, sp[j].n);
      }
      free(sp);
    }
    uint64_t missing = 0;
    for (uint64_t e = 0; e < g.total; e++) missing += !seen[e];
    if (missing) fprintf(stderr, "\n  %s: %llu canonical elements without a holder\n", px_state_names[ps0[i].kind],
                         (unsigned long long)missing);
    CU_ASSERT_EQUAL(missing, 0);
  }
  free(seen);
  px_global_params_free(&g);
}

/* The fp8 amax histories of rank rk of plan b re-split from a's synthetic ones (a_amax: a's checkpoint holds
 * them) into want: by tensor name and layer, the largest over the old ranks at rk's place along each axis
 * the plans share (TP; DP x CP x EP), over every place along an axis that changes (exec/reshard.c). */
static void want_amax(const px_plan *a, bool a_amax, const px_plan *b, const px_param_rank *rk, float *want) {
  int64_t n = px_param_amax_keys(b, rk->stage, NULL, 0);
  px_amax_key *keys = px_talloc((size_t)n * sizeof *keys + 1);
  px_param_amax_keys(b, rk->stage, keys, n);
  bool same_tp = a->par.tp == b->par.tp;
  bool same_data = a->par.dp == b->par.dp && a->par.cp == b->par.cp && a->par.ep == b->par.ep;
  for (int64_t q = 0; a_amax && q < a->grid.world; q++) {
    px_param_rank o;
    px_param_rank_of(a, q, &o);
    if ((same_tp && o.tp_rank != rk->tp_rank) || (same_data && o.wdp_rank != rk->wdp_rank)) continue;
    int64_t m = px_param_amax_keys(a, o.stage, NULL, 0);
    px_amax_key *old = px_talloc((size_t)m * sizeof *old + 1);
    px_param_amax_keys(a, o.stage, old, m);
    for (int64_t i = 0; i < n; i++) {
      const char *name = b->slots[keys[i].slot].name;
      for (int64_t j = 0; j < m; j++)
        if (old[j].layer == keys[i].layer && !strcmp(a->slots[old[j].slot].name, name))
          for (int e = 0; e < PX_FP8_AMAX_HISTORY; e++) {
            float v = amax_value(name, keys[i].layer, o.tp_rank, o.wdp_rank, e);
            if (v > want[i * PX_FP8_AMAX_HISTORY + e]) want[i * PX_FP8_AMAX_HISTORY + e] = v;
          }
    }
  }
}

/* Every element of every shard of plan b in dir, re-split from a's synthetic checkpoint (a_amax: with its fp8
 * amax histories). */
static void check_resharded(const px_plan *a, bool a_amax, const px_plan *b, const char *dir, const char *what) {
  px_err err = {0};
  px_global_params g;
  CU_ASSERT_EQUAL_FATAL(px_global_params_build(&b->model, b->par.mtp_layers, &g, &err), PX_OK);
  bool master = has_master(a);
  uint64_t bad = 0;
  for (int64_t r = 0; r < b->grid.world; r++) {
    px_param_rank rk;
    px_param_state ps[PX_STATE_COUNT];
    px_ckpt_tensor t[PX_STATE_COUNT];
    int k = rank_states(b, r, &rk, ps, t, 0.0f);
    px_ckpt_meta meta;
    px_reshard_meta(b, r, STEP, &meta);
    int64_t step = -1;
    px_status st = px_ckpt_read_shard(dir, &meta, t, k, &step, &err);
    if (st) fprintf(stderr, "\n  %s: %s\n", what, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    CU_ASSERT_EQUAL(step, STEP);
    for (int i = 0; i < k; i++) {
      float *want = px_tconst((int64_t)ps[i].count, 0.0f);
      if (ps[i].kind == PX_STATE_LOSS_SCALER) {
        want[0] = 1024, want[1] = 7, want[2] = STEP - 1;
      } else if (ps[i].kind == PX_STATE_FP8_AMAX) {
        want_amax(a, a_amax, b, &rk, want);
      } else {
        px_state_kind src = ps[i].kind;
        if (src == PX_STATE_PARAMS || src == PX_STATE_MASTER) src = master ? PX_STATE_MASTER : PX_STATE_PARAMS;
        px_param_span *sp;
        uint64_t n;
        px_param_view view = ps[i].view == PX_VIEW_FLAT_OWNED ? PX_VIEW_FLAT : ps[i].view;
        CU_ASSERT_EQUAL_FATAL(px_param_spans(b, &g, &rk, view, &sp, &n, &err), PX_OK);
        for (uint64_t j = 0; j < n; j++)
          for (uint64_t e = 0; e < sp[j].n; e++) want[sp[j].at + e] = value(src, sp[j].canon + e);
        free(sp);
        if (ps[i].kind == PX_STATE_PARAMS && px_dtype_bytes(ps[i].dtype) < 4) {
          uint16_t *raw = px_talloc(ps[i].count * 2 + 2);
          px_dtype_from_fp32(raw, ps[i].dtype, want, ps[i].count);
          px_dtype_to_fp32(want, raw, ps[i].dtype, ps[i].count);
        }
      }
      for (uint64_t e = 0; e < ps[i].count; e++)
        if (memcmp(&want[e], &t[i].data[e], sizeof(float)) != 0 && bad++ < 5)
          fprintf(stderr, "\n  %s: rank %lld '%s'[%llu] = %g, expected %g\n", what, (long long)r,
                  px_state_names[ps[i].kind], (unsigned long long)e, t[i].data[e], want[e]);
    }
    px_tfree();
  }
  CU_ASSERT_EQUAL(bad, 0);
  px_global_params_free(&g);
}

static void test_pairs(void) {
  static const struct {
    spec a, b;
  } pairs[] = {
      /* 8 ranks -> 2, ZeRO-1 -> ZeRO-0, tied embeddings over two stages */
      {{"tiny-gpt", 2, 2, 2, 0, 0, 0, 0, 1, PX_PREC_FP32, 0, 0}, {"tiny-gpt", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}},
      /* ZeRO-3 -> TP x PP */
      {{"tiny", 1, 1, 4, 0, 0, 0, 0, 3, PX_PREC_FP32, 0, 0}, {"tiny", 2, 2, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}},
      /* dp -> tp, pp -> dp with ZeRO-2 */
      {{"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}},
      {{"tiny-gpt", 1, 2, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny-gpt", 1, 1, 2, 0, 0, 0, 0, 2, PX_PREC_FP32, 0, 0}},
      /* 1 rank -> 8, ZeRO-3 across tp and pp */
      {{"tiny-gpt", 1, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny-gpt", 2, 2, 2, 0, 0, 0, 0, 3, PX_PREC_FP32, 0, 0}},
      /* bf16 with master weights -> fp32, and fp32 -> bf16 */
      {{"tiny-gpt", 2, 2, 2, 0, 0, 0, 0, 1, PX_PREC_BF16, 0, 0}, {"tiny-gpt", 1, 1, 4, 0, 0, 0, 0, 2, PX_PREC_FP32, 0, 0}},
      {{"tiny", 1, 2, 2, 0, 0, 0, 0, 1, PX_PREC_FP32, 0, 0}, {"tiny", 2, 1, 2, 0, 0, 0, 0, 3, PX_PREC_BF16, 0, 0}},
      /* fp16: the loss scaler goes along */
      {{"tiny", 1, 1, 2, 0, 0, 0, 0, 2, PX_PREC_FP16, 0, 0}, {"tiny", 2, 2, 1, 0, 0, 0, 0, 0, PX_PREC_FP16, 0, 0}},
      /* offloaded optimizer and parameters -> on the device */
      {{"tiny", 1, 1, 2, 0, 0, 0, 0, 3, PX_PREC_BF16, PX_OFFLOAD_CPU, PX_OFFLOAD_CPU},
       {"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_BF16, 0, 0}},
      {{"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny", 1, 1, 2, 0, 0, 0, 0, 2, PX_PREC_FP32, PX_OFFLOAD_CPU, 0}},
      /* hybrid sharding -> full sharding; interleaved -> one stage */
      {{"tiny", 1, 1, 4, 0, 0, 0, 2, 3, PX_PREC_FP32, 0, 0}, {"tiny", 1, 1, 4, 0, 0, 0, 0, 3, PX_PREC_FP32, 0, 0}},
      {{"tiny", 1, 2, 1, 0, 0, 2, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny", 1, 1, 2, 0, 0, 0, 0, 1, PX_PREC_FP32, 0, 0}},
      /* context parallelism -> tp; experts over 2 ranks -> tp 2 */
      {{"tiny", 1, 1, 1, 2, 0, 0, 0, 1, PX_PREC_FP32, 0, 0}, {"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}},
      {{"tiny-moe", 1, 1, 2, 0, 2, 0, 0, 0, PX_PREC_FP32, 0, 0}, {"tiny-moe", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0}},
      /* ZeRO with experts: expert units sharded over the expert-DP group (dp 4 / ep 2), the rest over dp */
      {{"tiny-moe", 1, 1, 4, 0, 2, 0, 0, 2, PX_PREC_BF16, 0, 0}, {"tiny-moe", 1, 1, 2, 0, 2, 0, 0, 3, PX_PREC_FP32, 0, 0}},
      {{"tiny-moe", 1, 1, 2, 0, 2, 0, 0, 3, PX_PREC_FP32, PX_OFFLOAD_CPU, PX_OFFLOAD_CPU},
       {"tiny-moe", 1, 2, 4, 0, 4, 0, 0, 1, PX_PREC_BF16, 0, 0}},
      /* fp8 delayed scaling's amax histories: TP collapses (DP kept), DP and TP change, PP with experts
       * (EP kept), into and out of fp8, and from a checkpoint without them */
      {{"tiny-gpt", 2, 2, 2, 0, 0, 0, 0, 1, PX_PREC_FP8, 0, 0}, {"tiny-gpt", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}},
      {{"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}, {"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}},
      {{"tiny-moe", 1, 1, 2, 0, 2, 0, 0, 0, PX_PREC_FP8, 0, 0}, {"tiny-moe", 1, 2, 2, 0, 2, 0, 0, 0, PX_PREC_FP8, 0, 0}},
      {{"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}, {"tiny", 1, 2, 1, 0, 0, 0, 0, 0, PX_PREC_BF16, 0, 0}},
      {{"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_BF16, 0, 0}, {"tiny", 1, 1, 2, 0, 0, 0, 0, 1, PX_PREC_FP8, 0, 0}},
      {{"tiny", 2, 1, 1, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}, {"tiny", 1, 2, 1, 0, 0, 0, 0, 0, PX_PREC_FP8, 0, 0}},
  };
  size_t npairs = sizeof pairs / sizeof pairs[0], legacy = npairs - 1; /* the last */
  char what[64];
  for (size_t i = 0; i < npairs; i++) {
    const char *tmpdir = px_test_tmpdir("reshard");
    px_plan a, b;
    compile(&pairs[i].a, &a);
    compile(&pairs[i].b, &b);
    check_owned(&a);
    check_owned(&b);
    write_synthetic(&a, px_test_tmp("old"), true, i != legacy);
    px_err err = {0};
    px_reshard *r = NULL;
    px_status st = px_reshard_open(px_test_tmp("old"), &b, 0, 1, &r, &err);
    if (!st) st = px_reshard_write(r, px_test_tmp("new"), NULL, &err);
    if (st) fprintf(stderr, "\n  pair %zu: %s\n", i, err.msg);
    CU_ASSERT_EQUAL(st, PX_OK);
    if (!st) {
      CU_ASSERT_EQUAL(px_reshard_step(r), STEP);
      snprintf(what, sizeof what, "pair %zu", i);
      check_resharded(&a, i != legacy, &b, px_test_tmp("new"), what);
      /* the new plan keeps histories the old checkpoint does not hold: they start afresh, said so */
      bool fresh = px_param_amax_keys(&b, 0, NULL, 0) > 0 && (px_param_amax_keys(&a, 0, NULL, 0) == 0 || i == legacy);
      CU_ASSERT_EQUAL(px_reshard_amax_fresh(r), fresh);
    }
    px_reshard_free(r);
    px_plan_free(&a);
    px_plan_free(&b);
    px_test_rm_tree(tmpdir);
  }
}

static void expect_refused(px_status st, const px_err *err, const char *needle) {
  if (st != PX_ERR_INPUT || !strstr(err->msg, needle))
    fprintf(stderr, "\n  status %d, message '%s', wanted '%s'\n", st, err->msg, needle);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->msg, needle));
}

static void test_refusals(void) {
  const char *tmpdir = px_test_tmpdir("reshard");
  spec s8 = {"tiny", 2, 2, 2, 0, 0, 0, 0, 1, PX_PREC_FP32, 0, 0}, s2 = {"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0};
  spec gpt = {"tiny-gpt", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP32, 0, 0};
  spec h16 = {"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_FP16, 0, 0}, b16 = {"tiny", 1, 1, 2, 0, 0, 0, 0, 0, PX_PREC_BF16, 0, 0};
  px_plan p8, p2, pg, p16, pb16;
  compile(&s8, &p8), compile(&s2, &p2), compile(&gpt, &pg), compile(&h16, &p16), compile(&b16, &pb16);
  px_err err = {0};
  px_reshard *r = NULL;
  write_synthetic(&p8, px_test_tmp("ck"), true, true);
  expect_refused(px_reshard_open(px_test_tmp("ck"), &pg, 0, 1, &r, &err), &err, "ck/manifest.json: a checkpoint of another model");
  write_synthetic(&p16, px_test_tmp("h16"), true, true);
  expect_refused(px_reshard_open(px_test_tmp("h16"), &pb16, 0, 1, &r, &err), &err, "loss scaler");
  /* a manifest without a plan record (as format version 1 wrote) */
  write_synthetic(&p8, px_test_tmp("norec"), false, true);
  expect_refused(px_reshard_open(px_test_tmp("norec"), &p2, 0, 1, &r, &err), &err, "records no plan");
  /* a flipped byte in a shard's data: found by the rank that checks that shard, not by the others */
  char path[600];
  snprintf(path, sizeof path, "%s/shard-5.bin", px_test_tmp("ck"));
  FILE *fp = fopen(path, "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fseek(fp, 300, SEEK_SET);
  int ch = fgetc(fp);
  fseek(fp, 300, SEEK_SET);
  fputc(ch ^ 0x10, fp);
  fclose(fp);
  expect_refused(px_reshard_open(px_test_tmp("ck"), &p2, 0, 1, &r, &err), &err, "shard-5.bin: corrupt (stored checksum");
  expect_refused(px_reshard_open(px_test_tmp("ck"), &p2, 1, 2, &r, &err), &err, "shard-5.bin: corrupt");
  CU_ASSERT_EQUAL(px_reshard_open(px_test_tmp("ck"), &p2, 0, 2, &r, &err), PX_OK);
  px_reshard_free(r);
  px_planfile *pf = px_talloc(sizeof *pf);
  CU_ASSERT_EQUAL(px_reshard_recorded(px_test_tmp("norec"), pf, &err), PX_ERR_INPUT);
  CU_ASSERT_EQUAL(px_reshard_recorded(px_test_tmp("ck"), pf, &err), PX_OK);
  CU_ASSERT(pf->has_model && pf->has_cluster && pf->gpus == 8 && pf->par.tp == 2 && pf->par.zero == 1);
  /* re-split into a directory holding a larger world's checkpoint: its extra shards go */
  write_synthetic(&p8, px_test_tmp("big"), true, true);
  write_synthetic(&p2, px_test_tmp("two"), true, true);
  CU_ASSERT_EQUAL_FATAL(px_reshard_open(px_test_tmp("two"), &p2, 0, 1, &r, &err), PX_OK);
  CU_ASSERT_EQUAL(px_reshard_write(r, px_test_tmp("big"), NULL, &err), PX_OK);
  px_reshard_free(r);
  snprintf(path, sizeof path, "%s/shard-2.bin", px_test_tmp("big"));
  CU_ASSERT_EQUAL(access(path, F_OK), -1);
  px_ckpt_manifest man;
  CU_ASSERT_EQUAL(px_ckpt_read_manifest(px_test_tmp("big"), &man, &err), PX_OK);
  CU_ASSERT_EQUAL(man.world, 2);
  CU_ASSERT_EQUAL(man.version, 2);
  CU_ASSERT_PTR_NOT_NULL(man.plan);
  px_ckpt_manifest_deinit(&man);
  check_resharded(&p2, true, &p2, px_test_tmp("big"), "into a larger checkpoint's directory");
  px_plan_free(&p8), px_plan_free(&p2), px_plan_free(&pg), px_plan_free(&p16), px_plan_free(&pb16);
  px_test_rm_tree(tmpdir);
}

int main(void) {
  static const px_test tests[] = {
      {"every element re-split between 22 pairs of plans", test_pairs},
      {"another model, fp16 to bf16, no plan record, a corrupt shard; stale shards removed", test_refusals},
  };
  return px_test_main("reshard", tests, sizeof tests / sizeof tests[0]);
}
