#!/usr/bin/env bash
# scripts/gpu-check.sh in its emulator mode, as CI runs it (the GPU machine runs
# the same steps with real shapes): every step it can run here passes, the six
# files it leaves parse, the calibrated cluster file loads and cites its
# measurements, the runs have tokens/s and both predictions; and the refusals of
# the script and of calibrate --backend cuda. Uses the emulator that gpu_emu
# builds (EMU_BUILD: its build directory), bringing it up to date if needed.
#   check.sh PARALLAX EMU_BUILD REPO
set -u
px=$1
emu_build=$2
root=$3
source "$(dirname "$0")/../tools/clitest.sh"
export PARALLAX_HOME=$root ASAN_OPTIONS=detect_leaks=0
check=$root/scripts/gpu-check.sh

bash "$check" "$tmp/out" --emu --build-dir "$emu_build" --budget-s 400 >"$tmp/check.out" 2>"$tmp/check.err" ||
  fail "gpu-check --emu: $(tail -n 5 "$tmp/check.err")"
o=$tmp/out
for f in summary.md summary.json cluster-fragment.json calibrate.txt env.txt details.tar.gz; do
  [ -s "$o/$f" ] || fail "no $f"
done
[ "$(find "$o" -type f | wc -l)" -le 8 ] || fail "more than 8 files in OUT_DIR: $(ls "$o")"
jq -e . "$o/summary.json" >/dev/null || fail "summary.json does not parse"
# every step ran or says why not
[ "$(jq -r '[.steps[] | select(.status != "ok" and .status != "skipped")] | length' "$o/summary.json")" = 0 ] ||
  fail "steps: $(jq -c '[.steps[] | {name, status, note}]' "$o/summary.json")"
[ "$(jq -r '[.steps[] | select(.status == "ok") | .name] | join(",")' "$o/summary.json")" = \
  "env,build,calibrate,run-tiny-gpt,predict-tiny-gpt,run-tiny,predict-tiny" ] ||
  fail "steps that ran: $(jq -c '[.steps[] | [.name, .status]]' "$o/summary.json")"
jq -e '.mode == "emu" and (.suggested_dir | startswith("bench/gpu/emulated-"))' "$o/summary.json" >/dev/null ||
  fail "mode or suggested directory: $(jq -c '{mode, suggested_dir}' "$o/summary.json")"
grep -q "Emulated GPU" "$o/summary.md" || fail "summary.md does not say the GPU was emulated"
# the calibration: bf16 and fp8 GEMMs (the grid and both models' layers), attention both ways, memory, sustained
jq -e '.calibration | (.gemm | map(.dtype) | unique) == ["bf16", "fp8"] and (.gemm | length) >= 16
  and ([.gemm[] | select(.tflops > 0)] | length) == (.gemm | length)
  and (.attention | map(.pass) | unique) == ["bwd", "fwd"] and .memory_gb_per_s > 0
  and .sustained_share >= 0.1 and .sustained_share <= 1' "$o/summary.json" >/dev/null ||
  fail "calibration: $(jq -c '.calibration | del(.gemm)' "$o/summary.json")"
