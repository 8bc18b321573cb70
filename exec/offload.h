/* Offload in the executor, in its own terms (ZeRO-Offload, ZeRO-Infinity):
 * a rank's offloaded states live in an arena of host memory apart from the
 * device's, or in files mapped from a directory standing for the node's
 * NVMe; the optimizer steps them in a helper thread while the calling thread
 * copies each finished range back. */
#ifndef PX_EXEC_OFFLOAD_H
#define PX_EXEC_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

#define PX_HOST_ARENA_MAX 8

/* The offloaded buffers of one rank. */
typedef struct {
  struct {
    void *p;
    uint64_t bytes;
    bool mapped; /* a file mapping (NVMe), else malloc'd */
  } v[PX_HOST_ARENA_MAX];
  int n;
  uint64_t bytes; /* in host memory */
  uint64_t nvme_bytes;
} px_host_arena;

/* A zeroed buffer of the arena: host memory, or with nvme a file in
 * $PARALLAX_NVME_DIR (default $TMPDIR, else /tmp), unlinked at once and
 * mapped. */
px_status px_host_alloc(px_host_arena *a, uint64_t bytes, bool nvme, void **out, px_err *err);
void px_host_arena_free(px_host_arena *a);

/* One AdamW step on host fp32 arrays, range by range (elements [at, at+n)
 * of w, m, v, g, weight decay wd), in a helper thread; done(ctx, i) runs on
 * the calling thread as soon as range i is updated (it copies the new
 * weights where the model reads them). The gradient is scaled by
 * grad_scale first. */
typedef struct {
  uint64_t at, n;
  float wd;
} px_host_range;

typedef struct {
  float *w, *m, *v, *g;
  const px_host_range *ranges;
  int32_t nranges;
  float lr, beta1, beta2, eps, grad_scale;
  int64_t t; /* the step, from 1 (bias correction) */
} px_host_adamw_job;

typedef px_status (*px_host_range_done)(void *ctx, int32_t range, px_err *err);
px_status px_host_adamw(const px_host_adamw_job *job, px_host_range_done done, void *ctx, px_err *err);

#endif
