#!/usr/bin/env bash
# fp8 on the CPU executor (the emulation: exec/cpu/fp8.h): tiny-gpt with
# each recipe (delayed, current, blockwise; dp 2), with tp 2 and sequence
# parallelism (fp8 all-gathers; with two sequences a micro-batch, their
# permute too), and tiny-moe with expert parallelism (fp8
# all-to-all) train: the loss falls by at least 0.2 over 8 steps, and each
# step's loss is within FP8_TOL (absolute, nats) of the fp32 run's (the
# docs/compiler.md's FP8 section: measured worst 0.013, MoE with delayed scaling).
# A resumed run is the uninterrupted one bitwise, for each recipe.
# Blockwise scales with SP are refused naming the fix; the CUDA backend
# refuses blockwise scales by name (its per-tensor fp8 path: tests/gpu/exec.sh)
# and fp8 weights (--fp8-params), naming the flag.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"
FP8_TOL=0.03

run() { # out model ranks flags...
  local out=$1 model=$2 n=$3
  shift 3
  cpu_run "$out" "$n" -m "$src/models/$model.json" --steps 8 -B 8 "$@" || { fail "$out: $(cat "$tmp/err.txt")"; return 1; }
}

# check WHAT REF GOT: GOT's loss falls by 0.2 and stays within FP8_TOL of REF's at every step
check() {
  local ref got
  ref=$(losses "$tmp/$2.json")
  got=$(losses "$tmp/$3.json")
  trains_within "$ref" "$got" "$FP8_TOL" 8 >"$tmp/gap.txt" ||
    { fail "$1: fp8 $got, fp32 $ref ($(cat "$tmp/gap.txt"))"; return 1; }
  echo "ok: $1: $(cat "$tmp/gap.txt")"
}

run gpt32 tiny-gpt 2
for r in delayed current blockwise; do
  run "gpt_$r" tiny-gpt 2 --precision fp8 --fp8-recipe "$r" && check "tiny-gpt dp 2, $r" gpt32 "gpt_$r"
done
# (fp32 runs of any plan agree within 1e-5: exec_matrix.sh; one reference serves)
run gpt_sp tiny-gpt 2 -t 2 --sp --precision fp8 --fp8-recipe current && check "tiny-gpt tp 2 sp, current" gpt32 gpt_sp
# torchao's order (the output gradients gathered in 16 bits, then cast whole) computes what TE's does (each shard
# cast at the amax reduced over TP, the codes gathered): the same codes, the same losses
if run gpt_sp_ao tiny-gpt 2 -t 2 --sp --precision fp8 --fp8-recipe current --fp8-library torchao; then
  [ "$(losses "$tmp/gpt_sp_ao.json")" = "$(losses "$tmp/gpt_sp.json")" ] ||
    fail "fp8 tp 2 sp: torchao's order $(losses "$tmp/gpt_sp_ao.json"), TE's $(losses "$tmp/gpt_sp.json")"
fi
# two sequences a micro-batch: the SP all-gather's permute carries the codes' scales (codes_permuted)
run gpt_sp2 tiny-gpt 2 -t 2 --sp --mbs 2 --precision fp8 && check "tiny-gpt tp 2 sp mbs 2, delayed" gpt32 gpt_sp2
run moe32 tiny-moe 2 -d 2 --ep 2 --moe-imbalance 2
run moe8 tiny-moe 2 -d 2 --ep 2 --moe-imbalance 2 --precision fp8 && check "tiny-moe ep 2, delayed" moe32 moe8
jq -se 'last | .parallel.fp8_base == "fp32"' "$tmp/moe8.json" >/dev/null || fail "run --backend cpu: fp8_base is not fp32"

# Resume: 4 steps straight equal 2 steps, a stop and 2 more, bitwise (losses and the step-4
# checkpoints, byte for byte), for each recipe: delayed scaling's amax histories are in the
# checkpoint. tp 2 x dp 2 (the amaxes reduced over TP, each DP replica its own), and tiny-moe
# with experts over 2 ranks (reduced over EP).
resume() { # name ranks flags...
  local name=$1 n=$2 d="$tmp/resume-$1"
  shift 2
  local r=(timeout 120 mpirun -np "$n" "$px" run --backend cpu -B 8 --precision fp8 --json "$@")
  "${r[@]}" --steps 4 --ckpt "$d/straight" >"$d.full.json" 2>"$tmp/err.txt" &&
    "${r[@]}" --steps 2 --ckpt "$d/ck" >"$d.first.json" 2>>"$tmp/err.txt" &&
    "${r[@]}" --steps 4 --ckpt "$d/ck" --resume >"$d.second.json" 2>>"$tmp/err.txt" ||
    { fail "resume $name: $(grep -v '^---\|^ *$' "$tmp/err.txt" | head -3)"; return; }
  local full joined
  full=$(losses "$d.full.json")
  joined="$(losses "$d.first.json"),$(losses "$d.second.json")"
  [ "$full" = "$joined" ] || { fail "resume $name: $joined, straight $full"; return; }
  for f in "$d/straight"/shard-*.bin; do
    cmp -s "$f" "$d/ck/$(basename "$f")" || { fail "resume $name: $(basename "$f") differs from the straight run's"; return; }
  done
  echo "ok: resume $name: bitwise ($joined)"
}
for r in delayed current blockwise; do resume "$r" 4 -m tiny-gpt -t 2 -d 2 --fp8-recipe "$r"; done
resume "moe delayed" 2 -m tiny-moe -d 2 --ep 2 --moe-imbalance 2
tr -d '\0' <"$tmp/resume-delayed/ck/shard-0.bin" | grep -q fp8_amax || fail "no fp8_amax in a delayed-scaling checkpoint"

err=$(mpirun -np 2 "$px" run --backend cpu -m tiny-gpt -t 2 --sp --precision fp8 --fp8-recipe blockwise --steps 1 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q "blockwise.*hint: --fp8-recipe current" || fail "blockwise with SP: $err"
cuda_refuses "blockwise" 1 -m tiny-gpt --precision fp8 --fp8-recipe blockwise --steps 1
# fp8 weights (--fp8-params) are planned and simulated: the executor refuses the plan on every backend, naming
# the flag (the cpu backend's fp32 weights refuse them earlier: sim.sh; the walk itself: test_backend_ops)
cuda_refuses "fp8 weights (--fp8-params)" 1 -m tiny-gpt --precision fp8 --fp8-recipe current --fp8-params --steps 1
finish
