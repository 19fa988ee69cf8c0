//===- SequenceVariant.cpp - a plan with Megatron's sequence parallelism --===//
//
// --auto-shard checks the best plan that splits weights over a tensor axis
// again with Megatron's sequence parallelism on that axis: the residual
// stream (the forward values a later layer reads) pinned split over the
// sequence, every other value of the step left to propagation, which
// derives the rest (docs/propagation.md, "Megatron's sequence
// parallelism"; docs/auto-shard.md).
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/SequenceVariant.h"

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::par;

/// The ops of `func`'s body in order, leaving out what the planner
/// inserted for a reader (constraints, copies of constants; marked
/// par.planned): the ops of the module it was planned from.
static SmallVector<Operation *> unplannedOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    if (!op.hasAttr(ParDialect::kPlannedAttrName))
      ops.push_back(&op);
  return ops;
}

/// The residual stream of a training step: forward values (of rank 2 or
/// more) that an op of a later layer reads, by position in unplannedOps.
static SmallVector<size_t> streamValues(ArrayRef<Operation *> ops) {
  SmallVector<size_t> stream;
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (op->getNumResults() != 1 || !inPhase(op, Phase::forward) ||
        isa<ConstantOp>(op) || getCopyOf(op) || getViewOf(op))
      continue;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() < 2)
      continue;
    int64_t layer = getLayer(op).value_or(-1);
    if (llvm::any_of(op->getUsers(), [&](Operation *user) {
          std::optional<int64_t> later = getLayer(user);
          return inPhase(user, Phase::forward) && later && *later > layer;
        }))
      stream.push_back(i);
  }
  return stream;
}

/// Where each residual-stream value of `step` (named by position) holds the
/// sequence: the dim that `axis` reaches when only the data arguments are
/// annotated, split over `axis` on their second dim, and propagated (a copy
/// of `module`, whatever the ops). -1 where the sequence does not reach.
static SmallVector<int64_t> sequenceDims(ModuleOp module, StringRef stepName,
                                         StringRef axis,
                                         ArrayRef<size_t> stream) {
  SmallVector<int64_t> dims(stream.size(), -1);
  OwningOpRef<ModuleOp> probe = module.clone();
  auto step = probe->lookupSymbol<func::FuncOp>(stepName);
  if (!step)
    return dims;
  MeshOp mesh = *probe->getOps<MeshOp>().begin();
  // The stream's values in the probe, named before its constraints go (a
  // constraint's value is its input's once the constraint is erased).
  SmallVector<Operation *> ops = unplannedOps(step);
  SmallVector<Value> probed;
  for (size_t i : stream) {
    Value value;
    if (i < ops.size() && ops[i]->getNumResults() == 1)
      value = ops[i]->getResult(0);
    while (value &&
           isa_and_nonnull<ShardingConstraintOp>(value.getDefiningOp()))
      value = value.getDefiningOp()->getOperand(0);
    probed.push_back(value);
  }
  MLIRContext *ctx = module.getContext();
  StringAttr shardingName = StringAttr::get(ctx, ParDialect::kShardingAttrName);
  for (Operation &op : llvm::make_early_inc_range(step.getBody().front())) {
    if (auto constraint = dyn_cast<ShardingConstraintOp>(op)) {
      constraint.getResult().replaceAllUsesWith(constraint.getInput());
      constraint.erase();
      continue;
    }
    op.removeAttr(shardingName);
  }
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    step.removeArgAttr(i, shardingName);
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    step.removeResultAttr(i, shardingName);
  auto open = DimShardingAttr::get(ctx, {}, /*isClosed=*/false, std::nullopt);
  bool seeded = false;
  for (BlockArgument arg : dataArguments(step)) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() < 2)
      continue;
    SmallVector<DimShardingAttr> argDims(type.getRank(), open);
    argDims[1] = DimShardingAttr::get(ctx, {StringAttr::get(ctx, axis)},
                                      /*isClosed=*/true, std::nullopt);
    step.setArgAttr(
        arg.getArgNumber(), shardingName,
        ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                          argDims, {}, {}));
    seeded = true;
  }
  if (!seeded)
    return dims;
  {
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    PassManager pm(ctx);
    pm.enableVerifier(false);
    pm.addPass(createPropagatePass());
    if (failed(pm.run(*probe)))
      return dims;
  }
  for (auto [k, value] : llvm::enumerate(probed)) {
    ShardingAttr sharding = value ? getValueSharding(value) : ShardingAttr();
    if (!sharding)
      continue;
    for (auto [d, dim] : llvm::enumerate(sharding.getDims()))
      if (llvm::any_of(dim.getAxes(),
                       [&](StringAttr a) { return a.getValue() == axis; }))
        dims[k] = int64_t(d);
  }
  return dims;
}

/// Drops the planner's layouts of `step`'s values (`ops`, the planned
/// copies of `sourceOps` in the module it was planned from) and its
/// constraints; what the user wrote on `sourceOps` stays, and so do the
/// arguments' layouts.
static void dropPlannedLayouts(func::FuncOp step, ArrayRef<Operation *> ops,
                               ArrayRef<Operation *> sourceOps) {
  StringAttr shardingName =
      StringAttr::get(step.getContext(), ParDialect::kShardingAttrName);
  for (Operation &op : llvm::make_early_inc_range(step.getBody().front()))
    if (isa<ShardingConstraintOp>(op) &&
        op.hasAttr(ParDialect::kPlannedAttrName)) {
      op.getResult(0).replaceAllUsesWith(op.getOperand(0));
      op.erase();
    }
  for (auto [op, from] : llvm::zip(ops, sourceOps)) {
    if (Attribute written = from->getAttr(shardingName))
      op->setAttr(shardingName, written);
    else
      op->removeAttr(shardingName);
  }
}

