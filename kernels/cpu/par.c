/* The kernels' parallel for: a thread per extra range, joined before it returns. */
#include "kernels/cpu/par.h"

#include <pthread.h>
#include <stdbool.h>

#define PAR_MAX 64

static int k_threads = 1;

void px_k_set_threads(int threads) { k_threads = threads < 1 ? 1 : threads > PAR_MAX ? PAR_MAX : threads; }

typedef struct {
  void (*fn)(void *ctx, int64_t lo, int64_t hi);
  void *ctx;
  int64_t lo, hi;
} par_range;

static void *run_range(void *arg) {
  par_range *r = arg;
  r->fn(r->ctx, r->lo, r->hi);
  return NULL;
}

void px_k_parallel_for(int64_t n, int64_t min_per_thread, void (*fn)(void *ctx, int64_t lo, int64_t hi), void *ctx) {
  int64_t t = k_threads;
  if (min_per_thread < 1) min_per_thread = 1;
  if (t > n / min_per_thread) t = n / min_per_thread;
  if (t <= 1) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  par_range r[PAR_MAX];
  pthread_t th[PAR_MAX];
  bool started[PAR_MAX] = {false};
  for (int64_t i = 0; i < t; i++) r[i] = (par_range){fn, ctx, n * i / t, n * (i + 1) / t};
  for (int64_t i = 1; i < t; i++) started[i] = pthread_create(&th[i], NULL, run_range, &r[i]) == 0;
  fn(ctx, r[0].lo, r[0].hi);
  for (int64_t i = 1; i < t; i++) {
    if (started[i])
      pthread_join(th[i], NULL);
    else
      fn(ctx, r[i].lo, r[i].hi); /* no thread: this one runs the range */
  }
}
