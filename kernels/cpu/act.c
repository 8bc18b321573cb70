/* GELU and SwiGLU activations over contiguous buffers. */
#include "kernels/cpu/act.h"

#include "kernels/math.h"

void px_k_gelu_fwd(float *out, const float *inp, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = px_gelu(inp[i]);
}

void px_k_gelu_bwd(float *dinp, const float *dout, const float *inp, int64_t n) {
  for (int64_t i = 0; i < n; i++) dinp[i] += dout[i] * px_gelu_grad(inp[i]);
}

void px_k_dgelu_inplace(float *d, const float *inp, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] *= px_gelu_grad(inp[i]);
}

void px_k_swiglu_fwd(float *out, const float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = px_silu(gate[i]) * up[i];
}

void px_k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i];
    dgate[i] += dout[i] * up[i] * px_silu_grad(g);
    dup[i] += dout[i] * px_silu(g);
  }
}
