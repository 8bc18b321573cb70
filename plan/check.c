/* Deadlock check of the pipeline's sends and receives: every stage runs its
 * program in order; a p2p batch posts all its sends and receives at once
 * and blocks until each is matched (rendezvous, as batch_isend_irecv
 * followed by a wait). Matching is first-in first-out per (source,
 * destination, direction), and matched pairs must agree on micro-batch and
 * chunk. */
#include "plan/check.h"

#include <stdlib.h>

typedef struct {
  int32_t *v;
  int32_t head, n, cap;
} fifo;

static bool fifo_push(fifo *f, int32_t x) {
  if (f->n == f->cap) {
    int32_t cap = f->cap ? 2 * f->cap : 64;
    int32_t *nv = realloc(f->v, (size_t)cap * sizeof *nv);
    if (!nv) return false;
    f->v = nv;
    f->cap = cap;
  }
  f->v[f->n++] = x;
  return true;
}

static bool is_p2p(const px_inst *in) {
  return in->block == PX_BLOCK_SEND_FWD || in->block == PX_BLOCK_SEND_BWD || in->block == PX_BLOCK_RECV_FWD ||
         in->block == PX_BLOCK_RECV_BWD;
}

px_status px_plan_check_p2p(const px_plan *plan, px_err *err) {
  int64_t pp = plan->par.pp;
  /* Channels: (stage, direction) for sends out of a stage; recvs into the peer. */
  fifo *sends = calloc((size_t)(2 * pp), sizeof *sends), *recvs = calloc((size_t)(2 * pp), sizeof *recvs);
  int32_t *pos = calloc((size_t)pp, sizeof *pos);     /* next instance to run */
  int32_t *pending = calloc((size_t)pp, sizeof *pending); /* unmatched parts of the posted batch */
  bool *posted = calloc((size_t)pp, sizeof *posted);
  char *done = NULL;
  px_status st = PX_OK;
  int64_t total = 0;
  for (int64_t s = 0; s < pp; s++) total += plan->programs[s].ninsts;
  done = calloc((size_t)total + 1, 1);
  int64_t *base = calloc((size_t)pp + 1, sizeof *base);
  if (!sends || !recvs || !pos || !pending || !posted || !done || !base) {
    st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
    goto out;
  }
  for (int64_t s = 0; s < pp; s++) base[s + 1] = base[s] + plan->programs[s].ninsts;
  bool progress = true;
  int64_t finished = 0;
  while (progress && finished < pp) {
    progress = false;
    finished = 0;
    for (int64_t s = 0; s < pp; s++) {
      const px_program *prog = &plan->programs[s];
      for (;;) {
        if (pos[s] >= prog->ninsts) {
          finished++;
          break;
        }
        const px_inst *in = &prog->insts[pos[s]];
        if (!is_p2p(in) || in->batch < 0) {
          pos[s]++;
          progress = true;
          continue;
        }
        if (!posted[s]) { /* post the whole batch */
          pending[s] = 0;
          for (int32_t j = pos[s]; j < prog->ninsts && prog->insts[j].batch == in->batch; j++) {
            const px_inst *b = &prog->insts[j];
            bool fwd = b->block == PX_BLOCK_SEND_FWD || b->block == PX_BLOCK_RECV_FWD;
            bool send = b->block == PX_BLOCK_SEND_FWD || b->block == PX_BLOCK_SEND_BWD;
            /* channel of a send: its own stage; of a receive: the sending stage */
            int64_t src = send ? s : (fwd ? (s - 1 + pp) % pp : (s + 1) % pp);
            fifo *f = send ? &sends[2 * src + !fwd] : &recvs[2 * src + !fwd];
            if (!fifo_push(f, (int32_t)(base[s] + j))) {
              st = px_err_set(err, PX_ERR_RUNTIME, "out of memory");
              goto out;
            }
            pending[s]++;
          }
          posted[s] = true;
          progress = true;
        }
        /* Match everything matchable on all channels. */
        for (int64_t c = 0; c < 2 * pp; c++) {
          fifo *fs = &sends[c], *fr = &recvs[c];
          while (fs->head < fs->n && fr->head < fr->n) {
            int32_t a = fs->v[fs->head++], b = fr->v[fr->head++];
            int64_t sa = 0, sb = 0;
            while (base[sa + 1] <= a) sa++;
            while (base[sb + 1] <= b) sb++;
            const px_inst *ia = &plan->programs[sa].insts[a - base[sa]];
            const px_inst *ib = &plan->programs[sb].insts[b - base[sb]];
            if (ia->mb != ib->mb || ia->layer != ib->layer) {
              st = px_err_set(err, PX_ERR_RUNTIME,
                              "p2p mismatch: stage %lld sends micro-batch %d (layer %d), stage %lld expects %d (layer %d)",
                              (long long)sa, ia->mb, ia->layer, (long long)sb, ib->mb, ib->layer);
              goto out;
            }
            done[a] = done[b] = 1;
            pending[sa]--;
            pending[sb]--;
            progress = true;
          }
        }
        if (pending[s] > 0) break; /* blocked in this batch */
        /* batch complete: skip its instances */
        int32_t bid = in->batch;
        while (pos[s] < prog->ninsts && prog->insts[pos[s]].batch == bid) pos[s]++;
        posted[s] = false;
        progress = true;
      }
    }
  }
  if (finished < pp) {
    for (int64_t s = 0; s < pp; s++) {
      if (pos[s] < plan->programs[s].ninsts) {
        const px_inst *in = &plan->programs[s].insts[pos[s]];
        st = px_err_set(err, PX_ERR_RUNTIME, "p2p deadlock: stage %lld blocked at %s of micro-batch %d (chunk %d)",
                        (long long)s, px_block_names[in->block], in->mb, in->chunk);
        break;
      }
    }
  }
out:
  for (int64_t c = 0; sends && recvs && c < 2 * pp; c++) free(sends[c].v), free(recvs[c].v);
  free(sends);
  free(recvs);
  free(pos);
  free(pending);
  free(posted);
  free(done);
  free(base);
  return st;
}
