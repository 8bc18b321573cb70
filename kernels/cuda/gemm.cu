/* cuBLASLt matrix multiply with the CPU's row-major convention, bias and GELU
 * epilogues, and the linear layer. */
#include "kernels/cuda/gemm.h"

#include <string.h>

#include "kernels/math.h"

#define LT_TRY(expr)                                                                           \
  do {                                                                                         \
    cublasStatus_t lts_ = (expr);                                                              \
    if (lts_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      st = px_kc_fail(__FILE__, __LINE__, "%s: %s", #expr, cublasLtGetStatusString(lts_));     \
      goto done;                                                                               \
    }                                                                                          \
  } while (0)

/* A failure while cleaning up, reported unless an earlier one is. */
static void keep_first(px_status *st, cublasStatus_t s, int line, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS && *st == PX_OK) *st = px_kc_fail(__FILE__, line, "%s: %s", what, cublasLtGetStatusString(s));
}

/* Largest power of two (up to 256) dividing the address: what cuBLASLt may assume. */
static uint32_t alignment(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

/* C = beta C + bias when the product is empty (k <= 0); beta = 0 does not read C. */
template <typename T>
static __global__ void empty_product_kernel(T *c, const T *bias, int64_t m, int64_t n, float beta) {
  PX_KC_FOR(idx, m * n) {
    float v = beta == 0.0f ? 0.0f : beta * px_kc_ld(c + idx);
    if (bias) v += px_kc_ld(bias + idx % n);
    px_kc_st(c + idx, v);
  }
}

static px_status empty_product(void *c, const void *bias, int64_t m, int64_t n, float beta, px_dtype c_dtype,
                               cudaStream_t stream) {
  unsigned blocks = px_kc_blocks(m * n, PX_KC_THREADS);
  if (c_dtype == PX_DTYPE_BF16) {
    empty_product_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_bf16 *)c, (const px_bf16 *)bias, m, n, beta);
  } else if (c_dtype == PX_DTYPE_FP16) {
    empty_product_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((__half *)c, (const __half *)bias, m, n, beta);
  } else {
    empty_product_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)c, (const float *)bias, m, n, beta);
  }
  return PX_KC_LAUNCHED("empty_product_kernel");
}

/* A GELU epilogue cuBLASLt did not run: GELU: c = gelu(aux) (aux holds the
 * product + bias); DGELU: c *= gelu'(aux). */
template <typename T>
static __global__ void epilogue_kernel(T *c, const T *aux, int64_t count, bool dgelu) {
  PX_KC_FOR(idx, count) {
    float pre = px_kc_ld(aux + idx);
    px_kc_st(c + idx, dgelu ? px_kc_ld(c + idx) * px_gelu_grad(pre) : px_gelu(pre));
  }
}

static px_status epilogue_apply(void *c, const void *aux, int64_t count, bool dgelu, px_dtype c_dtype,
                                cudaStream_t stream) {
  unsigned blocks = px_kc_blocks(count, PX_KC_THREADS);
  if (c_dtype == PX_DTYPE_BF16) {
    epilogue_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_bf16 *)c, (const px_bf16 *)aux, count, dgelu);
  } else if (c_dtype == PX_DTYPE_FP16) {
    epilogue_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((__half *)c, (const __half *)aux, count, dgelu);
  } else {
    epilogue_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)c, (const float *)aux, count, dgelu);
  }
  return PX_KC_LAUNCHED("epilogue_kernel");
}

/* ---- matmul plans: descriptors and the heuristic's choice, kept per shape ---- */

/* Everything the descriptors and the algorithm depend on (not the pointers:
 * their alignments, and whether there is a bias). */
typedef struct {
  cublasLtHandle_t handle;
  int64_t m, n, k;
  bool trans_a, trans_b, bias;
  px_kc_epilogue epi;
  px_dtype ab, c;
  int f8; /* fp8 operands: 0 none, else 1 + (A E5M2) + 2 (B E5M2) + 4 (fast accumulation) */
  uint32_t al_a, al_b, al_c, al_bias, al_aux;
  size_t workspace_bytes;
} plan_key;

typedef struct {
  plan_key key;
  bool used;
  bool no_epilogue; /* the heuristic had nothing for key.epi: the plan is for the plain product */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t first, second, cl;
  cublasLtMatmulAlgo_t algo;
} gemm_plan;

