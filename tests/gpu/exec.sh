#!/usr/bin/env bash
# The CUDA backend end to end: parallax run --backend cuda against
# --backend cpu of the same binary on the same plans, on a GPU or on the
# emulated ones of tests/gpu/emu (where PX_EMU_DEVICES sets the device count).
# fp32: losses and first-step gradients within 1e-5 (relative), over NCCL
# (one device per rank) and over the MPI fallback (ranks outnumber devices);
# Qwen3's q/k norms, gpt-oss's sinks, recomputed modules and per-op recomputation too, and in bf16 against fp32.
# bf16: within bf16's precision of the fp32 run, bitwise deterministic, and a
# resumed run equals an uninterrupted one bitwise, also when its checkpoint
# was re-split to fp32 and back. LoRA on a frozen base in the compute dtype,
# nf4 (QLoRA) or fp8: as the cpu backend in fp32, bf16 QLoRA within bf16's
# precision of fp32. fp8 (per-tensor scales): resumed with delayed
# scaling, bitwise (the amax histories checkpointed); with an fp32 base
# within 5e-4 of the cpu backend's emulation, with the bf16 base within 0.03
# nats of bf16, with every layer kept in bf16 (--bf16-layers-end) the bf16 run bitwise, and refused
# on a GPU without fp8. fp16: within 2e-3 of fp32,
# and an overflowing loss scale skips steps and comes down. The MTP module is refused by name. Exits 77 (skipped) without
# a CUDA device.
#   exec.sh PARALLAX GRADCMP REPO
set -u
px=$1
cmp=$2
root=$3
source "$(dirname "$0")/../tools/clitest.sh"
export PARALLAX_HOME=$root ASAN_OPTIONS=detect_leaks=0
if ! err=$("$px" run --backend cuda -m tiny -B 1 --steps 1 --precision fp32 2>&1); then
  echo "$err" | grep -q "no CUDA device\|no CUDA backend" && { echo "SKIPPED: $err"; exit 77; }
  echo "the probe run failed: $err"
  exit 1
fi
run() { # name ranks backend flags...: losses in $tmp/name.json, gradients in $tmp/name.bin
  local name=$1 n=$2 be=$3
  shift 3
  timeout 300 mpirun -np "$n" "$px" run --backend "$be" --json --dump-grads "$tmp/$name.bin" "$@" >"$tmp/$name.json" \
    2>"$tmp/$name.err" || { fail "$name: $(grep -v WARNING "$tmp/$name.err" | head -3)"; return 1; }
}
# cuda against cpu on one plan: name ranks devices flags...
same() {
  local name=$1 n=$2 dev=$3
  shift 3
  run "$name-cpu" "$n" cpu "$@" || return
  PX_EMU_DEVICES=$dev run "$name-cuda" "$n" cuda "$@" || return
  local a b
  a=$(losses "$tmp/$name-cpu.json") b=$(losses "$tmp/$name-cuda.json")
  close "$a" "$b" 1e-5 || fail "$name: cuda losses $b, cpu $a"
  "$cmp" "$tmp/$name-cpu.bin" "$tmp/$name-cuda.bin" >"$tmp/cmp" || fail "$name gradients: $(cat "$tmp/cmp")"
  # the plan's two arenas (model states, the step's tensors) held everything
  ! grep -q "beyond the plan" "$tmp/$name-cuda.err" || fail "$name: $(grep "beyond the plan" "$tmp/$name-cuda.err")"
  echo "ok: $name ($n ranks, $dev devices): $(cat "$tmp/cmp")"
}

# GPT-2-shaped with dropout everywhere (hidden, attention probabilities)
sed 's/"dropout": 0.0/"dropout": 0.1/; s/"name": "tiny-gpt"/"name": "tiny-gpt-dropout"/' \
  "$root/models/tiny-gpt.json" >"$tmp/tiny-gpt-dropout.json"
gptd=$tmp/tiny-gpt-dropout.json
fp32=(-c dgx-h100 --precision fp32 --steps 2)

