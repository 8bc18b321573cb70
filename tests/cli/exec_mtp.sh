#!/usr/bin/env bash
# The MTP module (--mtp-layers 1, plan/compile.c) on the CPU executor: its
# multi-rank plans (PP with the last stage's copy of the embedding reduced
# with the first's, interleaved and zero-bubble schedules, ZeRO-1 and -2, full
# and selective recomputation, two sequences a micro-batch, TP with and
# without SP: the projection's columns gathered, a MoE module under EP) reach the losses and first-step gradients of its one-rank run
# within 1e-5 over 8 steps, every stage's measured peak its plan's (the
# gradients themselves: tests/test_exec.c's finite differences). The module
# changes the training (the losses differ from the same model's without it)
# and logs its own loss, which falls; --mtp-loss-scale 0.3 trains otherwise from the second step and may
# change on a resume (refused without the module). A checkpoint written under one plan
# resumes under another to the straight run's losses; a plan without the module
# refuses one written with it, by name. Under CP (each algorithm, with TP + SP,
# PP and EP) the module's targets are each position's own, loaded from the whole
# sequence: a CP chunk's last position takes the next chunk's token. fp8 under TP
# (and SP, PP) within fp8's tolerance of one rank. Refused by name: ZeRO-3 (the
# planner), the CUDA backend (its loss kernels).
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
cp "$src/models/tiny-mtp.json" "$tmp/" # the preset (tiny with one module); the others made as it is
jq '.name = "tiny-mla-mtp" | .mtp_layers = 1' "$src/models/tiny-mla.json" >"$tmp/tiny-mla-mtp.json"
jq '.name = "tiny-moe-mtp" | .mtp_layers = 1' "$src/models/tiny-moe.json" >"$tmp/tiny-moe-mtp.json"

run() { # out model gbs ranks flags... (the model in $tmp)
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$tmp/$model.json" --steps 8 -B "$gbs" --mtp-layers 1 "$@"
}

# model ranks | flags: each against the model's one-rank run (gbs 4)
cases=(
  "tiny-mtp 2|-p 2"
  "tiny-mtp 2|-p 2 --vpp 2"
  "tiny-mtp 2|-p 2 -e zb-h1"
  "tiny-mtp 2|-d 2 -z 1"
  "tiny-mtp 2|-d 2 -z 2"
  "tiny-mtp 1|-b 2 -r full"
  "tiny-mtp 4|-p 2 -d 2 -z 1 -r selective"
  "tiny-mtp 2|-t 2"
  "tiny-mtp 2|-t 2 -S -b 2"
  "tiny-mtp 4|-t 2 -S -p 2"
  "tiny-mla-mtp 2|-p 2"
  "tiny-mla-mtp 2|-t 2 -S"
  "tiny-mla-mtp 1|-b 2"
  "tiny-moe-mtp 2|--ep 2 -d 2 -z 1"
  "tiny-moe-mtp 2|-p 2"
  "tiny-moe-mtp 2|-t 2 -S --ep 2 --etp 1"
  "tiny-mtp 2|--cp 2"
  "tiny-mtp 4|--cp 2 -t 2 -S --cp-algo all-gather"
  "tiny-mtp 4|--cp 2 -p 2 --cp-algo a2a"
  "tiny-moe-mtp 2|--cp 2 --ep 2"
)
run_cases "${cases[@]}"

# the module is there: without it the same model trains to other losses; its own loss is logged and falls
if cpu_run plain 1 -m "$tmp/tiny-mtp.json" --steps 8 -B 4; then
  close "$(losses "$tmp/plain.json")" "$(losses "$tmp/ref_tiny-mtp.json")" 1e-4 &&
    fail "--mtp-layers 1 trains tiny-mtp as without it: $(losses "$tmp/plain.json")"
  grep -q '"mtp_loss"' "$tmp/plain.json" && fail "a run without the module logs an mtp_loss"
else
  fail "tiny-mtp without the module: $(head -3 "$tmp/err.txt")"
fi
if mpirun -np 1 "$px" run --backend cpu -m "$tmp/tiny-mtp.json" --steps 8 -B 4 --mtp-layers 1 >"$tmp/log.txt" 2>&1; then
  first=$(grep -o 'mtp loss [0-9.]*' "$tmp/log.txt" | head -1 | cut -d' ' -f3)
  last=$(grep -o 'mtp loss [0-9.]*' "$tmp/log.txt" | tail -1 | cut -d' ' -f3)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5 && a < 6 && b < a) }' ||
    fail "the MTP loss logged: $first then $last"
else
  fail "the MTP run's log: $(head -3 "$tmp/log.txt")"
fi

