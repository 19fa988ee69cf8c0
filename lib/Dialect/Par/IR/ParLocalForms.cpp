//===- ParLocalForms.cpp - per-device forms of the ops that need one ------===//
//
// LocalFormOpInterface for every op whose per-device form is more than the
// op on per-device types. --par-to-local sets the result types, positions
// nothing, and calls `localize`; each op builds what it needs through the
// LocalFormContext (global types and shardings, shard offsets, padding
// masks).
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/Matchers.h"

#include <limits>

using namespace mlir;
using namespace mlir::par;

LocalFormContext::~LocalFormContext() = default;

/// The ratio of the local to the global element count over `dims` (1/shards
/// for even splits): a local mean times it is this device's share of the
/// global mean.
static double meanShare(RankedTensorType local, RankedTensorType global,
                        ArrayRef<int64_t> dims) {
  double share = 1;
  for (int64_t d : dims)
    share *= (double)local.getDimSize(d) / (double)global.getDimSize(d);
  return share;
}

/// `value * factor` (a splat constant of its type).
static Value scaled(OpBuilder &b, Location loc, Value value, double factor) {
  auto type = cast<RankedTensorType>(value.getType());
  return MulOp::create(b, loc, type, value,
                       splatConstant(b, loc, type, factor));
}

/// All axes splitting the dims `dims` of `value`, in dim order.
static SmallVector<int32_t> axesOver(LocalFormContext &ctx, Value value,
                                     ArrayRef<int64_t> dims) {
  SmallVector<int32_t> axes;
  for (int64_t d : dims)
    axes.append(ctx.splitAxes(value, d));
  return axes;
}

/// Reductions over split dims: padding is masked with the reduction's
/// identity; a mean becomes this device's share of the global mean.
LogicalResult ReduceOp::localize(LocalFormContext &ctx) {
  if (!ctx.meshOf(getInput()))
    return success();
  // Padding holds the identity of the combiner of the reduced factors.
  double identity = 0;
  if (!getDims().empty()) {
    ShardingRule rule = getShardingRule();
    int64_t factor = rule.getOperandMappings()[0][getDims().front()].front();
    identity = paddingIdentity(rule.getFactor(factor).combiner);
  }
  OpBuilder &b = ctx.builder;
  Location loc = getLoc();
  b.setInsertionPoint(*this);
  Value input = getInput();
  getInputMutable().assign(
      ctx.maskPadding(loc, input, input, getDims(), identity));
  if (getKind() != ReduceKind::mean)
    return success();
  SmallVector<int64_t> split;
  for (int64_t d : getDims())
    if (!ctx.splitAxes(input, d).empty())
      split.push_back(d);
  if (split.empty())
    return success();
  b.setInsertionPointAfter(*this);
  Value result = getResult();
  Value part = scaled(b, loc, result,
                      meanShare(cast<RankedTensorType>(input.getType()),
                                ctx.globalType(input), split));
  ctx.replaceValue(result, part, part.getDefiningOp());
  return success();
}

namespace {
/// What one source of a kept split reads: a value laid out as `layoutOf`, of
/// global shape `shape`, where target index t of dim d reads index
/// offsets[d] + t * strides[d].
struct MovedInput {
  Value layoutOf;
  SmallVector<int64_t> shape, offsets, strides;
};

/// How a slice, a pad or a concat keeps a split along the dims it moves
/// elements on: one par.exchange from its operands' layouts to the
/// result's, reading each operand through its index map. Dims that neither
/// move elements across shards nor change their split stay out of the
/// exchange's group: each device keeps its piece of them.
struct KeptSplit {
  MeshOp mesh;
  SmallVector<int32_t> axes;     // the group, in mesh order
  SmallVector<int64_t> from, to; // flat layouts, sources separated by -2
  SmallVector<int64_t> offsets, strides, sourceSizes, resultSizes;

