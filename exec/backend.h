/* The executor's backend interface: one static table of function pointers
 * that a backend (cpu: OpenBLAS kernels + MPI; cuda: cuBLASLt + CUDA kernels
 * + NCCL) fills. The interpreter (exec/interp.c) resolves an op's operands
 * to device pointers and calls `op` with everything the op reads (its
 * tensors, the model's constants, the rank's groups and offsets: px_env and
 * px_exec_op), so that a backend reads nothing of the plan; communication
 * ops go to the collective entries, and what an op communicates midway to
 * the interpreter (px_op_comm), which runs it through the same entries.
 * Every entry runs on the current stream in submission order; `sync` waits
 * for all streams. */
#ifndef PX_EXEC_BACKEND_H
#define PX_EXEC_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "exec/amax.h"
#include "kernels/math.h"
#include "plan/graph.h"

typedef enum { PX_RED_SUM, PX_RED_MAX } px_redop;

/* Element types of host memory for the host collectives (the host_* entries, and exec/comm.h's MPI calls). */
typedef enum { PX_HOST_BYTE, PX_HOST_INT, PX_HOST_FLOAT, PX_HOST_DOUBLE, PX_HOST_LLONG, PX_HOST_ULLONG } px_host_type;

/* What every op of a rank's run reads besides its operands and its own
 * fields (ggml's op parameters): the graph's tensors, the model's
 * constants, the run's dtypes and precision, and the rank's place in its
 * groups. The interpreter fills it once from the plan (exec/env.h). */
typedef struct {
  const px_slot *slots;  /* the graph's tensors, which px_ref.slot indexes: dtypes, sizes, names */
  /* the model */
  int64_t heads;         /* query heads of the whole model (the attention dropout's indices) */
  int64_t seq;           /* tokens of a sequence */
  double dropout;        /* probability */
  double norm_eps;
  px_rope rope;          /* RoPE's frequencies and concentration (YaRN's or Llama 3.1's where the model has them) */
  float mla_q_scale;     /* latent attention: the softmax's scale over 1 / sqrt(head dim), applied to q in its RoPE op */
  int64_t sliding_window; /* keys a windowed layer's query sees, up to its own (ops flagged PX_OPF_WINDOW); 0 none */
  bool layernorm;        /* else RMSNorm */
  bool router_sigmoid;   /* mixture of experts: sigmoid scores, else a softmax */
  bool norm_topk_prob;   /* ... the top-k weights renormalised */
  double aux_loss_coef;  /* ... the load-balancing loss's weight */
  double capacity_factor; /* ... token dropping at each rank's capacity (px_moe_capacity); 0: dropless */
  bool drop_by_position; /* ... an expert over capacity keeps the earliest tokens' choices, else the highest gates */
  int64_t expert_groups, groups_per_token; /* ... group-limited routing (0: none) */
  double lora_scale;     /* fine-tuning's adapters: alpha / r, the factor of PX_OPF_LORA_SCALE GEMMs (0 without) */
  int base_precision;    /* ... the frozen linear weights' storage (px_base_precision), which PX_OPF_DEQUANT casts read */
  /* dtypes and precision */
  px_dtype act_dtype, weight_dtype, grad_dtype; /* the activations', the parameters', the gradients' */
  bool master_weights;   /* mixed precision: fp32 master weights, the model's copy rounded from them */
  bool fp8_delayed;      /* fp8 per-tensor scales from the amax histories, else from the current amax */
  bool fp8_blockwise;    /* fp8 scales per 1 x 128 tile and 128 x 128 weight block */
  int block_format;      /* the block-scaled precision (PX_PREC_MXFP8 or PX_PREC_NVFP4), else 0 */
  /* the rank's groups */
  int64_t tp, cp, ep, etp; /* their sizes (ep, etp: the MoE layers') */
  int64_t tp_rank, cp_rank;
  bool sp;               /* sequence parallelism: a TP rank's rows are its shard of the sequence */
  bool cp_heads;         /* CP's all-to-all: attention sees every CP rank's rows and 1/cp of the heads */
  int64_t seq_cp;        /* rows of a sequence each CP rank holds */
  const int32_t *cp_pos; /* (cp, seq_cp) the global position of each CP rank's rows, rank-major; NULL: cp 1 */
} px_env;

