#!/usr/bin/env bash
# parallax export: every setting a plan is exported as is one the framework
# defines (tests/data/export/<framework>_args.tsv, read from the framework's
# own source), with a value of its type among its choices; a few plans of
# each kind against their expected text (tests/data/export/expected); what a
# framework cannot express is refused, naming the choice; sweep
# --runnable-by keeps to plans export writes. Planner only (no executor).
set -u
px=$1
src=${2:-.}
source "$(dirname "$0")/../tools/clitest.sh"
facts=$src/tests/data/export

# settings FW FILE: "name<TAB>value" for each setting FILE sets (quotes taken off values)
settings() {
  case $1 in
    megatron) awk '/^[A-Z_]+=\($/ { on = 1; next } /^\)$/ { on = 0 } on && /^  --/ {
                 sub(/^  /, ""); n = $1; $1 = ""; sub(/^ /, ""); gsub(/"/, ""); print n "\t" $0 }' "$2" ;;
    nemo) awk '/^[A-Z_]+=\($/ { on = 1; next } /^\)$/ { on = 0 } on && /^  [a-z]/ {
                 sub(/^  /, ""); i = index($0, "="); v = substr($0, i + 1); gsub(/"/, "", v); print substr($0, 1, i - 1) "\t" v }' "$2" ;;
    torchtitan) awk '/^\[.*\]$/ { sec = substr($0, 2, length($0) - 2); next }
                 skip { if ($0 ~ /^\]/) skip = 0; next }
                 /^[a-z_0-9]+ = / { k = $1; v = substr($0, length(k) + 4); if (v == "[") { skip = 1; v = "[list]" }
                   if (v ~ /^\[/ && v != "[list]") { gsub(/[][]/, "", v); gsub(/, /, ",", v) } gsub(/"/, "", v); print sec "." k "\t" v }' "$2" ;;
    deepspeed) jq -r 'paths(scalars) as $p | [($p | map(tostring) | join(".")), (getpath($p) | tostring)] | @tsv' "$2" ;;
  esac
}

# check_settings FW FILE: each setting is FW's, its value of the type and among the choices FW's source gives
check_settings() {
  local fw=$1 file=$2 bad
  bad=$(settings "$fw" "$file" | awk -F'\t' 'NR == FNR { if ($0 !~ /^#/) { type[$1] = $2; ch[$1] = $3 } next }
    { n = $1; v = $2; count++
      if (!(n in type)) { print "not a setting: " n; next }
      t = type[n]
      if (t == "flag" && v != "") print n ": a flag, given " v
      if (t == "bool" && v != "true" && v != "false") print n ": not a bool: " v
      if (t == "int" && v !~ /^-?[0-9]+$/) print n ": not an int: " v
      if (t == "float" && v !~ /^-?[0-9.]+(e-?[0-9]+)?$/) print n ": not a number: " v
      if (t != "flag" && v == "") print n ": no value"
      if (ch[n] != "") { k = split(ch[n], c, ","); m = split(v, vs, ",")
        for (j = 1; j <= m; j++) { ok = 0; for (i = 1; i <= k; i++) if (vs[j] == c[i]) ok = 1; if (!ok) print n ": " vs[j] " is not one of " ch[n] } } }
    END { if (!count) print "no settings found" }' "$facts/${fw}_args.tsv" -)
  [ -z "$bad" ] || fail "$fw $(basename "$file"): $bad"
}

# the form of each format: bash arrays that bash parses, TOML sections, JSON
well_formed() {
  case $1 in
    megatron | nemo) bash -n "$2" 2>"$tmp/sh.err" || fail "$1 $(basename "$2"): not valid bash: $(cat "$tmp/sh.err")" ;;
    deepspeed) jq -e 'type == "object"' "$2" >/dev/null || fail "deepspeed $(basename "$2"): not a JSON object" ;;
    torchtitan) grep -q '^\[parallelism\]$' "$2" || fail "torchtitan $(basename "$2"): no [parallelism]" ;;
  esac
}

