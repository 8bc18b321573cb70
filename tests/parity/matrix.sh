#!/usr/bin/env bash
# The parity matrix (docs/parity.md): the choices the sweep makes (sim/sweep.c,
# enumerate(): tp, SP, pp with each schedule and the short first and last
# stages, dp with each ZeRO stage and mode, hybrid sharding and offload, cp with
# each algorithm, ep with etp tp or 1 and each exchange, the micro-batch, recomputation, fp8, mxfp8, nvfp4,
# the MTP module, per-layer CUDA graphs) and
# the small models (GQA, dense, MoE with and without shared experts, latent
# attention, a sliding window, per-head q/k norms, attention sinks), in
# combinations of two: every choice alone on tiny (GQA), every pair of choices of different kinds on it (tiny-moe where
# one is expert parallelism, tiny-mtp where one is the MTP module), and every choice on each other model. Each cell
# is planned (parallax plan --json) as each backend of parallax run would run it
# (cpu: on local-cpu, a quantized precision with an fp32 base as run --backend cpu takes it;
# cuda: on dgx-h100, dgx-b200 for the block-scaled precisions, which need Blackwell's fp4 tensor cores)
# and carries the planner's verdict (plan/runnable.h,
# which the executor asks first). tests/cli/parity.sh runs the cells the cpu
# backend runs and checks the ones it refuses.
#   tests/parity/matrix.sh cells PARALLAX [all|singles]   one line a cell, tab-separated:
#       label model ranks flags cpu-verdict cpu-why cuda-verdict cuda-why precision
#       (verdict: runs, refused or invalid: the planner refuses the plan itself)
#   tests/parity/matrix.sh table PARALLAX                 the generated block of docs/parity.md
set -u
cmd=${1:-}
px=${2:-}
which=${3:-all}
[ -n "$px" ] && { [ "$cmd" = cells ] || [ "$cmd" = table ]; } ||
  { echo "usage: tests/parity/matrix.sh cells|table PARALLAX [all|singles]" >&2; exit 2; }
GBS=8

# kind|label|flags; a pair takes one choice of each of two kinds, the later one's flags last (so dp's -d wins
# over ep's own dp 2). The short first and last stages need pp 3, and 3 ranks do not fill local-cpu's nodes
# of 2: that choice has dp 2 too. Experts under TP need SP (Megatron-Core's rule).
choices=(
  "tp|tp2|-t 2"
  "tp|tp2 sp|-t 2 -S"
  "tp|tp2 sp mbs2|-t 2 -S -b 2"
  "pp|pp2 1f1b|-p 2"
  "pp|pp2 gpipe|-p 2 -e gpipe"
  "pp|pp2 zb-h1|-p 2 -e zb-h1"
  "pp|pp2 zb-h2|-p 2 -e zb-h2"
  "pp|pp2 int2|-p 2 -e interleaved -v 2"
  "pp|pp3 f1l1 dp2|-p 3 -d 2 --first-stage-layers 1 --last-stage-layers 1"
  "cp|cp2 ring|--cp 2"
  "cp|cp2 ag|--cp 2 --cp-algo all-gather"
  "cp|cp2 a2a|--cp 2 --cp-algo a2a"
  "ep|ep2|-d 2 --ep 2"
  "ep|ep2 etp1|-t 2 -S --ep 2 --etp 1"
  "ep|ep2 deepep|-d 2 --ep 2 --moe-dispatch deepep"
  "ep|ep2 hybridep|-d 2 --ep 2 --moe-dispatch hybridep"
  "dp|dp2 z0|-d 2 -z 0"
  "dp|dp2 z1|-d 2 -z 1"
  "dp|dp2 z2|-d 2 -z 2"
  "dp|dp2 z3|-d 2 -z 3"
  "dp|dp2 z3k|-d 2 -z 3 --no-reshard-after-forward"
  "dp|dp2 z3f|-d 2 -z 3 --grad-accum full"
  "dp|dp4 z3h2|-d 4 -z 3 --shard-group 2"
  "dp|dp2 z2+oc|-d 2 -z 2 --offload-optimizer cpu"
  "dp|dp2 z3+oc+pc|-d 2 -z 3 --offload-optimizer cpu --offload-params cpu"
  "mbs|mbs2|-b 2"
  "mbs|mbs4|-b 4"
  "rec|sel|-r selective"
  "rec|full|-r full"
  "prec|fp8|-P fp8"
  "prec|mxfp8|-P mxfp8"
  "prec|nvfp4|-P nvfp4"
  "mtp|mtp1|--mtp-layers 1"
  "graph|graphs|--cuda-graph layers"
)
models=(tiny-gpt tiny-moe tiny-moe-shared tiny-mla tiny-window tiny-qknorm tiny-sinks) # beside tiny, the base
moe() { case $1 in tiny-moe*) return 0 ;; esac; return 1; }
# The model of a cell with choices of these kinds: tiny-moe with expert parallelism, tiny-mtp (tiny with an MTP
# module) with the module, none with both (exec_mtp.sh runs a MoE model's module under EP), else tiny.
model_of() {
  local k ep=0 mtp=0
  for k; do
    [ "$k" = ep ] && ep=1
    [ "$k" = mtp ] && mtp=1
  done
  if [ $ep = 1 ] && [ $mtp = 1 ]; then echo ""; elif [ $ep = 1 ]; then echo tiny-moe; elif [ $mtp = 1 ]; then
    echo tiny-mtp; else echo tiny; fi
}

