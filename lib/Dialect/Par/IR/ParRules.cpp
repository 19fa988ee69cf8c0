//===- ParRules.cpp - the sharding rule of every compute op ---------------===//
//
// The one place that says how each op may be split. Keep every rule a plain
// factor table: passes must never need to know more about an op than this.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"

#include <numeric>

using namespace mlir;
using namespace mlir::par;

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Each result dimension its own pass-through factor (ops without operands).
static ShardingRule buildResultOnlyRule(Operation *op) {
  ShardingRule rule(op);
  for (auto [d, size] : llvm::enumerate(shapeOf(op->getResult(0))))
    rule.addSharedFactor(size, {}, {{0, d}});
  return rule;
}

/// Every dimension of operand 0 shared with the same dimension of result 0;
/// dimensions listed in `special` get `kind` instead of pass-through.
static ShardingRule
buildSameShapeRule(Operation *op, ArrayRef<int64_t> special = {},
                   FactorKind kind = FactorKind::PassThrough) {
  ShardingRule rule(op);
  for (auto [d, size] : llvm::enumerate(shapeOf(op->getOperand(0))))
    rule.addSharedFactor(size, {{0, d}}, {{0, d}},
                         llvm::is_contained(special, (int64_t)d)
                             ? kind
                             : FactorKind::PassThrough);
  return rule;
}

#define PAR_ELEMENTWISE_RULE(OP)                                               \
  ShardingRule OP::getShardingRule() {                                         \
    return buildElementwiseRule(getOperation());                               \
  }
PAR_ELEMENTWISE_RULE(AdamWOp)
PAR_ELEMENTWISE_RULE(SgdOp)
#undef PAR_ELEMENTWISE_RULE

ShardingRule ConstantOp::getShardingRule() {
  return buildResultOnlyRule(getOperation());
}

ShardingRule ShardingConstraintOp::getShardingRule() {
  return buildSameShapeRule(getOperation());
}

ShardingRule BroadcastOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  ArrayRef<int64_t> dims = getDims();
  for (auto [r, size] : llvm::enumerate(out)) {
    int64_t factor = rule.addFactor(size);
    rule.mapResult(0, r, factor);
    // Expanded size-1 operand dims hold no factor.
    const int64_t *it = llvm::find(dims, (int64_t)r);
    if (it != dims.end() && in[it - dims.begin()] == size)
      rule.mapOperand(0, it - dims.begin(), factor);
  }
  return rule;
}

ShardingRule ReduceOp::getShardingRule() {
  ShardingRule rule(getOperation());
  FactorCombiner combiner = FactorCombiner::Sum;
  if (getKind() == ReduceKind::max)
    combiner = FactorCombiner::Max;
  else if (getKind() == ReduceKind::min)
    combiner = FactorCombiner::Min;
  int64_t resultDim = 0;
  for (auto [d, size] : llvm::enumerate(shapeOf(getInput()))) {
    if (llvm::is_contained(getDims(), (int64_t)d))
      rule.addSharedFactor(size, {{0, d}}, {}, FactorKind::Reduction, combiner);
    else
      rule.addSharedFactor(size, {{0, d}}, {{0, resultDim++}});
  }
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> in = shapeOf(getInput());
  for (auto [r, d] : llvm::enumerate(getPerm()))
    rule.addSharedFactor(in[d], {{0, d}}, {{0, r}});
  return rule;
}

