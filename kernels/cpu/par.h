/* A parallel for over [0, n) for the CPU kernels outside BLAS: contiguous
 * ranges on the threads the backend runs BLAS with (px_k_set_threads).
 * Elementwise kernels give the same bits whatever the thread count. */
#ifndef PX_KERNELS_CPU_PAR_H
#define PX_KERNELS_CPU_PAR_H

#include <stdint.h>

/* Threads the kernels may use (the backend's BLAS threads); 1 or less: one. */
void px_k_set_threads(int threads);
/* Calls fn(ctx, lo, hi) over contiguous ranges covering [0, n): on the
 * calling thread alone when n < min_per_thread x 2 or one thread is set,
 * else split evenly over the threads (the caller takes the first range). */
void px_k_parallel_for(int64_t n, int64_t min_per_thread, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);

#endif
