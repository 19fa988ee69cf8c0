//===- MemoryPlan.h - Static memory plan of a function ----------*- C++ -*-===//
//
// Every tensor a function defines (its arguments, then each op result in op
// order) gets a byte range in one arena per rank, reused by tensors whose
// live ranges do not meet. The arena size is the planned peak memory of a
// rank; par-run allocates exactly that and checks what it touches.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_MEMORYPLAN_H
#define PAR_TRANSFORMS_MEMORYPLAN_H

#include "par/Dialect/Par/IR/TrainingStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

namespace mlir::par {

struct PlannedBuffer {
  Value value;
  int64_t bytes = 0;
  int64_t offset = 0;
  /// Live range in instruction indices, inclusive. Arguments are live from
  /// 0; values read after the step (returned values, parameters that persist
  /// to the next step) until `numInstructions`.
  int64_t first = 0, last = 0;
  /// A result that replaces a parameter argument (`par.updates`) takes the
  /// argument's memory when the op defining it is the argument's last
  /// reader and works element by element (or the argument is dead before
  /// it): the buffer id of that argument, else -1. The two share `offset`;
  /// the argument then lives only until that op.
  int reuses = -1;
  /// The last instruction the buffer's memory is taken: `last`, or for an
  /// argument whose memory a result reuses, that result's `last`.
  int64_t until = 0;
};

struct MemoryPlan {
  /// The function's ops in order, without the terminator.
  SmallVector<Operation *> instructions;
  SmallVector<PlannedBuffer> buffers;
  DenseMap<Value, unsigned> bufferOf;
  int64_t alignment = 64;
  /// Planned for collectives in flight (see planMemory).
  bool asyncCollectives = false;
  int64_t arenaBytes = 0;
  /// Most bytes (each buffer rounded up to the alignment) live at once: a
  /// lower bound of arenaBytes that fragmentation can exceed.
  int64_t peakLiveBytes = 0;
  /// The instruction at which that peak is first reached (instructions.size()
  /// when it is after the last one).
  int64_t peakInstruction = 0;
};

/// Bytes live (each buffer rounded up to the alignment, a reused block
/// once) at each instruction of `plan`, and after the last one.
SmallVector<int64_t> liveBytes(const MemoryPlan &plan);

/// Whether `value` is an activation of a training step: made by a forward
/// op (not a working copy or view of a parameter) and read by a later
/// phase.
bool isActivation(Value value);

/// The activation bytes of `plan` (isActivation, a reused block once) by
/// the layer of the op that makes them (par.layer), and those made
/// outside any layer.
struct LayerActivations {
  std::map<int64_t, int64_t> byLayer;
  int64_t outside = 0;
};
LayerActivations activationsByLayer(const MemoryPlan &plan);

/// The FLOPs (ShardingRuleOpInterface::getWork) of the instructions of
/// `plan` marked par.recomputed, by layer (ops outside layers under -1).
std::map<int64_t, double> recomputedFlops(const MemoryPlan &plan);

/// The training-step phase (TrainingStep.h) at the peak of `plan`: the
/// phase of the instruction where the most bytes are live, if it is marked.
std::optional<Phase> peakPhase(const MemoryPlan &plan);

/// Plans `func`. `persistent[i]` keeps argument i live for the whole step
/// (parameters) unless a result that replaces it reuses its memory; others
/// die after their last use. Fails (with an error at the value) on a
/// non-tensor or dynamically shaped value.
/// Whether `op` may write a result over one of its operands: it carries the
/// Par_InPlace trait (each element of every result depends only on the same
/// element of the operands and kernels read it before writing: element-wise
/// math, select, the optimizer updates). par-run's loader reads the same
/// trait from the generated catalogue.
bool canWriteInPlace(Operation *op);

/// With `asyncCollectives` (a backend that runs collectives on their own
/// stream), the operand of a collective that communicates stays taken
/// until its result is first read: the executor waits for the collective's
/// event there, and until then the collective may still read its operand,
/// so nothing may be written over it.
FailureOr<MemoryPlan> planMemory(func::FuncOp func, ArrayRef<bool> persistent,
                                 int64_t alignment,
                                 bool asyncCollectives = false);

/// Plans `func` with its parameters (isParameter) persistent, as par-run
/// runs it.
FailureOr<MemoryPlan> planMemory(func::FuncOp func, int64_t alignment,
                                 bool asyncCollectives = false);

/// A block of memory to place: its size and the instructions at which it
/// is taken (inclusive, from 0).
struct PlacementRequest {
  int64_t bytes = 0;
  int64_t first = 0, until = 0;
};

/// The offsets of `blocks`, placed greedily by size: the largest first
/// (equal sizes in order), each at the lowest multiple of `alignment` where
/// it meets no block placed before it that is taken at a common
/// instruction. Zero-byte blocks are at 0 and take nothing. The blocks
/// taken are indexed by time (a segment tree of coalesced address ranges),
/// so a block's placement looks at O(log T) range sets instead of every
/// block placed before it.
SmallVector<int64_t> placeBlocks(ArrayRef<PlacementRequest> blocks,
                                 int64_t alignment);

/// Fails with an error at `anchor` naming `--<pass>` unless `alignment` is a
/// positive power of two the runtime accepts (up to 2^20).
LogicalResult checkAlignment(Operation *anchor, StringRef pass,
                             int64_t alignment);

/// An element type as the runtime stores it (par::rt::DType).
struct ProgramDType {
  StringRef name; // the program file's name: "f32", "i1", ...
  int64_t bytes;  // per element
};

/// The runtime's element type for `type` (or a shaped type's element type):
/// the one mapping from MLIR types to program dtypes, used by the memory
/// plan, the report and the emitter. None for types the runtime does not
/// store (complex, index, vector, unsigned and other widths of integers,
/// f8 formats, f80, tf32, ...).
std::optional<ProgramDType> programDType(Type type);
/// programDType, failing with an error at `loc` that names the type and the
/// supported ones.
FailureOr<ProgramDType> programDType(Type type, Location loc);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_MEMORYPLAN_H
