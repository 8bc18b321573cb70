#!/usr/bin/env bash
# Runs the benchmarks (never part of the tests). Usage: scripts/bench.sh [BUILD_DIR]
# The executor on a GPU runs only where one is visible (bench_exec says so otherwise).
set -euo pipefail
build=${1:-build}
export PARALLAX_HOME=${PARALLAX_HOME:-$(cd "$(dirname "$0")/.." && pwd)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# bench_exec is linked, not run through parallax: it finds the CUDA module where the build put it
export PARALLAX_CUDA_MODULE=${PARALLAX_CUDA_MODULE:-$build/libparallax_cuda.so}
"$build/bench/bench_startup" "$build/parallax"
"$build/bench/bench_sim"
"$build/bench/bench_sweep" "$build/parallax"
"$build/bench/bench_exec" cpu gpt2-124m 256 3
"$build/bench/bench_exec" cuda gpt2-124m 1024 6 8 2
"$build/bench/bench_exec" cuda gpt2-1.5b 1024 6 4 2
# beside PyTorch (when $PYTHON, default python3, imports torch; else parallax alone)
bash "$(dirname "$0")/../bench/vs_torch.sh" "$build" 3 4
