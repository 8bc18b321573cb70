/* CPU backend: every op of the graph on fp32 host tensors, MPI collectives;
 * fp8 emulated (exec/cpu/fp8.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "exec/cpu/backend.h"

#include <cblas.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/cpu/fp8.h"
#include "exec/contract.h"
#include "exec/params.h"
#include "plan/model.h"
#include "kernels/cpu/act.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embed.h"
#include "kernels/cpu/flash.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/par.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/rope.h"
#include "kernels/math.h"

/* Freed blocks kept for reuse by size: training allocates the same sizes every
 * micro-batch, and fresh pages cost a fault each. */
#define CACHE_SLOTS 256

typedef struct {
  void *p;
  uint64_t bytes;
} cached;

typedef struct {
  const px_comm *comm;
  cached cache[CACHE_SLOTS];
  int ncache;
  int threads; /* OpenBLAS threads */
  px_cpu_fp8 *f8; /* the scales of the fp8 codes written, the amax histories */
} cpu;

/* PX_FILL_POISON memory is filled with 0xff bytes: NaN in every float type,
 * so a read before the first write poisons the results. */
static px_status cpu_alloc(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err) {
  (void)pool;
  cpu *c = b->impl;
  *out = NULL;
  for (int i = c->ncache - 1; i >= 0 && !*out; i--)
    if (c->cache[i].bytes == bytes) {
      *out = c->cache[i].p;
      c->cache[i] = c->cache[--c->ncache];
    }
  if (!*out) *out = malloc(bytes ? bytes : 1);
  if (!*out) return px_err_set(err, PX_ERR_RUNTIME, "out of memory allocating %llu bytes", (unsigned long long)bytes);
  if (fill != PX_FILL_NONE) memset(*out, fill == PX_FILL_ZERO ? 0 : 0xff, bytes);
  return PX_OK;
}

static void cpu_release(px_backend *b, void *p, uint64_t bytes) {
  if (!p) return;
  cpu *c = b->impl;
  px_cpu_fp8_forget(c->f8, p, bytes);
  if (c->ncache == CACHE_SLOTS) { /* full: drop one */
    free(c->cache[0].p);
    c->cache[0] = c->cache[--c->ncache];
  }
  c->cache[c->ncache++] = (cached){p, bytes};
}
static px_status cpu_zero(px_backend *b, void *p, uint64_t bytes, px_err *err) {
  (void)b, (void)err;
  memset(p, 0, bytes);
  return PX_OK;
}
static px_status cpu_copy(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err) {
  (void)b, (void)err;
  if (dst != src) memmove(dst, src, bytes);
  return PX_OK;
}

static px_status cpu_dropout(const px_exec_op *e) {
  const int64_t *d = e->op->dim;
  px_dropout_geom g = px_exec_dropout_geom(e);
  float *y = e->out[0];
  uint8_t *mask = e->out[1];
  const float *x = e->in[0], *bias = e->in[1];
  int64_t n = g.rows * g.row_elems;
  if (y != x) memcpy(y, x, (size_t)n * sizeof *y);
  if (bias) /* bias of a row-parallel layer, added before the dropout */
    for (int64_t r = 0; r < n / d[2]; r++)
      for (int64_t c = 0; c < d[2]; c++) y[r * d[2] + c] += bias[c];
  int64_t per = e->env->cp > 1 ? g.d1 : 1, n_el = g.row_elems / per; /* CP: a sequence row at a time */
  for (int64_t b = 0; b < g.rows; b++)
    for (int64_t t = 0; t < per; t++) {
      int64_t off = b * g.row_elems + t * n_el;
      px_k_dropout_fwd(y + off, mask + off, y + off, n_el, g.p, g.seed, px_exec_dropout_at(e, &g, b, t));
    }
  return PX_OK;
}

/* ---- fused attention, a batch row at a time (each has its dropout offset) ---- */

/* Context parallelism's ring (Megatron-Core's P2P context parallelism):
 * the keys and values go around the CP ring a block (every batch row of one
 * rank's S tokens) at a time. Forward: the first block is the rank's own;
 * each later one's result is merged into ctx and lse by the online-softmax
 * rule. Backward: with the final ctx and lse, each block's dq part is added
 * here and its dk, dv accumulate in buffers that travel with the block, one
 * more hop bringing each rank its own; with sinks, each row's probability of
 * every block's keys adds up (they stay with the rank's queries) for their
 * gradient at the end. Blocks arrive in the op's workspace: two buffers of
 * (k, v) forward, (k, v, dk, dv) backward, then (B, HQ, S) those sums. */