/// Decomposes both shapes into common factors, major to minor: at each step
/// the gcd of what is left of the current operand and result dimensions is
/// one shared factor (the flat index fixes it on both sides). When the gcd
/// is 1 the dimensions up to the next common prefix product cannot be split
/// consistently and get need-replication factors of their own.
ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  size_t i = 0, j = 0;
  int64_t a = 1, b = 1; // what is left of in[i] and out[j]
  auto loadIn = [&]() {
    while (i < in.size() && in[i] == 1)
      ++i;
    a = i < in.size() ? in[i] : 1;
  };
  auto loadOut = [&]() {
    while (j < out.size() && out[j] == 1)
      ++j;
    b = j < out.size() ? out[j] : 1;
  };
  loadIn();
  loadOut();
  while (i < in.size() && j < out.size()) {
    int64_t g = std::gcd(a, b);
    if (g > 1) {
      rule.addSharedFactor(g, {{0, i}}, {{0, j}});
      a /= g;
      b /= g;
      if (a == 1) {
        ++i;
        loadIn();
      }
      if (b == 1) {
        ++j;
        loadOut();
      }
      continue;
    }
    // Coprime remainders: consume dims until both prefixes cover the same
    // number of elements.
    int64_t coveredIn = a, coveredOut = b;
    rule.addSharedFactor(a, {{0, i}}, {}, FactorKind::NeedReplication);
    rule.addSharedFactor(b, {}, {{0, j}}, FactorKind::NeedReplication);
    while (coveredIn != coveredOut) {
      if (coveredIn < coveredOut) {
        ++i;
        if (in[i] != 1)
          rule.addSharedFactor(in[i], {{0, i}}, {},
                               FactorKind::NeedReplication);
        coveredIn *= in[i];
      } else {
        ++j;
        if (out[j] != 1)
          rule.addSharedFactor(out[j], {}, {{0, j}},
                               FactorKind::NeedReplication);
        coveredOut *= out[j];
      }
    }
    ++i;
    ++j;
    loadIn();
    loadOut();
  }
  return rule;
}

ShardingRule SliceOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  SmallVector<int64_t> strides = getStridesOrOnes();
  for (size_t d = 0; d < in.size(); ++d) {
    bool whole = getStarts()[d] == 0 && strides[d] == 1 && out[d] == in[d];
    if (whole) {
      rule.addSharedFactor(in[d], {{0, d}}, {{0, d}});
      continue;
    }
    // The operand's and the result's dim are one index space (the result
    // reads start + t * stride): split alike, the local form moves what
    // crosses shard boundaries.
    int64_t from =
        rule.addSharedFactor(in[d], {{0, d}}, {}, FactorKind::Permutation);
    if (out[d] > 0)
      rule.linkFactors(from, rule.addSharedFactor(out[d], {}, {{0, d}},
                                                  FactorKind::Permutation));
  }
  return rule;
}

ShardingRule PadOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == out[d]) {
      rule.addSharedFactor(in[d], {{0, d}}, {{0, d}});
      continue;
    }
    // A padded dim is kept split like a slice: each shard spreads its
    // elements apart (interior padding) and the whole is shifted by `low`.
    int64_t from = in[d] > 0 ? rule.addSharedFactor(in[d], {{0, d}}, {},
                                                    FactorKind::Permutation)
                             : -1;
    int64_t to =
        rule.addSharedFactor(out[d], {}, {{0, d}}, FactorKind::Permutation);
    if (from >= 0)
      rule.linkFactors(from, to);
  }
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t dim = (int64_t)getDim();
  for (size_t d = 0; d < out.size(); ++d) {
    if ((int64_t)d == dim)
      continue;
    int64_t factor = rule.addFactor(out[d]);
    rule.mapResult(0, d, factor);
    for (unsigned o = 0; o < getNumOperands(); ++o)
      rule.mapOperand(o, d, factor);
  }
  // Every operand's piece of the concatenated dim is a view on the result's:
  // one link group, split alike.
  int64_t whole =
      rule.addSharedFactor(out[dim], {}, {{0, dim}}, FactorKind::Permutation);
  for (auto [o, input] : llvm::enumerate(getInputs()))
    rule.linkFactors(whole, rule.addSharedFactor(shapeOf(input)[dim],
                                                 {{o, dim}}, {},
                                                 FactorKind::Permutation));
  return rule;
}

