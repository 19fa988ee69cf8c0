//===- TrainingStep.cpp - The marks of an explicit training step ----------===//

#include "par/Dialect/Par/IR/TrainingStep.h"

#include "par/Dialect/Par/IR/ParOps.h"

using namespace mlir;
using namespace mlir::par;

std::optional<Phase> mlir::par::getPhase(Operation *op) {
  if (auto attr = op->getAttrOfType<PhaseAttr>(ParDialect::kPhaseAttrName))
    return attr.getValue();
  return std::nullopt;
}

void mlir::par::setPhase(Operation *op, Phase phase) {
  op->setAttr(ParDialect::kPhaseAttrName,
              PhaseAttr::get(op->getContext(), phase));
}

/// An integer mark on an op (a layer, the argument a copy or view is of).
static std::optional<int64_t> getIntMark(Operation *op, StringRef name) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

static void setIntMark(Operation *op, StringRef name, int64_t value) {
  op->setAttr(name,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), value));
}

bool mlir::par::isTrainingStep(FunctionOpInterface func) {
  if (func.isExternal())
    return false;
  for (Operation &op : func.getFunctionBody().front())
    if (inPhase(&op, Phase::backward))
      return true;
  return false;
}

std::optional<int64_t> mlir::par::getLayer(Operation *op) {
  return getIntMark(op, ParDialect::kLayerAttrName);
}

void mlir::par::setLayer(Operation *op, int64_t layer) {
  setIntMark(op, ParDialect::kLayerAttrName, layer);
}

SmallVector<int64_t> mlir::par::forwardLayers(FunctionOpInterface func) {
  SmallVector<int64_t> layers;
  llvm::SmallDenseSet<int64_t> seen;
  for (Operation &op : func.getFunctionBody().front())
    if (inPhase(&op, Phase::forward))
      if (std::optional<int64_t> layer = getLayer(&op))
        if (seen.insert(*layer).second)
          layers.push_back(*layer);
  return layers;
}

std::optional<int64_t> mlir::par::getStage(Operation *op) {
  return getIntMark(op, ParDialect::kStageAttrName);
}

void mlir::par::setStage(Operation *op, int64_t stage) {
  setIntMark(op, ParDialect::kStageAttrName, stage);
}

std::optional<int64_t> mlir::par::getMicrobatch(Operation *op) {
  return getIntMark(op, ParDialect::kMicrobatchAttrName);
}

void mlir::par::setMicrobatch(Operation *op, int64_t microbatch) {
  setIntMark(op, ParDialect::kMicrobatchAttrName, microbatch);
}

StepMarks StepMarks::of(Operation *op) {
  return {getPhase(op), getLayer(op), getStage(op), getMicrobatch(op)};
}

void StepMarks::stamp(Operation *op) const {
  if (phase && !getPhase(op))
    setPhase(op, *phase);
  if (layer && !getLayer(op))
    setLayer(op, *layer);
  if (stage && !getStage(op))
    setStage(op, *stage);
  if (microbatch && !getMicrobatch(op))
    setMicrobatch(op, *microbatch);
}

SmallVector<int64_t> mlir::par::getGradientOf(Operation *op) {
  if (auto attr =
          op->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kGradientOfAttrName))
    return SmallVector<int64_t>(attr.asArrayRef());
  return {};
}

bool mlir::par::isGradientOf(Operation *op, int64_t param) {
  return op && llvm::is_contained(getGradientOf(op), param);
}

void mlir::par::addGradientOf(Operation *op, int64_t param) {
  SmallVector<int64_t> params = getGradientOf(op);
  if (llvm::is_contained(params, param))
    return;
  params.push_back(param);
  llvm::sort(params);
  op->setAttr(ParDialect::kGradientOfAttrName,
              DenseI64ArrayAttr::get(op->getContext(), params));
}

std::optional<int64_t> mlir::par::getCopyOf(Operation *op) {
  return getIntMark(op, ParDialect::kCopyOfAttrName);
}

void mlir::par::setCopyOf(Operation *op, int64_t master) {
  setIntMark(op, ParDialect::kCopyOfAttrName, master);
}

std::optional<int64_t> mlir::par::getViewOf(Operation *op) {
  return getIntMark(op, ParDialect::kViewOfAttrName);
}

void mlir::par::setViewOf(Operation *op, int64_t master) {
  setIntMark(op, ParDialect::kViewOfAttrName, master);
}

std::optional<SmallVector<int64_t>>
mlir::par::getViewShape(FunctionOpInterface func, unsigned arg) {
  if (auto view = func.getArgAttrOfType<DenseI64ArrayAttr>(
          arg, ParDialect::kViewAttrName))
    return SmallVector<int64_t>(view.asArrayRef());
  return std::nullopt;
}

