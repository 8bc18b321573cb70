#!/usr/bin/env bash
# How parallax launch tells the ends of an attempt apart (tests/cli/launch.sh: the relaunches
# and re-plans themselves): a corrupt shard on a resume is an input error on every rank (exit 2),
# so launch gives up at once, without a restart (three times: which rank mpirun reports first is
# a race); a launcher that fails before any rank started (/bin/false, an option mpirun does not
# know, /bin/true's exit 0) is not relaunched: exit 2 with its message; a run that ends without
# an error short of its --steps is a failure (exit 1); a rank's failure is relaunched after a
# backoff that doubles; a SIGKILLed launch leaves no rank training and its checkpoint still; a
# re-plan the backend cannot run gives way to the best plan it runs; an --np other than the run
# flags' plan, or a plan the backend cannot run, is refused before mpirun.
# Every launch is bounded by `timeout`.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
plan=(--backend cpu -m tiny-gpt -p 2 -d 2 -B 8)
limit=60 # seconds for any one launch or mpirun
launch() { timeout -s KILL $limit "$px" launch "$@"; }

# A corrupt shard: every rank exits 2, launch passes it on and does not relaunch.
timeout -s KILL $limit mpirun -np 4 "$px" run "${plan[@]}" --steps 2 --ckpt "$tmp/bad" >/dev/null 2>"$tmp/err" ||
  fail "checkpoint to corrupt: $(cat "$tmp/err")"
printf 'X' | dd of="$tmp/bad/shard-0.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
for try in 1 2 3; do
  launch -- "${plan[@]}" --steps 4 --ckpt "$tmp/bad" --resume >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc = 2 ] && grep -q "shard-0.bin: corrupt" "$tmp/err" &&
    grep -q "giving up after 0 restarts (the run refused its input (exit 2)" "$tmp/err" && ! grep -q "restart 1" "$tmp/err" ||
    fail "corrupt shard, try $try: exit $rc: $(cat "$tmp/err")"
done

# The launcher fails before any rank started: no relaunch, exit 2, its own message.
for mp in /bin/false "mpirun --no-such-option" /bin/true; do
  rm -rf "$tmp/lf"
  launch --log "$tmp/log-lf" --mpirun "$mp" -- "${plan[@]}" --steps 2 --ckpt "$tmp/lf" >/dev/null 2>"$tmp/err"
  rc=$?
  case $mp in
    /bin/false) said="mpirun exit status 1" ;;
    /bin/true) said="mpirun exit status 0" ;;
    *) said='unknown option "--no-such-option"' ;;
  esac
  [ $rc = 2 ] && grep -q "attempt 0: no rank of the run started; the launcher ended after .*$said" "$tmp/err" &&
    grep -q "giving up after 0 restarts (the launcher failed before any rank started" "$tmp/err" &&
    grep -q '"event":"failure".*"started":false' "$tmp/log-lf" || fail "--mpirun '$mp': exit $rc: $(cat "$tmp/err")"
done

# The run ends without an error short of its --steps (a wrapper makes them 1): exit 1, no relaunch.
printf '#!/usr/bin/env bash\na=("$@")\nfor i in "${!a[@]}"; do [ "${a[$i]}" = --steps ] && a[$((i + 1))]=1; done\nexec mpirun "${a[@]}"\n' \
  >"$tmp/one-step.sh"
chmod +x "$tmp/one-step.sh"
launch --mpirun "$tmp/one-step.sh" -- "${plan[@]}" --steps 3 --ckpt "$tmp/short" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q "the run ended (exit status 0) with the checkpoint of step 1 in $tmp/short, short of --steps 3" \
  "$tmp/err" && ! grep -q "restart 1" "$tmp/err" || fail "short run: exit $rc: $(cat "$tmp/err")"

# A rank dies on every attempt: each relaunch waits --backoff-s, doubled.
PX_FAULT_KILL="rank=1,step=0,op=0,attempt=*" launch --max-restarts 2 --backoff-s 0.2 --log "$tmp/log-bo" -- \
  "${plan[@]}" --steps 2 --ckpt "$tmp/bo" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q "relaunching in 0.2 s (--backoff-s 0.2" "$tmp/err" && grep -q "relaunching in 0.4 s" "$tmp/err" &&
  [ "$(grep -o '"backoff_s":[0-9.]*' "$tmp/log-bo" | tr '\n' ' ')" = '"backoff_s":0.2 "backoff_s":0.4 ' ] &&
  [ "$(grep -c '"event":"failure".*"started":true' "$tmp/log-bo")" = 3 ] || fail "backoff: exit $rc: $(cat "$tmp/err")"

