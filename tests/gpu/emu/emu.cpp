/* CPU emulation behind emu.h: the fiber scheduler, the CUDA runtime calls the
 * kernels and the GPU test make (device memory is host memory), and a model of
 * the cuBLASLt calls of kernels/cuda/gemm.cu. */

/* The cuBLASLt model checks the arguments as the library documents them
 * (layouts against the op shapes, attribute sizes, type combinations, pointer
 * alignment against the preference) and computes the column-major product
 * naively in double. */
#include "emu.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/math.h"
#include "tests/fp8_ref.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ------------------------- fibers ------------------------- */

enum { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

#define EMU_STACK_BYTES (256 * 1024)
#define EMU_MAX_THREADS 1024
#define EMU_MAX_SMEM (227 * 1024) /* an sm_90 block's dynamic shared memory, opted in */

/* A fiber is made once (makecontext) and then runs thread after thread of
 * block after block; switches are GCC's __builtin_setjmp/__builtin_longjmp,
 * which unlike swapcontext make no system call and, unlike longjmp, are not
 * intercepted by AddressSanitizer (which would clear the stack's shadow on
 * every switch); the fiber annotations keep it informed instead. */
typedef void *jump_buf[5];

struct fiber {
  ucontext_t ctx;
  jump_buf jb;
  bool started;
  int state;
  char *stack;
};

static fiber fibers[EMU_MAX_THREADS];
static int nfibers, cur;
static ucontext_t main_ctx;
static jump_buf main_jb;
static const std::function<void()> *cur_body;
static void *dyn_smem; /* the running launch's dynamic shared memory */
static uint64_t warp_slots[EMU_MAX_THREADS / 32][32];
static const void *main_stack_bottom;
static size_t main_stack_size;
static cudaError_t last_error = cudaSuccess;

static void set_coordinates(int linear) {
  threadIdx.x = (unsigned)linear % blockDim.x;
  threadIdx.y = (unsigned)linear / blockDim.x % blockDim.y;
  threadIdx.z = (unsigned)linear / (blockDim.x * blockDim.y);
}

/* The switches are not instrumented: AddressSanitizer would treat each
 * __builtin_longjmp as a no-return call and clear the stack's shadow. */
#define EMU_SWITCH __attribute__((no_sanitize_address, noinline))

/* main -> fiber i */
EMU_SWITCH static void enter(int i) {
  cur = i;
  set_coordinates(i);
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, fibers[i].stack, EMU_STACK_BYTES);
#endif
  if (!__builtin_setjmp(main_jb)) {
    if (fibers[i].started) __builtin_longjmp(fibers[i].jb, 1);
    fibers[i].started = true;
    swapcontext(&main_ctx, &fibers[i].ctx); /* first entry: never returns here */
  }
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

/* fiber -> main, to come back when the scheduler re-enters it */
EMU_SWITCH static void yield_to_main(int state) {
  int me = cur;
  fibers[me].state = state;
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, main_stack_bottom, main_stack_size);
#endif
  if (!__builtin_setjmp(fibers[me].jb)) __builtin_longjmp(main_jb, 1);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

/* Runs the current launch's body for whichever thread it is entered as, forever. */
static void fiber_main(void) {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &main_stack_bottom, &main_stack_size);
#endif
  for (;;) {
    (*cur_body)();
    yield_to_main(DONE);
  }
}

/* Launch sites (lambda types) known to need no barrier run without fibers:
 * every thread to completion in turn, an order CUDA allows. A barrier reached
 * there after all (a data-dependent one) stops the run: results would be wrong. */
static bool direct;
static bool hit_barrier;

static void barrier(int state) {
  if (direct) {
    fprintf(stderr, "emu: a kernel reached a barrier that an earlier launch from the same site did not\n");
    abort();
  }
  hit_barrier = true;
  yield_to_main(state);
}

void __syncthreads(void) { barrier(AT_BLOCK_BARRIER); }
void px_emu_warp_barrier(void) { barrier(AT_WARP_BARRIER); }
uint64_t *px_emu_warp_slots(void) { return warp_slots[cur / 32]; }
int px_emu_lane(void) { return cur % 32; }

