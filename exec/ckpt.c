/* Checkpoint shards (header, fp32 tensors, xxHash64 trailer) and the
 * manifest that marks a checkpoint directory complete. */
#include "exec/ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/json.h"
#include "exec/ckpt_lock.h" /* PX_CKPT_LOCK_FILE: a kept checkpoint in use */
#include "plan/planfile.h"

#define TRAILER_BYTES 8
#define MAX_WORLD (1 << 24)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN 1
#else
#define HOST_BIG_ENDIAN 0
#endif

/* ---- xxHash64 ---------------------------------------------------------- */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

typedef struct {
  uint64_t total;
  uint64_t v[4];
  uint64_t seed;
  uint8_t buf[32];
  size_t buf_n;
} xxh64;

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t rd64(const uint8_t *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
  return x;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr64(uint8_t *p, uint64_t x) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(x >> (8 * i));
}

static void wr32(uint8_t *p, uint32_t x) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t xxh_round(uint64_t acc, uint64_t in) {
  acc += in * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}

static uint64_t xxh_merge(uint64_t acc, uint64_t v) {
  acc ^= xxh_round(0, v);
  return acc * P1 + P4;
}

static void xxh_init(xxh64 *s, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->seed = seed;
  s->v[0] = seed + P1 + P2;
  s->v[1] = seed + P2;
  s->v[2] = seed;
  s->v[3] = seed - P1;
}

static void xxh_stripe(xxh64 *s, const uint8_t *p) {
  for (int i = 0; i < 4; i++) s->v[i] = xxh_round(s->v[i], rd64(p + 8 * i));
}

static void xxh_update(xxh64 *s, const void *data, size_t n) {
  const uint8_t *p = data;
  s->total += n;
  if (s->buf_n + n < 32) {
    if (n) memcpy(s->buf + s->buf_n, p, n);
    s->buf_n += n;
    return;
  }
  if (s->buf_n) {
    size_t fill = 32 - s->buf_n;
    memcpy(s->buf + s->buf_n, p, fill);
    xxh_stripe(s, s->buf);
    p += fill;
    n -= fill;
    s->buf_n = 0;
  }
  for (; n >= 32; p += 32, n -= 32) xxh_stripe(s, p);
  if (n) memcpy(s->buf, p, n);
  s->buf_n = n;
}