ShardingRule DotOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  ArrayRef<int64_t> lb = getLhsBatchDims(), rb = getRhsBatchDims();
  ArrayRef<int64_t> lc = getLhsContract(), rc = getRhsContract();
  int64_t r = 0;
  for (auto [l, rr] : llvm::zip(lb, rb))
    rule.addSharedFactor(lhs[l], {{0, l}, {1, rr}}, {{0, r++}});
  for (size_t d = 0; d < lhs.size(); ++d)
    if (!llvm::is_contained(lb, (int64_t)d) &&
        !llvm::is_contained(lc, (int64_t)d))
      rule.addSharedFactor(lhs[d], {{0, d}}, {{0, r++}});
  for (size_t d = 0; d < rhs.size(); ++d)
    if (!llvm::is_contained(rb, (int64_t)d) &&
        !llvm::is_contained(rc, (int64_t)d))
      rule.addSharedFactor(rhs[d], {{1, d}}, {{0, r++}});
  for (auto [l, rr] : llvm::zip(lc, rc))
    rule.addSharedFactor(lhs[l], {{0, l}, {1, rr}}, {}, FactorKind::Reduction,
                         FactorCombiner::Sum);
  return rule;
}

/// Softmax-like ops: every dim pass-through, the normalized one reduced
/// internally (a split makes the local form all-reduce row statistics).
static ShardingRule buildSoftmaxRule(Operation *op, int64_t dim) {
  ShardingRule rule(op);
  for (auto [d, size] : llvm::enumerate(shapeOf(op->getOperand(0))))
    rule.addSharedFactor(size, {{0, d}}, {{0, d}}, FactorKind::PassThrough,
                         (int64_t)d == dim ? FactorCombiner::Internal
                                           : FactorCombiner::None);
  return rule;
}

ShardingRule SoftmaxOp::getShardingRule() {
  return buildSoftmaxRule(getOperation(), getDim());
}

ShardingRule LogSoftmaxOp::getShardingRule() {
  return buildSoftmaxRule(getOperation(), getDim());
}

/// Kept dims pass-through; `dim` a reduction the op completes itself.
static ShardingRule buildArgReduceRule(Operation *op, int64_t dim) {
  ShardingRule rule(op);
  int64_t r = 0;
  for (auto [d, size] : llvm::enumerate(shapeOf(op->getOperand(0)))) {
    if ((int64_t)d == dim)
      rule.addSharedFactor(size, {{0, d}}, {}, FactorKind::Reduction,
                           FactorCombiner::Internal);
    else
      rule.addSharedFactor(size, {{0, d}}, {{0, r++}});
  }
  return rule;
}

ShardingRule ArgMaxOp::getShardingRule() {
  return buildArgReduceRule(getOperation(), getDim());
}

ShardingRule ArgMinOp::getShardingRule() {
  return buildArgReduceRule(getOperation(), getDim());
}

