#!/usr/bin/env bash
# Power and energy from the CLI (sim/power.h): sim prints a GPU's, a node's, the job's and the site's
# average power and a step's energy, and its JSON holds them as the cluster's figures make them; --set
# gpu.power_w and power.pue are what-ifs of the energy, not of the step; sweep --tokens gives the energy to
# train and its cost at --price-per-kwh (the HTML report too), --objective energy ranks by it (by a token's
# energy without --tokens); a cluster without power figures says so, and bad flags exit 2 naming the flag.
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"

plan=(-m llama3-8b -c dgx-h100 -g 16 -t 2 -z 1 -B 32)
out=$("$px" sim "${plan[@]}") || fail "sim"
grep -Eq '^  power +[0-9]+ W per GPU \(computing [0-9]+% of the step at 700 W, else 70 W\), .* per node, .* the job, .* at the site \(PUE 1\.56\)$' <<<"$out" ||
  fail "sim prints no power line: $(grep power <<<"$out")"
grep -Eq '^  energy +[0-9.]+ [kM]?Wh a step at the site, [0-9.]+ J a token$' <<<"$out" || fail "sim prints no energy line"

# the JSON's figures are the DGX H100's cited ones (700 W computing, 70 W waiting, 10.2 kW - 8 x 700 W = 4.6 kW a
# node besides its GPUs, PUE 1.56) at the step's compute share: 2 nodes of 8
j=$("$px" sim "${plan[@]}" --json) || fail "sim --json"
jq -e '.compute_share > 0.5 and .compute_share < 1 and
  (.power.gpu_w - (.compute_share * 700 + (1 - .compute_share) * 70) | fabs) < 1e-9 and
  (.power.it_w - (16 * .power.gpu_w + 2 * 4600) | fabs) < 1e-6 and (.power.node_w - .power.it_w / 2 | fabs) < 1e-6 and
  (.power.facility_w - 1.56 * .power.it_w | fabs) < 1e-6 and
  (.power.step_j - .power.facility_w * .step_time_s | fabs) < 1e-6 and
  (.power.j_per_token - .power.step_j / (32 * 8192) | fabs) < 1e-12' <<<"$j" >/dev/null ||
  fail "sim --json power: $(jq -c '[.compute_share, .power]' <<<"$j")"

# what-ifs: a 500 W GPU and a PUE of 1.1 change the energy, not the step (no power cap is modelled)
w=$("$px" sim "${plan[@]}" --set gpu.power_w=500 --set power.pue=1.1 --json) || fail "sim --set gpu.power_w"
jq -e --argjson a "$j" '.step_time_s == $a.step_time_s and .compute_share == $a.compute_share and
  (.power.gpu_w - (.compute_share * 500 + (1 - .compute_share) * 70) | fabs) < 1e-9 and
  (.power.facility_w - 1.1 * .power.it_w | fabs) < 1e-6' <<<"$w" >/dev/null ||
  fail "--set gpu.power_w=500 power.pue=1.1: $(jq -c '[.step_time_s, .power]' <<<"$w")"
