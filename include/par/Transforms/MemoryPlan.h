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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::par {

struct PlannedBuffer {
  Value value;
  int64_t bytes = 0;
  int64_t offset = 0;
  /// Live range in instruction indices, inclusive. Arguments are live from
  /// 0; values read after the step (returned values, parameters that persist
  /// to the next step) until `numInstructions`.
  int64_t first = 0, last = 0;
};

struct MemoryPlan {
  /// The function's ops in order, without the terminator.
  SmallVector<Operation *> instructions;
  SmallVector<PlannedBuffer> buffers;
  DenseMap<Value, unsigned> bufferOf;
  int64_t alignment = 64;
  int64_t arenaBytes = 0;
  /// Most bytes (each buffer rounded up to the alignment) live at once: a
  /// lower bound of arenaBytes that fragmentation can exceed.
  int64_t peakLiveBytes = 0;
};

/// Plans `func`. `persistent[i]` keeps argument i live for the whole step
/// (parameters); others die after their last use. Fails (with an error at
/// the value) on a non-tensor or dynamically shaped value.
FailureOr<MemoryPlan> planMemory(func::FuncOp func, ArrayRef<bool> persistent,
                                 int64_t alignment);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_MEMORYPLAN_H
