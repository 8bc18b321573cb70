/* Collective cost model: nccl-tests bus bandwidths and latencies against
 * published figures (tests/data/nccl_busbw.csv), hand-computed times, the
 * algorithm choice, oversubscription and busbw factors. */
#include <stdio.h>
#include <string.h>

#include "plan/cluster.h"
#include "plan/grid.h"
#include "plan/import.h"
#include "sim/collective.h"
#include "tests/testutil.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

static px_cluster load(const char *preset, int64_t nodes) {
  px_cluster c;
  px_err err = {0};
  memset(&c, 0, sizeof c);
  px_status st = px_cluster_load(preset, &c, &err);
  if (st) fprintf(stderr, "\n  %s: %s\n", preset, err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 0, nodes, &err), PX_OK);
  return c;
}

/* The group of `size` members `stride` ranks apart starting at rank 0 (a DP
 * group of a grid with tp = stride). */
static px_placement place(const px_cluster *c, int64_t size, int64_t stride) {
  px_grid g;
  px_grid_init(&g, c, stride, 1, size, 1);
  return g.dp_place;
}

static px_coll kind_of(const char *s) {
  if (!strcmp(s, "allreduce")) return PX_COLL_ALLREDUCE;
  if (!strcmp(s, "allgather")) return PX_COLL_ALLGATHER;
  if (!strcmp(s, "reduce_scatter")) return PX_COLL_REDUCE_SCATTER;
  return PX_COLL_NONE;
}

/* time_s = latency_s + max_k bytes[k] / bw[k], bw set exactly where bytes are. */
static void check_consistent(const px_coll_cost *k) {
  double t = 0;
  for (int l = 0; l < PX_LINK_COUNT; l++) {
    CU_ASSERT_EQUAL(k->bytes[l] > 0, k->bw[l] > 0);
    if (k->bw[l] > 0 && k->bytes[l] / k->bw[l] > t) t = k->bytes[l] / k->bw[l];
  }
  PX_ASSERT_REL(k->time_s, k->latency_s + t, 1e-12);
}

/* Every row of a published-figures file (tests/data/nccl_busbw.csv,
 * nccl_small.csv: topology, collective, nodes, ranks per node, size, metric,
 * lo, hi, tol): the group is that many consecutive GPUs in each node (one
 * GPU of each, gpus_per_node apart, for a rank a node), and the model's
 * figure must lie in [lo (1 - tol), hi (1 + tol)]. Returns the rows read. */
static int check_published(const char *rel) {
  FILE *fp = fopen(px_test_path(rel), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[2048];
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char topo[64], coll[32], metric[32];
    long long nodes, rpn;
    unsigned long long size;
    double lo, hi, tol;
    if (sscanf(line, "%63[^,],%31[^,],%lld,%lld,%llu,%31[^,],%lf,%lf,%lf,", topo, coll, &nodes, &rpn, &size, metric, &lo,
               &hi, &tol) != 9) {
      fprintf(stderr, "\n  unreadable row: %s", line);
      CU_FAIL("unreadable row");
      continue;
    }
    px_cluster c = load(topo, nodes);
    /* "allreduce/ring": a run with NCCL_ALGO forced, against that algorithm */
    char *forced = strchr(coll, '/');
    if (forced) *forced++ = '\0';
    px_coll kind = !strcmp(coll, "sendrecv") ? PX_COLL_P2P : !strcmp(coll, "alltoall") ? PX_COLL_ALLTOALL : kind_of(coll);
    CU_ASSERT_NOT_EQUAL_FATAL(kind, PX_COLL_NONE);
    px_placement g = place(&c, nodes * rpn, rpn == 1 && nodes > 1 ? c.gpus_per_node : 1);
    CU_ASSERT_EQUAL(g.nodes * g.per_node, nodes * rpn);
    if (px_cluster_nvlink_domain(&c) == c.gpus_per_node) { /* (trays of an NVL72 rack: one NVLink domain) */
      CU_ASSERT_EQUAL(g.nodes, nodes);
      CU_ASSERT_EQUAL(g.per_node, rpn);
    }
    px_coll_cost k = px_coll_cost_of(&c, kind, size, &g);
    if (forced) {
      int a = 0;
      while (a < PX_ALGO_COUNT && strcmp(px_algo_names[a], forced)) a++;
      CU_ASSERT_FATAL(a < PX_ALGO_COUNT && px_coll_cost_algo(&c, kind, size, &g, (px_algo)a, &k));
    }
    check_consistent(&k);
    bool time = !strcmp(metric, "time_us");
    CU_ASSERT(time || !strcmp(metric, "busbw_gb_per_s"));
    double got = time ? k.time_s * 1e6 : px_coll_busbw_bytes_per_s(kind, g.size, size, k.time_s) / 1e9;
    bool ok = got >= lo * (1 - tol) && got <= hi * (1 + tol);
    fprintf(stderr, "\n  %s %s %lldx%lld %llu B (%s): %s %.4g, published %g-%g (tol %g)%s", topo, coll, nodes, rpn, size,
            px_algo_names[k.algo], metric, got, lo, hi, tol, ok ? "" : "  <-- OUT OF RANGE");
    CU_ASSERT(ok);
    rows++;
  }
  fclose(fp);
  fprintf(stderr, "\n");
  return rows;
}

