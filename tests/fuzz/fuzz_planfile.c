/* Fuzz harness: a plan file (model, cluster, size and choices, inline or by
 * name) is loaded and its choices validated, or refused; never a crash. */
#include "plan/planfile.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  if (!fuzz_file("plan.json", data, size, path, sizeof path)) return 0;
  px_err err = {0};
  px_planfile pf;
  if (!px_planfile_load(path, &pf, &err) && pf.has_model && pf.has_cluster) {
    px_parallel p = pf.par;
    px_parallel_resolve(&p, &pf.model, &pf.cluster);
    (void)px_parallel_validate(&p, &pf.model, &pf.cluster, &err);
  }
  return 0;
}
