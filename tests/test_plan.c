/* Plan compiler: model states against the ZeRO formulas (and hybrid sharding), activations
 * against Korthikanti et al., FLOPs against Megatron-LM, pipeline p2p
 * matching and deadlock freedom, lifetimes, layer splits, the rank grid,
 * and refusals of impossible plans. Formulas: tests/data/memory_formulas.md. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "plan/check.h"
#include "plan/lora.h"
#include "plan/plan.h"
#include "plan/runnable.h"
#include "tests/testutil.h"

static px_cluster cluster(const char *name, int64_t gpus) {
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_load(name, &c, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&c, gpus, 0, &err), PX_OK);
  return c;
}

/* The model preset `name`. */
static px_model preset_model(const char *name) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(name, &m, &err), PX_OK);
  return m;
}

/* A GPT model of Megatron's shape (V divisible by every tp used). */
static px_model gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq, double dropout) {
  px_model m;
  px_model_init(&m);
  snprintf(m.name, sizeof m.name, "gpt-test");
  m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = heads, m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden, m.vocab = 51200, m.seq_len = seq, m.max_positions = seq;
  m.bias = m.qkv_bias = true, m.tied_embeddings = true, m.dropout = dropout;
  return m;
}

static px_parallel par(int64_t tp, int64_t pp, int64_t dp, int zero, int64_t mbs, int64_t gbs) {
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = tp, p.pp = pp, p.dp = dp, p.zero = zero, p.mbs = mbs, p.gbs = gbs;
  return p;
}

static px_status compile(px_plan *plan, const px_model *m, px_cluster *c, px_parallel *p, px_err *err) {
  px_parallel_resolve(p, m, c);
  return px_plan_compile(plan, m, c, p, err);
}

/* ---- cross-stream dependencies ---- */

static bool shares(const px_op *a, const px_op *b) {
  for (int i = 0; i < PX_OP_INS + PX_OP_OUTS; i++) {
    px_ref r = i < PX_OP_INS ? a->in[i] : a->out[i - PX_OP_INS];
    for (int j = 0; r.slot >= 0 && j < PX_OP_INS + PX_OP_OUTS; j++) {
      px_ref q = j < PX_OP_INS ? b->in[j] : b->out[j - PX_OP_INS];
      if (q.slot == r.slot && q.layer_off == r.layer_off) return true;
    }
  }
  return false;
}

/* Every compute op's dep is the latest earlier TP collective it shares a
 * tensor with; in the backward a linear's TP reduction sits between its
 * data-gradient and weight-gradient GEMMs (Megatron's overlap order). */
static void test_tp_deps(void) {
  px_model m = gpt(2, 1024, 16, 512, 0.1);
  px_cluster c = cluster("dgx-h100", 8);
  for (int sp = 0; sp < 2; sp++) {
    px_parallel p = par(4, 1, 2, 0, 1, 4);
    p.sp = sp;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    int between = 0, waits = 0;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
      const px_block *b = &plan.blocks[k];
      for (int32_t i = 0; i < b->nops; i++) {
        const px_op *o = &b->ops[i];
        int want = -1;
        for (int32_t j = i - 1; j >= 0 && want < 0 && o->stream == PX_STREAM_COMPUTE; j--)
          if (b->ops[j].stream == PX_STREAM_TP && shares(o, &b->ops[j])) want = j;
        CU_ASSERT_EQUAL(o->dep, want);
        waits += want >= 0;
        bool reduce = o->kind == PX_OP_ALLREDUCE || o->kind == PX_OP_REDUCE_SCATTER;
        if (o->phase == PX_PHASE_BWD && reduce && i > 0 && i + 1 < b->nops) {
          between += b->ops[i - 1].kind == PX_OP_LINEAR_BWD_DATA && b->ops[i + 1].kind == PX_OP_LINEAR_BWD_WEIGHT &&
                     b->ops[i + 1].dep != i;
        }
      }
    }
    /* the fc1 and qkv backwards of a layer, and the head's */
    CU_ASSERT_EQUAL(between, 3);
    CU_ASSERT(waits >= 6);
    px_plan_free(&plan);
  }
}

/* ---- GELU in the GEMM epilogues ---- */

static double block_bytes(const px_block *b, int *gelu_ops) {
  double bytes = 0;
  for (int32_t i = 0; i < b->nops; i++) {
    bytes += b->ops[i].bytes;
    *gelu_ops += b->ops[i].kind == PX_OP_GELU || b->ops[i].kind == PX_OP_GELU_BWD;
  }
  return bytes;
}

/* Fused GELU drops the GELU ops and saves one pass over the (B, S, F/tp)
 * tensor forward (the read of the pre-activation) and two backward (the
 * write and read of the activation's gradient); the activations kept and
 * the FLOPs are those of the separate plan. */
static void test_gelu_fused(void) {
  px_model m = gpt(2, 1024, 16, 512, 0.1);
  px_cluster c = cluster("dgx-h100", 2);
  double fwd[2], bwd[2], act[2], flops[2];
  int ops[2] = {0, 0};
  for (int g = 0; g < 2; g++) {
    px_parallel p = par(2, 1, 1, 0, 2, 2);
    p.gelu = g ? PX_GELU_FUSED : PX_GELU_SEPARATE;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    fwd[g] = block_bytes(&plan.blocks[PX_BLOCK_LAYER_FWD], &ops[g]);
    bwd[g] = block_bytes(&plan.blocks[PX_BLOCK_LAYER_BWD], &ops[g]);
    act[g] = (double)px_plan_layer_activation_bytes(&plan);
    flops[g] = plan.hw_flops_per_step;
    px_plan_free(&plan);
  }
  double pass = 2.0 * 512 * (4 * 1024 / 2) * 2; /* B S F/tp elements of bf16 */
  CU_ASSERT_EQUAL(ops[0], 2);
  CU_ASSERT_EQUAL(ops[1], 0);
  CU_ASSERT_DOUBLE_EQUAL(fwd[0] - fwd[1], pass, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(bwd[0] - bwd[1], 2 * pass, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(act[0], act[1], 0);
  CU_ASSERT_DOUBLE_EQUAL(flops[0], flops[1], 0);
}

/* ---- PyTorch eager's elementwise kernels ---- */

/* `elementwise` eager changes no op or FLOP: an RMSNorm's, RoPE's, SwiGLU's and the loss's ops move their eager
 * chain's bytes (px_op_eager_chain: with bf16 activations 36 an element for a norm's forward, 98 backward, 20 RoPE,
 * 10 and 18 SwiGLU, 22 and 26 the loss), flagged, every other op what fused moves; fp32 activations drop the casts
 * (a norm's forward 8 + 20 bytes an element, the loss's 16 and 20); a LayerNorm-GELU model's loss alone changes. The
 * loss's fp32 transients are workspaces of its ops (the logits' fp32 copy in 16-bit, nll_loss's gradient, and
 * log_softmax's before its cast in 16-bit): the peak is never below fused's. */
static void test_elementwise_eager(void) {
  static const struct {
    const char *model;
    px_precision prec;
    bool changes;
  } cases[] = {{"small-llama", PX_PREC_BF16, true}, {"small-llama", PX_PREC_FP32, true}, {"small", PX_PREC_BF16, false}};
  const char *ws[3][2] = {{"ce_float", NULL}, {"ce_dnll", "ce_dlogp"}}; /* LOSS out[2]; LOSS_BWD out[1], out[2] */
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    px_model m = preset_model(cases[k].model);
    px_cluster c = cluster("dgx-h100", 2);
    px_plan plan[2];
    for (int e = 0; e < 2; e++) {
      px_parallel p = par(2, 1, 1, 0, 2, 2);
      p.sp = 1, p.precision = cases[k].prec;
      p.elementwise = e ? PX_ELEMWISE_EAGER : PX_ELEMWISE_FUSED;
      px_err err = {0};
      CU_ASSERT_EQUAL_FATAL(compile(&plan[e], &m, &c, &p, &err), PX_OK);
    }
    double e_bytes = cases[k].prec == PX_PREC_FP32 ? 4 : 2;
    int eager_ops = 0;
    for (int b = 0; b < PX_BLOCK_KIND_COUNT; b++) {
      const px_block *f = &plan[0].blocks[b], *g = &plan[1].blocks[b];
      CU_ASSERT_EQUAL_FATAL(f->nops, g->nops);
      for (int32_t i = 0; i < f->nops; i++) {
        const px_op *x = &f->ops[i], *y = &g->ops[i];
        CU_ASSERT_EQUAL(x->kind, y->kind);
        CU_ASSERT_DOUBLE_EQUAL(x->flops, y->flops, 0);
        const px_eager_chain *ch = px_op_eager(y);
        if (!ch) {
          CU_ASSERT_DOUBLE_EQUAL(x->bytes, y->bytes, 0);
          continue;
        }
        eager_ops++;
        CU_ASSERT(y->bytes >= x->bytes); /* fp32 RoPE: one complex product, a fused pass's bytes */
        if (y->kind == PX_OP_NORM) { /* rows x hidden elements */
          double elems = (double)(y->dim[0] * y->dim[1]);
          CU_ASSERT_DOUBLE_EQUAL(y->bytes, elems * (e_bytes == 2 ? 36 : 28), 1e-6);
          CU_ASSERT_EQUAL(px_eager_kernels(ch, e_bytes), e_bytes == 2 ? 8 : 6);
        }
        if (y->kind == PX_OP_NORM_BWD && e_bytes == 2)
          CU_ASSERT_DOUBLE_EQUAL(y->bytes, (double)(y->dim[0] * y->dim[1]) * 98, 1e-6);
        bool loss = y->kind == PX_OP_LOSS, loss_bwd = y->kind == PX_OP_LOSS_BWD;
        if (!cases[k].changes) CU_ASSERT(loss || loss_bwd);
        if (loss || loss_bwd) { /* rows x the vocabulary shard, and the fp32 workspaces */
          double elems = (double)(y->dim[0] * y->dim[1]);
          CU_ASSERT_DOUBLE_EQUAL(y->bytes, elems * (loss ? (e_bytes == 2 ? 22 : 16) : (e_bytes == 2 ? 26 : 20)), 1e-6);
          for (int j = 0; j < 2; j++) {
            const char *name = ws[loss_bwd][j];
            px_ref r = y->out[(loss ? 2 : 1) + j];
            bool want = name && (e_bytes == 2 || !strcmp(name, "ce_dnll"));
            CU_ASSERT_EQUAL(r.slot >= 0, want);
            if (r.slot < 0 || !want) continue;
            CU_ASSERT_STRING_EQUAL(plan[1].slots[r.slot].name, name);
            CU_ASSERT_EQUAL(plan[1].slots[r.slot].kind, PX_SLOT_WORKSPACE);
            PX_ASSERT_EQ_U64(plan[1].slots[r.slot].bytes, (uint64_t)elems * 4);
          }
        }
      }
    }
    CU_ASSERT(eager_ops > 0);
    CU_ASSERT(plan[1].mem[0].peak_bytes >= plan[0].mem[0].peak_bytes);
    px_plan_free(&plan[0]);
    px_plan_free(&plan[1]);
  }
}

/* A RoPE with YaRN's concentration factor under `elementwise` fused, or any RoPE under rope-unfused: Megatron-Core's
 * unfused RoPE (the chain of px_op_rope_unfused_chain: with bf16 activations 24 bytes an element forward in 24
 * kernels, 26 backward in 14, where the fused kernel moves 4), flagged; every other op, FLOP and tensor as fused
 * with no factor; `elementwise` eager keeps torchtitan's chain. Plans: fused, fused with the factor, eager with the
 * factor, rope-unfused without it. */
static void test_rope_unfused(void) {
  px_model m = preset_model("small-llama");
  px_cluster c = cluster("dgx-h100", 2);
  px_plan plan[4];
  static const int ew[4] = {PX_ELEMWISE_FUSED, PX_ELEMWISE_FUSED, PX_ELEMWISE_EAGER, PX_ELEMWISE_ROPE_UNFUSED};
  for (int v = 0; v < 4; v++) {
    m.rope_concentration = v == 1 || v == 2 ? 1.3465735902799727 : 1.0;
    px_parallel p = par(2, 1, 1, 0, 2, 2);
    p.sp = 1, p.precision = PX_PREC_BF16, p.elementwise = ew[v];
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan[v], &m, &c, &p, &err), PX_OK);
  }
  int unfused = 0;
  for (int b = 0; b < PX_BLOCK_KIND_COUNT; b++) {
    const px_block *f = &plan[0].blocks[b], *g = &plan[1].blocks[b], *t = &plan[2].blocks[b], *u = &plan[3].blocks[b];
    CU_ASSERT_EQUAL_FATAL(f->nops, g->nops);
    CU_ASSERT_EQUAL_FATAL(f->nops, u->nops);
    for (int32_t i = 0; i < f->nops; i++) {
      const px_op *x = &f->ops[i], *y = &g->ops[i], *z = &t->ops[i];
      CU_ASSERT_EQUAL(u->ops[i].flags, y->flags); /* rope-unfused: as the factor's */
      CU_ASSERT_DOUBLE_EQUAL(u->ops[i].bytes, y->bytes, 0);
      CU_ASSERT_EQUAL(x->kind, y->kind);
      CU_ASSERT_DOUBLE_EQUAL(x->flops, y->flops, 0);
      bool rope = y->kind == PX_OP_ROPE || y->kind == PX_OP_ROPE_BWD;
      CU_ASSERT_EQUAL(rope, (y->flags & PX_OPF_ROPE_UNFUSED) != 0);
      CU_ASSERT(!(z->flags & PX_OPF_ROPE_UNFUSED));
      if (!rope) {
        CU_ASSERT_DOUBLE_EQUAL(x->bytes, y->bytes, 0);
        continue;
      }
      unfused++;
      bool fwd = y->kind == PX_OP_ROPE;
      CU_ASSERT_PTR_EQUAL(px_op_eager(y), px_op_rope_unfused_chain((px_op_kind)y->kind));
      CU_ASSERT_DOUBLE_EQUAL(y->bytes, x->bytes / 4 * (fwd ? 24 : 26), 1e-6);
      CU_ASSERT_EQUAL(px_eager_kernels(px_op_eager(y), 2), fwd ? 24 : 14);
      CU_ASSERT_PTR_EQUAL(px_op_eager(z), px_op_eager_chain((px_op_kind)z->kind)); /* torchtitan's, eager */
    }
  }
  CU_ASSERT(unfused > 0);
  PX_ASSERT_EQ_U64(plan[0].mem[0].peak_bytes, plan[1].mem[0].peak_bytes);
  for (int v = 0; v < 4; v++) px_plan_free(&plan[v]);
}

/* ---- model states: ZeRO ---- */

static void test_zero_states(void) {
  /* Megatron's 7.5B GPT (h 4096, 36 layers), one stage, dp 64. */
  px_model m = gpt(36, 4096, 32, 2048, 0.1);
  double psi = (double)px_model_param_count(&m);
  PX_ASSERT_REL(psi, 7.5e9, 0.01);
  px_cluster c = cluster("dgx-a100", 64);
  double want[4] = {16 * psi, 4 * psi + 12 * psi / 64, 2 * psi + 14 * psi / 64, 16 * psi / 64};
  double paper_gb[4] = {120, 31.4, 16.6, 1.9}; /* ZeRO Figure 1 */
  for (int z = 0; z < 4; z++) {
    px_parallel p = par(1, 1, 64, z, 1, 64);
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    const px_memplan *mp = &plan.mem[0];
    double states = (double)mp->static_bytes;
    /* Exact up to each unit's padding to a multiple of dp (at most 63 elements a unit). */
    double slack = 16.0 * 64 * plan.programs[0].nunits;
    if (!(states >= want[z] && states <= want[z] + slack))
      fprintf(stderr, "\n  ZeRO-%d: %.0f bytes, formula %.0f (+ %.0f)\n", z, states, want[z], slack);
    CU_ASSERT(states >= want[z] && states <= want[z] + slack);
    /* The paper's rounded figures with its Psi = 7.5B. */
    PX_ASSERT_REL(want[z] * 7.5e9 / psi / 1e9, paper_gb[z], 0.02);
    PX_ASSERT_EQ_U64(mp->at_peak[PX_MEM_PARAMS] + mp->at_peak[PX_MEM_GRADS] + mp->at_peak[PX_MEM_OPTIMIZER],
                     mp->static_bytes);
    px_plan_free(&plan);
  }
  /* Megatron-LM's fp32 main gradients with 16-bit parameters (Megatron Core's
   * distributed-optimizer guide): 18 bytes a parameter, 6 + 12/d distributed. */
  double megatron[2] = {18 * psi, 6 * psi + 12 * psi / 64};
  for (int z = 0; z < 2; z++) {
    px_parallel p = par(1, 1, 64, z, 1, 64);
    p.main_grad = PX_MAIN_GRAD_FP32;
    p.precision = PX_PREC_BF16;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    double states = (double)plan.mem[0].static_bytes, slack = 18.0 * 64 * plan.programs[0].nunits;
    if (!(states >= megatron[z] && states <= megatron[z] + slack))
      fprintf(stderr, "\n  main_grad fp32 ZeRO-%d: %.0f bytes, formula %.0f\n", z, states, megatron[z]);
    CU_ASSERT(states >= megatron[z] && states <= megatron[z] + slack);
    px_plan_free(&plan);
  }
}

/* Gradient buckets are runs of whole tensors up to the bucket size, filled
 * from the back (ZeRO-0/1/2, as DDP and Megatron-LM): 1 MiB splits a layer
 * where 25 MiB does not, no tensor is split, every element is in one unit;
 * ZeRO-3's units stay whole layers. */
static void test_buckets_split_layers(void) {
  px_model m = gpt(4, 1024, 16, 1024, 0);
  px_cluster c = cluster("dgx-a100", 8);
  int32_t nunits[3];
  uint64_t buckets[3] = {1u << 20, 25u << 20, 25u << 20};
  for (int i = 0; i < 3; i++) {
    px_parallel p = par(1, 1, 8, i == 2 ? 3 : 1, 1, 8);
    p.bucket_bytes = buckets[i];
    p.precision = PX_PREC_BF16;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    const px_program *prog = &plan.programs[0];
    nunits[i] = prog->nunits;
    uint64_t bucket_elems = buckets[i] / 2, sum = 0;
    for (int32_t u = 0; u < prog->nunits; u++) {
      const px_unit *un = &prog->units[u];
      sum += un->elems;
      if (i < 2 && u > 0) CU_ASSERT(un->elems >= bucket_elems); /* only the front one (filled last) is short */
      if (i == 2) CU_ASSERT_EQUAL(un->first_group, un->last_group);
    }
    PX_ASSERT_EQ_U64(sum, prog->param_elems);
    for (int32_t r = 0; r < prog->nparams; r++) { /* each tensor inside its unit */
      const px_unit *un = &prog->units[prog->params[r].unit];
      CU_ASSERT(prog->params[r].offset >= un->offset && prog->params[r].offset + prog->params[r].elems <= un->offset + un->elems);
    }
    px_plan_free(&plan);
  }
  /* a layer holds 12.6 M parameters (24 MiB of bf16 gradients): 1 MiB buckets split each */
  CU_ASSERT(nunits[0] > 2 * nunits[1]);
  CU_ASSERT_EQUAL(nunits[2], 4 + 1); /* the layers, and the embedding with the tied head */
}

/* ---- offload: DeepSpeed's published model-state estimates ---- */

/* DeepSpeed's estimate_zero3_model_states_mem_needs and the ZeRO-2 one
 * (deepspeed/runtime/zero/stage3.py, stage_1_and_2.py; zero_init on), per
 * GPU and per node, for P parameters and the largest layer's L; the CPU
 * figure without its additional_buffer_factor of 1.5 (a safety margin). */
typedef struct {
  double gpu, cpu_node;
} ds_estimate;

static ds_estimate ds_zero3(double P, double L, double gpn, double nodes, bool off_opt, bool off_params) {
  double N = gpn * nodes, layer = 4 * L;
  if (off_opt && off_params) return (ds_estimate){layer, P * 18 / nodes};
  if (off_opt) return (ds_estimate){layer + floor(2 * P / N), P * 16 / nodes};
  return (ds_estimate){layer + floor(18 * P / N), 0};
}
static ds_estimate ds_zero2_offload(double P, double N) { return (ds_estimate){2 * P, P * fmax(4 * N, 16)}; }

static void test_deepspeed_estimates(void) {
  const char *models[] = {"gpt2-1.5b", "llama2-7b", "llama2-13b"};
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    px_model m;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(px_model_load(models[mi], &m, &err), PX_OK);
    /* ZeRO-3 on two DGX A100 nodes, fp16 with DeepSpeed's fp32 gradient partition */
    for (int mode = 0; mode < 3; mode++) {
      px_cluster c = cluster("dgx-a100", 16);
      px_parallel p = par(1, 1, 16, 3, 1, 16);
      p.precision = PX_PREC_FP16;
      p.main_grad = PX_MAIN_GRAD_FP32;
      p.offload_opt = mode >= 1 ? PX_OFFLOAD_CPU : PX_OFFLOAD_NONE;
      p.offload_params = mode == 2 ? PX_OFFLOAD_CPU : PX_OFFLOAD_NONE;
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
      const px_program *prog = &plan.programs[0];
      /* P: the flat buffer (the model, each layer padded to a multiple of dp); L: the largest unit */
      double P = (double)prog->flat_elems, L = 0;
      for (int32_t u = 0; u < prog->nunits; u++) L = fmax(L, (double)prog->units[u].padded);
      ds_estimate want = ds_zero3(P, L, 8, 2, mode >= 1, mode == 2);
      /* the layer term is the gathered layer and its gradient, which the plan counts as buffers */
      PX_ASSERT_EQ_U64(plan.mem[0].static_bytes, (uint64_t)(want.gpu - 4 * L));
      PX_ASSERT_EQ_U64(plan.host_node_bytes, (uint64_t)want.cpu_node);
      CU_ASSERT(plan.mem[0].at_peak[PX_MEM_BUFFERS] >= 4 * L);
      CU_ASSERT(px_plan_host_fits(&plan));
      px_plan_free(&plan);
    }
    /* ZeRO-2 with the optimizer offloaded, four GPUs of one node (DeepSpeed's max(4N, 16) is 16 there) */
    px_cluster c = cluster("dgx-a100", 4);
    px_parallel p = par(1, 1, 4, 2, 1, 4);
    p.precision = PX_PREC_FP16;
    p.offload_opt = PX_OFFLOAD_CPU;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    ds_estimate want = ds_zero2_offload((double)plan.programs[0].flat_elems, 4);
    PX_ASSERT_EQ_U64(plan.mem[0].static_bytes, (uint64_t)want.gpu);
    PX_ASSERT_EQ_U64(plan.host_node_bytes, (uint64_t)want.cpu_node);
    px_plan_free(&plan);
  }
}

/* Activation offload (Transformer Engine's CPU offload of the first N of L layers, W = L - N sets on the GPU at
 * most): each micro-batch's copies of the offloaded layers out and back, each forward j waiting for the copy
 * of layer j - W and each backward l for its copy back, which waits for the backward of layer l + W; the peak
 * drops by the N sets the end of the forward no longer holds, which the host holds; the rules refuse what
 * Megatron-Core refuses. */
static void test_offload_activations(void) {
  px_model m = gpt(8, 1024, 16, 1024, 0);
  px_cluster c = cluster("dgx-h100", 8);
  px_err err = {0};
  px_plan plan[2];
  for (int k = 0; k < 2; k++) {
    px_parallel p = par(1, 1, 8, 1, 1, 16);
    p.offload_act_layers = 4 * k;
    CU_ASSERT_EQUAL_FATAL(compile(&plan[k], &m, &c, &p, &err), PX_OK);
  }
  const px_program *prog = &plan[1].programs[0];
  uint64_t set = px_plan_layer_activation_bytes(&plan[1]);
  PX_ASSERT_EQ_U64(plan[0].mem[0].peak_bytes - plan[1].mem[0].peak_bytes, 4 * set);
  PX_ASSERT_EQ_U64(plan[1].mem[0].host_bytes - plan[0].mem[0].host_bytes, 4 * set);
  PX_ASSERT_EQ_U64(plan[1].host_node_bytes, 8 * 4 * set);
  int copies[2] = {0, 0};
  for (int32_t i = 0; i < prog->ninsts; i++) {
    const px_inst *in = &prog->insts[i];
    bool out = in->block == PX_BLOCK_OFFLOAD_ACT;
    if (!out && in->block != PX_BLOCK_FETCH_ACT) continue;
    copies[!out]++;
    CU_ASSERT(in->stream == PX_STREAM_HOST && in->layer >= 0 && in->layer < 4);
    PX_ASSERT_EQ_U64((uint64_t)prog->ops[in->ops].bytes, set);
    CU_ASSERT_EQUAL(prog->ops[in->ops].kind, out ? PX_OP_COPY_D2H : PX_OP_COPY_H2D);
    /* it waits for the layer's forward (out) or for layer + 4's backward (back) of its micro-batch ... */
    CU_ASSERT_EQUAL_FATAL(in->ndeps, 1);
    const px_inst *after = &prog->insts[prog->deps[in->dep_start]];
    CU_ASSERT(out ? px_block_is_layer_fwd((px_block_kind)after->block) : px_block_is_layer_bwd((px_block_kind)after->block));
    CU_ASSERT(after->mb == in->mb && after->layer == in->layer + (out ? 0 : 4));
    /* ... and the forward of layer + 4 (out) or the layer's backward (back) waits for it */
    int waiters = 0;
    for (int32_t j = i + 1; j < prog->ninsts; j++) {
      const px_inst *w = &prog->insts[j];
      for (int32_t d = 0; d < w->ndeps; d++)
        if (prog->deps[w->dep_start + d] == i) {
          waiters++;
          CU_ASSERT(out ? px_block_is_layer_fwd((px_block_kind)w->block) : px_block_is_layer_bwd((px_block_kind)w->block));
          CU_ASSERT(w->mb == in->mb && w->layer == in->layer + (out ? 4 : 0));
        }
    }
    CU_ASSERT_EQUAL(waiters, 1);
  }
  CU_ASSERT(copies[0] == 2 * 4 && copies[1] == 2 * 4); /* two micro-batches */
  px_plan_free(&plan[0]);
  px_plan_free(&plan[1]);
  /* what Megatron-Core (and TE's overlap) refuse */
  static const struct {
    int64_t n, pp;
    int recompute, graph;
    bool no_link;
    const char *msg;
  } bad[] = {{7, 1, PX_RECOMPUTE_NONE, PX_GRAPH_NONE, false, "`offload_activations` 7 must leave two of the model's 8"},
             {2, 2, PX_RECOMPUTE_NONE, PX_GRAPH_NONE, false, "`offload_activations` with pp 2"},
             {2, 1, PX_RECOMPUTE_FULL, PX_GRAPH_NONE, false, "with `recompute` full"},
             {2, 1, PX_RECOMPUTE_NONE, PX_GRAPH_LAYERS, false, "with `cuda_graph` layers"},
             {2, 1, PX_RECOMPUTE_NONE, PX_GRAPH_NONE, true, "has no host.pcie_gb_per_s"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_parallel p = par(1, bad[i].pp, 8 / bad[i].pp, 1, 1, 16);
    p.offload_act_layers = bad[i].n, p.recompute = bad[i].recompute, p.cuda_graph = bad[i].graph;
    px_cluster cc = c;
    if (bad[i].no_link) cc.host_pcie_bytes_per_s = 0;
    px_parallel_resolve(&p, &m, &cc);
    CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &cc, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, bad[i].msg)) fprintf(stderr, "\n  %zu: %s\n", i, err.msg);
    CU_ASSERT(strstr(err.msg, bad[i].msg) != NULL);
  }
}

/* Offload's placement (NVMe holds the optimizer's 12 bytes, the host the
 * fp32 gradient), and fits weighs the node's host memory and NVMe too. */
