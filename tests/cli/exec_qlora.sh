#!/usr/bin/env bash
# parallax run --finetune qlora and --base-precision fp8 (CPU backend): adapters trained on a frozen base whose
# linear weights are stored in NF4 with double quantisation (or per-tensor E4M3) and dequantised into fp32 before
# each GEMM. Each rank's measured peak is the plan's to the byte (the storage is the plan's px_lora_frozen_bytes);
# PP, CP and DP with ZeRO-1/2 give the 1-rank run's losses within 1e-5 (the same shards quantised); TP quantises each
# rank's shard on its own (its blocks of 64, the absmaxes' groups of 256 and their mean are the shard's, as
# bitsandbytes quantises the tensor it is given), another quantisation of the same weights, so it is held to the
# NF4 tolerance below. QLoRA against LoRA on the same pre-trained base: within the tolerance derived from the
# base's quantisation error, which the run prints; --base-ckpt quantises at load, a checkpoint of the initial
# weights giving the --seed run bitwise; adapters resume and merge into the full-precision base. Both backends run it.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"
ql=(--backend cpu -m tiny -B 8 --finetune qlora --lora-rank 4 --lora-alpha 16)
text=(--data "$src/tests/data/tinyshakespeare.txt" --lr 3e-3)
peak_ok() { jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$1" >/dev/null; }

for base in "--finetune qlora" "--finetune lora --base-precision fp8"; do
  # shellcheck disable=SC2086
  run=(--backend cpu -m tiny -B 8 $base --lora-rank 4 --lora-alpha 16 --steps 3 --json)
  "$px" run "${run[@]}" >"$tmp/r1.json" 2>"$tmp/err" || fail "$base, 1 rank: $(cat "$tmp/err")"
  peak_ok "$tmp/r1.json" || fail "$base: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/r1.json")"
  ref=$(losses "$tmp/r1.json")
  for split in "-p 2" "-d 2 -z 1" "-d 2 -z 2" "-p 2 -d 2 -z 2" "--cp 2" "-t 2" "-t 2 -p 2 --sp"; do
    # shellcheck disable=SC2086
    n=$(awk '{ n = 1; for (i = 1; i < NF; i++) if ($i ~ /^-(t|p|d)$|^--cp$/) n *= $(i + 1); print n }' <<<"$split")
    # shellcheck disable=SC2086
    if ! mpirun -np "$n" "$px" run "${run[@]}" $split >"$tmp/s.json" 2>"$tmp/err"; then
      fail "$base $split: $(head -3 "$tmp/err")"
      continue
    fi
    tol=1e-5
    case $split in -t*) tol=$(jq -rs 'last | .base_quant_error' "$tmp/s.json") ;; esac
    close "$ref" "$(losses "$tmp/s.json")" "$tol" || fail "$base $split: losses $(losses "$tmp/s.json"), 1 rank $ref (rtol $tol)"
    peak_ok "$tmp/s.json" || fail "$base $split: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/s.json")"
  done
done

# GPT-2-shaped (LayerNorm, biases, GELU) and HF PEFT's per-projection adapters on an nf4 base, across a split
for other in "-m tiny-gpt" "-m tiny --lora-targets q,k,v,o,gate,up,fc2"; do
  # shellcheck disable=SC2086
  "$px" run "${ql[@]}" $other --steps 2 --json >"$tmp/o1.json" 2>"$tmp/err" || fail "$other: $(cat "$tmp/err")"
  # shellcheck disable=SC2086
  mpirun -np 4 "$px" run "${ql[@]}" $other -p 2 -d 2 -z 2 --steps 2 --json >"$tmp/o4.json" 2>"$tmp/err" ||
    fail "$other on 4 ranks: $(head -3 "$tmp/err")"
  close "$(losses "$tmp/o1.json")" "$(losses "$tmp/o4.json")" 1e-5 && peak_ok "$tmp/o4.json" ||
    fail "$other: losses $(losses "$tmp/o4.json"), 1 rank $(losses "$tmp/o1.json"), or the peak is not the plan's"
done

# QLoRA against LoRA on a base pre-trained 40 steps on text (its weights matter: loss 2.85 where a random
# base gives 5.5). The tolerance: a relative change e (RMS) of every quantised weight moves the loss by a
# relative e at most to first order (each linear's output moves by about e of itself, and the loss no faster
# than its logits); e is the error the run measures of its base (NF4's is about 0.09 here, E4M3's 0.027).
errs=()
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 40 "${text[@]}" --ckpt "$tmp/pre" >/dev/null \
  2>"$tmp/err" || fail "pre-training: $(cat "$tmp/err")"
"$px" run "${ql[@]/qlora/lora}" --steps 3 "${text[@]}" --base-ckpt "$tmp/pre" --json >"$tmp/lora.json" 2>"$tmp/err" ||
  fail "lora on the pre-trained base: $(cat "$tmp/err")"
