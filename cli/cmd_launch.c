/* parallax launch: `mpirun -np N parallax run ...` under supervision, relaunched
 * from its last complete checkpoint when it fails; with fewer slots, on the
 * planner's best plan for fewer ranks, the checkpoint re-split for it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/exec.h"
#include "cli/launch.h"
#include "core/json.h"
#include "plan/planfile.h"
#include "report/plan.h"
#include "sim/replan.h"

/* The wait before the first relaunch after a rank's failure (--backoff-s),
 * doubled for each further one up to the cap: a failure that repeats (a node
 * rebooting, a file system catching up) is not retried in a tight loop. */
#define BACKOFF_S 2
#define BACKOFF_CAP_S 300
#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage[] =
    "usage: parallax launch [--max-restarts N] [--min-ranks M] [--np N | --hostfile FILE] [--mpirun CMD]\n"
    "                       [--backoff-s S] [--log FILE] -- RUN-FLAGS (parallax run's: --model M ... --ckpt DIR ...)\n\n"
    "Supervises `mpirun -np N parallax run RUN-FLAGS`: when a rank of the job fails (a rank dies, a node\n"
    "is lost), logs why and which rank, waits --backoff-s S (" STR(BACKOFF_S) ", doubled for each restart up to "
    STR(BACKOFF_CAP_S) " s) and\n"
    "relaunches it with --resume from the last complete checkpoint in --ckpt DIR, up to --max-restarts\n"
    "times. Not relaunched: a run that refuses its input (exit 2, as every rank agrees), a launcher that\n"
    "fails before any rank started (exit 2, with its message), a run that ends without an error short\n"
    "of its --steps (its last checkpoint's step; exit 1). The slots are read again before each attempt\n"
    "(the hostfile's slots=, or PX_LAUNCH_SLOTS=N or N0,N1,... per attempt); with fewer than the plan's\n"
    "ranks but at least --min-ranks, it goes on with the planner's best plan for that count that the\n"
    "backend runs (keeping the flags' tp, pp, ... where they fit, and the global batch), the checkpoint\n"
    "re-split into DIR.<N>ranks. Each attempt's ranks see PX_LAUNCH_ATTEMPT (0, 1, ...); rank 0 says\n"
    "on stderr when they started. mpirun runs in its own process group and ends when launch does, even\n"
    "by SIGKILL, as each rank ends with its mpirun.\n\n";

/* The plan of an attempt: the flags' own (the original rank count), or one the planner chose. */
typedef struct {
  int64_t ranks;
  bool original;
  px_plan plan;
  bool compiled;
  char dir[4096];      /* where its checkpoints go */
  char plan_file[4200]; /* the chosen plan's file (not original) */
  char desc[256];
} choice;

typedef struct {
  const px_exec_module *x;
  FILE *log;
  int argc;
  char **argv; /* "run" and the run's flags as given */
  px_args run; /* their parse (pointers into argv) */
  px_parallel fixed; /* the flags' choices, unset where they made none */
  px_model m;
  px_cluster c;    /* resolved for the original rank count */
  px_plan orig;    /* the flags' plan on the original ranks */
  int64_t n0;      /* its ranks */
  const char *ckpt; /* the flags' --ckpt */
  const char *backend; /* the run's */
} launch;

