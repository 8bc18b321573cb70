/* JSON loading and typed field readers with messages naming file and field. */
#include "core/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/fileio.h"
#include "core/fmt.h"

static const char *json_type_name(const cJSON *v) {
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  if (cJSON_IsNull(v)) return "null";
  return "an invalid value";
}

px_status px_json_parse(const char *text, size_t len, const char *name, cJSON **out, px_err *err) {
  *out = NULL;
  size_t i = 0;
  while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) i++;
  if (i == len) return px_err_set(err, PX_ERR_INPUT, "%s: file is empty", name);
  if (memchr(text, '\0', len))
    return px_err_set(err, PX_ERR_INPUT, "%s: not a text file (contains NUL bytes)", name);
  const char *end = NULL;
  /* len + 1: cJSON wants the terminating NUL inside the length when it must end there. */
  cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
  if (!root) {
    size_t at = end && end >= text ? (size_t)(end - text) : 0;
    if (at > len) at = len;
    int line = 1, col = 1, depth = 0, max_depth = 0;
    for (size_t k = 0; k < at; k++) {
      if (text[k] == '[' || text[k] == '{') max_depth = ++depth > max_depth ? depth : max_depth;
      if (text[k] == ']' || text[k] == '}') depth--;
      if (text[k] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    if (max_depth >= CJSON_NESTING_LIMIT)
      return px_err_set(err, PX_ERR_INPUT, "%s:%d:%d: invalid JSON (nested more than %d levels deep)", name, line,
                        col, CJSON_NESTING_LIMIT);
    return px_err_set(err, PX_ERR_INPUT, "%s:%d:%d: invalid JSON%s", name, line, col,
                      at >= len ? " (truncated?)" : "");
  }
  *out = root;
  return PX_OK;
}

px_status px_json_load_max(const char *path, size_t max_bytes, const char *what, cJSON **out, px_err *err) {
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > max_bytes) {
    char size[32], most[32];
    return px_err_set(err, PX_ERR_INPUT, "%s: %s bytes, more than %s may have (%s)", path,
                      px_fmt_grouped((uint64_t)sb.st_size, size, sizeof size), what,
                      px_fmt_bytes((double)max_bytes, most, sizeof most));
  }
  char *text = NULL;
  size_t len = 0;
  px_status st = px_file_read(path, max_bytes, &text, &len, err);
  if (st) return st;
  st = px_json_parse(text, len, path, out, err);
  free(text);
  return st;
}

px_status px_json_load(const char *path, cJSON **out, px_err *err) {
  return px_json_load_max(path, PX_JSON_MAX_BYTES, "a file parallax wrote", out, err);
}

void px_json_known(const px_json_ctx *c, const char *const *keys, size_t n) {
  if (!c->keys) return;
  for (size_t i = 0; i < n; i++) {
    int k = 0;
    while (k < c->keys->n && strcmp(c->keys->key[k], keys[i])) k++;
    if (k == c->keys->n && k < PX_JSON_KEYS_MAX) c->keys->key[c->keys->n++] = keys[i];
  }
}

const cJSON *px_json_get(const px_json_ctx *c, const cJSON *obj, const char *key) {
  px_json_known(c, &key, 1);
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  return item && !cJSON_IsNull(item) ? item : NULL;
}

int px_json_edit_distance(const char *a, const char *b) {
  enum { N = 64 };
  int la = (int)strnlen(a, N), lb = (int)strnlen(b, N);
  int d[N + 1][N + 1];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

px_status px_json_refuse_unknown(const px_json_ctx *c, const cJSON *obj, const char *const *ignored, size_t nignored,
                                 px_err *err) {
  if (!c->keys || !cJSON_IsObject(obj)) return PX_OK;
  for (const cJSON *e = obj->child; e; e = e->next) {
    if (!e->string) continue;
    bool known = false;
    for (int k = 0; k < c->keys->n && !known; k++) known = !strcmp(e->string, c->keys->key[k]);
    for (size_t k = 0; k < nignored && !known; k++) known = !strcmp(e->string, ignored[k]);
    if (known) continue;
    /* the nearest known key, when a third of the key's characters or fewer (at least 2) differ */
    const char *near = NULL;
    int len = (int)strlen(e->string), best = (len / 3 > 2 ? len / 3 : 2) + 1;
    for (int k = 0; k < c->keys->n; k++) {
      int d = px_json_edit_distance(e->string, c->keys->key[k]);
      if (d < best) best = d, near = c->keys->key[k];
    }
    if (near)
      return px_err_set(err, PX_ERR_INPUT, "%s: unknown field '%s%.64s' (did you mean '%s%s'?)", c->file, c->prefix,
                        e->string, c->prefix, near);
    return px_err_set(err, PX_ERR_INPUT, "%s: unknown field '%s%.64s'", c->file, c->prefix, e->string);
  }
  return PX_OK;
}

/* Looks up key; *v is NULL when missing or null. */
static px_status json_field(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                            const cJSON **v, px_err *err) {
  const cJSON *item = px_json_get(c, obj, key);
  *v = item;
  if (!item && required)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s' is missing", c->file, c->prefix, key);
  return PX_OK;
}

static px_status json_wrong_type(const px_json_ctx *c, const char *key, const char *want, const cJSON *v,
                                 px_err *err) {
  return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': expected %s, got %s", c->file, c->prefix, key,
                    want, json_type_name(v));
}

