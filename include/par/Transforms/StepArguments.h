//===- StepArguments.h - What feeds each argument of a step -----*- C++ -*-===//
//
// The runtime needs to know, for every argument, whether it is a parameter
// (initialized once, updated, checkpointed) or data (new every step), and
// for integer data whether it holds token ids or next-token targets and over
// which vocabulary. Users say so with argument attributes (par.role,
// par.data, par.vocab); otherwise these are inferred from the global program.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_STEPARGUMENTS_H
#define PAR_TRANSFORMS_STEPARGUMENTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::par {

/// Sets `par.data` and `par.vocab` on integer arguments that lack them,
/// from what the ops that read them say (DataOperandOpInterface: the ids
/// of an embedding are "tokens" over its table's rows, the labels of a
/// cross_entropy "targets" over the logits' last dimension; tokens win).
/// Must run on the global program (before --par-to-local changes types).
void inferInputRoles(func::FuncOp func);

/// Whether argument `index` is a parameter: its `par.role`, else true for
/// floating-point arguments. Parameters persist from step to step.
bool isParameter(func::FuncOp func, unsigned index);

/// The data arguments of a step: those that are not parameters and are
/// read (tokens, targets).
SmallVector<BlockArgument> dataArguments(func::FuncOp func);

/// The dim a ZeRO stage splits a parameter of `localShape` (its
/// per-device shape before) over a data axis of `n` devices: the one that
/// leaves the fewest elements per device (ceil(local / n) times the other
/// dims), the first on a tie (so a dim that divides wins), among the dims
/// with at least n elements and more than one; -1 when none has.
int64_t zeroShardDim(ArrayRef<int64_t> localShape, int64_t n);

/// Whether `value` is a 0-d tensor broadcast to a shape (a factor the step
/// multiplies a gradient by).
bool isScalarBroadcast(Value value);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_STEPARGUMENTS_H