/// Leading dims pass-through; the last (normalized) dim is pass-through,
/// reduced internally, and shared with the 1-D scale operands 1..numScales
/// (a split normalized dim splits them alike).
static ShardingRule buildNormRule(Operation *op, unsigned numScales) {
  ShardingRule rule(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  int64_t last = in.size() - 1;
  for (int64_t d = 0; d < last; ++d)
    rule.addSharedFactor(in[d], {{0, d}}, {{0, d}});
  SmallVector<std::pair<unsigned, int64_t>> operandDims = {{0, last}};
  for (unsigned s = 1; s <= numScales; ++s)
    operandDims.push_back({s, 0});
  rule.addSharedFactor(in[last], operandDims, {{0, last}},
                       FactorKind::PassThrough, FactorCombiner::Internal);
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() {
  return buildNormRule(getOperation(), 2);
}

ShardingRule RmsNormOp::getShardingRule() {
  return buildNormRule(getOperation(), 1);
}

namespace {
/// Where `par.attention` and its gradient ops keep their tensors: operand
/// and result slots of each layout.
struct AttentionSlots {
  /// [B, S, H, D]: q (D its head dim).
  SmallVector<unsigned, 1> query;
  /// [B, S, H, Dv]: the result and its gradient.
  SmallVector<unsigned, 2> rows;
  /// [B, S, H]: the row statistics.
  std::optional<unsigned> stats;
  SmallVector<unsigned, 1> queryResults, rowResults;
  std::optional<unsigned> statsResult;
  /// [B, T, Hkv, D] and [B, T, Hkv, Dv] results: dK, dV.
  std::optional<unsigned> keyResult, valueResult;
};
} // namespace

/// The rule of attention-shaped ops: q [B, S, H, D], k [B, T, Hkv, D] and
/// v [B, T, Hkv, Dv] are operands 0, 1 and 2; `slots` places the rest. The
/// query heads split as [kv head, group member], kv heads major. With
/// `keyGradients`, the results are dK and dV: the query positions and the
/// group members are summed over (reductions).
static ShardingRule buildAttentionRule(Operation *op, Value q, Value k,
                                       bool causal, const AttentionSlots &at,
                                       bool keyGradients) {
  ShardingRule rule(op);
  ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k);
  using Slots = SmallVector<std::pair<unsigned, int64_t>>;
  // Slots of dim `d` of the [B, S, H, ...] operands and results.
  auto queryDims = [&](int64_t d, bool withQuery, bool withRows, bool withStats,
                       Slots &ins, Slots &outs) {
    if (withQuery)
      for (unsigned i : at.query)
        ins.push_back({i, d});
    if (withRows)
      for (unsigned i : at.rows)
        ins.push_back({i, d});
    if (withStats && at.stats)
      ins.push_back({*at.stats, d});
    if (withQuery)
      for (unsigned i : at.queryResults)
        outs.push_back({i, d});
    if (withRows)
      for (unsigned i : at.rowResults)
        outs.push_back({i, d});
    if (withStats && at.statsResult)
      outs.push_back({*at.statsResult, d});
  };
  auto keyDims = [&](int64_t d, bool withKey, bool withValue, Slots &ins,
                     Slots &outs) {
    if (withKey)
      ins.push_back({1, d});
    if (withValue)
      ins.push_back({2, d});
    if (withKey && at.keyResult)
      outs.push_back({*at.keyResult, d});
    if (withValue && at.valueResult)
      outs.push_back({*at.valueResult, d});
  };
  FactorKind summed =
      keyGradients ? FactorKind::Reduction : FactorKind::PassThrough;
  FactorCombiner sum =
      keyGradients ? FactorCombiner::Sum : FactorCombiner::None;
  {
    Slots ins, outs;
    queryDims(0, true, true, true, ins, outs);
    keyDims(0, true, true, ins, outs);
    rule.addSharedFactor(qs[0], ins, outs);
  }
  {
    // Query positions: a causal mask compares them with key positions.
    Slots ins, outs;
    queryDims(1, true, true, true, ins, outs);
    int64_t positions = rule.addSharedFactor(qs[1], ins, outs, summed, sum);
    if (causal)
      rule.markPositional(positions);
  }
  {
    Slots ins, outs;
    keyDims(1, true, true, ins, outs);
    rule.addSharedFactor(ks[1], ins, outs, FactorKind::NeedReplication);
  }
  int64_t kvHeads = ks[2], group = qs[2] / ks[2];
  if (kvHeads > 1 || group == 1) {
    Slots ins, outs;
    queryDims(2, true, true, true, ins, outs);
    keyDims(2, true, true, ins, outs);
    rule.addSharedFactor(kvHeads, ins, outs);
  }
  if (group > 1) {
    Slots ins, outs;
    queryDims(2, true, true, true, ins, outs);
    rule.addSharedFactor(group, ins, outs, summed, sum);
  }
  {
    Slots ins, outs;
    queryDims(3, true, false, false, ins, outs);
    keyDims(3, true, false, ins, outs);
    rule.addSharedFactor(qs[3], ins, outs, FactorKind::NeedReplication);
  }
  {
    // The value columns: the ops keep q, k, v and the result of one type,
    // so they cannot split apart from q's head dim.
    Slots ins, outs;
    queryDims(3, false, true, false, ins, outs);
    keyDims(3, false, true, ins, outs);
    rule.addSharedFactor(ks[3], ins, outs, FactorKind::NeedReplication);
  }
  return rule;
}

ShardingRule AttentionOp::getShardingRule() {
  AttentionSlots at;
  at.query = {0};
  at.rowResults = {0};
  if (getStats())
    at.statsResult = 1;
  return buildAttentionRule(getOperation(), getQ(), getK(), getCausal(), at,
                            /*keyGradients=*/false);
}

/// Operands of the gradient ops: 0 q, 1 k, 2 v, 3 out, 4 grad_out, 5 stats.
static AttentionSlots attentionGradSlots() {
  AttentionSlots at;
  at.query = {0};
  at.rows = {3, 4};
  at.stats = 5;
  return at;
}

ShardingRule AttentionGradQOp::getShardingRule() {
  AttentionSlots at = attentionGradSlots();
  at.queryResults = {0};
  return buildAttentionRule(getOperation(), getQ(), getK(), getCausal(), at,
                            /*keyGradients=*/false);
}

ShardingRule AttentionGradKvOp::getShardingRule() {
  AttentionSlots at = attentionGradSlots();
  at.keyResult = 0;
  at.valueResult = 1;
  return buildAttentionRule(getOperation(), getQ(), getK(), getCausal(), at,
                            /*keyGradients=*/true);
}

ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> table = shapeOf(getTable()), ids = shapeOf(getIds());
  for (auto [d, size] : llvm::enumerate(ids))
    rule.addSharedFactor(size, {{1, d}}, {{0, d}});
  rule.addSharedFactor(table[1], {{0, 1}}, {{0, ids.size()}});
  rule.addSharedFactor(table[0], {{0, 0}}, {}, FactorKind::Reduction,
                       FactorCombiner::Sum);
  return rule;
}

