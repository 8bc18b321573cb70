/* Machine calibration: GEMMs, memory bandwidth, per-kind op costs from
 * profiled reference runs, collectives. */
#include "exec/calibrate.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "exec/calibrate_gpu.h"
#include "exec/comm.h"
#include "exec/cpu/backend.h"
#include "exec/train.h"
#include "plan/plan.h"

/* Runs body once to warm up, then repeats it for at least min_s; t gets seconds per run. */
#define TIME_LOOP(t, min_s, body)              \
  do {                                         \
    body;                                      \
    int reps_ = 0;                             \
    double t0_ = px_clock_s(), dt_;                 \
    do {                                       \
      body;                                    \
      reps_++;                                 \
    } while ((dt_ = px_clock_s() - t0_) < (min_s)); \
    (t) = dt_ / reps_;                         \
  } while (0)

static void say(const px_calib_opts *o, int rank, const char *fmt, const char *what, int i, int n) {
  if (rank == 0 && o->progress && (isatty(fileno(o->progress)) || fmt[strlen(fmt) - 1] == '\n')) {
    fprintf(o->progress, fmt, what, i, n);
    fflush(o->progress);
  }
}

/* ---- GEMMs ---- */

static px_status calib_gemm(px_cluster *c, const px_calib_opts *o, MPI_Comm world, int rank, px_err *err) {
  static const int64_t ms[] = {32, 128, 512, 2048}, ns[] = {64, 256, 1024, 4096}, ks[] = {64, 256, 1024, 4096};
  int nm = o->quick ? 2 : 4;
  int total = nm * nm * nm, done = 0;
  int64_t maxdim = o->quick ? 256 : 4096; /* the largest of any dimension */
  float *a = calloc((size_t)(maxdim * maxdim), sizeof *a), *b = calloc((size_t)(maxdim * maxdim), sizeof *b),
        *cc = calloc((size_t)(maxdim * maxdim), sizeof *cc);
  if (!a || !b || !cc) {
    free(a), free(b), free(cc);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  for (int64_t i = 0; i < maxdim * maxdim; i++) a[i] = b[i] = 1.0f / (float)(1 + i % 13);
  double best = 0;
  int npts = total;
  /* The grid is measured in passes and each shape keeps its fastest pass: a
   * shape's rate is what the machine can do, and a burst of other work on a
   * shared machine slows a run of consecutive shapes, not every pass. */
  int passes = o->quick ? 1 : 3;
  for (int pass = 0; pass < passes; pass++)
    for (int im = 0, i = 0; im < nm; im++)
      for (int in = 0; in < nm; in++)
        for (int ik = 0; ik < nm; ik++, i++) {
          int64_t m = ms[im], n = ns[in], k = ks[ik];
          px_comm_barrier(world); /* every rank at once: they share the machine */
          double t;
          TIME_LOOP(t, o->quick ? 0.002 : 0.03,
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b,
                                (int)k, 0.0f, cc, (int)n));
          px_comm_allreduce(world, &t, &t, 1, PX_HOST_DOUBLE, PX_RED_MAX, NULL);
          double flops = 2.0 * (double)m * (double)n * (double)k / t;
          if (flops > best) best = flops;
          if (pass == 0 || flops > c->gpu.gemm_table[i].efficiency)
            c->gpu.gemm_table[i] = (px_gemm_point){m, n, k, flops, PX_DTYPE_FP32};
          say(o, rank, "\r  calibrate: %s %d/%d", "GEMM shapes", ++done, total * passes);
        }
  free(a), free(b), free(cc);
  for (int i = 0; i < npts; i++) c->gpu.gemm_table[i].efficiency /= best;
  c->gpu.gemm_table_len = npts;
  c->gpu.peak_flops[PX_DTYPE_FP32] = best;
  c->gpu.gemm_max_efficiency = 1.0;
  say(o, rank, "\r  calibrate: %s %d/%d\n", "GEMM shapes", done, total * passes);
  return PX_OK;
}

