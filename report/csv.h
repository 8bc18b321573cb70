/* `parallax sweep --csv FILE`: every evaluated plan, one row each: the ranked
 * ones with the simulator's summary and time to train, then the ones that do
 * not fit (rank 0, fits false, their peak memory and empty figures). */
#ifndef PX_REPORT_CSV_H
#define PX_REPORT_CSV_H

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "sim/sweep.h"

/* Written atomically; each row's flags column (quoted) gives its plan again with m's and c's flags. */
px_status px_report_sweep_csv(const char *path, const px_model *m, const px_cluster *c, const px_sweep_result *r,
                              px_err *err);

#endif
