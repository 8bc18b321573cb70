/* The backend conformance suite, in the spirit of ggml's test-backend-ops:
 * every op kind of the graph, in fp32, bf16 and fp16, on every backend of
 * this build (cpu; cuda where a device, or tests/gpu/emu's emulated one, is
 * present), through the backend interface: px_backend's entries called with
 * the px_exec_op the interpreter passes, on the ops of small plans with odd
 * sizes (7-token sequences of 3, 5-wide heads, GQA, a padded vocabulary
 * shard at TP rank 1 with SP, a tensor-core head dim, a head dim of 320;
 * mixture-of-experts layers: softmax and sigmoid routers, top-1 and top-2,
 * norm_topk_prob on and off, a load-balancing loss, SwiGLU experts' split
 * gate/up GEMMs, and per op an expert that takes no row and tied logits).
 *  - the cpu backend against plain double-precision references written here
 *    (not kernels/cpu), fp32, tight tolerances;
 *  - every backend against the cpu backend, on the same inputs rounded to
 *    the dtype under test, with that dtype's tolerances (those of
 *    tests/gpu/test_cuda_kernels.c);
 *  - a (kind, dtype) that a backend's supports_op refuses is printed as
 *    skipped; one it accepts must then be right; the cpu backend must accept
 *    every fp32 op; the walk of a plan (exec/support.h) refuses what a
 *    backend refuses, with the op, its dtype and the reason;
 *  - the collectives and p2p through the backend's entries: on one rank
 *    here; across ranks (sums, maxima, gathers, scatters in TP, DP and world
 *    groups) with `mpirun -np 4 test_backend_ops --collectives`, which
 *    tests/CMakeLists.txt and tests/gpu/emu/run.sh run;
 *  - every op kind (PX_OP_KINDS) has a reference here and ran: a new kind
 *    fails the suite until it has one.
 * Like ggml's test-backend-ops, `-o OP[,OP...]` runs only the ops of those
 * kinds and `-b BACKEND` (cpu or cuda) only that backend (the cpu backend
 * still computes what the others are compared with); either leaves out the
 * whole-suite checks (fills, the support walk, fp8, coverage). `--perf`
 * times each op case on each backend instead and prints the table, never
 * asserting a time.
 * The references use the shared definitions of the random streams
 * (px_exec_dropout_seed, px_dropout_keep) and compute every index and
 * value themselves. LOSS at TP rank 1 runs without the interpreter's
 * px_op_comm, so nothing reduces its statistics: the shard's own (the
 * cross-rank loss is tests/cli's and exec.sh's). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "exec/backend.h"
#include "exec/comm.h"
#include "exec/contract.h"
#include "exec/cpu/backend.h"
#include "exec/cpu/fp8.h"
#include "exec/env.h"
#include "exec/support.h"
#include "tests/fp8_ref.h"
#include "kernels/cpu/mx.h"
#include "kernels/math.h"
#include "plan/plan.h"
#include "tests/testplan.h"
#include "tests/testutil.h"
#include "exec/cuda_load.h"
#include "exec/interp.h"
#include "exec/train.h"

/* ======================= plans with odd sizes ======================= */

typedef struct {
  const char *name;
  bool gpt; /* tiny-gpt's shape (LayerNorm, GELU, learned positions, biases, tied embeddings), else tiny's
               (RMSNorm, SwiGLU, RoPE) */
  int64_t hidden, heads, kv_heads, head_dim, ffn, vocab, seq, mbs;
  double dropout;
  int attention, gelu;
  bool parallel_residual;
  int64_t tp, tp_rank; /* tp > 1: with sequence parallelism, run as TP rank tp_rank */
  /* mixture of experts (experts 0: dense): every layer's MLP is `experts` routed experts of moe_ffn, top-k */
  int64_t experts, topk, moe_ffn;
  px_router router;
  bool norm_topk;
  double aux;
  /* RoPE's scaling: REF_YARN gpt-oss's (theta 150000, factor 32 over 4,096 positions, its concentration),
   * REF_LLAMA3 Llama 3.1's (theta 500000, 8 over 8,192 positions), REF_LINEAR interpolation by 4, REF_PARTIAL
   * a partial rotary (half of each head, GPT-NeoX's kind); 0 none */
  int rope_scaling;
} config;

enum { REF_YARN = 1, REF_LLAMA3, REF_LINEAR, REF_PARTIAL };

static const config configs[] = {
    /* unfused attention with dropout; GELU in fc1's epilogue, F = 36 not a multiple of 8 (the epilogue kernel) */
    {"gpt-unfused", true, 20, 4, 4, 5, 36, 37, 7, 3, 0.1, PX_ATTN_UNFUSED, PX_GELU_FUSED, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* fused attention with dropout, GELU as its own op, parallel residual */
    {"gpt-flash", true, 20, 4, 4, 5, 36, 37, 7, 3, 0.1, PX_ATTN_FLASH, PX_GELU_SEPARATE, true, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* GQA (3 query heads per kv head), fused attention with dropout */
    {"llama-gqa", false, 24, 6, 2, 4, 20, 41, 9, 2, 0.1, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* unfused GQA */
    {"llama-unfused", false, 24, 6, 3, 4, 20, 41, 9, 2, 0.0, PX_ATTN_UNFUSED, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* a tensor-core head dim, 19 positions (not a multiple of the tiles) */
    {"llama-d16", false, 32, 4, 2, 16, 24, 33, 19, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* TP rank 1 of 2 with SP: vocabulary shard [256, 512) with 45 real columns, position and dropout
       offsets; GELU epilogue on F / tp = 40 (a multiple of 8: cuBLASLt's own) */
    {"gpt-tp2-sp", true, 20, 4, 4, 5, 80, 301, 8, 3, 0.1, PX_ATTN_FLASH, PX_GELU_FUSED, false, 2, 1,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* gpt-oss's YaRN RoPE on a head dim of 16: pairs 0-2 at theta's frequencies, 3-4 on the ramp, 5-7 over 32 */
    {"llama-yarn", false, 32, 4, 2, 16, 24, 33, 19, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, REF_YARN},
    /* Llama 3.1's scaled RoPE on a head dim of 16: pairs 0-3 kept, 4 blended, 5-7 slowed 8 times */
    {"llama-scaled", false, 32, 4, 2, 16, 24, 33, 19, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, REF_LLAMA3},
    /* linear position interpolation by 4 */
    {"llama-linear", false, 32, 4, 2, 16, 24, 33, 19, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, REF_LINEAR},
    /* a partial rotary: the first 8 dims of each head of 16 rotated at their own frequencies, 8 passed through */
    {"llama-partial", false, 32, 4, 2, 16, 24, 33, 19, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, REF_PARTIAL},
    /* a head dim beyond the CUDA flash kernels' 256 */
    {"gpt-d320", true, 16, 2, 2, 320, 16, 19, 3, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0,
     0, 0, 0, PX_ROUTER_SOFTMAX, false, 0.0, 0},
    /* mixture of experts (ep 1, tp 1: what the cpu backend runs). Softmax router, top-2 of 4 without
       renormalising, a load-balancing loss; SwiGLU experts (gate and up: split outputs of the expert GEMMs) */
    {"moe-softmax", false, 24, 6, 2, 4, 20, 41, 7, 2, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0, 4, 2, 12,
     PX_ROUTER_SOFTMAX, false, 0.01, 0},
    /* top-2 of 5 renormalised (norm_topk_prob), no load-balancing loss; GELU experts, with dropout */
    {"moe-norm-gelu", true, 20, 4, 4, 5, 36, 37, 5, 3, 0.1, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0, 5, 2, 16,
     PX_ROUTER_SOFTMAX, true, 0.0, 0},
    /* top-1 of 3 (Switch), a load-balancing loss */
    {"moe-top1", false, 24, 6, 2, 4, 20, 41, 9, 1, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0, 3, 1, 10,
     PX_ROUTER_SOFTMAX, false, 0.05, 0},
    /* sigmoid scores normalised over the top-2 of 6 (DeepSeek-V3), a load-balancing loss */
    {"moe-sigmoid", false, 24, 6, 2, 4, 20, 41, 6, 2, 0.0, PX_ATTN_FLASH, PX_GELU_SEPARATE, false, 1, 0, 6, 2, 8,
     PX_ROUTER_SIGMOID, false, 0.02, 0},
};
#define NCONFIGS ((int)(sizeof configs / sizeof configs[0]))

static const px_precision precisions[] = {PX_PREC_FP32, PX_PREC_BF16, PX_PREC_FP16};
#define NDT 3

static px_status plan_of(const config *g, px_precision prec, px_plan *plan, px_err *err) {
  px_model m;
  px_cluster c;
  px_status st = px_model_load(g->gpt ? "tiny-gpt" : "tiny", &m, err);
  if (st) return st;
  m.layers = 1, m.hidden = g->hidden, m.heads = g->heads, m.kv_heads = g->kv_heads, m.head_dim = g->head_dim;
  m.ffn_hidden = g->ffn, m.vocab = g->vocab, m.seq_len = g->seq, m.max_positions = g->seq + 3;
  m.dropout = g->dropout, m.parallel_residual = g->parallel_residual;
  if (g->experts > 0) { /* set here, not from a preset: every layer a MoE layer, no shared experts, dropless */
    m.experts = g->experts, m.experts_per_token = g->topk, m.moe_ffn_hidden = g->moe_ffn;
    m.shared_experts = 0, m.shared_ffn_hidden = 0, m.first_dense_layers = 0, m.moe_layer_freq = 1;
    m.router = g->router, m.norm_topk_prob = g->norm_topk, m.aux_loss_coef = g->aux, m.capacity_factor = 0;
  }
  if (g->rope_scaling == REF_PARTIAL) {
    m.rope_fraction = 0.5;
  } else if (g->rope_scaling == REF_LINEAR) {
    m.rope_linear_factor = 4.0;
  } else if (g->rope_scaling == REF_YARN) {
    m.rope_theta = 150000.0, m.rope_concentration = 0.1 * log(32.0) + 1.0;
    m.rope_yarn.factor = 32.0, m.rope_yarn.original_positions = 4096, m.rope_yarn.truncate = false;
  } else if (g->rope_scaling == REF_LLAMA3) {
    m.rope_theta = 500000.0, m.rope_llama3.factor = 8.0, m.rope_llama3.original_positions = 8192;
    m.rope_llama3.low_freq_factor = 1.0, m.rope_llama3.high_freq_factor = 4.0;
  }
  if ((st = px_model_validate(&m, g->name, err)) || (st = px_cluster_load("dgx-h100", &c, err)) ||
      (st = px_cluster_set_size(&c, g->tp, 0, err)))
    return st;
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = g->tp, p.pp = 1, p.dp = 1, p.sp = g->tp > 1, p.zero = 0, p.mbs = g->mbs, p.gbs = g->mbs;
  p.attention = g->attention, p.gelu = g->gelu, p.precision = (int)prec, p.recompute = PX_RECOMPUTE_NONE;
  px_parallel_resolve(&p, &m, &c);
  return px_plan_compile(plan, &m, &c, &p, err);
}

/* ======================= backends ======================= */

typedef struct {
  const char *name;
  px_backend *be;
} backend_t;

static backend_t backends[2];
static int nbackends;
static px_comm comm;          /* the communicators the backends hold (world: one rank, or --collectives' ranks) */
static px_plan comm_plan[NDT]; /* the plan they come from, in each precision */
static px_env comm_env[NDT];   /* ... and its op env */
static bool collectives_only;
static int world_rank, world_size;

/* -o and -b: the kinds and the backend the command line asks for (all without them). */
static bool kind_filtered;
static bool kind_asked[PX_OP_COUNT];
static const char *backend_asked;

static bool kind_wanted(px_op_kind k) { return !kind_filtered || kind_asked[k]; }
static bool backend_wanted(int bi) { return !backend_asked || !strcmp(backends[bi].name, backend_asked); }

/* ======================= results ======================= */

typedef struct {
  int ok, widened, skipped, failed;
  double worst;  /* the largest error seen, as a fraction of its tolerance */
  char why[256]; /* the first skip's reason, and the plan it came from */
  const char *where;
} cell;

static cell cells[2][PX_OP_COUNT][NDT];
static int ref_ok[PX_OP_COUNT]; /* cpu-against-reference checks passed, per kind */

static const px_dtype dtypes[NDT] = {PX_DTYPE_FP32, PX_DTYPE_BF16, PX_DTYPE_FP16};
static int dt_index(px_dtype dt) { return dt == PX_DTYPE_BF16 ? 1 : dt == PX_DTYPE_FP16 ? 2 : 0; }

/* ======================= tolerances ======================= */

/* |got - want| <= atol + rtol (|want| + scale max|want|) per element; with
 * l2 > 0 also ||got - want|| <= l2 ||want|| over the tensor. */
typedef struct {
  double rtol, atol, l2, scale;
} tol;

/* The cpu backend against the double references: fp32 arithmetic on O(1)
 * inputs; elementwise math within a few ulp, sums of up to 320 terms (the
 * longest here) within ~1e-6 relative of their terms' magnitude. A wrong
 * index, sign or missing term is off by ~1e-1. */
static const tol REF_ELEM = {1e-5, 1e-6, 0, 0}, REF_RED = {1e-5, 2e-5, 0, 0};
/* A backend against the cpu backend, as tests/gpu/test_cuda_kernels.c's:
 * fp32 elementwise (libm functions within 1-2 ulp, fused multiply-adds) and
 * with reductions in another order. 16 bits: one rounding of each stored
 * result (2^-9 bf16, 2^-11 fp16) plus fp32 noise, and the roundings of what a
 * backend keeps in 16 bits inside an op (a sum split over several GEMMs, a
 * residual rounded before its bias is added, a GELU of the stored
 * pre-activation), whose error follows the tensor's magnitude, not the
 * element's (scale 1); the tensor-core attention also rounds P and dS to 16
 * bits (FlashAttention-2's practice): checked in L2 as well. */
static const tol ELEM = {1e-5, 1e-6, 0, 0}, RED = {1e-4, 1e-5, 0, 0}, BF16 = {1e-2, 1e-4, 0, 1},
                 FP16 = {2e-3, 1e-4, 0, 1}, TC = {2e-2, 5e-3, 1e-2, 1};

static bool is_reduction(px_op_kind k) {
  switch (px_op_family_of(k)) {
    case PX_FAM_NORM:
    case PX_FAM_GEMM:
    case PX_FAM_ATTENTION:
    case PX_FAM_FLASH:
    case PX_FAM_LOSS: return true;
    /* the routing ops that sum: over the experts (the router's backward), a token's k rows, a row's h columns */
    case PX_FAM_ELEMENTWISE:
      return k == PX_OP_MOE_ROUTE_BWD || k == PX_OP_MOE_PERMUTE_BWD || k == PX_OP_MOE_UNPERMUTE ||
             k == PX_OP_MOE_UNPERMUTE_BWD;
    default: return k == PX_OP_GRAD_NORM;
  }
}

/* A backend's outputs of dtype dt against the cpu backend's. */
static tol tol_for(px_op_kind k, px_dtype dt) {
  if (dt == PX_DTYPE_FP32) return is_reduction(k) ? RED : ELEM;
  if (k == PX_OP_FLASH_ATTN || k == PX_OP_FLASH_ATTN_BWD) return TC;
  return dt == PX_DTYPE_BF16 ? BF16 : FP16;
}

static double worst_seen; /* the largest error of the comparisons since it was reset, over its tolerance */

/* Counts the elements outside the tolerance; prints the worst. */
static bool close_enough(const char *label, const float *got, const double *want, int64_t n, tol t) {
  int64_t bad = 0, worst = -1;
  double worst_r = 0, d2 = 0, w2 = 0, big = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(want[i]) && fabs(want[i]) > big) big = fabs(want[i]);
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i], lim = t.atol + t.rtol * (fabs(w) + t.scale * big);
    double r = g == w || (isnan(g) && isnan(w)) ? 0 : isfinite(g) ? fabs(g - w) / lim : INFINITY;
    if (!(r <= 1)) bad++;
    if (!(r <= worst_r)) worst_r = r, worst = i;
    if (isfinite(g) && isfinite(w)) d2 += (g - w) * (g - w), w2 += w * w;
  }
  bool l2_ok = t.l2 <= 0 || sqrt(d2) <= t.l2 * sqrt(w2) + t.atol;
  if (!(worst_r <= worst_seen)) worst_seen = worst_r;
  if (bad || !l2_ok) {
    fprintf(stderr, "\n  FAIL %s: %lld of %lld elements off", label, (long long)bad, (long long)n);
    if (worst >= 0)
      fprintf(stderr, ", worst [%lld] got %.8g want %.8g (%.3g x the tolerance)", (long long)worst, got[worst],
              want[worst], worst_r);
    if (!l2_ok) fprintf(stderr, "; relative L2 error %.3g > %.3g", sqrt(d2) / sqrt(w2), t.l2);
    fprintf(stderr, "\n");
  }
  return !bad && l2_ok;
}

/* ======================= one op's case ======================= */

#define DT_I32 ((int)PX_DTYPE_COUNT) /* tokens and targets: int32 in a 4-byte slot */
#define MAXB (PX_OP_OUTS + PX_OP_INS)

typedef struct {
  px_ref ref;
  int64_t n;
  int dev, dev32;   /* element type in the plan under test and in its fp32 twin (px_dtype or DT_I32) */
  bool in, out;     /* an input, an output (both: in place) */
  bool init;        /* uploaded before the op: an input, or an output that accumulates or updates */
  float *x;         /* (n) what is uploaded; ints and masks as exact floats */
  double *want;     /* (n) the reference's outputs */
  float *cpu;       /* (n) the cpu backend's outputs on the twin */
} buf;

typedef struct {
  const config *cfg;
  const char *where;        /* the block the op comes from */
  const px_plan *plan, *plan32;
  px_env env, env32;        /* the op envs of both, for the case's TP rank (as the interpreter makes them) */
  px_op op, op32;
  px_dtype dt;              /* the op's dtype in the plan under test */
  buf b[MAXB];
  int nb, out[PX_OP_OUTS], in[PX_OP_INS];
  bool host_tokens;         /* EMBED_BWD: pass the host's tokens (as the interpreter does) */
  int variant;              /* of the kinds with several cases per op (for_each_case) */
  int64_t tp_rank, layer, step;
  uint64_t seed, seq_index[8];
  float loss_scale;
  int64_t count;            /* ops on gradient ranges */
  float lr, beta1, beta2, eps, wd, grad_scale;
  int64_t adam_t;
  double sumsq0, sumsq_want, sumsq_cpu;
} opcase;

static size_t el_bytes(int dev) { return dev == DT_I32 ? 4 : (size_t)px_dtype_bytes((px_dtype)dev); }

/* The operands that hold int32 in an fp32 slot: the router's choices and the rows per expert (the 'I' of
 * exec/support.c's contract). */
static bool int_operand(px_op_kind k, bool is_out, int j) {
  switch (k) {
    case PX_OP_MOE_ROUTE: return is_out && j == 1;
    case PX_OP_MOE_ROUTE_BWD:
    case PX_OP_MOE_UNPERMUTE: return !is_out && j == 2;
    case PX_OP_MOE_PERMUTE: return j == 1;
    case PX_OP_MOE_PERMUTE_BWD: return !is_out && j == 1;
    case PX_OP_MOE_UNPERMUTE_BWD: return !is_out && j == 3;
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
    case PX_OP_EXPERT_BIAS:
    case PX_OP_EXPERT_BIAS_BWD: return !is_out && j == 4;
    default: return false;
  }
}

static int slot_dev(const px_plan *p, px_ref r) {
  const px_slot *s = &p->slots[r.slot];
  return s->role == PX_ROLE_TOKENS || s->role == PX_ROLE_TARGETS ? DT_I32 : (int)s->dtype;
}

/* Operand j (an output, or an input) of op o. */
static int operand_dev(const px_plan *p, const px_op *o, bool is_out, int j) {
  px_ref r = is_out ? o->out[j] : o->in[j];
  return int_operand((px_op_kind)o->kind, is_out, j) ? DT_I32 : slot_dev(p, r);
}

static bool is_half(int dev) { return dev == PX_DTYPE_BF16 || dev == PX_DTYPE_FP16; }

static float round_to(float x, int dev) {
  if (!is_half(dev)) return x;
  uint16_t h;
  float y;
  px_dtype_from_fp32(&h, (px_dtype)dev, &x, 1);
  px_dtype_to_fp32(&y, &h, (px_dtype)dev, 1);
  return y;
}

/* The buffer of a ref: one per distinct tensor (in-place ops name one twice). */
static int buf_of(opcase *c, px_ref r, int64_t n, int dev, int dev32) {
  for (int i = 0; i < c->nb; i++)
    if (c->b[i].ref.slot == r.slot && c->b[i].ref.layer_off == r.layer_off && r.slot >= 0) return i;
  buf *b = &c->b[c->nb];
  memset(b, 0, sizeof *b);
  b->ref = r, b->n = n, b->dev = dev, b->dev32 = dev32;
  b->x = px_tfloats(n);
  b->want = px_talloc((size_t)n * sizeof *b->want);
  return c->nb++;
}

static void case_common(opcase *c) {
  c->tp_rank = c->cfg ? c->cfg->tp_rank : 0;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_env_init(&c->env, c->plan, c->tp_rank, 0, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_env_init(&c->env32, c->plan32, c->tp_rank, 0, &err), PX_OK);
  c->layer = 1, c->step = 5, c->seed = 1234;
  uint64_t rows[8] = {5, 2, 9, 0, 7, 3, 11, 1}; /* the micro-batch's global sequence numbers */
  memcpy(c->seq_index, rows, sizeof rows);
  c->loss_scale = 0.75f;
  c->lr = 1e-2f, c->beta1 = 0.9f, c->beta2 = 0.95f, c->eps = 1e-8f, c->wd = 0.1f, c->grad_scale = 0.5f, c->adam_t = 3;
  c->sumsq0 = 0.25;
  c->host_tokens = true;
}

static bool accumulates(const opcase *c) { return (c->op.flags & PX_OPF_ACCUMULATE) || c->op.kind == PX_OP_ACC; }

/* A case for op k of block blk of the plans (the one under test and its fp32 twin). */
static void case_of_op(opcase *c, const config *g, const px_plan *plan, const px_plan *plan32, int blk, int k) {
  memset(c, 0, sizeof *c);
  c->cfg = g, c->plan = plan, c->plan32 = plan32, c->where = px_block_names[blk];
  c->op = plan->blocks[blk].ops[k];
  c->op32 = plan32->blocks[blk].ops[k];
  /* the twin is the same op in fp32 */
  CU_ASSERT(c->op32.kind == c->op.kind && !memcmp(c->op32.dim, c->op.dim, sizeof c->op.dim));
  case_common(c);
  c->dt = px_contract_dtype(&c->env, &c->op);
  for (int j = 0; j < PX_OP_OUTS; j++) c->out[j] = -1;
  for (int j = 0; j < PX_OP_INS; j++) c->in[j] = -1;
  for (int side = 0; side < 2; side++)
    for (int j = 0; j < (side ? PX_OP_INS : PX_OP_OUTS); j++) {
      px_ref r = side ? c->op.in[j] : c->op.out[j];
      if (r.slot < 0) continue;
      int i = buf_of(c, r, (int64_t)plan->slots[r.slot].elems, operand_dev(plan, &c->op, !side, j),
                     operand_dev(plan32, &c->op32, !side, j));
      (side ? c->in : c->out)[j] = i;
      if (side) c->b[i].in = true, c->b[i].init = true;
      else c->b[i].out = true;
    }
  for (int i = 0; i < c->nb; i++)
    if (c->b[i].out && accumulates(c)) c->b[i].init = true;
  /* MOE_PERMUTE writes the first part of the counts slot (out[1]): the rest must keep its values */
  if (c->op.kind == PX_OP_MOE_PERMUTE && c->out[1] >= 0) c->b[c->out[1]].init = true;
}

/* A case for an op on gradient ranges (no slots: ACC, GRAD_NORM, ADAMW) of `count` elements. */
static void case_of_range(opcase *c, px_op_kind kind, const px_plan *plan, const px_plan *plan32, int64_t count) {
  memset(c, 0, sizeof *c);
  c->plan = plan, c->plan32 = plan32, c->where = "optimizer";
  case_common(c);
  px_op op = {.kind = (uint8_t)kind};
  for (int j = 0; j < PX_OP_OUTS; j++) op.out[j] = (px_ref){-1, 0}, c->out[j] = -1;
  for (int j = 0; j < PX_OP_INS; j++) op.in[j] = (px_ref){-1, 0}, c->in[j] = -1;
  op.dim[0] = count;
  c->op = c->op32 = op;
  c->count = count;
  c->dt = px_contract_dtype(&c->env, &op);
  int g = (int)plan->grad_dtype;
  bool mixed = plan->par.precision != PX_PREC_FP32;
  px_ref none = {-1, 0};
  if (kind == PX_OP_ACC) {
    c->out[0] = buf_of(c, none, count, g, PX_DTYPE_FP32);
    c->b[c->out[0]].out = c->b[c->out[0]].init = true;
  }
  if (kind == PX_OP_ADAMW) {
    for (int j = 0; j < 3; j++) { /* weights (fp32 master with mixed precision), m, v */
      c->out[j] = buf_of(c, none, count, j == 0 && !mixed ? (int)plan->param_dtype : PX_DTYPE_FP32, PX_DTYPE_FP32);
      c->b[c->out[j]].out = c->b[c->out[j]].init = true;
    }
    if (mixed) { /* the model's copy, rounded; the fp32 twin has none */
      c->out[3] = buf_of(c, none, count, (int)plan->param_dtype, -1);
      c->b[c->out[3]].out = true;
    }
  }
  c->in[0] = buf_of(c, none, count, g, PX_DTYPE_FP32);
  c->b[c->in[0]].in = c->b[c->in[0]].init = true;
}

/* ---- inputs ---- */

static float *X(opcase *c, int j) { return c->in[j] >= 0 ? c->b[c->in[j]].x : NULL; }
static double *W(opcase *c, int j) { return c->out[j] >= 0 ? c->b[c->out[j]].want : NULL; }
/* An output's initial values. */
static float *X0(opcase *c, int j) { return c->out[j] >= 0 ? c->b[c->out[j]].x : NULL; }

static void uniform(float *x, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * px_tunit());
}

/* Tokens in [-1, vocab): -1 is ignored (an embedding row of zeros, a loss of 0). */
static void tokens(float *x, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)((int64_t)(px_tunit() * (double)(vocab + 1)) - 1);
}

/* Causal rows (B H, S, S): a softmax of random scores, zero above the diagonal. */
static void causal_probs(float *p, int64_t bh, int64_t s) {
  for (int64_t r = 0; r < bh * s; r++) {
    int64_t i = r % s;
    double sum = 0;
    for (int64_t j = 0; j < s; j++) p[r * s + j] = j <= i ? (float)exp(2.0 * px_tunit() - 1.0) : 0.0f;
    for (int64_t j = 0; j <= i; j++) sum += p[r * s + j];
    for (int64_t j = 0; j <= i; j++) p[r * s + j] = (float)(p[r * s + j] / sum);
  }
}

static void flash_forward(opcase *c, double *ctx, double *lse); /* the reference, for the backward's inputs */

/* ---- mixture of experts ---- */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The router's probabilities of one token's E logits: softmax, or each expert's sigmoid score. */
static void router_probs(double *p, const double *l, int64_t E, bool sig) {
  double mx = -INFINITY, sum = 0;
  for (int64_t e = 0; e < E; e++) mx = l[e] > mx ? l[e] : mx;
  for (int64_t e = 0; e < E; e++) sum += exp(l[e] - mx);
  for (int64_t e = 0; e < E; e++) p[e] = sig ? sigmoid(l[e]) : exp(l[e] - mx) / sum;
}

/* The k largest of v (E), highest first, a tie to the lower index: expert e goes to place r when r
 * experts come before it (larger, or equal and lower). */
static void topk_row(int64_t *idx, const double *v, int64_t E, int64_t k) {
  for (int64_t e = 0; e < E; e++) {
    int64_t r = 0;
    for (int64_t f = 0; f < E; f++) r += v[f] > v[e] || (v[f] == v[e] && f < e);
    if (r < k) idx[r] = e;
  }
}

static bool sigmoid_router(const opcase *c) { return c->plan->model.router == PX_ROUTER_SIGMOID; }
/* The k weights renormalised to sum to 1: the sigmoid router's always, the softmax's with norm_topk_prob. */
static bool renormalised(const opcase *c) { return sigmoid_router(c) || c->plan->model.norm_topk_prob; }

/* The expert no token chooses in variant 0 (-1: none). */
static int64_t idle_expert(const opcase *c, int64_t E) { return c->variant == 0 ? E / 2 : -1; }

/* Router logits (n, E) in [-2, 2); variant 0: the idle expert's far below, and ties: token 0's all
 * equal (but the idle expert's), token 1's two largest (experts 0 and E - 1), token 2's second and
 * third (experts 0 and 1, with E >= 4). */
static void router_logits(const opcase *c, float *l, int64_t n, int64_t E) {
  int64_t z = idle_expert(c, E);
  uniform(l, n * E, -2, 2);
  if (z < 0) return;
  for (int64_t t = 0; t < n; t++) l[t * E + z] = -3.0f;
  for (int64_t e = 0; e < E; e++)
    if (e != z) l[e] = 0.5f;
  if (n > 1) l[E] = l[E + E - 1] = 2.5f;
  if (n > 2 && E >= 4) l[2 * E + E - 1] = 3.0f, l[2 * E] = l[2 * E + 1] = 2.25f;
}

/* Each token's k distinct experts at random, never the idle one. */
static void random_choices(const opcase *c, float *idx, int64_t n, int64_t k, int64_t E) {
  int64_t z = idle_expert(c, E);
  for (int64_t t = 0; t < n; t++)
    for (int64_t j = 0; j < k; j++) {
      bool again = true;
      while (again) {
        int64_t e = (int64_t)(px_tunit() * (double)E);
        again = e == z;
        for (int64_t i = 0; i < j; i++) again = again || idx[t * k + i] == (float)e;
        idx[t * k + j] = (float)e;
      }
    }
}

/* The counts slot (int32): the rows sent to each of the E experts (MOE_PERMUTE's), then the rows
 * taken from each (source, local expert), source-major (the EP all-to-all's), which the expert GEMMs
 * read. */
static int64_t taken_counts(const opcase *c) { return c->plan->model.experts; }

/* The expert GEMMs' rows per (source, local expert): the routed rows spread at random, none to the
 * idle expert; with one source the rows sent are those taken. */
static void random_counts(const opcase *c, float *counts) {
  int64_t nb = c->plan->par.ep * c->op.dim[3], rows = px_plan_expert_rows(c->plan), z = idle_expert(c, nb);
  float *taken = counts + taken_counts(c);
  for (int64_t b = 0; b < nb; b++) taken[b] = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t b = z;
    while (b == z) b = (int64_t)(px_tunit() * (double)nb);
    taken[b] += 1.0f;
  }
  if (c->plan->par.ep == 1) memcpy(counts, taken, (size_t)nb * sizeof *counts);
}

/* Random inputs in their domains, rounded to the dtype under test where they
 * are 16-bit there; what an input is derived from (norm statistics, the
 * forward's lse and output, log-probabilities) is consistent with it. */
static void gen(opcase *c) {
  const int64_t *d = c->op.dim;
  for (int i = 0; i < c->nb; i++)
    if (c->b[i].init) uniform(c->b[i].x, c->b[i].n, c->b[i].in ? -1.0 : -0.5, c->b[i].in ? 1.0 : 0.5);
  int64_t vocab = c->plan->model.vocab;
  switch ((px_op_kind)c->op.kind) {
    case PX_OP_EMBED: tokens(X(c, 0), d[0], vocab); break;
    case PX_OP_EMBED_BWD: tokens(X(c, 1), d[0], vocab); break;
    case PX_OP_LOSS:
      uniform(X(c, 0), d[0] * d[1], -3, 3);
      tokens(X(c, 1), d[0], vocab);
      break;
    case PX_OP_LOSS_BWD: tokens(X(c, 1), d[0], vocab); break;
    case PX_OP_DROPOUT_BWD:
      for (int64_t i = 0; i < d[0]; i++) X(c, 1)[i] = px_tunit() < 0.8 ? 1.0f : 0.0f;
      break;
    case PX_OP_SOFTMAX_BWD: causal_probs(X(c, 1), d[0], d[1]); break;
    case PX_OP_ATTN_CONTEXT: causal_probs(X(c, 0), d[0] * d[2], d[1]); break;
    case PX_OP_ATTN_CONTEXT_BWD: causal_probs(X(c, 1), d[0] * d[2], d[1]); break;
    case PX_OP_ATTN_SCORES_BWD: /* the softmax backward's output: zero above the diagonal */
      for (int64_t r = 0; r < d[0] * d[2] * d[1]; r++)
        for (int64_t j = r % d[1] + 1; j < d[1]; j++) X(c, 0)[r * d[1] + j] = 0.0f;
      break;
    case PX_OP_ADAMW:
      uniform(X0(c, 1), c->count, -0.1, 0.1);
      uniform(X0(c, 2), c->count, 0.0, 0.01);
      break;
    default: break;
  }
  for (int i = 0; i < c->nb; i++)
    for (int64_t e = 0; e < c->b[i].n; e++) c->b[i].x[e] = round_to(c->b[i].x[e], c->b[i].dev);
  switch ((px_op_kind)c->op.kind) {
    case PX_OP_NORM_BWD: { /* the forward's statistics of x */
      int64_t rows = d[0], C = d[1];
      bool ln = c->plan->model.norm == PX_NORM_LAYERNORM;
      for (int64_t r = 0; r < rows; r++) {
        const float *x = X(c, 1) + r * C;
        double m = 0, v = 0;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m = ln ? m / (double)C : 0.0;
        for (int64_t j = 0; j < C; j++) v += ((double)x[j] - m) * ((double)x[j] - m);
        X(c, 2)[r] = (float)(1.0 / sqrt(v / (double)C + c->plan->model.norm_eps));
        if (ln) X(c, 3)[r] = (float)m;
      }
      break;
    }
    case PX_OP_FLASH_ATTN_BWD: {
      int64_t n4 = c->b[c->in[4]].n, n5 = c->b[c->in[5]].n;
      double *ctx = px_talloc((size_t)n4 * sizeof *ctx), *lse = px_talloc((size_t)n5 * sizeof *lse);
      flash_forward(c, ctx, lse);
      for (int64_t e = 0; e < n4; e++) X(c, 4)[e] = round_to((float)ctx[e], c->b[c->in[4]].dev);
      for (int64_t e = 0; e < n5; e++) X(c, 5)[e] = (float)lse[e];
      break;
    }
    case PX_OP_MOE_ROUTE: router_logits(c, X(c, 0), d[0], d[3]); break;
    case PX_OP_MOE_ROUTE_BWD: { /* the forward's probabilities and top-k of random logits */
      int64_t n = d[0], k = d[2], E = d[3], *ix = px_talloc((size_t)k * sizeof *ix);
      float *l = px_tfloats(n * E);
      double *lt = px_talloc((size_t)E * sizeof *lt), *p = px_talloc((size_t)E * sizeof *p);
      router_logits(c, l, n, E);
      for (int64_t t = 0; t < n; t++) {
        for (int64_t e = 0; e < E; e++) lt[e] = l[t * E + e];
        router_probs(p, lt, E, sigmoid_router(c));
        for (int64_t e = 0; e < E; e++) X(c, 1)[t * E + e] = (float)p[e], lt[e] = X(c, 1)[t * E + e];
        topk_row(ix, lt, E, k);
        for (int64_t j = 0; j < k; j++) X(c, 2)[t * k + j] = (float)ix[j];
      }
      break;
    }
    case PX_OP_MOE_PERMUTE: /* the counts it does not write (the EP exchange's) keep theirs */
      for (int64_t e = 0; e < c->b[c->out[1]].n; e++) X0(c, 1)[e] = -7.0f;
      /* fall through */
    case PX_OP_MOE_PERMUTE_BWD: random_choices(c, X(c, 1), d[0], d[2], d[3]); break;
    case PX_OP_MOE_UNPERMUTE: random_choices(c, X(c, 2), d[0], d[2], d[3]); break;
    case PX_OP_MOE_UNPERMUTE_BWD: random_choices(c, X(c, 3), d[0], d[2], d[3]); break;
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT:
    case PX_OP_EXPERT_BIAS:
    case PX_OP_EXPERT_BIAS_BWD: random_counts(c, X(c, 4)); break;
    case PX_OP_LOSS_BWD: { /* log-probabilities of random logits over the shard's real columns */
      int64_t n = d[0], vl = d[1], nr = d[2] - c->tp_rank * vl;
      nr = nr < 0 ? 0 : nr > vl ? vl : nr;
      for (int64_t i = 0; i < n; i++) {
        float *l = X(c, 0) + i * vl;
        uniform(l, vl, -3, 3);
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < nr; j++) mx = l[j] > mx ? l[j] : mx;
        for (int64_t j = 0; j < nr; j++) s += exp(l[j] - mx);
        for (int64_t j = 0; j < vl; j++) l[j] = (float)(l[j] - mx - log(s));
      }
      break;
    }
    default: break;
  }
}

