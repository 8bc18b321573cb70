/* The executor as a module: libparallax_exec.so (exec/, kernels/cpu, MPI,
 * OpenBLAS) exports one table, what the CLI's run, reshard, merge, calibrate and split sweep
 * call (on MPI_COMM_WORLD); no other command loads it. */
#ifndef PX_EXEC_MODULE_H
#define PX_EXEC_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/module.h"
#include "exec/calibrate.h"
#include "exec/ckpt.h"
#include "exec/ckpt_lock.h"
#include "exec/merge.h"
#include "exec/reshard.h"
#include "exec/result.h"
#include "exec/train.h"

#define PX_EXEC_MODULE_FILE "libparallax_exec.so"
#define PX_EXEC_MODULE_ENV "PARALLAX_EXEC_MODULE" /* its path, instead of next to the executable */
#define PX_EXEC_MODULE_SYMBOL "px_exec_module_table"

/* The layout of what crosses between the CLI and the module (px_module_header). */
#define PX_EXEC_MODULE_ABI                                                                                       \
  ((uint64_t)sizeof(px_train_opts) | (uint64_t)sizeof(px_train_result) << 10 | (uint64_t)sizeof(px_plan) << 20 | \
   (uint64_t)sizeof(px_cluster) << 34 | (uint64_t)sizeof(px_calib_opts) << 50)

typedef struct {
  px_module_header h; /* PX_VERSION, PX_EXEC_MODULE_ABI */
  /* MPI_Init (MPI_Init_thread asking for MPI_THREAD_FUNNELED when threads is
   * set: *threads_ok says whether it was given), then this rank and the
   * world's size; mpi_finalize ends it (px_comm_mpi_finalize: the whole job, with code, where other ranks
   * were found stuck waiting for this one) */
  void (*mpi_init)(bool threads, int *rank, int *size, bool *threads_ok);
  void (*mpi_finalize)(int code);
  /* px_comm_agree and px_comm_gather_bytes (root 0) over the world */
  px_status (*agree)(px_status st, px_err *err);
  px_status (*gather_bytes)(const void *mine, size_t bytes, void **all, size_t *total, px_err *err);
  /* exec/train.h */
  const char *(*default_backend)(void);
  const char *(*default_cluster)(const char *backend);
  void (*train_opts_init)(px_train_opts *o);
  px_status (*train)(const px_plan *plan, const px_train_opts *o, px_train_result *r, px_err *err);
  void (*train_result_free)(px_train_result *r);
  px_status (*train_support)(const px_plan *plan, const char *backend, px_err *err);
  /* exec/calibrate.h */
  px_status (*calibrate)(const px_cluster *base, const px_calib_opts *o, px_cluster *out, px_err *err);
  /* exec/reshard.h, for parallax reshard (no MPI) */
  px_status (*reshard_recorded)(const char *dir, px_planfile *pf, px_err *err);
  px_status (*reshard_open)(const char *dir, const px_plan *to, int64_t verify_rank, int64_t verify_ranks,
                            px_reshard **out, px_err *err);
  px_status (*reshard_write)(px_reshard *r, const char *dir, uint64_t *bytes_out, px_err *err);
  void (*reshard_free)(px_reshard *r);
  int64_t (*reshard_step)(const px_reshard *r);
  bool (*reshard_amax_fresh)(const px_reshard *r);
  const px_plan *(*reshard_from)(const px_reshard *r);
  void (*reshard_describe)(const px_plan *plan, char *buf, size_t cap);
  /* exec/merge.h, for parallax merge (no MPI) */
  px_status (*merge_open)(const px_merge_opts *o, px_merge **out, px_err *err);
  px_status (*merge_write)(px_merge *m, const px_plan *to, const char *dir, uint64_t *bytes_out, px_err *err);
  void (*merge_free)(px_merge *m);
  const px_plan *(*merge_from)(const px_merge *m);
  int64_t (*merge_step)(const px_merge *m);
  int64_t (*merge_count)(const px_merge *m);
  const char *(*merge_base)(const px_merge *m);
  /* exec/ckpt.h, exec/ckpt_lock.h: what a checkpoint directory holds, and its lock (no MPI) */
  void (*ckpt_probe)(const char *dir, px_ckpt_probe_info *out);
  void (*ckpt_probe_describe)(const px_ckpt_probe_info *p, char *buf, size_t cap);
  px_status (*ckpt_lock_take)(const char *dir, px_ckpt_lock *lk, char *note, size_t cap, px_err *err);
  void (*ckpt_lock_release)(px_ckpt_lock *lk);
} px_exec_module;

extern const px_exec_module px_exec_module_table;

#endif
