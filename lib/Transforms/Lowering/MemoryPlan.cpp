//===- MemoryPlan.cpp - Static memory plan, --par-memory-plan -------------===//

#include "par/Transforms/MemoryPlan.h"

#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Runtime/Program.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"
#include "par/Transforms/StepArguments.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>

#define DEBUG_TYPE "par-memory-plan"

namespace mlir::par {
#define GEN_PASS_DEF_MEMORYPLANPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The runtime's type for an MLIR element type.
static std::optional<::par::rt::DType> runtimeDType(Type element) {
  using ::par::rt::DType;
  if (element.isF32())
    return DType::F32;
  if (element.isF16())
    return DType::F16;
  if (element.isBF16())
    return DType::BF16;
  if (element.isF64())
    return DType::F64;
  // Signless integers only: the runtime has no unsigned arithmetic.
  if (element.isSignlessInteger(64))
    return DType::I64;
  if (element.isSignlessInteger(32))
    return DType::I32;
  if (element.isSignlessInteger(1))
    return DType::I1;
  return std::nullopt;
}

std::optional<ProgramDType> mlir::par::programDType(Type type) {
  std::optional<::par::rt::DType> dtype =
      runtimeDType(getElementTypeOrSelf(type));
  if (!dtype)
    return std::nullopt;
  return ProgramDType{::par::rt::dtypeName(*dtype),
                      int64_t(::par::rt::dtypeBytes(*dtype))};
}

FailureOr<ProgramDType> mlir::par::programDType(Type type, Location loc) {
  if (std::optional<ProgramDType> dtype = programDType(type))
    return *dtype;
  InFlightDiagnostic diag = emitError(loc);
  diag << "element type " << getElementTypeOrSelf(type);
  if (type != getElementTypeOrSelf(type))
    diag << " of " << type;
  return diag << " is not supported by the runtime (supported: f32, f16, "
                 "bf16, f64, i64, i32, i1)";
}

bool mlir::par::canWriteInPlace(Operation *op) {
  // A fused group reads an input of the result's type element by element;
  // one of another shape but as many bytes (an expanded broadcast of a
  // wider type) it reads at other indices, so the result must not take
  // its memory. One that ends in a reduction or a normalization reads
  // many elements for each it writes, and one that starts with a dot
  // writes its whole result first.
  if (auto fused = dyn_cast<FusedOp>(op)) {
    // A producer dot's GEMM writes the result before the steps read the
    // inputs (and reads its operands whole).
    if (fused.isReduction() || fused.isNormalization() ||
        fused.getProducerDot())
      return false;
    auto result = cast<RankedTensorType>(fused.getResult().getType());
    return llvm::all_of(fused.getInputs(), [&](Value input) {
      auto type = cast<RankedTensorType>(input.getType());
      return type == result ||
             bytesOf(type.getShape(), type.getElementType()) !=
                 bytesOf(result.getShape(), result.getElementType());
    });
  }
  return op->hasTrait<mlir::par::OpTrait::InPlace>();
}

namespace {
/// Sorted, disjoint, coalesced address ranges [lo, hi).
class RangeSet {
public:
  bool empty() const { return ranges.empty(); }

  void insert(int64_t lo, int64_t hi) {
    // The ranges that overlap or touch [lo, hi) become one.
    auto first = llvm::partition_point(
        ranges, [&](const Range &r) { return r.hi < lo; });
    auto last = first;
    for (; last != ranges.end() && last->lo <= hi; ++last) {
      lo = std::min(lo, last->lo);
      hi = std::max(hi, last->hi);
    }
    if (first == last) {
      ranges.insert(first, {lo, hi});
      return;
    }
    *first = {lo, hi};
    ranges.erase(first + 1, last);
  }

