/* A rank's checkpoint writer: the host snapshot of its shard (one fp32
 * buffer per state) and the write of that snapshot, either at once or on a
 * background thread while training goes on, one write at a time. Knows
 * nothing of MPI: the training loop decides when every rank is done. */
#ifndef PX_EXEC_CKPT_WRITER_H
#define PX_EXEC_CKPT_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "exec/ckpt.h"

typedef struct px_ckpt_writer px_ckpt_writer; /* opaque */

/* A writer for n tensors with these names and element counts (the data
 * pointers of layout are not used): allocates the snapshot buffers, whose
 * size px_ckpt_writer_bytes gives. pause_ms: see px_ckpt_write_shard_paced. */
px_status px_ckpt_writer_new(const px_ckpt_tensor *layout, int n, bool async, unsigned pause_ms, px_ckpt_writer **out,
                             px_err *err);
/* Joins a write still in flight (its result is dropped), then frees. */
void px_ckpt_writer_free(px_ckpt_writer *w);

/* The snapshot buffer of tensor i, (count) fp32; the caller fills it, and
 * must not while a write is in flight (px_ckpt_writer_busy). */
float *px_ckpt_writer_buffer(px_ckpt_writer *w, int i);
uint64_t px_ckpt_writer_bytes(const px_ckpt_writer *w);
bool px_ckpt_writer_async(const px_ckpt_writer *w);

/* Writes the snapshot as the shard meta->rank of dir (px_ckpt_write_shard):
 * synchronous writers return its status; asynchronous ones start a thread
 * and return PX_OK, the write's status coming from px_ckpt_writer_wait.
 * Refused while a write is in flight. */
px_status px_ckpt_writer_start(px_ckpt_writer *w, const char *dir, const px_ckpt_meta *meta, px_err *err);
/* Whether a started write has not finished yet (never blocks). */
bool px_ckpt_writer_busy(px_ckpt_writer *w);
/* Whether a write was started and not yet waited for. */
bool px_ckpt_writer_pending(const px_ckpt_writer *w);
/* Waits for the write in flight, if any, and returns its status (its
 * message in err); PX_OK when nothing was pending. */
px_status px_ckpt_writer_wait(px_ckpt_writer *w, px_err *err);

#endif
