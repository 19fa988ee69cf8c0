//===- CostModel.cpp - predicted step time of a plan on a machine ---------===//
#include "par/Transforms/CostModel.h"

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/MemoryPlan.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::par;
namespace rt = ::par::rt;

MachineModel::MachineModel(rt::HardwareProfile profile,
                           ArrayRef<int64_t> axisSizes)
    : hw(std::move(profile)), sizes(axisSizes) {
  levels = hw.axisLevels(std::vector<int64_t>(sizes.begin(), sizes.end()));
}

FailureOr<MachineModel>
MachineModel::load(StringRef nameOrPath, ArrayRef<int64_t> axisSizes,
                   function_ref<InFlightDiagnostic()> emitError) {
  std::string error;
  std::string name = nameOrPath.empty() ? rt::defaultHardwareProfile()
                                        : nameOrPath.str();
  std::optional<rt::HardwareProfile> profile =
      rt::tryLoadHardwareProfile(name, error);
  if (!profile)
    return emitError() << error;
  return MachineModel(std::move(*profile), axisSizes);
}

int64_t MachineModel::numDevices() const {
  int64_t n = 1;
  for (int64_t size : sizes)
    n *= size;
  return n;
}

double MachineModel::peakFlops(Type elementType) const {
  std::optional<rt::DType> dtype;
  if (!elementType)
    ; // no tensor: the f32 peak
  else if (std::optional<ProgramDType> name = programDType(elementType))
    dtype = rt::parseDType(name->name.str());
  if (dtype) {
    auto it = hw.peakFlops.find(*dtype);
    if (it != hw.peakFlops.end())
      return it->second;
  }
  auto f32 = hw.peakFlops.find(rt::DType::F32);
  if (f32 != hw.peakFlops.end())
    return f32->second;
  // A profile lists at least one element type (the parser checks it).
  return hw.peakFlops.begin()->second;
}

double MachineModel::computeSeconds(const OpWork &work, double bytes,
                                    Type elementType, bool ownKernel) const {
  double peak = peakFlops(elementType);
  double overhead = ownKernel ? hw.opOverhead : 0;
  if (work.matmul)
    return overhead + work.flops / (peak * hw.gemmEfficiency);
  double flopSeconds = work.flops / (peak * hw.memoryBoundEfficiency);
  double byteSeconds =
      bytes / (hw.memoryBandwidth * hw.memoryBoundEfficiency);
  return overhead + std::max(flopSeconds, byteSeconds);
}

std::vector<int64_t>
MachineModel::devicesPerLevel(ArrayRef<int32_t> axes) const {
  std::vector<int64_t> perLevel(1, 1);
  for (int32_t axis : axes) {
    // An axis of another mesh than the one the model was bound to: as if
    // inside a node, with its size unknown (the report binds one mesh).
    if (axis < 0 || size_t(axis) >= sizes.size())
      continue;
    if (perLevel.size() <= levels[axis])
      perLevel.resize(levels[axis] + 1, 1);
    perLevel[levels[axis]] *= sizes[axis];
  }
  return perLevel;
}

double MachineModel::collectiveSeconds(StringRef name, ArrayRef<int32_t> axes,
                                       double bufferBytes, double sentBytes,
                                       double latencyShare) const {
  std::vector<int64_t> perLevel = devicesPerLevel(axes);
  int64_t group = llvm::product_of(perLevel);
  // The slowest level the group spans.
  size_t level = perLevel.size() - 1;
  if (group <= 1)
    return 0;
  // A local slice: each device copies its piece (1/group of the buffer),
  // reading and writing it, as a memory-bound op.
  if (name == "all_slice")
    return computeSeconds({}, 2 * bufferBytes / double(group), Type());
  if (std::optional<rt::CollectiveKind> kind =
          rt::collectiveKindNamed(name.str()))
    return hw.collectiveSeconds(*kind, perLevel, bufferBytes, latencyShare);
  // Point to point (a permute, an exchange): one message per peer at most,
  // what a rank sends over the link.
  const rt::LinkLevel &link = hw.links[level];
  return sentBytes == 0 ? 0 : link.latency + sentBytes / link.bandwidth;
}

