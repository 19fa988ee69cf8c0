//===- Zero.cpp - --par-zero: ZeRO stages as shardings --------------------===//
//
// ZeRO over the data-parallel axis, written as shardings of a propagated
// training step (a function --par-autodiff marked with par.zero):
//   stage 1: the master weights and optimizer states are split over the
//     data axis on one more dim (Z, the parameter's layout plus the axis);
//     each gradient is reduce-scattered into Z after the whole backward
//     pass (its full-size buffer lives until then); the working copy of the
//     parameters is all-gathered once, at the top of the step;
//   stage 2: as stage 1, but each gradient is reduce-scattered as soon as it
//     is produced, so its full-size buffer dies right away;
//   stage 3: as stage 2, and the working copy is gathered just before each
//     use, forward and backward, and dies after it.
// The collectives come from the partitioner like any other reshard; "late"
// constraints (par.late) make --par-schedule issue their collectives just
// before their first use instead of as early as possible.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Propagation.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "par-zero"

namespace mlir::par {
#define GEN_PASS_DEF_ZEROPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

/// `layout` with `axis` appended (minor) to the dim zeroShardDim picks. A
/// tensor with no such dim stays as it is. --par-autodiff makes a parameter
/// none of whose dims divides, or with fewer than n elements, a flat view
/// (par.view) of at least n elements, so its one dim splits with less than n
/// elements of padding.
static ShardingAttr withAxis(ShardingAttr layout, RankedTensorType type,
                             MeshOp mesh, StringAttr axis) {
  MLIRContext *ctx = layout.getContext();
  SmallVector<DimShardingAttr> dims(layout.getDims());
  int64_t n = mesh.getAxisSize(axis.getValue());
  SmallVector<int64_t> local;
  for (int64_t d = 0; d < type.getRank(); ++d)
    local.push_back(type.getDimSize(d) / mesh.getNumShards(dims[d].getAxes()));
  int64_t chosen = zeroShardDim(local, n);
  if (chosen < 0)
    return layout; // nothing to split (a scalar, or one element a device)
  SmallVector<StringAttr> axes(dims[chosen].getAxes());
  axes.push_back(axis);
  dims[chosen] =
      DimShardingAttr::get(ctx, axes, /*isClosed=*/true, std::nullopt);
  SmallVector<StringAttr> replicated;
  for (StringAttr r : layout.getReplicatedAxes())
    if (r != axis)
      replicated.push_back(r);
  return ShardingAttr::get(ctx, layout.getMesh(), dims, replicated,
                           layout.getPartialAxes());
}

/// The view of flat master `param` that starts at `op` (ops marked
/// par.view_of it, each the one reader of the one before), or nothing when
/// `op` is not part of one.
static SmallVector<Operation *> viewChain(Operation *op, int64_t param) {
  SmallVector<Operation *> chain;
  while (op && getViewOf(op) == param) {
    chain.push_back(op);
    Value result = op->getResult(0);
    op = result.hasOneUse() ? *result.getUsers().begin() : nullptr;
  }
  return chain;
}

/// The first (in block order) op that owns one of `uses`.
static Operation *firstOwner(ArrayRef<OpOperand *> uses) {
  Operation *first = uses.front()->getOwner();
  for (OpOperand *use : uses)
    if (use->getOwner()->isBeforeInBlock(first))
      first = use->getOwner();
  return first;
}

static bool usesAxis(ShardingAttr layout, StringAttr axis) {
  for (DimShardingAttr dim : layout.getDims())
    if (llvm::is_contained(dim.getAxes(), axis))
      return true;
  return false;
}

/// Whether `split` is `layout` with `axis` added to one dim (and nothing
/// else moved): then it is a ZeRO split of the parameter.
static bool isLayoutPlusAxis(ShardingAttr split, ShardingAttr layout,
                             StringAttr axis) {
  ArrayRef<DimShardingAttr> a = split.getDims(), b = layout.getDims();
  if (a.size() != b.size() || !usesAxis(split, axis))
    return false;
  for (size_t d = 0; d < a.size(); ++d) {
    SmallVector<StringAttr> without;
    for (StringAttr x : a[d].getAxes())
      if (x != axis)
        without.push_back(x);
    if (ArrayRef<StringAttr>(without) != b[d].getAxes())
      return false;
  }
  return true;
}

static LogicalResult applyZero(func::FuncOp func, bool &changed) {
  int64_t stage = getZeroStage(func);
  if (stage == 0)
    return success();
  MLIRContext *ctx = func.getContext();
  auto axisName = StringAttr::get(ctx, getDataAxis(func));
  OpBuilder b(ctx);
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Which results replace which arguments.
  DenseMap<unsigned, unsigned> resultOf;
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (std::optional<unsigned> arg = getUpdatedArgument(func, r))
      resultOf[*arg] = r;

  // A constraint (data movement) of the step's `phase`.
  auto constrain = [&](Value value, ShardingAttr layout, Operation *before,
                       bool isLate, Phase phase) -> Value {
    b.setInsertionPoint(before);
    auto c = ShardingConstraintOp::create(b, before->getLoc(), value.getType(),
                                          value, layout);
    setValueSharding(c.getResult(), layout);
    setPhase(c, phase);
    if (isLate)
      setLate(c);
    return c.getResult();
  };
  // An argument now laid out as `layout`: the function result that
  // replaces it takes the same layout (propagation lays out what computes
  // it).
  // (Written to the signature at once at the end: nothing here reads an
  // argument's layout after changing it.)
  SignatureAttrs signature(func);
  auto relayoutArgument = [&](BlockArgument arg, ShardingAttr layout) {
    signature.setArgSharding(arg.getArgNumber(), layout);
    auto it = resultOf.find(arg.getArgNumber());
    if (it == resultOf.end())
      return;
    signature.setResultSharding(it->second, layout);
  };

  // What --par-autodiff marked: each parameter's gradient as the backward
  // pass produces it, and the copy of each master the step computes with.
  DenseMap<int64_t, Value> gradientOf, copyOf;
  SmallVector<OptimizerUpdateOpInterface> updates;
  for (Operation &op : body) {
    if (inPhase(&op, Phase::backward))
      for (int64_t param : getGradientOf(&op))
        gradientOf[param] = op.getResult(0);
    if (std::optional<int64_t> master = getCopyOf(&op))
      copyOf[*master] = op.getResult(0);
    if (auto update = dyn_cast<OptimizerUpdateOpInterface>(op))
      updates.push_back(update);
  }

  SmallVector<Value> scatteredGrads;
  for (OptimizerUpdateOpInterface update : updates) {
    // The parameter the update reads: the argument itself, or the argument
    // through the constraint --auto-shard places on the optimizer phase's
    // reads (its layout for the update).
    Value read = update.getParam();
    ShardingAttr updateLayout;
    if (auto constraint = read.getDefiningOp<ShardingConstraintOp>()) {
      updateLayout = constraint.getSharding();
      read = constraint.getInput();
    }
    auto param = dyn_cast<BlockArgument>(read);
    if (!param)
      continue;
    auto type = cast<RankedTensorType>(param.getType());
    // (Through the signature: an earlier update may have relaid it out.)
    ShardingAttr layout = dyn_cast_or_null<ShardingAttr>(
        signature.arg(param.getArgNumber()).get(ParDialect::kShardingAttrName));
    if (!layout)
      continue; // not propagated: nothing to build on
    MeshOp mesh = lookupMesh(func, layout.getMesh());
    if (!mesh || mesh.getAxisIndex(axisName.getValue()) < 0)
      return func.emitError()
             << "ZeRO stage " << stage << " needs the data axis \""
             << axisName.getValue() << "\" in mesh " << layout.getMesh()
             << " (set data-axis= of --par-autodiff to an axis of the mesh)";
    if (mesh.getAxisSize(axisName.getValue()) == 1 ||
        usesAxis(layout, axisName))
      continue;
    // Where the plan already splits the update over the data axis, that
    // layout is the split (master and states then need no reshard to meet
    // the update); otherwise the axis goes to the dim it divides best.
    ShardingAttr split =
        updateLayout && isLayoutPlusAxis(updateLayout, layout, axisName)
            ? updateLayout
            : withAxis(layout, type, mesh, axisName);
    if (split == layout)
      continue;

    // Master weight and states: split.
    relayoutArgument(param, split);
    for (Value operand : update.getStates())
      if (auto state = dyn_cast<BlockArgument>(operand))
        relayoutArgument(state, split);
    for (Value result : update->getResults())
      setValueSharding(result, split);

    // The gradient, as the backward pass produces it: reduce-scattered
    // into the split layout after the backward pass (stage 1) or as soon as
    // it exists (stages 2, 3). What the step does to it before the update
    // (unscaling, clipping, the norm, the conversion to fp32) then works on
    // the shard. Stage 1's reduction is deferred to the optimizer phase.
    Value grad = gradientOf.lookup(param.getArgNumber());
    if (!grad)
      return update->emitError()
             << "ZeRO stage " << stage << ": no op is marked as the gradient "
             << "of argument #" << param.getArgNumber()
             << " (par.gradient_of; run --par-autodiff to build the step)";
    ShardingAttr whole =
        ShardingAttr::get(ctx, split.getMesh(), split.getDims(), {}, {});
    Operation *producer = grad.getDefiningOp();
    Value scattered =
        constrain(grad, whole, producer->getNextNode(), /*isLate=*/stage == 1,
                  stage == 1 ? Phase::optimizer : Phase::backward);
    carryMarks(producer, scattered);
    grad.replaceAllUsesExcept(scattered, scattered.getDefiningOp());
    scatteredGrads.push_back(scattered);

    // The working copy (the low-precision convert of the master, or the
    // master itself): gathered once at the top (stages 1, 2) or before each
    // use (stage 3).
    Value working = param;
    if (Value copy = copyOf.lookup(param.getArgNumber())) {
      working = copy;
      setValueSharding(working, whole);
    }
    // Its uses in the forward and backward passes (not the update's).
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : working.getUses())
      if (inPhase(use.getOwner(), Phase::forward) ||
          inPhase(use.getOwner(), Phase::backward))
        uses.push_back(&use);
    if (uses.empty())
      continue;
    if (stage == 3) {
      // A flat master's copy is read through its view (ops marked
      // par.view_of, each reading the one before): the view's readers are
      // the uses, and each gather below gets a copy of the view.
      SmallVector<OpOperand *> direct;
      DenseMap<Operation *, SmallVector<Operation *>> chainOf; // by last op
      for (OpOperand *use : uses) {
        SmallVector<Operation *> chain =
            viewChain(use->getOwner(), param.getArgNumber());
        if (chain.empty()) {
          direct.push_back(use);
          continue;
        }
        for (OpOperand &viewUse : chain.back()->getResult(0).getUses())
          if (inPhase(viewUse.getOwner(), Phase::forward) ||
              inPhase(viewUse.getOwner(), Phase::backward))
            direct.push_back(&viewUse);
        chainOf[chain.back()] = std::move(chain);
      }
      uses = std::move(direct);
      // One gather for the forward uses and one for the backward uses,
      // each issued just before its first use and dead after its last.
      for (Phase phase : {Phase::forward, Phase::backward}) {
        SmallVector<OpOperand *> inPhaseUses;
        for (OpOperand *use : uses)
          if (inPhase(use->getOwner(), phase))
            inPhaseUses.push_back(use);
        if (inPhaseUses.empty())
          continue;
        Operation *first = firstOwner(inPhaseUses);
        Value gathered =
            constrain(working, layout, first, /*isLate=*/true, phase);
        DenseMap<Operation *, Value> viewed; // this gather's view copies
        for (OpOperand *use : inPhaseUses) {
          auto chain = chainOf.find(use->get().getDefiningOp());
          if (chain == chainOf.end()) {
            use->set(gathered);
            continue;
          }
          Value &copy = viewed[chain->first];
          if (!copy) {
            b.setInsertionPoint(first);
            copy = gathered;
            for (Operation *op : chain->second) {
              Operation *clone = b.clone(*op);
              clone->setOperand(0, copy);
              setPhase(clone, phase);
              copy = clone->getResult(0);
            }
          }
          use->set(copy);
        }
      }
      for (auto &[last, chain] : chainOf)
        for (Operation *op : llvm::reverse(chain))
          if (op->use_empty())
            op->erase();
      continue;
    }
    // Stages 1 and 2: one gathered copy for the whole step, so no op is
    // partitioned around the split master instead.
    Value gathered = constrain(working, layout, firstOwner(uses),
                               /*isLate=*/false, Phase::forward);
    // The gathered copy is the working copy now; a flat master's is the
    // end of its view (the ops marked par.view_of), which the step reads.
    setCopyOf(gathered.getDefiningOp(), param.getArgNumber());
    for (OpOperand *use : uses)
      use->set(gathered);
    if (gathered.hasOneUse())
      if (SmallVector<Operation *> view = viewChain(
              *gathered.getUsers().begin(), param.getArgNumber());
          !view.empty())
        setCopyOf(view.back(), param.getArgNumber());
  }

