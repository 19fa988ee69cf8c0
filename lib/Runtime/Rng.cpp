//===- Rng.cpp - Counter-based random numbers -----------------------------===//

#include "par/Runtime/Rng.h"

#include <cmath>

namespace par::rt {

/// The splitmix64 finalizer: a bijection on 64 bits with full avalanche.
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t randomBits(uint64_t seed, uint64_t stream, uint64_t index) {
  // Chained through the mixer so (seed, stream) pairs do not collide
  // linearly and consecutive indices give independent-looking outputs.
  uint64_t key = mix(mix(seed + 0x9e3779b97f4a7c15ULL) ^ stream);
  return mix(key + index * 0x9e3779b97f4a7c15ULL);
}

double randomUniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return double(randomBits(seed, stream, index) >> 11) * 0x1.0p-53;
}

double randomNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = randomUniform(seed, stream, 2 * index);
  double u2 = randomUniform(seed, stream, 2 * index + 1);
  // 1 - u1 lies in (0, 1], so the log is finite.
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t streamOf(const std::string &name) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

} // namespace par::rt
