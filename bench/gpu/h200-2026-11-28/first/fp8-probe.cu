// one-off probe: which fp8 cuBLASLt configurations run on this GPU (not part of the build)
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include "kernels/cuda/gemm.h"

static void *dz(size_t n) { void *p; cudaMalloc(&p, n); cudaMemset(p, 0, n); return p; }
// raw: cuBLAS TN (first = our B (n,k) row-major viewed as (k,n) col-major, op T), one config
static void raw(cublasLtHandle_t h, int m, int n, int k, cudaDataType_t ct, float beta, int scales, int fast, void *ws) {
  cublasLtMatmulDesc_t d; cublasLtMatrixLayout_t la, lb, lc;
  cublasOperation_t T = CUBLAS_OP_T, N = CUBLAS_OP_N;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &N, sizeof N);
  float *one = (float *)dz(8); float o[2] = {1, 1}; cudaMemcpy(one, o, 8, cudaMemcpyHostToDevice);
  float *p1 = one + 1;
  if (scales) { cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one, sizeof one);
                cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p1, sizeof p1); }
  if (fast) { int8_t f = 1; cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof f); }
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n, k);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, m, k);
  cublasLtMatrixLayoutCreate(&lc, ct, n, m, n);
  cublasLtMatmulPreference_t pref; size_t wsb = 32 << 20; cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  cublasLtMatmulHeuristicResult_t r[4]; int found = 0;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, lc, lc, pref, 4, r, &found);
  void *A = dz((size_t)n * k), *B = dz((size_t)m * k), *C = dz((size_t)m * n * 4);
  float alpha = 1;
  int ok[4] = {-1, -1, -1, -1};
  for (int i = 0; i < found && i < 4; i++)
    ok[i] = cublasLtMatmul(h, d, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &r[i].algo, ws, wsb, 0);
  cudaError_t ce = cudaDeviceSynchronize();
  printf("raw m=%d n=%d k=%d C=%s beta=%g scales=%d fast=%d: heuristic %d found %d, matmul %d %d %d %d, sync %s\n", m, n, k,
         ct == CUDA_R_32F ? "fp32" : "bf16", beta, scales, fast, (int)hs, found, ok[0], ok[1], ok[2], ok[3],
         cudaGetErrorString(ce));
  cudaFree(A); cudaFree(B); cudaFree(C);
}
int main() {
  cublasLtHandle_t h; cublasLtCreate(&h);
  printf("cublasLt version %zu, cudart %zu\n", cublasLtGetVersion(), cublasLtGetCudartVersion());
  void *ws = dz(32 << 20);
  int shapes[][3] = {{32, 48, 64}, {64, 64, 64}, {128, 128, 128}, {256, 256, 256}, {1024, 1024, 1024}, {32, 48, 8192}, {4096, 64, 64}};
  for (auto &s : shapes)
    for (int ct = 0; ct < 2; ct++)
      for (int b = 0; b < 2; b++)
        raw(h, s[0], s[1], s[2], ct ? CUDA_R_16BF : CUDA_R_32F, (float)b, 1, 0, ws);
  raw(h, 32, 48, 64, CUDA_R_32F, 1, 0, 0, ws);
  raw(h, 32, 48, 64, CUDA_R_32F, 1, 1, 1, ws);
  raw(h, 256, 256, 256, CUDA_R_32F, 1, 0, 1, ws);
  float *inv = (float *)dz(8); float o[2] = {1, 1}; cudaMemcpy(inv, o, 8, cudaMemcpyHostToDevice);
  for (auto &s : shapes)
    for (int ct = 0; ct < 2; ct++)
      for (int b = 0; b < 2; b++)
        for (int e5 = 0; e5 < 2; e5++) {
          void *A = dz((size_t)s[0] * s[2]), *B = dz((size_t)s[1] * s[2]), *C = dz((size_t)s[0] * s[1] * 4);
          px_status st = px_kc_gemm_fp8(h, C, (uint8_t *)A, (uint8_t *)B, inv, inv + 1, s[0], s[1], s[2], e5, false,
                                        1.0f, (float)b, ct ? PX_DTYPE_BF16 : PX_DTYPE_FP32, ws, 32 << 20, 0);
          cudaError_t ce = cudaDeviceSynchronize();
          printf("px m=%d n=%d k=%d C=%s beta=%d a_e5m2=%d: %d %s %s\n", s[0], s[1], s[2], ct ? "bf16" : "fp32", b, e5,
                 (int)st, st ? px_kc_last_error() : "", cudaGetErrorString(ce));
          cudaFree(A); cudaFree(B); cudaFree(C);
        }
  return 0;
}