  /// Plans the move of `inputs` into `result`'s layout; `involved` stays
  /// false when no dim that moves is split (the op's plain local form is
  /// right). A dim marked in `movesAnyway` moves even under the identity
  /// map (its pieces were spread apart locally, so their boundaries are
  /// not the result's).
  KeptSplit(LocalFormContext &ctx, ArrayRef<MovedInput> inputs, Value result,
            ArrayRef<bool> movesAnyway = {}) {
    mesh = ctx.meshOf(result);
    for (const MovedInput &input : inputs)
      if (!mesh)
        mesh = ctx.meshOf(input.layoutOf);
    if (!mesh)
      return;
    ArrayRef<int64_t> globalOut = ctx.globalType(result).getShape();
    ArrayRef<int64_t> localOut =
        cast<RankedTensorType>(result.getType()).getShape();
    int64_t rank = (int64_t)globalOut.size();
    auto splitOf = [&](Value value, int64_t d) {
      return ctx.meshOf(value) ? ctx.splitAxes(value, d)
                               : SmallVector<int32_t>();
    };
    SmallVector<bool> inGroup(rank, false);
    for (int64_t d = 0; d < rank; ++d) {
      SmallVector<int32_t> splitOut = splitOf(result, d);
      for (const MovedInput &input : inputs) {
        SmallVector<int32_t> split = splitOf(input.layoutOf, d);
        bool moves = input.offsets[d] != 0 || input.strides[d] != 1 ||
                     input.shape[d] != globalOut[d] ||
                     (!movesAnyway.empty() && movesAnyway[d]);
        inGroup[d] = inGroup[d] || split != splitOut ||
                     (moves && (!split.empty() || !splitOut.empty()));
      }
      if (!inGroup[d])
        continue;
      axes.append(splitOut);
      for (const MovedInput &input : inputs)
        axes.append(splitOf(input.layoutOf, d));
    }
    llvm::sort(axes);
    axes.erase(llvm::unique(axes), axes.end());
    involved = !axes.empty();
    auto position = [&](int32_t axis) {
      return (int64_t)(llvm::find(axes, axis) - axes.begin());
    };
    auto layout = [&](Value value, SmallVectorImpl<int64_t> &flat) {
      for (int64_t d = 0; d < rank; ++d) {
        if (d)
          flat.push_back(-1);
        if (inGroup[d])
          for (int32_t axis : splitOf(value, d))
            flat.push_back(position(axis));
      }
    };
    layout(result, to);
    for (auto [k, input] : llvm::enumerate(inputs)) {
      if (k)
        from.push_back(-2);
      layout(input.layoutOf, from);
      offsets.append(input.offsets);
      strides.append(input.strides);
      // Outside the group a dim's piece is all the exchange sees of it.
      for (int64_t d = 0; d < rank; ++d)
        sourceSizes.push_back(inGroup[d] ? input.shape[d]
                                         : localSize(ctx, input.layoutOf, d,
                                                     input.shape[d]));
    }
    for (int64_t d = 0; d < rank; ++d)
      resultSizes.push_back(inGroup[d] ? globalOut[d] : localOut[d]);
  }

  bool involved = false;

  /// The exchange that moves `inputs` (this device's pieces) into the
  /// result's local type; elements that read nothing hold `fill`.
  Value build(LocalFormContext &ctx, Location loc, ValueRange inputs,
              RankedTensorType type, double fill) {
    OpBuilder &b = ctx.builder;
    return ExchangeOp::create(
        b, loc, type, inputs, mesh.getSymName(), ctx.axisNames(mesh, axes),
        from, to, b.getDenseI64ArrayAttr(offsets),
        b.getDenseI64ArrayAttr(strides), b.getDenseI64ArrayAttr(sourceSizes),
        b.getDenseI64ArrayAttr(resultSizes), llvm::APFloat(fill));
  }

private:
  /// The size of this device's piece of dim `d` (of global size `size`) of
  /// a value laid out as `layoutOf`, padding included.
  static int64_t localSize(LocalFormContext &ctx, Value layoutOf, int64_t d,
                           int64_t size) {
    MeshOp mesh = ctx.meshOf(layoutOf);
    if (!mesh)
      return size;
    return llvm::divideCeil(size,
                            ctx.numShards(mesh, ctx.splitAxes(layoutOf, d)));
  }
};
} // namespace

/// A sliced dim that is split keeps its split: one exchange takes
/// start + t * stride of the operand for each result index t, moving only
/// what crosses shard boundaries. Otherwise the local slice takes the local
/// extent of every split (untouched) dim.
LogicalResult SliceOp::localize(LocalFormContext &ctx) {
  auto local = cast<RankedTensorType>(getInput().getType());
  RankedTensorType global = ctx.globalType(getInput());
  KeptSplit kept(ctx,
                 {MovedInput{getInput(), to_vector(global.getShape()),
                             to_vector(getStarts()), getStridesOrOnes()}},
                 getResult());
  if (kept.involved) {
    ctx.builder.setInsertionPoint(*this);
    Value moved = kept.build(ctx, getLoc(), getInput(),
                             cast<RankedTensorType>(getResult().getType()),
                             0.0);
    ctx.replaceValue(getResult(), moved, nullptr);
    ctx.eraseOp(*this);
    return success();
  }
  SmallVector<int64_t> limits(getLimits());
  for (int64_t d = 0; d < local.getRank(); ++d)
    if (local.getDimSize(d) != global.getDimSize(d))
      limits[d] = local.getDimSize(d);
  setLimits(limits);
  return success();
}