static void deadlock(void) {
  fprintf(stderr, "emu: deadlock in block (%u, %u, %u): threads wait at different barriers:", blockIdx.x, blockIdx.y,
          blockIdx.z);
  int shown = 0;
  for (int i = 0; i < nfibers && shown < 16; i++)
    if (fibers[i].state != DONE) {
      fprintf(stderr, " t%d:%s", i, fibers[i].state == AT_BLOCK_BARRIER ? "__syncthreads" : "warp-shuffle");
      shown++;
    }
  fprintf(stderr, " ...\n");
  abort();
}

static void init_fiber(fiber *f) {
  f->state = RUNNABLE;
  if (f->stack) return;
  f->stack = (char *)malloc(EMU_STACK_BYTES);
  if (!f->stack) abort();
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = EMU_STACK_BYTES;
  f->ctx.uc_link = NULL;
  makecontext(&f->ctx, fiber_main, 0);
}

static void run_block(void) {
  for (int i = 0; i < nfibers; i++) init_fiber(&fibers[i]);
  for (;;) {
    for (int i = 0; i < nfibers; i++)
      if (fibers[i].state == RUNNABLE) enter(i);
    /* everyone is now at a barrier or done: release what can be released */
    int live = 0, at_block = 0;
    for (int i = 0; i < nfibers; i++) {
      live += fibers[i].state != DONE;
      at_block += fibers[i].state == AT_BLOCK_BARRIER;
    }
    if (live == 0) return;
    bool released = false;
    if (at_block == live) {
      for (int i = 0; i < nfibers; i++)
        if (fibers[i].state == AT_BLOCK_BARRIER) fibers[i].state = RUNNABLE;
      released = true;
    } else {
      for (int w = 0; w * 32 < nfibers; w++) {
        int wlive = 0, wat = 0;
        for (int i = w * 32; i < w * 32 + 32 && i < nfibers; i++) {
          wlive += fibers[i].state != DONE;
          wat += fibers[i].state == AT_WARP_BARRIER;
        }
        if (wlive > 0 && wat == wlive) {
          for (int i = w * 32; i < w * 32 + 32 && i < nfibers; i++)
            if (fibers[i].state == AT_WARP_BARRIER) fibers[i].state = RUNNABLE;
          released = true;
        }
      }
    }
    if (!released) deadlock();
  }
}

/* ------------------------- streams ------------------------- */

struct emu_stream {
  std::deque<std::function<void()>> work;
  uint64_t queued = 0, done = 0;
};

static std::unordered_map<uintptr_t, emu_stream> streams;
static uintptr_t nstreams;

static bool lags(cudaStream_t s) { return (uintptr_t)s != 0; }

/* Runs stream s's work up to (not including) its `upto`-th item. */
static void drain(uintptr_t s, uint64_t upto) {
  emu_stream &st = streams[s];
  while (st.done < upto && !st.work.empty()) {
    std::function<void()> w = std::move(st.work.front());
    st.work.pop_front();
    st.done++;
    w();
  }
}

static void drain_all(void) {
  for (auto &kv : streams) drain(kv.first, kv.second.queued);
}

void px_emu_enqueue(cudaStream_t stream, std::function<void()> work) {
  if (!lags(stream)) {
    work();
    return;
  }
  emu_stream &st = streams[(uintptr_t)stream];
  st.work.push_back(std::move(work));
  st.queued++;
}

static void run_launch(px_emu_cfg cfg, const std::function<void()> &body);

void px_emu_launch(px_emu_cfg cfg, const std::function<void()> &body) {
  uint64_t threads = (uint64_t)cfg.block.x * cfg.block.y * cfg.block.z;
  if (threads == 0 || threads > EMU_MAX_THREADS || cfg.block.z > 64 || cfg.grid.x == 0 || cfg.grid.y == 0 ||
      cfg.grid.z == 0 || cfg.grid.x > 0x7fffffffu || cfg.grid.y > 65535 || cfg.grid.z > 65535 ||
      cfg.smem > EMU_MAX_SMEM) {
    last_error = cudaErrorInvalidConfiguration;
    return;
  }
  std::function<void()> copy = body;
  px_emu_enqueue(cfg.stream, [cfg, copy] { run_launch(cfg, copy); });
}

