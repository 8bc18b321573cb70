#!/usr/bin/env bash
# parallax sim: the JSON contract, the trace file, and refusals.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

"$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -z 1 -B 64 --json --trace "$tmp/t.json" >"$tmp/s.json" || fail "sim --json"
for key in '"step_time_s":' '"tokens_per_s":' '"model_tflops_per_gpu":' '"mfu":' '"hfu":' '"bubble_fraction":' \
           '"fits":' '"peak_bytes_max":' '"stages":' '"tp_s":' '"pp_s":' '"dp_s":' '"exposed_s":' '"activations_bytes":'; do
  grep -q "$key" "$tmp/s.json" || fail "sim --json lacks $key"
done
grep -q '"traceEvents"' "$tmp/t.json" || fail "trace lacks traceEvents"
grep -q '"name": "layer_fwd mb 0 layer 0"' "$tmp/t.json" || fail "trace lacks the first forward block"
grep -q '"thread_name"' "$tmp/t.json" || fail "trace lacks stream names"
tail -c 4 "$tmp/t.json" | grep -q ']}' || fail "trace not closed"
"$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -B 64 | grep -q "step time" || fail "human summary"
# the straggler: --jitter F (and gpu.jitter, by --set or a saved plan's cluster) stretches the step by
# the slowest of the job's GPUs, reported in JSON and the summary; --jitter 0 turns it off
j0=$("$px" sim -m llama3-8b -c dgx-h100 -g 1024 -t 8 -p 2 -B 64 --jitter 0 --json) || fail "sim --jitter 0"
j2=$("$px" sim -m llama3-8b -c dgx-h100 -g 1024 -t 8 -p 2 -B 64 --jitter 0.02 --save-plan "$tmp/j.json" --json) ||
  fail "sim --jitter 0.02"
jq -e '.straggler.jitter == 0 and .straggler.compute_stretch == 1 and .straggler.step_s == 0' <<<"$j0" >/dev/null ||
  fail "--jitter 0: a straggler reported"
# 1 + 0.02 x Phi^-1(1023.625 / 1024.25) = 1.06468135; step_s = the step less the --jitter 0 step
jq -e --argjson t0 "$(jq .step_time_s <<<"$j0")" '.straggler.ranks == 1024 and
  (.straggler.compute_stretch - 1.06468135 | fabs) < 1e-8 and (.step_time_s - $t0 - .straggler.step_s | fabs) < 1e-9 and
  .straggler.step_s > 0' <<<"$j2" >/dev/null || fail "--jitter 0.02: straggler $(jq -c .straggler <<<"$j2")"
[ "$("$px" sim --plan "$tmp/j.json" --json | jq .step_time_s)" = "$(jq .step_time_s <<<"$j2")" ] ||
  fail "the saved plan lost its jitter"
[ "$("$px" sim -m llama3-8b -c dgx-h100 -g 1024 -t 8 -p 2 -B 64 --set gpu.jitter=0.02 --json | jq .step_time_s)" = \
  "$(jq .step_time_s <<<"$j2")" ] || fail "--set gpu.jitter differs from --jitter"
"$px" sim -m llama3-8b -c dgx-h100 -g 1024 -t 8 -p 2 -B 64 --jitter 0.02 | grep -q "straggler  *slowest of 1024 GPUs" ||
  fail "the summary does not mention the straggler"
"$px" sim -m llama3-8b -c dgx-h100 -g 1024 -t 8 -p 2 -B 64 --jitter 0 | grep -q "straggler" &&
  fail "the summary mentions a straggler at --jitter 0"

# Host launches (sim/host.h): a small model on an H100 waits for the host to launch its kernels, and says so;
# with the host's costs set to 0 (--set host.op_us=0 host.launch_us=0, one after the other: each --set reloads the
# file the one before wrote) it does not, and its step is shorter
out=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4)
grep -Eq "^    host launches .* [3-9][0-9]\.[0-9]%$" <<<"$out" || fail "tiny on an H100: no launch-bound share: $out"
t1=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --json | jq .step_time_s)
j0=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --set host.op_us=0 --set host.launch_us=0 --json 2>"$tmp/err")
[ -s "$tmp/err" ] && fail "free launches: $(cat "$tmp/err")"
jq -e --argjson t1 "$t1" '.breakdown.launch_s == 0 and .step_time_s < 0.7 * $t1' <<<"$j0" >/dev/null ||
  fail "free launches: $(jq -c '[.step_time_s, .breakdown.launch_s]' <<<"$j0") against $t1"
