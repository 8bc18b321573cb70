#!/usr/bin/env bash
# Runs tests/gpu/test_cuda_kernels.c with every kernel of kernels/cuda
# emulated on the CPU (emu.h): checks the kernels' indexing, bounds (under
# AddressSanitizer), barriers and results against the CPU twins on a machine
# without a GPU. cuBLASLt is a reference model (emu.cpp). Not a substitute for
# scripts/gpu-tests.sh on a real GPU: no timing, no races, no nvcc codegen.
#   tests/gpu/emu/run.sh [build-dir]          (default: build-emu)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$root/build-emu}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# 1. the CPU twins: a CPU-only library
cmake -S "$root" -B "$out/cpu" -DPX_CUDA=OFF >/dev/null
cmake --build "$out/cpu" --target parallax_lib -j"$(nproc)" >/dev/null

# 2. kernels/cuda rewritten for the emulator: device sections on for C++, and
#    k<<<grid, block, smem, stream>>>(args) -> px_emu_launch(px_emu_config(...), [&] { k(args); })
src="$out/src/kernels/cuda"
rm -rf "$src"
mkdir -p "$src"
for f in "$root"/kernels/cuda/*.h "$root"/kernels/cuda/*.cu; do
  name=$(basename "$f")
  case "$name" in *.cu) name="$name.cpp" ;; esac
  perl -0pe 's/#ifdef __CUDACC__/#ifdef __cplusplus/g;
             s/(\w+)<<<(.*?)>>>\((.*?)\);/px_emu_launch(px_emu_config($2), [&] { $1($3); });/gs' "$f" >"$src/$name"
done
if grep -n '<<<' "$src"/*.cpp; then
  echo "emu: a launch was not rewritten" >&2
  exit 1
fi

# 3. build and run
cmake -S "$root/tests/gpu/emu" -B "$out/emu" -DPX_ROOT="$root" -DPX_EMU_SRC="$out/src" \
  -DPX_LIB="$out/cpu/libparallax_lib.a" >/dev/null
cmake --build "$out/emu" -j"$(nproc)"
PARALLAX_HOME="$root" ASAN_OPTIONS=detect_leaks=0 "$out/emu/test_cuda_kernels_emu"
