//===- ParConstants.h - Building par.constant values ------------*- C++ -*-===//
//
// The constants that local op forms (masks, shard offsets) and gradient
// rules build: splats of one value and index ramps.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_IR_PARCONSTANTS_H
#define PAR_DIALECT_PAR_IR_PARCONSTANTS_H

#include "mlir/IR/Builders.h"

namespace mlir::par {

/// A par.constant of `type` with every element `value`. For integer
/// elements, +-infinity become the type's largest and smallest values.
Value splatConstant(OpBuilder &builder, Location loc, RankedTensorType type,
                    double value);

/// Whether `value` is a splat constant whose every element is zero.
bool isZeroSplat(Value value);

/// The 1-D par.constant [0, 1, ..., size - 1] of integer type `elementType`.
Value iotaConstant(OpBuilder &builder, Location loc, int64_t size,
                   Type elementType);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_PARCONSTANTS_H