static px_status cpu_flash_ring(const px_exec_op *e, bool bwd, const int32_t *qpos, uint64_t seed, px_err *err) {
  const px_env *v = e->env;
  const int64_t *d = e->op->dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], cp = v->cp, nq = S * HQ * D, nkv = S * HKV * D;
  int64_t per = bwd ? 4 : 2, blk = B * nkv; /* floats of a k (v, dk, dv) block */
  int64_t window = px_exec_window(e);
  float p_drop = (float)v->dropout, **out = (float **)e->out, **in = (float **)e->in;
  float *ws = out[bwd ? 4 : 2], *buf[2] = {ws, ws + per * blk};
  float *seen = bwd && out[3] ? ws + 2 * per * blk : NULL; /* (B, HQ, S) */
  if (!e->comm || !e->comm->ring) return px_err_set(err, PX_ERR_RUNTIME, "internal: cpu backend: no CP ring");
  memcpy(buf[0], in[bwd ? 2 : 1], (size_t)blk * sizeof *ws);
  memcpy(buf[0] + blk, in[bwd ? 3 : 2], (size_t)blk * sizeof *ws);
  if (bwd) memset(buf[0] + 2 * blk, 0, (size_t)(2 * blk) * sizeof *ws);
  if (seen) memset(seen, 0, (size_t)(B * HQ * S) * sizeof *seen);
  float *part = out[3], *part_lse = part + B * nq; /* forward: a block's ctx and lse before the merge */
  px_status st = PX_OK;
  for (int64_t s = 0; s < cp && !st; s++) {
    float *cur = buf[s % 2], *nxt = buf[(s + 1) % 2];
    const int32_t *kpos = v->cp_pos + (v->cp_rank - s + cp) % cp * v->seq_cp; /* the block's rank's rows */
    for (int64_t b = 0; b < B; b++) {
      uint64_t off = px_exec_head_dropout_offset(e, b, 0, v->seq);
      const float *k = cur + b * nkv, *vv = cur + blk + b * nkv;
      if (bwd)
        px_k_flash_bwd_seen(out[0] + b * nq, cur + 2 * blk + b * nkv, cur + 3 * blk + b * nkv,
                            seen ? seen + b * HQ * S : NULL, in[0] + b * nq, in[1] + b * nq, k, vv, in[4] + b * nq,
                            in[5] + b * HQ * S, S, S, HQ, HKV, D, qpos, kpos, window, v->seq, p_drop, seed, off);
      else if (s == 0)
        px_k_flash_fwd(out[0] + b * nq, out[1] + b * HQ * S, in[0] + b * nq, k, vv, S, S, HQ, HKV, D, qpos, kpos,
                       window, v->seq, p_drop, seed, off);
      else {
        px_k_flash_fwd(part + b * nq, part_lse + b * HQ * S, in[0] + b * nq, k, vv, S, S, HQ, HKV, D, qpos, kpos,
                       window, v->seq, p_drop, seed, off);
        px_k_flash_merge(out[0] + b * nq, out[1] + b * HQ * S, part + b * nq, part_lse + b * HQ * S, S, HQ, D);
      }
    }
    if (s == cp - 1 && !bwd) {
      for (int64_t b = 0; in[3] && b < B; b++) /* the sink logits, once every block is merged */
        px_k_flash_sink_fold(out[0] + b * nq, out[1] + b * HQ * S, in[3], S, HQ, D);
      break;
    }
    /* pass the block on: k and v while others still need them; backward, dk and dv once more at the end */
    int64_t from = s == cp - 1 ? 2 * blk : 0, n = per * blk - from;
    st = e->comm->ring(e, cur + from, nxt + from, (uint64_t)n * sizeof *ws, err);
  }
  if (!st && bwd) /* the rank's own dk and dv, home after cp hops */
    for (int64_t i = 0; i < blk; i++) out[1][i] += buf[cp % 2][2 * blk + i], out[2][i] += buf[cp % 2][3 * blk + i];
  for (int64_t b = 0; !st && seen && b < B; b++) /* every block seen: the sinks' gradient */
    px_k_flash_sink_bwd(out[3], seen + b * HQ * S, in[0] + b * nq, in[4] + b * nq, in[5] + b * HQ * S, S, HQ, D);
  return st;
}

/* Dims: B, query rows, query heads, kv heads, head dim, key rows. With
 * context parallelism the rows sit at other positions than 0..S-1: the
 * rank's chunks (queries; keys too on the ring) or every rank's, rank-major
 * (keys all-gathered; queries and keys after the all-to-all, whose heads are
 * the rank's 1/cp of them), and dropout counts in the whole sequence. With
 * sinks (in[3], this TP rank's heads) the forward folds them in and the
 * backward adds their gradient (out[3]). The values' head dim is v's slot's
 * (latent attention's v_head_dim; the ring's blocks take D). */
static px_status cpu_flash(const px_exec_op *e, bool bwd, px_err *err) {
  const px_env *v = e->env;
  const int64_t *d = e->op->dim;
  int64_t B = d[0], S = d[1], HQ = d[2], HKV = d[3], D = d[4], SK = d[5] > 0 ? d[5] : S;
  int64_t DV = v->slots[e->op->in[bwd ? 3 : 2].slot].shape[3]; /* (B, S, heads, Dv) */
  int64_t nq = S * HQ * D, nkv = SK * HKV * D, no = S * HQ * DV, nv = SK * HKV * DV, h0 = 0, s_full = S;
  int64_t window = px_exec_window(e);
  float pd = (float)v->dropout;
  uint64_t seed = px_exec_dropout_seed(e, PX_DROPOUT_SITE_ATTN);
  float **out = (float **)e->out, **in = (float **)e->in;
  const int32_t *qpos = NULL, *kpos = NULL;
  if (v->cp > 1) { /* kpos: every rank's rows; qpos: those too after the all-to-all, else the rank's */
    kpos = v->cp_pos, s_full = v->seq;
    qpos = v->cp_heads ? v->cp_pos : v->cp_pos + v->cp_rank * v->seq_cp;
    if (v->cp_heads) h0 = v->cp_rank * HQ;
  }
  if (e->op->flags & PX_OPF_CP_RING) return cpu_flash_ring(e, bwd, qpos, seed, err);
  for (int64_t b = 0; b < B; b++) {
    uint64_t off = px_exec_head_dropout_offset(e, b, h0, s_full);
    if (!bwd) {
      px_k_flash_fwd_dv(out[0] + b * no, out[1] + b * HQ * S, in[0] + b * nq, in[1] + b * nkv, in[2] + b * nv, S, SK,
                        HQ, HKV, D, DV, qpos, kpos, window, s_full, pd, seed, off);
      if (in[3]) px_k_flash_sink_fold(out[0] + b * no, out[1] + b * HQ * S, in[3] + h0, S, HQ, DV);
    } else {
      px_k_flash_bwd_dv(out[0] + b * nq, out[1] + b * nkv, out[2] + b * nv, out[3] ? out[3] + h0 : NULL,
                          in[0] + b * no, in[1] + b * nq, in[2] + b * nkv, in[3] + b * nv, in[4] + b * no,
                          in[5] + b * HQ * S, S, SK, HQ, HKV, D, DV, qpos, kpos, window, s_full, pd, seed, off);
    }
  }
  return PX_OK;
}

/* ---- mixture of experts ---- */

