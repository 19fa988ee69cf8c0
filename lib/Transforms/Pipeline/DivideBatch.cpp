//===- DivideBatch.cpp - A step at its whole batch, run in micro-batches --===//
//
// `--par-pipeline="microbatches=m divide-batch"` on a training step written
// at the whole batch B of a step: the first dimension of every data
// argument (the batch) is divided by m, and so is every dimension the batch
// reaches through the ops' sharding rules. This is the factor machinery of
// partitioning with the batch factor split m ways over time instead of over
// devices: an op's local form is its global form at the smaller size.
//
// What one micro-batch makes is its share of the whole step, so that the m
// shares add up to it (the accumulation sums them):
// - the backward pass already is: autodiff counted the tokens of the whole
//   batch (cross_entropy's 1/tokens, a mean's 1/count);
// - a mean over the batch (cross_entropy, a reduce mean), which at the
//   smaller type means over the micro-batch, is scaled by 1/m;
// - a value that does not depend on the data, added to a share (a
//   regularizer on the loss, its gradient on a weight's), is scaled by 1/m.
// A share may only flow through ops linear in it; anything else (a max over
// the batch, a share squared, a share spread back over the batch) depends
// on the whole batch at once, and is an error naming the op.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Pipeline.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::par;

namespace {
/// Where a value holds the batch: its dimension `dim`, after `outer` rows of
/// the factors more major than the batch within that dimension (a merged
/// batch x sequence dimension: outer 1).
struct BatchDim {
  int64_t dim;
  int64_t outer;
  bool operator==(const BatchDim &o) const {
    return dim == o.dim && outer == o.outer;
  }
};

class BatchDivider {
public:
  BatchDivider(func::FuncOp func, int64_t m) : func(func), m(m) {}
  LogicalResult run();

private:
  LogicalResult seed();
  LogicalResult propagate();
  LogicalResult propagateThrough(Operation *op, bool &changed);
  LogicalResult mark(Value value, BatchDim where, Operation *op, bool &changed);
  std::optional<int64_t> batchFactor(const ShardingRule &rule,
                                     const DimFactors &factors,
                                     int64_t outer) const;
  LogicalResult checkShares();
  LogicalResult retype();
  void scaleShares();
  std::string describe(Value value) const;

  bool isSplit(Value v) const { return dims.count(v); }
  bool isShare(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && region.contains(def) && !isSplit(v);
  }

  func::FuncOp func;
  int64_t m;
  int64_t batch = 0; // B, the rows of a step
  SmallVector<BlockArgument> data;
  DenseMap<Value, BatchDim> dims;
  /// The batch factor of each op that reads or makes a batch dimension.
  DenseMap<Operation *, int64_t> factorOf;
  /// The forward and backward ops that depend on the data.
  llvm::SetVector<Operation *> region;
  /// Means over the batch, scaled by 1/m once retyped.
  SmallVector<Operation *> means;
  /// Operands that do not depend on the data, added to a share.
  SmallVector<OpOperand *> wholeAddends;
};
} // namespace

/// Calls `fn` with each operand and result of `op` and its mapping in
/// `rule`, until one fails.
static LogicalResult
forEachTensor(Operation *op, const ShardingRule &rule,
              function_ref<LogicalResult(Value, const TensorFactors &)> fn) {
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (failed(fn(operand, rule.getOperandMappings()[i])))
      return failure();
  for (auto [i, result] : llvm::enumerate(op->getResults()))
    if (failed(fn(result, rule.getResultMappings()[i])))
      return failure();
  return success();
}

std::string BatchDivider::describe(Value value) const {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return "argument #" + std::to_string(arg.getArgNumber());
  Operation *def = value.getDefiningOp();
  return "the result of '" + def->getName().getStringRef().str() + "'";
}

LogicalResult BatchDivider::seed() {
  data = dataArguments(func);
  if (data.empty())
    return func.emitError()
           << "--par-pipeline divide-batch: @" << func.getSymName()
           << " has no data argument whose batch to divide";
  bool changed = false;
  for (BlockArgument arg : data) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape() || type.getRank() == 0)
      return emitError(arg.getLoc())
             << "--par-pipeline divide-batch: data argument #"
             << arg.getArgNumber()
             << " needs a static tensor type with a batch dimension, got "
             << arg.getType();
    int64_t rows = type.getDimSize(0);
    if (batch && rows != batch)
      return emitError(arg.getLoc())
             << "--par-pipeline divide-batch: data argument #"
             << arg.getArgNumber() << " has " << rows << " rows but argument #"
             << data.front().getArgNumber() << " has " << batch
             << ": the data arguments' first dimensions are the batch";
    batch = rows;
    if (rows % m != 0)
      return emitError(arg.getLoc())
             << "--par-pipeline: microbatches=" << m
             << " does not divide the batch of " << rows
             << " rows (data argument #" << arg.getArgNumber() << ", " << type
             << ")";
    for (Operation *user : arg.getUsers())
      if (!inPhase(user, Phase::forward) && !inPhase(user, Phase::backward))
        return user->emitError()
               << "--par-pipeline divide-batch: '" << user->getName()
               << "' reads data argument #" << arg.getArgNumber()
               << " outside the forward and backward passes, which run "
                  "once per micro-batch";
    if (failed(mark(arg, BatchDim{0, 1}, func, changed)))
      return failure();
  }
  return success();
}

