#!/usr/bin/env bash
# Installs everything par needs on a Debian 12 machine. Idempotent: when all
# packages are present it only checks and returns in a second or two.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libzstd-dev
  nlohmann-json3-dev libopenmpi-dev openmpi-bin libopenblas-dev
  coinor-libcbc-dev googletest
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: Debian packages present"
fi

# Python tools for the tests and the frontend.
if ! python3 -c "import numpy, pytest" 2>/dev/null; then
  echo "install-deps: installing numpy and pytest"
  if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip install --quiet numpy pytest
  else
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-numpy python3-pytest
  fi
else
  echo "install-deps: numpy and pytest present"
fi

# The Python frontend, editable (`import par` anywhere). Scripts in examples/
# fall back to the checkout when this is not possible (no pip, or a system
# Python that refuses packages), so a failure here is only reported.
if ! python3 -c "import par, sys; sys.exit(0 if 'python_frontend' in par.__file__ else 1)" 2>/dev/null; then
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  # compat mode: a path entry (not an import hook), so a checkout's own
  # tests and scripts, which put their python_frontend first, import it.
  compat=(--quiet --no-deps --config-settings editable_mode=compat -e "$root/python_frontend")
  if python3 -m pip install "${compat[@]}" 2>/dev/null ||
     python3 -m pip install --no-build-isolation "${compat[@]}" 2>/dev/null; then
    echo "install-deps: installed the par Python frontend (editable)"
  else
    echo "install-deps: note: pip could not install python_frontend; scripts use the checkout"
  fi
else
  echo "install-deps: par Python frontend present"
fi

for tool in /usr/lib/llvm-22/bin/lit /usr/lib/llvm-22/bin/FileCheck /usr/lib/llvm-22/bin/mlir-tblgen; do
  if [ ! -x "$tool" ]; then
    echo "install-deps: error: $tool is missing after installation" >&2
    exit 1
  fi
done