static uint64_t xxh_digest(const xxh64 *s) {
  uint64_t h;
  if (s->total >= 32) {
    h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
    for (int i = 0; i < 4; i++) h = xxh_merge(h, s->v[i]);
  } else {
    h = s->seed + P5;
  }
  h += s->total;
  const uint8_t *p = s->buf;
  size_t n = s->buf_n;
  for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ xxh_round(0, rd64(p)), 27) * P1 + P4;
  if (n >= 4) {
    h = rotl(h ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  for (; n; p++, n--) h = rotl(h ^ (uint64_t)*p * P5, 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t px_ckpt_hash_bytes(const void *p, size_t n, uint64_t seed) {
  xxh64 s;
  xxh_init(&s, seed);
  xxh_update(&s, p, n);
  return xxh_digest(&s);
}

/* ---- header ------------------------------------------------------------ */

typedef struct {
  uint32_t version;
  px_ckpt_meta meta;
  uint32_t n_tensors;
} shard_header;

static void header_encode(const px_ckpt_meta *m, uint32_t n, uint8_t *b /* (PX_CKPT_HEADER_BYTES) */) {
  memcpy(b, PX_CKPT_MAGIC, 8);
  wr32(b + 8, PX_CKPT_VERSION);
  wr64(b + 12, m->plan_hash);
  wr64(b + 20, m->model_hash);
  wr64(b + 28, (uint64_t)m->step);
  wr32(b + 36, (uint32_t)m->rank);
  wr32(b + 40, (uint32_t)m->world);
  wr32(b + 44, (uint32_t)m->tp_rank);
  wr32(b + 48, (uint32_t)m->pp_rank);
  wr32(b + 52, (uint32_t)m->dp_rank);
  wr32(b + 56, n);
}

/* Checks magic and version, then decodes. */
static px_status header_decode(const char *path, const uint8_t *b, shard_header *h, px_err *err) {
  if (memcmp(b, PX_CKPT_MAGIC, 8) != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: not a parallax checkpoint shard, or corrupt (bad magic)", path);
  h->version = rd32(b + 8);
  if (h->version != PX_CKPT_VERSION)
    return px_err_set(err, PX_ERR_INPUT, "%s: shard format version %" PRIu32 ", this build reads version %u",
                      path, h->version, PX_CKPT_VERSION);
  h->meta.plan_hash = rd64(b + 12);
  h->meta.model_hash = rd64(b + 20);
  h->meta.step = (int64_t)rd64(b + 28);
  h->meta.rank = (int32_t)rd32(b + 36);
  h->meta.world = (int32_t)rd32(b + 40);
  h->meta.tp_rank = (int32_t)rd32(b + 44);
  h->meta.pp_rank = (int32_t)rd32(b + 48);
  h->meta.dp_rank = (int32_t)rd32(b + 52);
  h->n_tensors = rd32(b + 56);
  return PX_OK;
}

static px_status check_meta(const char *what, const px_ckpt_meta *m, px_err *err) {
  if (!m) return px_err_set(err, PX_ERR_INPUT, "%s: no checkpoint metadata", what);
  if (m->world < 1 || m->world > MAX_WORLD)
    return px_err_set(err, PX_ERR_INPUT, "%s: world size %" PRId32 " is out of range 1..%d", what, m->world,
                      MAX_WORLD);
  if (m->rank < 0 || m->rank >= m->world)
    return px_err_set(err, PX_ERR_INPUT, "%s: rank %" PRId32 " is out of range 0..%" PRId32, what, m->rank,
                      m->world - 1);
  if (m->tp_rank < 0 || m->pp_rank < 0 || m->dp_rank < 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: negative tp/pp/dp rank (%" PRId32 ", %" PRId32 ", %" PRId32 ")", what,
                      m->tp_rank, m->pp_rank, m->dp_rank);
  if (m->step < 0) return px_err_set(err, PX_ERR_INPUT, "%s: negative step %" PRId64, what, m->step);
  return PX_OK;
}

static px_status check_tensors(const char *what, const px_ckpt_tensor *t, int n, px_err *err) {
  if (n < 0) return px_err_set(err, PX_ERR_INPUT, "%s: negative tensor count %d", what, n);
  if (n > 0 && !t) return px_err_set(err, PX_ERR_INPUT, "%s: no tensors given", what);
  for (int i = 0; i < n; i++) {
    size_t k = t[i].name ? strlen(t[i].name) : 0;
    if (k < 1 || k > PX_CKPT_NAME_MAX)
      return px_err_set(err, PX_ERR_INPUT, "%s: tensor %d: name must be 1..%d bytes (got %zu)", what, i,
                        PX_CKPT_NAME_MAX, k);
    if (t[i].count > (uint64_t)SIZE_MAX / sizeof(float))
      return px_err_set(err, PX_ERR_INPUT, "%s: tensor %d ('%s'): %" PRIu64 " elements is too many", what, i,
                        t[i].name, t[i].count);
    if (t[i].count > 0 && !t[i].data)
      return px_err_set(err, PX_ERR_INPUT, "%s: tensor %d ('%s'): no data buffer", what, i, t[i].name);
  }
  return PX_OK;
}

px_status px_ckpt_shard_path(const char *dir, int32_t rank, char *buf, size_t cap, px_err *err) {
  if (!dir || !*dir) return px_err_set(err, PX_ERR_INPUT, "checkpoint: no directory given");
  int k = snprintf(buf, cap, "%s/shard-%" PRId32 ".bin", dir, rank);
  if (k < 0 || (size_t)k >= cap) return px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
  return PX_OK;
}

/* ---- where a checkpoint is read from -------------------------------------- */

/* The manifest of the checkpoint in dir, into buf: the staged one while a
 * stopped commit has not moved it in (*staged), else dir's (which may not
 * exist). */
static px_status committed_manifest(const char *dir, char *buf, size_t cap, bool *staged, px_err *err) {
  char staging[4096];
  px_status st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  if (st) return st;
  int k = snprintf(buf, cap, "%s/%s", staging, PX_CKPT_MANIFEST);
  if (k < 0 || (size_t)k >= cap) return px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
  *staged = px_file_exists(buf);
  if (!*staged) snprintf(buf, cap, "%s/%s", dir, PX_CKPT_MANIFEST);
  return PX_OK;
}

/* Where shard `rank` of the checkpoint in dir is read: in staging while a
 * stopped commit has not moved it yet, else in dir. */
static px_status read_shard_path(const char *dir, int32_t rank, char *buf, size_t cap, px_err *err) {
  char man[4200], staging[4096];
  bool staged = false;
  px_status st = committed_manifest(dir, man, sizeof man, &staged, err);
  if (!st && staged && !(st = px_ckpt_staging_path(dir, staging, sizeof staging, err)) &&
      !(st = px_ckpt_shard_path(staging, rank, buf, cap, err)) && px_file_exists(buf))
    return PX_OK;
  return st ? st : px_ckpt_shard_path(dir, rank, buf, cap, err);
}

/* ---- writing ----------------------------------------------------------- */

typedef struct {
  FILE *fp;
  xxh64 h;
  bool failed;
} hwriter;

static void hw_put(hwriter *w, const void *p, size_t n) {
  if (w->failed || n == 0) return;
  if (fwrite(p, 1, n, w->fp) != n) {
    w->failed = true;
    return;
  }
  xxh_update(&w->h, p, n);
}

static void hw_put_f32(hwriter *w, const float *x, uint64_t count) {
#if HOST_BIG_ENDIAN
  uint8_t chunk[4096];
  while (count && !w->failed) {
    size_t m = count < sizeof chunk / 4 ? (size_t)count : sizeof chunk / 4;
    for (size_t i = 0; i < m; i++) {
      uint32_t u;
      memcpy(&u, x + i, 4);
      wr32(chunk + 4 * i, u);
    }
    hw_put(w, chunk, 4 * m);
    x += m;
    count -= m;
  }
#else
  hw_put(w, x, (size_t)count * sizeof *x);
#endif
}

/* fsync of a directory, so that the names renamed into it survive a crash. */
static px_status sync_dir(const char *dir, px_err *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open directory to sync it: %s", dir, strerror(errno));
  int rc = fsync(fd), saved = errno;
  close(fd);
  /* some file systems cannot sync a directory (EINVAL): nothing more can be done there */
  if (rc != 0 && saved != EINVAL && saved != EROFS)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot sync directory: %s", dir, strerror(saved));
  return PX_OK;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

px_status px_ckpt_write_shard(const char *dir, const px_ckpt_meta *meta, const px_ckpt_tensor *tensors, int n,
                              px_err *err) {
  return px_ckpt_write_shard_paced(dir, meta, tensors, n, 0, err);
}

px_status px_ckpt_write_shard_paced(const char *dir, const px_ckpt_meta *meta, const px_ckpt_tensor *tensors, int n,
                                    unsigned pause_ms, px_err *err) {
  char path[4096];
  px_status st = check_meta(dir ? dir : "checkpoint", meta, err);
  if (st) return st;
  if ((st = px_ckpt_shard_path(dir, meta->rank, path, sizeof path, err))) return st;
  if ((st = check_tensors(path, tensors, n, err))) return st;
  if ((st = px_mkdir_p(dir, err))) return st;
  px_afile f;
  if ((st = px_afile_open(&f, path, err))) return st;
  hwriter w = {.fp = f.fp};
  xxh_init(&w.h, 0);
  uint8_t hdr[PX_CKPT_HEADER_BYTES];
  header_encode(meta, (uint32_t)n, hdr);
  hw_put(&w, hdr, sizeof hdr);
  for (int i = 0; i < n && !w.failed; i++) {
    uint8_t b[8];
    uint32_t k = (uint32_t)strlen(tensors[i].name);
    wr32(b, k);
    hw_put(&w, b, 4);
    hw_put(&w, tensors[i].name, k);
    wr64(b, tensors[i].count);
    hw_put(&w, b, 8);
    hw_put_f32(&w, tensors[i].data, tensors[i].count);
    if (i == 0 && pause_ms) { /* test hook: half-written and visible, for a test to kill the run here */
      if (fflush(f.fp) != 0) w.failed = true;
      sleep_ms(pause_ms);
    }
  }
  uint8_t trailer[TRAILER_BYTES];
  wr64(trailer, xxh_digest(&w.h));
  if (!w.failed && fwrite(trailer, 1, sizeof trailer, f.fp) != sizeof trailer) w.failed = true;
  if (w.failed) {
    int saved = errno;
    px_afile_abort(&f);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: write failed: %s", path, strerror(saved));
  }
  if ((st = px_afile_commit(&f, err))) return st;
  return sync_dir(dir, err);
}

/* ---- reading ----------------------------------------------------------- */

typedef struct {
  FILE *fp;
  const char *path;
  xxh64 h;
  bool hash; /* hash what is read (and read what is skipped), to check the checksum */
} hreader;

/* Reads exactly n bytes and hashes them. */
static px_status hr_get(hreader *r, void *p, size_t n, px_err *err) {
  if (n == 0) return PX_OK;
  if (fread(p, 1, n, r->fp) != n) {
    if (ferror(r->fp)) return px_err_set(err, PX_ERR_RUNTIME, "%s: read error: %s", r->path, strerror(errno));
    return px_err_set(err, PX_ERR_INPUT, "%s: truncated (file ended early; it changed while being read?)", r->path);
  }
  if (r->hash) xxh_update(&r->h, p, n);
  return PX_OK;
}

static px_status hr_skip(hreader *r, uint64_t n, px_err *err) {
  if (!r->hash) { /* the walk's checks bound n by the file's size */
    if (fseeko(r->fp, (off_t)n, SEEK_CUR) != 0)
      return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot seek: %s", r->path, strerror(errno));
    return PX_OK;
  }
  uint8_t chunk[65536];
  while (n) {
    size_t m = n < sizeof chunk ? (size_t)n : sizeof chunk;
    px_status st = hr_get(r, chunk, m, err);
    if (st) return st;
    n -= m;
  }
  return PX_OK;
}

static px_status hr_get_f32(hreader *r, float *x, uint64_t count, px_err *err) {
  px_status st = hr_get(r, x, (size_t)count * sizeof *x, err);
#if HOST_BIG_ENDIAN
  for (uint64_t i = 0; !st && i < count; i++) {
    uint32_t u = rd32((const uint8_t *)(x + i));
    memcpy(x + i, &u, 4);
  }
#endif
  return st;
}

/* Tensor names from a file may hold anything: print them safely. */
static void printable(const char *s, size_t n, char *out /* (n + 1) */) {
  for (size_t i = 0; i < n; i++) out[i] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
  out[n] = '\0';
}

static px_status file_size(const char *path, const char *missing_why, uint64_t *size, px_err *err) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT) return px_err_set(err, PX_ERR_INPUT, "%s: missing%s", path, missing_why);
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
  }
  if (!S_ISREG(sb.st_mode)) return px_err_set(err, PX_ERR_INPUT, "%s: not a regular file", path);
  *size = (uint64_t)sb.st_size;
  return PX_OK;
}

/* Called for each tensor entry of a shard being walked; must consume the
 * tensor's count x 4 data bytes (hr_get_f32 or hr_skip). */
typedef px_status (*tensor_fn)(void *ctx, hreader *r, uint32_t i, const char *name, uint32_t k, uint64_t count,
                               px_err *err);

/* Walks a shard of `size` bytes: its header (into *h), each tensor's entry
 * (fn reads or skips the data), that the entries account for the size, and,
 * when r->hash, the checksum. */
static px_status walk_shard(hreader *r, uint64_t size, shard_header *h, tensor_fn fn, void *ctx, px_err *err) {
  const char *path = r->path;
  if (size < PX_CKPT_HEADER_BYTES + TRAILER_BYTES)
    return px_err_set(err, PX_ERR_INPUT, "%s: truncated or corrupt (%" PRIu64
                      " bytes, shorter than a header and checksum, %d bytes)", path, size,
                      PX_CKPT_HEADER_BYTES + TRAILER_BYTES);
  uint8_t hb[PX_CKPT_HEADER_BYTES];
  px_status st = hr_get(r, hb, sizeof hb, err);
  if (st) return st;
  if ((st = header_decode(path, hb, h, err))) return st;
  uint64_t body = size - PX_CKPT_HEADER_BYTES - TRAILER_BYTES, used = 0;
  for (uint32_t i = 0; i < h->n_tensors; i++) {
    uint8_t b[8];
    if (body - used < 4)
      return px_err_set(err, PX_ERR_INPUT, "%s: truncated or corrupt (%" PRIu64 " bytes; tensor %" PRIu32
                        " of %" PRIu32 " starts past the end of the data)", path, size, i, h->n_tensors);
    if ((st = hr_get(r, b, 4, err))) return st;
    used += 4;
    uint32_t k = rd32(b);
    if (k < 1 || k > PX_CKPT_NAME_MAX)
      return px_err_set(err, PX_ERR_INPUT, "%s: corrupt (tensor %" PRIu32 " has a name of %" PRIu32
                        " bytes; names are 1..%d bytes)", path, i, k, PX_CKPT_NAME_MAX);
    if (body - used < (uint64_t)k + 8)
      return px_err_set(err, PX_ERR_INPUT, "%s: truncated or corrupt (%" PRIu64 " bytes; tensor %" PRIu32
                        "'s header runs past the end of the data)", path, size, i);
    char name[PX_CKPT_NAME_MAX + 1];
    if ((st = hr_get(r, name, k, err)) || (st = hr_get(r, b, 8, err))) return st;
    name[k] = '\0';
    used += (uint64_t)k + 8;
    uint64_t count = rd64(b);
    if (count > (body - used) / 4)
      return px_err_set(err, PX_ERR_INPUT, "%s: truncated or corrupt (%" PRIu64 " bytes; tensor %" PRIu32
                        " claims %" PRIu64 " elements, more than the file holds)", path, size, i, count);
    if ((st = fn(ctx, r, i, name, k, count, err))) return st;
    used += count * 4;
  }
  if (used != body)
    return px_err_set(err, PX_ERR_INPUT, "%s: corrupt (%" PRIu64 " bytes, but its %" PRIu32
                      " tensors account for %" PRIu64 ")", path, size, h->n_tensors,
                      used + PX_CKPT_HEADER_BYTES + TRAILER_BYTES);
  if (!r->hash) return PX_OK;
  uint8_t tb[TRAILER_BYTES];
  if (fread(tb, 1, sizeof tb, r->fp) != sizeof tb)
    return px_err_set(err, PX_ERR_INPUT, "%s: truncated (no checksum)", path);
  uint64_t stored = rd64(tb), actual = xxh_digest(&r->h);
  if (stored != actual)
    return px_err_set(err, PX_ERR_INPUT, "%s: corrupt (stored checksum 0x%016" PRIx64
                      ", the contents hash to 0x%016" PRIx64 ")", path, stored, actual);
  return PX_OK;
}

/* px_ckpt_read_shard's walk: the caller's tensors, in order, and the first that differs. */
typedef struct {
  px_ckpt_tensor *tensors;
  int n;
  const shard_header *h;
  char mismatch[600];
} expect_walk;

static px_status read_expected(void *ctx, hreader *r, uint32_t i, const char *name, uint32_t k, uint64_t count,
                               px_err *err) {
  expect_walk *w = ctx;
  px_ckpt_tensor *t = w->tensors;
  bool match = (int64_t)i < w->n && strlen(t[i].name) == k && memcmp(t[i].name, name, k) == 0 && t[i].count == count;
  if (match) return hr_get_f32(r, t[i].data, count, err);
  if (!w->mismatch[0]) {
    char shown[PX_CKPT_NAME_MAX + 1];
    printable(name, k, shown);
    if ((int64_t)i < w->n)
      snprintf(w->mismatch, sizeof w->mismatch, "tensor %" PRIu32 " is '%s' with %" PRIu64
               " elements, this run expects '%s' with %" PRIu64 " elements", i, shown, count, t[i].name, t[i].count);
    else
      snprintf(w->mismatch, sizeof w->mismatch, "holds %" PRIu32 " tensors, this run expects %d", w->h->n_tensors,
               w->n);
  }
  return hr_skip(r, count * 4, err);
}

static px_status read_shard_body(hreader *r, uint64_t size, const px_ckpt_meta *expect, px_ckpt_tensor *tensors,
                                 int n, int64_t *step_out, px_err *err) {
  const char *path = r->path;
  shard_header h;
  expect_walk w = {tensors, n, &h, ""};
  px_status st = walk_shard(r, size, &h, read_expected, &w, err);
  if (st) return st;

  /* The file is intact: is it the one this run wants? */
  const px_ckpt_meta *m = &h.meta;
  if (m->plan_hash != expect->plan_hash)
    return px_err_set(err, PX_ERR_INPUT, "%s: written by another plan (plan hash 0x%016" PRIx64
                      ", this run 0x%016" PRIx64 ")", path, m->plan_hash, expect->plan_hash);
  if (m->model_hash != expect->model_hash)
    return px_err_set(err, PX_ERR_INPUT, "%s: written for another model (model hash 0x%016" PRIx64
                      ", this run 0x%016" PRIx64 ")", path, m->model_hash, expect->model_hash);
  if (m->world != expect->world)
    return px_err_set(err, PX_ERR_INPUT, "%s: written by a run of %" PRId32 " ranks, this run has %" PRId32, path,
                      m->world, expect->world);
  if (m->rank != expect->rank)
    return px_err_set(err, PX_ERR_INPUT, "%s: written by rank %" PRId32 ", this is rank %" PRId32, path, m->rank,
                      expect->rank);
  if (m->tp_rank != expect->tp_rank || m->pp_rank != expect->pp_rank || m->dp_rank != expect->dp_rank)
    return px_err_set(err, PX_ERR_INPUT, "%s: written at (tp, pp, dp) rank (%" PRId32 ", %" PRId32 ", %" PRId32
                      "), this rank is at (%" PRId32 ", %" PRId32 ", %" PRId32 ")", path, m->tp_rank, m->pp_rank,
                      m->dp_rank, expect->tp_rank, expect->pp_rank, expect->dp_rank);
  if (m->step < 0) return px_err_set(err, PX_ERR_INPUT, "%s: negative step %" PRId64, path, m->step);
  if (w.mismatch[0]) return px_err_set(err, PX_ERR_INPUT, "%s: %s", path, w.mismatch);
  if ((int64_t)h.n_tensors != n)
    return px_err_set(err, PX_ERR_INPUT, "%s: holds %" PRIu32 " tensors, this run expects %d", path, h.n_tensors, n);
  if (step_out) *step_out = m->step;
  return PX_OK;
}

px_status px_ckpt_read_shard(const char *dir, const px_ckpt_meta *expect, px_ckpt_tensor *tensors, int n,
                             int64_t *step_out, px_err *err) {
  char path[4096];
  px_status st = check_meta(dir ? dir : "checkpoint", expect, err);
  if (st) return st;
  if ((st = read_shard_path(dir, expect->rank, path, sizeof path, err))) return st;
  if ((st = check_tensors(path, tensors, n, err))) return st;
  uint64_t size;
  if ((st = file_size(path, " (no shard for this rank in the checkpoint)", &size, err))) return st;
  hreader r = {.fp = fopen(path, "rb"), .path = path, .hash = true};
  if (!r.fp) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
  xxh_init(&r.h, 0);
  st = read_shard_body(&r, size, expect, tensors, n, step_out, err);
  fclose(r.fp);
  return st;
}

/* ---- reading parts of a shard ---------------------------------------------- */

typedef struct {
  char name[PX_CKPT_NAME_MAX + 1];
  uint64_t count;
  uint64_t data_at; /* byte offset of its first element in the file */
} shard_entry;

struct px_ckpt_shard {
  char path[4096];
  FILE *fp; /* NULL while parked */
  px_ckpt_meta meta;
  shard_entry *t;
  uint32_t n, cap;
};

/* px_ckpt_shard_open's walk: records where each tensor's data lie. */
static px_status index_tensor(void *ctx, hreader *r, uint32_t i, const char *name, uint32_t k, uint64_t count,
                              px_err *err) {
  px_ckpt_shard *s = ctx;
  if (i >= s->cap) {
    uint32_t cap = s->cap ? 2 * s->cap : 8;
    shard_entry *nt = realloc(s->t, (size_t)cap * sizeof *nt);
    if (!nt) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    s->t = nt, s->cap = cap;
  }
  off_t at = ftello(r->fp);
  if (at < 0) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot tell the position: %s", r->path, strerror(errno));
  memcpy(s->t[i].name, name, k + 1);
  s->t[i].count = count;
  s->t[i].data_at = (uint64_t)at;
  return hr_skip(r, count * 4, err);
}

px_status px_ckpt_shard_open(const char *dir, int32_t rank, bool verify, px_ckpt_shard **out, px_err *err) {
  *out = NULL;
  px_ckpt_shard *s = px_calloc(1, sizeof *s, err);
  if (!s) return PX_ERR_RUNTIME;
  px_status st = read_shard_path(dir, rank, s->path, sizeof s->path, err);
  uint64_t size = 0;
  if (!st) st = file_size(s->path, " (listed in the manifest)", &size, err);
  if (!st && !(s->fp = fopen(s->path, "rb")))
    st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", s->path, strerror(errno));
  if (!st) {
    hreader r = {.fp = s->fp, .path = s->path, .hash = verify};
    xxh_init(&r.h, 0);
    shard_header h;
    if (!(st = walk_shard(&r, size, &h, index_tensor, s, err))) {
      s->meta = h.meta;
      s->n = h.n_tensors;
      if (h.meta.rank != rank)
        st = px_err_set(err, PX_ERR_INPUT, "%s: written by rank %" PRId32 ", expected rank %" PRId32, s->path,
                        h.meta.rank, rank);
    }
  }
  if (st) {
    px_ckpt_shard_close(s);
    return st;
  }
  *out = s;
  return PX_OK;
}

void px_ckpt_shard_close(px_ckpt_shard *s) {
  if (!s) return;
  if (s->fp) fclose(s->fp);
  free(s->t);
  free(s);
}

void px_ckpt_shard_park(px_ckpt_shard *s) {
  if (s && s->fp) {
    fclose(s->fp);
    s->fp = NULL;
  }
}

const px_ckpt_meta *px_ckpt_shard_meta(const px_ckpt_shard *s) { return &s->meta; }

int px_ckpt_shard_find(const px_ckpt_shard *s, const char *name, uint64_t *count) {
  for (uint32_t i = 0; i < s->n; i++)
    if (!strcmp(s->t[i].name, name)) {
      if (count) *count = s->t[i].count;
      return (int)i;
    }
  return -1;
}

px_status px_ckpt_shard_read(px_ckpt_shard *s, int i, uint64_t first, uint64_t n, float *out, px_err *err) {
  if (i < 0 || (uint32_t)i >= s->n || first > s->t[i].count || n > s->t[i].count - first)
    return px_err_set(err, PX_ERR_INPUT, "%s: no elements [%" PRIu64 ", %" PRIu64 ") in tensor %d", s->path, first,
                      first + n, i);
  if (!s->fp && !(s->fp = fopen(s->path, "rb")))
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", s->path, strerror(errno));
  if (fseeko(s->fp, (off_t)(s->t[i].data_at + first * 4), SEEK_SET) != 0)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot seek: %s", s->path, strerror(errno));
  hreader r = {.fp = s->fp, .path = s->path, .hash = false};
  return hr_get_f32(&r, out, n, err);
}

/* Header, size and stored checksum of a shard, without reading its data. */
static px_status peek_shard(const char *path, const char *missing_why, shard_header *h, uint64_t *size,
                            uint64_t *checksum, px_err *err) {
  px_status st = file_size(path, missing_why, size, err);
  if (st) return st;
  if (*size < PX_CKPT_HEADER_BYTES + TRAILER_BYTES)
    return px_err_set(err, PX_ERR_INPUT, "%s: truncated or corrupt (%" PRIu64 " bytes)", path, *size);
  FILE *fp = fopen(path, "rb");
  if (!fp) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
  uint8_t hb[PX_CKPT_HEADER_BYTES], tb[TRAILER_BYTES];
  bool ok = fread(hb, 1, sizeof hb, fp) == sizeof hb && fseeko(fp, -(off_t)TRAILER_BYTES, SEEK_END) == 0 &&
            fread(tb, 1, sizeof tb, fp) == sizeof tb;
  int saved = errno;
  fclose(fp);
  if (!ok) return px_err_set(err, PX_ERR_RUNTIME, "%s: read error: %s", path, strerror(saved));
  *checksum = rd64(tb);
  return header_decode(path, hb, h, err);
}

/* ---- manifest ---------------------------------------------------------- */

static void hex64(char *buf /* (19) */, uint64_t x) { snprintf(buf, 19, "0x%016" PRIx64, x); }

static bool parse_hex64(const char *s, uint64_t *out) {
  if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  uint64_t x = 0;
  int k = 0;
  for (const char *p = s + 2; *p; p++, k++) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (*p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
    else return false;
    if (k >= 16) return false;
    x = x << 4 | (uint64_t)d;
  }
  if (k == 0) return false;
  *out = x;
  return true;
}

static bool add_hex(cJSON *obj, const char *key, uint64_t x) {
  char b[19];
  hex64(b, x);
  return cJSON_AddStringToObject(obj, key, b) != NULL;
}

px_status px_ckpt_write_manifest(const char *dir, const px_ckpt_meta *meta, const cJSON *plan, px_err *err) {
  char path[4096], shard[4096];
  px_status st = check_meta(dir ? dir : "checkpoint", meta, err);
  if (st) return st;
  if (snprintf(path, sizeof path, "%s/%s", dir, PX_CKPT_MANIFEST) >= (int)sizeof path)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
  cJSON *root = cJSON_CreateObject(), *list = NULL;
  bool ok = root && cJSON_AddStringToObject(root, "format", "parallax-checkpoint") &&
            px_json_add_num(root, "version", PX_CKPT_MANIFEST_VERSION) &&
            px_json_add_num(root, "step", (double)meta->step) && px_json_add_num(root, "world", meta->world) &&
            add_hex(root, "plan_hash", meta->plan_hash) && add_hex(root, "model_hash", meta->model_hash);
  if (ok && plan) {
    cJSON *copy = cJSON_Duplicate(plan, true);
    ok = copy && cJSON_AddItemToObject(root, "plan", copy);
    if (!ok) cJSON_Delete(copy);
  }
  ok = ok && (list = cJSON_AddArrayToObject(root, "shards"));
  for (int32_t r = 0; ok && r < meta->world; r++) {
    if ((st = px_ckpt_shard_path(dir, r, shard, sizeof shard, err))) break;
    shard_header h;
    uint64_t size, sum;
    if ((st = peek_shard(shard, " (every rank must write its shard before rank 0 writes the manifest)", &h, &size,
                         &sum, err)))
      break;
    const px_ckpt_meta *m = &h.meta;
    if (m->rank != r)
      st = px_err_set(err, PX_ERR_INPUT, "%s: written by rank %" PRId32 ", expected rank %" PRId32, shard, m->rank, r);
    else if (m->step != meta->step)
      st = px_err_set(err, PX_ERR_INPUT, "%s: holds step %" PRId64 ", the manifest is for step %" PRId64
                      " (a stale shard from an earlier checkpoint?)", shard, m->step, meta->step);
    else if (m->world != meta->world)
      st = px_err_set(err, PX_ERR_INPUT, "%s: written by a run of %" PRId32 " ranks, the manifest is for %" PRId32,
                      shard, m->world, meta->world);
    else if (m->plan_hash != meta->plan_hash)
      st = px_err_set(err, PX_ERR_INPUT, "%s: written by another plan (plan hash 0x%016" PRIx64
                      ", this run 0x%016" PRIx64 ")", shard, m->plan_hash, meta->plan_hash);
    else if (m->model_hash != meta->model_hash)
      st = px_err_set(err, PX_ERR_INPUT, "%s: written for another model (model hash 0x%016" PRIx64
                      ", this run 0x%016" PRIx64 ")", shard, m->model_hash, meta->model_hash);
    if (st) break;
    char file[64];
    snprintf(file, sizeof file, "shard-%" PRId32 ".bin", r);
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddItemToArray(list, e)) {
      cJSON_Delete(e);
      ok = false;
      break;
    }
    ok = cJSON_AddStringToObject(e, "file", file) && px_json_add_num(e, "rank", r) &&
         px_json_add_num(e, "size_bytes", (double)size) && add_hex(e, "checksum", sum);
  }
  if (!st && !ok) st = px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory building the manifest", path);
  if (!st) st = px_json_write(path, root, err);
  cJSON_Delete(root);
  return st;
}

void px_ckpt_manifest_deinit(px_ckpt_manifest *m) {
  if (!m) return;
  free(m->shards);
  cJSON_Delete(m->plan);
  memset(m, 0, sizeof *m);
}

static px_status json_hex(const px_json_ctx *c, const cJSON *obj, const char *key, uint64_t *out, px_err *err) {
  char s[64];
  px_status st = px_json_str(c, obj, key, true, s, sizeof s, err);
  if (st) return st;
  if (!parse_hex64(s, out))
    return px_err_set(err, PX_ERR_INPUT, "%s: field '%s%s': '%s' is not a 64-bit hex number (0x...)", c->file,
                      c->prefix, key, s);
  return PX_OK;
}

/* Shard files (shard-N.bin) in dir; 0 when it cannot be read. */
static size_t count_shards(const char *dir) {
  DIR *d = opendir(dir);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    long long r = -1;
    int used = 0;
    n += sscanf(e->d_name, "shard-%lld.bin%n", &r, &used) == 1 && e->d_name[used] == '\0' && r >= 0;
  }
  if (d) closedir(d);
  return n;
}

