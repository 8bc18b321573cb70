/* Vocabulary-parallel cross-entropy: local max, local sum of exponentials,
 * local target logit, loss, and the gradient of the logits. Rows split over
 * the kernels' threads (kernels/cpu/par.h), one row on one thread; the
 * column loops vectorise (PX_K_SIMD) in fixed lanes, with e^x from
 * px_exp_fast (kernels/math.h), so the bits depend on neither the thread
 * count nor the ISA. */
#include "kernels/cpu/loss.h"

#include <math.h>
#include <stdbool.h>

#include "kernels/cpu/par.h"
#include "kernels/math.h"

/* Lanes of the vectorised row reductions (max, sum of exponentials). */
#define CE_LANES 8
/* Rows per thread below which a kernel stays on one thread (a GPT-2 row is 50257 columns). */
#define CE_GRAIN 4

/* Number of this shard's columns that are real (not vocabulary padding). */
static int64_t real_cols(int64_t vocab_start, int64_t vl, int64_t vocab_real) {
  int64_t r = vocab_real - vocab_start;
  return r < 0 ? 0 : r > vl ? vl : r;
}

typedef struct {
  float *out;
  const float *logits, *gmax, *gsum;
  const int32_t *targets;
  int64_t vl, nr, vocab_start;
  float scale;
} ce_args;

/* max of l[0..n), -inf when n = 0: lanes, then the lanes (max is exact, any order). */
PX_K_SIMD static float row_max(const float *l, int64_t n) {
  float mx[CE_LANES];
  for (int j = 0; j < CE_LANES; j++) mx[j] = -INFINITY;
  int64_t i = 0;
  for (; i + CE_LANES <= n; i += CE_LANES)
    for (int j = 0; j < CE_LANES; j++) mx[j] = l[i + j] > mx[j] ? l[i + j] : mx[j];
  for (; i < n; i++) mx[0] = l[i] > mx[0] ? l[i] : mx[0];
  float m = mx[0];
  for (int j = 1; j < CE_LANES; j++) m = mx[j] > m ? mx[j] : m;
  return m;
}

static void max_range(void *ctx, int64_t lo, int64_t hi) {
  ce_args *a = ctx;
  for (int64_t i = lo; i < hi; i++) a->out[i] = row_max(a->logits + i * a->vl, a->nr);
}

void px_k_ce_max_local(float *maxes, const float *logits, int64_t n, int64_t vocab_start, int64_t vl,
                       int64_t vocab_real) {
  ce_args a = {.out = maxes, .logits = logits, .vl = vl, .nr = real_cols(vocab_start, vl, vocab_real)};
  px_k_parallel_for(n, CE_GRAIN, max_range, &a);
}

/* sum of e^(l[j] - m) over j < n in double: column j into lane j mod 8, the lanes added pairwise. */
PX_K_SIMD static double row_sumexp(const float *l, float m, int64_t n) {
  double acc[CE_LANES] = {0};
  int64_t i = 0;
  for (; i + CE_LANES <= n; i += CE_LANES)
    for (int j = 0; j < CE_LANES; j++) acc[j] += px_exp_fast(l[i + j] - m);
  for (int j = 0; i < n; i++, j++) acc[j] += px_exp_fast(l[i] - m);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void sumexp_range(void *ctx, int64_t lo, int64_t hi) {
  ce_args *a = ctx;
  for (int64_t i = lo; i < hi; i++) a->out[i] = (float)row_sumexp(a->logits + i * a->vl, a->gmax[i], a->nr);
}

void px_k_ce_sumexp_local(float *sums, const float *logits, const float *gmax, int64_t n, int64_t vocab_start,
                          int64_t vl, int64_t vocab_real) {
  ce_args a = {.out = sums, .logits = logits, .gmax = gmax, .vl = vl, .nr = real_cols(vocab_start, vl, vocab_real)};
  px_k_parallel_for(n, CE_GRAIN, sumexp_range, &a);
}

void px_k_ce_target_local(float *tlogit, const float *logits, const int32_t *targets, int64_t n, int64_t vocab_start,
                          int64_t vl) {
  for (int64_t i = 0; i < n; i++) {
    int64_t c = (int64_t)targets[i] - vocab_start;
    tlogit[i] = (targets[i] >= 0 && c >= 0 && c < vl) ? logits[i * vl + c] : 0.0f;
  }
}

void px_k_ce_loss(float *losses, const float *gmax, const float *gsum, const float *tlogit, const int32_t *targets,
                  int64_t n) {
  for (int64_t i = 0; i < n; i++)
    losses[i] = targets[i] < 0 ? 0.0f : (float)(log((double)gsum[i]) + (double)gmax[i] - (double)tlogit[i]);
}

/* dl[j] = e^(l[j] - m) inv scale for j < n, 0 for n <= j < vl. */
PX_K_SIMD static void row_softmax_scaled(float *dl, const float *l, float m, float inv, float scale, int64_t n,
                                         int64_t vl) {
  for (int64_t j = 0; j < n; j++) dl[j] = (px_exp_fast(l[j] - m) * inv) * scale;
  for (int64_t j = n; j < vl; j++) dl[j] = 0.0f;
}

static void bwd_range(void *ctx, int64_t lo, int64_t hi) {
  ce_args *a = ctx;
  for (int64_t i = lo; i < hi; i++) {
    const float *l = a->logits + i * a->vl;
    float *dl = a->out + i * a->vl;
    if (a->targets[i] < 0) {
      for (int64_t j = 0; j < a->vl; j++) dl[j] = 0.0f;
      continue;
    }
    const float inv = 1.0f / a->gsum[i], m = a->gmax[i];
    const int64_t c = (int64_t)a->targets[i] - a->vocab_start;
    const bool here = c >= 0 && c < a->nr;
    const float lc = here ? l[c] : 0.0f; /* read before dl, which may be l, is written */
    row_softmax_scaled(dl, l, m, inv, a->scale, a->nr, a->vl);
    if (here) dl[c] = (px_exp_fast(lc - m) * inv - 1.0f) * a->scale; /* p - 1 at the target */
  }
}

void px_k_ce_bwd(float *dlogits, const float *logits, const float *gmax, const float *gsum, const int32_t *targets,
                 int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, float dloss_scale) {
  ce_args a = {.out = dlogits, .logits = logits, .gmax = gmax, .gsum = gsum, .targets = targets, .vl = vl,
               .nr = real_cols(vocab_start, vl, vocab_real), .vocab_start = vocab_start, .scale = dloss_scale};
  px_k_parallel_for(n, CE_GRAIN, bwd_range, &a);
}

PX_K_SIMD static void logprobs_range(void *ctx, int64_t lo, int64_t hi) {
  ce_args *a = ctx;
  const int64_t vl = a->vl;
  for (int64_t i = lo; i < hi; i++) {
    const float shift = a->gmax[i] + (float)log((double)a->gsum[i]);
    const float *l = a->logits + i * vl;
    float *o = a->out + i * vl;
    for (int64_t j = 0; j < vl; j++) o[j] = l[j] - shift;
  }
}

void px_k_ce_logprobs(float *out, const float *logits, const float *gmax, const float *gsum, int64_t n, int64_t vl) {
  ce_args a = {.out = out, .logits = logits, .gmax = gmax, .gsum = gsum, .vl = vl};
  px_k_parallel_for(n, CE_GRAIN, logprobs_range, &a);
}
