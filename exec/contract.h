/* The interpreter-backend contract of each op kind, from the op and the
 * run's env alone (no plan): the dtype an op runs in, the operands each
 * kind takes and their dtypes, the flags and shapes every backend relies
 * on. Backends read it in supports_op; exec/support.c asks them over a
 * whole plan. */
#ifndef PX_EXEC_CONTRACT_H
#define PX_EXEC_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"

/* The dtype an op runs in: the data's for the communication kinds (a
 * unit-sized collective without slots: the parameters' for ALLGATHER, the
 * gradients' otherwise), the gradients' for the ops on gradient ranges
 * (GRAD_NORM, ADAMW, ACC without slots), the activations' for the rest. */
px_dtype px_contract_dtype(const px_env *v, const px_op *op);

/* Whether op's operands are those its kind takes, each of its dtype (`dt`
 * stands for the dtype the backend computes the op in; statistics, the
 * log-probabilities and the loss are fp32, masks u8, tokens 32-bit), with the
 * flags and shapes every backend relies on (GELU epilogues on one output,
 * query heads a multiple of kv heads, an even RoPE head dim, ...). Ops without
 * slots pass. On false, why says which operand or field is wrong. */
bool px_contract_check(const px_env *v, const px_op *op, px_dtype dt, char *why, size_t cap);

/* Whether a NORM or NORM_BWD op is a LayerNorm: it keeps (NORM's out[2]) or
 * reads (NORM_BWD's in[3]) the rows' means. The layers' norms follow the
 * model's norm; the per-head q/k norms and latent attention's latent norms
 * are RMSNorms in any model (plan/attention.c). */
bool px_contract_layernorm(const px_op *op);

/* Where the expert ops (EXPERT_LINEAR*, EXPERT_BIAS*) read the rows their local experts take in their in[4] counts
 * (plan/mlp.c's moe_counts: the (EP, El) rows sent, then the (sources, El) taken): the index of the first taken
 * count; the counts run source-major (each EP rank, with ETP each member in turn), then local expert, *sources of
 * them (ep etp), and the rows lie in that order. */
int64_t px_contract_expert_taken(const px_exec_op *e, int64_t *sources);

/* Whether op reads or writes fp8 codes (an fp8 GEMM, a cast, a collective of fp8 tensors). */
bool px_contract_fp8(const px_env *v, const px_op *op);

/* A supports_op verdict with its reason: writes the reason into why (cap bytes) and returns verdict. */
px_support px_contract_refuse(char *why, size_t cap, px_support verdict, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