/* Dims of the routing ops: token rows, hidden, top-k, experts, routed rows. */
static px_status cpu_moe(const px_exec_op *e, px_err *err) {
  const px_op *o = e->op;
  const px_env *v = e->env;
  const int64_t *d = o->dim;
  int64_t n = d[0], h = d[1], k = d[2], E = d[3];
  float **out = (float **)e->out, **in = (float **)e->in;
  if (o->kind == PX_OP_MOE_ROUTE) {
    if (out[0] != in[0]) memcpy(out[0], in[0], (size_t)(n * E) * sizeof **out);
    /* scratch: group-limited routing's (3 groups + k) floats, token dropping's (n) choices of an expert (a token's
     * once at most) */
    int64_t *work = malloc((size_t)(n + 3 * v->expert_groups + k) * sizeof *work);
    if (!work) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    px_k_moe_route_fwd(out[0], (int32_t *)out[1], out[2], (float *)work, n, E, k, v->router_sigmoid,
                       v->norm_topk_prob, v->expert_groups, v->groups_per_token);
    if (v->capacity_factor > 0) /* token dropping at the capacity of the n tokens this rank routes (Megatron-Core's) */
      px_k_moe_drop((int32_t *)out[1], out[2], work, n, E, k, px_moe_capacity(v->capacity_factor, n * k, E),
                    !v->drop_by_position);
    free(work);
    return PX_OK;
  }
  if (o->kind == PX_OP_MOE_ROUTE_BWD) {
    float *work = malloc((size_t)(3 * E) * sizeof *work), *f = work + 2 * E; /* (2 E) scratch, (E) shares */
    if (!work) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    /* the load-balancing loss: coef x the mean of every micro-batch's; as a share of the step's loss that is
     * coef x loss_scale x these n rows (loss_scale: the fp16 scale over the tokens of the step). The experts'
     * shares are the micro-batch's: its rows are split over the TP ranks (sequence parallelism) and the CP
     * ranks, n each, so the mean of theirs (Megatron-Core reduces the tokens per expert over its TP x CP group) */
    px_k_moe_shares(f, (int32_t *)work, in[1], n, E, k);
    int64_t split = (v->sp ? v->tp : 1) * v->cp;
    px_status st = split > 1 ? px_exec_reduce(e, f, (uint64_t)E, PX_RED_SUM, err) : PX_OK;
    for (int64_t i = 0; !st && split > 1 && i < E; i++) f[i] /= (float)split;
    if (!st)
      px_k_moe_route_bwd(out[0], work, in[0], in[1], (const int32_t *)in[2], f, n, E, k, v->router_sigmoid,
                         v->norm_topk_prob, (float)(v->aux_loss_coef * (double)e->loss_scale * (double)n));
    free(work);
    return st;
  }
  /* the permutations: every choice's expert-major row */
  const int32_t *idx = (const int32_t *)in[o->kind == PX_OP_MOE_UNPERMUTE ? 2 : o->kind == PX_OP_MOE_UNPERMUTE_BWD ? 3 : 1];
  int64_t *pos = malloc((size_t)(n * k + E + 1) * sizeof *pos);
  if (!pos) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_k_moe_positions(pos, o->kind == PX_OP_MOE_PERMUTE ? (int32_t *)out[1] : NULL, pos + n * k, idx, n, E, k);
  /* the gates go with the rows (in[2]): each choice's own, so a permutation of the n k choices one wide */
  switch (o->kind) {
    case PX_OP_MOE_PERMUTE:
      px_k_moe_permute_fwd(out[0], in[0], pos, n, h, k);
      if (in[2]) px_k_moe_permute_fwd(out[2], in[2], pos, n * k, 1, 1);
      break;
    case PX_OP_MOE_PERMUTE_BWD:
      px_k_moe_permute_bwd(out[0], in[0], pos, n, h, k);
      if (in[2]) px_k_moe_permute_bwd(out[1], in[2], pos, n * k, 1, 1);
      break;
    case PX_OP_MOE_UNPERMUTE: px_k_moe_unpermute_fwd(out[0], in[0], NULL, pos, n, h, k); break;
    default: px_k_moe_unpermute_bwd(out[0], NULL, in[0], NULL, NULL, pos, n, h, k); break;
  }
  free(pos);
  return PX_OK;
}

/* Grouped expert GEMMs: the rows in expert-major segments, counts[s El + e]
 * rows of local expert e from source s (source-major), each through its
 * expert's (n, k) weight block; split outputs (gate, up) are row ranges of
 * the block. Dims: rows per expert (planned), n, k, local experts, n0, n1. */
static void cpu_expert_linear(const px_exec_op *e) {
  const px_op *o = e->op;
  const int64_t *d = o->dim;
  int64_t n = d[1], k = d[2], el = d[3], ns, row = 0;
  float **out = (float **)e->out, **in = (float **)e->in;
  /* the rows taken from each (source, local expert) */
  const int32_t *counts = (const int32_t *)in[4] + px_contract_expert_taken(e, &ns);
  for (int64_t s = 0; s < ns; s++)
    for (int64_t x = 0; x < el; x++) {
      int64_t rows = counts[s * el + x], off = 0;
      const float *w = in[o->kind == PX_OP_EXPERT_LINEAR ? 1 : 3] + x * n * k;
      for (int i = 0; i < 2 && d[4 + i] > 0; i++) {
        int64_t ni = d[4 + i];
        const float *wi = w + off * k;
        switch (o->kind) { /* the biases: expert x's n, its block's rows from off */
          case PX_OP_EXPERT_LINEAR:
            px_k_linear_fwd(out[i] + row * ni, in[0] + row * k, wi, in[2] ? in[2] + x * n + off : NULL, rows, k, ni);
            break;
          case PX_OP_EXPERT_LINEAR_BWD_DATA:
            px_k_linear_bwd(out[0] + row * k, NULL, NULL, in[i] + row * ni, NULL, wi, rows, k, ni);
            break;
          default: /* the weight gradient of expert x's block */
            px_k_linear_bwd(NULL, out[0] + x * n * k + off * k, out[1] ? out[1] + x * n + off : NULL, in[i] + row * ni,
                            in[3] + row * k, NULL, rows, k, ni);
            break;
        }
        off += ni;
      }
      row += rows;
    }
}