# The round trips: name, framework, plan flags. Dense TP/PP/VP/SP, CP, MoE EP/ETP, ZeRO-3 (Megatron-FSDP,
# FSDP2) and HSDP, uneven stages and an explicit split, offload, fp8 (delayed, current, blockwise), partial
# recomputation (the block method), EP overlap, the block-scaled precisions (mxfp8, nvfp4) with and without quantized
# weights and bf16 layers.
cases=(
  "dense_tp_pp_vp_sp|megatron|-m llama3-8b -c dgx-h100 -g 32 -t 2 -p 4 --vpp 2 --sp -z 1 -B 128"
  "dense_tp_pp_vp_sp|nemo|-m llama3-8b -c dgx-h100 -g 32 -t 2 -p 4 --vpp 2 --sp -z 1 -B 128 --main-grad fp32"
  "cp_allgather_full|megatron|-m llama3-8b -c dgx-h100 -g 16 --seq 32768 --cp 4 --cp-algo all-gather -t 2 --sp -z 1 -B 16 -r full"
  "moe_ep_etp|megatron|-m mixtral-8x7b -c dgx-h100 -g 64 -t 2 --ep 8 --etp 1 -p 2 --sp -z 1 -B 256 --seq 4096"
  "moe_ep_etp|nemo|-m mixtral-8x7b -c dgx-h100 -g 64 -t 2 --ep 8 --etp 1 -p 2 --sp -z 1 -B 256 --seq 4096 --main-grad fp32"
  "moe_deepep|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 --moe-dispatch deepep"
  "moe_hybridep|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 --moe-dispatch hybridep --main-grad fp32"
  "moe_router_padding|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 -P fp8 --fp8-recipe current --moe-router-padding"
  "mtp|megatron|-m deepseek-v3 -c dgx-h100 -g 1024 -t 2 -p 8 --vpp 4 --ep 64 --sp -z 1 -B 8192 --seq 4096 -P fp8 --fp8-recipe current --layers-per-chunk 1,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,0 --mtp-layers 1"
  "mtp|nemo|-m deepseek-v3 -c dgx-h100 -g 1024 -t 2 -p 8 --vpp 4 --ep 64 --sp -z 1 -B 8192 --seq 4096 --layers-per-chunk 1,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,0 --mtp-layers 1 --mtp-loss-scale 0.3 --main-grad fp32"
  "moe_router_padding|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 -P fp8 --fp8-recipe current --fp8-params --bf16-layers-start 1 --bf16-layers-end 1 --moe-router-padding --main-grad fp32"
  "zero3_hsdp|nemo|-m llama3-8b -c dgx-h100 -g 16 -z 3 --shard-group 8 -B 64 --main-grad fp32"
  "zero3_hsdp|megatron|-m llama3-8b -c dgx-h100 -g 16 -z 3 --shard-group 8 -B 64"
  "uneven_fp8_blockwise|nemo|-m llama3-8b -c dgx-h100 -g 32 -p 4 -t 2 --sp --first-stage-layers 7 --last-stage-layers 7 -P fp8 --fp8-recipe blockwise -z 1 -B 64 -r full --main-grad fp32"
  "interleaved_uneven|megatron|-m llama3-8b -c dgx-h100 -g 16 -t 2 --sp -p 2 --vpp 3 -z 1 -B 64"
  "chunks_fp8_delayed|megatron|-m llama3-8b -c dgx-h100 -g 16 -p 2 --vpp 2 --layers-per-chunk 7,9,9,7 -t 2 --sp -z 1 -B 64 -P fp8"
  "hsdp_pp_fp8|torchtitan|-m llama3-8b -c dgx-h100 -g 64 -t 2 --sp -p 2 -z 3 --shard-group 8 --grad-accum full --main-grad fp32 -P fp8 --fp8-recipe current --fp8-library torchao -B 128"
  "interleaved_full|torchtitan|-m llama3-8b -c dgx-h100 -g 16 -t 2 -p 4 --vpp 2 --sp -z 3 --grad-accum full --main-grad fp32 -B 64 -r full"
  "fsdp_cp_ep|torchtitan|-m mixtral-8x7b -c dgx-h100 -g 32 -t 2 --sp --cp 2 --ep 4 -z 3 --main-grad fp32 -B 64 --seq 4096"
  "fsdp_eager|torchtitan|-m llama3-8b -c dgx-h100 -g 8 -z 3 --main-grad fp32 -B 16 --elementwise eager"
  "zero3_offload|deepspeed|-m llama3-8b -c dgx-h100 -g 16 -z 3 --offload-optimizer cpu --offload-params cpu -B 64 --main-grad fp32"
  "zero2_fp16|deepspeed|-m gpt2-350m -c dgx-a100 -g 8 -z 2 -P fp16 -b 4 -B 64"
  "fp8_params_qk_norm|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 64 -t 2 --sp --ep 8 -z 1 -B 256 -P fp8 --fp8-recipe current --fp8-params"
  "fp8_params_qk_norm_bf16|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 64 -t 2 --sp --ep 8 -z 1 -B 256 -P fp8 --fp8-recipe current --fp8-params --bf16-layers-start 1 --bf16-layers-end 1 --main-grad fp32"
  "recompute_block|megatron|-m llama3-8b -c dgx-h100 -g 16 -t 2 --sp -p 2 --vpp 2 -z 1 -B 64 -r full --recompute-method block --recompute-layers 3"
  "recompute_block|nemo|-m llama3-8b -c dgx-h100 -g 16 -t 2 --sp -p 2 --vpp 2 -z 1 -B 64 -r full --recompute-method block --recompute-layers 3 --main-grad fp32"
  "cuda_graph_moe|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch deepep --cuda-graph layers"
  "cuda_graph_moe|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch deepep --cuda-graph layers --main-grad fp32"
  "cuda_graph_router|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch hybridep --cuda-graph router"
  "cuda_graph_router|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch hybridep --cuda-graph router --main-grad fp32"
  "ep_overlap|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch deepep --overlap dp,zero,pp,tp-bwd,ep"
  "ep_overlap|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --moe-dispatch deepep --overlap dp,zero,pp,tp-bwd,ep --main-grad fp32"
  "recompute_modules|megatron|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --recompute-modules moe_act,layernorm -P fp8 --fp8-recipe current"
  "recompute_modules|nemo|-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 --etp 1 -z 1 -B 64 --recompute-modules moe_act,layernorm --main-grad fp32"
  "cuda_graph|megatron|-m llama3-8b -c dgx-h100 -g 8 -z 1 -B 64 -P fp8 --fp8-recipe current --cuda-graph layers"
  "rope_unfused|megatron|-m llama3-8b -c dgx-h100 -g 8 -z 1 -B 64 --elementwise rope-unfused"
  "rope_unfused|nemo|-m llama3-8b -c dgx-h100 -g 8 -z 1 -B 64 --elementwise rope-unfused --main-grad fp32"
  "window_sinks|megatron|-m gpt-oss-120b -c dgx-b200 -g 64 --ep 8 --etp 1 -z 1 -B 1280 -b 4 --moe-dispatch hybridep"
  "cuda_graph_full_moe|megatron|-m qwen3-30b-a3b -c dgx-b200 -g 8 --ep 8 -z 1 -B 256 -b 1 -P mxfp8 --fp8-params --moe-dispatch hybridep --cuda-graph full --moe-imbalance 1.5"
  "cuda_graph_full_moe|nemo|-m qwen3-30b-a3b -c dgx-b200 -g 8 --ep 8 -z 1 -B 256 -b 1 -P mxfp8 --fp8-params --moe-dispatch hybridep --cuda-graph full --moe-imbalance 1.5 --main-grad fp32"
  "mxfp8|megatron|-m llama3-8b -c dgx-b200 -g 16 -z 2 -B 64 -P mxfp8"
  "mxfp8_params_bf16|megatron|-m llama3-8b -c dgx-b200 -g 16 -z 1 -B 64 -P mxfp8 --fp8-params --bf16-layers-start 1 --bf16-layers-end 2"
  "mxfp8_params|nemo|-m llama3-8b -c dgx-b200 -g 16 -z 1 -B 64 -P mxfp8 --fp8-params --main-grad fp32"
  "mxfp8_fsdp_bf16|torchtitan|-m llama3-8b -c dgx-b200 -g 16 -z 3 --main-grad fp32 -B 64 -P mxfp8 --fp8-library torchao --bf16-layers-start 1 --bf16-layers-end 2"
  "nvfp4|megatron|-m llama3-8b -c dgx-b200 -g 16 -z 1 -B 64 -P nvfp4"
  "nvfp4_params_bf16|megatron|-m llama3-8b -c dgx-b200 -g 16 -t 2 --sp -p 2 -z 1 -B 64 -P nvfp4 --fp8-params --bf16-layers-start 1 --bf16-layers-end 4"
  "nvfp4_params|nemo|-m llama3-8b -c dgx-b200 -g 16 -t 2 --sp -p 2 -z 1 -B 64 -P nvfp4 --fp8-params --main-grad fp32"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name fw flags <<<"$c"
  out=$tmp/$name.$fw
  # shellcheck disable=SC2086
  "$px" export $flags --to "$fw" >"$out" 2>"$out.err" || { fail "export $name --to $fw: $(cat "$out.err")"; continue; }
  well_formed "$fw" "$out"
  check_settings "$fw" "$out"
  expected=$facts/expected/$name.$fw
  if [ "${PX_EXPORT_UPDATE:-0}" = 1 ]; then cp "$out" "$expected"; fi
  diff "$expected" "$out" >"$tmp/diff" || fail "export $name --to $fw differs from $expected: $(head -20 "$tmp/diff")"
done

# -f: the plan file sweep -o or --save-plan writes gives the same text as the flags
"$px" plan -m llama3-8b -c dgx-h100 -g 32 -t 2 -p 4 --vpp 2 --sp -z 1 -B 128 -o "$tmp/p.json" >/dev/null || fail "plan -o"
"$px" export -f "$tmp/p.json" --to megatron >"$tmp/f.megatron" || fail "export -f"
diff "$facts/expected/dense_tp_pp_vp_sp.megatron" "$tmp/f.megatron" >/dev/null || fail "export -f differs from the flags' export"

# refusals: exit 2, naming the plan's choice and the reason
refuses() { # FW WHAT FLAGS...: export --to FW FLAGS exits 2 with WHAT in its message
  local fw=$1 what=$2 err rc
  shift 2
  err=$("$px" export "$@" --to "$fw" 2>&1 >"$tmp/refused.out")
  rc=$?
  [ "$rc" -eq 2 ] && echo "$err" | grep -qF -- "$what" || fail "export --to $fw $*: exit $rc, $err (wanted 2 and '$what')"
  [ -s "$tmp/refused.out" ] && fail "export --to $fw $*: refused but wrote $(head -2 "$tmp/refused.out")"
}
base=(-m llama3-8b -c dgx-h100 -g 16 -B 64)
refuses megatron "cannot run schedule zb-h1" "${base[@]}" -p 2 --schedule zb-h1
refuses megatron "cannot run schedule gpipe" "${base[@]}" -p 2 --schedule gpipe
refuses nemo "cannot run reshard_after_forward false" "${base[@]}" -z 3 --no-reshard-after-forward
refuses megatron "cannot run grad_accum full with ZeRO-2/3" "${base[@]}" -z 3 --grad-accum full
refuses megatron "cannot run offload" "${base[@]}" -z 2 --offload-optimizer cpu
refuses nemo "cannot run precision fp32" "${base[@]}" -P fp32
# Megatron-Bridge's precision recipe fixes the quantized weights, the bf16 layers and the gradients' dtype, over any
# override
refuses nemo "cannot run main_grad param with precision bf16" "${base[@]}" -z 1
refuses nemo "cannot run main_grad fp32 with precision fp16" -m gpt2-350m -c dgx-a100 -g 8 -z 1 -P fp16 -B 64 --main-grad fp32
refuses nemo "cannot run fp8_recipe current without fp8_params" "${base[@]}" -z 1 -P fp8 --fp8-recipe current \
  --bf16-layers-start 1 --bf16-layers-end 1
refuses nemo "cannot run bf16_layers_start/end with fp8_recipe current" "${base[@]}" -z 1 -P fp8 --fp8-recipe current \
  --fp8-params
refuses nemo "cannot run fp8_recipe blockwise with fp8_params" "${base[@]}" -z 1 -P fp8 --fp8-recipe blockwise --fp8-params
refuses torchtitan "cannot run zero 1" "${base[@]}" -z 1
refuses torchtitan "hint: main-grad fp32" "${base[@]}" -z 3
refuses torchtitan "cannot run tp without sequence parallelism" "${base[@]}" -t 2 -z 3 --main-grad fp32
refuses megatron "cannot run elementwise eager" "${base[@]}" --elementwise eager
# whose quantized layers: Megatron-Core's are Transformer Engine's, torchtitan's torchao's (unset: either)
refuses megatron "cannot run fp8_library torchao" "${base[@]}" -z 1 -P fp8 --fp8-recipe current --fp8-library torchao
refuses torchtitan "cannot run fp8_library te" "${base[@]}" -z 3 --main-grad fp32 -P fp8 --fp8-recipe current \
  --fp8-library te
# YaRN: a concentration other than Megatron-LM's default (0.1 ln 4 + 1) goes through --mscale, and the model's
# unrounded ramp through --no-yarn-correction-range-round-to-int; torchtitan's job notes it (its model code's)
jq '.rope_yarn = {factor: 4, original_positions: 2048, truncate: false} | .rope_concentration = 1.2 | .name = "yarn-8b"' \
  "$src/models/llama3-8b.json" >"$tmp/yarn-8b.json"
"$px" export -m "$tmp/yarn-8b.json" "${base[@]:2}" -z 1 --to megatron >"$tmp/yarn.megatron" 2>&1 ||
  fail "export of a YaRN model: $(cat "$tmp/yarn.megatron")"
for want in "--position-embedding-type yarn" "--rotary-scaling-factor 4" "--yarn-original-max-position-embeddings 2048" \
  "--no-yarn-correction-range-round-to-int" "--mscale 1.44269504"; do
  grep -q -- "$want" "$tmp/yarn.megatron" || fail "export of a YaRN model lacks $want"
done
"$px" export -m "$tmp/yarn-8b.json" "${base[@]:2}" -z 3 --main-grad fp32 --to torchtitan 2>/dev/null |
  grep -q "note: yarn-8b: YaRN's RoPE scaling" || fail "torchtitan's export of a YaRN model does not note it"
# Llama 3.1's scaling: Megatron-LM's --use-rope-scaling takes the factor and fixes the rest at Llama 3.1's, so
# llama3.2-1b's is written, and one with another high_freq_factor is noted, not written
"$px" export -m llama3.2-1b -c dgx-h100 -g 8 --to megatron 2>&1 | grep -A1 -- "--use-rope-scaling" |
  grep -q -- "--rope-scaling-factor 32" || fail "export of llama3.2-1b lacks --use-rope-scaling --rope-scaling-factor 32"
jq '.rope_llama3.high_freq_factor = 2 | .name = "scaled-1b"' "$src/models/llama3.2-1b.json" >"$tmp/scaled-1b.json"
"$px" export -m "$tmp/scaled-1b.json" -c dgx-h100 -g 8 --to megatron >"$tmp/scaled.megatron" 2>&1 ||
  fail "export of a scaled-RoPE model: $(cat "$tmp/scaled.megatron")"
grep -q -- "--use-rope-scaling" "$tmp/scaled.megatron" && fail "Megatron-LM's fixed scaling written for high_freq_factor 2"
grep -q "note: scaled-1b: Llama 3.1's RoPE scaling" "$tmp/scaled.megatron" ||
  fail "export of a scaling Megatron-LM cannot say does not note it"
# a partial rotary (pythia's rotary_pct 0.25): Megatron-LM's --rotary-percent
"$px" export -m "$src/tests/data/hf/pythia-160m-config.json" -c dgx-h100 -g 8 --to megatron 2>&1 |
  grep -q -- "--rotary-percent 0.25" || fail "export of a partial rotary lacks --rotary-percent 0.25"
# linear interpolation: Megatron-LM's --rotary-seq-len-interpolation-factor takes a whole factor
jq '.rope_linear_factor = 4 | .name = "linear-8b"' "$src/models/llama3-8b.json" >"$tmp/linear-8b.json"
"$px" export -m "$tmp/linear-8b.json" "${base[@]:2}" -z 1 --to megatron 2>&1 |
  grep -q -- "--rotary-seq-len-interpolation-factor 4" || fail "export of a linearly interpolated RoPE lacks its factor"
jq '.rope_linear_factor = 2.5' "$tmp/linear-8b.json" >"$tmp/linear-2.5.json"
"$px" export -m "$tmp/linear-2.5.json" "${base[@]:2}" -z 1 --to megatron 2>&1 |
  grep -q "note: linear-8b: RoPE's linear position interpolation" || fail "a factor Megatron-LM cannot take is not noted"
refuses torchtitan "cannot run elementwise rope-unfused" "${base[@]}" -z 3 --main-grad fp32 --elementwise rope-unfused
refuses torchtitan "cannot run elementwise eager with overlap tp" "${base[@]}" -t 2 --sp -z 3 --main-grad fp32 \
  --elementwise eager --overlap dp,zero,pp,tp-bwd,tp
# (the module with ZeRO-3 is not planned: a data-parallel plan without sharding shows the refusal)
refuses torchtitan "cannot run mtp_layers" -m tiny-mtp -c dgx-h100 -g 8 -d 8 -z 0 -B 8 --mtp-layers 1
refuses torchtitan "cannot run cp_algo a2a" -m llama3-8b -c dgx-h100 -g 16 -B 16 --seq 32768 --cp 2 --cp-algo a2a -z 3 --main-grad fp32
refuses torchtitan "cannot run fp8_library te" "${base[@]}" -z 3 --main-grad fp32 -P fp8
# torchao's recipes are the plan's rules (fp8_library), which export reads
refuses torchtitan "torchao scales fp8 per tensor from the current amax" "${base[@]}" -z 3 --main-grad fp32 -P fp8 \
  --fp8-library torchao
refuses torchtitan "cannot run fp8_params" "${base[@]}" -z 3 --main-grad fp32 -P fp8 --fp8-recipe current --fp8-params
refuses torchtitan "cannot run moe_dispatch deepep" -m mixtral-8x7b -c dgx-h100 -g 32 --ep 4 -z 3 --main-grad fp32 -B 64 \
  --seq 4096 --moe-dispatch deepep
refuses torchtitan "cannot run overlap ep" -m mixtral-8x7b -c dgx-h100 -g 2 -t 2 --sp --ep 2 --etp 1 -z 0 \
  --main-grad fp32 -B 8 --seq 4096 --overlap all,ep
refuses torchtitan "cannot run cuda_graph layers" "${base[@]}" -z 3 --main-grad fp32 --cuda-graph layers
refuses deepspeed "cannot run cuda_graph layers" "${base[@]}" -z 2 --cuda-graph layers
refuses torchtitan "cannot run cuda_graph full" "${base[@]}" -z 3 --main-grad fp32 --cuda-graph full
refuses deepspeed "cannot run tp > 1" "${base[@]}" -t 2
refuses deepspeed "cannot run precision fp8" "${base[@]}" -z 2 -P fp8
# the block-scaled precisions: what each framework cannot run of them
bw=(-m llama3-8b -c dgx-b200 -g 16 -B 64)
refuses megatron "cannot run fp8_params without ZeRO" "${bw[@]}" -z 0 -P nvfp4 --fp8-params
refuses megatron "cannot run fp8_params without ZeRO" "${base[@]}" -z 0 -P fp8 --fp8-recipe current --fp8-params
refuses megatron "cannot run fp8_params in nvfp4 with ZeRO-2/3" "${bw[@]}" -z 2 -P nvfp4 --fp8-params
refuses nemo "cannot run precision mxfp8 without fp8_params" "${bw[@]}" -z 1 -P mxfp8
refuses nemo "cannot run precision nvfp4 without fp8_params" "${bw[@]}" -z 1 -P nvfp4
refuses nemo "cannot run bf16_layers_start/end" "${bw[@]}" -z 1 -P nvfp4 --fp8-params --bf16-layers-end 2
refuses nemo "cannot run fp8_base fp32" "${bw[@]}" -z 1 -P mxfp8 --fp8-base fp32
refuses torchtitan "NVFP4's training recipe" "${bw[@]}" -z 3 --main-grad fp32 -P nvfp4 --fp8-library torchao
refuses torchtitan "cannot run precision mxfp8 with overlap tp" "${bw[@]}" -z 3 --main-grad fp32 -P mxfp8 -t 2 --sp \
  --overlap dp,zero,pp,tp-bwd,tp
refuses torchtitan "cannot run precision mxfp8 with tp and elementwise fused" "${bw[@]}" -z 3 --main-grad fp32 -P mxfp8 \
  -t 2 --sp
refuses torchtitan "cannot run precision mxfp8 with experts" -m mixtral-8x7b -c dgx-b200 -g 32 --ep 4 -z 3 --main-grad fp32 \
  -B 64 --seq 4096 -P mxfp8
refuses deepspeed "cannot run precision mxfp8" "${bw[@]}" -z 2 -P mxfp8
refuses deepspeed "cannot run precision nvfp4" "${bw[@]}" -z 2 -P nvfp4
refuses deepspeed "cannot run shard_group with ZeRO-1/2" "${base[@]}" -z 2 --shard-group 8
# usage
err=$("$px" export "${base[@]}" 2>&1); [ $? -eq 2 ] && echo "$err" | grep -q -- "--to is required" || fail "no --to: $err"
err=$("$px" export "${base[@]}" --to jax 2>&1); [ $? -eq 2 ] && echo "$err" | grep -q "is not one of megatron|nemo|torchtitan|deepspeed" ||
  fail "--to jax: $err"
err=$("$px" export "${base[@]}" --to megatron --json 2>&1); [ $? -eq 2 ] || fail "--json accepted: $err"
err=$("$px" export -f "$tmp/none.json" --to megatron 2>&1); [ $? -eq 2 ] && echo "$err" | grep -q "none.json" || fail "missing -f: $err"
"$px" export --help | grep -q "torchtitan" || fail "export --help"
"$px" --help | grep -q "^  export " || fail "export not in parallax --help"

# sweep --runnable-by: every plan it ranks exports (the same rule), and it says how many it left out
for fw in torchtitan deepspeed megatron nemo; do
  "$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 32 --runnable-by "$fw" -k 3 --json >"$tmp/rb.json" || fail "sweep --runnable-by $fw"
  jq -e --arg fw "$fw" '.question.runnable_by == $fw and .counts.not_runnable > 0 and (.plans | length) > 3' "$tmp/rb.json" >/dev/null ||
    fail "sweep --runnable-by $fw: $(jq -c '.question.runnable_by, .counts' "$tmp/rb.json")"
  jq -r '.plans[:8][].flags' "$tmp/rb.json" >"$tmp/rb.flags"
  while read -r flags; do
    # shellcheck disable=SC2086
    "$px" export -m llama3-8b -c dgx-h100 -g 8 $flags --to "$fw" >/dev/null 2>"$tmp/rb.err" ||
      fail "sweep --runnable-by $fw ranked a plan export refuses: $flags: $(cat "$tmp/rb.err")"
  done <"$tmp/rb.flags"
done
# Megatron-Bridge: a fixed block-scaled precision brings its recipe's quantized weights, and every plan exports
for pr in nvfp4 mxfp8; do
  "$px" sweep -m llama3-8b -c dgx-b200 -g 8 -B 32 --runnable-by nemo -P "$pr" -k 3 --json >"$tmp/rb.json" ||
    fail "sweep --runnable-by nemo -P $pr"
  jq -e '(.plans | length) > 3 and all(.plans[]; .flags | test("--fp8-params"))' "$tmp/rb.json" >/dev/null ||
    fail "sweep --runnable-by nemo -P $pr: $(jq -c '.counts, [.plans[:2][].flags]' "$tmp/rb.json")"
  jq -r '.plans[:4][].flags' "$tmp/rb.json" >"$tmp/rb.flags"
  while read -r flags; do
    # shellcheck disable=SC2086
    "$px" export -m llama3-8b -c dgx-b200 -g 8 $flags --to nemo >/dev/null 2>"$tmp/rb.err" ||
      fail "sweep --runnable-by nemo ranked a plan export refuses: $flags: $(cat "$tmp/rb.err")"
  done <"$tmp/rb.flags"
done
# torchtitan: its selective AC searched (--recompute op, and every 2nd layer in place of the block method), its
# float8 at current scaling
"$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 32 --runnable-by torchtitan --json >"$tmp/rb.json" 2>/dev/null ||
  fail "sweep --runnable-by torchtitan --json"
jq -e '(.plans | any(.flags | test("--recompute op"))) and (.plans | any(.flags | test("--fp8-recipe current"))) and
  (.plans | any(.flags | test("--recompute-method every --recompute-layers 2")))' "$tmp/rb.json" >/dev/null ||
  fail "sweep --runnable-by torchtitan: no -r op, every-2nd-layer or current-scaling fp8 plan"
"$px" sweep -m llama3-8b -c dgx-h100 -g 8 -B 32 --runnable-by deepspeed -k 3 >"$tmp/rb.txt" || fail "sweep --runnable-by table"
grep -q "valid but not runnable by deepspeed" "$tmp/rb.txt" || fail "the table does not count the plans left out: $(sed -n 2p "$tmp/rb.txt")"
grep '^ *[0-9]  tp' "$tmp/rb.txt" | grep -v '^ *[0-9]  tp1 pp1 ' && fail "sweep --runnable-by deepspeed ranked a plan with tp or pp"

finish
