/* Test helpers for the suites that link the planner: a plan of a preset
 * cluster. */
#ifndef PX_TESTS_TESTPLAN_H
#define PX_TESTS_TESTPLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/plan.h"

/* p's plan of model m on preset `cluster`'s first `gpus` GPUs (p's defaults
 * resolved first); says why on stderr when it refuses. */
px_status px_test_compile(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                          px_err *err);
/* px_test_compile on a cluster running cuDNN release cudnn_version (gpu.cudnn_version; 0: the newest measured). */
px_status px_test_compile_cudnn(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                                int64_t cudnn_version, px_err *err);

/* The cuDNN release (cudnn.backend_version()'s form) a NeMo Framework container ships, by the release name the
 * performance tables give (tests/data/nemo_cudnn.csv; a point release, 26.02.01, its release's); 0 where the table
 * has none. */
int64_t px_test_release_cudnn(const char *release);

/* Megatron-Bridge's model FLOPs per token (flop_utils.py, transformer_flops; Megatron-LM's
 * num_floating_point_operations, megatron/training/training.py at 79e8592, alike; tests/data/megatron_bridge_h100.csv's
 * header): 6 x the GEMM weights a token passes through (MLA's low-rank projections, a MoE layer's top-k routed and
 * shared experts, not the router), the head over the vocabulary padded to a multiple of 128 x tp, causal attention
 * as half the square (half) or, as NeMo 24.07 counted it, the whole square, and mtp multi-token prediction modules
 * (each a layer of the last layer's kind, its projection and the head again). The publishers' formula, kept apart
 * from parallax's own count (px_model_flops_per_token: exact weights with the router's, the vocabulary unpadded,
 * the whole square, windows): a test oracle for the tables' TFLOP/s columns; the layer rule is the library's
 * (px_model_layer_is_moe, px_model_shared_ffn). */
double px_test_nemo_flops_per_token(const px_model *m, int64_t seq, int64_t tp, bool half, int64_t mtp);

/* Megatron's pipeline split that counts the embedding and the loss as a
 * layer each (account_for_embedding_in_pipeline_split and ..._loss_...):
 * where the layers do not fill pp x vp chunks evenly but two more would, the
 * first and the last chunk one layer short, written into p's chunk list. */
void px_test_megatron_split(const px_model *m, int64_t pp, int64_t vp, px_parallel *p);

/* A published run's CUDA-graph word as the plan's choice, by px_cuda_graph_names (none, layers, full: the
 * validation CSVs' cuda_graph columns); -1 for a word the plan has no choice for. */
int px_test_cuda_graph(const char *word);

/* A published run's precision word as the plan's (the validation CSVs' precision columns): bf16, fp8-cs (fp8 with
 * current scaling), mxfp8, nvfp4, set in p; false for another word. */
bool px_test_precision(const char *word, px_parallel *p);

#endif
