//===- ParDialect.h - the par dialect, attributes, interfaces ---*- C++ -*-===//
#ifndef PAR_DIALECT_PAR_IR_PARDIALECT_H
#define PAR_DIALECT_PAR_IR_PARDIALECT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "par/Dialect/Par/IR/Cost.h"
#include "par/Dialect/Par/IR/LocalForm.h"
#include "par/Dialect/Par/IR/ShardingRule.h"

namespace mlir::par {
/// An operand that holds integer data the runtime feeds
/// (DataOperandOpInterface): token ids or next-token targets over a
/// vocabulary.
struct DataOperand {
  unsigned operand;
  llvm::StringRef kind; // "tokens" or "targets"
  int64_t vocab;
};
} // namespace mlir::par

#include "par/Dialect/Par/IR/ParDialect.h.inc"
#include "par/Dialect/Par/IR/ParEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "par/Dialect/Par/IR/ParAttrs.h.inc"

#include "par/Dialect/Par/IR/ParInterfaces.h.inc"

#endif // PAR_DIALECT_PAR_IR_PARDIALECT_H
