#!/usr/bin/env bash
# Resharding: a checkpoint taken after step 3 on one plan, re-split for
# another plan of the same model (by `parallax reshard`, or by `run --resume`
# itself), continues to step 6 with the losses of the old plan run straight
# through, within 1e-5 (fp32): 8 ranks -> 2, ZeRO-3 -> TP x PP, dp -> tp,
# pp -> dp, ZeRO-1 -> ZeRO-0, 2 ranks -> 8 with ZeRO-3 and SP, hybrid
# sharding -> ZeRO-2, experts over 2 ranks -> PP with ZeRO-2, ZeRO-2 with
# experts over 2 ranks (their states sharded over the expert-DP group) ->
# ZeRO-3 with experts over 4, experts under TP + SP with etp 1 -> etp 2, context
# parallelism -> DP, fp8 delayed scaling PP -> DP (within 1e-6); both ways
# give the same bits, and 8 ranks -> 2 -> 8 resumes bitwise. fp8's amax
# histories are carried across TP (tp 2 -> 1: the old TP ranks' largest, in
# the re-split shard), and reshard takes fp8's recipe and base from the
# checkpoint unless --fp8-recipe / --fp8-base say otherwise. Refused with exit 2, the file and the reason: another
# model, a corrupt shard, a checkpoint that records no plan, --to the --from
# directory, a plan no backend runs. Every mpirun is bounded by `timeout`.
set -u
px=$1
src=$2
source "$(dirname "$0")/../tools/clitest.sh"
K=3 N=6
run() { # ranks flags...: parallax run on the CPU backend, 8 sequences a step
  local np=$1
  shift
  timeout -s KILL 120 mpirun -np "$np" "$px" run --backend cpu -B 8 "$@"
}

# pair NAME HOW "OLD FLAGS" "NEW FLAGS" [RTOL]: HOW is reshard (parallax reshard, then run --resume of
# its output), resume (run --resume of the old checkpoint) or both (and the two agree bitwise);
# the losses within RTOL (1e-5) of the old plan's.
pair() {
  local name=$1 how=$2 d="$tmp/$1" rtol=${5:-1e-5}
  local -a a b
  read -r -a a <<<"$3"
  read -r -a b <<<"$4"
  local na nb
  na=$(ranks "${a[@]}")
  nb=$(ranks "${b[@]}")
  mkdir -p "$d"
  run "$na" "${a[@]}" --steps $N --json >"$d/full.json" 2>"$d/err" || { fail "$name: old plan: $(head -3 "$d/err")"; return; }
  run "$na" "${a[@]}" --steps $K --ckpt "$d/ck" --json >"$d/first.json" 2>"$d/err" ||
    { fail "$name: old plan to step $K: $(head -3 "$d/err")"; return; }
  local full tail
  full=$(losses "$d/full.json")
  tail=$(echo "$full" | cut -d, -f$((K + 1))-)
  [ "$(losses "$d/first.json")" = "$(echo "$full" | cut -d, -f1-$K)" ] || fail "$name: the first $K steps differ"
  local got=() ways=()
  if [ "$how" != resume ]; then
    "$px" reshard --from "$d/ck" --to "$d/new" "${b[@]}" -B 8 >"$d/reshard.txt" 2>"$d/err" ||
      { fail "$name: reshard: $(cat "$d/err")"; return; }
    grep -q "step $K re-split" "$d/reshard.txt" || fail "$name: reshard says: $(cat "$d/reshard.txt")"
    run "$nb" "${b[@]}" --steps $N --ckpt "$d/new" --resume --json >"$d/second.json" 2>"$d/err" ||
      { fail "$name: resume of the re-split checkpoint: $(head -3 "$d/err")"; return; }
    grep -q "re-split" "$d/err" && fail "$name: the re-split checkpoint was re-split again: $(cat "$d/err")"
    got+=("$(losses "$d/second.json")") ways+=(reshard)
  fi
  if [ "$how" != reshard ]; then
    cp -r "$d/ck" "$d/ck2"
    run "$nb" "${b[@]}" --steps $N --ckpt "$d/ck2" --resume --json >"$d/second2.json" 2>"$d/err" ||
      { fail "$name: resume of the old plan's checkpoint: $(head -3 "$d/err")"; return; }
    grep -q "step $K was written by another plan.*re-split for this one" "$d/err" ||
      fail "$name: run --resume did not say it re-splits: $(cat "$d/err")"
    got+=("$(losses "$d/second2.json")") ways+=(resume)
  fi
  [ "$how" = both ] && [ "${got[0]}" != "${got[1]}" ] && fail "$name: reshard then resume ${got[0]}, resume ${got[1]}"
  for i in "${!got[@]}"; do
    if close "$tail" "${got[i]}" "$rtol"; then
      echo "ok: $name (${ways[i]}): steps $((K + 1))-$N ${got[i]}, straight $tail"
    else
      fail "$name (${ways[i]}): steps $((K + 1))-$N ${got[i]}, the old plan straight $tail"
    fi
  done
}

