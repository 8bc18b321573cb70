/* Plan rendering: text for people, JSON for tools. */
#include "report/plan.h"

#include <string.h>

#include "core/fmt.h"
#include "core/json.h"
#include "plan/lora.h"
#include "plan/planfile.h"
#include "plan/runnable.h"
#include "report/flags.h"
#include "report/model.h"
#include "report/sim.h"

/* Where a group's members sit; a placement's "node" is the NVLink domain (plan/grid.h), named so where it is a rack of
 * nodes (GB200 NVL72). */
static const char *place_text(const px_placement *pl, const px_cluster *c, char *buf, size_t cap) {
  bool racks = px_cluster_nvlink_domain(c) > px_cluster_node_size(c);
  const char *one = racks ? "NVLink domain" : "node";
  if (pl->size <= 1)
    snprintf(buf, cap, "1 rank (no communication)");
  else if (pl->intra)
    snprintf(buf, cap, "%lld ranks inside one %s, stride %lld", (long long)pl->size,
             racks ? "NVLink domain" : "node (NVLink)", (long long)pl->stride);
  else
    snprintf(buf, cap, "%lld ranks over %lld %ss, %lld per %s (InfiniBand%s), stride %lld", (long long)pl->size,
             (long long)pl->nodes, one, (long long)pl->per_node, one, pl->leaves > 1 ? ", several leaf switches" : "",
             (long long)pl->stride);
  return buf;
}

const char *px_report_recompute_text(const px_parallel *p, char *buf, size_t cap) {
  if (px_parallel_recompute_partial(p) && p->recompute_method == PX_RECOMPUTE_EVERY)
    snprintf(buf, cap, "full of 1 layer in %lld of a chunk (every)", (long long)p->recompute_layers);
  else if (px_parallel_recompute_partial(p))
    snprintf(buf, cap, "full of %lld layer%s a chunk (block)", (long long)p->recompute_layers,
             p->recompute_layers == 1 ? "" : "s");
  else if (p->recompute_modules) {
    char t[96];
    snprintf(buf, cap, "selective (%s)", px_recompute_modules_str(p->recompute_modules, t, sizeof t));
  } else
    snprintf(buf, cap, "%s", px_recompute_names[p->recompute]);
  return buf;
}

void px_report_plan_line(const px_plan *plan, const char *what, FILE *out) {
  const px_parallel *p = &plan->par;
  char cp[48] = "", rc[96];
  if (p->cp > 1) snprintf(cp, sizeof cp, " cp %lld (%s)", (long long)p->cp, px_cp_algo_names[p->cp_algo]);
  char ft[128];
  fprintf(out,
          "%s: %s on %lld x %s (%s): tp %lld%s pp %lld dp %lld, ZeRO-%d%s, %s, mbs %lld, gbs %lld, seq %lld, "
          "recompute %s%s%s%s%s\n",
          what, plan->model.name, (long long)plan->cluster.gpus, plan->cluster.gpu.name, plan->cluster.name,
          (long long)p->tp, cp, (long long)p->pp, (long long)p->dp, p->zero, p->sp ? ", SP" : "",
          px_schedule_names[p->schedule], (long long)p->mbs, (long long)p->gbs, (long long)plan->seq,
          px_report_recompute_text(p, rc, sizeof rc), px_lora_describe(p, ft, sizeof ft),
          p->cuda_graph == PX_GRAPH_LAYERS   ? ", CUDA graphs per layer"
          : p->cuda_graph == PX_GRAPH_FULL   ? ", a CUDA graph a step"
          : p->cuda_graph == PX_GRAPH_ROUTER ? ", CUDA graphs of the routers"
                                             : "",
          p->overlap > 0 && (p->overlap & PX_OVERLAP_EP) ? ", EP overlap (combined 1F1B)" : "",
          p->elementwise == PX_ELEMWISE_EAGER          ? ", elementwise eager"
          : p->elementwise == PX_ELEMWISE_ROPE_UNFUSED ? ", RoPE unfused"
                                                       : "");
}

void px_report_finetune_text(const px_plan *plan, FILE *out) {
  const px_parallel *p = &plan->par;
  if (p->finetune == PX_FT_FULL) fprintf(out, "  fine-tuning: full (every weight trained)\n");
  if (!px_parallel_lora(p)) return;
  char t[96], fb[32], tb[32];
  int64_t s = px_plan_peak_stage(plan);
  const px_program *prog = &plan->programs[s];
  fprintf(out,
          "  fine-tuning: %s rank %lld (alpha %g) on %s; on a GPU of stage %lld the frozen base takes %s (%s), the "
          "%s trained adapter parameters have the gradients, optimizer states and DP reductions\n",
          px_finetune_names[p->finetune], (long long)p->lora_rank, p->lora_alpha,
          px_lora_targets_str(p->lora_targets, t, sizeof t), (long long)s,
          px_fmt_bytes((double)prog->frozen_bytes, fb, sizeof fb), px_lora_base_name(p),
          px_fmt_count((double)prog->param_elems, tb, sizeof tb));
}

