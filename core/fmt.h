/* Human-readable numbers: counts (8.03 B), bytes (75.3 GiB), times, rates;
 * the name tables of enums. */
#ifndef PX_CORE_FMT_H
#define PX_CORE_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Defines a table of names for the `count` values of an enum (prefix it with
 * `static` for a file-local one); a list longer or shorter than the enum
 * fails to compile. */
#define PX_NAME_TABLE(table, count, ...)           \
  const char *const table[count] = {__VA_ARGS__}; \
  _Static_assert(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *) == (count), #table " names every value")

/* A comma-separated list of a table's names as bits: names[i] sets 1 << i, extra[j] (a word such as "all")
 * extra_bits[j]; "" is 0. An unknown name: PX_ERR_INPUT, "<what> 'x' is not one of <the names, the extras>". */
px_status px_parse_name_bits(const char *s, const char *what, const char *const *names, int n,
                             const char *const *extra, const int *extra_bits, int nextra, int *bits, px_err *err);
/* bits as their names in table order, comma-separated, into buf; returns buf. */
char *px_fmt_name_bits(int bits, const char *const *names, int n, char *buf, size_t cap);

/* Each writes into buf and returns it. */
char *px_fmt_count(double v, char *buf, size_t cap); /* 124.44 M, 8.03 B, 1.2 T */
char *px_fmt_bytes(double bytes, char *buf, size_t cap); /* binary units: 1.50 GiB */
char *px_fmt_time(double s, char *buf, size_t cap);   /* 12.3 us, 4.56 ms, 7.89 s, 3.2 h, 12.5 d */
char *px_fmt_flops(double flops, char *buf, size_t cap); /* 1.23 PFLOP */
char *px_fmt_grouped(uint64_t v, char *buf, size_t cap); /* 8,030,261,248 */
char *px_fmt_si(double v, const char *unit, char *buf, size_t cap); /* SI prefixes, 3 digits: 640 W, 9.70 kW, 19.9 MW */
char *px_fmt_release(int64_t v, char *buf, size_t cap); /* cudnn.backend_version()'s 91301 as 9.13.1 */

/* The length of the decimal number s starts with: an optional sign, digits
 * with an optional point (at least one digit), an optional exponent; 0: none.
 * No hex, inf, nan or spaces, which strtod would take. */
size_t px_scan_decimal(const char *s);
/* Parses "15T", "2.5B", "300M", "1e12", "4096": a decimal number
 * (px_scan_decimal) and an optional suffix, K/M/B(G)/T/P, powers of 1000;
 * nothing else, no spaces. */
px_status px_parse_count(const char *s, double *out, px_err *err);
/* Parses an integer with optional K/M/G suffix (powers of 1000) within [min, max]. */
px_status px_parse_int(const char *s, const char *flag, int64_t min, int64_t max, int64_t *out, px_err *err);

#endif