/* Whole nodes' large and small messages. */
static void test_published(void) { CU_ASSERT(check_published("tests/data/nccl_busbw.csv") >= 4); }

/* Groups of part of a node (small-message times, which give the per-step
 * latencies) and pairs across nodes (a NIC's rate). */
static void test_published_groups(void) { CU_ASSERT_EQUAL(check_published("tests/data/nccl_small.csv"), 9); }

/* In one node every ring's large-message busbw is the NVLink rate x
 * efficiency (nccl-tests' busbw is defined so that it is); where the
 * switches reduce (NVLS), the all-reduce takes NVLS instead: S each way at
 * the link rate x nvls_efficiency, busbw 2(n-1)/n of that. */
static void test_one_node_busbw_is_link(void) {
  static const char *const presets[] = {"dgx-a100", "dgx-h100", "hgx-h200"};
  static const px_coll kinds[] = {PX_COLL_ALLREDUCE, PX_COLL_ALLGATHER, PX_COLL_REDUCE_SCATTER};
  for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
    px_cluster c = load(presets[p], 1);
    px_placement g = place(&c, 8, 1);
    CU_ASSERT(g.intra);
    double link = c.intra_bytes_per_s * c.intra_efficiency;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
      px_coll_cost k = px_coll_cost_of(&c, kinds[i], 8 * GIB, &g);
      if (kinds[i] == PX_COLL_ALLREDUCE && c.intra_nvls_efficiency > 0) {
        CU_ASSERT_EQUAL(k.algo, PX_ALGO_NVLS);
        double nvls = c.intra_bytes_per_s * c.intra_nvls_efficiency;
        PX_ASSERT_REL(k.bw[PX_LINK_INTRA], nvls, 1e-12);
        PX_ASSERT_REL(px_coll_busbw_bytes_per_s(kinds[i], 8, 8 * GIB, k.time_s), nvls * 1.75, 0.005);
        check_consistent(&k);
        CU_ASSERT_FATAL(px_coll_cost_algo(&c, kinds[i], 8 * GIB, &g, PX_ALGO_RING, &k));
      }
      CU_ASSERT_EQUAL(k.algo, PX_ALGO_RING);
      CU_ASSERT_EQUAL(k.bytes[PX_LINK_INTER], 0);
      CU_ASSERT_EQUAL(k.bw[PX_LINK_INTER], 0);
      PX_ASSERT_REL(k.bw[PX_LINK_INTRA], link, 1e-12);
      PX_ASSERT_REL(px_coll_busbw_bytes_per_s(kinds[i], 8, 8 * GIB, k.time_s), link, 0.005);
      check_consistent(&k);
    }
  }
  /* The figures themselves: 300 x 0.8 = 240 GB/s (published 230-250), 450 x 0.82 = 369 (about 370). */
  px_cluster a = load("dgx-a100", 1), h = load("dgx-h100", 1);
  PX_ASSERT_REL(px_coll_link_bytes_per_s(&a, PX_LINK_INTRA, 1), 240e9, 1e-12);
  PX_ASSERT_REL(px_coll_link_bytes_per_s(&h, PX_LINK_INTRA, 1), 369e9, 1e-12);
}

/* 2 nodes x 8 H100 on A3 Mega: bandwidth-bound at 8 GiB, latency-bound at 8 bytes. */
static void test_a3_mega_two_nodes(void) {
  px_cluster c = load("a3-mega", 2);
  px_placement g = place(&c, 16, 1);
  CU_ASSERT_EQUAL(g.per_node, 8);
  CU_ASSERT_EQUAL(g.nodes, 2);
  px_coll_cost big = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 8 * GIB, &g);
  CU_ASSERT_EQUAL(big.algo, PX_ALGO_HIER);
  PX_ASSERT_REL(px_coll_busbw_bytes_per_s(PX_COLL_ALLREDUCE, 16, 8 * GIB, big.time_s), 338.8e9, 0.01);
  px_coll_cost small = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 8, &g);
  PX_ASSERT_REL(small.time_s, 123e-6, 0.01);
  PX_ASSERT_REL(small.time_s, small.latency_s, 1e-3); /* latency-bound */
  /* 2 x 7 x 2.7 us (the H100's measured step) + 2 x 1 x 42.6 us = 123 us */
  PX_ASSERT_REL(small.latency_s, 123e-6, 1e-12);
}

/* Hand-computed times (1 GiB = 1073741824 bytes). */
/* Hand-computed times (1 GiB = 1073741824 bytes), on frozen copies of the
 * presets (tests/data/handcalc-*.json) so that calibrating a preset does not
 * move these figures. */
