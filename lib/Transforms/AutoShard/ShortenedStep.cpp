//===- ShortenedStep.cpp - a planned step with fewer middle layers --------===//
//
// A training step's layers are found by their marks (par.layer, on the
// forward ops of each layer and on the backward ops autodiff made from
// them). Two layers are copies when their ops pair up in order with the
// same names, attributes (but the argument numbers of the marks that name
// parameters), result types, and operands that pair up the same way: a
// value of the layer at the same position, or a value from outside of the
// same type and sharding. A copy of the step without some middle layers
// is then the same program with fewer of them (ShortenedStep.h).
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ShortenedStep.h"

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>

namespace mlir::par {
#define GEN_PASS_DEF_TESTSHORTENEDSTEPPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
/// The layers of a training step: their order and each one's ops, in the
/// order of the body (forward ops, then backward).
struct StepLayers {
  func::FuncOp func;
  SmallVector<int64_t> order;
  DenseMap<int64_t, SmallVector<Operation *>> ops;
  /// Each layer op's position in its layer's list.
  DenseMap<Operation *, unsigned> position;
};
} // namespace

static FailureOr<StepLayers> layersOf(ModuleOp module, std::string &why) {
  StepLayers layers;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    if (layers.func) {
      why = "the module has more than one function";
      return failure();
    }
    layers.func = func;
  }
  if (!layers.func || !isTrainingStep(layers.func)) {
    why = "the module has no training step";
    return failure();
  }
  layers.order = forwardLayers(layers.func);
  for (int64_t layer : layers.order)
    layers.ops[layer];
  for (Operation &op : layers.func.getBody().front().without_terminator()) {
    if (op.getNumRegions() != 0) {
      why = "'" + op.getName().getStringRef().str() + "' has regions";
      return failure();
    }
    std::optional<int64_t> layer = getLayer(&op);
    if (!layer)
      continue;
    auto it = layers.ops.find(*layer);
    if (it == layers.ops.end()) {
      why = "layer " + std::to_string(*layer) + " has no forward op";
      return failure();
    }
    layers.position[&op] = it->second.size();
    it->second.push_back(&op);
  }
  return layers;
}

/// Whether `a` and `b` have the same attributes but the marks that tell
/// copies apart.
static bool sameAttributes(Operation *a, Operation *b) {
  auto next = [](ArrayRef<NamedAttribute> attrs, size_t i) {
    while (i < attrs.size() && isCopyMark(attrs[i].getName().getValue()))
      ++i;
    return i;
  };
  ArrayRef<NamedAttribute> x = a->getAttrs(), y = b->getAttrs();
  size_t i = next(x, 0), j = next(y, 0);
  for (; i < x.size() && j < y.size(); i = next(x, i + 1), j = next(y, j + 1))
    if (x[i] != y[j])
      return false;
  return i == x.size() && j == y.size();
}

/// Whether layers `x` and `y` of `layers` are copies of each other.
static bool sameLayer(const StepLayers &layers, int64_t x, int64_t y) {
  ArrayRef<Operation *> xs = layers.ops.at(x), ys = layers.ops.at(y);
  if (xs.size() != ys.size())
    return false;
  auto inLayer = [&](Value value, int64_t layer) -> Operation * {
    Operation *def = value.getDefiningOp();
    return def && getLayer(def) == layer ? def : nullptr;
  };
  for (auto [a, b] : llvm::zip_equal(xs, ys)) {
    if (a->getName() != b->getName() ||
        a->getNumOperands() != b->getNumOperands() ||
        !llvm::equal(a->getResultTypes(), b->getResultTypes()) ||
        !sameAttributes(a, b))
      return false;
    for (auto [va, vb] : llvm::zip_equal(a->getOperands(), b->getOperands())) {
      if (va.getType() != vb.getType())
        return false;
      Operation *da = inLayer(va, x), *db = inLayer(vb, y);
      if (!da != !db)
        return false;
      if (da) {
        if (layers.position.at(da) != layers.position.at(db) ||
            cast<OpResult>(va).getResultNumber() !=
                cast<OpResult>(vb).getResultNumber())
          return false;
        continue;
      }
      if (isa<BlockArgument>(va) != isa<BlockArgument>(vb) ||
          getValueSharding(va) != getValueSharding(vb))
        return false;
    }
  }
  return true;
}

std::optional<ShortenableStep> mlir::par::shortenableStep(ModuleOp module,
                                                          std::string &why) {
  FailureOr<StepLayers> layers = layersOf(module, why);
  if (failed(layers))
    return std::nullopt;
  int64_t n = int64_t(layers->order.size());
  if (n < 4) {
    why = "the step has fewer than four layers";
    return std::nullopt;
  }
  for (int64_t d = 2; d + 1 < n; ++d)
    if (!sameLayer(*layers, layers->order[1], layers->order[d])) {
      why = "layer " + std::to_string(layers->order[d]) +
            " is not a copy of layer " + std::to_string(layers->order[1]);
      return std::nullopt;
    }
  return ShortenableStep{n, layersPerChunk(module)};
}