/* What of the model the plan leaves out: its MTP modules (DeepSeek-V3's) that Megatron-Bridge trains and the plan
 * does not (beyond its mtp_layers); their forward FLOPs a token, their share over the model's and a sentence
 * saying so into buf; 0 (and "") where nothing is left out. */
static double mtp_not_planned(const px_model *m, int64_t seq, int64_t trained, int64_t *left, double *share, char *buf,
                              size_t cap) {
  px_model_flops f;
  px_model_flops_per_token(m, seq, &f);
  *left = m->mtp_layers > trained ? m->mtp_layers - trained : 0;
  double flops = *left > 0 ? f.forward_mtp_flops * (double)*left / (double)m->mtp_layers : 0;
  *share = f.forward_flops > 0 ? flops / f.forward_flops : 0;
  buf[0] = '\0';
  if (flops > 0) {
    char fl[32];
    snprintf(buf, cap, "%s's %lld MTP module%s, which Megatron-Bridge trains on the last stage (%s a token forward, "
             "%.1f%% over the model's): the step and that stage's memory are short of it (the plan's mtp_layers "
             "trains it)", m->name, (long long)*left, *left > 1 ? "s" : "", px_fmt_flops(flops, fl, sizeof fl),
             100 * *share);
  }
  return flops;
}

void px_report_inputs_text(const px_model *m, const px_cluster *c, int64_t seq, int64_t mtp_layers, FILE *out) {
  char buf[PX_CLUSTER_OVERRIDES_MAX * 130];
  if (c->noverrides) fprintf(out, "  cluster fields set: %s\n", px_cluster_overrides_text(c, buf, sizeof buf));
  px_report_seq_from_text(m, seq, out);
  double share;
  int64_t left;
  if (mtp_not_planned(m, seq, mtp_layers, &left, &share, buf, sizeof buf) > 0) fprintf(out, "  not planned: %s\n", buf);
}

void px_report_inputs_json(cJSON *o, const px_model *m, const px_cluster *c, int64_t seq, int64_t mtp_layers) {
  cJSON *ov = cJSON_AddArrayToObject(o, "overrides");
  for (int i = 0; ov && i < c->noverrides; i++) cJSON_AddItemToArray(ov, cJSON_CreateString(c->overrides[i]));
  if (m->seq_from_positions && seq == m->seq_len) cJSON_AddStringToObject(o, "seq_from", "max_position_embeddings");
  char text[256];
  double share;
  int64_t left;
  double mtp = mtp_not_planned(m, seq, mtp_layers, &left, &share, text, sizeof text);
  cJSON *np = mtp > 0 ? cJSON_AddObjectToObject(o, "not_planned") : NULL;
  if (np) {
    px_json_add_num(np, "mtp_modules", (double)left);
    px_json_add_num(np, "mtp_forward_flops_per_token", mtp);
    px_json_add_num(np, "mtp_share_of_model_flops", share);
    cJSON_AddStringToObject(np, "text", text);
  }
}

