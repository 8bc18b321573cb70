#!/usr/bin/env bash
# Mixture-of-experts routing beyond dropless top-k on the CPU executor, as
# Megatron-Core's router (moe_utils.py): token dropping at a capacity factor
# (tiny-moe with capacity_factor 1: each expert keeps ceil(tokens x top-k /
# experts x cf) of a rank's choices, by gate or by position with
# token_drop_policy), and group-limited routing (DeepSeek's node-limited
# routing: expert_groups, groups_per_token; tiny-moe's softmax router with 2
# groups of 2, a token's top 2 from 1 of them, also with token dropping;
# tiny-moe-shared's sigmoid router, DeepSeek-V3's, with 4 groups of 2, a
# token's top 2 from 1). Each changes the losses (against tiny-moe and tiny-moe-shared,
# and the policies against each other); a plan whose ranks each route whole
# micro-batches (EP with DP, PP, ZeRO-3) reaches the one-rank run's losses
# within 1e-5 over 8 steps and its first-step gradients, and every stage's
# measured peak is its plan's; under CP each rank drops at the capacity of
# its own share of the sequence (Megatron-Core's router sees the rank's
# tokens), so the run goes on to other losses. A bad policy, and groups that
# cannot hold a token's experts, are input errors naming the field.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
jq '.name = "tiny-moe-cf" | .capacity_factor = 1' "$src/models/tiny-moe.json" >"$tmp/tiny-moe-cf.json"
jq '.name = "tiny-moe-cfpos" | .capacity_factor = 1 | .token_drop_policy = "position"' "$src/models/tiny-moe.json" \
  >"$tmp/tiny-moe-cfpos.json"
jq '.name = "tiny-moe-grp" | .expert_groups = 2 | .groups_per_token = 1' "$src/models/tiny-moe.json" \
  >"$tmp/tiny-moe-grp.json"
jq '.name = "tiny-moe-cfgrp" | .expert_groups = 2 | .groups_per_token = 1 | .capacity_factor = 1' \
  "$src/models/tiny-moe.json" >"$tmp/tiny-moe-cfgrp.json"
jq '.name = "tiny-moe-shared-grp" | .expert_groups = 4 | .groups_per_token = 1' "$src/models/tiny-moe-shared.json" \
  >"$tmp/tiny-moe-shared-grp.json"
cp "$src/models/tiny-moe.json" "$src/models/tiny-moe-shared.json" "$tmp/"

run() { # out model ranks flags... (the model in $tmp)
  local out=$1 model=$2 n=$3
  shift 3
  timeout 120 mpirun -np "$n" "$px" run --backend cpu -m "$tmp/$model.json" --steps 8 -B 4 \
    --dump-grads "$tmp/$out.bin" --json "$@" >"$tmp/$out.json" 2>"$tmp/err.txt"
}

for model in tiny-moe tiny-moe-cf tiny-moe-cfpos tiny-moe-grp tiny-moe-cfgrp tiny-moe-shared tiny-moe-shared-grp; do
  run "ref_$model" "$model" 1 || fail "$model on one rank: $(head -3 "$tmp/err.txt")"
done
# each is there: the capacity, the policy, the groups (with and without dropping) change the losses
for pair in "tiny-moe tiny-moe-cf" "tiny-moe-cf tiny-moe-cfpos" "tiny-moe tiny-moe-grp" "tiny-moe-grp tiny-moe-cfgrp" \
  "tiny-moe-shared tiny-moe-shared-grp"; do
  read -r a b <<<"$pair"
  close "$(losses "$tmp/ref_$a.json")" "$(losses "$tmp/ref_$b.json")" 1e-5 &&
    fail "$b trains as $a: $(losses "$tmp/ref_$b.json")"
done

# model | flags: each rank routes whole micro-batches, so it drops what the one-rank run drops
cases=(
  "tiny-moe-cf|-d 2 --ep 2"
  "tiny-moe-cf|-p 2"
  "tiny-moe-cf|-d 4 --ep 2 -z 3"
  "tiny-moe-cfpos|-d 2 --ep 2"
  "tiny-moe-grp|-d 2 --ep 2"
  "tiny-moe-grp|-p 2"
  "tiny-moe-cfgrp|-d 2 --ep 2"
  "tiny-moe-shared-grp|-d 4 --ep 4"
)
one_rank_cases "${cases[@]}"

# CP: each rank's capacity is of its half of the sequence, so other choices drop (and the run goes on)
if run cp tiny-moe-cf 2 --cp 2; then
  close "$(losses "$tmp/ref_tiny-moe-cf.json")" "$(losses "$tmp/cp.json")" 1e-5 &&
    fail "cp 2 drops what one rank drops: $(losses "$tmp/cp.json")"
else
  fail "tiny-moe-cf --cp 2: $(head -3 "$tmp/err.txt")"
fi

# a policy that is not one: exit 2, naming the field
jq '.token_drop_policy = "random"' "$tmp/tiny-moe-cf.json" >"$tmp/bad.json"
err=$(mpirun -np 1 "$px" run --backend cpu -m "$tmp/bad.json" --steps 1 -B 4 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "token_drop_policy" || fail "bad token_drop_policy: exit $rc: $err"
jq '.expert_groups = 8 | .groups_per_token = 1' "$tmp/tiny-moe-shared-grp.json" >"$tmp/bad.json" # 1 of 1: not 2
err=$(mpirun -np 1 "$px" run --backend cpu -m "$tmp/bad.json" --steps 1 -B 4 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "field 'groups_per_token'" || fail "groups short of top-k: exit $rc: $err"

finish
