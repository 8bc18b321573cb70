#!/usr/bin/env bash
# The docs' generated parts (docs/testing.md, "Generated documentation") are
# what the code writes now: the command table, the flag reference, the preset
# and validation tables and the quick start, regenerated (scripts/docs.sh) and
# compared with README.md and docs/*.md; a difference fails with the diff and
# "run `make docs`"; every relative link names a file and a heading there.
# Then the check itself, on a copy of the docs: a changed generated line
# fails, a changed hand-written line passes, a block without its END marker,
# a marker without a block, a changed validated band (topologies/
# validation_bands.tsv, the data file the binary reads) and a broken link fail;
# the bands hold every validation suite's runs (dense, Blackwell and MoE), and
# the quick start prints the band generated beside it, not a stale installed one.
# PX_TEST_DIR names the build's tests/ (the validation suites and
# px_bands_table; tests/CMakeLists.txt), else it is
# looked for in the build directory of PARALLAX.
set -u
px=$1
src=${2:-.}
tests=${PX_TEST_DIR:-$(dirname "$px")/tests}
export PARALLAX_HOME=${PARALLAX_HOME:-$src}
docs="$src/scripts/docs.sh"
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# (the suites' and the parity matrix's outputs kept for the second generate below: PX_DOCS_CACHE)
PX_DOCS_CACHE=$tmp/cache bash "$docs" generate "$px" "$tests" >"$tmp/gen.md" || { echo "FAIL: scripts/docs.sh generate"; exit 1; }
for name in commands flags models topologies validation-sc21 validation-headline validation-bands quickstart-sim \
  validation-blackwell-fp8 validation-blackwell-blockscaled \
  quickstart-power-sim quickstart-power-sweep \
  file:topologies/validation_bands.tsv; do
  grep -q "^<!-- generated: $name BEGIN -->" "$tmp/gen.md" || fail "no generated block $name"
done
# every suite's runs in the one table: the dense runs' (test_validation_runs), Blackwell's and the MoE suite's
for band in "H100	fp8	dense	eager" "GB200	fp8	dense	eager" "H100	fp8	moe	eager" "H100	bf16	moe	eager" \
  "GB200	mxfp8	moe	eager" "GB200	mxfp8	moe	graph"; do
  grep -q "^$band	" "$tmp/gen.md" || fail "no $band band in the generated table"
done
bash "$docs" check "$tmp/gen.md" "$src" || fail "the docs differ from what the code writes: run \`make docs\`"
# one `make docs` writes the table and the quick start's validated line alike: generated where the installed
# table is stale (PARALLAX_HOME's H100 bf16 band changed), the quick start says the band generated beside it
mkdir -p "$tmp/stale/topologies"
abs=$(cd "$src" && pwd)
for f in "$abs"/*; do [ "$f" = "$abs/topologies" ] || ln -s "$f" "$tmp/stale/"; done
for f in "$abs"/topologies/*.json; do ln -s "$f" "$tmp/stale/topologies/"; done
sed 's/^\(H100\tbf16\tdense\teager\t[0-9]*\t\)[-0-9.]*/\1-1.0/' "$src/topologies/validation_bands.tsv" \
  >"$tmp/stale/topologies/validation_bands.tsv"
PX_DOCS_CACHE=$tmp/cache PARALLAX_HOME=$tmp/stale bash "$docs" generate "$px" "$tests" >"$tmp/gen_stale.md" ||
  fail "scripts/docs.sh generate, a stale table installed"
want=$(grep "^  validated        H100 bf16 dense" "$tmp/gen.md")
got=$(grep "^  validated        H100 bf16 dense" "$tmp/gen_stale.md")
[ -n "$want" ] && [ "$got" = "$want" ] || fail "the quick start's band from the installed table: '$got', not '$want'"

# the flag reference holds every flag of every command's --help
for cmd in plan sim sweep calibrate topology; do
  while read -r flag; do
    grep -q -- "\`$flag\`" "$tmp/gen.md" || fail "$cmd --help lists $flag, the flag reference does not"
  done < <("$px" "$cmd" --help | grep -o -- '--[a-z0-9-]*' | sort -u)
