/* Fuzz harness: a model file (our JSON or a Hugging Face config.json) read
 * from memory must be accepted or refused with a message, never crash. */
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "plan/model.h"

#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  px_err err = {0};
  cJSON *root = NULL;
  if (parse(data, size, "fuzz.json", &root, &err)) return 0;
  px_model m;
  if (!px_model_from_json(root, "fuzz.json", &m, &err)) (void)px_model_param_count(&m);
  cJSON_Delete(root);
  return 0;
}
