/* Free ranges in an array sorted by offset: a give finds its place by binary
 * search and merges with the neighbours; a take scans for the best fit.
 * Arenas hold a few hundred free ranges at most, so both stay cheap. */
#include "exec/arena.h"

#include <stdlib.h>
#include <string.h>

uint64_t px_arena_round(uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  return (bytes + PX_ARENA_ALIGN - 1) / PX_ARENA_ALIGN * PX_ARENA_ALIGN;
}

px_status px_arena_init(px_arena *a, uint64_t size, px_err *err) {
  memset(a, 0, sizeof *a);
  a->size = size / PX_ARENA_ALIGN * PX_ARENA_ALIGN;
  a->cap = 16;
  a->free = malloc((size_t)a->cap * sizeof *a->free);
  if (!a->free) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  if (a->size) a->free[a->nfree++] = (px_arena_range){0, a->size, {0}};
  return PX_OK;
}

void px_arena_destroy(px_arena *a) {
  free(a->free);
  memset(a, 0, sizeof *a);
}

/* Each of dst's tags becomes the larger of its own and src's. */
static void tags_max(uint64_t dst[PX_ARENA_TAGS], const uint64_t src[PX_ARENA_TAGS]) {
  for (int k = 0; k < PX_ARENA_TAGS; k++)
    if (src[k] > dst[k]) dst[k] = src[k];
}

bool px_arena_take(px_arena *a, uint64_t bytes, uint64_t *off, uint64_t tag[PX_ARENA_TAGS]) {
  uint64_t need = px_arena_round(bytes);
  int32_t best = -1;
  for (int32_t i = 0; i < a->nfree; i++)
    if (a->free[i].bytes >= need && (best < 0 || a->free[i].bytes < a->free[best].bytes)) best = i;
  if (best < 0) return false;
  px_arena_range *r = &a->free[best];
  *off = r->off;
  memcpy(tag, r->tag, sizeof r->tag);
  if (r->bytes == need) {
    memmove(r, r + 1, (size_t)(a->nfree - best - 1) * sizeof *r);
    a->nfree--;
  } else {
    r->off += need;
    r->bytes -= need;
  }
  a->used += need;
  if (*off + need > a->high) a->high = *off + need;
  return true;
}

/* The first free range at or after off. */
static int32_t first_after(const px_arena *a, uint64_t off) {
  int32_t lo = 0, hi = a->nfree;
  while (lo < hi) {
    int32_t mid = (lo + hi) / 2;
    if (a->free[mid].off < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

px_status px_arena_give(px_arena *a, uint64_t off, uint64_t bytes, const uint64_t tag[PX_ARENA_TAGS], px_err *err) {
  uint64_t n = px_arena_round(bytes);
  int32_t i = first_after(a, off);
  px_arena_range *prev = i > 0 ? &a->free[i - 1] : NULL, *next = i < a->nfree ? &a->free[i] : NULL;
  if (off + n > a->size || (prev && prev->off + prev->bytes > off) || (next && off + n > next->off))
    return px_err_set(err, PX_ERR_RUNTIME, "internal: arena range [%llu, +%llu) given back but not taken",
                      (unsigned long long)off, (unsigned long long)n);
  a->used -= n;
  bool join_prev = prev && prev->off + prev->bytes == off, join_next = next && off + n == next->off;
  if (join_prev && join_next) {
    prev->bytes += n + next->bytes;
    tags_max(prev->tag, tag);
    tags_max(prev->tag, next->tag);
    memmove(next, next + 1, (size_t)(a->nfree - i - 1) * sizeof *next);
    a->nfree--;
  } else if (join_prev) {
    prev->bytes += n;
    tags_max(prev->tag, tag);
  } else if (join_next) {
    next->off = off;
    next->bytes += n;
    tags_max(next->tag, tag);
  } else {
    if (a->nfree == a->cap) {
      px_arena_range *grown = realloc(a->free, (size_t)(2 * a->cap) * sizeof *grown);
      if (!grown) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
      a->free = grown;
      a->cap *= 2;
    }
    memmove(&a->free[i + 1], &a->free[i], (size_t)(a->nfree - i) * sizeof *a->free);
    a->free[i] = (px_arena_range){off, n, {0}};
    memcpy(a->free[i].tag, tag, sizeof a->free[i].tag);
    a->nfree++;
  }
  return PX_OK;
}
