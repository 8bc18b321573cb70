#!/usr/bin/env bash
# The parity matrix (docs/parity.md, tests/parity/matrix.sh) on the cpu
# backend: each cell the planner says it runs is run (3 steps, gbs 8) and
# must equal its model's one-rank run of the same micro-batch size (a mixture
# of experts' load-balancing loss is the micro-batch's, as in Megatron-Core):
# fp32 losses within 1e-5 and the
# first-step gradients (px_gradcmp), a quantized precision's losses within
# its TOL of the one-rank run in that precision; every stage's measured peak is
# its plan's (fp8's with the cached weight copies the plan holds). Each cell it says the
# cpu backend refuses is refused by parallax run before the first step (exit
# 2) with the planner's reason: the executor's refusals are predictable from
# the plan. The cuda column is the planner's alone (no device here; the
# emulator, tests/gpu/emu, is no quick test).
# make test runs each choice alone (and each model); `make test-parity`
# (PX_PARITY=full) every pair, up to 12 ranks a cell. Then sweep
# --runnable-by cpu|cuda: what it ranks, plan --json says that backend runs.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
export PARALLAX_HOME=${PARALLAX_HOME:-$src}
mode=${PX_PARITY:-singles}
[ "$mode" = full ] && which=all || which=singles
# a quantized precision against the one-rank run in it, 3 steps (absolute, nats): DP ranks and micro-batches take
# their own amaxes (fp8, nvfp4's per-tensor scale), so the scales differ from one rank's, and nvfp4's stochastic
# rounding draws its own numbers on each rank; measured worst: docs/parity.md
declare -A TOL=([fp8]=0.005 [mxfp8]=0.005 [nvfp4]=0.005)
declare -A worst=([fp8]=0 [mxfp8]=0 [nvfp4]=0)

bash "$src/tests/parity/matrix.sh" cells "$px" "$which" >"$tmp/cells.tsv" || { fail "matrix.sh cells"; finish; exit; }
[ "$(wc -l <"$tmp/cells.tsv")" -ge 30 ] || fail "only $(wc -l <"$tmp/cells.tsv") cells"

run() { # out model ranks flags...
  local out=$1 model=$2 n=$3
  shift 3
  timeout 300 mpirun -np "$n" "$px" run --backend cpu -m "$model" -B 8 --steps 3 --json --dump-grads "$tmp/$out.bin" \
    "$@" >"$tmp/$out.json" 2>"$tmp/err.txt" </dev/null # (mpirun would read the cells)
}

# the one-rank references of each model, precision, micro-batch size and MTP module a cell runs
ref() { # model precision mbs mtp(0|1): the reference's name, run once
  local name="ref-$1-$2-$3-$4" extra=(-b "$3")
  [ "$2" != fp32 ] && extra+=(-P "$2")
  [ "$4" = 1 ] && extra+=(--mtp-layers 1)
  if [ ! -f "$tmp/$name.json" ]; then
    run "$name" "$1" 1 "${extra[@]}" || { fail "$1 one rank ${extra[*]}: $(head -3 "$tmp/err.txt")"; return 1; }
  fi
  echo "$name"
}

