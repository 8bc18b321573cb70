#!/usr/bin/env bash
# The attention variants the planner prices, on the CPU executor: Qwen3's
# per-head q/k norms (tiny-qknorm). Each model's multi-rank plans (TP with
# its heads split, SP, PP, ZeRO-3, CP with each algorithm, the unfused
# attention with selective recomputation) reach the losses and first-step
# gradients of its one-rank run within 1e-5 over 8 steps, and every stage's
# measured peak is its plan's. The variant changes the losses (against tiny
# without it); the CUDA backend refuses it by name.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
runs=0

run() { # out model gbs ranks flags...
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  timeout 120 mpirun -np "$n" "$px" run --backend cpu -m "$src/models/$model.json" --steps 8 -B "$gbs" \
    --dump-grads "$tmp/$out.bin" --json "$@" >"$tmp/$out.json" 2>"$tmp/err.txt"
}

# model ranks | flags: each against the model's one-rank run (gbs 4)
cases=(
  "tiny-qknorm 2|-t 2"
  "tiny-qknorm 4|-t 2 -S -p 2"
  "tiny-qknorm 2|-d 2 -z 3"
  "tiny-qknorm 2|--cp 2"
  "tiny-qknorm 2|--cp 2 --cp-algo all-gather"
  "tiny-qknorm 2|--cp 2 --cp-algo a2a"
  "tiny-qknorm 2|-t 2 -S --attention unfused -r selective"
)
for c in "${cases[@]}"; do
  read -r model n <<<"${c%%|*}"
  # shellcheck disable=SC2206
  f=(${c#*|})
  if [ ! -f "$tmp/ref_$model.json" ]; then
    run "ref_$model" "$model" 4 1 || { fail "$model one rank: $(head -3 "$tmp/err.txt")"; continue; }
  fi
  run got "$model" 4 "$n" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  runs=$((runs + 1))
  same_run "$model ${f[*]}" "$tmp/ref_$model" "$tmp/got"
done
echo "$runs plans"
[ "$runs" -eq ${#cases[@]} ] || fail "only $runs of ${#cases[@]} plans ran"

# each variant is there: without it the same model trains to other losses
if run base tiny 4 1; then
  for model in tiny-qknorm; do
    close "$(losses "$tmp/base.json")" "$(losses "$tmp/ref_$model.json")" 1e-3 &&
      fail "$model's losses are tiny's: $(losses "$tmp/base.json")"
  done
else
  fail "tiny: $(head -3 "$tmp/err.txt")"
fi

cuda_refuses "per-head q/k norms (tiny-qknorm)" 1 -m "$src/models/tiny-qknorm.json" --steps 1 -B 4
finish
