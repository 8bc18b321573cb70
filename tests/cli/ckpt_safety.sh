#!/usr/bin/env bash
# Checkpoint directories that a careless command cannot destroy: run and
# reshard --to refuse a directory holding a checkpoint (exit 2, naming it,
# its step and model) unless --resume or --overwrite; --overwrite replaces
# it only once the new one is written; --ckpt-keep K keeps the last K, each
# resumable; a lock refuses a second job on a directory and is taken over
# from a job that is gone (launch relaunching a job whose rank 0 was killed
# included); every output path is checked before the first step; reshard
# --from a directory caught mid-commit reads the committed checkpoint.
# Small model, 2 ranks; every mpirun bounded by `timeout`.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny -d 2 -B 8)
limit=60
run() { timeout -s KILL $limit mpirun -np 2 "$px" run "${plan[@]}" "$@"; }
step_of() { jq -r .step "$1/manifest.json" 2>/dev/null; }
model_of() { jq -r .plan.model.name "$1/manifest.json" 2>/dev/null; }
# refused WHAT: the last command (exit status rc, output in $tmp/out and $tmp/err) exited 2 saying WHAT, before any step
refused() {
  [ "$rc" = 2 ] && grep -qF -- "$1" "$tmp/err" || fail "not refused with '$1' (exit $rc): $(grep parallax "$tmp/err")"
  grep -q "^step " "$tmp/out" && fail "refused only after training: $1"
}
# kill_job PID: the job started in the background as PID (setsid timeout mpirun ...), mpirun and every rank
kill_job() {
  local mp ranks
  mp=$(pgrep -P "$1" -x mpirun || pgrep -P "$1")
  ranks=$(pgrep -P "$mp")
  kill -KILL -- -"$(ps -o pgid= "$1" | tr -d ' ')" $(for r in $ranks; do echo "-$r"; done)
  wait "$1"
}
# slow_job DIR ARGS...: a run writing DIR slowly (3 s a shard) in the background; $job is its pid,
# returned once it holds DIR's lock
slow_job() {
  local d=$1
  shift
  PX_CKPT_TEST_DELAY_MS=${slow_ms:-3000} setsid timeout -s KILL $limit mpirun -np 2 -x PX_CKPT_TEST_DELAY_MS "$px" run "${plan[@]}" \
    --ckpt "$d" "$@" >"$tmp/slow.out" 2>"$tmp/slow.err" &
  job=$!
  for _ in $(seq 1 300); do [ -e "$d/lock" ] && break; sleep 0.05; done
  [ -e "$d/lock" ] || fail "the slow job did not lock $d: $(cat "$tmp/slow.err")"
}

# ---- a checkpoint already there: refused, replaced only when asked, and only once the new one is written

d=$tmp/ck
run --steps 6 --json >"$tmp/straight.json" 2>"$tmp/err" || fail "straight run: $(cat "$tmp/err")"
run --steps 4 --ckpt "$d" >/dev/null 2>"$tmp/err" || fail "first run: $(cat "$tmp/err")"
cp -r "$d" "$tmp/ck-4"
run --steps 2 --ckpt "$d" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt $d already holds the checkpoint of step 4 (model tiny): add --resume to go on from it, or --overwrite to replace it"
diff -r "$d" "$tmp/ck-4" >/dev/null || fail "a refused run changed the checkpoint"
# another model's on more ranks, whose extra shards a replacing run removes
o=$tmp/other
timeout -s KILL $limit mpirun -np 4 "$px" run --backend cpu -m tiny-gpt -d 4 -B 8 --steps 1 --ckpt "$o" >/dev/null 2>"$tmp/err" ||
  fail "tiny-gpt run: $(cat "$tmp/err")"
