/* Model specification: the transformer's shape, its exact parameter count
 * and FLOPs per token. Loads our JSON schema and Hugging Face config.json. */
#ifndef PX_PLAN_MODEL_H
#define PX_PLAN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"

typedef enum { PX_NORM_LAYERNORM, PX_NORM_RMSNORM, PX_NORM_COUNT } px_norm;
typedef enum { PX_MLP_GELU, PX_MLP_SWIGLU, PX_MLP_COUNT } px_mlp;
typedef enum { PX_POS_LEARNED, PX_POS_ROPE, PX_POS_COUNT } px_pos;

extern const char *const px_norm_names[PX_NORM_COUNT];
extern const char *const px_mlp_names[PX_MLP_COUNT];
extern const char *const px_pos_names[PX_POS_COUNT];

typedef struct {
  char name[64];
  char source[512];
  int64_t layers;
  int64_t hidden;        /* d_model */
  int64_t heads;         /* query heads */
  int64_t kv_heads;      /* key/value heads (GQA when < heads) */
  int64_t head_dim;      /* hidden / heads unless the model says otherwise */
  int64_t ffn_hidden;    /* MLP inner width (per branch for SwiGLU) */
  int64_t vocab;
  int64_t seq_len;       /* training sequence length */
  int64_t max_positions; /* rows of the learned position table */
  px_norm norm;
  px_mlp mlp;
  px_pos position;
  bool tied_embeddings;
  bool qkv_bias;          /* biases on the Q, K, V projections */
  bool bias;              /* biases on every linear layer (GPT-2, GPT-NeoX) */
  bool parallel_residual; /* attention and MLP read the same input (GPT-NeoX, GPT-J) */
  double dropout;         /* attention and hidden dropout probability */
  double norm_eps;
  double rope_theta;
} px_model;

/* Parameter counts, exact. */
typedef struct {
  uint64_t embedding; /* token embedding table */
  uint64_t position;  /* learned position table (0 with RoPE) */
  uint64_t attention; /* per layer: Q, K, V, output projections and their biases */
  uint64_t mlp;       /* per layer */
  uint64_t norms;     /* per layer: the two norms */
  uint64_t per_layer; /* attention + mlp + norms */
  uint64_t final_norm;
  uint64_t lm_head;   /* 0 when tied to the embedding */
  uint64_t total;
} px_model_params;

/* FLOPs per token of a training step (forward + backward = 3x forward). */
typedef struct {
  double forward_dense_flops;     /* 2 x matmul parameters (embedding lookups excluded) */
  double forward_attention_flops; /* the quadratic term: QK^T and attention x V, 4*s*heads*head_dim per layer */
  double forward_flops;           /* dense + attention */
  double train_flops;             /* 3x forward: Megatron's model FLOPs per token */
  double train_flops_no_attention; /* 6 x matmul parameters (the "6N" rule) */
} px_model_flops;

/* Fills m with defaults for unset fields: kv_heads=heads, head_dim=hidden/heads, ... */
void px_model_init(px_model *m);
/* Checks consistency (heads divide hidden, kv_heads divide heads, ...). file names the source. */
px_status px_model_validate(const px_model *m, const char *file, px_err *err);

/* Loads our schema or a Hugging Face config.json (detected by "model_type"). */
px_status px_model_from_json(const cJSON *root, const char *file, px_model *m, px_err *err);
px_status px_model_load_file(const char *path, px_model *m, px_err *err);
/* A preset name (models/NAME.json under the data directory) or a file path. */
px_status px_model_load(const char *name_or_path, px_model *m, px_err *err);
/* Our schema, as written by px_model_to_json. */
cJSON *px_model_to_json(const px_model *m);

void px_model_count_params(const px_model *m, px_model_params *p);
uint64_t px_model_param_count(const px_model *m);
/* Per-token FLOPs at sequence length seq (the model's own when seq <= 0). */
void px_model_flops_per_token(const px_model *m, int64_t seq, px_model_flops *f);

#endif
