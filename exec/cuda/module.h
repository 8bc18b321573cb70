/* The CUDA backend as a module: libparallax_cuda.so (this folder and
 * kernels/cuda, with cudart, cuBLASLt and NCCL) exports one table, which
 * exec/cuda_load.c looks up when a run asks for the GPU. */
#ifndef PX_EXEC_CUDA_MODULE_H
#define PX_EXEC_CUDA_MODULE_H

#include <stdint.h>

#include "core/module.h"
#include "exec/cuda/calibrate.h"
#include "exec/backend.h"
#include "exec/comm.h"

#define PX_CUDA_MODULE_FILE "libparallax_cuda.so"
#define PX_CUDA_MODULE_ENV "PARALLAX_CUDA_MODULE" /* its path, instead of next to the executable */
#define PX_CUDA_MODULE_SYMBOL "px_cuda_module_table"

/* The layout of what crosses between the executor and the module: a module
 * from a build whose structs differ is refused, not run. */
#define PX_CUDA_MODULE_ABI                                                                                     \
  ((uint64_t)sizeof(px_backend) | (uint64_t)sizeof(px_exec_op) << 12 | (uint64_t)sizeof(px_comm) << 24 |       \
   (uint64_t)sizeof(px_env) << 36 | (uint64_t)sizeof(px_op) << 46 | (uint64_t)sizeof(px_slot) << 55) ^       \
      ((uint64_t)sizeof(px_cuda_calib) << 20) /* mixed in: the fields above have no room left */

typedef struct {
  px_module_header h;  /* PX_VERSION, PX_CUDA_MODULE_ABI */
  /* CUDA devices this process can use (0 without a device or a driver) */
  int (*device_count)(void);
  /* device 0's name ("" when none) */
  void (*device_name)(char *buf, size_t cap);
  /* px_cuda_backend_new (exec/cuda/backend.h) */
  px_status (*backend_new)(const px_comm *comm, px_backend **out, px_err *err);
  /* px_cuda_calibrate (exec/cuda/calibrate.h): calibrate --backend cuda's measurements */
  px_status (*calibrate)(px_cuda_calib *c, px_err *err);
} px_cuda_module;

extern const px_cuda_module px_cuda_module_table;

#endif
