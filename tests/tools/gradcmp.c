/* Test tool: compares two gradient dumps (raw fp32, canonical order) of the
 * same model from different plans. Passes (exit 0) when the relative L2
 * error and the largest absolute difference relative to the largest
 * gradient are both within the tolerance; prints both. Usage:
 * gradcmp A B [TOL=1e-5] [--exact] [--scale S]; with --scale, B is compared
 * with S x A (with --exact: bitwise, S a power of 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *v = malloc((size_t)bytes + 4);
  if (v && fread(v, 1, (size_t)bytes, f) != (size_t)bytes) {
    free(v);
    v = NULL;
  }
  fclose(f);
  *n = bytes / 4;
  return v;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gradcmp A B [TOL] [--exact]\n");
    return 2;
  }
  double tol = argc > 3 && strcmp(argv[3], "--exact") ? atof(argv[3]) : 1e-5;
  int exact = 0;
  float scale = 1.0f;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--exact")) exact = 1;
    if (!strcmp(argv[i], "--scale") && i + 1 < argc) scale = (float)atof(argv[++i]);
  }
  if (argc > 3 && argv[3][0] == '-') tol = 1e-5;
  long na, nb;
  float *a = load(argv[1], &na), *b = load(argv[2], &nb);
  if (!a || !b || na != nb || na == 0) {
    fprintf(stderr, "gradcmp: cannot compare %s (%ld) and %s (%ld)\n", argv[1], a ? na : -1, argv[2], b ? nb : -1);
    return 1;
  }
  for (long i = 0; i < na; i++) a[i] *= scale;
  if (exact) {
    int same = memcmp(a, b, (size_t)na * 4) == 0;
    printf("gradcmp: %ld gradients %s\n", na, same ? "bitwise equal" : "DIFFER");
    return same ? 0 : 1;
  }
  double num = 0, den = 0, amax = 0, dmax = 0;
  for (long i = 0; i < na; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)a[i] * (double)a[i];
    if (fabs(a[i]) > amax) amax = fabs(a[i]);
    if (fabs(d) > dmax) dmax = fabs(d);
    if (!isfinite(a[i]) || !isfinite(b[i])) dmax = INFINITY;
  }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num), mx = amax > 0 ? dmax / amax : dmax;
  printf("gradcmp: %ld gradients, relative L2 error %.2e, max |diff| / max |g| %.2e (tolerance %.0e)\n", na, rel, mx, tol);
  free(a);
  free(b);
  return rel <= tol && mx <= tol ? 0 : 1;
}
