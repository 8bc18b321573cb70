#!/usr/bin/env bash
# --precision mxfp8 and nvfp4 planned and simulated (docs/compiler.md, "Block-scaled precisions"): on a
# GB200 the same plan's step is faster in nvfp4 than in mxfp8 and in mxfp8 than in bf16, the MFU of the
# plan's precision is against the fp4 (nvfp4) or fp8 (mxfp8) peak, the precision survives a saved plan;
# GPUs without block-scaled tensor cores (H100, A100) refuse both naming the GPU, exit 2, and so does an
# fp8 recipe with them; the export refuses them rather than write a bf16 run.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

plan=(-m llama3-8b -c gb200-nvl72 -g 8 -z 1 -B 64)
for p in bf16 mxfp8 nvfp4; do
  "$px" sim "${plan[@]}" --precision "$p" --json --save-plan "$tmp/$p.plan.json" >"$tmp/$p.json" || fail "sim --precision $p"
done
t() { jq .step_time_s "$tmp/$1.json"; }
awk -v b="$(t bf16)" -v m="$(t mxfp8)" -v n="$(t nvfp4)" 'BEGIN { exit !(n < m && m < b) }' ||
  fail "step times: nvfp4 $(t nvfp4), mxfp8 $(t mxfp8), bf16 $(t bf16)"
jq -e '.mfu_precision_peak == "fp4" and .parallel.precision == "nvfp4"' "$tmp/nvfp4.json" >/dev/null ||
  fail "nvfp4: $(jq -c '{mfu_precision_peak, p: .parallel.precision}' "$tmp/nvfp4.json")"
jq -e '.mfu_precision_peak == "fp8"' "$tmp/mxfp8.json" >/dev/null || fail "mxfp8: not against the fp8 peak"
[ "$("$px" sim --plan "$tmp/nvfp4.plan.json" --json | jq .step_time_s)" = "$(t nvfp4)" ] || fail "saved nvfp4 plan"
"$px" sim "${plan[@]}" --precision nvfp4 | grep -q "of fp4 peak" || fail "the summary's MFU of the fp4 peak"
"$px" plan "${plan[@]}" --precision mxfp8 | grep -q "seq 8192, mxfp8 (the rest bf16)" || fail "plan: the precision line"

for c in dgx-h100 dgx-a100; do
  for p in mxfp8 nvfp4; do
    err=$("$px" sim -m llama3-8b -c "$c" -g 8 --precision "$p" 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 2 ] && echo "$err" | grep -q "SXM.*no block-scaled tensor cores for $p" ||
      fail "$c $p: $rc $err"
  done
done
err=$("$px" sim "${plan[@]}" --precision nvfp4 --fp8-recipe current 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "fp8-recipe chooses fp8's scaling; nvfp4 scales its own blocks" ||
  fail "nvfp4 with an fp8 recipe: $err"
# exported as Transformer Engine's NVFP4 recipe (tests/cli/export.sh has the rest)
"$px" export --to megatron "${plan[@]}" --precision nvfp4 2>/dev/null | grep -qx "  --fp4-format e2m1" ||
  fail "export nvfp4: $("$px" export --to megatron "${plan[@]}" --precision nvfp4 2>&1 | grep -e fp4 -e cannot)"
finish