/// A padded dim that is split keeps its split. Each device first spreads
/// its piece apart (interior padding, plus `interior` fill elements after
/// its last one, so that the pieces of all devices together are the
/// interior-padded operand, split alike); one exchange then shifts that by
/// `low` (result index t reads t - low) and fills the rest.
LogicalResult PadOp::localize(LocalFormContext &ctx) {
  RankedTensorType global = ctx.globalType(getInput());
  auto local = cast<RankedTensorType>(getInput().getType());
  SmallVector<int64_t> interior = getInteriorOrZeros();
  int64_t rank = global.getRank();
  // The operand after its interior padding: what the exchange reads.
  SmallVector<int64_t> spread(global.getShape()), spreadLocal(local.getShape());
  SmallVector<int64_t> offsets(rank, 0), zeros(rank, 0), ones(rank, 1);
  SmallVector<int64_t> after(rank, 0);
  SmallVector<bool> spreadApart(rank, false);
  bool anyInterior = false;
  for (int64_t d = 0; d < rank; ++d) {
    offsets[d] = -getLow()[d];
    if (interior[d] == 0 || spread[d] == 0)
      continue;
    anyInterior = true;
    spread[d] += (spread[d] - 1) * interior[d];
    if (local.getDimSize(d) == global.getDimSize(d)) {
      spreadLocal[d] = spread[d];
      continue;
    }
    // A split dim: every piece spreads to size * (interior + 1), whose
    // boundaries are not the result's even with no edge padding.
    after[d] = interior[d];
    spreadLocal[d] = local.getDimSize(d) * (interior[d] + 1);
    spreadApart[d] = true;
  }
  KeptSplit kept(ctx, {MovedInput{getInput(), spread, offsets, ones}},
                 getResult(), spreadApart);
  if (!kept.involved)
    return success();
  OpBuilder &b = ctx.builder;
  Location loc = getLoc();
  b.setInsertionPoint(*this);
  Value input = getInput();
  if (anyInterior)
    input = PadOp::create(
        b, loc, RankedTensorType::get(spreadLocal, local.getElementType()),
        input, b.getDenseI64ArrayAttr(zeros), b.getDenseI64ArrayAttr(after),
        b.getDenseI64ArrayAttr(interior), getFillAttr());
  Value moved =
      kept.build(ctx, loc, input, cast<RankedTensorType>(getResult().getType()),
                 getFill().convertToDouble());
  ctx.replaceValue(getResult(), moved, nullptr);
  ctx.eraseOp(*this);
  return success();
}

/// A split concatenated dim stays split: one exchange reads every operand
/// at its offset (result index t of the dim reads t - start of the operand
/// that covers it), so each device receives only the pieces it now owns,
/// all in one call.
LogicalResult ConcatOp::localize(LocalFormContext &ctx) {
  int64_t dim = (int64_t)getDim();
  RankedTensorType globalOut = ctx.globalType(getResult());
  int64_t rank = globalOut.getRank(), at = 0;
  SmallVector<MovedInput> inputs;
  for (Value input : getInputs()) {
    RankedTensorType global = ctx.globalType(input);
    MovedInput moved{input, to_vector(global.getShape()),
                     SmallVector<int64_t>(rank, 0),
                     SmallVector<int64_t>(rank, 1)};
    moved.offsets[dim] = -at;
    at += global.getDimSize(dim);
    inputs.push_back(std::move(moved));
  }
  KeptSplit kept(ctx, inputs, getResult());
  if (!kept.involved)
    return success();
  ctx.builder.setInsertionPoint(*this);
  Value moved =
      kept.build(ctx, getLoc(), getInputs(),
                 cast<RankedTensorType>(getResult().getType()), 0.0);
  ctx.replaceValue(getResult(), moved, nullptr);
  ctx.eraseOp(*this);
  return success();
}

/// A contraction over a padded dim sees its combiner's identity (zero) there
/// in both operands (the padding of one may hold anything, even
/// infinities).
LogicalResult DotOp::localize(LocalFormContext &ctx) {
  Location loc = getLoc();
  ctx.builder.setInsertionPoint(*this);
  double identity = paddingIdentity(FactorCombiner::Sum);
  getLhsMutable().assign(
      ctx.maskPadding(loc, getLhs(), getLhs(), getLhsContract(), identity));
  getRhsMutable().assign(
      ctx.maskPadding(loc, getRhs(), getRhs(), getRhsContract(), identity));
  return success();
}

/// Positions along a split positional factor (the op's rule says which dim
/// of operand `operand` holds it) start at this device's first position.
static void shiftPositions(LocalFormContext &ctx, Operation *op,
                           unsigned operand, MutableOperandRange offset) {
  Value input = op->getOperand(operand);
  MeshOp mesh = ctx.meshOf(input);
  int64_t dim =
      cast<ShardingRuleOpInterface>(op).getShardingRule().positionalDim(
          operand);
  if (!mesh || dim < 0)
    return;
  SmallVector<int32_t> axes = ctx.splitAxes(input, dim);
  if (axes.empty())
    return;
  ctx.builder.setInsertionPoint(op);
  int64_t positions = llvm::divideCeil(ctx.globalType(input).getDimSize(dim),
                                       ctx.numShards(mesh, axes));
  offset.assign(ctx.shardStart(op->getLoc(), mesh, axes, positions,
                               ctx.builder.getIntegerType(64)));
}

