#!/usr/bin/env bash
# The layers (docs/architecture.md, "Layers"): every #include "dir/..." in a folder
# names a folder that folder may read, the planner's layers and cli/
# include no MPI, BLAS or CUDA header, and the planner's layers write no output. (The CMake targets enforce the same at link time.)
set -u
src=${1:-.}
cd "$src" || exit 1
fails=0
# folder: the folders its files may include
allowed() {
  case $1 in
    core) echo "core" ;;
    plan) echo "core plan" ;;
    sim) echo "core plan sim" ;;
    report) echo "core plan sim report exec/result.h" ;;
    kernels) echo "core kernels" ;;
    exec) echo "core plan kernels exec" ;;
    cli) echo "core plan sim report exec cli" ;;
  esac
}
for dir in core plan sim report kernels exec cli; do
  ok=$(allowed "$dir")
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=$(printf '%s' "$hit" | sed 's/.*#include "\([^"]*\)".*/\1/')
    good=0
    for a in $ok; do
      case $inc in "$a" | "$a"/*) good=1 ;; esac
    done
    if [ "$good" -eq 0 ]; then
      echo "FAIL: $file includes \"$inc\": $dir/ may include only: $ok"
      fails=$((fails + 1))
    fi
  done < <(grep -rn --include='*.c' --include='*.h' --include='*.cu' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$dir")
done
# the planner builds without the executor's libraries
while IFS= read -r hit; do
  echo "FAIL: $hit: core/, plan/, sim/ and report/ build without MPI, BLAS and CUDA"
  fails=$((fails + 1))
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(mpi|cblas|openblas[a-z_]*|cuda[a-z_]*|cublas[A-Za-z_]*|nccl)\.h>' core plan sim report)
# the executable links none of them either: cli/ reaches the executor through its module's table
while IFS= read -r hit; do
  echo "FAIL: $hit: cli/ calls the executor through exec/module.h (the parallax executable links no MPI, BLAS or CUDA)"
  fails=$((fails + 1))
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(mpi|cblas|openblas[a-z_]*|cuda[a-z_]*|cublas[A-Za-z_]*|nccl)\.h>' cli)
# No circle of files in plan/: a file (X.c with its X.h) depends on Y when
# X.c or X.h includes plan/Y.h. Each function or table declared in plan/X.h
# is defined in plan/X.c (one .h per .c), so the includes are every way one
# file reaches another, and tsort finds any circle among them.
for dir in plan; do
  for h in "$dir"/*.h; do
    c=${h%.h}.c
    [ -f "$c" ] || continue
    names=$(grep -E '^[a-z]' "$h" | grep -vE '^(typedef|static|struct|enum)\b' |
      sed -nE 's/^[^(]*[^a-zA-Z0-9_](px_[a-z0-9_]+)[[(].*/\1/p')
    for name in $names; do
      grep -qE "^([a-z].*[^a-zA-Z0-9_]$name\(|PX_NAME_TABLE\($name,|[a-z].*[^a-zA-Z0-9_]$name\[.*=)" "$c" && continue
      echo "FAIL: $name is declared in $h but not defined in $c (one .h per .c)"
      fails=$((fails + 1))
    done
  done
  loop=$(for f in "$dir"/*.[ch]; do
    from=$(basename "${f%.*}")
    echo "$from $from"
    sed -nE "s|^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$dir/([a-z0-9_]+)\.h\".*|\1|p" "$f" |
      while read -r to; do [ "$to" = "$from" ] || echo "$to $from"; done
  done | tsort 2>&1 >/dev/null | sed -n 's/^tsort: \([a-z0-9_]*\)$/\1/p' | tr '\n' ' ')
  if [ -n "$loop" ]; then
    echo "FAIL: a circle of files in $dir/ (each includes the next's header): $loop"
    fails=$((fails + 1))
  fi
done
# outputs are report/'s to write (cli/ names them): the planner's layers write no file
while IFS= read -r hit; do
  echo "FAIL: $hit: core/, plan/ and sim/ write no output (report/ does; core/fileio.c and json.c are its tools)"
  fails=$((fails + 1))
done < <(grep -rnE --include='*.c' 'px_afile_open|px_json_write\(|px_file_write\(|fopen\([^)]*"[wa]' core plan sim |
  grep -vE '^core/(fileio|json)\.c:')
echo "$fails failures"
[ "$fails" -eq 0 ]
