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

/// A group --par-fuse makes of a block's ops: its root (the op whose
/// result the group yields), the ops it runs (root included; no value of
/// theirs but the root's, and the one a reduction root keeps, is read
/// outside the group) and the broadcasts and splat constants it copies in
/// (they may stay in use outside).
struct FusionGroup {
  Operation *root = nullptr;
  SmallVector<Operation *> members, copied;
};
/// The groups --par-fuse would make of `block`, which is left unchanged,
/// but for the dots --par-fuse takes into the groups that finish them
/// (left out: on a global program whether a dot's result reaches its group
/// whole depends on the plan, a row-parallel dot's partial sums being
/// reduced first). On a global program (before --par-partition) they are
/// the groups of its partitioned copy wherever the plan adds no collective
/// inside a group.
SmallVector<FusionGroup> fusionGroups(Block &block);

/// Replaces every par.fused op of `func` by the ops of its body.
void inlineFusedGroups(func::FuncOp func);

struct MemoryPlan;

/// The multi-tensor optimizer: maximal runs of consecutive optimizer
/// updates (adamw, sgd) of one op and pipeline slot in `plan`'s order in
/// which no update's results share memory with another's operands or
/// results, as (first instruction, count) with count >= 2. Each runs as
/// one batch (docs/program-format.md, "Batched updates"): --emit-program
/// writes them for functions --par-fuse marked, and --report counts them.
SmallVector<std::pair<size_t, size_t>> updateBatches(const MemoryPlan &plan);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_FUSION_H
