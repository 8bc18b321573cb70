#!/usr/bin/env bash
# Checkpoints under faults: an asynchronous checkpoint equals the synchronous
# one byte for byte and resumes bitwise; a run killed (a rank, or the whole
# job) in the middle of a background write keeps the previous checkpoint,
# which resumes as if nothing happened; a rank killed mid-step ends the job
# non-zero, naming the rank, well within PX_COMM_TIMEOUT_S, and so does one that fails alone (an error,
# PX_FAULT_FAIL) while the others wait for it; a checkpoint
# write that fails (file size limit, full disk, read-only directory) fails
# the run with the path and the system's reason and keeps the previous
# checkpoint, removes what the other ranks wrote of the failed one, and says
# whether there is a complete one; a directory that cannot be written is
# refused before the first step. Every mpirun is bounded by `timeout`.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny-gpt -p 2 -d 2 -z 2 -B 8)
np=4
limit=120 # seconds for any one mpirun
run() { timeout -s KILL $limit mpirun -np $np "$px" run "${plan[@]}" "$@"; }
step_of() { grep -o '"step":[^,]*' "$1/manifest.json" 2>/dev/null | grep -o '[0-9]*'; }

# Reference: 6 steps straight, no checkpoints.
run --steps 6 --json >"$tmp/full.json" 2>"$tmp/err" || fail "full run: $(cat "$tmp/err")"
full=$(losses "$tmp/full.json")
tail4=$(echo "$full" | cut -d, -f3-)

# Async equals sync, every file, at step 2 and (resumed, checkpoints every
# 2 steps) at step 5; resuming from the async one equals not stopping.
for mode in sync async; do
  a=(); [ $mode = async ] && a=(--ckpt-async)
  run --steps 2 --ckpt "$tmp/$mode" "${a[@]}" --json >"$tmp/$mode-1.json" 2>"$tmp/err" || fail "$mode first: $(cat "$tmp/err")"
  cp -r "$tmp/$mode" "$tmp/$mode-at2"
  run --steps 5 --ckpt "$tmp/$mode" --ckpt-every 2 --resume "${a[@]}" --json >"$tmp/$mode-2.json" 2>"$tmp/err" ||
    fail "$mode resume: $(cat "$tmp/err")"
done
diff -r "$tmp/sync-at2" "$tmp/async-at2" >/dev/null || fail "async checkpoint at step 2 differs from the sync one"
diff -r "$tmp/sync" "$tmp/async" >/dev/null || fail "async checkpoint at step 5 differs from the sync one"
[ "$(step_of "$tmp/async")" = 5 ] || fail "async checkpoint is not at step 5: $(step_of "$tmp/async")"
[ -e "$tmp/async/.next" ] && fail "async run left its staging directory"
joined="$(losses "$tmp/async-1.json"),$(losses "$tmp/async-2.json")"
[ "$joined" = "$(echo "$full" | cut -d, -f1-5)" ] || fail "resumed async run differs: $joined vs $full"
grep -q '"async":	true' "$tmp/async-2.json" || fail "run --json does not report the async checkpoints"
grep -q '"snapshot_bytes":	[1-9]' "$tmp/async-2.json" || fail "run --json does not report the snapshot size"