/* The global position of row i of CP rank r's seq_cp rows of a sequence. */
static inline int64_t px_env_position(const px_env *v, int64_t r, int64_t i) {
  return v->cp_pos ? v->cp_pos[r * v->seq_cp + i] : i;
}

typedef struct px_exec_op px_exec_op;

/* What an op communicates midway, between its own kernels: the
 * interpreter's, which runs it over the op's groups through the backend's
 * collective and p2p entries, so that a backend names no group and no peer.
 * Buffers are the backend's memory. */
typedef struct {
  /* n fp32 values all-reduced in place over the op's groups (the loss's row
   * statistics over TP; a cast's amax over TP and EP, the ranks that may
   * exchange its codes); nothing where each has one rank */
  px_status (*reduce)(const px_exec_op *e, float *buf, uint64_t n, px_redop op, px_err *err);
  /* the CP ring: bytes from send to the next CP rank, and from the previous one into recv */
  px_status (*ring)(const px_exec_op *e, void *send, void *recv, uint64_t bytes, px_err *err);
  void *ctx; /* the interpreter's */
} px_op_comm;

/* Everything an op reads: the run's env, the op (kind, flags, dims, operand
 * slots), its operands, and what varies per call (the layer, the
 * micro-batch's sequences, the step for the dropout random numbers, which
 * are functions of global element indices so that every plan draws the same
 * masks). */
struct px_exec_op {
  const px_env *env;
  const px_op *op;
  const px_op_comm *comm;     /* NULL: the op's groups have one rank each (the backend suite's single ops) */
  void *out[PX_OP_OUTS];
  void *in[PX_OP_INS];        /* const in spirit; some ops work in place */
  int64_t layer;              /* global layer (dropout sites, rope) */
  const uint64_t *seq_index;  /* (mbs) global sequence number of each row of the micro-batch */
  uint64_t seed;              /* run seed */
  int64_t step;
  float loss_scale;           /* LOSS_BWD: d loss / d token loss = 1 / (gbs x seq) */
  const int32_t *host_tokens; /* EMBED_BWD: in[1]'s tokens in host memory, or NULL */
  /* a GEMM's quantized weight operand: the copies the plan holds for it (px_parallel_weight_copies: row-wise,
   * then the column-wise or transposed one the data gradient reads), wcopies of wcopy_bytes each (its codes and
   * block scales, px_parallel_quant_weight_bytes), written where the GEMM quantizes the weight; NULL: none held
   * (ZeRO-3's weights are cast at use) */
  uint8_t *wcopy;
  uint64_t wcopy_bytes;
  int wcopies;
  /* Ops on gradient ranges of `count` elements given by the interpreter:
   *   ACC        out[0] += in[0]                     (gradient dtype)
   *   GRAD_NORM  *sumsq_out += sum of in[0]^2        (host double)
   *   ADAMW      out[0] weights, out[1] m, out[2] v (fp32 when out[3] is set,
   *              else the parameter dtype), in[0] gradient scaled by
   *              grad_scale first; out[3], with mixed precision: the model's
   *              copy, set to the updated fp32 weights rounded to its dtype */
  int64_t count;
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t adam_t;
  double *sumsq_out;
};

/* The keys up to its own that a query of the op sees: the model's window on
 * a windowed layer's attention ops (PX_OPF_WINDOW), 0 (all of them) otherwise. */
static inline int64_t px_exec_window(const px_exec_op *e) {
  return e->op->flags & PX_OPF_WINDOW ? e->env->sliding_window : 0;
}