static void run_launch(px_emu_cfg cfg, const std::function<void()> &body) {
  uint64_t threads = (uint64_t)cfg.block.x * cfg.block.y * cfg.block.z;
  blockDim = cfg.block;
  gridDim = cfg.grid;
  nfibers = (int)threads;
  cur_body = &body;
  dyn_smem = cfg.smem ? malloc(cfg.smem) : NULL; /* exactly smem bytes: ASan sees an overrun */
  if (cfg.smem && !dyn_smem) abort();
  static std::unordered_map<size_t, bool> needs_fibers; /* by launch site */
  size_t site = body.target_type().hash_code();
  auto known = needs_fibers.find(site);
  direct = known != needs_fibers.end() && !known->second;
  hit_barrier = false;
  for (unsigned z = 0; z < cfg.grid.z; z++)
    for (unsigned y = 0; y < cfg.grid.y; y++)
      for (unsigned x = 0; x < cfg.grid.x; x++) {
        blockIdx.x = x;
        blockIdx.y = y;
        blockIdx.z = z;
        if (!direct) {
          run_block();
          continue;
        }
        for (int i = 0; i < nfibers; i++) {
          cur = i;
          set_coordinates(i);
          body();
        }
      }
  if (!direct) needs_fibers[site] = hit_barrier;
  direct = false;
  free(dyn_smem);
  dyn_smem = NULL;
}

void *px_emu_dynamic_smem(void) { return dyn_smem; }

/* ------------------------- CUDA runtime ------------------------- */

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }

/* The only attribute the kernels set: their dynamic shared memory limit. */
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
  if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > EMU_MAX_SMEM)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

/* One device, or PX_EMU_DEVICES of them (the backend's NCCL path wants one per rank). */
cudaError_t cudaGetDeviceCount(int *count) {
  const char *env = getenv("PX_EMU_DEVICES");
  *count = env && atoi(env) > 0 ? atoi(env) : 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  int n = 0;
  cudaGetDeviceCount(&n);
  return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

/* The emulated device's compute capability: 9.0 (an H100), or PX_EMU_CC
 * ("8.0": an A100, which has no fp8 tensor cores). */
static void px_emu_capability(int *major, int *minor) {
  const char *env = getenv("PX_EMU_CC");
  *major = 9, *minor = 0;
  if (env && sscanf(env, "%d.%d", major, minor) < 1) *major = 9, *minor = 0;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  (void)device;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "CPU emulation (tests/gpu/emu)");
  px_emu_capability(&prop->major, &prop->minor);
  return cudaSuccess;
}

/* Exactly `bytes` (256-aligned, like cudaMalloc), so AddressSanitizer sees a
 * kernel's access one past the end. */
cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = NULL;
  if (posix_memalign(p, 256, bytes ? bytes : 1) != 0) return cudaErrorMemoryAllocation;
  return cudaSuccess;
}

/* Host memory has no device total: an 80 GiB device, or PX_EMU_MEMORY_MIB, all of it free. */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  const char *env = getenv("PX_EMU_MEMORY_MIB");
  *free_bytes = *total_bytes = env && atof(env) > 0 ? (size_t)(atof(env) * 1048576.0) : (size_t)80 << 30;
  return cudaSuccess;
}

