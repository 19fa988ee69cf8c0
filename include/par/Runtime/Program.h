//===- Program.h - The runtime program: what par-opt emits ------*- C++ -*-===//
//
// The in-memory form of a program file (docs/program-format.md), the only
// contract between the compiler and par-run. loadProgram validates every
// field before anything runs and throws ProgramError naming the file and
// the field ("prog.json: rank_classes[0].instructions[4] (dot at
// mlp.mlir:9:8): attrs.lhs_contract must be a list of integers").
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_PROGRAM_H
#define PAR_RUNTIME_PROGRAM_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/DType.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

class ProgramError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The program format version this runtime reads and the compiler writes.
constexpr int64_t kProgramVersion = 1;

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

/// How a global tensor is split: `dims[d]` lists the mesh axes dimension d
/// is split over (major first); `partial` the axes its per-device values are
/// partial sums over.
struct ShardingSpec {
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> partial;
};

enum class InputRole { Param, Data };
enum class DataKind { Tokens, Targets, Random };

struct InitSpec {
  enum Kind { Normal, Uniform, Zeros, Ones, Constant } kind = Normal;
  double a = 0.02; // normal: std; uniform: low; constant: value
  double b = 0.0;  // uniform: high
};

struct InputSpec {
  std::string name;
  InputRole role = InputRole::Param;
  DType dtype = DType::F32;
  Shape globalShape;
  ShardingSpec sharding;
  InitSpec init;                    // params
  DataKind data = DataKind::Random; // data inputs
  int64_t vocab = 256;              // tokens / targets
};

struct OutputSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape globalShape;
  ShardingSpec sharding;
  int64_t updates = -1; // index of the input this output replaces after a step
};

struct Buffer {
  std::string name;
  DType dtype = DType::F32;
  Shape shape; // per-device
  int64_t offset = 0;
  int64_t bytes = 0;
  int64_t firstUse = 0; // instruction indices, inclusive
  int64_t lastUse = 0;
  /// The buffer whose memory this one takes over (same offset and size)
  /// when it is first written: a parameter updated in place. -1: none.
  int64_t reuses = -1;
};

// The op catalogue (opcodes, attribute schema, traits) is generated from the
// dialect's ODS definitions: see include/par/Catalogue/OpCatalogue.h.
using catalogue::Attrs;
using catalogue::OpCode;
using catalogue::opName;
using catalogue::OpSpec;

/// Whether `op` exchanges data between the devices of a group.
inline bool isCollective(OpCode op) { return catalogue::spec(op).communicates; }
/// Whether the kernels of `op` may write a result over an operand: they read
/// each element before writing the same element.
inline bool writesInPlace(OpCode op) { return catalogue::spec(op).inPlace; }

struct Instruction {
  OpCode op = OpCode::Add;
  std::vector<int64_t> operands; // buffer ids
  std::vector<int64_t> results;
  Attrs attrs;
  std::string loc;
};

/// Instruction stream of the ranks that run the same code (every rank in
/// an SPMD program; pipeline stages get a class each).
struct RankClass {
  std::vector<int64_t> ranks;
  std::vector<Buffer> buffers;
  int64_t arenaBytes = 0;    // planned peak: the arena each rank allocates
  int64_t peakLiveBytes = 0; // most bytes live at once (<= arenaBytes)
  std::vector<int64_t> inputBuffers;  // per program input (-1: not here)
  std::vector<int64_t> outputBuffers; // per program output (-1: not here)
  std::vector<Instruction> instructions;
};

struct Program {
  std::string path; // where it was loaded from, for messages
  std::string function;
  std::vector<MeshAxis> mesh;
  int64_t numRanks = 1;
  std::vector<std::vector<std::string>> groups; // communicator groups (axes)
  int64_t alignment = 64;
  /// The plan keeps a collective's operand until its result is first read,
  /// so a backend may run collectives asynchronously
  /// (memory.async_collectives).
  bool asyncCollectives = false;
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<RankClass> rankClasses;

  /// The class rank `rank` runs; throws when none lists it.
  const RankClass &classOf(int64_t rank) const;
  int64_t axisIndex(const std::string &axis) const;
};

/// Reads and validates a program file.
Program loadProgram(const std::string &path);
/// Validates a program given as JSON text (`path` only names it in errors).
Program parseProgram(const std::string &text, const std::string &path);

/// Mesh coordinates of `rank` (row-major over the mesh axes, first major).
std::vector<int64_t> meshCoords(const Program &program, int64_t rank);
/// Index of the device at `coords` within its group over `axes` (row-major
/// over `axes`, first major), and the group's size.
int64_t groupIndex(const Program &program, const std::vector<int64_t> &coords,
                   const std::vector<std::string> &axes);
int64_t groupSize(const Program &program, const std::vector<std::string> &axes);

/// The shape of every device's buffer for a global tensor under `sharding`:
/// a dim split n ways holds ceil(size / n) elements (an uneven split is
/// padded at the end of each piece).
Shape localBufferShape(const Program &program, const Shape &globalShape,
                       const ShardingSpec &sharding);
/// The slice of a global tensor `rank` holds under `sharding`: its offsets
/// (piece index times the buffer extent) and the extent of real elements per
/// dimension, which is less than the buffer's (down to 0) in the last pieces
/// of an unevenly split dim.
void localSlice(const Program &program, const Shape &globalShape,
                const ShardingSpec &sharding, int64_t rank, Shape &offsets,
                Shape &shape);

} // namespace par::rt

#endif // PAR_RUNTIME_PROGRAM_H
