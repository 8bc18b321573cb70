#!/usr/bin/env bash
# parallax launch under injected faults: a rank killed at an op of a step
# chosen from a seed (PX_FAULT_KILL, first attempt only) is relaunched from
# the last complete checkpoint and finishes with the uninterrupted run's
# losses, bit for bit; with the slots dropping from 4 to 2 after the failure
# (PX_LAUNCH_SLOTS), it re-plans for 2 ranks, re-splits the checkpoint and
# finishes within 1e-5; a fault on every attempt exhausts --max-restarts; a
# hostfile that shrinks below --min-ranks gives up; SIGTERM ends it without
# a relaunch; bad input exits 2.
# Every launch is bounded by `timeout`.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny-gpt -p 2 -d 2 -B 8)
steps=6
limit=60 # seconds for any one launch or mpirun
launch() { timeout -s KILL $limit "$px" launch --backoff-s 0 "$@"; } # relaunch at once (tests/cli/launch_faults.sh: the backoff)
first_step() { grep -o '"first_step":[^,]*' "$1" | grep -o '[0-9]*'; }
tail_from() { echo "$1" | cut -d, -f$(($2 + 1))-; } # the losses from step $2 on

timeout -s KILL $limit mpirun -np 4 "$px" run "${plan[@]}" --steps $steps --json >"$tmp/full.json" 2>"$tmp/err" ||
  fail "uninterrupted run: $(cat "$tmp/err")"
full=$(losses "$tmp/full.json")

# A rank killed at an op of a step, from the seed (reproduce: PX_FAULT_KILL as printed).
for seed in 11 30 45; do
  rank=$((seed % 4)) step=$((1 + seed % 4)) op=$(((seed * 7919) % 1000))
  fault="rank=$rank,step=$step,op=$op"
  echo "seed $seed: PX_FAULT_KILL=$fault"
  d="$tmp/ck-$seed"
  PX_FAULT_KILL=$fault launch --max-restarts 2 --log "$tmp/log-$seed" -- "${plan[@]}" --steps $steps --ckpt "$d" \
    --ckpt-every 2 --json >"$tmp/out.json" 2>"$tmp/err" || { fail "seed $seed: launch failed: $(cat "$tmp/err")"; continue; }
  grep -q "killed before op" "$tmp/err" || fail "seed $seed: the fault did not fire: $(cat "$tmp/err")"
  grep -q "attempt 0 failed after .*: rank $rank exited on signal 9" "$tmp/err" ||
    fail "seed $seed: the failure does not name rank $rank: $(cat "$tmp/err")"
  grep -q "restart 1/2: resuming from the checkpoint of step $((step / 2 * 2))" "$tmp/err" ||
    fail "seed $seed: no restart from step $((step / 2 * 2))'s checkpoint: $(cat "$tmp/err")"
  from=$(first_step "$tmp/out.json")
  got=$(losses "$tmp/out.json")
  [ -n "$from" ] && [ "$got" = "$(tail_from "$full" "$from")" ] ||
    fail "seed $seed: losses from step $from: $got, uninterrupted: $full"
  [ "$(grep -c '"event":"failure".*"rank":'$rank "$tmp/log-$seed")" = 1 ] && grep -q '"event":"done"' "$tmp/log-$seed" ||
    fail "seed $seed: --log: $(cat "$tmp/log-$seed")"
done

# Fewer slots after the failure: the best 2-rank plan, the checkpoint re-split for it. The plan
# flags in other spellings (a bundle, --name=value), which the re-planned run leaves out for its
# --plan file and which the --mpirun wrapper records.
d="$tmp/ck-shrink"
printf '#!/bin/sh\necho "$*" >>"%s"\nexec mpirun "$@"\n' "$tmp/argv" >"$tmp/mpirun-argv.sh"
chmod +x "$tmp/mpirun-argv.sh"
PX_LAUNCH_SLOTS=4,2 PX_FAULT_KILL=rank=2,step=3,op=5 launch --min-ranks 2 --log "$tmp/log-shrink" \
  --mpirun "$tmp/mpirun-argv.sh" -- --backend cpu -m tiny-gpt -jp2 --dp=2 --gbs=8 --steps $steps --ckpt "$d" \
  --ckpt-every 2 >"$tmp/out.json" 2>"$tmp/err" || fail "shrink: $(cat "$tmp/err")"
second=$(sed -n 2p "$tmp/argv")
sed -n 1p "$tmp/argv" | grep -q -- "-np 4 .* run --backend cpu -m tiny-gpt -jp2 --dp=2 --gbs=8 --steps $steps --ckpt-every 2 --ckpt $d\$" &&
  echo "$second" | grep -q -- "-np 2 .* run --backend cpu -m tiny-gpt -j --steps $steps --ckpt-every 2 --plan $d.2ranks.plan.json --ckpt $d.2ranks --resume\$" ||
  fail "shrink: the runs' command lines: $(cat "$tmp/argv")"