/* The op's midway reduction (px_op_comm.reduce); nothing without one. */
static inline px_status px_exec_reduce(const px_exec_op *e, float *buf, uint64_t n, px_redop op, px_err *err) {
  return e->comm && e->comm->reduce ? e->comm->reduce(e, buf, n, op, err) : PX_OK;
}

/* The tensor of operand r of the op (NULL: none, or a gradient range). */
static inline const px_slot *px_exec_slot(const px_exec_op *e, px_ref r) {
  return r.slot >= 0 ? &e->env->slots[r.slot] : NULL;
}

/* ---- dropout's random numbers, the same on every backend: functions of
 * the run seed, the step, the layer and global element indices ---- */

#define PX_DROPOUT_SITE_ATTN 3 /* the attention probabilities; other sites come in dim[5] */

/* The stream of one dropout site of one layer in one step. */
static inline uint64_t px_exec_dropout_seed(const px_exec_op *e, int site) {
  return px_mix64(e->seed ^ px_mix64((uint64_t)e->step * 0x9e3779b97f4a7c15ull + (uint64_t)(e->layer + 2) * 1000003ull +
                                     (uint64_t)site));
}

/* A DROPOUT op on a (B, d1, d2, d3) tensor whose axis 1 may be sharded over
 * tp (sequence positions or heads): B rows of row_elems elements. With
 * context parallelism axis 1 is the sequence (the unfused attention, whose
 * probabilities are dropped along heads, is refused), and its rows are the
 * rank's two chunks: d1_global is the whole sequence, and a row's index
 * comes from px_exec_dropout_at. */
typedef struct {
  int64_t rows, row_elems, d1, d1_global, inner;
  bool sharded;
  float p;
  uint64_t seed;
} px_dropout_geom;

static inline px_dropout_geom px_exec_dropout_geom(const px_exec_op *e) {
  const int64_t *d = e->op->dim;
  const px_env *v = e->env;
  bool attn = e->op->flags & PX_OPF_ATTN_PROBS;
  px_dropout_geom g = {.rows = d[0], .d1 = d[1], .inner = d[2] * d[3], .sharded = attn || d[4] == 1,
                       .p = (float)v->dropout};
  g.row_elems = g.d1 * g.inner;
  g.d1_global = v->cp > 1 ? v->seq : g.sharded ? g.d1 * v->tp : g.d1;
  g.seed = px_exec_dropout_seed(e, attn ? PX_DROPOUT_SITE_ATTN : (int)d[5]);
  return g;
}

/* Global index of element (b, t, 0, 0); without context parallelism the d1
 * rows of a batch row are contiguous (px_exec_dropout_row gives the first). */
static inline uint64_t px_exec_dropout_at(const px_exec_op *e, const px_dropout_geom *g, int64_t b, int64_t t) {
  const px_env *v = e->env;
  int64_t row = g->sharded ? v->tp_rank * g->d1 + t : t;
  if (v->cp > 1) row = px_env_position(v, v->cp_rank, row);
  return ((uint64_t)e->seq_index[b] * (uint64_t)g->d1_global + (uint64_t)row) * (uint64_t)g->inner;
}

/* Global index of the first element of row b (no context parallelism). */
static inline uint64_t px_exec_dropout_row(const px_exec_op *e, const px_dropout_geom *g, int64_t b) {
  return px_exec_dropout_at(e, g, b, 0);
}

/* The fused attention's: global index of element (0, 0) of the (S, S)
 * probabilities of local head h of batch row b. */
static inline uint64_t px_exec_head_dropout_offset(const px_exec_op *e, int64_t b, int64_t h, int64_t S) {
  const px_env *v = e->env;
  int64_t HQ = v->heads / v->tp;
  return ((uint64_t)e->seq_index[b] * (uint64_t)v->heads + (uint64_t)(v->tp_rank * HQ + h)) * (uint64_t)(S * S);
}

/* One send or receive of a p2p batch. */
typedef struct {
  bool send;
  int peer;          /* world rank */
  void *buf;
  uint64_t bytes;
  int tag;
} px_p2p;

