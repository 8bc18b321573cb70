/* A plan as flags: the swept dimensions, then what differs from the defaults. */
#include "report/flags.h"

#include "plan/lora.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *buf;
  size_t cap, len;
} out_buf;

static void add(out_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(out_buf *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool room = o->len + 1 < o->cap;
  int n = vsnprintf(room ? o->buf + o->len : NULL, room ? o->cap - o->len : 0, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n;
}

/* The fields of the library's settings that a flag of another name sets. */
static const struct {
  const char *field, *flag;
} renamed_fields[] = {{"ckpt_dir", "ckpt"}, {"profile_path", "profile"}, {"grads_path", "dump-grads"}};

void px_report_field_flag(const char *f, size_t n, char *out, size_t cap) {
  if (!cap) return;
  for (size_t i = 0; i < sizeof renamed_fields / sizeof renamed_fields[0]; i++)
    if (strlen(renamed_fields[i].field) == n && !strncmp(renamed_fields[i].field, f, n)) {
      snprintf(out, cap, "%s", renamed_fields[i].flag);
      return;
    }
  size_t k = 0;
  for (; k < n && k + 1 < cap; k++) out[k] = f[k] == '_' ? '-' : f[k];
  out[k] = '\0';
}

const char *px_report_flag(const char *f, char out[64]) {
  out[0] = out[1] = '-';
  px_report_field_flag(f, strlen(f), out + 2, 62);
  return out;
}

/* " --FLAG VALUE" for plan field `name` (its flag by px_report_field_flag; no space before the first), or with a
 * NULL fmt the switch alone. */
static void field(out_buf *o, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void field(out_buf *o, const char *name, const char *fmt, ...) {
  char flag[64], value[PX_REPORT_FLAGS_MAX / 4] = "";
  px_report_field_flag(name, strlen(name), flag, sizeof flag);
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
  }
  add(o, "%s--%s%s%s", o->len ? " " : "", flag, fmt ? " " : "", value);
}

static void names(out_buf *o, const char *name, const char *const *table, int value) { field(o, name, "%s", table[value]); }

size_t px_report_plan_flags(const px_parallel *p, const px_model *m, const px_cluster *c, char *buf, size_t cap) {
  out_buf o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  /* what px_parallel_resolve makes of the swept dimensions alone */
  px_parallel d;
  px_parallel_unset(&d);
  d.tp = p->tp, d.pp = p->pp, d.cp = p->cp, d.dp = p->dp, d.zero = p->zero, d.sp = p->sp, d.mbs = p->mbs;
  d.gbs = p->gbs, d.schedule = p->schedule, d.vpp = p->vpp, d.recompute = p->recompute, d.precision = p->precision;
  d.mtp_layers = p->mtp_layers;
  px_parallel_resolve(&d, m, c);
  field(&o, "tp", "%lld", (long long)p->tp);
  field(&o, "pp", "%lld", (long long)p->pp);
  if (p->cp > 1) field(&o, "cp", "%lld", (long long)p->cp);
  if (p->cp_algo != d.cp_algo) names(&o, "cp_algo", px_cp_algo_names, p->cp_algo);
  if (p->ep != d.ep) field(&o, "ep", "%lld", (long long)p->ep);
  if (p->etp != d.etp) field(&o, "etp", "%lld", (long long)p->etp);
  if (p->moe_dispatch != d.moe_dispatch) names(&o, "moe_dispatch", px_moe_dispatch_names, p->moe_dispatch);
  if (p->moe_router_padding > 0) field(&o, "moe_router_padding", NULL);
  if (p->mtp_layers > 0) field(&o, "mtp_layers", "%lld", (long long)p->mtp_layers);
  if (p->mtp_loss_scale != d.mtp_loss_scale) field(&o, "mtp_loss_scale", "%.9g", p->mtp_loss_scale);
  if (p->moe_buffers != d.moe_buffers) names(&o, "moe_buffers", px_moe_buffers_names, p->moe_buffers);
  if (p->moe_imbalance != d.moe_imbalance) field(&o, "moe_imbalance", "%.9g", p->moe_imbalance);
  if (p->cuda_graph != d.cuda_graph) names(&o, "cuda_graph", px_cuda_graph_names, p->cuda_graph);
  field(&o, "zero", "%d", p->zero);
  if (p->sp) field(&o, "sp", NULL);
  field(&o, "mbs", "%lld", (long long)p->mbs);
  field(&o, "gbs", "%lld", (long long)p->gbs);
  if (p->seq != d.seq) field(&o, "seq", "%lld", (long long)p->seq);
  if (p->pp > 1) names(&o, "schedule", px_schedule_names, p->schedule);
  if (p->vpp > 1) field(&o, "vpp", "%lld", (long long)p->vpp);
  if (p->first_stage_layers > 0) field(&o, "first_stage_layers", "%lld", (long long)p->first_stage_layers);
  if (p->last_stage_layers > 0) field(&o, "last_stage_layers", "%lld", (long long)p->last_stage_layers);
  if (p->nchunk_layers > 0) {
    char t[PX_REPORT_FLAGS_MAX / 4];
    size_t n = 0;
    for (int32_t i = 0; i < p->nchunk_layers && n < sizeof t; i++)
      n += (size_t)snprintf(t + n, sizeof t - n, "%s%u", i ? "," : "", (unsigned)p->chunk_layers[i]);
    field(&o, "layers_per_chunk", "%s", t);
  }
  if (p->mb_group > 0) field(&o, "microbatch_group", "%lld", (long long)p->mb_group);
  names(&o, "recompute", px_recompute_names, p->recompute);
  if (px_parallel_recompute_partial(p)) {
    names(&o, "recompute_method", px_recompute_method_names, p->recompute_method);
    field(&o, "recompute_layers", "%lld", (long long)p->recompute_layers);
  }
  if (p->recompute_modules) {
    char t[96];
    field(&o, "recompute_modules", "%s", px_recompute_modules_str(p->recompute_modules, t, sizeof t));
  }
  names(&o, "precision", px_precision_names, p->precision);
  if (p->fp8_recipe != d.fp8_recipe) names(&o, "fp8_recipe", px_fp8_recipe_names, p->fp8_recipe);
  if (p->fp8_base != d.fp8_base) names(&o, "fp8_base", px_fp8_base_names, p->fp8_base);
  if (px_precision_quantized(p->precision) && p->fp8_library != d.fp8_library)
    names(&o, "fp8_library", px_fp8_library_names, p->fp8_library);
  if (p->fp8_params > 0) field(&o, "fp8_params", NULL);
  if (p->fp8_attention > 0) field(&o, "fp8_attention", NULL);
  if (p->bf16_layers_start > 0) field(&o, "bf16_layers_start", "%lld", (long long)p->bf16_layers_start);
  if (p->bf16_layers_end > 0) field(&o, "bf16_layers_end", "%lld", (long long)p->bf16_layers_end);
  if (p->offload_act_layers > 0) field(&o, "offload_activations", "%lld", (long long)p->offload_act_layers);
  if (p->finetune > 0) names(&o, "finetune", px_finetune_names, p->finetune);
  if (px_parallel_lora(p)) {
    char t[96];
    field(&o, "lora_rank", "%lld", (long long)p->lora_rank);
    field(&o, "lora_alpha", "%.9g", p->lora_alpha);
    field(&o, "lora_targets", "%s", px_lora_targets_str(p->lora_targets, t, sizeof t));
    names(&o, "base_precision", px_base_precision_names, p->base_precision);
  }
  if (p->attention != d.attention) names(&o, "attention", px_attention_names, p->attention);
  if (p->gelu != d.gelu) names(&o, "gelu", px_gelu_names, p->gelu);
  if (p->elementwise != d.elementwise) names(&o, "elementwise", px_elementwise_names, p->elementwise);
  if (p->bucket_bytes != d.bucket_bytes) field(&o, "bucket_mib", "%.9g", (double)p->bucket_bytes / (1 << 20));
  if (p->grad_accum != d.grad_accum) names(&o, "grad_accum", px_grad_accum_names, p->grad_accum);
  if (p->prefetch != d.prefetch) field(&o, "prefetch", "%lld", (long long)p->prefetch);
  if (!p->reshard && d.reshard) field(&o, "no_reshard_after_forward", NULL);
  if (p->shard_group > 0 && p->shard_group != px_parallel_weight_dp(p))
    field(&o, "shard_group", "%lld", (long long)p->shard_group);
  if (p->main_grad != d.main_grad) names(&o, "main_grad", px_main_grad_names, p->main_grad);
  if (p->offload_opt != d.offload_opt) names(&o, "offload_optimizer", px_offload_names, p->offload_opt);
  if (p->offload_params != d.offload_params) names(&o, "offload_params", px_offload_names, p->offload_params);
  if (p->overlap != d.overlap) { /* `overlap` sets exactly the bits it names ("none": no bit) */
    char t[256] = "none";
    size_t n = 0;
    for (int i = 0; i < PX_OVERLAP_BITS && n < sizeof t; i++)
      if (p->overlap & (1 << i)) n += (size_t)snprintf(t + n, sizeof t - n, "%s%s", n ? "," : "", px_overlap_names[i]);
    field(&o, "overlap", "%s", t);
  }
  return o.len;
}

/* The flags of a px_report_plan_flags string, split in place: names[i] (the flag with its dashes) and values[i]
 * (its value, or "" for a switch). Returns the count. */
static int split_flags(char *s, char **names, char **values, int cap) {
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(s, " ", &save); t && n < cap; t = strtok_r(NULL, " ", &save)) {
    if (t[0] == '-' && t[1] == '-') {
      names[n] = t, values[n++] = "";
    } else if (n > 0) {
      values[n - 1] = t;
    }
  }
  return n;
}

size_t px_report_plan_change(const px_parallel *from, const px_parallel *to, const px_model *m, const px_cluster *c,
                             char *buf, size_t cap) {
  char a[PX_REPORT_FLAGS_MAX], b[PX_REPORT_FLAGS_MAX];
  enum { MAXF = 64 };
  char *an[MAXF], *av[MAXF], *bn[MAXF], *bv[MAXF];
  px_report_plan_flags(from, m, c, a, sizeof a);
  px_report_plan_flags(to, m, c, b, sizeof b);
  int na = split_flags(a, an, av, MAXF), nb = split_flags(b, bn, bv, MAXF);
  out_buf o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  for (int i = 0; i < nb; i++) {
    int j = 0;
    while (j < na && strcmp(an[j], bn[i])) j++;
    if (j < na && !strcmp(av[j], bv[i])) continue;
    add(&o, "%s%s%s%s", o.len ? " " : "", bn[i], bv[i][0] ? " " : "", bv[i]);
  }
  for (int j = 0, k = 0; j < na; j++) {
    int i = 0;
    while (i < nb && strcmp(an[j], bn[i])) i++;
    if (i == nb) add(&o, "%s%s", k++ ? ", " : o.len ? ", without " : "without ", an[j]);
  }
  return o.len;
}
