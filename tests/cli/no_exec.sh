#!/usr/bin/env bash
# The planner built without the executor (cmake -DPX_EXEC=OFF; registered only
# there): run, reshard, merge, launch and calibrate's measuring refuse in one line with exit 2
# (calibrate --import still works), the binary links no MPI, BLAS or CUDA, and
# the planner's commands work.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"

refused() { # want cmd...
  local want=$1 err rc
  shift
  err=$("$px" "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$err" | grep -c '')" -eq 1 ] && printf '%s' "$err" | grep -qF "$want" ||
    fail "$*: exit $rc, '$err'"
}
refused "parallax was built without the executor (PX_EXEC=OFF): run is not available" run -m tiny --steps 1
refused "parallax was built without the executor (PX_EXEC=OFF): reshard is not available" reshard --from a --to b
refused "parallax was built without the executor (PX_EXEC=OFF): merge is not available" merge --adapters a --to b
refused "parallax was built without the executor (PX_EXEC=OFF): launch is not available" launch -- -m tiny --ckpt c
refused "calibrate measures nothing here; calibrate --import still reads measurements" calibrate -o "$tmp/c.json"
"$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$src/tests/data/nccl/node_ar.txt" >/dev/null &&
  jq -e '.intra_node.busbw | length == 11' "$tmp/c.json" >/dev/null || fail "calibrate --import without the executor"

libs=$(ldd "$px" 2>&1)
printf '%s\n' "$libs" | grep -Ei 'libmpi|openblas|libblas|cuda|cublas|nccl' && fail "links the executor's libraries: $libs"
syms=$(nm -u "$px" 2>&1 | grep -E ' (MPI_|PMPI_|cblas_|cuda|cublas|nccl)' | head -3)
[ -z "$syms" ] || fail "undefined executor symbols: $syms"

"$px" models >/dev/null || fail "models"
"$px" topologies >/dev/null || fail "topologies"
"$px" model show llama3-8b >/dev/null || fail "model show"
"$px" topology show dgx-h100 >/dev/null || fail "topology show"
"$px" plan -m llama3-8b -c dgx-h100 -g 16 -t 2 -z 1 >/dev/null || fail "plan"
"$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 --json | jq -e '.step_time_s > 0' >/dev/null || fail "sim"
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 -k 3 --plot "$tmp/p" >/dev/null || fail "sweep --plot"
"$px" plot "$tmp/p" >/dev/null || fail "plot"
"$px" export -m llama3-8b -c dgx-h100 -g 16 -t 2 --to megatron >/dev/null || fail "export"
# a split sweep needs MPI: refused with the reason, not run N times
if command -v mpirun >/dev/null; then
  err=$(mpirun -np 2 "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 2>&1 >/dev/null); rc=$?
  [ "$rc" -ne 0 ] && printf '%s' "$err" | grep -qF "built without the executor" || fail "mpirun sweep: $rc $err"
fi

finish
