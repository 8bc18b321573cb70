/* Fuzz harnesses' helpers: the input written to a file of a private
 * directory, for the readers that take a path, or parsed as JSON; a check
 * that fails as a crash does. */
#ifndef PX_TESTS_FUZZ_UTIL_H
#define PX_TESTS_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"

/* A directory for this process's files, made once. */
static inline const char *fuzz_dir(void) {
  static char dir[256];
  if (!dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/px-fuzz-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) dir[0] = 0;
  }
  return dir;
}

/* Writes data to <fuzz_dir>/name; path receives the full name. */
static inline bool fuzz_file(const char *name, const uint8_t *data, size_t size, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", fuzz_dir(), name);
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

/* A property the code under test must have: a finding when it does not. */
static inline void fuzz_check(bool ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "fuzz check failed: %s\n", what);
  abort();
}

/* px_json_parse of the input (which it wants NUL-terminated, as a file read is). */
static inline px_status parse(const uint8_t *data, size_t size, const char *name, cJSON **root, px_err *err) {
  char *text = malloc(size + 1);
  if (!text) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  memcpy(text, data, size);
  text[size] = 0;
  px_status st = px_json_parse(text, size, name, root, err);
  free(text);
  return st;
}

#endif
