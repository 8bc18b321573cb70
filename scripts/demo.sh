#!/usr/bin/env bash
# The README's main job: which plan should train Llama 3 70B on 15T tokens
# with 512 H100s (64 DGX nodes), at $2.50 per GPU-hour? Every plan that fits
# is simulated and ranked; the answer goes to out/demo/index.html.
set -euo pipefail
px=${1:-build/parallax}
out=${2:-out/demo}
"$px" sweep --model llama3-70b --cluster dgx-h100 --gpus 512 --gbs 512 --tokens 15T --price 2.5 \
  --top 10 --report "$out"
