/* A parallel for over [0, n) for the CPU kernels outside BLAS: contiguous
 * ranges on the threads the backend runs BLAS with (px_k_set_threads).
 * Elementwise kernels give the same bits whatever the thread count. */
#ifndef PX_KERNELS_CPU_PAR_H
#define PX_KERNELS_CPU_PAR_H

#include <stdint.h>

/* On a kernel's inner loop function: compiled twice on x86-64, for AVX2 and
 * for the baseline, the one the CPU has picked at load time (an ifunc). The
 * loops are plain C the vectoriser widens (CMakeLists.txt: -O3, no
 * contraction), so both clones, and a vector body and its scalar remainder,
 * give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PX_K_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define PX_K_SIMD
#endif

/* Threads the kernels may use (the backend's BLAS threads); 1 or less: one. */
void px_k_set_threads(int threads);
/* Calls fn(ctx, lo, hi) over contiguous ranges covering [0, n): on the
 * calling thread alone when n < min_per_thread x 2 or one thread is set,
 * else split evenly over the threads (the caller takes the first range). */
void px_k_parallel_for(int64_t n, int64_t min_per_thread, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx);

#endif
