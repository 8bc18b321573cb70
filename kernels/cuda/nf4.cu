/* NF4 decode on the GPU (kernels/cuda/nf4.h). */
#include "kernels/cuda/nf4.h"

#include <string.h>

#include "kernels/cpu/nf4.h" /* the storage's layout (header-only) */

/* The fp32 stored little-endian at p, at any alignment (as the CPU's memcpy reads it). */
static __device__ __forceinline__ float load_f32(const uint8_t *p) {
  uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* a x b + c rounded after each operation, as the CPU computes it: nvcc would fuse it into one fma. */
static __device__ __forceinline__ float mul_add_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(__fmul_rn(a, b), c);
#else /* the emulator (g++): a volatile product is rounded to fp32 before the sum */
  volatile float p = a * b;
  return p + c;
#endif
}

/* One element per thread (a grid-stride loop). The tables are copied to shared memory: the 4-bit codes index
 * values[] differently in each lane, which reads from the kernel's parameters would serialise. */
template <typename T>
static __global__ void unpack_kernel(T *out, const uint8_t *storage, int64_t n, px_nf4_layout l, px_kc_nf4_tables t) {
  __shared__ float values[16], map[256];
  for (int j = threadIdx.x; j < 256; j += blockDim.x) map[j] = t.map[j];
  for (int j = threadIdx.x; j < 16; j += blockDim.x) values[j] = t.values[j];
  __syncthreads();
  const float offset = load_f32(storage + l.offset_at);
  PX_KC_FOR(i, n) {
    int64_t b = i / PX_NF4_BLOCK;
    float c = load_f32(storage + l.consts_at + 4 * (uint64_t)(b / PX_NF4_DQ_BLOCK));
    float absmax = mul_add_rn(map[storage[l.absmax_at + (uint64_t)b]], c, offset);
    uint8_t q = i % 2 == 0 ? storage[i / 2] >> 4 : storage[i / 2] & 0xf;
    px_kc_st(out + i, values[q] * absmax);
  }
}

extern "C" px_status px_kc_nf4_unpack(void *out, const uint8_t *storage, px_dtype dtype, int64_t n,
                                      const px_kc_nf4_tables *tables, cudaStream_t stream) {
  if (n <= 0) return PX_OK;
  px_nf4_layout l = px_k_nf4_layout((uint64_t)n);
  px_kc_nf4_tables t = *tables; /* by value into the launch (the emulator's runs after the caller's returns) */
  unsigned blocks = px_kc_blocks(n, PX_KC_THREADS);
  if (dtype == PX_DTYPE_FP32)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((float *)out, storage, n, l, t);
  else if (dtype == PX_DTYPE_BF16)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_bf16 *)out, storage, n, l, t);
  else if (dtype == PX_DTYPE_FP16)
    unpack_kernel<<<blocks, PX_KC_THREADS, 0, stream>>>((px_fp16 *)out, storage, n, l, t);
  else
    return px_kc_fail(__FILE__, __LINE__, "nf4: no kernel for %s elements (fp32, bf16 and fp16)",
                      px_dtype_names[dtype]);
  return PX_KC_LAUNCHED("unpack_kernel");
}
