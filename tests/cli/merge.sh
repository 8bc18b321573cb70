#!/usr/bin/env bash
# parallax merge: LoRA adapters merged into their frozen base as a full checkpoint. The merged model's loss (a run
# resumed from it at lr 0) is the LoRA run's next-step loss within 1e-5, across splits of the adapters' run and the
# merged checkpoint; the merged weights differ from the base's only in the adapted linear weights (all of their
# elements); a base from --base-ckpt likewise; a base that is not the adapters' (another seed, another checkpoint,
# none) is refused by its hash, and so are a checkpoint without adapters, an existing --to (unless --overwrite) and
# a merged plan with adapters.
set -u
px=$1
src=$2
diff=$(dirname "$px")/tests/px_ckptdiff
source "$(dirname "$0")/../tools/clitest.sh"
lora=(--backend cpu -m tiny -B 8 --finetune lora --lora-rank 4 --lora-alpha 16)
refused() { # want cmd...: exit 2 and the message
  local want=$1 out rc
  shift
  out=$("$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$want" <<<"$out" || fail "$* (rc $rc): $out"
}
last() { losses "$1" | awk -F, '{ print $NF }'; }

# the LoRA run's 5th loss, and its checkpoint after 4 steps on tp 2 (qkv, o, fc1 over gate and up, fc2)
mpirun -np 2 "$px" run "${lora[@]}" -t 2 --steps 5 --json >"$tmp/l5.json" 2>"$tmp/err" || fail "lora 5: $(cat "$tmp/err")"
mpirun -np 2 "$px" run "${lora[@]}" -t 2 --steps 4 --ckpt "$tmp/ad" >/dev/null 2>"$tmp/err" || fail "lora 4: $(cat "$tmp/err")"
# merged into pp 2 and into one rank: step 5 of the merged model is the LoRA run's
"$px" merge --adapters "$tmp/ad" --to "$tmp/mg" -p 2 >"$tmp/out" 2>"$tmp/err" || fail "merge: $(cat "$tmp/err")"
grep -q "^16 adapters of step 4 merged into the initialisation of seed 1234" "$tmp/out" || fail "merge says: $(cat "$tmp/out")"
"$px" run --backend cpu -m tiny -B 8 --steps 1 --lr 0 --ckpt "$tmp/init" >/dev/null 2>"$tmp/err" || fail "init: $(cat "$tmp/err")"
"$diff" "$tmp/init" "$tmp/mg" >"$tmp/mg.diff" || fail "ckptdiff: $(cat "$tmp/mg.diff")" # before a run writes mg
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -p 2 --steps 5 --lr 0 --ckpt "$tmp/mg" --resume --json \
  >"$tmp/m5.json" 2>"$tmp/err" || fail "the merged model: $(cat "$tmp/err")"
close "$(last "$tmp/l5.json")" "$(losses "$tmp/m5.json")" 1e-5 ||
  fail "merged: loss $(losses "$tmp/m5.json"), the LoRA run's $(last "$tmp/l5.json")"
"$px" merge --adapters "$tmp/ad" --to "$tmp/mg1" --json >"$tmp/mg1.json" 2>"$tmp/err" || fail "merge 1: $(cat "$tmp/err")"
jq -e '.step == 4 and .adapters_merged == 16 and .to.world == 1' "$tmp/mg1.json" >/dev/null || fail "merge --json: $(cat "$tmp/mg1.json")"
"$px" run --backend cpu -m tiny -B 8 --steps 5 --lr 0 --ckpt "$tmp/mg1" --finetune full --resume --json \
  >"$tmp/f5.json" 2>"$tmp/err" || fail "the merged model, full: $(cat "$tmp/err")"
close "$(last "$tmp/l5.json")" "$(losses "$tmp/f5.json")" 1e-5 ||
  fail "merged, full: loss $(losses "$tmp/f5.json"), the LoRA run's $(last "$tmp/l5.json")"

# only the adapted weights change, each in every element: the base is a checkpoint of the initial weights (lr 0)
want=$(for l in 0 1 2 3; do for w in q k v o gate up fc2; do echo "layer$l.$w.w"; done; done)
[ "$(cut -d' ' -f1 "$tmp/mg.diff")" = "$want" ] || fail "the merged weights that differ: $(cat "$tmp/mg.diff")"
awk '{ split($2, n, "/"); if (n[1] != n[2]) exit 1 }' "$tmp/mg.diff" || fail "an adapted weight changed in part: $(cat "$tmp/mg.diff")"
# HF PEFT's per-projection adapters on tp 2 x pp 2, merged into dp 2 with ZeRO-1
mpirun -np 4 "$px" run "${lora[@]}" --lora-targets q,v,gate,fc2 -t 2 -p 2 --steps 3 --ckpt "$tmp/ad4" >/dev/null \
  2>"$tmp/err" || fail "lora tp 2 x pp 2: $(cat "$tmp/err")"
"$px" merge --adapters "$tmp/ad4" --to "$tmp/mg4" -d 2 -z 1 >/dev/null 2>"$tmp/err" || fail "merge 4: $(cat "$tmp/err")"
want=$(for l in 0 1 2 3; do for w in q v gate fc2; do echo "layer$l.$w.w"; done; done)
"$diff" "$tmp/init" "$tmp/mg4" >"$tmp/d" || fail "ckptdiff: $(cat "$tmp/d")"
[ "$(cut -d' ' -f1 "$tmp/d")" = "$want" ] || fail "the merged weights that differ (q,v,gate,fc2): $(cat "$tmp/d")"

# a pre-trained base (--base-ckpt): merged with it, the LoRA run's next loss; without it, or with --seed, refused
text=(--data "$src/tests/data/tinyshakespeare.txt" --lr 3e-3)
mpirun -np 2 "$px" run --backend cpu -m tiny -B 8 -d 2 -z 1 --steps 20 "${text[@]}" --ckpt "$tmp/pre" >/dev/null \
  2>"$tmp/err" || fail "pre-training: $(cat "$tmp/err")"
"$px" run "${lora[@]}" --steps 4 "${text[@]}" --base-ckpt "$tmp/pre" --json >"$tmp/b4.json" 2>"$tmp/err" ||
  fail "lora on the base: $(cat "$tmp/err")"
"$px" run "${lora[@]}" --steps 3 "${text[@]}" --base-ckpt "$tmp/pre" --ckpt "$tmp/adb" >/dev/null 2>"$tmp/err" ||
  fail "lora on the base, 3: $(cat "$tmp/err")"
"$px" merge --adapters "$tmp/adb" --base-ckpt "$tmp/pre" --to "$tmp/mgb" >"$tmp/out" 2>"$tmp/err" ||
  fail "merge with the base: $(cat "$tmp/err")"
grep -q "merged into the weights of $tmp/pre's checkpoint of step 20 (tp 1 x pp 1 x dp 2" "$tmp/out" ||
  fail "merge does not say where the base comes from: $(cat "$tmp/out")"
"$px" run --backend cpu -m tiny -B 8 --steps 4 "${text[@]}" --lr 0 --ckpt "$tmp/mgb" --resume --json >"$tmp/mb.json" \
  2>"$tmp/err" || fail "the merged model on the base: $(cat "$tmp/err")"
close "$(last "$tmp/b4.json")" "$(losses "$tmp/mb.json")" 1e-5 ||
  fail "merged on the base: loss $(losses "$tmp/mb.json"), the LoRA run's $(last "$tmp/b4.json")"
refused "its adapters were trained on another frozen base" "$px" merge --adapters "$tmp/adb" --to "$tmp/x"
refused "give the --base-ckpt or --seed of the run that trained them" "$px" merge --adapters "$tmp/ad" --seed 7 --to "$tmp/x"
refused "its adapters were trained on another frozen base" "$px" merge --adapters "$tmp/ad" --base-ckpt "$tmp/pre" --to "$tmp/x"
[ ! -e "$tmp/x/manifest.json" ] || fail "a refused merge wrote a checkpoint"

# refusals: no adapters, a checkpoint without them, an existing --to (kept), a merged plan with adapters
refused "--adapters DIR and --to DIR are required" "$px" merge --to "$tmp/x"
refused "holds no adapters" "$px" merge --adapters "$tmp/init" --to "$tmp/x"
refused "no such checkpoint directory" "$px" merge --adapters "$tmp/none" --to "$tmp/x"
sum=$(cksum <"$tmp/mg1/shard-0.bin") # the step 5 the run from it wrote
refused "already holds the checkpoint of step 5" "$px" merge --adapters "$tmp/ad4" --to "$tmp/mg1"
[ "$(cksum <"$tmp/mg1/shard-0.bin")" = "$sum" ] || fail "a refused merge changed --to"
"$px" merge --adapters "$tmp/ad4" --to "$tmp/mg1" --overwrite >/dev/null 2>"$tmp/err" || fail "--overwrite: $(cat "$tmp/err")"
[ "$(jq .step "$tmp/mg1/manifest.json")" = 3 ] || fail "--overwrite did not replace --to"
refused "the merged checkpoint is of a plan that trains every weight" \
  "$px" merge --adapters "$tmp/ad" --to "$tmp/x" --finetune lora
refused "is the --adapters directory" "$px" merge --adapters "$tmp/ad" --to "$tmp/ad" --overwrite
refused "--base-ckpt and --seed: the base is one or the other" \
  "$px" merge --adapters "$tmp/adb" --base-ckpt "$tmp/pre" --seed 1234 --to "$tmp/x"
finish
