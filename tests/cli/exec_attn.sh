#!/usr/bin/env bash
# The attention variants the planner prices, on the CPU executor: Qwen3's
# per-head q/k norms (tiny-qknorm), gpt-oss's attention sinks (tiny-sinks;
# tiny-oss: with a window on every other layer and q, k, v biases, as gpt-oss)
# and DeepSeek's multi-head latent attention (tiny-mla; tiny-mla-v8: one
# query projection and values narrower than the queries' heads, as
# DeepSeek-V2-Lite's and V3's 128 against 192). Each model's
# multi-rank plans (TP with its heads split, SP, PP, ZeRO, CP with each
# algorithm, the unfused attention with selective recomputation, where the
# variant allows them) reach the losses and first-step gradients of its
# one-rank run within 1e-5 over 8 steps, and every stage's measured peak is
# its plan's; the sinks' fused and unfused attention reach the same losses, and
# --attention flash2 tiny's flash losses exactly.
# A checkpoint of each, written under one plan (TP splitting the sinks and the
# heads), resumes under another (re-split through the global layout) to the
# straight run's losses. Each variant changes the losses (against tiny without
# it); the CUDA backend refuses each variant by name. Sinks run under CP's
# ring too (their gradient from each row's probability of every key block,
# summed over the ring's steps), with micro-batches of 2. Latent attention under TP (with SP, PP, full
# recomputation, micro-batches of 2: the sequence-axis gathers through their
# workspaces) runs Megatron-Core's layout (plan/attention.c): the latents and
# the RoPE key gathered, their gradients reduced over TP, the layer input's
# gradient whole.
set -u
px=$1
src=$2
cmp=$(dirname "$px")/tests/px_gradcmp
source "$(dirname "$0")/../tools/clitest.sh"
jq '.name = "tiny-mla-v8" | .q_lora_rank = 0 | .v_head_dim = 8' "$src/models/tiny-mla.json" >"$tmp/tiny-mla-v8.json"
jq '.name = "tiny-oss" | .attention_sinks = true | .qkv_bias = true' "$src/models/tiny-window.json" >"$tmp/tiny-oss.json"

run() { # out model gbs ranks flags... (the model in $tmp, else in models/)
  local out=$1 model=$2 gbs=$3 n=$4
  shift 4
  cpu_run "$out" "$n" -m "$(model_file "$model")" --steps 8 -B "$gbs" "$@"
}

# model ranks | flags: each against the model's one-rank run (gbs 4)
cases=(
  "tiny-qknorm 2|-t 2"
  "tiny-qknorm 4|-t 2 -S -p 2"
  "tiny-qknorm 2|-d 2 -z 3"
  "tiny-qknorm 2|--cp 2"
  "tiny-qknorm 2|--cp 2 --cp-algo all-gather"
  "tiny-qknorm 2|--cp 2 --cp-algo a2a"
  "tiny-qknorm 2|-t 2 -S --attention unfused -r selective"
  "tiny-sinks 2|-t 2"
  "tiny-sinks 4|-t 2 -S -p 2"
  "tiny-sinks 2|-d 2 -z 3"
  "tiny-sinks 2|--cp 2"
  "tiny-sinks 2|--cp 2 -b 2"
  "tiny-sinks 2|--cp 2 --cp-algo all-gather"
  "tiny-sinks 2|--cp 2 --cp-algo a2a"
  "tiny-sinks 1|--attention unfused"
  "tiny-sinks 2|-t 2 -S --attention unfused -r selective"
  "tiny-oss 2|-t 2 -S"
  "tiny-mla 2|-t 2"
  "tiny-mla 2|-t 2 -S -b 2"
  "tiny-mla 4|-t 2 -S -p 2"
  "tiny-mla 4|-t 2 -p 2 -r full"
  "tiny-mla 2|-p 2"
  "tiny-mla 2|-d 2 -z 3"
  "tiny-mla 4|-p 2 -d 2 -z 1 -r full"
  "tiny-mla 1|-b 2"
  "tiny-mla-v8 2|-p 2"
  "tiny-mla-v8 2|-d 2 -z 2"
  "tiny-mla-v8 2|-t 2 -S"
)
run_cases "${cases[@]}"

# each variant is there: without it the same model trains to other losses; --attention flash2 (the fused
# attention costed as FlashAttention-2's kernel) runs flash's op graph: the same losses
if run base tiny 4 1; then
  for model in tiny-qknorm tiny-sinks tiny-mla; do
    close "$(losses "$tmp/base.json")" "$(losses "$tmp/ref_$model.json")" 1e-3 &&
      fail "$model's losses are tiny's: $(losses "$tmp/base.json")"
  done
  if run flash2 tiny 4 1 --attention flash2; then
    close "$(losses "$tmp/base.json")" "$(losses "$tmp/flash2.json")" 0 || fail "flash2: $(losses "$tmp/flash2.json")"
  else
    fail "tiny --attention flash2: $(head -3 "$tmp/err.txt")"
  fi
else
  fail "tiny: $(head -3 "$tmp/err.txt")"
fi

# a checkpoint re-split for another plan: steps 4-6 as the straight run's (model | old plan | new plan)
for c in "tiny-sinks|-t 2|-p 2" "tiny-qknorm|-t 2 -S|-d 2" "tiny-mla-v8|-p 2|-d 2 -z 1" "tiny-mla|-t 2 -S|-p 2"; do
  IFS='|' read -r model a b <<<"$c"
  # shellcheck disable=SC2086 # the flags split into words
  if run straight "$model" 4 2 $a && run first "$model" 4 2 $a --steps 3 --ckpt "$tmp/ck-$model" &&
    run second "$model" 4 2 $b --steps 6 --ckpt "$tmp/ck-$model" --resume; then
    want=$(losses "$tmp/straight.json" | cut -d, -f4-6)
    if close "$want" "$(losses "$tmp/second.json")" 1e-5; then
      echo "ok: $model $a, resumed with $b: steps 4-6 $(losses "$tmp/second.json")"
    else
      fail "$model $a to $b: $(losses "$tmp/second.json"), straight $want"
    fi
  else
    fail "$model $a to $b: $(head -3 "$tmp/err.txt")"
  fi
done

cuda_refuses "multi-head latent attention (tiny-mla)" 1 -m "$src/models/tiny-mla.json" --steps 1 -B 4
finish
