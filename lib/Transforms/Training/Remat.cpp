//===- Remat.cpp - --par-autodiff="remat=full": recompute layers -----------===//
//
// Full rematerialization of a training step: each model layer (the forward
// ops marked par.layer) keeps only the values that leave it (its output,
// what other layers and the loss read) and the values its ops read from
// outside it (its input, the weights); every other forward value the
// backward pass reads is recomputed there, by a copy of the layer's ops
// that produce it, placed before the first backward op that needs one of
// them. The copies are marked par.recomputed (what a recomputed op is) and
// par.late (--par-schedule issues them, and the data movement the
// partitioner adds for them, just before their first use, so nothing they
// make lives from the forward pass to the backward). The original values
// then die in the forward pass, and the memory plan sees it.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::par;

/// A forward op of a layer that may run again: no side effects, not a
/// working copy or view of a parameter (those have their own lifetimes:
/// mixed precision, ZeRO), not a constant (cheap to keep).
static std::optional<int64_t> recomputableLayer(Operation *op) {
  if (!inPhase(op, Phase::forward) || op->getNumResults() == 0 ||
      op->getNumRegions() != 0 || !isMemoryEffectFree(op) ||
      getCopyOf(op) || op->hasAttr(ParDialect::kViewOfAttrName) ||
      isa<ConstantOp>(op))
    return std::nullopt;
  return getLayer(op);
}

/// Whether `value`, made in layer `layer`, leaves it: returned, or read in
/// the forward pass by anything but the layer's recomputable ops. The
/// layer keeps such values.
static bool leavesLayer(Value value, int64_t layer) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    return isa<func::ReturnOp>(user) ||
           (inPhase(user, Phase::forward) && recomputableLayer(user) != layer);
  });
}

LogicalResult mlir::par::autodiff::rematerializeLayers(func::FuncOp func) {
  Block &body = func.getBody().front();
  // Per layer, the forward values the backward pass reads that the layer
  // does not keep.
  llvm::MapVector<int64_t, llvm::SetVector<Value>> needed;
  for (Operation &op : body) {
    std::optional<int64_t> layer = recomputableLayer(&op);
    if (!layer)
      continue;
    for (Value result : op.getResults()) {
      bool readBackward = llvm::any_of(result.getUsers(), [](Operation *user) {
        return !inPhase(user, Phase::forward) && !isa<func::ReturnOp>(user);
      });
      if (readBackward && !leavesLayer(result, *layer))
        needed[*layer].insert(result);
    }
  }
  for (auto &[layer, values] : needed) {
    // The layer's ops that make them, back to what the layer keeps.
    llvm::SmallPtrSet<Operation *, 16> ops;
    SmallVector<Value> work(values.begin(), values.end());
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || recomputableLayer(def) != layer || !ops.insert(def).second)
        continue;
      // What the layer keeps (its input, what leaves it) is read as is.
      for (Value operand : def->getOperands()) {
        Operation *from = operand.getDefiningOp();
        if (from && recomputableLayer(from) == layer &&
            !leavesLayer(operand, layer))
          work.push_back(operand);
      }
    }
    // Before the first backward op that reads one of them.
    Operation *first = nullptr;
    for (Value value : values)
      for (Operation *user : value.getUsers())
        if (!inPhase(user, Phase::forward) &&
            (!first || user->isBeforeInBlock(first)))
          first = user;
    OpBuilder b(first);
    IRMapping copies;
    for (Operation &op : body) {
      if (&op == first)
        break;
      if (!ops.contains(&op))
        continue;
      Operation *copy = b.clone(op, copies);
      setPhase(copy, Phase::backward);
      setRecomputed(copy);
      setLate(copy);
    }
    for (Value value : values)
      value.replaceUsesWithIf(copies.lookup(value), [&](OpOperand &use) {
        return !inPhase(use.getOwner(), Phase::forward) &&
               !isa<func::ReturnOp>(use.getOwner());
      });
  }
  return success();
}
