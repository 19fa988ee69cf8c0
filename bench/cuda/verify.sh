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
# With `prepare.py --prebuild`, deps/prebuilt holds par-run and the tests
# built here for sm_90 without MPI or OpenBLAS; they are used where they
# load and the GPU is of that architecture (the build step is then
# skipped), else the tree is built there for the GPU's architecture.
# PAR_VERIFY_BUDGET (seconds) bounds the whole run: a step that would
# outlast it is skipped, so the report always comes. PAR_VERIFY_SKIP
# skips the checks it names by a word of their name ("GEMM racecheck").
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
#   4. every program of deps/programs (the integration models, GPT-tiny's
#      training step) on both backends: outputs and losses compared;
#   5. the GEMM benchmark: par's dot (cuBLASLt) against cuBLAS's own GEMM
#      on GPT-2 124M's and a 4096-wide layer's shapes; the attention
#      benchmark (par-cuda-attention-bench: the tensor-core kernels, the
#      f32 tiled ones with PAR_CUDA_ATTENTION=simt, and PyTorch's
#      scaled_dot_product_attention, at GPT-2's shape); NVRTC's time to
#      compile GPT-2's fused groups (par-fused-jit-bench);
#   6. GPT-2 124M's training step (bf16, 8 x 1024) against PyTorch eager
#      (and torch.compile with PAR_GPT2_COMPILE=1), traced op by op; the
#      fused step with its groups compiled (NVRTC) and interpreted
#      (PAR_CUDA_JIT=0);
#   7. compute-sanitizer memcheck and racecheck over the CUDA conformance
#      cases, where compute-sanitizer is installed.
# Each check is capped at PAR_STEP_TIMEOUT seconds (default 240).
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
deadline=$((SECONDS + ${PAR_VERIFY_BUDGET:-100000}))
# The timeout of a step: its own cap, or what is left of the budget (less
# a margin for the report); 0 when too little is left to start it.
cap() {
  local left=$((deadline - SECONDS - 20)) want="${1:-$step_timeout}"
  [ "$left" -lt 15 ] && { echo 0; return; }
  [ "$left" -lt "$want" ] && want="$left"
  echo "$want"
}
# cuBLASLt and NCCL from the toolkit or the nvidia wheels, for carried
# binaries too.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import nvidia, os; [print(os.path.join(p, d, "lib")) for p in nvidia.__path__ for d in os.listdir(p)]' 2>/dev/null); do
  [ -d "$dir" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done

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

# 2. The runtime-only build: the carried one where it loads here.
prebuilt="${PAR_CUDA_PREBUILT:-$deps/prebuilt}"
# The carried build runs only on the architecture it was compiled for.
gpu_arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')"
carried_arch="$(cat "$prebuilt/arch" 2>/dev/null)"
use_carried=no
if [ -n "$gpu_arch" ] && [ -n "$carried_arch" ] && [ "$gpu_arch" != "$carried_arch" ]; then
  note "carried build is for sm_$carried_arch, this GPU is sm_$gpu_arch: building here"
  if [ -z "${PAR_CUDA_ARCH:-}" ]; then
    cmake_args=("${cmake_args[@]/-DCMAKE_CUDA_ARCHITECTURES=*/-DCMAKE_CUDA_ARCHITECTURES=$gpu_arch}")
  fi
elif [ -x "$prebuilt/bin/par-run" ] && "$prebuilt/bin/par-run" --help >/dev/null 2>&1; then
  use_carried=yes
fi
if [ "$use_carried" = yes ]; then
  pass "runtime-only build: carried ($(cat "$prebuilt/built-with" 2>/dev/null))"
  bin="$prebuilt/bin"
  tests="$prebuilt/unittests"
else
  if [ -x "$prebuilt/bin/par-run" ] && [ -z "$carried_arch" -o "$gpu_arch" = "$carried_arch" ]; then
    note "carried par-run does not load here: $("$prebuilt/bin/par-run" --help 2>&1 | head -2 | tr '\n' ' ')"
    ldd "$prebuilt/bin/par-run" 2>&1 | grep 'not found'
  fi
  if cmake -S "$root" -B "$build" "${cmake_args[@]}" >"$build.configure.log" 2>&1 &&
     cmake --build "$build" -j "$jobs" --target par-run ParRuntimeConformanceTests \
       ParRuntimeKernelTests ParRuntimeCudaLaunchTests par-cuda-gemm-bench \
       par-fused-jit-bench par-cuda-attention-bench \
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
  bin="$build/bin"
  tests="$build/unittests"
fi
mkdir -p "$work"

# Runs a check under its cap: `checked NAME CAP LOG command...`; its exit
# status, or 124 (and a "skipped" line) when the budget is spent or
# PAR_VERIFY_SKIP names the check (a word of its name, e.g. "GEMM").
checked() {
  local name="$1" t; t="$(cap "$2")"; local log="$3"; shift 3
  local word
  # A skipped check leaves no log: an earlier run's must not be reported.
  for word in ${PAR_VERIFY_SKIP:-}; do
    case " $name " in
      *" $word "*) skip "$name: PAR_VERIFY_SKIP"; rm -f "$log"; return 124 ;;
    esac
  done
  if [ "$t" = 0 ]; then
    rm -f "$log"
    skip "$name: the time budget is spent"
    return 124
  fi
  timeout "$t" "$@" >"$log" 2>&1
  local code=$?
  [ "$code" = 124 ] && echo "verify.sh: stopped after its cap of ${t}s" >>"$log"
  return "$code"
}

