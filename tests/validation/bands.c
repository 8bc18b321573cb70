/* The validated error bands' rows: one line a run, "family precision kind
 * launch error validation", tab-separated, the error a fraction in full
 * precision. */
#include "tests/validation/bands.h"

#include <stdlib.h>
#include <string.h>

bool px_test_band(const px_plan *plan, double err_frac, const char *validation) {
  const char *path = getenv("PX_VALIDATION_BANDS");
  if (!path || !*path) return true;
  px_band_key k;
  px_band_key_of(&plan->model, &plan->cluster, &plan->par, &k);
  FILE *fp = fopen(path, "a");
  bool ok = fp && fprintf(fp, "%s\t%s\t%s\t%s\t%.17g\t%s\n", k.family, k.precision, px_band_kind_name(k.moe),
                          px_band_launch_name(k.graphed), err_frac, validation) > 0;
  if (fp && fclose(fp)) ok = false;
  if (!ok) fprintf(stderr, "\n  PX_VALIDATION_BANDS: %s: cannot write\n", path);
  return ok;
}

px_status px_test_bands_read(FILE *fp, const char *name, px_bands *b, px_err *err) {
  char line[512];
  memset(b, 0, sizeof *b);
  for (int lineno = 1; fgets(line, sizeof line, fp); lineno++) {
    px_band_key k = {{0}, {0}, false, false};
    char kind[8], launch[8], validation[128];
    double e;
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "%23[^\t]\t%7[^\t]\t%7[^\t]\t%7[^\t]\t%lf\t%127[^\t]", k.family, k.precision, kind, launch, &e,
               validation) != 6 ||
        !px_band_kind_parse(kind, &k.moe) || !px_band_launch_parse(launch, &k.graphed)) {
      px_bands_free(b);
      return px_err_set(err, PX_ERR_INPUT, "%s:%d: not a band row (family, precision, dense or moe, eager or graph, "
                        "error, validation): '%.80s'", name, lineno, line);
    }
    px_status st = px_bands_add(b, &k, e, validation, err);
    if (st) {
      px_bands_free(b);
      return st;
    }
  }
  return PX_OK;
}

void px_test_err_add(px_test_err_range *a, double e) {
  if (!a->n || e < a->min) a->min = e;
  if (!a->n || e > a->max) a->max = e;
  a->sum += e, a->n++;
}
