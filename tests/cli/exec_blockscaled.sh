#!/usr/bin/env bash
# --precision mxfp8 and nvfp4 on the CPU executor (the emulation: exec/cpu/fp8.c, kernels/cpu/mx.h):
# tiny-gpt trains with data, tensor (with and without sequence parallelism) or pipeline parallelism: the loss
# falls by at least 0.2 over 8 steps and each step's loss is within TOL (absolute, nats) of the fp32 run's
# (docs/compiler.md, "Block-scaled precisions": the worst measured). A resumed nvfp4 run (stochastic
# rounding's draws come from the run seed and the data, not from the process) is the uninterrupted one
# bitwise. tiny-moe's experts in mxfp8 and nvfp4 (each expert's rows quantized apart, nvfp4's padded to 16 for
# the Hadamard transform: test_backend_ops) on one rank and over EP 2: within TOL[moe] and TOL[moe-nvfp4] of the
# fp32 runs (measured worst 0.0100 and 0.0117 (mxfp8), 0.0225 and 0.0205 (nvfp4) when written, fp8 with per-tensor
# scales 0.0066 on the same model: a token routed to another expert moves the loss more than a rounding), every
# stage's measured peak its plan's. Sequence parallelism (each rank casts its shard of the tokens, the all-gather
# moves both copies with their scales: px_cpu_fp8_gather): mxfp8's first-step gradients are the TP run's without
# SP within fp32 summation order (GRAD_TOL) where the shards' blocks of 32 are the whole tensor's (shards of 16
# tokens: gathered in fp32 and cast whole, as Transformer Engine does with a shard it cannot quantize; shards of
# 32, through the permute of mbs 2), and differ where a shard's blocks run across its two sequences (mbs 2 of 32
# tokens: TE's shard quantized on its own); nvfp4 with SP and mbs 2 trains within TOL of fp32. nvfp4 with a shard
# of tokens not a multiple of 16 is refused naming the reason; the CUDA backend refuses both precisions by name.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"
declare -A TOL=([mxfp8]=0.01 [nvfp4]=0.05 [moe]=0.02 [moe-nvfp4]=0.04)
cmp=$(dirname "$px")/tests/px_gradcmp
GRAD_TOL=1e-6 # relative L2 of the first step's gradients (measured 4e-9: the layer norms' sums over shards)

run() { # out ranks flags... (tiny-gpt unless they name a model)
  local out=$1 n=$2
  shift 2
  [[ " $* " == *" -m "* ]] || set -- -m "$src/models/tiny-gpt.json" "$@"
  cpu_run "$out" "$n" --steps 8 -B 8 "$@" ||
    { fail "$out: $(grep -v '^---\|^ *$' "$tmp/err.txt" | head -3)"; return 1; }
}

check() { # WHAT REF GOT TOL
  trains_within "$(losses "$tmp/$2.json")" "$(losses "$tmp/$3.json")" "$4" 8 >"$tmp/gap.txt" ||
    { fail "$1: $(cat "$tmp/gap.txt")"; return 1; }
  echo "ok: $1: $(cat "$tmp/gap.txt")"
}

run f32 2
for p in mxfp8 nvfp4; do
  run "$p-dp" 2 --precision "$p" && check "$p dp 2" f32 "$p-dp" "${TOL[$p]}"
done
run mxfp8-tp 2 -t 2 --precision mxfp8 && check "mxfp8 tp 2" f32 mxfp8-tp "${TOL[mxfp8]}"
grads() { # WHAT REF GOT SAME(1: within GRAD_TOL, 0: beyond it)
  "$cmp" "$tmp/$2.bin" "$tmp/$3.bin" "$GRAD_TOL" >"$tmp/cmp.txt"
  [ $? -eq $((1 - $4)) ] && echo "ok: $1: $(cat "$tmp/cmp.txt")" || fail "$1: $(cat "$tmp/cmp.txt")"
}
run mxfp8-sp 2 -t 2 --sp --precision mxfp8 && check "mxfp8 tp 2 sp" f32 mxfp8-sp "${TOL[mxfp8]}" &&
  grads "mxfp8 sp: the tp run's gradients" mxfp8-tp mxfp8-sp 1
