/* Precision fp8 in the block templates: the fp8 twins of
 * tensors, their casts, the weights' cast copies and fp8 GEMMs' flags. */
#include "plan/fp8.h"

#include <stdio.h>
#include <string.h>

/* ---- fp8 (precision fp8) ----
 * A linear layer runs in fp8 when its input is an fp8 tensor: the input's
 * fp8 twin ("<name>_f8", made by a CAST op where the bf16 tensor is
 * produced, before a sequence-parallel all-gather so that it moves in fp8),
 * the weight's cached fp8 copy, and in the backward the output gradients
 * cast to E5M2. The weight gradient reads the twin, which is what the layer
 * keeps for the backward instead of the bf16 tensor where nothing else
 * reads that. */

/* An fp8 op's flags: fp8, and the recipe's block scales. */

uint16_t px_fp8_flags(const px_dims *d) {
  return (uint16_t)(PX_OPF_FP8 | (d->f8_block ? PX_OPF_FP8_BLOCK : 0) | d->f8_format);
}

/* The fp8 twin of slot s, made on first use: its bytes are one quantized
 * copy's, codes and scales (px_parallel_quant_bytes). */
static int f8_slot(px_plan *p, int s) {
  char name[2 * PX_NAME_MAX]; /* the names are short enough for slot_add's table */
  snprintf(name, sizeof name, "%s_f8", p->slots[s].name);
  int64_t sh[4];
  memcpy(sh, p->slots[s].shape, sizeof sh); /* slot_add may move the table */
  int32_t before = p->nslots;
  int t = px_bld_slot(p, name, PX_SLOT_ACT, PX_DTYPE_FP8, sh[0], sh[1], sh[2], sh[3]);
  if (p->nslots > before) { /* made now */
    px_slot *y = &p->slots[t];
    y->bytes = px_parallel_quant_bytes(&p->par, y->elems, px_slot_row_elems(y));
  }
  return t;
}

px_ref px_fp8_twin(px_plan *p, const px_dims *d, px_ref r) {
  return d->f8 && r.slot >= 0 && p->slots[r.slot].dtype != PX_DTYPE_FP8 ? R(f8_slot(p, r.slot), r.layer_off) : r;
}

px_ref px_fp8_cast(px_bld *b, const px_dims *d, px_phase ph, px_ref x, bool e5m2) {
  if (!d->f8 || x.slot < 0 || b->p->slots[x.slot].dtype == PX_DTYPE_FP8) return x; /* (codes already) */
  px_ref y = px_fp8_twin(b->p, d, x);
  const px_slot *xs = &b->p->slots[x.slot];
  px_op *o = px_bld_op(b, PX_OP_CAST, PX_STREAM_COMPUTE, ph);
  o->in[0] = x, o->out[0] = y;
  o->dim[0] = (int64_t)xs->elems;
  o->flags = (uint16_t)(px_fp8_flags(d) | (e5m2 ? PX_OPF_E5M2 : 0));
  o->bytes = px_parallel_cast_bytes(&b->p->par, xs->elems, px_slot_row_elems(xs), (int)px_dtype_bytes((px_dtype)xs->dtype),
                                    px_parallel_quant_copies(&b->p->par, &b->p->cluster.gpu));
  return y;
}

void px_fp8_weight_cast(px_bld *b, const px_dims *d, px_phase ph, int w) {
  const px_plan *p = b->p;
  if (!d->zero3 || px_parallel_weight_copies(&p->par, &p->cluster.gpu) <= 0) return; /* (fp8 weights need none) */
  px_op *c = px_bld_op(b, PX_OP_CAST, PX_STREAM_COMPUTE, ph);
  c->in[0] = R(w, 0);
  c->dim[0] = (int64_t)p->slots[w].elems;
  c->flags = px_fp8_flags(d);
  c->bytes = px_parallel_weight_cast_bytes(&p->par, &p->cluster.gpu, p->slots[w].elems);
}

void px_fp8_gemm(px_bld *b, const px_dims *d, px_op *o, int w) {
  o->flags |= px_fp8_flags(d);
  b->p->slots[w].fp8 = true;
}
