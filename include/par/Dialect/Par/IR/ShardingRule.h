//===- ShardingRule.h - per-op factor mappings ------------------*- C++ -*-===//
//
// A sharding rule is an einsum-like mapping of an op's operand and result
// dimensions onto factors. Every factor has a size and a kind; a dimension
// holds zero or more factors, major to minor, whose sizes multiply to the
// dimension size (size-1 dimensions may hold none). Propagation, partitioning,
// the cost model and auto-sharding read these rules and nothing else about
// how an op may be split.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_DIALECT_PAR_IR_SHARDINGRULE_H
#define PAR_DIALECT_PAR_IR_SHARDINGRULE_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace mlir {
class Operation;
namespace par {

enum class FactorKind {
  /// Sharding the factor splits operands and results alike; no communication.
  PassThrough,
  /// Contracted or reduced away: absent from results. Sharding it leaves the
  /// results partial (combined by the factor's combiner).
  Reduction,
  /// The op cannot run with the factor sharded: it must be replicated.
  NeedReplication,
  /// One index space that the op moves elements along (slice, pad and
  /// concat along a dim): the factors of a link group are its views on each
  /// tensor, of their own sizes. Sharding the group splits every member over
  /// the same axes, and the op's local form moves the elements that cross
  /// shard boundaries. An unlinked permutation factor is never split.
  Permutation,
};

/// How partial results over a reduction factor's axes are combined.
enum class FactorCombiner {
  None,
  Sum,
  Max,
  Min,
  /// The op's partitioned form reduces over the factor itself (with small
  /// collectives inside); its results are complete, not partial. On a
  /// reduction factor (cross_entropy's vocabulary) the factor leaves the
  /// results; on a pass-through one (the normalized dim of softmax and the
  /// norms) the results keep its split and only row statistics travel.
  Internal,
};

struct Factor {
  int64_t size;
  FactorKind kind;
  FactorCombiner combiner;
  /// The op's result depends on an element's index along this factor (the
  /// position in a sequence, for rope and causal attention): a split of it
  /// makes each device's local form offset its positions.
  bool positional = false;
  /// The first factor of this factor's link group (itself for that one), or
  /// -1 when unlinked (ShardingRule::linkFactors).
  int64_t link = -1;
};

/// The value padding must hold so that it does not change a reduction with
/// `combiner`: 0 for sums, -inf for max, +inf for min (NaN for None and
/// Internal, whose op knows its own).
double paddingIdentity(FactorCombiner combiner);

/// Factor ids of one dimension, major to minor.
using DimFactors = llvm::SmallVector<int64_t, 2>;
/// Per-dimension factor ids of one operand or result.
using TensorFactors = llvm::SmallVector<DimFactors, 4>;

class ShardingRule {
public:
  /// An empty rule with one (dimension-less) mapping per operand and result
  /// of `op`, sized to their ranks.
  explicit ShardingRule(Operation *op);

  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::PassThrough,
                    FactorCombiner combiner = FactorCombiner::None);
  /// Appends `factor` (minor-most so far) to operand `operand`'s `dim`.
  void mapOperand(unsigned operand, int64_t dim, int64_t factor);
  void mapResult(unsigned result, int64_t dim, int64_t factor);
  /// Adds a pass-through factor of the dimension's size shared by every
  /// listed (tensor, dim) pair; returns its id.
  int64_t addSharedFactor(int64_t size,
                          ArrayRef<std::pair<unsigned, int64_t>> operandDims,
                          ArrayRef<std::pair<unsigned, int64_t>> resultDims,
                          FactorKind kind = FactorKind::PassThrough,
                          FactorCombiner combiner = FactorCombiner::None);

  /// Puts permutation factor `other` in `factor`'s link group: both views of
  /// one index space (a slice's operand and result dim, each operand's and
  /// the result's concatenated dim), split alike.
  void linkFactors(int64_t factor, int64_t other);
  /// The factors of `factor`'s link group (just `factor` when unlinked).
  SmallVector<int64_t, 4> linkGroup(int64_t factor) const;

  /// Marks `factor` positional (Factor::positional).
  void markPositional(int64_t factor) { factors[factor].positional = true; }
  /// The dim of operand `operand` that holds a positional factor, or -1.
  int64_t positionalDim(unsigned operand) const;

  ArrayRef<Factor> getFactors() const { return factors; }
  const Factor &getFactor(int64_t id) const { return factors[id]; }
  int64_t getNumFactors() const { return factors.size(); }
  ArrayRef<TensorFactors> getOperandMappings() const { return operands; }
  ArrayRef<TensorFactors> getResultMappings() const { return results; }

  /// Checks the rule against the op's shapes: factor sizes multiply to each
  /// dimension's size, every factor is used, reduction factors appear in no
  /// result and only reduction factors carry a combiner (pass-through ones
  /// may be internal). Returns a message
  /// describing the first problem, or an empty string.
  std::string check(Operation *op) const;

  /// The op's iteration space on one device when factor f is split into
  /// `shards[f]` pieces (1 for every factor when empty): the product of the
  /// factor sizes, each rounded up (padding computes too). An op's work
  /// (ShardingRuleOpInterface::getWork) scales with it.
  int64_t pointsPerDevice(ArrayRef<int64_t> shards = {}) const;

  /// Prints `([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16 reduction(sum)}`.
  void print(llvm::raw_ostream &os) const;
  std::string str() const;
  /// Name under which `print` shows factor `id`.
  static std::string factorName(int64_t id, int64_t numFactors);

private:
  SmallVector<Factor> factors;
  SmallVector<TensorFactors> operands;
  SmallVector<TensorFactors> results;
};

inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                                     const ShardingRule &rule) {
  rule.print(os);
  return os;
}

llvm::StringRef stringifyFactorKind(FactorKind kind);
llvm::StringRef stringifyFactorCombiner(FactorCombiner combiner);

/// Rule shared by all elementwise ops: one pass-through factor per dimension,
/// common to every operand and result of matching rank (0-d operands such as
/// a learning rate hold no factor).
ShardingRule buildElementwiseRule(Operation *op);

} // namespace par
} // namespace mlir

#endif // PAR_DIALECT_PAR_IR_SHARDINGRULE_H
