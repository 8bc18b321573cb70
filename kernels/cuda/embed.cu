/* Vocabulary-parallel token embedding and learned positions. The backwards
 * give each gradient element to one thread that adds its contributions in the
 * CPU's order, so they are deterministic without atomics. */
#include "kernels/cuda/embed.h"

#include <stdlib.h>

template <typename T>
static __global__ void embed_fwd_kernel(T *out, const int32_t *tokens, const T *table, int64_t n, int64_t vocab_start,
                                        int64_t vl, int64_t c) {
  PX_KC_FOR(idx, n * c) {
    int64_t i = idx / c, j = idx - i * c;
    int64_t r = (int64_t)tokens[i] - vocab_start;
    if (tokens[i] >= 0 && r >= 0 && r < vl) {
      out[idx] = table[r * c + j];
    } else {
      px_kc_st(out + idx, 0.0f);
    }
  }
}

/* Block (x: 256 columns, y: row slice s of EMBED_SLICES). The thread of column
 * j in slice s owns the table rows r with r % EMBED_SLICES == s and walks all
 * tokens in order, staged through shared memory, adding the owned ones: each
 * dtable element has one writer and the CPU's order of additions. */
#define EMBED_COLS 256
#define EMBED_SLICES 32
static __global__ void embed_bwd_kernel(float *dtable, const float *dout, const int32_t *tokens, int64_t n,
                                        int64_t vocab_start, int64_t vl, int64_t c) {
  __shared__ int64_t rows[EMBED_COLS];
  const int64_t j = (int64_t)blockIdx.x * EMBED_COLS + threadIdx.x;
  const int64_t slice = blockIdx.y;
  for (int64_t i0 = 0; i0 < n; i0 += EMBED_COLS) {
    int64_t cnt = n - i0 < EMBED_COLS ? n - i0 : EMBED_COLS;
    __syncthreads(); /* the previous chunk's readers are done */
    if (threadIdx.x < cnt) {
      int32_t tok = tokens[i0 + threadIdx.x];
      int64_t r = (int64_t)tok - vocab_start;
      rows[threadIdx.x] = (tok >= 0 && r >= 0 && r < vl && r % EMBED_SLICES == slice) ? r : -1;
    }
    __syncthreads();
    if (j < c) {
      for (int64_t k = 0; k < cnt; k++) {
        int64_t r = rows[k];
        if (r >= 0) dtable[r * c + j] += dout[(i0 + k) * c + j];
      }
    }
  }
}

template <typename T>
static __global__ void pos_fwd_kernel(T *out, const T *wpe, int64_t b, int64_t t, int64_t c, int64_t pos0) {
  PX_KC_FOR(idx, b * t * c) {
    int64_t j = idx % c, ti = (idx / c) % t;
    px_kc_st(out + idx, px_kc_ld(out + idx) + px_kc_ld(wpe + (pos0 + ti) * c + j));
  }
}

/* One thread per (t, j): dwpe[pos0 + t, j] += dout[0, t, j] + dout[1, t, j] + ...
 * in b order, summed in fp32 from the old value and stored once. */
template <typename T>
static __global__ void pos_bwd_kernel(T *dwpe, const T *dout, int64_t b, int64_t t, int64_t c, int64_t pos0) {
  PX_KC_FOR(idx, t * c) {
    int64_t ti = idx / c, j = idx - ti * c;
    T *d = dwpe + (pos0 + ti) * c + j;
    float acc = px_kc_ld(d);
    for (int64_t bi = 0; bi < b; bi++) acc += px_kc_ld(dout + (bi * t + ti) * c + j);
    px_kc_st(d, acc);
  }
}

/* Block (row k of the sorted rows, 256 columns): the thread of column j sums
 * the row's positions in token order in fp32, from the old value, and stores
 * once: the fp32 kernel's result, rounded once. */
template <typename T>
static __global__ void embed_bwd_sorted_kernel(T *dtable, const T *dout, const int32_t *rows, const int32_t *starts,
                                               const int32_t *order, int64_t c) {
  const int64_t j = (int64_t)blockIdx.y * EMBED_COLS + threadIdx.x, k = blockIdx.x;
  if (j >= c) return;
  T *d = dtable + (int64_t)rows[k] * c + j;
  float acc = px_kc_ld(d);
  for (int32_t p = starts[k]; p < starts[k + 1]; p++) acc += px_kc_ld(dout + (int64_t)order[p] * c + j);
  px_kc_st(d, acc);
}

template <typename T>
static px_status embed_fwd(T *out, const int32_t *tokens, const T *table, int64_t n, int64_t vocab_start, int64_t vl,
                           int64_t c, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return PX_OK;
  embed_fwd_kernel<<<px_kc_blocks(n * c, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, tokens, table, n,
                                                                                     vocab_start, vl, c);
  return PX_KC_LAUNCHED("embed_fwd_kernel");
}