static void test_offload_places(void) {
  px_model m = gpt(8, 2048, 16, 1024, 0);
  px_cluster c = cluster("dgx-a100", 8);
  c.host_nvme_bytes_per_s = 10e9; /* a user's measurement */
  px_parallel p = par(1, 1, 8, 3, 1, 8);
  p.offload_opt = PX_OFFLOAD_NVME;
  p.offload_params = PX_OFFLOAD_NVME;
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  uint64_t shard = plan.programs[0].flat_elems / 8, pb = px_dtype_bytes(plan.param_dtype);
  PX_ASSERT_EQ_U64(plan.mem[0].host_bytes, PX_HOST_GRAD_BYTES * shard);
  PX_ASSERT_EQ_U64(plan.mem[0].nvme_bytes, (PX_HOST_OPT_BYTES + pb) * shard);
  PX_ASSERT_EQ_U64(plan.nvme_node_bytes, 8 * plan.mem[0].nvme_bytes);
  CU_ASSERT(plan.fits);
  px_plan_free(&plan);
  c.host_nvme_bytes = 8 * (PX_HOST_OPT_BYTES + pb) * shard - 1; /* one byte short */
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(!plan.fits);
  CU_ASSERT(!px_plan_host_fits(&plan));
  CU_ASSERT(px_plan_stage_fits(&plan, 0));
  px_plan_free(&plan);
  /* refused: offload below ZeRO-2, parameters without the optimizer, NVMe without its bandwidth */
  px_parallel bad[3] = {par(1, 1, 8, 1, 1, 8), par(1, 1, 8, 3, 1, 8), par(1, 1, 8, 3, 1, 8)};
  bad[0].offload_opt = PX_OFFLOAD_CPU;
  bad[1].offload_params = PX_OFFLOAD_CPU;
  bad[2].offload_opt = PX_OFFLOAD_NVME;
  px_cluster plain = cluster("dgx-a100", 8);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(compile(&plan, &m, &plain, &bad[i], &err), PX_ERR_INPUT);
    px_plan_free(&plan);
  }
}

/* Hybrid sharding: with a shard group of N the model states are those of
 * full sharding over N ranks ((2 + 2 + 12) Psi / N for ZeRO-3), the
 * reduction is a reduce-scatter of the unit in the shard group then an
 * all-reduce of the shard over the dp / N replicas (once a step), and
 * gathers stay in the shard group, which on 8-GPU nodes is one node. */
static void test_hybrid_states(void) {
  px_model m = gpt(36, 4096, 32, 2048, 0.1);
  double psi = (double)px_model_param_count(&m);
  px_cluster c16 = cluster("dgx-a100", 16), c8 = cluster("dgx-a100", 8);
  for (int z = 1; z <= 3; z++) {
    px_parallel ph = par(1, 1, 16, z, 1, 64), pf = par(1, 1, 8, z, 1, 32);
    ph.shard_group = 8;
    px_plan hy, full;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&hy, &m, &c16, &ph, &err), PX_OK);
    CU_ASSERT_EQUAL_FATAL(compile(&full, &m, &c8, &pf, &err), PX_OK);
    for (int k = PX_MEM_PARAMS; k <= PX_MEM_OPTIMIZER; k++) PX_ASSERT_EQ_U64(hy.mem[0].at_peak[k], full.mem[0].at_peak[k]);
    PX_ASSERT_EQ_U64(hy.mem[0].static_bytes, full.mem[0].static_bytes);
    double want[4] = {0, 4 * psi + 12 * psi / 8, 2 * psi + 14 * psi / 8, 16 * psi / 8};
    double states = (double)hy.mem[0].static_bytes, slack = 16.0 * 8 * hy.programs[0].nunits;
    CU_ASSERT(states >= want[z] && states <= want[z] + slack);
    /* the groups: one node, and one rank in each of the two nodes */
    CU_ASSERT_EQUAL(hy.grid.shard_place.size, 8);
    CU_ASSERT(hy.grid.shard_place.intra);
    CU_ASSERT_EQUAL(hy.grid.replica_place.size, 2);
    CU_ASSERT_EQUAL(hy.grid.replica_place.nodes, 2);
    CU_ASSERT_EQUAL(hy.grid.replica_place.stride, 8);
    const px_program *prog = &hy.programs[0];
    double replica_wire = 0;
    for (int32_t u = 0; u < prog->nunits; u++) {
      const px_unit *un = &prog->units[u];
      CU_ASSERT_EQUAL(un->padded % 8, 0);
      const px_op *rs = &prog->ops[un->grad_op], *ar = rs + 1, *ag = &prog->ops[un->gather_op];
      CU_ASSERT_EQUAL(rs->group, PX_GROUP_SHARD);
      CU_ASSERT_EQUAL(rs->coll, PX_COLL_REDUCE_SCATTER);
      PX_ASSERT_EQ_U64(rs->coll_bytes, un->padded * 2);
      CU_ASSERT_EQUAL(ar->group, PX_GROUP_REPLICA);
      CU_ASSERT_EQUAL(ar->coll, PX_COLL_ALLREDUCE);
      PX_ASSERT_EQ_U64(ar->coll_bytes, un->padded / 8 * 2);
      CU_ASSERT_EQUAL(ag->group, PX_GROUP_SHARD);
      replica_wire += ar->wire_bytes;
      /* sharded accumulation (ZeRO-2/3): earlier micro-batches reduce in the shard group only */
      CU_ASSERT_EQUAL(un->grad_op_mb >= 0, z >= 2);
      if (un->grad_op_mb >= 0) PX_ASSERT_EQ_U64(prog->ops[un->grad_op_mb + 1].coll_bytes, 0);
    }
    /* the replica all-reduce: once a step, 2 (r - 1) / r of the shard with r = 2 replicas */
    CU_ASSERT_DOUBLE_EQUAL(hy.totals[0].wire_bytes[PX_GROUP_REPLICA], replica_wire, 1e-6 * replica_wire);
    CU_ASSERT(hy.totals[0].wire_bytes[PX_GROUP_SHARD] > 0);
    CU_ASSERT_EQUAL(hy.totals[0].wire_bytes[PX_GROUP_DP], 0);
    px_plan_free(&hy);
    px_plan_free(&full);
  }
  /* a shard group of all of dp is full sharding, op for op */
  px_parallel pa = par(1, 1, 16, 3, 1, 64), pb = pa;
  pb.shard_group = 16;
  px_plan a, b;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(compile(&a, &m, &c16, &pa, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(compile(&b, &m, &c16, &pb, &err), PX_OK);
  PX_ASSERT_EQ_U64(a.mem[0].peak_bytes, b.mem[0].peak_bytes);
  CU_ASSERT_EQUAL(a.programs[0].nops, b.programs[0].nops);
  CU_ASSERT_EQUAL(b.programs[0].ops[b.programs[0].units[0].grad_op].group, PX_GROUP_DP);
  CU_ASSERT_EQUAL(b.blocks[PX_BLOCK_GRAD_SYNC].nops, 1);
  px_plan_free(&a);
  px_plan_free(&b);
}

/* ---- activations: Korthikanti et al. ---- */

static double korthikanti(double s, double b, double h, double a, double t, bool sp, px_recompute rc) {
  if (rc == PX_RECOMPUTE_FULL) return sp ? 2 * s * b * h / t : 2 * s * b * h;
  if (rc == PX_RECOMPUTE_SELECTIVE) return sp ? 34 * s * b * h / t : s * b * h * (10 + 24 / t);
  if (sp) return s * b * h * (34 + 5 * a * s / h) / t;
  return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
}

static void test_korthikanti(void) {
  px_model m = gpt(8, 4096, 32, 2048, 0.1); /* dropout on, as in the paper */
  px_cluster c = cluster("dgx-a100", 8);
  int64_t tps[] = {1, 2, 8};
  for (size_t ti = 0; ti < 3; ti++) {
    for (int sp = 0; sp < 2; sp++) {
      for (int rc = 0; rc <= PX_RECOMPUTE_FULL; rc++) { /* Megatron's modes, the paper's */
        int64_t t = tps[ti];
        if (sp && t == 1) continue;
        px_parallel p = par(t, 1, 8 / t, 0, 2, 16);
        p.sp = sp;
        p.recompute = rc;
        p.attention = PX_ATTN_UNFUSED;
        p.precision = PX_PREC_FP16;
        px_plan plan;
        px_err err = {0};
        CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
        double got = (double)px_plan_layer_activation_bytes(&plan);
        double want = korthikanti(2048, 2, 4096, 32, (double)t, sp, (px_recompute)rc);
        if (got < want || got > want * 1.01)
          fprintf(stderr, "\n  tp %lld sp %d recompute %s: %.0f bytes, formula %.0f\n", (long long)t, sp,
                  px_recompute_names[rc], got, want);
        CU_ASSERT(got >= want && got <= want * 1.01);
        px_plan_free(&plan);
      }
    }
  }
}

/* Selective recomputation's modules (Megatron-Core's recompute_modules) drop what Korthikanti et al.'s
 * Section 4.1 counts for them, a layer at tp 1 in fp16 (34 s b h + 5 a s^2 b kept without recomputation):
 * layernorm the two norms' outputs, the QKV and fc1 inputs (2 s b h each), mlp the GeLU's input and output
 * (8 s b h each: fc1's input stays, the dropout's mask after the MLP too), core_attn the 5 a s^2 b of the
 * scores, softmax and its dropout. Within 1% above (the norms' statistics, which the paper leaves out). */
static void test_recompute_modules(void) {
  px_model m = gpt(8, 4096, 32, 2048, 0.1);
  px_cluster c = cluster("dgx-a100", 8);
  double s = 2048, b = 2, h = 4096, a = 32, sbh = s * b * h, attn = 5 * a * s * s * b;
  const struct {
    int modules;
    double want;
  } cases[] = {{PX_RCM_LAYERNORM, 30 * sbh + attn},
               {PX_RCM_MLP, 18 * sbh + attn},
               {PX_RCM_LAYERNORM | PX_RCM_MLP, 14 * sbh + attn},
               {PX_RCM_CORE_ATTN | PX_RCM_LAYERNORM | PX_RCM_MLP, 14 * sbh}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    px_parallel p = par(1, 1, 8, 0, 2, 16);
    p.attention = PX_ATTN_UNFUSED, p.precision = PX_PREC_FP16, p.recompute_modules = cases[i].modules;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(plan.par.recompute, PX_RECOMPUTE_SELECTIVE); /* the modules imply it */
    double got = (double)px_plan_layer_activation_bytes(&plan);
    if (got < cases[i].want || got > cases[i].want * 1.01)
      fprintf(stderr, "\n  modules %d: %.0f bytes, formula %.0f\n", cases[i].modules, got, cases[i].want);
    CU_ASSERT(got >= cases[i].want && got <= cases[i].want * 1.01);
    /* the recomputed GEMMs are the backward's (hardware FLOPs, not the model's); the norms have none */
    CU_ASSERT((plan.blocks[PX_BLOCK_LAYER_BWD].flops[PX_PHASE_RECOMPUTE] > 0) ==
              ((cases[i].modules & (PX_RCM_MLP | PX_RCM_CORE_ATTN)) != 0));
    px_plan_free(&plan);
  }
}

/* torchtitan's per-op recomputation (`recompute` op) on Llama 3 8B's layer in bf16 and in fp8 (s 2048, b 1, h 4096,
 * k/v width 1024, F 14336, 32 query heads), at TP 1 and TP 2 with SP: a layer keeps, beyond full recomputation's
 * input, q's projection, v's, the attention's output (in bf16: torchao casts it again for wo) and its fp32 row
 * statistics, w1's output (gate) and with SP wo's reduce-scatter's output, each a 1/tp sequence or head shard; the backward recomputes k's (wk), wo's (without SP, or
 * eager with it) and up's (w3) GEMMs, 2 b s h n / tp FLOPs each, and nothing else has FLOPs; with SP it gathers the
 * two norms' outputs once, in the recomputation, and not again for the weight gradients. */
static void test_recompute_op(void) {
  px_model m = preset_model("llama3-8b");
  double s = 2048, b = 1, h = 4096, kw = 1024, F = 14336, hq = 32, e = 2;
  for (int t = 1; t <= 2; t++)
    for (int k = 0; k < 3; k++) { /* fused, eager, fp8 (current scaling: no fp8 copy kept, the same bytes) */
      bool eager = k == 1;
      px_cluster c = cluster("dgx-h100", t);
      px_plan op = {0}, full = {0}, none = {0};
      px_err err = {0};
      px_parallel p = par(t, 1, 1, 0, 1, 1);
      p.seq = (int64_t)s, p.sp = t > 1, p.precision = k == 2 ? PX_PREC_FP8 : PX_PREC_BF16;
      if (k == 2) p.fp8_recipe = PX_FP8_CURRENT;
      p.elementwise = eager ? PX_ELEMWISE_EAGER : PX_ELEMWISE_FUSED;
      px_parallel pf = p, pn = p;
      p.recompute = PX_RECOMPUTE_OP, pf.recompute = PX_RECOMPUTE_FULL, pn.recompute = PX_RECOMPUTE_NONE;
      CU_ASSERT_EQUAL_FATAL(compile(&op, &m, &c, &p, &err), PX_OK);
      CU_ASSERT_EQUAL_FATAL(compile(&full, &m, &c, &pf, &err), PX_OK);
      CU_ASSERT_EQUAL_FATAL(compile(&none, &m, &c, &pn, &err), PX_OK);
      double sbe = s * b * e / t; /* a (tp) shard's bytes per column */
      double want = sbe * (h + kw + h + F) + b * (hq / t) * s * 4 + (t > 1 ? sbe * h : 0);
      if (eager) want += sbe * h; /* w2's output, which eager PyTorch's checkpoint stores */
      double got = (double)px_plan_layer_activation_bytes(&op) - (double)px_plan_layer_activation_bytes(&full);
      if (got != want) fprintf(stderr, "\n  tp %d case %d: %.0f bytes kept, by hand %.0f\n", t, k, got, want);
      CU_ASSERT_EQUAL(got, want);
      CU_ASSERT(px_plan_layer_activation_bytes(&op) < px_plan_layer_activation_bytes(&none));
      double gemm = 2 * b * s * h / t;
      double redo = gemm * (kw + F + (t == 1 || eager ? h : 0));
      PX_ASSERT_REL(op.blocks[PX_BLOCK_LAYER_BWD].flops[PX_PHASE_RECOMPUTE], redo, 1e-12);
      PX_ASSERT_REL(op.model_flops_per_step, none.model_flops_per_step, 1e-12);
      int gathers[2][2] = {{0}}; /* [op][recompute phase] */
      const px_plan *plans[2] = {&none, &op};
      for (int j = 0; j < 2; j++) {
        const px_block *bl = &plans[j]->blocks[PX_BLOCK_LAYER_BWD];
        for (int32_t i = 0; i < bl->nops; i++)
          if (bl->ops[i].kind == PX_OP_ALLGATHER) gathers[j][bl->ops[i].phase == PX_PHASE_RECOMPUTE]++;
      }
      CU_ASSERT_EQUAL(gathers[1][1], t > 1 ? 2 : 0);
      CU_ASSERT_EQUAL(gathers[1][0], gathers[0][0] - (t > 1 ? 2 : 0));
      px_plan_free(&op), px_plan_free(&full), px_plan_free(&none);
    }
}

/* Megatron-Core keeps a MoE layer's pre-MLP norm when a CUDA graph captures its router and the dispatcher is not the
 * alltoall one (can_recompute_pre_mlp_layernorm_for_cudagraph): layernorm recomputation then keeps that norm's
 * output and statistics, exactly their bytes more; with the alltoall dispatcher the graphs change nothing. */
static void test_recompute_norm_graphs(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-moe", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 2);
  int64_t kept[2][2]; /* [graphs][alltoall]: a MoE layer's forward's activations */
  uint64_t norm2 = 0;
  for (int g = 0; g < 2; g++)
    for (int a = 0; a < 2; a++) {
      px_parallel p = par(1, 1, 2, 1, 1, 8);
      p.ep = 2, p.etp = 1, p.recompute_modules = PX_RCM_LAYERNORM;
      p.cuda_graph = g ? PX_GRAPH_LAYERS : PX_GRAPH_NONE, p.moe_dispatch = a ? PX_MOE_A2A : PX_MOE_DEEPEP;
      px_plan plan;
      CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
      px_block_mem f;
      px_plan_block_mem(&plan, px_layer_block(true, false, false, false, false), &f);
      kept[g][a] = (int64_t)f.delta[PX_MEM_ACTIVATIONS];
      for (int32_t i = 0; i < plan.nslots && !norm2; i++)
        if (!strcmp(plan.slots[i].name, "ln2")) norm2 = plan.slots[i].bytes;
      for (int32_t i = 0; i < plan.nslots && g == 0 && a == 0; i++)
        if (!strcmp(plan.slots[i].name, "ln2_rstd")) norm2 += plan.slots[i].bytes;
      px_plan_free(&plan);
    }
  CU_ASSERT(norm2 > 0);
  CU_ASSERT_EQUAL(kept[1][0] - kept[0][0], (int64_t)norm2);
  CU_ASSERT_EQUAL(kept[1][1], kept[0][1]);
}

/* Partial recomputation, Megatron's block method (tests/data/megatron_recompute.md): of each model chunk's
 * layers the first N are fully recomputed and keep their input (2 s b h bytes in fp16, Korthikanti's full),
 * the others keep every activation (his none); the backward recomputes N layers' forwards a chunk, each
 * 24 b s h^2 + 4 b s^2 h FLOPs (Megatron's per-layer forward: the GEMMs, 2 x 12 b s h^2, and the attention's
 * two s x s products, 2 x 2 b s^2 h). The every method (torchtitan's layer-wise selective AC) recomputes each
 * chunk's N-th, 2N-th, ... layers instead. */
static void test_recompute_block(void) {
  px_model m = gpt(8, 4096, 32, 2048, 0.1);
  px_cluster c = cluster("dgx-a100", 8);
  double s = 2048, b = 2, h = 4096, a = 32;
  double kept = korthikanti(s, b, h, a, 1, false, PX_RECOMPUTE_NONE);
  double redo = korthikanti(s, b, h, a, 1, false, PX_RECOMPUTE_FULL);
  double layer_fwd = 24 * b * s * h * h + 4 * b * s * s * h;
  px_plan none = {0}, part = {0};
  px_err err = {0};
  px_parallel pn = par(1, 1, 8, 0, 2, 16);
  pn.attention = PX_ATTN_UNFUSED, pn.precision = PX_PREC_FP16;
  CU_ASSERT_EQUAL_FATAL(compile(&none, &m, &c, &pn, &err), PX_OK);
  for (int64_t n = 1; n <= 8; n += 3) { /* 1, 4, 7 of the 8 layers */
    px_parallel pb = pn;
    pb.recompute = PX_RECOMPUTE_FULL, pb.recompute_method = PX_RECOMPUTE_BLOCK, pb.recompute_layers = n;
    CU_ASSERT_EQUAL_FATAL(compile(&part, &m, &c, &pb, &err), PX_OK);
    /* what each layer keeps: the recomputed ones their input, the others all (the formulas within 1%) */
    px_block_mem fr, fk;
    px_plan_block_mem(&part, PX_BLOCK_LAYER_FWD, &fr);
    px_plan_block_mem(&part, PX_BLOCK_LAYER_FWD_KEPT, &fk);
    double got_r = (double)fr.delta[PX_MEM_ACTIVATIONS], got_k = (double)fk.delta[PX_MEM_ACTIVATIONS];
    CU_ASSERT(got_r >= redo && got_r <= redo * 1.01);
    CU_ASSERT(got_k >= kept && got_k <= kept * 1.01);
    /* the memory plan: n layers fewer kept whole at the peak (the backward's start, the last layer a kept one) */
    int64_t saved = (int64_t)none.mem[0].activations_peak_bytes - (int64_t)part.mem[0].activations_peak_bytes;
    if (n < 8) CU_ASSERT_EQUAL(saved, n * (int64_t)(got_k - got_r));
    /* FLOPs: n layers' forwards again, per micro-batch (16 / (2 x 8) = 1) */
    PX_ASSERT_REL(part.hw_flops_per_step - part.model_flops_per_step, (double)n * layer_fwd * 8, 0.005);
    PX_ASSERT_REL(part.model_flops_per_step, none.model_flops_per_step, 1e-12);
    /* the stage's backward: n recomputing layer blocks, 8 - n keeping theirs */
    int nr = 0, nk = 0;
    for (int32_t i = 0; i < part.programs[0].ninsts; i++)
      nr += part.programs[0].insts[i].block == PX_BLOCK_LAYER_BWD,
          nk += part.programs[0].insts[i].block == PX_BLOCK_LAYER_BWD_KEPT;
    CU_ASSERT_EQUAL(nr, n);
    CU_ASSERT_EQUAL(nk, 8 - n);
    px_plan_free(&part);
  }
  /* every layer of the chunk: full recomputation's plan, byte for byte and FLOP for FLOP */
  px_plan full = {0};
  px_parallel pf = pn, pb = pn;
  pf.recompute = PX_RECOMPUTE_FULL;
  pb.recompute = PX_RECOMPUTE_FULL, pb.recompute_method = PX_RECOMPUTE_BLOCK, pb.recompute_layers = 8;
  CU_ASSERT_EQUAL_FATAL(compile(&full, &m, &c, &pf, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(compile(&part, &m, &c, &pb, &err), PX_OK);
  PX_ASSERT_EQ_U64(part.mem[0].peak_bytes, full.mem[0].peak_bytes);
  CU_ASSERT_EQUAL(part.hw_flops_per_step, full.hw_flops_per_step);
  px_plan_free(&part);
  px_plan_free(&full);
  /* per model chunk: pp 2 x vpp 2, 2 layers a chunk, N 1: layers 0, 2, 4 and 6 recomputed */
  px_cluster c4 = cluster("dgx-a100", 4);
  px_parallel pv = par(1, 2, 2, 0, 1, 8);
  pv.schedule = PX_SCHED_INTERLEAVED, pv.vpp = 2, pv.attention = PX_ATTN_UNFUSED, pv.precision = PX_PREC_FP16;
  pv.recompute = PX_RECOMPUTE_FULL, pv.recompute_method = PX_RECOMPUTE_BLOCK, pv.recompute_layers = 1;
  CU_ASSERT_EQUAL_FATAL(compile(&part, &m, &c4, &pv, &err), PX_OK);
  for (int64_t st = 0; st < 2; st++)
    for (int32_t i = 0; i < part.programs[st].ninsts; i++) {
      const px_inst *in = &part.programs[st].insts[i];
      if (in->block == PX_BLOCK_LAYER_BWD) CU_ASSERT_EQUAL(in->layer % 2, 0);
      if (in->block == PX_BLOCK_LAYER_BWD_KEPT) CU_ASSERT_EQUAL(in->layer % 2, 1);
    }
  PX_ASSERT_REL(part.hw_flops_per_step - part.model_flops_per_step, 4 * (24 * 1 * s * h * h + 4 * 1 * s * s * h) * 8,
                0.005);
  px_plan_free(&part);
  /* every N-th (torchtitan's layer-wise selective AC): of the 8 layers of one chunk, with N 3 the 3rd and 6th */
  px_parallel pe = pn;
  pe.recompute = PX_RECOMPUTE_FULL, pe.recompute_method = PX_RECOMPUTE_EVERY, pe.recompute_layers = 3;
  CU_ASSERT_EQUAL_FATAL(compile(&part, &m, &c, &pe, &err), PX_OK);
  for (int32_t i = 0; i < part.programs[0].ninsts; i++) {
    const px_inst *in = &part.programs[0].insts[i];
    if (in->block == PX_BLOCK_LAYER_BWD) CU_ASSERT((in->layer + 1) % 3 == 0);
    if (in->block == PX_BLOCK_LAYER_BWD_KEPT) CU_ASSERT((in->layer + 1) % 3 != 0);
  }
  PX_ASSERT_REL(part.hw_flops_per_step - part.model_flops_per_step, 2 * layer_fwd * 8, 0.005);
  px_plan_free(&part);
  /* refused: without full recomputation, uniform groups of several layers, more than a stage's layers */
  static const struct {
    int rc, method;
    int64_t n;
    const char *says;
  } bad[] = {{PX_RECOMPUTE_SELECTIVE, PX_RECOMPUTE_BLOCK, 2, "it needs `recompute` full"},
             {PX_RECOMPUTE_FULL, PX_RECOMPUTE_UNIFORM, 2, "groups of more than one layer"},
             {PX_RECOMPUTE_FULL, PX_RECOMPUTE_BLOCK, 0, "`recompute_method` block needs `recompute_layers`"},
             {PX_RECOMPUTE_FULL, PX_RECOMPUTE_EVERY, 0, "`recompute_method` every needs `recompute_layers`"},
             {PX_RECOMPUTE_FULL, PX_RECOMPUTE_BLOCK, 9, "more than the 8 layers of a pipeline stage"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_parallel pr = pn;
    pr.recompute = bad[i].rc, pr.recompute_method = bad[i].method, pr.recompute_layers = bad[i].n;
    px_parallel_resolve(&pr, &m, &c);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(px_parallel_validate(&pr, &m, &c, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, bad[i].says)) fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].says));
  }
  px_plan_free(&none);
}

/* The fused attention keeps no S x S tensor, not even as scratch (the one
 * workspace is SP's (b, s, h) buffer for sequence-axis collectives): without
 * recomputation a layer holds the formula's terms without 5 a s / h, plus the
 * fp32 row log-sum-exp (4 a s b / t bytes). */
static void test_flash_memory(void) {
  px_model m = gpt(8, 4096, 32, 2048, 0.1);
  px_cluster c = cluster("dgx-a100", 8);
  for (int64_t t = 1; t <= 8; t *= 8)
    for (int sp = 0; sp < (t > 1 ? 2 : 1); sp++) {
      px_parallel p = par(t, 1, 8 / t, 0, 2, 16);
      p.sp = sp;
      p.precision = PX_PREC_FP16;
      px_plan plan;
      px_err err = {0};
      CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
      double s = 2048, b = 2, h = 4096, a = 32, got = (double)px_plan_layer_activation_bytes(&plan);
      double want = (sp ? s * b * h * 34 / (double)t : s * b * h * (10 + 24 / (double)t)) + 4 * a * s * b / (double)t;
      if (got < want || got > want * 1.01)
        fprintf(stderr, "\n  flash tp %lld sp %d: %.0f bytes, formula %.0f\n", (long long)t, sp, got, want);
      CU_ASSERT(got >= want && got <= want * 1.01);
      /* the only scratch: SP's sequence-axis collectives with b > 1 go through one (b, s, h) buffer */
      uint64_t scratch = 0;
      for (int32_t i = 0; i < plan.nslots; i++) scratch += plan.slots[i].kind == PX_SLOT_WORKSPACE ? plan.slots[i].bytes : 0;
      PX_ASSERT_EQ_U64(scratch, sp ? (uint64_t)(b * s * h * 2) : 0);
      px_plan_free(&plan);
    }
}

/* The first 1F1B stage holds p micro-batches; interleaving multiplies its
 * activations by 1 + (p-1)/(p v). */
static void test_inflight(void) {
  px_model m = gpt(32, 1024, 16, 1024, 0.0);
  px_cluster c = cluster("dgx-a100", 8);
  px_parallel p = par(1, 8, 1, 0, 1, 32);
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  for (int64_t s = 0; s < 8; s++) CU_ASSERT_EQUAL(plan.mem[s].peak_mbs_in_flight, 8 - s);
  double per_layer = (double)px_plan_layer_activation_bytes(&plan);
  double one_f1b = (double)plan.mem[0].activations_peak_bytes;
  /* p micro-batches x 4 layers = the model's 32 layers' worth, plus the embedding output */
  PX_ASSERT_REL(one_f1b, 32 * per_layer, 0.02);
  px_plan_free(&plan);

  p = par(1, 8, 1, 0, 1, 32);
  p.schedule = PX_SCHED_INTERLEAVED;
  p.vpp = 2;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  double inter = (double)plan.mem[0].activations_peak_bytes;
  PX_ASSERT_REL(inter / one_f1b, 1.0 + 7.0 / (8.0 * 2.0), 0.02);
  px_plan_free(&plan);
}

/* ---- FLOPs: Megatron-LM ---- */

static void test_flops(void) {
  px_model m = gpt(24, 2048, 16, 2048, 0.1);
  px_cluster c = cluster("dgx-a100", 32);
  double l = 24, h = 2048, s = 2048, V = 51200;
  for (int rc = 0; rc <= PX_RECOMPUTE_FULL; rc++) { /* Megatron's modes (per-op: test_recompute_op) */
    px_parallel p = par(2, 2, 8, 1, 2, 64);
    p.recompute = rc;
    p.attention = PX_ATTN_UNFUSED;
    px_plan plan;
    px_err err = {0};
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    double B = 64;
    double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    PX_ASSERT_REL(plan.model_flops_per_step, model, 0.005);
    if (rc == PX_RECOMPUTE_FULL) {
      double hw = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
      PX_ASSERT_REL(plan.hw_flops_per_step, hw, 0.005);
    }
    if (rc == PX_RECOMPUTE_NONE) PX_ASSERT_REL(plan.hw_flops_per_step, model, 1e-12);
    px_plan_free(&plan);
  }
}

/* ---- pipeline p2p ---- */

static void check_lifetimes(const px_plan *plan);

static void test_p2p_deadlock_free(void) {
  px_model m = gpt(128, 64, 4, 64, 0.0);
  int64_t pps[] = {2, 3, 4, 8, 16, 64};
  int64_t ms[] = {1, 2, 3, 7, 16, 64, 256};
  int checked = 0;
  for (size_t i = 0; i < sizeof pps / sizeof *pps; i++) {
    px_cluster c = cluster("dgx-a100", pps[i]);
    for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
      for (int sched = 0; sched < PX_SCHED_COUNT; sched++) {
        for (int64_t v = 2; v <= (sched == PX_SCHED_INTERLEAVED ? 4 : 2); v += 2) {
          int64_t pp = pps[i], mm = ms[j];
          if (sched == PX_SCHED_INTERLEAVED && (mm % pp || 128 % (pp * v))) continue;
          if (pp == 64 && mm == 256 && sched != PX_SCHED_1F1B) continue; /* keep the suite quick */
          px_parallel p = par(1, pp, c.gpus / pp, 0, 1, mm * (c.gpus / pp));
          p.schedule = sched;
          if (sched == PX_SCHED_INTERLEAVED) p.vpp = v;
          px_plan plan;
          px_err err = {0};
          px_status st = compile(&plan, &m, &c, &p, &err);
          if (st) fprintf(stderr, "\n  pp %lld m %lld %s: %s\n", (long long)pp, (long long)mm, px_schedule_names[sched], err.msg);
          CU_ASSERT_EQUAL_FATAL(st, PX_OK);
          st = px_plan_check_p2p(&plan, &err);
          if (st) fprintf(stderr, "\n  pp %lld m %lld %s v %lld: %s\n", (long long)pp, (long long)mm, px_schedule_names[sched], (long long)v, err.msg);
          CU_ASSERT_EQUAL(st, PX_OK);
          /* every send has exactly one receive pointing back at it */
          for (int64_t s = 0; s < pp; s++) {
            const px_program *prog = &plan.programs[s];
            for (int32_t k = 0; k < prog->ninsts; k++) {
              const px_inst *in = &prog->insts[k];
              if (in->block != PX_BLOCK_SEND_FWD && in->block != PX_BLOCK_SEND_BWD) continue;
              int64_t d = in->block == PX_BLOCK_SEND_FWD ? (s + 1) % pp : (s - 1 + pp) % pp;
              CU_ASSERT_FATAL(in->peer >= 0 && in->peer < plan.programs[d].ninsts);
              CU_ASSERT_EQUAL(plan.programs[d].insts[in->peer].peer, k);
            }
          }
          checked++;
          px_plan_free(&plan);
        }
      }
    }
  }
  CU_ASSERT(checked > 80);
}