/* Reads the manifest at path, sized by the world it may list: every shard it
 * names must be a file in dir (or, mid-commit, in also), so a legitimate one
 * takes at most a plan file's record, its header and 256 bytes a shard
 * file there (an entry is 130 at most). */
static px_status manifest_load(const char *path, const char *dir, const char *also, cJSON **root, px_err *err) {
  size_t shards = count_shards(dir) + (also ? count_shards(also) : 0);
  char what[96];
  snprintf(what, sizeof what, "the manifest of the %zu shard files there", shards);
  return px_json_load_max(path, PX_PLAN_FILE_MAX_BYTES + 4096 + shards * 256, what, root, err);
}

static px_status manifest_parse(const char *path, const cJSON *root, px_ckpt_manifest *out, px_err *err) {
  px_json_ctx c = {path, "", NULL};
  if (!cJSON_IsObject(root)) return px_err_set(err, PX_ERR_INPUT, "%s: expected a JSON object", path);
  char format[64];
  int64_t version = 0, step = 0, world = 0;
  px_status st;
  if ((st = px_json_str(&c, root, "format", true, format, sizeof format, err))) return st;
  if (strcmp(format, "parallax-checkpoint") != 0)
    return px_err_set(err, PX_ERR_INPUT, "%s: field 'format': '%s' is not parallax-checkpoint", path, format);
  if ((st = px_json_int(&c, root, "version", true, 1, 1000000, &version, err))) return st;
  if (version > PX_CKPT_MANIFEST_VERSION)
    return px_err_set(err, PX_ERR_INPUT, "%s: checkpoint format version %" PRId64 ", this build reads versions 1 to %u",
                      path, version, PX_CKPT_MANIFEST_VERSION);
  out->version = (int32_t)version;
  if ((st = px_json_int(&c, root, "step", true, 0, INT64_C(1) << 53, &step, err)) ||
      (st = px_json_int(&c, root, "world", true, 1, MAX_WORLD, &world, err)) ||
      (st = json_hex(&c, root, "plan_hash", &out->plan_hash, err)) ||
      (st = json_hex(&c, root, "model_hash", &out->model_hash, err)))
    return st;
  out->step = step;
  out->world = (int32_t)world;
  const cJSON *plan = NULL;
  if (version >= 2 && (st = px_json_obj(&c, root, "plan", false, &plan, err))) return st;
  if (plan && !(out->plan = cJSON_Duplicate(plan, true))) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "shards");
  if (!cJSON_IsArray(list)) return px_err_set(err, PX_ERR_INPUT, "%s: field 'shards' is missing or not an array", path);
  int n = cJSON_GetArraySize(list);
  if (n != world)
    return px_err_set(err, PX_ERR_INPUT, "%s: lists %d shards for a world of %" PRId64 " ranks", path, n, world);
  out->shards = px_calloc((size_t)world, sizeof *out->shards, err);
  if (!out->shards) return PX_ERR_RUNTIME;
  int r = 0;
  for (const cJSON *e = list->child; e; e = e->next, r++) {
    char prefix[48], file[64], want[64];
    snprintf(prefix, sizeof prefix, "shards[%d].", r);
    px_json_ctx ce = {path, prefix, NULL};
    if (!cJSON_IsObject(e)) return px_err_set(err, PX_ERR_INPUT, "%s: shards[%d]: expected an object", path, r);
    int64_t rank = -1, size = 0;
    px_ckpt_shard_info *s = &out->shards[r];
    if ((st = px_json_str(&ce, e, "file", true, file, sizeof file, err)) ||
        (st = px_json_int(&ce, e, "rank", true, 0, world - 1, &rank, err)) ||
        (st = px_json_int(&ce, e, "size_bytes", true, PX_CKPT_HEADER_BYTES + TRAILER_BYTES, INT64_C(1) << 53, &size,
                          err)) ||
        (st = json_hex(&ce, e, "checksum", &s->checksum, err)))
      return st;
    snprintf(want, sizeof want, "shard-%d.bin", r);
    if (rank != r || strcmp(file, want) != 0)
      return px_err_set(err, PX_ERR_INPUT, "%s: shards[%d] is '%s' for rank %" PRId64 ", expected '%s' for rank %d",
                        path, r, file, rank, want, r);
    s->rank = r;
    s->size_bytes = (uint64_t)size;
  }
  return PX_OK;
}

