/* The arena's offset allocator: best fit, merging, tags, refusals, a
 * randomized run checked against a byte map of what is taken, and the
 * tensors of real plans' steps replayed in an arena of the size the CUDA
 * backend reserves (the plan's peak plus headroom): they must fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/arena.h"
#include "plan/plan.h"
#include "tests/testutil.h"

#define A PX_ARENA_ALIGN

static void test_basics(void) {
  px_arena a;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_arena_init(&a, 10 * A + 7, &err), PX_OK);
  PX_ASSERT_EQ_U64(a.size, 10 * A); /* whole units only */
  uint64_t o1, o2, o3, tag[PX_ARENA_TAGS];
  const uint64_t none[PX_ARENA_TAGS] = {0}, t7[PX_ARENA_TAGS] = {7, 0}, t3[PX_ARENA_TAGS] = {3, 4, 5},
                 t9[PX_ARENA_TAGS] = {9, 1, 2}, t1[PX_ARENA_TAGS] = {1, 2, 8};
  CU_ASSERT(px_arena_take(&a, 1, &o1, tag)); /* rounds up to one unit */
  CU_ASSERT(px_arena_take(&a, 3 * A, &o2, tag));
  CU_ASSERT(px_arena_take(&a, 0, &o3, tag)); /* zero bytes still get a distinct unit */
  PX_ASSERT_EQ_U64(o1, 0);
  PX_ASSERT_EQ_U64(o2, A);
  PX_ASSERT_EQ_U64(o3, 4 * A);
  PX_ASSERT_EQ_U64(a.used, 5 * A);
  PX_ASSERT_EQ_U64(a.high, 5 * A);
  CU_ASSERT_FALSE(px_arena_take(&a, 6 * A, &o1, tag)); /* 5 units left */
  PX_ASSERT_EQ_U64(a.used, 5 * A);
  /* give the middle back with a tag: a hole of 3 units */
  CU_ASSERT_EQUAL(px_arena_give(&a, o2, 3 * A, t7, &err), PX_OK);
  /* best fit: 2 units go to the 3-unit hole (not the 5-unit tail), with its tag */
  uint64_t o4;
  CU_ASSERT(px_arena_take(&a, 2 * A, &o4, tag));
  PX_ASSERT_EQ_U64(o4, A);
  PX_ASSERT_EQ_U64(tag[0], 7);
  PX_ASSERT_EQ_U64(tag[1], 0);
  /* a give merges with its neighbours, keeping the largest of each tag */
  CU_ASSERT_EQUAL(px_arena_give(&a, o4, 2 * A, t3, &err), PX_OK); /* merges with the unit after it (7, 0) */
  CU_ASSERT_EQUAL(px_arena_give(&a, o1, 1, t9, &err), PX_OK);     /* merges with the hole after it */
  CU_ASSERT_EQUAL(a.nfree, 2);
  CU_ASSERT_EQUAL(px_arena_give(&a, o3, 0, t1, &err), PX_OK); /* joins [0, 4A) and the tail */
  CU_ASSERT_EQUAL(a.nfree, 1);
  PX_ASSERT_EQ_U64(a.free[0].bytes, 10 * A);
  PX_ASSERT_EQ_U64(a.free[0].tag[0], 9); /* max(7, 3, 9, 1) */
  PX_ASSERT_EQ_U64(a.free[0].tag[1], 4); /* max(0, 4, 1, 2) */
  PX_ASSERT_EQ_U64(a.free[0].tag[2], 8); /* max(0, 5, 2, 8) */
  PX_ASSERT_EQ_U64(a.used, 0);
  /* refusals: a range not taken, one past the end */
  CU_ASSERT_EQUAL(px_arena_give(&a, 0, A, none, &err), PX_ERR_RUNTIME);
  CU_ASSERT(strstr(err.msg, "not taken") != NULL);
  CU_ASSERT_EQUAL(px_arena_give(&a, 10 * A, A, none, &err), PX_ERR_RUNTIME);
  px_arena_destroy(&a);
  /* an empty arena takes nothing */
  CU_ASSERT_EQUAL_FATAL(px_arena_init(&a, 100, &err), PX_OK);
  CU_ASSERT_FALSE(px_arena_take(&a, 1, &o1, tag));
  px_arena_destroy(&a);
}

/* Random takes and gives against a map of taken units: no overlap, every
 * give accepted, used = the map's count, and everything merges back. */
