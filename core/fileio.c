/* Atomic file output and whole-file input. */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

px_status px_afile_open(px_afile *f, const char *path, px_err *err) {
  memset(f, 0, sizeof *f);
  if (strlen(path) >= sizeof f->path)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", path);
  snprintf(f->path, sizeof f->path, "%s", path);
  snprintf(f->tmp_path, sizeof f->tmp_path, "%s.tmp.%ld", path, (long)getpid());
  f->fp = fopen(f->tmp_path, "wb");
  if (!f->fp)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create: %s", f->tmp_path, strerror(errno));
  return PX_OK;
}

px_status px_afile_commit(px_afile *f, px_err *err) {
  if (!f->fp) return px_err_set(err, PX_ERR_RUNTIME, "%s: not open", f->path);
  bool ok = fflush(f->fp) == 0 && !ferror(f->fp) && fsync(fileno(f->fp)) == 0;
  int saved = errno;
  ok = (fclose(f->fp) == 0) && ok;
  f->fp = NULL;
  if (!ok) {
    unlink(f->tmp_path);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: write failed: %s", f->path, strerror(saved ? saved : errno));
  }
  if (rename(f->tmp_path, f->path) != 0) {
    saved = errno;
    unlink(f->tmp_path);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot rename into place: %s", f->path, strerror(saved));
  }
  return PX_OK;
}

void px_afile_abort(px_afile *f) {
  if (f->fp) {
    fclose(f->fp);
    f->fp = NULL;
    unlink(f->tmp_path);
  }
}

px_status px_file_write(const char *path, const void *data, size_t len, px_err *err) {
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) return st;
  if (len && fwrite(data, 1, len, f.fp) != len) {
    px_afile_abort(&f);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: write failed: %s", path, strerror(errno));
  }
  return px_afile_commit(&f, err);
}

px_status px_file_read(const char *path, size_t max_bytes, char **out, size_t *len, px_err *err) {
  *out = NULL;
  if (len) *len = 0;
  struct stat sb;
  if (stat(path, &sb) != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: is a directory, not a file", path);
  FILE *fp = fopen(path, "rb");
  if (!fp) return px_err_set(err, PX_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) {
    fclose(fp);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory", path);
  }
  for (;;) {
    if (n > max_bytes) { /* one byte past the limit is enough to know */
      free(buf);
      fclose(fp);
      return px_err_set(err, PX_ERR_INPUT, "%s: file is larger than %zu bytes", path, max_bytes);
    }
    if (n == cap) {
      cap = cap * 2 > max_bytes ? max_bytes + 1 : cap * 2;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        fclose(fp);
        return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory", path);
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, fp);
    n += got;
    if (got == 0) break;
  }
  bool bad = ferror(fp);
  fclose(fp);
  if (bad) {
    free(buf);
    return px_err_set(err, PX_ERR_INPUT, "%s: read error", path);
  }
  buf[n] = '\0';
  *out = buf;
  if (len) *len = n;
  return PX_OK;
}

px_status px_mkdir_p(const char *path, px_err *err) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
      return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
    *p = '/';
  }
  if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
  struct stat sb;
  if (stat(tmp, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return px_err_set(err, PX_ERR_RUNTIME, "%s: exists and is not a directory", tmp);
  return PX_OK;
}

bool px_file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

px_status px_file_check_writable(const char *path, px_err *err) {
  struct stat sb;
  if (!path || !*path) return px_err_set(err, PX_ERR_INPUT, "no file name given");
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: is a directory", path);
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    return px_err_set(err, PX_ERR_INPUT, "%s: not a regular file (it would be replaced by one)", path);
  char parent[4096];
  if (snprintf(parent, sizeof parent, "%s", path) >= (int)sizeof parent)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", path);
  char *slash = strrchr(parent, '/');
  if (!slash) snprintf(parent, sizeof parent, ".");
  else if (slash == parent) parent[1] = '\0';
  else *slash = '\0';
  if (stat(parent, &sb) != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot be created: %s: %s", path, parent, strerror(errno));
  if (!S_ISDIR(sb.st_mode))
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot be created: %s is not a directory", path, parent);
  if (access(parent, W_OK | X_OK) != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot be created: %s: %s", path, parent, strerror(errno));
  return PX_OK;
}
