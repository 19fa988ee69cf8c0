//===- ShardingRule.cpp - factor mappings ---------------------------------===//
#include "par/Dialect/Par/IR/ShardingRule.h"

#include <limits>

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;

static int64_t rankOf(Type type) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  return shaped ? shaped.getRank() : 0;
}

ShardingRule::ShardingRule(Operation *op) {
  for (Type type : op->getOperandTypes())
    operands.emplace_back(rankOf(type));
  for (Type type : op->getResultTypes())
    results.emplace_back(rankOf(type));
}

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind,
                                FactorCombiner combiner) {
  factors.push_back(Factor{size, kind, combiner});
  return factors.size() - 1;
}

void ShardingRule::mapOperand(unsigned operand, int64_t dim, int64_t factor) {
  operands[operand][dim].push_back(factor);
}

void ShardingRule::mapResult(unsigned result, int64_t dim, int64_t factor) {
  results[result][dim].push_back(factor);
}

int64_t ShardingRule::addSharedFactor(
    int64_t size, ArrayRef<std::pair<unsigned, int64_t>> operandDims,
    ArrayRef<std::pair<unsigned, int64_t>> resultDims, FactorKind kind,
    FactorCombiner combiner) {
  int64_t factor = addFactor(size, kind, combiner);
  for (auto [operand, dim] : operandDims)
    mapOperand(operand, dim, factor);
  for (auto [result, dim] : resultDims)
    mapResult(result, dim, factor);
  return factor;
}

void ShardingRule::linkFactors(int64_t factor, int64_t other) {
  int64_t first = factors[factor].link >= 0 ? factors[factor].link : factor;
  factors[first].link = first;
  factors[other].link = first;
}

SmallVector<int64_t, 4> ShardingRule::linkGroup(int64_t factor) const {
  if (factors[factor].link < 0)
    return {factor};
  SmallVector<int64_t, 4> group;
  for (auto [f, other] : llvm::enumerate(factors))
    if (other.link == factors[factor].link)
      group.push_back(f);
  return group;
}

StringRef mlir::par::stringifyFactorKind(FactorKind kind) {
  switch (kind) {
  case FactorKind::PassThrough:
    return "pass-through";
  case FactorKind::Reduction:
    return "reduction";
  case FactorKind::NeedReplication:
    return "need-replication";
  case FactorKind::Permutation:
    return "permutation";
  }
  return "unknown";
}

StringRef mlir::par::stringifyFactorCombiner(FactorCombiner combiner) {
  switch (combiner) {
  case FactorCombiner::None:
    return "none";
  case FactorCombiner::Sum:
    return "sum";
  case FactorCombiner::Max:
    return "max";
  case FactorCombiner::Min:
    return "min";
  case FactorCombiner::Internal:
    return "internal";
  }
  return "unknown";
}

std::string ShardingRule::factorName(int64_t id, int64_t numFactors) {
  static constexpr llvm::StringLiteral letters = "ijklmnopqrstuvwxyzabcdefgh";
  if (numFactors <= (int64_t)letters.size())
    return std::string(1, letters[id]);
  return "f" + std::to_string(id);
}

void ShardingRule::print(llvm::raw_ostream &os) const {
  int64_t n = factors.size();
  bool shortNames = n <= 26;
  auto printTensor = [&](const TensorFactors &tensor) {
    os << "[";
    llvm::interleaveComma(tensor, os, [&](const DimFactors &dim) {
      if (dim.empty()) {
        os << "1";
        return;
      }
      llvm::interleave(
          dim, os, [&](int64_t f) { os << factorName(f, n); },
          shortNames ? "" : "*");
    });
    os << "]";
  };
  auto printList = [&](ArrayRef<TensorFactors> tensors) {
    os << "(";
    llvm::interleaveComma(tensors, os, printTensor);
    os << ")";
  };
  printList(operands);
  os << " -> ";
  printList(results);
  os << " {";
  llvm::interleaveComma(llvm::seq<int64_t>(0, n), os, [&](int64_t f) {
    const Factor &factor = factors[f];
    os << factorName(f, n) << "=" << factor.size;
    if (factor.positional)
      os << " positional";
    if (factor.kind == FactorKind::PassThrough) {
      if (factor.combiner == FactorCombiner::Internal)
        os << " internal";
      return;
    }
    os << " " << stringifyFactorKind(factor.kind);
    // A linked factor names the first of its group: "j=14 permutation~i".
    if (factor.link >= 0 && factor.link != f)
      os << "~" << factorName(factor.link, n);
    if (factor.combiner != FactorCombiner::None)
      os << "(" << stringifyFactorCombiner(factor.combiner) << ")";
  });
  os << "}";
}

std::string ShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os);
  return text;
}

