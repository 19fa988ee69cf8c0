//===- SinkPartials.cpp - --par-sink-partials: resolve partial sums late --===//
//
// A partial sum resolved right before an op that is linear in it can be
// resolved after the op instead: sum_i(f(x_i)) = f(sum_i x_i). Moving the
// reshard past such an op saves communication when the op's result is no
// larger (a sum of two partial values needs one all-reduce instead of two;
// a reduction or slice shrinks what is reduced) and lets a later sharded
// consumer turn the all-reduce into a reduce-scatter.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "par-sink-partials"

namespace mlir::par {
#define GEN_PASS_DEF_SINKPARTIALSPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
Linearity linearityOf(Operation *op, unsigned operand) {
  auto linear = dyn_cast<LinearOpInterface>(op);
  return linear ? linear.getLinearity(operand) : Linearity::None;
}

int64_t bytesOfValue(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return bytesOf(type.getShape(), type.getElementType());
}

bool sameDims(ShardingAttr a, ShardingAttr b) {
  if (a.getMesh() != b.getMesh() || a.getRank() != b.getRank())
    return false;
  for (auto [x, y] : llvm::zip(a.getDims(), b.getDims()))
    if (x.getAxes() != y.getAxes())
      return false;
  return true;
}

/// Whether `to` keeps every split of `from` and only adds axes of `from`'s
/// partial set after them: resolving the partial sum and scattering it
/// (one reduce-scatter).
bool scattersPartial(ShardingAttr from, ShardingAttr to) {
  if (from.getMesh() != to.getMesh() || from.getRank() != to.getRank())
    return false;
  for (auto [x, y] : llvm::zip(from.getDims(), to.getDims())) {
    ArrayRef<StringAttr> kept = x.getAxes(), now = y.getAxes();
    if (now.size() < kept.size() || now.take_front(kept.size()) != kept)
      return false;
    for (StringAttr axis : now.drop_front(kept.size()))
      if (!llvm::is_contained(from.getPartialAxes(), axis))
        return false;
  }
  return true;
}

/// The reshard that resolves the partial axes of its sum-partial input,
/// keeping its split or scattering the sum over some of those axes, or
/// null.
ReshardOp resolvingReshard(Value value) {
  auto reshard = value.getDefiningOp<ReshardOp>();
  if (!reshard || !reshard->hasOneUse())
    return nullptr;
  ShardingAttr input = getValueSharding(reshard.getInput());
  if (!input || input.getPartialAxes().empty() ||
      !reshard.getSharding().getPartialAxes().empty() ||
      !scattersPartial(input, reshard.getSharding()))
    return nullptr;
  if (getPartialCombiner(reshard.getInput()) != FactorCombiner::Sum)
    return nullptr;
  return reshard;
}

/// Moves one reshard past its linear user and returns the reshard that now
/// follows the user (null when it cannot move). Reshards it erases leave
/// `worklist`; `changed` is set when it changes the function (folding the
/// reshard into a reshard that reads it changes it and returns null).
ReshardOp sinkOnce(ReshardOp reshard, llvm::SetVector<Operation *> &worklist,
                   bool &changed) {
  OpOperand &use = *reshard->use_begin();
  Operation *user = use.getOwner();
  // Resolving then resharding again is one reshard from the partial value
  // (an all-reduce then a slice is a reduce-scatter).
  if (auto next = dyn_cast<ReshardOp>(user)) {
    next.getInputMutable().assign(reshard.getInput());
    worklist.remove(reshard);
    reshard.erase();
    changed = true;
    return nullptr;
  }
  if (user->getNumResults() != 1)
    return nullptr;
  Linearity linearity = linearityOf(user, use.getOperandNumber());
  if (linearity == Linearity::None)
    return nullptr;
  ShardingAttr input = getValueSharding(reshard.getInput());
  ArrayRef<StringAttr> partial = input.getPartialAxes();
  Value result = user->getResult(0);

  // Every operand resolves the same partial axes (All), or only this one
  // does and the others are not partial (Each).
  SmallVector<ReshardOp> moved;
  for (OpOperand &operand : user->getOpOperands()) {
    ReshardOp other = resolvingReshard(operand.get());
    if (linearity == Linearity::All) {
      if (!other ||
          getValueSharding(other.getInput()).getPartialAxes() != partial)
        return nullptr;
      moved.push_back(other);
    } else if (&operand == &use) {
      moved.push_back(reshard);
    } else if (ShardingAttr s = getValueSharding(operand.get())) {
      if (!s.getPartialAxes().empty())
        return nullptr;
    }
  }
  if (linearity == Linearity::Each &&
      bytesOfValue(result) > bytesOfValue(reshard.getInput()))
    return nullptr;

  // A reshard that also scatters the sum moves only past a sum of
  // same-shaped partial values laid out alike: the op then runs on the
  // unscattered layout and one reduce-scatter follows it (the input
  // gradients of q, k and v summed before one reduce-scatter, not each
  // reduce-scattered).
  bool scatters = llvm::any_of(moved, [](ReshardOp r) {
    return !sameDims(getValueSharding(r.getInput()), r.getSharding());
  });
  if (scatters) {
    if (linearity != Linearity::All)
      return nullptr;
    for (ReshardOp r : moved)
      if (r.getInput().getType() != result.getType() ||
          !sameDims(getValueSharding(r.getInput()), input) ||
          r.getSharding() != reshard.getSharding())
        return nullptr;
  }

  // The result becomes partial over the same axes, which its split must
  // leave free.
  MLIRContext *ctx = user->getContext();
  ShardingAttr old = getValueSharding(result);
  if (!old) {
    SmallVector<DimShardingAttr> dims(
        cast<RankedTensorType>(result.getType()).getRank(),
        DimShardingAttr::get(ctx, {}, /*isClosed=*/true, std::nullopt));
    old = ShardingAttr::get(ctx, input.getMesh(), dims, {}, {});
  }
  if (old.getMesh() != input.getMesh())
    return nullptr;
  ShardingAttr layout = scatters ? input : old;
  SmallVector<StringAttr> partialAfter(scatters ? ArrayRef<StringAttr>{}
                                                : old.getPartialAxes());
  for (StringAttr axis : partial) {
    if (llvm::is_contained(layout.getShardingAxes(), axis) ||
        llvm::is_contained(partialAfter, axis) ||
        llvm::is_contained(old.getReplicatedAxes(), axis))
      return nullptr;
    partialAfter.push_back(axis);
  }
  for (ReshardOp r : moved) {
    r.getResult().replaceAllUsesWith(r.getInput());
    worklist.remove(r);
    r.erase();
  }
  setValueSharding(result,
                   ShardingAttr::get(ctx, old.getMesh(), layout.getDims(),
                                     old.getReplicatedAxes(), partialAfter));
  OpBuilder builder(ctx);
  builder.setInsertionPointAfter(user);
  auto after = ReshardOp::create(builder, user->getLoc(), result, old);
  result.replaceAllUsesExcept(after.getResult(), after.getOperation());
  changed = true;
  return after;
}

struct SinkPartialsPass
    : public par::impl::SinkPartialsPassBase<SinkPartialsPass> {
  void runOnOperation() override {
    bool changed = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func->hasAttr(ParDialect::kPartitionedAttrName))
        continue;
      // Each move takes a reshard one op further down; the moved reshard
      // is looked at again from its new place.
      llvm::SetVector<Operation *> worklist;
      func.walk([&](ReshardOp op) { worklist.insert(op); });
      while (!worklist.empty()) {
        auto reshard = cast<ReshardOp>(worklist.pop_back_val());
        if (!resolvingReshard(reshard.getResult()))
          continue;
        if (ReshardOp next = sinkOnce(reshard, worklist, changed)) {
          ++numSunk;
          LLVM_DEBUG(llvm::dbgs() << "sunk a partial sum past "
                                  << *next.getInput().getDefiningOp() << "\n");
          worklist.insert(next);
        }
      }
      if (!func.isDeclaration())
        changed |= assignReshardPhases(func.getBody().front());
    }
    // A step left as it was (no reshard sunk or folded, none marked) need
    // not be verified again.
    if (!changed)
      markAllAnalysesPreserved();
  }
};
} // namespace
