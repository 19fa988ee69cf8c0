//===- Program.h - The runtime program: what par-opt emits ------*- C++ -*-===//
//
// The in-memory form of a program file (docs/program-format.md), the only
// contract between the compiler and par-run. loadProgram validates every
// field before anything runs and throws ProgramError naming the file and
// the field ("prog.json: rank_classes[0].instructions[4] (dot at
// mlp.mlir:9:8): attrs.lhs_contract must be a list of integers").
// par-opt's emitter runs the same validation (checkProgram) on every program
// before writing it, so what it writes is what par-run accepts.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_PROGRAM_H
#define PAR_RUNTIME_PROGRAM_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/DType.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

/// The field of a program that breaks the format: its path
/// ("rank_classes[0].buffers[3].offset") and the record holding it, for the
/// records the compiler writes one per source entity (an input per function
/// argument, an output per result, a buffer per value, an instruction per
/// op), so that par-opt reports the error at that entity.
struct ProgramField {
  enum class Record { None, Mesh, Input, Output, Buffer, Instruction };
  Record record = Record::None;
  /// Index of the input, output, buffer or instruction (-1 for None, Mesh).
  int64_t index = -1;
  std::string path;
};

/// Why a program is rejected: the field and what is wrong with it.
struct ProgramIssue {
  std::string file;
  ProgramField field;
  std::string message;
  /// "FILE: PATH: MESSAGE", the loader's error text.
  std::string text() const;
};

/// The record and index a field path names ("inputs[2].dtype" is input 2,
/// "rank_classes[0].instructions[7] (dot).attrs" instruction 7).
ProgramField locateField(const std::string &path);

class ProgramError : public std::runtime_error {
public:
  explicit ProgramError(const std::string &what)
      : std::runtime_error(what), issue_{"", {}, what} {}
  explicit ProgramError(ProgramIssue issue)
      : std::runtime_error(issue.text()), issue_(std::move(issue)) {}
  const ProgramIssue &issue() const { return issue_; }

private:
  ProgramIssue issue_;
};

/// The program format version this runtime reads and the compiler writes.
constexpr int64_t kProgramVersion = 1;

/// Limits of what a program may ask for, checked by the loader (and so by
/// the compiler before it writes a program).
/// Devices in the mesh (ranks of one run).
constexpr int64_t kMaxDevices = int64_t(1) << 20;
/// Elements of one per-device buffer.
constexpr int64_t kMaxBufferElements = int64_t(1) << 40;
/// Bytes of one rank's arena.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 48;
/// The arena alignment: a power of two up to this.
constexpr int64_t kMaxAlignment = int64_t(1) << 20;

/// Values of one fused group: its operands and the steps of its body.
constexpr int64_t kMaxFusedValues = 64;

/// Whether `op` may be a step of a fused group: an element-wise op, a
/// broadcast (of an operand or a constant) or a splat constant.
inline bool fusibleStep(catalogue::OpCode op) {
  return catalogue::spec(op).elementwise ||
         op == catalogue::OpCode::Broadcast ||
         op == catalogue::OpCode::Constant;
}
/// Whether a fused group's steps end in a reduce (the group's shape is
/// then what the reduce reads, and it may keep that value as a second
/// result).
inline bool endsInReduce(const std::vector<catalogue::FusedStep> &steps) {
  return !steps.empty() && steps.back().op == catalogue::OpCode::Reduce;
}
/// Whether `op` normalizes rows (layer_norm, rms_norm): a fused group may
/// end in one, normalizing the rows its element-wise steps compute.
inline bool isNormStep(catalogue::OpCode op) {
  return op == catalogue::OpCode::LayerNorm || op == catalogue::OpCode::RmsNorm;
}
/// Whether a fused group's steps end in a normalization.
inline bool endsInNorm(const std::vector<catalogue::FusedStep> &steps) {
  return !steps.empty() && isNormStep(steps.back().op);
}
/// Whether a fused group ends in a step that reads the value the steps
/// before it compute, many elements for each it writes (a reduce or a
/// normalization): the group may keep that value as a second result, and
/// its result never takes an operand's memory.
inline bool endsInRowStep(const std::vector<catalogue::FusedStep> &steps) {
  return endsInReduce(steps) || endsInNorm(steps);
}
/// Whether a fused group starts with a dot of two of its operands (its
/// producer): the GEMM writes the result, of the dot's type, and the
/// element-wise steps after it run over the result in place (the dot's
/// value, step 0, is read from the result at each element). Its result
/// never takes an operand's memory.
inline bool startsWithDot(const std::vector<catalogue::FusedStep> &steps) {
  return !steps.empty() && steps.front().op == catalogue::OpCode::Dot;
}
/// Whether element-wise `op` is defined on integer elements (the unary
/// kernels refuse the transcendental ones on integers).
bool fusibleOnIntegers(catalogue::OpCode op);

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
  /// A flat (rank-1) tensor's `view`: the shape it is a row-major view of,
  /// which initialization, checkpoints and dumps see.
  std::optional<Shape> view;
  /// The shape a checkpoint holds: the view, else the global shape.
  const Shape &savedShape() const { return view ? *view : globalShape; }
};

