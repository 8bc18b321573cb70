#!/usr/bin/env bash
# parallax sweep: table, JSON, CSV, fixed flags, time to train, the table
# pruned by the bound giving --no-prune's, and the MPI split (mpirun -np 2, 3)
# giving the same ranking as one process, and every row what `sim` says of its plan.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

args=(-m llama3-8b -c dgx-h100 -g 16 -B 64)
# the same question narrowed to one micro-batch size and no recomputation (1,373 plans fit, not 10,898):
# for the outputs that simulate every plan (--no-prune, --json, --csv)
narrow=("${args[@]}" -b 1 -r none)
"$px" sweep "${args[@]}" -k 5 -n 15T -u 2.5 >"$tmp/table.txt" || fail "sweep table"
# (the progress of a sweep long enough to report: every plan simulated)
PX_PROGRESS_INTERVAL_S=0.02 "$px" sweep "${narrow[@]}" -k 5 --no-prune >/dev/null 2>"$tmp/progress.txt" ||
  fail "sweep --no-prune with progress"
grep -q "plans enumerated" "$tmp/table.txt" || fail "no counts line"
# the header says which precisions were searched and what MFU is over
grep -q "^  precisions searched: bf16, fp8; MFU over the bf16 dense peak (989 TFLOP/s)" "$tmp/table.txt" ||
  fail "sweep header: $(sed -n 2p "$tmp/table.txt")"
# on a GPU with block-scaled tensor cores it says how to search mxfp8 and nvfp4 (on request only)
"$px" sweep -m tiny -c dgx-b200 -g 8 -B 16 -k 1 >"$tmp/b200.txt" || fail "sweep on dgx-b200"
grep -q "^  precisions searched: bf16, fp8 (mxfp8 and nvfp4, which this GPU runs, when --precision names one);" \
  "$tmp/b200.txt" || fail "sweep header on B200: $(sed -n 2p "$tmp/b200.txt")"
# progress on stderr without a terminal: a line every interval (PX_PROGRESS_INTERVAL_S; 5 s by default)
grep -qE '^parallax sweep: [0-9]+ of [0-9]+ plans checked, [0-9]+ simulated' "$tmp/progress.txt" ||
  fail "no progress lines without a terminal: $(head -3 "$tmp/progress.txt")"
grep -qE ', best so far [0-9.]+ [KM]? ?tokens/s \(tp[0-9]+ ' "$tmp/progress.txt" ||
  fail "the progress lines never name the best so far: $(tail -2 "$tmp/progress.txt")"
[ "$(grep -c '^ *[0-9]  tp' "$tmp/table.txt")" -eq 5 ] || fail "--top 5 did not show 5 rows"
grep -q "GPU-hours" "$tmp/table.txt" || fail "no time to train columns"
# the best plan against itself in the other precision: fp8 is faster on H100s
grep -q "^Precision (best plan, fp8): bf16 -[0-9.]*% tokens/s" "$tmp/table.txt" || fail "no precision line: $(tail -3 "$tmp/table.txt")"

# the table prunes plans its top K rules out by their bound, and says how many: the same table as --no-prune's
grep -q "fit but cannot make the top 5 (bound)" "$tmp/table.txt" || fail "no pruned count: $(grep "plans enumerated" "$tmp/table.txt")"
"$px" sweep "${narrow[@]}" -k 5 -x 1 >"$tmp/t1.txt" || fail "sweep table, one process"
"$px" sweep "${narrow[@]}" -k 5 --no-prune >"$tmp/all.txt" || fail "sweep --no-prune"
grep -q "(bound)" "$tmp/all.txt" && fail "--no-prune pruned"
diff <(sed '/plans enumerated/d' "$tmp/t1.txt") <(sed '/plans enumerated/d' "$tmp/all.txt") ||
  fail "the pruned table differs from --no-prune's"

# The docs' questions, a few dimensions fixed to keep them short (DeepSeek-V3 with the MTP module its recipes
# train, Llama 3 405B at 131K tokens, GPT-3 175B, the demo's Llama 3 70B by cost, Mixtral): the table pruned by
# the bounds, most plans never compiled, is --no-prune's.
qs=("-m deepseek-v3 -c dgx-h100 -g 1024 -B 1024 -t 4 -p 16 -z 1 -P fp8 --mtp-layers 1"
  "-m llama3-405b -c dgx-h100 -g 16384 -s 131072 -B 128 -t 8 -p 16 -z 1 -S -P bf16"
  "-m gpt3-175b -c dgx-a100 -g 1024 -B 1536 -t 8 -p 8 -z 1"
  "-m llama3-70b -c dgx-h100 -g 512 -B 512 -t 8 -p 4 -n 15T -u 2.5 -y cost"
  "-m mixtral-8x7b -c dgx-h100 -g 64 -s 4096 -B 256 -t 2 -z 1 -P bf16")