SmallVector<int64_t> mlir::par::layersPerChunk(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    std::optional<PipelineInfo> info =
        func.isDeclaration() ? std::nullopt : getPipeline(func);
    if (!info)
      continue;
    if (info->chunks() < 1)
      return {};
    // As shortenedStages counts them: a layer past the last stage's first
    // (a record with more first layers than stages) in the last.
    SmallVector<int64_t> counts(info->chunks(), 0);
    for (int64_t layer : forwardLayers(func))
      ++counts[std::min(info->stageOfLayer(layer), info->chunks() - 1)];
    return counts;
  }
  return {};
}

/// Renumbers the argument numbers `func`'s marks and result attributes
/// hold after arguments were erased (`newIndex[old]`, -1 for an erased
/// one); a mark naming only erased arguments is dropped.
static void renumberArguments(func::FuncOp func, ArrayRef<int64_t> newIndex) {
  MLIRContext *ctx = func.getContext();
  // An argument number out of range (not this function's) maps to none.
  auto mapped = [&](int64_t arg) -> int64_t {
    return arg >= 0 && arg < int64_t(newIndex.size()) ? newIndex[arg] : -1;
  };
  auto remapOne = [&](Operation *op, StringRef name) {
    auto attr = op->getAttrOfType<IntegerAttr>(name);
    if (!attr)
      return;
    int64_t to = mapped(attr.getInt());
    if (to < 0)
      op->removeAttr(name);
    else
      op->setAttr(name, IntegerAttr::get(attr.getType(), to));
  };
  func.walk([&](Operation *op) {
    if (auto params = op->getAttrOfType<DenseI64ArrayAttr>(
            ParDialect::kGradientOfAttrName)) {
      SmallVector<int64_t> kept;
      for (int64_t param : params.asArrayRef())
        if (mapped(param) >= 0)
          kept.push_back(mapped(param));
      if (kept.empty())
        op->removeAttr(ParDialect::kGradientOfAttrName);
      else
        op->setAttr(ParDialect::kGradientOfAttrName,
                    DenseI64ArrayAttr::get(ctx, kept));
    }
    remapOne(op, ParDialect::kCopyOfAttrName);
    remapOne(op, ParDialect::kViewOfAttrName);
  });
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (auto arg = func.getResultAttrOfType<IntegerAttr>(
            r, ParDialect::kUpdatesAttrName);
        arg && mapped(arg.getInt()) >= 0)
      func.setResultAttr(r, ParDialect::kUpdatesAttrName,
                         IntegerAttr::get(arg.getType(), mapped(arg.getInt())));
}

OwningOpRef<ModuleOp> mlir::par::shortenedCopy(ModuleOp module, int64_t first,
                                               std::string &why) {
  FailureOr<StepLayers> found = layersOf(module, why);
  if (failed(found))
    return nullptr;
  int64_t n = int64_t(found->order.size());
  if (first < 2 || first + 1 >= n) {
    why = first < 2 ? "the first kept layers must include a middle one "
                      "(first=2 or more)"
                    : "no middle layer to drop";
    return nullptr;
  }
  SmallVector<int64_t> kept(found->order.begin(), found->order.begin() + first);
  kept.push_back(found->order.back());
  return shortenedCopy(module, ArrayRef<int64_t>(kept), why);
}

OwningOpRef<ModuleOp> mlir::par::shortenedStages(ModuleOp module, int64_t keep,
                                                 std::string &why) {
  FailureOr<StepLayers> found = layersOf(module, why);
  if (failed(found))
    return nullptr;
  std::optional<PipelineInfo> info = getPipeline(found->func);
  if (!info) {
    why = "the step is not pipelined";
    return nullptr;
  }
  if (keep < 1) {
    why = "each stage must keep a layer (keep=1 or more)";
    return nullptr;
  }
  if (info->stages < 1 || info->virtualStages < 1) {
    why = "the pipeline record has no stages";
    return nullptr;
  }
  SmallVector<SmallVector<int64_t>> chunks(info->chunks());
  for (int64_t layer : found->order)
    chunks[std::min(info->stageOfLayer(layer), info->chunks() - 1)].push_back(
        layer);
  // The fewest layers of a virtual stage on each device.
  SmallVector<int64_t> fewest(info->stages,
                              std::numeric_limits<int64_t>::max());
  for (auto [c, layers] : llvm::enumerate(chunks))
    fewest[info->deviceOf(c)] =
        std::min(fewest[info->deviceOf(c)], int64_t(layers.size()));
  SmallVector<int64_t> kept;
  for (auto [c, layers] : llvm::enumerate(chunks)) {
    if (layers.empty())
      continue;
    // Every stage of a device drops as many layers as the others (what a
    // layer adds to a device's figures is then what each of its stages'
    // layers adds, whatever the stage); the first device's stages keep one
    // more, so that the first stage keeps the step's second layer (the
    // one the middle layers are copies of).
    int64_t d = info->deviceOf(c);
    int64_t take = std::min<int64_t>(keep + int64_t(layers.size()) - fewest[d] +
                                         (d == 0 ? 1 : 0),
                                     int64_t(layers.size()));
    kept.append(layers.begin(), layers.begin() + take);
    // The last stage keeps the step's last layer among its own.
    if (c + 1 == chunks.size() && kept.back() != layers.back())
      kept.back() = layers.back();
  }
  return shortenedCopy(module, ArrayRef<int64_t>(kept), why);
}

