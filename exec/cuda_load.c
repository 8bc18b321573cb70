/* Loading the CUDA backend module (exec/cuda/module.h). */
#include "exec/cuda_load.h"

#include <dlfcn.h>

#include "core/module.h"

px_status px_cuda_load(const px_cuda_module **out, px_err *err) {
  *out = NULL;
#if PX_CUDA_LINKED
  *out = &px_cuda_module_table;
  return PX_OK;
#elif !PX_HAVE_CUDA
  return px_err_set(err, PX_ERR_INPUT,
                    "no CUDA backend in this build (nvcc was not found at build time, or PX_CUDA=OFF)");
#else
  const void *t;
  if (px_module_open(PX_CUDA_MODULE_FILE, PX_CUDA_MODULE_ENV, PX_CUDA_MODULE_SYMBOL, PX_CUDA_MODULE_ABI, &t, err))
    return px_err_prefix(err, "no CUDA backend");
  *out = t;
  return PX_OK;
#endif
}

bool px_cuda_driver_present(void) {
#if PX_CUDA_LINKED
  return true;
#else
  /* kept open: the runtime loads it anyway when there is a device */
  return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != NULL;
#endif
}