/* ======================= the double references ======================= */

typedef void (*ref_fn)(opcase *c);

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad(double x) {
  double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}
static double dropout_p(const opcase *c) { return c->plan->model.dropout; }

/* What the backends get from the interpreter, for the shared random streams. */
static px_exec_op exec_of(const opcase *c) {
  return (px_exec_op){.env = &c->env, .op = &c->op, .layer = c->layer, .seq_index = c->seq_index, .seed = c->seed,
                      .step = c->step};
}

static void ref_embed(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], H = d[1], vl = d[2], v0 = c->tp_rank * vl;
  const float *tok = X(c, 0), *table = X(c, 1);
  double *y = W(c, 0);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)tok[i] - v0;
    for (int64_t j = 0; j < H; j++) y[i * H + j] = tok[i] >= 0 && r >= 0 && r < vl ? table[r * H + j] : 0.0;
  }
}

static void ref_embed_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], H = d[1], vl = d[2], v0 = c->tp_rank * vl;
  const float *dy = X(c, 0), *tok = X(c, 1);
  double *dt = W(c, 0);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)tok[i] - v0;
    if (tok[i] < 0 || r < 0 || r >= vl) continue;
    for (int64_t j = 0; j < H; j++) dt[r * H + j] += dy[i * H + j];
  }
}

/* The first position of this rank's rows: its sequence shard's with SP. */
static int64_t pos0(const opcase *c) { return c->plan->par.sp ? c->tp_rank * c->op.dim[1] : 0; }

static void ref_pos(opcase *c) {
  const int64_t *d = c->op.dim;
  const float *wpe = X(c, 1);
  double *y = W(c, 0); /* in place on in[0] */
  for (int64_t b = 0; b < d[0]; b++)
    for (int64_t t = 0; t < d[1]; t++)
      for (int64_t j = 0; j < d[2]; j++) y[(b * d[1] + t) * d[2] + j] += wpe[(pos0(c) + t) * d[2] + j];
}

static void ref_pos_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  const float *dy = X(c, 0);
  double *dw = W(c, 0);
  for (int64_t b = 0; b < d[0]; b++)
    for (int64_t t = 0; t < d[1]; t++)
      for (int64_t j = 0; j < d[2]; j++) dw[(pos0(c) + t) * d[2] + j] += dy[(b * d[1] + t) * d[2] + j];
}

static void ref_norm(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t rows = d[0], C = d[1];
  bool ln = c->plan->model.norm == PX_NORM_LAYERNORM;
  const float *x = X(c, 0), *w = X(c, 1), *bias = X(c, 2);
  for (int64_t r = 0; r < rows; r++) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; j++) m += x[r * C + j];
    m = ln ? m / (double)C : 0.0;
    for (int64_t j = 0; j < C; j++) v += (x[r * C + j] - m) * (x[r * C + j] - m);
    double rstd = 1.0 / sqrt(v / (double)C + c->plan->model.norm_eps);
    for (int64_t j = 0; j < C; j++)
      W(c, 0)[r * C + j] = (x[r * C + j] - m) * rstd * w[j] + (bias ? bias[j] : 0.0);
    W(c, 1)[r] = rstd;
    if (W(c, 2)) W(c, 2)[r] = m;
  }
}

static void ref_norm_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t rows = d[0], C = d[1];
  bool ln = c->plan->model.norm == PX_NORM_LAYERNORM;
  const float *dy = X(c, 0), *x = X(c, 1), *rstd = X(c, 2), *mean = X(c, 3), *w = X(c, 4);
  for (int64_t r = 0; r < rows; r++) {
    double m = ln ? mean[r] : 0.0, s = rstd[r], mdn = 0, mdx = 0;
    for (int64_t j = 0; j < C; j++) {
      double xhat = (x[r * C + j] - m) * s, dn = (double)w[j] * dy[r * C + j];
      mdn += dn / (double)C, mdx += dn * xhat / (double)C;
    }
    for (int64_t j = 0; j < C; j++) {
      double xhat = (x[r * C + j] - m) * s, dn = (double)w[j] * dy[r * C + j];
      W(c, 0)[r * C + j] += s * (dn - (ln ? mdn : 0.0) - xhat * mdx);
      W(c, 1)[j] += (double)dy[r * C + j] * xhat;
      if (W(c, 2)) W(c, 2)[j] += dy[r * C + j];
    }
  }
}

/* y (m, n) = x (m, k) w[rows off.., k]^T + b[off..] */
static void product_t(double *y, const float *x, const float *w, const float *b, int64_t m, int64_t n, int64_t k,
                      int64_t off) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = b ? b[off + j] : 0.0;
      for (int64_t l = 0; l < k; l++) s += (double)x[i * k + l] * w[(off + j) * k + l];
      y[i * n + j] = s;
    }
}

static void ref_linear(opcase *c) {
  const int64_t *d = c->op.dim;
  if (c->op.flags & PX_OPF_GELU) {
    product_t(W(c, 3), X(c, 0), X(c, 1), X(c, 2), d[0], d[3], d[2], 0);
    for (int64_t i = 0; i < d[0] * d[3]; i++) W(c, 0)[i] = gelu(W(c, 3)[i]);
    return;
  }
  for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0; off += d[3 + i], i++)
    product_t(W(c, (int)i), X(c, 0), X(c, 1), X(c, 2), d[0], d[3 + i], d[2], off);
}

static void ref_linear_bwd_data(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t m = d[0], k = d[2];
  const float *w = X(c, 3);
  double *dx = W(c, 0);
  bool dgelu = c->op.flags & PX_OPF_DGELU;
  for (int64_t r = 0; r < m; r++)
    for (int64_t l = 0; l < k; l++) {
      double s = 0;
      for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0; off += d[3 + i], i++)
        for (int64_t j = 0; j < d[3 + i]; j++) s += (double)X(c, (int)i)[r * d[3 + i] + j] * w[(off + j) * k + l];
      if (dgelu)
        dx[r * k + l] = s * gelu_grad(X(c, 4)[r * k + l]);
      else
        dx[r * k + l] += s;
    }
}

static void ref_linear_bwd_weight(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t m = d[0], k = d[2];
  const float *x = X(c, 3);
  for (int64_t i = 0, off = 0; i < 3 && d[3 + i] > 0; off += d[3 + i], i++) {
    const float *dy = X(c, (int)i);
    int64_t n = d[3 + i];
    for (int64_t j = 0; j < n; j++) {
      double sb = 0;
      for (int64_t r = 0; r < m; r++) sb += dy[r * n + j];
      if (W(c, 1)) W(c, 1)[off + j] += sb;
      for (int64_t l = 0; l < k; l++) {
        double s = 0;
        for (int64_t r = 0; r < m; r++) s += (double)dy[r * n + j] * x[r * k + l];
        W(c, 0)[(off + j) * k + l] += s;
      }
    }
  }
}

/* Pair i's frequency of a D-wide rotation: theta^(-2i/D); with Llama 3.1's scaling as meta-llama/llama-models'
 * apply_scaling computes it (models/llama3/reference_impl/model.py); with YaRN (ends not rounded) as openai/gpt-oss's
 * RotaryEmbedding._compute_concentration_and_inv_freq does (gpt_oss/torch/model.py). */
static double ref_inv_freq(const px_model *m, int64_t i, int64_t D) {
  double f = pow(m->rope_theta, -2.0 * (double)i / (double)D), F = m->rope_yarn.factor, pi2 = 2.0 * acos(-1.0);
  if (m->rope_linear_factor > 0) return f / m->rope_linear_factor; /* transformers' linear scaling */
  if (m->rope_llama3.factor > 0) {
    double old = (double)m->rope_llama3.original_positions, lo = m->rope_llama3.low_freq_factor;
    double hi = m->rope_llama3.high_freq_factor, wavelen = pi2 / f, L = m->rope_llama3.factor;
    if (wavelen < old / hi) return f;
    if (wavelen > old / lo) return f / L;
    double smooth = (old / wavelen - lo) / (hi - lo);
    return (1 - smooth) * f / L + smooth * f;
  }
  if (!(F > 1.0)) return f;
  double half = (double)D / 2, ctx = (double)m->rope_yarn.original_positions;
  double low = half * log(ctx / (m->rope_yarn.beta_fast * pi2)) / log(m->rope_theta);
  double high = half * log(ctx / (m->rope_yarn.beta_slow * pi2)) / log(m->rope_theta);
  double mask = 1.0 - fmin(fmax(((double)i - low) / (high - low), 0.0), 1.0);
  return f / F * (1.0 - mask) + f * mask;
}

