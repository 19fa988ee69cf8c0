//===- par-check-program.cpp - Validates program files --------------------===//
//
// Runs par-run's program validation (and nothing else) on each file given:
// the check par-opt's emitter runs before writing a program, usable on
// programs written by any tool. Prints "FILE: ok" or the loader's error for
// each; exits 1 when any file is rejected.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Program.h"

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(argc < 2 ? stderr : stdout,
                 "usage: par-check-program PROGRAM...\n"
                 "Checks each program file as par-run loads it.\n");
    return argc < 2 ? 2 : 0;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      par::rt::Program program = par::rt::loadProgram(argv[i]);
      std::printf("%s: ok (%zu inputs, %zu outputs, %lld ranks)\n", argv[i],
                  program.inputs.size(), program.outputs.size(),
                  (long long)program.numRanks);
    } catch (const par::rt::ProgramError &e) {
      std::fprintf(stderr, "par-check-program: error: %s\n", e.what());
      status = 1;
    }
  }
  return status;
}
