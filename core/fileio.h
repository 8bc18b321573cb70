/* Files that are never half-written: output goes to a temporary name in the
 * same directory, is flushed and fsynced, then renamed over the target. */
#ifndef PX_CORE_FILEIO_H
#define PX_CORE_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

typedef struct {
  FILE *fp;
  char path[4096];
  char tmp_path[4096 + 32];
} px_afile;

/* Opens a temporary file next to path for writing. */
px_status px_afile_open(px_afile *f, const char *path, px_err *err);
/* Flushes, fsyncs and renames the temporary file onto path. */
px_status px_afile_commit(px_afile *f, px_err *err);
/* Closes and removes the temporary file (safe after commit or a failed open). */
void px_afile_abort(px_afile *f);

/* Writes len bytes to path atomically. */
px_status px_file_write(const char *path, const void *data, size_t len, px_err *err);
/* Reads a whole file (at most max_bytes) into a NUL-terminated buffer the caller frees. */
px_status px_file_read(const char *path, size_t max_bytes, char **out, size_t *len, px_err *err);
/* Creates a directory and its parents; fine if it exists. */
px_status px_mkdir_p(const char *path, px_err *err);
bool px_file_exists(const char *path);
/* Whether path can be written as px_file_write writes it (a temporary file
 * beside it, renamed over it): refuses a directory, anything else but a
 * regular file, and a parent directory that is missing or that this process
 * cannot write (PX_ERR_INPUT, naming the path and the reason). Creates
 * nothing. */
px_status px_file_check_writable(const char *path, px_err *err);

#endif