"$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --set host.op_us=-1 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "host.op_us" "$tmp/err" || fail "a negative host.op_us: $(cat "$tmp/err")"
# --cuda-graph layers: a layer's ops one graph replay; the plan line says so, the step is shorter, a saved plan
# keeps it; an unknown value is refused naming the flag
out=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph layers)
grep -q "CUDA graphs per layer" <<<"$out" || fail "--cuda-graph layers: not on the plan line: $out"
jg=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph layers --save-plan "$tmp/g.json" --json)
jq -e --argjson t1 "$t1" '.step_time_s < 0.5 * $t1 and .breakdown.launch_s > 0' <<<"$jg" >/dev/null ||
  fail "--cuda-graph layers: $(jq -c '[.step_time_s, .breakdown.launch_s]' <<<"$jg") against $t1"
[ "$("$px" sim --plan "$tmp/g.json" --json | jq .step_time_s)" = "$(jq .step_time_s <<<"$jg")" ] ||
  fail "the saved plan lost its CUDA graphs"
"$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph all >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q -- "--cuda-graph" "$tmp/err" || fail "--cuda-graph all: $(cat "$tmp/err")"
# the cpu backend runs the plan's ops (graphs change the host's launches only); the cuda backend refuses it by name
for g in layers full; do
  jg=$("$px" plan -m tiny -c dgx-h100 -g 1 -B 4 -P fp32 --cuda-graph $g --json)
  jq -e '.backends.cpu.runs and (.backends.cuda.runs | not) and (.backends.cuda.why | test("CUDA graphs"))' <<<"$jg" \
    >/dev/null || fail "plan --cuda-graph $g: $(jq -c .backends <<<"$jg")"
done
# --cuda-graph full: the step's one graph; the plan line says so, the step is shorter than with a graph a layer, a
# saved plan keeps it; a MoE plan needs HybridEP's sync-free exchange, refused otherwise naming both
out=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph full)
grep -q "a CUDA graph a step" <<<"$out" || fail "--cuda-graph full: not on the plan line: $out"
tl=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph layers --json | jq .step_time_s)
jf=$("$px" sim -m tiny -c dgx-h100 -g 1 -B 4 --cuda-graph full --save-plan "$tmp/f.json" --json)
jq -e --argjson tl "$tl" '.step_time_s < $tl' <<<"$jf" >/dev/null ||
  fail "--cuda-graph full: $(jq -c '[.step_time_s, .breakdown.launch_s]' <<<"$jf") against $tl"
[ "$(jq -r .parallel.cuda_graph "$tmp/f.json")" = full ] || fail "the saved plan lost its full graph: $(cat "$tmp/f.json")"
"$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -B 64 --moe-dispatch deepep --cuda-graph full >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q -- "--cuda-graph full with --moe-dispatch deepep.*hint: --moe-dispatch hybridep" "$tmp/err" ||
  fail "--cuda-graph full with deepep: $(cat "$tmp/err")"
"$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -B 64 --moe-dispatch hybridep --cuda-graph full >/dev/null ||
  fail "--cuda-graph full with hybridep: refused"
# without --moe-dispatch, a full graph's plan takes HybridEP's (the dispatcher that runs it)
[ "$("$px" plan -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -B 64 --cuda-graph full --json | jq -r .parallel.moe_dispatch)" = \
  hybridep ] || fail "--cuda-graph full: the dispatcher it resolves to is not hybridep"

# Where the step goes: forward, backward, recomputation, optimizer, bubble, exposed communication by kind, SM
# contention and the waits for the host's launches of the stage that ends last sum to the step time, for plans
# of every kind of parallelism
sumexpr='.breakdown | [.forward_s, .backward_s, .recompute_s, .optimizer_s, .bubble_s, .contention_s, .launch_s,
  (.exposed_s | add)] | add'
