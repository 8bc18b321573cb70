/* Snapshot buffers and the (background) write of a checkpoint shard. */
#include "exec/ckpt_writer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct px_ckpt_writer {
  int n;
  px_ckpt_tensor *t;   /* (n) names owned, data: the snapshot, (count) fp32 each */
  uint64_t bytes;      /* sum of the snapshot buffers */
  bool async;
  unsigned pause_ms;
  /* the write in flight */
  char dir[4096];
  px_ckpt_meta meta;
  pthread_t thread;
  bool pending;        /* started, not waited for */
  atomic_bool done;    /* the thread has finished (status and err are set) */
  px_status status;
  px_err err;
};

px_status px_ckpt_writer_new(const px_ckpt_tensor *layout, int n, bool async, unsigned pause_ms, px_ckpt_writer **out,
                             px_err *err) {
  *out = NULL;
  px_ckpt_writer *w = px_calloc(1, sizeof *w, err);
  if (!w) return PX_ERR_RUNTIME;
  w->n = n;
  w->async = async;
  w->pause_ms = pause_ms;
  atomic_init(&w->done, true);
  w->t = px_calloc((size_t)(n > 0 ? n : 1), sizeof *w->t, err);
  px_status st = w->t ? PX_OK : PX_ERR_RUNTIME;
  for (int i = 0; !st && i < n; i++) {
    w->t[i].count = layout[i].count;
    w->t[i].name = strdup(layout[i].name ? layout[i].name : "");
    w->t[i].data = malloc(layout[i].count * sizeof(float) + 1);
    w->bytes += layout[i].count * sizeof(float);
    if (!w->t[i].name || !w->t[i].data)
      st = px_err_set(err, PX_ERR_RUNTIME, "checkpoint: out of memory for the %llu-byte host snapshot",
                      (unsigned long long)(layout[i].count * sizeof(float)));
  }
  if (st) {
    px_ckpt_writer_free(w);
    return st;
  }
  *out = w;
  return PX_OK;
}

void px_ckpt_writer_free(px_ckpt_writer *w) {
  if (!w) return;
  px_err ignored = {0};
  px_ckpt_writer_wait(w, &ignored);
  for (int i = 0; w->t && i < w->n; i++) {
    free((char *)w->t[i].name);
    free(w->t[i].data);
  }
  free(w->t);
  free(w);
}

float *px_ckpt_writer_buffer(px_ckpt_writer *w, int i) { return i >= 0 && i < w->n ? w->t[i].data : NULL; }
uint64_t px_ckpt_writer_bytes(const px_ckpt_writer *w) { return w->bytes; }
bool px_ckpt_writer_async(const px_ckpt_writer *w) { return w->async; }

static void *write_thread(void *arg) {
  px_ckpt_writer *w = arg;
  w->status = px_ckpt_write_shard_paced(w->dir, &w->meta, w->t, w->n, w->pause_ms, &w->err);
  atomic_store(&w->done, true);
  return NULL;
}

px_status px_ckpt_writer_start(px_ckpt_writer *w, const char *dir, const px_ckpt_meta *meta, px_err *err) {
  if (w->pending) return px_err_set(err, PX_ERR_RUNTIME, "checkpoint: a write is already in flight");
  if (!w->async) return px_ckpt_write_shard_paced(dir, meta, w->t, w->n, w->pause_ms, err);
  if (snprintf(w->dir, sizeof w->dir, "%s", dir) >= (int)sizeof w->dir)
    return px_err_set(err, PX_ERR_INPUT, "%.64s...: checkpoint path too long", dir);
  w->meta = *meta;
  w->status = PX_OK;
  memset(&w->err, 0, sizeof w->err);
  atomic_store(&w->done, false);
  int rc = pthread_create(&w->thread, NULL, write_thread, w);
  if (rc != 0) {
    atomic_store(&w->done, true);
    return px_err_set(err, PX_ERR_RUNTIME, "checkpoint: cannot start the writer thread: %s", strerror(rc));
  }
  w->pending = true;
  return PX_OK;
}

bool px_ckpt_writer_busy(px_ckpt_writer *w) { return w->pending && !atomic_load(&w->done); }
bool px_ckpt_writer_pending(const px_ckpt_writer *w) { return w->pending; }

px_status px_ckpt_writer_wait(px_ckpt_writer *w, px_err *err) {
  if (!w->pending) return PX_OK;
  pthread_join(w->thread, NULL);
  w->pending = false;
  if (w->status && err) *err = w->err;
  return w->status;
}
