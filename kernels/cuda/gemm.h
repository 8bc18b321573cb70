/* Matrix multiply on the GPU through cuBLASLt, with the row-major convention of
 * kernels/cpu/gemm.h, and the linear layer built on it (the twins of
 * px_k_gemm, px_k_linear_fwd and px_k_linear_bwd). */
#ifndef PX_KERNELS_CUDA_GEMM_H
#define PX_KERNELS_CUDA_GEMM_H

#include <cublasLt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "kernels/cuda/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C = alpha op(A) op(B) + beta C, all row-major and contiguous, op(X) = X or
 * X^T: op(A) is (m, k) and op(B) is (k, n), so A is stored (m, k), or (k, m)
 * when trans_a; B is stored (k, n), or (n, k) when trans_b. beta = 0 never
 * reads C. dtype is the element type of A, B and C:
 *   PX_DTYPE_FP32  fp32, fp32 math (CUBLAS_COMPUTE_32F: no TF32),
 *   PX_DTYPE_TF32  fp32 storage, TF32 tensor-core math (CUBLAS_COMPUTE_32F_FAST_TF32),
 *   PX_DTYPE_BF16  bf16 storage, fp32 accumulation,
 *   PX_DTYPE_FP16  fp16 storage, fp32 accumulation.
 * alpha and beta are host floats. The workspace (device memory, may be NULL
 * with workspace_bytes 0) is used only on `stream`; 32 MiB suits Hopper. k <= 0
 * gives C = beta C, as on the CPU. Row-major C = op(A) op(B) is computed as
 * the column-major C^T = op(B)^T op(A)^T: B is cuBLAS's first operand. */
px_status px_kc_gemm(cublasLtHandle_t handle,
                     void *c,       // (m, n)
                     const void *a, // (m, k) or (k, m) when trans_a
                     const void *b, // (k, n) or (n, k) when trans_b
                     int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta,
                     px_dtype dtype, void *workspace, size_t workspace_bytes, cudaStream_t stream);

/* px_kc_gemm with a bias epilogue and a separate type for C:
 * C = alpha op(A) op(B) + beta C + bias (bias[j] added to column j of every
 * row; NULL for none). ab_dtype is the type of A and B (FP32, TF32, BF16 or FP16);
 * c_dtype the type of C and bias (FP32, or A's 16-bit type), so a
 * bf16 product can accumulate into fp32 gradients. */
px_status px_kc_gemm_ex(cublasLtHandle_t handle,
                        void *c,          // (m, n)
                        const void *a,    // (m, k) or (k, m) when trans_a
                        const void *b,    // (k, n) or (n, k) when trans_b
                        const void *bias, // (n) or NULL
                        int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta,
                        px_dtype ab_dtype, px_dtype c_dtype, void *workspace, size_t workspace_bytes,
                        cudaStream_t stream);

/* Epilogues past the bias (tanh GELU, as px_gelu in kernels/math.h):
 *   PX_KC_EPI_GELU   C = gelu(product + bias) and aux = product + bias (the
 *                    pre-activation a backward needs);
 *   PX_KC_EPI_DGELU  C = product * gelu'(aux) (no bias).
 * beta must be 0. aux is (m, n) row-major of C's type. cuBLASLt runs them in
 * the GEMM (CUBLASLT_EPILOGUE_GELU_AUX(_BIAS), _DGELU) when n is a multiple of
 * 8 and aux 16-byte aligned, as it requires, and it has an algorithm; otherwise
 * a second kernel applies them to the plain product. */
typedef enum { PX_KC_EPI_NONE, PX_KC_EPI_GELU, PX_KC_EPI_DGELU } px_kc_epilogue;

px_status px_kc_gemm_epi(cublasLtHandle_t handle,
                         void *c,          // (m, n)
                         const void *a,    // (m, k) or (k, m) when trans_a
                         const void *b,    // (k, n) or (n, k) when trans_b
                         const void *bias, // (n) or NULL
                         void *aux,        // (m, n): GELU writes it, DGELU reads it
                         px_kc_epilogue epi, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                         float alpha, float beta, px_dtype ab_dtype, px_dtype c_dtype, void *workspace,
                         size_t workspace_bytes, cudaStream_t stream);

