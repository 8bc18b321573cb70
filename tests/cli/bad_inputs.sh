#!/usr/bin/env bash
# Bad input corpus: every file and flag is refused with exit 2 and a one-line
# message naming the file or flag, without a crash or a hang.
set -u
px=$1
src=$2
bad=$src/tests/bad
source "$(dirname "$0")/../tools/clitest.sh"

# expect_refusal NEEDLE CMD...: exit 2, one stderr line containing NEEDLE.
expect_refusal() {
  local needle=$1
  shift
  local err rc
  err=$(timeout 20 "$@" 2>&1 >/dev/null)
  rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! printf '%s' "$err" | grep -qF -- "$needle"; then
    echo "FAIL: $* -> exit $rc, stderr ($lines lines): $err (wanted '$needle')"
    fails=$((fails + 1))
  else
    echo "ok: $* -> $err"
  fi
}

for f in empty truncated array string_number zero_layers negative huge int64max heads_not_dividing \
         kv_not_dividing unknown_model_type nested bool_as_string enum_as_number hf_missing_field \
         window_without_layers hf_layer_types; do
  expect_refusal "$f.json" "$px" model show "$bad/$f.json"
done
# RoPE's shape and scaling: an odd count of rotated dims; Llama 3.1's scaling without its original context
expect_refusal "field 'rope_fraction': 0.1875 of head_dim 16 rotates 3 dims" "$px" model show "$bad/rope_odd_fraction.json"
expect_refusal "field 'rope_scaling.original_max_position_embeddings' is missing" "$px" model show \
  "$bad/hf_rope_llama3_partial.json"
expect_refusal "garbage.bin" "$px" model show "$bad/garbage.bin"
expect_refusal "is a directory" "$px" model show "$bad/adir/"
expect_refusal "no_such_file.json" "$px" model show "$bad/no_such_file.json"
expect_refusal "no such preset" "$px" model show no-such-model
for f in cluster_string_peak cluster_zero_gpus cluster_gpu_array cluster_missing_inter empty truncated array nested; do
  expect_refusal "$f.json" "$px" topology show "$bad/$f.json"
done
expect_refusal "garbage.bin" "$px" topology show "$bad/garbage.bin"
expect_refusal "'gpu.attention[0].seq[1]': expected increasing" "$px" topology show "$bad/cluster_attention_seq.json"
expect_refusal "'gpu.attention[0].window': a sliding window is causal" "$px" topology show "$bad/cluster_attention_window.json"
expect_refusal "'gpu.attention[0].window': -128 is out of range" "$px" topology show "$bad/cluster_attention_window_negative.json"
expect_refusal "'gpu.gemm.fp8_k_half': -859 is out of range" "$px" topology show "$bad/cluster_fp8_k_half.json"
expect_refusal "'gpu.attention[0].dtype': 'fp4' is not one of bf16|fp8|mxfp8" "$px" topology show "$bad/cluster_attention_dtype.json"
expect_refusal "'gpu.attention[0].cudnn_version': expected cudnn.backend_version()'s integer (9.13.1 is 91301)" "$px" topology show \
  "$bad/cluster_attention_cudnn.json"
expect_refusal "'gpu.cudnn_version': expected cudnn.backend_version()'s integer" "$px" topology show dgx-gb300 --set \
  gpu.cudnn_version=9.13
expect_refusal "'gpu.attention[0].cudnn_version': 9.13019e+23 is out of range [0, 999999]" "$px" topology show \
  "$bad/cluster_attention_cudnn_huge.json" # past int64 (a fuzz finding: its integer check cast it first)
expect_refusal "'inter_node.deepep[1].ep': 16 after 32: EP sizes must ascend" "$px" topology show "$bad/cluster_deepep_order.json"

