//===- MemoryPlan.cpp - Static memory plan, --par-memory-plan -------------===//

#include "par/Transforms/MemoryPlan.h"

#include "par/Transforms/InputRoles.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace mlir::par {
#define GEN_PASS_DEF_MEMORYPLANPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

FailureOr<MemoryPlan> mlir::par::planMemory(func::FuncOp func,
                                            ArrayRef<bool> persistent,
                                            int64_t alignment) {
  MemoryPlan plan;
  plan.alignment = alignment;
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator())
    plan.instructions.push_back(&op);
  int64_t end = int64_t(plan.instructions.size());

  auto addBuffer = [&](Value value, int64_t first) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape())
      return emitError(value.getLoc())
             << "cannot plan memory for a value of type " << value.getType()
             << ": the runtime needs statically shaped tensors";
    PlannedBuffer buffer;
    buffer.value = value;
    buffer.bytes = bytesOf(type.getShape(), type.getElementType());
    buffer.first = buffer.last = first;
    plan.bufferOf[value] = plan.buffers.size();
    plan.buffers.push_back(buffer);
    return success();
  };
  for (BlockArgument arg : body.getArguments()) {
    if (failed(addBuffer(arg, 0)))
      return failure();
    if (arg.getArgNumber() < persistent.size() && persistent[arg.getArgNumber()])
      plan.buffers.back().last = end;
  }
  for (auto [index, op] : llvm::enumerate(plan.instructions)) {
    for (Value operand : op->getOperands()) {
      auto it = plan.bufferOf.find(operand);
      if (it != plan.bufferOf.end())
        plan.buffers[it->second].last =
            std::max(plan.buffers[it->second].last, int64_t(index));
    }
    for (Value result : op->getResults())
      if (failed(addBuffer(result, int64_t(index))))
        return failure();
  }
  for (Value returned : body.getTerminator()->getOperands())
    plan.buffers[plan.bufferOf.lookup(returned)].last = end;

  // Greedy by size: the largest buffers claim the lowest offsets, each later
  // one takes the lowest aligned gap that no overlapping-in-time buffer uses.
  SmallVector<unsigned> order;
  for (unsigned i = 0; i < plan.buffers.size(); ++i)
    order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  SmallVector<unsigned> placed;
  for (unsigned id : order) {
    PlannedBuffer &buffer = plan.buffers[id];
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (unsigned other : placed) {
      const PlannedBuffer &o = plan.buffers[other];
      if (o.bytes && o.first <= buffer.last && buffer.first <= o.last)
        taken.push_back({o.offset, o.offset + o.bytes});
    }
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, finish] : taken) {
      if (offset + buffer.bytes <= begin)
        break;
      offset = std::max(offset, alignUp(finish, alignment));
    }
    buffer.offset = buffer.bytes ? offset : 0;
    plan.arenaBytes = std::max(plan.arenaBytes, buffer.offset + buffer.bytes);
    placed.push_back(id);
  }
  plan.arenaBytes = alignUp(plan.arenaBytes, alignment);

  // One sweep over the instructions: bytes that start and stop living there.
  SmallVector<int64_t> delta(end + 2, 0);
  for (const PlannedBuffer &buffer : plan.buffers) {
    delta[buffer.first] += alignUp(buffer.bytes, alignment);
    delta[buffer.last + 1] -= alignUp(buffer.bytes, alignment);
  }
  int64_t live = 0;
  for (int64_t i = 0; i <= end; ++i) {
    live += delta[i];
    plan.peakLiveBytes = std::max(plan.peakLiveBytes, live);
  }
  return plan;
}

namespace {
struct MemoryPlanPass
    : public par::impl::MemoryPlanPassBase<MemoryPlanPass> {
  using MemoryPlanPassBase::MemoryPlanPassBase;

  void runOnOperation() override {
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      getOperation().emitError()
          << "--par-memory-plan alignment must be a power of two, got "
          << int64_t(alignment);
      return signalPassFailure();
    }
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      SmallVector<bool> persistent;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        persistent.push_back(isParameter(func, i));
      FailureOr<MemoryPlan> plan = planMemory(func, persistent, alignment);
      if (failed(plan))
        return signalPassFailure();
      os << "memory plan of @" << func.getSymName() << ": "
         << plan->buffers.size() << " buffer(s), "
         << plan->instructions.size() << " instruction(s)\n";
      os << llvm::format("  %-4s %-28s %12s %12s %11s\n", "id", "type",
                         "bytes", "offset", "live");
      for (auto [id, buffer] : llvm::enumerate(plan->buffers)) {
        std::string type;
        llvm::raw_string_ostream(type) << buffer.value.getType();
        std::string live = std::to_string(buffer.first) + ".." +
                           std::to_string(buffer.last);
        os << llvm::format("  %-4u %-28s %12lld %12lld %11s\n", unsigned(id),
                           type.c_str(), (long long)buffer.bytes,
                           (long long)buffer.offset, live.c_str());
      }
      os << "  arena: " << plan->arenaBytes << " bytes ("
         << humanBytes(plan->arenaBytes) << "), peak live "
         << plan->peakLiveBytes << " bytes\n";
    }
  }
};
} // namespace
