#!/usr/bin/env bash
# parallax's CPU executor beside PyTorch on the same training step: GPT-2
# 124M and a Llama-shaped 124M, seq 256, 4 sequences a step in micro-batches
# of 4 (one micro-batch), fp32, AdamW, dropout 0, random tokens. Runs
# alternate in rounds (parallax 1 rank, parallax 2 ranks tp and dp, PyTorch
# with as many threads as cores), and each figure is the median of its
# rounds' tokens/s (each run's own median step, the first step left out).
# PyTorch comes from $PYTHON (default python3) when `import torch` works
# there; otherwise only parallax is measured. A benchmark, never a test.
#   bench/vs_torch.sh [BUILD_DIR] [ROUNDS] [STEPS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
steps=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
px=$build/parallax
python=${PYTHON:-python3}
export PARALLAX_HOME=${PARALLAX_HOME:-$root}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_rmaps_base_oversubscribe=1
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The shapes: GPT-2 124M as published, dropout 0; Llama-shaped at the same
# width and depth (RMSNorm, SwiGLU of 2048 = the GELU MLP's parameters, RoPE).
sed 's/"dropout": 0.1/"dropout": 0.0/; s/"name": "gpt2-124m"/"name": "gpt2-124m-nodrop"/' \
  "$root/models/gpt2-124m.json" >"$tmp/gpt2.json"
cat >"$tmp/llama.json" <<'JSON'
{"name": "llama-124m", "layers": 12, "hidden": 768, "heads": 12, "ffn_hidden": 2048, "vocab": 50257,
 "seq_len": 1024, "norm": "rmsnorm", "mlp": "swiglu", "position": "rope", "tied_embeddings": true,
 "bias": false, "dropout": 0.0, "norm_eps": 1e-5}
JSON
shape=(--seq 256 -B 4)
torch_ok=false
"$python" -c 'import torch' 2>/dev/null && torch_ok=true

tps() { grep -o '"tokens_per_s":[^,}]*' "$1" | sed 's/.*://' | tr -d ' \t'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A got
runs=("px-1|1|-b 4" "px-tp2|2|-t 2 -b 4" "px-dp2|2|-d 2 -b 2") # name|ranks|flags
for model in gpt2 llama; do
  for r in $(seq 1 "$rounds"); do
    for entry in "${runs[@]}"; do
      IFS='|' read -r name n flags <<<"$entry"
      bind="" # a lone rank gets every core (Open MPI would bind it to one)
      [ "$n" = 1 ] && bind="--bind-to none"
      # shellcheck disable=SC2086
      mpirun -np "$n" $bind "$px" run --backend cpu -m "$tmp/$model.json" "${shape[@]}" $flags --steps "$steps" \
        --json >"$tmp/out.json" 2>"$tmp/err" || { echo "$model $name failed: $(tail -3 "$tmp/err")" >&2; exit 1; }
      got[$model/$name]+="$(tps "$tmp/out.json") "
    done
    if $torch_ok; then
      "$python" "$root/bench/torch_ref.py" "$tmp/$model.json" --seq 256 --gbs 4 --mbs 4 --steps "$steps" \
        --threads "$cores" >"$tmp/torch.json" 2>"$tmp/torch.err" || { echo "torch failed: $(tail -3 "$tmp/torch.err")" >&2; exit 1; }
      got[$model/torch]+="$(tps "$tmp/torch.json") "
    fi
  done
done

printf "%-8s %-22s %12s %10s  %s\n" model run tokens/s "vs torch" "each round"
for model in gpt2 llama; do
  ref=""
  $torch_ok && ref=$(echo "${got[$model/torch]}" | tr ' ' '\n' | grep . | median)
  for name in px-1 px-tp2 px-dp2 torch; do
    [ -n "${got[$model/$name]:-}" ] || continue
    m=$(echo "${got[$model/$name]}" | tr ' ' '\n' | grep . | median)
    ratio="-"
    [ -n "$ref" ] && ratio=$(awk -v a="$m" -v b="$ref" 'BEGIN { printf "%.2fx", a / b }')
    label=$name
    case $name in px-1) label="parallax 1 rank" ;; px-tp2) label="parallax 2 ranks tp" ;;
      px-dp2) label="parallax 2 ranks dp" ;; torch) label="pytorch $cores threads" ;; esac
    printf "%-8s %-22s %12.1f %10s  %s\n" "$model" "$label" "$m" "$ratio" "${got[$model/$name]}"
  done
done
$torch_ok || echo "(no PyTorch in $python: set PYTHON to an interpreter with torch for the reference)"
