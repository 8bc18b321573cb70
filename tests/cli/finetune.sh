#!/usr/bin/env bash
# Fine-tuning plans: --finetune lora/qlora/full with --lora-rank, --lora-alpha, --lora-targets, --base-precision,
# an HF PEFT adapter_config.json by --adapter, the plan file round trip, sweeps with the fine-tuning fixed, and
# refusals (bad ranks, targets, adapter keys; the executors and exporters).
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

refused() { # want cmd...: exit 2 and stderr naming want
  local want=$1 err rc
  shift
  err=$("$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "$* exited $rc (want 2): $err"
  grep -q -- "$want" <<<"$err" || fail "$*: the error does not name $want: $err"
}

# tiny, rank 4 on qkv, o, fc1, fc2: 13,312 adapter parameters (tests/test_plan.c derives them), 16 bytes each with
# Adam; the 180,800 frozen weights 2 bytes each; data parallelism reduces the adapters' 2-byte gradients only
j=$("$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --lora-rank 4 --json) || fail "plan --finetune lora"
jq -e '.parallel.finetune == "lora" and .parallel.lora_rank == 4 and .parallel.lora_targets == "qkv,o,fc1,fc2" and
  .parallel.base_precision == "bf16" and .stages[0].params_per_gpu == 13312 and
  .stages[0].frozen_params_per_gpu == .params and .stages[0].wire_bytes.dp == 2 * 13312' <<<"$j" >/dev/null ||
  fail "plan --finetune lora: $(jq -c '.parallel, .stages[0]' <<<"$j")"
"$px" plan -m tiny -c dgx-h100 -g 2 --finetune qlora --graph "$tmp/g.json" >/dev/null || fail "plan --finetune qlora --graph"
[ "$(jq '[.blocks[] | select(.kind == "layer_fwd") | .ops[] | select(.dequant)] | length' "$tmp/g.json")" = 4 ] ||
  fail "qlora: not a dequantising cast before each of a layer's 4 linear GEMMs in --graph"
# alpha / r on each adapter's B GEMMs: y += s h B^T forward; dh = s dy B and dB += s dy^T h backward
[ "$(jq -c '[.blocks[] | select(.kind == "layer_fwd" or .kind == "layer_bwd") | [.ops[] | select(.lora_scale)] | length]' \
  "$tmp/g.json")" = "[4,8]" ] || fail "qlora: not 4 forward and 8 backward GEMMs scaled by alpha / r in --graph"
"$px" plan -m tiny -c dgx-h100 -g 2 --finetune qlora | grep -q "fine-tuning: qlora rank 16 (alpha 32) on qkv,o,fc1,fc2" ||
  fail "plan --finetune qlora: no fine-tuning line"
s=$("$px" sim -m tiny -c dgx-h100 -g 2 --finetune lora --lora-targets q,v --save-plan "$tmp/l.json" --json) ||
  fail "sim --finetune lora"
jq -e '.parallel.lora_targets == "q,v"' "$tmp/l.json" >/dev/null || fail "the saved plan lost its adapters"
[ "$("$px" sim --plan "$tmp/l.json" --json | jq .step_time_s)" = "$(jq .step_time_s <<<"$s")" ] ||
  fail "sim --plan of a LoRA plan differs"
[ "$("$px" sim -m tiny -c dgx-h100 -g 2 --finetune full --json | jq .step_time_s)" = \
  "$("$px" sim -m tiny -c dgx-h100 -g 2 --json | jq .step_time_s)" ] || fail "--finetune full differs from pre-training"

# an HF PEFT adapter config: r, lora_alpha, target_modules; flags override it
printf '{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "down_proj"],
  "lora_dropout": 0.0, "bias": "none", "modules_to_save": null}' >"$tmp/adapter_config.json"
j=$("$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/adapter_config.json" --json) || fail "plan --adapter"
jq -e '.parallel.finetune == "lora" and .parallel.lora_rank == 8 and .parallel.lora_alpha == 16 and
  .parallel.lora_targets == "q,v,fc2"' <<<"$j" >/dev/null || fail "--adapter: $(jq -c .parallel <<<"$j")"
[ "$("$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/adapter_config.json" --lora-rank 2 --json |
  jq .parallel.lora_rank)" = 2 ] || fail "--lora-rank does not override the adapter config"
refused "adapter_config.json: LoRA adapters, but --finetune is full" \
  "$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/adapter_config.json" --finetune full
printf '{"peft_type": "LORA", "r": 8, "target_modules": ["q_proj"], "lora_dropout": 0.05}' >"$tmp/drop.json"
refused "drop.json: key 'lora_dropout'" "$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/drop.json"
printf '{"peft_type": "LORA", "r": 8, "target_modules": ["q_proj", "lm_head"]}' >"$tmp/head.json"
refused "head.json: key 'target_modules': 'lm_head'" "$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/head.json"
printf '{"peft_type": "LORA", "r": 8, "target_modules": ".*proj"}' >"$tmp/re.json"
refused "re.json: key 'target_modules'" "$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/re.json"
printf '{"peft_type": "LORA", "target_modules": ["q_proj"]}' >"$tmp/nor.json"
refused "nor.json: field 'r'" "$px" plan -m tiny -c dgx-h100 -g 2 --adapter "$tmp/nor.json"

# bad flags: exit 2, the flag named
refused "--lora-rank" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --lora-rank 0
refused "--lora-rank" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --lora-rank x
refused "--lora-rank 65 is more than the model's hidden size 64" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --lora-rank 65
refused "--lora-targets" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --lora-targets qkv,mlp
refused "--finetune lora or qlora" "$px" plan -m tiny -c dgx-h100 -g 2 --lora-rank 8
refused "--base-precision must be nf4" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune qlora --base-precision bf16
refused "--finetune" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune prefix
refused "not --precision nvfp4 (hint" "$px" plan -m tiny -c dgx-b200 -g 2 --finetune lora --precision nvfp4
refused "not --precision fp8" "$px" plan -m tiny -c dgx-h100 -g 2 --finetune lora --precision fp8

# the sweep keeps the fine-tuning as given and searches the split
out=$("$px" sweep -m tiny -c dgx-h100 -g 4 -B 8 --finetune lora --lora-rank 8 --top 3 --json) || fail "sweep --finetune lora"
jq -e '(.plans | length) > 0 and all(.plans[]; .flags | test("--finetune lora --lora-rank 8 "))' <<<"$out" >/dev/null ||
  fail "sweep --finetune lora: plans without it: $(jq -c '[.plans[].flags]' <<<"$out" | head -c 600)"
"$px" sweep -m tiny -c dgx-h100 -g 4 -B 8 --finetune qlora --top 2 | head -1 | grep -q "qlora rank 16 on qkv,o,fc1,fc2 (nf4 base)" ||
  fail "sweep --finetune qlora: the header does not say it"

# what cannot run a LoRA plan refuses it
if [ "${PX_EXEC:-1}" != 0 ]; then # the planner-only build refuses run itself
  refused "cannot run this plan: the cpu backend runs fp32 only, not bf16" \
    "$px" run -m tiny -c dgx-h100 -g 1 -B 1 --steps 1 --finetune qlora --precision bf16
  "$px" run -m tiny -B 1 --steps 1 --ckpt "$tmp/ck" >/dev/null 2>&1 || fail "run --ckpt (a checkpoint to re-split)"
  refused "--finetune lora: a checkpoint is not re-split into a plan with adapters" \
    "$px" reshard --from "$tmp/ck" --to "$tmp/to" -c dgx-h100 -g 1 --finetune lora --precision bf16
fi
refused "finetune lora" "$px" export -m tiny -c dgx-h100 -g 2 --finetune lora --to megatron
finish
