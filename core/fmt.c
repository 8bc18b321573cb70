/* Human-readable numbers and counted-quantity parsing. */
#include "core/fmt.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *px_fmt_count(double v, char *buf, size_t cap) {
  static const char *units[] = {"", " K", " M", " B", " T", " P"};
  int u = 0;
  double a = fabs(v);
  while (a >= 1000.0 && u < 5) {
    a /= 1000.0;
    v /= 1000.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, cap, "%.0f", v);
  else
    snprintf(buf, cap, "%.2f%s", v, units[u]);
  return buf;
}

char *px_fmt_si(double v, const char *unit, char *buf, size_t cap) {
  static const char *prefix[] = {"", "k", "M", "G", "T", "P"};
  int u = 0;
  while (fabs(v) >= 999.5 && u < 5) v /= 1000.0, u++;
  double a = fabs(v);
  snprintf(buf, cap, a >= 99.95 ? "%.0f %s%s" : a >= 9.995 ? "%.1f %s%s" : "%.2f %s%s", v, prefix[u], unit);
  return buf;
}

char *px_fmt_bytes(double bytes, char *buf, size_t cap) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (fabs(bytes) >= 1024.0 && u < 5) {
    bytes /= 1024.0;
    u++;
  }
  snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

char *px_fmt_time(double s, char *buf, size_t cap) {
  double a = fabs(s);
  if (a < 1e-6)
    snprintf(buf, cap, "%.1f ns", s * 1e9);
  else if (a < 1e-3)
    snprintf(buf, cap, "%.1f us", s * 1e6);
  else if (a < 1.0)
    snprintf(buf, cap, "%.2f ms", s * 1e3);
  else if (a < 3600.0)
    snprintf(buf, cap, "%.2f s", s);
  else if (a < 86400.0 * 2)
    snprintf(buf, cap, "%.2f h", s / 3600.0);
  else
    snprintf(buf, cap, "%.1f days", s / 86400.0);
  return buf;
}

char *px_fmt_flops(double flops, char *buf, size_t cap) {
  static const char *units[] = {"", "K", "M", "G", "T", "P", "E", "Z"};
  int u = 0;
  while (fabs(flops) >= 1000.0 && u < 7) {
    flops /= 1000.0;
    u++;
  }
  snprintf(buf, cap, "%.2f %sFLOP", flops, units[u]);
  return buf;
}

char *px_fmt_grouped(uint64_t v, char *buf, size_t cap) {
  char digits[32];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < n && o + 2 < cap; i++) {
    if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

size_t px_scan_decimal(const char *s) {
  size_t i = 0, digits = 0;
  if (s[i] == '+' || s[i] == '-') i++;
  for (; isdigit((unsigned char)s[i]); i++) digits++;
  if (s[i] == '.')
    for (i++; isdigit((unsigned char)s[i]); i++) digits++;
  if (!digits) return 0;
  if (s[i] == 'e' || s[i] == 'E') { /* an exponent only when digits follow: "1e" is 1 and a suffix 'e' */
    size_t k = i + 1 + (s[i + 1] == '+' || s[i + 1] == '-');
    if (isdigit((unsigned char)s[k])) {
      while (isdigit((unsigned char)s[k])) k++;
      i = k;
    }
  }
  return i;
}

px_status px_parse_count(const char *s, double *out, px_err *err) {
  static const char suffixes[] = "KMBGTP";
  static const double mults[] = {1e3, 1e6, 1e9, 1e9, 1e12, 1e15};
  if (!s || !*s) return px_err_set(err, PX_ERR_INPUT, "empty number");
  size_t n = px_scan_decimal(s);
  const char *end = s + n;
  double mult = 1.0;
  if (n && isalpha((unsigned char)end[0]) && !end[1]) { /* one letter after the number: a suffix */
    const char *k = strchr(suffixes, toupper((unsigned char)end[0]));
    if (!k) return px_err_set(err, PX_ERR_INPUT, "'%.64s': unknown suffix (use K, M, B/G, T or P)", s);
    mult = mults[k - suffixes];
    end++;
  }
  if (!n || *end) return px_err_set(err, PX_ERR_INPUT, "'%.64s' is not a decimal number (e.g. 64, 2.5e3, 15T)", s);
  double v = strtod(s, NULL) * mult; /* s is decimal text up to n: strtod reads exactly that */
  if (!isfinite(v)) return px_err_set(err, PX_ERR_INPUT, "'%.64s' is out of range", s);
  *out = v;
  return PX_OK;
}

px_status px_parse_int(const char *s, const char *flag, int64_t min, int64_t max, int64_t *out, px_err *err) {
  double v = 0;
  if (px_parse_count(s, &v, err)) return px_err_prefix(err, "%s", flag);
  if (v != floor(v)) return px_err_set(err, PX_ERR_INPUT, "%s: '%.64s' is not a whole number", flag, s);
  if (v < (double)min || v > (double)max)
    return px_err_set(err, PX_ERR_INPUT, "%s: %.64s is out of range [%lld, %lld]", flag, s, (long long)min,
                      (long long)max);
  *out = (int64_t)v;
  return PX_OK;
}

px_status px_parse_name_bits(const char *s, const char *what, const char *const *names, int n,
                             const char *const *extra, const int *extra_bits, int nextra, int *bits, px_err *err) {
  int out = 0;
  for (const char *p = s; *p;) {
    size_t len = strcspn(p, ",");
    int bit = -1;
    for (int i = 0; i < n && bit < 0; i++)
      if (strlen(names[i]) == len && !strncmp(p, names[i], len)) bit = 1 << i;
    for (int j = 0; j < nextra && bit < 0; j++)
      if (strlen(extra[j]) == len && !strncmp(p, extra[j], len)) bit = extra_bits[j];
    if (bit < 0) {
      char all[256];
      size_t k = 0;
      all[0] = '\0';
      for (int i = 0; i < n + nextra && k < sizeof all; i++)
        k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", i ? ", " : "", i < n ? names[i] : extra[i - n]);
      return px_err_set(err, PX_ERR_INPUT, "%s '%.*s' is not one of %s", what, (int)len, p, all);
    }
    out |= bit;
    p += len;
    if (*p == ',') p++;
  }
  *bits = out;
  return PX_OK;
}

char *px_fmt_name_bits(int bits, const char *const *names, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && k < cap; i++)
    if (bits & (1 << i)) k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? "," : "", names[i]);
  return buf;
}

char *px_fmt_release(int64_t v, char *buf, size_t cap) {
  snprintf(buf, cap, "%lld.%lld.%lld", (long long)(v / 10000), (long long)(v / 100 % 100), (long long)(v % 100));
  return buf;
}
