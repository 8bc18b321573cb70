#!/usr/bin/env bash
# parallax run's log: a line per step as it goes (loss, gradient norm, step
# time, tokens/s, model TFLOP/s per GPU, peak memory), flushed, so a run that
# dies with its stdout in a file keeps every step it finished; --json: a JSON
# object a step, then the run's; the summary gives model TFLOP/s and MFU.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny -p 2 -B 8)

# A rank killed in the 4th of 6 steps (PX_FAULT_KILL, as launch's tests do): steps 1-3 are in the file.
PX_FAULT_KILL=rank=1,step=3,op=0 mpirun -np 2 "$px" run "${plan[@]}" --steps 6 >"$tmp/killed.txt" 2>"$tmp/killed.err"
rc=$?
[ "$rc" -ne 0 ] || fail "the killed run exited 0"
n=$(grep -c '^step ' "$tmp/killed.txt")
[ "$n" -eq 3 ] || fail "the killed run's log kept $n step lines, not 3: $(cat "$tmp/killed.txt")"
grep -qE '^step 3/6 \| loss [0-9.]+ \| grad norm [0-9.e+-]+ \| [0-9.]+ [mu]?s \| [0-9]+ tokens/s \| [0-9.e+-]+ TFLOP/s/GPU \| peak [0-9.]+ [KMG]?i?B$' \
  "$tmp/killed.txt" || fail "step line: $(sed -n 3p "$tmp/killed.txt")"

# Text: one line per step, then the summary with model TFLOP/s per GPU and MFU against a named peak.
mpirun -np 2 "$px" run "${plan[@]}" --steps 3 >"$tmp/run.txt" 2>"$tmp/err" || fail "run: $(cat "$tmp/err")"
[ "$(grep -c '^step [123]/3 | loss' "$tmp/run.txt")" -eq 3 ] || fail "run's step lines: $(cat "$tmp/run.txt")"
grep -qE '^backend cpu, 2 ranks .* model TFLOP/s per GPU, MFU [0-9.]+% of fp32 peak' "$tmp/run.txt" ||
  fail "run's summary: $(grep '^backend' "$tmp/run.txt")"

# --json: three one-line objects, then the run's object, whose losses are the lines'.
mpirun -np 2 "$px" run "${plan[@]}" --steps 3 --json >"$tmp/run.json" 2>"$tmp/err" || fail "run --json: $(cat "$tmp/err")"
[ "$(head -3 "$tmp/run.json" | jq -c 'select(.step and .loss and .grad_norm > 0 and .step_time_s > 0 and
   .tokens_per_s > 0 and .model_tflops_per_gpu > 0 and .mfu > 0 and .peak_bytes > 0) | .step' | tr '\n' ,)" = "1,2,3," ] ||
  fail "run --json's step lines: $(head -3 "$tmp/run.json")"
steps=$(head -3 "$tmp/run.json" | jq -r .loss | tr '\n' , | sed 's/,$//')
jq -se --argjson l "[$steps]" 'length == 4 and last.losses == $l and last.mfu > 0 and last.mfu_peak == "fp32"' \
  "$tmp/run.json" >/dev/null || fail "run --json: the run's object: $(tail -c 300 "$tmp/run.json")"
finish