/* ---- memory bandwidth ---- */

static px_status calib_memory(px_cluster *c, const px_calib_opts *o, MPI_Comm world, px_err *err) {
  size_t bytes = o->quick ? ((size_t)8 << 20) : ((size_t)128 << 20);
  char *src = malloc(bytes), *dst = malloc(bytes);
  if (!src || !dst) {
    free(src), free(dst);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  px_comm_barrier(world);
  double t;
  TIME_LOOP(t, o->quick ? 0.01 : 0.3, memcpy(dst, src, bytes));
  px_comm_allreduce(world, &t, &t, 1, PX_HOST_DOUBLE, PX_RED_MAX, NULL);
  c->gpu.hbm_bytes_per_s = 2.0 * (double)bytes / t; /* read + write */
  c->gpu.memory_efficiency = 1.0;
  free(src), free(dst);
  return PX_OK;
}

/* ---- the other ops: fitted from profiled runs ---- */

/* Ops costed by FLOPs (attention) rather than bytes; GEMMs and communication are not fitted here. */
static int fit_class(px_op_kind k) {
  switch (k) {
    case PX_OP_LINEAR:
    case PX_OP_LINEAR_BWD_DATA:
    case PX_OP_LINEAR_BWD_WEIGHT:
    case PX_OP_ALLREDUCE:
    case PX_OP_ALLGATHER:
    case PX_OP_REDUCE_SCATTER:
    case PX_OP_SEND:
    case PX_OP_RECV: return 0;
    case PX_OP_ATTN_SCORES:
    case PX_OP_ATTN_SCORES_BWD:
    case PX_OP_ATTN_CONTEXT:
    case PX_OP_ATTN_CONTEXT_BWD:
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD: return 2;
    default: return 1;
  }
}

/* Least-squares sums per kind: n, sum x, sum t, sum x^2, sum x t. */
typedef struct {
  double s[PX_OP_COUNT][5];
} fit_sums;

static px_status profile_run(const char *model, int64_t mbs, int attention, const px_calib_opts *o, fit_sums *f,
                             px_err *err) {
  px_model m;
  px_cluster c;
  px_status st;
  if ((st = px_model_load(model, &m, err)) || (st = px_cluster_load("local-cpu", &c, err)) ||
      (st = px_cluster_set_size(&c, 1, 0, err)))
    return st;
  if (o->quick) m.layers = 2, m.seq_len = 64, m.max_positions = 64;
  px_parallel p;
  px_parallel_unset(&p);
  p.mbs = mbs, p.gbs = 2 * mbs, p.precision = PX_PREC_FP32, p.attention = attention;
  px_parallel_resolve(&p, &m, &c);
  px_plan plan;
  if ((st = px_plan_compile(&plan, &m, &c, &p, err))) return st;
  px_train_opts to;
  px_train_opts_init(&to);
  to.steps = o->quick ? 2 : 4;
  to.backend = "cpu";
  px_train_result r;
  if (!(st = px_train(&plan, &to, MPI_COMM_SELF, &r, err))) {
    px_op_iter it = px_op_iter_begin(&plan, 0);
    for (const px_op *op; (op = px_op_next(&it));) {
      int cls = fit_class((px_op_kind)op->kind);
      double x = cls == 2 ? op->flops : op->bytes, t = it.id < r.nops ? r.op_s[it.id] : 0;
      if (!cls || x <= 0 || t <= 0) continue;
      double *s = f->s[op->kind];
      s[0] += 1, s[1] += x, s[2] += t, s[3] += x * x, s[4] += x * t;
    }
    px_train_result_free(&r);
  }
  px_plan_free(&plan);
  return st;
}

static px_status calib_kernels(px_cluster *c, const px_calib_opts *o, MPI_Comm world, int rank, px_err *err) {
  fit_sums f;
  memset(&f, 0, sizeof f);
  static const char *const models[] = {"small", "small-llama"};
  int total = 8, done = 0;
  px_status st = PX_OK;
  for (int mi = 0; mi < 2 && !st; mi++)
    for (int att = 0; att < PX_ATTN_COUNT && !st; att++)
      for (int64_t mbs = 1; mbs <= 4 && !st; mbs *= 4) {
        px_comm_barrier(world);
        st = profile_run(models[mi], mbs, att, o, &f, err);
        say(o, rank, "\r  calibrate: %s %d/%d", "reference runs", ++done, total);
      }
  if ((st = px_comm_agree_as(st, world, "a rank failed its reference runs", err))) return st;
  say(o, rank, "\r  calibrate: %s %d/%d\n", "reference runs", done, total);
  px_comm_allreduce(world, f.s, f.s, PX_OP_COUNT * 5, PX_HOST_DOUBLE, PX_RED_SUM, NULL);
  int n = 0;
  double overheads[PX_OP_COUNT];
  int nover = 0;
  for (int k = 0; k < PX_OP_COUNT && n < PX_KERNEL_RATES_MAX; k++) {
    double *s = f.s[k];
    if (s[0] < 2) continue;
    /* t = a + x / rate, a >= 0 */
    double den = s[0] * s[3] - s[1] * s[1];
    double slope = den > 0 ? (s[0] * s[4] - s[1] * s[2]) / den : 0, icept = (s[2] - slope * s[1]) / s[0];
    if (slope <= 0 || icept < 0) icept = 0, slope = s[4] / s[3];
    if (slope <= 0) continue;
    px_kernel_rate *r = &c->gpu.kernel_rates[n++];
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "%s", px_op_names[k]);
    if (fit_class((px_op_kind)k) == 2)
      r->flops_per_s = 1.0 / slope;
    else
      r->bytes_per_s = 1.0 / slope;
    r->overhead_s = icept;
    overheads[nover++] = icept;
  }
  c->gpu.kernel_rates_len = n;
  /* the rest: the median overhead */
  for (int a = 0; a < nover; a++)
    for (int b = a + 1; b < nover; b++)
      if (overheads[b] < overheads[a]) { double t = overheads[a]; overheads[a] = overheads[b]; overheads[b] = t; }
  c->gpu.kernel_overhead_s = nover ? overheads[nover / 2] : c->gpu.kernel_overhead_s;
  return PX_OK;
}

