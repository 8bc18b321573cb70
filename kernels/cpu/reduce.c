/* Sum of squares, scale, add and accumulate over contiguous buffers, split
 * over the kernels' threads (kernels/cpu/par.h) and vectorised (PX_K_SIMD).
 * The sum of squares adds fixed blocks, each in fixed lanes, so its bits
 * depend on n alone, never on the thread count. */
#include "kernels/cpu/reduce.h"

#include "kernels/cpu/par.h"

/* Elements per thread below which a kernel stays on one thread: these
 * stream memory, a core's worth of bandwidth does a layer's activations
 * (1024 x 768) in well under a millisecond, and a thread's start, with
 * OpenBLAS's threads still spinning after a GEMM, cost more than it saved. */
#define RED_GRAIN (1 << 20)
/* The sum of squares: double lanes per block, and at most this many blocks
 * (each at least SUMSQ_MIN_BLOCK elements), summed in block order. */
#define SUMSQ_LANES 8
#define SUMSQ_MAX_BLOCKS 1024
#define SUMSQ_MIN_BLOCK 16384

/* x[0..n) squared and summed: element i into lane i mod 8, the lanes added pairwise. */
PX_K_SIMD static double sumsq_block(const float *x, int64_t n) {
  double acc[SUMSQ_LANES] = {0};
  int64_t i = 0;
  for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES)
    for (int j = 0; j < SUMSQ_LANES; j++) acc[j] += (double)x[i + j] * x[i + j];
  for (int j = 0; i < n; i++, j++) acc[j] += (double)x[i] * x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

typedef struct {
  const float *x;
  double *part; /* (blocks) */
  float *out;
  const float *a, *b;
  int64_t n, block;
  float s;
} red_args;

static void sumsq_range(void *ctx, int64_t lo, int64_t hi) {
  red_args *r = ctx;
  for (int64_t k = lo; k < hi; k++) {
    int64_t i0 = k * r->block, i1 = i0 + r->block < r->n ? i0 + r->block : r->n;
    r->part[k] = sumsq_block(r->x + i0, i1 - i0);
  }
}

double px_k_sumsq(const float *x, int64_t n) {
  if (n <= 0) return 0.0;
  double part[SUMSQ_MAX_BLOCKS];
  int64_t block = (n + SUMSQ_MAX_BLOCKS - 1) / SUMSQ_MAX_BLOCKS;
  if (block < SUMSQ_MIN_BLOCK) block = SUMSQ_MIN_BLOCK;
  const int64_t blocks = (n + block - 1) / block;
  red_args r = {.x = x, .part = part, .n = n, .block = block};
  px_k_parallel_for(blocks, (RED_GRAIN + block - 1) / block, sumsq_range, &r);
  double s = 0.0;
  for (int64_t k = 0; k < blocks; k++) s += part[k];
  return s;
}

PX_K_SIMD static void scale_range(void *ctx, int64_t lo, int64_t hi) {
  red_args *r = ctx;
  float *out = r->out;
  const float s = r->s;
  for (int64_t i = lo; i < hi; i++) out[i] *= s;
}

void px_k_scale(float *x, int64_t n, float s) {
  red_args r = {.out = x, .s = s};
  px_k_parallel_for(n, RED_GRAIN, scale_range, &r);
}

PX_K_SIMD static void add_range(void *ctx, int64_t lo, int64_t hi) {
  red_args *r = ctx;
  float *out = r->out;
  const float *a = r->a, *b = r->b;
  for (int64_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
}

void px_k_add(float *out, const float *a, const float *b, int64_t n) {
  red_args r = {.out = out, .a = a, .b = b};
  px_k_parallel_for(n, RED_GRAIN, add_range, &r);
}

PX_K_SIMD static void acc_range(void *ctx, int64_t lo, int64_t hi) {
  red_args *r = ctx;
  float *out = r->out;
  const float *a = r->a;
  for (int64_t i = lo; i < hi; i++) out[i] += a[i];
}

void px_k_acc(float *out, const float *inp, int64_t n) {
  red_args r = {.out = out, .a = inp};
  px_k_parallel_for(n, RED_GRAIN, acc_range, &r);
}
