/* The op contract every backend reads (exec/contract.h). */
#include "exec/contract.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The operands of each kind, outputs then inputs, one letter per position:
 *   A required, in the op's dtype       a optional, in the op's dtype
 *   F required, fp32                    f optional, fp32
 *   M required, u8 (dropout masks)      I required, 32-bit integers (tokens, targets, expert choices)
 *   i optional, 32-bit integers        q optional, fp8 codes
 *   . absent (so is every position past the string's end)
 * An fp8 GEMM (PX_OPF_FP8) reads fp8 codes where its inputs say A or a.
 * (the meaning of each position is in plan/compile.c and kernels/cpu). */
typedef struct {
  const char *out, *in;
} operands;

static const operands contract[PX_OP_COUNT] = {
    [PX_OP_EMBED] = {"A...", "IA...."},
    [PX_OP_EMBED_BWD] = {"a...", "AI...."},      /* no out[0]: a frozen table (fine-tuning) */
    [PX_OP_POS] = {"A...", "AA...."},
    [PX_OP_POS_BWD] = {"A...", "A....."},
    [PX_OP_NORM] = {"AFf.", "AAa..."},
    [PX_OP_NORM_BWD] = {"Aaa.", "AAFfA."},       /* no out[1]: a frozen weight */
    [PX_OP_LINEAR] = {"aaaa", "AAa..."},      /* its sections' outputs, one at least (splits_ok) */
    [PX_OP_LINEAR_BWD_DATA] = {"A...", "AaaAa."},
    [PX_OP_LINEAR_BWD_WEIGHT] = {"Aa..", "AaaA.."},
    [PX_OP_ROPE] = {"AA..", "AAa..."},     /* in[2]: latent attention's RoPE key */
    [PX_OP_ROPE_BWD] = {"AAa.", "AA...."}, /* out[2]: its gradient */
    [PX_OP_ATTN_SCORES] = {"A...", "AA...."},
    [PX_OP_ATTN_SCORES_BWD] = {"AA..", "AAA..."},
    [PX_OP_SOFTMAX] = {"A...", "Aa...."},     /* in[1]: sink logits */
    [PX_OP_SOFTMAX_BWD] = {"Aa..", "AA...."}, /* out[1]: their gradient */
    [PX_OP_ATTN_CONTEXT] = {"A...", "AA...."},
    [PX_OP_ATTN_CONTEXT_BWD] = {"AA..", "AAA..."},
    [PX_OP_FLASH_ATTN] = {"AFaf", "AAAa.."},     /* out[2], out[3]: CP ring's K/V blocks, partial ctx and lse; in[3]: sink
                                                    logits */
    [PX_OP_FLASH_ATTN_BWD] = {"AAAaa", "AAAAAF"}, /* out[3]: the sinks' gradient; out[4]: CP ring's K/V and dK/dV
                                                     blocks (and the rows' probabilities seen, with sinks) */
    [PX_OP_DROPOUT] = {"AM..", "Aa...."},
    [PX_OP_DROPOUT_BWD] = {"A...", "AM...."},
    [PX_OP_ADD] = {"A...", "AAa..."},
    [PX_OP_ACC] = {"A...", "A....."},
    [PX_OP_GELU] = {"A...", "A.f..."},         /* in[2]: the rows' gates (the experts': a weighted activation) */
    [PX_OP_GELU_BWD] = {"Af..", "AAf..."},     /* in[2], out[1]: the gates and their gradient */
    [PX_OP_SWIGLU] = {"A...", "AAf..."},       /* in[2]: the gates */
    [PX_OP_SWIGLU_BWD] = {"AAf.", "AAAf.."},   /* in[3], out[2]: the gates and their gradient */
    [PX_OP_LOSS] = {"FFf.", "AI...."},           /* out[2]: eager's fp32 copy of the logits (a workspace) */
    [PX_OP_LOSS_BWD] = {"Aff.", "FI...."},       /* out[1..2]: eager's fp32 gradients (workspaces) */
    [PX_OP_ALLREDUCE] = {"A...", "A....."},
    [PX_OP_ALLGATHER] = {"Aaf.", "Aif..."},      /* out[1]: SP's permute workspace with mbs > 1; ETP: in[1] the row
                                                    counts, in[2] to out[2] the rows' gates */
    [PX_OP_REDUCE_SCATTER] = {"Aaf.", "Aif..."},
    [PX_OP_ALLTOALL] = {"Aaf.", "Aif..."},       /* CP: out[1] the packed send and receive blocks; EP: in[1] the row
                                                    counts, in[2] to out[2] the rows' gates */
    [PX_OP_MOE_ROUTE] = {"AIF.", "A....."},
    [PX_OP_MOE_ROUTE_BWD] = {"A...", "FAI..."},
    [PX_OP_MOE_PERMUTE] = {"AIf.", "AIf..."},     /* out[1]: rows per expert; in[2] to out[2]: the gates */
    [PX_OP_MOE_PERMUTE_BWD] = {"Af..", "AIf..."}, /* in[2] to out[1]: the gates' gradients */
    [PX_OP_MOE_UNPERMUTE] = {"A...", "A.I..."},
    [PX_OP_MOE_UNPERMUTE_BWD] = {"A...", "A..I.."},
    [PX_OP_EXPERT_LINEAR] = {"Aa..", "AAa.I."},   /* in[2]: the experts' biases; in[4]: rows per local expert */
    [PX_OP_EXPERT_LINEAR_BWD_DATA] = {"A...", "Aa.AI."},
    [PX_OP_EXPERT_LINEAR_BWD_WEIGHT] = {"Aa..", "Aa.AI."}, /* out[1]: the biases' gradient */
    [PX_OP_EXPERT_BIAS] = {"A...", "AF..I."},          /* in[0]: the biases, in[1]: the rows' gates */
    [PX_OP_EXPERT_BIAS_BWD] = {"AF..", "AAF.I."},      /* out[0]: the biases' gradient, out[1]: the gates' */
    [PX_OP_SEND] = {"....", "A....."},
    [PX_OP_RECV] = {"A...", "......"},
    [PX_OP_GRAD_NORM] = {"....", "......"},
    [PX_OP_ADAMW] = {"....", "......"},
    [PX_OP_ADAMW_HOST] = {"....", "......"}, /* the host's: the interpreter runs these three itself */
    [PX_OP_COPY_D2H] = {"....", "......"},
    [PX_OP_COPY_H2D] = {"....", "......"},
    [PX_OP_CAST] = {"q...", "A....."}, /* no output: the weights' cached copies, written by their GEMMs (wcopy) */
};

/* A cast of a frozen weight from its base_precision storage (PX_OPF_DEQUANT): the weight in, its values out in the
 * op's dtype. */
static const operands dequant = {"A...", "A....."};

static bool no(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool no(char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return false;
}

static bool slotless(const px_op *op) {
  for (int j = 0; j < PX_OP_OUTS; j++)
    if (op->out[j].slot >= 0) return false;
  for (int j = 0; j < PX_OP_INS; j++)
    if (op->in[j].slot >= 0) return false;
  return true;
}

px_dtype px_contract_dtype(const px_env *v, const px_op *op) {
  switch ((px_op_kind)op->kind) {
    case PX_OP_SEND:
      return op->in[0].slot >= 0 ? (px_dtype)v->slots[op->in[0].slot].dtype : v->act_dtype;
    case PX_OP_RECV:
    case PX_OP_ALLREDUCE:
    case PX_OP_ALLGATHER:
    case PX_OP_REDUCE_SCATTER:
    case PX_OP_ALLTOALL:
      if (op->out[0].slot >= 0) return (px_dtype)v->slots[op->out[0].slot].dtype;
      return op->kind == PX_OP_ALLGATHER ? v->weight_dtype : v->grad_dtype;
    case PX_OP_GRAD_NORM:
    case PX_OP_ADAMW:
    case PX_OP_ADAMW_HOST:
    case PX_OP_COPY_D2H: return v->grad_dtype;
    case PX_OP_COPY_H2D: return v->weight_dtype;
    case PX_OP_ACC: return slotless(op) ? v->grad_dtype : v->act_dtype;
    default: return v->act_dtype;
  }
}

/* One operand against its letter. */
static bool operand_ok(const px_env *v, const px_op *op, bool is_out, int j, char letter, px_dtype dt, char *why,
                       size_t cap) {
  px_ref r = is_out ? op->out[j] : op->in[j];
  const char *side = is_out ? "out" : "in";
  const char *kind = px_op_names[op->kind];
  if (r.slot < 0) {
    if (letter == 'A' || letter == 'F' || letter == 'M' || letter == 'I')
      return no(why, cap, "%s: operand %s[%d] is missing", kind, side, j);
    return true;
  }
  const px_slot *s = &v->slots[r.slot];
  px_dtype have = (px_dtype)s->dtype;
  switch (letter) {
    case '.': return no(why, cap, "%s: operand %s[%d] (%s) is not one it takes", kind, side, j, s->name);
    case 'A':
    case 'a':
      if (!is_out && have == PX_DTYPE_FP8 && (op->flags & PX_OPF_FP8)) return true; /* an fp8 GEMM's operand */
      /* the SP permute's workspace, the plan's one in the activations' dtype: bytes enough for fp8 codes */
      if (is_out && j == 1 && op->kind == PX_OP_ALLGATHER && dt == PX_DTYPE_FP8) return true;
      if (have != dt)
        return no(why, cap, "%s: operand %s[%d] (%s) is %s where the op runs in %s", kind, side, j, s->name,
                  px_dtype_names[have], px_dtype_names[dt]);
      return true;
    case 'F':
    case 'f':
      if (have != PX_DTYPE_FP32)
        return no(why, cap, "%s: operand %s[%d] (%s) is %s, not fp32", kind, side, j, s->name, px_dtype_names[have]);
      return true;
    case 'q':
      if (have != PX_DTYPE_FP8)
        return no(why, cap, "%s: operand %s[%d] (%s) is %s, not fp8", kind, side, j, s->name, px_dtype_names[have]);
      return true;
    case 'M':
      if (have != PX_DTYPE_U8)
        return no(why, cap, "%s: mask %s[%d] (%s) is %s, not u8", kind, side, j, s->name, px_dtype_names[have]);
      return true;
    default: /* 'I', 'i': 32-bit integers, stored in a 4-byte slot */
      if (px_dtype_bytes(have) != 4)
        return no(why, cap, "%s: integers %s[%d] (%s) are not 32-bit", kind, side, j, s->name);
      return true;
  }
}

/* The widths of a LINEAR* op's split outputs (dim[3..5]) against its operands r (in or out): one per section of
 * positive width, but that a forward may leave out all its outputs but one (those sections not made,
 * px_op_linear_cols). */
static bool splits_ok(const px_op *op, const px_ref *r, const char *side, char *why, size_t cap) {
  const int64_t *d = op->dim;
  if (d[3] <= 0 || d[3] + (d[4] > 0 ? d[4] : 0) + (d[5] > 0 ? d[5] : 0) != d[1])
    return no(why, cap, "%s: split widths %lld + %lld + %lld are not n = %lld", px_op_names[op->kind], (long long)d[3],
              (long long)d[4], (long long)d[5], (long long)d[1]);
  bool skips = op->kind == PX_OP_LINEAR;
  for (int i = 0; i < 3; i++)
    if ((r[i].slot >= 0 && d[3 + i] <= 0) || (r[i].slot < 0 && d[3 + i] > 0 && !skips))
      return no(why, cap, "%s: %s[%d] %s with a split width of %lld", px_op_names[op->kind], side, i,
                r[i].slot >= 0 ? "given" : "missing", (long long)d[3 + i]);
  if (skips && px_op_linear_cols(op) == 0) return no(why, cap, "%s: no output", px_op_names[op->kind]);
  return true;
}

bool px_contract_check(const px_env *v, const px_op *op, px_dtype dt, char *why, size_t cap) {
  if (op->kind >= PX_OP_COUNT) return no(why, cap, "op kind %d is not one of the graph's", (int)op->kind);
  const char *kind = px_op_names[op->kind];
  const operands *c = op->kind == PX_OP_CAST && (op->flags & PX_OPF_DEQUANT) ? &dequant : &contract[op->kind];
  if (!c->out || !c->in) return no(why, cap, "%s: no operand contract for this kind (exec/support.c)", kind);
  if (slotless(op)) return true; /* ops on gradient ranges and unit-sized collectives: px_exec_op's contract */
  for (int j = 0; j < PX_OP_OUTS; j++)
    if (!operand_ok(v, op, true, j, j < (int)strlen(c->out) ? c->out[j] : '.', dt, why, cap)) return false;
  for (int j = 0; j < PX_OP_INS; j++)
    if (!operand_ok(v, op, false, j, j < (int)strlen(c->in) ? c->in[j] : '.', dt, why, cap)) return false;
  const int64_t *d = op->dim;
  bool ln = px_contract_layernorm(op);
  switch ((px_op_kind)op->kind) {
    case PX_OP_NORM:
      if (ln && !v->layernorm) return no(why, cap, "%s: a LayerNorm's mean (out[2]) in an RMSNorm model", kind);
      if (!ln && op->in[2].slot >= 0) return no(why, cap, "%s: an RMSNorm (no mean) takes no bias", kind);
      return true;
    case PX_OP_NORM_BWD:
      if (ln && !v->layernorm) return no(why, cap, "%s: a LayerNorm's mean (in[3]) in an RMSNorm model", kind);
      if (!ln && op->out[2].slot >= 0) return no(why, cap, "%s: an RMSNorm (no mean) has no bias gradient", kind);
      return true;
    case PX_OP_LINEAR:
      if (op->flags & PX_OPF_GELU) {
        if (d[4] > 0 || d[5] > 0 || op->out[1].slot >= 0 || op->out[2].slot >= 0 || op->out[3].slot < 0)
          return no(why, cap, "%s: a GELU epilogue takes one output and the pre-activation (out[3])", kind);
      } else if (op->out[3].slot >= 0) {
        return no(why, cap, "%s: a pre-activation output (out[3]) without the GELU epilogue", kind);
      }
      return splits_ok(op, op->out, "out", why, cap);
    case PX_OP_LINEAR_BWD_DATA:
      if ((op->flags & PX_OPF_DGELU) && (d[4] > 0 || d[5] > 0 || op->in[4].slot < 0))
        return no(why, cap, "%s: a GELU-gradient epilogue takes one input and the pre-activation (in[4])", kind);
      if (!(op->flags & PX_OPF_DGELU) && op->in[4].slot >= 0)
        return no(why, cap, "%s: a pre-activation input (in[4]) without the GELU-gradient epilogue", kind);
      return splits_ok(op, op->in, "in", why, cap);
    case PX_OP_LINEAR_BWD_WEIGHT: return splits_ok(op, op->in, "in", why, cap);
    case PX_OP_ROPE:
    case PX_OP_ROPE_BWD: {
      int64_t rotated = (op->kind == PX_OP_ROPE ? op->in[2] : op->out[2]).slot >= 0 ? d[5] : d[4]; /* MLA: its part */
      if (rotated % 2 || rotated > d[4])
        return no(why, cap, "%s: %lld rotated dims of head dim %lld (RoPE rotates pairs of a head's)", kind,
                  (long long)rotated, (long long)d[4]);
    }
      /* fall through */
    case PX_OP_ATTN_SCORES:
    case PX_OP_ATTN_SCORES_BWD:
    case PX_OP_ATTN_CONTEXT:
    case PX_OP_ATTN_CONTEXT_BWD:
    case PX_OP_FLASH_ATTN:
    case PX_OP_FLASH_ATTN_BWD:
      if (d[3] <= 0 || d[2] % d[3] != 0)
        return no(why, cap, "%s: %lld query heads are not a multiple of %lld kv heads", kind, (long long)d[2],
                  (long long)d[3]);
      return true;
    case PX_OP_ADD:
      if (op->in[2].slot >= 0 && (d[1] <= 0 || d[0] % d[1] != 0))
        return no(why, cap, "%s: bias width %lld does not divide %lld elements", kind, (long long)d[1],
                  (long long)d[0]);
      return true;
    default: return true;
  }
}

int64_t px_contract_expert_taken(const px_exec_op *e, int64_t *sources) {
  *sources = e->env->etp * e->env->ep;
  return e->env->ep * e->op->dim[3];
}

px_support px_contract_refuse(char *why, size_t cap, px_support verdict, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return verdict;
}

bool px_contract_layernorm(const px_op *op) {
  return (op->kind == PX_OP_NORM ? op->out[2] : op->in[3]).slot >= 0;
}

bool px_contract_fp8(const px_env *v, const px_op *op) {
  if (op->flags & PX_OPF_FP8) return true;
  for (int j = 0; j < PX_OP_OUTS; j++)
    if (op->out[j].slot >= 0 && v->slots[op->out[j].slot].dtype == PX_DTYPE_FP8) return true;
  for (int j = 0; j < PX_OP_INS; j++)
    if (op->in[j].slot >= 0 && v->slots[op->in[j].slot].dtype == PX_DTYPE_FP8) return true;
  return false;
}