/* ---- collectives ---- */

/* Collective sizes go up by this factor: x4 put 12.6 MB, the ZeRO-3 units
 * of bench/compare.sh, between 4 MB (in a core's L2 here) and 16 MB
 * (past it), whose reduce-scatter rates differ 2.5x. */
#define COLL_STEP 2

/* Consecutive calls use buffers this far apart, at most: a run's
 * collectives each take other buffers (a unit's gather lands in a buffer
 * of its own; a reduction reads another bucket), out of the cache the
 * last call left warm, so a calibration on the same buffers measured
 * 12.6 MB all-gathers 2x fast. The window is past any core's L2. */
#define COLL_ROTATE_BYTES ((uint64_t)64 << 20)

/* One call of collective kind over world on `bytes` (nccl-tests' size: the
 * input of an all-reduce, reduce-scatter or all-to-all, the output of an
 * all-gather, what each rank sends for sendrecv), as the CPU backend
 * calls it, on the call'th place of in and out (each of maxb bytes): the
 * places rotate through the first COLL_ROTATE_BYTES. */
static void coll_once(px_coll kind, float *in, float *out, uint64_t bytes, uint64_t maxb, uint64_t call, MPI_Comm world,
                      int rank, int size) {
  uint64_t window = maxb < COLL_ROTATE_BYTES ? maxb : COLL_ROTATE_BYTES, places = window / bytes;
  uint64_t at = (call % (places ? places : 1)) * (bytes / sizeof(float));
  in += at, out += at;
  uint64_t count = bytes / sizeof(float), part = count / (uint64_t)size;
  switch (kind) {
    case PX_COLL_ALLREDUCE: px_comm_allreduce(world, out, in, count, PX_HOST_FLOAT, PX_RED_SUM, NULL); break;
    case PX_COLL_ALLGATHER: px_comm_allgather(world, out, in, part, PX_HOST_FLOAT, NULL); break;
    case PX_COLL_REDUCE_SCATTER: px_comm_reduce_scatter(world, out, in, part, PX_HOST_FLOAT, PX_RED_SUM, NULL); break;
    case PX_COLL_ALLTOALL: px_comm_alltoall(world, out, in, part, PX_HOST_FLOAT, NULL); break;
    default: /* sendrecv: each rank to the next, from the previous */
      px_comm_sendrecv(world, in, (rank + 1) % size, out, (rank + size - 1) % size, bytes, NULL);
  }
}

