/* parallax sweep: every valid plan for a model on a cluster, ranked; time
 * to train, cost and failures; CSV, JSON, plots and an HTML report. Under
 * mpirun the space is split across ranks and gathered on rank 0. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"
#include "sim/plotdata.h"
#include "sim/html.h"
#include "sim/plots.h"
#include "sim/sim.h"
#include "sim/sweep.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A progress bar on stderr when it is a terminal. */
static void progress(void *ctx, int64_t done, int64_t total) {
  (void)ctx;
  if (total <= 0 || (done % 64 && done != total)) return;
  int w = 40, fill = (int)(w * done / total);
  fprintf(stderr, "\r  [%.*s%*s] %lld/%lld plans", fill, "########################################", w - fill, "",
          (long long)done, (long long)total);
  if (done == total) fputs("\r\033[K", stderr);
}

/* "tp4 pp2 dp64 z1 sp mbs1 int2 sel": a plan in one short column. */
static void plan_label(const px_parallel *p, char *buf, size_t cap) {
  static const char *const rc[] = {"none", "sel", "full"};
  char sched[16];
  if (p->schedule == PX_SCHED_INTERLEAVED)
    snprintf(sched, sizeof sched, "int%lld", (long long)p->vpp);
  else
    snprintf(sched, sizeof sched, "%s", px_schedule_names[p->schedule]);
  snprintf(buf, cap, "tp%lld pp%lld dp%lld z%d%s mbs%lld %s %s", (long long)p->tp, (long long)p->pp, (long long)p->dp,
           p->zero, p->sp ? " sp" : "", (long long)p->mbs, p->pp > 1 ? sched : "-", rc[p->recompute]);
}

static void print_table(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_sweep_result *r,
                        int64_t top, double wall_s, int threads) {
  char a[64], b[64];
  const px_parallel *f = &o->fixed;
  printf("sweep: %s on %lld x %s (%s), gbs %lld, seq %lld, objective %s\n", m->name, (long long)c->gpus, c->gpu.name,
         c->name, (long long)f->gbs, (long long)(f->seq > 0 ? f->seq : m->seq_len), px_objective_names[o->objective]);
  printf("  %lld plans enumerated: %lld invalid, %lld do not fit in %s, %lld simulated (%s on %d thread%s)\n",
         (long long)r->enumerated, (long long)r->invalid, (long long)r->dropped_memory,
         px_fmt_bytes((double)(c->gpu.hbm_bytes - c->gpu.reserved_bytes), a, sizeof a), (long long)r->simulated,
         px_fmt_time(wall_s, b, sizeof b), threads, threads == 1 ? "" : "s");
  if (r->n == 0) {
    printf("  no plan fits: try more GPUs, ZeRO-3, full recomputation or a smaller micro-batch\n");
    return;
  }
  bool ttt = o->tokens > 0;
  printf("\n%4s  %-36s %9s %10s %6s %9s %6s %8s", "rank", "plan", "step", "tokens/s", "MFU", "mem/GPU", "bubble",
         "exposed");
  if (ttt) printf(" %8s %9s %7s", "days", "GPU-hours", "goodput");
  if (ttt && o->price_per_gpu_hour > 0) printf(" %10s", "cost");
  printf("\n");
  for (int64_t i = 0; i < r->n && i < top; i++) {
    const px_sweep_entry *e = &r->entries[i];
    char label[96], step[32], tok[32], mem[32], exp[32];
    plan_label(&e->par, label, sizeof label);
    printf("%4lld  %-36s %9s %10s %5.1f%% %9s %5.1f%% %8s", (long long)(i + 1), label,
           px_fmt_time(e->sim.step_time_s, step, sizeof step), px_fmt_count(e->sim.tokens_per_s, tok, sizeof tok), 100 * e->sim.mfu,
           px_fmt_bytes((double)e->peak_bytes, mem, sizeof mem), 100 * e->sim.bubble_fraction,
           px_fmt_time(e->sim.comm_exposed_s, exp, sizeof exp));
    if (ttt) printf(" %8.1f %9s %6.1f%%", e->train.days, px_fmt_count(e->train.gpu_hours, a, sizeof a), 100 * e->train.goodput);
    if (ttt && o->price_per_gpu_hour > 0) printf(" %10s", px_fmt_count(e->train.cost_usd, b, sizeof b));
    printf("\n");
  }
  const px_train_time *t = &r->entries[0].train;
  if (ttt && t->cluster_mtbf_s > 0) {
    char w[32], iv[32];
    printf("\nfailures (best plan): cluster MTBF %s (%.0f h per GPU), checkpoint of %s written in %s every %s "
           "(Young/Daly), goodput %.1f%%\n",
           px_fmt_time(t->cluster_mtbf_s, a, sizeof a), o->mtbf_hours, px_fmt_bytes(t->checkpoint_bytes, b, sizeof b),
           px_fmt_time(t->checkpoint_write_s, w, sizeof w), px_fmt_time(t->checkpoint_interval_s, iv, sizeof iv),
           100 * t->goodput);
  }
}

