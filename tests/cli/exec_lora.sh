#!/usr/bin/env bash
# parallax run --finetune lora (CPU backend): LoRA adapters trained on a frozen base. Step 0's loss is the
# base model's (B starts at zero); every split (TP, SP, PP, DP with ZeRO-1/2, CP) gives the 1-rank run's
# losses within 1e-5 and its first-step adapter gradients, with each rank's measured peak the plan's, on
# the Llama- and GPT-2-shaped tiny models; alpha / r scales the adapters; the frozen base is the same after 1
# step and after 4 (and each rank checks its own before and after); the loss falls on text; adapter-only
# checkpoints resume bitwise and are refused by a run on another base or plan; --finetune full is the
# pre-training run and resumes a pre-training checkpoint.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
lora=(--backend cpu -m tiny -B 8 --finetune lora --lora-rank 4 --lora-alpha 16)
refused() { # want cmd...: exit 2 and the message
  local want=$1 out rc
  shift
  out=$("$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$want" <<<"$out" || fail "$* (rc $rc): $out"
}

"$px" run "${lora[@]}" --steps 4 --json --dump-grads "$tmp/g1" >"$tmp/ref.json" 2>"$tmp/err" || fail "1 rank: $(cat "$tmp/err")"
ref=$(losses "$tmp/ref.json")
# B = 0: the first forward is the base model's, bitwise
"$px" run --backend cpu -m tiny -B 8 --steps 1 --json >"$tmp/base.json" 2>"$tmp/err" || fail "base: $(cat "$tmp/err")"
[ "$(losses "$tmp/base.json")" = "${ref%%,*}" ] || fail "step 0 is not the base's: ${ref%%,*} vs $(losses "$tmp/base.json")"
# the dump holds the adapters' gradients only (fp32): the plan's trained parameters on its one rank
want=$("$px" plan "${lora[@]:2}" -c local-cpu -g 1 --json | jq '.stages[0].params_per_gpu')
[ "$(stat -c %s "$tmp/g1")" = "$((4 * want))" ] || fail "dumped $(stat -c %s "$tmp/g1") bytes, not 4 x $want adapter gradients"
# the scale alpha / r: at step 0 (B = 0) dA is 0 and dB = (alpha / r) dy^T h, so alpha 32 doubles every gradient
# of alpha 16, bitwise (a power of 2)
"$px" run "${lora[@]}" --lora-alpha 32 --steps 1 --dump-grads "$tmp/g32" >/dev/null 2>"$tmp/err" || fail "alpha 32: $(cat "$tmp/err")"
"$cmp" "$tmp/g1" "$tmp/g32" --exact --scale 2 >"$tmp/cmp.txt" || fail "alpha 32's gradients are not twice alpha 16's"
"$cmp" "$tmp/g1" "$tmp/g32" --exact >/dev/null && fail "alpha 32's gradients are alpha 16's: the scale is not applied"

for split in "-t 2" "-t 2 --sp" "-p 2" "-d 2 -z 1" "-d 2 -z 2" "-t 2 -p 2 -d 2 -z 1 --sp" "--cp 2"; do
  # shellcheck disable=SC2086
  n=$(awk '{ n = 1; for (i = 1; i < NF; i++) if ($i ~ /^-(t|p|d)$|^--cp$/) n *= $(i + 1); print n }' <<<"$split")
  # shellcheck disable=SC2086
  if ! mpirun -np "$n" "$px" run "${lora[@]}" $split --steps 4 --json --dump-grads "$tmp/g2" >"$tmp/s.json" \
    2>"$tmp/err"; then
    fail "$split: $(head -3 "$tmp/err")"
    continue
  fi
  close "$ref" "$(losses "$tmp/s.json")" 1e-5 || fail "$split: losses $(losses "$tmp/s.json"), 1 rank $ref"
  "$cmp" "$tmp/g1" "$tmp/g2" >"$tmp/cmp.txt" || fail "$split: adapter gradients: $(cat "$tmp/cmp.txt")"
  jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$tmp/s.json" >/dev/null ||
    fail "$split: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/s.json")"
done

