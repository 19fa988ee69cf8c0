//===- ProgramFuzzer.cpp - libFuzzer target: par-run's program loader -----===//
//
//   par-fuzz-program test/fuzz/corpus/program -rss_limit_mb=2048
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  par::fuzz::runProgramInput(data, size);
  return 0;
}
