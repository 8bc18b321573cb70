/* Properties over 200 random valid plans (hybrid sharding and uneven chunks among them):
 * every instance of a program waits only for earlier instances; a sweep
 * that fixes every dimension reports
 * for its one plan exactly what the simulator reports for it (every figure,
 * bit for bit); and the plan's fits verdict is the per-stage rule over its
 * stages. Over 200 more (mixtures of experts, context and expert
 * parallelism, every schedule, offload and fp8 among them): the bounds a
 * sweep takes before it compiles a plan (sim/bound.h) never exceed its peak
 * memory or its simulated step, and plans with one bound key share their
 * block templates. */
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"
#include "sim/bound.h"
#include "sim/sim.h"
#include "sim/sweep.h"
#include "tests/testutil.h"

/* A deterministic generator (the same 200 plans every run). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (rng_state >> 33) % n;
}

static const char *const models[] = {"gpt2-350m", "gpt2-1.5b", "llama3-8b", "llama2-13b", "llama3-70b", "tiny-gpt"};
static const char *const clusters[] = {"dgx-a100", "dgx-h100", "hgx-h200", "a3-mega", "hgx-h800", "dgx-b200", "gb200-nvl72", "dgx-gb300"};

static int64_t pick_divisor(int64_t n, int64_t max) {
  int64_t d[64];
  int k = 0;
  for (int64_t i = 1; i <= n && i <= max && k < 64; i++)
    if (n % i == 0) d[k++] = i;
  return d[rnd((uint64_t)k)];
}

/* A random plan; false when it is not valid (the caller draws again). */
static bool random_plan(px_model *m, px_cluster *c, px_parallel *p) {
  px_err err = {0};
  if (px_model_load(models[rnd(6)], m, &err) || px_cluster_load(clusters[rnd(7)], c, &err)) return false;
  int64_t gpus = (int64_t)8 << rnd(6); /* 8 .. 256 */
  if (px_cluster_set_size(c, gpus, 0, &err)) return false;
  px_parallel_unset(p);
  p->tp = pick_divisor(m->heads, 8);
  p->pp = pick_divisor(m->layers, 8);
  if (gpus % (p->tp * p->pp)) return false;
  p->dp = gpus / (p->tp * p->pp);
  p->zero = p->dp > 1 ? (int)rnd(4) : 0;
  p->sp = p->tp > 1 ? (int)rnd(2) : 0;
  p->mbs = (int64_t)1 << rnd(3);
  p->gbs = p->mbs * p->dp * p->pp * (int64_t)(1 + rnd(4));
  p->schedule = p->pp == 1 ? PX_SCHED_1F1B : (int)rnd(PX_SCHED_COUNT);
  p->vpp = p->schedule == PX_SCHED_INTERLEAVED ? 2 : 1;
  p->recompute = (int)rnd(3);
  p->attention = (int)rnd(2);
  int ov[] = {PX_OVERLAP_DEFAULT, PX_OVERLAP_ALL, PX_OVERLAP_DP | PX_OVERLAP_PP, PX_OVERLAP_PP | PX_OVERLAP_TP,
              PX_OVERLAP_DP, PX_OVERLAP_DP | PX_OVERLAP_ZERO, 0};
  p->overlap = ov[rnd(7)];
  /* the shard group, fixed (a sweep would try one of a node too): all of dp, or with ZeRO
   * half the time a divisor of it; from its own generator, so the plans drawn stay the same */
  static uint64_t shard_rng = 0x2545f4914f6cdd1dull;
  shard_rng = shard_rng * 6364136223846793005ull + 1442695040888963407ull;
  p->shard_group = p->dp;
  if (p->zero >= 1 && (shard_rng >> 40) % 2) {
    int64_t d[64];
    int k = 0;
    for (int64_t i = 1; i <= p->dp && k < 64; i++)
      if (p->dp % i == 0) d[k++] = i;
    p->shard_group = d[(shard_rng >> 33) % (uint64_t)k];
  }
  px_parallel_resolve(p, m, c);
  if (px_parallel_validate(p, m, c, NULL)) return false;
  /* the layer split too, as an explicit list (a sweep would try the first and last stage shorter) */
  int64_t split[PX_MAX_CHUNK_LIST];
  if (p->pp * p->vpp > PX_MAX_CHUNK_LIST || px_parallel_chunk_layers(p, m->layers, split, NULL)) return false;
  p->nchunk_layers = (int32_t)(p->pp * p->vpp);
  for (int32_t i = 0; i < p->nchunk_layers; i++) p->chunk_layers[i] = (uint16_t)split[i];
  return true;
}

