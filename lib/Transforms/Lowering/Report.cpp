//===- Report.cpp - --par-report: memory by category and traffic ----------===//
//
// For each function, from the same memory plan --par-emit-program writes:
// every buffer of a rank falls in one category (parameters, gradients,
// optimizer states, activations, data, temporaries); the report gives each
// category's bytes, the most of it live at once and its share of the
// planned peak, then the collectives of one step grouped by kind and mesh
// axes. The numbers are those par-run allocates and sends.
//
// A training step built by --par-autodiff (and --par-zero) is read from its
// marks (TrainingStep.h) and its optimizer updates (OptimizerUpdateOpInterface:
// master weight and states). The parameter a rank computes with is the
// master, or the working copy marked par.copy_of (the low-precision
// convert, or ZeRO stage 1 and 2's copy gathered once per step); the
// gradient held is the one the update reads, followed back through the
// optimizer phase's conversion, unscaling and clipping (ops marked
// par.gradient_of) to the backward pass's result after its data-parallel
// reduction, unless that reduction is deferred to the update (`par.late`,
// ZeRO stage 1: the full gradient is held). Results of forward-phase ops
// that later phases read are activations; everything else is temporary.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/CostModel.h"
#include "par/Transforms/Fusion.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"
#include "par/Transforms/ReportFormat.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <map>
#include <set>

#define DEBUG_TYPE "par-report"

