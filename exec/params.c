/* Canonical global parameter layout and the local-to-global mapping. */
#include "exec/params.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/amax.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/math.h"
#include "plan/lora.h"

/* Appends tensor pre + name ("layer3." "ln1.w"; pre "" for the stage's). */
static px_status add(px_global_params *g, const char *pre, const char *name, int64_t rows, int64_t cols, px_init_kind k,
                     double std, int64_t cap, px_err *err) {
  if (g->n == cap) return px_err_set(err, PX_ERR_RUNTIME, "internal: too many global tensors");
  px_global_tensor *t = &g->t[g->n++];
  snprintf(t->name, sizeof t->name, "%s%s", pre, name);
  t->rows = rows, t->cols = cols, t->offset = g->total, t->init = k, t->std = std;
  g->total += (uint64_t)(rows * cols);
  return PX_OK;
}

/* Tensor order per layer (index within a layer's block of tensors). */
enum { T_LN1W, T_LN1B, T_QW, T_KW, T_VW, T_QB, T_KB, T_VB, T_OW, T_OB, T_LN2W, T_LN2B, T_FC1W, T_UPW, T_FC1B, T_UPB,
       T_FC2W, T_FC2B, T_ROUTER, T_EXP_GATE, T_EXP_UP, T_EXP_FC2, T_SH_GATE, T_SH_UP, T_SH_FC2, T_QNORM, T_KNORM,
       T_SINKS, T_QDOWN, T_QLATNORM, T_QUP, T_KVDOWN, T_KVLATNORM, T_KVUP, T_EXP_GATEB, T_EXP_UPB, T_EXP_FC2B,
       T_ROUTERB, T_PER_LAYER };

/* The tensors of layer l (a layer of m's kind at that index: the MTP module's is index m->layers), named
 * pre + each. Every layer has every entry (absent ones with zero size) so indices are fixed. */
static px_status add_layer(px_global_params *g, const px_model *m, int64_t l, const char *pre, int64_t cap, px_err *err) {
  int64_t H = m->hidden, Q = m->heads * m->head_dim, KV = m->kv_heads * m->head_dim, F = m->ffn_hidden;
  bool ln = m->norm == PX_NORM_LAYERNORM, qb = m->qkv_bias || m->bias, swi = m->mlp == PX_MLP_SWIGLU;
  /* multi-head latent attention: no q, k, v weights; the context's width is heads x v_head_dim */
  bool mla = m->kv_lora_rank > 0;
  int64_t QL = m->q_lora_rank, KL = m->kv_lora_rank, O = mla ? m->heads * m->v_head_dim : Q;
  double std = 0.02, out_std = 0.02 / sqrt(2.0 * (double)m->layers); /* GPT-2's scaled residual projections */
  px_status st = PX_OK;
  /* a MoE layer's MLP: the router, the experts (each expert's rows one after another), the shared experts */
  bool moe = px_model_layer_is_moe(m, l);
  int64_t E = moe ? m->experts : 0, Fe = m->moe_ffn_hidden, Fd = moe ? 0 : F;
  int64_t Fs = moe ? px_model_shared_ffn(m) : 0;
  bool mb = moe && px_model_moe_biases(m); /* the router's and the experts' biases */
  if ((st = add(g, pre, "ln1.w", 1, H, PX_INIT_ONES, 0, cap, err)) ||
      (st = add(g, pre, "ln1.b", 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "q.w", mla ? 0 : Q, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "k.w", mla ? 0 : KV, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "v.w", mla ? 0 : KV, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "q.b", qb ? Q : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "k.b", qb ? KV : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "v.b", qb ? KV : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "o.w", H, O, PX_INIT_NORMAL, out_std, cap, err)) ||
      (st = add(g, pre, "o.b", m->bias ? H : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "ln2.w", 1, H, PX_INIT_ONES, 0, cap, err)) ||
      (st = add(g, pre, "ln2.b", 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, swi ? "gate.w" : "fc1.w", Fd, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "up.w", swi ? Fd : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, swi ? "gate.b" : "fc1.b", m->bias ? Fd : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "up.b", swi && m->bias ? Fd : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "fc2.w", moe ? 0 : H, Fd, PX_INIT_NORMAL, out_std, cap, err)) ||
      (st = add(g, pre, "fc2.b", m->bias && !moe ? H : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "router.w", E, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, swi ? "experts.gate.w" : "experts.fc1.w", E * Fe, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "experts.up.w", swi ? E * Fe : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "experts.fc2.w", E * H, Fe, PX_INIT_NORMAL, out_std, cap, err)) ||
      (st = add(g, pre, swi ? "shared.gate.w" : "shared.fc1.w", Fs, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "shared.up.w", swi ? Fs : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "shared.fc2.w", Fs > 0 ? H : 0, Fs, PX_INIT_NORMAL, out_std, cap, err)) ||
      /* per-head q/k norms (Qwen3): one RMSNorm weight of head_dim for every query head, one for every key head */
      (st = add(g, pre, "q_head_norm.w", 1, m->qk_norm ? m->head_dim : 0, PX_INIT_ONES, 0, cap, err)) ||
      (st = add(g, pre, "k_head_norm.w", 1, m->qk_norm ? m->head_dim : 0, PX_INIT_ONES, 0, cap, err)) ||
      /* attention sinks (gpt-oss): a logit per query head, drawn as its other weights are */
      (st = add(g, pre, "sinks", 1, m->attention_sinks ? m->heads : 0, PX_INIT_NORMAL, std, cap, err)) ||
      /* multi-head latent attention: q's down projection and latent norm (q_lora_rank > 0) and up projection
       * (heads x (nope + rope)); kv's down projection (the latent, then the RoPE key), latent norm and up
       * projection (every head's non-RoPE key, then every head's value) */
      (st = add(g, pre, "q_down.w", mla ? QL : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "q_latent_norm.w", 1, mla ? QL : 0, PX_INIT_ONES, 0, cap, err)) ||
      (st = add(g, pre, "q_up.w", mla ? Q : 0, QL > 0 ? QL : H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "kv_down.w", mla ? KL + m->qk_rope_head_dim : 0, H, PX_INIT_NORMAL, std, cap, err)) ||
      (st = add(g, pre, "kv_latent_norm.w", 1, KL, PX_INIT_ONES, 0, cap, err)) ||
      (st = add(g, pre, "kv_up.w", mla ? m->heads * (m->qk_nope_head_dim + m->v_head_dim) : 0, KL, PX_INIT_NORMAL,
                std, cap, err)) ||
      /* the experts' biases (gpt-oss), each expert's after the one before, as their weights' rows */
      (st = add(g, pre, swi ? "experts.gate.b" : "experts.fc1.b", mb ? E * Fe : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "experts.up.b", mb && swi ? E * Fe : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "experts.fc2.b", mb ? E * H : 0, 1, PX_INIT_ZEROS, 0, cap, err)) ||
      (st = add(g, pre, "router.b", mb ? E : 0, 1, PX_INIT_ZEROS, 0, cap, err)))
    return st;
  return PX_OK;
}