/* A host function in stream order. */
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *data) {
  px_emu_enqueue(stream, [fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  drain_all(); /* cudaFree waits for the device */
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream) {
  (void)stream;
  return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  px_emu_enqueue(stream, [p] { free(p); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
  px_emu_enqueue(stream, [=] { memset(p, value, bytes); });
  return cudaSuccess;
}

/* Synchronous, but not with the (non-blocking) streams the tool makes. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  (void)kind;
  memmove(dst, src, bytes);
  return cudaSuccess;
}

/* From pageable host memory the copy is staged before the call returns: take the bytes now. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind == cudaMemcpyHostToDevice && lags(stream)) {
    std::shared_ptr<std::vector<char>> staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + bytes);
    px_emu_enqueue(stream, [=] { memmove(dst, staged->data(), bytes); });
    return cudaSuccess;
  }
  px_emu_enqueue(stream, [=] { memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags;
  *stream = (cudaStream_t)++nstreams;
  streams[nstreams];
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  drain((uintptr_t)stream, streams[(uintptr_t)stream].queued);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  drain((uintptr_t)stream, streams[(uintptr_t)stream].queued);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  drain_all();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) { return cudaStreamSynchronize(stream); }

/* An event is a position in a stream's work. */
struct CUevent_st {
  uintptr_t stream;
  uint64_t mark;
};

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags) {
  (void)flags;
  *ev = new CUevent_st{0, 0};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  delete ev;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream) {
  if (!ev) return cudaErrorInvalidResourceHandle;
  ev->stream = (uintptr_t)stream;
  ev->mark = lags(stream) ? streams[(uintptr_t)stream].queued : 0;
  return cudaSuccess;
}

/* Work on `stream` after this call starts once the event's stream got there. */
/* The host waits until the event's stream has run its work up to the record. */
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  if (!ev) return cudaErrorInvalidResourceHandle;
  if (lags((cudaStream_t)ev->stream)) drain(ev->stream, ev->mark);
  return cudaSuccess;
}

/* Page-locked host memory is host memory. */
cudaError_t cudaMallocHost(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p) {
  drain_all();
  free(p);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t ev, unsigned int flags) {
  (void)flags;
  if (!ev) return cudaErrorInvalidResourceHandle;
  uintptr_t s = ev->stream;
  uint64_t mark = ev->mark;
  if (lags((cudaStream_t)s)) px_emu_enqueue(stream, [s, mark] { drain(s, mark); });
  return cudaSuccess;
}

/* ------------------------- cuBLASLt model ------------------------- */

struct emu_desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transa, transb;
  uint32_t epilogue;
  const void *bias;
  void *aux; /* GELU_AUX writes the pre-activation there, DGELU reads it */
  int64_t aux_ld;
  const float *scale_a, *scale_b; /* fp8: the operands' dequantization factors (device floats), NULL: 1 */
};

struct emu_layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};

struct emu_pref {
  uint64_t workspace;
  uint32_t align[4]; /* A, B, C, D */
};

struct cublasLtContext {
  int unused;
};

#define LT_FAIL(...)                         \
  do {                                       \
    fprintf(stderr, "emu cuBLASLt: ");       \
    fprintf(stderr, __VA_ARGS__);            \
    fprintf(stderr, "\n");                   \
    return CUBLAS_STATUS_INVALID_VALUE;      \
  } while (0)

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated failure"; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
  emu_desc *e = new emu_desc();
  e->compute = compute;
  e->scale = scale;
  e->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  *d = (cublasLtMatmulDesc_t)e;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete (emu_desc *)d;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes) {
  emu_desc *e = (emu_desc *)d;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      if (bytes != sizeof(int32_t)) LT_FAIL("TRANS attribute of %zu bytes", bytes);
      int32_t v;
      memcpy(&v, buf, sizeof v);
      if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) LT_FAIL("TRANS %d", v);
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? e->transa : e->transb) = v;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      if (bytes != sizeof(uint32_t)) LT_FAIL("EPILOGUE attribute of %zu bytes", bytes);
      memcpy(&e->epilogue, buf, sizeof e->epilogue);
      if (e->epilogue != CUBLASLT_EPILOGUE_DEFAULT && e->epilogue != CUBLASLT_EPILOGUE_BIAS &&
          e->epilogue != CUBLASLT_EPILOGUE_GELU_AUX && e->epilogue != CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
          e->epilogue != CUBLASLT_EPILOGUE_DGELU)
        LT_FAIL("epilogue %u not modelled", e->epilogue);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      if (bytes != sizeof(void *)) LT_FAIL("EPILOGUE_AUX_POINTER attribute of %zu bytes", bytes);
      memcpy(&e->aux, buf, sizeof e->aux);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      if (bytes != sizeof(int64_t)) LT_FAIL("EPILOGUE_AUX_LD attribute of %zu bytes", bytes);
      memcpy(&e->aux_ld, buf, sizeof e->aux_ld);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (bytes != sizeof(void *)) LT_FAIL("BIAS_POINTER attribute of %zu bytes", bytes);
      memcpy(&e->bias, buf, sizeof e->bias);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
      if (bytes != sizeof(void *)) LT_FAIL("A/B_SCALE_POINTER attribute of %zu bytes", bytes);
      memcpy(attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ? &e->scale_a : &e->scale_b, buf, sizeof e->scale_a);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: /* a speed setting: the emulation sums exactly either way */
      if (bytes != sizeof(int8_t)) LT_FAIL("FAST_ACCUM attribute of %zu bytes", bytes);
      return CUBLAS_STATUS_SUCCESS;
    default:
      LT_FAIL("matmul attribute %d not modelled", (int)attr);
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF && type != CUDA_R_16F && type != CUDA_R_8F_E4M3 && type != CUDA_R_8F_E5M2)
    LT_FAIL("type %d not modelled", (int)type);
  if (ld < (int64_t)rows || ld < 1) LT_FAIL("ld %lld < rows %llu (column-major)", (long long)ld, (unsigned long long)rows);
  emu_layout *e = new emu_layout{type, rows, cols, ld};
  *l = (cublasLtMatrixLayout_t)e;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete (emu_layout *)l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  emu_pref *e = new emu_pref{0, {256, 256, 256, 256}};
  *p = (cublasLtMatmulPreference_t)e;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete (emu_pref *)p;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes) {
  emu_pref *e = (emu_pref *)p;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      if (bytes != sizeof(uint64_t)) LT_FAIL("MAX_WORKSPACE_BYTES of %zu bytes", bytes);
      memcpy(&e->workspace, buf, sizeof e->workspace);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      if (bytes != sizeof(uint32_t)) LT_FAIL("MIN_ALIGNMENT of %zu bytes", bytes);
      memcpy(&e->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, sizeof(uint32_t));
      return CUBLAS_STATUS_SUCCESS;
    default:
      LT_FAIL("preference attribute %d not modelled", (int)attr);
  }
}