/* Measures kind from 8 bytes to maxb (xCOLL_STEP a step), printed like nccl-tests,
 * into c's intra-node busbw curve (the simulator uses it for that
 * collective at every size, interpolated); *t_out gets the seconds per
 * call at each size (npts of them). */
static int coll_curve(px_cluster *c, px_coll kind, const px_calib_opts *o, float *in, float *out, uint64_t maxb,
                      MPI_Comm world, int rank, int size, double *t_out) {
  double factor = px_coll_busbw_factor(kind, size);
  int npts = 0;
  uint64_t call = 0;
  for (uint64_t bytes = 8 * (uint64_t)size; bytes <= maxb; bytes *= COLL_STEP) {
    px_comm_barrier(world);
    /* every rank must run the same number of repetitions, so rank 0 sizes
     * them from a first call and tells the others */
    double t0 = px_clock_s();
    coll_once(kind, in, out, bytes, maxb, call++, world, rank, size);
    int reps = (int)((o->quick ? 0.002 : 0.05) / (px_clock_s() - t0 + 1e-9)) + 1;
    if (reps > 10000) reps = 10000;
    px_comm_bcast(world, &reps, sizeof reps, 0, NULL);
    px_comm_barrier(world);
    t0 = px_clock_s();
    for (int r = 0; r < reps; r++) coll_once(kind, in, out, bytes, maxb, call++, world, rank, size);
    double t = (px_clock_s() - t0) / reps;
    px_comm_allreduce(world, &t, &t, 1, PX_HOST_DOUBLE, PX_RED_MAX, NULL);
    double algbw = (double)bytes / t;
    if (rank == 0 && o->coll) o->coll(o->coll_ctx, &(px_calib_coll_point){kind, size, factor, bytes, t, npts == 0});
    int l = c->busbw_len[PX_LINK_INTRA];
    if (l < PX_BUSBW_MAX) {
      c->busbw[PX_LINK_INTRA][l] = (px_busbw_point){kind, size, 1, bytes, algbw * factor};
      c->busbw_len[PX_LINK_INTRA] = l + 1;
    }
    t_out[npts++] = t;
  }
  return npts;
}

/* The collectives the CPU backend runs (MPI all-reduce, all-gather,
 * reduce-scatter, all-to-all, and the pipeline's sends and receives), each
 * as a measured curve: one bandwidth cannot hold both the in-cache and the
 * past-cache regime (one fitted line put the 59 MB ZeRO reduce-scatters of
 * bench/compare.sh 16-20% fast). The all-reduce's latency and bandwidth
 * (a weighted line fit) stay the link model for anything without a curve. */
