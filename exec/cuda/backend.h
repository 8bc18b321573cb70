/* CUDA backend: every op of the graph on one GPU per rank (cuBLASLt GEMMs,
 * the kernels of kernels/cuda), bf16 or fp32 as the plan says, and the
 * collectives through NCCL, or through MPI staged in host memory when a node
 * has more ranks than GPUs (NCCL refuses two ranks on one GPU). */
#ifndef PX_EXEC_CUDA_BACKEND_H
#define PX_EXEC_CUDA_BACKEND_H

#include "exec/backend.h"
#include "exec/comm.h"

/* CUDA devices this process can use (0 without a device or a driver). */
int px_cuda_device_count(void);
/* Device 0's name ("" when none). */
void px_cuda_device_name(char *buf, size_t cap);

/* The backend of one rank: device (node-local rank) mod (devices); NCCL
 * communicators for its TP, DP, tied-embedding and world groups, unless
 * PX_CUDA_COMM=mpi or ranks outnumber a node's GPUs (then MPI, said once on
 * stderr). Collective over the world: every rank calls it. A collective that
 * has not finished after PX_COMM_TIMEOUT_S seconds (default 600), or an
 * asynchronous NCCL error, aborts the communicators and fails with a message
 * instead of hanging. */
px_status px_cuda_backend_new(const px_comm *comm, px_backend **out, px_err *err);

#endif
