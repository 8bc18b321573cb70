/* Parallel choices: defaults, validation with hints, JSON. */
#include "plan/parallel.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "core/json.h"

PX_NAME_TABLE(px_schedule_names, PX_SCHED_COUNT, "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2");
PX_NAME_TABLE(px_recompute_names, PX_RECOMPUTE_COUNT, "none", "selective", "full");
PX_NAME_TABLE(px_precision_names, PX_PREC_COUNT, "fp32", "bf16", "fp16", "fp8");
PX_NAME_TABLE(px_overlap_names, PX_OVERLAP_BITS, "dp", "zero", "pp", "tp", "tp-bwd");
PX_NAME_TABLE(px_fp8_recipe_names, PX_FP8_RECIPE_COUNT, "delayed", "current", "blockwise");
PX_NAME_TABLE(px_fp8_base_names, PX_FP8_BASE_COUNT, "bf16", "fp32");
PX_NAME_TABLE(px_attention_names, PX_ATTN_COUNT, "flash", "unfused");
PX_NAME_TABLE(px_gelu_names, PX_GELU_COUNT, "separate", "fused");
PX_NAME_TABLE(px_grad_accum_names, PX_ACCUM_COUNT, "sharded", "full");
PX_NAME_TABLE(px_main_grad_names, PX_MAIN_GRAD_COUNT, "param", "fp32");
PX_NAME_TABLE(px_offload_names, PX_OFFLOAD_COUNT, "none", "cpu", "nvme");
PX_NAME_TABLE(px_cp_algo_names, PX_CP_ALGO_COUNT, "ring", "all-gather", "a2a");
PX_NAME_TABLE(px_moe_dispatch_names, PX_MOE_DISPATCH_COUNT, "a2a", "allgather");

#define DEFAULT_BUCKET_BYTES ((uint64_t)25 << 20) /* PyTorch DDP's default bucket */

void px_parallel_unset(px_parallel *p) {
  memset(p, 0, sizeof *p);
  p->zero = p->sp = p->schedule = p->recompute = p->precision = p->attention = p->gelu = p->overlap = -1;
  p->cp_algo = p->moe_dispatch = p->fp8_recipe = p->fp8_base = -1;
  p->prefetch = -1;
  p->reshard = p->grad_accum = p->main_grad = p->offload_opt = p->offload_params = -1;
}

void px_parallel_resolve(px_parallel *p, const px_model *m, const px_cluster *c) {
  int64_t gpus = c->gpus;
  if (p->tp <= 0) p->tp = 1;
  if (p->pp <= 0) p->pp = 1;
  if (p->cp <= 0) p->cp = 1;
  if (p->cp_algo < 0) p->cp_algo = PX_CP_RING;
  if (p->ep <= 0) p->ep = 1;
  if (p->etp <= 0) p->etp = p->tp; /* Megatron-Core's default: expert_tensor_parallel_size = tensor_model_parallel_size */
  if (p->moe_dispatch < 0) p->moe_dispatch = PX_MOE_A2A;
  if (p->moe_imbalance <= 0) p->moe_imbalance = 1.0;
  if (p->dp <= 0 && gpus > 0 && gpus % (p->tp * p->cp * p->pp) == 0) p->dp = gpus / (p->tp * p->cp * p->pp);
  if (p->zero < 0) p->zero = 0;
  if (p->sp < 0) p->sp = 0;
  if (p->mbs <= 0) p->mbs = 1;
  if (p->seq <= 0) p->seq = m->seq_len;
  if (p->vpp <= 0) p->vpp = 1;
  if (p->schedule < 0) p->schedule = p->vpp > 1 ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B;
  if (p->gbs <= 0 && p->dp > 0) p->gbs = p->mbs * p->dp * (p->pp > 1 ? 4 * p->pp : 1);
  if (p->recompute < 0) p->recompute = PX_RECOMPUTE_NONE;
  if (p->precision < 0) p->precision = c->gpu.peak_flops[PX_DTYPE_BF16] > 0 ? PX_PREC_BF16 : PX_PREC_FP32;
  if (p->fp8_recipe < 0) p->fp8_recipe = PX_FP8_DELAYED;
  if (p->fp8_base < 0) p->fp8_base = PX_FP8_BASE_BF16;
  if (p->attention < 0) p->attention = PX_ATTN_FLASH;
  if (p->gelu < 0) p->gelu = PX_GELU_SEPARATE;
  if (p->bucket_bytes == 0) p->bucket_bytes = DEFAULT_BUCKET_BYTES;
  if (p->overlap < 0) p->overlap = PX_OVERLAP_DEFAULT;
  if (p->prefetch < 0) p->prefetch = 1;
  if (p->reshard < 0) p->reshard = 1;
  if (p->grad_accum < 0) p->grad_accum = p->zero >= 2 ? PX_ACCUM_SHARDED : PX_ACCUM_FULL;
  if (p->main_grad < 0) p->main_grad = PX_MAIN_GRAD_PARAM;
  if (p->offload_opt < 0) p->offload_opt = PX_OFFLOAD_NONE;
  if (p->offload_params < 0) p->offload_params = PX_OFFLOAD_NONE;
}