static px_status calib_comm(px_cluster *c, const px_calib_opts *o, MPI_Comm world, int rank, int size, px_err *err) {
  static const px_coll kinds[] = {PX_COLL_ALLREDUCE, PX_COLL_ALLGATHER, PX_COLL_REDUCE_SCATTER, PX_COLL_ALLTOALL,
                                  PX_COLL_P2P};
  uint64_t maxb = o->quick ? ((uint64_t)1 << 20) : ((uint64_t)128 << 20);
  float *in = malloc(maxb), *out = malloc(maxb); /* [maxb / 4] each */
  if (!in || !out) {
    free(in), free(out);
    return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  }
  memset(in, 0, maxb);
  c->busbw_len[PX_LINK_INTRA] = 0;
  double t_ar[64];
  int n_ar = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    double t[64];
    int n = coll_curve(c, kinds[i], o, in, out, maxb, world, rank, size, t);
    if (kinds[i] == PX_COLL_ALLREDUCE) memcpy(t_ar, t, sizeof t), n_ar = n;
  }
  free(in), free(out);
  double S1 = 0, Sx = 0, St = 0, Sxx = 0, Sxt = 0, factor = px_coll_busbw_factor(PX_COLL_ALLREDUCE, size);
  uint64_t bytes = 8 * (uint64_t)size;
  for (int i = 0; i < n_ar; i++, bytes *= COLL_STEP) {
    double x = (double)bytes * factor, t = t_ar[i], w = 1.0 / (t * t); /* bytes each rank moves; relative-error weights */
    S1 += w, Sx += w * x, St += w * t, Sxx += w * x * x, Sxt += w * x * t;
  }
  double den = S1 * Sxx - Sx * Sx;
  double slope = den > 0 ? (S1 * Sxt - Sx * St) / den : 0, icept = (St - slope * Sx) / S1;
  if (slope <= 0) slope = Sxt / Sxx;
  if (icept < 0) icept = 0;
  c->intra_bytes_per_s = 1.0 / slope;
  c->intra_latency_s = icept / (2.0 * (size - 1)); /* a ring all-reduce takes 2 (n-1) steps */
  c->intra_efficiency = 1.0;
  char note[160];
  snprintf(note, sizeof note, "measured by parallax calibrate: MPI all_reduce, all_gather, reduce_scatter, alltoall, "
           "sendrecv over %d ranks on one machine", size);
  return px_cluster_add_source(c, "intra_node.busbw", note, err);
}

px_status px_calibrate(const px_cluster *base, const px_calib_opts *o, MPI_Comm world, px_cluster *out, px_err *err) {
  int rank = px_comm_rank(world), size = px_comm_size(world);
  if (o->cuda && size > 1)
    return px_err_set(err, PX_ERR_INPUT, "calibrate: `backend` cuda measures one GPU in one process, not %d ranks "
                      "(measure collectives across GPUs with nccl-tests and import them)", size);
  if (o->cuda) return px_calibrate_gpu(base, o, out, err);
  *out = *base;
  px_cluster *c = out;
  char host[64] = "this machine";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  snprintf(c->name, sizeof c->name, "calibrated");
  time_t now = time(NULL);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  snprintf(c->source, sizeof c->source,
           "Measured by `parallax calibrate` on %s at %s with %d rank%s (one per core, OpenBLAS sgemm, MPI): GEMM "
           "efficiency table, memory bandwidth, per-kind op costs fitted from profiled reference runs, all-reduce "
           "latency and bandwidth.",
           host, when, size, size == 1 ? "" : "s");
  snprintf(c->gpu.name, sizeof c->gpu.name, "cpu-core (calibrated)");
  c->gpus_per_node = size;
  c->nvlink_domain = 0; /* the node */
  c->gpus = size;
  c->nodes = 1;
  px_cpu_blas_threads(0);
  px_cpu_keep_pages(); /* as the backend: MPI's temporaries stay in the process */
  px_status st;
  if ((st = calib_gemm(c, o, world, rank, err)) || (st = calib_memory(c, o, world, err)) ||
      (st = calib_kernels(c, o, world, rank, err)))
    return st;
  if (size > 1) return calib_comm(c, o, world, rank, size, err);
  return PX_OK;
}
