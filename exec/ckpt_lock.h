/* The lock of a checkpoint directory: one job writes it at a time.
 *
 * <dir>/lock is created (O_EXCL) by the process that writes the directory
 * (a run's rank 0, parallax reshard for --to) before it reads or writes
 * anything there, and removed when it is done. It says who holds it:
 *   {"host": "node17", "pid": 4242, "pid_start": 981237, "since_unix_s": 1732752000,
 *    "since": "2024-11-28 00:00:00 UTC"}
 * pid_start is the holder's start time (/proc/<pid>/stat, clock ticks after
 * boot; 0 where unknown), so that a pid the system has given to another
 * process since does not pass for the holder.
 *
 * A second job finds the file and is refused, naming the holder. A lock is
 * stale when its holder is gone: on the same host (the same host name), no
 * process has its pid, or the one that has it started at another time.
 * A stale lock is taken over (the caller says so): a job killed outright
 * (SIGKILL, a crash, `parallax launch` relaunching after a rank died)
 * leaves one. On another host the holder cannot be checked, so its lock
 * stands until the file is removed by hand, after making sure the job is
 * gone: after a node holding rank 0 is lost, or when a relaunch puts rank 0
 * on another host. Two hosts of the same name sharing the directory (and
 * containers sharing a host name but not their processes) cannot be told
 * apart.
 */
#ifndef PX_EXEC_CKPT_LOCK_H
#define PX_EXEC_CKPT_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define PX_CKPT_LOCK_FILE "lock"

typedef struct {
  char host[256];
  int64_t pid;          /* > 0 */
  uint64_t pid_start;   /* clock ticks after boot; 0 unknown */
  int64_t since_unix_s; /* when it took the lock */
} px_ckpt_holder;

typedef struct {
  char path[4200]; /* <dir>/lock */
  px_ckpt_holder me;
  bool held;
  bool made_dir; /* the directory did not exist: release removes it again when nothing else is in it */
} px_ckpt_lock;

/* Creates dir (and its parents) when missing and takes its lock for this
 * process. Refused (PX_ERR_INPUT; the message names the path and the
 * reason): dir is not a directory or cannot be written, or a live job (or
 * one on another host) holds the lock, named with its host, pid and since
 * when. A stale lock is taken over, and note (cap bytes) gets a line for the
 * user saying whose ("" otherwise). */
px_status px_ckpt_lock_take(const char *dir, px_ckpt_lock *lk, char *note, size_t cap, px_err *err);
/* Removes the lock when this process still holds it (and not, say, a job
 * that judged it stale), and the directory when take made it and it is
 * empty (a job that wrote nothing leaves nothing); nothing when not held. */
void px_ckpt_lock_release(px_ckpt_lock *lk);

#endif