ran=0 refused=0 invalid=0
declare -A seen_why
while IFS=$'\037' read -r label model n flags cpu why _ _ prec; do # (a tab would run empty fields together)
  case $cpu in
    invalid) invalid=$((invalid + 1)); continue ;;
    refused)
      refused=$((refused + 1))
      [ -n "${seen_why[$why]:-}" ] && [ "$mode" != full ] && continue # make test: each reason once
      seen_why[$why]=1
      # shellcheck disable=SC2086 # the flags split into words
      err=$(timeout 120 mpirun -np "$n" "$px" run --backend cpu -m "$model" -B 8 --steps 1 $flags 2>&1 >/dev/null </dev/null)
      rc=$?
      want=${why%%\`*} # up to the first field named (the CLI names its flag)
      [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -qF -- "cannot run this plan: ${want:0:60}" ||
        fail "$label ($model $flags): the planner refuses it ($why); run: exit $rc: $(printf '%s' "$err" | grep parallax: | head -1)"
      continue
      ;;
  esac
  [ "$n" -le 12 ] || { echo "skip: $label: $n ranks"; continue; }
  mbs=1 mtp=0 # the precision: the matrix's column
  [[ " $flags " =~ .*\ -b\ ([0-9]+)\  ]] && mbs=${BASH_REMATCH[1]}
  [[ " $flags " == *" --mtp-layers 1 "* ]] && mtp=1
  r=$(ref "$model" "$prec" "$mbs" "$mtp") || continue
  ran=$((ran + 1))
  # shellcheck disable=SC2086
  if ! run cell "$model" "$n" $flags; then
    fail "$label ($model $flags): the planner says the cpu backend runs it: $(grep -v '^---\|^ *$' "$tmp/err.txt" | head -2)"
    continue
  fi
  if [ "$prec" = fp32 ]; then
    same_run "$label ($model $flags)" "$tmp/$r" "$tmp/cell" >"$tmp/same.txt"
    grep -v '^ok:' "$tmp/same.txt" # its failures (counted in this shell)
    continue
  fi
  gap=$(worst_gap "$(losses "$tmp/$r.json")" "$(losses "$tmp/cell.json")")
  awk -v g="$gap" -v t="${TOL[$prec]}" 'BEGIN { exit !(g <= t) }' ||
    fail "$label ($model $flags): $prec losses $(losses "$tmp/cell.json") are $gap from one rank's $(losses "$tmp/$r.json")"
  worst[$prec]=$(awk -v g="$gap" -v w="${worst[$prec]}" 'BEGIN { print (g > w ? g : w) }')
  # the peak holds the quantized weights' cached copies where the plan does (plan --json: memory.stages[].fp8_copy_bytes)
  jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$tmp/cell.json" >/dev/null ||
    fail "$label ($model $flags): measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/cell.json")"
done < <(tr '\t' '\037' <"$tmp/cells.tsv")
# sweep --runnable-by cpu|cuda keeps to the plans that backend runs (the same rule): the cpu backend every plan the
# sweep makes of tiny-moe on 4 ranks (issue #36: MoE under TP + SP, etp tp or 1, too), the cuda backend leaves some
# out and counts them; and each plan it ranks (its first 12) one plan --json says the backend runs
for spec in "cpu tiny-moe local-cpu 4 ==" "cuda tiny dgx-h100 8 >"; do
  read -r b model cluster g left <<<"$spec"
  "$px" sweep -m "$model" -c "$cluster" -g "$g" -B 8 --runnable-by "$b" --json >"$tmp/sweep.json" ||
    { fail "sweep --runnable-by $b"; continue; }
  jq -e --arg b "$b" ".question.runnable_by == \$b and .counts.not_runnable $left 0 and (.plans | length) > 0" \
    "$tmp/sweep.json" >/dev/null || fail "sweep --runnable-by $b: $(jq -c '.counts' "$tmp/sweep.json")"
  while read -r flags; do
    # shellcheck disable=SC2086
    "$px" plan -m "$model" -c "$cluster" -g "$g" $flags --json | jq -e --arg b "$b" '.backends[$b].runs' >/dev/null ||
      fail "sweep --runnable-by $b ranked $flags, which plan --json says $b does not run"
  done < <(jq -r '.plans[:12][].flags' "$tmp/sweep.json")
done

echo "parity ($mode): $ran cells run on the cpu backend, $refused refused by it (each reason checked with run), $invalid not valid plans; worst gaps: fp8 ${worst[fp8]}, mxfp8 ${worst[mxfp8]}, nvfp4 ${worst[nvfp4]}"
[ "$ran" -ge 20 ] || fail "only $ran cells ran"
finish