void px_parallel_fill_unset(px_parallel *p, const px_parallel *from) {
#define TAKE(f, unset) \
  if (p->f == (unset)) p->f = from->f;
  TAKE(tp, 0) TAKE(pp, 0) TAKE(dp, 0) TAKE(cp, 0) TAKE(cp_algo, -1) TAKE(ep, 0) TAKE(etp, 0) TAKE(moe_dispatch, -1)
  TAKE(moe_imbalance, 0.0) TAKE(zero, -1) TAKE(sp, -1) TAKE(mbs, 0) TAKE(gbs, 0) TAKE(seq, 0)
  TAKE(schedule, -1) TAKE(vpp, 0) TAKE(recompute, -1) TAKE(precision, -1) TAKE(fp8_recipe, -1) TAKE(fp8_base, -1) TAKE(attention, -1) TAKE(gelu, -1)
  TAKE(bucket_bytes, 0u) TAKE(overlap, -1) TAKE(prefetch, -1) TAKE(reshard, -1) TAKE(grad_accum, -1)
  TAKE(main_grad, -1) TAKE(offload_opt, -1) TAKE(offload_params, -1) TAKE(shard_group, 0)
  TAKE(first_stage_layers, 0) TAKE(last_stage_layers, 0) TAKE(mb_group, 0)
#undef TAKE
  if (p->nchunk_layers == 0 && from->nchunk_layers > 0) {
    p->nchunk_layers = from->nchunk_layers;
    memcpy(p->chunk_layers, from->chunk_layers, sizeof p->chunk_layers);
  }
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
                        "--layers-per-chunk gives every chunk's layers: drop --first-stage-layers and "
                        "--last-stage-layers");
    if (p->nchunk_layers != V)
      return px_err_set(err, PX_ERR_INPUT,
                        "--layers-per-chunk has %d entries, but pp %lld x vpp %lld makes %lld chunks", p->nchunk_layers,
                        (long long)pp, (long long)v, (long long)V);
    int64_t sum = 0;
    for (int64_t i = 0; i < V; i++) sum += out[i] = p->chunk_layers[i];
    if (sum != L)
      return px_err_set(err, PX_ERR_INPUT, "--layers-per-chunk adds up to %lld layers, the model has %lld",
                        (long long)sum, (long long)L);
  } else if (p->first_stage_layers > 0 || p->last_stage_layers > 0) {
    /* Megatron-Core's uneven pipeline: the stages whose count is not given
     * (the middle ones) share the rest evenly, every chunk alike. */
    int64_t F = p->first_stage_layers, Ls = p->last_stage_layers;
    if (pp < 2)
      return px_err_set(err, PX_ERR_INPUT, "--first-stage-layers and --last-stage-layers need pp > 1");
    int64_t mid = pp - (F > 0) - (Ls > 0), rest = L - F - Ls;
    if ((F > 0 && F < v) || (Ls > 0 && Ls < v))
      return px_err_set(err, PX_ERR_INPUT,
                        "the first and last stage need at least one layer in each of their %lld chunks (vpp)",
                        (long long)v);
    if (mid == 0 && rest != 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "--first-stage-layers %lld + --last-stage-layers %lld must be the model's %lld layers with pp 2",
                        (long long)F, (long long)Ls, (long long)L);
    if (mid > 0 && (rest < mid * v || rest % (mid * v))) {
      char hint[96];
      int64_t given = F + Ls;
      first_last_hint(L, 0, mid * v, given, hint, sizeof hint);
      return px_err_set(err, PX_ERR_INPUT,
                        "%lld layers are left for the %lld middle stage%s x %lld chunk%s, which do not split evenly "
                        "(hint: make %s %s)",
                        (long long)rest, (long long)mid, mid > 1 ? "s" : "", (long long)v, v > 1 ? "s" : "",
                        F > 0 && Ls > 0 ? "first + last stage layers" : F > 0 ? "--first-stage-layers" : "--last-stage-layers",
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
  for (int64_t i = 0; i < V; i++)
    if (out[i] < 1)
      return px_err_set(err, PX_ERR_INPUT, "model chunk %lld (stage %lld, chunk %lld) would hold no layer",
                        (long long)i, (long long)(i % pp), (long long)(i / pp));
  return PX_OK;
}

px_status px_parallel_parse_chunk_list(const char *s, px_parallel *p, px_err *err) {
  int32_t n = 0;
  const char *q = s;
  while (*q) {
    char *end = (char *)q;
    long long x = isdigit((unsigned char)*q) ? strtoll(q, &end, 10) : 0; /* digits only: no sign, no spaces */
    if (end == q || x < 1 || x > 65535 || (*end && (*end != ',' || !end[1])))
      return px_err_set(err, PX_ERR_INPUT, "--layers-per-chunk: '%.64s' is not a comma list of layer counts", s);
    if (n == PX_MAX_CHUNK_LIST)
      return px_err_set(err, PX_ERR_INPUT, "--layers-per-chunk: more than %d chunks", PX_MAX_CHUNK_LIST);
    p->chunk_layers[n++] = (uint16_t)x;
    q = *end ? end + 1 : end;
  }
  if (!n) return px_err_set(err, PX_ERR_INPUT, "--layers-per-chunk: empty list");
  p->nchunk_layers = n;
  return PX_OK;
}

px_status px_parallel_validate(const px_parallel *p, const px_model *m, const px_cluster *c, px_err *err) {
  char hint[256];
  int64_t gpus = c->gpus;
  if (p->tp < 1 || p->pp < 1 || p->cp < 1)
    return px_err_set(err, PX_ERR_INPUT, "--tp, --pp and --cp must be at least 1");
  if (p->tp * p->cp > gpus || p->pp > gpus)
    return px_err_set(err, PX_ERR_INPUT, "tp %lld x cp %lld x pp %lld needs more than the %lld GPUs available",
                      (long long)p->tp, (long long)p->cp, (long long)p->pp, (long long)gpus);
  int64_t tcp = p->tp * p->cp * p->pp; /* GPUs of one data-parallel replica */
  if (p->dp < 1 || tcp * p->dp != gpus) {
    if (p->dp < 1)
      return px_err_set(err, PX_ERR_INPUT,
                        "tp %lld x cp %lld x pp %lld does not divide the %lld GPUs (hint: pick tp x cp x pp dividing %lld)",
                        (long long)p->tp, (long long)p->cp, (long long)p->pp, (long long)gpus, (long long)gpus);
    return px_err_set(err, PX_ERR_INPUT, "tp %lld x cp %lld x pp %lld x dp %lld = %lld, but there are %lld GPUs",
                      (long long)p->tp, (long long)p->cp, (long long)p->pp, (long long)p->dp,
                      (long long)(tcp * p->dp), (long long)gpus);
  }
  int64_t shardable = gcd64(gcd64(m->heads, m->kv_heads), m->ffn_hidden);
  divisor_hint(shardable, gpus, hint, sizeof hint);
  if (m->heads % p->tp)
    return px_err_set(err, PX_ERR_INPUT, "tp %lld does not divide the %lld attention heads (valid tp: %s)",
                      (long long)p->tp, (long long)m->heads, hint);
  if (m->kv_heads % p->tp)
    return px_err_set(err, PX_ERR_INPUT, "tp %lld does not divide the %lld key/value heads (valid tp: %s)",
                      (long long)p->tp, (long long)m->kv_heads, hint);
  if (m->ffn_hidden % p->tp)
    return px_err_set(err, PX_ERR_INPUT, "tp %lld does not divide ffn_hidden %lld (valid tp: %s)",
                      (long long)p->tp, (long long)m->ffn_hidden, hint);
  if (p->zero < 0 || p->zero > 3) return px_err_set(err, PX_ERR_INPUT, "--zero must be 0, 1, 2 or 3");
  int64_t wdp = px_parallel_weight_dp(p);
  if (p->zero > 0 && wdp < 2)
    return px_err_set(err, PX_ERR_INPUT,
                      "ZeRO-%d shards across data-parallel ranks but dp%s is 1 (hint: --zero 0)", p->zero,
                      p->cp > 1 ? " x cp" : "");
  if (p->shard_group < 0 || p->shard_group > wdp || (p->shard_group > 0 && wdp % p->shard_group)) {
    divisor_hint(wdp, wdp, hint, sizeof hint);
    return px_err_set(err, PX_ERR_INPUT, "--shard-group %lld does not divide %s %lld (valid shard groups: %s)",
                      (long long)p->shard_group, p->cp > 1 ? "dp x cp" : "dp", (long long)wdp, hint);
  }
  if (px_parallel_hybrid(p) && p->zero < 1)
    return px_err_set(err, PX_ERR_INPUT,
                      "--shard-group %lld shards model states within groups of DP ranks, which needs ZeRO "
                      "(hint: --zero 3, or drop --shard-group)",
                      (long long)p->shard_group);
  if (p->sp && p->tp < 2)
    return px_err_set(err, PX_ERR_INPUT, "sequence parallelism needs tp > 1 (hint: drop --sp or raise --tp)");
  if (p->mbs < 1 || p->gbs < 1) return px_err_set(err, PX_ERR_INPUT, "--mbs and --gbs must be at least 1");
  if (p->gbs % (p->mbs * p->dp))
    return px_err_set(err, PX_ERR_INPUT,
                      "global batch %lld is not divisible by mbs %lld x dp %lld (hint: use a multiple of %lld)",
                      (long long)p->gbs, (long long)p->mbs, (long long)p->dp, (long long)(p->mbs * p->dp));
  if (p->seq < 1) return px_err_set(err, PX_ERR_INPUT, "--seq must be at least 1");
  if (p->mbs > PX_PLAN_MB_TOKENS_MAX / p->seq)
    return px_err_set(err, PX_ERR_INPUT,
                      "mbs %lld x seq %lld is more than the %lld tokens a micro-batch may have (its tensors' sizes "
                      "must stay exact in 64 bits)",
                      (long long)p->mbs, (long long)p->seq, (long long)PX_PLAN_MB_TOKENS_MAX);
  if (p->attention != PX_ATTN_FLASH && (double)p->mbs * (double)m->heads * (double)p->seq * (double)p->seq > 0x1p56)
    return px_err_set(err, PX_ERR_INPUT,
                      "the unfused attention's scores, mbs %lld x %lld heads x seq %lld x seq, are more than the 2^56 "
                      "elements a tensor may have (hint: --attention flash)",
                      (long long)p->mbs, (long long)m->heads, (long long)p->seq);
  if (m->position == PX_POS_LEARNED && p->seq > m->max_positions)
    return px_err_set(err, PX_ERR_INPUT, "--seq %lld exceeds the model's %lld learned positions", (long long)p->seq,
                      (long long)m->max_positions);
  if (p->sp && p->seq % p->tp)
    return px_err_set(err, PX_ERR_INPUT, "sequence parallelism needs tp %lld to divide the sequence length %lld",
                      (long long)p->tp, (long long)p->seq);
  if (p->cp > 1) {
    if (p->cp_algo < 0 || p->cp_algo >= PX_CP_ALGO_COUNT) return px_err_set(err, PX_ERR_INPUT, "--cp-algo is not set");
    if (p->attention != PX_ATTN_FLASH)
      return px_err_set(err, PX_ERR_INPUT,
                        "context parallelism runs the fused attention block by block; the unfused attention's "
                        "(S, S) tensors are not split (hint: --attention flash)");
    if (p->seq % (2 * p->cp))
      return px_err_set(err, PX_ERR_INPUT,
                        "cp %lld cuts the sequence into 2 x cp = %lld chunks (two per rank, for the causal load "
                        "balance), which must divide --seq %lld",
                        (long long)p->cp, (long long)(2 * p->cp), (long long)p->seq);
    if (p->sp && (p->seq / p->cp) % p->tp)
      return px_err_set(err, PX_ERR_INPUT,
                        "sequence parallelism needs tp %lld to divide each CP rank's %lld tokens (seq / cp)",
                        (long long)p->tp, (long long)(p->seq / p->cp));
    int64_t hq = m->heads / p->tp, hkv = m->kv_heads / p->tp;
    if (p->cp_algo == PX_CP_A2A && (hq % p->cp || hkv % p->cp)) {
      divisor_hint(gcd64(hq, hkv), hq, hint, sizeof hint);
      return px_err_set(err, PX_ERR_INPUT,
                        "--cp-algo a2a gives each CP rank 1/cp of the heads: cp %lld must divide the %lld query and "
                        "%lld key/value heads per TP rank (valid cp: %s; hint: --cp-algo ring)",
                        (long long)p->cp, (long long)hq, (long long)hkv, hint);
    }
  }
  if (p->ep < 1) return px_err_set(err, PX_ERR_INPUT, "--ep must be at least 1");
  if (m->experts == 0 && p->ep > 1)
    return px_err_set(err, PX_ERR_INPUT, "--ep %lld splits experts, but %s is a dense model (hint: drop --ep)",
                      (long long)p->ep, m->name);
  if (p->etp < 1) return px_err_set(err, PX_ERR_INPUT, "--etp must be at least 1");
  if (m->experts == 0 && p->etp != p->tp)
    return px_err_set(err, PX_ERR_INPUT, "--etp %lld splits experts, but %s is a dense model (hint: drop --etp)",
                      (long long)p->etp, m->name);
  if (m->experts > 0) {
    /* Megatron-Core's parallel folding (parallel_state.initialize_model_parallel): the MoE layers' etp x ep x
     * edp grid covers the stage's tp x cp x dp ranks, so etp x ep must divide them (with etp = tp: ep divides
     * cp x dp); etp splits moe_ffn_hidden */
    if ((p->tp * wdp) % (p->etp * p->ep) || m->experts % p->ep) {
      divisor_hint(gcd64(p->tp * wdp / p->etp, m->experts), p->tp * wdp / p->etp, hint, sizeof hint);
      return px_err_set(err, PX_ERR_INPUT,
                        "--ep %lld --etp %lld: ep must divide the %lld experts, and etp x ep = %lld x %lld the tp x "
                        "cp x dp = %lld ranks the expert grid is folded over (valid ep with this etp: %s)",
                        (long long)p->ep, (long long)p->etp, (long long)m->experts, (long long)p->etp, (long long)p->ep,
                        (long long)(p->tp * wdp), hint);
    }
    if (m->moe_ffn_hidden % p->etp)
      return px_err_set(err, PX_ERR_INPUT, "--etp %lld must divide the %lld expert FFN width (hint: --etp 1)",
                        (long long)p->etp, (long long)m->moe_ffn_hidden);
    /* Megatron-Core's MoELayer raises "During training, performance may degrade if MoE and tensor
     * parallelism are enabled without also enabling sequence parallelism": its dispatchers take each TP
     * rank's sequence shard */
    if (p->tp > 1 && !p->sp)
      return px_err_set(err, PX_ERR_INPUT,
                        "experts with --tp %lld need sequence parallelism, as Megatron-Core requires: the token "
                        "dispatchers route each TP rank's sequence shard (hint: --sp)",
                        (long long)p->tp);
    if (p->moe_imbalance < 1)
      return px_err_set(err, PX_ERR_INPUT, "--moe-imbalance %g: the busiest rank's tokens over the mean is at least 1",
                        p->moe_imbalance);
    if (p->moe_dispatch < 0 || p->moe_dispatch >= PX_MOE_DISPATCH_COUNT)
      return px_err_set(err, PX_ERR_INPUT, "--moe-dispatch is not set");
    if (p->shard_group > 0)
      return px_err_set(err, PX_ERR_INPUT,
                        "--shard-group with experts: hybrid sharding of expert states is not modelled (hint: drop "
                        "--shard-group)");
    if (px_parallel_split_w(p))
      return px_err_set(err, PX_ERR_INPUT,
                        "--schedule %s splits weight gradients off the backward, which the expert layers do not yet "
                        "(hint: --schedule 1f1b or interleaved)",
                        px_schedule_names[p->schedule]);
  }
  if (m->sliding_window > 0) {
    /* one compiled layer block stands for a chunk's layers, its attention the
     * mean of sliding and full ones: exact when each chunk holds as many of each */
    if (p->cp > 1)
      return px_err_set(err, PX_ERR_INPUT,
                        "--cp %lld with %s's sliding-window attention: the CP ranks' share of a windowed causal "
                        "attention is not modelled (hint: --cp 1)",
                        (long long)p->cp, m->name);
    int64_t chunks[PX_MAX_CHUNK_LIST];
    if (p->pp * p->vpp <= PX_MAX_CHUNK_LIST && px_parallel_chunk_layers(p, m->layers, chunks, NULL) == PX_OK)
      for (int64_t i = 0; i < p->pp * p->vpp; i++)
        if (chunks[i] % 2)
          return px_err_set(err, PX_ERR_INPUT,
                            "%s alternates sliding-window and full attention layers; each model chunk must hold an "
                            "even number of layers (chunk %lld has %lld; hint: a --pp/--vpp dividing %lld / 2 "
                            "layer pairs, or --layers-per-chunk with even counts)",
                            m->name, (long long)i, (long long)chunks[i], (long long)m->layers);
  }
  if (m->kv_lora_rank > 0 && (p->cp > 1 || p->attention != PX_ATTN_FLASH))
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: multi-head latent attention is planned with the fused attention and no context parallelism "
                      "(hint: --attention flash, --cp 1)",
                      m->name);
  if (p->vpp < 1) return px_err_set(err, PX_ERR_INPUT, "--vpp must be at least 1");
  if (p->pp * p->vpp > m->layers)
    return px_err_set(err, PX_ERR_INPUT, "pp %lld x vpp %lld stages is more than the %lld layers", (long long)p->pp,
                      (long long)p->vpp, (long long)m->layers);
  int64_t mbs_n = px_parallel_microbatches(p), passes = px_parallel_layer_passes(p, m->layers);
  if (passes > PX_PLAN_LAYER_PASSES_MAX) {
    int64_t per = m->layers + p->pp * p->vpp, most = PX_PLAN_LAYER_PASSES_MAX / per * p->mbs * p->dp;
    return px_err_set(err, PX_ERR_INPUT,
                      "gbs %lld makes %lld micro-batches a step (gbs / (mbs %lld x dp %lld)), each through %lld "
                      "layers and %lld pipeline chunks: %lld layer passes, more than the %lld a plan may have (up to "
                      "about 1 GiB and 20 s to compile and simulate at the limit; hint: gbs %lld or less, or a larger "
                      "mbs)",
                      (long long)p->gbs, (long long)mbs_n, (long long)p->mbs, (long long)p->dp, (long long)m->layers,
                      (long long)(p->pp * p->vpp), (long long)passes, (long long)PX_PLAN_LAYER_PASSES_MAX,
                      (long long)most);
  }
  if (p->schedule == PX_SCHED_INTERLEAVED) {
    if (p->pp < 2)
      return px_err_set(err, PX_ERR_INPUT, "the interleaved schedule needs pp > 1 (hint: --schedule 1f1b)");
    if (p->vpp < 2)
      return px_err_set(err, PX_ERR_INPUT, "the interleaved schedule needs --vpp 2 or more model chunks per rank");
    if (mbs_n < p->pp)
      return px_err_set(err, PX_ERR_INPUT,
                        "the interleaved schedule needs at least pp %lld micro-batches, there are %lld (hint: --gbs %lld)",
                        (long long)p->pp, (long long)mbs_n, (long long)(p->pp * p->mbs * p->dp));
    if (p->mb_group > 0 && !mb_group_ok(p->mb_group, mbs_n, p->pp)) {
      int64_t auto_g = 0;
      for (int64_t g = p->pp; g <= mbs_n && !auto_g; g++)
        if (mb_group_ok(g, mbs_n, p->pp)) auto_g = g;
      if (p->mb_group < p->pp || p->mb_group > mbs_n)
        return px_err_set(err, PX_ERR_INPUT,
                          "--microbatch-group %lld must be from pp %lld to the %lld micro-batches (hint: %lld)",
                          (long long)p->mb_group, (long long)p->pp, (long long)mbs_n, (long long)auto_g);
      return px_err_set(err, PX_ERR_INPUT,
                        "--microbatch-group %lld leaves a last group of %lld micro-batches, fewer than pp %lld: it "
                        "would stall the pipeline (Megatron-Core refuses it too; hint: --microbatch-group %lld)",
                        (long long)p->mb_group, (long long)(mbs_n % p->mb_group), (long long)p->pp,
                        (long long)auto_g);
    }
  } else if (p->vpp > 1) {
    return px_err_set(err, PX_ERR_INPUT, "--vpp %lld needs --schedule interleaved", (long long)p->vpp);
  } else if (px_parallel_split_w(p) && p->pp < 2) {
    return px_err_set(err, PX_ERR_INPUT, "--schedule %s needs pp > 1: it fills pipeline bubbles (hint: --schedule 1f1b)",
                      px_schedule_names[p->schedule]);
  } else if (px_parallel_split_w(p) && p->zero == 3) {
    return px_err_set(err, PX_ERR_INPUT,
                      "--schedule %s defers weight gradients, which ZeRO-3's per-layer gathers and reduce-scatters "
                      "are not planned for (hint: --zero 1 or 2, or --schedule 1f1b)",
                      px_schedule_names[p->schedule]);
  } else if (p->mb_group > 0) {
    return px_err_set(err, PX_ERR_INPUT, "--microbatch-group groups micro-batches per chunk: it needs --schedule interleaved");
  }
  {
    int64_t *split = px_calloc((size_t)(p->pp * p->vpp), sizeof *split, err);
    if (!split) return PX_ERR_RUNTIME;
    px_status st = px_parallel_chunk_layers(p, m->layers, split, err);
    free(split);
    if (st) return st;
  }
  if (p->schedule < 0 || p->schedule >= PX_SCHED_COUNT || p->recompute < 0 || p->recompute >= PX_RECOMPUTE_COUNT ||
      p->precision < 0 || p->precision >= PX_PREC_COUNT || p->attention < 0 || p->attention >= PX_ATTN_COUNT || p->gelu < 0 ||
      p->gelu >= PX_GELU_COUNT)
    return px_err_set(err, PX_ERR_INPUT, "schedule, recompute, precision, attention or gelu is not set");
  if (p->prefetch < 0 || p->prefetch > 64) return px_err_set(err, PX_ERR_INPUT, "--prefetch must be 0 to 64 units");
  if (p->reshard < 0 || p->reshard > 1 || p->grad_accum < 0 || p->grad_accum >= PX_ACCUM_COUNT || p->main_grad < 0 ||
      p->main_grad >= PX_MAIN_GRAD_COUNT)
    return px_err_set(err, PX_ERR_INPUT, "reshard, grad-accum or main-grad is not set");
  if (!p->reshard && p->zero != 3)
    return px_err_set(err, PX_ERR_INPUT,
                      "--no-reshard-after-forward keeps ZeRO-3's gathered parameters; ZeRO-%d has none (hint: --zero 3)",
                      p->zero);
  if (p->grad_accum == PX_ACCUM_SHARDED && p->zero < 2)
    return px_err_set(err, PX_ERR_INPUT,
                      "--grad-accum sharded needs ZeRO-2 or 3: ZeRO-%d keeps the full gradient (hint: --grad-accum full)",
                      p->zero);
  if (p->offload_opt < 0 || p->offload_opt >= PX_OFFLOAD_COUNT || p->offload_params < 0 ||
      p->offload_params >= PX_OFFLOAD_COUNT)
    return px_err_set(err, PX_ERR_INPUT, "offload-optimizer or offload-params is not set");
  if (p->offload_opt && p->zero < 2)
    return px_err_set(err, PX_ERR_INPUT,
                      "--offload-optimizer streams each reduced gradient shard to the host: it needs ZeRO-2 or 3, "
                      "not ZeRO-%d (hint: --zero 2)",
                      p->zero);
  if (p->offload_params && (p->zero != 3 || !p->offload_opt))
    return px_err_set(err, PX_ERR_INPUT,
                      "--offload-params keeps ZeRO-3's parameter shard off the GPU, updated where the optimizer runs: "
                      "it needs --zero 3 and --offload-optimizer (hint: --zero 3 --offload-optimizer %s)",
                      px_offload_names[p->offload_params]);
  if (p->offload_opt && px_parallel_hybrid(p))
    return px_err_set(err, PX_ERR_INPUT,
                      "--offload-optimizer with --shard-group %lld: offloading hybrid-sharded states is not modelled "
                      "(hint: drop one of them)",
                      (long long)p->shard_group);
  if (p->offload_opt && (c->host_pcie_bytes_per_s <= 0 || c->host_cpu_adam_params_per_s <= 0))
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: offload needs the cluster's host.pcie_gb_per_s and host.cpu_adam_gparams_per_s "
                      "(add them to the cluster file)",
                      c->name);
  if ((p->offload_opt == PX_OFFLOAD_NVME || p->offload_params == PX_OFFLOAD_NVME) &&
      (c->host_nvme_bytes_per_s <= 0 || c->host_nvme_bytes == 0))
    return px_err_set(err, PX_ERR_INPUT,
                      "%s: NVMe offload needs the cluster's host.nvme_gb_per_s and host.nvme_tb (add them to the "
                      "cluster file)",
                      c->name);
  if (px_parallel_mixed(p) && c->gpu.peak_flops[px_parallel_compute_dtype(p)] <= 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: the %s has no %s peak (hint: --precision fp32)", c->name, c->gpu.name,
                      px_precision_names[p->precision]);
  if (p->precision == PX_PREC_FP8 && c->gpu.peak_flops[PX_DTYPE_FP8] <= 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: the %s has no fp8 tensor cores (gpu.peak_tflops.fp8) (hint: --precision bf16)",
                      c->name, c->gpu.name);
  return PX_OK;
}

