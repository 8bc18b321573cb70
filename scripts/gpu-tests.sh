#!/usr/bin/env bash
# On a machine with a CUDA GPU: configure with the CUDA backend required, build,
# and run the GPU-labelled tests (every CUDA kernel against its CPU twin).
#   scripts/gpu-tests.sh [build-dir]        (default: build-gpu)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
cmake -S "$root" -B "$build" -DPX_CUDA=ON
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest -L gpu --output-on-failure