OwningOpRef<ModuleOp> mlir::par::shortenedCopy(ModuleOp module,
                                               ArrayRef<int64_t> keptLayers,
                                               std::string &why) {
  OwningOpRef<ModuleOp> copy = module.clone();
  FailureOr<StepLayers> found = layersOf(*copy, why);
  if (failed(found))
    return nullptr;
  StepLayers &layers = *found;
  int64_t n = int64_t(layers.order.size());
  llvm::DenseSet<int64_t> keptSet(keptLayers.begin(), keptLayers.end());
  if (n == 0) {
    why = "the step has no layers";
    return nullptr;
  }
  if (!keptSet.contains(layers.order.front()) ||
      !keptSet.contains(layers.order.back())) {
    why = "the first and the last layer must be kept";
    return nullptr;
  }
  func::FuncOp func = layers.func;
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Each run of dropped layers (a gap): the layer kept before it (B), the
  // one after it (A), its first dropped layer and its last (J), which must
  // be a copy of B.
  struct Gap {
    int64_t before, after, first, last;
  };
  SmallVector<Gap> gaps;
  DenseMap<int64_t, unsigned> gapOf;
  llvm::DenseSet<int64_t> droppedLayers;
  for (int64_t i = 1; i < n; ++i) {
    int64_t layer = layers.order[i];
    if (keptSet.contains(layer))
      continue;
    if (keptSet.contains(layers.order[i - 1]))
      gaps.push_back({layers.order[i - 1], 0, layer, layer});
    gaps.back().last = layer;
    gaps.back().after = layers.order[i + 1];
    gapOf[layer] = gaps.size() - 1;
    droppedLayers.insert(layer);
  }
  if (gaps.empty()) {
    why = "no middle layer to drop";
    return nullptr;
  }
  for (const Gap &gap : gaps)
    if (!sameLayer(layers, gap.before, gap.last)) {
      why = "layer " + std::to_string(gap.last) + " is not a copy of layer " +
            std::to_string(gap.before);
      return nullptr;
    }

  // What goes: the dropped layers' ops; the ops outside the layers that
  // read what goes (a dropped parameter's update) or whose results only
  // what goes reads; arguments only what goes reads.
  llvm::DenseSet<Operation *> dropped;
  llvm::BitVector droppedArgs(func.getNumArguments());
  for (int64_t layer : droppedLayers)
    for (Operation *op : layers.ops[layer])
      dropped.insert(op);
  auto goes = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return bool(droppedArgs[arg.getArgNumber()]);
    return dropped.contains(value.getDefiningOp());
  };
  auto onlyForDropped = [&](Value value) {
    return !value.use_empty() &&
           llvm::all_of(value.getUsers(), [&](Operation *user) {
             return dropped.contains(user);
           });
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : body.without_terminator())
      if (!getLayer(&op) && !dropped.contains(&op) &&
          llvm::any_of(op.getOperands(), goes)) {
        dropped.insert(&op);
        changed = true;
      }
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (!getLayer(&op) && !dropped.contains(&op) && op.getNumResults() > 0 &&
          llvm::all_of(op.getResults(), onlyForDropped)) {
        dropped.insert(&op);
        changed = true;
      }
    for (BlockArgument arg : body.getArguments())
      if (!droppedArgs[arg.getArgNumber()] && onlyForDropped(arg)) {
        droppedArgs.set(arg.getArgNumber());
        changed = true;
      }
  }

  // What stays reads what it read in the whole step: the layer after a
  // gap reads from the layer before it what it read from the last dropped
  // one (J, a copy of B: the value at the same position), and the layer
  // before the gap reads, where it read from the first dropped layer, what
  // J's matching op reads from outside the gap.
  auto describe = [](Operation *op) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "'" << op->getName() << "' at " << op->getLoc();
    return text;
  };
  for (Operation &op : body.without_terminator()) {
    if (dropped.contains(&op))
      continue;
    std::optional<int64_t> layer = getLayer(&op);
    for (OpOperand &operand : op.getOpOperands()) {
      Value value = operand.get();
      if (!goes(value))
        continue;
      Operation *def = value.getDefiningOp();
      std::optional<int64_t> from = def ? getLayer(def) : std::nullopt;
      auto gap = from ? gapOf.find(*from) : gapOf.end();
      Value replacement;
      if (layer && gap != gapOf.end()) {
        const Gap &g = gaps[gap->second];
        if (*layer == g.after && *from == g.last) {
          replacement = layers.ops[g.before][layers.position[def]]->getResult(
              cast<OpResult>(value).getResultNumber());
        } else if (*layer == g.before && *from == g.first) {
          // What J's op reads there must be what the layer after the gap
          // passes back.
          Operation *match = layers.ops[g.last][layers.position[&op]];
          replacement = match->getOperand(operand.getOperandNumber());
          Operation *source = replacement.getDefiningOp();
          if (goes(replacement) || !source || getLayer(source) != g.after)
            replacement = nullptr;
        }
      }
      if (!replacement) {
        why = describe(&op) + " reads " +
              (def ? describe(def) : std::string("an argument")) +
              ", which goes with the layers dropped";
        return nullptr;
      }
      operand.set(replacement);
    }
  }
  // The step's results that go: the updates of the dropped parameters and
  // states, and nothing else.
  // A result that stays may not update an argument that goes.
  llvm::BitVector droppedResults(func.getNumResults());
  for (OpOperand &operand : ret->getOpOperands()) {
    unsigned r = operand.getOperandNumber();
    std::optional<unsigned> arg = getUpdatedArgument(func, r);
    bool argGoes = arg && droppedArgs[*arg];
    if (goes(operand.get()) != argGoes) {
      why = "result " + std::to_string(r) +
            (argGoes ? " updates argument " + std::to_string(*arg) +
                           ", which only the layers dropped read"
                     : " depends on the layers dropped");
      return nullptr;
    }
    droppedResults[r] = argGoes;
  }
  ret->eraseOperands(droppedResults);
  if (failed(func.eraseResults(droppedResults))) {
    why = "its results could not be erased";
    return nullptr;
  }
  SmallVector<Operation *> erased;
  for (Operation &op : body.without_terminator())
    if (dropped.contains(&op))
      erased.push_back(&op);
  for (Operation *op : llvm::reverse(erased)) {
    if (!op->use_empty()) {
      why = describe(op) + " is still read";
      return nullptr;
    }
    op->erase();
  }
  SmallVector<int64_t> newIndex;
  for (unsigned a = 0, next = 0; a < droppedArgs.size(); ++a)
    newIndex.push_back(droppedArgs[a] ? -1 : int64_t(next++));
  if (failed(func.eraseArguments(droppedArgs))) {
    why = "its arguments could not be erased";
    return nullptr;
  }
  renumberArguments(func, newIndex);
  // A pipelined step's virtual stages begin at their first layer kept.
  if (std::optional<PipelineInfo> info = getPipeline(func)) {
    if (info->chunks() < 1) {
      why = "the pipeline record has no stages";
      return nullptr;
    }
    SmallVector<int64_t> firstKept(info->chunks(), -1);
    for (int64_t layer : llvm::reverse(layers.order))
      if (!droppedLayers.contains(layer))
        firstKept[std::min(info->stageOfLayer(layer), info->chunks() - 1)] =
            layer;
    for (auto [c, layer] : llvm::enumerate(firstKept))
      if (layer < 0) {
        why = "virtual stage " + std::to_string(c) + " keeps no layer";
        return nullptr;
      }
    info->firstLayers.assign(firstKept.begin(), firstKept.end());
    setPipeline(func, *info);
  }
  return copy;
}

namespace {
struct TestShortenedStepPass
    : public par::impl::TestShortenedStepPassBase<TestShortenedStepPass> {
  using TestShortenedStepPassBase::TestShortenedStepPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string why;
    std::optional<ShortenableStep> step = shortenableStep(module, why);
    OwningOpRef<ModuleOp> copy = !step ? nullptr
                                 : stageLayers
                                     ? shortenedStages(module, stageLayers, why)
                                     : shortenedCopy(module, first, why);
    if (!copy) {
      module.emitError() << "the step cannot be shortened: " << why;
      return signalPassFailure();
    }
    module.getBodyRegion().takeBody(copy->getBodyRegion());
  }
};
} // namespace