int64_t px_parallel_microbatches(const px_parallel *p) {
  return p->mbs > 0 && p->dp > 0 ? p->gbs / (p->mbs * p->dp) : 0;
}

int64_t px_parallel_layer_passes(const px_parallel *p, int64_t layers) {
  int64_t m = px_parallel_microbatches(p), per = layers + p->pp * p->vpp; /* pp < 2^25, vpp < 2^17 */
  return m > 0 && per > INT64_MAX / m ? INT64_MAX : m * per;
}

px_dtype px_parallel_compute_dtype(const px_parallel *p) {
  switch (p->precision) {
    case PX_PREC_BF16: return PX_DTYPE_BF16;
    case PX_PREC_FP8: return p->fp8_base == PX_FP8_BASE_FP32 ? PX_DTYPE_FP32 : PX_DTYPE_BF16;
    case PX_PREC_FP16: return PX_DTYPE_FP16;
    default: return PX_DTYPE_FP32;
  }
}

bool px_parallel_mixed(const px_parallel *p) { return px_parallel_compute_dtype(p) != PX_DTYPE_FP32; }

px_dtype px_parallel_grad_dtype(const px_parallel *p) {
  return px_parallel_mixed(p) && p->main_grad == PX_MAIN_GRAD_FP32 ? PX_DTYPE_FP32 : px_parallel_compute_dtype(p);
}

