#!/usr/bin/env bash
# torchtitan's per-op recomputation (--recompute op, px_recompute): the CPU executor runs it to the losses and
# first-step gradients of the same plan without recomputation, every stage's measured peak its plan's: Llama-shaped
# (k's projection made again from the fused QKV weight's k rows, RoPE from q's kept projection, w3 from the fused
# gate/up weight's up rows), with Qwen3's q/k norms, a sliding window, sinks, a GPT-shaped model without biases
# (learned positions, LayerNorm, GELU), under TP with and without SP, eager elementwise ops with SP (wo multiplied
# again), fp8, mxfp8, ZeRO-3, pipeline stages with a split backward, context parallelism (the all-gathered keys and
# values gathered again, the ring's), the MTP module's layer on the last of two stages with eager ops; its peak is
# below the plan's without recomputation and above full recomputation's; plan, flags, the sweep (its fp8 plans at
# current scaling) and export --to torchtitan carry it; what it is not planned on is refused naming the reason.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"

# GPT-2's shape without its biases and dropout (which --recompute op refuses)
jq '.name = "tiny-gpt-nobias" | .bias = false | .qkv_bias = false' "$src/models/tiny-gpt.json" >"$tmp/nobias.json"

# model | flags: the run with --recompute op against the same plan without recomputation
cases=(
  "tiny|"
  "tiny-qknorm|-t 2 -S"
  "tiny|-t 2"
  "tiny|-t 2 -S --elementwise eager"
  "tiny-window|-d 2 -z 3"
  "tiny-sinks|-p 2 -e zb-h1"
  "$tmp/nobias.json|-t 2 -S"
  "tiny|-P fp8 --fp8-recipe current -t 2 -S"
  "tiny-qknorm|-P mxfp8"
  "tiny|--cp 2 --cp-algo all-gather --mbs 2"
  "tiny-qknorm|--cp 2 --cp-algo ring"
  "tiny-mtp|--mtp-layers 1 -p 2 --elementwise eager"
)
for c in "${cases[@]}"; do
  IFS='|' read -r model flags <<<"$c"
  # shellcheck disable=SC2206
  f=($flags)
  n=$(ranks "${f[@]}")
  what="$(basename "$model" .json) ${f[*]}"
  cpu_run ref "$n" -m "$model" --steps 3 -B 4 -r none "${f[@]}" || { fail "$what: $(head -3 "$tmp/err.txt")"; continue; }
  cpu_run got "$n" -m "$model" --steps 3 -B 4 -r op "${f[@]}" ||
    { fail "$what -r op: $(head -3 "$tmp/err.txt")"; continue; }
  same_run "$what -r op" "$tmp/ref" "$tmp/got"
done

# it keeps less than no recomputation and more than full recomputation
peak() { "$px" plan -m llama3-8b -c dgx-h100 -g 8 -d 8 -z 3 -B 16 --mbs 2 --json "$@" | jq '.memory.stages[0].peak_bytes'; }
none=$(peak -r none) op=$(peak -r op) full=$(peak -r full)
[ "$op" -lt "$none" ] && [ "$op" -gt "$full" ] || fail "peaks: none $none, op $op, full $full"

# the plan says it, its flags reproduce it, torchtitan's export writes its setting, Megatron's refuses it
x=(-m llama3-8b -c dgx-h100 -g 64 -t 8 -d 8 -z 3 -S -B 96 --mbs 12 -r op --overlap dp,zero,pp --main-grad fp32)
"$px" plan "${x[@]}" | grep -q "recompute op" || fail "plan does not say recompute op"
"$px" plan "${x[@]}" --json | jq -e '.parallel.recompute == "op"' >/dev/null || fail "plan --json: no recompute op"
"$px" export "${x[@]}" --to torchtitan >"$tmp/tt.toml" 2>/dev/null || fail "export --to torchtitan refused -r op"
grep -A2 '^\[activation_checkpoint\]' "$tmp/tt.toml" | tr '\n' ' ' |
  grep -q 'mode = "selective" selective_ac_option = "op"' || fail "export --to torchtitan: $(grep -A2 activation "$tmp/tt.toml")"
"$px" export "${x[@]}" --to megatron >/dev/null 2>"$tmp/m.txt" && fail "export --to megatron wrote -r op"
grep -q "recompute op" "$tmp/m.txt" || fail "export --to megatron: $(cat "$tmp/m.txt")"

# the sweep keeps it on every plan, its fp8 plans with torchtitan's current scaling
"$px" sweep -m llama3.2-1b -c dgx-h100 -g 8 -B 16 -r op --top 3 --json >"$tmp/sweep.json" 2>/dev/null
jq -e '.plans | length > 0 and all(.flags | test("--recompute op")) and
  any(.flags | test("--precision fp8 --fp8-recipe current"))' "$tmp/sweep.json" >/dev/null ||
  fail "sweep -r op: $(jq -c '[.plans[:3][].flags]' "$tmp/sweep.json")"

# refused, naming why
refused() { # what pattern flags...
  local what=$1 pat=$2
  shift 2
  "$px" plan -c local-cpu -g 1 -B 4 -r op "$@" >/dev/null 2>"$tmp/r.txt" && { fail "$what: planned"; return; }
  grep -q "$pat" "$tmp/r.txt" || fail "$what: $(cat "$tmp/r.txt")"
}
refused "experts" "experts or latent attention" -m tiny-moe
refused "latent attention" "experts or latent attention" -m tiny-mla
refused "biases" "addmm" -m tiny-gpt
refused "unfused attention" "fused attention's outputs" -m tiny --attention unfused
refused "CP's all-to-all" "cp-algo a2a" -m tiny -g 2 --cp 2 --cp-algo a2a
refused "adapters" "adapters' recomputation" -m tiny --finetune lora
refused "delayed fp8" "current amax" -m tiny -P fp8 --fp8-recipe delayed

[ "$fails" -eq 0 ] && echo "exec_recompute_op: ok"
exit $((fails > 0))
