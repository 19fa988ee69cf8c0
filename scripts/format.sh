#!/usr/bin/env bash
# Formats the C++ sources with the root .clang-format (LLVM style). The
# generated op catalogue is left as scripts/gen-catalogue.py writes it.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cpp' '*.h' | grep -v '^include/par/Catalogue/OpCatalogue.h$' |
  xargs clang-format -i
