/* Status codes and error messages shared by every module: library code
 * returns a px_status and fills a px_err naming the file, field and reason.
 * A field the user sets is named in backquotes (`tp`, `shard_group`), never
 * as a flag: the CLI shows it as the flag that sets it (--shard-group;
 * cli/args.h, px_cli_words; tests/flag_names.sh checks). */
#ifndef PX_CORE_STATUS_H
#define PX_CORE_STATUS_H

#include <stddef.h>

/* The value is also the CLI's exit code. */
typedef enum {
  PX_OK = 0,
  PX_ERR_RUNTIME = 1, /* the input was fine but something failed */
  PX_ERR_INPUT = 2,   /* bad input or usage */
} px_status;

/* The CLI's exit code for a plan it compiled, simulated or searched for
 * that does not fit in memory (plan, sim; sweep when no plan fits): a
 * verdict on the input, not a failure, apart from 1 and 2. */
#define PX_EXIT_NOFIT 3

typedef struct {
  px_status status;
  char msg[1024];
} px_err;

/* Sets err (may be NULL) and returns st, so callers can `return px_err_set(...)`. */
px_status px_err_set(px_err *err, px_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes the current message with "prefix: ". */
px_status px_err_prefix(px_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void px_err_clear(px_err *err);

/* Allocation that reports failure through err; size 0 returns a valid pointer. */
void *px_calloc(size_t count, size_t size, px_err *err);
/* For a process that builds and frees many large objects one after another
 * (a sweep's plans): freed memory is kept for the next rather than returned
 * to the kernel and faulted back in (glibc's trim and mmap thresholds
 * raised; elsewhere nothing). Called by the CLI, never by the library. */
void px_alloc_keep_freed(void);

#endif
