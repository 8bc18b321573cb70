#!/usr/bin/env bash
# Partial recomputation (--recompute full --recompute-method block
# --recompute-layers N, Megatron-Core's block method: the first N layers of
# each model chunk recomputed, the others keeping their activations; or every
# N-th, --recompute-method every, torchtitan's layer-wise selective AC): the
# CPU executor runs it to the losses and first-step gradients of the run
# without recomputation (GPT-2-shaped with dropout, whose masks the
# recomputation must draw again; Llama-shaped on 2 pipeline stages of 2
# chunks; with ZB-H1's split backward), every stage's measured peak its
# plan's; plan, flags, the sweep and export --to megatron (block) and
# torchtitan (every) carry it; what it cannot be is refused.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"

run() { # out model gbs ranks flags...
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$model" --steps 4 -B "$gbs" "$@"
}
block=(-r full --recompute-method block)

for model in tiny-gpt tiny; do
  run "ref-$model" "$model" 4 1 -r none || { fail "$model without recomputation: $(head -3 "$tmp/err.txt")"; continue; }
done
# model ranks | flags: each against the model's one-rank run without recomputation
cases=(
  "tiny-gpt 1|--recompute-layers 1"
  "tiny-gpt 1|--recompute-layers 3"
  "tiny 2|-p 2 -e interleaved -v 2 --recompute-layers 1"
  "tiny 2|-p 2 -e zb-h1 --recompute-layers 1"
  "tiny-gpt 2|-t 2 -S --attention unfused --recompute-layers 2"
  "tiny-gpt 1|--recompute-method every --recompute-layers 2"
  "tiny 2|-p 2 -e zb-h1 --recompute-method every --recompute-layers 2"
)
for c in "${cases[@]}"; do
  read -r model n <<<"${c%%|*}"
  # shellcheck disable=SC2206
  f=(${c#*|})
  run got "$model" 4 "$n" "${block[@]}" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  same_run "$model ${f[*]}" "$tmp/ref-$model" "$tmp/got"
done
# a partial plan is neither none nor full: its peak lies between theirs (one rank, tiny-gpt's 4 layers)
peak() { "$px" plan -m tiny-gpt -c local-cpu -g 1 -B 4 --json "$@" | jq '.memory.stages[0].peak_bytes'; }
none=$(peak -r none) full=$(peak -r full) half=$(peak "${block[@]}" --recompute-layers 2)
[ "$full" -lt "$half" ] && [ "$half" -lt "$none" ] || fail "peaks: full $full, block 2 $half, none $none"

# the plan says it, its flags reproduce it, export --to megatron writes Megatron's arguments
"$px" plan -m llama3-8b -c dgx-h100 -g 8 -z 1 "${block[@]}" --recompute-layers 16 >"$tmp/plan.txt"
grep -q "recompute full of 16 layers a chunk (block)" "$tmp/plan.txt" || fail "plan: $(sed -n 3p "$tmp/plan.txt")"
"$px" export -m llama3-8b -c dgx-h100 -g 8 -z 1 "${block[@]}" --recompute-layers 16 --to megatron >"$tmp/m.sh" 2>/dev/null
grep -A2 -- "--recompute-granularity full" "$tmp/m.sh" | tr -s ' \n' ' ' |
  grep -q -- "--recompute-granularity full --recompute-method block --recompute-num-layers 16" ||
  fail "export --to megatron: $(grep recompute "$tmp/m.sh")"
"$px" export -m llama3-8b -c dgx-h100 -g 8 -z 3 "${block[@]}" --recompute-layers 16 --to torchtitan >/dev/null \
  2>"$tmp/tt.err" && fail "torchtitan took the block method"
grep -q "recompute_method block" "$tmp/tt.err" || fail "torchtitan's refusal: $(cat "$tmp/tt.err")"
# every N-th: half the layers' activations, as block of half; torchtitan's selective_ac_option N, Megatron refuses it
every=$(peak -r full --recompute-method every --recompute-layers 2)
[ "$full" -lt "$every" ] && [ "$every" -lt "$none" ] || fail "peaks: full $full, every 2 $every, none $none"
"$px" plan -m llama3-8b -c dgx-h100 -g 8 -z 3 -r full --recompute-method every --recompute-layers 2 |
  grep -q "recompute full of 1 layer in 2 of a chunk (every)" || fail "plan does not say every"
"$px" export -m llama3-8b -c dgx-h100 -g 8 -z 3 --main-grad fp32 -r full --recompute-method every --recompute-layers 2 \
  --to torchtitan >"$tmp/tt.toml" 2>/dev/null || fail "export --to torchtitan refused every"
grep -A2 '^\[activation_checkpoint\]' "$tmp/tt.toml" | tr '\n' ' ' |
  grep -q 'mode = "selective" selective_ac_option = "2"' || fail "torchtitan: $(grep -A2 activation "$tmp/tt.toml")"
"$px" export -m llama3-8b -c dgx-h100 -g 8 -z 1 -r full --recompute-method every --recompute-layers 2 --to megatron \
  >/dev/null 2>"$tmp/m.err" && fail "megatron took every"
grep -q "recompute_method every" "$tmp/m.err" || fail "megatron's refusal: $(cat "$tmp/m.err")"
# the sweep may choose it: Llama 3 8B on 8 GPUs, bf16, ZeRO-1, no TP or PP: full of half the layers wins
# (activation offload held off: 4 layers' on the host beat it there, tests/cli/exec_offload_act.sh)
"$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 64 -P bf16 -z 1 -t 1 -p 1 --offload-activations 0 --top 1 --json \
  >"$tmp/sweep.json" 2>/dev/null
jq -er '.plans[0].flags' "$tmp/sweep.json" | grep -q -- "--recompute full --recompute-method block --recompute-layers 16" ||
  fail "the sweep's best: $(jq -c '.plans[0].flags' "$tmp/sweep.json")"
"$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 64 -P bf16 -z 1 -t 1 -p 1 --offload-activations 0 --top 1 | grep -q " full16 " ||
  fail "the sweep's table does not label it full16"

# refused, naming the flags
refused_plan 1 "--recompute-layers 2 counts layers of full recomputation: it needs --recompute full" --recompute-layers 2
refused_plan 1 "--recompute-method uniform with --recompute-layers 2" -r full --recompute-layers 2
refused_plan 1 "--recompute-method block needs --recompute-layers" -r full --recompute-method block
refused_plan 1 "--recompute-method every needs --recompute-layers" -r full --recompute-method every
refused_plan 1 "--recompute-layers 5 is more than the 4 layers of a pipeline stage" "${block[@]}" --recompute-layers 5

[ "$fails" -eq 0 ] && echo "exec_recompute: ok"
exit $((fails > 0))
