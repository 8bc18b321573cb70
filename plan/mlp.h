/* The MLP branch of a layer block (plan/mlp.c): the dense MLP and the
 * mixture of experts (router, dispatch, experts, shared experts). */
#ifndef PX_PLAN_MLP_H
#define PX_PLAN_MLP_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/builder.h"

/* A mixture-of-experts layer's tensors (rows: B S of the layer's tokens; A
 * routed rows sent, R taken by the local experts). */
void px_moe_slots(px_plan *p, const px_dims *d, px_layer_slots *L);

/* The MoE MLP's forward from the norm's output: x, this rank's sequence
 * shard (the router's and the dispatcher's input), and x_full, the gathered
 * sequence the shared experts read (NOREF without them). The shared experts,
 * which need no routed row, run while the dispatch is in flight (with
 * --overlap tp): fc1 behind the dispatch, fc2 behind the combine. Returns
 * the branch's output (after its dropout; *bias_left as branch_end_fwd). */
px_ref px_moe_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x, px_ref x_full,
                      px_ref *bias_left);

/* The MoE MLP's backward from dbranch, the gradient of the branch's output
 * (this rank's sequence shard), to the norm output's gradient: the shared
 * experts' into dln2_part (the gathered sequence, reduced over TP into
 * dln2_sh), the router's and the dispatch's onto the reduced shard; returns
 * it. The shared experts' backward runs behind the first all-to-all, the
 * router's behind the second. */
px_ref px_moe_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dbranch, px_ref dln2_part,
                       px_ref dln2_sh);

/* The dense MLP's backward from the residual's gradient dout to the norm
 * output's gradient (reduced over TP, into dln2_sh with SP). */
px_ref px_mlp_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_ref dout, px_ref dln2_part,
                       px_ref dln2_sh);

/* The dense MLP's forward from the norm's output x (the gathered
 * sequence): fc1 (gate and up with SwiGLU), the activation, and the
 * branch's end (fc2, its reduction, and with `dropout` the bias and
 * dropout; *bias_left as px_branch_end_fwd). Returns the branch's output. */
px_ref px_mlp_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, px_ref x, bool dropout,
                      px_ref *bias_left);

#endif
