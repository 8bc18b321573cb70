/* fp8 delayed scaling's amax histories (Transformer Engine's DelayedScaling,
 * PX_FP8_AMAX_HISTORY steps, "max"): one per tensor a rank quantizes with a
 * per-tensor scale, a CAST's output or an fp8 GEMM's weight, of each global
 * layer, keyed by (slot, layer). Both backends keep them here (the cuda
 * backend computes its scales on the host too); the executor checkpoints
 * them as the state "fp8_amax" (exec/params.h), in the order px_param_amax_keys
 * gives, PX_FP8_AMAX_HISTORY fp32 a key. */
#ifndef PX_EXEC_AMAX_H
#define PX_EXEC_AMAX_H

#include <stdint.h>

#include "core/status.h"
#include "kernels/cpu/fp8.h"
#include "plan/graph.h"
#include "plan/parallel.h" /* PX_FP8_AMAX_HISTORY */

typedef struct {
  int32_t slot;
  int64_t layer; /* global */
} px_amax_key;

/* The history of CAST op o's output, and of fp8 weight `slot`, in an instance at global layer `layer`. */
static inline px_amax_key px_amax_cast_key(const px_op *o, int64_t layer) {
  return (px_amax_key){o->out[0].slot, layer + o->out[0].layer_off};
}
static inline px_amax_key px_amax_weight_key(int32_t slot, int64_t layer) { return (px_amax_key){slot, layer}; }

typedef struct px_amax px_amax; /* a rank's histories */

/* NULL when out of memory. */
px_amax *px_amax_new(void);
void px_amax_free(px_amax *t);

/* The scale, for format f, of tensor k in `step`, whose amax now is amax:
 * from the largest amax of the steps before (this one's own on the first, as
 * current scaling); amax joins this step's, which joins the history when
 * the next step first asks. */
px_status px_amax_scale(px_amax *t, px_amax_key k, int64_t step, float amax, px_fp8_format f, float *scale,
                        px_err *err);

/* The checkpoint form of the histories of keys[0..n) as they stand before
 * step `step` (the last step's amax included): PX_FP8_AMAX_HISTORY floats a
 * key, oldest first, zeros in front for the steps before the first (a key
 * not seen yet: all zeros). A zero is no amax to the scale, and pads the
 * history as the missing steps would, so a history saved and loaded gives
 * the same scales and the same form again. Refuses (internal) a table that
 * holds a history no key names: it would not be kept. */
px_status px_amax_save(const px_amax *t, const px_amax_key *keys, int64_t n, int64_t step, float *hist, px_err *err);
/* Replaces the histories with those of px_amax_save's form hist, as they
 * stand before step `step`. */
px_status px_amax_load(px_amax *t, const px_amax_key *keys, int64_t n, int64_t step, const float *hist, px_err *err);

#endif
