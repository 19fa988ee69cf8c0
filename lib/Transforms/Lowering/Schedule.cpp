//===- Schedule.cpp - --par-schedule: the order each function runs in ----===//

#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"

#include <functional>
#include <queue>

#define DEBUG_TYPE "par-schedule"

namespace mlir::par {
#define GEN_PASS_DEF_SCHEDULEPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

/// Collectives that exchange data (an all_slice only cuts its own piece).
static bool isCollective(Operation *op) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  return collective && collective.communicates();
}

/// A gather in one phase of a value made in an earlier one (forward,
/// backward, optimizer; a saved activation the backward pass reads whole):
/// issued as early as it could be, it would hold its larger result from the
/// forward pass to its use.
static bool gathersAcrossPhases(Operation *op) {
  if (!isCollective(op) || op->getNumOperands() != 1 ||
      op->getNumResults() != 1)
    return false;
  Operation *def = op->getOperand(0).getDefiningOp();
  std::optional<Phase> phase = getPhase(op);
  std::optional<Phase> from = def ? getPhase(def) : std::nullopt;
  auto in = dyn_cast<ShapedType>(op->getOperand(0).getType());
  auto out = dyn_cast<ShapedType>(op->getResult(0).getType());
  return phase && from && *from < *phase && in && out && in.hasStaticShape() &&
         out.hasStaticShape() && out.getNumElements() > in.getNumElements();
}

