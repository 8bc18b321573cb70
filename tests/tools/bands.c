/* Test tool: the validated error bands from the validation suites' rows
 * (tests/validation/bands.h, the file PX_VALIDATION_BANDS named): the whole
 * of topologies/validation_bands.tsv as the generated block
 * file:topologies/validation_bands.tsv, then the block validation-bands of
 * docs/validation.md (scripts/docs.sh). Usage:
 * px_bands_table ROWS; exit 2 on a bad row, naming it. */
#include <stdio.h>

#include "tests/validation/bands.h"

/* A signed percentage as the docs print it: +13.2%, −0.3% (a minus sign, U+2212). */
static const char *pct(double e, char buf[24]) {
  char t[16];
  snprintf(t, sizeof t, "%+.1f%%", 100 * e);
  snprintf(buf, 24, "%s%s", t[0] == '-' ? "\u2212" : "", t[0] == '-' ? t + 1 : t);
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: px_bands_table ROWS\n");
    return 2;
  }
  FILE *fp = fopen(argv[1], "r");
  if (!fp) {
    fprintf(stderr, "px_bands_table: %s: cannot open\n", argv[1]);
    return 2;
  }
  px_bands b;
  px_err err = {0};
  px_status st = px_test_bands_read(fp, argv[1], &b, &err);
  fclose(fp);
  if (!st && !b.n)
    st = px_err_set(&err, PX_ERR_INPUT, "%s: no band rows (did the suites run with PX_VALIDATION_BANDS?)", argv[1]);
  if (st) {
    fprintf(stderr, "px_bands_table: %s\n", err.msg);
    px_bands_free(&b);
    return (int)st;
  }
  /* the table first: written sorted, as the docs' rows are */
  printf("<!-- generated: file:topologies/validation_bands.tsv BEGIN -->\n");
  px_bands_write(&b, stdout);
  printf("<!-- generated: file:topologies/validation_bands.tsv END -->\n");
  printf("<!-- generated: validation-bands BEGIN -->\n\n"
         "| GPU | precision | model | launch | runs | error | mean | validations |\n"
         "| --- | --- | --- | --- | ---: | --- | ---: | --- |\n");
  char t[3][24];
  for (int i = 0; i < b.n; i++) {
    const px_band *r = &b.v[i];
    printf("| %s | %s | %s | %s | %d | %s to %s | %s | %s |\n", r->key.family, r->key.precision,
           px_band_kind_words(r->key.moe), px_band_launch_words(r->key.graphed), r->runs, pct(r->min, t[0]),
           pct(r->max, t[1]), pct(r->mean, t[2]), r->sources);
  }
  printf("\n<!-- generated: validation-bands END -->\n");
  px_bands_free(&b);
  return 0;
}
