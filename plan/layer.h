/* One transformer layer's blocks (plan/layer.c): its tensors, forward,
 * backward with recomputation, and what the forward keeps. */
#ifndef PX_PLAN_LAYER_H
#define PX_PLAN_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/builder.h"

/* Creates one layer's slots and parameters (every layer block names them). */
void px_layer_slots_make(px_plan *p, const px_dims *d, px_layer_slots *L);

/* One layer's forward. With `recompute` the ops are the recomputation inside
 * the backward block and the layer output is not produced. */
void px_layer_forward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_phase ph, bool produce_out);

/* One layer's backward; recomputation first when chosen. */
void px_layer_backward(px_bld *b, const px_dims *d, const px_layer_slots *L, px_recompute rc);

/* Keeps what the backward reads from a layer's forward. */
void px_layer_keep_saved(px_bld *b, const px_dims *d, const px_layer_slots *L, px_recompute rc);

#endif