namespace mlir::par {
#define GEN_PASS_DEF_REPORTPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
enum Category { Parameters, Gradients, States, Activations, Data, Temporaries };
constexpr unsigned kNumCategories = 6;
const char *const kCategoryNames[kNumCategories] = {
    "parameters",  "gradients", "optimizer states",
    "activations", "data",      "temporaries"};

struct Classified {
  SmallVector<Category> of;   // per buffer
  int64_t parameterCount = 0; // global elements of the parameters
  /// Bytes of optimizer states that belong to no parameter (step counter,
  /// loss scale and its counters).
  int64_t counterBytes = 0;
};

/// Global elements of a tensor argument (its view's, for a flat one); 0
/// for anything else (the emitter, not the report, says what a program
/// cannot take).
int64_t globalElements(func::FuncOp func, BlockArgument arg) {
  // A flat view's padding is no parameter.
  if (std::optional<SmallVector<int64_t>> view =
          getViewShape(func, arg.getArgNumber()))
    return ShapedType::getNumElements(*view);
  Type type = arg.getType();
  if (auto global = func.getArgAttrOfType<TypeAttr>(
          arg.getArgNumber(), ParDialect::kGlobalTypeAttrName))
    type = global.getValue();
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

/// The copy of each master the step computes with all step long: the last
/// op marked par.copy_of it (a later copy is made from an earlier one) that
/// is not a late per-use gather; a master without one computes itself.
DenseMap<int64_t, Value> workingCopies(Block &body) {
  DenseMap<int64_t, Value> copies;
  for (Operation &op : body)
    if (std::optional<int64_t> master = getCopyOf(&op))
      if (!isLate(&op))
        copies[*master] = op.getResult(0);
  return copies;
}

/// The master `update` reads: its parameter operand, or the argument that
/// operand relays out (a plan that splits the update over more axes than
/// the parameter, --auto-shard's optimizer-states role, reads it through a
/// constraint, which partitioning turns into collectives); null if none.
BlockArgument masterOf(OptimizerUpdateOpInterface update) {
  Value read = update.getParam();
  while (Operation *def = read.getDefiningOp()) {
    if (def->getNumOperands() != 1 || def->getNumResults() != 1 ||
        !isa<CollectiveOpInterface, ShardingConstraintOp>(def))
      return nullptr;
    read = def->getOperand(0);
  }
  return dyn_cast<BlockArgument>(read);
}

/// The gradient buffer that `update` holds (see the file comment).
Value heldGradient(OptimizerUpdateOpInterface update) {
  int64_t param = -1;
  if (BlockArgument arg = masterOf(update))
    param = arg.getArgNumber();
  Value grad = update.getGrad();
  // Back through the optimizer phase's work on this parameter's gradient.
  while (Operation *def = grad.getDefiningOp()) {
    if (!inPhase(def, Phase::optimizer) || isa<CollectiveOpInterface>(def) ||
        !isGradientOf(def, param))
      break;
    auto from = llvm::find_if(def->getOperands(), [&](Value operand) {
      return isGradientOf(operand.getDefiningOp(), param);
    });
    if (from == def->getOperands().end())
      break;
    grad = *from;
  }
  Operation *def = grad.getDefiningOp();
  // (A bucket of one is the collective itself; a combined bucket is read
  // through the piece cut out of it, below.)
  if (def && isa<CollectiveOpInterface>(def) && def->getNumOperands() == 1 &&
      isLate(def))
    return def->getOperand(0);
  // A deferred reduction in a bucket (--par-combine-collectives): the
  // update reads its piece cut out of the bucket; the full gradient held is
  // the one packed into it (through the packing's reshapes and transposes).
  auto single = [](Operation *op) {
    return op && op->getNumOperands() == 1 && op->getNumResults() == 1 &&
           isMemoryEffectFree(op) && !isa<CollectiveOpInterface>(op);
  };
  Operation *bucket = nullptr;
  for (Operation *op = def; single(op);) {
    Operation *in = op->getOperand(0).getDefiningOp();
    if (in && isa<CollectiveOpInterface>(in)) {
      bucket = in;
      break;
    }
    op = in;
  }
  if (bucket && isLate(bucket) && bucket->hasAttr(ParDialect::kBucketAttrName))
    if (Operation *joined = bucket->getOperand(0).getDefiningOp())
      for (Value packed : joined->getOperands()) {
        Value root = packed;
        while (single(root.getDefiningOp()) &&
               getGradientOf(root.getDefiningOp()).empty())
          root = root.getDefiningOp()->getOperand(0);
        if (isGradientOf(root.getDefiningOp(), param))
          return root;
      }
  return grad;
}

Classified classify(func::FuncOp func, const MemoryPlan &plan) {
  Classified result;
  result.of.assign(plan.buffers.size(), Temporaries);
  Block &body = func.getBody().front();
  auto set = [&](Value value, Category category) {
    auto it = plan.bufferOf.find(value);
    if (it != plan.bufferOf.end())
      result.of[it->second] = category;
  };
  for (BlockArgument arg : body.getArguments())
    set(arg, isParameter(func, arg.getArgNumber()) ? Parameters : Data);

  // Optimizer states: the update ops' state operands, and whatever else a
  // step replaces that is not a parameter (step counter, loss scale).
  SmallVector<OptimizerUpdateOpInterface> updates;
  for (Operation &op : body)
    if (auto update = dyn_cast<OptimizerUpdateOpInterface>(op))
      updates.push_back(update);
  DenseSet<Value> masters;
  for (OptimizerUpdateOpInterface update : updates) {
    if (BlockArgument param = masterOf(update))
      masters.insert(param);
    for (Value state : update.getStates())
      if (auto arg = dyn_cast<BlockArgument>(state))
        set(arg, States);
  }
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (std::optional<unsigned> target = getUpdatedArgument(func, r)) {
      BlockArgument arg = body.getArgument(*target);
      unsigned id = plan.bufferOf.lookup(arg);
      if (!masters.contains(arg) && result.of[id] != States) {
        set(arg, States);
        result.counterBytes += plan.buffers[id].bytes;
      }
    }

  DenseMap<int64_t, Value> copies = workingCopies(body);
  // Parameters: each master, or the copy the step computes with (then the
  // master counts as an optimizer state, as mixed-precision training
  // counts fp32 master weights).
  for (BlockArgument arg : body.getArguments()) {
    if (!masters.contains(arg)) {
      if (isParameter(func, arg.getArgNumber()) &&
          result.of[plan.bufferOf.lookup(arg)] == Parameters)
        result.parameterCount += globalElements(func, arg);
      continue;
    }
    result.parameterCount += globalElements(func, arg);
    Value copy = copies.lookup(arg.getArgNumber());
    if (!copy)
      copy = arg;
    if (copy != arg) {
      set(arg, States);
      set(copy, Parameters);
    }
  }
  for (OptimizerUpdateOpInterface update : updates)
    set(heldGradient(update), Gradients);

  // Activations: results of the forward pass that later phases read.
  for (Operation &op : body) {
    if (!inPhase(&op, Phase::forward))
      continue;
    for (Value value : op.getResults()) {
      auto it = plan.bufferOf.find(value);
      if (it == plan.bufferOf.end() || result.of[it->second] != Temporaries)
        continue;
      if (isActivation(value))
        result.of[it->second] = Activations;
    }
  }
  // A buffer written over another holds the same thing.
  for (auto [id, buffer] : llvm::enumerate(plan.buffers))
    if (buffer.reuses >= 0)
      result.of[id] = result.of[buffer.reuses];
  return result;
}

struct MemoryRow {
  int64_t buffers = 0, bytes = 0, mostLive = 0, atPeak = 0;
};

struct CommRow {
  int64_t count = 0, elements = 0, volume = 0, bytes = 0, sent = 0;
};

void printTraffic(
    const std::map<std::pair<std::string, std::string>, CommRow> &byKind,
    const CommRow &sum, llvm::raw_ostream &os);

/// `layers` as ranges: "0-3, 5, 7-8".
std::string layerRanges(ArrayRef<int64_t> layers) {
  std::string text;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1)
      ++j;
    if (!text.empty())
      text += ", ";
    text += std::to_string(layers[i]);
    if (j > i)
      text += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return text;
}

/// A pipeline stage (docs/pipelines.md): what it sends and receives per
/// step, and the bubble the schedule predicts from every stage's FLOPs.
void reportStage(func::FuncOp func, const MemoryPlan &plan,
                 llvm::raw_ostream &os) {
  auto of = func->getAttrOfType<StringAttr>(ParDialect::kStageOfAttrName);
  std::optional<PipelineInfo> info = getPipeline(func);
  if (!of || !info)
    return;
  auto step = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      func, FlatSymbolRefAttr::get(of));
  if (!step)
    return;
  int64_t sends = 0, sent = 0, recvs = 0, received = 0;
  auto bytesOf = [&](Value v) {
    return plan.buffers[plan.bufferOf.lookup(v)].bytes;
  };
  for (Operation *op : plan.instructions) {
    if (auto send = dyn_cast<SendOp>(op)) {
      ++sends;
      sent += bytesOf(send.getInput());
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      ++recvs;
      received += bytesOf(recv.getResult());
    }
  }
  SlotTimes work = stageWork(func->getParentOfType<ModuleOp>(), step, *info);
  ScheduleTimes times = simulateSchedule(*info, work);
  auto stage = func->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName);
  int64_t device = stage ? stage.getInt() : 0;
  os << "pipeline stage " << device << " of " << info->stages << " over '"
     << info->axis << "' (" << info->schedule;
  if (info->virtualStages > 1)
    os << ", " << info->virtualStages << " chunks per device";
  os << ", " << info->microbatches << " micro-batches"
     << (info->dividedBatch ? " dividing the step's batch" : "") << "):\n";
  // The model layers it runs (a receive carries its sender's layer).
  std::set<int64_t> layerSet;
  func.walk([&](Operation *op) {
    if (inPhase(op, Phase::forward) && !isa<SendOp, RecvOp>(op))
      if (std::optional<int64_t> layer = getLayer(op))
        layerSet.insert(*layer);
  });
  SmallVector<int64_t> layers(layerSet.begin(), layerSet.end());
  os << "  holds " << (layers.size() == 1 ? "layer " : "layers ")
     << layerRanges(layers) << "\n";
  os << "  transfers per step: " << sends << " sent (" << humanBytes(sent)
     << "), " << recvs << " received (" << humanBytes(received) << ")\n";
  StringRef formula = info->schedule == "interleaved" ? "(p-1)/(v*m)"
                      : info->schedule == "zb-h1"     ? "(p-1)(F+B-W)/(m(F+B+W))"
                                                      : "(p-1)/m";
  os << llvm::format("  predicted bubble %.3f (idle over busy time on the "
                     "busiest stage; %s = %.3f)\n",
                     times.bubble, formula.str().c_str(),
                     formulaBubble(*info, work));
}

