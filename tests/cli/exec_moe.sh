#!/usr/bin/env bash
# Mixture of experts on the CPU executor: tiny-moe (softmax router, top 2 of
# 4, load-balancing loss) and tiny-moe-shared (a dense first layer, then 8
# experts with a shared one, sigmoid router): every plan's losses equal the
# one-rank run within 1e-5 over 8 steps, its first-step gradients too, and
# every stage's measured peak is the plan's, with expert parallelism (ep 2
# and 4: the routed rows go by all-to-all-v) combined with DP, PP, ZeRO and
# full recomputation, and with context parallelism (the router's expert
# shares, which the load-balancing loss reads, are the micro-batch's over
# the CP ranks); ZeRO-3 gathers an MoE layer's two units (the rest and
# the experts), with and without resharding after the forward, any prefetch;
# with ep > 1, ZeRO-1/2/3 reduce-scatter, shard and gather the expert units
# over the expert-data-parallel group (dp / ep ranks: 2 with dp 4, ep 2, as
# Megatron-Core's distributed optimizer does) and the rest over dp, also
# offloaded, and a checkpoint of such a plan resumes to the straight run.
# Under TP + SP (each TP rank routes its sequence shard; the shares over TP
# x CP) with etp = tp (the ETP all-gather and reduce-scatter of the routed
# rows, each rank's own number) or etp 1 (EP over the TP ranks: the MoE
# layers' fold), with DP, ZeRO, CP, PP and full recomputation; and etp
# beyond tp (over TP and DP ranks) or without TP. EP overlap (--overlap ep: each steady-state forward
# merged layer by layer with the backward of the micro-batch before, one more forward first) at pp 1 and
# interleaved: the same losses and gradients, its peak the plan's. DeepEP's and HybridEP's plans (the same op
# graph, other copies on the wire) and per-layer CUDA graphs (the host's launches only) run as the plan's ops.
# A run's expert buffers hold every routing a dropless router can make
# (--moe-buffers worst, its default): the untrained router runs to the end
# at --moe-imbalance 1. Buffers sized for the busiest rank (--moe-buffers
# busiest) that an EP rank overflows fail naming the fix on every rank (no
# hang); MoE on the CUDA backend is refused with the reason. tiny-moe with every linear layer's bias
# (gpt-oss's: the router's, the experts' fc1 in their GEMM and fc2's gate-scaled one) runs as the others,
# with EP, ZeRO-3 and TP + SP (the router's bias a partial sum over the sequence shards).
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"

run() { # out model ranks flags...: a preset's file, or one this test writes in $tmp
  local out=$1 model=$2 n=$3 file=$src/models/$2.json
  shift 3
  [ -f "$tmp/$model.json" ] && file=$tmp/$model.json
  cpu_run "$out" "$n" -m "$file" --steps 8 -B 4 "$@"
}
sed 's/"name": "tiny-moe"/"name": "tiny-moe-bias", "bias": true/' "$src/models/tiny-moe.json" >"$tmp/tiny-moe-bias.json"

