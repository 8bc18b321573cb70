/* The sweep as CSV: the plan's choices, then the same field lists as sweep.json. */
#include "report/csv.h"

#include <stdio.h>

#include "core/fileio.h"
#include "report/flags.h"
#include "report/sim.h"
#include "report/sweepjson.h"

px_status px_report_sweep_csv(const char *path, const px_model *m, const px_cluster *c, const px_sweep_result *r,
                              px_err *err) {
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) return st;
  size_t nsim, ntrain;
  const px_report_field *sim = px_report_sim_fields(&nsim), *train = px_report_train_fields(&ntrain);
  fprintf(f.fp, "rank,tp,pp,dp,zero,sp,mbs,gbs,schedule,vpp,recompute,precision,attention,cp,cp_algo,ep,etp,fits,peak_bytes");
  px_report_fields_csv_header(f.fp, sim, nsim);
  px_report_fields_csv_header(f.fp, train, ntrain);
  fputs(",mfu_peak,mfu_precision_peak,flags\n", f.fp);
  for (int pass = 0; pass < 2; pass++) {
    const px_sweep_entry *list = pass ? r->dropped : r->entries;
    int64_t n = pass ? r->ndropped : r->n;
    for (int64_t i = 0; i < n; i++) {
      const px_sweep_entry *e = &list[i];
      const px_parallel *p = &e->par;
      fprintf(f.fp, "%lld,%lld,%lld,%lld,%d,%d,%lld,%lld,%s,%lld,%s,%s,%s,%lld,%s,%lld,%lld,%s,%llu", pass ? 0LL : (long long)(i + 1),
              (long long)p->tp, (long long)p->pp, (long long)p->dp, p->zero, p->sp, (long long)p->mbs, (long long)p->gbs,
              px_schedule_names[p->schedule], (long long)p->vpp, px_recompute_names[p->recompute],
              px_precision_names[p->precision], px_attention_names[p->attention], (long long)p->cp,
              px_cp_algo_names[p->cp_algo], (long long)p->ep, (long long)(p->etp > 0 ? p->etp : p->tp), e->sim.fits ? "true" : "false", (unsigned long long)e->peak_bytes);
      px_report_fields_csv_row(f.fp, sim, nsim, pass ? NULL : &e->sim);
      px_report_fields_csv_row(f.fp, train, ntrain, pass ? NULL : &e->train);
      if (pass) fputs(",,", f.fp);
      else fprintf(f.fp, ",%s,%s", px_dtype_names[e->sim.mfu_peak_dtype], px_dtype_names[e->sim.precision_peak_dtype]);
      char flags[PX_REPORT_FLAGS_MAX];
      px_report_plan_flags(p, m, c, flags, sizeof flags);
      fprintf(f.fp, ",\"%s\"\n", flags); /* spaces and commas: quoted (it holds no quote) */
    }
  }
  return px_afile_commit(&f, err);
}
