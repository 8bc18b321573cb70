/* The op environment of a rank, from the plan. */
#include "exec/env.h"

#include <stdlib.h>
#include <string.h>

px_status px_env_init(px_env *v, const px_plan *plan, int64_t tp_rank, int64_t cp_rank, px_err *err) {
  const px_model *m = &plan->model;
  const px_parallel *par = &plan->par;
  *v = (px_env){.slots = plan->slots, .heads = m->heads, .seq = plan->seq, .dropout = m->dropout,
                .norm_eps = m->norm_eps,
                .rope = {.theta = m->rope_theta, .concentration = m->rope_concentration,
                         .yarn_factor = m->rope_yarn.factor, .yarn_positions = (double)m->rope_yarn.original_positions,
                         .yarn_beta_fast = m->rope_yarn.beta_fast, .yarn_beta_slow = m->rope_yarn.beta_slow,
                         .yarn_truncate = m->rope_yarn.truncate, .llama3_factor = m->rope_llama3.factor,
                         .llama3_positions = (double)m->rope_llama3.original_positions,
                         .llama3_low = m->rope_llama3.low_freq_factor, .llama3_high = m->rope_llama3.high_freq_factor,
                         .linear_factor = m->rope_linear_factor,
                         .dims = m->rope_fraction < 1.0 ? px_model_rope_dims(m) : 0},
                .mla_q_scale = (float)px_model_softmax_scale_factor(m), .sliding_window = m->sliding_window,
                .layernorm = m->norm == PX_NORM_LAYERNORM,
                .router_sigmoid = m->router == PX_ROUTER_SIGMOID, .norm_topk_prob = m->norm_topk_prob,
                .aux_loss_coef = m->aux_loss_coef, .capacity_factor = m->capacity_factor,
                .drop_by_position = m->token_drop_policy == PX_DROP_POSITION,
                .expert_groups = m->expert_groups, .groups_per_token = m->groups_per_token,
                .lora_scale = px_parallel_lora(par) ? par->lora_alpha / (double)par->lora_rank : 0,
                .base_precision = px_parallel_lora(par) ? par->base_precision : PX_BASE_BF16, .act_dtype = plan->act_dtype, .weight_dtype = plan->param_dtype,
                .grad_dtype = plan->grad_dtype, .master_weights = px_parallel_mixed(par),
                .fp8_delayed = par->precision == PX_PREC_FP8 && par->fp8_recipe == PX_FP8_DELAYED,
                .fp8_blockwise = par->precision == PX_PREC_FP8 && par->fp8_recipe == PX_FP8_BLOCKWISE,
                .block_format = px_precision_block_scaled(par->precision) ? par->precision : 0,
                .tp = par->tp, .cp = par->cp, .ep = par->ep, .etp = plan->grid.etp, .tp_rank = tp_rank,
                .cp_rank = cp_rank, .sp = par->sp,
                .cp_heads = par->cp > 1 && par->cp_algo == PX_CP_A2A, .seq_cp = plan->seq_cp};
  if (par->cp <= 1) return PX_OK;
  int32_t *pos = px_calloc((size_t)(par->cp * plan->seq_cp), sizeof *pos, err); /* (cp, seq_cp) */
  if (!pos) return PX_ERR_RUNTIME;
  for (int64_t r = 0; r < par->cp; r++)
    for (int64_t i = 0; i < plan->seq_cp; i++)
      pos[r * plan->seq_cp + i] = (int32_t)px_cp_position(par->cp, r, plan->seq_cp, i);
  v->cp_pos = pos;
  return PX_OK;
}

void px_env_free(px_env *v) {
  free((void *)v->cp_pos);
  v->cp_pos = NULL;
}