template <typename T>
static px_status pos_fwd(T *out, const T *wpe, int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream) {
  if (b <= 0 || t <= 0 || c <= 0) return PX_OK;
  pos_fwd_kernel<<<px_kc_blocks(b * t * c, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(out, wpe, b, t, c, pos0);
  return PX_KC_LAUNCHED("pos_fwd_kernel");
}

#define EMBED_FWD(T) (T *out, const int32_t *tokens, const T *table, int64_t n, int64_t vocab_start, int64_t vl, \
    int64_t c, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_embed_fwd, EMBED_FWD, embed_fwd(out, tokens, table, n, vocab_start, vl, c, stream))

extern "C" px_status px_kc_embed_bwd(float *dtable, const float *dout, const int32_t *tokens, int64_t n,
                                     int64_t vocab_start, int64_t vl, int64_t c, cudaStream_t stream) {
  if (n <= 0 || c <= 0 || vl <= 0) return PX_OK;
  int64_t slices = vl < EMBED_SLICES ? vl : EMBED_SLICES; /* slices >= vl own no rows */
  dim3 grid((unsigned)((c + EMBED_COLS - 1) / EMBED_COLS), (unsigned)slices);
  embed_bwd_kernel<<<grid, EMBED_COLS, 0, stream>>>(dtable, dout, tokens, n, vocab_start, vl, c);
  return PX_KC_LAUNCHED("embed_bwd_kernel");
}

#define POS_FWD(T) (T *out, const T *wpe, int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_pos_fwd, POS_FWD, pos_fwd(out, wpe, b, t, c, pos0, stream))

template <typename T>
static px_status pos_bwd(T *dwpe, const T *dout, int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream) {
  if (b <= 0 || t <= 0 || c <= 0) return PX_OK;
  pos_bwd_kernel<<<px_kc_blocks(t * c, PX_KC_THREADS), PX_KC_THREADS, 0, stream>>>(dwpe, dout, b, t, c, pos0);
  return PX_KC_LAUNCHED("pos_bwd_kernel");
}

#define POS_BWD(T) (T *dwpe, const T *dout, int64_t b, int64_t t, int64_t c, int64_t pos0, cudaStream_t stream)
PX_KC_LAUNCHERS(px_kc_pos_bwd, POS_BWD, pos_bwd(dwpe, dout, b, t, c, pos0, stream))

template <typename T>
static px_status embed_bwd_sorted(T *dtable, const T *dout, const int32_t *sorted, int64_t nrows, int64_t n, int64_t c,
                                  cudaStream_t stream) {
  if (nrows <= 0 || c <= 0) return PX_OK;
  if (nrows > 0x7fffffff) return px_kc_fail(__FILE__, __LINE__, "embed_bwd_sorted: %lld rows", (long long)nrows);
  dim3 grid((unsigned)nrows, (unsigned)((c + EMBED_COLS - 1) / EMBED_COLS));
  embed_bwd_sorted_kernel<<<grid, EMBED_COLS, 0, stream>>>(dtable, dout, sorted, sorted + nrows, sorted + 2 * n + 1,
                                                           c);
  return PX_KC_LAUNCHED("embed_bwd_sorted_kernel");
}

extern "C" int64_t px_kc_embed_sort(int32_t *sorted, const int32_t *tokens, int64_t n, int64_t vocab_start,
                                    int64_t vl) {
  int32_t *rows = sorted, *order = sorted + 2 * n + 1;
  int64_t nrows = 0, owned = 0;
  int32_t *count = (int32_t *)calloc((size_t)vl + 1, sizeof *count);
  if (!count) return -1;
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)tokens[i] - vocab_start;
    if (tokens[i] >= 0 && r >= 0 && r < vl && count[r]++ == 0) nrows++;
  }
  int32_t *starts = sorted + nrows;
  /* rows in increasing order, each with the start of its run in order[] */
  int64_t k = 0;
  for (int64_t r = 0; r < vl; r++)
    if (count[r]) {
      rows[k] = (int32_t)r;
      starts[k++] = (int32_t)owned;
      owned += count[r];
      count[r] = starts[k - 1]; /* now the next free place of the row's run */
    }
  starts[nrows] = (int32_t)owned;
  for (int64_t i = 0; i < n; i++) { /* stable: positions in token order */
    int64_t r = (int64_t)tokens[i] - vocab_start;
    if (tokens[i] >= 0 && r >= 0 && r < vl) order[count[r]++] = (int32_t)i;
  }
  free(count);
  return nrows;
}

extern "C" px_status px_kc_embed_bwd_sorted_bf16(px_bf16 *dtable, const px_bf16 *dout, const int32_t *sorted,
                                                 int64_t nrows, int64_t n, int64_t c, cudaStream_t stream) {
  return embed_bwd_sorted(dtable, dout, sorted, nrows, n, c, stream);
}

extern "C" px_status px_kc_embed_bwd_sorted_fp16(px_fp16 *dtable, const px_fp16 *dout, const int32_t *sorted,
                                                 int64_t nrows, int64_t n, int64_t c, cudaStream_t stream) {
  return embed_bwd_sorted(dtable, dout, sorted, nrows, n, c, stream);
}