# Flags.
expect_refusal "--gpus" "$px" topology show dgx-a100 --gpus -5
expect_refusal "--gpus" "$px" topology show dgx-a100 --gpus abc
expect_refusal "--gpus" "$px" topology show dgx-a100 --gpus 99999999999999999999
expect_refusal "whole nodes" "$px" topology show dgx-a100 --gpus 12
expect_refusal "unknown option" "$px" model show llama3-8b --bogus
expect_refusal "needs a value" "$px" model show llama3-8b --seq
expect_refusal "--seq" "$px" model show llama3-8b --seq 0
expect_refusal "unknown command" "$px" frobnicate
expect_refusal "usage" "$px" model
# offload: the modes it needs, and the cluster fields it reads
expect_refusal "--offload-optimizer" "$px" plan -m llama2-7b -c dgx-a100 -g 8 -z 1 --offload-optimizer cpu
expect_refusal "--offload-params" "$px" plan -m llama2-7b -c dgx-a100 -g 8 -z 3 --offload-params cpu
expect_refusal "host.nvme_gb_per_s" "$px" plan -m llama2-7b -c dgx-a100 -g 8 -z 3 --offload-optimizer nvme
expect_refusal "host.cpu_adam_gparams_per_s" "$px" plan -m llama2-7b -c hgx-h200 -g 8 -z 2 --offload-optimizer cpu
expect_refusal "--offload-optimizer" "$px" plan -m llama2-7b -c dgx-a100 -g 8 -z 2 --offload-optimizer disk
expect_refusal "--shard-group" "$px" plan -m llama2-7b -c dgx-a100 -g 16 -z 3 --shard-group 8 --offload-optimizer cpu
# what-ifs: --set and --vary name the field and what was wrong
expect_refusal "unknown field 'gpu.hbm_gibb' (did you mean 'gpu.hbm_gib'?)" "$px" plan -m tiny -c dgx-h100 -g 8 --set gpu.hbm_gibb=141
expect_refusal "'intra_node.comm_sms': 132 is not below gpu.sm_count 132" "$px" sim -m tiny -c dgx-h100 -g 8 --set intra_node.comm_sms=132
expect_refusal "'inter_node.comm_sms'" "$px" sim -m tiny -c dgx-h100 -g 8 --set inter_node.comm_sms=-1
expect_refusal "field 'gpu.hbm_gib'" "$px" sim -m tiny -c dgx-h100 -g 8 --set gpu.hbm_gib=-1
expect_refusal "--jitter: -1 is out of range" "$px" sim -m tiny -c dgx-h100 -g 8 --jitter -1
expect_refusal "--jitter: 'abc' is not a decimal number" "$px" plan -m tiny -c dgx-h100 -g 8 --jitter abc
expect_refusal "--jitter" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --jitter 0.9
expect_refusal "field 'gpu.jitter'" "$px" sim -m tiny -c dgx-h100 -g 8 --set gpu.jitter=-0.01
expect_refusal "expected FIELD=VALUE" "$px" plan -m tiny -c dgx-h100 -g 8 --set hbm
expect_refusal "'torus' is not one of" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --vary inter_node.topology=fat_tree,torus
expect_refusal "expected FIELD=V1,V2" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --vary gpu.hbm_gib
expect_refusal "--vary" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --vary gpu.hbm_gib=80,141 --csv "$tmp/v.csv"
# calibrate --import: the base cluster, the files, each file's kind, rows and figures
nccl=$src/tests/data/nccl
expect_refusal "--cluster BASE" "$px" calibrate --import -o "$tmp/c.json" "$nccl/node_ar.txt"
expect_refusal "name the measurement files" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json"
expect_refusal "takes no positional arguments" "$px" calibrate -o "$tmp/c.json" "$nccl/node_ar.txt"
grep -v "concluded" "$nccl/node_ar.txt" >"$tmp/mystery.txt"
expect_refusal "mystery.txt: which collective?" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$tmp/mystery.txt"
expect_refusal "'broadcast' is not all_reduce" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "broadcast=$tmp/mystery.txt"
grep -v "Rank" "$nccl/node_ar.txt" >"$tmp/norank.txt"
expect_refusal "norank.txt: no '#  Rank N" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "all_reduce=$tmp/norank.txt"
printf '%s\n' "$(head -16 "$nccl/node_ar.txt")" "   1048576  oops" >"$tmp/badrow.txt"
expect_refusal "badrow.txt:17: not an nccl-tests result row" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "all_reduce=$tmp/badrow.txt"
printf 'm,n,k,dtype,tflops\n4096,4096,4096,bf16,1200\n' >"$tmp/fast.csv"
expect_refusal "fast.csv:2: 1200 TFLOP/s is above" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$tmp/fast.csv"
printf 'm,n,k,tflops\n4096,4096,4096,700\n' >"$tmp/nodtype.csv"
expect_refusal "no 'dtype' column" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$tmp/nodtype.csv"
printf 'm,n,k,dtype,tflops\n4096,4096,4096,int4,700\n' >"$tmp/int4.csv"
expect_refusal "dtype 'int4'" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$tmp/int4.csv"
[ ! -e "$tmp/c.json" ] || { echo "FAIL: a refused import wrote $tmp/c.json"; fails=$((fails + 1)); }
# zero-bubble schedules need a pipeline
expect_refusal "needs pp > 1" "$px" plan -m tiny -c dgx-h100 -g 8 -e zb-h1
expect_refusal "--moe-router-padding pads the tokens a router sends each expert, but tiny is a dense model" \
  "$px" plan -m tiny -c dgx-h100 -g 8 -P fp8 --moe-router-padding
