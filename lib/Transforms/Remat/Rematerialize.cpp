//===- Rematerialize.cpp - recompute what a layer does not keep -----------===//
//
// Rematerialization of a training step, layer by layer. A layer under
// `full` keeps only the values that leave it (its output, what other
// layers and the loss read) and the values its ops read from outside it
// (its input, the weights); under `selective` it keeps everything but its
// attention core. Every forward value the backward pass reads that the
// layer does not keep is recomputed there, by a copy of the layer's ops
// that produce it, placed before the first backward op that needs one of
// them. The copies are marked par.recomputed (what a recomputed op is) and
// par.late (--par-schedule issues them, and the data movement the
// partitioner adds for them, just before their first use, so nothing they
// make lives from the forward pass to the backward). The original values
// then die in the forward pass, and the memory plan sees it.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/Remat.h"

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::par;

std::optional<RematMode> mlir::par::parseRematMode(StringRef text) {
  return llvm::StringSwitch<std::optional<RematMode>>(text)
      .Case("none", RematMode::none)
      .Case("selective", RematMode::selective)
      .Case("full", RematMode::full)
      .Default(std::nullopt);
}

StringRef mlir::par::stringifyRematMode(RematMode mode) {
  switch (mode) {
  case RematMode::none:
    return "none";
  case RematMode::selective:
    return "selective";
  case RematMode::full:
    return "full";
  }
  llvm_unreachable("unknown remat mode");
}

/// A forward op of a layer that may run again: no side effects, not a
/// working copy or view of a parameter (those have their own lifetimes:
/// mixed precision, ZeRO). A constant is one: made again, it costs nothing
/// and keeps no buffer from the forward pass to the backward.
static std::optional<int64_t> recomputableLayer(Operation *op) {
  if (!inPhase(op, Phase::forward) || op->getNumResults() == 0 ||
      op->getNumRegions() != 0 || !isMemoryEffectFree(op) || getCopyOf(op) ||
      op->hasAttr(ParDialect::kViewOfAttrName))
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

/// The attention cores of the layers of `body`: from each softmax among a
/// layer's recomputable ops, back through what makes its input to the
/// contraction that makes the scores (included), and on through what reads
/// it up to the value product (excluded). A core value is never a
/// contraction's operand other than the scores' own and the value
/// product's.
static DenseSet<Value> attentionCores(Block &body) {
  DenseSet<Value> core;
  for (Operation &op : body) {
    auto softmax = dyn_cast<SoftmaxOp>(op);
    std::optional<int64_t> layer = recomputableLayer(&op);
    if (!softmax || !layer)
      continue;
    core.insert(softmax.getResult());
    // Back to the scores.
    SmallVector<Value> work{softmax->getOperand(0)};
    while (!work.empty()) {
      Value value = work.pop_back_val();
      Operation *def = value.getDefiningOp();
      if (!def || recomputableLayer(def) != layer || !core.insert(value).second)
        continue;
      if (!isa<DotOp>(def))
        llvm::append_range(work, def->getOperands());
    }
    // On to the value product.
    work.assign({softmax.getResult()});
    while (!work.empty()) {
      Value value = work.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (isa<DotOp>(user) || recomputableLayer(user) != layer)
          continue;
        for (Value result : user->getResults())
          if (core.insert(result).second)
            work.push_back(result);
      }
    }
  }
  return core;
}

llvm::SmallDenseSet<int64_t> mlir::par::attentionCoreLayers(func::FuncOp func) {
  llvm::SmallDenseSet<int64_t> layers;
  for (Operation &op : func.getBody().front())
    if (isa<SoftmaxOp>(op))
      if (std::optional<int64_t> layer = recomputableLayer(&op))
        layers.insert(*layer);
  return layers;
}

LogicalResult mlir::par::rematerialize(func::FuncOp func,
                                       const RematModes &modes) {
  Block &body = func.getBody().front();
  DenseSet<Value> cores = attentionCores(body);
  // Whether layer `layer` drops `value` (made by one of its recomputable
  // ops) after the forward pass.
  auto drops = [&](Value value, int64_t layer) {
    auto it = modes.find(layer);
    RematMode mode = it == modes.end() ? RematMode::none : it->second;
    if (mode == RematMode::none || leavesLayer(value, layer))
      return false;
    return mode == RematMode::full || cores.contains(value);
  };
  // Per layer and micro-batch (a pipelined step runs a layer once per
  // micro-batch, and a later micro-batch's forward pass may come after an
  // earlier one's backward pass), the forward values the backward pass
  // reads that the layer does not keep.
  using Run = std::pair<int64_t, int64_t>; // layer, micro-batch (-1: none)
  auto runOf = [](Operation *op, int64_t layer) {
    return Run{layer, getMicrobatch(op).value_or(-1)};
  };
  llvm::MapVector<Run, llvm::SetVector<Value>> needed;
  for (Operation &op : body) {
    std::optional<int64_t> layer = recomputableLayer(&op);
    if (!layer)
      continue;
    for (Value result : op.getResults()) {
      bool readBackward = llvm::any_of(result.getUsers(), [](Operation *user) {
        return !inPhase(user, Phase::forward) && !isa<func::ReturnOp>(user);
      });
      if (readBackward && drops(result, *layer))
        needed[runOf(&op, *layer)].insert(result);
    }
  }
  for (auto &[run, values] : needed) {
    int64_t layer = run.first;
    auto inRun = [&, run = run](Operation *op) {
      std::optional<int64_t> opLayer = recomputableLayer(op);
      return opLayer && runOf(op, *opLayer) == run;
    };
    // The layer's ops that make them, back to what the layer keeps.
    llvm::SmallPtrSet<Operation *, 16> ops;
    SmallVector<Value> work(values.begin(), values.end());
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || !inRun(def) || !ops.insert(def).second)
        continue;
      // What the layer keeps is read as is.
      for (Value operand : def->getOperands()) {
        Operation *from = operand.getDefiningOp();
        if (from && inRun(from) && drops(operand, layer))
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
    // A value made after the first backward reader (a constant that
    // partitioning placed next to its backward reader) is not kept across
    // the backward pass anyway: it stays as it is.
    for (Value value : values) {
      Value copy = copies.lookupOrNull(value);
      if (!copy)
        continue;
      value.replaceUsesWithIf(copy, [&](OpOperand &use) {
        return !inPhase(use.getOwner(), Phase::forward) &&
               !isa<func::ReturnOp>(use.getOwner());
      });
    }
  }
  return success();
}
