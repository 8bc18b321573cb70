/* Shared modules: found, opened (dlopen) and asked for their table. */
#include "core/module.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

px_status px_module_path(const char *file, const char *env, char *out, size_t cap, px_err *err) {
  const char *set = env ? getenv(env) : NULL;
  int n;
  if (set && *set) {
    n = snprintf(out, cap, "%s", set);
  } else {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
      return px_err_set(err, PX_ERR_RUNTIME, "cannot find %s: /proc/self/exe: %s (set %s to its path)", file,
                        k < 0 ? strerror(errno) : "empty", env ? env : "its path");
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    n = snprintf(out, cap, "%s/%s", slash ? exe : ".", file);
  }
  if (n < 0 || (size_t)n >= cap) return px_err_set(err, PX_ERR_INPUT, "%s: the path of %s is too long", env ? env : "", file);
  return PX_OK;
}

px_status px_module_open(const char *file, const char *env, const char *symbol, uint64_t abi, const void **table,
                         px_err *err) {
  *table = NULL;
  char path[4096];
  px_status st = px_module_path(file, env, path, sizeof path, err);
  if (st) return st;
  /* RTLD_GLOBAL: the libraries it brings (Open MPI) load plugins that look
   * for their symbols globally; the module itself exports only its table. */
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *why = dlerror();
    why = why ? why : "unknown reason";
    /* dlerror names the path itself when the module is missing, the library when one it needs is */
    const char *set = env ? getenv(env) : NULL;
    char where[256];
    if (set && *set)
      snprintf(where, sizeof where, "the path %s gives", env);
    else
      snprintf(where, sizeof where, "looked for next to the executable; %s=PATH names another", env ? env : "");
    if (!strncmp(why, path, strlen(path))) return px_err_set(err, PX_ERR_INPUT, "%s (%s)", why, where);
    return px_err_set(err, PX_ERR_INPUT, "%s did not load: %s (%s)", path, why, where);
  }
  dlerror();
  const void *t = dlsym(h, symbol);
  if (!t) {
    const char *why = dlerror();
    return px_err_set(err, PX_ERR_INPUT, "%s is not a parallax module of this kind: %s", path, why ? why : symbol);
  }
  const px_module_header *h0 = t;
  if (h0->abi != abi || strcmp(h0->version, PX_VERSION) != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s is from another build of parallax (%s; this is %s)", path, h0->version,
                      PX_VERSION);
  *table = t;
  return PX_OK;
}
