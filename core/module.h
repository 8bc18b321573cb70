/* Shared modules loaded on demand (the executor, the CUDA backend), so that
 * commands which need neither never load their libraries: found next to the
 * executable or where an environment variable says; each exports one table. */
#ifndef PX_CORE_MODULE_H
#define PX_CORE_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The first member of every module's table: the build it comes from, and the
 * layout of what crosses between it and its caller (a figure made of the
 * sizes of those structs), so that a module of another build is refused
 * rather than run. */
typedef struct {
  const char *version; /* PX_VERSION */
  uint64_t abi;
} px_module_header;

/* Where module `file` (e.g. "libparallax_cuda.so") is looked for: the value
 * of the environment variable `env` when set and not empty, else `file` in
 * the directory of the running executable. */
px_status px_module_path(const char *file, const char *env, char *out, size_t cap, px_err *err);

/* Opens module `file` (px_module_path) and returns the address of its
 * exported `symbol`, a table that starts with a px_module_header, in *table.
 * PX_ERR_INPUT when the module does not load (missing, or a library it needs
 * missing: the loader's reason is quoted), lacks the symbol, or is of
 * another build (version or abi differ). Opening it again returns the same
 * table; a module stays loaded until the process exits. */
px_status px_module_open(const char *file, const char *env, const char *symbol, uint64_t abi, const void **table,
                         px_err *err);

#endif