# SIGKILL to launch: mpirun and the ranks end with it, and the checkpoint stops changing.
d="$tmp/orphan-$$"
"$px" launch -- "${plan[@]}" --steps 100000 --ckpt "$d" --ckpt-every 1 >/dev/null 2>"$tmp/err" &
job=$!
disown $job # killed below: no job notice
for i in $(seq 1 300); do [ -f "$d/manifest.json" ] && break; sleep 0.1; done
[ -f "$d/manifest.json" ] || fail "orphans: no checkpoint written: $(cat "$tmp/err")"
kill -KILL $job
for i in $(seq 1 50); do pgrep -f -- "--ckpt $d" >/dev/null || break; sleep 0.1; done
left=$(pgrep -f -- "--ckpt $d")
if [ -n "$left" ]; then
  fail "orphans: still running 5 s after launch was killed: $(pgrep -af -- "--ckpt $d")"
  kill -KILL $left
fi
before=$(cat "$d/manifest.json")
sleep 1
[ "$(cat "$d/manifest.json")" = "$before" ] || fail "orphans: the checkpoint still changes after launch was killed"

# Fewer slots, and the planner's best plan for them (ep 2 with ZeRO-2, fp8 blockwise) is one the cpu
# backend cannot run (blockwise scales do not travel with expert parallelism's codes): launch takes the
# best it runs (ep 1) and finishes.
# mbs 1 and the busiest rank's expert buffers: where ep 2 ranks first for 2 ranks (8.24 against 8.39 ms)
moe=(--backend cpu -m tiny-moe -d 4 -z 2 -B 8 -b 1 --precision fp8 --fp8-recipe blockwise --fp8-base fp32
  --moe-buffers busiest)
PX_LAUNCH_SLOTS=4,2 PX_FAULT_KILL=rank=2,step=3,op=5 launch --min-ranks 2 -- "${moe[@]}" --steps 4 \
  --ckpt "$tmp/moe" --ckpt-every 2 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && grep -q "best plan for 2 ranks (.*ep 2.*) is one the cpu backend cannot run" "$tmp/err" &&
  grep -q "the plan changes from .* to tp 1 x pp 1 x dp 2, ZeRO-2, fp8 (blockwise, fp32 base), 2 ranks" "$tmp/err" &&
  ! grep -q '"ep":[[:space:]]*2' "$tmp/moe.2ranks.plan.json" || fail "re-plan past a refused plan: exit $rc: $(cat "$tmp/err")"

# Refused before mpirun (which --mpirun /bin/false stands for): exit 2 naming why.
refused() { # NEEDLE ARGS...: launch ARGS exits 2 saying NEEDLE, no attempt made
  local needle=$1 err rc
  shift
  err=$(launch --mpirun /bin/false "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc = 2 ] && printf '%s' "$err" | grep -qF -- "$needle" && ! printf '%s' "$err" | grep -q "attempt 0" ||
    fail "launch $*: exit $rc: $err (wanted '$needle')"
}
refused "--np starts 2 ranks but the run flags' plan needs 4" --np 2 -- "${plan[@]}" -g 4 --ckpt "$tmp/x"
refused "--np starts 8 ranks but the run flags' plan needs 4" --np 8 -- --backend cpu -m tiny-gpt -g 4 --ckpt "$tmp/x"
refused "--backend cpu cannot run this plan: mixture of experts runs with" -- --backend cpu -m tiny-moe -g 2 -t 2 -S --ep 2 --etp 1 \
  --moe-dispatch allgather --ckpt "$tmp/x"
refused "--backoff-s" --backoff-s -1 -- "${plan[@]}" --ckpt "$tmp/x"
refused "--overwrite is not taken" -- "${plan[@]}" --ckpt "$tmp/x" --overwrite

finish