void mlir::par::carryMarks(Operation *from, Value to) {
  Operation *def = to.getDefiningOp();
  if (!from || !def || def == from ||
      llvm::is_contained(from->getOperands(), to))
    return;
  for (int64_t param : getGradientOf(from))
    addGradientOf(def, param);
  if (std::optional<int64_t> master = getCopyOf(from))
    setCopyOf(def, *master);
  if (std::optional<int64_t> master = getViewOf(from))
    setViewOf(def, *master);
  StepMarks::of(from).stamp(def);
}

void mlir::par::stampMarks(const StepMarks &marks, Block::iterator begin,
                           Block::iterator end) {
  for (Operation &op : llvm::make_range(begin, end))
    marks.stamp(&op);
}

bool mlir::par::assignReshardPhases(Block &block) {
  if (llvm::none_of(block, [](Operation &op) { return getPhase(&op); }))
    return false;
  bool marked = false;
  // Readers come after their reshards: visit from the end, so a reshard
  // read by another reshard sees the reader's phase.
  for (Operation &op : llvm::reverse(block)) {
    if (!isa<ReshardOp>(op) || getPhase(&op))
      continue;
    std::optional<Phase> earliest;
    for (Operation *user : op.getUsers())
      if (std::optional<Phase> phase = getPhase(user))
        if (!earliest || *phase < *earliest)
          earliest = phase;
    if (!earliest)
      if (Operation *def = op.getOperand(0).getDefiningOp())
        earliest = getPhase(def);
    if (earliest) {
      setPhase(&op, *earliest);
      marked = true;
    }
    if (!getLayer(&op))
      for (Operation *user : op.getUsers())
        if (std::optional<int64_t> layer = getLayer(user)) {
          setLayer(&op, *layer);
          marked = true;
          break;
        }
    // A pipelined step: the stage and micro-batch of the earliest reader
    // (readers in other stages receive the value from it).
    Operation *first = nullptr;
    for (Operation *user : op.getUsers())
      if (getStage(user) && (!first || user->isBeforeInBlock(first)))
        first = user;
    if (first) {
      StepMarks before = StepMarks::of(&op);
      StepMarks{std::nullopt, std::nullopt, getStage(first),
                getMicrobatch(first)}
          .stamp(&op);
      marked |= !(StepMarks::of(&op) == before);
    }
  }
  return marked;
}

void PhaseStamper::notifyOperationInserted(Operation *op,
                                           OpBuilder::InsertPoint) {
  StepMarks{phase, layer, std::nullopt, std::nullopt}.stamp(op);
}

bool mlir::par::isCopyMark(StringRef name) {
  return name == ParDialect::kLayerAttrName ||
         name == ParDialect::kStageAttrName ||
         name == ParDialect::kMicrobatchAttrName ||
         name == ParDialect::kGradientOfAttrName ||
         name == ParDialect::kCopyOfAttrName ||
         name == ParDialect::kViewOfAttrName;
}

bool mlir::par::isLate(Operation *op) {
  return op->hasAttr(ParDialect::kLateAttrName);
}

void mlir::par::setLate(Operation *op) {
  op->setAttr(ParDialect::kLateAttrName, UnitAttr::get(op->getContext()));
}

int64_t mlir::par::getZeroStage(FunctionOpInterface func) {
  if (auto stage = func->getAttrOfType<IntegerAttr>(ParDialect::kZeroAttrName))
    return stage.getInt();
  return 0;
}

StringRef mlir::par::getDataAxis(FunctionOpInterface func) {
  if (auto axis =
          func->getAttrOfType<StringAttr>(ParDialect::kDataAxisAttrName))
    return axis.getValue();
  return {};
}

void mlir::par::setZero(FunctionOpInterface func, int64_t stage,
                        StringRef dataAxis) {
  Builder b(func.getContext());
  func->setAttr(ParDialect::kZeroAttrName, b.getI64IntegerAttr(stage));
  func->setAttr(ParDialect::kDataAxisAttrName, b.getStringAttr(dataAxis));
}

std::optional<unsigned> mlir::par::getUpdatedArgument(FunctionOpInterface func,
                                                      unsigned result) {
  auto target = func.getResultAttrOfType<IntegerAttr>(
      result, ParDialect::kUpdatesAttrName);
  if (!target || target.getInt() < 0 ||
      target.getInt() >= int64_t(func.getNumArguments()))
    return std::nullopt;
  return unsigned(target.getInt());
}

bool mlir::par::isRecomputed(Operation *op) {
  return op->hasAttr(ParDialect::kRecomputedAttrName);
}

void mlir::par::setRecomputed(Operation *op) {
  op->setAttr(ParDialect::kRecomputedAttrName, UnitAttr::get(op->getContext()));
}
