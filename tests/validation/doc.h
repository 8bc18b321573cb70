/* The validations' tables for docs/validation.md: where PX_VALIDATION_MD
 * names a file, each validation writes its table there as a generated block
 * (<!-- generated: NAME BEGIN --> ... END), which scripts/docs.sh puts into
 * the doc (`make docs`) and tests/cli/docs.sh checks it holds. */
#ifndef PX_TESTS_VALIDATION_DOC_H
#define PX_TESTS_VALIDATION_DOC_H

#include <stdbool.h>
#include <stdio.h>

/* Opens the block name, its text beginning with head; NULL without
 * PX_VALIDATION_MD or when the file cannot be written (the run then fails:
 * px_test_doc_failed). The run's first block truncates the file. */
FILE *px_test_doc_block(const char *name, const char *head);
/* Closes the block name that fp holds (NULL: nothing). */
void px_test_doc_block_end(FILE *fp, const char *name);
/* Whether a block could not be written: the run fails. */
bool px_test_doc_failed(void);
/* A count with thousands separators: 16384 -> 16,384. */
const char *px_test_doc_count(long long v, char buf[32]);
/* A signed percentage as the docs print it: +13.2%, −0.3% (a minus sign, U+2212). */
const char *px_test_doc_pct(double e, char buf[24]);

#endif