  /// Moves `offset` past every range that meets [offset, offset + bytes)
  /// from there up; whether it moved.
  bool pushPast(int64_t &offset, int64_t bytes) const {
    auto it = llvm::partition_point(
        ranges, [&](const Range &r) { return r.hi <= offset; });
    bool moved = false;
    for (; it != ranges.end() && it->lo < offset + bytes; ++it) {
      offset = it->hi;
      moved = true;
    }
    return moved;
  }

private:
  struct Range {
    int64_t lo, hi;
  };
  SmallVector<Range, 2> ranges;
};

/// The address ranges taken, indexed by the instructions they are taken
/// at: a segment tree over time whose nodes each keep two range sets.
/// A block taken over [first, until] is in `own` of each node of that
/// interval's canonical cover, and in `sub` of those nodes and of every
/// node on the paths from its two end leaves to the root. The blocks that
/// meet a time interval are then exactly those in `sub` of its cover's
/// nodes (blocks with a cover node inside one of them) and in `own` of the
/// nodes on its two paths (blocks whose cover node holds one of them);
/// every block found there does meet it.
class TakenSpace {
public:
  explicit TakenSpace(int64_t times) {
    while (leaves < times)
      leaves <<= 1;
    own.resize(2 * leaves);
    sub.resize(2 * leaves);
  }

  /// The lowest multiple of the alignment (the ranges' ends are) where
  /// `bytes` meet no range taken at an instruction in [first, until].
  int64_t lowestFree(int64_t first, int64_t until, int64_t bytes) {
    sets.clear();
    forCover(first, until, [&](int64_t node) { add(sub[node]); });
    forPaths(first, until, /*leaves=*/false,
             [&](int64_t node) { add(own[node]); });
    int64_t offset = 0;
    // Round the sets until none moves the offset: each move is past a
    // range that meets the block, so the first offset no set moves is the
    // lowest free one.
    for (size_t i = 0, since = 0; since < sets.size();
         i = (i + 1) % sets.size())
      since = sets[i]->pushPast(offset, bytes) ? 1 : since + 1;
    return offset;
  }

  void take(int64_t first, int64_t until, int64_t lo, int64_t hi) {
    forCover(first, until, [&](int64_t node) {
      own[node].insert(lo, hi);
      sub[node].insert(lo, hi);
    });
    forPaths(first, until, /*leaves=*/true,
             [&](int64_t node) { sub[node].insert(lo, hi); });
  }

private:
  void add(const RangeSet &set) {
    if (!set.empty())
      sets.push_back(&set);
  }
  /// The nodes whose ranges cover [first, until] exactly, disjointly.
  template <typename Fn>
  void forCover(int64_t first, int64_t until, Fn fn) const {
    for (int64_t l = first + leaves, r = until + leaves + 1; l < r;
         l >>= 1, r >>= 1) {
      if (l & 1)
        fn(l++);
      if (r & 1)
        fn(--r);
    }
  }
  /// Each node on the paths from the leaves of `first` and `until` (with
  /// them, or from their parents) to the root, once.
  template <typename Fn>
  void forPaths(int64_t first, int64_t until, bool withLeaves, Fn fn) const {
    int64_t l = first + leaves, r = until + leaves;
    if (!withLeaves) {
      l >>= 1;
      r >>= 1;
    }
    for (; l != r; l >>= 1, r >>= 1) {
      fn(l);
      fn(r);
    }
    for (; l >= 1; l >>= 1)
      fn(l);
  }

  int64_t leaves = 1;
  std::vector<RangeSet> own, sub;
  SmallVector<const RangeSet *> sets;
};
} // namespace

SmallVector<int64_t> mlir::par::placeBlocks(ArrayRef<PlacementRequest> blocks,
                                            int64_t alignment) {
  SmallVector<unsigned> order(blocks.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return blocks[a].bytes > blocks[b].bytes;
  });
  int64_t times = 1;
  for (const PlacementRequest &block : blocks)
    times = std::max(times, block.until + 1);
  TakenSpace taken(times);
  SmallVector<int64_t> offsets(blocks.size(), 0);
  for (unsigned id : order) {
    const PlacementRequest &block = blocks[id];
    if (!block.bytes)
      continue;
    int64_t offset = taken.lowestFree(block.first, block.until, block.bytes);
    offsets[id] = offset;
    // Taken up to the next aligned offset: for aligned offsets the same
    // test, and neighbours coalesce.
    taken.take(block.first, block.until, offset,
               alignUp(offset + block.bytes, alignment));
  }
  return offsets;
}

