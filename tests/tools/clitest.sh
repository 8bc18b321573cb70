# Sourced by the test scripts (tests/cli/*.sh, tests/gpu/exec.sh): a scratch
# directory removed on exit, Open MPI settings for many ranks on one machine
# (as root too), failure counting, and the losses of `parallax run --json`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set -a # the tests' environment: MPI for many ranks on one machine, one BLAS thread (test.env)
. "$(dirname "${BASH_SOURCE[0]}")/test.env"
set +a
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The comma-separated losses in a run's JSON output (a line per step, then the run's object).
losses() { grep -o '"losses":[^]]*' "$1" | sed 's/.*\[//' | tr -d ' \t\n'; }

# mtp_losses JSON: the comma-separated MTP module's losses of a run's JSON output (its step lines).
mtp_losses() { grep -o '"mtp_loss": *[0-9.]*' "$1" | sed 's/.*: *//' | paste -sd, -; }

# worst_gap A B: the largest |a_i - b_i| of two loss lists, 99 where they differ in length or are empty.
worst_gap() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ","); m = split(b, y, ","); if (n != m || n == 0) { print 99; exit }
    w = 0; for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > w) w = d }; printf "%.5f", w }'
}

# trains_within REF GOT TOL N: GOT's N losses within TOL of REF's at every step (worst_gap) and falling by 0.2 or
# more over them; prints "worst gap W, fell F".
trains_within() {
  awk -v w="$(worst_gap "$1" "$2")" -v b="$2" -v t="$3" -v N="$4" 'BEGIN { if (split(b, y, ",") != N) exit 1;
    printf "worst gap %.4f, fell %.3f\n", w, y[1] - y[N]; exit !(w <= t && y[1] - y[N] >= 0.2) }'
}

# close A B RTOL: two loss lists of the same length, equal within RTOL (relative).
close() {
  awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { n = split(a, x, ","); m = split(b, y, ","); if (n != m || n == 0) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > r * (x[i] < 0 ? -x[i] : x[i])) exit 1 } }'
}

# model_file NAME: the model file a test names: its own in $tmp, else models/, else tests/data/ ($src is the
# source tree), else NAME as given (a path, or a name `parallax` resolves).
model_file() {
  local f
  for f in "$tmp/$1.json" "$src/models/$1.json" "$src/tests/data/$1.json"; do
    [ -f "$f" ] && { echo "$f"; return; }
  done
  echo "$1"
}

