//===- FuzzTargets.h - What the fuzzers run on one input --------*- C++ -*-===//
//
// Two entry points shared by the libFuzzer targets and par-fuzz-driver:
// par-run's program loader on program-file text, and par-opt's parse,
// verify, partition and emit path on MLIR text. Both return normally for
// any input they reject with a clean error; what is not clean (a crash, an
// exhausted memory cap, a hang) is the caller's to catch. A few outcomes
// that are bugs without being crashes end the process with a code of their
// own (below).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TEST_FUZZ_FUZZTARGETS_H
#define PAR_TEST_FUZZ_FUZZTARGETS_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace par::fuzz {

/// How an input ended, for counting.
enum class Outcome {
  Accepted,   // loaded / compiled and emitted
  Rejected,   // a clean error: ProgramError or an MLIR diagnostic
  OtherError, // another exception type escaped the loader (a poor message)
};

/// Exit codes of a child that hit a bug without crashing.
constexpr int kExitOutOfMemory = 86;   // allocation failed under the cap
constexpr int kExitFatalError = 87;    // llvm::report_fatal_error
constexpr int kExitRoundTrip = 88;     // par-opt emitted what par-run rejects
constexpr int kExitUnsafeProgram = 89; // the loader accepted a program whose
                                       // plan runs out of its arena

/// What the target is doing (the pass that runs), for a crash's report.
extern const char *volatile currentStage;

/// par-run's loader on `data` as a program file.
Outcome runProgramInput(const uint8_t *data, size_t size);

/// Sets up the MLIR context once per process (dialects, passes).
void initMlirTarget();
/// par-opt's path on `data` as MLIR text: parse, verify, then the pipeline
/// of the optional first line `// par-fuzz: mesh=SPEC passes=P1,P2`
/// (default: --par-propagate, --par-partition), --par-schedule and
/// --par-emit-program to a temporary file, whose program must then load.
Outcome runMlirInput(const uint8_t *data, size_t size);

/// Whether `text` loads as a program; `error` says why not.
bool programLoads(const std::string &text, std::string &error);

} // namespace par::fuzz

#endif // PAR_TEST_FUZZ_FUZZTARGETS_H
