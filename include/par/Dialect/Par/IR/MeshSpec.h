//===- MeshSpec.h - parsing --mesh values -----------------------*- C++ -*-===//
#ifndef PAR_DIALECT_PAR_IR_MESHSPEC_H
#define PAR_DIALECT_PAR_IR_MESHSPEC_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::par {

struct MeshAxisSpec {
  std::string name;
  int64_t size;
};

/// Parses a mesh given on the command line: positional `4x4x2` (axes named
/// by defaultAxisNames) or named `dp=2,tp=4,pp=4`. On failure returns false
/// and sets `error` to a message saying what is wrong and what is expected.
bool parseMeshSpec(const std::string &spec, std::vector<MeshAxisSpec> &axes,
                   std::string &error);

/// Whether `spec` gives positional sizes (`4x4x2`) rather than named axes.
bool isPositionalMeshSpec(const std::string &spec);

/// Names given to positional axes: x, y, z, w for up to four axes, else a0,
/// a1, ...
std::vector<std::string> defaultAxisNames(size_t numAxes);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_MESHSPEC_H
