/* Canonical global parameter layout and the local-to-global mapping. */
#include "exec/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/math.h"

static px_status add(px_global_params *g, const char *name, int64_t layer, int64_t rows, int64_t cols, px_init_kind k,
                     double std, int64_t cap, px_err *err) {
  if (g->n == cap) return px_err_set(err, PX_ERR_RUNTIME, "internal: too many global tensors");
  px_global_tensor *t = &g->t[g->n++];
  if (layer >= 0)
    snprintf(t->name, sizeof t->name, "layer%lld.%s", (long long)layer, name);
  else
    snprintf(t->name, sizeof t->name, "%s", name);
  t->rows = rows, t->cols = cols, t->offset = g->total, t->init = k, t->std = std;
  g->total += (uint64_t)(rows * cols);
  return PX_OK;
}

/* Tensor order per layer (index within a layer's block of tensors). */
enum { T_LN1W, T_LN1B, T_QW, T_KW, T_VW, T_QB, T_KB, T_VB, T_OW, T_OB, T_LN2W, T_LN2B, T_FC1W, T_UPW, T_FC1B, T_UPB,
       T_FC2W, T_FC2B, T_ROUTER, T_EXP_GATE, T_EXP_UP, T_EXP_FC2, T_SH_GATE, T_SH_UP, T_SH_FC2, T_PER_LAYER };

