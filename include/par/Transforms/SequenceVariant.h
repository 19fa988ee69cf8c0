//===- SequenceVariant.h - a plan with sequence parallelism -----*- C++ -*-===//
//
// The variant of a planned module that --auto-shard checks with Megatron's
// sequence parallelism on a tensor axis (docs/auto-shard.md).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_SEQUENCEVARIANT_H
#define PAR_TRANSFORMS_SEQUENCEVARIANT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::par {

/// `planned` (a module --auto-shard's planner wrote from `original`) with
/// Megatron's sequence parallelism on mesh axis `axis` for its training
/// step `stepName`: the planner's layouts of the step's values are dropped
/// (its arguments' stay, and what the user wrote in `original`), and each
/// residual-stream value (a forward value an op of a later layer reads) is
/// pinned to its planned layout with `axis` moved to its sequence dim. Null
/// when the step has no such value whose sequence dim can be found.
OwningOpRef<ModuleOp> sequenceParallelVariant(ModuleOp original,
                                              ModuleOp planned,
                                              StringRef stepName,
                                              StringRef axis);

/// `planned` with the planner's layouts of `stepName`'s values dropped
/// (its arguments' stay, and what the user wrote in `original`): the
/// plan's parameter and data splits, completed by propagation as a hand
/// plan is. Null when the step's ops do not pair with `original`'s.
OwningOpRef<ModuleOp> propagatedVariant(ModuleOp original, ModuleOp planned,
                                        StringRef stepName);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_SEQUENCEVARIANT_H
