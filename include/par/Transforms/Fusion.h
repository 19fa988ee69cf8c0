//===- Fusion.h - Fused groups of element-wise ops --------------*- C++ -*-===//
//
// --par-fuse (lib/Transforms/Lowering/Fuse.cpp) makes par.fused groups;
// these helpers let other passes see a program as it was before.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_FUSION_H
#define PAR_TRANSFORMS_FUSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::par {

/// What fusion did to a function: its groups and the ops they hold (the
/// kernels the unfused program runs for them, broadcasts and constants
/// included).
struct FusionCounts {
  int64_t groups = 0, ops = 0;
};
FusionCounts countFusion(func::FuncOp func);

/// Replaces every par.fused op of `func` by the ops of its body.
void inlineFusedGroups(func::FuncOp func);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_FUSION_H
