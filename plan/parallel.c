/* Parallel choices: defaults, validation with hints, JSON. */
#include "plan/parallel.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "core/json.h"
#include "plan/lora_targets.h"

PX_NAME_TABLE(px_schedule_names, PX_SCHED_COUNT, "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2");
PX_NAME_TABLE(px_recompute_names, PX_RECOMPUTE_COUNT, "none", "selective", "full", "op");
PX_NAME_TABLE(px_recompute_method_names, PX_RECOMPUTE_METHOD_COUNT, "uniform", "block", "every");
PX_NAME_TABLE(px_recompute_module_names, PX_RCM_BITS, "core_attn", "mla_up_proj", "moe_act", "layernorm", "mlp");
PX_NAME_TABLE(px_precision_names, PX_PREC_COUNT, "fp32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4");
PX_NAME_TABLE(px_overlap_names, PX_OVERLAP_BITS, "dp", "zero", "pp", "tp", "tp-bwd", "ep");
PX_NAME_TABLE(px_fp8_recipe_names, PX_FP8_RECIPE_COUNT, "delayed", "current", "blockwise");
PX_NAME_TABLE(px_fp8_base_names, PX_FP8_BASE_COUNT, "bf16", "fp32");
PX_NAME_TABLE(px_fp8_library_names, PX_FP8_LIB_COUNT, "te", "torchao");
PX_NAME_TABLE(px_attention_names, PX_ATTN_COUNT, "flash", "unfused", "flash2");
PX_NAME_TABLE(px_gelu_names, PX_GELU_COUNT, "separate", "fused");
PX_NAME_TABLE(px_elementwise_names, PX_ELEMWISE_COUNT, "fused", "eager", "rope-unfused");
PX_NAME_TABLE(px_grad_accum_names, PX_ACCUM_COUNT, "sharded", "full");
PX_NAME_TABLE(px_main_grad_names, PX_MAIN_GRAD_COUNT, "param", "fp32");
PX_NAME_TABLE(px_offload_names, PX_OFFLOAD_COUNT, "none", "cpu", "nvme");
PX_NAME_TABLE(px_cp_algo_names, PX_CP_ALGO_COUNT, "ring", "all-gather", "a2a");
PX_NAME_TABLE(px_finetune_names, PX_FT_COUNT, "none", "full", "lora", "qlora");
PX_NAME_TABLE(px_base_precision_names, PX_BASE_COUNT, "bf16", "fp8", "nf4");
PX_NAME_TABLE(px_moe_dispatch_names, PX_MOE_DISPATCH_COUNT, "a2a", "allgather", "deepep", "hybridep");
PX_NAME_TABLE(px_moe_buffers_names, PX_MOE_BUFFERS_COUNT, "busiest", "worst");
PX_NAME_TABLE(px_cuda_graph_names, PX_GRAPH_COUNT, "none", "layers", "full", "router");

bool px_graph_router(int cuda_graph) { return cuda_graph == PX_GRAPH_LAYERS || cuda_graph == PX_GRAPH_ROUTER; }

#define DEFAULT_BUCKET_BYTES ((uint64_t)25 << 20) /* PyTorch DDP's default bucket */

void px_parallel_unset(px_parallel *p) {
  memset(p, 0, sizeof *p);
  p->zero = p->sp = p->schedule = p->recompute = p->recompute_method = p->precision = p->attention = p->gelu = -1;
  p->elementwise = -1;
  p->overlap = -1;
  p->cp_algo = p->moe_dispatch = p->moe_buffers = p->fp8_recipe = p->fp8_base = p->fp8_params = -1;
  p->fp8_library = -1;
  p->fp8_attention = p->moe_router_padding = -1;
  p->mtp_layers = -1;
  p->cuda_graph = -1;
  p->prefetch = -1;
  p->reshard = p->grad_accum = p->main_grad = p->offload_opt = p->offload_params = -1;
  p->finetune = p->base_precision = -1;
  p->bf16_layers_start = p->bf16_layers_end = -1;
  p->offload_act_layers = -1;
}

void px_parallel_resolve(px_parallel *p, const px_model *m, const px_cluster *c) {
  int64_t gpus = c->gpus;
  if (p->tp <= 0) p->tp = 1;
  if (p->pp <= 0) p->pp = 1;
  if (p->cp <= 0) p->cp = 1;
  if (p->cp_algo < 0) p->cp_algo = PX_CP_RING;
  if (p->ep <= 0) p->ep = 1;
  if (p->etp <= 0) p->etp = p->tp; /* Megatron-Core's default: expert_tensor_parallel_size = tensor_model_parallel_size */
  /* a full-iteration graph runs HybridEP's sync-free exchange only (graph_full_dispatch) */
  if (p->moe_dispatch < 0) p->moe_dispatch = p->cuda_graph == PX_GRAPH_FULL ? PX_MOE_HYBRIDEP : PX_MOE_A2A;
  if (p->moe_router_padding < 0) p->moe_router_padding = 0;
  if (p->mtp_layers < 0) p->mtp_layers = 0;
  if (p->mtp_loss_scale <= 0 && p->mtp_layers > 0) p->mtp_loss_scale = PX_MTP_LOSS_WEIGHT;
  if (p->moe_buffers < 0) p->moe_buffers = PX_MOE_BUF_BUSIEST;
  if (p->moe_imbalance <= 0) p->moe_imbalance = 1.0;
  if (p->cuda_graph < 0) p->cuda_graph = PX_GRAPH_NONE;
  if (p->dp <= 0 && gpus > 0 && gpus % (p->tp * p->cp * p->pp) == 0) p->dp = gpus / (p->tp * p->cp * p->pp);
  if (p->zero < 0) p->zero = 0;
  if (p->sp < 0) p->sp = 0;
  if (p->mbs <= 0) p->mbs = 1;
  if (p->seq <= 0 && !(m->seq_from_positions && m->seq_len > PX_MODEL_HF_SEQ_MAX)) p->seq = m->seq_len;
  if (p->vpp <= 0) p->vpp = 1;
  if (p->schedule < 0) p->schedule = p->vpp > 1 ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B;
  if (p->gbs <= 0 && p->dp > 0) p->gbs = p->mbs * p->dp * (p->pp > 1 ? 4 * p->pp : 1);
  if (p->recompute < 0) p->recompute = p->recompute_modules ? PX_RECOMPUTE_SELECTIVE : PX_RECOMPUTE_NONE;
  if (p->recompute_method < 0) p->recompute_method = PX_RECOMPUTE_UNIFORM;
  if (p->precision < 0) p->precision = c->gpu.peak_flops[PX_DTYPE_BF16] > 0 ? PX_PREC_BF16 : PX_PREC_FP32;
  if (p->fp8_recipe < 0) p->fp8_recipe = PX_FP8_DELAYED;
  if (p->fp8_base < 0) p->fp8_base = PX_FP8_BASE_BF16;
  if (p->fp8_library < 0) p->fp8_library = PX_FP8_LIB_TE;
  if (p->fp8_params < 0) p->fp8_params = 0;
  if (p->fp8_attention < 0) p->fp8_attention = 0;
  if (p->bf16_layers_start < 0) p->bf16_layers_start = 0;
  if (p->bf16_layers_end < 0) p->bf16_layers_end = 0;
  if (p->offload_act_layers < 0) p->offload_act_layers = 0;
  if (p->attention < 0) p->attention = PX_ATTN_FLASH;
  if (p->gelu < 0) p->gelu = PX_GELU_SEPARATE;
  if (p->elementwise < 0) p->elementwise = PX_ELEMWISE_FUSED;
  if (p->bucket_bytes == 0) p->bucket_bytes = DEFAULT_BUCKET_BYTES;
  if (p->overlap < 0) p->overlap = PX_OVERLAP_DEFAULT;
  if (p->prefetch < 0) p->prefetch = 1;
  if (p->reshard < 0) p->reshard = 1;
  if (p->grad_accum < 0) p->grad_accum = p->zero >= 2 ? PX_ACCUM_SHARDED : PX_ACCUM_FULL;
  if (p->main_grad < 0) p->main_grad = PX_MAIN_GRAD_PARAM;
  if (p->offload_opt < 0) p->offload_opt = PX_OFFLOAD_NONE;
  if (p->offload_params < 0) p->offload_params = PX_OFFLOAD_NONE;
  if (p->finetune < 0) p->finetune = PX_FT_NONE;
  if (px_parallel_lora(p)) {
    if (p->lora_rank <= 0) p->lora_rank = PX_LORA_DEFAULT_RANK;
    if (p->lora_alpha <= 0) p->lora_alpha = 2.0 * (double)p->lora_rank;
    if (!p->lora_targets) p->lora_targets = PX_LORA_DEFAULT_TARGETS;
    if (p->base_precision < 0) p->base_precision = p->finetune == PX_FT_QLORA ? PX_BASE_NF4 : PX_BASE_BF16;
  }
}

px_attn_format px_parallel_attn_format(const px_parallel *p) {
  if (p->fp8_attention <= 0 || !px_precision_quantized(p->precision)) return PX_ATTN_BF16;
  return p->precision == PX_PREC_MXFP8 ? PX_ATTN_MXFP8 : PX_ATTN_FP8;
}

bool px_moe_dispatch_deepep(int dispatch) { return dispatch == PX_MOE_DEEPEP || dispatch == PX_MOE_HYBRIDEP; }

void px_parallel_keep_training(px_parallel *to, const px_parallel *from) {
  to->gbs = from->gbs, to->seq = from->seq, to->precision = from->precision, to->fp8_recipe = from->fp8_recipe;
  to->finetune = from->finetune, to->lora_rank = from->lora_rank, to->lora_alpha = from->lora_alpha;
  to->lora_targets = from->lora_targets, to->base_precision = from->base_precision;
  to->mtp_layers = from->mtp_layers, to->mtp_loss_scale = from->mtp_loss_scale;
}

bool px_parallel_lora(const px_parallel *p) { return p->finetune == PX_FT_LORA || p->finetune == PX_FT_QLORA; }

void px_parallel_fill_unset(px_parallel *p, const px_parallel *from) {
#define TAKE(f, unset) \
  if (p->f == (unset)) p->f = from->f;
  TAKE(tp, 0) TAKE(pp, 0) TAKE(dp, 0) TAKE(cp, 0) TAKE(cp_algo, -1) TAKE(ep, 0) TAKE(etp, 0) TAKE(moe_dispatch, -1) TAKE(moe_buffers, -1)
  TAKE(moe_router_padding, -1) TAKE(mtp_layers, -1) TAKE(mtp_loss_scale, 0.0)
  TAKE(cuda_graph, -1)
  TAKE(moe_imbalance, 0.0) TAKE(zero, -1) TAKE(sp, -1) TAKE(mbs, 0) TAKE(gbs, 0) TAKE(seq, 0)
  TAKE(schedule, -1) TAKE(vpp, 0) TAKE(recompute, -1) TAKE(recompute_method, -1) TAKE(recompute_layers, 0)
  TAKE(recompute_modules, 0)
  TAKE(precision, -1) TAKE(fp8_recipe, -1) TAKE(fp8_base, -1) TAKE(fp8_library, -1) TAKE(fp8_params, -1)
  TAKE(fp8_attention, -1) TAKE(attention, -1) TAKE(gelu, -1)
  TAKE(elementwise, -1)
  TAKE(bucket_bytes, 0u) TAKE(overlap, -1) TAKE(prefetch, -1) TAKE(reshard, -1) TAKE(grad_accum, -1)
  TAKE(main_grad, -1) TAKE(offload_opt, -1) TAKE(offload_params, -1) TAKE(shard_group, 0)
  TAKE(first_stage_layers, 0) TAKE(last_stage_layers, 0) TAKE(mb_group, 0)
  TAKE(bf16_layers_start, -1) TAKE(bf16_layers_end, -1) TAKE(offload_act_layers, -1)
  TAKE(finetune, -1) TAKE(lora_rank, 0) TAKE(lora_alpha, 0.0) TAKE(lora_targets, 0) TAKE(base_precision, -1)
#undef TAKE
  if (p->nchunk_layers == 0 && from->nchunk_layers > 0) {
    p->nchunk_layers = from->nchunk_layers;
    memcpy(p->chunk_layers, from->chunk_layers, sizeof p->chunk_layers);
  }
}

bool px_parallel_recompute_partial(const px_parallel *p) {
  return p->recompute == PX_RECOMPUTE_FULL && p->recompute_layers > 0 &&
         (p->recompute_method == PX_RECOMPUTE_BLOCK || p->recompute_method == PX_RECOMPUTE_EVERY);
}

int px_parallel_recompute_modules(const px_parallel *p) {
  if (p->recompute != PX_RECOMPUTE_SELECTIVE) return 0;
  return p->recompute_modules ? p->recompute_modules : PX_RCM_CORE_ATTN;
}

int px_parallel_heavy_modules(const px_model *m) {
  return (m->kv_lora_rank > 0 ? PX_RCM_MLA_UP_PROJ : 0) | (m->experts > 0 ? PX_RCM_MOE_ACT : 0);
}