px_status px_ckpt_read_manifest(const char *dir, px_ckpt_manifest *out, px_err *err) {
  memset(out, 0, sizeof *out);
  if (!dir || !*dir) return px_err_set(err, PX_ERR_INPUT, "checkpoint: no directory given");
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return px_err_set(err, PX_ERR_INPUT, "%s: no such checkpoint directory", dir);
  char path[4200], shard[4096];
  bool staged = false;
  px_status st = committed_manifest(dir, path, sizeof path, &staged, err);
  if (st) return st;
  if (!px_file_exists(path)) {
    if ((st = px_ckpt_shard_path(dir, 0, shard, sizeof shard, err))) return st;
    if (!px_file_exists(shard))
      return px_err_set(err, PX_ERR_INPUT, "%s: holds no checkpoint (no %s)", dir, PX_CKPT_MANIFEST);
    return px_err_set(err, PX_ERR_INPUT, "%s: incomplete (no %s: the run stopped while writing)", dir,
                      PX_CKPT_MANIFEST);
  }
  cJSON *root = NULL;
  char staging[4200] = "";
  if (staged && (st = px_ckpt_staging_path(dir, staging, sizeof staging, err))) return st;
  st = manifest_load(path, dir, staged ? staging : NULL, &root, err); /* a commit caught midway: shards in both */
  if (!st) st = manifest_parse(path, root, out, err);
  cJSON_Delete(root);
  for (int32_t r = 0; !st && r < out->world; r++) {
    const px_ckpt_shard_info *s = &out->shards[r];
    shard_header h;
    uint64_t size, sum;
    if ((st = read_shard_path(dir, r, shard, sizeof shard, err))) break;
    if ((st = peek_shard(shard, " (listed in the manifest)", &h, &size, &sum, err))) break;
    if (size != s->size_bytes)
      st = px_err_set(err, PX_ERR_INPUT, "%s: %" PRIu64 " bytes, the manifest says %" PRIu64
                      " (replaced or truncated after the checkpoint was written)", shard, size, s->size_bytes);
    else if (sum != s->checksum)
      st = px_err_set(err, PX_ERR_INPUT, "%s: checksum 0x%016" PRIx64 ", the manifest says 0x%016" PRIx64
                      " (replaced after the checkpoint was written)", shard, sum, s->checksum);
    else if (h.meta.rank != r || h.meta.step != out->step || h.meta.world != out->world ||
             h.meta.plan_hash != out->plan_hash || h.meta.model_hash != out->model_hash)
      st = px_err_set(err, PX_ERR_INPUT, "%s: its header (rank %" PRId32 ", step %" PRId64 ", world %" PRId32
                      ") disagrees with the manifest (rank %" PRId32 ", step %" PRId64 ", world %" PRId32 ")",
                      shard, h.meta.rank, h.meta.step, h.meta.world, r, out->step, out->world);
  }
  if (st) px_ckpt_manifest_deinit(out);
  return st;
}