done

# the check, on a copy: (name, edit, expected status)
copy() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree/docs" "$tmp/tree/topologies"
  cp "$src/README.md" "$tmp/tree/"
  cp "$src"/docs/*.md "$tmp/tree/docs/"
  cp "$src/topologies/validation_bands.tsv" "$tmp/tree/topologies/"
  local f # the GPU checks' notes, which the README links to
  for f in "$src"/bench/gpu/*/README.md; do
    [ -f "$f" ] && mkdir -p "$tmp/tree/$(dirname "${f#"$src"/}")" && cp "$f" "$tmp/tree/${f#"$src"/}"
  done
}
expect() { # label, expected status (0 passes, 1 fails), what the message says then
  bash "$docs" check "$tmp/gen.md" "$tmp/tree" >"$tmp/out" 2>&1
  local got=$? says=${3:-run \`make docs\`}
  [ "$got" -eq "$2" ] || { fail "$1: check exited $got, not $2"; cat "$tmp/out"; }
  if [ "$2" -ne 0 ] && ! grep -qF "$says" "$tmp/out"; then fail "$1: no '$says' in the message"; fi
}
copy
sed -i 's/^| `-t`, `--tp` | `N` | tensor-parallel size |$/| `-t`, `--tp` | `N` | tensor-parallel size, stale |/' "$tmp/tree/docs/flags.md"
grep -q 'tensor-parallel size, stale' "$tmp/tree/docs/flags.md" || fail "the flag reference has no --tp row to change"
expect "a changed flag row" 1
copy
sed -i 's/^Every figure the simulator prints is a model/Every figure that the simulator prints is a model/' "$tmp/tree/README.md"
expect "a changed hand-written line" 0
copy
sed -i 's/^  step time .*/  step time        9.99 s/' "$tmp/tree/README.md"
expect "a changed simulated figure in the quick start" 1
copy
sed -i 's/^\(H100\tbf16\tdense\teager\t[0-9]*\t\)[-0-9.]*/\1-1.0/' "$tmp/tree/topologies/validation_bands.tsv"
grep -q "^H100	bf16	dense	eager	[0-9]*	-1.0	" "$tmp/tree/topologies/validation_bands.tsv" ||
  fail "no H100 bf16 band to change"
expect "a validated band the tests do not give" 1 "validation_bands.tsv (generated now)"
copy
sed -i '/^<!-- generated: models END -->$/d' "$tmp/tree/docs/models-and-clusters.md"
expect "a block without its END marker" 1
copy
printf '\n<!-- generated: nosuch BEGIN -->\n<!-- generated: nosuch END -->\n' >>"$tmp/tree/docs/testing.md"
expect "a marker without a generated block" 1
copy
sed -i '/^<!-- generated: validation-llama3 BEGIN -->$/,/^<!-- generated: validation-llama3 END -->$/d' "$tmp/tree/docs/validation.md"
expect "a generated block without a place" 1
copy
sed -i 's|(simulator.md#stragglers)|(simulator.md#straglers)|' "$tmp/tree/docs/plan-flags.md"
expect "a link to a heading that is not there" 1 "a link to simulator.md#straglers, which has no heading"
copy
printf '\nSee [the architecture](architecture.md#layers) and [nothing](nothing.md).\n' >>"$tmp/tree/docs/testing.md"
expect "a link to a file that is not there" 1 "a link to nothing.md, which does not exist"
# make docs (write) puts a changed copy right, and then it checks
copy
sed -i 's/^| `-t`, `--tp` | `N` | tensor-parallel size |$/| `-t`, `--tp` | `N` | stale |/' "$tmp/tree/docs/flags.md"
sed -i 's/^\(H100\tbf16\tdense\t[0-9]*\t\)[-0-9.]*/\1-1.0/' "$tmp/tree/topologies/validation_bands.tsv"
bash "$docs" write "$tmp/gen.md" "$tmp/tree" >/dev/null || fail "write"
expect "the docs after write" 0

[ "$fails" -eq 0 ] && echo "docs: ok"
[ "$fails" -eq 0 ]
