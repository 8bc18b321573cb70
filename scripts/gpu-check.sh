#!/usr/bin/env bash
# The GPU check: on a machine with one NVIDIA GPU, in about 8 minutes, what
# parallax needs to know of it and whether its CUDA backend works there:
#   env        the GPU (nvidia-smi), the toolchain, the libraries found
#   deps       scripts/install-deps.sh, only when a build requirement is missing
#   build      CMake with the CUDA backend required, for this GPU's architecture
#   kernels    tests/gpu/test_cuda_kernels.c: every CUDA kernel against its CPU twin
#   calibrate  parallax calibrate --backend cuda: the GEMM table (bf16, fp8 where the
#              GPU has it) over a grid and the shapes of the two models below, few-tile GEMMs
#              on several streams beside one (MoE experts, TP chunks), one GEMM
#              sustained for a minute against its burst rate, flash attention forward and
#              backward by sequence length, a device-to-device copy; a cluster file whose
#              GPU figures cite this GPU and this day (cluster-fragment.json)
#   run-MODEL  GPT-2 124M and Llama 3.2 1B (seq 1024, 8 sequences a step, bf16) on the
#              CUDA executor with --profile: tokens/s, MFU
#   predict-MODEL  the simulator on the same plan, with the measured file and with the
#              datasheet preset, and `parallax compare` per op family
#   exec       tests/gpu/exec.sh: the CUDA backend against the CPU backend, end to end,
#              with what is left of the budget
# Each step has its own time limit within the budget; a step that fails or runs out of
# time is recorded and the next one runs (those that need its output say so). The
# summary is rewritten after every step, so an interrupted check still leaves one:
#   OUT_DIR/summary.md, summary.json   (scripts/gpu_check_report.py)
#   OUT_DIR/cluster-fragment.json      the calibrated cluster file
#   OUT_DIR/calibrate.txt, env.txt     calibrate's tables; the machine
#   OUT_DIR/details.tar.gz             every step's log, the runs' JSON, profiles, predictions
# (six files at most: a device machine that hands back few files gets them all).
#
#   scripts/gpu-check.sh OUT_DIR [--emu | --dry-run] [--budget-s N] [--build-dir DIR] [--sustain-s S]
#                        [--debs DIR]
#   scripts/gpu-check.sh --fetch-debs DIR
#
# A GPU machine without the network and without cJSON, CUnit or OpenBLAS's development
# packages: --fetch-debs DIR, run where Debian's registry is reachable (apt-get download),
# puts their .deb files in DIR (about 13 MB); --debs DIR on the GPU machine unpacks them
# into a private root (dpkg-deb -x, nothing installed) that pkg-config, CMake and the loader
# use, when pkg-config does not find them there. MPI, the CUDA toolkit and NCCL must be there.
#
# --emu (or --dry-run): the same steps on the emulated GPU of tests/gpu/emu (built into
# --build-dir, default build/emu, as the gpu_emu test builds it), tiny models and
# calibrate --quick, in a minute or two; kernels and exec are left to gpu_emu, which
# runs them. Measures nothing of a GPU: the summary says it is an emulation.
# OUT_DIR must be empty or new: an earlier check's results are never overwritten.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}
die() { # a usage error: exit 2, as parallax does
  echo "gpu-check: $*" >&2
  exit 2
}

# the build requirements scripts/install-deps.sh installs that a GPU image may lack, as .debs
# and Open MPI with the libraries it loads (about 7 MB more), unpacked only on an image without MPI
deb_pkgs=(libcjson1 libcjson-dev libcunit1 libcunit1-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev
          libopenblas-dev libgfortran5 libquadmath0 pkgconf pkgconf-bin libpkgconf3)
mpi_pkgs=(openmpi-bin libopenmpi-dev libopenmpi3 openmpi-common libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
          libevent-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2
          libpsm-infinipath1 libnuma1 libmunge2 libltdl7 libpciaccess0 libxnvctrl0)

