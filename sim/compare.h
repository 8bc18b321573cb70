/* Prediction beside measurement: the simulator's costs of a plan set next to
 * a profile of the same plan run by the executor, per op kind, per stream
 * and per step, with the error of each. */
#ifndef PX_SIM_COMPARE_H
#define PX_SIM_COMPARE_H

#include <cJSON.h>

#include "core/status.h"
#include "plan/plan.h"
#include "sim/sim.h"

/* Rows of the comparison (op families and streams). */
typedef enum {
  PX_CMP_GEMM,        /* linear layers */
  PX_CMP_ATTENTION,   /* scores, softmax, context, fused attention */
  PX_CMP_NORM,
  PX_CMP_ELEMENTWISE, /* activations, dropout, adds, rope, positions */
  PX_CMP_EMBED_LOSS,  /* embedding and cross-entropy */
  PX_CMP_OPTIMIZER,   /* gradient norm and AdamW */
  PX_CMP_TP,          /* tensor-parallel collectives */
  PX_CMP_DP,          /* data-parallel reductions and gathers */
  PX_CMP_OFFLOAD,     /* offload's copies between the GPU and the host */
  PX_CMP_WAIT,        /* p2p transfers and waiting for other stages: the rest of the step */
  PX_CMP_COUNT
} px_cmp_row;

extern const char *const px_cmp_row_names[PX_CMP_COUNT];

typedef struct {
  double predicted_s[PX_CMP_COUNT], measured_s[PX_CMP_COUNT];
  /* the same by op kind (px_op_names), compute ops only: which kernel is off */
  double op_predicted_s[PX_OP_COUNT], op_measured_s[PX_OP_COUNT];
  int64_t op_count[PX_OP_COUNT]; /* ops of that kind in the stage's program */
} px_cmp_stage;

typedef struct {
  int64_t nstages;
  px_cmp_stage *stages;
  double step_predicted_s, step_measured_s;
  int64_t timed_steps;
} px_comparison;

/* The times a profile may hold, seconds: each of its step and op times is 0
 * or a number from PX_CMP_MIN_S to PX_CMP_MAX_S, so that their sums, and the
 * errors relative to them, stay finite. */
#define PX_CMP_MIN_S 1e-18
#define PX_CMP_MAX_S 1e9

/* profile: a parallax-profile/1 document of the same plan; sim: the plan simulated. */
px_status px_compare(const px_plan *plan, const px_sim_result *sim, const cJSON *profile, const char *profile_name,
                     px_comparison *out, px_err *err);
void px_comparison_free(px_comparison *c);

#endif