# Killed during a background write (made slow by the test hook): first a
# rank, then the whole job (mpirun and every rank at once, as a node loss).
# Checkpoints every 2 steps, each write 3 s: the kill comes while step 4's
# is in flight, after step 2's is committed.
for victim in rank job; do
  d="$tmp/kill-$victim"
  rm -f "$tmp/out"
  PX_CKPT_TEST_DELAY_MS=3000 setsid timeout -s KILL $limit mpirun -np $np -x PX_CKPT_TEST_DELAY_MS "$px" run "${plan[@]}" \
    --steps 6 --ckpt "$d" --ckpt-every 2 --ckpt-async >"$tmp/out" 2>&1 &
  job=$!
  for i in $(seq 1 600); do # until step 2 is committed and step 4's shards are being written
    [ "$(step_of "$d")" = 2 ] && ls "$d/.next" 2>/dev/null | grep -q '\.tmp\.' && break
    sleep 0.1
  done
  ls "$d/.next" 2>/dev/null | grep -q '\.tmp\.' || fail "$victim: no write of step 4 seen in flight: $(cat "$tmp/out")"
  if [ $victim = rank ]; then
    mp=$(pgrep -P "$job" -x mpirun || pgrep -P "$job")
    kill -KILL "$(pgrep -P "$mp" | head -1)"
  else # mpirun's process group, and each rank's own
    ranks=$(pgrep -P "$(pgrep -P "$job" -x mpirun || pgrep -P "$job")")
    kill -KILL -- -"$(ps -o pgid= "$job" | tr -d ' ')" $(for r in $ranks; do echo "-$r"; done)
  fi
  wait $job; rc=$?
  [ $rc -ne 0 ] || fail "$victim: the killed run exited 0"
  [ "$(step_of "$d")" = 2 ] || fail "$victim: the checkpoint is not step 2's after the kill: $(step_of "$d")"
  run --steps 6 --ckpt "$d" --resume --json >"$tmp/resumed.json" 2>"$tmp/err" || fail "$victim: resume: $(cat "$tmp/err")"
  grep -q "removed the incomplete checkpoint" "$tmp/err" || fail "$victim: resume did not say it removed the partial write"
  [ $victim = job ] && ! grep -q "took over the lock of a job that is gone" "$tmp/err" &&
    fail "$victim: resume did not take over the killed job's lock: $(cat "$tmp/err")"
  [ "$(losses "$tmp/resumed.json")" = "$tail4" ] || fail "$victim: resumed run differs: $(losses "$tmp/resumed.json") vs $tail4"
done

# A rank killed mid-step: the whole job ends, non-zero, naming the rank,
# within PX_COMM_TIMEOUT_S (the CPU backend: Open MPI's mpirun ends the job
# when a rank dies; the CUDA backend also aborts its NCCL communicators).
export PX_COMM_TIMEOUT_S=30
t0=$(date +%s)
timeout -s KILL $limit mpirun -np $np "$px" run "${plan[@]}" --steps 100000 >"$tmp/out" 2>&1 &
job=$!
sleep 3
victim= # its ranks are up and stepping (later on a loaded machine)
for _ in $(seq 1 100); do
  victim=$(pgrep -P "$(pgrep -P $job)" | sed -n 2p)
  [ -n "$victim" ] && break
  sleep 0.2
done
[ -n "$victim" ] && kill -KILL "$victim" || fail "no rank to kill"
wait $job; rc=$?
dt=$(($(date +%s) - t0))
[ $rc -ne 0 ] || fail "a killed rank did not fail the job"
[ $dt -le $((PX_COMM_TIMEOUT_S + 2)) ] || fail "the job took ${dt}s to end after a rank was killed"
grep -q "rank [0-9]" "$tmp/out" || fail "the failure does not name the rank: $(cat "$tmp/out")"
# A rank that fails alone mid-step (PX_FAULT_FAIL: rank 1, pp stage 0's second DP rank, at op 3 of step 1)
# while the others wait for its sends: it waits PX_COMM_TIMEOUT_S for them to agree, then ends the job with
# its message; a step of every rank's failing together (the MoE overflow, exec_moe.sh) agrees at once.
export PX_COMM_TIMEOUT_S=5
t0=$(date +%s)
PX_FAULT_FAIL=rank=1,step=1,op=3 timeout -s KILL $limit mpirun -np $np "$px" run "${plan[@]}" --steps 3 >"$tmp/out" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
[ $rc -ne 0 ] && [ $rc -ne 137 ] || fail "a rank failing alone: exit status $rc"
[ $dt -le $((PX_COMM_TIMEOUT_S + 15)) ] || fail "a rank failing alone: the job took ${dt}s to end"
grep -q "^parallax: rank 1: PX_FAULT_FAIL: failed before op 3 of [0-9]* of step 1 (rank 1 failed alone: the other ranks did not stop with it in 5 s (PX_COMM_TIMEOUT_S) but wait for it elsewhere; the job is ended)" \
  "$tmp/out" || fail "a rank failing alone: $(cat "$tmp/out")"
unset PX_COMM_TIMEOUT_S

