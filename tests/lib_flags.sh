#!/usr/bin/env bash
# The library names fields, the CLI names flags: no string of the listed
# library folders names a command-line flag (--name); a message names the
# field in backquotes (`fp8_recipe`), which the CLI turns into its flag
# (cli/args.c, px_cli_words). exec/ so far; plan/, sim/ and report/ join the
# list once their messages name fields.
set -u
src=${1:-.}
cd "$src" || exit 1
fails=0
for dir in exec; do
  while IFS= read -r hit; do
    echo "FAIL: $hit: a library message names a flag; name the field (\`field\`) and let the CLI say the flag"
    fails=$((fails + 1))
  done < <(grep -rn --include='*.c' '"[^"]*--[a-z]' "$dir")
done
echo "$fails failures"
[ "$fails" -eq 0 ]