/* fc2's bias, each routed row's gate times its expert's (Megatron-Core's TEGroupedMLP._apply_bias), added to the
 * rows, or its backward: the bias's gradient the gate-weighted sum of its expert's rows' gradients, each gate's the
 * row's gradient dot the bias. The rows in expert_linear's order. Dims: rows per expert (planned), H, -, local
 * experts. */
static void cpu_expert_bias(const px_exec_op *e) {
  const px_op *o = e->op;
  int64_t h = o->dim[1], el = o->dim[3], ns, row = 0;
  float **out = (float **)e->out, **in = (float **)e->in;
  bool fwd = o->kind == PX_OP_EXPERT_BIAS;
  const float *gates = in[fwd ? 1 : 2];
  const int32_t *counts = (const int32_t *)in[4] + px_contract_expert_taken(e, &ns);
  for (int64_t s = 0; s < ns; s++)
    for (int64_t x = 0; x < el; x++) {
      const float *bias = in[fwd ? 0 : 1] + x * h;
      for (int64_t r = row; r < row + counts[s * el + x]; r++) {
        if (fwd) {
          for (int64_t j = 0; j < h; j++) out[0][r * h + j] += gates[r] * bias[j];
          continue;
        }
        const float *dy = in[0] + r * h;
        double dot = 0.0;
        for (int64_t j = 0; j < h; j++) out[0][x * h + j] += gates[r] * dy[j], dot += (double)dy[j] * bias[j];
        out[1][r] += (float)dot;
      }
      row += counts[s * el + x];
    }
}

/* RoPE on (B, S, H, D) rows at the rank's positions: with context
 * parallelism its two chunks, each a contiguous run. */
static void rope_rows(const px_exec_op *e, float *out, const float *in, int64_t B, int64_t S, int64_t H, int64_t D) {
  const px_env *v = e->env;
  int64_t runs = v->cp > 1 ? 2 : 1, n = S / runs, row = H * D;
  for (int64_t r = 0; r < runs; r++) {
    int64_t pos0 = px_env_position(v, v->cp_rank, r * n);
    for (int64_t b = 0; b < (runs > 1 ? B : 1); b++) /* one run: all batch rows in one call */
      px_k_rope_fwd(out + (b * S + r * n) * row, in + (b * S + r * n) * row, runs > 1 ? 1 : B, n, H, D, pos0,
                    &v->rope);
  }
}

/* In-place inverse rotation (RoPE backward on a gradient), rows at the rank's positions. */
static void rope_inverse(const px_exec_op *e, float *x, int64_t B, int64_t S, int64_t H, int64_t D) {
  int64_t rot = px_rope_dims(&e->env->rope, D), half = rot / 2; /* the dims past rot pass through as they are */
  float conc = (float)e->env->rope.concentration;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < S; t++) {
      int64_t pos = px_env_position(e->env, e->env->cp_rank, t);
      for (int64_t i = 0; i < half; i++) { /* the angle once for every head */
        double a = px_rope_angle(pos, i, rot, &e->env->rope);
        float c = conc * (float)cos(a), s = conc * (float)sin(a);
        for (int64_t h = 0; h < H; h++) {
          float *r = x + ((b * S + t) * H + h) * D, x0 = r[i], x1 = r[i + half];
          r[i] = x0 * c + x1 * s;
          r[i + half] = x1 * c - x0 * s;
        }
      }
    }
}

/* An adapter's B GEMM (PX_OPF_LORA_SCALE), times s = alpha / r, over the
 * outputs' sections (B's rows): y_i += s h B_i^T; dh = s sum_i dy_i B_i
 * (added to dh with PX_OPF_ACCUMULATE); dB_i += s dy_i^T h. d: m, n, r,
 * then the sections' widths. */
static void lora_gemm(const px_exec_op *e, float **out, float **in) {
  const px_op *o = e->op;
  const int64_t *d = o->dim;
  float s = (float)e->env->lora_scale;
  int64_t off = 0;
  for (int i = 0; i < 3 && d[3 + i] > 0; i++) {
    switch ((px_op_kind)o->kind) {
      case PX_OP_LINEAR: px_k_gemm(out[i], in[0], in[1] + off * d[2], d[0], d[3 + i], d[2], false, true, s, 1.0f); break;
      case PX_OP_LINEAR_BWD_DATA: /* in[3]: B */
        px_k_gemm(out[0], in[i], in[3] + off * d[2], d[0], d[2], d[3 + i], false, false, s,
                  i > 0 || (o->flags & PX_OPF_ACCUMULATE) ? 1.0f : 0.0f);
        break;
      default: px_k_gemm(out[0] + off * d[2], in[i], in[3], d[3 + i], d[2], d[0], true, false, s, 1.0f); break;
    }
    off += d[3 + i];
  }
}

/* ---- the op dispatch ---- */

