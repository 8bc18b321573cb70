#!/usr/bin/env bash
# The docs' generated parts (docs/testing.md, "Generated documentation"): blocks
# between `<!-- generated: NAME BEGIN -->` and `<!-- generated: NAME END -->`
# lines in README.md and docs/*.md, written by the code they describe; and the
# data files the binary reads that the tests write (a block named file:PATH is
# the whole of PATH: topologies/validation_bands.tsv, the validated error bands).
#   scripts/docs.sh generate PARALLAX TESTS > GEN      every block, from the binaries (TESTS: the build's
#                                                      tests/, with the validation suites and px_bands_table)
#   scripts/docs.sh write GEN [SRC]                    put GEN's blocks into SRC's docs (make docs)
#   scripts/docs.sh check GEN [SRC]                    exit 1 where SRC's docs differ from GEN,
#                                                      or a link among them is broken
# The timings in the quick start's output (how long a simulation or a sweep
# took, on how many threads) are not compared, and a change of them alone is
# not written.
set -euo pipefail

usage() {
  echo "usage: scripts/docs.sh generate PARALLAX TESTS > GEN | write GEN [SRC] | check GEN [SRC]" >&2
  exit 2
}

# A quick-start block: the command as the README shows it, then its output.
quick() {
  local name=$1 px=$2
  shift 2
  printf '<!-- generated: quickstart-%s BEGIN -->\n\n```\n$ parallax %s\n' "$name" "$*"
  "$px" "$@"
  printf '```\n\n<!-- generated: quickstart-%s END -->\n' "$name"
}

# The lines of GEN's block NAME, without its markers.
block_of() { awk -v n="$1" '$1 == "<!--" && $2 == "generated:" && $3 == n { on = $4 == "BEGIN"; next } on' "$2"; }

