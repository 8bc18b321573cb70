#!/usr/bin/env bash
# Golden figures: every plan in tests/golden/golden_sim.tsv is simulated
# (`sim --json`: step time, throughput, bubble, communication, peak memory)
# and compiled (`plan --json`: FLOPs and bytes on the wire of every stage),
# MFU against the peak of the plan's precision (mfu_precision: the recorded
# figure; `mfu` is against the bf16 peak whatever the precision, its ratio),
# and its figures compared with the ones recorded there (relative 1e-9). A change that moves a figure fails here until the file is
# regenerated on purpose and the diff reviewed in the commit:
#   make golden            (= bash tests/golden/golden.sh build/parallax . --update)
set -u
px=$1
src=$2
update=${3:-}
source "$(dirname "$0")/../tools/clitest.sh"
file=$src/tests/golden/golden_sim.tsv
fields='step_time_s tokens_per_s mfu_precision bubble_fraction comm.tp_s comm.pp_s comm.dp_s comm.exposed_s memory.peak_bytes_max fits |'
fields+=' flops_per_step hw_flops_per_step'
for s in $(seq 0 63); do fields+=" s$s.model_flops s$s.hw_flops s$s.wire.tp s$s.wire.dp s$s.wire.pp s$s.wire.emb"; done
jqexpr='[.step_time_s, .tokens_per_s, .mfu_precision, .bubble_fraction, .comm.tp_s, .comm.pp_s, .comm.dp_s, .comm.exposed_s,
         .memory.peak_bytes_max, .fits] | map(tostring) | join(" ")'
jqplan='[.flops_per_step, .hw_flops_per_step, (.stages[] | .model_flops, .hw_flops, .wire_bytes.tp, .wire_bytes.dp,
         .wire_bytes.pp, .wire_bytes.emb)] | map(tostring) | join(" ")'

out=$tmp/golden.tsv
n=0
while IFS= read -r line; do
  case "$line" in '#'* | '') echo "$line" >>"$out"; continue ;; esac
  flags=${line%%	*}
  want=${line#*	}
  want=${want/	/ | }
  # shellcheck disable=SC2086
  got=$("$px" sim $flags --json | jq -r "$jqexpr") || { fail "sim $flags"; continue; }
  # shellcheck disable=SC2086
  gotp=$("$px" plan $flags --json | jq -r "$jqplan") || { fail "plan $flags"; continue; }
  printf '%s\t%s\t%s\n' "$flags" "$got" "$gotp" >>"$out"
  got="$got | $gotp"
  n=$((n + 1))
  [ -n "$update" ] && continue
  awk -v a="$want" -v b="$got" -v f="$fields" 'BEGIN { n = split(a, x, " "); m = split(b, y, " "); split(f, name, " ");
      if (n != m) { print "  " n " figures recorded, " m " now"; exit 1 }
      bad = 0
      for (i = 1; i <= n; i++) {
        if (x[i] == y[i]) continue
        if (x[i] == "|" || y[i] == "|") { print "  columns differ at figure " i; bad = 1; continue }
        d = x[i] - y[i]; if (d < 0) d = -d; s = x[i] < 0 ? -x[i] : x[i]
        if (x[i] ~ /^(true|false)$/ || d > 1e-9 * s) { print "  " name[i] ": recorded " x[i] ", now " y[i]; bad = 1 }
      }
      exit bad }' || fail "golden figures moved: $flags"
done <"$file"

[ "$n" -ge 20 ] || fail "only $n golden plans (want 20 or more)"
if [ -n "$update" ]; then
  cp "$out" "$file.tmp" && mv "$file.tmp" "$file" && echo "golden: $n plans written to $file"
fi
finish
