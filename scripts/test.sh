#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test suite: lit (check-par),
# gtest (ctest) and pytest. Exits non-zero when any suite fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PAR_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh" || exit 1
"$root/scripts/build.sh" || exit 1

passed=0
failed=0
run_suite() {
  local name="$1"
  shift
  echo
  echo "== $name =="
  if "$@"; then
    passed=$((passed + 1))
    echo "== $name: passed =="
  else
    failed=$((failed + 1))
    echo "== $name: FAILED =="
  fi
}

run_suite "lit (check-par)" cmake --build "$build" --target check-par
run_suite "gtest (ctest)" ctest --test-dir "$build" --output-on-failure
run_suite "pytest" env PAR_BUILD_DIR="$build" python3 -m pytest -q "$root/python_frontend/tests"

echo
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