ShardingRule ScatterAddOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> operand = shapeOf(getOperand()),
                    indices = shapeOf(getIndices());
  int64_t entries = getNumEntryDims();
  // Index entries: each shard adds its own, so the result is a partial sum.
  for (int64_t d = 0; d < entries; ++d)
    rule.addSharedFactor(indices[d], {{1, d}, {2, d}}, {},
                         FactorKind::Reduction, FactorCombiner::Sum);
  if (indices.back() > 1)
    rule.addSharedFactor(indices.back(), {{1, entries}}, {},
                         FactorKind::NeedReplication);
  // Indexed dims: a shard of rows takes the updates that land in it.
  for (int64_t d : getDims())
    rule.addSharedFactor(operand[d], {{0, d}}, {{0, d}});
  for (auto [i, d] : llvm::enumerate(getSliceDims()))
    rule.addSharedFactor(operand[d], {{0, d}, {2, entries + (int64_t)i}},
                         {{0, d}});
  return rule;
}

ShardingRule GatherOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> operand = shapeOf(getOperand()),
                    indices = shapeOf(getIndices());
  int64_t entries = getNumEntryDims();
  // Index entries: the result's leading dims.
  for (int64_t d = 0; d < entries; ++d)
    rule.addSharedFactor(indices[d], {{1, d}}, {{0, d}});
  if (indices.back() > 1)
    rule.addSharedFactor(indices.back(), {{1, entries}}, {},
                         FactorKind::NeedReplication);
  // Indexed dims: a shard of rows reads the slices in it, others read zeros.
  for (int64_t d : getDims())
    rule.addSharedFactor(operand[d], {{0, d}}, {}, FactorKind::Reduction,
                         FactorCombiner::Sum);
  for (auto [i, d] : llvm::enumerate(getSliceDims()))
    rule.addSharedFactor(operand[d], {{0, d}}, {{0, entries + (int64_t)i}});
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  int64_t vocabDim = logits.size() - 1;
  for (int64_t d = 0; d < vocabDim; ++d)
    rule.addSharedFactor(logits[d], {{0, d}, {1, d}}, {}, FactorKind::Reduction,
                         FactorCombiner::Sum);
  rule.addSharedFactor(logits[vocabDim], {{0, vocabDim}}, {},
                       FactorKind::Reduction, FactorCombiner::Internal);
  return rule;
}

ShardingRule RopeOp::getShardingRule() {
  ShardingRule rule =
      buildSameShapeRule(getOperation(), {3}, FactorKind::NeedReplication);
  // The rotation angle is the sequence position (dim 1).
  rule.markPositional(rule.getOperandMappings()[0][1].front());
  return rule;
}