pair 8-to-2 both "-m tiny-gpt -t 2 -p 2 -d 2 -z 1" "-m tiny-gpt -d 2"
pair zero3-to-tpxpp resume "-m tiny -d 4 -z 3" "-m tiny -t 2 -p 2"
pair dp-to-tp reshard "-m tiny -d 2" "-m tiny -t 2"
pair pp-to-dp resume "-m tiny-gpt -p 2" "-m tiny-gpt -d 2 -z 2"
pair 2-to-8 reshard "-m tiny -d 2 -z 1" "-m tiny -t 2 -p 2 -d 2 -z 3 --sp"
pair hybrid-to-zero2 resume "-m tiny -d 4 -z 3 --shard-group 2" "-m tiny -d 4 -z 2"
pair ep-to-pp resume "-m tiny-moe -d 2 --ep 2 --moe-imbalance 2" "-m tiny-moe -p 2 -d 2 -z 2"
# ZeRO with experts: expert units sharded over the expert-DP group (dp 4 / ep 2 = 2 ranks) -> over 1 (ep 4), ZeRO-3
pair ep-zero2-to-ep4-zero3 both "-m tiny-moe -d 4 --ep 2 -z 2" "-m tiny-moe -d 4 --ep 4 -z 3"
# MoE under TP + SP: etp 1 (EP over the TP ranks, the expert-DP group over DP) -> etp 2 (each expert's width split)
pair etp1-to-etp2 both "-m tiny-moe -t 2 -S -d 2 --ep 2 --etp 1 -z 2" "-m tiny-moe -t 2 -S -d 2 --ep 2 -z 1"
pair cp-to-dp reshard "-m tiny --cp 2" "-m tiny -d 2 -z 1"
# fp8 delayed scaling: the amax histories go along (without them the first steps after the change
# would scale as current scaling does: 4e-5 off); a PP and ZeRO change leaves every scale as it was
pair fp8-pp-to-dp both "-m tiny-gpt -p 2 -d 2 --precision fp8" "-m tiny-gpt -d 2 -z 1 --precision fp8" 1e-6

# There and back: 8 ranks -> 2 -> 8 copies every state element exactly, so the 8-rank plan
# resumes to its uninterrupted losses bitwise. Without -m and -B, reshard takes the model and
# the global batch from the checkpoint: the run resumes it as its own plan's.
d="$tmp/8-to-2"
"$px" reshard --from "$d/ck" --to "$tmp/there" -d 2 >/dev/null 2>"$tmp/err" &&
  "$px" reshard --from "$tmp/there" --to "$tmp/back" -t 2 -p 2 -d 2 -z 1 >/dev/null 2>>"$tmp/err" ||
  fail "there and back: $(cat "$tmp/err")"
run 8 -m tiny-gpt -t 2 -p 2 -d 2 -z 1 --steps $N --ckpt "$tmp/back" --resume --json >"$tmp/back.json" 2>"$tmp/err" ||
  fail "there and back: resume: $(head -3 "$tmp/err")"
