/* Properties over 200 random valid plans (hybrid sharding and uneven chunks among them):
 * every instance of a program waits only for earlier instances; a sweep
 * that fixes every dimension reports
 * for its one plan exactly what the simulator reports for it (every figure,
 * bit for bit); and the plan's fits verdict is the per-stage rule over its
 * stages. */
#include <stdio.h>
#include <string.h>

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

int main(void) {
  static const px_test tests[] = {
      {"sweep rows equal sim of the same plan (200 random plans)", test_sweep_rows_equal_sim},
  };
  return px_test_main("props", tests, sizeof tests / sizeof tests[0]);
}
