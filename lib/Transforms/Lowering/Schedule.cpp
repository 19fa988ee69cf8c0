//===- Schedule.cpp - --par-schedule: collectives as early as possible ----===//

#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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

/// List-schedules `block` in place: ready collectives first, otherwise the
/// ready op that came first. Side-effecting ops depend on each other in
/// their original order.
static void scheduleBlock(Block &block) {
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
  auto later = [&](unsigned a, unsigned b) {
    bool ca = isCollective(ops[a]), cb = isCollective(ops[b]);
    if (ca != cb)
      return cb;
    return a > b;
  };
  std::priority_queue<unsigned, std::vector<unsigned>, decltype(later)> ready(
      later);
  for (unsigned i = 0; i < ops.size(); ++i)
    if (!pending[i])
      ready.push(i);
  Operation *terminator = block.getTerminator();
  while (!ready.empty()) {
    unsigned i = ready.top();
    ready.pop();
    ops[i]->moveBefore(terminator);
    for (unsigned user : users[i])
      if (!--pending[user])
        ready.push(user);
  }

  // Ops marked par.late (ZeRO's gathers of parameters before each use, its
  // stage-1 gradient reduce-scatters) move down to just before their first
  // user, last first, so a chain of them moves together.
  SmallVector<Operation *> lateOps;
  for (Operation &op : block.without_terminator())
    if (isLate(&op) && isMemoryEffectFree(&op))
      lateOps.push_back(&op);
  for (Operation *op : llvm::reverse(lateOps)) {
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (user->getBlock() == &block &&
          (!first || user->isBeforeInBlock(first)))
        first = user;
    if (first && op->getNextNode() != first)
      op->moveBefore(first);
  }
}

namespace {
struct SchedulePass : public par::impl::SchedulePassBase<SchedulePass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> pipelined;
    // A pipeline's stages are already in their schedule's order.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isDeclaration() &&
          !func->hasAttr(ParDialect::kStageOfAttrName)) {
        scheduleBlock(func.getBody().front());
        if (getPipeline(func) &&
            !func->hasAttr(ParDialect::kStageOfAttrName))
          pipelined.push_back(func);
      }
    // A pipelined step becomes one function per stage, in the order of
    // its schedule.
    for (func::FuncOp func : pipelined)
      if (failed(splitStages(func)))
        return signalPassFailure();
  }
};
} // namespace
