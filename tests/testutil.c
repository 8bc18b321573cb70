/* Test helpers: CUnit runner, a host arena, random numbers. */
#include "tests/testutil.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"

static char tmpdir[256];

const char *px_test_tmpdir(const char *tag) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/px_test_%s_XXXXXX", tag);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
  return tmpdir;
}

const char *px_test_tmp(const char *name) {
  static char buf[4][512];
  static int next;
  char *b = buf[next++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
  return b;
}

void px_test_rm_tree(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0) return;
  if (S_ISDIR(sb.st_mode)) {
    DIR *dir = opendir(path);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[1024];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      px_test_rm_tree(sub);
    }
    if (dir) closedir(dir);
    CU_ASSERT_EQUAL(rmdir(path), 0);
  } else {
    CU_ASSERT_EQUAL(unlink(path), 0);
  }
}

int px_test_main(const char *suite, const px_test *tests, size_t n) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite(suite, NULL, NULL);
  for (size_t i = 0; s && i < n; i++) CU_add_test(s, tests[i].name, tests[i].fn);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  unsigned ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  if (ran != n) {
    fprintf(stderr, "%s: ran %u of %zu tests\n", suite, ran, n);
    return 1;
  }
  return failed ? 1 : 0;
}

const char *px_test_path(const char *rel) {
  static char buf[8][4096];
  static int next;
  char *b = buf[next++ % 8];
  snprintf(b, sizeof buf[0], "%s/%s", px_data_dir(), rel);
  return b;
}

bool px_test_csv_next(px_test_csv *r, const char *rel, int need) {
  if (!r->fp) r->fp = fopen(px_test_path(rel), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->fp);
  while (fgets(r->line, sizeof r->line, r->fp)) {
    if (r->line[0] == '#') continue;
    int n = 0;
    r->line[strcspn(r->line, "\r\n")] = '\0';
    for (char *p = r->line; n < PX_TEST_CSV_FIELDS_MAX && p; n++) {
      r->f[n] = p;
      p = n + 1 < PX_TEST_CSV_FIELDS_MAX ? strchr(p, ',') : NULL;
      if (p) *p++ = '\0';
    }
    if (n < need) continue;
    r->rows++;
    return true;
  }
  fclose(r->fp);
  r->fp = NULL;
  return false;
}

static void **arena;
static size_t narena, cap_arena;

void *px_talloc(size_t bytes) {
  if (narena == cap_arena) {
    size_t cap = cap_arena ? 2 * cap_arena : 256;
    void **grown = realloc(arena, cap * sizeof *grown);
    if (!grown) abort();
    arena = grown, cap_arena = cap;
  }
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) abort();
  arena[narena++] = p;
  return p;
}

void px_tfree(void) {
  while (narena > 0) free(arena[--narena]);
}

float *px_tfloats(int64_t n) { return px_talloc((size_t)n * sizeof(float)); }

float *px_tconst(int64_t n, float v) {
  float *x = px_tfloats(n);
  for (int64_t i = 0; i < n; i++) x[i] = v;
  return x;
}

float *px_tcopy(const float *x, int64_t n) {
  float *y = px_tfloats(n);
  memcpy(y, x, (size_t)n * sizeof *y);
  return y;
}

static uint64_t rng_state;

void px_tseed(uint64_t s) { rng_state = s * 2654435761u + 0x9E3779B97F4A7C15ull; }

double px_tunit(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

float *px_trand(int64_t n, double lo, double hi) {
  float *x = px_tfloats(n);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * px_tunit());
  return x;
}
