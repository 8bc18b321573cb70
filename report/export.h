/* A plan in the words of the frameworks people run: Megatron-LM's launch
 * arguments, Megatron-Bridge's (NeMo's) recipe overrides, a torchtitan TOML
 * job config and a DeepSpeed JSON config, each naming only settings that
 * framework defines (tests/data/export holds them, with their sources). A
 * choice of the plan a framework cannot express is refused, naming the
 * field and why: never dropped. One rule decides what a framework can run,
 * for `export` and for `sweep --runnable-by` alike. */
#ifndef PX_REPORT_EXPORT_H
#define PX_REPORT_EXPORT_H

#include <stdio.h>

#include "core/status.h"
#include "plan/cluster.h"
#include "plan/model.h"
#include "plan/parallel.h"

typedef enum { PX_FW_MEGATRON, PX_FW_NEMO, PX_FW_TORCHTITAN, PX_FW_DEEPSPEED, PX_FW_COUNT } px_framework;
extern const char *const px_framework_names[PX_FW_COUNT];

/* Whether framework fw runs plan p (resolved) of model m as planned: PX_OK,
 * or PX_ERR_INPUT with "<framework> cannot run <field> <value>: <why>
 * (hint: ...)" in err (which may be NULL, as the sweep's filter passes). */
px_status px_export_check(px_framework fw, const px_parallel *p, const px_model *m, px_err *err);

/* Fields a framework fixes that a sweep leaves unset otherwise: torchtitan
 * reduces gradients in fp32 (main_grad fp32) and scales float8 from the
 * current amax (fp8_recipe current, unless another precision is fixed);
 * Megatron-Bridge's precision recipe's. Sets only unset fields. */
void px_export_sweep_fixed(px_framework fw, px_parallel *fixed);

/* The bash array a Megatron-LM or Megatron-Bridge export fills (MEGATRON_ARGS, OVERRIDES); NULL for the
 * frameworks written as a config file. */
const char *px_export_array(px_framework fw);

/* Writes what runs p in fw to out: Megatron-LM's arguments and Megatron-
 * Bridge's overrides as a bash array (px_export_array), torchtitan's TOML,
 * DeepSpeed's JSON; what the framework leaves to the model code or the
 * launcher is said in comments (notes on `notes` for JSON, which has none).
 * `launch`, the command line that runs what is written (another program's
 * flags: the caller composes it), heads the comments; NULL: none (DeepSpeed
 * takes none). Refuses as px_export_check, writing nothing. */
px_status px_export_write(px_framework fw, const px_model *m, const px_cluster *c, const px_parallel *p,
                          const char *launch, FILE *out, FILE *notes, px_err *err);

#endif