px_status px_global_params_build(const px_model *m, px_global_params *g, px_err *err) {
  memset(g, 0, sizeof *g);
  int64_t cap = m->layers * T_PER_LAYER + 8;
  g->t = px_calloc((size_t)cap, sizeof *g->t, err);
  if (!g->t) return PX_ERR_RUNTIME;
  int64_t H = m->hidden, Q = m->heads * m->head_dim, KV = m->kv_heads * m->head_dim, F = m->ffn_hidden;
  bool ln = m->norm == PX_NORM_LAYERNORM, qb = m->qkv_bias || m->bias, swi = m->mlp == PX_MLP_SWIGLU;
  double std = 0.02, out_std = 0.02 / sqrt(2.0 * (double)m->layers); /* GPT-2's scaled residual projections */
  px_status st = PX_OK;
  /* Every layer has every entry (absent ones with zero size) so indices are fixed. */
  for (int64_t l = 0; l < m->layers && !st; l++) {
    /* a MoE layer's MLP: the router, the experts (each expert's rows one after another), the shared experts */
    bool moe = px_model_layer_is_moe(m, l);
    int64_t E = moe ? m->experts : 0, Fe = m->moe_ffn_hidden, Fd = moe ? 0 : F;
    int64_t Fs = moe ? px_model_shared_ffn(m) : 0;
    if ((st = add(g, "ln1.w", l, 1, H, PX_INIT_ONES, 0, cap, err)) ||
        (st = add(g, "ln1.b", l, 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "q.w", l, Q, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "k.w", l, KV, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "v.w", l, KV, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "q.b", l, qb ? Q : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "k.b", l, qb ? KV : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "v.b", l, qb ? KV : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "o.w", l, H, Q, PX_INIT_NORMAL, out_std, cap, err)) ||
        (st = add(g, "o.b", l, m->bias ? H : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "ln2.w", l, 1, H, PX_INIT_ONES, 0, cap, err)) ||
        (st = add(g, "ln2.b", l, 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, swi ? "gate.w" : "fc1.w", l, Fd, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "up.w", l, swi ? Fd : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, swi ? "gate.b" : "fc1.b", l, m->bias ? Fd : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "up.b", l, swi && m->bias ? Fd : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "fc2.w", l, moe ? 0 : H, Fd, PX_INIT_NORMAL, out_std, cap, err)) ||
        (st = add(g, "fc2.b", l, m->bias && !moe ? H : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
        (st = add(g, "router.w", l, E, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, swi ? "experts.gate.w" : "experts.fc1.w", l, E * Fe, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "experts.up.w", l, swi ? E * Fe : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "experts.fc2.w", l, E * H, Fe, PX_INIT_NORMAL, out_std, cap, err)) ||
        (st = add(g, swi ? "shared.gate.w" : "shared.fc1.w", l, Fs, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "shared.up.w", l, swi ? Fs : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
        (st = add(g, "shared.fc2.w", l, Fs > 0 ? H : 0, Fs, PX_INIT_NORMAL, out_std, cap, err)))
      break;
  }
  if (!st) st = add(g, "emb.w", -1, m->vocab, H, PX_INIT_NORMAL, std, cap, err);
  if (!st) st = add(g, "pos.w", -1, m->position == PX_POS_LEARNED ? m->max_positions : 0, H, PX_INIT_NORMAL, 0.01, cap, err);
  if (!st) st = add(g, "lnf.w", -1, 1, H, PX_INIT_ONES, 0, cap, err);
  if (!st) st = add(g, "lnf.b", -1, 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err);
  if (!st) st = add(g, "head.w", -1, m->tied_embeddings ? 0 : m->vocab, H, PX_INIT_NORMAL, std, cap, err);
  if (st) px_global_params_free(g);
  return st;
}

void px_global_params_free(px_global_params *g) {
  free(g->t);
  memset(g, 0, sizeof *g);
}

static int64_t stage_tensor(const px_global_params *g, int k) { return g->n - 5 + k; } /* emb, pos, lnf.w, lnf.b, head */

px_status px_param_map_of(const px_plan *plan, const px_global_params *g, const px_param_ref *ref, int64_t tp_rank,
                          int64_t ep_rank, px_param_map *pm, px_err *err) {
  memset(pm, 0, sizeof *pm);
  const px_slot *s = &plan->slots[ref->slot];
  const px_model *m = &plan->model;
  int64_t tp = plan->par.tp, l = ref->group, base = l * T_PER_LAYER;
  int64_t QW = m->heads * m->head_dim / tp, KW = m->kv_heads * m->head_dim / tp, F = m->ffn_hidden / tp;
  int64_t Vl = plan->vocab_padded / tp;
  pm->slot = ref->slot;
  pm->group = ref->group;
  pm->replicated = s->tp_replicated;
#define SEC(r0, n, t, g0) (pm->sec[pm->nsec++] = (px_param_section){(r0), (n), (t), (g0)})
  const char *n = s->name;
  if (!strcmp(n, "ln1_w")) SEC(0, s->shape[0], base + T_LN1W, 0);
  else if (!strcmp(n, "ln1_b")) SEC(0, s->shape[0], base + T_LN1B, 0);
  else if (!strcmp(n, "ln2_w")) SEC(0, s->shape[0], base + T_LN2W, 0);
  else if (!strcmp(n, "ln2_b")) SEC(0, s->shape[0], base + T_LN2B, 0);
  else if (!strcmp(n, "qkv_w") || !strcmp(n, "qkv_b")) {
    bool w = n[4] == 'w';
    SEC(0, QW, base + (w ? T_QW : T_QB), tp_rank * QW);
    SEC(QW, KW, base + (w ? T_KW : T_KB), tp_rank * KW);
    SEC(QW + KW, KW, base + (w ? T_VW : T_VB), tp_rank * KW);
  } else if (!strcmp(n, "o_w")) {
    SEC(0, s->shape[0], base + T_OW, 0);
    pm->col0 = tp_rank * QW;
  } else if (!strcmp(n, "o_b")) SEC(0, s->shape[0], base + T_OB, 0);
  else if (!strcmp(n, "fc1_w") || !strcmp(n, "fc1_b")) {
    bool w = n[4] == 'w';
    SEC(0, F, base + (w ? T_FC1W : T_FC1B), tp_rank * F);
    if (m->mlp == PX_MLP_SWIGLU) SEC(F, F, base + (w ? T_UPW : T_UPB), tp_rank * F);
  } else if (!strcmp(n, "fc2_w")) {
    SEC(0, s->shape[0], base + T_FC2W, 0);
    pm->col0 = tp_rank * F;
  } else if (!strcmp(n, "fc2_b")) SEC(0, s->shape[0], base + T_FC2B, 0);
  else if (!strcmp(n, "router_w")) SEC(0, s->shape[0], base + T_ROUTER, 0);
  else if (!strcmp(n, "sh_fc1_w") || !strcmp(n, "sh_fc2_w")) {
    int64_t Fs = px_model_shared_ffn(m) / tp;
    if (n[3] == 'f' && n[5] == '1') {
      SEC(0, Fs, base + T_SH_GATE, tp_rank * Fs);
      if (m->mlp == PX_MLP_SWIGLU) SEC(Fs, Fs, base + T_SH_UP, tp_rank * Fs);
    } else {
      SEC(0, s->shape[0], base + T_SH_FC2, 0);
      pm->col0 = tp_rank * Fs;
    }
  } else if (!strcmp(n, "exp_fc1_w") || !strcmp(n, "exp_fc2_w")) { /* one local expert's rows, then the next's */
    int64_t Fe = m->moe_ffn_hidden / tp, el = px_plan_local_experts(plan), H = m->hidden;
    pm->expert0 = ep_rank * el;
    if (!strcmp(n, "exp_fc1_w")) {
      SEC(0, Fe, base + T_EXP_GATE, tp_rank * Fe);
      if (m->mlp == PX_MLP_SWIGLU) SEC(Fe, Fe, base + T_EXP_UP, tp_rank * Fe);
      pm->expert_rows = m->mlp == PX_MLP_SWIGLU ? 2 * Fe : Fe, pm->expert_grows = m->moe_ffn_hidden;
    } else {
      SEC(0, H, base + T_EXP_FC2, 0);
      pm->col0 = tp_rank * Fe, pm->expert_rows = H, pm->expert_grows = H;
    }
  } else if (!strcmp(n, "emb_w")) SEC(0, Vl, stage_tensor(g, 0), tp_rank * Vl);
  else if (!strcmp(n, "head_w")) {
    pm->tied_copy = m->tied_embeddings;
    SEC(0, Vl, stage_tensor(g, m->tied_embeddings ? 0 : 4), tp_rank * Vl);
  } else if (!strcmp(n, "pos_w")) SEC(0, s->shape[0], stage_tensor(g, 1), 0);
  else if (!strcmp(n, "lnf_w")) SEC(0, s->shape[0], stage_tensor(g, 2), 0);
  else if (!strcmp(n, "lnf_b")) SEC(0, s->shape[0], stage_tensor(g, 3), 0);
  else return px_err_set(err, PX_ERR_RUNTIME, "internal: no global mapping for parameter %s", n);
#undef SEC
  return PX_OK;
}

int64_t px_param_global_index(const px_plan *plan, const px_global_params *g, const px_param_map *pm,
                              const px_param_ref *ref, int64_t r, int64_t c, int64_t *tensor) {
  (void)ref;
  const px_slot *s = &plan->slots[pm->slot];
  int64_t expert_row0 = 0; /* experts: the global rows before this local expert's */
  if (pm->expert_rows > 0) expert_row0 = (pm->expert0 + r / pm->expert_rows) * pm->expert_grows, r %= pm->expert_rows;
  for (int i = 0; i < pm->nsec; i++) {
    if (r < pm->sec[i].row0 || r >= pm->sec[i].row0 + pm->sec[i].rows) continue;
    const px_global_tensor *t = &g->t[pm->sec[i].tensor];
    int64_t gr = expert_row0 + pm->sec[i].grow0 + (r - pm->sec[i].row0), gc = pm->col0 + c;
    /* norm and bias vectors are stored (1, H) globally but (H, 1) locally */
    if (t->rows == 1 && s->shape[1] == 1) gc = gr, gr = 0;
    if (gr >= t->rows || gc >= t->cols) return -1; /* vocabulary padding */
    if (tensor) *tensor = pm->sec[i].tensor;
    return (int64_t)t->offset + gr * t->cols + gc;
  }
  return -1;
}

float px_param_init_value(const px_global_params *g, int64_t tensor, uint64_t index, uint64_t seed) {
  const px_global_tensor *t = &g->t[tensor];
  if (t->init == PX_INIT_ONES) return 1.0f;
  if (t->init == PX_INIT_ZEROS) return 0.0f;
  /* Box-Muller on two counter-based uniforms */
  double u1 = ((double)(px_rng_u64(seed, 2 * index) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(px_rng_u64(seed, 2 * index + 1) >> 11) / 9007199254740992.0;
  return (float)(t->std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