# ranks FLAGS...: the ranks a plan's flags need (tp x pp x dp x cp; ep and etp fold into them).
ranks() {
  local n=1 f=("$@") k
  for ((k = 0; k < ${#f[@]}; k++)); do
    case ${f[k]} in -t | -p | -d | --cp) n=$((n * f[k + 1])) ;; esac
  done
  echo $n
}

# cpu_run OUT NP ARGS...: `parallax run --backend cpu ARGS` on NP ranks (killed after 120 s), its --json
# output in $tmp/OUT.json, its first-step gradients in $tmp/OUT.bin, its errors in $tmp/err.txt.
cpu_run() {
  local out=$1 n=$2
  shift 2
  timeout 120 mpirun -np "$n" "$px" run --backend cpu --json --dump-grads "$tmp/$out.bin" "$@" \
    >"$tmp/$out.json" 2>"$tmp/err.txt"
}

# same_run WHAT REF GOT: the run whose --json and --dump-grads went to GOT.json and GOT.bin equals
# the one in REF.json / REF.bin: losses within 1e-5, first-step gradients ($cmp, px_gradcmp), and
# every stage's measured peak is its plan's. Says ok or fails; status 0 when equal.
same_run() {
  local what=$1 ref got
  ref=$(losses "$2.json")
  got=$(losses "$3.json")
  close "$ref" "$got" 1e-5 || { fail "$what: losses $got, reference $ref"; return 1; }
  "$cmp" "$2.bin" "$3.bin" >"$tmp/cmp.txt" || { fail "$what: $(cat "$tmp/cmp.txt")"; return 1; }
  jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$3.json" >/dev/null ||
    { fail "$what: measured peak is not the plan's: $(jq -sc "last | .stages" "$3.json")"; return 1; }
  echo "ok: $what: losses $got"
}

# one_rank_cases "MODEL|FLAGS"...: for each case the calling script's run (OUT MODEL RANKS FLAGS...) of MODEL
# with FLAGS, on the ranks they need, equals MODEL's one-rank run (run once as ref_MODEL): same_run; and every
# case ran.
one_rank_cases() {
  local c model f runs=0
  for c in "$@"; do
    model=${c%%|*}
    # shellcheck disable=SC2206
    f=(${c#*|})
    if [ ! -f "$tmp/ref_$model.json" ]; then
      run "ref_$model" "$model" 1 || { fail "$model on one rank: $(head -3 "$tmp/err.txt")"; continue; }
    fi
    run got "$model" "$(ranks "${f[@]}")" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
    runs=$((runs + 1))
    same_run "$model ${f[*]}" "$tmp/ref_$model" "$tmp/got"
  done
  echo "$runs plans"
  [ "$runs" -eq $# ] || fail "only $runs of $# plans ran"
}

# cuda_refuses WHAT NP ARGS...: `mpirun -np NP parallax run --backend cuda ARGS` is refused before
# running with a message naming WHAT; in a build without the CUDA backend (or its module) it must
# say it has none (exit 2), and with no device to refuse the plan on, the check is skipped (said so). $px is the binary.
cuda_refuses() {
  local what=$1 np=$2 err rc
  shift 2
  err=$(mpirun -np "$np" "$px" run --backend cuda "$@" 2>&1 >/dev/null)
  rc=$?
  if echo "$err" | grep -q "no CUDA backend"; then
    [ "$rc" -eq 2 ] || fail "cuda in a build without it: $rc $err"
    echo "skip: no CUDA backend in this build (checked that it says so)"
  elif echo "$err" | grep -q "no CUDA device"; then
    echo "skip: the CUDA backend, but no device to refuse the plan on"
  else
    [ "$rc" -ne 0 ] && echo "$err" | grep -q "$what" || fail "cuda $*: $rc $err"
  fi
}

# run_cases CASE...: each case "model ranks|flags" run by the caller's run() (run OUT MODEL GBS RANKS FLAGS...)
# against the model's one-rank run (gbs 4, made once), compared by same_run; fails unless every case ran.
run_cases() {
  local c model n ran=0
  for c in "$@"; do
    read -r model n <<<"${c%%|*}"
    # shellcheck disable=SC2206
    local f=(${c#*|})
    if [ ! -f "$tmp/ref_$model.json" ]; then
      run "ref_$model" "$model" 4 1 || { fail "$model one rank: $(head -3 "$tmp/err.txt")"; continue; }
    fi
    run got "$model" 4 "$n" "${f[@]}" || { fail "$model ${f[*]}: $(head -3 "$tmp/err.txt")"; continue; }
    ran=$((ran + 1))
    same_run "$model ${f[*]}" "$tmp/ref_$model" "$tmp/got"
  done
  echo "$ran plans"
  [ "$ran" -eq $# ] || fail "only $ran of $# plans ran"
}

# The script's verdict: the failure count, and exit 0 only without failures.
finish() {
  echo "$fails failures"
  [ "$fails" -eq 0 ]
}

# refused_plan GPUS NEEDLE FLAGS...: `parallax plan -m tiny -c local-cpu -g GPUS FLAGS` exits 2 saying NEEDLE
# (uses $px).
refused_plan() {
  local gpus=$1 needle=$2 err
  shift 2
  err=$("$px" plan -m tiny -c local-cpu -g "$gpus" "$@" 2>&1 >/dev/null)
  [ $? -eq 2 ] && printf '%s' "$err" | grep -qF -- "$needle" || fail "plan $*: $err (wanted '$needle')"
}