# (one rank of the Llama shape in fp32: every op of it also runs in llama-sp-zero3 and the plans after it)
same gpt-unfused 1 1 -m "$gptd" -B 4 --attention unfused "${fp32[@]}"
# selective recomputation's modules (the norms, the MLP, the unfused core attention made again in the backward)
same gpt-modules 2 2 -m "$gptd" -B 4 -t 2 -S --attention unfused --recompute-modules core_attn,layernorm,mlp "${fp32[@]}"
# torchtitan's per-op recomputation: k's and up's projections from part of their fused weights, RoPE from q's kept
# projection, under TP with SP
same op-recompute 2 2 -m tiny-qknorm -B 4 -t 2 -S -r op "${fp32[@]}"
same gpt-3d-nccl 8 8 -m "$gptd" -B 8 -t 2 -p 2 -d 2 -z 1 "${fp32[@]}"
same gpt-3d-mpi 8 1 -m "$gptd" -B 8 -t 2 -p 2 -d 2 -z 1 "${fp32[@]}"
grep -q "staged in host memory" "$tmp/gpt-3d-mpi-cuda.err" || fail "the MPI fallback was not announced"
same llama-sp-zero3 4 4 -m tiny -B 4 -t 2 -d 2 -z 3 -S "${fp32[@]}"
# TP collectives on their own stream: compute waits for each only where its tensors are used; in
# the zero-bubble order, whose W blocks gather their SP inputs and output gradients again
same gpt-tp-overlap-zb 4 4 -m "$gptd" -B 4 -t 2 -p 2 -S --overlap all -e zb-h2 "${fp32[@]}"
# an 8-token sliding window on every other layer, fused (two batch rows in a launch) and unfused
same window-flash 2 2 -m tiny-window -B 4 -b 2 -t 2 "${fp32[@]}"
same window-unfused 1 1 -m tiny-window -B 2 --attention unfused "${fp32[@]}"
# Qwen3's per-head q/k norms (RMSNorms of head_dim rows) and gpt-oss's attention sinks (a logit per query
# head, split over TP): fused on one rank (two batch rows in a launch) and under TP with SP, unfused on one rank
same qknorm-flash 1 1 -m tiny-qknorm -B 4 -b 2 "${fp32[@]}"
same qknorm-tp-sp 2 2 -m tiny-qknorm -B 4 -t 2 -S "${fp32[@]}"
same sinks-flash 1 1 -m tiny-sinks -B 4 -b 2 "${fp32[@]}"
same sinks-tp-sp 2 2 -m tiny-sinks -B 4 -t 2 -S "${fp32[@]}"
same sinks-unfused 1 1 -m tiny-sinks -B 2 --attention unfused "${fp32[@]}"
# LoRA adapters on a frozen base (every projection's, TP-split with the layers), the GPT-2 shape too
same lora-tp 2 2 -m tiny -B 4 -t 2 --finetune lora --lora-targets qkv,o,fc1,fc2 "${fp32[@]}"
same lora-gpt 1 1 -m "$gptd" -B 2 --finetune lora "${fp32[@]}"
# the frozen base stored in nf4 (QLoRA: double-quantised absmaxes) or fp8 (E4M3, a per-tensor scale), dequantised
# before each GEMM that reads it: the same values as the cpu backend's decode, bit for bit
same qlora-tp 2 2 -m tiny -B 4 -t 2 --finetune qlora --lora-targets qkv,o,fc1,fc2 "${fp32[@]}"
same qlora-gpt 1 1 -m "$gptd" -B 2 --finetune qlora "${fp32[@]}"
same lora-fp8-base-tp 2 2 -m tiny -B 4 -t 2 --finetune lora --base-precision fp8 --lora-targets qkv,o,fc1,fc2 "${fp32[@]}"
same lora-fp8-base-gpt 1 1 -m "$gptd" -B 2 --finetune lora --base-precision fp8 "${fp32[@]}"
# GELU in the fc1 GEMM's epilogue and its gradient in fc2's (cuBLASLt GELU_AUX_BIAS, DGELU)
same gpt-gelu-fused 2 2 -m "$gptd" -B 4 -t 2 --gelu fused "${fp32[@]}"
PX_EMU_DEVICES=2 run gpt-gelu-fused-bf16 2 cuda -m "$gptd" -B 4 -t 2 --gelu fused -c dgx-h100 --precision bf16 --steps 2
a=$(losses "$tmp/gpt-gelu-fused-cpu.json") b=$(losses "$tmp/gpt-gelu-fused-bf16.json")
close "$a" "$b" 2e-3 || fail "bf16 fused GELU losses $b, fp32 $a"
"$cmp" "$tmp/gpt-gelu-fused-cpu.bin" "$tmp/gpt-gelu-fused-bf16.bin" 2e-2 >"$tmp/cmp" || fail "bf16 fused GELU gradients: $(cat "$tmp/cmp")"
echo "ok: bf16 with fused GELU against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"
# fp16 on the GPT shape (layernorm, GELU, dropout, learned positions, TP loss), every op native fp16
PX_EMU_DEVICES=2 run gpt-fp16 2 cuda -m "$gptd" -B 4 -t 2 --gelu fused -c dgx-h100 --precision fp16 --steps 2
b=$(losses "$tmp/gpt-fp16.json")
close "$a" "$b" 2e-3 || fail "fp16 GPT losses $b, fp32 $a"
"$cmp" "$tmp/gpt-gelu-fused-cpu.bin" "$tmp/gpt-fp16.bin" 2e-2 >"$tmp/cmp" || fail "fp16 GPT gradients: $(cat "$tmp/cmp")"
echo "ok: fp16 GPT against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"
same llama-interleaved-zero2 4 4 -m tiny -B 8 -p 2 -v 2 -e interleaved -d 2 -z 2 "${fp32[@]}"
# ZeRO-3's modes: parameters kept from forward to backward with a deeper prefetch; full accumulation
same llama-zero3-keep 4 4 -m tiny -B 8 -p 2 -d 2 -z 3 --no-reshard-after-forward --prefetch 2 "${fp32[@]}"
same gpt-zero3-full 2 2 -m "$gptd" -B 8 -d 2 -z 3 --grad-accum full "${fp32[@]}"
# hybrid sharding: the NCCL shard and replica communicators (shard groups of 2 of dp 4)
same llama-hybrid-zero3 4 4 -m tiny -B 16 -d 4 -z 3 --shard-group 2 "${fp32[@]}"
# offload: gradient shards downloaded and summed on the host, AdamW on the host, parameters uploaded
same llama-offload-zero3 4 4 -m tiny -B 8 -p 2 -d 2 -z 3 --offload-optimizer cpu --offload-params cpu "${fp32[@]}"
# activation offload: the first 2 layers' kept tensors downloaded after their forward, uploaded before their backward
same llama-offload-act 2 2 -m tiny -B 4 -d 2 -z 3 --offload-activations 2 "${fp32[@]}"

