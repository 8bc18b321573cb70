/* Model specification: the transformer's shape, its exact parameter count
 * and FLOPs per token. Loads our JSON schema and Hugging Face config.json. */
#ifndef PX_PLAN_MODEL_H
#define PX_PLAN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "core/status.h"

typedef enum { PX_NORM_LAYERNORM, PX_NORM_RMSNORM, PX_NORM_COUNT } px_norm;
typedef enum { PX_MLP_GELU, PX_MLP_SWIGLU, PX_MLP_COUNT } px_mlp;
typedef enum { PX_POS_LEARNED, PX_POS_ROPE, PX_POS_COUNT } px_pos;
/* Mixture-of-experts router: softmax over the experts then top-k (Mixtral,
 * Qwen-MoE; norm_topk_prob renormalises the k weights), or sigmoid scores
 * with a per-expert bias used only for the choice (DeepSeek-V3). */
typedef enum { PX_ROUTER_SOFTMAX, PX_ROUTER_SIGMOID, PX_ROUTER_COUNT } px_router;
/* Token dropping at a capacity factor: the choices an expert over its
 * capacity keeps, those of the highest gates or of the earliest tokens
 * (Megatron-Core's --moe-token-drop-policy probs | position). */
typedef enum { PX_DROP_PROBS, PX_DROP_POSITION, PX_DROP_COUNT } px_drop_policy;

extern const char *const px_norm_names[PX_NORM_COUNT];
extern const char *const px_mlp_names[PX_MLP_COUNT];
extern const char *const px_pos_names[PX_POS_COUNT];
extern const char *const px_router_names[PX_ROUTER_COUNT];
extern const char *const px_drop_policy_names[PX_DROP_COUNT];

/* The longest sequence a Hugging Face config's max_position_embeddings is
 * taken as the training length (seq_from_positions): 16K tokens. Above it
 * (Qwen2.5's 131,072, DeepSeek-V3's 163,840: the context the model was
 * extended to, not a pretraining length) `seq` must be given. */
#define PX_MODEL_HF_SEQ_MAX 16384

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
  bool seq_from_positions; /* seq_len is a Hugging Face config's max_position_embeddings (n_positions): the longest
                              the model may see, not a length anybody chose to train at (px_parallel_resolve) */
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
  /* YaRN's concentration ("attention") factor on RoPE's cos and sin, 1 without (0.1 ln(factor) + 1 for a YaRN
   * factor > 1 where the config gives no mscale, as Hugging Face and Megatron-Core compute it). It costs nothing in
   * the product, but Transformer Engine's fused RoPE has no such factor, so Megatron-Core rotates q and k with its
   * unfused PyTorch RoPE where it is not 1 (plan/graph.c, px_op_rope_unfused_chain); the executors apply it */
  double rope_concentration;
  /* YaRN's frequency scaling (Hugging Face's rope_scaling "yarn"; factor 0: none): what `export` writes so the
   * framework runs the same RoPE and the executors rotate by (kernels/math.h, px_rope_inv_freq); it costs nothing
   * the simulator prices */
  struct {
    double factor;              /* the context's scaling factor, 0 none */
    int64_t original_positions; /* the context the frequencies were trained at */
    double beta_fast, beta_slow; /* the ramp's ends, in rotations (32 and 1 by default) */
    bool truncate;              /* the ramp's ends rounded to whole dimensions (Hugging Face's default) */
    double mscale_all_dim;      /* latent attention's softmax scale: times mscale(factor, this)^2 (0: none) */
  } rope_yarn;
  /* Llama 3.1's frequency scaling (Hugging Face's rope_scaling "llama3"; factor 0: none): the pairs whose wavelength
   * exceeds original_positions / low_freq_factor turn factor times slower, those under original_positions /
   * high_freq_factor as theta says, those between on a smooth blend; the executors rotate by it, `export` writes it,
   * the simulator prices nothing of it */
  struct {
    double factor;                            /* 0 none */
    double low_freq_factor, high_freq_factor; /* 1 and 4 in Llama 3.1 to 3.3 */
    int64_t original_positions;               /* the context the frequencies were trained at: 8192 */
  } rope_llama3;
  /* Linear position interpolation (Chen et al. 2023; Hugging Face's rope_scaling "linear"): every frequency over
   * this factor; 0 none. The executors rotate by it, `export` writes it, the simulator prices nothing of it */
  double rope_linear_factor;
  /* The share of each head's dims RoPE rotates, the leading head_dim x this (GPT-NeoX's rotary_pct, Hugging Face's
   * partial_rotary_factor), the rest passed through; 1 the whole head. The executors rotate so; the simulator prices
   * the whole head's RoPE bytes, as Megatron-Core's RoPE reads and writes it (the passed part concatenated back) */
  double rope_fraction;
  /* Mixture of experts (experts 0: a dense model). A MoE layer's MLP is a
   * router, experts_per_token of `experts` routed SwiGLU/GELU experts of
   * moe_ffn_hidden each, and shared experts every token passes through. */
  int64_t experts;            /* routed experts per MoE layer */
  int64_t experts_per_token;  /* top-k */
  int64_t moe_ffn_hidden;     /* one routed expert's inner width */
  int64_t shared_experts;     /* always-active experts (DeepSeek, Qwen2-MoE); 0 none */
  int64_t shared_ffn_hidden;  /* their total inner width (0: shared_experts x moe_ffn_hidden, DeepSeek); set, it is
                              * one shared expert of that width with a sigmoid gate of `hidden` weights (Qwen2-MoE) */
  int64_t first_dense_layers; /* the first k layers are dense with ffn_hidden (DeepSeek's first_k_dense_replace) */
  int64_t moe_layer_freq;     /* after those, every n-th layer is MoE (Qwen2-MoE's decoder_sparse_step); 1: all */
  px_router router;
  bool norm_topk_prob;        /* softmax router: renormalise the top-k weights to sum to 1 */
  double capacity_factor;     /* tokens an expert takes, over the even share; 0: dropless */
  px_drop_policy token_drop_policy; /* with a capacity factor: which choices an expert over capacity keeps */
  double aux_loss_coef;       /* load-balancing loss weight (0: none, e.g. DeepSeek-V3's bias balancing) */
  int64_t expert_groups;      /* group-limited routing (DeepSeek's n_group): the experts in this many groups, */
  int64_t groups_per_token;   /* and a token's experts from at most this many of them (topk_group); 0: none */
  /* Multi-head latent attention (DeepSeek-V2/V3; kv_lora_rank 0: standard attention) */
  int64_t q_lora_rank;        /* 0: a full-rank query projection */
  int64_t kv_lora_rank;
  int64_t qk_rope_head_dim, qk_nope_head_dim, v_head_dim;
  int64_t mtp_layers;         /* multi-token prediction modules (DeepSeek-V3), counted apart, not trained by default */
  /* Sliding-window attention: a windowed layer's queries attend to the sliding_window tokens up to and including
   * their own (0: no window). Which layers: after the first_full_layers, every window_layer_freq-th one from the
   * first (1: all of them, as Mistral; 2: 0, 2, 4, ... as gpt-oss; Qwen2's max_window_layers is
   * first_full_layers with 1) */
  int64_t sliding_window;
  int64_t window_layer_freq;
  int64_t first_full_layers;
  bool attention_sinks;       /* a learned per-head sink logit in the softmax (gpt-oss) */
  bool qk_norm;               /* an RMSNorm of each head's q and k before RoPE, its head_dim weights shared by the
                               * heads (Qwen3, OLMo 2's per-head variant; Megatron's qk_layernorm) */
} px_model;