run --steps 2 --ckpt "$o" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt $o already holds the checkpoint of step 1 (model tiny-gpt)"
[ -e "$o/shard-3.bin" ] || fail "a refused run removed another plan's shard"
# --overwrite, killed while writing its checkpoint: the old one is whole
slow_job "$o" --steps 1 --overwrite
for _ in $(seq 1 200); do ls "$o/.next" 2>/dev/null | grep -q '\.tmp\.' && break; sleep 0.05; done
kill_job $job
[ "$(step_of "$o")" = 1 ] && [ "$(model_of "$o")" = tiny-gpt ] && [ -e "$o/shard-3.bin" ] ||
  fail "--overwrite stopped before its checkpoint was written: the old one is not whole ($(step_of "$o"), $(model_of "$o"))"
# ... and run to its end: replaced (the lock the killed job left is taken over)
run --steps 2 --ckpt "$o" --overwrite >/dev/null 2>"$tmp/err" || fail "--overwrite: $(cat "$tmp/err")"
grep -q "took over the lock of a job that is gone (pid [0-9]* on " "$tmp/err" || fail "no note of the stale lock: $(cat "$tmp/err")"
[ "$(step_of "$o")" = 2 ] && [ "$(model_of "$o")" = tiny ] && [ ! -e "$o/shard-2.bin" ] && [ ! -e "$o/lock" ] ||
  fail "--overwrite did not replace the checkpoint: step $(step_of "$o"), $(model_of "$o"), $(ls "$o")"
# flags that need --ckpt
run --steps 1 --overwrite >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--overwrite needs --ckpt DIR"
run --steps 1 --ckpt-keep 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt-keep needs --ckpt DIR"
run --steps 1 --ckpt "$tmp/x" --ckpt-keep 0 >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt-keep"

# ---- --ckpt-keep: the latest in DIR, the older in DIR/step-<N>/, each resumable

k=$tmp/keep
run --steps 5 --ckpt "$k" --ckpt-every 1 --ckpt-keep 3 >/dev/null 2>"$tmp/err" || fail "keep: $(cat "$tmp/err")"
[ "$(step_of "$k")" = 5 ] && [ "$(step_of "$k/step-4")" = 4 ] && [ "$(step_of "$k/step-3")" = 3 ] &&
  [ "$(ls -d "$k"/step-* | wc -l)" = 2 ] || fail "keep 3: $(ls "$k")"
run --steps 6 --ckpt "$k/step-3" --resume --json >"$tmp/from3.json" 2>"$tmp/err" || fail "resume step-3: $(cat "$tmp/err")"
[ "$(losses "$tmp/from3.json")" = "$(losses "$tmp/straight.json" | cut -d, -f4-)" ] ||
  fail "the kept step 3 does not resume to the straight run: $(losses "$tmp/from3.json")"
run --steps 6 --ckpt "$k" --resume --ckpt-keep 1 >/dev/null 2>"$tmp/err" || fail "keep 1: $(cat "$tmp/err")"
[ "$(step_of "$k")" = 6 ] && ! ls -d "$k"/step-* >/dev/null 2>&1 || fail "keep 1 left: $(ls "$k")"

# ---- the lock: a second job on a directory is refused; a stale lock is taken over

b=$tmp/busy
slow_ms=10000 slow_job "$b" --steps 1 # long enough for two more jobs to start beside it on a loaded machine
run --steps 1 --ckpt "$b" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt: $b is in use by another job: pid "
"$px" reshard --from "$d" --to "$b" -d 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--to: $b is in use by another job: pid "
wait $job || fail "the first job failed: $(cat "$tmp/slow.err")"
[ "$(step_of "$b")" = 1 ] && [ ! -e "$b/lock" ] || fail "the first job: step $(step_of "$b"), $(ls "$b")"
# a lock whose pid is gone, on this host
sh -c 'exit 0' &
gone=$!
wait $gone
echo "{\"host\": \"$(hostname)\", \"pid\": $gone, \"since_unix_s\": 1700000000}" >"$b/lock"
run --steps 2 --ckpt "$b" --resume >/dev/null 2>"$tmp/err" || fail "stale lock: $(cat "$tmp/err")"
grep -q "took over the lock of a job that is gone (pid $gone on $(hostname) since 2023-11-14 22:13:20 UTC)" "$tmp/err" ||
  fail "stale lock: no note: $(cat "$tmp/err")"