struct OutputSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape globalShape;
  ShardingSpec sharding;
  int64_t updates = -1; // index of the input this output replaces after a step
  std::optional<Shape> view; // as InputSpec::view
  const Shape &savedShape() const { return view ? *view : globalShape; }
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
  /// The pipeline slot the instruction belongs to ("F3", "B3", "W3" for
  /// micro-batch 3, ".cK" for virtual stage K); empty outside slots.
  std::string slot;
  /// On the first of `batch` consecutive instructions of one optimizer op
  /// (adamw, sgd) that run as one launch (docs/program-format.md,
  /// "Batched updates"); 1 otherwise.
  int64_t batch = 1;
};

/// Whether instructions of `op` may run as one batch (optimizer updates).
inline bool batchable(OpCode op) {
  return op == OpCode::Adamw || op == OpCode::Sgd;
}

/// What a batch of consecutive instructions (`batch`) must not do: a
/// member write memory of a buffer an earlier member touched that died
/// inside the batch (the plan let the later member reuse it, which is
/// sound one after the other, not at once), or read what an earlier member
/// writes. Members are added in order; O(log n) a buffer.
class BatchConflicts {
public:
  /// The buffer of the earlier member whose memory [offset, offset + bytes)
  /// overlaps, or -1.
  int64_t deadOverlap(int64_t offset, int64_t bytes) const {
    auto it = dead.upper_bound(offset);
    if (it != dead.begin() && std::prev(it)->second.end > offset)
      return std::prev(it)->second.id;
    if (it != dead.end() && it->first < offset + bytes)
      return it->second.id;
    return -1;
  }
  /// Whether buffer `id` is written by an earlier member.
  bool written(int64_t id) const { return writes.count(id) != 0; }
  /// After a member: what it wrote, and what of its buffers died with it
  /// (those ranges are disjoint once no member overlapped them).
  void wrote(int64_t id) { writes.insert(id); }
  void died(int64_t id, int64_t offset, int64_t bytes) {
    if (bytes > 0)
      dead[offset] = {offset + bytes, id};
  }

private:
  struct Range {
    int64_t end, id;
  };
  std::map<int64_t, Range> dead;
  std::set<int64_t> writes;
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
  /// A pipelined program's schedule, as the compiler recorded it.
  struct Pipeline {
    std::string axis, schedule;
    int64_t stages = 0, microbatches = 0, virtualStages = 1;
    double predictedBubble = 0;
  };
  std::optional<Pipeline> pipeline;

  /// The class rank `rank` runs; throws when none lists it.
  const RankClass &classOf(int64_t rank) const;
  int64_t axisIndex(const std::string &axis) const;
};

/// Reads and validates a program file.
Program loadProgram(const std::string &path);
/// Validates a program given as JSON text (`path` only names it in errors).
Program parseProgram(const std::string &text, const std::string &path);
/// Validates a program given as its parsed JSON document.
Program programOf(const nlohmann::json &doc, const std::string &path);
/// parseProgram without exceptions, for callers built without them (the
/// compiler): the issue that makes the loader reject `text`, if any.
std::optional<ProgramIssue> checkProgram(const std::string &text,
                                         const std::string &path);
/// The same for the document the text is written from (the emitter checks
/// what it builds without writing and parsing it again).
std::optional<ProgramIssue> checkProgramDocument(const nlohmann::json &doc,
                                         const std::string &path);

/// Mesh coordinates of `rank` (row-major over the mesh axes, first major).
std::vector<int64_t> meshCoords(const Program &program, int64_t rank);
/// The rank at `coords` (the inverse of meshCoords).
int64_t rankAt(const Program &program, const std::vector<int64_t> &coords);
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