px_status px_overlap_parse(const char *s, int *bits, px_err *err) {
  int out = 0;
  const char *p = s;
  while (*p) {
    size_t n = strcspn(p, ",");
    int bit = -1;
    if (n == 3 && !strncmp(p, "all", n)) bit = PX_OVERLAP_ALL;
    if (n == 4 && !strncmp(p, "none", n)) bit = 0;
    for (int i = 0; i < PX_OVERLAP_BITS && bit < 0; i++)
      if (strlen(px_overlap_names[i]) == n && !strncmp(p, px_overlap_names[i], n)) bit = 1 << i;
    if (bit < 0)
      return px_err_set(err, PX_ERR_INPUT, "overlap '%.*s' is not one of dp, zero, pp, tp, tp-bwd, all, none", (int)n,
                        p);
    if (bit & PX_OVERLAP_TP) bit |= PX_OVERLAP_TP_BWD; /* all TP overlap includes the backward's */
    out |= bit;
    p += n;
    if (*p == ',') p++;
  }
  *bits = out;
  return PX_OK;
}

#define TRY(x) \
  if ((st = (x))) return st

px_status px_parallel_from_json(const cJSON *obj, const char *file, px_parallel *p, px_err *err) {
  px_parallel_unset(p);
  if (!cJSON_IsObject(obj)) return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel': expected an object", file);
  px_json_ctx c = {file, "parallel."};
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
  TRY(px_json_num(&c, obj, "moe_imbalance", false, 1.0, 1e6, &p->moe_imbalance, err));
  TRY(px_json_int(&c, obj, "zero", false, 0, 3, &v, err));
  p->zero = (int)v;
  bool sp = false;
  if (cJSON_GetObjectItemCaseSensitive(obj, "sp")) {
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
  const cJSON *lpc = cJSON_GetObjectItemCaseSensitive(obj, "layers_per_chunk");
  if (lpc) {
    if (!cJSON_IsArray(lpc) || cJSON_GetArraySize(lpc) < 1 || cJSON_GetArraySize(lpc) > PX_MAX_CHUNK_LIST)
      return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel.layers_per_chunk': expected an array of 1 to %d counts",
                        file, PX_MAX_CHUNK_LIST);
    const cJSON *x;
    cJSON_ArrayForEach(x, lpc) {
      if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 65535 || x->valuedouble != (double)(int64_t)x->valuedouble)
        return px_err_set(err, PX_ERR_INPUT, "%s: field 'parallel.layers_per_chunk': entries must be whole counts from 1",
                          file);
      p->chunk_layers[p->nchunk_layers++] = (uint16_t)x->valuedouble;
    }
  }
  if (cJSON_GetObjectItemCaseSensitive(obj, "reshard_after_forward")) {
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
  TRY(px_json_enum(&c, obj, "precision", false, px_precision_names, PX_PREC_COUNT, &p->precision, err));
  TRY(px_json_enum(&c, obj, "fp8_recipe", false, px_fp8_recipe_names, PX_FP8_RECIPE_COUNT, &p->fp8_recipe, err));
  TRY(px_json_enum(&c, obj, "fp8_base", false, px_fp8_base_names, PX_FP8_BASE_COUNT, &p->fp8_base, err));
  TRY(px_json_enum(&c, obj, "attention", false, px_attention_names, PX_ATTN_COUNT, &p->attention, err));
  TRY(px_json_enum(&c, obj, "gelu", false, px_gelu_names, PX_GELU_COUNT, &p->gelu, err));
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
  return PX_OK;
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
  if (p->moe_imbalance > 1) px_json_add_num(o, "moe_imbalance", p->moe_imbalance);
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
  if (p->precision >= 0) cJSON_AddStringToObject(o, "precision", px_precision_names[p->precision]);
  if (p->precision == PX_PREC_FP8 && p->fp8_recipe >= 0)
    cJSON_AddStringToObject(o, "fp8_recipe", px_fp8_recipe_names[p->fp8_recipe]);
  if (p->precision == PX_PREC_FP8 && p->fp8_base >= 0) cJSON_AddStringToObject(o, "fp8_base", px_fp8_base_names[p->fp8_base]);
  if (p->attention >= 0) cJSON_AddStringToObject(o, "attention", px_attention_names[p->attention]);
  if (p->gelu >= 0) cJSON_AddStringToObject(o, "gelu", px_gelu_names[p->gelu]);
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