/// The ops of `stepName` in `original` and in `variant` (a clone of the
/// planned module), paired; false when they do not pair.
static bool pairedOps(ModuleOp original, ModuleOp variant, StringRef stepName,
                      SmallVector<Operation *> &sourceOps,
                      SmallVector<Operation *> &ops) {
  auto source = original.lookupSymbol<func::FuncOp>(stepName);
  auto step = variant.lookupSymbol<func::FuncOp>(stepName);
  if (!source || source.isDeclaration() || !step)
    return false;
  sourceOps = unplannedOps(source);
  ops = unplannedOps(step);
  if (ops.size() != sourceOps.size())
    return false;
  for (auto [op, from] : llvm::zip(ops, sourceOps))
    if (op->getName() != from->getName())
      return false;
  return true;
}

OwningOpRef<ModuleOp> mlir::par::propagatedVariant(ModuleOp original,
                                                   ModuleOp planned,
                                                   StringRef stepName) {
  OwningOpRef<ModuleOp> variant = planned.clone();
  SmallVector<Operation *> sourceOps, ops;
  if (!pairedOps(original, *variant, stepName, sourceOps, ops))
    return nullptr;
  dropPlannedLayouts(variant->lookupSymbol<func::FuncOp>(stepName), ops,
                     sourceOps);
  return variant;
}

/// `planned` (a module the planner wrote) turned to Megatron's sequence
/// parallelism on `axis` for its training step `stepName`: the layouts the
/// planner gave the step's values are dropped (its arguments' stay, and
/// what the user wrote in `original`), and each residual-stream value is
/// pinned to its planned layout with `axis` moved to its sequence dim;
/// propagation then derives the rest (docs/propagation.md, "Megatron's
/// sequence parallelism"). Null when the step has no such value.
OwningOpRef<ModuleOp> mlir::par::sequenceParallelVariant(ModuleOp original,
                                                         ModuleOp planned,
                                                         StringRef stepName,
                                                         StringRef axis) {
  auto source = original.lookupSymbol<func::FuncOp>(stepName);
  if (!source || source.isDeclaration())
    return nullptr;
  SmallVector<Operation *> sourceOps = unplannedOps(source);
  SmallVector<size_t> stream = streamValues(sourceOps);
  if (stream.empty())
    return nullptr;
  SmallVector<int64_t> seq = sequenceDims(original, stepName, axis, stream);

  OwningOpRef<ModuleOp> variant = planned.clone();
  SmallVector<Operation *> paired, ops;
  if (!pairedOps(original, *variant, stepName, paired, ops))
    return nullptr;
  auto step = variant->lookupSymbol<func::FuncOp>(stepName);
  MLIRContext *ctx = original.getContext();
  StringAttr axisName = StringAttr::get(ctx, axis);
  // The pins, from the planned layouts.
  SmallVector<std::pair<Value, ShardingAttr>> pins;
  for (auto [k, i] : llvm::enumerate(stream)) {
    Value value = ops[i]->getResult(0);
    ShardingAttr layout = getValueSharding(value);
    if (seq[k] < 0 || !layout)
      continue;
    // The planned split, with the tensor axis moved to the sequence (last
    // in its dim).
    SmallVector<DimShardingAttr> dims;
    for (auto [d, dim] : llvm::enumerate(layout.getDims())) {
      SmallVector<StringAttr> axes;
      for (StringAttr a : dim.getAxes())
        if (a != axisName)
          axes.push_back(a);
      if (int64_t(d) == seq[k])
        axes.push_back(axisName);
      dims.push_back(
          DimShardingAttr::get(ctx, axes, /*isClosed=*/true, std::nullopt));
    }
    pins.push_back({value, ShardingAttr::get(ctx, layout.getMesh(), dims,
                                             layout.getReplicatedAxes(), {})});
  }
  if (pins.empty())
    return nullptr;
  // The planner's layouts of the step's values go (its constraints too);
  // what the user wrote stays.
  dropPlannedLayouts(step, ops, sourceOps);
  OpBuilder b(ctx);
  for (auto [value, sharding] : pins) {
    Operation *def = value.getDefiningOp();
    b.setInsertionPointAfter(def);
    auto pin = ShardingConstraintOp::create(b, def->getLoc(), value.getType(),
                                            value, sharding);
    setPhase(pin, Phase::forward);
    if (std::optional<int64_t> layer = getLayer(def))
      setLayer(pin, *layer);
    // The plan's, not the user's (as the planner's own constraints).
    pin->setAttr(ParDialect::kPlannedAttrName,
                 ArrayAttr::get(
                     ctx, {DictionaryAttr::get(
                              ctx, {NamedAttribute(StringAttr::get(ctx, "pin"),
                                                   UnitAttr::get(ctx))})}));
    value.replaceAllUsesExcept(pin.getResult(), pin.getOperation());
  }
  return variant;
}