void px_report_plan_text(const px_plan *plan, const px_sim_result *sim, const px_replan_fit *fits, int nfits, FILE *out) {
  const px_parallel *p = &plan->par;
  const px_cluster *c = &plan->cluster;
  char a[160], b[64], d[64];
  fprintf(out, "plan: %s on %lld x %s (%s, %lld node%s)\n", plan->model.name, (long long)c->gpus, c->gpu.name, c->name,
          (long long)c->nodes, c->nodes == 1 ? "" : "s");
  px_report_inputs_text(&plan->model, c, p->seq, p->mtp_layers, out);
  px_report_verdict_text(plan, fits, nfits, out);
  fprintf(out, "  tp %lld", (long long)p->tp);
  if (p->cp > 1) fprintf(out, " x cp %lld", (long long)p->cp);
  fprintf(out, " x pp %lld x dp %lld, ZeRO-%d%s, %s", (long long)p->pp, (long long)p->dp, p->zero,
          p->sp ? ", sequence parallel" : "", px_schedule_names[p->schedule]);
  if (p->schedule == PX_SCHED_INTERLEAVED) fprintf(out, " (vpp %lld)", (long long)p->vpp);
  char prec[128], rc[96];
  if (p->precision == PX_PREC_FP8) /* the recipe and the dtype of everything but the fp8 GEMMs */
    snprintf(prec, sizeof prec, "fp8 (%s scaling, the rest %s%s)", px_fp8_recipe_names[p->fp8_recipe >= 0 ? p->fp8_recipe : 0],
             px_fp8_base_names[p->fp8_base >= 0 ? p->fp8_base : 0], p->fp8_params > 0 ? ", fp8 weights" : "");
  else if (px_precision_block_scaled(p->precision)) /* the dtype of everything but the block-scaled GEMMs */
    snprintf(prec, sizeof prec, "%s (the rest %s%s%s)", px_precision_names[p->precision],
             px_fp8_base_names[p->fp8_base >= 0 ? p->fp8_base : 0], p->fp8_params > 0 ? ", weights in " : "",
             p->fp8_params > 0 ? px_precision_names[p->precision] : "");
  else
    snprintf(prec, sizeof prec, "%s", px_precision_names[p->precision]);
  if (px_precision_quantized(p->precision) && p->fp8_library == PX_FP8_LIB_TORCHAO) /* whose quantized layers */
    snprintf(prec + strlen(prec), sizeof prec - strlen(prec), ", torchao's linear layers");
  if (p->bf16_layers_start > 0 || p->bf16_layers_end > 0) { /* the layers whose GEMMs stay unquantized */
    char first[32] = "", last[32] = "";
    if (p->bf16_layers_start > 0) snprintf(first, sizeof first, "first %lld", (long long)p->bf16_layers_start);
    if (p->bf16_layers_end > 0) snprintf(last, sizeof last, "last %lld", (long long)p->bf16_layers_end);
    snprintf(prec + strlen(prec), sizeof prec - strlen(prec), ", the %s%s%s layers unquantized", first,
             first[0] && last[0] ? " and " : "", last);
  }
  char attn_fmt[16] = ""; /* the attention's fp8 format (fp8_attention) */
  if (px_parallel_attn_format(p) != PX_ATTN_BF16)
    snprintf(attn_fmt, sizeof attn_fmt, " in %s", px_attn_format_names[px_parallel_attn_format(p)]);
  fprintf(out, ", mbs %lld, gbs %lld (%lld micro-batch%s per DP rank), seq %lld, %s, recompute %s, %s attention%s%s%s\n",
          (long long)p->mbs, (long long)p->gbs, (long long)plan->microbatches, plan->microbatches == 1 ? "" : "es",
          (long long)p->seq, prec,
          px_report_recompute_text(p, rc, sizeof rc), px_attention_names[p->attention], attn_fmt,
          p->gelu == PX_GELU_FUSED && plan->model.mlp != PX_MLP_SWIGLU ? ", GELU in the GEMM epilogues" : "",
          p->elementwise == PX_ELEMWISE_EAGER          ? ", elementwise ops as PyTorch eager's kernels"
          : p->elementwise == PX_ELEMWISE_ROPE_UNFUSED ? ", RoPE as Megatron-Core's unfused PyTorch ops"
                                                       : "");
  px_report_finetune_text(plan, out);
  if (p->zero >= 2)
    fprintf(out, "  ZeRO-%d: gradients %s%s", p->zero,
            p->grad_accum == PX_ACCUM_FULL ? "kept full over the micro-batches, reduced once a step"
                                           : "reduce-scattered every micro-batch into the shard",
            p->zero == 3 ? "" : "\n");
  if (p->zero == 3)
    fprintf(out, ", parameters %s, gathered %lld layer%s ahead\n",
            p->reshard ? "resharded after the forward" : "kept from the forward to the backward", (long long)p->prefetch,
            p->prefetch == 1 ? "" : "s");
  if (p->cp > 1)
    fprintf(out,
            "  context parallel: each sequence split over %lld ranks (%lld tokens each, two chunks for the causal "
            "balance), attention by %s; gradients reduced over dp x cp = %lld ranks\n",
            (long long)p->cp, (long long)plan->seq_cp, px_cp_algo_names[p->cp_algo], (long long)plan->grid.wdp);
  if (plan->model.experts > 0)
    fprintf(out,
            "  mixture of experts: %lld experts (top %lld) split over ep %lld (%lld per rank), each over etp %lld, "
            "%s dispatch%s; the busiest rank's experts take %lld rows a micro-batch (%s); expert gradients over "
            "tp x dp%s / (etp x ep) = %lld ranks\n",
            (long long)plan->model.experts, (long long)plan->model.experts_per_token, (long long)p->ep,
            (long long)px_plan_local_experts(plan), (long long)plan->grid.etp, px_moe_dispatch_names[p->moe_dispatch],
            p->moe_router_padding > 0 ? ", the router padding each expert's tokens to the quantized GEMMs' alignment" : "",
            (long long)px_plan_expert_rows(plan),
            plan->model.capacity_factor > 0 ? "capacity factor" : "dropless", p->cp > 1 ? " x cp" : "",
            (long long)px_parallel_expert_dp(p));
  if (px_parallel_hybrid(p))
    fprintf(out,
            "  hybrid sharding: model states sharded over %lld DP%s ranks, replicated %lld times; gradients "
            "reduce-scattered in the shard group, then all-reduced over the replicas once a step\n",
            (long long)p->shard_group, p->cp > 1 ? " x CP" : "", (long long)(plan->grid.wdp / p->shard_group));
  if (plan->grad_dtype != plan->param_dtype)
    fprintf(out, "  gradients in %s (parameters in %s)\n", px_dtype_names[plan->grad_dtype], px_dtype_names[plan->param_dtype]);
  if (plan->vocab_padded != plan->model.vocab)
    fprintf(out, "  vocab %lld padded to %lld (a multiple of 128 x tp, as Megatron-LM does)\n",
            (long long)plan->model.vocab, (long long)plan->vocab_padded);
  if (p->cp > 1) {
    fprintf(out, "\ngrid (rank = tp_rank + tp x (cp_rank + cp x (dp_rank + dp x pp_rank))):\n");
    fprintf(out, "  tp groups: %s\n", place_text(&plan->grid.tp_place, &plan->cluster, a, sizeof a));
    fprintf(out, "  cp groups: %s\n", place_text(&plan->grid.cp_place, &plan->cluster, a, sizeof a));
    fprintf(out, "  dp x cp groups: %s\n", place_text(&plan->grid.dp_place, &plan->cluster, a, sizeof a));
  } else {
    fprintf(out, "\ngrid (rank = tp_rank + tp x (dp_rank + dp x pp_rank)):\n");
    fprintf(out, "  tp groups: %s\n", place_text(&plan->grid.tp_place, &plan->cluster, a, sizeof a));
    fprintf(out, "  dp groups: %s\n", place_text(&plan->grid.dp_place, &plan->cluster, a, sizeof a));
  }
  if (px_parallel_hybrid(p)) {
    fprintf(out, "  shard groups: %s\n", place_text(&plan->grid.shard_place, &plan->cluster, a, sizeof a));
    fprintf(out, "  replica groups: %s\n", place_text(&plan->grid.replica_place, &plan->cluster, a, sizeof a));
  }
  if (p->ep > 1) {
    fprintf(out, "  ep groups: %s\n", place_text(&plan->grid.ep_place, &plan->cluster, a, sizeof a));
    fprintf(out, "  expert dp groups: %s\n", place_text(&plan->grid.edp_place, &plan->cluster, a, sizeof a));
  }
  fprintf(out, "  pp groups: %s\n", place_text(&plan->grid.pp_place, &plan->cluster, a, sizeof a));

  fprintf(out, "\nstages (layers, parameters per GPU):\n");
  for (int64_t s = 0; s < p->pp; s++) {
    const px_program *prog = &plan->programs[s];
    fprintf(out, "  stage %-3lld", (long long)s);
    for (int64_t ch = 0; ch < p->vpp; ch++) {
      int64_t vs = ch * p->pp + s;
      fprintf(out, "%s%lld-%lld", ch ? ", " : " layers ", (long long)plan->vstage_first[vs],
              (long long)(plan->vstage_first[vs] + plan->vstage_layers[vs] - 1));
    }
    char mtp[64] = "";
    if (prog->has_head && p->mtp_layers > 0)
      snprintf(mtp, sizeof mtp, " + MTP module (its loss weighted %g)", p->mtp_loss_scale);
    fprintf(out, " (%lld)%s%s%s, %s params\n", (long long)prog->nlayers, prog->has_embed ? " + embedding" : "",
            prog->has_head ? " + head and loss" : "", mtp, px_fmt_count((double)prog->param_elems, a, sizeof a));
  }

  fprintf(out, "\nmemory per GPU (%s HBM, %s reserved):\n", px_fmt_bytes((double)c->gpu.hbm_bytes, a, sizeof a),
          px_fmt_bytes((double)c->gpu.reserved_bytes, b, sizeof b));
  fprintf(out, "  stage     params      grads  optimizer activations    buffers       peak  fits\n");
  for (int64_t s = 0; s < p->pp; s++) {
    const px_memplan *mp = &plan->mem[s];
    fprintf(out, "  %-5lld", (long long)s);
    for (int k = 0; k < PX_MEM_WORKSPACE; k++) fprintf(out, " %10s", px_fmt_bytes((double)mp->at_peak[k], a, sizeof a));
    fprintf(out, " %10s  %s\n", px_fmt_bytes((double)mp->peak_bytes, a, sizeof a), px_plan_stage_fits(plan, s) ? "yes" : "NO");
  }
  if (p->offload_act_layers > 0) { /* pp 1: the copies of the first layers' kept activations */
    const px_program *prog = &plan->programs[0];
    fprintf(out, "activation offload: layers 0-%lld keep their activations in host memory between forward and "
            "backward (%s a layer, a micro-batch at a time, over the %.0f GB/s host link), at most %lld layers' on the "
            "GPU\n", (long long)p->offload_act_layers - 1, px_fmt_bytes(prog->ops[prog->act_ops].bytes, a, sizeof a),
            px_cluster_host_link_bytes_per_s(c) / 1e9,
            (long long)px_parallel_offload_window(p, plan->model.layers));
  }
  if (p->offload_opt || p->offload_act_layers > 0) {
    fprintf(out, "offloaded per GPU (stage 0): %s host memory", px_fmt_bytes((double)plan->mem[0].host_bytes, a, sizeof a));
    if (plan->mem[0].nvme_bytes) fprintf(out, ", %s NVMe", px_fmt_bytes((double)plan->mem[0].nvme_bytes, a, sizeof a));
    fprintf(out, "\noffloaded per node: %s of %s host memory", px_fmt_bytes((double)plan->host_node_bytes, a, sizeof a),
            px_fmt_bytes((double)c->host_memory_bytes, b, sizeof b));
    if (plan->nvme_node_bytes)
      fprintf(out, ", %s of %s NVMe", px_fmt_bytes((double)plan->nvme_node_bytes, a, sizeof a),
              px_fmt_bytes((double)c->host_nvme_bytes, b, sizeof b));
    fprintf(out, ": %s\n", px_plan_host_fits(plan) ? "fits" : "DOES NOT FIT");
  }
  const px_stage_totals *t0 = &plan->totals[0];
  fprintf(out, "\nper step: %s model FLOPs (Megatron accounting), %s with recomputation\n",
          px_fmt_flops(plan->model_flops_per_step, a, sizeof a), px_fmt_flops(plan->hw_flops_per_step, b, sizeof b));
  fprintf(out, "bytes sent per GPU per step (stage 0): tp %s", px_fmt_bytes(t0->wire_bytes[PX_GROUP_TP], a, sizeof a));
  if (p->cp > 1) fprintf(out, ", cp %s", px_fmt_bytes(t0->wire_bytes[PX_GROUP_CP], a, sizeof a));
  if (plan->model.experts > 0) fprintf(out, ", ep %s", px_fmt_bytes(t0->wire_bytes[PX_GROUP_EP], a, sizeof a));
  if (plan->model.experts > 0 && plan->grid.etp > 1)
    fprintf(out, ", etp %s", px_fmt_bytes(t0->wire_bytes[PX_GROUP_ETP], a, sizeof a));
  fprintf(out, ", dp %s, pp %s\n", px_fmt_bytes(px_totals_dp_wire_bytes(t0), b, sizeof b),
          px_fmt_bytes(t0->wire_bytes[PX_GROUP_NEXT] + t0->wire_bytes[PX_GROUP_PREV], d, sizeof d));
  fprintf(out, "pipeline bubble (analytic): %.1f%%\n", 100.0 * px_plan_bubble_analytic(plan));
  if (sim) {
    char mfu[96];
    fprintf(out, "simulated step: %s, %.1f model TFLOP/s per GPU, %s (parallax sim: where the time goes)\n",
            px_fmt_time(sim->step_time_s, a, sizeof a), sim->model_tflops_per_gpu,
            px_report_mfu_text(sim->mfu, sim->mfu_peak_dtype, sim->mfu_precision, sim->precision_peak_dtype, mfu, sizeof mfu));
  }
}

