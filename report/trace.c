/* Trace and timeline writers of a simulated step. */
#include "report/trace.h"

#include <stdio.h>

#include "core/fileio.h"

px_status px_report_trace(const px_sim_result *r, const char *path, px_err *err) {
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) return st;
  FILE *fp = f.fp;
  fprintf(fp, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  for (int64_t s = 0; s < r->nstages; s++) {
    fprintf(fp, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %lld, \"args\": {\"name\": \"stage %lld\"}},\n",
            (long long)s, (long long)s);
    for (int k = 0; k < PX_STREAM_COUNT; k++)
      fprintf(fp, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %lld, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
              (long long)s, k, px_stream_names[k]);
  }
  for (int64_t i = 0; i < r->nspans; i++) {
    const px_sim_span *e = &r->spans[i];
    fprintf(fp, "{\"name\": \"%s", e->block >= 0 ? px_block_names[e->block] : "tp collective");
    if (e->mb >= 0) fprintf(fp, " mb %d", e->mb);
    if (e->layer >= 0) fprintf(fp, " layer %d", e->layer);
    fprintf(fp, "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f}%s\n",
            px_stream_names[e->stream], e->stage, e->stream, (double)e->ts_ns / 1e3, (double)e->dur_ns / 1e3,
            i + 1 < r->nspans ? "," : "");
  }
  fprintf(fp, "]}\n");
  return px_afile_commit(&f, err);
}

static const char *timeline_kind(int32_t block) {
  if (px_block_is_layer_fwd((px_block_kind)block)) return "fwd";
  if (px_block_is_layer_bwd((px_block_kind)block)) return "bwd";
  if (px_block_is_layer_w((px_block_kind)block)) return "wgrad";
  switch (block) {
    case PX_BLOCK_EMBED_FWD:
    case PX_BLOCK_HEAD_FWD:
    case PX_BLOCK_MTP_FWD: return "fwd";
    case PX_BLOCK_EMBED_BWD:
    case PX_BLOCK_HEAD_BWD:
    case PX_BLOCK_MTP_BWD: return "bwd";
    case PX_BLOCK_OPTIMIZER: return "opt";
    default: return "comm";
  }
}

px_status px_report_timeline(const px_plan *plan, const px_sim_result *r, const char *path, px_err *err) {
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) return st;
  fprintf(f.fp, "# one simulated step of %s: stream 0 compute, 1 tp, 2 dp, 3 pp-send, 4 pp-recv, 5 host\n",
          plan->model.name);
  fprintf(f.fp, "# stage stream start_ms end_ms kind mb\n");
  for (int64_t i = 0; i < r->nspans; i++) {
    const px_sim_span *e = &r->spans[i];
    fprintf(f.fp, "%d %d %.6f %.6f %s %d\n", e->stage, e->stream, (double)e->ts_ns * 1e-6,
            (double)(e->ts_ns + e->dur_ns) * 1e-6, timeline_kind(e->block), e->mb);
  }
  return px_afile_commit(&f, err);
}
