/* parallax launch's supervision: the slots a job may use, one attempt of
 * `mpirun ... parallax run` with its stderr passed through and read for the
 * cause of a failure, and the checkpoint a relaunch resumes from. No MPI. */
#ifndef PX_CLI_LAUNCH_H
#define PX_CLI_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

/* Slots for attempt k: PX_LAUNCH_SLOTS ("N", or "N0,N1,...": attempt k takes
 * the k-th, the last for the rest), else the sum of a hostfile's slots= (a
 * host line without one counts 1), else `fallback`. *from says which. */
px_status px_launch_slots(const char *hostfile, int64_t attempt, int64_t fallback, int64_t *slots, const char **from,
                          px_err *err);

/* How an attempt ended. */
typedef struct {
  bool started;     /* a rank of the run started (see px_launch_attempt); false: the launcher failed */
  int exit_code;    /* mpirun's exit status; -1 when it was killed by a signal */
  int signal;       /* the signal that killed mpirun, 0 none */
  int64_t rank;     /* the rank its stderr names as the one that failed, -1 none */
  double wall_s;
  char cause[768];  /* one line for the restart log */
} px_launch_outcome;

/* Runs argv (argv[0] looked up in PATH) to its end, its stderr copied to ours
 * and read for the failing rank (Open MPI's "process rank R ... exited on
 * signal", "Process name: [[j,s],R] Exit code: C", the run's "parallax: rank R"
 * messages) and for whether a rank started: rank 0's PX_LAUNCH_STARTED line,
 * any other line of the run's ("parallax: ..."), or mpirun's report of a
 * rank's exit; when none did, the cause is the first paragraph of the
 * launcher's stderr (its own error). The child runs in its own process group,
 * its stdin /dev/null, and gets SIGTERM when the launcher dies (Linux's
 * parent-death signal, even on SIGKILL); a SIGINT, SIGTERM or SIGHUP the
 * launcher gets is passed on to that group, *stopped_by getting it (0:
 * none); what is left of the group when the child ends is killed.
 * PX_ERR_INPUT when argv[0] cannot be run. */
px_status px_launch_attempt(char *const *argv, px_launch_outcome *out, int *stopped_by, px_err *err);

/* The ranks' side, called by parallax run. */
/* The start of the line rank 0 writes on stderr, when PX_LAUNCH_ATTEMPT is
 * set (a run launch started), as soon as its MPI is up:
 * "parallax: launch attempt K: N ranks started". */
#define PX_LAUNCH_STARTED "parallax: launch attempt "
void px_launch_rank_started(int rank, int size);
/* In a process an MPI launcher started (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
 * PMIX_RANK set): SIGKILL when its parent (mpirun, or the daemon that started
 * the rank) dies, so that no rank trains on without its job (Linux's
 * parent-death signal; a parent already gone ends it at once). Elsewhere
 * nothing: a run started by hand outlives its shell as it always did. */
void px_launch_rank_tie(void);

/* The step of the last complete checkpoint in dir (its manifest, or a staged
 * one whose manifest was written and which the run moves in); false: none. */
bool px_launch_ckpt_step(const char *dir, int64_t *step);

#endif
