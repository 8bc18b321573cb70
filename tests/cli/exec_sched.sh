#!/usr/bin/env bash
# Interleaving with uneven chunks (the first and last holding only the embedding and the loss too) and
# micro-batch counts pp does not divide,
# and the zero-bubble schedules (backward split into B and W; with experts,
# their grouped GEMMs' weight gradients in W; with ZeRO-3, W gathering no
# parameter and each layer's reduce-scatter after its W), on the CPU executor
# (2 and 4 ranks, 7- and 9-layer tiny models, tiny-moe and tiny-moe-shared):
# every run's losses
# equal the 1F1B run of the same tp/pp/dp within 1e-5, its first-step
# gradients too, and every rank's measured peak is the plan's.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
runs=0

# and a 9-layer one, for pp 4 x vpp 2
jq '.layers = 9 | .name = "tiny9"' "$src/tests/data/tiny7.json" >"$tmp/tiny9.json"
# and GPT-shaped with dropout (the zero-bubble W re-gathers dropout's output gradient under SP)
jq '.dropout = 0.1 | .name = "tiny7-drop"' "$src/tests/data/tiny7-gpt.json" >"$tmp/tiny7-drop.json"

run() { # out model gbs ranks flags...
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$(model_file "$model")" --steps 3 -B "$gbs" "$@"
}

# model gbs grid | interleaved flags (the 1F1B reference takes the grid alone)
cases=(
  "tiny7 3 -p 2|-e interleaved -v 2"
  "tiny7-gpt 5 -p 2|-e interleaved -v 3"
  "tiny7 5 -p 2|-e interleaved -v 2 --first-stage-layers 3 --last-stage-layers 4"
  "tiny7-gpt 7 -p 2|-e interleaved -v 3 --layers-per-chunk 1,1,2,1,1,1 --microbatch-group 7"
  "tiny7 3 -p 2|-e interleaved -v 2 --layers-per-chunk 0,4,3,0"
  "tiny7-gpt 5 -p 2|-e interleaved -v 2 --no-overlap pp"
  "tiny7 6 -p 2 -d 2 -z 1|-e interleaved -v 2"
  "tiny7-gpt 10 -p 2 -d 2 -z 3|-e interleaved -v 3 --microbatch-group 5"
  "tiny7-gpt 5 -t 2 -p 2 -S|-e interleaved -v 2 -r full"
  "tiny7 9 -p 4|--first-stage-layers 1 --last-stage-layers 2"
  "tiny9 5 -p 4|-e interleaved -v 2"
  "tiny9 7 -p 4|-e interleaved -v 2 --microbatch-group 7 --no-overlap pp"
  "tiny7 5 -p 2|-e zb-h1"
  "tiny7-gpt 6 -p 2|-e zb-h2"
  "tiny7 9 -p 4|-e zb-h2 --first-stage-layers 1 --last-stage-layers 2"
  "tiny9 3 -p 4|-e zb-h1 --no-overlap pp"
  "tiny7-gpt 5 -t 2 -p 2 -S|-e zb-h1 -r full"
  "tiny7 5 -t 2 -p 2 -S|-e zb-h2 -r selective --attention unfused"
  "tiny7-gpt 8 -p 2 -d 2 -z 2|-e zb-h2"
  "tiny7 6 -p 2 -d 2 -z 2 --offload-optimizer cpu|-e zb-h1"
  "tiny7-drop 5 -t 2 -p 2 -S --gelu fused|-e zb-h2"
  "tiny-moe 4 -p 2|-e zb-h1"
  "tiny-moe-shared 8 -p 2 -d 2 --ep 2 --moe-imbalance 2 -r full|-e zb-h2"
  "tiny7 8 -p 2 -d 2 -z 3|-e zb-h1"
  "tiny7-gpt 8 -p 2 -d 2 -z 3 --no-reshard-after-forward|-e zb-h2"
  "tiny7 8 -p 2 -d 2 -z 3 --offload-optimizer cpu --offload-params cpu|-e zb-h2"
  "tiny-moe 8 -p 2 -d 2 -z 3 --prefetch 2|-e zb-h1"
)
for c in "${cases[@]}"; do
  head=${c%%|*}
  inter=${c#*|}
  read -r model gbs grid <<<"$head"
  # shellcheck disable=SC2206
  g=($grid)
  n=1
  for ((k = 0; k < ${#g[@]}; k++)); do
    case ${g[k]} in -t | -p | -d) n=$((n * g[k + 1])) ;; esac
  done
  # shellcheck disable=SC2086
  run ref "$model" "$gbs" "$n" "${g[@]}" -e 1f1b || { fail "$model $grid 1f1b: $(head -3 "$tmp/err.txt")"; continue; }
  # shellcheck disable=SC2086
  run got "$model" "$gbs" "$n" "${g[@]}" $inter || { fail "$model $grid $inter: $(head -3 "$tmp/err.txt")"; continue; }
  runs=$((runs + 1))
  same_run "$model -B $gbs $grid $inter (against 1F1B)" "$tmp/ref" "$tmp/got"
done
echo "$runs plans"
[ "$runs" -eq ${#cases[@]} ] || fail "only $runs of ${#cases[@]} plans ran"
finish
