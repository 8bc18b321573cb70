/* A plan as the command-line flags that give it again: what `sweep --json`
 * and `--csv` carry per plan, and what a plan label stands for. */
#ifndef PX_REPORT_FLAGS_H
#define PX_REPORT_FLAGS_H

#include <stddef.h>

#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"

/* "--tp 2 --pp 4 --zero 1 --sp --mbs 1 --gbs 512 --schedule interleaved --vpp 2 ...": the plan flags
 * that, with the same --model, --cluster and --gpus, resolve to p (a resolved plan): the swept
 * dimensions always, every other field when it is not what px_parallel_resolve would choose.
 * Written into buf (truncated to cap); returns the length it needed. */
/* The name (without "--") of the flag that sets field f of n bytes: the field's name with '-' for '_', but for
 * the few fields a flag of another name sets (ckpt_dir: ckpt). Written into out (cap bytes, truncated). The
 * one rule that cli/ (px_cli_words) and the flags written here share. */
void px_report_field_flag(const char *f, size_t n, char *out, size_t cap);
#define PX_REPORT_FLAGS_MAX 4096 /* room for every flag with a long --layers-per-chunk */
size_t px_report_plan_flags(const px_parallel *p, const px_model *m, const px_cluster *c, char *buf, size_t cap);

/* "--zero 2 --tp 2, without --sp": the flags that turn plan `from` into plan
 * `to` (both resolved, of model m on cluster c): those of px_report_plan_flags
 * of `to` that `from`'s lack or set otherwise, then those `to`'s lack. Written
 * into buf (truncated to cap); returns the length it needed. */
size_t px_report_plan_change(const px_parallel *from, const px_parallel *to, const px_model *m, const px_cluster *c,
                             char *buf, size_t cap);

#endif