/* Uneven chunks (126 layers on 16 stages, vpp 2..8, as Llama 3 405B) and
 * micro-batch counts pp does not divide (Megatron-Core's groups, default and
 * set): every send meets its receive and nothing deadlocks, with the p2p
 * overlapped or not; every tensor is allocated and freed once (13 layers). */
static void test_p2p_uneven(void) {
  px_model m = gpt(126, 64, 4, 64, 0.0);
  px_cluster c = cluster("dgx-a100", 16);
  int64_t ms[] = {16, 17, 19, 23, 31, 32, 33, 48, 50};
  int checked = 0;
  for (int64_t v = 2; v <= 7; v++)
    for (size_t j = 0; j < sizeof ms / sizeof *ms; j++)
      for (int64_t g = 0; g <= 1; g++)
        for (int ov = 0; ov <= 1; ov++) {
          if (v > 3 && (ov || g)) continue; /* keep the suite quick */
          px_parallel p = par(1, 16, 1, 0, 1, ms[j]);
          p.schedule = PX_SCHED_INTERLEAVED, p.vpp = v;
          if (g) p.mb_group = ms[j] >= 32 ? ms[j] : 0; /* one group of every micro-batch */
          if (ov) p.overlap = PX_OVERLAP_DP;
          px_plan plan;
          px_err err = {0};
          px_status st = compile(&plan, &m, &c, &p, &err);
          if (st) fprintf(stderr, "\n  v %lld m %lld: %s\n", (long long)v, (long long)ms[j], err.msg);
          CU_ASSERT_EQUAL_FATAL(st, PX_OK);
          st = px_plan_check_p2p(&plan, &err);
          if (st) fprintf(stderr, "\n  v %lld m %lld g %lld: %s\n", (long long)v, (long long)ms[j], (long long)px_parallel_mb_group(&plan.par), err.msg);
          CU_ASSERT_EQUAL(st, PX_OK);
          int64_t sum = 0;
          for (int64_t i = 0; i < 16 * v; i++) sum += plan.vstage_layers[i];
          CU_ASSERT_EQUAL(sum, 126);
          checked++;
          px_plan_free(&plan);
        }
  /* vpp 8 would make 128 chunks of 126 layers */
  px_parallel p = par(1, 16, 1, 0, 1, 16);
  p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 8;
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT(checked >= 60);
  /* lifetimes on a small uneven model */
  px_model small = gpt(13, 64, 4, 64, 0.1);
  px_cluster c4 = cluster("dgx-a100", 4);
  for (int64_t v = 1; v <= 3; v++)
    for (int64_t mm = 4; mm <= 9; mm++)
      for (int z = 0; z <= 3; z += 3) {
        px_parallel q = par(1, 4, 1, 0, 1, mm);
        q.schedule = v > 1 ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B, q.vpp = v;
        if (z) q = par(1, 2, 2, z, 1, 2 * mm), q.schedule = v > 1 ? PX_SCHED_INTERLEAVED : PX_SCHED_1F1B, q.vpp = v;
        CU_ASSERT_EQUAL_FATAL(compile(&plan, &small, &c4, &q, &err), PX_OK);
        check_lifetimes(&plan);
        CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
        px_plan_free(&plan);
      }
}

/* A deliberately broken order is caught. */
static void test_p2p_detects_deadlock(void) {
  px_model m = gpt(8, 64, 4, 64, 0.0);
  px_cluster c = cluster("dgx-a100", 2);
  px_parallel p = par(1, 2, 1, 0, 1, 4);
  px_plan plan;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
  /* Split stage 1's batches so its send waits alone before its receive: classic 1F1B deadlock. */
  px_program *prog = &plan.programs[1];
  for (int32_t k = 0; k < prog->ninsts; k++) prog->insts[k].batch = prog->insts[k].batch >= 0 ? k : -1;
  px_program *p0 = &plan.programs[0];
  for (int32_t k = 0; k < p0->ninsts; k++) p0->insts[k].batch = p0->insts[k].batch >= 0 ? k : -1;
  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_ERR_RUNTIME);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "deadlock"));
  px_plan_free(&plan);
}

/* ---- lifetimes: every tensor instance is allocated once and freed once ---- */

typedef struct {
  int16_t slot;
  int32_t mb, layer;
} key;

static int find_key(const key *live, int n, key k) {
  for (int i = 0; i < n; i++)
    if (live[i].slot == k.slot && live[i].mb == k.mb && live[i].layer == k.layer) return i;
  return -1;
}

static void check_lifetimes(const px_plan *plan) {
  for (int64_t s = 0; s < plan->par.pp; s++) {
    const px_program *prog = &plan->programs[s];
    key *live = calloc(20000, sizeof *live);
    int n = 0;
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      const px_block *b = &plan->blocks[in->block];
      for (int32_t k = 0; k < b->nops; k++) {
        const px_op *o = &b->ops[k];
        for (int32_t a = 0; a < o->alloc_count; a++) {
          px_ref r = b->allocs[o->alloc_start + a];
          key kk = {r.slot, in->mb, in->layer + r.layer_off};
          if (find_key(live, n, kk) >= 0)
            fprintf(stderr, "\n  stage %lld inst %d (%s): %s allocated twice\n", (long long)s, i,
                    px_block_names[in->block], plan->slots[r.slot].name);
          CU_ASSERT_FATAL(find_key(live, n, kk) < 0 && n < 20000);
          live[n++] = kk;
        }
        for (int32_t f = 0; f < o->free_count; f++) {
          px_ref r = b->frees[o->free_start + f];
          key kk = {r.slot, in->mb, in->layer + r.layer_off};
          int at = find_key(live, n, kk);
          if (at < 0)
            fprintf(stderr, "\n  stage %lld inst %d (%s, mb %d layer %d): frees %s (layer %d), not live\n",
                    (long long)s, i, px_block_names[in->block], in->mb, in->layer, plan->slots[r.slot].name,
                    kk.layer);
          CU_ASSERT_FATAL(at >= 0);
          live[at] = live[--n];
        }
      }
    }
    if (n) fprintf(stderr, "\n  stage %lld: %d tensors left live, first %s\n", (long long)s, n, plan->slots[live[0].slot].name);
    CU_ASSERT_EQUAL(n, 0);
    free(live);
  }
}

static void test_lifetimes(void) {
  px_model models[2];
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &models[0], &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-gpt", &models[1], &err), PX_OK);
  models[1].dropout = 0.1;
  px_cluster c = cluster("local-cpu", 8);
  c.gpus_per_node = 8;
  for (int mi = 0; mi < 2; mi++)
    for (int64_t tp = 1; tp <= 2; tp++)
      for (int64_t pp = 1; pp <= 4; pp *= 2)
        for (int sp = 0; sp <= (tp > 1); sp++)
          for (int rc = 0; rc < PX_RECOMPUTE_COUNT; rc++)
            for (int att = 0; att < PX_ATTN_COUNT; att++)
              for (int sched = 0; sched < PX_SCHED_COUNT; sched++)
                for (int z = 0; z < 4; z++) {
                  if (sched == PX_SCHED_INTERLEAVED && (pp == 1 || 4 % (pp * 2))) continue;
                  if (rc == PX_RECOMPUTE_OP && (mi == 1 || att == PX_ATTN_UNFUSED)) continue; /* refused */
                  px_parallel p = par(tp, pp, 2, z, 1, 8);
                  p.sp = sp, p.recompute = rc, p.attention = att, p.schedule = sched;
                  if (px_parallel_split_w(&p) && pp == 1) continue; /* refused: it needs a pipeline */
                  p.precision = PX_PREC_FP32;
                  if (sched == PX_SCHED_INTERLEAVED) p.vpp = 2, p.gbs = 2 * pp * 2;
                  px_cluster cc = c;
                  CU_ASSERT_EQUAL_FATAL(px_cluster_set_size(&cc, tp * pp * 2, 0, &err), PX_OK);
                  px_plan plan;
                  px_status st = compile(&plan, &models[mi], &cc, &p, &err);
                  if (st) fprintf(stderr, "\n  %s\n", err.msg);
                  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
                  check_lifetimes(&plan);
                  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
                  px_plan_free(&plan);
                }
}

/* ---- multi-token prediction ---- */

/* The MTP module (mtp_layers 1: tiny-mla with one, tiny-moe with one) on TP 1-2 with and without SP, PP 1-4
 * (interleaved, zero-bubble), ZeRO 0-3, recomputation: every tensor allocated and freed once, the pipeline
 * deadlock-free; its blocks once a micro-batch on the last stage only; with an untied table on several stages
 * the last stage's copy of it (mtp_emb_w) reduced with the first's (EMB_SYNC on both); and its forward FLOPs a
 * token in the step's model FLOPs as the model counts them (px_model_flops_per_token's forward_mtp_flops, the
 * backward's GEMMs twice that: the step grows by three times it, attention's backward aside). */
static void test_mtp(void) {
  const char *names[2] = {"tiny-mla", "tiny-moe"};
  px_err err = {0};
  for (int mi = 0; mi < 2; mi++) {
    px_model m = preset_model(names[mi]);
    m.mtp_layers = 1;
    for (int64_t tp = 1; tp <= 2; tp++)
      for (int64_t pp = 1; pp <= 4; pp *= 2)
        for (int sched = 0; sched < PX_SCHED_COUNT; sched++)
          for (int z = 0; z < 3; z += 2) /* ZeRO-3 refused (the module reads other blocks' parameters): below */
            for (int rc = 0; rc < PX_RECOMPUTE_COUNT; rc++)
              for (int f8 = 0; f8 < 2; f8++) {
              if (sched == PX_SCHED_INTERLEAVED && (pp == 1 || m.layers % (pp * 2))) continue;
              if (rc == PX_RECOMPUTE_OP) continue; /* refused: dense layers only */
              if (f8 && (sched != PX_SCHED_1F1B || rc != PX_RECOMPUTE_NONE)) continue; /* fp8: each split, each ZeRO */
              px_parallel p = par(tp, pp, 2, z, 1, 4 * pp);
              p.sp = tp > 1, p.schedule = sched, p.recompute = rc, p.mtp_layers = 1;
              p.precision = f8 ? PX_PREC_FP8 : PX_PREC_FP32;
              if (m.experts > 0) p.ep = 2;
              if (px_parallel_split_w(&p) && pp == 1) continue;
              if (sched == PX_SCHED_INTERLEAVED) p.vpp = 2;
              px_cluster c = cluster("dgx-h100", tp * pp * 2);
              px_plan plan;
              px_status st = compile(&plan, &m, &c, &p, &err);
              if (st) fprintf(stderr, "\n  %s tp %lld pp %lld sched %d zero %d rc %d: %s\n", names[mi], (long long)tp,
                              (long long)pp, sched, z, rc, err.msg);
              CU_ASSERT_EQUAL_FATAL(st, PX_OK);
              check_lifetimes(&plan);
              CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
              for (int64_t s = 0; s < pp; s++) {
                const px_program *prog = &plan.programs[s];
                int64_t fwd = 0, bwd = 0, emb = 0;
                for (int32_t i = 0; i < prog->ninsts; i++) {
                  fwd += prog->insts[i].block == PX_BLOCK_MTP_FWD;
                  bwd += prog->insts[i].block == PX_BLOCK_MTP_BWD;
                  emb += prog->insts[i].block == PX_BLOCK_EMB_SYNC;
                }
                CU_ASSERT_EQUAL(fwd, s == pp - 1 ? plan.microbatches : 0);
                CU_ASSERT_EQUAL(bwd, fwd);
                if (pp > 1 && (s == 0 || s == pp - 1)) CU_ASSERT(emb > 0);
              }
              if (tp == 1 && pp == 1 && z == 0 && rc == PX_RECOMPUTE_NONE && sched == PX_SCHED_1F1B && !f8) {
                px_parallel q = par(tp, pp, 2, z, 1, 4 * pp);
                q.precision = PX_PREC_FP32;
                if (m.experts > 0) q.ep = 2;
                px_plan ref;
                CU_ASSERT_EQUAL_FATAL(compile(&ref, &m, &c, &q, &err), PX_OK);
                px_model_flops f;
                px_model_flops_per_token(&m, plan.par.seq, &f);
                double tokens = (double)(plan.par.gbs * plan.par.seq);
                double added = (plan.model_flops_per_step - ref.model_flops_per_step) / tokens;
                CU_ASSERT(added > 2.9 * f.forward_mtp_flops && added < 3.3 * f.forward_mtp_flops);
                if (!(added > 2.9 * f.forward_mtp_flops && added < 3.3 * f.forward_mtp_flops))
                  fprintf(stderr, "\n  %s: MTP adds %g FLOP a token, forward %g\n", names[mi], added, f.forward_mtp_flops);
                px_plan_free(&ref);
              }
              px_plan_free(&plan);
            }
  }
  /* with ZeRO-3 refused by name: the module's block would read the head's parameters ungathered */
  px_model m = preset_model("tiny");
  m.mtp_layers = 1;
  px_parallel p = par(1, 1, 2, 3, 1, 4);
  p.mtp_layers = 1;
  px_cluster c = cluster("dgx-h100", 2);
  px_plan plan;
  CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`mtp_layers` with `zero` 3"));
}

/* ---- zero-bubble memory ---- */

/* Qi et al. (ICLR 2024, section 2): ZB-H1 keeps p micro-batches in flight
 * on every stage, 1F1B's first stage (its peak) and no more than it; ZB-H2
 * 2p - 1, about (2p - 1) / p of 1F1B's peak. From the walk of the op
 * order, not a formula: Llama 3 70B, TP 8, PP 8, 32 micro-batches. */
static void test_zero_bubble_memory(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-70b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 512);
  for (int rc = PX_RECOMPUTE_NONE; rc <= PX_RECOMPUTE_SELECTIVE; rc++) {
    px_plan plans[3];
    int scheds[3] = {PX_SCHED_1F1B, PX_SCHED_ZB_H1, PX_SCHED_ZB_H2};
    for (int k = 0; k < 3; k++) {
      px_parallel p = par(8, 8, 8, 1, 1, 256);
      p.schedule = scheds[k], p.recompute = rc;
      CU_ASSERT_EQUAL_FATAL(compile(&plans[k], &m, &c, &p, &err), PX_OK);
    }
    double ref = (double)plans[0].mem[0].at_peak[PX_MEM_ACTIVATIONS];
    for (int64_t s = 0; s < 8; s++) {
      double h1 = (double)plans[1].mem[s].at_peak[PX_MEM_ACTIVATIONS];
      double h2 = (double)plans[2].mem[s].at_peak[PX_MEM_ACTIVATIONS];
      CU_ASSERT_EQUAL(plans[0].mem[s].peak_mbs_in_flight, 8 - s);
      CU_ASSERT_EQUAL(plans[1].mem[s].peak_mbs_in_flight, 8);
      CU_ASSERT_EQUAL(plans[2].mem[s].peak_mbs_in_flight, 15);
      if (s < 7) { /* the last stage also holds the head's logits */
        CU_ASSERT(h1 >= ref && h1 < 1.01 * ref);
        PX_ASSERT_REL(h2, ref * 15.0 / 8.0, 0.01);
      }
    }
    for (int k = 0; k < 3; k++) px_plan_free(&plans[k]);
  }
}

/* Zero-bubble with experts (tiny-moe-shared: a dense first layer, then MoE layers with a shared expert, on 2
 * stages, EP 2): a MoE layer's B has no weight-gradient GEMM, its W (moe_bwd_w) has the ones 1F1B's backward
 * has, the router's, the shared expert's and the experts' grouped GEMMs, with the same FLOPs in all; every
 * layer's W runs once per micro-batch, from the W block of its kind. */
static void test_zero_bubble_moe(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-moe-shared", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 4);
  px_plan ref, zb;
  px_parallel p = par(1, 2, 2, 1, 1, 8);
  p.ep = 2;
  CU_ASSERT_EQUAL_FATAL(compile(&ref, &m, &c, &p, &err), PX_OK);
  p = par(1, 2, 2, 1, 1, 8);
  p.ep = 2, p.schedule = PX_SCHED_ZB_H1;
  CU_ASSERT_EQUAL_FATAL(compile(&zb, &m, &c, &p, &err), PX_OK);
  int wgrads[3] = {0}; /* 1F1B's MoE backward, ZB's B, ZB's W: weight-gradient GEMMs */
  const px_block *blocks[3] = {&ref.blocks[PX_BLOCK_MOE_BWD], &zb.blocks[PX_BLOCK_MOE_BWD], &zb.blocks[PX_BLOCK_MOE_BWD_W]};
  for (int k = 0; k < 3; k++)
    for (int32_t i = 0; i < blocks[k]->nops; i++)
      wgrads[k] += blocks[k]->ops[i].kind == PX_OP_LINEAR_BWD_WEIGHT || blocks[k]->ops[i].kind == PX_OP_EXPERT_LINEAR_BWD_WEIGHT;
  CU_ASSERT_EQUAL(wgrads[0], 7); /* qkv, o, the router, the shared fc1 and fc2, the experts' fc1 and fc2 */
  CU_ASSERT_EQUAL(wgrads[1], 0);
  CU_ASSERT_EQUAL(wgrads[2], wgrads[0]);
  PX_ASSERT_REL(blocks[1]->flops[PX_PHASE_BWD] + blocks[2]->flops[PX_PHASE_BWD], blocks[0]->flops[PX_PHASE_BWD], 1e-12);
  PX_ASSERT_REL(zb.hw_flops_per_step, ref.hw_flops_per_step, 1e-12);
  int64_t w[2] = {0}; /* dense and MoE W instances */
  for (int s = 0; s < 2; s++)
    for (int32_t i = 0; i < zb.programs[s].ninsts; i++) {
      const px_inst *in = &zb.programs[s].insts[i];
      if (!px_block_is_layer_w((px_block_kind)in->block)) continue;
      bool moe = in->block == PX_BLOCK_MOE_BWD_W;
      CU_ASSERT_EQUAL(moe, px_model_layer_is_moe(&m, in->layer));
      w[moe]++;
    }
  CU_ASSERT_EQUAL(w[0], zb.microbatches);     /* layer 0 */
  CU_ASSERT_EQUAL(w[1], 3 * zb.microbatches); /* layers 1 to 3 */
  px_plan_free(&ref);
  px_plan_free(&zb);
}

/* Zero-bubble with ZeRO-3 (tiny, 2 stages, dp 2, resharding after the forward and not): W gathers no
 * parameter (it reads what B kept), so a step has 1F1B's gathers; each layer unit's gradient is
 * reduce-scattered after its last W, never after a B; the embedding's and head's after their backward. */
static void test_zero_bubble_zero3(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 4);
  for (int reshard = 0; reshard < 2; reshard++) {
    int64_t gathers[3] = {0};
    int scheds[3] = {PX_SCHED_1F1B, PX_SCHED_ZB_H1, PX_SCHED_ZB_H2};
    for (int k = 0; k < 3; k++) {
      px_plan q;
      px_parallel p = par(1, 2, 2, 3, 1, 8);
      p.schedule = scheds[k], p.reshard = reshard;
      CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
      int64_t after_w = 0, after_b = 0;
      for (int s = 0; s < 2; s++) {
        const px_program *g = &q.programs[s];
        for (int32_t i = 0; i < g->ninsts; i++) {
          const px_inst *in = &g->insts[i];
          gathers[k] += in->block == PX_BLOCK_PARAM_SYNC;
          for (int32_t j = 0; j < in->ndeps; j++) {
            const px_inst *d = &g->insts[g->deps[in->dep_start + j]];
            if (px_block_is_layer_w((px_block_kind)in->block)) CU_ASSERT(d->block != PX_BLOCK_PARAM_SYNC);
            if (in->block != PX_BLOCK_GRAD_SYNC) continue;
            after_w += px_block_is_layer_w((px_block_kind)d->block);
            after_b += px_block_is_layer_bwd((px_block_kind)d->block);
          }
          if (px_block_is_layer_w((px_block_kind)in->block)) CU_ASSERT(!(in->flags & PX_INSTF_RESHARD));
        }
      }
      if (k > 0) { /* a reduction per layer and micro-batch, after its W */
        CU_ASSERT_EQUAL(after_w, m.layers * q.microbatches);
        CU_ASSERT_EQUAL(after_b, 0);
      }
      px_plan_free(&q);
    }
    CU_ASSERT(gathers[0] > 0);
    CU_ASSERT_EQUAL(gathers[1], gathers[0]);
    CU_ASSERT_EQUAL(gathers[2], gathers[0]);
  }
}

/* ---- cluster what-ifs ---- */

/* --set: a field of the file changes (an optional one absent from the
 * preset too), the size stays, and unknown fields, values out of range,
 * wrong kinds and bad syntax are refused naming the field. */
static void test_cluster_set_field(void) {
  px_cluster c = cluster("dgx-h100", 512);
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "inter_node.nic_gbit_per_s=200", &err), PX_OK);
  PX_ASSERT_REL(c.nic_bytes_per_s, 200e9 / 8, 1e-12);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "gpu.hbm_gib=141", &err), PX_OK);
  CU_ASSERT_EQUAL(c.gpu.hbm_bytes, 141ull << 30);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "gpu.peak_tflops.bf16=1979", &err), PX_OK);
  PX_ASSERT_REL(c.gpu.peak_flops[PX_DTYPE_BF16], 1979e12, 1e-12);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "host.nvme_gb_per_s=25", &err), PX_OK);
  PX_ASSERT_REL(c.host_nvme_bytes_per_s, 25e9, 1e-12);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "inter_node.topology=fat_tree", &err), PX_OK);
  CU_ASSERT_EQUAL(c.net_kind, PX_NET_FAT_TREE);
  CU_ASSERT_EQUAL(c.gpus, 512);
  CU_ASSERT_EQUAL(c.nodes, 64);
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&c, "gpus_per_node=4", &err), PX_OK);
  CU_ASSERT_EQUAL(c.gpus, 512);
  CU_ASSERT_EQUAL(c.nodes, 128);
  /* an optional figure set to 0 (none), which the file then leaves out */
  px_cluster z = c;
  CU_ASSERT_EQUAL_FATAL(px_cluster_set_field(&z, "host.pcie_gb_per_s=0", &err), PX_OK);
  CU_ASSERT_EQUAL(px_cluster_host_link_bytes_per_s(&z), 0);
  /* each set is recorded, in order, for the outputs (and kept by a plan file's cluster) */
  char text[512];
  CU_ASSERT_STRING_EQUAL(px_cluster_overrides_text(&c, text, sizeof text),
                         "inter_node.nic_gbit_per_s=200, gpu.hbm_gib=141, gpu.peak_tflops.bf16=1979, "
                         "host.nvme_gb_per_s=25, inter_node.topology=fat_tree, gpus_per_node=4");
  cJSON *j = px_cluster_to_json(&c);
  px_cluster back;
  CU_ASSERT_EQUAL(px_cluster_from_json(j, "back.json", &back, &err), PX_OK);
  cJSON_Delete(j);
  CU_ASSERT_EQUAL(back.noverrides, 6);
  CU_ASSERT_STRING_EQUAL(back.overrides[5], "gpus_per_node=4");
  static const struct {
    const char *set, *says;
  } bad[] = {{"gpu.hbm_gibb=141", "unknown field 'gpu.hbm_gibb' (did you mean 'gpu.hbm_gib'?)"},
             {"gpu.hbm_gib=-1", "field 'gpu.hbm_gib'"},
             {"gpu.hbm_gib=lots", "gpu.hbm_gib"},
             {"inter_node.topology=torus", "'torus' is not one of"},
             {"fabric.speed=1", "no object on the way to 'fabric.speed'"},
             {"hbm", "expected FIELD=VALUE"},
             {"=3", "expected FIELD=VALUE"},
             /* decimal numbers only: what strtod would also take is a string, which the field refuses */
             {"gpu.hbm_gib=0x50", "field 'gpu.hbm_gib': expected a number, got a string"},
             {"gpu.hbm_gib=inf", "field 'gpu.hbm_gib': expected a number, got a string"},
             {"gpu.hbm_gib=nan", "field 'gpu.hbm_gib': expected a number, got a string"},
             {"gpu.hbm_gib= 80", "field 'gpu.hbm_gib': expected a number, got a string"},
             {"gpu.hbm_gib=1e999", "field 'gpu.hbm_gib': inf is out of range"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_cluster before = c;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(px_cluster_set_field(&c, bad[i].set, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, bad[i].says)) fprintf(stderr, "\n  --set %s: %s\n", bad[i].set, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].says));
    CU_ASSERT_EQUAL(memcmp(&before, &c, sizeof c), 0); /* unchanged */
  }
}

/* The Blackwell presets' per-GPU figures from the racks' and boards'
 * published totals (dense): GB300 NVL72 1,080 PFLOP/s fp4, 360 fp8, 180
 * bf16, 576 TB/s of HBM, 130 TB/s of NVLink for 72 GPUs, one 800 Gb/s
 * ConnectX-8 each; GB200 NVL72 1,440 PFLOP/s fp4 with sparsity; HGX B200
 * 9 PFLOP/s fp4 (the peak of nvfp4's GEMMs); HGX/DGX B300 for 8 GPUs 108
 * PFLOP/s fp4 dense, 72 fp8 and 36 bf16 with sparsity, 14.4 TB/s of NVLink,
 * 2.1 TB of HBM (usable), one 800 Gb/s ConnectX-8 each. */