bool px_parallel_layer_recomputed(const px_parallel *p, int64_t index) {
  if (p->recompute != PX_RECOMPUTE_FULL) return false;
  if (!px_parallel_recompute_partial(p)) return true;
  return p->recompute_method == PX_RECOMPUTE_EVERY ? (index + 1) % p->recompute_layers == 0 : index < p->recompute_layers;
}

bool px_parallel_reduce_per_mb(const px_parallel *p) { return p->zero >= 2 && p->grad_accum == PX_ACCUM_SHARDED; }

bool px_parallel_split_w(const px_parallel *p) { return p->schedule == PX_SCHED_ZB_H1 || p->schedule == PX_SCHED_ZB_H2; }

int64_t px_parallel_weight_dp(const px_parallel *p) { return p->dp * (p->cp > 0 ? p->cp : 1); }

int64_t px_parallel_expert_dp(const px_parallel *p) {
  int64_t tp = p->tp > 0 ? p->tp : 1, etp = p->etp > 0 ? p->etp : tp, ep = p->ep > 0 ? p->ep : 1;
  return tp * px_parallel_weight_dp(p) / (etp * ep);
}

int64_t px_cp_position(int64_t cp, int64_t cp_rank, int64_t s_local, int64_t i) {
  if (cp <= 1) return i;
  int64_t chunk = s_local / 2;
  return i < chunk ? cp_rank * chunk + i : (2 * cp - 1 - cp_rank) * chunk + (i - chunk);
}

int64_t px_parallel_shard_size(const px_parallel *p) {
  return p->shard_group > 0 ? p->shard_group : px_parallel_weight_dp(p);
}

bool px_parallel_hybrid(const px_parallel *p) { return p->shard_group > 0 && p->shard_group < px_parallel_weight_dp(p); }

/* "1, 2, 4, 8" : the divisors of n that are at most limit. */
static void divisor_hint(int64_t n, int64_t limit, char *buf, size_t cap) {
  buf[0] = '\0';
  size_t used = 0;
  for (int64_t d = 1; d <= n && d <= limit && used + 24 < cap; d++) {
    if (n % d) continue;
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", used ? ", " : "", (long long)d);
  }
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Whether a group of g micro-batches per chunk works for m micro-batches on
 * pp stages: Megatron-Core's checks (schedules.py,
 * forward_backward_pipelining_with_interleaving): pp <= g <= m, and the last
 * group (m mod g) empty or at least pp, else it has dependency bubbles. */
static bool mb_group_ok(int64_t g, int64_t m, int64_t pp) { return g >= pp && g <= m && (m % g == 0 || m % g >= pp); }

int64_t px_parallel_mb_group(const px_parallel *p) {
  int64_t m = px_parallel_microbatches(p), pp = p->pp;
  if (p->mb_group > 0) return p->mb_group;
  for (int64_t g = pp; g <= m; g++)
    if (mb_group_ok(g, m, pp)) return g;
  return 0;
}

/* Spreads n layers over a stage's v chunks (out[c pp + s]) evenly, as
 * Megatron-Core does (transformer_layer.py, get_transformer_layer_offset:
 * num_layers_in_first_pipeline_stage // vp_size layers in each of the first
 * stage's chunks). Megatron-Core also requires v to divide n; here the
 * chunks short of a layer are the ones nearest the embedding (first stage,
 * from chunk 0 on) or the head (last stage, from the last chunk back). */
static void spread_stage(int64_t n, int64_t s, int64_t pp, int64_t v, bool from_front, int64_t *out) {
  int64_t base = n / v, extra = n % v;
  for (int64_t c = 0; c < v; c++) {
    bool longer = from_front ? c >= v - extra : c < extra;
    out[c * pp + s] = base + (longer ? 1 : 0);
  }
}

/* "a or b": the totals of first + last stage layers nearest `want` that leave
 * the middle chunks whole (the middle takes per x k for a whole k >= 1). */
static void first_last_hint(int64_t L, int64_t fixed, int64_t per, int64_t want, char *buf, size_t cap) {
  int64_t k_lo = (L - fixed - want) / per, best[2] = {0, 0};
  buf[0] = '\0';
  for (int64_t k = k_lo - 1; k <= k_lo + 2; k++) { /* the two nearest, nearest first */
    int64_t total = L - fixed - per * k, d = total > want ? total - want : want - total;
    if (k < 1 || total < 1 || total == want) continue;
    if (!best[0] || d < (best[0] > want ? best[0] - want : want - best[0])) best[1] = best[0], best[0] = total;
    else if (!best[1] || d < (best[1] > want ? best[1] - want : want - best[1])) best[1] = total;
  }
  if (best[0]) snprintf(buf, cap, "%lld", (long long)best[0]);
  if (best[1]) snprintf(buf + strlen(buf), cap - strlen(buf), " or %lld", (long long)best[1]);
}

px_status px_parallel_chunk_layers(const px_parallel *p, int64_t L, int64_t *out, px_err *err) {
  int64_t pp = p->pp, v = p->vpp, V = pp * v;
  if (p->nchunk_layers > 0) {
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "`layers_per_chunk` gives every chunk's layers: drop `first_stage_layers` and "
                        "`last_stage_layers`");
    if (p->nchunk_layers != V)
      return px_err_set(err, PX_ERR_INPUT,
                        "`layers_per_chunk` has %d entries, but pp %lld x vpp %lld makes %lld chunks", p->nchunk_layers,
                        (long long)pp, (long long)v, (long long)V);
    int64_t sum = 0;
    for (int64_t i = 0; i < V; i++) sum += out[i] = p->chunk_layers[i];
    if (sum != L)
      return px_err_set(err, PX_ERR_INPUT, "`layers_per_chunk` adds up to %lld layers, the model has %lld",
                        (long long)sum, (long long)L);
  } else if (p->first_stage_layers > 0 || p->last_stage_layers > 0) {
    /* Megatron-Core's uneven pipeline: the stages whose count is not given
     * (the middle ones) share the rest evenly, every chunk alike. */
    int64_t F = p->first_stage_layers, Ls = p->last_stage_layers;
    if (pp < 2)
      return px_err_set(err, PX_ERR_INPUT, "`first_stage_layers` and `last_stage_layers` need pp > 1");
    int64_t mid = pp - (F > 0) - (Ls > 0), rest = L - F - Ls;
    if ((F > 0 && F < v) || (Ls > 0 && Ls < v))
      return px_err_set(err, PX_ERR_INPUT,
                        "the first and last stage need at least one layer in each of their %lld chunks (vpp)",
                        (long long)v);
    if (mid == 0 && rest != 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "`first_stage_layers` %lld + `last_stage_layers` %lld must be the model's %lld layers with pp 2",
                        (long long)F, (long long)Ls, (long long)L);
    if (mid > 0 && (rest < mid * v || rest % (mid * v))) {
      char hint[96];
      int64_t given = F + Ls;
      first_last_hint(L, 0, mid * v, given, hint, sizeof hint);
      return px_err_set(err, PX_ERR_INPUT,
                        "%lld layers are left for the %lld middle stage%s x %lld chunk%s, which do not split evenly "
                        "(hint: make %s %s)",
                        (long long)rest, (long long)mid, mid > 1 ? "s" : "", (long long)v, v > 1 ? "s" : "",
                        F > 0 && Ls > 0 ? "first + last stage layers" : F > 0 ? "`first_stage_layers`" : "`last_stage_layers`",
                        hint[0] ? hint : "smaller");
    }
    for (int64_t i = 0; i < V; i++) out[i] = mid > 0 ? rest / (mid * v) : 0;
    if (F > 0) spread_stage(F, 0, pp, v, true, out);
    if (Ls > 0) spread_stage(Ls, pp - 1, pp, v, false, out);
  } else {
    /* As evenly as possible; when the chunks do not divide the layers, the
     * ones short of a layer are the last, then the first, then inwards
     * alternately from both ends: the first and last stages also carry the
     * embedding and the loss (Llama 3 405B: 126 layers on 16 stages gives 7
     * on the first and last, 8 elsewhere; with vpp 2, chunk 0 of the first
     * stage and chunk 1 of the last hold 3, the others 4). */
    int64_t base = (L + V - 1) / V, deficit = base * V - L;
    for (int64_t i = 0; i < V; i++) out[i] = base;
    for (int64_t k = 0; k < deficit; k++) out[(k % 2 == 0) ? V - 1 - k / 2 : k / 2]--;
  }
  /* every chunk holds a layer, but an explicit list's first and last may hold only the embedding or the loss
   * (Megatron-Core's account_for_embedding/loss_in_pipeline_split: num_layers_to_build >= 0 there,
   * get_num_layers_to_build in megatron/core/transformer/transformer_block.py) */
  for (int64_t i = 0; i < V; i++)
    if (out[i] < 1 && !(p->nchunk_layers > 0 && (i == 0 || i == V - 1)))
      return px_err_set(err, PX_ERR_INPUT, "model chunk %lld (stage %lld, chunk %lld) would hold no layer%s",
                        (long long)i, (long long)(i % pp), (long long)(i / pp),
                        p->nchunk_layers > 0 ? " (only the first and the last chunk may: the embedding's, the loss's)" : "");
  return PX_OK;
}

px_status px_parallel_parse_chunk_list(const char *s, px_parallel *p, px_err *err) {
  int32_t n = 0;
  const char *q = s;
  while (*q) {
    char *end = (char *)q;
    long long x = isdigit((unsigned char)*q) ? strtoll(q, &end, 10) : 0; /* digits only: no sign, no spaces */
    if (end == q || x < 0 || x > 65535 || (*end && (*end != ',' || !end[1])))
      return px_err_set(err, PX_ERR_INPUT, "`layers_per_chunk`: '%.64s' is not a comma list of layer counts", s);
    if (n == PX_MAX_CHUNK_LIST)
      return px_err_set(err, PX_ERR_INPUT, "`layers_per_chunk`: more than %d chunks", PX_MAX_CHUNK_LIST);
    p->chunk_layers[n++] = (uint16_t)x;
    q = *end ? end + 1 : end;
  }
  if (!n) return px_err_set(err, PX_ERR_INPUT, "`layers_per_chunk`: empty list");
  p->nchunk_layers = n;
  return PX_OK;
}

/* ---- validation: a table of rules ---- */

/* What the rules read; a rule's predicate may note what its message says. */
typedef struct {
  const px_parallel *p;
  const px_model *m;
  const px_cluster *c;
  px_err sub;                  /* the layer split's own refusal (px_parallel_chunk_layers) */
  px_status sub_st;
} vctx;

/* One rule: when broken holds, px_parallel_validate refuses the choices with
 * msg, which names each field the user sets in backquotes (`tp`; the CLI
 * shows its flag) and each figure as {name} (rule_value). The rules run in
 * order and the first broken one refuses: a rule may assume every rule above
 * it holds. */
typedef struct {
  bool (*broken)(vctx *x);
  const char *msg;
} px_rule;

static int64_t tcp(const vctx *x) { return x->p->tp * x->p->cp * x->p->pp; } /* GPUs of one data-parallel replica */
static int64_t shardable(const px_model *m) { return gcd64(gcd64(m->heads, m->kv_heads), m->ffn_hidden); }
static bool interleaved(const px_parallel *p) { return p->schedule == PX_SCHED_INTERLEAVED; }
/* The micro-batch group px_parallel_mb_group would pick (0: none). */
static int64_t auto_group(const px_parallel *p) {
  int64_t mbs_n = px_parallel_microbatches(p);
  for (int64_t g = p->pp; g <= mbs_n; g++)
    if (mb_group_ok(g, mbs_n, p->pp)) return g;
  return 0;
}

