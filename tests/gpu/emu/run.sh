#!/usr/bin/env bash
# The GPU tests on a machine without a GPU: kernels/cuda emulated on the CPU
# (emu.h), NCCL emulated over MPI (nccl.cpp), everything under
# AddressSanitizer and UBSan (but the planner layers given by PX_EMU_LAYERS).
#  1. tests/gpu/test_cuda_kernels.c: every kernel against its CPU twin
#     (indexing, bounds, barriers, results; cuBLASLt is a reference model);
#  2. tests/test_backend_ops.c: every op kind through the CUDA backend's interface
#     against the CPU backend, fp32, bf16 and fp16, what supports_op refuses
#     skipped; its collectives on 4 ranks over NCCL and over the MPI fallback;
#  3. tests/gpu/exec.sh: parallax run --backend cuda against --backend cpu on plans up to
#     8 ranks, over NCCL and over the MPI fallback, fp32 and bf16.
# Not a substitute for scripts/gpu-tests.sh on a real GPU: no timing, no
# races, no nvcc code generation.
#   [PX_EMU_LAYERS=MAIN_BUILD] tests/gpu/emu/run.sh [--build-only] [build-dir]   (default: build-emu)
# PX_EMU_LAYERS: a main build whose core, plan, sim and report libraries are linked instead of compiled
# again under the sanitizers (as ctest's gpu_emu does; the build directory keeps the choice; empty: compile).
# --build-only builds (or brings up to date) BUILD/emu/parallax_emu and the
# tests and runs nothing (scripts/gpu-check.sh --emu).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
out=${1:-$root/build-emu}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# 1. kernels/cuda rewritten for the emulator: device sections on for C++, and
#    k<<<grid, block, smem, stream>>>(args) -> px_emu_launch(px_emu_config(...), [=] { k(args); })
src="$out/src/kernels/cuda"
mkdir -p "$src"
for f in "$root"/kernels/cuda/*.h "$root"/kernels/cuda/*.cu; do
  name=$(basename "$f")
  case "$name" in *.cu) name="$name.cpp" ;; esac
  perl -0pe 's/#ifdef __CUDACC__/#ifdef __cplusplus/g;
             s/(\w+(?:<[^<>;]*>)?)<<<(.*?)>>>\((.*?)\);/px_emu_launch(px_emu_config($2), [=] { $1($3); });/gs' "$f" >"$src/$name.new"
  cmp -s "$src/$name.new" "$src/$name" && rm "$src/$name.new" || mv "$src/$name.new" "$src/$name" # keep mtimes
done
for f in "$src"/*; do # files whose source is gone
  name=$(basename "$f" .cpp)
  [ -e "$root/kernels/cuda/$name" ] || rm -f "$f"
done
if grep -n '<<<' "$src"/*.cpp; then
  echo "emu: a launch was not rewritten" >&2
  exit 1
fi

# 2. build and run
# PX_EMU_LAYERS=DIR: link DIR's planner layers (a main build's) instead of compiling them (CMakeLists.txt)
layers=()
[ -n "${PX_EMU_LAYERS+set}" ] && layers=(-DPX_LAYERS_DIR="$PX_EMU_LAYERS")
cmake -S "$root/tests/gpu/emu" -B "$out/emu" -DPX_ROOT="$root" -DPX_EMU_SRC="$out/src" "${layers[@]}" >/dev/null
cmake --build "$out/emu" -j"$(nproc)" >/dev/null
[ "$build_only" -eq 0 ] || exit 0
PARALLAX_HOME="$root" ASAN_OPTIONS=detect_leaks=0 "$out/emu/test_cuda_kernels_emu"
set -a # the tests' environment (tests/tools/test.env)
. "$root/tests/tools/test.env"
set +a
PARALLAX_HOME="$root" ASAN_OPTIONS=detect_leaks=0 "$out/emu/test_backend_ops_emu"
PARALLAX_HOME="$root" ASAN_OPTIONS=detect_leaks=0 PX_EMU_DEVICES=4 mpirun -np 4 "$out/emu/test_backend_ops_emu" --collectives
PARALLAX_HOME="$root" ASAN_OPTIONS=detect_leaks=0 PX_EMU_DEVICES=4 PX_CUDA_COMM=mpi mpirun -np 4 "$out/emu/test_backend_ops_emu" --collectives
PX_EMU=1 bash "$root/tests/gpu/exec.sh" "$out/emu/parallax_emu" "$out/emu/px_gradcmp" "$root"