static void test_blackwell_presets(void) {
  px_cluster c = cluster("dgx-gb300", 72);
  PX_ASSERT_REL(c.gpu.peak_flops[PX_DTYPE_FP4], 1080e15 / 72, 1e-12);
  PX_ASSERT_REL(c.gpu.peak_flops[PX_DTYPE_FP8], 360e15 / 72, 1e-12);
  PX_ASSERT_REL(c.gpu.peak_flops[PX_DTYPE_BF16], 180e15 / 72, 1e-12);
  PX_ASSERT_REL(c.gpu.hbm_bytes_per_s, 576e12 / 72, 1e-12);
  PX_ASSERT_REL(2 * c.intra_bytes_per_s, 130e12 / 72, 0.01); /* 1.8 TB/s both directions, 130 TB/s rounded */
  PX_ASSERT_REL(c.nic_bytes_per_s * c.nics_per_node / c.gpus_per_node, 800e9 / 8, 1e-12);
  CU_ASSERT_EQUAL(px_cluster_nvlink_domain(&c), 72);
  CU_ASSERT_EQUAL(c.gpus_per_node * c.nodes, 72);
  PX_ASSERT_REL(cluster("gb200-nvl72", 72).gpu.peak_flops[PX_DTYPE_FP4], 1440e15 / 2 / 72, 1e-12);
  PX_ASSERT_REL(cluster("dgx-b200", 8).gpu.peak_flops[PX_DTYPE_FP4], 9e15, 1e-12);
  px_cluster b300 = cluster("dgx-b300", 16);
  PX_ASSERT_REL(b300.gpu.peak_flops[PX_DTYPE_FP4], 108e15 / 8, 1e-12);
  PX_ASSERT_REL(b300.gpu.peak_flops[PX_DTYPE_FP8], 72e15 / 2 / 8, 1e-12);
  PX_ASSERT_REL(b300.gpu.peak_flops[PX_DTYPE_BF16], 36e15 / 2 / 8, 1e-12);
  PX_ASSERT_REL(2 * b300.intra_bytes_per_s, 14.4e12 / 8, 1e-12);
  /* the device's total (OpenXLA's b300.txtpb, device_memory_size), above the HGX page's rounded "2.1 TB" for 8 */
  PX_ASSERT_REL((double)b300.gpu.hbm_bytes, 297021865984.0, 1e-4);
  PX_ASSERT_REL(b300.nic_bytes_per_s * b300.nics_per_node / b300.gpus_per_node, 800e9 / 8, 1e-12);
  CU_ASSERT_EQUAL(px_cluster_nvlink_domain(&b300), 8); /* NVLink inside a node only: 2 nodes talk over the NICs */
  CU_ASSERT_EQUAL(b300.gpus_per_node * b300.nodes, 16);
  /* B300's attention is GB300's (the same die) as a share of the bf16 peak: the HGX part's lower clocks */
  CU_ASSERT_EQUAL_FATAL(b300.gpu.attention_len, c.gpu.attention_len);
  for (int i = 0; i < c.gpu.attention_len; i++) {
    CU_ASSERT_EQUAL(b300.gpu.attention[i].fmt, c.gpu.attention[i].fmt);
    for (int k = 0; k < c.gpu.attention[i].n; k++) {
      CU_ASSERT_EQUAL(b300.gpu.attention[i].seq[k], c.gpu.attention[i].seq[k]);
      PX_ASSERT_REL(b300.gpu.attention[i].tflops[k] / b300.gpu.peak_flops[PX_DTYPE_BF16],
                    c.gpu.attention[i].tflops[k] / c.gpu.peak_flops[PX_DTYPE_BF16], 1e-4);
    }
  }
  CU_ASSERT_EQUAL(cluster("dgx-h100", 8).gpu.peak_flops[PX_DTYPE_FP4], 0); /* Hopper has no fp4 */
  cJSON *j = px_cluster_to_json(&c);
  px_cluster back;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_cluster_from_json(j, "round trip", &back, &err), PX_OK);
  CU_ASSERT_EQUAL(back.gpu.peak_flops[PX_DTYPE_FP4], c.gpu.peak_flops[PX_DTYPE_FP4]);
  /* gpu.attention[].dtype and cudnn_version written back (bf16 by omission), and gpu.cudnn_version */
  CU_ASSERT_EQUAL_FATAL(back.gpu.attention_len, c.gpu.attention_len);
  CU_ASSERT_EQUAL(back.gpu.cudnn_version, c.gpu.cudnn_version);
  CU_ASSERT_EQUAL(c.gpu.cudnn_version, 92200);
  int formats[PX_ATTN_FORMAT_COUNT] = {0};
  for (int i = 0; i < c.gpu.attention_len; i++) {
    CU_ASSERT_EQUAL(back.gpu.attention[i].fmt, c.gpu.attention[i].fmt);
    CU_ASSERT_EQUAL(back.gpu.attention[i].cudnn_version, c.gpu.attention[i].cudnn_version);
    formats[c.gpu.attention[i].fmt]++;
  }
  /* cuDNN 9.22's six a format, and hd 128's two passes in bf16 and fp8 of 9.17 and 9.13.1 */
  CU_ASSERT(formats[PX_ATTN_BF16] == 10 && formats[PX_ATTN_FP8] == 10 && formats[PX_ATTN_MXFP8] == 6);
  cJSON_Delete(j);
}

/* Every preset cites a source for each datasheet figure (its own entry or
 * its object's) and for its GEMM model's figures (a microbenchmark, or the
 * GPU whose measurement it borrows: tests/test_sim.c reproduces them); a
 * source naming no field of the file is refused. */
static void test_cluster_sources(void) {
  static const char *const presets[] = {"dgx-a100", "dgx-h100", "hgx-h200", "hgx-h800", "a3-mega",
                                        "dgx-b200", "dgx-b300", "gb200-nvl72", "dgx-gb300", "local-cpu"};
  static const char *const figures[] = {"gpu.peak_tflops.bf16", "gpu.peak_tflops.fp32", "gpu.hbm_gib",
                                        "gpu.hbm_gb_per_s", "gpu.sm_count", "gpus_per_node", "intra_node.gb_per_s",
                                        "inter_node.nics_per_node", "inter_node.nic_gbit_per_s"};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
    px_cluster c = cluster(presets[i], 8);
    for (size_t f = 0; f < sizeof figures / sizeof *figures; f++) {
      if (!strcmp(presets[i], "local-cpu") && !strcmp(figures[f], "gpu.peak_tflops.bf16")) continue; /* fp32 only */
      const char *src = px_cluster_source_of(&c, figures[f]);
      if (!src) fprintf(stderr, "\n  %s: %s has no source\n", presets[i], figures[f]);
      CU_ASSERT_PTR_NOT_NULL(src);
    }
    static const char *const kernel[] = {"gpu.gemm.max_efficiency", "gpu.gemm.k_half", "gpu.gemm.tile_m",
                                         "gpu.gemm.tile_n", "gpu.gemm.fp8_max_efficiency"};
    for (size_t f = 0; f < sizeof kernel / sizeof *kernel && strcmp(presets[i], "local-cpu"); f++) {
      if (strstr(kernel[f], "fp8") && c.gpu.gemm_fp8_max_efficiency <= 0) continue; /* A100: no fp8 */
      const char *src = px_cluster_source_of(&c, kernel[f]);
      if (!src) fprintf(stderr, "\n  %s: %s has no source\n", presets[i], kernel[f]);
      CU_ASSERT_PTR_NOT_NULL(src);
    }
  }
  /* the A100's HBM share and attention curves are measured too */
  px_cluster a100 = cluster("dgx-a100", 8);
  CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&a100, "gpu.memory_efficiency"));
  CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&a100, "gpu.attention"));
  CU_ASSERT(a100.gpu.attention_len > 0);
  cJSON *root = cJSON_Parse("{\"gpu\": {\"name\": \"g\", \"peak_tflops\": {\"fp32\": 1}, \"hbm_gib\": 1, \"hbm_gb_per_s\": 1},"
                            " \"gpus_per_node\": 1, \"intra_node\": {\"gb_per_s\": 1, \"latency_us\": 1},"
                            " \"inter_node\": {\"nics_per_node\": 1, \"nic_gbit_per_s\": 1, \"latency_us\": 1},"
                            " \"sources\": {\"gpu.hbm_gib\": \"a datasheet\", \"gpu.hbm_gbps\": \"a typo\"}}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  px_cluster c;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_cluster_from_json(root, "x.json", &c, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.json: field 'sources.gpu.hbm_gbps' names no field of the file"));
  cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "sources"), "gpu.hbm_gbps");
  CU_ASSERT_EQUAL_FATAL(px_cluster_from_json(root, "x.json", &c, &err), PX_OK);
  CU_ASSERT_STRING_EQUAL(px_cluster_source_of(&c, "gpu.hbm_gib"), "a datasheet");
  CU_ASSERT_PTR_NULL(px_cluster_source_of(&c, "gpu.hbm_gb_per_s"));
  cJSON_Delete(root);
}

/* ---- layers, grid ---- */

static void test_layer_split(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-405b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 16384);
  px_parallel p = par(8, 16, 128, 1, 1, 2048);
  p.seq = 8192;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  /* Llama 3 405B: 126 layers on 16 stages, 7 on the first and last (embedding and loss). */
  CU_ASSERT_EQUAL(plan.vstage_layers[0], 7);
  CU_ASSERT_EQUAL(plan.vstage_layers[15], 7);
  for (int i = 1; i < 15; i++) CU_ASSERT_EQUAL(plan.vstage_layers[i], 8);
  CU_ASSERT_EQUAL(plan.vstage_first[15], 119);
  /* Only pp programs exist, whatever the DP size. */
  CU_ASSERT_EQUAL(plan.grid.world, 16384);
  CU_ASSERT(plan.grid.tp_place.intra);
  CU_ASSERT_EQUAL(plan.grid.dp_place.nodes, 128);
  CU_ASSERT_EQUAL(plan.grid.dp_place.per_node, 1);
  CU_ASSERT_EQUAL(plan.grid.pp_place.nodes, 16);
  px_plan_free(&plan);
  /* Interleaved, vpp 2: chunk 0 of the first stage and chunk 1 of the last hold 3 layers, every other 4:
   * still 7 on the first and last stage, 8 elsewhere; --first/last-stage-layers 7 give the same. */
  p = par(8, 16, 128, 1, 1, 2048);
  p.seq = 8192, p.sp = 1, p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 2;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  int64_t want[32];
  for (int i = 0; i < 32; i++) want[i] = i == 0 || i == 31 ? 3 : 4;
  for (int i = 0; i < 32; i++) CU_ASSERT_EQUAL(plan.vstage_layers[i], want[i]);
  CU_ASSERT_EQUAL(plan.programs[0].nlayers, 7);
  CU_ASSERT_EQUAL(plan.programs[15].nlayers, 7);
  CU_ASSERT_EQUAL(plan.programs[7].nlayers, 8);
  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
  px_plan_free(&plan);
  p.first_stage_layers = p.last_stage_layers = 7;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  for (int i = 0; i < 32; i++) CU_ASSERT_EQUAL(plan.vstage_layers[i], want[i]);
  px_plan_free(&plan);
  /* Megatron-Core's rule when vpp divides them: 6 and 4 layers, 2 + 2 + 2 and 2 + 2 + 2 + ... */
  p.vpp = 2, p.first_stage_layers = 6, p.last_stage_layers = 8; /* 112 left: 4 per middle chunk */
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(plan.vstage_layers[0] == 3 && plan.vstage_layers[16] == 3);
  CU_ASSERT(plan.vstage_layers[15] == 4 && plan.vstage_layers[31] == 4);
  for (int s = 1; s < 15; s++) CU_ASSERT(plan.vstage_layers[s] == 4 && plan.vstage_layers[16 + s] == 4);
  px_plan_free(&plan);
  /* 1F1B, only the first stage given: the last counts as a middle stage (Megatron-Core) */
  p = par(8, 16, 128, 1, 1, 2048);
  p.seq = 8192, p.first_stage_layers = 6; /* 120 left over 15 stages */
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(plan.vstage_layers[0], 6);
  for (int s = 1; s < 16; s++) CU_ASSERT_EQUAL(plan.vstage_layers[s], 8);
  px_plan_free(&plan);
  /* an explicit list, virtual-stage order */
  p = par(8, 2, 1024, 1, 1, 2048);
  p.seq = 8192, p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 2;
  CU_ASSERT_EQUAL(px_parallel_parse_chunk_list("30,33,33,30", &p, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(plan.vstage_layers[0] == 30 && plan.vstage_layers[1] == 33 && plan.vstage_first[3] == 96);
  CU_ASSERT(plan.programs[0].nlayers == 63 && plan.programs[1].nlayers == 63);
  /* and the fields survive the plan file */
  cJSON *j = px_parallel_to_json(&plan.par);
  px_parallel back;
  CU_ASSERT_EQUAL(px_parallel_from_json(j, "t", &back, &err), PX_OK);
  CU_ASSERT(back.nchunk_layers == 4 && back.chunk_layers[1] == 33 && back.chunk_layers[3] == 30);
  cJSON_Delete(j);
  px_plan_free(&plan);
  p = par(8, 16, 128, 1, 1, 2048);
  p.seq = 8192, p.vpp = 1, p.bucket_bytes = 1 << 20, p.first_stage_layers = 6, p.last_stage_layers = 8, p.mb_group = 17;
  j = px_parallel_to_json(&p);
  px_status st0 = px_parallel_from_json(j, "t", &back, &err);
  if (st0) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL(st0, PX_OK);
  CU_ASSERT(back.first_stage_layers == 6 && back.last_stage_layers == 8 && back.mb_group == 17 && !back.nchunk_layers);
  cJSON_Delete(j);
  CU_ASSERT_EQUAL(px_parallel_parse_chunk_list("3,,4", &p, &err), PX_ERR_INPUT);
  /* the first and last chunk may hold only the embedding or the loss (Megatron-Core's account_for_embedding/
   * loss_in_pipeline_split): 405B at pp 16 x vpp 8, 128 chunks of one layer but the ends, as Megatron-Bridge
   * runs it on GB200; a middle chunk may not, nor the default split hold fewer layers than chunks */
  p = par(8, 16, 128, 1, 1, 2048);
  p.seq = 8192, p.schedule = PX_SCHED_INTERLEAVED, p.vpp = 8, p.nchunk_layers = 128;
  for (int i = 0; i < 128; i++) p.chunk_layers[i] = i == 0 || i == 127 ? 0 : 1;
  px_status st1 = compile(&plan, &m, &c, &p, &err);
  if (st1) fprintf(stderr, "\n  %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(st1, PX_OK);
  CU_ASSERT(plan.vstage_layers[0] == 0 && plan.vstage_layers[127] == 0 && plan.vstage_first[127] == 126);
  CU_ASSERT(plan.programs[0].nlayers == 7 && plan.programs[15].nlayers == 7 && plan.programs[1].nlayers == 8);
  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
  px_plan_free(&plan);
  p.chunk_layers[0] = 1, p.chunk_layers[5] = 0;
  CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "model chunk 5 (stage 5, chunk 0) would hold no layer (only the first"));
  p.nchunk_layers = 0;
  CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pp 16 x vpp 8 stages is more than the 126 layers"));
  CU_ASSERT_EQUAL(px_parallel_parse_chunk_list("0,4,3,0", &p, &err), PX_OK);
  /* overlap: tp-bwd its own switch (in the default), tp implying it; the plan file says the same bits back */
  int bits = -1;
  CU_ASSERT_EQUAL(px_overlap_parse("tp-bwd", &bits, &err), PX_OK);
  CU_ASSERT_EQUAL(bits, PX_OVERLAP_TP_BWD);
  CU_ASSERT_EQUAL(px_overlap_parse("dp,tp", &bits, &err), PX_OK);
  CU_ASSERT_EQUAL(bits, PX_OVERLAP_DP | PX_OVERLAP_TP | PX_OVERLAP_TP_BWD);
  CU_ASSERT_EQUAL(px_overlap_parse("all", &bits, &err), PX_OK);
  CU_ASSERT_EQUAL(bits, PX_OVERLAP_ALL);
  CU_ASSERT_EQUAL(px_overlap_parse("tp-fwd", &bits, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tp-bwd"));
  CU_ASSERT(PX_OVERLAP_DEFAULT & PX_OVERLAP_TP_BWD && !(PX_OVERLAP_DEFAULT & PX_OVERLAP_TP));
  int ovs[] = {PX_OVERLAP_DEFAULT, PX_OVERLAP_ALL, PX_OVERLAP_DP | PX_OVERLAP_TP_BWD, 0};
  const char *said[] = {"dp,zero,pp,tp-bwd", "dp,zero,pp,tp", "dp,tp-bwd", "none"};
  for (int i = 0; i < 4; i++) {
    p.overlap = ovs[i];
    j = px_parallel_to_json(&p);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "overlap")), said[i]);
    CU_ASSERT_EQUAL(px_parallel_from_json(j, "t", &back, &err), PX_OK);
    CU_ASSERT_EQUAL(back.overlap, ovs[i]);
    cJSON_Delete(j);
  }
  /* TP 4 on 8-GPU nodes: two DP members share a node. */
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama2-7b", &m, &err), PX_OK);
  c = cluster("dgx-a100", 32);
  p = par(4, 1, 8, 0, 1, 8);
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(plan.grid.tp_place.intra);
  CU_ASSERT_EQUAL(plan.grid.dp_place.per_node, 2);
  CU_ASSERT_EQUAL(plan.grid.dp_place.nodes, 4);
  int64_t t, cr, d, q;
  px_grid_coords(&plan.grid, 13, &t, &cr, &d, &q);
  CU_ASSERT(t == 1 && cr == 0 && d == 3 && q == 0);
  CU_ASSERT_EQUAL(px_grid_rank(&plan.grid, 1, 0, 3, 0), 13);
  px_plan_free(&plan);
}

/* ---- context parallelism ---- */

/* A CP plan's layer is the cp=1 layer of seq / cp tokens plus what each
 * algorithm keeps for the backward: nothing more for the ring (its blocks
 * are scratch), the gathered K and V instead of the rank's for all-gather
 * ((cp - 1) x 2 b s/cp kv_width bytes), and for a2a the head-split q, k, v
 * and context instead of q, k, v (one more context, b s/cp h bytes). The
 * CP group's bytes on the wire per layer and micro-batch are those of
 * docs/compiler.md's table, and the step's FLOPs are the cp=1 step's. */
static void test_context_parallel(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 64);
  /* the grid: TP fastest, then CP, DP, PP */
  px_parallel p = par(4, 2, 2, 0, 1, 16);
  p.cp = 4, p.seq = 32768;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(plan.grid.cp_place.size, 4);
  CU_ASSERT_EQUAL(plan.grid.cp_place.stride, 4);
  CU_ASSERT_EQUAL(plan.grid.cp_place.nodes, 2); /* tp 4 x cp 4 spans two 8-GPU nodes */
  CU_ASSERT_EQUAL(plan.grid.dp_place.size, 8);  /* gradients over dp x cp */
  CU_ASSERT_EQUAL(plan.grid.pp_place.stride, 32);
  int64_t t, cr, d, q;
  px_grid_coords(&plan.grid, 55, &t, &cr, &d, &q);
  CU_ASSERT(t == 3 && cr == 1 && d == 1 && q == 1);
  CU_ASSERT_EQUAL(px_grid_rank(&plan.grid, 3, 1, 1, 1), 55);
  CU_ASSERT_EQUAL(plan.seq_cp, 8192);
  px_plan_free(&plan);
  /* the load-balanced layout: rank r holds chunks r and 2 cp - 1 - r */
  CU_ASSERT_EQUAL(px_cp_position(4, 1, 8, 0), 4);  /* chunk 1 of 8 chunks of 4 */
  CU_ASSERT_EQUAL(px_cp_position(4, 1, 8, 3), 7);
  CU_ASSERT_EQUAL(px_cp_position(4, 1, 8, 4), 24); /* chunk 6 = 2 x 4 - 1 - 1 */
  CU_ASSERT_EQUAL(px_cp_position(4, 0, 8, 7), 31); /* chunk 7 */

  /* memory, bytes on the wire and FLOPs on 16 GPUs, tp 4, bf16, b = 2 */
  c = cluster("dgx-h100", 16);
  const int64_t cp = 2, seq = 16384, B = 2, S = seq / cp, KW = 8 / 4 * 128, QW = 32 / 4 * 128, e = 2;
  px_parallel ref = par(4, 1, 4, 0, B, 8);
  ref.seq = S; /* the cp=1 layer of seq / cp tokens */
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &ref, &err), PX_OK);
  double base = (double)px_plan_layer_activation_bytes(&plan);
  px_plan_free(&plan);
  px_parallel one = par(4, 1, 4, 0, B, 8);
  one.seq = seq;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &one, &err), PX_OK);
  double flops = plan.model_flops_per_step;
  px_plan_free(&plan);
  double mb = 8.0 / (double)(B * 2), L = 32; /* micro-batches per rank (dp 2), layers */
  for (int a = 0; a < PX_CP_ALGO_COUNT; a++) {
    p = par(4, 1, 2, 0, B, 8);
    p.cp = cp, p.cp_algo = a, p.seq = seq;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    double extra = a == PX_CP_ALLGATHER ? (double)((cp - 1) * 2 * B * S * KW * e) : a == PX_CP_A2A ? (double)(B * S * QW * e) : 0;
    PX_ASSERT_REL((double)px_plan_layer_activation_bytes(&plan), base + extra, 1e-12);
    /* per layer and micro-batch: ring (cp-1) K/V blocks forward, 2cp-1 blocks backward (K/V and their
     * gradients); all-gather (cp-1)/cp of the gathered K and V each way; a2a (cp-1)/cp of q, k, v and the
     * context each way */
    double kv = (double)(2 * B * S * KW * e), f = (double)(cp - 1) / (double)cp, per;
    if (a == PX_CP_RING) per = (double)(cp - 1) * kv + (double)(2 * cp - 1) * kv;
    else if (a == PX_CP_ALLGATHER) per = 2.0 * f * kv * (double)cp;
    else per = 2.0 * f * (double)(B * S * (2 * QW + 2 * KW) * e);
    PX_ASSERT_REL(plan.totals[0].wire_bytes[PX_GROUP_CP], per * L * mb, 1e-9);
    PX_ASSERT_REL(plan.model_flops_per_step, flops, 1e-9);
    px_plan_free(&plan);
  }
}

/* ---- mixture of experts ---- */

/* The slot op o reads at in[j] (or writes at out[j]), by name; "" where none. */
static const char *operand_name(const px_plan *p, const px_op *o, bool out, int j) {
  px_ref r = out ? o->out[j] : o->in[j];
  return r.slot >= 0 ? p->slots[r.slot].name : "";
}

/* The router's gates applied in the experts' activation, as Megatron-Core's grouped experts do
 * (weighted_bias_swiglu_impl, megatron/core/transformer/moe/experts.py at d98e8a6): Qwen3-30B-A3B on 8 H100s,
 * ep 8 (and tp = etp 2, ep 4), mbs 1 of 4096 tokens. The dispatch permutes and sends each routed row's gate
 * with it, the SwiGLU multiplies by it, the combine is a plain sum; the backward takes the gates' gradient
 * from the SwiGLU's backward (which reads its input, kept anyway) back through the exchanges to the
 * permutation's backward and the router. So a MoE layer no longer keeps the experts' returned outputs (A
 * routed rows x H in bf16) nor the gates (B S k fp32) and keeps the received rows' gates (R buffer rows, fp32):
 * its kept bytes fall from those the graph that weighted the combine kept (measured at b5d4d6b) by
 * A H 2 + B S k 4 - R 4. */
/* The experts' padding to the quantized GEMMs' alignment (plan/mlp.c pad_bytes): under an fp8 recipe the
 * alltoall and DeepEP dispatchers' permutations and their inverses, forward and backward, each move 2 R H bytes
 * more (a copy of the R expert rows in bf16, read and written: Megatron-Core's Fp8Padding / Fp8Unpadding);
 * HybridEP's, which pads in its dispatch, none. */
static void test_moe_quant_padding(void) {
  px_model m = preset_model("qwen3-30b-a3b");
  px_err err = {0};
  px_cluster c = cluster("dgx-h100", 8);
  static const int dispatchers[] = {PX_MOE_A2A, PX_MOE_DEEPEP, PX_MOE_HYBRIDEP};
  for (size_t di = 0; di < sizeof dispatchers / sizeof *dispatchers; di++) {
    int dispatch = dispatchers[di];
    px_plan q[3]; /* bf16, fp8, fp8 with the router's padding (moe_router_padding: no copies) */
    for (int v = 0; v < 3; v++) {
      px_parallel p = par(1, 1, 8, 1, 1, 64);
      p.seq = 4096, p.ep = 8, p.etp = 1, p.moe_dispatch = dispatch, p.moe_router_padding = v == 2;
      p.precision = v ? PX_PREC_FP8 : PX_PREC_BF16, p.fp8_recipe = v ? PX_FP8_CURRENT : -1;
      CU_ASSERT_EQUAL_FATAL(compile(&q[v], &m, &c, &p, &err), PX_OK);
    }
    double R = (double)px_plan_expert_buffer_rows(&q[0]), want = dispatch != PX_MOE_HYBRIDEP ? 2.0 * R * 2048 * 2 : 0.0;
    for (int v = 1; v < 3; v++) {
      int seen = 0;
      for (int k = PX_BLOCK_MOE_FWD; k <= PX_BLOCK_MOE_BWD; k += PX_BLOCK_MOE_BWD - PX_BLOCK_MOE_FWD) {
        const px_block *b0 = &q[0].blocks[k], *b1 = &q[v].blocks[k];
        for (int32_t i = 0, j = 0; i < b0->nops; i++) {
          px_op_kind kind = (px_op_kind)b0->ops[i].kind;
          if (kind != PX_OP_MOE_PERMUTE && kind != PX_OP_MOE_UNPERMUTE && kind != PX_OP_MOE_PERMUTE_BWD &&
              kind != PX_OP_MOE_UNPERMUTE_BWD)
            continue;
          while (j < b1->nops && b1->ops[j].kind != kind) j++;
          CU_ASSERT_FATAL(j < b1->nops);
          PX_ASSERT_REL(b1->ops[j].bytes - b0->ops[i].bytes + 1.0, (v == 1 ? want : 0.0) + 1.0, 1e-9);
          j++, seen++;
        }
      }
      CU_ASSERT_EQUAL(seen, 4);
    }
    for (int v = 0; v < 3; v++) px_plan_free(&q[v]);
  }
  /* the router pads only for quantized GEMMs, and not for the allgather dispatcher (Megatron-Core refuses both) */
  for (int bad = 0; bad < 2; bad++) {
    px_parallel p = par(1, 1, 8, 1, 1, 64);
    p.seq = 4096, p.ep = 8, p.etp = 1, p.moe_router_padding = 1;
    p.moe_dispatch = bad ? PX_MOE_ALLGATHER : PX_MOE_A2A, p.precision = bad ? PX_PREC_FP8 : PX_PREC_BF16;
    px_plan q;
    err = (px_err){0};
    CU_ASSERT_EQUAL(compile(&q, &m, &c, &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad ? "allgather" : "mxfp8 or nvfp4, not bf16"));
  }
}

static void test_moe_gates_in_activation(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("qwen3-30b-a3b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 8);
  const double H = 2048, K = 8, old_kept[] = {602244096, 368231936};
  for (int etp = 1; etp <= 2; etp++) {
    px_parallel p = par(etp, 1, 8 / etp, 1, 1, 64);
    p.seq = 4096, p.ep = 8 / etp, p.etp = etp, p.sp = etp > 1;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    double rows = 4096.0 / etp, A = rows * K, R = (double)px_plan_expert_buffer_rows(&plan);
    CU_ASSERT_EQUAL(R, 32768);
    PX_ASSERT_EQ_U64(px_plan_kept_bytes(&plan, PX_BLOCK_MOE_FWD),
                     (uint64_t)(old_kept[etp - 1] - A * H * 2 - rows * K * 4 + R * 4));
    int act = 0, combine = 0, carried = 0;
    const px_block *fwd = &plan.blocks[PX_BLOCK_MOE_FWD];
    for (const px_op *o = fwd->ops; o < fwd->ops + fwd->nops; o++) {
      if (o->kind == PX_OP_SWIGLU && !strcmp(operand_name(&plan, o, false, 0), "exp_gate")) {
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, false, 2), "moe_recv_w");
        CU_ASSERT_EQUAL(o->dim[1], m.moe_ffn_hidden / etp); /* a gate a row of the ETP rank's slice */
        act++;
      }
      if (o->kind == PX_OP_MOE_UNPERMUTE) { /* a plain sum: no gates */
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, false, 1), "");
        combine++;
      }
      carried += (o->kind == PX_OP_ALLTOALL || o->group == PX_GROUP_ETP) && o->in[2].slot >= 0;
    }
    CU_ASSERT_EQUAL(act, 1);
    CU_ASSERT_EQUAL(combine, 1);
    CU_ASSERT_EQUAL(carried, etp); /* the dispatch's all-to-all, and with etp 2 its all-gather */
    int act_bwd = 0, route_bwd = 0, permute_bwd = 0;
    const px_block *bwd = &plan.blocks[PX_BLOCK_MOE_BWD];
    for (const px_op *o = bwd->ops; o < bwd->ops + bwd->nops; o++) {
      for (int j = 0; j < PX_OP_INS; j++) { /* the returned outputs and the gates are not read again */
        CU_ASSERT(strcmp(operand_name(&plan, o, false, j), "moe_ret") != 0);
        CU_ASSERT(strcmp(operand_name(&plan, o, false, j), "moe_gates") != 0);
      }
      if (o->kind == PX_OP_SWIGLU_BWD && !strcmp(operand_name(&plan, o, false, 1), "exp_gate")) {
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, false, 3), "moe_recv_w");
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, true, 2), "dmoe_recv_w");
        act_bwd++;
      }
      if (o->kind == PX_OP_MOE_PERMUTE_BWD) {
        CU_ASSERT_EQUAL(route_bwd, 0); /* the gates' gradients before the router's backward reads them */
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, true, 1), "dmoe_gates");
        permute_bwd++;
      }
      if (o->kind == PX_OP_MOE_ROUTE_BWD) {
        CU_ASSERT_STRING_EQUAL(operand_name(&plan, o, false, 0), "dmoe_gates");
        route_bwd++;
      }
    }
    CU_ASSERT_EQUAL(act_bwd, 1);
    CU_ASSERT_EQUAL(permute_bwd, 1);
    CU_ASSERT_EQUAL(route_bwd, 1);
    px_plan_free(&plan);
  }
}

