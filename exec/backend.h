/* The executor's backend interface: one struct of function pointers that a
 * backend (cpu: OpenBLAS kernels + MPI; cuda: cuBLASLt + CUDA kernels +
 * NCCL) fills. The interpreter (exec/interp.c) resolves an op's operands to
 * device pointers and calls `op`; communication ops go to the collective
 * entries. Every entry runs on the backend's streams in submission order;
 * `sync` waits for all of them. */
#ifndef PX_EXEC_BACKEND_H
#define PX_EXEC_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

typedef enum { PX_RED_SUM, PX_RED_MAX } px_redop;

/* Everything an op needs besides the plan: operands and where this rank's
 * shard sits in the global tensors (for vocabulary, sequence and head
 * offsets and for the dropout random numbers, which are functions of global
 * element indices so that every plan draws the same masks). */
typedef struct {
  const px_plan *plan;
  const px_op *op;
  void *out[PX_OP_OUTS];
  void *in[PX_OP_INS];        /* const in spirit; some ops work in place */
  int64_t tp_rank;
  int64_t layer;              /* global layer (dropout sites, rope) */
  const uint64_t *seq_index;  /* (mbs) global sequence number of each row of the micro-batch */
  uint64_t seed;              /* run seed */
  int64_t step;
  float loss_scale;           /* LOSS_BWD: d loss / d token loss = 1 / (gbs x seq) */
  /* optimizer (ADAMW, GRAD_NORM): flat ranges are given by the interpreter */
  int64_t count;
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t adam_t;
  double *sumsq_out;
} px_exec_op;

/* One send or receive of a p2p batch. */
typedef struct {
  bool send;
  int peer;          /* world rank */
  void *buf;
  uint64_t bytes;
  int tag;
} px_p2p;

typedef struct px_backend px_backend;
struct px_backend {
  const char *name;
  void *impl;
  /* memory on the device; alloc returns zeroed memory */
  px_status (*alloc)(px_backend *b, uint64_t bytes, void **out, px_err *err);
  void (*release)(px_backend *b, void *p);
  px_status (*zero)(px_backend *b, void *p, uint64_t bytes, px_err *err);
  px_status (*copy)(px_backend *b, void *dst, const void *src, uint64_t bytes, px_err *err);
  px_status (*upload)(px_backend *b, void *dst, const void *host, uint64_t bytes, px_err *err);
  px_status (*download)(px_backend *b, void *host, const void *src, uint64_t bytes, px_err *err);
  /* one op of the graph (not the communication kinds) */
  px_status (*op)(px_backend *b, const px_exec_op *e, px_err *err);
  /* collectives over a group of this rank; counts in elements of dt */
  px_status (*allreduce)(px_backend *b, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op, px_err *err);
  px_status (*allgather)(px_backend *b, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                         px_err *err);
  px_status (*reduce_scatter)(px_backend *b, px_group g, void *out, const void *in, uint64_t count_out, px_dtype dt,
                              px_err *err);
  /* posts every send and receive, then waits for all (batch_isend_irecv) */
  px_status (*p2p)(px_backend *b, px_p2p *items, int n, px_err *err);
  px_status (*sync)(px_backend *b, px_err *err);
  void (*destroy)(px_backend *b);
};

#endif
