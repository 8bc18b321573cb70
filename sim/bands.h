/* How far to trust a prediction: the error band the validation tests found
 * on published runs of the GPU family, precision, kind of model (dense or
 * mixture of experts) and launch (the host issuing the step's kernels, or one
 * full-step CUDA graph) a plan runs on. One table holds them,
 * $PARALLAX_HOME/topologies/validation_bands.tsv, written by `make docs` from
 * the validation suites' own rows (tests/validation/, PX_VALIDATION_BANDS) and
 * checked against them by tests/cli/docs.sh, so a band never disagrees with
 * the tests. An error is the simulated throughput over the published one,
 * less 1: above 0, the simulator was optimistic. */
#ifndef PX_SIM_BANDS_H
#define PX_SIM_BANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"
#include "plan/plan.h"

/* What a band is for: the GPU family (the cluster's GPU name up to its first
 * '-': H100, B200, GB200, A100), the precision (px_precision_names), whether
 * the model has experts and whether a full-step CUDA graph launches the step
 * (`cuda_graph` full: nothing waits for the host; otherwise the host issues
 * the kernels, per-layer or router graphs included: eager). */
typedef struct {
  char family[24];
  char precision[8];
  bool moe;
  bool graphed;
} px_band_key;

/* A key's kind and launch as the table and the JSON write them ("moe" or "dense"; "eager" or "graph"), in words
 * ("MoE", "dense"; "eager", "full-step graph"), and read back (false: neither name). */
const char *px_band_kind_name(bool moe);
const char *px_band_kind_words(bool moe);
const char *px_band_launch_name(bool graphed);
const char *px_band_launch_words(bool graphed);
bool px_band_kind_parse(const char *s, bool *moe);
bool px_band_launch_parse(const char *s, bool *graphed);

/* One row of the table: the runs' errors' least, largest and mean (as
 * fractions), how many, and the validations they come from. */
typedef struct {
  px_band_key key;
  int runs;
  double min, max, mean;
  char sources[256];
} px_band;

typedef struct {
  px_band *v;
  int n, cap;
} px_bands;

/* The key of a plan on a cluster: its GPU family, precision, kind of model and launch. */
void px_band_key_of(const px_model *m, const px_cluster *c, const px_parallel *p, px_band_key *k);

/* Reads the table at path (NULL: $PARALLAX_HOME/topologies/validation_bands.tsv).
 * Errors name the file and line (a missing file: PX_ERR_INPUT). */
px_status px_bands_load(const char *path, px_bands *b, px_err *err);
/* The band of k, or NULL when no published run validates it. */
const px_band *px_bands_find(const px_bands *b, const px_band_key *k);
/* The band in words: "H100 fp8 dense, eager: published runs -2.0..+16.3% (22 runs)",
 * or "no published run validates B200 fp8 MoE, eager", followed where the
 * family has other bands of that kind by them ("; H100 bf16 dense, eager: ..."). */
void px_band_describe(const px_bands *b, const px_band_key *k, char *buf, size_t cap);

/* The validation tests' side: one run's error under key k from a validation
 * named source (added to the band's sources once), and the table sorted (by
 * family, precision, kind and launch) and written as px_bands_load reads it. */
px_status px_bands_add(px_bands *b, const px_band_key *k, double err_frac, const char *source, px_err *err);
void px_bands_write(px_bands *b, FILE *fp);
void px_bands_free(px_bands *b);

#endif
