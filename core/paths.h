/* Where presets live: $PARALLAX_HOME if set, else the source tree the binary
 * was built from. Names without a slash or .json resolve to presets. */
#ifndef PX_CORE_PATHS_H
#define PX_CORE_PATHS_H

#include <stddef.h>

#include "core/status.h"

const char *px_data_dir(void);
/* kind is "models" or "topologies". A name that contains '/' or ends in
 * ".json" is a path and is returned as is. */
px_status px_preset_path(const char *kind, const char *name_or_path, char *out, size_t cap, px_err *err);
/* Sorted preset names of a kind (without .json); free with px_preset_list_free. */
px_status px_preset_list(const char *kind, char ***names, size_t *count, px_err *err);
void px_preset_list_free(char **names, size_t count);
/* The part of a path after the last '/' and before a final ".json". */
void px_path_stem(const char *path, char *out, size_t cap);

#endif