/* ---- staging and commit -------------------------------------------------- */

px_status px_ckpt_staging_path(const char *dir, char *buf, size_t cap, px_err *err) {
  if (!dir || !*dir) return px_err_set(err, PX_ERR_INPUT, "checkpoint: no directory given");
  int k = snprintf(buf, cap, "%s/%s", dir, PX_CKPT_STAGING);
  if (k < 0 || (size_t)k >= cap) return px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
  return PX_OK;
}

/* Removes a directory of files and whatever is in it (staging: shards,
 * temporary files of a writer that died; a kept checkpoint); fine when it
 * does not exist. */
static px_status remove_dir(const char *staging, px_err *err) {
  DIR *d = opendir(staging);
  if (!d) {
    if (errno == ENOENT) return PX_OK;
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", staging, strerror(errno));
  }
  px_status st = PX_OK;
  struct dirent *e;
  char path[4096 + 300];
  while (!st && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", staging, e->d_name);
    if (unlink(path) != 0 && errno != ENOENT)
      st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot remove: %s", path, strerror(errno));
  }
  closedir(d);
  if (!st && rmdir(staging) != 0 && errno != ENOENT)
    st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot remove: %s", staging, strerror(errno));
  return st;
}

static px_status move_into(const char *from, const char *to, px_err *err) {
  if (rename(from, to) != 0)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot move to %s: %s", from, to, strerror(errno));
  return PX_OK;
}