expect_refusal "--moe-router-padding with --moe-dispatch allgather" \
  "$px" plan -m tiny-moe -c local-cpu -g 2 --ep 2 -P fp8 --moe-dispatch allgather --moe-router-padding
# the MTP module: the model's own, one at most, as DeepSeek-V3 has it (the executors' refusals: exec_mtp.sh)
expect_refusal "--mtp-layers 1 trains more multi-token prediction modules than tiny has: 0" \
  "$px" plan -m tiny -c dgx-h100 -g 8 --mtp-layers 1
expect_refusal "--mtp-layers 2: one multi-token prediction module at most" \
  "$px" plan -m deepseek-v3 -c dgx-h100 -g 1024 -p 8 --ep 64 -B 1024 --mtp-layers 2
sed 's/"name": "tiny-gpt"/"name": "tiny-gpt-mtp", "mtp_layers": 1/' "$src/models/tiny-gpt.json" >"$tmp/tiny-gpt-mtp.json"
expect_refusal "--mtp-layers with tiny-gpt-mtp: the MTP module is planned as DeepSeek-V3's" \
  "$px" plan -m "$tmp/tiny-gpt-mtp.json" -c dgx-h100 -g 8 --mtp-layers 1
# hybrid sharding: a shard group must divide dp, and shards only with ZeRO
expect_refusal "--shard-group 3 does not divide dp 4" "$px" plan -m tiny -c local-cpu -g 4 -z 3 --shard-group 3
expect_refusal "--shard-group" "$px" plan -m tiny -c local-cpu -g 4 --shard-group 2
expect_refusal "--shard-group" "$px" plan -m tiny -c local-cpu -g 4 -z 3 --shard-group 0
# the library names fields (`reshard_after_forward` false), the CLI their flags
expect_refusal "--no-reshard-after-forward keeps ZeRO-3's gathered parameters; ZeRO-1 has none (hint: --zero 3)" \
  "$px" plan -m tiny -c local-cpu -g 4 -z 1 --no-reshard-after-forward
