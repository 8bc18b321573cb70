/* Where each local parameter element lives in the model's global tensors:
 * the canonical layout (layer by layer, Q/K/V/O, MLP (or router, experts, shared experts), norms; embedding,
 * positions, final norm, head) that every plan shares. Used to initialise
 * shards identically whatever the parallelism, and to gather gradients for
 * comparison across plans. */
#ifndef PX_EXEC_PARAMS_H
#define PX_EXEC_PARAMS_H

#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

typedef enum { PX_INIT_NORMAL, PX_INIT_ONES, PX_INIT_ZEROS } px_init_kind;

/* Local rows [row0, row0 + rows) of a parameter go to global tensor
 * `tensor` starting at its row grow0. */
typedef struct {
  int64_t row0, rows, tensor, grow0;
} px_param_section;

/* How one local parameter slot maps to global tensors. */
typedef struct {
  int16_t slot;
  int32_t group;        /* layer, -1 embedding, L head */
  /* row sections of the local matrix: local rows [row0, row0 + rows) go to
   * global tensor `tensor` starting at global row grow0 */
  px_param_section sec[3];
  int nsec;
  int64_t col0;         /* global column of local column 0 (column-sharded tensors) */
  /* experts: the sections describe one local expert's rows (expert_rows of them); local expert x is global
   * expert expert0 + x, whose rows in each global tensor start expert_grows x (expert0 + x) further */
  int64_t expert_rows, expert0, expert_grows;
  bool replicated;      /* identical on every TP rank */
  bool tied_copy;       /* the last stage's copy of a tied embedding */
} px_param_map;

typedef struct {
  char name[40];
  int64_t rows, cols;
  uint64_t offset;      /* into the canonical flat vector */
  px_init_kind init;
  double std;
} px_global_tensor;

typedef struct {
  px_global_tensor *t;
  int64_t n;
  uint64_t total;       /* = the model's parameter count */
} px_global_params;

px_status px_global_params_build(const px_model *m, px_global_params *g, px_err *err);
void px_global_params_free(px_global_params *g);
/* The mapping of one local parameter (a px_param_ref of stage s) on TP rank tp_rank and EP rank ep_rank. */
px_status px_param_map_of(const px_plan *plan, const px_global_params *g, const px_param_ref *ref, int64_t tp_rank,
                          int64_t ep_rank, px_param_map *out, px_err *err);
/* Canonical index of local element (r, c) of a parameter, or -1 for vocabulary padding. */
int64_t px_param_global_index(const px_plan *plan, const px_global_params *g, const px_param_map *pm,
                              const px_param_ref *ref, int64_t r, int64_t c, int64_t *tensor);
/* Deterministic initial value of canonical element `index` of tensor t. */
float px_param_init_value(const px_global_params *g, int64_t tensor, uint64_t index, uint64_t seed);

#endif