/* Mixtral 8x7B on 64 H100s, tp 2 (SP) x ep 8 (dp 32), ZeRO-1: each rank
 * holds its TP half of the attention, the router, and one expert's ETP half
 * (etp = tp); the experts' optimizer states are sharded over the 4 ranks
 * holding the same expert, the rest over all 32; each rank routes its
 * sequence shard (A = B s/tp k rows), the EP all-to-alls send (ep - 1)/ep of
 * them four times a layer and micro-batch and the ETP all-gathers and
 * reduce-scatters (etp - 1)/etp of the etp A rows the experts take; the
 * step's FLOPs are the model's (2 x the weights a token passes through, the
 * top-2 experts', x 3, plus attention); --moe-imbalance 2 doubles the rows
 * the experts keep. With etp 1 (Megatron-Core's folding): EP 8 consecutive
 * ranks, each a whole expert, no ETP traffic, expert states over 8 ranks. */
static void test_moe(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 64);
  px_parallel p = par(2, 1, 32, 1, 1, 256);
  p.ep = 8, p.seq = 4096, p.sp = 1;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(plan.grid.ep_place.size, 8);
  CU_ASSERT_EQUAL(plan.grid.ep_place.stride, 2);
  CU_ASSERT_EQUAL(plan.grid.edp_place.size, 4);
  CU_ASSERT_EQUAL(plan.grid.edp_place.stride, 16);
  /* folded with etp 1 (Megatron-Core's etp-ep-edp order over the 64 ranks): EP the 8 consecutive ranks, the
   * expert-DP group 2 x 32 / 8 = 8 ranks 8 apart, each expert's GEMMs unsplit */
  px_grid g = plan.grid;
  px_grid_set_ep(&g, 8, 1);
  CU_ASSERT_EQUAL(g.etp_place.size, 1);
  CU_ASSERT_EQUAL(g.ep_place.size, 8);
  CU_ASSERT_EQUAL(g.ep_place.stride, 1);
  CU_ASSERT_EQUAL(g.edp_place.size, 8);
  CU_ASSERT_EQUAL(g.edp_place.stride, 8);
  CU_ASSERT_EQUAL(plan.grid.etp_place.size, 2); /* etp = tp: the TP group */
  double H = 4096, Q = 4096, KV = 1024, Fe = 14336, E = 8, L = 32, V = 32000, tp = 2;
  double attn = (H * (Q + 2 * KV) + Q * H) / tp, expert = 3 * H * Fe / tp;
  double dense = L * (attn + 2 * H + E * H) + 2 * V * H / tp + H, experts = L * expert; /* one local expert */
  PX_ASSERT_REL((double)plan.programs[0].param_elems, dense + experts, 1e-12);
  px_states st;
  px_plan_states(&plan, 0, &st);
  PX_ASSERT_REL((double)st.opt_elems, dense / 32 + experts / 4, 1e-4); /* units padded to their ranks */
  int expert_units = 0;
  for (int32_t u = 0; u < plan.programs[0].nunits; u++) expert_units += plan.programs[0].units[u].expert;
  CU_ASSERT(expert_units >= 32);
  /* four exchanges of the routed rows each way (EP all-to-all, ETP gather or reduce-scatter); the dispatch's
   * and its backward's carry each row's fp32 gate too (for the experts' activation and back to the router) */
  double A = 4096 / tp * 2, e = 2, mb = 256.0 / 32, gates = 2 * 4;
  PX_ASSERT_REL(plan.totals[0].wire_bytes[PX_GROUP_EP], L * mb * 7.0 / 8 * A * (4 * H * e + gates), 1e-9);
  PX_ASSERT_REL(plan.totals[0].wire_bytes[PX_GROUP_ETP], L * mb * 0.5 * (tp * A) * (4 * H * e + gates), 1e-9);
  px_model_flops f;
  px_model_flops_per_token(&m, 4096, &f);
  PX_ASSERT_REL(plan.model_flops_per_step, f.train_flops * 256 * 4096, 5e-3);
  CU_ASSERT_EQUAL(px_plan_expert_rows(&plan), 8192);
  double act = (double)plan.mem[0].activations_peak_bytes, flops = plan.model_flops_per_step;
  px_plan_free(&plan);
  p = par(2, 1, 32, 1, 1, 256);
  p.ep = 8, p.seq = 4096, p.sp = 1, p.moe_imbalance = 2;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(px_plan_expert_rows(&plan), 16384);
  CU_ASSERT(plan.mem[0].activations_peak_bytes > act);
  px_plan_free(&plan);
  /* moe_buffers worst: the buffers hold every routing a dropless router can make, by hand: each of the 8 EP
   * ranks routes mbs x s / tp = 2048 tokens, each sends at most min(top-2, 1 local expert) = 1 copy of each to
   * a rank's experts, so 8 x 2048 x 1 rows, x etp 2 after the ETP gather: 32768 rows of H in every expert-row
   * slot (8192 at the busiest rank's moe_imbalance 1). The costs keep the busiest rank's rows: the same FLOPs
   * and expert GEMM shapes, more activation memory. With ep 2 (4 local experts), min(2, 4) = 2 copies of each
   * of 2 x 2048 tokens: 8192 rows, x etp 2. */
  p = par(2, 1, 32, 1, 1, 256);
  p.ep = 8, p.seq = 4096, p.sp = 1, p.moe_buffers = PX_MOE_BUF_WORST;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(px_plan_expert_rows(&plan), 8192);
  CU_ASSERT_EQUAL(px_plan_expert_buffer_rows(&plan), 32768);
  int rows_slots = 0;
  for (int32_t i = 0; i < plan.nslots; i++) {
    const char *nm = plan.slots[i].name;
    if (!strcmp(nm, "moe_recv") || !strcmp(nm, "exp_gate") || !strcmp(nm, "exp_up") || !strcmp(nm, "exp_act") ||
        !strcmp(nm, "exp_out")) {
      CU_ASSERT_EQUAL(plan.slots[i].shape[0], 32768);
      rows_slots++;
    } else if (!strcmp(nm, "moe_recv_ep") || !strcmp(nm, "exp_out_ep")) {
      CU_ASSERT_EQUAL(plan.slots[i].shape[0], 16384);
      rows_slots++;
    }
  }
  CU_ASSERT_EQUAL(rows_slots, 7);
  PX_ASSERT_REL(plan.model_flops_per_step, flops, 1e-12);
  PX_ASSERT_REL(plan.totals[0].wire_bytes[PX_GROUP_EP], L * mb * 7.0 / 8 * A * (4 * H * e + gates), 1e-9);
  const px_block *fwd = &plan.blocks[PX_BLOCK_LAYER_FWD];
  for (const px_op *o = fwd->ops; o < fwd->ops + fwd->nops; o++)
    if (o->kind == PX_OP_EXPERT_LINEAR) CU_ASSERT_EQUAL(o->dim[0], 8192); /* the busiest rank's 8192 rows, 1 expert */
  CU_ASSERT(plan.mem[0].activations_peak_bytes > act);
  px_plan_free(&plan);
  /* worst-case buffers: dropless at ep 2 they hold every routing the router can make (16384 rows); with a capacity
   * factor each EP rank keeps at most Megatron-Core's capacity of its A = 4096 choices for an expert,
   * ceil(4096 / 8 x 1.1) = 564, and sends them to the expert's rank: 8 x 564 rows for its one expert, x etp 2 =
   * 9024, worst buffers or not (ceil(1.1 x 4096 x 8 / 8) = 4506 x 2 would be a capacity over the EP group) */
  CU_ASSERT_EQUAL(px_moe_capacity(1.1, 4096, 8), 564);
  CU_ASSERT_EQUAL(px_moe_capacity(1.5, 10, 3), 5); /* (10 / 3) x 1.5 = 5.0 in double, as in Python */
  const struct {
    int64_t ep;
    double capacity_factor;
    int64_t rows, buffer_rows;
  } worst[] = {{2, 0, 8192, 16384}, {8, 1.1, 9024, 9024}};
  for (int i = 0; i < 2; i++) {
    m.capacity_factor = worst[i].capacity_factor;
    p = par(2, 1, 32, 1, 1, 256);
    p.ep = worst[i].ep, p.seq = 4096, p.sp = 1, p.moe_buffers = PX_MOE_BUF_WORST;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(px_plan_expert_rows(&plan), worst[i].rows);
    CU_ASSERT_EQUAL(px_plan_expert_buffer_rows(&plan), worst[i].buffer_rows);
    px_plan_free(&plan);
  }
  m.capacity_factor = 0;
  p = par(2, 1, 32, 1, 1, 256);
  p.ep = 8, p.seq = 4096, p.sp = 1, p.etp = 1;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(plan.grid.ep_place.stride, 1);
  PX_ASSERT_REL((double)plan.programs[0].param_elems, dense + experts * tp, 1e-12); /* a whole expert */
  px_plan_states(&plan, 0, &st);
  PX_ASSERT_REL((double)st.opt_elems, dense / 32 + experts * tp / 8, 1e-4);
  PX_ASSERT_REL(plan.totals[0].wire_bytes[PX_GROUP_EP], L * mb * 7.0 / 8 * A * (4 * H * e + gates), 1e-9);
  CU_ASSERT_EQUAL(plan.totals[0].wire_bytes[PX_GROUP_ETP], 0);
  CU_ASSERT_EQUAL(px_plan_expert_rows(&plan), 4096);
  PX_ASSERT_REL(plan.model_flops_per_step, flops, 1e-12);
  px_plan_free(&plan);
  /* DeepSeek-V3 on one rank (nothing split): the plan holds the model's parameters but the MTP module and the
   * sigmoid router's correction biases (a buffer the balancing rule sets, not trained: 256 a MoE layer) */
  CU_ASSERT_EQUAL_FATAL(px_model_load("deepseek-v3", &m, &err), PX_OK);
  c = cluster("dgx-h100", 1);
  p = par(1, 1, 1, 0, 1, 1);
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  px_model_params mp;
  px_model_count_params(&m, &mp);
  PX_ASSERT_EQ_U64(plan.programs[0].param_elems, mp.total - (uint64_t)(58 * 256));
  px_plan_free(&plan);
}

/* gpt-oss: sliding-window layers attend to 128 keys back. The attended pairs
 * by hand (seq 8, window 3: 1 + 2 + 3 x 6 = 21; causal 8 x 9 / 2 = 36); the
 * flash op of gpt-oss-120b's windowed layer block costs a sliding layer's
 * pairs, the full one's the causal ones; with 9 layers a stage (pp 4, as
 * Megatron and torchtitan run it) the even layers run the windowed blocks
 * and the odd ones the full, a stage starting on either; CP is refused. */
static void test_sliding_window(void) {
  CU_ASSERT_DOUBLE_EQUAL(px_attention_pairs(8, 3), 21.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(px_attention_pairs(8, 0), 36.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(px_attention_pairs(8, 8), 36.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(px_attention_pairs(8, 1), 8.0, 0);
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt-oss-120b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 64);
  px_parallel p = par(1, 2, 32, 1, 1, 64);
  p.ep = 8, p.seq = 4096;
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  /* 128 x 129 / 2 + (4096 - 128) x 128 = 516,160 pairs on a sliding layer, 4096 x 4097 / 2 = 8,390,656 on a full one */
  double rect = 2.0 * 64 * 4096.0 * 4096.0 * (64 + 64); /* B heads S S (q/k + v head widths) */
  for (int window = 0; window < 2; window++) {
    const px_block *fb = &plan.blocks[px_layer_block(true, window, false, false, false)];
    int found = 0;
    for (int32_t i = 0; i < fb->nops; i++)
      if (fb->ops[i].kind == PX_OP_FLASH_ATTN) {
        PX_ASSERT_REL(fb->ops[i].flops, rect * (window ? 516160.0 / 8390656.0 : 1.0), 1e-12);
        CU_ASSERT_EQUAL(!!(fb->ops[i].flags & PX_OPF_WINDOW), window);
        found++;
      }
    CU_ASSERT_EQUAL(found, 1);
  }
  CU_ASSERT_EQUAL(plan.blocks[PX_BLOCK_LAYER_FWD_WINDOW].nops, 0); /* every layer is MoE */
  px_plan_free(&plan);
  p = par(1, 4, 16, 1, 1, 64); /* 36 / 4 = 9 layers a stage */
  p.ep = 8;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  for (int64_t s = 0; s < 4; s++) {
    const px_program *prog = &plan.programs[s];
    int windowed = 0, full = 0;
    for (int32_t i = 0; i < prog->ninsts; i++) {
      const px_inst *in = &prog->insts[i];
      if (in->mb != 0 || !px_block_is_layer_fwd((px_block_kind)in->block)) continue;
      CU_ASSERT_EQUAL(in->block, in->layer % 2 == 0 ? PX_BLOCK_MOE_FWD_WINDOW : PX_BLOCK_MOE_FWD);
      windowed += in->block == PX_BLOCK_MOE_FWD_WINDOW, full += in->block == PX_BLOCK_MOE_FWD;
    }
    CU_ASSERT_EQUAL(windowed, s % 2 == 0 ? 5 : 4); /* stages 0 and 2 start on a windowed layer (0, 18) */
    CU_ASSERT_EQUAL(full, s % 2 == 0 ? 4 : 5);
  }
  px_plan_free(&plan);
  p = par(1, 2, 16, 1, 1, 64);
  p.ep = 8, p.cp = 2;
  CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`cp`"));
}

/* ---- fp8 ---- */

/* fp8 primary weights (fp8_params, Megatron's --fp8-param-gather): the fp8 GEMMs' weights held in fp8 (1 byte)
 * with their transposed copy and no bf16 copy, so 2 bytes an fp8 weight less than the bf16 weight and its two
 * cached fp8 copies (ZeRO-1); each unit's parameter all-gather moves its fp8 weights at 1 byte (a byte an fp8
 * element less than in bf16, each layer's about half); ZeRO-3 holds its shard's fp8 weights in fp8; the step's
 * cast makes the transposed copy only; without fp8 precision and bf16 base it is refused. */
static void test_fp8_params(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 16);
  for (int zero = 1; zero <= 3; zero += 2) {
    px_plan plan[2];
    for (int f = 0; f < 2; f++) {
      px_parallel p = par(2, 2, 4, zero, 1, 32);
      p.sp = 1, p.precision = PX_PREC_FP8, p.fp8_params = f;
      CU_ASSERT_EQUAL_FATAL(compile(&plan[f], &m, &c, &p, &err), PX_OK);
    }
    for (int64_t s = 0; s < 2; s++) {
      const px_program *a = &plan[0].programs[s], *b = &plan[1].programs[s];
      CU_ASSERT_EQUAL_FATAL(a->nunits, b->nunits);
      uint64_t w8 = px_plan_fp8_weight_elems(&plan[1], s), shard8 = 0;
      uint64_t *u8 = calloc((size_t)b->nunits, sizeof *u8);
      CU_ASSERT_PTR_NOT_NULL_FATAL(u8);
      px_plan_fp8_unit_elems(&plan[1], s, u8, &shard8);
      CU_ASSERT(w8 > 0 && w8 == px_plan_fp8_weight_elems(&plan[0], s));
      px_states sa, sb;
      px_plan_states(&plan[0], s, &sa);
      px_plan_states(&plan[1], s, &sb);
      uint64_t less = sa.bytes[PX_PLACE_GPU][PX_MEM_PARAMS] - sb.bytes[PX_PLACE_GPU][PX_MEM_PARAMS];
      PX_ASSERT_EQ_U64(less, zero < 3 ? 2 * w8 : shard8);
      PX_ASSERT_EQ_U64(sb.fp8_copy_bytes, zero < 3 ? w8 : 0);
      CU_ASSERT(plan[1].mem[s].peak_bytes < plan[0].mem[s].peak_bytes);
      for (int32_t u = 0; u < b->nunits; u++) {
        const px_op *ga = &a->ops[a->units[u].gather_op], *gb = &b->ops[b->units[u].gather_op];
        PX_ASSERT_EQ_U64(ga->coll_bytes - gb->coll_bytes, u8[u]);
        if (u8[u] > b->units[u].padded / 2) PX_ASSERT_REL((double)gb->coll_bytes, 0.5 * (double)ga->coll_bytes, 0.01);
      }
      free(u8);
    }
    for (int f = 0; f < 2; f++) px_plan_free(&plan[f]);
  }
  static const struct {
    int precision, base;
  } bad[] = {{PX_PREC_BF16, -1}, {PX_PREC_FP8, PX_FP8_BASE_FP32}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_parallel p = par(2, 2, 4, 1, 1, 32);
    p.fp8_params = 1, p.precision = bad[i].precision, p.fp8_base = bad[i].base;
    px_plan plan;
    CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`fp8_params` holds the quantized GEMMs' weights in their format in place "
                                           "of their bf16 copy: it needs `precision` fp8, mxfp8 or nvfp4 with "
                                           "`fp8_base` bf16"));
  }
}

/* The optimizer's op of a kind in a program's own ops (its step's ADAMW, its weights' CAST). */
static const px_op *opt_op(const px_program *prog, px_op_kind kind) {
  for (int32_t i = 0; i < prog->nops; i++)
    if (prog->ops[i].kind == kind) return &prog->ops[i];
  return NULL;
}

/* Primary mxfp8 and nvfp4 weights (fp8_params; Megatron's fp8_param_gather with reuse_grad_buf_for_mxfp8_param_ag,
 * and fp4_param_gather), Llama 3 8B on 8 GB200s, ZeRO-1, by hand against the same plan without them: the weights
 * are their row-wise copy (codes and scales, Q bytes) beside the column-wise one, and no bf16 copy: 2 bytes a
 * quantized weight less, and one cached copy (Q) in place of two. mxfp8 moves the same bytes (gathered in bf16
 * into the gradient buffer, written in bf16 by the optimizer, cast to both copies each step); nvfp4 gathers
 * and writes the packed row-wise codes (half a byte for 2) and the step's cast reads the row-wise copy (Q for
 * the bf16 weights' 2 bytes) and writes the column-wise one. Refused: mxfp8 without ZeRO-1, nvfp4 with ZeRO-3. */
static void test_block_scaled_params(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("gb200-nvl72", 8);
  const int precs[] = {PX_PREC_MXFP8, PX_PREC_NVFP4};
  for (int i = 0; i < 2; i++) {
    px_plan plan[2];
    for (int f = 0; f < 2; f++) {
      px_parallel p = par(1, 1, 8, 1, 1, 64);
      p.precision = precs[i], p.fp8_params = f;
      CU_ASSERT_EQUAL_FATAL(compile(&plan[f], &m, &c, &p, &err), PX_OK);
    }
    const px_program *a = &plan[0].programs[0], *b = &plan[1].programs[0];
    CU_ASSERT_EQUAL_FATAL(a->nunits, b->nunits);
    uint64_t w8 = px_plan_fp8_weight_elems(&plan[1], 0), shard8 = 0;
    uint64_t q = i ? w8 / 2 + w8 / 16 : w8 + w8 / 32; /* a copy's codes and scales */
    CU_ASSERT_EQUAL(w8, 32ull * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336));
    px_states sa, sb;
    px_plan_states(&plan[0], 0, &sa);
    px_plan_states(&plan[1], 0, &sb);
    PX_ASSERT_EQ_U64(sa.bytes[PX_PLACE_GPU][PX_MEM_PARAMS] - sb.bytes[PX_PLACE_GPU][PX_MEM_PARAMS], 2 * w8);
    PX_ASSERT_EQ_U64(sa.fp8_copy_bytes, 2 * q);
    PX_ASSERT_EQ_U64(sb.fp8_copy_bytes, q);
    CU_ASSERT(plan[1].mem[0].peak_bytes < plan[0].mem[0].peak_bytes);
    uint64_t *u8 = calloc((size_t)b->nunits, sizeof *u8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u8);
    px_plan_fp8_unit_elems(&plan[1], 0, u8, &shard8);
    int gathered = 0;
    for (int32_t u = 0; u < b->nunits; u++) {
      const px_op *ga = &a->ops[a->units[u].gather_op], *gb = &b->ops[b->units[u].gather_op];
      PX_ASSERT_EQ_U64(ga->coll_bytes - gb->coll_bytes, i ? 2 * u8[u] - (u8[u] + 1) / 2 : 0);
      gathered += u8[u] > 0;
    }
    CU_ASSERT(gathered > 0 && shard8 == w8 / 8);
    free(u8);
    const px_op *adam[2] = {opt_op(a, PX_OP_ADAMW), opt_op(b, PX_OP_ADAMW)}, *cast[2] = {opt_op(a, PX_OP_CAST),
                                                                                        opt_op(b, PX_OP_CAST)};
    CU_ASSERT_FATAL(adam[0] && adam[1] && cast[0] && cast[1]);
    PX_ASSERT_REL(adam[0]->bytes - adam[1]->bytes, i ? 2.0 * (double)shard8 - (double)((shard8 + 1) / 2) : 0.0, 1e-9);
    /* the bf16 weights read (twice for nvfp4: its per-tensor scale's amax first), both copies written */
    double read16 = (i ? 4.0 : 2.0) * (double)w8;
    PX_ASSERT_REL(cast[0]->bytes, read16 + 2.0 * (double)q, 1e-12);
    PX_ASSERT_REL(cast[1]->bytes, i ? 2.0 * (double)q : read16 + 2.0 * (double)q, 1e-12);
    for (int f = 0; f < 2; f++) px_plan_free(&plan[f]);
  }
  static const struct {
    int precision, zero;
    const char *why;
  } bad[] = {{PX_PREC_MXFP8, 0, "needs the distributed optimizer's full gradient buffer (hint: `zero` 1)"},
             {PX_PREC_MXFP8, 2, "needs the distributed optimizer's full gradient buffer (hint: `zero` 1)"},
             {PX_PREC_NVFP4, 3, "`fp8_params` with `precision` nvfp4 and `zero` 3: sharded NVFP4 weights are not"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    px_parallel p = par(1, 1, 8, bad[i].zero, 1, 64);
    p.fp8_params = 1, p.precision = bad[i].precision;
    px_plan plan;
    CU_ASSERT_EQUAL(compile(&plan, &m, &c, &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].why));
  }
}

/* Blackwell's fp8 GEMMs take any layout (px_gpu_fp8_any_layout): one copy of a per-tensor fp8 tensor serves
 * the forward and both gradients (Transformer Engine makes no transposed copy there), so the cached weight
 * copies are 1 byte an fp8 weight (Hopper: 2), an activation's cast writes one copy, and fp8 primary weights
 * need no copy and no cast; blockwise scales keep two copies everywhere (scales along each axis). Llama 3 8B
 * on 8 GPUs, ZeRO-1 and ZeRO-3, by hand. */
static void test_fp8_any_layout(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  static const char *const gpus[] = {"dgx-h100", "dgx-b200"};
  static const struct {
    int recipe, primary;
  } cases[] = {{PX_FP8_CURRENT, 0}, {PX_FP8_CURRENT, 1}, {PX_FP8_BLOCKWISE, 0}};
  double n = 8192.0 * 4096.0; /* ln1: a micro-batch's tokens x hidden */
  for (int g = 0; g < 2; g++) {
    px_cluster c = cluster(gpus[g], 8);
    CU_ASSERT_EQUAL(px_gpu_fp8_any_layout(&c.gpu), g == 1);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      for (int zero = 1; zero <= 3; zero += 2) {
        px_parallel p = par(1, 1, 8, zero, 1, 64);
        p.precision = PX_PREC_FP8, p.fp8_recipe = cases[i].recipe, p.fp8_params = cases[i].primary;
        px_plan q;
        CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
        int copies = g == 1 && cases[i].recipe == PX_FP8_CURRENT ? 1 : 2, kept = copies - cases[i].primary;
        CU_ASSERT_EQUAL(px_parallel_quant_copies(&q.par, &c.gpu), copies);
        CU_ASSERT_EQUAL(px_parallel_weight_copies(&q.par, &c.gpu), kept);
        uint64_t w8 = px_plan_fp8_weight_elems(&q, 0);
        px_states st;
        px_plan_states(&q, 0, &st);
        PX_ASSERT_EQ_U64(st.fp8_copy_bytes, zero < 3 ? (uint64_t)kept * w8 : 0);
        /* ln1's cast: bf16 read (twice: current scaling's amax pass), its copies written */
        double amax = cases[i].recipe == PX_FP8_CURRENT ? 2.0 : 1.0;
        int ln1 = 0, weight_casts = 0, step_casts = 0;
        const px_block *fw = &q.blocks[PX_BLOCK_LAYER_FWD];
        for (int32_t k = 0; k < fw->nops; k++) {
          const px_op *o = &fw->ops[k];
          if (o->kind != PX_OP_CAST) continue;
          if (o->in[0].slot >= 0 && q.slots[o->in[0].slot].kind == PX_SLOT_PARAM) weight_casts++;
          if (o->out[0].slot >= 0 && !strcmp(q.slots[o->out[0].slot].name, "ln1_f8")) {
            PX_ASSERT_REL(o->bytes, 2.0 * n * amax + copies * n, 1e-12);
            ln1++;
          }
        }
        CU_ASSERT_EQUAL(ln1, 1);
        CU_ASSERT_EQUAL(weight_casts, zero == 3 && kept > 0 ? 4 : 0); /* ZeRO-3: each gathered weight's copies */
        for (int32_t k = 0; k < q.programs[0].nops; k++)
          if (q.programs[0].ops[k].kind == PX_OP_CAST) {
            /* the step's cast: the weights read (fp8 primary: 1 byte; bf16 twice under current scaling, its amax
             * first), the kept copies written */
            double read = cases[i].primary ? 1.0 : 2.0 * amax;
            PX_ASSERT_REL(q.programs[0].ops[k].bytes, (double)w8 * (read + kept), 1e-12);
            step_casts++;
          }
        CU_ASSERT_EQUAL(step_casts, zero < 3 && kept > 0);
        px_plan_free(&q);
      }
  }
}

/* fp8 GEMMs in a block: each linear and expert GEMM, and whether any reads a weight that is not a layer's. */
static int fp8_gemms(const px_plan *plan, px_block_kind k, int *bf16) {
  const px_block *b = &plan->blocks[k];
  int n = 0;
  *bf16 = 0;
  for (int32_t i = 0; i < b->nops; i++) {
    const px_op *o = &b->ops[i];
    if (px_op_family_of((px_op_kind)o->kind) != PX_FAM_GEMM) continue;
    if (o->flags & PX_OPF_FP8) n++;
    else (*bf16)++;
  }
  return n;
}

