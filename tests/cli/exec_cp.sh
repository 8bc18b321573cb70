#!/usr/bin/env bash
# Context parallelism on the CPU executor (--cp 2 and 4, ring, all-gather and
# a2a; with TP, SP, PP, ZeRO, learned positions, tied embeddings, dropout):
# every run's losses equal the cp=1 run of the same model, batch and flags
# (the CP ranks removed) within 1e-5 over 8 steps, its first-step gradients
# too, and every stage's largest measured peak is the plan's. A plan file
# saved by `parallax plan --cp` runs to the same losses; a2a with a cp that
# does not divide the heads is refused naming the valid cp values; the CUDA
# backend refuses CP plans (or, built without it, says it has none).
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
runs=0

# GPT-shaped with dropout: the masks are functions of global positions, so
# splitting the sequence must not change them
jq '.dropout = 0.1 | .name = "tiny-gpt-drop"' "$src/models/tiny-gpt.json" >"$tmp/tiny-gpt-drop.json"

run() { # out model gbs ranks flags...
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$(model_file "$model")" --steps 8 -B "$gbs" "$@"
}

# check what: the run in got.json / got.bin equals the cp=1 one in ref.json / ref.bin
check() { same_run "$1" "$tmp/ref" "$tmp/got"; }

# model gbs grid | CP flags (the cp=1 reference takes the grid alone, on
# ranks/cp ranks). 8 steps each: the largest loss difference is ~2e-7 (tiny-gpt).
cases=(
  "tiny 4|--cp 2 --cp-algo ring"
  "tiny 4|--cp 2 --cp-algo all-gather"
  "tiny 4|--cp 2 --cp-algo a2a"
  "tiny 4|--cp 4 --cp-algo ring"
  "tiny 4|--cp 4 --cp-algo all-gather"
  "tiny 4 -t 2 -p 2|--cp 2 --cp-algo ring"
  "tiny 4 -t 2 -S --mbs 2|--cp 2 --cp-algo all-gather"
  "tiny 4 -d 2 -z 1|--cp 2 --cp-algo ring"
  "tiny-gpt 4|--cp 2 --cp-algo ring"
  "tiny-gpt-drop 4|--cp 2 --cp-algo a2a"
)
for c in "${cases[@]}"; do
  head=${c%%|*}
  cpf=${c#*|}
  read -r model gbs grid <<<"$head"
  # shellcheck disable=SC2206
  g=($grid)
  # shellcheck disable=SC2206
  f=($cpf)
  n=1
  for ((k = 0; k < ${#g[@]}; k++)); do
    case ${g[k]} in -t | -p | -d) n=$((n * g[k + 1])) ;; esac
  done
  cp=${f[1]}
  what="$model -B $gbs $grid $cpf"
  key=$(printf '%s' "$model $gbs $grid" | tr -c 'a-zA-Z0-9' '_') # cases sharing a cp=1 run share its output
  if [ -f "$tmp/ref_$key.json" ]; then
    cp "$tmp/ref_$key.json" "$tmp/ref.json" && cp "$tmp/ref_$key.bin" "$tmp/ref.bin"
  else
    run ref "$model" "$gbs" "$n" "${g[@]}" || { fail "$model $grid (cp=1): $(head -3 "$tmp/err.txt")"; continue; }
    cp "$tmp/ref.json" "$tmp/ref_$key.json" && cp "$tmp/ref.bin" "$tmp/ref_$key.bin"
  fi
  run got "$model" "$gbs" $((n * cp)) "${g[@]}" "${f[@]}" || { fail "$what: $(head -3 "$tmp/err.txt")"; continue; }
  runs=$((runs + 1))
  check "$what"
done
echo "$runs plans"
[ "$runs" -eq ${#cases[@]} ] || fail "only $runs of ${#cases[@]} plans ran"

# A plan file: `parallax plan --cp 2 --cp-algo a2a --save-plan` then `run --plan`
# gives the cp=1 losses (and those of the same flags given directly).
if "$px" plan -m tiny -c local-cpu -g 2 -B 4 -P fp32 --cp 2 --cp-algo a2a --save-plan "$tmp/plan.json" >/dev/null 2>"$tmp/err.txt"; then
  jq -e '.parallel.cp == 2 and .parallel.cp_algo == "a2a"' "$tmp/plan.json" >/dev/null ||
    fail "the plan file lacks cp 2 a2a: $(jq -c .parallel "$tmp/plan.json")"
  if cp "$tmp/ref_tiny_4_.json" "$tmp/ref.json" && cp "$tmp/ref_tiny_4_.bin" "$tmp/ref.bin" &&
    run got tiny 4 2 --plan "$tmp/plan.json"; then
    check "tiny --plan (cp 2 a2a)"
  else
    fail "--plan (cp 2 a2a): $(head -3 "$tmp/err.txt")"
  fi
else
  fail "plan --cp 2 --cp-algo a2a --save-plan: $(head -3 "$tmp/err.txt")"
fi

# a2a splits the heads: tiny's 4 query and 2 key/value heads allow cp 1 or 2;
# cp 4 is refused before running (the planner and the executor), exit 2, naming them.
err=$("$px" plan -m tiny -c local-cpu -g 4 -B 4 --cp 4 --cp-algo a2a 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "valid cp: 1, 2" || fail "plan a2a cp 4: $rc $err"
err=$(mpirun -np 4 "$px" run --backend cpu -m tiny -B 4 --steps 1 --cp 4 --cp-algo a2a 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "valid cp: 1, 2" || fail "run a2a cp 4: $rc $err"

# The CUDA backend runs no CP plan: refused before running, naming context
# parallelism. A build without it (PX_CUDA=OFF, or no nvcc) says it has none.
cuda_refuses "context parallelism" 2 -m tiny -B 4 --steps 1 --cp 2

finish
