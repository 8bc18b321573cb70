#!/usr/bin/env bash
# Calibration and comparison end to end on a tiny model (the table's shape
# and consistency, not timing accuracy, which is a benchmark: bench/compare.sh).
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

mpirun -np 2 "$px" calibrate --quick -o "$tmp/cal.json" >"$tmp/cal.txt" 2>"$tmp/err" || fail "calibrate: $(cat "$tmp/err")"
grep -q "^calibrated: .* -> $tmp/cal.json" "$tmp/cal.txt" || fail "no summary line naming the file"
# a cluster file is not a plan: -o is --output, and --save-plan is refused with the new name
"$px" calibrate --quick --output "$tmp/cal2.json" --json >"$tmp/cal2.out" 2>"$tmp/err" || fail "calibrate --output: $(cat "$tmp/err")"
jq -e '.gpu.name' "$tmp/cal2.json" >/dev/null && jq -e '.gpu.name' "$tmp/cal2.out" >/dev/null || fail "--output file or --json"
err=$("$px" calibrate --quick --save-plan "$tmp/cal3.json" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "--output" && [ ! -e "$tmp/cal3.json" ] || fail "--save-plan: $rc $err"
err=$("$px" calibrate --quick 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "-o, --output FILE" || fail "no output: $rc $err"
"$px" calibrate --help | grep -q -- "-o, --output FILE" || fail "help lacks -o, --output"
# --backend cuda alone takes a plan and --sustain-s; an unknown backend is named
for bad in "-m tiny|a plan (-m, --plan): only with --backend cuda" "--sustain-s 5|--sustain-s: only with --backend cuda" \
  "--backend gpu|--backend: 'gpu' is not one of cpu|cuda"; do
  err=$("$px" calibrate --quick -o "$tmp/bad.json" ${bad%%|*} 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "${bad#*|}" && [ ! -e "$tmp/bad.json" ] || fail "${bad%%|*}: $rc $err"
done
# without the CUDA backend (or a GPU) it says so; the emulator measures one (tests/gpu/check.sh)
err=$("$px" calibrate --backend cuda --quick -o "$tmp/gpu.json" 2>&1 >/dev/null); rc=$?
if echo "$err" | grep -q "no CUDA backend"; then
  [ "$rc" -eq 2 ] || fail "calibrate --backend cuda without the backend: $rc $err"
elif echo "$err" | grep -q "no CUDA device"; then
  [ "$rc" -ne 0 ] || fail "calibrate --backend cuda without a device: $rc $err"
elif [ "$rc" -ne 0 ]; then
  fail "calibrate --backend cuda: $rc $err"
fi
grep -q "busbw_GB/s" "$tmp/cal.txt" || fail "no collective table"
# every collective the CPU backend calls is a measured curve the simulator reads
[ "$(jq -r '[.intra_node.busbw[].coll] | unique | join(",")' "$tmp/cal.json")" = \
  "all_gather,all_reduce,alltoall,reduce_scatter,sendrecv" ] || fail "calibrated curves: $(jq -c '[.intra_node.busbw[].coll] | unique' "$tmp/cal.json")"
jq -e '[.intra_node.busbw[] | select(.ranks == 2 and .nodes == 1 and .gb_per_s > 0)] | length >= 25' "$tmp/cal.json" >/dev/null ||
  fail "calibrated curve points"
[ "$(grep -c '^ *[0-9]\+ \+[0-9]\+ \+float' "$tmp/cal.txt")" -ge 5 ] || fail "collective table too short"
"$px" topology show "$tmp/cal.json" >"$tmp/show.txt" 2>&1 || fail "the calibrated file does not load: $(cat "$tmp/show.txt")"
grep -q "measured table given" "$tmp/show.txt" || fail "no GEMM table in the calibrated file"
grep -q '"kernel_rates"' "$tmp/cal.json" || fail "no kernel rates"
grep -q '"kind":	"layernorm\|"kind":	"norm"' "$tmp/cal.json" || fail "no norm rate"

for cfg in "1|-p 1" "2|-p 2" "2|-t 2 -S" "2|-d 2 -z 1"; do
  n=${cfg%%|*}
  flags=${cfg#*|}
  # shellcheck disable=SC2086
  mpirun -np "$n" "$px" run --backend cpu -m tiny -B 4 --steps 3 $flags --profile "$tmp/p.json" >/dev/null 2>"$tmp/err" ||
    { fail "run $flags: $(cat "$tmp/err")"; continue; }
  # shellcheck disable=SC2086
  "$px" compare --profile "$tmp/p.json" -m tiny -B 4 $flags -c "$tmp/cal.json" -g "$n" --json >"$tmp/c.json" 2>"$tmp/err" ||
    { fail "compare $flags: $(cat "$tmp/err")"; continue; }
  # every stage has every row; step error = (predicted - measured) / measured; rows add up to the step
  jq -e '.step as $s | ($s.error - ($s.predicted_s - $s.measured_s) / $s.measured_s | fabs) <= 1e-9
    and (.stages | length) >= 1
    and all(.stages[]; (.rows | length) == 10 and all(.rows[]; .predicted_s >= 0 and .measured_s >= 0)
        and (([.rows[].measured_s] | add) - $s.measured_s | fabs) <= 1e-6 * $s.measured_s + 1e-12)' "$tmp/c.json" \
    >/dev/null || fail "compare $flags: inconsistent table: $(jq -c '[.step, (.stages[] | [.rows[].measured_s])]' "$tmp/c.json")"
  "$px" compare --profile "$tmp/p.json" -m tiny -B 4 $flags -c "$tmp/cal.json" -g "$n" 2>"$tmp/note" |
    grep -q "step time: predicted" || fail "compare $flags: human table"
  # a 2-rank calibration of a 1-rank run says so; a matching one says nothing
  if [ "$n" = 1 ]; then
    grep -q "measured with 2 ranks on the machine and this plan runs 1.*mpirun -np 1" "$tmp/note" ||
      fail "compare $flags: no note of the calibration's rank count: $(cat "$tmp/note")"
  else
    [ ! -s "$tmp/note" ] || fail "compare $flags: unexpected note: $(cat "$tmp/note")"
  fi
done

# A profile of another plan is refused.
mpirun -np 2 "$px" run --backend cpu -m tiny -B 4 --steps 2 -p 2 --profile "$tmp/p2.json" >/dev/null 2>&1
err=$("$px" compare --profile "$tmp/p2.json" -m tiny -B 4 -t 2 -c "$tmp/cal.json" -g 2 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "another plan" || fail "mismatched profile: $rc $err"
err=$("$px" compare -m tiny -c "$tmp/cal.json" -g 2 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q -- "--profile" || fail "no profile: $rc $err"
err=$("$px" compare --profile "$tmp/cal.json" -m tiny -c "$tmp/cal.json" -g 2 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "not a parallax profile" || fail "not a profile: $rc $err"

finish