LogicalResult RopeOp::localize(LocalFormContext &ctx) {
  ::shiftPositions(ctx, *this, /*operand=*/0, getOffsetMutable());
  return success();
}

LogicalResult AttentionOp::localize(LocalFormContext &ctx) {
  ::shiftPositions(ctx, *this, /*operand=*/0, getOffsetMutable());
  return success();
}

LogicalResult AttentionGradQOp::localize(LocalFormContext &ctx) {
  ::shiftPositions(ctx, *this, /*operand=*/0, getOffsetMutable());
  return success();
}

/// dK and dV sum over query rows and heads: padded rows (which may hold
/// anything) are zeroed in q, out, grad_out and the statistics, which makes
/// their contributions exactly zero.
LogicalResult AttentionGradKvOp::localize(LocalFormContext &ctx) {
  ::shiftPositions(ctx, *this, /*operand=*/0, getOffsetMutable());
  Location loc = getLoc();
  ctx.builder.setInsertionPoint(*this);
  for (OpOperand *operand : {&getQMutable(), &getOutMutable(),
                             &getGradOutMutable(), &getStatsMutable()}) {
    Value value = operand->get();
    operand->set(ctx.maskPadding(loc, value, value, {1, 2}, 0.0));
  }
  return success();
}

/// Vocabulary-parallel lookup: each shard looks up `ids - start`; ids of
/// other shards fall outside its rows and give zeros, so the sum over the
/// vocabulary axes (the partial result) is the global lookup.
LogicalResult EmbeddingOp::localize(LocalFormContext &ctx) {
  SmallVector<int32_t> axes = ctx.splitAxes(getTable(), 0);
  if (axes.empty())
    return success();
  MeshOp mesh = ctx.meshOf(getTable());
  OpBuilder &b = ctx.builder;
  auto idsType = cast<RankedTensorType>(getIds().getType());
  Location loc = getLoc();
  b.setInsertionPoint(*this);
  int64_t rows = llvm::divideCeil(ctx.globalType(getTable()).getDimSize(0),
                                  ctx.numShards(mesh, axes));
  Value start = ctx.shardStart(loc, mesh, axes, rows, idsType.getElementType());
  Value starts =
      BroadcastOp::create(b, loc, idsType, start, b.getDenseI64ArrayAttr({}));
  getIdsMutable().assign(SubOp::create(b, loc, idsType, getIds(), starts));
  return success();
}

/// `indices` ([entries..., k] coordinates along `dims` of `operand`)
/// shifted by this shard's first position along each split dim of `dims`,
/// so that coordinates in other shards fall outside the local piece and
/// select nothing; `indices` itself when no indexed dim is split.
static Value shiftIndices(LocalFormContext &ctx, Location loc, Value operand,
                          Value indices, ArrayRef<int64_t> dims) {
  MeshOp mesh = ctx.meshOf(operand);
  if (!mesh || dims.empty() || llvm::none_of(dims, [&](int64_t d) {
        return !ctx.splitAxes(operand, d).empty();
      }))
    return indices;
  OpBuilder &b = ctx.builder;
  auto indexType = cast<RankedTensorType>(indices.getType());
  Type element = indexType.getElementType();
  auto single = RankedTensorType::get({1}, element);
  SmallVector<Value> starts;
  for (int64_t d : dims) {
    SmallVector<int32_t> axes = ctx.splitAxes(operand, d);
    if (axes.empty()) {
      starts.push_back(splatConstant(b, loc, single, 0.0));
      continue;
    }
    int64_t rows = llvm::divideCeil(ctx.globalType(operand).getDimSize(d),
                                    ctx.numShards(mesh, axes));
    Value start = ctx.shardStart(loc, mesh, axes, rows, element);
    starts.push_back(ReshapeOp::create(b, loc, single, start));
  }
  Value offsets =
      starts.size() == 1
          ? starts[0]
          : ConcatOp::create(
                b, loc,
                RankedTensorType::get({(int64_t)starts.size()}, element),
                starts, 0)
                .getResult();
  Value spread =
      BroadcastOp::create(b, loc, indexType, offsets,
                          b.getDenseI64ArrayAttr({indexType.getRank() - 1}));
  return SubOp::create(b, loc, indexType, indices, spread);
}

