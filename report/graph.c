/* Op graph output: JSON and Graphviz. */
#include "report/graph.h"

#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/fmt.h"
#include "core/json.h"

static PX_NAME_TABLE(slot_kind_names, PX_SLOT_KIND_COUNT, "param", "grad", "act", "act_grad", "buffer", "workspace");

/* refs as [slot, layer_offset] pairs: every one of a list (allocs, frees), or an op's operands by position, null
 * where it has none before a later one (a GEMM's skipped section, GELU's pre-activation in out[3]) */
static cJSON *refs_json(const px_ref *r, int n, bool positional) {
  cJSON *a = cJSON_CreateArray();
  int last = n - 1;
  while (positional && last >= 0 && r[last].slot < 0) last--;
  for (int i = 0; a && i <= last; i++) {
    if (r[i].slot < 0) {
      if (positional) cJSON_AddItemToArray(a, cJSON_CreateNull());
      continue;
    }
    cJSON *pair = cJSON_CreateArray();
    if (!pair) break;
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(r[i].slot));
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(r[i].layer_off));
    cJSON_AddItemToArray(a, pair);
  }
  return a;
}

static cJSON *int_array(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

cJSON *px_report_graph_json(const px_plan *plan) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", "parallax-graph/2");
  cJSON *slots = cJSON_AddArrayToObject(root, "slots");
  for (int i = 0; slots && i < plan->nslots; i++) {
    const px_slot *s = &plan->slots[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    px_json_add_num(o, "id", i);
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddStringToObject(o, "kind", slot_kind_names[s->kind]);
    cJSON_AddStringToObject(o, "dtype", px_dtype_names[s->dtype]);
    cJSON_AddItemToObject(o, "shape", int_array(s->shape, 4));
    px_json_add_num(o, "bytes", (double)s->bytes);
    cJSON_AddItemToArray(slots, o);
  }
  cJSON *blocks = cJSON_AddArrayToObject(root, "blocks");
  for (int k = 0; blocks && k < PX_BLOCK_KIND_COUNT; k++) {
    const px_block *b = &plan->blocks[k];
    cJSON *bo = cJSON_CreateObject();
    if (!bo) break;
    px_json_add_num(bo, "id", k);
    cJSON_AddStringToObject(bo, "kind", px_block_names[k]);
    cJSON_AddStringToObject(bo, "stream", px_stream_names[b->stream]);
    cJSON *ops = cJSON_AddArrayToObject(bo, "ops");
    for (int32_t i = 0; ops && i < b->nops; i++) {
      const px_op *op = &b->ops[i];
      cJSON *oo = cJSON_CreateObject();
      if (!oo) break;
      cJSON_AddStringToObject(oo, "kind", px_op_names[op->kind]);
      cJSON_AddStringToObject(oo, "stream", px_stream_names[op->stream]);
      cJSON_AddStringToObject(oo, "phase", px_phase_names[op->phase]);
      if (op->group) cJSON_AddStringToObject(oo, "group", px_group_names[op->group]);
      if (op->dep >= 0) cJSON_AddNumberToObject(oo, "dep", op->dep);
      if (op->flags & (PX_OPF_GELU | PX_OPF_DGELU))
        cJSON_AddStringToObject(oo, "epilogue", op->flags & PX_OPF_GELU ? "gelu" : "dgelu");
      if (op->flags & PX_OPF_DEQUANT) cJSON_AddBoolToObject(oo, "dequant", true); /* a frozen weight's fp8/nf4 */
      if (op->flags & PX_OPF_LORA_SCALE) cJSON_AddBoolToObject(oo, "lora_scale", true); /* times alpha / r */
      if (px_op_eager(op)) cJSON_AddBoolToObject(oo, "eager", true); /* PyTorch eager's kernels, their bytes */
      if (px_op_eager(op) && (op->flags & PX_OPF_ROPE_UNFUSED)) /* ... Megatron-Core's unfused RoPE's */
        cJSON_AddBoolToObject(oo, "rope_unfused", true);
      cJSON_AddItemToObject(oo, "in", refs_json(op->in, PX_OP_INS, true));
      cJSON_AddItemToObject(oo, "out", refs_json(op->out, PX_OP_OUTS, true));
      cJSON_AddItemToObject(oo, "dim", int_array(op->dim, 6));
      px_json_add_num(oo, "flops", op->flops);
      px_json_add_num(oo, "bytes", op->bytes);
      px_json_add_num(oo, "wire_bytes", op->wire_bytes);
      cJSON_AddItemToObject(oo, "alloc", refs_json(b->allocs + op->alloc_start, op->alloc_count, false));
      cJSON_AddItemToObject(oo, "free", refs_json(b->frees + op->free_start, op->free_count, false));
      cJSON_AddItemToArray(ops, oo);
    }
    cJSON_AddItemToArray(blocks, bo);
  }
  cJSON *stages = cJSON_AddArrayToObject(root, "stages");
  for (int64_t s = 0; stages && s < plan->par.pp; s++) {
    const px_program *prog = &plan->programs[s];
    cJSON *so = cJSON_CreateObject();
    if (!so) break;
    px_json_add_num(so, "stage", (double)s);
    cJSON *units = cJSON_AddArrayToObject(so, "units");
    for (int32_t u = 0; units && u < prog->nunits; u++) {
      int64_t v[5] = {(int64_t)prog->units[u].offset, (int64_t)prog->units[u].elems, (int64_t)prog->units[u].padded,
                      prog->units[u].first_group, prog->units[u].last_group};
      cJSON_AddItemToArray(units, int_array(v, 5));
    }
    cJSON *params = cJSON_AddArrayToObject(so, "params");
    for (int32_t i = 0; params && i < prog->nparams; i++) {
      const px_param_ref *r = &prog->params[i];
      int64_t v[5] = {r->slot, r->group, r->unit, (int64_t)r->offset, (int64_t)r->elems};
      cJSON_AddItemToArray(params, int_array(v, 5));
    }
    cJSON *insts = cJSON_AddArrayToObject(so, "program");
    int64_t first_op = 0;
    for (int32_t i = 0; insts && i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      cJSON *io = cJSON_CreateObject();
      if (!io) break;
      cJSON_AddStringToObject(io, "block", px_block_names[in->block]);
      cJSON_AddStringToObject(io, "stream", px_stream_names[in->stream]);
      px_json_add_num(io, "mb", in->mb);
      px_json_add_num(io, "layer", in->layer);
      px_json_add_num(io, "chunk", in->chunk);
      if (in->unit >= 0) px_json_add_num(io, "unit", in->unit);
      if (in->batch >= 0) px_json_add_num(io, "batch", in->batch);
      if (in->peer >= 0) px_json_add_num(io, "peer", in->peer);
      px_json_add_num(io, "first_op", (double)first_op);
      first_op += plan->blocks[in->block].nops;
      cJSON *deps = cJSON_AddArrayToObject(io, "deps");
      for (int32_t d = 0; deps && d < in->ndeps; d++)
        cJSON_AddItemToArray(deps, cJSON_CreateNumber(prog->deps[in->dep_start + d]));
      cJSON_AddItemToArray(insts, io);
    }
    cJSON_AddItemToArray(stages, so);
  }
  return root;
}

px_status px_report_graph_write_json(const px_plan *plan, const char *path, px_err *err) {
  cJSON *root = px_report_graph_json(plan);
  if (!root) return px_err_set(err, PX_ERR_RUNTIME, "out of memory building the graph");
  px_status st = px_json_write(path, root, err);
  cJSON_Delete(root);
  return st;
}

px_status px_report_graph_write_dot(const px_plan *plan, const char *path, px_err *err) {
  int64_t L = plan->model.layers + 2;
  int32_t *producer = malloc((size_t)plan->nslots * (size_t)(L + 2) * sizeof *producer);
  if (!producer) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  for (int64_t i = 0; i < (int64_t)plan->nslots * (L + 2); i++) producer[i] = -1;
  px_afile f;
  px_status st = px_afile_open(&f, path, err);
  if (st) {
    free(producer);
    return st;
  }
  FILE *fp = f.fp;
  fprintf(fp, "digraph parallax {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n");
  fprintf(fp, "  label=\"%s: stage 0, micro-batch 0\";\n", plan->model.name);
  px_op_iter it = px_op_iter_begin(plan, 0);
  for (const px_op *op; (op = px_op_next(&it));) {
    const px_inst *in = it.in;
    int64_t id = it.id;
    if (in->mb != 0) continue;
    const char *color = op->phase == PX_PHASE_FWD         ? "lightblue"
                        : op->phase == PX_PHASE_BWD       ? "lightsalmon"
                        : op->phase == PX_PHASE_RECOMPUTE ? "khaki"
                                                          : "palegreen";
    fprintf(fp, "  op%lld [label=\"%s\\nlayer %d\", style=filled, fillcolor=%s];\n", (long long)id,
            px_op_names[op->kind], in->layer, color);
    for (int r = 0; r < PX_OP_INS; r++) {
      if (op->in[r].slot < 0) continue;
      int64_t layer = in->layer + op->in[r].layer_off + 1;
      if (layer < 0 || layer >= L + 2) continue;
      int32_t from = producer[(int64_t)op->in[r].slot * (L + 2) + layer];
      if (from >= 0)
        fprintf(fp, "  op%d -> op%lld [label=\"%s\", fontsize=8];\n", from, (long long)id,
                plan->slots[op->in[r].slot].name);
    }
    for (int r = 0; r < PX_OP_OUTS; r++) {
      if (op->out[r].slot < 0) continue;
      int64_t layer = in->layer + op->out[r].layer_off + 1;
      if (layer >= 0 && layer < L + 2) producer[(int64_t)op->out[r].slot * (L + 2) + layer] = (int32_t)id;
    }
  }
  fprintf(fp, "}\n");
  free(producer);
  return px_afile_commit(&f, err);
}