static void test_fp8(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 8);
  px_parallel p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_BF16;
  px_plan b16, f8;
  CU_ASSERT_EQUAL_FATAL(compile(&b16, &m, &c, &p, &err), PX_OK);
  p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_FP8;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(f8.act_dtype, PX_DTYPE_BF16);
  CU_ASSERT_EQUAL(f8.param_dtype, PX_DTYPE_BF16);
  /* the four linear layers run in fp8 forward and in both backward GEMMs; nothing else is fp8 */
  int bf16 = 0;
  CU_ASSERT_EQUAL(fp8_gemms(&f8, PX_BLOCK_LAYER_FWD, &bf16), 4); /* qkv, o, fc1 (gate and up in one), fc2 */
  CU_ASSERT_EQUAL(bf16, 0);
  CU_ASSERT_EQUAL(fp8_gemms(&f8, PX_BLOCK_LAYER_BWD, &bf16), 8);
  CU_ASSERT_EQUAL(bf16, 0);
  CU_ASSERT_EQUAL(fp8_gemms(&f8, PX_BLOCK_HEAD_FWD, &bf16), 0); /* the head stays bf16 */
  CU_ASSERT_EQUAL(fp8_gemms(&b16, PX_BLOCK_LAYER_BWD, &bf16), 0);
  /* the same FLOPs */
  PX_ASSERT_REL(f8.model_flops_per_step, b16.model_flops_per_step, 1e-12);
  /* fp8 weights: the layers' linear weights, by hand; a cached copy of 2 bytes each in the parameters' memory */
  double H = 4096, Q = 4096, KV = 1024, F = 14336, L = 32;
  double w8 = L * (H * (Q + 2 * KV) + Q * H + 3 * H * F);
  PX_ASSERT_EQ_U64(px_plan_fp8_weight_elems(&f8, 0), (uint64_t)w8);
  px_states s16, s8;
  px_plan_states(&b16, 0, &s16);
  px_plan_states(&f8, 0, &s8);
  PX_ASSERT_EQ_U64(s8.bytes[PX_PLACE_GPU][PX_MEM_PARAMS] - s16.bytes[PX_PLACE_GPU][PX_MEM_PARAMS], (uint64_t)(2 * w8));
  /* a layer keeps its linear inputs in fp8: the norms' outputs and the MLP activation (1 byte for 2), the
   * context in both (the fused attention's backward reads the bf16 one): B S (H + F) bytes less */
  double B = 1, S = 8192;
  PX_ASSERT_EQ_U64(px_plan_layer_activation_bytes(&b16) - px_plan_layer_activation_bytes(&f8), (uint64_t)(B * S * (H + F)));
  px_plan_free(&f8);
  /* --fp8-base fp32 (the cpu backend's): fp32 outside the fp8 GEMMs, so no master copy (8 optimizer bytes a
   * parameter, as fp32 training) and fp32 activations; the same fp8 GEMMs; blockwise twins count their
   * 1 x 128 tiles' fp32 scales */
  p.fp8_base = PX_FP8_BASE_FP32;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(f8.act_dtype == PX_DTYPE_FP32 && f8.param_dtype == PX_DTYPE_FP32 && f8.grad_dtype == PX_DTYPE_FP32);
  PX_ASSERT_EQ_U64(f8.optimizer_bytes_per_param, 8);
  CU_ASSERT_EQUAL(fp8_gemms(&f8, PX_BLOCK_LAYER_FWD, &bf16), 4);
  cJSON *j = px_parallel_to_json(&f8.par);
  px_parallel back;
  CU_ASSERT_EQUAL(px_parallel_from_json(j, "test", &back, &err), PX_OK);
  CU_ASSERT_EQUAL(back.fp8_base, PX_FP8_BASE_FP32);
  cJSON_Delete(j);
  px_plan_free(&f8);
  p.fp8_base = -1, p.fp8_recipe = PX_FP8_BLOCKWISE;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  int found = 0;
  for (int32_t i = 0; i < f8.nslots; i++)
    if (!strcmp(f8.slots[i].name, "ln1_f8")) { /* (B, S, H): B S H codes, B S H / 128 scales */
      PX_ASSERT_EQ_U64(f8.slots[i].bytes, (uint64_t)(B * S * H + 4 * B * S * H / 128));
      found++;
    }
  CU_ASSERT_EQUAL(found, 1);
  px_plan_free(&f8);
  p.fp8_recipe = -1;
  /* ZeRO-3: no cached copies; each use casts the gathered weight (a forward and a backward cast per weight) */
  p.zero = 3;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  px_plan_states(&f8, 0, &s8);
  px_plan_states(&b16, 0, &s16);
  int casts = 0;
  const px_block *fw = &f8.blocks[PX_BLOCK_LAYER_FWD];
  for (int32_t i = 0; i < fw->nops; i++) casts += fw->ops[i].kind == PX_OP_CAST && fw->ops[i].in[0].slot >= 0 &&
                                                  f8.slots[fw->ops[i].in[0].slot].kind == PX_SLOT_PARAM;
  CU_ASSERT_EQUAL(casts, 4);
  px_plan_free(&f8);
  px_plan_free(&b16);
  /* a GPU without fp8 refuses it, naming the field */
  c = cluster("dgx-a100", 8);
  CU_ASSERT_EQUAL(compile(&f8, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "fp8"));
  /* mixture of experts: the experts' GEMMs in fp8, the router's in bf16; with per-tensor scales every
   * all-to-all moves bf16 (Transformer Engine quantizes the experts' input after the dispatch), with blockwise
   * scales the forward's dispatch moves fp8 (one byte of two in one all-to-all of four) */
  CU_ASSERT_EQUAL_FATAL(px_model_load("mixtral-8x7b", &m, &err), PX_OK);
  c = cluster("dgx-h100", 64);
  p = par(2, 1, 32, 1, 1, 256);
  p.ep = 8, p.seq = 4096, p.sp = 1, p.precision = PX_PREC_BF16;
  CU_ASSERT_EQUAL_FATAL(compile(&b16, &m, &c, &p, &err), PX_OK);
  p.precision = PX_PREC_FP8;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  fp8_gemms(&f8, PX_BLOCK_MOE_FWD, &bf16);
  CU_ASSERT_EQUAL(bf16, 1); /* the router */
  PX_ASSERT_REL(f8.totals[0].wire_bytes[PX_GROUP_EP], b16.totals[0].wire_bytes[PX_GROUP_EP], 1e-9);
  px_plan_free(&f8);
  p.fp8_recipe = PX_FP8_BLOCKWISE;
  CU_ASSERT_EQUAL_FATAL(compile(&f8, &m, &c, &p, &err), PX_OK);
  /* of the bf16 exchanges' bytes a row, 4 H 2 of rows and 2 x 4 of fp32 gates, the dispatch's H fewer */
  double rows_share = 4.0 * 4096 * 2 / (4.0 * 4096 * 2 + 8);
  PX_ASSERT_REL(f8.totals[0].wire_bytes[PX_GROUP_EP],
                (1.0 - 0.125 * rows_share) * b16.totals[0].wire_bytes[PX_GROUP_EP], 1e-9);
  px_plan_free(&f8);
  px_plan_free(&b16);
}

/* mxfp8 and nvfp4: the same GEMMs as fp8, flagged with their format; the bytes of codes and scales by hand
 * (MXFP8: 1 B an element and an E8M0 byte per 32; NVFP4: half a byte, an E4M3 byte per 16 and the fp32
 * tensor scale), in the twins, the weights' two cached copies and the casts (nvfp4's reads its input twice:
 * the per-tensor amax first); a GPU without block-scaled tensor cores refuses them, naming itself. */
static void test_block_scaled(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("gb200-nvl72", 8);
  px_parallel p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_BF16;
  px_plan b16, q;
  CU_ASSERT_EQUAL_FATAL(compile(&b16, &m, &c, &p, &err), PX_OK);
  px_states s16, sq;
  px_plan_states(&b16, 0, &s16);
  double B = 1, S = 8192, H = 4096, Q = 4096, KV = 1024, F = 14336, L = 32, n = B * S * H;
  uint64_t w8 = (uint64_t)(L * (H * (Q + 2 * KV) + Q * H + 3 * H * F));
  const struct {
    int precision;
    uint16_t flag;
    uint64_t twin, weights; /* ln1_f8's bytes, the cached copies' */
    double cast;            /* ln1's cast, bytes */
  } cases[] = {
      {PX_PREC_MXFP8, PX_OPF_MXFP8, (uint64_t)(n + n / 32), 2 * (w8 + w8 / 32), 2 * n + 2 * (n + n / 32)},
      {PX_PREC_NVFP4, PX_OPF_NVFP4, (uint64_t)(n / 2 + n / 16 + 4), 2 * (w8 / 2 + w8 / 16),
       2 * 2 * n + 2 * (n / 2 + n / 16 + 4)},
  };
  for (int i = 0; i < 2; i++) {
    p = par(1, 1, 8, 1, 1, 64);
    p.precision = cases[i].precision;
    CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
    CU_ASSERT_EQUAL(q.act_dtype, PX_DTYPE_BF16);
    int gemms = 0, flagged = 0, found = 0, casts = 0;
    const px_block *fw = &q.blocks[PX_BLOCK_LAYER_FWD];
    for (int32_t k = 0; k < fw->nops; k++) {
      const px_op *o = &fw->ops[k];
      if (px_op_family_of((px_op_kind)o->kind) == PX_FAM_GEMM)
        gemms++, flagged += (o->flags & (PX_OPF_FP8 | cases[i].flag)) == (PX_OPF_FP8 | cases[i].flag);
      if (o->kind == PX_OP_CAST && o->out[0].slot >= 0 && !strcmp(q.slots[o->out[0].slot].name, "ln1_f8")) {
        PX_ASSERT_REL(o->bytes, cases[i].cast, 1e-12);
        casts++;
      }
    }
    CU_ASSERT(gemms == 4 && flagged == 4 && casts == 1);
    for (int32_t k = 0; k < q.nslots; k++)
      if (!strcmp(q.slots[k].name, "ln1_f8")) {
        PX_ASSERT_EQ_U64(q.slots[k].bytes, cases[i].twin);
        found++;
      }
    CU_ASSERT_EQUAL(found, 1);
    PX_ASSERT_EQ_U64(px_plan_fp8_weight_elems(&q, 0), w8);
    px_plan_states(&q, 0, &sq);
    PX_ASSERT_EQ_U64(sq.fp8_copy_bytes, cases[i].weights);
    PX_ASSERT_EQ_U64(sq.bytes[PX_PLACE_GPU][PX_MEM_PARAMS] - s16.bytes[PX_PLACE_GPU][PX_MEM_PARAMS], cases[i].weights);
    PX_ASSERT_REL(q.model_flops_per_step, b16.model_flops_per_step, 1e-12);
    CU_ASSERT_EQUAL(px_parallel_gemm_dtype(&q.par), i ? PX_DTYPE_FP4 : PX_DTYPE_FP8);
    cJSON *j = px_parallel_to_json(&q.par);
    px_parallel back;
    px_parallel_unset(&back);
    CU_ASSERT_EQUAL(px_parallel_from_json(j, "test", &back, &err), PX_OK);
    CU_ASSERT_EQUAL(back.precision, cases[i].precision);
    cJSON_Delete(j);
    px_plan_free(&q);
    /* Hopper and Ampere refuse them, naming the GPU and the precision */
    const char *gpus[] = {"dgx-h100", "dgx-a100"};
    for (int g = 0; g < 2; g++) {
      px_cluster h = cluster(gpus[g], 8);
      p = par(1, 1, 8, 1, 1, 64);
      p.precision = cases[i].precision;
      CU_ASSERT_EQUAL(compile(&q, &m, &h, &p, &err), PX_ERR_INPUT);
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, h.gpu.name));
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, px_precision_names[cases[i].precision]));
    }
    /* tp 2 with SP: the norm's twin is all-gathered with its scales (the whole tensor's bytes, a twin's) */
    p = par(2, 1, 4, 1, 1, 64);
    p.precision = cases[i].precision, p.sp = 1;
    CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
    int gathers = 0;
    fw = &q.blocks[PX_BLOCK_LAYER_FWD];
    for (int32_t k = 0; k < fw->nops; k++) {
      const px_op *o = &fw->ops[k];
      if (o->kind == PX_OP_ALLGATHER && o->in[0].slot >= 0 && !strcmp(q.slots[o->in[0].slot].name, "ln1_f8")) {
        PX_ASSERT_EQ_U64(o->coll_bytes, cases[i].twin);
        gathers++;
      }
    }
    CU_ASSERT_EQUAL(gathers, 1);
    px_plan_free(&q);
  }
  px_plan_free(&b16);
}

/* --bf16-layers-start/end (Megatron-Core's first_last_layers_bf16): the first 2 and last 8 of llama3-8b's 32
 * layers keep their GEMMs unquantized under nvfp4 in blocks of their own: no casts, no twins, no flagged GEMM;
 * the programs pick them per layer (forward, backward and a zero-bubble W); the memory plan holds the cached
 * codes and scales of the other 22 layers' weights only, by hand; every layer kept so is the bf16 plan's memory
 * and FLOPs; refusals name the fields. */
/* fp8_library: torchao's survives a JSON round trip (te, the default, is written where set); a 16-bit plan ignores
 * it and writes none; torchao is refused by field with fp8's delayed or blockwise scaling, nvfp4 and fp8 attention,
 * which its training recipes have not (the op order: test_sim's test_fp8_library). */
static void test_fp8_library(void) {
  px_model m = preset_model("llama3-8b");
  px_err err = {0};
  px_cluster c = cluster("gb200-nvl72", 8);
  px_parallel p = par(2, 1, 4, 1, 1, 64);
  p.sp = 1, p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT, p.fp8_library = PX_FP8_LIB_TORCHAO;
  px_plan q;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  cJSON *j = px_parallel_to_json(&q.par);
  px_parallel back;
  CU_ASSERT_EQUAL(px_parallel_from_json(j, "test", &back, &err), PX_OK);
  CU_ASSERT_EQUAL(back.fp8_library, PX_FP8_LIB_TORCHAO);
  cJSON_Delete(j);
  px_plan_free(&q);
  p.precision = PX_PREC_BF16;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  j = px_parallel_to_json(&q.par);
  CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(j, "fp8_library"));
  cJSON_Delete(j);
  px_plan_free(&q);
  const struct {
    int precision, recipe, attention;
    const char *says;
  } refused[] = {{PX_PREC_FP8, PX_FP8_DELAYED, 0, "`fp8_recipe` delayed"},
                 {PX_PREC_FP8, PX_FP8_BLOCKWISE, 0, "`fp8_recipe` blockwise"},
                 {PX_PREC_NVFP4, -1, 0, "NVFP4's training recipe"},
                 {PX_PREC_MXFP8, -1, 1, "not the attention"}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    p = par(2, 1, 4, 1, 1, 64);
    p.sp = 1, p.precision = refused[i].precision, p.fp8_recipe = refused[i].recipe;
    p.fp8_attention = refused[i].attention, p.fp8_library = PX_FP8_LIB_TORCHAO;
    CU_ASSERT_EQUAL(compile(&q, &m, &c, &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`fp8_library` torchao"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, refused[i].says));
    p.fp8_library = PX_FP8_LIB_TE; /* Transformer Engine runs each */
    CU_ASSERT_EQUAL(compile(&q, &m, &c, &p, &err), PX_OK);
    px_plan_free(&q);
  }
}

/* fp8_attention: the fused attention ops of the quantized layers flagged fp8 (mxfp8's MXFP8, nvfp4's per-tensor
 * fp8), those of a layer kept in bf16 and of a plan without it not; refused without a quantized precision. */
static void test_fp8_attention_flags(void) {
  px_model m = preset_model("llama3-8b");
  px_err err = {0};
  px_cluster c = cluster("gb200-nvl72", 8);
  for (int v = 0; v < 3; v++) {
    px_parallel p = par(1, 1, 8, 1, 1, 64);
    p.precision = v == 1 ? PX_PREC_NVFP4 : PX_PREC_MXFP8, p.bf16_layers_start = 2, p.fp8_attention = v < 2;
    uint16_t want = v == 0 ? PX_OPF_FP8 | PX_OPF_MXFP8 : v == 1 ? PX_OPF_FP8 : 0;
    px_plan q;
    CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
    int flash = 0;
    for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++)
      for (int32_t i = 0; i < q.blocks[k].nops; i++) {
        const px_op *o = &q.blocks[k].ops[i];
        if (o->kind != PX_OP_FLASH_ATTN && o->kind != PX_OP_FLASH_ATTN_BWD) continue;
        bool kept = k == PX_BLOCK_LAYER_FWD_BF16 || k == PX_BLOCK_LAYER_BWD_BF16;
        CU_ASSERT_EQUAL(o->flags & (PX_OPF_FP8 | PX_OPF_MXFP8 | PX_OPF_NVFP4), kept ? 0 : want);
        flash++;
      }
    CU_ASSERT(flash >= 4);
    px_plan_free(&q);
  }
  /* the cpu backend emulates current scaling's, the cuda backend has no FP8 attention */
  px_parallel p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT, p.fp8_base = PX_FP8_BASE_FP32, p.fp8_attention = 1;
  char why[512];
  CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &m, why, sizeof why));
  CU_ASSERT(!px_runnable(PX_RUN_CUDA, &p, &m, why, sizeof why) && strstr(why, "fp8 attention (`fp8_attention`)"));
  p.fp8_recipe = PX_FP8_DELAYED;
  CU_ASSERT(!px_runnable(PX_RUN_CPU, &p, &m, why, sizeof why) && strstr(why, "delayed scaling"));
  p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_BF16, p.fp8_attention = 1;
  px_plan q;
  CU_ASSERT_EQUAL(compile(&q, &m, &c, &p, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`fp8_attention`"));
}

/* attention flash2: flash's op graph (ops, flags but the kernel's, FLOPs, memory) with its fused attention ops
 * flagged FlashAttention-2; refused where the GPU has curves but none of FlashAttention-2 (Blackwell), with latent
 * attention (two head dims), attention sinks and fp8 attention; a GPU without curves costs both alike; a cluster's
 * FlashAttention-2 curves and own-kernel name survive a JSON round trip, and a bad one is refused by field. */
static void test_flash2_attention(void) {
  px_model m = preset_model("llama3-8b");
  px_err err = {0};
  px_cluster h100 = cluster("dgx-h100", 8);
  px_plan q[2];
  for (int v = 0; v < 2; v++) {
    px_parallel p = par(2, 2, 2, 1, 1, 16);
    p.attention = v ? PX_ATTN_FLASH2 : PX_ATTN_FLASH;
    CU_ASSERT_EQUAL_FATAL(compile(&q[v], &m, &h100, &p, &err), PX_OK);
  }
  int flash = 0;
  for (int k = 0; k < PX_BLOCK_KIND_COUNT; k++) {
    CU_ASSERT_EQUAL_FATAL(q[0].blocks[k].nops, q[1].blocks[k].nops);
    for (int32_t i = 0; i < q[0].blocks[k].nops; i++) {
      const px_op *a = &q[0].blocks[k].ops[i], *b = &q[1].blocks[k].ops[i];
      bool fused = a->kind == PX_OP_FLASH_ATTN || a->kind == PX_OP_FLASH_ATTN_BWD;
      CU_ASSERT_EQUAL(a->kind, b->kind);
      CU_ASSERT_EQUAL(b->flags, a->flags | (fused ? PX_OPF_FLASH2 : 0));
      CU_ASSERT_EQUAL(a->flops, b->flops);
      flash += fused;
    }
  }
  CU_ASSERT(flash >= 2);
  for (int64_t s = 0; s < 2; s++) PX_ASSERT_EQ_U64(q[0].mem[s].peak_bytes, q[1].mem[s].peak_bytes);
  px_plan_free(&q[0]), px_plan_free(&q[1]);
  static const struct {
    const char *model, *cluster, *why;
    bool fp8_attention;
  } refused[] = {{"llama3-8b", "dgx-b200", "no measured FlashAttention-2 curves", false},
                 {"deepseek-v3", "dgx-h100", "one head dim", false},
                 {"gpt-oss-120b", "dgx-h100", "no attention sinks", false},
                 {"llama3-8b", "dgx-h100", "no fp8 kernel", true}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    px_model rm = preset_model(refused[i].model);
    px_cluster rc = cluster(refused[i].cluster, 8);
    px_parallel p = par(1, 1, 8, 1, 1, 16);
    p.attention = PX_ATTN_FLASH2;
    if (refused[i].fp8_attention) p.precision = PX_PREC_FP8, p.fp8_attention = 1;
    px_plan r;
    CU_ASSERT_EQUAL(compile(&r, &rm, &rc, &p, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, refused[i].why)) fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, refused[i].why));
  }
  px_cluster cpu = cluster("local-cpu", 2); /* no curves: flash and flash2 costed alike, as GEMMs */
  px_parallel p = par(1, 1, 2, 1, 1, 4);
  p.attention = PX_ATTN_FLASH2, p.seq = 64;
  px_model tiny = preset_model("tiny");
  CU_ASSERT_EQUAL(compile(&q[0], &tiny, &cpu, &p, &err), PX_OK);
  px_plan_free(&q[0]);
  /* round trip: the H100's FlashAttention-2 curves (gpu.attention_flash2), the A100's own kernel's name */
  for (int i = 0; i < 2; i++) {
    px_cluster c = cluster(i ? "dgx-a100" : "dgx-h100", 8), back;
    cJSON *j = px_cluster_to_json(&c);
    CU_ASSERT_EQUAL_FATAL(px_cluster_from_json(j, "round trip", &back, &err), PX_OK);
    CU_ASSERT_EQUAL(back.gpu.attention_kernel, c.gpu.attention_kernel);
    CU_ASSERT_EQUAL_FATAL(back.gpu.attention_len, c.gpu.attention_len);
    for (int k = 0; k < c.gpu.attention_len; k++) {
      CU_ASSERT_EQUAL(back.gpu.attention[k].kernel, c.gpu.attention[k].kernel);
      CU_ASSERT_EQUAL(back.gpu.attention[k].tflops[0], c.gpu.attention[k].tflops[0]);
    }
    CU_ASSERT_EQUAL(px_gpu_attn_kernel_measured(&back.gpu, PX_ATTN_KERNEL_FLASH2), true);
    if (!i) { /* an fp8 curve of FlashAttention-2 is refused by field */
      cJSON *list = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "gpu"), "attention_flash2");
      CU_ASSERT_PTR_NOT_NULL_FATAL(list);
      cJSON_AddStringToObject(cJSON_GetArrayItem(list, 1), "dtype", "fp8");
      CU_ASSERT_EQUAL(px_cluster_from_json(j, "x.json", &back, &err), PX_ERR_INPUT);
      CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.json: field 'gpu.attention_flash2[1].dtype': FlashAttention-2 has no fp8"));
    }
    cJSON_Delete(j);
  }
}

static void test_bf16_layers(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama3-8b", &m, &err), PX_OK);
  px_cluster c = cluster("gb200-nvl72", 8);
  px_parallel p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_BF16;
  px_plan b16, q;
  CU_ASSERT_EQUAL_FATAL(compile(&b16, &m, &c, &p, &err), PX_OK);
  double H = 4096, Q = 4096, KV = 1024, F = 14336, layer = H * (Q + 2 * KV) + Q * H + 3 * H * F;
  uint64_t w8 = (uint64_t)(22 * layer); /* the quantized layers' linear weights */
  p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_NVFP4, p.bf16_layers_start = 2, p.bf16_layers_end = 8;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  int bf16 = 0;
  CU_ASSERT_EQUAL(fp8_gemms(&q, PX_BLOCK_LAYER_FWD, &bf16), 4);
  CU_ASSERT_EQUAL(fp8_gemms(&q, PX_BLOCK_LAYER_FWD_BF16, &bf16), 0);
  CU_ASSERT_EQUAL(bf16, 4);
  CU_ASSERT_EQUAL(fp8_gemms(&q, PX_BLOCK_LAYER_BWD_BF16, &bf16), 0);
  CU_ASSERT_EQUAL(bf16, 8);
  for (int k = PX_BLOCK_LAYER_FWD_BF16; k <= PX_BLOCK_LAYER_BWD_BF16; k++)
    for (int32_t i = 0; i < q.blocks[k].nops; i++) {
      const px_op *o = &q.blocks[k].ops[i];
      CU_ASSERT(o->kind != PX_OP_CAST && !(o->flags & PX_OPF_FP8));
      for (int j = 0; j < PX_OP_INS; j++) CU_ASSERT(o->in[j].slot < 0 || q.slots[o->in[j].slot].dtype != PX_DTYPE_FP8);
    }
  int fwd[32] = {0};
  for (int32_t i = 0; i < q.programs[0].ninsts; i++) {
    const px_inst *in = &q.programs[0].insts[i];
    if (in->mb == 0 && px_block_is_layer_fwd((px_block_kind)in->block)) fwd[in->layer] = in->block;
  }
  for (int l = 0; l < 32; l++) CU_ASSERT_EQUAL(fwd[l], l < 2 || l >= 24 ? PX_BLOCK_LAYER_FWD_BF16 : PX_BLOCK_LAYER_FWD);
  /* the cached copies: 2 (row-wise and transposed) x (half a byte and an E4M3 scale per 16) of 22 layers */
  PX_ASSERT_EQ_U64(px_plan_fp8_weight_elems(&q, 0), w8);
  px_states s16, sq;
  px_plan_states(&b16, 0, &s16);
  px_plan_states(&q, 0, &sq);
  PX_ASSERT_EQ_U64(sq.fp8_copy_bytes, 2 * (w8 / 2 + w8 / 16));
  PX_ASSERT_EQ_U64(sq.bytes[PX_PLACE_GPU][PX_MEM_PARAMS] - s16.bytes[PX_PLACE_GPU][PX_MEM_PARAMS], sq.fp8_copy_bytes);
  /* the optimizer's cast writes those copies only */
  int casts = 0;
  for (int32_t i = 0; i < q.programs[0].nops; i++)
    if (q.programs[0].ops[i].kind == PX_OP_CAST) {
      PX_ASSERT_EQ_U64((uint64_t)q.programs[0].ops[i].dim[0], w8);
      casts++;
    }
  CU_ASSERT_EQUAL(casts, 1);
  cJSON *j = px_parallel_to_json(&q.par);
  px_parallel back;
  px_parallel_unset(&back);
  CU_ASSERT_EQUAL(px_parallel_from_json(j, "test", &back, &err), PX_OK);
  CU_ASSERT(back.bf16_layers_start == 2 && back.bf16_layers_end == 8);
  cJSON_Delete(j);
  px_plan_free(&q);
  /* every layer kept: the bf16 plan's memory, to the byte, and FLOPs */
  p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_NVFP4, p.bf16_layers_end = 32;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  PX_ASSERT_EQ_U64(px_plan_fp8_weight_elems(&q, 0), 0);
  PX_ASSERT_EQ_U64(q.mem[0].peak_bytes, b16.mem[0].peak_bytes);
  PX_ASSERT_REL(q.hw_flops_per_step, b16.hw_flops_per_step, 1e-12);
  px_plan_free(&q);
  /* zero-bubble on 2 stages: the kept layers' W blocks are theirs, unquantized */
  p = par(1, 2, 4, 1, 1, 64);
  p.precision = PX_PREC_NVFP4, p.schedule = PX_SCHED_ZB_H1, p.bf16_layers_start = 1, p.bf16_layers_end = 1;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(fp8_gemms(&q, PX_BLOCK_LAYER_BWD_W, &bf16), 4);
  CU_ASSERT_EQUAL(fp8_gemms(&q, PX_BLOCK_LAYER_BWD_W_BF16, &bf16), 0);
  CU_ASSERT_EQUAL(bf16, 4);
  int w_bf16[2] = {0};
  for (int s = 0; s < 2; s++)
    for (int32_t i = 0; i < q.programs[s].ninsts; i++) {
      const px_inst *in = &q.programs[s].insts[i];
      if (in->block == PX_BLOCK_LAYER_BWD_W_BF16) {
        w_bf16[s]++;
        CU_ASSERT(in->layer == 0 || in->layer == 31);
      }
    }
  CU_ASSERT(w_bf16[0] == q.microbatches && w_bf16[1] == q.microbatches); /* layer 0 on stage 0, 31 on stage 1 */
  px_plan_free(&q);
  px_plan_free(&b16);
  /* refusals, naming the fields */
  const struct {
    int precision, recipe;
    int64_t pp, start, end;
    const char *why;
  } bad[] = {
      {PX_PREC_BF16, -1, 1, 2, 0, "need `precision` fp8, mxfp8 or nvfp4, not bf16"},
      {PX_PREC_FP8, PX_FP8_DELAYED, 1, 0, 2, "fp8's delayed scaling"},
      {PX_PREC_NVFP4, -1, 1, 20, 13, "`bf16_layers_start` 20 + `bf16_layers_end` 13 is more than the model's 32"},
      {PX_PREC_MXFP8, -1, 2, 17, 0, "a pipeline stage's 16 layers"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    p = par(1, bad[i].pp, 8 / bad[i].pp, 1, 1, 64);
    p.precision = bad[i].precision, p.fp8_recipe = bad[i].recipe;
    p.bf16_layers_start = bad[i].start, p.bf16_layers_end = bad[i].end;
    CU_ASSERT_EQUAL(compile(&q, &m, &c, &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].why));
    if (!strstr(err.msg, bad[i].why)) fprintf(stderr, "\n  %s\n", err.msg);
  }
  /* fp8 with current scaling: allowed */
  p = par(1, 1, 8, 1, 1, 64);
  p.precision = PX_PREC_FP8, p.fp8_recipe = PX_FP8_CURRENT, p.bf16_layers_end = 4;
  CU_ASSERT_EQUAL_FATAL(compile(&q, &m, &c, &p, &err), PX_OK);
  PX_ASSERT_EQ_U64(px_plan_fp8_weight_elems(&q, 0), (uint64_t)(28 * layer));
  px_plan_free(&q);
}