# 3. Conformance and the host-side tests.
for t in ParRuntimeConformanceTests ParRuntimeCudaLaunchTests ParRuntimeKernelTests; do
  log="$work/$t.log"
  checked "$t" "$step_timeout" "$log" "$tests/$t"
  code=$?
  [ "$code" = 124 ] && [ ! -s "$log" ] && continue
  ran="$(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$log")"
  skipped="$(grep -o '^\[  SKIPPED \] [0-9]* test' "$log" | grep -o '[0-9]*' || echo 0)"
  if [ "$code" = 0 ]; then
    if [ "$has_gpu" = yes ] && [ "$skipped" != 0 ]; then
      fail "$t: $skipped tests skipped with a GPU present: $(grep -m1 'Skipped' -A1 "$log" | tail -1)"
    else
      pass "$t ($ran; $skipped skipped)"
    fi
  else
    failed="$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | sed 's/^\[  FAILED  \] //; s/ (.*//' | tr '\n' ' ')"
    fail "$t (exit $code): ${failed:-$(tail -3 "$log" | tr '\n' ' ')}"
  fi
done

# 4. Programs on both backends.
if [ -d "$deps/programs" ]; then
  checked "programs" "$step_timeout" "$work/programs.log" \
    python3 "$root/bench/cuda/compare_backends.py" --par-run "$bin/par-run" \
      --programs "$deps/programs" --work "$work/programs"
  code=$?
  if [ "$code" = 0 ]; then
    pass "programs on cuda = cpu ($(grep -c ' ok ' "$work/programs.log") programs)"
  elif [ -s "$work/programs.log" ]; then
    fail "programs on cuda vs cpu (exit $code): $(grep -c 'FAIL' "$work/programs.log") differ, $(grep -c ' ok ' "$work/programs.log") agree"
  fi
  cat "$work/programs.log" 2>/dev/null
else
  skip "programs: no $deps/programs (run bench/cuda/prepare.py first)"
fi

# 5. The GEMM benchmark.
if checked "GEMM benchmark" "$step_timeout" "$work/gemm.log" "$bin/par-cuda-gemm-bench"; then
  pass "GEMM benchmark"
elif [ -s "$work/gemm.log" ]; then
  fail "GEMM benchmark: $(tail -2 "$work/gemm.log" | tr '\n' ' ')"
fi
cat "$work/gemm.log" 2>/dev/null