# a device smaller than the plan's predicted peak: refused at start-up, with
# the figures (emulated devices only: their memory size can be set)
if [ -z "${PX_EMU:-}" ]; then
  :
elif PX_EMU_DEVICES=1 PX_EMU_MEMORY_MIB=2 timeout 300 mpirun -np 1 "$px" run --backend cuda -m tiny -B 4 --steps 1 \
  >"$tmp/small-gpu.out" 2>"$tmp/small-gpu.err"; then
  fail "a plan larger than the device ran"
elif ! grep -q "the plan needs .* GiB on GPU 0 .* 0.00 GiB of its 0.00 GiB are free" "$tmp/small-gpu.err"; then
  fail "a plan larger than the device: $(grep -v WARNING "$tmp/small-gpu.err" | head -3)"
else
  echo "ok: a plan larger than the device is refused at start-up"
fi

# an op the backend cannot run (flash attention with a head dim beyond its
# kernels' 256): refused at start-up by supports_op, one line from rank 0, exit 2
sed 's/"heads": 4,/"heads": 4, "head_dim": 320,/; s/"name": "tiny-gpt"/"name": "tiny-gpt-d320"/' \
  "$root/models/tiny-gpt.json" >"$tmp/tiny-gpt-d320.json"
PX_EMU_DEVICES=2 timeout 300 mpirun -np 2 "$px" run --backend cuda -m "$tmp/tiny-gpt-d320.json" -c dgx-h100 -t 2 -B 2 \
  --steps 1 --attention flash >"$tmp/d320.out" 2>"$tmp/d320.err"