static cJSON *entry_json(const px_sweep_entry *e, int64_t rank, const px_cluster *c) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_json_add_num(o, "rank", (double)rank);
  cJSON_AddItemToObject(o, "parallel", px_parallel_to_json(&e->par));
  px_json_add_num(o, "step_time_s", e->sim.step_time_s);
  px_json_add_num(o, "tokens_per_s", e->sim.tokens_per_s);
  px_json_add_num(o, "model_tflops_per_gpu", e->sim.model_tflops_per_gpu);
  px_json_add_num(o, "mfu", e->sim.mfu);
  px_json_add_num(o, "hfu", e->sim.hfu);
  px_json_add_num(o, "bubble_fraction", e->sim.bubble_fraction);
  cJSON_AddBoolToObject(o, "fits", e->sim.fits);
  cJSON *mem = cJSON_AddObjectToObject(o, "memory");
  if (mem) {
    px_json_add_num(mem, "peak_bytes_max", (double)e->peak_bytes);
    for (int k = 0; k < PX_MEM_COUNT; k++) {
      char key[32];
      snprintf(key, sizeof key, "%s_bytes", px_mem_cat_names[k]);
      px_json_add_num(mem, key, (double)e->at_peak[k]);
    }
  }
  cJSON *comm = cJSON_AddObjectToObject(o, "comm");
  if (comm) {
    px_json_add_num(comm, "tp_s", e->sim.comm_tp_s);
    px_json_add_num(comm, "pp_s", e->sim.comm_pp_s);
    px_json_add_num(comm, "dp_s", e->sim.comm_dp_s);
    px_json_add_num(comm, "exposed_s", e->sim.comm_exposed_s);
  }
  if (e->train.days > 0 || e->train.cluster_mtbf_s > 0) {
    cJSON *t = cJSON_AddObjectToObject(o, "time_to_train");
    if (t) {
      px_json_add_num(t, "days", e->train.days);
      px_json_add_num(t, "gpu_hours", e->train.gpu_hours);
      px_json_add_num(t, "cost_usd", e->train.cost_usd);
      px_json_add_num(t, "goodput", e->train.goodput);
      px_json_add_num(t, "checkpoint_bytes", e->train.checkpoint_bytes);
      px_json_add_num(t, "checkpoint_write_s", e->train.checkpoint_write_s);
      px_json_add_num(t, "checkpoint_interval_s", e->train.checkpoint_interval_s);
      px_json_add_num(t, "cluster_mtbf_s", e->train.cluster_mtbf_s);
    }
  }
  return o;
}