# 5a. Attention at GPT-2's shape: the tensor-core kernels, the f32 tiled
# ones, and PyTorch's scaled_dot_product_attention where PyTorch is here.
# The report line: the causal forward + backward row of each table.
attention_row() {
  grep 'causal | forward + backward' "$1" | awk -F'|' '{
    gsub(/^ +| +$/, "", $4); gsub(/^ +| +$/, "", $5)
    rate = $5; sub(/ .*/, "", rate); rest = $5; sub(/^[^ ]*/, "", rest)
    printf "causal forward + backward %s ms, %s TFLOP/s%s", $4, rate, rest }'
}
if [ -x "$bin/par-cuda-attention-bench" ]; then
  for kernels in default simt; do
    log="$work/attention-$kernels.log"
    label="attention benchmark"
    setting=(-u PAR_CUDA_ATTENTION)
    if [ "$kernels" = simt ]; then
      label="attention benchmark, f32 tiled kernels"
      setting=(PAR_CUDA_ATTENTION=simt)
    fi
    if checked "$label" 120 "$log" env "${setting[@]}" \
         "$bin/par-cuda-attention-bench"; then
      pass "$label: $(attention_row "$log")"
    elif [ -s "$log" ]; then
      fail "$label: $(tail -2 "$log" | tr '\n' ' ')"
    fi
    cat "$log" 2>/dev/null
  done
  checked "attention benchmark torch" 120 "$work/attention-torch.log" \
    python3 "$root/bench/cuda/attention_torch.py"
  code=$?
  if [ "$code" = 0 ]; then
    pass "attention benchmark, PyTorch SDPA: $(attention_row "$work/attention-torch.log")"
  elif [ "$code" = 3 ]; then
    skip "attention benchmark, PyTorch SDPA: $(tail -1 "$work/attention-torch.log")"
  elif [ -s "$work/attention-torch.log" ]; then
    fail "attention benchmark, PyTorch SDPA (exit $code): $(tail -2 "$work/attention-torch.log" | tr '\n' ' ')"
  fi
  cat "$work/attention-torch.log" 2>/dev/null
else
  skip "attention benchmark: no $bin/par-cuda-attention-bench (an older carried build?)"
fi

# 5b. What compiling GPT-2's fused groups costs on this machine's NVRTC
# (the time a fused run's first step adds).
if [ -x "$bin/par-fused-jit-bench" ] && [ -f "$deps/programs-bench/gpt2-124m-fused.parprog" ]; then
  if checked "fused-group compile" 120 "$work/fused-jit.log" \
       "$bin/par-fused-jit-bench" --arch "${gpu_arch:-90}" \
       "$deps/programs-bench/gpt2-124m-fused.parprog"; then
    pass "fused-group compile: $(awk -F'|' 'END { gsub(/ /, ""); printf "GPT-2 124M, %s of %s groups compiled to %s kernels in %s s", $4, $3, $5, $7 }' "$work/fused-jit.log")"
  elif [ -s "$work/fused-jit.log" ]; then
    fail "fused-group compile: $(tail -2 "$work/fused-jit.log" | tr '\n' ' ')"
  fi
  cat "$work/fused-jit.log" 2>/dev/null
fi

# 6. GPT-2 124M's step against PyTorch eager (capped: ops that still run
# on the host make par's step slow).
if [ -f "$deps/programs-bench/gpt2-124m.parprog" ]; then
  if checked "GPT-2 124M step" "${PAR_GPT2_TIMEOUT:-300}" "$work/gpt2.log" \
       python3 "$root/bench/cuda/gpt2_step.py" \
       --par-run "$bin/par-run" --program "$deps/programs-bench/gpt2-124m.parprog" \
       --program "$deps/programs-bench/gpt2-124m-fused.parprog" \
       --trace "$work/gpt2-trace" ${PAR_GPT2_COMPILE:+--compile}; then
    pass "GPT-2 124M step: $(grep 'par / PyTorch' "$work/gpt2.log" || echo 'no ratio')"
  elif [ -s "$work/gpt2.log" ]; then
    fail "GPT-2 124M step: $(tail -2 "$work/gpt2.log" | tr '\n' ' ')"
  fi
  cat "$work/gpt2.log" 2>/dev/null
else
  skip "GPT-2 124M step: no program (run bench/cuda/prepare.py first)"
fi

# 7. compute-sanitizer over the CUDA conformance cases (last: the slowest).
sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)"
if [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    # Racecheck watches shared memory: the staged GEMMs add only large
    # cuBLASLt products (slow under it) and none of our kernels.
    filter='*cuda*'
    [ "$tool" = racecheck ] && filter='*cuda*:-*StagedSixteenBitGemms*'
    if checked "compute-sanitizer $tool" "$step_timeout" "$work/sanitizer-$tool.log" \
         "$sanitizer" --tool "$tool" --error-exitcode 9 \
         "$tests/ParRuntimeConformanceTests" --gtest_filter="$filter"; then
      pass "compute-sanitizer $tool"
    elif [ -s "$work/sanitizer-$tool.log" ]; then
      fail "compute-sanitizer $tool: $(grep -m3 -E 'ERROR|Invalid|hazard|stopped after' "$work/sanitizer-$tool.log" | tr '\n' ' ')"
    fi
  done
else
  skip "compute-sanitizer: not installed"
fi

printf '%s\n' "" "== report: par CUDA backend on $device ==" "${report[@]}"
[ "$failures" -eq 0 ]
