/* A training run's result: what it owns. */
#include "exec/result.h"

#include <stdlib.h>

void px_train_result_free(px_train_result *r) {
  if (!r) return;
  free(r->losses);
  free(r->stage_peak_bytes);
  free(r->stage_host_bytes);
  free(r->stage_nvme_bytes);
  free(r->op_s);
  r->losses = NULL;
  r->stage_peak_bytes = NULL;
  r->stage_host_bytes = r->stage_nvme_bytes = NULL;
  r->op_s = NULL;
}
