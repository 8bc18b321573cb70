#!/usr/bin/env bash
# --fp8-attention planned, simulated and exported (docs/compiler.md, "FP8 attention"): the plan says the attention's
# format (fp8, or mxfp8 under --precision mxfp8) and keeps it in a saved plan; on a GB200 the step is faster with it
# (cuDNN's measured FP8 and MXFP8 attention, docs/simulator.md) and a bf16-kept layer's attention is not quantized;
# export refuses it by name (Megatron-LM has no argument for it, Megatron-Bridge's precision recipes fix it False,
# torchtitan quantizes no attention); a sweep keeps it on every quantized plan; without a quantized precision, with fp8's blockwise recipe
# or with unfused attention it is refused naming the flag (exit 2).
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(-m llama3-8b -c gb200-nvl72 -g 8)

"$px" plan "${plan[@]}" -P mxfp8 --fp8-attention >"$tmp/plan.txt" || fail "plan mxfp8"
grep -q "flash attention in mxfp8" "$tmp/plan.txt" && echo "ok: plan line (mxfp8)" || fail "plan line: $(grep tp "$tmp/plan.txt")"
"$px" plan "${plan[@]}" -P nvfp4 --fp8-attention >"$tmp/plan.txt" || fail "plan nvfp4"
grep -q "flash attention in fp8" "$tmp/plan.txt" && echo "ok: plan line (nvfp4: fp8)" || fail "plan line nvfp4"
"$px" plan "${plan[@]}" -P mxfp8 --fp8-attention -o "$tmp/p.json" >/dev/null &&
  jq -e '.parallel.fp8_attention == true' "$tmp/p.json" >/dev/null &&
  "$px" plan -f "$tmp/p.json" | grep -q "flash attention in mxfp8" && echo "ok: saved plan keeps it" ||
  fail "saved plan: $(jq -c .parallel "$tmp/p.json" 2>&1 | head -c 300)"

step() { "$px" sim "${plan[@]}" -P fp8 --fp8-recipe current "$@" --json | jq -r .step_time_s; }
plain=$(step) attn=$(step --fp8-attention) kept=$(step --fp8-attention --bf16-layers-end 32) none=$(step --bf16-layers-end 32)
awk -v p="$plain" -v a="$attn" 'BEGIN { exit !(a < p) }' && echo "ok: sim: $attn s with it, $plain s without" ||
  fail "sim: $attn s with fp8 attention, $plain s without"
[ "$kept" = "$none" ] && echo "ok: sim: the layers kept in bf16 keep their attention" || fail "sim: kept $kept, $none"

# a sweep keeps it on every plan: the quantized ones (bf16's invalid), its best one's export carries the flag
"$px" sweep "${plan[@]}" -B 64 --top 1 --fp8-attention -o "$tmp/best.json" >"$tmp/sweep.txt" &&
  grep -q "^  fp8 attention on every plan" "$tmp/sweep.txt" && jq -e '.parallel.fp8_attention == true and
  (.parallel.precision | IN("fp8", "mxfp8", "nvfp4"))' "$tmp/best.json" >/dev/null && echo "ok: sweep" ||
  fail "sweep: $(head -4 "$tmp/sweep.txt") $(jq -c .parallel "$tmp/best.json" 2>&1 | head -c 300)"

refused() { # WHAT PATTERN ARGS...: exit 2 naming PATTERN
  local what=$1 pattern=$2 err
  shift 2
  err=$("$px" "$@" 2>&1 >/dev/null)
  [ $? -eq 2 ] && echo "$err" | grep -q "$pattern" && echo "ok: $what refused" || fail "$what: $err"
}
refused "bf16" "fp8-attention runs the fused attention in fp8.*needs --precision fp8, mxfp8 or nvfp4, not bf16" \
  plan "${plan[@]}" -P bf16 --fp8-attention
refused "unfused" "fp8-attention is cuDNN's fused FP8 attention: it needs --attention flash" \
  plan "${plan[@]}" -P fp8 --fp8-attention --attention unfused
refused "blockwise" "fp8-attention with --fp8-recipe blockwise: Transformer Engine runs no fused FP8 attention" \
  plan "${plan[@]}" -P fp8 --fp8-recipe blockwise --fp8-attention
refused "export megatron" "Megatron-LM cannot run fp8_attention" export --to megatron "${plan[@]}" -P fp8 \
  --fp8-recipe current --fp8-attention
refused "export nemo" "Megatron-Bridge cannot run fp8_attention: no mixed_precision recipe" export --to nemo \
  "${plan[@]}" -z 1 -P mxfp8 --fp8-params --main-grad fp32 --fp8-attention
refused "export torchtitan" "quantizes the linear layers, not the attention" export --to torchtitan "${plan[@]}" \
  -P fp8 --fp8-recipe current --fp8-library torchao --fp8-attention
finish
