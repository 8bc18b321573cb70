/* Runs gnuplot on a sweep directory's data files (PNG and SVG of each plot),
 * capturing gnuplot's stderr for the error message. */
#include "report/plots.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/paths.h"
#include "report/plotdata.h"

extern char **environ;

static const px_plot_desc plots[] = {
    {"heatmap", "heatmap.dat", "Throughput by TP and PP",
     "Best tokens/s for each tensor-parallel (TP) by pipeline-parallel (PP) size, taking the best of the "
     "other choices (ZeRO stage, micro-batch, schedule, recomputation). Hatched cells: no plan of that shape "
     "fits in GPU memory. Red frame: the best cell."},
    {"pareto", "plans.dat", "Memory against throughput",
     "Every plan that fits: peak memory per GPU against tokens/s. The red line is the Pareto front, the plans "
     "that no other plan beats on both memory and speed; the circle is the top-ranked plan. Filled points are "
     "simulated; open ones (a sweep for the plots) are shown at their bound, the most tokens/s they could "
     "reach: a simulated plan with less memory is faster than that, so none is on the front."},
    {"memory", "memory.dat", "Memory per GPU of the chosen plan",
     "Peak memory per GPU of the chosen plan on each pipeline stage, split into parameters, gradients, "
     "optimizer states, activations, communication buffers and workspace; the dashed line is the usable HBM."},
    {"vary", "vary.dat", "The best plan as the hardware varies",
     "A sweep that varies a cluster field: for each of its values, the tokens/s of the best plan that fits (and, "
     "with training tokens and a price, its cost). A missing point: no plan fits with that value."},
    {"timeline", "timeline.dat", "One training step",
     "One simulated training step of the chosen plan: a band per pipeline stage, with the compute lane on "
     "top and the TP, DP, pipeline-send and pipeline-receive lanes below it. Grey in a compute lane is idle "
     "time, mostly the pipeline bubble; numbers are micro-batches."},
    {"scaling", "scaling.dat", "Scaling with the GPU count",
     "Tokens/s of the chosen plan's TP and PP shape as data parallelism adds GPUs (log-log axes), against "
     "linear scaling from the smallest count; MFU on the right axis."},
};

const px_plot_desc *px_plots_list(size_t *count) {
  *count = sizeof plots / sizeof plots[0];
  return plots;
}

/* True when the file exists and has a line that is neither blank nor a '#' comment. */
static bool has_data(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return false;
  char *line = NULL;
  size_t cap = 0;
  bool found = false;
  while (!found && getline(&line, &cap, fp) >= 0) {
    const char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    found = *p && *p != '\n' && *p != '#';
  }
  free(line);
  fclose(fp);
  return found;
}

/* Looks for an executable named `name` in $PATH. */
static bool find_in_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (!path || !*path) return false;
  const char *p = path;
  for (;;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int n = len ? snprintf(out, cap, "%.*s/%s", (int)len, p, name) : snprintf(out, cap, "./%s", name);
    struct stat sb;
    if (n > 0 && (size_t)n < cap && stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0)
      return true;
    if (!end) return false;
    p = end + 1;
  }
}

/* Appends s to a gnuplot single-quoted string literal (a quote is doubled). */
static bool gp_quote(char *out, size_t cap, size_t *len, const char *s) {
  for (; *s; s++) {
    size_t need = *s == '\'' ? 2 : 1;
    if (*len + need + 1 > cap) return false;
    if (*s == '\'') out[(*len)++] = '\'';
    out[(*len)++] = *s;
  }
  out[*len] = '\0';
  return true;
}

static bool gp_append(char *out, size_t cap, size_t *len, const char *s) {
  size_t n = strlen(s);
  if (*len + n + 1 > cap) return false;
  memcpy(out + *len, s, n + 1);
  *len += n;
  return true;
}

/* gnuplot's stderr on one line: lines joined with " / ", caret-only lines dropped. */
static void one_line(const char *in, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  const char *p = in;
  while (*p) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    size_t a = 0, b = len;
    while (a < b && (p[a] == ' ' || p[a] == '\t' || p[a] == '\r')) a++;
    while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t' || p[b - 1] == '\r')) b--;
    bool caret = b == a + 1 && p[a] == '^';
    if (b > a && !caret) {
      const char *sep = n ? " / " : "";
      int w = snprintf(out + n, cap - n, "%s%.*s", sep, (int)(b - a), p + a);
      if (w < 0 || (size_t)w >= cap - n) {
        if (cap > 4) memcpy(out + cap - 4, "...", 4);
        return;
      }
      n += (size_t)w;
    }
    if (!end) break;
    p = end + 1;
  }
}