# the GEMMs on several streams, beside one stream's, in the summary
jq -e '(.gemm_streams | length) == 4 and (.gemm_streams[1] | test("^4 bf16 GEMMs .* on 2 streams: .* one stream'"'"'s$"))
  and (.gemm_streams[3] | test("^4 fp8 GEMMs .* on 2 streams: .* one stream'"'"'s$"))' \
  "$o/summary.json" >/dev/null && grep -q "^GEMMs on several streams" "$o/summary.md" ||
  fail "GEMMs on streams: $(jq -c .gemm_streams "$o/summary.json")"
# tiny-gpt's qkv projection (2 x 32 tokens, 3 x 64 wide) and its weight gradient are table rows
jq -e '[.gpu.gemm.table[] | select(.m == 64 and .n == 192 and .k == 64 and .dtype == "bf16")] | length == 1' \
  "$o/cluster-fragment.json" >/dev/null || fail "no row for tiny-gpt's qkv GEMM"
jq -e '[.gpu.gemm.table[] | select(.m == 192 and .n == 64 and .k == 64)] | length == 2' \
  "$o/cluster-fragment.json" >/dev/null || fail "no rows for tiny-gpt's qkv weight gradient"
# the promoted fp8 sums' share of the fast rate (the table's fp8 points), from the twin probes
jq -e '.gpu.gemm.fp8_split_accumulation_share > 0 and .gpu.gemm.fp8_split_accumulation_share <= 1' \
  "$o/cluster-fragment.json" >/dev/null || fail "no fp8 split accumulation share: $(jq -c '.gpu.gemm | del(.table)' "$o/cluster-fragment.json")"
for field in gpu.gemm.table gpu.gemm.fp8_split_accumulation_share gpu.attention gpu.memory_efficiency gpu.sustained_share; do
  jq -r --arg f "$field" '.sources[$f]' "$o/cluster-fragment.json" | grep -q "^measured by parallax calibrate on CPU emulation" ||
    fail "$field: $(jq -r --arg f "$field" '.sources[$f]' "$o/cluster-fragment.json")"
done
# the base's (dgx-h100's) FlashAttention-2 curves stay beside the measured own kernel's (`attention` flash2)
jq -e '(.gpu.attention_flash2 | length) == 4 and .gpu.attention_kernel == null' "$o/cluster-fragment.json" >/dev/null ||
  fail "FlashAttention-2 curves: $(jq -c '.gpu | {attention_kernel, attention_flash2}' "$o/cluster-fragment.json")"
"$px" topology show "$o/cluster-fragment.json" >"$tmp/show.txt" 2>&1 || fail "the calibrated file does not load: $(cat "$tmp/show.txt")"
grep -q "^calibrated: GPU CPU emulation" "$o/calibrate.txt" || fail "calibrate.txt: $(tail -n 1 "$o/calibrate.txt")"
# each run: measured tokens/s, the preset's and the calibrated file's predictions, compare's rows
jq -e '.runs | length == 2 and all(.measured.tokens_per_s > 0 and .measured.mfu > 0
  and .predicted.preset.step_time_s > 0 and .predicted.calibrated.step_time_s > 0
  and (.compare.stages[0].rows | length) == 10)' "$o/summary.json" >/dev/null ||
  fail "runs: $(jq -c '[.runs[] | del(.compare)]' "$o/summary.json")"
tar tzf "$o/details.tar.gz" | grep -q "runs/tiny.profile.json" || fail "details.tar.gz lacks the profiles"
echo "ok: gpu-check --emu: $(jq -r '[.steps[] | "\(.name) \(.status)"] | join(", ")' "$o/summary.json")"

# refusals (exit 2, nothing written): an OUT_DIR with results in it, a bad budget, no OUT_DIR
err=$(bash "$check" "$o" --emu 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "not an empty directory" || fail "non-empty OUT_DIR: $rc $err"
err=$(bash "$check" "$tmp/new" --dry-run --budget-s 5 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q -- "--budget-s: '5'" && [ ! -e "$tmp/new" ] || fail "small budget: $rc $err"
err=$(bash "$check" --emu 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "OUT_DIR is required" || fail "no OUT_DIR: $rc $err"
bash "$check" --help | grep -q "^  scripts/gpu-check.sh OUT_DIR" || fail "--help"

# calibrate --backend cuda measures one GPU in one process
emu_px=$emu_build/emu/parallax_emu
err=$(mpirun -np 2 "$emu_px" calibrate --backend cuda --quick -o "$tmp/two.json" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "backend cuda measures one GPU in one process, not 2 ranks" &&
  [ ! -e "$tmp/two.json" ] || fail "cuda calibration on 2 ranks: $rc $err"
# a measurement that fails (the flash kernels take head dims up to 256) is counted and left out;
# the rest are written
sed 's/"heads": 4,/"heads": 4, "head_dim": 320,/; s/"name": "tiny-gpt"/"name": "tiny-gpt-d320"/' \
  "$root/models/tiny-gpt.json" >"$tmp/d320.json"
"$emu_px" calibrate --backend cuda --quick --sustain-s 0.2 -o "$tmp/d320-cal.json" -m "$tmp/d320.json" --seq 32 -b 2 \
  >"$tmp/d320.out" 2>"$tmp/d320.err" || fail "calibrate with a head dim the kernels refuse: $(tail -n 3 "$tmp/d320.err")"
grep -q "calibrate: 4 measurements failed, left out of the file; the first: .*320" "$tmp/d320.err" ||
  fail "failed measurements not reported: $(grep -v WARNING "$tmp/d320.err" | tail -n 3)"
jq -e '(.gpu.attention | map(.head_dim) | unique) == [16] and (.gpu.gemm.table | length) > 8' "$tmp/d320-cal.json" \
  >/dev/null || fail "the measurements that ran: $(jq -c '[.gpu.attention[] | .head_dim]' "$tmp/d320-cal.json")"
echo "ok: a failing measurement is reported and the rest written"
# few-tile GEMMs on several streams beside the same on one (what Transformer Engine's experts and TP chunks run)
grep -q "calibrate: 4 bf16 GEMMs 64x64x64 (1 tile of 128 x 256 each[ 0-9a-zS]*) on 1 stream: [0-9.e+-]* TFLOP/s$" \
  "$tmp/d320.err" && grep -q "calibrate: 4 bf16 GEMMs 64x64x64 .* on 2 streams: [0-9.e+-]* TFLOP/s, [0-9.]*x one stream's" \
  "$tmp/d320.err" || fail "GEMMs on streams not reported: $(grep -i stream "$tmp/d320.err" | tail -n 3)"
echo "ok: GEMMs on several streams measured beside one stream's"
finish