rc=$?
# (less a notice that ranks outnumber devices, as on a machine with one GPU)
said=$(grep "parallax:" "$tmp/d320.err" | grep -v "staged in host memory")
if [ "$rc" -eq 2 ] && [ "$(echo "$said" | wc -l)" -eq 1 ] &&
  echo "$said" | grep -q "cuda cannot run this plan: flash_attn (bf16): head dim 320.*--attention unfused"; then
  echo "ok: an op the backend cannot run is refused at start-up: $said"
else
  fail "head dim 320 on the cuda backend: exit $rc, $(grep -v WARNING "$tmp/d320.err" | head -3)"
fi
# the MTP module's loss (its targets shifted once more): refused by name, exit 2
sed 's/"name": "tiny"/"name": "tiny-mtp", "mtp_layers": 1/' "$root/models/tiny.json" >"$tmp/tiny-mtp.json"
PX_EMU_DEVICES=1 timeout 300 "$px" run --backend cuda -m "$tmp/tiny-mtp.json" -c dgx-h100 -B 2 --steps 1 --mtp-layers 1 \
  >/dev/null 2>"$tmp/mtp.err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "cuda cannot run this plan: loss.*the MTP module's loss" "$tmp/mtp.err"; then
  echo "ok: the MTP module is refused by name: $(grep "parallax:" "$tmp/mtp.err" | head -1)"
else
  fail "the MTP module on the cuda backend: exit $rc, $(grep -v WARNING "$tmp/mtp.err" | head -3)"
fi

# bf16: against the fp32 run of the same plan
run bf16-ref 1 cpu -m tiny -B 4 --precision fp32 --steps 3
PX_EMU_DEVICES=1 run bf16-1 1 cuda -m tiny -B 4 --precision bf16 --steps 3
a=$(losses "$tmp/bf16-ref.json") b=$(losses "$tmp/bf16-1.json")
close "$a" "$b" 2e-3 || fail "bf16 losses $b, fp32 $a"
"$cmp" "$tmp/bf16-ref.bin" "$tmp/bf16-1.bin" 2e-2 >"$tmp/cmp" || fail "bf16 gradients: $(cat "$tmp/cmp")"
echo "ok: bf16 against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"
# bf16 q/k norms and sinks (the tensor-core flash kernels, head dim 16) against the fp32 run
for m in tiny-qknorm tiny-sinks; do
  run "$m-ref" 1 cpu -m $m -B 4 --precision fp32 --steps 3
  PX_EMU_DEVICES=1 run "$m-bf16" 1 cuda -m $m -B 4 --precision bf16 --steps 3
  a=$(losses "$tmp/$m-ref.json") b=$(losses "$tmp/$m-bf16.json")
  close "$a" "$b" 2e-3 || fail "bf16 $m losses $b, fp32 $a"
  "$cmp" "$tmp/$m-ref.bin" "$tmp/$m-bf16.bin" 2e-2 >"$tmp/cmp" || fail "bf16 $m gradients: $(cat "$tmp/cmp")"
  echo "ok: bf16 $m against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"
done
# bf16 LoRA (a bf16 frozen base, the adapters' master weights fp32) against the fp32 run
run lora-ref 1 cpu -m tiny -B 4 --finetune lora --precision fp32 --steps 3
PX_EMU_DEVICES=1 run lora-bf16 1 cuda -m tiny -B 4 --finetune lora --precision bf16 --steps 3
a=$(losses "$tmp/lora-ref.json") b=$(losses "$tmp/lora-bf16.json")
close "$a" "$b" 2e-3 || fail "bf16 LoRA losses $b, fp32 $a"
"$cmp" "$tmp/lora-ref.bin" "$tmp/lora-bf16.bin" 2e-2 >"$tmp/cmp" || fail "bf16 LoRA gradients: $(cat "$tmp/cmp")"
echo "ok: bf16 LoRA against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"
# bf16 QLoRA (the nf4 base dequantised into bf16) against the fp32 run
run qlora-ref 1 cpu -m tiny -B 4 --finetune qlora --precision fp32 --steps 3
PX_EMU_DEVICES=1 run qlora-bf16 1 cuda -m tiny -B 4 --finetune qlora --precision bf16 --steps 3
a=$(losses "$tmp/qlora-ref.json") b=$(losses "$tmp/qlora-bf16.json")
close "$a" "$b" 2e-3 || fail "bf16 QLoRA losses $b, fp32 $a"
"$cmp" "$tmp/qlora-ref.bin" "$tmp/qlora-bf16.bin" 2e-2 >"$tmp/cmp" || fail "bf16 QLoRA gradients: $(cat "$tmp/cmp")"
echo "ok: bf16 QLoRA against fp32: losses $b vs $a; gradients $(cat "$tmp/cmp")"

