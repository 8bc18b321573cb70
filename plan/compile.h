/* Internal interface between the plan compiler's parts: the block
 * templates (plan/compile.c), the per-stage programs (plan/program.c) and
 * the memory plan (plan/memory.c), driven by plan/plan.c. */
#ifndef PX_PLAN_COMPILE_H
#define PX_PLAN_COMPILE_H

#include "plan/plan.h"

/* Creates the slots and the block templates of every px_block_kind. */
px_status px_compile_blocks(px_plan *p, px_err *err);

/* Called once a stage's program is made; setting *stop ends the compile
 * there (the other stages are left without programs, the sends and
 * receives unpaired). */
typedef px_status (*px_stage_done_fn)(px_plan *p, int64_t stage, bool *stop, void *ctx);
/* Lays out parameters into units and orders each stage's program (the
 * first stage, the last, then the others), calling done (may be NULL)
 * after each; then pairs sends with receives. */
px_status px_compile_programs(px_plan *p, px_stage_done_fn done, void *ctx, px_err *err);

/* What one block does to dynamic memory: net change and the largest
 * excursion inside it, with the breakdown at that moment. */
typedef struct {
  int64_t delta[PX_MEM_COUNT];
  int64_t peak;                  /* max over ops of the running total (relative) */
  int64_t at_peak[PX_MEM_COUNT]; /* relative breakdown at that op */
} px_block_mem;

/* The memory plan, a stage at a time: begin allocates it and sums up each
 * block (bm), stage walks a stage's program applying lifetimes (its peak,
 * and whether it fits), end adds the nodes' offloaded states once every
 * stage is walked. */
px_status px_compile_memory_begin(px_plan *p, px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err);
px_status px_compile_memory_stage(px_plan *p, int64_t stage, const px_block_mem bm[PX_BLOCK_KIND_COUNT], px_err *err);
void px_compile_memory_end(px_plan *p);

#endif
