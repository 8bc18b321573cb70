/* Benchmark: how long a user waits for a sweep. Each question of the
 * docs' "Sweep speed" table (docs/simulator.md) is answered by a whole
 * `parallax sweep` process, the table of the best 10 as a user asks for it,
 * and `make demo`'s sweep with its report (plots rendered, index.html):
 * wall time from spawn to exit (median, least and most of REPS runs), the
 * child's CPU time (user + system, median) and peak RSS, with the plans
 * enumerated and simulated (from its counts line). The load average before
 * and after says how busy the machine was. With --check each table is also
 * compared, once, with the sweep that simulates every plan (--no-prune):
 * every line but the counts line must be the same.
 * Usage: bench_sweep PARALLAX [--reps N] [--threads N] [--check] [--quick] */
#define _DEFAULT_SOURCE /* wait4, getloadavg, mkdtemp */
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_REPS 21
#define MAX_ARGS 40

typedef struct {
  const char *label;
  const char *args; /* after `parallax sweep`, space-separated */
  bool report;      /* make demo: --report DIR too */
} question;

/* The table (docs/simulator.md, "Sweep speed"): the demo's question, GPT-3 on A100s, Llama 3 405B at
 * 131K tokens, DeepSeek-V3, and make demo (scripts/demo.sh: the demo's question with its report). */
static const question qs[] = {
    {"Llama 3 70B / 512 H100", "-m llama3-70b -c dgx-h100 -g 512 -B 512 -n 15T -u 2.5", false},
    {"GPT-3 175B / 1,024 A100", "-m gpt3-175b -c dgx-a100 -g 1024 -B 1536", false},
    {"Llama 3 405B 131K / 16,384 H100", "-m llama3-405b -c dgx-h100 -g 16384 -s 131072 -B 128", false},
    {"DeepSeek-V3 / 1,024 H100", "-m deepseek-v3 -c dgx-h100 -g 1024 -B 1024", false},
    {"make demo (sweep + report)", "-m llama3-70b -c dgx-h100 -g 512 -B 512 -n 15T -u 2.5", true},
};
/* --quick: a small question alone (the README's) */
static const question quick_q = {"Llama 3 8B / 16 H100 (--quick)", "-m llama3-8b -c dgx-h100 -g 16 -B 64", false};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  double wall_s, cpu_s;
  long rss_kib;
} run_stats;

/* One run of argv, stdout to out_path (stderr to /dev/null). */
static int run_once(char *const argv[], const char *out_path, run_stats *rs) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  double t0 = now_s();
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    fprintf(stderr, "bench_sweep: cannot start %s: %s\n", argv[0], strerror(rc));
    return 1;
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) return 1;
  rs->wall_s = now_s() - t0;
  rs->cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
              1e-6 * (double)ru.ru_stime.tv_usec;
  rs->rss_kib = ru.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_sweep: %s sweep ... exited with %d\n", argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  return 0;
}

/* argv of `PX sweep ARGS --top 10 [-x THREADS] [extra...]` in buf (words split in place). */
static int build_argv(char *px, const question *q, const char *threads, char *buf, size_t cap, char **argv,
                      const char *extra1, const char *extra2) {
  int n = 0;
  argv[n++] = px;
  argv[n++] = "sweep";
  snprintf(buf, cap, "%s", q->args);
  for (char *w = strtok(buf, " "); w && n < MAX_ARGS - 8; w = strtok(NULL, " ")) argv[n++] = w;
  argv[n++] = "--top";
  argv[n++] = "10";
  if (threads) argv[n++] = "-x", argv[n++] = (char *)threads;
  if (extra1) argv[n++] = (char *)extra1;
  if (extra2) argv[n++] = (char *)extra2;
  argv[n] = NULL;
  return n;
}

/* The counts line's plans enumerated and simulated. */
static void counts(const char *path, long long *enumerated, long long *simulated) {
  *enumerated = *simulated = -1;
  FILE *f = fopen(path, "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) {
    char *e = strstr(line, " plans enumerated:"), *s = strstr(line, " simulated");
    if (!e || !s) continue;
    *enumerated = atoll(line);
    while (s > line && s[-1] != ' ') s--;
    *simulated = atoll(s);
    break;
  }
  if (f) fclose(f);
}

