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

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule(getOperation());
  ArrayRef<int64_t> q = shapeOf(getQ()), k = shapeOf(getK());
  // Operands: 0 = q [B, S, H, D], 1 = k, 2 = v [B, T, Hkv, D].
  rule.addSharedFactor(q[0], {{0, 0}, {1, 0}, {2, 0}}, {{0, 0}});
  // Query positions: a causal mask compares them with key positions.
  int64_t positions = rule.addSharedFactor(q[1], {{0, 1}}, {{0, 1}});
  if (getCausal())
    rule.markPositional(positions);
  rule.addSharedFactor(k[1], {{1, 1}, {2, 1}}, {}, FactorKind::NeedReplication);
  // Query heads split as [kv head, group member]: kv heads major.
  int64_t kvHeads = k[2], group = q[2] / k[2];
  if (kvHeads > 1 || group == 1)
    rule.addSharedFactor(kvHeads, {{0, 2}, {1, 2}, {2, 2}}, {{0, 2}});
  if (group > 1)
    rule.addSharedFactor(group, {{0, 2}}, {{0, 2}});
  rule.addSharedFactor(q[3], {{0, 3}, {1, 3}}, {}, FactorKind::NeedReplication);
  // The value columns: the op keeps q, k, v and the result of one type, so
  // they cannot split apart from q's head dim.
  rule.addSharedFactor(k[3], {{2, 3}}, {{0, 3}}, FactorKind::NeedReplication);
  return rule;
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
