/* The rank grid: TP fastest, then CP, then DP, then PP (Megatron-Core's
 * order), so a TP group is consecutive ranks and sits inside a node when it
 * fits, and a CP group is next to it.
 * rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)).
 * The ranks holding the same weights (gradients reduced, ZeRO states
 * sharded over them) are the DP x CP group: tp apart, cp x dp of them, in
 * the order of their index cp_rank + cp * dp_rank. */
#ifndef PX_PLAN_GRID_H
#define PX_PLAN_GRID_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/cluster.h"

/* Where a group's members sit. Groups of one kind are alike up to
 * translation; the figures are those of the group holding rank 0 (and the
 * largest per-node count when groups straddle nodes unevenly). */
/* "Node" here is the NVLink domain (the cluster's nvlink_domain GPUs: a
 * node, or a rack of them such as GB200 NVL72): what is inside one talks
 * over NVLink, what spans them over the NICs. */
typedef struct {
  int64_t size;     /* members */
  int64_t stride;   /* rank distance between consecutive members */
  int64_t per_node; /* most members in one NVLink domain */
  int64_t nodes;    /* NVLink domains spanned */
  int64_t leaves;   /* leaf switches spanned */
  bool intra;       /* all members in one NVLink domain */
} px_placement;

typedef struct {
  int64_t tp, cp, dp, pp, world;
  int64_t wdp;                           /* ranks holding the same weights: dp x cp */
  int64_t gpus_per_node, nodes_per_leaf; /* the cluster's nodes and leaf switches */
  int64_t domain;                        /* GPUs in one NVLink domain */
  int64_t shard; /* DP x CP ranks a ZeRO shard group holds (wdp unless set) */
  px_placement tp_place, cp_place, pp_place;
  px_placement dp_place;      /* the DP x CP group (the weights' data-parallel group) */
  int64_t ep, etp;            /* expert parallelism and expert tensor parallelism (etp = tp unless set) */
  px_placement etp_place;     /* etp consecutive ranks splitting each expert's GEMMs */
  px_placement ep_place;      /* ep ranks splitting the experts, etp apart (with etp = tp: ep of the DP x CP ranks) */
  px_placement edp_place;     /* tp wdp / (etp ep) ranks holding the same experts, etp x ep apart */
  px_placement shard_place;   /* shard consecutive DP x CP ranks: tp apart from rank 0 */
  px_placement replica_place; /* wdp / shard DP x CP ranks holding the same shard: tp x shard apart */
} px_grid;

void px_grid_init(px_grid *g, const px_cluster *c, int64_t tp, int64_t cp, int64_t dp, int64_t pp);
/* The MoE layers' grid folded over a stage's tp x cp x dp ranks (Megatron-Core's
 * parallel folding, order etp-ep-edp): etp fastest, then ep, then the expert-DP
 * ranks (etp x ep divides tp x wdp; otherwise etp = tp, ep = 1). With etp = tp,
 * EP is ep consecutive DP x CP ranks. */
void px_grid_set_ep(px_grid *g, int64_t ep, int64_t etp);
/* A rank's place in that fold, from its TP rank and its index in the DP x CP
 * group (cp_rank + cp dp_rank): its stage index r = tp_rank + tp wdp_rank
 * gives etp_rank = r mod etp, ep_rank = r / etp mod ep (which experts it
 * holds) and edp_rank = r / (etp ep) (among the ranks holding the same ones). */
void px_grid_expert_coords(const px_grid *g, int64_t tp_rank, int64_t wdp_rank, int64_t *etp_rank, int64_t *ep_rank,
                           int64_t *edp_rank);
/* ZeRO shard groups of `shard` consecutive DP x CP ranks (shard divides wdp). */
void px_grid_set_shard(px_grid *g, int64_t shard);
int64_t px_grid_rank(const px_grid *g, int64_t tp_rank, int64_t cp_rank, int64_t dp_rank, int64_t pp_rank);
void px_grid_coords(const px_grid *g, int64_t rank, int64_t *tp_rank, int64_t *cp_rank, int64_t *dp_rank,
                    int64_t *pp_rank);
/* Whether rank r of stage s and its peer in stage s+1 share a node. */
bool px_grid_pp_link_intra(const px_grid *g, int64_t stage);
/* Placement of an arbitrary group: size members at the given stride from first. */
px_placement px_grid_place(const px_grid *g, int64_t first, int64_t stride, int64_t size);

#endif