/* op(X) of a column-major layout: rows and columns after the transpose */
static void op_shape(const emu_layout *l, int32_t op, uint64_t *r, uint64_t *c) {
  *r = op == CUBLAS_OP_N ? l->rows : l->cols;
  *c = op == CUBLAS_OP_N ? l->cols : l->rows;
}

static bool gelu_epilogue(const emu_desc *d) {
  return d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         d->epilogue == CUBLASLT_EPILOGUE_DGELU;
}

static bool is_fp8(cudaDataType t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

static size_t type_bytes(cudaDataType t) { return t == CUDA_R_32F ? 4 : is_fp8(t) ? 1 : 2; }

/* cuBLASLt's fp8 rules (cublasLtMatmul's documentation, "FP8"), as the
 * strictest of the devices that have fp8: a device of compute capability
 * 8.9 or more; A and B fp8, not both E5M2; CUBLAS_COMPUTE_32F and fp32
 * scales; A transposed and B not ("TN": Ada and Hopper take no other
 * layout); leading dimensions of 16 bytes' multiples (pointers 16-byte
 * aligned: checked at the call). Stricter than the library where this code
 * needs nothing more: C and D of fp32, bf16 or fp16 only (no fp8 output, so
 * no D scale or amax), no epilogue. */
static cublasStatus_t check_fp8(const emu_desc *d, const emu_layout *a, const emu_layout *b, const emu_layout *dl) {
  int major, minor;
  px_emu_capability(&major, &minor);
  if (major * 10 + minor < 89) {
    fprintf(stderr, "emu cuBLASLt: fp8 on a device of compute capability %d.%d (fp8 needs 8.9)\n", major, minor);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (!is_fp8(a->type) || !is_fp8(b->type))
    LT_FAIL("fp8 with a non-fp8 operand (A %d, B %d)", (int)a->type, (int)b->type);
  if (a->type == CUDA_R_8F_E5M2 && b->type == CUDA_R_8F_E5M2) LT_FAIL("fp8: E5M2 x E5M2 has no kernel");
  if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F)
    LT_FAIL("fp8: compute %d, scale type %d", (int)d->compute, (int)d->scale);
  if (d->transa != CUBLAS_OP_T || d->transb != CUBLAS_OP_N)
    LT_FAIL("fp8: layout %s%s, not TN", d->transa == CUBLAS_OP_T ? "T" : "N", d->transb == CUBLAS_OP_T ? "T" : "N");
  if (dl->type != CUDA_R_32F && dl->type != CUDA_R_16BF && dl->type != CUDA_R_16F)
    LT_FAIL("fp8: D of type %d not modelled", (int)dl->type);
  if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT) LT_FAIL("fp8: epilogue %u not modelled", d->epilogue);
  if (a->ld % 16 || b->ld % 16 || (dl->ld * (int64_t)type_bytes(dl->type)) % 16)
    LT_FAIL("fp8: leading dimensions %lld, %lld, %lld are not multiples of 16 bytes", (long long)a->ld, (long long)b->ld,
            (long long)dl->ld);
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t check_problem(const emu_desc *d, const emu_layout *a, const emu_layout *b, const emu_layout *c,
                                    const emu_layout *dl) {
  uint64_t ar, ac, br, bc;
  op_shape(a, d->transa, &ar, &ac);
  op_shape(b, d->transb, &br, &bc);
  if (ar != dl->rows || bc != dl->cols || ac != br)
    LT_FAIL("shapes: op(A) %llux%llu, op(B) %llux%llu, D %llux%llu", (unsigned long long)ar, (unsigned long long)ac,
            (unsigned long long)br, (unsigned long long)bc, (unsigned long long)dl->rows, (unsigned long long)dl->cols);
  if (c->rows != dl->rows || c->cols != dl->cols || c->type != dl->type) LT_FAIL("C and D layouts differ");
  if (is_fp8(a->type) || is_fp8(b->type)) return check_fp8(d, a, b, dl);
  if (a->type != b->type) LT_FAIL("A and B types differ");
  if (d->scale != CUDA_R_32F) LT_FAIL("scale type %d", (int)d->scale);
  bool ok = (d->compute == CUBLAS_COMPUTE_32F && a->type == CUDA_R_32F && dl->type == CUDA_R_32F) ||
            (d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a->type == CUDA_R_32F && dl->type == CUDA_R_32F) ||
            (d->compute == CUBLAS_COMPUTE_32F && (a->type == CUDA_R_16BF || a->type == CUDA_R_16F) &&
             (dl->type == a->type || dl->type == CUDA_R_32F));
  if (!ok) LT_FAIL("type combination compute %d, A/B %d, D %d", (int)d->compute, (int)a->type, (int)dl->type);
  bool with_bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS || d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (with_bias && !d->bias) LT_FAIL("bias epilogue without a bias pointer");
  if (gelu_epilogue(d)) { /* the documented requirements on the auxiliary buffer */
    if (!d->aux) LT_FAIL("GELU epilogue without an aux pointer");
    if (d->aux_ld < (int64_t)dl->rows || d->aux_ld % 8 != 0)
      LT_FAIL("aux ld %lld: at least the %llu rows and a multiple of 8", (long long)d->aux_ld,
              (unsigned long long)dl->rows);
    if ((uintptr_t)d->aux % 16 != 0) LT_FAIL("aux at %p is not 16-byte aligned", d->aux);
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *returned) {
  (void)h;
  *returned = 0;
  if (requested < 1) LT_FAIL("requested %d algorithms", requested);
  cublasStatus_t s = check_problem((emu_desc *)desc, (emu_layout *)a, (emu_layout *)b, (emu_layout *)c, (emu_layout *)d);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  /* PX_EMU_LT_NO_GELU set: no algorithm has the GELU epilogues, as a real library may answer */
  if (gelu_epilogue((emu_desc *)desc) && getenv("PX_EMU_LT_NO_GELU")) return CUBLAS_STATUS_NOT_SUPPORTED;
  memset(&results[0], 0, sizeof results[0]);
  /* the algorithm remembers the alignment it was chosen for */
  const emu_pref *p = (const emu_pref *)pref;
  for (int i = 0; i < 4; i++) results[0].algo.data[i] = p->align[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static double load(const void *p, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return ((const float *)p)[i];
  if (is_fp8(t)) return px_fp8_ref_value(((const uint8_t *)p)[i], t == CUDA_R_8F_E5M2);
  if (t == CUDA_R_16F) return (double)__half2float(((const __half *)p)[i]);
  return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

static void store(void *p, cudaDataType t, int64_t i, double v) {
  if (t == CUDA_R_32F) {
    ((float *)p)[i] = (float)v;
  } else if (t == CUDA_R_16F) {
    ((__half *)p)[i] = __float2half_rn((float)v);
  } else {
    ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v);
  }
}

static void matmul_run(const emu_desc *d, const emu_layout *a, const void *A, const emu_layout *b, const void *B,
                       const emu_layout *c, const void *C, const emu_layout *dl, void *D, float al, float be);

/* Checks the call now, computes in stream order (matmul_run). */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t adesc, const void *B, cublasLtMatrixLayout_t bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t cdesc, void *D,
                              cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  (void)h, (void)workspace, (void)workspace_bytes;
  const emu_desc *d = (const emu_desc *)desc;
  const emu_layout *a = (const emu_layout *)adesc, *b = (const emu_layout *)bdesc, *c = (const emu_layout *)cdesc,
                   *dl = (const emu_layout *)ddesc;
  cublasStatus_t s = check_problem(d, a, b, c, dl);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!algo) LT_FAIL("no algorithm");
  const void *ptrs[4] = {A, B, C, D};
  for (int i = 0; i < 4; i++)
    if (is_fp8(a->type) && (uintptr_t)ptrs[i] % 16 != 0)
      LT_FAIL("fp8: matrix %c at %p is not 16-byte aligned", "ABCD"[i], ptrs[i]);
  /* as an H200's cuBLASLt 13.1 did (bench/gpu/h200-2026-11-28): NOT_SUPPORTED for a scale
   * factor 4 bytes past a 16-byte boundary */
  const float *scales[2] = {d->scale_a, d->scale_b};
  for (int i = 0; i < 2; i++)
    if (is_fp8(a->type) && (uintptr_t)scales[i] % 16 != 0)
      LT_FAIL("fp8: the %c scale factor at %p is not 16-byte aligned", "AB"[i], (const void *)scales[i]);
  for (int i = 0; i < 4; i++)
    if ((uintptr_t)ptrs[i] % algo->data[i] != 0)
      LT_FAIL("matrix %c at %p is less aligned than the %llu bytes the algorithm was chosen for", "ABCD"[i], ptrs[i],
              (unsigned long long)algo->data[i]);
  float al, be;
  memcpy(&al, alpha, sizeof al);
  memcpy(&be, beta, sizeof be);
  /* in stream order, with the descriptors as they are now (a kept plan's pointers change per call) */
  px_emu_enqueue(stream, [=, dd = *d, la = *a, lb = *b, lc = *c, ldd = *dl] {
    matmul_run(&dd, &la, A, &lb, B, &lc, C, &ldd, D, al, be);
  });
  return CUBLAS_STATUS_SUCCESS;
}

static void matmul_run(const emu_desc *d, const emu_layout *a, const void *A, const emu_layout *b, const void *B,
                       const emu_layout *c, const void *C, const emu_layout *dl, void *D, float al, float be) {
  uint64_t m = dl->rows, n = dl->cols, k;
  uint64_t dummy;
  op_shape(a, d->transa, &dummy, &k);
  /* op(A)'s rows [m][k] and op(B)'s columns [n][k] read once each, so that every dot product runs over
   * contiguous doubles (the same sums in the same order as reading them in place) */
  std::vector<double> arow(m * k), bcol(n * k), out(m * n);
  for (uint64_t i = 0; i < m; i++)
    for (uint64_t p = 0; p < k; p++)
      arow[i * k + p] = load(A, a->type, d->transa == CUBLAS_OP_N ? (int64_t)(i + p * a->ld) : (int64_t)(p + i * a->ld));
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t p = 0; p < k; p++)
      bcol[j * k + p] = load(B, b->type, d->transb == CUBLAS_OP_N ? (int64_t)(p + j * b->ld) : (int64_t)(j + p * b->ld));
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t i = 0; i < m; i++) {
      const double *x = arow.data() + i * k, *y = bcol.data() + j * k;
      double sum = 0.0;
      for (uint64_t p = 0; p < k; p++) sum += x[p] * y[p];
      double v = al * sum;
      if (d->scale_a) v *= (double)*d->scale_a; /* fp8's dequantization factors, read in stream order */
      if (d->scale_b) v *= (double)*d->scale_b;
      if (be != 0.0f) v += be * load(C, c->type, (int64_t)(i + j * c->ld));
      if (d->epilogue == CUBLASLT_EPILOGUE_BIAS || d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        v += load(d->bias, dl->type, (int64_t)i);
      int64_t ai = (int64_t)(i + j * (uint64_t)d->aux_ld);
      if (d->epilogue == CUBLASLT_EPILOGUE_DGELU) v *= (double)px_gelu_grad((float)load(d->aux, dl->type, ai));
      if (d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || d->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        store(d->aux, dl->type, ai, v);
        v = (double)px_gelu((float)v);
      }
      out[i + j * m] = v;
    }
  for (uint64_t j = 0; j < n; j++)
    for (uint64_t i = 0; i < m; i++) store(D, dl->type, (int64_t)(i + j * dl->ld), out[i + j * m]);
}