static px_status cpu_op_f32(const px_exec_op *e, px_err *err) {
  const px_op *o = e->op;
  const px_env *v = e->env;
  const int64_t *d = o->dim;
  float **out = (float **)e->out;
  float **in = (float **)e->in;
  switch ((px_op_kind)o->kind) {
    case PX_OP_EMBED:
      px_k_embed_fwd(out[0], (const int32_t *)in[0], in[1], d[0], v->tp_rank * d[2], d[2], d[1]);
      return PX_OK;
    case PX_OP_EMBED_BWD:
      if (!out[0]) return PX_OK; /* a frozen table (fine-tuning): the gradient is dropped */
      px_k_embed_bwd(out[0], in[0], (const int32_t *)in[1], d[0], v->tp_rank * d[2], d[2], d[1]);
      return PX_OK;
    case PX_OP_POS:
    case PX_OP_POS_BWD: {
      int64_t pos0 = v->sp ? v->tp_rank * d[1] : 0;
      if (v->cp == 1) {
        if (o->kind == PX_OP_POS)
          px_k_pos_fwd(out[0], in[1], d[0], d[1], d[2], pos0);
        else
          px_k_pos_bwd(out[0], in[0], d[0], d[1], d[2], pos0);
        return PX_OK;
      }
      for (int64_t b = 0; b < d[0]; b++) /* context parallelism: a row at a time, at the rank's positions */
        for (int64_t t = 0; t < d[1]; t++) {
          int64_t pos = px_env_position(v, v->cp_rank, pos0 + t), row = (b * d[1] + t) * d[2];
          if (o->kind == PX_OP_POS)
            px_k_pos_fwd(out[0] + row, in[1], 1, 1, d[2], pos);
          else
            px_k_pos_bwd(out[0], in[0] + row, 1, 1, d[2], pos);
        }
      return PX_OK;
    }
    case PX_OP_NORM:
      if (px_contract_layernorm(o))
        px_k_layernorm_fwd(out[0], out[2], out[1], in[0], in[1], in[2], d[0], d[1], (float)v->norm_eps);
      else
        px_k_rmsnorm_fwd(out[0], out[1], in[0], in[1], d[0], d[1], (float)v->norm_eps);
      return PX_OK;
    case PX_OP_NORM_BWD:
      if (px_contract_layernorm(o))
        px_k_layernorm_bwd(out[0], out[1], out[2], in[0], in[1], in[4], in[3], in[2], d[0], d[1]);
      else
        px_k_rmsnorm_bwd(out[0], out[1], in[0], in[1], in[4], in[2], d[0], d[1]);
      return PX_OK;
    case PX_OP_LINEAR: {
      if (o->flags & PX_OPF_LORA_SCALE) {
        lora_gemm(e, out, in);
        return PX_OK;
      }
      if (o->flags & PX_OPF_GELU) { /* the pre-activation, then its GELU */
        px_k_linear_fwd(out[3], in[0], in[1], in[2], d[0], d[2], d[3]);
        px_k_gelu_fwd(out[0], out[3], d[0] * d[3]);
        return PX_OK;
      }
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0; i++) { /* a section without an output is not made (px_op_linear_cols) */
        if (out[i]) px_k_linear_fwd(out[i], in[0], in[1] + off * d[2], in[2] ? in[2] + off : NULL, d[0], d[2], d[3 + i]);
        off += d[3 + i];
      }
      return PX_OK;
    }
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT: {
      bool data = o->kind == PX_OP_LINEAR_BWD_DATA;
      if (o->flags & PX_OPF_LORA_SCALE) {
        lora_gemm(e, out, in);
        return PX_OK;
      }
      if (data && (o->flags & PX_OPF_DGELU)) { /* dy W, written, then times gelu'(pre) */
        px_k_gemm(out[0], in[0], in[3], d[0], d[2], d[3], false, false, 1.0f, 0.0f);
        px_k_dgelu_inplace(out[0], in[4], d[0] * d[2]);
        return PX_OK;
      }
      float *cols = NULL; /* PX_OPF_COLS: dy's columns of this TP rank, (m, n) out of (m, tp n) */
      if (o->flags & PX_OPF_COLS) {
        int64_t n = d[3], full = n * v->tp;
        if (!(cols = malloc((size_t)(d[0] * n) * sizeof *cols))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
        for (int64_t r = 0; r < d[0]; r++) memcpy(cols + r * n, in[0] + r * full + v->tp_rank * n, (size_t)n * sizeof *cols);
      }
      int64_t off = 0;
      for (int i = 0; i < 3 && d[3 + i] > 0; i++) {
        const float *dy = cols && i == 0 ? cols : in[i];
        if (data)
          px_k_linear_bwd(out[0], NULL, NULL, dy, NULL, in[3] + off * d[2], d[0], d[2], d[3 + i]);
        else
          px_k_linear_bwd(NULL, out[0] + off * d[2], out[1] ? out[1] + off : NULL, dy, in[3], NULL, d[0], d[2], d[3 + i]);
        off += d[3 + i];
      }
      free(cols);
      return PX_OK;
    }
    case PX_OP_ROPE:
      if (in[2]) { /* latent attention (no CP: the rows are positions 0..S-1): q's RoPE parts, k from k_pe (in[2]) */
        px_k_mla_rope_fwd(out[0], out[1], in[2], d[0], d[1], d[2], d[3], d[4] - d[5], d[5], 0, &v->rope,
                          v->mla_q_scale);
        return PX_OK;
      }
      rope_rows(e, out[0], in[0], d[0], d[1], d[2], d[4]);
      rope_rows(e, out[1], in[1], d[0], d[1], d[3], d[4]);
      return PX_OK;
    case PX_OP_ROPE_BWD:
      if (out[2]) {
        px_k_mla_rope_bwd(out[0], out[1], out[2], d[0], d[1], d[2], d[3], d[4] - d[5], d[5], 0, &v->rope,
                          v->mla_q_scale);
        return PX_OK;
      }
      rope_inverse(e, out[0], d[0], d[1], d[2], d[4]);
      rope_inverse(e, out[1], d[0], d[1], d[3], d[4]);
      return PX_OK;
    case PX_OP_ATTN_SCORES:
      px_k_attn_scores_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4], 1.0f / sqrtf((float)d[4]));
      return PX_OK;
    case PX_OP_ATTN_SCORES_BWD:
      px_k_attn_scores_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4], 1.0f / sqrtf((float)d[4]));
      return PX_OK;
    case PX_OP_SOFTMAX: /* in[1]: sink logits of the d[2] heads */
      px_k_attn_softmax_sink_fwd(out[0], in[0], in[1], d[0], d[2], d[1], px_exec_window(e));
      return PX_OK;
    case PX_OP_SOFTMAX_BWD:
      px_k_attn_softmax_sink_bwd(out[0], out[1], in[0], in[1], d[0], d[2], d[1], px_exec_window(e));
      return PX_OK;
    case PX_OP_ATTN_CONTEXT: px_k_attn_context_fwd(out[0], in[0], in[1], d[0], d[1], d[2], d[3], d[4]); return PX_OK;
    case PX_OP_ATTN_CONTEXT_BWD:
      px_k_attn_context_bwd(out[0], out[1], in[0], in[1], in[2], d[0], d[1], d[2], d[3], d[4]);
      return PX_OK;
    case PX_OP_FLASH_ATTN: return cpu_flash(e, false, err);
    case PX_OP_FLASH_ATTN_BWD: return cpu_flash(e, true, err);
    case PX_OP_DROPOUT: return cpu_dropout(e);
    case PX_OP_DROPOUT_BWD:
      px_k_dropout_bwd(out[0], in[0], (const uint8_t *)in[1], d[0], (float)v->dropout);
      return PX_OK;
    case PX_OP_ADD:
      px_k_add(out[0], in[0], in[1], d[0]);
      if (in[2])
        for (int64_t r = 0; r < d[0] / d[1]; r++)
          for (int64_t k = 0; k < d[1]; k++) out[0][r * d[1] + k] += in[2][k];
      return PX_OK;
    case PX_OP_ACC: px_k_acc(out[0], in[0], d[0]); return PX_OK;
    /* with in[2] (SwiGLU's backward: in[3]) each row of d[1] times its weight (a MoE layer's experts' gates) */
    case PX_OP_GELU:
      px_k_gelu_fwd(out[0], in[0], d[0]);
      if (in[2]) px_k_rows_scale(out[0], in[2], d[0] / d[1], d[1]);
      return PX_OK;
    case PX_OP_GELU_BWD:
      if (in[2]) px_k_gelu_weighted_bwd(out[0], out[1], in[0], in[1], in[2], d[0] / d[1], d[1]);
      else px_k_gelu_bwd(out[0], in[0], in[1], d[0]);
      return PX_OK;
    case PX_OP_SWIGLU:
      px_k_swiglu_fwd(out[0], in[0], in[1], d[0]);
      if (in[2]) px_k_rows_scale(out[0], in[2], d[0] / d[1], d[1]);
      return PX_OK;
    case PX_OP_SWIGLU_BWD:
      if (in[3]) px_k_swiglu_weighted_bwd(out[0], out[1], out[2], in[0], in[1], in[2], in[3], d[0] / d[1], d[1]);
      else px_k_swiglu_bwd(out[0], out[1], in[0], in[1], in[2], d[0]);
      return PX_OK;
    case PX_OP_MOE_ROUTE:
    case PX_OP_MOE_ROUTE_BWD:
    case PX_OP_MOE_PERMUTE:
    case PX_OP_MOE_PERMUTE_BWD:
    case PX_OP_MOE_UNPERMUTE:
    case PX_OP_MOE_UNPERMUTE_BWD: return cpu_moe(e, err);
    case PX_OP_EXPERT_LINEAR:
    case PX_OP_EXPERT_LINEAR_BWD_DATA:
    case PX_OP_EXPERT_LINEAR_BWD_WEIGHT: cpu_expert_linear(e); return PX_OK;
    case PX_OP_EXPERT_BIAS:
    case PX_OP_EXPERT_BIAS_BWD: cpu_expert_bias(e); return PX_OK;
    case PX_OP_LOSS: { /* the row statistics of the vocabulary shards, each reduced over them (the op's comm) */
      int64_t n = d[0], vl = d[1], vstart = v->tp_rank * vl;
      float *st = malloc((size_t)(3 * n) * sizeof *st);
      if (!st) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      float *mx = st, *sum = st + n, *tl = st + 2 * n;
      const int32_t *targets = (const int32_t *)in[1]; /* an MTP module's loaded a position further (-1: none) */
      px_k_ce_max_local(mx, in[0], n, vstart, vl, d[2]);
      px_status s = px_exec_reduce(e, mx, (uint64_t)n, PX_RED_MAX, err);
      if (!s) px_k_ce_sumexp_local(sum, in[0], mx, n, vstart, vl, d[2]);
      if (!s) s = px_exec_reduce(e, sum, (uint64_t)n, PX_RED_SUM, err);
      if (!s) px_k_ce_target_local(tl, in[0], targets, n, vstart, vl);
      if (!s) s = px_exec_reduce(e, tl, (uint64_t)n, PX_RED_SUM, err);
      if (!s) {
        px_k_ce_loss(out[1], mx, sum, tl, targets, n);
        px_k_ce_logprobs(out[0], in[0], mx, sum, n, vl);
      }
      free(st);
      return s;
    }
    case PX_OP_LOSS_BWD: {
      int64_t n = d[0], vl = d[1];
      float *st = malloc((size_t)(2 * n) * sizeof *st);
      if (!st) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      for (int64_t i = 0; i < n; i++) st[i] = 0.0f, st[n + i] = 1.0f; /* log-probs: max 0, sum 1 */
      px_k_ce_bwd(out[0], in[0], st, st + n, (const int32_t *)in[1], n, v->tp_rank * vl, vl, d[2], e->loss_scale);
      free(st);
      return PX_OK;
    }
    case PX_OP_GRAD_NORM: *e->sumsq_out += px_k_sumsq(in[0], e->count); return PX_OK;
    case PX_OP_ADAMW:
      if (e->grad_scale != 1.0f) px_k_scale(in[0], e->count, e->grad_scale);
      px_k_adamw(out[0], out[1], out[2], in[0], e->count, e->lr, e->beta1, e->beta2, e->eps, e->weight_decay, e->adam_t);
      return PX_OK;
    default: break;
  }
  return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: op %s is not an op it runs", px_op_names[o->kind]);
}

