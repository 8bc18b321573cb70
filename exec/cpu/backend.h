/* The CPU backend: fp32 tensors in host memory, the kernels of
 * kernels/cpu (OpenBLAS for GEMMs) and MPI for collectives. The reference
 * every other backend is checked against. */
#ifndef PX_EXEC_CPU_BACKEND_H
#define PX_EXEC_CPU_BACKEND_H

#include "exec/backend.h"
#include "exec/comm.h"

/* Sets OpenBLAS's threads for this rank and returns how many: `requested`
 * when above 0, else OPENBLAS_NUM_THREADS when set, else the CPUs the
 * process may run on (its affinity mask: one core when mpirun bound the rank
 * to it), shared among the node's ranks when each may run on every core.
 * More spinning BLAS threads than cores slow everything by orders of
 * magnitude; fewer leave cores idle. */
int px_cpu_blas_threads(int requested);

/* Keeps the memory this process frees for its own reuse (glibc: large
 * blocks from the heap, not mmap; the heap never trimmed), as the backend's
 * block cache does for tensors: MPI allocates and frees temporaries in its
 * collectives (Open MPI's reduce-scatter a full-size one on one rank), and
 * memory given back to the system faults in again, page by page, on the
 * next call (2,500 faults, ~4 ms, in each 12.6 MB reduce-scatter of the
 * ZeRO-3 plan of bench/compare.sh). Process-wide; the backend calls it, and
 * calibrate before it measures the collectives as run calls them. */
void px_cpu_keep_pages(void);

/* The backend keeps a pointer to comm (which must outlive it); threads as px_cpu_blas_threads. */
px_status px_cpu_backend_new(const px_comm *comm, int threads, px_backend **out, px_err *err);
/* A backend that only answers supports_op (no comm, no memory, no threads):
 * asking whether the cpu backend runs a plan, outside a run (launch). */
void px_cpu_backend_probe(px_backend *b);
/* The BLAS threads the backend runs with. */
int px_cpu_backend_threads(const px_backend *b);

#endif
