#!/usr/bin/env bash
# parallax run: the same plan twice is bitwise equal, and an eager-elementwise plan equals its fused one; stopping after a
# checkpoint and resuming equals not stopping, bitwise; corrupt and partial
# checkpoints are refused, another plan's re-split; hybrid sharding equals ZeRO-0; the
# loss falls on real text; the profile is written; plans the executor cannot
# run are refused.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny-gpt -t 2 -p 2 -d 2 -z 1 -B 8)

# Determinism: the same plan twice, bitwise.
mpirun -np 8 "$px" run "${plan[@]}" --steps 4 --json --dump-grads "$tmp/g1" >"$tmp/a.json" 2>"$tmp/err" || fail "run a: $(cat "$tmp/err")"
mpirun -np 8 "$px" run "${plan[@]}" --steps 4 --json --dump-grads "$tmp/g2" >"$tmp/b.json" 2>"$tmp/err" || fail "run b: $(cat "$tmp/err")"
[ "$(losses "$tmp/a.json")" = "$(losses "$tmp/b.json")" ] || fail "two runs differ: $(losses "$tmp/a.json") vs $(losses "$tmp/b.json")"
"$cmp" "$tmp/g1" "$tmp/g2" --exact >/dev/null || fail "two runs' gradients differ"

# --elementwise eager prices PyTorch eager's kernels; the graph, and what the executor computes, is fused's: bitwise
lplan=(--backend cpu -m tiny -t 2 -d 2 -z 1 -B 4)
mpirun -np 4 "$px" run "${lplan[@]}" --steps 2 --json >"$tmp/fu.json" 2>"$tmp/err" || fail "fused: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${lplan[@]}" --steps 2 --json --elementwise eager >"$tmp/ea.json" 2>"$tmp/err" ||
  fail "eager: $(cat "$tmp/err")"
[ -n "$(losses "$tmp/fu.json")" ] && [ "$(losses "$tmp/fu.json")" = "$(losses "$tmp/ea.json")" ] ||
  fail "eager and fused differ: $(losses "$tmp/ea.json") vs $(losses "$tmp/fu.json")"

# Resume: 6 steps straight vs 3 steps, stop, resume to 6.
mpirun -np 8 "$px" run "${plan[@]}" --steps 6 --json >"$tmp/full.json" 2>"$tmp/err" || fail "full: $(cat "$tmp/err")"
mpirun -np 8 "$px" run "${plan[@]}" --steps 3 --ckpt "$tmp/ck" --json >"$tmp/first.json" 2>"$tmp/err" || fail "first half: $(cat "$tmp/err")"
[ -f "$tmp/ck/manifest.json" ] || fail "no manifest written"
ls "$tmp/ck" | grep -q '\.tmp' && fail "temporary files left in the checkpoint"
mpirun -np 8 "$px" run "${plan[@]}" --steps 6 --ckpt "$tmp/ck" --resume --json >"$tmp/second.json" 2>"$tmp/err" || fail "resume: $(cat "$tmp/err")"
full=$(losses "$tmp/full.json")
joined="$(losses "$tmp/first.json"),$(losses "$tmp/second.json")"
[ "$full" = "$joined" ] || fail "resumed run differs: $joined vs $full"
grep -q '"first_step":	3' "$tmp/second.json" || fail "resume did not start at step 3"

# Another plan's checkpoint is re-split as it loads (tests/cli/reshard.sh checks the losses);
# refused: a corrupt shard, a missing manifest.
err=$(mpirun -np 8 "$px" run --backend cpu -m tiny-gpt -t 2 -p 2 -d 2 -z 2 -B 8 --steps 6 --ckpt "$tmp/ck" --resume 2>&1 >/dev/null)
echo "$err" | grep -q "written by another plan.*re-split" || fail "a checkpoint of another plan was not re-split: $err"
cp -r "$tmp/ck" "$tmp/bad"
printf 'X' | dd of="$tmp/bad/shard-5.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
err=$(mpirun -np 8 "$px" run "${plan[@]}" --steps 6 --ckpt "$tmp/bad" --resume 2>&1 >/dev/null)
echo "$err" | grep -qi "corrupt\|checksum" || fail "a corrupt shard was not refused: $err"
rm "$tmp/bad/manifest.json"
err=$(mpirun -np 8 "$px" run "${plan[@]}" --steps 6 --ckpt "$tmp/bad" --resume 2>&1 >/dev/null); rc=$?
echo "$err" | grep -q "incomplete" && [ "$rc" -ne 0 ] || fail "a checkpoint without manifest was not refused: $rc $err"