/* Rotates pairs (i, i + R/2) of the first R = D x rope_fraction dims of each head at position t by sign * t f_i
 * (f of an R-wide rotation), times the concentration; the other dims pass through (GPT-NeoX's partial rotary). */
static void rotate(double *y, const float *x, int64_t B, int64_t S, int64_t H, int64_t D, const px_model *m,
                   double sign) {
  double conc = m->rope_concentration;
  int64_t R = (int64_t)(D * m->rope_fraction);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < S; t++)
      for (int64_t h = 0; h < H; h++) {
        int64_t o = ((b * S + t) * H + h) * D;
        for (int64_t i = R; i < D; i++) y[o + i] = x[o + i];
        for (int64_t i = 0; i < R / 2; i++) {
          double a = sign * (double)t * ref_inv_freq(m, i, R);
          double x1 = x[o + i], x2 = x[o + i + R / 2];
          y[o + i] = conc * (x1 * cos(a) - x2 * sin(a));
          y[o + i + R / 2] = conc * (x2 * cos(a) + x1 * sin(a));
        }
      }
}

static void ref_rope(opcase *c) {
  const int64_t *d = c->op.dim;
  double sign = c->op.kind == PX_OP_ROPE ? 1.0 : -1.0;
  rotate(W(c, 0), X(c, 0), d[0], d[1], d[2], d[4], &c->plan->model, sign);
  rotate(W(c, 1), X(c, 1), d[0], d[1], d[3], d[4], &c->plan->model, sign);
}

/* Element (b, t, h, e) of a (B, S, H, D) tensor. */
#define AT(x, b, t, h, e, S, H, D) (x)[(((b) * (S) + (t)) * (H) + (h)) * (D) + (e)]

static void ref_attn_scores(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *q = X(c, 0), *k = X(c, 1);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
          double s = 0;
          for (int64_t e = 0; j <= i && e < D; e++)
            s += (double)AT(q, b, i, h, e, S, HQ, D) * AT(k, b, j, h / grp, e, S, HKV, D);
          W(c, 0)[((b * HQ + h) * S + i) * S + j] = s / sqrt((double)D);
        }
}

static void ref_attn_scores_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *ds = X(c, 0), *q = X(c, 1), *k = X(c, 2);
  double sc = 1.0 / sqrt((double)D);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
          double g = ds[((b * HQ + h) * S + i) * S + j] * sc;
          for (int64_t e = 0; e < D; e++) {
            AT(W(c, 0), b, i, h, e, S, HQ, D) += g * AT(k, b, j, h / grp, e, S, HKV, D);
            AT(W(c, 1), b, j, h / grp, e, S, HKV, D) += g * AT(q, b, i, h, e, S, HQ, D);
          }
        }
}

static void ref_softmax(opcase *c) {
  int64_t rows = c->op.dim[0] * c->op.dim[1], S = c->op.dim[1];
  const float *s = X(c, 0);
  for (int64_t r = 0; r < rows; r++) {
    int64_t i = r % S;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= i; j++) mx = s[r * S + j] > mx ? s[r * S + j] : mx;
    for (int64_t j = 0; j <= i; j++) sum += exp(s[r * S + j] - mx);
    for (int64_t j = 0; j < S; j++) W(c, 0)[r * S + j] = j <= i ? exp(s[r * S + j] - mx) / sum : 0.0;
  }
}

static void ref_softmax_bwd(opcase *c) {
  int64_t rows = c->op.dim[0] * c->op.dim[1], S = c->op.dim[1];
  const float *dp = X(c, 0), *p = X(c, 1);
  for (int64_t r = 0; r < rows; r++) {
    int64_t i = r % S;
    double dot = 0;
    for (int64_t j = 0; j <= i; j++) dot += (double)dp[r * S + j] * p[r * S + j];
    for (int64_t j = 0; j <= i; j++) W(c, 0)[r * S + j] += p[r * S + j] * (dp[r * S + j] - dot);
  }
}

static void ref_attn_context(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *p = X(c, 0), *v = X(c, 1);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < S; i++)
        for (int64_t e = 0; e < D; e++) {
          double s = 0;
          for (int64_t j = 0; j < S; j++)
            s += (double)p[((b * HQ + h) * S + i) * S + j] * AT(v, b, j, h / grp, e, S, HKV, D);
          AT(W(c, 0), b, i, h, e, S, HQ, D) = s;
        }
}

static void ref_attn_context_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *dc = X(c, 0), *p = X(c, 1), *v = X(c, 2);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
          double s = 0, pij = p[((b * HQ + h) * S + i) * S + j];
          for (int64_t e = 0; e < D; e++) {
            s += (double)AT(dc, b, i, h, e, S, HQ, D) * AT(v, b, j, h / grp, e, S, HKV, D);
            AT(W(c, 1), b, j, h / grp, e, S, HKV, D) += pij * AT(dc, b, i, h, e, S, HQ, D);
          }
          W(c, 0)[((b * HQ + h) * S + i) * S + j] += s;
        }
}

/* Fused attention's dropout multiplier of (b, h, t, s): element (t, s) of the
 * (S, S) probabilities of global head tp_rank HQ + h of global sequence
 * seq_index[b], counted row-major over (sequence, head, t, s). */
static double flash_keep(const opcase *c, int64_t b, int64_t h, int64_t t, int64_t s) {
  double p = dropout_p(c);
  if (p <= 0) return 1.0;
  const int64_t *d = c->op.dim;
  int64_t S = d[1], heads = c->plan->model.heads;
  uint64_t head = c->seq_index[b] * (uint64_t)heads + (uint64_t)(c->tp_rank * d[2] + h);
  uint64_t idx = (head * (uint64_t)S + (uint64_t)t) * (uint64_t)S + (uint64_t)s;
  px_exec_op e = exec_of(c);
  return px_dropout_keep(px_exec_dropout_seed(&e, PX_DROPOUT_SITE_ATTN), idx, (float)p) ? 1.0 / (1.0 - p) : 0.0;
}

/* The probabilities P (S, S) of (b, h) before dropout, and each row's log-sum-exp. */
static void flash_probs(const opcase *c, const float *q, const float *k, int64_t b, int64_t h, double *P, double *lse) {
  const int64_t *d = c->op.dim;
  int64_t S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  for (int64_t t = 0; t < S; t++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t s = 0; s <= t; s++) {
      double z = 0;
      for (int64_t e = 0; e < D; e++) z += (double)AT(q, b, t, h, e, S, HQ, D) * AT(k, b, s, h / grp, e, S, HKV, D);
      P[t * S + s] = z / sqrt((double)D);
      mx = P[t * S + s] > mx ? P[t * S + s] : mx;
    }
    for (int64_t s = 0; s <= t; s++) sum += exp(P[t * S + s] - mx);
    lse[t] = mx + log(sum);
    for (int64_t s = 0; s < S; s++) P[t * S + s] = s <= t ? exp(P[t * S + s] - lse[t]) : 0.0;
  }
}

/* ctx (B, S, HQ, D) and lse (B, HQ, S) of the fused attention of inputs q, k, v at in[qi..qi+2]. */
static void flash_into(opcase *c, int qi, double *ctx, double *lse) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *q = X(c, qi), *k = X(c, qi + 1), *v = X(c, qi + 2);
  double *P = px_talloc((size_t)(S * S) * sizeof *P);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++) {
      flash_probs(c, q, k, b, h, P, lse + (b * HQ + h) * S);
      for (int64_t t = 0; t < S; t++)
        for (int64_t e = 0; e < D; e++) {
          double s = 0;
          for (int64_t j = 0; j <= t; j++)
            s += P[t * S + j] * flash_keep(c, b, h, t, j) * AT(v, b, j, h / grp, e, S, HKV, D);
          AT(ctx, b, t, h, e, S, HQ, D) = s;
        }
    }
}

static void flash_forward(opcase *c, double *ctx, double *lse) { flash_into(c, 1, ctx, lse); }
static void ref_flash(opcase *c) { flash_into(c, 0, W(c, 0), W(c, 1)); }

static void ref_flash_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], grp = HQ / HKV;
  const float *dO = X(c, 0), *q = X(c, 1), *k = X(c, 2), *v = X(c, 3);
  double sc = 1.0 / sqrt((double)D);
  double *P = px_talloc((size_t)(S * S) * sizeof *P), *dP = px_talloc((size_t)(S * S) * sizeof *dP);
  double *lse = px_talloc((size_t)S * sizeof *lse);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < HQ; h++) {
      int64_t g = h / grp;
      flash_probs(c, q, k, b, h, P, lse);
      for (int64_t t = 0; t < S; t++) {
        double dot = 0; /* sum_s P dP */
        for (int64_t s = 0; s <= t; s++) {
          double m = flash_keep(c, b, h, t, s), dpd = 0;
          for (int64_t e = 0; e < D; e++) {
            dpd += (double)AT(dO, b, t, h, e, S, HQ, D) * AT(v, b, s, g, e, S, HKV, D);
            AT(W(c, 2), b, s, g, e, S, HKV, D) += P[t * S + s] * m * AT(dO, b, t, h, e, S, HQ, D);
          }
          dP[t * S + s] = dpd * m;
          dot += P[t * S + s] * dP[t * S + s];
        }
        for (int64_t s = 0; s <= t; s++) {
          double ds = P[t * S + s] * (dP[t * S + s] - dot) * sc;
          for (int64_t e = 0; e < D; e++) {
            AT(W(c, 0), b, t, h, e, S, HQ, D) += ds * AT(k, b, s, g, e, S, HKV, D);
            AT(W(c, 1), b, s, g, e, S, HKV, D) += ds * AT(q, b, t, h, e, S, HQ, D);
          }
        }
      }
    }
}

/* Dropout of a (B, d1, d2, d3) tensor, axis 1 sharded over TP (attention
 * probabilities' heads, or sequence positions with SP): element (b, i, r) is
 * counted at ((seq_index[b] d1_global + shard offset + i) inner + r). */
static void ref_dropout(opcase *c) {
  const int64_t *d = c->op.dim;
  bool attn = c->op.flags & PX_OPF_ATTN_PROBS, sharded = attn || d[4] == 1;
  int64_t inner = d[2] * d[3], d1g = sharded ? d[1] * c->plan->par.tp : d[1], first = sharded ? c->tp_rank * d[1] : 0;
  double p = dropout_p(c);
  px_exec_op e = exec_of(c);
  uint64_t seed = px_exec_dropout_seed(&e, attn ? PX_DROPOUT_SITE_ATTN : (int)d[5]);
  const float *x = X(c, 0), *bias = X(c, 1);
  for (int64_t b = 0; b < d[0]; b++)
    for (int64_t i = 0; i < d[1]; i++)
      for (int64_t r = 0; r < inner; r++) {
        int64_t at = (b * d[1] + i) * inner + r;
        uint64_t row = c->seq_index[b] * (uint64_t)d1g + (uint64_t)(first + i);
        uint64_t idx = row * (uint64_t)inner + (uint64_t)r;
        uint8_t keep = px_dropout_keep(seed, idx, (float)p);
        double v = (double)x[at] + (bias ? bias[at % d[2]] : 0.0);
        W(c, 0)[at] = keep ? v / (1.0 - p) : 0.0;
        W(c, 1)[at] = keep;
      }
}

static void ref_dropout_bwd(opcase *c) {
  double p = dropout_p(c);
  for (int64_t i = 0; i < c->op.dim[0]; i++)
    if (X(c, 1)[i] != 0) W(c, 0)[i] += X(c, 0)[i] / (1.0 - p);
}

static void ref_add(opcase *c) {
  const int64_t *d = c->op.dim;
  for (int64_t i = 0; i < d[0]; i++)
    W(c, 0)[i] = (double)X(c, 0)[i] + X(c, 1)[i] + (X(c, 2) ? X(c, 2)[i % d[1]] : 0.0);
}

static void ref_acc(opcase *c) {
  for (int64_t i = 0; i < c->op.dim[0]; i++) W(c, 0)[i] += X(c, 0)[i];
}

/* A weighted activation's weight of element i (a MoE layer's experts: each routed row's gate, operand `j`,
 * rows dim[1] wide); 1 without. */
static double row_weight(opcase *c, int j, int64_t i) {
  return c->in[j] >= 0 ? (double)X(c, j)[i / c->op.dim[1]] : 1.0;
}

static void ref_gelu(opcase *c) {
  for (int64_t i = 0; i < c->op.dim[0]; i++) W(c, 0)[i] = gelu(X(c, 0)[i]) * row_weight(c, 2, i);
}

/* weighted: y = gelu(x) w, so dx = w dy gelu'(x), dw = sum over the row of gelu(x) dy */
static void ref_gelu_bwd(opcase *c) {
  for (int64_t i = 0; i < c->op.dim[0]; i++) {
    W(c, 0)[i] += row_weight(c, 2, i) * X(c, 0)[i] * gelu_grad(X(c, 1)[i]);
    if (c->in[2] >= 0) W(c, 1)[i / c->op.dim[1]] += gelu(X(c, 1)[i]) * X(c, 0)[i];
  }
}

static void ref_swiglu(opcase *c) {
  for (int64_t i = 0; i < c->op.dim[0]; i++) {
    double g = X(c, 0)[i];
    W(c, 0)[i] = g * sigmoid(g) * X(c, 1)[i] * row_weight(c, 2, i);
  }
}

static void ref_swiglu_bwd(opcase *c) {
  for (int64_t i = 0; i < c->op.dim[0]; i++) {
    double dy = X(c, 0)[i], g = X(c, 1)[i], u = X(c, 2)[i], s = sigmoid(g), w = row_weight(c, 3, i);
    W(c, 0)[i] += w * dy * u * s * (1.0 + g * (1.0 - s));
    W(c, 1)[i] += w * dy * g * s;
    if (c->in[3] >= 0) W(c, 2)[i / c->op.dim[1]] += g * s * u * dy;
  }
}

/* The shard's columns that are real vocabulary (the rest is padding). */
static int64_t real_cols(const opcase *c) {
  int64_t vl = c->op.dim[1], r = c->op.dim[2] - c->tp_rank * vl;
  return r < 0 ? 0 : r > vl ? vl : r;
}

static void ref_loss(opcase *c) {
  int64_t n = c->op.dim[0], vl = c->op.dim[1], nr = real_cols(c), v0 = c->tp_rank * vl;
  const float *l = X(c, 0), *t = X(c, 1);
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < nr; j++) mx = l[i * vl + j] > mx ? l[i * vl + j] : mx;
    for (int64_t j = 0; j < nr; j++) sum += exp(l[i * vl + j] - mx);
    int64_t col = (int64_t)t[i] - v0;
    double tl = t[i] >= 0 && col >= 0 && col < vl ? l[i * vl + col] : 0.0;
    W(c, 1)[i] = t[i] < 0 ? 0.0 : log(sum) + mx - tl;
    for (int64_t j = 0; j < vl; j++) W(c, 0)[i * vl + j] = l[i * vl + j] - mx - log(sum);
  }
}

static void ref_loss_bwd(opcase *c) {
  int64_t n = c->op.dim[0], vl = c->op.dim[1], nr = real_cols(c), v0 = c->tp_rank * vl;
  const float *lp = X(c, 0), *t = X(c, 1);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < vl; j++)
      W(c, 0)[i * vl + j] =
          t[i] < 0 || j >= nr ? 0.0 : (exp(lp[i * vl + j]) - (j == (int64_t)t[i] - v0)) * c->loss_scale;
}

static void ref_grad_norm(opcase *c) {
  double s = c->sumsq0;
  for (int64_t i = 0; i < c->count; i++) s += (double)X(c, 0)[i] * X(c, 0)[i];
  c->sumsq_want = s;
}

static void ref_adamw(opcase *c) {
  double b1 = c->beta1, b2 = c->beta2, bc1 = 1 - pow(b1, (double)c->adam_t), bc2 = 1 - pow(b2, (double)c->adam_t);
  for (int64_t i = 0; i < c->count; i++) {
    double g = (double)X(c, 0)[i] * c->grad_scale, w = X0(c, 0)[i];
    double m = b1 * X0(c, 1)[i] + (1 - b1) * g, v = b2 * X0(c, 2)[i] + (1 - b2) * g * g;
    w -= c->lr * ((m / bc1) / (sqrt(v / bc2) + c->eps) + c->wd * w);
    W(c, 0)[i] = w, W(c, 1)[i] = m, W(c, 2)[i] = v;
    if (W(c, 3)) W(c, 3)[i] = w;
  }
}

/* Router: probabilities, top-k by the logits (the probabilities' order), the k weights. */
static void ref_moe_route(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], k = d[2], E = d[3], *ix = px_talloc((size_t)k * sizeof *ix);
  double *l = px_talloc((size_t)E * sizeof *l), *p = px_talloc((size_t)E * sizeof *p);
  for (int64_t t = 0; t < n; t++) {
    for (int64_t e = 0; e < E; e++) l[e] = X(c, 0)[t * E + e];
    router_probs(p, l, E, sigmoid_router(c));
    topk_row(ix, l, E, k);
    double s = 0;
    for (int64_t j = 0; j < k; j++) s += p[ix[j]];
    for (int64_t e = 0; e < E; e++) W(c, 0)[t * E + e] = p[e];
    for (int64_t j = 0; j < k; j++) {
      W(c, 1)[t * k + j] = (double)ix[j];
      W(c, 2)[t * k + j] = renormalised(c) ? p[ix[j]] / s : p[ix[j]];
    }
  }
}

/* Router backward by the Jacobians: gates of the probabilities (g_j = p_j, or p_j / sum of the k),
 * probabilities of the logits (softmax, sigmoid); plus the load-balancing loss aux E sum_e f_e P_e,
 * P_e the mean of p_te over the n tokens, f_e the share of the n k choices e took (a constant), its
 * weight in the step's loss coef x loss_scale x n (the mean over every (micro-batch, rank)'s, scaled
 * as the cross-entropy's gradient is). */
static void ref_moe_route_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], k = d[2], E = d[3];
  const float *dg = X(c, 0), *p = X(c, 1), *ix = X(c, 2);
  double aux = c->plan->model.aux_loss_coef * (double)c->loss_scale * (double)n, *f = px_talloc((size_t)E * sizeof *f);
  double *dp = px_talloc((size_t)E * sizeof *dp);
  for (int64_t i = 0; i < n * k; i++) f[(int64_t)ix[i]] += 1.0 / (double)(n * k);
  for (int64_t t = 0; t < n; t++) {
    const float *pt = p + t * E;
    for (int64_t e = 0; e < E; e++) dp[e] = aux * (double)E * f[e] / (double)n;
    double s = 0;
    for (int64_t j = 0; j < k; j++) s += pt[(int64_t)ix[t * k + j]];
    for (int64_t j = 0; j < k; j++) /* d g_j / d p_e for each chosen e */
      for (int64_t i = 0; i < k; i++) {
        int64_t e = (int64_t)ix[t * k + i];
        double jac = renormalised(c) ? ((i == j ? 1.0 : 0.0) / s - pt[(int64_t)ix[t * k + j]] / (s * s))
                                     : (i == j ? 1.0 : 0.0);
        dp[e] += dg[t * k + j] * jac;
      }
    for (int64_t a = 0; a < E; a++) {
      double dl = 0;
      if (sigmoid_router(c))
        dl = dp[a] * pt[a] * (1.0 - pt[a]);
      else
        for (int64_t e = 0; e < E; e++) dl += dp[e] * pt[e] * ((a == e ? 1.0 : 0.0) - pt[a]);
      W(c, 0)[t * E + a] += dl;
    }
  }
}

/* Each choice's expert-major row: the choices stably sorted by expert (a token's in token order, then
 * in choice order): the choices before it are those of lower experts and of its own expert earlier. */
static int64_t *expert_rows(const float *idx, int64_t nk) {
  int64_t *row = px_talloc((size_t)nk * sizeof *row);
  for (int64_t i = 0; i < nk; i++)
    for (int64_t i2 = 0; i2 < nk; i2++) row[i] += idx[i2] < idx[i] || (idx[i2] == idx[i] && i2 < i);
  return row;
}

/* The permutations; the gates (in[2]) go with the rows, each choice's own. */
static void ref_moe_permute(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], h = d[1], k = d[2], *row = expert_rows(X(c, 1), n * k);
  for (int64_t i = 0; i < n * k; i++)
    for (int64_t e = 0; e < h; e++) W(c, 0)[row[i] * h + e] = X(c, 0)[(i / k) * h + e];
  for (int64_t e = 0; e < d[3]; e++) W(c, 1)[e] = 0; /* the rows sent to each expert; the rest as it was */
  for (int64_t i = 0; i < n * k; i++) W(c, 1)[(int64_t)X(c, 1)[i]] += 1;
  if (c->in[2] >= 0)
    for (int64_t i = 0; i < n * k; i++) W(c, 2)[row[i]] = X(c, 2)[i];
}

static void ref_moe_permute_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], h = d[1], k = d[2], *row = expert_rows(X(c, 1), n * k);
  for (int64_t i = 0; i < n * k; i++)
    for (int64_t e = 0; e < h; e++) W(c, 0)[(i / k) * h + e] += X(c, 0)[row[i] * h + e];
  if (c->in[2] >= 0)
    for (int64_t i = 0; i < n * k; i++) W(c, 1)[i] += X(c, 2)[row[i]];
}

/* The combine: each token's k rows summed (the gates applied in the experts' activation). */
static void ref_moe_unpermute(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], h = d[1], k = d[2], *row = expert_rows(X(c, 2), n * k);
  for (int64_t t = 0; t < n; t++)
    for (int64_t e = 0; e < h; e++) {
      double s = 0;
      for (int64_t j = 0; j < k; j++) s += X(c, 0)[row[t * k + j] * h + e];
      W(c, 0)[t * h + e] += s; /* it accumulates (onto the shared experts' output) */
    }
}

static void ref_moe_unpermute_bwd(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[0], h = d[1], k = d[2], *row = expert_rows(X(c, 3), n * k);
  for (int64_t i = 0; i < n * k; i++)
    for (int64_t e = 0; e < h; e++) W(c, 0)[row[i] * h + e] += X(c, 0)[(i / k) * h + e];
}