# Numbers are decimal, as the user means them (hex, inf, nan and spaces are what strtod also takes).
expect_refusal "--gpus: '0x10' is not a decimal number" "$px" topology show dgx-a100 --gpus 0x10
expect_refusal "--gpus: '0x1p4' is not a decimal number" "$px" topology show dgx-a100 --gpus 0x1p4
expect_refusal "--tokens: 'inf' is not a decimal number" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --tokens inf
expect_refusal "--jitter: 'nan' is not a decimal number" "$px" sim -m tiny -c dgx-h100 -g 8 --jitter nan
expect_refusal "--seq: ' 8' is not a decimal number" "$px" plan -m tiny -c dgx-h100 -g 8 --seq " 8"
expect_refusal "field 'gpu.hbm_gib': expected a number, got a string" "$px" plan -m tiny -c dgx-h100 -g 8 --set gpu.hbm_gib=0x50
expect_refusal "--layers-per-chunk: '2,2,' is not a comma list" "$px" plan -m tiny -c dgx-h100 -g 8 -p 2 --layers-per-chunk 2,2,
# sweep's numbers that mean nothing alone, or at 0
expect_refusal "--price: must be positive" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --tokens 1B --price 0
expect_refusal "--price needs --tokens" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --price 2.5
expect_refusal "--objective cost needs --tokens T and --price USD" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 -y cost --tokens 1B
# What the planner can hold: refused at once, before any work (the issue's: 16777216 ran past
# 120 s, 134217728 took 24 GB before the kernel killed it).
expect_refusal "gbs 16777216 makes 16777216 micro-batches a step" "$px" sim -m tiny -c local-cpu -g 2 -p 2 --gbs 16777216
expect_refusal "more than the 2097152 a plan may have" "$px" sim -m tiny -c local-cpu -g 2 -p 2 --gbs 134217728
expect_refusal "layer passes" "$px" plan -m tiny -c local-cpu -g 2 -p 2 -v 2 --gbs 1099511627776 --microbatch-group 2
expect_refusal "layer passes" "$px" sweep -m tiny -c local-cpu -g 2 -p 2 -b 1 --gbs 16777216
expect_refusal "tokens a micro-batch may have" "$px" plan -m tiny -c local-cpu -g 1 --mbs 1073741824 --gbs 1073741824 --seq 32
expect_refusal "--microbatch-group 1099511627776 must be from pp 2" "$px" plan -m tiny -c local-cpu -g 2 -p 2 -v 2 --gbs 64 --microbatch-group 1099511627776
# Input files past their kind's limit: refused before they are read (the issue's 60 MB array and
# 3 M keys took 5-7 s to be accepted).
head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$tmp/wide.json"
printf '{}' >>"$tmp/wide.json"
expect_refusal "wide.json: 2,097,154 bytes, more than a model file may have (1.00 MiB)" "$px" model show "$tmp/wide.json"
expect_refusal "wide.json: 2,097,154 bytes, more than a cluster file may have (1.00 MiB)" "$px" topology show "$tmp/wide.json"
head -c $((3 << 20)) /dev/zero | tr '\0' ' ' >"$tmp/wideplan.json"
printf '{}' >>"$tmp/wideplan.json"
expect_refusal "more than a plan file may have (2.06 MiB)" "$px" plan -f "$tmp/wideplan.json"
# run profiles (compare): every time a number of seconds (an infinite one found by fuzz_profile;
# a subnormal one made the step's error infinite)
expect_refusal "profile_inf_time.json: field 'stages[1].op_s_per_step[5]': expected a time in seconds" \
  "$px" compare --profile "$bad/profile_inf_time.json" -m tiny -B 2 -p 2 --vpp 2 -c local-cpu -g 2
for f in profile_string_time profile_subnormal_time; do
  expect_refusal "$f.json: field 'step_times_s[1]': expected a time in seconds" \
    "$px" compare --profile "$bad/$f.json" -m tiny -B 2 -p 2 -c local-cpu -g 2
done
# compare takes the plan flags and --profile, not run's: a run-only flag is refused, not ignored;
# topology show takes the cluster by name or by --cluster (its help lists it), not both
expect_refusal "unknown option '--steps'" "$px" compare --profile "$bad/profile_inf_time.json" -m tiny -c local-cpu -g 2 --steps 3
expect_refusal "unknown option '--ckpt'" "$px" compare --profile "$bad/profile_inf_time.json" -m tiny -c local-cpu -g 2 --ckpt d
"$px" compare --help | grep -qE -- "^ +(-., )?--(steps|seed|backend) " && { echo "FAIL: compare --help lists run's flags"; fails=$((fails + 1)); }
expect_refusal "the cluster twice" "$px" topology show dgx-h100 -c dgx-a100
expect_refusal "the model twice" "$px" model show llama3-8b -m tiny

# The good paths still work.
"$px" --version >/dev/null || { echo "FAIL: --version"; fails=$((fails + 1)); }
"$px" model show llama3-8b --json | grep -q '"params":	8030261248' || { echo "FAIL: model show --json params"; fails=$((fails + 1)); }
"$px" topology show dgx-h100 --nodes 4 --json | grep -q '"nodes":	4' || { echo "FAIL: topology --nodes"; fails=$((fails + 1)); }
[ "$("$px" topology show -c dgx-h100 --nodes 2 2>&1)" = "$("$px" topology show dgx-h100 --nodes 2)" ] ||
  { echo "FAIL: topology show -c NAME: $("$px" topology show -c dgx-h100 2>&1 | head -2)"; fails=$((fails + 1)); }

finish
