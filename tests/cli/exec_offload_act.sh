#!/usr/bin/env bash
# --offload-activations N (docs/compiler.md, "Activation offload"): the CPU executor runs it to the losses and
# first-step gradients of the run without it (tiny, 4 layers: 1 and 2 offloaded; 2 ranks of DP; ZeRO-1 and 3;
# experts, latent attention, windows, sinks, fp8 and mxfp8), every
# stage's measured peak its plan's, lower than without; the plan says what it holds on the host; sim costs
# the copies on the host link (a slower link: a slower step, and exposed host copies); a saved plan keeps it;
# Megatron's export writes --cpu-offloading-num-layers, Megatron-Bridge's its keys, torchtitan refuses; what
# Megatron-Core refuses exits 2 naming the flags; a sweep chooses it where it wins.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"

run() { cpu_run "$1" 2 -c local-cpu -g 2 --steps 3 -B 4 "${@:2}"; }
for z in 1 3; do
  run "ref$z" -m tiny -z "$z" || { fail "tiny -z $z: $(head -3 "$tmp/err.txt")"; continue; }
  for n in 1 2; do
    run got -m tiny -z "$z" --offload-activations "$n" ||
      { fail "tiny -z $z --offload-activations $n: $(head -3 "$tmp/err.txt")"; continue; }
    same_run "tiny -z $z --offload-activations $n" "$tmp/ref$z" "$tmp/got"
    jq -se --slurpfile r "$tmp/ref$z.json" 'last.stages[0].peak_bytes < ($r | last).stages[0].peak_bytes' "$tmp/got.json" \
      >/dev/null || fail "-z $z --offload-activations $n: the peak did not drop"
  done
done
# and the layer kinds whose kept tensors differ: experts (EP 2), latent attention under TP + SP, windows, sinks
for c in "tiny-moe|-d 2 --ep 2" "tiny-mla|-t 2 -S" "tiny-window|-d 2" "tiny-sinks|-t 2 -S"; do
  model=${c%%|*}
  # shellcheck disable=SC2206
  f=(${c#*|})
  run ref -m "$model" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  run got -m "$model" "${f[@]}" --offload-activations 2 || { fail "$model offloaded: $(head -3 "$tmp/err.txt")"; continue; }
  same_run "$model ${f[*]} --offload-activations 2" "$tmp/ref" "$tmp/got"
done
# and quantized tensors, whose scales follow their codes to the host and back (fp8 per tensor, mxfp8's blocks):
# the same losses and gradients, and the measured peak the plan's (the quantized weights' copies included)
drop() { jq -s "last | .stages[0] | .$2" "$tmp/$1.json"; }
for prec in "fp8 --fp8-recipe current" mxfp8; do
  # shellcheck disable=SC2086
  f=(-m tiny -d 2 --fp8-base fp32 --precision $prec)
  run ref "${f[@]}" && run got "${f[@]}" --offload-activations 2 || { fail "$prec: $(head -3 "$tmp/err.txt")"; continue; }
  same_run "$prec --offload-activations 2" "$tmp/ref" "$tmp/got" || continue
  [ "$(drop got peak_bytes)" -lt "$(drop ref peak_bytes)" ] && [ "$(drop ref peak_bytes)" -eq "$(drop ref predicted_peak_bytes)" ] ||
    fail "$prec: measured peaks $(drop ref peak_bytes) (plan $(drop ref predicted_peak_bytes)), $(drop got peak_bytes) offloaded"
done

# Llama 3 70B on 64 H100s, mbs 2: with 70 of its 80 layers' activations on the host it fits (without: 330 GiB)
plan=(-m llama3-70b -c dgx-h100 -g 64 -z 3 -P fp8 --fp8-recipe current -b 2 -B 256)
"$px" plan "${plan[@]}" --offload-activations 70 >"$tmp/plan.txt" || fail "plan"
grep -q "activation offload: layers 0-69 keep their activations in host memory .* at most 10 layers' on the GPU" \
  "$tmp/plan.txt" || fail "plan: $(grep -i offload "$tmp/plan.txt")"
grep -q "offloaded per node: .* host memory: fits" "$tmp/plan.txt" || fail "plan: the host's share"
sim() { "$px" sim "${plan[@]}" --offload-activations 70 --json "$@"; }
sim --save-plan "$tmp/off.plan.json" >"$tmp/fast.json" || fail "sim"
sim --set host.pcie_gb_per_s=16 >"$tmp/slow.json" || fail "sim on a 16 GB/s link"
"$px" sim "${plan[@]}" --offload-activations 70 | grep -q "offload          activations of 70 layers: .* on the host link, .* of it exposed" ||
  fail "sim's offload line"
awk -v f="$(jq .step_time_s "$tmp/fast.json")" -v s="$(jq .step_time_s "$tmp/slow.json")" 'BEGIN { exit !(s > f) }' ||
  fail "a slower host link did not slow the step"
jq -e '.parallel.offload_activations == 70' "$tmp/fast.json" >/dev/null || fail "JSON: $(jq -c .parallel "$tmp/fast.json")"
[ "$("$px" sim --plan "$tmp/off.plan.json" --json | jq .step_time_s)" = "$(jq .step_time_s "$tmp/fast.json")" ] ||
  fail "saved plan"
"$px" export --to megatron "${plan[@]}" --offload-activations 70 2>/dev/null | tr -s ' \n' ' ' |
  grep -q -- "--cpu-offloading-num-layers 70" || fail "export megatron"
# (Megatron-Bridge's current-scaling recipe: fp8 weights, the first and last layers in bf16, fp32 gradients)
out=$("$px" export --to nemo "${plan[@]}" --offload-activations 70 --fp8-params --bf16-layers-start 1 --bf16-layers-end 1 \
  --main-grad fp32 2>/dev/null)
echo "$out" | grep -q "model.cpu_offloading=true" && echo "$out" | grep -q "model.cpu_offloading_num_layers=70" ||
  fail "export nemo: $out"
"$px" export --to torchtitan "${plan[@]}" --offload-activations 70 >/dev/null 2>"$tmp/tt.err" && fail "torchtitan took it"
grep -q "offload_activations" "$tmp/tt.err" || fail "torchtitan's refusal: $(cat "$tmp/tt.err")"

# the sweep chooses it: Llama 3 8B on 8 H100s, bf16, ZeRO-1, no TP or PP: 5 layers' activations over PCIe beat
# recomputing 16 layers (exec_recompute.sh's best without offload)
"$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 64 -P bf16 -z 1 -t 1 -p 1 --top 1 --json 2>/dev/null |
  jq -er '.plans[0].flags' | grep -q -- "--recompute none.* --offload-activations 5" ||
  fail "the sweep's best: $("$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 64 -P bf16 -z 1 -t 1 -p 1 --top 1 2>&1 | sed -n 6p)"


refused_plan 2 "--offload-activations 3 must leave two of the model's 4 layers'" --offload-activations 3
refused_plan 2 "--offload-activations with pp 2" -p 2 --offload-activations 1
refused_plan 2 "--offload-activations with --recompute full" -r full --offload-activations 1
refused_plan 2 "--offload-activations with --cuda-graph layers" --cuda-graph layers --offload-activations 1
refused_plan 2 "--offload-activations" --offload-activations two
[ "$fails" -eq 0 ] && echo "exec_offload_act: ok"
exit $((fails > 0))