static bool sizes_positive(vctx *x) { return x->p->tp < 1 || x->p->pp < 1 || x->p->cp < 1; }
static bool too_few_gpus(vctx *x) { return x->p->tp * x->p->cp > x->c->gpus || x->p->pp > x->c->gpus; }
static bool dp_none(vctx *x) { return x->p->dp < 1; }
static bool gpus_mismatch(vctx *x) { return tcp(x) * x->p->dp != x->c->gpus; }
static bool tp_heads(vctx *x) { return x->m->heads % x->p->tp != 0; }
static bool tp_kv_heads(vctx *x) { return x->m->kv_heads % x->p->tp != 0; }
static bool tp_ffn(vctx *x) { return x->m->ffn_hidden % x->p->tp != 0; }
static bool zero_range(vctx *x) { return x->p->zero < 0 || x->p->zero > 3; }
static bool zero_alone(vctx *x) { return x->p->zero > 0 && px_parallel_weight_dp(x->p) < 2; }
static bool shard_group_divides(vctx *x) {
  int64_t g = x->p->shard_group, wdp = px_parallel_weight_dp(x->p);
  return g < 0 || g > wdp || (g > 0 && wdp % g);
}
static bool hybrid_without_zero(vctx *x) { return px_parallel_hybrid(x->p) && x->p->zero < 1; }
static bool sp_without_tp(vctx *x) { return x->p->sp && x->p->tp < 2; }
static bool batch_positive(vctx *x) { return x->p->mbs < 1 || x->p->gbs < 1; }
static bool batch_divides(vctx *x) { return x->p->gbs % (x->p->mbs * x->p->dp) != 0; }
static bool recompute_layers_full(vctx *x) {
  return x->p->recompute_layers > 0 && x->p->recompute != PX_RECOMPUTE_FULL;
}
static bool recompute_uniform_group(vctx *x) {
  return x->p->recompute_method == PX_RECOMPUTE_UNIFORM && x->p->recompute_layers > 1;
}
static bool recompute_block_layers(vctx *x) {
  return (x->p->recompute_method == PX_RECOMPUTE_BLOCK || x->p->recompute_method == PX_RECOMPUTE_EVERY) &&
         x->p->recompute_layers < 1;
}
static bool recompute_layers_stage(vctx *x) {
  return x->p->pp > 0 && x->p->recompute_layers > x->m->layers / x->p->pp;
}
static bool rcm_selective(vctx *x) { return x->p->recompute_modules && x->p->recompute != PX_RECOMPUTE_SELECTIVE; }
static bool rcm_mla(vctx *x) { return (x->p->recompute_modules & PX_RCM_MLA_UP_PROJ) && x->m->kv_lora_rank == 0; }
static bool rcm_moe_act(vctx *x) { return (x->p->recompute_modules & PX_RCM_MOE_ACT) && x->m->experts == 0; }
static bool rcm_mlp(vctx *x) {
  if (!(x->p->recompute_modules & PX_RCM_MLP)) return false;
  for (int64_t l = 0; l < x->m->layers; l++)
    if (!px_model_layer_is_moe(x->m, l)) return false;
  return true;
}
static bool rcm_delayed(vctx *x) {
  return (x->p->recompute_modules & (PX_RCM_MOE_ACT | PX_RCM_LAYERNORM)) && x->p->precision == PX_PREC_FP8 &&
         x->p->fp8_recipe == PX_FP8_DELAYED;
}
/* torchtitan's per-op policy (`recompute` op, px_recompute): what it is planned on */
static bool rc_op(const vctx *x) { return x->p->recompute == PX_RECOMPUTE_OP; }
static bool rc_op_model(vctx *x) { return rc_op(x) && (x->m->experts > 0 || x->m->kv_lora_rank > 0); }
static bool rc_op_bias(vctx *x) { return rc_op(x) && (x->m->bias || x->m->qkv_bias); }
static bool rc_op_dropout(vctx *x) { return rc_op(x) && x->m->dropout > 0; }
static bool rc_op_unfused(vctx *x) { return rc_op(x) && !px_attention_fused(x->p->attention); }
static bool rc_op_cp(vctx *x) { return rc_op(x) && x->p->cp > 1 && x->p->cp_algo == PX_CP_A2A; }
static bool rc_op_lora(vctx *x) { return rc_op(x) && px_parallel_lora(x->p); }
static bool rc_op_delayed(vctx *x) {
  return rc_op(x) && x->p->precision == PX_PREC_FP8 && x->p->fp8_recipe == PX_FP8_DELAYED;
}
static bool seq_hf_long(vctx *x) {
  return x->p->seq < 1 && x->m->seq_from_positions && x->m->seq_len > PX_MODEL_HF_SEQ_MAX;
}
static bool seq_positive(vctx *x) { return x->p->seq < 1; }
static bool mb_tokens(vctx *x) { return x->p->mbs > PX_PLAN_MB_TOKENS_MAX / x->p->seq; }
static bool scores_size(vctx *x) {
  const px_parallel *p = x->p;
  return !px_attention_fused(p->attention) && (double)p->mbs * (double)x->m->heads * (double)p->seq * (double)p->seq > 0x1p56;
}
static bool seq_positions(vctx *x) { return x->m->position == PX_POS_LEARNED && x->p->seq > x->m->max_positions; }
static bool sp_seq(vctx *x) { return x->p->sp && x->p->seq % x->p->tp; }
static bool cp_algo_unset(vctx *x) { return x->p->cp > 1 && (x->p->cp_algo < 0 || x->p->cp_algo >= PX_CP_ALGO_COUNT); }
static bool cp_unfused(vctx *x) { return x->p->cp > 1 && !px_attention_fused(x->p->attention); }
static bool cp_chunks(vctx *x) { return x->p->cp > 1 && x->p->seq % (2 * x->p->cp); }
static bool cp_sp_seq(vctx *x) { return x->p->cp > 1 && x->p->sp && (x->p->seq / x->p->cp) % x->p->tp; }
static bool cp_a2a_heads(vctx *x) {
  const px_parallel *p = x->p;
  return p->cp > 1 && p->cp_algo == PX_CP_A2A && ((x->m->heads / p->tp) % p->cp || (x->m->kv_heads / p->tp) % p->cp);
}
static bool ep_positive(vctx *x) { return x->p->ep < 1; }
static bool ep_dense(vctx *x) { return x->m->experts == 0 && x->p->ep > 1; }
static bool etp_positive(vctx *x) { return x->p->etp < 1; }
static bool etp_dense(vctx *x) { return x->m->experts == 0 && x->p->etp != x->p->tp; }
/* Megatron-Core's parallel folding (parallel_state.initialize_model_parallel): the MoE layers' etp x ep x edp
 * grid covers the stage's tp x cp x dp ranks, so etp x ep must divide them (with etp = tp: ep divides cp x dp);
 * etp splits moe_ffn_hidden */
static bool ep_fold(vctx *x) {
  const px_parallel *p = x->p;
  return x->m->experts > 0 && ((p->tp * px_parallel_weight_dp(p)) % (p->etp * p->ep) || x->m->experts % p->ep);
}
static bool etp_ffn(vctx *x) { return x->m->experts > 0 && x->m->moe_ffn_hidden % x->p->etp; }
/* fc2's bias goes once onto each routed row, where the ETP ranks each hold a partial sum of it */
static bool etp_bias(vctx *x) { return px_model_moe_biases(x->m) && x->p->etp > 1; }
/* Megatron-Core's MoELayer raises "During training, performance may degrade if MoE and tensor parallelism are
 * enabled without also enabling sequence parallelism": its dispatchers take each TP rank's sequence shard */
static bool moe_sp(vctx *x) { return x->m->experts > 0 && x->p->tp > 1 && !x->p->sp; }
static bool moe_imbalance(vctx *x) { return x->m->experts > 0 && x->p->moe_imbalance < 1; }
static bool moe_dispatch_unset(vctx *x) {
  return x->m->experts > 0 && (x->p->moe_dispatch < 0 || x->p->moe_dispatch >= PX_MOE_DISPATCH_COUNT);
}
/* a full-iteration graph with experts: Megatron-Core's sync-free token exchange is HybridEP's with a static
 * per-rank budget (moe_expert_rank_capacity_factor, hybridep or ncclep only: transformer_config.py at d98e8a6) */
static bool graph_full_dispatch(vctx *x) {
  return x->p->cuda_graph == PX_GRAPH_FULL && x->m->experts > 0 && x->p->moe_dispatch != PX_MOE_HYBRIDEP;
}
/* router graphs without a router to capture */
static bool graph_router_dense(vctx *x) { return x->p->cuda_graph == PX_GRAPH_ROUTER && x->m->experts == 0; }
static bool moe_router_padding_range(vctx *x) { return x->p->moe_router_padding < 0 || x->p->moe_router_padding > 1; }
static bool moe_router_padding_moe(vctx *x) { return x->p->moe_router_padding > 0 && x->m->experts == 0; }
static bool moe_router_padding_precision(vctx *x) {
  return x->p->moe_router_padding > 0 && x->m->experts > 0 && !px_precision_quantized(x->p->precision);
}
static bool moe_router_padding_allgather(vctx *x) {
  return x->p->moe_router_padding > 0 && x->m->experts > 0 && x->p->moe_dispatch == PX_MOE_ALLGATHER;
}
static bool mtp_range(vctx *x) { return x->p->mtp_layers < 0 || x->p->mtp_layers > 1; }
static bool mtp_model(vctx *x) { return x->p->mtp_layers > x->m->mtp_layers; }
static bool mtp_model_kind(vctx *x) { /* the module as DeepSeek-V3 has it: RMSNorms, rotary positions, no dropout */
  return x->p->mtp_layers > 0 &&
         (x->m->position == PX_POS_LEARNED || x->m->norm != PX_NORM_RMSNORM || x->m->dropout > 0);
}
static bool mtp_scale_alone(vctx *x) { return x->p->mtp_loss_scale > 0 && x->p->mtp_layers <= 0; }
static bool mtp_lora(vctx *x) { return x->p->mtp_layers > 0 && px_parallel_lora(x->p); }
static bool mtp_zero3(vctx *x) { return x->p->mtp_layers > 0 && x->p->zero == 3; }
static bool moe_shard_group(vctx *x) { return x->m->experts > 0 && x->p->shard_group > 0; }
static bool window_cp(vctx *x) { return x->m->sliding_window > 0 && x->p->cp > 1; }
static bool mla_attention(vctx *x) {
  return x->m->kv_lora_rank > 0 && (x->p->cp > 1 || !px_attention_fused(x->p->attention));
}
static bool vpp_positive(vctx *x) { return x->p->vpp < 1; }
static bool chunks_layers(vctx *x) { /* an explicit list: its own rules (px_parallel_chunk_layers) */
  return x->p->nchunk_layers == 0 && x->p->pp * x->p->vpp > x->m->layers;
}
static bool passes_max(vctx *x) { return px_parallel_layer_passes(x->p, x->m->layers) > PX_PLAN_LAYER_PASSES_MAX; }
static bool interleaved_pp(vctx *x) { return interleaved(x->p) && x->p->pp < 2; }
static bool interleaved_vpp(vctx *x) { return interleaved(x->p) && x->p->vpp < 2; }
static bool interleaved_mbs(vctx *x) { return interleaved(x->p) && px_parallel_microbatches(x->p) < x->p->pp; }
static bool mb_group_bad(const px_parallel *p) {
  return interleaved(p) && p->mb_group > 0 && !mb_group_ok(p->mb_group, px_parallel_microbatches(p), p->pp);
}
static bool mb_group_range(vctx *x) {
  return mb_group_bad(x->p) && (x->p->mb_group < x->p->pp || x->p->mb_group > px_parallel_microbatches(x->p));
}
static bool mb_group_last(vctx *x) { return mb_group_bad(x->p); }
static bool vpp_not_interleaved(vctx *x) { return !interleaved(x->p) && x->p->vpp > 1; }
static bool split_w_pp(vctx *x) { return !interleaved(x->p) && px_parallel_split_w(x->p) && x->p->pp < 2; }
static bool mb_group_not_interleaved(vctx *x) { return !interleaved(x->p) && x->p->mb_group > 0; }
static bool layer_split(vctx *x) {
  int64_t *split = px_calloc((size_t)(x->p->pp * x->p->vpp), sizeof *split, &x->sub);
  x->sub_st = split ? px_parallel_chunk_layers(x->p, x->m->layers, split, &x->sub) : PX_ERR_RUNTIME;
  free(split);
  return x->sub_st != PX_OK;
}
static bool choices_unset(vctx *x) {
  const px_parallel *p = x->p;
  return p->schedule < 0 || p->schedule >= PX_SCHED_COUNT || p->recompute < 0 || p->recompute >= PX_RECOMPUTE_COUNT ||
         p->recompute_method < 0 || p->recompute_method >= PX_RECOMPUTE_METHOD_COUNT || p->precision < 0 ||
         p->precision >= PX_PREC_COUNT || p->attention < 0 || p->attention >= PX_ATTN_COUNT ||
         p->gelu < 0 || p->gelu >= PX_GELU_COUNT || p->elementwise < 0 || p->elementwise >= PX_ELEMWISE_COUNT;
}
static bool prefetch_range(vctx *x) { return x->p->prefetch < 0 || x->p->prefetch > 64; }
static bool zero_choices_unset(vctx *x) {
  const px_parallel *p = x->p;
  return p->reshard < 0 || p->reshard > 1 || p->grad_accum < 0 || p->grad_accum >= PX_ACCUM_COUNT ||
         p->main_grad < 0 || p->main_grad >= PX_MAIN_GRAD_COUNT;
}
static bool keep_gathered(vctx *x) { return !x->p->reshard && x->p->zero != 3; }
static bool accum_sharded(vctx *x) { return x->p->grad_accum == PX_ACCUM_SHARDED && x->p->zero < 2; }
static bool offload_unset(vctx *x) {
  const px_parallel *p = x->p;
  return p->offload_opt < 0 || p->offload_opt >= PX_OFFLOAD_COUNT || p->offload_params < 0 ||
         p->offload_params >= PX_OFFLOAD_COUNT;
}
static bool offload_zero(vctx *x) { return x->p->offload_opt && x->p->zero < 2; }
static bool offload_params(vctx *x) { return x->p->offload_params && (x->p->zero != 3 || !x->p->offload_opt); }
static bool offload_hybrid(vctx *x) { return x->p->offload_opt && px_parallel_hybrid(x->p); }
static bool offload_link(vctx *x) { return x->p->offload_opt && x->c->host_pcie_bytes_per_s <= 0; }
static bool offload_adam(vctx *x) { return x->p->offload_opt && x->c->host_cpu_adam_params_per_s <= 0; }
static bool offload_nvme(vctx *x) {
  const px_parallel *p = x->p;
  return (p->offload_opt == PX_OFFLOAD_NVME || p->offload_params == PX_OFFLOAD_NVME) &&
         (x->c->host_nvme_bytes_per_s <= 0 || x->c->host_nvme_bytes == 0);
}
static bool precision_peak(vctx *x) {
  return px_parallel_mixed(x->p) && x->c->gpu.peak_flops[px_parallel_compute_dtype(x->p)] <= 0;
}
static bool fp8_peak(vctx *x) { return x->p->precision == PX_PREC_FP8 && x->c->gpu.peak_flops[PX_DTYPE_FP8] <= 0; }
static bool block_recipe(vctx *x) { return px_precision_block_scaled(x->p->precision) && x->p->fp8_recipe > PX_FP8_DELAYED; }
static bool block_scaled(vctx *x) {
  return px_precision_block_scaled(x->p->precision) && !px_gpu_block_scaled(&x->c->gpu);
}
/* EP overlap (Megatron-Core's overlap_moe_expert_parallel_comm and its asserts, transformer_config.py at d98e8a6) */
static bool ep_overlap(const vctx *x) { return x->p->overlap > 0 && (x->p->overlap & PX_OVERLAP_EP); }
static bool ep_overlap_ep(vctx *x) { return ep_overlap(x) && (x->m->experts == 0 || x->p->ep < 2); }
static bool ep_overlap_dispatch(vctx *x) { return ep_overlap(x) && x->p->moe_dispatch == PX_MOE_ALLGATHER; }
static bool ep_overlap_recompute(vctx *x) { return ep_overlap(x) && x->p->recompute == PX_RECOMPUTE_FULL; }
static bool ep_overlap_schedule(vctx *x) {
  const px_parallel *p = x->p;
  return ep_overlap(x) && !(p->schedule == PX_SCHED_INTERLEAVED || (p->schedule == PX_SCHED_1F1B && p->pp == 1));
}
static bool ep_overlap_zero3(vctx *x) { return ep_overlap(x) && x->p->zero == 3; }
static bool ep_overlap_offload(vctx *x) { return ep_overlap(x) && x->p->offload_act_layers > 0; }
static bool fp8_params_range(vctx *x) { return x->p->fp8_params < 0 || x->p->fp8_params > 1; }
static bool fp8_params_precision(vctx *x) {
  return x->p->fp8_params && (!px_precision_quantized(x->p->precision) || x->p->fp8_base != PX_FP8_BASE_BF16);
}
/* mxfp8's primary weights are gathered in bf16 through the full gradient buffer (px_parallel_param_gather_bytes) */
static bool fp8_params_mxfp8_zero(vctx *x) {
  return x->p->fp8_params > 0 && x->p->precision == PX_PREC_MXFP8 && x->p->zero != 1;
}
/* Megatron-FSDP's block-scaled shards (a 1 x 32 or 16 x 16 block cut between ranks) are not modelled */
static bool fp8_params_nvfp4_zero3(vctx *x) {
  return x->p->fp8_params > 0 && x->p->precision == PX_PREC_NVFP4 && x->p->zero >= 3;
}
static bool fp8_params_offload(vctx *x) { return x->p->fp8_params && x->p->offload_params; }
static bool fp8_attention_range(vctx *x) { return x->p->fp8_attention < 0 || x->p->fp8_attention > 1; }
static bool fp8_attention_precision(vctx *x) {
  return x->p->fp8_attention > 0 && !px_precision_quantized(x->p->precision);
}
/* torchao's training recipes here: float8 tensorwise (current scaling) and MXFP8, linear layers only (torchtitan
 * v0.2.2's quantize converters are float8 and mx; NVFP4 came after it, on the main branch configured in Python:
 * torchtitan/components/quantization/nvfp4.py at b5bcd76). export --to torchtitan reads these rules. */