/* Where an allocation lives: the model states (parameters, gradients,
 * optimizer states: allocated once at set-up and kept) or the step's tensors
 * (activations and their gradients, communication buffers, scratch:
 * allocated and released as the step runs). */
typedef enum { PX_POOL_STATES, PX_POOL_STEP, PX_POOLS } px_pool;

/* What a fresh allocation holds. */
typedef enum {
  PX_FILL_POISON, /* unspecified: the CPU backend and the GPU emulator fill it with NaN bytes, so an op that reads
                     what it did not write shows */
  PX_FILL_ZERO,   /* zeros */
  PX_FILL_NONE,   /* unspecified and not filled: the next use writes every byte before anything reads it (the
                     destination of an all-gather, a reduce-scatter, a receive, an upload), so a fill would only
                     cost time (on the CPU backend ~1.3 ms per 12.6 MB ZeRO-3 gather: ~40 ms a step of
                     bench/compare.sh's ZeRO-3 plan) */
  PX_FILL_COUNT
} px_fill;

/* A backend's answer to supports_op. */
typedef enum {
  PX_SUPPORT_NO,      /* it cannot run the op (a plan with it is refused before the run starts) */
  PX_SUPPORT_YES,     /* it runs the op in the op's dtype */
  PX_SUPPORT_WIDENED, /* it runs the op correctly on fp32 copies of its 16-bit operands: slower, and
                         scratch memory beyond the plan's prediction */
  PX_SUPPORT_COUNT
} px_support;

/* A backend: its static table of entries (each backend's is a `static const
 * px_backend` with named initialisers, optional entries left NULL), copied
 * into the instance that new() returns with impl set. */
