/* The result of `parallax run`: text and JSON. */
#include "report/run.h"

#include <math.h>

#include "core/fmt.h"
#include "core/json.h"
#include "plan/lora.h"
#include "report/flags.h"
#include "report/plan.h"
#include "report/sim.h"
#include "sim/sim.h"

void px_report_run_step_text(const px_plan *plan, const px_train_step *s, FILE *out) {
  char a[64], b[64];
  px_sim_mfu m;
  px_sim_mfu_of(plan, s->step_time_s, &m);
  int w = snprintf(NULL, 0, "%lld", (long long)s->last);
  fprintf(out, "step %*lld/%lld | loss %.6f | ", w, (long long)s->step, (long long)s->last, s->loss);
  if (plan->par.mtp_layers > 0) fprintf(out, "mtp loss %.6f | ", s->mtp_loss);
  if (isfinite(s->grad_norm))
    fprintf(out, "grad norm %.4g | ", s->grad_norm);
  else
    fputs("skipped (gradients overflowed) | ", out);
  fprintf(out, "%s | %.0f tokens/s | %.3g TFLOP/s/GPU | peak %s", px_fmt_time(s->step_time_s, a, sizeof a),
          s->step_time_s > 0 ? px_sim_tokens_per_s(plan, s->step_time_s) : 0.0, m.model_tflops_per_gpu,
          px_fmt_bytes((double)s->peak_bytes, b, sizeof b));
  if (plan->par.precision == PX_PREC_FP16) fprintf(out, " | loss scale %g", s->loss_scale);
  fputc('\n', out);
}

cJSON *px_report_run_step_json(const px_plan *plan, const px_train_step *s) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_sim_mfu m;
  px_sim_mfu_of(plan, s->step_time_s, &m);
  px_json_add_num(o, "step", (double)s->step);
  px_json_add_num(o, "steps", (double)s->last);
  px_json_add_num(o, "loss", s->loss);
  if (plan->par.mtp_layers > 0) px_json_add_num(o, "mtp_loss", s->mtp_loss);
  if (isfinite(s->grad_norm)) px_json_add_num(o, "grad_norm", s->grad_norm);
  else cJSON_AddNullToObject(o, "grad_norm"); /* skipped for overflow */
  px_json_add_num(o, "step_time_s", s->step_time_s);
  px_json_add_num(o, "tokens_per_s", s->step_time_s > 0 ? px_sim_tokens_per_s(plan, s->step_time_s) : 0.0);
  px_json_add_num(o, "model_tflops_per_gpu", m.model_tflops_per_gpu);
  px_json_add_num(o, "mfu", m.mfu);
  px_json_add_num(o, "peak_bytes", (double)s->peak_bytes);
  if (plan->par.precision == PX_PREC_FP16) px_json_add_num(o, "loss_scale", s->loss_scale);
  return o;
}

void px_report_run_text(const px_plan *plan, const px_train_result *r, FILE *out) {
  char a[64], b[64], c[64], d[64], mfu[96];
  px_sim_mfu m;
  px_sim_mfu_of(plan, r->step_time_s, &m);
  fprintf(out, "backend %s, %lld rank%s (tp %lld pp %lld dp %lld): %s per step, %.0f tokens/s, %.3g model TFLOP/s per "
          "GPU, %s of %s\n", r->backend, (long long)plan->grid.world, plan->grid.world == 1 ? "" : "s", (long long)plan->par.tp, (long long)plan->par.pp,
          (long long)plan->par.dp, px_fmt_time(r->step_time_s, a, sizeof a), r->tokens_per_s, m.model_tflops_per_gpu,
          px_report_mfu_text(m.mfu, m.peak_dtype, m.mfu_precision, m.precision_dtype, mfu, sizeof mfu),
          plan->cluster.name);
  if (r->threads > 0) {
    char t[64];
    fprintf(out, "threads: %d BLAS thread%s per rank (%s N to choose)\n", r->threads, r->threads == 1 ? "" : "s",
            px_report_flag("threads", t));
  }
  fprintf(out, "memory: %s allocated at peak (largest rank), %s predicted by the plan\n",
          px_fmt_bytes((double)r->peak_bytes, a, sizeof a), px_fmt_bytes((double)r->predicted_peak_bytes, b, sizeof b));
  if (plan->par.offload_opt && r->stage_host_bytes && r->stage_nvme_bytes)
    fprintf(out, "offloaded (stage 0): %s host memory and %s NVMe, as the plan predicts %s and %s\n",
            px_fmt_bytes((double)r->stage_host_bytes[0], a, sizeof a), px_fmt_bytes((double)r->stage_nvme_bytes[0], b, sizeof b),
            px_fmt_bytes((double)plan->mem[0].host_bytes, c, sizeof c), px_fmt_bytes((double)plan->mem[0].nvme_bytes, d, sizeof d));
  if (r->backend_bytes)
    fprintf(out, "memory: %s more held by the %s backend itself (scratch for fp32 copies, library workspaces)\n",
            px_fmt_bytes((double)r->backend_bytes, a, sizeof a), r->backend);
  if (plan->par.precision == PX_PREC_FP16)
    fprintf(out, "fp16: loss scale %g, %lld step%s skipped for overflow\n", r->loss_scale, (long long)r->skipped_steps,
            r->skipped_steps == 1 ? "" : "s");
  if (px_parallel_lora(&plan->par))
    fprintf(out, "fine-tuning: the frozen base (%s a rank of stage 0) unchanged by training (hash 0x%016llx summed "
            "over the ranks); the adapters trained\n", px_fmt_bytes((double)plan->programs[0].frozen_bytes, a, sizeof a),
            (unsigned long long)r->frozen_hash);
  if (px_parallel_lora(&plan->par) && plan->par.base_precision != PX_BASE_BF16)
    fprintf(out, "fine-tuning: the %s base's linear weights hold their values within a relative RMS error of %.3g "
            "(dequantised as each GEMM reads them)\n", px_lora_base_name(&plan->par), r->base_quant_error);
  if (r->ckpt_snapshot_bytes)
    fprintf(out, "checkpoints: %lld written (%s), host snapshot buffer %s a rank (largest; not in the plan's memory), "
            "training held up %s in all, %lld wait%s for a previous write\n", (long long)r->ckpt_count,
            r->ckpt_async ? "async" : "sync", px_fmt_bytes((double)r->ckpt_snapshot_bytes, a, sizeof a),
            px_fmt_time(r->ckpt_blocked_s, b, sizeof b), (long long)r->ckpt_waits, r->ckpt_waits == 1 ? "" : "s");
}