/* fp8: a cast writes codes; a GEMM on fp8 operands runs in fp32 on their decoded values. A frozen weight stored in
 * nf4 or fp8 is dequantised into fp32 (PX_OPF_DEQUANT) for the GEMM after it. */
static px_status cpu_op(px_backend *be, const px_exec_op *e, px_err *err) {
  cpu *c = be->impl;
  if (e->op->kind == PX_OP_CAST && (e->op->flags & PX_OPF_DEQUANT)) {
    px_param_frozen_decode(e->env->base_precision, e->in[0], (uint64_t)e->op->dim[0], e->out[0]);
    return PX_OK;
  }
  if (e->op->kind == PX_OP_CAST) return px_cpu_fp8_cast(c->f8, e, err);
  if (!(e->op->flags & PX_OPF_FP8)) return cpu_op_f32(e, err);
  px_exec_op d;
  void *scratch[PX_OP_INS];
  px_status st = px_cpu_fp8_operands(c->f8, e, &d, scratch, err);
  if (!st) st = cpu_op_f32(&d, err);
  px_cpu_fp8_release(scratch);
  return st;
}

/* Every op kind in fp32 (the op contract, exec/contract.h), and fp8's
 * casts, GEMMs and collectives of codes (exec/cpu/fp8.h); MPI takes int
 * counts, so a collective or message beyond INT_MAX elements or bytes is
 * refused rather than truncated. */