# Hybrid sharding (--shard-group 2 of dp 4, 4 micro-batches a rank): ZeRO-2
# and ZeRO-3 in their modes equal ZeRO-0 within 1e-5 over 5 steps (the
# replica all-reduce and a norm counting each shard once both matter), the
# first step's gradients too, and each rank's measured peak is the plan's;
# stopping and resuming is bitwise equal to not stopping.
hyb=(--backend cpu -m tiny -d 4 -B 16)
mpirun -np 4 "$px" run "${hyb[@]}" -z 0 --steps 5 --json --dump-grads "$tmp/h0" >"$tmp/h0.json" 2>"$tmp/err" ||
  fail "hybrid's reference: $(cat "$tmp/err")"
for z in "2" "3" "2 --grad-accum full" "3 --no-reshard-after-forward" "3 --grad-accum full"; do
  # shellcheck disable=SC2086
  if ! mpirun -np 4 "$px" run "${hyb[@]}" -z $z --shard-group 2 --steps 5 --json --dump-grads "$tmp/h1" \
    >"$tmp/h1.json" 2>"$tmp/err"; then
    fail "hybrid -z $z: $(head -3 "$tmp/err")"
    continue
  fi
  close "$(losses "$tmp/h0.json")" "$(losses "$tmp/h1.json")" 1e-5 ||
    fail "hybrid -z $z: losses $(losses "$tmp/h1.json"), ZeRO-0 $(losses "$tmp/h0.json")"
  "$cmp" "$tmp/h0" "$tmp/h1" >"$tmp/cmp.txt" || fail "hybrid -z $z: $(cat "$tmp/cmp.txt")"
  jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes)' "$tmp/h1.json" >/dev/null ||
    fail "hybrid -z $z: measured peak is not the plan's: $(jq -sc 'last | .stages' "$tmp/h1.json")"
done
mpirun -np 4 "$px" run "${hyb[@]}" -z 3 --shard-group 2 --steps 2 --ckpt "$tmp/hck" --json >"$tmp/hfirst.json" \
  2>"$tmp/err" || fail "hybrid first half: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${hyb[@]}" -z 3 --shard-group 2 --steps 5 --ckpt "$tmp/hck" --resume --json \
  >"$tmp/hsecond.json" 2>"$tmp/err" || fail "hybrid resume: $(cat "$tmp/err")"
mpirun -np 4 "$px" run "${hyb[@]}" -z 3 --shard-group 2 --steps 5 --json >"$tmp/hfull.json" 2>"$tmp/err" ||
  fail "hybrid straight: $(cat "$tmp/err")"
[ "$(losses "$tmp/hfirst.json"),$(losses "$tmp/hsecond.json")" = "$(losses "$tmp/hfull.json")" ] ||
  fail "hybrid resumed run differs from the straight one"
err=$(mpirun -np 4 "$px" run "${hyb[@]}" -z 3 --steps 5 --ckpt "$tmp/hck" --resume 2>&1 >/dev/null)
echo "$err" | grep -q "shard groups of 2.*re-split" || fail "a hybrid checkpoint resumed with full sharding: $err"

# The loss falls on real text (byte-level Shakespeare) over 200 steps.
"$px" run --backend cpu -m tiny -B 8 --steps 200 --lr 3e-3 --data "$src/tests/data/tinyshakespeare.txt" --json >"$tmp/text.json" 2>"$tmp/err" ||
  fail "text run: $(cat "$tmp/err")"