/* One JSON line in the --log file; takes obj. */
static void log_event(launch *L, cJSON *obj, const char *event, int64_t attempt) {
  if (!L->log || !obj) {
    cJSON_Delete(obj);
    return;
  }
  char *s = cJSON_PrintUnformatted(obj); /* "{...}": its fields after these */
  if (s)
    fprintf(L->log, "{\"event\":\"%s\",\"attempt\":%lld,\"time_unix_s\":%lld%s%s\n", event, (long long)attempt,
            (long long)time(NULL), s[1] == '}' ? "" : ",", s + 1),
        fflush(L->log);
  free(s);
  cJSON_Delete(obj);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("parallax launch: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  va_end(ap);
}

/* The flags a re-planned run takes from its plan file instead, and those launch sets itself. */
static bool drop_plan_flag(const char *name) {
  return px_args_plan_choice(name) || !strcmp(name, "gpus") || !strcmp(name, "nodes") || !strcmp(name, "ckpt") ||
         !strcmp(name, "resume");
}
static bool drop_ckpt_flag(const char *name) { return !strcmp(name, "ckpt") || !strcmp(name, "resume"); }

#define RUN_GROUPS (PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_RUN)

static void choice_free(choice *ch) {
  if (ch->compiled) px_plan_free(&ch->plan);
  ch->compiled = false;
}

/* px_replan_runs_fn: the run's backend; says why when the best plan of a ranking is not one it runs. */
static px_status backend_runs(void *ctx, const px_plan *plan, int64_t ranks, int64_t refused, px_err *why) {
  launch *L = ctx;
  px_status sup = L->x->train_support(plan, L->backend, why);
  if (sup == PX_ERR_INPUT && !refused) {
    char desc[256], msg[sizeof why->msg + 256];
    L->x->reshard_describe(plan, desc, sizeof desc);
    px_cli_words(why->msg, msg, sizeof msg);
    say("the planner's best plan for %lld ranks (%s) is one the %s backend cannot run: %s", (long long)ranks, desc,
        L->backend, msg);
  }
  return sup;
}

/* The plan of an attempt on `slots` slots: the original one when they
 * suffice, else the planner's best the backend runs for the most ranks from
 * slots down to min_ranks (its file written beside the checkpoint). */
static px_status choose(launch *L, int64_t slots, int64_t min_ranks, choice *ch, px_err *err) {
  memset(ch, 0, sizeof *ch);
  if (slots >= L->n0) {
    ch->ranks = L->n0;
    ch->original = true;
    snprintf(ch->dir, sizeof ch->dir, "%s", L->ckpt);
    L->x->reshard_describe(&L->orig, ch->desc, sizeof ch->desc);
    return PX_OK;
  }
  px_replan_opts o = {.fixed = L->fixed, .train = L->orig.par, .max_ranks = slots, .min_ranks = min_ranks,
                      .runs = backend_runs, .runs_ctx = L};
  px_replan *r = px_calloc(1, sizeof *r, err);
  if (!r) return PX_ERR_RUNTIME;
  px_status st = px_replan_best(&L->m, &L->c, &o, r, err);
  if (st) {
    free(r);
    return st;
  }
  ch->ranks = r->ranks;
  ch->plan = r->plan;
  ch->compiled = true;
  char base[4096];
  snprintf(base, sizeof base, "%s", L->ckpt);
  for (size_t n = strlen(base); n > 1 && base[n - 1] == '/';) base[--n] = '\0';
  /* a path cut short would be another directory: refused instead */
  if ((size_t)snprintf(ch->dir, sizeof ch->dir, "%s.%lldranks", base, (long long)ch->ranks) >= sizeof ch->dir ||
      (size_t)snprintf(ch->plan_file, sizeof ch->plan_file, "%s.%lldranks.plan.json", base, (long long)ch->ranks) >=
          sizeof ch->plan_file)
    st = px_err_set(err, PX_ERR_INPUT, "--ckpt %.200s...: too long a path for the checkpoint of %lld ranks beside it",
                    base, (long long)ch->ranks);
  if (!st && r->refused)
    say("the best plan the %s backend runs is ranked %lld (it cannot run the %lld ahead of it)", L->backend,
        (long long)r->refused + 1, (long long)r->refused);
  if (!st) st = px_report_plan_file(ch->plan_file, &L->m, &r->cluster, &r->par, err);
  if (r->relaxed && !st)
    say("no plan for %lld ranks that the %s backend runs keeps the flags' choices; the planner's best keeps the "
        "training's own (the global batch, the sequence length, the precision, fine-tuning, the MTP module) only",
        (long long)ch->ranks, L->backend);
  free(r);
  if (st) choice_free(ch);
  else L->x->reshard_describe(&ch->plan, ch->desc, sizeof ch->desc);
  return st;
}

static const px_plan *plan_of(launch *L, const choice *ch) { return ch->original ? &L->orig : &ch->plan; }

/* Re-splits the checkpoint in from for the attempt's plan into its directory. */
static px_status reshard(launch *L, const char *from, const choice *ch, int64_t attempt, px_err *err) {
  px_reshard *r = NULL;
  uint64_t bytes = 0;
  px_status st = L->x->reshard_open(from, plan_of(L, ch), 0, 1, &r, err);
  if (!st) st = L->x->reshard_write(r, ch->dir, &bytes, err);
  if (!st) {
    say("checkpoint of step %lld re-split from %s into %s (%.1f MiB)", (long long)L->x->reshard_step(r), from, ch->dir,
        (double)bytes / (1 << 20));
    cJSON *o = cJSON_CreateObject();
    if (o) {
      px_json_add_num(o, "step", (double)L->x->reshard_step(r));
      cJSON_AddStringToObject(o, "from", from);
      cJSON_AddStringToObject(o, "to", ch->dir);
      px_json_add_num(o, "bytes", (double)bytes);
    }
    log_event(L, o, "reshard", attempt);
  }
  L->x->reshard_free(r);
  return st ? px_err_prefix(err, "re-splitting the checkpoint in %s for %lld ranks", from, (long long)ch->ranks) : st;
}

/* mpirun's command line for an attempt (argv strings point into L, ch, mp and the buffers given). */
static char **attempt_argv(launch *L, const choice *ch, char **mp, int nmp, const char *hostfile, bool resume,
                           char *self, char *np) {
  char **v = calloc((size_t)nmp + px_args_without_room(L->argc, L->argv) + 16, sizeof *v);
  if (!v) return NULL;
  int n = 0;
  for (int i = 0; i < nmp; i++) v[n++] = mp[i];
  v[n++] = "-np", v[n++] = np;
  if (hostfile) v[n++] = "--hostfile", v[n++] = (char *)hostfile;
  v[n++] = self;
  int cmd = n;
  n += px_args_without(L->argc, L->argv, PX_GROUPS_RUN, ch->original ? drop_ckpt_flag : drop_plan_flag, v + n);
  v[cmd] = "run"; /* in place of L->argv[0], the "--" */
  if (!ch->original) v[n++] = "--plan", v[n++] = (char *)ch->plan_file;
  v[n++] = "--ckpt", v[n++] = (char *)ch->dir;
  if (resume) v[n++] = "--resume";
  v[n] = NULL;
  return v;
}

/* Splits --mpirun's command at blanks (in place). */
static int split_words(char *s, char **out, int cap) {
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(s, " \t", &save); t && n < cap; t = strtok_r(NULL, " \t", &save)) out[n++] = t;
  return n;
}