/* Bitwise equality of every summary figure of two sim results. */
static bool same_sim(const px_sim_result *a, const px_sim_result *b) {
  return a->step_time_s == b->step_time_s && a->tokens_per_s == b->tokens_per_s &&
         a->model_tflops_per_gpu == b->model_tflops_per_gpu && a->mfu == b->mfu && a->hfu == b->hfu &&
         a->bubble_fraction == b->bubble_fraction && a->fits == b->fits && a->comm_tp_s == b->comm_tp_s &&
         a->comm_pp_s == b->comm_pp_s && a->comm_dp_s == b->comm_dp_s && a->comm_exposed_s == b->comm_exposed_s &&
         a->step_time_comm_free_s == b->step_time_comm_free_s && a->events == b->events &&
         a->straggler_ranks == b->straggler_ranks && a->straggler_stretch == b->straggler_stretch;
}

/* Every field of two parallel choices equal (as their JSON says them). */
static bool same_parallel(const px_parallel *a, const px_parallel *b) {
  cJSON *ja = px_parallel_to_json(a), *jb = px_parallel_to_json(b);
  char *sa = cJSON_PrintUnformatted(ja), *sb = cJSON_PrintUnformatted(jb);
  bool same = sa && sb && !strcmp(sa, sb);
  cJSON_free(sa), cJSON_free(sb), cJSON_Delete(ja), cJSON_Delete(jb);
  return same;
}

static void test_sweep_rows_equal_sim(void) {
  int valid = 0, fitting = 0, draws = 0;
  while (valid < 200 && draws < 20000) {
    draws++;
    px_model m;
    px_cluster c;
    px_parallel par;
    if (!random_plan(&m, &c, &par)) continue;
    valid++;
    px_err err = {0};
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &par, &err), PX_OK);
    /* fits is the per-stage rule over every stage */
    bool all = true;
    uint64_t peak = 0;
    for (int64_t s = 0; s < plan.par.pp; s++) {
      all = all && px_plan_stage_fits(&plan, s);
      if (plan.mem[s].peak_bytes > peak) peak = plan.mem[s].peak_bytes;
    }
    CU_ASSERT_EQUAL(plan.fits, all);
    /* dependencies run backwards only (a program is run in order) */
    for (int64_t s = 0; s < plan.par.pp; s++) {
      const px_program *prog = &plan.programs[s];
      for (int32_t i = 0; i < prog->ninsts; i++)
        for (int32_t d = 0; d < prog->insts[i].ndeps; d++) CU_ASSERT(prog->deps[prog->insts[i].dep_start + d] < i);
    }
    px_sweep_opts o;
    px_sweep_opts_init(&o);
    o.fixed = par;
    o.threads = 1;
    o.max_tp = par.tp;
    px_sweep_result r;
    CU_ASSERT_EQUAL_FATAL(px_sweep_run(&m, &c, &o, &r, &err), PX_OK);
    CU_ASSERT_EQUAL(r.n + r.ndropped, 1);
    if (r.n == 1) {
      fitting++;
      CU_ASSERT(plan.fits);
      px_sim_result sr;
      px_sim_opts so = {.skip_straggler = true}; /* as the sweep, which does not report the straggler's share */
      CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &so, &sr, &err), PX_OK);
      bool same = same_sim(&r.entries[0].sim, &sr);
      if (!same)
        fprintf(stderr, "\n  %s on %lld %s tp %lld pp %lld dp %lld z%d: sweep step %.9g exposed %.9g, sim %.9g %.9g\n",
                m.name, (long long)c.gpus, c.name, (long long)par.tp, (long long)par.pp, (long long)par.dp, par.zero,
                r.entries[0].sim.step_time_s, r.entries[0].sim.comm_exposed_s, sr.step_time_s, sr.comm_exposed_s);
      CU_ASSERT(same);
      CU_ASSERT_EQUAL(r.entries[0].peak_bytes, peak);
      CU_ASSERT(same_parallel(&r.entries[0].par, &plan.par));
      px_sim_result_free(&sr);
    } else if (r.ndropped == 1) {
      CU_ASSERT(!plan.fits);
      CU_ASSERT_EQUAL(r.dropped[0].peak_bytes, peak);
    }
    px_sweep_result_free(&r);
    px_plan_free(&plan);
  }
  CU_ASSERT_EQUAL(valid, 200);
  CU_ASSERT(fitting >= 50); /* the property is exercised on simulated plans, not only dropped ones */
  printf("\n  %d valid plans (%d draws), %d fit and were simulated\n", valid, draws, fitting);
}