# GPT-2-shaped (LayerNorm, biases, GELU, learned positions, a tied embedding across stages) and HF PEFT's
# per-projection adapters (q, k, v, gate, up one each)
for other in "-m tiny-gpt" "-m tiny --lora-targets q,k,v,o,gate,up,fc2"; do
  # shellcheck disable=SC2086
  "$px" run "${lora[@]}" $other --steps 3 --json --dump-grads "$tmp/o1" >"$tmp/o1.json" 2>"$tmp/err" ||
    fail "$other: $(cat "$tmp/err")"
  # shellcheck disable=SC2086
  mpirun -np 8 "$px" run "${lora[@]}" $other -t 2 -p 2 -d 2 -z 2 --sp --steps 3 --json --dump-grads "$tmp/o2" \
    >"$tmp/o2.json" 2>"$tmp/err" || fail "$other on 8 ranks: $(head -3 "$tmp/err")"
  close "$(losses "$tmp/o1.json")" "$(losses "$tmp/o2.json")" 1e-5 ||
    fail "$other: losses $(losses "$tmp/o2.json"), 1 rank $(losses "$tmp/o1.json")"
  "$cmp" "$tmp/o1" "$tmp/o2" >"$tmp/cmp.txt" || fail "$other: adapter gradients: $(cat "$tmp/cmp.txt")"
done

# the frozen base: the same after 1 step as after 4 (the runs check each rank's before and after themselves)
"$px" run "${lora[@]}" --steps 1 --json >"$tmp/one.json" 2>"$tmp/err" || fail "1 step: $(cat "$tmp/err")"
h1=$(jq -rs 'last | .frozen_base_hash' "$tmp/one.json")
h4=$(jq -rs 'last | .frozen_base_hash' "$tmp/ref.json")
[[ "$h1" =~ ^0x[0-9a-f]{16}$ ]] && [ "$h1" = "$h4" ] || fail "the frozen base changed: $h1 after 1 step, $h4 after 4"
"$px" run "${lora[@]}" --steps 2 2>&1 | grep -q "frozen base (.*) unchanged by training" ||
  fail "the run does not say the frozen base is unchanged"

# the loss falls on text (byte-level Shakespeare), adapters only
"$px" run --backend cpu -m tiny -B 8 --steps 60 --lr 3e-3 --finetune lora --lora-rank 8 \
  --data "$src/tests/data/tinyshakespeare.txt" --json >"$tmp/text.json" 2>"$tmp/err" || fail "text: $(cat "$tmp/err")"
awk -v l="$(losses "$tmp/text.json")" 'BEGIN { n = split(l, x, ","); a = (x[1] + x[2] + x[3]) / 3;
  b = (x[n] + x[n-1] + x[n-2]) / 3; exit !(b < a - 0.2) }' || fail "the loss did not fall: $(losses "$tmp/text.json")"

# --base-ckpt: the frozen base from a run that trained every weight, any split. A checkpoint of weights as
# initialised (--lr 0) gives the run without it, bitwise; a pre-trained one starts low on text, equal across splits;
# resuming needs the same base
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 1 --lr 0 --ckpt "$tmp/init" >/dev/null \
  2>"$tmp/err" || fail "lr 0: $(cat "$tmp/err")"
"$px" run "${lora[@]}" --steps 4 --base-ckpt "$tmp/init" --json >"$tmp/b0.json" 2>"$tmp/err" || fail "--base-ckpt: $(cat "$tmp/err")"
grep -q "the frozen base is the weights of its checkpoint of step 1 (tp 1 x pp 1 x dp 2" "$tmp/err" ||
  fail "--base-ckpt does not say where the base comes from: $(cat "$tmp/err")"
[ "$(losses "$tmp/b0.json")" = "$ref" ] && [ "$(jq -rs 'last | .frozen_base_hash' "$tmp/b0.json")" = "$h4" ] ||
  fail "--base-ckpt of the initial weights: $(losses "$tmp/b0.json") vs $ref"
text=(--data "$src/tests/data/tinyshakespeare.txt" --lr 3e-3)
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 40 "${text[@]}" --ckpt "$tmp/pre40" >/dev/null \
  2>"$tmp/err" || fail "pre-training 40 steps: $(cat "$tmp/err")"
"$px" run "${lora[@]}" --steps 3 "${text[@]}" --base-ckpt "$tmp/pre40" --json >"$tmp/p1.json" 2>"$tmp/err" ||
  fail "--base-ckpt pre-trained: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${lora[@]}" -t 2 -p 2 --steps 3 "${text[@]}" --base-ckpt "$tmp/pre40" --ckpt "$tmp/lb" --json \
  >"$tmp/p4.json" 2>"$tmp/err" || fail "--base-ckpt pre-trained on 4 ranks: $(cat "$tmp/err")"
close "$(losses "$tmp/p1.json")" "$(losses "$tmp/p4.json")" 1e-5 ||
  fail "--base-ckpt across splits: $(losses "$tmp/p4.json"), 1 rank $(losses "$tmp/p1.json")"
awk -v l="$(losses "$tmp/p1.json")" 'BEGIN { split(l, x, ","); exit !(x[1] < 3.5) }' ||
  fail "a pre-trained base does not start low: $(losses "$tmp/p1.json")"