# fp8 (per-tensor scales, cuBLASLt E4M3 / E5M2 GEMMs): with an fp32 base against the cpu backend's
# emulation of the same plan (tp 2 with SP: the amax reduced over TP, codes all-gathered), within
# FP8_CUDA_RTOL (the same codes and scales, fp32 sums in another order: the first step agrees to
# ~1e-8; after an optimizer step a code at a rounding boundary can flip, 2^-4 of that element,
# and AdamW's first steps amplify such differences: 8e-5 at step 3); with the bf16 base against
# the bf16 run within FP8_TOL nats (tests/cli/exec_fp8.sh's tolerance against fp32); and refused by
# name on a GPU without fp8 (an A100's compute capability). On a real GPU the fp32 base is held to
# FP8_TOL nats of the emulation too: Hopper's fp8 tensor cores keep about 14 bits of the running sum
# (DeepSeek-V3 technical report, arXiv:2412.19437, section 3.3.2), not fp32's 24, so the sums differ
# from the first step on (an H200, 2026-11-28: 2.9e-6 at step 1, 6.3e-4 relative at step 3)
FP8_CUDA_RTOL=5e-4 FP8_TOL=0.03
f8=(-m tiny -B 4 --steps 3 --precision fp8)
fp8_gpu=1
if [ -n "${PX_EMU:-}" ]; then # the emulated device as an A100: refused at start-up, exit 2
  PX_EMU_DEVICES=1 PX_EMU_CC=8.0 timeout 300 mpirun -np 1 "$px" run --backend cuda -m tiny -B 4 --steps 1 \
    --precision fp8 >"$tmp/a100.out" 2>"$tmp/a100.err"
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "cuda cannot run this plan: .*compute capability 8.9.* is 8.0 (hint: --precision bf16)" "$tmp/a100.err"; then
    echo "ok: fp8 on an A100 (8.0) is refused at start-up: $(grep "parallax:" "$tmp/a100.err" | head -1)"
  else
    fail "fp8 on compute capability 8.0: exit $rc, $(grep -v WARNING "$tmp/a100.err" | head -3)"
  fi
elif ! err=$(timeout 300 mpirun -np 1 "$px" run --backend cuda -m tiny -B 4 --steps 1 --precision fp8 2>&1 >/dev/null) &&
  echo "$err" | grep -q "compute capability 8.9"; then # a real GPU without fp8: the refusal is the test
  echo "skip: fp8 runs: $(echo "$err" | grep "parallax:" | head -1)"
  fp8_gpu=0