static void test_random(void) {
  enum { UNITS = 4096, LIVE = 300 };
  px_arena a;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_arena_init(&a, (uint64_t)UNITS * A, &err), PX_OK);
  uint8_t *map = px_talloc(UNITS);
  uint64_t off[LIVE] = {0}, bytes[LIVE] = {0};
  bool live[LIVE] = {false};
  bool ok = true;
  uint64_t mapped = 0;
  px_tseed(5);
  for (int it = 0; it < 20000 && ok; it++) {
    int k = (int)(px_tunit() * LIVE);
    if (live[k]) {
      uint64_t n = px_arena_round(bytes[k]) / A;
      for (uint64_t u = off[k] / A; u < off[k] / A + n; u++) map[u] = 0;
      mapped -= n;
      const uint64_t tags[PX_ARENA_TAGS] = {(uint64_t)it, (uint64_t)(it % 7)};
      ok = px_arena_give(&a, off[k], bytes[k], tags, &err) == PX_OK;
      live[k] = false;
    } else {
      uint64_t tag[PX_ARENA_TAGS];
      bytes[k] = (uint64_t)(px_tunit() * 40 * A);
      if (!px_arena_take(&a, bytes[k], &off[k], tag)) continue;
      uint64_t n = px_arena_round(bytes[k]) / A;
      for (uint64_t u = off[k] / A; u < off[k] / A + n && ok; u++) ok = ok && map[u] == 0 && (map[u] = 1);
      mapped += n;
      live[k] = true;
    }
    ok = ok && a.used == mapped * A;
    for (int32_t i = 0; i + 1 < a.nfree && ok; i++) /* sorted, never adjacent */
      ok = a.free[i].off + a.free[i].bytes < a.free[i + 1].off;
  }
  CU_ASSERT(ok);
  for (int k = 0; k < LIVE; k++)
    if (live[k]) CU_ASSERT_EQUAL(px_arena_give(&a, off[k], bytes[k], (uint64_t[PX_ARENA_TAGS]){0}, &err), PX_OK);
  CU_ASSERT_EQUAL(a.nfree, 1);
  PX_ASSERT_EQ_U64(a.used, 0);
  CU_ASSERT(a.high <= (uint64_t)UNITS * A);
  px_arena_destroy(&a);
  px_tfree();
}

/* One live tensor of the replay. */
typedef struct {
  int16_t slot;
  int32_t mb, layer;
  uint64_t off, bytes;
} live_t;

/* Replays a stage's program as the interpreter allocates: the model states
 * first, then each op's allocations and frees in program order. Returns the
 * arena's high-water mark; *ok is false when a take found no room. */
static uint64_t replay(const px_plan *p, int64_t stage, uint64_t size, bool *ok) {
  px_arena a;
  px_err err = {0};
  *ok = px_arena_init(&a, size, &err) == PX_OK;
  const px_memplan *mp = &p->mem[stage];
  const px_program *prog = &p->programs[stage];
  uint64_t off, tag[PX_ARENA_TAGS];
  const uint64_t none[PX_ARENA_TAGS] = {0};
  for (int c = PX_MEM_PARAMS; c <= PX_MEM_OPTIMIZER && *ok; c++) *ok = px_arena_take(&a, mp->at_peak[c], &off, tag);
  live_t *live = malloc(sizeof *live * 65536);
  /* offset + 1 of a unit's ZeRO-3 gathered parameters and ZeRO-2/3 full gradients (0: none) */
  uint64_t *gathered = calloc((size_t)prog->nunits + 1, sizeof *gathered);
  uint64_t *bucket = calloc((size_t)prog->nunits + 1, sizeof *bucket);
  uint64_t pb = px_dtype_bytes(p->param_dtype), gb = px_dtype_bytes(p->grad_dtype);
  int z = p->par.zero;
  int64_t n = 0;
  for (int32_t i = 0; i < prog->ninsts && *ok; i++) {
    const px_inst *in = &prog->insts[i];
    const px_block *b = &p->blocks[in->block];
    const px_unit *u = in->unit >= 0 ? &prog->units[in->unit] : NULL;
    bool bwd = px_block_is_bwd((px_block_kind)in->block);
    /* the unit buffers, as the memory plan counts them: ZeRO-3 gathered
     * parameters (until the unit's compute block is done), ZeRO-2/3 full
     * gradients (until the reduce-scatter), the reduce-scatter's shard */
    if (u && in->block == PX_BLOCK_PARAM_SYNC && z == 3) {
      *ok = px_arena_take(&a, u->padded * pb, &off, tag);
      gathered[in->unit] = off + 1;
    }
    if (u && bwd && z >= 2 && !bucket[in->unit]) {
      *ok = px_arena_take(&a, u->padded * gb, &off, tag);
      bucket[in->unit] = off + 1;
    }
    if (u && in->block == PX_BLOCK_GRAD_SYNC && z >= 1 && *ok) {
      uint64_t shard = px_plan_unit_shard(p, u) * gb;
      *ok = px_arena_take(&a, shard, &off, tag) && px_arena_give(&a, off, shard, none, &err) == PX_OK;
      if (z >= 2 && bucket[in->unit]) {
        *ok = *ok && px_arena_give(&a, bucket[in->unit] - 1, u->padded * gb, none, &err) == PX_OK;
        bucket[in->unit] = 0;
      }
    }
    for (int32_t k = 0; k < b->nops && *ok; k++) {
      const px_op *o = &b->ops[k];
      for (int32_t j = 0; j < o->alloc_count && *ok && n < 65536; j++) {
        px_ref r = b->allocs[o->alloc_start + j];
        live_t t = {r.slot, in->mb, in->layer + r.layer_off, 0, p->slots[r.slot].bytes};
        *ok = px_arena_take(&a, t.bytes, &t.off, tag);
        live[n++] = t;
      }
      for (int32_t j = 0; j < o->free_count && *ok; j++) {
        px_ref r = b->frees[o->free_start + j];
        int64_t at = n - 1;
        while (at >= 0 && !(live[at].slot == r.slot && live[at].mb == in->mb && live[at].layer == in->layer + r.layer_off))
          at--;
        *ok = at >= 0 && px_arena_give(&a, live[at].off, live[at].bytes, none, &err) == PX_OK;
        if (*ok) live[at] = live[--n];
      }
    }
    for (int32_t v = in->unit; u && z == 3 && (in->flags & PX_INSTF_RESHARD) && v < in->unit + in->units && *ok; v++)
      if (gathered[v]) {
        *ok = px_arena_give(&a, gathered[v] - 1, prog->units[v].padded * pb, none, &err) == PX_OK;
        gathered[v] = 0;
      }
  }
  uint64_t high = a.high;
  free(gathered);
  free(bucket);
  free(live);
  px_arena_destroy(&a);
  return high;
}

