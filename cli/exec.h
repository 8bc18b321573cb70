/* The executor for the commands that run something (run, calibrate, a sweep
 * split under mpirun): loaded when one of them needs it, never at start-up. */
#ifndef PX_CLI_EXEC_H
#define PX_CLI_EXEC_H

#include "exec/module.h"

/* The executor module's table (exec/module.h), or NULL with err saying why it
 * did not load (PX_ERR_INPUT). Linked in when built with PX_EXEC_LINKED (the
 * GPU emulator's build). */
const px_exec_module *px_cli_exec(px_err *err);

#endif