fi
# fp8_base32 NAME RANKS FLAGS...: cuda with an fp32 base against the cpu backend's emulation (current scaling)
fp8_base32() {
  local name=$1 n=$2 a b
  shift 2
  run "$name-cpu" "$n" cpu "$@" --fp8-recipe current || return
  PX_EMU_DEVICES=$n run "$name-cuda" "$n" cuda "$@" --fp8-recipe current --fp8-base fp32 || return
  a=$(losses "$tmp/$name-cpu.json") b=$(losses "$tmp/$name-cuda.json")
  if { [ -n "${PX_EMU:-}" ] && close "$a" "$b" "$FP8_CUDA_RTOL"; } ||
    { [ -z "${PX_EMU:-}" ] && awk -v g="$(worst_gap "$a" "$b")" -v t="$FP8_TOL" 'BEGIN { exit !(g <= t) }'; }; then
    echo "ok: $name, fp32 base: cuda $b vs cpu $a"
  else
    fail "$name (fp32 base) cuda losses $b, cpu $a"
  fi
}
if [ "$fp8_gpu" -eq 1 ]; then
  fp8_base32 fp8-tp2-sp 2 "${f8[@]}" -t 2 -S
  fp8_base32 fp8-op-recompute 2 "${f8[@]}" -t 2 -S -r op # the fp8 GEMMs of part of a fused weight
  # the sinks' Hq logits leave the next weight's gradient off the 16-byte grid cuBLASLt's fp8 GEMMs write
  fp8_base32 fp8-sinks 1 -m tiny-sinks -B 4 --steps 3 --precision fp8
  # activation offload of fp8 codes: their scales follow them to the host and back
  fp8_base32 fp8-offload-act 2 "${f8[@]}" -d 2 --offload-activations 2
  PX_EMU_DEVICES=1 run fp8-bf16 1 cuda "${f8[@]}" --fp8-recipe delayed
  a=$(losses "$tmp/bf16-1.json") b=$(losses "$tmp/fp8-bf16.json")
  gap=$(worst_gap "$a" "$b")
  if awk -v g="$gap" -v t="$FP8_TOL" 'BEGIN { exit !(g <= t) }'; then
    echo "ok: fp8 delayed, bf16 base, against bf16: worst gap $gap nats ($b vs $a)"
  else
    fail "fp8 delayed (bf16 base) losses $b, bf16 $a: gap $gap"
  fi
  # every layer kept out of fp8 (--bf16-layers-end, current scaling): no op flagged fp8, so the bf16 run bitwise
  PX_EMU_DEVICES=1 run fp8-kept 1 cuda "${f8[@]}" --fp8-recipe current --bf16-layers-end 4
  [ "$(losses "$tmp/fp8-kept.json")" = "$a" ] && echo "ok: fp8 with every layer kept in bf16: the bf16 run's losses" ||
    fail "fp8 with every layer kept in bf16: $(losses "$tmp/fp8-kept.json"), bf16 $a"
  # delayed scaling's amax histories are in the checkpoint: 1 step, a stop and 2 more are the 3 straight, bitwise
  d8=(-m tiny -B 4 --precision fp8 --fp8-recipe delayed)
  PX_EMU_DEVICES=1 run fp8-first 1 cuda "${d8[@]}" --steps 1 --ckpt "$tmp/ck8" &&
    PX_EMU_DEVICES=1 run fp8-second 1 cuda "${d8[@]}" --steps 3 --ckpt "$tmp/ck8" --resume &&
    { joined="$(losses "$tmp/fp8-first.json"),$(losses "$tmp/fp8-second.json")"
      [ "$joined" = "$b" ] && echo "ok: fp8 delayed on cuda: resume exact ($joined)" ||
        fail "fp8 delayed resumed on cuda: $joined, straight $b"; }
fi

# bf16 on 8 ranks: deterministic (a second run's first steps, losses and first-step gradients, are the
# first run's bitwise), and resume equals no stop
bf=(-m "$gptd" -B 8 -t 2 -p 2 -d 2 -z 1 --precision bf16)
export PX_EMU_DEVICES=8
run bf16-a 8 cuda "${bf[@]}" --steps 4
run bf16-first 8 cuda "${bf[@]}" --steps 2 --ckpt "$tmp/ck"
"$cmp" "$tmp/bf16-a.bin" "$tmp/bf16-first.bin" --exact >/dev/null || fail "bf16 runs' gradients differ"
cp -r "$tmp/ck" "$tmp/ck-at2"
run bf16-second 8 cuda "${bf[@]}" --steps 4 --ckpt "$tmp/ck" --resume
joined="$(losses "$tmp/bf16-first.json"),$(losses "$tmp/bf16-second.json")"
[ "$joined" = "$(losses "$tmp/bf16-a.json")" ] || fail "bf16 runs differ (deterministic, resumed): $joined vs $(losses "$tmp/bf16-a.json")"
echo "ok: bf16 on 8 ranks: deterministic, resume exact ($joined)"

# Resharding in mixed precision: the bf16 checkpoint re-split for one rank in fp32 and back
# resumes bitwise (the fp32 master weights go across exactly, the bf16 weights are their
# rounding), and re-split for tp 2 as the run loads it, within bf16's precision
tail2=$(losses "$tmp/bf16-a.json" | cut -d, -f3-)
"$px" reshard --from "$tmp/ck-at2" --to "$tmp/ck-fp32" -d 1 --precision fp32 >/dev/null 2>"$tmp/reshard.err" &&
  "$px" reshard --from "$tmp/ck-fp32" --to "$tmp/ck-back" -t 2 -p 2 -d 2 -z 1 --precision bf16 >/dev/null \
    2>>"$tmp/reshard.err" || fail "bf16 -> fp32 -> bf16: $(grep -v WARNING "$tmp/reshard.err")"
