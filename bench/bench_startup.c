/* Benchmark: whole-process start-up of parallax (wall time from spawn to exit,
 * peak RSS) for --help, and plan and sim of Llama 3 405B on 16,384 H100s.
 * Usage: bench_startup PARALLAX [REPS]   (median wall time of REPS runs, 11 by default) */
#define _DEFAULT_SOURCE /* wait4 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_REPS 101
#define PLAN_FLAGS "-m", "llama3-405b", "-c", "dgx-h100", "-g", "16384", "-t", "8", "-p", "16", "-S", "-b", "1", \
                   "-B", "2048", "-z", "1", "-e", "interleaved", "-v", "2"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One run of argv with stdout and stderr to /dev/null: wall seconds and peak
 * RSS in KiB. posix_spawn (vfork-like) so that the child's peak is its own
 * image's, not a copy of this process's. */
static int run_once(char *const argv[], double *wall_s, long *rss_kib) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  double t0 = now_s();
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    fprintf(stderr, "bench_startup: cannot start %s: %s\n", argv[0], strerror(rc));
    return 1;
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) return 1;
  *wall_s = now_s() - t0;
  *rss_kib = ru.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_startup: %s %s exited with %d\n", argv[0], argv[1], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_startup PARALLAX [REPS]\n");
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 11;
  if (reps < 1 || reps > MAX_REPS) reps = 11;
  char *px = argv[1];
  char *help[] = {px, "--help", NULL};
  char *plan[] = {px, "plan", PLAN_FLAGS, NULL};
  char *sim[] = {px, "sim", PLAN_FLAGS, NULL};
  struct {
    const char *name;
    char **argv;
  } cases[] = {{"--help", help}, {"plan llama3-405b 16384", plan}, {"sim llama3-405b 16384", sim}};
  printf("# whole-process start-up of %s, median of %d runs (wall), peak RSS the largest\n", px, reps);
  printf("# %-24s %10s %10s %10s\n", "command", "wall_ms", "min_ms", "rss_mib");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double t[MAX_REPS];
    long rss = 0;
    for (int r = 0; r < reps; r++) {
      long k = 0;
      if (run_once(cases[c].argv, &t[r], &k)) return 1;
      if (k > rss) rss = k;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    printf("  %-24s %10.1f %10.1f %10.1f\n", cases[c].name, 1e3 * t[reps / 2], 1e3 * t[0], (double)rss / 1024.0);
  }
  return 0;
}
