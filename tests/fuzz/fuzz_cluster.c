/* Fuzz harness: a cluster file read from memory is accepted (and can be
 * sized) or refused with a message, never a crash. */
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "plan/cluster.h"

#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  px_err err = {0};
  cJSON *root = NULL;
  if (parse(data, size, "fuzz.json", &root, &err)) return 0;
  px_cluster c;
  if (!px_cluster_from_json(root, "fuzz.json", &c, &err)) (void)px_cluster_set_size(&c, 64, 0, &err);
  cJSON_Delete(root);
  return 0;
}