out= mode=gpu budget=480 build= sustain= debs=
while [ $# -gt 0 ]; do
  case "$1" in
    --fetch-debs)
      [ $# -ge 2 ] || die "--fetch-debs: needs a directory"
      mkdir -p "$2" && cd "$2" || die "$2: cannot create it"
      apt-get download "${deb_pkgs[@]}" "${mpi_pkgs[@]}" || die "apt-get download failed (run apt-get update first?)"
      echo "gpu-check: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1), in $(pwd): pass --debs $(pwd) on the GPU machine"
      exit 0 ;;
    --debs) [ $# -ge 2 ] && [ -d "$2" ] || die "--debs: needs a directory of .deb files"; debs=$(cd "$2" && pwd); shift ;;
    --emu | --dry-run) mode=emu ;;
    --budget-s) [ $# -ge 2 ] || die "--budget-s: needs seconds"; budget=$2; shift ;;
    --build-dir) [ $# -ge 2 ] || die "--build-dir: needs a directory"; build=$2; shift ;;
    --sustain-s) [ $# -ge 2 ] || die "--sustain-s: needs seconds"; sustain=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$out" ] || die "one OUT_DIR, not '$out' and '$1'"; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || die "OUT_DIR is required (see --help)"
[[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge 60 ] || die "--budget-s: '$budget' is not a whole number of seconds >= 60"
[ -z "$sustain" ] || [[ "$sustain" =~ ^[0-9]+$ && "$sustain" -ge 1 ]] || die "--sustain-s: '$sustain' is not a whole number of seconds >= 1"
if [ -e "$out" ] && { [ ! -d "$out" ] || [ -n "$(ls -A "$out")" ]; }; then
  die "$out: exists and is not an empty directory (an earlier check's results are kept; name a new one)"
fi
mkdir -p "$out" || die "$out: cannot create it"
out=$(cd "$out" && pwd)
if [ "$mode" = emu ]; then build=${build:-$root/build/emu}; else build=${build:-$root/build-gpu}; fi
mkdir -p "$build" && build=$(cd "$build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
mkdir -p "$work/logs" "$work/runs"
t0=$(date +%s)
reserve=15 # seconds kept for the last summary

export PARALLAX_HOME=$root ASAN_OPTIONS=detect_leaks=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# the models, one plan for both: GPT-2's 1,024 positions, 8 sequences a step (8,192 tokens)
if [ "$mode" = emu ]; then
  models=(tiny-gpt tiny)
  plan=(--seq 32 -b 2 -B 2 --precision bf16)
  steps=3
  px=$build/emu/parallax_emu
  calib=(--quick)
else
  models=(gpt2-124m llama3.2-1b)
  plan=(--seq 1024 -b 8 -B 8 --precision bf16)
  steps=10
  px=$build/parallax
  calib=()
fi

# ---- the record: one line a step in steps.tsv, the summary from it ----

left() { echo $((budget - ($(date +%s) - t0))); }

# record NAME STATUS SECONDS NOTE: the step's line (replacing a "running" one)
record() {
  local f=$work/steps.tsv
  touch "$f"
  grep -v "^$1	" "$f" >"$f.new"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ' | cut -c1-400)" >>"$f.new"
  mv "$f.new" "$f"
}

summarize() {
  cat >"$work/meta.env" <<EOF
mode=$mode
budget_s=$budget
elapsed_s=$(($(date +%s) - t0))
started=$(date -u -d "@$t0" +%Y-%m-%dT%H:%M:%SZ)
updated=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
models=${models[*]}
plan=${plan[*]}
steps=$steps
work=$work
EOF
  if command -v python3 >/dev/null; then
    python3 "$root/scripts/gpu_check_report.py" "$work" "$out" >>"$work/logs/report.log" 2>&1 ||
      echo "gpu-check: the summary failed: see logs/report.log" >&2
  else # the step table alone
    { echo "# GPU check ($mode): no python3 here for the full summary"; echo; echo "| step | status | seconds | note |"
      echo "|---|---|---|---|"; awk -F'\t' '{ print "| " $1 " | " $2 " | " $3 " | " $4 " |" }' "$work/steps.tsv"; } \
      >"$out/summary.md"
  fi
  tar czf "$out/details.tar.gz.new" -C "$work" logs runs steps.tsv meta.env 2>/dev/null &&
    mv "$out/details.tar.gz.new" "$out/details.tar.gz"
}

# step NAME CAP NEED FUNCTION ARGS...: FUNCTION under `timeout` (its whole process group) for
# CAP seconds or what the budget has left, output in logs/NAME.log; skipped when fewer than
# NEED seconds are left. Its status: 0 ok, else failed.
step() {
  local name=$1 cap=$2 need=$3 fn=$4
  shift 4
  local lim=$(($(left) - reserve))
  if [ "$lim" -lt "$need" ]; then
    record "$name" skipped 0 "out of budget: ${lim}s left, it needs ${need}s"
    summarize
    return 1
  fi
  [ "$lim" -lt "$cap" ] || lim=$cap
  record "$name" running 0 "started at $(date -u +%H:%M:%S), limit ${lim}s"
  summarize
  echo "gpu-check: $name (limit ${lim}s)" >&2
  local s0 rc secs
  s0=$(date +%s.%N)
  timeout --kill-after=10 "$lim" bash -c "$fn"' "$@"' "$fn" "$@" >"$work/logs/$name.log" 2>&1
  rc=$?
  secs=$(awk -v a="$s0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -eq 0 ]; then
    record "$name" ok "$secs" "$(tail -n 1 "$work/logs/$name.log")"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    record "$name" timeout "$secs" "stopped after ${lim}s: $(tail -n 1 "$work/logs/$name.log")"
  else
    record "$name" failed "$secs" "exit $rc: $(grep -v '^ *$' "$work/logs/$name.log" | tail -n 2 | tr '\n' ' ')"
  fi
  summarize
  echo "gpu-check: $name: $(grep "^$name	" "$work/steps.tsv" | cut -f2)" >&2
  return "$rc"
}

# ---- the steps (run by `bash -c` under timeout: exported; arrays travel as lists) ----

lists() { read -ra models <<<"$models_list"; read -ra plan <<<"$plan_list"; read -ra calib <<<"$calib_list"; }

env_step() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "cpus: $(nproc)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null) $(git -C "$root" status --short 2>/dev/null | wc -l) changed files"
  echo "mode: $mode"
  if command -v nvidia-smi >/dev/null; then
    echo "--- nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,power.limit,clocks.max.sm,clocks.max.mem,pci.bus_id \
      --format=csv 2>&1
    nvidia-smi 2>&1
  else
    echo "nvidia-smi: not found"
  fi
  for tool in nvcc cmake cc c++ mpicc mpirun pkg-config python3 jq; do
    printf '%-10s %s\n' "$tool:" "$(command -v "$tool" >/dev/null && "$tool" --version 2>&1 | grep -m1 -i -E 'version|release|[0-9]+\.[0-9]+' || echo 'not found')"
  done
  for lib in libcjson cunit openblas; do
    printf '%-10s %s\n' "$lib:" "$(pkg-config --modversion "$lib" 2>/dev/null || echo 'not found (pkg-config)')"
  done
  echo "nccl.h: $(find /usr/include /usr/local/include /usr/local/cuda*/include -maxdepth 1 -name nccl.h 2>/dev/null | head -1)"
  echo "libnccl: $( (ldconfig -p 2>/dev/null | grep -m1 libnccl.so) || find /usr/local/cuda*/lib* -name 'libnccl.so*' 2>/dev/null | head -1)"
  cp "$work/logs/env.log" "$out/env.txt" 2>/dev/null
  echo "env recorded"
}

missing_deps() {
  local missing=()
  for tool in cmake mpicc mpirun pkg-config nvcc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  for lib in libcjson cunit openblas; do pkg-config --exists "$lib" 2>/dev/null || missing+=("$lib"); done
  echo "${missing[*]}"
}

# --debs: the packages unpacked into a private root, their pkg-config files pointed at it, and
# the variables that find them written to deps.env (which the later steps read)
unpack_debs() {
  local r=$build/debs-root lib d mpi=0
  rm -rf "$r" && mkdir -p "$r" || return 1
  command -v mpicc >/dev/null || mpi=1
  for d in "$debs"/*.deb; do
    [ "$mpi" = 1 ] || [[ " $mpi_pkgs_list " != *" $(dpkg-deb -f "$d" Package) "* ]] || continue
    dpkg-deb -x "$d" "$r" || return 1
  done
  lib=$r/usr/lib/x86_64-linux-gnu
  find "$r" -name '*.pc' -exec sed -i -E "s#^(prefix|libdir|includedir)=/usr#\1=$r/usr#" {} +
  {
    echo "export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
    echo "export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    # pkg-config and Open MPI from the private root only where the image has none: MPI's commands
    # under their plain names (Debian leaves those to update-alternatives), relocated by OPAL_PREFIX
    command -v pkg-config >/dev/null || echo "export PATH=\$PATH:$r/usr/bin"
    if [ "$mpi" = 1 ] && [ -x "$r/usr/bin/mpicc.openmpi" ]; then
      for t in mpicc mpirun mpiexec; do ln -sf "$t.openmpi" "$r/usr/bin/$t"; done
      echo "export PATH=$r/usr/bin:\$PATH OPAL_PREFIX=$r/usr OPAL_LIBDIR=$lib/openmpi/lib"
      echo "export PMIX_INSTALL_PREFIX=$lib/pmix2 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1"
    fi
  } >"$work/deps.env"
  echo "unpacked $(ls "$debs"/*.deb | wc -l) packages of $debs into $r"
}

deps_step() {
  local missing
  missing=$(missing_deps)
  if [ -z "$missing" ]; then
    echo "every build requirement is present"
    return 0
  fi
  echo "missing: $missing"
  if [ -n "$debs" ]; then
    unpack_debs && . "$work/deps.env" && missing=$(missing_deps)
    [ -z "$missing" ] && { echo "every build requirement is present (with --debs)"; return 0; }
    echo "still missing: $missing"
  fi
  echo "scripts/install-deps.sh:"
  bash "$root/scripts/install-deps.sh"
}

build_step() {
  if [ "$mode" = emu ]; then
    bash "$root/tests/gpu/emu/run.sh" --build-only "$build" && echo "built $px (emulated GPU)"
    return
  fi
  local arch nccl=()
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ "$arch" =~ ^[0-9]+$ ]] || arch="80;90"
  [ -f "$work/nccl.env" ] && . "$work/nccl.env" && nccl=(-DNCCL_INCLUDE_DIR="$NCCL_INC" -DNCCL_LIBRARY="$NCCL_LIB")
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPX_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
    "${nccl[@]}" &&
    cmake --build "$build" -j"$(nproc)" --target parallax parallax_exec parallax_cuda test_cuda_kernels px_gradcmp &&
    echo "built $px for sm_$arch"
}

kernels_step() { "$build/tests/test_cuda_kernels"; }

calibrate_step() {
  lists
  local s=${sustain:-60}
  [ "$mode" = gpu ] || s=${sustain:-1}
  "$px" calibrate --backend cuda -c "$gpu_preset" -o "$out/cluster-fragment.json" -m "$(IFS=,; echo "${models[*]}")" "${plan[@]}" \
    --sustain-s "$s" "${calib[@]}" >"$out/calibrate.txt" && tail -n 1 "$out/calibrate.txt"
}

# run_step MODEL: the run with its profile, on the calibrated file where there is one
run_step() {
  lists
  local m=$1 cl=()
  [ -s "$out/cluster-fragment.json" ] && cl=(-c "$out/cluster-fragment.json")
  mpirun -np 1 "$px" run --backend cuda -m "$m" "${plan[@]}" "${cl[@]}" --steps "$steps" --json \
    --profile "$work/runs/$m.profile.json" >"$work/runs/$m.run.json" &&
    echo "$m: $(grep -o '"tokens_per_s":[^,]*' "$work/runs/$m.run.json" | tail -n 1)"
}

# predict_step MODEL: the simulator on the same plan, with the datasheet preset and the calibrated file, and compare
predict_step() {
  lists
  local m=$1 rc=0
  "$px" sim -m "$m" "${plan[@]}" -g 1 -c "$gpu_preset" --json >"$work/runs/$m.sim-preset.json" || rc=1
  if [ -s "$out/cluster-fragment.json" ]; then
    "$px" sim -m "$m" "${plan[@]}" -g 1 -c "$out/cluster-fragment.json" --json >"$work/runs/$m.sim-calibrated.json" || rc=1
    if [ -s "$work/runs/$m.profile.json" ]; then
      "$px" compare --profile "$work/runs/$m.profile.json" -m "$m" "${plan[@]}" -g 1 -c "$out/cluster-fragment.json" \
        --json >"$work/runs/$m.compare.json" || rc=1
    fi
  fi
  [ "$rc" -eq 0 ] && echo "$m: predicted with $gpu_preset and with the calibrated file"
  return "$rc"
}

exec_step() { bash "$root/tests/gpu/exec.sh" "$px" "$build/tests/px_gradcmp" "$root"; }

# NCCL where the toolkit has none: Python's nvidia-nccl package (libnccl.so.2 and nccl.h), for
# the build (nccl.env) and the loader
find_nccl() {
  [ -f /usr/include/nccl.h ] || [ -f /usr/local/include/nccl.h ] || compgen -G "/usr/local/cuda*/include/nccl.h" >/dev/null &&
    return 0
  local d
  d=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) || return 0
  [ -f "$d/include/nccl.h" ] && [ -f "$d/lib/libnccl.so.2" ] || return 0
  printf 'NCCL_INC=%s\nNCCL_LIB=%s\n' "$d/include" "$d/lib/libnccl.so.2" >"$work/nccl.env"
  export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "gpu-check: NCCL from $d" >&2
}

export -f lists env_step missing_deps unpack_debs deps_step build_step kernels_step calibrate_step run_step predict_step exec_step
export root out work build px mode sustain steps debs mpi_pkgs_list="${mpi_pkgs[*]}"
export models_list="${models[*]}" plan_list="${plan[*]}" calib_list="${calib[*]}"

echo "gpu-check: $mode mode, budget ${budget}s, results in $out (work files in $work)" >&2
record start ok 0 "budget ${budget}s"
step env 30 5 env_step
# the GPU's preset: the datasheet figures the calibration starts from and the prediction is
# compared with (the presets `parallax run --backend cuda` takes by the GPU's name)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$gpu_name" in
  *A100*) gpu_preset=dgx-a100 ;;
  *H200*) gpu_preset=hgx-h200 ;;
  *) gpu_preset=dgx-h100 ;;
