/* The validated error bands' rows (sim/bands.h), from every validation
 * suite: each published run's error under its plan's GPU family, precision
 * and kind of model, a line a run appended to the file PX_VALIDATION_BANDS
 * names, so that the suites' rows land in one file whichever runs first;
 * px_bands_table (tests/tools/bands.c) makes them the one table,
 * topologies/validation_bands.tsv, and its block of docs/validation.md
 * (scripts/docs.sh). */
#ifndef PX_TESTS_VALIDATION_BANDS_H
#define PX_TESTS_VALIDATION_BANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/bands.h"

/* One run's error (simulated throughput over the published one, less 1)
 * from the validation named `validation`, appended where PX_VALIDATION_BANDS
 * says (nothing without it). False, saying why on stderr, when it cannot be
 * written. */
bool px_test_band(const px_plan *plan, double err_frac, const char *validation);

/* The spread of a validation's errors: their sum, least, greatest and count. */
typedef struct {
  double sum, min, max;
  int n;
} px_test_err_range;

/* Adds one error to a. */
void px_test_err_add(px_test_err_range *a, double e);

/* The rows of fp, each added to b (px_bands_add). Errors name the line. */
px_status px_test_bands_read(FILE *fp, const char *name, px_bands *b, px_err *err);

#endif
