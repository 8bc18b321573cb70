/* Test helpers: CUnit runner. */
#include "tests/testutil.h"

#include <CUnit/Basic.h>
#include <stdio.h>

#include "core/paths.h"

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
