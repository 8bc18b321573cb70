/* Which ops a backend can run: the check of a whole plan before a run, the
 * executor's own limits with it. */
#include "exec/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/contract.h"
#include "exec/env.h"
#include "exec/params.h"

const char *const px_support_names[PX_SUPPORT_COUNT] = {"no", "yes", "widened"};
_Static_assert(sizeof px_support_names / sizeof px_support_names[0] == PX_SUPPORT_COUNT, "support names");

px_support px_support_op(px_backend *be, const px_env *v, const px_op *op, char *why, size_t cap) {
  if (why && cap) why[0] = 0;
  px_exec_op e = {.env = v, .op = op};
  return be->supports_op ? be->supports_op(be, &e, why, cap) : PX_SUPPORT_YES;
}

/* What the executor runs on any backend: no latent attention, no sinks or
 * per-head q/k norms, and mixture of experts in the one layout its
 * interpreter and kernels have (sliding windows: the backend's say, from the
 * ops' PX_OPF_WINDOW). */
static px_support executor_runs(const px_plan *plan, const px_op *op, char *why, size_t cap) {
  const px_model *m = &plan->model;
  const px_parallel *par = &plan->par;
  px_op_kind k = (px_op_kind)op->kind;
  bool flash = k == PX_OP_FLASH_ATTN || k == PX_OP_FLASH_ATTN_BWD;
  if (m->kv_lora_rank > 0 && flash)
    return px_contract_refuse(why, cap, PX_SUPPORT_NO,
                              "multi-head latent attention is planned and simulated; the executors do not run it yet");
  if ((m->attention_sinks || m->qk_norm) && (flash || px_op_family_of(k) == PX_FAM_ATTENTION))
    return px_contract_refuse(why, cap, PX_SUPPORT_NO, "%s (%s) are planned and simulated; the executors do not run "
                              "them yet", m->attention_sinks ? "attention sinks" : "per-head q/k norms", m->name);
  if ((px_op_is_moe(k) || (k == PX_OP_ALLTOALL && op->group == PX_GROUP_EP)) &&
      (par->tp > 1 || plan->grid.etp > 1 || par->moe_dispatch != PX_MOE_A2A || m->capacity_factor > 0 ||
       m->expert_groups > 0 || !px_param_layout_defined(plan, NULL, 0)))
    return px_contract_refuse(why, cap, PX_SUPPORT_NO, "mixture of experts runs with tp 1, etp 1, a2a dispatch, no "
                              "capacity factor or expert groups and, with ep > 1, ZeRO-0 (sequence-sharded routing "
                              "under TP, expert tensor parallelism, token dropping, group-limited routing and expert "
                              "shards are planned and simulated only)");
  return PX_SUPPORT_YES;
}

/* Refusals seen by the walk: the first in full, the other kinds by name. */
typedef struct {
  char first[512];
  bool kind[PX_OP_COUNT];
  int nkinds;
} refusals;

/* The backend's verdict on op, then the executor's. */
static void ask(px_backend *be, const px_plan *plan, const px_env *v, const px_op *op, refusals *r) {
  char why[384];
  if (px_support_op(be, v, op, why, sizeof why) != PX_SUPPORT_NO && executor_runs(plan, op, why, sizeof why))
    return;
  if (!r->nkinds)
    snprintf(r->first, sizeof r->first, "%s (%s): %s", px_op_names[op->kind],
             px_dtype_names[px_contract_dtype(v, op)], why[0] ? why : "not supported");
  if (!r->kind[op->kind]) r->kind[op->kind] = true, r->nkinds++;
}

px_status px_support_check(px_backend *be, const px_plan *plan, px_err *err) {
  if (plan->par.fp8_params > 0) /* the whole plan: its weights are not what the executors hold */
    return px_err_set(err, PX_ERR_INPUT, "`backend` %s cannot run this plan: fp8 weights (`fp8_params`) are planned "
                      "and simulated only; the executors keep the weights in the parameters' dtype and cast them for "
                      "the fp8 GEMMs (hint: without `fp8_params`)", be->name);
  if (px_parallel_lora(&plan->par) && plan->par.base_precision != PX_BASE_BF16) /* the whole plan: its base's storage */
    return px_err_set(err, PX_ERR_INPUT, "`backend` %s cannot run this plan: `finetune` %s with a %s base is planned "
                      "and simulated only; the executors hold the frozen base in the compute dtype (hint: `finetune` "
                      "lora with `base_precision` bf16)", be->name, px_finetune_names[plan->par.finetune],
                      px_base_precision_names[plan->par.base_precision]);
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
      ask(be, plan, &v, op, &r);
      if (!before && r.nkinds) first_kind = op->kind;
      /* ZeRO-2/3: the reduced shard is added to the owned gradients (ACC on a gradient range) */
      if (b == PX_BLOCK_GRAD_SYNC && plan->par.zero >= 2) {
        px_op acc = {.kind = PX_OP_ACC};
        for (int j = 0; j < PX_OP_OUTS; j++) acc.out[j] = (px_ref){-1, 0};
        for (int j = 0; j < PX_OP_INS; j++) acc.in[j] = (px_ref){-1, 0};
        before = r.nkinds;
        ask(be, plan, &v, &acc, &r);
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
