# Sourced by the test scripts (tests/cli/*.sh, tests/gpu/exec.sh): a scratch
# directory removed on exit, Open MPI settings for many ranks on one machine
# (as root too), failure counting, and the losses of `parallax run --json`.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The comma-separated losses in a run's JSON file.
losses() { grep -o '"losses":[^]]*' "$1" | sed 's/.*\[//' | tr -d ' \t\n'; }

# close A B RTOL: two loss lists of the same length, equal within RTOL (relative).
close() {
  awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { n = split(a, x, ","); m = split(b, y, ","); if (n != m || n == 0) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > r * (x[i] < 0 ? -x[i] : x[i])) exit 1 } }'
}

# The script's verdict: the failure count, and exit 0 only without failures.
finish() {
  echo "$fails failures"
  [ "$fails" -eq 0 ]
}
