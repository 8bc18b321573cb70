#!/usr/bin/env bash
# parallax plan: the JSON contract, plan files round-trip, graph and DOT
# output, and refusals of impossible plans.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"

"$px" plan -m llama3-70b -c dgx-h100 -g 64 -t 8 -p 2 -z 1 --sp -r selective --json >"$tmp/a.json" || fail "plan --json"
for key in '"params":' '"flops_per_step":' '"fits":' '"peak_bytes_max":' '"stages":' '"peak_bytes":' \
           '"params_bytes":' '"grads_bytes":' '"optimizer_bytes":' '"activations_bytes":' '"buffers_bytes":'; do
  grep -q "$key" "$tmp/a.json" || fail "plan --json lacks $key"
done
grep -q '"fits":	true' "$tmp/a.json" || fail "70B on 64 H100 with tp 8 pp 2 ZeRO-1 SP selective should fit"

# Plan files: save, reload, same result; flags override the file.
"$px" plan -m llama3-70b -c dgx-h100 -g 64 -t 8 -p 2 -z 1 --sp -r selective -o "$tmp/plan.json" >/dev/null || fail "--save-plan"
"$px" plan -f "$tmp/plan.json" --json >"$tmp/b.json" || fail "--plan"
diff <(grep -v '"model"\|"cluster"' "$tmp/a.json") <(grep -v '"model"\|"cluster"' "$tmp/b.json") >/dev/null || fail "plan file round trip differs"
"$px" plan -f "$tmp/plan.json" -z 3 --json | grep -q '"zero":	3' || fail "flag does not override the plan file"
"$px" plan -m gpt2-124m -c dgx-h100 -g 1 --gelu fused -o "$tmp/gelu.json" | grep -q "GELU in the GEMM epilogues" ||
  fail "--gelu fused is not stated"
grep -q '"gelu":	"fused"' "$tmp/gelu.json" || fail "the plan file lacks the GELU form"
"$px" plan -f "$tmp/gelu.json" --graph "$tmp/gelu-graph.json" >/dev/null || fail "a fused-GELU plan file"
grep -q '"epilogue":	"dgelu"' "$tmp/gelu-graph.json" || fail "the graph lacks the fused GELU's epilogues"
# Megatron-Core's unfused RoPE: stated, kept in the plan file, its ops marked in the graph
"$px" plan -m small-llama -c dgx-h100 -g 1 --elementwise rope-unfused -o "$tmp/rope.json" | grep -q "RoPE as Megatron-Core's unfused" ||
  fail "--elementwise rope-unfused is not stated"
grep -q '"elementwise":	"rope-unfused"' "$tmp/rope.json" || fail "the plan file lacks the unfused RoPE"
"$px" plan -f "$tmp/rope.json" --graph "$tmp/rope-graph.json" >/dev/null || fail "an unfused-RoPE plan file"
[ "$(grep -c '"rope_unfused":	true' "$tmp/rope-graph.json")" -ge 2 ] || fail "the graph lacks the unfused RoPE's ops"

# Graph and DOT.
"$px" plan -m tiny -c local-cpu -g 2 -p 2 --graph "$tmp/g.json" --dot "$tmp/g.dot" >/dev/null || fail "--graph/--dot"
grep -q '"format":	"parallax-graph/2"' "$tmp/g.json" || fail "graph format"
# operands by position: per-op recomputation's k projection writes the fused QKV weight's second section alone
"$px" plan -m tiny -c local-cpu -g 1 -r op --graph "$tmp/op.json" >/dev/null || fail "-r op --graph"
jq -e '[.blocks[].ops[] | select(.kind == "linear" and .phase == "recompute") | .out[0]] | any(. == null)' \
  "$tmp/op.json" >/dev/null || fail "-r op --graph: no recomputed linear op with out[0] left out"
grep -q 'digraph parallax' "$tmp/g.dot" || fail "dot header"
grep -q 'flash_attn' "$tmp/g.dot" || fail "dot lacks the attention op"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary files left behind"