std::string ShardingRule::check(Operation *op) const {
  std::string message;
  llvm::raw_string_ostream os(message);
  int64_t n = factors.size();
  SmallVector<bool> used(n, false), inResult(n, false);
  auto checkTensors = [&](ArrayRef<TensorFactors> tensors, TypeRange types,
                          StringRef side) -> bool {
    if (tensors.size() != types.size()) {
      os << "maps " << tensors.size() << " " << side << "(s) but the op has "
         << types.size();
      return false;
    }
    for (auto [t, tensor] : llvm::enumerate(tensors)) {
      auto type = dyn_cast<RankedTensorType>(types[t]);
      int64_t rank = type ? type.getRank() : 0;
      if ((int64_t)tensor.size() != rank) {
        os << side << " #" << t << " maps " << tensor.size()
           << " dims but has rank " << rank;
        return false;
      }
      for (auto [d, dim] : llvm::enumerate(tensor)) {
        int64_t product = 1;
        for (int64_t f : dim) {
          if (f < 0 || f >= n) {
            os << side << " #" << t << " dim " << d << " names factor " << f
               << " of " << n;
            return false;
          }
          used[f] = true;
          if (side == "result")
            inResult[f] = true;
          product *= factors[f].size;
        }
        if (product != type.getDimSize(d)) {
          os << side << " #" << t << " dim " << d << " has size "
             << type.getDimSize(d) << " but its factors multiply to "
             << product;
          return false;
        }
      }
    }
    return true;
  };
  if (!checkTensors(operands, op->getOperandTypes(), "operand") ||
      !checkTensors(results, op->getResultTypes(), "result"))
    return message;
  for (int64_t f = 0; f < n; ++f) {
    const Factor &factor = factors[f];
    std::string name = factorName(f, n);
    if (factor.size <= 0)
      os << "factor " << name << " has non-positive size " << factor.size;
    else if (!used[f])
      os << "factor " << name << " is not used by any dimension";
    else if (factor.kind == FactorKind::Reduction && inResult[f])
      os << "reduction factor " << name << " appears in a result";
    else if (factor.kind == FactorKind::Reduction &&
             factor.combiner == FactorCombiner::None)
      os << "reduction factor " << name << " has no combiner";
    else if (factor.kind == FactorKind::PassThrough &&
             factor.combiner != FactorCombiner::None &&
             factor.combiner != FactorCombiner::Internal)
      os << "pass-through factor " << name << " has a combiner other than "
         << "internal";
    else if (factor.kind != FactorKind::Reduction &&
             factor.kind != FactorKind::PassThrough &&
             factor.combiner != FactorCombiner::None)
      os << "factor " << name << " is not a reduction but has a combiner";
    else if (factor.link >= 0 && (factor.kind != FactorKind::Permutation ||
                                  factors[factor.link].link != factor.link))
      os << "linked factor " << name
         << " is not a permutation of a well-formed group";
    if (!message.empty())
      return message;
  }
  return message;
}

ShardingRule mlir::par::buildElementwiseRule(Operation *op) {
  ShardingRule rule(op);
  auto shaped = cast<RankedTensorType>(op->getResult(0).getType());
  for (int64_t d = 0; d < shaped.getRank(); ++d) {
    int64_t factor = rule.addFactor(shaped.getDimSize(d));
    for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
      if (rankOf(type) == shaped.getRank())
        rule.mapOperand(i, d, factor);
    for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
      if (rankOf(type) == shaped.getRank())
        rule.mapResult(i, d, factor);
  }
  return rule;
}

int64_t ShardingRule::pointsPerDevice(ArrayRef<int64_t> shards) const {
  int64_t points = 1;
  auto perDevice = [&](int64_t f) {
    int64_t n = (size_t)f < shards.size() ? std::max<int64_t>(shards[f], 1) : 1;
    return (factors[f].size + n - 1) / n;
  };
  for (auto [f, factor] : llvm::enumerate(factors)) {
    // A link group is one index space: its largest view counts, once.
    if (factor.link >= 0 && factor.link != (int64_t)f)
      continue;
    int64_t most = 0;
    for (int64_t member : linkGroup(f))
      most = std::max(most, perDevice(member));
    points *= most;
  }
  return points;
}

double mlir::par::paddingIdentity(FactorCombiner combiner) {
  switch (combiner) {
  case FactorCombiner::Sum:
    return 0.0;
  case FactorCombiner::Max:
    return -std::numeric_limits<double>::infinity();
  case FactorCombiner::Min:
    return std::numeric_limits<double>::infinity();
  case FactorCombiner::None:
  case FactorCombiner::Internal:
    break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

int64_t ShardingRule::positionalDim(unsigned operand) const {
  for (auto [d, dimFactors] : llvm::enumerate(operands[operand]))
    for (int64_t factor : dimFactors)
      if (factors[factor].positional)
        return int64_t(d);
  return -1;
}
