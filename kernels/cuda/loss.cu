/* Vocabulary-parallel cross-entropy: a block per row for the row reductions
 * (the double sum of the CPU kept), a thread per row for the scalars, a block
 * per row for the gradient. */
#include "kernels/cuda/loss.h"

#define CE_THREADS 256

/* Number of this shard's columns that are real (not vocabulary padding). */
static int64_t real_cols(int64_t vocab_start, int64_t vl, int64_t vocab_real) {
  int64_t r = vocab_real - vocab_start;
  return r < 0 ? 0 : r > vl ? vl : r;
}

/* Rows are blocks; gridDim.x may be smaller than n, so blocks step over rows. */
#define FOR_ROW(i, n) for (int64_t i = blockIdx.x; i < (n); i += gridDim.x)

static __global__ void ce_max_kernel(float *maxes, const float *logits, int64_t n, int64_t vl, int64_t nr) {
  FOR_ROW(i, n) {
    const float *l = logits + i * vl;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < nr; j += blockDim.x) mx = fmaxf(mx, l[j]);
    mx = px_kc_block_max(mx);
    if (threadIdx.x == 0) maxes[i] = mx;
  }
}

static __global__ void ce_sumexp_kernel(float *sums, const float *logits, const float *gmax, int64_t n, int64_t vl,
                                        int64_t nr) {
  FOR_ROW(i, n) {
    const float *l = logits + i * vl;
    const float m = gmax[i];
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < nr; j += blockDim.x) s += expf(l[j] - m);
    s = px_kc_block_sum(s);
    if (threadIdx.x == 0) sums[i] = (float)s;
  }
}

static __global__ void ce_target_kernel(float *tlogit, const float *logits, const int32_t *targets, int64_t n,
                                        int64_t vocab_start, int64_t vl) {
  PX_KC_FOR(i, n) {
    int64_t c = (int64_t)targets[i] - vocab_start;
    tlogit[i] = (targets[i] >= 0 && c >= 0 && c < vl) ? logits[i * vl + c] : 0.0f;
  }
}

static __global__ void ce_loss_kernel(float *losses, const float *gmax, const float *gsum, const float *tlogit,
                                      const int32_t *targets, int64_t n) {
  PX_KC_FOR(i, n) {
    losses[i] = targets[i] < 0 ? 0.0f : (float)(log((double)gsum[i]) + (double)gmax[i] - (double)tlogit[i]);
  }
}

static __global__ void ce_bwd_kernel(float *dlogits, const float *logits, const float *gmax, const float *gsum,
                                     const int32_t *targets, int64_t n, int64_t vocab_start, int64_t vl, int64_t nr,
                                     float dloss_scale) {
  FOR_ROW(i, n) {
    const float *l = logits + i * vl;
    float *dl = dlogits + i * vl;
    if (targets[i] < 0) {
      for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) dl[j] = 0.0f;
      continue;
    }
    const float inv = 1.0f / gsum[i], m = gmax[i];
    const int64_t c = (int64_t)targets[i] - vocab_start;
    for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) {
      if (j < nr) {
        float p = expf(l[j] - m) * inv;
        dl[j] = (p - (j == c ? 1.0f : 0.0f)) * dloss_scale;
      } else {
        dl[j] = 0.0f;
      }
    }
  }
}

static __global__ void ce_logprobs_kernel(float *out, const float *logits, const float *gmax, const float *gsum,
                                          int64_t n, int64_t vl) {
  FOR_ROW(i, n) {
    const float shift = gmax[i] + (float)log((double)gsum[i]); /* every thread of the row, the same value */
    for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) out[i * vl + j] = logits[i * vl + j] - shift;
  }
}

static unsigned row_blocks(int64_t n) { return px_kc_blocks(n, 1); }

extern "C" px_status px_kc_ce_max_local(float *maxes, const float *logits, int64_t n, int64_t vocab_start, int64_t vl,
                                        int64_t vocab_real, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  ce_max_kernel<<<row_blocks(n), CE_THREADS, 0, stream>>>(maxes, logits, n, vl, real_cols(vocab_start, vl, vocab_real));
  return PX_KC_LAUNCHED("ce_max_kernel");
}

extern "C" px_status px_kc_ce_sumexp_local(float *sums, const float *logits, const float *gmax, int64_t n,
                                           int64_t vocab_start, int64_t vl, int64_t vocab_real, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  ce_sumexp_kernel<<<row_blocks(n), CE_THREADS, 0, stream>>>(sums, logits, gmax, n, vl,
                                                            real_cols(vocab_start, vl, vocab_real));
  return PX_KC_LAUNCHED("ce_sumexp_kernel");
}

extern "C" px_status px_kc_ce_target_local(float *tlogit, const float *logits, const int32_t *targets, int64_t n,
                                           int64_t vocab_start, int64_t vl, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  ce_target_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(tlogit, logits, targets, n,
                                                                                 vocab_start, vl);
  return PX_KC_LAUNCHED("ce_target_kernel");
}

extern "C" px_status px_kc_ce_loss(float *losses, const float *gmax, const float *gsum, const float *tlogit,
                                   const int32_t *targets, int64_t n, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  ce_loss_kernel<<<px_kc_blocks(n, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(losses, gmax, gsum, tlogit, targets, n);
  return PX_KC_LAUNCHED("ce_loss_kernel");
}

extern "C" px_status px_kc_ce_bwd(float *dlogits, const float *logits, const float *gmax, const float *gsum,
                                  const int32_t *targets, int64_t n, int64_t vocab_start, int64_t vl,
                                  int64_t vocab_real, float dloss_scale, cudaStream_t stream) {
  if (n <= 0 || vl <= 0) return PX_OK;
  ce_bwd_kernel<<<row_blocks(n), CE_THREADS, 0, stream>>>(dlogits, logits, gmax, gsum, targets, n, vocab_start, vl,
                                                         real_cols(vocab_start, vl, vocab_real), dloss_scale);
  return PX_KC_LAUNCHED("ce_bwd_kernel");
}

extern "C" px_status px_kc_ce_logprobs(float *out, const float *logits, const float *gmax, const float *gsum, int64_t n,
                                       int64_t vl, cudaStream_t stream) {
  if (n <= 0 || vl <= 0) return PX_OK;
  ce_logprobs_kernel<<<row_blocks(n), CE_THREADS, 0, stream>>>(out, logits, gmax, gsum, n, vl);
  return PX_KC_LAUNCHED("ce_logprobs_kernel");
}
