/* Test helpers: a CUnit runner for one suite per executable, and
 * assertions on relative error. */
#ifndef PX_TESTS_TESTUTIL_H
#define PX_TESTS_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
  const char *name;
  void (*fn)(void);
} px_test;

/* Runs the tests as one suite; returns 0 when all pass. */
int px_test_main(const char *suite, const px_test *tests, size_t n);

/* |a - b| <= tol * max(|b|, tiny) */
#define PX_ASSERT_REL(a, b, tol)                                                                        \
  do {                                                                                                  \
    double pxa_ = (double)(a), pxb_ = (double)(b);                                                      \
    double pxd_ = fabs(pxa_ - pxb_), pxs_ = fabs(pxb_) > 1e-300 ? fabs(pxb_) : 1e-300;                  \
    if (!(pxd_ <= (tol)*pxs_))                                                                          \
      fprintf(stderr, "\n  %s:%d: %s = %.10g, expected %s = %.10g (rel err %.3g > %.3g)\n", __FILE__,  \
              __LINE__, #a, pxa_, #b, pxb_, pxd_ / pxs_, (double)(tol));                                \
    CU_ASSERT(pxd_ <= (tol)*pxs_);                                                                      \
  } while (0)

#define PX_ASSERT_EQ_U64(a, b)                                                                      \
  do {                                                                                              \
    unsigned long long pxa_ = (unsigned long long)(a), pxb_ = (unsigned long long)(b);              \
    if (pxa_ != pxb_) fprintf(stderr, "\n  %s:%d: %s = %llu, expected %llu\n", __FILE__, __LINE__, #a, pxa_, pxb_); \
    CU_ASSERT_EQUAL(pxa_, pxb_);                                                                    \
  } while (0)

/* A test's scratch directory: px_test_tmpdir makes a fresh one under /tmp
 * (its name from tag) and returns it, px_test_tmp names a file in the last
 * one made (4 buffers in turn), px_test_rm_tree removes a tree (asserting
 * each removal). */
const char *px_test_tmpdir(const char *tag);
const char *px_test_tmp(const char *name);
void px_test_rm_tree(const char *path);

/* Path of a file under the source tree (PARALLAX_HOME). */
const char *px_test_path(const char *rel);

/* The rows of a tests/data CSV with at least `need` fields, '#' lines skipped, split at commas (the last, a source,
 * may hold more): opened on the first call (or the test stops), closed when it returns false; rows counts them. */
enum { PX_TEST_CSV_FIELDS_MAX = 14 };
typedef struct {
  FILE *fp;
  char line[512];
  char *f[PX_TEST_CSV_FIELDS_MAX];
  int rows;
} px_test_csv;
bool px_test_csv_next(px_test_csv *r, const char *rel, int need);

/* Host buffers for a test, all freed by px_tfree() (zeroed; abort when out of memory). */
void *px_talloc(size_t bytes);
void px_tfree(void);
float *px_tfloats(int64_t n);
float *px_tconst(int64_t n, float v);
float *px_tcopy(const float *x, int64_t n);

/* Deterministic random numbers (xorshift64*): uniform in [0, 1), and n floats in [lo, hi). */
void px_tseed(uint64_t s);
double px_tunit(void);
float *px_trand(int64_t n, double lo, double hi);

#endif
