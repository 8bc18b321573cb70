/* Fuzz harness: a command line (arguments separated by NUL or newline bytes)
 * is parsed for every flag group and, when it parses, its model, cluster and
 * plan file are loaded; anything is accepted or refused, never a crash. The
 * same line less some options (px_args_without, as launch rewrites a run's
 * flags) fits in px_args_without_room's entries. */
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "tests/fuzz/fuzz_util.h"


#define MAX_ARGS 64

static bool drop_some(const char *name) { return name[0] == 'p' || !strcmp(name, "ckpt") || !strcmp(name, "sp"); }

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
  size_t room = px_args_without_room(argc, argv);
  char **kept = malloc(room * sizeof *kept);
  if (kept) {
    int n = px_args_without(argc, argv, ~0, drop_some, kept);
    fuzz_check(n >= 0 && (size_t)n < room && kept[n] == NULL, "px_args_without fits in px_args_without_room");
    free(kept);
  }
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