/* Runs gnuplot on one script; stderr (up to cap - 1 bytes) lands in errbuf. */
static px_status run_gnuplot(const char *gnuplot, const char *script, const char *expr, char *errbuf, size_t cap,
                             int *exit_code, px_err *err) {
  errbuf[0] = '\0';
  *exit_code = -1;
  int fds[2];
  if (pipe(fds) != 0) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create a pipe: %s", script, strerror(errno));
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  char *argv[] = {(char *)"gnuplot", (char *)"-e", (char *)expr, (char *)script, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot run %s: %s", script, gnuplot, strerror(rc));
  }
  size_t n = 0;
  char chunk[4096];
  for (;;) {
    ssize_t got = read(fds[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size_t take = (size_t)got < cap - 1 - n ? (size_t)got : cap - 1 - n;
    memcpy(errbuf + n, chunk, take);
    n += take;
  }
  errbuf[n] = '\0';
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return px_err_set(err, PX_ERR_RUNTIME, "%s: waitpid: %s", script, strerror(errno));
  }
  if (WIFEXITED(status))
    *exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    *exit_code = 128 + WTERMSIG(status);
  return PX_OK;
}

/* Renders one plot in one format through a temporary file and rename. */
static px_status render_one(const char *gnuplot, const char *script, const char *dir, const px_plot_desc *pl,
                            const char *fmt, px_err *err) {
  char final[4096], tmp[4096 + 64], expr[3 * 4096 + 128];
  int n1 = snprintf(final, sizeof final, "%s/%s.%s", dir, pl->name, fmt);
  int n2 = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", final, (long)getpid());
  if (n1 < 0 || (size_t)n1 >= sizeof final || n2 < 0 || (size_t)n2 >= sizeof tmp)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
  size_t len = 0;
  bool ok = gp_append(expr, sizeof expr, &len, "dir='") && gp_quote(expr, sizeof expr, &len, dir) &&
            gp_append(expr, sizeof expr, &len, "'; fmt='") && gp_append(expr, sizeof expr, &len, fmt) &&
            gp_append(expr, sizeof expr, &len, "'; out='") && gp_quote(expr, sizeof expr, &len, tmp) &&
            gp_append(expr, sizeof expr, &len, "'");
  if (!ok) return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);

  char errbuf[8192];
  int code;
  px_status st = run_gnuplot(gnuplot, script, expr, errbuf, sizeof errbuf, &code, err);
  if (st) {
    unlink(tmp);
    return st;
  }
  struct stat sb;
  bool made = stat(tmp, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
  if (code != 0 || !made) {
    unlink(tmp);
    char msg[700];
    one_line(errbuf, msg, sizeof msg);
    if (code != 0)
      return px_err_set(err, PX_ERR_RUNTIME, "%s: gnuplot failed (%s %d) on %s/%s for %s: %s", script,
                        code > 128 ? "signal" : "exit status", code > 128 ? code - 128 : code, dir, pl->input,
                        fmt, msg[0] ? msg : "(no message)");
    return px_err_set(err, PX_ERR_RUNTIME, "%s: gnuplot wrote no %s output for %s/%s%s%s", script, fmt, dir,
                      pl->input, msg[0] ? ": " : "", msg);
  }
  /* Durable before it is visible under its final name, like px_afile_commit. */
  int fd = open(tmp, O_RDONLY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  if (rename(tmp, final) != 0) {
    int e = errno;
    unlink(tmp);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot rename into place: %s", final, strerror(e));
  }
  return PX_OK;
}

px_status px_plots_render(const char *dir, px_err *err) {
  struct stat sb;
  if (!dir || !*dir) return px_err_set(err, PX_ERR_INPUT, "plots: empty directory name");
  if (strchr(dir, '\n')) return px_err_set(err, PX_ERR_INPUT, "%s: directory name has a newline", dir);
  if (stat(dir, &sb) != 0) return px_err_set(err, PX_ERR_INPUT, "%s: cannot open: %s", dir, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: not a directory", dir);

  char gnuplot[4096];
  bool have_gnuplot = false;
  for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++) {
    const px_plot_desc *pl = &plots[i];
    char input[4096], script[4096];
    int n1 = snprintf(input, sizeof input, "%s/%s", dir, pl->input);
    int n2 = snprintf(script, sizeof script, "%s/plots/%s.gp", px_data_dir(), pl->name);
    if (n1 < 0 || (size_t)n1 >= sizeof input || n2 < 0 || (size_t)n2 >= sizeof script)
      return px_err_set(err, PX_ERR_INPUT, "%.64s...: path too long", dir);
    if (!has_data(input)) continue;
    if (!have_gnuplot) {
      if (!find_in_path("gnuplot", gnuplot, sizeof gnuplot))
        return px_err_set(err, PX_ERR_RUNTIME,
                          "%s: gnuplot not found on PATH (install gnuplot-nox: scripts/install-deps.sh)", script);
      have_gnuplot = true;
    }
    if (stat(script, &sb) != 0 || !S_ISREG(sb.st_mode))
      return px_err_set(err, PX_ERR_RUNTIME, "%s: plot script missing (is PARALLAX_HOME the source tree?)", script);
    static const char *const fmts[] = {"png", "svg"};
    for (size_t f = 0; f < 2; f++) {
      px_status st = render_one(gnuplot, script, dir, pl, fmts[f], err);
      if (st) return st;
    }
  }
  return PX_OK;
}

px_status px_plots_plan(const char *dir, const px_model *m, const px_cluster *c, const px_parallel *par, px_err *err) {
  px_status st = px_mkdir_p(dir, err);
  if (!st) st = px_plotdata_plan(m, c, par, dir, err);
  return st ? st : px_plots_render(dir, err);
}