/// The activations each layer keeps (the activations category by the
/// layer of the op that makes them), what --par-remat chose, and the FLOPs
/// a device spends recomputing.
void reportLayers(func::FuncOp func, const MemoryPlan &plan,
                  llvm::raw_ostream &os) {
  LayerActivations activations = activationsByLayer(plan);
  const std::map<int64_t, int64_t> &byLayer = activations.byLayer;
  int64_t outside = activations.outside;
  auto record = func->getAttrOfType<DictionaryAttr>(ParDialect::kRematAttrName);
  if (byLayer.empty() && !record)
    return;
  double flops = totalFlops(func), recomputed = 0;
  for (auto &[layer, work] : recomputedFlops(plan))
    recomputed += work;
  os << "activations by layer (kept from the forward pass for later "
        "phases):\n";
  // Layers in number order, those with the same bytes on one line.
  std::map<int64_t, SmallVector<int64_t>> layersOf;
  for (auto [layer, bytes] : byLayer)
    layersOf[bytes].push_back(layer);
  for (auto &[bytes, layers] : layersOf)
    os << "  " << (layers.size() > 1 ? "layers " : "layer ")
       << layerRanges(layers) << ": " << bytes << " bytes ("
       << humanBytes(bytes) << ")" << (layers.size() > 1 ? " each" : "")
       << "\n";
  os << "  outside layers: " << outside << " bytes (" << humanBytes(outside)
     << ")\n";
  if (record) {
    StringRef asked = record.getAs<StringAttr>("mode").getValue();
    os << "  remat " << asked;
    if (auto budget = record.getAs<IntegerAttr>("budget"))
      os << " under a budget of " << humanBytes(budget.getInt())
         << " per device";
    auto layers = record.getAs<DenseI64ArrayAttr>("layers");
    auto modes = record.getAs<ArrayAttr>("modes");
    if (layers && modes && layers.size() == int64_t(modes.size())) {
      std::map<std::string, SmallVector<int64_t>> byMode;
      for (auto [layer, mode] : llvm::zip(layers.asArrayRef(), modes))
        if (auto name = dyn_cast<StringAttr>(mode))
          byMode[name.str()].push_back(layer);
      for (auto &entry : byMode)
        llvm::sort(entry.second);
      if (byMode.size() == 1 && byMode.begin()->first == asked)
        os << " on layers " << layerRanges(byMode.begin()->second);
      else
        for (auto [i, entry] : llvm::enumerate(byMode))
          os << (i ? "; " : ": ") << entry.first << " on layers "
             << layerRanges(entry.second);
    }
    os << "\n";
  }
  os << "  recomputed FLOPs: " << llvm::format("%.6g", recomputed)
     << " per device"
     << llvm::format(" (%.1f %% of the call's %.6g)",
                     flops > 0 ? 100 * recomputed / flops : 0.0, flops)
     << "\n";
}