# --mtp-loss-scale weighs the module's loss (DeepSeek-V3 trained at 0.3, then 0.1): the first step's losses as the
# default's, the next ones not (its gradients, by finite differences, in test_exec); changed on a resume, as there
if cpu_run scaled 1 -m "$tmp/tiny-mtp.json" --steps 8 -B 4 --mtp-layers 1 --mtp-loss-scale 0.3; then
  close "$(losses "$tmp/scaled.json" | cut -d, -f1)" "$(losses "$tmp/ref_tiny-mtp.json" | cut -d, -f1)" 1e-6 ||
    fail "--mtp-loss-scale 0.3 changed the first step's loss: $(losses "$tmp/scaled.json")"
  close "$(losses "$tmp/scaled.json")" "$(losses "$tmp/ref_tiny-mtp.json")" 1e-4 &&
    fail "--mtp-loss-scale 0.3 trains as 0.1: $(losses "$tmp/scaled.json")"
else
  fail "--mtp-loss-scale 0.3: $(head -3 "$tmp/err.txt")"
fi
if run first tiny-mtp 4 1 --steps 3 --ckpt "$tmp/cks" --mtp-loss-scale 0.3 &&
  run second tiny-mtp 4 1 --steps 6 --ckpt "$tmp/cks" --resume; then
  echo "ok: a checkpoint of --mtp-loss-scale 0.3 resumed at 0.1"
else
  fail "--mtp-loss-scale changed on a resume: $(head -3 "$tmp/err.txt")"
fi

# a checkpoint re-split for another plan: steps 4-6 as the straight run's
if run straight tiny-mtp 4 2 -p 2 && run first tiny-mtp 4 2 -p 2 --steps 3 --ckpt "$tmp/ck" &&
  run second tiny-mtp 4 2 -d 2 -z 1 --steps 6 --ckpt "$tmp/ck" --resume; then
  want=$(losses "$tmp/straight.json" | cut -d, -f4-6)
  close "$want" "$(losses "$tmp/second.json")" 1e-5 && echo "ok: tiny-mtp -p 2, resumed with -d 2 -z 1" ||
    fail "tiny-mtp -p 2 to -d 2 -z 1: $(losses "$tmp/second.json"), straight $want"
else
  fail "tiny-mtp checkpoint: $(head -3 "$tmp/err.txt")"
fi
# ... but not by a plan without the module, nor the other way
if cpu_run noplain 1 -m "$tmp/tiny-mtp.json" -B 4 --steps 6 --ckpt "$tmp/ck" --resume; then
  fail "a checkpoint with the MTP module resumed without it"
else
  grep -q "written by a plan training 1 MTP modules, this plan trains 0" "$tmp/err.txt" ||
    fail "the refusal of a checkpoint with the module: $(head -3 "$tmp/err.txt")"
fi

# fp8 under TP: the projection's backward reads this rank's columns of its quantized output gradient (the
# codes the cast wrote, not the gradient: the columns had been read as whole rows, every eh_proj gradient wrong);
# the losses and the module's within fp8's tolerance of the one-rank fp8 run (each TP rank's weight shard has its
# own scale, as in Transformer Engine; the parity matrix's 0.005 nats over 3 steps)
if cpu_run f8one 1 -m "$tmp/tiny-mtp.json" -B 8 --steps 3 --mtp-layers 1 -P fp8 --fp8-base fp32; then
  for c in "2|-t 2" "2|-t 2 -S -b 2" "4|-t 2 -S -p 2"; do
    IFS='|' read -r n f <<<"$c"
    # shellcheck disable=SC2086
    cpu_run f8tp "$n" -m "$tmp/tiny-mtp.json" -B 8 --steps 3 --mtp-layers 1 -P fp8 --fp8-base fp32 $f ||
      { fail "fp8 $f: $(head -3 "$tmp/err.txt")"; continue; }
    g=$(worst_gap "$(losses "$tmp/f8one.json")" "$(losses "$tmp/f8tp.json")")
    m=$(worst_gap "$(mtp_losses "$tmp/f8one.json")" "$(mtp_losses "$tmp/f8tp.json")")
    awk -v g="$g" -v m="$m" 'BEGIN { exit !(g <= 0.005 && m <= 0.005) }' &&
      echo "ok: tiny-mtp fp8 $f: loss gap $g, MTP loss gap $m" || fail "tiny-mtp fp8 $f: loss gap $g, MTP loss gap $m"
  done
else
  fail "tiny-mtp fp8 on one rank: $(head -3 "$tmp/err.txt")"
fi

# refused by name where the executors do not run it
err=$("$px" plan -m "$tmp/tiny-mtp.json" -c local-cpu -g 2 -d 2 -z 3 -B 4 --mtp-layers 1 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q -- "--mtp-layers with --zero 3: the MTP module reads the output layer" ||
  fail "MTP with ZeRO-3 (the planner's): $err"
err=$("$px" plan -m "$tmp/tiny-mtp.json" -c local-cpu -g 1 -B 4 --mtp-loss-scale 0.3 2>&1 >/dev/null)
[ $? -eq 2 ] && echo "$err" | grep -q -- "--mtp-loss-scale 0.3 weighs the loss of an MTP module, and the plan trains none" ||
  fail "--mtp-loss-scale without the module: $err"
cuda_refuses "the MTP module's loss" 1 -m "$tmp/tiny-mtp.json" --steps 1 -B 4 --mtp-layers 1
finish
