//===- Rng.h - Counter-based random numbers ---------------------*- C++ -*-===//
//
// Every random number is a pure function of (seed, stream, index): no state
// is carried between draws, so a rank can draw element i of a global tensor
// without drawing the elements before it. Parameters use the hash of their
// name as stream and the global element index as index, so any sharding on
// any rank count initializes the same global tensor.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_RNG_H
#define PAR_RUNTIME_RNG_H

#include <cstdint>
#include <string>

namespace par::rt {

/// 64 well-mixed bits for (seed, stream, index).
uint64_t randomBits(uint64_t seed, uint64_t stream, uint64_t index);
/// Uniform in [0, 1) with 53 random bits.
double randomUniform(uint64_t seed, uint64_t stream, uint64_t index);
/// Standard normal (Box-Muller on two counters derived from `index`).
double randomNormal(uint64_t seed, uint64_t stream, uint64_t index);
/// Stable 64-bit hash of a name (FNV-1a), used as a stream id.
uint64_t streamOf(const std::string &name);

} // namespace par::rt

#endif // PAR_RUNTIME_RNG_H
