#!/usr/bin/env bash
# Runs each libFuzzer harness of tests/fuzz for SECONDS (default 60) over a
# seed corpus (tests/fuzz/seeds, the presets, tests/data and tests/bad) with
# its dictionary (tests/fuzz/dict), two at a time, and says how far each got
# (edges covered by the seeds, then at the end). A crash, leak, hang or
# failed check is reported with the input that caused it (kept in
# BUILD_DIR/fuzz-crashes; add it to tests/bad as a regression case) and fails
# the run. The grown corpus stays in BUILD_DIR/fuzz-corpus, so that the next run
# (an hour's `make fuzz-long` after brief ones) starts where the last ended.
# Usage: scripts/fuzz.sh BUILD_DIR [SECONDS]
set -u
build=$(cd "$1" && pwd)
secs=${2:-60}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/fuzz-crashes"

seeds() { # harness -> seed files
  case $1 in
    model) echo "$src"/models/*.json "$src"/tests/data/hf/*.json "$src"/tests/bad/*.json ;;
    cluster) echo "$src"/topologies/*.json "$src"/tests/bad/cluster_*.json "$src"/tests/bad/empty.json ;;
    planfile) echo "$src"/tests/fuzz/seeds/planfile/* "$src"/tests/bad/truncated.json ;;
    profile) echo "$src"/tests/fuzz/seeds/profile/* "$src"/tests/bad/profile_*.json ;;
    args) echo "$src"/tests/fuzz/seeds/args/* ;;
    ckpt) echo "" ;; # the harness writes a valid checkpoint into its corpus (PX_FUZZ_SEED_DIR)
    data) echo "$src"/tests/fuzz/seeds/data/* "$src"/tests/bad/garbage.bin ;;
  esac
}

dicts() { # harness -> its dictionaries: JSON's syntax first for the JSON readers
  local d=$src/tests/fuzz/dict
  case $1 in
    model | cluster | profile | ckpt) echo "$d/json.dict $d/$1.dict" ;;
    planfile) echo "$d/json.dict $d/model.dict $d/cluster.dict $d/planfile.dict" ;;
    *) echo "$d/$1.dict" ;;
  esac
}

run_one() { # harness -> 0 when no finding
  local h=$1 bin=$build/tests/fuzz_$1 corpus=$build/fuzz-corpus/$1 # kept: the next run goes on from it
  mkdir -p "$corpus"
  for f in $(seeds "$h"); do [ -f "$f" ] && cp "$f" "$corpus/"; done
  # shellcheck disable=SC2046
  cat $(dicts "$h") >"$work/$h.dict"
  (cd "$work" && PX_FUZZ_SEED_DIR=$corpus PARALLAX_HOME=$src ASAN_OPTIONS=detect_leaks=1 \
    "$bin" "$corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -dict="$work/$h.dict" \
    -artifact_prefix="$build/fuzz-crashes/$h-" -print_final_stats=1 >"$work/$h.log" 2>&1)
  local rc=$?
  local runs cov0 cov1
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$h.log" | grep -o '[0-9]*$')
  cov0=$(grep -m1 -o 'INITED cov: [0-9]*' "$work/$h.log" | grep -o '[0-9]*$')
  cov1=$(grep -o ' cov: [0-9]*' "$work/$h.log" | tail -1 | grep -o '[0-9]*$')
  if [ "$rc" -ne 0 ]; then
    echo "FAIL fuzz_$h: a finding after ${runs:-?} runs (input in $build/fuzz-crashes):"
    grep -m5 -E 'ERROR|SUMMARY|check failed|Test unit written' "$work/$h.log"
    return 1
  fi
  echo "ok   fuzz_$h: ${runs:-?} runs in ${secs} s, coverage ${cov0:-?} -> ${cov1:-?} edges, $(ls "$corpus" | wc -l) corpus entries, no finding"
}

harnesses=()
for h in model cluster planfile profile args ckpt data; do
  [ -x "$build/tests/fuzz_$h" ] && harnesses+=("$h")
done
[ ${#harnesses[@]} -gt 0 ] || { echo "no harnesses in $build/tests (configure with -DPX_FUZZ=ON and clang)"; exit 1; }
fails=0
for ((i = 0; i < ${#harnesses[@]}; i += 2)); do
  run_one "${harnesses[i]}" >"$work/r$i" &
  p1=$!
  p2=
  if [ $((i + 1)) -lt ${#harnesses[@]} ]; then
    run_one "${harnesses[i + 1]}" >"$work/r$((i + 1))" &
    p2=$!
  fi
  wait "$p1" || fails=$((fails + 1))
  [ -n "$p2" ] && { wait "$p2" || fails=$((fails + 1)); }
  cat "$work/r$i"; [ -f "$work/r$((i + 1))" ] && cat "$work/r$((i + 1))"
done
[ "$fails" -eq 0 ]