/* The MTP module's own tensors after its layer's (plan/compile.c's mtp_slots): enorm, hnorm, eh_proj (h x 2h:
 * the embedding's columns, then the hidden state's, as Megatron-Core concatenates them), its final norm. */
enum { T_MTP_ENORM, T_MTP_HNORM, T_MTP_EH, T_MTP_NORM, T_MTP_COUNT };

px_status px_global_params_build(const px_model *m, int64_t mtp, px_global_params *g, px_err *err) {
  memset(g, 0, sizeof *g);
  int64_t cap = (m->layers + mtp) * (T_PER_LAYER + T_MTP_COUNT) + 8;
  g->t = px_calloc((size_t)cap, sizeof *g->t, err);
  if (!g->t) return PX_ERR_RUNTIME;
  int64_t H = m->hidden;
  bool ln = m->norm == PX_NORM_LAYERNORM;
  double std = 0.02;
  px_status st = PX_OK;
  char pre[32];
  for (int64_t l = 0; l < m->layers && !st; l++) {
    snprintf(pre, sizeof pre, "layer%lld.", (long long)l);
    st = add_layer(g, m, l, pre, cap, err);
  }
  for (int64_t k = 0; k < mtp && !st; k++) { /* the MTP modules' layers, then their own tensors */
    snprintf(pre, sizeof pre, "mtp%lld.", (long long)k);
    st = add_layer(g, m, m->layers + k, pre, cap, err);
  }
  for (int64_t k = 0; k < mtp && !st; k++) {
    snprintf(pre, sizeof pre, "mtp%lld.", (long long)k);
    if (!st) st = add(g, pre, "enorm.w", 1, H, PX_INIT_ONES, 0, cap, err);
    if (!st) st = add(g, pre, "hnorm.w", 1, H, PX_INIT_ONES, 0, cap, err);
    if (!st) st = add(g, pre, "eh_proj.w", H, 2 * H, PX_INIT_NORMAL, std, cap, err);
    if (!st) st = add(g, pre, "final_norm.w", 1, H, PX_INIT_ONES, 0, cap, err);
  }
  if (!st) st = add(g, "", "emb.w", m->vocab, H, PX_INIT_NORMAL, std, cap, err);
  if (!st) st = add(g, "", "pos.w", m->position == PX_POS_LEARNED ? m->max_positions : 0, H, PX_INIT_NORMAL, 0.01, cap, err);
  if (!st) st = add(g, "", "lnf.w", 1, H, PX_INIT_ONES, 0, cap, err);
  if (!st) st = add(g, "", "lnf.b", 1, ln ? H : 0, PX_INIT_ZEROS, 0, cap, err);
  if (!st) st = add(g, "", "head.w", m->tied_embeddings ? 0 : m->vocab, H, PX_INIT_NORMAL, std, cap, err);
  if (st) px_global_params_free(g);
  g->model_n = g->n;
  return st;
}