/* A library caller need not resolve the defaults: px_plan_compile does, on its own copy. */
static void test_compile_resolves(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-a100", 8);
  px_parallel p;
  px_parallel_unset(&p);
  p.tp = 2;
  px_parallel given = p;
  px_plan plan, ref;
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(!memcmp(&p, &given, sizeof p)); /* the caller's choices are left as they were */
  CU_ASSERT_EQUAL(plan.par.dp, 4);
  px_parallel_resolve(&given, &m, &c);
  CU_ASSERT_EQUAL_FATAL(px_plan_compile(&ref, &m, &c, &given, &err), PX_OK);
  CU_ASSERT(!memcmp(&plan.par, &ref.par, sizeof plan.par));
  CU_ASSERT_EQUAL(plan.nslots, ref.nslots);
  CU_ASSERT_EQUAL(plan.mem[0].peak_bytes, ref.mem[0].peak_bytes);
  px_plan_free(&plan);
  px_plan_free(&ref);
}

/* ---- refusals ---- */

static void expect_refused(const char *model, int64_t gpus, px_parallel p, const char *needle) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(model, &m, &err), PX_OK);
  px_cluster c = cluster("dgx-a100", gpus);
  px_plan plan;
  px_status st = compile(&plan, &m, &c, &p, &err);
  if (st != PX_ERR_INPUT || !strstr(err.msg, needle))
    fprintf(stderr, "\n  wanted '%s', got status %d '%s'\n", needle, st, err.msg);
  CU_ASSERT_EQUAL(st, PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
  if (!st) px_plan_free(&plan);
}

static void test_refusals(void) {
  px_parallel p;
  p = par(3, 1, 0, 0, 1, 8);
  expect_refused("llama3-8b", 24, p, "does not divide the 32 attention heads");
  p = par(16, 1, 1, 0, 1, 8);
  expect_refused("llama3-8b", 16, p, "key/value heads");
  p = par(8, 2, 2, 0, 1, 8);
  expect_refused("llama3-8b", 64, p, "but there are 64 GPUs");
  p = par(8, 1, 2, 0, 1, 7);
  expect_refused("llama3-8b", 16, p, "not divisible by mbs");
  p = par(1, 1, 8, 0, 1, 8);
  p.sp = 1;
  expect_refused("llama3-8b", 8, p, "sequence parallelism needs tp > 1");
  p = par(1, 1, 8, 0, 1, 8);
  p.schedule = PX_SCHED_INTERLEAVED;
  p.vpp = 2;
  expect_refused("llama3-8b", 8, p, "interleaved schedule needs pp > 1");
  p = par(1, 8, 1, 0, 1, 4);
  p.schedule = PX_SCHED_INTERLEAVED;
  p.vpp = 2;
  expect_refused("llama3-8b", 8, p, "needs at least pp 8 micro-batches");
  p = par(1, 8, 1, 0, 1, 20);
  p.schedule = PX_SCHED_INTERLEAVED;
  p.vpp = 2;
  p.mb_group = 8;
  expect_refused("llama3-8b", 8, p, "leaves a last group of 4 micro-batches, fewer than pp 8");
  p.mb_group = 21;
  expect_refused("llama3-8b", 8, p, "must be from pp 8 to the 20 micro-batches (hint: 10)");
  p = par(1, 8, 1, 0, 1, 16);
  p.mb_group = 8;
  expect_refused("llama3-8b", 8, p, "needs `schedule` interleaved");
  /* Megatron-Core's uneven pipeline: the middle stages split the rest evenly */
  p = par(1, 8, 1, 0, 1, 16);
  p.schedule = PX_SCHED_INTERLEAVED;
  p.vpp = 2;
  p.first_stage_layers = 3, p.last_stage_layers = 4;
  expect_refused("llama3-8b", 8, p, "25 layers are left for the 6 middle stages x 2 chunks");
  p.first_stage_layers = 1;
  expect_refused("llama3-8b", 8, p, "at least one layer in each of their 2 chunks");
  p = par(1, 1, 8, 0, 1, 8);
  p.first_stage_layers = 4;
  expect_refused("llama3-8b", 8, p, "need pp > 1");
  p = par(1, 2, 4, 0, 1, 8);
  p.first_stage_layers = 10, p.last_stage_layers = 10;
  expect_refused("llama3-8b", 8, p, "must be the model's 32 layers with pp 2");
  p = par(1, 2, 4, 0, 1, 8);
  p.nchunk_layers = 3, p.chunk_layers[0] = 10, p.chunk_layers[1] = 10, p.chunk_layers[2] = 12;
  expect_refused("llama3-8b", 8, p, "has 3 entries, but pp 2 x vpp 1 makes 2 chunks");
  p.nchunk_layers = 2;
  expect_refused("llama3-8b", 8, p, "adds up to 20 layers, the model has 32");
  p.first_stage_layers = 10;
  expect_refused("llama3-8b", 8, p, "drop `first_stage_layers`");
  p = par(1, 8, 1, 0, 1, 8);
  expect_refused("tiny", 8, p, "more than the 4 layers");
  p = par(1, 1, 1, 2, 1, 8);
  expect_refused("llama3-8b", 1, p, "dp is 1");
  p = par(1, 1, 8, 0, 1, 8);
  p.seq = 2048;
  expect_refused("gpt2-124m", 8, p, "learned positions");
  p = par(1, 2, 4, 0, 1, 8);
  p.vpp = 2;
  p.schedule = PX_SCHED_1F1B;
  expect_refused("llama3-8b", 8, p, "needs `schedule` interleaved");
  p = par(1, 1, 4, 3, 1, 8);
  p.shard_group = 3;
  expect_refused("llama3-8b", 4, p, "`shard_group` 3 does not divide dp 4");
  p = par(1, 1, 4, 0, 1, 8);
  p.shard_group = 2;
  expect_refused("llama3-8b", 4, p, "needs ZeRO");
  /* context parallelism */
  p = par(4, 1, 2, 0, 1, 8);
  p.cp = 2;
  p.attention = PX_ATTN_UNFUSED;
  expect_refused("llama3-8b", 16, p, "runs the fused attention block by block");
  p = par(4, 1, 2, 0, 1, 8);
  p.cp = 2, p.seq = 8190;
  expect_refused("llama3-8b", 16, p, "cuts the sequence into 2 x cp = 4 chunks");
  p = par(4, 1, 1, 0, 1, 8);
  p.cp = 4, p.cp_algo = PX_CP_A2A;
  expect_refused("llama3-8b", 16, p, "must divide the 8 query and 2 key/value heads per TP rank (valid cp: 1, 2;");
  p = par(4, 1, 1, 0, 1, 8);
  p.cp = 2;
  expect_refused("llama3-8b", 16, p, "tp 4 x cp 2 x pp 1 x dp 1 = 8, but there are 16 GPUs");
  /* mixture of experts */
  p = par(1, 1, 8, 0, 1, 8);
  p.ep = 2;
  expect_refused("llama3-8b", 8, p, "is a dense model");
  p.ep = 3;
  expect_refused("mixtral-8x7b", 8, p, "`ep` 3 `etp` 1: ep must divide the 8 experts, and etp x ep = 1 x 3 the tp x cp x dp = 8");
  p.ep = 1, p.cp = 2, p.seq = 4096;
  expect_refused("deepseek-v3", 16, p, "multi-head latent attention is planned with the fused attention");
  p = par(1, 3, 8, 0, 1, 8); /* 12 layers a stage: 6 sliding, 6 full */
  p.cp = 2;
  expect_refused("gpt-oss-120b", 48, p, "sliding-window attention: the CP ranks' share");
  /* expert tensor parallelism: Megatron-Core's folding rule, then the planner's etp = tp */
  p = par(1, 1, 8, 0, 1, 8);
  p.etp = 2;
  expect_refused("llama3-8b", 8, p, "`etp` 2 splits experts, but llama3-8b is a dense model");
  p = par(2, 1, 4, 0, 1, 8);
  p.ep = 4, p.sp = 1, p.etp = 3; /* etp x ep = 12 does not divide tp x dp = 8 */
  expect_refused("mixtral-8x7b", 8, p, "etp x ep = 3 x 4 the tp x cp x dp = 8");
  p = par(2, 1, 12, 0, 1, 12);
  p.sp = 1, p.etp = 3; /* 14336 / 3 */
  expect_refused("mixtral-8x7b", 24, p, "`etp` 3 must divide the 14336 expert FFN width");
  p = par(2, 1, 4, 0, 1, 8);
  p.etp = 1, p.ep = 4; /* Megatron-Core's MoELayer: TP needs SP */
  expect_refused("mixtral-8x7b", 8, p, "experts with `tp` 2 need sequence parallelism");
  /* the expert-DP group folded over tp x cp x dp: 2 x 32 / (1 x 8) = 8 with etp 1, 2 x 32 / (2 x 8) = 4 with etp = tp */
  p = par(2, 1, 32, 0, 1, 64);
  p.ep = 8, p.etp = 1;
  CU_ASSERT_EQUAL(px_parallel_expert_dp(&p), 8);
  p.etp = 2;
  CU_ASSERT_EQUAL(px_parallel_expert_dp(&p), 4);
  p.etp = 0; /* unset: tp */
  CU_ASSERT_EQUAL(px_parallel_expert_dp(&p), 4);
  /* what the planner can hold: layer passes (micro-batches x (layers + chunks)), a micro-batch's tokens */
  p = par(1, 2, 1, 0, 1, (int64_t)1 << 24);
  expect_refused("tiny", 2, p, "gbs 16777216 makes 16777216 micro-batches a step (gbs / (mbs 1 x dp 1)), each through "
                 "4 layers and 2 pipeline chunks: 100663296 layer passes, more than the 2097152 a plan may have");
  expect_refused("tiny", 2, p, "hint: gbs 349525 or less");
  p = par(1, 1, 8, 0, (int64_t)1 << 30, (int64_t)1 << 33);
  p.seq = 8;
  expect_refused("llama3-8b", 8, p, "mbs 1073741824 x seq 8 is more than the 4294967296 tokens a micro-batch may have");
  p = par(1, 1, 8, 0, 256, 2048);
  p.seq = 1 << 24, p.attention = PX_ATTN_UNFUSED;
  expect_refused("llama3-8b", 8, p, "unfused attention's scores, mbs 256 x 32 heads x seq 16777216 x seq");
}

/* The layer-pass limit is exact: a plan at it is valid, one micro-batch more is not (validated
 * only: a plan at the limit takes seconds to compile). */
static void test_layer_pass_limit(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-a100", 8);
  px_parallel p = par(1, 2, 4, 0, 1, 0);
  px_parallel_resolve(&p, &m, &c);
  int64_t per = m.layers + 2; /* 4 layers, 2 chunks */
  p.gbs = PX_PLAN_LAYER_PASSES_MAX / per * 4;
  CU_ASSERT_EQUAL(px_parallel_layer_passes(&p, m.layers), PX_PLAN_LAYER_PASSES_MAX / per * per);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_OK);
  p.gbs += 4;
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer passes"));
  p.gbs = (int64_t)1 << 40; /* the most a flag or plan file gives: no overflow on the way */
  p.mbs = 1, p.pp = 1 << 24, p.vpp = 1 << 16;
  CU_ASSERT_EQUAL(px_parallel_layer_passes(&p, m.layers), INT64_MAX);
}

/* Numbers on the command line are decimal: digits, sign, point, exponent and a K/M/B/G/T/P
 * suffix; strtod's hex, inf, nan and spaces are refused. */
static void test_numbers(void) {
  static const struct {
    const char *s;
    double v;
  } good[] = {{"4096", 4096}, {"+8", 8}, {"-2", -2}, {"2.5", 2.5}, {".5", 0.5}, {"5.", 5}, {"1e3", 1e3},
              {"1E+3", 1e3}, {"2.5e-1", 0.25}, {"15T", 15e12}, {"2.5B", 2.5e9}, {"300m", 300e6},
              {"8K", 8e3}, {"1G", 1e9}, {"1P", 1e15}, {"1e3K", 1e6}, {"0", 0}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    double v = -1;
    px_err err = {0};
    CU_ASSERT_EQUAL(px_parse_count(good[i].s, &v, &err), PX_OK);
    if (v != good[i].v) fprintf(stderr, "\n  '%s' -> %g, expected %g (%s)\n", good[i].s, v, good[i].v, err.msg);
    CU_ASSERT_EQUAL(v, good[i].v);
  }
  static const struct {
    const char *s, *says;
  } bad[] = {{"0x10", "is not a decimal number"}, {"0x1p4", "is not a decimal number"},
             {"inf", "is not a decimal number"}, {"nan", "is not a decimal number"},
             {"-inf", "is not a decimal number"}, {" 8", "is not a decimal number"},
             {"8 ", "is not a decimal number"}, {"8\n", "is not a decimal number"}, {"1,000", "is not a decimal number"},
             {"8KB", "is not a decimal number"}, {".", "is not a decimal number"}, {"+", "is not a decimal number"},
             {"e5", "is not a decimal number"}, {"8x", "unknown suffix"}, {"1e999", "out of range"},
             {"", "empty number"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    double v = 42;
    px_err err = {0};
    CU_ASSERT_EQUAL(px_parse_count(bad[i].s, &v, &err), PX_ERR_INPUT);
    if (!strstr(err.msg, bad[i].says)) fprintf(stderr, "\n  '%s': %s\n", bad[i].s, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].says));
    CU_ASSERT_EQUAL(v, 42); /* untouched */
  }
  int64_t n = 0;
  px_err err = {0};
  CU_ASSERT_EQUAL(px_parse_int("1.5K", "--gpus", 1, 1 << 24, &n, &err), PX_OK);
  CU_ASSERT_EQUAL(n, 1500);
  CU_ASSERT_EQUAL(px_parse_int("0x10", "--gpus", 1, 1 << 24, &n, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--gpus: '0x10' is not a decimal number"));
  CU_ASSERT_EQUAL(px_parse_int("2.5", "--gpus", 1, 1 << 24, &n, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--gpus: '2.5' is not a whole number"));
  CU_ASSERT_EQUAL(px_parse_int("0", "--gpus", 1, 1 << 24, &n, &err), PX_ERR_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--gpus: 0 is out of range [1, 16777216]"));
  CU_ASSERT_EQUAL(n, 1500);
  /* the other lists on the command line: layers per chunk are digits only */
  px_parallel p;
  px_parallel_unset(&p);
  CU_ASSERT_EQUAL(px_parallel_parse_chunk_list("3,4,4,3", &p, &err), PX_OK);
  CU_ASSERT_EQUAL(p.nchunk_layers, 4);
  const char *chunks[] = {" 3,4", "+3,4", "3, 4", "0x3,4", "3,,4", "3,4,", ""};
  for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
    CU_ASSERT_EQUAL(px_parallel_parse_chunk_list(chunks[i], &p, &err), PX_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`layers_per_chunk`"));
  }
}

/* Vocabulary padding: GPT-2's 50257 on tp 8 becomes 51200, as Megatron pads. */
static void test_vocab_padding(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("gpt2-1.5b", &m, &err), PX_OK);
  m.heads = 32, m.kv_heads = 32, m.head_dim = 50; /* 1600 / 32 */
  px_cluster c = cluster("dgx-a100", 8);
  px_parallel p = par(8, 1, 1, 0, 1, 8);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT_EQUAL(plan.vocab_padded, 51200);
  px_plan_free(&plan);
}

/* gpu.reserved_gib against the published pieces it adds (tests/data/runtime_reserve.csv):
 * the CUDA context, cuBLASLt's workspace and two NCCL communicators' buffers. */
static void test_runtime_reserve(void) {
  double sum[2] = {0, 0}; /* hopper and later, ampere */
  FILE *fp = fopen(px_test_path("tests/data/runtime_reserve.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512], gpu[32], comp[32];
  double bytes, count;
  int rows = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (sscanf(line, "%31[^,],%31[^,],%lf,%lf", gpu, comp, &bytes, &count) != 4) continue;
    sum[strcmp(gpu, "ampere") == 0] += bytes * count;
    rows++;
  }
  fclose(fp);
  CU_ASSERT_EQUAL(rows, 6);
  static const char *const presets[] = {"dgx-a100", "dgx-h100", "hgx-h200", "hgx-h800", "a3-mega",
                                        "dgx-b200", "dgx-b300", "gb200-nvl72", "dgx-gb300"};
  px_err err = {0};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
    px_cluster c;
    CU_ASSERT_EQUAL_FATAL(px_cluster_load(presets[i], &c, &err), PX_OK);
    double want = sum[i == 0];
    fprintf(stderr, "\n  %-12s reserved %.2f GiB, published pieces %.2f GiB", presets[i],
            (double)c.gpu.reserved_bytes / 1073741824.0, want / 1073741824.0);
    PX_ASSERT_REL((double)c.gpu.reserved_bytes, want, 0.05);
  }
  fputc('\n', stderr);
}

/* Every preset's host link is its row of tests/data/host_link.csv: the figure used, no faster than the link's
 * theoretical rate, the measured one where the system has one, and cited; every preset in topologies/ has a row. */
static void test_host_link(void) {
  FILE *fp = fopen(px_test_path("tests/data/host_link.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  char line[512], rows[16][64];
  double theory, measured, used;
  int n = 0;
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    CU_ASSERT_FATAL(n < 16);
    CU_ASSERT_EQUAL_FATAL(sscanf(line, "%63[^,],%*[^,],%lf,%lf,%lf,", rows[n], &theory, &measured, &used), 4);
    px_cluster c = cluster(rows[n++], 8);
    fprintf(stderr, "\n  %-12s host link %6.1f GB/s a GPU (theoretical %5.1f, measured %5.1f)", c.name,
            px_cluster_host_link_bytes_per_s(&c) / 1e9, theory, measured);
    PX_ASSERT_REL(px_cluster_host_link_bytes_per_s(&c), used * 1e9, 1e-12);
    CU_ASSERT(used <= theory);
    CU_ASSERT(measured == 0 || measured == used);
    CU_ASSERT_PTR_NOT_NULL(px_cluster_source_of(&c, "host.pcie_gb_per_s"));
    CU_ASSERT(c.host_pcie_gpus_per_uplink == 1 || px_cluster_source_of(&c, "host.pcie_gpus_per_uplink"));
  }
  fclose(fp);
  fputc('\n', stderr);
  int presets = 0;
  DIR *dir = opendir(px_test_path("topologies"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  for (struct dirent *e; (e = readdir(dir));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
    presets++;
    int found = 0;
    for (int i = 0; i < n; i++) found += !strncmp(rows[i], e->d_name, len - 5) && rows[i][len - 5] == '\0';
    if (found != 1) fprintf(stderr, "  %s: %d rows in tests/data/host_link.csv\n", e->d_name, found);
    CU_ASSERT_EQUAL(found, 1);
  }
  closedir(dir);
  CU_ASSERT_EQUAL(n, presets);
}


/* ---- fine-tuning with adapters (tests/data/lora_facts.md) ---- */

static px_parallel lora_par(int64_t tp, int64_t dp, int zero, int64_t rank, int targets) {
  px_parallel p = par(tp, 1, dp, zero, 1, dp);
  p.precision = PX_PREC_BF16;
  p.finetune = PX_FT_LORA, p.lora_rank = rank, p.lora_targets = targets;
  return p;
}

static int count_ops(const px_block *b, px_op_kind kind) {
  int n = 0;
  for (int32_t i = 0; i < b->nops; i++) n += b->ops[i].kind == kind;
  return n;
}

/* tiny (h 64, 4 heads, 2 kv heads of 32, ffn 128, SwiGLU, 4 layers), rank 4 on qkv, o, fc1, fc2, by hand:
 * qkv 4 (64 + 128) = 768, o 4 (64 + 64) = 512, fc1 4 (64 + 256) = 1280, fc2 4 (128 + 64) = 768: 3,328 a
 * layer, 13,312 in all; states 2 bytes a frozen weight and 2 + 2 + 12 an adapter weight; each adapter
 * keeps h (B, S, r) for its B's gradient; the backward has no weight-gradient GEMM but the adapters'. */
static void test_lora_small(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 2);
  const uint64_t trained = 4 * (768 + 512 + 1280 + 768), base = px_model_param_count(&m);
  px_plan full, lora;
  px_parallel pf = par(1, 1, 2, 0, 1, 2), pl = lora_par(1, 2, 0, 4, 0);
  pf.precision = PX_PREC_BF16;
  CU_ASSERT_EQUAL_FATAL(compile(&full, &m, &c, &pf, &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(compile(&lora, &m, &c, &pl, &err), PX_OK);
  const px_program *prog = &lora.programs[0];
  PX_ASSERT_EQ_U64(prog->param_elems, trained);
  PX_ASSERT_EQ_U64(prog->flat_elems, trained); /* dp 2 divides every unit: no padding */
  PX_ASSERT_EQ_U64(prog->frozen_elems, base);
  const px_memplan *mp = &lora.mem[0];
  PX_ASSERT_EQ_U64(mp->at_peak[PX_MEM_PARAMS], 2 * base + 2 * trained);
  PX_ASSERT_EQ_U64(mp->at_peak[PX_MEM_GRADS], 2 * trained);
  PX_ASSERT_EQ_U64(mp->at_peak[PX_MEM_OPTIMIZER], 12 * trained);
  /* data parallelism reduces the adapters' gradients only */
  uint64_t reduced = 0;
  for (int32_t u = 0; u < prog->nunits; u++) reduced += prog->ops[prog->units[u].grad_op].coll_bytes;
  PX_ASSERT_EQ_U64(reduced, 2 * trained);
  /* activations: four adapters' h, 1 x 32 x 4 bf16 each, a layer more than full training */
  const uint64_t h = 1 * 32 * 4 * 2;
  PX_ASSERT_EQ_U64(px_plan_layer_activation_bytes(&lora), px_plan_layer_activation_bytes(&full) + 4 * h);
  /* the backward: weight-gradient GEMMs for the adapters only (dB, dA), input-gradient GEMMs for all */
  const px_block *bw = &lora.blocks[PX_BLOCK_LAYER_BWD];
  CU_ASSERT_EQUAL(count_ops(&full.blocks[PX_BLOCK_LAYER_BWD], PX_OP_LINEAR_BWD_WEIGHT), 4);
  CU_ASSERT_EQUAL(count_ops(bw, PX_OP_LINEAR_BWD_WEIGHT), 8);
  CU_ASSERT_EQUAL(count_ops(bw, PX_OP_LINEAR_BWD_DATA), 4 + 8);
  for (int32_t i = 0; i < bw->nops; i++)
    if (bw->ops[i].kind == PX_OP_LINEAR_BWD_WEIGHT) {
      const px_slot *g = &lora.slots[bw->ops[i].out[0].slot];
      CU_ASSERT(g->kind == PX_SLOT_GRAD && strchr(lora.slots[g->param].name, '.') != NULL);
    }
  CU_ASSERT_EQUAL(count_ops(&lora.blocks[PX_BLOCK_HEAD_BWD], PX_OP_LINEAR_BWD_WEIGHT), 0);
  CU_ASSERT(lora.model_flops_per_step < full.model_flops_per_step);
  px_plan_free(&lora);
  /* an adapter on qkv alone: the MLP's inputs (ln2, act) are no longer kept, only qkv's h is */
  pl = lora_par(1, 2, 0, 4, PX_LORA_QKV);
  CU_ASSERT_EQUAL_FATAL(compile(&lora, &m, &c, &pl, &err), PX_OK);
  PX_ASSERT_EQ_U64(lora.programs[0].param_elems, 4 * 768);
  PX_ASSERT_EQ_U64(px_plan_layer_activation_bytes(&lora) + 32 * 64 * 2 + 32 * 128 * 2,
                   px_plan_layer_activation_bytes(&full) + h);
  px_plan_free(&lora);
  /* ZeRO-1 shards the adapters' optimizer states only; the frozen base stays whole */
  pl = lora_par(1, 2, 1, 4, 0);
  CU_ASSERT_EQUAL_FATAL(compile(&lora, &m, &c, &pl, &err), PX_OK);
  PX_ASSERT_EQ_U64(lora.mem[0].at_peak[PX_MEM_OPTIMIZER], 12 * trained / 2);
  PX_ASSERT_EQ_U64(lora.mem[0].at_peak[PX_MEM_PARAMS], 2 * base + 2 * trained);
  px_plan_free(&lora);
  /* tp 2: A of a column-parallel layer and B of a row-parallel one are replicated, the rest split */
  pl = lora_par(2, 1, 0, 4, 0);
  CU_ASSERT_EQUAL_FATAL(compile(&lora, &m, &c, &pl, &err), PX_OK);
  PX_ASSERT_EQ_U64(lora.programs[0].param_elems,
                   4 * ((256 + 512 / 2) + (256 / 2 + 256) + (256 + 1024 / 2) + (512 / 2 + 256)));
  PX_ASSERT_EQ_U64(lora.trained_total, trained);
  /* the replicated halves' gradients are partial sums over TP, completed once a step before the optimizer */
  const px_block *opt = &lora.blocks[PX_BLOCK_OPTIMIZER];
  CU_ASSERT(count_ops(opt, PX_OP_ALLREDUCE) == 1 && opt->ops[0].group == PX_GROUP_TP);
  uint64_t partial = 0;
  for (int32_t i = 0; i < lora.programs[0].nops; i++)
    if (lora.programs[0].ops[i].kind == PX_OP_ALLREDUCE && lora.programs[0].ops[i].group == PX_GROUP_TP)
      partial += lora.programs[0].ops[i].coll_bytes;
  PX_ASSERT_EQ_U64(partial, 2 * 4 * (256 + 256 + 256 + 256)); /* qkv's and fc1's A, o's and fc2's B, 4 layers */
  px_plan_free(&lora);
  /* qlora: the layers' linear weights in nf4 and dequantised before each GEMM (into a bf16 workspace) */
  pl = lora_par(1, 2, 0, 4, 0);
  pl.finetune = PX_FT_QLORA;
  CU_ASSERT_EQUAL_FATAL(compile(&lora, &m, &c, &pl, &err), PX_OK);
  int casts = 0;
  for (int32_t i = 0; i < lora.blocks[PX_BLOCK_LAYER_FWD].nops; i++)
    casts += (lora.blocks[PX_BLOCK_LAYER_FWD].ops[i].flags & PX_OPF_DEQUANT) != 0;
  CU_ASSERT_EQUAL(casts, 4);
  CU_ASSERT_EQUAL(count_ops(&lora.blocks[PX_BLOCK_LAYER_BWD], PX_OP_CAST), 4);
  uint64_t lin = 64 * 128 + 64 * 64 + 128 * 2 * 64 + 64 * 128, nf4 = 0; /* a layer's qkv, o, fc1, fc2 */
  const uint64_t sizes[4] = {64 * 128, 64 * 64, 256 * 64, 64 * 128};
  for (int i = 0; i < 4; i++) nf4 += px_lora_frozen_bytes(&lora.par, sizes[i], true);
  PX_ASSERT_EQ_U64(lora.programs[0].frozen_bytes, 2 * (base - 4 * lin) + 4 * nf4);
  px_plan_free(&lora);
  px_plan_free(&full);
}

/* Every tensor of a LoRA or QLoRA plan is allocated and freed once, whatever adapters, split and recomputation:
 * what the frozen layers no longer keep is never read. */
static void test_lora_lifetimes(void) {
  px_model models[2];
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &models[0], &err), PX_OK);
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-gpt", &models[1], &err), PX_OK);
  models[1].dropout = 0.1;
  const int targets[3] = {0, PX_LORA_QKV, PX_LORA_O | PX_LORA_FC2};
  for (int mi = 0; mi < 2; mi++)
    for (int64_t tp = 1; tp <= 2; tp++)
      for (int64_t pp = 1; pp <= 2; pp++)
        for (int sp = 0; sp <= (tp > 1); sp++)
          for (int rc = 0; rc < PX_RECOMPUTE_COUNT; rc++)
            for (int att = 0; att < PX_ATTN_COUNT; att++)
              for (int t = 0; t < 3; t++)
                for (int ft = PX_FT_LORA; ft <= PX_FT_QLORA; ft++) {
                  if (rc == PX_RECOMPUTE_OP) continue; /* refused with adapters */
                  px_parallel p = lora_par(tp, 2, ft == PX_FT_QLORA ? 2 : 1, 4, targets[t]);
                  p.pp = pp, p.gbs = 8, p.sp = sp, p.recompute = rc, p.attention = att, p.finetune = ft;
                  px_cluster c = cluster("dgx-h100", tp * pp * 2);
                  px_plan plan;
                  px_status st = compile(&plan, &models[mi], &c, &p, &err);
                  if (st) fprintf(stderr, "\n  %s\n", err.msg);
                  CU_ASSERT_EQUAL_FATAL(st, PX_OK);
                  check_lifetimes(&plan);
                  CU_ASSERT_EQUAL(px_plan_check_p2p(&plan, &err), PX_OK);
                  px_plan_free(&plan);
                }
}

/* NF4 with double quantisation: 4 + 8/64 + 32/(64 x 256) = 4.127 bits a weight (QLoRA section 3), 0.373 bits
 * fewer than 32-bit block constants: about 3 GB over LLaMA 65B's quantised weights (section 1); and one fp32 a
 * tensor, the absmaxes' mean subtracted before they are quantised (section 3, bitsandbytes' offset). */
static void test_lora_nf4_bytes(void) {
  px_parallel p;
  px_parallel_unset(&p);
  p.precision = PX_PREC_BF16, p.base_precision = PX_BASE_NF4;
  uint64_t n = (uint64_t)64 * 256 * 1000;
  CU_ASSERT_DOUBLE_EQUAL((double)px_lora_frozen_bytes(&p, n, true) * 8 / (double)n,
                         4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / (double)n, 1e-12);
  CU_ASSERT_EQUAL(px_lora_frozen_bytes(&p, n, false), 2 * n); /* not a layer's linear weight: bf16 */
  p.base_precision = PX_BASE_FP8;
  CU_ASSERT_EQUAL(px_lora_frozen_bytes(&p, n, true), n + 4);
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/llama-65b.json"), &m, &err), PX_OK);
  PX_ASSERT_REL((double)px_model_param_count(&m), 65.2e9, 0.005);
  double linear = 80.0 * (4.0 * 8192 * 8192 + 3.0 * 8192 * 22016);
  PX_ASSERT_REL(linear * (0.5 - 0.127) / 8 / 1e9, 3.0, 0.02);
}

/* Llama 2 70B, LoRA rank 16 on every linear layer (PEFT's all-linear), frozen bf16 base, Adam: the hand
 * derivation of tests/data/lora_facts.md to the byte; QLoRA's 65B on one 48 GB GPU (r 64, all linear,
 * NF4 base, full recomputation, 512 tokens). */
static void test_lora_70b(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("llama2-70b", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 8);
  int all = PX_LORA_Q | PX_LORA_K | PX_LORA_V | PX_LORA_O | PX_LORA_GATE | PX_LORA_UP | PX_LORA_FC2;
  px_parallel p = lora_par(1, 8, 0, 16, all);
  px_plan plan;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  PX_ASSERT_EQ_U64(plan.programs[0].param_elems, 207093760u);
  PX_ASSERT_EQ_U64(plan.programs[0].frozen_elems, 68976648192u);
  PX_ASSERT_EQ_U64(plan.mem[0].static_bytes, 141266796544u);
  CU_ASSERT(!plan.fits); /* one GPU cannot hold the 138 GB base */
  px_plan_free(&plan);
  p = lora_par(8, 1, 0, 16, all); /* tp 8 on one node: it fits */
  p.sp = 1;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
  CU_ASSERT(plan.fits);
  PX_ASSERT_EQ_U64(plan.trained_total, 207093760u); /* what a checkpoint holds */
  px_plan_free(&plan);
  CU_ASSERT_EQUAL_FATAL(px_model_load(px_test_path("tests/data/llama-65b.json"), &m, &err), PX_OK);
  px_cluster one = cluster("dgx-a100", 1);
  p = lora_par(1, 1, 0, 64, all);
  p.finetune = PX_FT_QLORA, p.recompute = PX_RECOMPUTE_FULL, p.seq = 512;
  CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &one, &p, &err), PX_OK);
  CU_ASSERT(plan.mem[0].peak_bytes < (uint64_t)48 << 30);
  px_plan_free(&plan);
}

/* The refusals of what adapters are not planned for, each naming the field. */
static void test_lora_refusals(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny", &m, &err), PX_OK);
  px_cluster c = cluster("dgx-h100", 2);
  px_parallel p = lora_par(1, 2, 3, 4, 0);
  px_parallel_resolve(&p, &m, &c);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "`zero` 3") != NULL);
  p = lora_par(1, 2, 0, 65, 0); /* rank above hidden 64 */
  px_parallel_resolve(&p, &m, &c);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "`lora_rank` 65") != NULL);
  p = lora_par(1, 2, 0, 4, PX_LORA_QKV | PX_LORA_Q);
  px_parallel_resolve(&p, &m, &c);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  p = lora_par(1, 2, 0, 4, 0);
  p.finetune = PX_FT_QLORA, p.base_precision = PX_BASE_BF16;
  px_parallel_resolve(&p, &m, &c);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "nf4") != NULL);
  p = par(1, 1, 2, 0, 1, 2);
  p.lora_rank = 8; /* without finetune lora */
  px_parallel_resolve(&p, &m, &c);
  CU_ASSERT_EQUAL(px_parallel_validate(&p, &m, &c, &err), PX_ERR_INPUT);
  CU_ASSERT(strstr(err.msg, "`finetune` lora") != NULL);
}

