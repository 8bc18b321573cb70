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

/* " --FLAG VALUE" for plan field `name` (its flag by px_report_field_flag). */
static void field(out_buf *o, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void field(out_buf *o, const char *name, const char *fmt, ...) {
  char flag[64], value[64];
  px_report_field_flag(name, strlen(name), flag, sizeof flag);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(value, sizeof value, fmt, ap);
  va_end(ap);
  add(o, " --%s %s", flag, value);
}

size_t px_report_plan_flags(const px_parallel *p, const px_model *m, const px_cluster *c, char *buf, size_t cap) {
  out_buf o = {buf, cap, 0};
  if (cap) buf[0] = '\0';
  /* what px_parallel_resolve makes of the swept dimensions alone */
  px_parallel d;
  px_parallel_unset(&d);
  d.tp = p->tp, d.pp = p->pp, d.cp = p->cp, d.dp = p->dp, d.zero = p->zero, d.sp = p->sp, d.mbs = p->mbs;
  d.gbs = p->gbs, d.schedule = p->schedule, d.vpp = p->vpp, d.recompute = p->recompute, d.precision = p->precision;
  px_parallel_resolve(&d, m, c);
  add(&o, "--tp %lld --pp %lld", (long long)p->tp, (long long)p->pp);
  if (p->cp > 1) add(&o, " --cp %lld", (long long)p->cp);
  if (p->cp_algo != d.cp_algo) add(&o, " --cp-algo %s", px_cp_algo_names[p->cp_algo]);
  if (p->ep != d.ep) add(&o, " --ep %lld", (long long)p->ep);
  if (p->etp != d.etp) add(&o, " --etp %lld", (long long)p->etp);
  if (p->moe_dispatch != d.moe_dispatch) add(&o, " --moe-dispatch %s", px_moe_dispatch_names[p->moe_dispatch]);
  if (p->moe_buffers != d.moe_buffers) add(&o, " --moe-buffers %s", px_moe_buffers_names[p->moe_buffers]);
  if (p->moe_imbalance != d.moe_imbalance) add(&o, " --moe-imbalance %.9g", p->moe_imbalance);
  if (p->cuda_graph != d.cuda_graph) add(&o, " --cuda-graph %s", px_cuda_graph_names[p->cuda_graph]);
  add(&o, " --zero %d%s --mbs %lld --gbs %lld", p->zero, p->sp ? " --sp" : "", (long long)p->mbs, (long long)p->gbs);
  if (p->seq != d.seq) add(&o, " --seq %lld", (long long)p->seq);
  if (p->pp > 1) add(&o, " --schedule %s", px_schedule_names[p->schedule]);
  if (p->vpp > 1) add(&o, " --vpp %lld", (long long)p->vpp);
  if (p->first_stage_layers > 0) add(&o, " --first-stage-layers %lld", (long long)p->first_stage_layers);
  if (p->last_stage_layers > 0) add(&o, " --last-stage-layers %lld", (long long)p->last_stage_layers);
  for (int32_t i = 0; i < p->nchunk_layers; i++)
    add(&o, "%s%u", i ? "," : " --layers-per-chunk ", (unsigned)p->chunk_layers[i]);
  if (p->mb_group > 0) add(&o, " --microbatch-group %lld", (long long)p->mb_group);
  add(&o, " --recompute %s", px_recompute_names[p->recompute]);
  if (px_parallel_recompute_partial(p))
    add(&o, " --recompute-method %s --recompute-layers %lld", px_recompute_method_names[p->recompute_method],
        (long long)p->recompute_layers);
  if (p->recompute_modules) {
    char t[96];
    field(&o, "recompute_modules", "%s", px_recompute_modules_str(p->recompute_modules, t, sizeof t));
  }
  add(&o, " --precision %s", px_precision_names[p->precision]);
  if (p->fp8_recipe != d.fp8_recipe) add(&o, " --fp8-recipe %s", px_fp8_recipe_names[p->fp8_recipe]);
  if (p->fp8_base != d.fp8_base) add(&o, " --fp8-base %s", px_fp8_base_names[p->fp8_base]);
  if (p->fp8_params > 0) add(&o, " --fp8-params");
  if (p->bf16_layers_start > 0) add(&o, " --bf16-layers-start %lld", (long long)p->bf16_layers_start);
  if (p->bf16_layers_end > 0) add(&o, " --bf16-layers-end %lld", (long long)p->bf16_layers_end);
  if (p->offload_act_layers > 0) field(&o, "offload_activations", "%lld", (long long)p->offload_act_layers);
  if (p->finetune > 0) add(&o, " --finetune %s", px_finetune_names[p->finetune]);
  if (px_parallel_lora(p)) {
    char t[96];
    add(&o, " --lora-rank %lld --lora-alpha %.9g --lora-targets %s --base-precision %s", (long long)p->lora_rank,
        p->lora_alpha, px_lora_targets_str(p->lora_targets, t, sizeof t), px_base_precision_names[p->base_precision]);
  }
  if (p->attention != d.attention) add(&o, " --attention %s", px_attention_names[p->attention]);
  if (p->gelu != d.gelu) add(&o, " --gelu %s", px_gelu_names[p->gelu]);
  if (p->bucket_bytes != d.bucket_bytes) add(&o, " --bucket-mib %.9g", (double)p->bucket_bytes / (1 << 20));
  if (p->grad_accum != d.grad_accum) add(&o, " --grad-accum %s", px_grad_accum_names[p->grad_accum]);
  if (p->prefetch != d.prefetch) add(&o, " --prefetch %lld", (long long)p->prefetch);
  if (!p->reshard && d.reshard) add(&o, " --no-reshard-after-forward");
  if (p->shard_group > 0 && p->shard_group != px_parallel_weight_dp(p))
    add(&o, " --shard-group %lld", (long long)p->shard_group);
  if (p->main_grad != d.main_grad) add(&o, " --main-grad %s", px_main_grad_names[p->main_grad]);
  if (p->offload_opt != d.offload_opt) add(&o, " --offload-optimizer %s", px_offload_names[p->offload_opt]);
  if (p->offload_params != d.offload_params) add(&o, " --offload-params %s", px_offload_names[p->offload_params]);
  if (p->overlap != d.overlap) { /* --overlap sets exactly the bits it names ("none": no bit) */
    add(&o, " --overlap ");
    if (!p->overlap) add(&o, "none");
    for (int i = 0, n = 0; i < PX_OVERLAP_BITS; i++)
      if (p->overlap & (1 << i)) add(&o, "%s%s", n++ ? "," : "", px_overlap_names[i]);
  }
  return o.len;
}

/* The flags of a px_report_plan_flags string, split in place: names[i] ("--zero") and values[i] ("2", or
 * "" for a switch). Returns the count. */
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