# A write that fails: the run fails with the path and errno, the previous
# checkpoint (step 2) stays and resumes bitwise, and nothing of the failed
# one is left in .next.
fails_write() { # NAME DIR REASON: the last run (exit status rc) failed writing DIR with REASON
  local name=$1 d=$2 why=$3
  [ $rc -ne 0 ] || fail "$name: the run did not fail"
  grep -q "$d/.next" "$tmp/err" && grep -q "$why" "$tmp/err" || fail "$name: no path and reason: $(cat "$tmp/err")"
  grep -q "the last complete one, step 2 in $d, is untouched" "$tmp/err" || fail "$name: no word of step 2: $(cat "$tmp/err")"
  [ "$(step_of "$d")" = 2 ] || fail "$name: previous checkpoint lost: step $(step_of "$d")"
  [ -e "$d/.next" ] && fail "$name: the failed checkpoint's shards stay in .next: $(ls "$d/.next")"
}
# A directory that cannot be written: refused (exit 2) before the first step, naming --ckpt and the reason.
refused_dir() { # NAME DIR REASON
  local name=$1 d=$2 why=$3
  [ $rc = 2 ] && grep -q -- "--ckpt: $d" "$tmp/err" && grep -q "$why" "$tmp/err" ||
    fail "$name: not refused with --ckpt and the reason (exit $rc): $(cat "$tmp/err")"
  grep -q "^step " "$tmp/out" && fail "$name: refused only after training"
  [ "$(step_of "$d")" = 2 ] || fail "$name: previous checkpoint lost: step $(step_of "$d")"
}
resumes() { # DIR: the checkpoint in DIR (step 2) resumes to the uninterrupted losses
  run --steps 6 --ckpt "$1" --resume --json >"$tmp/resumed.json" 2>"$tmp/err" || fail "$1: resume: $(cat "$tmp/err")"
  [ "$(losses "$tmp/resumed.json")" = "$tail4" ] || fail "$1: resumed run differs"
}
# File size limit (ulimit -f, 512 KiB: a shard is larger): EFBIG, in rank 1
# alone, so that the other ranks' shards are written (and then removed).
# The limit is set in the rank, not in mpirun (whose session files are
# larger), and the ranks talk over TCP rather than shared-memory files.
fsize_run() {
  OMPI_MCA_btl=self,tcp timeout -s KILL $limit mpirun -np $np \
    bash -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && ulimit -f 512; exec "$0" "$@"' "$px" run "${plan[@]}" "$@"
}
d="$tmp/fsize"
run --steps 2 --ckpt "$d" >/dev/null 2>"$tmp/err" || fail "fsize: first run: $(cat "$tmp/err")"
fsize_run --steps 4 --ckpt "$d" --resume --ckpt-async >/dev/null 2>"$tmp/err"; rc=$?
fails_write fsize "$d" "File too large"
resumes "$d"
# The same in a run with no checkpoint before: it says there is none.
fsize_run --steps 1 --ckpt "$tmp/fsize0" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q "checkpoint of step 1 not written ($tmp/fsize0 holds no complete checkpoint yet)" "$tmp/err" ||
  fail "fsize, no checkpoint before: $(cat "$tmp/err")"
[ -e "$tmp/fsize0/.next" ] && fail "fsize, no checkpoint before: .next left: $(ls "$tmp/fsize0/.next")"
# A full disk (a tmpfs that holds one checkpoint and not a second beside it)
# and a read-only directory: where this user may mount one (root); else a
# directory without write permission (not as root, who may write anyway).
mnt="$tmp/mnt"
mkdir -p "$mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=6m tmpfs "$mnt" 2>/dev/null; then
  trap 'umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
  run --steps 2 --ckpt "$mnt/ck" >/dev/null 2>"$tmp/err" || fail "enospc: first run: $(cat "$tmp/err")"
  run --steps 4 --ckpt "$mnt/ck" --resume --ckpt-async >/dev/null 2>"$tmp/err"; rc=$?
  fails_write enospc "$mnt/ck" "No space left on device"
  mount -o remount,ro "$mnt" || fail "cannot remount the tmpfs read-only"
  run --steps 4 --ckpt "$mnt/ck" --resume >"$tmp/out" 2>"$tmp/err"; rc=$?
  refused_dir rofs "$mnt/ck" "Read-only file system"
  mount -o remount,rw,size=16m "$mnt" # room for the resumed run's checkpoint
  resumes "$mnt/ck"
  umount "$mnt"
elif [ "$(id -u)" != 0 ]; then
  d="$tmp/ro"
  run --steps 2 --ckpt "$d" >/dev/null 2>"$tmp/err" || fail "read-only: first run: $(cat "$tmp/err")"
  chmod a-w "$d"
  run --steps 4 --ckpt "$d" --resume >"$tmp/out" 2>"$tmp/err"; rc=$?
  chmod u+w "$d"
  refused_dir read-only "$d" "Permission denied"
  resumes "$d"
else
  echo "note: root without permission to mount a tmpfs: the full-disk and read-only cases are left out"
fi

finish
