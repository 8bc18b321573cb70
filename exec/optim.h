/* The optimizer of a rank's shard, after the step's gradients are reduced:
 * the partial sums of SP's replicated parameters completed over TP, the
 * global gradient norm and clipping, fp16's dynamic loss scaling, and AdamW
 * (on the device, or offloaded: on the host while the updated ranges go back
 * where the model reads them). The interpreter says where the states and
 * the owned gradients are (px_optim_states, px_optim_range); this does the
 * arithmetic, its collectives through the backend's entries. */
#ifndef PX_EXEC_OPTIM_H
#define PX_EXEC_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/backend.h"

typedef struct {
  uint64_t seed;
  float lr, beta1, beta2, eps, weight_decay, clip;
  float loss_scale; /* fp16: the initial loss scale */
} px_train_hparams;

/* fp16's dynamic loss scaling: the loss is multiplied by the scale before the
 * backward; a step whose gradients overflow (a non-finite norm) is skipped
 * and halves the scale, which doubles after this many clean steps. */
#define PX_LOSS_SCALE_GROWTH_STEPS 2000

/* The part of one parameter a rank owns (updates). */
typedef struct {
  void *grad;        /* (n) its reduced gradient: the device's, or with the optimizer offloaded the host's fp32 */
  uint64_t n;
  uint64_t at;       /* its place in the shard layout: the master weights', the moments', the host's arrays' */
  uint64_t model_at; /* its place in the model's parameters (the device's, or the host's shard) */
  bool matrix;       /* weight decay applies (not to vectors: norms, biases) */
  bool counted;      /* this rank counts it in the gradient norm (each element once over the ranks) */
  bool partial;      /* a partial sum over the TP ranks (px_slot.sp_partial: SP's norms, q/k norms): completed first */
} px_optim_range;

/* Where the interpreter keeps the states the optimizer updates. */
typedef struct {
  px_dtype param_dtype, grad_dtype;
  char *params;                    /* the model's parameters on the device (param dtype); NULL when offloaded */
  float *master, *adam_m, *adam_v; /* device, shard layout; master weights with mixed precision only */
  float *h_grads, *h_w, *h_m, *h_v; /* the optimizer offloaded: the host's fp32 gradients (what the ranges'
                                       point into), weights and moments, shard layout */
  char *h_params;                  /* the parameters offloaded: the host's shard (param dtype) */
} px_optim_states;

typedef struct {
  px_train_hparams hp;
  bool scaling;          /* fp16's dynamic loss scaling */
  float scaler[3];       /* {scale, clean steps, optimizer steps}: a checkpointed state (1 without scaling) */
  int64_t skipped_steps; /* for overflow */
  int64_t adam_t;        /* the optimizer step being taken, from 1 */
  double grad_norm;      /* the last update's global gradient norm before clipping (NaN: overflowed, skipped) */
} px_optim;

void px_optim_init(px_optim *o, const px_train_hparams *hp, bool fp16);

/* The ranges marked partial summed over TP, in place. */
px_status px_optim_sum_partials(px_backend *be, const px_optim_range *r, int32_t n, const px_optim_states *s,
                                double op_s[PX_OP_COUNT], px_err *err);

/* The update of step `step`: the gradient norm over every rank (each
 * counted range), a skipped step and a halved scale when it overflows
 * (fp16), else AdamW on every range with the clipping factor and the loss
 * scale taken out. base: the interpreter's op arguments for the ops on
 * gradient ranges. op_s[kind] gets the seconds spent as each of the
 * optimizer block's op kinds. */
px_status px_optim_update(px_optim *o, px_backend *be, const px_exec_op *base, const px_optim_range *r, int32_t n,
                          const px_optim_states *s, int64_t step, double op_s[PX_OP_COUNT], px_err *err);

/* One op on a gradient range of count elements (ACC, GRAD_NORM or ADAMW,
 * e's operands and fields as px_exec_op documents them; e->op is set here). */
px_status px_optim_range_op(px_backend *be, px_exec_op *e, px_op_kind kind, uint64_t count, px_err *err);

#endif
