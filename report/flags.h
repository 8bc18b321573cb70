/* A plan as the command-line flags that give it again: what `sweep --json`
 * and `--csv` carry per plan, and what a plan label stands for. */
#ifndef PX_REPORT_FLAGS_H
#define PX_REPORT_FLAGS_H

#include <stddef.h>

#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"

/* The plan flags that, with the same model, cluster and GPU count, resolve to p (a resolved plan), each the
 * flag of a px_parallel field (px_report_field_flag): the swept dimensions always (tp, pp, zero, sp, mbs, gbs,
 * schedule, vpp, recompute, precision), every other field when it is not what px_parallel_resolve would choose.
 * Written into buf (truncated to cap); returns the length it needed. */
/* The name (without "--") of the flag that sets field f of n bytes: the field's name with '-' for '_', but for
 * the few fields a flag of another name sets (ckpt_dir: ckpt). Written into out (cap bytes, truncated). The
 * one rule that cli/ (px_cli_words) and the flags written here share. */
void px_report_field_flag(const char *f, size_t n, char *out, size_t cap);
/* The flag of field f with its dashes, for text that tells the user what to type: written into out, returned. */
const char *px_report_flag(const char *f, char out[64]);
#define PX_REPORT_FLAGS_MAX 4096 /* room for every flag with a long --layers-per-chunk */
size_t px_report_plan_flags(const px_parallel *p, const px_model *m, const px_cluster *c, char *buf, size_t cap);

/* The flags that turn plan `from` into plan `to` (both resolved, of model m on
 * cluster c): those of px_report_plan_flags of `to` that `from`'s lack or set
 * otherwise, then, after "without", those `to`'s lack (zero 2 and tp 2, without
 * sp). Written into buf (truncated to cap); returns the length it needed. */
size_t px_report_plan_change(const px_parallel *from, const px_parallel *to, const px_model *m, const px_cluster *c,
                             char *buf, size_t cap);

#endif