/* The grouped GEMMs: segment (s, x) of the rows taken from source s by local expert x (source-major,
 * expert-major within a source) through expert x's (n, k) block of the weights, the block's rows
 * [0, n0) to output 0 and [n0, n0 + n1) to output 1; with biases (in[2]) expert x's n added, and their gradient
 * (out[1] of the weight gradient) each column's sum. */
static void ref_expert_linear(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t n = d[1], k = d[2], el = d[3], first = 0;
  px_op_kind kind = (px_op_kind)c->op.kind;
  const float *taken = X(c, 4) + taken_counts(c);
  for (int64_t s = 0; s < c->plan->par.ep; s++)
    for (int64_t x = 0; x < el; x++) {
      int64_t rows = (int64_t)taken[s * el + x];
      for (int64_t i = 0, off = 0; i < 2 && d[4 + i] > 0; off += d[4 + i], i++) {
        int64_t ni = d[4 + i];
        for (int64_t r = first; r < first + rows; r++)
          for (int64_t j = 0; j < ni; j++) {
            if (kind == PX_OP_EXPERT_LINEAR) {
              const float *w = X(c, 1) + (x * n + off + j) * k;
              double y = X(c, 2) ? X(c, 2)[x * n + off + j] : 0.0;
              for (int64_t l = 0; l < k; l++) y += (double)X(c, 0)[r * k + l] * w[l];
              W(c, (int)i)[r * ni + j] = y;
            } else {
              double dy = X(c, (int)i)[r * ni + j];
              if (kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT && W(c, 1)) W(c, 1)[x * n + off + j] += dy;
              for (int64_t l = 0; l < k; l++) {
                if (kind == PX_OP_EXPERT_LINEAR_BWD_DATA)
                  W(c, 0)[r * k + l] += dy * X(c, 3)[(x * n + off + j) * k + l];
                else
                  W(c, 0)[(x * n + off + j) * k + l] += dy * X(c, 3)[r * k + l];
              }
            }
          }
      }
      first += rows;
    }
}

/* The communication kinds: test_collectives runs them through the collective and p2p entries. */
static void ref_collective(opcase *c) { (void)c; }

/* Every kind's reference (a new kind has none: the coverage test fails). */
/* fc2's gate-scaled bias (Megatron-Core's TEGroupedMLP._apply_bias): each row of segment (s, x) plus its gate times
 * expert x's bias; backward, the bias's gradient each gate times its row's gradient, summed over expert x's rows, and
 * each gate's gradient its row's gradient dot the bias. */
static void ref_expert_bias(opcase *c) {
  const int64_t *d = c->op.dim;
  int64_t h = d[1], el = d[3], first = 0;
  bool fwd = c->op.kind == PX_OP_EXPERT_BIAS;
  const float *taken = X(c, 4) + taken_counts(c), *gates = X(c, fwd ? 1 : 2);
  for (int64_t s = 0; s < c->plan->par.ep; s++)
    for (int64_t x = 0; x < el; x++) {
      const float *b = X(c, fwd ? 0 : 1) + x * h;
      for (int64_t r = first; r < first + (int64_t)taken[s * el + x]; r++) {
        double dot = 0;
        for (int64_t j = 0; j < h; j++) {
          if (fwd) {
            W(c, 0)[r * h + j] += (double)gates[r] * b[j];
          } else {
            W(c, 0)[x * h + j] += (double)gates[r] * X(c, 0)[r * h + j];
            dot += (double)X(c, 0)[r * h + j] * b[j];
          }
        }
        if (!fwd) W(c, 1)[r] += dot;
      }
      first += (int64_t)taken[s * el + x];
    }
}

static const ref_fn refs[PX_OP_COUNT] = {
    [PX_OP_EMBED] = ref_embed,
    [PX_OP_EMBED_BWD] = ref_embed_bwd,
    [PX_OP_POS] = ref_pos,
    [PX_OP_POS_BWD] = ref_pos_bwd,
    [PX_OP_NORM] = ref_norm,
    [PX_OP_NORM_BWD] = ref_norm_bwd,
    [PX_OP_LINEAR] = ref_linear,
    [PX_OP_LINEAR_BWD_DATA] = ref_linear_bwd_data,
    [PX_OP_LINEAR_BWD_WEIGHT] = ref_linear_bwd_weight,
    [PX_OP_ROPE] = ref_rope,
    [PX_OP_ROPE_BWD] = ref_rope,
    [PX_OP_ATTN_SCORES] = ref_attn_scores,
    [PX_OP_ATTN_SCORES_BWD] = ref_attn_scores_bwd,
    [PX_OP_SOFTMAX] = ref_softmax,
    [PX_OP_SOFTMAX_BWD] = ref_softmax_bwd,
    [PX_OP_ATTN_CONTEXT] = ref_attn_context,
    [PX_OP_ATTN_CONTEXT_BWD] = ref_attn_context_bwd,
    [PX_OP_FLASH_ATTN] = ref_flash,
    [PX_OP_FLASH_ATTN_BWD] = ref_flash_bwd,
    [PX_OP_DROPOUT] = ref_dropout,
    [PX_OP_DROPOUT_BWD] = ref_dropout_bwd,
    [PX_OP_ADD] = ref_add,
    [PX_OP_ACC] = ref_acc,
    [PX_OP_GELU] = ref_gelu,
    [PX_OP_GELU_BWD] = ref_gelu_bwd,
    [PX_OP_SWIGLU] = ref_swiglu,
    [PX_OP_SWIGLU_BWD] = ref_swiglu_bwd,
    [PX_OP_MOE_ROUTE] = ref_moe_route,
    [PX_OP_MOE_ROUTE_BWD] = ref_moe_route_bwd,
    [PX_OP_MOE_PERMUTE] = ref_moe_permute,
    [PX_OP_MOE_PERMUTE_BWD] = ref_moe_permute_bwd,
    [PX_OP_MOE_UNPERMUTE] = ref_moe_unpermute,
    [PX_OP_MOE_UNPERMUTE_BWD] = ref_moe_unpermute_bwd,
    [PX_OP_EXPERT_LINEAR] = ref_expert_linear,
    [PX_OP_EXPERT_LINEAR_BWD_DATA] = ref_expert_linear,
    [PX_OP_EXPERT_LINEAR_BWD_WEIGHT] = ref_expert_linear,
    [PX_OP_EXPERT_BIAS] = ref_expert_bias,
    [PX_OP_EXPERT_BIAS_BWD] = ref_expert_bias,
    [PX_OP_LOSS] = ref_loss,
    [PX_OP_LOSS_BWD] = ref_loss_bwd,
    [PX_OP_ALLREDUCE] = ref_collective,
    [PX_OP_ALLGATHER] = ref_collective,
    [PX_OP_REDUCE_SCATTER] = ref_collective,
    [PX_OP_ALLTOALL] = ref_collective,
    [PX_OP_SEND] = ref_collective,
    [PX_OP_RECV] = ref_collective,
    [PX_OP_GRAD_NORM] = ref_grad_norm,
    [PX_OP_ADAMW] = ref_adamw,
};

static bool is_comm(px_op_kind k) {
  px_op_family f = px_op_family_of(k);
  return f == PX_FAM_COLLECTIVE || f == PX_FAM_P2P;
}

/* ======================= running a case on a backend ======================= */

static void pack(void *dst, const float *x, int64_t n, int dev) {
  if (dev == DT_I32)
    for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)x[i];
  else if (dev == PX_DTYPE_U8)
    for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)x[i];
  else
    px_dtype_from_fp32(dst, (px_dtype)dev, x, (uint64_t)n);
}

static void unpack(float *x, const void *src, int64_t n, int dev) {
  if (dev == DT_I32)
    for (int64_t i = 0; i < n; i++) x[i] = (float)((const int32_t *)src)[i];
  else if (dev == PX_DTYPE_U8)
    for (int64_t i = 0; i < n; i++) x[i] = (float)((const uint8_t *)src)[i];
  else
    px_dtype_to_fp32(x, src, (px_dtype)dev, (uint64_t)n);
}

/* --perf: each case's op run again and again on each backend, timed. */
static bool perf_mode;
static double perf_op_s; /* the last time_op's seconds a run */

/* The op again until it has run PERF_RUNS times and for PERF_MIN_S, each
 * run synchronised; perf_op_s gets the mean. */
#define PERF_RUNS 5
#define PERF_MIN_S 2e-3
static px_status time_op(px_backend *be, const px_exec_op *e, px_err *err) {
  px_status st = PX_OK;
  int runs = 0;
  double t0 = px_clock_s(), dt = 0;
  while (!st && (runs < PERF_RUNS || dt < PERF_MIN_S)) {
    st = be->op(be, e, err);
    if (!st) st = be->sync(be, err);
    runs++;
    dt = px_clock_s() - t0;
  }
  perf_op_s = dt / runs;
  return st;
}

/* Runs the case on a backend: the op of the plan under test, or (twin) of
 * its fp32 twin. got[i] receives output buffer i's values (host floats);
 * *sumsq GRAD_NORM's accumulator. */
static px_status run_on(px_backend *be, opcase *c, bool twin, float **got, double *sumsq, px_err *err) {
  void *dev[MAXB] = {0};
  uint64_t bytes[MAXB] = {0};
  px_status st = PX_OK;
  for (int i = 0; i < c->nb && !st; i++) {
    int dt = twin ? c->b[i].dev32 : c->b[i].dev;
    if (dt < 0) continue; /* not in the twin */
    bytes[i] = (uint64_t)c->b[i].n * el_bytes(dt);
    st = be->alloc(be, bytes[i], PX_FILL_POISON, PX_POOL_STEP, &dev[i], err);
    if (!st && c->b[i].init) {
      void *host = px_talloc(bytes[i]);
      pack(host, c->b[i].x, c->b[i].n, dt);
      st = be->upload(be, dev[i], host, bytes[i], err);
    }
  }
  int32_t *toks = NULL;
  if (c->op.kind == PX_OP_EMBED_BWD && c->host_tokens) {
    toks = px_talloc((size_t)c->op.dim[0] * sizeof *toks);
    pack(toks, X(c, 1), c->op.dim[0], DT_I32);
  }
  *sumsq = c->sumsq0;
  px_exec_op e = exec_of(c);
  e.env = twin ? &c->env32 : &c->env;
  e.op = twin ? &c->op32 : &c->op;
  e.loss_scale = c->loss_scale, e.host_tokens = toks, e.count = c->count, e.sumsq_out = sumsq;
  e.lr = c->lr, e.beta1 = c->beta1, e.beta2 = c->beta2, e.eps = c->eps, e.weight_decay = c->wd;
  e.grad_scale = c->grad_scale, e.adam_t = c->adam_t;
  for (int j = 0; j < PX_OP_OUTS; j++) e.out[j] = c->out[j] >= 0 ? dev[c->out[j]] : NULL;
  for (int j = 0; j < PX_OP_INS; j++) e.in[j] = c->in[j] >= 0 ? dev[c->in[j]] : NULL;
  if (!st) st = be->op(be, &e, err);
  if (!st) st = be->sync(be, err);
  if (!st && perf_mode) st = time_op(be, &e, err);
  for (int i = 0; i < c->nb && !st; i++) {
    int dt = twin ? c->b[i].dev32 : c->b[i].dev;
    if (!c->b[i].out || dt < 0) continue;
    void *host = px_talloc(bytes[i]);
    st = be->download(be, host, dev[i], bytes[i], err);
    got[i] = px_tfloats(c->b[i].n);
    if (!st) unpack(got[i], host, c->b[i].n, dt);
  }
  for (int i = 0; i < c->nb; i++)
    if (dev[i]) be->release(be, dev[i], bytes[i]);
  return st;
}

static void label_of(const opcase *c, const char *backend, char *out, size_t cap, const char *what) {
  snprintf(out, cap, "%s %s %s [%s, %s, dims %lld %lld %lld %lld %lld %lld]%s%s", backend, px_dtype_names[c->dt],
           px_op_names[c->op.kind], c->cfg ? c->cfg->name : "ranges", c->where, (long long)c->op.dim[0],
           (long long)c->op.dim[1], (long long)c->op.dim[2], (long long)c->op.dim[3], (long long)c->op.dim[4],
           (long long)c->op.dim[5], what ? " " : "", what ? what : "");
}

/* The expected outputs: an output's initial values, then the reference
 * (false for a kind without one). */
static bool reference(opcase *c) {
  for (int i = 0; i < c->nb; i++)
    for (int64_t e = 0; e < c->b[i].n; e++) c->b[i].want[e] = c->b[i].init ? c->b[i].x[e] : NAN;
  if (!refs[c->op.kind]) return false;
  refs[c->op.kind](c);
  return true;
}

/* The cpu backend on the fp32 twin: its outputs into each buffer's cpu[]. */
static bool run_cpu(opcase *c) {
  float *got[MAXB] = {0};
  px_err err = {0};
  px_status st = run_on(backends[0].be, c, true, got, &c->sumsq_cpu, &err);
  if (st) {
    char l[256];
    label_of(c, "cpu", l, sizeof l, NULL);
    fprintf(stderr, "\n  FAIL %s: %s\n", l, err.msg);
    return false;
  }
  for (int i = 0; i < c->nb; i++) c->b[i].cpu = got[i];
  return true;
}

/* ---- the outputs against what they should be ---- */

static bool compare_ref(opcase *c) {
  bool ok = true;
  tol t = is_reduction((px_op_kind)c->op.kind) ? REF_RED : REF_ELEM;
  char l[320];
  for (int j = 0; j < PX_OP_OUTS; j++) {
    int i = c->out[j];
    if (i < 0 || (j > 0 && c->out[j - 1] == i) || !c->b[i].cpu) continue;
    char what[24];
    snprintf(what, sizeof what, "out[%d]", j);
    label_of(c, "cpu", l, sizeof l, what);
    ok &= close_enough(l, c->b[i].cpu, c->b[i].want, c->b[i].n, t);
  }
  if (c->op.kind == PX_OP_GRAD_NORM) {
    label_of(c, "cpu", l, sizeof l, "sum of squares");
    float g = (float)c->sumsq_cpu;
    ok &= close_enough(l, &g, &c->sumsq_want, 1, t);
  }
  return ok;
}

static bool compare_backend(opcase *c, const char *name, float **got, double sumsq) {
  bool ok = true;
  tol t = tol_for((px_op_kind)c->op.kind, c->dt);
  char l[320];
  for (int j = 0; j < PX_OP_OUTS; j++) {
    int i = c->out[j];
    if (i < 0 || !got[i]) continue;
    const float *cpu = c->b[i].cpu;
    tol tj = t;
    if (c->op.kind == PX_OP_ADAMW && j == 3) cpu = c->b[c->out[0]].cpu; /* the model's copy: the rounded weights */
    else if (c->b[i].dev == PX_DTYPE_FP32) tj = is_reduction((px_op_kind)c->op.kind) ? RED : ELEM; /* fp32 outputs */
    if (c->op.kind == PX_OP_ADAMW && j == 3) tj = c->dt == PX_DTYPE_BF16 ? BF16 : FP16;
    double *want = px_talloc((size_t)c->b[i].n * sizeof *want);
    for (int64_t e = 0; e < c->b[i].n; e++) want[e] = cpu[e];
    char what[24];
    snprintf(what, sizeof what, "out[%d]", j);
    label_of(c, name, l, sizeof l, what);
    ok &= close_enough(l, got[i], want, c->b[i].n, tj);
  }
  if (c->op.kind == PX_OP_GRAD_NORM) {
    label_of(c, name, l, sizeof l, "sum of squares");
    float g = (float)sumsq;
    double w = c->sumsq_cpu;
    ok &= close_enough(l, &g, &w, 1, c->dt == PX_DTYPE_FP32 ? RED : tol_for(PX_OP_GRAD_NORM, c->dt));
  }
  return ok;
}

/* ======================= the cases of the plans ======================= */

/* Two ops are the same case when kind, flags, sizes and operands' types and aliasing agree. */
typedef struct {
  uint8_t kind, flags;
  int64_t dim[6];
  int16_t dev[MAXB];
  int8_t alias[MAXB];
} signature;

static signature sig_of(const px_plan *p, const px_op *o) {
  signature s;
  memset(&s, 0, sizeof s);
  s.kind = o->kind, s.flags = o->flags;
  memcpy(s.dim, o->dim, sizeof s.dim);
  px_ref r[MAXB];
  memcpy(r, o->out, sizeof o->out);
  memcpy(r + PX_OP_OUTS, o->in, sizeof o->in);
  for (int i = 0; i < MAXB; i++) {
    bool is_out = i < PX_OP_OUTS;
    s.dev[i] = (int16_t)(r[i].slot >= 0 ? operand_dev(p, o, is_out, is_out ? i : i - PX_OP_OUTS) : -1);
    s.alias[i] = -1;
    for (int j = 0; j < i && r[i].slot >= 0; j++)
      if (r[j].slot == r[i].slot && r[j].layer_off == r[i].layer_off) s.alias[i] = (int8_t)j;
  }
  return s;
}

/* The blocks whose ops the backends run (the others are communication). */
static const int compute_blocks[] = {PX_BLOCK_EMBED_FWD, PX_BLOCK_LAYER_FWD, PX_BLOCK_MOE_FWD,  PX_BLOCK_HEAD_FWD,
                                     PX_BLOCK_HEAD_BWD,  PX_BLOCK_MOE_BWD,   PX_BLOCK_LAYER_BWD, PX_BLOCK_EMBED_BWD};

/* Cases per op: EMBED_BWD with and without the host's tokens; the MoE kinds with an expert that takes no
 * row and tied router logits (variant 0), and with choices at random over every expert (1). */
static int variants_of(px_op_kind k) { return k == PX_OP_EMBED_BWD || px_op_is_moe(k) ? 2 : 1; }

/* Calls fn on each distinct compute op of the plan, once per variant (variants_of). */
typedef void (*case_fn)(opcase *c, void *ctx);

static void for_each_case(const config *g, const px_plan *plan, const px_plan *plan32, int seed, case_fn fn,
                          void *ctx) {
  signature seen[512];
  int nseen = 0;
  for (size_t bi = 0; bi < sizeof compute_blocks / sizeof compute_blocks[0]; bi++) {
    int blk = compute_blocks[bi];
    for (int k = 0; k < plan->blocks[blk].nops; k++) {
      const px_op *o = &plan->blocks[blk].ops[k];
      if (is_comm((px_op_kind)o->kind)) continue;
      signature s = sig_of(plan, o);
      bool dup = false;
      for (int i = 0; i < nseen && !dup; i++) dup = !memcmp(&seen[i], &s, sizeof s);
      if (!dup && nseen == 512) CU_FAIL("more distinct ops than for_each_case keeps");
      if (dup || nseen == 512) continue;
      seen[nseen++] = s;
      for (int variant = 0; variant < variants_of((px_op_kind)o->kind); variant++) {
        opcase c;
        case_of_op(&c, g, plan, plan32, blk, k);
        c.host_tokens = variant == 0, c.variant = variant;
        px_tseed((uint64_t)seed * 1000003u + (uint64_t)blk * 1009u + (uint64_t)k * 17u + (uint64_t)variant);
        gen(&c);
        fn(&c, ctx);
        px_env_free(&c.env), px_env_free(&c.env32);
        px_tfree();
      }
    }
  }
}

/* The ops on gradient ranges of a plan. */
static void for_each_range_case(const px_plan *plan, const px_plan *plan32, int seed, case_fn fn, void *ctx) {
  px_op_kind kinds[] = {PX_OP_ACC, PX_OP_GRAD_NORM, PX_OP_ADAMW};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    opcase c;
    case_of_range(&c, kinds[i], plan, plan32, 1001);
    px_tseed((uint64_t)seed * 7919u + i);
    gen(&c);
    fn(&c, ctx);
    px_env_free(&c.env), px_env_free(&c.env32);
    px_tfree();
  }
}

/* ---- 1. the cpu backend against the references ---- */

static void check_ref(opcase *c, void *ctx) {
  (void)ctx;
  if (!kind_wanted((px_op_kind)c->op.kind) || !backend_wanted(0)) return;
  char why[256];
  px_support s = px_support_op(backends[0].be, &c->env, &c->op, why, sizeof why);
  if (s != PX_SUPPORT_YES) {
    char l[320];
    label_of(c, "cpu", l, sizeof l, NULL);
    fprintf(stderr, "\n  FAIL %s: the reference backend refuses an fp32 op: %s\n", l, why);
    CU_FAIL("the cpu backend refuses an fp32 op");
    return;
  }
  worst_seen = 0;
  bool ok = reference(c) && run_cpu(c) && compare_ref(c);
  CU_ASSERT(ok);
  cell *k = &cells[0][c->op.kind][0];
  if (worst_seen > k->worst) k->worst = worst_seen;
  if (ok) k->ok++, ref_ok[c->op.kind]++;
  else k->failed++;
}

