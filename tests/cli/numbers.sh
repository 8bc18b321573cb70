#!/usr/bin/env bash
# parallax run's numbers as the user means them: --lr 0 trains at 0 (the
# weights stay); --steps 0 is refused, as is a --steps a resumed checkpoint
# is already past (the checkpoint untouched), while one it is at trains
# nothing; flags that need another (--ckpt-every, --resume: --ckpt;
# --loss-scale: fp16) are refused, not ignored; a profile compare could not
# read is refused before training.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
run=("$px" run --backend cpu -m tiny)

# refused NEEDLE CMD...: exit 2 and NEEDLE on stderr.
refused() {
  local needle=$1 err rc
  shift
  err=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -eq 2 ] && printf '%s' "$err" | grep -qF -- "$needle"; then
    echo "ok: $* -> $err"
  else
    fail "$* -> exit $rc: $err (wanted exit 2 and '$needle')"
  fi
}

# --lr 0: every batch the same (a file of one repeated byte), so equal losses mean unmoved weights;
# the default rate on the same data moves them.
head -c 4096 /dev/zero | tr '\0' 'a' >"$tmp/same.txt"
"${run[@]}" -B 2 --steps 3 --data "$tmp/same.txt" --lr 0 --json >"$tmp/lr0.json" 2>"$tmp/err" || fail "--lr 0: $(cat "$tmp/err")"
"${run[@]}" -B 2 --steps 3 --data "$tmp/same.txt" --json >"$tmp/lr.json" 2>"$tmp/err" || fail "default lr: $(cat "$tmp/err")"
l0=$(losses "$tmp/lr0.json")
IFS=, read -r a b c <<<"$l0"
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$b" = "$c" ] && echo "ok: --lr 0 keeps the loss: $l0" ||
  fail "--lr 0 trained: losses $l0"
[ "$(losses "$tmp/lr.json" | cut -d, -f3)" != "$c" ] || fail "the default rate did not move the loss either: $(losses "$tmp/lr.json")"
refused "--lr: -0.1 is out of range" "${run[@]}" --lr -0.1

# --steps: at least one; with --resume, at least the checkpoint's step.
refused "--steps: 0 is out of range [1," "${run[@]}" --steps 0
"${run[@]}" --steps 4 --ckpt "$tmp/ck" >/dev/null 2>"$tmp/err" || fail "checkpoint: $(cat "$tmp/err")"
sums() { (cd "$1" && sha256sum manifest.json shard-*.bin); }
before=$(sums "$tmp/ck")
refused "the checkpoint is of step 4, past --steps 2" mpirun -np 2 "${run[@]}" -d 2 --steps 2 --ckpt "$tmp/ck" --resume
err=$(mpirun -np 2 "${run[@]}" -d 2 --steps 2 --ckpt "$tmp/ck" --resume 2>&1 >/dev/null)
[ "$(printf '%s\n' "$err" | grep -c "past --steps")" -eq 1 ] || fail "the refusal is said more than once: $err"
err=$("${run[@]}" --steps 4 --ckpt "$tmp/ck" --resume --json 2>&1 >"$tmp/at.json") || fail "--steps at the checkpoint: $err"
echo "$err" | grep -q "nothing left to train" || fail "--steps at the checkpoint says nothing: $err"
[ -z "$(losses "$tmp/at.json")" ] || fail "--steps at the checkpoint trained: $(losses "$tmp/at.json")"
[ "$(sums "$tmp/ck")" = "$before" ] && echo "ok: the checkpoint is untouched" || fail "the checkpoint changed"

# Flags that need another.
refused "--ckpt-every needs --ckpt DIR" "${run[@]}" --steps 2 --ckpt-every 1
refused "--resume needs --ckpt DIR" "${run[@]}" --steps 2 --resume
refused "--loss-scale is fp16's" "${run[@]}" --steps 2 --loss-scale 1024

# A profile parallax compare could not read (over 2 M times) is refused before the first step.
refused "--profile $tmp/p.json: 3000000 steps" "${run[@]}" --steps 3000000 --profile "$tmp/p.json"
[ ! -e "$tmp/p.json" ] || fail "a refused profile was written"

finish