/// A shard of rows adds the updates that land in it: indices shift by the
/// shard's first row along each split indexed dim (the rest fall outside and
/// add nothing). Split index entries make each shard add its own updates, a
/// partial sum, so the operand joins on the first member of their axes only;
/// padded entries add zeros.
LogicalResult ScatterAddOp::localize(LocalFormContext &ctx) {
  OpBuilder &b = ctx.builder;
  Location loc = getLoc();
  b.setInsertionPoint(*this);
  int64_t entries = getNumEntryDims();
  auto entryDims = llvm::to_vector(llvm::seq<int64_t>(0, entries));
  Value updates = getUpdates();
  getUpdatesMutable().assign(
      ctx.maskPadding(loc, updates, updates, entryDims, 0.0));

  Value operand = getOperand();
  Value indices = shiftIndices(ctx, loc, operand, getIndices(), getDims());
  if (indices != getIndices())
    getIndicesMutable().assign(indices);

  SmallVector<int32_t> axes = axesOver(ctx, updates, entryDims);
  if (axes.empty() || isZeroSplat(operand))
    return success();
  MeshOp mesh = ctx.meshOf(updates);
  auto type = cast<RankedTensorType>(operand.getType());
  auto i64 = RankedTensorType::get({}, b.getIntegerType(64));
  Value index =
      AxisIndexOp::create(b, loc, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                          ctx.axisNames(mesh, axes));
  Value first = CompareOp::create(
      b, loc, getI1TensorLike(i64),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::eq), index,
      splatConstant(b, loc, i64, 0.0));
  Value mask = BroadcastOp::create(b, loc, getI1TensorLike(type), first,
                                   b.getDenseI64ArrayAttr({}));
  getOperandMutable().assign(SelectOp::create(
      b, loc, type, mask, operand, splatConstant(b, loc, type, 0.0)));
  return success();
}

