#!/usr/bin/env bash
# On a machine with a CUDA GPU: install what is missing, configure with the
# CUDA backend required, build, and run the GPU-labelled tests: every CUDA
# kernel against its CPU twin (tests/gpu/test_cuda_kernels.c, the fp8 casts and
# cuBLASLt fp8 GEMM included) and the CUDA backend against the CPU backend end
# to end (tests/gpu/exec.sh: fp32, bf16, fp16 and fp8; on a GPU without fp8,
# such as an A100, the fp8 runs are replaced by the check that they are refused).
# scripts/gpu-check.sh runs these too, measures the GPU and runs two models against
# their prediction, within a time budget (docs/testing.md, "The GPU check").
#   scripts/gpu-tests.sh [build-dir]        (default: build-gpu)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -DPX_CUDA=ON
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest -L gpu --output-on-failure