# model | flags (the reference: the model on one rank). The run's default --moe-buffers worst sizes every
# EP rank's buffer for the worst case (each of ep ranks sending all its tokens' choices to it), whatever
# --moe-imbalance (the simulator's busiest rank, its time) says; --moe-imbalance ep did that before
cases=(
  "tiny-moe|-d 2"
  "tiny-moe|-d 2 --ep 2 --moe-imbalance 1"
  "tiny-moe|-d 4 --ep 4"
  "tiny-moe|-p 2 -d 2 --ep 2 --moe-imbalance 2"
  "tiny-moe|-d 2 -z 2"
  "tiny-moe|-d 2 -z 3"
  "tiny-moe|-d 2 -z 3 --no-reshard-after-forward --prefetch 0"
  "tiny-moe-shared|-p 2 -d 2 -z 3 --prefetch 2"
  "tiny-moe-shared|-d 4 --ep 4 --moe-imbalance 4"
  "tiny-moe-shared|-d 2 --ep 2 --moe-imbalance 2 -r full"
  "tiny-moe|--cp 2 --cp-algo a2a"
  "tiny-moe|--cp 2 -d 2 --ep 2 --moe-imbalance 2"
  "tiny-moe|-d 2 --ep 2 -z 2"
  "tiny-moe|-d 4 --ep 2 -z 1"
  "tiny-moe|-d 4 --ep 2 -z 2"
  "tiny-moe|-d 4 --ep 2 -z 3"
  "tiny-moe|-p 2 -d 2 --ep 2 -z 1"
  "tiny-moe-shared|-d 4 --ep 2 -z 3 --offload-optimizer cpu --offload-params cpu --moe-imbalance 2"
  "tiny-moe|-t 2 -S"
  "tiny-moe|-t 2 -S --ep 2 --etp 1"
  "tiny-moe|-t 2 -S -d 2 --ep 4 --etp 1 -z 1"
  "tiny-moe|-t 2 -S -d 2 --ep 2 --etp 1 -z 3"
  "tiny-moe-shared|-t 2 -S -d 2 --ep 2 -z 2"
  "tiny-moe-shared|-t 2 -S --cp 2 --ep 2 --etp 1 -r full"
  "tiny-moe-shared|-t 2 -S -p 2 --ep 2 --etp 1"
  "tiny-moe|-t 2 -S -d 2 --etp 4"
  "tiny-moe-shared|-d 4 --ep 2 --etp 2 -z 2"
  "tiny-moe|-d 2 --ep 2 --overlap all,ep"
  "tiny-moe-shared|-p 2 -v 2 -d 2 --ep 2 --overlap all,ep"
  "tiny-moe|-d 2 --ep 2 --moe-dispatch deepep"
  "tiny-moe-shared|-t 2 -S --ep 2 --etp 1 --moe-dispatch hybridep --cuda-graph layers"
  "tiny-moe|-d 2 --ep 2 --moe-dispatch hybridep --cuda-graph full"
  "tiny-moe-bias|-d 2 --ep 2"
  "tiny-moe-bias|-d 4 --ep 2 -z 3"
  "tiny-moe-bias|-t 2 -S -d 2 --ep 4 --etp 1 -z 1"
)
one_rank_cases "${cases[@]}"

# buffers for a balanced router's busiest rank (--moe-buffers busiest --moe-imbalance 1) overflow on
# tiny-moe ep 2: every rank stops, one naming the rows and the fix
err=$(timeout 60 mpirun -np 2 "$px" run --backend cpu -m "$src/models/tiny-moe.json" -B 4 -d 2 --ep 2 --steps 2 \
  --moe-buffers busiest 2>&1 >/dev/null)
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
  echo "$err" | grep -q "routed rows arrive for its experts.*hint: --moe-buffers worst holds every routing" ||
  fail "ep 2 overflow: $rc $err"

# the router's padding (--moe-router-padding) adds zero-gate routings only: the same losses, fp8 on EP 2
pad=()
for flags in "" "--moe-router-padding"; do
  out=$(timeout 60 mpirun -np 2 "$px" run --backend cpu -m "$src/models/tiny-moe.json" -B 4 -d 2 --ep 2 --steps 2 \
    -P fp8 --fp8-recipe current $flags 2>&1) || fail "fp8 ep 2 ${flags:-without padding}: $out"
  pad+=("$(grep -o 'loss [0-9.]*' <<<"$out" | tr '\n' ' ')")
done
[ -n "${pad[0]}" ] && [ "${pad[0]}" = "${pad[1]}" ] || fail "--moe-router-padding changed the losses: ${pad[0]} / ${pad[1]}"

# a checkpoint of ZeRO-2 with the expert units sharded over the expert-DP group, after step 3, resumes
# under the same plan to the straight run's steps 4-8; also under TP + SP with etp 1 (the MoE layers' fold:
# EP over the TP ranks, expert-DP over DP)
for zs in "-d 4 --ep 2 -z 2" "-t 2 -S -d 2 --ep 2 --etp 1 -z 2"; do
  read -ra zf <<<"$zs"
  rm -rf "$tmp/ck"
  if run first tiny-moe 4 "${zf[@]}" --steps 3 --ckpt "$tmp/ck" &&
    run second tiny-moe 4 "${zf[@]}" --ckpt "$tmp/ck" --resume; then
    run straight tiny-moe 4 "${zf[@]}" || fail "straight: $(head -3 "$tmp/err.txt")"
    want=$(losses "$tmp/straight.json" | cut -d, -f4-8)
    close "$want" "$(losses "$tmp/second.json")" 1e-5 && echo "ok: ${zf[*]} resumed: steps 4-8 $want" ||
      fail "${zf[*]} resumed: $(losses "$tmp/second.json"), straight $want"
  else
    fail "${zf[*]} checkpoint: $(head -3 "$tmp/err.txt")"
  fi
done

# the CUDA backend has no MoE kernels: refused before running (a build without CUDA says it has none)
cuda_refuses "mixture-of-experts" 1 -m "$src/models/tiny-moe.json" -B 4 --steps 1

finish
