/* The CUDA backend on demand: libparallax_cuda.so is loaded the first time a
 * run asks for the GPU (--backend cuda, or the default backend's probe), so
 * that nothing else loads cudart, cuBLASLt or NCCL. */
#ifndef PX_EXEC_CUDA_LOAD_H
#define PX_EXEC_CUDA_LOAD_H

#include <stdbool.h>

#include "exec/cuda/module.h"

/* The module's table. PX_ERR_INPUT, with a message that starts "no CUDA
 * backend" and says why, when this build has none, the module or a library it
 * needs does not load (naming what is missing), or it is from another build.
 * Where the backend is linked in (PX_CUDA_LINKED: the emulator's build) its
 * table, nothing loaded. */
px_status px_cuda_load(const px_cuda_module **out, px_err *err);

/* Whether a GPU could be used at all: the NVIDIA driver's library
 * (libcuda.so.1, which the CUDA runtime needs) loads. A cheap probe before
 * px_cuda_load for the default backend, whose module and libraries cost
 * about 100 ms and 200 MiB; true where the backend is linked in. */
bool px_cuda_driver_present(void);

#endif