for q in "${qs[@]}"; do
  # shellcheck disable=SC2086
  { "$px" sweep $q -k 10 >"$tmp/q.txt" && "$px" sweep $q -k 10 --no-prune >"$tmp/qa.txt"; } || fail "sweep $q"
  diff <(sed '/plans enumerated/d' "$tmp/q.txt") <(sed '/plans enumerated/d' "$tmp/qa.txt") >/dev/null || fail "sweep $q: the pruned table differs from --no-prune's"
  grep -q "whether they fit or not (bound before compiling)" "$tmp/q.txt" || fail "sweep $q: nothing pruned before compiling"
done

# --plot (and --report) simulate only the best 50, each heatmap cell's best and the plans that can be on the Pareto
# front, and show the rest at their bound: the heatmap, the front, sweep.json and every simulated row are
# --no-prune's, and every other row's tokens/s bound is at least what --no-prune simulates for it.
"$px" sweep "${narrow[@]}" --plot "$tmp/fp" >"$tmp/fp.txt" 2>&1 || fail "sweep --plot: $(cat "$tmp/fp.txt")"
"$px" sweep "${narrow[@]}" --plot "$tmp/fa" --no-prune >/dev/null 2>&1 || fail "sweep --plot --no-prune"
grep -q "fit, shown by their bound" "$tmp/fp.txt" || fail "sweep --plot bounded nothing: $(sed -n 2p "$tmp/fp.txt")"
cmp -s "$tmp/fp/heatmap.dat" "$tmp/fa/heatmap.dat" || fail "sweep --plot: heatmap.dat differs from --no-prune's"
jq -e --slurpfile a "$tmp/fa/sweep.json" '.plans == $a[0].plans and .zero_choice == $a[0].zero_choice' \
  "$tmp/fp/sweep.json" >/dev/null || fail "sweep --plot: sweep.json's plans differ from --no-prune's"