#define GEMM_PLANS 128 /* a model's distinct GEMM shapes: a few dozen */
static gemm_plan plans[GEMM_PLANS];
static int next_victim;
static uint64_t plan_hits, plan_misses;

static bool same_key(const plan_key *x, const plan_key *y) {
  return x->handle == y->handle && x->m == y->m && x->n == y->n && x->k == y->k && x->trans_a == y->trans_a &&
         x->trans_b == y->trans_b && x->bias == y->bias && x->epi == y->epi && x->ab == y->ab && x->c == y->c &&
         x->f8 == y->f8 && x->al_a == y->al_a && x->al_b == y->al_b && x->al_c == y->al_c && x->al_bias == y->al_bias &&
         x->al_aux == y->al_aux && x->workspace_bytes == y->workspace_bytes;
}

static px_status plan_release(gemm_plan *g) {
  px_status st = PX_OK;
  if (g->cl) keep_first(&st, cublasLtMatrixLayoutDestroy(g->cl), __LINE__, "cublasLtMatrixLayoutDestroy");
  if (g->second) keep_first(&st, cublasLtMatrixLayoutDestroy(g->second), __LINE__, "cublasLtMatrixLayoutDestroy");
  if (g->first) keep_first(&st, cublasLtMatrixLayoutDestroy(g->first), __LINE__, "cublasLtMatrixLayoutDestroy");
  if (g->desc) keep_first(&st, cublasLtMatmulDescDestroy(g->desc), __LINE__, "cublasLtMatmulDescDestroy");
  memset(g, 0, sizeof *g);
  return st;
}

/* The epilogue attribute for a plan's bias and GELU epilogue. */
static cublasLtEpilogue_t epilogue_of(bool bias, px_kc_epilogue epi) {
  if (epi == PX_KC_EPI_GELU) return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (epi == PX_KC_EPI_DGELU) return CUBLASLT_EPILOGUE_DGELU;
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/* Builds the descriptors and asks the heuristic (its first choice, told the
 * operands' real alignment so unaligned slices get a kernel that runs on them);
 * bias and aux: this call's, set before the heuristic as cuBLASLt wants. With
 * a GELU epilogue the heuristic may find nothing: the plan is then made again
 * for the plain product, marked no_epilogue. */
static px_status plan_make(gemm_plan *g, const plan_key *key, const void *bias, const void *aux, const float *sa,
                           const float *sb) {
  px_status st = PX_OK;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t heur;
  cublasStatus_t hs = CUBLAS_STATUS_SUCCESS;
  int found = 0;
  cudaDataType_t ab_type = key->ab == PX_DTYPE_BF16 ? CUDA_R_16BF : key->ab == PX_DTYPE_FP16 ? CUDA_R_16F : CUDA_R_32F;
  cudaDataType_t c_type = key->c == PX_DTYPE_BF16 ? CUDA_R_16BF : key->c == PX_DTYPE_FP16 ? CUDA_R_16F : CUDA_R_32F;
  cublasComputeType_t compute = key->ab == PX_DTYPE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  /* fp8: cuBLAS's first operand is our B */
  cudaDataType_t first_type = ab_type, second_type = ab_type;
  if (key->f8) {
    first_type = ((key->f8 - 1) & 2) ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    second_type = ((key->f8 - 1) & 1) ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
  }
  cublasOperation_t op_first = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLAS's A is our B */
  cublasOperation_t op_second = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  int64_t m = key->m, n = key->n, k = key->k;
  memset(g, 0, sizeof *g);
  g->key = *key;
  LT_TRY(cublasLtMatmulDescCreate(&g->desc, compute, CUDA_R_32F));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  if (key->bias || key->epi != PX_KC_EPI_NONE) {
    cublasLtEpilogue_t epi = epilogue_of(key->bias, key->epi); /* bias[row] of column-major D = bias[j] of our C */
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  }
  if (key->bias) LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (key->f8) { /* the dequantization factors: cuBLAS's A is our B */
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb));
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa));
  }
  if (key->f8 && ((key->f8 - 1) & 4)) {
    int8_t fast = 1;
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }
  if (key->epi != PX_KC_EPI_NONE) { /* aux is (n, m) column-major like D */
    int64_t ld = n;
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
  }
  /* column-major views: our B (k, n) row-major is (n, k) column-major with ld n, and so on */
  LT_TRY(cublasLtMatrixLayoutCreate(&g->first, first_type, (uint64_t)(key->trans_b ? k : n),
                                    (uint64_t)(key->trans_b ? n : k), key->trans_b ? k : n));
  LT_TRY(cublasLtMatrixLayoutCreate(&g->second, second_type, (uint64_t)(key->trans_a ? m : k),
                                    (uint64_t)(key->trans_a ? k : m), key->trans_a ? m : k));
  LT_TRY(cublasLtMatrixLayoutCreate(&g->cl, c_type, (uint64_t)n, (uint64_t)m, n));
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &key->workspace_bytes,
                                              sizeof key->workspace_bytes));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key->al_b,
                                              sizeof key->al_b));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key->al_a,
                                              sizeof key->al_a));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key->al_c,
                                              sizeof key->al_c));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key->al_c,
                                              sizeof key->al_c));
  hs = cublasLtMatmulAlgoGetHeuristic(key->handle, g->desc, g->first, g->second, g->cl, g->cl, pref, 1, &heur, &found);
  if ((hs != CUBLAS_STATUS_SUCCESS || found < 1) && key->epi != PX_KC_EPI_NONE) { /* e.g. NOT_SUPPORTED */
    plan_key plain = *key;
    plain.epi = PX_KC_EPI_NONE;
    plain.al_aux = 0;
    if (key->epi == PX_KC_EPI_GELU && key->al_aux < plain.al_c) plain.al_c = key->al_aux; /* it writes aux */
    cublasLtMatmulPreferenceDestroy(pref);
    pref = NULL;
    plan_release(g);
    st = plan_make(g, &plain, bias, NULL, NULL, NULL);
    g->key = *key;
    g->no_epilogue = true;
    return st;
  }
  LT_TRY(hs);
  if (found < 1) {
    st = px_kc_fail(__FILE__, __LINE__, "gemm: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld types %d/%d",
                    (long long)m, (long long)n, (long long)k, (int)key->ab, (int)key->c);
    goto done;
  }
  g->algo = heur.algo;
  g->used = true;