esac
export gpu_preset
if [ "$mode" = gpu ]; then
  command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export PATH=$PATH:/usr/local/cuda/bin
  find_nccl
  step deps 90 20 deps_step
  [ ! -f "$work/deps.env" ] || . "$work/deps.env" # --debs: for the build and the runs
fi
built=0
step build 360 60 build_step && built=1
if [ "$built" -eq 1 ]; then
  if [ "$mode" = gpu ]; then step kernels 150 30 kernels_step; else record kernels skipped 0 "emulated: the gpu_emu test runs test_cuda_kernels_emu"; fi
  # a shorter sustained run when the budget is short: the rest still gets its turn
  if [ -z "$sustain" ] && [ "$mode" = gpu ] && [ "$(left)" -lt 330 ]; then sustain=20; export sustain; fi
  step calibrate 240 40 calibrate_step
  for m in "${models[@]}"; do
    step "run-$m" 180 30 run_step "$m" && step "predict-$m" 60 5 predict_step "$m"
    grep -q "^predict-$m	" "$work/steps.tsv" || record "predict-$m" skipped 0 "the run did not finish"
  done
  if [ "$mode" = gpu ]; then step exec 600 60 exec_step; else record exec skipped 0 "emulated: the gpu_emu test runs tests/gpu/exec.sh"; fi
else
  for s in kernels calibrate "${models[@]/#/run-}" exec; do record "$s" skipped 0 "the build failed"; done
fi
record end ok "$(($(date +%s) - t0))" "done"
summarize
echo "gpu-check: done in $(($(date +%s) - t0))s: $out/summary.md" >&2
! grep -q "	failed	\|	timeout	" "$work/steps.tsv"