awk 'FNR == 1 { f++ } /^#/ { next }
  f == 1 { key = $1; for (i = 2; i <= 10; i++) key = key " " $i; row = key; for (i = 11; i <= 14; i++) row = row " " $i
           full[row] = 1; tps[key] = tps[key] " " $11; if ($14 == 1) front[row] = 1; next }
  { key = $1; for (i = 2; i <= 10; i++) key = key " " $i; row = key; for (i = 11; i <= 14; i++) row = row " " $i
    if ($16 == 1) { if (!(row in full)) { print "simulated row not --no-prune'"'"'s: " row; bad = 1 } if ($14 == 1) seen[row] = 1 }
    else { n = split(tps[key], t, " "); ok = 0; for (i = 1; i <= n; i++) ok = ok || t[i] <= $11 * 1.000001
           if (!ok || $14 != 0) { print "bound row below --no-prune'"'"'s or on the front: " row; bad = 1 } } }
  END { for (r in front) if (!(r in seen)) { print "front row missing: " r; bad = 1 } exit bad }' \
  "$tmp/fa/plans.dat" "$tmp/fp/plans.dat" >"$tmp/rows.txt" || fail "sweep --plot: plans.dat: $(head -3 "$tmp/rows.txt")"

"$px" sweep "${narrow[@]}" --json -x 1 >"$tmp/one.json" || fail "sweep --json"
grep -q '"plans":' "$tmp/one.json" || fail "json lacks plans"
grep -q '"tokens_per_s":' "$tmp/one.json" || fail "json lacks contract fields"
jq -e '.precision_choice.best == "fp8" and .precision_choice.other == "bf16" and .precision_choice.tokens_per_s_ratio < 1' \
  "$tmp/one.json" >/dev/null || fail "json lacks the precision choice"
# the assumptions say the fp8 GEMMs' figures: Hopper's own short-k cost (gpu.gemm.fp8_k_half)
jq -e '.assumptions | any(test("^fp8 GEMMs: efficiency 0\\.93 of the fp8 peak with per-tensor scales \\(k_half 859\\)"))' \
  "$tmp/one.json" >/dev/null || fail "json lacks the fp8 assumption: $(jq -c '.assumptions[1]' "$tmp/one.json")"
"$px" sweep "${narrow[@]}" -C "$tmp/all.csv" >/dev/null || fail "sweep --csv"
head -1 "$tmp/all.csv" | grep -q '^rank,tp,pp,dp,zero' || fail "csv header"
# precision is searched where the GPU has fp8 (H100: bf16 and fp8 plans), fixed with --precision
[ "$(awk -F, 'NR > 1 { print $12 }' "$tmp/all.csv" | sort -u | tr '\n' ' ')" = "bf16 fp8 " ] ||
  fail "the H100 sweep did not try bf16 and fp8"
"$px" sweep "${narrow[@]}" -P bf16 -C "$tmp/b16.csv" >/dev/null || fail "sweep --precision bf16"
awk -F, 'NR > 1 && $12 != "bf16"' "$tmp/b16.csv" | grep -q . && fail "--precision bf16 not fixed"
[ "$(grep -c ',true,' "$tmp/all.csv")" -gt 10 ] || fail "csv lacks fitting plans"

# long context: Llama 3 405B at 131,072 tokens on 16,384 H100s (tp 8, pp 16, ZeRO-1, SP fixed to keep it short)
# finds context-parallel plans with both algorithms that tp 8 leaves (a2a needs 8 kv heads / tp to divide by cp),
# and the best is over twice as fast as the best without CP (which fits only by recomputing every layer)
"$px" sweep -m llama3-405b -c dgx-h100 -g 16384 --seq 131072 -B 128 -t 8 -p 16 -z 1 --sp -P bf16 -k 3 -C "$tmp/cp.csv" \
  >"$tmp/cp.txt" || fail "long-context sweep"
grep -q '^ *1  tp8 cp[0-9]' "$tmp/cp.txt" || fail "long-context sweep: the best plan has no cp: $(cat "$tmp/cp.txt")"
for a in ring all-gather; do
  awk -F, -v a="$a" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["cp"] > 1 && $c["cp_algo"] == a && $c["fits"] == "true"' "$tmp/cp.csv" | grep -q . ||
    fail "no fitting --cp-algo $a plan"
done
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } NR == 2 { best = $c["step_time_s"] }
  $c["cp"] == 1 && $c["fits"] == "true" && (nocp == 0 || $c["step_time_s"] < nocp) { nocp = $c["step_time_s"] }
  END { exit !(nocp == 0 || nocp > 2 * best) }' "$tmp/cp.csv" || fail "CP plans are not twice as fast as cp=1 ones"
head -1 "$tmp/cp.csv" | grep -q ',attention,cp,cp_algo,ep,etp,fits,' || fail "csv lacks cp and ep columns"

# mixture of experts: Mixtral 8x7B on 64 H100s (tp 2, ZeRO-1 fixed) tries ep 1, 2, 4 and 8 with plans that fit,
# with etp = tp and etp 1 (whole experts, EP folded over the TP pairs too)
"$px" sweep -m mixtral-8x7b -c dgx-h100 -g 64 --seq 4096 -B 256 -t 2 -z 1 -P bf16 -k 3 -C "$tmp/moe.csv" >/dev/null ||
  fail "MoE sweep"
[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["fits"] == "true" { print $c["ep"] }' "$tmp/moe.csv" | sort -nu | tr '\n' ' ')" = "1 2 4 8 " ] ||
  fail "the MoE sweep did not fit plans with every ep: $(cut -d, -f16-18 "$tmp/moe.csv" | sort | uniq -c)"
[ "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["fits"] == "true" { print $c["etp"] }' "$tmp/moe.csv" | sort -nu | tr '\n' ' ')" = "1 2 " ] ||
  fail "the MoE sweep did not try etp 1 and 2: $(cut -d, -f16-18 "$tmp/moe.csv" | sort | uniq -c)"

# gpt-oss-120b (sliding-window layers, sinks) on 8 H100s finds plans that fit, and says how far the MoE
# validation's H100 bf16 runs (test_validation_moe) trust it
"$px" sweep -m gpt-oss-120b -c dgx-h100 -g 8 -B 16 -z 3 -P bf16 -k 3 >"$tmp/oss.txt" || fail "gpt-oss sweep"
grep -q "^   1 .*GiB" "$tmp/oss.txt" || fail "the gpt-oss sweep found no plan: $(head -3 "$tmp/oss.txt")"
band=$(awk -F'\t' '$1 == "H100" && $2 == "bf16" && $3 == "moe" && $4 == "eager" {
  printf "%+.1f..%+.1f%% (%d run%s)", $6, $7, $5, $5 == 1 ? "" : "s" }' "$PARALLAX_HOME/topologies/validation_bands.tsv")
[ -n "$band" ] || fail "no H100 bf16 MoE band in the table"
grep -qF "Validated (simulated over published throughput, less 1): H100 bf16 MoE, eager: published runs $band" \
  "$tmp/oss.txt" || fail "the gpt-oss sweep's validated line: $(grep -i validated "$tmp/oss.txt")"

# DeepSeek-V3 (latent attention, a dense start, 256 experts) on 1,024 H100s finds plans, the best with experts split
"$px" sweep -m deepseek-v3 -c dgx-h100 -g 1024 -B 1024 -t 1 -p 4 -z 3 -r full -P bf16 -k 3 >"$tmp/ds.txt" ||
  fail "DeepSeek-V3 sweep: $(cat "$tmp/ds.txt")"
grep -q '^ *1  tp1 ep[0-9]' "$tmp/ds.txt" || fail "DeepSeek-V3 sweep: no plan with ep: $(cat "$tmp/ds.txt")"

# fixing a flag fixes that dimension
"$px" sweep "${narrow[@]}" -t 2 -z 1 --json | jq -e '[.plans[].parallel.tp] | length > 0 and all(. == 2)' >/dev/null ||
  fail "--tp 2 not fixed"

# the MPI split gathers the same ranking on rank 0 (with the executor: it has MPI; tests/cli/no_exec.sh otherwise)
if [ "${PX_EXEC:-1}" = 0 ]; then
  :
elif command -v mpirun >/dev/null; then
  mpirun -np 2 "$px" sweep "${narrow[@]}" --json -x 1 >"$tmp/two.json" 2>"$tmp/mpi.err" || fail "mpirun sweep: $(cat "$tmp/mpi.err")"
  diff <(grep -v '"restart_s"' "$tmp/one.json") <(grep -v '"restart_s"' "$tmp/two.json") >/dev/null ||
    fail "mpirun -np 2 ranking differs from one process"
  # the table prunes by the bound in each rank's part: the same table (all but the counts line) whatever N, up to
  # two nodes' worth of ranks here (4, on 2 cores)
  for n in 2 3 4; do
    mpirun -np $n "$px" sweep "${narrow[@]}" -k 5 -x 1 >"$tmp/t$n.txt" 2>"$tmp/mpi.err" ||
      fail "mpirun -np $n sweep: $(cat "$tmp/mpi.err")"
    diff <(sed '/plans enumerated/d' "$tmp/t1.txt") <(sed '/plans enumerated/d' "$tmp/t$n.txt") >/dev/null ||
      fail "mpirun -np $n table differs from one process"
  done
  # ... and a MoE question split in 4, its parts by the plans' bound keys
  # shellcheck disable=SC2086
  mpirun -np 4 "$px" sweep ${qs[0]} -k 10 -x 1 >"$tmp/ds4.txt" 2>"$tmp/mpi.err" || fail "mpirun -np 4 sweep: $(cat "$tmp/mpi.err")"
  # shellcheck disable=SC2086
  "$px" sweep ${qs[0]} -k 10 >"$tmp/ds1.txt" || fail "sweep ${qs[0]}"
  diff <(sed '/plans enumerated/d' "$tmp/ds1.txt") <(sed '/plans enumerated/d' "$tmp/ds4.txt") >/dev/null || fail "mpirun -np 4 MoE table differs from one process"
  # ... and the plots split in 2: the same heatmap and sweep.json as --no-prune's
  mpirun -np 2 "$px" sweep "${narrow[@]}" --plot "$tmp/fp2" -x 1 >/dev/null 2>"$tmp/mpi.err" ||
    fail "mpirun -np 2 sweep --plot: $(cat "$tmp/mpi.err")"
  cmp -s "$tmp/fp2/heatmap.dat" "$tmp/fa/heatmap.dat" || fail "mpirun -np 2 sweep --plot: heatmap.dat differs"
  jq -e --slurpfile a "$tmp/fa/sweep.json" '.plans == $a[0].plans' "$tmp/fp2/sweep.json" >/dev/null ||
    fail "mpirun -np 2 sweep --plot: sweep.json's plans differ"
else
  fail "mpirun not installed"
fi

# Why the best plan's ZeRO stage: GPT-3 175B with no model parallelism fits only with ZeRO-3
out=$("$px" sweep -m gpt3-175b -c dgx-a100 -g 384 -B 1536 -t 1 -p 1) || fail "sweep GPT-3 tp1 pp1"
printf '%s\n' "$out" | grep -q "^ZeRO (best plan's split, z3): .*z1 does not fit" || fail "no ZeRO explanation: $out"
"$px" sweep -m gpt3-175b -c dgx-a100 -g 384 -B 1536 -t 1 -p 1 --json |
  jq -e '.zero_choice.best == "z3" and ([.zero_choice.alternatives[] | select(.zero == "z1")][0].fits == false)' \
  >/dev/null || fail "sweep --json: no zero_choice saying ZeRO-1 does not fit"

# Every row carries what `sim` says of its plan, past the rows printed too, and the flags that give it again.
"$px" sweep -m llama3-70b -c dgx-h100 -g 64 -B 128 -t 8 -S -k 2 --json >"$tmp/rows.json" || fail "sweep 70B --json"
row=$(jq -c '.plans[5]' "$tmp/rows.json")
flags=$(printf '%s' "$row" | jq -r '.flags // empty')
[ -n "$flags" ] || fail "sweep --json: row 6 has no flags"
# shellcheck disable=SC2086
sim=$("$px" sim -m llama3-70b -c dgx-h100 -g 64 $flags --json) || fail "sim of sweep row 6: $flags"
# every figure of the row (but its rank, flags and time to train) is the same figure in `sim --json`
bad=$(jq -nr --argjson row "$row" --argjson sim "$sim" '$row | del(.rank, .flags, .parallel, .time_to_train) | paths(scalars) |
  select(. as $p | ($row | getpath($p)) != ($sim | getpath($p))) | map(tostring) | join(".")') || bad="(jq failed)"
[ -z "$bad" ] || fail "sweep row 6 differs from sim on: $bad ($flags)"
# ... and the plan of each row's flags is the row's plan, field by field, for the first 8
for i in $(seq 0 7); do
  flags=$(jq -r ".plans[$i].flags" "$tmp/rows.json")
  # shellcheck disable=SC2086
  "$px" plan -m llama3-70b -c dgx-h100 -g 64 $flags -o "$tmp/row.json" >/dev/null || fail "plan of row $((i + 1))'s flags: $flags"
  jq -e --slurpfile f "$tmp/row.json" ".plans[$i].parallel == \$f[0].parallel" "$tmp/rows.json" >/dev/null ||
    fail "row $((i + 1))'s flags give another plan: $flags: $(jq -c ".plans[$i].parallel" "$tmp/rows.json") vs $(jq -c .parallel "$tmp/row.json")"
done
[ "$(printf '%s' "$row" | jq '[paths(scalars)] | length')" -ge 20 ] || fail "sweep row 6 has too few figures: $row"

# -o FILE writes the best plan as a plan file (--rank K the K-th) that sim -f and export -f read; the table's
# labels have a legend under the table and in --help; --csv carries each plan's flags
small=(-m llama3-8b -c dgx-h100 -g 8 -B 32 -k 3)
"$px" sweep "${small[@]}" -o "$tmp/best.json" >"$tmp/o.txt" || fail "sweep -o"
[ -s "$tmp/best.json" ] || fail "sweep -o wrote no plan file"
grep -q "^plan file: $tmp/best.json (rank 1, " "$tmp/o.txt" || fail "sweep -o does not say what it wrote: $(tail -2 "$tmp/o.txt")"
for k in 1 3; do
  [ "$k" = 1 ] || "$px" sweep "${small[@]}" -o "$tmp/best.json" --rank "$k" >/dev/null || fail "sweep -o --rank $k"
  want=$(awk -v k="$k" '$1 == k && $2 ~ /^tp/ && match($0, /[0-9.]+ (s|ms) /) { print substr($0, RSTART, RLENGTH - 1) }' "$tmp/o.txt") # its step
  got=$("$px" sim -f "$tmp/best.json" | awk '/step time/ { print $3, $4 }')
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "sim -f of sweep -o --rank $k: step $got, the table's rank $k: $want"
done
"$px" sweep "${small[@]}" -t 2 -z 1 --runnable-by megatron -o "$tmp/m.json" >/dev/null || fail "sweep --runnable-by -o"
"$px" export -f "$tmp/m.json" --to megatron | grep -q -- "--tensor-model-parallel-size 2" || fail "export -f of sweep -o"
err=$("$px" sweep "${small[@]}" -t 2 -z 1 -o "$tmp/x.json" --rank 1000000 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q "none ranked 1000000" && [ ! -e "$tmp/x.json" ] || fail "sweep --rank past the plans: $rc $err"
err=$("$px" sweep "${small[@]}" --rank 2 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$err" | grep -q -- "--rank K needs -o FILE" || fail "--rank without -o: $rc $err"
grep -q "^plan labels: tpN" "$tmp/o.txt" || fail "no legend under the sweep table"
"$px" sweep --help | grep -q "^plan labels: tpN" || fail "no legend in sweep --help"
"$px" sweep "${small[@]}" -t 2 -z 1 -C "$tmp/f.csv" >/dev/null || fail "sweep --csv (flags)"
head -1 "$tmp/f.csv" | grep -q ',flags$' || fail "csv has no flags column: $(head -1 "$tmp/f.csv")"
sed -n 2p "$tmp/f.csv" | grep -q ',"--tp 2 --pp 1 --zero 1 ' || fail "csv row has no flags: $(sed -n 2p "$tmp/f.csv")"

# --vary prunes as a plain sweep does (each value's best is --no-prune's) and says which value it is at
vary=(-m llama3-8b -c dgx-h100 -g 8 -B 32 -z 3 --vary gpu.hbm_gib=40,80 --json)
PX_PROGRESS_INTERVAL_S=0.001 "$px" sweep "${vary[@]}" >"$tmp/vp.json" 2>"$tmp/vp.err" || fail "sweep --vary: $(cat "$tmp/vp.err")"
"$px" sweep "${vary[@]}" --no-prune >"$tmp/vn.json" 2>/dev/null || fail "sweep --vary --no-prune"
jq -e '.points | all(.sweep.counts.simulated < .sweep.counts.fit)' "$tmp/vp.json" >/dev/null ||
  fail "sweep --vary did not prune: $(jq -c '[.points[].sweep.counts]' "$tmp/vp.json")"
[ "$(jq -c '[.points[].sweep.plans[0].flags]' "$tmp/vp.json")" = "$(jq -c '[.points[].sweep.plans[0].flags]' "$tmp/vn.json")" ] ||
  fail "sweep --vary's best plans differ from --no-prune's"
grep -q "^parallax sweep: --vary gpu.hbm_gib=80, value 2 of 2: " "$tmp/vp.err" || fail "--vary progress: $(tail -2 "$tmp/vp.err")"

# Nothing fits: what the sweep tried, the least peak it saw against the usable HBM, exit 3; -o writes nothing
out=$("$px" sweep -m llama3-70b -c dgx-h100 -g 8 -B 64 -z 1 -r none -P bf16 -o "$tmp/none.json"); rc=$?
[ "$rc" -eq 3 ] || fail "sweep with no plan that fits: exit $rc, not 3"
printf '%s\n' "$out" | grep -q "no plan fits. Tried 200 valid plans: tp 1,2,4; pp 1,2,4; ZeRO 1; recompute none; mbs 1,2,4,8" ||
  fail "sweep, nothing fits: what it tried: $out"
printf '%s\n' "$out" | grep -qE "Bound by GPU memory: the least peak, 207.74 GiB \(tp4 pp1 dp2 z1 sp mbs1 - none\), needs 211.00 GiB .* of the 77.51 GiB usable: 133.49 GiB over" ||
  fail "sweep, nothing fits: the bound: $out"
printf '%s\n' "$out" | grep -q "Fixed by the flags (the sweep searched the rest): --zero 1 --recompute none --precision bf16" ||
  fail "sweep, nothing fits: the fixed flags: $out"
[ ! -e "$tmp/none.json" ] || fail "sweep -o wrote a plan file though nothing fits"
"$px" sweep -m llama3-70b -c dgx-h100 -g 8 -B 64 -z 1 -r none -P bf16 --json |
  jq -e '.no_fit.least_peak_bytes == 223057207296 and .no_fit.least_need_bytes > .no_fit.usable_bytes' >/dev/null ||
  fail "sweep --json, nothing fits: no no_fit"

err=$("$px" sweep -m llama3-8b -c dgx-h100 -g 16 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q -- "--gbs is required" || fail "missing --gbs: $rc $err"
err=$("$px" sweep "${args[@]}" -y fastest 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && printf '%s' "$err" | grep -q "throughput|time|cost|memory" || fail "bad objective: $rc $err"
err=$("$px" sweep "${args[@]}" -n -5 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] || fail "negative tokens: $rc $err"

finish
