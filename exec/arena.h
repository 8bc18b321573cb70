/* An offset allocator over one reserved range of device memory (an arena):
 * best fit among the free ranges, a freed range merged with free neighbours.
 * Host bookkeeping only (offsets, never the memory itself), so the CUDA
 * backend sub-allocates one cudaMalloc and the CPU tests exercise the logic.
 * Each free range carries PX_ARENA_TAGS tags, numbers the caller attaches
 * when it gives a range back (the CUDA backend: per side stream, the mark its
 * last use there precedes); merged ranges keep the largest of each, and a
 * range taken reports the tags of the free range it came from. */
#ifndef PX_EXEC_ARENA_H
#define PX_EXEC_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

#define PX_ARENA_ALIGN 256 /* offsets and sizes are rounded up to this (cudaMalloc's alignment) */
#define PX_ARENA_TAGS 3

typedef struct {
  uint64_t off, bytes, tag[PX_ARENA_TAGS];
} px_arena_range;

typedef struct {
  uint64_t size;       /* bytes managed */
  uint64_t used;       /* bytes taken now (rounded sizes) */
  uint64_t high;       /* the largest end offset ever taken: size needed without fragmentation limits */
  px_arena_range *free; /* (nfree) sorted by offset, never adjacent */
  int32_t nfree, cap;
} px_arena;

/* An arena of size bytes, all free. */
px_status px_arena_init(px_arena *a, uint64_t size, px_err *err);
void px_arena_destroy(px_arena *a);

/* bytes rounded up to PX_ARENA_ALIGN. */
uint64_t px_arena_round(uint64_t bytes);

/* Takes px_arena_round(bytes) from the smallest free range that holds it (the
 * lowest such on ties), from its start; tag gets that range's tags. False,
 * and nothing changes, when no free range is large enough. bytes 0 takes one unit. */
bool px_arena_take(px_arena *a, uint64_t bytes, uint64_t *off, uint64_t tag[PX_ARENA_TAGS]);

/* Gives back what px_arena_take(bytes) returned at off, with tags. Fails
 * (PX_ERR_RUNTIME) only when the bookkeeping cannot grow, or on a range that
 * is not wholly taken (a double give). */
px_status px_arena_give(px_arena *a, uint64_t off, uint64_t bytes, const uint64_t tag[PX_ARENA_TAGS], px_err *err);

#endif
