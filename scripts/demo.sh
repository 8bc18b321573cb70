#!/usr/bin/env bash
# The README's main job on a built-in default.
set -euo pipefail
px=${1:-build/parallax}
"$px" models
echo
"$px" model show llama3-70b
