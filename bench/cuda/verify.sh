#!/usr/bin/env bash
# Everything a GPU must check of par's CUDA backend, in one run, with one
# report at the end. Run from anywhere on a machine with an NVIDIA GPU,
# the CUDA toolkit (nvcc, cuBLASLt), CMake and Python 3; MLIR is not
# needed. First, on a machine with par built:
#
#   python3 bench/cuda/prepare.py        # programs + headers -> bench/cuda/deps
#
# then take the tree (with bench/cuda/deps) to the GPU machine and run
#
#   bash bench/cuda/verify.sh            # or: PAR_CUDA_ARCH=90 JOBS=16 ...
#
# What it does, each step reported as ok / FAIL / skipped (why):
#   1. the device, and what the machine has (MPI, OpenBLAS, NCCL, gtest,
#      nlohmann/json) and what is used where one is missing: the
#      runtime-only build has one rank without MPI, a built-in GEMM
#      without OpenBLAS, NCCL from the nvidia-nccl wheel without a system
#      copy, the carried headers and googletest sources from deps/;
#   2. builds par-run and the runtime tests with -DPAR_RUNTIME_ONLY=ON;
#   3. the backend conformance suite (every compute op, every element type,
#      CUDA against the CPU backend) and the CUDA launch tests;
#   4. compute-sanitizer memcheck and racecheck over the CUDA conformance
#      cases, where compute-sanitizer is installed (each step is capped at
#      PAR_STEP_TIMEOUT seconds, default 240);
#   5. every program of deps/programs (the integration models, GPT-tiny's
#      training step) on both backends: outputs and losses compared;
#   6. the GEMM benchmark: par's dot (cuBLASLt) against cuBLAS's own GEMM
#      on GPT-2 124M's and a 4096-wide layer's shapes;
#   7. GPT-2 124M's training step (bf16, 8 x 1024) against PyTorch eager.
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deps="${PAR_CUDA_DEPS:-$root/bench/cuda/deps}"
build="${PAR_CUDA_BUILD:-$root/build-cuda}"
work="${PAR_CUDA_WORK:-$build/verify}"
arch="${PAR_CUDA_ARCH:-90}"
jobs="${JOBS:-$(nproc)}"
report=()
failures=0
# The toolkit's nvcc where it is not on PATH; each check below is capped
# (PAR_STEP_TIMEOUT seconds) so one hang cannot spend the machine's time.
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
step_timeout="${PAR_STEP_TIMEOUT:-240}"

note() { report+=("$1"); echo "== $1"; }
pass() { note "ok      $1"; }
fail() { note "FAIL    $1"; failures=$((failures + 1)); }
skip() { note "skipped $1"; }

# 1. The machine.
if command -v nvidia-smi >/dev/null; then
  device="$(nvidia-smi --query-gpu=name,memory.total,driver_version \
            --format=csv,noheader | head -1)"
else
  device="no nvidia-smi"
fi
note "device: $device"
has_gpu=no
nvidia-smi -L 2>/dev/null | grep -q GPU && has_gpu=yes
cmake_args=(-DPAR_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release
            -DCMAKE_CUDA_ARCHITECTURES="$arch")
command -v ninja >/dev/null && cmake_args+=(-G Ninja)
if command -v mpicc >/dev/null || command -v mpirun >/dev/null; then
  note "MPI: $(command -v mpirun)"
else
  note "MPI: none (par-run runs one rank)"
fi
if [ -f /usr/include/nlohmann/json.hpp ]; then
  note "nlohmann/json: system"
elif [ -d "$deps/include/nlohmann" ]; then
  note "nlohmann/json: carried ($deps/include)"
  cmake_args+=(-DPAR_JSON_INCLUDE="$deps/include")
else
  fail "nlohmann/json: missing (run bench/cuda/prepare.py first)"
fi
if [ -d "$deps/googletest" ]; then
  cmake_args+=(-DPAR_GTEST_SOURCE="$deps/googletest")
fi
nccl_root="$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
if [ -f /usr/include/nccl.h ] || [ -f /usr/local/cuda/include/nccl.h ]; then
  note "NCCL: system"
elif [ -n "$nccl_root" ]; then
  note "NCCL: the nvidia-nccl wheel ($nccl_root)"
  cmake_args+=(-DNCCL_ROOT="$nccl_root")
  export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"
else
  note "NCCL: none (collectives staged through the host)"
fi

