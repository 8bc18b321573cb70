/* Collective-communication cost model: what an all-reduce, all-gather,
 * reduce-scatter or point-to-point transfer of a group costs on a cluster,
 * as bytes per link class, per-GPU bandwidths and latency (NCCL-style algorithms).
 *
 * Model (alpha-beta, one direction, per GPU; the simulator turns bytes / bw
 * into bandwidth-sharing flows, so the two are given separately):
 *
 *   n = group size, pn = g->per_node (members in one node), N = g->nodes,
 *   S = size_bytes, nccl-tests' "size": the buffer of an all-reduce, the
 *   full output of an all-gather, the full input of a reduce-scatter.
 *
 * Bandwidth each GPU gets, per link class:
 *   intra = intra_bytes_per_s x intra_efficiency. NVSwitch: every GPU has its
 *           full NVLink rate whatever the group.
 *   inter = nics_per_node x nic_bytes_per_s x inter_efficiency / gpus_per_node.
 *           By symmetry every GPU of a node runs a collective of the same kind
 *           at the same time, so they share the node's NICs (rail-optimised
 *           DGX: one NIC per GPU). Divided by oversubscription when the group
 *           spans more than one leaf switch (g->leaves > 1).
 *
 * Algorithms (f = 2(n-1)/n all-reduce, (n-1)/n all-gather / reduce-scatter):
 *   RING  multi-channel rings over all n ranks. Steps: 2(n-1) all-reduce,
 *         n-1 AG/RS; step latency inter_latency_s if the group spans nodes,
 *         else intra_latency_s. Bytes: f S over NVLink when pn > 1, and
 *         f S / pn over the NIC when N > 1 (each channel's ring crosses a
 *         node boundary on a different NIC, so a NIC carries 1/pn of it).
 *   HIER  pn > 1 and N > 1. All-reduce: intra-node reduce-scatter, inter-node
 *         all-reduce of S/pn among N ranks (one per node and local rank),
 *         intra-node all-gather: intra 2(pn-1)/pn S, inter 2(N-1)/N S/pn,
 *         latency 2(pn-1) intra + 2(N-1) inter. All-gather (inter-node
 *         all-gather, then intra-node) and reduce-scatter (intra, then inter)
 *         are the one-sided halves: intra (pn-1)/pn S, inter (N-1)/N S/pn,
 *         latency (pn-1) intra + (N-1) inter.
 *   TREE  NCCL's double binary tree, all-reduce only, N > 2: an intra-node
 *         chain of pn ranks, a tree over N nodes: latency
 *         2 ceil(log2 N) inter + 2(pn-1) intra, inter bytes 2 S / pn,
 *         intra bytes 2(pn-1)/pn S.
 *   NVLS  all-reduce inside one NVLink domain (N = 1) whose switches reduce
 *         (intra_node.nvls_efficiency > 0: NVSwitch 3 and later, NCCL's
 *         NVLS algorithm): each GPU sends its buffer to the switch, which
 *         reduces the members' shards and multicasts the results back, so a
 *         GPU's link carries S each way (a ring's 2(n-1)/n S) at
 *         nvls_efficiency of the link rate, after nvls_latency_us. NCCL's
 *         tuner (src/graph/tuning.cc) charges NVLS a fixed 25 us on NVLink
 *         and no step latency, so rings and trees keep the small messages and
 *         NVLS takes the large ones, most in large groups. Reduce-scatter and
 *         all-gather stay rings (NVLS moves the same (n-1)/n S there at a
 *         lower rate, and NCCL's model agrees).
 *   DIRECT a group of size <= 1, a zero-byte collective, or a p2p transfer:
 *         p2p is one step of latency and S bytes on the intra or inter link.
 *         All-to-all is always direct (NCCL posts a send and a receive per
 *         peer in one group): each member sends S/n to each other member,
 *         (pn-1)/n S over NVLink and (n-pn)/n S over the NICs, one step of
 *         latency (inter when the group spans nodes). On a rail-optimised
 *         fabric (inter_node.topology rail_fat_tree: NIC i of every node on
 *         rail i's leaf) the (n-pn-(N-1))/n S for members on other rails first
 *         crosses NVLink to this node's GPU on their rail (NCCL's PXN) and
 *         then stays on that rail; a fat tree (every NIC of a node on one
 *         leaf) sends it straight from the NIC.
 *
 * Phases are pipelined (chunked), so time_s = latency_s + max_k bytes[k] / bw[k].
 *
 * Algorithm choice, "as NCCL's tuner would": cost every applicable algorithm
 * under this model and keep the one with the least time_s; ties go to the
 * earlier one in px_algo order (ring, tree, hierarchical, NVLS). Consequences: in
 * one node, or with one GPU per node, the ring wins at large sizes (it moves
 * the fewest bytes: 2(n-1)/n S against the tree's 2 S); the tree wins
 * small all-reduces at many nodes (log2 N steps against 2(n-1));
 * hierarchical wins large multi-node groups with pn > 1 (never more bytes or
 * steps than the flat ring when intra latency <= inter latency). */
#ifndef PX_SIM_COLLECTIVE_H
#define PX_SIM_COLLECTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/cluster.h"
#include "plan/graph.h"
#include "plan/grid.h"