/* The whole answer as JSON: the question, the counts, the plans best first. */
static cJSON *sweep_json(const px_model *m, const px_cluster *c, const px_sweep_opts *o, const px_args *a,
                         const px_sweep_result *r, int64_t top) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON *q = cJSON_AddObjectToObject(root, "question");
  if (q) {
    cJSON_AddItemToObject(q, "model", px_model_to_json(m));
    cJSON_AddItemToObject(q, "cluster", px_cluster_to_json(c));
    px_json_add_num(q, "gpus", (double)c->gpus);
    px_json_add_num(q, "gbs", (double)o->fixed.gbs);
    px_json_add_num(q, "seq", (double)(o->fixed.seq > 0 ? o->fixed.seq : m->seq_len));
    cJSON_AddStringToObject(q, "objective", px_objective_names[o->objective]);
    px_json_add_num(q, "tokens", o->tokens);
    px_json_add_num(q, "price_usd_per_gpu_hour", o->price_per_gpu_hour);
    px_json_add_num(q, "mtbf_hours", o->mtbf_hours);
    px_json_add_num(q, "restart_s", o->restart_s);
    cJSON *fixed = px_parallel_to_json(&a->par);
    /* only the dimensions the user fixed */
    static const char *const swept[] = {"tp", "pp", "dp", "zero", "mbs", "vpp"};
    for (size_t i = 0; fixed && i < sizeof swept / sizeof *swept; i++) {
      const cJSON *v = cJSON_GetObjectItem(fixed, swept[i]);
      if (v && v->valuedouble <= 0 && strcmp(swept[i], "zero")) cJSON_DeleteItemFromObject(fixed, swept[i]);
    }
    if (a->par.zero < 0) cJSON_DeleteItemFromObject(fixed, "zero");
    if (a->par.sp < 0) cJSON_DeleteItemFromObject(fixed, "sp");
    cJSON_DeleteItemFromObject(fixed, "gbs");
    cJSON_DeleteItemFromObject(fixed, "seq");
    cJSON_DeleteItemFromObject(fixed, "bucket_mib");
    cJSON_AddItemToObject(q, "fixed", fixed);
  }
  cJSON *counts = cJSON_AddObjectToObject(root, "counts");
  if (counts) {
    px_json_add_num(counts, "enumerated", (double)r->enumerated);
    px_json_add_num(counts, "invalid", (double)r->invalid);
    px_json_add_num(counts, "dropped_memory", (double)r->dropped_memory);
    px_json_add_num(counts, "simulated", (double)r->simulated);
  }
  cJSON *plans = cJSON_AddArrayToObject(root, "plans");
  for (int64_t i = 0; plans && i < r->n && i < top; i++) cJSON_AddItemToArray(plans, entry_json(&r->entries[i], i + 1, c));
  cJSON *as = cJSON_AddArrayToObject(root, "assumptions");
  if (as) {
    char line[1400];
    snprintf(line, sizeof line, "Cluster %s: %s", c->name, c->source);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
    snprintf(line, sizeof line, "Model %s: %s", m->name, m->source);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
    snprintf(line, sizeof line,
             "Compute: roofline per op, GEMM efficiency %.2f x wave and tile quantization on %lld SMs (tiles %lldx%lld, "
             "k_half %.0f), memory-bound ops at %.0f%% of %.0f GB/s, %.1f us per kernel.",
             c->gpu.gemm_max_efficiency, (long long)c->gpu.sm_count, (long long)c->gpu.gemm_tile_m,
             (long long)c->gpu.gemm_tile_n, c->gpu.gemm_k_half, 100 * c->gpu.memory_efficiency,
             c->gpu.hbm_bytes_per_s / 1e9, c->gpu.kernel_overhead_s * 1e6);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
    snprintf(line, sizeof line,
             "Network: NVLink %.0f GB/s per GPU per direction at %.0f%%, %lld x %.0f Gb/s NICs per node at %.0f%%; ring, "
             "tree or hierarchical collectives, whichever is cheapest; concurrent flows share links equally.",
             c->intra_bytes_per_s / 1e9, 100 * c->intra_efficiency, (long long)c->nics_per_node,
             c->nic_bytes_per_s * 8 / 1e9, 100 * c->inter_efficiency);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
    snprintf(line, sizeof line,
             "Memory: a plan fits when its peak per GPU plus the executor's allocation headroom (1/64 of it and "
             "16 MiB) is within the HBM less the runtime's reserve (%.1f GiB usable).",
             (double)(c->gpu.hbm_bytes - c->gpu.reserved_bytes) / 1073741824.0);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
    snprintf(line, sizeof line,
             "Failures: %.0f hours MTBF per GPU (Llama 3 paper: 419 unexpected interruptions in 54 days on 16,384 "
             "GPUs), %.0f minutes lost per restart, checkpoints of parameters and optimizer written at %.1f GB/s per "
             "node, interval by Young/Daly.",
             o->mtbf_hours, o->restart_s / 60, c->storage_bytes_per_s / 1e9);
    cJSON_AddItemToArray(as, cJSON_CreateString(line));
  }
  return root;
}

