/* parallax launch's supervision: slots, one attempt under mpirun, the last
 * complete checkpoint (cli/launch.h). */
#include "cli/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli/exec.h"
#include "core/clock.h"
#include "core/fileio.h"
#include "core/fmt.h"

px_status px_launch_slots(const char *hostfile, int64_t attempt, int64_t fallback, int64_t *slots, const char **from,
                          px_err *err) {
  const char *env = getenv("PX_LAUNCH_SLOTS");
  if (env && *env) {
    *from = "PX_LAUNCH_SLOTS";
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    int64_t k = 0, v = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), k++) {
      px_err e = {0};
      if (px_parse_int(t, "PX_LAUNCH_SLOTS", 0, 1 << 24, &v, &e))
        return px_err_set(err, PX_ERR_INPUT, "PX_LAUNCH_SLOTS='%.64s': expected N or N0,N1,... (slots of each "
                          "attempt, the last for the rest)", env);
      if (k <= attempt) *slots = v;
    }
    return PX_OK;
  }
  if (!hostfile) {
    *from = "--np";
    *slots = fallback;
    return PX_OK;
  }
  *from = hostfile;
  char *text = NULL;
  size_t len = 0;
  if (px_file_read(hostfile, 1 << 20, &text, &len, err)) return px_err_prefix(err, "--hostfile");
  int64_t sum = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    line += strspn(line, " \t\r");
    if (!*line) continue;
    const char *s = strstr(line, "slots=");
    long v = s ? strtol(s + 6, NULL, 10) : 1;
    sum += v > 0 ? v : 0;
  }
  free(text);
  *slots = sum;
  return PX_OK;
}

/* ---- one attempt ---- */

static volatile sig_atomic_t child_pid, got_signal;

/* SIGINT, SIGTERM, SIGHUP: passed on to the running job's process group
 * (mpirun ends its ranks), and no relaunch. */
static void on_signal(int sig) {
  got_signal = sig;
  if (child_pid > 0) kill(-(pid_t)child_pid, sig);
}

/* What the job's stderr says: whether a rank started, and about the failure. */
typedef struct {
  bool started;            /* rank 0's PX_LAUNCH_STARTED line, any other line of the run's, or a rank's exit reported */
  int64_t rank, name_rank; /* from mpirun's report; "Process name: [[j,s],R]" waiting for its exit code */
  char how[128];           /* "exited on signal 9 (Killed)" */
  char first_error[320];   /* the run's first "parallax: ..." line */
  char first_text[320];    /* the first paragraph of the stream (mpirun's own message when no rank started) */
  bool text_done;
} scan_state;

/* Adds a line to the first paragraph: from the first line with text to a
 * blank line or a line of dashes (Open MPI's frames). */
static void scan_text(scan_state *s, const char *line) {
  size_t n = strcspn(line, "\r\n");
  bool rule = n > 0 && strspn(line, "-") == n, blank = strspn(line, " \t\r\n") == strlen(line);
  if (s->text_done || ((rule || blank) && !s->first_text[0])) return;
  if (rule || blank) {
    s->text_done = true;
    return;
  }
  size_t used = strlen(s->first_text);
  snprintf(s->first_text + used, sizeof s->first_text - used, "%s%.*s", used ? " " : "", (int)n, line);
}

static void scan_line(scan_state *s, const char *line) {
  const char *p;
  scan_text(s, line);
  if (!strncmp(line, PX_LAUNCH_STARTED, strlen(PX_LAUNCH_STARTED))) {
    s->started = true;
  } else if ((p = strstr(line, "process rank ")) && strstr(line, "exited on signal")) {
    s->started = true;
    s->rank = strtoll(p + 13, NULL, 10);
    const char *q = strstr(line, "exited on signal");
    snprintf(s->how, sizeof s->how, "%.*s", (int)strcspn(q, ".\n"), q);
  } else if ((p = strstr(line, "Process name: [["))) {
    const char *r = strstr(p, "],");
    s->name_rank = r ? strtoll(r + 2, NULL, 10) : -1;
  } else if ((p = strstr(line, "Exit code:")) && s->name_rank >= 0 && s->rank < 0) {
    s->started = true;
    s->rank = s->name_rank;
    snprintf(s->how, sizeof s->how, "exited with status %ld", strtol(p + 10, NULL, 10));
  } else if (!strncmp(line, "parallax: ", 10) && !s->first_error[0]) {
    s->started = true;
    snprintf(s->first_error, sizeof s->first_error, "%.*s", (int)strcspn(line + 10, "\n"), line + 10);
    if (s->rank < 0 && !strncmp(line + 10, "rank ", 5)) s->rank = strtoll(line + 15, NULL, 10);
  }
}

/* Copies what the job wrote on stderr to ours, feeding whole lines to the
 * scanner; true at the end of the stream (every writer closed it). */
static bool relay(int fd, char *line, size_t *used, size_t cap, scan_state *s) {
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    fwrite(buf, 1, (size_t)n, stderr);
    for (ssize_t i = 0; i < n; i++) {
      if (*used < cap - 1) line[(*used)++] = buf[i];
      if (buf[i] == '\n') {
        line[*used] = '\0';
        scan_line(s, line);
        *used = 0;
      }
    }
  }
  fflush(stderr);
  return n == 0;
}