/// Cross-entropy with the vocabulary split never gathers logits: the max and
/// the sum of exponentials are all-reduced over the vocabulary axes, and the
/// target logit is a masked local lookup all-reduced the same way. Split
/// token dims make the local mean a partial sum, scaled by 1/token shards.
LogicalResult CrossEntropyOp::localize(LocalFormContext &ctx) {
  Value logitsIn = getLogits();
  RankedTensorType logitsGlobal = ctx.globalType(logitsIn);
  int64_t rank = logitsGlobal.getRank();
  MeshOp mesh = ctx.meshOf(logitsIn);
  auto leading = llvm::to_vector(llvm::seq<int64_t>(0, rank - 1));
  SmallVector<int32_t> tokenAxes =
      mesh ? axesOver(ctx, logitsIn, leading) : SmallVector<int32_t>();
  SmallVector<int32_t> vocabAxes =
      mesh ? ctx.splitAxes(logitsIn, rank - 1) : SmallVector<int32_t>();
  // Padded token dims: the per-token losses of padding are masked out, so
  // the loss is computed per token as with a split vocabulary.
  bool paddedTokens = !ctx.paddedDims(logitsIn, leading).empty();
  double tokenShare = meanShare(cast<RankedTensorType>(getLabels().getType()),
                                ctx.globalType(getLabels()), leading);
  OpBuilder &b = ctx.builder;
  Location loc = getLoc();
  b.setInsertionPointAfter(*this);
  Value loss = getResult();
  if (!vocabAxes.empty() || paddedTokens) {
    b.setInsertionPoint(*this);
    Value logits = ctx.maskPadding(loc, logitsIn, logitsIn, {rank - 1},
                                   -std::numeric_limits<double>::infinity());
    Value labels = getLabels();
    auto logitsType = cast<RankedTensorType>(logits.getType());
    auto labelsType = cast<RankedTensorType>(labels.getType());
    Type f = logitsType.getElementType(), i = labelsType.getElementType();
    auto tokens = RankedTensorType::get(labelsType.getShape(), f);
    int64_t vocab = logitsType.getDimSize(rank - 1);
    auto last = b.getDenseI64ArrayAttr({rank - 1});
    auto reduceLast = [&](ReduceKind kind, Value input) -> Value {
      return ReduceOp::create(b, loc, tokens, kind, input, last);
    };
    auto overVocab = [&](CollectiveKind kind, Value input) -> Value {
      if (vocabAxes.empty())
        return input;
      return AllReduceOp::create(b, loc, tokens, kind, input, mesh.getSymName(),
                                 ctx.axisNames(mesh, vocabAxes));
    };
    auto spread = [&](Value input) -> Value {
      return BroadcastOp::create(b, loc, logitsType, input,
                                 b.getDenseI64ArrayAttr(leading));
    };
    // logsumexp = log(sum exp(x - max)) + max, both over all shards.
    Value max =
        overVocab(CollectiveKind::max, reduceLast(ReduceKind::max, logits));
    Value shifted = SubOp::create(b, loc, logitsType, logits, spread(max));
    Value exps = ExpOp::create(b, loc, logitsType, shifted);
    Value sum =
        overVocab(CollectiveKind::sum, reduceLast(ReduceKind::sum, exps));
    Value lse =
        AddOp::create(b, loc, tokens, LogOp::create(b, loc, tokens, sum), max);
    // Target logit: this shard's column (label - start) where it owns it.
    auto vocabIds = RankedTensorType::get({vocab}, i);
    Value ids = iotaConstant(b, loc, vocab, i);
    if (!vocabAxes.empty()) {
      Value start = ctx.shardStart(loc, mesh, vocabAxes, vocab, i);
      ids = AddOp::create(b, loc, vocabIds, ids,
                          BroadcastOp::create(b, loc, vocabIds, start,
                                              b.getDenseI64ArrayAttr({})));
    }
    auto idsType = RankedTensorType::get(logitsType.getShape(), i);
    Value columns = BroadcastOp::create(b, loc, idsType, ids,
                                        b.getDenseI64ArrayAttr({rank - 1}));
    Value targets = BroadcastOp::create(b, loc, idsType, labels,
                                        b.getDenseI64ArrayAttr(leading));
    Value mask = CompareOp::create(
        b, loc, getI1TensorLike(idsType),
        CompareDirectionAttr::get(b.getContext(), CompareDirection::eq),
        columns, targets);
    Value picked = SelectOp::create(b, loc, logitsType, mask, logits,
                                    splatConstant(b, loc, logitsType, 0.0));
    Value target =
        overVocab(CollectiveKind::sum, reduceLast(ReduceKind::sum, picked));
    Value perToken = SubOp::create(b, loc, tokens, lse, target);
    ctx.recordLike(perToken, logitsIn, 1);
    perToken = ctx.maskPadding(loc, perToken, perToken, leading, 0.0);
    // An f32 loss of bf16/f16 logits averages the tokens in f32.
    auto lossType = cast<RankedTensorType>(getResult().getType());
    if (lossType.getElementType() != f)
      perToken =
          ConvertOp::create(b, loc,
                            RankedTensorType::get(labelsType.getShape(),
                                                  lossType.getElementType()),
                            perToken);
    loss = ReduceOp::create(b, loc, lossType, ReduceKind::mean, perToken,
                            b.getDenseI64ArrayAttr(leading));
    ctx.replaceValue(getResult(), loss, nullptr);
    ctx.eraseOp(*this);
    b.setInsertionPointAfter(loss.getDefiningOp());
  }
  if (!tokenAxes.empty()) {
    Value scaledLoss = scaled(b, loc, loss, tokenShare);
    ctx.replaceValue(loss, scaledLoss, scaledLoss.getDefiningOp());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// constant: a splat shrinks to the local type; any other constant stays
// whole and each device reads its piece.
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::localize(LocalFormContext &context) {
  Value result = getResult();
  if (!context.meshOf(result) && !context.isPartial(result))
    return success(); // replicated: the same everywhere
  if (context.isPartial(result))
    return emitError() << "a constant cannot be partial";
  auto local = cast<RankedTensorType>(result.getType());
  auto dense = dyn_cast<DenseElementsAttr>(getValue());
  if (dense && dense.isSplat()) {
    setValueAttr(dense.resizeSplat(local));
    return success();
  }
  return context.readLocalPiece(*this, result);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm, rms_norm: a split normalized dim keeps
// its split; each device reduces its piece and only row statistics travel.
//===----------------------------------------------------------------------===//

namespace {
/// Row statistics over dim `dim` of a value laid out as `like` whose dim is
/// split over `axes`: local reductions with padding masked, all-reduced over
/// the axes, spread back to the full shape. Statistics of narrow floats are
/// taken in f32 (`widen` converts in, `narrow` back), as the kernels do.
struct SplitRows {
  LocalFormContext &ctx;
  Location loc;
  Value like;
  int64_t dim;
  MeshOp mesh;
  SmallVector<int32_t> axes;
  RankedTensorType narrowType, type, rowType;
  SmallVector<int64_t> others;

  SplitRows(LocalFormContext &ctx, Operation *op, Value like, int64_t dim)
      : ctx(ctx), loc(op->getLoc()), like(like), dim(dim),
        mesh(ctx.meshOf(like)) {
    if (mesh)
      axes = ctx.splitAxes(like, dim);
    narrowType = cast<RankedTensorType>(like.getType());
    Type element = narrowType.getElementType();
    if (element.getIntOrFloatBitWidth() < 32)
      element = Float32Type::get(like.getContext());
    type = RankedTensorType::get(narrowType.getShape(), element);
    SmallVector<int64_t> rowShape;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != dim) {
        others.push_back(d);
        rowShape.push_back(type.getDimSize(d));
      }
    rowType = RankedTensorType::get(rowShape, element);
  }

  /// Whether the dim is split (otherwise the op stays as it is); when it
  /// is, positions the builder before `op` and gives its operand in the
  /// statistics' type.
  bool split() const { return !axes.empty(); }
  Value begin(Operation *op) {
    ctx.builder.setInsertionPoint(op);
    return widen(like);
  }
  /// The global size of the normalized dim.
  int64_t globalSize() { return ctx.globalType(like).getDimSize(dim); }

  Value widen(Value v) {
    OpBuilder &b = ctx.builder;
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType() == type.getElementType())
      return v;
    return ConvertOp::create(
        b, loc, RankedTensorType::get(t.getShape(), type.getElementType()), v);
  }
  Value narrow(Value v) {
    if (narrowType == type)
      return v;
    return ConvertOp::create(ctx.builder, loc, narrowType, v);
  }
  /// `kind` over the dim of `v` (of `type`), padding masked with the
  /// combiner's identity, combined over the axes, times `factor`, spread to
  /// `type`.
  Value row(ReduceKind kind, Value v, double factor = 1.0) {
    OpBuilder &b = ctx.builder;
    bool max = kind == ReduceKind::max;
    v = ctx.maskPadding(loc, v, like, {dim},
                        max ? -std::numeric_limits<double>::infinity() : 0.0);
    Value r =
        ReduceOp::create(b, loc, rowType, kind, v, b.getDenseI64ArrayAttr(dim));
    r = AllReduceOp::create(b, loc, rowType,
                            max ? CollectiveKind::max : CollectiveKind::sum, r,
                            mesh.getSymName(), ctx.axisNames(mesh, axes));
    if (factor != 1.0)
      r = scaled(b, loc, r, factor);
    return BroadcastOp::create(b, loc, type, r,
                               b.getDenseI64ArrayAttr(others));
  }
  /// The row mean of `v`: its global sum over the dim divided by its size.
  Value mean(Value v) {
    return row(ReduceKind::sum, v, 1.0 / (double)globalSize());
  }
  /// A 1-D scale operand (split like the dim) spread to `type`.
  Value spreadScale(Value scale) {
    return BroadcastOp::create(ctx.builder, loc, type, widen(scale),
                               ctx.builder.getDenseI64ArrayAttr({dim}));
  }
  /// Makes `value` (of `type`) stand for `op`'s result and erases `op`.
  void finish(Operation *op, Value value) {
    value = narrow(value);
    ctx.replaceValue(op->getResult(0), value, nullptr);
    ctx.eraseOp(op);
  }
};

/// softmax (`log` false) or log_softmax over a split dim: the row max and
/// the row sum of exp(x - max) over all shards.
LogicalResult localizeSoftmax(LocalFormContext &ctx, Operation *op,
                              int64_t dim, bool log) {
  SplitRows rows(ctx, op, op->getOperand(0), dim);
  if (!rows.split())
    return success();
  OpBuilder &b = ctx.builder;
  Location loc = op->getLoc();
  RankedTensorType t = rows.type;
  Value x = rows.begin(op);
  Value shifted = SubOp::create(b, loc, t, x, rows.row(ReduceKind::max, x));
  Value exps = ExpOp::create(b, loc, t, shifted);
  Value sum = rows.row(ReduceKind::sum, exps);
  Value result = log ? SubOp::create(b, loc, t, shifted,
                                     LogOp::create(b, loc, t, sum))
                           .getResult()
                     : DivOp::create(b, loc, t, exps, sum).getResult();
  rows.finish(op, result);
  return success();
}

/// layer_norm (`beta` set) or rms_norm over a split last dim:
/// the mean, then the mean of squared deviations (layer_norm) or the mean
/// square (rms_norm), each one all-reduce of row sums.
LogicalResult localizeNorm(LocalFormContext &ctx, Operation *op, Value gamma,
                           Value beta, double epsilon) {
  Value input = op->getOperand(0);
  int64_t last = cast<RankedTensorType>(input.getType()).getRank() - 1;
  SplitRows rows(ctx, op, input, last);
  if (!rows.split())
    return success();
  OpBuilder &b = ctx.builder;
  Location loc = op->getLoc();
  RankedTensorType t = rows.type;
  Value x = rows.begin(op);
  Value centered = beta ? SubOp::create(b, loc, t, x, rows.mean(x)).getResult()
                        : x;
  Value var = rows.mean(MulOp::create(b, loc, t, centered, centered));
  Value r = RsqrtOp::create(
      b, loc, t,
      AddOp::create(b, loc, t, var, splatConstant(b, loc, t, epsilon)));
  Value y = MulOp::create(b, loc, t, MulOp::create(b, loc, t, centered, r),
                          rows.spreadScale(gamma));
  if (beta)
    y = AddOp::create(b, loc, t, y, rows.spreadScale(beta));
  rows.finish(op, y);
  return success();
}
} // namespace

LogicalResult SoftmaxOp::localize(LocalFormContext &ctx) {
  return localizeSoftmax(ctx, *this, getDim(), /*log=*/false);
}

LogicalResult LogSoftmaxOp::localize(LocalFormContext &ctx) {
  return localizeSoftmax(ctx, *this, getDim(), /*log=*/true);
}

LogicalResult LayerNormOp::localize(LocalFormContext &ctx) {
  return localizeNorm(ctx, *this, getGamma(), getBeta(),
                      getEpsilon().convertToDouble());
}

LogicalResult RmsNormOp::localize(LocalFormContext &ctx) {
  return localizeNorm(ctx, *this, getGamma(), Value(),
                      getEpsilon().convertToDouble());
}

//===----------------------------------------------------------------------===//
// argmax, argmin over a split dim: the local extreme and its global index,
// then one all-reduce of the extremes and one of the indices that hold it.
//===----------------------------------------------------------------------===//

static LogicalResult localizeArgReduce(LocalFormContext &ctx, Operation *op,
                                       int64_t dim, bool max) {
  Value input = op->getOperand(0);
  MeshOp mesh = ctx.meshOf(input);
  SmallVector<int32_t> axes =
      mesh ? ctx.splitAxes(input, dim) : SmallVector<int32_t>();
  if (axes.empty())
    return success();
  OpBuilder &b = ctx.builder;
  Location loc = op->getLoc();
  auto inType = cast<RankedTensorType>(input.getType());
  Value result = op->getResult(0);
  auto outType = cast<RankedTensorType>(result.getType());
  Type index = outType.getElementType();
  b.setInsertionPoint(op);
  // Padding never wins: -inf for a max search, +inf for a min (an integer
  // type's extremes), and on a tie a real element has the smaller index.
  double never = max ? -std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::infinity();
  Value masked = ctx.maskPadding(loc, input, input, {dim}, never);
  op->setOperand(0, masked);
  auto rowType = RankedTensorType::get(outType.getShape(),
                                       inType.getElementType());
  Value extreme = ReduceOp::create(b, loc, rowType,
                                   max ? ReduceKind::max : ReduceKind::min,
                                   masked, b.getDenseI64ArrayAttr(dim));
  auto axisNames = ctx.axisNames(mesh, axes);
  Value best = AllReduceOp::create(
      b, loc, rowType, max ? CollectiveKind::max : CollectiveKind::min,
      extreme, mesh.getSymName(), axisNames);
  b.setInsertionPointAfter(op);
  // This shard's index is global once offset by its first position.
  Value start = ctx.shardStart(loc, mesh, axes, inType.getDimSize(dim), index);
  Value global = AddOp::create(
      b, loc, outType, result,
      BroadcastOp::create(b, loc, outType, start, b.getDenseI64ArrayAttr({})));
  Value holds = CompareOp::create(
      b, loc, getI1TensorLike(rowType),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::eq), extreme,
      best);
  // Candidates: a holder of the extreme offers its index, the others the
  // padded size (past every index); a shard whose extreme is NaN (the
  // kernel's first NaN wins, as reduce max propagates it) offers its index
  // - size, below every holder's. The smallest candidate, size added back
  // when it is negative, is the first NaN or else the first extreme. Every
  // offer lies in [-size, padded size]: no overflow, and exact in a
  // program's numbers.
  int64_t size = ctx.globalType(input).getDimSize(dim);
  int64_t padded = inType.getDimSize(dim) * ctx.numShards(mesh, axes);
  auto direction = [&](CompareDirection d) {
    return CompareDirectionAttr::get(b.getContext(), d);
  };
  auto splat = [&](double v) { return splatConstant(b, loc, outType, v); };
  Value candidate =
      SelectOp::create(b, loc, outType, holds, global, splat(double(padded)));
  if (isa<FloatType>(inType.getElementType())) {
    Value isNaN =
        CompareOp::create(b, loc, getI1TensorLike(rowType),
                          direction(CompareDirection::ne), extreme, extreme);
    Value early = SubOp::create(b, loc, outType, global, splat(double(size)));
    candidate = SelectOp::create(b, loc, outType, isNaN, early, candidate);
  }
  Value smallest =
      AllReduceOp::create(b, loc, outType, CollectiveKind::min, candidate,
                          mesh.getSymName(), axisNames);
  Value early = CompareOp::create(b, loc, getI1TensorLike(outType),
                                  direction(CompareDirection::lt), smallest,
                                  splat(0.0));
  Value picked = SelectOp::create(
      b, loc, outType, early,
      AddOp::create(b, loc, outType, smallest, splat(double(size))), smallest);
  ctx.replaceValue(result, picked, global.getDefiningOp());
  return success();
}

LogicalResult ArgMaxOp::localize(LocalFormContext &ctx) {
  return localizeArgReduce(ctx, *this, getDim(), /*max=*/true);
}

LogicalResult ArgMinOp::localize(LocalFormContext &ctx) {
  return localizeArgReduce(ctx, *this, getDim(), /*max=*/false);
}

/// A shard of rows reads the slices that lie in it: indices shift by the
/// shard's first row along each split indexed dim (the rest fall outside
/// and read zeros, so the result is a partial sum over those axes), and the
/// padding rows read as zeros, as coordinates past the operand do.
LogicalResult GatherOp::localize(LocalFormContext &ctx) {
  OpBuilder &b = ctx.builder;
  Location loc = getLoc();
  b.setInsertionPoint(*this);
  Value operand = getOperand();
  Value indices = shiftIndices(ctx, loc, operand, getIndices(), getDims());
  if (indices != getIndices())
    getIndicesMutable().assign(indices);
  Value masked = ctx.maskPadding(loc, operand, operand, getDims(), 0.0);
  if (masked != operand)
    getOperandMutable().assign(masked);
  return success();
}