void reportFunction(func::FuncOp func, const MemoryPlan &plan,
                    llvm::raw_ostream &os) {
  Classified classes = classify(func, plan);
  int64_t end = int64_t(plan.instructions.size());
  int64_t align = plan.alignment;
  auto aligned = [&](int64_t bytes) {
    return (bytes + align - 1) / align * align;
  };

  // Bytes live per instruction, per category (raw) and in all (aligned).
  std::vector<std::array<int64_t, kNumCategories>> live(
      end + 2, std::array<int64_t, kNumCategories>{});
  SmallVector<int64_t> total(end + 2, 0);
  MemoryRow rows[kNumCategories];
  for (auto [id, buffer] : llvm::enumerate(plan.buffers)) {
    if (buffer.reuses >= 0)
      continue;
    Category category = classes.of[id];
    rows[category].buffers += 1;
    rows[category].bytes += buffer.bytes;
    live[buffer.first][category] += buffer.bytes;
    live[buffer.until + 1][category] -= buffer.bytes;
    total[buffer.first] += aligned(buffer.bytes);
    total[buffer.until + 1] -= aligned(buffer.bytes);
  }
  std::array<int64_t, kNumCategories> now{};
  int64_t nowTotal = 0, peak = -1, peakAt = 0;
  std::array<int64_t, kNumCategories> atPeak{};
  for (int64_t i = 0; i <= end; ++i) {
    nowTotal += total[i];
    for (unsigned c = 0; c < kNumCategories; ++c) {
      now[c] += live[i][c];
      rows[c].mostLive = std::max(rows[c].mostLive, now[c]);
    }
    if (nowTotal > peak) {
      peak = nowTotal;
      peakAt = i;
      atPeak = now;
    }
  }

  os << "== report of @" << func.getSymName() << " (per device, one call) ==\n";
  if (func->hasAttr(ParDialect::kZeroAttrName)) {
    os << "ZeRO stage " << getZeroStage(func);
    if (!getDataAxis(func).empty())
      os << " over " << getDataAxis(func);
    os << "; ";
  }
  os << "parameters: " << classes.parameterCount << " elements (global), "
     << plan.instructions.size() << " instructions\n";
  os << "memory:\n";
  os << llvm::format("  %-22s %8s %14s %14s %14s\n", "category", "buffers",
                     "bytes", "most live", "at peak");
  int64_t sumAtPeak = 0;
  for (unsigned c = 0; c < kNumCategories; ++c) {
    os << llvm::format("  %-22s %8lld %14lld %14lld %14lld\n",
                       kCategoryNames[c], (long long)rows[c].buffers,
                       (long long)rows[c].bytes, (long long)rows[c].mostLive,
                       (long long)atPeak[c]);
    sumAtPeak += atPeak[c];
  }
  os << llvm::format("  %-22s %8s %14s %14s %14lld\n", "alignment padding", "",
                     "", "", (long long)(peak - sumAtPeak));
  os << llvm::format("  %-22s %8s %14s %14s %14lld\n", "fragmentation", "", "",
                     "", (long long)(plan.arenaBytes - peak));
  os << "  planned peak: " << plan.arenaBytes << " bytes ("
     << humanBytes(plan.arenaBytes)
     << ") per device, the arena par-run allocates; most live at instruction "
     << peakAt << "\n";
  int64_t modelStates =
      rows[Parameters].bytes + rows[Gradients].bytes + rows[States].bytes;
  os << "  model states (parameters + gradients + optimizer states): "
     << modelStates << " bytes";
  if (classes.parameterCount > 0) {
    int64_t perParameter = modelStates - classes.counterBytes;
    os << llvm::format(" = %.4f x %lld parameters",
                       double(perParameter) / double(classes.parameterCount),
                       (long long)classes.parameterCount);
    if (classes.counterBytes)
      os << " + " << classes.counterBytes
         << " bytes of counters (step, loss scale)";
  }
  os << "\n";

  reportLayers(func, plan, os);
  reportStage(func, plan, os);

  os << "communication per call:\n";
  if (!func->hasAttr(ParDialect::kPartitionedAttrName)) {
    os << "  not partitioned (run --par-partition first)\n";
    return;
  }
  std::map<std::pair<std::string, std::string>, CommRow> byKind;
  CommRow sum;
  for (Operation *op : plan.instructions)
    if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
      CollectiveCost cost = collective.getCost();
      // One that moves nothing (its pieces all local) is a copy.
      if (!cost.moves)
        continue;
      for (CommRow *row : {&byKind[{cost.name, cost.axes}], &sum}) {
        row->count += 1;
        row->elements += cost.elements;
        row->volume += cost.volume;
        row->bytes += cost.bytes;
        row->sent += cost.sent;
      }
    }
  if (byKind.empty()) {
    os << "  no collectives\n";
    return;
  }
  printTraffic(byKind, sum, os);
  // Buckets of gradient all-reduces (--par-autodiff bucket=).
  // And of parameter all-gathers (ZeRO's working copies and stage-3
  // gathers, in buckets of the same size).
  int64_t buckets = 0, gradients = 0, largest = 0;
  int64_t gathers = 0, parameters = 0, largestGather = 0;
  for (Operation *op : plan.instructions)
    if (auto bucket =
            op->getAttrOfType<IntegerAttr>(ParDialect::kBucketAttrName)) {
      int64_t bytes = cast<CollectiveOpInterface>(op).getCost().bytes;
      if (isa<AllGatherOp>(op)) {
        gathers += 1;
        parameters += bucket.getInt();
        largestGather = std::max(largestGather, bytes);
        continue;
      }
      buckets += 1;
      gradients += bucket.getInt();
      largest = std::max(largest, bytes);
    }
  if (buckets)
    os << "  gradient buckets: " << buckets << " collective(s) of "
       << gradients << " gradient(s), the largest " << humanBytes(largest)
       << "\n";
  if (gathers)
    os << "  parameter buckets: " << gathers << " all-gather(s) of "
       << parameters << " parameter(s), the largest "
       << humanBytes(largestGather) << "\n";
}

