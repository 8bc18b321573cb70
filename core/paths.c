/* Preset lookup under the data directory. */
#include "core/paths.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PX_SOURCE_DIR
#define PX_SOURCE_DIR "."
#endif

const char *px_data_dir(void) {
  const char *env = getenv("PARALLAX_HOME");
  return env && *env ? env : PX_SOURCE_DIR;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

px_status px_preset_path(const char *kind, const char *name_or_path, char *out, size_t cap, px_err *err) {
  if (!name_or_path || !*name_or_path) return px_err_set(err, PX_ERR_INPUT, "empty %s name", kind);
  int n;
  if (strchr(name_or_path, '/') || ends_with(name_or_path, ".json"))
    n = snprintf(out, cap, "%s", name_or_path);
  else
    n = snprintf(out, cap, "%s/%s/%s.json", px_data_dir(), kind, name_or_path);
  if (n < 0 || (size_t)n >= cap) return px_err_set(err, PX_ERR_INPUT, "%.64s...: name too long", name_or_path);
  return PX_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

px_status px_preset_list(const char *kind, char ***names, size_t *count, px_err *err) {
  *names = NULL;
  *count = 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", px_data_dir(), kind);
  DIR *d = opendir(dir);
  if (!d) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot list presets: %s", dir, strerror(errno));
  size_t cap = 0, n = 0;
  char **list = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !ends_with(e->d_name, ".json")) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nl = realloc(list, cap * sizeof *nl);
      if (!nl) break;
      list = nl;
    }
    size_t len = strlen(e->d_name) - 5;
    list[n] = malloc(len + 1);
    if (!list[n]) break;
    memcpy(list[n], e->d_name, len);
    list[n][len] = '\0';
    n++;
  }
  closedir(d);
  qsort(list, n, sizeof *list, cmp_str);
  *names = list;
  *count = n;
  return PX_OK;
}

void px_preset_list_free(char **names, size_t count) {
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
}

void px_path_stem(const char *path, char *out, size_t cap) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (ends_with(base, ".json")) n -= 5;
  if (n >= cap) n = cap - 1;
  memcpy(out, base, n);
  out[n] = '\0';
}
