/* Status codes, error messages and allocation. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

px_status px_err_set(px_err *err, px_status st, const char *fmt, ...) {
  if (!err) return st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->status = st;
  return st;
}

px_status px_err_prefix(px_err *err, const char *fmt, ...) {
  if (!err) return PX_ERR_RUNTIME;
  char prefix[512], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof err->msg / 2) n = sizeof err->msg / 2;
  memcpy(err->msg, prefix, n);
  memcpy(err->msg + n, ": ", 2);
  size_t room = sizeof err->msg - n - 3;
  size_t k = strlen(old);
  if (k > room) k = room;
  memcpy(err->msg + n + 2, old, k);
  err->msg[n + 2 + k] = '\0';
  return err->status;
}

void px_err_clear(px_err *err) {
  if (!err) return;
  err->status = PX_OK;
  err->msg[0] = '\0';
}

void *px_calloc(size_t count, size_t size, px_err *err) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) px_err_set(err, PX_ERR_RUNTIME, "out of memory allocating %zu x %zu bytes", count, size);
  return p;
}

void px_alloc_keep_freed(void) {
#ifdef __GLIBC__
  mallopt(M_TRIM_THRESHOLD, 1 << 30); /* free() shrinks the heap only past 1 GiB unused */
  mallopt(M_MMAP_THRESHOLD, 1 << 28); /* blocks under 256 MiB come from (reused) heap memory, not mmap */
#endif
}