typedef struct px_backend px_backend;
struct px_backend {
  const char *name;
  void *impl;    /* the instance's state (NULL in the static table) */
  bool sync_ops; /* set by the caller: the interpreter waits for each op (exact per-op times) */
  /* optional (NULL: none): called once before any alloc with the bytes the
   * plan predicts for each pool at this rank's peak (the states exactly, the
   * step's tensors with headroom), for a backend that reserves them up front
   * (and so fails at set-up, not mid-step, when they do not fit) */
  px_status (*reserve)(px_backend *b, const uint64_t bytes[PX_POOLS], px_err *err);
  /* memory on the device from a pool, its contents as `fill` says; release
   * takes the size it was allocated with */
  px_status (*alloc)(px_backend *b, uint64_t bytes, px_fill fill, px_pool pool, void **out, px_err *err);
  void (*release)(px_backend *b, void *p, uint64_t bytes);
  px_status (*zero)(px_backend *b, void *p, uint64_t bytes, px_err *err);
  px_status (*copy)(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err);
  px_status (*upload)(px_backend *b, void *dst, const void *host, uint64_t bytes, px_err *err);
  px_status (*download)(px_backend *b, void *host, const void *src, uint64_t bytes, px_err *err);
  /* one op of the graph (not the communication kinds) */
  px_status (*op)(px_backend *b, const px_exec_op *e, px_err *err);
  /* Whether the backend runs op e correctly, from what is known before a
   * run: e->env and e->op (no buffers): the op's kind and dtype
   * (px_contract_dtype), its operands' dtypes, and the shapes and flags that
   * matter. The communication kinds are asked about the collective and p2p
   * entries that run them; ops without slots (dim[0] elements; the
   * unit-sized collectives, GRAD_NORM, ADAMW, and ACC on gradient ranges) as
   * px_exec_op documents them. Anything but YES puts a short reason in why
   * (cap bytes). Optional (NULL: every op). */
  px_support (*supports_op)(px_backend *b, const px_exec_op *e, char *why, size_t cap);
  /* collectives over a group of this rank; counts in elements of dt */
  px_status (*allreduce)(px_backend *b, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op, px_err *err);
  px_status (*allgather)(px_backend *b, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                         px_err *err);
  px_status (*reduce_scatter)(px_backend *b, px_group g, void *out, const void *in, uint64_t count_out, px_dtype dt,
                              px_err *err);
  /* count elements of dt to and from each member, in member order (in: n blocks to send, out: n received);
   * optional (NULL: the backend refuses all-to-all ops in supports_op) */
  px_status (*alltoall)(px_backend *b, px_group g, void *out, const void *in, uint64_t count, px_dtype dt, px_err *err);
  /* per member, elements of dt sent (send[j] to member j, in member order) and received; optional (NULL: the
   * backend refuses expert parallelism in supports_op) */
  px_status (*alltoallv)(px_backend *b, px_group g, void *out, const uint64_t *recv, const void *in,
                         const uint64_t *send, px_dtype dt, px_err *err);
  /* posts every send and receive, then waits for all (batch_isend_irecv) */
  px_status (*p2p)(px_backend *b, px_p2p *items, int n, px_err *err);
  /* The collectives of what the interpreter computes in host memory (the step's loss and gradient norm, an
   * MoE layer's row counts, offloaded gradients): count elements of t, in place, once the caller's device work
   * that they depend on is done. host_alltoall is optional (NULL: the backend refuses expert parallelism in
   * supports_op). */
  px_status (*host_allreduce)(px_backend *b, px_group g, void *buf, uint64_t count, px_host_type t, px_redop op,
                              px_err *err);
  px_status (*host_alltoall)(px_backend *b, px_group g, void *out, const void *in, uint64_t count, px_host_type t,
                             px_err *err);
  /* waits until everything issued on every stream is done */
  px_status (*sync)(px_backend *b, px_err *err);
  /* Streams, optional (NULL: one stream, program order). set_stream(s) puts
   * the work that follows on stream s (the backend may merge streams: the
   * CUDA backend has compute, dp, and pp for both p2p directions); work put
   * on a side stream starts after everything issued before it on the compute
   * stream, while the compute stream goes on without waiting for it until it
   * waits for a mark or joins. mark() names the work issued so far on the
   * current stream (0: none to wait for); wait_mark makes the current stream
   * wait for it; join makes the compute stream wait for every side stream.
   * Memory released on one stream and reused on another is ordered by the
   * backend. */
  void (*set_stream)(px_backend *b, px_stream s);
  uint64_t (*mark)(px_backend *b);
  px_status (*wait_mark)(px_backend *b, uint64_t mark, px_err *err);
  px_status (*join)(px_backend *b, px_err *err);
  /* fp8 delayed scaling's amax histories (exec/amax.h), a state a step
   * depends on: those of keys[0..n) as they stand before step `step`, in
   * px_amax_save's form (hist: n x PX_FP8_AMAX_HISTORY), saved into hist or
   * (load) taken from it. Optional (NULL: the backend keeps none, and the
   * executor refuses a plan with delayed scaling). */
  px_status (*amax_histories)(px_backend *b, bool load, const px_amax_key *keys, int64_t n, int64_t step, float *hist,
                              px_err *err);
  /* The permute after a sequence-parallel all-gather of fp8 codes of more than one sequence: out = the codes at
   * in, `ranks` shards of `seqs` sequences' tokens each, in (seqs, ranks) order, with their scales (block-scaled:
   * both copies'). Optional (NULL: the backend refuses such an all-gather of fp8 codes in supports_op). */
  px_status (*codes_permuted)(px_backend *b, void *out, const void *in, int64_t ranks, int64_t seqs, px_err *err);
  /* activation offload: the codes that were at `from` are at `to` now (a copy to host memory, or back), their
   * scales with them. Optional (NULL: the backend keeps nothing by address). */
  void (*codes_rekeyed)(px_backend *b, const void *to, const void *from);
  /* optional: device memory the backend holds beyond the tensors it was
   * asked for (conversion scratch, library workspaces, arenas added for
   * fragmentation): what a plan's prediction does not count */
  uint64_t (*own_bytes)(px_backend *b);
  void (*destroy)(px_backend *b);
};

#endif
