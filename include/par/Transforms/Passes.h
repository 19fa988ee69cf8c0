//===- Passes.h - par passes ------------------------------------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_PASSES_H
#define PAR_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "par/Dialect/Par/IR/ParOps.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Transforms/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PASSES_H