static px_status write_csv(const char *path, const px_cluster *c, const px_sweep_result *r, px_err *err) {
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) return st;
  fprintf(f.fp, "rank,tp,pp,dp,zero,sp,mbs,gbs,schedule,vpp,recompute,precision,attention,fits,peak_bytes,step_time_s,"
                "tokens_per_s,model_tflops_per_gpu,mfu,hfu,bubble_fraction,comm_tp_s,comm_pp_s,comm_dp_s,days,gpu_hours,"
                "cost_usd,goodput\n");
  for (int pass = 0; pass < 2; pass++) {
    const px_sweep_entry *list = pass ? r->dropped : r->entries;
    int64_t n = pass ? r->ndropped : r->n;
    for (int64_t i = 0; i < n; i++) {
      const px_sweep_entry *e = &list[i];
      const px_parallel *p = &e->par;
      fprintf(f.fp, "%lld,%lld,%lld,%lld,%d,%d,%lld,%lld,%s,%lld,%s,%s,%s,%s,%llu", pass ? 0LL : (long long)(i + 1),
              (long long)p->tp, (long long)p->pp, (long long)p->dp, p->zero, p->sp, (long long)p->mbs, (long long)p->gbs,
              px_schedule_names[p->schedule], (long long)p->vpp, px_recompute_names[p->recompute],
              px_precision_names[p->precision], px_attention_names[p->attention], pass ? "false" : "true",
              (unsigned long long)e->peak_bytes);
      if (pass)
        fprintf(f.fp, ",,,,,,,,,,,,,\n");
      else
        fprintf(f.fp, ",%.9g,%.9g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", e->sim.step_time_s,
                e->sim.tokens_per_s, e->sim.model_tflops_per_gpu, e->sim.mfu, e->sim.hfu, e->sim.bubble_fraction, e->sim.comm_tp_s,
                e->sim.comm_pp_s, e->sim.comm_dp_s, e->train.days, e->train.gpu_hours, e->train.cost_usd, e->train.goodput);
    }
  }
  (void)c;
  return px_afile_commit(&f, err);
}

