/* JSON input and output on top of cJSON: file loading with line/column
 * errors, typed field readers whose messages name the file and the field. */
#ifndef PX_CORE_JSON_H
#define PX_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"

/* The keys of one object that a reader looked up (px_json_ctx.keys): what
 * px_json_refuse_unknown accepts and suggests from. The key strings are
 * the reader's (string literals), not copies. At most 96, twice what the
 * largest reader looks up (our model schema's 45 keys). */
#define PX_JSON_KEYS_MAX 96
typedef struct {
  const char *key[PX_JSON_KEYS_MAX];
  int n;
} px_json_keys;

/* Where a field lives, for messages: "<file>: field '<prefix><key>'". With
 * keys, every field reader records the key it looks up there. */
typedef struct {
  const char *file;
  const char *prefix; /* "" or e.g. "gpu." */
  px_json_keys *keys; /* NULL: not recorded */
} px_json_ctx;

/* Reads and parses a JSON file of at most max_bytes, its kind's limit (what
 * names the kind for the message: "a model file"), so that a file no
 * legitimate one comes near is refused before it is read; refuses empty,
 * binary and malformed files with the line and column of the error (nesting
 * deeper than cJSON's 1000 levels included). */
px_status px_json_load_max(const char *path, size_t max_bytes, const char *what, cJSON **out, px_err *err);
/* px_json_load_max for a file parallax wrote for itself (a sweep's JSON):
 * 64 MiB. */
#define PX_JSON_MAX_BYTES ((size_t)64 << 20)
px_status px_json_load(const char *path, cJSON **out, px_err *err);
/* Parses len bytes of text, which must be followed by a NUL (text[len] == 0,
 * as px_json_load leaves it); name is the source for messages. */
px_status px_json_parse(const char *text, size_t len, const char *name, cJSON **out, px_err *err);

/* Field readers. A missing field is an error when required, otherwise *out
 * is left as it is. Null counts as missing. */
px_status px_json_int(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                      int64_t min, int64_t max, int64_t *out, px_err *err);
px_status px_json_num(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                      double min, double max, double *out, px_err *err);
px_status px_json_bool(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                       bool *out, px_err *err);
px_status px_json_str(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                      char *out, size_t cap, px_err *err);
/* A string that must be one of names[0..n); *out is its index. */
px_status px_json_enum(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                       const char *const *names, int n, int *out, px_err *err);
/* An object member that must itself be an object (NULL when absent and not required). */
px_status px_json_obj(const px_json_ctx *c, const cJSON *obj, const char *key, bool required,
                      const cJSON **out, px_err *err);

/* Looks up key (recording it as known, as the field readers do); NULL when
 * missing or null. For readers that take the value apart themselves. */
const cJSON *px_json_get(const px_json_ctx *c, const cJSON *obj, const char *key);
/* Records keys as known without reading them (a family of aliases). */
void px_json_known(const px_json_ctx *c, const char *const *keys, size_t n);
/* Refuses a member of obj that the reader did not look up (c->keys) and that
 * is not in ignored[0..nignored): "<file>: unknown field '<prefix><key>' (did
 * you mean '<nearest>'?)", the nearest known key by edit distance when it is
 * near. Call it after reading obj, so that a misspelt key is not silently
 * left at its default. */
px_status px_json_refuse_unknown(const px_json_ctx *c, const cJSON *obj, const char *const *ignored, size_t nignored,
                                 px_err *err);
/* The edit distance between a and b (insertions, deletions, substitutions
 * and swaps of adjacent characters), at most 64 characters of each. */
int px_json_edit_distance(const char *a, const char *b);

/* Adds a number, or fails with err on allocation failure. */
bool px_json_add_num(cJSON *obj, const char *key, double v);

/* Writes the tree (pretty-printed) to path through a temporary file and rename. */
px_status px_json_write(const char *path, const cJSON *root, px_err *err);
/* Prints the tree on stdout followed by a newline. */
px_status px_json_print(const cJSON *root, px_err *err);
/* Prints as px_json_print and deletes the tree; NULL (a tree that could not
 * be built) is out of memory. */
px_status px_json_print_free(cJSON *root, px_err *err);

#endif
