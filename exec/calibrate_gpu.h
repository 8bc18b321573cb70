/* `parallax calibrate --backend cuda`: one GPU measured through the CUDA
 * backend's own calls (exec/cuda/calibrate.h) into a cluster file: the GEMM
 * table (bf16, and fp8 where the GPU has it) over a grid and the shapes of
 * the plans given, gpu.sustained_share (one GEMM back to back for a while
 * against its burst rate), gpu.attention (the flash kernels' causal forward
 * and backward by sequence length) and gpu.memory_efficiency (a
 * device-to-device copy), each cited as measured on that GPU that day. */
#ifndef PX_EXEC_CALIBRATE_GPU_H
#define PX_EXEC_CALIBRATE_GPU_H

#include "exec/calibrate.h"

/* One process, device 0; out starts as base (its datasheet figures and network). */
px_status px_calibrate_gpu(const px_cluster *base, const px_calib_opts *o, px_cluster *out, px_err *err);

#endif