done:
  if (pref) keep_first(&st, cublasLtMatmulPreferenceDestroy(pref), __LINE__, "cublasLtMatmulPreferenceDestroy");
  if (st) plan_release(g);
  return st;
}

/* The plan for key: a kept one, or a new one in place of the oldest. */
static px_status plan_for(const plan_key *key, const void *bias, const void *aux, const float *sa, const float *sb,
                          gemm_plan **out) {
  for (int i = 0; i < GEMM_PLANS; i++)
    if (plans[i].used && same_key(&plans[i].key, key)) {
      plan_hits++;
      *out = &plans[i];
      return PX_OK;
    }
  plan_misses++;
  gemm_plan *g = &plans[next_victim];
  next_victim = (next_victim + 1) % GEMM_PLANS;
  px_status st = g->used ? plan_release(g) : PX_OK;
  if (!st) st = plan_make(g, key, bias, aux, sa, sb);
  *out = g;
  return st;
}

extern "C" void px_kc_gemm_plan_stats(uint64_t *hits, uint64_t *misses) {
  *hits = plan_hits;
  *misses = plan_misses;
}

extern "C" px_status px_kc_gemm_epi(cublasLtHandle_t handle, void *c, const void *a, const void *b, const void *bias,
                                    void *aux, px_kc_epilogue epi, int64_t m, int64_t n, int64_t k, bool trans_a,
                                    bool trans_b, float alpha, float beta, px_dtype ab_dtype, px_dtype c_dtype,
                                    void *workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (c_dtype == PX_DTYPE_TF32) c_dtype = PX_DTYPE_FP32; /* same storage */
  if (epi != PX_KC_EPI_NONE && (beta != 0.0f || !aux || (epi == PX_KC_EPI_DGELU && bias))) {
    px_kc_fail(__FILE__, __LINE__, "gemm: a GELU epilogue needs beta 0 and aux (and no bias with DGELU)");
    return PX_ERR_INPUT;
  }
  bool ab_half = ab_dtype == PX_DTYPE_BF16 || ab_dtype == PX_DTYPE_FP16;
  if (!(ab_dtype == PX_DTYPE_FP32 || ab_dtype == PX_DTYPE_TF32 || ab_half) ||
      !(c_dtype == PX_DTYPE_FP32 || (c_dtype == ab_dtype && ab_half))) {
    px_kc_fail(__FILE__, __LINE__, "gemm: unsupported types A/B %d, C %d", (int)ab_dtype, (int)c_dtype);
    return PX_ERR_INPUT;
  }
  if (m <= 0 || n <= 0) return PX_OK;
  /* cuBLASLt's GELU epilogues want the aux leading dimension a multiple of 8 and aux 16-byte aligned */
  bool in_gemm = epi == PX_KC_EPI_NONE || (k > 0 && n % 8 == 0 && alignment(aux) >= 16);
  if (!in_gemm) { /* the plain product (pre-activation into aux for GELU), then the epilogue */
    px_status st = px_kc_gemm_epi(handle, epi == PX_KC_EPI_GELU ? aux : c, a, b, bias, NULL, PX_KC_EPI_NONE, m, n, k,
                                  trans_a, trans_b, alpha, beta, ab_dtype, c_dtype, workspace, workspace_bytes, stream);
    return st ? st : epilogue_apply(c, aux, m * n, epi == PX_KC_EPI_DGELU, c_dtype, stream);
  }
  if (k <= 0) return empty_product(c, bias, m, n, beta, c_dtype, stream);
  plan_key key = {handle,  m,           n,           k,           trans_a, trans_b, bias != NULL, epi, ab_dtype,
                  c_dtype, 0, alignment(a), alignment(b), alignment(c), bias ? alignment(bias) : 0,
                  aux ? alignment(aux) : 0, workspace_bytes};
  gemm_plan *g = NULL;
  px_status st = plan_for(&key, bias, aux, NULL, NULL, &g);
  if (st) return st;
  void *target = g->no_epilogue && epi == PX_KC_EPI_GELU ? aux : c;
  if (bias) LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (epi != PX_KC_EPI_NONE && !g->no_epilogue)
    LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  LT_TRY(cublasLtMatmul(handle, g->desc, &alpha, b, g->first, a, g->second, &beta, target, g->cl, target, g->cl,
                        &g->algo, workspace, workspace_bytes, stream));
  if (g->no_epilogue) st = epilogue_apply(c, aux, m * n, epi == PX_KC_EPI_DGELU, c_dtype, stream);
done:
  return st;
}