static bool torchao(const vctx *x) {
  return x->p->fp8_library == PX_FP8_LIB_TORCHAO && px_precision_quantized(x->p->precision);
}
static bool torchao_recipe(vctx *x) {
  return torchao(x) && x->p->precision == PX_PREC_FP8 && x->p->fp8_recipe != PX_FP8_CURRENT;
}
static bool torchao_nvfp4(vctx *x) { return torchao(x) && x->p->precision == PX_PREC_NVFP4; }
static bool torchao_attention(vctx *x) { return torchao(x) && x->p->fp8_attention > 0; }
static bool fp8_attention_fused(vctx *x) { return x->p->fp8_attention > 0 && x->p->attention != PX_ATTN_FLASH; }
/* FlashAttention-2 (flash-attn 2.x, PyTorch's SDPA flash backend) takes one head dim for queries, keys and values
 * and has no sink logits */
static bool flash2_head_dims(vctx *x) { return x->p->attention == PX_ATTN_FLASH2 && x->m->kv_lora_rank > 0; }
static bool flash2_sinks(vctx *x) { return x->p->attention == PX_ATTN_FLASH2 && x->m->attention_sinks; }
/* a GPU with measured fused-attention curves but none of FlashAttention-2's: costing it so would be a guess (one
 * without any costs every fused kernel as GEMMs alike) */
static bool flash2_measured(vctx *x) {
  const px_gpu *g = &x->c->gpu;
  return x->p->attention == PX_ATTN_FLASH2 && g->attention_len > 0 && !px_gpu_attn_kernel_measured(g, PX_ATTN_KERNEL_FLASH2);
}
static bool fp8_attention_blockwise(vctx *x) {
  return x->p->fp8_attention > 0 && x->p->precision == PX_PREC_FP8 && x->p->fp8_recipe == PX_FP8_BLOCKWISE;
}
static bool bf16_layers(const px_parallel *p) { return p->bf16_layers_start > 0 || p->bf16_layers_end > 0; }
static bool bf16_layers_precision(vctx *x) { return bf16_layers(x->p) && !px_precision_quantized(x->p->precision); }
/* Megatron-Core refuses first/last bf16 layers with delayed scaling, whose recipe spans every layer
 * (transformer_config.py: "Delayed scaling does not support first / last layer in BF16") */
static bool bf16_layers_delayed(vctx *x) {
  return bf16_layers(x->p) && x->p->precision == PX_PREC_FP8 && x->p->fp8_recipe == PX_FP8_DELAYED;
}
static bool bf16_layers_count(vctx *x) { return x->p->bf16_layers_start + x->p->bf16_layers_end > x->m->layers; }
/* ... and either count above a pipeline stage's layers (layers / pp) */
static bool bf16_layers_stage(vctx *x) {
  int64_t per = x->p->pp > 0 ? x->m->layers / x->p->pp : x->m->layers;
  return x->p->bf16_layers_start > per || x->p->bf16_layers_end > per;
}

/* activation offload as Megatron-Core allows it (transformer_config.py at d98e8a6: "CPU offloading can be done
 * only for layers less than num_layers", "no support for Pipeline parallelism with CPU offloading", "does not work
 * when activation recomputation is enabled", "CUDA graphs not supported with CPU offloading") */
static bool offload_act_count(vctx *x) {
  return x->p->offload_act_layers > 0 && x->p->offload_act_layers > x->m->layers - 2;
}
static bool offload_act_pp(vctx *x) { return x->p->offload_act_layers > 0 && (x->p->pp > 1 || x->p->vpp > 1); }
static bool offload_act_schedule(vctx *x) {
  return x->p->offload_act_layers > 0 && x->p->schedule != PX_SCHED_1F1B && x->p->pp == 1;
}
static bool offload_act_recompute(vctx *x) {
  return x->p->offload_act_layers > 0 && x->p->recompute != PX_RECOMPUTE_NONE;
}
static bool offload_act_graph(vctx *x) { return x->p->offload_act_layers > 0 && px_graph_router(x->p->cuda_graph); }
static bool offload_act_host(vctx *x) { return x->p->offload_act_layers > 0 && x->c->host_pcie_bytes_per_s <= 0; }

static bool lora_fields(vctx *x) {
  const px_parallel *p = x->p;
  return !px_parallel_lora(p) && (p->lora_rank > 0 || p->lora_alpha > 0 || p->lora_targets || p->base_precision >= 0);
}
static bool lora_unset(vctx *x) {
  const px_parallel *p = x->p;
  return px_parallel_lora(p) && (p->lora_rank < 1 || p->lora_rank > PX_LORA_RANK_MAX || p->base_precision < 0 ||
                                 p->base_precision >= PX_BASE_COUNT || !p->lora_targets);
}
static bool lora_rank_width(vctx *x) { return px_parallel_lora(x->p) && x->p->lora_rank > x->m->hidden; }
static bool qlora_base(vctx *x) { return x->p->finetune == PX_FT_QLORA && x->p->base_precision != PX_BASE_NF4; }
static bool lora_model(vctx *x) { return px_parallel_lora(x->p) && (x->m->experts > 0 || x->m->kv_lora_rank > 0); }
static bool lora_precision(vctx *x) {
  const px_parallel *p = x->p;
  return px_parallel_lora(p) && (p->precision == PX_PREC_FP8 || px_precision_block_scaled(p->precision));
}
static bool lora_zero3(vctx *x) { return px_parallel_lora(x->p) && x->p->zero == 3; }
static bool lora_split_w(vctx *x) { return px_parallel_lora(x->p) && px_parallel_split_w(x->p); }
static bool lora_swiglu_targets(vctx *x) {
  return px_parallel_lora(x->p) && x->m->mlp != PX_MLP_SWIGLU && (x->p->lora_targets & (PX_LORA_GATE | PX_LORA_UP));
}
static bool lora_overlap(vctx *x) {
  int t = x->p->lora_targets;
  return px_parallel_lora(x->p) && (((t & PX_LORA_QKV) && (t & (PX_LORA_Q | PX_LORA_K | PX_LORA_V))) ||
                                    ((t & PX_LORA_FC1) && (t & (PX_LORA_GATE | PX_LORA_UP))));
}
static bool lora_gelu_fused(vctx *x) {
  return px_parallel_lora(x->p) && x->p->gelu == PX_GELU_FUSED && x->m->mlp != PX_MLP_SWIGLU &&
         (x->p->lora_targets & PX_LORA_FC1);
}

