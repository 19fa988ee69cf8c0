//===- ReshardPlan.h - collective sequences between two layouts -*- C++ -*-===//
//
// Plans how a value moves from one sharding to another as a sequence of
// collectives. Pure data over mesh axis indices: the partitioner turns each
// step into one collective op, the cost model and reports read the steps.
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_RESHARDPLAN_H
#define PAR_TRANSFORMS_RESHARDPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <string>

namespace mlir::par {

/// How a value is laid out over a mesh: per tensor dim the mesh axes that
/// split it (major to minor), and the axes it is an unreduced partial over.
/// Axes are indices into the mesh.
struct ReshardLayout {
  llvm::SmallVector<llvm::SmallVector<int32_t, 2>, 4> dims;
  llvm::SmallVector<int32_t, 2> partial;

  bool operator==(const ReshardLayout &other) const {
    return dims == other.dims && partial == other.partial;
  }
};

enum class ReshardStepKind {
  AllReduce,     // resolve partial axes; everyone gets the sum
  ReduceScatter, // resolve partial axes and split `dim` over them
  AllGather,     // remove minor axes from `dim`
  AllSlice,      // append axes to `dim` (local slice, no traffic)
  AllToAll,      // move minor axes from `fromDim` to the end of `dim`
  Permute,       // replace the minor axis of `dim`, axes = {old, new}
  Exchange,      // any layout to any other, moving only what devices lack
};

struct ReshardStep {
  ReshardStepKind kind;
  llvm::SmallVector<int32_t, 2> axes;
  int64_t dim = -1;
  int64_t fromDim = -1;
  /// Permute only: source -> target group indices, row-major over `axes`.
  llvm::SmallVector<int64_t> pairs;
  /// The layout after this step.
  ReshardLayout after;
  /// Exchange only: the layouts before and after over positions in `axes`
  /// (par::exchange::flatten's form).
  llvm::SmallVector<int64_t> source, target;
};

struct ReshardPlan {
  llvm::SmallVector<ReshardStep, 2> steps;
  /// Set when data is gathered on a dim and then partly sliced away again
  /// (no cheaper sequence of the steps above exists); says which dim and axes.
  std::string gatherThenSlice;
};

/// Plans the move of a tensor of global `shape` from `from` to `to` on a mesh
/// with `axisSizes`. Both layouts must divide `shape` evenly. Fails (setting
/// `error`) when `to` is partial over axes `from` is not: partial values come
/// only from the ops that make them. Partial sums are reduce-scattered into
/// the dims that want their axes (or all-reduced where that sends fewer
/// bytes, docs/partitioning.md). Once partial sums are resolved, the
/// rest is the cheaper of the collective sequence (all-to-all, permute,
/// gather, slice) and one exchange, which moves the least any plan can: the
/// sequence wins ties.
bool planReshard(llvm::ArrayRef<int64_t> axisSizes,
                 llvm::ArrayRef<int64_t> shape, const ReshardLayout &from,
                 const ReshardLayout &to, ReshardPlan &plan,
                 std::string &error);

/// planReshard with its answers kept: a move planned again (every layer of
/// a model reshards alike) is looked up instead of searched.
class ReshardPlanCache {
public:
  bool plan(llvm::ArrayRef<int64_t> axisSizes, llvm::ArrayRef<int64_t> shape,
            const ReshardLayout &from, const ReshardLayout &to,
            ReshardPlan &plan, std::string &error);

private:
  struct Answer {
    bool planned;
    ReshardPlan plan;
    std::string error;
  };
  llvm::StringMap<Answer> answers;
};

/// Name of a step kind as the collective op spells it (all_reduce, ...).
const char *stringifyReshardStep(ReshardStepKind kind);

/// The per-device shape of a tensor of global `shape` laid out as `layout`
/// (each dim rounded up: uneven splits are padded).
llvm::SmallVector<int64_t> localShape(llvm::ArrayRef<int64_t> axisSizes,
                                      llvm::ArrayRef<int64_t> shape,
                                      const ReshardLayout &layout);

/// What a plan moves per device, computed without building IR with the
/// one traffic formula of the collectives (the catalogue's
/// collectiveTraffic): the collectives that communicate, the elements moved
/// (an all-reduce twice its buffer) and the bytes one rank sends.
struct ReshardCost {
  int64_t collectives = 0, movedElements = 0, sentBytes = 0;
  /// Per step that communicates (and per local slice, which copies): its
  /// kind and axes, the devices in each of its groups, the larger of its
  /// per-device buffers before and after, and the bytes one rank sends
  /// (what a time model prices).
  struct Step {
    ReshardStepKind kind;
    llvm::SmallVector<int32_t, 2> axes;
    int64_t group = 1, bufferBytes = 0, sentBytes = 0;
    /// A gather or reduce-scatter along a dim with dims of more than one
    /// element before it (a bucket packs shards as rows, so the value is
    /// transposed into them, or its result back).
    bool innerDim = false;
  };
  llvm::SmallVector<Step, 2> steps;
};
ReshardCost reshardCost(llvm::ArrayRef<int64_t> axisSizes,
                        llvm::ArrayRef<int64_t> shape, int64_t elementBytes,
                        const ReshardLayout &from, const ReshardPlan &plan);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_RESHARDPLAN_H
