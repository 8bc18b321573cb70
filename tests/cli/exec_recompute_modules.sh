#!/usr/bin/env bash
# Selective recomputation's modules (--recompute-modules, Megatron-Core's recompute_modules): the CPU
# executor runs each to the losses and first-step gradients of the same plan without recomputation,
# every stage's measured peak its plan's (mla_up_proj on the MLA model, moe_act and layernorm on the
# DeepSeek-V3-shaped MoE with its dense first layer's mlp, under TP with SP, fp8, a split backward,
# EP overlap's merged layers, GPT-2's dropout and LayerNorm, LoRA's adapters, ZeRO-3); each module
# lowers the plan's peak; plan, flags, the sweep and export carry them, sim's nearest plans that fit
# try them; what cannot be is refused.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"

# model | modules | flags: the run with the modules against the same plan without recomputation
cases=(
  "tiny-mla|mla_up_proj,layernorm|"
  "tiny-mla|mla_up_proj|-t 2 -S"
  "tiny-moe-shared|moe_act,layernorm,mlp|"
  "tiny-moe-shared|moe_act,layernorm,mlp|-t 2 -S --ep 2 --etp 1"
  "tiny-moe-shared|moe_act,layernorm|-P fp8 --fp8-recipe current"
  "tiny-moe|moe_act,layernorm|-p 2 -e zb-h1"
  "tiny-moe-shared|moe_act,layernorm,mlp|-p 2 -v 2 -d 2 --ep 2 --overlap all,ep"
  "tiny-gpt|core_attn,layernorm,mlp|--attention unfused"
  "tiny|layernorm,mlp|--finetune lora"
  "tiny-qknorm|layernorm,mlp|-d 2 -z 3"
)
for c in "${cases[@]}"; do
  IFS='|' read -r model mods flags <<<"$c"
  # shellcheck disable=SC2206
  f=($flags)
  n=$(ranks "${f[@]}")
  cpu_run ref "$n" -m "$model" --steps 3 -B 4 -r none "${f[@]}" ||
    { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  cpu_run got "$n" -m "$model" --steps 3 -B 4 --recompute-modules "$mods" "${f[@]}" ||
    { fail "$model $mods ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
  what="$model --recompute-modules $mods ${f[*]}"
  same_run "$what" "$tmp/ref" "$tmp/got"
done

# each module drops what it makes again: the plan's peak below the one without it
peak() { "$px" plan -m "$1" -c local-cpu -g 1 -B 4 --json "${@:2}" | jq '.memory.stages[0].peak_bytes'; }
for c in "tiny-mla mla_up_proj" "tiny-moe-shared moe_act" "tiny-moe-shared layernorm" "tiny-moe-shared mlp"; do
  read -r model mod <<<"$c"
  none=$(peak "$model" -r none) with=$(peak "$model" --recompute-modules "$mod")
  [ "$with" -lt "$none" ] || fail "$model $mod: peak $with, without recomputation $none"
done

# the plan says it, its flags reproduce it, the exports write the frameworks' settings
"$px" plan -m deepseek-v3 -c gb200-nvl72 -g 256 -p 4 --vpp 4 --ep 64 -B 1024 -P mxfp8 \
  --recompute-modules mla_up_proj,moe_act >"$tmp/plan.txt"
grep -q "recompute selective (mla_up_proj,moe_act)" "$tmp/plan.txt" || fail "plan: $(sed -n 3p "$tmp/plan.txt")"
"$px" plan -m deepseek-v3 -c gb200-nvl72 -g 256 -p 4 --vpp 4 --ep 64 -B 1024 -P mxfp8 \
  --recompute-modules mla_up_proj,moe_act --json | jq -e '.parallel.recompute_modules == "mla_up_proj,moe_act"' \
  >/dev/null || fail "plan --json: no recompute_modules"
x=(-m deepseek-v3 -c gb200-nvl72 -g 256 -p 4 --vpp 4 --ep 64 -B 1024 -P mxfp8 --fp8-params -z 1 --main-grad fp32 --recompute-modules mla_up_proj,moe_act)
"$px" export "${x[@]}" --to megatron >"$tmp/m.sh" 2>/dev/null
tr -s ' \\\n' ' ' <"$tmp/m.sh" | grep -q -- "--recompute-granularity selective --recompute-modules mla_up_proj moe_act" ||
  fail "export --to megatron: $(grep recompute "$tmp/m.sh")"
"$px" export "${x[@]}" --to nemo >"$tmp/n.sh" 2>/dev/null
grep -q "model.recompute_modules=\[mla_up_proj,moe_act\]" "$tmp/n.sh" || fail "export --to nemo: $(grep recompute "$tmp/n.sh")"
"$px" sweep -m tiny-moe-shared -c local-cpu -g 2 -B 8 --recompute-modules moe_act --top 3 --json >"$tmp/sweep.json" \
  2>/dev/null
jq -e '.plans | length > 0 and all(.flags | test("--recompute selective --recompute-modules moe_act"))' \
  "$tmp/sweep.json" >/dev/null || fail "sweep: $(jq -c '[.plans[].flags]' "$tmp/sweep.json")"
"$px" sweep -m tiny-moe-shared -c local-cpu -g 2 -B 8 --recompute-modules moe_act --top 3 2>/dev/null |
  grep -q "recomputed modules on every plan (selm): moe_act" || fail "sweep: its header does not name the modules"
"$px" sweep -m tiny-moe-shared -c local-cpu -g 2 -B 8 --top 3 2>/dev/null |
  grep -q "recomputed modules not searched (ask for them with --recompute-modules moe_act)" ||
  fail "sweep: its header does not say the modules were not searched"
# a plan that does not fit: the nearest plans that do include recomputing the modules (DeepSeek-V3 as NVIDIA's
# 26.04 GB300 recipe, less its recomputation)
"$px" sim -m deepseek-v3 -c dgx-gb300 -g 256 -p 2 --vpp 8 --ep 32 --etp 1 -z 1 -B 4096 --mbs 2 -P mxfp8 \
  --moe-dispatch deepep 2>&1 | grep -q -- "--recompute-modules mla_up_proj,moe_act " ||
  fail "sim: the nearest plans that fit do not recompute the modules"

# a plan file carries them; a bad one is refused naming the file and the field
"$px" sweep -m tiny-moe-shared -c local-cpu -g 2 -B 8 --recompute-modules moe_act,layernorm --top 1 \
  -o "$tmp/best.json" >/dev/null 2>&1 || fail "sweep -o: $(cat "$tmp/best.json" 2>&1 | head -2)"
"$px" sim --plan "$tmp/best.json" 2>&1 | grep -q "recompute selective (moe_act,layernorm)" || fail "sim --plan: no modules"
jq '.parallel.recompute_modules = "moe"' "$tmp/best.json" >"$tmp/bad.json"
err=$("$px" sim --plan "$tmp/bad.json" 2>&1)
[ $? -eq 2 ] && echo "$err" | grep -qF "bad.json: field 'parallel.recompute_modules': recompute module 'moe' is not one of" ||
  fail "a plan file's bad modules: $err"

# refused, naming the flags
refused_plan 1 "--recompute-modules names what selective recomputation redoes: it needs --recompute selective, not full" \
  -r full --recompute-modules layernorm
refused_plan 1 "--recompute-modules mla_up_proj redoes multi-head latent attention's up projections: tiny has none" \
  --recompute-modules mla_up_proj
refused_plan 1 "--recompute-modules moe_act redoes the experts' activation: tiny is a dense model" \
  --recompute-modules moe_act
refused_plan 1 "recompute module 'moe' is not one of" --recompute-modules moe
refused_plan 1 "Megatron-Core refuses it (hint: --fp8-recipe current)" -P fp8 --recompute-modules layernorm

[ "$fails" -eq 0 ] && echo "exec_recompute_modules: ok"
exit $((fails > 0))
