/* The CUDA backend's collectives and p2p (NCCL, or MPI staged through the
 * host) and its NCCL communicators. */
#ifndef PX_EXEC_CUDA_COLLECTIVES_H
#define PX_EXEC_CUDA_COLLECTIVES_H

#include "exec/backend.h"
#include "exec/cuda/memory.h"

/* The world communicator from an id broadcast over MPI, then one split per group. Collective. */
px_status px_cuda_nccl_init(px_cuda *c, px_err *err);

/* The backend table's entries (exec/backend.h). */
px_status px_cuda_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_dtype dt, px_redop op,
                            px_err *err);
px_status px_cuda_allgather(px_backend *be, px_group g, void *out, const void *in, uint64_t count_in, px_dtype dt,
                            px_err *err);
px_status px_cuda_reduce_scatter(px_backend *be, px_group g, void *out, const void *in, uint64_t count_out,
                                 px_dtype dt, px_err *err);
px_status px_cuda_p2p(px_backend *be, px_p2p *items, int n, px_err *err);
px_status px_cuda_host_allreduce(px_backend *be, px_group g, void *buf, uint64_t count, px_host_type t, px_redop op,
                                 px_err *err);

#endif
