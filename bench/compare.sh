#!/usr/bin/env bash
# Prediction beside measurement on this machine: calibrate, then run plans
# of small models on one and two ranks with --profile, and set the
# simulator's step time and peak memory beside the measured ones.
# Usage: bench/compare.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
px=$build/parallax
export PARALLAX_HOME=${PARALLAX_HOME:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each plan is predicted from a calibration with its own number of ranks on
# the machine, as `run` will run it: a rank alone has the memory bandwidth,
# caches and clock boost that two busy ranks share.
for n in 1 2; do
  mpirun -np "$n" "$px" calibrate --output "$tmp/calib$n.json" >"$tmp/calib.txt" 2>/dev/null
  echo "$n rank(s): $(tail -1 "$tmp/calib.txt")"
done
plans=(
  "1|-m small -B 8"
  "1|-m small -B 8 -r full"
  "1|-m small-llama -B 8 -b 2"
  "1|-m small -B 8 --attention unfused"
  "2|-m small -B 8 -t 2"
  "2|-m small -B 8 -t 2 -S"
  "2|-m small -B 8 -p 2"
  "2|-m small -B 8 -p 2 -e gpipe"
  "2|-m small -B 8 -p 2 -e interleaved -v 2"
  "2|-m small -B 8 -d 2"
  "2|-m small -B 8 -d 2 -z 1"
  "2|-m small -B 8 -d 2 -z 2"
  "2|-m small -B 8 -d 2 -z 3"
  "2|-m small-llama -B 8 -d 2 -r selective --attention unfused"
  "2|-m small-llama -B 8 -p 2 -b 2"
  "2|-m small-llama -B 8 -t 2 -r full"
)
printf "# %-52s %10s %10s %8s %12s %12s %7s\n" plan pred_ms meas_ms error pred_MiB alloc_MiB mem_err
errs=()
for entry in "${plans[@]}"; do
  n=${entry%%|*}
  flags=${entry#*|}
  # shellcheck disable=SC2086
  mpirun -np "$n" "$px" run --backend cpu $flags --steps 6 --profile "$tmp/p.json" --json >"$tmp/run.json" 2>/dev/null
  # shellcheck disable=SC2086
  "$px" compare --profile "$tmp/p.json" $flags -c "$tmp/calib$n.json" -g "$n" --json >"$tmp/cmp.json"
  read -r pred meas err < <(python3 - "$tmp/cmp.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["step"]
print(s["predicted_s"] * 1e3, s["measured_s"] * 1e3, s["error"])
PY
)
  read -r mp ma < <(python3 - "$tmp/run.json" <<'PY'
import json, sys
text, dec, at, r = open(sys.argv[1]).read(), json.JSONDecoder(), 0, None
while text[at:].strip():  # a JSON object a step, then the run's: the last one
    r, end = dec.raw_decode(text, at)
    at = end + len(text[end:]) - len(text[end:].lstrip())
print(r["predicted_peak_bytes"] / 2**20, r["peak_bytes"] / 2**20)
PY
)
  printf "%-54s %10.1f %10.1f %+7.1f%% %12.2f %12.2f %+6.2f%%\n" "np $n $flags" "$pred" "$meas" \
    "$(python3 -c "print($err*100)")" "$mp" "$ma" "$(python3 -c "print(($mp-$ma)/$ma*100)")"
  errs+=("$err")
done
python3 - "${errs[@]}" <<'PY'
import sys
e = sorted(abs(float(x)) for x in sys.argv[1:])
n = len(e)
med = e[n // 2] if n % 2 else (e[n // 2 - 1] + e[n // 2]) / 2
print("# %d plans: median absolute step-time error %.1f%%, worst %.1f%%, %d within 10%%"
      % (n, 100 * med, 100 * e[-1], sum(1 for x in e if x <= 0.10)))
PY
