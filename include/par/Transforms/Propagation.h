//===- Propagation.h - entry points of the sharding engine ------*- C++ -*-===//
//
// The factor-based sharding engine serves propagation and the first step of
// partitioning; both read only the ops' sharding rules.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_PROPAGATION_H
#define PAR_TRANSFORMS_PROPAGATION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::par {

/// Propagates shardings through `module` and writes one on every tensor,
/// emitting propagation's diagnostics unless `diagnose` is off (a copy
/// whose diagnostics nobody reads); with `explain`, prints the explain
/// report to it. See docs/propagation.md.
void propagateShardings(ModuleOp module, llvm::raw_ostream *explain,
                        bool diagnose = true);

/// Makes every op's operands agree with one sharding of its factors: where
/// an operand's sharding differs, a `par.reshard` to the sharding the op
/// uses is inserted (one per value and target, right after the value is
/// defined); where an op's annotated result sharding differs from what the
/// op produces, the result takes the produced sharding and a reshard after
/// the op restores the annotated one for its users. Returned values are
/// resharded to their function result's sharding. Values without a
/// sharding count as replicated. Returns the number of reshards inserted.
int64_t insertReshards(ModuleOp module);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PROPAGATION_H
