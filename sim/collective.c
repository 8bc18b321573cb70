/* Collective-communication cost model: ring, tree and hierarchical
 * algorithms over NVLink and NICs, and the cheapest-algorithm choice. */
#include "sim/collective.h"

#include <math.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_algo_names, PX_ALGO_COUNT, "ring", "tree", "hierarchical", "nvls", "direct");

double px_coll_link_bytes_per_s(const px_cluster *c, px_link link, int64_t leaves) {
  if (link == PX_LINK_INTRA) return c->intra_bytes_per_s * c->intra_efficiency;
  int64_t gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
  double bw = (double)c->nics_per_node * c->nic_bytes_per_s * c->inter_efficiency / (double)gpn;
  if (leaves > 1 && c->oversubscription > 1.0) bw /= c->oversubscription;
  return bw;
}

double px_coll_busbw_bytes_per_s(px_coll kind, int64_t n, uint64_t size_bytes, double time_s) {
  if (time_s <= 0) return 0.0;
  return (double)size_bytes / time_s * px_coll_busbw_factor(kind, n);
}

/* Fills bw for the link classes that carry bytes, and time_s. */
static void finish(const px_cluster *c, int64_t leaves, px_coll_cost *k) {
  double t = 0;
  for (int l = 0; l < PX_LINK_COUNT; l++) {
    k->bw[l] = 0;
    if (k->bytes[l] <= 0) continue;
    k->bw[l] = px_coll_link_bytes_per_s(c, (px_link)l, leaves);
    double tl = k->bw[l] > 0 ? k->bytes[l] / k->bw[l] : 0;
    if (tl > t) t = tl;
  }
  k->time_s = k->latency_s + t;
}

int px_coll_held_sms(const px_cluster *c, const px_coll_cost *k, bool p2p) {
  int64_t sms = 0;
  if (k->bytes[PX_LINK_INTRA] > 0) sms = c->intra_comm_sms;
  if (k->bytes[PX_LINK_INTER] > 0) {
    int64_t net = c->inter_comm_sms;
    if (p2p && net > PX_NCCL_NET_PEER_CHANNELS) net = PX_NCCL_NET_PEER_CHANNELS;
    if (net > sms) sms = net;
  }
  return (int)sms;
}

static int64_t ceil_log2(int64_t n) {
  int64_t r = 0;
  while (((int64_t)1 << r) < n) r++;
  return r;
}

double px_coll_measured_busbw(const px_cluster *c, px_link link, px_coll kind, uint64_t size_bytes) {
  const px_busbw_point *lo = NULL, *hi = NULL; /* the nearest points below and above size_bytes */
  for (int i = 0; i < c->busbw_len[link]; i++) {
    const px_busbw_point *p = &c->busbw[link][i];
    if (p->coll != (int)kind) continue;
    if (p->bytes <= size_bytes && (!lo || p->bytes > lo->bytes)) lo = p;
    if (p->bytes >= size_bytes && (!hi || p->bytes < hi->bytes)) hi = p;
  }
  if (!lo || !hi) return lo ? lo->bytes_per_s : hi ? hi->bytes_per_s : 0.0;
  if (hi->bytes == lo->bytes) return lo->bytes_per_s;
  double t = (log((double)size_bytes) - log((double)lo->bytes)) / (log((double)hi->bytes) - log((double)lo->bytes));
  return lo->bytes_per_s + t * (hi->bytes_per_s - lo->bytes_per_s);
}

/* Replaces k's time with the measured curve's, if there is one. */
static void use_measured(const px_cluster *c, px_coll kind, uint64_t size_bytes, const px_placement *g, px_coll_cost *k) {
  int64_t n = g->size;
  if (n <= 1 || size_bytes == 0 || kind == PX_COLL_NONE) return;
  px_link link = g->nodes > 1 ? PX_LINK_INTER : PX_LINK_INTRA;
  double busbw = px_coll_measured_busbw(c, link, kind, size_bytes);
  if (busbw <= 0) return;
  double t = px_coll_busbw_factor(kind, kind == PX_COLL_P2P ? 2 : n) * (double)size_bytes / busbw;
  k->measured = true;
  k->latency_s = 0;
  k->time_s = t;
  for (int l = 0; l < PX_LINK_COUNT; l++) k->bw[l] = k->bytes[l] > 0 && t > 0 ? k->bytes[l] / t : 0;
}