static const char *const replan_group_names[PX_REPLAN_GROUPS] = {"zero", "recompute", "mbs", "split", "offload"};

/* The stage with the least room (the largest peak), what it needs with the headroom, and what the GPU leaves. */
static int64_t verdict_stage(const px_plan *plan, uint64_t *need, uint64_t *usable) {
  int64_t s = px_plan_peak_stage(plan);
  *need = px_plan_reserve_bytes(plan->mem[s].peak_bytes);
  *usable = px_gpu_usable_bytes(&plan->cluster.gpu);
  return s;
}

void px_report_verdict_text(const px_plan *plan, const px_replan_fit *fits, int nfits, FILE *out) {
  char a[64], b[64], c[64], d[64], e[64], f[64];
  uint64_t need, usable;
  int64_t s = verdict_stage(plan, &need, &usable);
  const px_gpu *g = &plan->cluster.gpu;
  bool gpu_fits = need <= usable, host_fits = px_plan_host_fits(plan);
  if (!host_fits) { /* first when the GPUs have room: the verdict leads */
    fprintf(out, "  DOES NOT FIT: the offloaded states need %s of host memory a node, which has %s",
            px_fmt_bytes((double)plan->host_node_bytes, a, sizeof a), px_fmt_bytes((double)plan->cluster.host_memory_bytes, b, sizeof b));
    if (plan->nvme_node_bytes)
      fprintf(out, ", and %s of NVMe of %s", px_fmt_bytes((double)plan->nvme_node_bytes, a, sizeof a),
              px_fmt_bytes((double)plan->cluster.host_nvme_bytes, b, sizeof b));
    fputc('\n', out);
  }
  fprintf(out, "  %s stage %lld needs %s per GPU (peak %s and the allocator's headroom) of the %s usable (%s HBM less "
          "%s reserved): %s %s\n", !gpu_fits ? "DOES NOT FIT:" : host_fits ? "fits:" : "GPU memory:", (long long)s,
          px_fmt_bytes((double)need, a, sizeof a), px_fmt_bytes((double)plan->mem[s].peak_bytes, b, sizeof b),
          px_fmt_bytes((double)usable, c, sizeof c), px_fmt_bytes((double)g->hbm_bytes, d, sizeof d),
          px_fmt_bytes((double)g->reserved_bytes, e, sizeof e),
          px_fmt_bytes((double)(gpu_fits ? usable - need : need - usable), f, sizeof f), gpu_fits ? "to spare" : "over");
  if (plan->fits) return;
  if (nfits == 0) {
    char gf[64];
    fprintf(out, "  no change of one or two of the ZeRO stage, recomputation, micro-batch, tp/pp split and offload fits: "
            "more GPUs (parallax sweep %s N), or GPUs with more memory\n", px_report_flag("gpus", gf));
    return;
  }
  fprintf(out, "  nearest plans that fit (%s, fastest first):\n",
          __builtin_popcount((unsigned)fits[0].changed) == 1 ? "one change" : "two changes");
  for (int i = 0; i < nfits; i++) {
    char change[PX_REPORT_FLAGS_MAX], mfu[96];
    px_report_plan_change(&plan->par, &fits[i].par, &plan->model, &plan->cluster, change, sizeof change);
    const px_sim_result *r = &fits[i].sim;
    fprintf(out, "    %-36s %s a step, %s, peak %s\n", change, px_fmt_time(r->step_time_s, a, sizeof a),
            px_report_mfu_text(r->mfu, r->mfu_peak_dtype, r->mfu_precision, r->precision_peak_dtype, mfu, sizeof mfu),
            px_fmt_bytes((double)fits[i].peak_bytes, b, sizeof b));
  }
}