/* A random plan as a sweep could choose it (the sweep's dimensions, mixtures of experts, context
 * parallelism, offload, fp8, short first and last stages); false when it is not valid. */
static bool random_sweep_plan(px_model *m, px_cluster *c, px_parallel *p) {
  static const char *const ms[] = {"gpt2-350m", "llama3-8b", "llama3-70b", "tiny-moe", "tiny-moe-shared",
                                   "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3"};
  static const char *const cs[] = {"dgx-h100", "dgx-a100", "gb200-nvl72"};
  px_err err = {0};
  if (px_model_load(ms[rnd(sizeof ms / sizeof *ms)], m, &err) || px_cluster_load(cs[rnd(3)], c, &err)) return false;
  int64_t gpus = (int64_t)8 << rnd(6); /* 8 .. 256 */
  if (px_cluster_set_size(c, gpus, 0, &err)) return false;
  px_parallel_unset(p);
  p->tp = pick_divisor(gpus, 8);
  p->cp = rnd(3) ? 1 : (int64_t)2 << rnd(2);
  p->seq = p->cp > 1 ? 4 * m->seq_len : 0;
  p->pp = pick_divisor(m->layers, 8);
  if (gpus % (p->tp * p->cp * p->pp)) return false;
  p->dp = gpus / (p->tp * p->cp * p->pp);
  if (m->experts > 0) {
    p->etp = rnd(2) ? p->tp : 1;
    p->ep = pick_divisor(m->experts, 64);
  }
  p->zero = p->dp * p->cp > 1 ? (int)rnd(4) : 0;
  if (p->zero >= 2 && !rnd(3)) p->offload_opt = PX_OFFLOAD_CPU, p->offload_params = p->zero == 3 && rnd(2);
  p->sp = p->tp > 1 ? (int)rnd(2) : 0;
  p->mbs = (int64_t)1 << rnd(3);
  p->gbs = p->mbs * p->dp * p->pp * (int64_t)(1 + rnd(4));
  p->schedule = p->pp == 1 ? PX_SCHED_1F1B : (int)rnd(PX_SCHED_COUNT);
  p->vpp = p->schedule == PX_SCHED_INTERLEAVED ? (int64_t)2 + (int64_t)rnd(2) : 1;
  if (p->pp >= 3 && p->schedule != PX_SCHED_GPIPE && rnd(3) == 0) /* the first and last stage a layer short */
    p->first_stage_layers = p->last_stage_layers = m->layers / p->pp - 1 > 0 ? m->layers / p->pp - 1 : 1;
  p->recompute = (int)rnd(3);
  p->precision = c->gpu.peak_flops[PX_DTYPE_FP8] > 0 && rnd(2) ? PX_PREC_FP8 : PX_PREC_BF16;
  if (rnd(4) == 0) p->overlap = PX_OVERLAP_ALL;
  if (p->zero == 3 && rnd(2)) p->reshard = 0;
  px_parallel_resolve(p, m, c);
  return !px_parallel_validate(p, m, c, NULL);
}