extern "C" px_status px_kc_gemm_ex(cublasLtHandle_t handle, void *c, const void *a, const void *b, const void *bias,
                                   int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
                                   float beta, px_dtype ab_dtype, px_dtype c_dtype, void *workspace,
                                   size_t workspace_bytes, cudaStream_t stream) {
  return px_kc_gemm_epi(handle, c, a, b, bias, NULL, PX_KC_EPI_NONE, m, n, k, trans_a, trans_b, alpha, beta, ab_dtype,
                        c_dtype, workspace, workspace_bytes, stream);
}

extern "C" px_status px_kc_gemm(cublasLtHandle_t handle, void *c, const void *a, const void *b, int64_t m, int64_t n,
                                int64_t k, bool trans_a, bool trans_b, float alpha, float beta, px_dtype dtype,
                                void *workspace, size_t workspace_bytes, cudaStream_t stream) {
  return px_kc_gemm_ex(handle, c, a, b, NULL, m, n, k, trans_a, trans_b, alpha, beta, dtype, dtype, workspace,
                       workspace_bytes, stream);
}

extern "C" px_status px_kc_gemm_fp8(cublasLtHandle_t handle, void *c, const uint8_t *a, const uint8_t *b,
                                    const float *a_scale, const float *b_scale, int64_t m, int64_t n, int64_t k,
                                    bool a_e5m2, bool b_e5m2, bool fast_accum, float alpha, float beta,
                                    px_dtype c_dtype, void *workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (a_e5m2 && b_e5m2) {
    px_kc_fail(__FILE__, __LINE__, "gemm fp8: E5M2 x E5M2 (cuBLASLt has no such kernel)");
    return PX_ERR_INPUT;
  }
  if (c_dtype != PX_DTYPE_FP32 && c_dtype != PX_DTYPE_BF16) {
    px_kc_fail(__FILE__, __LINE__, "gemm fp8: C of type %d (fp32 or bf16)", (int)c_dtype);
    return PX_ERR_INPUT;
  }
  if (m <= 0 || n <= 0) return PX_OK;
  if (alignment(a_scale) < 16 || alignment(b_scale) < 16) { /* cuBLASLt 13.1 on an H200: NOT_SUPPORTED */
    px_kc_fail(__FILE__, __LINE__, "gemm fp8: the scale factors must be 16-byte aligned (cuBLASLt's fp8 kernels)");
    return PX_ERR_INPUT;
  }
  if (m % 16 || n % 16 || k % 16 || alignment(a) < 16 || alignment(b) < 16 || alignment(c) < 16) {
    px_kc_fail(__FILE__, __LINE__,
               "gemm fp8: m=%lld n=%lld k=%lld must be multiples of 16 and the operands 16-byte aligned (cuBLASLt's "
               "fp8 kernels)", (long long)m, (long long)n, (long long)k);
    return PX_ERR_INPUT;
  }
  plan_key key = {handle, m, n, k, false, true, false, PX_KC_EPI_NONE, PX_DTYPE_FP8, c_dtype,
                  1 + (a_e5m2 ? 1 : 0) + (b_e5m2 ? 2 : 0) + (fast_accum ? 4 : 0), alignment(a), alignment(b),
                  alignment(c), 0, 0,
                  workspace_bytes};
  gemm_plan *g = NULL;
  px_status st = plan_for(&key, NULL, NULL, a_scale, b_scale, &g);
  if (st) return st;
  LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof b_scale));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale));
  LT_TRY(cublasLtMatmul(handle, g->desc, &alpha, b, g->first, a, g->second, &beta, c, g->cl, c, g->cl, &g->algo,
                        workspace, workspace_bytes, stream));