cJSON *px_report_verdict_json(const px_plan *plan, const px_replan_fit *fits, int nfits) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  uint64_t need, usable;
  int64_t s = verdict_stage(plan, &need, &usable);
  cJSON_AddBoolToObject(o, "fits", plan->fits);
  px_json_add_num(o, "stage", (double)s);
  px_json_add_num(o, "need_bytes", (double)need);
  px_json_add_num(o, "usable_bytes", (double)usable);
  px_json_add_num(o, "over_bytes", need > usable ? (double)(need - usable) : 0.0);
  cJSON_AddBoolToObject(o, "host_fits", px_plan_host_fits(plan));
  cJSON *list = cJSON_AddArrayToObject(o, "nearest");
  for (int i = 0; list && i < nfits; i++) {
    cJSON *f = cJSON_CreateObject();
    if (!f) break;
    char buf[PX_REPORT_FLAGS_MAX];
    px_report_plan_change(&plan->par, &fits[i].par, &plan->model, &plan->cluster, buf, sizeof buf);
    cJSON_AddStringToObject(f, "change", buf);
    px_report_plan_flags(&fits[i].par, &plan->model, &plan->cluster, buf, sizeof buf);
    cJSON_AddStringToObject(f, "flags", buf);
    cJSON *ch = cJSON_AddArrayToObject(f, "changed");
    for (int k = 0; ch && k < PX_REPLAN_GROUPS; k++)
      if (fits[i].changed >> k & 1) cJSON_AddItemToArray(ch, cJSON_CreateString(replan_group_names[k]));
    px_json_add_num(f, "step_time_s", fits[i].sim.step_time_s);
    px_json_add_num(f, "tokens_per_s", fits[i].sim.tokens_per_s);
    px_json_add_num(f, "mfu", fits[i].sim.mfu);
    px_json_add_num(f, "peak_bytes", (double)fits[i].peak_bytes);
    cJSON_AddItemToArray(list, f);
  }
  return o;
}

