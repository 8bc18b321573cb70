#!/usr/bin/env bash
# Runs the benchmarks (never part of the tests). Usage: scripts/bench.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
export PARALLAX_HOME=${PARALLAX_HOME:-$(cd "$(dirname "$0")/.." && pwd)}
"$build/bench/bench_sim"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$build/bench/bench_exec" 256 3