std::optional<int64_t> BatchDivider::batchFactor(const ShardingRule &rule,
                                                 const DimFactors &factors,
                                                 int64_t outer) const {
  int64_t before = 1;
  for (int64_t f : factors) {
    if (before == outer && rule.getFactor(f).size == batch)
      return f;
    before *= rule.getFactor(f).size;
  }
  return std::nullopt;
}

LogicalResult BatchDivider::mark(Value value, BatchDim where, Operation *op,
                                 bool &changed) {
  auto [it, inserted] = dims.try_emplace(value, where);
  if (inserted) {
    if (auto arg = dyn_cast<BlockArgument>(value);
        arg && !llvm::is_contained(data, arg))
      return op->emitError()
             << "--par-pipeline divide-batch: the batch reaches argument #"
             << arg.getArgNumber()
             << ", which is not a data argument (a parameter or optimizer "
                "state cannot be divided into micro-batches)";
    changed = true;
    return success();
  }
  if (it->second == where)
    return success();
  return op->emitError() << "--par-pipeline divide-batch: " << describe(value)
                         << " holds the batch in two ways (dimension "
                         << it->second.dim << " after " << it->second.outer
                         << " row(s) of the factors before it, and dimension "
                         << where.dim << " after " << where.outer
                         << "); a micro-batch is a run of rows of one";
}

LogicalResult BatchDivider::propagateThrough(Operation *op, bool &changed) {
  auto touches = [&](ValueRange values) {
    return llvm::any_of(values, [&](Value v) { return isSplit(v); });
  };
  if (!touches(op->getOperands()) && !touches(op->getResults()))
    return success();
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled)
    return op->emitError() << "--par-pipeline divide-batch: '" << op->getName()
                           << "' reads or makes the batch and has no "
                              "sharding rule to say how";
  ShardingRule rule = ruled.getShardingRule();
  // The op's batch factor, from each tensor that holds the batch.
  std::optional<int64_t> factor;
  auto find = [&](Value value, const TensorFactors &mapping) -> LogicalResult {
    auto it = dims.find(value);
    if (it == dims.end())
      return success();
    std::optional<int64_t> f =
        batchFactor(rule, mapping[it->second.dim], it->second.outer);
    if (!f)
      return op->emitError()
             << "--par-pipeline divide-batch: '" << op->getName()
             << "' splits or merges the batch dimension of " << describe(value)
             << " (" << batch << " rows) so that micro-batches of " << batch / m
             << " rows are not runs of its rows";
    if (factor && *factor != *f)
      return op->emitError()
             << "--par-pipeline divide-batch: '" << op->getName()
             << "' combines two tensors' batches unlike "
                "rows (they map to different factors)";
    factor = f;
    return success();
  };
  if (failed(forEachTensor(op, rule, find)))
    return failure();
  const Factor &f = rule.getFactor(*factor);
  if (f.kind == FactorKind::NeedReplication ||
      f.kind == FactorKind::Permutation ||
      f.combiner == FactorCombiner::Internal || f.positional)
    return op->emitError()
           << "--par-pipeline divide-batch: '" << op->getName()
           << "' needs every row of the batch at once (its sharding rule "
              "cannot split the batch), so the step cannot run in "
              "micro-batches";
  // Ops that index a dimension (gather, scatter_add, embedding) address
  // its rows by their global number: the batch may be what they index
  // with, never what they index into.
  bool indexesBatch = false;
  if (auto scatter = dyn_cast<ScatterAddOp>(op)) {
    for (int64_t d : scatter.getDims())
      indexesBatch |=
          llvm::is_contained(rule.getOperandMappings()[0][d], *factor);
  } else if (f.kind == FactorKind::Reduction) {
    // The batch reduced away: a sum over it (a contraction, a reduce, the
    // tokens of a loss, the updates of a scatter) adds up over
    // micro-batches; any other reduction (a gather's row, an embedding
    // table's) is an index.
    indexesBatch = !isa<DotOp, ReduceOp, CrossEntropyOp, ScatterAddOp>(op);
  }
  if (indexesBatch)
    return op->emitError()
           << "--par-pipeline divide-batch: '" << op->getName()
           << "' indexes into the batch dimension by row number, which a "
              "micro-batch holds only some of";
  factorOf[op] = *factor;
  auto spread = [&](Value value, const TensorFactors &mapping) {
    for (auto [d, list] : llvm::enumerate(mapping)) {
      int64_t before = 1;
      for (int64_t g : list) {
        if (g == *factor)
          return mark(value, BatchDim{int64_t(d), before}, op, changed);
        before *= rule.getFactor(g).size;
      }
    }
    return success();
  };
  return forEachTensor(op, rule, spread);
}