/* DeepEP's bandwidth at EP size ep of its n measured points d: linear in
 * log2(ep) between the two nearest measured sizes, flat beyond the ends; 0
 * when there are none. */
static double deepep_bytes_per_s(const px_deepep_point *d, int n, int64_t ep, bool combine) {
  if (n <= 0) return 0.0;
#define BW(i) (combine ? d[i].combine_bytes_per_s : d[i].dispatch_bytes_per_s)
  if (ep <= d[0].ep) return BW(0);
  for (int i = 1; i < n; i++)
    if (ep <= d[i].ep) {
      double t = (log2((double)ep) - log2((double)d[i - 1].ep)) / (log2((double)d[i].ep) - log2((double)d[i - 1].ep));
      return BW(i - 1) + t * (BW(i) - BW(i - 1));
    }
  return BW(n - 1);
#undef BW
}

px_coll_cost px_coll_cost_deepep(const px_cluster *c, const px_placement *g, double tok, double ranks, double nodes,
                                 bool combine, bool hybrid) {
  px_coll_cost k;
  memset(&k, 0, sizeof k);
  k.algo = PX_ALGO_DIRECT;
  int64_t n = g->size, N = g->nodes > 0 ? g->nodes : 1;
  if (n <= 1 || tok <= 0) return k;
  k.latency_s = N > 1 ? c->inter_latency_s : c->intra_latency_s;
  k.bytes[PX_LINK_INTRA] = tok * ranks * (1.0 - 1.0 / (double)n);
  if (N > 1) k.bytes[PX_LINK_INTER] = tok * nodes * (1.0 - 1.0 / (double)N);
  finish(c, g->leaves, &k);
  k.sms = px_coll_held_sms(c, &k, false);
  /* DeepEP's own time for its logical bytes where measured: across domains its RDMA copies (a node each, its own
   * included), within one its received copies (a rank each, its own included; DeepEP's kernels, not HybridEP's);
   * the links carry theirs at that pace */
  bool intra = N == 1 && !hybrid && c->intra_deepep_len > 0 && n >= c->intra_deepep[0].ep; /* none below: the links */
  double bw = N > 1   ? deepep_bytes_per_s(c->deepep, c->deepep_len, n, combine)
              : intra ? deepep_bytes_per_s(c->intra_deepep, c->intra_deepep_len, n, combine)
                      : 0.0;
  if (bw > 0) {
    k.measured = true;
    double t = tok * (N > 1 ? nodes : ranks) / bw;
    k.time_s = k.latency_s + t;
    for (int l = 0; l < PX_LINK_COUNT; l++) k.bw[l] = k.bytes[l] > 0 ? k.bytes[l] / t : 0;
  }
  return k;
}

px_coll_cost px_coll_cost_p2p(const px_cluster *c, uint64_t bytes, bool intra_node) {
  px_coll_cost k;
  memset(&k, 0, sizeof k);
  k.algo = PX_ALGO_DIRECT;
  if (bytes == 0) return k;
  px_link l = intra_node ? PX_LINK_INTRA : PX_LINK_INTER;
  k.latency_s = intra_node ? c->intra_latency_s : c->inter_latency_s;
  k.bytes[l] = (double)bytes;
  finish(c, 1, &k);
  k.sms = px_coll_held_sms(c, &k, true);
  px_placement pair = {.size = 2, .nodes = intra_node ? 1 : 2};
  use_measured(c, PX_COLL_P2P, bytes, &pair, &k);
  return k;
}