grep -q "2 slots (PX_LAUNCH_SLOTS): the plan changes from .*4 ranks to .*2 ranks; the global batch of 8" "$tmp/err" &&
  grep -q "re-split from $d into $d.2ranks" "$tmp/err" || fail "shrink: no re-plan and re-split: $(cat "$tmp/err")"
[ -f "$d.2ranks.plan.json" ] && grep -q '"to_ranks":2' "$tmp/log-shrink" || fail "shrink: plan file or log missing"
from=$(first_step "$tmp/out.json")
got=$(losses "$tmp/out.json")
[ "$from" = 2 ] && close "$got" "$(tail_from "$full" 2)" 1e-5 ||
  fail "shrink: losses from step $from: $got, uninterrupted: $full"

# A fault on every attempt: --max-restarts 1 runs twice and gives up, non-zero.
d="$tmp/ck-again"
PX_FAULT_KILL="rank=3,step=1,op=0,attempt=*" launch --max-restarts 1 -- "${plan[@]}" --steps 3 --ckpt "$d" \
  --ckpt-every 1 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q "giving up after 1 restart (--max-restarts reached): the last complete checkpoint is step 1" \
  "$tmp/err" || fail "max-restarts: exit $rc: $(cat "$tmp/err")"
[ "$(grep -c "attempt [0-9] failed" "$tmp/err")" = 2 ] || fail "max-restarts: not two attempts: $(cat "$tmp/err")"

# The hostfile is read again before each attempt: the --mpirun wrapper leaves
# one slot in it, fewer than --min-ranks 2, and launch gives up after the failure.
printf 'localhost slots=4\n' >"$tmp/hosts"
printf '#!/bin/sh\necho "localhost slots=1" >"%s"\nexec mpirun "$@"\n' "$tmp/hosts" >"$tmp/mpirun.sh"
chmod +x "$tmp/mpirun.sh"
PX_FAULT_KILL=rank=0,step=0,op=3 launch --hostfile "$tmp/hosts" --min-ranks 2 --mpirun "$tmp/mpirun.sh" -- \
  "${plan[@]}" --steps 3 --ckpt "$tmp/ck-hosts" --ckpt-every 1 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q "1 slot ($tmp/hosts), fewer than --min-ranks 2: giving up" "$tmp/err" ||
  fail "hostfile: exit $rc: $(cat "$tmp/err")"

# SIGTERM to launch ends the job and no relaunch follows: exit 128 + 15.
timeout -s KILL $limit "$px" launch -- "${plan[@]}" --steps 100000 --ckpt "$tmp/ck-term" >/dev/null 2>"$tmp/err" &
job=$! # timeout, which passes the TERM on to launch
sleep 2
kill -TERM $job
wait $job
rc=$?
[ $rc = 143 ] && grep -q "stopped by signal 15" "$tmp/err" && ! grep -q "restart 1" "$tmp/err" ||
  fail "SIGTERM: exit $rc: $(cat "$tmp/err")"

# Bad input: exit 2 naming the flag, before anything runs.
refused() { # NEEDLE ARGS...: launch ARGS exits 2 saying NEEDLE
  local needle=$1 err rc
  shift
  err=$(launch "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc = 2 ] && printf '%s' "$err" | grep -qF -- "$needle" || fail "launch $*: exit $rc: $err (wanted '$needle')"
}
refused "need --ckpt DIR" -- "${plan[@]}" --steps 2
refused "expected -- and then the run's flags" --max-restarts 2
refused "--max-restarts" --max-restarts -1 -- "${plan[@]}" --ckpt "$tmp/x"
refused "--min-ranks 8 is more than the plan's 4 ranks" --min-ranks 8 -- "${plan[@]}" --ckpt "$tmp/x"
refused "--hostfile $tmp/none" --hostfile "$tmp/none" -- "${plan[@]}" --ckpt "$tmp/x"
refused "--tp" -- "${plan[@]}" --tp zero --ckpt "$tmp/x"
refused "cannot run '$tmp/none'" --mpirun "$tmp/none" -- "${plan[@]}" --ckpt "$tmp/x"
refused "already holds a checkpoint (step 6): add --resume" -- "${plan[@]}" --ckpt "$tmp/ck-11"
PX_LAUNCH_SLOTS=four refused "PX_LAUNCH_SLOTS='four'" -- "${plan[@]}" --ckpt "$tmp/x"
PX_FAULT_KILL=rank=1 refused "PX_FAULT_KILL='rank=1': expected" -- "${plan[@]}" --steps 1 --ckpt "$tmp/x"

finish