static void test_cpu_against_references(void) {
  for (int g = 0; g < NCONFIGS; g++) {
    px_plan plan;
    px_err err = {0};
    px_status st = plan_of(&configs[g], PX_PREC_FP32, &plan, &err);
    if (st) fprintf(stderr, "\n  %s: %s\n", configs[g].name, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    for_each_case(&configs[g], &plan, &plan, g, check_ref, NULL);
    if (g == 0) for_each_range_case(&plan, &plan, g, check_ref, NULL);
    px_plan_free(&plan);
  }
}

/* ---- 2. every backend against the cpu backend ---- */

static void check_backends(opcase *c, void *ctx) {
  (void)ctx;
  if (!kind_wanted((px_op_kind)c->op.kind)) return;
  if (!run_cpu(c)) {
    CU_FAIL("the cpu backend failed");
    return;
  }
  for (int bi = 0; bi < nbackends; bi++) {
    if ((bi == 0 && c->dt == PX_DTYPE_FP32) || !backend_wanted(bi)) continue; /* fp32 on cpu: test 1 */
    cell *k = &cells[bi][c->op.kind][dt_index(c->dt)];
    char why[256];
    px_support s = px_support_op(backends[bi].be, &c->env, &c->op, why, sizeof why);
    if (s == PX_SUPPORT_NO) {
      if (!k->skipped++) snprintf(k->why, sizeof k->why, "%s", why), k->where = c->cfg ? c->cfg->name : "ranges";
      continue;
    }
    float *got[MAXB] = {0};
    double sumsq = 0;
    px_err err = {0};
    px_status st = run_on(backends[bi].be, c, false, got, &sumsq, &err);
    worst_seen = 0;
    bool ok = !st && compare_backend(c, backends[bi].name, got, sumsq);
    if (worst_seen > k->worst) k->worst = worst_seen;
    if (st) {
      char l[320];
      label_of(c, backends[bi].name, l, sizeof l, NULL);
      fprintf(stderr, "\n  FAIL %s: claimed (%s) but failed: %s\n", l, px_support_names[s], err.msg);
    }
    CU_ASSERT(ok);
    if (!ok) k->failed++;
    else if (s == PX_SUPPORT_WIDENED) k->widened++;
    else k->ok++;
  }
}

/* fn on every case of every plan in each dtype (its fp32 twin beside it), and on the range ops. */
static void for_each_dtype_case(case_fn fn) {
  for (int g = 0; g < NCONFIGS; g++)
    for (int di = 0; di < NDT; di++) {
      px_plan plan, plan32;
      px_err err = {0};
      px_status st = plan_of(&configs[g], precisions[di], &plan, &err);
      if (!st) st = plan_of(&configs[g], PX_PREC_FP32, &plan32, &err);
      if (st) fprintf(stderr, "\n  %s %s: %s\n", configs[g].name, px_precision_names[precisions[di]], err.msg);
      CU_ASSERT_EQUAL_FATAL(st, PX_OK);
      for_each_case(&configs[g], &plan, &plan32, 100 * g + di, fn, NULL);
      if (g == 0) for_each_range_case(&plan, &plan32, 100 * g + di, fn, NULL);
      px_plan_free(&plan);
      px_plan_free(&plan32);
    }
}

static void test_backends_against_cpu(void) { for_each_dtype_case(check_backends); }

/* ======================= collectives and p2p ======================= */

/* Element i of group rank r's data. */
static float coll_value(int r, int64_t i, int salt) {
  return (float)sin(1.0 + 7.1 * r + 0.37 * (double)i + 0.9 * salt);
}

/* Upload n floats rounded to dt into a fresh device buffer. */
static void *dev_of(px_backend *be, const float *x, int64_t n, px_dtype dt, px_err *err) {
  void *d = NULL;
  uint64_t bytes = (uint64_t)n * px_dtype_bytes(dt);
  if (be->alloc(be, bytes, PX_FILL_POISON, PX_POOL_STEP, &d, err)) return NULL;
  if (!x) return d;
  void *h = px_talloc(bytes);
  pack(h, x, n, (int)dt);
  return be->upload(be, d, h, bytes, err) ? NULL : d;
}

static float *host_of(px_backend *be, const void *d, int64_t n, px_dtype dt, px_err *err) {
  uint64_t bytes = (uint64_t)n * px_dtype_bytes(dt);
  void *h = px_talloc(bytes);
  float *x = px_tfloats(n);
  if (be->sync(be, err) || be->download(be, h, d, bytes, err)) return NULL;
  unpack(x, h, n, (int)dt);
  return x;
}

static bool coll_check(const char *label, const float *got, const double *want, int64_t n, tol t) {
  if (!got) {
    fprintf(stderr, "\n  FAIL %s: the backend failed\n", label);
    return false;
  }
  return close_enough(label, got, want, n, t);
}

/* One backend, one dtype: allreduce (sum, max), allgather (out of place, in
 * place), reduce-scatter (and with a2a all-to-all) over the TP, DP and world
 * groups, and a p2p batch around the world's ring (to itself on one rank). */
static bool collectives_on(px_backend *be, const char *name, px_dtype dt, bool a2a) {
  bool ok = true;
  const int64_t n = 13;
  px_group groups[] = {PX_GROUP_TP, PX_GROUP_DP, PX_GROUP_ALL};
  /* sums of G values rounded once (NCCL and the fallback sum in fp32); exact for max, gathers and p2p */
  tol sum_t = dt == PX_DTYPE_FP32 ? (tol){1e-6, 1e-6, 0, 0} : dt == PX_DTYPE_BF16 ? BF16 : FP16, exact = {0, 0, 0, 0};
  char l[256];
  for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
    px_group g = groups[gi];
    MPI_Comm mc = px_comm_of(&comm, g);
    int G = 1, me = 0;
    MPI_Comm_size(mc, &G);
    MPI_Comm_rank(mc, &me);
    px_err err = {0};
    float *mine = px_tfloats(n * G), *all = px_tfloats(n * G);
    double *sum = px_talloc((size_t)(n * G) * sizeof *sum), *mx = px_talloc((size_t)n * sizeof *mx);
    double *gath = px_talloc((size_t)(n * G) * sizeof *gath);
    for (int64_t i = 0; i < n * G; i++) mine[i] = round_to(coll_value(me, i, (int)gi), (int)dt);
    for (int r = 0; r < G; r++)
      for (int64_t i = 0; i < n * G; i++) {
        float v = round_to(coll_value(r, i, (int)gi), (int)dt);
        sum[i] += v;
        if (i < n) mx[i] = r == 0 || v > mx[i] ? v : mx[i];
        if (i < n) gath[r * n + i] = v;
      }
    /* allreduce, sum and max, in place */
    void *d = dev_of(be, mine, n, dt, &err);
    bool st = d && !be->allreduce(be, g, d, (uint64_t)n, dt, PX_RED_SUM, &err);
    snprintf(l, sizeof l, "%s %s allreduce sum over %s (%d ranks)", name, px_dtype_names[dt], px_group_names[g], G);
    ok &= coll_check(l, st ? host_of(be, d, n, dt, &err) : NULL, sum, n, sum_t);
    if (d) be->release(be, d, (uint64_t)n * px_dtype_bytes(dt));
    d = dev_of(be, mine, n, dt, &err);
    st = d && !be->allreduce(be, g, d, (uint64_t)n, dt, PX_RED_MAX, &err);
    snprintf(l, sizeof l, "%s %s allreduce max over %s (%d ranks)", name, px_dtype_names[dt], px_group_names[g], G);
    ok &= coll_check(l, st ? host_of(be, d, n, dt, &err) : NULL, mx, n, exact);
    if (d) be->release(be, d, (uint64_t)n * px_dtype_bytes(dt));
    /* allgather: out of place, then in place (this rank's part already at its place) */
    for (int inplace = 0; inplace < 2; inplace++) {
      for (int64_t i = 0; i < n * G; i++) all[i] = i / n == me ? mine[i % n] : 1e30f;
      void *out = dev_of(be, inplace ? all : NULL, n * G, dt, &err);
      void *in = inplace ? out : dev_of(be, mine, n, dt, &err);
      st = out && in && !be->allgather(be, g, out, in, (uint64_t)n, dt, &err);
      snprintf(l, sizeof l, "%s %s allgather%s over %s (%d ranks)", name, px_dtype_names[dt],
               inplace ? " in place" : "", px_group_names[g], G);
      ok &= coll_check(l, st ? host_of(be, out, n * G, dt, &err) : NULL, gath, n * G, exact);
      if (out) be->release(be, out, (uint64_t)(n * G) * px_dtype_bytes(dt));
      if (in && !inplace) be->release(be, in, (uint64_t)n * px_dtype_bytes(dt));
    }
    /* reduce-scatter: this rank's n of the G n sums */
    void *in = dev_of(be, mine, n * G, dt, &err), *out = dev_of(be, NULL, n, dt, &err);
    st = in && out && !be->reduce_scatter(be, g, out, in, (uint64_t)n, dt, &err);
    snprintf(l, sizeof l, "%s %s reduce_scatter over %s (%d ranks)", name, px_dtype_names[dt], px_group_names[g], G);
    ok &= coll_check(l, st ? host_of(be, out, n, dt, &err) : NULL, sum + me * n, n, sum_t);
    if (in) be->release(be, in, (uint64_t)(n * G) * px_dtype_bytes(dt));
    if (out) be->release(be, out, (uint64_t)n * px_dtype_bytes(dt));
    if (a2a) { /* all-to-all: block j of rank r goes to rank j, which keeps it as its block r */
      float *send = px_tfloats(n * G);
      double *want = px_talloc((size_t)(n * G) * sizeof *want);
      for (int64_t i = 0; i < n * G; i++) send[i] = round_to(coll_value(me, i, (int)gi + 10), (int)dt);
      for (int r = 0; r < G; r++)
        for (int64_t i = 0; i < n; i++) want[r * n + i] = round_to(coll_value(r, me * n + i, (int)gi + 10), (int)dt);
      in = dev_of(be, send, n * G, dt, &err), out = dev_of(be, NULL, n * G, dt, &err);
      st = in && out && !be->alltoall(be, g, out, in, (uint64_t)n, dt, &err);
      snprintf(l, sizeof l, "%s %s alltoall over %s (%d ranks)", name, px_dtype_names[dt], px_group_names[g], G);
      ok &= coll_check(l, st ? host_of(be, out, n * G, dt, &err) : NULL, want, n * G, exact);
      if (in) be->release(be, in, (uint64_t)(n * G) * px_dtype_bytes(dt));
      if (out) be->release(be, out, (uint64_t)(n * G) * px_dtype_bytes(dt));
    }
    if (err.msg[0]) fprintf(stderr, "\n  %s: %s\n", name, err.msg);
  }
  /* p2p: a forward message (tag 1) to the next rank and a backward one (tag 2) to the previous */
  px_err err = {0};
  int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
  float *fwd = px_tfloats(n), *bwd = px_tfloats(n + 2);
  double *want_f = px_talloc((size_t)n * sizeof *want_f), *want_b = px_talloc((size_t)(n + 2) * sizeof *want_b);
  for (int64_t i = 0; i < n + 2; i++) {
    if (i < n) fwd[i] = round_to(coll_value(world_rank, i, 5), (int)dt);
    if (i < n) want_f[i] = round_to(coll_value(prev, i, 5), (int)dt);
    bwd[i] = round_to(coll_value(world_rank, i, 6), (int)dt), want_b[i] = round_to(coll_value(next, i, 6), (int)dt);
  }
  uint64_t el = px_dtype_bytes(dt);
  void *sf = dev_of(be, fwd, n, dt, &err), *sb = dev_of(be, bwd, n + 2, dt, &err);
  void *rf = dev_of(be, NULL, n, dt, &err), *rb = dev_of(be, NULL, n + 2, dt, &err);
  px_p2p items[] = {{true, next, sf, n * el, 1}, {true, prev, sb, (n + 2) * el, 2},
                    {false, prev, rf, n * el, 1}, {false, next, rb, (n + 2) * el, 2}};
  bool st = sf && sb && rf && rb && !be->p2p(be, items, 4, &err);
  snprintf(l, sizeof l, "%s %s p2p forward (%d ranks)", name, px_dtype_names[dt], world_size);
  ok &= coll_check(l, st ? host_of(be, rf, n, dt, &err) : NULL, want_f, n, exact);
  snprintf(l, sizeof l, "%s %s p2p backward (%d ranks)", name, px_dtype_names[dt], world_size);
  ok &= coll_check(l, st ? host_of(be, rb, n + 2, dt, &err) : NULL, want_b, n + 2, exact);
  if (err.msg[0]) fprintf(stderr, "\n  %s: %s\n", name, err.msg);
  void *bufs[] = {sf, sb, rf, rb};
  uint64_t sizes[] = {n * el, (n + 2) * el, n * el, (n + 2) * el};
  for (int i = 0; i < 4; i++)
    if (bufs[i]) be->release(be, bufs[i], sizes[i]);
  /* the host entries: sums of doubles and maxima of ints over the world, in host memory (exact) */
  double hsum[2] = {0.5 + world_rank, 0.25 * world_rank}, ws = world_size;
  int hmax[2] = {world_rank, -world_rank};
  st = !be->host_allreduce(be, PX_GROUP_ALL, hsum, 2, PX_HOST_DOUBLE, PX_RED_SUM, &err) &&
       !be->host_allreduce(be, PX_GROUP_ALL, hmax, 2, PX_HOST_INT, PX_RED_MAX, &err);
  bool host_ok = st && hsum[0] == 0.5 * ws + ws * (ws - 1) / 2 && hsum[1] == 0.25 * ws * (ws - 1) / 2 &&
                 hmax[0] == world_size - 1 && hmax[1] == 0;
  if (!host_ok)
    fprintf(stderr, "\n  FAIL %s host_allreduce (%d ranks): sums %g %g, maxima %d %d %s\n", name, world_size, hsum[0],
            hsum[1], hmax[0], hmax[1], err.msg);
  ok &= host_ok;
  px_tfree();
  return ok;
}

static void test_collectives(void) {
  px_op_kind kinds[] = {PX_OP_ALLREDUCE, PX_OP_ALLGATHER, PX_OP_REDUCE_SCATTER, PX_OP_SEND, PX_OP_RECV};
  bool asked = kind_wanted(PX_OP_ALLTOALL); /* -o */
  for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) asked |= kind_wanted(kinds[ki]);
  if (!asked) return;
  if (world_rank == 0) {
    int sizes[3] = {1, 1, 1};
    MPI_Comm_size(comm.tp, &sizes[0]);
    MPI_Comm_size(comm.dp, &sizes[1]);
    MPI_Comm_size(comm.world, &sizes[2]);
    printf("(groups: tp of %d, dp of %d, world of %d ranks) ", sizes[0], sizes[1], sizes[2]);
  }
  for (int bi = 0; bi < nbackends; bi++)
    for (int di = 0; di < NDT && backend_wanted(bi); di++) {
      const px_env *env = &comm_env[di];
      px_dtype dt = env->act_dtype;
      bool refused = false;
      for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) { /* the unit-sized, slotless form: dtype dt */
        px_op op = {.kind = (uint8_t)kinds[ki]};
        for (int j = 0; j < PX_OP_OUTS; j++) op.out[j] = (px_ref){-1, 0};
        for (int j = 0; j < PX_OP_INS; j++) op.in[j] = (px_ref){-1, 0};
        char why[256];
        if (px_support_op(backends[bi].be, env, &op, why, sizeof why) == PX_SUPPORT_NO) {
          cell *k = &cells[bi][kinds[ki]][di];
          if (!k->skipped++) snprintf(k->why, sizeof k->why, "%s", why), k->where = "collectives";
          refused = true;
        }
      }
      /* all-to-all (context parallelism's a2a) is optional: a backend may refuse it alone */
      px_op a2a_op = {.kind = PX_OP_ALLTOALL};
      for (int j = 0; j < PX_OP_OUTS; j++) a2a_op.out[j] = (px_ref){-1, 0};
      for (int j = 0; j < PX_OP_INS; j++) a2a_op.in[j] = (px_ref){-1, 0};
      char why[256];
      bool a2a = px_support_op(backends[bi].be, env, &a2a_op, why, sizeof why) != PX_SUPPORT_NO;
      cell *ka = &cells[bi][PX_OP_ALLTOALL][di];
      if ((!a2a || refused) && !ka->skipped++)
        snprintf(ka->why, sizeof ka->why, "%s", a2a ? "the other collectives are refused" : why), ka->where = "collectives";
      if (refused) continue;
      worst_seen = 0;
      bool ok = collectives_on(backends[bi].be, backends[bi].name, dt, a2a);
      int all_ok = ok, agreed = 0;
      MPI_Allreduce(&all_ok, &agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      CU_ASSERT(ok);
      for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        cell *k = &cells[bi][kinds[ki]][di];
        if (agreed) k->ok++;
        else k->failed++;
        if (worst_seen > k->worst) k->worst = worst_seen;
      }
      if (a2a) agreed ? ka->ok++ : ka->failed++;
      if (bi == 0 && di == 0 && agreed)
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) ref_ok[kinds[ki]]++;
      if (bi == 0 && di == 0 && agreed && a2a) ref_ok[PX_OP_ALLTOALL]++;
    }
}

/* ======================= supports_op and the walk of a plan ======================= */

/* A backend that refuses the fused attention's forward: what the walk says of it. */
static px_support refuse_flash(px_backend *b, const px_exec_op *e, char *why, size_t cap) {
  (void)b;
  if (e->op->kind != PX_OP_FLASH_ATTN) return PX_SUPPORT_YES;
  snprintf(why, cap, "a test's refusal");
  return PX_SUPPORT_NO;
}

/* ======================= allocation fills ======================= */

/* The cpu backend with fill_alloc in place of its alloc: it counts the
 * bytes asked for with each fill and can swap a fill for another. */
static px_status (*fill_next)(px_backend *, uint64_t, px_fill, px_pool, void **, px_err *);
static uint64_t fill_bytes[PX_FILL_COUNT];
static px_fill fill_swap[PX_FILL_COUNT]; /* the fill given for the fill asked (the step's tensors) */

static px_status fill_alloc(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err) {
  fill_bytes[fill] += bytes;
  return fill_next(b, bytes, pool == PX_POOL_STEP ? fill_swap[fill] : fill, pool, out, err);
}

/* Two steps of a tiny plan (tp x pp x dp, ZeRO-3, SP when tp > 1) on the
 * counting cpu backend, fills swapped by swap (NULL: as asked). */
static void fill_run(int64_t tp, int64_t pp, const px_fill *swap, double loss[2]) {
  px_err err = {0};
  px_model m;
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("local-cpu", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, world_size, 0, &err), PX_OK);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = tp, p.pp = pp, p.dp = world_size / (tp * pp), p.zero = 3, p.sp = tp > 1, p.mbs = 1, p.gbs = 2 * p.dp * pp;
  p.precision = PX_PREC_FP32;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  px_comm pc;
  CU_ASSERT_EQUAL_FATAL(px_comm_init(&pc, &plan.grid, plan.model.tied_embeddings, MPI_COMM_WORLD, &err), PX_OK);
  px_backend *cpu = NULL;
  CU_ASSERT_EQUAL_FATAL(px_cpu_backend_new(&pc, 1, &cpu, &err), PX_OK);
  px_backend be = *cpu; /* the same backend (impl), another alloc */
  fill_next = cpu->alloc, be.alloc = fill_alloc;
  for (int f = 0; f < PX_FILL_COUNT; f++) fill_swap[f] = swap ? swap[f] : (px_fill)f, fill_bytes[f] = 0;
  px_train_opts o;
  px_train_opts_init(&o);
  px_data *data = NULL;
  px_exec *x = NULL;
  CU_ASSERT_EQUAL_FATAL(px_data_open_synthetic(m.vocab, o.hp.seed, &data, &err), PX_OK);
  px_status st = px_exec_new(&plan, &be, &pc, data, &o.hp, &x, &err);
  for (int k = 0; k < 2 && !st; k++) st = px_exec_step(x, k, &loss[k], &err);
  if (st) fprintf(stderr, "\n  tp %lld pp %lld: %s\n", (long long)tp, (long long)pp, err.msg);
  CU_ASSERT_EQUAL(st, PX_OK);
  px_exec_free(x);
  px_data_close(data);
  cpu->destroy(cpu);
  px_comm_deinit(&pc);
  px_plan_free(&plan);
}

/* PX_FILL_NONE leaves memory as it was, PX_FILL_POISON fills it with NaN
 * bytes every time, PX_FILL_ZERO with zeros (the cpu backend, one rank:
 * a released block comes back for the next allocation of its size). On 4
 * ranks (--collectives), the interpreter on ZeRO-3 plans with PP (receives)
 * and with TP and SP (TP all-gathers): it asks for memory without the fill
 * (the gathers, reduce-scatters and receives), and poisoning that memory
 * all the same changes no bit of the losses (so each such buffer is written
 * whole before it is read), while memory it asks to be zeroed, poisoned
 * instead, turns the second step's loss into NaN (the poison still catches
 * a read of what was not written: the gradient buckets). */