static void test_plans_fit(void) {
  static const struct {
    const char *model, *cluster;
    int64_t gpus, tp, pp, dp, mbs, gbs, vpp;
    px_schedule schedule;
    px_recompute recompute;
    int zero;
  } cases[] = {
      {"gpt2-1.5b", "dgx-h100", 1, 1, 1, 1, 4, 8, 1, PX_SCHED_1F1B, PX_RECOMPUTE_NONE, 0},
      {"gpt2-124m", "dgx-h100", 1, 1, 1, 1, 8, 32, 1, PX_SCHED_1F1B, PX_RECOMPUTE_NONE, 0},
      {"llama2-70b", "dgx-h100", 64, 8, 4, 2, 1, 64, 1, PX_SCHED_1F1B, PX_RECOMPUTE_SELECTIVE, 1},
      {"llama3-8b", "dgx-h100", 16, 2, 4, 2, 2, 64, 2, PX_SCHED_INTERLEAVED, PX_RECOMPUTE_NONE, 2},
      {"gpt3-175b", "dgx-a100", 256, 8, 8, 4, 1, 256, 1, PX_SCHED_1F1B, PX_RECOMPUTE_FULL, 3},
      {"mixtral-8x7b", "dgx-h100", 64, 1, 4, 16, 1, 64, 1, PX_SCHED_1F1B, PX_RECOMPUTE_FULL, 3}, /* MoE: two units a layer */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    px_model m;
    px_cluster c;
    px_parallel par;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(cases[i].model, &m, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(cases[i].cluster, &c, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, cases[i].gpus, 0, &err), PX_OK);
    px_parallel_unset(&par);
    par.tp = cases[i].tp, par.pp = cases[i].pp, par.dp = cases[i].dp, par.mbs = cases[i].mbs, par.gbs = cases[i].gbs;
    par.vpp = cases[i].vpp, par.schedule = cases[i].schedule, par.recompute = cases[i].recompute;
    par.zero = cases[i].zero;
    px_parallel_resolve(&par, &m, &c);
    if (px_plan_compile(&plan, &m, &c, &par, &err) != PX_OK) {
      fprintf(stderr, "\n  %s: %s\n", cases[i].model, err.msg);
      CU_FAIL("plan refused");
      continue;
    }
    for (int64_t s = 0; s < par.pp; s++) {
      bool ok;
      uint64_t size = px_plan_reserve_bytes(plan.mem[s].peak_bytes), high = replay(&plan, s, size, &ok);
      double peak = (double)plan.mem[s].peak_bytes;
      if (!ok || getenv("PX_TEST_VERBOSE"))
        fprintf(stderr, "\n  %s stage %lld: plan peak %.1f MiB, arena %.1f MiB, high-water %.1f MiB (%+.2f%%)%s",
                cases[i].model, (long long)s, peak / 1048576.0, (double)size / 1048576.0, (double)high / 1048576.0,
                100.0 * ((double)high - peak) / peak, ok ? "" : ": does not fit");
      CU_ASSERT(ok);
    }
    px_plan_free(&plan);
  }
}

int main(void) {
  static const px_test tests[] = {
      {"take, best fit, give, merge, tags, refusals", test_basics},
      {"random takes and gives against a map", test_random},
      {"real plans' steps fit the arena the backend reserves", test_plans_fit},
  };
  return px_test_main("arena", tests, sizeof tests / sizeof tests[0]);
}
