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

/* Work on a stream. Every stream but the first one made lags as far as CUDA
 * allows: its work runs only when something waits for it (an event another
 * stream waits on, a synchronize or query, cudaFree), so a dependency a
 * program forgot shows up as stale data instead of passing by luck. */
void px_emu_enqueue(cudaStream_t stream, std::function<void()> work);

#endif
