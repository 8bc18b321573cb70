#!/usr/bin/env bash
# The sweep report: its fixed choices are the command line's; and in a real
# browser (headless Chromium loads the index.html rendered from
# tests/data/sample_sweep) every embedded plot must decode.
set -u
px=$1
bin=$(dirname "$px")/tests/test_report
source "$(dirname "$0")/../tools/clitest.sh"

# A sweep's question and report list as fixed only what the command line fixed
# (not every default of a resolved plan: --tp 1 --pp 1 --dp 512 --zero 0 ...).
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 -t 2 -r full --report "$tmp/fixed" >/dev/null 2>"$tmp/fixed.err" ||
  fail "sweep --report: $(cat "$tmp/fixed.err")"
fixed=$(jq -c .question.fixed "$tmp/fixed/sweep.json")
[ "$fixed" = '{"tp":2,"recompute":"full"}' ] || fail "question.fixed is $fixed, want {\"tp\":2,\"recompute\":\"full\"}"
row=$(grep -o '<th>Fixed choices</th><td>.*</td></tr>' "$tmp/fixed/index.html" | head -n 1)
[ "$row" = '<th>Fixed choices</th><td><code>--tp 2</code> <code>--recompute full</code></td></tr>' ] ||
  fail "Fixed choices row: $row"
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --report "$tmp/free" >/dev/null 2>&1 || fail "sweep --report, nothing fixed"
grep -q '<th>Fixed choices</th><td>none: every dimension swept</td>' "$tmp/free/index.html" ||
  fail "nothing fixed: $(grep -o '<th>Fixed choices</th>.\{0,80\}' "$tmp/free/index.html")"
# How far to trust it: each plan of sweep.json carries its validated band, and the report's best plan says it
text=$(jq -r '.plans[0].validation.text' "$tmp/free/sweep.json")
jq -e '[.plans[] | .validation.family == "H100" and (.validation.text | length) > 0] | all' "$tmp/free/sweep.json" \
  >/dev/null || fail "sweep.json plans without their validation: $(jq -c '.plans[0].validation' "$tmp/free/sweep.json")"
grep -qF "<b>How far to trust it:</b> $text" "$tmp/free/index.html" ||
  fail "the report's best plan does not say how far to trust it ($text)"
grep -q '<th>Not planned</th>' "$tmp/free/index.html" && fail "tiny: a module not planned"
# what of the model no plan has (an MTP module) is in the question and the report
jq '.mtp_layers = 1 | .name = "tiny-mla-mtp"' "$2/models/tiny-mla.json" >"$tmp/mtp.json"
"$px" sweep -m "$tmp/mtp.json" -c dgx-h100 -g 8 -B 16 --top 2 --report "$tmp/mtp" >/dev/null 2>&1 || fail "sweep --report, MTP"
jq -e '.question.not_planned.mtp_modules == 1' "$tmp/mtp/sweep.json" >/dev/null &&
  grep -q "<th>Not planned</th><td>tiny-mla-mtp&#39;s 1 MTP module, which Megatron-Bridge trains on the last stage" "$tmp/mtp/index.html" ||
  fail "the MTP module not said: $(jq -c .question.not_planned "$tmp/mtp/sweep.json")"
# the plans that fit are counted, not the 50 sweep.json keeps; the best plan's step is broken down
fit=$(jq .counts.fit "$tmp/free/sweep.json")
grouped=$(sed -E ':a;s/^([0-9]+)([0-9]{3})/\1,\2/;ta' <<<"$fit")
[ "$fit" -gt 50 ] && grep -q "The 20 best of $grouped plans that fit" "$tmp/free/index.html" ||
  fail "the report's plan count: $(grep -o 'The [0-9]* best of [0-9,]* plans that fit' "$tmp/free/index.html") (counts.fit $fit)"
grep -q '<section id="breakdown">' "$tmp/free/index.html" && jq -e '.plans[0].breakdown.backward_s > 0' "$tmp/free/sweep.json" >/dev/null ||
  fail "the report does not break the best plan's step down"
# A hardware what-if: one best plan per value, in the table, the JSON and the plot's data;
# more HBM never makes the best plan slower.
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --vary gpu.hbm_gib=1.85,80 --json >"$tmp/vary.json" 2>"$tmp/vary.err" ||
  fail "sweep --vary: $(cat "$tmp/vary.err")"
jq -e '.field == "gpu.hbm_gib" and (.points | length) == 2 and .points[0].value == "1.85" and
       (.points[1].sweep.plans[0].tokens_per_s >= (.points[0].sweep.plans[0].tokens_per_s // 0))' "$tmp/vary.json" \
  >/dev/null || fail "sweep --vary --json: $(head -c 400 "$tmp/vary.json")"
"$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 --vary inter_node.nic_gbit_per_s=100,400 --plot "$tmp/vary" \
  >"$tmp/vary.txt" 2>&1 || fail "sweep --vary --plot: $(cat "$tmp/vary.txt")"
[ "$(grep -c '^[0-9]' "$tmp/vary/vary.dat")" -eq 2 ] && [ -s "$tmp/vary/vary.png" ] && [ -s "$tmp/vary/vary.svg" ] ||
  fail "sweep --vary --plot: $(cat "$tmp/vary.txt"; ls "$tmp/vary")"
grep -q "^inter_node.nic_gbit_per_s" "$tmp/vary.txt" || fail "sweep --vary table: $(cat "$tmp/vary.txt")"
[ "$fails" -eq 0 ] || exit 1

browser=
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "FAIL: chromium is not installed; this test needs it (Debian: apt-get install chromium, or scripts/install-deps.sh)"
  exit 1
fi
if [ ! -x "$bin" ]; then
  echo "FAIL: $bin is not built (it renders the report this test loads)"
  exit 1
fi

# The report of the sample sweep: plots with gnuplot, then index.html.
if ! "$bin" --keep "$tmp/sweep" >"$tmp/keep.out" 2>&1; then
  echo "FAIL: rendering the sample report: $(cat "$tmp/keep.out")"
  exit 1
fi

# Load it, let the page's load handler run, and read the DOM back. As root
# Chromium needs --no-sandbox; its own profile keeps runs apart.
timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --no-first-run --no-default-browser-check \
  --user-data-dir="$tmp/profile" --virtual-time-budget=5000 --dump-dom "file://$tmp/sweep/index.html" \
  >"$tmp/dom.html" 2>"$tmp/chromium.err"
rc=$?
body=$(grep -o '<body[^>]*>' "$tmp/dom.html" | head -n 1)
ok=$(printf '%s' "$body" | sed -n 's/.*data-images-ok="\([0-9]*\)".*/\1/p')
total=$(printf '%s' "$body" | sed -n 's/.*data-images-total="\([0-9]*\)".*/\1/p')
if [ "$rc" -ne 0 ] || [ -z "$ok" ] || [ -z "$total" ]; then
  echo "FAIL: $browser exit $rc; no data-images-ok/total on <body> (got: '$body')"
  tail -n 5 "$tmp/chromium.err"
  exit 1
fi
if [ "$total" -le 0 ] || [ "$ok" -ne "$total" ]; then
  echo "FAIL: $ok of $total embedded images decoded in $browser"
  exit 1
fi
echo "ok: $ok of $total embedded images decoded in $browser"