static px_support cpu_supports_op(px_backend *b, const px_exec_op *e, char *why, size_t cap) {
  (void)b;
  const px_op *op = e->op;
  px_dtype dt = px_contract_dtype(e->env, op);
  if (px_contract_fp8(e->env, op) && !px_cpu_fp8_supports(e, why, cap)) return PX_SUPPORT_NO;
  if (dt != PX_DTYPE_FP32 && !(dt == PX_DTYPE_FP8 && op->kind != PX_OP_ALLREDUCE && op->kind != PX_OP_REDUCE_SCATTER)) {
    snprintf(why, cap, "the cpu backend runs fp32 only (hint: `precision` fp32)");
    return PX_SUPPORT_NO;
  }
  if (!px_contract_check(e->env, op, dt, why, cap)) return PX_SUPPORT_NO;
  const int64_t *d = op->dim;
  switch ((px_op_kind)op->kind) {
    case PX_OP_ADAMW:
      if (e->env->master_weights) {
        snprintf(why, cap, "no mixed-precision AdamW (fp32 master weights) on the cpu backend");
        return PX_SUPPORT_NO;
      }
      return PX_SUPPORT_YES;
    case PX_OP_ALLREDUCE:
    case PX_OP_ALLTOALL:
    case PX_OP_ALLGATHER:
    case PX_OP_REDUCE_SCATTER:
      if (d[0] > INT_MAX || d[1] > INT_MAX) {
        snprintf(why, cap, "%lld elements: MPI counts are ints", (long long)(d[0] > d[1] ? d[0] : d[1]));
        return PX_SUPPORT_NO;
      }
      return PX_SUPPORT_YES;
    case PX_OP_SEND:
    case PX_OP_RECV:
      if (d[0] > INT_MAX / 4) {
        snprintf(why, cap, "%lld bytes: MPI counts are ints", (long long)d[0] * 4);
        return PX_SUPPORT_NO;
      }
      return PX_SUPPORT_YES;
    default: /* GEMMs and attention go through cblas, whose sizes are ints */
      for (int i = 0; i < 6; i++)
        if (d[i] > INT_MAX) {
          snprintf(why, cap, "dimension %lld is beyond cblas's int sizes", (long long)d[i]);
          return PX_SUPPORT_NO;
        }
      return PX_SUPPORT_YES;
  }
}

/* ---- collectives: MPI's (exec/comm.h) on fp32, fp8 codes moved as bytes ---- */

static MPI_Comm group_comm(px_backend *be, px_group g) { return px_comm_of(((cpu *)be->impl)->comm, g); }

/* fp32 (fp8 codes: moved as bytes, not reduced). */
static px_status coll_ok(px_dtype dt, bool moves, px_err *err) {
  if (dt != PX_DTYPE_FP32 && !(dt == PX_DTYPE_FP8 && moves))
    return px_err_set(err, PX_ERR_RUNTIME, "cpu backend: collectives run on fp32 (and move fp8 codes) only");
  return PX_OK;
}

static px_host_type host_type(px_dtype dt) { return dt == PX_DTYPE_FP8 ? PX_HOST_BYTE : PX_HOST_FLOAT; }

/* fp8 codes a collective moved into out: decoded with in's scales from now on. */
static px_status fp8_moved(px_backend *be, px_dtype dt, void *out, const void *in, uint64_t count_out, px_err *err) {
  return dt == PX_DTYPE_FP8 ? px_cpu_fp8_moved(((cpu *)be->impl)->f8, out, in, count_out, err) : PX_OK;
}

static px_status cpu_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op,
                               px_err *err) {
  px_status st = coll_ok(dt, false, err);
  return st ? st : px_comm_allreduce(group_comm(be, g), buf, buf, count, PX_HOST_FLOAT, op, err);
}

/* px_cpu_fp8_gather's gather: bytes from each member of the group *ctx (an MPI_Comm). */
static px_status gather_bytes(void *ctx, void *out, const void *in, uint64_t bytes, px_err *err) {
  return px_comm_allgather(*(MPI_Comm *)ctx, out, in, bytes, PX_HOST_BYTE, err);
}

static px_status cpu_allgather(px_backend *be, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                               px_err *err) {
  MPI_Comm c = group_comm(be, g);
  px_status st = coll_ok(dt, true, err);
  px_cpu_fp8 *f8 = ((cpu *)be->impl)->f8;
  if (!st && dt == PX_DTYPE_FP8 && px_cpu_fp8_block_scaled(f8, in)) /* both copies, each with its scales */
    return px_cpu_fp8_gather(f8, gather_bytes, &c, out, in, px_comm_size(c), err);
  if (!st) st = px_comm_allgather(c, out, in, count_in, host_type(dt), err);
  return st ? st : fp8_moved(be, dt, out, in, count_in * (uint64_t)px_comm_size(c), err);
}

