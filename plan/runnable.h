/* Which backend of the executor runs a plan: the rules that follow from the
 * plan's choices and its model alone, in one place. The executor asks them
 * first when it checks a plan (exec/support.c), before it asks the backend
 * about each op (supports_op: the op-level limits, such as MPI's int counts);
 * `sweep --runnable-by cpu|cuda`, `plan`'s verdict and the parity matrix
 * (tests/parity) read them without running anything. */
#ifndef PX_PLAN_RUNNABLE_H
#define PX_PLAN_RUNNABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "plan/model.h"
#include "plan/parallel.h"

typedef enum { PX_RUN_CPU, PX_RUN_CUDA, PX_RUN_BACKEND_COUNT } px_run_backend;
extern const char *const px_run_backend_names[PX_RUN_BACKEND_COUNT]; /* "cpu", "cuda" */

/* The backend named `name`, or -1 when none is. */
int px_run_backend_of(const char *name);

/* Whether backend b runs the plan of p (resolved: px_parallel_resolve) on
 * model m as planned; false with the reason in why (cap bytes; fields named,
 * a hint where one helps). The cuda backend's rules are those of every GPU
 * with fp8 tensor cores (fp8 needs compute capability 8.9, which the run
 * checks on its device). */
bool px_runnable(px_run_backend b, const px_parallel *p, const px_model *m, char *why, size_t cap);

/* The cuda backend's refusal of fp8_attention: px_runnable's of the plan, and supports_op's of each flagged
 * fused attention op (exec/cuda/ops.c). */
#define PX_RUNNABLE_CUDA_FP8_ATTENTION                                                                             \
  "fp8 attention (`fp8_attention`): the cuda backend does not drive cuDNN's FP8 attention yet (hint: drop "      \
  "`fp8_attention`, or `backend` cpu emulates it)"

/* nvfp4's refusal of a cast of rows not a multiple of 16 (Transformer Engine's NVFP4Quantizer.is_quantizable; under
 * sequence parallelism it would all-gather the shards in high precision and cast the whole, which the cpu backend
 * does not emulate): px_runnable's of the plan, the cpu backend's of each cast (exec/cpu/fp8.c). */
#define PX_RUNNABLE_NVFP4_RHT "nvfp4's random Hadamard transform takes the tokens 16 at a time"
#define PX_RUNNABLE_NVFP4_RHT_HINT "`mbs` x `seq` a multiple of 16 on a rank, of 16 x `tp` with `sp`"

#endif