/* The ranks the flags need without an --np: their GPU count, or tp x pp x cp x dp when dp is given. */
static int64_t flags_ranks(const px_args *a) {
  if (a->gpus) return a->gpus;
  if (a->par.dp <= 0) return 0;
  return (a->par.tp > 0 ? a->par.tp : 1) * (a->par.pp > 0 ? a->par.pp : 1) * (a->par.cp > 0 ? a->par.cp : 1) *
         a->par.dp;
}

int px_cmd_launch(int argc, char **argv) {
  px_err err = {0};
  int sep = 1;
  while (sep < argc && strcmp(argv[sep], "--") != 0) sep++;
  px_args a;
  int code = px_cli_start(&a, "parallax launch", PX_GROUPS_LAUNCH, PX_GROUPS_LAUNCH, usage, sep, argv);
  if (code >= 0) return code;
  if (a.json)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax launch: --json goes after -- (the run's report); the "
                                  "restart log as JSON lines: --log FILE"), &err);
  if (sep == argc)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax launch: expected -- and then the run's flags (see "
                                  "parallax launch --help)"), &err);
  launch L = {0};
  L.argc = argc - sep;
  L.argv = argv + sep; /* argv[sep] = "--" stands for the command name */
  char **copy = calloc((size_t)L.argc + 1, sizeof *copy);
  if (!copy) return px_cli_fail(px_err_set(&err, PX_ERR_RUNTIME, "out of memory"), &err);
  memcpy(copy, L.argv, (size_t)L.argc * sizeof *copy);
  copy[0] = "run";
  px_status st = px_args_parse(&L.run, "parallax run (after --)", PX_GROUPS_RUN, L.argc, copy, &err);
  if (!st && L.run.npos) st = px_err_set(&err, PX_ERR_INPUT, "parallax run (after --) takes no positional arguments");
  if (!st && !L.run.ckpt_dir)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: the run flags need --ckpt DIR: a relaunch resumes from the "
                    "last complete checkpoint there");
  if (!st && L.run.help) st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: --help goes before -- (parallax run --help for the run's)");
  int64_t max_restarts = a.max_restarts >= 0 ? a.max_restarts : 3;
  if (!st && a.min_ranks && a.np && a.min_ranks > a.np)
    st = px_err_set(&err, PX_ERR_INPUT, "--min-ranks %lld is more than --np %lld", (long long)a.min_ranks, (long long)a.np);
  if (!st && a.hostfile && access(a.hostfile, R_OK) != 0)
    st = px_err_set(&err, PX_ERR_INPUT, "--hostfile %s: cannot be read", a.hostfile);
  int64_t slots = 0;
  const char *slots_from = NULL;
  if (!st) st = px_launch_slots(a.hostfile, 0, a.np, &slots, &slots_from, &err);
  /* the original rank count: --np, the flags', or the slots */
  L.n0 = a.np ? a.np : flags_ranks(&L.run);
  if (!st && !L.n0) L.n0 = slots;
  if (!st && !L.n0)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: how many ranks? give --np N, a --hostfile, or the run's "
                    "--gpus or --dp");
  if (!st && a.min_ranks > L.n0)
    st = px_err_set(&err, PX_ERR_INPUT, "--min-ranks %lld is more than the plan's %lld ranks", (long long)a.min_ranks,
                    (long long)L.n0);
  L.ckpt = L.run.ckpt_dir;
  int64_t step0 = -1;
  /* --overwrite is not passed on: until the new job's first checkpoint commits, a relaunch would resume the old one */
  if (!st && L.run.overwrite)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: --overwrite is not taken (a relaunch before the new job's "
                    "first checkpoint would resume the old one): move the old checkpoint away, or give another --ckpt");
  if (!st && !L.run.resume && px_launch_ckpt_step(L.ckpt, &step0))
    st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: --ckpt %s already holds a checkpoint (step %lld): add "
                    "--resume to go on from it, or give an empty directory", L.ckpt, (long long)step0);
  if (st) {
    free(copy);
    return px_cli_fail(st, &err);
  }
  int64_t min_ranks = a.min_ranks ? a.min_ranks : L.n0;
  /* the flags' plan, as the run will make it on n0 ranks: refused here, before any mpirun */
  if (!(L.x = px_cli_exec(&err))) {
    free(copy);
    return px_cli_fail(err.status, &err);
  }
  L.fixed = L.run.par;
  if (L.run.plan_file) {
    px_planfile *pf = px_calloc(1, sizeof *pf, &err);
    st = pf ? px_planfile_load(L.run.plan_file, pf, &err) : PX_ERR_RUNTIME;
    if (!st) px_parallel_fill_unset(&L.fixed, &pf->par);
    free(pf);
  }
  px_args resolved = L.run;
  if (!st) st = px_cli_run_plan(&resolved, L.x, (int)L.n0, &L.backend, &L.m, &L.c, &L.orig, &err);
  if (st) {
    free(copy);
    return px_cli_fail(st, &err);
  }
  /* the ranks mpirun will start are the plan's, and the backend runs it */
  if (L.orig.grid.world != L.n0)
    st = px_err_set(&err, PX_ERR_INPUT, "parallax launch: %s %lld ranks but the run flags' plan needs %lld (tp %lld x "
                    "cp %lld x pp %lld x dp %lld)", a.np ? "--np starts" : "the slots give", (long long)L.n0,
                    (long long)L.orig.grid.world, (long long)L.orig.grid.tp, (long long)L.orig.grid.cp,
                    (long long)L.orig.grid.pp, (long long)L.orig.grid.dp);
  if (!st) st = L.x->train_support(&L.orig, L.backend, &err);
  if (st) {
    px_plan_free(&L.orig);
    free(copy);
    return px_cli_fail(st, &err);
  }
  const int64_t steps = px_cli_run_steps(&L.run, L.x);
  const double backoff_s = a.backoff_s >= 0 ? a.backoff_s : BACKOFF_S;
  if (!L.run.ckpt_every)
    say("note: without --ckpt-every K the run checkpoints only at its end: a relaunch starts from step 0");
  if (a.log_file && !(L.log = fopen(a.log_file, "a")))
    st = px_err_set(&err, PX_ERR_INPUT, "--log %s: cannot be opened for appending", a.log_file);
  char mpbuf[1024], *mp[64];
  snprintf(mpbuf, sizeof mpbuf, "%s", a.mpirun ? a.mpirun : "mpirun");
  int nmp = split_words(mpbuf, mp, 64);
  if (!st && nmp == 0) st = px_err_set(&err, PX_ERR_INPUT, "--mpirun: empty command");
  char self[4096];
  ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sn <= 0) snprintf(self, sizeof self, "%s", "parallax");
  else self[sn] = '\0';

  /* the attempts */
  choice cur = {0}, next;
  bool have_cur = false;
  char cur_dir[4096];
  snprintf(cur_dir, sizeof cur_dir, "%s", L.ckpt);
  int64_t restarts = 0;
  code = 1;
  for (int64_t attempt = 0; !st; attempt++) {
    if (attempt > 0 && (st = px_launch_slots(a.hostfile, attempt, a.np ? a.np : L.n0, &slots, &slots_from, &err))) break;
    if (attempt == 0 && !a.hostfile && !getenv("PX_LAUNCH_SLOTS")) slots = L.n0;
    if (slots < min_ranks) {
      int64_t s = -1;
      px_launch_ckpt_step(cur_dir, &s);
      st = px_err_set(&err, PX_ERR_RUNTIME, "%lld slot%s (%s), fewer than %s %lld: giving up; the last complete "
                      "checkpoint is %s%lld in %s", (long long)slots, slots == 1 ? "" : "s", slots_from,
                      a.min_ranks ? "--min-ranks" : "the plan's ranks (--min-ranks allows fewer)",
                      (long long)min_ranks, s >= 0 ? "step " : "none: step ", (long long)(s >= 0 ? s : 0), cur_dir);
      cJSON *o = cJSON_CreateObject();
      if (o) cJSON_AddStringToObject(o, "reason", err.msg);
      log_event(&L, o, "give_up", attempt);
      break;
    }
    /* the plan for these slots, and its checkpoint */
    if ((st = choose(&L, slots, min_ranks, &next, &err))) break;
    bool changed = next.ranks != (have_cur ? cur.ranks : L.n0);
    int64_t step = -1;
    bool have_ckpt = px_launch_ckpt_step(cur_dir, &step);
    if (changed) {
      char from_desc[256];
      const px_plan *np = plan_of(&L, &next), *op = have_cur ? plan_of(&L, &cur) : &L.orig;
      L.x->reshard_describe(op, from_desc, sizeof from_desc);
      say("%lld slot%s (%s): the plan changes from %s to %s; the global batch of %lld sequences is kept (%lld "
          "micro-batch%s of %lld a replica -> %lld of %lld)%s%s", (long long)slots, slots == 1 ? "" : "s", slots_from,
          from_desc, next.desc, (long long)np->par.gbs, (long long)op->microbatches,
          op->microbatches == 1 ? "" : "es", (long long)op->par.mbs, (long long)np->microbatches,
          (long long)np->par.mbs, next.original ? "" : "; plan file ", next.plan_file);
      cJSON *o = cJSON_CreateObject();
      if (o) {
        px_json_add_num(o, "slots", (double)slots);
        cJSON_AddStringToObject(o, "from", from_desc);
        cJSON_AddStringToObject(o, "to", next.desc);
        px_json_add_num(o, "from_ranks", (double)op->grid.world);
        px_json_add_num(o, "to_ranks", (double)np->grid.world);
        px_json_add_num(o, "gbs", (double)np->par.gbs);
        if (!next.original) cJSON_AddStringToObject(o, "plan_file", next.plan_file);
      }
      log_event(&L, o, "replan", attempt);
      /* the last complete checkpoint, re-split into the new plan's directory (a run
       * resuming in the same directory re-splits it as it loads) */
      if (have_ckpt && strcmp(cur_dir, next.dir) != 0 && (st = reshard(&L, cur_dir, &next, attempt, &err))) {
        choice_free(&next);
        break;
      }
    }
    /* the same plan goes on where it was, as does a fresh start (nothing to carry over) */
    if (changed && have_ckpt) snprintf(cur_dir, sizeof cur_dir, "%s", next.dir);
    else snprintf(next.dir, sizeof next.dir, "%s", cur_dir);
    if (have_cur) choice_free(&cur);
    cur = next, have_cur = true;
    have_ckpt = px_launch_ckpt_step(cur_dir, &step);
    if (attempt == 0 && L.run.resume && !have_ckpt) say("--resume: no checkpoint in %s yet: starting at step 0", cur_dir);
    bool resume = have_ckpt && (attempt > 0 || L.run.resume);
    char np[32], at[32];
    snprintf(np, sizeof np, "%lld", (long long)cur.ranks);
    snprintf(at, sizeof at, "%lld", (long long)attempt);
    setenv("PX_LAUNCH_ATTEMPT", at, 1);
    char **v = attempt_argv(&L, &cur, mp, nmp, a.hostfile, resume, self, np);
    if (!v) {
      st = px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
      break;
    }
    if (attempt > 0 && resume)
      say("restart %lld/%lld: resuming from the checkpoint of step %lld in %s on %lld ranks (%s)", (long long)restarts,
          (long long)max_restarts, (long long)step, cur_dir, (long long)cur.ranks, cur.desc);
    else if (attempt > 0)
      say("restart %lld/%lld: starting over (no complete checkpoint in %s yet) on %lld ranks (%s)", (long long)restarts,
          (long long)max_restarts, cur_dir, (long long)cur.ranks, cur.desc);
    cJSON *o = cJSON_CreateObject();
    if (o) {
      px_json_add_num(o, "ranks", (double)cur.ranks);
      cJSON_AddStringToObject(o, "plan", cur.desc);
      cJSON_AddStringToObject(o, "ckpt", cur_dir);
      if (resume) px_json_add_num(o, "resume_step", (double)step);
      else cJSON_AddNullToObject(o, "resume_step");
    }
    log_event(&L, o, "start", attempt);
    px_launch_outcome out;
    int stopped = 0;
    st = px_launch_attempt(v, &out, &stopped, &err);
    free(v);
    if (st) break;
    /* how it ended: done (its checkpoint at --steps), stopped, the launcher's failure, or the run's */
    int64_t reached = -1;
    bool ended = !stopped && out.exit_code == 0;
    if (ended && px_launch_ckpt_step(cur_dir, &reached) && reached >= steps) {
      if (restarts) say("done after %lld restart%s", (long long)restarts, restarts == 1 ? "" : "s");
      cJSON *d = cJSON_CreateObject();
      if (d) px_json_add_num(d, "restarts", (double)restarts);
      log_event(&L, d, "done", attempt);
      code = 0;
      break;
    }
    bool short_run = ended && out.started; /* else the launcher's exit 0 (/bin/true) */
    if (short_run && reached >= 0)
      snprintf(out.cause, sizeof out.cause, "the run ended (exit status 0) with the checkpoint of step %lld in %.400s, "
               "short of --steps %lld", (long long)reached, cur_dir, (long long)steps);
    else if (short_run)
      snprintf(out.cause, sizeof out.cause, "the run ended (exit status 0) without a complete checkpoint in %.400s "
               "(--steps %lld)", cur_dir, (long long)steps);
    if (stopped) say("stopped by signal %d (%s) after %.1f s: the job was ended (%s)", stopped, strsignal(stopped),
                     out.wall_s, out.cause);
    else if (!out.started)
      say("attempt %lld: no rank of the run started; the launcher ended after %.1f s: %s", (long long)attempt,
          out.wall_s, out.cause);
    else say("attempt %lld failed after %.1f s: %s", (long long)attempt, out.wall_s, out.cause);
    const char *why = NULL;
    if (stopped) why = "stopped: not relaunched", code = 128 + stopped;
    else if (!out.started) why = "the launcher failed before any rank started, which a relaunch would not change", code = 2;
    else if (short_run) why = "the run ended before its --steps without an error", code = 1;
    else if (out.exit_code == 2) why = "the run refused its input (exit 2), which a relaunch would not change", code = 2;
    else if (restarts == max_restarts) why = "--max-restarts reached", code = 1;
    /* a relaunch after a rank's failure waits: backoff_s, doubled for each restart before, up to the cap */
    double wait_s = backoff_s;
    for (int64_t k = 0; k < restarts && wait_s < BACKOFF_CAP_S; k++)
      wait_s = wait_s * 2 < BACKOFF_CAP_S ? wait_s * 2 : BACKOFF_CAP_S;
    cJSON *f = cJSON_CreateObject();
    if (f) {
      cJSON_AddBoolToObject(f, "started", out.started);
      px_json_add_num(f, "exit_code", out.exit_code);
      px_json_add_num(f, "signal", out.signal);
      if (out.rank >= 0) px_json_add_num(f, "rank", (double)out.rank);
      else cJSON_AddNullToObject(f, "rank");
      cJSON_AddStringToObject(f, "cause", out.cause);
      px_json_add_num(f, "wall_s", out.wall_s);
      if (!why) px_json_add_num(f, "backoff_s", wait_s);
    }
    log_event(&L, f, "failure", attempt);
    if (why) {
      int64_t s = -1;
      bool have = px_launch_ckpt_step(cur_dir, &s);
      char last[4300];
      if (have) snprintf(last, sizeof last, "the last complete checkpoint is step %lld in %s", (long long)s, cur_dir);
      else snprintf(last, sizeof last, "no complete checkpoint in %s", cur_dir);
      say("giving up after %lld restart%s (%s): %s", (long long)restarts, restarts == 1 ? "" : "s", why, last);
      cJSON *g = cJSON_CreateObject();
      if (g) {
        cJSON_AddStringToObject(g, "reason", why);
        px_json_add_num(g, "restarts", (double)restarts);
      }
      log_event(&L, g, "give_up", attempt);
      break;
    }
    if (wait_s > 0) {
      say("relaunching in %.1f s (--backoff-s %g, doubled for each restart up to %d s)", wait_s, backoff_s,
          BACKOFF_CAP_S);
      struct timespec ts = {(time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
    }
    restarts++;
  }
  if (have_cur) choice_free(&cur);
  px_plan_free(&L.orig);
  if (L.log) fclose(L.log);
  free(copy);
  return st ? px_cli_fail(st, &err) : code;
}
