/* One GPU measured for `parallax calibrate --backend cuda`: the seconds that
 * the backend's own GEMMs (cuBLASLt, bf16 and fp8; alone, and a few at once on
 * several streams), its flash-attention kernels and a device-to-device copy
 * take, and the rate of one GEMM run back to back for a while (power- and
 * heat-limited clocks). Plain numbers out: the executor's
 * exec/calibrate_gpu.c turns them into cluster-file figures. */
#ifndef PX_EXEC_CUDA_CALIBRATE_H
#define PX_EXEC_CUDA_CALIBRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

/* C = op(A) op(B) as px_kc_gemm_ex takes it (row-major; op(A) (m, k), op(B) (k, n)). */
typedef struct {
  int64_t m, n, k;
  bool trans_a, trans_b; /* bf16 only: fp8 kernels take one layout, A (m, k) and B (n, k) */
  int dtype;             /* PX_DTYPE_BF16 (bf16 out), or PX_DTYPE_FP8: E4M3 codes, per-tensor scales, bf16 out */
  double s;              /* out: seconds per product; 0 when not run (fp8 without fp8 tensor cores, or a
                            dimension that is not a multiple of 16) */
  bool fast_accum;       /* fp8: cuBLASLt's fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) */
} px_cuda_gemm_probe;

/* rows sequences of causal flash attention in one call (px_kc_flash_fwd, or _bwd), bf16, no dropout. */
typedef struct {
  int64_t seq, heads, kv_heads, head_dim, rows;
  bool bwd;
  double s; /* out: seconds for the rows' calls */
} px_cuda_attn_probe;

/* gemms GEMMs of one shape, C_i = A_i B_i^T (A_i (m, k), B_i (n, k), C_i (m, n) bf16 out: each its own), launched
 * round-robin over `streams` streams (1: one after another on one) from one start to one end: how far few-tile
 * GEMMs on a few streams fill the SMs, as Transformer Engine runs a MoE layer's local experts (a cuBLAS GEMM an
 * expert on 4 streams) and userbuffers' TP chunks (3). */
typedef struct {
  int64_t m, n, k;
  int gemms, streams; /* streams 1 to PX_CUDA_PROBE_STREAMS_MAX */
  int dtype;          /* PX_DTYPE_BF16, or PX_DTYPE_FP8: E4M3, per-tensor scales, fast accumulation (TE's forward);
                         fp8 runs on compute capability 8.9 and up, dimensions in 16s */
  double s;           /* out: seconds for all gemms; 0 when not run */
} px_cuda_streams_probe;

#define PX_CUDA_PROBE_STREAMS_MAX 4
#define PX_CUDA_SUSTAIN_WINDOWS_MAX 256

typedef struct {
  /* in */
  px_cuda_gemm_probe *gemm;
  int ngemm;
  px_cuda_attn_probe *attn;
  int nattn;
  px_cuda_streams_probe *concurrent;
  int nconcurrent;
  uint64_t copy_bytes;        /* HBM: a device-to-device copy of this many bytes */
  px_cuda_gemm_probe sustain; /* run back to back for sustain_s, timed in windows of window_s */
  double sustain_s, window_s;
  double min_s; /* each figure: calls repeated for at least this long */
  void (*progress)(void *ctx, const char *what, int done, int total); /* NULL: none */
  void *progress_ctx;
  /* out */
  char gpu[96];
  int cc;            /* compute capability x 10 */
  int64_t sms;       /* 0 when the device does not say */
  uint64_t hbm_bytes;
  double copy_s;     /* one copy of copy_bytes */
  double burst_s;    /* sustain's product, timed for min_s before the sustained run */
  double window_s_per_product[PX_CUDA_SUSTAIN_WINDOWS_MAX]; /* each window's mean */
  int nwindows;
  int failed;         /* probes whose calls failed (their s stays 0), and the first one's message */
  char failure[256];
} px_cuda_calib;

/* Measures everything c asks for on device 0, filling its outputs. A probe
 * that fails is counted and the rest go on (a first run on a new GPU still
 * measures what it can); an error of the set-up (device, handles, memory)
 * fails the whole. */
px_status px_cuda_calibrate(px_cuda_calib *c, px_err *err);

#endif