/* The global widths of linear i of px_lora_linears (its outputs' parts n, its input k) and whether it is row-parallel. */
static bool lora_linear_dims(const px_model *m, int i, int64_t n[3], int64_t *k) {
  int64_t H = m->hidden, Q = m->heads * m->head_dim, KV = m->kv_heads * m->head_dim, F = m->ffn_hidden;
  bool swi = m->mlp == PX_MLP_SWIGLU;
  const int64_t dims[PX_LORA_LINEARS][4] = {{Q, KV, KV, H}, {H, 0, 0, Q}, {F, swi ? F : 0, 0, H}, {H, 0, 0, F}};
  for (int j = 0; j < 3; j++) n[j] = dims[i][j];
  *k = dims[i][3];
  return i == 1 || i == 3; /* o, fc2 */
}

px_status px_global_params_add_adapters(const px_plan *plan, px_global_params *g, px_err *err) {
  const px_model *m = &plan->model;
  const px_parallel *par = &plan->par;
  if (!px_parallel_lora(par)) return PX_OK;
  int64_t cap = g->n + m->layers * PX_LORA_LINEARS * 8;
  px_global_tensor *t = realloc(g->t, (size_t)cap * sizeof *t);
  if (!t) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  g->t = t;
  px_status st = PX_OK;
  for (int64_t l = 0; l < m->layers && !st; l++)
    for (int i = 0; i < PX_LORA_LINEARS && !st; i++) {
      int64_t n[3], k, r = par->lora_rank;
      lora_linear_dims(m, i, n, &k);
      for (int j = 0; j < 4 && !st; j++) {
        if (!(par->lora_targets & px_lora_linears[i].targets[j])) continue;
        char name[32], pre[32];
        snprintf(pre, sizeof pre, "layer%lld.", (long long)l);
        snprintf(name, sizeof name, "%s.A%d", px_lora_linears[i].weight, j);
        st = add(g, pre, name, r, k, PX_INIT_UNIFORM, 1.0 / sqrt((double)k), cap, err);
        snprintf(name, sizeof name, "%s.B%d", px_lora_linears[i].weight, j);
        if (!st) st = add(g, pre, name, j == 3 ? n[0] + n[1] + n[2] : n[j], r, PX_INIT_ZEROS, 0, cap, err);
      }
    }
  return st;
}

int64_t px_global_adapters(const px_plan *plan, const px_global_params *g, px_global_adapter *out, int64_t cap) {
  const px_parallel *par = &plan->par;
  if (!px_parallel_lora(par)) return 0;
  /* each linear's parts (px_lora_linears' order), the weights whose rows its fused output concatenates */
  static const int parts[PX_LORA_LINEARS][3] = {{T_QW, T_KW, T_VW}, {T_OW, -1, -1}, {T_FC1W, T_UPW, -1}, {T_FC2W, -1, -1}};
  int64_t n = 0, at = g->model_n;
  for (int64_t l = 0; l < plan->model.layers; l++)
    for (int i = 0; i < PX_LORA_LINEARS; i++)
      for (int j = 0; j < 4; j++) {
        if (!(par->lora_targets & px_lora_linears[i].targets[j])) continue;
        if (out && n < cap) {
          px_global_adapter *a = &out[n];
          *a = (px_global_adapter){.a = at, .b = at + 1};
          for (int k = 0; k < 3; k++)
            if (parts[i][k] >= 0 && (j == 3 || j == k)) a->base[a->nbase++] = l * T_PER_LAYER + parts[i][k];
        }
        n++, at += 2;
      }
  return n;
}

/* The mapping of adapter slot n ("qkv_w.B3") of layer l: its global tensor's rows and columns on TP rank tp_rank. */
static px_status adapter_map(const px_plan *plan, const px_global_params *g, const char *n, int64_t l,
                             int64_t tp_rank, px_param_map *pm, px_err *err) {
  char want[64];
  snprintf(want, sizeof want, "layer%lld.%.24s", (long long)l, n);
  int64_t ti = -1;
  for (int64_t i = g->model_n; i < g->n && ti < 0; i++)
    if (!strcmp(g->t[i].name, want)) ti = i;
  int li = -1;
  for (int i = 0; i < PX_LORA_LINEARS; i++)
    if (!strncmp(n, px_lora_linears[i].weight, strlen(px_lora_linears[i].weight))) li = i;
  if (ti < 0 || li < 0) return px_err_set(err, PX_ERR_RUNTIME, "internal: no global adapter tensor %s", want);
  int64_t tp = plan->par.tp, ng[3], k, r = plan->par.lora_rank;
  bool row_parallel = lora_linear_dims(&plan->model, li, ng, &k);
  int j = n[strlen(n) - 1] - '0';
  bool a = n[strlen(n) - 2] == 'A';
#define SEC(r0, rows, g0) (pm->sec[pm->nsec++] = (px_param_section){(r0), (rows), ti, (g0)})
  if (a) { /* (r, in): a row-parallel layer's split with its input columns */
    SEC(0, r, 0);
    if (row_parallel) pm->col0 = tp_rank * (k / tp);
  } else if (row_parallel) { /* (out, r) replicated */
    SEC(0, ng[0], 0);
  } else { /* (out / tp, r): output j's rows, or each output's, of this rank */
    int64_t local = 0, global = 0;
    for (int i = 0; i < 3; i++) {
      if ((j == 3 || j == i) && ng[i] > 0) SEC(local, ng[i] / tp, global + tp_rank * (ng[i] / tp)), local += ng[i] / tp;
      if (j == 3) global += ng[i];
    }
  }
#undef SEC
  return PX_OK;
}