l=$(losses "$tmp/text.json")
awk -v l="$l" 'BEGIN { n = split(l, x, ","); first = (x[1] + x[2] + x[3]) / 3; last = (x[n] + x[n-1] + x[n-2]) / 3;
  printf "loss on text: %.3f -> %.3f\n", first, last; exit !(first > 5.0 && last < 3.0) }' || fail "loss did not fall on text: $l"

# Offload: ZeRO-2 and ZeRO-3 with eight micro-batches of accumulation, the
# optimizer stepped by a host thread (its states in host memory or in an
# NVMe file), give ZeRO-0's losses within 1e-5 over 8 steps on 4 ranks; the
# profile shows the copies; the measured host and NVMe bytes are the plan's.
export PARALLAX_NVME_DIR=$tmp
off=(--backend cpu -m tiny-gpt -p 2 -d 2 -B 16 --steps 8 --json)
mpirun -np 4 "$px" run "${off[@]}" -z 0 >"$tmp/z0.json" 2>"$tmp/err" || fail "offload reference: $(cat "$tmp/err")"
for o in "-z 2 --offload-optimizer cpu" "-z 2 --offload-optimizer nvme --grad-accum full" \
         "-z 3 --offload-optimizer cpu --offload-params nvme" "-z 3 --offload-optimizer nvme --offload-params cpu"; do
  # shellcheck disable=SC2086
  mpirun -np 4 "$px" run "${off[@]}" $o --profile "$tmp/off-prof.json" >"$tmp/off.json" 2>"$tmp/err" ||
    { fail "offload $o: $(cat "$tmp/err")"; continue; }
  close "$(losses "$tmp/z0.json")" "$(losses "$tmp/off.json")" 1e-5 || fail "offload $o: losses differ from ZeRO-0"
  jq -se 'last | .stages | all(.peak_bytes == .predicted_peak_bytes and .host_bytes == .predicted_host_bytes and
         .nvme_bytes == .predicted_nvme_bytes and .host_bytes > 0)' "$tmp/off.json" >/dev/null ||
    fail "offload $o: measured bytes are not the plan's: $(jq -sc 'last | .stages' "$tmp/off.json")"
  # shellcheck disable=SC2086
  "$px" compare --profile "$tmp/off-prof.json" -m tiny-gpt -c local-cpu -g 4 -p 2 -d 2 -B 16 $o --json >"$tmp/off-cmp.json" \
    2>"$tmp/err" || fail "offload $o: compare: $(cat "$tmp/err")"
  jq -e '[.stages[].rows[] | select(.row == "offload") | .measured_s > 0 and .predicted_s > 0] | all and length == 2' \
    "$tmp/off-cmp.json" >/dev/null || fail "offload $o: the profile lacks the copies: $(jq -c .stages "$tmp/off-cmp.json")"
  echo "ok: offload $o"
done

# The profile: one entry per op of each stage.
mpirun -np 2 "$px" run --backend cpu -m tiny -p 2 -B 4 --steps 3 --profile "$tmp/prof.json" >/dev/null 2>"$tmp/err" || fail "profile: $(cat "$tmp/err")"
grep -q '"format":	"parallax-profile/1"' "$tmp/prof.json" || fail "profile format"
[ "$(grep -c '"stage":' "$tmp/prof.json")" -eq 2 ] || fail "profile lacks a stage"
# a saved plan runs as saved: its precision is not replaced by the cpu backend's fp32 default
"$px" plan -m tiny -g 2 -d 2 -B 4 -c local-cpu --precision fp8 --fp8-recipe current --fp8-base fp32 \
  --save-plan "$tmp/fp8.plan.json" >/dev/null 2>"$tmp/err" || fail "save an fp8 plan: $(cat "$tmp/err")"
mpirun -np 2 "$px" run --backend cpu --plan "$tmp/fp8.plan.json" --steps 1 --json >"$tmp/fp8.run.json" 2>"$tmp/err" ||
  fail "run the saved fp8 plan: $(cat "$tmp/err")"
