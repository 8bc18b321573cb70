/* Fuzz harness: a token file in each format (u16, u32, text) is opened and a
 * batch read from it, or refused with the reason; never a crash. */
#include <stdlib.h>

#include "exec/data.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const struct {
    const char *name;
    px_data_format fmt;
  } kinds[] = {{"d.u16", PX_DATA_U16}, {"d.u32", PX_DATA_U32}, {"d.txt", PX_DATA_TEXT}, {"d.bin", PX_DATA_AUTO}};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    char path[512];
    if (!fuzz_file(kinds[k].name, data, size, path, sizeof path)) continue;
    px_err err = {0};
    px_data *d;
    if (px_data_open(path, kinds[k].fmt, 50257, &d, &err)) continue;
    int32_t tokens[2 * 8], targets[2 * 8];
    (void)px_data_batch(d, (uint64_t)size, 2, 8, tokens, targets, &err);
    px_data_close(d);
  }
  return 0;
}
