/* The lock file of a checkpoint directory: taken, refused, judged stale,
 * released (exec/ckpt_lock.h). */
#include "exec/ckpt_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"

/* The state and start time of process pid (fields 3 and 22 of
 * /proc/<pid>/stat, after the command name in parentheses, which may hold
 * anything); false when there is no such file (no /proc, no such process). */
static bool proc_stat(int64_t pid, char *state, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%" PRId64 "/stat", pid);
  FILE *fp = fopen(path, "r");
  if (!fp) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2]) return false;
  *state = p[2];
  for (int field = 2; field < 22 && p; field++) p = strchr(p + 1, ' '); /* p: the space before field 22 */
  *start = p ? strtoull(p + 1, NULL, 10) : 0;
  return true;
}

static void whoami(px_ckpt_holder *h) {
  memset(h, 0, sizeof *h);
  if (gethostname(h->host, sizeof h->host - 1) != 0) snprintf(h->host, sizeof h->host, "unknown");
  h->pid = (int64_t)getpid();
  char state;
  if (!proc_stat(h->pid, &state, &h->pid_start)) h->pid_start = 0;
  h->since_unix_s = (int64_t)time(NULL);
}

/* "pid 4242 on node17 since 2024-11-28 00:00:00 UTC" */
static void holder_describe(const px_ckpt_holder *h, char *buf, size_t cap) {
  char when[64] = "an unknown time";
  time_t t = (time_t)h->since_unix_s;
  struct tm tm;
  if (h->since_unix_s > 0 && gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  snprintf(buf, cap, "pid %" PRId64 " on %s since %s", h->pid, h->host, when);
}

static bool same_holder(const px_ckpt_holder *a, const px_ckpt_holder *b) {
  return a->pid == b->pid && a->pid_start == b->pid_start && a->since_unix_s == b->since_unix_s &&
         !strcmp(a->host, b->host);
}

/* Whether the holder may still run: anywhere but this host (which cannot be
 * checked), or here with its pid running (not a zombie: killed, not yet
 * reaped) and, where both are known, started when the lock says. */
static bool maybe_alive(const px_ckpt_holder *h, const px_ckpt_holder *me) {
  if (strcmp(h->host, me->host) != 0) return true;
  if (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  uint64_t start = 0;
  if (!proc_stat(h->pid, &state, &start)) return true; /* no /proc: the pid runs, which is all one can tell */
  return state != 'Z' && state != 'X' && !(h->pid_start && start && start != h->pid_start);
}

typedef enum { READ_OK, READ_GONE, READ_BAD } read_result;

/* Reads the lock file at path; READ_GONE when there is none (released meanwhile). */
static read_result read_holder(const char *path, px_ckpt_holder *h, px_err *err) {
  memset(h, 0, sizeof *h);
  cJSON *root = NULL;
  if (!px_file_exists(path)) return READ_GONE;
  px_status st = px_json_load(path, &root, err);
  px_json_ctx c = {path, "", NULL};
  int64_t pid = 0, start = 0, since = 0;
  if (!st && !cJSON_IsObject(root)) st = px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object", path);
  if (!st) st = px_json_str(&c, root, "host", true, h->host, sizeof h->host, err);
  if (!st) st = px_json_int(&c, root, "pid", true, 1, INT64_C(1) << 53, &pid, err);
  if (!st) st = px_json_int(&c, root, "pid_start", false, 0, INT64_C(1) << 53, &start, err);
  if (!st) st = px_json_int(&c, root, "since_unix_s", false, 0, INT64_C(1) << 53, &since, err);
  cJSON_Delete(root);
  h->pid = pid, h->pid_start = (uint64_t)start, h->since_unix_s = since;
  if (st && !px_file_exists(path)) return READ_GONE;
  return st ? READ_BAD : READ_OK;
}

/* Creates the lock file (O_EXCL) holding me; *exists when another is there. */
static px_status create_lock(const char *path, const px_ckpt_holder *me, bool *exists, px_err *err) {
  *exists = false;
  char since[400];
  holder_describe(me, since, sizeof since);
  const char *at = strstr(since, " since ");
  cJSON *root = cJSON_CreateObject();
  bool built = root && cJSON_AddStringToObject(root, "host", me->host) &&
               px_json_add_num(root, "pid", (double)me->pid) &&
               px_json_add_num(root, "pid_start", (double)me->pid_start) &&
               px_json_add_num(root, "since_unix_s", (double)me->since_unix_s) &&
               cJSON_AddStringToObject(root, "since", at ? at + 7 : "");
  char *text = built ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory", path);
  size_t n = strlen(text);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    *exists = errno == EEXIST;
    free(text);
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot create: %s", path, strerror(errno));
  }
  bool ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  free(text);
  if (!ok) {
    unlink(path);
    return px_err_set(err, PX_ERR_INPUT, "%s: cannot write: %s", path, strerror(saved));
  }
  return PX_OK;
}

px_status px_ckpt_lock_take(const char *dir, px_ckpt_lock *lk, char *note, size_t cap, px_err *err) {
  memset(lk, 0, sizeof *lk);
  if (cap) note[0] = '\0';
  if (!dir || !*dir) return px_err_set(err, PX_ERR_INPUT, "checkpoint: no directory given");
  struct stat sb;
  bool existed = stat(dir, &sb) == 0;
  if (existed && !S_ISDIR(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: not a directory", dir);
  if (px_mkdir_p(dir, err)) {
    err->status = PX_ERR_INPUT;
    return PX_ERR_INPUT;
  }
  int k = snprintf(lk->path, sizeof lk->path, "%s/%s", dir, PX_CKPT_LOCK_FILE);
  if (k < 0 || (size_t)k >= sizeof lk->path) return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
  whoami(&lk->me);
  char aside[4300], who[400];
  snprintf(aside, sizeof aside, "%s.stale.%" PRId64, lk->path, lk->me.pid);
  /* a few rounds: each either takes it, refuses, or found it changed under it (released, taken over) */
  for (int round = 0; round < 8; round++) {
    bool exists = false;
    px_status st = create_lock(lk->path, &lk->me, &exists, err);
    if (!st) {
      lk->held = true;
      lk->made_dir = !existed;
      return PX_OK;
    }
    if (!exists) {
      if (!existed) rmdir(dir);
      return st;
    }
    px_ckpt_holder h;
    read_result got = read_holder(lk->path, &h, err);
    if (got == READ_GONE) continue;
    if (got == READ_BAD)
      return px_err_prefix(err, "%s is locked by a lock file that cannot be read (if no job uses the directory, "
                           "remove %s)", dir, lk->path);
    holder_describe(&h, who, sizeof who);
    if (maybe_alive(&h, &lk->me))
      return px_err_set(err, PX_ERR_INPUT, "%s is in use by another job: %s (%s%s)", dir, who, lk->path,
                        strcmp(h.host, lk->me.host) ? "; from another host, which cannot be checked: if that job is "
                        "gone, remove the lock file" : "");
    /* Stale: moved aside, then checked to be the lock judged (another job may have taken it over and locked anew). */
    if (rename(lk->path, aside) != 0) continue;
    px_ckpt_holder moved;
    px_err ignored = {0};
    if (read_holder(aside, &moved, &ignored) == READ_OK && same_holder(&moved, &h)) {
      if (cap) snprintf(note, cap, "%s: took over the lock of a job that is gone (%s)", dir, who);
    } else if (link(aside, lk->path) != 0 && errno != EEXIST) { /* a live lock moved: put back */
      rename(aside, lk->path);
    }
    unlink(aside);
  }
  return px_err_set(err, PX_ERR_INPUT, "%s: the lock is contended (other jobs keep taking it): try again", lk->path);
}

void px_ckpt_lock_release(px_ckpt_lock *lk) {
  if (!lk || !lk->held) return;
  px_ckpt_holder h;
  px_err ignored = {0};
  if (read_holder(lk->path, &h, &ignored) == READ_OK && same_holder(&h, &lk->me)) unlink(lk->path);
  if (lk->made_dir) { /* its name: the lock file's, less "/lock" */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", lk->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0', rmdir(dir); /* fails, as it should, when anything is in it */
  }
  lk->held = false;
}