void printTraffic(
    const std::map<std::pair<std::string, std::string>, CommRow> &byKind,
    const CommRow &sum, llvm::raw_ostream &os) {
  os << llvm::format("  %-22s %-10s %6s %14s %14s %14s\n", "collective", "axes",
                     "count", "elements", "moved", "sent bytes");
  for (auto &[key, row] : byKind)
    os << llvm::format("  %-22s %-10s %6lld %14lld %14lld %14lld\n",
                       key.first.c_str(), key.second.c_str(),
                       (long long)row.count, (long long)row.elements,
                       (long long)row.volume, (long long)row.sent);
  os << llvm::format("  %-22s %-10s %6lld %14lld %14lld %14lld\n", "total", "",
                     (long long)sum.count, (long long)sum.elements,
                     (long long)sum.volume, (long long)sum.sent);
  os << "  (moved: elements per device, an all-reduce counted as a "
        "reduce-scatter plus an all-gather; sent: bytes per device with ring "
        "algorithms)\n";
}

struct ReportPass : public mlir::par::impl::ReportPassBase<ReportPass> {
  using ReportPassBase::ReportPassBase;

  /// Kernels and planned peak with fusion against the same function with
  /// its groups inlined again (planned on a copy).
  LogicalResult reportFusion(func::FuncOp func, const MemoryPlan &plan,
                             llvm::raw_ostream &os) {
    FusionCounts counts = countFusion(func);
    if (!counts.groups && !func->hasAttr(ParDialect::kBatchUpdatesAttrName))
      return success();
    OpBuilder builder(func);
    builder.setInsertionPointAfter(func);
    auto copy = cast<func::FuncOp>(builder.clone(*func));
    copy.setSymName((func.getSymName() + ".unfused").str());
    inlineFusedGroups(copy);
    FailureOr<MemoryPlan> unfused =
        planMemory(copy, alignment, asyncCollectives);
    int64_t unfusedKernels = 0, kernels = 0;
    auto isKernel = [](Operation *op) {
      auto collective = dyn_cast<CollectiveOpInterface>(op);
      return !collective || !collective.communicates();
    };
    for (Operation *op : plan.instructions)
      kernels += isKernel(op);
    if (succeeded(unfused))
      for (Operation *op : unfused->instructions)
        unfusedKernels += isKernel(op);
    int64_t unfusedPeak = succeeded(unfused) ? unfused->arenaBytes : -1;
    copy.erase();
    if (failed(unfused))
      return failure();
    // Optimizer updates that run as batches (the multi-tensor optimizer)
    // are one launch each.
    int64_t updates = 0, batched = 0, batches = 0, launches = kernels;
    for (Operation *op : plan.instructions)
      updates += isa<AdamWOp, SgdOp>(op);
    if (func->hasAttr(ParDialect::kBatchUpdatesAttrName))
      for (auto [first, count] : updateBatches(plan)) {
        ++batches;
        batched += int64_t(count);
        launches -= int64_t(count) - 1;
      }
    if (counts.groups)
      os << "fusion: " << counts.groups << " fused groups run " << counts.ops
         << " ops; compute kernels " << kernels << " (" << unfusedKernels
         << " unfused); planned peak " << humanBytes(plan.arenaBytes) << " ("
         << humanBytes(unfusedPeak) << " unfused)\n";
    if (updates)
      os << "fusion: " << batched << " of " << updates
         << " optimizer updates in " << batches << " batch(es); launches "
         << launches << " (compute kernels, a batch counted once)\n";
    return success();
  }