static void test_hand_computed(void) {
  /* 1. Ring all-reduce of 1 GiB in one dgx-a100 node (8 GPUs).
   *    bw intra = 300e9 x 0.8 = 240e9 B/s.
   *    bytes = 2 x 7/8 x 1073741824 = 1879048192 -> 1879048192 / 240e9 = 7.829367466667e-3 s.
   *    latency = 2 x 7 steps x 3 us = 42 us.  time = 7.871367466667e-3 s. */
  px_cluster a100 = load(px_test_path("tests/data/handcalc-a100.json"), 4);
  px_placement g = place(&a100, 8, 1);
  px_coll_cost k = px_coll_cost_of(&a100, PX_COLL_ALLREDUCE, GIB, &g);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_RING);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTRA], 1879048192.0, 1e-15);
  PX_ASSERT_REL(k.latency_s, 42e-6, 1e-12);
  PX_ASSERT_REL(k.time_s, 7.871367466667e-3, 1e-11);

  /* 2. All-gather of 1 GiB (output) across 4 dgx-a100 nodes, 1 GPU per node
   *    (stride 8). Ring (hierarchical needs 2+ GPUs per node, tree is all-reduce only).
   *    bw inter = 8 NICs x 25e9 B/s x 0.85 / 8 GPUs = 21.25e9 B/s.
   *    bytes inter = 3/4 x 1073741824 / 1 = 805306368 -> 805306368 / 21.25e9 = 3.789677025882e-2 s.
   *    latency = 3 steps x 5 us = 15 us.  time = 3.791177025882e-2 s. */
  g = place(&a100, 4, 8);
  CU_ASSERT_EQUAL(g.per_node, 1);
  CU_ASSERT_EQUAL(g.nodes, 4);
  k = px_coll_cost_of(&a100, PX_COLL_ALLGATHER, GIB, &g);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_RING);
  CU_ASSERT_EQUAL(k.bytes[PX_LINK_INTRA], 0);
  PX_ASSERT_REL(k.bw[PX_LINK_INTER], 21.25e9, 1e-12);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTER], 805306368.0, 1e-15);
  PX_ASSERT_REL(k.latency_s, 15e-6, 1e-12);
  PX_ASSERT_REL(k.time_s, 3.791177025882e-2, 1e-11);

  /* 3. Hierarchical all-reduce of 1 GiB over 2 dgx-h100 nodes x 8.
   *    bw intra = 450e9 x 0.82 = 369e9; bw inter = 8 x 50e9 x 0.85 / 8 = 42.5e9 B/s.
   *    intra bytes = 2 x 7/8 x 1073741824 = 1879048192 -> / 369e9 = 5.092271523035e-3 s.
   *    inter bytes = 2 x 1/2 x 1073741824 / 8 = 134217728 -> / 42.5e9 = 3.158064188235e-3 s.
   *    latency = 2 x 7 x 3 us + 2 x 1 x 5 us = 52 us.  time = 52e-6 + 5.092271523035e-3 = 5.144271523035e-3 s.
   *    (Flat ring: 30 x 5 us + max(1.875 GiB / 369e9, 1.875 GiB / 8 / 42.5e9 = 5.921e-3) = 6.071e-3 s.) */
  px_cluster h100 = load(px_test_path("tests/data/handcalc-h100.json"), 2);
  g = place(&h100, 16, 1);
  k = px_coll_cost_of(&h100, PX_COLL_ALLREDUCE, GIB, &g);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_HIER);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTRA], 1879048192.0, 1e-15);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTER], 134217728.0, 1e-15);
  PX_ASSERT_REL(k.latency_s, 52e-6, 1e-12);
  PX_ASSERT_REL(k.time_s, 5.144271523035e-3, 1e-11);
  px_coll_cost ring;
  CU_ASSERT_FATAL(px_coll_cost_algo(&h100, PX_COLL_ALLREDUCE, GIB, &g, PX_ALGO_RING, &ring));
  PX_ASSERT_REL(ring.time_s, 150e-6 + 1.875 * GIB / 8 / 42.5e9, 1e-12);

  /* 4. P2P of 64 MiB between dgx-h100 nodes: 67108864 / 42.5e9 = 1.579032094118e-3 s + 5 us = 1.584032094118e-3 s.
   *    Inside a node: 67108864 / 369e9 = 1.818668401084e-4 s + 3 us = 1.848668401084e-4 s. */
  k = px_coll_cost_p2p(&h100, 64 * MIB, false);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_DIRECT);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTER], 67108864.0, 1e-15);
  PX_ASSERT_REL(k.time_s, 1.584032094118e-3, 1e-11);
  k = px_coll_cost_p2p(&h100, 64 * MIB, true);
  PX_ASSERT_REL(k.time_s, 1.848668401084e-4, 1e-11);
  /* The same through px_coll_cost_of with a 2-member group across nodes (pipeline stages). */
  g = place(&h100, 2, 8);
  k = px_coll_cost_of(&h100, PX_COLL_P2P, 64 * MIB, &g);
  PX_ASSERT_REL(k.time_s, 1.584032094118e-3, 1e-11);

  /* 4b. All-to-all (context parallelism's a2a), always direct.
   *     8 GPUs of one node, S = 1 GiB: each sends 7/8 S = 939524096 B over NVLink -> / 369e9 = 2.546135761518e-3 s,
   *     one step of 3 us: 2.549135761518e-3 s.
   *     16 GPUs over 2 nodes: 7/16 S over NVLink to this node's members, and on this rail-optimised
   *     preset the 7/16 S for the other node's members on other rails too (relayed by their rail's GPU
   *     here, NCCL's PXN): 14/16 S = 939524096 B (2.546e-3 s); 8/16 S = 536870912 B over the NICs
   *     -> / 42.5e9 = 1.263225675294e-2 s, one step of 5 us: 1.263725675294e-2 s. */
  g = place(&h100, 8, 1);
  k = px_coll_cost_of(&h100, PX_COLL_ALLTOALL, GIB, &g);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_DIRECT);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTRA], 939524096.0, 1e-15);
  CU_ASSERT_EQUAL(k.bytes[PX_LINK_INTER], 0);
  PX_ASSERT_REL(k.time_s, 2.549135761518e-3, 1e-11);
  g = place(&h100, 16, 1);
  k = px_coll_cost_of(&h100, PX_COLL_ALLTOALL, GIB, &g);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTRA], 939524096.0, 1e-15);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTER], 536870912.0, 1e-15);
  PX_ASSERT_REL(k.time_s, 1.263725675294e-2, 1e-11);

  /* 5. Tree all-reduce of 1 MiB over 64 dgx-h100 nodes x 8.
   *    latency = 2 x ceil(log2 64) x 5 us + 2 x 7 x 3 us = 60 + 42 = 102 us.
   *    inter bytes = 2 x 1048576 / 8 = 262144 -> / 42.5e9 = 6.168094117647e-6 s.
   *    intra bytes = 2 x 7/8 x 1048576 = 1835008 -> / 369e9 = 4.972921409214e-6 s.
   *    time = 102e-6 + 6.168094117647e-6 = 1.081680941176e-4 s.
   *    (Hierarchical: 42 + 126 x 5 = 672 us of latency alone.) */
  px_cluster big = load(px_test_path("tests/data/handcalc-h100.json"), 64);
  g = place(&big, 512, 1);
  k = px_coll_cost_of(&big, PX_COLL_ALLREDUCE, MIB, &g);
  CU_ASSERT_EQUAL(k.algo, PX_ALGO_TREE);
  PX_ASSERT_REL(k.latency_s, 102e-6, 1e-12);
  PX_ASSERT_REL(k.time_s, 1.081680941176e-4, 1e-11);
}