grep -q "re-split" "$tmp/err" && fail "there and back: not the run's own plan: $(cat "$tmp/err")"
if [ "$(losses "$tmp/back.json")" = "$(losses "$d/full.json" | cut -d, -f$((K + 1))-)" ]; then
  echo "ok: 8 ranks -> 2 -> 8 resumes bitwise"
else
  fail "8 ranks -> 2 -> 8: $(losses "$tmp/back.json"), straight $(losses "$d/full.json")"
fi

# Refusals: exit 2, the file and the reason.
refused() { # WHAT WANT CMD...: CMD exits 2 and says WANT
  local what=$1 want=$2 err rc
  shift 2
  err=$("$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "$want" && echo "ok: refused: $what" ||
    fail "$what: exit $rc, '$err'"
}
refused "another model" "ck/manifest.json: a checkpoint of another model" \
  "$px" reshard --from "$d/ck" --to "$tmp/x" -m tiny -d 2 -B 8
refused "another model, by run --resume" "a checkpoint of another model" \
  timeout -s KILL 60 mpirun -np 2 "$px" run --backend cpu -m tiny -d 2 -B 8 --steps 6 --ckpt "$d/ck" --resume
refused "--to the --from directory" "is the --from directory" "$px" reshard --from "$d/ck" --to "$d/ck/" -d 2 -B 8
refused "a plan no backend runs" "runs on no backend, so no run would resume its checkpoint: fp8 weights" \
  "$px" reshard --from "$d/ck" --to "$tmp/x" -d 2 -B 8 -c dgx-h100 -P fp8 --fp8-params
cp -r "$d/ck" "$tmp/bad"
printf 'X' | dd of="$tmp/bad/shard-5.bin" bs=1 seek=300 conv=notrunc 2>/dev/null
refused "a corrupt shard" "bad/shard-5.bin: corrupt (stored checksum" \
  "$px" reshard --from "$tmp/bad" --to "$tmp/x" -d 2 -B 8
refused "a corrupt shard, by run --resume" "shard-5.bin: corrupt" \
  timeout -s KILL 60 mpirun -np 2 "$px" run --backend cpu -m tiny-gpt -d 2 -B 8 --steps 6 --ckpt "$tmp/bad" --resume
[ -e "$tmp/x" ] && fail "a refused reshard left $tmp/x"
# a checkpoint from before resharding (manifest version 1, no plan): its own plan resumes it, another refuses it
cp -r "$d/ck" "$tmp/v1"
jq 'del(.plan) | .version = 1' "$d/ck/manifest.json" >"$tmp/v1/manifest.json"
refused "a version-1 checkpoint" "records no plan (checkpoint format version 1" \
  "$px" reshard --from "$tmp/v1" --to "$tmp/x" -m tiny-gpt -d 2 -B 8
run 8 -m tiny-gpt -t 2 -p 2 -d 2 -z 1 --steps $N --ckpt "$tmp/v1" --resume --json >"$tmp/v1.json" 2>"$tmp/err" &&
  [ "$(losses "$tmp/v1.json")" = "$(losses "$d/full.json" | cut -d, -f$((K + 1))-)" ] ||
  fail "a version-1 checkpoint does not resume its own plan bitwise: $(cat "$tmp/err")"
# resumed on 2 ranks in place, the next checkpoint replaces the 8-rank one whole: no stale shards stay
[ "$(ls "$d/ck2" | grep -c '^shard-')" -eq 2 ] || fail "stale shards left: $(ls "$d/ck2")"
jq -e '.version == 2 and .world == 2 and .plan.parallel.dp == 2' "$d/ck2/manifest.json" >/dev/null ||
  fail "the resumed run's checkpoint: $(head -c 300 "$d/ck2/manifest.json")"

# tensor FILE NAME: the elements of tensor NAME in checkpoint shard FILE (exec/ckpt.h's format), as
# unsigned 32-bit words (which order non-negative floats as their values), one a line
tensor() {
  local f=$1 want=$2 n at=60 k name count i
  n=$(od -An -t u4 -j 56 -N 4 "$f" | tr -d ' ')
  for ((i = 0; i < n; i++)); do
    k=$(od -An -t u4 -j $at -N 4 "$f" | tr -d ' ')
    name=$(dd if="$f" bs=1 skip=$((at + 4)) count="$k" 2>/dev/null)
    count=$(od -An -t u8 -j $((at + 4 + k)) -N 8 "$f" | tr -d ' ')
    at=$((at + 12 + k))
    if [ "$name" = "$want" ]; then od -An -v -t u4 -j $at -N $((4 * count)) "$f" | tr -s ' ' '\n' | grep .; return; fi
    at=$((at + 4 * count))
  done
  return 1
}
# fp8 delayed, tp 2 x dp 2 -> dp 2: each new rank's amax histories are the elementwise largest of
# its DP rank's two old TP ranks' (a cast's amax is reduced over TP, a weight's is its shard's:
# the whole weight's is the larger), which differ from the other DP rank's
f8="$tmp/fp8-tp"
run 4 -m tiny-gpt -t 2 -d 2 --precision fp8 --steps $K --ckpt "$f8/ck" >/dev/null 2>"$tmp/err" &&
  "$px" reshard --from "$f8/ck" --to "$f8/new" -m tiny-gpt -d 2 >/dev/null 2>"$tmp/err" ||
  fail "fp8 tp 2 -> 1: $(head -3 "$tmp/err")"
grep -q "afresh" "$tmp/err" && fail "fp8 tp 2 -> 1: histories not carried: $(cat "$tmp/err")"
for q in 0 1 2 3; do tensor "$f8/ck/shard-$q.bin" fp8_amax >"$f8/old$q" || fail "fp8: no fp8_amax in shard-$q.bin"; done
for r in 0 1; do
  tensor "$f8/new/shard-$r.bin" fp8_amax >"$f8/new$r" || fail "fp8: no fp8_amax in the re-split shard-$r.bin"
  paste "$f8/old$((2 * r))" "$f8/old$((2 * r + 1))" | awk '{ print ($1 > $2 ? $1 : $2) }' | cmp -s - "$f8/new$r" ||
    fail "fp8 tp 2 -> 1: rank $r's amax histories are not its old TP ranks' largest"
done
[ "$(grep -vc '^0$' "$f8/new0")" -gt 0 ] && ! cmp -s "$f8/new0" "$f8/new1" && ! cmp -s "$f8/old0" "$f8/old1" &&
  echo "ok: fp8 tp 2 -> 1: the amax histories carried ($(grep -vc '^0$' "$f8/new0") amaxes on rank 0)" ||
  fail "fp8 tp 2 -> 1: the histories do not tell the ranks apart"
# reshard takes fp8's recipe and base dtype from the checkpoint (run --backend cpu made the base
# fp32, a default here would say bf16), and --fp8-base and --fp8-recipe where given
run 2 -m tiny-gpt -d 2 --precision fp8 --fp8-recipe current --steps 1 --ckpt "$f8/cur" >/dev/null 2>"$tmp/err" ||
  fail "fp8 current: $(head -3 "$tmp/err")"
fp8_of() { jq -r '.plan.parallel | "\(.fp8_recipe) \(.fp8_base)"' "$1/manifest.json"; }
"$px" reshard --from "$f8/cur" --to "$f8/kept" -d 1 >"$tmp/out" 2>"$tmp/err" && [ "$(fp8_of "$f8/kept")" = "current fp32" ] &&
  grep -q "fp8 (current, fp32 base), 1 rank" "$tmp/out" || fail "reshard fp8 defaults: $(fp8_of "$f8/kept") $(cat "$tmp/out" "$tmp/err")"
"$px" reshard --from "$f8/cur" --to "$f8/bf16" -d 1 -c dgx-h100 --fp8-base bf16 --fp8-recipe delayed >/dev/null 2>"$tmp/err" &&
  [ "$(fp8_of "$f8/bf16")" = "delayed bf16" ] && grep -q "delayed scaling starts those afresh" "$tmp/err" &&
  echo "ok: reshard: fp8 recipe and base from the checkpoint, --fp8-base and --fp8-recipe honoured" ||
  fail "reshard --fp8-base bf16: $(fp8_of "$f8/bf16") $(cat "$tmp/err")"

finish