/* Under mpirun: every rank evaluates its share; rank 0 gathers. */
static px_status gather(px_sweep_result *r, int rank, int size, px_err *err) {
  long long counts[4] = {r->enumerated, r->invalid, r->dropped_memory, r->simulated}, total[4];
  MPI_Reduce(counts, total, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  /* enumeration is the same on every rank: its counts are not summed */
  int mine[2] = {(int)(r->n * (int64_t)sizeof *r->entries), (int)(r->ndropped * (int64_t)sizeof *r->dropped)};
  int *all = rank == 0 ? calloc((size_t)size * 2, sizeof *all) : NULL;
  MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
  px_status st = PX_OK;
  for (int which = 0; which < 2; which++) {
    px_sweep_entry *src = which ? r->dropped : r->entries;
    int *recv = NULL, *displ = NULL;
    char *buf = NULL;
    int64_t bytes = 0;
    if (rank == 0) {
      recv = calloc((size_t)size, sizeof *recv);
      displ = calloc((size_t)size, sizeof *displ);
      for (int i = 0; recv && displ && i < size; i++) {
        recv[i] = all[2 * i + which];
        displ[i] = (int)bytes;
        bytes += recv[i];
      }
      buf = malloc((size_t)bytes + 1);
      if (!recv || !displ || !buf) st = px_err_set(err, PX_ERR_RUNTIME, "out of memory gathering the sweep");
    }
    MPI_Gatherv(src, mine[which], MPI_BYTE, buf, recv, displ, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0 && !st) {
      if (which) {
        free(r->dropped);
        r->dropped = (px_sweep_entry *)buf;
        r->ndropped = bytes / (int64_t)sizeof *r->dropped;
      } else {
        free(r->entries);
        r->entries = (px_sweep_entry *)buf;
        r->n = bytes / (int64_t)sizeof *r->entries;
      }
      buf = NULL;
    }
    free(buf), free(recv), free(displ);
  }
  free(all);
  if (rank == 0) {
    r->enumerated = counts[0];
    r->invalid = counts[1];
    r->dropped_memory = total[2];
    r->simulated = total[3];
  }
  return st;
}

static bool under_mpirun(void) {
  const char *s = getenv("OMPI_COMM_WORLD_SIZE");
  if (!s) s = getenv("PMI_SIZE");
  return s && atoi(s) > 1;
}

int px_cmd_sweep(int argc, char **argv) {
  px_args a;
  px_err err = {0};
  int groups = PX_OPT_MODEL | PX_OPT_CLUSTER | PX_OPT_PLAN | PX_OPT_SWEEP;
  px_status st = px_args_parse(&a, "parallax sweep", groups, argc, argv, &err);
  if (st) return px_cli_fail(st, &err);
  if (a.help) {
    printf("usage: parallax sweep --model M --cluster C --gpus N --gbs B [--seq S] [--top K] [plan flags to fix]\n"
           "                      [--objective throughput|time|cost|memory] [--tokens T --price USD --mtbf-hours H]\n"
           "                      [--csv FILE] [--json] [--plot DIR] [--report DIR]\n\n"
           "Enumerates every valid plan (tp, pp, dp, ZeRO, SP, micro-batch, schedule and vpp, recomputation);\n"
           "any plan flag given fixes that dimension. Plans that do not fit are dropped and counted; the\n"
           "rest are simulated on all cores and ranked. Under mpirun the space is split across ranks.\n\n");
    px_args_print_help(groups);
    return 0;
  }
  if (a.npos) return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sweep takes no positional arguments"), &err);
  px_model m;
  px_cluster c;
  px_parallel fixed = a.par; /* before defaults: unset dimensions are swept */
  if ((st = px_args_load(&a, &m, &c, &err))) return px_cli_fail(st, &err);
  if (fixed.gbs <= 0 && !a.plan_file)
    return px_cli_fail(px_err_set(&err, PX_ERR_INPUT, "parallax sweep: --gbs is required"), &err);
  fixed.gbs = a.par.gbs;
  fixed.seq = a.par.seq;
  if (fixed.precision < 0) fixed.precision = a.par.precision;
  if (fixed.attention < 0) fixed.attention = a.par.attention;
  if (fixed.gelu < 0) fixed.gelu = a.par.gelu;
  if (fixed.overlap < 0) fixed.overlap = a.par.overlap;
  if (fixed.bucket_bytes == 0) fixed.bucket_bytes = a.par.bucket_bytes;

  int rank = 0, size = 1;
  bool mpi = under_mpirun();
  if (mpi) {
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  px_sweep_opts o;
  px_sweep_opts_init(&o);
  o.fixed = fixed;
  o.objective = a.objective >= 0 ? (px_objective)a.objective : PX_OBJ_THROUGHPUT;
  o.tokens = a.tokens;
  o.price_per_gpu_hour = a.price;
  if (a.mtbf_hours >= 0) o.mtbf_hours = a.mtbf_hours;
  if (a.restart_min >= 0) o.restart_s = a.restart_min * 60;
  o.threads = (int)a.threads;
  o.max_tp = a.max_tp;
  o.part = rank;
  o.parts = size;
  if (rank == 0 && isatty(fileno(stderr))) o.progress = progress;
  int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int64_t top = a.top > 0 ? a.top : 10;

  px_sweep_result r;
  double t0 = now_s();
  st = px_sweep_run(&m, &c, &o, &r, &err);
  if (mpi) {
    int bad = st != PX_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!st && any) st = px_err_set(&err, PX_ERR_RUNTIME, "another rank failed its part of the sweep");
    if (!st) st = gather(&r, rank, size, &err);
    if (!st && rank == 0) px_sweep_rank(r.entries, r.n, o.objective);
  }
  double wall = now_s() - t0;
  if (!st && rank == 0) {
    if (a.csv_file) st = write_csv(a.csv_file, &c, &r, &err);
    const char *dir = a.report_dir ? a.report_dir : a.plot_dir;
    if (!st && dir && r.n > 0) {
      cJSON *j = NULL;
      char path[4200];
      snprintf(path, sizeof path, "%s/sweep.json", dir);
      if (!(st = px_mkdir_p(dir, &err)) && !(st = px_plotdata_sweep(&r, dir, &err)) &&
          !(st = px_plotdata_plan(&m, &c, &r.entries[0].par, dir, &err))) {
        j = sweep_json(&m, &c, &o, &a, &r, 50);
        st = j ? px_json_write(path, j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
      }
      cJSON_Delete(j);
      if (!st) st = px_plots_render(dir, &err);
      if (!st && a.report_dir) st = px_html_report(dir, &err);
    }
    if (!st) {
      if (a.json) {
        cJSON *j = sweep_json(&m, &c, &o, &a, &r, r.n);
        st = j ? px_json_print(j, &err) : px_err_set(&err, PX_ERR_RUNTIME, "out of memory");
        cJSON_Delete(j);
      } else {
        print_table(&m, &c, &o, &r, top, wall, threads * size);
        if (a.report_dir) printf("\nreport: %s/index.html\n", a.report_dir);
        else if (a.plot_dir) printf("\nplots: %s/*.png, *.svg\n", a.plot_dir);
      }
    }
  }
  px_sweep_result_free(&r);
  if (mpi) MPI_Finalize();
  return st ? px_cli_fail(st, &err) : 0;
}

