//===- SplitCheckpoints.cpp - --par-split-checkpoints ---------------------===//
//
// Partitioned activation checkpoints (ZeRO-R's P_a). Under --par-remat
// with `checkpoint-axis=AXIS`, a recomputed layer keeps its input until the
// backward pass recomputes from it; that input is usually replicated over
// the tensor-parallel axis. After propagation, each such checkpoint (an
// activation made in the forward pass that a recomputed op reads) is
// constrained to its layout plus AXIS on one more dim right after it is
// made (a local slice: every device already holds the whole), and its
// readers in later phases read it through a constraint back to its own
// layout issued just before the first of them (an all-gather). Between
// the two, a device keeps 1/n of the checkpoint. A checkpoint already
// split over AXIS, or with no dim that AXIS divides, stays as it is.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::par {
#define GEN_PASS_DEF_SPLITCHECKPOINTSPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The checkpoints of `func`: activations made by forward ops (not
/// recomputed, not constants, not working copies or views of parameters)
/// that a recomputed op reads.
llvm::SetVector<Value> checkpointsOf(func::FuncOp func) {
  llvm::SetVector<Value> checkpoints;
  func.walk([&](Operation *op) {
    if (!isRecomputed(op))
      return;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && inPhase(def, Phase::forward) && !isRecomputed(def) &&
          !isa<ConstantOp>(def) && !getCopyOf(def) && !getViewOf(def) &&
          isa<RankedTensorType>(operand.getType()))
        checkpoints.insert(operand);
    }
  });
  return checkpoints;
}

/// `layout` with `axis` (of `mesh`) added, minor, to the dim whose
/// per-device size it divides with the most elements left; null when it
/// is already used or divides none.
ShardingAttr withAxis(ShardingAttr layout, RankedTensorType type,
                      StringAttr axis, MeshOp mesh) {
  if (llvm::is_contained(layout.getShardingAxes(), axis) ||
      llvm::is_contained(layout.getPartialAxes(), axis))
    return {};
  int64_t n = mesh.getAxisSize(axis.getValue());
  int64_t best = -1, bestSize = 0;
  for (auto [d, dim] : llvm::enumerate(layout.getDims())) {
    int64_t size = type.getDimSize(d) / mesh.getNumShards(dim.getAxes());
    if (size % n == 0 && size > bestSize) {
      best = int64_t(d);
      bestSize = size;
    }
  }
  if (best < 0)
    return {};
  SmallVector<DimShardingAttr> dims(layout.getDims());
  SmallVector<StringAttr> axes(dims[best].getAxes());
  axes.push_back(axis);
  dims[best] = DimShardingAttr::get(layout.getContext(), axes,
                                    /*isClosed=*/true, std::nullopt);
  return ShardingAttr::get(layout.getContext(), layout.getMesh(), dims,
                           layout.getReplicatedAxes(), layout.getPartialAxes());
}

struct SplitCheckpointsPass
    : public mlir::par::impl::SplitCheckpointsPassBase<SplitCheckpointsPass> {
  using SplitCheckpointsPassBase::SplitCheckpointsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool splitAny = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      auto record =
          func->getAttrOfType<DictionaryAttr>(ParDialect::kRematAttrName);
      auto axisName =
          record ? record.getAs<StringAttr>("checkpoint_axis") : StringAttr();
      if (!axisName || func.isDeclaration())
        continue;
      splitAny = true;
      if (failed(split(func, axisName)))
        return signalPassFailure();
    }
    // No checkpoint axis: the module is left as it is.
    if (!splitAny)
      markAllAnalysesPreserved();
  }

  LogicalResult split(func::FuncOp func, StringAttr axis) {
    OpBuilder b(func.getContext());
    for (Value checkpoint : checkpointsOf(func)) {
      ShardingAttr layout = getValueSharding(checkpoint);
      if (!layout)
        return checkpoint.getDefiningOp()->emitError()
               << "--par-split-checkpoints runs after --par-propagate: this "
                  "checkpoint has no sharding";
      auto mesh =
          SymbolTable::lookupNearestSymbolFrom<MeshOp>(func, layout.getMesh());
      if (!mesh || mesh.getAxisIndex(axis.getValue()) < 0)
        return func.emitError()
               << "--par-remat checkpoint-axis '" << axis.getValue()
               << "' is not an axis of the mesh of @" << func.getSymName();
      auto type = cast<RankedTensorType>(checkpoint.getType());
      ShardingAttr splitLayout = withAxis(layout, type, axis, mesh);
      if (!splitLayout)
        continue;
      // Its readers in later phases, and the first of them.
      SmallVector<OpOperand *> later;
      Operation *first = nullptr;
      for (OpOperand &use : checkpoint.getUses()) {
        Operation *user = use.getOwner();
        if (inPhase(user, Phase::forward) || !getPhase(user))
          continue;
        later.push_back(&use);
        if (!first || user->isBeforeInBlock(first))
          first = user;
      }
      if (!first)
        continue;
      Operation *def = checkpoint.getDefiningOp();
      b.setInsertionPointAfter(def);
      auto kept = ShardingConstraintOp::create(b, def->getLoc(), type,
                                               checkpoint, splitLayout);
      setValueSharding(kept.getResult(), splitLayout);
      setPhase(kept, Phase::forward);
      StepMarks::of(def).stamp(kept);
      b.setInsertionPoint(first);
      auto whole = ShardingConstraintOp::create(b, first->getLoc(), type,
                                                kept.getResult(), layout);
      setValueSharding(whole.getResult(), layout);
      setPhase(whole, Phase::backward);
      setLate(whole);
      StepMarks::of(first).stamp(whole);
      for (OpOperand *use : later)
        use->set(whole.getResult());
    }
    return success();
  }
};

} // namespace