cJSON *px_report_run_json(const px_plan *plan, const px_train_result *r) {
  cJSON *o = px_report_plan_head(plan);
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "backend", r->backend);
  if (r->threads > 0) px_json_add_num(o, "threads", r->threads);
  px_json_add_num(o, "first_step", (double)r->first_step);
  cJSON *l = cJSON_AddArrayToObject(o, "losses");
  for (int64_t k = 0; l && k < r->steps; k++) cJSON_AddItemToArray(l, cJSON_CreateNumber(r->losses[k]));
  px_json_add_num(o, "step_time_s", r->step_time_s);
  px_json_add_num(o, "tokens_per_s", r->tokens_per_s);
  px_sim_mfu m;
  px_sim_mfu_of(plan, r->step_time_s, &m);
  px_json_add_num(o, "model_tflops_per_gpu", m.model_tflops_per_gpu);
  px_json_add_num(o, "mfu", m.mfu);
  px_json_add_num(o, "mfu_precision", m.mfu_precision);
  px_report_mfu_peaks_json(o, m.peak_dtype, m.precision_dtype);
  px_json_add_num(o, "peak_bytes", (double)r->peak_bytes);
  px_json_add_num(o, "predicted_peak_bytes", (double)r->predicted_peak_bytes);
  px_json_add_num(o, "backend_bytes", (double)r->backend_bytes);
  if (plan->par.precision == PX_PREC_FP16) {
    px_json_add_num(o, "loss_scale", r->loss_scale);
    px_json_add_num(o, "skipped_steps", (double)r->skipped_steps);
  }
  if (px_parallel_lora(&plan->par)) {
    char h[24];
    snprintf(h, sizeof h, "0x%016llx", (unsigned long long)r->frozen_hash);
    cJSON_AddStringToObject(o, "frozen_base_hash", h);
    if (plan->par.base_precision != PX_BASE_BF16) px_json_add_num(o, "base_quant_error", r->base_quant_error);
  }
  if (r->ckpt_snapshot_bytes) {
    cJSON *ck = cJSON_AddObjectToObject(o, "checkpoints");
    if (ck) {
      px_json_add_num(ck, "count", (double)r->ckpt_count);
      cJSON_AddBoolToObject(ck, "async", r->ckpt_async);
      px_json_add_num(ck, "snapshot_bytes", (double)r->ckpt_snapshot_bytes);
      px_json_add_num(ck, "blocked_s", r->ckpt_blocked_s);
      px_json_add_num(ck, "waits", (double)r->ckpt_waits);
    }
  }
  cJSON *st = cJSON_AddArrayToObject(o, "stages");
  for (int64_t s = 0; st && s < plan->par.pp; s++) {
    cJSON *so = cJSON_CreateObject();
    if (!so) break;
    px_json_add_num(so, "peak_bytes", (double)(r->stage_peak_bytes ? r->stage_peak_bytes[s] : 0));
    px_json_add_num(so, "predicted_peak_bytes", (double)plan->mem[s].peak_bytes);
    if (plan->par.offload_opt) {
      px_json_add_num(so, "host_bytes", (double)(r->stage_host_bytes ? r->stage_host_bytes[s] : 0));
      px_json_add_num(so, "predicted_host_bytes", (double)plan->mem[s].host_bytes);
      px_json_add_num(so, "nvme_bytes", (double)(r->stage_nvme_bytes ? r->stage_nvme_bytes[s] : 0));
      px_json_add_num(so, "predicted_nvme_bytes", (double)plan->mem[s].nvme_bytes);
    }
    cJSON_AddItemToArray(st, so);
  }
  return o;
}