/* Small messages at many nodes pick the tree; large ones the ring (one GPU
 * per node) or hierarchical (several). */
static void test_algorithm_choice(void) {
  px_cluster c = load("dgx-h100", 64);
  px_placement full = place(&c, 512, 1), flat = place(&c, 64, 8);
  CU_ASSERT_EQUAL(full.per_node, 8);
  CU_ASSERT_EQUAL(flat.per_node, 1);
  CU_ASSERT_EQUAL(flat.nodes, 64);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 1024, &full).algo, PX_ALGO_TREE);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 1024, &flat).algo, PX_ALGO_TREE);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 8 * GIB, &full).algo, PX_ALGO_HIER);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 8 * GIB, &flat).algo, PX_ALGO_RING);
  /* The tree is all-reduce only, and needs more than 2 nodes. */
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLGATHER, 1024, &full).algo, PX_ALGO_HIER);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_REDUCE_SCATTER, 1024, &flat).algo, PX_ALGO_RING);
  px_coll_cost k;
  px_placement two = place(&c, 16, 1);
  CU_ASSERT_FALSE(px_coll_cost_algo(&c, PX_COLL_ALLREDUCE, 1024, &two, PX_ALGO_TREE, &k));
  CU_ASSERT_FALSE(px_coll_cost_algo(&c, PX_COLL_ALLGATHER, 1024, &full, PX_ALGO_TREE, &k));
  CU_ASSERT_FALSE(px_coll_cost_algo(&c, PX_COLL_ALLREDUCE, 1024, &flat, PX_ALGO_HIER, &k));
  /* The choice is the cheapest applicable algorithm, at every size. */
  for (uint64_t s = 1; s <= 16 * GIB; s *= 4) {
    px_coll_cost best = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, s, &full);
    for (int a = 0; a < PX_ALGO_DIRECT; a++)
      if (px_coll_cost_algo(&c, PX_COLL_ALLREDUCE, s, &full, (px_algo)a, &k)) CU_ASSERT(best.time_s <= k.time_s);
    check_consistent(&best);
  }
}