/* Parameter counts, exact. */
typedef struct {
  uint64_t embedding; /* token embedding table */
  uint64_t position;  /* learned position table (0 with RoPE) */
  uint64_t attention; /* per layer: Q, K, V, output projections and their biases (gpt-oss's sinks, Qwen3's q/k norms) */
  uint64_t mlp;       /* per layer */
  uint64_t norms;     /* per layer: the two norms */
  uint64_t per_layer; /* attention + mlp + norms */
  uint64_t final_norm;
  uint64_t lm_head;   /* 0 when tied to the embedding */
  uint64_t total;
  /* Mixture of experts (0 for a dense model): per MoE layer */
  int64_t moe_layers;   /* layers with experts (the rest are dense: per_layer above is a dense layer's) */
  uint64_t expert;      /* one routed expert */
  uint64_t router;      /* the router's weights (and a bias per expert: gpt-oss's, DeepSeek-V3's correction bias) */
  uint64_t shared;      /* the shared experts */
  uint64_t moe_layer;   /* a whole MoE layer: attention + norms + router + experts x expert + shared */
  uint64_t active;      /* parameters a token passes through: total less the routed experts it does not use */
  uint64_t mtp;         /* multi-token prediction modules, not in total */
} px_model_params;

/* FLOPs per token of a training step (forward + backward = 3x forward), Megatron's accounting: forward =
 * 2 x the matmul weights a token passes through (attention; the dense MLP, or in a MoE layer the router,
 * experts_per_token routed experts and the shared experts; the LM head, even when tied; not the embedding
 * lookup, biases, norms or the MTP modules) + the attention's quadratic term per layer: 2 x keys x heads x
 * (q/k head width + v head width), keys = seq, or min(seq, sliding_window) on a sliding-window layer (MLA:
 * q/k width qk_nope_head_dim + qk_rope_head_dim, v width v_head_dim). No causal halving, as Megatron. */