  // Everything computed from the split gradients before the updates loses
  // its layout, so that propagation, run again, lays it out from the shards
  // (split element-wise work, partial sums for the norm) instead of
  // gathering the gradients back.
  SmallVector<Value> work(scatteredGrads.begin(), scatteredGrads.end());
  DenseSet<Operation *> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (isa<OptimizerUpdateOpInterface, func::ReturnOp, ShardingConstraintOp>(
              user) ||
          user->getNumResults() != 1 || !seen.insert(user).second)
        continue;
      // Propagation lays it out again: a plan's record no longer holds.
      user->removeAttr(ParDialect::kShardingAttrName);
      user->removeAttr(ParDialect::kPlannedAttrName);
      work.push_back(user->getResult(0));
      // Scalars broadcast or constants splat for this op alone follow it.
      for (Value operand : user->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && operand.hasOneUse() &&
            (def->hasTrait<::mlir::OpTrait::ConstantLike>() ||
             isScalarBroadcast(operand))) {
          def->removeAttr(ParDialect::kShardingAttrName);
          def->removeAttr(ParDialect::kPlannedAttrName);
        }
      }
    }
  }
  signature.write();
  changed = !scatteredGrads.empty();
  return success();
}

namespace {
struct ZeroPass : public par::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    bool changed = false, staged = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      bool changedHere = false;
      if (func.isDeclaration() ||
          func->hasAttr(ParDialect::kPartitionedAttrName))
        continue;
      staged |= getZeroStage(func) != 0;
      if (failed(applyZero(func, changedHere)))
        return signalPassFailure();
      changed |= changedHere;
    }
    // A module without ZeRO is left as it is: nothing to verify again.
    if (!staged)
      return markAllAnalysesPreserved();
    if (changed)
      propagateShardings(getOperation(), /*explain=*/nullptr, diagnose);
  }
};
} // namespace
