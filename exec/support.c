/* Which ops a backend can run: the check of a whole plan before a run, the
 * plan-level rules (plan/runnable.h) first. */
#include "exec/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/contract.h"
#include "exec/env.h"
#include "plan/runnable.h"

const char *const px_support_names[PX_SUPPORT_COUNT] = {"no", "yes", "widened"};
_Static_assert(sizeof px_support_names / sizeof px_support_names[0] == PX_SUPPORT_COUNT, "support names");

px_support px_support_op(px_backend *be, const px_env *v, const px_op *op, char *why, size_t cap) {
  if (why && cap) why[0] = 0;
  px_exec_op e = {.env = v, .op = op};
  return be->supports_op ? be->supports_op(be, &e, why, cap) : PX_SUPPORT_YES;
}

/* Refusals seen by the walk: the first in full, the other kinds by name. */
typedef struct {
  char first[512];
  bool kind[PX_OP_COUNT];
  int nkinds;
} refusals;

/* The backend's verdict on op. */
static void ask(px_backend *be, const px_env *v, const px_op *op, refusals *r) {
  char why[384];
  if (px_support_op(be, v, op, why, sizeof why) != PX_SUPPORT_NO) return;
  if (!r->nkinds)
    snprintf(r->first, sizeof r->first, "%s (%s): %s", px_op_names[op->kind],
             px_dtype_names[px_contract_dtype(v, op)], why[0] ? why : "not supported");
  if (!r->kind[op->kind]) r->kind[op->kind] = true, r->nkinds++;
}

px_status px_support_check(px_backend *be, const px_plan *plan, px_err *err) {
  /* the plan's choices first (plan/runnable.h: what sweep --runnable-by reads), then each op */
  int rb = px_run_backend_of(be->name);
  char why[512];
  if (rb >= 0 && !px_runnable((px_run_backend)rb, &plan->par, &plan->model, why, sizeof why))
    return px_err_set(err, PX_ERR_INPUT, "`backend` %s cannot run this plan: %s", be->name, why);
  refusals r = {.nkinds = 0};
  px_env v;
  bool *seen[PX_BLOCK_KIND_COUNT] = {0};
  if (px_env_init(&v, plan, 0, 0, err)) return PX_ERR_RUNTIME; /* the verdicts are the same on every rank */
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    seen[k] = calloc((size_t)plan->blocks[k].nops + 1, sizeof *seen[k]);
    if (!seen[k]) {
      for (int j = 0; j < k; j++) free(seen[j]);
      px_env_free(&v);
      return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    }
  }
  int first_kind = -1;
  for (int64_t s = 0; s < plan->par.pp; s++) {
    px_op_iter it = px_op_iter_begin(plan, s);
    for (const px_op *op; (op = px_op_next(&it));) {
      int64_t b = it.block - plan->blocks;
      if (it.in->ops < 0) { /* a block's op: asked once; the stage's own sized ops each time */
        int64_t k = op - it.block->ops;
        if (seen[b][k]) continue;
        seen[b][k] = true;
      }
      int before = r.nkinds;
      ask(be, &v, op, &r);
      if (!before && r.nkinds) first_kind = op->kind;
      /* ZeRO-2/3: the reduced shard is added to the owned gradients (ACC on a gradient range) */
      if (b == PX_BLOCK_GRAD_SYNC && plan->par.zero >= 2) {
        px_op acc = {.kind = PX_OP_ACC};
        for (int j = 0; j < PX_OP_OUTS; j++) acc.out[j] = (px_ref){-1, 0};
        for (int j = 0; j < PX_OP_INS; j++) acc.in[j] = (px_ref){-1, 0};
        before = r.nkinds;
        ask(be, &v, &acc, &r);
        if (!before && r.nkinds) first_kind = PX_OP_ACC;
      }
    }
  }
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) free(seen[k]);
  px_env_free(&v);
  if (!r.nkinds) return PX_OK;
  char also[256] = "";
  size_t n = 0;
  int listed = 0;
  for (int k = 0; k < PX_OP_COUNT && n < sizeof also; k++) {
    if (!r.kind[k] || k == first_kind) continue;
    if (listed == 4) {
      n += (size_t)snprintf(also + n, sizeof also - n, ", ...");
      break;
    }
    n += (size_t)snprintf(also + n, sizeof also - n, "%s%s", listed ? ", " : "; also refused: ", px_op_names[k]);
    listed++;
  }
  return px_err_set(err, PX_ERR_INPUT, "`backend` %s cannot run this plan: %s%s", be->name, r.first, also);
}