double MachineModel::reshardSeconds(const ReshardCost &cost,
                                    const Bucket *bucket) const {
  double seconds = 0;
  for (const ReshardCost::Step &step : cost.steps) {
    StringRef name = stringifyReshardStep(step.kind);
    bool bucketed = bucket && bucket->carries(step.kind);
    seconds +=
        bucketed
            ? bucketedSeconds(name, step.axes, double(step.bufferBytes),
                              double(step.sentBytes), *bucket, step.innerDim)
            : collectiveSeconds(name, step.axes, double(step.bufferBytes),
                                double(step.sentBytes));
  }
  return seconds;
}

double MachineModel::bucketedSeconds(StringRef name, ArrayRef<int32_t> axes,
                                     double bufferBytes, double sentBytes,
                                     const Bucket &bucket,
                                     bool innerDim) const {
  if (bucket.bytes <= 0 || bufferBytes >= double(bucket.bytes))
    return collectiveSeconds(name, axes, bufferBytes, sentBytes);
  int64_t group = llvm::product_of(devicesPerLevel(axes));
  if (group <= 1)
    return 0;
  double seconds = collectiveSeconds(name, axes, bufferBytes, sentBytes,
                                     bufferBytes / double(bucket.bytes));
  // The packing: an all-reduce's bucket is flat (a value of more than one
  // dim is reshaped to one first and back after); a reduce-scatter's has a
  // row per device (every value reshaped into rows, and its piece back),
  // an all-gather's a row per shard (each shard a row, each value's
  // columns cut out of the gathered rows and reshaped back).
  bool scatters = name == "reduce_scatter", gathers = name == "all_gather";
  double in = gathers ? bufferBytes / double(group) : bufferBytes;
  double out = scatters ? bufferBytes / double(group) : bufferBytes;
  bool reshapes = scatters || gathers || bucket.rank > 1;
  auto copy = [&](double bytes, bool ownKernel) {
    return computeSeconds({}, 2 * bytes, Type(), ownKernel);
  };
  // Its part of the concatenation (whose kernel the bucket shares), and
  // the slice that cuts its result out.
  seconds += copy(in, false) + copy(out, true);
  if (reshapes)
    seconds += copy(in, true) + copy(out, true);
  // Along an inner dim: a gather's rows are reshaped to the shards' dims
  // and transposed to put the gathered dim in its place; a reduce-scatter's
  // input is reshaped and transposed into rows first.
  if (innerDim)
    seconds += 2 * copy(gathers ? out : in, true);
  return seconds;
}

/// Bytes an op reads and writes: every ranked result, and each ranked
/// operand, but only a result's worth of one the op reads part of
/// (ShardingRuleOpInterface::readsResultWorth).
static double touchedBytes(Operation *op) {
  auto bytesOfValue = [](Value value) -> double {
    if (auto type = dyn_cast<RankedTensorType>(value.getType()))
      if (type.hasStaticShape())
        return double(bytesOf(type.getShape(), type.getElementType()));
    return 0;
  };
  double bytes = 0, result = 0;
  for (Value value : op->getResults())
    result += bytesOfValue(value);
  auto rule = dyn_cast<ShardingRuleOpInterface>(op);
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    double b = bytesOfValue(operand);
    bytes += rule && rule.readsResultWorth(index) ? std::min(b, result) : b;
  }
  return bytes + result;
}

/// The element type an op computes in: its first result's.
static Type computeType(Operation *op) {
  for (Value value : llvm::concat<Value>(op->getResults(), op->getOperands()))
    if (auto type = dyn_cast<RankedTensorType>(value.getType()))
      return type.getElementType();
  return {};
}