/* Removes the shards of ranks >= world from dir: a checkpoint of a larger
 * world (another plan's) that the one just moved in replaces. */
static px_status remove_stale_shards(const char *dir, int32_t world, px_err *err) {
  DIR *d = opendir(dir);
  if (!d) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", dir, strerror(errno));
  px_status st = PX_OK;
  struct dirent *e;
  char path[4096 + 300];
  while (!st && (e = readdir(d))) {
    long long r = -1;
    int used = 0;
    if (sscanf(e->d_name, "shard-%lld.bin%n", &r, &used) != 1 || e->d_name[used] != '\0' || r < world) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0 && errno != ENOENT)
      st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot remove: %s", path, strerror(errno));
  }
  closedir(d);
  return st;
}

/* The second half of a commit, also what recovery redoes: every shard still
 * in staging moves into dir, then the manifest, then staging goes, and the
 * shards of a former larger world. Each step can be repeated after a crash. */
static px_status roll_forward(const char *dir, const char *staging, int32_t world, px_err *err) {
  char from[4096], to[4096];
  px_status st = PX_OK;
  for (int32_t r = 0; !st && r < world; r++) {
    if ((st = px_ckpt_shard_path(staging, r, from, sizeof from, err)) ||
        (st = px_ckpt_shard_path(dir, r, to, sizeof to, err)))
      break;
    if (px_file_exists(from)) st = move_into(from, to, err);
  }
  if (!st) st = sync_dir(dir, err);
  snprintf(from, sizeof from, "%s/%s", staging, PX_CKPT_MANIFEST);
  snprintf(to, sizeof to, "%s/%s", dir, PX_CKPT_MANIFEST);
  if (!st) st = move_into(from, to, err);
  if (!st) st = sync_dir(dir, err);
  if (!st) st = remove_dir(staging, err);
  if (!st) st = remove_stale_shards(dir, world, err);
  if (!st) st = sync_dir(dir, err);
  return st;
}

