/* CPU emulation of the slice of CUDA that kernels/cuda uses, to run the GPU
 * test on a machine without a GPU (tests/gpu/emu/run.sh). */

/* Force-included (-include) before each kernels/cuda .cu file compiled by g++
 * as C++: CUDA threads become fibers of one OS thread, blocks run one after
 * another, __syncthreads and warp shuffles are fiber barriers, __shared__
 * variables are function statics (shared by the block, reused by the next).
 * Not a model of timing, memory coalescing or races: it checks indices, bounds
 * (with AddressSanitizer), barriers (a divergent one aborts) and results. */
#ifndef PX_TESTS_GPU_EMU_H
#define PX_TESTS_GPU_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

/* The CUDA headers give these meanings only nvcc understands. */
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

/* The running fiber's coordinates (set by the scheduler before each switch). */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

/* Block-wide barrier of the live threads of the block. */
void __syncthreads(void);

/* Barrier of the live lanes of the calling thread's warp. */
void px_emu_warp_barrier(void);

/* The calling thread's warp and lane, and its warp's exchange slots. */
uint64_t *px_emu_warp_slots(void);
int px_emu_lane(void);

template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type wider than 64 bits");
  (void)mask;
  uint64_t *slots = px_emu_warp_slots();
  int lane = px_emu_lane();
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  slots[lane] = bits;
  px_emu_warp_barrier(); /* every lane has written */
  uint64_t got = slots[(lane ^ lane_mask) & 31];
  px_emu_warp_barrier(); /* every lane has read: the slots may be reused */
  T r;
  memcpy(&r, &got, sizeof r);
  return r;
}

/* The running launch's dynamic shared memory: its smem bytes, fresh for each
 * launch (shared by its blocks, as static __shared__ variables are). */
void *px_emu_dynamic_smem(void);
#define PX_KC_DYNAMIC_SMEM(type, name) type *name = (type *)px_emu_dynamic_smem()

/* Tensor-core fragments (nvcuda::wmma, m16n16k16). As on the device, a lane
 * holds only its part of a tile: here lane L has row L / 2 and columns
 * (L % 2) * 8 .. + 8 of the accumulator, row L / 2 of A and those columns of
 * B, so a warp does the product once and a lane that reads what another lane
 * stored, without a __syncwarp between, reads stale data. Products of the
 * 16-bit inputs are exact in fp32 and summed in fp32, as on the device (whose
 * order of summation differs). Element access (x[i]) is not emulated. */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has m16n16k16 only");
  float v[16][16]; /* (row, col) of the tile: A is M x K, B is K x N, C is M x N; the lane's part only */
};

/* The lane's rows [r0, r1) and columns [c0, c1) of a fragment of kind Use. */
template <typename Use>
static inline void px_emu_wmma_part(int *r0, int *r1, int *c0, int *c1) {
  int lane = px_emu_lane(), row = lane >> 1, col = (lane & 1) * 8;
  bool a = std::is_same<Use, matrix_a>::value, b = std::is_same<Use, matrix_b>::value;
  *r0 = b ? 0 : row, *r1 = b ? 16 : row + 1;
  *c0 = a ? 0 : col, *c1 = a ? 16 : col + 8;
}

template <typename Use, typename T, typename L>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float x) {
  int r0, r1, c0, c1;
  px_emu_wmma_part<Use>(&r0, &r1, &c0, &c1);
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++) f.v[i][j] = x;
}

static inline float px_emu_wmma_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
static inline float px_emu_wmma_ld(const __half *p) { return __half2float(*p); }

template <typename Use, typename T, typename L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm) {
  bool col = std::is_same<L, col_major>::value;
  int r0, r1, c0, c1;
  px_emu_wmma_part<Use>(&r0, &r1, &c0, &c1);
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++) f.v[i][j] = px_emu_wmma_ld(col ? p + j * ldm + i : p + i * ldm + j);
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float, void> &f, const float *p, unsigned ldm,
                                    layout_t l) {
  int r0, r1, c0, c1;
  px_emu_wmma_part<accumulator>(&r0, &r1, &c0, &c1);
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++) f.v[i][j] = l == mem_col_major ? p[j * ldm + i] : p[i * ldm + j];
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float, void> &f, unsigned ldm,
                                     layout_t l) {
  int r0, r1, c0, c1;
  px_emu_wmma_part<accumulator>(&r0, &r1, &c0, &c1);
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++) (l == mem_col_major ? p[j * ldm + i] : p[i * ldm + j]) = f.v[i][j];
}

template <typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float, void> &d,
                            const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float, void> &c) {
  int r0, r1, c0, c1;
  px_emu_wmma_part<accumulator>(&r0, &r1, &c0, &c1);
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++) {
      float acc = c.v[i][j];
      for (int k = 0; k < 16; k++) acc += a.v[i][k] * b.v[k][j];
      d.v[i][j] = acc;
    }
}
} // namespace wmma
} // namespace nvcuda

/* __syncwarp: the lanes of the warp meet. */
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  px_emu_warp_barrier();
}

/* kernel<<<grid, block, smem, stream>>>(args) is rewritten by run.sh into
 * px_emu_launch(px_emu_config(grid, block, smem, stream), [=] { kernel(args); }). */
struct px_emu_cfg {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};

static inline px_emu_cfg px_emu_config(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
  px_emu_cfg c;
  c.grid = grid;
  c.block = block;
  c.smem = smem;
  c.stream = stream;
  return c;
}

/* Runs body once per thread of every block: now on the first stream made
 * (and the null stream), later on any other (see px_emu_enqueue). An invalid
 * configuration (as CUDA would reject it) is recorded for cudaGetLastError. */
void px_emu_launch(px_emu_cfg cfg, const std::function<void()> &body);

/* Work on a stream. Every stream made (not the legacy default one, 0) lags as
 * far as CUDA allows: its work runs only when something waits for it (an event another
 * stream waits on, a synchronize or query, cudaFree), so a dependency a
 * program forgot shows up as stale data instead of passing by luck. */
void px_emu_enqueue(cudaStream_t stream, std::function<void()> work);

#endif