FailureOr<MemoryPlan> mlir::par::planMemory(func::FuncOp func,
                                            ArrayRef<bool> persistent,
                                            int64_t alignment,
                                            bool asyncCollectives) {
  MemoryPlan plan;
  plan.alignment = alignment;
  plan.asyncCollectives = asyncCollectives;
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
    FailureOr<ProgramDType> dtype = programDType(type, value.getLoc());
    if (failed(dtype))
      return failure();
    // The runtime's limit per buffer also keeps the arena's sums in range.
    int64_t elements = llvm::is_contained(type.getShape(), 0) ? 0 : 1;
    for (int64_t size : type.getShape()) {
      if (elements && elements > ::par::rt::kMaxBufferElements / size)
        return emitError(value.getLoc())
               << "cannot plan memory for a value of type " << type
               << ": more than 2^40 elements per device, the runtime's limit";
      elements *= size;
    }
    PlannedBuffer buffer;
    buffer.value = value;
    buffer.bytes = elements * dtype->bytes;
    buffer.first = buffer.last = first;
    plan.bufferOf[value] = plan.buffers.size();
    plan.buffers.push_back(buffer);
    return success();
  };
  for (BlockArgument arg : body.getArguments())
    if (failed(addBuffer(arg, 0)))
      return failure();
  DenseMap<Operation *, int64_t> indexOf;
  for (auto [index, op] : llvm::enumerate(plan.instructions)) {
    indexOf[op] = int64_t(index);
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
  Operation *terminator = body.getTerminator();
  for (Value returned : terminator->getOperands())
    plan.buffers[plan.bufferOf.lookup(returned)].last = end;

  // A collective in flight still reads its operand: keep it until the
  // first reader of the result (where the executor waits for it).
  if (asyncCollectives)
    for (auto [index, op] : llvm::enumerate(plan.instructions)) {
      auto collective = dyn_cast<CollectiveOpInterface>(op);
      if (!collective || !collective.communicates())
        continue;
      int64_t wait = end;
      for (Value result : op->getResults())
        for (Operation *user : result.getUsers())
          wait =
              std::min(wait, user == terminator ? end : indexOf.lookup(user));
      for (Value operand : op->getOperands()) {
        auto it = plan.bufferOf.find(operand);
        if (it != plan.bufferOf.end())
          plan.buffers[it->second].last =
              std::max(plan.buffers[it->second].last, wait);
      }
    }

  // A pipeline stage's send is in flight until the receive that matches
  // it has been posted: its buffer stays taken up to the last instruction
  // before the first one after that receive in the step's global order
  // (par.order, par.matched), where the executor waits for it.
  for (auto [index, op] : llvm::enumerate(plan.instructions)) {
    auto matched = op->getAttrOfType<IntegerAttr>(ParDialect::kMatchedAttrName);
    if (!isa<SendOp>(op) || !matched)
      continue;
    int64_t wait = end;
    for (int64_t later = int64_t(index) + 1; later < end; ++later) {
      auto order = plan.instructions[later]->getAttrOfType<IntegerAttr>(
          ParDialect::kOrderAttrName);
      if (order && order.getInt() > matched.getInt()) {
        wait = later;
        break;
      }
    }
    auto it = plan.bufferOf.find(op->getOperand(0));
    if (it != plan.bufferOf.end())
      plan.buffers[it->second].last =
          std::max(plan.buffers[it->second].last, wait - 1);
  }

  // A parameter stays in place from step to step, so it lives to the end,
  // unless the result that replaces it can take over its memory: then the
  // argument dies at its last reader and the result lives on in its place.
  SmallVector<bool> claimed(body.getNumArguments(), false);
  for (auto [index, returned] : llvm::enumerate(terminator->getOperands())) {
    std::optional<unsigned> target = getUpdatedArgument(func, index);
    Operation *def = returned.getDefiningOp();
    if (!target || !def)
      continue;
    unsigned argNumber = *target;
    PlannedBuffer &arg =
        plan.buffers[plan.bufferOf.lookup(body.getArgument(argNumber))];
    PlannedBuffer &result = plan.buffers[plan.bufferOf.lookup(returned)];
    int64_t at = indexOf.lookup(def);
    bool readThere = llvm::is_contained(def->getOperands(), arg.value);
    if (claimed[argNumber] || result.reuses >= 0 || arg.bytes != result.bytes ||
        arg.last > at || (arg.last == at && readThere && !canWriteInPlace(def)))
      continue;
    claimed[argNumber] = true;
    result.reuses = int(plan.bufferOf.lookup(arg.value));
  }
  for (BlockArgument arg : body.getArguments())
    if (arg.getArgNumber() < persistent.size() &&
        persistent[arg.getArgNumber()] && !claimed[arg.getArgNumber()])
      plan.buffers[plan.bufferOf.lookup(arg)].last = end;

  // An argument and the result that reuses it are placed as one block
  // over both live ranges.
  for (PlannedBuffer &buffer : plan.buffers)
    buffer.until = buffer.last;
  for (const PlannedBuffer &buffer : plan.buffers)
    if (buffer.reuses >= 0)
      plan.buffers[buffer.reuses].until = buffer.last;

  // Greedy by size (placeBlocks); a result that reuses an argument's
  // memory takes its offset.
  SmallVector<unsigned> placedIds;
  SmallVector<PlacementRequest> requests;
  for (auto [i, buffer] : llvm::enumerate(plan.buffers))
    if (buffer.reuses < 0) {
      placedIds.push_back(unsigned(i));
      requests.push_back({buffer.bytes, buffer.first, buffer.until});
    }
  SmallVector<int64_t> offsets = placeBlocks(requests, alignment);
  for (auto [id, offset] : llvm::zip_equal(placedIds, offsets)) {
    PlannedBuffer &buffer = plan.buffers[id];
    buffer.offset = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, buffer.offset + buffer.bytes);
  }
  for (PlannedBuffer &buffer : plan.buffers)
    if (buffer.reuses >= 0)
      buffer.offset = plan.buffers[buffer.reuses].offset;
  plan.arenaBytes = alignUp(plan.arenaBytes, alignment);

  SmallVector<int64_t> live = liveBytes(plan);
  for (auto [i, bytes] : llvm::enumerate(live))
    if (bytes > plan.peakLiveBytes) {
      plan.peakLiveBytes = bytes;
      plan.peakInstruction = int64_t(i);
    }
  return plan;
}