/* At 1 KiB the time is within 1% of the latency, in and across nodes. */
static void test_latency_bound(void) {
  static const struct {
    const char *preset;
    int64_t nodes, size, stride;
  } cases[] = {
      {"dgx-a100", 1, 8, 1}, {"dgx-a100", 1, 2, 1}, {"dgx-h100", 2, 16, 1},
      {"dgx-h100", 4, 4, 8}, {"dgx-h100", 64, 512, 1}, {"a3-mega", 2, 16, 1},
  };
  static const px_coll kinds[] = {PX_COLL_ALLREDUCE, PX_COLL_ALLGATHER, PX_COLL_REDUCE_SCATTER, PX_COLL_P2P};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    px_cluster c = load(cases[i].preset, cases[i].nodes);
    px_placement g = place(&c, cases[i].size, cases[i].stride);
    for (size_t j = 0; j < sizeof kinds / sizeof *kinds; j++) {
      px_coll_cost k = px_coll_cost_of(&c, kinds[j], 1024, &g);
      CU_ASSERT(k.latency_s > 0);
      PX_ASSERT_REL(k.time_s, k.latency_s, 0.01);
    }
  }
}

/* A group spanning 2 leaves with oversubscription 2 gets half the NIC bandwidth. */
static void test_oversubscription(void) {
  px_cluster c = load(px_test_path("tests/data/handcalc-h100.json"), 4); /* frozen: NIC-bound at 0.85 */
  c.nodes_per_leaf = 2;
  c.oversubscription = 2.0;
  px_placement one_leaf = place(&c, 16, 1), two_leaves = place(&c, 32, 1);
  CU_ASSERT_EQUAL(one_leaf.leaves, 1);
  CU_ASSERT_EQUAL(two_leaves.leaves, 2);
  px_coll_cost a = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, GIB, &one_leaf);
  px_coll_cost b = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, GIB, &two_leaves);
  PX_ASSERT_REL(a.bw[PX_LINK_INTER], 42.5e9, 1e-12);
  PX_ASSERT_REL(b.bw[PX_LINK_INTER], a.bw[PX_LINK_INTER] / 2, 1e-12);
  PX_ASSERT_REL(b.bw[PX_LINK_INTRA], a.bw[PX_LINK_INTRA], 1e-12); /* NVLink untouched */
  /* Same group, same algorithm, leaves forced: only the NIC term changes. */
  px_placement forced = two_leaves;
  forced.leaves = 1;
  px_coll_cost f, s;
  CU_ASSERT_FATAL(px_coll_cost_algo(&c, PX_COLL_ALLREDUCE, GIB, &forced, PX_ALGO_RING, &f));
  CU_ASSERT_FATAL(px_coll_cost_algo(&c, PX_COLL_ALLREDUCE, GIB, &two_leaves, PX_ALGO_RING, &s));
  PX_ASSERT_REL(s.bw[PX_LINK_INTER], f.bw[PX_LINK_INTER] / 2, 1e-12);
  PX_ASSERT_REL(s.bytes[PX_LINK_INTER], f.bytes[PX_LINK_INTER], 1e-15);
  PX_ASSERT_REL(s.time_s - s.latency_s, 2 * (f.time_s - f.latency_s), 1e-12); /* NIC-bound */
  /* Without oversubscription, spanning leaves costs nothing extra. */
  c.oversubscription = 1.0;
  PX_ASSERT_REL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, GIB, &two_leaves).bw[PX_LINK_INTER], 42.5e9, 1e-12);
}

static void test_busbw_factors(void) {
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_ALLREDUCE, 8), 1.75, 1e-15);
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_ALLREDUCE, 16), 1.875, 1e-15);
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_ALLGATHER, 8), 0.875, 1e-15);
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_REDUCE_SCATTER, 4), 0.75, 1e-15);
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_P2P, 2), 1.0, 1e-15);
  PX_ASSERT_REL(px_coll_busbw_factor(PX_COLL_ALLTOALL, 4), 0.75, 1e-15);
  CU_ASSERT_EQUAL(px_coll_busbw_factor(PX_COLL_ALLREDUCE, 1), 0.0);
  CU_ASSERT_EQUAL(px_coll_busbw_factor(PX_COLL_NONE, 8), 0.0);
  PX_ASSERT_REL(px_coll_busbw_bytes_per_s(PX_COLL_ALLREDUCE, 8, 1000000000ull, 1.0), 1.75e9, 1e-15);
  CU_ASSERT_EQUAL(px_coll_busbw_bytes_per_s(PX_COLL_ALLREDUCE, 8, 1000, 0.0), 0.0);
}

/* Groups of one, empty buffers and PX_COLL_NONE cost nothing. */
static void test_trivial(void) {
  px_cluster c = load("dgx-h100", 2);
  px_placement one = place(&c, 1, 1), eight = place(&c, 8, 1);
  static const px_coll kinds[] = {PX_COLL_ALLREDUCE, PX_COLL_ALLGATHER, PX_COLL_REDUCE_SCATTER, PX_COLL_P2P};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    px_coll_cost k = px_coll_cost_of(&c, kinds[i], GIB, &one);
    CU_ASSERT_EQUAL(k.algo, PX_ALGO_DIRECT);
    CU_ASSERT_EQUAL(k.time_s, 0);
    CU_ASSERT_EQUAL(k.latency_s, 0);
    CU_ASSERT_EQUAL(k.bytes[PX_LINK_INTRA] + k.bytes[PX_LINK_INTER], 0);
    k = px_coll_cost_of(&c, kinds[i], 0, &eight);
    CU_ASSERT_EQUAL(k.time_s, 0);
  }
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_NONE, GIB, &eight).time_s, 0);
  CU_ASSERT_EQUAL(px_coll_cost_p2p(&c, 0, false).time_s, 0);
  CU_ASSERT_STRING_EQUAL(px_algo_names[PX_ALGO_HIER], "hierarchical");
}

