/* Test helpers: a CUnit runner for one suite per executable, and
 * assertions on relative error. */
#ifndef PX_TESTS_TESTUTIL_H
#define PX_TESTS_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <math.h>
#include <stddef.h>

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

/* Path of a file under the source tree (PARALLAX_HOME). */
const char *px_test_path(const char *rel);

#endif
