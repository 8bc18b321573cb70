/* The per-stage programs (plan/program.c): layers over stages, parameters
 * in units, each stage's schedule of block instances. */
#ifndef PX_PLAN_PROGRAM_H
#define PX_PLAN_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "plan/query.h"

/* Called once a stage's program is made; setting *stop ends the compile
 * there (the other stages are left without programs, the sends and
 * receives unpaired). */
typedef px_status (*px_stage_done_fn)(px_plan *p, int64_t stage, bool *stop, void *ctx);
/* Lays out parameters into units and orders each stage's program (the
 * first stage, the last, then the others), calling done (may be NULL)
 * after each; then pairs sends with receives. */
px_status px_compile_programs(px_plan *p, px_stage_done_fn done, void *ctx, px_err *err);

/* What the programs are made of, for a bound before any is made (sim/bound.h). */

/* The forward entries of each chunk that the stages `stages` (nstages of
 * them) run before their first backward in par's schedule of m
 * micro-batches: out[i vpp + c] for stage stages[i] and chunk c. */
px_status px_schedule_forwards_first(const px_parallel *par, int64_t m, int nstages, const int64_t *stages,
                                     int64_t *out, px_err *err);

/* A schedule entry: a forward, a backward (B when split), or a split backward's weight gradients (W). */
enum { PX_ENTRY_F, PX_ENTRY_B, PX_ENTRY_W };
/* The compute blocks, in order, of an entry on a chunk holding layers
 * [first, first + n) (embed: the model's first chunk, head: its last; W
 * has neither), each layer's as par recomputes it, the head's chunk with the MTP module's after the head
 * (forward) or before it (backward): into out (n + 3 at most); returns how many. */
int px_program_entry_kinds(const px_model *m, const px_parallel *par, int64_t first, int64_t n, bool embed, bool head,
                           int entry, px_block_kind *out);

/* Parameter group ids: -1 the embedding, 0..L-1 the layers, L the head, L + 1 the MTP module (par.mtp_layers):
 * L + 2 + mtp_layers of them. */
int64_t px_program_ngroups(const px_plan *p);
/* The parameter elements of a parameter group (-1 the embedding, 0..L-1 a
 * layer, L the head, with the embedding when it is tied on one stage, L + 1 the MTP module), on
 * one rank, as the programs lay them out (trained ones; the frozen apart): the experts' apart, and those
 * read by fp8 GEMMs (px_plan_fp8_weight_elems) among both, in a layer of the plan's precision (one kept in
 * the compute dtype, px_parallel_layer_bf16, has the same parameters and none of them quantized). */
typedef struct {
  uint64_t elems, expert_elems, fp8_elems;
  uint64_t frozen_bytes; /* fine-tuning's frozen base weights (in none of the above), px_lora_frozen_bytes */
} px_group_elems;
void px_program_group_elems(const px_plan *p, int32_t gid, px_group_elems *out);
/* Whether the first stage holds the embedding as a group of its own (-1):
 * not when it is tied to the head on one stage (then in group L). */
bool px_program_embed_group(const px_plan *p);

/* The activation bytes the model's first n layers keep from forward to backward, each its own kind's
 * (px_plan_kept_bytes; pp 1: what activation offload moves, layer by layer): into out[0..n). PX_ERR_RUNTIME
 * when out of memory. */
px_status px_plan_first_layers_kept(const px_plan *p, int64_t n, uint64_t *out, px_err *err);

#endif