err=$("$px" sim "${plan[@]}" --set power.pue=0.5 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q "power.pue" <<<"$err" || fail "--set power.pue=0.5: $rc $err"
err=$("$px" sim "${plan[@]}" --set gpu.idle_power_w=900 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q "gpu.idle_power_w" <<<"$err" || fail "--set gpu.idle_power_w above gpu.power_w: $rc $err"

# a cluster without power figures says so, and gives none
out=$("$px" sim -m tiny -c local-cpu -g 2 -B 4) || fail "sim on local-cpu"
grep -q "power            not known: the cluster file gives no gpu.power_w" <<<"$out" || fail "local-cpu: no 'not known' line"

# sweep: the energy to train 100B tokens and its cost at $0.10 a kWh, ranked by energy
small=(-m llama3-8b -c dgx-h100 -g 8 -B 16 -p 1 --top 5)
s=$("$px" sweep "${small[@]}" --tokens 100B --price 2 --price-per-kwh 0.1 --objective energy --json 2>/dev/null) ||
  fail "sweep --objective energy --json"
jq -e '.question.objective == "energy" and .question.price_usd_per_kwh == 0.1 and (.plans | length) > 10 and
  ([.plans[].time_to_train.energy_mwh] | . == sort) and
  all(.plans[]; (.time_to_train.energy_mwh - .power.facility_w * .time_to_train.days * 86400 / 3.6e9 | fabs) < 1e-9 and
      (.time_to_train.energy_cost_usd - .time_to_train.energy_mwh * 1000 * 0.1 | fabs) < 1e-6)' <<<"$s" >/dev/null ||
  fail "sweep --objective energy: $(jq -c '[.plans[0:3][] | .time_to_train]' <<<"$s")"
jq -e '.assumptions | any(test("^Power: a GPU draws 700 W while it computes and 70 W while it waits"))' <<<"$s" >/dev/null ||
  fail "sweep --json: no power assumption"
out=$("$px" sweep "${small[@]}" --tokens 100B --price 2 --price-per-kwh 0.1 --objective energy 2>/dev/null) ||
  fail "sweep --objective energy"
grep -Eq '^rank .* cost +energy +energy \$$' <<<"$out" || fail "sweep: no energy columns: $(grep '^rank' <<<"$out")"
grep -Eq '^   1 .* [0-9.]+ MWh +[0-9.]+$' <<<"$out" || fail "sweep: rank 1 has no energy: $(grep '^   1 ' <<<"$out")"
grep -Eq '^power \(best plan\): .* at the site \(.* IT, PUE 1\.56; [0-9]+ W a GPU, .* a node\), .* a step; 100\.00 B tokens: [0-9.]+ MWh, \$[0-9.]+ at \$0\.1 a kWh$' \
  <<<"$out" || fail "sweep: no power line: $(grep '^power' <<<"$out")"
# the HTML report: the best plan's energy and its cost, an energy column
"$px" sweep "${small[@]}" --tokens 100B --price-per-kwh 0.1 --report "$tmp/rep" >/dev/null 2>&1 || fail "sweep --report"
grep -Eq ', [0-9.]+ MWh at the site \(\$[0-9,]+\)' "$tmp/rep/index.html" || fail "report: no energy for the best plan"
grep -q '<th class="num">energy (MWh)</th>' "$tmp/rep/index.html" || fail "report: no energy column"
# without --tokens: ranked by a token's energy, shown
out=$("$px" sweep "${small[@]}" --objective energy 2>/dev/null) || fail "sweep --objective energy without --tokens"
grep -Eq '^rank .* J/token$' <<<"$out" || fail "sweep --objective energy: no J/token column"
awk '$1 ~ /^[0-9]+$/ { if (prev != "" && $NF + 0 < prev + 0) bad = 1; prev = $NF } END { exit bad }' <<<"$out" ||
  fail "sweep --objective energy: not ranked by J/token"
# --vary gpu.power_w: a what-if of the energy to train
out=$("$px" sweep "${small[@]}" --tokens 100B --vary gpu.power_w=500,700 2>/dev/null) || fail "sweep --vary gpu.power_w"
[ "$(awk '$1 == 500 || $1 == 700 { print $(NF - 1) }' <<<"$out" | sort -g | uniq | wc -l)" -eq 2 ] ||
  fail "--vary gpu.power_w: the energy does not change: $out"

# refusals: exit 2, the flag named
for bad in "--price-per-kwh 0" "--price-per-kwh -1" "--price-per-kwh abc"; do
  err=$("$px" sweep "${small[@]}" --tokens 100B $bad 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "--price-per-kwh" <<<"$err" || fail "$bad: $rc $err"
done
err=$("$px" sweep "${small[@]}" --price-per-kwh 0.1 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--price-per-kwh needs --tokens" <<<"$err" || fail "--price-per-kwh without --tokens: $rc $err"
err=$("$px" sweep -m tiny -c local-cpu -g 2 -B 4 --objective energy 2>&1 >/dev/null); rc=$?
[ "$rc" -eq 2 ] && grep -q "local-cpu gives no gpu.power_w" <<<"$err" || fail "--objective energy on local-cpu: $rc $err"
"$px" sweep -m tiny -c local-cpu -g 2 -B 4 --objective energy --set gpu.power_w=65 >/dev/null 2>&1 ||
  fail "--objective energy with --set gpu.power_w on local-cpu"

finish