static const px_rule rules[] = {
    {sizes_positive, "`tp`, `pp` and `cp` must be at least 1"},
    {too_few_gpus, "tp {tp} x cp {cp} x pp {pp} needs more than the {gpus} GPUs available"},
    {dp_none, "tp {tp} x cp {cp} x pp {pp} does not divide the {gpus} GPUs (hint: pick tp x cp x pp dividing {gpus})"},
    {gpus_mismatch, "tp {tp} x cp {cp} x pp {pp} x dp {dp} = {replicas_gpus}, but there are {gpus} GPUs"},
    {tp_heads, "tp {tp} does not divide the {heads} attention heads (valid tp: {tp_choices})"},
    {tp_kv_heads, "tp {tp} does not divide the {kv_heads} key/value heads (valid tp: {tp_choices})"},
    {tp_ffn, "tp {tp} does not divide ffn_hidden {ffn_hidden} (valid tp: {tp_choices})"},
    {zero_range, "`zero` must be 0, 1, 2 or 3"},
    {zero_alone, "ZeRO-{zero} shards across data-parallel ranks but dp{x_cp} is 1 (hint: `zero` 0)"},
    {shard_group_divides, "`shard_group` {shard_group} does not divide {dp_x_cp} {wdp} (valid shard groups: {wdp_choices})"},
    {hybrid_without_zero, "`shard_group` {shard_group} shards model states within groups of DP ranks, which needs ZeRO "
                          "(hint: `zero` 3, or drop `shard_group`)"},
    {sp_without_tp, "sequence parallelism needs tp > 1 (hint: drop `sp` or raise `tp`)"},
    {batch_positive, "`mbs` and `gbs` must be at least 1"},
    {batch_divides, "global batch {gbs} is not divisible by mbs {mbs} x dp {dp} (hint: use a multiple of {mbs_dp})"},
    {recompute_layers_full, "`recompute_layers` {recompute_layers} counts layers of full recomputation: it needs "
                            "`recompute` full"},
    {recompute_uniform_group, "`recompute_method` uniform with `recompute_layers` {recompute_layers}: groups of more "
                              "than one layer, recomputed together before the last one's backward, are not planned "
                              "(hint: `recompute_method` block, or `recompute_layers` 1, which is what full alone is)"},
    {recompute_block_layers, "`recompute_method` {recompute_method} needs `recompute_layers`: the layers of each "
                             "model chunk to recompute (block), or their period (every)"},
    {recompute_layers_stage, "`recompute_layers` {recompute_layers} is more than the {stage_layers} layers of a "
                             "pipeline stage (layers / pp; Megatron-Core refuses it too)"},
    {rcm_selective, "`recompute_modules` names what selective recomputation redoes: it needs `recompute` selective, "
                    "not {recompute} (hint: drop `recompute`)"},
    {rcm_mla, "`recompute_modules` mla_up_proj redoes multi-head latent attention's up projections: {model} has "
              "none (Megatron-Core refuses it too)"},
    {rcm_moe_act, "`recompute_modules` moe_act redoes the experts' activation: {model} is a dense model"},
    {rcm_mlp, "`recompute_modules` mlp redoes a dense layer's MLP: every layer of {model} is a MoE layer (hint: "
              "moe_act)"},
    {rcm_delayed, "`recompute_modules` moe_act or layernorm with fp8's delayed scaling: Megatron-Core refuses it "
                  "(hint: `fp8_recipe` current)"},
    {rc_op_model, "`recompute` op (torchtitan's per-op policy) is planned on dense layers: {model}'s experts or "
                  "latent attention are not (hint: `recompute` full)"},
    {rc_op_bias, "`recompute` op on {model}, whose linear layers have biases: PyTorch runs them as addmm, which "
                 "torchtitan's per-op policy neither counts nor saves; not planned (hint: `recompute` full)"},
    {rc_op_dropout, "`recompute` op on {model}, which has dropout: torchtitan's models have none, and its masks' "
                    "recomputation is not planned (hint: `recompute` full)"},
    {rc_op_unfused, "`recompute` op saves the fused attention's outputs: the unfused attention's are not planned "
                    "(hint: `attention` flash)"},
    {rc_op_cp, "`recompute` op with `cp_algo` a2a: the all-to-alls of the recomputed heads are not planned, nor "
               "run by torchtitan, whose context parallelism all-gathers or rotates the keys (hint: `cp_algo` "
               "all-gather or ring)"},
    {rc_op_lora, "`recompute` op with `finetune` {finetune}: the adapters' recomputation is not planned (hint: "
                 "`recompute` full or none)"},
    {rc_op_delayed, "`recompute` op with fp8's delayed scaling: torchtitan's float8 scales from the current amax "
                    "(hint: `fp8_recipe` current)"},
    {seq_hf_long, "`seq` is not set and the model's Hugging Face config gives only max_position_embeddings "
                  "{model_seq}, the longest context it may see, above the {hf_seq_max} tokens taken as a training "
                  "length without asking (hint: set `seq`, e.g. 4096 or 8192)"},
    {seq_positive, "`seq` must be at least 1"},
    {mb_tokens, "mbs {mbs} x seq {seq} is more than the {mb_tokens_max} tokens a micro-batch may have (its tensors' "
                "sizes must stay exact in 64 bits)"},
    {scores_size, "the unfused attention's scores, mbs {mbs} x {heads} heads x seq {seq} x seq, are more than the 2^56 "
                  "elements a tensor may have (hint: `attention` flash)"},
    {seq_positions, "`seq` {seq} exceeds the model's {max_positions} learned positions"},
    {sp_seq, "sequence parallelism needs tp {tp} to divide the sequence length {seq}"},
    {cp_algo_unset, "`cp_algo` is not set"},
    {cp_unfused, "context parallelism runs the fused attention block by block; the unfused attention's (S, S) "
                 "tensors are not split (hint: `attention` flash)"},
    {cp_chunks, "cp {cp} cuts the sequence into 2 x cp = {cp_chunks} chunks (two per rank, for the causal load "
                "balance), which must divide `seq` {seq}"},
    {cp_sp_seq, "sequence parallelism needs tp {tp} to divide each CP rank's {seq_cp} tokens (seq / cp)"},
    {cp_a2a_heads, "`cp_algo` a2a gives each CP rank 1/cp of the heads: cp {cp} must divide the {tp_heads} query and "
                   "{tp_kv_heads} key/value heads per TP rank (valid cp: {cp_choices}; hint: `cp_algo` ring)"},
    {ep_positive, "`ep` must be at least 1"},
    {ep_dense, "`ep` {ep} splits experts, but {model} is a dense model (hint: drop `ep`)"},
    {etp_positive, "`etp` must be at least 1"},
    {etp_dense, "`etp` {etp} splits experts, but {model} is a dense model (hint: drop `etp`)"},
    {ep_fold, "`ep` {ep} `etp` {etp}: ep must divide the {experts} experts, and etp x ep = {etp} x {ep} the tp x cp x "
              "dp = {tp_x_wdp} ranks the expert grid is folded over (valid ep with this etp: {ep_choices})"},
    {etp_ffn, "`etp` {etp} must divide the {moe_ffn_hidden} expert FFN width (hint: `etp` 1)"},
    {etp_bias, "`etp` {etp} with the experts' biases (the model's `bias`): fc2's bias is not planned over partial sums "
               "(hint: `etp` 1)"},
    {moe_sp, "experts with `tp` {tp} need sequence parallelism, as Megatron-Core requires: the token dispatchers "
             "route each TP rank's sequence shard (hint: `sp`)"},
    {moe_imbalance, "`moe_imbalance` {moe_imbalance}: the busiest rank's tokens over the mean is at least 1"},
    {moe_dispatch_unset, "`moe_dispatch` is not set"},
    {graph_full_dispatch, "`cuda_graph` full with `moe_dispatch` {moe_dispatch}: a full-iteration graph cannot wait "
                          "for the tokens' counts on the host, and Megatron-Core's sync-free exchange is HybridEP's, "
                          "its per-rank budget static (moe_expert_rank_capacity_factor) (hint: `moe_dispatch` "
                          "hybridep, or `cuda_graph` layers)"},
    {graph_router_dense, "`cuda_graph` router captures a MoE layer's router: the model has no experts (hint: "
                         "`cuda_graph` layers or none)"},
    {moe_router_padding_range, "`moe_router_padding` is not set"},
    {moe_router_padding_moe, "`moe_router_padding` pads the tokens a router sends each expert, but {model} is a dense "
                             "model (hint: drop `moe_router_padding`)"},
    {moe_router_padding_precision, "`moe_router_padding` pads each expert's tokens to the quantized GEMMs' alignment "
                                   "(Megatron-Core refuses it without an fp8 or fp4 recipe): it needs `precision` fp8, "
                                   "mxfp8 or nvfp4, not {precision}"},
    {moe_router_padding_allgather, "`moe_router_padding` with `moe_dispatch` allgather: Megatron-Core's allgather "
                                   "dispatcher does not take the padded routing (hint: `moe_dispatch` a2a)"},
    {mtp_range, "`mtp_layers` {mtp_layers}: one multi-token prediction module at most is planned (DeepSeek-V3's; "
                "hint: `mtp_layers` 0 or 1)"},
    {mtp_model, "`mtp_layers` {mtp_layers} trains more multi-token prediction modules than {model} has: {model_mtp} "
                "(the model file's mtp_layers, a Hugging Face config's num_nextn_predict_layers)"},
    {mtp_model_kind, "`mtp_layers` with {model}: the MTP module is planned as DeepSeek-V3's, with RMSNorms, rotary "
                     "positions and no dropout (hint: drop `mtp_layers`)"},
    {mtp_scale_alone, "`mtp_loss_scale` {mtp_loss_scale} weighs the loss of an MTP module, and the plan trains none "
                      "(hint: `mtp_layers` 1, or drop `mtp_loss_scale`)"},
    {mtp_lora, "`mtp_layers` with `finetune` lora: adapters on the MTP module are not planned (hint: drop "
               "`mtp_layers`)"},
    {mtp_zero3, "`mtp_layers` with `zero` 3: the MTP module reads the output layer's parameters (and with `pp` 1 "
                "the embedding's), which ZeRO-3 gathers for their own blocks only; gathering them again for the "
                "module is not planned (hint: `zero` 1 or 2)"},
    {moe_shard_group, "`shard_group` with experts: hybrid sharding of expert states is not modelled (hint: drop "
                      "`shard_group`)"},
    {window_cp, "`cp` {cp} with {model}'s sliding-window attention: the CP ranks' share of a windowed causal "
                "attention is not modelled (hint: `cp` 1)"},
    {mla_attention, "{model}: multi-head latent attention is planned with the fused attention and no context "
                    "parallelism (hint: `attention` flash, `cp` 1)"},
    {vpp_positive, "`vpp` must be at least 1"},
    {chunks_layers, "pp {pp} x vpp {vpp} stages is more than the {layers} layers"},
    {passes_max, "gbs {gbs} makes {microbatches} micro-batches a step (gbs / (mbs {mbs} x dp {dp})), each through "
                 "{layers} layers and {chunks} pipeline chunks: {passes} layer passes, more than the {passes_max} a "
                 "plan may have (up to about 1 GiB and 20 s to compile and simulate at the limit; hint: gbs "
                 "{passes_gbs} or less, or a larger mbs)"},
    {interleaved_pp, "the interleaved schedule needs pp > 1 (hint: `schedule` 1f1b)"},
    {interleaved_vpp, "the interleaved schedule needs `vpp` 2 or more model chunks per rank"},
    {interleaved_mbs, "the interleaved schedule needs at least pp {pp} micro-batches, there are {microbatches} "
                      "(hint: `gbs` {pp_gbs})"},
    {mb_group_range, "`microbatch_group` {mb_group} must be from pp {pp} to the {microbatches} micro-batches (hint: "
                     "{auto_group})"},
    {mb_group_last, "`microbatch_group` {mb_group} leaves a last group of {mb_group_rest} micro-batches, fewer than pp "
                    "{pp}: it would stall the pipeline (Megatron-Core refuses it too; hint: `microbatch_group` "
                    "{auto_group})"},
    {vpp_not_interleaved, "`vpp` {vpp} needs `schedule` interleaved"},
    {split_w_pp, "`schedule` {schedule} needs pp > 1: it fills pipeline bubbles (hint: `schedule` 1f1b)"},
    {mb_group_not_interleaved, "`microbatch_group` groups micro-batches per chunk: it needs `schedule` interleaved"},
    {layer_split, "{layer_split}"},
    {choices_unset, "schedule, recompute, precision, attention, gelu or elementwise is not set"},
    {prefetch_range, "`prefetch` must be 0 to 64 units"},
    {zero_choices_unset, "reshard, grad-accum or main-grad is not set"},
    {keep_gathered, "`reshard_after_forward` false keeps ZeRO-3's gathered parameters; ZeRO-{zero} has none (hint: "
                    "`zero` 3)"},
    {accum_sharded, "`grad_accum` sharded needs ZeRO-2 or 3: ZeRO-{zero} keeps the full gradient (hint: `grad_accum` "
                    "full)"},
    {offload_unset, "offload-optimizer or offload-params is not set"},
    {offload_zero, "`offload_optimizer` streams each reduced gradient shard to the host: it needs ZeRO-2 or 3, not "
                   "ZeRO-{zero} (hint: `zero` 2)"},
    {offload_params, "`offload_params` keeps ZeRO-3's parameter shard off the GPU, updated where the optimizer runs: "
                     "it needs `zero` 3 and `offload_optimizer` (hint: `zero` 3 `offload_optimizer` "
                     "{offload_params})"},
    {offload_hybrid, "`offload_optimizer` with `shard_group` {shard_group}: offloading hybrid-sharded states is not "
                     "modelled (hint: drop one of them)"},
    {offload_link, "{cluster}: offload copies the optimizer's shards over the host link: the cluster has no "
                   "host.pcie_gb_per_s (add it to the cluster file)"},
    {offload_adam, "{cluster}: offload steps the optimizer on the host CPU: the cluster has no "
                   "host.cpu_adam_gparams_per_s, its AdamW rate (measure it and add it to the cluster file)"},
    {offload_nvme, "{cluster}: NVMe offload needs the cluster's host.nvme_gb_per_s and host.nvme_tb (add them to the "
                   "cluster file)"},
    {precision_peak, "{cluster}: the {gpu} has no {precision} peak (hint: `precision` fp32)"},
    {fp8_peak, "{cluster}: the {gpu} has no fp8 tensor cores (gpu.peak_tflops.fp8) (hint: `precision` bf16)"},
    {block_scaled, "{cluster}: the {gpu} has no block-scaled tensor cores for {precision} (MXFP8 and NVFP4 GEMMs are "
                   "Blackwell's: a GPU with gpu.peak_tflops.fp4) (hint: `precision` fp8)"},
    {block_recipe, "`fp8_recipe` chooses fp8's scaling; {precision} scales its own blocks (hint: drop `fp8_recipe`)"},
    {ep_overlap_ep, "`overlap` ep hides a MoE layer's token exchanges over expert parallelism: it needs a model with "
                    "experts and `ep` 2 or more (Megatron-Core refuses it otherwise)"},
    {ep_overlap_dispatch, "`overlap` ep overlaps the all-to-all or DeepEP dispatcher's exchanges, not `moe_dispatch` "
                          "allgather (Megatron-Core: alltoall or flex) (hint: `moe_dispatch` a2a)"},
    {ep_overlap_recompute, "`overlap` ep with `recompute` full: Megatron-Core refuses full recomputation with EP "
                           "overlap (hint: `recompute` none or selective)"},
    {ep_overlap_schedule, "`overlap` ep merges each steady-state forward with a backward: it needs `schedule` "
                          "interleaved, or 1f1b with pp 1 (Megatron-Core: virtual pipeline stages when pp > 1), "
                          "not `schedule` {schedule} at pp {pp}"},
    {ep_overlap_zero3, "`overlap` ep with `zero` 3: ZeRO-3's gathers around merged forward and backward layers are "
                       "not planned (hint: `zero` 1 or 2)"},
    {ep_overlap_offload, "`overlap` ep with `offload_activations`: not planned (hint: drop one)"},
    {fp8_params_range, "`fp8_params` is not set"},
    {fp8_params_precision, "`fp8_params` holds the quantized GEMMs' weights in their format in place of their bf16 "
                           "copy: it needs `precision` fp8, mxfp8 or nvfp4 with `fp8_base` bf16"},
    {fp8_params_mxfp8_zero, "`fp8_params` with `precision` mxfp8 is Megatron's MXFP8 param gather: the weights are "
                            "gathered in bf16 into the gradient buffer and cast to MXFP8 each step, which needs the "
                            "distributed optimizer's full gradient buffer (hint: `zero` 1)"},
    {fp8_params_nvfp4_zero3, "`fp8_params` with `precision` nvfp4 and `zero` 3: sharded NVFP4 weights are not "
                             "modelled (hint: `zero` 1 or 2)"},
    {fp8_params_offload, "`fp8_params` with `offload_params`: offloaded fp8 weights are not modelled (hint: drop one)"},
    {fp8_attention_range, "`fp8_attention` is not set"},
    {fp8_attention_precision, "`fp8_attention` runs the fused attention in fp8 beside the quantized GEMMs (Megatron-Core "
                              "hands it to the fp8 or fp4 recipe: without one it does nothing): it needs `precision` "
                              "fp8, mxfp8 or nvfp4, not {precision}"},
    {torchao_recipe, "`fp8_library` torchao scales fp8 per tensor from the current amax (its tensorwise recipe), not "
                     "`fp8_recipe` {fp8_recipe} (hint: `fp8_recipe` current)"},
    {torchao_nvfp4, "`fp8_library` torchao: NVFP4's training recipe (16 x 16 weight blocks, random Hadamard transforms, "
                    "stochastic rounding) is Transformer Engine's (hint: `fp8_library` te, or `precision` mxfp8)"},
    {torchao_attention, "`fp8_library` torchao quantizes the linear layers, not the attention (hint: drop "
                        "`fp8_attention`, or `fp8_library` te)"},
    {fp8_attention_fused, "`fp8_attention` is cuDNN's fused FP8 attention: it needs `attention` flash (unfused and "
                          "FlashAttention-2's flash2 have no fp8 kernel)"},
    {flash2_head_dims, "`attention` flash2: FlashAttention-2 takes one head dim for queries, keys and values, and "
                       "{model}'s multi-head latent attention has two (hint: `attention` flash)"},
    {flash2_sinks, "`attention` flash2: FlashAttention-2 has no attention sinks, which {model} has (hint: `attention` "
                   "flash)"},
    {flash2_measured, "`attention` flash2: {gpu} has no measured FlashAttention-2 curves to cost it by "
                      "(gpu.attention_flash2; hint: `attention` flash)"},
    {fp8_attention_blockwise, "`fp8_attention` with `fp8_recipe` blockwise: Transformer Engine runs no fused FP8 "
                              "attention under its block-scaling recipe (hint: `fp8_recipe` current)"},
    {bf16_layers_precision, "`bf16_layers_start` and `bf16_layers_end` keep layers' GEMMs out of a quantized precision: "
                            "they need `precision` fp8, mxfp8 or nvfp4, not {precision}"},
    {bf16_layers_delayed, "`bf16_layers_start` and `bf16_layers_end` with fp8's delayed scaling: its amax histories "
                          "span every layer, and Megatron-Core refuses first and last layers in bf16 with it (hint: "
                          "`fp8_recipe` current)"},
    {bf16_layers_count, "`bf16_layers_start` {bf16_layers_start} + `bf16_layers_end` {bf16_layers_end} is more than "
                        "the model's {layers} layers"},
    {bf16_layers_stage, "`bf16_layers_start` {bf16_layers_start} or `bf16_layers_end` {bf16_layers_end} is more than "
                        "a pipeline stage's {stage_layers} layers (layers / pp), which Megatron-Core refuses"},
    {offload_act_count, "`offload_activations` {offload_act_layers} must leave two of the model's {layers} layers' "
                        "activations on the GPU, for the copies to overlap the layers (Transformer Engine: "
                        "model_layers - 2 or fewer)"},
    {offload_act_pp, "`offload_activations` with pp {pp} (vpp {vpp}): Megatron-Core offloads activations without "
                     "pipeline parallelism only (hint: `pp` 1, or `recompute` full)"},
    {offload_act_schedule, "`offload_activations` plans each micro-batch's forward then its backward (`schedule` "
                           "1f1b), not `schedule` {schedule}"},
    {offload_act_recompute, "`offload_activations` with `recompute` {recompute}: Megatron-Core refuses activation "
                            "offload with recomputation (hint: one of them)"},
    {offload_act_graph, "`offload_activations` with `cuda_graph` {cuda_graph}: Megatron-Core refuses CUDA graphs of "
                        "layers with activation offload (hint: `cuda_graph` none or full)"},
    {offload_act_host, "{cluster}: `offload_activations` copies over the host link: the cluster has no "
                       "host.pcie_gb_per_s (add it to the cluster file)"},
    {lora_fields, "`lora_rank`, `lora_alpha`, `lora_targets` and `base_precision` describe adapters on a frozen base: "
                  "they need `finetune` lora or qlora"},
    {lora_unset, "lora_rank, lora_targets or base_precision is not set"},
    {lora_rank_width, "`lora_rank` {lora_rank} is more than the model's hidden size {hidden}: a low-rank adapter's "
                      "rank is below its layers' widths (hint: 8 to 64)"},
    {qlora_base, "`finetune` qlora is LoRA on an NF4 base: `base_precision` must be nf4 (hint: `finetune` lora for a "
                 "{base_precision} base)"},
    {lora_model, "`finetune` {finetune} on {model}: adapters on experts and latent attention are not planned (hint: "
                 "`finetune` full)"},
    {lora_precision, "`finetune` {finetune} runs the adapters and the frozen base's GEMMs in the compute dtype "
                     "(bf16, fp16 or fp32; an fp8 or nf4 base dequantised into it), not `precision` {precision} "
                     "(hint: `precision` bf16; `base_precision` fp8 stores the frozen weights in fp8)"},
    {lora_zero3, "`finetune` {finetune} with `zero` 3: ZeRO shards the adapters' states only (the frozen base is split "
                 "by tp and pp), and gathering adapters per layer is not planned (hint: `zero` 1 or 2)"},
    {lora_split_w, "`schedule` {schedule} splits weight gradients off the backward, which the adapters' are not "
                   "planned for (hint: `schedule` 1f1b or interleaved)"},
    {lora_swiglu_targets, "`lora_targets` gate and up are a SwiGLU MLP's; {model}'s first MLP linear is fc1"},
    {lora_overlap, "`lora_targets` names a fused projection and its parts (qkv with q, k or v; fc1 with gate or up): "
                   "pick one"},
    {lora_gelu_fused, "`gelu` fused writes gelu(x W^T) from the fc1 GEMM's epilogue, before an fc1 adapter could add "
                      "its output (hint: `gelu` separate)"},
};