LogicalResult BatchDivider::propagate() {
  // Forward and backward sweeps until nothing changes: a constant spread
  // over the batch learns it from the op that reads it.
  Block &body = func.getBody().front();
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : body.without_terminator())
      if (failed(propagateThrough(&op, changed)))
        return failure();
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (failed(propagateThrough(&op, changed)))
        return failure();
  }
  return success();
}

/// Whether `op`, reducing the batch, averages over it: at the
/// micro-batch's size it averages over the micro-batch.
static bool meansOver(Operation *op) {
  if (isa<CrossEntropyOp>(op))
    return true;
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.getKind() == ReduceKind::mean;
  return false;
}

LogicalResult BatchDivider::checkShares() {
  Block &body = func.getBody().front();
  region = dataDependentPasses(func, data);
  auto floating = [](Value v) {
    return isa<FloatType>(getElementTypeOrSelf(v.getType()));
  };

  auto fail =
      [&](Operation *op, const Twine &why) {
        return op->emitError()
               << "--par-pipeline divide-batch: '" << op->getName() << "' "
               << why
               << ", so the step cannot be divided into micro-batches whose "
                  "shares add up to it";
      };
  for (Operation &op : body.without_terminator()) {
    auto factor = factorOf.find(&op);
    bool reducesBatch = false;
    if (factor != factorOf.end()) {
      ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
      const Factor &f = rule.getFactor(factor->second);
      reducesBatch = f.kind == FactorKind::Reduction;
      if (reducesBatch && f.combiner != FactorCombiner::Sum)
        return fail(&op, "reduces over the batch with " +
                             stringifyFactorCombiner(f.combiner).str() +
                             " (only sums and means add up)");
    }
    if (!region.contains(&op)) {
      // Computed once for every micro-batch: it must be the same for each,
      // constant along the batch.
      if (reducesBatch)
        return fail(&op, "reduces over the batch a value that does not "
                         "depend on the data");
      if (auto constant = dyn_cast<ConstantOp>(op);
          constant && isSplit(constant.getResult())) {
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || !dense.isSplat())
          return fail(&op, "is a constant that differs along the batch");
      }
      continue;
    }
    if (reducesBatch && meansOver(&op)) {
      if (!floating(op.getResult(0)))
        return fail(&op, "averages integers over the batch");
      means.push_back(&op);
    }
    // A scatter_add that sums the batch's updates into an operand that
    // does not depend on the data adds that operand once per micro-batch.
    if (auto scatter = dyn_cast<ScatterAddOp>(op);
        scatter && reducesBatch && !isShare(scatter.getOperand()) &&
        !isSplit(scatter.getOperand()) && !isZeroSplat(scatter.getOperand())) {
      if (!floating(scatter.getOperand()))
        return fail(&op, "adds integers that do not depend on the data to "
                         "a sum over the batch");
      wholeAddends.push_back(&scatter.getOperandMutable());
    }
    SmallVector<OpOperand *> shares;
    for (OpOperand &use : op.getOpOperands())
      if (isShare(use.get()))
        shares.push_back(&use);
    if (shares.empty())
      continue;
    for (Value result : op.getResults())
      if (isSplit(result))
        return fail(&op, "spreads " + describe(shares.front()->get()) +
                             ", a share of a sum over the batch, back over "
                             "the batch");
    auto wholeOthers = [&]() {
      return llvm::all_of(op.getOpOperands(), [&](OpOperand &use) {
        return isShare(use.get()) || !isSplit(use.get());
      });
    };
    bool linear = false;
    if (isa<AddOp, SubOp>(op) && wholeOthers()) {
      linear = true;
      for (OpOperand &use : op.getOpOperands())
        if (!isShare(use.get())) {
          if (!floating(use.get()))
            return fail(&op, "adds integers that do not depend on the "
                             "data to a sum over the batch");
          wholeAddends.push_back(&use);
        }
    } else if (isa<MulOp, DotOp>(op)) {
      linear = shares.size() == 1 && wholeOthers();
    } else if (isa<DivOp>(op)) {
      linear = shares.size() == 1 && shares.front()->getOperandNumber() == 0 &&
               wholeOthers() && floating(op.getResult(0));
    } else if (auto scatter = dyn_cast<ScatterAddOp>(op)) {
      // More updates added to a share (chained accumulation).
      linear = shares.size() == 1 && shares.front()->getOperandNumber() == 0;
    } else if (auto reduce = dyn_cast<ReduceOp>(op)) {
      linear = reduce.getKind() == ReduceKind::sum ||
               reduce.getKind() == ReduceKind::mean;
    } else if (isa<ConvertOp>(op)) {
      linear = floating(op.getResult(0));
    } else {
      linear = isa<NegOp, ReshapeOp, TransposeOp, BroadcastOp, SliceOp,
                   ShardingConstraintOp, ReshardOp>(op);
    }
    if (!linear)
      return fail(&op, "reads " + describe(shares.front()->get()) +
                           ", a share of a sum over the batch, and is not "
                           "linear in it");
  }
  // What leaves the passes (for the optimizer, or returned) is a share.
  for (Operation *op : region)
    for (Value result : op->getResults())
      if (isSplit(result))
        for (Operation *user : result.getUsers())
          if (!region.contains(user))
            return user->emitError()
                   << "--par-pipeline divide-batch: '" << user->getName()
                   << "' reads a value with the batch dimension outside "
                      "the forward and backward passes; only sums and "
                      "means over the batch can be accumulated over "
                      "micro-batches";
  return success();
}

