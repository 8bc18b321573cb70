#!/usr/bin/env bash
# Sliding-window attention on the CPU executor: a tiny model whose even layers
# attend to the 8 tokens up to their own (gpt-oss's pattern) runs any layer
# count per pipeline chunk, a chunk starting on a windowed or a full layer
# (pp 2: 3 layers a stage; --first-stage-layers 1; vpp 3: a layer a chunk; ZB-H1's split backward),
# with TP, SP, the unfused attention and ZeRO-3, to the losses and first-step
# gradients of its one-rank run within 1e-5 over 8 steps, and every stage's
# measured peak is its plan's; a model with the window on every layer after
# the first (Qwen2's max_window_layers) too. The window changes the losses
# (against the same model without it); the CUDA backend refuses it by name.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
runs=0

jq '.name = "tiny-window" | .layers = 6 | .sliding_window = 8 | .window_layer_freq = 2' "$src/models/tiny.json" \
  >"$tmp/tiny-window.json"
jq '.name = "tiny-window-late" | .sliding_window = 6 | .window_layer_freq = 1 | .first_full_layers = 1' \
  "$src/models/tiny.json" >"$tmp/tiny-window-late.json"
jq '.name = "tiny-full" | .layers = 6' "$src/models/tiny.json" >"$tmp/tiny-full.json"

run() { # out model gbs ranks flags...
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$tmp/$model.json" --steps 8 -B "$gbs" "$@"
}

# model gbs ranks | flags: each against the model's one-rank run at that gbs
cases=(
  "tiny-window 4 2|-p 2"
  "tiny-window 4 2|-p 2 --first-stage-layers 1"
  "tiny-window 4 2|-p 2 -e zb-h1"
  "tiny-window 8 2|-p 2 -v 3 -e interleaved"
  "tiny-window 4 2|-t 2"
  "tiny-window 4 4|-t 2 -S -p 2 --attention unfused"
  "tiny-window 4 2|-d 2 -z 3"
  "tiny-window-late 4 2|-p 2"
)
for c in "${cases[@]}"; do
  read -r model gbs n <<<"${c%%|*}"
  # shellcheck disable=SC2206
  f=(${c#*|})
  if [ ! -f "$tmp/ref_${model}_$gbs.json" ]; then
    run "ref_${model}_$gbs" "$model" "$gbs" 1 || { fail "$model one rank: $(head -3 "$tmp/err.txt")"; continue; }
  fi
  cp "$tmp/ref_${model}_$gbs.json" "$tmp/ref.json" && cp "$tmp/ref_${model}_$gbs.bin" "$tmp/ref.bin"
  run got "$model" "$gbs" "$n" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  runs=$((runs + 1))
  same_run "$model -B $gbs ${f[*]}" "$tmp/ref" "$tmp/got"
done
echo "$runs plans"
[ "$runs" -eq ${#cases[@]} ] || fail "only $runs of ${#cases[@]} plans ran"

# the window is there: without it the same model trains to other losses
if run full tiny-full 4 1; then
  close "$(losses "$tmp/full.json")" "$(losses "$tmp/ref_tiny-window_4.json")" 1e-3 &&
    fail "the windowed model's losses are the full-attention model's: $(losses "$tmp/full.json")"
else
  fail "tiny-full: $(head -3 "$tmp/err.txt")"
fi

cuda_refuses "sliding-window attention" 1 -m "$tmp/tiny-window.json" --steps 1 -B 4
finish