px_status px_ckpt_commit(const char *dir, const px_ckpt_meta *meta, const cJSON *plan, px_err *err) {
  char staging[4096];
  px_status st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  if (!st) st = check_meta(dir, meta, err);
  if (!st) st = px_ckpt_write_manifest(staging, meta, plan, err);
  if (!st) st = sync_dir(staging, err);
  if (!st) st = roll_forward(dir, staging, meta->world, err);
  return st;
}

px_status px_ckpt_recover(const char *dir, px_ckpt_recovery *what, px_err *err) {
  char staging[4096], man[4096 + 32];
  *what = PX_CKPT_RECOVERY_NONE;
  px_status st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  if (st) return st;
  struct stat sb;
  if (stat(staging, &sb) != 0) return PX_OK;
  snprintf(man, sizeof man, "%s/%s", staging, PX_CKPT_MANIFEST);
  if (!px_file_exists(man)) { /* the write had not finished: the checkpoint in dir is the last one */
    *what = PX_CKPT_RECOVERY_DISCARDED;
    return remove_dir(staging, err);
  }
  /* Complete and durable when its manifest was written: finish moving it in. */
  cJSON *root = NULL;
  px_ckpt_manifest m = {0};
  st = manifest_load(man, staging, dir, &root, err);
  if (!st) st = manifest_parse(man, root, &m, err);
  cJSON_Delete(root);
  if (!st) st = roll_forward(dir, staging, m.world, err);
  px_ckpt_manifest_deinit(&m);
  if (!st) *what = PX_CKPT_RECOVERY_COMPLETED;
  return st;
}

px_status px_ckpt_abandon(const char *dir, px_err *err) {
  char staging[4096], man[4200];
  bool staged = false;
  px_status st = committed_manifest(dir, man, sizeof man, &staged, err);
  if (!st && !staged) st = px_ckpt_staging_path(dir, staging, sizeof staging, err);
  return st || staged ? st : remove_dir(staging, err);
}

/* ---- older checkpoints kept beside the latest ------------------------------ */

/* N of a directory name "step-<N>" (decimal digits), with *tmp for the
 * "step-<N>.tmp" of a keep that stopped; -1 for any other name. */
static int64_t kept_step(const char *name, bool *tmp) {
  size_t k = strlen(PX_CKPT_KEPT_PREFIX);
  if (strncmp(name, PX_CKPT_KEPT_PREFIX, k) != 0 || !name[k]) return -1;
  int64_t n = 0;
  const char *p = name + k;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (n > (INT64_MAX - 9) / 10) return -1;
    n = n * 10 + (*p - '0');
  }
  *tmp = !strcmp(p, ".tmp");
  return p > name + k && (!*p || *tmp) ? n : -1;
}

static int desc_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

/* The steps of the checkpoints kept in dir (its step-<N>/), newest first,
 * into *steps (malloc'd, the caller frees it; NULL when none); with
 * complete, only those holding a manifest. Removes the step-<N>.tmp a keep
 * that stopped left when clean is set. Returns how many, -1 out of memory. */
static int64_t kept_list(const char *dir, bool complete, bool clean, int64_t **steps) {
  *steps = NULL;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int64_t n = 0, cap = 0;
  struct dirent *e;
  char path[4096 + 300];
  while ((e = readdir(d))) {
    bool tmp = false;
    int64_t step = kept_step(e->d_name, &tmp);
    if (step < 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    px_err ignored = {0};
    if (tmp) { /* the next keep makes it again */
      if (clean) remove_dir(path, &ignored);
      continue;
    }
    snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, PX_CKPT_MANIFEST);
    if (complete && !px_file_exists(path)) continue;
    if (n == cap) {
      int64_t *more = realloc(*steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *more);
      if (!more) {
        n = -1;
        break;
      }
      *steps = more;
    }
    (*steps)[n++] = step;
  }
  closedir(d);
  if (n > 1) qsort(*steps, (size_t)n, sizeof **steps, desc_i64);
  return n;
}

