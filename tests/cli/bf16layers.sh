#!/usr/bin/env bash
# --bf16-layers-start/--bf16-layers-end (docs/compiler.md, "Layers kept in bf16"): on a GB200 an nvfp4 plan
# with the first 2 and last 8 of llama3-8b's 32 layers unquantized has a step strictly between all-nvfp4's and
# bf16's and the cached codes and scales of 22 layers' weights (22/32 of all-nvfp4's), with all 32 kept the
# bf16 plan's step and peak; the plan line and its flags say so and a saved plan keeps them; Megatron's export
# writes --first-last-layers-bf16 with both counts, Megatron-Bridge's its keys, torchtitan's refuses;
# bad values exit 2 naming the flag.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

plan=(-m llama3-8b -c gb200-nvl72 -g 8 -z 1 -B 64)
sim() { # NAME FLAGS...
  local name=$1
  shift
  "$px" sim "${plan[@]}" "$@" --json --save-plan "$tmp/$name.plan.json" >"$tmp/$name.json" || fail "sim $name: $*"
}
sim bf16 --precision bf16
sim nvfp4 --precision nvfp4
sim some --precision nvfp4 --bf16-layers-start 2 --bf16-layers-end 8
sim all --precision nvfp4 --bf16-layers-end 32
t() { jq .step_time_s "$tmp/$1.json"; }
copies() { jq '.memory.stages[0].fp8_copy_bytes' "$tmp/$1.json"; }
awk -v b="$(t bf16)" -v s="$(t some)" -v n="$(t nvfp4)" 'BEGIN { exit !(n < s && s < b) }' ||
  fail "step times: nvfp4 $(t nvfp4) < 2+8 bf16 layers $(t some) < bf16 $(t bf16)"
[ "$(copies some)" = "$(jq -n "$(copies nvfp4) * 22 / 32")" ] || fail "codes and scales: $(copies some) of $(copies nvfp4)"
[ "$(t all)" = "$(t bf16)" ] && [ "$(jq .memory.peak_bytes_max "$tmp/all.json")" = "$(jq .memory.peak_bytes_max "$tmp/bf16.json")" ] ||
  fail "every layer kept: $(t all) s, bf16 $(t bf16) s"
jq -e '.parallel.bf16_layers_start == 2 and .parallel.bf16_layers_end == 8' "$tmp/some.json" >/dev/null ||
  fail "JSON: $(jq -c .parallel "$tmp/some.json")"
[ "$("$px" sim --plan "$tmp/some.plan.json" --json | jq .step_time_s)" = "$(t some)" ] || fail "saved plan"
"$px" plan "${plan[@]}" --precision nvfp4 --bf16-layers-start 2 --bf16-layers-end 8 >"$tmp/plan.txt" || fail "plan"
grep -q "nvfp4 (the rest bf16), the first 2 and last 8 layers unquantized" "$tmp/plan.txt" || fail "plan: the precision line"

ex=(-m llama3-8b -c dgx-h100 -g 8 -z 2 -B 64 --precision fp8 --fp8-recipe current --bf16-layers-start 1 --bf16-layers-end 2)
"$px" export --to megatron "${ex[@]}" 2>/dev/null | tr -s ' \n' ' ' |
  grep -q -- "--first-last-layers-bf16 --num-layers-at-start-in-bf16 1 --num-layers-at-end-in-bf16 2" ||
  fail "export megatron: $("$px" export --to megatron "${ex[@]}" 2>&1 | grep -i bf16)"
# Megatron-Bridge: its current-scaling recipe keeps the first and last layer (and fp8 weights, fp32 gradients)
out=$("$px" export --to nemo "${ex[@]}" --bf16-layers-end 1 --fp8-params --main-grad fp32 2>/dev/null)
echo "$out" | grep -q "model.first_last_layers_bf16=true" && echo "$out" | grep -q "model.num_layers_at_start_in_bf16=1" &&
  echo "$out" | grep -q "model.num_layers_at_end_in_bf16=1" || fail "export nemo: $(echo "$out" | grep bf16)"
err=$("$px" export --to nemo "${ex[@]}" --fp8-params --main-grad fp32 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "Megatron-Bridge cannot run bf16_layers_start/end" || fail "export nemo 1+2: $err"
# torchtitan: its float8 converter skips the output layer and those layers by their FQNs
"$px" export --to torchtitan "${ex[@]}" -z 3 --main-grad fp32 --fp8-library torchao 2>/dev/null |
  grep -qFx 'filter_fqns = ["output", "layers.0.", "layers.30.", "layers.31."]' ||
  fail "export torchtitan: $("$px" export --to torchtitan "${ex[@]}" -z 3 --main-grad fp32 --fp8-library torchao \
    2>&1 | grep -i -e filter -e cannot)"

refused() { # WHAT MESSAGE FLAGS...
  local what=$1 msg=$2
  shift 2
  err=$("$px" plan "${plan[@]}" "$@" 2>&1 >/dev/null)
  [ $? -eq 2 ] && echo "$err" | grep -q -- "$msg" || fail "$what: $err"
}
refused "bf16 precision" "--bf16-layers-start and --bf16-layers-end keep .* need --precision fp8, mxfp8 or nvfp4, not bf16" \
  --precision bf16 --bf16-layers-end 2
refused "too many" "--bf16-layers-start 20 + --bf16-layers-end 13 is more than the model's 32 layers" \
  --precision nvfp4 --bf16-layers-start 20 --bf16-layers-end 13
refused "a stage's" "--bf16-layers-end 17 is more than a pipeline stage's 16 layers" -p 2 --precision mxfp8 --bf16-layers-end 17
refused "delayed scaling" "fp8's delayed scaling.*hint: --fp8-recipe current" -c dgx-h100 --precision fp8 --bf16-layers-end 1
refused "negative" "--bf16-layers-start" --precision nvfp4 --bf16-layers-start -1
refused "not a number" "--bf16-layers-end" --precision nvfp4 --bf16-layers-end two
finish