px_status px_json_num(const px_json_ctx *c, const cJSON *obj, const char *key, bool required, double min,
                      double max, double *out, px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  if (st || !v) return st;
  if (!cJSON_IsNumber(v)) return json_wrong_type(c, key, "a number", v, err);
  double d = v->valuedouble;
  if (!isfinite(d) || d < min || d > max)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': %g is out of range [%g, %g]", c->file, c->prefix,
                      key, d, min, max);
  *out = d;
  return PX_OK;
}

px_status px_json_int(const px_json_ctx *c, const cJSON *obj, const char *key, bool required, int64_t min,
                      int64_t max, int64_t *out, px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  if (st || !v) return st;
  if (!cJSON_IsNumber(v)) return json_wrong_type(c, key, "an integer", v, err);
  double d = v->valuedouble;
  if (!isfinite(d) || d < (double)min || d > (double)max)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': %g is out of range [%lld, %lld]", c->file,
                      c->prefix, key, d, (long long)min, (long long)max);
  if (d != floor(d))
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': expected an integer, got %g", c->file, c->prefix,
                      key, d);
  *out = (int64_t)d;
  return PX_OK;
}

px_status px_json_bool(const px_json_ctx *c, const cJSON *obj, const char *key, bool required, bool *out,
                       px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  if (st || !v) return st;
  if (!cJSON_IsBool(v)) return json_wrong_type(c, key, "true or false", v, err);
  *out = cJSON_IsTrue(v);
  return PX_OK;
}

px_status px_json_str(const px_json_ctx *c, const cJSON *obj, const char *key, bool required, char *out,
                      size_t cap, px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  if (st || !v) return st;
  if (!cJSON_IsString(v)) return json_wrong_type(c, key, "a string", v, err);
  size_t n = strlen(v->valuestring);
  if (n >= cap)
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': string longer than %zu characters", c->file,
                      c->prefix, key, cap - 1);
  memcpy(out, v->valuestring, n + 1);
  return PX_OK;
}

px_status px_json_enum(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                       const char *const *names, int n, int *out, px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  if (st || !v) return st;
  if (!cJSON_IsString(v)) return json_wrong_type(c, key, "a string", v, err);
  for (int i = 0; i < n; i++) {
    if (strcmp(v->valuestring, names[i]) == 0) {
      *out = i;
      return PX_OK;
    }
  }
  char choices[256] = "";
  for (int i = 0; i < n; i++) {
    size_t used = strlen(choices);
    snprintf(choices + used, sizeof choices - used, "%s%s", i ? "|" : "", names[i]);
  }
  return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': '%.64s' is not one of %s", c->file, c->prefix, key,
                    v->valuestring, choices);
}

px_status px_json_obj(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                      const cJSON **out, px_err *err) {
  const cJSON *v;
  px_status st = json_field(c, obj, key, required, &v, err);
  *out = NULL;
  if (st || !v) return st;
  if (!cJSON_IsObject(v)) return json_wrong_type(c, key, "an object", v, err);
  *out = v;
  return PX_OK;
}

bool px_json_add_num(cJSON *obj, const char *key, double v) {
  return cJSON_AddNumberToObject(obj, key, v) != NULL;
}

px_status px_json_write(const char *path, const cJSON *root, px_err *err) {
  char *text = cJSON_Print(root);
  if (!text) return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory printing JSON", path);
  size_t n = strlen(text);
  text[n] = '\n'; /* replaces the NUL; length passed explicitly */
  px_status st = px_file_write(path, text, n + 1, err);
  cJSON_free(text);
  return st;
}

px_status px_json_print(const cJSON *root, px_err *err) {
  char *text = cJSON_Print(root);
  if (!text) return px_err_set(err, PX_ERR_RUNTIME, "out of memory printing JSON");
  fputs(text, stdout);
  fputc('\n', stdout);
  cJSON_free(text);
  return PX_OK;
}

px_status px_json_print_free(cJSON *root, px_err *err) {
  px_status st = root ? px_json_print(root, err) : px_err_set(err, PX_ERR_RUNTIME, "out of memory building JSON");
  cJSON_Delete(root);
  return st;
}