/* The value of a rule message's {name}, as text. */
static void rule_value(const vctx *x, const char *name, char *v, size_t cap) {
  const px_parallel *p = x->p;
  const px_model *m = x->m;
  int64_t wdp = px_parallel_weight_dp(p), tp = p->tp > 0 ? p->tp : 1, cp = p->cp > 0 ? p->cp : 1;
  int64_t etp = p->etp > 0 ? p->etp : 1, mbs_n = px_parallel_microbatches(p), per = m->layers + p->pp * p->vpp;
  const struct {
    const char *name;
    int64_t v;
  } ints[] = {{"tp", p->tp}, {"pp", p->pp}, {"cp", p->cp}, {"dp", p->dp}, {"ep", p->ep}, {"etp", p->etp},
              {"zero", p->zero}, {"mbs", p->mbs}, {"gbs", p->gbs}, {"seq", p->seq}, {"vpp", p->vpp},
              {"shard_group", p->shard_group}, {"mb_group", p->mb_group}, {"gpus", x->c->gpus},
              {"heads", m->heads}, {"kv_heads", m->kv_heads}, {"ffn_hidden", m->ffn_hidden}, {"layers", m->layers},
              {"recompute_layers", p->recompute_layers}, {"stage_layers", p->pp > 0 ? m->layers / p->pp : 0},
              {"model_seq", m->seq_len}, {"hf_seq_max", PX_MODEL_HF_SEQ_MAX}, {"experts", m->experts}, {"moe_ffn_hidden", m->moe_ffn_hidden}, {"max_positions", m->max_positions},
              {"wdp", wdp}, {"replicas_gpus", tcp(x) * p->dp}, {"mbs_dp", p->mbs * p->dp},
              {"mb_tokens_max", PX_PLAN_MB_TOKENS_MAX}, {"cp_chunks", 2 * p->cp}, {"seq_cp", p->seq / cp},
              {"tp_heads", m->heads / tp}, {"tp_kv_heads", m->kv_heads / tp}, {"tp_x_wdp", p->tp * wdp},
              {"chunks", p->pp * p->vpp},
              {"microbatches", mbs_n}, {"passes", px_parallel_layer_passes(p, m->layers)},
              {"passes_max", PX_PLAN_LAYER_PASSES_MAX},
              {"passes_gbs", per > 0 ? PX_PLAN_LAYER_PASSES_MAX / per * p->mbs * p->dp : 0},
              {"pp_gbs", p->pp * p->mbs * p->dp}, {"auto_group", auto_group(p)},
              {"mb_group_rest", p->mb_group > 0 ? mbs_n % p->mb_group : 0}, {"hidden", m->hidden},
              {"lora_rank", p->lora_rank}, {"bf16_layers_start", p->bf16_layers_start},
              {"bf16_layers_end", p->bf16_layers_end}, {"offload_act_layers", p->offload_act_layers},
              {"mtp_layers", p->mtp_layers}, {"model_mtp", m->mtp_layers}};
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
    if (!strcmp(name, ints[i].name)) {
      snprintf(v, cap, "%lld", (long long)ints[i].v);
      return;
    }
  const char *s = "";
  if (!strcmp(name, "tp_choices"))
    divisor_hint(shardable(m), x->c->gpus, v, cap);
  else if (!strcmp(name, "wdp_choices"))
    divisor_hint(wdp, wdp, v, cap);
  else if (!strcmp(name, "cp_choices"))
    divisor_hint(gcd64(m->heads / tp, m->kv_heads / tp), m->heads / tp, v, cap);
  else if (!strcmp(name, "ep_choices"))
    divisor_hint(gcd64(p->tp * wdp / etp, m->experts), p->tp * wdp / etp, v, cap);
  else if (!strcmp(name, "moe_imbalance"))
    snprintf(v, cap, "%g", p->moe_imbalance);
  else if (!strcmp(name, "mtp_loss_scale"))
    snprintf(v, cap, "%g", p->mtp_loss_scale);
  if (strstr(name, "_choices") || !strcmp(name, "moe_imbalance") || !strcmp(name, "mtp_loss_scale")) return;
  if (!strcmp(name, "x_cp")) s = p->cp > 1 ? " x cp" : "";
  if (!strcmp(name, "dp_x_cp")) s = p->cp > 1 ? "dp x cp" : "dp";
  if (!strcmp(name, "model")) s = m->name;
  if (!strcmp(name, "cluster")) s = x->c->name;
  if (!strcmp(name, "gpu")) s = x->c->gpu.name;
  if (!strcmp(name, "schedule") && p->schedule >= 0 && p->schedule < PX_SCHED_COUNT) s = px_schedule_names[p->schedule];
  if (!strcmp(name, "precision") && p->precision >= 0 && p->precision < PX_PREC_COUNT)
    s = px_precision_names[p->precision];
  if (!strcmp(name, "fp8_recipe") && p->fp8_recipe >= 0 && p->fp8_recipe < PX_FP8_RECIPE_COUNT)
    s = px_fp8_recipe_names[p->fp8_recipe];
  if (!strcmp(name, "offload_params") && p->offload_params >= 0 && p->offload_params < PX_OFFLOAD_COUNT)
    s = px_offload_names[p->offload_params];
  if (!strcmp(name, "recompute") && p->recompute >= 0 && p->recompute < PX_RECOMPUTE_COUNT)
    s = px_recompute_names[p->recompute];
  if (!strcmp(name, "recompute_method") && p->recompute_method >= 0 && p->recompute_method < PX_RECOMPUTE_METHOD_COUNT)
    s = px_recompute_method_names[p->recompute_method];
  if (!strcmp(name, "cuda_graph") && p->cuda_graph >= 0 && p->cuda_graph < PX_GRAPH_COUNT)
    s = px_cuda_graph_names[p->cuda_graph];
  if (!strcmp(name, "moe_dispatch") && p->moe_dispatch >= 0 && p->moe_dispatch < PX_MOE_DISPATCH_COUNT)
    s = px_moe_dispatch_names[p->moe_dispatch];
  if (!strcmp(name, "layer_split")) s = x->sub.msg;
  if (!strcmp(name, "finetune") && p->finetune >= 0 && p->finetune < PX_FT_COUNT) s = px_finetune_names[p->finetune];
  if (!strcmp(name, "base_precision") && p->base_precision >= 0 && p->base_precision < PX_BASE_COUNT)
    s = px_base_precision_names[p->base_precision];
  snprintf(v, cap, "%s", s);
}

