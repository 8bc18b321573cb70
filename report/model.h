/* A model for people and tools: `parallax model show` (parameters with the
 * per-layer breakdown, FLOPs per token) and the rows of `parallax models`. */
#ifndef PX_REPORT_MODEL_H
#define PX_REPORT_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "plan/model.h"

void px_report_model_text(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq,
                          FILE *out);
cJSON *px_report_model_json(const px_model *m, const px_model_params *p, const px_model_flops *f, int64_t seq);
/* Where a sequence length of seq came from when it is a Hugging Face config's
 * max_position_embeddings (m->seq_from_positions): a line, none otherwise. */
void px_report_seq_from_text(const px_model *m, int64_t seq, FILE *out);
/* `parallax models`: the header, then one row per preset (name: the preset's). */
void px_report_model_list_header(FILE *out);
void px_report_model_list_row(const char *name, const px_model *m, const px_model_params *p, FILE *out);
/* --json: the model's JSON with "preset" and "params". */
cJSON *px_report_model_list_json(const char *name, const px_model *m, const px_model_params *p);

#endif
