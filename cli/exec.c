/* Loading the executor module (exec/module.h). */
#include "cli/exec.h"

const px_exec_module *px_cli_exec(px_err *err) {
#if PX_EXEC_LINKED
  (void)err;
  return &px_exec_module_table;
#else
  const void *t = NULL;
  if (px_module_open(PX_EXEC_MODULE_FILE, PX_EXEC_MODULE_ENV, PX_EXEC_MODULE_SYMBOL, PX_EXEC_MODULE_ABI, &t, err)) {
    px_err_prefix(err, "the executor is not available");
    return NULL;
  }
  return t;
#endif
}