/* A rule's message with each {name} replaced by its value. */
static void rule_say(const vctx *x, const char *msg, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (const char *s = msg; *s && n + 1 < cap;) {
    const char *end = *s == '{' ? strchr(s, '}') : NULL;
    if (!end) {
      out[n++] = *s++;
      out[n] = '\0';
      continue;
    }
    char name[32], v[sizeof x->sub.msg];
    snprintf(name, sizeof name, "%.*s", (int)(end - s - 1), s + 1);
    rule_value(x, name, v, sizeof v);
    n += (size_t)snprintf(out + n, cap - n, "%s", v);
    if (n >= cap) n = cap - 1;
    s = end + 1;
  }
}

px_status px_parallel_validate(const px_parallel *p, const px_model *m, const px_cluster *c, px_err *err) {
  vctx x = {.p = p, .m = m, .c = c};
  for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
    if (!rules[i].broken(&x)) continue;
    char msg[sizeof err->msg];
    rule_say(&x, rules[i].msg, msg, sizeof msg);
    return px_err_set(err, x.sub_st ? x.sub_st : PX_ERR_INPUT, "%s", msg);
  }
  return PX_OK;
}

int64_t px_parallel_microbatches(const px_parallel *p) {
  return p->mbs > 0 && p->dp > 0 ? p->gbs / (p->mbs * p->dp) : 0;
}

int64_t px_parallel_layer_passes(const px_parallel *p, int64_t layers) {
  int64_t m = px_parallel_microbatches(p), per = layers + p->pp * p->vpp; /* pp < 2^25, vpp < 2^17 */
  return m > 0 && per > INT64_MAX / m ? INT64_MAX : m * per;
}

bool px_parallel_layer_offloaded(const px_parallel *p, int64_t l) { return l < p->offload_act_layers; }

int64_t px_parallel_offload_window(const px_parallel *p, int64_t layers) { return layers - p->offload_act_layers; }

bool px_parallel_layer_bf16(const px_parallel *p, int64_t layers, int64_t l) {
  return px_precision_quantized(p->precision) && (l < p->bf16_layers_start || l >= layers - p->bf16_layers_end);
}

px_dtype px_parallel_compute_dtype(const px_parallel *p) {
  switch (p->precision) {
    case PX_PREC_BF16: return PX_DTYPE_BF16;
    case PX_PREC_FP8:
    case PX_PREC_MXFP8:
    case PX_PREC_NVFP4: return p->fp8_base == PX_FP8_BASE_FP32 ? PX_DTYPE_FP32 : PX_DTYPE_BF16;
    case PX_PREC_FP16: return PX_DTYPE_FP16;
    default: return PX_DTYPE_FP32;
  }
}

px_dtype px_parallel_gemm_dtype(const px_parallel *p) {
  if (p->precision == PX_PREC_NVFP4) return PX_DTYPE_FP4;
  return px_precision_quantized(p->precision) ? PX_DTYPE_FP8 : px_parallel_compute_dtype(p);
}

static uint64_t ceil_div_u(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t px_parallel_quant_bytes(const px_parallel *p, uint64_t elems, int64_t row) {
  uint64_t rows = row > 0 ? elems / (uint64_t)row : 0, r = (uint64_t)(row > 0 ? row : 1);
  switch (p->precision) {
    case PX_PREC_FP8: return elems + (p->fp8_recipe == PX_FP8_BLOCKWISE ? 4 * rows * ceil_div_u(r, PX_FP8_BLOCK) : 0);
    case PX_PREC_MXFP8: return elems + rows * ceil_div_u(r, PX_MX_BLOCK);
    case PX_PREC_NVFP4: return ceil_div_u(elems, 2) + rows * ceil_div_u(r, PX_NVFP4_BLOCK) + 4;
    default: return 0;
  }
}

uint64_t px_parallel_quant_weight_bytes(const px_parallel *p, uint64_t elems) {
  switch (p->precision) {
    case PX_PREC_FP8: return elems;
    case PX_PREC_MXFP8: return elems + ceil_div_u(elems, PX_MX_BLOCK);
    case PX_PREC_NVFP4: return ceil_div_u(elems, 2) + ceil_div_u(elems, PX_NVFP4_BLOCK);
    default: return 0;
  }
}

int px_parallel_quant_copies(const px_parallel *p, const px_gpu *g) {
  if (!px_precision_quantized(p->precision)) return 0;
  bool per_tensor = p->precision == PX_PREC_FP8 && p->fp8_recipe != PX_FP8_BLOCKWISE;
  return per_tensor && px_gpu_fp8_any_layout(g) ? 1 : 2;
}

/* A cast's read of its 16-bit input: twice where the scale comes from the tensor's own amax first (fp8's current
 * scaling; nvfp4's per-tensor scale), weights and activations alike. */
static double cast_read_bytes(const px_parallel *p, uint64_t elems, int in_bytes) {
  bool amax_pass = (p->precision == PX_PREC_FP8 && p->fp8_recipe == PX_FP8_CURRENT) || p->precision == PX_PREC_NVFP4;
  return (double)elems * in_bytes * (amax_pass ? 2.0 : 1.0);
}

double px_parallel_cast_bytes(const px_parallel *p, uint64_t elems, int64_t row, int in_bytes, int copies) {
  double copy = p->precision == PX_PREC_FP8 ? (double)elems : (double)px_parallel_quant_bytes(p, elems, row);
  return cast_read_bytes(p, elems, in_bytes) + copies * copy;
}

bool px_parallel_fp8_primary(const px_parallel *p) { return px_precision_quantized(p->precision) && p->fp8_params > 0; }

int px_parallel_weight_copies(const px_parallel *p, const px_gpu *g) {
  return px_parallel_quant_copies(p, g) - (px_parallel_fp8_primary(p) ? 1 : 0);
}

/* Whether ZeRO's parameter all-gather (and the optimizer, writing its shard) moves the primary weights in their
 * format: fp8's and nvfp4's; mxfp8's move in the compute dtype, through the gradient buffer (parallel.h). */
static bool gathers_quantized(const px_parallel *p) {
  return px_parallel_fp8_primary(p) && p->precision != PX_PREC_MXFP8;
}

uint64_t px_parallel_param_gather_bytes(const px_parallel *p, uint64_t n) {
  if (!gathers_quantized(p)) return n * px_dtype_bytes(px_parallel_compute_dtype(p));
  return p->precision == PX_PREC_NVFP4 ? ceil_div_u(n, 2) : n;
}

double px_parallel_weight_cast_bytes(const px_parallel *p, const px_gpu *g, uint64_t n) {
  if (px_parallel_weight_copies(p, g) <= 0) return 0.0;
  bool q = gathers_quantized(p); /* the cast reads the row-wise copy and writes the others, or reads the 16-bit
                                    weights and writes every copy */
  double copy = (double)px_parallel_quant_weight_bytes(p, n);
  double read = q ? copy : cast_read_bytes(p, n, (int)px_dtype_bytes(px_parallel_compute_dtype(p)));
  return read + (px_parallel_quant_copies(p, g) - (q ? 1 : 0)) * copy;
}

bool px_parallel_mixed(const px_parallel *p) { return px_parallel_compute_dtype(p) != PX_DTYPE_FP32; }

uint64_t px_parallel_optimizer_bytes(const px_parallel *p) { return px_parallel_mixed(p) ? 12 : 8; }

px_dtype px_parallel_grad_dtype(const px_parallel *p) {
  return px_parallel_mixed(p) && p->main_grad == PX_MAIN_GRAD_FP32 ? PX_DTYPE_FP32 : px_parallel_compute_dtype(p);
}

px_status px_overlap_parse(const char *s, int *bits, px_err *err) {
  static const char *const extra[] = {"all", "none"};
  static const int extra_bits[] = {PX_OVERLAP_ALL, 0};
  px_status st = px_parse_name_bits(s, "overlap", px_overlap_names, PX_OVERLAP_BITS, extra, extra_bits, 2, bits, err);
  if (!st && (*bits & PX_OVERLAP_TP)) *bits |= PX_OVERLAP_TP_BWD; /* all TP overlap includes the backward's */
  return st;
}

px_status px_recompute_modules_parse(const char *s, int *bits, px_err *err) {
  px_status st = px_parse_name_bits(s, "recompute module", px_recompute_module_names, PX_RCM_BITS, NULL, NULL, 0,
                                    bits, err);
  if (st && err) { /* what the name may have meant */
    size_t k = strlen(err->msg);
    snprintf(err->msg + k, sizeof err->msg - k, " (Megatron-Core's moe and shared_experts are not planned)");
  }
  if (st) return st;
  return *bits ? PX_OK : px_err_set(err, PX_ERR_INPUT, "empty list of recompute modules");
}

char *px_recompute_modules_str(int bits, char *buf, size_t cap) {
  return px_fmt_name_bits(bits, px_recompute_module_names, PX_RCM_BITS, buf, cap);
}

#define TRY(x) \
  if ((st = (x))) return st

px_status px_parallel_from_json(const cJSON *obj, const char *file, px_parallel *p, px_err *err) {
  px_parallel_unset(p);
  if (!cJSON_IsObject(obj)) return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel': expected an object", file);
  px_json_keys keys = {.n = 0};
  px_json_ctx c = {file, "parallel.", &keys};
  px_status st;
  int64_t v = -1;
  TRY(px_json_int(&c, obj, "tp", false, 1, 1 << 24, &p->tp, err));
  TRY(px_json_int(&c, obj, "pp", false, 1, 1 << 24, &p->pp, err));
  TRY(px_json_int(&c, obj, "dp", false, 1, 1 << 24, &p->dp, err));
  TRY(px_json_int(&c, obj, "cp", false, 1, 1 << 20, &p->cp, err));
  TRY(px_json_enum(&c, obj, "cp_algo", false, px_cp_algo_names, PX_CP_ALGO_COUNT, &p->cp_algo, err));
  TRY(px_json_int(&c, obj, "ep", false, 1, 1 << 20, &p->ep, err));
  TRY(px_json_int(&c, obj, "etp", false, 1, 1 << 20, &p->etp, err));
  TRY(px_json_enum(&c, obj, "moe_dispatch", false, px_moe_dispatch_names, PX_MOE_DISPATCH_COUNT, &p->moe_dispatch, err));
  if (px_json_get(&c, obj, "moe_router_padding")) {
    bool f = false;
    TRY(px_json_bool(&c, obj, "moe_router_padding", true, &f, err));
    p->moe_router_padding = f;
  }
  TRY(px_json_int(&c, obj, "mtp_layers", false, 0, 1000, &p->mtp_layers, err));
  TRY(px_json_num(&c, obj, "mtp_loss_scale", false, PX_MTP_LOSS_SCALE_MIN, PX_MTP_LOSS_SCALE_MAX, &p->mtp_loss_scale,
                  err));
  TRY(px_json_enum(&c, obj, "moe_buffers", false, px_moe_buffers_names, PX_MOE_BUFFERS_COUNT, &p->moe_buffers, err));
  TRY(px_json_num(&c, obj, "moe_imbalance", false, 1.0, 1e6, &p->moe_imbalance, err));
  TRY(px_json_enum(&c, obj, "cuda_graph", false, px_cuda_graph_names, PX_GRAPH_COUNT, &p->cuda_graph, err));
  TRY(px_json_int(&c, obj, "zero", false, 0, 3, &v, err));
  p->zero = (int)v;
  bool sp = false;
  if (px_json_get(&c, obj, "sp")) {
    TRY(px_json_bool(&c, obj, "sp", true, &sp, err));
    p->sp = sp;
  }
  TRY(px_json_int(&c, obj, "mbs", false, 1, (int64_t)1 << 30, &p->mbs, err));
  TRY(px_json_int(&c, obj, "gbs", false, 1, (int64_t)1 << 40, &p->gbs, err));
  TRY(px_json_int(&c, obj, "seq", false, 1, (int64_t)1 << 24, &p->seq, err));
  TRY(px_json_int(&c, obj, "vpp", false, 1, 1 << 16, &p->vpp, err));
  TRY(px_json_int(&c, obj, "prefetch", false, 0, 64, &p->prefetch, err));
  TRY(px_json_int(&c, obj, "shard_group", false, 1, 1 << 24, &p->shard_group, err));
  TRY(px_json_int(&c, obj, "first_stage_layers", false, 1, 1 << 24, &p->first_stage_layers, err));
  TRY(px_json_int(&c, obj, "last_stage_layers", false, 1, 1 << 24, &p->last_stage_layers, err));
  TRY(px_json_int(&c, obj, "microbatch_group", false, 1, (int64_t)1 << 40, &p->mb_group, err));
  TRY(px_json_int(&c, obj, "bf16_layers_start", false, 0, 1 << 24, &p->bf16_layers_start, err));
  TRY(px_json_int(&c, obj, "bf16_layers_end", false, 0, 1 << 24, &p->bf16_layers_end, err));
  TRY(px_json_int(&c, obj, "offload_activations", false, 0, 1 << 24, &p->offload_act_layers, err));
  const cJSON *lpc = px_json_get(&c, obj, "layers_per_chunk");
  if (lpc) {
    if (!cJSON_IsArray(lpc) || cJSON_GetArraySize(lpc) < 1 || cJSON_GetArraySize(lpc) > PX_MAX_CHUNK_LIST)
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel.layers_per_chunk': expected an array of 1 to %d counts",
                        file, PX_MAX_CHUNK_LIST);
    const cJSON *x;
    cJSON_ArrayForEach(x, lpc) {
      if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 65535 || x->valuedouble != (double)(int64_t)x->valuedouble)
        return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel.layers_per_chunk': entries must be whole counts from 0",
                          file);
      p->chunk_layers[p->nchunk_layers++] = (uint16_t)x->valuedouble;
    }
  }
  if (px_json_get(&c, obj, "reshard_after_forward")) {
    bool r = true;
    TRY(px_json_bool(&c, obj, "reshard_after_forward", true, &r, err));
    p->reshard = r;
  }
  TRY(px_json_enum(&c, obj, "grad_accum", false, px_grad_accum_names, PX_ACCUM_COUNT, &p->grad_accum, err));
  TRY(px_json_enum(&c, obj, "main_grad", false, px_main_grad_names, PX_MAIN_GRAD_COUNT, &p->main_grad, err));
  TRY(px_json_enum(&c, obj, "offload_optimizer", false, px_offload_names, PX_OFFLOAD_COUNT, &p->offload_opt, err));
  TRY(px_json_enum(&c, obj, "offload_params", false, px_offload_names, PX_OFFLOAD_COUNT, &p->offload_params, err));
  TRY(px_json_enum(&c, obj, "schedule", false, px_schedule_names, PX_SCHED_COUNT, &p->schedule, err));
  TRY(px_json_enum(&c, obj, "recompute", false, px_recompute_names, PX_RECOMPUTE_COUNT, &p->recompute, err));
  TRY(px_json_enum(&c, obj, "recompute_method", false, px_recompute_method_names, PX_RECOMPUTE_METHOD_COUNT,
                   &p->recompute_method, err));
  TRY(px_json_int(&c, obj, "recompute_layers", false, 1, 1 << 24, &p->recompute_layers, err));
  char modules[96] = "";
  TRY(px_json_str(&c, obj, "recompute_modules", false, modules, sizeof modules, err));
  if (modules[0] && (st = px_recompute_modules_parse(modules, &p->recompute_modules, err)))
    return px_err_prefix(err, "%s: field 'parallel.recompute_modules'", file);
  TRY(px_json_enum(&c, obj, "precision", false, px_precision_names, PX_PREC_COUNT, &p->precision, err));
  TRY(px_json_enum(&c, obj, "fp8_recipe", false, px_fp8_recipe_names, PX_FP8_RECIPE_COUNT, &p->fp8_recipe, err));
  TRY(px_json_enum(&c, obj, "fp8_base", false, px_fp8_base_names, PX_FP8_BASE_COUNT, &p->fp8_base, err));
  TRY(px_json_enum(&c, obj, "fp8_library", false, px_fp8_library_names, PX_FP8_LIB_COUNT, &p->fp8_library, err));
  if (px_json_get(&c, obj, "fp8_params")) {
    bool f = false;
    TRY(px_json_bool(&c, obj, "fp8_params", true, &f, err));
    p->fp8_params = f;
  }
  if (px_json_get(&c, obj, "fp8_attention")) {
    bool f = false;
    TRY(px_json_bool(&c, obj, "fp8_attention", true, &f, err));
    p->fp8_attention = f;
  }
  TRY(px_json_enum(&c, obj, "finetune", false, px_finetune_names, PX_FT_COUNT, &p->finetune, err));
  TRY(px_json_int(&c, obj, "lora_rank", false, 1, PX_LORA_RANK_MAX, &p->lora_rank, err));
  TRY(px_json_num(&c, obj, "lora_alpha", false, 1e-6, 1e9, &p->lora_alpha, err));
  char targets[96] = "";
  TRY(px_json_str(&c, obj, "lora_targets", false, targets, sizeof targets, err));
  if (targets[0] && (st = px_lora_targets_parse(targets, &p->lora_targets, err)))
    return px_err_prefix(err, "%s: field 'parallel.lora_targets'", file);
  TRY(px_json_enum(&c, obj, "base_precision", false, px_base_precision_names, PX_BASE_COUNT, &p->base_precision, err));
  TRY(px_json_enum(&c, obj, "attention", false, px_attention_names, PX_ATTN_COUNT, &p->attention, err));
  TRY(px_json_enum(&c, obj, "gelu", false, px_gelu_names, PX_GELU_COUNT, &p->gelu, err));
  TRY(px_json_enum(&c, obj, "elementwise", false, px_elementwise_names, PX_ELEMWISE_COUNT, &p->elementwise, err));
  double mib = 0;
  TRY(px_json_num(&c, obj, "bucket_mib", false, 1.0 / 1024, 1 << 20, &mib, err));
  p->bucket_bytes = (uint64_t)(mib * (1 << 20));
  char overlap[64] = "";
  TRY(px_json_str(&c, obj, "overlap", false, overlap, sizeof overlap, err));
  if (overlap[0]) {
    if ((st = px_overlap_parse(overlap, &p->overlap, err))) return px_err_prefix(err, "%s: field 'parallel.overlap'", file);
  } else if (cJSON_GetObjectItemCaseSensitive(obj, "overlap")) {
    p->overlap = 0;
  }
  return px_json_refuse_unknown(&c, obj, NULL, 0, err);
}