# 2. The runtime-only build.
if cmake -S "$root" -B "$build" "${cmake_args[@]}" >"$build.configure.log" 2>&1 &&
   cmake --build "$build" -j "$jobs" --target par-run ParRuntimeConformanceTests \
     ParRuntimeKernelTests ParRuntimeCudaLaunchTests par-cuda-gemm-bench \
     >"$build.build.log" 2>&1; then
  if grep -q 'CUDA toolkit not found' "$build.configure.log"; then
    fail "runtime-only build: no CUDA toolkit found (nvcc on PATH or CUDA_PATH)"
  else
    pass "runtime-only build ($(grep -o 'par: .*' "$build.configure.log" | tr '\n' ';'))"
  fi
else
  fail "runtime-only build: see $build.configure.log and $build.build.log"
  tail -30 "$build.configure.log" "$build.build.log" 2>/dev/null
  printf '%s\n' "" "== report ==" "${report[@]}"
  exit 1
fi
mkdir -p "$work"
bin="$build/bin"
tests="$build/unittests"

# 3. Conformance and the host-side tests.
for t in ParRuntimeConformanceTests ParRuntimeKernelTests ParRuntimeCudaLaunchTests; do
  if timeout "$step_timeout" "$tests/$t" >"$work/$t.log" 2>&1; then
    ran="$(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$work/$t.log")"
    skipped="$(grep -o '^\[  SKIPPED \] [0-9]* test' "$work/$t.log" | grep -o '[0-9]*' || echo 0)"
    if [ "$has_gpu" = yes ] && [ "$skipped" != 0 ]; then
      fail "$t: $skipped tests skipped with a GPU present: $(grep -m1 'Skipped' -A1 "$work/$t.log" | tail -1)"
    else
      pass "$t ($ran; $skipped skipped)"
    fi
  else
    fail "$t: $(grep -m5 -E '^\[  FAILED  \]|Failure' "$work/$t.log" | tr '\n' ' ')"
  fi
done

# 4. compute-sanitizer over the CUDA cases.
sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
if [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    if timeout "$step_timeout" "$sanitizer" --tool "$tool" --error-exitcode 9 \
         "$tests/ParRuntimeConformanceTests" --gtest_filter='*cuda*' \
         >"$work/sanitizer-$tool.log" 2>&1; then
      pass "compute-sanitizer $tool"
    else
      fail "compute-sanitizer $tool: $(grep -m3 -E 'ERROR|Invalid|hazard' "$work/sanitizer-$tool.log" | tr '\n' ' ')"
    fi
  done
else
  skip "compute-sanitizer: not installed"
fi

# 5. Programs on both backends.
if [ -d "$deps/programs" ]; then
  if timeout "$step_timeout" python3 "$root/bench/cuda/compare_backends.py" --par-run "$bin/par-run" \
       --programs "$deps/programs" --work "$work/programs" \
       >"$work/programs.log" 2>&1; then
    pass "programs on cuda = cpu ($(grep -c ' ok ' "$work/programs.log") programs)"
  else
    fail "programs on cuda vs cpu: $(grep -c 'FAIL' "$work/programs.log") differ"
  fi
  cat "$work/programs.log"
else
  skip "programs: no $deps/programs (run bench/cuda/prepare.py first)"
fi

# 6. The GEMM benchmark.
if timeout "$step_timeout" "$bin/par-cuda-gemm-bench" >"$work/gemm.log" 2>&1; then
  pass "GEMM benchmark"
else
  fail "GEMM benchmark: $(tail -2 "$work/gemm.log" | tr '\n' ' ')"
fi
cat "$work/gemm.log"

# 7. GPT-2 124M's step against PyTorch eager (capped: ops that still run
# on the host make par's step slow).
if [ -f "$deps/programs-bench/gpt2-124m.parprog" ]; then
  if timeout "${PAR_GPT2_TIMEOUT:-300}" python3 "$root/bench/cuda/gpt2_step.py" \
       --par-run "$bin/par-run" --program "$deps/programs-bench/gpt2-124m.parprog" \
       >"$work/gpt2.log" 2>&1; then
    pass "GPT-2 124M step: $(grep 'par / PyTorch' "$work/gpt2.log" || echo 'no ratio')"
  else
    fail "GPT-2 124M step: $(tail -2 "$work/gpt2.log" | tr '\n' ' ')"
  fi
  cat "$work/gpt2.log"
else
  skip "GPT-2 124M step: no program (run bench/cuda/prepare.py first)"
fi

printf '%s\n' "" "== report: par CUDA backend on $device ==" "${report[@]}"
[ "$failures" -eq 0 ]