  /// What --auto-shard chose (par.auto_shard) and the best alternatives it
  /// considered, each with why it lost.
  void reportPlan(DictionaryAttr plan, llvm::raw_ostream &os) {
    auto text = [&](StringRef key) {
      auto value = plan.getAs<StringAttr>(key);
      return value ? value.str() : std::string("?");
    };
    auto integer = [&](StringRef key) {
      auto value = plan.getAs<IntegerAttr>(key);
      return value ? value.getInt() : int64_t(0);
    };
    auto number = [&](StringRef key) {
      auto value = plan.getAs<FloatAttr>(key);
      return value ? value.getValueAsDouble() : 0.0;
    };
    os << "auto-shard plan on '" << text("profile") << "' (limit "
       << humanBytes(integer("memory_limit")) << " per device; "
       << integer("considered") << " plans considered"
       << (integer("pruned") > 0
               ? " and " + std::to_string(integer("pruned")) + " pruned"
               : std::string())
       << (integer("unpruned") > 0
               ? " (" + std::to_string(integer("unpruned")) +
                     " pruned, then made again: it could have been checked)"
               : std::string())
       << (plan.get("fused") ? ", for the --par-fuse program" : "") << "):\n";
    os << "  chosen: " << text("plan") << " (ZeRO stage " << integer("zero");
    // Recomputation, where the plan has some: chosen, or the user's.
    if (auto remat = plan.getAs<StringAttr>("remat");
        remat && remat.getValue() != "none")
      os << "; remat " << remat.getValue()
         << (remat.getValue() == "given" ? " by --par-remat" : "");
    os << ")\n";
    os << "  axes:";
    if (auto axes = plan.getAs<DictionaryAttr>("axes"))
      for (NamedAttribute axis : axes)
        if (auto role = dyn_cast<StringAttr>(axis.getValue()))
          os << " " << axis.getName().getValue() << "=" << role.getValue();
    os << "\n";
    // The search's estimate (older records: the integer program's total).
    bool searchEstimate = bool(plan.get("estimated_seconds"));
    os << llvm::format(
              "  predicted step %.6g s (the %s estimate: %.6g s), "
              "memory ",
              number("step_seconds"),
              searchEstimate ? "search's" : "integer program's",
              number(searchEstimate ? "estimated_seconds" : "planned_seconds"))
       << humanBytes(integer("memory_bytes")) << " per device";
    // The search's own estimate of the memory, which the check replaced.
    if (plan.get("estimated_bytes"))
      os << " (the search's estimate: "
         << humanBytes(integer("estimated_bytes")) << ")";
    os << "\n";
    // schedule=auto: what each pipeline schedule gave on the chosen plan.
    if (auto trials = plan.getAs<ArrayAttr>("schedules")) {
      os << "  pipeline schedules checked:";
      for (auto trial : trials.getAsRange<DictionaryAttr>()) {
        auto name = trial.getAs<StringAttr>("schedule");
        auto step = trial.getAs<FloatAttr>("step_seconds");
        auto bytes = trial.getAs<IntegerAttr>("memory_bytes");
        if (name && step && bytes)
          os << llvm::format(" %s %.6g s", name.getValue().str().c_str(),
                             step.getValueAsDouble())
             << " (" << humanBytes(bytes.getInt()) << ")";
      }
      os << "\n";
      // Schedules estimated slower than one checked to fit.
      bool first = true;
      for (auto trial : trials.getAsRange<DictionaryAttr>()) {
        auto name = trial.getAs<StringAttr>("schedule");
        auto estimate = trial.getAs<FloatAttr>("estimated_seconds");
        if (!name || !estimate || trial.get("step_seconds"))
          continue;
        os << (first ? "  pipeline schedules not checked (estimated slower "
                       "than one that fits):"
                     : ",")
           << llvm::format(" %s %.6g s", name.getValue().str().c_str(),
                           estimate.getValueAsDouble());
        first = false;
      }
      if (!first)
        os << "\n";
    }
    auto alternatives = plan.getAs<ArrayAttr>("alternatives");
    if (!alternatives || alternatives.empty())
      return;
    os << llvm::format("  %-44s %12s %12s  %s\n", "alternative", "step (s)",
                       "memory", "why not");
    for (auto entry : alternatives.getAsRange<DictionaryAttr>()) {
      auto str = [&](StringRef key) {
        auto value = entry.getAs<StringAttr>(key);
        return value ? value.str() : std::string();
      };
      auto step = entry.getAs<FloatAttr>("step_seconds");
      auto bytes = entry.getAs<IntegerAttr>("memory_bytes");
      os << llvm::format("  %-44s %12.6g %12s  %s\n", str("plan").c_str(),
                         step ? step.getValueAsDouble() : 0.0,
                         humanBytes(bytes ? bytes.getInt() : 0).c_str(),
                         str("reason").c_str());
    }
  }

