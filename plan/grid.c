/* The rank grid and the placement of its groups on nodes. */
#include "plan/grid.h"

/* Members first + i stride (i < size) in windows of w ranks (NVLink domains,
 * leaves): they visit every window from the first member's to the last's
 * when stride <= w, and one window each otherwise. */
static int64_t windows_spanned(int64_t first, int64_t stride, int64_t size, int64_t w) {
  int64_t last = first + (size - 1) * stride;
  return stride <= w ? last / w - first / w + 1 : size;
}

/* Members in window d, [d w, (d + 1) w). */
static int64_t members_in(int64_t first, int64_t stride, int64_t size, int64_t w, int64_t d) {
  int64_t lo = d * w - first, hi = (d + 1) * w - 1 - first;
  int64_t i0 = lo <= 0 ? 0 : (lo + stride - 1) / stride, i1 = hi / stride;
  if (i1 > size - 1) i1 = size - 1;
  return i1 >= i0 ? i1 - i0 + 1 : 0;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* In closed form, so that a group of the whole job costs no more than a pair:
 * the members per window repeat with the phase (d w - first) mod stride, every
 * stride / gcd(stride, w) windows, so one period of windows from the first and
 * the last (partial) one hold every count there is. */
px_placement px_grid_place(const px_grid *g, int64_t first, int64_t stride, int64_t size) {
  px_placement p = {.size = size, .stride = stride, .per_node = 0, .nodes = 0, .leaves = 0};
  if (size > 0 && stride <= 0) { /* every member on one rank */
    p.nodes = p.leaves = 1;
    p.per_node = size;
  } else if (size > 0) {
    int64_t w = g->domain, leaf_w = g->gpus_per_node * g->nodes_per_leaf, s = stride;
    p.nodes = windows_spanned(first, s, size, w);
    p.leaves = windows_spanned(first, s, size, leaf_w);
    p.per_node = 1;
    if (s < w && size > 1) {
      int64_t d0 = first / w, d1 = (first + (size - 1) * s) / w, period = s / gcd64(s, w);
      for (int64_t d = d0; d <= d1 && d <= d0 + period; d++) {
        int64_t n = members_in(first, s, size, w, d);
        if (n > p.per_node) p.per_node = n;
      }
      int64_t n = members_in(first, s, size, w, d1);
      if (n > p.per_node) p.per_node = n;
    }
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

void px_grid_expert_coords(const px_grid *g, int64_t tp_rank, int64_t wdp_rank, int64_t *etp_rank, int64_t *ep_rank,
                           int64_t *edp_rank) {
  int64_t r = tp_rank + g->tp * wdp_rank, etp = g->etp > 0 ? g->etp : 1, ep = g->ep > 0 ? g->ep : 1;
  *etp_rank = r % etp, *ep_rank = r / etp % ep, *edp_rank = r / (etp * ep);
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