/* px_grid_place in closed form against walking every member (the rule it
 * computes): domains of 1-72 GPUs, leaves of 1-4 nodes, strides around and
 * past the domain, groups from a pair to thousands. */
static void test_place_closed_form(void) {
  static const int64_t domains[] = {1, 4, 8, 72}, per_leaf[] = {1, 4}, strides[] = {0, 1, 2, 3, 5, 8, 12, 72, 100};
  static const int64_t sizes[] = {1, 2, 3, 7, 8, 9, 64, 1000}, firsts[] = {0, 1, 7, 70};
  int checked = 0;
  for (size_t a = 0; a < 4; a++)
    for (size_t b = 0; b < 2; b++) {
      px_grid g = {.gpus_per_node = domains[a] < 8 ? domains[a] : 8, .nodes_per_leaf = per_leaf[b], .domain = domains[a]};
      for (size_t c = 0; c < sizeof strides / sizeof *strides; c++)
        for (size_t d = 0; d < sizeof sizes / sizeof *sizes; d++)
          for (size_t e = 0; e < sizeof firsts / sizeof *firsts; e++) {
            int64_t first = firsts[e], stride = strides[c], size = sizes[d];
            px_placement want = {.size = size, .stride = stride};
            int64_t prev_dom = -1, prev_leaf = -1, run = 0;
            for (int64_t i = 0; i < size; i++) {
              int64_t rank = first + i * stride, dom = rank / g.domain, leaf = rank / g.gpus_per_node / g.nodes_per_leaf;
              if (dom != prev_dom) want.nodes++, run = 0, prev_dom = dom;
              if (leaf != prev_leaf) want.leaves++, prev_leaf = leaf;
              if (++run > want.per_node) want.per_node = run;
            }
            px_placement got = px_grid_place(&g, first, stride, size);
            CU_ASSERT_EQUAL(got.nodes, want.nodes);
            CU_ASSERT_EQUAL(got.leaves, want.leaves);
            CU_ASSERT_EQUAL(got.per_node, want.per_node);
            CU_ASSERT_EQUAL(got.intra, want.nodes <= 1);
            if (got.nodes != want.nodes || got.per_node != want.per_node || got.leaves != want.leaves)
              fprintf(stderr, "\n  domain %lld leaf %lld first %lld stride %lld size %lld: %lld/%lld/%lld, walked %lld/%lld/%lld",
                      (long long)g.domain, (long long)g.nodes_per_leaf, (long long)first, (long long)stride,
                      (long long)size, (long long)got.nodes, (long long)got.per_node, (long long)got.leaves,
                      (long long)want.nodes, (long long)want.per_node, (long long)want.leaves);
            checked++;
          }
    }
  CU_ASSERT_EQUAL(checked, 4 * 2 * 9 * 8 * 4);
}

/* The SMs a collective holds: its link class's comm_sms, the larger when it
 * crosses both, a transfer to another node NCCL's channels per net peer;
 * nothing for a trivial group. */
static void test_held_sms(void) {
  px_cluster c = load("dgx-h100", 2);
  CU_ASSERT(c.intra_comm_sms > 0 && c.inter_comm_sms > PX_NCCL_NET_PEER_CHANNELS);
  px_placement node = place(&c, 8, 1), across = place(&c, 16, 1), rail = place(&c, 2, 8);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, GIB, &node).sms, c.intra_comm_sms);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLGATHER, GIB, &across).sms,
                  c.intra_comm_sms > c.inter_comm_sms ? c.intra_comm_sms : c.inter_comm_sms);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_REDUCE_SCATTER, GIB, &rail).sms, c.inter_comm_sms);
  CU_ASSERT_EQUAL(px_coll_cost_p2p(&c, GIB, true).sms, c.intra_comm_sms);
  CU_ASSERT_EQUAL(px_coll_cost_p2p(&c, GIB, false).sms, PX_NCCL_NET_PEER_CHANNELS);
  CU_ASSERT_EQUAL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 0, &node).sms, 0);
  c.inter_comm_sms = 1; /* a link figure below NCCL's default channels bounds a transfer too */
  CU_ASSERT_EQUAL(px_coll_cost_p2p(&c, GIB, false).sms, 1);
}

/* calibrate --import: the shipped nccl-tests samples (tests/data/nccl, their
 * layout nccl-tests', figures illustrative) become the cluster's curves,
 * round-trip through the cluster file, and replace the model where they
 * apply: a collective takes f S / busbw(S), busbw interpolated in log S. */