for base in "--finetune qlora" "--finetune lora --base-precision fp8"; do
  # shellcheck disable=SC2086
  "$px" run --backend cpu -m tiny -B 8 $base --lora-rank 4 --lora-alpha 16 --steps 3 "${text[@]}" --base-ckpt "$tmp/pre" \
    --json >"$tmp/q.json" 2>"$tmp/err" || fail "$base on the pre-trained base: $(cat "$tmp/err")"
  e=$(jq -rs 'last | .base_quant_error' "$tmp/q.json")
  l=$(losses "$tmp/lora.json") q=$(losses "$tmp/q.json")
  echo "$base: quantisation error $e (relative RMS); losses $q, lora on the fp32 base $l"
  close "$l" "$q" "$e" || fail "$base: losses $q, lora $l: beyond the tolerance $e"
  [ "$l" != "$q" ] || fail "$base: the losses are lora's bitwise: the base is not quantised"
  errs+=("$e")
done
awk -v n="${errs[0]}" -v f="${errs[1]}" 'BEGIN { exit !(f > 0 && f < n) }' || fail "fp8's error ${errs[1]} is not below nf4's ${errs[0]}"

"$px" run "${ql[@]}" --steps 1 2>&1 | grep -q "the nf4 base's linear weights hold their values within a relative RMS error of 0.09" ||
  fail "the run does not print its base's quantisation error"

# --base-ckpt quantises at load: a checkpoint of the initial weights (--lr 0) gives the --seed run bitwise, and the
# same frozen base hash
"$px" run --backend cpu -m tiny -B 8 --steps 1 --lr 0 --ckpt "$tmp/init" >/dev/null 2>"$tmp/err" || fail "lr 0: $(cat "$tmp/err")"
"$px" run "${ql[@]}" --steps 3 --json >"$tmp/s0.json" 2>"$tmp/err" || fail "seed: $(cat "$tmp/err")"
"$px" run "${ql[@]}" --steps 3 --base-ckpt "$tmp/init" --json >"$tmp/b0.json" 2>"$tmp/err" || fail "--base-ckpt: $(cat "$tmp/err")"
[ "$(losses "$tmp/b0.json")" = "$(losses "$tmp/s0.json")" ] &&
  [ "$(jq -rs 'last | .frozen_base_hash' "$tmp/b0.json")" = "$(jq -rs 'last | .frozen_base_hash' "$tmp/s0.json")" ] ||
  fail "--base-ckpt of the initial weights: $(losses "$tmp/b0.json") vs $(losses "$tmp/s0.json")"

# adapters' checkpoints resume bitwise (the base quantised again at load, the same hash) and merge into the fp32 base
mpirun -np 2 "$px" run "${ql[@]}" -p 2 --steps 2 "${text[@]}" --base-ckpt "$tmp/pre" --ckpt "$tmp/qa" >/dev/null \
  2>"$tmp/err" || fail "qlora --ckpt: $(cat "$tmp/err")"
mpirun -np 2 "$px" run "${ql[@]}" -p 2 --steps 4 "${text[@]}" --base-ckpt "$tmp/pre" --ckpt "$tmp/qa" --resume --json \
  >"$tmp/res.json" 2>"$tmp/err" || fail "qlora --resume: $(cat "$tmp/err")"
"$px" run "${ql[@]}" --steps 4 "${text[@]}" --base-ckpt "$tmp/pre" --json >"$tmp/four.json" 2>"$tmp/err" ||
  fail "qlora 4 steps: $(cat "$tmp/err")"
close "$(losses "$tmp/four.json" | cut -d, -f3-)" "$(losses "$tmp/res.json")" 1e-5 ||
  fail "resumed: $(losses "$tmp/res.json"), straight $(losses "$tmp/four.json")"
"$px" merge --adapters "$tmp/qa" --base-ckpt "$tmp/pre" --to "$tmp/merged" >/dev/null 2>"$tmp/err" ||
  fail "merge of qlora adapters: $(cat "$tmp/err")"
out=$("$px" merge --adapters "$tmp/qa" --to "$tmp/other" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q "trained on another frozen base" <<<"$out" || fail "merge on another base: $rc $out"

# both backends run it (the cuda backend's dequantising kernels: tests/gpu/exec.sh)
for base in "--finetune qlora" "--finetune lora --base-precision fp8"; do
  # shellcheck disable=SC2086
  runs=$("$px" plan -m tiny -c local-cpu -g 1 -B 8 $base --json | jq -r '.backends | "\(.cpu.runs) \(.cuda.runs)"')
  [ "$runs" = "true true" ] || fail "$base: backends: $runs"
done
finish
