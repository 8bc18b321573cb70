/* The CUDA backend's op entries: one op of the graph on the device, and
 * what it runs (exec/cuda/ops.c says how). */
#ifndef PX_EXEC_CUDA_OPS_H
#define PX_EXEC_CUDA_OPS_H

#include "exec/backend.h"

px_status px_cuda_op(px_backend *be, const px_exec_op *e, px_err *err);
px_support px_cuda_supports_op(px_backend *be, const px_exec_op *e, char *why, size_t cap);

#endif
