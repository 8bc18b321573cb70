/* The executor for the commands that run something (run, calibrate, a sweep
 * split under mpirun): loaded when one of them needs it, never at start-up. */
#ifndef PX_CLI_EXEC_H
#define PX_CLI_EXEC_H

#include "cli/args.h"
#include "exec/module.h"

/* The executor module's table (exec/module.h), or NULL with err saying why it
 * did not load (PX_ERR_INPUT). Linked in when built with PX_EXEC_LINKED (the
 * GPU emulator's build). */
const px_exec_module *px_cli_exec(px_err *err);

/* The plan `mpirun -np size parallax run` trains with the flags in a: the
 * backend (*backend; a's or the module's default), its cluster, the GPU
 * count (size unless the flags give one; a plan needing another rank count
 * is refused with the -np hint), fp32 on the CPU; model m, cluster c and
 * the compiled plan (freed by the caller when PX_OK). Shared by run and
 * launch, which plans each attempt as its run will. */
px_status px_cli_run_plan(px_args *a, const px_exec_module *x, int size, const char **backend, px_model *m,
                          px_cluster *c, px_plan *plan, px_err *err);

/* The step a run of the flags in a trains to: --steps, else the executor's
 * default (px_train_opts_init). */
int64_t px_cli_run_steps(const px_args *a, const px_exec_module *x);

/* Whether paths a and b (either may be NULL) are the same directory: reshard's and merge's --to against what
 * they read. */
bool px_cli_same_dir(const char *a, const char *b);

/* --to DIR of reshard and merge: created and locked before anything is read (a job using it is refused), and
 * refused when it holds a checkpoint unless overwrite; `what` names the new one ("re-split", "merged"). */
px_status px_cli_take_to(const px_exec_module *x, const char *dir, bool overwrite, const char *what, px_ckpt_lock *lock,
                         px_err *err);

/* The plan reshard and merge write for: the flags', with what they leave out (the model, the cluster, the precision,
 * the global batch, fp8's recipe and base, the expert buffers) from the plan recorded in the checkpoint dir (as run resolved it there),
 * one GPU a rank; refused when no backend runs it. On PX_OK *plan is compiled (the caller frees it). */
px_status px_cli_plan_after(const px_exec_module *x, px_args *a, const char *dir, px_plan *plan, px_err *err);

#endif
