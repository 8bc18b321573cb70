/* Fuzz harness: a command line (arguments separated by NUL or newline bytes)
 * is parsed for every flag group and, when it parses, its model, cluster and
 * plan file are loaded; anything is accepted or refused, never a crash. */
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"


#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char *argv[MAX_ARGS + 2] = {"sim"};
  int argc = 1;
  for (char *p = text; p < text + size && argc < MAX_ARGS;) {
    argv[argc++] = p;
    while (p < text + size && *p && *p != '\n') p++;
    if (p < text + size) *p++ = 0;
  }
  argv[argc] = NULL;
  px_args a;
  px_err err = {0};
  if (!px_args_parse(&a, "sim", ~0, argc, argv, &err)) {
    px_model m;
    px_cluster c;
    (void)px_args_load(&a, &m, &c, &err);
  }
  free(text);
  return 0;
}