bool px_coll_cost_algo(const px_cluster *c, px_coll kind, uint64_t size_bytes, const px_placement *g, px_algo algo,
                       px_coll_cost *out) {
  memset(out, 0, sizeof *out);
  out->algo = algo;
  int64_t n = g->size, pn = g->per_node > 0 ? g->per_node : 1, N = g->nodes > 0 ? g->nodes : 1;
  bool trivial = n <= 1 || size_bytes == 0 || kind == PX_COLL_NONE;
  if (algo == PX_ALGO_DIRECT) {
    if (trivial) return true;
    if (kind == PX_COLL_ALLTOALL) {
      /* every member sends S/n to each other member at once (NCCL: grouped
       * sends and receives): pn - 1 of them over NVLink, n - pn over the NICs */
      out->latency_s = N > 1 ? c->inter_latency_s : c->intra_latency_s;
      out->bytes[PX_LINK_INTRA] = (double)size_bytes * (double)(pn - 1) / (double)n;
      out->bytes[PX_LINK_INTER] = (double)size_bytes * (double)(n - pn) / (double)n;
      /* rail-optimised: a remote member on another rail (another local rank: all but
       * the N - 1 on one's own rail) is reached through its rail's GPU in this node,
       * NVLink first (NCCL's PXN), so its bytes cross NVLink too and never a spine */
      if (c->net_kind == PX_NET_RAIL_FAT_TREE && N > 1)
        out->bytes[PX_LINK_INTRA] += (double)size_bytes * (double)(n - pn - (N - 1)) / (double)n;
      finish(c, g->leaves, out);
      out->sms = px_coll_held_sms(c, out, false);
      return true;
    }
    if (kind != PX_COLL_P2P) return false;
    /* One transfer between two members: across nodes when the group spans them. */
    *out = px_coll_cost_p2p(c, size_bytes, N <= 1);
    if (N > 1 && g->leaves > 1) finish(c, g->leaves, out);
    return true;
  }
  if (trivial || kind == PX_COLL_P2P || kind == PX_COLL_ALLTOALL) return false;
  bool ar = kind == PX_COLL_ALLREDUCE;
  double S = (double)size_bytes, nd = (double)n, pnd = (double)pn, Nd = (double)N;
  double li = c->intra_latency_s, le = c->inter_latency_s;
  double rounds = ar ? 2.0 : 1.0; /* all-reduce = reduce-scatter + all-gather */
  switch (algo) {
  case PX_ALGO_RING: {
    double f = px_coll_busbw_factor(kind, n);
    out->latency_s = rounds * (nd - 1.0) * (N > 1 ? le : li);
    if (pn > 1) out->bytes[PX_LINK_INTRA] = f * S;
    if (N > 1) out->bytes[PX_LINK_INTER] = f * S / pnd;
    break;
  }
  case PX_ALGO_HIER:
    if (pn <= 1 || N <= 1) return false;
    out->latency_s = rounds * ((pnd - 1.0) * li + (Nd - 1.0) * le);
    out->bytes[PX_LINK_INTRA] = px_coll_busbw_factor(kind, pn) * S;
    out->bytes[PX_LINK_INTER] = px_coll_busbw_factor(kind, N) * S / pnd;
    break;
  case PX_ALGO_NVLS: /* the switch reduces: S out and S back over the GPU's link, at the NVLS share of its rate */
    if (!ar || N > 1 || c->intra_nvls_efficiency <= 0) return false;
    out->latency_s = c->intra_nvls_latency_s;
    out->bytes[PX_LINK_INTRA] = S;
    out->bw[PX_LINK_INTRA] = c->intra_bytes_per_s * c->intra_nvls_efficiency;
    out->time_s = out->latency_s + S / out->bw[PX_LINK_INTRA];
    out->sms = px_coll_held_sms(c, out, false);
    return true;
  case PX_ALGO_TREE:
    if (!ar || N <= 2) return false;
    out->latency_s = 2.0 * (double)ceil_log2(N) * le + 2.0 * (pnd - 1.0) * li;
    out->bytes[PX_LINK_INTRA] = px_coll_busbw_factor(kind, pn) * S;
    out->bytes[PX_LINK_INTER] = 2.0 * S / pnd;
    break;
  default: return false;
  }
  finish(c, g->leaves, out);
  out->sms = px_coll_held_sms(c, out, false);
  return true;
}

px_coll_cost px_coll_cost_of(const px_cluster *c, px_coll kind, uint64_t size_bytes, const px_placement *g) {
  px_coll_cost best, k;
  if (px_coll_cost_algo(c, kind, size_bytes, g, PX_ALGO_DIRECT, &best)) {
    use_measured(c, kind, size_bytes, g, &best);
    return best;
  }
  bool found = false;
  for (int a = 0; a < PX_ALGO_DIRECT; a++) {
    if (!px_coll_cost_algo(c, kind, size_bytes, g, (px_algo)a, &k)) continue;
    if (!found || k.time_s < best.time_s) best = k;
    found = true;
  }
  if (!found) { /* unreachable: the ring applies to every non-trivial collective */
    memset(&best, 0, sizeof best);
    best.algo = PX_ALGO_DIRECT;
  }
  use_measured(c, kind, size_bytes, g, &best);
  return best;
}
