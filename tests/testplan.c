/* Test helpers for the suites that link the planner. */
#include "tests/testplan.h"

#include <stdio.h>
#include <string.h>

#include "tests/testutil.h"

px_status px_test_compile(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                          px_err *err) {
  return px_test_compile_cudnn(plan, m, cluster, gpus, p, 0, err);
}

px_status px_test_compile_cudnn(px_plan *plan, const px_model *m, const char *cluster, int64_t gpus, px_parallel *p,
                                int64_t cudnn_version, px_err *err) {
  px_cluster c;
  px_status st = px_cluster_load(cluster, &c, err);
  if (!st) c.gpu.cudnn_version = cudnn_version;
  if (!st) st = px_cluster_set_size(&c, gpus, 0, err);
  if (!st) {
    px_parallel_resolve(p, m, &c);
    st = px_plan_compile(plan, m, &c, p, err);
  }
  if (st) fprintf(stderr, "\n  %s\n", err->msg);
  return st;
}

double px_test_nemo_flops_per_token(const px_model *m, int64_t seq, int64_t tp, bool half, int64_t mtp) {
  double h = (double)m->hidden, s = half ? (double)seq / 2 : (double)seq, attn;
  int64_t mult = 128 * tp, vocab = (m->vocab + mult - 1) / mult * mult;
  if (m->kv_lora_rank > 0) { /* MLA: the low-rank projections with their norms' +1, the decoupled RoPE key, the output */
    double nh = (double)m->heads, qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim), v = (double)m->v_head_dim;
    double q = m->q_lora_rank > 0 ? (double)m->q_lora_rank * (h + nh * qk + 1) : h * nh * qk;
    attn = q + (double)m->kv_lora_rank * (h + nh * ((double)m->qk_nope_head_dim + v) + 1) +
           h * (double)m->qk_rope_head_dim + nh * v * h + s * nh * (qk + v);
  } else {
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    attn = h * (q + 2 * kv) + q * h + 2.0 * q * s;
  }
  /* each layer's MLP GEMMs (x 3/2 for a gated unit): a dense layer's, or a MoE layer's top-k routed experts and
   * shared experts (the router's GEMM not counted); the MTP modules' layers are of the last layer's kind */
  double g = m->mlp == PX_MLP_SWIGLU ? 3.0 : 2.0, mlp = 0;
  for (int64_t l = 0; l < m->layers + mtp; l++) {
    bool moe = px_model_layer_is_moe(m, l < m->layers ? l : m->layers - 1);
    mlp += g * h *
           (moe ? (double)(m->moe_ffn_hidden * m->experts_per_token + px_model_shared_ffn(m)) : (double)m->ffn_hidden);
  }
  /* an MTP module's two norms and its 2h -> h projection, and its pass through the head */
  double mtp_proj = (double)mtp * (3 * h + 2 * h * h);
  return 6.0 * ((double)(m->layers + mtp) * attn + mlp + mtp_proj + h * (double)vocab * (double)(mtp + 1));
}

void px_test_megatron_split(const px_model *m, int64_t pp, int64_t vp, px_parallel *p) {
  int64_t chunks = pp * vp;
  if (chunks > PX_MAX_CHUNK_LIST || m->layers % chunks == 0 || (m->layers + 2) % chunks) return;
  p->nchunk_layers = (int32_t)chunks;
  for (int64_t c = 0; c < chunks; c++)
    p->chunk_layers[c] = (uint16_t)((m->layers + 2) / chunks - (c == 0 || c == chunks - 1));
}

int px_test_cuda_graph(const char *word) {
  for (int g = 0; g < PX_GRAPH_COUNT; g++)
    if (!strcmp(word, px_cuda_graph_names[g])) return g;
  return -1;
}

bool px_test_precision(const char *word, px_parallel *p) {
  if (!strcmp(word, "fp8-cs")) {
    p->precision = PX_PREC_FP8, p->fp8_recipe = PX_FP8_CURRENT;
    return true;
  }
  static const struct {
    const char *word;
    px_precision prec;
  } plain[] = {{"bf16", PX_PREC_BF16}, {"mxfp8", PX_PREC_MXFP8}, {"nvfp4", PX_PREC_NVFP4}};
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
    if (!strcmp(word, plain[i].word)) {
      p->precision = plain[i].prec;
      return true;
    }
  return false;
}

int64_t px_test_release_cudnn(const char *release) {
  char base[16], line[256], name[16];
  snprintf(base, sizeof base, "%s", release);
  char *dot = strchr(base, '.');
  if (dot && (dot = strchr(dot + 1, '.'))) *dot = '\0'; /* 26.02.01: 26.02's container stack */
  FILE *fp = fopen(px_test_path("tests/data/nemo_cudnn.csv"), "r");
  if (!fp) return 0;
  long long version = 0, v;
  while (fgets(line, sizeof line, fp))
    if (line[0] != '#' && sscanf(line, "%15[^,],%lld", name, &v) == 2 && !strcmp(name, base)) version = v;
  fclose(fp);
  return version;
}