static void test_fills(void) {
  px_backend *be = backends[0].be;
  px_err err = {0};
  enum { N = 1000 };
  const uint64_t bytes = N * sizeof(float);
  float *h = px_tfloats(N), *p;
  CU_ASSERT_EQUAL_FATAL(be->alloc(be, bytes, PX_FILL_POISON, PX_POOL_STEP, (void **)&p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(be->download(be, h, p, bytes, &err), PX_OK);
  for (int i = 0; i < N; i++) CU_ASSERT_FATAL(isnan(h[i]));
  for (int i = 0; i < N; i++) h[i] = (float)i;
  CU_ASSERT_EQUAL_FATAL(be->upload(be, p, h, bytes, &err), PX_OK);
  be->release(be, p, bytes);
  CU_ASSERT_EQUAL_FATAL(be->alloc(be, bytes, PX_FILL_NONE, PX_POOL_STEP, (void **)&p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(be->download(be, h, p, bytes, &err), PX_OK);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL_FATAL(h[i], (float)i); /* not filled: the released block as it was */
  be->release(be, p, bytes);
  CU_ASSERT_EQUAL_FATAL(be->alloc(be, bytes, PX_FILL_POISON, PX_POOL_STEP, (void **)&p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(be->download(be, h, p, bytes, &err), PX_OK);
  for (int i = 0; i < N; i++) CU_ASSERT_FATAL(isnan(h[i])); /* the same block, poisoned again */
  be->release(be, p, bytes);
  CU_ASSERT_EQUAL_FATAL(be->alloc(be, bytes, PX_FILL_ZERO, PX_POOL_STEP, (void **)&p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(be->download(be, h, p, bytes, &err), PX_OK);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL_FATAL(h[i], 0.0f);
  be->release(be, p, bytes);
  if (world_size != 4) return;
  static const px_fill poison_unfilled[PX_FILL_COUNT] = {PX_FILL_POISON, PX_FILL_ZERO, PX_FILL_POISON};
  static const px_fill poison_zeroed[PX_FILL_COUNT] = {PX_FILL_POISON, PX_FILL_POISON, PX_FILL_NONE};
  const int64_t grids[][2] = {{1, 2}, {2, 1}}; /* (tp, pp) with dp 2 */
  for (int g = 0; g < 2; g++) {
    double asked[2], poisoned[2], unzeroed[2];
    fill_run(grids[g][0], grids[g][1], NULL, asked);
    uint64_t none = fill_bytes[PX_FILL_NONE], poison = fill_bytes[PX_FILL_POISON];
    fill_run(grids[g][0], grids[g][1], poison_unfilled, poisoned);
    fill_run(grids[g][0], grids[g][1], poison_zeroed, unzeroed);
    CU_ASSERT(none > 0);   /* the collectives' destinations skip the fill */
    CU_ASSERT(poison > 0); /* and the rest keeps it */
    for (int k = 0; k < 2; k++) {
      CU_ASSERT(isfinite(asked[k]) && asked[k] > 5.0 && asked[k] < 6.0);
      CU_ASSERT_EQUAL(memcmp(&poisoned[k], &asked[k], sizeof asked[k]), 0);
    }
    CU_ASSERT(isnan(unzeroed[1])); /* the gradients' buckets, not zeroed, poison the update */
    if (world_rank == 0)
      printf("\n  fills, tp %lld pp %lld dp 2 ZeRO-3: %.2f MiB a run unfilled, %.2f MiB poisoned; losses %.7f %.7f, "
             "the same with the unfilled poisoned; the second %s with the zeroed poisoned",
             (long long)grids[g][0], (long long)grids[g][1], (double)none / 1048576.0, (double)poison / 1048576.0,
             asked[0], asked[1], isnan(unzeroed[1]) ? "NaN" : "not NaN");
  }
}


static void test_support_walk(void) {
  px_err err = {0};
  for (int g = 0; g < NCONFIGS; g++)
    for (int di = 0; di < NDT; di++) {
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(plan_of(&configs[g], precisions[di], &plan, &err), PX_OK);
      /* the cpu backend: every fp32 plan; no 16-bit one, said by the plan-level rule (plan/runnable.h) */
      px_status st = px_support_check(backends[0].be, &plan, &err);
      if (di == 0) {
        if (st) fprintf(stderr, "\n  cpu refuses %s: %s\n", configs[g].name, err.msg);
        CU_ASSERT_EQUAL(st, PX_OK);
      } else {
        char want[96];
        snprintf(want, sizeof want, "cannot run this plan: the cpu backend runs fp32 only, not %s",
                 px_dtype_names[plan.act_dtype]);
        CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
        CU_ASSERT(strstr(err.msg, want) && strstr(err.msg, "fp32 only") && !strchr(err.msg, '\n'));
      }
      /* a backend refusing one kind: named, with its dtype and reason, where a plan has it */
      px_backend fake = *backends[0].be;
      fake.name = "fake";
      fake.supports_op = refuse_flash;
      st = px_support_check(&fake, &plan, &err);
      if (configs[g].attention == PX_ATTN_FLASH) {
        char want[96];
        snprintf(want, sizeof want, "`backend` fake cannot run this plan: flash_attn (%s): a test's refusal",
                 px_dtype_names[plan.act_dtype]);
        CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
        if (!strstr(err.msg, want)) fprintf(stderr, "\n  walk: %s\n", err.msg);
        CU_ASSERT(strstr(err.msg, want) != NULL);
      } else {
        CU_ASSERT_EQUAL(st, PX_OK);
      }
      /* any other backend: the head dim the flash kernels lack is refused up front, the rest runs; one
         without the mixture-of-experts kernels refuses those plans naming a MoE op */
      for (int bi = 1; bi < nbackends; bi++) {
        st = px_support_check(backends[bi].be, &plan, &err);
        bool big = configs[g].attention == PX_ATTN_FLASH && configs[g].head_dim > 256, moe_refused = false;
        for (int k = 0; k < PX_OP_COUNT && st && configs[g].experts > 0; k++) {
          char name[64];
          snprintf(name, sizeof name, ": %s (", px_op_names[k]);
          moe_refused |= px_op_is_moe((px_op_kind)k) && strstr(err.msg, name);
        }
        moe_refused |= configs[g].experts > 0 && st && strstr(err.msg, "mixture-of-experts"); /* plan/runnable.h */
        if (st && !big && !moe_refused)
          fprintf(stderr, "\n  %s refuses %s: %s\n", backends[bi].name, configs[g].name, err.msg);
        CU_ASSERT(big ? st == PX_ERR_INPUT : st == PX_OK || (moe_refused && st == PX_ERR_INPUT));
        if (big) CU_ASSERT(strstr(err.msg, "flash_attn") && strstr(err.msg, "head dim 320"));
        /* the experts' activation weighted by the routed rows' gates is a MoE op to such a backend too, not the
           unweighted one it has kernels for */
        px_env env;
        int gated = 0;
        CU_ASSERT_EQUAL_FATAL(px_env_init(&env, &plan, 0, 0, &err), PX_OK);
        for (int k = 0; moe_refused && k < PX_BLOCK_KIND_COUNT; k++)
          for (const px_op *o = plan.blocks[k].ops; o < plan.blocks[k].ops + plan.blocks[k].nops; o++) {
            bool act = o->kind == PX_OP_SWIGLU || o->kind == PX_OP_GELU || o->kind == PX_OP_GELU_BWD;
            if (!(act && o->in[2].slot >= 0) && !(o->kind == PX_OP_SWIGLU_BWD && o->in[3].slot >= 0)) continue;
            char why[256] = "";
            px_exec_op e = {.env = &env, .op = o};
            CU_ASSERT_EQUAL(backends[bi].be->supports_op(backends[bi].be, &e, why, sizeof why), PX_SUPPORT_NO);
            CU_ASSERT_PTR_NOT_NULL(strstr(why, "mixture-of-experts"));
            gated++;
          }
        CU_ASSERT(!moe_refused || gated >= 2); /* the forward's and the backward's */
        px_env_free(&env);
      }
      px_plan_free(&plan);
    }
}

/* What the executor refuses (plan/runnable.h, asked first by exec/support.c), named by field: fp8 weights on every
 * backend; and per-head q/k norms, attention sinks and sliding-window attention (the ops flagged PX_OPF_WINDOW,
 * the window from the env), which every backend runs. */
static void test_support_refusals(void) {
  px_err err = {0};
  const config *g = &configs[1]; /* gpt-flash */
  CU_ASSERT_EQUAL_FATAL(g->attention, PX_ATTN_FLASH);
  static const struct {
    const char *what, *says; /* says NULL: every backend runs it */
  } cases[] = {{"fp8_params", "fp8 weights (`fp8_params`) are planned and simulated only"},
               {"qk_norm", NULL},
               {"attention_sinks", NULL}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(plan_of(g, precisions[0], &plan, &err), PX_OK);
    if (!strcmp(cases[i].what, "fp8_params")) plan.par.fp8_params = 1;
    if (!strcmp(cases[i].what, "qk_norm")) plan.model.qk_norm = true;
    if (!strcmp(cases[i].what, "attention_sinks")) plan.model.attention_sinks = true;
    for (int bi = 0; bi < nbackends; bi++) {
      px_status st = px_support_check(backends[bi].be, &plan, &err);
      if (!cases[i].says) {
        if (st) fprintf(stderr, "\n  %s, %s: %s\n", cases[i].what, backends[bi].name, err.msg);
        CU_ASSERT_EQUAL(st, PX_OK);
        continue;
      }
      CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
      if (!strstr(err.msg, cases[i].says)) fprintf(stderr, "\n  %s, %s: %s\n", cases[i].what, backends[bi].name, err.msg);
      CU_ASSERT(strstr(err.msg, cases[i].says) != NULL);
    }
    px_plan_free(&plan);
  }
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(plan_of(g, precisions[0], &plan, &err), PX_OK);
  plan.model.sliding_window = 3;
  int flagged = 0;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
    for (int32_t i = 0; i < plan.blocks[k].nops; i++)
      if (plan.blocks[k].ops[i].kind == PX_OP_FLASH_ATTN || plan.blocks[k].ops[i].kind == PX_OP_FLASH_ATTN_BWD)
        plan.blocks[k].ops[i].flags |= PX_OPF_WINDOW, flagged++;
  CU_ASSERT(flagged >= 2);
  for (int bi = 0; bi < nbackends; bi++) {
    px_status st = px_support_check(backends[bi].be, &plan, &err);
    if (st) fprintf(stderr, "\n  %s refuses a window: %s\n", backends[bi].name, err.msg);
    CU_ASSERT_EQUAL(st, PX_OK);
  }
  px_plan_free(&plan);
}

/* ======================= fp8 (the cpu backend's emulation) ======================= */

/* The code nearest v by search over all 256 (a tie: the even code, whose mantissa ends in 0), v clamped
 * to the largest finite value first (saturation). */
static int f8_code(double v, bool e5) {
  double mx = e5 ? 57344 : 448;
  v = v > mx ? mx : v < -mx ? -mx : v;
  int best = -1;
  double bd = INFINITY;
  for (int c = 0; c < 256; c++) {
    double x = px_fp8_ref_value(c, e5), d = fabs(x - v);
    if (!isfinite(x)) continue;
    if (d < bd || (d == bd && !(c & 1) && signbit(x) == signbit(v))) best = c, bd = d;
  }
  return best;
}

/* A one-layer tiny-gpt whose hidden size (136) spans a 128-wide tile and a short one, in fp8 with an fp32
 * base (what run --backend cpu plans), on a GPU with fp8. */
static px_status plan_fp8_sized(px_fp8_recipe recipe, bool by16, px_plan *plan, px_err *err) {
  px_model m;
  px_cluster c;
  px_status st = px_model_load("tiny-gpt", &m, err);
  if (st) return st;
  m.layers = 1, m.hidden = 136, m.heads = 4, m.kv_heads = 4, m.head_dim = 34, m.ffn_hidden = 272, m.vocab = 37;
  m.seq_len = 5, m.max_positions = 8, m.dropout = 0;
  if (by16) /* every GEMM dimension a multiple of 16, as cuBLASLt's fp8 kernels want (tokens: 2 x 8) */
    m.hidden = 128, m.head_dim = 32, m.ffn_hidden = 256, m.seq_len = 8;
  if ((st = px_model_validate(&m, "fp8", err)) || (st = px_cluster_load("dgx-h100", &c, err)) ||
      (st = px_cluster_set_size(&c, 1, 0, err)))
    return st;
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = p.pp = p.dp = 1, p.zero = 0, p.mbs = 2, p.gbs = 2, p.precision = PX_PREC_FP8, p.fp8_recipe = (int)recipe;
  p.fp8_base = PX_FP8_BASE_FP32;
  px_parallel_resolve(&p, &m, &c);
  return px_plan_compile(plan, &m, &c, &p, err);
}

static px_status plan_fp8(px_fp8_recipe recipe, px_plan *plan, px_err *err) {
  return plan_fp8_sized(recipe, false, plan, err);
}

/* The CAST op of plan that writes slot s. */
static const px_op *cast_of(const px_plan *plan, int s) {
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
    for (int32_t i = 0; i < plan->blocks[k].nops; i++) {
      const px_op *o = &plan->blocks[k].ops[i];
      if (o->kind == PX_OP_CAST && o->out[0].slot == s) return o;
    }
  return NULL;
}

/* Cast x (n elements of slot s's cast) on the cpu backend for `layer` in `step` into q, and check every code against
 * f8_code of x times the recipe's scale (per tensor: 448 or 57344 over amax, delayed: over ref_amax when
 * > 0; blockwise: each 1 x 128 tile of a row's own); dec gets the codes' values, what an fp8 GEMM reads. */
static bool cast_check(const px_plan *plan, const px_env *env, const px_op *cast, const float *x, uint8_t *q,
                       float *dec, int64_t layer, int64_t step, double ref_amax) {
  px_backend *be = backends[0].be;
  px_err err = {0};
  px_exec_op e = {.env = env, .op = cast, .layer = layer, .step = step};
  e.in[0] = (void *)x, e.out[0] = q;
  CU_ASSERT_EQUAL_FATAL(be->op(be, &e, &err), PX_OK);
  bool e5 = cast->flags & PX_OPF_E5M2, block = plan->par.fp8_recipe == PX_FP8_BLOCKWISE;
  const px_slot *s = &plan->slots[cast->out[0].slot];
  int64_t n = cast->dim[0], cols = s->shape[3] > 1 ? s->shape[2] * s->shape[3] : s->shape[2], bad = 0;
  float mx = e5 ? 57344.0f : 448.0f, scale = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t r0 = i - i % cols, t0 = r0 + (i - r0) / 128 * 128;
    if (i == 0 || (block && i == t0)) { /* a new scale's first element: the tensor's, or a 1 x 128 tile's */
      int64_t end = !block ? n : t0 + 128 < r0 + cols ? t0 + 128 : r0 + cols;
      double amax = 0;
      for (int64_t j = i; j < end; j++) amax = fmax(amax, fabs((double)x[j]));
      scale = mx / (float)(ref_amax > 0 && !block ? ref_amax : amax);
    }
    int want = f8_code((double)(x[i] * scale), e5);
    if (q[i] != want && bad++ < 3)
      fprintf(stderr, "\n  FAIL cast %s [%lld] %.8g x %.8g: code 0x%02x, want 0x%02x\n", s->name, (long long)i, x[i],
              scale, q[i], want);
    dec[i] = (float)(px_fp8_ref_value(want, e5) / scale);
  }
  return bad == 0;
}

/* The weight w (El matrices of (n, k)) as an fp8 GEMM reads it: E4M3 with one scale (448 over amax), or
 * one per 128 x 128 block. */
static void weight_ref(float *y, const float *w, int64_t El, int64_t n, int64_t k, bool block) {
  for (int64_t x = 0; x < El; x++)
    for (int64_t r0 = 0; r0 < n; r0 += block ? 128 : n)
      for (int64_t c0 = 0; c0 < k; c0 += block ? 128 : k) {
        int64_t r1 = block && r0 + 128 < n ? r0 + 128 : n, c1 = block && c0 + 128 < k ? c0 + 128 : k;
        double amax = 0;
        for (int64_t r = r0; r < r1; r++)
          for (int64_t c = c0; c < c1; c++) amax = fmax(amax, fabs((double)w[(x * n + r) * k + c]));
        float scale = 448.0f / (float)amax;
        for (int64_t r = r0; r < r1; r++)
          for (int64_t c = c0; c < c1; c++) {
            int64_t i = (x * n + r) * k + c;
            y[i] = (float)(px_fp8_ref_value(f8_code((double)(w[i] * scale), false), false) / scale);
          }
      }
}

/* Every fp8 GEMM of the plan's layer (forward, data and weight gradients) on the cpu backend: each fp8
 * input made by its cast (checked code by code), the weight given in fp32; its outputs must equal the
 * fp32 op's (the flags cleared) on the inputs' fp8 values computed here, within REF_RED. Returns the ops run. */
static int fp8_gemms(const px_plan *plan, const px_env *env) {
  px_backend *be = backends[0].be;
  bool block = plan->par.fp8_recipe == PX_FP8_BLOCKWISE;
  int ran = 0;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
    for (int32_t i = 0; i < plan->blocks[k].nops; i++) {
      const px_op *o = &plan->blocks[k].ops[i];
      if (!(o->flags & PX_OPF_FP8) || px_op_family_of((px_op_kind)o->kind) != PX_FAM_GEMM || px_op_is_moe((px_op_kind)o->kind))
        continue;
      px_exec_op e = {.env = env, .op = o, .layer = 0, .step = 5}, t = e;
      px_op twin = *o;
      twin.flags &= (uint16_t)~(PX_OPF_FP8 | PX_OPF_FP8_BLOCK);
      t.op = &twin;
      bool ok = true;
      for (int j = 0; j < PX_OP_INS; j++) {
        if (o->in[j].slot < 0) continue;
        const px_slot *s = &plan->slots[o->in[j].slot];
        int64_t n = (int64_t)s->elems;
        float *x = px_trand(n, -1, 1), *dec = px_tfloats(n);
        if (s->dtype == PX_DTYPE_FP8) {
          const px_op *c = cast_of(plan, o->in[j].slot);
          CU_ASSERT_PTR_NOT_NULL_FATAL(c);
          uint8_t *q = px_talloc((size_t)n);
          ok &= cast_check(plan, env, c, x, q, dec, 0, 5, 0);
          e.in[j] = q, t.in[j] = dec;
        } else if (s->kind == PX_SLOT_PARAM && s->fp8) {
          weight_ref(dec, x, 1, o->dim[1], o->dim[2], block);
          e.in[j] = x, t.in[j] = dec;
        } else {
          e.in[j] = t.in[j] = x;
        }
      }
      float *got[PX_OP_OUTS] = {0}, *want[PX_OP_OUTS] = {0};
      for (int j = 0; j < PX_OP_OUTS; j++)
        if (o->out[j].slot >= 0) { /* zeroed: the gradients accumulate */
          int64_t n = (int64_t)plan->slots[o->out[j].slot].elems;
          e.out[j] = got[j] = px_tfloats(n), t.out[j] = want[j] = px_tfloats(n);
        }
      px_err err = {0};
      CU_ASSERT_EQUAL_FATAL(be->op(be, &e, &err), PX_OK);
      CU_ASSERT_EQUAL_FATAL(be->op(be, &t, &err), PX_OK);
      for (int j = 0; j < PX_OP_OUTS; j++)
        if (got[j]) {
          int64_t n = (int64_t)plan->slots[o->out[j].slot].elems;
          double *w = px_talloc((size_t)n * sizeof *w);
          for (int64_t q = 0; q < n; q++) w[q] = want[j][q];
          char label[96];
          snprintf(label, sizeof label, "fp8 %s %s out[%d]", px_fp8_recipe_names[plan->par.fp8_recipe],
                   px_op_names[o->kind], j);
          ok &= close_enough(label, got[j], w, n, REF_RED);
        }
      CU_ASSERT(ok);
      ran += ok;
    }
  return ran;
}

/* Delayed scaling (TE's): a step's scale comes from the largest amax of the steps before it (the first
 * step's own): at step 6 a tensor half as large keeps step 5's scale; at step 7 one twice as large
 * saturates at 448. */
static void fp8_delayed(const px_plan *plan, const px_env *env) {
  const px_op *c = NULL;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT && !c; k++)
    for (int32_t i = 0; i < plan->blocks[k].nops && !c; i++)
      if (plan->blocks[k].ops[i].kind == PX_OP_CAST && plan->blocks[k].ops[i].out[0].slot >= 0 &&
          !(plan->blocks[k].ops[i].flags & PX_OPF_E5M2))
        c = &plan->blocks[k].ops[i];
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int64_t n = c->dim[0];
  float *x = px_trand(n, -2, 2), *dec = px_tfloats(n);
  uint8_t *q = px_talloc((size_t)n);
  double amax = 0;
  for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
  CU_ASSERT(cast_check(plan, env, c, x, q, dec, 7, 100, 0)); /* layer 7's first cast: no history yet */
  for (int64_t i = 0; i < n; i++) x[i] *= 0.5f;
  CU_ASSERT(cast_check(plan, env, c, x, q, dec, 7, 101, amax));
  for (int64_t i = 0; i < n; i++) x[i] *= 4.0f;
  CU_ASSERT(cast_check(plan, env, c, x, q, dec, 7, 102, amax));
  int64_t top = 0;
  for (int64_t i = 0; i < n; i++) top += (q[i] & 0x7f) == 0x7e;
  CU_ASSERT(top > 1); /* saturated: every value beyond the old amax */
}

static void test_fp8(void) {
  px_err err = {0};
  for (int r = 0; r < PX_FP8_RECIPE_COUNT; r++) {
    px_plan plan;
    px_env env;
    CU_ASSERT_EQUAL_FATAL(plan_fp8((px_fp8_recipe)r, &plan, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(px_env_init(&env, &plan, 0, 0, &err), PX_OK);
    CU_ASSERT_EQUAL(px_support_check(backends[0].be, &plan, &err), PX_OK); /* the cpu backend runs the plan */
    int ran = fp8_gemms(&plan, &env);
    CU_ASSERT(ran >= 12); /* qkv, proj, fc1, fc2: forward, data and weight gradients */
    if (r == PX_FP8_DELAYED) fp8_delayed(&plan, &env);
    if (!r && ran) ref_ok[PX_OP_CAST]++;
    /* any other backend: refuses the plan, naming fp8 (cuda: blockwise, and GEMM sizes that are not multiples of 16) */
    for (int bi = 1; bi < nbackends; bi++) {
      CU_ASSERT_EQUAL(px_support_check(backends[bi].be, &plan, &err), PX_ERR_INPUT);
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "fp8"));
    }
    px_env_free(&env);
    px_plan_free(&plan);
  }
  px_tfree();
}

/* mxfp8 values of x (rows, cols) quantized down its columns: blocks of 32 rows from row 0 (the reference's own
 * transpose around the kernels test_mx checks bit for bit). */
static void mx_colwise_ref(float *y, const float *x, int64_t rows, int64_t cols) {
  float *t = px_tfloats(rows * cols);
  uint8_t *q = px_talloc((size_t)(rows * cols)), *sc = px_talloc((size_t)(cols * ((rows + 31) / 32)));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) t[c * rows + r] = x[r * cols + c];
  px_k_mxfp8_quantize(q, sc, t, cols, rows, PX_FP8_E4M3);
  px_k_mxfp8_dequantize(t, q, sc, cols, rows, PX_FP8_E4M3);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) y[r * cols + c] = t[c * rows + r];
}

/* x (rows, cols) in fp8 E4M3 with its own scale (448 over its amax), as the test's reference encodes. */
static void f8_tensor_ref(float *y, const float *x, int64_t n) {
  double amax = 0;
  for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
  float scale = 448.0f / (float)amax;
  for (int64_t i = 0; i < n; i++) y[i] = (float)(px_fp8_ref_value(f8_code((double)(x[i] * scale), false), false) / scale);
}

/* nvfp4 values of x (rows, cols), blocks of block_rows x 16 along its rows, at the tensor scale of its own amax (the
 * kernels test_mx checks bit for bit). */
static void nv_tensor_ref(float *y, const float *x, int64_t rows, int64_t cols, int64_t block_rows) {
  float amax = 0;
  for (int64_t i = 0; i < rows * cols; i++) amax = fmaxf(amax, fabsf(x[i]));
  float ts = px_k_nvfp4_tensor_scale(amax);
  uint8_t *q = px_talloc((size_t)(rows * cols + 1) / 2),
          *sc = px_talloc((size_t)(((rows + block_rows - 1) / block_rows) * ((cols + 15) / 16)));
  px_k_nvfp4_quantize(q, sc, x, rows, cols, block_rows, ts, NULL);
  px_k_nvfp4_dequantize(y, q, sc, rows, cols, block_rows, ts);
}

/* nvfp4's column-wise copy of rows x (rows, cols) as a weight gradient reads it: padded with zero rows to a
 * multiple of 16, each 16 rows' random Hadamard transform, blocks of 16 down the columns at the transform's own
 * tensor scale, into y (the padded rows, cols). Returns the padded rows. */
static int64_t nv_colwise_ref(float *y, const float *x, int64_t rows, int64_t cols) {
  int64_t r16 = (rows + 15) / 16 * 16;
  float *t = px_tfloats(r16 * cols), *tr = px_tfloats(r16 * cols);
  memcpy(t, x, (size_t)(rows * cols) * sizeof *t);
  px_k_rht16(t, t, r16, cols, PX_CPU_RHT_SEED);
  for (int64_t r = 0; r < r16; r++)
    for (int64_t c = 0; c < cols; c++) tr[c * r16 + r] = t[r * cols + c];
  nv_tensor_ref(tr, tr, cols, r16, 1);
  for (int64_t r = 0; r < r16; r++)
    for (int64_t c = 0; c < cols; c++) y[r * cols + c] = tr[c * r16 + r];
  return r16;
}

/* tiny-moe's plan on one GPU of cluster in precision prec (fp8: current scaling), and op kind's fc2 op (one
 * output or output gradient: dim[5] 0). */
static const px_op *experts_plan(px_plan *plan, px_env *env, const char *cluster, px_precision prec, px_op_kind kind) {
  px_err err = {0};
  px_model m;
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-moe", &m, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_load(cluster, &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 1, 0, &err), PX_OK);
  px_parallel par;
  px_parallel_unset(&par);
  par.tp = par.pp = par.dp = par.ep = 1, par.zero = 0, par.mbs = par.gbs = 2, par.precision = prec;
  par.fp8_base = PX_FP8_BASE_FP32, par.recompute = PX_RECOMPUTE_NONE;
  if (prec == PX_PREC_FP8) par.fp8_recipe = PX_FP8_CURRENT;
  px_parallel_resolve(&par, &m, &c);
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(plan, &m, &c, &par, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_env_init(env, plan, 0, 0, &err), PX_OK);
  CU_ASSERT_EQUAL(px_support_check(backends[0].be, plan, &err), PX_OK); /* the cpu backend runs the plan */
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
    for (int32_t i = 0; i < plan->blocks[k].nops; i++)
      if (plan->blocks[k].ops[i].kind == kind && plan->blocks[k].ops[i].dim[5] == 0) return &plan->blocks[k].ops[i];
  CU_FAIL_FATAL("no fc2 expert GEMM");
  return NULL;
}

/* Transformer Engine quantizes the rows of each local expert apart (split_quantize) and each expert's weight with
 * its own quantizer; the cpu backend likewise, with expert 0's 5 rows inside the first block of 32 rows and
 * larger than the rest (block-scaled: a thousand times, fp8: 8, and expert 2's weight 8 times the others'), so
 * that one scale or one block across the experts would differ. Checked on expert GEMMs against double references
 * of per-expert values: the weight gradient (both operands' column-wise copies: mxfp8's blocks of 32 rows within
 * each expert's; nvfp4's each expert's rows padded to 16, their Hadamard transform and tensor scale, the GEMM
 * summing over the padding; its gradient cast without stochastic rounding, so that the reference is exact) and
 * the forward (each expert's rows and weight their own scale: fp8 with current scaling; nvfp4's 1 x 16 row blocks
 * and 16 x 16 weight blocks); with the whole tensor's scale or blocks, each would be off by more than REF_RED. */
enum { EA_MX_WGRAD, EA_F8_FWD, EA_NV_WGRAD, EA_NV_FWD, EA_COUNT };
static void test_experts_apart(void) {
  static const char *const what[EA_COUNT] = {"mxfp8 experts' weight gradient", "fp8 experts' forward",
                                             "nvfp4 experts' weight gradient", "nvfp4 experts' forward"};
  for (int variant = 0; variant < EA_COUNT; variant++) {
    bool wgrad = variant == EA_MX_WGRAD || variant == EA_NV_WGRAD, nv = variant >= EA_NV_WGRAD;
    bool block = variant != EA_F8_FWD;
    px_err err = {0};
    px_plan plan;
    px_env env;
    const px_op *o = experts_plan(&plan, &env, block ? "dgx-b200" : "dgx-h100",
                                  nv ? PX_PREC_NVFP4 : block ? PX_PREC_MXFP8 : PX_PREC_FP8,
                                  wgrad ? PX_OP_EXPERT_LINEAR_BWD_WEIGHT : PX_OP_EXPERT_LINEAR);
    int64_t n = o->dim[1], k = o->dim[2], el = o->dim[3];
    int a_in = wgrad ? 3 : 0; /* the operand of width k: x (the weight gradient also reads dy, width n, as in[0]) */
    int64_t rows = (int64_t)plan.slots[o->in[a_in].slot].elems / k; /* the buffer's */
    CU_ASSERT_FATAL(el >= 3 && rows >= 40);
    int32_t *counts = px_talloc((size_t)(2 * el) * sizeof *counts); /* (2, el): sent (unread here), received */
    int64_t at[8] = {0}, pat[8] = {0}; /* each expert's first row in the buffer, and padded to 16s (nvfp4's) */
    static const int32_t took[4] = {5, 0, 27, 3}; /* expert 0's rows share a block of 32 with expert 2's */
    for (int64_t x = 0; x < el; x++) counts[el + x] = x < 4 ? took[x] : 1;
    for (int64_t x = 1; x < el; x++)
      at[x] = at[x - 1] + counts[el + x - 1], pat[x] = pat[x - 1] + (counts[el + x - 1] + 15) / 16 * 16;
    px_exec_op e = {.env = &env, .op = o, .step = 1};
    e.in[4] = counts;
    /* the activation operands, each by its cast (flagged: the experts' rows); expert 0's rows the larger */
    int ops[2] = {a_in, 0}, nops = wgrad ? 2 : 1;
    float *val[2], *whole[2];
    for (int a = 0; a < nops; a++) {
      const px_op *cast = cast_of(&plan, o->in[ops[a]].slot);
      CU_ASSERT_FATAL(cast && (cast->flags & PX_OPF_EXPERT_ROWS));
      px_op plain = *cast; /* nvfp4's gradient: rounded to nearest here */
      plain.flags &= (uint16_t)~PX_OPF_E5M2;
      int64_t w = a == 0 ? k : n;
      float *x = px_trand(rows * w, -1, 1);
      val[a] = px_tfloats((rows + 16 * el) * w), whole[a] = px_tfloats((rows + 16) * w);
      for (int64_t i = 0; i < counts[el] * w; i++) x[i] *= block ? 1000.0f : 8.0f;
      uint8_t *q = px_talloc(block ? px_parallel_quant_bytes(&plan.par, (uint64_t)(rows * w), w) : (size_t)(rows * w));
      px_exec_op ce = {.env = &env, .op = nv ? &plain : cast, .step = 1};
      ce.in[0] = x, ce.out[0] = q;
      CU_ASSERT_EQUAL_FATAL(backends[0].be->op(backends[0].be, &ce, &err), PX_OK);
      for (int64_t x0 = 0; x0 < el; x0++) {
        int64_t c = counts[el + x0];
        if (!c) continue;
        if (variant == EA_MX_WGRAD) mx_colwise_ref(val[a] + at[x0] * w, x + at[x0] * w, c, w);
        else if (variant == EA_F8_FWD) f8_tensor_ref(val[a] + at[x0] * w, x + at[x0] * w, c * w);
        else if (variant == EA_NV_WGRAD) nv_colwise_ref(val[a] + pat[x0] * w, x + at[x0] * w, c, w);
        else nv_tensor_ref(val[a] + at[x0] * w, x + at[x0] * w, c, w, 1);
      }
      if (variant == EA_MX_WGRAD) mx_colwise_ref(whole[a], x, rows, w);
      else if (variant == EA_F8_FWD) f8_tensor_ref(whole[a], x, rows * w);
      else if (variant == EA_NV_WGRAD) nv_colwise_ref(whole[a], x, rows, w);
      else nv_tensor_ref(whole[a], x, rows, w, 1);
      e.in[ops[a]] = q;
    }
    float *wt = NULL, *wq = NULL; /* the forward: the experts' weights (el, n, k), each its own scale */
    if (!wgrad) {
      wt = px_trand(el * n * k, -1, 1), wq = px_tfloats(el * n * k);
      for (int64_t i = 0; i < n * k; i++) wt[2 * n * k + i] *= 8.0f; /* expert 2's weight 8 times the others' */
      for (int64_t x0 = 0; x0 < el; x0++)
        if (nv) nv_tensor_ref(wq + x0 * n * k, wt + x0 * n * k, n, k, 16);
        else f8_tensor_ref(wq + x0 * n * k, wt + x0 * n * k, n * k);
      e.in[1] = wt;
    }
    int64_t nout = wgrad ? el * n * k : rows * n;
    float *got = px_tfloats(nout);
    e.out[0] = got;
    CU_ASSERT_EQUAL_FATAL(backends[0].be->op(backends[0].be, &e, &err), PX_OK);
    double *want = px_talloc((size_t)nout * sizeof *want), worst_whole = 0;
    for (int64_t x0 = 0; x0 < el; x0++)
      for (int64_t i = 0; i < n; i++)
        if (wgrad) /* dW[x0] (n, k) = dy^T x over the expert's rows (nvfp4: its padded rows) */
          for (int64_t j = 0; j < k; j++) {
            double sum = 0, sum_whole = 0;
            int64_t c = counts[el + x0], from = nv ? pat[x0] : at[x0], to = from + (nv ? (c + 15) / 16 * 16 : c);
            for (int64_t r = from; r < to; r++) sum += (double)val[1][r * n + i] * val[0][r * k + j];
            for (int64_t r = at[x0]; r < at[x0] + c; r++)
              sum_whole += (double)whole[1][r * n + i] * whole[0][r * k + j];
            want[(x0 * n + i) * k + j] = sum;
            worst_whole = fmax(worst_whole, fabs(sum_whole - sum) / (fabs(sum) + 1e-3));
          }
        else
          for (int64_t r = at[x0]; r < at[x0] + counts[el + x0]; r++) { /* y (rows, n) = x W[x0]^T */
            double sum = 0, sum_whole = 0;
            for (int64_t j = 0; j < k; j++) {
              sum += (double)val[0][r * k + j] * wq[(x0 * n + i) * k + j];
              sum_whole += (double)whole[0][r * k + j] * wq[(x0 * n + i) * k + j];
            }
            want[r * n + i] = sum;
            worst_whole = fmax(worst_whole, fabs(sum_whole - sum) / (fabs(sum) + 1e-3));
          }
    if (!wgrad) /* rows no expert took: not written */
      for (int64_t r = at[el - 1] + counts[2 * el - 1]; r < rows; r++)
        for (int64_t i = 0; i < n; i++) want[r * n + i] = got[r * n + i];
    /* fp32 sums of terms up to 8 times the others' (expert 0's rows): within 1e-5 of the largest output */
    static const tol sums = {1e-5, 2e-5, 0, 1};
    CU_ASSERT(close_enough(what[variant], got, want, nout, block && !nv ? REF_RED : sums));
    CU_ASSERT(worst_whole > 1e-3); /* the test tells the two apart */
    px_env_free(&env);
    px_plan_free(&plan);
    px_tfree();
  }
}

/* The two TP ranks of test_sp_gather: each cast's amaxes as its rank found them (pass 0), then reduced (pass 1);
 * and the bytes rank 1 sent in each of its gathers, which rank 0's gathers append to its own. */
static struct {
  int pass, call;
  float amax[2][2];
  uint8_t *sent[3];
} sp;

static px_status sp_reduce(const px_exec_op *e, float *amax, uint64_t n, px_redop op, px_err *err) {
  (void)op, (void)err;
  for (uint64_t i = 0; i < n && i < 2; i++)
    if (sp.pass == 0) sp.amax[e->env->tp_rank][i] = amax[i];
    else amax[i] = fmaxf(sp.amax[0][i], sp.amax[1][i]);
  return PX_OK;
}

static px_status sp_gather(void *ctx, void *out, const void *in, uint64_t bytes, px_err *err) {
  (void)err;
  int rank = *(int *)ctx, c = sp.call++;
  if (rank == 1) { /* what rank 1 sends */
    sp.sent[c] = px_talloc((size_t)bytes);
    memcpy(sp.sent[c], in, (size_t)bytes);
  } else {
    memcpy(out, in, (size_t)bytes);
    memcpy((uint8_t *)out + bytes, sp.sent[c], (size_t)bytes);
  }
  return PX_OK;
}

/* Sequence parallelism in mxfp8 and nvfp4 (Transformer Engine's _all_gather_mxfp8 and _all_gather_nvfp4): on
 * tiny-gpt with tp 2, SP and mbs 2, each rank casts its shard (16 tokens of each of 2 sequences; nvfp4's amaxes
 * reduced over the ranks), and rank 0 gathers and permutes (px_cpu_fp8_gather, px_cpu_fp8_permuted). The
 * forward reads the whole tensor's row-wise copy (nvfp4: at the whole's tensor scale) and the weight gradient
 * each shard's column-wise copy, bit for bit: nvfp4's Hadamard groups and blocks of 16 tokens are the whole's;
 * mxfp8's blocks of 32 run down a shard's rows, two sequences' tokens, and differ from the whole's. */
static void test_sp_gather(void) {
  for (int nv = 0; nv < 2; nv++) {
    px_err err = {0};
    px_model m;
    CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-gpt", &m, &err), PX_OK);
    px_parallel par;
    px_parallel_unset(&par);
    par.tp = 2, par.sp = 1, par.pp = par.dp = 1, par.zero = 0, par.mbs = par.gbs = 2;
    par.precision = nv ? PX_PREC_NVFP4 : PX_PREC_MXFP8, par.fp8_base = PX_FP8_BASE_FP32;
    par.recompute = PX_RECOMPUTE_NONE;
    px_plan plan;
    px_env env[2];
    CU_ASSERT_EQUAL_FATAL(px_test_compile(&plan, &m, "dgx-b200", 2, &par, &err), PX_OK);
    for (int r = 0; r < 2; r++) CU_ASSERT_EQUAL_FATAL(px_env_init(&env[r], &plan, r, 0, &err), PX_OK);
    CU_ASSERT_EQUAL(px_support_check(backends[0].be, &plan, &err), PX_OK);
    /* the first all-gather of fp8 codes over TP, the forward GEMM and the weight gradient that read its output */
    const px_op *g = NULL, *fwd = NULL, *wgrad = NULL;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT && !g; k++)
      for (int32_t i = 0; i < plan.blocks[k].nops && !g; i++) {
        const px_op *o = &plan.blocks[k].ops[i];
        if (o->kind == PX_OP_ALLGATHER && o->group == PX_GROUP_TP && plan.slots[o->in[0].slot].dtype == PX_DTYPE_FP8)
          g = o;
      }
    CU_ASSERT_FATAL(g && (g->flags & PX_OPF_SEQ_AXIS) && g->dim[2] == 2);
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
      for (int32_t i = 0; i < plan.blocks[k].nops; i++) {
        const px_op *o = &plan.blocks[k].ops[i];
        if (o->kind == PX_OP_LINEAR && o->in[0].slot == g->out[0].slot && !fwd) fwd = o;
        if (o->kind == PX_OP_LINEAR_BWD_WEIGHT && o->in[3].slot == g->out[0].slot && !wgrad) wgrad = o;
      }
    const px_op *cast = cast_of(&plan, g->in[0].slot);
    CU_ASSERT_FATAL(fwd && wgrad && cast);
    const px_slot *full = &plan.slots[g->out[0].slot];
    int64_t cols = px_slot_row_elems(full), B = 2, rows = (int64_t)full->elems / cols, S = rows / B, Sl = S / 2;
    CU_ASSERT_FATAL(Sl == 16);
    float *x = px_trand(rows * cols, -1, 1); /* (B, S, cols): rank r's shard, (B, Sl, cols), of tokens r Sl .. */
    for (int64_t i = 0; i < cols; i++) x[(S + Sl + 3) * cols + i] *= 50.0f; /* rank 1's amax, not rank 0's */
    float *xs[2];
    uint8_t *q[2];
    px_cpu_fp8 *st[2];
    for (int r = 0; r < 2; r++) {
      xs[r] = px_tfloats(B * Sl * cols);
      for (int64_t b = 0; b < B; b++)
        memcpy(xs[r] + b * Sl * cols, x + (b * S + r * Sl) * cols, (size_t)(Sl * cols) * sizeof *x);
      q[r] = px_talloc(px_parallel_quant_bytes(&par, (uint64_t)(B * Sl * cols), cols));
      st[r] = px_cpu_fp8_new();
      CU_ASSERT_FATAL(st[r] != NULL);
    }
    px_op_comm reduce = {.reduce = sp_reduce};
    for (sp.pass = 0; sp.pass < 2; sp.pass++)
      for (int r = 0; r < 2; r++) {
        px_exec_op ce = {.env = &env[r], .op = cast, .comm = &reduce, .step = 1};
        ce.in[0] = xs[r], ce.out[0] = q[r];
        CU_ASSERT_EQUAL_FATAL(px_cpu_fp8_cast(st[r], &ce, &err), PX_OK);
      }
    size_t whole = px_parallel_quant_bytes(&par, (uint64_t)(rows * cols), cols);
    uint8_t *ws[2] = {px_talloc(whole), px_talloc(whole)}, *y0 = px_talloc(whole);
    for (int r = 1; r >= 0; r--) { /* rank 1 sends first */
      sp.call = 0;
      CU_ASSERT_EQUAL_FATAL(px_cpu_fp8_gather(st[r], sp_gather, &r, ws[r], q[r], 2, &err), PX_OK);
    }
    CU_ASSERT_EQUAL_FATAL(px_cpu_fp8_permuted(st[0], y0, ws[0], 2, B, &err), PX_OK);
    /* the references: the whole's row-wise copy, each shard's column-wise copy (nvfp4's: the whole's) */
    float *row = px_tfloats(rows * cols), *col = px_tfloats(rows * cols), *whole_col = px_tfloats(rows * cols);
    if (nv) {
      nv_tensor_ref(row, x, rows, cols, 1);
      nv_colwise_ref(col, x, rows, cols);
    } else {
      uint8_t *cq = px_talloc((size_t)(rows * cols)), *sc = px_talloc((size_t)(rows * cols / 32 + cols));
      px_k_mxfp8_quantize(cq, sc, x, rows, cols, PX_FP8_E4M3);
      px_k_mxfp8_dequantize(row, cq, sc, rows, cols, PX_FP8_E4M3);
      mx_colwise_ref(whole_col, x, rows, cols);
      for (int r = 0; r < 2; r++) {
        float *t = px_tfloats(B * Sl * cols);
        mx_colwise_ref(t, xs[r], B * Sl, cols);
        for (int64_t b = 0; b < B; b++)
          memcpy(col + (b * S + r * Sl) * cols, t + b * Sl * cols, (size_t)(Sl * cols) * sizeof *t);
      }
    }
    for (int u = 0; u < 2; u++) { /* the forward's operand, then the weight gradient's */
      px_exec_op e = {.env = &env[0], .op = u ? wgrad : fwd, .step = 1}, d;
      int j = u ? 3 : 0;
      e.in[j] = y0;
      void *scratch[PX_OP_INS];
      CU_ASSERT_EQUAL_FATAL(px_cpu_fp8_operands(st[0], &e, &d, scratch, &err), PX_OK);
      const float *got = d.in[j], *want = u ? col : row;
      int64_t off = 0;
      while (off < rows * cols && got[off] == want[off]) off++;
      if (off < rows * cols)
        fprintf(stderr, "\n  %s sp gather, %s: element %lld is %g, not %g\n", nv ? "nvfp4" : "mxfp8",
                u ? "column-wise" : "row-wise", (long long)off, got[off], want[off]);
      CU_ASSERT_EQUAL(off, rows * cols);
      if (u && !nv) CU_ASSERT(memcmp(got, whole_col, (size_t)(rows * cols) * sizeof *got) != 0); /* tells apart */
      px_cpu_fp8_release(scratch);
    }
    for (int r = 0; r < 2; r++) px_cpu_fp8_free(st[r]), px_env_free(&env[r]);
    px_plan_free(&plan);
    px_tfree();
  }
}

/* fp8_attention on the cpu backend: a fused attention op flagged fp8 (tiny-gpt, fp8 with current scaling) reads Q,
 * K, V in E4M3 (and its backward the output gradient in E5M2), each at 448 (57344) over its own amax, and computes
 * in fp32 as the unflagged op does on those values: the forward's context and log-sum-exp and the backward's
 * gradients equal the unflagged op's on inputs quantized by the test's reference, bit for bit; on the inputs
 * themselves they differ (the test tells the two apart). */
static void test_fp8_attention(void) {
  px_err err = {0};
  px_model m;
  px_cluster c;
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-gpt", &m, &err), PX_OK);
  m.dropout = 0;
  CU_ASSERT_EQUAL_FATAL(px_cluster_load("dgx-h100", &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, 1, 0, &err), PX_OK);
  px_parallel par;
  px_parallel_unset(&par);
  par.tp = par.pp = par.dp = 1, par.zero = 0, par.mbs = par.gbs = 2, par.precision = PX_PREC_FP8;
  par.fp8_recipe = PX_FP8_CURRENT, par.fp8_base = PX_FP8_BASE_FP32, par.recompute = PX_RECOMPUTE_NONE;
  par.fp8_attention = 1;
  px_parallel_resolve(&par, &m, &c);
  px_plan plan;
  px_env env;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &par, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_env_init(&env, &plan, 0, 0, &err), PX_OK);
  CU_ASSERT_EQUAL(px_support_check(backends[0].be, &plan, &err), PX_OK);
  for (int bwd = 0; bwd < 2; bwd++) {
    const px_op *o = NULL;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT && !o; k++)
      for (int32_t i = 0; i < plan.blocks[k].nops && !o; i++)
        if (plan.blocks[k].ops[i].kind == (bwd ? PX_OP_FLASH_ATTN_BWD : PX_OP_FLASH_ATTN)) o = &plan.blocks[k].ops[i];
    CU_ASSERT_FATAL(o && (o->flags & PX_OPF_FP8) && !(o->flags & PX_OPF_MXFP8));
    px_op plain = *o;
    plain.flags &= (uint16_t)~PX_OPF_FP8;
    static uint64_t rows[2] = {0, 1}; /* the batch's sequences (their dropout streams: none here) */
    px_exec_op e = {.env = &env, .op = o, .step = 1, .seq_index = rows}, r = e, raw = e;
    r.op = raw.op = &plain;
    int nq = bwd ? 4 : 3; /* the quantized inputs: q, k, v (the backward: dctx first) */
    for (int j = 0; j < PX_OP_INS; j++) {
      if (o->in[j].slot < 0) continue;
      int64_t n = (int64_t)plan.slots[o->in[j].slot].elems;
      float *x = px_trand(n, -2, 2);
      if (bwd && j == 5) /* the log-sum-exp: finite, as a forward leaves it */
        for (int64_t i = 0; i < n; i++) x[i] = 1.0f + 0.1f * x[i];
      e.in[j] = raw.in[j] = x, r.in[j] = x;
      if (j < nq) { /* the reference's quantized values */
        bool e5 = bwd && j == 0;
        double amax = 0;
        for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
        float scale = (e5 ? 57344.0f : 448.0f) / (float)amax, *q = px_tfloats(n);
        for (int64_t i = 0; i < n; i++) q[i] = (float)(px_fp8_ref_value(f8_code((double)(x[i] * scale), e5), e5) / scale);
        r.in[j] = q;
      }
    }
    int64_t outs[PX_OP_OUTS] = {0}, total = 0;
    float *got[PX_OP_OUTS] = {0}, *want[PX_OP_OUTS] = {0}, *unq[PX_OP_OUTS] = {0};
    for (int j = 0; j < PX_OP_OUTS; j++) {
      if (o->out[j].slot < 0) continue;
      outs[j] = (int64_t)plan.slots[o->out[j].slot].elems, total += outs[j];
      e.out[j] = got[j] = px_tfloats(outs[j]), r.out[j] = want[j] = px_tfloats(outs[j]);
      raw.out[j] = unq[j] = px_tfloats(outs[j]);
    }
    CU_ASSERT_FATAL(total > 0);
    CU_ASSERT_EQUAL_FATAL(backends[0].be->op(backends[0].be, &e, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(backends[0].be->op(backends[0].be, &r, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(backends[0].be->op(backends[0].be, &raw, &err), PX_OK);
    bool same = true, differs = false;
    for (int j = 0; j < PX_OP_OUTS; j++)
      if (outs[j]) {
        same &= memcmp(got[j], want[j], (size_t)outs[j] * sizeof(float)) == 0;
        differs |= memcmp(got[j], unq[j], (size_t)outs[j] * sizeof(float)) != 0;
      }
    if (!same) fprintf(stderr, "\n  %s: not the unflagged op's on the quantized inputs", px_op_names[o->kind]);
    CU_ASSERT(same);
    CU_ASSERT(differs);
  }
  px_env_free(&env);
  px_plan_free(&plan);
  px_tfree();
}

/* The cuda backend's fp8 path against the cpu backend's emulation, op for op, on a layer whose GEMM sizes
 * are multiples of 16 (fp32 base, per-tensor recipes): each cast's codes bit for bit (the same amax, scale and
 * rounding; delayed scaling's histories kept alike), then each fp8 GEMM (forward, data and weight gradients)
 * on those codes within RED (fp32 sums in another order, the dequantization factors applied after the sum).
 * Blockwise scales: refused, naming the recipe. */
static int fp8_cuda_casts; /* casts the cuda backend ran and matched */

static void test_fp8_cuda(void) {
  int bi = 1;
  while (bi < nbackends && strcmp(backends[bi].name, "cuda")) bi++;
  if (bi == nbackends) return;
  px_backend *cpu = backends[0].be, *gpu = backends[bi].be;
  px_err err = {0};
  for (int r = 0; r < PX_FP8_RECIPE_COUNT; r++) {
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(plan_fp8_sized((px_fp8_recipe)r, true, &plan, &err), PX_OK);
    if (r == PX_FP8_BLOCKWISE) {
      CU_ASSERT_EQUAL(px_support_check(gpu, &plan, &err), PX_ERR_INPUT);
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "blockwise"));
      px_plan_free(&plan);
      continue;
    }
    CU_ASSERT_EQUAL(px_support_check(gpu, &plan, &err), PX_OK);
    px_env env;
    CU_ASSERT_EQUAL_FATAL(px_env_init(&env, &plan, 0, 0, &err), PX_OK);
    int ran = 0;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
      for (int32_t i = 0; i < plan.blocks[k].nops; i++) {
        const px_op *o = &plan.blocks[k].ops[i];
        if (!(o->flags & PX_OPF_FP8) || px_op_family_of((px_op_kind)o->kind) != PX_FAM_GEMM) continue;
        px_exec_op ec = {.env = &env, .op = o, .layer = 0, .step = 5}, eg = ec;
        bool ok = true;
        for (int j = 0; j < PX_OP_INS && ok; j++) {
          if (o->in[j].slot < 0) continue;
          const px_slot *sl = &plan.slots[o->in[j].slot];
          int64_t n = (int64_t)sl->elems;
          float *x = px_trand(n, -1, 1);
          void *dx = dev_of(gpu, x, n, PX_DTYPE_FP32, &err);
          CU_ASSERT_PTR_NOT_NULL_FATAL(dx);
          if (sl->dtype != PX_DTYPE_FP8) {
            ec.in[j] = x, eg.in[j] = dx;
            continue;
          }
          const px_op *c = cast_of(&plan, o->in[j].slot);
          CU_ASSERT_PTR_NOT_NULL_FATAL(c);
          uint8_t *q = px_talloc((size_t)n), *got = px_talloc((size_t)n);
          void *dq = NULL;
          CU_ASSERT_EQUAL_FATAL(gpu->alloc(gpu, (uint64_t)n, PX_FILL_POISON, PX_POOL_STEP, &dq, &err), PX_OK);
          px_exec_op cc = {.env = &env, .op = c, .layer = 0, .step = 5}, cg = cc;
          cc.in[0] = x, cc.out[0] = q, cg.in[0] = dx, cg.out[0] = dq;
          CU_ASSERT_EQUAL_FATAL(cpu->op(cpu, &cc, &err), PX_OK);
          if (gpu->op(gpu, &cg, &err) || gpu->sync(gpu, &err) || gpu->download(gpu, got, dq, (uint64_t)n, &err)) {
            fprintf(stderr, "\n  FAIL cuda cast %s: %s\n", sl->name, err.msg);
            ok = false;
            break;
          }
          int64_t bad = 0;
          for (int64_t t = 0; t < n; t++) bad += got[t] != q[t];
          if (bad) fprintf(stderr, "\n  FAIL cuda cast %s (%s): %lld codes differ from the cpu backend's\n", sl->name,
                           px_fp8_recipe_names[r], (long long)bad);
          ok &= bad == 0;
          fp8_cuda_casts += bad == 0;
          ec.in[j] = q, eg.in[j] = dq;
        }
        float *want[PX_OP_OUTS] = {0};
        for (int j = 0; j < PX_OP_OUTS && ok; j++)
          if (o->out[j].slot >= 0) { /* zeroed: the gradients accumulate */
            int64_t n = (int64_t)plan.slots[o->out[j].slot].elems;
            ec.out[j] = want[j] = px_tfloats(n);
            eg.out[j] = dev_of(gpu, want[j], n, PX_DTYPE_FP32, &err);
          }
        if (ok) CU_ASSERT_EQUAL_FATAL(cpu->op(cpu, &ec, &err), PX_OK);
        if (ok && gpu->op(gpu, &eg, &err)) {
          fprintf(stderr, "\n  FAIL cuda %s: %s\n", px_op_names[o->kind], err.msg);
          ok = false;
        }
        for (int j = 0; j < PX_OP_OUTS && ok; j++)
          if (want[j]) {
            int64_t n = (int64_t)plan.slots[o->out[j].slot].elems;
            float *got = host_of(gpu, eg.out[j], n, PX_DTYPE_FP32, &err);
            double *w = px_talloc((size_t)n * sizeof *w);
            for (int64_t q = 0; q < n; q++) w[q] = want[j][q];
            char label[96];
            snprintf(label, sizeof label, "cuda fp8 %s %s out[%d]", px_fp8_recipe_names[r], px_op_names[o->kind], j);
            ok &= got && close_enough(label, got, w, n, RED);
          }
        CU_ASSERT(ok);
        ran += ok;
      }
    CU_ASSERT(ran >= 12); /* qkv, proj, fc1, fc2: forward, data and weight gradients */
    px_env_free(&env);
    px_plan_free(&plan);
  }
  px_tfree();
}

/* ======================= coverage, and the table ======================= */

static void cell_text(const cell *k, char *out, size_t cap) {
  int ran = k->ok + k->widened + k->failed;
  if (k->failed) snprintf(out, cap, "FAIL %d/%d", k->failed, ran);
  else if (ran)
    snprintf(out, cap, "%s%d %.2f%s", k->widened ? "wide " : "ok ", ran, k->worst, k->skipped ? " +skip" : "");
  else if (k->skipped) snprintf(out, cap, "skipped");
  else snprintf(out, cap, "-");
}

/* Per backend: each kind's cases in each dtype (ok or wide: run natively or
 * on fp32 copies, then the cases and the worst error as a fraction of its
 * tolerance), then each reason a backend gave for a skip, once. */
static void print_table(void) {
  if (world_rank != 0) return;
  for (int bi = 0; bi < nbackends; bi++) {
    if (!backend_wanted(bi)) continue;
    printf("\n  backend %-12s fp32             bf16             fp16\n", backends[bi].name);
    for (int kind = 0; kind < PX_OP_COUNT; kind++) {
      char t[NDT][40];
      for (int di = 0; di < NDT; di++) cell_text(&cells[bi][kind][di], t[di], sizeof t[di]);
      if ((collectives_only && !is_comm((px_op_kind)kind)) || !kind_wanted((px_op_kind)kind)) continue;
      printf("  %-20s %-16s %-16s %-16s\n", px_op_names[kind], t[0], t[1], t[2]);
    }
    bool said[PX_OP_COUNT][NDT] = {{false}};
    for (int kind = 0; kind < PX_OP_COUNT; kind++)
      for (int di = 0; di < NDT; di++) {
        const cell *k = &cells[bi][kind][di];
        if (!k->skipped || said[kind][di]) continue;
        printf("  %s skips", backends[bi].name);
        for (int d2 = 0; d2 < NDT; d2++) { /* every kind refused alike in a dtype: said once */
          int same = 0;
          for (int k2 = 0; k2 < PX_OP_COUNT; k2++)
            same += cells[bi][k2][d2].skipped && !strcmp(cells[bi][k2][d2].why, k->why);
          if (same < PX_OP_COUNT) continue;
          printf(" every kind in %s,", px_dtype_names[dtypes[d2]]);
          for (int k2 = 0; k2 < PX_OP_COUNT; k2++) said[k2][d2] = true;
        }
        for (int k2 = 0; k2 < PX_OP_COUNT; k2++)
          for (int d2 = 0; d2 < NDT; d2++)
            if (!said[k2][d2] && cells[bi][k2][d2].skipped && !strcmp(cells[bi][k2][d2].why, k->why)) {
              printf(" %s %s (%s),", px_op_names[k2], px_dtype_names[dtypes[d2]], cells[bi][k2][d2].where);
              said[k2][d2] = true;
            }
        printf(" because: %s\n", k->why);
      }
  }
}

/* Every kind of the graph has a reference here, and it ran and passed on
 * the cpu backend (communication kinds: the collective entries); every
 * backend ran or skipped each kind in each dtype. fp8's cast: the cpu
 * backend's emulation (test_fp8); every other backend refuses it. */
static void test_every_kind_tested(void) {
  for (int k = 0; k < PX_OP_COUNT; k++) {
    if (px_op_on_host((px_op_kind)k)) continue; /* offload's: the interpreter's own host code (tests/cli/exec_run.sh) */
    if (k == PX_OP_CAST) { /* fp8's cast: the cpu backend's emulation passed test_fp8; the others refuse it */
      if (!ref_ok[k]) fprintf(stderr, "\n  FAIL op kind cast never ran (and passed) on the cpu backend\n");
      CU_ASSERT(ref_ok[k] > 0);
      px_op op = {.kind = PX_OP_CAST, .flags = PX_OPF_FP8, .dim = {64}};
      for (int i = 0; i < PX_OP_OUTS; i++) op.out[i].slot = -1;
      for (int i = 0; i < PX_OP_INS; i++) op.in[i].slot = -1;
      for (int bi = 1; bi < nbackends; bi++) {
        if (!strcmp(backends[bi].name, "cuda")) { /* the cuda backend casts: test_fp8_cuda ran them */
          if (!fp8_cuda_casts) fprintf(stderr, "\n  FAIL op kind cast never ran (and matched) on the cuda backend\n");
          CU_ASSERT(fp8_cuda_casts > 0);
          continue;
        }
        char why[256] = "";
        CU_ASSERT_EQUAL(px_support_op(backends[bi].be, &comm_env[0], &op, why, sizeof why), PX_SUPPORT_NO);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, "fp8"));
      }
      continue;
    }
    if (!refs[k]) fprintf(stderr, "\n  FAIL op kind %s has no reference in tests/test_backend_ops.c\n", px_op_names[k]);
    CU_ASSERT_PTR_NOT_NULL(refs[k]);
    if (!ref_ok[k]) fprintf(stderr, "\n  FAIL op kind %s never ran (and passed) on the cpu backend\n", px_op_names[k]);
    CU_ASSERT(ref_ok[k] > 0);
    for (int bi = 0; bi < nbackends; bi++)
      for (int di = 0; di < NDT; di++) {
        const cell *c = &cells[bi][k][di];
        bool covered = c->ok || c->widened || c->skipped || c->failed || (bi == 0 && di == 0);
        if (!covered) fprintf(stderr, "\n  FAIL %s %s: no case in dtype %d\n", backends[bi].name, px_op_names[k], di);
        CU_ASSERT(covered);
      }
  }
  print_table();
}

/* ======================= --perf: the ops timed ======================= */

/* A row per case: its kind, dtype, plan and sizes, then each backend's time
 * a run and rate (GFLOP/s of the op's FLOPs, else GB/s of its bytes; *: run
 * on fp32 copies, as the backend widens it). Printed, never asserted. */
static void perf_case(opcase *c, void *ctx) {
  (void)ctx;
  if (!kind_wanted((px_op_kind)c->op.kind)) return;
  char dims[80];
  snprintf(dims, sizeof dims, "%lld %lld %lld %lld %lld %lld", (long long)c->op.dim[0], (long long)c->op.dim[1],
           (long long)c->op.dim[2], (long long)c->op.dim[3], (long long)c->op.dim[4], (long long)c->op.dim[5]);
  char row[512];
  int n = snprintf(row, sizeof row, "  %-20s %-5s %-14s %-30s", px_op_names[c->op.kind], px_dtype_names[c->dt],
                   c->cfg ? c->cfg->name : "ranges", dims);
  for (int bi = 0; bi < nbackends && n < (int)sizeof row; bi++) {
    if (!backend_wanted(bi)) continue;
    char why[256];
    px_support s = px_support_op(backends[bi].be, &c->env, &c->op, why, sizeof why);
    float *got[MAXB] = {0};
    double sumsq = 0;
    px_err err = {0};
    if (s == PX_SUPPORT_NO || run_on(backends[bi].be, c, false, got, &sumsq, &err)) {
      n += snprintf(row + n, sizeof row - (size_t)n, "  %-31s", s == PX_SUPPORT_NO ? "skipped" : "failed");
      continue;
    }
    double rate = c->op.flops > 0 ? c->op.flops / perf_op_s / 1e9 : c->op.bytes / perf_op_s / 1e9;
    n += snprintf(row + n, sizeof row - (size_t)n, "  %10.2f us %8.2f %-7s%c", perf_op_s * 1e6, rate,
                  c->op.flops > 0 ? "GFLOP/s" : "GB/s", s == PX_SUPPORT_WIDENED ? '*' : ' ');
  }
  if (world_rank == 0) printf("%s\n", row);
}

static void test_perf(void) {
  if (world_rank == 0) {
    printf("\n  %-20s %-5s %-14s %-30s", "op", "dtype", "plan", "dims");
    for (int bi = 0; bi < nbackends; bi++)
      if (backend_wanted(bi)) printf("  %-31s", backends[bi].name);
    printf("\n");
  }
  for_each_dtype_case(perf_case);
}

/* ======================= set-up ======================= */

static const char usage[] =
    "usage: test_backend_ops [-o OP[,OP...]] [-b cpu|cuda] [--perf] [--collectives]\n"
    "  -o OP        only the ops of these kinds (parallax's op names: linear, flash_attn, ...)\n"
    "  -b BACKEND   only this backend (cpu, or cuda where a device is); the cpu backend still computes\n"
    "               what the others are compared with\n"
    "  --perf       time each op case on each backend and print the table (no checks)\n"
    "  --collectives  the collectives and fills only, across the ranks of mpirun -np N\n";

/* The command line into the filters; 0 to go on, else the exit status (2: bad usage). */
static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--collectives")) {
      collectives_only = true;
    } else if (!strcmp(a, "--perf")) {
      perf_mode = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      if (world_rank == 0) fputs(usage, stdout);
      return -1;
    } else if ((!strcmp(a, "-o") || !strcmp(a, "-b")) && i + 1 == argc) {
      fprintf(stderr, "test_backend_ops: %s needs a value\n%s", a, usage);
      return 2;
    } else if (!strcmp(a, "-b")) {
      backend_asked = argv[++i];
      if (strcmp(backend_asked, "cpu") && strcmp(backend_asked, "cuda")) {
        fprintf(stderr, "test_backend_ops: -b: '%s' is not one of cpu|cuda\n", backend_asked);
        return 2;
      }
    } else if (!strcmp(a, "-o")) {
      kind_filtered = true;
      char list[512];
      snprintf(list, sizeof list, "%s", argv[++i]);
      char *save = NULL;
      for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < PX_OP_COUNT && strcmp(px_op_names[k], name)) k++;
        if (k == PX_OP_COUNT) {
          fprintf(stderr, "test_backend_ops: -o: '%s' is not an op kind; the kinds:", name);
          for (k = 0; k < PX_OP_COUNT; k++) fprintf(stderr, " %s", px_op_names[k]);
          fputc('\n', stderr);
          return 2;
        }
        kind_asked[k] = true;
      }
    } else {
      fprintf(stderr, "test_backend_ops: unknown argument '%s'\n%s", a, usage);
      return 2;
    }
  }
  return 0;
}