/* The bounds of one valid plan against the plan: its memory floor against every stage's peak (and with
 * the most offload a sweep tries), its step floor against the walk's bound and the simulated step; the
 * floors over the exact figures added to tight_mem and tight_step (NULL: not). Whether the plan fits. */
static bool bounds_hold(const px_model *m, const px_cluster *c, const px_parallel *par, double *tight_mem,
                        double *tight_step) {
  px_err err = {0};
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, m, c, par, &err), PX_OK);
  bool fits = plan.fits;
  px_bound b, most;
  CU_ASSERT_EQUAL_FATAL(px_bound_plan(m, c, par, NULL, &b, &err), PX_OK);
  /* memory: no stage's peak is less than the floor on that stage */
  uint64_t peak = plan.mem[px_plan_peak_stage(&plan)].peak_bytes;
  CU_ASSERT(b.peak_bytes <= plan.mem[b.stage].peak_bytes);
  if (tight_mem) *tight_mem += (double)b.peak_bytes / (double)peak;
  /* ... and with the states of the most offload a sweep tries (what it drops plans by), no more than that
   * stage's peak with those states */
  px_parallel q = *par;
  q.offload_opt = PX_OFFLOAD_CPU, q.offload_params = par->zero == 3 ? PX_OFFLOAD_CPU : PX_OFFLOAD_NONE;
  CU_ASSERT_EQUAL_FATAL(px_bound_plan(m, c, par, &q, &most, &err), PX_OK);
  px_states st;
  px_plan_states_for(&plan, &q, most.stage, &st);
  const px_memplan *mp = &plan.mem[most.stage];
  CU_ASSERT(most.peak_bytes <= mp->peak_bytes - mp->static_bytes + px_states_bytes(&st, PX_PLACE_GPU));
  /* step: the floor is no more than the walk's bound, which is no more than the simulated step */
  double walk = 0;
  CU_ASSERT_EQUAL(px_sim_step_bound_s(&plan, &walk, &err), PX_OK);
  px_sim_opts so = {.skip_exposed = true, .skip_straggler = true};
  px_sim_result sr;
  CU_ASSERT_EQUAL_FATAL(px_sim_run(&plan, &so, &sr, &err), PX_OK);
  if (!(b.step_s <= walk && walk <= sr.step_time_s))
    fprintf(stderr, "\n  %s on %lld %s tp %lld cp %lld pp %lld dp %lld ep %lld z%d sched %d: floor %.9g walk %.9g sim %.9g\n",
            m->name, (long long)c->gpus, c->name, (long long)par->tp, (long long)par->cp, (long long)par->pp,
            (long long)par->dp, (long long)par->ep, par->zero, par->schedule, b.step_s, walk, sr.step_time_s);
  CU_ASSERT(b.step_s > 0 && b.step_s <= walk && walk <= sr.step_time_s);
  if (tight_step) *tight_step += b.step_s / sr.step_time_s;
  px_sim_result_free(&sr);
  px_plan_free(&plan);
  return fits;
}

