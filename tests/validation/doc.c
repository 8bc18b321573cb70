/* The validations' generated blocks of docs/validation.md (doc.h). */
#include "tests/validation/doc.h"

#include <stdlib.h>

static bool failed; /* a block could not be written */

FILE *px_test_doc_block(const char *name, const char *head) {
  static bool begun; /* the file is this run's: truncated by the first block */
  const char *path = getenv("PX_VALIDATION_MD");
  if (!path || !*path) return NULL;
  FILE *fp = fopen(path, begun ? "a" : "w");
  if (!fp) {
    fprintf(stderr, "\n  PX_VALIDATION_MD: %s: cannot write\n", path);
    failed = true;
    return NULL;
  }
  begun = true;
  fprintf(fp, "<!-- generated: %s BEGIN -->\n\n%s", name, head);
  return fp;
}

void px_test_doc_block_end(FILE *fp, const char *name) {
  if (!fp) return;
  fprintf(fp, "\n<!-- generated: %s END -->\n", name);
  if (fclose(fp)) failed = true;
}

bool px_test_doc_failed(void) { return failed; }

const char *px_test_doc_pct(double e, char buf[24]) {
  char t[16];
  snprintf(t, sizeof t, "%+.1f%%", 100 * e);
  snprintf(buf, 24, "%s%s", t[0] == '-' ? "\u2212" : "", t[0] == '-' ? t + 1 : t);
  return buf;
}

const char *px_test_doc_count(long long v, char buf[32]) {
  char t[24];
  int n = snprintf(t, sizeof t, "%lld", v), o = 0;
  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = t[i];
  }
  buf[o] = '\0';
  return buf;
}