typedef struct {
  double forward_dense_flops;     /* 2 x matmul parameters (embedding lookups excluded) */
  double forward_attention_flops; /* the quadratic term: QK^T and attention x V, 4*s*heads*head_dim per layer (dense) */
  double forward_flops;           /* dense + attention */
  double train_flops;             /* 3x forward: Megatron's model FLOPs per token */
  double train_flops_no_attention; /* 6 x matmul parameters (the "6N" rule) */
  double forward_mtp_flops;  /* the MTP modules' forward, in none of the above: each module's projection (2h -> h),
                                its layer (the decoder's kind at its index) and the shared head again */
} px_model_flops;

/* Fills m with defaults for unset fields: kv_heads=heads, head_dim=hidden/heads, ... */
void px_model_init(px_model *m);
/* Checks consistency (heads divide hidden, kv_heads divide heads, ...). file names the source. */
px_status px_model_validate(const px_model *m, const char *file, px_err *err);
/* YaRN's mscale of a scaling factor s: 0.1 m ln s + 1 above 1, else 1 (Hugging Face's get_mscale,
 * transformers/modeling_rope_utils.py; Megatron-Core's _yarn_get_mscale, yarn_rotary_pos_embedding.py at d98e8a6):
 * the concentration is its ratio at mscale and at mscale_all_dim. */
double px_model_yarn_mscale(double s, double m);
/* The attention softmax's scale over 1 / sqrt(the query head dim): DeepSeek's latent attention with YaRN multiplies
 * it by mscale(factor, mscale_all_dim)^2 (Hugging Face's DeepseekV3Attention, Megatron-Core's MultiLatentAttention:
 * 1.874 for DeepSeek-V3), every other attention by 1. */
double px_model_softmax_scale_factor(const px_model *m);
/* The leading dims of a head RoPE rotates: head_dim x rope_fraction, rounded down as Hugging Face does. */
int64_t px_model_rope_dims(const px_model *m);

/* Loads our schema or a Hugging Face config.json (detected by "model_type"). */
px_status px_model_from_json(const cJSON *root, const char *file, px_model *m, px_err *err);
/* The largest model file loaded: 1 MiB. A Hugging Face config.json is a few
 * KB, ours under 1 KB. */
#define PX_MODEL_FILE_MAX_BYTES ((size_t)1 << 20)
px_status px_model_load_file(const char *path, px_model *m, px_err *err);
/* A preset name (models/NAME.json under the data directory) or a file path. */
px_status px_model_load(const char *name_or_path, px_model *m, px_err *err);
/* Our schema, as written by px_model_to_json. */
cJSON *px_model_to_json(const px_model *m);

/* Exact counts. Total: embedding, learned positions, the dense layers (per_layer) and the MoE layers
 * (moe_layer), final norm, untied LM head; not the MTP modules (mtp). Active: total less the
 * experts - experts_per_token routed experts a token skips in each MoE layer (embedding included). */
void px_model_count_params(const px_model *m, px_model_params *p);
uint64_t px_model_param_count(const px_model *m);
/* The shared experts' total inner width: shared_ffn_hidden (one gated shared
 * expert, Qwen2-MoE), else shared_experts x moe_ffn_hidden; 0 without. */
int64_t px_model_shared_ffn(const px_model *m);
/* The choices one expert takes of a rank's `routed` (its tokens x top-k)
 * with capacity factor cf: ceil(routed / experts x cf), Megatron-Core's
 * get_capacity (moe_utils.py) over the tokens the rank routes. */
int64_t px_moe_capacity(double cf, int64_t routed, int64_t experts);
/* Whether layer l (0-based) is a mixture-of-experts layer: after the
 * first_dense_layers, every moe_layer_freq-th one (all when it is 1). */
bool px_model_layer_is_moe(const px_model *m, int64_t l);
/* Whether the MoE layers' router and experts carry linear biases (the model's `bias` with experts: gpt-oss): a logit's
 * for the router, each expert's fc1 and fc2 outputs'. */
bool px_model_moe_biases(const px_model *m);
/* Whether layer l (0-based) attends within sliding_window: after the first_full_layers, every
 * window_layer_freq-th layer from the first. */
bool px_model_layer_is_sliding(const px_model *m, int64_t l);
/* Which layers have the sliding window, in words: "window 4096 on every layer", "window 128 on layers 0, 2, 4,
 * ..." (the first three); "" without one. */
void px_model_window_desc(const px_model *m, char *buf, size_t cap);
/* Query-key pairs a causal attention over seq tokens computes, each query
 * attending to itself and the window - 1 tokens before it (window <= 0 or
 * >= seq: all before it): sum over i < seq of min(i + 1, window), that is
 * seq (seq + 1) / 2 without a window and w (w + 1) / 2 + (seq - w) w with one. */
double px_attention_pairs(int64_t seq, int64_t window);
/* The attended pairs of a sliding-window layer at seq over the causal pairs
 * seq (seq + 1) / 2 (window <= 0: 1). */
double px_attention_window_fraction(int64_t seq, int64_t window);
/* Per-token FLOPs at sequence length seq (the model's own when seq <= 0). */
void px_model_flops_per_token(const px_model *m, int64_t seq, px_model_flops *f);

#endif