static void test_bounds_are_bounds(void) {
  int valid = 0, draws = 0, moe = 0, cp = 0, zb = 0, offload = 0, fp8 = 0, fp8w = 0, window = 0, fitting = 0, lora = 0, bs = 0, hp = 0;
  double tight_mem = 0, tight_step = 0;
  while (valid < 200 && draws < 20000) {
    draws++;
    px_model m;
    px_cluster c;
    px_parallel par;
    if (!random_sweep_plan(&m, &c, &par)) continue;
    valid++;
    moe += m.experts > 0, cp += par.cp > 1, zb += px_parallel_split_w(&par), offload += par.offload_opt > 0;
    fp8 += par.precision == PX_PREC_FP8;
    fitting += bounds_hold(&m, &c, &par, &tight_mem, &tight_step);
    /* the same plan with fp8 weights (fp8_params), and on the model with sliding-window layers on every
     * other layer, where valid: their blocks and states bounded too */
    px_parallel w8 = par;
    w8.fp8_params = 1;
    if (par.precision == PX_PREC_FP8 && !px_parallel_validate(&w8, &m, &c, NULL))
      fp8w++, bounds_hold(&m, &c, &w8, NULL, NULL);
    /* ... in the block-scaled precisions where the GPU has them (Blackwell) */
    for (int q = PX_PREC_MXFP8; q <= PX_PREC_NVFP4; q++) {
      px_parallel b = par;
      b.precision = q;
      if (!px_parallel_validate(&b, &m, &c, NULL)) bs++, bounds_hold(&m, &c, &b, NULL, NULL);
      /* ... with some first and last layers kept unquantized (their blocks and states apart) */
      b.bf16_layers_start = rnd(3), b.bf16_layers_end = 1 + rnd(4);
      if (!px_parallel_validate(&b, &m, &c, NULL)) hp++, bounds_hold(&m, &c, &b, NULL, NULL);
    }
    px_model mw = m;
    mw.sliding_window = mw.seq_len / 4, mw.window_layer_freq = 2;
    if (m.sliding_window == 0 && !px_parallel_validate(&par, &mw, &c, NULL))
      window++, bounds_hold(&mw, &c, &par, NULL, NULL);
    /* fine-tuning the same split with adapters (LoRA or QLoRA, bf16 GEMMs), where valid: a frozen base */
    px_parallel ft = par;
    ft.finetune = rnd(2) ? PX_FT_LORA : PX_FT_QLORA, ft.precision = PX_PREC_BF16, ft.fp8_recipe = -1;
    px_parallel_resolve(&ft, &m, &c);
    if (!px_parallel_validate(&ft, &m, &c, NULL)) lora++, bounds_hold(&m, &c, &ft, NULL, NULL);
  }
  CU_ASSERT_EQUAL(valid, 200);
  CU_ASSERT(moe >= 40 && cp >= 20 && zb >= 20 && offload >= 10 && fp8 >= 40 && fp8w >= 20 && window >= 40 &&
            fitting >= 40 && lora >= 20 && bs >= 40 && hp >= 40);
  printf("\n  %d valid plans (%d draws: %d MoE, %d CP, %d zero-bubble, %d offloaded, %d fp8, %d fit), and %d of them "
         "with fp8 weights, %d with sliding windows, %d fine-tuned with adapters, %d in mxfp8 or nvfp4 (%d with bf16 "
         "layers); floor / exact: memory %.2f, step %.2f on average\n",
         valid, draws, moe, cp, zb, offload, fp8, fitting, fp8w, window, lora, bs, hp, tight_mem / valid,
         tight_step / valid);
}

static bool same_ref(px_ref a, px_ref b) { return a.slot == b.slot && a.layer_off == b.layer_off; }

/* Every field of two ops (not their padding). */
static bool same_op(const px_op *a, const px_op *b) {
  bool same = a->kind == b->kind && a->stream == b->stream && a->phase == b->phase && a->group == b->group &&
              a->coll == b->coll && a->flags == b->flags && a->dep == b->dep && a->flops == b->flops &&
              a->bytes == b->bytes && a->wire_bytes == b->wire_bytes && a->coll_bytes == b->coll_bytes &&
              a->free_start == b->free_start && a->free_count == b->free_count &&
              a->alloc_start == b->alloc_start && a->alloc_count == b->alloc_count &&
              !memcmp(a->dim, b->dim, sizeof a->dim);
  for (int i = 0; i < PX_OP_OUTS; i++) same = same && same_ref(a->out[i], b->out[i]);
  for (int i = 0; i < PX_OP_INS; i++) same = same && same_ref(a->in[i], b->in[i]);
  return same;
}