static void test_measured_curves(void) {
  px_cluster c = load("dgx-h100", 4);
  static const char *const rel[6] = {"tests/data/nccl/node_ar.txt",         "tests/data/nccl/node_rs.txt",
                                     "tests/data/nccl/all_gather_perf.out", "tests/data/nccl/pair_sendrecv.txt",
                                     "tests/data/nccl/gemm.csv",            "tests/data/nccl/node_a2a.txt"};
  char paths[6][4096];
  const char *files[6];
  for (int i = 0; i < 6; i++) snprintf(paths[i], sizeof paths[i], "%s", px_test_path(rel[i])), files[i] = paths[i];
  px_err err = {0};
  px_status st = px_cluster_import(&c, files, 6, &err);
  if (st) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
  CU_ASSERT_EQUAL(c.busbw_len[PX_LINK_INTRA], 33); /* all-reduce, reduce-scatter and all-to-all, 11 sizes each */
  CU_ASSERT_EQUAL(c.busbw_len[PX_LINK_INTER], 22); /* all-gather on 2 nodes, sendrecv */
  CU_ASSERT_EQUAL(c.gpu.gemm_table_len, 5);
  PX_ASSERT_REL(c.gpu.gemm_table[4].efficiency, 1301.4 / 1978.9, 1e-9); /* fp8 against the fp8 peak */
  CU_ASSERT_EQUAL(c.gpu.gemm_table[4].dtype, PX_DTYPE_FP8);
  /* the sample's rows: 64 MiB all-reduce 340.20 GB/s; between 64 and 128 MiB, halfway in log size */
  PX_ASSERT_REL(px_coll_measured_busbw(&c, PX_LINK_INTRA, PX_COLL_ALLREDUCE, 64 * MIB), 340.20e9, 1e-12);
  PX_ASSERT_REL(px_coll_measured_busbw(&c, PX_LINK_INTRA, PX_COLL_ALLREDUCE, 94906266), (340.20e9 + 360.75e9) / 2, 1e-6);
  PX_ASSERT_REL(px_coll_measured_busbw(&c, PX_LINK_INTRA, PX_COLL_ALLREDUCE, 4 * GIB), 374.02e9, 1e-12); /* end */
  CU_ASSERT_EQUAL(px_coll_measured_busbw(&c, PX_LINK_INTRA, PX_COLL_ALLGATHER, 64 * MIB), 0.0); /* not measured */
  /* a TP-like group of 8 in a node: the all-reduce takes 2 (7/8) S / busbw */
  px_placement node = place(&c, 8, 1);
  px_coll_cost k = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 64 * MIB, &node);
  CU_ASSERT(k.measured);
  PX_ASSERT_REL(k.time_s, 2.0 * 7.0 / 8.0 * (double)(64 * MIB) / 340.20e9, 1e-12);
  /* a group of 4 in a node, the same busbw (nccl-tests' busbw is rank-count free): 2 (3/4) S / busbw */
  px_placement four = place(&c, 4, 1);
  PX_ASSERT_REL(px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 64 * MIB, &four).time_s, 1.5 * (double)(64 * MIB) / 340.20e9, 1e-12);
  /* no intra all-gather curve: the model */
  CU_ASSERT_FALSE(px_coll_cost_of(&c, PX_COLL_ALLGATHER, 64 * MIB, &node).measured);
  /* a DP group across 4 nodes (stride 8): the inter-node all-gather curve, 3/4 S / busbw */
  px_placement dp = place(&c, 4, 8);
  k = px_coll_cost_of(&c, PX_COLL_ALLGATHER, 256 * MIB, &dp);
  CU_ASSERT(k.measured);
  PX_ASSERT_REL(k.time_s, 0.75 * (double)(256 * MIB) / 46.0e9, 1e-12);
  /* context parallelism's all-to-all over 4 GPUs of a node: 3/4 S / busbw at the sample's 64 MiB row */
  PX_ASSERT_REL(px_coll_cost_of(&c, PX_COLL_ALLTOALL, 64 * MIB, &four).time_s, 0.75 * (double)(64 * MIB) / 316.30e9, 1e-12);
  /* pipeline p2p across nodes: S / sendrecv busbw */
  PX_ASSERT_REL(px_coll_cost_p2p(&c, 16 * MIB, false).time_s, (double)(16 * MIB) / 43.9e9, 1e-12);
  /* the cluster file round-trips the curves */
  cJSON *j = px_cluster_to_json(&c);
  px_cluster back;
  CU_ASSERT_EQUAL_FATAL(px_cluster_from_json(j, "round trip", &back, &err), PX_OK);
  cJSON_Delete(j);
  for (int l = 0; l < 2; l++) {
    CU_ASSERT_EQUAL(back.busbw_len[l], c.busbw_len[l]);
    for (int i = 0; i < c.busbw_len[l] && i < back.busbw_len[l]; i++) {
      CU_ASSERT_EQUAL(back.busbw[l][i].coll, c.busbw[l][i].coll);
      CU_ASSERT_EQUAL(back.busbw[l][i].bytes, c.busbw[l][i].bytes);
      CU_ASSERT_EQUAL(back.busbw[l][i].ranks, c.busbw[l][i].ranks);
      PX_ASSERT_REL(back.busbw[l][i].bytes_per_s, c.busbw[l][i].bytes_per_s, 1e-12);
    }
  }
  CU_ASSERT_EQUAL(back.gpu.gemm_table[4].dtype, PX_DTYPE_FP8);
}