void px_global_params_free(px_global_params *g) {
  free(g->t);
  memset(g, 0, sizeof *g);
}

static int64_t stage_tensor(const px_global_params *g, int k) { return g->model_n - 5 + k; } /* emb, pos, lnf.w, lnf.b, head */

px_status px_param_map_of(const px_plan *plan, const px_global_params *g, const px_param_ref *ref,
                          const px_param_rank *rk, px_param_map *pm, px_err *err) {
  memset(pm, 0, sizeof *pm);
  int64_t tp_rank = rk->tp_rank;
  const px_slot *s = &plan->slots[ref->slot];
  const px_model *m = &plan->model;
  /* the MTP module's layer (group L + 1) right after the model's, its own tensors after those (build) */
  int64_t L = m->layers, mtp = plan->par.mtp_layers;
  int64_t tp = plan->par.tp, l = ref->group, base = (l > L ? l - 1 : l) * T_PER_LAYER;
  int64_t mtp_own = (L + mtp) * T_PER_LAYER + (l - L - 1) * T_MTP_COUNT, Hl = m->hidden / tp;
  int64_t QW = m->heads * m->head_dim / tp, KW = m->kv_heads * m->head_dim / tp, F = m->ffn_hidden / tp;
  int64_t OW = m->kv_lora_rank > 0 ? m->heads * m->v_head_dim / tp : QW; /* the context's columns of this rank */
  int64_t Vl = plan->vocab_padded / tp;
  pm->slot = ref->slot;
  pm->group = ref->group;
  pm->replicated = s->tp_replicated;
#define SEC(r0, n, t, g0) (pm->sec[pm->nsec++] = (px_param_section){(r0), (n), (t), (g0)})
  const char *n = s->name;
  if (strchr(n, '.')) return adapter_map(plan, g, n, l, tp_rank, pm, err); /* fine-tuning's adapters */
  if (!strcmp(n, "ln1_w")) SEC(0, s->shape[0], base + T_LN1W, 0);
  else if (!strcmp(n, "ln1_b")) SEC(0, s->shape[0], base + T_LN1B, 0);
  else if (!strcmp(n, "ln2_w")) SEC(0, s->shape[0], base + T_LN2W, 0);
  else if (!strcmp(n, "ln2_b")) SEC(0, s->shape[0], base + T_LN2B, 0);
  else if (!strcmp(n, "q_head_norm_w")) SEC(0, s->shape[0], base + T_QNORM, 0);
  else if (!strcmp(n, "k_head_norm_w")) SEC(0, s->shape[0], base + T_KNORM, 0);
  else if (!strcmp(n, "sinks")) SEC(0, s->shape[0], base + T_SINKS, tp_rank * s->shape[0]); /* this rank's heads */
  else if (!strcmp(n, "q_down_w")) SEC(0, s->shape[0], base + T_QDOWN, 0); /* latent attention's, replicated */
  else if (!strcmp(n, "q_norm_w")) SEC(0, s->shape[0], base + T_QLATNORM, 0);
  else if (!strcmp(n, "kv_down_w")) SEC(0, s->shape[0], base + T_KVDOWN, 0);
  else if (!strcmp(n, "kv_norm_w")) SEC(0, s->shape[0], base + T_KVLATNORM, 0);
  else if (!strcmp(n, "q_up_w")) SEC(0, QW, base + T_QUP, tp_rank * QW); /* this rank's heads */
  else if (!strcmp(n, "kv_up_w")) { /* this rank's heads' non-RoPE keys, then their values */
    int64_t kn = m->heads * m->qk_nope_head_dim, vn = m->heads * m->v_head_dim;
    SEC(0, kn / tp, base + T_KVUP, tp_rank * (kn / tp));
    SEC(kn / tp, vn / tp, base + T_KVUP, kn + tp_rank * (vn / tp));
  }
  else if (!strcmp(n, "qkv_w") || !strcmp(n, "qkv_b")) {
    bool w = n[4] == 'w';
    SEC(0, QW, base + (w ? T_QW : T_QB), tp_rank * QW);
    SEC(QW, KW, base + (w ? T_KW : T_KB), tp_rank * KW);
    SEC(QW + KW, KW, base + (w ? T_VW : T_VB), tp_rank * KW);
  } else if (!strcmp(n, "o_w")) {
    SEC(0, s->shape[0], base + T_OW, 0);
    pm->col0 = tp_rank * OW;
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
  else if (!strcmp(n, "router_b")) SEC(0, s->shape[0], base + T_ROUTERB, 0);
  else if (!strcmp(n, "sh_fc1_w") || !strcmp(n, "sh_fc2_w")) {
    int64_t Fs = px_model_shared_ffn(m) / tp;
    if (n[3] == 'f' && n[5] == '1') {
      SEC(0, Fs, base + T_SH_GATE, tp_rank * Fs);
      if (m->mlp == PX_MLP_SWIGLU) SEC(Fs, Fs, base + T_SH_UP, tp_rank * Fs);
    } else {
      SEC(0, s->shape[0], base + T_SH_FC2, 0);
      pm->col0 = tp_rank * Fs;
    }
  } else if (!strncmp(n, "exp_fc", 6)) { /* one local expert's rows, then the next's: exp_fc{1,2}_{w,b} */
    /* the rank's ETP slice of its EP rank's experts' width */
    int64_t Fe = m->moe_ffn_hidden / plan->grid.etp, el = px_plan_local_experts(plan), H = m->hidden;
    int64_t f0 = rk->etp_rank * Fe;
    bool w = n[strlen(n) - 1] == 'w';
    pm->expert0 = rk->ep_rank * el;
    if (n[6] == '1') {
      SEC(0, Fe, base + (w ? T_EXP_GATE : T_EXP_GATEB), f0);
      if (m->mlp == PX_MLP_SWIGLU) SEC(Fe, Fe, base + (w ? T_EXP_UP : T_EXP_UPB), f0);
      pm->expert_rows = m->mlp == PX_MLP_SWIGLU ? 2 * Fe : Fe, pm->expert_grows = m->moe_ffn_hidden;
    } else {
      SEC(0, H, base + (w ? T_EXP_FC2 : T_EXP_FC2B), 0);
      pm->col0 = w ? f0 : 0, pm->expert_rows = H, pm->expert_grows = H;
    }
  } else if (!strcmp(n, "emb_w")) SEC(0, Vl, stage_tensor(g, 0), tp_rank * Vl);
  else if (!strcmp(n, "mtp_emb_w")) { /* the last stage's copy of the table */
    pm->tied_copy = true;
    SEC(0, Vl, stage_tensor(g, 0), tp_rank * Vl);
  } else if (!strcmp(n, "mtp_enorm_w")) SEC(0, s->shape[0], mtp_own + T_MTP_ENORM, 0);
  else if (!strcmp(n, "mtp_hnorm_w")) SEC(0, s->shape[0], mtp_own + T_MTP_HNORM, 0);
  else if (!strcmp(n, "mtp_lnf_w")) SEC(0, s->shape[0], mtp_own + T_MTP_NORM, 0);
  else if (!strcmp(n, "mtp_eh_e_w") || !strcmp(n, "mtp_eh_h_w")) { /* this rank's output rows of eh_proj, a half's columns */
    SEC(0, Hl, mtp_own + T_MTP_EH, tp_rank * Hl);
    pm->col0 = n[7] == 'h' ? m->hidden : 0;
  }
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
  if (t->init == PX_INIT_UNIFORM) return (float)(t->std * (2.0 * (double)(px_rng_u64(seed, index) >> 11) / 9007199254740992.0 - 1.0));
  /* Box-Muller on two counter-based uniforms */
  double u1 = ((double)(px_rng_u64(seed, 2 * index) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(px_rng_u64(seed, 2 * index + 1) >> 11) / 9007199254740992.0;
  return (float)(t->std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- a rank's shard of its stage's parameters ---- */

void px_param_rank_of(const px_plan *plan, int64_t world_rank, px_param_rank *out) {
  const px_grid *g = &plan->grid;
  int64_t tp_rank, cp_rank, dp_rank, pp_rank;
  px_grid_coords(g, world_rank, &tp_rank, &cp_rank, &dp_rank, &pp_rank);
  out->stage = pp_rank;
  out->tp_rank = tp_rank;
  out->wdp_rank = cp_rank + g->cp * dp_rank;
  out->shard_rank = out->wdp_rank % px_parallel_shard_size(&plan->par);
  px_grid_expert_coords(g, tp_rank, out->wdp_rank, &out->etp_rank, &out->ep_rank, &out->edp_rank);
}

void px_param_owned_range(const px_plan *plan, const px_unit *u, const px_param_rank *rk, uint64_t *lo, uint64_t *hi) {
  if (plan->par.zero == 0) {
    *lo = u->offset, *hi = u->offset + u->padded;
    return;
  }
  uint64_t s = px_plan_unit_shard(plan, u);
  *lo = u->offset + (uint64_t)(u->expert ? rk->edp_rank : rk->shard_rank) * s, *hi = *lo + s;
}

uint64_t px_param_shard_index(const px_plan *plan, const px_unit *u, const px_param_rank *rk, uint64_t flat) {
  if (plan->par.zero == 0) return flat;
  uint64_t lo, hi;
  px_param_owned_range(plan, u, rk, &lo, &hi);
  return u->shard_offset + (flat - lo);
}

/* ---- fp8 delayed scaling's amax history keys (exec/amax.h) ---- */

/* The keys op o of an instance at `layer` uses under delayed scaling (at most PX_OP_INS + 1). */
static int op_keys(const px_plan *p, const px_op *o, int64_t layer, px_amax_key *k) {
  int n = 0;
  if (o->kind == PX_OP_CAST && o->out[0].slot >= 0) k[n++] = px_amax_cast_key(o, layer);
  for (int j = 0; j < PX_OP_INS && (o->flags & PX_OPF_FP8); j++) {
    int16_t s = o->in[j].slot;
    if (s >= 0 && p->slots[s].kind == PX_SLOT_PARAM && p->slots[s].fp8) k[n++] = px_amax_weight_key(s, layer);
  }
  return n;
}

/* Calls f on every key of the stage's program, in the instances of
 * micro-batch 0 and of none (every other micro-batch's repeat them). */
static void each_key(const px_plan *plan, int64_t stage, void (*f)(void *ctx, px_amax_key k), void *ctx) {
  const px_program *prog = &plan->programs[stage];
  for (int32_t i = 0; i < prog->ninsts; i++) {
    const px_inst *in = &prog->insts[i];
    if (in->mb > 0) continue;
    const px_op *ops = px_inst_ops(plan, prog, in);
    for (int32_t o = 0; o < plan->blocks[in->block].nops; o++) {
      px_amax_key k[PX_OP_INS + 1];
      int n = op_keys(plan, &ops[o], in->layer, k);
      for (int j = 0; j < n; j++) f(ctx, k[j]);
    }
  }
}

/* The layers the keys name, and for one of them the slots (px_ref's int16_t slots: 2^15 bits). */
typedef struct {
  int64_t lo, hi, layer;
  uint64_t seen[(1 << 15) / 64];
} key_walk;

static void key_range(void *ctx, px_amax_key k) {
  key_walk *w = ctx;
  if (k.layer < w->lo) w->lo = k.layer;
  if (k.layer > w->hi) w->hi = k.layer;
}

static void key_mark(void *ctx, px_amax_key k) {
  key_walk *w = ctx;
  if (k.layer == w->layer) w->seen[k.slot / 64] |= 1ull << (k.slot % 64);
}

int64_t px_param_amax_keys(const px_plan *plan, int64_t stage, px_amax_key *out, int64_t cap) {
  if (plan->par.precision != PX_PREC_FP8 || plan->par.fp8_recipe != PX_FP8_DELAYED) return 0;
  key_walk w = {.lo = INT64_MAX, .hi = INT64_MIN};
  each_key(plan, stage, key_range, &w);
  int64_t n = 0;
  for (w.layer = w.lo; w.layer <= w.hi; w.layer++) { /* layer by layer, in slot order */
    memset(w.seen, 0, sizeof w.seen);
    each_key(plan, stage, key_mark, &w);
    for (int32_t s = 0; s < plan->nslots; s++)
      if (w.seen[s / 64] >> (s % 64) & 1) {
        if (out && n < cap) out[n] = (px_amax_key){s, w.layer};
        n++;
      }
  }
  return n;
}

const char *const px_state_names[PX_STATE_COUNT] = {"params", "master", "adam_m", "adam_v", "loss_scaler", "fp8_amax"};

int px_param_states(const px_plan *plan, int64_t stage, px_param_state out[PX_STATE_COUNT]) {
  px_states ps;
  px_plan_states(plan, stage, &ps);
  const px_parallel *par = &plan->par;
  bool off = par->offload_opt != PX_OFFLOAD_NONE;
  /* with --offload-params the parameter shard lives on the host too (ZeRO-3 only) */
  bool host_params = off && ps.bytes[PX_PLACE_HOST][PX_MEM_PARAMS] + ps.bytes[PX_PLACE_NVME][PX_MEM_PARAMS] > 0;
  int n = 0;
  px_param_view pv = host_params || par->zero >= 3 ? PX_VIEW_OWNED : par->zero > 0 ? PX_VIEW_FLAT_OWNED : PX_VIEW_FLAT;
  out[n++] = (px_param_state){PX_STATE_PARAMS, host_params ? ps.opt_elems : ps.params_elems, plan->param_dtype, pv,
                              host_params};
  if (off || px_parallel_mixed(par))
    out[n++] = (px_param_state){PX_STATE_MASTER, ps.opt_elems, PX_DTYPE_FP32, PX_VIEW_OWNED, off};
  out[n++] = (px_param_state){PX_STATE_ADAM_M, ps.opt_elems, PX_DTYPE_FP32, PX_VIEW_OWNED, off};
  out[n++] = (px_param_state){PX_STATE_ADAM_V, ps.opt_elems, PX_DTYPE_FP32, PX_VIEW_OWNED, off};
  if (plan->act_dtype == PX_DTYPE_FP16)
    out[n++] = (px_param_state){PX_STATE_LOSS_SCALER, 3, PX_DTYPE_FP32, PX_VIEW_NONE, true};
  int64_t keys = px_param_amax_keys(plan, stage, NULL, 0);
  if (keys > 0)
    out[n++] = (px_param_state){PX_STATE_FP8_AMAX, (uint64_t)keys * PX_FP8_AMAX_HISTORY, PX_DTYPE_FP32, PX_VIEW_NONE,
                                true};
  return n;
}

typedef struct {
  px_param_span *s;
  uint64_t n, cap;
} span_list;

/* Appends state elements [at, at + n) = canonical [canon, canon + n), extending the last span when both follow on. */
static bool span_add(span_list *l, uint64_t at, uint64_t canon, uint64_t n) {
  if (l->n) {
    px_param_span *last = &l->s[l->n - 1];
    if (last->at + last->n == at && last->canon + last->n == canon) {
      last->n += n;
      return true;
    }
  }
  if (l->n == l->cap) {
    uint64_t cap = l->cap ? 2 * l->cap : 256;
    px_param_span *ns = realloc(l->s, cap * sizeof *ns);
    if (!ns) return false;
    l->s = ns, l->cap = cap;
  }
  l->s[l->n++] = (px_param_span){at, canon, n};
  return true;
}

static int span_by_at(const void *a, const void *b) {
  uint64_t x = ((const px_param_span *)a)->at, y = ((const px_param_span *)b)->at;
  return x < y ? -1 : x > y;
}

/* The spans of parameter r's elements [lo, hi) (offsets as r->offset counts them), the first at state element at0. */
static px_status ref_spans(const px_plan *plan, const px_global_params *g, const px_param_rank *rk,
                           const px_param_ref *r, uint64_t lo, uint64_t hi, uint64_t at0, span_list *l, px_err *err) {
  px_param_map pm;
  px_status st = px_param_map_of(plan, g, r, rk, &pm, err);
  if (st) return st;
  const px_slot *s = &plan->slots[r->slot];
  int64_t cols = (int64_t)(s->elems / (uint64_t)s->shape[0]);
  bool ok = true;
  for (uint64_t f = lo; f < hi && ok;) { /* a local row (or what of it is in range) at a time */
    int64_t e = (int64_t)(f - r->offset), row = e / cols, c = e % cols;
    uint64_t run = (uint64_t)(cols - c) < hi - f ? (uint64_t)(cols - c) : hi - f;
    int64_t g0 = px_param_global_index(plan, g, &pm, r, row, c, NULL);
    int64_t g1 = px_param_global_index(plan, g, &pm, r, row, c + (int64_t)run - 1, NULL);
    if (g0 >= 0 && g1 >= 0 && (uint64_t)(g1 - g0) == run - 1) { /* columns map to consecutive elements */
      ok = span_add(l, at0 + (f - lo), (uint64_t)g0, run);
    } else { /* vocabulary padding in the row: element by element */
      for (uint64_t k = 0; k < run && ok; k++) {
        int64_t gi = px_param_global_index(plan, g, &pm, r, row, c + (int64_t)k, NULL);
        if (gi >= 0) ok = span_add(l, at0 + (f - lo) + k, (uint64_t)gi, 1);
      }
    }
    f += run;
  }
  return ok ? PX_OK : px_err_set(err, PX_ERR_RUNTIME, "out of memory");
}

px_status px_param_spans(const px_plan *plan, const px_global_params *g, const px_param_rank *rk, px_param_view view,
                         px_param_span **out, uint64_t *n, px_err *err) {
  *out = NULL, *n = 0;
  if (view == PX_VIEW_NONE) return PX_OK;
  const px_program *prog = &plan->programs[rk->stage];
  span_list l = {0};
  px_status st = PX_OK;
  for (int32_t i = 0; i < prog->nparams && !st; i++) {
    const px_param_ref *r = &prog->params[i];
    const px_unit *u = &prog->units[r->unit];
    uint64_t lo = r->offset, hi = r->offset + r->elems; /* the flat elements the state holds */
    if (view != PX_VIEW_FLAT) {
      uint64_t ulo, uhi;
      px_param_owned_range(plan, u, rk, &ulo, &uhi);
      lo = lo > ulo ? lo : ulo;
      hi = hi < uhi ? hi : uhi;
      if (hi <= lo) continue;
    }
    uint64_t at0 = view == PX_VIEW_OWNED ? px_param_shard_index(plan, u, rk, lo) : lo;
    st = ref_spans(plan, g, rk, r, lo, hi, at0, &l, err);
  }
  if (st) {
    free(l.s);
    return st;
  }
  qsort(l.s, (size_t)l.n, sizeof *l.s, span_by_at);
  *out = l.s, *n = l.n;
  return PX_OK;
}

px_status px_param_frozen_spans(const px_plan *plan, const px_global_params *g, const px_param_rank *rk,
                                px_param_span **out, uint64_t *n, px_err *err) {
  const px_program *prog = &plan->programs[rk->stage];
  span_list l = {0};
  px_status st = PX_OK;
  for (int32_t i = 0; i < prog->nfrozen && !st; i++) {
    const px_param_ref *r = &prog->frozen[i];
    st = ref_spans(plan, g, rk, r, r->offset, r->offset + r->elems, r->offset, &l, err);
  }
  if (st) {
    free(l.s);
    return st;
  }
  *out = l.s, *n = l.n;
  return PX_OK;
}

/* ---- fine-tuning's frozen base in its storage ---- */

/* Bytes of frozen weight r in its storage: nf4 and fp8 as kernels/cpu lays them out (the plan's
 * px_lora_frozen_bytes, checked equal), the others in the parameter dtype. */
static uint64_t frozen_storage_bytes(const px_plan *plan, const px_param_ref *r) {
  if (!px_lora_quantized(plan->slots[r->slot].name)) return r->elems * px_dtype_bytes(plan->param_dtype);
  switch (plan->par.base_precision) {
    case PX_BASE_NF4: return px_k_nf4_storage_bytes(r->elems);
    case PX_BASE_FP8: return r->elems + sizeof(float); /* E4M3 codes, then the fp32 scale */
    default: return r->elems * px_dtype_bytes(plan->param_dtype);
  }
}

px_status px_param_frozen_layout(const px_plan *plan, int64_t stage, uint64_t *at, px_err *err) {
  const px_program *prog = &plan->programs[stage];
  uint64_t sum = 0;
  for (int32_t i = 0; i < prog->nfrozen; i++) {
    const px_param_ref *r = &prog->frozen[i];
    const px_slot *s = &plan->slots[r->slot];
    uint64_t b = frozen_storage_bytes(plan, r), want = px_lora_frozen_bytes(&plan->par, r->elems, px_lora_quantized(s->name));
    if (b != want)
      return px_err_set(err, PX_ERR_RUNTIME, "internal: frozen %s: %" PRIu64 " bytes stored, the plan's %" PRIu64, s->name,
                        b, want);
    if (at) at[i] = sum;
    sum += b;
  }
  if (sum != prog->frozen_bytes)
    return px_err_set(err, PX_ERR_RUNTIME, "internal: the frozen base's %" PRIu64 " bytes are not the plan's %" PRIu64,
                      sum, prog->frozen_bytes);
  return PX_OK;
}

px_status px_param_frozen_encode(const px_plan *plan, int64_t stage, const float *values, char *out, double sums[2],
                                 px_err *err) {
  const px_program *prog = &plan->programs[stage];
  uint64_t *at = px_calloc((size_t)prog->nfrozen + 1, sizeof *at, err);
  float *scratch = NULL, *back = NULL; /* (blocks of the largest weight) nf4's absmaxes; (largest) a weight decoded */
  px_status st = at ? px_param_frozen_layout(plan, stage, at, err) : PX_ERR_RUNTIME;
  uint64_t most = 0;
  for (int32_t i = 0; i < prog->nfrozen; i++) most = prog->frozen[i].elems > most ? prog->frozen[i].elems : most;
  if (!st && (!(scratch = px_calloc((size_t)(most / PX_NF4_BLOCK + 2), sizeof *scratch, err)) ||
              !(back = px_calloc((size_t)most + 1, sizeof *back, err))))
    st = PX_ERR_RUNTIME;
  if (sums) sums[0] = sums[1] = 0;
  for (int32_t i = 0; i < prog->nfrozen && !st; i++) {
    const px_param_ref *r = &prog->frozen[i];
    const float *x = values + r->offset;
    uint8_t *o = (uint8_t *)out + at[i];
    int base = px_lora_quantized(plan->slots[r->slot].name) ? plan->par.base_precision : PX_BASE_BF16;
    if (base == PX_BASE_NF4) {
      px_k_nf4_pack(x, r->elems, o, scratch);
    } else if (base == PX_BASE_FP8) { /* per-tensor scaling: amax onto E4M3's 448 */
      float scale = px_k_fp8_scale(px_k_fp8_amax(x, (int64_t)r->elems), PX_FP8_E4M3);
      px_k_fp8_quantize(o, x, (int64_t)r->elems, scale, PX_FP8_E4M3);
      memcpy(o + r->elems, &scale, sizeof scale);
    } else {
      px_dtype_from_fp32(o, plan->param_dtype, x, r->elems);
      continue;
    }
    if (!sums) continue;
    px_param_frozen_decode(base, o, r->elems, back);
    for (uint64_t j = 0; j < r->elems; j++) {
      double d = (double)back[j] - x[j];
      sums[0] += d * d, sums[1] += (double)x[j] * x[j];
    }
  }
  free(at), free(scratch), free(back);
  return st;
}

void px_param_frozen_decode(int base_precision, const void *storage, uint64_t n, float *out) {
  if (base_precision == PX_BASE_NF4) {
    px_k_nf4_unpack(storage, n, out);
  } else { /* fp8 */
    float scale;
    memcpy(&scale, (const uint8_t *)storage + n, sizeof scale);
    px_k_fp8_dequantize(out, storage, (int64_t)n, scale, PX_FP8_E4M3);
  }
}