done:
  return st;
}

extern "C" px_status px_kc_linear_fwd(cublasLtHandle_t handle, void *out, const void *inp, const void *weight,
                                      const void *bias, int64_t n, int64_t ic, int64_t oc, px_dtype dtype,
                                      void *workspace, size_t workspace_bytes, cudaStream_t stream) {
  return px_kc_gemm_ex(handle, out, inp, weight, bias, n, oc, ic, false, true, 1.0f, 0.0f, dtype, dtype, workspace,
                       workspace_bytes, stream);
}

/* dbias term: dout[i, j] */
template <typename T>
struct dout_term {
  const T *dout;
  int64_t oc;
  __device__ float operator()(int64_t i, int64_t j) const { return px_kc_ld(dout + i * oc + j); }
};

extern "C" px_status px_kc_linear_bwd(cublasLtHandle_t handle, void *dinp, void *dweight, void *dbias,
                                      const void *dout, const void *inp, const void *weight, int64_t n, int64_t ic,
                                      int64_t oc, px_dtype dtype, void *workspace, size_t workspace_bytes,
                                      cudaStream_t stream) {
  px_status st = PX_OK;
  if (dinp)
    st = px_kc_gemm(handle, dinp, dout, weight, n, ic, oc, false, false, 1.0f, 1.0f, dtype, workspace,
                    workspace_bytes, stream);
  if (st == PX_OK && dweight)
    st = px_kc_gemm(handle, dweight, dout, inp, oc, ic, n, true, false, 1.0f, 1.0f, dtype, workspace,
                    workspace_bytes, stream);
  if (st == PX_OK && dbias) {
    if (dtype == PX_DTYPE_BF16) {
      st = px_kc_colsum((px_bf16 *)dbias, n, oc, dout_term<px_bf16>{(const px_bf16 *)dout, oc}, stream);
    } else if (dtype == PX_DTYPE_FP16) {
      st = px_kc_colsum((__half *)dbias, n, oc, dout_term<__half>{(const __half *)dout, oc}, stream);
    } else {
      st = px_kc_colsum((float *)dbias, n, oc, dout_term<float>{(const float *)dout, oc}, stream);
    }
  }
  return st;
}