/// The mesh axis indices `collective` runs over.
static SmallVector<int32_t> axisIndices(CollectiveOpInterface collective) {
  SmallVector<int32_t> indices;
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
      collective, collective.getMeshAttr());
  if (!mesh)
    return indices;
  for (StringAttr axis : collective.getAxes().getAsRange<StringAttr>())
    if (int64_t index = mesh.getAxisIndex(axis.getValue()); index >= 0)
      indices.push_back(int32_t(index));
  return indices;
}

StepPrediction mlir::par::predictStep(func::FuncOp func,
                                      const MachineModel &machine) {
  StepPrediction p;
  func.walk<WalkOrder::PreOrder>([&](Operation *op) -> WalkResult {
    if (auto fused = dyn_cast<FusedOp>(op)) {
      // One pass over the group's inputs and result: the FLOPs of its ops,
      // the bytes of the fused op alone. A producer dot is its GEMM, then
      // that pass over the result it wrote (read and written again) and
      // the other inputs.
      OpWork work;
      DotOp dot = fused.getProducerDot();
      work.flops = fused.getFlops(dot);
      p.deviceFlops += work.flops;
      double bytes = touchedBytes(op);
      if (dot) {
        OpWork gemm = cast<ShardingRuleOpInterface>(*dot).getWork();
        p.deviceFlops += gemm.flops;
        p.computeSeconds +=
            machine.computeSeconds(gemm, touchedBytes(dot), computeType(dot));
        // The pass reads the result the GEMM wrote, not the inputs only
        // the GEMM reads (counted by the GEMM).
        auto bytesOfType = [](Type type) {
          auto t = cast<RankedTensorType>(type);
          return double(bytesOf(t.getShape(), t.getElementType()));
        };
        bytes += bytesOfType(fused.getResult().getType());
        for (BlockArgument arg : fused.getBody().getArguments())
          if (llvm::all_of(arg.getUsers(),
                           [&](Operation *user) { return user == dot; }))
            bytes -= bytesOfType(arg.getType());
      }
      p.computeSeconds += machine.computeSeconds(work, bytes, computeType(op));
      return WalkResult::skip();
    }
    if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
      CollectiveCost cost = collective.getCost();
      if (isa<AllSliceOp>(op)) {
        // No communication: a copy of the device's piece.
        p.computeSeconds += machine.collectiveSeconds(
            "all_slice", axisIndices(collective), double(cost.bytes), 0);
        return WalkResult::advance();
      }
      if (!cost.moves || cost.sent == 0)
        return WalkResult::advance();
      ++p.collectives;
      p.sentBytes += cost.sent;
      p.commSeconds += machine.collectiveSeconds(
          op->getName().stripDialect(), axisIndices(collective),
          double(cost.bytes), double(cost.sent));
      return WalkResult::advance();
    }
    auto rule = dyn_cast<ShardingRuleOpInterface>(op);
    if (!rule)
      return WalkResult::advance();
    OpWork work = rule.getWork();
    p.deviceFlops += work.flops;
    p.computeSeconds +=
        machine.computeSeconds(work, touchedBytes(op), computeType(op));
    return WalkResult::advance();
  });
  p.exposedCommSeconds = p.commSeconds;
  p.stepSeconds = p.computeSeconds + p.exposedCommSeconds;
  if (auto flops = func->getAttrOfType<FloatAttr>(
          ParDialect::kModelFlopsAttrName))
    p.modelFlops = flops.getValueAsDouble();
  if (p.modelFlops > 0 && p.stepSeconds > 0) {
    // The peak of the type the model's products run in: the first matmul's.
    Type type;
    func.walk([&](ShardingRuleOpInterface op) {
      if (!type && op.getWork().matmul)
        type = computeType(op);
    });
    double peak = type ? machine.peakFlops(type)
                       : machine.peakFlops(Float32Type::get(func.getContext()));
    p.mfu = p.modelFlops /
            (p.stepSeconds * double(machine.numDevices()) * peak);
  }
  return p;
}

