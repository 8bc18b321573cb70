/* The rank grid and the placement of its groups on nodes. */
#include "plan/grid.h"

px_placement px_grid_place(const px_grid *g, int64_t first, int64_t stride, int64_t size) {
  px_placement p = {.size = size, .stride = stride, .per_node = 0, .nodes = 0, .leaves = 0};
  int64_t prev_dom = -1, run = 0, prev_leaf = -1;
  /* Members are in increasing rank order, so domains and leaves are visited in order. */
  for (int64_t i = 0; i < size; i++) {
    int64_t rank = first + i * stride, dom = rank / g->domain, leaf = rank / g->gpus_per_node / g->nodes_per_leaf;
    if (dom != prev_dom) {
      p.nodes++;
      run = 0;
      prev_dom = dom;
    }
    if (leaf != prev_leaf) {
      p.leaves++;
      prev_leaf = leaf;
    }
    if (++run > p.per_node) p.per_node = run;
  }
  p.intra = p.nodes <= 1;
  return p;
}

void px_grid_init(px_grid *g, const px_cluster *c, int64_t tp, int64_t cp, int64_t dp, int64_t pp) {
  g->tp = tp;
  g->cp = cp;
  g->dp = dp;
  g->pp = pp;
  g->wdp = cp * dp;
  g->world = tp * cp * dp * pp;
  g->gpus_per_node = c->gpus_per_node;
  g->domain = px_cluster_nvlink_domain(c);
  g->nodes_per_leaf = c->nodes_per_leaf > 0 ? c->nodes_per_leaf : 1;
  g->tp_place = px_grid_place(g, 0, 1, tp);
  g->cp_place = px_grid_place(g, 0, tp, cp);
  g->dp_place = px_grid_place(g, 0, tp, g->wdp);
  g->pp_place = px_grid_place(g, 0, tp * g->wdp, pp);
  px_grid_set_shard(g, g->wdp);
  px_grid_set_ep(g, 1, tp);
}

void px_grid_set_ep(px_grid *g, int64_t ep, int64_t etp) {
  int64_t ranks = g->tp * g->wdp; /* a stage's */
  if (etp < 1) etp = g->tp;
  if (ep < 1 || ranks % (etp * ep)) ep = 1, etp = g->tp;
  g->ep = ep, g->etp = etp;
  g->etp_place = px_grid_place(g, 0, 1, etp);
  g->ep_place = px_grid_place(g, 0, etp, ep);
  g->edp_place = px_grid_place(g, 0, etp * ep, ranks / (etp * ep));
}

void px_grid_set_shard(px_grid *g, int64_t shard) {
  if (shard < 1 || g->wdp % shard) shard = g->wdp;
  g->shard = shard;
  g->shard_place = shard == g->wdp ? g->dp_place : px_grid_place(g, 0, g->tp, shard);
  g->replica_place = px_grid_place(g, 0, g->tp * shard, g->wdp / shard);
}

int64_t px_grid_rank(const px_grid *g, int64_t tp_rank, int64_t cp_rank, int64_t dp_rank, int64_t pp_rank) {
  return tp_rank + g->tp * (cp_rank + g->cp * (dp_rank + g->dp * pp_rank));
}

void px_grid_coords(const px_grid *g, int64_t rank, int64_t *tp_rank, int64_t *cp_rank, int64_t *dp_rank,
                    int64_t *pp_rank) {
  *tp_rank = rank % g->tp;
  *cp_rank = (rank / g->tp) % g->cp;
  *dp_rank = (rank / (g->tp * g->cp)) % g->dp;
  *pp_rank = rank / (g->tp * g->wdp);
}

bool px_grid_pp_link_intra(const px_grid *g, int64_t stage) {
  int64_t a = stage * g->tp * g->wdp, b = a + g->tp * g->wdp;
  return a / g->domain == b / g->domain;
}