mpirun -np 4 "$px" run "${lora[@]}" -t 2 -p 2 --steps 4 "${text[@]}" --base-ckpt "$tmp/pre40" --ckpt "$tmp/lb" --resume \
  >/dev/null 2>"$tmp/err" || fail "resume with the base: $(cat "$tmp/err")"
refused "its adapters were trained on another frozen base" \
  mpirun -np 4 "$px" run "${lora[@]}" -t 2 -p 2 --steps 5 "${text[@]}" --ckpt "$tmp/lb" --resume
refused "and it is no base" "$px" run "${lora[@]}" --steps 1 --base-ckpt "$tmp/lb"
refused "--base-ckpt is the frozen base of a fine-tuning run with adapters" \
  "$px" run --backend cpu -m tiny -B 8 --steps 1 --base-ckpt "$tmp/init"

# --finetune full is the pre-training path, bitwise, and takes a pre-training run's checkpoint as its start
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 2 --ckpt "$tmp/pre" >/dev/null 2>"$tmp/err" ||
  fail "pre-training: $(cat "$tmp/err")"
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 4 --ckpt "$tmp/pre" --resume --json \
  >"$tmp/pre4.json" 2>"$tmp/err" || fail "pre-training resumed: $(cat "$tmp/err")"
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 2 --ckpt "$tmp/ft" >/dev/null 2>"$tmp/err" ||
  fail "pre-training for full: $(cat "$tmp/err")"
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --finetune full --steps 4 --ckpt "$tmp/ft" --resume \
  --json >"$tmp/ft4.json" 2>"$tmp/err" || fail "--finetune full from a pre-training checkpoint: $(cat "$tmp/err")"
grep -q "full fine-tuning" "$tmp/err" || fail "the re-split does not say full fine-tuning: $(cat "$tmp/err")"
[ "$(losses "$tmp/ft4.json")" = "$(losses "$tmp/pre4.json")" ] ||
  fail "--finetune full: $(losses "$tmp/ft4.json"), pre-training $(losses "$tmp/pre4.json")"

# adapter-only checkpoints: 3 steps, stop, resume to 6 equals 6 straight, bitwise; the shard of a 1-rank run
# holds the adapters' weights and Adam's two moments (fp32), not the base
split=(-t 2 -d 2 -z 1)
mpirun -np 4 "$px" run "${lora[@]}" "${split[@]}" --steps 6 --json >"$tmp/c6.json" 2>"$tmp/err" || fail "6 steps: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${lora[@]}" "${split[@]}" --steps 3 --ckpt "$tmp/ck" --json >"$tmp/c3.json" 2>"$tmp/err" ||
  fail "3 steps: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${lora[@]}" "${split[@]}" --steps 6 --ckpt "$tmp/ck" --resume --json >"$tmp/r6.json" \
  2>"$tmp/err" || fail "resume: $(cat "$tmp/err")"
[ "$(losses "$tmp/c3.json"),$(losses "$tmp/r6.json")" = "$(losses "$tmp/c6.json")" ] ||
  fail "resumed: $(losses "$tmp/c3.json"),$(losses "$tmp/r6.json"), straight $(losses "$tmp/c6.json")"
jq -e '.plan.frozen_base_hash | test("^0x[0-9a-f]{16}$")' "$tmp/ck/manifest.json" >/dev/null ||
  fail "the manifest does not name the frozen base"
"$px" run "${lora[@]}" --steps 1 --ckpt "$tmp/ck1" >/dev/null 2>"$tmp/err" || fail "1-rank checkpoint: $(cat "$tmp/err")"
bytes=$(stat -c %s "$tmp/ck1/shard-0.bin")
[ "$bytes" -ge $((12 * want)) ] && [ "$bytes" -lt $((12 * want + 4096)) ] ||
  fail "a 1-rank shard of $bytes bytes, not the adapters' 3 x 4 x $want and a header"
# the base is not in the checkpoint: another seed's base, another plan, a pre-training run are refused
refused "its adapters were trained on another frozen base" \
  mpirun -np 4 "$px" run "${lora[@]}" "${split[@]}" --seed 7 --steps 8 --ckpt "$tmp/ck" --resume
refused "a checkpoint is not re-split into a plan with adapters" \
  mpirun -np 4 "$px" run "${lora[@]}" -t 2 -d 2 -z 2 --steps 8 --ckpt "$tmp/ck" --resume
refused "holds the adapters of a fine-tuning run" \
  mpirun -np 4 "$px" run --backend cpu -m tiny -B 8 "${split[@]}" --steps 8 --ckpt "$tmp/ck" --resume

# an nf4 or fp8 base: tests/cli/exec_qlora.sh
finish
