/* The tests' reference for fp8 codes, written from the formats' definition
 * (OCP OFP8 rev 1.0), apart from the code under test: E4M3 (e5 false) bias 7,
 * no infinities, NaN S.1111.111; E5M2 bias 15, exponent 31 infinities and
 * NaNs. Shared by test_backend_ops (C) and the emulated cuBLASLt (C++). */
#ifndef PX_TESTS_FP8_REF_H
#define PX_TESTS_FP8_REF_H

#include <math.h>
#include <stdbool.h>

/* The value of code c (0-255). */
static inline double px_fp8_ref_value(int c, bool e5) {
  int mb = e5 ? 2 : 3, bias = e5 ? 15 : 7, e = (c >> mb) & (e5 ? 31 : 15), m = c & ((1 << mb) - 1);
  double s = (c & 0x80) ? -1 : 1;
  if (!e5 && e == 15 && m == 7) return NAN;
  if (e5 && e == 31) return m ? NAN : s * INFINITY;
  return s * (e ? ldexp(1.0 + m / (double)(1 << mb), e - bias) : ldexp(m / (double)(1 << mb), 1 - bias));
}

#endif