px_status px_launch_attempt(char *const *argv, px_launch_outcome *out, int *stopped_by, px_err *err) {
  memset(out, 0, sizeof *out);
  out->rank = -1;
  *stopped_by = 0;
  int errp[2], execp[2];
  if (pipe(errp) != 0) return px_err_set(err, PX_ERR_RUNTIME, "pipe: %s", strerror(errno));
  if (pipe(execp) != 0 || fcntl(execp[1], F_SETFD, FD_CLOEXEC) != 0) {
    close(errp[0]), close(errp[1]);
    return px_err_set(err, PX_ERR_RUNTIME, "pipe: %s", strerror(errno));
  }
  struct sigaction sa = {0}, old[3];
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  got_signal = 0;
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
  double t0 = px_clock_s();
  fflush(stdout), fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    /* its own process group, which launch signals and sweeps after the
     * attempt; SIGTERM (mpirun ends its ranks) when launch dies, even by SIGKILL */
    setpgid(0, 0);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127); /* launch died before the line above */
#endif
    /* no terminal input: a background process group reading it would be stopped */
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO), close(null);
    dup2(errp[1], STDERR_FILENO);
    close(errp[0]), close(errp[1]), close(execp[0]);
    execvp(argv[0], argv);
    int e = errno; /* tell the launcher why, through the pipe exec would have closed */
    if (write(execp[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  close(errp[1]), close(execp[1]);
  px_status st = PX_OK;
  if (pid < 0) {
    st = px_err_set(err, PX_ERR_RUNTIME, "fork: %s", strerror(errno));
    close(errp[0]), close(execp[0]);
  } else {
    setpgid(pid, pid); /* as the child does, whichever runs first */
    child_pid = pid;
    if (got_signal) kill(-pid, got_signal); /* came before the child was known */
    int e = 0;
    ssize_t n;
    while ((n = read(execp[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(execp[0]);
    if (n == (ssize_t)sizeof e)
      st = px_err_set(err, PX_ERR_INPUT, "--mpirun: cannot run '%s': %s", argv[0], strerror(e));
    /* stderr until the job ends; then what is left in the pipe (a rank's
     * descendant holding it open does not keep the launcher waiting) */
    scan_state s = {.rank = -1, .name_rank = -1};
    char line[1024];
    size_t used = 0;
    fcntl(errp[0], F_SETFL, fcntl(errp[0], F_GETFL) | O_NONBLOCK);
    int status = 0;
    bool eof = false;
    for (;;) {
      struct pollfd pfd = {errp[0], POLLIN, 0};
      if (!eof) poll(&pfd, 1, 200), eof = relay(errp[0], line, &used, sizeof line, &s);
      pid_t w = waitpid(pid, &status, eof ? 0 : WNOHANG); /* once stderr is closed, just the end */
      if (w == pid || (w < 0 && errno != EINTR)) break;
    }
    if (!eof) relay(errp[0], line, &used, sizeof line, &s);
    if (used) {
      line[used] = '\0';
      scan_line(&s, line);
    }
    close(errp[0]);
    kill(-pid, SIGKILL); /* what is left of the attempt's processes (a rank mpirun did not end) */
    child_pid = 0;
    out->wall_s = px_clock_s() - t0;
    out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    out->rank = s.rank;
    out->started = s.started;
    char mp[64];
    if (out->signal) snprintf(mp, sizeof mp, "mpirun killed by signal %d (%s)", out->signal, strsignal(out->signal));
    else snprintf(mp, sizeof mp, "mpirun exit status %d", out->exit_code);
    if (!s.started)
      snprintf(out->cause, sizeof out->cause, s.first_text[0] ? "%s (%s)" : "%s%s", s.first_text, mp);
    else if (s.rank >= 0 && s.how[0])
      snprintf(out->cause, sizeof out->cause, "rank %lld %s (%s)%s%s", (long long)s.rank, s.how, mp,
               s.first_error[0] ? "; first error: " : "", s.first_error);
    else if (s.first_error[0])
      snprintf(out->cause, sizeof out->cause, "%s (%s)", s.first_error, mp);
    else
      snprintf(out->cause, sizeof out->cause, "%s", mp);
  }
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
  *stopped_by = got_signal;
  return st;
}

/* ---- the ranks' side ---- */

void px_launch_rank_tie(void) {
#ifdef __linux__
  if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) return;
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) raise(SIGKILL); /* it died before the line above */
#endif
}

void px_launch_rank_started(int rank, int size) {
  const char *attempt = getenv("PX_LAUNCH_ATTEMPT");
  if (!attempt || rank != 0) return;
  fprintf(stderr, "%s%.16s: %d rank%s started\n", PX_LAUNCH_STARTED, attempt, size, size == 1 ? "" : "s");
  fflush(stderr);
}

/* ---- checkpoints ---- */

bool px_launch_ckpt_step(const char *dir, int64_t *step) {
  px_err e = {0};
  const px_exec_module *x = px_cli_exec(&e); /* the one rule, px_ckpt_probe; launch loads the module anyway */
  px_ckpt_probe_info p = {.found = false};
  if (x) x->ckpt_probe(dir, &p);
  if (p.found && p.step >= 0) *step = p.step;
  return p.found && p.step >= 0;
}