/* An NVLink domain larger than a node (GB200 NVL72: trays of 4 GPUs, 72 on
 * one NVLink fabric): groups inside a domain are intra-node for the
 * collectives whatever trays they span; across racks, the NICs. */
static void test_nvlink_domain(void) {
  px_cluster c = load("gb200-nvl72", 36); /* 144 GPUs, two racks */
  CU_ASSERT_EQUAL(c.gpus_per_node, 4);
  CU_ASSERT_EQUAL(px_cluster_nvlink_domain(&c), 72);
  px_placement tp8 = place(&c, 8, 1); /* 8 consecutive GPUs on 2 trays */
  CU_ASSERT(tp8.intra);
  CU_ASSERT_EQUAL(tp8.per_node, 8);
  px_placement dp2 = place(&c, 2, 72); /* one GPU in each rack */
  CU_ASSERT_FALSE(dp2.intra);
  CU_ASSERT_EQUAL(dp2.nodes, 2);
  px_coll_cost k = px_coll_cost_of(&c, PX_COLL_ALLREDUCE, 256 * MIB, &tp8);
  CU_ASSERT_EQUAL(k.bytes[PX_LINK_INTER], 0.0);
  /* the same cluster with 4-GPU NVLink domains: the 8 GPUs span two, the NICs carry bytes and it is slower */
  px_cluster small = c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&small, "intra_node.nvlink_domain=4", &err), PX_OK);
  px_placement tp8s = place(&small, 8, 1);
  CU_ASSERT_FALSE(tp8s.intra);
  px_coll_cost ks = px_coll_cost_of(&small, PX_COLL_ALLREDUCE, 256 * MIB, &tp8s);
  CU_ASSERT(ks.bytes[PX_LINK_INTER] > 0);
  CU_ASSERT(ks.time_s > 1.5 * k.time_s); /* 2.0x at the measured NVLink 5 and NIC shares */
  /* a domain must be whole nodes */
  CU_ASSERT_EQUAL(px_cluster_set_field(&small, "intra_node.nvlink_domain=6", &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a whole number of nodes of 4 GPUs"));
}

/* The all-to-all of "hand-computed times" (2 nodes of 8, 1 GiB) on a fat
 * tree, where every NIC of a node is on one leaf: no relay through the
 * other rails' GPUs, so only the 7/16 S for this node's members crosses
 * NVLink; the NICs carry the same 8/16 S and set the same time. */
static void test_alltoall_fat_tree(void) {
  px_cluster c = load(px_test_path("tests/data/handcalc-h100.json"), 2); /* frozen, as the hand-computed times */
  c.net_kind = PX_NET_FAT_TREE;
  px_placement g = place(&c, 16, 1);
  px_coll_cost k = px_coll_cost_of(&c, PX_COLL_ALLTOALL, GIB, &g);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTRA], 469762048.0, 1e-15);
  PX_ASSERT_REL(k.bytes[PX_LINK_INTER], 536870912.0, 1e-15);
  PX_ASSERT_REL(k.time_s, 1.263725675294e-2, 1e-11);
}

int main(void) {
  static const px_test tests[] = {
      {"published nccl-tests figures (tests/data/nccl_busbw.csv)", test_published},
      {"published small-message times and link rates (tests/data/nccl_small.csv)", test_published_groups},
      {"one node: busbw = NVLink x efficiency for AR, AG, RS", test_one_node_busbw_is_link},
      {"A3 Mega 2x8: 338.8 GB/s at 8 GiB, 123 us at 8 B", test_a3_mega_two_nodes},
      {"hand-computed times", test_hand_computed},
      {"algorithm choice: tree small, ring/hierarchical large", test_algorithm_choice},
      {"1 KiB is latency-bound", test_latency_bound},
      {"oversubscription halves NIC bandwidth across leaves", test_oversubscription},
      {"busbw factors", test_busbw_factors},
      {"trivial groups cost nothing", test_trivial},
      {"SMs a collective holds, by link class", test_held_sms},
      {"placements in closed form, as walking every member", test_place_closed_form},
      {"measured nccl-tests curves: imported, round-tripped, and used", test_measured_curves},
      {"an NVLink domain of 72 GPUs over trays of 4 (GB200 NVL72)", test_nvlink_domain},
      {"all-to-all on a fat tree: no relay over the other rails' GPUs", test_alltoall_fat_tree},
  };
  return px_test_main("collective", tests, sizeof tests / sizeof tests[0]);
}