jq -se 'last | .parallel | .precision == "fp8" and .fp8_recipe == "current"' "$tmp/fp8.run.json" >/dev/null ||
  fail "the saved fp8 plan ran as $(jq -sc 'last | .parallel | {precision, fp8_recipe}' "$tmp/fp8.run.json")"
# compare by op kind: every op of the profile counted once, its time in its kind, the longest first
"$px" compare --profile "$tmp/prof.json" -m tiny -p 2 -B 4 -c local-cpu -g 2 --json >"$tmp/cmp.json" 2>"$tmp/err" ||
  fail "compare: $(cat "$tmp/err")"
for s in 0 1; do
  jq -e --slurpfile p "$tmp/prof.json" --argjson s "$s" '.stages[$s].ops as $o | $p[0].stages[$s].op_s_per_step as $t
    | ([$o[].count] | add) == ($t | length)
    and ((([$o[].measured_s] | add) - ($t | add)) | fabs) <= 1e-12 * ($t | add)
    and ([$o[].measured_s] == ([$o[].measured_s] | sort | reverse))' "$tmp/cmp.json" >/dev/null ||
    fail "compare by op kind, stage $s: $(jq -c ".stages[$s].ops" "$tmp/cmp.json")"
done
"$px" compare --profile "$tmp/prof.json" -m tiny -p 2 -B 4 -c local-cpu -g 2 | grep -q "^stage 1 by op kind" ||
  fail "compare's text lacks the op kinds"
echo "ok: compare by op kind"

# Plans the executor cannot run.
err=$(mpirun -np 2 "$px" run -m tiny -t 2 -p 2 -B 4 --steps 1 2>&1 >/dev/null); rc=$?
[ "$rc" -ne 0 ] && echo "$err" | grep -q "hint: mpirun -np 4" || fail "wrong rank count: $rc $err"
err=$("$px" run --backend cpu -m tiny -c dgx-h100 -B 4 --steps 1 -P bf16 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "fp32 only" || fail "bf16 on the cpu backend: $rc $err"
# refused before the run by the backend's plan-level rule (plan/runnable.h): one line (from rank 0 of 2) saying why
err=$(mpirun -np 2 "$px" run --backend cpu -m tiny -c dgx-h100 -p 2 -B 4 --steps 1 -P bf16 2>&1 >/dev/null | grep parallax:)
[ "$(echo "$err" | wc -l)" -eq 1 ] && echo "$err" | grep -q "cpu cannot run this plan: the cpu backend runs fp32 only, not bf16" ||
  fail "bf16 on the cpu backend, 2 ranks: $err"
err=$("$px" run -m tiny -B 4 --steps 1 --backend tpu 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "not cpu or cuda" || fail "unknown backend: $rc $err"
err=$("$px" run --backend cpu -m tiny -B 4 --steps 1 --loss-scale 0 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "loss-scale" || fail "a zero loss scale: $rc $err"
# --backend cuda with no device visible (hidden, should this machine have one): exit 1, said plainly;
# without the CUDA backend (a build without it, or its module missing: tests/cli/startup.sh) exit 2
err=$(CUDA_VISIBLE_DEVICES= "$px" run -m tiny -B 4 --steps 1 --backend cuda 2>&1 >/dev/null); rc=$?
{ [ "$rc" -eq 1 ] && echo "$err" | grep -q "no CUDA device"; } || { [ "$rc" -eq 2 ] && echo "$err" | grep -q "no CUDA backend"; } ||
  fail "cuda without a device: $rc $err"
err=$("$px" run -m tiny -B 4 --steps 1 --data "$tmp/missing.txt" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "missing.txt" || fail "missing data file: $rc $err"
printf '\x10\x27\x00\x00' >"$tmp/big.u32"
err=$("$px" run -m tiny -B 4 --steps 1 --data "$tmp/big.u32" 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "big.u32" || fail "token beyond the vocabulary: $rc $err"

finish