for c in "64 1" "32 0"; do # seq, whether the shards' blocks are the whole's
  read -r s same <<<"$c"
  run "mx-tp-$s" 2 -t 2 -s "$s" -b 2 --steps 1 --precision mxfp8 &&
    run "mx-sp-$s" 2 -t 2 --sp -s "$s" -b 2 --steps 1 --precision mxfp8 &&
    grads "mxfp8 sp, mbs 2, seq $s: $([ "$same" = 1 ] || echo "not ")the tp run's gradients" "mx-tp-$s" "mx-sp-$s" "$same"
done
run nvfp4-sp 2 -t 2 --sp -b 2 --precision nvfp4 && check "nvfp4 tp 2 sp mbs 2" f32 nvfp4-sp "${TOL[nvfp4]}"
run nvfp4-pp 2 -p 2 --precision nvfp4 && check "nvfp4 pp 2" f32 nvfp4-pp "${TOL[nvfp4]}"
cmp -s <(losses "$tmp/mxfp8-dp.json") <(losses "$tmp/nvfp4-dp.json") && fail "mxfp8 and nvfp4 ran the same numbers"
for c in "moe 1" "moe-ep 2 -d 2 --ep 2"; do
  read -r name n rest <<<"$c"
  # shellcheck disable=SC2086
  run "$name-f32" "$n" -m tiny-moe $rest || continue
  for p in mxfp8 nvfp4; do
    tol=${TOL[moe]}
    [ "$p" = nvfp4 ] && tol=${TOL[moe-nvfp4]}
    run "$name-$p" "$n" -m tiny-moe $rest --precision "$p" && check "$p experts, $name" "$name-f32" "$name-$p" "$tol" &&
      { jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$tmp/$name-$p.json" >/dev/null ||
        fail "$p experts, $name: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/$name-$p.json")"; }
  done
done

d="$tmp/resume"
r=(timeout 120 mpirun -np 2 "$px" run --backend cpu -m tiny-gpt -t 2 -B 8 --precision nvfp4 --json)
if "${r[@]}" --steps 4 --ckpt "$d/straight" >"$d.full.json" 2>"$tmp/err.txt" &&
  "${r[@]}" --steps 2 --ckpt "$d/ck" >"$d.first.json" 2>>"$tmp/err.txt" &&
  "${r[@]}" --steps 4 --ckpt "$d/ck" --resume >"$d.second.json" 2>>"$tmp/err.txt"; then
  full=$(losses "$d.full.json") joined="$(losses "$d.first.json"),$(losses "$d.second.json")"
  [ "$full" = "$joined" ] && echo "ok: resume nvfp4: bitwise ($joined)" || fail "resume nvfp4: $joined, straight $full"
else
  fail "resume nvfp4: $(grep -v '^---\|^ *$' "$tmp/err.txt" | head -3)"
fi

err=$(mpirun -np 2 "$px" run --backend cpu -m tiny-gpt -t 2 --sp -s 16 --precision nvfp4 --steps 1 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "tokens 16 at a time: a micro-batch holds 8 on a rank (its sequence shard)" ||
  fail "nvfp4 with SP, 8 tokens a shard: $err"
err=$("$px" run --backend cpu -m tiny-gpt -s 24 --precision nvfp4 --steps 1 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "tokens 16 at a time: a micro-batch holds 24 on a rank" || fail "nvfp4, 24 tokens: $err"
cuda_refuses "precision nvfp4: its block-scaled GEMMs need cuBLASLt's block-scaling modes" 1 -m tiny-gpt -c dgx-b200 \
  --precision nvfp4 --steps 1
cuda_refuses "precision mxfp8: its block-scaled GEMMs" 1 -m tiny-gpt -c dgx-b200 --precision mxfp8 --steps 1
finish