static px_status comm_setup(px_err *err) {
  /* the communicators: tp 2 x dp N/2 when N > 1 ranks, so TP, DP and world groups all have members */
  px_model m;
  px_cluster c;
  px_status st = px_model_load("tiny", &m, err);
  if (!st) st = px_cluster_load("dgx-h100", &c, err);
  if (!st) st = px_cluster_set_size(&c, world_size, 0, err);
  for (int di = 0; di < NDT && !st; di++) {
    px_parallel p;
    px_parallel_unset(&p);
    p.tp = world_size > 1 && world_size % 2 == 0 ? 2 : 1;
    p.pp = 1, p.dp = world_size / p.tp, p.mbs = 1, p.gbs = p.dp, p.precision = (int)precisions[di];
    px_parallel_resolve(&p, &m, &c);
    st = px_plan_compile(&comm_plan[di], &m, &c, &p, err);
    if (!st) st = px_env_init(&comm_env[di], &comm_plan[di], 0, 0, err);
  }
  if (!st) st = px_comm_init(&comm, &comm_plan[0].grid, comm_plan[0].model.tied_embeddings, MPI_COMM_WORLD, err);
  return st;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int code = parse_args(argc, argv);
  if (code) {
    MPI_Finalize();
    return code < 0 ? 0 : code;
  }
  px_err err = {0};
  px_status st = comm_setup(&err);
  if (!st) st = px_cpu_backend_new(&comm, 0, &backends[0].be, &err);
  if (!st) backends[nbackends++].name = "cpu";
  /* the CUDA backend as the executor gets it: the module (or, on the emulator, linked in) */
  const px_cuda_module *cuda = NULL;
  px_err why = {0};
  if (!st && !px_cuda_load(&cuda, &why) && cuda->device_count() > 0) {
    st = cuda->backend_new(&comm, &backends[1].be, &err);
    if (!st) backends[nbackends++].name = "cuda";
  } else if (!st && world_rank == 0) {
    printf("cuda backend: not tested here (tests/gpu/emu/run.sh runs this suite on the emulator): %s\n",
           cuda ? "no CUDA device" : why.msg);
  }
  bool have = !backend_asked;
  for (int bi = 0; bi < nbackends; bi++) have |= backend_wanted(bi);
  if (!st && !have) { /* -b cuda without a device: skipped (77, as ctest's gpu tests) */
    if (world_rank == 0) printf("test_backend_ops: -b %s: no %s backend here\n", backend_asked, backend_asked);
    code = 77;
  }
  if (st || code) {
    if (st) fprintf(stderr, "test_backend_ops: %s\n", err.msg);
    for (int bi = nbackends - 1; bi >= 0; bi--) backends[bi].be->destroy(backends[bi].be);
    MPI_Finalize();
    return st ? 1 : code;
  }
  static const px_test all[] = {
      {"the cpu backend against double-precision references (fp32)", test_cpu_against_references},
      {"every backend against the cpu backend (fp32, bf16, fp16)", test_backends_against_cpu},
      {"collectives and p2p through the backend entries", test_collectives},
      {"allocation fills: none, poison, zero", test_fills},
      {"supports_op, and the walk of a plan refusing what a backend cannot run", test_support_walk},
      {"the executor's own refusals (fp8 weights), q/k norms, sinks and the window", test_support_refusals},
      {"fp8 on the cpu backend: casts code by code, fp8 GEMMs, delayed scaling (double references)", test_fp8},
      {"fp8 on the cuda backend against the cpu backend's: casts bit for bit, fp8 GEMMs", test_fp8_cuda},
      {"experts quantized apart: mxfp8's column-wise blocks, fp8 current scaling's and nvfp4's scales and transform",
       test_experts_apart},
      {"fp8 attention: the fused attention's Q, K, V and output gradient quantized as cuDNN's FP8 attention reads them",
       test_fp8_attention},
      {"sequence parallelism in mxfp8 and nvfp4: each rank's shard cast, both copies gathered with their scales",
       test_sp_gather},
      {"every op kind has a test", test_every_kind_tested},
  };
  static const px_test coll[] = {
      {"collectives and p2p through the backend entries", test_collectives},
      {"allocation fills, and the interpreter's on ZeRO-3 plans with PP and with TP", test_fills},
  };
  /* -o, -b: the op cases and collectives of those kinds and backends, without the whole-suite checks */
  static const px_test filtered[] = {
      {"the cpu backend against double-precision references (fp32)", test_cpu_against_references},
      {"every backend against the cpu backend (fp32, bf16, fp16)", test_backends_against_cpu},
      {"collectives and p2p through the backend entries", test_collectives},
  };
  static const px_test perf[] = {{"each op case timed on each backend (never asserted)", test_perf}};
  int rc = perf_mode          ? px_test_main("backend_ops_perf", perf, 1)
           : collectives_only ? px_test_main("backend_ops_collectives", coll, sizeof coll / sizeof coll[0])
           : kind_filtered || backend_asked ? px_test_main("backend_ops_filtered", filtered, sizeof filtered / sizeof filtered[0])
                                            : px_test_main("backend_ops", all, sizeof all / sizeof all[0]);
  if (collectives_only || ((kind_filtered || backend_asked) && !perf_mode)) print_table();
  for (int bi = nbackends - 1; bi >= 0; bi--) backends[bi].be->destroy(backends[bi].be);
  px_comm_deinit(&comm);
  for (int di = 0; di < NDT; di++) px_env_free(&comm_env[di]), px_plan_free(&comm_plan[di]);
  MPI_Finalize();
  return rc;
}