for p in "-m llama3-70b -c dgx-h100 -g 64 -t 8 -p 4 -B 128 -e interleaved -v 2 -r full" \
         "-m llama3-8b -c dgx-h100 -g 16 -t 2 -p 4 -B 64 -e zb-h1" \
         "-m llama3-8b -c dgx-h100 -g 16 -z 3 -B 64 -P fp8" \
         "-m llama3-8b -c dgx-h100 -g 16 -t 2 --cp 2 -z 1 -B 8 -s 32768" \
         "-m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 -B 16 -s 4096" \
         "-m llama3-8b -c dgx-h100 -g 8 -z 3 --offload-optimizer cpu -B 8" \
         "-m tiny -c local-cpu -g 4 -t 2 -p 2 -B 8 -P fp32"; do
  # shellcheck disable=SC2086
  "$px" sim $p --json >"$tmp/bd.json" || fail "sim $p"
  jq -e "(($sumexpr) - .step_time_s | fabs) < 1e-9 * .step_time_s and (.breakdown | .forward_s > 0 and .backward_s > 0)" \
    "$tmp/bd.json" >/dev/null || fail "sim $p: the breakdown does not sum to the step: $(jq -c "[.step_time_s, .breakdown]" "$tmp/bd.json")"
done
"$px" sim -m llama3-70b -c dgx-h100 -g 64 -t 8 -p 4 -B 128 -r full --json |
  jq -e '.breakdown | .recompute_s > 0.5 * .forward_s and .bubble_s > 0 and .exposed_s.tp > 0 and .exposed_s.pp > 0' \
  >/dev/null || fail "70B tp 8 pp 4 full recompute: no recomputation, bubble or exposed tp/pp in the breakdown"
"$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -z 1 --sp -B 64 >"$tmp/bd.txt" || fail "sim (breakdown text)"
grep -q "^  where the step goes (stage [0-9], the last to finish):" "$tmp/bd.txt" && grep -qE '^    backward +[0-9.]+ m?s +[0-9.]+%$' "$tmp/bd.txt" &&
  grep -qE '^    exposed tp ' "$tmp/bd.txt" || fail "sim's breakdown: $(cat "$tmp/bd.txt")"
# the heaviest op kinds of the breakdown's stage, the first its largest op_s in JSON
top=$("$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -z 1 --sp -B 64 --json |
  jq -r '.stages[.breakdown.stage].op_s | to_entries | max_by(.value) | .key')
grep -qE "^  heaviest ops     $top [0-9.]+%, [a-z_0-9]+ [0-9.]+%, .* of [0-9.]+ m?s compute \(stage [0-9]\)$" \
  "$tmp/bd.txt" || fail "sim's heaviest ops ($top): $(grep heaviest "$tmp/bd.txt")"
# MFU against the bf16 peak, and against fp8's labelled beside it (2 x 989.4 TFLOP/s: half the bf16 figure)
"$px" sim -m llama3-8b -c dgx-h100 -g 16 -z 3 -B 64 -P fp8 >"$tmp/f8.txt" || fail "sim fp8"
grep -qE '^  model TFLOP/s +[0-9.]+ per GPU: MFU [0-9.]+% of bf16 peak \([0-9.]+% of fp8 peak\), HFU' "$tmp/f8.txt" ||
  fail "fp8's MFU: $(grep TFLOP "$tmp/f8.txt")"
"$px" sim -m llama3-8b -c dgx-h100 -g 16 -z 3 -B 64 -P fp8 --json |
  jq -e '.mfu_peak == "bf16" and .mfu_precision_peak == "fp8" and (.mfu / .mfu_precision - 1.99998 | fabs) < 1e-3 and
         (.model_tflops_per_gpu * 1e12 / .mfu - 989.4e12 | fabs) < 1e9' >/dev/null || fail "fp8's MFU in JSON"

# deterministic: the same input gives the same output
a=$("$px" sim -m gpt3-175b -c dgx-a100 -g 1024 -t 8 -p 8 -B 1536 -r full --json | grep step_time_s)
b=$("$px" sim -m gpt3-175b -c dgx-a100 -g 1024 -t 8 -p 8 -B 1536 -r full --json | grep step_time_s)
[ "$a" = "$b" ] || fail "not deterministic: $a vs $b"
# does not fit: reported, not refused
"$px" sim -m llama3-70b -c dgx-h100 -g 8 -t 8 --json | grep -q '"fits":	false' || fail "70B on one node should not fit"

# fp8: faster than bf16 on an H100, kept by a saved plan with its recipe; refused on an A100
b16=$("$px" sim -m llama3-70b -c dgx-h100 -g 64 -t 8 -B 128 -P bf16 --json | jq .step_time_s) || fail "sim bf16"
f8=$("$px" sim -m llama3-70b -c dgx-h100 -g 64 -t 8 -B 128 -P fp8 --fp8-recipe blockwise --save-plan "$tmp/f8.json" \
  --json | jq .step_time_s) || fail "sim fp8"
