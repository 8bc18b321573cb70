/* Vocabulary-parallel token embedding and learned position embedding. */
#include "kernels/cpu/embed.h"

#include <string.h>

void px_k_embed_fwd(float *out, const int32_t *tokens, const float *table, int64_t n, int64_t vocab_start,
                    int64_t vl, int64_t c) {
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)tokens[i] - vocab_start;
    float *o = out + i * c;
    if (tokens[i] >= 0 && r >= 0 && r < vl) {
      memcpy(o, table + r * c, (size_t)c * sizeof *o);
    } else {
      memset(o, 0, (size_t)c * sizeof *o);
    }
  }
}

void px_k_embed_bwd(float *dtable, const float *dout, const int32_t *tokens, int64_t n, int64_t vocab_start,
                    int64_t vl, int64_t c) {
  for (int64_t i = 0; i < n; i++) {
    int64_t r = (int64_t)tokens[i] - vocab_start;
    if (tokens[i] < 0 || r < 0 || r >= vl) continue;
    float *d = dtable + r * c;
    const float *g = dout + i * c;
    for (int64_t j = 0; j < c; j++) d[j] += g[j];
  }
}

void px_k_pos_fwd(float *out, const float *wpe, int64_t b, int64_t t, int64_t c, int64_t pos0) {
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t ti = 0; ti < t; ti++) {
      float *o = out + (bi * t + ti) * c;
      const float *p = wpe + (pos0 + ti) * c;
      for (int64_t j = 0; j < c; j++) o[j] += p[j];
    }
  }
}

void px_k_pos_bwd(float *dwpe, const float *dout, int64_t b, int64_t t, int64_t c, int64_t pos0) {
  for (int64_t bi = 0; bi < b; bi++) {
    for (int64_t ti = 0; ti < t; ti++) {
      float *d = dwpe + (pos0 + ti) * c;
      const float *g = dout + (bi * t + ti) * c;
      for (int64_t j = 0; j < c; j++) d[j] += g[j];
    }
  }
}