static px_status cpu_reduce_scatter(px_backend *be, px_group g, void *out, const void *in, uint64_t count_out,
                                    px_dtype dt, px_err *err) {
  px_status st = coll_ok(dt, false, err);
  return st ? st : px_comm_reduce_scatter(group_comm(be, g), out, in, count_out, PX_HOST_FLOAT, PX_RED_SUM, err);
}

static px_status cpu_alltoall(px_backend *be, px_group g, void *out, const void *in, uint64_t count, px_dtype dt,
                              px_err *err) {
  MPI_Comm c = group_comm(be, g);
  px_status st = coll_ok(dt, true, err);
  if (!st) st = px_comm_alltoall(c, out, in, count, host_type(dt), err);
  return st ? st : fp8_moved(be, dt, out, in, count * (uint64_t)px_comm_size(c), err);
}

static px_status cpu_alltoallv(px_backend *be, px_group g, void *out, const uint64_t *recv, const void *in,
                               const uint64_t *send, px_dtype dt, px_err *err) {
  MPI_Comm c = group_comm(be, g);
  px_status st = coll_ok(dt, true, err);
  if (!st) st = px_comm_alltoallv(c, out, recv, in, send, host_type(dt), err);
  uint64_t received = 0;
  for (int j = 0, n = px_comm_size(c); j < n; j++) received += recv[j];
  return st ? st : fp8_moved(be, dt, out, in, received, err);
}

static px_status cpu_p2p(px_backend *be, px_p2p *items, int n, px_err *err) {
  return px_comm_p2p(((cpu *)be->impl)->comm->world, items, n, err);
}

/* Host memory is the cpu backend's own: the host collectives are its collectives on any element type. */
static px_status cpu_host_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_host_type t, px_redop op,
                                    px_err *err) {
  return px_comm_allreduce(group_comm(be, g), buf, buf, count, t, op, err);
}

static px_status cpu_host_alltoall(px_backend *be, px_group g, void *out, const void *in, uint64_t count,
                                   px_host_type t, px_err *err) {
  return px_comm_alltoall(group_comm(be, g), out, in, count, t, err);
}

static px_status cpu_sync(px_backend *b, px_err *err) {
  (void)b, (void)err;
  return PX_OK;
}

static px_status cpu_codes_permuted(px_backend *b, void *out, const void *in, int64_t ranks, int64_t seqs,
                                   px_err *err) {
  return px_cpu_fp8_permuted(((cpu *)b->impl)->f8, out, in, ranks, seqs, err);
}

static void cpu_codes_rekeyed(px_backend *b, const void *to, const void *from) {
  px_cpu_fp8_rekey(((cpu *)b->impl)->f8, to, from);
}

static px_status cpu_amax_histories(px_backend *b, bool load, const px_amax_key *keys, int64_t n, int64_t step,
                                    float *hist, px_err *err) {
  return px_cpu_fp8_histories(((cpu *)b->impl)->f8, load, keys, n, step, hist, err);
}

static void cpu_destroy(px_backend *b) {
  if (!b) return;
  cpu *c = b->impl;
  for (int i = 0; c && i < c->ncache; i++) free(c->cache[i].p);
  if (c) px_cpu_fp8_free(c->f8);
  free(b->impl);
  free(b);
}

int px_cpu_blas_threads(int requested) {
  if (requested <= 0 && getenv("OPENBLAS_NUM_THREADS")) { /* the user's choice */
    px_k_set_threads(openblas_get_num_threads());
    return openblas_get_num_threads();
  }
  long t = requested;
  if (t <= 0) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cores = sysconf(_SC_NPROCESSORS_ONLN), ranks = local ? atol(local) : 1, mine = cores;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) mine = CPU_COUNT(&set);
    /* bound to some cores: those are this rank's; free to run anywhere: a share of the node */
    t = mine < cores ? mine : (ranks > 0 ? cores / ranks : cores);
  }
  if (t < 1) t = 1;
  openblas_set_num_threads((int)t);
  px_k_set_threads((int)t); /* the elementwise kernels split over as many */
  return (int)t;
}

/* The table; optional entries it leaves out: reserve (nothing is reserved: host memory), the side streams
 * (one stream, program order), own_bytes. */
static const px_backend cpu_table = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .op = cpu_op,
    .supports_op = cpu_supports_op,
    .allreduce = cpu_allreduce,
    .allgather = cpu_allgather,
    .reduce_scatter = cpu_reduce_scatter,
    .alltoall = cpu_alltoall,
    .alltoallv = cpu_alltoallv,
    .p2p = cpu_p2p,
    .host_allreduce = cpu_host_allreduce,
    .host_alltoall = cpu_host_alltoall,
    .sync = cpu_sync,
    .amax_histories = cpu_amax_histories,
    .codes_permuted = cpu_codes_permuted,
    .codes_rekeyed = cpu_codes_rekeyed,
    .destroy = cpu_destroy,
};

void px_cpu_backend_probe(px_backend *b) { *b = (px_backend){.name = cpu_table.name, .supports_op = cpu_supports_op}; }

int px_cpu_backend_threads(const px_backend *b) { return ((const cpu *)b->impl)->threads; }

void px_cpu_keep_pages(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);        /* large blocks from the heap, not mmap (munmap on free) */
  mallopt(M_TRIM_THRESHOLD, -1); /* and the heap never trimmed */
#endif
}

px_status px_cpu_backend_new(const px_comm *comm, int threads, px_backend **out, px_err *err) {
  int nthreads = px_cpu_blas_threads(threads);
  px_cpu_keep_pages();
  px_backend *b = px_calloc(1, sizeof *b, err);
  cpu *c = px_calloc(1, sizeof *c, err);
  if (!b || !c) {
    free(b), free(c);
    return PX_ERR_RUNTIME;
  }
  c->comm = comm;
  c->threads = nthreads;
  if (!(c->f8 = px_cpu_fp8_new())) {
    free(b), free(c);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  *b = cpu_table;
  b->impl = c;
  *out = b;
  return PX_OK;
}