awk -v a="$b16" -v b="$f8" 'BEGIN { exit !(b < 0.9 * a) }' || fail "fp8 ($f8 s) not faster than bf16 ($b16 s)"
jq -e '.parallel.precision == "fp8" and .parallel.fp8_recipe == "blockwise"' "$tmp/f8.json" >/dev/null ||
  fail "the saved plan lost fp8's recipe"
[ "$("$px" sim --plan "$tmp/f8.json" --json | jq .step_time_s)" = "$f8" ] || fail "the saved fp8 plan simulates otherwise"
# --fp8-params (fp8 weights, no bf16 copy, fp8 parameter all-gathers): less memory and DP time than the same
# fp8 plan; saved in a plan file; without fp8 it is refused
f8p="-m llama3-70b -c dgx-h100 -g 64 -t 8 -S -z 3 -B 128 -P fp8"
"$px" sim $f8p --json >"$tmp/f8w0.json" && "$px" sim $f8p --fp8-params --json >"$tmp/f8w1.json" || fail "sim --fp8-params"
jq -e -s '.[1].memory.peak_bytes_max < .[0].memory.peak_bytes_max and .[1].comm.dp_s < .[0].comm.dp_s' \
  "$tmp/f8w0.json" "$tmp/f8w1.json" >/dev/null || fail "--fp8-params does not save memory and DP time"
"$px" plan $f8p --fp8-params -o "$tmp/f8w.json" >/dev/null && jq -e '.parallel.fp8_params' "$tmp/f8w.json" >/dev/null &&
  [ "$("$px" sim -f "$tmp/f8w.json" --json | jq .step_time_s)" = "$(jq .step_time_s "$tmp/f8w1.json")" ] ||
  fail "the plan file lost --fp8-params"