/* "<category>_bytes" for every category, in px_mem_cat order. */
static void mem_cats(cJSON *o, const uint64_t *at_peak) {
  for (int k = 0; k < PX_MEM_COUNT; k++) {
    char key[32];
    snprintf(key, sizeof key, "%s_bytes", px_mem_cat_names[k]);
    px_json_add_num(o, key, (double)at_peak[k]);
  }
}

void px_report_memory_peak(cJSON *mem, uint64_t peak_bytes, const uint64_t *at_peak) {
  px_json_add_num(mem, "peak_bytes_max", (double)peak_bytes);
  mem_cats(mem, at_peak);
}

cJSON *px_report_memory_json(const px_plan *plan) {
  cJSON *mem = cJSON_CreateObject();
  if (!mem) return NULL;
  cJSON *stages = cJSON_AddArrayToObject(mem, "stages");
  for (int64_t s = 0; stages && s < plan->par.pp; s++) {
    const px_memplan *mp = &plan->mem[s];
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    px_json_add_num(o, "peak_bytes", (double)mp->peak_bytes);
    mem_cats(o, mp->at_peak);
    px_json_add_num(o, "activations_peak_bytes", (double)mp->activations_peak_bytes);
    px_json_add_num(o, "microbatches_in_flight", mp->peak_mbs_in_flight);
    px_json_add_num(o, "host_bytes", (double)mp->host_bytes);
    px_json_add_num(o, "nvme_bytes", (double)mp->nvme_bytes);
    px_states st;
    px_plan_states(plan, s, &st);
    px_json_add_num(o, "fp8_copy_bytes", (double)st.fp8_copy_bytes); /* of params_bytes: the cached fp8 weight copies */
    cJSON_AddBoolToObject(o, "fits", px_plan_stage_fits(plan, s));
    cJSON_AddItemToArray(stages, o);
  }
  const px_memplan *worst = &plan->mem[px_plan_peak_stage(plan)];
  px_report_memory_peak(mem, worst->peak_bytes, worst->at_peak);
  px_json_add_num(mem, "capacity_bytes", (double)plan->cluster.gpu.hbm_bytes);
  px_json_add_num(mem, "reserved_bytes", (double)plan->cluster.gpu.reserved_bytes);
  px_json_add_num(mem, "host_node_bytes", (double)plan->host_node_bytes);
  px_json_add_num(mem, "host_capacity_bytes", (double)plan->cluster.host_memory_bytes);
  px_json_add_num(mem, "nvme_node_bytes", (double)plan->nvme_node_bytes);
  px_json_add_num(mem, "nvme_capacity_bytes", (double)plan->cluster.host_nvme_bytes);
  cJSON_AddBoolToObject(mem, "host_fits", px_plan_host_fits(plan));
  return mem;
}

