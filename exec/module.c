/* The one symbol libparallax_exec.so exports: the executor's entry points for
 * the CLI, over MPI_COMM_WORLD. */
#include "exec/module.h"

#include "exec/comm.h"

static px_status agree(px_status st, px_err *err) { return px_comm_agree(st, MPI_COMM_WORLD, err); }

static px_status gather_bytes(const void *mine, size_t bytes, void **all, size_t *total, px_err *err) {
  return px_comm_gather_bytes(mine, bytes, 0, MPI_COMM_WORLD, all, total, err);
}

static px_status train(const px_plan *plan, const px_train_opts *o, px_train_result *r, px_err *err) {
  return px_train(plan, o, MPI_COMM_WORLD, r, err);
}

static px_status calibrate(const px_cluster *base, const px_calib_opts *o, px_cluster *out, px_err *err) {
  return px_calibrate(base, o, MPI_COMM_WORLD, out, err);
}

__attribute__((visibility("default"))) const px_exec_module px_exec_module_table = {
    .h = {.version = PX_VERSION, .abi = PX_EXEC_MODULE_ABI},
    .mpi_init = px_comm_mpi_init,
    .mpi_finalize = px_comm_mpi_finalize,
    .agree = agree,
    .gather_bytes = gather_bytes,
    .default_backend = px_train_default_backend,
    .default_cluster = px_train_default_cluster,
    .train_opts_init = px_train_opts_init,
    .train = train,
    .train_result_free = px_train_result_free,
    .train_support = px_train_support,
    .calibrate = calibrate,
    .reshard_recorded = px_reshard_recorded,
    .reshard_open = px_reshard_open,
    .reshard_write = px_reshard_write,
    .reshard_free = px_reshard_free,
    .reshard_step = px_reshard_step,
    .reshard_amax_fresh = px_reshard_amax_fresh,
    .reshard_from = px_reshard_from,
    .reshard_describe = px_reshard_describe,
    .merge_open = px_merge_open,
    .merge_write = px_merge_write,
    .merge_free = px_merge_free,
    .merge_from = px_merge_from,
    .merge_step = px_merge_step,
    .merge_count = px_merge_count,
    .merge_base = px_merge_base,
    .ckpt_probe = px_ckpt_probe,
    .ckpt_probe_describe = px_ckpt_probe_describe,
    .ckpt_lock_take = px_ckpt_lock_take,
    .ckpt_lock_release = px_ckpt_lock_release,
};
