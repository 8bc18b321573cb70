#!/usr/bin/env bash
# Start-up: the commands that plan or simulate load no MPI, OpenBLAS, CUDA,
# cuBLASLt or NCCL (checked with the dynamic loader's own list, LD_DEBUG=files,
# which shows what is opened at start and later with dlopen); run loads the
# executor module, and --backend cuda the CUDA module. A module that is missing,
# or needs a library that is missing, is refused in one line per rank naming
# what was not found, exit 2, never a crash. Times are for bench/bench_startup.
#   startup.sh PARALLAX REPO   (env: PX_EXEC, PX_CUDA: what this build has; PX_GONE_DIR: the fixtures)
set -u
px=$1
source "$(dirname "$0")/../tools/clitest.sh"
heavy='lib(mpi|open-pal|open-rte|openblas|gfortran|cudart|cublas|cublasLt|nccl|parallax_exec|parallax_cuda)\.so'

# loaded CMD...: the shared objects the command opened (file names), one a line
loaded() { LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\([^ ]*\) .*/\1/p' | xargs -rn1 basename | sort -u; }
light() { # name cmd...: exit 0 and nothing heavy loaded
  local name=$1 libs
  shift
  "$@" >/dev/null 2>&1 || { fail "$name: exit $?"; return; }
  libs=$(loaded "$@" | grep -E "$heavy" | tr '\n' ' ')
  [ -z "$libs" ] && echo "ok: $name loads none of MPI, OpenBLAS, CUDA ($(loaded "$@" | tr '\n' ' '))" ||
    fail "$name loads $libs"
}
f405=(-m llama3-405b -c dgx-h100 -g 16384 -t 8 -p 16 -S -b 1 -B 2048 -z 2 -e interleaved -v 2) # Meta's split, ZeRO-2 to fit
light "--help" "$px" --help
light "plan 405b" "$px" plan "${f405[@]}"
light "sim 405b" "$px" sim "${f405[@]}"
light "sweep" "$px" sweep -m tiny -c dgx-h100 -g 8 -B 16 -k 3
light "model show" "$px" model show llama3-8b
light "calibrate --import" "$px" calibrate --import -c dgx-h100 -o "$tmp/c.json" "$2/tests/data/nccl/node_ar.txt"
# the executable itself links none of them
libs=$(ldd "$px" | grep -E "$heavy")
[ -z "$libs" ] || fail "the executable links $libs"

if [ "${PX_EXEC:-1}" != 1 ]; then
  finish
  exit
fi

# refused CODE WANT CMD...: exit CODE (no crash) and stderr naming WANT; one line unless under mpirun
refused() {
  local code=$1 want=$2 err rc
  shift 2
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$code" ] || ! printf '%s' "$err" | grep -qF -- "$want"; then
    fail "$*: exit $rc (want $code), '$err' (want '$want')"
  elif [ "$1" != mpirun ] && [ "$(printf '%s\n' "$err" | grep -c '')" -ne 1 ]; then
    fail "$*: more than the refusal on stderr: $err"
  else
    echo "ok: refused (exit $rc): $(printf '%s\n' "$err" | head -1)"
  fi
}

# run loads the executor (MPI, OpenBLAS) and nothing of CUDA with --backend cpu
libs=$(loaded "$px" run -m tiny -B 4 --steps 1 --backend cpu)
printf '%s\n' "$libs" | grep -q 'libparallax_exec\.so' && printf '%s\n' "$libs" | grep -q 'libmpi\.so' ||
  fail "run: the executor was not loaded: $(echo $libs)"
! printf '%s\n' "$libs" | grep -qE 'lib(cudart|cublasLt|nccl|parallax_cuda)\.so' || fail "run --backend cpu loads CUDA: $(echo $libs)"
echo "ok: run --backend cpu loads the executor module, MPI and OpenBLAS, and nothing of CUDA"
# without the NVIDIA driver's library the default backend is cpu, found without loading the CUDA module
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  libs=$(loaded "$px" run -m tiny -B 4 --steps 1)
  ! printf '%s\n' "$libs" | grep -qE 'lib(cudart|cublasLt|nccl|parallax_cuda)\.so' &&
    echo "ok: no driver: run (default backend) loads nothing of CUDA" ||
    fail "no driver, yet run's default backend loads CUDA: $(echo $libs)"
fi

# the executable alone: run says the executor is missing; the planner's commands still work
mkdir "$tmp/alone"
cp "$px" "$tmp/alone/"
refused 2 "the executor is not available: $tmp/alone/libparallax_exec.so: cannot open shared object file" \
  "$tmp/alone/parallax" run -m tiny -B 4 --steps 1
refused 2 "$tmp/alone/libparallax_exec.so: cannot open shared object file" \
  "$tmp/alone/parallax" calibrate --quick -o "$tmp/c.json"
"$tmp/alone/parallax" sim -m tiny -c dgx-h100 -g 8 >/dev/null || fail "sim without the modules"
refused 2 "PARALLAX_EXEC_MODULE gives" env PARALLAX_EXEC_MODULE="$tmp/none.so" "$px" run -m tiny -B 4 --steps 1

if [ "${PX_CUDA:-0}" != 1 ]; then
  refused 2 "--backend cuda: no CUDA backend in this build" "$px" run -m tiny -B 4 --steps 1 --backend cuda
  finish
  exit
fi

# the executor without the CUDA module beside it: --backend cuda refused, every rank
cp "$(dirname "$px")/libparallax_exec.so" "$tmp/alone/"
refused 2 "--backend cuda: no CUDA backend: $tmp/alone/libparallax_cuda.so: cannot open shared object file" \
  mpirun -np 2 "$tmp/alone/parallax" run -m tiny -B 4 -d 2 --steps 1 --backend cuda
# ... while --backend cpu, and the default backend's probe, run without it
"$tmp/alone/parallax" run -m tiny -B 4 --steps 1 >/dev/null 2>&1 || fail "run (default backend) without the CUDA module"
refused 2 "PARALLAX_CUDA_MODULE gives" env PARALLAX_CUDA_MODULE="$tmp/none.so" \
  "$px" run -m tiny -B 4 --steps 1 --backend cuda
# a module that needs a library that is not there: the library named
refused 2 "libpx_needs_gone.so did not load: libpx_gone.so: cannot open shared object file" \
  env PARALLAX_CUDA_MODULE="$PX_GONE_DIR/libpx_needs_gone.so" "$px" run -m tiny -B 4 --steps 1 --backend cuda
refused 2 "libpx_needs_gone.so did not load: libpx_gone.so: cannot open shared object file" \
  env PARALLAX_EXEC_MODULE="$PX_GONE_DIR/libpx_needs_gone.so" "$px" run -m tiny -B 4 --steps 1
# a library that loads but is no parallax module
refused 2 "is not a parallax module" env PARALLAX_CUDA_MODULE="$PX_GONE_DIR/gone/libpx_gone.so" \
  "$px" run -m tiny -B 4 --steps 1 --backend cuda
# with the module: --backend cuda loads it and the GPU's libraries (and, without a device, says so)
libs=$(loaded "$px" run -m tiny -B 4 --steps 1 --backend cuda)
for l in libparallax_cuda libcudart libcublasLt libnccl; do
  printf '%s\n' "$libs" | grep -q "^$l\.so" || fail "run --backend cuda did not load $l: $(echo $libs)"
done
echo "ok: run --backend cuda loads the CUDA module and its libraries"

finish