LogicalResult BatchDivider::retype() {
  auto divided = [&](Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dims.lookup(value).dim] /= m;
    return type.clone(shape);
  };
  // Attributes that spell the batch out, while the old sizes are at hand:
  // a constant's type (checkShares let only splats through) and a slice's
  // limits (its rule splits the batch only where the slice takes all of
  // it).
  for (auto &[value, where] : dims)
    if (auto constant = value.getDefiningOp<ConstantOp>())
      constant.setValueAttr(cast<DenseElementsAttr>(constant.getValue())
                                .resizeSplat(divided(value)));
  for (Operation &op : func.getBody().front()) {
    if (auto slice = dyn_cast<SliceOp>(op)) {
      auto it = dims.find(slice.getInput());
      if (it == dims.end())
        continue;
      SmallVector<int64_t> limits(slice.getLimits());
      limits[it->second.dim] /= m;
      slice.setLimits(limits);
    }
    if (auto pad = dyn_cast<PadOp>(op)) {
      auto it = dims.find(pad.getInput());
      if (it != dims.end() &&
          (pad.getLow()[it->second.dim] || pad.getHigh()[it->second.dim] ||
           pad.getInteriorOrZeros()[it->second.dim]))
        return pad.emitError() << "--par-pipeline divide-batch: the pad "
                                  "adds rows to the batch dimension";
    }
  }
  for (auto &[value, where] : dims)
    value.setType(divided(value));
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().front().getArgumentTypes(),
                                 func.getResultTypes()));
  return success();
}

void BatchDivider::scaleShares() {
  OpBuilder b(func.getContext());
  auto scaled = [&](Value value, Operation *marksOf) {
    auto type = cast<RankedTensorType>(value.getType());
    Value scale = splatConstant(b, value.getLoc(), type, 1.0 / double(m));
    Value product = MulOp::create(b, value.getLoc(), value, scale);
    StepMarks marks = StepMarks::of(marksOf);
    marks.stamp(scale.getDefiningOp());
    marks.stamp(product.getDefiningOp());
    return product;
  };
  // A mean over the micro-batch is m times its share of the mean over the
  // batch.
  for (Operation *op : means) {
    b.setInsertionPointAfter(op);
    Value result = op->getResult(0);
    Value share = scaled(result, op);
    result.replaceAllUsesExcept(share, share.getDefiningOp());
  }
  // Added once per micro-batch, a whole value counts m times.
  for (OpOperand *use : wholeAddends) {
    b.setInsertionPoint(use->getOwner());
    use->set(scaled(use->get(), use->getOwner()));
  }
}

LogicalResult BatchDivider::run() {
  if (m == 1)
    return success();
  if (failed(seed()) || failed(propagate()) || failed(checkShares()) ||
      failed(retype()))
    return failure();
  scaleShares();
  // Every op's type follows from its operands, and every sharding must
  // still fit its tensor (a micro-batch of fewer rows than the shards a
  // data-parallel axis splits it into does not).
  if (failed(mlir::verify(func)))
    return func.emitError()
           << "--par-pipeline: microbatches=" << m << " divides the batch of "
           << batch << " rows of @" << func.getSymName()
           << " into micro-batches of " << batch / m
           << " row(s), which the step cannot take (see the error above)";
  return success();
}

LogicalResult mlir::par::divideBatch(func::FuncOp func, int64_t m) {
  return BatchDivider(func, m).run();
}