typedef enum { PX_ALGO_RING, PX_ALGO_TREE, PX_ALGO_HIER, PX_ALGO_NVLS, PX_ALGO_DIRECT, PX_ALGO_COUNT } px_algo;
extern const char *const px_algo_names[PX_ALGO_COUNT];

typedef struct {
  px_algo algo;
  bool measured;               /* time_s from the cluster's measured curve (px_coll_measured_busbw) */
  double latency_s;            /* sum of per-step latencies */
  double bytes[PX_LINK_COUNT]; /* bytes each GPU sends over each link class, one direction */
  double bw[PX_LINK_COUNT];    /* bytes/s each GPU gets on each link class for this collective (0 if unused) */
  double time_s;               /* uncontended: latency_s + max_k bytes[k] / bw[k] (phases are pipelined) */
  int sms;                     /* SMs its kernel holds while it runs, taken from the compute beside it
                                  (px_coll_held_sms) */
} px_coll_cost;

/* NCCL runs a collective as one kernel with a CTA per channel, and a CTA
 * holds its SM alone: "NCCL CTAs won't share an SM with compute kernels"
 * (S. Jeaugey, NVIDIA/nccl#689, 2023), so compute running beside a
 * collective gets the GPU's other SMs. A collective holds its link class's
 * comm_sms (the larger where it uses both: intra_node.comm_sms,
 * inter_node.comm_sms in the cluster file); a transfer to a peer in another
 * node holds NCCL's channels per network peer, 2 by default
 * (NCCL_NCHANNELS_PER_NET_PEER, NCCL's environment documentation; "typically
 * 2", NVIDIA/nccl#1424), or the link's figure if that is smaller. */
#define PX_NCCL_NET_PEER_CHANNELS 2
int px_coll_held_sms(const px_cluster *c, const px_coll_cost *k, bool p2p);

/* A measured collective curve replaces the model: where the cluster file
 * has busbw points of the kind (nccl-tests' busbw against its size column;
 * sendrecv for p2p) for the group's link class — inside one node, or across
 * nodes — the collective takes f S / busbw(S), f its bus-bandwidth factor
 * for the group's size and busbw interpolated linearly in log S between the
 * two nearest points (the end point outside them). nccl-tests defines busbw
 * so that it does not depend on the rank count (its PERFORMANCE.md), so a
 * curve measured on one group size serves the others; it holds latency and
 * NCCL's own choice of algorithm. The model's algorithm still says which
 * links carry how many bytes (for sharing them), at the rate that gives the
 * measured time. Returns the interpolated bus bandwidth in bytes/s, 0 when
 * the cluster has no curve for it. */
double px_coll_measured_busbw(const px_cluster *c, px_link link, px_coll kind, uint64_t size_bytes);

/* The cheapest applicable algorithm for kind over group g (see the rule
 * above), or the measured curve where the cluster has one. kind PX_COLL_P2P costs one transfer between two members of g
 * (across nodes when g spans nodes); PX_COLL_NONE costs nothing. */
px_coll_cost px_coll_cost_of(const px_cluster *c, px_coll kind, uint64_t size_bytes, const px_placement *g);
/* One algorithm, forced: false (and *out zeroed) when it does not apply to
 * this kind and placement. DIRECT applies to groups of size <= 1 and p2p. */
bool px_coll_cost_algo(const px_cluster *c, px_coll kind, uint64_t size_bytes, const px_placement *g, px_algo algo,
                       px_coll_cost *out);
/* DeepEP's (or, hybrid, HybridEP's) dispatch or combine of one rank's
 * tokens, the deepep dispatcher's EP exchange over group g: tok bytes of
 * tokens (the busiest rank's, px_ep_token_bytes), each sent once to each of
 * the `ranks` distinct EP ranks its experts are on and once over RDMA to each
 * of the `nodes` nodes among them (px_plan_ep_copies), forwarded over NVLink
 * there. NVLink carries the copies for the other ranks, tok x ranks x
 * (1 - 1/n), the NICs those for other nodes, tok x nodes x (1 - 1/N). Where
 * the cluster has DeepEP's measured figures and g spans nodes
 * (inter_node.deepep), the exchange takes its logical RDMA bytes (tok x
 * nodes, the rank's own node included, as DeepEP's benchmark counts them) at
 * the figure for the EP size (linear in log2 between measured sizes, flat
 * beyond them); where g stays in one NVLink domain (intra_node.deepep, from
 * its smallest measured EP size up; not for HybridEP, whose kernels those
 * figures are not), its received copies (tok x ranks, its own included) at
 * that figure; the links carry their bytes at the pace that gives that time. */
px_coll_cost px_coll_cost_deepep(const px_cluster *c, const px_placement *g, double tok, double ranks, double nodes,
                                 bool combine, bool hybrid);
/* One point-to-point transfer between two GPUs (pipeline stages), inside a
 * node or across (same leaf: no oversubscription). */
px_coll_cost px_coll_cost_p2p(const px_cluster *c, uint64_t bytes, bool intra_node);

/* Per-GPU bandwidth of a link class, bytes/s, for a group spanning `leaves`
 * leaf switches (see the model above). */
double px_coll_link_bytes_per_s(const px_cluster *c, px_link link, int64_t leaves);
/* nccl-tests' busbw = size / time x factor, bytes/s (0 when time_s <= 0). */
double px_coll_busbw_bytes_per_s(px_coll kind, int64_t n, uint64_t size_bytes, double time_s);

#endif
