/* Vocabulary-parallel cross-entropy: local max, local sum of exponentials,
 * local target logit, loss, and the gradient of the logits. */
#include "kernels/cpu/loss.h"

#include <math.h>

/* Number of this shard's columns that are real (not vocabulary padding). */
static int64_t real_cols(int64_t vocab_start, int64_t vl, int64_t vocab_real) {
  int64_t r = vocab_real - vocab_start;
  return r < 0 ? 0 : r > vl ? vl : r;
}

void px_k_ce_max_local(float *maxes, const float *logits, int64_t n, int64_t vocab_start, int64_t vl,
                       int64_t vocab_real) {
  int64_t nr = real_cols(vocab_start, vl, vocab_real);
  for (int64_t i = 0; i < n; i++) {
    const float *l = logits + i * vl;
    float mx = -INFINITY;
    for (int64_t j = 0; j < nr; j++) mx = l[j] > mx ? l[j] : mx;
    maxes[i] = mx;
  }
}

void px_k_ce_sumexp_local(float *sums, const float *logits, const float *gmax, int64_t n, int64_t vocab_start,
                          int64_t vl, int64_t vocab_real) {
  int64_t nr = real_cols(vocab_start, vl, vocab_real);
  for (int64_t i = 0; i < n; i++) {
    const float *l = logits + i * vl;
    double s = 0.0;
    for (int64_t j = 0; j < nr; j++) s += expf(l[j] - gmax[i]);
    sums[i] = (float)s;
  }
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

void px_k_ce_bwd(float *dlogits, const float *logits, const float *gmax, const float *gsum, const int32_t *targets,
                 int64_t n, int64_t vocab_start, int64_t vl, int64_t vocab_real, float dloss_scale) {
  int64_t nr = real_cols(vocab_start, vl, vocab_real);
  for (int64_t i = 0; i < n; i++) {
    const float *l = logits + i * vl;
    float *dl = dlogits + i * vl;
    if (targets[i] < 0) {
      for (int64_t j = 0; j < vl; j++) dl[j] = 0.0f;
      continue;
    }
    float inv = 1.0f / gsum[i], m = gmax[i];
    int64_t c = (int64_t)targets[i] - vocab_start;
    for (int64_t j = 0; j < nr; j++) {
      float p = expf(l[j] - m) * inv;
      dl[j] = (p - (j == c ? 1.0f : 0.0f)) * dloss_scale;
    }
    for (int64_t j = nr; j < vl; j++) dl[j] = 0.0f;
  }
}

void px_k_ce_logprobs(float *out, const float *logits, const float *gmax, const float *gsum, int64_t n, int64_t vl) {
  for (int64_t i = 0; i < n; i++) {
    float shift = gmax[i] + (float)log((double)gsum[i]);
    for (int64_t j = 0; j < vl; j++) out[i * vl + j] = logits[i * vl + j] - shift;
  }
}