cJSON *px_parallel_to_json(const px_parallel *p) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_json_add_num(o, "tp", (double)p->tp);
  px_json_add_num(o, "pp", (double)p->pp);
  px_json_add_num(o, "dp", (double)p->dp);
  if (p->cp > 1) px_json_add_num(o, "cp", (double)p->cp);
  if (p->cp_algo >= 0 && p->cp > 1) cJSON_AddStringToObject(o, "cp_algo", px_cp_algo_names[p->cp_algo]);
  if (p->ep > 1) px_json_add_num(o, "ep", (double)p->ep);
  if (p->etp > 0 && p->etp != p->tp) px_json_add_num(o, "etp", (double)p->etp);
  if (p->moe_dispatch > 0) cJSON_AddStringToObject(o, "moe_dispatch", px_moe_dispatch_names[p->moe_dispatch]);
  if (p->moe_router_padding > 0) cJSON_AddBoolToObject(o, "moe_router_padding", true);
  if (p->mtp_layers > 0) px_json_add_num(o, "mtp_layers", (double)p->mtp_layers);
  if (p->mtp_loss_scale > 0) px_json_add_num(o, "mtp_loss_scale", p->mtp_loss_scale);
  if (p->moe_buffers > 0) cJSON_AddStringToObject(o, "moe_buffers", px_moe_buffers_names[p->moe_buffers]);
  if (p->moe_imbalance > 1) px_json_add_num(o, "moe_imbalance", p->moe_imbalance);
  if (p->cuda_graph > 0) cJSON_AddStringToObject(o, "cuda_graph", px_cuda_graph_names[p->cuda_graph]);
  px_json_add_num(o, "zero", p->zero);
  cJSON_AddBoolToObject(o, "sp", p->sp > 0);
  px_json_add_num(o, "mbs", (double)p->mbs);
  px_json_add_num(o, "gbs", (double)p->gbs);
  px_json_add_num(o, "seq", (double)p->seq);
  px_json_add_num(o, "vpp", (double)p->vpp);
  if (p->prefetch >= 0) px_json_add_num(o, "prefetch", (double)p->prefetch);
  if (p->shard_group > 0) px_json_add_num(o, "shard_group", (double)p->shard_group);
  if (p->first_stage_layers > 0) px_json_add_num(o, "first_stage_layers", (double)p->first_stage_layers);
  if (p->last_stage_layers > 0) px_json_add_num(o, "last_stage_layers", (double)p->last_stage_layers);
  if (p->mb_group > 0) px_json_add_num(o, "microbatch_group", (double)p->mb_group);
  if (p->nchunk_layers > 0) {
    cJSON *a = cJSON_AddArrayToObject(o, "layers_per_chunk");
    for (int32_t i = 0; a && i < p->nchunk_layers; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(p->chunk_layers[i]));
  }
  if (p->reshard >= 0) cJSON_AddBoolToObject(o, "reshard_after_forward", p->reshard > 0);
  if (p->grad_accum >= 0) cJSON_AddStringToObject(o, "grad_accum", px_grad_accum_names[p->grad_accum]);
  if (p->main_grad >= 0) cJSON_AddStringToObject(o, "main_grad", px_main_grad_names[p->main_grad]);
  if (p->offload_opt >= 0) cJSON_AddStringToObject(o, "offload_optimizer", px_offload_names[p->offload_opt]);
  if (p->offload_params >= 0) cJSON_AddStringToObject(o, "offload_params", px_offload_names[p->offload_params]);
  if (p->schedule >= 0) cJSON_AddStringToObject(o, "schedule", px_schedule_names[p->schedule]);
  if (p->recompute >= 0) cJSON_AddStringToObject(o, "recompute", px_recompute_names[p->recompute]);
  if (p->recompute_layers > 0) {
    int method = p->recompute_method >= 0 ? p->recompute_method : PX_RECOMPUTE_UNIFORM;
    cJSON_AddStringToObject(o, "recompute_method", px_recompute_method_names[method]);
    px_json_add_num(o, "recompute_layers", (double)p->recompute_layers);
  }
  if (p->recompute_modules) {
    char t[96];
    cJSON_AddStringToObject(o, "recompute_modules", px_recompute_modules_str(p->recompute_modules, t, sizeof t));
  }
  if (p->precision >= 0) cJSON_AddStringToObject(o, "precision", px_precision_names[p->precision]);
  if (p->precision == PX_PREC_FP8 && p->fp8_recipe >= 0)
    cJSON_AddStringToObject(o, "fp8_recipe", px_fp8_recipe_names[p->fp8_recipe]);
  if (px_precision_quantized(p->precision) && p->fp8_base >= 0)
    cJSON_AddStringToObject(o, "fp8_base", px_fp8_base_names[p->fp8_base]);
  if (px_precision_quantized(p->precision) && p->fp8_library >= 0)
    cJSON_AddStringToObject(o, "fp8_library", px_fp8_library_names[p->fp8_library]);
  if (p->fp8_params > 0) cJSON_AddBoolToObject(o, "fp8_params", true);
  if (p->fp8_attention > 0) cJSON_AddBoolToObject(o, "fp8_attention", true);
  if (p->bf16_layers_start > 0) px_json_add_num(o, "bf16_layers_start", (double)p->bf16_layers_start);
  if (p->bf16_layers_end > 0) px_json_add_num(o, "bf16_layers_end", (double)p->bf16_layers_end);
  if (p->offload_act_layers > 0) px_json_add_num(o, "offload_activations", (double)p->offload_act_layers);
  if (p->finetune > 0) cJSON_AddStringToObject(o, "finetune", px_finetune_names[p->finetune]);
  if (p->lora_rank > 0) px_json_add_num(o, "lora_rank", (double)p->lora_rank);
  if (p->lora_alpha > 0) px_json_add_num(o, "lora_alpha", p->lora_alpha);
  if (p->lora_targets) {
    char t[96];
    cJSON_AddStringToObject(o, "lora_targets", px_lora_targets_str(p->lora_targets, t, sizeof t));
  }
  if (p->base_precision >= 0) cJSON_AddStringToObject(o, "base_precision", px_base_precision_names[p->base_precision]);
  if (p->attention >= 0) cJSON_AddStringToObject(o, "attention", px_attention_names[p->attention]);
  if (p->gelu >= 0) cJSON_AddStringToObject(o, "gelu", px_gelu_names[p->gelu]);
  if (p->elementwise >= 0) cJSON_AddStringToObject(o, "elementwise", px_elementwise_names[p->elementwise]);
  px_json_add_num(o, "bucket_mib", (double)p->bucket_bytes / (1 << 20));
  char overlap[64] = "";
  if (p->overlap >= 0) {
    for (int i = 0; i < PX_OVERLAP_BITS; i++)
      if ((p->overlap & (1 << i)) && !((1 << i) == PX_OVERLAP_TP_BWD && (p->overlap & PX_OVERLAP_TP))) /* tp says it */
        snprintf(overlap + strlen(overlap), sizeof overlap - strlen(overlap), "%s%s", overlap[0] ? "," : "",
                 px_overlap_names[i]);
    if (!overlap[0]) snprintf(overlap, sizeof overlap, "none");
    cJSON_AddStringToObject(o, "overlap", overlap);
  }
  return o;
}
