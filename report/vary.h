/* `sweep --vary FIELD=V1,V2,...`: the best plan for each value of one
 * cluster field (a hardware what-if), as a table, as JSON and as the data
 * of plots/vary.gp. */
#ifndef PX_REPORT_VARY_H
#define PX_REPORT_VARY_H

#include <stdio.h>

#include <cJSON.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "sim/bands.h"
#include "sim/sweep.h"

/* One value of the varied field: the cluster with it and the sweep on that cluster. */
typedef struct {
  char value[64];
  px_cluster cluster;
  px_sweep_result result;
} px_vary_point;

void px_report_vary_text(const px_model *m, const px_sweep_opts *o, const char *field, const px_vary_point *pts, int n,
                         FILE *out);
/* {"field", "points": [{"value", "sweep": the sweep's JSON with its best plan (and its validated band, with
 * bands)}]} */
cJSON *px_report_vary_json(const px_model *m, const px_sweep_opts *o, const char *field, const px_vary_point *pts,
                           int n, const px_bands *bands);
/* Creates dir, writes dir/vary.dat (index, value, best tokens/s, its MFU and, with training tokens, cost in
 * USD; NaN where no plan fits) and renders plots/vary.gp. */
px_status px_report_vary_dir(const char *dir, const char *field, const px_vary_point *pts, int n, px_err *err);

#endif
