/* Offload's host arena (memory or mapped NVMe files) and the AdamW step
 * run by a helper thread, range by range. */
#define _GNU_SOURCE
#include "exec/offload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/reduce.h"

static const char *nvme_dir(void) {
  const char *d = getenv("PARALLAX_NVME_DIR");
  if (!d || !*d) d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

px_status px_host_alloc(px_host_arena *a, uint64_t bytes, bool nvme, void **out, px_err *err) {
  *out = NULL;
  if (a->n == PX_HOST_ARENA_MAX) return px_err_set(err, PX_ERR_RUNTIME, "internal: host arena full");
  void *p = NULL;
  if (nvme) {
    char path[4096];
    snprintf(path, sizeof path, "%s/parallax-nvme-XXXXXX", nvme_dir());
    int fd = mkstemp(path);
    if (fd < 0) return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot create the NVMe offload file (set PARALLAX_NVME_DIR)", path);
    unlink(path); /* gone with the mapping */
    if (ftruncate(fd, (off_t)bytes) == 0) p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (!p || p == MAP_FAILED)
      return px_err_set(err, PX_ERR_RUNTIME, "%s: cannot map %llu bytes for NVMe offload", nvme_dir(), (unsigned long long)bytes);
  } else {
    p = calloc(1, bytes ? bytes : 1);
    if (!p) return px_err_set(err, PX_ERR_RUNTIME, "out of host memory (%llu bytes offloaded)", (unsigned long long)bytes);
  }
  a->v[a->n].p = p;
  a->v[a->n].bytes = bytes;
  a->v[a->n++].mapped = nvme;
  if (nvme)
    a->nvme_bytes += bytes;
  else
    a->bytes += bytes;
  *out = p;
  return PX_OK;
}

void px_host_arena_free(px_host_arena *a) {
  for (int i = 0; i < a->n; i++) {
    if (a->v[i].mapped)
      munmap(a->v[i].p, a->v[i].bytes ? a->v[i].bytes : 1);
    else
      free(a->v[i].p);
  }
  memset(a, 0, sizeof *a);
}

/* The helper thread's view: the job, and how many ranges are done. */
typedef struct {
  const px_host_adamw_job *job;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t done;
} stepper;

static void *step_ranges(void *arg) {
  stepper *s = arg;
  const px_host_adamw_job *j = s->job;
  for (int32_t i = 0; i < j->nranges; i++) {
    const px_host_range *r = &j->ranges[i];
    float *g = j->g + r->at;
    if (j->grad_scale != 1.0f) px_k_scale(g, (int64_t)r->n, j->grad_scale);
    px_k_adamw(j->w + r->at, j->m + r->at, j->v + r->at, g, (int64_t)r->n, j->lr, j->beta1, j->beta2, j->eps, r->wd, j->t);
    pthread_mutex_lock(&s->mu);
    s->done = i + 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

px_status px_host_adamw(const px_host_adamw_job *job, px_host_range_done done, void *ctx, px_err *err) {
  stepper s = {.job = job, .done = 0};
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  pthread_t th;
  bool threaded = pthread_create(&th, NULL, step_ranges, &s) == 0;
  if (!threaded) step_ranges(&s); /* no thread to be had: the same work, in line */
  px_status st = PX_OK;
  for (int32_t i = 0; i < job->nranges; i++) {
    pthread_mutex_lock(&s.mu);
    while (s.done <= i) pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    if (!st && done) st = done(ctx, i, err); /* on failure the thread still finishes: it owns no resources */
  }
  if (threaded) pthread_join(th, NULL);
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
  return st;
}