SmallVector<int64_t> mlir::par::liveBytes(const MemoryPlan &plan) {
  // One sweep over the instructions: bytes that start and stop living there
  // (a reused block counted once).
  int64_t end = int64_t(plan.instructions.size());
  SmallVector<int64_t> delta(end + 2, 0);
  for (const PlannedBuffer &buffer : plan.buffers) {
    if (buffer.reuses >= 0)
      continue;
    delta[buffer.first] += alignUp(buffer.bytes, plan.alignment);
    delta[buffer.until + 1] -= alignUp(buffer.bytes, plan.alignment);
  }
  SmallVector<int64_t> live(end + 1, 0);
  int64_t now = 0;
  for (int64_t i = 0; i <= end; ++i)
    live[i] = now += delta[i];
  return live;
}

bool mlir::par::isActivation(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || !inPhase(def, Phase::forward) || getCopyOf(def) ||
      getViewOf(def))
    return false;
  return llvm::any_of(value.getUsers(), [](Operation *user) {
    std::optional<Phase> phase = getPhase(user);
    return phase && *phase != Phase::forward;
  });
}

LayerActivations mlir::par::activationsByLayer(const MemoryPlan &plan) {
  LayerActivations result;
  for (const PlannedBuffer &buffer : plan.buffers) {
    if (buffer.reuses >= 0 || !isActivation(buffer.value))
      continue;
    if (std::optional<int64_t> layer =
            getLayer(buffer.value.getDefiningOp()))
      result.byLayer[*layer] += buffer.bytes;
    else
      result.outside += buffer.bytes;
  }
  return result;
}