/* Hard-links from to to (a file system without hard links: copies it through a temporary file). */
static px_status link_or_copy(const char *from, const char *to, px_err *err) {
  if (link(from, to) == 0) return PX_OK;
  if (errno != EPERM && errno != EXDEV && errno != EMLINK && errno != ENOTSUP && errno != EOPNOTSUPP)
    return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot link to %s: %s", from, to, strerror(errno));
  FILE *in = fopen(from, "rb");
  if (!in) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot open: %s", from, strerror(errno));
  px_afile f;
  px_status st = px_afile_open(&f, to, err);
  char buf[65536];
  size_t k;
  while (!st && (k = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, k, f.fp) != k) st = px_err_set(err, PX_ERR_RUNTIME, "%s: write failed: %s", to, strerror(errno));
  if (!st && ferror(in)) st = px_err_set(err, PX_ERR_RUNTIME, "%s: read error: %s", from, strerror(errno));
  fclose(in);
  if (st) px_afile_abort(&f);
  return st ? st : px_afile_commit(&f, err);
}

/* Keeps the checkpoint dir holds now as dir/step-<its step>/: its files,
 * the manifest last, linked into step-<N>.tmp, which is synced and renamed.
 * Nothing to keep: no manifest in dir, or one that cannot be read (then dir
 * holds no checkpoint either). */
static px_status keep_current(const char *dir, px_err *err) {
  char man[4200], to[4300], from[4096], kept[4096], tmp[4200];
  snprintf(man, sizeof man, "%s/%s", dir, PX_CKPT_MANIFEST);
  if (!px_file_exists(man)) return PX_OK;
  cJSON *root = NULL;
  px_ckpt_manifest m = {0};
  px_err ignored = {0};
  bool readable = !manifest_load(man, dir, NULL, &root, &ignored) && !manifest_parse(man, root, &m, &ignored);
  cJSON_Delete(root);
  int k = snprintf(kept, sizeof kept, "%s/%s%" PRId64, dir, PX_CKPT_KEPT_PREFIX, m.step);
  px_status st = PX_OK;
  if (!readable) goto done;
  if (k < 0 || (size_t)k >= sizeof kept) {
    st = px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
    goto done;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", kept);
  if ((st = remove_dir(tmp, err))) goto done;
  if (mkdir(tmp, 0777) != 0) {
    st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
    goto done;
  }
  for (int32_t r = 0; !st && r < m.world; r++)
    if (!(st = px_ckpt_shard_path(dir, r, from, sizeof from, err)) &&
        !(st = px_ckpt_shard_path(tmp, r, to, sizeof to, err)))
      st = link_or_copy(from, to, err);
  snprintf(to, sizeof to, "%s/%s", tmp, PX_CKPT_MANIFEST);
  if (!st) st = link_or_copy(man, to, err);
  if (!st) st = sync_dir(tmp, err);
  if (!st) st = remove_dir(kept, err); /* the same step kept before a commit that did not happen */
  if (!st && rename(tmp, kept) != 0)
    st = px_err_set(err, PX_ERR_RUNTIME, "%s: cannot move to %s: %s", tmp, kept, strerror(errno));
  if (!st) st = sync_dir(dir, err);
done:
  px_ckpt_manifest_deinit(&m);
  return st;
}

/* Removes the kept checkpoints but the `leave` newest, and what a keep that
 * stopped left. */
static px_status prune_kept(const char *dir, int64_t leave, px_err *err) {
  int64_t *steps = NULL, n = kept_list(dir, false, true, &steps);
  if (n < 0) return px_err_set(err, PX_ERR_RUNTIME, "%s: out of memory listing the kept checkpoints", dir);
  px_status st = PX_OK;
  char path[4096];
  for (int64_t i = leave; !st && i < n; i++) {
    int k = snprintf(path, sizeof path, "%s/%s%" PRId64 "/%s", dir, PX_CKPT_KEPT_PREFIX, steps[i], PX_CKPT_LOCK_FILE);
    if (k < 0 || (size_t)k >= sizeof path) {
      st = px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
      break;
    }
    if (px_file_exists(path)) continue; /* a job goes on from it there */
    path[k - strlen(PX_CKPT_LOCK_FILE) - 1] = '\0';
    st = remove_dir(path, err);
  }
  free(steps);
  if (!st && n > leave) st = sync_dir(dir, err);
  return st;
}

px_status px_ckpt_commit_keep(const char *dir, const px_ckpt_meta *meta, const cJSON *plan, int64_t keep, bool fresh,
                              px_err *err) {
  px_status st = keep > 1 && !fresh ? keep_current(dir, err) : PX_OK;
  if (!st) st = px_ckpt_commit(dir, meta, plan, err);
  if (!st && (fresh || keep > 0)) st = prune_kept(dir, fresh ? 0 : keep - 1, err);
  return st;
}

/* ---- what a directory holds ----------------------------------------------- */

void px_ckpt_probe(const char *dir, px_ckpt_probe_info *out) {
  memset(out, 0, sizeof *out);
  out->step = out->kept_newest = -1;
  char man[4200];
  px_err ignored = {0};
  if (!dir || !*dir || committed_manifest(dir, man, sizeof man, &out->staged, &ignored)) return;
  int64_t *steps = NULL;
  out->kept = kept_list(dir, true, false, &steps);
  if (out->kept > 0) out->kept_newest = steps[0];
  if (out->kept < 0) out->kept = 0;
  free(steps);
  if (!(out->found = px_file_exists(man))) return;
  /* read leniently: what it says of itself, not whether it is whole (the readers check that) */
  cJSON *root = NULL;
  char staging[4200] = "";
  if (out->staged && px_ckpt_staging_path(dir, staging, sizeof staging, &ignored)) return;
  if (manifest_load(man, dir, out->staged ? staging : NULL, &root, &ignored)) return;
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
  if (cJSON_IsNumber(step) && step->valuedouble >= 0 && step->valuedouble < 9e15)
    out->step = (int64_t)step->valuedouble;
  const cJSON *plan = cJSON_GetObjectItemCaseSensitive(root, "plan");
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(plan, "model");
  const cJSON *name = cJSON_IsObject(model) ? cJSON_GetObjectItemCaseSensitive(model, "name") : model;
  if (cJSON_IsString(name)) snprintf(out->model, sizeof out->model, "%s", name->valuestring);
  cJSON_Delete(root);
}

void px_ckpt_probe_describe(const px_ckpt_probe_info *p, char *buf, size_t cap) {
  char what[256] = "", older[160] = "";
  if (p->found && p->step >= 0)
    snprintf(what, sizeof what, "the checkpoint of step %" PRId64 "%s%s%s%s", p->step, p->model[0] ? " (model " : "",
             p->model, p->model[0] ? ")" : "", p->staged ? ", staged in " PX_CKPT_STAGING : "");
  else if (p->found)
    snprintf(what, sizeof what, "a checkpoint whose %s cannot be read", PX_CKPT_MANIFEST);
  if (p->kept)
    snprintf(older, sizeof older, "%s%" PRId64 " older checkpoint%s in %s<N>/ (the newest of step %" PRId64 ")",
             p->found ? " and " : "", p->kept, p->kept == 1 ? "" : "s", PX_CKPT_KEPT_PREFIX, p->kept_newest);
  snprintf(buf, cap, "%s%s", what, p->found || p->kept ? older : "no checkpoint");
}