/* Whether two plans' block templates are the same (every op, allocation and free, and every slot). */
static bool same_templates(const px_plan *a, const px_plan *b) {
  if (a->nslots != b->nslots) return false;
  for (int32_t i = 0; i < a->nslots; i++)
    if (strcmp(a->slots[i].name, b->slots[i].name) || a->slots[i].bytes != b->slots[i].bytes ||
        a->slots[i].kind != b->slots[i].kind || a->slots[i].fp8 != b->slots[i].fp8 || a->slots[i].role != b->slots[i].role)
      return false;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    const px_block *x = &a->blocks[k], *y = &b->blocks[k];
    if (x->nops != y->nops || x->nallocs != y->nallocs || x->nfrees != y->nfrees) return false;
    for (int32_t i = 0; i < x->nops; i++)
      if (!same_op(&x->ops[i], &y->ops[i])) return false;
    for (int32_t i = 0; i < x->nallocs; i++)
      if (!same_ref(x->allocs[i], y->allocs[i])) return false;
    for (int32_t i = 0; i < x->nfrees; i++)
      if (!same_ref(x->frees[i], y->frees[i])) return false;
  }
  return true;
}

/* A plan and the same with other choices only its programs read (the schedule, vpp, the layer split,
 * ZeRO-3's modes and prefetch, the bucket): the bound cache gives them one key, and their templates, each
 * compiled alone, are the same. */
static void test_bound_keys_share_templates(void) {
  int pairs = 0, draws = 0;
  while (pairs < 100 && draws < 20000) {
    draws++;
    px_model m;
    px_cluster c;
    px_parallel a, b;
    if (!random_sweep_plan(&m, &c, &a)) continue;
    b = a;
    bool split = px_parallel_split_w(&a);
    b.schedule = a.pp == 1 ? PX_SCHED_1F1B : split ? (int)(PX_SCHED_ZB_H1 + rnd(2)) : (int)rnd(3);
    b.vpp = b.schedule == PX_SCHED_INTERLEAVED ? 2 : 1;
    b.first_stage_layers = b.last_stage_layers = b.mb_group = 0;
    b.bucket_bytes = a.bucket_bytes * (1 + rnd(3));
    b.prefetch = a.zero == 3 ? (int64_t)rnd(3) : a.prefetch;
    b.reshard = a.zero == 3 ? (int)rnd(2) : a.reshard;
    b.grad_accum = a.zero >= 2 && px_parallel_microbatches(&a) > 1 ? (int)rnd(2) : a.grad_accum;
    if (px_parallel_validate(&b, &m, &c, NULL)) continue;
    px_err err = {0};
    px_bound_cache *bc = px_bound_cache_new(&m, &c, &err);
    int64_t ia = -1, ib = -2;
    CU_ASSERT_FATAL(bc != NULL);
    CU_ASSERT_EQUAL(px_bound_cache_add(bc, &a, &ia, &err), PX_OK);
    CU_ASSERT_EQUAL(px_bound_cache_add(bc, &b, &ib, &err), PX_OK);
    CU_ASSERT_EQUAL(ia, ib);
    px_bound_cache_free(bc);
    px_plan pa, pb;
    CU_ASSERT_EQUAL_FATAL(px_plan_compile_blocks(&pa, &m, &c, &a, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_plan_compile_blocks(&pb, &m, &c, &b, &err), PX_OK);
    CU_ASSERT(same_templates(&pa, &pb));
    px_plan_free(&pa), px_plan_free(&pb);
    pairs++;
  }
  CU_ASSERT_EQUAL(pairs, 100);
}

int main(void) {
  static const px_test tests[] = {
      {"sweep rows equal sim of the same plan (200 random plans)", test_sweep_rows_equal_sim},
      {"bounds before compiling are bounds: memory and step (200 random plans)", test_bounds_are_bounds},
      {"plans with one bound key share their block templates (100 random pairs)", test_bound_keys_share_templates},
  };
  return px_test_main("props", tests, sizeof tests / sizeof tests[0]);
}
