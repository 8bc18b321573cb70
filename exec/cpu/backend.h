/* The CPU backend: fp32 tensors in host memory, the kernels of
 * kernels/cpu (OpenBLAS for GEMMs) and MPI for collectives. The reference
 * every other backend is checked against. */
#ifndef PX_EXEC_CPU_BACKEND_H
#define PX_EXEC_CPU_BACKEND_H

#include "exec/backend.h"
#include "exec/comm.h"

/* Sets OpenBLAS's threads to this machine's cores shared among the MPI ranks
 * on it (unless OPENBLAS_NUM_THREADS says otherwise): spinning BLAS threads of
 * several ranks on the same cores slow everything by orders of magnitude. */
void px_cpu_blas_threads(void);

/* The backend keeps a pointer to comm (which must outlive it). */
px_status px_cpu_backend_new(const px_comm *comm, px_backend **out, px_err *err);

#endif
