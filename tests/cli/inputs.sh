#!/usr/bin/env bash
# Silent wrong inputs: a misspelt key in a model, cluster or plan file is
# refused naming the file, the key and the nearest known one (exit 2), not
# left at its default; a Hugging Face config's long max_position_embeddings
# is not taken as the sequence without asking; --set overrides are stated
# in every output.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"
cd "$src" || exit 1

# refused NEEDLE CMD...: exit 2 and NEEDLE on stderr
refused() {
  local needle=$1
  shift
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -qF -- "$needle" || fail "$* -> exit $rc: $err (wanted '$needle')"
}

# misspelt keys: ours ("kv_head": 8 gave an 8.84 B model), an HF config's, a cluster's, a plan file's
jq 'del(.kv_heads) + {kv_head: 8}' models/llama3-8b.json >"$tmp/kv_head.json"
refused "$tmp/kv_head.json: unknown field 'kv_head' (did you mean 'kv_heads'?)" \
  "$px" plan -m "$tmp/kv_head.json" -c dgx-h100 -g 8
jq 'del(.num_key_value_heads) + {num_key_value_head: 8}' tests/data/hf/llama3-8b-config.json >"$tmp/hf.json"
refused "$tmp/hf.json: unknown field 'num_key_value_head' (did you mean 'num_key_value_heads'?)" \
  "$px" model show "$tmp/hf.json"
jq '.inter_node.nic_gbit_per_sec = 400' topologies/dgx-h100.json >"$tmp/cluster.json"
refused "$tmp/cluster.json: unknown field 'inter_node.nic_gbit_per_sec' (did you mean 'inter_node.nic_gbit_per_s'?)" \
  "$px" plan -m tiny -c "$tmp/cluster.json" -g 8
jq '.gpu.gemm.tile_k = 64' topologies/dgx-h100.json >"$tmp/cluster2.json"
refused "unknown field 'gpu.gemm.tile_k' (did you mean 'gpu.gemm.tile_m'?)" "$px" topology show "$tmp/cluster2.json"
"$px" plan -m tiny -c dgx-h100 -g 8 -o "$tmp/plan.json" >/dev/null || fail "plan -o"
jq '.parallel.recompte = "full"' "$tmp/plan.json" >"$tmp/typo.json"
refused "$tmp/typo.json: unknown field 'parallel.recompte' (did you mean 'parallel.recompute'?)" \
  "$px" sim -f "$tmp/typo.json"
jq '. + {gpu: 8}' "$tmp/plan.json" >"$tmp/typo2.json"
refused "$tmp/typo2.json: unknown field 'gpu' (did you mean 'gpus'?)" "$px" sim -f "$tmp/typo2.json"
jq '.model.layer = 4' "$tmp/plan.json" >"$tmp/typo3.json"
refused "unknown field 'layer' (did you mean 'layers'?)" "$px" plan -f "$tmp/typo3.json"
# every HF config kept here loads: the keys it has and parallax does not read are on the list of irrelevant ones
for f in tests/data/hf/*.json; do
  "$px" model show "$f" >/dev/null 2>"$tmp/err" || fail "model show $f: $(cat "$tmp/err")"
done

# an HF config's sequence: max_position_embeddings 131,072 (Qwen2) is not planned without --seq
refused "--seq is not set and the model's Hugging Face config gives only max_position_embeddings 131072" \
  "$px" plan -m tests/data/hf/qwen2-0.5b-config.json -c dgx-h100 -g 8
refused "--seq is not set" "$px" sim -m tests/data/hf/qwen2-0.5b-config.json -c dgx-h100 -g 8
"$px" plan -m tests/data/hf/qwen2-0.5b-config.json -c dgx-h100 -g 8 --seq 4096 >"$tmp/q.txt" ||
  fail "qwen2 with --seq 4096: $(cat "$tmp/q.txt")"
grep -q max_position_embeddings "$tmp/q.txt" && fail "a given --seq is said to be the config's: $(head -3 "$tmp/q.txt")"
"$px" model show tests/data/hf/qwen2-0.5b-config.json | grep -q \
  "seq 131072 is the Hugging Face config's max_position_embeddings (no sequence length was given; above 16384" ||
  fail "model show does not say where its seq came from"
# ... 8,192 (Llama 3) is, and the output says where it came from
"$px" plan -m tests/data/hf/llama3-8b-config.json -c dgx-h100 -g 8 -z 3 >"$tmp/l.txt" || fail "llama3 HF plan"
grep -q "^  seq 8192 is the Hugging Face config's max_position_embeddings" "$tmp/l.txt" ||
  fail "plan does not say where its seq came from: $(head -4 "$tmp/l.txt")"
"$px" plan -m tests/data/hf/llama3-8b-config.json -c dgx-h100 -g 8 -z 3 --json >"$tmp/l.json"
jq -e '.seq_from == "max_position_embeddings"' "$tmp/l.json" >/dev/null || fail "plan --json has no seq_from"

# --set overrides: in the plan, sim and sweep headers, their JSON, and the report
sets=(--set gpu.hbm_gib=96 --set intra_node.gb_per_s=400)
for cmd in plan sim; do
  "$px" $cmd -m tiny -c dgx-h100 -g 8 "${sets[@]}" >"$tmp/$cmd.txt" || fail "$cmd --set"
  sed -n 2,3p "$tmp/$cmd.txt" | grep -qx "  cluster fields set: gpu.hbm_gib=96, intra_node.gb_per_s=400" ||
    fail "$cmd does not state its --set overrides: $(head -3 "$tmp/$cmd.txt")"
  "$px" $cmd -m tiny -c dgx-h100 -g 8 "${sets[@]}" --json >"$tmp/$cmd.json"
  jq -e '.overrides == ["gpu.hbm_gib=96", "intra_node.gb_per_s=400"]' "$tmp/$cmd.json" >/dev/null ||
    fail "$cmd --json does not record the overrides: $(jq -c .overrides "$tmp/$cmd.json")"
done
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 8 -t 2 "${sets[@]}" --report "$tmp/rep" >"$tmp/sweep.txt" 2>/dev/null ||
  fail "sweep --set"
sed -n 2p "$tmp/sweep.txt" | grep -qx "  cluster fields set: gpu.hbm_gib=96, intra_node.gb_per_s=400" ||
  fail "sweep does not state its --set overrides: $(head -3 "$tmp/sweep.txt")"
jq -e '.question.overrides == ["gpu.hbm_gib=96", "intra_node.gb_per_s=400"]' "$tmp/rep/sweep.json" >/dev/null ||
  fail "sweep.json does not record the overrides"
grep -q "Cluster fields set</th><td><code>gpu.hbm_gib=96</code>, <code>intra_node.gb_per_s=400</code>" \
  "$tmp/rep/index.html" || fail "the report does not list the overrides"
# a plan file keeps them: sim -f states them too
"$px" plan -m tiny -c dgx-h100 -g 8 "${sets[@]}" -o "$tmp/set.json" >/dev/null
"$px" sim -f "$tmp/set.json" | sed -n 2p | grep -q "cluster fields set: gpu.hbm_gib=96" ||
  fail "sim -f of a plan made with --set does not state them"

[ "$fails" -eq 0 ] && echo "inputs: ok"
exit $((fails > 0))
