//===- MlirFuzzer.cpp - libFuzzer target: par-opt's parse/verify/lower ----===//
//
//   par-fuzz-mlir test/fuzz/corpus/mlir -rss_limit_mb=2048 -timeout=10
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  par::fuzz::initMlirTarget();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  par::fuzz::runMlirInput(data, size);
  return 0;
}