/* ---- multi-head latent attention under TP (plan/attention.c) ---- */

/* A layer block's TP collectives in order: kind and bytes a rank hands the collective. */
typedef struct {
  px_op_kind kind;
  uint64_t bytes;
} tp_coll;

static void expect_tp_colls(const px_block *b, const char *what, const tp_coll *want, int n) {
  int got = 0;
  for (int32_t i = 0; i < b->nops; i++) {
    const px_op *o = &b->ops[i];
    if (o->group != PX_GROUP_TP || (o->kind != PX_OP_ALLGATHER && o->kind != PX_OP_ALLREDUCE &&
                                    o->kind != PX_OP_REDUCE_SCATTER))
      continue;
    bool ok = got < n && o->kind == want[got].kind && o->coll_bytes == want[got].bytes &&
              o->wire_bytes == px_coll_busbw_factor((px_coll)o->coll, 2) * (double)o->coll_bytes;
    if (!ok)
      fprintf(stderr, "\n  %s, TP collective %d: %s of %llu bytes (wanted %s of %llu)\n", what, got,
              px_op_names[o->kind], (unsigned long long)o->coll_bytes, got < n ? px_op_names[want[got].kind] : "none",
              got < n ? (unsigned long long)want[got].bytes : 0ull);
    CU_ASSERT(ok);
    got++;
  }
  CU_ASSERT_EQUAL(got, n);
}

/* tiny-mla (h 64, 4 heads, q and kv latents of 32, a RoPE key of 8; fp32, one sequence of 32) on tp 2, by
 * hand, in Megatron-Core's layout: the down projections run on the layer input as it comes. Without SP
 * the forward's only TP collectives are the row-parallel o's and fc2's all-reduces (32 x 64 x 4 = 8,192
 * bytes) and the backward all-reduces the latents' gradients (32 x 32 x 4 = 4,096 each) and the RoPE
 * key's (32 x 8 x 4 = 1,024), then the MLP norm input's, never the layer input's. With SP the forward
 * all-gathers the latents and the RoPE key (the whole sequence's bytes), not the hidden states, and the
 * backward gathers the latents again for the up projections' weight gradients and reduce-scatters their
 * gradients and the key's; the down projections' and latent norms' weight gradients are partial over
 * the sequence shards (summed over TP with the optimizer's). */
/* MLA's down projections (hidden to the q and kv latents and the RoPE key: 64 x (32 + 32 + 8) on tiny-mla) are
 * replicated over TP: without SP every rank runs them on the whole sequence, so the hardware does tp times
 * their FLOPs, forward, data and weight gradients, but the model's FLOPs count them once: the same at tp 1, 2
 * and 2 with SP, whose hardware FLOPs differ by (tp - 1) x 6 B S H (QL + KL + Dr) a layer and micro-batch. */
static void test_mla_model_flops(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-mla", &m, &err), PX_OK);
  px_cluster c = cluster("local-cpu", 2);
  double model[3], hw[3];
  for (int k = 0; k < 3; k++) { /* tp 1 dp 2; tp 2; tp 2 sp */
    px_parallel p = k ? par(2, 1, 1, 0, 1, 2) : par(1, 1, 2, 0, 1, 2);
    p.sp = k == 2, p.precision = PX_PREC_FP32;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    model[k] = plan.model_flops_per_step, hw[k] = plan.hw_flops_per_step;
    px_plan_free(&plan);
  }
  PX_ASSERT_REL(model[1], model[0], 1e-12);
  PX_ASSERT_REL(model[2], model[0], 1e-12);
  double dup = 6.0 * 1 * 32 * 64 * (32 + 32 + 8) * 4 /* layers */ * 2 /* micro-batches */;
  PX_ASSERT_REL(hw[1] - hw[2], (2 - 1) * dup, 1e-9);
}

static void test_mla_tp(void) {
  px_model m;
  px_err err = {0};
  CU_ASSERT_EQUAL_FATAL(px_model_load("tiny-mla", &m, &err), PX_OK);
  const uint64_t hid = 32 * 64 * 4, lat = 32 * 32 * 4, pe = 32 * 8 * 4;
  const px_op_kind AG = PX_OP_ALLGATHER, AR = PX_OP_ALLREDUCE, RS = PX_OP_REDUCE_SCATTER;
  for (int sp = 0; sp < 2; sp++) {
    px_cluster c = cluster("local-cpu", 2);
    px_parallel p = par(2, 1, 1, 0, 1, 1);
    p.sp = sp, p.precision = PX_PREC_FP32;
    px_plan plan;
    CU_ASSERT_EQUAL_FATAL(compile(&plan, &m, &c, &p, &err), PX_OK);
    const px_block *fwd = &plan.blocks[PX_BLOCK_LAYER_FWD], *bwd = &plan.blocks[PX_BLOCK_LAYER_BWD];
    if (!sp) {
      const tp_coll f[] = {{AR, hid}, {AR, hid}};
      const tp_coll b[] = {{AR, hid}, {AR, lat}, {AR, lat}, {AR, pe}};
      expect_tp_colls(fwd, "tp 2, forward", f, 2);
      expect_tp_colls(bwd, "tp 2, backward", b, 4);
    } else {
      const tp_coll f[] = {{AG, lat}, {AG, lat}, {AG, pe}, {RS, hid}, {AG, hid}, {RS, hid}};
      const tp_coll b[] = {{AG, hid}, {AG, hid}, {RS, hid}, {AG, hid}, {AG, lat}, {RS, lat}, {AG, lat}, {RS, lat},
                           {RS, pe}};
      expect_tp_colls(fwd, "tp 2 sp, forward", f, 6);
      expect_tp_colls(bwd, "tp 2 sp, backward", b, 9);
    }
    const char *replicated[] = {"q_down_w", "q_norm_w", "kv_down_w", "kv_norm_w"};
    for (int i = 0; i < 4; i++) {
      int w = px_plan_slot(&plan, replicated[i]);
      CU_ASSERT(w >= 0 && plan.slots[w].tp_replicated && plan.slots[w].sp_partial == (bool)sp);
    }
    px_plan_free(&plan);
  }
}

/* ---- which backend runs a plan (plan/runnable.h) ---- */

/* Each backend's plan-level rules, with the reason's words; and fp8 plans with each CP algorithm allocate
 * and free every tensor once (CP a2a kept the bf16 context it no longer reads: the parity matrix's find). */
static void test_runnable(void) {
  px_err err = {0};
  static const char *names[] = {"tiny", "tiny-gpt", "tiny-moe", "tiny-mla", "tiny-window", "tiny-qknorm", "tiny-sinks"};
  enum { TINY, GPT, MOE, MLA, WINDOW, QKNORM, SINKS, NMODELS };
  px_model ms[NMODELS];
  for (int i = 0; i < NMODELS; i++) CU_ASSERT_EQUAL_FATAL(px_model_load(names[i], &ms[i], &err), PX_OK);
  static const struct {
    int model;
    int64_t tp, dp, cp, ep, mbs;
    int zero, sp, precision, recipe, base, gelu, main_grad, fp8_params;
    const char *cpu, *cuda; /* NULL: runs; else words of the reason */
  } cases[] = {
      {TINY, 1, 1, 1, 1, 1, 0, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, NULL},
      {TINY, 1, 1, 1, 1, 1, 0, 0, PX_PREC_BF16, -1, -1, -1, -1, 0, "fp32 only, not bf16", NULL},
      {TINY, 1, 1, 1, 1, 1, 0, 0, PX_PREC_BF16, -1, -1, -1, PX_MAIN_GRAD_FP32, 0, "fp32 only",
       "fp32 gradients with bf16 activations"},
      {MOE, 1, 2, 1, 2, 1, 0, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MOE, 1, 2, 1, 2, 1, 1, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MOE, 1, 4, 1, 2, 1, 3, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MOE, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MOE, 2, 2, 1, 2, 1, 0, 1, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MLA, 1, 2, 1, 1, 1, 3, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "multi-head latent attention (tiny-mla)"},
      {MLA, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "multi-head latent attention (tiny-mla)"},
      {WINDOW, 1, 1, 1, 1, 1, 0, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, NULL},
      {QKNORM, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, NULL},
      {SINKS, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, NULL},
      {SINKS, 1, 1, 2, 1, 1, 0, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "context parallelism"}, /* the ring */
      {TINY, 1, 1, 2, 1, 1, 0, 0, PX_PREC_FP32, -1, -1, -1, -1, 0, NULL, "context parallelism (`cp` 2)"},
      {TINY, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP8, PX_FP8_DELAYED, PX_FP8_BASE_FP32, -1, -1, 0, NULL, NULL},
      {TINY, 2, 1, 1, 1, 2, 0, 1, PX_PREC_FP8, PX_FP8_DELAYED, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "`mbs` > 1"},
      {TINY, 2, 1, 1, 1, 1, 0, 1, PX_PREC_FP8, PX_FP8_BLOCKWISE, PX_FP8_BASE_FP32, -1, -1, 0, "fp8 blockwise",
       "fp8 blockwise"},
      {GPT, 1, 1, 1, 1, 1, 0, 0, PX_PREC_FP8, PX_FP8_CURRENT, PX_FP8_BASE_BF16, PX_GELU_FUSED, -1, 0, "fp32 only",
       "fused GELU epilogue"},
      {TINY, 1, 1, 1, 1, 1, 0, 0, PX_PREC_FP8, PX_FP8_CURRENT, PX_FP8_BASE_BF16, -1, -1, 1, "fp8 weights",
       "fp8 weights"},
      {TINY, 2, 1, 1, 1, 1, 0, 1, PX_PREC_NVFP4, -1, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "block-scaled matmul"},
      {TINY, 4, 1, 1, 1, 1, 0, 1, PX_PREC_NVFP4, -1, PX_FP8_BASE_FP32, -1, -1, 0,
       "a micro-batch holds 8 on a rank (its sequence shard)", "block-scaled matmul"}, /* 32 tokens over tp 4 */
      {TINY, 4, 1, 1, 1, 1, 0, 1, PX_PREC_MXFP8, -1, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "block-scaled matmul"},
      {TINY, 1, 1, 1, 1, 1, 0, 0, PX_PREC_MXFP8, -1, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "`precision` mxfp8"},
      {MOE, 1, 2, 1, 2, 1, 0, 0, PX_PREC_MXFP8, -1, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
      {MOE, 1, 2, 1, 2, 16, 0, 0, PX_PREC_NVFP4, -1, PX_FP8_BASE_FP32, -1, -1, 0, NULL, "no mixture-of-experts kernels"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    px_cluster c = cluster("local-cpu", 2);
    px_parallel p = par(cases[i].tp, 1, cases[i].dp, cases[i].zero, cases[i].mbs, 8);
    p.cp = cases[i].cp, p.ep = cases[i].ep, p.sp = cases[i].sp, p.precision = cases[i].precision;
    p.fp8_recipe = cases[i].recipe, p.fp8_base = cases[i].base, p.gelu = cases[i].gelu;
    p.main_grad = cases[i].main_grad, p.fp8_params = cases[i].fp8_params;
    px_parallel_resolve(&p, &ms[cases[i].model], &c);
    const char *want[PX_RUN_BACKEND_COUNT] = {cases[i].cpu, cases[i].cuda};
    for (int b = 0; b < PX_RUN_BACKEND_COUNT; b++) {
      char why[512];
      bool runs = px_runnable((px_run_backend)b, &p, &ms[cases[i].model], why, sizeof why);
      bool ok = want[b] ? !runs && strstr(why, want[b]) : runs;
      if (!ok) fprintf(stderr, "\n  case %zu, %s: %s (wanted %s)\n", i, px_run_backend_names[b], runs ? "runs" : why,
                       want[b] ? want[b] : "runs");
      CU_ASSERT(ok);
    }
  }
  { /* activation offload: both backends, fp8 too (its codes' scales follow them to the host: codes_rekeyed) */
    px_cluster c = cluster("local-cpu", 2);
    px_parallel p = par(1, 1, 2, 0, 1, 8);
    p.precision = PX_PREC_FP8, p.fp8_base = PX_FP8_BASE_FP32, p.fp8_recipe = PX_FP8_CURRENT, p.offload_act_layers = 2;
    px_parallel_resolve(&p, &ms[TINY], &c);
    char why[512];
    CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[TINY], why, sizeof why));
    CU_ASSERT(px_runnable(PX_RUN_CUDA, &p, &ms[TINY], why, sizeof why));
  }
  { /* MoE under TP + SP with etp 1 runs on the cpu backend (issue #36), with DeepEP's and HybridEP's exchanges too
     * (the alltoall dispatcher's op graph); the allgather dispatcher does not; CUDA graphs run on the cpu backend
     * only (the cuda backend would measure a step without them) */
    px_cluster c = cluster("local-cpu", 4);
    px_parallel p = par(2, 1, 2, 1, 1, 8);
    p.sp = 1, p.ep = 2, p.etp = 1;
    px_parallel_resolve(&p, &ms[MOE], &c);
    char why[512];
    CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[MOE], why, sizeof why));
    p.moe_dispatch = PX_MOE_ALLGATHER;
    CU_ASSERT(!px_runnable(PX_RUN_CPU, &p, &ms[MOE], why, sizeof why) && strstr(why, "the allgather dispatcher's"));
    for (int d = PX_MOE_DEEPEP; d <= PX_MOE_HYBRIDEP; d++) {
      p.moe_dispatch = d;
      CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[MOE], why, sizeof why));
    }
    px_parallel g = par(1, 1, 2, 1, 1, 8);
    g.cuda_graph = PX_GRAPH_LAYERS;
    px_parallel_resolve(&g, &ms[TINY], &c);
    CU_ASSERT(px_runnable(PX_RUN_CPU, &g, &ms[TINY], why, sizeof why));
    CU_ASSERT(!px_runnable(PX_RUN_CUDA, &g, &ms[TINY], why, sizeof why) && strstr(why, "CUDA graphs"));
  }
  { /* adapters on a frozen base: both backends train them on a base in the compute dtype, nf4 or fp8 (the cuda
     * backend dequantises with kernels/cuda/nf4.h and fp8.h) */
    px_cluster c = cluster("local-cpu", 2);
    px_parallel p = par(1, 1, 2, 0, 1, 8);
    p.precision = PX_PREC_FP32, p.finetune = PX_FT_LORA;
    px_parallel_resolve(&p, &ms[TINY], &c);
    char why[512];
    CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[TINY], why, sizeof why));
    CU_ASSERT(px_runnable(PX_RUN_CUDA, &p, &ms[TINY], why, sizeof why));
    p.base_precision = PX_BASE_NF4, p.finetune = PX_FT_QLORA;
    CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[TINY], why, sizeof why));
    CU_ASSERT(px_runnable(PX_RUN_CUDA, &p, &ms[TINY], why, sizeof why));
    p.base_precision = PX_BASE_FP8, p.finetune = PX_FT_LORA;
    CU_ASSERT(px_runnable(PX_RUN_CPU, &p, &ms[TINY], why, sizeof why));
    CU_ASSERT(px_runnable(PX_RUN_CUDA, &p, &ms[TINY], why, sizeof why));
    p.precision = PX_PREC_BF16;
    px_parallel_resolve(&p, &ms[TINY], &c);
    CU_ASSERT(px_runnable(PX_RUN_CUDA, &p, &ms[TINY], why, sizeof why)); /* dequantised into bf16 */
  }
  CU_ASSERT_EQUAL(px_run_backend_of("cuda"), PX_RUN_CUDA);
  CU_ASSERT_EQUAL(px_run_backend_of("tpu"), -1);
  for (int algo = 0; algo < PX_CP_ALGO_COUNT; algo++) {
    px_cluster c = cluster("local-cpu", 2);
    px_parallel p = par(1, 1, 1, 0, 1, 8);
    p.cp = 2, p.cp_algo = algo, p.precision = PX_PREC_FP8, p.fp8_base = PX_FP8_BASE_FP32;
    px_plan plan;
    px_status st = compile(&plan, &ms[TINY], &c, &p, &err);
    if (st) fprintf(stderr, "\n  cp %s fp8: %s\n", px_cp_algo_names[algo], err.msg);
    CU_ASSERT_EQUAL_FATAL(st, PX_OK);
    check_lifetimes(&plan);
    px_plan_free(&plan);
  }
}

int main(void) {
  static const px_test tests[] = {
      {"model states equal the ZeRO formulas (stages 0-3)", test_zero_states},
      {"hybrid sharding: states of full sharding over the shard group, two-level reduction", test_hybrid_states},
      {"activations per layer equal Korthikanti et al. within 1%", test_korthikanti},
      {"fused attention: the formula without its S x S terms, plus the log-sum-exp", test_flash_memory},
      {"1F1B holds p micro-batches; interleaving's factor", test_inflight},
      {"FLOPs per step equal Megatron's formula within 0.5%", test_flops},
      {"sends match receives and no schedule deadlocks", test_p2p_deadlock_free},
      {"uneven chunks (126 layers / 16 stages / vpp 2..7), any micro-batch count: no deadlock", test_p2p_uneven},
      {"a broken p2p order is reported as a deadlock", test_p2p_detects_deadlock},
      {"every tensor is allocated and freed exactly once", test_lifetimes},
      {"the MTP module: its blocks on the last stage, lifetimes, embedding copy, FLOPs", test_mtp},
      {"zero-bubble memory: ZB-H1 at 1F1B's first-stage peak, ZB-H2 (2p-1)/p of it", test_zero_bubble_memory},
      {"zero-bubble with experts: the router's, shared and routed experts' weight gradients in W", test_zero_bubble_moe},
      {"zero-bubble with ZeRO-3: W gathers nothing, each layer's reduce-scatter after its W", test_zero_bubble_zero3},
      {"uneven layer split and the rank grid", test_layer_split},
      {"cluster what-ifs: --set changes one field, refuses unknown ones", test_cluster_set_field},
      {"every preset's datasheet figures have a source", test_cluster_sources},
      {"reserved memory: the CUDA context, cuBLASLt workspace and NCCL buffers it adds", test_runtime_reserve},
      {"every preset's host link: its cited row of tests/data/host_link.csv", test_host_link},
      {"Blackwell presets: per-GPU figures from the published totals", test_blackwell_presets},
      {"px_plan_compile resolves the unset choices itself", test_compile_resolves},
      {"impossible plans are refused with a reason", test_refusals},
      {"the layer-pass limit: at it valid, past it refused, no overflow", test_layer_pass_limit},
      {"numbers are decimal: suffixes yes, hex, inf, nan and spaces no", test_numbers},
      {"gradient buckets split layers at tensor boundaries (ZeRO-0/1/2)", test_buckets_split_layers},
      {"offload: DeepSpeed's model-state estimates, to the byte", test_deepspeed_estimates},
      {"offload: host and NVMe placement, and fits weighs them", test_offload_places},
      {"vocabulary padding as Megatron", test_vocab_padding},
      {"context parallelism: grid, per-algorithm memory and bytes on the wire, FLOPs", test_context_parallel},
      {"mixture of experts: per-rank experts, expert-DP sharding, EP bytes, FLOPs, imbalance", test_moe},
      {"mixture of experts: the gates applied in the experts' activation, no returned outputs kept",
       test_moe_gates_in_activation},
      {"fp8 primary weights: memory, fp8 all-gathers, refusals", test_fp8_params},
      {"primary mxfp8 and nvfp4 weights: memory, gathers, optimizer writes, casts, refusals", test_block_scaled_params},
      {"fp8 on Blackwell: one copy of a per-tensor tensor, none beside fp8 weights", test_fp8_any_layout},
      {"sliding-window attention: attended pairs, gpt-oss's flash FLOPs per layer kind, 9 layers a stage, CP refused", test_sliding_window},
      {"attention flash2: flash's graph flagged FlashAttention-2, refusals, the curves' round trip", test_flash2_attention},
      {"fp8: which GEMMs, cached weights, fp8 activations, ZeRO-3 casts, experts and dispatch", test_fp8},
      {"mxfp8 and nvfp4: flagged GEMMs, bytes of codes and scales, casts, refused without block-scaled tensor cores", test_block_scaled},
      {"bf16 layers: unquantized blocks picked per layer, codes and scales of the other layers only, refusals",
       test_bf16_layers},
      {"fp8_library: torchao's recipes, a round trip, refusals by field", test_fp8_library},
      {"fp8 attention: the quantized layers' fused attention flagged in its format", test_fp8_attention_flags},
      {"MoE: the experts' padding copies under an fp8 recipe (Megatron-Core's Fp8Padding; none with HybridEP)",
       test_moe_quant_padding},
      {"compute waits for the TP collectives whose tensors it uses", test_tp_deps},
      {"multi-head latent attention under TP: Megatron-Core's collectives by hand", test_mla_tp},
      {"multi-head latent attention: replicated down projections counted once in model FLOPs", test_mla_model_flops},
      {"fused GELU: the same memory and FLOPs, three passes fewer", test_gelu_fused},
      {"eager elementwise ops: the same ops and FLOPs, PyTorch eager's bytes, the loss's fp32 workspaces", test_elementwise_eager},
      {"RoPE unfused (rope-unfused, or a YaRN concentration): Megatron-Core's unfused RoPE, its bytes and kernels",
       test_rope_unfused},
      {"LoRA on tiny by hand: states, DP bytes, adapter activations, GEMMs, TP split, QLoRA dequantisation",
       test_lora_small},
      {"LoRA and QLoRA plans: every tensor allocated and freed once", test_lora_lifetimes},
      {"NF4 with double quantisation: 4.127 bits a weight, 3 GB saved on LLaMA 65B (QLoRA)", test_lora_nf4_bytes},
      {"Llama 2 70B LoRA r16 to the byte; QLoRA 65B under 48 GB", test_lora_70b},
      {"adapters' refusals name their fields", test_lora_refusals},
      {"activation offload: copies out and back in TE's window, peak and host memory, refusals",
       test_offload_activations},
      {"partial recomputation (block, every): what each layer keeps, the peak, the FLOPs, per chunk, refusals",
       test_recompute_block},
      {"recompute_modules drop what Korthikanti et al. count for each module", test_recompute_modules},
      {"recompute op: torchtitan's per-op policy's kept bytes and recomputed GEMMs by hand", test_recompute_op},
      {"layernorm recomputation keeps a MoE layer's pre-MLP norm under router graphs but with alltoall",
       test_recompute_norm_graphs},
      {"which backend runs a plan: each one's plan-level rules; fp8 under each CP algorithm frees every tensor",
       test_runnable},
  };
  return px_test_main("plan", tests, sizeof tests / sizeof tests[0]);
}