  /// The predicted time of one call on the hardware profile: this pass's
  /// `hardware`, else the one --auto-shard planned with, else the default.
  LogicalResult reportPrediction(func::FuncOp func, llvm::raw_ostream &os) {
    ModuleOp module = getOperation();
    // This pass's profile, else the one the plan was made with (its file,
    // or when that is not found from here, a relative path, its name),
    // else the default.
    SmallVector<std::string> choices;
    if (!hardware.empty()) {
      choices.push_back(hardware);
    } else {
      if (auto plan = module->getAttrOfType<DictionaryAttr>(
              ParDialect::kAutoShardAttrName))
        for (StringRef key : {"hardware", "profile"})
          if (auto name = plan.getAs<StringAttr>(key))
            choices.push_back(name.str());
      choices.push_back(""); // the default preset
    }
    SmallVector<int64_t> axisSizes;
    for (MeshOp mesh : module.getOps<MeshOp>()) {
      for (int64_t size : mesh.getAxisSizes())
        axisSizes.push_back(size);
      break;
    }
    FailureOr<MachineModel> machine = failure();
    for (auto [i, choice] : llvm::enumerate(choices)) {
      // Only the last choice reports why it does not load.
      std::optional<ScopedDiagnosticHandler> quiet;
      if (i + 1 < choices.size())
        quiet.emplace(module.getContext(),
                      [](Diagnostic &) { return success(); });
      machine = MachineModel::load(choice, axisSizes, [&] {
        return module.emitError("--par-report: ");
      });
      if (succeeded(machine))
        break;
    }
    if (failed(machine))
      return failure();
    StepPrediction p = predictStep(func, *machine);
    os << "predicted step on '" << machine->profile().name << "' ("
       << machine->numDevices() << " devices; docs/auto-shard.md):\n";
    os << llvm::format("  %-22s %14.6g s\n", "compute", p.computeSeconds);
    os << llvm::format("  %-22s %14.6g s  (%lld collectives, %lld bytes "
                       "sent per device)\n",
                       "communication", p.commSeconds, (long long)p.collectives,
                       (long long)p.sentBytes);
    os << llvm::format("  %-22s %14.6g s  (collectives run between compute "
                       "ops)\n",
                       "exposed communication", p.exposedCommSeconds);
    os << llvm::format("  %-22s %14.6g s\n", "step", p.stepSeconds);
    os << llvm::format("  %-22s %14.6g    (device: %.6g)\n", "model FLOPs",
                       p.modelFlops, p.deviceFlops);
    os << llvm::format("  %-22s %13.2f %%\n", "MFU", 100 * p.mfu);
    return success();
  }

  void runOnOperation() override {
    if (failed(checkAlignment(getOperation(), "par-report", alignment)))
      return signalPassFailure();
    llvm::raw_ostream &os = toStderr ? llvm::errs() : llvm::outs();
    if (auto plan = getOperation()->getAttrOfType<DictionaryAttr>(
            ParDialect::kAutoShardAttrName))
      reportPlan(plan, os);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      FailureOr<MemoryPlan> plan =
          planMemory(func, alignment, asyncCollectives);
      if (failed(plan))
        return signalPassFailure();
      reportFunction(func, *plan, os);
      if (failed(reportFusion(func, *plan, os)))
        return signalPassFailure();
      if (func->hasAttr(ParDialect::kPartitionedAttrName) &&
          failed(reportPrediction(func, os)))
        return signalPassFailure();
    }
    os.flush();
  }
};
} // namespace