# Refusals: exit 2 with the reason.
check() {
  local needle=$1
  shift
  local err
  err=$("$px" plan "$@" 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -qF -- "$needle" || fail "plan $* -> $rc '$err' (wanted '$needle')"
}
check "attention heads" -m llama3-8b -c dgx-a100 -g 24 -t 3
check "but there are 16 GPUs" -m llama3-8b -c dgx-a100 -g 16 -t 8 -p 2 -d 2
check "not divisible by mbs" -m llama3-8b -c dgx-a100 -g 16 -t 8 -B 7
check "needs tp > 1" -m llama3-8b -c dgx-a100 -g 8 --sp
check "needs pp > 1" -m llama3-8b -c dgx-a100 -g 8 -e interleaved -v 2
check "more than the 4 layers" -m tiny -c dgx-a100 -g 8 -p 8
check "--model is required" -c dgx-a100 -g 8
check "not one of gpipe|1f1b|interleaved" -m tiny -c dgx-a100 -g 8 -e zigzag
check "overlap" -m tiny -c dgx-a100 -g 8 --overlap bogus
check "not one of separate|fused" -m tiny -c dgx-a100 -g 8 --gelu epilogue
check "plan.json" -f "$tmp/nonexistent/plan.json"

# One fits rule: a stage whose peak fits the HBM but not with the executor's
# headroom says NO in the table, and the JSON's per-stage verdicts agree.
out=$("$px" plan -m llama3-70b -c dgx-h100 -g 16 -t 4 -p 4 -b 1 -B 256 -r full)
printf '%s\n' "$out" | sed -n 2p | grep -q "^  DOES NOT FIT: stage 0" || fail "70B on 16 GPUs with full recompute should not fit"
printf '%s\n' "$out" | grep -qE "^  0 .*  NO$" || fail "stage 0 of that plan should say NO: $out"
"$px" plan -m llama3-70b -c dgx-h100 -g 16 -t 4 -p 4 -b 1 -B 256 -r full --json |
  jq -e '.fits == ([.memory.stages[].fits] | all) and (.memory.stages[0].fits | not)' >/dev/null ||
  fail "plan --json per-stage fits disagree with fits"

# Verdicts first: the line after the plan's name says whether it fits, the stage, what it needs of the
# usable HBM and the bytes over (or to spare), then the nearest plans that fit with what each changes;
# exit status 3 for a plan that does not fit (plan and sim, text and JSON), 0 for one that does.
out=$("$px" plan -m llama3-8b -c dgx-h100 -g 8); rc=$?
[ "$rc" -eq 3 ] || fail "plan of a plan that does not fit: exit $rc, not 3"
printf '%s\n' "$out" | sed -n 2p | grep -qE '^  DOES NOT FIT: stage 0 needs 162.20 GiB per GPU .* of the 77.51 GiB usable .*: 84.69 GiB over$' ||
  fail "plan's verdict: $(printf '%s\n' "$out" | sed -n 2p)"
printf '%s\n' "$out" | sed -n 3,4p | grep -qE '^    --zero [0-9]' || fail "plan's nearest plans: $(printf '%s\n' "$out" | sed -n 3,6p)"
"$px" sim -m llama3-8b -c dgx-h100 -g 8 --json >"$tmp/nofit.json"; rc=$?
[ "$rc" -eq 3 ] || fail "sim --json of a plan that does not fit: exit $rc, not 3"
jq -e '.verdict.fits == false and .verdict.stage == 0 and .verdict.over_bytes == .verdict.need_bytes - .verdict.usable_bytes
       and (.verdict.nearest | length) > 0 and (.verdict.nearest | all(.step_time_s > 0 and .peak_bytes > 0))' \
  "$tmp/nofit.json" >/dev/null || fail "sim --json's verdict: $(jq -c .verdict "$tmp/nofit.json")"
# every nearest plan fits when its flags are given, and differs from the plan in the groups it names
jq -r '.verdict.nearest[].change' "$tmp/nofit.json" >"$tmp/changes"
while read -r change; do
  # shellcheck disable=SC2086
  "$px" plan -m llama3-8b -c dgx-h100 -g 8 ${change%%, without*} >/dev/null || fail "the nearest change '$change' does not fit"
done <"$tmp/changes"
out=$("$px" sim -m llama3-8b -c dgx-h100 -g 8 -z 3); rc=$?
[ "$rc" -eq 0 ] && printf '%s\n' "$out" | sed -n 2p | grep -qE '^  fits: stage 0 needs .* to spare$' ||
  fail "sim of a plan that fits: exit $rc, $(printf '%s\n' "$out" | sed -n 2p)"
"$px" plan -m llama3-8b -c dgx-h100 -g 8 -z 3 --json | jq -e '.verdict.fits and .verdict.over_bytes == 0 and
  .step.step_time_s > 0 and .step.mfu > 0 and .step.mfu_peak == "bf16"' >/dev/null || fail "plan --json of a plan that fits"
"$px" --help | grep -q "3 the plan does not fit" || fail "parallax --help does not document exit status 3"

# topology show --sources: each figure, its value and its source; the house figures marked
"$px" topology show dgx-h100 --sources >"$tmp/sources.txt" || fail "topology show --sources"
grep -qE '^gpu.hbm_gb_per_s +3350 +H100 SXM5 datasheet: 3.35 TB/s' "$tmp/sources.txt" ||
  fail "--sources: gpu.hbm_gb_per_s: $(grep hbm_gb "$tmp/sources.txt")"
grep -qE '^host.storage_gb_per_s +20 +-- no source of its own' "$tmp/sources.txt" || fail "--sources: unsourced figure not marked"
grep -qE '^[0-9]+ figures without a source of their own' "$tmp/sources.txt" || fail "--sources: no count"

# calibrate --import: the samples into a cluster file that topology show, plan and sim read;
# measured collectives and GEMMs change the predicted step
nccl=$src/tests/data/nccl
"$px" calibrate --import -c dgx-h100 -o "$tmp/measured.json" "$nccl/node_ar.txt" "$nccl/node_rs.txt" \
  "$nccl/all_gather_perf.out" "sendrecv=$nccl/pair_sendrecv.txt" "$nccl/gemm.csv" >"$tmp/import.txt" 2>&1 ||
  fail "calibrate --import: $(cat "$tmp/import.txt")"
[ "$(grep -c '^  measured' "$tmp/import.txt")" -eq 5 ] || fail "calibrate --import summary: $(cat "$tmp/import.txt")"
"$px" topology show "$tmp/measured.json" | grep -q "measured all_gather across nodes: 11 sizes" ||
  fail "topology show of an imported file: $("$px" topology show "$tmp/measured.json")"
a=$("$px" sim -m llama3-70b -c dgx-h100 -g 64 -t 8 -p 2 -B 64 --json | jq .step_time_s)
b=$("$px" sim -m llama3-70b -c "$tmp/measured.json" -g 64 -t 8 -p 2 -B 64 --json | jq .step_time_s)
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] || fail "sim on the imported cluster: step $b s, the preset's $a s"

# an fp8 plan names its recipe and the dtype of everything but the fp8 GEMMs
"$px" plan -m llama3-8b -c dgx-h100 -g 8 -t 8 -P fp8 --fp8-recipe current --fp8-base fp32 | grep -q "fp8 (current scaling, the rest fp32)" ||
  fail "plan text lacks the fp8 recipe and base"
# the router's padding: in the plan's text and its JSON, refused in bf16 by the flag's name (exit 2)
out=$("$px" plan -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 -P fp8 --fp8-recipe current --moe-router-padding) ||
  fail "plan --moe-router-padding: $out"
grep -q "a2a dispatch, the router padding each expert's tokens" <<<"$out" || fail "plan text lacks the router's padding"
"$px" plan -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 -P fp8 --fp8-recipe current --moe-router-padding --json |
  jq -e '.parallel.moe_router_padding == true' >/dev/null || fail "plan --json lacks moe_router_padding"
err=$("$px" plan -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 64 --moe-router-padding 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--moe-router-padding pads each expert's tokens.*not bf16" <<<"$err" ||
  fail "--moe-router-padding in bf16: $rc $err"

finish