std::map<int64_t, double> mlir::par::recomputedFlops(const MemoryPlan &plan) {
  std::map<int64_t, double> flops;
  for (Operation *op : plan.instructions)
    if (isRecomputed(op))
      if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
        flops[getLayer(op).value_or(-1)] += rule.getWork().flops;
  return flops;
}

std::optional<Phase> mlir::par::peakPhase(const MemoryPlan &plan) {
  if (plan.peakInstruction >= int64_t(plan.instructions.size()))
    return std::nullopt;
  return getPhase(plan.instructions[plan.peakInstruction]);
}

FailureOr<MemoryPlan> mlir::par::planMemory(func::FuncOp func,
                                            int64_t alignment,
                                            bool asyncCollectives) {
  SmallVector<bool> persistent;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    persistent.push_back(isParameter(func, i));
  return planMemory(func, persistent, alignment, asyncCollectives);
}

LogicalResult mlir::par::checkAlignment(Operation *anchor, StringRef pass,
                                        int64_t alignment) {
  if (alignment > 0 && alignment <= ::par::rt::kMaxAlignment &&
      !(alignment & (alignment - 1)))
    return success();
  return anchor->emitError()
         << "--" << pass << " alignment must be a power of two up to 2^20, got "
         << alignment;
}

namespace {
struct MemoryPlanPass
    : public mlir::par::impl::MemoryPlanPassBase<MemoryPlanPass> {
  using MemoryPlanPassBase::MemoryPlanPassBase;

  void runOnOperation() override {
    if (failed(checkAlignment(getOperation(), "par-memory-plan", alignment)))
      return signalPassFailure();
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      FailureOr<MemoryPlan> plan =
          planMemory(func, alignment, asyncCollectives);
      if (failed(plan))
        return signalPassFailure();
      os << "memory plan of @" << func.getSymName() << ": "
         << plan->buffers.size() << " buffer(s), " << plan->instructions.size()
         << " instruction(s)\n";
      os << llvm::format("  %-4s %-28s %12s %12s %11s\n", "id", "type", "bytes",
                         "offset", "live");
      for (auto [id, buffer] : llvm::enumerate(plan->buffers)) {
        std::string type;
        llvm::raw_string_ostream(type) << buffer.value.getType();
        std::string live =
            std::to_string(buffer.first) + ".." + std::to_string(buffer.last);
        os << llvm::format("  %-4u %-28s %12lld %12lld %11s", unsigned(id),
                           type.c_str(), (long long)buffer.bytes,
                           (long long)buffer.offset, live.c_str());
        if (buffer.reuses >= 0)
          os << "  in place of " << buffer.reuses;
        // The phase of the step that makes the buffer (training steps).
        if (Operation *def = buffer.value.getDefiningOp())
          if (std::optional<Phase> phase = getPhase(def))
            os << "  " << stringifyPhase(*phase);
        os << "\n";
      }
      os << "  arena: " << plan->arenaBytes << " bytes ("
         << humanBytes(plan->arenaBytes) << "), peak live "
         << plan->peakLiveBytes << " bytes at instruction "
         << plan->peakInstruction;
      if (std::optional<Phase> phase = peakPhase(*plan))
        os << " (" << stringifyPhase(*phase) << " phase)";
      os << "\n";
    }
  }
};
} // namespace