[ "$(step_of "$b")" = 2 ] && [ ! -e "$b/lock" ] || fail "stale lock: step $(step_of "$b"), $(ls "$b")"
# one from another host cannot be checked: it stands
echo "{\"host\": \"elsewhere.invalid\", \"pid\": $gone}" >"$b/lock"
run --steps 3 --ckpt "$b" --resume >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "is in use by another job: pid $gone on elsewhere.invalid"
rm "$b/lock"

# launch relaunching a job whose rank 0 was killed (SIGKILL, at step 2): the relaunch takes over its lock
PX_FAULT_KILL="rank=0,step=2,op=0" timeout -s KILL $limit "$px" launch --max-restarts 1 -- "${plan[@]}" --steps 3 \
  --ckpt "$tmp/launched" --ckpt-every 1 >/dev/null 2>"$tmp/err" || fail "launch, rank 0 killed: $(cat "$tmp/err")"
grep -q "took over the lock of a job that is gone" "$tmp/err" && [ "$(step_of "$tmp/launched")" = 3 ] ||
  fail "launch, rank 0 killed: no lock taken over: $(grep parallax "$tmp/err")"

# ---- every output path checked before the first step

touch "$tmp/afile"
run --steps 1 --ckpt "$tmp/afile" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt: $tmp/afile: not a directory"
run --steps 1 --ckpt "$tmp/afile/ck" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--ckpt: $tmp/afile/ck: cannot create directory"
run --steps 1 --profile "$tmp" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--profile: $tmp: is a directory"
run --steps 1 --profile "$tmp/none/p.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--profile: $tmp/none/p.json: cannot be created: $tmp/none: No such file or directory"
run --steps 1 --dump-grads "$tmp" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--dump-grads: $tmp: is a directory"
run --steps 1 --dump-grads "$tmp/afile/g.bin" >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--dump-grads: $tmp/afile/g.bin: cannot be created: $tmp/afile is not a directory"
"$px" reshard --from "$d" --to "$tmp/afile" -d 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--to: $tmp/afile: not a directory"

# ---- reshard --to: a checkpoint there is refused unless --overwrite

"$px" reshard --from "$d" --to "$tmp/ck-4" -d 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
refused "--to $tmp/ck-4 already holds the checkpoint of step 4 (model tiny): add --overwrite to replace it"
diff -r "$d" "$tmp/ck-4" >/dev/null || fail "a refused reshard changed --to"
"$px" reshard --from "$d" --to "$tmp/ck-4" --overwrite -d 1 >/dev/null 2>"$tmp/err" || fail "reshard --overwrite: $(cat "$tmp/err")"
[ "$(jq .world "$tmp/ck-4/manifest.json")" = 1 ] && [ ! -e "$tmp/ck-4/shard-1.bin" ] && [ ! -e "$tmp/ck-4/lock" ] ||
  fail "reshard --overwrite did not replace --to: $(ls "$tmp/ck-4")"

# ---- reshard --from a directory caught mid-commit: the committed checkpoint (step 5), read as it lies

m=$tmp/mid
cp -r "$d" "$m" && cp -r "$d" "$tmp/ck-5"
run --steps 5 --ckpt "$tmp/ck-5" --resume >/dev/null 2>"$tmp/err" || fail "step 5: $(cat "$tmp/err")"
mkdir "$m/.next" && cp "$tmp/ck-5"/shard-*.bin "$tmp/ck-5/manifest.json" "$m/.next/" && mv "$m/.next/shard-0.bin" "$m/"
cp -r "$m" "$tmp/mid-copy"
"$px" reshard --from "$m" --to "$tmp/mid-out" -d 1 >"$tmp/out" 2>"$tmp/err" && grep -q "checkpoint of step 5 re-split" "$tmp/out" ||
  fail "reshard --from mid-commit: $(cat "$tmp/err")"
diff -r "$m" "$tmp/mid-copy" >/dev/null || fail "reshard --from changed the directory it read"

finish
