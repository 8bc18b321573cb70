/* A cluster for people and tools: `parallax topology show`, the rows of
 * `parallax topologies`, and the summary line of a calibrated cluster file. */
#ifndef PX_REPORT_CLUSTER_H
#define PX_REPORT_CLUSTER_H

#include <stdio.h>

#include <cJSON.h>

#include "plan/cluster.h"

void px_report_cluster_text(const px_cluster *c, FILE *out);
/* `topology show --sources`: every figure of the cluster file (as its JSON
 * has it), its value and its source (the field's, or its object's); the
 * figures with none are marked and counted. Returns how many have none. */
int px_report_cluster_sources(const px_cluster *c, FILE *out);
/* `parallax topologies`: the header, then one row per preset. */
void px_report_cluster_list_header(FILE *out);
void px_report_cluster_list_row(const char *name, const px_cluster *c, FILE *out);
/* --json: the cluster's JSON with "preset". */
cJSON *px_report_cluster_list_json(const char *name, const px_cluster *c);
/* The measured figures a cluster file holds: its collective curves (per link class and
 * collective: points, sizes, ranks and nodes, the largest busbw) and its GEMM table,
 * then "-> PATH" when path is given (calibrate --import), also in topology show. */
void px_report_cluster_measured(const px_cluster *c, const char *path, FILE *out);
/* "calibrated: fp32 GEMM peak ..., all-reduce ... -> PATH": what `parallax calibrate` measured. */
void px_report_calibrated_text(const px_cluster *c, const char *path, FILE *out);
/* What `parallax calibrate --backend cuda` measured: the GEMM table (TFLOP/s
 * and share of the peak), the attention curves, the copy bandwidth and the
 * sustained share with its figures, then "calibrated: GPU ... -> PATH". */
void px_report_calibrated_gpu_text(const px_cluster *c, const char *path, FILE *out);

#endif
