/* Prediction beside measurement. */
#include "sim/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"

PX_NAME_TABLE(px_cmp_row_names, PX_CMP_COUNT, "gemm", "attention", "norm", "elementwise", "embed_loss", "optimizer",
              "tp_comm", "dp_comm", "offload", "p2p_and_wait");

/* The row an op belongs to, given the block it runs in. */
static px_cmp_row row_of(px_op_kind k, px_block_kind b) {
  if (b == PX_BLOCK_GRAD_SYNC || b == PX_BLOCK_PARAM_SYNC || b == PX_BLOCK_EMB_SYNC) return PX_CMP_DP;
  if (b == PX_BLOCK_SEND_FWD || b == PX_BLOCK_SEND_BWD || b == PX_BLOCK_RECV_FWD || b == PX_BLOCK_RECV_BWD)
    return PX_CMP_WAIT;
  switch (px_op_family_of(k)) {
    case PX_FAM_GEMM: return PX_CMP_GEMM;
    case PX_FAM_ATTENTION:
    case PX_FAM_FLASH: return PX_CMP_ATTENTION;
    case PX_FAM_NORM: return PX_CMP_NORM;
    case PX_FAM_EMBED:
    case PX_FAM_LOSS: return PX_CMP_EMBED_LOSS;
    case PX_FAM_OPTIMIZER: return PX_CMP_OPTIMIZER;
    case PX_FAM_COPY: return PX_CMP_OFFLOAD;
    case PX_FAM_COLLECTIVE: return PX_CMP_TP;
    default: return PX_CMP_ELEMENTWISE;
  }
}

/* Each item of a list of times (field, for messages) is a number of seconds:
 * 0, or PX_CMP_MIN_S to PX_CMP_MAX_S. */
static px_status check_times(const cJSON *list, const char *name, const char *field, px_err *err) {
  int i = 0;
  for (const cJSON *t = list->child; t; t = t->next, i++) {
    double s = cJSON_IsNumber(t) ? t->valuedouble : -1;
    if (s != 0 && !(s >= PX_CMP_MIN_S && s <= PX_CMP_MAX_S))
      return px_err_set(err, PX_ERR_INPUT, "%s: field '%s[%d]': expected a time in seconds, 0 or %g to %g", name,
                        field, i, PX_CMP_MIN_S, PX_CMP_MAX_S);
  }
  return PX_OK;
}

px_status px_compare(const px_plan *plan, const px_sim_result *sim, const cJSON *profile, const char *name,
                     px_comparison *out, px_err *err) {
  memset(out, 0, sizeof *out);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(profile, "format");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "parallax-profile/1"))
    return px_err_set(err, PX_ERR_INPUT, "%s: not a parallax profile (field 'format')", name);
  const cJSON *stages = cJSON_GetObjectItemCaseSensitive(profile, "stages");
  const cJSON *times = cJSON_GetObjectItemCaseSensitive(profile, "step_times_s");
  if (!cJSON_IsArray(stages) || cJSON_GetArraySize(stages) != plan->par.pp)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'stages': the profile has %d stages, the plan %lld (another plan?)",
                      name, cJSON_IsArray(stages) ? cJSON_GetArraySize(stages) : -1, (long long)plan->par.pp);
  if (!cJSON_IsArray(times) || cJSON_GetArraySize(times) < 1)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'step_times_s' is missing or empty", name);
  if (check_times(times, name, "step_times_s", err)) return PX_ERR_INPUT;
  /* measured step: the mean after the first (warm-up) step */
  int nt = cJSON_GetArraySize(times);
  double sum = 0;
  for (const cJSON *t = nt > 1 ? times->child->next : times->child; t; t = t->next) sum += t->valuedouble;
  out->timed_steps = nt > 1 ? nt - 1 : 1;
  out->step_measured_s = sum / (double)out->timed_steps;
  out->step_predicted_s = sim->step_time_s;
  out->nstages = plan->par.pp;
  out->stages = px_calloc((size_t)plan->par.pp, sizeof *out->stages, err);
  if (!out->stages) return PX_ERR_RUNTIME;
  for (int64_t s = 0; s < plan->par.pp; s++) {
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stages, (int)s), "op_s_per_step");
    int64_t nops = px_program_nops(plan, s);
    if (!cJSON_IsArray(ops) || cJSON_GetArraySize(ops) != nops) {
      px_comparison_free(out);
      return px_err_set(err, PX_ERR_INPUT, "%s: stage %lld has %d op times, the plan %lld ops (another plan?)", name,
                        (long long)s, cJSON_IsArray(ops) ? cJSON_GetArraySize(ops) : -1, (long long)nops);
    }
    char field[64];
    snprintf(field, sizeof field, "stages[%lld].op_s_per_step", (long long)s);
    if (check_times(ops, name, field, err)) {
      px_comparison_free(out);
      return PX_ERR_INPUT;
    }
    px_cmp_stage *cs = &out->stages[s];
    /* measured, by row */
    const cJSON *t = ops->child;
    px_op_iter it = px_op_iter_begin(plan, s);
    for (const px_op *op; (op = px_op_next(&it)); t = t->next) {
      cs->measured_s[row_of((px_op_kind)op->kind, (px_block_kind)it.block->kind)] += t->valuedouble;
      cs->op_measured_s[op->kind] += t->valuedouble;
      cs->op_count[op->kind]++;
    }
    /* predicted: compute by op kind, collectives from the flows */
    const px_sim_stage *ss = &sim->stages[s];
    for (int k = 0; k < PX_OP_COUNT; k++) {
      cs->predicted_s[row_of((px_op_kind)k, PX_BLOCK_LAYER_FWD)] += ss->op_s[k];
      cs->op_predicted_s[k] = ss->op_s[k];
    }
    cs->predicted_s[PX_CMP_TP] = ss->tp_s;
    cs->predicted_s[PX_CMP_DP] = ss->dp_s;
    /* the rest of each step: transfers and waiting for other stages */
    double pred = 0, meas = 0;
    for (int r = 0; r < PX_CMP_WAIT; r++) pred += cs->predicted_s[r], meas += cs->measured_s[r];
    cs->predicted_s[PX_CMP_WAIT] = fmax(0.0, out->step_predicted_s - pred);
    cs->measured_s[PX_CMP_WAIT] = fmax(0.0, out->step_measured_s - meas);
  }
  return PX_OK;
}

void px_comparison_free(px_comparison *c) {
  if (!c) return;
  free(c->stages);
  c->stages = NULL;
}
