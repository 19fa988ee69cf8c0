//===- ProgramTarget.cpp - par-run's program loader on fuzzed input -------===//
//
// Loads the input as a program file, then asks what par-run asks of a
// loaded program before it runs (each rank's class, mesh coordinates and
// slices) and checks the memory plan the executor trusts: a program the
// loader accepts must keep every buffer inside its arena.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include "par/Runtime/Program.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <unistd.h>

using namespace par::rt;

namespace par::fuzz {

[[noreturn]] static void unsafe(const std::string &what) {
  std::fprintf(stderr, "par-fuzz: the loader accepted an unsafe program: %s\n",
               what.c_str());
  std::fflush(stderr);
  _exit(kExitUnsafeProgram);
}

/// What the executor relies on without checking again.
static void checkPlan(const Program &program) {
  for (size_t c = 0; c < program.rankClasses.size(); ++c) {
    const RankClass &rc = program.rankClasses[c];
    std::string where = "rank_classes[" + std::to_string(c) + "]";
    if (rc.arenaBytes < 0)
      unsafe(where + ": negative arena_bytes");
    for (size_t b = 0; b < rc.buffers.size(); ++b) {
      const Buffer &buf = rc.buffers[b];
      int64_t end = 0;
      if (buf.offset < 0 || buf.bytes < 0 ||
          __builtin_add_overflow(buf.offset, buf.bytes, &end) ||
          end > rc.arenaBytes)
        unsafe(where + ".buffers[" + std::to_string(b) + "]: offset " +
               std::to_string(buf.offset) + " + " + std::to_string(buf.bytes) +
               " bytes is outside the arena of " +
               std::to_string(rc.arenaBytes) + " bytes");
      int64_t elements = 1;
      for (int64_t d : buf.shape)
        if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
          unsafe(where + ".buffers[" + std::to_string(b) +
                 "]: shape overflows");
      int64_t bytes = 0;
      if (__builtin_mul_overflow(elements, int64_t(dtypeBytes(buf.dtype)),
                                 &bytes) ||
          bytes > buf.bytes)
        unsafe(where + ".buffers[" + std::to_string(b) + "]: its shape needs " +
               "more than its " + std::to_string(buf.bytes) + " bytes");
    }
    auto checkId = [&](int64_t id, const std::string &what) {
      if (id < -1 || id >= int64_t(rc.buffers.size()))
        unsafe(where + ": " + what + " names buffer " + std::to_string(id));
    };
    if (rc.inputBuffers.size() != program.inputs.size() ||
        rc.outputBuffers.size() != program.outputs.size())
      unsafe(where + ": input or output bindings missing");
    for (int64_t id : rc.inputBuffers)
      checkId(id, "an input");
    for (int64_t id : rc.outputBuffers)
      checkId(id, "an output");
    for (size_t i = 0; i < rc.instructions.size(); ++i)
      for (const auto *ids :
           {&rc.instructions[i].operands, &rc.instructions[i].results})
        for (int64_t id : *ids)
          if (id < 0 || id >= int64_t(rc.buffers.size()))
            unsafe(where + ".instructions[" + std::to_string(i) +
                   "] names buffer " + std::to_string(id));
  }
}

const char *volatile currentStage = "start";

Outcome runProgramInput(const uint8_t *data, size_t size) {
  currentStage = "the program loader";
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    Program program = parseProgram(text, "fuzz.json");
    checkPlan(program);
    // What par-run computes next, for the first few ranks.
    int64_t ranks = std::min<int64_t>(program.numRanks, 16);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      program.classOf(rank);
      meshCoords(program, rank);
      for (const InputSpec &in : program.inputs) {
        Shape offsets, local;
        localSlice(program, in.globalShape, in.sharding, rank, offsets, local);
        localBufferShape(program, in.globalShape, in.sharding);
      }
    }
    return Outcome::Accepted;
  } catch (const ProgramError &) {
    return Outcome::Rejected;
  } catch (const std::bad_alloc &) {
    // Not a clean error: an input made the loader ask for too much.
    throw;
  } catch (const std::exception &e) {
    return Outcome::OtherError;
  }
}

bool programLoads(const std::string &text, std::string &error) {
  try {
    Program program = parseProgram(text, "emitted.json");
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

} // namespace par::fuzz
