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

px_status px_parse_count(const char *s, double *out, px_err *err) {
  if (!s || !*s) return px_err_set(err, PX_ERR_INPUT, "empty number");
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s) return px_err_set(err, PX_ERR_INPUT, "'%.64s' is not a number", s);
  double mult = 1.0;
  if (*end) {
    switch (toupper((unsigned char)*end)) {
      case 'K': mult = 1e3; break;
      case 'M': mult = 1e6; break;
      case 'B':
      case 'G': mult = 1e9; break;
      case 'T': mult = 1e12; break;
      case 'P': mult = 1e15; break;
      default: return px_err_set(err, PX_ERR_INPUT, "'%.64s': unknown suffix (use K, M, B/G, T or P)", s);
    }
    if (end[1]) return px_err_set(err, PX_ERR_INPUT, "'%.64s' has trailing characters", s);
  }
  v *= mult;
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