/// List-schedules `block` in place: ready collectives first, otherwise the
/// ready op that came first. Side-effecting ops depend on each other in
/// their original order. Then late ops, their chains and gathers across
/// phases move down, ahead of their use (below). Returns whether any op
/// moved.
static bool scheduleBlock(Block &block, int64_t prefetch) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;

  SmallVector<unsigned> pending(ops.size(), 0);
  SmallVector<SmallVector<unsigned>> users(ops.size());
  auto addEdge = [&](unsigned from, unsigned to) {
    users[from].push_back(to);
    ++pending[to];
  };
  int lastEffect = -1;
  for (auto [i, op] : llvm::enumerate(ops)) {
    llvm::SmallDenseSet<unsigned> producers;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def->getBlock() == &block && def != op)
            producers.insert(position[def]);
    });
    for (unsigned p : producers)
      addEdge(p, i);
    if (!isMemoryEffectFree(op)) {
      if (lastEffect >= 0)
        addEdge(unsigned(lastEffect), i);
      lastEffect = int(i);
    }
  }

  // Collectives sort before everything else, then original order.
  llvm::BitVector collective(ops.size());
  for (auto [i, op] : llvm::enumerate(ops))
    if (isCollective(op))
      collective.set(i);
  auto later = [&](unsigned a, unsigned b) {
    if (collective[a] != collective[b])
      return bool(collective[b]);
    return a > b;
  };
  std::priority_queue<unsigned, std::vector<unsigned>, decltype(later)> ready(
      later);
  for (unsigned i = 0; i < ops.size(); ++i)
    if (!pending[i])
      ready.push(i);
  SmallVector<unsigned> order;
  order.reserve(ops.size());
  while (!ready.empty()) {
    unsigned i = ready.top();
    ready.pop();
    order.push_back(i);
    for (unsigned user : users[i])
      if (!--pending[user])
        ready.push(user);
  }
  // Ops stay where they are when the schedule keeps the block's order.
  bool moved = false;
  if (!llvm::equal(order, llvm::seq<unsigned>(0, ops.size()))) {
    Operation *terminator = block.getTerminator();
    for (unsigned i : order)
      ops[i]->moveBefore(terminator);
    moved = true;
  }

  // Ops marked par.late (ZeRO's gathers of parameters before each use, its
  // stage-1 gradient reduce-scatters) move down to just before their first
  // user, last first, so a chain of them moves together. With `prefetch`
  // layers, data movement (not recomputation) for an op of a layer moves
  // instead to the start of the run of ops `prefetch` layers before that
  // layer's in the order they run (ZeRO-3 gathers overlap the layer
  // before), and no earlier than what it reads. A gather across phases
  // moves to the start of its first user's run (the layer's backward
  // pass gathers its saved activations as it begins, overlapping the ops
  // before their use).
  SmallVector<Operation *> lateOps;
  llvm::SmallPtrSet<Operation *, 16> heldBack;
  llvm::SmallPtrSet<Operation *, 16> late;
  for (Operation &op : block.without_terminator()) {
    if (!isMemoryEffectFree(&op))
      continue;
    // Data movement of a late op's result is part of its chain (ZeRO-3's
    // gathered weight moved to the layout its reader needs): early, it
    // would hold its operand from the start.
    auto reads = [&](const llvm::SmallPtrSetImpl<Operation *> &set) {
      return isCollective(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
               return set.contains(v.getDefiningOp());
             });
    };
    if (isLate(&op) || reads(late)) {
      lateOps.push_back(&op);
      late.insert(&op);
      // A move of a held-back gather's result is held back with it.
      if (!isLate(&op) && reads(heldBack))
        heldBack.insert(&op);
    } else if (gathersAcrossPhases(&op)) {
      lateOps.push_back(&op);
      late.insert(&op);
      heldBack.insert(&op);
    }
  }
  // The order of the block as the late ops move: each op's label grows
  // along the block, and a moved op takes one between its new neighbours
  // (all ops are labelled again, in order, when no label is left there).
  // Block::isBeforeInBlock would renumber the whole block after most moves.
  DenseMap<Operation *, int64_t> label;
  auto relabel = [&] {
    int64_t next = 0;
    for (Operation &op : block)
      label[&op] = (next += int64_t(1) << 24);
  };
  relabel();
  auto isBefore = [&](Operation *a, Operation *b) {
    return label.lookup(a) < label.lookup(b);
  };
  auto moveBefore = [&](Operation *op, Operation *at) {
    op->moveBefore(at);
    Operation *prev = op->getPrevNode();
    int64_t low = prev ? label.lookup(prev) : 0, high = label.lookup(at);
    if (high - low < 2) {
      relabel();
      return;
    }
    label[op] = low + (high - low) / 2;
  };
  // The runs of consecutive ops of one layer and phase (ops of no layer
  // join the run they fall in), and each op's run.
  SmallVector<Operation *> runStarts;
  DenseMap<Operation *, int64_t> runOf;
  if (prefetch > 0 || !heldBack.empty()) {
    std::optional<std::pair<int64_t, Phase>> current;
    for (Operation &op : block.without_terminator()) {
      std::optional<int64_t> layer = getLayer(&op);
      std::optional<Phase> phase = getPhase(&op);
      if (layer && phase && !late.contains(&op) &&
          (!current || *current != std::make_pair(*layer, *phase))) {
        current = std::make_pair(*layer, *phase);
        runStarts.push_back(&op);
      }
      runOf[&op] = int64_t(runStarts.size()) - 1;
    }
  }
  // What may be fetched ahead: a chain of late data movement that reads
  // only values made before the first layer runs (parameters and their
  // working copies: ZeRO-3's gathers), never recomputation or a
  // checkpoint's gather, which read values of the layers.
  std::function<bool(Operation *)> readsOnlyEarly = [&](Operation *op) {
    if (isRecomputed(op))
      return false;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != &block)
        continue;
      if (late.contains(def) ? !readsOnlyEarly(def)
                             : !isBefore(def, runStarts.front()))
        return false;
    }
    return true;
  };
  // Ops fetched ahead to one point keep their order there: each goes
  // before the ones placed at that point after it.
  DenseMap<Operation *, Operation *> frontAt, targetOf;
  for (Operation *op : llvm::reverse(lateOps)) {
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (user->getBlock() == &block && (!first || isBefore(user, first)))
        first = user;
    if (!first)
      continue;
    Operation *at = first, *target = nullptr;
    auto runIt = runOf.find(first);
    int64_t run = runIt == runOf.end() ? -1 : runIt->second;
    bool held = heldBack.contains(op);
    if (held && !late.contains(first)) {
      // To the start of its first reader's run (of that reader's layer and
      // phase), no earlier than what it reads; where there is none, it
      // stays where the list schedule put it.
      Operation *def = op->getOperand(0).getDefiningOp();
      if (!getLayer(first) || run < 0 || !def || !isBefore(def, runStarts[run]))
        continue;
      target = runStarts[run];
      at = frontAt.lookup(target) ? frontAt.lookup(target) : target;
    } else if (!held && prefetch > 0 && !runStarts.empty() &&
               !late.contains(first) && getLayer(first) && readsOnlyEarly(op)) {
      target = runStarts[std::max<int64_t>(0, run - prefetch)];
      at = frontAt.lookup(target) ? frontAt.lookup(target) : target;
    } else if (auto it = targetOf.find(first);
               it != targetOf.end() && frontAt.lookup(it->second) == first) {
      // A chain's earlier op joins the chain's place in the order.
      target = it->second;
    } else if (held) {
      continue; // its chain stayed where the list schedule put it
    }
    if (op->getNextNode() != at) {
      moveBefore(op, at);
      moved = true;
    }
    if (target) {
      frontAt[target] = op;
      targetOf[op] = target;
    }
  }
  return moved;
}

namespace {
struct SchedulePass : public par::impl::SchedulePassBase<SchedulePass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> pipelined;
    bool moved = false;
    // A pipeline's stages are already in their schedule's order.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isDeclaration() &&
          !func->hasAttr(ParDialect::kStageOfAttrName)) {
        auto prefetch =
            func->getAttrOfType<IntegerAttr>(ParDialect::kPrefetchAttrName);
        moved |= scheduleBlock(func.getBody().front(),
                               prefetch ? prefetch.getInt() : 0);
        if (getPipeline(func) &&
            !func->hasAttr(ParDialect::kStageOfAttrName))
          pipelined.push_back(func);
      }
    // A pipelined step becomes one function per stage, in the order of
    // its schedule.
    for (func::FuncOp func : pipelined)
      if (failed(splitStages(func)))
        return signalPassFailure();
    // A block already in its schedule's order need not be verified again.
    if (!moved && pipelined.empty())
      markAllAnalysesPreserved();
  }
};
} // namespace
