#!/usr/bin/env bash
# The layers (README, "Architecture"): every #include "dir/..." in a folder
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
# outputs are report/'s to write (cli/ names them): the planner's layers write no file
while IFS= read -r hit; do
  echo "FAIL: $hit: core/, plan/ and sim/ write no output (report/ does; core/fileio.c and json.c are its tools)"
  fails=$((fails + 1))
done < <(grep -rnE --include='*.c' 'px_afile_open|px_json_write\(|px_file_write\(|fopen\([^)]*"[wa]' core plan sim |
  grep -vE '^core/(fileio|json)\.c:')
echo "$fails failures"
[ "$fails" -eq 0 ]
