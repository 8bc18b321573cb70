/* The one symbol libparallax_cuda.so exports: the CUDA backend's entry points. */
#include "exec/cuda/module.h"

#include "exec/cuda/backend.h"
#include "exec/cuda/calibrate.h"

__attribute__((visibility("default"))) const px_cuda_module px_cuda_module_table = {
    .h = {.version = PX_VERSION, .abi = PX_CUDA_MODULE_ABI},
    .device_count = px_cuda_device_count,
    .device_name = px_cuda_device_name,
    .backend_new = px_cuda_backend_new,
    .calibrate = px_cuda_calibrate,
};
