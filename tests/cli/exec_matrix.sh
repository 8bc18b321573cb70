#!/usr/bin/env bash
# The executor on a matrix of plans, up to 8 MPI ranks: (tp, pp, dp) over
# {1,2} x {1,2,4} x {1,2}, with ZeRO 0-3 (and ZeRO-2/3's accumulation,
# resharding and prefetch modes, offload to host memory and NVMe, buckets
# smaller than a layer), SP on and off, every schedule and
# recompute mode, both attention kernels and both GELU forms, on the Llama-shaped and the
# GPT-2-shaped tiny models. Every run's losses and first-step gradients must
# equal the single-rank run's within a relative error of 1e-5, and every
# rank's allocated peak (and offloaded bytes) must be the plan's prediction for its stage.
set -u
px=$1
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
runs=0
zi=0
oi=0
export PARALLAX_NVME_DIR=$tmp

run() { # model gbs ranks flags... (to $tmp/out.json, out.bin)
  local model=$1 gbs=$2 n=$3
  shift 3
  cpu_run out "$n" -m "$model" --steps 3 -B "$gbs" "$@"
}

for model in tiny tiny-gpt; do
  run "$model" 8 1 || { fail "$model single rank: $(cat "$tmp/err.txt")"; continue; }
  ref=$(losses "$tmp/out.json")
  cp "$tmp/out.bin" "$tmp/ref-$model.bin"
  i=0
  for tp in 1 2; do
    for pp in 1 2 4; do
      for dp in 1 2; do
        n=$((tp * pp * dp))
        [ "$n" -eq 1 ] && continue
        for variant in 0 1 2; do
          i=$((i + 1))
          # i counts runs: each dimension cycles at its own rate, so every value meets many grids
          z=$(( i % 4 )); [ "$dp" -eq 1 ] && z=0
          rc=(none selective full); r=${rc[$(( (i / 2) % 3 ))]}
          flags=(-t "$tp" -p "$pp" -d "$dp" -z "$z" -r "$r")
          [ "$tp" -gt 1 ] && [ $(( (i / 3) % 2 )) -eq 0 ] && flags+=(-S)
          [ $(( i % 5 )) -eq 1 ] && flags+=(--attention unfused)
          [ $(( i % 4 )) -eq 2 ] && flags+=(--gelu fused)
          # gradient buckets of 10 KiB: they split the layers (ZeRO-0/1/2)
          [ $(( i % 6 )) -eq 4 ] && [ "$z" -lt 3 ] && flags+=(--bucket-mib 0.01)
          # ZeRO-2/3's modes in turn: the defaults, full accumulation, parameters kept, a deeper prefetch
          if [ "$z" -ge 2 ]; then
            zi=$((zi + 1))
            case $(( zi % 4 )) in
              1) flags+=(--grad-accum full) ;;
              2) [ "$z" -eq 3 ] && flags+=(--no-reshard-after-forward) || flags+=(--grad-accum full) ;;
              3) [ "$z" -eq 3 ] && flags+=(--prefetch 2 --grad-accum full) ;;
            esac
            # ... and offload at its own rate: none, host memory, NVMe (ZeRO-3: the parameters too)
            oi=$((oi + 1))
            case $(( oi % 3 )) in
              1) flags+=(--offload-optimizer cpu) ;;
              2) flags+=(--offload-optimizer nvme); [ "$z" -eq 3 ] && flags+=(--offload-params cpu) ;;
            esac
          fi
          if [ "$pp" -gt 1 ]; then
            case $(( (i + variant) % 3 )) in
              0) flags+=(-e 1f1b) ;;
              1) flags+=(-e gpipe) ;;
              2) [ "$pp" -eq 2 ] && flags+=(-e interleaved -v 2) || flags+=(-e 1f1b) ;;
            esac
          fi
          [ $(( i % 7 )) -eq 3 ] && [ $((8 / dp)) -ge 2 ] && flags+=(-b 2)
          runs=$((runs + 1))
          if ! run "$model" 8 "$n" "${flags[@]}"; then
            fail "$model ${flags[*]}: $(head -3 "$tmp/err.txt")"
            continue
          fi
          got=$(losses "$tmp/out.json")
          close "$ref" "$got" 1e-5 || fail "$model ${flags[*]}: losses $got, single rank $ref"
          "$cmp" "$tmp/ref-$model.bin" "$tmp/out.bin" >"$tmp/cmp.txt" || fail "$model ${flags[*]}: $(cat "$tmp/cmp.txt")"
          jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$tmp/out.json" >/dev/null ||
            fail "$model ${flags[*]}: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/out.json")"
          jq -se 'last | .stages | all(.host_bytes == .predicted_host_bytes and .nvme_bytes == .predicted_nvme_bytes)' \
            "$tmp/out.json" >/dev/null || fail "$model ${flags[*]}: offloaded bytes are not the plan's"
          echo "ok: $model ${flags[*]}: $(cat "$tmp/cmp.txt")"
        done
      done
    done
  done
done
echo "$runs plans, $fails failures"
[ "$fails" -eq 0 ] && [ "$runs" -ge 60 ]