run bf16-back 8 cuda "${bf[@]}" --steps 4 --ckpt "$tmp/ck-back" --resume &&
  { [ "$(losses "$tmp/bf16-back.json")" = "$tail2" ] || fail "bf16 -> fp32 -> bf16: $(losses "$tmp/bf16-back.json") vs $tail2"; }
PX_EMU_DEVICES=2 run bf16-tp2 2 cuda -m "$gptd" -B 8 -t 2 --precision bf16 --steps 4 --ckpt "$tmp/ck-at2" --resume &&
  { close "$tail2" "$(losses "$tmp/bf16-tp2.json")" 2e-3 || fail "bf16 re-split for tp 2: $(losses "$tmp/bf16-tp2.json") vs $tail2"; }
echo "ok: bf16 resharding: 8 ranks -> 1 in fp32 -> 8 exact; -> tp 2 $(losses "$tmp/bf16-tp2.json") vs $tail2"

# fp16 with dynamic loss scaling: against fp32 (gradients unscaled), and an
# initial scale that overflows: steps are skipped and the scale halves until
# the gradients fit, after which training goes on
PX_EMU_DEVICES=2 run fp16 2 cuda -m tiny -B 4 -d 2 -z 1 --precision fp16 --steps 3
a=$(losses "$tmp/bf16-ref.json") b=$(losses "$tmp/fp16.json")
close "$a" "$b" 2e-3 || fail "fp16 losses $b, fp32 $a"
"$cmp" "$tmp/bf16-ref.bin" "$tmp/fp16.bin" 2e-2 >"$tmp/cmp" || fail "fp16 gradients: $(cat "$tmp/cmp")"
grep -q '"skipped_steps":	0' "$tmp/fp16.json" || fail "fp16 skipped steps at the default scale"
# the backend's own memory (the 32 MiB cuBLASLt workspace, scratch such as the
# loss's fp32 logits) is reported beside the plan's
own=$(grep -o '"backend_bytes":[^,]*' "$tmp/fp16.json" | sed 's/.*://' | tr -d ' \t')
awk -v b="${own:-0}" 'BEGIN { exit !(b > 33554432) }' || fail "fp16 backend memory not reported: ${own:-none}"
echo "ok: fp16 against fp32: losses $b; gradients $(cat "$tmp/cmp")"
PX_EMU_DEVICES=1 run fp16-overflow 1 cuda -m tiny -B 4 --precision fp16 --steps 8 --loss-scale 3e7
skipped=$(grep -o '"skipped_steps":[^,]*' "$tmp/fp16-overflow.json" | sed 's/.*://' | tr -d ' \t')
scale=$(grep -o '"loss_scale":[^,]*' "$tmp/fp16-overflow.json" | sed 's/.*://' | tr -d ' \t')
l=$(losses "$tmp/fp16-overflow.json")
awk -v k="$skipped" -v s="$scale" -v l="$l" 'BEGIN { n = split(l, x, ",");
  exit !(k >= 1 && k < n && s < 3e7 && s >= 1 && x[n] < x[1]) }' ||
  fail "overflow: skipped ${skipped:-?} steps, scale ${scale:-?}, losses $l"
echo "ok: fp16 overflow: $skipped steps skipped, scale now $scale"
# the scaler's state is checkpointed: stopping halfway changes nothing
PX_EMU_DEVICES=1 run fp16-first 1 cuda -m tiny -B 4 --precision fp16 --steps 4 --loss-scale 3e7 --ckpt "$tmp/ck16"
PX_EMU_DEVICES=1 run fp16-second 1 cuda -m tiny -B 4 --precision fp16 --steps 8 --loss-scale 3e7 --ckpt "$tmp/ck16" --resume
joined="$(losses "$tmp/fp16-first.json"),$(losses "$tmp/fp16-second.json")"
[ "$joined" = "$l" ] || fail "fp16 resumed run differs: $joined vs $l"

finish