# The ranks a flag list asks for: tp x pp x dp x cp (the last of each flag).
ranks_of() {
  local t=1 p=1 d=1 c=1
  while [ $# -gt 0 ]; do
    case $1 in -t) t=$2 ;; -p) p=$2 ;; -d) d=$2 ;; --cp) c=$2 ;; esac
    shift
  done
  echo $((t * p * d * c))
}

# The precision a flag list names (its last -P), fp32 where none: the cpu column's.
prec_of() {
  local p=fp32
  while [ $# -gt 0 ]; do
    [ "$1" = -P ] && [ $# -gt 1 ] && p=$2
    shift
  done
  echo "$p"
}

# The verdict of BACKEND on MODEL in PRECISION with FLAGS on N ranks: "runs", "refused<TAB>why" or
# "invalid<TAB>why".
verdict() {
  local backend=$1 model=$2 n=$3 prec=$4 out rc
  shift 4
  local extra=()
  if [ "$backend" = cpu ]; then
    extra=(-c local-cpu)
    [ "$prec" != fp32 ] && extra+=(--fp8-base fp32) # a quantized one as run --backend cpu takes it (cli/exec.c)
  elif [ "$prec" = mxfp8 ] || [ "$prec" = nvfp4 ]; then
    extra=(-c dgx-b200)
  else
    extra=(-c dgx-h100)
  fi
  out=$("$px" plan -m "$model" -g "$n" -B "$GBS" "${extra[@]}" "$@" --json 2>"$work/err")
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then # 3: does not fit, still planned
    printf 'invalid\t%s' "$(head -1 "$work/err" | sed 's/^parallax: //')"
    return
  fi
  # the plan's backends.BACKEND object (cJSON's layout: a key a line), read without a jq process a cell
  printf '%s\n' "$out" | awk -v b="\"$backend\":" '
    $1 == "\"backends\":" { on = 1; next }
    on && $1 == b { mine = 1; next }
    mine && $1 == "\"runs\":" { runs = $2 ~ /^true/ }
    mine && $1 == "\"why\":" { sub(/^[^:]*:[ \t]*"/, ""); sub(/"$/, ""); gsub(/\\"/, "\""); why = $0 }
    mine && $1 ~ /^}/ { printf "%s", runs ? "runs\t" : "refused\t" why; exit }'
}

cell() { # label model flags...
  local label=$1 model=$2 n prec
  shift 2
  n=$(ranks_of "$@")
  prec=$(prec_of "$@")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$model" "$n" "$*" "$(verdict cpu "$model" "$n" "$prec" "$@")" \
    "$(verdict cuda "$model" "$n" "$prec" "$@")" "$prec"
}

cells() {
  local i j ki li fi kj lj fj m
  cell "tiny" tiny
  for m in "${models[@]}"; do cell "$m" "$m"; done
  for ((i = 0; i < ${#choices[@]}; i++)); do
    IFS='|' read -r ki li fi <<<"${choices[i]}"
    # shellcheck disable=SC2086 # the flags split into words
    cell "$li" "$(model_of "$ki")" $fi
  done
  [ "$which" = singles ] && return
  for ((i = 0; i < ${#choices[@]}; i++)); do
    IFS='|' read -r ki li fi <<<"${choices[i]}"
    for ((j = i + 1; j < ${#choices[@]}; j++)); do
      IFS='|' read -r kj lj fj <<<"${choices[j]}"
      [ "$ki" = "$kj" ] && continue
      m=$(model_of "$ki" "$kj")
      [ -n "$m" ] || continue
      # shellcheck disable=SC2086
      cell "$li + $lj" "$m" $fi $fj
    done
  done
  for m in "${models[@]}"; do
    for ((i = 0; i < ${#choices[@]}; i++)); do
      IFS='|' read -r ki li fi <<<"${choices[i]}"
      [ "$ki" = ep ] && { moe "$m" && [ "$m" != tiny-moe ] || continue; } # tiny-moe's ep cells are above
      [ "$ki" = mtp ] && continue # the module is tiny-mtp's
      # shellcheck disable=SC2086
      cell "$m: $li" "$m" $fi
    done
  done
}

# One row per reason, in order of first appearance, with the cells (labels, models named) whose column COL
# holds VERDICT (the reason in the column after it).
by_reason() { # file col verdict
  awk -F'\t' -v c="$2" -v v="$3" '$c == v {
      why = $(c + 1); gsub(/\|/, "\\|", why)
      lab = $1; if ($2 != "tiny" && index($1, $2) != 1) lab = $2 ": " $1
      if (!(why in n)) order[++k] = why
      cells[why] = cells[why] (n[why]++ ? ", " : "") lab
    }
    END { for (i = 1; i <= k; i++) printf "| %s | %d: %s |\n", order[i], n[order[i]], cells[order[i]] }' "$1"
}

# The markdown block: counts per backend, each backend's refusals by reason with the cells refused, and
# the cells the planner itself refuses.
table() {
  local f=$1 b col
  printf '<!-- generated: parity BEGIN -->\n\n'
  printf '| backend | cells | not valid plans | runs | refused |\n|---|---|---|---|---|\n'
  for b in cpu cuda; do
    [ "$b" = cpu ] && col=5 || col=7
    awk -F'\t' -v b="$b" -v c="$col" '{ n++; k[$c]++ }
      END { printf "| %s | %d | %d | %d | %d |\n", b, n, k["invalid"], k["runs"], k["refused"] }' "$f"
  done
  for b in cpu cuda; do
    [ "$b" = cpu ] && col=5 || col=7
    printf '\n### Refused by the %s backend\n\n' "$b"
    if awk -F'\t' -v c="$col" '$c == "refused" { found = 1 } END { exit !found }' "$f"; then
      printf '| reason | cells |\n|---|---|\n'
      by_reason "$f" "$col" refused
    else
      printf 'None: it runs every valid cell.\n'
    fi
  done
  printf '\n### Not valid plans\n\nThe planner refuses these for every backend (the cpu column'"'"'s plans on local-cpu):\n\n'
  printf '| reason | cells |\n|---|---|\n'
  by_reason "$f" 5 invalid
  printf '\nand on dgx-h100 (the cuda column) these valid on local-cpu:\n\n| reason | cells |\n|---|---|\n'
  awk -F'\t' '$5 != "invalid"' "$f" >"$work/gpu-only.tsv"
  by_reason "$work/gpu-only.tsv" 7 invalid
  printf '\n<!-- generated: parity END -->\n'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $cmd in
  cells) cells ;;
  table)
    cells >"$work/cells.tsv"
    table "$work/cells.tsv"
    ;;
esac