generate() {
  local px tests=$2 home tmp suite f st=0
  px=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: the quick start runs in a directory of its own
  home=$(cd "${PARALLAX_HOME:-$(dirname "$0")/..}" && pwd) # absolute: the links below name it
  "$px" help --markdown
  tmp=$(mktemp -d)
  # PX_DOCS_CACHE=DIR: the validation suites' and the parity matrix's outputs kept in DIR, and taken from it
  # when there (tests/cli/docs.sh generates twice; its second run changes only the installed bands)
  local cache=${PX_DOCS_CACHE:-}
  if [ -n "$cache" ] && [ -f "$cache/complete" ]; then
    cp "$cache"/test_validation_*.md "$cache/bands.rows" "$cache/parity.md" "$tmp/"
  else
    # the validation suites: the tables of whole runs (test_validation_runs), and every row's error from each
    # suite of whole runs appended to one file, whose table px_bands_table writes (tests/validation/bands.h)
    for suite in test_validation_runs test_validation_moe test_validation_blackwell; do
      if ! PX_VALIDATION_MD="$tmp/$suite.md" PX_VALIDATION_BANDS="$tmp/bands.rows" "$tests/$suite" >"$tmp/log" 2>&1; then
        cat "$tmp/log" >&2
        echo "scripts/docs.sh: $tests/$suite failed: the validation tables and bands are its output" >&2
        rm -rf "$tmp"
        return 1
      fi
    done
    # the parity matrix (docs/parity.md): every cell planned for each backend, with the models of this home
    PARALLAX_HOME=$home bash "$home/tests/parity/matrix.sh" table "$px" >"$tmp/parity.md" || { rm -rf "$tmp"; return 1; }
    if [ -n "$cache" ]; then
      mkdir -p "$cache" && cp "$tmp"/test_validation_*.md "$tmp/bands.rows" "$tmp/parity.md" "$cache/" &&
        touch "$cache/complete"
    fi
  fi
  cat "$tmp"/test_validation_*.md
  if ! "$tests/px_bands_table" "$tmp/bands.rows" >"$tmp/bands.gen"; then
    rm -rf "$tmp"
    return 1
  fi
  cat "$tmp/bands.gen" "$tmp/parity.md"
  # the quick start's runs print their plan's band: from the table just made, not the one installed, so
  # that one `make docs` writes both alike (PARALLAX_HOME: the installed one's files, that table in its place)
  mkdir -p "$tmp/home/topologies"
  for f in "$home"/*; do [ "$f" = "$home/topologies" ] || ln -s "$f" "$tmp/home/"; done
  for f in "$home"/topologies/*; do ln -s "$f" "$tmp/home/topologies/"; done
  rm -f "$tmp/home/topologies/validation_bands.tsv"
  block_of file:topologies/validation_bands.tsv "$tmp/bands.gen" >"$tmp/home/topologies/validation_bands.tsv"
  (
    export PARALLAX_HOME=$tmp/home
    quick plan "$px" plan -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -z 1 --sp -B 64
    quick sim "$px" sim -m llama3-8b -c dgx-h100 -g 16 -t 2 -p 2 -z 1 --sp -B 64
    # docs/sweeps.md, "Power and energy": Meta's Llama 3 405B plan on 16,384 H100s, its power, and its energy to train
    quick power-sim "$px" sim -m llama3-405b -c dgx-h100 -g 16384 -t 8 -p 16 -S -b 1 -B 2048 -z 1 -e interleaved -v 2
    quick power-sweep "$px" sweep -m llama3-405b -c dgx-h100 -g 16384 -B 2048 -t 8 -p 16 --tokens 15.6T --price 2 \
      --price-per-kwh 0.08 --top 3
    # docs/finetuning.md: Llama 2 70B with LoRA on one DGX H100
    quick finetune-sweep "$px" sweep -m llama2-70b -c dgx-h100 -g 8 -B 8 --finetune lora --tokens 1B --top 5
    quick finetune-sim "$px" sim -m llama2-70b -c dgx-h100 -g 8 -t 8 --sp -B 8 --finetune lora
    mkdir "$tmp/work" && cd "$tmp/work" || exit 1 # sweep -o writes best.json here, export reads it
    quick sweep "$px" sweep -m llama3-8b -c dgx-h100 -g 16 -B 64 --top 5 -o best.json
    quick export "$px" export -f best.json --to megatron
  ) || st=1
  rm -rf "$tmp"
  return "$st"
}

# FILE with GEN's blocks in place of its own, on stdout; the names placed are
# appended to USED. Fails on a marker GEN has no block for, or one left open.
splice() {
  local gen=$1 file=$2 used=$3
  awk -v used="$used" '
    function marker(kind) { return $1 == "<!--" && $2 == "generated:" && $4 == kind }
    FNR == NR {
      if (marker("BEGIN")) cur = $3
      if (cur != "") block[cur] = block[cur] $0 "\n"
      if (cur != "" && marker("END") && $3 == cur) cur = ""
      next
    }
    skip != "" { if (marker("END") && $3 == skip) skip = ""; next }
    marker("BEGIN") {
      if (!($3 in block)) { printf "%s:%d: no generated block %s\n", FILENAME, FNR, $3 > "/dev/stderr"; bad = 1 }
      printf "%s", block[$3]
      print $3 >> used
      skip = $3
      next
    }
    { print }
    END {
      if (skip != "") { printf "%s: block %s has no END marker\n", FILENAME, skip > "/dev/stderr"; bad = 1 }
      exit bad
    }' "$gen" "$file"
}

# The timings of the quick start's output, masked for the comparison.
untimed() { sed -E 's/[0-9.]+ (ns|us|ms|s) on [0-9]+ threads?/T on N threads/g; s/events in [0-9.]+ (ns|us|ms|s)/events in T/g' "$1"; }

place() {
  local mode=$1 gen=$2 src=${3:-.} tmp f status=0
  tmp=$(mktemp -d)
  : >"$tmp/used"
  for f in "$src"/README.md "$src"/docs/*.md; do
    splice "$gen" "$f" "$tmp/used" >"$tmp/new" || status=1
    if [ "$mode" = check ]; then
      if ! diff -u --label "$f" --label "$f (generated now)" <(untimed "$f") <(untimed "$tmp/new"); then
        status=1
      fi
    elif ! cmp -s <(untimed "$f") <(untimed "$tmp/new"); then # a timing alone changes nothing
      cp "$tmp/new" "$f.tmp" && mv "$f.tmp" "$f"
      echo "rewrote $f"
    fi
  done
  # the data files, each the whole of its block
  for name in $(awk '$1 == "<!--" && $2 == "generated:" && $3 ~ /^file:/ && $4 == "BEGIN" { print $3 }' "$gen"); do
    f=$src/${name#file:}
    block_of "$name" "$gen" >"$tmp/new"
    if [ "$mode" = check ]; then
      diff -u --label "$f" --label "$f (generated now)" "$f" "$tmp/new" || status=1
    elif ! cmp -s "$f" "$tmp/new"; then
      cp "$tmp/new" "$f.tmp" && mv "$f.tmp" "$f"
      echo "rewrote $f"
    fi
    echo "$name" >>"$tmp/used"
  done
  # every block has its place
  for name in $(awk '$1 == "<!--" && $2 == "generated:" && $4 == "BEGIN" { print $3 }' "$gen"); do
    if ! grep -qx "$name" "$tmp/used"; then
      echo "scripts/docs.sh: the generated block $name has no place in README.md or docs/*.md" >&2
      status=1
    fi
  done
  rm -rf "$tmp"
  if [ "$mode" = check ] && [ "$status" -ne 0 ]; then
    echo "the docs' generated parts differ from what the code writes now: run \`make docs\` and commit the result" >&2
  fi
  if [ "$mode" = check ] && ! links "$src"; then
    echo "scripts/docs.sh: broken links in README.md or docs/*.md" >&2
    status=1
  fi
  return "$status"
}

# Every relative link of README.md and docs/*.md names a file that exists and,
# after a #, one of its headings (GitHub's anchors: lower case, punctuation
# dropped, spaces as hyphens, a repeated heading numbered).
links() {
  local src=$1
  (cd "$src" && awk '
    function slug(t) { t = tolower(t); gsub(/[^a-z0-9 _-]/, "", t); gsub(/ /, "-", t); return t }
    FNR == 1 { fence = 0; dir = FILENAME ~ /\// ? substr(FILENAME, 1, match(FILENAME, /[^\/]*$/) - 1) : "" }
    /^```/ { fence = !fence; next }
    fence { next }
    pass == 1 && /^#+ / {
      s = $0; sub(/^#+ +/, "", s); s = slug(s)
      n = seen[FILENAME, s]++
      anchor[FILENAME "#" (n ? s "-" n : s)] = 1
      next
    }
    pass == 2 {
      line = $0
      while (match(line, /\]\([^)]+\)/)) {
        target = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        if (target ~ /^[a-z]+:/) continue
        file = target; frag = ""
        if ((i = index(target, "#"))) { file = substr(target, 1, i - 1); frag = substr(target, i + 1) }
        file = file == "" ? FILENAME : dir file
        while (sub(/[^\/]+\/\.\.\//, "", file)) {}
        if (!(file in exists) && (getline dummy < file) < 0) {
          printf "%s:%d: a link to %s, which does not exist\n", FILENAME, FNR, target; bad = 1; continue
        }
        exists[file] = 1; close(file)
        if (frag != "" && file ~ /\.md$/ && !((file "#" frag) in anchor)) {
          printf "%s:%d: a link to %s, which has no heading #%s\n", FILENAME, FNR, target, frag; bad = 1
        }
      }
    }
    END { exit bad }' pass=1 README.md docs/*.md pass=2 README.md docs/*.md) >&2
}

case ${1:-} in
  generate) [ $# -eq 3 ] || usage; generate "$2" "$3" ;;
  write | check) [ $# -ge 2 ] && [ $# -le 3 ] || usage; place "$1" "$2" "${3:-.}" ;;
  *) usage ;;
esac
