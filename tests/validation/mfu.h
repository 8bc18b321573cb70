/* Issue #34's check of the sweep against published MFU: the published runs'
 * MFU, counted as parallax counts it (model FLOPs over the bf16 dense peak,
 * px_sim_mfu_of), gathered per GPU family and precision class as the
 * validation suites run their rows, and a sweep's best plan at a published
 * run's model, GPU count and global batch put against that range. */
#ifndef PX_TESTS_VALIDATION_MFU_H
#define PX_TESTS_VALIDATION_MFU_H

#include <stdint.h>
#include <stdio.h>

#include "plan/plan.h"

/* One published run: its plan, the simulated MFU of that plan and the
 * validation's error (simulated rate over the published one, less 1), so the
 * published MFU is sim_mfu / (1 + err_frac), under parallax's FLOP count.
 * run names it in the table ("Korthikanti et al. 2022"). */
void px_test_mfu_add(const px_plan *plan, double sim_mfu, double err_frac, const char *run);

/* The best plan of a sweep of model on gpus GPUs of cluster at global batch gbs
 * and sequence seq (0: the model's), precision and attention kernel fixed (the
 * published runs': a sweep searches neither): its MFU, and that MFU
 * over 1 + the simulator's mean error on the published runs of the family and
 * precision class (what the plan would reach were the simulator as far off
 * as it is on them), printed against their published range (above, inside,
 * below) and the latter asserted within that range widened by margin_frac.
 * A family without published runs is printed as such, nothing asserted.
 * Its row goes into md too (NULL: none). Under ASan only sweeps of up to 8
 * GPUs run (those of hundreds take half a minute there). */
void px_test_mfu_sweep(const char *model, const char *cluster, int64_t gpus, int64_t gbs, int64_t seq,
                       px_precision prec, px_attention attention, double margin_frac, FILE *md);

/* The table's head, printed before the first sweep (on stderr, and into md
 * as a markdown table's where md is not NULL: the sweeps' rows follow). */
void px_test_mfu_head(FILE *md);

#endif