/* Whether two tables are the same but for their counts line (the second). */
static bool same_tables(const char *a, const char *b) {
  FILE *x = fopen(a, "r"), *y = fopen(b, "r");
  bool same = x && y;
  char lx[8192], ly[8192];
  for (int n = 1; same; n++) {
    char *gx = fgets(lx, sizeof lx, x), *gy = fgets(ly, sizeof ly, y);
    if (!gx || !gy) {
      same = !gx && !gy;
      break;
    }
    if (n != 2 && strcmp(lx, ly)) same = false;
  }
  if (x) fclose(x);
  if (y) fclose(y);
  return same;
}

static void machine(void) {
  char model[256] = "?", line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
      snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
      model[strcspn(model, "\n")] = '\0';
      break;
    }
  if (f) fclose(f);
  printf("# machine: %ld cores online, %s\n", sysconf(_SC_NPROCESSORS_ONLN), model);
}

static void load(const char *when) {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) == 3) printf("# load average %s: %.2f %.2f %.2f (1, 5, 15 min)\n", when, l[0], l[1], l[2]);
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: bench_sweep PARALLAX [--reps N] [--threads N] [--check] [--quick]\n");
    return 2;
  }
  char *px = argv[1];
  int reps = 5;
  const char *threads = NULL;
  bool check = false, quick = false;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
    else if (!strcmp(argv[i], "--check")) check = true;
    else if (!strcmp(argv[i], "--quick")) quick = true;
    else {
      fprintf(stderr, "usage: bench_sweep PARALLAX [--reps N] [--threads N] [--check] [--quick]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS) reps = 5;
  char dir[] = "/tmp/bench_sweep.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("bench_sweep: mkdtemp");
    return 1;
  }
  char out[64], ref[64], report[64];
  snprintf(out, sizeof out, "%s/out.txt", dir);
  snprintf(ref, sizeof ref, "%s/ref.txt", dir);
  snprintf(report, sizeof report, "%s/report", dir);
  machine();
  load("before");
  printf("# whole `parallax sweep ... --top 10` process%s: median, least and most wall time of %d runs, the median "
         "CPU time (user + system) and the largest peak RSS\n",
         threads ? " (-x threads)" : "", reps);
  printf("# %-32s %10s %9s %8s %8s %8s %8s %8s %s\n", "question", "enumerated", "simulated", "wall_s", "min_s",
         "max_s", "cpu_s", "rss_mib", check ? "vs --no-prune" : "");
  const question *list = quick ? &quick_q : qs;
  size_t nq = quick ? 1 : sizeof qs / sizeof qs[0];
  int rc = 0;
  for (size_t k = 0; k < nq; k++) {
    const question *q = &list[k];
    char buf[512], *av[MAX_ARGS];
    build_argv(px, q, threads, buf, sizeof buf, av, q->report ? "--report" : NULL, q->report ? report : NULL);
    double wall[MAX_REPS], cpu[MAX_REPS];
    long rss = 0;
    for (int r = 0; r < reps; r++) {
      run_stats rs;
      if (run_once(av, out, &rs)) return 1;
      wall[r] = rs.wall_s, cpu[r] = rs.cpu_s;
      if (rs.rss_kib > rss) rss = rs.rss_kib;
    }
    long long en, sim;
    counts(out, &en, &sim);
    qsort(wall, (size_t)reps, sizeof *wall, cmp_double);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
    printf("  %-32s %10lld %9lld %8.2f %8.2f %8.2f %8.2f %8.1f", q->label, en, sim, wall[reps / 2], wall[0],
           wall[reps - 1], cpu[reps / 2], (double)rss / 1024.0);
    if (check && !q->report) {
      char buf2[512], *av2[MAX_ARGS];
      build_argv(px, q, threads, buf2, sizeof buf2, av2, "--no-prune", NULL);
      run_stats rs;
      if (run_once(av2, ref, &rs)) return 1;
      bool same = same_tables(out, ref);
      printf(" %s (%.1f s)", same ? "identical" : "DIFFERENT", rs.wall_s);
      if (!same) rc = 1;
    }
    printf("\n");
    fflush(stdout);
  }
  load("after");
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  if (system(rm) != 0) fprintf(stderr, "bench_sweep: could not remove %s\n", dir);
  return rc;
}