err=$("$px" sim -m llama3-8b -c dgx-h100 -g 8 --fp8-params 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "--fp8-params holds .* it needs --precision fp8" || fail "bf16 --fp8-params: $rc $err"
# and for the block-scaled precisions: nvfp4's weights in nvfp4, gathered as packed codes (less memory and DP
# time); mxfp8's gathered in bf16 through the gradient buffer, so ZeRO-1 only
bsp="-m llama3-8b -c gb200-nvl72 -g 8 -z 1 -B 64 -P nvfp4"
"$px" sim $bsp --json >"$tmp/bs0.json" && "$px" sim $bsp --fp8-params --json >"$tmp/bs1.json" || fail "sim nvfp4 --fp8-params"
jq -e -s '.[1].memory.peak_bytes_max < .[0].memory.peak_bytes_max and .[1].comm.dp_s < .[0].comm.dp_s' \
  "$tmp/bs0.json" "$tmp/bs1.json" >/dev/null || fail "nvfp4 --fp8-params does not save memory and DP time"
"$px" plan $bsp --fp8-params | grep -q "nvfp4 (the rest bf16, weights in nvfp4)" || fail "plan does not state nvfp4 weights"
err=$("$px" sim -m llama3-8b -c gb200-nvl72 -g 8 -z 2 -P mxfp8 --fp8-params 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "--fp8-params with --precision mxfp8 .*(hint: --zero 1)" ||
  fail "mxfp8 --fp8-params -z 2: $rc $err"
err=$("$px" sim -m llama3-8b -c dgx-a100 -g 8 -P fp8 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "no fp8 tensor cores" || fail "fp8 on A100: $rc $err"

# gpt-oss-120b: planned (sliding-window layers cost their 128 keys), fits on 64 H100s; 9 layers a stage too (pp 4,
# as Megatron and torchtitan run it: stages start on a windowed or a full layer); CP with the window is refused
"$px" sim -m gpt-oss-120b -c dgx-h100 -g 64 -p 2 --ep 8 -z 1 -B 512 -r selective --json |
  jq -e '.fits and .mfu > 0.2' >/dev/null || fail "gpt-oss-120b on 64 H100s"
# --etp: the default (tp) simulates as without it; etp 1 folds EP over the TP pairs (whole experts, no ETP
# traffic, the plan and json say so); a grid it cannot fold exits 2 naming it; TP without SP is refused
[ "$("$px" sim -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 --etp 2 -B 16 -s 4096 --json | jq .step_time_s)" = \
  "$("$px" sim -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 -B 16 -s 4096 --json | jq .step_time_s)" ] ||
  fail "--etp = tp changes the plan"
"$px" plan -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 --etp 2 -B 16 -s 4096 >"$tmp/etp2.txt" || fail "plan --etp 2"
grep -q "each over etp 2" "$tmp/etp2.txt" && grep -q ", etp [0-9.]* [KMG]*i*B" "$tmp/etp2.txt" || fail "plan --etp 2 text"
"$px" plan -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 --etp 1 -B 16 -s 4096 --json >"$tmp/etp1.json" ||
  [ $? -eq 3 ] || fail "plan --etp 1" # (it does not fit: exit 3)
jq -e '.parallel.etp == 1 and ([.stages[].wire_bytes.etp // 0] | add) == 0' "$tmp/etp1.json" >/dev/null ||
  fail "--etp 1 json: $(jq -c '.parallel' "$tmp/etp1.json")"
"$px" sim -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 --etp 1 -B 16 -s 4096 --json | jq -e '.step_time_s > 0' \
  >/dev/null || fail "sim --etp 1"
# --moe-dispatch deepep: DeepEP's kernels, a token once a rank and once a node (Qwen3-30B-A3B's top 8 of 128 over
# EP 16 on two nodes: 6.5 ranks, 2 nodes, at DeepEP's measured 43 GB/s) against NCCL's copy per (token, expert);
# the choice is saved with the plan
a2a=$("$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 16 --json | jq .step_time_s) || fail "sim a2a"
"$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 16 --moe-dispatch deepep --save-plan "$tmp/dep.json" \
  --json >"$tmp/dep_sim.json" || fail "sim --moe-dispatch deepep"
jq -e --argjson a "$a2a" '.parallel.moe_dispatch == "deepep" and .step_time_s < 0.9 * $a' "$tmp/dep_sim.json" \
  >/dev/null || fail "deepep: $(jq -c '[.parallel.moe_dispatch, .step_time_s]' "$tmp/dep_sim.json") against a2a $a2a"
[ "$("$px" sim --plan "$tmp/dep.json" --json | jq .step_time_s)" = "$(jq .step_time_s "$tmp/dep_sim.json")" ] ||
  fail "the saved deepep plan simulates otherwise"
# --moe-dispatch hybridep: DeepEP's exchange, the same step in bf16; under an fp8 recipe it pads the experts' rows in its
# dispatch, where DeepEP leaves the copies to Megatron-Core's experts: a shorter step
moe=(-m qwen3-30b-a3b -c dgx-h100 -g 16 --ep 16 -z 1 -B 16)
t() { "$px" sim "${moe[@]}" "$@" --json | jq .step_time_s; }
[ "$(t --moe-dispatch hybridep)" = "$(jq .step_time_s "$tmp/dep_sim.json")" ] &&
  awk -v h="$(t --moe-dispatch hybridep -P fp8 --fp8-recipe current)" -v d="$(t --moe-dispatch deepep -P fp8 --fp8-recipe current)" \
    'BEGIN { exit !(h < d) }' || fail "hybridep: bf16 $(t --moe-dispatch hybridep), fp8 against deepep's"
err=$("$px" sim -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --sp --ep 8 --etp 3 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "--etp 3" || fail "--etp 3: $rc $err"
err=$("$px" sim -m mixtral-8x7b -c dgx-h100 -g 16 -t 2 --ep 8 --etp 1 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "need sequence parallelism" || fail "moe tp without sp: $rc $err"
"$px" sim -m gpt-oss-120b -c dgx-h100 -g 64 -p 4 --ep 8 -z 1 -B 512 -r selective --json |
  jq -e '.fits and .mfu > 0.2' >/dev/null || fail "gpt-oss-120b with 9 layers a stage"
err=$("$px" sim -m gpt-oss-120b -c dgx-h100 -g 64 -p 2 --cp 2 --ep 8 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "sliding-window attention" || fail "gpt-oss cp 2: $rc $err"

# The communication line names the groups whose collectives it sums (EP alone here, no TP); the plan's groups on a
# rack-scale NVLink domain say so rather than "node"
"$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 8 --ep 8 | grep -q "^  communication    ep [0-9]" ||
  fail "an EP plan's communication line: $("$px" sim -m qwen3-30b-a3b -c dgx-h100 -g 8 --ep 8 | grep communication)"
"$px" plan -m llama3-8b -c gb200-nvl72 -g 64 -t 2 -S | grep -q "^  tp groups: 2 ranks inside one NVLink domain," ||
  fail "GB200's groups: $("$px" plan -m llama3-8b -c gb200-nvl72 -g 64 -t 2 -S | grep groups)"

# How far to trust it: the validated band of the plan's GPU family, precision, kind and launch (topologies/
# validation_bands.tsv), in the text and the JSON; a full-step CUDA graph's plan takes the graphed runs' band; a
# family, precision, kind or launch no published run validates says so; the table is read from PARALLAX_HOME, and a
# bad one is refused naming the file and line
band=$(awk -F'\t' '$1 == "H100" && $2 == "fp8" && $3 == "dense" && $4 == "eager" {
  printf "%+.1f..%+.1f%% (%d runs)", $6, $7, $5 }' "$PARALLAX_HOME/topologies/validation_bands.tsv")
[ -n "$band" ] || fail "no H100 fp8 dense eager band in the table"
"$px" sim -m llama3-8b -c dgx-h100 -g 8 -P fp8 | grep -qF "validated        H100 fp8 dense, eager: published runs $band" ||
  fail "sim's validated line: $("$px" sim -m llama3-8b -c dgx-h100 -g 8 -P fp8 | grep validated)"
"$px" sim -m llama3-8b -c dgx-h100 -g 8 -P fp8 --json |
  jq -e '.validation | .family == "H100" and .precision == "fp8" and .kind == "dense" and .launch == "eager" and
    .runs > 0 and .min <= .mean and .mean <= .max' >/dev/null || fail "sim --json validation"
gband=$(awk -F'\t' '$1 == "GB300" && $2 == "mxfp8" && $3 == "moe" && $4 == "graph" {
  printf "%+.1f..%+.1f%% (%d runs)", $6, $7, $5 }' "$PARALLAX_HOME/topologies/validation_bands.tsv")
[ -n "$gband" ] || fail "no GB300 mxfp8 MoE graph band in the table"
"$px" sim -m qwen3-30b-a3b -c dgx-gb300 -g 8 --ep 8 -P mxfp8 --moe-dispatch hybridep --cuda-graph full |
  grep -qF "validated        GB300 mxfp8 MoE, full-step graph: published runs $gband" ||
  fail "a full-step graph's band: $("$px" sim -m qwen3-30b-a3b -c dgx-gb300 -g 8 --ep 8 -P mxfp8 \
    --moe-dispatch hybridep --cuda-graph full | grep validated)"
"$px" sim -m mixtral-8x7b -c hgx-h200 -g 8 --ep 8 -P fp8 --json |
  jq -e '.validation | .runs == 0 and .text == "no published run validates H200 fp8 MoE, eager"' >/dev/null ||
  fail "an unvalidated plan: $("$px" sim -m mixtral-8x7b -c hgx-h200 -g 8 --ep 8 -P fp8 --json | jq -c .validation)"
mkdir -p "$tmp/home/topologies" && cp -r "$PARALLAX_HOME/models" "$tmp/home/" &&
  cp "$PARALLAX_HOME/topologies/dgx-h100.json" "$tmp/home/topologies/"
sed 's/^H100\tfp8\tdense\teager\t\([0-9]*\)\t/H100\tfp8\tdense\teager\tmany\t/' \
  "$PARALLAX_HOME/topologies/validation_bands.tsv" >"$tmp/home/topologies/validation_bands.tsv"
err=$(PARALLAX_HOME=$tmp/home "$px" sim -m llama3-8b -c dgx-h100 -g 8 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "validation_bands.tsv:[0-9]*: field 'runs'" || fail "a bad band table: $rc $err"

err=$("$px" sim -m llama3-8b -c dgx-h100 -g 24 -t 3 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "attention heads" || fail "bad tp: $rc $err"
err=$("$px" sim -m llama3-8b -c dgx-h100 -g 16 --trace /nonexistent/dir/t.json 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 1 ] && printf '%s' "$err" | grep -q "cannot create" || fail "unwritable trace: $rc $err"

# --tokens: the time to train at this plan's rate, as the sweep counts it (one function, px_sweep_train_of):
# the same days, GPU-hours, cost, energy and goodput as the sweep's row of the same plan, fixed in every choice;
# by hand, the GPU-hours are the GPUs times the days' hours
plan=(-m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -d 4 -z 1 --sp -b 1 -B 64 -e 1f1b -r none -P bf16)
train=(--tokens 1T --price 2 --price-per-kwh 0.1)
s=$("$px" sim "${plan[@]}" "${train[@]}" --json) || fail "sim --tokens"
w=$("$px" sweep "${plan[@]}" "${train[@]}" --no-prune --json) || fail "sweep of the same plan"
jq -e -n --argjson s "$s" --argjson w "$w" '[$w.plans[] | select(.parallel.zero == 1 and .parallel.tp == 2 and
  .parallel.pp == 2 and .parallel.sp == true and .parallel.mbs == 1 and .parallel.precision == "bf16")][0].time_to_train
  as $r | $r != null and ([ "days", "gpu_hours", "cost_usd", "energy_mwh", "energy_cost_usd", "goodput" ] |
  all(. as $k | ($s.time_to_train[$k] - $r[$k]) | fabs <= 1e-9 * ($r[$k] | fabs) + 1e-12))' >/dev/null ||
  fail "sim's time to train differs from the sweep's: $(jq -c .time_to_train <<<"$s")"
jq -e '.time_to_train.tokens == 1e12 and ((.time_to_train.gpu_hours - 16 * 24 * .time_to_train.days) | fabs) < 1e-6 and
  .time_to_train.days > 1e12 / .tokens_per_s / 86400 and .time_to_train.goodput < 1' <<<"$s" >/dev/null ||
  fail "--tokens by hand: $(jq -c .time_to_train <<<"$s")"
"$px" sim "${plan[@]}" "${train[@]}" | grep -q "^  to train         1.00 T tokens: .* days, goodput" ||
  fail "the summary's time to train"
err=$("$px" sim "${plan[@]}" --price 2 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "price needs --tokens" || fail "--price alone: $rc $err"
err=$("$px" sim -m tiny -c local-cpu -g 1 --tokens 1B --price-per-kwh 0.1 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "gives no gpu.power_w" || fail "--price-per-kwh without power: $rc $err"

# what of the model no plan has, said where the plan is: DeepSeek-V3's MTP module (its FLOPs: test_model.c)
jq -e 'has("not_planned") | not' "$tmp/s.json" >/dev/null || fail "llama3-8b: something not planned"
out=$("$px" sim -m deepseek-v3 -c dgx-h100 -g 1024 -t 2 -p 8 --sp --ep 64 -B 8192 -b 1 -z 1) || fail "sim deepseek-v3"
grep -q "not planned: deepseek-v3's 1 MTP module" <<<"$out" || fail "deepseek-v3: the MTP module not said: $out"
"$px" sim -m deepseek-v3 -c dgx-h100 -g 1024 -t 2 -p 8 --sp --ep 64 -B 8192 -b 1 -z 1 --json |
  jq -e '.not_planned.mtp_modules == 1 and .not_planned.mtp_forward_flops_per_token > 3e9 and
         (.not_planned.mtp_share_of_model_flops - 0.038 | fabs) < 0.001' >/dev/null || fail "deepseek-v3: not_planned"
# ... and planned with --mtp-layers 1: nothing left out, the last stage's step longer, its model FLOPs more
ds=(-m deepseek-v3 -c dgx-h100 -g 1024 -t 2 -p 8 --sp --ep 64 -B 8192 -b 1 -z 1 --json)
"$px" sim "${ds[@]}" >"$tmp/ds0.json" && "$px" sim "${ds[@]}" --mtp-layers 1 >"$tmp/ds1.json" || fail "sim --mtp-layers 1"
jq -e -n --slurpfile a "$tmp/ds0.json" --slurpfile b "$tmp/ds1.json" \
  '($b[0] | has("not_planned") | not) and $b[0].step_time_s > $a[0].step_time_s and
   $b[0].model_tflops_per_gpu * $b[0].step_time_s > $a[0].model_tflops_per_gpu * $a[0].step_time_s' >/dev/null ||
  fail "--mtp-layers 1: $(jq -c '{step_time_s, model_tflops_per_gpu, not_planned}' "$tmp/ds0.json" "$tmp/ds1.json")"
# model show counts the same FLOPs apart from the model's
"$px" model show deepseek-v3 --json | jq -e '.flops_per_token.forward_mtp > 3e9' >/dev/null &&
  "$px" model show llama3-8b --json | jq -e '.flops_per_token | has("forward_mtp") | not' >/dev/null ||
  fail "model show: forward_mtp"

finish
