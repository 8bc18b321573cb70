/* Which ops a backend can run, asked before a run starts: an op's dtype, the
 * operands each kind takes (the interpreter-backend contract), and the walk
 * that refuses a plan with an op the backend cannot run, saying which and why. */
#ifndef PX_EXEC_SUPPORT_H
#define PX_EXEC_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "exec/backend.h"

extern const char *const px_support_names[PX_SUPPORT_COUNT]; /* "no", "yes", "widened" */

/* The dtype an op runs in: the data's for the communication kinds (a
 * unit-sized collective without slots: the parameters' for ALLGATHER, the
 * gradients' otherwise), the gradients' for the ops on gradient ranges
 * (GRAD_NORM, ADAMW, ACC without slots), the activations' for the rest. */
px_dtype px_support_op_dtype(const px_plan *plan, const px_op *op);

/* Whether op's operands are those its kind takes, each of its dtype (`dt`
 * stands for the dtype the backend computes the op in; statistics, the
 * log-probabilities and the loss are fp32, masks u8, tokens 32-bit), with the
 * flags and shapes every backend relies on (GELU epilogues on one output,
 * query heads a multiple of kv heads, an even RoPE head dim, ...). Ops without
 * slots pass. On false, why says which operand or field is wrong. */
bool px_support_contract(const px_plan *plan, const px_op *op, px_dtype dt, char *why, size_t cap);

/* Whether op reads or writes fp8 codes (an fp8 GEMM, a cast, a collective of fp8 tensors). */
bool px_support_fp8(const px_plan *plan, const px_op *op);

/* be->supports_op, or YES when the backend has no such entry. */
px_support px_support_op(px_backend *be, const px_plan *plan, const px_op *op, char *why, size_t cap);

/* Asks the backend about every op of every stage's program (each distinct op
 * once; the verdict is the same on every rank) and about the ops the
 * interpreter adds on gradient ranges. PX_ERR_INPUT with one line naming the
 * first op refused, its dtype and why (and the other kinds refused) when
 * any is. */
px_status px_support_check(px_backend *be, const px_plan *plan, px_err *err);

#endif
