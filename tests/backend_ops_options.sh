#!/usr/bin/env bash
# test_backend_ops's command line (ggml's test-backend-ops' -o, -b and perf
# mode): -o runs only the named kinds, -b only that backend, --perf times
# each case and prints the table without checking a result, and bad usage
# is refused (exit 2) naming the flag.
# usage: backend_ops_options.sh TEST_BACKEND_OPS
set -u
suite=$1
source "$(dirname "$0")/tools/clitest.sh"

# -o linear,gelu -b cpu: the table holds those two kinds and the cpu backend alone
out=$("$suite" -o linear,gelu -b cpu 2>&1) || fail "-o linear,gelu -b cpu: $(echo "$out" | tail -5)"
echo "$out" | grep -q "Suite: backend_ops_filtered" || fail "-o: not the filtered suite: $(echo "$out" | head -12)"
rows=$(echo "$out" | awk '/^  backend /{t=1; next} t && /^  [a-z_0-9]+ +(ok|wide|FAIL|skipped|-)/{print $1}' | sort -u | tr '\n' ' ')
[ "$rows" = "gelu linear " ] || fail "-o linear,gelu: table rows '$rows'"
echo "$out" | grep -q "^  backend cuda" && fail "-b cpu: the cuda backend in the table"
echo "$out" | grep -q "linear  *ok [1-9]" || fail "-o linear: no linear case ran: $(echo "$out" | grep '^  linear')"
echo "$out" | grep -q "collectives and p2p.*(groups" && fail "-o linear,gelu: the collectives ran"
# a collective kind: the collectives run, no op case does
out=$("$suite" -o allreduce 2>&1) || fail "-o allreduce: $(echo "$out" | tail -5)"
echo "$out" | grep -q "^  allreduce  *ok" || fail "-o allreduce: $(echo "$out" | grep '^  allreduce')"

# --perf: a time and a rate a case, each backend a column; nothing checked against a reference
out=$("$suite" --perf -o softmax,add 2>&1) || fail "--perf: $(echo "$out" | tail -5)"
echo "$out" | grep -q "Suite: backend_ops_perf" || fail "--perf: not the perf suite"
n=$(echo "$out" | grep -cE "^  (softmax|add) +fp32 .* [0-9.]+ us +[0-9.]+ GB/s")
[ "$n" -ge 2 ] || fail "--perf -o softmax,add: $n timed fp32 rows: $(echo "$out" | grep -E '^  (op|softmax|add) ' | head -5)"
echo "$out" | grep -qE "^  (linear|gelu) " && fail "--perf -o softmax,add: other kinds timed"

# bad usage: exit 2 naming what was wrong
refused() { # NEEDLE ARGS...
  local needle=$1 err rc
  shift
  err=$("$suite" "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "$needle" || fail "$*: exit $rc: $err"
}
refused "-o: 'linearr' is not an op kind" -o linearr
refused "-b: 'tpu' is not one of cpu|cuda" -b tpu
refused "-o needs a value" -o
refused "unknown argument '--fast'" --fast
"$suite" --help | grep -q -- "-o OP" || fail "--help"
finish
