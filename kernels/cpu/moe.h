/* Mixture-of-experts routing on the CPU: the router's top-k choice and
 * weights, the permutation of token rows to expert-major order and back,
 * forward and backward. fp32; experts' GEMMs are ordinary linear layers
 * over each expert's rows (exec/cpu/backend.c).
 *
 * Expert-major order: the rows of expert 0 (its tokens in token order, a
 * token's choices in their order), then expert 1's, ... A token's j-th
 * choice idx[t k + j] goes to row px_k_moe_positions(...)[t k + j].
 *
 * A choice that token dropping dropped (px_k_moe_drop) holds ~e in idx
 * (negative; px_k_moe_expert gives e back) and gate 0: it takes no row and
 * adds nothing, while the router's backward still renormalises over it (the
 * kept gates were made with it) and the load-balancing shares count the
 * routing before the drop (px_k_moe_shares), as Megatron-Core's. */
#ifndef PX_KERNELS_CPU_MOE_H
#define PX_KERNELS_CPU_MOE_H

#include <stdbool.h>
#include <stdint.h>

/* Router forward, in place on the logits: probs becomes the softmax over
 * the E experts (sigmoid: each expert's sigmoid score); idx the k experts
 * of highest probability (score), highest first, ties to the lower expert;
 * gates their weights: the probabilities (renormalised to sum 1 with norm),
 * or the sigmoid scores normalised to sum 1 (DeepSeek-V3). With groups > 0,
 * group-limited routing (Megatron-Core's group_limited_topk, moe_utils.py):
 * the experts in `groups` equal groups in expert order, a group's score the
 * sum of its k / group_topk highest scores (with norm, of the logits, as
 * Megatron-Core's softmax router takes its top-k of the logits; else of
 * the probabilities or sigmoid scores), and a token's k experts only from
 * its group_topk groups of the highest scores (a tie to the lower group). */
void px_k_moe_route_fwd(float *probs,  // (n, E): logits in, probabilities (scores) out
                        int32_t *idx,  // (n, k)
                        float *gates,  // (n, k)
                        float *work,   // (3 groups + k) scratch; NULL without groups
                        int64_t n, int64_t E, int64_t k, bool sigmoid, bool norm, int64_t groups,
                        int64_t group_topk);

/* The expert of a choice of idx, dropped (~e) or not. */
static inline int32_t px_k_moe_expert(int32_t i) { return i < 0 ? ~i : i; }

/* Token dropping at an expert capacity (Megatron-Core's
 * apply_router_token_dropping, moe_utils.py, without padding): each expert
 * keeps at most `capacity` of the n tokens' choices: those of the highest
 * gates (by_probs, the `probs` policy; a tie to the earlier token) or of the
 * earliest tokens (the `position` policy). capacity >= n drops nothing (as
 * Megatron's). Each dropped choice's idx becomes ~e, its gate 0; the kept
 * gates stay as they are (not renormalised). Returns the dropped choices. */
int64_t px_k_moe_drop(int32_t *idx,    // (n, k)
                      float *gates,    // (n, k)
                      int64_t *work,   // (n) scratch
                      int64_t n, int64_t E, int64_t k, int64_t capacity, bool by_probs);

/* Each expert's share of the n k choices a plain top-k of probs makes:
 * what Megatron-Core's load-balancing loss counts (its
 * compute_routing_scores_for_aux_loss), the router's idx before token
 * dropping and without group-limited routing. */
void px_k_moe_shares(float *f,            // (E)
                     int32_t *work,       // (k) scratch
                     const float *probs,  // (n, E)
                     int64_t n, int64_t E, int64_t k);

/* Router backward: dlogits += d gates / d logits . dgates, plus with aux > 0
 * the gradient of the load-balancing loss aux x E x sum_e f_e mean_t p_te
 * over these n rows (f_e: the share of the choices that went to e, held
 * constant, as Switch Transformer and Mixtral do: `shares`, or NULL for
 * these rows' own, px_k_moe_shares). ACCUMULATES. */
void px_k_moe_route_bwd(float *dlogits,       // (n, E)
                        float *work,          // (2 E) scratch
                        const float *dgates,  // (n, k)
                        const float *probs,   // (n, E)
                        const int32_t *idx,   // (n, k)
                        const float *shares,  // (E) or NULL
                        int64_t n, int64_t E, int64_t k, bool sigmoid, bool norm, float aux);

/* The expert-major row of every choice (-1: dropped) and each expert's row count (NULL to skip). */
void px_k_moe_positions(int64_t *pos,        // (n k)
                        int32_t *counts,     // (E) or NULL
                        int64_t *work,       // (E + 1) scratch
                        const int32_t *idx,  // (n, k)
                        int64_t n, int64_t E, int64_t k);

/* send[pos(t, j)] = x[t]: each token's row copied to its k experts' rows. Writes send. */
void px_k_moe_permute_fwd(float *send,         // (n k, h)
                          const float *x,      // (n, h)
                          const int64_t *pos,  // (n k)
                          int64_t n, int64_t h, int64_t k);

/* dx[t] += sum_j dsend[pos(t, j)]. ACCUMULATES. */
void px_k_moe_permute_bwd(float *dx,           // (n, h)
                          const float *dsend,  // (n k, h)
                          const int64_t *pos,  // (n k)
                          int64_t n, int64_t h, int64_t k);

/* y[t] += sum_j gates[t, j] ret[pos(t, j)] (gates NULL: 1, the gates applied in the experts' activation).
 * ACCUMULATES (onto the shared experts' output, or zeros). */
void px_k_moe_unpermute_fwd(float *y,            // (n, h)
                            const float *ret,    // (n k, h)
                            const float *gates,  // (n, k)
                            const int64_t *pos,  // (n k)
                            int64_t n, int64_t h, int64_t k);

/* dret[pos(t, j)] += gates[t, j] dy[t]; dgates[t, j] += dy[t] . ret[pos(t, j)] (gates NULL: 1; dgates NULL: not
 * computed, ret not read). ACCUMULATES. */
void px_k_moe_unpermute_bwd(float *dret,         // (n k, h)
                            float *dgates,       // (n, k)
                            const float *dy,     // (n, h)
                            const float *ret,    // (n k, h)
                            const float *gates,  // (n, k)
                            const int64_t *pos,  // (n k)
                            int64_t n, int64_t h, int64_t k);

#endif