/* px_kc_gemm_ex and _epi keep their cuBLASLt descriptors and the heuristic's
 * algorithm per shape (sizes, transposes, types, bias or not, epilogue,
 * operand alignments, workspace), for the last 128 shapes: a step repeats a few dozen, and the
 * heuristic costs far more host time than the launch. Counts of the calls
 * that found a kept plan and of those that made one (this process, any handle). */
void px_kc_gemm_plan_stats(uint64_t *hits, uint64_t *misses);

/* C = alpha (A B^T) + beta C on fp8 codes, fp32 accumulation
 * (CUBLAS_COMPUTE_32F): A (m, k) and B (n, k) row-major, both K-major, which
 * is cuBLASLt's "TN" layout (its first operand, our B, transposed), the only
 * one its fp8 kernels take on Ada and Hopper. a_e5m2 / b_e5m2: E5M2 codes,
 * else E4M3 (not both E5M2: cuBLASLt has no E5M2 x E5M2 kernel). a_scale,
 * b_scale: device floats, each operand's dequantization factor (1 / the scale
 * its codes were made with; CUBLASLT_MATMUL_DESC_{B,A}_SCALE_POINTER), so C
 * gets alpha a_scale b_scale sum(codes' values). C is FP32 or BF16 (no fp8
 * output, no epilogue). m, n and k must be multiples of 16 and A, B, C and
 * both factors 16-byte aligned (fp8 kernels' requirements: an H200's cuBLASLt
 * 13.1 answers NOT_SUPPORTED for a factor 4 bytes past another); else PX_ERR_INPUT.
 * fast_accum: CUBLASLT_MATMUL_DESC_FAST_ACCUM, Hopper's fp8 sums kept in the
 * tensor cores' own precision (faster, less exact; Transformer Engine and
 * torchao use it for the forward GEMM only); else promoted to fp32 as they go. Plans are
 * kept per shape as px_kc_gemm_ex's. */
px_status px_kc_gemm_fp8(cublasLtHandle_t handle,
                         void *c,          // (m, n) c_dtype
                         const uint8_t *a, // (m, k) fp8 codes
                         const uint8_t *b, // (n, k) fp8 codes
                         const float *a_scale, const float *b_scale, // (1) device each
                         int64_t m, int64_t n, int64_t k, bool a_e5m2, bool b_e5m2, bool fast_accum, float alpha,
                         float beta, px_dtype c_dtype, void *workspace, size_t workspace_bytes, cudaStream_t stream);

/* Linear layer forward: out = inp weight^T + bias (bias may be NULL), every
 * tensor of type dtype. Writes out. */
px_status px_kc_linear_fwd(cublasLtHandle_t handle,
                           void *out,          // (N, OC)
                           const void *inp,    // (N, IC)
                           const void *weight, // (OC, IC)
                           const void *bias,   // (OC) or NULL
                           int64_t n, int64_t ic, int64_t oc, px_dtype dtype, void *workspace,
                           size_t workspace_bytes, cudaStream_t stream);

/* Backward of px_kc_linear_fwd. ACCUMULATES: dinp += dout weight,
 * dweight += dout^T inp, dbias += column sums of dout (deterministic, fp32
 * sums); each of dinp, dweight, dbias may be NULL to skip it. Every tensor of
 * type dtype. */
px_status px_kc_linear_bwd(cublasLtHandle_t handle,
                           void *dinp,         // (N, IC) or NULL
                           void *dweight,      // (OC, IC) or NULL
                           void *dbias,        // (OC) or NULL
                           const void *dout,   // (N, OC)
                           const void *inp,    // (N, IC)
                           const void *weight, // (OC, IC)
                           int64_t n, int64_t ic, int64_t oc, px_dtype dtype, void *workspace,
                           size_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