static cJSON *place_json(const px_placement *pl) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  px_json_add_num(o, "size", (double)pl->size);
  px_json_add_num(o, "stride", (double)pl->stride);
  px_json_add_num(o, "nodes", (double)pl->nodes);
  px_json_add_num(o, "per_node", (double)pl->per_node);
  cJSON_AddBoolToObject(o, "intra_node", pl->intra);
  return o;
}

cJSON *px_report_plan_head(const px_plan *plan) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "model", plan->model.name);
  cJSON_AddStringToObject(o, "cluster", plan->cluster.name);
  px_json_add_num(o, "gpus", (double)plan->cluster.gpus);
  px_report_inputs_json(o, &plan->model, &plan->cluster, plan->par.seq, plan->par.mtp_layers);
  cJSON_AddItemToObject(o, "parallel", px_parallel_to_json(&plan->par));
  return o;
}

cJSON *px_report_plan_json(const px_plan *plan, const px_sim_result *sim, const px_replan_fit *fits, int nfits) {
  cJSON *o = px_report_plan_head(plan);
  if (!o) return NULL;
  cJSON_AddItemToObject(o, "verdict", px_report_verdict_json(plan, fits, nfits));
  cJSON *backends = cJSON_AddObjectToObject(o, "backends"); /* whether parallax run's backends run it (plan/runnable.h) */
  for (int b = 0; backends && b < PX_RUN_BACKEND_COUNT; b++) {
    char why[512];
    cJSON *v = cJSON_AddObjectToObject(backends, px_run_backend_names[b]);
    bool runs = px_runnable((px_run_backend)b, &plan->par, &plan->model, why, sizeof why);
    if (v) cJSON_AddBoolToObject(v, "runs", runs);
    if (v && !runs) cJSON_AddStringToObject(v, "why", why);
  }
  cJSON *step = sim ? cJSON_AddObjectToObject(o, "step") : NULL;
  if (step) px_report_sim_summary(step, sim);
  px_json_add_num(o, "params", (double)plan->params_total);
  px_json_add_num(o, "vocab_padded", (double)plan->vocab_padded);
  px_json_add_num(o, "microbatches", (double)plan->microbatches);
  px_json_add_num(o, "flops_per_step", plan->model_flops_per_step);
  px_json_add_num(o, "hw_flops_per_step", plan->hw_flops_per_step);
  px_json_add_num(o, "bubble_analytic", px_plan_bubble_analytic(plan));
  cJSON_AddBoolToObject(o, "fits", plan->fits);
  cJSON *grid = cJSON_AddObjectToObject(o, "grid");
  if (grid) {
    cJSON_AddItemToObject(grid, "tp", place_json(&plan->grid.tp_place));
    if (plan->par.cp > 1) cJSON_AddItemToObject(grid, "cp", place_json(&plan->grid.cp_place));
    if (plan->par.ep > 1) cJSON_AddItemToObject(grid, "ep", place_json(&plan->grid.ep_place));
    if (plan->par.ep > 1) cJSON_AddItemToObject(grid, "edp", place_json(&plan->grid.edp_place));
    cJSON_AddItemToObject(grid, "dp", place_json(&plan->grid.dp_place));
    if (px_parallel_hybrid(&plan->par)) {
      cJSON_AddItemToObject(grid, "shard", place_json(&plan->grid.shard_place));
      cJSON_AddItemToObject(grid, "replica", place_json(&plan->grid.replica_place));
    }
    cJSON_AddItemToObject(grid, "pp", place_json(&plan->grid.pp_place));
  }
  cJSON *stages = cJSON_AddArrayToObject(o, "stages");
  for (int64_t s = 0; stages && s < plan->par.pp; s++) {
    const px_program *prog = &plan->programs[s];
    const px_stage_totals *t = &plan->totals[s];
    cJSON *st = cJSON_CreateObject();
    if (!st) break;
    cJSON *chunks = cJSON_AddArrayToObject(st, "layers");
    for (int64_t ch = 0; chunks && ch < plan->par.vpp; ch++) {
      int64_t vs = ch * plan->par.pp + s;
      cJSON *r = cJSON_CreateArray();
      if (!r) break;
      cJSON_AddItemToArray(r, cJSON_CreateNumber((double)plan->vstage_first[vs]));
      cJSON_AddItemToArray(r, cJSON_CreateNumber((double)(plan->vstage_first[vs] + plan->vstage_layers[vs])));
      cJSON_AddItemToArray(chunks, r);
    }
    cJSON_AddBoolToObject(st, "embedding", prog->has_embed);
    cJSON_AddBoolToObject(st, "head", prog->has_head);
    px_json_add_num(st, "params_per_gpu", (double)prog->param_elems); /* trained ones */
    if (px_parallel_lora(&plan->par)) { /* fine-tuning's frozen base, in its base precision */
      px_json_add_num(st, "frozen_params_per_gpu", (double)prog->frozen_elems);
      px_json_add_num(st, "frozen_bytes_per_gpu", (double)prog->frozen_bytes);
    }
    px_json_add_num(st, "model_flops", t->model_flops);
    px_json_add_num(st, "hw_flops", t->hw_flops);
    cJSON *wb = cJSON_AddObjectToObject(st, "wire_bytes");
    if (wb) {
      px_json_add_num(wb, "tp", t->wire_bytes[PX_GROUP_TP]);
      if (plan->par.cp > 1) px_json_add_num(wb, "cp", t->wire_bytes[PX_GROUP_CP]);
      if (plan->model.experts > 0) px_json_add_num(wb, "ep", t->wire_bytes[PX_GROUP_EP]);
      if (plan->model.experts > 0 && plan->grid.etp > 1) px_json_add_num(wb, "etp", t->wire_bytes[PX_GROUP_ETP]);
      px_json_add_num(wb, "dp", px_totals_dp_wire_bytes(t));
      if (px_parallel_hybrid(&plan->par)) { /* the two levels of the dp figure */
        px_json_add_num(wb, "shard", t->wire_bytes[PX_GROUP_SHARD]);
        px_json_add_num(wb, "replica", t->wire_bytes[PX_GROUP_REPLICA]);
      }
      px_json_add_num(wb, "pp", t->wire_bytes[PX_GROUP_NEXT] + t->wire_bytes[PX_GROUP_PREV]);
      px_json_add_num(wb, "emb", t->wire_bytes[PX_GROUP_EMB]);
    }
    px_json_add_num(st, "instances", prog->ninsts);
    cJSON_AddItemToArray(stages, st);
  }
  cJSON_AddItemToObject(o, "memory", px_report_memory_json(plan));
  return o;
}

px_status px_report_plan_file(const char *path, const px_model *m, const px_cluster *c, const px_parallel *p,
                              px_err *err) {
  cJSON *root = px_planfile_to_json(m, c, p);
  if (!root) return px_err_set(err, PX_ERR_RUNTIME, "out of memory");
  px_status st = px_json_write(path, root, err);
  cJSON_Delete(root);
  return st;
}
